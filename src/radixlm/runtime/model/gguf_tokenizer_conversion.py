"""A GGUF file's tokenizer as a Hugging Face tokenizer folder, converted once and cached.

transformers builds the tokenizer from the GGUF metadata (``AutoTokenizer.from_pretrained(...,
gguf_file=...)``). That is slow on big vocabularies: on Gemma 3's 262,144 tokens about 30 s
and 1 GiB peak RSS (most of it ``gguf.GGUFReader`` building objects per array element), for a
33 MB ``tokenizer.json`` that loads again in ~3 s. So the result is cached:

* :func:`write_tokenizer` writes the converted tokenizer (with the GGUF's chat template) into
  a folder; the full model conversion (:mod:`.gguf_conversion`) uses it;
* :func:`ensure_tokenizer_converted` returns a folder holding only the tokenizer, for users of
  the vocabulary that need no weights (the fsm's tests and benchmarks): the full conversion's
  folder when it is there, else ``<stem>-<key>.tokenizer`` beside it, written once.
"""

from __future__ import annotations

from pathlib import Path

from ...fsm.tokens.gguf_tokenizer_metadata import read_tokenizer_metadata
from .gguf_conversion import converted_folder, default_cache_root, write_atomically
from .model_config import UnsupportedModelError


def write_tokenizer(gguf_path: Path, folder: Path, tokenizer_model: str | None,
                    chat_template: str | None) -> None:
    """Save transformers' tokenizer built from ``gguf_path``'s metadata into ``folder``
    (``tokenizer_model``: the file's ``tokenizer.ggml.model``, for the error message)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types here
        raise UnsupportedModelError(
            f"{gguf_path}: transformers could not build a tokenizer from the GGUF metadata "
            f"(tokenizer.ggml.model={tokenizer_model!r}): {exc}; pass --tokenizer-path to a "
            f"Hugging Face tokenizer folder") from exc
    if chat_template and not getattr(tok, "chat_template", None):
        tok.chat_template = chat_template
    tok.save_pretrained(str(folder))


def ensure_tokenizer_converted(gguf_path: str | Path, cache_root: Path | None = None) -> Path:
    """A folder with ``gguf_path``'s tokenizer files (see the module docstring)."""
    gguf_path = Path(gguf_path)
    cache_root = cache_root or default_cache_root()
    full = converted_folder(gguf_path, cache_root)
    if (full / "tokenizer_config.json").is_file():
        return full
    out = full.with_name(full.name + ".tokenizer")
    if (out / "tokenizer_config.json").is_file():
        return out
    meta = read_tokenizer_metadata(gguf_path)
    if meta.model is None:
        raise UnsupportedModelError(f"{gguf_path} has no tokenizer metadata")
    write_atomically(out, "tokenizer_config.json", lambda tmp: write_tokenizer(
        gguf_path, tmp, meta.model, meta.values.get("chat_template")))
    return out
