"""JSON-schema constrained decoding, side by side: radixlm.fsm, xgrammar and outlines-core.

Per JSONSchemaBench subset and engine, on one vocabulary (``--tokenizer``: SmolLM2's 49k
byte-level BPE, Mistral's 131k tekken, Mistral's 32k SentencePiece with byte fallback, Gemma
3's 262k SentencePiece with byte fallback (``gemma3``) or the tiny model's 8k; see
:mod:`radixlm.testing.real_vocabularies`):
declared coverage (compiles within the time budget), correctness on the test instances (judged
by ``jsonschema`` with a format checker, not by the labels), compile time p50/p90/p99, mask
time per token p50/p99/max (random-logit walks), walks that finish / parse / validate, and for
radixlm the share of output tokens produced by jump-forward. Prints a table, writes JSON.

radixlm's mask time has two modes. By default a mask not computed yet is computed on the spot
(the cost of a cold mask, "cold" in the table). With ``--forward-ms F --mask-bound-ms B`` it
runs as in the engine: after each token the state is prefetched for the compiler's worker, a
forward of F ms passes (sleeping: the GIL is free, as in a model forward), then the scheduler's
mask gate waits at most B for the mask; a step whose mask is still not ready is held (the wait
is that step's mask time, "held" in the table) and tried again after another forward; xgrammar
then sleeps the same forward before each of its masks, so both are timed from the same step
(caches and clocks as a forward leaves them). Python's
garbage-collector pauses (any thread: they hold the GIL) are timed and printed at the end; by
default the collector runs as in the scheduler process (``--gc scheduler``: the start-up heap
frozen once the vocabulary and engines are built, the young threshold raised), for every
engine alike, since they share this process.

An instance counts as accepted when some spelling of it is: its own serialisation (compact or
with spaces) or, for radixlm, a key order found by :mod:`radixlm.fsm.grammars.json.witness`;
competitors also get that schema-ordered spelling. xgrammar gets a ``TokenizerInfo`` built from
the same bytes (specials other than EOS empty, so masked); outlines-core a byte-keyed vocabulary.

    python benchmarks/json_decoding.py --tokenizer smollm2 --per-subset 20 --out results.json

``--chart PATH`` draws every engine's mask p50/p99 side by side (``charts.py``; matplotlib, the
``bench`` extra) and compile p50 beside it (PATH's stem + _2).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import charts  # this folder (run as a script)
import jsonschema
import numpy as np
import torch
from json_decoding_support import OutlinesEngine, sample  # this folder (run as a script)

from radixlm.fsm import (
    CompileBudget,
    GrammarCompiler,
    GrammarError,
    GrammarSpec,
    JsonLimits,
    TokenVocabulary,
    jump_forward,
)
from radixlm.fsm.grammars.json.witness import find_accepted_text
from radixlm.runtime.gc_policy import freeze_startup_heap
from radixlm.runtime.scheduling.gate_reserve import wake_reserve
from radixlm.runtime.scheduling.grammar_manager import GIL_SWITCH_SECONDS
from radixlm.testing.real_vocabularies import NAMES, RealVocabulary, load_vocabulary

DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "jsonschemabench"
MASK_CLOCK = [time.perf_counter]  # what times a mask (--clock: time.thread_time for "cpu")
DEFAULT_SUBSETS = ("Glaiveai2K", "Github_easy", "Github_medium", "Github_hard",
                   "JsonSchemaStore", "Github_trivial", "JME", "MCPspec", "BFCL_multiple",
                   "Synthesized", "Handwritten")

# -- shared pieces ----------------------------------------------------------------------------


def judge(schema: Any) -> jsonschema.protocols.Validator:
    """``jsonschema`` validator of the schema's draft, format checker on."""
    cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {},
                                              default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def percentile(values: list[float], q: float) -> float | None:
    """q-th percentile (None when empty)."""
    return float(np.percentile(values, q)) if values else None


def spellings(value: Any) -> list[str]:
    """The instance's own serialisations (compact, and with the usual spaces)."""
    return [json.dumps(value, ensure_ascii=False, separators=(",", ":")),
            json.dumps(value, ensure_ascii=False)]


# -- engines ----------------------------------------------------------------------------------


