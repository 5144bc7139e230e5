"""Processes and the wire: messages, sockets, launching, the scheduler and detokenizer processes.

May import ``scheduling``, ``model``, ``memory`` (the scheduler and TP worker processes build
them), ``server_args``, ``gc_policy`` and ``env``; never ``api``, which imports this package.
"""
