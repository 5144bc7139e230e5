"""The finish reason of an output closed within its budget (``budget_closing``)."""

from __future__ import annotations

import pytest

from radixlm.runtime.scheduling.budget_closing import BUDGET_CLOSED, budget_finish
from radixlm.runtime.scheduling.request import Req
from radixlm.runtime.wire.messages import FinishAbort, FinishLength, FinishStop
from radixlm.runtime.wire.sampling_params import SamplingParams


def _req(closed: bool) -> Req:
    req = Req(rid="r", token_ids=[1, 2, 3], prompt_len=3,
              sampling=SamplingParams(max_new_tokens=9))
    req.budget_closed = closed
    return req


@pytest.mark.parametrize("reason", [FinishLength(length=9), FinishStop(matched=7)])
def test_an_output_the_budget_shaped_ends_with_length_and_says_so(reason) -> None:  # noqa: ANN001
    assert budget_finish(_req(True), reason) == FinishLength(length=9, message=BUDGET_CLOSED)
    assert budget_finish(_req(False), reason) == reason  # never narrowed: as without closing


@pytest.mark.parametrize("reason", [FinishStop(matched="\n\n"), FinishAbort(message="x"),
                                    FinishLength(length=5, message="the KV pool is full")])
def test_stop_strings_aborts_and_other_limits_keep_their_reason(reason) -> None:  # noqa: ANN001
    assert budget_finish(_req(True), reason) == reason
