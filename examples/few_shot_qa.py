"""Few-shot question answering: a shared few-shot prefix, one gen per question, run as a
batch. The prefix is traced, prefilled once, and every question hits it in the cache."""

from __future__ import annotations

from _common import run_example

import radixlm as sgl

EXAMPLES = [("What is the capital of France?", "Paris"), ("Which country is Oslo in?", "Norway"),
            ("What is 12 plus 30?", "42"), ("Is Lima in Peru?", "True")]
FEW_SHOT = "".join(f"Question: {q}\nAnswer: {a}\n" for q, a in EXAMPLES)


@sgl.function
def few_shot_qa(s, question):
    s += FEW_SHOT
    s += "Question: " + question + "\nAnswer:" + sgl.gen("answer", stop="\n", max_tokens=16)


def main(backend) -> None:
    questions = ["What is the capital of Japan?", "Which country is Cairo in?",
                 "What is 7 plus 8?", "Is Rome in Spain?"]
    states = few_shot_qa.run_batch([{"question": q} for q in questions], backend=backend,
                                   temperature=0)
    for q, state in zip(questions, states):
        meta = state.get_meta_info("answer")
        print(f"{q:35} -> {state['answer'].strip():10} (cached {meta['cached_tokens']}/"
              f"{meta['prompt_tokens']} prompt tokens)")


if __name__ == "__main__":
    run_example(main, __doc__)
