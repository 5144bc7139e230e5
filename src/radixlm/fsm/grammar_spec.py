"""What a request asks to be constrained to, and the compile budget (frozen, validated)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import GrammarError
from .grammars.ebnf import EbnfOptions
from .grammars.json import JsonSchemaOptions, load_schema
from .grammars.structural_tag import StructuralTag
from .grammars.whitespace import WhitespacePolicy

KINDS = ("json_schema", "regex", "choices", "json_object", "int", "float", "bool", "str", "ebnf",
         "structural_tag")

# SGLang's dtype regexes (without their trailing-whitespace tails, which let models loop).
DTYPE_REGEXES = {
    "int": r"[-+]?[0-9]+",
    "float": r"[-+]?[0-9]*\.?[0-9]+",
    "bool": r"True|False",
    "str": r'"[\w\d ]*"',
}


@dataclass(frozen=True)
class JsonLimits:
    """Bounds that keep JSON grammars regular and finite; all are explicit choices.

    ``max_recursion_depth``: expansions of a recursive ``$ref``; ``any_value_depth``: nesting
    inside free-form values; the ``max_*`` caps (None = unbounded) narrow strings without a
    tighter ``maxLength``, arrays, additional properties and number digits.
    """

    max_recursion_depth: int = 3
    any_value_depth: int = 16
    max_string_length: int | None = None
    max_array_items: int | None = None
    max_object_properties: int | None = None
    max_number_digits: int | None = None

    def __post_init__(self) -> None:
        # JsonSchemaOptions validates the same fields; build one to fail early.
        self.schema_options(WhitespacePolicy(), lenient=False)

    def schema_options(self, whitespace: WhitespacePolicy, lenient: bool) -> JsonSchemaOptions:
        """The JSON Schema compiler options for these limits."""
        return JsonSchemaOptions(
            whitespace=whitespace, lenient=lenient,
            max_recursion_depth=self.max_recursion_depth, any_value_depth=self.any_value_depth,
            max_string_length=self.max_string_length, max_array_items=self.max_array_items,
            max_object_properties=self.max_object_properties,
            max_number_digits=self.max_number_digits)


def _canonical_value(kind: str, value: Any) -> Any:
    """A hashable, canonical form of the spec value (validated)."""
    if kind == "json_schema":
        schema = load_schema(value)
        return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    if kind == "regex":
        if not isinstance(value, str):
            raise GrammarError(f"regex: expected a string, got {type(value).__name__}")
        return value
    if kind == "choices":
        if isinstance(value, str) or not isinstance(value, Sequence) or not value or \
                not all(isinstance(c, str) and c for c in value):
            raise GrammarError(f"choices: expected a non-empty list of non-empty strings, got "
                               f"{value!r}")
        return tuple(value)
    if kind == "ebnf":
        text, depth = value if isinstance(value, tuple) else (value, 0)
        if not isinstance(text, str):
            raise GrammarError(f"ebnf: expected grammar text, got {type(text).__name__}")
        EbnfOptions(max_recursion_depth=depth)  # validates the depth
        return (text, depth)
    if kind == "structural_tag":
        tag = StructuralTag.from_value(value)
        for structure in tag.structures:
            load_schema(structure.schema)  # a bad schema fails here, by name
        return tag.canonical()
    if value is not None:
        raise GrammarError(f"grammar kind {kind!r} takes no value, got {value!r}")
    return None


@dataclass(frozen=True)
class GrammarSpec:
    """A constraint: ``kind`` in :data:`KINDS` and its ``value``.

    ``json_schema``: JSON text, a dict/bool, or a Pydantic model class; ``regex``: a pattern
    (full match); ``choices``: strings; ``json_object``: any JSON object; ``int``, ``float``,
    ``bool``, ``str``: SGLang's dtype regexes; ``ebnf``: grammar text, or (text, recursion
    depth) (:mod:`.grammars.ebnf`); ``structural_tag``: SGLang's structural-tag object or its
    JSON text (:mod:`.grammars.structural_tag`). ``whitespace``, ``lenient`` and ``limits``
    apply to JSON kinds (also the schemas inside structural tags).
    """

    kind: str
    value: Any = None
    whitespace: WhitespacePolicy = field(default_factory=WhitespacePolicy)
    lenient: bool = False
    limits: JsonLimits = field(default_factory=JsonLimits)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise GrammarError(f"grammar kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.whitespace, WhitespacePolicy):
            raise GrammarError(f"whitespace must be a WhitespacePolicy, got {self.whitespace!r}")
        if not isinstance(self.limits, JsonLimits):
            raise GrammarError(f"limits must be JsonLimits, got {self.limits!r}")
        object.__setattr__(self, "value", _canonical_value(self.kind, self.value))

    @classmethod
    def json_schema(cls, schema: Any, **kwargs: Any) -> GrammarSpec:
        """Constrain to a JSON Schema (text, dict, bool or Pydantic model class)."""
        return cls("json_schema", schema, **kwargs)

    @classmethod
    def regex(cls, pattern: str) -> GrammarSpec:
        """Constrain to a regex (full match)."""
        return cls("regex", pattern)

    @classmethod
    def choices(cls, options: Sequence[str]) -> GrammarSpec:
        """Constrain to one of the strings."""
        return cls("choices", list(options))

    @classmethod
    def ebnf(cls, grammar: str, max_recursion_depth: int = 0) -> GrammarSpec:
        """Constrain to a GBNF/EBNF grammar (start rule ``root``); recursive rules are refused
        unless ``max_recursion_depth`` > 0 bounds their nesting (see :mod:`.grammars.ebnf`)."""
        return cls("ebnf", (grammar, max_recursion_depth))

    @classmethod
    def structural_tag(cls, tag: Any, **kwargs: Any) -> GrammarSpec:
        """Free text with constrained regions after triggers (see
        :mod:`.grammars.structural_tag`)."""
        return cls("structural_tag", tag, **kwargs)

    def cache_key(self) -> str:
        """Stable digest of everything that affects the compiled grammar."""
        text = repr((self.kind, self.value, self.whitespace, self.lenient, self.limits))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# One mask's step budget (TermBuilder.work_steps) and its outer wall-clock bound; see
# docs/fsm.md "Budgets and bounds" for how they were chosen on the corpus.
MAX_MASK_STEPS = 2_500_000
MAX_MASK_SECONDS = 60.0
# One compile's step budget (the start state's liveness and its warm-up masks), in
# TermBuilder.work_steps (derivative calls, liveness expansions, 8 per term created: each
# charged where the time goes) plus compile_clock.EXTRA_TERM_STEPS (4) per term created.
# Default: 1.9 M steps. Cost: 0.33-0.45 us a step on a Zen 4 EPYC core shared with other
# work (Handwritten's slowest, thread CPU, the collector included), so a refusal comes after
# ~0.6-0.85 s of CPU there, less on a quiet core. Floor: the corpus's allany15 shape (tests'
# NESTED_NEGATIONS) needs 1.86 M steps and must compile (string1, 104 k terms, 1.84 M).
# See docs/fsm.md "Budgets and bounds".
MAX_COMPILE_STEPS = 1_900_000


@dataclass(frozen=True)
class CompileBudget:
    """Limits on one grammar: work to compile, automaton states, memory, warm-up.

    ``max_compile_steps`` is what decides a compile: the work steps (as for
    ``max_mask_steps``) its automaton may take before the compile returns (the liveness of
    the start state, the first mask); past it the schema is refused, the same way on any
    machine and under any load; None = no limit. ``max_seconds`` is only the outer
    wall-clock bound of a compile (also of the schema's own expansion, which its expansion
    count bounds), far above what the steps take on a working machine.

    ``max_states``, ``max_memory_bytes``, ``max_mask_steps`` and ``max_mask_seconds`` also
    hold while decoding (the automaton grows lazily): going past them raises
    :class:`GrammarBudgetError` from the matcher, which should fail that request.
    ``max_mask_steps`` is the budget of one state's allowed tokens: work steps
    (:attr:`TermBuilder.work_steps`: derivative terms created plus liveness states expanded,
    about 0.1-0.3 ms each), so a schema compiles or is refused the same on any machine and
    under any load; None = no limit. ``max_mask_seconds`` is only an outer wall-clock bound
    on the same work (a safety net, far above what the step budget takes on a working
    machine).
    At compile time (off the caller) up to ``warmup_states`` masks are computed, for at most
    ``warmup_seconds``; after the compile returns, up to ``background_warmup_states`` more
    are computed in the compiler's worker thread in short slices (0 turns that off); the
    rest are computed on first visit. ``first_token_masks`` (with ``warmup_states``): the
    compile also computes the masks of every state one token after the start, and after its
    forced text, within its step budget (:mod:`.compile.first_token_masks`), so a grammar
    whose second state cannot be masked is refused up front, not in the middle of a
    stream; on by default. ``native_trie_walk``: walk the token trie with the
    compiled loop (numba, when installed: :mod:`.tokens.trie_walk_kernel`; the numpy walk otherwise,
    with the same masks); on by default. ``short_reach_masks``: share the part of a mask
    made of tokens up to the vocabulary's short reach between states equal at that reach,
    walking the few longer tokens per state (:attr:`TokenVocabulary.short_reach`; the same
    masks).
    """

    max_seconds: float = 10.0
    max_compile_steps: int | None = MAX_COMPILE_STEPS
    max_states: int = 200_000
    max_memory_bytes: int = 512 * 1024 * 1024
    warmup_states: int = 4  # more only slowed compiles (benchmarks/json_decoding.py)
    warmup_seconds: float = 0.005
    background_warmup_states: int = 256
    first_token_masks: bool = True
    max_mask_steps: int | None = MAX_MASK_STEPS
    max_mask_seconds: float = MAX_MASK_SECONDS
    native_trie_walk: bool = True
    short_reach_masks: bool = True

    def __post_init__(self) -> None:
        if not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0, got {self.max_seconds}")
        if self.max_states < 2:
            raise ValueError(f"max_states must be >= 2, got {self.max_states}")
        if self.max_memory_bytes < 1 << 16:
            raise ValueError(f"max_memory_bytes must be >= 65536, got {self.max_memory_bytes}")
        if self.warmup_states < 0:
            raise ValueError(f"warmup_states must be >= 0, got {self.warmup_states}")
        if not self.max_mask_seconds > 0:
            raise ValueError(f"max_mask_seconds must be > 0, got {self.max_mask_seconds}")
        if self.max_compile_steps is not None and self.max_compile_steps < 1:
            raise ValueError(f"max_compile_steps must be >= 1 or None, got "
                             f"{self.max_compile_steps}")
        if self.max_mask_steps is not None and self.max_mask_steps < 1:
            raise ValueError(f"max_mask_steps must be >= 1 or None, got {self.max_mask_steps}")
        if self.background_warmup_states < 0:
            raise ValueError(f"background_warmup_states must be >= 0, got "
                             f"{self.background_warmup_states}")
        if self.warmup_seconds < 0:
            raise ValueError(f"warmup_seconds must be >= 0, got {self.warmup_seconds}")