class RadixEngine:
    """radixlm.fsm: our JSON Schema compiler and lazy automaton."""

    name = "radixlm"

    def __init__(self, tokenizer: RealVocabulary, timeout: float, limits: JsonLimits,
                 forward_ms: float, mask_bound_ms: float | None) -> None:
        self.forward_ms, self.mask_bound_ms = forward_ms, mask_bound_ms  # see --help
        self.held_steps = 0  # steps the mask gate left this walk out of (its mask not ready)
        self.vocab = tokenizer.vocab
        self.tokenizer = tokenizer
        self.compiler = GrammarCompiler(self.vocab, CompileBudget(max_seconds=timeout))
        self.compiler.wait_started()  # numba's loop loaded, as at a server's start
        if mask_bound_ms is not None:  # the scheduler process's GIL switch interval too
            sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_SECONDS))
        self.limits = limits
        self.cold_steps = 0  # steps whose mask was computed on the spot

    def compile(self, schema: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.compiler.compile(GrammarSpec.json_schema(schema))

    def walk_grammar(self, schema: Any) -> Any:
        """The same schema with bounded lengths, for random walks that must end."""
        return self.compiler.compile(GrammarSpec.json_schema(schema, limits=self.limits))

    def jump(self, matcher: Any, out: list[int]) -> Any:
        """Jump-forward from the matcher's position (the plan, or None)."""
        return jump_forward(matcher, out, self.encode, self.tokenizer.decode,
                            extendable=lambda t: bool(self.vocab.extendable[t]))

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def witness(self, grammar: Any, value: Any) -> str | None:
        found = find_accepted_text(grammar.dfa, value)
        return found.text

    def accepts(self, grammar: Any, texts: list[str]) -> bool:
        return any(grammar.dfa.matches(t.encode()) for t in texts)

    def model_steps(self, grammar: Any, text: str, jump: bool) -> int | None:
        """Sampling steps a model needs to write ``text`` (its tokenizer's own split of
        what is left at each step), with or without jump-forward."""
        matcher, out, steps = grammar.new_matcher(), [], 0
        goal = text.encode()
        while self.tokenizer.decode(out).encode() != goal:
            plan = self.jump(matcher, out) if jump else None
            if plan is not None:
                out = out[: len(out) - plan.rollback] + list(plan.tokens)
                continue
            rest = goal[len(self.tokenizer.decode(out).encode()):]
            token = self.encode(rest.decode("utf-8", "ignore"))[:1]
            if not token or not matcher.accept_token(token[0]):
                return None
            out.append(token[0])
            steps += 1
            if steps > 4 * len(goal) + 16:
                return None
        return steps + 1  # EOS

    def gate(self, matcher: Any, times: list[float], start: float) -> float:
        """As the scheduler's StepMaskGate: wait (sleeping, computing nothing on this thread)
        up to the bound for the worker to have the mask; not ready, the request is held for
        the step (the wait is that step's mask time), asked for again, and the step the
        others run (a forward) passes before the next try. Once it is ready, returns when the
        step that takes the mask started (its wait and fill are its mask time). As the gate,
        the sleeping ends :func:`wake_reserve` before the bound (the wake-up fits in it)."""
        bound = self.mask_bound_ms / 1e3
        while not matcher.wait_mask_ready(bound - wake_reserve(bound)):
            times.append(time.perf_counter() - start)
            self.held_steps += 1
            self.compiler.prefetch(matcher)  # the gate asks again, at the front
            time.sleep(self.forward_ms / 1e3)
            start = time.perf_counter()
        return start

    def walk(self, grammar: Any, gen: torch.Generator, max_steps: int,
             jump: bool) -> tuple[list[int], int, list[float], bool]:
        matcher, out, forced, times = grammar.new_matcher(), [], 0, []
        masks = torch.zeros(4, self.vocab.num_words, dtype=torch.int32)  # a batch's rows
        row = masks.numpy()[1]  # the runtime fills numpy views of its batch bitmask
        for _ in range(max_steps):
            plan = self.jump(matcher, out) if jump else None
            if plan is not None:
                out = out[: len(out) - plan.rollback] + list(plan.tokens)
                forced += len(plan.tokens)
                continue
            if self.forward_ms:  # as the scheduler: prefetch, then the forward runs
                self.compiler.prefetch(matcher)
                time.sleep(self.forward_ms / 1e3)  # the GIL is free, as in a model forward
            cold = not matcher.mask_ready()
            start = MASK_CLOCK[0]()
            if self.mask_bound_ms is not None:
                start = self.gate(matcher, times, start)
            matcher.fill_bitmask(row)  # behind the gate: a copy (or the worker's error)
            times.append(MASK_CLOCK[0]() - start)
            self.cold_steps += cold
            token = sample(masks[1], self.vocab.vocab_size, gen)
            if not matcher.accept_token(token):
                raise AssertionError("sampled token refused")
            if matcher.is_finished():
                return out, forced, times, True
            out.append(token)
        return out, forced, times, False


class XGrammarEngine:
    """xgrammar 0.2.9 with default JSON settings (any_whitespace, strict_mode)."""

    name = "xgrammar"

    def __init__(self, vocab: TokenVocabulary, forward_ms: float = 0.0) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.forward_ms = forward_ms  # a forward's sleep before each mask, as radixlm's
        encoded = [b or b"" for b in vocab.token_bytes]  # specials/EOS empty: masked
        info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=vocab.vocab_size,
                                 stop_token_ids=list(vocab.eos_token_ids))
        self.compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.vocab = vocab

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema))

    def accepts(self, grammar: Any, texts: list[str]) -> bool:
        for text in texts:
            matcher = self.xgr.GrammarMatcher(grammar)
            eos = self.vocab.eos_token_ids[0]
            if matcher.accept_string(text) and matcher.accept_token(eos) \
                    and matcher.is_terminated():
                return True
        return False

    def walk(self, grammar: Any, gen: torch.Generator, max_steps: int,
             jump: bool) -> tuple[list[int], int, list[float], bool]:
        matcher = self.xgr.GrammarMatcher(grammar)
        bitmask = self.xgr.allocate_token_bitmask(1, self.vocab.vocab_size)
        out, times = [], []
        for _ in range(max_steps):
            if self.forward_ms:  # the same step as radixlm's: a forward, then the mask
                time.sleep(self.forward_ms / 1e3)
            start = MASK_CLOCK[0]()
            matcher.fill_next_token_bitmask(bitmask)
            times.append(MASK_CLOCK[0]() - start)
            token = sample(bitmask[0], self.vocab.vocab_size, gen)
            if not matcher.accept_token(token):
                raise AssertionError("sampled token refused")
            if matcher.is_terminated():
                return out, 0, times, True
            out.append(token)
        return out, 0, times, False


