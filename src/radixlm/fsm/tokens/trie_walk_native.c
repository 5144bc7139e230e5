/* The token trie walk (trie_walk_kernel.py's _walk_preorder) as plain C: the same loop, the
 * same arguments and results, without numba.
 *
 * Why: numba and llvmlite cost ~150 MiB of RSS in the scheduler process (the interpreter's
 * share of LLVM, loaded even when the compiled loop comes from numba's on-disk cache), about
 * as much as the model's weights; this module is ~20 KiB and needs no JIT at start-up.
 *
 * Contract: walk_preorder(...) takes the 34 arguments of _walk_preorder (its docstring says
 * what each holds) and returns the same (resume index, n_succ, missing row state). Arrays are
 * C-contiguous with _walk_preorder's dtypes (checked by item size): table int32 [S, 256],
 * built bool [S], stack int32, byte uint8, depth uint16, skip int32, token int32, extra_off
 * int32, extra_ids int32, ascii_bytes uint64 [N, 2], flags uint8, tokens int32, token_start
 * int32, chars_before uint16, max_chars uint16, token_chars uint16, wide_chars uint16,
 * loop_known uint8 [S], loop_ascii uint64 [S, 2], loop_utf8 uint8 [S], utf8_to int32 [S],
 * step_known uint8 [S], step_to int32 [S], step_ascii uint64 [S, 2], dead_ascii uint64
 * [S, 2], chain int32, words uint32, seen uint8 [S], succ_states int32, succ_tokens int32;
 * n_succ, preset and stop are integers. The loop runs without the GIL, as numba's nogil loop did. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { NARGS = 34, NARGS_MASK = 38, NARRAYS = 30, NON_ASCII = 1, WHOLE_CHARS = 2 };

/* argument position -> item size; positions 2 (start), 31 (n_succ), 32 (preset) and 33
 * (stop) are integers */
static const int ARRAY_POS[NARRAYS] = {0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                       17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30};
static const Py_ssize_t ITEM[NARRAYS] = {4, 1, 4, 1, 2, 4, 4, 4, 4, 8, 1, 4, 4, 2, 2, 2, 2, 1,
                                         8, 1, 4, 1, 4, 8, 8, 4, 4, 1, 4, 4};
/* arrays the loop writes: stack, the per-state answers (loop_known to dead_ascii), chain,
 * words, seen, succ_* */
static const int WRITTEN[NARRAYS] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1,
                                     1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* Well-formed UTF-8 multi-byte characters (subtree_summary.UTF8_SEQUENCES): per sequence,
 * the byte ranges and how many */
