"""``benchmarks/kernels_gpu.py --compile-only SM``: compile every Triton kernel launch of the
small check cases for a CUDA architecture without a GPU (ptxas), and report each variant's
shared memory, registers and spills against the architecture's limits."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

SHARED_LIMIT = {80: 166912, 86: 101376, 89: 101376, 90: 232448}  # bytes per block, opt-in max
def kernel_signature(fn: object, args: tuple, kwargs: dict) -> tuple[dict, dict, dict]:
    """Triton's (signature, constexprs, attrs) for a launch of ``fn`` with these arguments,
    specialised as a real launch would be (ints equal to 1 become constants; ints divisible
    by 16 and 16-byte-aligned pointers get divisibility hints, which enable vector loads)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    bound = {**dict(zip(fn.arg_names, args)), **kwargs}
    sig, constexprs, attrs = {}, {}, {}
    for i, (name, param) in enumerate(zip(fn.arg_names, fn.params)):
        value = bound[name]
        if param.is_constexpr:
            sig[name], constexprs[name] = "constexpr", value
            continue
        kind, spec = native_specialize_impl(BaseBackend, value, False, True, True)
        sig[name] = kind
        if kind == "constexpr":
            constexprs[name] = spec
        elif isinstance(spec, str) and spec:
            attrs[(i,)] = BaseBackend.parse_attr(spec)
    return sig, constexprs, attrs


def resource_usage(cubin: bytes) -> dict[str, int]:
    """REG, LOCAL and STACK (bytes; non-zero means spills) of a cubin, from the cuobjdump
    bundled with Triton."""
    import re
    import subprocess
    import tempfile

    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    if not os.path.exists(tool):
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "-res-usage", f.name], capture_output=True,
                              text=True).stdout
    return {k: int(v) for k, v in re.findall(r"\b(REG|LOCAL|STACK):(\d+)", text)}


@dataclass
class Compiled:
    kernel: str
    constexprs: dict
    seconds: float
    shared: int
    usage: dict[str, int]


class CompileInstead:
    """Stands in for a kernel: ``kernel[grid](...)`` compiles it for ``target`` instead."""

    def __init__(self, fn: object, target: object, done: dict[str, Compiled]) -> None:
        self.fn, self.target, self.done = fn, target, done

    def __getitem__(self, grid: object) -> Callable[..., None]:
        return self.compile

    def compile(self, *args: object, **kwargs: object) -> None:
        import time

        import triton
        from triton.compiler import ASTSource

        options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
        sig, constexprs, attrs = kernel_signature(self.fn, args, kwargs)
        key = f"{self.fn.__name__} {sorted(constexprs.items())} {sorted(sig.items())} {attrs}"
        if key in self.done:
            return
        start = time.perf_counter()
        compiled = triton.compile(ASTSource(self.fn, sig, constexprs, attrs),
                                  target=self.target, options=options)
        self.done[key] = Compiled(self.fn.__name__, constexprs, time.perf_counter() - start,
                                  compiled.metadata.shared,
                                  resource_usage(compiled.asm.get("cubin", b"")))


def compile_only(arch: int, dtypes: list[str],
                 cases: Callable[[str], Iterable[Callable[[], Any]]]) -> int:
    """Compile every launch of ``cases(dtype)`` (each a maker whose result has ``run()``) for
    ``sm_<arch>`` (ptxas), no GPU needed.

    Fails (returns 1) when a variant needs more shared memory than the architecture has or
    spills registers to local memory.
    """
    from triton.backends.compiler import GPUTarget

    from radixlm.kernels.triton import launch
    from radixlm.kernels.triton import ops as triton_ops

    done: dict[str, Compiled] = {}
    # CPU tensors stand in for CUDA ones; precision choices follow what a GPU would get.
    launch.is_interpreted = lambda kernel: True
    launch.on_gpu = lambda device: True
    for module, name in triton_ops.launched_kernels():
        setattr(module, name, CompileInstead(getattr(module, name), GPUTarget("cuda", arch, 32),
                                             done))
    torch.manual_seed(0)
    for dtype_name in dtypes:
        for make in cases(dtype_name):
            make().run()
    limit = SHARED_LIMIT.get(arch)
    print(f"# sm_{arch}: {len(done)} kernel variants, dtypes {','.join(dtypes)}; "
          f"shared-memory limit {limit or 'unknown'} B")
    print("kernel  shared B  regs  local B  stack B  compile s  constexprs")
    failed = 0
    for c in done.values():
        over = limit is not None and c.shared > limit
        spills = c.usage.get("LOCAL", 0) + c.usage.get("STACK", 0) > 0
        failed += over or spills
        print(f"{c.kernel}  {c.shared}{' OVER' if over else ''}  {c.usage.get('REG', '?')}  "
              f"{c.usage.get('LOCAL', '?')}  {c.usage.get('STACK', '?')}"
              f"{' SPILLS' if spills else ''}  {c.seconds:.1f}  {c.constexprs}")
    if failed:
        print(f"{failed} variant(s) over the shared-memory limit or spilling registers",
              file=sys.stderr)
    return 1 if failed else 0
