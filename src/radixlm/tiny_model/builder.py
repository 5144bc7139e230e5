"""Build a tiny Llama, Qwen2, Qwen3, Phi-3 or Gemma 3 checkpoint as a real Hugging Face
folder, offline.

The folder holds ``config.json``, ``generation_config.json``, ``model.safetensors`` and the
tokenizer files, loadable by ``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained`` and by
radixlm's own loader. Builds are deterministic for a given (arch, size, seed, train seconds
= 0); trained builds depend on how many steps fit in the time budget.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .corpus import generate_corpus
from .presets import model_shape
from .tokenizer import IM_END, train_tokenizer
from .trainer import pack_tokens, train_for

logger = logging.getLogger(__name__)

BUILD_VERSION = 1  # bump when the corpus, tokenizer or presets change
MARKER = "radixlm_tiny.json"
THETAS = {"llama": 10000.0, "qwen2": 1000000.0, "qwen3": 1000000.0, "phi3": 10000.0}
# Gemma 3 keys RoPE by layer type: a local base for sliding layers, the global one scaled
GEMMA3_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
               "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}}


@dataclass(frozen=True)
class TinyModelSpec:
    """What to build; validated on construction."""

    arch: str = "llama"
    size: str = "test"
    train_seconds: float = 0.0
    seed: int = 0
    vocab_size: int = 8192
    num_docs: int = 20000

    def __post_init__(self) -> None:
        model_shape(self.arch, self.size)  # validates arch and size
        if self.train_seconds < 0:
            raise ValueError(f"train_seconds must be >= 0, got {self.train_seconds}")
        if self.vocab_size < 300:
            raise ValueError(f"vocab_size must be >= 300 (bytes + specials), got "
                             f"{self.vocab_size}")

    def cache_name(self) -> str:
        t = f"{self.train_seconds:g}".replace(".", "p")
        return f"{self.arch}-{self.size}-seed{self.seed}-train{t}-v{BUILD_VERSION}"


def _hf_config(spec: TinyModelSpec, vocab: int, specials: dict[str, int]):  # noqa: ANN202
    from transformers import Gemma3TextConfig, LlamaConfig, Phi3Config, Qwen2Config, Qwen3Config

    shape = model_shape(spec.arch, spec.size)
    rope = (json.loads(json.dumps(GEMMA3_ROPE)) if spec.arch == "gemma3"  # a fresh copy
            else {"rope_type": "default", "rope_theta": THETAS[spec.arch]})
    if "partial_rotary_factor" in shape:  # transformers 5 reads it from rope_parameters
        rope["partial_rotary_factor"] = shape.pop("partial_rotary_factor")
    common = dict(
        vocab_size=vocab,
        max_position_embeddings=2048,
        rms_norm_eps=1e-6,
        bos_token_id=specials["bos"],
        eos_token_id=specials["eos"],
        pad_token_id=specials["pad"],
        rope_parameters=rope,
        **shape,
    )
    configs = {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config,
               "phi3": Phi3Config, "gemma3": Gemma3TextConfig}
    return configs[spec.arch](**common)


def _perturb(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Give norms and biases non-trivial values so the exactness tests exercise them."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=gen))


def build_tiny_model(spec: TinyModelSpec, out_dir: str | Path) -> Path:
    """Write the checkpoint for ``spec`` into ``out_dir`` (created; must be empty or absent)."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    docs = list(generate_corpus(spec.num_docs, spec.seed))
    tokenizer = train_tokenizer(docs, spec.vocab_size)
    specials = {
        "bos": tokenizer.bos_token_id,
        "eos": tokenizer.eos_token_id,
        "pad": tokenizer.pad_token_id,
    }
    padded_vocab = -(-len(tokenizer) // 64) * 64  # models pad the embedding beyond the tokenizer
    torch.manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(_hf_config(spec, padded_vocab, specials))
    _perturb(model, torch.Generator().manual_seed(spec.seed))
    losses: list[float] = []
    if spec.train_seconds > 0:
        encoded = tokenizer(docs, add_special_tokens=True)["input_ids"]
        data = pack_tokens(encoded, 128, specials["eos"])
        losses = train_for(model, data, spec.train_seconds, seed=spec.seed)
    model.generation_config = GenerationConfig(
        bos_token_id=specials["bos"],
        eos_token_id=[specials["eos"], tokenizer.convert_tokens_to_ids(IM_END)],
        pad_token_id=specials["pad"],
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    marker = {**asdict(spec), "build_version": BUILD_VERSION, "train_steps": len(losses),
              "final_loss": losses[-1] if losses else None,
              "parameters": sum(p.numel() for p in model.parameters())}
    (out / MARKER).write_text(json.dumps(marker, indent=2))
    return out


def ensure_tiny_model(spec: TinyModelSpec, cache_root: str | Path) -> Path:
    """Return the cached build of ``spec`` under ``cache_root``, building it on first use.

    Builds go to a temporary folder and are renamed into place, so concurrent callers never
    see a half-written checkpoint.
    """
    root = Path(cache_root)
    target = root / spec.cache_name()
    if (target / MARKER).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.cache_name()}-", dir=root))
    try:
        build_tiny_model(spec, tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process finished first
            if not (target / MARKER).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
