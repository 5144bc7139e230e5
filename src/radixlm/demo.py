"""The demo (the README's main job): a program of the language run on the built-in tiny model.

Batch JSON extraction with a fork/select step: for each document the program forks into
three drafts of the JSON record (one greedy, two sampled), joins them, and lets the model
select the draft it scores highest. The few-shot prefix is shared by every document (traced
and prefilled once by ``run_batch``) and the drafts share each document's prompt, so most
prompt tokens come from the radix cache. Prints the records, the cache hit rate and the
throughput.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from . import env
from .lang.api import function, gen, select

INSTRUCTION = "Extract the person in each document as a JSON record.\n"
FEW_SHOT = (
    'Document: Heidi is 34 years old and works as a teacher in Paris.\n'
    'JSON: {"name": "Heidi", "age": 34, "city": "Paris", "job": "teacher"}\n'
    'Document: Meet Omar, a pilot from Cairo. Omar is 41.\n'
    'JSON: {"name": "Omar", "age": 41, "city": "Cairo", "job": "pilot"}\n'
)
DOCUMENTS = [
    "In Oslo there lives a baker named Ines, aged 29.",
    "Kenji is 57 years old and works as a doctor in Tokyo.",
    "Meet Lena, a singer from Lisbon. Lena is 23.",
    "Priya is 45 years old and works as an engineer in Delhi.",
    "In Lima there lives a farmer named Diego, aged 62.",
    "Meet Clara, a nurse from Vienna. Clara is 38.",
    "Hugo is 19 years old and works as a student in Madrid.",
    "In Seoul there lives a chef named Tara, aged 51.",
]
NUM_DRAFTS = 3
PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "city": {"type": "string"}, "job": {"type": "string"}},
    "required": ["name", "age", "city", "job"], "additionalProperties": False,
}


@function
def extract(s, document, schema=None):
    s += INSTRUCTION + FEW_SHOT
    s += "Document: " + document + "\nJSON:"
    drafts = s.fork(NUM_DRAFTS)
    drafts += [gen("draft", max_tokens=48, stop="\n", json_schema=schema,
                   temperature=0.0 if i == 0 else 0.8) for i in range(NUM_DRAFTS)]
    drafts.join()
    candidates = list(dict.fromkeys(d for d in s["draft"] if d.strip())) or [" {}"]
    s += select("record", candidates)


def demo_model_path(args: argparse.Namespace) -> Path:
    """The model the demo runs: ``--model-path`` or the cached built-in tiny model."""
    if args.model_path:
        return Path(args.model_path)
    from .tiny_model import TinyModelSpec, ensure_tiny_model

    spec = TinyModelSpec(arch=args.arch, size=args.size, train_seconds=args.train_seconds,
                         seed=args.seed)
    print(f"building/reusing the built-in tiny model ({spec.cache_name()}) ...", flush=True)
    return ensure_tiny_model(spec, env.cache_dir() / "models")


def _parse(record: str) -> dict[str, Any] | None:
    try:
        value = json.loads(record)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


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


def run_demo(args: argparse.Namespace) -> int:
    import torch

    from .runtime.api.engine import Engine

    torch.set_num_threads(env.num_threads_default())
    path = demo_model_path(args)
    with Engine(model_path=str(path)) as engine:
        schema = json.dumps(PERSON_SCHEMA) if _serves_constraints(engine) else None
        print("drafts are " + ("constrained by a JSON schema" if schema else
                               "unconstrained (this engine build has no constrained decoding)"))
        prompt0, cached0 = _counters(engine)
        start = time.perf_counter()
        states = extract.run_batch([{"document": d, "schema": schema} for d in DOCUMENTS],
                                   backend=engine)
        elapsed = time.perf_counter() - start
        prompt1, cached1 = _counters(engine)
    valid = 0
    for doc, state in zip(DOCUMENTS, states):
        if state.error() is not None:
            print(f"--- {doc}\n    failed: {state.error()}")
            continue
        record = state["record"].strip()
        parsed = _parse(record)
        valid += parsed is not None
        print(f"--- {doc}\n    {record}  ({'valid JSON' if parsed else 'not JSON'}, "
              f"chosen from {len(set(state['draft']))} distinct drafts)")
    stats = [st.cache_stats() for st in states if st.error() is None]
    generated = sum(s["completion_tokens"] for s in stats)
    requests = sum(s["requests"] for s in stats)
    hit = (cached1 - cached0) / max(prompt1 - prompt0, 1)
    print(f"\n{len(DOCUMENTS)} programs ({requests} requests: prefills, {NUM_DRAFTS} drafts and "
          f"a select each), {valid}/{len(DOCUMENTS)} records are valid JSON")
    print(f"cache hit rate: {hit:.0%} of {prompt1 - prompt0} prompt tokens served from the "
          f"radix cache")
    print(f"throughput: {len(DOCUMENTS) / elapsed:.2f} programs/s, {generated / elapsed:.0f} "
          f"generated tok/s ({elapsed:.2f} s)")
    return 0
