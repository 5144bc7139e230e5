"""Helpers the tests and benchmarks share; no product module imports this package.

* :mod:`greedy` — offline batched greedy generation straight on a model runner.
* :mod:`prefill_oracle` — a runner's prefill logits against transformers' on the same prompts.
* :mod:`config_variants` — tiny checkpoints with config changes (Mistral, Llama 3.x RoPE, ...).
* :mod:`llama_cpp_writer` — tiny checkpoints written as GGUF files the way llama.cpp does.
* :mod:`parallel` — run a job on a tensor-parallel group of spawned processes.
* :mod:`grammar_walk` — random-logit walks through a compiled grammar.
* :mod:`closing_walk` — random walks closed within a token budget, over corpus schemas.
* :mod:`real_vocabularies` — real tokenizer vocabularies read from installed package data.
* :mod:`gguf_sentencepiece` — a GGUF file's own SentencePiece tokenizer, for ``sentencepiece``.
* :mod:`scripted_backend` — a language backend without a model, answering from a script.
* :mod:`trie_walks` — the token trie walk checked against numpy's and per-token walks.

It may import anything of radixlm (``runtime``, ``fsm``, ``kernels``, ``tiny_model``); each
module is imported by name (nothing is re-exported here), so using one loads only what it needs.
"""
