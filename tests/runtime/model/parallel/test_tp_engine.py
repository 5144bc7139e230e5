"""TP=2 through the Engine: TP=1's greedy tokens and logprobs (1e-4); SmolLM2-135M (9 query,
3 KV heads) at TP=3 likewise (1e-4 of its logit scale); two "nodes" on loopback; a killed rank
fails the in-flight request and rank 0 exits non-zero; uneven heads refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import torch

from radixlm.runtime.api.engine import Engine
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.parallel.sharding import TensorParallelError
from radixlm.runtime.wire.ipc import free_tcp_port
from radixlm.testing.greedy import greedy_generate

PROMPTS = ["The capital of France is", "Question: What is 3 plus 4?\nAnswer:"]
NEW = 6
SAMPLING = {"max_new_tokens": NEW, "temperature": 0.0, "ignore_eos": True}
TOL = 1e-4


def tp1_reference(path, tokenizer, max_context=None, **config
                  ) -> list[tuple[list[int], list[float], float]]:
    """Per prompt: TP=1 greedy tokens, the logprob of every token after the first, and the
    logit scale (largest |logit|)."""
    runner = ModelRunner(path, RunnerConfig(max_total_tokens=512, max_context=max_context,
                                            **config))
    out = []
    for text in PROMPTS:
        ids = tokenizer(text).input_ids
        tokens = greedy_generate(runner, [ids], NEW)[0]
        seq = ids + tokens
        slots, _ = runner.allocator.extend_slots([], len(seq) - 1, True)
        logits = runner.forward([SeqSpec(seq[:-1], slots, logits_start=0)])
        runner.allocator.free(sorted({s // runner.config.page_size for s in slots}))
        lps = torch.log_softmax(logits, -1).gather(1, torch.tensor(seq[1:])[:, None])
        out.append((tokens, lps.flatten().tolist(), logits.abs().max().item()))
    return out


def assert_matches_tp1(engine: Engine, path, relative: bool = False, **config) -> None:
    """Greedy tokens identical; logprobs within TOL (``relative``: TOL x the logit scale,
    the real model's oracle, since its logits are ~20, not ~1)."""
    results = engine.generate(PROMPTS, SAMPLING, return_logprob=True, logprob_start_len=0)
    refs = tp1_reference(path, engine.tokenizer, **config)
    for res, (tokens, ref_lps, scale) in zip(results, refs):
        assert res["output_ids"] == tokens
        meta = res["meta_info"]
        lps = [lp for lp, _, _ in meta["input_token_logprobs"][1:] + meta[
            "output_token_logprobs"]]
        assert len(lps) == len(ref_lps)
        assert max(abs(a - b) for a, b in zip(lps, ref_lps)) < TOL * (scale if relative else 1)


@pytest.fixture(scope="module")
def qwen2_tp2(tiny_qwen2_path, make_engine) -> Engine:
    """Single node: the launcher starts rank 1 beside the scheduler (one KV head, replicated)."""
    return make_engine(tiny_qwen2_path, tp_size=2, max_total_tokens=2048)


def test_engine_tp2_matches_tp1(qwen2_tp2, tiny_qwen2_path):
    assert_matches_tp1(qwen2_tp2, tiny_qwen2_path)
    assert qwen2_tp2.info["max_total_tokens"] == 2048


def test_smollm2_tp3_matches_tp1(real_model):
    # 9 query heads and 3 KV heads split 3 ways: 3 query heads and 1 KV head per rank (tp=2
    # is refused: 9 does not split). Fixed float32 GEMMs on both sides.
    config = {"dtype": "float32", "cpu_gemm": "torch"}
    with Engine(model_path=str(real_model.folder), tp_size=3, max_total_tokens=512,
                **config) as engine:
        assert {"tp-worker-1", "tp-worker-2"} <= set(engine._procs.procs)
        assert_matches_tp1(engine, real_model.folder, relative=True, **config)


def test_two_nodes_on_loopback_match_tp1(tiny_llama_path):
    addr = f"127.0.0.1:{free_tcp_port()}"
    flags = ["--model-path", str(tiny_llama_path), "--tp-size", "2", "--nnodes", "2",
             "--dist-init-addr", addr, "--max-total-tokens", "512"]
    node1 = subprocess.Popen([sys.executable, "-m", "radixlm.launch_server", *flags,
                              "--node-rank", "1"])
    try:
        engine = Engine(model_path=str(tiny_llama_path), tp_size=2, nnodes=2, node_rank=0,
                        dist_init_addr=addr, max_total_tokens=512)
        with engine:
            assert "tp-worker-1" not in engine._procs.procs  # rank 1 lives on "node 1"
            assert_matches_tp1(engine, tiny_llama_path)
        assert node1.wait(timeout=60) == 0, "node 1 must stop cleanly when node 0 stops"
    finally:
        if node1.poll() is None:
            node1.kill()
            node1.wait()


def test_uneven_heads_are_refused_with_the_sizes_that_work(tiny_llama_path):
    # the tiny Llama has 4 query heads: tp=3 cannot split them (refused, not padded)
    with pytest.raises(TensorParallelError, match=r"tp_size=3.*num_attention_heads \(4\).*"
                                               r"tp sizes that work: \[1, 2, 4\]"):
        Engine(model_path=str(tiny_llama_path), tp_size=3, max_total_tokens=64)


def test_killing_a_tp_rank_fails_in_flight_requests(qwen2_tp2):
    engine = qwen2_tp2  # last test of the module: it takes this engine down
    scheduler = engine._procs.procs["scheduler"]
    stream = engine.generate("a", {"max_new_tokens": 1500, "ignore_eos": True}, stream=True)
    next(stream)  # generating: the scheduler is stepping (broadcast + collectives)
    os.kill(engine._procs.procs["tp-worker-1"].pid, signal.SIGKILL)
    with pytest.raises(Exception, match="crashed|died"):
        for _ in stream:
            pass
    scheduler.join(timeout=30)
    assert scheduler.exitcode == 1, "rank 0 must exit non-zero when a peer dies"
    with pytest.raises(Exception, match="died|crashed"):
        engine.generate("b", {"max_new_tokens": 2})
