"""Where a row of ``benchmarks/speculative.py`` spends its steps, speculation off and on.

Runs a row's requests together (``rag8``: 8 questions on the ~1,500-token passage; ``rag``:
one question; ``chat``; ``streams32``) on two in-process :class:`Scheduler`\\ s over one
:class:`ModelRunner` (off then on, alternating ``--rounds`` times), every step timed in this
thread's CPU time (steadier than the wall clock on a shared core) and sorted by kind:
``prefill`` (chunks only), ``mixed`` (chunks and decodes), ``decode`` (decodes, no drafts),
``verify`` (decodes, some with drafts). Per kind: steps, forward rows, the forward's time
and the time outside it (scheduling, drafting, sampling, verification), tokens emitted.
The ``decode phase`` line is what ``speculative.py`` rates: the steps after every request
has its first token.

``--one-by-one`` runs each request alone, as ``speculative.py``'s batch-1 rows do (``--task
json --requests 3 --one-by-one``). On SmolLM2's GGUF blocks the forward is ~85% of a JSON
row's decode time on both sides: a verify of k drafts costs ~1 + 0.28 k plain forwards (the
block kernel's passes of up to 8 rows are compute-bound), so the rows, not the drafting
(~2%) or the verification's masks and sampling (~12%), bound the speed-up.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/speculative_step_profile.py --task rag8
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

from bench_common import add_common_args, resolve_model, setup_threads, write_results
from speculative import prepare, setup, task_requests
from speculative_rows import apply_outputs

from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.messages import GenerateReq
from radixlm.runtime.wire.sampling_params import SamplingParams

Tally = dict[str, list[float]]  # kind -> [steps, rows, forward s, outside s, tokens]


class StepTimer:
    """Times ``s.runner.forward`` within each ``s.step()`` (patched on the instance)."""

    def __init__(self, s: Scheduler) -> None:
        self.forward_s = 0.0
        self.rows = 0
        runner = s.runner
        real = runner.forward

        def forward(batch: Any) -> Any:
            start = time.thread_time()
            out = real(batch)
            self.forward_s += time.thread_time() - start
            self.rows += batch.num_tokens
            return out

        self.real, self.runner, self.patched = real, runner, forward


def step_kind(s: Scheduler) -> str:
    """The kind of the step ``s`` is about to run, from its queues."""
    decoding = [r for r in s.running if r.is_decoding and r.finish_reason is None]
    prefilling = bool(s.waiting) or any(r.pending and not r.is_decoding for r in s.running)
    if prefilling:
        return "mixed" if decoding else "prefill"
    return "decode"


def run(s: Scheduler, rid: str, prompts: list, new_tokens: int) -> dict[str, Any]:
    """All ``prompts`` at once on ``s``, every step timed and sorted (see module doc)."""
    for i, (ids, grammar) in enumerate(prompts):
        s.add_request(GenerateReq(rid=f"{rid}-{i}", input_ids=ids, grammar=grammar,
                                  stream=True, sampling=SamplingParams(
                                      temperature=0.0, max_new_tokens=new_tokens)))
    timer = StepTimer(s)
    tally: Tally = defaultdict(lambda: [0, 0, 0.0, 0.0, 0])
    phase: Tally = defaultdict(lambda: [0, 0, 0.0, 0.0, 0])
    outs: dict[str, list[int]] = {f"{rid}-{i}": [] for i in range(len(prompts))}
    verify_steps = s.speculator.stats.summary() if s.speculator else {}
    s.runner.forward = timer.patched  # type: ignore[method-assign]
    drafted = [0]
    if s.speculator is not None:
        real_draft = s.speculator.draft

        def draft(decodes: list, chunks: Any = ()) -> Any:
            chains = real_draft(decodes, chunks)
            drafted[0] = len(chains)
            return chains
        s.speculator.draft = draft  # type: ignore[method-assign]
    try:
        while s.has_work():
            for req in s.waiting:
                if req.grammar_future is not None:
                    req.grammar_future.result()
            kind = step_kind(s)
            drafted[0] = 0
            f0, r0, t0 = timer.forward_s, timer.rows, time.thread_time()
            decoding_phase = all(outs.values())
            emitted = apply_outputs(outs, s.step())
            took = time.thread_time() - t0
            fwd = timer.forward_s - f0
            if drafted[0]:
                kind = "verify" if kind == "decode" else "mixed+verify"
            for t in (tally[kind], phase[kind] if decoding_phase else None):
                if t is None:
                    continue
                t[0] += 1
                t[1] += timer.rows - r0
                t[2] += fwd
                t[3] += took - fwd
                t[4] += emitted
    finally:
        s.runner.forward = timer.real  # type: ignore[method-assign]
        if s.speculator is not None:
            del s.speculator.draft
    spec = s.speculator.stats.summary() if s.speculator else {}
    verify = {k: spec[k] - verify_steps.get(k, 0) for k in spec if isinstance(spec[k], int)}
    return {"ids": [outs[k] for k in sorted(outs)], "all": dict(tally), "decode_phase":
            dict(phase), "spec": verify}


def merge(into: dict[str, Tally], r: dict[str, Any]) -> None:
    for part in ("all", "decode_phase"):
        for kind, v in r[part].items():
            t = into[part].setdefault(kind, [0, 0, 0.0, 0.0, 0])
            for i, x in enumerate(v):
                t[i] += x


def show(side: str, part: str, t: Tally) -> None:
    steps = sum(v[0] for v in t.values())
    total = sum(v[2] + v[3] for v in t.values())
    tokens = sum(v[4] for v in t.values())
    print(f"  {side} {part}: {steps} steps, {total:.3f} s, {tokens} tokens,"
          f" {tokens / total if total else 0:.1f} tok/s (thread CPU)")
    for kind, (n, rows, fwd, out, tok) in sorted(t.items()):
        print(f"    {kind:8s} steps {n:4d}  rows/step {rows / n:6.1f}  forward {fwd:7.3f} s"
              f" ({1e3 * fwd / n:6.2f} ms/step)  outside {out:6.3f} s ({1e3 * out / n:5.2f}"
              f" ms/step)  tokens {tok:5d} ({tok / n:4.2f}/step)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, "speculative_step_profile")
    parser.add_argument("--task", default="rag8", help="rag8, rag, json, chat or streams32")
    parser.add_argument("--requests", type=int, default=8, help="the task's first N requests")
    parser.add_argument("--one-by-one", action="store_true",
                        help="each request alone (the batch-1 rows of speculative.py)")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--num-draft-tokens", type=int, default=8)
    parser.add_argument("--max-batch", type=int, default=None)
    parser.add_argument("--quantization", default=None, help="as speculative.py's")
    args = parser.parse_args()
    setup_threads(args.threads)
    tokenizer, runner, common, spec_args, _ = setup(args, resolve_model(args.model))
    sides = {"off": Scheduler(ServerArgs(**common), runner, tokenizer),
             "on": Scheduler(ServerArgs(**common, **spec_args), runner, tokenizer)}
    prepare(*sides.values())
    reqs = task_requests(tokenizer, args.requests)[args.task][: args.requests]
    totals = {side: {"all": {}, "decode_phase": {}} for side in sides}
    ids: dict[str, list] = {side: [] for side in sides}
    spec: dict[str, int] = defaultdict(int)
    groups = [[r] for r in reqs] if args.one_by_one else [reqs]
    for r in range(args.rounds):
        for g, group in enumerate(groups):
            for side, s in sides.items():
                out = run(s, f"{args.task}{r}-{g}-{side}", group, args.new_tokens)
                merge(totals[side], out)
                ids[side].append(out["ids"])
                for k, v in out["spec"].items():
                    spec[k] += v
    for side in sides:
        for part in ("all", "decode_phase"):
            show(side, part, totals[side][part])
    steps = spec.get("spec_verify_steps", 0)
    print(f"  tokens per verify {spec.get('spec_emitted_tokens', 0) / max(steps, 1):.2f}"
          f" over {steps} verifications; identical {ids['off'] == ids['on']}")
    write_results(args.out, {"args": vars(args), "totals": totals, "spec": dict(spec)})


if __name__ == "__main__":
    main()
