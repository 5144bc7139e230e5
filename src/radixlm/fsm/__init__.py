"""Constrained decoding: JSON Schema / regex / choices → byte automaton → token bitmasks.

This package imports nothing else of radixlm; its settings arrive as arguments.

Pipeline: a :class:`GrammarSpec` is compiled by :class:`GrammarCompiler` (our own JSON Schema
to regex compiler, :mod:`json`) into a regex tree, lowered to byte-level derivative
terms whose DFA is built lazily (:mod:`lazy_dfa`); per-state token bitmasks are computed on
first visit and cached (:mod:`token_index`). A :class:`GrammarMatcher` tracks one request;
:mod:`compressed_fsm` finds forced runs and :func:`plan_jump_forward` turns them into tokens.
"""

from .background_hold import BackgroundHold
from .compiled_grammar import CompiledGrammar, GrammarStats
from .errors import GrammarBudgetError, GrammarError
from .grammar_compiler import GrammarCompiler
from .grammar_spec import CompileBudget, GrammarSpec, JsonLimits
from .json import JsonSchemaOptions, json_schema_to_regex
from .jump_forward import JumpForwardPlan, apply_jump_forward, jump_forward, plan_jump_forward
from .matcher import GrammarMatcher
from .vocabulary import TokenVocabulary
from .whitespace import WhitespacePolicy

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
