"""A Hugging Face tokenizer folder served by the Rust ``tokenizers`` backend alone, without
importing transformers (and, through it, torch: ~300 MiB of RSS in a process that only
tokenizes or detokenizes).

For the folders where transformers 5 does nothing but load ``tokenizer.json`` as it is (a
``TokenizersBackend`` / ``PreTrainedTokenizerFast`` class, every named special token already
a special added token of the file, a post-processor present, no keys in
``tokenizer_config.json`` that make transformers rewrite the backend or add tokens),
``AutoTokenizer.from_pretrained(folder)`` is that backend plus a few Python fields. There
:func:`load_light_tokenizer` gives a :class:`LightTokenizer` that answers what the runtime
asks (``tokenizer(text).input_ids``, ``encode``, ``decode``, ``len``,
``convert_ids_to_tokens``, the special tokens and their ids, ``chat_template``,
``apply_chat_template(..., tokenize=False)``) with transformers' own results: the same backend
calls transformers makes (tests compare both on the real and the test tokenizers). Anything
else, and any call with arguments it does not handle itself, goes to transformers' tokenizer,
loaded on first use: the object behaves as ``AutoTokenizer`` does, only lighter until then.
Every other folder loads through transformers (:func:`load_light_tokenizer` returns None).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

# transformers 5's tokenizer classes that load tokenizer.json unchanged (others, e.g.
# GemmaTokenizer, rebuild the model from its vocabulary and merges)
LIGHT_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"})
# transformers' named special tokens, in its order (PreTrainedTokenizerBase)
SPECIAL_TOKENS_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                             "cls_token", "mask_token")
# config.json model types (none: a tokenizer-only folder) for which transformers 5's
# AutoTokenizer keeps a TokenizersBackend class that tokenizer_config.json names; for others
# (qwen2: Qwen2Tokenizer; gemma via GemmaTokenizer configs; types unknown here) it may pick the
# type's own class, which rebuilds the pre-tokenizer
LIGHT_MODEL_TYPES = frozenset({"", "llama", "qwen3", "phi3", "gemma3", "gemma3_text"})
# tokenizer_config.json keys that change nothing transformers computes for these classes (a
# key not listed here, e.g. add_bos_token or extra_special_tokens, sends the folder to
# transformers)
PLAIN_KEYS = frozenset({"backend", "tokenizer_class", "model_max_length", "is_local",
                        "local_files_only", "name_or_path", "chat_template",
                        "clean_up_tokenization_spaces", "extra_special_tokens",
                        *SPECIAL_TOKENS_ATTRIBUTES})
# files that make transformers read more than tokenizer.json and the config
OTHER_TOKENIZER_FILES = ("special_tokens_map.json", "added_tokens.json",
                         "additional_chat_templates")
# transformers patches the pre-tokenizer of some vocabularies this large (Mistral's regex)
MAX_PLAIN_VOCAB = 100_000
CHAT_TEMPLATE_FILE = "chat_template.jinja"
# attributes of slow (Python) tokenizers that transformers' tokenizer.json classes lack: asked
# with hasattr (the fsm's vocabulary), they must not load transformers to say no
NOT_ON_FAST = frozenset({"byte_decoder", "sp_model", "byte_encoder"})


class Encoded(dict):
    """``tokenizer(text)``'s result: ``input_ids`` and ``attention_mask``, as keys and as
    attributes (what transformers' ``BatchEncoding`` gives for one text)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class LightTokenizer:
    """transformers' tokenizer for a plain ``tokenizer.json`` folder without transformers (see
    the module docstring); made by :func:`load_light_tokenizer`."""

    is_fast = True
    # transformers' default; a tokenizer_config.json that sets it is not plain (PLAIN_KEYS),
    # so it loads through transformers. Asked on every jump-forward (forced_text_encoder):
    # it must not load the full tokenizer.
    split_special_tokens = False
    _full_lock = threading.Lock()  # the scheduler's thread and the grammar worker may both ask

    def __init__(self, path: str, backend: Any, special: dict[str, str], extra: list[str],
                 chat_template: str | None) -> None:
        self.name_or_path = path
        self._tokenizer = backend
        self._special = special  # named special tokens (bos_token, ...)
        self._extra = extra  # extra_special_tokens
        self.chat_template = chat_template
        self._full_tokenizer: Any = None

    # -- what transformers would answer, from the backend -------------------------------
    @property
    def backend_tokenizer(self) -> Any:
        return self._tokenizer

    def __len__(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=False)

    @property
    def special_tokens_map(self) -> dict[str, str]:
        return dict(self._special)

    @property
    def all_special_tokens(self) -> list[str]:
        return list(dict.fromkeys([*self._special.values(), *self._extra]))

    @property
    def all_special_ids(self) -> list[int]:
        return [self._tokenizer.token_to_id(token) for token in self.all_special_tokens]

    @property
    def added_tokens_decoder(self) -> dict[int, Any]:
        return self._tokenizer.get_added_tokens_decoder()

    @property
    def added_tokens_encoder(self) -> dict[str, int]:
        return {t.content: i for i, t in sorted(self.added_tokens_decoder.items())}

    def get_vocab(self) -> dict[str, int]:
        return self._tokenizer.get_vocab(with_added_tokens=True)

    def encode(self, text: Any, add_special_tokens: bool = True, **kwargs: Any) -> list[int]:
        if kwargs or not isinstance(text, str):
            return self._full().encode(text, add_special_tokens=add_special_tokens, **kwargs)
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, text: Any, add_special_tokens: bool = True, **kwargs: Any) -> Any:
        if kwargs or not isinstance(text, str):
            return self._full()(text, add_special_tokens=add_special_tokens, **kwargs)
        ids = self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids
        return Encoded(input_ids=ids, attention_mask=[1] * len(ids))

    def decode(self, token_ids: Any, skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> Any:
        """transformers' ``decode``: a batch (a list of lists) gives a list of texts; its
        other keyword arguments (``spaces_between_special_tokens``) change nothing for a
        ``tokenizer.json`` tokenizer."""
        if clean_up_tokenization_spaces:  # a WordPiece clean-up: transformers' own code
            return self._full().decode(token_ids, skip_special_tokens=skip_special_tokens,
                                       clean_up_tokenization_spaces=True, **kwargs)
        if hasattr(token_ids, "tolist"):  # numpy / torch, as transformers' to_py_obj
            token_ids = token_ids.tolist()
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if isinstance(token_ids, (list, tuple)) and token_ids and \
                isinstance(token_ids[0], (list, tuple)):
            return [self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
                    for ids in token_ids]
        return self._tokenizer.decode(list(token_ids), skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> Any:
        if isinstance(ids, int):
            return self._tokenizer.id_to_token(ids)
        skip = set(self.all_special_ids) if skip_special_tokens else set()
        return [self._tokenizer.id_to_token(int(i)) for i in ids if int(i) not in skip]

    def apply_chat_template(self, conversation: Any, *args: Any, tokenize: bool = True,
                            **kwargs: Any) -> Any:
        """transformers' ``apply_chat_template``: its own code renders the text
        (``tokenize=False``, importing only its tokenizer base module, no torch); a tokenized
        result comes from transformers' tokenizer."""
        if tokenize or args:
            return self._full().apply_chat_template(conversation, *args, tokenize=tokenize,
                                                    **kwargs)
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase

        return PreTrainedTokenizerBase.apply_chat_template(self, conversation, tokenize=False,
                                                           **kwargs)

    def get_chat_template(self, chat_template: str | None = None, tools: Any = None) -> str:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase

        return PreTrainedTokenizerBase.get_chat_template(self, chat_template, tools)

    # -- the rest: transformers' tokenizer, on first use -----------------------------------
    def _full(self) -> Any:
        with self._full_lock:  # one import of transformers at a time: its lazy module is not
            if self._full_tokenizer is None:  # safe to import from two threads at once
                from transformers import AutoTokenizer

                self._full_tokenizer = AutoTokenizer.from_pretrained(self.name_or_path)
        return self._full_tokenizer

    def __getattr__(self, name: str) -> Any:
        # only reached when ordinary lookup fails; private names never load transformers
        # (copy/pickle probe them on a half-built object)
        if name.startswith("_") or name in NOT_ON_FAST:
            raise AttributeError(name)
        if name in SPECIAL_TOKENS_ATTRIBUTES:
            return self._special.get(name)
        if name.endswith("_id") and name[:-3] in SPECIAL_TOKENS_ATTRIBUTES:
            token = self._special.get(name[:-3])
            return None if token is None else self._tokenizer.token_to_id(token)
        return getattr(self._full(), name)

    def __repr__(self) -> str:
        return (f"LightTokenizer(name_or_path={self.name_or_path!r}, "
                f"vocab_size={self.vocab_size}, len={len(self)})")


def load_light_tokenizer(path: str | Path, decode_only: bool = False) -> LightTokenizer | None:
    """A :class:`LightTokenizer` for a local folder transformers would load as ``tokenizer.json``
    unchanged, else None (load it with ``AutoTokenizer``).

    ``decode_only``: a BPE model is built without its merges, which only encoding reads
    (decoding maps ids to tokens and runs the decoder): for the detokenizer, whose peak RSS
    is this parse (SmolLM2: +14 MiB instead of +41). Its ``encode`` must not be called."""
    folder = Path(path)
    config_file, backend_file = folder / "tokenizer_config.json", folder / "tokenizer.json"
    if not (config_file.is_file() and backend_file.is_file()):
        return None
    if any((folder / name).exists() for name in OTHER_TOKENIZER_FILES):
        return None
    config = json.loads(config_file.read_text(encoding="utf-8"))
    model_file = folder / "config.json"
    model_type = (json.loads(model_file.read_text(encoding="utf-8")).get("model_type", "")
                  if model_file.is_file() else "")
    if model_type not in LIGHT_MODEL_TYPES:
        return None
    if config.get("tokenizer_class") not in LIGHT_CLASSES or set(config) - PLAIN_KEYS \
            or config.get("clean_up_tokenization_spaces"):
        return None
    special = {attr: config[attr] for attr in SPECIAL_TOKENS_ATTRIBUTES
               if config.get(attr) is not None}
    extra = config.get("extra_special_tokens", [])
    if not isinstance(extra, list) or \
            not all(isinstance(token, str) for token in [*special.values(), *extra]):
        return None  # an AddedToken dict, named extras: transformers' own handling
    from tokenizers import Tokenizer

    from .bpe_file_load import load_bpe_from_files
    from .tokenizer_json_merges import with_legacy_merges, without_merges

    # bytes, not str: a byte-level vocabulary's text is 2 bytes a character. The same
    # tokenizer by the path whose load peaks lowest: a BPE model from files
    # (bpe_file_load.py), else the merges as legacy strings (tokenizer_json_merges.py)
    data = backend_file.read_bytes()
    backend = None if decode_only else load_bpe_from_files(data)
    if backend is None:
        rewrite = without_merges if decode_only else with_legacy_merges
        data = rewrite(data)  # the file's bytes freed before the parse (its peak)
        backend = Tokenizer.from_buffer(data)
    del data
    added = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
    if backend.post_processor is None or backend.truncation is not None or \
            backend.padding is not None or backend.get_vocab_size() > MAX_PLAIN_VOCAB or \
            any(token not in added for token in [*special.values(), *extra]):
        return None
    template_file = folder / CHAT_TEMPLATE_FILE
    template = (template_file.read_text(encoding="utf-8") if template_file.is_file()
                else config.get("chat_template"))
    return LightTokenizer(str(path), backend, special, extra, template)


def load_hf_tokenizer(path: str | Path) -> Any:
    """``AutoTokenizer.from_pretrained(path)``'s tokenizer: a :class:`LightTokenizer` where the
    folder allows one (transformers not imported), else transformers' own."""
    light = load_light_tokenizer(path)
    if light is not None:
        return light
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))
