"""An 8B-shaped Llama with random bf16 weights through the Engine: throughput, decode, KV waste.

    python benchmarks/gpu/engine_8b.py --out DIR                       # H200: Llama 3.1 8B shape
    python benchmarks/gpu/engine_8b.py --out DIR --tiny --device cpu   # the same flow in seconds

Nothing is downloaded: the checkpoint folder (config, a word-level tokenizer over the whole
vocabulary, safetensors shards of random weights generated on ``--device``) is written first.
Sections, each added to ``DIR/engine_8b.json`` as soon as it ends (a killed run keeps them):

* ``random``: offline throughput on ``bench_serving --dataset-name random``-style requests:
  input and output lengths drawn uniformly from ``[max(1, int(L * ratio)), L]``, prompt tokens
  uniform over the vocabulary, EOS ignored; all requests submitted at once.
* ``rag``: one shared document + a distinct question per request (the shared-prefix case).
* ``decode``: decode tok/s at batch 1, 8, 64, 256: (time of N new tokens - time of 1) per token.
* ``kv_waste``: the random and rag workloads' mean KV waste at page 16 (the main engine) and
  page 1 (a second engine on the same weights).

The KV pool holds ``--mem-fraction-static`` of the GPU's memory minus the weights (computed
here: the engine itself does not size its pool from memory yet).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: WasteSampler
from shared_prefix import WasteSampler  # noqa: E402

from radixlm.runtime.api.engine import Engine  # noqa: E402

LLAMA_31_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                   vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                   rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                    "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192})
TINY = dict(LLAMA_31_8B, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=512)


@dataclass(frozen=True)
class Workload:
    """Sizes of every section (8B defaults; ``--tiny`` shrinks them)."""

    num_prompts: int = 500
    input_len: int = 1024
    output_len: int = 1024
    range_ratio: float = 0.5
    rag_requests: int = 64
    rag_doc_len: int = 1500
    rag_question_len: int = 40
    rag_output_len: int = 32
    decode_batches: tuple[int, ...] = (1, 8, 64, 256)
    decode_input_len: int = 128
    decode_output_len: int = 128
    page1_prompts: int = 100  # random requests for the page-1 waste figure


TINY_WORKLOAD = Workload(num_prompts=12, input_len=24, output_len=8, rag_requests=6,
                         rag_doc_len=40, rag_question_len=4, rag_output_len=4,
                         decode_batches=(1, 4), decode_input_len=8, decode_output_len=4,
                         page1_prompts=6)


# --------------------------------------------------------------------------- checkpoint


def _config(shape: dict) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "torch_dtype": "bfloat16", "tie_word_embeddings": False, "bos_token_id": 0,
            "eos_token_id": 1, "hidden_act": "silu", **shape}


def _tokenizer(vocab: int):  # noqa: ANN202
    """A word-level tokenizer with one token per id, so every sampled id decodes."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {"<s>": 0, "</s>": 1, **{f"w{i}": i for i in range(2, vocab)}}
    tok = Tokenizer(models.WordLevel(words, unk_token="</s>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def _layer_shapes(shape: dict, i: int) -> dict[str, tuple[int, ...]]:
    h, inter = shape["hidden_size"], shape["intermediate_size"]
    q = shape["num_attention_heads"] * shape["head_dim"]
    kv = shape["num_key_value_heads"] * shape["head_dim"]
    p = f"model.layers.{i}."
    return {p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (inter, h), p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter), p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,)}


def _random_tensors(shapes: dict[str, tuple[int, ...]], gen: torch.Generator,
                    device: torch.device) -> dict[str, torch.Tensor]:
    """bf16 on CPU: N(0, 0.02) matrices, norms near 1 (generated on ``device``)."""
    out = {}
    for name, shape in shapes.items():
        x = torch.randn(shape, generator=gen, device=device)
        x = 1.0 + 0.1 * x if len(shape) == 1 else 0.02 * x
        out[name] = x.to(torch.bfloat16).cpu()
    return out


