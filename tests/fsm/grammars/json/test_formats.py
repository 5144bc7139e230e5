"""Format regexes: everything they accept passes jsonschema's format checker; common spellings
are accepted."""

from __future__ import annotations

import random

import jsonschema
import pytest

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import DEAD, LazyDFA
from radixlm.fsm.grammars.json.formats import SUPPORTED_FORMATS, format_node

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER

EXAMPLES = {
    "date": (["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01"],
             ["2023-02-29", "1900-02-29", "2023-13-01", "2023-04-31", "0000-01-01", "2023-1-1"]),
    "time": (["12:30:00Z", "23:59:59.123+02:00", "00:00:00-11:30"], ["24:00:00Z", "12:30:00"]),
    "date-time": (["2022-01-01T12:00:00Z", "2024-02-29T00:00:00.5+01:00"],
                  ["2022-01-01 12:00:00Z", "2022-01-01T12:00:00"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
    "ipv4": (["192.168.0.1", "0.0.0.0", "255.255.255.255"], ["256.1.1.1", "01.2.3.4", "1.2.3"]),
    "ipv6": (["::1", "2001:db8::8a2e:370:7334", "fe80::", "::ffff:192.0.2.1",
              "1:2:3:4:5:6:7:8"], ["1:2:3:4:5:6:7:8:9", ":::", "12345::"]),
    "hostname": (["example.com", "a-b.c", "localhost", "x" * 63], ["-a.com", "a_b.com",
                                                                     "x" * 64]),
    "email": (["john.doe@example.com", "a+b@c.d"], ["plainaddress"]),
    "uri": (["https://example.com/path?q=1#frag", "urn:isbn:0451450523", "mailto:a@b.c"],
            ["//no-scheme", "http://exa mple.com"]),
    "uri-reference": (["/relative/path", "../x?y", "https://a.b", ""], ["http://a b"]),
    "json-pointer": (["", "/a/b~0c/~1"], ["a/b", "/~2"]),
    "relative-json-pointer": (["0", "1/a", "2#"], ["01", "-1"]),
    "duration": (["P1Y2M3DT4H5M6S", "PT1H", "P3W", "P1D"], ["P", "PT", "1Y"]),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples(name: str) -> None:
    builder = TermBuilder()
    term = builder.lower(format_node(name))
    good, bad = EXAMPLES[name]
    for text in good:
        assert builder.matches(term, text.encode()), (name, text)
        assert CHECKER.conforms(text, name), (name, text)
    for text in bad:
        assert not builder.matches(term, text.encode()), (name, text)


@pytest.mark.parametrize("name", sorted(SUPPORTED_FORMATS))
def test_random_accepted_strings_conform(name: str) -> None:
    """Random walks through the format automaton end in strings the checker accepts."""
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(format_node(name)))
    rng = random.Random(name)
    for _ in range(150):
        state, out = dfa.initial, bytearray()
        for _ in range(rng.randint(1, 80)):
            choices = [b for b in range(256) if dfa.step(state, b) != DEAD]
            if not choices or (dfa.accepting[state] and rng.random() < 0.15):
                break
            byte = rng.choice(choices)
            out.append(byte)
            state = dfa.step(state, byte)
        if dfa.accepting[state]:
            text = out.decode("utf-8")
            assert CHECKER.conforms(text, name), (name, text)


def test_draft_format_table_matches_jsonschema() -> None:
    """Our fixed per-draft table names exactly the formats jsonschema checks (with its format
    extras installed, as the package requires), draft by draft."""
    from radixlm.fsm.grammars.json.formats import DRAFT_FORMATS

    for name, formats in DRAFT_FORMATS.items():
        checker = getattr(jsonschema, name).FORMAT_CHECKER
        assert formats == frozenset(checker.checkers), name


def test_unsupported_format_is_named_without_its_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A format the draft defines stays enforced-or-refused even where jsonschema lacks the
    optional package that checks it (it must not become a silent annotation)."""
    from radixlm.fsm import GrammarError
    from radixlm.fsm.grammars.json import json_schema_to_node

    checkers = dict(CHECKER.checkers)
    checkers.pop("uri-template")
    monkeypatch.setattr(CHECKER, "checkers", checkers)
    with pytest.raises(GrammarError, match="uri-template"):
        json_schema_to_node({"type": "string", "format": "uri-template"})
