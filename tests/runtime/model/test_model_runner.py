"""The model runner is exact against Hugging Face transformers on the same weights, for every
served family (Llama, Qwen2, Qwen3, Phi-3, Gemma 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.forward_batch import ContextLengthError, SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate

PROMPTS = [
    "The capital of France is",
    '{"name": "Heidi", "age": 6, "city": "Paris", "job": "teacher", "tags": ["calm", "kind"]',
    "Question: What is 3 plus 4?\nAnswer:",
    "x",
]
TOL = 1e-4


@pytest.fixture(scope="module")
def hf_models() -> dict[Path, torch.nn.Module]:
    return {}


def hf_model(path: Path, cache: dict[Path, torch.nn.Module]) -> torch.nn.Module:
    if path not in cache:
        cache[path] = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return cache[path]


def encode(path: Path, texts: list[str]) -> list[list[int]]:
    tok = AutoTokenizer.from_pretrained(path)
    return [tok(t).input_ids for t in texts]


def make_runner(path: Path, page_size: int, total: int = 4096) -> ModelRunner:
    return ModelRunner(path, RunnerConfig(page_size=page_size, max_total_tokens=total))


def hf_logits(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()  # [len, vocab]


def alloc(runner: ModelRunner, prefix: list[int], n: int, owned: bool = True) -> list[int]:
    new, _ = runner.allocator.extend_slots(prefix, n, owned)
    return list(prefix) + new


@pytest.mark.parametrize("page_size", [1, 16])
def test_prefill_logits_match_hf(tiny_family_path, hf_models, page_size):
    runner = make_runner(tiny_family_path, page_size)
    hf = hf_model(tiny_family_path, hf_models)
    prompts = encode(tiny_family_path, PROMPTS)
    specs = [SeqSpec(ids, alloc(runner, [], len(ids)), logits_start=0) for ids in prompts]
    logits = runner.forward(specs)
    assert logits.shape == (sum(map(len, prompts)), runner.vocab_size)
    row = 0
    for ids in prompts:
        ref = hf_logits(hf, ids)
        assert ref.std() > 0.01, "degenerate reference logits would make the check vacuous"
        torch.testing.assert_close(logits[row : row + len(ids)], ref, atol=TOL, rtol=0)
        row += len(ids)


@pytest.mark.parametrize("page_size", [1, 16])
def test_greedy_64_tokens_match_hf_generate(tiny_family_path, hf_models, page_size):
    runner = make_runner(tiny_family_path, page_size)
    hf = hf_model(tiny_family_path, hf_models)
    prompts = encode(tiny_family_path, PROMPTS[:3])
    eos = list(runner.model_config.eos_token_ids)
    ours = greedy_generate(runner, prompts, 64, stop_token_ids=eos)
    for ids, out in zip(prompts, ours):
        ref = hf.generate(
            torch.tensor([ids]), max_new_tokens=64, do_sample=False, eos_token_id=eos,
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        )[0, len(ids):].tolist()
        assert out == ref
    assert max(len(o) for o in ours) == 64
    assert runner.allocator.num_free_pages == runner.allocator.num_pages


@pytest.mark.parametrize(
    ("page_size", "prefix_len"), [(1, 7), (16, 16), (16, 21), (16, 5)]
)
def test_extend_with_cached_prefix_equals_whole(tiny_family_path, page_size, prefix_len):
    runner = make_runner(tiny_family_path, page_size)
    (ids,) = encode(tiny_family_path, [PROMPTS[1] + " and more words after the record"])
    assert len(ids) > prefix_len + 4
    whole = runner.forward([SeqSpec(ids, alloc(runner, [], len(ids)), logits_start=0)])
    # Another request computes the prefix; this one borrows its slots (possibly a partial page
    # it does not own) and extends with the suffix into fresh pages.
    owner = alloc(runner, [], prefix_len)
    runner.forward([SeqSpec(ids[:prefix_len], owner)])
    borrowed = alloc(runner, owner, len(ids) - prefix_len, owned=False)
    assert not set(borrowed[prefix_len:]) & set(owner)
    suffix = runner.forward([SeqSpec(ids[prefix_len:], borrowed, logits_start=0)])
    torch.testing.assert_close(suffix, whole[prefix_len:], atol=TOL, rtol=0)


@pytest.mark.parametrize("page_size", [1, 16])
def test_mixed_extend_and_decode_batch_equals_each_alone(tiny_family_path, page_size):
    runner = make_runner(tiny_family_path, page_size)
    prompts = encode(tiny_family_path, PROMPTS)
    # Requests 0 and 2 hold their prompts in the pool and decode one token; 1 prefills; 3 is a
    # one-token prompt (empty prefix) and so rides the decode path.
    held = {}
    for i in (0, 2):
        held[i] = alloc(runner, [], len(prompts[i]))
        runner.forward([SeqSpec(prompts[i], held[i])])

    def spec(i: int) -> SeqSpec:
        if i in held:  # fresh slot for the new token each time; the prefix is only read
            return SeqSpec([11 + i], alloc(runner, held[i], 1, owned=False))
        return SeqSpec(prompts[i], alloc(runner, [], len(prompts[i])))

    alone = [runner.forward([spec(i)]) for i in range(len(prompts))]
    mixed = runner.forward([spec(i) for i in range(len(prompts))])
    torch.testing.assert_close(mixed, torch.cat(alone), atol=TOL, rtol=0)


def test_many_requests_return_the_pool_to_free(tiny_llama_path):
    runner = make_runner(tiny_llama_path, page_size=16, total=512)
    prompts = encode(tiny_llama_path, PROMPTS) * 5
    for start in range(0, len(prompts), 4):
        greedy_generate(runner, prompts[start : start + 4], 8)
    assert runner.allocator.num_free_pages == runner.allocator.num_pages
    held = [alloc(runner, [], 40) for _ in range(3)]
    assert runner.allocator.num_free_pages == runner.allocator.num_pages - 3 * 3
    for slots in held:
        runner.allocator.free(pages_of(slots, 16))
    assert runner.allocator.num_free_pages == runner.allocator.num_pages


def test_bfloat16_runner_tracks_float32(tiny_llama_path):
    (ids,) = encode(tiny_llama_path, PROMPTS[:1])
    out = {}
    for dtype in ("float32", "bfloat16"):
        r = ModelRunner(tiny_llama_path, RunnerConfig(dtype=dtype, max_total_tokens=256))
        assert r.kv_pool.k_buffers[0].dtype == getattr(torch, dtype)
        out[dtype] = r.forward([SeqSpec(ids, alloc(r, [], len(ids)), logits_start=0)])
    assert (out["bfloat16"] - out["float32"]).abs().max() < 0.1
    assert out["bfloat16"].argmax(-1).tolist() == out["float32"].argmax(-1).tolist()


def test_prompt_longer_than_context_is_refused(tiny_llama_path):
    runner = ModelRunner(tiny_llama_path, RunnerConfig(max_total_tokens=256, max_context=32))
    ids = list(range(5, 45))
    with pytest.raises(ContextLengthError, match="40 tokens exceeds the model's context of 32"):
        runner.forward([SeqSpec(ids, alloc(runner, [], len(ids)))])


VARIANTS = {
    "llama3-rope": dict(rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
    "linear-rope": dict(rope_parameters={"rope_type": "linear", "rope_theta": 5e5, "factor": 4.0}),
    "mistral-window": dict(architectures=["MistralForCausalLM"], model_type="mistral",
                           sliding_window=8),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_config_variants_match_hf(tiny_llama_path, tmp_path, variant):
    """RoPE scalings and Mistral's sliding window, prefill and greedy decode, against HF."""
    import json
    import shutil

    path = tmp_path / variant
    shutil.copytree(tiny_llama_path, path)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(VARIANTS[variant])
    (path / "config.json").write_text(json.dumps(cfg))
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    runner = make_runner(path, page_size=4)
    (ids,) = encode(path, [PROMPTS[1]])
    logits = runner.forward([SeqSpec(ids, alloc(runner, [], len(ids)), logits_start=0)])
    torch.testing.assert_close(logits, hf_logits(hf, ids), atol=TOL, rtol=0)
    ours = greedy_generate(runner, [ids], 24)[0]
    ref = hf.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                      attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                      eos_token_id=None)[0, len(ids):].tolist()
    assert ours == ref[: len(ours)] and len(ours) == 24
