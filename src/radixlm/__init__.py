"""radixlm: a structured-generation language and serving runtime for LLMs."""

from .version import __version__

__all__ = ["__version__"]
