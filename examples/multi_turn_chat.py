"""Multi-turn chat with roles. The roles are rendered with the model's own chat template;
each turn resends the conversation, which the radix cache already holds."""

from __future__ import annotations

from _common import run_example

import radixlm as sgl


@sgl.function
def chat(s, questions):
    s += sgl.system("You are a helpful assistant.")
    for i, question in enumerate(questions):
        s += sgl.user(question)
        s += sgl.assistant(sgl.gen(f"answer_{i}", max_tokens=32))


def main(backend) -> None:
    questions = ["What is the capital of France?", "Which country is Lima in?",
                 "What is 3 plus 4?"]
    state = chat.run(questions, backend=backend, temperature=0)
    for message in state.messages():
        print(f"{message['role']:>9}: {message['content']}")
    for i in range(len(questions)):
        meta = state.get_meta_info(f"answer_{i}")
        print(f"turn {i}: {meta['cached_tokens']}/{meta['prompt_tokens']} prompt tokens cached")


if __name__ == "__main__":
    run_example(main, __doc__)
