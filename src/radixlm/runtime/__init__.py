"""The serving runtime: model runner over a paged KV pool, radix cache, scheduler, engine."""
