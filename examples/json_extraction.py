"""JSON extraction from a Pydantic schema over a batch of documents: the schema becomes a
JSON-Schema constraint, so every output validates. The few-shot prefix is shared by the
whole batch (traced and prefilled once). Needs a backend with constrained decoding."""

from __future__ import annotations

import pydantic
from _common import run_example

import radixlm as sgl


class Person(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")  # no keys beyond these four
    name: str = pydantic.Field(max_length=24)
    age: int = pydantic.Field(ge=0, le=130)
    city: str = pydantic.Field(max_length=24)
    job: str = pydantic.Field(max_length=24)


EXAMPLE = ('Document: Heidi is 34 years old and works as a teacher in Paris.\n'
           'JSON: {"name": "Heidi", "age": 34, "city": "Paris", "job": "teacher"}\n')
DOCUMENTS = [
    "Meet Omar, a pilot from Cairo. Omar is 41.",
    "In Oslo there lives a baker named Ines, aged 29.",
    "Kenji is 57 years old and works as a doctor in Tokyo.",
    "Meet Lena, a singer from Lisbon. Lena is 23.",
]


@sgl.function
def extract(s, document):
    s += "Extract the person described in each document as JSON.\n" + EXAMPLE
    s += "Document: " + document + "\nJSON: "
    s += sgl.gen("json", json_schema=Person, max_tokens=128)


def main(backend) -> None:
    states = extract.run_batch([{"document": d} for d in DOCUMENTS], backend=backend,
                               temperature=0, progress_bar=True)
    for doc, state in zip(DOCUMENTS, states):
        if state.error() is not None:
            raise state.error()
        person = Person.model_validate_json(state["json"])
        print(f"{doc}\n  -> {person!r}")


if __name__ == "__main__":
    run_example(main, __doc__)
