"""The serving runtime: model runner over a paged KV pool, radix cache, scheduler, engine.

Sub-packages by stage, each importing only those after it: ``api`` (Engine, HTTP/OpenAI
servers) → ``wire`` (messages, processes) → ``scheduling`` → ``model`` → ``memory``, except that
``model``'s sampler reads ``wire``'s sampling parameters (a plain message type); ``agents`` is
pure (tool calls, reasoning). ``server_args``, ``gc_policy`` and ``load_memory`` are shared by
all stages.
The runtime may import ``fsm``, ``kernels``, ``env``, ``dataclass_cli`` and ``version``; never
``lang``, ``router`` or ``testing`` (those build on it).
"""