static const uint8_t SEQ[8][4][2] = {
    {{0xC2, 0xDF}, {0x80, 0xBF}}, {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
    {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}}, {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
    {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}};
static const int SEQ_LEN[8] = {2, 3, 3, 3, 3, 4, 4, 4};
enum { FRONTIER = 64 }; /* states one byte of the check may reach (more: "mixed", safe) */

typedef struct {
    const int32_t *table; const uint8_t *built; int32_t *stack; const uint8_t *byte;
    const uint16_t *depth; const int32_t *skip, *token, *extra_off, *extra_ids;
    const uint64_t *ascii_bytes; const uint8_t *flags; const int32_t *tokens, *token_start;
    const uint16_t *chars_before, *max_chars, *token_chars, *wide_chars;
    uint8_t *loop_known; uint64_t *loop_ascii; uint8_t *loop_utf8;
    int32_t *utf8_to; uint8_t *step_known; int32_t *step_to; uint64_t *step_ascii,
    *dead_ascii; int32_t *chain; uint32_t *words; uint8_t *seen; int32_t *succ_states,
    *succ_tokens;
    Py_ssize_t n, num_words;
    int preset; /* words came with every token set: clear the refused ones */
} Walk;

/* set / clear the bits of tokens[first:end] */
static void set_bits(const Walk *w, int32_t first, int32_t end) {
    for (int32_t k = first; k < end; k++) {
        const int32_t tk = w->tokens[k];
        w->words[tk >> 5] |= (uint32_t)1 << (tk & 31);
    }
}

static void clear_bits(const Walk *w, int32_t first, int32_t end) {
    for (int32_t k = first; k < end; k++) {
        const int32_t tk = w->tokens[k];
        w->words[tk >> 5] &= ~((uint32_t)1 << (tk & 31));
    }
}

/* _utf8_answer: fill utf8_to[q] (the one state every well-formed multi-byte character leads
 * to, 0 where all die, -2 where they go to different states) and loop_utf8[q] (1: that state
 * is q, else 2); returns 0, or a state on the way whose row is missing (nothing filled) */
static int32_t utf8_answer(const Walk *w, int32_t q) {
    int32_t front[FRONTIER], reached[FRONTIER];
    int32_t target = -3; /* none yet */
    for (int r = 0; r < 8; r++) {
        int n_front = 1, final = -3;
        front[0] = q;
        for (int k = 0; k < SEQ_LEN[r]; k++) {
            for (int a = 0; a < n_front; a++)
                if (!w->built[front[a]]) return front[a];
            int n_reached = 0, died = 0, over = 0;
            for (int a = 0; a < n_front && !over; a++) {
                const int32_t *row = w->table + (int64_t)front[a] * 256;
                for (int b = SEQ[r][k][0]; b <= SEQ[r][k][1]; b++) {
                    const int32_t t = row[b];
                    if (t == 0) { died = 1; continue; }
                    int known = 0;
                    for (int c = 0; c < n_reached; c++)
                        if (reached[c] == t) { known = 1; break; }
                    if (known) continue;
                    if (n_reached == FRONTIER) { over = 1; break; }
                    reached[n_reached++] = t;
                }
            }
            if (over || (died && n_reached > 0)) { final = -2; break; } /* some die, some not */
            if (n_reached == 0) { final = 0; break; } /* all of them die */
            for (int c = 0; c < n_reached; c++) front[c] = reached[c];
            n_front = n_reached;
        }
        if (final == -3) final = n_front == 1 ? front[0] : -2;
        if (final == -2 || (target != -3 && final != target)) { target = -2; break; }
        target = final;
    }
    w->utf8_to[q] = target;
    w->loop_utf8[q] = target == q ? 1 : 2;
    return 0;
}

/* step_to, step_ascii and dead_ascii of state q (its row built): the live successor the most
 * ASCII bytes lead to, those bytes, and the bytes leading to the dead state */
static void fill_step(const Walk *w, int32_t q) {
    const int32_t *row = w->table + (int64_t)q * 256;
    uint64_t dead[2] = {0, 0}, best_bits[2] = {0, 0};
    for (int b = 0; b < 128; b++) dead[b >> 6] |= (uint64_t)(row[b] == 0) << (b & 63);
    uint64_t counted[2] = {dead[0], dead[1]}; /* bytes whose target is counted already */
    int32_t best = 0;
    int count = 0;
    for (int b = 0; b < 128; b++) {
        if ((counted[b >> 6] >> (b & 63)) & 1) continue;
        const int32_t t = row[b];
        uint64_t bits[2] = {0, 0};
        int c = 0;
        for (int b2 = b; b2 < 128; b2++) {
            if (row[b2] == t) {
                c++;
                bits[b2 >> 6] |= (uint64_t)1 << (b2 & 63);
            }
        }
        counted[0] |= bits[0];
        counted[1] |= bits[1];
        if (c > count) {
            best = t; count = c; best_bits[0] = bits[0]; best_bits[1] = bits[1];
        }
    }
    w->step_to[q] = best;
    w->step_ascii[2 * (int64_t)q] = best_bits[0];
    w->step_ascii[2 * (int64_t)q + 1] = best_bits[1];
    w->dead_ascii[2 * (int64_t)q] = dead[0];
    w->dead_ascii[2 * (int64_t)q + 1] = dead[1];
    w->step_known[q] = 1;
}

/* The counting skip at inner node i (the state before it p): fills chain[0..span] and
 * returns the characters up to which its tokens live (>= 0), -1 where the subtree's
 * characters do not lead to one state each step, or -2 after setting out[] to a row the
 * caller must build first. */
static int64_t count_chain(const Walk *w, Py_ssize_t i, int32_t p, Py_ssize_t n_succ,
                           Py_ssize_t out[3]) {
    const uint64_t s0 = w->ascii_bytes[2 * i], s1 = w->ascii_bytes[2 * i + 1];
    const int64_t span = (int64_t)w->max_chars[i] - (int64_t)w->chars_before[i];
    /* past this many characters the subtree's are ASCII: no multi-byte answer needed */
    const int64_t wide_span = (int64_t)w->wide_chars[i] - (int64_t)w->chars_before[i];
    int32_t q = p;
    w->chain[0] = p;
    for (int64_t j = 0; j < span; j++) {
        if (!w->built[q]) {
            out[0] = i; out[1] = n_succ; out[2] = q;
            return -2;
        }
        if (w->step_known[q] == 0) fill_step(w, q);
        int32_t to = -1; /* the state every character of the subtree leads to (-1: any) */
        if ((s0 | s1) != 0) {
            const uint64_t *step = w->step_ascii + 2 * (int64_t)q;
            const uint64_t *dead = w->dead_ascii + 2 * (int64_t)q;
            if ((s0 & ~step[0]) == 0 && (s1 & ~step[1]) == 0) to = w->step_to[q];
            else if ((s0 & ~dead[0]) == 0 && (s1 & ~dead[1]) == 0) to = 0;
            else return -1;
        }
        if (j < wide_span) {
            if (w->utf8_to[q] == -1) {
                const int32_t missing = utf8_answer(w, q);
                if (missing) {
                    out[0] = i; out[1] = n_succ; out[2] = missing;
                    return -2;
                }
            }
            const int32_t u = w->utf8_to[q];
            if (u < 0 || (to >= 0 && u != to)) return -1;
            to = u;
        }
        if (to == 0) return j; /* every character dies here: longer tokens are refused */
        w->chain[j + 1] = to;
        if (to == q) { /* a fixed point: the rest of the chain is q too */
            for (int64_t k = j + 2; k <= span; k++) w->chain[k] = q;
            return span;
        }
        q = to;
    }
    return span;
}

/* The tokens of counted subtree i: those of at most ``last`` characters from i on allowed (set
 * unless preset), each reaching chain[its characters]; the longer ones refused (cleared if
 * preset). Returns n_succ. */
static Py_ssize_t count_tokens(const Walk *w, Py_ssize_t i, int64_t last, Py_ssize_t n_succ) {
    const int64_t base = w->chars_before[i];
    const int32_t first = w->token_start[i], end = w->token_start[w->skip[i]];
    for (int32_t k = first; k < end; k++) {
        const int64_t c = (int64_t)w->token_chars[k] - base;
        const int32_t tk = w->tokens[k];
        if (c > last) {
            if (w->preset) w->words[tk >> 5] &= ~((uint32_t)1 << (tk & 31));
            continue;
        }
        if (!w->preset) w->words[tk >> 5] |= (uint32_t)1 << (tk & 31);
        const int32_t s = w->chain[c];
        if (w->seen[s] == 0) {
            w->seen[s] = 1;
            w->succ_states[n_succ] = s;
            w->succ_tokens[n_succ] = tk;
            n_succ++;
        }
    }
    return n_succ;
}

/* _walk_preorder's loop, line for line; out = (resume, n_succ, missing) */
static void walk(const Walk *w, Py_ssize_t i, Py_ssize_t stop, Py_ssize_t n_succ,
                 Py_ssize_t out[3]) {
    const Py_ssize_t n = w->n;
    const int64_t spare = 32 * (int64_t)(w->num_words - 1); /* a bit of the spare word */
    w->seen[0] = 1; /* the dead state is never a successor */
    if (stop > n) stop = n;
    while (i < stop) {
        const Py_ssize_t d = w->depth[i];
        const int32_t p = w->stack[d - 1];
        if (w->skip[i] > i + 1) { /* an inner node: its whole subtree may loop at p */
            if (w->loop_known[p] == 0) {
                uint64_t lo = 0, hi = 0;
                for (int b = 0; b < 64; b++) {
                    lo |= (uint64_t)(w->table[(int64_t)p * 256 + b] == p) << b;
                    hi |= (uint64_t)(w->table[(int64_t)p * 256 + b + 64] == p) << b;
                }
                w->loop_ascii[2 * (int64_t)p] = lo;
                w->loop_ascii[2 * (int64_t)p + 1] = hi;
                w->loop_known[p] = 1;
            }
            if ((w->ascii_bytes[2 * i] & ~w->loop_ascii[2 * (int64_t)p]) == 0 &&
                (w->ascii_bytes[2 * i + 1] & ~w->loop_ascii[2 * (int64_t)p + 1]) == 0) {
                const uint8_t f = w->flags[i];
                int loops = (f & NON_ASCII) == 0;
                if (!loops && (f & WHOLE_CHARS) != 0) {
                    if (w->loop_utf8[p] == 0) {
                        const int32_t missing = utf8_answer(w, p);
                        if (missing) {
                            out[0] = i; out[1] = n_succ; out[2] = missing;
                            return;
                        }
                    }
                    loops = w->loop_utf8[p] == 1;
                }
                if (loops) {
                    const int32_t first = w->token_start[i], end = w->token_start[w->skip[i]];
                    if (!w->preset) set_bits(w, first, end);
                    if (w->seen[p] == 0) {
                        w->seen[p] = 1;
                        w->succ_states[n_succ] = p;
                        w->succ_tokens[n_succ] = w->tokens[first];
                        n_succ++;
                    }
                    i = w->skip[i];
                    continue;
                }
            }
            const uint8_t f = w->flags[i];
            if ((f & NON_ASCII) == 0 || (f & WHOLE_CHARS) != 0) { /* characters countable */
                const int64_t last = count_chain(w, i, p, n_succ, out);
                if (last == -2) return;
                if (last >= 0) { /* each token's state: chain[its characters from i on] */
                    /* preset, with no token refused and every chain state listed already,
                     * there is nothing to do per token */
                    const int64_t span = (int64_t)w->max_chars[i] - (int64_t)w->chars_before[i];
                    int scan = !w->preset || last < span;
                    for (int64_t c = 1; c <= span && !scan; c++) scan = w->seen[w->chain[c]] == 0;
                    if (scan) n_succ = count_tokens(w, i, last, n_succ);
                    i = w->skip[i];
                    continue;
                }
            }
        }
        const int32_t t = w->table[(int64_t)p * 256 + w->byte[i]];
        w->stack[d] = t; /* harmless at a leaf: no later node reads deeper than its own depth */
        const int32_t tok0 = w->token[i];
        const int real = tok0 >= 0;
        const int64_t tok = real ? tok0 : spare;
        const int live = t != 0;
        if (w->preset) { /* a dead node's subtree is refused whole (a live token stays set) */
            if (!live) clear_bits(w, w->token_start[i], w->token_start[w->skip[i]]);
        } else {
            w->words[tok >> 5] |= (uint32_t)live << (tok & 31);
        }
        const Py_ssize_t nxt = live ? i + 1 : w->skip[i];
        if (w->seen[t] == 0 && real) {
            w->seen[t] = 1;
            w->succ_states[n_succ] = t;
            w->succ_tokens[n_succ] = (int32_t)tok;
            n_succ++;
        }
        if (live && !w->preset && w->extra_off[i] != w->extra_off[i + 1]) {
            for (int32_t k = w->extra_off[i]; k < w->extra_off[i + 1]; k++) {
                const int32_t extra = w->extra_ids[k];
                w->words[extra >> 5] |= (uint32_t)1 << (extra & 31);
            }
        }
        if (!w->built[t] && live && nxt < n && w->depth[nxt] > d) {
            out[0] = nxt; out[1] = n_succ; out[2] = t; /* its row first */
            return;
        }
        i = nxt;
    }
    out[0] = stop; out[1] = n_succ; out[2] = 0;
}

/* Acquire the arrays at walk_preorder's array positions (ARRAY_POS) into views and *w (the
 * scalars and preset left 0); returns 0, or -1 with an exception set and nothing held. */
static int get_walk(PyObject *const *args, const char *name, Py_buffer views[NARRAYS],
                    Walk *w) {
    int got = 0;
    for (; got < NARRAYS; got++) {
        const int flags = PyBUF_C_CONTIGUOUS | (WRITTEN[got] ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[ARRAY_POS[got]], &views[got], flags) < 0) break;
        if (views[got].itemsize != ITEM[got]) {
            PyErr_Format(PyExc_TypeError, "%s: argument %d has items of %zd bytes, expected "
                         "%zd", name, ARRAY_POS[got], views[got].itemsize, ITEM[got]);
            PyBuffer_Release(&views[got]);
            break;
        }
    }
    if (got < NARRAYS) {
        for (int k = 0; k < got; k++) PyBuffer_Release(&views[k]);
        return -1;
    }
    void *b[NARRAYS];
    for (int k = 0; k < NARRAYS; k++) b[k] = views[k].buf;
    const Walk filled = {b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
                         b[11], b[12], b[13], b[14], b[15], b[16], b[17], b[18], b[19], b[20],
                         b[21], b[22], b[23], b[24], b[25], b[26], b[27], b[28], b[29],
                         views[3].len, views[26].len / 4, 0};
    *w = filled;
    return 0;
}

