"""What a vocabulary costs the fsm, per real vocabulary, each in a fresh process, 1 thread.

For each name (:mod:`radixlm.testing.real_vocabularies`): the token bytes from the tokenizer
(Hugging Face tokenizers only), :class:`TokenVocabulary` (walk arrays and trie), its
:meth:`~TokenVocabulary.prepare`, then one JSON schema compiled with warm-up off and every mask
along a document's tokens computed cold. Times are the thread's CPU time (steady on a shared
machine); memory is what ``tracemalloc`` sees numpy and Python allocate (kept after the build,
and the peak during it), in a second build so the timed one runs untraced.

    python benchmarks/vocabulary_build.py smollm2 tekken sentencepiece gemma3
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24}, "note": {"type": "string"},
    "n": {"type": "number"}, "kind": {"enum": ["alpha", "beta", "gamma delta"]},
    "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "note", "n", "kind", "tags"], "additionalProperties": False}
TEXT = ('{"name": "Zoë x", "note": "日本 😀 \\"q\\" some words", "n": -12.5e3, '
        '"kind": "gamma delta", "tags": ["a b", "c"]}')


def measure(name: str) -> str:
    """One vocabulary's line (run in a fresh process: see :func:`main`)."""
    import numpy as np
    import torch

    from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec, TokenVocabulary
    from radixlm.fsm.tokens import trie_walk_kernel
    from radixlm.fsm.tokens.vocabulary import tokenizer_token_bytes
    from radixlm.testing.real_vocabularies import load_vocabulary

    torch.set_num_threads(1)
    real = load_vocabulary(name)
    trie_walk_kernel.warm()
    size, eos = real.vocab.vocab_size, real.vocab.eos_token_ids
    clock = time.thread_time
    t_bytes = "-"
    if hasattr(real.backend, "backend_tokenizer"):
        start = clock()
        token_bytes = tokenizer_token_bytes(real.backend)
        t_bytes = f"{clock() - start:.2f} s"
    else:
        token_bytes = list(real.vocab.token_bytes)
    real.vocab.__dict__.clear()  # the loaded copy's arrays: not counted below
    tracemalloc.start()
    traced = TokenVocabulary(token_bytes, size, eos)
    traced.prepare()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del traced
    start = clock()
    vocab = TokenVocabulary(token_bytes, size, eos)
    t_build = clock() - start
    start = clock()
    vocab.prepare()
    t_prepare = clock() - start
    grammar = GrammarCompiler(vocab, CompileBudget(warmup_states=0, background_warmup_states=0)
                              ).compile(GrammarSpec.json_schema(SCHEMA))
    matcher, times = grammar.new_matcher(), []
    for token in [*real.encode(TEXT), None]:
        start = clock()
        grammar.mask(matcher.state)
        times.append(clock() - start)
        if token is not None:
            assert matcher.accept_token(token)
    ms = np.array(times) * 1e3
    return (f"{name:13s} {size:7d} ids {len(vocab.walk_ids):7d} text {vocab.trie.num_nodes:7d} "
            f"trie nodes | token bytes {t_bytes} | vocabulary+trie {t_build:.2f} s, "
            f"prepare {t_prepare:.2f} s, {kept / 2**20:.0f} MiB kept, "
            f"{peak / 2**20:.0f} MiB peak | {ms.size} cold masks p50/p99/max "
            f"{np.percentile(ms, 50):.2f}/{np.percentile(ms, 99):.2f}/{ms.max():.2f} ms")


def main() -> None:
    names = sys.argv[1:] or ["smollm2", "tekken", "sentencepiece", "gemma3"]
    if len(names) == 1 and os.environ.get("_VOCABULARY_BUILD_CHILD"):
        print(measure(names[0]), flush=True)
        return
    env = {**os.environ, "_VOCABULARY_BUILD_CHILD": "1", "OMP_NUM_THREADS": "1",
           "NUMBA_NUM_THREADS": "1"}
    for name in names:  # a fresh process each: no vocabulary's allocations shape the next
        subprocess.run([sys.executable, __file__, name], env=env, check=False)


if __name__ == "__main__":
    main()
