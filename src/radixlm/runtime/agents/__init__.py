"""Agent output handling, pure (no engine state): tool-call parsers per model family, the
reasoning parser, the generic tool prompt and the grammar for forced tool calls.

Imports only :mod:`radixlm.fsm` (the forced tool-call grammar); nothing of the engine, so the
API stage, ``server_args`` and ``lang`` can all use it.
"""
