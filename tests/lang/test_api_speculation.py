"""API speculative execution (``num_api_spec_tokens``) on a scripted API backend: the
pattern matcher recovers every gen from a message built from it, gens are answered from
text generated ahead only where that text holds their end, and a mismatch says so."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import radixlm as sgl
from radixlm.lang.api_speculation import _match, _Term
from radixlm.testing.scripted_backend import ScriptedBackend

VALUE = st.text(alphabet="abc XYZ.,-0123", max_size=12)


@given(st.lists(st.tuples(st.text(alphabet="ab:\n", min_size=1, max_size=4)
                          .filter(lambda t: t.startswith("\n")), VALUE), max_size=4))
def test_match_recovers_the_values_of_a_message_built_from_the_pattern(pairs):
    terms, message = [], ""
    for fill, value in pairs:
        terms += [_Term(text=fill), _Term(name="v", stops=["\n"])]
        message += fill + value
    assert _match(terms, message)
    assert [t.text for t in terms if t.stops is not None] == [v for _, v in pairs]


def test_match_fails_where_a_fill_does_not_follow():
    terms = [_Term(text="Name:"), _Term(name="n", stops=["\n"]), _Term(text="\nJob:"),
             _Term(name="j", stops=["\n"])]
    assert not _match(terms, "Name: Ada\nAge: 3")


class SpeculatingBackend(ScriptedBackend):
    """A scripted API backend that honours num_api_spec_tokens."""

    supports_api_speculation = True

    def __init__(self, answer: str, chat: bool) -> None:
        super().__init__(lambda text, params: answer)
        self.is_chat_model = chat


@sgl.function(num_api_spec_tokens=32)
def card(s):
    s += "Name:" + sgl.gen("name", stop="\n") + "\nJob:" + sgl.gen("job", stop="\n")


@sgl.function(num_api_spec_tokens=32)
def chat_card(s):
    s += sgl.user("Card?")
    s += sgl.assistant("Name:" + sgl.gen("name", stop="\n") + "\nJob:"
                       + sgl.gen("job", stop="\n"))


def test_completion_gens_share_one_request():
    backend = SpeculatingBackend(" Ada\nJob: poet\nmore", chat=False)
    state = card.run(backend=backend)
    assert (state["name"], state["job"]) == (" Ada", " poet")
    assert [k for k, _ in backend.calls] == ["gen"]


def test_completion_fill_mismatch_asks_again():
    backend = SpeculatingBackend(" Ada\nAge: 3\n", chat=False)
    state = card.run(backend=backend)
    assert state["name"] == " Ada" and state["job"] == " Ada"  # the script's answer again
    assert [k for k, _ in backend.calls] == ["gen", "gen"]


def test_chat_message_is_one_request_matched_to_the_pattern():
    backend = SpeculatingBackend("Name: Ada\nJob: poet", chat=True)
    state = chat_card.run(backend=backend, temperature=0)
    assert (state["name"], state["job"]) == (" Ada", " poet")
    assert [k for k, _ in backend.calls] == ["gen"]
    assert state.messages()[-1] == {"role": "assistant", "content": "Name: Ada\nJob: poet"}


def test_chat_mismatch_leaves_the_gens_empty_and_says_so():
    backend = SpeculatingBackend("I will not.", chat=True)
    state = chat_card.run(backend=backend, temperature=0)
    assert state["name"] == "" and "did not match" in state.get_meta_info("name")["speculative"]
    assert len(backend.calls) == 1  # greedy: asking again would give the same answer
