"""A radix tree over token ids whose nodes hold the KV pool slots of those tokens.

Each edge carries a run of tokens (``key``) and their slots (``value``); with ``page_size > 1``
every edge is a whole number of pages and matching works in pages, so a shared prefix always
covers whole pages and a page is never half shared. Requests pin the path they use with
``lock`` (reference counts up to the root); only unlocked leaves are evicted, least recently
used first, and their pages go back to the allocator. A namespace keeps tenants apart: each has
its own root.

Invariant: every page referenced by a node is owned by the tree alone (not free in the
allocator, not referenced by another node).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from .page_allocator import PageAllocator, pages_of

_ids = itertools.count()


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token lists (binary search over C-level slice
    comparisons: much faster than a Python loop on long prompts)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class TreeNode:
    __slots__ = ("children", "parent", "key", "value", "lock_ref", "last_access", "id")

    def __init__(self, parent: TreeNode | None, key: list[int], value: torch.Tensor) -> None:
        self.children: dict[object, TreeNode] = {}
        self.parent = parent
        self.key = key
        self.value = value  # [len(key)] int64 pool slots
        self.lock_ref = 0
        self.last_access = 0
        self.id = next(_ids)

    def __lt__(self, other: TreeNode) -> bool:  # heap order: least recently used first
        return (self.last_access, self.id) < (other.last_access, other.id)


@dataclass(frozen=True)
class MatchResult:
    slots: torch.Tensor  # [length] slots of the matched prefix
    last_node: TreeNode  # deepest node of the match (lock it to pin the prefix)

    @property
    def length(self) -> int:
        return int(self.slots.shape[0])


class RadixCache:
    """Prefix cache over the paged KV pool."""

    def __init__(self, allocator: PageAllocator, page_size: int) -> None:
        if page_size != allocator.page_size:
            raise ValueError(f"page_size {page_size} != allocator page size "
                             f"{allocator.page_size}")
        self.allocator = allocator
        self.page_size = page_size
        self.roots: dict[str, TreeNode] = {}
        self._clock = itertools.count(1)
        self.evictable_tokens = 0  # tokens in nodes with lock_ref == 0
        self.protected_tokens = 0  # tokens in locked nodes

    # -- lookup and insertion ------------------------------------------------------------

    def _root(self, namespace: str) -> TreeNode:
        root = self.roots.get(namespace)
        if root is None:
            root = TreeNode(None, [], torch.empty(0, dtype=torch.int64))
            root.lock_ref = 1  # the root is never evicted
            self.roots[namespace] = root
        return root

    def _child_key(self, key: Sequence[int]) -> object:
        return key[0] if self.page_size == 1 else tuple(key[: self.page_size])

    def _aligned(self, n: int) -> int:
        return n - n % self.page_size

    def _common(self, a: Sequence[int], b: Sequence[int]) -> int:
        """Length of the common prefix of ``a`` and ``b``, rounded down to whole pages."""
        return self._aligned(common_prefix_len(a, b))

    def match_prefix(self, key: Sequence[int], namespace: str = "") -> MatchResult:
        """Longest cached prefix of ``key`` (whole pages); splits an edge matched part-way."""
        node = self._root(namespace)
        key = list(key[: self._aligned(len(key))])
        values: list[torch.Tensor] = []
        now = next(self._clock)
        while key:
            child = node.children.get(self._child_key(key))
            if child is None:
                break
            n = self._common(child.key, key)
            if n == 0:
                break
            if n < len(child.key):
                child = self._split(child, n)
            child.last_access = now
            values.append(child.value)
            node, key = child, key[n:]
        slots = torch.cat(values) if values else torch.empty(0, dtype=torch.int64)
        return MatchResult(slots, node)

    def insert(self, key: Sequence[int], value: torch.Tensor, namespace: str = "") -> int:
        """Insert ``key`` -> ``value`` (both whole pages); returns how many leading tokens were
        already cached. The caller still owns ``value[:returned]`` and must free the pages of
        it that differ from the tree's; the tree takes ownership of the rest."""
        if len(key) % self.page_size or len(key) != value.shape[0]:
            raise ValueError(f"insert needs whole pages and one slot per token, got "
                             f"{len(key)} tokens, {value.shape[0]} slots, page {self.page_size}")
        node, done, now = self._root(namespace), 0, next(self._clock)
        key = list(key)
        while done < len(key):
            rest = key[done:]
            child = node.children.get(self._child_key(rest))
            if child is None:
                new = TreeNode(node, rest, value[done:].clone())
                new.last_access = now
                node.children[self._child_key(rest)] = new
                self.evictable_tokens += len(rest)
                return done
            n = self._common(child.key, rest)
            if n < len(child.key):
                child = self._split(child, n)
            child.last_access = now
            node, done = child, done + n
        return done

    def _split(self, child: TreeNode, n: int) -> TreeNode:
        """Cut ``child``'s edge after ``n`` tokens; returns the new upper node."""
        upper = TreeNode(child.parent, child.key[:n], child.value[:n])
        upper.lock_ref = child.lock_ref
        upper.last_access = child.last_access
        assert child.parent is not None
        child.parent.children[self._child_key(child.key)] = upper
        child.key, child.value, child.parent = child.key[n:], child.value[n:], upper
        upper.children[self._child_key(child.key)] = child
        return upper

    # -- pinning --------------------------------------------------------------------------

    def lock(self, node: TreeNode) -> None:
        """Pin the path from ``node`` to its root."""
        while node.parent is not None:
            if node.lock_ref == 0:
                self.evictable_tokens -= len(node.key)
                self.protected_tokens += len(node.key)
            node.lock_ref += 1
            node = node.parent

    def unlock(self, node: TreeNode) -> None:
        while node.parent is not None:
            if node.lock_ref <= 0:
                raise RuntimeError("radix cache: unlock of a node that is not locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.protected_tokens -= len(node.key)
                self.evictable_tokens += len(node.key)
            node = node.parent

    # -- eviction -------------------------------------------------------------------------

    def _nodes(self) -> Iterator[TreeNode]:
        stack = list(self.roots.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if node.parent is not None:
                yield node

    def evict(self, num_pages: int) -> int:
        """Free at least ``num_pages`` pages from unlocked leaves, LRU first (fewer if not
        enough are evictable); returns the pages freed."""
        heap = [n for n in self._nodes() if not n.children and n.lock_ref == 0]
        heapq.heapify(heap)
        freed = 0
        while freed < num_pages and heap:
            leaf = heapq.heappop(heap)
            freed += self._free_node(leaf)
            parent = leaf.parent
            if parent is not None and parent.parent is not None and not parent.children \
                    and parent.lock_ref == 0:
                heapq.heappush(heap, parent)
        return freed

    def _free_node(self, node: TreeNode) -> int:
        pages = pages_of(node.value.tolist(), self.page_size)
        self.allocator.free(pages)
        assert node.parent is not None
        del node.parent.children[self._child_key(node.key)]
        self.evictable_tokens -= len(node.key)
        return len(pages)

    def reset(self) -> None:
        """Drop everything; refused while any path is locked (a request is using it)."""
        if self.protected_tokens:
            raise RuntimeError(f"radix cache: {self.protected_tokens} tokens are locked by "
                               f"running requests; cannot flush")
        for node in list(self._nodes()):
            self.allocator.free(pages_of(node.value.tolist(), self.page_size))
        self.roots.clear()
        self.evictable_tokens = 0

    # -- introspection --------------------------------------------------------------------

    @property
    def total_tokens(self) -> int:
        return self.evictable_tokens + self.protected_tokens

    def pages(self) -> list[int]:
        """Every page the tree references (each once, if the invariant holds)."""
        out: list[int] = []
        for node in self._nodes():
            out.extend(pages_of(node.value.tolist(), self.page_size))
        return out
