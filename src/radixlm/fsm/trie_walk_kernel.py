"""The token trie walk as one compiled loop (numba), resumable where a DFA row is missing.

numpy walks a trie level with five whole-level passes (gathers, index arithmetic, compares,
temporaries): ~40 ns a node, 4-10 ms a mask on a 49k vocabulary's ~100k nodes. This loop visits
each live node once (a few ns) and runs without the GIL (``nogil``), so the compiler's worker
computing a mask no longer competes with the scheduler thread for the interpreter while it
walks. Rows of the lazy DFA are built in Python (derivatives): the loop stops at the first
level that reaches a state without a row and returns where it stopped; the caller builds the
rows and calls again, resuming there.

Off by default (``CompileBudget.native_trie_walk``), by measurement: walking alone it is ~4x
faster (a 49k mask's walk 4-7 ms -> ~1 ms), but in the engine (benchmarks/json_e2e.py
--scheduler, loaded 2-core host) it made the scheduler's worst own mask wait worse (4.2 vs
0.25 ms) and one compile out of 12 failed its 0.5 s mask budget, which the numpy walk never
did; not understood yet. numba is an optional dependency (``pip install radixlm[native]``);
where it cannot be imported, :data:`AVAILABLE` is False and
:class:`~radixlm.fsm.token_trie.TokenTrie` walks with numpy (the same result: tests compare
both).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable

import numpy as np

# numba's import costs ~0.35 s: paid on the first walk (in the compiler's worker), not by
# every process that imports radixlm.fsm
AVAILABLE = importlib.util.find_spec("numba") is not None
_compiled: Callable | None = None
_compile_lock = threading.Lock()


def walk_levels(*args: object) -> tuple[int, np.ndarray, int, bool]:
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
    passes: the first mask of a process then pays none of it (~0.5 s, more than a mask's
    time budget). The compiler's worker calls this once at start. A numba that fails here
    is logged and not used again (the numpy walk gives the same masks)."""
    global AVAILABLE
    if not AVAILABLE:
        return
    i64 = np.zeros(2, dtype=np.int64)
    try:
        walk_levels(np.zeros((2, 256), dtype=np.int32), np.ones(2, dtype=bool), 1,
                    np.ones(1, dtype=np.int32), 0, i64, i64, i64, i64, i64, i64, i64, i64,
                    np.zeros(2, dtype=np.int32), 0)
    except Exception:  # noqa: BLE001 (any failure of the optional loop: fall back)
        logging.getLogger(__name__).warning("numba's trie walk failed to load; masks are "
                                            "computed with numpy", exc_info=True)
        AVAILABLE = False


def _walk_levels(table, built, d0, cur, depth, level_off, byte, child_start,  # noqa: ANN001, ANN202, PLR0913
                 child_count, end_off, end_node, end_token, out_ids, out_states, n_out):
    """Walk from level ``d0`` (``cur``: DFA state per node of level ``d0 - 1``, 0 dead).

    ``table`` [S, 256] int32 transitions, ``built`` [S] bool; trie arrays flattened over
    levels (``level_off[d]``: first node of level d; ``child_start``/``child_count``
    indexed by a level d-1 node's flat index, children relative to level d; ``end_*``:
    tokens ending at level d are ``end_off[d]:end_off[d + 1]``). Tokens reaching a live
    state are appended to ``out_ids``/``out_states`` from ``n_out``.

    Returns (level to resume at, ``cur`` there, ``n_out``, whether rows are missing):
    when missing, the caller builds the rows of ``cur``'s live states and calls again.
    """
    d = d0
    while d <= depth:
        base = level_off[d - 1]
        alive = False
        for p in range(cur.shape[0]):
            s = cur[p]
            if s != 0:
                alive = True
                if not built[s]:
                    return d, cur, n_out, True
        if not alive:
            break
        size = level_off[d + 1] - level_off[d]
        nxt = np.zeros(size, dtype=np.int32)
        off = level_off[d]
        for p in range(cur.shape[0]):
            s = cur[p]
            if s == 0:
                continue
            first = child_start[base + p]
            for c in range(first, first + child_count[base + p]):
                nxt[c] = table[s, byte[off + c]]
        for k in range(end_off[d], end_off[d + 1]):
            t = nxt[end_node[k]]
            if t != 0:
                out_ids[n_out] = end_token[k]
                out_states[n_out] = t
                n_out += 1
        cur = nxt
        d += 1
    return d, cur, n_out, False
