"""The token trie walk as one compiled loop (numba) over the trie in preorder, resumable where
a DFA row is missing.

The trie's nodes are stored in depth-first preorder
(:class:`~radixlm.fsm.tokens.token_trie.TokenTrie` ``preorder``): a node's subtree is the
contiguous range after it, so the walk reads the node arrays front to back and skips a dead
node's whole subtree with one jump (``skip[i]``, the index past it), keeping only a stack of
DFA states, one per depth. Memory is read sequentially
(5-7 bytes a node), so a dense walk of SmolLM2's 100k nodes costs about what reading them does.
The level-by-level loop it replaced gathered each level's children from all over 8-byte index
arrays (~1.8 ms for a dense 49k walk whose rows were all built, against ~0.3 ms now) and
returned every (token, state) pair, whose de-duplication (``np.unique``) cost another
0.6-3.4 ms. This loop writes the allowed-token bitmask itself and the distinct states the
tokens reach (with one token reaching each), de-duplicated on the caller's ``seen`` flags.

At an inner node whose whole subtree loops at the state before it (its bytes all map that
state to itself: inside a free JSON string, everything but a quote, a backslash, a control
byte or a cut character; :mod:`subtree_summary`, :mod:`state_loops`), the loop sets the
subtree's tokens at once and jumps past it: at Gemma 3's 262k tokens a free string's mask
visits ~31k of the 588k nodes (5.7 -> 1.0 ms CPU on a loaded core). Where nothing loops but
every character moves state k to one same state k + 1 (a bounded string: maxLength, a counted
repetition), it counts instead: the state after a token of the subtree is the chain's state
after as many characters (the counting skip; a bounded string's mask at 262k walked all 588k
nodes, ~4 ms, before it). Where most bytes are live (a string) the walk starts from every
token allowed and clears the refused ones (``preset``), so subtrees taken whole cost nothing
per token; where few are (a key, punctuation) the caller walks only their first bytes'
subtrees (``stop``), not touching the other first-level nodes (cache misses on a cold mask).

It runs without the GIL (``nogil``), so the compiler's worker computing a mask does not hold
the interpreter against the scheduler thread while it walks. Rows of the lazy DFA are built in
Python (derivatives): the loop stops where it is about to descend into a state without a row
(or needs one to answer where a state's characters lead) and returns where to resume and that
state; the caller builds the row and calls again (the stack and outputs are kept in the
arrays passed in).

The loop is also built as plain C (``trie_walk_native.c``, the same loop line for line, built
by ``setup.py`` like the CPU kernels): where that module is built it runs instead of numba's,
so a process never imports numba and llvmlite (~150 MiB of RSS in the scheduler). Tests
compare the C loop, numba's and numpy's walks. The C module also makes a state's whole walk
in one call (:func:`walk_mask`: the preset and first-byte choices from the state's row, the
flags cleared and the successors sorted once done): at 262k tokens a cold key or punctuation
state's walk of a few subtrees cost less than the ~15 numpy calls around it (~2x less per
cold walk, caches flushed before each); numba's loop keeps the Python around it.

On by default where the C module is built or numba imports
(``CompileBudget.native_trie_walk``); numba is an optional dependency (``pip install
radixlm[native]``). Where neither is there, :data:`AVAILABLE` is False and
:class:`~radixlm.fsm.tokens.token_trie.TokenTrie` walks with numpy (the same result: tests
compare both, on real vocabularies too). Without the C module, importing numba and loading
the loop (1-3 s on a loaded 2-core host; the JIT compile, about 1 s more, once per machine:
numba's on-disk cache) happens in :func:`warm`, which
:class:`~radixlm.fsm.grammar_compiler.GrammarCompiler` runs in a thread of its own at
construction; masks computed before it is :func:`ready` use the numpy walk.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable

import numpy as np

from .subtree_summary import UTF8_SEQUENCES

# numba's import and the loop's load cost 1-3 s (more on first use on a machine, when it is
# compiled): paid by warm() in a thread of its own, not by every process importing radixlm.fsm
try:  # the C loop (setup.py builds it; absent without a C compiler)
    from . import trie_walk_native as _c_loop
except ImportError:
    _c_loop = None
AVAILABLE = _c_loop is not None or importlib.util.find_spec("numba") is not None
_compiled: Callable | None = None
_compile_lock = threading.Lock()
_ready = threading.Event()  # set by warm() once the loop is loaded

# the argument dtypes of walk_preorder (one compiled specialisation)
NODE_BYTE, NODE_DEPTH, NODE_INDEX, TOKEN_ID = np.uint8, np.uint16, np.int32, np.int32
CHARS = np.uint16  # characters of a prefix or token (subtree_summary)

# Well-formed UTF-8 multi-byte characters (subtree_summary.UTF8_SEQUENCES) as arrays the
# compiled loop reads: per sequence, (lo, hi) of each byte ([8, 4, 2]) and its length
_SEQ_LENGTHS = np.array([len(seq) for seq in UTF8_SEQUENCES], dtype=np.int64)
_SEQ_RANGES = np.zeros((len(UTF8_SEQUENCES), 4, 2), dtype=np.int64)
for _r, _seq in enumerate(UTF8_SEQUENCES):
    _SEQ_RANGES[_r, : len(_seq)] = _seq
_FRONTIER = 64  # states one byte of the check may reach (more: answered "mixed")


def ready() -> bool:
    """Whether the compiled loop is loaded (:func:`warm` done and it worked): until then
    walks use numpy, so no mask waits for numba."""
    return _ready.is_set()


def walk_preorder(*args: object) -> tuple[int, int, int]:
    """:func:`_walk_preorder` in C where built, else compiled by numba (on first use; cached
    on disk by numba)."""
    if _c_loop is not None:
        return _c_loop.walk_preorder(*args)
    return numba_walk_preorder(*args)


def whole_mask_call() -> bool:
    """Whether :func:`walk_mask` is there (the C module is built): one call per state's mask
    walk instead of Python's choices around :func:`walk_preorder` calls."""
    return _c_loop is not None


