/* Attention kernels on AVX-512, float32: one C file for the family (they share e^x).
 *
 * 1. prefix_attention: many query rows over one run of keys, as flash attention (the keys
 *    in blocks of 64, a running max and sum per row, the scores never leave the core's
 *    registers and a 1 KiB row buffer): a group's shared prefix in the cascade decode (every
 *    question's query heads of one KV head against the document's keys), and a prefill's
 *    causal part (each row's keys cut at its own position).
 * 2. decode_attention: each request's query heads over its own keys, read from the paged
 *    pool by slot (a decode step), one KV head's group of query heads at a time
 *    (avx512_attention_decode.h).
 *
 * Why: torch's fused CPU kernel ran this shape (3 KV heads x 96 rows x 1,552 keys x 64) at
 * ~80 GFLOP/s, 1.45 ms a layer, ~45% of a 32-question decode step of shared-prefix RAG. Here
 * both products are register-blocked for 6 rows x 64 keys (scores) and 6 rows x 64 dims
 * (values): 24 accumulators, 4 vector loads and 6 broadcasts per 24 FMAs, with each block of
 * keys transposed once for all rows. It runs near the core's FMA rate, so the causal case
 * saves work instead: a row block skips the key blocks past its last row and, on the
 * diagonal, computes only the chunks of 16 keys its rows see (Gemma 3's 128-token prefill,
 * 4 x 128 rows of 256 over <= 128 keys: 0.54 -> 0.39 ms a layer, ~1.5x -> ~1.1x the
 * causal triangle's multiply-adds). The rows go in chunks of 48 KiB (L2 with their keys).
 *
 * Numbers: scores q.k summed over the head dimension in order with FMAs, then scaled; e^x
 * is a degree-7 polynomial after range reduction (exp512, ~2 ulp); the sums of each row
 * run over blocks of 64 keys. The result differs from the float32 matmul reference by
 * rounding (~1e-6 relative, tested).
 *
 * Shapes (1): rows as row_layout says: q [Hkv, R, D] (the cascade's), or a prefill's own
 * [n, Hq, D] read and written in place; key j of head h at k + j * row_stride + h *
 * head_stride (a view of the paged pool [L, Hkv, D]) or at k + slots[j] * row_stride + h *
 * head_stride (the pool read by slot, no gathered copy), v alike; out normalized over these
 * keys and lse [Hkv, R] their log-sum-exp (no key: out 0, lse -inf). D is 64, 128 or 256
 * (Gemma 3); decode_attention takes 64 or 128.
 * radixlm.kernels.cpu.avx512_attention checks shapes and dtypes and falls back to torch. */
#include "radixlm_native.h"

#define KB 64 /* keys per block: 4 zmm of scores per row */

#if HAVE_X86
#define TARGET __attribute__((target("avx512f")))
#include "avx512_exp.h"

/* A 16 x 16 tile in registers transposed: r[i] lane c becomes r[c] lane i (unpacks within
 * 128-bit lanes, then 4 x 4 blocks of lanes across registers: 64 shuffles for 256 floats). */
INLINE TARGET void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* u[i + c], lane L: column 4L + c of rows i .. i + 3 */
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 16; i += 8) /* lanes {0, 2} and {1, 3} of rows i .. i + 7 */
        for (int c = 0; c < 4; c++) {
            t[i + c] = _mm512_shuffle_f32x4(u[i + c], u[i + 4 + c], 0x88);
            t[i + 4 + c] = _mm512_shuffle_f32x4(u[i + c], u[i + 4 + c], 0xDD);
        }
    for (int c = 0; c < 8; c++) { /* column c and c + 8 of all 16 rows */
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[c + 8] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);
    }
}

/* Where key (or value) row j of a head lies: by slot in the paged pool (slots given: the
 * head's base + slots[j] * stride) or in a strided view (base + j * stride). */
INLINE const float *kv_row(const float *base, const int64_t *slots, idx_t stride, idx_t j) {
    return base + (slots ? slots[j] : j) * stride;
}

/* kt [D][KB] = key rows j0 .. j0 + nk - 1 transposed, zero past nk: 16 x 16 tiles through
 * registers, each load prefetching the row 16 keys on (below `ahead`: the keys come from
 * the pool, which the weights' stream has evicted). Not inlined: inlined into the row
 * loop, the tiles' 48 registers' pressure made it slower than a scalar loop. */
