"""Workloads and runners of ``benchmarks/speculative.py`` beyond its batch-1 loop: a ~1,500-token
RAG passage, many requests stepped together on one in-process :class:`Scheduler`, the agent
program (``fork`` + tool-call JSON + ``select`` in the lang DSL, through one Engine, plain
by the per-request opt-out), llama.cpp's own prompt-lookup decoding
(``LlamaPromptLookupDecoding``) on the same GGUF, and the cost of a rejected draft chain.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import radixlm as sgl
from radixlm.lang.backend.engine_backend import EngineBackend
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
    calls += [sgl.assistant(sgl.gen("call", max_tokens=64, json_schema=schema))
              for _ in range(2)]
    calls.join()
    texts = list(dict.fromkeys(c for c in s["call"] if c.strip())) or ["{}"]
    s += sgl.user("Which call is right? Repeat it.")
    s += sgl.assistant(sgl.select("chosen", texts))


class _PlainBackend(EngineBackend):
    """The Engine's backend with every request opted out of speculation
    (``disable_speculation``): plain decoding (jump-forward included) on the same Engine."""

    def _kwargs(self, body: dict[str, Any]) -> dict[str, Any]:
        kwargs = super()._kwargs(body)
        kwargs["sampling_params"] = {**kwargs.get("sampling_params", {}),
                                     "disable_speculation": True}
        return kwargs


def run_agent(model_path: str, threads: int, documents: list[str], warm: str,
              budget_s: float, **server_args: Any) -> dict[str, Any]:
    """The agent program per document, speculation off (the per-request opt-out) then on,
    on one Engine started with ``server_args`` (speculation on), the cache flushed before
    each run. ``warm`` (a document not measured) runs first both ways; no new document
    starts once ``budget_s`` seconds have gone (each program is bounded by its gens'
    ``max_tokens``). Wall seconds per side, the programs' outputs, the acceptance of the
    measured speculating runs."""
    from radixlm.runtime.api.engine import Engine

    schema = json.dumps(TOOL_SCHEMA)
    seconds = {"off": 0.0, "on": 0.0}
    outputs: dict[str, list] = {"off": [], "on": []}
    with Engine(model_path=model_path, num_threads=threads, **server_args) as engine:
        backends = {"off": _PlainBackend(engine), "on": EngineBackend(engine)}

        def once(side: str, document: str) -> tuple[float, list]:
            engine.flush_cache()
            start = time.perf_counter()
            state = agent.run(document=document, schema=schema, backend=backends[side],
                              temperature=0)
            took = time.perf_counter() - start
            if state.error() is not None:
                raise RuntimeError(f"agent ({side}): {state.error()!r}")
            return took, [state["call"], state["chosen"]]

        for side in backends:
            once(side, warm)
        before = engine.get_server_info()
        began = time.perf_counter()
        for document in documents:
            if time.perf_counter() - began > budget_s:
                break
            for side in backends:
                took, out = once(side, document)
                seconds[side] += took
                outputs[side].append(out)
        info = engine.get_server_info()
    steps = info["spec_verify_steps"] - before["spec_verify_steps"]
    emitted = info["spec_emitted_tokens"] - before["spec_emitted_tokens"]
    return {"programs": len(outputs["on"]), "seconds_off": seconds["off"],
            "seconds_on": seconds["on"], "outputs_off": outputs["off"],
            "outputs_on": outputs["on"], "accept_length_mean": emitted / steps if steps else 0.0}


def run_together(s: Scheduler, rid: str, prompts: list[tuple[list[int], GrammarReq | None]],
                 new_tokens: int) -> dict[str, Any]:
    """All ``prompts`` added at once and stepped together on ``s``: outputs and the decode
    rate (tokens emitted after every request has its first token, over that time; wall and
    this process's CPU time: on a shared core the CPU time is the steadier)."""
    for i, (ids, grammar) in enumerate(prompts):
        s.add_request(GenerateReq(rid=f"{rid}-{i}", input_ids=ids, grammar=grammar,
                                  stream=True, sampling=SamplingParams(
                                      temperature=0.0, max_new_tokens=new_tokens)))
    outs: dict[str, list[int]] = {f"{rid}-{i}": [] for i in range(len(prompts))}
    emitted, t0, c0, at_t0 = 0, 0.0, 0.0, 0
    while s.has_work():
        for req in s.waiting:
            if req.grammar_future is not None:
                req.grammar_future.result()
        emitted += apply_outputs(outs, s.step())
        if not t0 and all(outs.values()):
            t0, c0, at_t0 = time.perf_counter(), time.process_time(), emitted
    end, cpu_end = time.perf_counter(), time.process_time()
    tokens = emitted - at_t0
    return {"ids": [outs[k] for k in sorted(outs)], "decode_tokens": tokens,
            "decode_s": end - t0 if t0 else 0.0, "decode_cpu_s": cpu_end - c0 if t0 else 0.0}


def apply_outputs(outs: dict[str, list[int]], step: list[Any]) -> int:
    """A step's outputs applied to ``outs`` (ids by request: rollbacks, then new ids);
    returns the tokens it added."""
    added = 0
    for o in step:
        out = outs[o.rid]
        if o.rollback:
            del out[len(out) - o.rollback:]
        out.extend(o.new_ids)
        added += len(o.new_ids)
    return added


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


def failed_draft_cost(plain: Scheduler, spec: Scheduler, prompt: list[int], new_tokens: int,
                      sizes: tuple[int, ...] = (1, 4, 8), rounds: int = 2
                      ) -> dict[str, float]:
    """What a rejected chain costs: ``spec`` made to propose ``k`` drafts the model never
    takes (a token id it does not write here) every step, its decode rate over plain
    decoding's (``plain``) in CPU time, alternating ``rounds`` times; ``cost_k`` = plain
    rate / forced rate, the step time with ``k`` failed drafts in one-token decode steps."""
    from radixlm.runtime.speculative.draft_chain import SOURCE_PROMPT_LOOKUP, DraftChain

    real = spec.speculator.propose
    rates: dict[str, list[float]] = {"off": []}
    size = [0]

    def propose(req: Any) -> DraftChain:
        chain = DraftChain()
        want = min(size[0], spec.speculator._budget(req))
        chain.extend([3] * max(want, 0), SOURCE_PROMPT_LOOKUP)  # id 3: not in chat text
        return chain

    spec.speculator.propose = propose
    try:
        for r in range(rounds):
            run = run_together(plain, f"cost{r}-off", [(prompt, None)], new_tokens)
            rates["off"].append(run["decode_tokens"] / max(run["decode_cpu_s"], 1e-9))
            for k in sizes:
                size[0] = k
                run = run_together(spec, f"cost{r}-{k}", [(prompt, None)], new_tokens)
                rates.setdefault(f"k{k}", []).append(run["decode_tokens"]
                                                     / max(run["decode_cpu_s"], 1e-9))
    finally:
        spec.speculator.propose = real
    off = sum(rates["off"]) / rounds
    return {"decode_tok_cpu_s_off": off,
            **{f"cost_{k}": off / (sum(v) / rounds) for k, v in rates.items() if k != "off"}}
