"""Grammar front ends: each kind of spec compiled to a regex tree (:mod:`radixlm.fsm.regex`).

* :mod:`.json` -- JSON Schema to a regex tree (our own compiler; its own layering inside);
* :mod:`.ebnf`, :mod:`.ebnf_parser` -- GBNF/EBNF grammars, recursion cut at a depth;
* :mod:`.structural_tag` -- free text until a trigger, then a constrained body (tool calls);
* :mod:`.whitespace` -- the whitespace policy between JSON tokens.

May import :mod:`radixlm.fsm.errors`, :mod:`radixlm.fsm.regex` and :mod:`radixlm.fsm.automaton`
(the JSON compiler's satisfiability checks and witness); it does not use
:mod:`radixlm.fsm.tokens`, though the stage order allows it. No re-exports.
"""
