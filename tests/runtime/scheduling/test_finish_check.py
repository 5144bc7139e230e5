"""The one finish check, shared by sampled tokens and jump-forward (char-level fake tokenizer)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from radixlm.runtime.scheduling.finish_check import FinishCheck, eos_ids_of
from radixlm.runtime.scheduling.request import Req
from radixlm.runtime.wire.messages import FinishLength, FinishStop
from radixlm.runtime.wire.sampling_params import SamplingParams

EOS, STOP = 1, 2


class CharTokenizer:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(t) for t in ids if t > STOP)


def finished(output: str | list[int], sampled: bool = True, extra: int = 0, context=64,
             stop_strs=(), **params):
    """The check after ``output`` (text or ids) was produced after a 3-token prompt."""
    ids = [ord(c) for c in output] if isinstance(output, str) else list(output)
    req = Req(rid="r", token_ids=[50, 51, 52] + ids, prompt_len=3,
              sampling=SamplingParams(**{"max_new_tokens": 16, **params}),
              stop_strs=list(stop_strs))
    return FinishCheck(CharTokenizer(), [EOS], context).check(
        req, sampled=ids[-1] if sampled else None, extra=extra)


@pytest.mark.parametrize("output, params, expected", [
    ("ab" + chr(EOS), {}, FinishStop(matched=EOS)),
    ("ab" + chr(EOS), {"ignore_eos": True}, None),
    ("a" + chr(EOS), {"min_new_tokens": 3}, None),  # the sampler bans it; never counted early
    ("ab" + chr(STOP), {"stop_token_ids": [STOP]}, FinishStop(matched=STOP)),
    ("ab", {"max_new_tokens": 2}, FinishLength(length=2)),
    ("abc", {}, None),
], ids=["eos", "ignore_eos", "before min_new_tokens", "stop token", "max_new_tokens", "go on"])
def test_a_sampled_token(output, params, expected):
    assert finished(output, **params) == expected


def test_an_int_matched_is_always_the_last_output_token():
    for params, last in (({}, EOS), ({"stop_token_ids": [STOP]}, STOP)):
        reason = finished([ord("a"), last], **params)
        assert isinstance(reason, FinishStop) and reason.matched == last


def test_a_stop_string_is_found_in_the_tail_only_from_min_new_tokens_on():
    assert finished("say END", stop_strs=["END"]) == FinishStop(matched="END")
    assert finished("END", stop_strs=["END"], min_new_tokens=4) is None


def test_a_jump_never_stops_on_a_token_but_finds_a_stop_string_in_all_the_forced_text():
    assert finished("ab" + chr(EOS), sampled=False) is None
    long = "xEND" + "y" * 6  # the stop string 10 tokens back: found only with extra
    assert finished(long, sampled=False, stop_strs=["END"]) is None
    assert finished(long, sampled=False, extra=6, stop_strs=["END"]) == FinishStop(matched="END")


@pytest.mark.parametrize("sampled", [True, False], ids=["sampled", "jump"])
def test_a_stop_string_wins_over_the_length_limit_on_both_paths(sampled):
    assert finished("abEND", sampled=sampled, max_new_tokens=5,
                    stop_strs=["END"]) == FinishStop(matched="END")


def test_the_context_ends_the_output_with_its_length():
    assert finished("abcd", context=7) == FinishLength(length=4)


def test_eos_ids_add_the_tokenizers_own():
    assert eos_ids_of([5], SimpleNamespace(eos_token_id=7)) == [5, 7]
    assert eos_ids_of([5], SimpleNamespace(eos_token_id=5)) == [5]
    assert eos_ids_of([5], object()) == [5]
