"""Streaming to the terminal: run(stream=True) returns at once; text_iter() yields the text
as the model writes it (here: one variable, then the whole program text). The text is
open-ended, so the checks are the stream's own: the chunks joined are the final text."""

from __future__ import annotations

import sys

from _common import Grades, run_example

import radixlm as sgl


@sgl.function
def answer(s, question):
    s += sgl.user(question)
    s += sgl.assistant(sgl.gen("answer", max_tokens=40))


def stream(state, var_name: str | None = None) -> list[str]:
    """Print the chunks of ``var_name`` (or of the whole text) as they come; return them."""
    chunks = []
    for chunk in state.text_iter(var_name):
        sys.stdout.write(chunk)
        sys.stdout.flush()
        chunks.append(chunk)
    print(f"\n--- ({len(chunks)} chunks)")
    return chunks


def main(backend) -> Grades:
    grades = Grades()
    state = answer.run("Describe the city of Oslo in two sentences.", backend=backend,
                       stream=True, temperature=0)
    chunks = stream(state, "answer")
    grades.check("answer chunks joined equal the answer", "".join(chunks) == state["answer"],
                 True)
    state = answer.run("Name three colors.", backend=backend, stream=True, temperature=0)
    chunks = stream(state)  # the whole text: the chat template's markup too
    grades.check("text chunks joined equal the text", "".join(chunks) == state.text(), True)
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
