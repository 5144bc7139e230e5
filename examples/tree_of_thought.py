"""Tree of thought: fork into 3 plans, each plan into 3 executions (3 + 9 gens), then select
the answer the model scores best. Every branch shares its parent's text through the cache."""

from __future__ import annotations

from _common import run_example

import radixlm as sgl


@sgl.function
def tree_of_thought(s, question):
    s += "Question: " + question + "\n"
    plans = s.fork(3)
    plans += lambda i: f"Plan {i + 1}:" + sgl.gen("plan", max_tokens=16, stop="\n") + "\n"
    # Fork every plan before waiting on any, so all nine executions run concurrently.
    executions = [plan.fork(3) for plan in plans]
    for steps in executions:
        steps += sgl.gen("answer", max_tokens=12, stop="\n")
    answers = []
    for plan, steps in zip(plans, executions):
        steps.join()
        answers += [a.strip() for a in plan["answer"] if a.strip()]
    plans.join()
    candidates = list(dict.fromkeys(answers)) or ["I do not know"]
    s += "Answer: " + sgl.select("final", candidates)


def main(backend) -> None:
    state = tree_of_thought.run("What is the capital of Portugal?", backend=backend,
                                temperature=0.8)
    for i, plan in enumerate(state["plan"]):
        print(f"plan {i + 1}: {plan.strip()}")
    print("final answer:", state["final"])
    print("cache:", state.cache_stats())


if __name__ == "__main__":
    run_example(main, __doc__)
