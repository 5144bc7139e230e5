"""Backends: where a program's requests go (the only way ``lang`` reaches a runtime)."""
