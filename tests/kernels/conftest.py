"""Kernel tests: the Triton kernels run in Triton's CPU interpreter unless a GPU is present.

``TRITON_INTERPRET`` is read when a ``@triton.jit`` function is defined, i.e. when its module
is imported, so it is set here, before any test module imports the kernels.
"""

from __future__ import annotations

import os
import secrets

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where the Triton kernels run: cpu in the interpreter, else the GPU."""
    from radixlm.kernels.triton.launch import is_interpreted
    from radixlm.kernels.triton.rms_norm import _rms_norm_kernel

    interpreted = is_interpreted(_rms_norm_kernel)
    if not torch.cuda.is_available() and not interpreted:
        pytest.fail("radixlm.kernels Triton modules were imported before TRITON_INTERPRET=1 "
                    "was set (something imported them ahead of tests/kernels/conftest.py)")
    return torch.device("cpu" if interpreted else "cuda")


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU generator seeded fresh each run; KERNEL_TEST_SEED=<n> replays a failure."""
    seed = int(os.environ.get("KERNEL_TEST_SEED") or secrets.randbits(31))
    print(f"KERNEL_TEST_SEED={seed}")  # pytest shows it when the test fails
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any kernel launch fail loudly: argument errors must come before it."""
    from radixlm.kernels.triton import launch
    from radixlm.kernels.triton import ops as triton_ops

    class _NoLaunch:
        def __getitem__(self, grid: object) -> None:
            raise AssertionError("a kernel was launched despite a bad argument")

    for module, name in triton_ops.launched_kernels():
        monkeypatch.setattr(module, name, _NoLaunch())
    # The stand-ins are not interpreted kernels; let CPU tensors through to the checks.
    monkeypatch.setattr(launch, "is_interpreted", lambda kernel: True)



@pytest.fixture(params=["vnni", "portable"])
def native_path(request: pytest.FixtureRequest) -> str:
    """Each native path of ``kernels/cpu/gguf_blocks.py`` in turn, skipped where absent."""
    from radixlm.kernels.cpu.gguf_blocks import gguf_blocks_built, gguf_blocks_vnni

    if request.param == "vnni" and not gguf_blocks_vnni():
        pytest.skip("gguf_blocks: no AVX-512 VNNI path")
    if not gguf_blocks_built():
        pytest.skip("gguf_blocks is not built")
    return request.param
