"""The real Gemma 3 270M base (Q4_K_M GGUF) served by radixlm equals transformers'
``from_pretrained(folder, gguf_file=...)`` on the same file: prefill logits within 1e-4 of the
logit scale and 16 greedy tokens on eight few-shot record prompts; through the Engine, a radix
cache hit gives the cold run's tokens and a json_schema request gives valid JSON (a base model:
no chat template); generation stops on the tokens transformers stops on (``<eos>`` only).

Affordable on purpose: the file converts once per session, each model loads once, one thread;
the runners fix ``cpu_gemm="torch"`` (the load-time GEMM measurement over the 262,144-row LM
head takes a minute on its own; what it would pick does not change the numbers checked).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from radixlm.runtime.api.engine import Engine
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.scheduling.finish_check import eos_ids_of
from radixlm.testing.greedy import greedy_generate
from radixlm.testing.prefill_oracle import TOL, assert_prefill_matches_hf, hf_greedy_tokens

SHOT = 'Name: Carol White\nAge: 29\nCity: Rome\nJSON: {"name": "Carol White", "age": 29, ' \
       '"city": "Rome"}\n\n'
PEOPLE = [("Alice Smith", 34, "Paris"), ("Bob Jones", 51, "Berlin"), ("Dan Brown", 42, "Oslo"),
          ("Eve Adams", 27, "Madrid"), ("Frank Li", 63, "Tokyo"), ("Grace Kim", 38, "Seoul"),
          ("Heidi Park", 6, "Lima"), ("Ivan Petrov", 45, "Kyiv")]
PROMPTS = [f'{SHOT}Name: {n}\nAge: {a}\nCity: {c}\nJSON: {{"name": "' for n, a, c in PEOPLE]
NEW_TOKENS = 16
EOS = 1  # <eos>; the base model's only end token
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"},
                                           "city": {"type": "string"}},
          "required": ["name", "age", "city"], "additionalProperties": False}


@pytest.fixture(scope="module")
def gemma3(real_gemma3) -> tuple[Path, Path]:  # noqa: ANN001
    """(the GGUF, its conversion), or a skip naming the package that installs the file."""
    return real_gemma3.gguf, real_gemma3.folder


@pytest.fixture(scope="module")
def hf(gemma3):  # noqa: ANN001, ANN201
    """The oracle: transformers' own reading of the file, float32."""
    from transformers import AutoModelForCausalLM

    path, _ = gemma3
    return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def prompts(gemma3) -> list[list[int]]:
    """The prompts as transformers' GGUF tokenizer encodes them (our conversion agrees)."""
    from transformers import AutoTokenizer

    path, folder = gemma3
    ref = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ours = AutoTokenizer.from_pretrained(folder)
    ids = [ref(p).input_ids for p in PROMPTS]
    assert [ours(p).input_ids for p in PROMPTS] == ids
    return ids


@pytest.fixture(scope="module")
def runner(gemma3) -> ModelRunner:
    _, folder = gemma3
    return ModelRunner(folder, RunnerConfig(page_size=16, max_total_tokens=2048,
                                            cpu_gemm="torch"))


@pytest.fixture(scope="module")
def hf_greedy(hf, prompts) -> list[list[int]]:
    return hf_greedy_tokens(hf, prompts, NEW_TOKENS, eos_token_id=EOS, pad_token_id=0)


def test_the_file_is_gemma3_270m(runner):
    cfg = runner.model_config
    assert (cfg.model_type, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim,
            cfg.vocab_size) == ("gemma3_text", 18, 4, 1, 256, 262_144)
    assert cfg.sliding_windows == ((512,) * 5 + (0,)) * 3


def test_prefill_logits_match_transformers(runner, hf, prompts):
    assert_prefill_matches_hf(runner, hf, prompts, TOL, min_std=1.0)


def test_greedy_tokens_match_transformers(runner, prompts, hf_greedy):
    ours = greedy_generate(runner, prompts, NEW_TOKENS, stop_token_ids=[EOS])
    assert ours == hf_greedy
    assert all(len(set(out)) > 3 for out in ours), "the model must say something"


def test_stop_tokens_are_transformers(gemma3, runner, hf):
    """Generation ends where transformers' own load of the file ends it. For a ``gguf_file``
    transformers reads no generation_config.json: its generation config comes from the
    file's config alone (``eos_token_id`` 1, ``<eos>``), so ``<end_of_turn>`` (106, the turn
    marker of the instruction-tuned Gemma 3) does not end a generation of this base model."""
    from transformers import AutoTokenizer

    _, folder = gemma3
    ours = eos_ids_of(runner.model_config.eos_token_ids, AutoTokenizer.from_pretrained(folder))
    theirs = hf.generation_config.eos_token_id
    assert sorted(ours) == sorted(theirs if isinstance(theirs, list) else [theirs]) == [EOS]


def test_engine_cache_hit_and_json_schema(gemma3, prompts, hf_greedy):
    """Cold then warm (the shared few-shot prefix, then the whole prompt, cached): the
    oracle's tokens; a json_schema request without a chat template parses and validates."""
    greedy = {"temperature": 0, "max_new_tokens": NEW_TOKENS}
    _, folder = gemma3
    with Engine(model_path=str(folder), page_size=16, max_total_tokens=4096,
                cpu_gemm="torch") as engine:
        assert not getattr(engine.tokenizer, "chat_template", None)
        assert engine.info["eos_token_ids"] == [EOS]  # the scheduler's stop set: as above
        cold = engine.generate(input_ids=prompts[:2], sampling_params=greedy)
        warm = engine.generate(input_ids=prompts[:2], sampling_params=greedy)
        schema = {**greedy, "max_new_tokens": 48, "json_schema": json.dumps(SCHEMA)}
        record = engine.generate(PROMPTS[0].rsplit("JSON: ", 1)[0] + "JSON: ", schema)
    assert [o["output_ids"] for o in cold] == [o["output_ids"] for o in warm] == hf_greedy[:2]
    assert all(o["meta_info"]["cached_tokens"] >= len(p) - 16 for o, p in zip(warm, prompts))
    parsed = json.loads(record["text"])
    assert set(parsed) == {"name", "age", "city"} and isinstance(parsed["age"], int)
