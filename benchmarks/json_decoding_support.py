"""Pieces of benchmarks/json_decoding.py: the random-logit sampler, and the outlines-core
0.2.14 engine (its own schema -> regex; its Index built in a child of a fork server, killable
when it runs past the budget)."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from radixlm.fsm import GrammarSpec, TokenVocabulary
from radixlm.testing.real_vocabularies import NAMES


def _child(fn: Callable[..., Any], args: tuple, conn: Any) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except Exception as exc:  # reported to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def run_with_timeout(fn: Callable[..., Any], args: tuple, timeout: float) -> Any:
    """Run ``fn(*args)`` in a child process; TimeoutError past ``timeout`` (process killed).

    Children come from a fork server, not from this (large) process: forking it would mark
    all its memory copy-on-write, and the page faults that follow would be billed to whichever
    engine compiles next."""
    ctx = mp.get_context("forkserver")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(fn, args, child), daemon=True)
    proc.start()
    if not parent.poll(timeout):
        proc.kill()
        proc.join()
        raise TimeoutError(f"over {timeout} s")
    status, payload = parent.recv()
    proc.join()
    if status == "error":
        raise RuntimeError(payload)
    return payload


def _outlines_build(regex: str, mapping: dict[bytes, list[int]], eos: int) -> tuple[Any, float]:
    import outlines_core  # in the fork server's child

    start = time.perf_counter()
    index = outlines_core.Index(regex, outlines_core.Vocabulary(eos, mapping))
    return index, time.perf_counter() - start


class OutlinesEngine:
    """outlines-core 0.2.14: its own schema → regex, Index over a byte-keyed vocabulary."""

    name = "outlines-core"

    def __init__(self, vocab: TokenVocabulary, timeout: float) -> None:
        self.vocab = vocab
        self.timeout = timeout
        self.mapping: dict[bytes, list[int]] = {}
        for tid, data in enumerate(vocab.token_bytes):
            if data:
                self.mapping.setdefault(data, []).append(tid)

    def compile(self, schema: Any) -> Any:
        from outlines_core.json_schema import build_regex_from_schema

        start = time.perf_counter()
        regex = build_regex_from_schema(json.dumps(schema))
        regex_seconds = time.perf_counter() - start
        # the Index build runs in a child process so a runaway build can be killed
        index, index_seconds = run_with_timeout(_outlines_build,
                                                (regex, self.mapping, self.vocab.eos_token_ids[0]),
                                                max(self.timeout - regex_seconds, 0.1))
        return (regex, index, regex_seconds + index_seconds)

    def accepts(self, grammar: Any, texts: list[str]) -> bool:
        regex = grammar[0]
        try:
            return any(re.fullmatch(regex, t) for t in texts)
        except re.error:
            return False

    def walk(self, grammar: Any, gen: torch.Generator, max_steps: int,
             jump: bool) -> tuple[list[int], int, list[float], bool]:
        import outlines_core

        guide = outlines_core.Guide(grammar[1])
        mask = torch.zeros(self.vocab.num_words, dtype=torch.int32)
        out, times = [], []
        for _ in range(max_steps):
            start = time.perf_counter()
            guide.write_mask_into(mask.data_ptr(), mask.numel(), 4)
            times.append(time.perf_counter() - start)
            token = sample(mask, self.vocab.vocab_size, gen)
            if token in self.vocab.eos_token_ids:
                return out, 0, times, True
            guide.advance(token)
            out.append(token)
        return out, 0, times, False


def sample(mask_row: torch.Tensor, vocab_size: int, gen: torch.Generator) -> int:
    """argmax of random logits over the allowed tokens (uniform over them)."""
    shifts = torch.arange(32, dtype=torch.int32)
    allowed = ((mask_row.unsqueeze(-1) >> shifts) & 1).reshape(-1)[:vocab_size].bool()
    logits = torch.randn(vocab_size, generator=gen).masked_fill(~allowed, float("-inf"))
    return int(logits.argmax())


def add_walk_args(p: argparse.ArgumentParser, subsets: list[str], max_steps: int) -> None:
    """The flags of a random-logit walk over corpus schemas (cold_masks.py, grammar_advance.py):
    corpus, vocabulary, subsets, schemas per subset, walks per schema, steps per walk, cache."""
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--tokenizer", choices=NAMES, default="smollm2")
    p.add_argument("--subsets", nargs="*", default=subsets)
    p.add_argument("--per-subset", type=int, default=6)
    p.add_argument("--walks", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=max_steps)
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "radixlm-bench")


def corpus_specs(corpus: Path, subset: str, per_subset: int) -> list[tuple[int, GrammarSpec]]:
    """(seed, spec) of a subset's first ``per_subset`` schemas, sorted by file name: the seed
    is the schema's place, so a walk's random logits follow the schema, not the run."""
    paths = sorted((corpus / subset).glob("*.json"))[:per_subset]
    return [(seed, GrammarSpec.json_schema(json.loads(path.read_text())["schema"]))
            for seed, path in enumerate(paths)]