# -- measuring --------------------------------------------------------------------------------


def measure_schema(engines: list[Any], schema: Any, tests: list[dict], args: argparse.Namespace,
                   tokenizer: RealVocabulary, seed: int, results: dict) -> None:
    """Compile with every engine, check instances, run walks; append to ``results``."""
    validator = judge(schema)
    truths = []
    for test in tests:
        try:
            truths.append(validator.is_valid(test["data"]))
        except Exception:  # unjudgeable instance
            truths.append(None)
    witness_texts: list[str | None] = [None] * len(tests)
    for engine in engines:
        rec = results[engine.name]
        rec["schemas"] += 1
        start = time.perf_counter()
        try:
            grammar = engine.compile(schema)
        except (GrammarError, TimeoutError, RuntimeError, ValueError, TypeError) as exc:
            rec["errors"][type(exc).__name__] += 1
            continue
        seconds = grammar[2] if engine.name == "outlines-core" else time.perf_counter() - start
        rec["compiled"] += 1
        rec["compile_s"].append(seconds)
        for i, (test, truth) in enumerate(zip(tests, truths, strict=True)):
            if truth is None:
                continue
            texts = spellings(test["data"])
            if engine.name == "radixlm":
                witness_texts[i] = engine.witness(grammar, test["data"])
                accepted = witness_texts[i] is not None
                if accepted and truth:
                    plain = engine.model_steps(grammar, witness_texts[i], jump=False)
                    jumped = engine.model_steps(grammar, witness_texts[i], jump=True)
                    if plain and jumped:
                        rec["steps_plain"] += plain
                        rec["steps_jump"] += jumped
            else:
                accepted = engine.accepts(grammar, texts + [t for t in [witness_texts[i]]
                                                            if t is not None])
            key = ("valid" if truth else "invalid") + ("_accepted" if accepted else "_rejected")
            rec[key] += 1
        before = {k: getattr(engine, k, 0) for k in ("cold_steps", "held_steps")}
        walk_engine(engine, grammar, schema, validator, args, tokenizer, seed, rec)
        for k, v in before.items():
            rec[k] += getattr(engine, k, 0) - v


def walk_engine(engine: Any, grammar: Any, schema: Any, validator: Any,
                args: argparse.Namespace, tokenizer: RealVocabulary, seed: int,
                rec: dict) -> None:
    """Random-logit walks: mask times, finished/parsed/valid outputs, forced share."""
    if engine.name == "radixlm" and args.walk_limits:
        try:
            grammar = engine.walk_grammar(schema)
        except GrammarError:
            return
    gen = torch.Generator().manual_seed(seed)
    for _ in range(args.walks):
        try:
            out, forced, times, finished = engine.walk(grammar, gen, args.max_steps,
                                                       jump=args.jump_forward)
        except GrammarError:  # a budget hit while decoding: the runtime fails the request
            rec["walk_errors"] += 1
            continue
        rec["mask_s"].extend(times)
        rec["walks"] += 1
        rec["tokens"] += len(out)
        rec["forced"] += forced
        if not finished:
            continue
        rec["finished"] += 1
        try:
            value = json.loads(tokenizer.decode(out))
        except json.JSONDecodeError:
            continue
        rec["parsed"] += 1
        rec["valid_out"] += bool(validator.is_valid(value))


