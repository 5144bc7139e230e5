"""dp_size=2 behind one API: prefix affinity, streaming, abort, and a dead replica."""

from __future__ import annotations

import os
import signal

import pytest

from radixlm.router.dp_engine import DataParallelEngine

DOC_A = "Alice keeps three red boxes in the attic and one blue box in the garden shed. "
DOC_B = "The river town sells bread on Mondays, fish on Fridays and honey all week long. "
GREEDY = {"max_new_tokens": 4, "temperature": 0.0}


@pytest.fixture(scope="module")
def dp(tiny_llama_path):
    engine = DataParallelEngine(tiny_llama_path, dp_size=2, max_total_tokens=2048,
                                load_balance_method="cache_aware")
    yield engine
    engine.shutdown()


def test_requests_sharing_a_document_go_to_the_same_replica(dp):
    ranks = {doc: {dp.generate(doc + f"Question {q}?", GREEDY)["meta_info"]["dp_rank"]
                   for q in range(3)} for doc in (DOC_A, DOC_B)}
    assert len(ranks[DOC_A]) == len(ranks[DOC_B]) == 1
    assert ranks[DOC_A] != ranks[DOC_B]  # the second document went to the emptier replica
    again = dp.generate(DOC_A + "Question 0?", GREEDY)
    assert again["meta_info"]["cached_tokens"] > 0  # its replica had the prefix cached


def test_streaming_and_abort_across_replicas(dp):
    whole = dp.generate(DOC_B + "Stream?", GREEDY)
    chunks = list(dp.generate(DOC_B + "Stream?", GREEDY, stream=True))
    assert chunks[-1]["text"] == whole["text"]
    assert {c["meta_info"]["dp_rank"] for c in chunks} == {whole["meta_info"]["dp_rank"]}
    stream = dp.generate(DOC_A + "Long?", {"max_new_tokens": 1500, "ignore_eos": True},
                         stream=True, rid="long-1")
    next(stream)
    dp.abort_request("long-1")
    last = list(stream)[-1]
    assert last["meta_info"]["finish_reason"]["type"] == "abort"


def test_a_dead_replica_leaves_the_rotation_and_the_other_serves(dp):
    victim = dp.generate(DOC_A + "Which?", GREEDY)["meta_info"]["dp_rank"]
    stream = dp.generate(DOC_A + "Long?", {"max_new_tokens": 1500, "ignore_eos": True},
                         stream=True)
    next(stream)  # in flight on the victim (same document)
    os.kill(dp.replicas[victim]._procs.procs["scheduler"].pid, signal.SIGKILL)
    with pytest.raises(Exception, match="died|crashed"):
        list(stream)
    outs = [dp.generate(doc + "After?", GREEDY) for doc in (DOC_A, DOC_B)]
    assert {o["meta_info"]["dp_rank"] for o in outs} == {1 - victim}
    status = dp.replica_status()
    assert not status[victim]["alive"] and "scheduler" in status[victim]["error"]
    assert status[1 - victim]["alive"]
