"""The detokenizer process: incremental detokenization and stop-string trimming.

Per request it keeps the output ids and decodes only a short window at a time: the tokens since
the last emitted boundary, against the text they had before the newest ids arrived. Text
that ends in an incomplete UTF-8 sequence, or that could be the start of a stop string or of a
stop-regex match, is held back, so streamed text only ever grows and never shows a stop or U+FFFD.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import zmq

from ... import env
from . import ipc
from .messages import (
    DetokParams,
    ErrorOut,
    FinishReason,
    FinishStop,
    ReqOut,
    TextBatchOut,
    TextOut,
    TokenBatchOut,
)
from .stop_conditions import find_stop, holdback_start

logger = logging.getLogger(__name__)


@dataclass
class DetokState:
    params: DetokParams
    ids: list[int] = field(default_factory=list)
    text: str = ""  # decoded text of ids[:read_offset]
    prefix_offset: int = 0
    read_offset: int = 0
    emitted: int = 0  # characters of the visible text already sent


class IncrementalDetokenizer:
    """Turns token-id increments into text increments, per request."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.states: dict[str, DetokState] = {}

    def _decode(self, ids: list[int], p: DetokParams) -> str:
        vocab = len(self.tokenizer)
        ids = [i for i in ids if i < vocab]  # padded-vocabulary ids have no text
        return self.tokenizer.decode(
            ids, skip_special_tokens=p.skip_special_tokens,
            spaces_between_special_tokens=p.spaces_between_special_tokens,
        )

    def _advance(self, st: DetokState) -> None:
        """Extend ``st.text`` with the newly decodable part of ``st.ids``."""
        prefix = self._decode(st.ids[st.prefix_offset : st.read_offset], st.params)
        full = self._decode(st.ids[st.prefix_offset :], st.params)
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            st.text += full[len(prefix) :]
            st.prefix_offset = st.read_offset
            st.read_offset = len(st.ids)

    def _reset(self, st: DetokState) -> None:
        st.text = self._decode(st.ids, st.params)
        if st.text.endswith("\ufffd"):
            st.text = st.text.rstrip("\ufffd")
        st.prefix_offset = st.read_offset = len(st.ids)

    def process(self, out: ReqOut) -> TextOut:
        st = self.states.get(out.rid)
        if st is None:
            st = self.states[out.rid] = DetokState(out.detok or DetokParams())
        reset = False
        if out.rollback:
            del st.ids[len(st.ids) - out.rollback :]
            before = st.text
            self._reset(st)
            reset = not st.text.startswith(before[: st.emitted])
        st.ids.extend(out.new_ids)
        if out.finish_reason is not None:
            self._reset(st)
        else:
            self._advance(st)
        visible = self._visible(st, out.finish_reason)
        if reset:
            st.emitted = 0
        delta = visible[st.emitted :]
        st.emitted = len(visible)
        if out.finish_reason is not None:
            del self.states[out.rid]
        return TextOut(out=out, text_delta=delta, text_reset=reset)

    def _visible(self, st: DetokState, finish: FinishReason | None) -> str:
        """The text that may be shown now: trimmed at a stop string or stop regex match, and
        while unfinished held back before anything that may still become one."""
        p = st.params
        text, stops, regexes = st.text, p.stop_strs, p.stop_regexes
        if finish is not None:
            matched = finish.matched if isinstance(finish, FinishStop) else None
            if not isinstance(matched, str) or p.no_stop_trim:
                return text
            found = find_stop(text, [matched] if matched in stops or not regexes else [],
                              [matched] if matched in regexes else [])
            return text[: found.start] if found is not None else text
        if not stops and not regexes:
            return text
        found = find_stop(text, stops, regexes)
        if found is not None:
            return text[: found.start]
        return text[: holdback_start(text, stops, regexes)]

    def drop(self, rid: str | None) -> None:
        if rid is None:
            self.states.clear()
        else:
            self.states.pop(rid, None)


def _load_tokenizer(path: str) -> Any:
    """The tokenizer without transformers where the folder allows (light_tokenizer.py), else
    transformers' with torch blocked: decoding needs no torch (~220 MiB less here)."""
    from ..light_tokenizer import load_light_tokenizer
    from ..load_memory import load_tokenizer, release_freed_heap
    from ..torch_block import block_torch

    light = load_light_tokenizer(path, decode_only=True)  # this process never encodes
    if light is not None:
        release_freed_heap()
        return light
    block_torch()
    return load_tokenizer(path)


def run_detokenizer_process(tokenizer_path: str, endpoints: ipc.Endpoints,
                            ready: Connection) -> None:
    """Process entry point (spawned by the engine launcher)."""
    ipc.die_with_parent()
    logging.basicConfig(level=env.log_level(), format="%(asctime)s detokenizer %(message)s")
    try:
        detok = IncrementalDetokenizer(_load_tokenizer(tokenizer_path))
    except Exception as exc:
        ready.send({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(1) from None
    ctx = zmq.Context()
    inbox = ipc.bind_pull(ctx, endpoints.detokenizer)
    outbox = ipc.connect_push(ctx, endpoints.tokenizer)
    ready.send({"status": "ready"})
    while True:
        for msg in ipc.recv_all(inbox, 1000):
            if isinstance(msg, TokenBatchOut):
                for reply in detokenize_batch(detok, msg):
                    ipc.send(outbox, reply)
            else:  # control replies and errors pass through, in order
                if isinstance(msg, ErrorOut) and msg.rid is not None:  # its decode state goes
                    detok.drop(msg.rid)
                ipc.send(outbox, msg)


def detokenize_batch(detok: IncrementalDetokenizer, batch: TokenBatchOut
                     ) -> list[TextBatchOut | ErrorOut]:
    """The text of every output in ``batch``; an output whose decoding raises fails its
    request alone (an internal ``ErrorOut``, its state dropped), after the others' text."""
    texts: list[TextOut] = []
    errors: list[ErrorOut] = []
    for out in batch.outs:
        try:
            texts.append(detok.process(out))
        except Exception as exc:
            message = f"internal error while detokenizing: {type(exc).__name__}: {exc}"
            logger.error("request %s failed: %s", out.rid, message, exc_info=exc)
            detok.drop(out.rid)
            errors.append(ErrorOut(rid=out.rid, message=message, code="internal"))
    return ([TextBatchOut(outs=texts)] if texts else []) + errors
