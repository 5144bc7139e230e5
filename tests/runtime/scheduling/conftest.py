"""A scheduler driven in-process on the tiny model (no child processes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from transformers import AutoTokenizer

from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.server_args import ServerArgs


@pytest.fixture()
def make_scheduler(tiny_llama_path) -> Callable[..., Scheduler]:  # noqa: ANN001
    """``make_scheduler(**server_args)``: a fresh scheduler over the tiny Llama."""
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)

    def make(**kw: Any) -> Scheduler:
        kw.setdefault("max_total_tokens", 8192)  # ServerArgs' default is None: sized at start-up
        args = ServerArgs(model_path=str(tiny_llama_path), **kw)
        runner = ModelRunner(tiny_llama_path, RunnerConfig(page_size=args.page_size,
                                                           max_total_tokens=args.max_total_tokens))
        return Scheduler(args, runner, tok)

    return make