def write_checkpoint(folder: Path, shape: dict, device: torch.device, seed: int = 0) -> Path:
    """A Hugging Face folder with random weights, one safetensors shard per layer."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(_config(shape), indent=2))
    _tokenizer(shape["vocab_size"]).save_pretrained(folder)
    gen = torch.Generator(device).manual_seed(seed)
    h, vocab, layers = shape["hidden_size"], shape["vocab_size"], shape["num_hidden_layers"]
    shards = {f"layer-{i:03d}.safetensors": _layer_shapes(shape, i) for i in range(layers)}
    shards["outer.safetensors"] = {"model.embed_tokens.weight": (vocab, h),
                                   "model.norm.weight": (h,), "lm_head.weight": (vocab, h)}
    weight_map = {}
    for file, shapes in shards.items():
        save_file(_random_tensors(shapes, gen, device), str(folder / file))
        weight_map.update(dict.fromkeys(shapes, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": parameter_bytes(shape)}, "weight_map": weight_map}))
    return folder


def parameter_bytes(shape: dict) -> int:
    """bf16 bytes of all weights."""
    h, vocab = shape["hidden_size"], shape["vocab_size"]
    per_layer = sum(torch.Size(s).numel() for s in _layer_shapes(shape, 0).values())
    return 2 * (shape["num_hidden_layers"] * per_layer + 2 * vocab * h + h)


def kv_bytes_per_token(shape: dict) -> int:
    return 2 * 2 * shape["num_hidden_layers"] * shape["num_key_value_heads"] * shape["head_dim"]


def kv_pool_tokens(total_bytes: int, mem_fraction: float, weight_bytes: int,
                   per_token: int) -> int:
    """Tokens of KV that fit in ``mem_fraction`` of the device's memory beside the weights."""
    if not 0 < mem_fraction < 1:
        raise ValueError(f"mem_fraction_static must be in (0, 1), got {mem_fraction}")
    room = int(total_bytes * mem_fraction) - weight_bytes
    if room < per_token:
        raise ValueError(f"{mem_fraction} of {total_bytes / 2**30:.1f} GiB leaves no room for "
                         f"KV beside {weight_bytes / 2**30:.1f} GiB of weights; raise it")
    return room // per_token


# --------------------------------------------------------------------------- workloads


def random_lengths(n: int, full_len: int, range_ratio: float, gen: torch.Generator
                   ) -> list[int]:
    """bench_serving's random dataset: uniform on [max(1, int(L * ratio)), L], inclusive."""
    if not 0 <= range_ratio <= 1:
        raise ValueError(f"range_ratio must be in [0, 1], got {range_ratio}")
    low = max(1, int(full_len * range_ratio))
    return torch.randint(low, full_len + 1, (n,), generator=gen).tolist()


def random_requests(w: Workload, vocab: int, n: int, seed: int = 0
                    ) -> tuple[list[list[int]], list[int]]:
    """Prompts of uniform random ids (the specials 0, 1 left out) and their output lengths."""
    gen = torch.Generator().manual_seed(seed)
    ins = random_lengths(n, w.input_len, w.range_ratio, gen)
    outs = random_lengths(n, w.output_len, w.range_ratio, gen)
    prompts = [torch.randint(2, vocab, (k,), generator=gen).tolist() for k in ins]
    return prompts, outs


def rag_requests(w: Workload, vocab: int, seed: int = 1) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    doc = torch.randint(2, vocab, (w.rag_doc_len,), generator=gen).tolist()
    return [doc + torch.randint(2, vocab, (w.rag_question_len,), generator=gen).tolist()
            for _ in range(w.rag_requests)]


# --------------------------------------------------------------------------- measuring


def offline(engine: Engine, prompts: list[list[int]], outs: list[int]) -> dict:
    """Submit everything at once; throughput over the whole batch and the mean KV waste."""
    params = [{"temperature": 0.0, "max_new_tokens": k, "ignore_eos": True} for k in outs]
    engine.flush_cache()
    with WasteSampler(engine) as waste:
        start = time.perf_counter()
        results = engine.generate(input_ids=prompts, sampling_params=params)
        seconds = time.perf_counter() - start
    n_in = sum(map(len, prompts))
    n_out = sum(len(r["output_ids"]) for r in results)
    cached = sum(r["meta_info"]["cached_tokens"] for r in results)
    return {"requests": len(prompts), "seconds": seconds, "input_tokens": n_in,
            "output_tokens": n_out, "total_tok_s": (n_in + n_out) / seconds,
            "output_tok_s": n_out / seconds, "cache_hit_rate": cached / n_in,
            "kv_waste_mean": waste.mean if waste.samples else None,  # None: never sampled
            "kv_waste_samples": len(waste.samples)}


