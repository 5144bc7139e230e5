"""ReAct: a loop of Thought (gen), Action (select among the tools and finish), its argument
(a gen under the tool's regex), and Observation (the tool's result, computed in Python).
Each step resends the growing trajectory, which stays cached. The final answers are graded."""

from __future__ import annotations

from _common import Grades, run_example
from multi_branch_agent import TOOLS

import radixlm as sgl

FINISH = r"[A-Za-z0-9 ]{1,20}\)"  # finish(answer): the regex ends with ")" like the tools'
TOOLS_LINE = ("Tools: calculator(expression) computes arithmetic; lookup(country) finds its "
              "capital;\nfinish(answer) gives the answer.\n\n")
# Worked examples: (question, thought, action, observation); each then finishes with it.
SHOTS = [("What is the capital of Peru?", "I use lookup to find the capital of Peru.",
          "lookup(Peru)", "Lima"),
         ("What is 6 times 7?", "I use the calculator to compute 6 * 7.", "calculator(6 * 7)",
          "42"),
         ("What is the capital of Spain?", "I use lookup to find the capital of Spain.",
          "lookup(Spain)", "Madrid")]
FEW_SHOT = TOOLS_LINE + "".join(
    f"Question: {question}\nThought: {thought}\nAction: {action}\nObservation: {seen}\n"
    f"Thought: The observation is the answer.\nAction: finish({seen})\n\n"
    for question, thought, action, seen in SHOTS)
# (question, the right answer)
QUESTIONS = [("What is the capital of Egypt?", "Cairo"), ("What is 17 plus 25?", "42"),
             ("What is the capital of Portugal?", "Lisbon"), ("What is 9 times 8?", "72")]


@sgl.function
def react(s, question, max_steps=3):
    s += FEW_SHOT + "Question: " + question + "\n"
    for i in range(max_steps):
        s += "Thought:" + sgl.gen(f"thought_{i}", stop="\n", max_tokens=16) + "\n"
        s += "Action: " + sgl.select(f"action_{i}", [*TOOLS, "finish"]) + "("
        action = s[f"action_{i}"]  # Python branches on the model's choice
        regex = FINISH if action == "finish" else TOOLS[action][1]
        s += sgl.gen(f"argument_{i}", regex=regex, max_tokens=12) + "\n"
        argument = s[f"argument_{i}"][:-1]  # without the closing ")"
        if action == "finish":
            s["answer"] = argument
            return
        s += "Observation: " + TOOLS[action][0](argument) + "\n"
    s["answer"] = "(no answer within the step budget)"


def main(backend) -> Grades:
    states = react.run_batch([{"question": q} for q, _ in QUESTIONS], backend=backend,
                             temperature=0)
    grades = Grades()
    for (_, expected), state in zip(QUESTIONS, states):
        print(state.text()[len(FEW_SHOT):].rstrip())
        grades.check("answer", state["answer"], expected)
        print()
    cached = sum(state.cache_stats()["cached_tokens"] for state in states)
    prompt = sum(state.cache_stats()["prompt_tokens"] for state in states)
    print(f"cache: {cached}/{prompt} prompt tokens were cached")
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