def walk_mask(*args: object) -> tuple[int, int, int]:
    """One state's whole mask walk in C (``trie_walk_native.walk_mask``): the arguments of
    :func:`_walk_preorder` up to ``n_succ``, then the first-level roots (int32 [256]: the
    preorder index of each first byte's node, -1 none), every token's bits (uint32, shaped as
    ``words``: the preset), the state, the preset and root-walk live-byte counts
    (:class:`~radixlm.fsm.tokens.token_trie.TokenTrie`'s thresholds) and the looping-byte
    count from which the state is not walked here. It chooses the preset and the ranges from
    the state's row, walks, and once done clears the ``seen`` flags it set and sorts the
    successors by state. Returns (resume index, ``n_succ``, missing row): as
    :func:`_walk_preorder`, the caller builds the missing row (the state's own too) and calls
    again with the resume index; 0 means done, -1 that the state loops on at least that many
    bytes (nothing done). Only where :func:`whole_mask_call`."""
    return _c_loop.walk_mask(*args)


def numba_walk_preorder(*args: object) -> tuple[int, int, int]:
    """:func:`_walk_preorder` compiled by numba (tests compare it with the C loop)."""
    global _compiled
    if _compiled is None:
        with _compile_lock:
            if _compiled is None:
                from numba import njit

                global _utf8_answer  # the loop calls it: compiled first, under its name
                _utf8_answer = njit(cache=True, nogil=True)(_utf8_answer)
                _compiled = njit(cache=True, nogil=True)(_walk_preorder)
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
    if _c_loop is not None:  # nothing to load or compile
        _ready.set()
        return
    index = np.array([1, 1], dtype=NODE_INDEX)  # one node, skip[0] = 1 (past it)
    try:
        walk_preorder(np.zeros((2, 256), dtype=np.int32), np.ones(2, dtype=bool), 0,
                      np.ones(2, dtype=np.int32), np.zeros(1, dtype=NODE_BYTE),
                      np.ones(1, dtype=NODE_DEPTH), index[:1], np.zeros(1, dtype=TOKEN_ID),
                      np.zeros(2, dtype=NODE_INDEX), np.zeros(1, dtype=TOKEN_ID),
                      np.zeros((1, 2), dtype=np.uint64), np.zeros(1, dtype=np.uint8),
                      np.zeros(1, dtype=TOKEN_ID), np.zeros(2, dtype=NODE_INDEX),
                      np.zeros(1, dtype=CHARS), np.ones(1, dtype=CHARS),
                      np.ones(1, dtype=CHARS), np.zeros(1, dtype=CHARS),
                      np.zeros(2, dtype=np.uint8),
                      np.zeros((2, 2), dtype=np.uint64), np.zeros(2, dtype=np.uint8),
                      np.full(2, -1, dtype=np.int32), np.zeros(2, dtype=np.uint8),
                      np.zeros(2, dtype=np.int32), np.zeros((2, 2), dtype=np.uint64),
                      np.zeros((2, 2), dtype=np.uint64), np.zeros(2, dtype=np.int32),
                      np.zeros(2, dtype=np.uint32), np.zeros(2, dtype=np.uint8),
                      np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32), 0, 0, 1)
    except Exception:  # noqa: BLE001 (any failure of the optional loop: fall back)
        logging.getLogger(__name__).warning("numba's trie walk failed to load; masks are "
                                            "computed with numpy", exc_info=True)
        AVAILABLE = False
        return
    _ready.set()


