"""Few-shot question answering: a shared few-shot prefix, one gen per question, run as a
batch. The prefix is traced, prefilled once, and every question hits it in the cache. Each
answer is graded against the known one."""

from __future__ import annotations

from _common import Grades, run_example

import radixlm as sgl

EXAMPLES = [("What is the capital of France?", "Paris"), ("Which country is Oslo in?", "Norway"),
            ("What is 12 plus 30?", "42"), ("Is Lima in Peru?", "True")]
FEW_SHOT = "".join(f"Question: {q}\nAnswer: {a}\n" for q, a in EXAMPLES)
# (question, the right answer): the key the answers are graded against.
QUESTIONS = [("What is the capital of Japan?", "Tokyo"), ("Which country is Cairo in?", "Egypt"),
             ("What is 7 plus 8?", "15"), ("Is Rome in Spain?", "False"),
             ("What is the capital of Italy?", "Rome"), ("Which country is Lisbon in?", "Portugal"),
             ("What is 20 plus 5?", "25"), ("Is Paris in France?", "True")]


@sgl.function
def few_shot_qa(s, question):
    s += FEW_SHOT
    s += "Question: " + question + "\nAnswer:" + sgl.gen("answer", stop="\n", max_tokens=8)


def main(backend) -> Grades:
    states = few_shot_qa.run_batch([{"question": q} for q, _ in QUESTIONS], backend=backend,
                                   temperature=0)
    grades = Grades()
    for (question, expected), state in zip(QUESTIONS, states):
        grades.check(question, state["answer"].strip(), expected)
    metas = [state.get_meta_info("answer") for state in states]
    print(f"cache: {sum(m['cached_tokens'] for m in metas)}/"
          f"{sum(m['prompt_tokens'] for m in metas)} prompt tokens were cached (the prefix)")
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