static void release_walk(Py_buffer views[NARRAYS]) {
    for (int k = 0; k < NARRAYS; k++) PyBuffer_Release(&views[k]);
}

static PyObject *py_walk_preorder(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != NARGS) {
        PyErr_Format(PyExc_TypeError, "walk_preorder: expected %d arguments, got %zd", NARGS,
                     nargs);
        return NULL;
    }
    const Py_ssize_t start = PyLong_AsSsize_t(args[2]), n_succ = PyLong_AsSsize_t(args[31]);
    const long preset = PyLong_AsLong(args[32]);
    const Py_ssize_t stop = PyLong_AsSsize_t(args[33]);
    if (PyErr_Occurred()) return NULL;
    if (stop < 0) {
        PyErr_SetString(PyExc_ValueError, "walk_preorder: stop must be >= 0");
        return NULL;
    }
    Py_buffer views[NARRAYS];
    Walk w;
    if (get_walk(args, "walk_preorder", views, &w) < 0) return NULL;
    w.preset = preset != 0;
    Py_ssize_t out[3] = {0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    walk(&w, start, stop, n_succ, out);
    Py_END_ALLOW_THREADS
    release_walk(views);
    return Py_BuildValue("(nnn)", out[0], out[1], out[2]);
}

/* Sift-down of a binary max-heap of (state, token) pairs keyed by state, over [0, n). */
static void sift_down(int32_t *states, int32_t *tokens, Py_ssize_t root, Py_ssize_t n) {
    for (;;) {
        Py_ssize_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && states[child + 1] > states[child]) child++;
        if (states[root] >= states[child]) return;
        const int32_t s = states[root], t = tokens[root];
        states[root] = states[child]; tokens[root] = tokens[child];
        states[child] = s; tokens[child] = t;
        root = child;
    }
}

