"""JSON extraction from a Pydantic schema over a batch of documents: the schema becomes a
JSON-Schema constraint, so every output validates. One worked example (a user turn and the
assistant's JSON) comes before each document in the model's chat template; that shared
prefix is prefilled once for the whole batch. Every field is graded against the document.
Needs a backend with constrained decoding."""

from __future__ import annotations

import pydantic
from _common import Grades, run_example

import radixlm as sgl


class Person(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")  # no keys beyond these four
    name: str = pydantic.Field(max_length=24)
    age: int = pydantic.Field(ge=0, le=130)
    city: str = pydantic.Field(max_length=24)
    job: str = pydantic.Field(max_length=24)


SYSTEM = "Extract the person in the text as JSON with the keys name, age, city and job."
EXAMPLE = ("Heidi is 34 years old and works as a teacher in Paris.",
           '{"name": "Heidi", "age": 34, "city": "Paris", "job": "teacher"}')
# (document, the record it states): the key the outputs are graded against.
CASES = [
    ("Meet Omar, a pilot from Cairo. Omar is 41.",
     Person(name="Omar", age=41, city="Cairo", job="pilot")),
    ("In Oslo there lives a baker named Ines, aged 29.",
     Person(name="Ines", age=29, city="Oslo", job="baker")),
    ("Kenji is 57 years old and works as a doctor in Tokyo.",
     Person(name="Kenji", age=57, city="Tokyo", job="doctor")),
    ("Meet Lena, a singer from Lisbon. Lena is 23.",
     Person(name="Lena", age=23, city="Lisbon", job="singer")),
]


@sgl.function
def extract(s, document):
    s += sgl.system(SYSTEM)
    s += sgl.user(EXAMPLE[0]) + sgl.assistant(EXAMPLE[1])
    s += sgl.user(document)
    s += sgl.assistant(sgl.gen("json", json_schema=Person, max_tokens=96))


def main(backend) -> Grades:
    states = extract.run_batch([{"document": doc} for doc, _ in CASES], backend=backend,
                               temperature=0)
    grades = Grades()
    for (doc, truth), state in zip(CASES, states):
        if state.error() is not None:
            raise state.error()
        print(f"{doc}\n  -> {state['json']}")
        try:  # the constraint makes every finished output valid
            person = Person.model_validate_json(state["json"]).model_dump()
        except pydantic.ValidationError:  # cut off by max_tokens: every field is missing
            person = {}
        for field in Person.model_fields:
            grades.check(f"  {field}", person.get(field), getattr(truth, field))
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
