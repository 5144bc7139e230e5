"""Processes and the wire: messages, sockets, launching, the scheduler and detokenizer processes."""
