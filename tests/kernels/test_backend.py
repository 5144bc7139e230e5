"""The backend switch, the Triton op set's signatures, and a whole model on Triton kernels."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from kernel_testlib import backends_side_by_side

from radixlm.kernels import TORCH_OPS, KernelOps, get_kernel_ops, resolve_backend
from radixlm.kernels.cpu.row_ops import row_ops_available

# ops every set must offer (optional ones such as rotary_rows default to None)
OP_NAMES = [f.name for f in fields(KernelOps) if f.name != "name" and f.default is not None]
LAUNCHING_OPS = [name for name in OP_NAMES if name != "plan_decode"]  # planning runs no kernel


CPU_AUTO = "native" if row_ops_available() else "torch"  # the C kernels when they were built


@pytest.mark.parametrize(("name", "device", "expected"), [
    ("auto", "cpu", CPU_AUTO), ("auto", "cuda", "triton"), ("torch", "cuda", "torch"),
    ("triton", "cpu", "triton"), ("torch", "cpu", "torch"),
])
def test_resolve_backend(name: str, device: str, expected: str) -> None:
    assert resolve_backend(name, torch.device(device)) == expected


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="kernel backend must be one of"):
        get_kernel_ops("cuda", torch.device("cpu"))


def test_forced_triton_gives_the_triton_ops(device: torch.device) -> None:
    from radixlm.kernels.triton.ops import TRITON_OPS

    assert get_kernel_ops("triton", torch.device("cpu")) is TRITON_OPS
    assert get_kernel_ops("auto", torch.device("cpu")).name == CPU_AUTO
    assert get_kernel_ops("torch", torch.device("cpu")) is TORCH_OPS


@pytest.mark.parametrize("op", OP_NAMES)
def test_triton_ops_take_the_reference_signatures(op: str, device: torch.device) -> None:
    """Same positional parameters, names and defaults; anything extra is keyword-only."""
    from radixlm.kernels.triton.ops import TRITON_OPS

    ref = list(inspect.signature(getattr(TORCH_OPS, op)).parameters.values())
    tri = list(inspect.signature(getattr(TRITON_OPS, op)).parameters.values())
    assert [(p.name, p.default) for p in tri[: len(ref)]] == [(p.name, p.default) for p in ref]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in tri[len(ref) :])


def test_cpu_tensors_without_the_interpreter_are_refused(device: torch.device) -> None:
    from radixlm.kernels.triton.launch import check_launchable

    def compiled_kernel() -> None:  # stands in for a @triton.jit function built for a GPU
        pass

    with pytest.raises(ValueError, match="q: the Triton kernels need CUDA tensors"):
        check_launchable("q", torch.zeros(1), compiled_kernel)
    with pytest.raises(ValueError, match="x: the Triton kernels need CUDA tensors"):
        check_launchable("x", torch.zeros(1, device="meta"), compiled_kernel)


@pytest.mark.triton_interpret
@pytest.mark.parametrize("page_size", [1, 16])
def test_model_on_triton_kernels_matches_torch_kernels(
    tiny_family_path: Path, page_size: int, device: torch.device
) -> None:
    """Prefill logits and a greedy continuation agree between the two backends, for every
    served family (Qwen3's per-head QK-norm rows, Phi-3's partial rotary)."""
    prompts = [[5, 17, 93, 4, 250, 31, 8, 77, 12], [44, 3], [9] * 21]
    logits, tokens = backends_side_by_side(tiny_family_path, ("torch", "triton"), device.type,
                                           page_size, prompts)
    assert logits["torch"].std() > 0.01, "degenerate logits would make the check vacuous"
    torch.testing.assert_close(logits["triton"], logits["torch"], atol=1e-4, rtol=0)
    assert tokens["triton"] == tokens["torch"]


def _empty_calls() -> dict[str, tuple]:
    """Each op with zero tokens / requests / rows (a zero-size grid is illegal on a GPU)."""
    f32, i32 = torch.float32, torch.int32
    pool = torch.zeros(2, 16, 2, 64)
    none = torch.zeros(0, 4, 64)
    return {
        "decode_attention": (none, pool, pool, torch.zeros(1, dtype=i32),
                             torch.zeros(0, dtype=i32), 0.125),
        "extend_attention": (torch.zeros(0, 4, 64), pool, pool, torch.zeros(3, dtype=i32),
                             torch.tensor([0, 5, 9], dtype=i32), torch.arange(9, dtype=i32),
                             0.125),
        "store_kv": (pool, pool.clone(), torch.zeros(0, dtype=i32), torch.zeros(0, 2, 64),
                     torch.zeros(0, 2, 64)),
        "rms_norm": (torch.zeros(0, 32), torch.ones(32), 1e-6),
        "fused_add_rms_norm": (torch.zeros(0, 32), torch.zeros(0, 32), torch.ones(32), 1e-6),
        "rotary": (none, torch.zeros(0, 2, 64), torch.zeros(0, dtype=torch.long),
                   torch.ones(8, 32, dtype=f32), torch.zeros(8, 32, dtype=f32)),
        "apply_token_bitmask": (torch.zeros(3, 40), torch.zeros(0, 2, dtype=i32),
                                torch.zeros(0, dtype=torch.long)),
    }


@pytest.mark.parametrize("op", LAUNCHING_OPS)
def test_empty_inputs_launch_nothing(op: str, no_launch: None) -> None:
    """Zero-sized inputs return zero-sized outputs (as the references do) without a launch."""
    from radixlm.kernels.triton.ops import TRITON_OPS

    args = _empty_calls()[op]
    expected, got = getattr(TORCH_OPS, op)(*args), getattr(TRITON_OPS, op)(*args)
    if not isinstance(expected, tuple):  # one tensor, or None from the in-place ops
        expected, got = (expected,), (got,)
    for e, g in zip(expected, got, strict=True):
        if e is None:
            assert g is None
        else:
            assert g.shape == e.shape and g.dtype == e.dtype


def test_each_kernel_set_owns_its_decode_plan(device: torch.device) -> None:
    """The torch set groups a shared prefix for cascade attention; the Triton set plans
    nothing (its kernel reads the ragged indices itself and has no cascade yet)."""
    from radixlm.kernels.triton.ops import TRITON_OPS

    shared = torch.arange(80)  # 80 slots of one cached prefix, then one own slot each
    slots = torch.stack([torch.cat([shared, torch.tensor([100 + b])]) for b in range(3)])
    lens = torch.full((3,), 81)
    plan = TORCH_OPS.plan_decode(slots, lens, 1, 0, None)
    assert [g.members.tolist() for g in plan.groups] == [[0, 1, 2]]
    assert torch.equal(plan.groups[0].prefix, shared)
    assert TRITON_OPS.plan_decode(slots, lens, 1, 0, None) is None


def test_launched_kernels_cover_every_module(device: torch.device) -> None:
    """Tools that intercept launches (no_launch, --compile-only) see every kernel module."""
    from radixlm.kernels.triton.ops import KERNEL_MODULES, launched_kernels

    found = {module.__name__.rsplit(".", 1)[1] for module, _ in launched_kernels()}
    assert found == set(KERNEL_MODULES)
