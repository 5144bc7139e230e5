"""Draft sources for speculative decoding without a draft model (``--speculative-algorithm
NGRAM``): what a request's next tokens probably are, proposed as a chain for the model to check
in one forward.

:mod:`ngram_lookup` (prompt lookup: the latest earlier occurrence of the output's suffix in the
request's own prompt and output), :mod:`grammar_drafts` (the text a constraint forces, as
tokens, and the cut of any chain at the first token the constraint refuses),
:mod:`text_lookup` (the same over text, for copies the model tokenizes differently),
:mod:`shared_lookup` (cross-request: what followed the suffix in the output of a request that
finished), :mod:`draft_budget` (how many lookup drafts a request proposes, adapted
to what it had accepted and to a draft row's price), :mod:`step_cost` (that price: a fit of
decode-step time against forward rows), :mod:`draft_chain` (a chain and where each token came from),
:mod:`acceptance_stats` (what the verifications accepted). Pure over token lists and fsm
matchers: may import ``fsm`` only, never ``scheduling`` (which drives these:
``scheduling/speculative_*.py``).
"""
