"""How many lookup drafts a request proposes next, from what its recent verifications
accepted and what a draft costs in the step it joins: a long chain while the request copies
and drafts are cheap, none while it writes text of its own or the batch makes rows dear,
with a short probe now and then to notice when copying starts.

A step with ``k`` drafts is modelled as ``1 + (VERIFY_ROWS + k) * row_cost`` plain steps (of
this request's share): ``VERIFY_ROWS`` the verify path's fixed part (a sampler over ``k + 1``
rows, the masks, the KV given back) in draft rows (per request, it weighs like a row against
the request's share of a step: little at batch 1, much at batch 8), ``row_cost`` a draft
row's price, which the scheduler measures on
the running model and batch (:mod:`.step_cost`; SmolLM2's GGUF blocks at 1 thread: 0.19-0.24
at batch 1, 0.7 at batch 8). Without a measure it is :data:`DRAFT_COST`, what a row cost with
float32 weights, where the step streams 4x the bytes: ``speculative.py --tasks draft_cost``
measured 1.35 (k=1), 1.33 (k=4) and 1.22 (k=8) plain steps there. On SmolLM2's blocks since
the verify's masks and bitmask op went native and its rows run bound like the plain step, the
same task measured 1.21 (k=1), 1.73 (k=4), 2.56 (k=8): ``1.02 + 0.19 k``, a fixed part near
0.02, a tenth of a row (it was a fixed 0.25 plain steps when the verify's masks cost ~3.8 ms:
at batch 1 a request that had just missed once paused its drafting through the copy that
followed). ``VERIFY_ROWS`` stays above that measure, so that at batch 8 (a row 0.7) not even a
copying request's chain pays, as measured there.

The request's acceptance is an estimate ``rate`` of the chance that a draft is accepted given
that the one before it was (decayed counts over its recent verifications, so a copying
request's rate climbs within a few steps and falls as fast when it stops). With ``rate = a``,
``k`` drafts emit ``1 + a + ... + a^k`` tokens in expectation for the step's cost above; the
budget is the ``k`` in ``[1, most]`` with the best tokens per cost, or 0 when even that is
not worth ``1 + MARGIN`` plain steps. At 0 the request proposes nothing (it decodes plainly,
without even a lookup) for ``wait`` steps, then probes with ``PROBE`` drafts; each probe
rejected outright doubles ``wait`` (up to ``MAX_WAIT``), an accepted one resets it. A probe
is made only where a copying request's rate (:data:`COPYING_RATE`) would pay at the row's
price: at batch 8 on SmolLM2's blocks no chain pays, and a probe per request every few steps
cost more than the few copies it found.

The grammar's forced text is proposed whatever the budget (it is rarely wrong) and is not
counted here. Only the drafts change with the budget, never the output.
"""

from __future__ import annotations

# Measured step cost (see module doc): the verify path's fixed part in draft rows, and a
# draft row's price in plain steps where none is measured (float32 weights: 1.26, 1.29, 1.33 at
# k = 1, 4, 8)
VERIFY_ROWS = 0.5
DRAFT_COST = 0.01
MARGIN = 0.03  # a budget must promise this much over plain decoding
DECAY = 0.7  # weight of older verifications in the rate (about the last 3 count)
PRIOR_RATE = 0.5  # a new request's rate, before any verification
# a constrained request's: it copies values from its prompt (JSON extraction, tool calls)
CONSTRAINED_PRIOR_RATE = 0.8
PROBE = 2  # drafts a probe proposes after a pause
FIRST_WAIT, MAX_WAIT = 1, 32  # steps without drafts after a budget of 0, doubled per failure
# (a first pause of 1, not 2: a request that missed once probes again before the copy is over)
COPYING_RATE = 0.9  # a copying request's rate: a probe is made only where it would pay


def expected_tokens(rate: float, k: int) -> float:
    """Tokens a step emits with ``k`` drafts, each accepted with ``rate`` after the one
    before it: ``1 + rate + ... + rate^k``."""
    return sum(rate**i for i in range(k + 1))


def step_cost(k: int, row_cost: float = DRAFT_COST) -> float:
    """A step with ``k`` drafts at ``row_cost`` each, in plain decode steps."""
    return 1.0 + row_cost * (VERIFY_ROWS + k) if k else 1.0


def best_length(rate: float, most: int, row_cost: float = DRAFT_COST) -> int:
    """The draft count in ``[1, most]`` with the most expected tokens per cost (drafts at
    ``row_cost``), or 0 when none promises ``1 + MARGIN`` tokens per plain step."""
    best, gain = 0, 1.0 + MARGIN
    for k in range(1, most + 1):
        g = expected_tokens(rate, k) / step_cost(k, row_cost)
        if g > gain:
            best, gain = k, g
    return best


class DraftBudget:
    """One request's lookup-draft budget (see module doc).

    Call :meth:`take` once per step the request decodes (it counts pauses down), then
    :meth:`update` after a verification with what its lookup drafts achieved."""

    __slots__ = ("most", "hits", "trials", "wait", "pause", "probing", "row_cost")

    def __init__(self, most: int, prior: float = PRIOR_RATE) -> None:
        if most < 0:
            raise ValueError(f"most must be >= 0, got {most}")
        self.most = most
        # decayed counts: accepted drafts, and drafts that were checked (accepted or the first
        # rejected one: later drafts of a chain are never compared). Prior: ``prior``, with
        # the weight of two checked drafts.
        self.hits, self.trials = 2.0 * prior, 2.0
        self.wait = 0  # steps left without drafts
        self.pause = FIRST_WAIT  # the next pause's length
        self.probing = False  # the current proposal is a probe after a pause
        self.row_cost = DRAFT_COST  # a draft row's price at the last :meth:`take`

    @property
    def rate(self) -> float:
        """Estimated chance that a draft is accepted given the one before it was."""
        return self.hits / self.trials

    @property
    def now(self) -> int:
        """Drafts the request would propose at this step (without counting a pause down)."""
        if self.wait > 0 or not self.most:
            return 0
        if self.probing:
            worth = best_length(COPYING_RATE, self.most, self.row_cost) > 0
            return min(PROBE, self.most) if worth else 0
        return best_length(self.rate, self.most, self.row_cost)

    def take(self, row_cost: float = DRAFT_COST) -> int:
        """The drafts to propose this step (0: decode plainly) at ``row_cost`` a draft
        (:mod:`.step_cost`), counting a pause down; a rate that drafts nothing (a low prior)
        starts a pause, so a probe follows (where a copy would pay)."""
        self.row_cost = row_cost
        if self.wait > 0:
            self.wait -= 1
            self.probing = self.wait == 0
            return 0
        k = self.now
        if not k and self.most:
            self._rest()
        return k

    def update(self, proposed: int, accepted: int) -> None:
        """After a verification of ``proposed`` lookup drafts, ``accepted`` of them kept (a
        prefix of the chain)."""
        if proposed <= 0:
            return
        accepted = min(accepted, proposed)
        checked = accepted + (accepted < proposed)
        self.hits = DECAY * self.hits + accepted
        self.trials = DECAY * self.trials + checked
        if self.probing:
            self.probing = False
            if accepted:
                self.pause = FIRST_WAIT
            else:
                self.pause = min(2 * self.pause, MAX_WAIT)
        if best_length(self.rate, self.most, self.row_cost) == 0:
            self._rest()

    def _rest(self) -> None:
        """Stop drafting for a pause, then probe."""
        self.wait = self.pause