/* The walk's successors in ascending state order (the states are distinct), in place. */
static void sort_successors(int32_t *states, int32_t *tokens, Py_ssize_t n) {
    for (Py_ssize_t k = n / 2; k-- > 0;) sift_down(states, tokens, k, n);
    for (Py_ssize_t end = n - 1; end > 0; end--) {
        const int32_t s = states[0], t = tokens[0];
        states[0] = states[end]; tokens[0] = tokens[end];
        states[end] = s; tokens[end] = t;
        sift_down(states, tokens, 0, end);
    }
}

/* The whole mask of one state (TokenTrie._walk_native's Python around the loop, here in one
 * call): from the state's row, the preset choice (at least preset_live live bytes, as many
 * printable ASCII ones: every token set first, from all_words) and the ranges (the live first
 * bytes' subtrees, roots[b] the depth-1 node of byte b or -1, where at most root_bytes bytes
 * are live and no preset; else the whole trie); then the walk from ``start`` (a resume index
 * of an earlier call of the same walk, or 0); once done, the seen flags cleared and the
 * successors sorted by state. out = (resume, n_succ, missing): missing > 0 is a row to
 * build first (the state's own where its row is not built yet), -1 says the state loops on
 * at least looping_limit bytes (nothing walked: TokenIndex walks such a state otherwise). */