def new_record() -> dict:
    rec: dict = defaultdict(int)
    rec["errors"] = defaultdict(int)
    rec["compile_s"], rec["mask_s"] = [], []
    return rec


def summarize(rec: dict) -> dict:
    """Aggregate figures of one (subset, engine)."""
    n = rec["schemas"]
    valid = rec["valid_accepted"] + rec["valid_rejected"]
    invalid = rec["invalid_accepted"] + rec["invalid_rejected"]
    ms = [s * 1e3 for s in rec["compile_s"]]
    us = [s * 1e6 for s in rec["mask_s"]]
    return {
        "schemas": n, "compiled": rec["compiled"],
        "coverage": rec["compiled"] / n if n else None,
        "errors": dict(rec["errors"]),
        "valid_instances": valid, "valid_rejected": rec["valid_rejected"],
        "invalid_instances": invalid, "invalid_accepted": rec["invalid_accepted"],
        "compile_ms_p50": percentile(ms, 50), "compile_ms_p90": percentile(ms, 90),
        "compile_ms_p99": percentile(ms, 99),
        "mask_us_p50": percentile(us, 50), "mask_us_p99": percentile(us, 99),
        "mask_us_max": max(us) if us else None,
        "mask_steps": len(us), "cold_mask_steps": rec["cold_steps"],
        "held_steps": rec["held_steps"],
        "walks": rec["walks"], "walk_errors": rec["walk_errors"],
        "finished": rec["finished"], "parsed": rec["parsed"],
        "valid_outputs": rec["valid_out"],
        "forced_share": rec["forced"] / rec["tokens"] if rec["tokens"] else None,
        "jf_steps_saved": 1 - rec["steps_jump"] / rec["steps_plain"] if rec["steps_plain"]
        else None,
    }


def print_table(summary: dict) -> None:
    cols = ("subset", "engine", "cov", "rej-valid", "acc-invalid", "comp p50/p90/p99 ms",
            "mask p50/p99/max us (cold)", "walks fin/parse/valid", "forced", "JF saves")
    print(" | ".join(cols))
    for subset, engines in summary.items():
        for name, s in engines.items():
            f = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
            print(" | ".join([
                subset, name, f"{s['compiled']}/{s['schemas']}",
                f"{s['valid_rejected']}/{s['valid_instances']}",
                f"{s['invalid_accepted']}/{s['invalid_instances']}",
                f"{f(s['compile_ms_p50'])}/{f(s['compile_ms_p90'])}/{f(s['compile_ms_p99'])}",
                f"{f(s['mask_us_p50'])}/{f(s['mask_us_p99'])}/{f(s['mask_us_max'], 0)} "
                f"({s['cold_mask_steps']}/{s['mask_steps']}"
                + (f", {s['held_steps']} held)" if s["held_steps"] else ")"),
                f"{s['finished']}/{s['parsed']}/{s['valid_outputs']} of {s['walks']}"
                + (f" ({s['walk_errors']} budget errors)" if s["walk_errors"] else ""),
                f(s["forced_share"], 3), f(s["jf_steps_saved"], 3)]))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONSchemaBench folder")
    p.add_argument("--tokenizer", choices=NAMES, default="smollm2", help="vocabulary")
    p.add_argument("--subsets", nargs="*", default=list(DEFAULT_SUBSETS))
    p.add_argument("--per-subset", type=int, default=20, help="schemas per subset (sorted)")
    p.add_argument("--engines", default="radixlm,xgrammar,outlines-core")
    p.add_argument("--timeout", type=float, default=20.0, help="compile budget per schema (s)")
    p.add_argument("--walks", type=int, default=2, help="random-logit walks per schema")
    p.add_argument("--max-steps", type=int, default=400, help="tokens per walk at most")
    p.add_argument("--no-jump-forward", dest="jump_forward", action="store_false",
                   help="radixlm walks without jump-forward")
    p.add_argument("--forward-ms", type=float, default=0.0, help="radixlm as the scheduler: "
                   "prefetch after each token, then a simulated forward this long (xgrammar "
                   "sleeps it before each mask too)")
    p.add_argument("--mask-bound-ms", type=float, default=None, help="with --forward-ms: "
                   "radixlm behind the scheduler's mask gate (--grammar-mask-wait-ms): wait at "
                   "most this long for the worker's mask, else the step is held (its wait "
                   "counted as that step's mask time) and retried after another forward")
    p.add_argument("--walk-limits", action="store_true",
                   help="radixlm walks on the schema with bounded lengths (JsonLimits), so "
                        "every walk ends; by default all engines walk the same grammar")
    p.add_argument("--gc", choices=("scheduler", "python"), default="scheduler",
                   help="the collector as the scheduler process runs it (start-up heap frozen, "
                        "young threshold raised: runtime/gc_policy.py), or Python's defaults "
                        "(rounds before 2026-12-02: their maxima were mostly full collections)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time masks on the wall clock, or on the calling thread's CPU clock "
                        "(both engines alike; on a loaded host the wall clock's tail is the "
                        "scheduler's preemptions; radixlm's cold masks are computed on the "
                        "calling thread, xgrammar's masks too)")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "radixlm-bench")
    p.add_argument("--out", type=Path,
                   default=Path(__file__).resolve().parent / "results" / "json_decoding.json")
    p.add_argument("--chart", type=Path, default=None,
                   help="PNG path: mask p50/p99 of every engine side by side (charts.py), and "
                        "compile p50 beside it (PATH's stem + _2)")
    args = p.parse_args()
    if args.mask_bound_ms is not None and not args.forward_ms > 0:
        p.error("--mask-bound-ms models the scheduler's gate, which waits while a forward runs: "
                "give --forward-ms > 0 too")
    if args.clock == "cpu" and args.forward_ms:
        p.error("--clock cpu times masks computed on the calling thread: not with --forward-ms "
                "(the gate waits for the compiler's worker)")
    return args


