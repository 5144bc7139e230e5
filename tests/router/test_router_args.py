"""RouterArgs: sgl-router's flag names, validated on construction with the remedy named."""

from __future__ import annotations

import argparse

import pytest

from radixlm.router.router_args import RouterArgs

URL = "http://127.0.0.1:30001"


def parse(*argv: str) -> RouterArgs:
    parser = argparse.ArgumentParser()
    RouterArgs.add_cli_args(parser)
    return RouterArgs.from_cli_args(parser.parse_args(list(argv)))


def test_sgl_router_flags_parse():
    args = parse("--worker-urls", URL + "/", "http://10.0.0.2:8000", "--policy", "round_robin",
                 "--cache-threshold", "0.3", "--balance-abs-threshold", "64",
                 "--balance-rel-threshold", "1.5", "--max-tree-size", "1000", "--port", "0")
    assert args.worker_urls == (URL, "http://10.0.0.2:8000")  # trailing slash dropped
    assert (args.policy, args.cache_threshold, args.balance_abs_threshold,
            args.balance_rel_threshold, args.max_tree_size) == ("round_robin", 0.3, 64, 1.5,
                                                                1000)


@pytest.mark.parametrize("kwargs, message", [
    ({"worker_urls": ()}, "at least one worker URL"),
    ({"worker_urls": ("127.0.0.1:30001",)}, "not http"),
    ({"worker_urls": ("http://h",)}, "not http"),
    ({"worker_urls": (URL, URL + "/")}, "listed twice"),
    ({"policy": "random"}, "policy must be one of"),
    ({"cache_threshold": 1.5}, "cache_threshold"),
    ({"balance_abs_threshold": -1}, "balance_abs_threshold"),
    ({"balance_rel_threshold": 0.5}, "balance_rel_threshold"),
    ({"port": 70000}, "port"),
    ({"health_check_interval_secs": 0}, "health_check_interval_secs"),
])
def test_bad_settings_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RouterArgs(**{"worker_urls": (URL,), **kwargs})


def test_args_are_frozen():
    with pytest.raises(AttributeError):
        RouterArgs(worker_urls=(URL,)).policy = "round_robin"  # type: ignore[misc]
