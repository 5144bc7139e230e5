"""Load generator against the HTTP server: Poisson arrivals, mixed lengths, shared prefixes.

For each request rate: requests arrive as a Poisson process for ``--duration`` seconds; prompt
and output lengths are drawn from ranges; a share of the requests starts with one of a few
long common system prompts (the cacheable part). Each request streams from ``/generate``;
the client measures time to first token and inter-token latency. The same load (same seed) is
run against a server with ``--disable-radix-cache`` in the same run. ``--model`` defaults to
SmolLM2-135M-Instruct (see ``bench_common.py``); the server is given the same path.

    python benchmarks/serving.py [--model smollm2] [--rates 1,2,4] [--duration 20]
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import requests
from bench_common import BenchModel, add_common_args, resolve_model, setup_threads, write_results

from radixlm.tiny_model.corpus import generate_corpus


@dataclass
class Result:
    ok: bool
    ttft: float = 0.0
    itl: list[float] | None = None
    completion_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    latency: float = 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: BenchModel, args: argparse.Namespace, extra: list[str]
                 ) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "radixlm.launch_server", "--model-path", str(model.path),
           "--port", str(port), "--num-threads", str(args.threads),
           "--max-total-tokens", str(args.max_total_tokens),
           "--max-queued-requests", "100000", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if requests.get(f"{url}/health_generate", timeout=2).ok:
                return proc, url
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def make_workload(n: int, seed: int, args: argparse.Namespace) -> list[dict]:
    rng = random.Random(seed)
    texts = [d for d in generate_corpus(3000, seed=11) if not d.startswith("{")]
    systems = [" ".join(rng.sample(texts, 40))[: args.prefix_chars] for _ in range(4)]
    out = []
    for _ in range(n):
        body = " ".join(rng.sample(texts, 6))[: rng.randint(*args.prompt_chars)]
        if rng.random() < args.shared_share:
            body = rng.choice(systems) + "\n" + body
        out.append({"text": body, "sampling_params": {
            "temperature": 0.0, "max_new_tokens": rng.randint(*args.output_tokens),
            "ignore_eos": True}, "stream": True})
    return out


def one_request(url: str, body: dict) -> Result:
    start = time.perf_counter()
    stamps, last = [], None
    try:
        with requests.post(f"{url}/generate", json=body, stream=True, timeout=600) as r:
            if r.status_code != 200:
                return Result(ok=False)
            for line in r.iter_lines():
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                stamps.append(time.perf_counter())
                last = json.loads(line[6:])
    except requests.RequestException:
        return Result(ok=False)
    if not stamps or last is None or "meta_info" not in last:
        return Result(ok=False)
    meta = last["meta_info"]
    return Result(ok=True, ttft=stamps[0] - start,
                  itl=[b - a for a, b in zip(stamps, stamps[1:])],
                  completion_tokens=meta["completion_tokens"],
                  prompt_tokens=meta["prompt_tokens"], cached_tokens=meta["cached_tokens"],
                  latency=stamps[-1] - start)


def run_rate(url: str, rate: float, args: argparse.Namespace) -> dict:
    rng = random.Random(int(rate * 1000))
    n = max(int(rate * args.duration), 1)
    workload = make_workload(n, int(rate * 1000), args)
    results: list[Result | None] = [None] * n
    threads = []
    requests.post(f"{url}/flush_cache", timeout=30)
    start = time.perf_counter()
    t_next = 0.0
    for i, body in enumerate(workload):
        t_next += rng.expovariate(rate)
        time.sleep(max(0.0, start + t_next - time.perf_counter()))

        def work(i: int = i, body: dict = body) -> None:
            results[i] = one_request(url, body)

        th = threading.Thread(target=work)
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    ok = [r for r in results if r is not None and r.ok]
    itl = [x for r in ok for x in (r.itl or [])]
    q = statistics.quantiles
    return {
        "rate": rate, "requests": n, "ok": len(ok), "seconds": elapsed,
        "throughput_tok_s": sum(r.completion_tokens for r in ok) / elapsed,
        "ttft_p50": statistics.median(r.ttft for r in ok),
        "ttft_p99": q([r.ttft for r in ok], n=100)[98] if len(ok) > 1 else ok[0].ttft,
        "itl_p50": statistics.median(itl) if itl else 0.0,
        "itl_p99": q(itl, n=100)[98] if len(itl) > 1 else 0.0,
        "hit_rate": sum(r.cached_tokens for r in ok) / max(sum(r.prompt_tokens for r in ok), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, "serving")
    parser.add_argument("--rates", default="1,2,4")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--prompt-chars", type=int, nargs=2, default=(200, 1200))
    parser.add_argument("--prefix-chars", type=int, default=2400)
    parser.add_argument("--shared-share", type=float, default=0.6)
    parser.add_argument("--output-tokens", type=int, nargs=2, default=(8, 64))
    parser.add_argument("--max-total-tokens", type=int, default=32768, help="KV pool")
    args = parser.parse_args()
    setup_threads(args.threads)
    model = resolve_model(args.model)
    rates = [float(r) for r in args.rates.split(",")]
    report = {}
    for name, extra in (("radix cache", []), ("cache disabled", ["--disable-radix-cache"])):
        proc, url = start_server(model, args, extra)
        try:
            report[name] = [run_rate(url, r, args) for r in rates]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"\n{model.describe()}, {args.threads} thread(s), {args.duration:.0f} s of Poisson "
          f"arrivals per rate, "
          f"{args.shared_share:.0%} of prompts share one of 4 long prefixes\n")
    print("| server | rate (req/s) | ok | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | "
          "ITL p50 (ms) | ITL p99 (ms) | hit rate |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, rows in report.items():
        for r in rows:
            print(f"| {name} | {r['rate']:g} | {r['ok']}/{r['requests']} | "
                  f"{r['throughput_tok_s']:.0f} | {r['ttft_p50'] * 1e3:.0f} | "
                  f"{r['ttft_p99'] * 1e3:.0f} | {r['itl_p50'] * 1e3:.1f} | "
                  f"{r['itl_p99'] * 1e3:.1f} | {r['hit_rate']:.1%} |")
    write_results(args.out, {"args": vars(args), "model": model.label, "report": report})


if __name__ == "__main__":
    main()
