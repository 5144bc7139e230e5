"""The structured-generation language (SGLang-compatible frontend).

Write a program as a decorated Python function over a state ``s``; ``s += "text" + gen("x")``
appends text and model calls; ``run``/``run_batch`` execute it on a backend (an in-process
``Engine``, a ``RuntimeEndpoint`` over HTTP, or a ``Runtime`` child server). The public names
are re-exported from :mod:`radixlm` (``import radixlm as sgl``).

Of the runtime it imports only ``runtime.agents`` (tool calls) and, when a ``Runtime`` starts,
``runtime.model``'s GGUF resolution; an in-process ``Engine`` is handed to its backend, never
imported here. Never ``router`` or ``testing``.
"""
