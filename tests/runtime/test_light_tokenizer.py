"""The light tokenizer (``tokenizers`` alone) gives AutoTokenizer's results: ids, text, special
tokens, chat template, the fsm's token bytes and incremental detokenization, on the test
tokenizers and the real SmolLM2 and Gemma 3 ones; folders it cannot serve exactly load
through transformers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from radixlm.default_model import GEMMA3_PIP, gemma3_gguf_path, smollm2_gguf_path
from radixlm.fsm.tokens.vocabulary import tokenizer_token_bytes
from radixlm.runtime.light_tokenizer import LightTokenizer, load_hf_tokenizer, load_light_tokenizer
from radixlm.runtime.tokenizer_json_merges import with_legacy_merges
from radixlm.runtime.wire.detokenizer import IncrementalDetokenizer
from radixlm.runtime.wire.messages import DetokParams, FinishLength, ReqOut

TEXTS = ["Hello world", " leading space", "<|im_start|>user\nhi<|im_end|>\n", "", "a\n\n  b\t",
         "héllo ñ 日本語 🎉 ⅞", "<|endoftext|>x<|endoftext|>", "<bos>text<eos>", "  ", "1234567",
         '{"name": "Alice", "age": 34}', "don't stop", "\u200b\ufffd"]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 🎉"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More?"}]


def _folder(path: Path | None) -> Path:
    from radixlm.runtime.model.gguf_conversion import resolve_model_path

    return Path(resolve_model_path(str(path)))


@pytest.fixture(scope="module", params=["llama", "qwen3", "phi3", "gemma3", "smollm2"])
def folder(request: pytest.FixtureRequest) -> Path:
    """Each test tokenizer and SmolLM2's (its GGUF's cached folder)."""
    if request.param == "smollm2":
        return _folder(smollm2_gguf_path())
    return request.getfixturevalue(f"tiny_{request.param}_path")


def _pair(folder: Path) -> tuple[LightTokenizer, object]:
    light = load_light_tokenizer(folder)
    assert light is not None, f"{folder}: expected a plain tokenizer.json folder"
    return light, AutoTokenizer.from_pretrained(folder)


def _ids(full: object) -> list[int]:
    ids = [i for t in TEXTS for i in full(t).input_ids]
    return ids + list(range(min(len(full), 300)))  # specials and raw byte tokens too


def test_same_backend_ids_and_text(folder: Path) -> None:
    light, full = _pair(folder)
    assert light.backend_tokenizer.to_str() == full.backend_tokenizer.to_str()
    for text in TEXTS:
        assert light(text).input_ids == full(text).input_ids, text
        assert light(text)["attention_mask"] == full(text)["attention_mask"]
        for special in (True, False):
            assert light.encode(text, add_special_tokens=special) == \
                full.encode(text, add_special_tokens=special), text
    ids = _ids(full)
    for skip in (False, True):
        for spaces in (False, True):
            assert light.decode(ids, skip_special_tokens=skip,
                                spaces_between_special_tokens=spaces) == \
                full.decode(ids, skip_special_tokens=skip, spaces_between_special_tokens=spaces)
        assert light.decode([ids[:5], ids[5:9]], skip_special_tokens=skip) == \
            full.decode([ids[:5], ids[5:9]], skip_special_tokens=skip)
        assert light.convert_ids_to_tokens(ids, skip_special_tokens=skip) == \
            full.convert_ids_to_tokens(ids, skip_special_tokens=skip)
    assert light.decode(ids[0]) == full.decode(ids[0])
    assert light._full_tokenizer is None  # all of it without transformers' tokenizer


def test_same_special_tokens_and_vocabulary(folder: Path) -> None:
    light, full = _pair(folder)
    assert (len(light), light.vocab_size) == (len(full), full.vocab_size)
    assert light.special_tokens_map == full.special_tokens_map
    assert light.all_special_tokens == full.all_special_tokens
    assert light.all_special_ids == full.all_special_ids
    for attr in ("bos", "eos", "unk", "pad", "sep", "cls", "mask"):
        assert getattr(light, f"{attr}_token") == getattr(full, f"{attr}_token"), attr
        assert getattr(light, f"{attr}_token_id") == getattr(full, f"{attr}_token_id"), attr
    assert light.added_tokens_decoder == full.added_tokens_decoder
    assert light.added_tokens_encoder == full.added_tokens_encoder
    assert light.get_vocab() == full.get_vocab()
    assert tokenizer_token_bytes(light) == tokenizer_token_bytes(full)  # the fsm's vocabulary
    assert not hasattr(light, "byte_decoder") and not hasattr(full, "byte_decoder")
    assert light._full_tokenizer is None
    assert light.model_max_length == full.model_max_length  # anything else: transformers'


def test_same_chat_template_output(folder: Path) -> None:
    light, full = _pair(folder)
    assert light.chat_template == full.chat_template
    if full.chat_template is None:
        with pytest.raises(ValueError, match="chat_template"):
            light.apply_chat_template(MESSAGES, tokenize=False)
        return
    for prompt in (False, True):
        assert light.apply_chat_template(MESSAGES, tokenize=False,
                                         add_generation_prompt=prompt) == \
            full.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=prompt)
    assert light.apply_chat_template(MESSAGES[:-1], tokenize=False,
                                     continue_final_message=True) == \
        full.apply_chat_template(MESSAGES[:-1], tokenize=False, continue_final_message=True)
    own = "{% for m in messages %}[{{ m.role }}|{{ m.content }}|{{ flag }}]{% endfor %}"
    assert light.apply_chat_template(MESSAGES, tokenize=False, chat_template=own, flag=7) == \
        full.apply_chat_template(MESSAGES, tokenize=False, chat_template=own, flag=7)
    assert light._full_tokenizer is None
    # tokenized: transformers' own result (its tokenizer, loaded on first use)
    assert light.apply_chat_template(MESSAGES, add_generation_prompt=True) == \
        full.apply_chat_template(MESSAGES, add_generation_prompt=True)


def _detokenize(tokenizer: object, ids: list[int], params: DetokParams) -> list[str]:
    detok = IncrementalDetokenizer(tokenizer)
    deltas = []
    for i, tid in enumerate(ids):
        finish = FinishLength(length=len(ids)) if i == len(ids) - 1 else None
        out = ReqOut(rid="r", new_ids=[tid], finish_reason=finish, detok=params)
        deltas.append(detok.process(out).text_delta)
    return deltas


def test_same_incremental_detokenization(folder: Path) -> None:
    light, full = _pair(folder)
    ids = _ids(full)
    for skip in (True, False):
        params = DetokParams(skip_special_tokens=skip)
        assert _detokenize(light, ids, params) == _detokenize(full, ids, params)


def test_decode_only_decodes_the_same(folder: Path) -> None:
    """The detokenizer's tokenizer, built without the BPE merges: the same text."""
    light, full = _pair(folder)
    decoder = load_light_tokenizer(folder, decode_only=True)
    assert decoder is not None and len(decoder) == len(full)
    ids = _ids(full)
    for skip in (False, True):
        assert decoder.decode(ids, skip_special_tokens=skip) == \
            full.decode(ids, skip_special_tokens=skip)
        params = DetokParams(skip_special_tokens=skip)
        assert _detokenize(decoder, ids, params) == _detokenize(full, ids, params)