def _walk_preorder(table, built, start, stack, byte, depth, skip, token, extra_off,  # noqa: ANN001, ANN202, C901, PLR0912, PLR0913, PLR0915
                   extra_ids, ascii_bytes, flags, tokens, token_start, chars_before, max_chars,
                   token_chars, wide_chars, loop_known, loop_ascii, loop_utf8, utf8_to,
                   step_known, step_to, step_ascii, dead_ascii, chain, words, seen, succ_states,
                   succ_tokens, n_succ, preset, stop):
    """Walk the preorder nodes from index ``start``; ``stack[d]`` is the DFA state after the
    first ``d`` bytes of the current node's prefix (``stack[0]`` the state walked from, its
    row built).

    ``table`` [S, 256] int32 transitions (0 = dead), ``built`` [S] bool. Per node ``i``:
    ``byte[i]`` its last byte, ``depth[i]`` its prefix length, ``skip[i]`` the index past its
    subtree, ``token[i]`` the token ending there (-1: none; the bit set then is in ``words``'
    last, spare word, which the caller drops), more tokens with the same bytes
    ``extra_ids[extra_off[i]:extra_off[i + 1]]``. Each token reaching a live state sets its
    bit in ``words`` (uint32); each distinct state so reached (flagged in ``seen``, [S] uint8,
    clear on entry but for earlier calls of the same walk and the dead state's flag, set
    here) is appended to ``succ_states`` with that token in ``succ_tokens`` from ``n_succ``.

    Subtree skip (:mod:`subtree_summary`): at an inner node whose subtree loops at the state
    before it (``ascii_bytes[i]`` within the state's looping ASCII bytes ``loop_ascii``,
    filled here where ``loop_known`` is 0, and either no byte >= 0x80 or whole characters
    where ``loop_utf8`` says every character loops: 0 unknown, 1 yes, 2 no, filled here by
    :func:`_utf8_answer`), every token of the subtree
    (``tokens[token_start[i]:token_start[skip[i]]]``) is allowed and leads back to that state.
    (Bitmask rows for the largest subtrees, OR-ed in instead, measured slower at 262k: 57
    rows of 32 KB, cold in the cache, cost more than the bits of their ~155k tokens.)

    Counting skip, where the subtree does not loop: if from the state before the node every
    character of the subtree (its ASCII bytes, and whole multi-byte characters if any) leads
    to one same state, and from there again to one same state, and so on (``chain[j]``: the
    state after ``j`` characters), the state after a token of the subtree depends only on how
    many characters it has from the node on (``token_chars[k] - chars_before[i]``, at most
    ``max_chars[i] - chars_before[i]``): a bounded string, a counted repetition. A chain
    state where every such character dies ends the chain: longer tokens are refused. Per
    state, ``step_to`` is the live successor of the most ASCII bytes (``step_ascii``; the
    bytes to the dead state ``dead_ascii``), filled here where ``step_known`` is 0, and
    ``utf8_to`` the state every multi-byte character leads to (:mod:`state_loops`: -1
    unknown, -2 not one state; filled here with ``loop_utf8``), needed only for the first
    ``wide_chars[i] - chars_before[i]`` chain states (past them the subtree's characters are
    ASCII). A subtree whose characters go elsewhere is walked as usual.

    ``preset`` (int): ``words`` came with every token of the trie set (the caller's choice
    where most bytes are live, as in a string): the walk then clears the refused tokens
    (a dead node's subtree, a counted subtree's tokens too long) instead of setting the
    allowed ones, so a subtree taken whole costs nothing per token (in a free string at 262k
    tokens that was ~1.4 ns for each of ~250k tokens).

    The walk ends before node ``stop`` (``n``: the whole trie; the index past a depth-1 node:
    that node's subtree, so a caller can walk only the live first bytes' subtrees).

    Returns (index to resume at, ``n_succ``, the state whose row is missing there): the caller
    builds that row and calls again with the index, the same stack and outputs; 0 means the
    walk is done. (Where multi-byte characters lead was answered in Python, ~70 us of numpy
    calls a state, most of a cold mask's time in states reached by a few rows.)

    The step is written without branches on the walk's own data where it can be (the next
    index a select, a dead node's bit an OR of 0, the dead state flagged seen): a dense walk
    alternates live and dead nodes unpredictably, and the branchy loop ran ~2x slower.
    """
    n = byte.shape[0]
    spare = 32 * (words.shape[0] - 1)  # a bit of the spare word
    seen[0] = 1  # the dead state is never a successor
    stop = min(stop, n)
    i = start
    while i < stop:
        d = depth[i]
        p = stack[d - 1]
        if skip[i] > i + 1:  # an inner node: its whole subtree may loop at p
            if loop_known[p] == 0:
                lo = np.uint64(0)
                hi = np.uint64(0)
                for b in range(64):
                    lo |= np.uint64(table[p, b] == p) << np.uint64(b)
                    hi |= np.uint64(table[p, b + 64] == p) << np.uint64(b)
                loop_ascii[p, 0] = lo
                loop_ascii[p, 1] = hi
                loop_known[p] = 1
            s0 = ascii_bytes[i, 0]
            s1 = ascii_bytes[i, 1]
            f = flags[i]
            if (s0 & ~loop_ascii[p, 0]) == 0 and (s1 & ~loop_ascii[p, 1]) == 0:
                loops = (f & 1) == 0  # NON_ASCII
                if not loops and (f & 2) != 0:  # WHOLE_CHARS
                    if loop_utf8[p] == 0:
                        missing = _utf8_answer(table, built, p, loop_utf8, utf8_to)
                        if missing:
                            return i, n_succ, missing
                    loops = loop_utf8[p] == 1
                if loops:
                    first, end = token_start[i], token_start[skip[i]]
                    if not preset:
                        for k in range(first, end):
                            tk = tokens[k]
                            words[tk >> 5] |= np.uint32(1) << np.uint32(tk & 31)
                    if seen[p] == 0:
                        seen[p] = 1
                        succ_states[n_succ] = p
                        succ_tokens[n_succ] = tokens[first]
                        n_succ += 1
                    i = skip[i]
                    continue
            wide = (f & 1) != 0
            if not wide or (f & 2) != 0:  # characters can be counted from the node on
                # the chain: chain[j] the state after j characters, live up to ``last``
                span = np.int64(max_chars[i]) - np.int64(chars_before[i])
                wide_span = np.int64(wide_chars[i]) - np.int64(chars_before[i])
                last = span
                chain[0] = p
                q = p
                j = 0
                while j < span:
                    if not built[q]:
                        return i, n_succ, q
                    if step_known[q] == 0:
                        dlo = np.uint64(0)
                        dhi = np.uint64(0)
                        for b in range(64):
                            dlo |= np.uint64(table[q, b] == 0) << np.uint64(b)
                            dhi |= np.uint64(table[q, b + 64] == 0) << np.uint64(b)
                        best = 0
                        count = 0
                        blo = np.uint64(0)
                        bhi = np.uint64(0)
                        tlo = dlo  # ASCII bytes whose target is counted already
                        thi = dhi
                        for b in range(128):
                            word = tlo if b < 64 else thi
                            if ((word >> np.uint64(b & 63)) & np.uint64(1)) == 0:
                                t = table[q, b]
                                clo = np.uint64(0)
                                chi = np.uint64(0)
                                c = 0
                                for b2 in range(b, 128):
                                    if table[q, b2] == t:
                                        c += 1
                                        if b2 < 64:
                                            clo |= np.uint64(1) << np.uint64(b2)
                                        else:
                                            chi |= np.uint64(1) << np.uint64(b2 - 64)
                                tlo |= clo
                                thi |= chi
                                if c > count:
                                    best = t
                                    count = c
                                    blo = clo
                                    bhi = chi
                        step_to[q] = best
                        step_ascii[q, 0] = blo
                        step_ascii[q, 1] = bhi
                        dead_ascii[q, 0] = dlo
                        dead_ascii[q, 1] = dhi
                        step_known[q] = 1
                    to = -1  # the state every character of the subtree leads to (-1: any)
                    if (s0 | s1) != 0:
                        if (s0 & ~step_ascii[q, 0]) == 0 and (s1 & ~step_ascii[q, 1]) == 0:
                            to = step_to[q]
                        elif (s0 & ~dead_ascii[q, 0]) == 0 and (s1 & ~dead_ascii[q, 1]) == 0:
                            to = 0
                        else:
                            break
                    if j < wide_span:
                        if utf8_to[q] == -1:
                            missing = _utf8_answer(table, built, q, loop_utf8, utf8_to)
                            if missing:
                                return i, n_succ, missing
                        u = utf8_to[q]
                        if u < 0 or (to >= 0 and u != to):
                            break
                        to = u
                    if to == 0:  # every character dies here: longer tokens are refused
                        last = j
                        j = span
                        break
                    j += 1
                    chain[j] = to
                    if to == q:  # a fixed point: the rest of the chain is q too
                        while j < span:
                            j += 1
                            chain[j] = q
                    q = to
                if j >= span:  # the chain held: each token's state is chain[its characters]
                    # preset, with no token refused and every chain state listed already,
                    # there is nothing to do per token
                    scan = not preset or last < span
                    for c in range(1, span + 1):
                        if scan:
                            break
                        scan = seen[chain[c]] == 0
                    if scan:
                        base = np.int64(chars_before[i])
                        for k in range(token_start[i], token_start[skip[i]]):
                            c = np.int64(token_chars[k]) - base
                            tk = tokens[k]
                            if c <= last:
                                if not preset:
                                    words[tk >> 5] |= np.uint32(1) << np.uint32(tk & 31)
                                s = chain[c]
                                if seen[s] == 0:
                                    seen[s] = 1
                                    succ_states[n_succ] = s
                                    succ_tokens[n_succ] = tk
                                    n_succ += 1
                            elif preset:
                                words[tk >> 5] &= ~(np.uint32(1) << np.uint32(tk & 31))
                    i = skip[i]
                    continue
        t = table[p, byte[i]]
        stack[d] = t  # harmless at a leaf: no later node reads deeper than its own depth
        tok = token[i]
        real = tok >= 0
        tok = tok if real else spare
        live = t != 0
        if preset:  # a dead node's subtree is refused whole (a live token stays set)
            if not live:
                for k in range(token_start[i], token_start[skip[i]]):
                    tk = tokens[k]
                    words[tk >> 5] &= ~(np.uint32(1) << np.uint32(tk & 31))
        else:
            words[tok >> 5] |= np.uint32(live) << np.uint32(tok & 31)
        nxt = i + 1 if live else skip[i]
        if seen[t] == 0 and real:
            seen[t] = 1
            succ_states[n_succ] = t
            succ_tokens[n_succ] = tok
            n_succ += 1
        if live and not preset and extra_off[i] != extra_off[i + 1]:
            for k in range(extra_off[i], extra_off[i + 1]):
                extra = extra_ids[k]
                words[extra >> 5] |= np.uint32(1) << np.uint32(extra & 31)
        if not built[t] and live and nxt < n and depth[nxt] > d:
            return nxt, n_succ, t  # descending into t next: its row first
        i = nxt
    return stop, n_succ, 0


