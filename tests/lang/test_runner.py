"""``run_batch``: order, failure isolation, threads, and the traced prefix warm-up."""

from __future__ import annotations

import random
import time

import pytest

import radixlm as sgl
from radixlm.lang.runner import resolve_num_threads

FEW_SHOT = "".join(f"Question: What is {i} plus {i}?\nAnswer: {2 * i}\n" for i in range(4))


@sgl.function
def qa(s, question):
    s += FEW_SHOT
    s += "Question: " + question + "\nAnswer:" + sgl.gen("answer")


@pytest.mark.parametrize("num_threads", [1, 4, "auto"])
def test_results_come_back_in_input_order(scripted, num_threads):
    def reply(text, params):
        time.sleep(random.random() / 200)  # finish out of order
        return text.rsplit("Question: ", 1)[1].split("\n")[0]

    scripted.reply = reply
    questions = [f"q{i}" for i in range(12)]
    states = qa.run_batch([{"question": q} for q in questions], backend=scripted,
                          num_threads=num_threads)
    assert [st["answer"] for st in states] == questions


def test_tuples_are_positional_arguments(scripted):
    states = qa.run_batch([("a?",), ("b?",)], backend=scripted)
    assert [st.text().splitlines()[-2] for st in states] == ["Question: a?",
                                                                   "Question: b?"]


def test_one_failing_program_does_not_lose_the_others(scripted):
    @sgl.function
    def fragile(s, i):
        s += f"item {i}: " + sgl.gen("out")
        if i == 2:
            raise ZeroDivisionError("program 2 is broken")

    states = fragile.run_batch([{"i": i} for i in range(5)], backend=scripted,
                               progress_bar=True)
    assert [st.error() is None for st in states] == [True, True, False, True, True]
    assert isinstance(states[2].error(), ZeroDivisionError)
    assert [st["out"] for i, st in enumerate(states) if i != 2] == ["<8>"] * 4


def test_the_constant_prefix_is_traced_and_prefilled_once_before_the_batch(scripted):
    qa.run_batch([{"question": "x?"}, {"question": "y?"}], backend=scripted)
    assert scripted.calls[0] == ("cache_prefix", FEW_SHOT + "Question: ")
    assert sum(kind == "cache_prefix" for kind, _ in scripted.calls) == 1


def test_short_prefixes_and_single_items_are_not_prefilled(scripted):
    @sgl.function
    def short(s, q):
        s += "Q: " + q + sgl.gen("a")

    short.run_batch([{"q": "a"}, {"q": "b"}], backend=scripted)
    qa.run_batch([{"question": "only one"}], backend=scripted)
    assert all(kind != "cache_prefix" for kind, _ in scripted.calls)


@pytest.mark.parametrize(("requested", "size", "threads"), [
    ("auto", 3, 3), ("auto", 1000, 96), (8, 3, 3), (2, 9, 2),
])
def test_thread_count(requested, size, threads, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)  # auto = max(96, 16 x 2)
    assert resolve_num_threads(requested, size) == threads


@pytest.mark.parametrize("bad", [0, -2, "many", 1.5])
def test_bad_thread_count_is_named(bad):
    with pytest.raises(ValueError, match="num_threads"):
        resolve_num_threads(bad, 4)
