"""Speculative decoding's side of a step before the forward: which decoding requests draft,
their draft chains, and the KV slots the chains are checked in.

A request drafts when speculation is on (``--speculative-algorithm NGRAM``), it did not opt
out (``disable_speculation`` in its sampling parameters), the step has at most
``--speculative-max-batch-size`` requests taking a token, and its constraint (if any) is
active; in a wider step a constrained request jump-forwards as without speculation.
Its chain is the text its constraint forces (as tokens), then prompt lookup
(:mod:`..speculative.ngram_lookup` over token ids, or :mod:`..speculative.text_lookup` over
text: first for a constrained request, whose forced and looked-up text are tokenized together;
as a fallback for others), then the outputs of finished requests
(:mod:`..speculative.shared_lookup`) for the rest (as many as the request's
:class:`~..speculative.draft_budget.DraftBudget` allows), cut at the first token the
constraint refuses, after the first stop token (an EOS id, unless the request ignores EOS,
or one of its ``stop_token_ids``: kept, the output ends there; refused, so is the rest: either
way no later draft is ever used, and each is a forward row) and to what the request may still
emit (``max_new_tokens``, the context).
The chain's slots are reserved only from free pages: drafting never evicts the prefix cache
nor retracts a request; without room a request decodes one token as usual. The verification
after the forward is :mod:`speculative_verify`'s. A draft's price in the budget is the row
cost at the step's batch that :class:`~..speculative.step_cost.StepCostModel` fits to the
forwards of the scheduler's decode steps (:meth:`Speculator.observe`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...fsm.tokens.vocabulary import TokenVocabulary
from ..memory.kv_manager import KVManager
from ..server_args import ServerArgs
from ..speculative.acceptance_stats import AcceptanceStats
from ..speculative.draft_budget import CONSTRAINED_PRIOR_RATE, PRIOR_RATE, DraftBudget
from ..speculative.draft_chain import (
    SOURCE_CROSS_REQUEST,
    SOURCE_GRAMMAR,
    SOURCE_PROMPT_LOOKUP,
    SOURCE_TEXT_LOOKUP,
    DraftChain,
)
from ..speculative.grammar_drafts import forced_text_tokens, grammar_prefix
from ..speculative.ngram_lookup import NgramLookup
from ..speculative.shared_lookup import SharedLookup
from ..speculative.step_cost import StepCostModel
from ..speculative.text_lookup import SharedText, TextLookup
from .request import PrefillChunk, Req

_TAIL_TOKENS = 16  # output tokens whose text the text lookup matches (about 32+ bytes)
# An unconstrained request falls back on text lookup only for a match this long: shorter ones
# (a word or two) were mostly wrong in open-ended writing (SmolLM2 chat 0.83x with any).
_FALLBACK_MIN_BYTES = 12
# A token match this short (or shorter) proposes drafts only while the request is copying (its
# draft budget's rate at least _COPYING): in open-ended writing nearly every token has occurred
# before, and what followed it there is mostly not what follows now.
_WEAK_MATCH = 1
_COPYING = 0.5


class Speculator:
    """Drafts for one scheduler's decoding requests (see module doc)."""

    def __init__(self, args: ServerArgs, kv: KVManager, encode: Callable[[str], list[int]],
                 max_context: int, vocab: Callable[[], TokenVocabulary],
                 is_stop_token: Callable[[Req, int], bool]) -> None:
        self.num_draft_tokens = args.speculative_num_draft_tokens
        self.min_n = args.speculative_ngram_min_match_window_size
        self.max_n = args.speculative_ngram_max_match_window_size
        self.max_batch = args.speculative_max_batch_size
        self.kv = kv
        self.encode = encode
        self.vocab = vocab  # the fsm's token bytes (built on first use)
        self.max_context = max_context
        self.is_stop_token = is_stop_token  # the finish check's rule (FinishChecker)
        self.stats = AcceptanceStats()
        self.shared = SharedLookup(self.min_n, self.max_n, self.num_draft_tokens)
        self.shared_text = SharedText()
        self.cost = StepCostModel()
        # a draft row's price in this step (set by :meth:`draft` from the step's batch)
        self.row_cost = self.cost.row_cost(1)

    def observe(self, rows: int, seconds: float) -> None:
        """The forward of a step of decodes (and verifications) only ran ``rows`` tokens in
        ``seconds`` (the scheduler's clock: thread CPU time at one torch thread)."""
        self.cost.observe(rows, seconds)

    def admit(self, req: Req) -> None:
        """Mark a new request as speculating unless its sampling parameters opt out."""
        req.speculative = not req.sampling.disable_speculation

    def learn(self, req: Req) -> None:
        """A request finished: its output joins the cross-request lookup."""
        if req.speculative and req.num_output:
            self.shared.add(req.namespace, req.token_ids, req.prompt_len)
            self.shared_text.add(req.namespace, self.vocab().decode_bytes(req.output_ids))

    def draft(self, decodes: list[Req], chunks: Sequence[PrefillChunk] = ()
              ) -> dict[str, DraftChain]:
        """The chains (by request id) of this step's decoding requests that draft, their
        slots reserved (``kv_len`` then counts them: :mod:`speculative_verify` gives back the
        rejected ones).

        A step is wide when the requests that take a token in it (``decodes`` and the
        ``chunks`` that end a prefill) are more than ``--speculative-max-batch-size``: then
        nobody drafts, and each of those requests is marked :attr:`Req.plain_step`, so its
        constraint jump-forwards after its token exactly as with speculation off (its next
        step, as wide, would not draft the forced text either)."""
        sampling = [c.req for c in chunks if c.start + c.n == len(c.req.token_ids)]
        wide = len(decodes) + len(sampling) > self.max_batch
        self.row_cost = self.cost.row_cost(len(decodes) + len(sampling))
        for req in decodes + sampling:
            req.plain_step = wide
        if wide:
            self.stats.skipped_batch += 1
            return {}
        chains: dict[str, DraftChain] = {}
        for req in decodes:
            chain = self.propose(req)
            if chain and self._reserve(req, len(chain)):
                chains[req.rid] = chain
        return chains

    def propose(self, req: Req) -> DraftChain:
        """``req``'s draft chain now (empty when it does not speculate or nothing matches)."""
        chain = DraftChain()
        want = self._budget(req)
        if want <= 0 or not self._eligible(req):
            return chain
        if req.draft_index is None:
            req.draft_index = NgramLookup(self.min_n, self.max_n)
            req.draft_budget = DraftBudget(self.num_draft_tokens, PRIOR_RATE if req.grammar
                                           is None else CONSTRAINED_PRIOR_RATE)
            req.text_lookup = TextLookup(self.vocab().decode_bytes(req.input_ids))
        budget = req.draft_budget.take(self.row_cost)  # lookup drafts (0: forced text only)
        matcher = req.grammar  # active when set (_eligible)
        if matcher is None and not budget:
            return chain
        forced = matcher.jump_forward_string() if matcher is not None else ""
        # A constrained request copies values whose tokens differ from the source's: text
        # lookup first; an unconstrained one copies tokens as they are: token lookup first.
        if matcher is None or not budget or not self._text_drafts(req, chain, forced, want,
                                                                  budget):
            chain.extend(forced_text_tokens(forced, self.encode, want), SOURCE_GRAMMAR)
            limit = min(want, len(chain) + budget)
            tokens, n = req.draft_index.match(req.token_ids, limit - len(chain), chain.tokens)
            if n > _WEAK_MATCH or req.draft_budget.rate >= _COPYING:
                chain.extend(tokens, SOURCE_PROMPT_LOOKUP)
            if not chain and matcher is None:
                self._text_drafts(req, chain, forced, want, budget)
        limit = min(want, len(chain) + budget)
        if len(chain) < limit:
            ctx = req.token_ids[-self.max_n :] + chain.tokens
            chain.extend(self.shared.propose(req.namespace, ctx, limit - len(chain)),
                         SOURCE_CROSS_REQUEST)
        chain.cut(self._through_stop(req, chain.tokens))
        if matcher is not None:
            chain.cut(grammar_prefix(matcher, chain.tokens))
        return chain

    def _through_stop(self, req: Req, tokens: list[int]) -> int:
        """How many leading ``tokens`` are worth checking: up to the first stop token (the
        finish check's :meth:`~.finish_check.FinishChecker.is_stop_token`) included."""
        for i, token in enumerate(tokens):
            if self.is_stop_token(req, token):
                return i + 1
        return len(tokens)

    def _text_drafts(self, req: Req, chain: DraftChain, forced: str, want: int,
                     budget: int) -> bool:
        """Extend the empty ``chain`` with the ``forced`` text then the text lookup's
        continuation (at most ``budget`` tokens past the forced ones), tokenized together (so
        the boundary merges as the model writes it: ``age"`` then ``: 29`` gives ``age``
        ``":`` ...); False (``chain`` unchanged) when the lookup has nothing."""
        vocab = self.vocab()
        head = forced.encode()
        tail = vocab.decode_bytes(req.token_ids[-_TAIL_TOKENS:]) + head
        least = 0 if req.grammar is not None else _FALLBACK_MIN_BYTES
        more = req.text_lookup.propose(tail, self.shared_text.get(req.namespace), least)
        if not more:
            return False
        tokens = self.encode(forced + more.decode("utf-8", errors="ignore"))[:-1]  # last: cut
        n_forced, size = 0, 0
        for token in tokens:  # the tokens within the forced text are the grammar's
            size += len(vocab.token_bytes[token] or b"")
            if size > len(head):
                break
            n_forced += 1
        limit = min(want, n_forced + budget)
        chain.extend(tokens[: min(n_forced, limit)], SOURCE_GRAMMAR)
        chain.extend(tokens[n_forced:limit], SOURCE_TEXT_LOOKUP)
        return bool(chain)

    def _eligible(self, req: Req) -> bool:
        """Speculating, and a constraint (if any) active and sound: one waiting for its start
        marker could start inside a chain, which its matcher would not have checked."""
        if not req.speculative or req.grammar_error is not None:
            return False
        return req.grammar is None or (req.grammar_active and req.grammar_pending is None)

    def _budget(self, req: Req) -> int:
        """Most drafts worth checking: the step emits at most drafts + 1 tokens, and every
        draft needs a slot within the context."""
        left = req.sampling.max_new_tokens - req.num_output - 1
        room = self.max_context - len(req.token_ids)
        return min(self.num_draft_tokens, left, room)

    def _reserve(self, req: Req, n: int) -> bool:
        """Slots for ``n`` drafts after ``req``'s decode slot, from free pages only."""
        assert req.kv is not None
        if self.kv.allocator.num_free_pages < self.kv.pages_needed(req.kv, n):
            return False
        return self.kv.reserve(req.kv, n) is not None
