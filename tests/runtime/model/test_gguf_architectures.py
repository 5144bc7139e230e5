"""GGUF files of the ``llama``, ``qwen2``, ``qwen3`` and ``phi3`` architectures, written from
the tiny Hugging Face checkpoints in llama.cpp's layout (``testing/llama_cpp_writer.py``: its
metadata keys and tensor names, q/k rows permuted for ``llama`` only, 1-D tensors F32, matrices
F32, Q8_0 or Q4_0, its precomputed RoPE tensors), load in radixlm and equal transformers on the
same weights: prefill logits within 1e-4 of the logit scale, greedy tokens identical; the
converted tokenizer encodes as transformers' own reading of the file's tokenizer metadata. For
Q8_0 and Q4_0, transformers gets the gguf package's dequantization of the same blocks. Families
llama.cpp writes as one of these (Mistral as ``llama``, Llama 3.x RoPE as ``llama`` plus
``rope_freqs``, Phi-3 128k as ``phi3`` plus longrope factors, Phi-3's window as
``attention.sliding_window``) run in F32. The oracle is
transformers on the Hugging Face folder: its own GGUF loader (5.x) ignores
``attention.key_length``, ``rope_freqs`` and Phi-3's ``rope.dimension_count``, and so builds
these checkpoints wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from radixlm.runtime.model.gguf_checkpoint import GGUFCheckpoint
from radixlm.runtime.model.gguf_conversion import ensure_converted
from radixlm.runtime.model.model_config import ModelConfig
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.models.rope import cos_sin_tables
from radixlm.testing.greedy import greedy_generate
from radixlm.testing.llama_cpp_writer import write_like_llama_cpp
from radixlm.testing.prefill_oracle import assert_prefill_matches_hf

PROMPTS = ["The capital of France is", "Question: What is 3 plus 4?\nAnswer:", "x"]
NEW_TOKENS = 24
REL_TOL = 1e-4  # max |ours - transformers| relative to max |transformers logit|


ARCHS = ["llama", "qwen2", "qwen3", "phi3"]  # tiny checkpoints (conftest.py)
FAMILIES = ["mistral", "llama3-rope", "phi3-window", "phi3-longrope"]  # their config variants
# (checkpoint, tensor type): every architecture in every type, each family in F32
CASES = [(a, q) for a in ARCHS for q in ("F32", "Q8_0", "Q4_0")] + [(f, "F32") for f in FAMILIES]


@pytest.fixture(scope="module", params=CASES, ids=[f"{a}-{q}" for a, q in CASES])
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


@pytest.fixture(scope="module")
def arch(case: tuple[str, str]) -> str:
    return case[0]


@pytest.fixture(scope="module")
def hf_folder(arch: str, request: pytest.FixtureRequest) -> Path:
    if arch in FAMILIES:
        return request.getfixturevalue("tiny_variant_path")(arch)
    return request.getfixturevalue(f"tiny_{arch}_path")


@pytest.fixture(scope="module")
def converted(hf_folder: Path, case: tuple[str, str],
              tmp_path_factory: pytest.TempPathFactory):
    """(the GGUF, radixlm's conversion folder of it, transformers on the file's weights)."""
    tmp = tmp_path_factory.mktemp("gguf-arch")
    expected = write_like_llama_cpp(hf_folder, tmp / "m.gguf", case[1])
    folder = ensure_converted(tmp / "m.gguf", tmp / "cache")
    hf = AutoModelForCausalLM.from_pretrained(hf_folder, dtype=torch.float32).eval()
    params = hf.state_dict()
    with torch.no_grad():
        for name, w in expected.items():
            params[name].copy_(w)
    return tmp / "m.gguf", folder, hf


def test_the_config_names_the_architecture_and_its_fields(arch, hf_folder, tmp_path):
    write_like_llama_cpp(hf_folder, tmp_path / "m.gguf", "F32")
    ours = ModelConfig.from_dict(GGUFCheckpoint(tmp_path / "m.gguf").hf_config())
    ref = ModelConfig.from_folder(hf_folder)
    assert ours.model_type == {"mistral": "llama", "llama3-rope": "llama"}.get(
        arch, arch.split("-")[0])
    for field in ("hidden_size", "intermediate_size", "num_layers", "num_heads",
                  "num_kv_heads", "head_dim", "rotary_dim", "vocab_size", "tie_word_embeddings",
                  "qkv_bias", "o_bias", "sliding_windows"):
        assert getattr(ours, field) == getattr(ref, field), field
    assert ours.rms_norm_eps == pytest.approx(ref.rms_norm_eps, rel=1e-7)  # GGUF stores f32
    if arch in ARCHS:
        assert (ours.architecture, ours.rope) == (ref.architecture, ref.rope)
    else:  # served as the file's architecture, RoPE precomputed (and stored f32) by llama.cpp
        assert ours.rope.max_positions == ref.rope.max_positions
        cpu = torch.device("cpu")
        for a, b in zip(cos_sin_tables(ours.rope, ours.rotary_dim, 256, cpu),
                        cos_sin_tables(ref.rope, ref.rotary_dim, 256, cpu)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_the_converted_tokenizer_encodes_as_transformers_gguf_tokenizer(converted):
    path, folder, _ = converted
    ours = AutoTokenizer.from_pretrained(folder)
    ref = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    for text in [*PROMPTS, '{"a": [1, 22, 333]}\n\tend <|im_end|>']:
        assert ours(text).input_ids == ref(text).input_ids, text


def test_prefill_logits_match_transformers(converted, hf_folder):
    _, folder, hf = converted
    runner = ModelRunner(folder, RunnerConfig(page_size=16, max_total_tokens=512))
    tok = AutoTokenizer.from_pretrained(hf_folder)
    prompts = [tok(p).input_ids for p in PROMPTS]
    assert_prefill_matches_hf(runner, hf, prompts, REL_TOL, min_std=0.01)


def test_greedy_tokens_match_transformers(converted, hf_folder):
    _, folder, hf = converted
    runner = ModelRunner(folder, RunnerConfig(page_size=1, max_total_tokens=512))
    tok = AutoTokenizer.from_pretrained(hf_folder)
    prompts = [tok(p).input_ids for p in PROMPTS]
    eos = list(runner.model_config.eos_token_ids)
    ours = greedy_generate(runner, prompts, NEW_TOKENS, stop_token_ids=eos)
    for ids, out in zip(prompts, ours):
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                          eos_token_id=eos, attention_mask=torch.ones(1, len(ids),
                                                                      dtype=torch.long))
        assert out == ref[0, len(ids):].tolist()
