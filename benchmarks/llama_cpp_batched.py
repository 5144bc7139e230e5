"""llama.cpp at its best on many sequences at once, for ``cpu_speed.py``'s ``rag_batch`` and
``streams32`` rows, through ``llama-cpp-python``'s low-level bindings (a benchmark dependency
only; the high-level ``Llama`` class runs one sequence).

One context holds ``n_seq`` sequences. Every step puts one token of every live sequence into
one ``llama_batch`` (one seq id per token) and takes each sequence's greedy argmax from
``llama_get_logits_ith``, as llama.cpp's own ``batched`` / ``parallel`` examples do.

* **RAG all at once**: the document is decoded once in sequence 0; ``llama_memory_seq_cp``
  gives its KV cells to sequences 1..n-1 (with the unified KV buffer the copy adds seq ids to
  the same cells: the document is stored once), then every question's tokens go in one
  batch, then one new token per sequence per step.
* **Streams**: ``n`` independent prompts, one sequence each, prefilled in one batch, then one
  token per sequence per step; prefill and decode are timed apart.
* **Check**: the greedy tokens a sequence gets inside the batch against the tokens it gets
  decoded alone in the same context (``batched_matches_alone``), so the comparison is honest;
  where they part, the logit gap and difference there tell a near-tie from a bug. Seen
  here: with a KV per sequence the tokens matched in all runs but one (parted at a near-tie,
  top-2 gap 0.05); with the unified KV llama.cpp's logits move by up to ~0.9 (logit scale
  ~25) against the same prompt alone, flipping near-ties.

Both KV layouts are run and the faster one is the row (``best_layout``); the other is kept
in ``layouts``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BatchedConfig:
    """One llama.cpp context: ``n_seq`` parallel sequences sharing ``n_ctx`` KV cells."""

    gguf: str
    n_seq: int
    n_ctx: int
    threads: int = 1
    n_batch: int = 512
    unified_kv: bool = True
    extra_bufts: bool = False  # llama.cpp's repacked (AMX) weights; see cpu_speed.py
    # LLAMA_FLASH_ATTN_TYPE_*: -1 auto (llama.cpp's own default), 0 off, 1 on. Off by default
    # (as the Llama class): measured here, a 16-question RAG decode step took 0.31 s with it
    # off against 1.2 s under auto (unified KV; 0.53 vs 0.93 s with a KV per sequence)
    flash_attn: int = 0

    def __post_init__(self) -> None:
        if self.n_seq < 1 or self.threads < 1 or self.n_batch < 1:
            raise ValueError(f"n_seq, threads, n_batch must be >= 1: {self}")
        if self.n_ctx < self.n_seq:
            raise ValueError(f"n_ctx ({self.n_ctx}) must hold at least n_seq ({self.n_seq})")


@dataclass(frozen=True)
class BatchedRun:
    """Greedy tokens per sequence, the wall seconds of the two phases, and every step's
    logits (float32, one row per step) of the first ``keep`` sequences."""

    tokens: list[list[int]]
    prefill_s: float
    decode_s: float
    logits: list[list[np.ndarray]]

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_s


# One batch entry: (token id, position, sequence id, whether its logits are wanted).
Entry = tuple[int, int, int, bool]


class BatchedLlama:
    """A llama.cpp model + context with ``n_seq`` sequences; close it (or use ``with``)."""

    def __init__(self, config: BatchedConfig) -> None:
        import llama_cpp.llama_cpp as lib
        from llama_cpp._logger import set_verbose  # the package's log hook: errors only

        set_verbose(False)
        self.lib, self.config = lib, config
        lib.llama_backend_init()
        mparams = lib.llama_model_default_params()
        mparams.use_extra_bufts = config.extra_bufts
        self.model = lib.llama_model_load_from_file(config.gguf.encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {config.gguf}")
        cparams = lib.llama_context_default_params()
        cparams.n_ctx, cparams.n_seq_max = config.n_ctx, config.n_seq
        cparams.n_batch = cparams.n_ubatch = config.n_batch
        # both: llama.cpp decodes with n_threads and prompt batches with n_threads_batch
        cparams.n_threads = cparams.n_threads_batch = config.threads
        cparams.kv_unified = config.unified_kv
        cparams.flash_attn_type = config.flash_attn
        self.ctx = lib.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            lib.llama_model_free(self.model)
            raise RuntimeError(f"llama.cpp could not make a context for {config}")
        self.memory = lib.llama_get_memory(self.ctx)
        self.n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self.model))
        self.batch = lib.llama_batch_init(config.n_batch, 0, 1)

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.lib.llama_free(self.ctx)
        self.lib.llama_model_free(self.model)

    def __enter__(self) -> BatchedLlama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def clear(self) -> None:
        """Empty every sequence's KV."""
        self.lib.llama_memory_clear(self.memory, True)

    def copy_seq(self, src: int, dst: int) -> None:
        """Give ``dst`` every KV cell of ``src`` (all positions)."""
        self.lib.llama_memory_seq_cp(self.memory, src, dst, -1, -1)

    def decode(self, entries: list[Entry], keep: int = 0) -> tuple[list[int], list[np.ndarray]]:
        """Decode ``entries`` in as few batches as ``n_batch`` allows; the greedy next token
        for every entry whose logits were wanted, in order, and copies of the first ``keep``
        of those entries' logits."""
        out: list[int] = []
        kept: list[np.ndarray] = []
        for lo in range(0, len(entries), self.config.n_batch):
            chunk = entries[lo:lo + self.config.n_batch]
            b = self.batch
            for i, (tok, pos, seq, want) in enumerate(chunk):
                b.token[i], b.pos[i], b.n_seq_id[i] = tok, pos, 1
                b.seq_id[i][0], b.logits[i] = seq, int(want)
            b.n_tokens = len(chunk)
            rc = self.lib.llama_decode(self.ctx, b)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} on {len(chunk)} tokens "
                                   f"(KV full? n_ctx={self.config.n_ctx})")
            for i in (i for i, e in enumerate(chunk) if e[3]):
                row = self._logits(i)
                out.append(int(row.argmax()))
                if len(kept) < keep:
                    kept.append(row.copy())
        return out, kept

    def _logits(self, i: int) -> np.ndarray:
        ptr = self.lib.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def generate(self, prompts: list[list[int]], new_tokens: int,
                 start: list[int] | None = None, keep: int = 0) -> BatchedRun:
        """Sequence ``i`` decodes ``prompts[i]`` from position ``start[i]`` (default 0: its KV
        must hold exactly that many cells already), then ``new_tokens`` greedy tokens; every
        sequence's tokens share each batch. ``keep``: see :class:`BatchedRun`."""
        if len(prompts) > self.config.n_seq:
            raise ValueError(f"{len(prompts)} prompts > n_seq {self.config.n_seq}")
        start = start or [0] * len(prompts)
        t0 = time.perf_counter()
        entries = [(tok, s + j, seq, j == len(p) - 1)
                   for seq, (p, s) in enumerate(zip(prompts, start)) for j, tok in enumerate(p)]
        last, rows = self.decode(entries, keep)
        t1 = time.perf_counter()
        tokens = [[t] for t in last]
        logits = [[r] for r in rows]
        pos = [s + len(p) for p, s in zip(prompts, start)]
        for step in range(new_tokens - 1):
            last, rows = self.decode(
                [(t, pos[seq] + step, seq, True) for seq, t in enumerate(last)], keep)
            for seq, t in enumerate(last):
                tokens[seq].append(t)
            for seq, r in enumerate(rows):
                logits[seq].append(r)
        return BatchedRun(tokens, t1 - t0, time.perf_counter() - t1, logits)

    def rag(self, doc: list[int], questions: list[list[int]], new_tokens: int,
            keep: int = 0) -> BatchedRun:
        """The document once in sequence 0, shared by KV copy, then all questions at once;
        ``prefill_s`` includes the document."""
        self.clear()
        t0 = time.perf_counter()
        self.decode([(tok, j, 0, False) for j, tok in enumerate(doc)])  # no logits
        for seq in range(1, len(questions)):
            self.copy_seq(0, seq)
        doc_s = time.perf_counter() - t0
        run = self.generate(questions, new_tokens, [len(doc)] * len(questions), keep)
        return BatchedRun(run.tokens, doc_s + run.prefill_s, run.decode_s, run.logits)

    def streams(self, prompts: list[list[int]], new_tokens: int, keep: int = 0) -> BatchedRun:
        """Independent prompts, one sequence each, from an empty KV."""
        self.clear()
        return self.generate(prompts, new_tokens, keep=keep)

    def alone(self, prompt: list[int], new_tokens: int) -> BatchedRun:
        """``prompt`` decoded by itself (sequence 0, empty KV), its logits kept."""
        self.clear()
        return self.generate([prompt], new_tokens, keep=1)


