"""The HTTP router's routing key: shared text prefixes are shared key prefixes; ids and bytes
never collide; a chat keys by its messages in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from radixlm.router.routing_key import ID_OFFSET, routing_key


@given(st.text(), st.text())
def test_a_shared_text_prefix_is_a_shared_key_prefix(a, b):
    key_a = routing_key("/generate", {"text": a})
    key_ab = routing_key("/generate", {"text": a + b})
    assert key_ab[:len(key_a)] == key_a
    assert routing_key("/v1/completions", {"prompt": a + b}) == key_ab


def test_ids_are_keyed_apart_from_bytes_and_a_batch_by_its_first_prompt():
    assert routing_key("/generate", {"input_ids": [65, 66]}) == [ID_OFFSET + 65, ID_OFFSET + 66]
    assert routing_key("/generate", {"text": "AB"}) == [65, 66]
    assert routing_key("/generate", {"text": ["AB", "CD"]}) == [65, 66]
    assert routing_key("/v1/completions", {"prompt": [[1], [2]]}) == [ID_OFFSET + 1]


def test_chats_sharing_their_first_messages_share_a_prefix():
    system = {"role": "system", "content": "Read this document about rivers."}
    one = routing_key("/v1/chat/completions", {"messages": [system]})
    two = routing_key("/v1/chat/completions",
                      {"messages": [system, {"role": "user", "content": [{"type": "text",
                                                                           "text": "Q?"}]}]})
    assert two[:len(one)] == one and len(two) > len(one)


def test_bodies_without_a_prompt_have_an_empty_key():
    for path, body in [("/generate", {}), ("/generate", "text"), ("/v1/chat/completions",
                                                                   {"messages": "hi"})]:
        assert routing_key(path, body) == []
