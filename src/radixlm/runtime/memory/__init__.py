"""KV memory: the paged pool, page allocator, radix prefix cache and the KV manager over them.

Imports nothing else of radixlm (torch only): ``model``, ``scheduling`` and ``wire`` build on it.
"""