def _check(bl: BatchedLlama, prompts: list[list[int]], run: BatchedRun,
           new_tokens: int) -> dict[str, Any]:
    """The batched run's greedy tokens of ``prompts`` (its first sequences) against each
    prompt decoded alone. Where they part (same tokens before, so the same conditioning),
    the alone run's top-2 logit gap and the largest logit difference between the two runs:
    a flip of the top two needs their difference to move by the gap, so a gap of at most
    twice the largest difference is a near-tie resolved by float summation order, not a
    batching bug (``parts_only_at_near_ties``)."""
    parted = []
    for seq, prompt in enumerate(prompts):
        alone = bl.alone(prompt, new_tokens)
        want, got = alone.tokens[0], run.tokens[seq]
        k = next((j for j, (a, b) in enumerate(zip(want, got)) if a != b), None)
        if k is not None:
            top2 = np.partition(alone.logits[0][k], -2)[-2:]
            diff = float(np.abs(alone.logits[0][k] - run.logits[seq][k]).max())
            parted.append({"step": k, "alone_top2_gap": round(float(top2[1] - top2[0]), 4),
                           "max_logit_diff": round(diff, 4)})
    return {"batched_matches_alone": not parted, "parted": parted,
            "parts_only_at_near_ties": all(
                p["alone_top2_gap"] <= 2 * p["max_logit_diff"] for p in parted)}


