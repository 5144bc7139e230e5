"""Multi-turn chat with roles. The roles are rendered with the model's own chat template;
each turn resends the conversation, which the radix cache already holds. Chat answers are
sentences, so the checks are what can be checked: one answer per turn, each turn finding
the conversation so far in the cache, and each answer mentioning the fact asked for."""

from __future__ import annotations

from _common import Grades, run_example

import radixlm as sgl

# (question, the word a right answer mentions)
TURNS = [("What is the capital of France?", "Paris"), ("And the capital of Italy?", "Rome"),
         ("Which country is Lima in?", "Peru")]


@sgl.function
def chat(s, questions):
    s += sgl.system("You are a helpful assistant.")
    for i, question in enumerate(questions):
        s += sgl.user(question)
        s += sgl.assistant(sgl.gen(f"answer_{i}", max_tokens=24))


def main(backend) -> Grades:
    state = chat.run([q for q, _ in TURNS], backend=backend, temperature=0)
    for message in state.messages():
        print(f"{message['role']:>9}: {message['content']}")
    grades = Grades()
    replies = [m for m in state.messages() if m["role"] == "assistant"]
    grades.check("assistant turns", len(replies), len(TURNS))
    metas = [state.get_meta_info(f"answer_{i}") for i in range(len(TURNS))]
    for i in range(1, len(TURNS)):  # turn i's prompt starts with turn i-1's whole prompt
        grades.check(f"turn {i + 1} found turn {i}'s prompt in the cache",
                     metas[i]["cached_tokens"] >= metas[i - 1]["prompt_tokens"], True)
    for i, (_, word) in enumerate(TURNS):
        grades.check(f"answer {i + 1} mentions {word}", word in state[f"answer_{i}"], True)
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
