"""The Triton kernels (CUDA, or Triton's CPU interpreter with ``TRITON_INTERPRET=1``).

One module per kernel family, named as its torch reference in :mod:`radixlm.kernels.reference`
(whose argument checks each launcher calls first); :mod:`.launch` holds the launch
preconditions and tile sizes, :data:`.ops.TRITON_OPS` the set. Imported only on demand
(Triton is optional on CPU). Inside this package ``import triton`` is still the Triton
library: imports are absolute.
"""
