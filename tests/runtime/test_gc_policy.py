"""The garbage collector in the scheduler process (gc_policy.py): the start-up heap frozen
out of later scans, every collection's pause timed and reported by ``/get_server_info``."""

from __future__ import annotations

import gc
import json
import weakref

import pytest

from radixlm.fsm import GrammarSpec
from radixlm.runtime.gc_policy import YOUNG_THRESHOLD, GcPauseStats, freeze_startup_heap
from radixlm.runtime.scheduling.grammar_manager import GrammarManager
from radixlm.runtime.server_args import ServerArgs

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                           "n": {"type": "integer"}},
          "required": ["name", "n"], "additionalProperties": False}


class _Cycle:
    """A reference cycle: only the collector reclaims it."""

    def __init__(self) -> None:
        self.me = self


def test_pause_stats_count_each_collection_by_generation():
    stats = GcPauseStats()
    stats.install()
    stats.install()  # idempotent: one callback
    try:
        gc.collect(0)
        gc.collect()
    finally:
        stats.uninstall()
    gc.collect()  # not counted: uninstalled
    info = stats.summary()
    assert info["gc_pauses"] == 2 and info["gc_full_pauses"] == 1
    assert 0 <= info["gc_pause_ms_p99"] <= info["gc_pause_ms_max"]
    assert info["gc_full_pause_ms_max"] <= info["gc_pause_ms_max"] <= info["gc_pause_ms_total"]


def test_frozen_heap_is_left_alone_and_new_cycles_are_still_reclaimed():
    old = _Cycle()
    thresholds = gc.get_threshold()
    try:
        assert freeze_startup_heap() > 0
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *thresholds[1:])
        assert gc.isenabled(), "the collector stays on for cycles made while serving"
        new = weakref.ref(_Cycle())  # made after the freeze, like an evicted grammar
        old_ref = weakref.ref(old)
        del old
        gc.collect()
        assert new() is None, "a cycle made after the freeze is reclaimed"
        assert old_ref() is not None, "a frozen object is never scanned, so never freed"
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    gc.collect()
    assert old_ref() is None, "unfrozen, it is reclaimed again"


def test_grammar_vocabulary_is_frozen_and_grammars_compiled_later_are_reclaimed(vocab,
                                                                              tokenizer):
    """prepare() builds the compiler before the freeze (the scheduler process's order): its
    vocabulary is out of every later scan, while a grammar compiled after it, a term graph
    full of cycles, is still reclaimed once nothing holds it (the freeze leaks nothing)."""
    gm = GrammarManager(ServerArgs(model_path="unused"), tokenizer, vocab.vocab_size,
                        list(vocab.eos_token_ids), ops=None)
    thresholds = gc.get_threshold()
    try:
        gm.prepare()
        built = gm.compiler
        freeze_startup_heap()
        scanned = {id(o) for o in gc.get_objects()}
        assert id(built.vocab) not in scanned, "the vocabulary is frozen with the start-up heap"
        assert id(built) not in scanned
        grammar = built.compile(GrammarSpec.json_schema(SCHEMA))
        builder = weakref.ref(grammar.dfa.builder)
        built.shutdown()  # its background warm-up (which holds the grammar) has finished
        built._memory = type(built._memory)(1)  # drop the compiler's cached grammar
        del grammar
        gc.collect()
        assert builder() is None, "a grammar compiled after the freeze is reclaimed"
    finally:
        gm.compiler.shutdown()
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.fixture(scope="module", params=[False, True], ids=["freeze", "no-freeze"])
def engine(request, make_engine, tiny_llama_path):
    return make_engine(tiny_llama_path, disable_gc_freeze=request.param)


# a schema whose compile surely allocates more than one generation-0 threshold (20,000
# containers with the freeze) on the tiny vocabulary: the two-field SCHEMA stopped doing so
# once the scheduler's tokenizer stopped loading transformers on the first jump-forward
WIDE_SCHEMA = {"type": "object", "additionalProperties": False,
               "properties": {f"field_{i}": {"enum": [f"v{i}_{j}" for j in range(12)]}
                              for i in range(48)}}


def test_server_info_reports_gc_pauses_and_the_freeze(engine):
    for i in range(6):  # distinct schemas: each compiles and walks its own automaton
        schema = {**WIDE_SCHEMA, "required": [f"field_{i}"]}
        engine.generate("JSON:", {"temperature": 0.0, "max_new_tokens": 64,
                                  "json_schema": json.dumps(schema)})
    info = engine.get_server_info()
    frozen = not engine.server_args.disable_gc_freeze
    assert (info["gc_frozen_objects"] > 0) == frozen
    assert info["gc_threshold"][0] == (YOUNG_THRESHOLD if frozen else gc.get_threshold()[0])
    assert info["gc_enabled"] is True
    # compiling a grammar allocates far more than one generation-0 threshold of containers
    assert info["gc_pauses"] >= 1
    assert 0 <= info["gc_pause_ms_p99"] <= info["gc_pause_ms_max"] <= info["gc_pause_ms_total"]
    assert info["gc_full_pauses"] <= info["gc_pauses"]
