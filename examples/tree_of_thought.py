"""Tree of thought: fork into 3 plans, each plan into 3 executions (3 + 9 gens), then select
the answer the model scores best. Every branch shares its parent's text through the cache.
The first branch at each level is greedy and the others are sampled, so the tree explores;
the answers are one word (a regex), so the final one can be graded."""

from __future__ import annotations

from _common import Grades, run_example

import radixlm as sgl

FEW_SHOT = """Question: What is the capital of Spain?
Plan: Recall which city is the seat of the Spanish government.
Answer: Madrid

Question: What is the capital of Canada?
Plan: Remember that the largest city is not always the capital.
Answer: Ottawa

"""
WORD = r" [A-Z][a-z]{1,15}\n"  # one capitalized word; the newline says it is done
# (question, the right answer)
QUESTIONS = [("What is the capital of Portugal?", "Lisbon"),
             ("What is the capital of Australia?", "Canberra")]


def sampled(i: int) -> float:
    """Branch i's temperature: the first branch is greedy, the others explore."""
    return 0.0 if i == 0 else 0.8


@sgl.function
def tree_of_thought(s, question):
    s += FEW_SHOT + "Question: " + question + "\n"
    plans = s.fork(3)
    plans += lambda i: "Plan:" + sgl.gen("plan", max_tokens=16, stop="\n",
                                         temperature=sampled(i)) + "\n"
    # Fork every plan before waiting on any, so all nine executions run concurrently.
    executions = [plan.fork(3) for plan in plans]
    for steps in executions:
        steps += lambda j: "Answer:" + sgl.gen("answer", regex=WORD, temperature=sampled(j))
    answers = []
    for plan, steps in zip(plans, executions):
        steps.join()
        answers += [a.strip() for a in plan["answer"]]
    plans.join()
    s["candidates"] = list(dict.fromkeys(answers))  # distinct, in order
    s += "Answer: " + sgl.select("final", s["candidates"])


def main(backend) -> Grades:
    states = tree_of_thought.run_batch([{"question": q} for q, _ in QUESTIONS],
                                       backend=backend)
    grades = Grades()
    for (question, expected), state in zip(QUESTIONS, states):
        print(question)
        for i, plan in enumerate(state["plan"]):
            print(f"  plan {i + 1}: {plan.strip()}")
        print(f"  candidates: {', '.join(state['candidates'])}")
        grades.check("  final answer", state["final"], expected)
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
