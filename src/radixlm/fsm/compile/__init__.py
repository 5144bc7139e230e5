"""The compiler's services around a compiled grammar: caches, the worker's hold, the warm-up.

* :mod:`.grammar_cache` -- compiled grammars in memory (LRU) and their masks on disk;
* :mod:`.background_hold` -- a latency-critical thread's claim on the GIL against the worker;
* :mod:`.compile_clock` -- one compile's budget, counted in work steps (the verdict);
* :mod:`.compile_lanes` -- quick compiles before slow ones (a slow one parks for them);
* :mod:`.warm_up` -- what the worker computes ahead of decoding: prefetched masks, advances
  decided ahead, the breadth-first warm-up.

May import every stage below it (:mod:`radixlm.fsm.errors`, ``regex``, ``automaton``,
``tokens``, ``grammars``), never the root modules (the spec, compiler, compiled grammar,
matcher). No re-exports.
"""
