"""The verify extend's logits against one-token decode steps', measured (not bit-identical).

A verification runs the last token and k drafts as one extend; plain decoding runs them one
step each. Both compute the same function, but not bit for bit: the linears see k + 1 rows
instead of one (another GEMM blocking, other float rounding; plain decoding at batch k + 1
differs from batch 1 the same way), and the attention is the extend kernel. Measured here
(float32): ~1e-7..1e-6 on the tiny models, ~4e-5 on SmolLM2-135M (GGUF Q4_1 dequantized) with
the same argmax everywhere; routing the rows through decode attention (k + 1 one-token rows)
leaves the same ~4e-5, so the GEMM row count, not the attention kernel, is what differs. A
greedy tie within that margin could pick another token, as a change of batch size can.
"""

from __future__ import annotations

import torch

from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig

K, PROMPT = 6, list(range(200, 240))


def _decode_vs_verify(runner: ModelRunner) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits [K + 1, V] of K + 1 decode steps, and of the verify extend of the same tokens
    over the same prompt KV."""
    n = len(PROMPT)
    slots = list(runner.allocator.extend_slots([], n + K + 1, True)[0])
    with torch.inference_mode():
        tokens = [int(runner.forward([SeqSpec(PROMPT, slots[:n])])[-1].argmax())]
        steps = []
        for j in range(K + 1):
            out = runner.forward([SeqSpec([tokens[-1]], slots[: n + j + 1])])[-1]
            steps.append(out.clone())
            tokens.append(int(out.argmax()))
        verify = runner.forward([SeqSpec(tokens[: K + 1], slots[: n + K + 1], logits_start=0)])
    return torch.stack(steps), verify


def test_verify_rows_match_decode_steps_within_rounding(tiny_llama_path):
    runner = ModelRunner(tiny_llama_path, RunnerConfig(max_total_tokens=256))
    steps, verify = _decode_vs_verify(runner)
    assert verify.shape == steps.shape
    assert torch.equal(steps.argmax(-1), verify.argmax(-1))
    diff = (steps - verify).abs().max().item()
    assert diff < 1e-4, f"extend vs decode logits differ by {diff:.2e}"
