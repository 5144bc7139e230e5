"""The ``radixlm`` console script: one entry point, one subcommand per job."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from . import env

Handler = Callable[[argparse.Namespace], int]


def _add_tiny_args(p: argparse.ArgumentParser, train_default: float) -> None:
    from .tiny_model import ARCHS, SIZES

    p.add_argument("--arch", choices=ARCHS, default="llama")
    p.add_argument("--size", choices=SIZES, default="tiny",
                   help="test (2 layers), tiny (demo, ~3M params), small (~20M, benchmarks)")
    p.add_argument("--train-seconds", type=float, default=train_default,
                   help="CPU training budget; 0 keeps the seeded random weights")
    p.add_argument("--seed", type=int, default=0)


def _make_tiny_model(args: argparse.Namespace) -> int:
    import torch

    from .tiny_model import TinyModelSpec, build_tiny_model

    torch.set_num_threads(env.num_threads_default())
    spec = TinyModelSpec(arch=args.arch, size=args.size, train_seconds=args.train_seconds,
                         seed=args.seed)
    out = build_tiny_model(spec, args.dir)
    print(f"wrote {spec.arch}/{spec.size} checkpoint to {out}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args)


def _build_parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    parser = argparse.ArgumentParser(prog="radixlm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    handlers: dict[str, Handler] = {}

    p = sub.add_parser("make-tiny-model", help="build a tiny Llama/Qwen2 checkpoint offline")
    p.add_argument("dir", help="output folder (a Hugging Face checkpoint)")
    _add_tiny_args(p, train_default=0.0)
    handlers["make-tiny-model"] = _make_tiny_model

    p = sub.add_parser("demo", help="the main job: JSON extraction as a program, on SmolLM2 "
                       "(if installed) or the built-in tiny model")
    _add_tiny_args(p, train_default=90.0)
    p.add_argument("--model-path", default=None,
                   help="any Llama/Qwen2/Mistral HF folder or .gguf file instead "
                        "of the built-in model")
    handlers["demo"] = _demo
    # `serve` is dispatched before parsing (its flags are ServerArgs'); listed for --help.
    sub.add_parser("serve", help="HTTP server (SGLang native + OpenAI APIs); "
                   "see `radixlm serve --help`")
    sub.add_parser("router", help="HTTP router over running `radixlm serve` instances "
                   "(--worker-urls, --policy); see `radixlm router --help`")
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        from .launch_server import main as serve_main

        return serve_main(argv[1:])
    if argv[:1] == ["router"]:
        from .router.http_router import main as router_main

        return router_main(argv[1:])
    logging.basicConfig(level=env.log_level(), format="%(asctime)s %(name)s %(message)s")
    parser, handlers = _build_parser()
    args = parser.parse_args(argv)
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