def time_gc() -> list[tuple[int, float]]:
    """(generation, seconds) of every garbage collection from now on, filled in place."""
    pauses: list[tuple[int, float]] = []
    began = [0.0]

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            pauses.append((info["generation"], time.perf_counter() - began[0]))

    gc.callbacks.append(callback)
    return pauses


def main() -> None:
    args = parse_args()
    if args.clock == "cpu":
        MASK_CLOCK[0] = time.thread_time
    gc_pauses = time_gc()
    torch.set_num_threads(1)
    tokenizer = load_vocabulary(args.tokenizer, args.cache)
    vocab = tokenizer.vocab
    print(f"{args.tokenizer}: {vocab.vocab_size} ids, EOS {vocab.eos_token_ids}", flush=True)
    limits = JsonLimits(max_string_length=16, max_array_items=4, max_object_properties=3,
                        max_number_digits=6, any_value_depth=3, max_recursion_depth=2)
    makers = {"radixlm": lambda: RadixEngine(tokenizer, args.timeout, limits,
                                             args.forward_ms, args.mask_bound_ms),
              "xgrammar": lambda: XGrammarEngine(vocab, args.forward_ms),
              "outlines-core": lambda: OutlinesEngine(vocab, args.timeout)}
    engines = [makers[n]() for n in args.engines.split(",")]
    if args.gc == "scheduler":  # after the vocabularies and engines are built, as it does
        frozen = freeze_startup_heap()  # its own full collection included in what is dropped
        print(f"gc: {frozen} start-up objects frozen ({len(gc_pauses)} collections while "
              "loading, not counted below)", flush=True)
        del gc_pauses[:]
    summary: dict = {}
    for subset in args.subsets:
        files = sorted((args.corpus / subset).glob("*.json"))[: args.per_subset]
        if not files:
            continue
        results = {e.name: new_record() for e in engines}
        for seed, path in enumerate(files):
            doc = json.loads(path.read_text())
            measure_schema(engines, doc["schema"], doc["tests"], args, tokenizer, seed, results)
        summary[subset] = {name: summarize(rec) for name, rec in results.items()}
        print(f"done {subset}", flush=True)
    print_table(summary)
    full = [t * 1e3 for g, t in gc_pauses if g == 2]
    print(f"gc: {len(gc_pauses)} collections, {sum(t for _, t in gc_pauses):.2f} s in all; "
          f"{len(full)} full, longest {max(full, default=0):.0f} ms")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                    "summary": summary}, indent=1))
    print(f"wrote {args.out}")
    if args.chart:
        charts.write_charts(charts.json_decoding_charts(
            summary, args.tokenizer, charts.processor_name(), charts.utc_now(),
            "benchmarks/json_decoding.py " + " ".join(sys.argv[1:])), args.chart)


if __name__ == "__main__":
    main()
