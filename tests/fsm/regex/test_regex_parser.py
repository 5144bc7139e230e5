"""Regex text → tree: the language equals Python's re (full match and search semantics)."""

from __future__ import annotations

import random
import re

import pytest

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.errors import GrammarError
from radixlm.fsm.grammars.json.strings import ANY_CHAR
from radixlm.fsm.regex import tree as ra
from radixlm.fsm.regex.parser import regex_to_node, search_node

PATTERNS = [r"cat|dog", r"^ab", r"a(b|c)*d", r"[a-c]{2,3}x?", r"(?:ab)+|c{0,2}", r"\d{3}-\d{2}",
            r"[^a-c]*", r"\w+@\w+\.com", r"a.c", r"[\]a]", r"x{,2}", r"(a|b)?(c|)", r"\.json$",
            r"^a$|^b$", r"^(a|b)c$", r"[-a]", r"[a-]", r"\x41\u0042", r"[\w-]+", r"a{2}",
            r"(?P<n>a)b", r"[\\d]", r"a{1}b{0}", r"(?#note)ab", r"a+?b*?", r"\S\s\D"]
ALPHABET = "abcdx-@.jsonABC0123_ \n]\\{},"


def _strings(seed: int, n: int = 1500) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) for _ in range(n)]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_full_match_agrees_with_python(pattern: str) -> None:
    node = regex_to_node(pattern)
    builder = TermBuilder()
    term, rendered, python = builder.lower(node), ra.render(node), re.compile(pattern, re.ASCII)
    for s in _strings(len(pattern)):
        if "$" in pattern and s.endswith("\n"):
            continue  # Python's $ also matches before a final newline; ECMA's does not
        want = bool(python.fullmatch(s))
        assert builder.matches(term, s.encode()) == want, (pattern, s)
        assert bool(re.fullmatch(rendered, s)) == want, (pattern, s, rendered)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_search_semantics_agrees_with_python(pattern: str) -> None:
    builder = TermBuilder()
    term = builder.lower(search_node(pattern, ANY_CHAR))
    python = re.compile(pattern, re.ASCII)
    for s in _strings(len(pattern) + 7):
        if "$" in pattern and s.endswith("\n"):
            continue
        assert builder.matches(term, s.encode()) == bool(python.search(s)), (pattern, s)


@pytest.mark.parametrize("pattern, message", [
    (r"(?=a)", "lookaround"), (r"\1", "backreferences"), (r"a\bb", "word boundaries"),
    (r"(?i)a", "inline flags"), (r"a^b", r"'\^' in the middle"), (r"(^a)*", "anchor"),
    (r"a++", "possessive"), (r"\p{L}", "Unicode property"), (r"(a", r"missing '\)'"),
    (r"a)", "unbalanced"), (r"[a", "unterminated"), (r"*a", "nothing to repeat"),
    (r"[z-a]", "reversed"), (r"\xZZ", "bad hex"),
])
def test_unsupported_constructs_are_named(pattern: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        regex_to_node(pattern)


def test_ecma_dot_excludes_line_terminators() -> None:
    builder = TermBuilder()
    term = builder.lower(regex_to_node(".", dialect="ecma"))
    assert builder.matches(term, b"a")
    assert not builder.matches(term, b"\r")
    assert not builder.matches(term, "\u2028".encode())