def test_merges_cut_where_they_are_not_last(tiny_llama_path: Path, tmp_path: Path) -> None:
    """A tokenizer.json whose model keys come in another order: the merges found by parsing."""
    folder = tmp_path / "tok"
    shutil.copytree(tiny_llama_path, folder)
    data = json.loads((folder / "tokenizer.json").read_text())
    model = data["model"]
    data["model"] = {"merges": model.pop("merges"), **model}  # merges first, vocab last
    (folder / "tokenizer.json").write_text(json.dumps(data))
    decoder = load_light_tokenizer(folder, decode_only=True)
    assert json.loads(decoder.backend_tokenizer.to_str())["model"]["merges"] == []
    full = AutoTokenizer.from_pretrained(tiny_llama_path)
    ids = _ids(full)
    assert decoder.decode(ids) == full.decode(ids)


def test_loads_without_transformers(tiny_llama_path: Path) -> None:
    """A process serving a plain folder never imports transformers (nor torch)."""
    code = ("import sys; from radixlm.runtime.light_tokenizer import load_hf_tokenizer as f; "
            f"t = f({str(tiny_llama_path)!r}); t.decode(t('hi there').input_ids); "
            "print(type(t).__name__, 'transformers' in sys.modules, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["LightTokenizer", "False", "False"]


@pytest.mark.parametrize("change", [
    {"add_bos_token": True}, {"extra_special_tokens": ["<x>"]}, {"tokenizer_class": "X"},
    {"clean_up_tokenization_spaces": True}, {"eos_token": "not-an-added-token"},
    {"split_special_tokens": True},
])
def test_other_folders_load_through_transformers(tiny_llama_path: Path, tmp_path: Path,
                                                 change: dict) -> None:
    folder = tmp_path / "tok"
    shutil.copytree(tiny_llama_path, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, **change}))
    assert load_light_tokenizer(folder) is None
    assert not isinstance(load_hf_tokenizer(folder), LightTokenizer)


