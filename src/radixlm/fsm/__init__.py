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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compile.background_hold import BackgroundHold
    from .compiled_grammar import CompiledGrammar, GrammarStats
    from .errors import GrammarBudgetError, GrammarError
    from .grammar_compiler import GrammarCompiler
    from .grammar_spec import CompileBudget, GrammarSpec, JsonLimits
    from .grammars.json import JsonSchemaOptions, json_schema_to_regex
    from .grammars.whitespace import WhitespacePolicy
    from .jump_forward import (
        JumpForwardPlan,
        apply_jump_forward,
        jump_forward,
        plan_jump_forward,
    )
    from .matcher import GrammarMatcher
    from .tokens.vocabulary import TokenVocabulary

# The public names, each imported from its module on first use (PEP 562): importing one
# submodule (the runtime reads GGUF headers with .tokens.gguf_header) then costs only that
# submodule, not the JSON Schema compiler's imports (jsonschema: 5-20 s at start-up).
_PUBLIC = {
    "BackgroundHold": ".compile.background_hold",
    "CompileBudget": ".grammar_spec",
    "CompiledGrammar": ".compiled_grammar",
    "GrammarBudgetError": ".errors",
    "GrammarCompiler": ".grammar_compiler",
    "GrammarError": ".errors",
    "GrammarMatcher": ".matcher",
    "GrammarSpec": ".grammar_spec",
    "GrammarStats": ".compiled_grammar",
    "JsonLimits": ".grammar_spec",
    "JsonSchemaOptions": ".grammars.json",
    "JumpForwardPlan": ".jump_forward",
    "TokenVocabulary": ".tokens.vocabulary",
    "WhitespacePolicy": ".grammars.whitespace",
    "apply_jump_forward": ".jump_forward",
    "json_schema_to_regex": ".grammars.json",
    "jump_forward": ".jump_forward",
    "plan_jump_forward": ".jump_forward",
}


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


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