static void walk_mask(Walk *w, int32_t state, Py_ssize_t start, Py_ssize_t n_succ,
                      const int32_t *roots, const uint32_t *all_words, int preset_live,
                      int root_bytes, int looping_limit, Py_ssize_t out[3]) {
    out[0] = start; out[1] = n_succ; out[2] = 0;
    if (!w->built[state]) {
        out[2] = state;
        return;
    }
    const int32_t *row = w->table + (int64_t)state * 256;
    int looping = 0;
    for (int b = 0; b < 256; b++) looping += row[b] == state;
    if (looping >= looping_limit) { /* not walked here: the caller's choice (nothing done) */
        out[2] = -1;
        return;
    }
    int live = 0, printable = 0;
    for (int b = 0; b < 256; b++) live += row[b] != 0;
    for (int b = 0x20; b < 0x7F; b++) printable += row[b] != 0;
    w->preset = live >= preset_live && printable >= preset_live;
    w->stack[0] = state;
    if (w->preset && start == 0) /* nothing walked yet (a resume at 0 changed no word) */
        memcpy(w->words, all_words, (size_t)w->num_words * sizeof(uint32_t));
    if (w->preset || live > root_bytes) {
        walk(w, start, w->n, n_succ, out);
        if (out[2]) return;
    } else {
        for (int b = 0; b < 256; b++) {
            if (row[b] == 0 || roots[b] < 0) continue;
            const Py_ssize_t first = roots[b], stop = w->skip[first];
            if (stop <= start) continue; /* walked by an earlier call */
            walk(w, first > start ? first : start, stop, n_succ, out);
            if (out[2]) return;
            n_succ = out[1];
        }
        out[0] = w->n; out[1] = n_succ;
    }
    for (Py_ssize_t k = 0; k < out[1]; k++) w->seen[w->succ_states[k]] = 0;
    sort_successors(w->succ_states, w->succ_tokens, out[1]);
}

