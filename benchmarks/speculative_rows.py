"""Workloads and runners of ``benchmarks/speculative.py`` beyond its batch-1 loop: a ~1,500-token
RAG passage, many requests stepped together on one in-process :class:`Scheduler`, the agent
program (``fork`` + tool-call JSON + ``select`` in the lang DSL, through two Engines), and
llama.cpp's own prompt-lookup decoding (``LlamaPromptLookupDecoding``) on the same GGUF.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import radixlm as sgl
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.wire.messages import GenerateReq, GrammarReq
from radixlm.runtime.wire.sampling_params import SamplingParams

_PLACES = ["the north wing", "the east dome", "the library", "the workshop", "the archive",
           "the lecture hall", "the west tower", "the garden", "the cellar", "the clock room"]
_PEOPLE = ["Marta Lindqvist", "Johan Berg", "Elsa Nyholm", "Karl Dahl", "Ines Duarte",
           "Omar Haddad", "Heidi Brandt", "Paulo Reis", "Sara Ek", "Lena Vik"]
_ACTS = ["repaired the clockwork drive of", "catalogued the glass plates kept in",
         "installed a new spectrograph in", "painted a star map on the ceiling of",
         "measured the seeing every night from", "wrote a guide for visitors to",
         "found a lost logbook in", "moved the seismograph into"]


def long_passage(sentences: int = 70) -> tuple[str, list[str]]:
    """A ~1,500-token passage of distinct facts, and questions whose answers quote it."""
    rng = random.Random(7)
    facts = [f"In {1911 + 1 + i}, {rng.choice(_PEOPLE)} {rng.choice(_ACTS)} "
             f"{rng.choice(_PLACES)}, and the work took {rng.randint(2, 40)} days."
             for i in range(sentences)]
    questions = [f"Quote the sentence about the year {1912 + i} exactly."
                 for i in range(3, sentences, max(sentences // 9, 1))]
    return " ".join(facts), questions


TOOL_SCHEMA = {
    "type": "object",
    "properties": {"tool": {"enum": ["file_person", "send_letter"]},
                   "arguments": {"type": "object",
                                 "properties": {"name": {"type": "string", "maxLength": 24},
                                                "city": {"type": "string", "maxLength": 24},
                                                "job": {"type": "string", "maxLength": 24}},
                                 "required": ["name", "city", "job"],
                                 "additionalProperties": False}},
    "required": ["tool", "arguments"], "additionalProperties": False,
}


@sgl.function
def agent(s, document, schema):
    """Two tool calls drafted in parallel (fork), then one chosen by ``select``."""
    s += sgl.system("You are an agent. Call a tool by replying with one JSON object; copy "
                    "the arguments from the document.")
    s += sgl.user("Document: " + document)
    calls = s.fork(2)
    calls += [sgl.assistant(sgl.gen("call", max_tokens=80, json_schema=schema))
              for _ in range(2)]
    calls.join()
    texts = list(dict.fromkeys(c for c in s["call"] if c.strip())) or ["{}"]
    s += sgl.user("Which call is right? Repeat it.")
    s += sgl.assistant(sgl.select("chosen", texts))


def run_agent(model_path: str, threads: int, documents: list[str],
              **server_args: Any) -> dict[str, Any]:
    """The agent program once per document (one at a time: a fork of 2 stays within the
    speculation threshold) on a fresh Engine; wall seconds and the chosen calls."""
    from radixlm.runtime.api.engine import Engine

    with Engine(model_path=model_path, num_threads=threads, **server_args) as engine:
        schema = json.dumps(TOOL_SCHEMA)
        agent.run(document=documents[0], schema=schema, backend=engine, temperature=0)  # warm
        engine.flush_cache()
        start = time.perf_counter()
        states = [agent.run(document=d, schema=schema, backend=engine, temperature=0)
                  for d in documents]
        seconds = time.perf_counter() - start
        info = engine.get_server_info()
    errors = [repr(st.error()) for st in states if st.error() is not None]
    if errors:
        raise RuntimeError(f"agent: {errors[0]}")
    return {"seconds": seconds, "outputs": [[st["call"], st["chosen"]] for st in states],
            "accept_length_mean": info.get("spec_accept_length_mean", 0.0)}


def run_together(s: Scheduler, rid: str, prompts: list[tuple[list[int], GrammarReq | None]],
                 new_tokens: int) -> dict[str, Any]:
    """All ``prompts`` added at once and stepped together on ``s``: outputs and the decode
    rate (tokens emitted after every request has its first token, over that time)."""
    for i, (ids, grammar) in enumerate(prompts):
        s.add_request(GenerateReq(rid=f"{rid}-{i}", input_ids=ids, grammar=grammar,
                                  stream=True, sampling=SamplingParams(
                                      temperature=0.0, max_new_tokens=new_tokens)))
    outs: dict[str, list[int]] = {f"{rid}-{i}": [] for i in range(len(prompts))}
    emitted, t0, at_t0 = 0, 0.0, 0
    while s.has_work():
        for req in s.waiting:
            if req.grammar_future is not None:
                req.grammar_future.result()
        for o in s.step():
            out = outs[o.rid]
            if o.rollback:
                del out[len(out) - o.rollback:]
            out.extend(o.new_ids)
            emitted += len(o.new_ids)
        if not t0 and all(outs.values()):
            t0, at_t0 = time.perf_counter(), emitted
    end = time.perf_counter()
    tokens = emitted - at_t0
    return {"ids": [outs[k] for k in sorted(outs)], "decode_tokens": tokens,
            "decode_s": end - t0 if t0 else 0.0}


def llama_cpp_lookup(gguf: str, threads: int, prompts: list[tuple[list[int], dict | None]],
                     new_tokens: int, num_pred: int) -> dict[str, float]:
    """llama.cpp on the same GGUF and prompt ids, greedy, batch 1: decode tok/s without and
    with its prompt-lookup decoding (``num_pred`` drafts), the JSON schema as its grammar."""
    from llama_cpp import Llama, LlamaGrammar
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    rates = {}
    for label, draft in (("off", None), ("on", LlamaPromptLookupDecoding(
            num_pred_tokens=num_pred))):
        llm = Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads, n_ctx=4096,
                    draft_model=draft, logits_all=draft is not None, verbose=False)
        tokens = seconds = 0.0
        for ids, schema in prompts:
            grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False) \
                if schema else None
            llm.reset()
            first = n = 0
            for _ in llm.create_completion(ids, max_tokens=new_tokens, temperature=0.0,
                                           top_k=1, stream=True, grammar=grammar):
                n += 1
                if n == 1:
                    first = time.perf_counter()
            tokens += n - 1
            seconds += time.perf_counter() - first
        rates[label] = tokens / seconds if seconds else 0.0
        del llm
    return {"llama_cpp_tok_s_off": rates["off"], "llama_cpp_tok_s_on": rates["on"],
            "llama_cpp_ratio": rates["on"] / rates["off"] if rates["off"] else 0.0}
