"""Request bodies are validated with errors that name the field, and expanded per sequence."""

from __future__ import annotations

import pytest

from radixlm.runtime.api.generate_request import RequestValidationError, parse_generate_request
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.sampling_params import SamplingParamsError, parse_sampling_params


def test_single_batch_and_n_expansion():
    one = parse_generate_request({"text": "hi"})
    assert len(one.items) == 1 and not one.is_batch
    batch = parse_generate_request({"text": ["a", "b"], "sampling_params": [{"n": 2}, {}]})
    assert [it.text for it in batch.items] == ["a", "a", "b"] and batch.is_batch
    assert batch.items[0].rid.endswith("-0") and batch.items[1].rid.endswith("-1")
    ids = parse_generate_request({"input_ids": [[1, 2], [3]], "rid": ["x", "y"]})
    assert [it.rid for it in ids.items] == ["x", "y"]


@pytest.mark.parametrize(("body", "needle"), [
    ({}, "exactly one of 'text' or 'input_ids'"),
    ({"text": "a", "input_ids": [1]}, "exactly one"),
    ({"text": 5}, "text: expected a string"),
    ({"input_ids": [[1], "x"]}, "input_ids"),
    ({"text": "a", "bogus": 1}, "unknown field(s) ['bogus']"),
    ({"text": ["a", "b"], "sampling_params": [{}]}, "sampling_params: expected 2 values"),
    ({"text": "a", "return_logprob": "yes"}, "return_logprob: expected bool"),
    ({"text": "a", "image_data": "x.png"}, "image_data: images"),
    ({"text": ["a", "b"], "rid": ["same", "same"]}, "unique"),
])
def test_bad_bodies_name_the_problem(body, needle):
    with pytest.raises(RequestValidationError) as exc:
        parse_generate_request(body)
    assert needle in str(exc.value)


@pytest.mark.parametrize(("params", "needle"), [
    ({"top_p": 0}, "top_p"), ({"top_k": 0}, "top_k"), ({"n": 0}, "n must"),
    ({"min_new_tokens": 5, "max_new_tokens": 2}, "min_new_tokens"),
    ({"regex": "a", "json_schema": "{}"}, "at most one"),
    ({"ebnf": 'root ::= "x"', "regex": "a"}, "at most one"), ({"stop": [""]}, "stop"),
    ({"temperature": "hot"}, "'temperature'"), ({"max_tokenz": 1}, "max_tokenz"),
])
def test_bad_sampling_params_name_the_field(params, needle):
    with pytest.raises(SamplingParamsError, match=needle):
        parse_sampling_params(params)


def test_sampling_aliases_and_defaults():
    p = parse_sampling_params({"max_tokens": 7, "sampling_seed": 3})
    assert p.max_new_tokens == 7 and p.seed == 3 and p.top_k == -1 and p.temperature == 1.0


def test_server_args_validate_and_name_unknown_keys():
    with pytest.raises(TypeError, match="unknown server argument.*page_sise"):
        ServerArgs.from_kwargs(model_path="m", page_sise=4)
    with pytest.raises(ValueError, match="schedule_policy"):
        ServerArgs(model_path="m", schedule_policy="random")
    with pytest.raises(ValueError, match="page_size must be >= 1"):
        ServerArgs(model_path="m", page_size=0)
    with pytest.raises(ValueError, match="tp_size must be >= 1"):
        ServerArgs(model_path="m", tp_size=0)
    with pytest.raises(ValueError, match="tp_size .3. must be a multiple of nnodes"):
        ServerArgs(model_path="m", tp_size=3, nnodes=2, dist_init_addr="127.0.0.1:5000")
    with pytest.raises(ValueError, match="needs --dist-init-addr"):
        ServerArgs(model_path="m", tp_size=2, nnodes=2)
    with pytest.raises(ValueError, match="dist_init_addr must be host:port"):
        ServerArgs(model_path="m", tp_size=2, dist_init_addr="localhost")
    import argparse

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = ServerArgs.from_cli_args(parser.parse_args(
        ["--model-path", "m", "--page-size", "16", "--disable-radix-cache",
         "--schedule-policy", "fcfs", "--mem-fraction-static", "0.8"]))
    assert args.page_size == 16 and args.disable_radix_cache and args.schedule_policy == "fcfs"