def _utf8_answer(table, built, q, loop_utf8, utf8_to):  # noqa: ANN001, ANN202, C901, PLR0912
    """Fill ``utf8_to[q]`` (the one state every well-formed multi-byte character leads to from
    ``q``, 0 where all die, -2 where they lead to different states) and ``loop_utf8[q]`` (1:
    that state is ``q``, else 2), as :func:`state_loops.utf8_target` answers, stepping
    ``q`` (its row built) through each sequence of byte ranges. Returns 0, or a state on the
    way whose row is missing (nothing filled: the caller builds it and asks again). More
    than :data:`_FRONTIER` states at one step is answered -2: the skips are then not taken,
    which is always exact."""
    front = np.empty(_FRONTIER, dtype=np.int32)
    reached = np.empty(_FRONTIER, dtype=np.int32)
    target = -3  # none yet
    for r in range(_SEQ_RANGES.shape[0]):
        front[0] = q
        n_front = 1
        final = -3
        for k in range(_SEQ_LENGTHS[r]):
            for a in range(n_front):
                if not built[front[a]]:
                    return front[a]
            n_reached = 0
            died = False
            over = False
            for a in range(n_front):
                for b in range(_SEQ_RANGES[r, k, 0], _SEQ_RANGES[r, k, 1] + 1):
                    t = table[front[a], b]
                    if t == 0:
                        died = True
                        continue
                    known = False
                    for c in range(n_reached):
                        if reached[c] == t:
                            known = True
                            break
                    if not known:
                        if n_reached == _FRONTIER:
                            over = True
                            break
                        reached[n_reached] = t
                        n_reached += 1
                if over:
                    break
            if over or (died and n_reached > 0):  # too many, or some die and some do not
                final = -2
                break
            if n_reached == 0:  # all of them die
                final = 0
                break
            for c in range(n_reached):
                front[c] = reached[c]
            n_front = n_reached
        if final == -3:
            final = front[0] if n_front == 1 else -2
        if final == -2 or (target != -3 and final != target):
            target = -2
            break
        target = final
    utf8_to[q] = target
    loop_utf8[q] = 1 if target == q else 2
    return 0