static TARGET __attribute__((noinline)) void transpose_block(const float *k,
                                                             const int64_t *slots,
                                                             idx_t stride, idx_t j0, int nk,
                                                             idx_t ahead, int d, float *kt) {
    for (int t0 = 0; t0 < KB; t0 += 16)
        for (int d0 = 0; d0 < d; d0 += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++) {
                const idx_t j = j0 + t0 + i;
                r[i] = t0 + i < nk ? _mm512_loadu_ps(kv_row(k, slots, stride, j) + d0)
                                   : _mm512_setzero_ps();
                if (j + 16 < ahead)
                    _mm_prefetch((const char *)(kv_row(k, slots, stride, j + 16) + d0),
                                 _MM_HINT_T0);
            }
            transpose16(r);
            for (int c = 0; c < 16; c++) _mm512_storeu_ps(kt + (d0 + c) * KB + t0, r[c]);
        }
}

/* One block of keys (first key j0) for RB rows (padded: the caller's buffers hold RB rows):
 * kt [D][KB] the block's keys transposed; row r sees the block's first nv[r] keys (all but
 * near a causal diagonal; a row that sees none keeps its state), at most top <= 16 * NC:
 * only the first NC chunks of 16 scores are computed and only `top` value rows read (a
 * causal diagonal's block computes ~its lower triangle, not the whole block). acc [RB][D]
 * the running unnormalized output, m / l [RB] the running max and sum. The values go
 * through D in chunks of DV zmm (RB * DV <= 24 accumulators in registers: D 256 takes four
 * chunks of 64). */
INLINE TARGET void rows_block(const float *q, const float *kt, const float *v,
                              const int64_t *slots, idx_t stride, idx_t j0, const int *nv,
                              int top, float scale, float *acc, float *m, float *l, int RB,
                              int DV, int d, int NC) {
    __m512 s[8][4];
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < NC; c++) s[r][c] = _mm512_setzero_ps();
    for (int dd = 0; dd < d; dd++) { /* scores: 6 rows x 16 NC keys */
        __m512 kc[4];
        for (int c = 0; c < NC; c++) kc[c] = _mm512_loadu_ps(kt + dd * KB + 16 * c);
        for (int r = 0; r < RB; r++) {
            const __m512 qb = _mm512_set1_ps(q[r * d + dd]);
            for (int c = 0; c < NC; c++) s[r][c] = _mm512_fmadd_ps(qb, kc[c], s[r][c]);
        }
    }
    float p[8][KB] __attribute__((aligned(64)));
    float alpha[8];
    const __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
    for (int r = 0; r < RB; r++) { /* the running softmax */
        if (nv[r] <= 0) { /* no key of this block for the row: nothing changes */
            alpha[r] = 1.0f;
            for (int c = 0; c < NC; c++) _mm512_store_ps(p[r] + 16 * c, _mm512_setzero_ps());
            continue;
        }
        __mmask16 valid[4];
        for (int c = 0; c < NC; c++) {
            const int left = nv[r] - 16 * c;
            valid[c] = left >= 16 ? (__mmask16)0xffff
                                  : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
        }
        __m512 best = ninf;
        for (int c = 0; c < NC; c++) {
            s[r][c] = _mm512_mask_mov_ps(ninf, valid[c], _mm512_mul_ps(s[r][c], vscale));
            best = _mm512_max_ps(best, s[r][c]);
        }
        const float block_max = _mm512_reduce_max_ps(best);
        const float m_new = block_max > m[r] ? block_max : m[r];
        alpha[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
        const __m512 mv = _mm512_set1_ps(m_new);
        __m512 sum = _mm512_setzero_ps();
        for (int c = 0; c < NC; c++) {
            const __m512 e = _mm512_maskz_mov_ps(valid[c], exp512(_mm512_sub_ps(s[r][c], mv)));
            _mm512_store_ps(p[r] + 16 * c, e);
            sum = _mm512_add_ps(sum, e);
        }
        l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(sum);
        m[r] = m_new;
    }
    for (int d0 = 0; d0 < d; d0 += 16 * DV) { /* values: 6 rows x 64 dims (a chunk) */
        __m512 a[8][8]; /* RB * DV <= 24 */
        for (int r = 0; r < RB; r++) {
            const __m512 al = _mm512_set1_ps(alpha[r]);
            for (int c = 0; c < DV; c++)
                a[r][c] = _mm512_mul_ps(_mm512_loadu_ps(acc + r * d + d0 + 16 * c), al);
        }
        for (int j = 0; j < top; j++) {
            const float *vr = kv_row(v, slots, stride, j0 + j) + d0;
            __m512 vc[8];
            for (int c = 0; c < DV; c++) vc[c] = _mm512_loadu_ps(vr + 16 * c);
            for (int r = 0; r < RB; r++) {
                const __m512 pb = _mm512_set1_ps(p[r][j]);
                for (int c = 0; c < DV; c++) a[r][c] = _mm512_fmadd_ps(pb, vc[c], a[r][c]);
            }
        }
        for (int r = 0; r < RB; r++)
            for (int c = 0; c < DV; c++) _mm512_storeu_ps(acc + r * d + d0 + 16 * c, a[r][c]);
    }
}

