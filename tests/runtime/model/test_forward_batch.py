"""ForwardBatch: the decode plan comes from the kernel set's planner, once per window."""

from __future__ import annotations

import pytest
import torch

from radixlm.runtime.model.forward_batch import ContextLengthError, ForwardBatch, SeqSpec


def _mixed_batch() -> ForwardBatch:
    """Requests 0 and 2 decode (one new token), request 1 extends by two."""
    seqs = [SeqSpec([1], [0, 1, 2]), SeqSpec([2, 3], [3, 4, 5, 6]), SeqSpec([4], [7, 8])]
    return ForwardBatch.build(seqs, device=torch.device("cpu"), max_context=16, page_size=1)


@pytest.mark.parametrize("plan", [object(), None], ids=["a-plan", "no-plan"])
def test_decode_plan_is_built_by_the_planner_once_per_window(plan: object | None) -> None:
    batch = _mixed_batch()
    calls: list[tuple] = []

    def planner(*args: object) -> object | None:
        calls.append(args)
        return plan

    assert batch.decode_plan(0, planner) is plan
    assert batch.decode_plan(0, planner) is plan  # every later layer gets the same plan
    assert len(calls) == 1
    slots, lens, page_size, window, _ = calls[0]
    assert lens.tolist() == [3, 2] and page_size == 1 and window == 0  # decode requests only
    assert slots[:, :2].tolist() == [[0, 1], [7, 8]]
    assert batch.decode_plan(4, planner) is plan  # a sliding-window layer plans its own
    assert len(calls) == 2 and calls[1][3] == 4


def test_from_table_takes_keywords_only() -> None:
    with pytest.raises(TypeError):
        ForwardBatch.from_table(torch.zeros(1, 1, dtype=torch.int64))  # type: ignore[misc]


@pytest.mark.parametrize("lens", [[1], [5], [3, 9, 2], [16, 16, 1, 7, 30]])
@pytest.mark.parametrize("starts", ["last", "zero"])
def test_a_decode_only_batch_has_the_general_paths_fields(lens: list[int], starts: str) -> None:
    """from_table's short path for batches of one new token each gives every field (values,
    dtypes, shapes) that the general mixed-batch construction gives."""
    gen = torch.Generator().manual_seed(len(lens))
    table = torch.randperm(200, generator=gen)[:len(lens) * 32].view(len(lens), 32)
    args = dict(seq_slots=table, seq_lens=torch.tensor(lens),
                ext_lens=torch.ones(len(lens), dtype=torch.int64),
                input_ids=list(range(3, 3 + len(lens))),
                logits_starts=torch.full((len(lens),), -1 if starts == "last" else 0),
                device=torch.device("cpu"), page_size=16, workspace=None)
    fast = ForwardBatch.from_table(max_context=64, **args)
    general = ForwardBatch._general(**args)
    for name, value in vars(general).items():
        got = getattr(fast, name)
        if isinstance(value, torch.Tensor):
            assert got.dtype == value.dtype and torch.equal(got, value), name
        else:
            assert got == value, name


@pytest.mark.parametrize("case,error,match", [
    ("no request", ValueError, "at least one request"),
    ("no new token", ValueError, "at least one new token"),
    ("fewer slots than new tokens", ValueError, "at least the new tokens"),
    ("past the context", ContextLengthError, "exceeds the model's context of 8"),
    ("narrow table", ValueError, "slot table has 4 columns, needs 6"),
    ("ids", ValueError, "expected 3 input ids, got 2"),
    ("start", ValueError, "request 1: logits_start 2 outside"),
])
def test_from_table_rejects_what_it_cannot_run(case: str, error: type, match: str) -> None:
    """The checks on Python lists (the usual path) still raise each error."""
    args = {"seq_slots": torch.zeros(2, 16, dtype=torch.int64),
            "seq_lens": torch.tensor([4, 6]), "ext_lens": torch.tensor([1, 2]),
            "input_ids": [1, 2, 3], "logits_starts": torch.tensor([-1, 0])}
    bad = {"no request": {"seq_lens": torch.tensor([], dtype=torch.int64),
                          "ext_lens": torch.tensor([], dtype=torch.int64),
                          "logits_starts": torch.tensor([], dtype=torch.int64), "input_ids": []},
           "no new token": {"ext_lens": torch.tensor([0, 2]), "input_ids": [1, 2]},
           "fewer slots than new tokens": {"seq_lens": torch.tensor([4, 1])},
           "past the context": {"seq_lens": torch.tensor([4, 9])},
           "narrow table": {"seq_slots": torch.zeros(2, 4, dtype=torch.int64)},
           "ids": {"input_ids": [1, 2]},
           "start": {"logits_starts": torch.tensor([-1, 2])}}
    args.update(bad[case])
    with pytest.raises(error, match=match):
        ForwardBatch.from_table(**args, device=torch.device("cpu"), max_context=8)
