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
        args = ServerArgs(model_path=str(tiny_llama_path), **kw)
        pool = {} if args.max_total_tokens is None else {"max_total_tokens":
                                                         args.max_total_tokens}
        runner = ModelRunner(tiny_llama_path, RunnerConfig(page_size=args.page_size, **pool))
        return Scheduler(args, runner, tok)

    return make
