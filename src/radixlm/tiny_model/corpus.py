"""A generated training corpus: English sentences, JSON records, extraction pairs and chats.

Everything is drawn from small word lists with a seeded RNG, so the corpus (and the tokenizer
and model trained on it) is the same on every machine and needs no download. The shapes match
what the demo and tests ask of the model: prose, ``{"name": ..., "age": ...}`` records, a
document followed by its JSON, short question/answer pairs and ChatML conversations.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

NAMES = (
    "Heidi Alice Bob Carol Dave Erin Frank Grace Ivan Judy Mallory Niaj Olivia Peggy Rupert "
    "Sybil Trent Victor Walter Yvonne Zoe Liam Emma Noah Ava Mia Lucas Sofia Leo Nora Hugo "
    "Clara Felix Ines Omar Priya Kenji Amara Diego Lena Marco Ruth Samir Tara Uma Wendy Xavier"
).split()
CITIES = {
    "Paris": "France", "Berlin": "Germany", "Madrid": "Spain", "Rome": "Italy",
    "Lisbon": "Portugal", "Vienna": "Austria", "Oslo": "Norway", "Tokyo": "Japan",
    "Seoul": "Korea", "Cairo": "Egypt", "Lima": "Peru", "Ottawa": "Canada",
    "Dublin": "Ireland", "Athens": "Greece", "Warsaw": "Poland", "Prague": "Czechia",
    "Nairobi": "Kenya", "Delhi": "India", "Bangkok": "Thailand", "Hanoi": "Vietnam",
    "London": "England", "Beijing": "China", "Washington": "America", "Canberra": "Australia",
}
JOBS = ("teacher doctor engineer farmer baker pilot nurse writer painter chef lawyer "
        "student driver singer dancer builder").split()
ANIMALS = "cat dog horse bird fish rabbit fox owl bear wolf mouse goat".split()
COLORS = "red blue green yellow black white orange purple brown gray".split()
FOODS = "bread apples rice soup cheese fish pasta salad cake tea coffee milk".split()
ADJECTIVES = "quiet happy busy small large old young bright calm kind clever brave".split()
VERBS = "reads writes paints cooks sings builds drives teaches visits studies".split()
OBJECTS = "books letters songs houses cars maps poems stories bridges gardens".split()
TOPICS = ("weather", "music", "travel", "food", "sports", "science", "history", "art")
SURNAMES = (
    "Smith Garcia Muller Rossi Silva Kim Tanaka Novak Dubois Jensen Costa Ivanova Nguyen Patel "
    "Okafor Larsen Moreau Schmidt Romano Santos Cohen Haddad Fischer Weber Lopez Martin Bauer"
).split()
DOMAINS = "example.com mail.org post.net inbox.io letters.dev".split()
NOUNS = (
    "window table garden river mountain forest island village market library station harbor "
    "bridge castle tower museum school office kitchen bottle basket ladder mirror pencil "
    "blanket candle camera ticket wallet jacket helmet rocket engine planet comet ocean desert "
    "valley meadow orchard lantern compass anchor violin trumpet guitar piano drum festival "
    "journey lesson answer question problem reason method system result report summary record "
    "signal network server client request response message packet vector matrix number string "
    "object array boolean integer decimal value field schema format pattern template"
).split()
YES_NO = ("True", "False")


def _sentence(rng: random.Random) -> str:
    name, city = rng.choice(NAMES), rng.choice(list(CITIES))
    templates = (
        f"{name} is a {rng.choice(ADJECTIVES)} {rng.choice(JOBS)} who lives in {city}.",
        f"The {rng.choice(COLORS)} {rng.choice(ANIMALS)} sat near the {rng.choice(ADJECTIVES)} "
        f"house in {city}.",
        f"{name} {rng.choice(VERBS)} {rng.choice(OBJECTS)} every morning before work.",
        f"The capital of {CITIES[city]} is {city}.",
        f"In {city}, people like to eat {rng.choice(FOODS)} and drink {rng.choice(FOODS)}.",
        f"{name} has a {rng.choice(COLORS)} {rng.choice(ANIMALS)} that is "
        f"{rng.randint(1, 15)} years old.",
        f"Yesterday {name} went to {city} to see a friend who is a {rng.choice(JOBS)}.",
        f"The weather in {city} was {rng.choice(ADJECTIVES)} and the sky was "
        f"{rng.choice(COLORS)}.",
        f"The {rng.choice(NOUNS)} near the {rng.choice(NOUNS)} holds a {rng.choice(COLORS)} "
        f"{rng.choice(NOUNS)} and {rng.randint(2, 999)} {rng.choice(NOUNS)}s.",
        f"{name} {rng.choice(SURNAMES)} wrote a {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} "
        f"about the {rng.choice(NOUNS)} of {city}.",
    )
    return rng.choice(templates)


def _contact(rng: random.Random) -> dict[str, object]:
    first, last = rng.choice(NAMES), rng.choice(SURNAMES)
    return {
        "name": f"{first} {last}",
        "email": f"{first.lower()}.{last.lower()}@{rng.choice(DOMAINS)}",
        "born": f"{rng.randint(1940, 2020)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "score": round(rng.uniform(0, 100), rng.randint(1, 3)),
        "code": "".join(rng.choice("0123456789abcdef") for _ in range(8)),
        "uuid": "-".join(
            "".join(rng.choice("0123456789abcdef") for _ in range(n)) for n in (8, 4, 4, 4, 12)
        ),
        "ip": ".".join(str(rng.randint(0, 255)) for _ in range(4)),
        "time": f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        "item": rng.choice(NOUNS),
    }


def _record(rng: random.Random) -> dict[str, object]:
    name, city = rng.choice(NAMES), rng.choice(list(CITIES))
    kind = rng.randrange(5)
    if kind == 4:
        return _contact(rng)
    if kind == 0:
        return {"name": name, "age": rng.randint(1, 90), "city": city}
    if kind == 1:
        return {"name": name, "job": rng.choice(JOBS), "country": CITIES[city],
                "active": rng.choice([True, False])}
    if kind == 2:
        return {"id": rng.randint(1, 9999), "pet": rng.choice(ANIMALS),
                "color": rng.choice(COLORS), "tags": rng.sample(ADJECTIVES, rng.randint(0, 3))}
    return {"city": city, "country": CITIES[city], "population": rng.randint(1000, 9000000),
            "topics": rng.sample(TOPICS, rng.randint(1, 3))}


def _extraction(rng: random.Random) -> str:
    name, city, age = rng.choice(NAMES), rng.choice(list(CITIES)), rng.randint(1, 90)
    job = rng.choice(JOBS)
    doc = rng.choice((
        f"{name} is {age} years old and works as a {job} in {city}.",
        f"Meet {name}, a {job} from {city}. {name} is {age}.",
        f"In {city} there lives a {job} named {name}, aged {age}.",
    ))
    record = json.dumps({"name": name, "age": age, "city": city, "job": job})
    return f"Document: {doc}\nJSON: {record}\n"


def _qa(rng: random.Random) -> str:
    city = rng.choice(list(CITIES))
    a, b = rng.randint(1, 50), rng.randint(1, 50)
    pairs = (
        (f"What is the capital of {CITIES[city]}?", city),
        (f"Which country is {city} in?", CITIES[city]),
        (f"What is {a} plus {b}?", str(a + b)),
        (f"Is {city} in {CITIES[city]}?", "True"),
        (f"Is {city} in {CITIES[rng.choice(list(CITIES))]}?", None),
    )
    q, ans = rng.choice(pairs)
    if ans is None:
        other = q.rsplit(" ", 1)[1].rstrip("?")
        ans = "True" if CITIES[city] == other else "False"
    return f"Question: {q}\nAnswer: {ans}\n"


def _chat(rng: random.Random) -> str:
    turns = ["<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"]
    for _ in range(rng.randint(1, 3)):
        turns.append(f"<|im_start|>user\n{_qa(rng).splitlines()[0][10:]}<|im_end|>\n")
        turns.append(f"<|im_start|>assistant\n{_sentence(rng)}<|im_end|>\n")
    return "".join(turns)


def generate_corpus(num_docs: int = 20000, seed: int = 0) -> Iterator[str]:
    """Yield ``num_docs`` short documents of mixed kinds, deterministically from ``seed``."""
    rng = random.Random(seed)
    for _ in range(num_docs):
        kind = rng.random()
        if kind < 0.35:
            yield " ".join(_sentence(rng) for _ in range(rng.randint(1, 4)))
        elif kind < 0.55:
            yield json.dumps(_record(rng), indent=rng.choice([None, None, 2]))
        elif kind < 0.75:
            yield "".join(_extraction(rng) for _ in range(rng.randint(1, 3)))
        elif kind < 0.9:
            yield "".join(_qa(rng) for _ in range(rng.randint(1, 4)))
        else:
            yield _chat(rng)
