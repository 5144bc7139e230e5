"""The API stage: Engine, HTTP and OpenAI servers, the tokenizer manager, request parsing.

May import ``wire`` (messages, process launch), ``agents`` (tool calls, reasoning),
``server_args`` and ``radixlm.version``; never ``scheduling``, ``memory`` or ``model``: those run
in the scheduler process, reached only through ``wire`` messages.
"""
