"""benchmarks/kernels_gpu.py stays runnable without a GPU: its checks in the interpreter, its
no-GPU message, and compiling every kernel for a GPU with the ptxas bundled with Triton."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels_gpu.py"


def run_script(*args: str, interpret: bool | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # Triton 3.9's default, without its warning
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.triton_interpret
def test_interpreter_checks_pass_for_every_kernel() -> None:
    result = run_script("--interpret")
    assert result.returncode == 0, result.stderr[-3000:]
    table = result.stdout
    for kernel in ("decode_attention", "extend_attention", "store_kv", "rms_norm",
                   "fused_add_rms_norm", "rotary", "apply_token_bitmask"):
        assert f"\n{kernel} " in table, f"{kernel} missing from the table:\n{table}"
    assert " FAIL " not in table


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so() -> None:
    result = run_script()
    assert result.returncode == 2
    assert "needs a CUDA GPU" in result.stderr and "--interpret" in result.stderr


def _ptxas_bundled() -> bool:
    import triton

    return (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists()


@pytest.mark.skipif(not _ptxas_bundled(), reason="this Triton build has no bundled ptxas")
@pytest.mark.parametrize("arch", [
    pytest.param("90", id="sm_90"),
    pytest.param("80", id="sm_80", marks=pytest.mark.slow),
    pytest.param("86", id="sm_86", marks=pytest.mark.slow),  # the smallest shared memory
])
def test_every_kernel_compiles_for_the_gpu_without_spills(arch: str) -> None:
    """What the interpreter cannot show: the kernels compile for the GPU, fit its shared
    memory and spill no registers (bf16 and fp32 variants of the small shapes)."""
    result = run_script("--compile-only", arch, "--dtypes", "bf16", "fp32")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"# sm_{arch}:" in result.stdout
    assert "_decode_split_kernel" in result.stdout and "_extend_kernel" in result.stdout
