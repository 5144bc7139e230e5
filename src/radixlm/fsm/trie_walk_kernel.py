"""The token trie walk as one compiled loop (numba), resumable where a DFA row is missing.

The loop keeps only the live frontier of each trie level (node, DFA state), so a state that
allows few tokens costs microseconds however large the vocabulary (numpy's level walk touches
every node of a level once most of its parents are alive, and does five whole-array passes
otherwise). Each level is stepped in two passes, the table gather first, without branches, then
the compaction: the gathers are independent loads, so many cache misses are in flight at once
(the transition table is megabytes on hard schemas; one loop that gathered and branched ran a
dense 49k walk in ~10 ms, the two passes in ~1.8 ms, as fast as numpy's gather). It runs
without the GIL (``nogil``), so the compiler's worker computing a mask does not hold the
interpreter against the scheduler thread while it walks. Rows of the lazy DFA are built in
Python (derivatives): the loop stops at the first level that reaches a state without a row and
returns the frontier there with its states that lack one; the caller builds those rows and
calls again, resuming there.

On by default where numba imports (``CompileBudget.native_trie_walk``); numba is an optional
dependency (``pip install radixlm[native]``). Where it cannot be imported, :data:`AVAILABLE` is
False and :class:`~radixlm.fsm.token_trie.TokenTrie` walks with numpy (the same result: tests
compare both, on real vocabularies too). Importing numba and loading the loop (1-3 s on a loaded
2-core host; the JIT compile, about 1 s more, once per machine: numba's on-disk cache) happens
in :func:`warm`, which :class:`~radixlm.fsm.grammar_compiler.GrammarCompiler` runs in a thread
of its own at construction; masks computed before it is :func:`ready` use the numpy walk.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable

import numpy as np

# numba's import and the loop's load cost 1-3 s (more on first use on a machine, when it is
# compiled): paid by warm() in a thread of its own, not by every process importing radixlm.fsm
AVAILABLE = importlib.util.find_spec("numba") is not None
_compiled: Callable | None = None
_compile_lock = threading.Lock()
_ready = threading.Event()  # set by warm() once the loop is loaded


def ready() -> bool:
    """Whether the compiled loop is loaded (:func:`warm` done and it worked): until then
    walks use numpy, so no mask waits for numba."""
    return _ready.is_set()


def walk_levels(*args: object) -> tuple[int, np.ndarray, np.ndarray, int, np.ndarray]:
    """:func:`_walk_levels` compiled (on first use; cached on disk by numba)."""
    global _compiled
    if _compiled is None:
        with _compile_lock:
            if _compiled is None:
                from numba import njit

                _compiled = njit(cache=True, nogil=True)(_walk_levels)
    return _compiled(*args)


def warm() -> None:
    """Import numba and load (or compile) the loop now, for the argument types the walk
    passes; :func:`ready` is True after. A :class:`GrammarCompiler` runs this in a thread
    of its own at construction, so no compile or mask waits for it (they walk with numpy
    meanwhile). A numba that fails here is logged and not used (the numpy walk gives the
    same masks)."""
    global AVAILABLE
    if not AVAILABLE or _ready.is_set():
        return
    i64, i32 = np.zeros(2, dtype=np.int64), np.ones(1, dtype=np.int32)
    try:
        walk_levels(np.zeros((2, 256), dtype=np.int32), np.ones(2, dtype=bool), 1,
                    np.zeros(1, dtype=np.int64), i32, 0, i64, i64, i64, i64, i64, i64,
                    np.zeros(2, dtype=np.int32), 0)
    except Exception:  # noqa: BLE001 (any failure of the optional loop: fall back)
        logging.getLogger(__name__).warning("numba's trie walk failed to load; masks are "
                                            "computed with numpy", exc_info=True)
        AVAILABLE = False
        return
    _ready.set()


def _walk_levels(table, built, d0, nodes, states, depth, byte, child_start,  # noqa: ANN001, ANN202, PLR0913
                 child_count, tok_off, tok_ids, out_ids, out_states, n_out):
    """Walk from level ``d0`` the live frontier of level ``d0 - 1``: ``nodes`` (flat trie node
    indices) in the DFA ``states`` (live, nonzero). Only live nodes are visited, so a state
    that allows few tokens costs a few microseconds however large the vocabulary.

    ``table`` [S, 256] int32 transitions, ``built`` [S] bool; trie arrays are flat over all
    nodes (``child_start``/``child_count``: a node's children as a range of flat indices;
    ``tok_off``/``tok_ids``: the tokens ending at each node, CSR). Tokens reaching a live state
    are appended to ``out_ids``/``out_states`` from ``n_out``.

    Returns (level to resume at, frontier nodes and states there, ``n_out``, the frontier's
    states without a row, distinct and ascending): when some are, the caller builds their
    rows and calls again with what was returned (the filtering done here, not in numpy
    calls in the caller: a dense walk stops at most levels, ~20 us of numpy each).
    """
    d = d0
    none = np.empty(0, dtype=np.int32)
    while d <= depth and nodes.shape[0] > 0:
        total = 0
        n_missing = 0
        for p in range(nodes.shape[0]):
            if not built[states[p]]:
                n_missing += 1
            total += child_count[nodes[p]]
        if n_missing:
            missing = np.empty(n_missing, dtype=np.int32)
            m = 0
            for p in range(nodes.shape[0]):
                if not built[states[p]]:
                    missing[m] = states[p]
                    m += 1
            return d, nodes, states, n_out, np.unique(missing)
        # two passes: the gather first, without branches (its loads independent, so many
        # are in flight at once: the table is megabytes, most loads miss the cache), then
        # the compaction to the live children
        child = np.empty(total, dtype=np.int64)
        target = np.empty(total, dtype=np.int32)
        m = 0
        for p in range(nodes.shape[0]):
            s = states[p]
            first = child_start[nodes[p]]
            for c in range(first, first + child_count[nodes[p]]):
                child[m] = c
                target[m] = table[s, byte[c]]
                m += 1
        nxt_nodes = np.empty(total, dtype=np.int64)
        nxt_states = np.empty(total, dtype=np.int32)
        m = 0
        for j in range(total):
            t = target[j]
            if t != 0:
                c = child[j]
                nxt_nodes[m] = c
                nxt_states[m] = t
                m += 1
                for k in range(tok_off[c], tok_off[c + 1]):
                    out_ids[n_out] = tok_ids[k]
                    out_states[n_out] = t
                    n_out += 1
        nodes, states = nxt_nodes[:m], nxt_states[:m]
        d += 1
    return d, nodes, states, n_out, none
