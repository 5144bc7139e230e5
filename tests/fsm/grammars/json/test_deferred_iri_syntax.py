"""``rfc3987_syntax`` (jsonschema's ``iri`` checks) loads on first use, with the same
verdicts: importing the fsm no longer builds its parser."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

# In a fresh interpreter: the fsm's import leaves the real module unloaded; the first iri
# value validated loads it, and every verdict is the real module's.
SCRIPT = r"""
import sys
import radixlm.fsm  # noqa: F401
import jsonschema
assert "rfc3987_syntax.syntax_helpers" not in sys.modules, "parser built at import"
assert sys.modules["rfc3987_syntax"]._radixlm_stand_in
cls = jsonschema.Draft202012Validator
values = ["http://example.com/a", "http://ex\u00e4mple.com/\u00fc", "http://ex.com/a b", "::",
          "urn:isbn:0451450523", "", "//host/path", "a:b#c"]
got = [cls({"format": f}, format_checker=cls.FORMAT_CHECKER).is_valid(v)
       for f in ("iri", "iri-reference") for v in values]
import rfc3987_syntax
assert not getattr(rfc3987_syntax, "_radixlm_stand_in", False), "the real module replaced it"
want = [rfc3987_syntax.is_valid_syntax(rule, v)
        for rule in ("iri", "iri_reference") for v in values]
assert got == want, (got, want)
assert True in got and False in got
print("ok")
"""


def test_the_real_module_loads_on_first_use_with_its_verdicts() -> None:
    if importlib.util.find_spec("rfc3987_syntax") is None:
        pytest.skip("rfc3987_syntax is not installed (jsonschema's format-nongpl extra)")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