def _layouts(base: BatchedConfig, per_seq_ctx: int, shared_ctx: int) -> list[BatchedConfig]:
    """Both KV layouts llama.cpp offers: one buffer per sequence (``n_ctx`` split evenly) and
    one unified buffer (what lets a copied prefix be stored once)."""
    return [replace(base, unified_kv=False, n_ctx=base.n_seq * per_seq_ctx),
            replace(base, unified_kv=True, n_ctx=shared_ctx)]


def _best(by_layout: dict[str, dict[str, Any]], key: str) -> dict[str, Any]:
    name = min(by_layout, key=lambda k: by_layout[k][key])
    return {"best_layout": name, **by_layout[name], "layouts": by_layout}


def _median_run(runs: list[BatchedRun]) -> BatchedRun:
    return sorted(runs, key=lambda r: r.total_s)[len(runs) // 2]


def streams_figures(base: BatchedConfig, prompts: list[list[int]], new_tokens: int,
                    repeats: int = 1, checked: int = 2) -> dict[str, Any]:
    """``len(prompts)`` concurrent streams in both KV layouts (median of ``repeats``): total
    and decode-only tokens/s, and the batched-vs-alone check of the first ``checked``."""
    n, longest = len(prompts), max(len(p) for p in prompts) + new_tokens + 8
    by_layout = {}
    for config in _layouts(_with_n_seq(base, n), longest, n * longest):
        with BatchedLlama(config) as bl:
            run = _median_run([bl.streams(prompts, new_tokens, keep=checked)
                               for _ in range(repeats)])
            check = _check(bl, prompts[:checked], run, new_tokens)
        by_layout["unified" if config.unified_kv else "per_seq"] = {
            "total_s": run.total_s, "total_tok_s": n * new_tokens / run.total_s,
            "decode_tok_s": n * (new_tokens - 1) / max(run.decode_s, 1e-9), **check}
    return {"streams": n, "new_tokens": new_tokens, **_best(by_layout, "total_s")}


def rag_figures(base: BatchedConfig, doc: list[int], questions: list[list[int]],
                new_tokens: int, repeats: int = 1, checked: int = 2) -> dict[str, Any]:
    """Shared-prefix RAG all at once in both KV layouts (median of ``repeats``): wall seconds,
    the document's prefill included, and the batched-vs-alone check of the first ``checked``
    questions (alone = document + question from an empty KV)."""
    n, q_len = len(questions), max(len(q) for q in questions) + new_tokens
    by_layout = {}
    for config in _layouts(_with_n_seq(base, n), len(doc) + q_len + 8,
                           len(doc) + n * q_len + 8):
        with BatchedLlama(config) as bl:
            run = _median_run([bl.rag(doc, questions, new_tokens, keep=checked)
                               for _ in range(repeats)])
            check = _check(bl, [doc + q for q in questions[:checked]], run, new_tokens)
        by_layout["unified" if config.unified_kv else "per_seq"] = {
            "total_s": run.total_s, "prefill_s": run.prefill_s, "decode_s": run.decode_s,
            **check}
    return {"questions": n, **_best(by_layout, "total_s")}


def _with_n_seq(config: BatchedConfig, n_seq: int) -> BatchedConfig:
    return replace(config, n_seq=n_seq, n_ctx=max(config.n_ctx, n_seq))


def load_check(gguf: str, prompt: list[int], new_tokens: int, llm: Any,
               extra_bufts: bool = False) -> bool:
    """This module's one-sequence path gives the high-level ``Llama`` class's greedy tokens
    (validates the low-level batch code against llama-cpp-python's own loop)."""
    # the same context size as ``llm``'s: llama.cpp's attention sums over the padded KV, so
    # another size may flip a near-tie
    config = BatchedConfig(gguf, 1, llm.n_ctx(), threads=int(llm.n_threads),
                           extra_bufts=extra_bufts,
                           flash_attn=int(llm.context_params.flash_attn_type))
    with BatchedLlama(config) as bl:
        mine = bl.alone(prompt, new_tokens).tokens[0]
    llm.reset()
    theirs = []
    for t in llm.generate(prompt, temp=0.0, reset=True):
        theirs.append(int(t))
        if len(theirs) == new_tokens:
            break
    return mine == theirs


__all__ = ["BatchedConfig", "BatchedLlama", "BatchedRun", "rag_figures", "streams_figures",
           "load_check"]
