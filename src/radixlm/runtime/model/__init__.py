"""Model execution: config, weight loading, models, forward batches, the runner and the sampler.

Sub-packages: ``models`` (the decoder families), ``parallel`` (tensor parallelism). May import
``kernels``, ``memory`` (the KV pool and page allocator the runner owns), ``wire``'s sampling
parameters (the sampler's input) and ``env``; never ``scheduling`` or ``api``.
"""
