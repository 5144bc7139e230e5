"""The grammar worker's speculative work and the scheduler's steps (speculative_share.py):
held off through each forward where the forward leaves no core spare, never otherwise; greedy
output the same either way."""

from __future__ import annotations

import pytest
from stepping import matches_reference

from radixlm.fsm.compile.background_hold import BackgroundHold
from radixlm.runtime.scheduling.speculative_share import SpeculativeShare, usable_cores


class _Compiler:
    def __init__(self) -> None:
        self.speculative = BackgroundHold()


def test_steps_hold_speculative_work_only_where_no_core_is_spare() -> None:
    compiler = _Compiler()
    share = SpeculativeShare(forward_threads=1, cores=1)
    share.forward_started(compiler)
    share.forward_started(compiler)  # a step that raised before it ended: still one hold
    assert share.holding and compiler.speculative.held
    share.forward_ended()
    assert not share.holding and not compiler.speculative.held
    share.forward_ended()  # nothing held: nothing to release
    spare = SpeculativeShare(forward_threads=1, cores=2)
    spare.forward_started(compiler)
    assert not spare.holding and not compiler.speculative.held, "a spare core: runs beside"
    share.forward_started(None)  # no compiler built yet: nothing to hold
    assert not share.holding
    assert SpeculativeShare(forward_threads=1).cores == usable_cores() >= 1


@pytest.mark.parametrize("cores", [1, 64], ids=["no spare core", "spare cores"])
def test_greedy_output_is_the_same_with_speculative_work_held_through_forwards(make_scheduler,
                                                                          cores):
    s = make_scheduler(grammar_mask_wait_ms=0)  # never wait: hold whatever is cold
    s.grammar.speculative = SpeculativeShare(forward_threads=1, cores=cores)
    seen: list[bool] = []
    forward = s.runner.forward

    def watched(batch):  # noqa: ANN001, ANN202
        seen.append(s.grammar.compiler.speculative.held)
        return forward(batch)

    s.runner.forward = watched
    after: list[bool] = []  # sampling, verify masks, advances: they may need the DFA's lock
    process = s.output.process

    def processed(*args):  # noqa: ANN002, ANN202
        after.append(s.grammar.compiler.speculative.held)
        return process(*args)

    s.output.process = processed
    matches_reference(make_scheduler, s)
    assert seen and (all(seen) if cores == 1 else not any(seen))
    assert after and not any(after), "held through the forward only, never after it"
    assert not s.grammar.compiler.speculative.held, "released once the steps are over"
