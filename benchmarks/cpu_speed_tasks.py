"""The task rows of ``cpu_speed.py``: JSON-extraction field accuracy and shared-prefix RAG one
request at a time, through radixlm's Engine (per quantization mode) and through llama.cpp
(``llama-cpp-python``, a benchmark dependency only) on the same GGUF file.

* **Extraction**: the demo's 8 documents (``radixlm.demo.CASES``, 32 graded fields), each
  through the model's chat template, greedy, constrained by the demo's JSON schema
  (radixlm: ``json_schema``; llama.cpp: ``response_format`` with the schema), graded field by
  field with the demo's own ``grade``.
* **RAG one by one**: one document of ``doc_tokens`` random token ids, then ``questions``
  requests (document + a distinct ``question_tokens`` question) sent one after another, each
  ``new_tokens`` greedy tokens with EOS ignored. radixlm reuses the document through its
  radix cache; llama.cpp through its own longest-common-prefix reuse of the last prompt.
* **RAG all at once** (``rag_batch``): the same document and questions sent together. radixlm:
  one ``Engine.generate`` call with every request (cold radix cache; the cache shares the
  document); llama.cpp at its best (``llama_cpp_batched.py``): the document decoded once and
  its KV copied to every sequence, then all questions in one batch per step.
* **Concurrent streams** (``streams32``): ``streams`` distinct 16-token prompts, ``new_tokens``
  greedy tokens each (EOS ignored), all at once: radixlm one ``Engine.generate`` call,
  llama.cpp as many sequences in one batch per step. Total throughput = streams x new tokens /
  wall seconds, prefill included.

The first two questions / streams are English (the held-out text's sentences) rather than
random ids: there the batched-vs-alone token check of llama.cpp is not lost to near-ties.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from radixlm.demo import CASES, PERSON_SCHEMA, SYSTEM, grade


def _messages(document: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": document}]


def _score(records: list[str]) -> dict[str, Any]:
    valid = right = 0
    for record, (_, truth) in zip(records, CASES):
        try:
            parsed = json.loads(record)
        except json.JSONDecodeError:
            parsed = None
        parsed = parsed if isinstance(parsed, dict) else None
        valid += parsed is not None
        right += sum(grade(parsed, truth).values())
    fields = sum(len(t) for _, t in CASES)
    return {"valid_json": f"{valid}/{len(CASES)}", "fields_right": f"{right}/{fields}",
            "field_accuracy": right / fields}


def radixlm_extraction(engine: Any, tokenizer: Any) -> dict[str, Any]:
    """Greedy schema-constrained extraction of every demo document, all in one batch."""
    prompts = [tokenizer.apply_chat_template(_messages(doc), tokenize=False,
                                             add_generation_prompt=True) for doc, _ in CASES]
    params = {"temperature": 0, "max_new_tokens": 48, "json_schema": json.dumps(PERSON_SCHEMA)}
    outs = engine.generate(prompts, params)
    return _score([o["text"] for o in outs])


def llama_cpp_extraction(llm: Any) -> dict[str, Any]:
    """The same documents and schema through llama.cpp's chat completion, one by one."""
    records = []
    for doc, _ in CASES:
        out = llm.create_chat_completion(
            _messages(doc), temperature=0.0, max_tokens=48,
            response_format={"type": "json_object", "schema": PERSON_SCHEMA})
        records.append(out["choices"][0]["message"]["content"] or "")
    return _score(records)


def rag_requests(vocab: int, doc_tokens: int, questions: int, question_tokens: int,
                 seed: int = 0) -> list[list[int]]:
    """``questions`` prompts sharing one ``doc_tokens`` document (random ids, seeded)."""
    gen = torch.Generator().manual_seed(seed)
    doc = torch.randint(5, vocab, (doc_tokens,), generator=gen).tolist()
    qs = torch.randint(5, vocab, (questions, question_tokens), generator=gen).tolist()
    return [doc + q for q in qs]


def radixlm_rag_one_by_one(engine: Any, requests: list[list[int]], new_tokens: int) -> float:
    """Seconds for every request sent after the previous one finished."""
    params = {"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True}
    start = time.perf_counter()
    for ids in requests:
        engine.generate(input_ids=ids, sampling_params=params)
    return time.perf_counter() - start


def llama_cpp_rag_one_by_one(llm: Any, requests: list[list[int]], new_tokens: int) -> float:
    """Seconds for the same requests through llama.cpp (its prompt-prefix reuse on)."""
    start = time.perf_counter()
    for ids in requests:
        for n, _ in enumerate(llm.generate(ids, temp=0.0, reset=True), start=1):
            if n == new_tokens:  # generate() itself never stops: EOS is ignored here too
                break
    return time.perf_counter() - start


def english_prompts(tokenizer: Any, text: str, count: int, length: int) -> list[list[int]]:
    """``count`` prompts of ``length`` token ids, each the start of one sentence of ``text``."""
    sentences = [s.strip() + "." for s in text.split(".") if s.strip()]
    ids = [tokenizer(s)["input_ids"][:length] for s in sentences[:count]]
    if len(ids) < count or min(map(len, ids)) < length:
        raise ValueError(f"{text[:40]!r}... has fewer than {count} sentences of {length} tokens")
    return ids


def with_english(randoms: list[list[int]], english: list[list[int]]) -> list[list[int]]:
    """``randoms`` with its first prompts replaced by ``english`` (same lengths assumed)."""
    return english + randoms[len(english):]


def radixlm_all_at_once(engine: Any, requests: list[list[int]], new_tokens: int
                        ) -> tuple[float, list[list[int]]]:
    """Seconds for every request sent in one call (prefix cache emptied first), and the
    greedy tokens of each."""
    if not engine.flush_cache():
        raise RuntimeError("the engine's prefix cache could not be flushed (requests in flight)")
    params = {"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True}
    start = time.perf_counter()
    outs = engine.generate(input_ids=requests, sampling_params=params)
    return time.perf_counter() - start, [o["output_ids"] for o in outs]


def _median_all_at_once(engine: Any, requests: list[list[int]], new_tokens: int,
                        repeats: int) -> float:
    return statistics.median(radixlm_all_at_once(engine, requests, new_tokens)[0]
                             for _ in range(repeats))


def radixlm_rag_batch(engine: Any, requests: list[list[int]], new_tokens: int,
                      repeats: int) -> dict:
    """RAG all at once, median wall seconds of ``repeats`` cold-cache runs."""
    return {"questions": len(requests),
            "total_s": _median_all_at_once(engine, requests, new_tokens, repeats)}


def radixlm_streams(engine: Any, prompts: list[list[int]], new_tokens: int,
                    repeats: int) -> dict:
    """Concurrent streams' total throughput (median of ``repeats``, prefill included)."""
    seconds = _median_all_at_once(engine, prompts, new_tokens, repeats)
    return {"streams": len(prompts), "new_tokens": new_tokens, "total_s": seconds,
            "total_tok_s": len(prompts) * new_tokens / seconds}


def start_engine(model: Path, quantization: str | None, threads: int) -> Any:
    """An in-process radixlm Engine on ``model`` (same thread count as every other row)."""
    from radixlm.runtime.api.engine import Engine

    # None is the float32 row here: "none" says so (left out, a GGUF runs its own bits)
    return Engine(model_path=str(model), quantization=quantization or "none",
                  num_threads=threads)
