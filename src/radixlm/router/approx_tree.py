"""An approximate picture of each replica's prefix cache: the token ids recently routed to it.

One trie over token ids; each node records, per replica, when a request through that node was
last routed there. :meth:`match` walks a request's ids and returns each replica's deepest hit.
It is approximate by design: the replica's own radix cache may have evicted what the router
still remembers (or, for a replica that restarted, hold nothing). :meth:`evict` forgets the
least recently used leaf entries until at most ``max_entries`` (node, replica) marks remain.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

Replica = Hashable


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    seen: dict[Replica, int] = field(default_factory=dict)  # replica -> last routing tick
    parent: _Node | None = None
    token: int = -1


class ApproxPrefixTree:
    """Invariant: a replica marked on a node is marked on all its ancestors (eviction removes
    only marks that no child carries), and ``entries`` counts all marks."""

    def __init__(self) -> None:
        self.root = _Node()
        self.entries = 0
        self.size_of: dict[Replica, int] = {}  # marks per replica ("tree size")
        self._tick = 0

    def insert(self, tokens: Sequence[int], replica: Replica) -> None:
        """Record that ``tokens`` were routed to ``replica``."""
        self._tick += 1
        node = self.root
        for t in tokens:
            child = node.children.get(t)
            if child is None:
                child = node.children[t] = _Node(parent=node, token=t)
            node = child
            if replica not in node.seen:
                self.entries += 1
                self.size_of[replica] = self.size_of.get(replica, 0) + 1
            node.seen[replica] = self._tick

    def match(self, tokens: Sequence[int]) -> dict[Replica, int]:
        """Each replica's longest routed prefix of ``tokens`` (replicas with none omitted)."""
        best: dict[Replica, int] = {}
        node = self.root
        for depth, t in enumerate(tokens, 1):
            node = node.children.get(t)
            if node is None:
                break
            for r in node.seen:
                best[r] = depth
        return best

    def remove_replica(self, replica: Replica) -> None:
        """Forget everything routed to ``replica`` (it left the rotation)."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.seen.pop(replica, None) is not None:
                self.entries -= 1
            stack.extend(node.children.values())
        self.size_of.pop(replica, None)
        self._prune(self.root)

    def evict(self, max_entries: int) -> None:
        """Drop least recently routed leaf marks until ``entries <= max_entries``."""
        if self.entries <= max_entries:
            return
        heap = [(tick, id(n), n, r) for n, r, tick in self._leaf_marks(self.root)]
        heapq.heapify(heap)
        while self.entries > max_entries and heap:
            tick, _, node, r = heapq.heappop(heap)
            if node.seen.get(r) != tick or any(r in c.seen for c in node.children.values()):
                continue  # stale (re-marked or no longer a leaf mark)
            del node.seen[r]
            self.entries -= 1
            self.size_of[r] -= 1
            parent = node.parent
            if parent is not None and parent is not self.root and r in parent.seen and not any(
                    r in c.seen for c in parent.children.values()):
                heapq.heappush(heap, (parent.seen[r], id(parent), parent, r))
            if not node.seen and not node.children and parent is not None:
                del parent.children[node.token]

    def _leaf_marks(self, root: _Node) -> list[tuple[_Node, Replica, int]]:
        out = []
        stack = [root]
        while stack:
            node = stack.pop()
            for r, tick in node.seen.items():
                if not any(r in c.seen for c in node.children.values()):
                    out.append((node, r, tick))
            stack.extend(node.children.values())
        return out

    def _prune(self, node: _Node) -> None:
        for token, child in list(node.children.items()):
            self._prune(child)
            if not child.seen and not child.children:
                del node.children[token]
