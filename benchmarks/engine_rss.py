"""Peak memory of a served GGUF: every process of radixlm's Engine beside llama.cpp, same file.

Each side runs in a fresh process of its own, one thread, on the file's own bits, with the same
KV context (``--context`` tokens in all) and the same number of sequences (``--requests``):

* radixlm: ``radixlm.Engine(model_path=FILE, max_total_tokens=CONTEXT)`` serves ``--requests``
  concurrent requests (every other one constrained by a JSON schema). Every process of the
  Engine is measured: the user's own (the one holding ``radixlm.Engine``), the scheduler (the
  model) and the detokenizer (and any other child). Each figure is the process' peak RSS
  (``VmHWM`` from ``/proc/PID/status``, read just before shutdown; the kernel's own high-water
  mark, so no sampling misses a peak); ``engine_peak_rss_sum_mib`` is their sum, an upper bound
  of what the processes held at once (their peaks need not coincide, and each counts shared
  library pages it maps). A 0.2 s sampler of ``smaps_rollup`` during the serving adds the
  largest simultaneous sums of RSS and of PSS (shared pages split between the processes);
* llama.cpp: ``llama_cpp.Llama(model_path=FILE, n_ctx=CONTEXT, n_threads=1)`` with
  ``n_seq_max=REQUESTS`` (llama.cpp splits the ``CONTEXT`` KV cells between the sequences, so
  its cache holds the same tokens as radixlm's pool) completes the same prompts one after
  another (the schema ones through a grammar from the same schema); the figure is that
  process' ``ru_maxrss`` (= its ``VmHWM``).

The scheduler's start-up log line (``scheduler memory: ...``, RSS after each load step) comes
with radixlm's figures: what the peak is made of.

Usage (figures go to docs/benchmarks.md with the processor and the load)::

    python benchmarks/engine_rss.py --model ~/.cache/radixlm/models/gemma-3-270m-q4_k_m.gguf
    python benchmarks/engine_rss.py --model smollm2 --engines radixlm

``--model`` is a ``.gguf`` path, or ``smollm2`` / ``gemma3`` for the installed real files.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

CONTEXT = 2048  # both sides' KV context in tokens
START_TIMEOUT_S = 3000.0  # the Engine's wait for its scheduler (600 s by default)
# the scheduler's start-up log lines kept with the figures (runner_setup, scheduler_process)
LOG_KEYS = ("scheduler memory: ", " loaded ", "CPU linears: ")
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "city": {"type": "string", "maxLength": 24}},
          "required": ["name", "age", "city"], "additionalProperties": False}
PEOPLE = [("Alice Smith", 34, "Paris"), ("Bob Jones", 51, "Berlin"), ("Dan Brown", 42, "Oslo"),
          ("Eve Adams", 27, "Madrid"), ("Frank Li", 63, "Tokyo"), ("Grace Kim", 38, "Seoul"),
          ("Heidi Park", 6, "Lima"), ("Ivan Petrov", 45, "Kyiv")]
SHOT = ('Name: Carol White\nAge: 29\nCity: Rome\nJSON: {"name": "Carol White", "age": 29, '
        '"city": "Rome"}\n\n')


def prompts(count: int) -> list[str]:
    """Few-shot record prompts (a base model needs no chat template), ``count`` of them."""
    rows = [PEOPLE[i % len(PEOPLE)] for i in range(count)]
    return [f"{SHOT}Name: {n}\nAge: {a}\nCity: {c}\nJSON: " for n, a, c in rows]


def proc_kib(pid: int, fields: tuple[str, ...], source: str = "status") -> dict[str, int]:
    """``{field: KiB}`` from ``/proc/PID/status`` (or ``smaps_rollup``)."""
    out = {}
    for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in fields:
            out[key] = int(rest.split()[0])
    return out


class RssTimeline:
    """Samples the summed RSS and PSS (``smaps_rollup``) of some processes every ``interval_s``;
    :meth:`stop` gives the largest simultaneous sums in KiB."""

    def __init__(self, pids: list[int], interval_s: float = 0.2) -> None:
        self.pids, self.interval_s = pids, interval_s
        self.max_rss_kib = self.max_pss_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                kib = [proc_kib(pid, ("Rss", "Pss"), "smaps_rollup") for pid in self.pids]
            except OSError:
                return
            self.max_rss_kib = max(self.max_rss_kib, sum(k["Rss"] for k in kib))
            self.max_pss_kib = max(self.max_pss_kib, sum(k["Pss"] for k in kib))

    def stop(self) -> tuple[int, int]:
        self._stop.set()
        self._thread.join()
        return self.max_rss_kib, self.max_pss_kib


def child_radixlm(path: str, count: int, max_tokens: int, context: int) -> dict:
    """Serve ``count`` concurrent requests in an Engine; every Engine process' memory figures
    (this process is the user's, holding the Engine)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import radixlm
    from radixlm.runtime.wire import launch

    launch.STARTUP_TIMEOUT_S = START_TIMEOUT_S  # a loaded machine: the load may take minutes
    start = time.perf_counter()
    with radixlm.Engine(model_path=path, max_total_tokens=context, num_threads=1) as engine:
        ready_s = time.perf_counter() - start
        pids = {"user": os.getpid(), **{name: proc.pid for name, proc in  # noqa: SLF001
                                        engine._procs.procs.items()}}
        idle = {name: proc_kib(pid, ("VmHWM",))["VmHWM"] for name, pid in pids.items()}
        timeline = RssTimeline(list(pids.values()))

        def one(i_prompt: tuple[int, str]) -> dict:
            i, prompt = i_prompt
            params = {"temperature": 0, "max_new_tokens": max_tokens}
            if i % 2 == 0:
                params["json_schema"] = json.dumps(SCHEMA)
            return engine.generate(prompt, params)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(count) as pool:
            outputs = list(pool.map(one, enumerate(prompts(count))))
        serve_s = time.perf_counter() - t0
        max_rss, max_pss = timeline.stop()
        peaks = {name: proc_kib(pid, ("VmHWM",))["VmHWM"] for name, pid in pids.items()}
        rollup = proc_kib(pids["scheduler"], ("Rss", "Anonymous"), "smaps_rollup")
        info = engine.info
    valid = sum(_valid_json(o["text"]) for o in outputs[::2])
    return {"ready_s": ready_s, "serve_s": serve_s,
            **{f"{name}_peak_rss_mib": kib / 1024 for name, kib in peaks.items()},
            "engine_peak_rss_sum_mib": sum(peaks.values()) / 1024,
            "peak_before_requests_mib": {name: kib / 1024 for name, kib in idle.items()},
            "max_simultaneous_rss_sum_mib": max_rss / 1024,
            "max_simultaneous_pss_sum_mib": max_pss / 1024,
            "scheduler_anon_end_mib": rollup.get("Anonymous", 0) / 1024,
            "scheduler_file_end_mib": (rollup.get("Rss", 0) - rollup.get("Anonymous", 0)) / 1024,
            "kv_pool_mib": info.get("kv_pool_bytes", 0) / 2**20,
            "kv_pool_tokens": info.get("max_total_tokens"),
            "schema_outputs_valid": f"{valid}/{len(outputs[::2])}",
            "sample_output": outputs[0]["text"]}


def _valid_json(text: str) -> bool:
    try:
        import jsonschema

        jsonschema.validate(json.loads(text), SCHEMA)
        return True
    except Exception:  # noqa: BLE001 (any failure is an invalid output)
        return False


def child_llama_cpp(path: str, count: int, max_tokens: int, context: int) -> dict:
    """The same prompts in llama.cpp, one after another; this process' figures."""
    import llama_cpp
    from llama_cpp import Llama, LlamaGrammar

    defaults = llama_cpp.llama_context_default_params

    def with_sequences() -> llama_cpp.llama_context_params:
        # Llama() takes no n_seq_max: its context holds ``count`` sequences as radixlm's pool
        # does (the CONTEXT cells split between them; the completions below use the first)
        params = defaults()
        params.n_seq_max = count
        return params

    llama_cpp.llama_cpp.llama_context_default_params = with_sequences
    start = time.perf_counter()
    llm = Llama(model_path=path, n_ctx=context, n_threads=1, n_threads_batch=1, verbose=False)
    ready_s = time.perf_counter() - start
    grammar = LlamaGrammar.from_json_schema(json.dumps(SCHEMA), verbose=False)
    t0 = time.perf_counter()
    texts = [llm.create_completion(p, max_tokens=max_tokens, temperature=0,
                                   grammar=grammar if i % 2 == 0 else None)["choices"][0]["text"]
             for i, p in enumerate(prompts(count))]
    valid = sum(_valid_json(t) for t in texts[::2])
    return {"ready_s": ready_s, "serve_s": time.perf_counter() - t0,
            "schema_outputs_valid": f"{valid}/{len(texts[::2])}", "sample_output": texts[0]}


def resolve(model: str) -> Path:
    """``smollm2`` / ``gemma3`` (the installed real files) or a ``.gguf`` path."""
    from radixlm.default_model import GEMMA3_PIP, SMOLLM2_PIP, gemma3_gguf_path, smollm2_gguf_path

    named = {"smollm2": (smollm2_gguf_path, SMOLLM2_PIP), "gemma3": (gemma3_gguf_path, GEMMA3_PIP)}
    if model in named:
        find, pip = named[model]
        path = find()
        if path is None:
            raise SystemExit(f"{model} is not installed: {pip}")
        return path
    return Path(model).expanduser()


def run_child(engine: str, args: argparse.Namespace, path: Path) -> dict:
    """One engine in a fresh process: its figures and its own peak RSS, or the error."""
    cmd = [sys.executable, __file__, "--child", engine, "--model", str(path),
           "--requests", str(args.requests), "--max-tokens", str(args.max_tokens),
           "--context", str(args.context)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-5:] or [f"exit {done.returncode}"]}
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    # the scheduler's start-up lines: weights, KV pool, linears, RSS after each load step
    figures["scheduler_log"] = [line for line in done.stderr.splitlines()
                                if any(key in line for key in LOG_KEYS)]
    return figures


CHILDREN = {"radixlm": child_radixlm, "llama_cpp": child_llama_cpp}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gemma3", help="a .gguf path, smollm2 or gemma3")
    parser.add_argument("--engines", nargs="+", default=["radixlm", "llama_cpp"],
                        choices=sorted(CHILDREN))
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--context", type=int, default=CONTEXT)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        # the path as resolved by the parent: the llama.cpp child imports neither torch nor
        # radixlm, so its RSS is llama.cpp's own
        figures = CHILDREN[args.child](args.model, args.requests, args.max_tokens,
                                       args.context)
        figures["process_peak_rss_mib"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        print(json.dumps(figures), flush=True)
        return
    path = resolve(args.model)
    results = {"model": str(path), "file_mib": path.stat().st_size / 2**20,
               "context": args.context, "requests": args.requests,
               "max_tokens": args.max_tokens}
    for engine in args.engines:
        results[engine] = run_child(engine, args, path)
        print(json.dumps({engine: results[engine]}), flush=True)
    if args.out:
        from bench_common import machine, write_results  # imports torch: the parent only

        write_results(args.out, {**results, "machine": machine()})


if __name__ == "__main__":
    main()
