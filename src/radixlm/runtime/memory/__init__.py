"""KV memory: the paged pool, page allocator, radix prefix cache and the KV manager over them."""
