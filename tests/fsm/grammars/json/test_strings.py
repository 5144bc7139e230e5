"""JSON strings: escapes, lengths counted in decoded characters, patterns, formats."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import GrammarError
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node
from radixlm.fsm.grammars.json.strings import StringEncoder, json_unit
from radixlm.fsm.regex import tree as ra

CASES = {
    "escapes are legal": ({"type": "string"}, ['"a\\"b"', '"\\\\"', '"\\n\\t\\/"',
                                               '"\\u001f"', '"é😀"'],
                          ['"a"b"', '"\\x"', '"\n"', '"\\u00"']),
    "length counts decoded characters": ({"type": "string", "minLength": 2, "maxLength": 2},
                                         ['"ab"', '"\\n\\""', '"😀é"'], ['"a"', '"abc"']),
    "pattern sees decoded text": ({"type": "string", "pattern": '^a"b$'}, ['"a\\"b"'],
                                  ['"ab"']),
    "pattern with a class including quote": ({"type": "string", "pattern": '^["x]+$'},
                                             ['"\\"x"'], ['"y"']),
    "pattern and length intersect": ({"type": "string", "pattern": "^[a-z]+x$",
                                      "maxLength": 3}, ['"abx"', '"ax"'],
                                     ['"abcx"', '"ab"', '"x"']),
    "two patterns via allOf": ({"allOf": [{"type": "string", "pattern": "a"},
                                          {"pattern": "b"}]}, ['"ab"', '"xbya"'], ['"aa"']),
    "format and length": ({"type": "string", "format": "date", "maxLength": 10},
                          ['"2020-01-01"'], ['"2020-1-1"']),
    "unicode pattern": ({"type": "string", "pattern": "^[é-ë]{2}$"}, ['"éë"'], ['"ée"']),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_string_keywords(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)


@pytest.mark.parametrize("char, spellings", [
    ('"', ['\\"']), ("\\", ["\\\\"]), ("/", ["/", "\\/"]), ("\n", ["\\n"]),
    ("\x01", ["\\u0001"]), ("\x1f", ["\\u001f", "\\u001F"]), ("a", ["a"]),
])
def test_unit_spellings(char: str, spellings: list[str]) -> None:
    builder = TermBuilder()
    term = builder.lower(json_unit(((ord(char), ord(char)),)))
    accepted = [s for s in ["a", '"', '\\"', "\\\\", "/", "\\/", "\\n", "\n", "\\u0001",
                            "\\u001f", "\\u001F", "\x01"] if builder.matches(term, s.encode())]
    assert accepted == spellings


def test_encoder_memoises_shared_nodes() -> None:
    encoder = StringEncoder()
    shared = ra.lit("ab")
    assert encoder.encode(shared) is encoder.encode(shared)


LOOKAHEADS = {
    "negative": ({"type": "string", "pattern": "^(?!@@)[@a-z]+$"}, ['"a@"', '"@a"', '"ab"'],
                 ['"@@a"', '"@@"', '"A"']),
    "positive with an end anchor inside": (
        {"type": "string", "pattern": "^(?=.{2,3}$)[a-z]+"}, ['"ab"', '"abc"'],
        ['"a"', '"abcd"', '"1ab"']),
    "two in a row": ({"type": "string", "pattern": "^(?!org\\.)(?!com\\.)[a-z.]*$"},
                     ['"net.x"', '"or"', '""'], ['"org.x"', '"com."']),
    "as property names": ({"type": "object", "propertyNames": {"pattern": "^(?!x-)"}},
                          ['{"a":1}', '{"x":1}'], ['{"x-a":1}']),
    "in patternProperties": ({"type": "object", "additionalProperties": False,
                              "patternProperties": {"^(?!_)\\w+$": {"type": "integer"}}},
                             ['{"a":1}', '{"a_b":2}'], ['{"_a":1}', '{"a":"s"}']),
    "tempered: no match starts anywhere": (
        {"type": "string", "pattern": "^((?!mode)(?!Mode).)*$"},
        ['"abc"', '"mod e"', '""', '"MODE"'], ['"xmode"', '"Mode"', '"a\\nb"', '"modee"']),
    "tempered over a class": ({"type": "string", "pattern": "^(?:(?!ab)[a-z])*$"},
                              ['"ba"', '"bba"', '""'], ['"ab"', '"cab"', '"A"']),
    "trailing positive": ({"type": "string", "pattern": "((?:[^/]*/)*)(?=\\.(yaml|yml|json))"},
                          ['"a/b.yaml"', '"x.json"', '".ymlz"'], ['"a.txt"', '"yaml"', '""']),
    "trailing positive under |": ({"type": "string", "pattern": "a|b(?=c)"},
                                  ['"a"', '"bc"', '"xbcx"'], ['"b"', '"bd"', '""']),
}

REWRITTEN = ["^((?!mode)(?!Mode).)*$", "^(?:(?!ab)[a-z])*$", "^((?!a.b)[^x])*$",
             "a|b(?=c)", "[bd](?=m[^e])", "(?=ab)"]


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(REWRITTEN),
       # no final newline: Python's $ (jsonschema's) also matches before one, ECMA's does not
       text=st.text(alphabet="abdemoMx\n", max_size=8).filter(lambda t: not t.endswith("\n")))
def test_rewritten_lookaheads_agree_with_jsonschema(judged_automaton,  # noqa: ANN001
                                                    pattern: str, text: str) -> None:
    assert judged_automaton({"type": "string", "pattern": pattern}, text)


@pytest.mark.parametrize("name", sorted(LOOKAHEADS))
def test_leading_lookaheads(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = LOOKAHEADS[name]
    check_schema(schema, valid, invalid)


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "a(?!b)"},  # not leading
    {"type": "string", "pattern": "^(?!a)b|c"},  # a top-level | the lookahead does not cover
    {"type": "string", "pattern": "^((?!a*).)*$"},  # tempered, but the lookahead matches ""
    {"type": "string", "pattern": "^((?!a)bc)*$"},  # tempered over two characters
    {"type": "string", "pattern": "a(?=b)c"},  # a positive lookahead before more pattern
    {"type": "string", "not": {"pattern": "^(?!a)b"}},  # negated: a union, not one regex
])
def test_other_lookarounds_refused_by_name(schema: dict) -> None:
    with pytest.raises(GrammarError, match="lookaround|lookahead"):
        json_schema_to_node(schema, JsonSchemaOptions())
