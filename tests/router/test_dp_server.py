"""``serve --dp-size``: each replica is started with flags that rebuild the same ServerArgs.

(The live behaviour of ``serve --dp-size 2`` is tested with the router's, in
test_http_router.py, where the same tests run over both deployments.)"""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from radixlm.router.dp_server import replica_flags
from radixlm.runtime.server_args import ServerArgs


@pytest.mark.parametrize("kwargs", [
    {},
    {"tp_size": 2, "disable_radix_cache": True, "api_key": "k", "cache_threshold": 0.25,
     "served_model_name": "m", "reasoning_end_marker": "</think>", "max_total_tokens": 4096},
])
def test_replica_flags_rebuild_the_replica_args(kwargs):
    args = dataclasses.replace(ServerArgs(model_path="/models/x", **kwargs), port=12345)
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    assert ServerArgs.from_cli_args(parser.parse_args(replica_flags(args))) == args
