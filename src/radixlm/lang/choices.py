"""How ``select`` turns per-token logprobs of each choice into a decision.

The three SGLang methods are reproduced exactly (same inputs, same rules, ties to the earliest
choice). Each method receives, per choice, the logprob entries of the choice's own tokens
(``(logprob, token_id, text)``), the mean of those logprobs, and, for
``unconditional_likelihood_normalized``, the same tokens scored without the prompt.

Known bias (sgl-project/sglang#523): a mean favours long choices whose later tokens are nearly
certain. :data:`total_logprob` (the sum, i.e. the joint probability of the choice) is offered
as an alternative, and ``unconditional_likelihood_normalized`` calibrates for choices that are
likely on their own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

LogprobEntry = Sequence[Any]  # (logprob | None, token_id, text | None)


@dataclass
class ChoicesDecision:
    """The chosen string and what the method saw (returned as the select's meta info)."""

    decision: str
    meta_info: dict[str, Any] = field(default_factory=dict)


def _argmax_first(values: Sequence[float]) -> int:
    if not values:
        raise ValueError("select needs at least one choice, got none")
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _value(lp: float | None) -> float:
    # A null logprob means "no context" (first token of a sequence): it carries no evidence.
    return 0.0 if lp is None else float(lp)


def mean_logprob(entries: Sequence[LogprobEntry]) -> float:
    """Mean of the non-null logprobs of ``entries`` (``-inf`` when none is scored).

    SGLang also skips an exact ``0.0`` (it tests truthiness); a logprob of 0 is a certain token
    and is counted here.
    """
    values = [float(e[0]) for e in entries if e[0] is not None]
    return _mean(values) if values else float("-inf")


Rows = list[list[LogprobEntry]]  # per choice, the entries of its tokens


class ChoicesSamplingMethod(ABC):
    """A rule that picks one choice from its token logprobs. Subclasses implement
    :meth:`decide`; calling the method (SGLang's keyword interface) returns the decision and
    the meta info every method reports."""

    @property
    def requires_unconditional_logprobs(self) -> bool:
        """True if the backend must also score each choice without the prompt."""
        return False

    def __call__(self, *, choices: list[str], normalized_prompt_logprobs: list[float],
                 input_token_logprobs: Rows, output_token_logprobs: Rows,
                 unconditional_token_logprobs: Rows | None = None) -> ChoicesDecision:
        best, extra = self.decide(normalized_prompt_logprobs, input_token_logprobs,
                                  unconditional_token_logprobs)
        meta = {"normalized_prompt_logprobs": normalized_prompt_logprobs,
                "input_token_logprobs": input_token_logprobs,
                "output_token_logprobs": output_token_logprobs, **extra}
        return ChoicesDecision(choices[best], meta)

    @abstractmethod
    def decide(self, normalized: list[float], inputs: Rows, unconditional: Rows | None
               ) -> tuple[int, dict[str, Any]]:
        """The index of the chosen choice and the method's own meta info."""

    def __repr__(self) -> str:
        return type(self).__name__


class TokenLengthNormalized(ChoicesSamplingMethod):
    """The choice with the highest mean token logprob (SGLang's default)."""

    def decide(self, normalized: list[float], inputs: Rows, unconditional: Rows | None
               ) -> tuple[int, dict[str, Any]]:
        return _argmax_first(normalized), {}


class GreedyTokenSelection(ChoicesSamplingMethod):
    """Compare choices token by token, keeping those with the best logprob at each position.

    Shorter choices are padded with their own mean logprob, so a choice that is a prefix of a
    longer one competes on its average. The earliest survivor wins.
    """

    def decide(self, normalized: list[float], inputs: Rows, unconditional: Rows | None
               ) -> tuple[int, dict[str, Any]]:
        matrix = self.logprob_matrix(inputs)
        remaining = list(range(len(matrix)))
        width = len(matrix[0]) if matrix else 0
        for j in range(width):
            best = max(matrix[i][j] for i in remaining)
            remaining = [i for i in remaining if matrix[i][j] == best]
            if len(remaining) == 1:
                break
        return remaining[0], {"greedy_logprob_matrix": matrix}

    @staticmethod
    def logprob_matrix(inputs: Rows) -> list[list[float]]:
        """One row per choice, padded to the longest with the row's mean."""
        width = max((len(row) for row in inputs), default=0)
        matrix = []
        for row in inputs:
            values = [_value(e[0]) for e in row]
            pad = _mean(values) if values else float("nan")
            matrix.append(values + [pad] * (width - len(values)))
        return matrix


class UnconditionalLikelihoodNormalized(ChoicesSamplingMethod):
    """The choice whose tokens gain the most from the prompt: mean of (conditional -
    unconditional) logprob, where the unconditional first token (no context) counts as 0."""

    @property
    def requires_unconditional_logprobs(self) -> bool:
        return True

    def decide(self, normalized: list[float], inputs: Rows, unconditional: Rows | None
               ) -> tuple[int, dict[str, Any]]:
        if unconditional is None:
            raise ValueError("unconditional_likelihood_normalized needs "
                             "unconditional_token_logprobs, got None")
        gains = [self._mean_gain(c, u) for c, u in zip(inputs, unconditional, strict=True)]
        return _argmax_first(gains), {"unconditional_token_logprobs": unconditional,
                                      "normalized_unconditional_prompt_logprobs": gains}

    @staticmethod
    def _mean_gain(cond: list[LogprobEntry], uncond: list[LogprobEntry]) -> float:
        if len(cond) != len(uncond):
            raise ValueError(f"conditional and unconditional logprobs must cover the same "
                             f"tokens, got {len(cond)} and {len(uncond)}")
        return _mean([_value(c[0]) - _value(u[0]) for c, u in zip(cond, uncond)])


class TotalLogprob(ChoicesSamplingMethod):
    """The choice with the highest summed logprob (its joint probability); radixlm extra.

    Unlike the mean it does not favour long choices with easy tails; it favours short ones.
    """

    def decide(self, normalized: list[float], inputs: Rows, unconditional: Rows | None
               ) -> tuple[int, dict[str, Any]]:
        totals = [sum(_value(e[0]) for e in row) for row in inputs]
        return _argmax_first(totals), {"total_logprobs": totals}


token_length_normalized = TokenLengthNormalized()
greedy_token_selection = GreedyTokenSelection()
unconditional_likelihood_normalized = UnconditionalLikelihoodNormalized()
total_logprob = TotalLogprob()
