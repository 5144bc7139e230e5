"""Tensor parallelism (Megatron-style) for the Llama family over ``torch.distributed``.

* :mod:`sharding` — which heads / rows / vocabulary entries each rank holds (pure).
* :mod:`process_group` — the TP process group (gloo on CPU, NCCL on CUDA, plus a gloo group
  for the scheduler's batch broadcast).
* :mod:`sharded_weights` — each rank reads only its slice of the checkpoint.
* :mod:`layers` — row-parallel all-reduce, vocab-parallel embedding and LM-head gather,
  applied to an already-built model.
* :mod:`batch_broadcast` — rank 0 sends each step's :class:`ForwardBatch` to the other ranks.
* :mod:`tp_worker` — the loop of a non-zero rank: receive a batch, run the forward.

Imports only the ``model`` package's own modules (config, weights, forward batch, runner) and
``torch.distributed``.
"""
