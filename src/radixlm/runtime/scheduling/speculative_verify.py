"""Speculative decoding's side of a step after the forward: check a request's draft chain
against the model's logits, keep what matches, give back the KV of the rest.

The request's step ran as an extend of ``[last token, d_1 .. d_k]`` over its cached KV, with
logits for all ``k + 1`` rows: row ``i`` is the model's distribution for the token after
``d_1 .. d_i``. Each row is processed exactly as a one-token decode step would process it: the
constraint's mask of the state after ``d_1 .. d_i``, then the sampler with the request's own
parameters (penalties over the output so far plus ``d_1 .. d_i``, the min-new-tokens ban, the
seed's noise for that output index). Row ``i``'s draw ``y_i`` is taken as the output's next
token; if ``y_i == d_{i+1}`` the next row is valid too and processing goes on, else it stops
there (``y_i`` is the model's token at the first mismatch, or the bonus token after all ``k``).

Exactness: greedy rows draw the argmax, so the output is token for token the one of plain
decoding (up to the extend and decode kernels' rounding: tests measure it). A sampled row's
draw follows the processed distribution ``p_i``, and taking ``d_{i+1}`` iff ``y_i == d_{i+1}``
is the standard rejection rule for a deterministic draft (accept with probability
``p_i(d)``; on rejection, a draw from ``p_i`` without ``d``, renormalised), so each output
token follows the distribution plain sampling has; a seeded request draws the very tokens it
would without speculation (its noise is seeded by the output index).

A greedy request without logprobs masks row 0 (ready: the gate checked it) and a draft row
only where its unmasked pick may not be the masked one: the constraint refuses it, or the
budget's closing cut at that state is not known to cut nothing (:mod:`.greedy_mask_shortcut`:
the same draws as masking every row).

Every kept token goes through the same :meth:`OutputProcessor.take_token` as a plain decode
(logprobs, stop tokens and strings, ``max_new_tokens``, the context, the grammar's advance and
end), in order, and the first finish ends the chain. The KV of every position after the last
kept token's predecessor is given back at once (:meth:`KVManager.truncate`: pages wholly past
the end go back to the pool, its ownership invariant kept), so only kept tokens ever reach the
radix cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...fsm import GrammarError, GrammarMatcher
from ..model.sampler import SampleResult, SampleRow, sample
from ..speculative.acceptance_stats import AcceptanceStats
from ..speculative.draft_chain import SOURCE_GRAMMAR, DraftChain
from .greedy_mask_shortcut import pick_holds, shortcut_applies
from .request import Req

if TYPE_CHECKING:
    from .output_processor import OutputProcessor, StepOutput


class DraftVerifier:
    """Verifies draft chains for one :class:`OutputProcessor` (see module doc)."""

    def __init__(self, output: OutputProcessor, stats: AcceptanceStats,
                 greedy_shortcut: bool = True) -> None:
        self.output = output
        self.stats = stats
        # greedy rows skip the masks of draft rows whose pick the constraint allows
        # (:mod:`.greedy_mask_shortcut`); the counts: draft rows drawn without their mask,
        # and draft rows masked and drawn again (the shortcut did not hold)
        self.greedy_shortcut = greedy_shortcut
        self.skipped_masks = self.masked_picks = 0

    def verify(self, step: StepOutput, req: Req, chain: DraftChain,
               rows: torch.Tensor) -> None:
        """Process ``req``'s verify rows ``rows`` [k + 1, V] (see module doc); an exception
        faults ``req`` alone."""
        with step.isolate(req, "verifying draft tokens"):
            self._verify(step, req, chain, rows)

    def _verify(self, step: StepOutput, req: Req, chain: DraftChain,
                rows: torch.Tensor) -> None:
        from .output_processor import draw_of

        out = self.output
        drafts = chain.tokens
        if self.greedy_shortcut and shortcut_applies(req):
            usable, narrowed, result = self._greedy(req, drafts, rows)
        else:
            logits = rows.float().clone()  # the sampler works in place
            usable, narrowed = self._mask(req, drafts, logits)
            result = sample(logits[:usable], self._sample_rows(req, drafts, usable),
                            out.generator, req.return_logprob,
                            req.top_logprobs_num if req.return_logprob else 0)
        accepted = emitted = 0
        for i in range(usable):
            draw = draw_of(result, i, req)
            req.budget_closed |= narrowed[i]  # as a plain step's fill sets it (mask_rows.py)
            going = out.take_token(step, req, draw)
            emitted += 1
            hit = i < len(drafts) and draw[0] == drafts[i]
            accepted += hit
            if not (going and hit) or req.grammar_pending is not None:
                break
        assert req.kv is not None
        # Positions up to the newest token's predecessor keep their KV; the newest token's
        # is computed by the next step, as after any decode.
        out.kv.truncate(req.kv, min(req.kv.kv_len, len(req.token_ids) - 1))
        self.stats.record(chain.sources, accepted, emitted)
        if req.draft_budget is not None:  # it learns from the lookup drafts (after the forced)
            forced = chain.sources.count(SOURCE_GRAMMAR)
            if accepted >= forced:
                req.draft_budget.update(len(drafts) - forced, accepted - forced)
        if req.finish_reason is None and (msg := out.maybe_output(req)) is not None:
            step.outs.append(msg)

    def _greedy(self, req: Req, drafts: list[int], rows: torch.Tensor
                ) -> tuple[int, list[bool], SampleResult]:
        """The greedy draws of ``rows`` [k + 1, V] with the mask shortcut
        (:mod:`.greedy_mask_shortcut`): row 0 masked (the gate made its mask ready: one copy),
        the draft rows drawn unmasked; going down the rows, a row's unmasked pick is kept where
        the shortcut holds at its state, else that row alone is masked and drawn again; the
        rows stop after the first draw that differs from its draft. Returns how many leading
        rows are usable, whether the budget's cut removed a token in each, and the draws."""
        logits = rows.float().clone()  # the sampler works in place
        _, narrowed = self._mask(req, drafts, logits[:1])  # row 0: may set grammar_error
        sample_rows = self._sample_rows(req, drafts, logits.shape[0])
        ids = sample(logits, sample_rows, self.output.generator).next_ids  # greedy: no noise
        trial = req.grammar.copy()  # active (shortcut_applies)
        row = 0
        while row < len(drafts) and ids[row] == drafts[row] and req.grammar_error is None:
            row += 1
            try:  # as in _mask: a draft its state refuses (never: the chain was cut to what
                # the grammar accepts) or a budget hit ends the rows before this one
                if not trial.accept_token(drafts[row - 1]):
                    return row, narrowed, SampleResult(ids[:row], None, None)
            except GrammarError:
                return row, narrowed, SampleResult(ids[:row], None, None)
            remaining = req.sampling.max_new_tokens - req.num_output - row
            if pick_holds(req, trial, ids[row], remaining):
                self.skipped_masks += 1
                narrowed.append(False)
                continue
            masked = rows[row : row + 1].float().clone()
            usable, cut = self._mask(req, drafts[row:], masked, start=trial)
            if not usable:  # its mask is over the grammar's budget: the rows end before it
                return row, narrowed, SampleResult(ids[:row], None, None)
            self.masked_picks += 1
            narrowed.append(cut[0])
            ids[row] = sample(masked, sample_rows[row : row + 1],
                              self.output.generator).next_ids[0]
        return row + 1, narrowed, SampleResult(ids[: row + 1], None, None)

    def _sample_rows(self, req: Req, drafts: list[int], n: int) -> list[SampleRow]:
        """Row ``i``'s sampler input: the output as if ``drafts[:i]`` were appended."""
        base = list(req.output_ids)
        return [SampleRow(params=req.sampling, output_ids=base + drafts[:i],
                          prompt_ids=req.input_ids, banned_ids=self.output.banned_ids(req, i),
                          step=req.num_output + i)
                for i in range(n)]

    def _mask(self, req: Req, drafts: list[int], logits: torch.Tensor,
              start: GrammarMatcher | None = None) -> tuple[int, list[bool]]:
        """Apply, in place, the constraint's mask of the state after ``drafts[:i]`` to row
        ``i``, cut to the tokens that still close within ``max_new_tokens`` where the request
        closes its output (as a plain step's fill, ``mask_rows.py``); returns how many leading
        rows can be processed (a mask past the first that cannot be built ends the rows there;
        one for the first sets ``grammar_error``, as a plain step's fill does, and the request
        ends with it) and, per row, whether the budget's cut removed a token. ``start``: the
        rows begin at this matcher's state (a draft state, past the request's own: a mask
        there that cannot be built ends the rows before it) instead of the request's."""
        n = logits.shape[0]
        narrowed = [False] * n
        if req.grammar is None or not req.grammar_active:
            return n, narrowed
        words = torch.zeros(n, (logits.shape[1] + 31) // 32, dtype=torch.int32)
        bits = words.numpy()
        trial = (start if start is not None else req.grammar).copy()
        usable = 0
        for i in range(n):
            try:
                if i and not trial.accept_token(drafts[i - 1]):
                    break  # never: the chain was cut to what the grammar accepts
                trial.fill_bitmask(bits[i])
                if req.grammar_closing:
                    ahead = i + (start.num_tokens - req.grammar.num_tokens if start else 0)
                    remaining = req.sampling.max_new_tokens - req.num_output - ahead
                    narrowed[i] = trial.close_within(bits[i], remaining)
            except GrammarError as exc:
                if i or start is not None:
                    break
                req.grammar_error = str(exc)
                bits[0] = -1
            usable = i + 1
        index = torch.arange(usable, dtype=torch.int64, device=logits.device)
        self.output.grammar.ops.apply_token_bitmask(logits, words[:usable].to(logits.device),
                                                    index)
        return usable, narrowed
