"""EBNF grammars: random walks through the compiled automaton always parse with ``lark``.

Each grammar is written twice: in our GBNF syntax and as the reference parser's (lark, Earley)
grammar. Walks sample uniformly among allowed tokens (random logits), so they explore odd
corners (empty fields, deep nesting) a model would rarely produce. Recursive grammars are
refused by name unless a recursion depth is given; then nesting stops at that depth.
"""

from __future__ import annotations

import re

import pytest
import torch

from radixlm.fsm import GrammarError, GrammarSpec
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.grammars.ebnf import EbnfOptions, ebnf_to_node
from radixlm.fsm.regex import tree as ra
from radixlm.testing.grammar_walk import random_walk

lark = pytest.importorskip("lark", reason="lark (test extra) is the reference parser")

ARITHMETIC = r"""
root   ::= expr
expr   ::= term (ws ("+" | "-") ws term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]{1,3} ("." [0-9]{1,2})?
ws     ::= " "?
"""
ARITHMETIC_LARK = r"""
start: expr
expr: term (WS? ("+" | "-") WS? term)*
term: factor (("*" | "/") factor)*
factor: NUMBER | "(" expr ")" | "-" factor
NUMBER: /[0-9]{1,3}(\.[0-9]{1,2})?/
WS: " "
"""

CSV = r"""
root  ::= field ("," field){0,5} "\n"
field ::= plain | quoted
plain ::= [^,"\n]{0,6}
quoted ::= "\"" ([^"\n] | "\"\""){0,6} "\""
"""
CSV_LARK = r"""
start: field ("," field)* "\n"
field: PLAIN? | QUOTED
PLAIN: /[^,"\n]{1,6}/
QUOTED: /"([^"\n]|"")*"/
"""

COMMANDS = r"""
# a tiny robot language: one command per line
root    ::= command ("\n" command){0,3}
command ::= move | say | repeat
move    ::= ("go" | "turn") " " dir (" " count)?
dir     ::= "north" | "south" | "east" | "west" | "left" | "right"
count   ::= [1-9] [0-9]?
say     ::= "say " "'" [a-z ]{1,10} "'"
repeat  ::= "repeat " count " { " (move | say) ("; " (move | say)){0,2} " }"
"""
COMMANDS_LARK = r"""
start: command ("\n" command)*
command: move | say | repeat
move: ("go" | "turn") " " DIR (" " COUNT)?
DIR: "north" | "south" | "east" | "west" | "left" | "right"
COUNT: /[1-9][0-9]?/
say: "say '" /[a-z ]{1,10}/ "'"
repeat: "repeat " COUNT " { " (move | say) ("; " (move | say))* " }"
"""

GRAMMARS = {"arithmetic": (ARITHMETIC, ARITHMETIC_LARK, 3), "csv": (CSV, CSV_LARK, 0),
            "commands": (COMMANDS, COMMANDS_LARK, 0)}


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_walks_parse_with_lark(compiler, tokenizer, vocab, name: str) -> None:  # noqa: ANN001
    ours, reference, depth = GRAMMARS[name]
    parser = lark.Lark(reference, parser="earley", lexer="dynamic")
    grammar = compiler.compile(GrammarSpec.ebnf(ours, max_recursion_depth=depth))
    gen = torch.Generator().manual_seed(len(name))
    for _ in range(12):
        text, _ = random_walk(grammar, tokenizer, vocab, gen, close_after=60)
        parser.parse(text)  # raises on any output outside the grammar


def test_nesting_is_bounded_by_the_depth() -> None:
    node = ebnf_to_node(ARITHMETIC, EbnfOptions(max_recursion_depth=2))
    builder = TermBuilder()
    term = builder.lower(node)
    assert builder.matches(term, b"((1))")
    assert not builder.matches(term, b"(((1)))")  # a third level is past the depth
    assert not builder.matches(term, b"(1")


@pytest.mark.parametrize("grammar, rule", [
    (ARITHMETIC, "expr"),
    ('root ::= list\nlist ::= "a" list | "a"', "list"),
    ('root ::= "[" root "]" | ""', "root"),
])
def test_recursion_refused_by_name(grammar: str, rule: str) -> None:
    with pytest.raises(GrammarError, match=f"rule '{rule}' is recursive .*non-regular"):
        ebnf_to_node(grammar)


@pytest.mark.parametrize("grammar, message", [
    ('root ::= item', "undefined rule 'item'"),
    ('start ::= "a"', "no start rule 'root'"),
    ('root ::= "a', "unterminated string literal at line 1"),
    ('root ::= [b-a]', "bad class range"),
    ('root ::= "a"{3,1}', "bad repetition bounds"),
    ('root ::= "a" (=b)', "unexpected '='"),
    ('root ::= "a"\nroot ::= "b"', "defined twice"),
    ('root ::= "\\q"', "unknown escape"),
])
def test_bad_grammars_name_the_problem(grammar: str, message: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(message)):
        ebnf_to_node(grammar)


@pytest.mark.parametrize("text, valid", [
    ('a,"b,""c",\n', True), ("a,b\n", True), (",\n", True), ('a"b\n', False),
    ("a,b", False), ("1234567\n", False),
])
def test_csv_membership_agrees_with_printed_regex(text: str, valid: bool) -> None:
    node = ebnf_to_node(CSV)
    builder = TermBuilder()
    assert builder.matches(builder.lower(node), text.encode()) == valid
    assert bool(re.fullmatch(ra.render(node), text)) == valid


def test_syntax_features() -> None:
    """Escapes, single quotes, '.', comments, multi-line rules and empty alternatives."""
    grammar = "root ::= 'x' .\n  | [\\x41-\\x43]+ # comment\n  | \"\\u00e9\" opt\nopt ::= \"!\" |"
    node = ebnf_to_node(grammar)
    builder = TermBuilder()
    term = builder.lower(node)
    for text, want in [("x\n", True), ("ABCA", True), ("é", True), ("é!", True),
                       ("D", False), ("x", False)]:
        assert builder.matches(term, text.encode()) == want, text
