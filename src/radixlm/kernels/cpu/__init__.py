"""The native CPU kernels: Python launchers over the C modules of :mod:`.native`.

One module per kernel, beside its C source of the same stem in ``native/`` where it has one
(``row_ops.py`` / ``native/row_ops.c``, ``f32_gemv.py`` / ``native/f32_gemv.c``, ...); the
quantized weight formats (:mod:`.quant_linear`), the oneDNN paths (:mod:`.linear`,
:mod:`.int8_onednn`) and the shared float32 GEMM module wrapper (:mod:`.f32_linear`) are pure
Python. :data:`.ops.NATIVE_OPS` is the kernel set. Imports torch, :mod:`radixlm.kernels.ops`
and the references (each kernel falls back to them), never the Triton backend.
"""
