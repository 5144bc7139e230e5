"""The built-in tiny checkpoints are real Hugging Face folders, built offline."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from radixlm.cli import main as cli_main
from radixlm.tiny_model import TinyModelSpec
from radixlm.tiny_model.corpus import generate_corpus
from radixlm.tiny_model.trainer import pack_tokens, train_for


def test_tokenizer_has_realistic_merges_and_specials(tiny_llama_path):
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    assert 7500 <= len(tok) <= 8192
    vocab = tok.get_vocab()
    for merge in ('{"', '":', "Ġthe"):
        assert merge in vocab, f"expected the merge {merge!r} in the vocabulary"
    assert tok.convert_ids_to_tokens([0, 1, 2, 3, 4]) == [
        "<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|im_start|>", "<|im_end|>"]
    ids = tok("hello").input_ids
    assert ids[0] == tok.bos_token_id and tok.decode(ids, skip_special_tokens=True) == "hello"
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                   add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "phi3"])
def test_checkpoint_loads_offline_with_transformers(request, arch):
    path = request.getfixturevalue(f"tiny_{arch}_path")
    model = AutoModelForCausalLM.from_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == arch and cfg["vocab_size"] % 64 == 0
    out = model(torch.tensor([[0, 5, 6]])).logits
    assert out.shape == (1, 3, cfg["vocab_size"])
    gen = json.loads((path / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [1, 4]


def test_builds_are_deterministic(tmp_path):
    a = cli_main(["make-tiny-model", str(tmp_path / "a"), "--size", "test"])
    b = cli_main(["make-tiny-model", str(tmp_path / "b"), "--size", "test"])
    assert a == b == 0
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == \
        (tmp_path / "b" / "model.safetensors").read_bytes()


def test_short_training_lowers_the_loss():
    from radixlm.tiny_model.tokenizer import train_tokenizer

    docs = list(generate_corpus(800, seed=3))
    tok = train_tokenizer(docs, 600)
    data = pack_tokens(tok(docs)["input_ids"], 32, tok.eos_token_id)
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32,
                                         intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    losses = train_for(model, data, seconds=3.0, batch_size=8, lr=1e-2)
    assert len(losses) > 10 and min(losses[-5:]) < losses[0] - 1.0


def test_spec_validation_names_the_field():
    with pytest.raises(ValueError, match="arch must be one of"):
        TinyModelSpec(arch="gpt2")
    with pytest.raises(ValueError, match="train_seconds"):
        TinyModelSpec(train_seconds=-1)
