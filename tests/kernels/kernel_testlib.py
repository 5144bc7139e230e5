"""Shared pieces of the kernel tests: random paged KV layouts, naive attention, error measures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

# Relative error bounds (max |out - ref| / max |ref|) per dtype of the kernel's inputs.
TOL = {torch.float32: 1e-3, torch.float16: 5e-3, torch.bfloat16: 3e-2}


@dataclass(frozen=True)
class AttnCase:
    """Shape and options of one attention test; subclasses add kernel-specific fields."""

    head_dim: int
    num_kv_heads: int
    group: int  # query heads per KV head
    page_size: int
    logit_cap: float = 0.0
    window: int = 0
    dtype: torch.dtype = torch.float32
    batch: int = 4

    def extra_label(self) -> str:
        return ""

    def __str__(self) -> str:
        extras = f"-cap{self.logit_cap:g}" if self.logit_cap else ""
        extras += f"-win{self.window}" if self.window else ""
        return (f"d{self.head_dim}-kv{self.num_kv_heads}x{self.group}-ps{self.page_size}"
                f"{self.extra_label()}{extras}-b{self.batch}-"
                f"{str(self.dtype).removeprefix('torch.')}")

    @property
    def num_heads(self) -> int:
        return self.num_kv_heads * self.group

    @property
    def sm_scale(self) -> float:
        return self.head_dim**-0.5


def case_params(cases: list, *marks: pytest.MarkDecorator) -> list:
    """pytest params named by each case's ``str``."""
    return [pytest.param(c, id=str(c), marks=marks) for c in cases]


# (test id, how to spoil a valid argument dict, exception expected, text the message contains)
BadArg = tuple[str, Callable[[dict], None], type[Exception], str]


def bad_arg_params(bad: list[BadArg]) -> list:
    return [pytest.param(*b[1:], id=b[0]) for b in bad]


def assert_rejected(fn: Callable[..., object], args: dict, mutate: Callable[[dict], None],
                    exc: type[Exception], match: str) -> None:
    """``fn(**args)`` raises ``exc`` naming the argument once ``mutate`` spoiled ``args``."""
    mutate(args)
    with pytest.raises(exc, match=match):
        fn(**args)


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Normwise relative error; every element of ``actual`` must be finite (poison check)."""
    bad = (~torch.isfinite(actual)).sum().item()
    assert bad == 0, f"{bad} of {actual.numel()} output elements not written (still NaN/inf)"
    scale = expected.double().abs().max().clamp_min(1e-30)
    return ((actual.double() - expected.double()).abs().max() / scale).item()


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> None:
    """``actual`` fully written and within relative error ``tol`` of ``expected``."""
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    err = rel_err(actual, expected.to(actual.device))
    print(f"relative error {err:.2e} (bound {tol:.0e})")
    assert err < tol, f"relative error {err:.3e} >= {tol:.0e}"


def poisoned(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An output buffer full of NaN, so any element a kernel forgets to write shows."""
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32,
          device: torch.device | str = "cpu") -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(dtype=dtype, device=device)