/* rows_block specialised on its constants (the loops unroll, the accumulators stay in zmm):
 * one per head size (64: 6 rows, 128: 3 rows, 256: 6 rows) and count of score chunks. */
typedef void (*rows_block_fn)(const float *, const float *, const float *, const int64_t *,
                              idx_t, idx_t, const int *, int, float, float *, float *, float *);
#define ROWS_BLOCK(D, RB, DV, NC)                                                            \
    TARGET static void rows_block_##D##_##NC(                                                \
        const float *q, const float *kt, const float *v, const int64_t *slots, idx_t stride, \
        idx_t j0, const int *nv, int top, float scale, float *acc, float *m, float *l) {     \
        rows_block(q, kt, v, slots, stride, j0, nv, top, scale, acc, m, l, RB, DV, D, NC);   \
    }
#define ROWS_BLOCKS(D, RB, DV) \
    ROWS_BLOCK(D, RB, DV, 1) ROWS_BLOCK(D, RB, DV, 2) ROWS_BLOCK(D, RB, DV, 3) \
    ROWS_BLOCK(D, RB, DV, 4)
ROWS_BLOCKS(64, 6, 4)
ROWS_BLOCKS(128, 3, 8)
ROWS_BLOCKS(256, 6, 4)
static const rows_block_fn ROWS_BLOCK_FNS[3][4] = {
    {rows_block_64_1, rows_block_64_2, rows_block_64_3, rows_block_64_4},
    {rows_block_128_1, rows_block_128_2, rows_block_128_3, rows_block_128_4},
    {rows_block_256_1, rows_block_256_2, rows_block_256_3, rows_block_256_4}};

/* The keys row r sees: all L, or with a causal diagonal (first >= 0: row r is query token
 * r / group at key position first + r / group) those up to and including its own. */
INLINE idx_t row_limit(idx_t r, idx_t L, idx_t first, idx_t group) {
    if (first < 0) return L;
    const idx_t lim = first + r / group + 1;
    return lim < L ? lim : L;
}

/* Where the rows of q and out lie: row r of KV head h (query token r / group, its query
 * head (r % group) of the KV head's group) at h * head + (r / group) * token + (r % group)
 * * D floats: head-major [Hkv, R, D] (token = group * D) or the runner's token-major
 * [n, Hq, D] (token = Hq * D, head = group * D), read and written in place. */
typedef struct {
    idx_t head, token, group;
} row_layout;

INLINE idx_t row_offset(row_layout lay, idx_t h, idx_t r, int d) {
    return h * lay.head + (r / lay.group) * lay.token + (r % lay.group) * d;
}

/* Rows per chunk (a multiple of every RB): the chunk's q and acc (2 x 48 KiB) stay in L2
 * while each block of keys and values passes over all of its row blocks. */
#define CHUNK_FLOATS 12288
INLINE idx_t chunk_rows(int d) { return CHUNK_FLOATS / d; }

/* One KV head h over its keys: rows [R] -> out, lse [R] (lse NULL: not kept); causal when
 * first >= 0 (row_limit). kt [ceil(L / KB) * KB][D]: every block of keys transposed once
 * for all rows; then the rows in chunks, each over the key blocks up to its last row's limit
 * and each row block skipping those past its own (a causal prefill computes ~half the
 * scores). work: the chunk's padded q, acc, m and l. */
