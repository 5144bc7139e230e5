"""Program states: fork/join, the ways to append to branches, streaming iterators."""

from __future__ import annotations

import asyncio

import pytest

import radixlm as sgl
from radixlm.lang.errors import ProgramError


def test_fork_prefills_the_shared_text_once_then_branches_diverge(scripted):
    @sgl.function
    def prog(s):
        s += "Shared prefix. "
        forks = s.fork(3)
        forks += lambda i: f"Branch {i}: " + sgl.gen("out")
        forks.join()
        s += "done"

    state = prog.run(backend=scripted)
    assert state.text() == "Shared prefix. done", "branch text is not appended to the parent"
    prefills = [text for kind, text in scripted.calls if kind == "prefill"]
    assert prefills == ["Shared prefix. "]
    gens = sorted(text for kind, text in scripted.calls if kind == "gen")
    assert gens == [f"Shared prefix. Branch {i}: " for i in range(3)]
    assert state["out"] == [f"<{len(g)}>" for g in gens]  # gathered in branch order


@pytest.mark.parametrize(("prefix", "size"), [("", 3), ("text", 1)])
def test_fork_without_text_or_of_one_sends_no_prefill(scripted, prefix, size):
    @sgl.function
    def prog(s):
        s += prefix
        forks = s.fork(size)
        forks += sgl.gen("x")
        forks.join()

    assert len(prog.run(backend=scripted)["x"]) == size
    assert all(kind != "prefill" for kind, _ in scripted.calls)


def test_forks_accept_one_expression_per_branch(scripted):
    @sgl.function
    def prog(s):
        forks = s.fork(2)
        forks += ["a", "bb"]
        forks += "!"
        forks.join(mode="concate_and_append")

    assert prog.run(backend=scripted).text() == "a!bb!"


def test_fork_group_argument_errors(scripted):
    @sgl.function
    def prog(s, what):
        forks = s.fork(2)
        forks += what

    with pytest.raises(ValueError, match="expected 2 items"):
        prog.run(["only one"], backend=scripted)
    with pytest.raises(TypeError, match="forks \\+="):
        prog.run(3.5, backend=scripted)

    @sgl.function
    def empty_fork(s):
        s.fork(0)

    with pytest.raises(ValueError, match="size must be an int >= 1, got 0"):
        empty_fork.run(backend=scripted)


def test_a_failed_branch_fails_the_join(scripted):
    scripted.reply = lambda text, params: (_ for _ in ()).throw(OSError("disk")) \
        if "bad" in text else "ok"

    @sgl.function
    def prog(s):
        forks = s.fork(2)
        forks += ["good", "bad"]
        forks += sgl.gen("x")
        forks.join()

    with pytest.raises(ProgramError, match="fork branch 1 failed: OSError: disk"):
        prog.run(backend=scripted)


def test_copy_is_a_joined_single_branch(scripted):
    @sgl.function
    def prog(s):
        s += "p"
        with s.copy() as c:
            c += sgl.gen("y")
        s += "q"

    state = prog.run(backend=scripted)
    assert state["y"] == ["<1>"] and state.text() == "pq"


@sgl.function
def _streamed(s):
    s += "Q:" + sgl.gen("a") + "|" + sgl.gen("b")


def test_text_iter_streams_the_text_and_a_variable(scripted):
    whole = "".join(_streamed.run(backend=scripted, stream=True).text_iter())
    assert whole == _streamed.run(backend=scripted).text()
    state = _streamed.run(backend=scripted, stream=True)
    chunks = list(state.text_iter("b"))
    assert len(chunks) > 1 and "".join(chunks) == state["b"]


def test_text_iter_on_a_state_that_does_not_stream_yields_once(scripted):
    state = _streamed.run(backend=scripted)
    assert list(state.text_iter()) == [state.text()]
    assert list(state.text_iter("a")) == [state["a"]]


def test_text_async_iter(scripted):
    async def collect():
        state = _streamed.run(backend=scripted, stream=True)
        parts = [p async for p in state.text_async_iter("a", return_meta_data=True)]
        return state, parts

    state, parts = asyncio.run(collect())
    assert "".join(text for text, _ in parts) == state["a"]
    assert all(meta is not None for _, meta in parts)
