"""The runner's pool from ServerArgs as start-up sizes it, with the memory probe pinned so no
number depends on this machine's free RAM."""

from __future__ import annotations

import logging
import re

import pytest

from radixlm.runtime.memory import pool_sizing
from radixlm.runtime.model.model_config import ModelConfig
from radixlm.runtime.model.model_runner import RunnerConfig
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.runner_setup import load_runner, pool_size


@pytest.fixture
def roomy_host(monkeypatch):
    monkeypatch.setattr(pool_sizing, "device_memory_bytes", lambda device: 2**40)


def sized(path, **kw):
    return pool_size(ServerArgs(model_path=str(path), **kw), RunnerConfig())[0]


def test_cpu_default_is_context_times_the_default_sequences(roomy_host, tiny_llama_path):
    context = ModelConfig.from_folder(tiny_llama_path).max_position_embeddings
    pool = sized(tiny_llama_path)
    assert pool.tokens == context * pool_sizing.DEFAULT_CPU_SEQUENCES
    assert pool.limited_by == "context x requests"


def test_the_users_concurrency_and_context_decide(roomy_host, tiny_llama_path):
    pool = sized(tiny_llama_path, max_running_requests=3, context_length=100, page_size=16)
    assert (pool.tokens, pool.limited_by) == (304, "context x requests")  # 300 in whole pages


def test_an_explicit_fraction_fills_it_as_before(roomy_host, tiny_llama_path):
    context = ModelConfig.from_folder(tiny_llama_path).max_position_embeddings
    pool = sized(tiny_llama_path, mem_fraction_static=0.5)
    # the scheduler's 256 running requests cap it, as before the CPU default (and on CUDA)
    assert (pool.tokens, pool.limited_by) == (context * 256, "context x requests")


def test_start_up_line_says_weights_pool_and_why(roomy_host, tiny_llama_path, caplog):
    context = ModelConfig.from_folder(tiny_llama_path).max_position_embeddings
    with caplog.at_level(logging.INFO, logger="radixlm.runtime.wire.runner_setup"):
        _, pool, _ = load_runner(ServerArgs(model_path=str(tiny_llama_path), num_threads=1))
    line = next(r.getMessage() for r in caplog.records if "KV pool" in r.getMessage())
    sequences = pool_sizing.DEFAULT_CPU_SEQUENCES
    assert re.search(r"weights [\d,]+ MiB, KV pool ", line), line
    assert f"KV pool {sequences} x {context:,} tokens = {sequences * context:,} tokens, " in line

    assert f"{pool.bytes / 2**20:,.0f} MiB (context x requests)" in line, line
