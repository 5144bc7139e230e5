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
from typing import Any

from ..memory.kv_manager import KVManager
from ..model.gemm_choice import measure_clock
from ..model.model_runner import ModelRunner
from ..server_args import ServerArgs
from ..wire.messages import (
    ControlOut,
    ControlReq,
    ErrorOut,
    FinishAbort,
    FinishLength,
    FinishReason,
    GenerateReq,
    ReqOut,
)
from .admission_check import check_admissible
from .finish_check import FinishCheck, eos_ids_of
from .grammar_manager import GrammarManager
from .mask_gate import StepMaskGate
from .output_processor import OutputProcessor
from .request import PrefillChunk, Req, RequestError
from .schedule_policy import order_waiting, uncached_shared_len, waits_for_cache
from .scheduler_info import server_info
from .speculative_drafts import Speculator
from .speculative_verify import DraftVerifier
from .step_batch import build_step_batch
from .step_grammar import GrammarStart, StepGrammar

logger = logging.getLogger(__name__)


class Scheduler:
    """Owns the KV manager and the queues: admission, batching, memory and retraction.

    What happens after each forward (sampling, finish checks, outputs) is the
    :class:`OutputProcessor`'s, the grammar side of a step's start (compiles, the mask gate,
    deferred advances) the :class:`StepGrammar`'s; the scheduler acts on what they report.
    """

    def __init__(self, args: ServerArgs, runner: ModelRunner, tokenizer: Any) -> None:
        self.args = args
        self.runner = runner
        self.tokenizer = tokenizer
        self.max_context = runner.max_context
        self.kv = KVManager(runner.allocator, args.resolved_max_running_requests, self.max_context,
                            enable_cache=not args.disable_radix_cache)
        eos_ids = eos_ids_of(runner.model_config.eos_token_ids, tokenizer)
        self.eos_ids = set(eos_ids)  # reported at start-up
        self.grammar = GrammarManager(args, tokenizer, runner.vocab_size, eos_ids, runner.ops)
        self.output = OutputProcessor(args, self.kv, self.grammar,
                                      FinishCheck(tokenizer, eos_ids, self.max_context))
        self.step_grammar = StepGrammar(self.grammar, self.output)
        self.speculator = _speculator(args, self.kv, tokenizer, self.max_context, self.output)
        self.errors: list[ErrorOut] = []  # request errors found while stepping (drained)
        self.pending_outs: list[ReqOut] = []  # outputs produced outside the output processor
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.reqs: dict[str, Req] = {}
        self.counters = {"requests": 0, "finished": 0, "prompt_tokens": 0, "cached_tokens": 0,
                         "steps": 0, "retracted": 0, "aborted": 0}
        self.last_step_time = time.monotonic()
        self.clock = measure_clock()  # the steps' timer (thread CPU time at one torch thread)

    # -- intake ---------------------------------------------------------------------------

    def add_request(self, msg: GenerateReq) -> None:
        """Validate and queue; raises :class:`RequestError` naming the problem."""
        if msg.rid in self.reqs:
            raise RequestError(f"request id {msg.rid!r} is already in use")
        check_admissible(msg, self.max_context, self.kv.allocator.num_pages * self.kv.page_size,
                         self.runner.vocab_size)
        req = Req.from_message(msg)
        if self.speculator is not None:
            self.speculator.admit(req)
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
        return self._finish(req, FinishAbort(message="aborted by the client"))

    def fail(self, rid: str) -> None:
        """Drop a request that errored (its error is reported separately); its KV is not
        cached, since an error may have left its tokens and KV out of step."""
        req = self.reqs.get(rid)
        if req is not None:
            if req in self.waiting:
                self.waiting.remove(req)
            if req in self.running:
                self.running.remove(req)
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
        # Constrained requests whose mask is not ready within the bound sit this step out.
        gate = self._start_grammar(self.step_grammar.start(self.running, self.waiting))
        decodes = self._reserve_decodes(gate)
        outs, self.pending_outs = self.pending_outs, []  # what was owed outside the forward
        chunks = self._schedule_prefills(decodes, gate)
        gate.leave()  # its last check is done: the compiler's worker may take the GIL again
        if not decodes and not chunks:
            self.grammar.end_step(ran=False)
            return outs
        # after the prefills are chosen: a request holding draft slots has no pending tokens
        drafts = self.speculator.draft(decodes, chunks) if self.speculator is not None else {}
        batch = build_step_batch(decodes, chunks, self.kv.table, self.runner, self.max_context,
                                 drafts)
        forward_started = self.clock()
        with self.grammar.forward_hold():
            logits = self.runner.forward(batch)
        forward_s = self.clock() - forward_started
        self.counters["steps"] += 1
        result = self.output.process(batch, decodes, chunks, logits, drafts)
        self.grammar.end_step(ran=True)
        for req in result.finished:
            self._retire(req)
        for req, message in result.faulted:  # this request alone; the batch went on
            self._fail_with(req, message, code="internal")
        outs.extend(result.outs)
        self.last_step_time = time.monotonic()
        if self.speculator is not None and not chunks:  # a draft row's price, measured
            self.speculator.observe(batch.num_tokens, forward_s)
        return outs

    def _start_grammar(self, start: GrammarStart) -> StepMaskGate:
        """Act on the grammar side's start of the step (fail, queue the outputs owed, retire,
        in that order, as :class:`GrammarStart` lists them); returns the step's mask gate."""
        for failure in start.failed:
            self._fail_with(failure.req, failure.message, failure.code)
        self.pending_outs.extend(start.outs)
        for req in start.finished:
            self._retire(req)
        return start.gate

    def _fail_with(self, req: Req, message: str, code: str) -> None:
        """Fail ``req`` and report ``message`` (``code`` as :class:`ErrorOut`'s)."""
        self.fail(req.rid)
        self.errors.append(ErrorOut(rid=req.rid, message=message, code=code))

    def _reserve_decodes(self, gate: StepMaskGate) -> list[Req]:
        """A KV slot for every decoding request the gate lets run (its mask is ready),
        retracting the newest when memory is short."""
        decodes = sorted((r for r in self.running if r.is_decoding and r.finish_reason is None),
                         key=lambda r: r.arrival)  # the oldest get the wait budget first
        ok: list[Req] = []
        for req in [r for r in decodes if gate.ready(r)]:
            while req.kv is not None and self.kv.reserve(req.kv, 1) is None:
                holders = [r for r in self.running if r.kv is not None]
                if holders == [req]:  # alone and still out of room: the pool is too small
                    self.pending_outs.append(self._finish(
                        req, FinishLength(length=req.num_output, message="KV pool exhausted")))
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
                    req.num_output)
        self._release_kv(req, cache=True)  # its grammar state stays: it matches the output
        self.running.remove(req)
        self.waiting.insert(0, req)
        self.counters["retracted"] += 1

    def _schedule_prefills(self, decodes: list[Req], gate: StepMaskGate) -> list[PrefillChunk]:
        budget = self.args.chunked_prefill_size
        chunks: list[PrefillChunk] = []
        # continue chunked prefills (down to a last single prompt token: not a decode), and
        # the forced tokens of a jump-forward
        for req in [r for r in self.running if r.pending and not r.is_decoding]:
            if _samples(req, budget) and not gate.ready(req):
                continue  # its last chunk waits for the mask of the token it samples
            chunk = self._take_chunk(req, budget)
            if chunk is None:
                break
            chunks.append(chunk)
            budget -= chunk.n
        ordered = order_waiting(self.waiting, self.kv, self.args)
        duplicated = 0  # shared prefix tokens this step computes more than once
        for req in ordered:
            if budget <= 0 or self.kv.free_rows == 0:
                break
            if req.grammar_future is not None:  # constraint still compiling
                continue
            shared = uncached_shared_len(req, [c.req for c in chunks], self.kv)
            if waits_for_cache(shared, duplicated):
                req.wait_steps += 1
                continue
            if not self._admit(req, decodes, budget, chunks, gate):
                break
            if chunks and chunks[-1].req is req:
                budget -= chunks[-1].n
                duplicated += shared
        for req in self.waiting:
            req.wait_steps += 1
        return chunks

    def _admit(self, req: Req, decodes: list[Req], budget: int, chunks: list[PrefillChunk],
               gate: StepMaskGate) -> bool:
        """Move ``req`` from waiting to running with its first chunk; False if no memory.
        A request whose prefill would end in this step sampling a token whose mask is not
        ready stays waiting (True: the caller goes on with the next)."""
        req.kv = self.kv.begin(req.token_ids, req.namespace, req.max_reuse)
        if _samples(req, budget) and not gate.ready(req):
            self._release_kv(req, cache=False)
            return True
        if req.cached_tokens < 0:
            req.cached_tokens = req.kv.kv_len
            self.counters["prompt_tokens"] += req.prompt_len
            self.counters["cached_tokens"] += req.kv.kv_len
        # Leave a page of headroom per decoding request unless nothing else is running.
        headroom = len(decodes) if self.running else 0
        need = self.kv.pages_needed(req.kv, min(req.pending, budget)) + headroom
        chunk = self._take_chunk(req, budget) if self.kv.ensure_free(need) else None
        if chunk is None:
            self._release_kv(req, cache=False)
            return False
        self.waiting.remove(req)
        self.running.append(req)
        chunks.append(chunk)
        return True

    def _take_chunk(self, req: Req, budget: int) -> PrefillChunk | None:
        assert req.kv is not None
        start = req.kv.kv_len
        n = min(req.pending, budget)
        if n <= 0 or self.kv.reserve(req.kv, n) is None:
            return None
        return PrefillChunk(req, start, n)

    # -- finishing and outputs ------------------------------------------------------------

    def _release(self, req: Req, cache: bool) -> None:
        """A request leaves: its KV and its grammar state."""
        self._release_kv(req, cache)
        self.grammar.release(req)

    def _release_kv(self, req: Req, cache: bool) -> None:
        """Give back ``req``'s KV rows; a request going back to the queue (retracted, or not
        admitted) keeps its grammar state, which matches its output."""
        if req.kv is not None:
            self.kv.release(req.kv, req.token_ids, cache=cache)
            req.kv = None

    def _finish(self, req: Req, reason: FinishReason) -> ReqOut:
        """End ``req`` outside a step's sampling (abort, KV exhausted): its last output."""
        out = self.output.finish_output(req, reason)
        self._retire(req)
        return out

    def _retire(self, req: Req) -> None:
        """A finished request leaves: its KV goes into the cache, it leaves the queues."""
        if self.speculator is not None:
            self.speculator.learn(req)
        self._release(req, cache=True)
        if req in self.running:
            self.running.remove(req)
        if req in self.waiting:  # retracted, then ended by its deferred grammar advance
            self.waiting.remove(req)
        self.reqs.pop(req.rid, None)
        self.counters["finished"] += 1

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
        """What ``/get_server_info`` reports of this scheduler (:mod:`.scheduler_info`)."""
        spec = self.speculator.stats.summary() if self.speculator is not None else {}
        return server_info(self.counters, [self.output.counters, self.kv.stats(),
                                           self.grammar.stats(), spec],
                           len(self.waiting), len(self.running), self.max_context,
                           self.runner.vocab_size)

    def idle_audit(self) -> None:
        """With nothing running, check (and repair) the KV ownership invariant."""
        if not self.running:
            self.kv.audit(repair=True)


def _speculator(args: ServerArgs, kv: KVManager, tokenizer: Any, max_context: int,
                output: OutputProcessor) -> Speculator | None:
    """The drafting side of speculative decoding, its verifier attached to ``output``; None
    when ``--speculative-algorithm`` is not set."""
    if args.speculative_algorithm is None:
        return None
    speculator = Speculator(args, kv, lambda text: tokenizer.encode(
        text, add_special_tokens=False), max_context, lambda: output.grammar.compiler.vocab,
        output.finish.is_stop_token)
    output.verifier = DraftVerifier(output, speculator.stats)
    return speculator


def _samples(req: Req, budget: int) -> bool:
    """Whether a chunk of ``req`` within ``budget`` tokens ends its pending tokens and so
    samples a token (whose mask must be ready)."""
    return req.pending <= budget and req.sampling.max_new_tokens > 0
