"""Builds radixlm's optional native CPU kernels; everything else is in pyproject.toml.

Every ``src/radixlm/kernels/cpu/native/<name>.c`` becomes the extension module
``radixlm.kernels.cpu.native.<name>`` (plain C against the CPython API, no torch headers, so
it builds in pip's isolated build environment). Each includes ``radixlm_native.h`` beside it
(the includes, CPU checks and module boilerplate they share), and a module may keep a part of
itself in a header of its own (``gguf_blocks_portable.h``): every ``*.h`` there is a
dependency of every module, shipped in the sdist by MANIFEST.in. Each module is
``optional``: without a C compiler the install still succeeds and the Python side falls back
to torch's kernels (``radixlm.kernels.cpu.native.load``). The sources pick their instruction
sets per function with ``__attribute__((target(...)))`` and check the CPU at run time, so no
``-march=native``: a built module runs on any x86-64 and says which kernels this CPU can use.
``-fno-trapping-math`` lets the compiler vectorize loops with float compares (row_ops.c's
clamps); it changes no value (reassociation and contraction stay off), only the promise
that a compare of a NaN raises its floating-point exception flag.
"""

from pathlib import Path

from setuptools import Extension, setup

NATIVE = Path("src/radixlm/kernels/cpu/native")
HEADERS = [str(header) for header in sorted(NATIVE.glob("*.h"))]
# the fsm's own native loop (plain C, no shared header: radixlm.fsm imports no other radixlm
# package), beside its Python wrapper trie_walk_kernel.py
FSM_NATIVE = [("radixlm.fsm.tokens.trie_walk_native", "src/radixlm/fsm/tokens/trie_walk_native.c")]

setup(
    ext_modules=[
        Extension(
            f"radixlm.kernels.cpu.native.{source.stem}",
            sources=[str(source)],
            depends=HEADERS,
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-fno-trapping-math"],
            optional=True,
        )
        for source in sorted(NATIVE.glob("*.c"))
    ] + [
        Extension(name, sources=[source], extra_compile_args=["-O3", "-std=c11", "-Wall"],
                  optional=True)
        for name, source in FSM_NATIVE
    ],
)