def randint(gen: torch.Generator, low: int, high: int) -> int:
    """One integer in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def random_lengths(gen: torch.Generator, count: int, page_size: int, max_len: int) -> list[int]:
    """``count`` >= 2 lengths: one is 1, one ends mid-page (it may pass max_len by less than a
    page), the others are uniform in [1, max_len]; in random order."""
    mid_page = randint(gen, 0, (max_len - 2) // page_size) * page_size + 1
    if page_size > 1:
        mid_page += randint(gen, 0, page_size - 2)  # offset 1..page_size-1 into its page
    lens = [1, mid_page] + [randint(gen, 1, max_len) for _ in range(count - 2)]
    order = torch.randperm(count, generator=gen).tolist()
    return [lens[i] for i in order]


@dataclass
class PagedKV:
    """A layer's K/V pools with some requests' tokens at scattered pages."""

    k_cache: torch.Tensor  # [num_pages, page_size, Hkv, D]
    v_cache: torch.Tensor
    slots: list[torch.Tensor]  # per request: its pool slots in sequence order (int64, CPU)
    kv_indptr: torch.Tensor  # [B + 1] int32
    kv_indices: torch.Tensor  # [sum of lengths] int32

    def flat(self, cache: torch.Tensor) -> torch.Tensor:
        """[num_slots, Hkv, D] view of a pool."""
        return cache.view(-1, cache.shape[2], cache.shape[3])


def make_paged_kv(
    gen: torch.Generator, lens: list[int], num_kv_heads: int, head_dim: int, page_size: int,
    dtype: torch.dtype, device: torch.device,
) -> PagedKV:
    """Random pools with spare pages; request pages are taken in a random order."""
    pages_per_req = [-(-n // page_size) for n in lens]
    num_pages = sum(pages_per_req) + 3
    shape = (num_pages, page_size, num_kv_heads, head_dim)
    k_cache = randn(gen, *shape, dtype=dtype, device=device)
    v_cache = randn(gen, *shape, dtype=dtype, device=device)
    order = torch.randperm(num_pages, generator=gen)
    slots, used = [], 0
    for n, num in zip(lens, pages_per_req, strict=True):
        pages = order[used : used + num]
        used += num
        slots.append((pages[:, None] * page_size + torch.arange(page_size)).flatten()[:n])
    kv_indptr = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    kv_indices = torch.cat(slots).to(torch.int32)
    return PagedKV(k_cache, v_cache, slots, kv_indptr.to(device), kv_indices.to(device))


def naive_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor, sm_scale: float,
    logit_cap: float = 0.0, sliding_window: int = 0,
) -> torch.Tensor:
    """Dense float64 attention for one request, head by head, with an explicit mask.

    q [n, Hq, D] at absolute positions ``q_pos`` [n]; k, v [L, Hkv, D] at positions 0..L-1.
    Query head h reads KV head h // (Hq // Hkv). A key is seen when its position is at most
    the query's and, with a window w, more than q_pos - w.
    """
    n, num_heads, head_dim = q.shape
    group = num_heads // k.shape[1]
    key_pos = torch.arange(k.shape[0])
    allowed = key_pos[None, :] <= q_pos[:, None]  # [n, L]
    if sliding_window > 0:
        allowed &= key_pos[None, :] > q_pos[:, None] - sliding_window
    out = torch.empty(n, num_heads, head_dim, dtype=torch.float64)
    for h in range(num_heads):
        scores = q[:, h].double() @ k[:, h // group].double().T * sm_scale  # [n, L]
        if logit_cap > 0:
            scores = logit_cap * torch.tanh(scores / logit_cap)
        probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out[:, h] = probs @ v[:, h // group].double()
    return out


def backends_side_by_side(
    model_path: object, backends: tuple[str, ...], device: str, page_size: int,
    prompts: list[list[int]], new_tokens: int = 6,
) -> tuple[dict[str, torch.Tensor], dict[str, list]]:
    """Per kernel backend, a runner on ``model_path``: the prompts' prefill logits (every
    position) and their greedy continuations, batched and the first prompt alone."""
    from radixlm.runtime.model.forward_batch import SeqSpec
    from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
    from radixlm.testing.greedy import greedy_generate

    logits, tokens = {}, {}
    for backend in backends:
        runner = ModelRunner(model_path, RunnerConfig(
            device=device, page_size=page_size, max_total_tokens=512, kernel_backend=backend))
        assert runner.ops.name == backend
        specs = []
        for ids in prompts:
            slots, _ = runner.allocator.extend_slots([], len(ids), True)
            specs.append(SeqSpec(ids, slots, logits_start=0))
        logits[backend] = runner.forward(specs)
        tokens[backend] = [greedy_generate(runner, prompts, new_tokens),
                           greedy_generate(runner, prompts[:1], new_tokens)]
    return logits, tokens


def fixed_point_bound(x: torch.Tensor, w_abs_sum: torch.Tensor) -> torch.Tensor:
    """``[M, N]`` error budget of the VNNI GEMVs (24-bit fixed-point activation rows) given
    ``w_abs_sum[n] = sum_k |w[n, k]|``: 2^-20 of max|x_row| * w_abs_sum (the fixed-point step
    is 2^-22 of max|x_row|, at least 2^-126; the rest is float32 rounding of the sums)."""
    scale = x.double().abs().amax(1, keepdim=True).clamp_min(2.0**-104)
    return (scale * w_abs_sum.double()[None] * 2**-20).float()


def assert_within(y: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor) -> None:
    """Every ``|y - ref|`` at most its ``bound``; the message gives the worst ratio."""
    err = (y - ref).abs()
    assert bool((err <= bound).all()), f"max error / bound {(err / bound).max().item():.3g}"


def needs_vnni() -> pytest.MarkDecorator:
    """Skips a test module of the VNNI GEMVs where the native module or the CPU lacks them."""
    from radixlm.kernels.cpu.q4_gemv import q4_gemv_available, q4_gemv_unavailable_reason
    return pytest.mark.skipif(not q4_gemv_available(),
                              reason=f"q4_gemv: {q4_gemv_unavailable_reason()}")


# activation rows that stress the VNNI GEMVs' fixed-point scale (``extreme_rows``)
EXTREME_ROWS = ("wide-x", "tiny-x", "subnormal-x", "huge-x")


def extreme_rows(x: torch.Tensor, case: str) -> torch.Tensor:
    """``x`` made one of :data:`EXTREME_ROWS` (a copy)."""
    if case == "wide-x":  # one huge element per row: the small ones keep 2^-22 of it
        x = x.clone()
        x[:, 7] = 1e4
        return x
    if case == "tiny-x":
        return x * 1e-30  # near float32's smallest normals: the fixed-point scale is 2^122
    if case == "subnormal-x":
        return x * 1e-40  # below them: the scale stops at 2^126 (steps of 2^-126)
    if case == "huge-x":
        return x * 1e30  # the fixed-point scale is 2^-77; the products stay finite
    raise ValueError(f"case must be one of {EXTREME_ROWS}, got {case!r}")


def assert_float32_linear_refuses_bad_x(linear: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """A prepared float32 linear of a ``[4, 8]`` weight refuses a wrong width, dtype, rank or
    type with the checks' messages, and maps zero rows to ``[0, 4]``."""
    with pytest.raises(ValueError, match="x: expected size 8 at dim 1"):
        linear(torch.zeros(2, 9))
    with pytest.raises(TypeError, match="x: expected dtype"):
        linear(torch.zeros(2, 8, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="x: expected 2 dimensions"):
        linear(torch.zeros(8))
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        linear([[0.0] * 8])  # type: ignore[arg-type]
    assert linear(torch.zeros(0, 8)).shape == (0, 4)
