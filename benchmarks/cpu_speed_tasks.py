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
"""

from __future__ import annotations

import json
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


def start_engine(model: Path, quantization: str | None, threads: int) -> Any:
    """An in-process radixlm Engine on ``model`` (same thread count as every other row)."""
    from radixlm.runtime.api.engine import Engine

    return Engine(model_path=str(model), quantization=quantization, num_threads=threads)
