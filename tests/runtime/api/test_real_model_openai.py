"""JSON extraction on the real model through the OpenAI API: the ``openai`` client against a
live ``radixlm serve --model-path <the .gguf>``, ``response_format`` json_schema; every output
must parse and validate against the schema."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20},
                   "age": {"type": "integer", "minimum": 0, "maximum": 120},
                   "city": {"type": "string", "maxLength": 20}},
    "required": ["name", "age", "city"], "additionalProperties": False,
}
DOCUMENTS = ["Kenji is 57 years old and lives in Tokyo.",
             "Meet Lena, a singer from Lisbon. Lena is 23.",
             "In Lima there lives a farmer named Diego, aged 62."]


@pytest.fixture(scope="module")
def client(real_model, start_server):
    url = start_server("--model-path", str(real_model.gguf), "--quantization", "none",
                       "--max-total-tokens", "4096",
                       env={"RADIXLM_CACHE_DIR": str(real_model.cache_dir)})
    return openai.OpenAI(base_url=url + "/v1", api_key="unused")


def extract(client: openai.OpenAI, document: str) -> str:
    reply = client.chat.completions.create(
        model="default", temperature=0, max_tokens=60,
        messages=[{"role": "system", "content": "Extract the person as JSON."},
                  {"role": "user", "content": document}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": SCHEMA}})
    return reply.choices[0].message.content


def test_every_extraction_is_schema_valid_json(client):
    with ThreadPoolExecutor(len(DOCUMENTS)) as pool:
        outputs = list(pool.map(lambda d: extract(client, d), DOCUMENTS))
    for doc, text in zip(DOCUMENTS, outputs):
        record = json.loads(text)
        jsonschema.validate(record, SCHEMA)
        assert record["name"] in doc or record["city"] in doc, (doc, record)
