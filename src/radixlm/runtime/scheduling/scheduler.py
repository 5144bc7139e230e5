"""The scheduler: continuous batching over the model runner with a radix prefix cache.

Every step builds one forward that mixes (a) a decode token for each running request past its
prefill and (b) prefill chunks of waiting requests within ``chunked_prefill_size`` tokens, in
policy order (``fcfs``, or ``lpm``: longest cached prefix first, with aging so a request that
hits nothing is not starved). Prefilled chunks go into the cache at once, so a request that
shares the prefix and is scheduled later reuses them; a request whose uncached prefix overlaps
one already scheduled in this step waits a step to hit the cache instead of computing the
prefix twice. When KV runs out, the cache is evicted (LRU) and then the latest running requests
are retracted to the queue (their output kept, their computed KV left in the cache).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import torch

from ..model.forward_batch import ForwardBatch
from ..model.model_runner import ModelRunner
from ..model.sampler import SampleRow, sample
from ..server_args import ServerArgs
from ..wire.messages import ControlOut, ControlReq, ErrorOut, GenerateReq, ReqOut
from ..wire.stop_conditions import find_stop, stop_str_window
from .grammar_manager import GrammarManager
from .request import Req, RequestError
from .schedule_policy import order_waiting, shares_uncached_prefix

logger = logging.getLogger(__name__)


@dataclass
class _Chunk:
    req: Req
    start: int  # first position computed in this step
    n: int  # tokens computed in this step


class Scheduler:
    """Owns the KV manager, the queues and the sampling of every step."""

    def __init__(self, args: ServerArgs, runner: ModelRunner, tokenizer: Any) -> None:
        from ..memory.kv_manager import KVManager

        self.args = args
        self.runner = runner
        self.tokenizer = tokenizer
        self.max_context = runner.max_context
        self.kv = KVManager(runner.allocator, args.max_running_requests, self.max_context,
                            enable_cache=not args.disable_radix_cache)
        self.grammar = GrammarManager(args, tokenizer, runner.vocab_size,
                                      self._eos_ids(runner, tokenizer), runner.ops)
        self.errors: list[ErrorOut] = []  # request errors found while stepping (drained)
        self.pending_outs: list[ReqOut] = []  # outputs produced outside _process
        self.eos_ids = set(self._eos_ids(runner, tokenizer))
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.reqs: dict[str, Req] = {}
        self.generator = torch.Generator().manual_seed(args.random_seed)
        self.counters = {"requests": 0, "finished": 0, "prompt_tokens": 0, "cached_tokens": 0,
                         "generated_tokens": 0, "forced_tokens": 0, "steps": 0,
                         "retracted": 0, "aborted": 0}
        self.last_step_time = time.monotonic()

    @staticmethod
    def _eos_ids(runner: ModelRunner, tokenizer: Any) -> list[int]:
        ids = list(runner.model_config.eos_token_ids)
        if getattr(tokenizer, "eos_token_id", None) is not None and \
                tokenizer.eos_token_id not in ids:
            ids.append(tokenizer.eos_token_id)
        return ids

    # -- intake ---------------------------------------------------------------------------

    def add_request(self, msg: GenerateReq) -> None:
        """Validate and queue; raises :class:`RequestError` naming the problem."""
        if msg.rid in self.reqs:
            raise RequestError(f"request id {msg.rid!r} is already in use")
        n = len(msg.input_ids)
        if n == 0:
            raise RequestError("the prompt is empty (0 tokens)")
        limit = self.max_context if msg.sampling.max_new_tokens == 0 else self.max_context - 1
        if n > limit:
            raise RequestError(f"the prompt has {n} tokens; the context length is "
                               f"{self.max_context} (at most {limit} prompt tokens)")
        capacity = self.kv.allocator.num_pages * self.kv.page_size
        if n + (msg.sampling.max_new_tokens > 0) > capacity:
            raise RequestError(f"the prompt has {n} tokens; the KV pool holds {capacity} "
                               f"(raise --max-total-tokens)")
        vocab = self.runner.vocab_size
        bad = [t for t in msg.input_ids if not 0 <= t < vocab]
        if bad:
            raise RequestError(f"input_ids contain ids outside [0, {vocab}): {bad[:5]}")
        if msg.logprob_start_len >= n and msg.sampling.max_new_tokens > 0:
            raise RequestError(f"logprob_start_len {msg.logprob_start_len} must be < the "
                               f"prompt length {n}")
        req = Req.from_message(msg)
        self.grammar.admit(req, msg.grammar)  # raises RequestError on a bad constraint
        self.reqs[req.rid] = req
        self.waiting.append(req)
        self.counters["requests"] += 1

    def abort(self, rid: str) -> ReqOut | None:
        """Abort a waiting or running request (unknown or finished ids are ignored)."""
        req = self.reqs.get(rid)
        if req is None:
            return None
        if req in self.waiting:
            self.waiting.remove(req)
        self.counters["aborted"] += 1
        return self._finish(req, {"type": "abort", "message": "aborted by the client"})

    def fail(self, rid: str) -> None:
        """Drop a request that errored (its error was reported separately)."""
        req = self.reqs.get(rid)
        if req is not None:
            if req in self.waiting:
                self.waiting.remove(req)
            self._release(req, cache=False)
            self.reqs.pop(rid, None)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def can_step(self) -> bool:
        """Work that a step can advance now (not only requests waiting for a compile)."""
        return bool(self.running) or any(r.grammar_future is None or r.grammar_future.done()
                                         for r in self.waiting)

    # -- one step -------------------------------------------------------------------------

    def step(self) -> list[ReqOut]:
        """Schedule, run one forward, sample, and return the outputs to send."""
        outs: list[ReqOut] = []
        self.errors.extend(self.grammar.poll_compiles(self))
        decodes = self._reserve_decodes()
        outs.extend(self.pending_outs)
        self.pending_outs.clear()
        chunks = self._schedule_prefills(decodes)
        if not decodes and not chunks:
            return outs
        batch, reqs = self._build_batch(decodes, chunks)
        logits = self.runner.forward(batch)
        self.counters["steps"] += 1
        outs.extend(self._process(batch, reqs, decodes, chunks, logits))
        self.last_step_time = time.monotonic()
        return outs

    def _reserve_decodes(self) -> list[Req]:
        """A KV slot for every decoding request, retracting the newest when memory is short."""
        decodes = [r for r in self.running if r.is_decoding and r.finish_reason is None]
        ok: list[Req] = []
        for req in sorted(decodes, key=lambda r: r.arrival):
            while req.kv is not None and self.kv.reserve(req.kv, 1) is None:
                holders = [r for r in self.running if r.kv is not None]
                if holders == [req]:  # alone and still out of room: the pool is too small
                    self.pending_outs.append(self._finish(
                        req, {"type": "length", "length": len(req.output_ids),
                              "message": "KV pool exhausted"}))
                    break
                victim = max(holders, key=lambda r: r.arrival)
                self._retract(victim)
                if victim in ok:
                    ok.remove(victim)
            if req.kv is not None and req.finish_reason is None:
                ok.append(req)
        return ok

    def _retract(self, req: Req) -> None:
        logger.info("retracting %s (KV exhausted) after %d output tokens", req.rid,
                    len(req.output_ids))
        self._release(req, cache=True)
        self.running.remove(req)
        self.waiting.insert(0, req)
        self.counters["retracted"] += 1

    def _schedule_prefills(self, decodes: list[Req]) -> list[_Chunk]:
        budget = self.args.chunked_prefill_size
        chunks: list[_Chunk] = []
        # continue chunked prefills (down to a last single prompt token: not a decode)
        for req in [r for r in self.running if r.pending and not r.is_decoding]:
            chunk = self._take_chunk(req, budget)
            if chunk is None:
                break
            chunks.append(chunk)
            budget -= chunk.n
        ordered = order_waiting(self.waiting, self.kv, self.args)
        for req in ordered:
            if budget <= 0 or self.kv.free_rows == 0:
                break
            if req.grammar_future is not None:  # constraint still compiling
                continue
            if shares_uncached_prefix(req, [c.req for c in chunks], self.kv):
                req.wait_steps += 1
                continue
            if not self._admit(req, decodes, budget, chunks):
                break
            if chunks and chunks[-1].req is req:
                budget -= chunks[-1].n
        for req in self.waiting:
            req.wait_steps += 1
        return chunks

    def _admit(self, req: Req, decodes: list[Req], budget: int, chunks: list[_Chunk]) -> bool:
        """Move ``req`` from waiting to running with its first chunk; False if no memory."""
        req.kv = self.kv.begin(req.fill_ids, req.namespace, req.max_reuse)
        if req.cached_tokens < 0:
            req.cached_tokens = req.kv.kv_len
            self.counters["prompt_tokens"] += len(req.input_ids)
            self.counters["cached_tokens"] += req.kv.kv_len
        # Leave a page of headroom per decoding request unless nothing else is running.
        headroom = len(decodes) if self.running else 0
        need = self.kv.pages_needed(req.kv, min(req.pending, budget)) + headroom
        chunk = self._take_chunk(req, budget) if self.kv.ensure_free(need) else None
        if chunk is None:
            self._release(req, cache=False)
            return False
        self.waiting.remove(req)
        self.running.append(req)
        chunks.append(chunk)
        return True

    def _take_chunk(self, req: Req, budget: int) -> _Chunk | None:
        assert req.kv is not None
        start = req.kv.kv_len
        n = min(req.pending, budget)
        if n <= 0 or self.kv.reserve(req.kv, n) is None:
            return None
        return _Chunk(req, start, n)

    def _build_batch(
        self, decodes: list[Req], chunks: list[_Chunk]
    ) -> tuple[ForwardBatch, list[Req]]:
        reqs = decodes + [c.req for c in chunks]
        ids: list[int] = [r.fill_ids[r.kv.kv_len - 1] for r in decodes]
        starts: list[int] = [-1] * len(decodes)
        for c in chunks:
            ids.extend(c.req.fill_ids[c.start : c.start + c.n])
            starts.append(self._logits_start(c))
        rows = torch.tensor([r.kv.row for r in reqs])
        seq_lens = torch.tensor([r.kv.kv_len for r in reqs])
        ext_lens = torch.tensor([1] * len(decodes) + [c.n for c in chunks])
        table = self.kv.table[rows, : int(seq_lens.max())].to(self.runner.device)
        batch = ForwardBatch.from_table(
            table, seq_lens, ext_lens, ids, torch.tensor(starts), self.runner.device,
            self.max_context, self.runner.config.page_size, self.runner.workspace,
        )
        return batch, reqs

    @staticmethod
    def _logits_start(c: _Chunk) -> int:
        """First row of this chunk whose logits are needed (prompt logprobs), or -1."""
        req = c.req
        if not req.wants_input_logprobs:
            return -1
        first = max(req.logprob_start_len - 1, 0)  # position predicting the first scored token
        if first >= c.start + c.n:
            return -1
        return max(first - c.start, 0)

    # -- after the forward ----------------------------------------------------------------

    def _process(
        self,
        batch: ForwardBatch,
        reqs: list[Req],
        decodes: list[Req],
        chunks: list[_Chunk],
        logits: torch.Tensor,
    ) -> list[ReqOut]:
        to_sample: list[tuple[Req, int]] = []  # (request, logits row)
        outs: list[ReqOut] = []
        ptr = batch.logits_indptr
        for i, req in enumerate(reqs):
            assert req.kv is not None
            self.kv.mark_computed(req.kv)
            if i >= len(decodes):
                chunk = chunks[i - len(decodes)]
                self._collect_input_logprobs(chunk, logits[ptr[i] : ptr[i + 1]])
                # Only the prompt is cached while running: output tokens may still be
                # retokenized by jump-forward; all of it is cached when the request ends.
                self.kv.commit_prefix(req.kv, req.input_ids)
                if req.pending:  # a chunk of a longer prefill: nothing to sample yet
                    continue
                if req.sampling.max_new_tokens == 0:
                    req.in_logprobs_done = True
                    outs.append(self._finish(req, {"type": "length", "length": 0}))
                    continue
            to_sample.append((req, ptr[i + 1] - 1))
        if to_sample:
            outs.extend(self._sample(to_sample, logits))
        return outs

    def _collect_input_logprobs(self, c: _Chunk, rows: torch.Tensor) -> None:
        req = c.req
        if not req.wants_input_logprobs:
            return
        first = max(req.logprob_start_len - 1, 0)
        if first >= c.start + c.n:
            return
        if req.logprob_start_len == 0 and c.start == 0:
            req.in_logprobs.append((None, req.input_ids[0]))
            req.in_top_logprobs.append(None)
        pos0 = max(first, c.start)
        n_prompt = len(req.input_ids)
        # row k holds the logits at position pos0 + k, which score prompt token pos0 + k + 1
        k_max = min(rows.shape[0], n_prompt - 1 - pos0)
        if k_max > 0:
            lp = torch.log_softmax(rows[:k_max].float(), dim=-1)
            targets = torch.tensor(req.input_ids[pos0 + 1 : pos0 + 1 + k_max])
            chosen = lp.gather(1, targets[:, None]).squeeze(1).tolist()
            req.in_logprobs.extend(zip(chosen, targets.tolist()))
            if req.top_logprobs_num:
                vals, ids = lp.topk(req.top_logprobs_num, dim=-1)
                req.in_top_logprobs.extend(
                    list(zip(v, t)) for v, t in zip(vals.tolist(), ids.tolist()))
            else:
                req.in_top_logprobs.extend([None] * k_max)
        if c.start + c.n >= len(req.input_ids):
            req.in_logprobs_done = True

    def _sample(self, items: list[tuple[Req, int]], logits: torch.Tensor) -> list[ReqOut]:
        reqs = [r for r, _ in items]
        rows = logits[torch.tensor([row for _, row in items])]
        self.grammar.apply_masks(reqs, rows)
        sample_rows = [
            SampleRow(params=r.sampling, output_ids=r.output_ids, prompt_ids=r.input_ids,
                      banned_ids=self._banned(r), step=len(r.output_ids))
            for r in reqs
        ]
        want_lp = any(r.return_logprob for r in reqs)
        top_n = max((r.top_logprobs_num for r in reqs if r.return_logprob), default=0)
        result = sample(rows, sample_rows, self.generator, want_lp, top_n)
        outs: list[ReqOut] = []
        for i, req in enumerate(reqs):
            if req.grammar_error is not None:  # no mask: its sampled token is not kept
                outs.append(self._finish(req, self.grammar.error_reason(req)))
                continue
            token = result.next_ids[i]
            if not req.output_ids:
                req.first_token_time = time.time()
            req.output_ids.append(token)
            self.counters["generated_tokens"] += 1
            if req.return_logprob and result.logprobs is not None:
                req.out_logprobs.append((result.logprobs[i], token))
                if req.top_logprobs_num and result.top_logprobs is not None:
                    req.out_top_logprobs.append(result.top_logprobs[i][: req.top_logprobs_num])
            reason = self._check_finish(req, token)
            if reason is None:
                reason = self.grammar.after_token(self, req, token)
            out = self._finish(req, reason) if reason is not None else self._maybe_output(req)
            if out is not None:
                outs.append(out)
        return outs

    def apply_jump(self, req: Req, rollback: int, tokens: list[int]) -> dict | None:
        """Replace the last ``rollback`` output tokens with ``tokens`` (jump-forward); their
        KV is computed by the next step's extend. Returns a finish reason if one applies."""
        assert req.kv is not None
        keep = len(req.output_ids) - rollback
        # The newest output token has no KV yet; tokens before it do, and those replaced go.
        valid = len(req.input_ids) + min(keep, len(req.output_ids) - 1)
        self.kv.truncate(req.kv, valid)
        req.output_ids[keep:] = tokens
        req.forced_tokens += max(len(tokens) - rollback, 0)
        self.counters["forced_tokens"] += max(len(tokens) - rollback, 0)
        if keep < req.sent_ids:
            req.pending_rollback += req.sent_ids - keep
            req.sent_ids = keep
        p = req.sampling
        if len(req.output_ids) >= p.max_new_tokens:
            del req.output_ids[p.max_new_tokens:]
            return {"type": "length", "length": p.max_new_tokens}
        if req.has_text_stops and len(req.output_ids) >= p.min_new_tokens:
            matched = self._match_stop_str(req, extra=len(tokens))
            if matched is not None:
                return {"type": "stop", "matched": matched}
        if len(req.fill_ids) >= self.max_context:
            return {"type": "length", "length": len(req.output_ids)}
        return None

    def _banned(self, req: Req) -> list[int]:
        """EOS and stop ids are not allowed before min_new_tokens."""
        p = req.sampling
        if len(req.output_ids) >= p.min_new_tokens:
            return []
        return sorted(self.eos_ids | set(p.stop_token_ids or ()))

    def _check_finish(self, req: Req, token: int) -> dict[str, Any] | None:
        p = req.sampling
        n_out = len(req.output_ids)
        if not p.ignore_eos and token in self.eos_ids and n_out > p.min_new_tokens - 1:
            return {"type": "stop", "matched": token}
        if p.stop_token_ids and token in p.stop_token_ids and n_out >= p.min_new_tokens:
            return {"type": "stop", "matched": token}
        if req.has_text_stops and n_out >= p.min_new_tokens:
            matched = self._match_stop_str(req)
            if matched is not None:
                return {"type": "stop", "matched": matched}
        if n_out >= p.max_new_tokens:
            return {"type": "length", "length": p.max_new_tokens}
        if len(req.fill_ids) >= self.max_context:
            return {"type": "length", "length": n_out}
        return None

    def _match_stop_str(self, req: Req, extra: int = 0) -> str | None:
        """The stop string or stop regex the output now contains, if any. Stop strings need
        only a short tail; a regex may span the whole output, so it is searched whole."""
        regexes = req.sampling.stop_regexes
        window = len(req.output_ids) if regexes else stop_str_window(req.stop_strs) + extra
        tail = self.tokenizer.decode(req.output_ids[-window:],
                                     skip_special_tokens=req.sampling.skip_special_tokens)
        found = find_stop(tail, req.stop_strs, regexes)
        return found.matched if found is not None else None

    # -- finishing and outputs ------------------------------------------------------------

    def _release(self, req: Req, cache: bool) -> None:
        if req.kv is not None:
            self.kv.release(req.kv, req.fill_ids, cache=cache)
            req.kv = None
        self.grammar.release(req)

    def _finish(self, req: Req, reason: dict[str, Any]) -> ReqOut:
        req.finish_reason = reason
        self._release(req, cache=True)
        if req in self.running:
            self.running.remove(req)
        self.reqs.pop(req.rid, None)
        self.counters["finished"] += 1
        return self._output(req)

    def _maybe_output(self, req: Req) -> ReqOut | None:
        if not req.stream:
            return None
        pending = len(req.output_ids) - req.sent_ids
        if req.sent_first and pending < self.args.stream_interval:
            return None
        return self._output(req)

    def _output(self, req: Req) -> ReqOut:
        send_input = (req.return_logprob and req.logprob_start_len >= 0
                      and req.in_logprobs_done and not req.in_logprobs_sent)
        out = ReqOut(
            rid=req.rid,
            new_ids=req.output_ids[req.sent_ids:],
            finish_reason=req.finish_reason,
            prompt_tokens=len(req.input_ids),
            cached_tokens=max(req.cached_tokens, 0),
            completion_tokens=len(req.output_ids),
            output_logprobs=req.out_logprobs,
            output_top_logprobs=req.out_top_logprobs,
            input_logprobs=req.in_logprobs if send_input else None,
            input_top_logprobs=req.in_top_logprobs if send_input else None,
            rollback=req.pending_rollback,
            detok=None if req.sent_first else req.detok_params(),
            forced_tokens=req.forced_tokens,
            first_token_time=req.first_token_time,
        )
        req.in_logprobs_sent = req.in_logprobs_sent or send_input
        req.sent_first = True
        req.sent_ids = len(req.output_ids)
        req.out_logprobs, req.out_top_logprobs = [], []
        req.pending_rollback = 0
        return out

    # -- control --------------------------------------------------------------------------

    def control(self, msg: ControlReq) -> ControlOut:
        if msg.kind == "flush_cache":
            if self.has_work():
                return ControlOut(msg.cid, False, error="requests are in flight; retry when idle")
            ok = self.kv.flush()
            self.grammar.flush()
            return ControlOut(msg.cid, ok, error="" if ok else "requests are running")
        if msg.kind == "server_info":
            return ControlOut(msg.cid, True, data=self.info())
        if msg.kind == "audit":
            problems = self.kv.audit(repair=bool(msg.args.get("repair", False)))
            return ControlOut(msg.cid, not problems, data={"problems": problems})
        return ControlOut(msg.cid, False, error=f"unknown control request {msg.kind!r}")

    def info(self) -> dict[str, Any]:
        c = self.counters
        return {
            **c,
            **self.kv.stats(),
            "waiting": len(self.waiting),
            "running": len(self.running),
            "cache_hit_rate": c["cached_tokens"] / c["prompt_tokens"] if c["prompt_tokens"]
            else 0.0,
            "max_context": self.max_context,
            "vocab_size": self.runner.vocab_size,
        }

    def idle_audit(self) -> None:
        """With nothing running, check (and repair) the KV ownership invariant."""
        if not self.running:
            self.kv.audit(repair=True)
