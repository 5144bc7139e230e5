"""End-to-end constrained decoding on the built-in tiny model: unconstrained vs radixlm.fsm
(with and without jump-forward) vs xgrammar vs outlines-core, side by side in one run.

One batch of requests, one JSON schema each (the first ``--schemas`` of the chosen corpus
subsets that every engine compiles), is decoded together on radixlm's model runner (paged KV,
one forward per step for every live request). Each step every live request's mask is filled
into one ``[batch, ceil(V/32)]`` int32 bitmask (the batch path), applied to the logits, and a
token is sampled (temperature ``--temperature``, seeded). Jump-forward appends the forced
tokens and feeds them in the next forward as an extend. Reported per engine (median wall time
of ``--repeats`` runs, 1 torch thread): wall time, model forwards, output tokens, mask time per
request-step, the share of wall time spent outside the model (masks, sampling, jump-forward,
bookkeeping), and how many outputs finished, parse and validate. The unconstrained baseline
stops wherever the model samples EOS; "none, no EOS" runs every request to the token limit
(the occupancy of constrained runs whose outputs do not finish), so compare per-token time and
the non-model share rather than wall time alone. Last, 16 requests on one schema with long
keys, with and without jump-forward: model steps (sampled tokens) saved.

    python benchmarks/json_e2e.py --schemas 16 --max-new-tokens 160
    python benchmarks/json_e2e.py --scheduler smollm2 --schemas 8   # the scheduler's waits
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import json_decoding as jd  # the engines and the corpus reader are shared
import json_e2e_engine
import torch
from bench_common import RESULTS_DIR

from radixlm import env
from radixlm.fsm import (
    CompileBudget,
    GrammarCompiler,
    GrammarError,
    TokenVocabulary,
)
from radixlm.kernels.reference.token_bitmask import apply_token_bitmask_ref
from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.forward_batch import ForwardBatch
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model


class Unconstrained:
    """No grammar: the baseline every constrained engine is compared with."""

    masked = False  # no bitmask is filled or applied: unconstrained requests pay nothing

    def __init__(self, ignore_eos: bool = False) -> None:
        self.ignore_eos = ignore_eos  # run every request to the token limit (full batches)
        self.name = "none, no EOS" if ignore_eos else "none"

    def start(self, grammar: Any, masks: torch.Tensor, row: int) -> Any:
        return None

    def accept(self, state: Any, token: int) -> bool:
        """True when the request is finished after ``token``."""
        return token in jd.EOS_IDS and not self.ignore_eos

    def jump(self, state: Any, out: list[int]) -> Any:
        return None


class RadixDecoder:
    """radixlm.fsm matchers; jump-forward when ``jump``."""

    def __init__(self, engine: jd.RadixEngine, jump: bool) -> None:
        self.engine, self.use_jump = engine, jump
        self.name = "radixlm+jf" if jump else "radixlm"
        self.rows: Any = None

    def start(self, grammar: Any, masks: torch.Tensor, row: int) -> Any:
        self.rows = masks.numpy()  # numpy rows of the batch bitmask, as the runtime fills them
        return grammar.new_matcher()

    def fill(self, matcher: Any, masks: torch.Tensor, row: int) -> None:
        matcher.fill_bitmask(self.rows[row])

    def accept(self, matcher: Any, token: int) -> bool:
        if not matcher.accept_token(token):
            raise AssertionError(f"radixlm refused its own masked token {token}")
        return matcher.is_finished()

    def jump(self, matcher: Any, out: list[int]) -> Any:
        return self.engine.jump(matcher, out) if self.use_jump else None


class XGrammarDecoder:
    """xgrammar matchers filling rows of a shared bitmask."""

    name = "xgrammar"

    def __init__(self, engine: jd.XGrammarEngine) -> None:
        self.xgr = engine.xgr

    def start(self, grammar: Any, masks: torch.Tensor, row: int) -> Any:
        return self.xgr.GrammarMatcher(grammar)

    def fill(self, matcher: Any, masks: torch.Tensor, row: int) -> None:
        matcher.fill_next_token_bitmask(masks, row)

    def accept(self, matcher: Any, token: int) -> bool:
        if not matcher.accept_token(token):
            raise AssertionError(f"xgrammar refused its own masked token {token}")
        return matcher.is_terminated()

    def jump(self, matcher: Any, out: list[int]) -> Any:
        return None


class OutlinesDecoder:
    """outlines-core guides writing into rows of a shared bitmask."""

    name = "outlines-core"

    def start(self, grammar: Any, masks: torch.Tensor, row: int) -> Any:
        import outlines_core

        return outlines_core.Guide(grammar[1])

    def fill(self, guide: Any, masks: torch.Tensor, row: int) -> None:
        view = masks[row]
        guide.write_mask_into(view.data_ptr(), view.numel(), 4)

    def accept(self, guide: Any, token: int) -> bool:
        if token in jd.EOS_IDS:
            return True
        guide.advance(token)
        return False

    def jump(self, guide: Any, out: list[int]) -> Any:
        return None


class Seq:
    """One request: prompt + output ids, how many of them have KV, its slot row."""

    def __init__(self, prompt: list[int], row: int) -> None:
        self.prompt, self.out, self.row = prompt, [], row
        self.kv_len = 0
        self.done = False

    @property
    def ids(self) -> list[int]:
        return self.prompt + self.out


def decode_batch(runner: ModelRunner, decoder: Any, grammars: list[Any], prompts: list[list[int]],
                 args: argparse.Namespace, vocab: TokenVocabulary) -> dict:
    """Decode every prompt under its grammar; returns timings and the outputs."""
    n, width = len(prompts), args.max_new_tokens + max(len(p) for p in prompts) + 64
    table = torch.zeros(n, width, dtype=torch.int64)
    for i in range(n):  # every slot a request may use, taken up front (rollback reuses them)
        slots, _ = runner.allocator.extend_slots([], width, True)
        table[i] = torch.tensor(slots)
    masks = torch.zeros(n, vocab.num_words, dtype=torch.int32)
    seqs = [Seq(p, i) for i, p in enumerate(prompts)]
    states = [decoder.start(g, masks, i) for i, g in enumerate(grammars)]
    gen = torch.Generator().manual_seed(args.seed)
    mask_s = model_s = 0.0
    forwards = mask_steps = forced = samples = 0
    start = time.perf_counter()
    try:
        while True:
            live = [s for s in seqs if not s.done]
            if not live:
                break
            feed = [s.ids[s.kv_len:] for s in live]
            batch = ForwardBatch.from_table(
                seq_slots=table[[s.row for s in live]],
                seq_lens=torch.tensor([len(s.ids) for s in live]),
                ext_lens=torch.tensor([len(f) for f in feed]),
                input_ids=[t for f in feed for t in f], logits_starts=torch.full((len(live),), -1),
                device=runner.device, max_context=runner.max_context,
                page_size=runner.config.page_size, workspace=runner.workspace)
            t0 = time.perf_counter()
            logits = runner.forward(batch)[:, : vocab.vocab_size].clone()  # [live, V]
            model_s += time.perf_counter() - t0
            forwards += 1
            for s in live:
                s.kv_len = len(s.ids)
            if getattr(decoder, "masked", True):
                mask_s += fill_and_apply(decoder, states, live, masks, logits)
                mask_steps += len(live)
            probs = torch.softmax(logits / args.temperature, dim=-1)
            tokens = torch.multinomial(probs, 1, generator=gen)[:, 0].tolist()
            samples += len(live)
            for s, token in zip(live, tokens):
                forced += step_seq(decoder, states[s.row], s, token, args.max_new_tokens)
    finally:
        for i in range(n):
            runner.allocator.free(pages_of(table[i].tolist(), runner.allocator.page_size))
    return {"wall_s": time.perf_counter() - start, "forwards": forwards, "mask_s": mask_s,
            "model_s": model_s,
            "mask_steps": mask_steps, "forced": forced, "samples": samples,
            "outputs": [s.out for s in seqs]}


def fill_and_apply(decoder: Any, states: list[Any], live: list[Seq], masks: torch.Tensor,
                   logits: torch.Tensor) -> float:
    """Fill the live rows' masks (timed: the grammar's share of a step), then mask logits."""
    start = time.perf_counter()
    for s in live:
        decoder.fill(states[s.row], masks, s.row)
    seconds = time.perf_counter() - start
    apply_token_bitmask_ref(logits, masks[[s.row for s in live]])
    return seconds


def step_seq(decoder: Any, state: Any, s: Seq, token: int, max_new: int) -> int:
    """Accept a sampled token, then jump forward; returns the number of forced tokens."""
    if decoder.accept(state, token):
        s.done = True
        return 0
    s.out.append(token)
    plan = decoder.jump(state, s.out)
    forced = 0
    if plan is not None:
        s.out[len(s.out) - plan.rollback:] = list(plan.tokens)
        s.kv_len = min(s.kv_len, len(s.ids))  # rolled-back positions are recomputed
        forced = len(plan.tokens)
    if len(s.out) >= max_new:
        s.done = True
    return forced


def pick_schemas(engines: list[Any], args: argparse.Namespace) -> list[tuple[str, Any, list]]:
    """The first ``--schemas`` corpus schemas (round-robin over subsets) every engine
    compiles; returns (name, schema, per-engine grammars)."""
    queues = [sorted((args.corpus / s).glob("*.json")) for s in args.subsets]
    picked: list[tuple[str, Any, list]] = []
    while len(picked) < args.schemas and any(queues):
        for q in queues:
            if not q or len(picked) >= args.schemas:
                continue
            path = q.pop(0)
            schema = json.loads(path.read_text())["schema"]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    grammars = [e.compile(schema) for e in engines]
            except (GrammarError, TimeoutError, RuntimeError, ValueError, TypeError):
                continue
            picked.append((path.name, schema, grammars))
    return picked


def prompt_for(tokenizer: Any, schema: Any) -> list[int]:
    text = f"Answer with one JSON value for this schema: {json.dumps(schema)[:300]}\n"
    return tokenizer.encode(text, add_special_tokens=False)


def judge_outputs(tokenizer: Any, outputs: list[list[int]], schemas: list[Any]) -> tuple[int, int]:
    parsed = valid = 0
    for out, schema in zip(outputs, schemas):
        try:
            value = json.loads(tokenizer.decode(out))
        except json.JSONDecodeError:
            continue
        parsed += 1
        valid += bool(jd.judge(schema).is_valid(value))
    return parsed, valid


# a schema with long keys (the jump-forward case): every key is forced once the previous value
# ends, so each request's sampled tokens are mostly its values
LONG_KEYS = {
    "type": "object",
    "properties": {
        "customer_full_name": {"type": "string", "maxLength": 12},
        "customer_age_in_years": {"type": "integer", "minimum": 0, "maximum": 120},
        "preferred_contact_city": {"enum": ["Paris", "Rome", "Oslo"]},
        "is_active_subscriber": {"type": "boolean"},
        "subscription_renewal_month": {"type": "integer", "minimum": 1, "maximum": 12},
    },
    "required": ["customer_full_name", "customer_age_in_years", "preferred_contact_city",
                 "is_active_subscriber", "subscription_renewal_month"],
    "additionalProperties": False,
}


def long_key_rows(runner: ModelRunner, radix: Any, tokenizer: Any, args: argparse.Namespace,
                  vocab: TokenVocabulary) -> list[dict]:
    """Sampled tokens (model steps per request) with and without jump-forward."""
    grammar = radix.compile(LONG_KEYS)
    prompt = tokenizer.encode("Document: Heidi is 34 and lives in Paris.\nJSON: ",
                              add_special_tokens=False)
    rows = []
    for jump in (False, True):
        r = decode_batch(runner, RadixDecoder(radix, jump), [grammar] * args.schemas,
                         [prompt] * args.schemas, args, vocab)
        parsed, valid = judge_outputs(tokenizer, r["outputs"], [LONG_KEYS] * args.schemas)
        rows.append({"engine": "radixlm+jf" if jump else "radixlm", "samples": r["samples"],
                     "forwards": r["forwards"], "forced_tokens": r["forced"],
                     "output_tokens": sum(len(o) for o in r["outputs"]), "valid": valid,
                     "requests": args.schemas, "wall_s": r["wall_s"]})
    saved = 1 - rows[1]["samples"] / rows[0]["samples"]
    print(f"\nlong-key schema, {args.schemas} requests: sampled tokens {rows[0]['samples']} -> "
          f"{rows[1]['samples']} with jump-forward ({saved:.0%} fewer model steps per request), "
          f"forwards {rows[0]['forwards']} -> {rows[1]['forwards']}, valid "
          f"{rows[0]['valid']}/{args.schemas} and {rows[1]['valid']}/{args.schemas}")
    return rows


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=jd.DEFAULT_CORPUS)
    p.add_argument("--subsets", nargs="*", default=["Glaiveai2K", "JME", "BFCL_multiple",
                                                    "Github_easy"])
    p.add_argument("--schemas", type=int, default=16, help="requests in the batch")
    p.add_argument("--max-new-tokens", type=int, default=160)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-seconds", type=float, default=90.0,
                   help="the tiny model's training (the examples' model by default)")
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--out", type=Path, default=None,
                   help="default benchmarks/results/json_e2e.json (json_e2e_scheduler.json "
                        "with --scheduler)")
    json_e2e_engine.add_args(p)
    args = p.parse_args()
    if args.out is None:
        args.out = (json_e2e_engine.DEFAULT_OUT if args.scheduler
                    else RESULTS_DIR / "json_e2e.json")
    return args


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    if not args.corpus.is_dir():
        raise SystemExit(f"corpus not found at {args.corpus} (pass --corpus)")
    if args.scheduler:  # the scheduler's mask waits through the Engine (json_e2e_engine.py)
        json_e2e_engine.run(args)
        return
    spec = TinyModelSpec(arch="llama", size="tiny", train_seconds=args.train_seconds)
    path = ensure_tiny_model(spec, env.cache_dir() / "models")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    runner = ModelRunner(path, RunnerConfig(page_size=16, max_total_tokens=65536, num_threads=1))
    vocab = TokenVocabulary.from_tokenizer(tokenizer, runner.vocab_size, jd.EOS_IDS)
    radix = jd.RadixEngine(vocab, tokenizer, args.timeout, None)
    # no background warm-up: it would still be running (and sharing the GIL) during the timed
    # runs; the first run computes the masks it needs, the median run is warm
    radix.compiler = GrammarCompiler(vocab, CompileBudget(max_seconds=args.timeout,
                                                          background_warmup_states=0))
    xgr, outl = jd.XGrammarEngine(vocab), jd.OutlinesEngine(vocab, args.timeout)
    picked = pick_schemas([radix, xgr, outl], args)
    schemas = [s for _, s, _ in picked]
    prompts = [prompt_for(tokenizer, s) for s in schemas]
    runs = [(Unconstrained(), [None] * len(picked)),
            (Unconstrained(ignore_eos=True), [None] * len(picked)),
            (RadixDecoder(radix, jump=False), [g[0] for _, _, g in picked]),
            (RadixDecoder(radix, jump=True), [g[0] for _, _, g in picked]),
            (XGrammarDecoder(xgr), [g[1] for _, _, g in picked]),
            (OutlinesDecoder(), [g[2] for _, _, g in picked])]
    rows = []
    for decoder, grammars in runs:
        results = [decode_batch(runner, decoder, grammars, prompts, args, vocab)
                   for _ in range(args.repeats)]
        best = sorted(results, key=lambda r: r["wall_s"])[len(results) // 2]  # the median run
        tokens = sum(len(o) for o in best["outputs"])
        parsed, valid = judge_outputs(tokenizer, best["outputs"], schemas)
        rows.append({
            "engine": decoder.name,
            "wall_s_median": statistics.median(r["wall_s"] for r in results),
            "forwards": best["forwards"], "output_tokens": tokens,
            "forced_tokens": best["forced"],
            "grammar_share": 1 - best["model_s"] / best["wall_s"],
            "ms_per_output_token": 1e3 * best["wall_s"] / max(tokens, 1),
            "mask_us_per_request_step": 1e6 * best["mask_s"] / max(best["mask_steps"], 1),
            "finished": sum(len(o) < args.max_new_tokens for o in best["outputs"]),
            "parsed": parsed, "valid": valid, "requests": len(picked),
        })
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'engine':14} {'wall s':>8} {'forwards':>9} {'tokens':>7} "
          f"{'forced':>7} {'ms/tok':>7} {'mask us':>8} {'non-model':>9} {'valid':>6}")
    for r in rows:
        print(f"{r['engine']:14} {r['wall_s_median']:8.2f} "
              f"{r['forwards']:9d} {r['output_tokens']:7d} {r['forced_tokens']:7d} "
              f"{r['ms_per_output_token']:7.2f} {r['mask_us_per_request_step']:8.1f} "
              f"{r['grammar_share']:9.1%} {r['valid']:>3}/{r['requests']}")
    long_keys = long_key_rows(runner, radix, tokenizer, args, vocab)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                    "schemas": [n for n, _, _ in picked], "rows": rows,
                                    "long_keys": long_keys},
                                   indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
