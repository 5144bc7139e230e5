"""Constrained decoding: JSON Schema / regex / choices → byte automaton → token bitmasks.

This package imports nothing else of radixlm; its settings arrive as arguments.

Pipeline: a :class:`GrammarSpec` is compiled by :class:`GrammarCompiler` (our own JSON
Schema to regex compiler, :mod:`.grammars.json`) into a regex tree (:mod:`.regex`), lowered to
byte-level derivative terms whose DFA is built lazily (:mod:`.automaton.lazy_dfa`); per-state
token bitmasks are computed on first visit and cached (:mod:`.tokens.token_index`). A
:class:`GrammarMatcher` tracks one request; :mod:`.automaton.compressed_fsm` finds forced runs
and :func:`plan_jump_forward` turns them into tokens.

Stages, each a sub-package importing only those before it (``tests/fsm/test_layering.py``):
:mod:`.errors` <- :mod:`.regex` <- :mod:`.automaton` <- :mod:`.tokens` <- :mod:`.grammars` <-
:mod:`.compile` <- the root modules (spec, compiler, compiled grammar, matcher, jump-forward).
"""

from .compile.background_hold import BackgroundHold
from .compiled_grammar import CompiledGrammar, GrammarStats
from .errors import GrammarBudgetError, GrammarError
from .grammar_compiler import GrammarCompiler
from .grammar_spec import CompileBudget, GrammarSpec, JsonLimits
from .grammars.json import JsonSchemaOptions, json_schema_to_regex
from .grammars.whitespace import WhitespacePolicy
from .jump_forward import JumpForwardPlan, apply_jump_forward, jump_forward, plan_jump_forward
from .matcher import GrammarMatcher
from .tokens.vocabulary import TokenVocabulary

__all__ = [
    "BackgroundHold",
    "CompileBudget",
    "CompiledGrammar",
    "GrammarBudgetError",
    "GrammarCompiler",
    "GrammarError",
    "GrammarMatcher",
    "GrammarSpec",
    "GrammarStats",
    "JsonLimits",
    "JsonSchemaOptions",
    "JumpForwardPlan",
    "TokenVocabulary",
    "WhitespacePolicy",
    "apply_jump_forward",
    "json_schema_to_regex",
    "jump_forward",
    "plan_jump_forward",
]
