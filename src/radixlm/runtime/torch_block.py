"""Keeping torch out of a server process that never computes with it (the detokenizer).

transformers imports torch whenever it is installed (``AutoTokenizer`` -> its configuration
module -> its rope utilities), about 220 MiB of RSS in a fresh process, though a tokenizer
never uses it. Python's own way to make a module unimportable is a ``None`` entry in
``sys.modules``: ``importlib.util.find_spec`` then reports the package absent, so transformers
takes its torch-less path and ``AutoTokenizer`` gives the same tokenizer (same class, same Rust
backend, same text).

For a process entry point only: the block is process-wide and lasts (transformers decides at
import whether torch exists), so it is never set in a process where torch or transformers is
already imported (a test calling the entry point in-process, a user's process).
"""

from __future__ import annotations

import os
import sys

BLOCKED = "torch"
# transformers' own switch for its advice-level warnings, here "PyTorch was not found" at import
QUIET = "TRANSFORMERS_NO_ADVISORY_WARNINGS"


def block_torch() -> bool:
    """Make ``import torch`` fail in this process from now on; True when blocked, False (and
    nothing done) where torch or transformers is already imported."""
    if BLOCKED in sys.modules or "transformers" in sys.modules:
        return sys.modules.get(BLOCKED, False) is None
    sys.modules[BLOCKED] = None  # type: ignore[assignment] - the documented import block
    previous = os.environ.get(QUIET)
    os.environ[QUIET] = "1"  # the advice is expected here: imported now, without it
    try:
        import transformers  # noqa: F401
    finally:
        if previous is None:
            del os.environ[QUIET]
        else:
            os.environ[QUIET] = previous
    return True
