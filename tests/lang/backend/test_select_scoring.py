"""Where a choice's tokens start: decided by token ids, merged tokens included."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from radixlm.lang.backend.select_scoring import choice_start, common_prefix_len


@pytest.mark.parametrize(("prefix", "full", "start"), [
    ([1, 2, 3], [1, 2, 3, 4, 5], 3),  # clean boundary
    ([1, 2, 3], [1, 2, 9, 5], 2),  # the last prefix token merged into the choice
    ([1, 2, 3], [1, 2, 3], 2),  # a choice always owns at least one token
    ([], [7, 8], 0),
])
def test_choice_start(prefix, full, start):
    assert choice_start(prefix, full) == start


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_len([1], []) == 0


@pytest.mark.parametrize(("prefix", "choice", "first_token"), [
    ("The capital of France is ", "Paris", " Paris"),  # the trailing space merges
    ("Answer:", " True", " True"),
    ("Answer: ", "True", " True"),
])
def test_merged_first_tokens_are_attributed_to_the_choice(tiny_llama_path, prefix, choice,
                                                          first_token):
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    full = tok(prefix + choice).input_ids
    start = choice_start(tok(prefix).input_ids, full)
    assert tok.decode(full[start:start + 1]) == first_token
    choice_text = tok.decode(full[start:])
    assert choice_text.endswith(choice)
    assert prefix.endswith(choice_text[: len(choice_text) - len(choice)])  # merged chars
