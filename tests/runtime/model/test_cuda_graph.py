"""CUDA-graph bookkeeping on CPU: buckets, the replay-or-eager choice, static buffers, and a
padded decode step through the real runner giving the unpadded step's logits."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.cuda_graph import (
    DecodeGraph,
    DecodeGraphConfig,
    Eager,
    Replay,
    StaticDecodeInputs,
    choose,
    default_buckets,
    unpad,
)
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig


def test_default_buckets() -> None:
    assert default_buckets(256) == (1, 2, 4, *range(8, 257, 8))
    assert default_buckets(5) == (1, 2, 4, 5)
    assert default_buckets(1) == (1,)
    with pytest.raises(ValueError, match="max_batch"):
        default_buckets(0)


@pytest.mark.parametrize("buckets", [(), (2, 1), (1, 1), (0, 4)])
def test_config_refuses_bad_buckets(buckets) -> None:
    with pytest.raises(ValueError, match="bucket"):
        DecodeGraphConfig(buckets, max_seq_len=8, padding_slot=0)


@given(st.integers(1, 300), st.integers(0, 320))
def test_choose_picks_the_smallest_bucket_that_fits(max_batch: int, n: int) -> None:
    config = DecodeGraphConfig(default_buckets(max_batch), max_seq_len=8, padding_slot=0)
    plan = choose(config, torch.ones(n, dtype=torch.int64))
    if n == 0 or n > max_batch:
        assert isinstance(plan, Eager)
        return
    assert isinstance(plan, Replay) and plan.num_reqs == n and plan.bucket >= n
    assert plan.bucket in config.buckets
    assert all(b < n for b in config.buckets if b < plan.bucket)
    assert plan.num_padded <= 7  # buckets step by 8 at most


def test_prefill_rows_run_eagerly() -> None:
    config = DecodeGraphConfig((1, 2, 4), max_seq_len=8, padding_slot=0)
    assert choose(config, torch.tensor([1, 3])) == Eager("the batch has prefill rows")
    assert "largest bucket" in choose(config, torch.ones(5, dtype=torch.int64)).reason


def test_static_inputs_keep_their_storage_and_pad_stale_rows() -> None:
    config = DecodeGraphConfig((2, 4), max_seq_len=6, padding_slot=99)
    static = StaticDecodeInputs(config, torch.device("cpu"))
    big = Replay(4, 4)
    first = static.load(big, torch.tensor([5, 6, 7, 8]), torch.tensor([3, 1, 2, 6]),
                        torch.arange(24).reshape(4, 6))
    small = Replay(4, 2)  # two requests in the bucket of 4: rows 2 and 3 were real before
    ids, lens, slots = static.load(small, torch.tensor([9, 10]), torch.tensor([2, 3]),
                                   torch.tensor([[40, 41, 0], [50, 51, 52]]))
    assert [t.data_ptr() for t in (ids, lens, slots)] == [t.data_ptr() for t in first]
    assert ids.tolist() == [9, 10, 0, 0]
    assert lens.tolist() == [2, 3, 1, 1]
    assert slots.tolist() == [[40, 41, 0, 99, 99, 99], [50, 51, 52, 99, 99, 99],
                              [99] * 6, [99] * 6]
    with pytest.raises(ValueError, match="expected 2 rows"):
        static.load(small, torch.tensor([1]), torch.tensor([1]), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="columns"):
        static.load(small, torch.tensor([1, 2]), torch.tensor([1, 1]),
                    torch.zeros(2, 7, dtype=torch.int64))
    with pytest.raises(ValueError, match="expected 4 rows"):
        unpad(torch.zeros(3, 5), small)


@pytest.mark.parametrize("page_size", [1, 16])
def test_padded_decode_step_matches_the_unpadded_one(tiny_llama_path, page_size) -> None:
    """Three requests padded to a bucket of 8: same logits, and the padded rows' KV writes
    land only on the reserved padding slot."""
    runner = ModelRunner(tiny_llama_path, RunnerConfig(page_size=page_size,
                                                       max_total_tokens=1024))
    alloc = runner.allocator
    pad_slot = alloc.extend_slots([], 1, True)[0][0]  # a page no request owns
    prompts = [[5, 9, 14, 3, 7], [8] * 19, [4, 4, 21]]
    held = []
    for ids in prompts:
        slots = alloc.extend_slots([], len(ids), True)[0]
        runner.forward([SeqSpec(ids, slots)])
        held.append(slots + alloc.extend_slots(slots, 1, True)[0])  # + the decoded token's
    new_ids = [11, 12, 13]
    eager = runner.forward([SeqSpec([t], s) for t, s in zip(new_ids, held)])
    kv_before = [buf.clone() for buf in runner.kv_pool.k_buffers]

    config = DecodeGraphConfig(default_buckets(16), runner.max_context, pad_slot)
    plan = choose(config, torch.ones(3, dtype=torch.int64))
    assert plan == Replay(4, 3)
    plan = Replay(8, 3)  # pad further than needed: more padded rows, same answer
    table = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in held], batch_first=True)
    batch = StaticDecodeInputs(config, runner.device).padded_batch(
        plan, torch.tensor(new_ids), torch.tensor([len(s) for s in held]), table, page_size,
        runner.workspace)
    padded = runner.forward(batch)
    assert padded.shape == (8, runner.vocab_size)
    torch.testing.assert_close(unpad(padded, plan), eager, atol=1e-5, rtol=0)
    changed: set[int] = set()
    for before, after in zip(kv_before, runner.kv_pool.k_buffers):
        b, a = before.flatten(0, 1), after.flatten(0, 1)  # [slots, H, D]
        changed |= set(torch.nonzero((a != b).any(-1).any(-1)).flatten().tolist())
    assert pad_slot in changed  # the padded rows did run ...
    assert changed <= {pad_slot} | {s[-1] for s in held}  # ... and wrote nowhere else
    for slots in held:
        alloc.free(pages_of(slots, page_size))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_capture_refuses_without_cuda() -> None:
    with pytest.raises(RuntimeError, match="CUDA graphs need a CUDA device"):
        DecodeGraph(torch.device("cpu"))
