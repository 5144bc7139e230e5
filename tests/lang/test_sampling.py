"""Sampling parameters: field-by-field inheritance, dtype -> regex, the request they become."""

from __future__ import annotations

import re

import pytest

from radixlm.lang.sampling import (
    REGEX_BOOL,
    REGEX_FLOAT,
    REGEX_INT,
    REGEX_STR,
    SglSamplingParams,
    program_defaults,
)


def test_gen_values_replace_only_their_own_fields():
    defaults = program_defaults(max_new_tokens=128, temperature=0.7, stop="\n", top_p=0.9)
    merged = defaults.merged(SglSamplingParams(max_new_tokens=5, stop=["."]))
    assert (merged.max_new_tokens, merged.temperature, merged.top_p) == (5, 0.7, 0.9)
    assert merged.stop == ["."]
    merged.stop.append("!")
    assert defaults.stop == "\n", "merging must not alias the defaults' lists"


@pytest.mark.parametrize(("dtype", "regex", "stops", "sample"), [
    (int, REGEX_INT, [" ", "\n"], "-42"),
    ("int", REGEX_INT, [" ", "\n"], "+7 "),
    (float, REGEX_FLOAT, [" ", "\n"], "3.25"),
    (bool, REGEX_BOOL, [], "False"),
    (str, REGEX_STR, [], '"Paris 2"'),
])
def test_dtype_becomes_a_regex_and_stop_strings(dtype, regex, stops, sample):
    params = SglSamplingParams(dtype=dtype, stop=["x"]).with_dtype_applied()
    assert params.regex == regex and params.dtype is None
    assert params.stop == ["x"] + stops
    assert re.fullmatch(regex, sample)


def test_dtype_wins_over_an_explicit_regex_with_a_warning():
    with pytest.warns(UserWarning, match="dtype"):
        params = SglSamplingParams(dtype=int, regex="[a-z]+").with_dtype_applied()
    assert params.regex == REGEX_INT


def test_request_leaves_unset_fields_to_the_server():
    body = SglSamplingParams(max_new_tokens=8, stop=[], temperature=0.0,
                             return_logprob=True, top_logprobs_num=2).to_request()
    assert body["sampling_params"] == {"max_new_tokens": 8, "temperature": 0.0,
                                       "skip_special_tokens": True,
                                       "spaces_between_special_tokens": True}
    assert body["return_logprob"] is True and body["top_logprobs_num"] == 2
    assert "logprob_start_len" not in body


@pytest.mark.parametrize(("name", "value"), [
    ("max_new_tokens", "many"), ("max_new_tokens", -1), ("temperature", "hot"),
    ("temperature", -0.5), ("stop", 3), ("stop_token_ids", ["a"]), ("ignore_eos", 1),
])
def test_bad_program_defaults_name_the_argument(name, value):
    with pytest.raises(ValueError, match=f"run\\(\\): {name} must be"):
        program_defaults(**{name: value})
