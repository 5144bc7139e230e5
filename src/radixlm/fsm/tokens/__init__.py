"""Stage 3, tokens over the automaton: the vocabulary's bytes, its trie and per-state masks.

* :mod:`.vocabulary` -- :class:`~.vocabulary.TokenVocabulary`, each token's bytes and the EOS
  words; :mod:`.vocabulary_sources` -- token bytes from files that are not Hugging Face
  tokenizers (SentencePiece, tekken);
* :mod:`.token_trie` -- the vocabulary as a byte trie, walked against automaton rows;
  :mod:`.trie_walk_kernel` -- that walk compiled (C where built, else numba), with its
  subtree skips (looping and counting); :mod:`.subtree_summary` -- per node, what its subtree
  is made of; :mod:`.state_loops` -- per state, what leads back to it and where every
  character leads;
* :mod:`.token_index` -- per-state token bitmasks, computed on first visit, within budgets.

May import :mod:`radixlm.fsm.errors`, :mod:`radixlm.fsm.regex` and
:mod:`radixlm.fsm.automaton` (not :mod:`radixlm.fsm.grammars`). No re-exports.
"""
