"""Streaming to the terminal: run(stream=True) returns at once; text_iter() yields the text
as the model writes it (here: one variable, then the whole program text)."""

from __future__ import annotations

import sys

from _common import run_example

import radixlm as sgl


@sgl.function
def story(s, topic):
    s += sgl.user("Tell me about " + topic + ".")
    s += sgl.assistant(sgl.gen("story", max_tokens=48))


def main(backend) -> None:
    state = story.run("the weather in Oslo", backend=backend, stream=True, temperature=0.8)
    for chunk in state.text_iter("story"):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    print("\n---")
    for chunk in story.run("Lisbon", backend=backend, stream=True).text_iter():
        sys.stdout.write(chunk)
    print()


if __name__ == "__main__":
    run_example(main, __doc__)
