"""A family's exactness through the Engine: greedy tokens and per-token logprobs against
transformers, with the radix cache cold (just flushed) and warm (the same prompts again)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from radixlm.runtime.api.engine import Engine

PROMPTS = [
    "Document: Meet Carol, a teacher from Rome. Carol is 41 and likes chess, tea and long "
    "walks by the river. Her brother Dan is a baker in Milan.\nJSON:",
    '{"name": "Heidi", "age": 6, "city": "Paris", "job": "teacher", "tags": ["calm", "kind"]',
    "Question: What is 3 plus 4?\nAnswer:",
]
GREEDY = {"temperature": 0.0, "max_new_tokens": 24}
TOL = 1e-4  # x the logit scale (largest |logit| of the reference)


def hf_reference(hf: torch.nn.Module, ids: list[int]) -> tuple[list[int], list[float], float]:
    """transformers' greedy continuation of ``ids``, each new token's logprob, logit scale."""
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                          dtype=torch.long), max_new_tokens=GREEDY["max_new_tokens"],
                          do_sample=False)[0, len(ids):].tolist()
        logits = hf(torch.tensor([ids + out[:-1]])).logits[0, len(ids) - 1:].float()
    lps = torch.log_softmax(logits, -1).gather(1, torch.tensor(out)[:, None]).flatten()
    return out, lps.tolist(), logits.abs().max().item()


@pytest.fixture(scope="module")
def engine_prompts() -> list[str]:
    """The prompts :func:`check_engine_against_hf` generates from."""
    return PROMPTS


@pytest.fixture(scope="module")
def check_engine_against_hf(make_engine) -> Callable[..., None]:  # noqa: ANN001
    """``check(path, page_size, hf_path=path)``: an Engine on ``path`` (a folder or a GGUF
    file) generates every prompt twice (cold, then warm from its radix cache); tokens equal
    those of transformers on ``hf_path``, logprobs within TOL."""

    def check(path: Path, page_size: int, hf_path: Path | None = None) -> None:
        engine = make_engine(path, page_size=page_size)
        try:
            compare(engine, hf_path or path, page_size)
        finally:  # one engine alive at a time: every family x page size starts one
            engine.shutdown()

    def compare(engine: Engine, hf_path: Path, page_size: int) -> None:
        hf = AutoModelForCausalLM.from_pretrained(hf_path, dtype=torch.float32).eval()
        ids = [engine.tokenizer(p).input_ids for p in PROMPTS]
        refs = [hf_reference(hf, i) for i in ids]
        assert engine.flush_cache()
        for warm in (False, True):
            outs = engine.generate(PROMPTS, GREEDY, return_logprob=True)
            for prompt_ids, out, (tokens, ref_lps, scale) in zip(ids, outs, refs):
                meta = out["meta_info"]
                if not warm:  # at most the BOS token another prompt of the batch shares
                    assert meta["cached_tokens"] <= 1
                elif len(prompt_ids) > page_size + 1:  # at least one whole page to reuse
                    assert meta["cached_tokens"] > 0
                assert out["output_ids"] == tokens
                lps = [lp for lp, _, _ in meta["output_token_logprobs"]]
                assert len(lps) == len(ref_lps)
                assert max(abs(a - b) for a, b in zip(lps, ref_lps)) < TOL * scale

    return check
