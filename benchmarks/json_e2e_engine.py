"""The scheduler's wait for token masks, end to end: corpus schemas through radixlm's Engine.

``python benchmarks/json_e2e.py --scheduler smollm2`` (this module's :func:`run`): one batch of
``--schemas`` constrained requests (the first corpus schemas of ``--subsets``, round robin,
that radixlm compiles on the model's vocabulary), greedy, decoded together by the real
scheduler process, once per ``--mask-wait-ms`` bound (a fresh engine each: the figures are the
server's own, since start). Reported from ``/get_server_info``: per step, the time the
scheduler spent on masks (the gate's sleeping plus its checks and copies; p50 / p99 / max), the same
less the time the OS kept the scheduler off the CPU ("own": a loaded host preempts a
CPU-bound process for milliseconds), fills that computed a mask in the step, and holds
(request-steps held out, holds, the longest), steps a garbage collection ran in ("gc st")
and the longest collection time inside one ("gc in", ms), with the outputs' validity and the
wall time; and per accepted token, the scheduler's time advancing the grammar (accepting it,
the end check, the jump-forward plan), which the gate does not cover; and the step's grammar
time as the scheduler thread's CPU time too (meaningful on a shared core, where the wall
time carries other processes' turns).
The masks are cold (no disk cache, fresh process): the worst case for the critical path.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import json_decoding as jd
from bench_common import machine, resolve_model, write_results

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarError, GrammarSpec, TokenVocabulary

WAIT_KEYS = ("mask_wait_steps", "mask_wait_cold_fills", "mask_wait_ms_p50", "mask_wait_ms_p99",
             "mask_wait_ms_max", "mask_wait_ms_p99_not_preempted",
             "mask_wait_ms_max_not_preempted", "mask_gate_ms_p99", "mask_gate_ms_max",
             "mask_fill_ms_p50", "mask_fill_ms_p99", "mask_wait_steps_with_gc",
             "mask_wait_gc_ms_max", "mask_held_steps", "mask_holds",
             "mask_max_hold_steps", "mask_idle_wait_ms", "steps")
# the gate's sleeps and GIL waits, and the compiler's worker parked for it (newer servers)
GATE_KEYS = ("mask_gate_sleeps", "mask_blocked_ms_p99", "mask_blocked_ms_max",
             "grammar_worker_pauses", "grammar_worker_paused_ms", "grammar_advances",
             "grammar_advance_ms_p50", "grammar_advance_ms_p99", "grammar_advance_ms_max",
             "grammar_advances_deferred", "grammar_steps", "grammar_step_ms_p50",
             "grammar_step_ms_p99", "grammar_step_ms_max", "grammar_step_ms_p50_not_preempted",
             "grammar_step_ms_p99_not_preempted", "grammar_step_ms_max_not_preempted",
             "grammar_step_ms_p50_thread_cpu", "grammar_step_ms_p99_thread_cpu",
             "grammar_step_ms_max_thread_cpu", "grammar_jumps_planned_ahead",
             "grammar_jumps_committed")
GC_KEYS = ("gc_pauses", "gc_full_pauses", "gc_pause_ms_p99", "gc_pause_ms_max",
           "gc_full_pause_ms_max", "gc_pause_ms_total", "gc_frozen_objects")


def pick(args: argparse.Namespace, tokenizer: Any) -> list[tuple[str, Any]]:
    """The first ``--schemas`` schemas (round robin over subsets) radixlm compiles (with the
    compile-time warm-up, as the engine compiles: a mask it computes can refuse a schema)."""
    vocab = TokenVocabulary.from_tokenizer(tokenizer, len(tokenizer), [tokenizer.eos_token_id])
    compiler = GrammarCompiler(vocab, CompileBudget(max_seconds=args.timeout,
                                                    background_warmup_states=0))
    queues = [sorted((args.corpus / s).glob("*.json")) for s in args.subsets]
    picked: list[tuple[str, Any]] = []
    while len(picked) < args.schemas and any(queues):
        for q in queues:
            if q and len(picked) < args.schemas:
                path = q.pop(0)
                schema = json.loads(path.read_text())["schema"]
                try:
                    compiler.compile(GrammarSpec.json_schema(json.dumps(schema)))
                except (GrammarError, RecursionError, ValueError, TypeError):
                    continue
                picked.append((f"{path.parent.name}/{path.name}", schema))
    compiler.shutdown()
    return picked


def one_run(model_path: str, bound_ms: float, gc_freeze: str, schemas: list[Any],
            args: argparse.Namespace) -> dict[str, Any]:
    from radixlm import Engine

    engine = Engine(model_path, grammar_mask_wait_ms=bound_ms, num_threads=args.threads,
                    grammar_compile_timeout=args.timeout,
                    disable_gc_freeze=gc_freeze == "off")
    try:
        prompts = [f"Answer with one JSON value for this schema: {json.dumps(s)[:300]}\n"
                   for s in schemas]
        params = [{"temperature": 0.0, "max_new_tokens": args.max_new_tokens,
                   "json_schema": json.dumps(s)} for s in schemas]
        start = time.perf_counter()
        with ThreadPoolExecutor(len(prompts)) as pool:  # batched by the scheduler; one
            outs = list(pool.map(lambda a: _generate(engine, *a), zip(prompts, params)))
        wall = time.perf_counter() - start
        info = engine.get_server_info()
    finally:
        engine.shutdown()
    valid = 0
    for out, schema in zip(outs, schemas, strict=True):
        try:
            jd.judge(schema).validate(json.loads(out["text"]))
            valid += 1
        except Exception:  # noqa: BLE001 (unfinished, failed or invalid: not valid)
            pass
    errors = [f"request {i}: {o['error']}" for i, o in enumerate(outs) if "error" in o]
    return {"mask_wait_ms_bound": bound_ms, "gc_freeze": gc_freeze, "wall_s": wall, "valid": valid,
            "requests": len(schemas), "errors": errors,
            "output_tokens": sum(len(o.get("output_ids", ())) for o in outs),
            **{k: info[k] for k in WAIT_KEYS + GC_KEYS},
            **{k: info.get(k, -1) for k in GATE_KEYS}}


def _generate(engine: Any, prompt: str, params: dict) -> dict:
    """One request's output, or ``{"error": ...}`` (one request's failure ends no other)."""
    from radixlm.runtime.api.tokenizer_manager import GenerateError

    try:
        return engine.generate(prompt, params)
    except GenerateError as exc:
        return {"error": str(exc), "text": ""}


def run(args: argparse.Namespace) -> None:
    """Measure and print one row per bound; write them to ``--out``."""
    model = resolve_model(args.scheduler)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model.hf_path)
    picked = pick(args, tokenizer)
    print(f"{len(picked)} schemas on {model.describe()}: {[n for n, _ in picked]}", flush=True)
    rows = [one_run(str(model.path), b, f, [s for _, s in picked], args)
            for f in args.gc_freeze for b in args.mask_wait_ms]
    print(f"\n{'gc':>3} {'bound ms':>8} {'steps':>6} {'wait p50':>9} {'p99':>7} {'max':>7} "
          f"{'p99 own':>8} {'max own':>8} {'gate p99':>8} {'gate max':>8} {'fill p50':>8} "
          f"{'fill p99':>8} {'gc st':>5} {'gc in':>6} {'cold':>5} "
          f"{'held':>5} {'holds':>6} {'longest':>7} {'idle ms':>8} {'valid':>6} {'wall s':>7} "
          f"{'gcs':>5} {'full':>4} {'gc p99':>7} {'gc max':>7} {'gc tot':>7} {'frozen':>8}")
    for r in rows:
        print(f"{r['gc_freeze']:>3} {r['mask_wait_ms_bound']:8.2f} {r['mask_wait_steps']:6d} "
              f"{r['mask_wait_ms_p50']:9.3f} {r['mask_wait_ms_p99']:7.3f} "
              f"{r['mask_wait_ms_max']:7.3f} {r['mask_wait_ms_p99_not_preempted']:8.3f} "
              f"{r['mask_wait_ms_max_not_preempted']:8.3f} {r['mask_gate_ms_p99']:8.3f} "
              f"{r['mask_gate_ms_max']:8.3f} {r['mask_fill_ms_p50']:8.3f} "
              f"{r['mask_fill_ms_p99']:8.3f} {r['mask_wait_steps_with_gc']:5d} "
              f"{r['mask_wait_gc_ms_max']:6.1f} {r['mask_wait_cold_fills']:5d} "
              f"{r['mask_held_steps']:5d} {r['mask_holds']:6d} {r['mask_max_hold_steps']:7d} "
              f"{r['mask_idle_wait_ms']:8.1f} {r['valid']:>3}/{r['requests']:<2} "
              f"{r['wall_s']:7.2f} {r['gc_pauses']:5d} {r['gc_full_pauses']:4d} "
              f"{r['gc_pause_ms_p99']:7.1f} {r['gc_pause_ms_max']:7.1f} "
              f"{r['gc_pause_ms_total']:7.0f} {r['gc_frozen_objects']:8d}")
        print(f"    gate sleeps {r['mask_gate_sleeps']}, GIL waits in the gate p99 "
              f"{r['mask_blocked_ms_p99']:.3f} / max {r['mask_blocked_ms_max']:.3f} ms, worker "
              f"parked {r['grammar_worker_pauses']} times, {r['grammar_worker_paused_ms']:.1f} ms")
        print(f"    grammar advances (accept, end check, jump plan; outside the gate) "
              f"{r['grammar_advances']}: p50 {r['grammar_advance_ms_p50']:.3f} / p99 "
              f"{r['grammar_advance_ms_p99']:.3f} / max {r['grammar_advance_ms_max']:.3f} ms, "
              f"{r['grammar_advances_deferred']} deferred to the worker (their jump-forwards "
              f"planned there: {r['grammar_jumps_planned_ahead']}, committed "
              f"{r['grammar_jumps_committed']})")
        print(f"    the scheduler's grammar time per step (masks + advances), "
              f"{r['grammar_steps']} steps: p50 {r['grammar_step_ms_p50']:.3f} / p99 "
              f"{r['grammar_step_ms_p99']:.3f} / max {r['grammar_step_ms_max']:.3f} ms; less the "
              f"OS's preemption p50 {r['grammar_step_ms_p50_not_preempted']:.3f} / p99 "
              f"{r['grammar_step_ms_p99_not_preempted']:.3f} / max "
              f"{r['grammar_step_ms_max_not_preempted']:.3f} ms; the scheduler thread's CPU "
              f"time p50 {r['grammar_step_ms_p50_thread_cpu']:.3f} / p99 "
              f"{r['grammar_step_ms_p99_thread_cpu']:.3f} / max "
              f"{r['grammar_step_ms_max_thread_cpu']:.3f} ms")
        for e in r["errors"]:
            print(f"  error: {e}")
    write_results(args.out, {"machine": machine(), "model": model.describe(),
                             "schemas": [n for n, _ in picked], "rows": rows})


def add_args(p: argparse.ArgumentParser) -> None:
    """The flags of this mode (json_e2e.py's ``--scheduler``)."""
    p.add_argument("--scheduler", default=None, metavar="MODEL",
                   help="measure the scheduler's mask waits through the Engine on MODEL "
                        "(smollm2, tiny, small or a path) instead of the tiny-model table")
    p.add_argument("--mask-wait-ms", type=float, nargs="+", default=[1.0, 0.0],
                   help="with --scheduler: the --grammar-mask-wait-ms bounds to run")
    p.add_argument("--gc-freeze", nargs="+", choices=["on", "off"], default=["on"],
                   help="with --scheduler: run with the start-up heap frozen (the default), "
                        "not (--disable-gc-freeze), or both")
    p.add_argument("--threads", type=int, default=1, help="with --scheduler: torch threads")


DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "json_e2e_scheduler.json"
