"""ReAct: a loop of Thought (gen), Action (select among tools), and Observation (the tool's
result, computed in Python). Each step resends the growing trajectory, which stays cached."""

from __future__ import annotations

from _common import run_example
from multi_branch_agent import calculate, lookup

import radixlm as sgl

FEW_SHOT = """Question: What is the capital of Norway plus nothing?
Thought 1: I need the capital of Norway.
Action 1: Search [Norway]
Observation 1: The capital of Norway is Oslo.
Thought 2: I have the answer.
Action 2: Finish [Oslo]

"""
TOOLS = {"Search": lookup, "Calculate": calculate}


@sgl.function
def react(s, question, max_steps=4):
    s += FEW_SHOT + "Question: " + question + "\n"
    for i in range(1, max_steps + 1):
        s += f"Thought {i}:" + sgl.gen(f"thought_{i}", stop="\n", max_tokens=24) + "\n"
        s += f"Action {i}: " + sgl.select(f"action_{i}", ["Search", "Calculate", "Finish"])
        action = s[f"action_{i}"]  # Python branches on the model's choice
        s += " [" + sgl.gen(f"argument_{i}", stop="]", max_tokens=16) + "]\n"
        if action == "Finish":
            s["answer"] = s[f"argument_{i}"]
            return
        s += f"Observation {i}: " + TOOLS[action](s[f"argument_{i}"]) + "\n"
    s["answer"] = "(no answer within the step budget)"


def main(backend) -> None:
    state = react.run("What is the capital of Peru?", backend=backend, temperature=0)
    print(state.text()[len(FEW_SHOT):])
    print("answer:", state["answer"])
    print("cache:", state.cache_stats())


if __name__ == "__main__":
    run_example(main, __doc__)
