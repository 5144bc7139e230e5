"""Compiler: caching by (spec, vocabulary), async compiles, budgets, errors."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from radixlm.fsm import (
    CompileBudget,
    GrammarBudgetError,
    GrammarCompiler,
    GrammarError,
    GrammarSpec,
    WhitespacePolicy,
)

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
QUIET = CompileBudget(background_warmup_states=0)


def test_memory_cache_returns_the_same_grammar(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, QUIET)
    a = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    b = compiler.compile(GrammarSpec.json_schema(dict(SCHEMA)))
    c = compiler.compile(GrammarSpec.json_schema(SCHEMA, whitespace=WhitespacePolicy("compact")))
    assert a is b and a is not c


def test_errors_are_cached_and_clear(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, QUIET)
    for _ in range(2):
        with pytest.raises(GrammarError, match="uniqueItems"):
            compiler.compile(GrammarSpec.json_schema({"type": "array", "uniqueItems": True}))


def test_async_compile_runs_off_the_caller(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, QUIET, max_workers=2)
    caller = threading.get_ident()
    seen = []
    original = compiler._build

    def spy(spec, key):  # noqa: ANN001, ANN202
        seen.append(threading.get_ident())
        return original(spec, key)

    compiler._build = spy
    futures = [compiler.compile_async(GrammarSpec.regex(f"[a-z]{{{i}}}")) for i in range(1, 4)]
    grammars = [f.result(timeout=30) for f in futures]
    assert all(t != caller for t in seen)
    assert compiler.compile_async(GrammarSpec.regex("[a-z]{2}")).result() is grammars[1]
    compiler.shutdown()


def test_time_budget_fails_without_stalling(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(max_seconds=1e-4, background_warmup_states=0))
    schema = {"type": "object", "properties": {
        f"k{i}": {"type": "object", "properties": {"x": {"type": "string", "maxLength": i}}}
        for i in range(400)}}
    start = time.perf_counter()
    future = compiler.compile_async(GrammarSpec.json_schema(schema))
    assert time.perf_counter() - start < 0.5  # the caller is not held up
    with pytest.raises(GrammarBudgetError, match="time"):
        future.result(timeout=60)


def test_state_budget_holds_while_decoding(vocab, tokenizer) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(max_states=40, warmup_states=0,
                                                    background_warmup_states=0))
    matcher = compiler.compile(GrammarSpec.regex("[a-z]{200}")).new_matcher()
    out = torch.zeros(vocab.num_words, dtype=torch.int32)
    with pytest.raises(GrammarBudgetError, match="states"):
        for _ in range(100):
            matcher.fill_bitmask(out)
            assert matcher.accept_token(tokenizer.encode("a", add_special_tokens=False)[0])


def test_warm_up_stops_quietly_at_its_limits(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(warmup_states=10_000, warmup_seconds=0.001,
                                                    background_warmup_states=0))
    grammar = compiler.compile(GrammarSpec.json_schema({"type": "object"}))
    assert 1 <= grammar.stats.warmup_states < 10_000


def test_warm_up_stop_ends_a_slice_after_one_mask(vocab) -> None:  # noqa: ANN001
    """Background warm-up gives way (``stop``) as soon as a compile starts elsewhere."""
    compiler = GrammarCompiler(vocab, CompileBudget(warmup_states=0,
                                                    background_warmup_states=0))
    grammar = compiler.compile(GrammarSpec.json_schema({"type": "object"}))
    assert len(grammar.warm_up(50, 10.0, polite=True, stop=lambda: True)) == 1
    assert len(grammar.warm_up(3, 10.0, polite=True, stop=lambda: False)) == 3


def test_memory_budget(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(max_memory_bytes=1 << 16, warmup_states=64,
                                                    warmup_seconds=10,
                                                    background_warmup_states=0))
    with pytest.raises(GrammarBudgetError, match="memory"):
        compiler.compile(GrammarSpec.regex("[a-z]{1,60}"))


def test_mask_time_budget(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(max_mask_seconds=1e-9,
                                                    background_warmup_states=0))
    with pytest.raises(GrammarBudgetError, match="mask time"):
        compiler.compile(GrammarSpec.regex("(ab|cd)[a-z]{3,9}"))


def test_mask_step_budget(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(max_mask_steps=1, max_mask_seconds=1e9,
                                                    background_warmup_states=0))
    with pytest.raises(GrammarBudgetError, match="mask steps"):
        compiler.compile(GrammarSpec.regex("(ab|cd)[a-z]{3,9}"))
    roomy = GrammarCompiler(vocab, CompileBudget(max_mask_steps=10_000,
                                                 background_warmup_states=0))
    assert roomy.compile(GrammarSpec.regex("(ab|cd)[a-z]{3,9}")).dfa.matches(b"abxyz")


# a pattern intersected with lengths: the mask's new states need liveness searches
LIVENESS_SCHEMA = {"type": "object", "properties": {
    "k": {"type": "string", "pattern": "^(ab|ba)+c?$", "minLength": 5, "maxLength": 9}},
    "required": ["k"]}


def _mask_steps(vocab, native: bool, steps: int | None = None) -> int:  # noqa: ANN001
    """Work steps the first masks of LIVENESS_SCHEMA take, from a fresh compiler."""
    budget = CompileBudget(warmup_states=8, warmup_seconds=1e9, max_mask_seconds=1e9,
                           max_mask_steps=steps, background_warmup_states=0,
                           native_trie_walk=native)
    compiler = GrammarCompiler(vocab, budget)
    compiler.wait_started()
    grammar = compiler.compile(GrammarSpec.json_schema(LIVENESS_SCHEMA))
    compiler.shutdown()
    return grammar.dfa.builder.work_steps


@pytest.mark.parametrize("native", [False, True], ids=["numpy-walk", "compiled-walk"])
def test_mask_steps_are_the_same_on_every_run(vocab, native: bool) -> None:  # noqa: ANN001
    # per walk: the two walks may build rows in different orders, so their counts may differ
    first, second = _mask_steps(vocab, native), _mask_steps(vocab, native)
    assert first == second > 0


def test_mask_step_budget_decides_without_the_clock(vocab) -> None:  # noqa: ANN001
    # the seconds bound is out of reach: only the step count can refuse, the same way twice
    for _ in range(2):
        with pytest.raises(GrammarBudgetError, match="mask steps.*max_mask_steps"):
            _mask_steps(vocab, native=True, steps=50)
    assert _mask_steps(vocab, native=True, steps=10_000_000) > 50


def _negated_pattern_triples(name: str, patterns: list[str]) -> dict:
    return {"not": {"allOf": [{"pattern": p} for p in patterns]}, "$comment": name}


# strings outside three negated conjunctions of three negated pattern triples (the shape of
# JSONSchemaBench's Handwritten allany15): the first mask needs ~0.6 M steps, past what 0.5 s
# allowed on a loaded machine
NESTED_NEGATIONS = {"type": "string", "minLength": 1, "maxLength": 200, "allOf": [
    {"not": {"allOf": [_negated_pattern_triples("a", ["^....$", x, y]) for x, y in
                       (("ab1", "b12"), ("bc1", "c12"), ("ca1", "a12"))]}},
    {"not": {"allOf": [_negated_pattern_triples("b", ["^[\\w]*$", "\\d\\d", c]) for c in
                       ("[a|b]", "[b|c]", "[c|a]")]}},
    {"not": {"allOf": [_negated_pattern_triples("c", ["^[\\w]+", "1.*2", c]) for c in
                       ("ac", "a2", "a1")]}}]}


def test_a_mask_past_the_old_time_budget_compiles_within_the_step_budget(vocab) -> None:  # noqa: ANN001
    import json

    import jsonschema

    def compiled(steps: int | None):  # noqa: ANN202
        budget = CompileBudget(max_mask_steps=steps, background_warmup_states=0)
        return GrammarCompiler(vocab, budget).compile(GrammarSpec.json_schema(NESTED_NEGATIONS))

    with pytest.raises(GrammarBudgetError, match="mask steps"):
        compiled(100_000)
    dfa = compiled(CompileBudget().max_mask_steps).dfa
    judge = jsonschema.Draft202012Validator(NESTED_NEGATIONS)
    texts = ["ab12", "ab1c12", "bc12", "x", "12", "a12b", "1a2", "zz99a", "ca12", "", "a1c2"]
    verdicts = {t: judge.is_valid(t) for t in texts}
    assert set(verdicts.values()) == {True, False}  # both kinds are checked
    for text, valid in verdicts.items():
        assert dfa.matches(json.dumps(text).encode()) == valid, text


def test_default_mask_budget_counts_steps(vocab) -> None:  # noqa: ANN001
    budget = CompileBudget()
    assert budget.max_mask_steps is not None
    with pytest.raises(ValueError, match="max_mask_steps"):
        CompileBudget(max_mask_steps=0)


def test_background_warm_up_continues_after_the_compile(vocab) -> None:  # noqa: ANN001
    budget = CompileBudget(warmup_states=1, background_warmup_states=40)
    compiler = GrammarCompiler(vocab, budget)
    grammar = compiler.compile(GrammarSpec.json_schema({"type": "object", "properties": {
        k: {"type": "string", "maxLength": 30} for k in "abcdef"}}))
    compiler.shutdown()  # waits for the slice queued by the compile
    assert 1 < grammar.stats.warmup_states <= 41


def test_disk_cache_round_trip(vocab, tmp_path) -> None:  # noqa: ANN001
    spec = GrammarSpec.json_schema(SCHEMA)
    first = GrammarCompiler(vocab, QUIET, cache_dir=tmp_path).compile(spec)
    files = list(tmp_path.glob("grammar-*.npz"))
    assert len(files) == 1
    second = GrammarCompiler(vocab, QUIET, cache_dir=tmp_path).compile(spec)
    assert second is not first
    state = second.initial_state
    assert second.index.cached_mask(state) is not None  # installed from disk
    assert torch.equal(second.mask(state), first.mask(first.initial_state))


def test_unreadable_disk_cache_is_ignored(vocab, tmp_path) -> None:  # noqa: ANN001
    spec = GrammarSpec.regex("[0-9]+")
    compiler = GrammarCompiler(vocab, QUIET, cache_dir=tmp_path)
    (tmp_path / f"grammar-{compiler.key(spec)}.npz").write_bytes(b"not a zip")
    grammar = compiler.compile(spec)
    assert grammar.new_matcher().jump_forward_string() == ""


def test_unspellable_grammar_is_refused(tokenizer) -> None:  # noqa: ANN001
    from radixlm.fsm import TokenVocabulary

    letters_only = [b if b and b.isalpha() else None for b in
                    TokenVocabulary.from_tokenizer(tokenizer, 8192, [1]).token_bytes]
    # the refusal comes from the compile's warm-up reaching the state before "7"; a state
    # budget, not the default 5 ms of warm-up (a loaded machine, or the numba walk still
    # loading, stopped the warm-up short of it and the compile returned), and wall-clock
    # limits far out of reach
    untimed = CompileBudget(background_warmup_states=0, warmup_states=8, warmup_seconds=600.0,
                            max_seconds=600.0, max_mask_seconds=600.0)
    compiler = GrammarCompiler(TokenVocabulary(letters_only, 8192, [1]), untimed)
    with pytest.raises(GrammarError, match="no token of the vocabulary"):
        compiler.compile(GrammarSpec.regex("ab7"))


def _nested(kind: str, levels: int) -> dict:
    """``levels`` arrays (one JSON level each) or objects (two: properties, then the key)
    around an integer."""
    schema: dict = {"type": "integer"}
    for _ in range(levels):
        schema = ({"type": "array", "items": schema, "minItems": 1, "maxItems": 1}
                  if kind == "array" else
                  {"type": "object", "properties": {"a": schema}, "required": ["a"]})
    return schema


@pytest.mark.parametrize(("kind", "levels"), [("array", 63), ("object", 31)])
def test_schema_at_the_nesting_limit_compiles_and_decodes(vocab, tokenizer, kind, levels
                                                          ) -> None:  # noqa: ANN001
    from radixlm.fsm.grammars.json.document import MAX_SCHEMA_DEPTH, nesting_depth

    schema = _nested(kind, levels)
    assert MAX_SCHEMA_DEPTH - 1 <= nesting_depth(schema, 1000) <= MAX_SCHEMA_DEPTH  # one more
    # level of either kind passes the limit
    matcher = GrammarCompiler(vocab, QUIET).compile(GrammarSpec.json_schema(schema)
                                                    ).new_matcher()
    inner = "1"
    for _ in range(levels):
        inner = f"[{inner}]" if kind == "array" else f'{{"a":{inner}}}'
    out = torch.zeros(vocab.num_words, dtype=torch.int32)
    for token in tokenizer.encode(inner, add_special_tokens=False):
        matcher.fill_bitmask(out)
        assert matcher.accept_token(token)
    assert matcher.can_end()


@pytest.mark.parametrize("schema", [
    "[" * 1000 + "]" * 1000,  # deeper than Python's JSON decoder goes
    _nested("array", 64),
    _nested("object", 500),
], ids=["json-text-1000", "array-64", "object-500"])
def test_schema_nested_too_deep_is_refused_naming_the_limit(vocab, schema) -> None:  # noqa: ANN001
    with pytest.raises(GrammarError, match="nested more than 64 levels"):
        GrammarCompiler(vocab, QUIET).compile(GrammarSpec.json_schema(schema))