def test_qwen2_loads_through_transformers(tiny_qwen2_path: Path) -> None:
    """AutoTokenizer gives a Qwen2 model its own class (a rebuilt pre-tokenizer), whatever
    tokenizer_config.json names: that tokenizer, not the file's backend."""
    assert load_light_tokenizer(tiny_qwen2_path) is None
    full = AutoTokenizer.from_pretrained(tiny_qwen2_path)
    tokenizer = load_hf_tokenizer(tiny_qwen2_path)
    assert type(tokenizer) is type(full)
    assert tokenizer.backend_tokenizer.to_str() == full.backend_tokenizer.to_str()


def test_gemma3_loads_through_transformers() -> None:
    """Gemma's class rebuilds its model from the vocabulary: transformers' tokenizer."""
    path = gemma3_gguf_path()
    if path is None:
        pytest.skip(f"Gemma 3 270M GGUF not installed: {GEMMA3_PIP}")
    folder = _folder(path)
    assert load_light_tokenizer(folder) is None
    tokenizer = load_hf_tokenizer(folder)
    assert type(tokenizer).__name__ == type(AutoTokenizer.from_pretrained(folder)).__name__


def test_merges_parsed_as_legacy_strings(folder: Path) -> None:
    """The merges reach ``tokenizers`` as ``"a b"`` strings (its parse peaks lower so), in
    their order; the tokenizer is the file's own (test_same_backend_ids_and_text)."""
    data = (folder / "tokenizer.json").read_bytes()
    pairs = json.loads(data)["model"]["merges"]
    legacy = json.loads(with_legacy_merges(data))
    assert legacy["model"]["merges"] == [" ".join(pair) for pair in pairs]
    assert {k: v for k, v in legacy.items() if k != "model"} == \
        {k: v for k, v in json.loads(data).items() if k != "model"}


def test_merges_with_a_space_stay_pairs(tiny_llama_path: Path, tmp_path: Path) -> None:
    """A token holding a space cannot be a legacy string: the file is parsed as it is, also
    where the merges are not the last key (found by parsing)."""
    data = json.loads((tiny_llama_path / "tokenizer.json").read_text())
    model = data["model"]
    model["vocab"]["a b"] = len(model["vocab"])
    model["merges"].append(["a b", "a b"])
    raw = json.dumps(data).encode()
    assert with_legacy_merges(raw) is raw
    data["model"] = {"merges": model.pop("merges"), **model}  # merges first, vocab last
    raw = json.dumps(data).encode()
    assert with_legacy_merges(raw) is raw
    data["model"]["merges"] = []
    raw = json.dumps(data).encode()
    assert with_legacy_merges(raw) is raw
