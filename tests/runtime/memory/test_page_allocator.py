"""PageAllocator: whatever was freed, in whatever order, ``alloc`` hands out the lowest free
page ids, in increasing order (so a prompt admitted after a flush sits on consecutive slots,
which the shared-prefix attention reads as a view of the pool), and a double free is refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radixlm.runtime.memory.page_allocator import PageAllocator

NUM_PAGES = 40

# A program: ("alloc", n) takes n pages; ("free", k) frees the k-th held block (mod count).
OPS = st.lists(st.tuples(st.sampled_from(["alloc", "free"]), st.integers(0, 12)),
               max_size=40)


@given(OPS)
def test_alloc_hands_out_the_lowest_free_ids_in_order(ops):
    alloc = PageAllocator(NUM_PAGES, page_size=4)
    held: list[list[int]] = []
    for op, arg in ops:
        if op == "free" and held:
            block = held.pop(arg % len(held))
            alloc.free(block[::-1] if arg % 2 else block)  # any order of a block
            continue
        n = min(arg, alloc.num_free_pages)
        free = sorted(set(range(NUM_PAGES)) - {p for b in held for p in b})
        pages = alloc.alloc(n)
        assert pages == free[:n]
        held.append(pages)
    assert alloc.num_free_pages == NUM_PAGES - sum(map(len, held))


def test_a_prompt_after_freeing_everything_gets_consecutive_slots():
    alloc = PageAllocator(64, page_size=1)
    scattered = [alloc.alloc(1) for _ in range(64)]
    for block in scattered[::3] + scattered[1::3] + scattered[2::3]:  # freed out of order
        alloc.free(block)
    slots, _ = alloc.extend_slots([], 48, True)
    assert slots == list(range(48))


def test_double_free_and_over_allocation_are_refused_with_the_numbers():
    alloc = PageAllocator(8, page_size=2)
    pages = alloc.alloc(3)
    alloc.free(pages)
    with pytest.raises(ValueError, match="double free"):
        alloc.free(pages[:1])
    with pytest.raises(RuntimeError, match="requested 9 pages"):
        alloc.alloc(9)
    assert alloc.num_free_pages == 8
