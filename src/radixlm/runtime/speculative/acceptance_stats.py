"""What speculative verification accepted, for ``/get_server_info`` and ``/metrics``."""

from __future__ import annotations

from collections.abc import Sequence

from .draft_chain import SOURCES


class AcceptanceStats:
    """Counts over every verification (a request's step that checked at least one draft)."""

    def __init__(self) -> None:
        self.verify_steps = 0  # request-steps that verified drafts
        self.emitted_tokens = 0  # tokens those steps added to outputs (accepted + the model's)
        self.drafted = dict.fromkeys(SOURCES, 0)  # draft tokens proposed (and checked)
        self.accepted = dict.fromkeys(SOURCES, 0)  # of those, accepted
        self.skipped_batch = 0  # decode steps that did not speculate: batch above threshold

    def record(self, sources: Sequence[str], accepted: int, emitted: int) -> None:
        """One verification: the drafts' ``sources`` (in order), how many leading drafts were
        accepted, and how many tokens the step added to the output."""
        self.verify_steps += 1
        self.emitted_tokens += emitted
        for i, source in enumerate(sources):
            self.drafted[source] += 1
            if i < accepted:
                self.accepted[source] += 1

    def summary(self) -> dict[str, float | int]:
        """``spec_accept_length_mean``: tokens per verification (1 = no draft accepted);
        ``spec_accept_rate``: accepted / proposed drafts; then the counts per source."""
        drafted, accepted = sum(self.drafted.values()), sum(self.accepted.values())
        out: dict[str, float | int] = {
            "spec_verify_steps": self.verify_steps,
            "spec_emitted_tokens": self.emitted_tokens,
            "spec_accept_length_mean": (self.emitted_tokens / self.verify_steps
                                        if self.verify_steps else 0.0),
            "spec_draft_tokens": drafted,
            "spec_accepted_tokens": accepted,
            "spec_accept_rate": accepted / drafted if drafted else 0.0,
            "spec_skipped_batch_steps": self.skipped_batch,
        }
        for source in SOURCES:
            out[f"spec_draft_tokens_{source}"] = self.drafted[source]
            out[f"spec_accepted_tokens_{source}"] = self.accepted[source]
        return out
