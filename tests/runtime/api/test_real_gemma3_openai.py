"""The second real model over HTTP: the ``openai`` client against a live ``radixlm serve
--model-path gemma-3-270m-q4_k_m.gguf`` (the file's own bits, the default), asking for JSON
with ``response_format`` json_schema. Gemma 3 270M is a base model without a chat template, so
the requests go to ``/v1/completions`` with few-shot prompts, ``response_format`` passed in
``extra_body`` as vLLM and SGLang accept it (and SGLang's own ``json_schema`` string); a chat
request is refused with a message that says where to go instead.

Cheap on purpose: one server with a 1,024-token pool, three concurrent requests of at most 64
tokens, one refused chat request.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "city": {"type": "string", "maxLength": 24}},
          "required": ["name", "age", "city"], "additionalProperties": False}
BOOK = {"type": "object",
        "properties": {"title": {"type": "string", "maxLength": 40},
                       "genre": {"enum": ["fiction", "science", "history"]},
                       "tags": {"type": "array", "items": {"type": "string", "maxLength": 16},
                                "minItems": 1, "maxItems": 3}},
        "required": ["title", "genre", "tags"], "additionalProperties": False}
WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 24},
                          "unit": {"enum": ["C", "F"]},
                          "highs": {"type": "array", "items": {"type": "integer", "minimum": -60,
                                                               "maximum": 60},
                                    "maxItems": 4}},
           "required": ["city", "unit", "highs"], "additionalProperties": False}
# (schema, few-shot prompt ending where the JSON starts, how the request carries the schema)
CASES = [
    (PERSON, 'Name: Carol White\nAge: 29\nCity: Rome\nJSON: {"name": "Carol White", "age": 29, '
             '"city": "Rome"}\n\nName: Alice Smith\nAge: 34\nCity: Paris\nJSON: ',
     "response_format"),
    (BOOK, 'Book: Dune, a science fiction novel about desert and spice.\nJSON: {"title": '
           '"Dune", "genre": "fiction", "tags": ["desert", "spice"]}\n\nBook: A Brief History '
           'of Time, a science book about black holes.\nJSON: ', "response_format"),
    (WEATHER, 'Oslo, highs this week 3, 5, 4 degrees Celsius.\nJSON: {"city": "Oslo", "unit": '
              '"C", "highs": [3, 5, 4]}\n\nCairo, highs this week 31, 33, 30 degrees '
              'Celsius.\nJSON: ', "json_schema"),
]
MAX_TOKENS = 64


@pytest.fixture(scope="module")
def client(real_gemma3, start_server) -> openai.OpenAI:
    url = start_server("--model-path", str(real_gemma3.gguf), "--max-total-tokens", "1024",
                       env={"RADIXLM_CACHE_DIR": str(real_gemma3.cache_dir)})
    return openai.OpenAI(base_url=url + "/v1", api_key="unused")


def complete(client: openai.OpenAI, schema: dict, prompt: str, carrier: str) -> str:
    """The completion of ``prompt`` under ``schema``, greedy."""
    extra = ({"response_format": {"type": "json_schema",
                                  "json_schema": {"name": "record", "schema": schema}}}
             if carrier == "response_format" else {"json_schema": json.dumps(schema)})
    reply = client.completions.create(model="default", prompt=prompt, temperature=0,
                                      max_tokens=MAX_TOKENS, extra_body=extra)
    return reply.choices[0].text


def test_completions_answer_schema_valid_json(client):
    with ThreadPoolExecutor(len(CASES)) as pool:
        outputs = list(pool.map(lambda case: complete(client, *case), CASES))
    for (schema, prompt, _), text in zip(CASES, outputs):
        record = json.loads(text)
        jsonschema.validate(record, schema)
        # the few-shot record copies its text from the prompt's last line
        last = prompt.rsplit("\n\n", 1)[1]
        assert any(isinstance(v, str) and v in last for v in record.values()), (text, last)


def test_chat_on_a_base_model_says_where_to_go(client):
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model="default", max_tokens=8,
                                       messages=[{"role": "user", "content": "hi"}])
    assert "no chat template" in str(exc.value) and "/v1/completions" in str(exc.value)
