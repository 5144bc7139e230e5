"""The torch reference kernels: the CPU path, the oracle of the other backends, and the
argument contracts (``check_*_args``, :mod:`.checks`) every backend's launchers share.

One module per kernel family (the same names as in :mod:`radixlm.kernels.triton`); the set is
:data:`.ops.TORCH_OPS`. Imports torch and :mod:`radixlm.kernels.ops` only, no other backend.
"""
