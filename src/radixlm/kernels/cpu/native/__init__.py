"""Optional native CPU kernels: one C file per kernel family, built by ``pip install``.

``setup.py`` compiles each ``<name>.c`` here into the module ``radixlm.kernels.cpu.native.<name>``
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


def unavailable_reason(module: ModuleType | None, name: str, needs: str) -> str:
    """Why the native module ``name`` (as :func:`load` returned it) cannot run here, or ``""``
    when it can. ``needs``: the CPU features its ``supported()`` checks, for the message."""
    if module is None:
        return (f"radixlm.kernels.cpu.native.{name} is not built: run "
                "`python setup.py build_ext --inplace` (needs a C compiler)")
    return "" if module.supported() else f"{name} needs a CPU with {needs}; this one lacks it"


def require(module: ModuleType | None, name: str, needs: str) -> ModuleType:
    """``module`` if it can run here, else a RuntimeError naming the reason and the remedy."""
    reason = unavailable_reason(module, name, needs)
    if reason or module is None:
        raise RuntimeError(reason)
    return module
