"""Shared fixtures: the built-in tiny checkpoints, built once per test session (never a hub)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# One thread per process: with two, OpenMP spin-waits on this 2-core machine.
torch.set_num_threads(1)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


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


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_model_path(request: pytest.FixtureRequest) -> Path:
    """Each tiny architecture in turn."""
    return request.getfixturevalue(f"tiny_{request.param}_path")


@pytest.fixture(scope="session")
def tiny_server_url(tiny_llama_path, tmp_path_factory):
    """``radixlm serve`` on the tiny Llama, on a free loopback port, for the whole session
    (shared by the SGLang-frontend, OpenAI-backend and API-parity tests)."""
    import socket
    import subprocess
    import sys
    import time

    import requests

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("tiny-server") / "server.log"
    cmd = [sys.executable, "-m", "radixlm.cli", "serve", "--model-path", str(tiny_llama_path),
           "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # bounded by attempts; each waits at most 0.2 s
            if proc.poll() is not None:
                pytest.fail(f"radixlm serve exited: {log.read_text()[-3000:]}")
            try:
                if requests.get(url + "/health_generate", timeout=30).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        else:
            pytest.fail(f"radixlm serve did not become ready: {log.read_text()[-3000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
