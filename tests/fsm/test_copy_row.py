"""copy_row: the matchers' mask copy into a numpy row (kept under the GIL where it can)."""

from __future__ import annotations

import numpy as np
import pytest

from radixlm.fsm.matcher import copy_row

WORDS = np.arange(-700, 836, dtype=np.int32)  # a 49k vocabulary's 1,536 words, signs mixed


def rows(kind: str) -> np.ndarray:
    if kind == "batch row":
        return np.zeros((3, WORDS.size), dtype=np.int32)[1]
    if kind == "strided":
        return np.zeros((WORDS.size, 2), dtype=np.int32)[:, 0]
    return np.zeros(WORDS.size, dtype=np.int64)  # another dtype: numpy's casting copy


@pytest.mark.parametrize("kind", ["batch row", "strided", "wider dtype"])
def test_the_row_gets_the_words_whatever_its_layout(kind):
    out = rows(kind)
    copy_row(out, WORDS)
    assert out.tolist() == WORDS.tolist()


def test_a_shape_mismatch_is_refused_as_numpy_refuses_it():
    with pytest.raises(ValueError):
        copy_row(np.zeros(WORDS.size + 1, dtype=np.int32), WORDS)
