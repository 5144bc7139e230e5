"""``rfc3987_syntax`` loaded on its first use, not when ``jsonschema`` is imported.

``jsonschema`` (with the ``format-nongpl`` extra radixlm depends on) imports
``rfc3987_syntax`` at its own import to check the ``iri`` and ``iri-reference`` formats, and
that module builds its Lark parser at import time: ~2.5 s of CPU in every process that
imports the fsm (each engine's scheduler at start-up), for two formats few schemas use.

:func:`defer_iri_syntax`, called before ``jsonschema`` is first imported, puts a stand-in
module in ``sys.modules`` whose ``is_valid_syntax`` (the one name ``jsonschema`` imports)
loads the real module on its first call and then defers to it. So the verdicts are the real
module's, only the cost moves to the first ``iri`` value validated. Where ``jsonschema`` was
imported before, or the package is not installed, it does nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

_NAME = "rfc3987_syntax"
_lock = threading.Lock()


def _load_real() -> types.ModuleType:
    """The real module, imported once (the stand-in leaves ``sys.modules`` meanwhile)."""
    with _lock:
        module = sys.modules.get(_NAME)
        if module is not None and not getattr(module, "_radixlm_stand_in", False):
            return module
        del sys.modules[_NAME]
        try:
            return importlib.import_module(_NAME)
        except BaseException:
            sys.modules[_NAME] = module  # keep the stand-in: the next call tries again
            raise


def _is_valid_syntax(*args: Any, **kwargs: Any) -> Any:
    return _load_real().is_valid_syntax(*args, **kwargs)


def _other_name(name: str) -> Any:
    """Any other public name: the real module's. Dunder names stay the stand-in's (the
    import system asks for ``__path__`` on every ``from ... import``)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_load_real(), name)


def defer_iri_syntax() -> bool:
    """Install the stand-in (see the module docstring); True if it was installed."""
    if "jsonschema" in sys.modules or _NAME in sys.modules:
        return False
    spec = importlib.util.find_spec(_NAME)
    if spec is None:
        return False
    stand_in = types.ModuleType(_NAME, "radixlm's stand-in: the real module loads on first use")
    stand_in.__spec__ = spec  # find_spec() on it still finds the real one
    stand_in.is_valid_syntax = _is_valid_syntax
    stand_in.__getattr__ = _other_name
    stand_in._radixlm_stand_in = True
    sys.modules[_NAME] = stand_in
    return True
