"""How many lookup drafts a request proposes next: more after chains that were accepted
whole, fewer after chains rejected from their first token.

A rejected draft is not free: on a CPU at batch 1 each one adds a few percent to the verify
forward, so a request whose text does not repeat (open-ended writing) would pay for chains it
never keeps. The budget halves after a chain with nothing accepted (down to 1), is set just
past what was accepted after a partial one, and doubles after a whole one (up to the
configured most). The grammar's forced text is proposed whatever the budget: it is rarely
wrong. Only the drafts change with it, never the output.
"""

from __future__ import annotations


class DraftBudget:
    """One request's lookup-draft budget (see module doc)."""

    __slots__ = ("most", "now")

    def __init__(self, most: int) -> None:
        self.most = most
        self.now = most

    def update(self, proposed: int, accepted: int) -> None:
        """After a verification of ``proposed`` drafts, ``accepted`` of them kept."""
        if proposed <= 0:
            return
        if accepted >= proposed:
            self.now = min(self.most, 2 * self.now)
        elif accepted == 0:
            self.now = max(1, self.now // 2)
        else:
            self.now = min(self.most, accepted + 1)