static PyObject *py_walk_mask(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != NARGS_MASK) {
        PyErr_Format(PyExc_TypeError, "walk_mask: expected %d arguments, got %zd", NARGS_MASK,
                     nargs);
        return NULL;
    }
    const Py_ssize_t start = PyLong_AsSsize_t(args[2]), n_succ = PyLong_AsSsize_t(args[31]);
    const Py_ssize_t state = PyLong_AsSsize_t(args[34]);
    const long preset_live = PyLong_AsLong(args[35]), root_bytes = PyLong_AsLong(args[36]);
    const long looping_limit = PyLong_AsLong(args[37]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer views[NARRAYS], roots, all_words;
    Walk w;
    if (get_walk(args, "walk_mask", views, &w) < 0) return NULL;
    if (PyObject_GetBuffer(args[32], &roots, PyBUF_C_CONTIGUOUS) < 0) {
        release_walk(views);
        return NULL;
    }
    if (PyObject_GetBuffer(args[33], &all_words, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&roots);
        release_walk(views);
        return NULL;
    }
    PyObject *result = NULL;
    const Py_ssize_t rows = views[0].len / (256 * 4);
    if (roots.itemsize != 4 || roots.len != 256 * 4)
        PyErr_SetString(PyExc_TypeError, "walk_mask: roots must be int32 [256]");
    else if (all_words.itemsize != 4 || all_words.len != views[26].len)
        PyErr_SetString(PyExc_TypeError, "walk_mask: all_words must be uint32 shaped as words");
    else if (state < 0 || state >= rows || views[1].len < rows || views[27].len < rows)
        PyErr_Format(PyExc_ValueError, "walk_mask: state %zd is not a state of the "
                     "table (%zd rows), or built / seen are shorter than the table", state,
                     rows);
    else if (start < 0 || start > w.n || n_succ < 0)
        PyErr_SetString(PyExc_ValueError, "walk_mask: start or n_succ out of range");
    else {
        Py_ssize_t out[3] = {0, 0, 0};
        Py_BEGIN_ALLOW_THREADS
        walk_mask(&w, (int32_t)state, start, n_succ, roots.buf, all_words.buf,
                  (int)preset_live, (int)root_bytes,
                  (int)(looping_limit < 257 ? looping_limit : 257), out);
        Py_END_ALLOW_THREADS
        result = Py_BuildValue("(nnn)", out[0], out[1], out[2]);
    }
    PyBuffer_Release(&all_words);
    PyBuffer_Release(&roots);
    release_walk(views);
    return result;
}

static PyMethodDef methods[] = {
    {"walk_preorder", (PyCFunction)(void (*)(void))py_walk_preorder, METH_FASTCALL,
     "The token trie walk over preorder nodes (trie_walk_kernel._walk_preorder in C)."},
    {"walk_mask", (PyCFunction)(void (*)(void))py_walk_mask, METH_FASTCALL,
     "One state's whole mask walk in one call (TokenTrie._walk_native's choices too)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "trie_walk_native", NULL, -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_trie_walk_native(void) { return PyModule_Create(&module); }
