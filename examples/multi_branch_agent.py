"""A multi-branch agent: fork one branch per tool, where the model writes that tool's
argument under the tool's regex; join; let the model select the most plausible call; then
run the chosen tool in Python (the calculator computes, the model only writes the
expression). Each task's tool choice and answer are graded against the known ones."""

from __future__ import annotations

import ast
import operator

from _common import Grades, run_example

import radixlm as sgl

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima", "Norway": "Oslo",
            "Portugal": "Lisbon", "Egypt": "Cairo", "Italy": "Rome", "Spain": "Madrid"}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv}


def calculate(expression: str) -> str:
    """Arithmetic on numbers only (no eval of arbitrary code)."""
    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError("not arithmetic")

    try:
        result = value(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return "error"
    return str(int(result)) if result == int(result) else str(round(result, 6))


def lookup(country: str) -> str:
    """The capital of a country, from a table."""
    return CAPITALS.get(country, "unknown")


# tool name -> (the Python function, the regex its argument is generated under): numbers
# and operators, or one of the table's countries. The regexes end with the closing
# parenthesis: writing it is how the model says it is done.
TOOLS = {"calculator": (calculate, r"\d+( [-+*/] \d+)*\)"),
         "lookup": (lookup, "(" + "|".join(CAPITALS) + r")\)")}
PROMPT = """Tools: calculator(expression) computes arithmetic; lookup(country) finds its capital.
Task: What is 5 * 6?
Call: calculator(5 * 6)
Task: What is the capital of Peru?
Call: lookup(Peru)
Task: What is 10 minus 4?
Call: calculator(10 - 4)
"""
# (task, the right tool, the right answer)
TASKS = [("What is the capital of Japan?", "lookup", "Tokyo"),
         ("What is 12 * 7?", "calculator", "84"),
         ("What is the capital of Norway?", "lookup", "Oslo"),
         ("What is 45 plus 17?", "calculator", "62")]


@sgl.function
def agent(s, task):
    s += PROMPT + "Task: " + task + "\nCall: "
    drafts = s.fork(len(TOOLS))  # one branch per tool, all sharing the prompt above
    drafts += [name + "(" + sgl.gen("argument", regex=regex, max_tokens=12)
               for name, (_, regex) in TOOLS.items()]
    drafts.join()  # s["argument"] is now the list of the branches' arguments, each with ")"
    calls = [f"{name}({arg}" for name, arg in zip(TOOLS, s["argument"])]
    s += sgl.select("call", calls) + "\n"


def main(backend) -> Grades:
    states = agent.run_batch([{"task": task} for task, _, _ in TASKS], backend=backend,
                             temperature=0)
    grades = Grades()
    for (task, tool, answer), state in zip(TASKS, states):
        name, argument = state["call"].rstrip(")").split("(", 1)
        result = TOOLS[name][0](argument)  # Python does the tool's work
        drafts = ", ".join(f"{n}({a}" for n, a in zip(TOOLS, state["argument"]))
        print(f"{task}\n  drafts: {drafts}\n  chosen: {state['call']} -> {result}")
        grades.check("  tool", name, tool)
        grades.check("  answer", result, answer)
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
