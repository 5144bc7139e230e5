"""Constrained decoding inside the scheduler: compiles, masks, grammar state, jump-forward.

Placeholder until the fsm package is wired in: constrained requests are refused clearly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .messages import GrammarReq, ReqOut
from .request import Req, RequestError

if TYPE_CHECKING:
    from .scheduler import Scheduler
    from .server_args import ServerArgs


class GrammarManager:
    def __init__(self, args: ServerArgs, tokenizer: Any, vocab_size: int,
                 eos_ids: list[int]) -> None:
        self.args = args

    def admit(self, req: Req, grammar: GrammarReq | None) -> None:
        if grammar is not None:
            raise RequestError("constrained decoding is not available in this build")

    def poll_compiles(self, scheduler: Scheduler) -> list[ReqOut]:
        return []

    def apply_masks(self, reqs: list[Req], logits: torch.Tensor) -> None:
        return None

    def after_token(self, scheduler: Scheduler, req: Req, token: int) -> dict | None:
        return None

    def release(self, req: Req) -> None:
        return None

    def flush(self) -> None:
        return None
