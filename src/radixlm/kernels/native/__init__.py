"""Optional native CPU kernels: one C file per kernel family, built by ``pip install``.

``setup.py`` compiles each ``<name>.c`` here into the module ``radixlm.kernels.native.<name>``
when a C compiler is present (the build is optional, so an install without one still works).
Python code never imports those modules directly: it calls :func:`load`, which returns the
module or ``None``, and offers the native kernel as one more measured candidate only when it
loaded and the CPU has the instructions it needs.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def load(name: str) -> ModuleType | None:
    """The built native module ``name``, or ``None`` when it was not built (no compiler)."""
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None