TARGET static void one_head(const float *q, float *out, float *lse, row_layout lay, idx_t h,
                            const float *k, const float *v, const int64_t *slots, idx_t stride,
                            idx_t rows, idx_t L, int d, float scale, idx_t first, float *kt,
                            float *work) {
    const int RB = d == 128 ? 3 : 6;
    const rows_block_fn *fns = ROWS_BLOCK_FNS[d == 64 ? 0 : d == 128 ? 1 : 2];
    const idx_t chunk = chunk_rows(d), all = row_limit(rows - 1, L, first, lay.group);
    for (idx_t kb = 0; kb < all; kb += KB)
        transpose_block(k, slots, stride, kb, all - kb < KB ? (int)(all - kb) : KB, all, d,
                        kt + kb * d);
    float *qp = work, *acc = qp + chunk * d, *m = acc + chunk * d, *l = m + chunk;
    for (idx_t r0 = 0; r0 < rows; r0 += chunk) {
        const idx_t n = rows - r0 < chunk ? rows - r0 : chunk, padded = (n + RB - 1) / RB * RB;
        for (idx_t i = 0; i < padded; i++) { /* padded rows: zero queries, discarded */
            if (i < n)
                memcpy(qp + i * d, q + row_offset(lay, h, r0 + i, d), sizeof(float) * d);
            else
                memset(qp + i * d, 0, sizeof(float) * d);
            memset(acc + i * d, 0, sizeof(float) * d);
            m[i] = -INFINITY, l[i] = 0.0f;
        }
        const idx_t limit = row_limit(r0 + n - 1, L, first, lay.group);
        for (idx_t kb = 0; kb < limit; kb += KB) {
            const int nk = limit - kb < KB ? (int)(limit - kb) : KB;
            /* the next block's value rows into cache while this one computes, a share per
             * row block (the keys were read by the transposes) */
            const idx_t next = kb + KB, next_n = limit - next < KB ? limit - next : KB;
            const idx_t lines = next_n > 0 ? next_n * (d / 16) : 0, blocks = padded / RB;
            const idx_t per = (lines + blocks - 1) / blocks;
            idx_t issued = 0;
            for (idx_t r = 0; r < padded; r += RB) {
                for (idx_t i = 0; i < per && issued < lines; i++, issued++)
                    _mm_prefetch((const char *)(kv_row(v, slots, stride, next + issued /
                                                       (d / 16)) + 16 * (issued % (d / 16))),
                                 _MM_HINT_T1);
                int nv[8], top = 0;
                for (int i = 0; i < RB; i++) { /* padded rows: as the last real one */
                    const idx_t row = r0 + (r + i < n ? r + i : n - 1);
                    const idx_t lim = row_limit(row, L, first, lay.group) - kb;
                    nv[i] = lim >= nk ? nk : lim <= 0 ? 0 : (int)lim;
                    top = nv[i] > top ? nv[i] : top;
                }
                if (top == 0) continue; /* the block is past every row's limit */
                fns[(top + 15) / 16 - 1](qp + r * d, kt + kb * d, v, slots, stride, kb, nv,
                                         top, scale, acc + r * d, m + r, l + r);
            }
        }
        for (idx_t i = 0; i < n; i++) {
            const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
            float *o = out + row_offset(lay, h, r0 + i, d);
            for (int c = 0; c < d; c++) o[c] = acc[i * d + c] * inv;
            if (lse) lse[h * rows + r0 + i] = l[i] > 0.0f ? m[i] + logf(l[i]) : -INFINITY;
        }
    }
}

#include "avx512_attention_decode.h" /* 2. decode_attention (by slot) */

#endif

DEFINE_CPU_SUPPORTED(CPU_HAS("avx512f"))

/* prefix_attention(q, k, v, row_stride, head_stride, out, lse, hkv, rows, L, d, scale,
 * first, group[, q_token, q_head, slots, num_slots]): first -1 for no mask, else causal
 * (row r is query token r / group at key position first + r / group). Rows lie as
 * row_layout says (q_token, q_head: default head-major [Hkv, R, D]), out alike; lse [Hkv, R]
 * or 0 (not kept). Key j of head h at k + j * row_stride + h * head_stride, or with slots
 * (int64 [L], each checked against num_slots) at k + slots[j] * row_stride + ...: the pool
 * read in place. */
