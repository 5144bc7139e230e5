"""``python -m radixlm.launch_server --model-path DIR [--port N] ...`` (SGLang's flag names)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from . import env
from .dataclass_cli import build_or_exit


def main(argv: Sequence[str] | None = None) -> int:
    from .runtime.api.http_server import launch_server
    from .runtime.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="radixlm serve", description="Serve a model over "
                                     "SGLang's native API and the OpenAI-compatible API.")
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=env.log_level(), format="%(asctime)s %(name)s %(message)s")
    server_args = build_or_exit(parser, ServerArgs.from_cli_args, args)
    if server_args.dp_size > 1:  # N replicas behind the HTTP router (router/dp_server.py)
        from .router.dp_server import serve_data_parallel

        return serve_data_parallel(server_args)
    if server_args.node_rank > 0:  # no API on this node: its TP ranks only
        from .runtime.wire.tp_worker_process import run_worker_node

        return run_worker_node(server_args)
    return launch_server(server_args)


if __name__ == "__main__":
    sys.exit(main())
