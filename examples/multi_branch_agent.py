"""A multi-branch agent: fork one branch per tool to draft a plan with it, let the model
select the most plausible plan, run that tool in Python, and answer with its result."""

from __future__ import annotations

import ast
import operator

from _common import run_example

import radixlm as sgl

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima", "Norway": "Oslo",
            "Portugal": "Lisbon", "Egypt": "Cairo"}
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
        return f"{value(ast.parse(expression, mode='eval').body):g}"
    except (SyntaxError, ValueError, ZeroDivisionError):
        return "error"


def lookup(text: str) -> str:
    found = [f"The capital of {c} is {city}." for c, city in CAPITALS.items() if c in text]
    return " ".join(found) or "nothing found"


TOOLS = {"calculator": calculate, "lookup": lookup}


@sgl.function
def agent(s, task):
    s += "Tools: calculator(expression) computes arithmetic; lookup(text) finds capitals.\n"
    s += "Task: " + task + "\n"
    drafts = s.fork(len(TOOLS))
    drafts += [f"Plan with {name}: call {name}(" for name in TOOLS]
    drafts += sgl.gen("argument", max_tokens=16, stop=[")", "\n"])
    drafts.join()
    plans = [f"{name}({arg.strip()})" for name, arg in zip(TOOLS, s["argument"])]
    s += "Best plan: " + sgl.select("plan", plans) + "\n"
    name, argument = s["plan"].split("(", 1)
    s += "Result: " + TOOLS[name](argument.rstrip(")")) + "\n"
    s += "Answer:" + sgl.gen("answer", max_tokens=16, stop="\n")


def main(backend) -> None:
    for task in ["What is the capital of Japan?", "What is 12 * 7?"]:
        state = agent.run(task, backend=backend, temperature=0)
        print(f"task: {task}\n  plans: {state['argument']}\n  chosen: {state['plan']}\n"
              f"  answer: {state['answer'].strip()}")


if __name__ == "__main__":
    run_example(main, __doc__)