static PyObject *py_prefix_attention(PyObject *UNUSED self, PyObject *args) {
    unsigned long long q, k, v, out, lse, slots_p = 0;
    Py_ssize_t row_stride, head_stride, hkv, rows, L, first, group, q_token = -1, q_head = -1,
        num_slots = 0;
    int d;
    float scale;
    if (!PyArg_ParseTuple(args, "KKKnnKKnnnifnn|nnKn", &q, &k, &v, &row_stride, &head_stride,
                          &out, &lse, &hkv, &rows, &L, &d, &scale, &first, &group, &q_token,
                          &q_head, &slots_p, &num_slots))
        return NULL;
    if (q_token < 0) q_token = group * d, q_head = rows * d;
    if ((d != 64 && d != 128 && d != 256) || hkv < 1 || rows < 1 || L < 0 || row_stride < d ||
        first < -1 || group < 1 || q_head < 0 || !q || !out || (L > 0 && (!k || !v))) {
        PyErr_SetString(PyExc_ValueError, "prefix_attention: need D 64, 128 or 256, hkv >= 1, "
                        "rows >= 1, L >= 0, row_stride >= D, first >= -1, group >= 1");
        return NULL;
    }
    const int64_t *slots = PTR(slots_p);
    for (idx_t j = 0; slots && j < L; j++)
        if (slots[j] < 0 || slots[j] >= num_slots) {
            PyErr_Format(PyExc_IndexError, "prefix_attention: slot %lld outside the pool of %zd",
                         (long long)slots[j], num_slots);
            return NULL;
        }
    if (!cpu_check(cpu_supported(), "prefix_attention: this CPU lacks AVX-512")) return NULL;
#if HAVE_X86
    const idx_t chunk = chunk_rows(d), keys = (L + KB - 1) / KB * KB;
    float *work = malloc(sizeof(float) * (size_t)(2 * chunk * d + 2 * chunk + keys * d + 1));
    if (!work) return PyErr_NoMemory();
    const row_layout lay = {q_head, q_token, group};
    Py_BEGIN_ALLOW_THREADS
    for (idx_t h = 0; h < hkv; h++)
        one_head(PTR(q), PTR(out), PTR(lse), lay, h, (const float *)PTR(k) + h * head_stride,
                 (const float *)PTR(v) + h * head_stride, slots, row_stride, rows, L, d, scale,
                 first, work + 2 * chunk * d + 2 * chunk, work);
    Py_END_ALLOW_THREADS
    free(work);
#endif
    Py_RETURN_NONE;
}

/* decode_attention(q, k_pool, v_pool, num_slots, indptr, indices, num_indices, out, batch,
 * hq, hkv, dim, window, prior_lse, sm_scale, logit_cap): row_ops.decode_attention's
 * arguments and checks (every index and slot before any work), D 64 or 128, hq / hkv <= 64. */
static PyObject *py_decode_attention(PyObject *UNUSED self, PyObject *args) {
    unsigned long long q, k, v, indptr_p, indices_p, out, prior;
    long long num_slots, num_indices, batch, hq, hkv, d, window;
    float scale, cap;
    if (!PyArg_ParseTuple(args, "KKKLKKLKLLLLLKff", &q, &k, &v, &num_slots, &indptr_p,
                          &indices_p, &num_indices, &out, &batch, &hq, &hkv, &d, &window,
                          &prior, &scale, &cap))
        return NULL;
    const int64_t *indptr = PTR(indptr_p), *indices = PTR(indices_p);
    if (!q || !k || !v || !indptr || !indices || !out || batch < 0 || hkv < 1 ||
        (d != 64 && d != 128) || hq % hkv || hq / hkv > 64 ||
        (batch > 0 && (indptr[0] < 0 || indptr[batch] > num_indices))) {
        PyErr_SetString(PyExc_ValueError, "decode_attention: null pointer or bad size (D must "
                        "be 64 or 128, at most 64 query heads per KV head)");
        return NULL;
    }
    idx_t longest;
    if (!check_decode_slots(indptr, indices, batch, num_slots, &longest)) return NULL;
    if (!cpu_check(cpu_supported(), "decode_attention: this CPU lacks AVX-512")) return NULL;
#if HAVE_X86
    /* scores of up to RUN_ROWS rows attended together (a verify's) */
    const idx_t together = batch < RUN_ROWS ? (batch > 0 ? batch : 1) : RUN_ROWS;
    float *s = malloc(sizeof(float) * (size_t)((longest > 0 ? longest : 1) * (hq / hkv) *
                                               together));
    if (!s) return PyErr_NoMemory();
    WITHOUT_GIL(decode_all(PTR(q), PTR(k), PTR(v), indptr, indices, batch, hq, hkv, d, window,
                           PTR(prior), scale, cap, PTR(out), s));
    free(s);
#endif
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS, "True if this CPU has AVX-512 F."},
    {"prefix_attention", py_prefix_attention, METH_VARARGS,
     "prefix_attention(q, k, v, row_stride, head_stride, out, lse, hkv, rows, L, d, scale,\n"
     "first, group[, q_token, q_head, slots, num_slots]): first -1, or causal with row r at\n"
     "key position first + r // group; rows at h * q_head + r // group * q_token +\n"
     "r % group * d (default head-major); keys by slot where slots is given"},
    {"decode_attention", py_decode_attention, METH_VARARGS,
     "decode_attention(q, k_pool, v_pool, num_slots, indptr, indices, num_indices, out, batch,\n"
     "hq, hkv, dim, window, prior_lse, sm_scale, logit_cap): row_ops.decode_attention's\n"
     "contract for D 64 or 128."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(avx512_attention,
              "Attention on AVX-512: shared-prefix flash attention and decode attention by slot.")
