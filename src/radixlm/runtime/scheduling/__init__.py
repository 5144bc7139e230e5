"""Scheduling: admission, batching, retraction, constraints, and what a step's outputs become.

:mod:`scheduler` schedules (queues, KV, batches, retraction); the grammar side is
:mod:`grammar_manager` (compiles, masks, advances) with the step's mask gate
(:mod:`mask_gate`) and the start of each step (:mod:`step_grammar`); after the forward,
:mod:`output_processor`. Managers return data and the scheduler acts on it: none holds a
reference to the scheduler.

May import ``model``, ``memory``, ``wire`` (messages), ``server_args``, ``fsm`` and ``kernels``;
never ``api`` (the scheduler process reaches the API only through ``wire``).
"""
