"""What every example shares: pick a model (the built-in tiny one by default, any Hugging
Face folder with --model-path, or a running server with --url) and run ``main(backend)``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import radixlm as sgl


def tiny_model_path() -> str:
    """The built-in tiny model, briefly trained (built on first use, then cached)."""
    from radixlm import env
    from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model

    spec = TinyModelSpec(arch="llama", size="tiny", train_seconds=90)
    return str(ensure_tiny_model(spec, env.cache_dir() / "models"))


def run_example(main: Callable[[Any], None], description: str) -> None:
    """Parse the common flags, start the backend, run ``main(backend)``, stop the backend."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model-path", help="a Hugging Face model folder (default: the "
                        "built-in tiny model)")
    parser.add_argument("--url", help="use a running radixlm/SGLang server instead")
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.url:
        main(sgl.RuntimeEndpoint(args.url, api_key=args.api_key))
        return
    with sgl.Engine(model_path=args.model_path or tiny_model_path()) as engine:
        main(engine)