def decode_rate(engine: Engine, batch: int, w: Workload, vocab: int) -> dict:
    """Decode tok/s at ``batch``: the extra time of N-1 more tokens over a 1-token run."""
    gen = torch.Generator().manual_seed(batch)
    prompts = [torch.randint(2, vocab, (w.decode_input_len,), generator=gen).tolist()
               for _ in range(batch)]

    def timed(new: int) -> float:
        engine.flush_cache()
        params = {"temperature": 0.0, "max_new_tokens": new, "ignore_eos": True}
        start = time.perf_counter()
        engine.generate(input_ids=prompts, sampling_params=params)
        return time.perf_counter() - start

    t1, tn = timed(1), timed(w.decode_output_len)
    steps = w.decode_output_len - 1
    return {"batch": batch, "seconds_1": t1, "seconds_n": tn, "new_tokens": w.decode_output_len,
            "decode_tok_s": batch * steps / max(tn - t1, 1e-9),
            "step_ms": 1e3 * max(tn - t1, 0.0) / steps}


class Results:
    """The JSON file, rewritten after every section."""

    def __init__(self, path: Path, header: dict) -> None:
        self.path, self.data = path, {**header, "sections": {}}
        self._write()

    def add(self, name: str, run: Callable[[], object]) -> None:
        start = time.perf_counter()
        try:
            value = {"ok": True, "result": run()}
        except Exception as exc:  # a failed section is recorded; the next ones still run
            value = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        value["wall_s"] = time.perf_counter() - start
        self.data["sections"][name] = value
        self._write()
        print(f"[engine_8b] {name}: {json.dumps(value)[:400]}", flush=True)

    def _write(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for engine_8b.json")
    parser.add_argument("--tiny", action="store_true", help="tiny shape and workload (CPU)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model-dir", type=Path, default=None,
                        help="where the checkpoint goes (default: OUT/model; reused if there)")
    parser.add_argument("--num-prompts", type=int, default=None)
    parser.add_argument("--mem-fraction-static", type=float, default=0.85)
    parser.add_argument("--chunked-prefill-size", type=int, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    shape, w = (TINY, TINY_WORKLOAD) if args.tiny else (LLAMA_31_8B, Workload())
    if args.num_prompts:
        w = Workload(**{**asdict(w), "num_prompts": args.num_prompts})
    device = torch.device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir = args.model_dir or args.out / "model"
    vocab, context = shape["vocab_size"], 8192 if not args.tiny else 256
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        pool = kv_pool_tokens(total, args.mem_fraction_static, parameter_bytes(shape),
                              kv_bytes_per_token(shape))
        where = torch.cuda.get_device_name(device)
    else:
        pool, where = 16384, "cpu"
    results = Results(args.out / "engine_8b.json", {
        "date": time.strftime("%Y-%m-%d"), "device": where, "torch": torch.__version__,
        "shape": shape, "workload": asdict(w), "kv_pool_tokens": pool,
        "mem_fraction_static": args.mem_fraction_static if device.type == "cuda" else None,
        "parameter_bytes": parameter_bytes(shape)})
    if not (model_dir / "model.safetensors.index.json").is_file():
        results.add("write_checkpoint", lambda: str(write_checkpoint(model_dir, shape, device)))
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the engine's process, not this one, needs the memory
    common = dict(device=args.device, dtype="bfloat16", max_total_tokens=pool,
                  context_length=context, max_running_requests=256,
                  chunked_prefill_size=args.chunked_prefill_size or (8192 if not args.tiny
                                                                     else 64))
    prompts, outs = random_requests(w, vocab, w.num_prompts)
    rag = rag_requests(w, vocab)
    start = time.perf_counter()
    with Engine(model_path=str(model_dir), page_size=16, **common) as engine:
        results.data["engine_start_s"] = time.perf_counter() - start
        engine.generate(input_ids=[2, 3, 4], sampling_params={"max_new_tokens": 2})  # warm-up
        results.add("random_page16", lambda: offline(engine, prompts, outs))
        results.add("rag_page16", lambda: offline(engine, rag, [w.rag_output_len] * len(rag)))
        for b in w.decode_batches:
            results.add(f"decode_b{b}", lambda b=b: decode_rate(engine, b, w, vocab))
    with Engine(model_path=str(model_dir), page_size=1, **common) as engine:
        n = w.page1_prompts
        results.add("random_page1", lambda: offline(engine, prompts[:n], outs[:n]))
        results.add("rag_page1", lambda: offline(engine, rag, [w.rag_output_len] * len(rag)))
    failed = [k for k, v in results.data["sections"].items() if not v["ok"]]
    print(f"[engine_8b] wrote {results.path}; failed sections: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
