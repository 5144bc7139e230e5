/* Attention kernels on AVX-512, float32: one C file for the family (they share e^x).
 *
 * 1. prefix_attention: many query rows over one shared run of keys (a group's shared prefix
 *    in the cascade decode: every question's query heads of one KV head against the
 *    document's keys), as flash attention: the keys in blocks of 64, a running max and sum
 *    per row, the scores never leave the core's registers and a 1 KiB row buffer.
 * 2. decode_attention: each request's query heads over its own keys, read from the paged
 *    pool by slot (a decode step), one KV head's group of query heads at a time (below).
 *
 * Why: torch's fused CPU kernel ran this shape (3 KV heads x 96 rows x 1,552 keys x 64) at
 * ~80 GFLOP/s, 1.45 ms a layer, ~45% of a 32-question decode step of shared-prefix RAG. Here
 * both products are register-blocked for 6 rows x 64 keys (scores) and 6 rows x 64 dims
 * (values): 24 accumulators, 4 vector loads and 6 broadcasts per 24 FMAs, with each block of
 * keys transposed once for all rows.
 *
 * Numbers: scores q.k summed over the head dimension in order with FMAs, then scaled; e^x
 * is a degree-7 polynomial after range reduction (exp512, ~2 ulp); the sums of each row
 * run over blocks of 64 keys. The result differs from the float32 matmul reference by
 * rounding (~1e-6 relative, tested).
 *
 * Shapes (1): q [Hkv, R, D] contiguous; key j of head h at k + j * row_stride + h * head_stride
 * (a view of the paged pool [L, Hkv, D]), v alike; out [Hkv, R, D] normalized over these
 * keys and lse [Hkv, R] their log-sum-exp (no key: out 0, lse -inf). D is 64, 128 or 256
 * (Gemma 3); decode_attention takes 64 or 128.
 * radixlm.kernels.cpu.avx512_attention checks shapes and dtypes and falls back to torch. */
#include "radixlm_native.h"

#define KB 64 /* keys per block: 4 zmm of scores per row */

#if HAVE_X86
#define TARGET __attribute__((target("avx512f")))

/* e^x: n = round(x log2 e), r = x - n ln 2 (two-part constant), Taylor to r^7 on
 * |r| <= ln2 / 2 (truncation < 1e-8 relative), scaled by 2^n. Inputs clamped to float's
 * range; callers mask the lanes that must be exactly 0. */
INLINE TARGET __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.72283f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

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

/* kt [D][KB] = the block's nk key rows (row_stride floats apart) transposed, zero past nk:
 * 16 x 16 tiles through registers. The scalar loop it replaces was ~23% of the kernel's time
 * (3 heads x 96 rows x 1,552 keys: 1.31 -> 1.12 ms); not inlined: inlined into one_head, the
 * tiles' 48 registers' pressure made it slower than the scalar loop (1.65 ms). */
static TARGET __attribute__((noinline)) void transpose_block(const float *k, idx_t row_stride,
                                                             int nk, int d, float *kt) {
    for (int j0 = 0; j0 < KB; j0 += 16)
        for (int d0 = 0; d0 < d; d0 += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = j0 + i < nk ? _mm512_loadu_ps(k + (j0 + i) * row_stride + d0)
                                   : _mm512_setzero_ps();
            transpose16(r);
            for (int c = 0; c < 16; c++) _mm512_storeu_ps(kt + (d0 + c) * KB + j0, r[c]);
        }
}

/* One block of keys for RB rows (padded: the caller's buffers hold RB rows):
 * kt [D][KB] the block's keys transposed (zero past nk), vb the block's first value row;
 * row r sees the block's first nv[r] <= nk keys (all nk but near a causal diagonal; a row
 * that sees none keeps its state). acc [RB][D] the running unnormalized output, m / l [RB]
 * the running max and sum. The values go through D in chunks of DV zmm (RB * DV <= 24
 * accumulators in registers: D 256 takes two chunks of 128). */
INLINE TARGET void rows_block(const float *q, const float *kt, const float *vb, idx_t v_stride,
                              int nk, const int *nv, float scale, float *acc, float *m,
                              float *l, int RB, int DV, int d) {
    __m512 s[8][4];
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < 4; c++) s[r][c] = _mm512_setzero_ps();
    for (int dd = 0; dd < d; dd++) { /* scores: 6 rows x 64 keys */
        __m512 kc[4];
        for (int c = 0; c < 4; c++) kc[c] = _mm512_loadu_ps(kt + dd * KB + 16 * c);
        for (int r = 0; r < RB; r++) {
            const __m512 qb = _mm512_set1_ps(q[r * d + dd]);
            for (int c = 0; c < 4; c++) s[r][c] = _mm512_fmadd_ps(qb, kc[c], s[r][c]);
        }
    }
    float p[8][KB] __attribute__((aligned(64)));
    float alpha[8];
    const __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
    for (int r = 0; r < RB; r++) { /* the running softmax */
        if (nv[r] <= 0) { /* no key of this block for the row: nothing changes */
            alpha[r] = 1.0f;
            for (int c = 0; c < 4; c++) _mm512_store_ps(p[r] + 16 * c, _mm512_setzero_ps());
            continue;
        }
        __mmask16 valid[4];
        for (int c = 0; c < 4; c++) {
            const int left = nv[r] - 16 * c;
            valid[c] = left >= 16 ? (__mmask16)0xffff
                                  : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
        }
        __m512 top = ninf;
        for (int c = 0; c < 4; c++) {
            s[r][c] = _mm512_mask_mov_ps(ninf, valid[c], _mm512_mul_ps(s[r][c], vscale));
            top = _mm512_max_ps(top, s[r][c]);
        }
        const float block_max = _mm512_reduce_max_ps(top);
        const float m_new = block_max > m[r] ? block_max : m[r];
        alpha[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
        const __m512 mv = _mm512_set1_ps(m_new);
        __m512 sum = _mm512_setzero_ps();
        for (int c = 0; c < 4; c++) {
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
        for (int j = 0; j < nk; j++) {
            const float *vr = vb + j * v_stride + d0;
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

/* rows_block specialised on constants (the loops unroll, the accumulators stay in zmm) */
TARGET static void rows_block_64(const float *q, const float *kt, const float *vb,
                                 idx_t v_stride, int nk, const int *nv, float scale, float *acc,
                                 float *m, float *l) {
    rows_block(q, kt, vb, v_stride, nk, nv, scale, acc, m, l, 6, 4, 64);
}

TARGET static void rows_block_128(const float *q, const float *kt, const float *vb,
                                  idx_t v_stride, int nk, const int *nv, float scale,
                                  float *acc, float *m, float *l) {
    rows_block(q, kt, vb, v_stride, nk, nv, scale, acc, m, l, 3, 8, 128);
}

TARGET static void rows_block_256(const float *q, const float *kt, const float *vb,
                                  idx_t v_stride, int nk, const int *nv, float scale,
                                  float *acc, float *m, float *l) {
    rows_block(q, kt, vb, v_stride, nk, nv, scale, acc, m, l, 6, 4, 256);
}

/* The keys row r sees: all L, or with a causal diagonal (first >= 0: row r is query token
 * r / group at key position first + r / group) those up to and including its own. */
INLINE idx_t row_limit(idx_t r, idx_t L, idx_t first, idx_t group) {
    if (first < 0) return L;
    const idx_t lim = first + r / group + 1;
    return lim < L ? lim : L;
}

/* One KV head: q [R, D] -> out [R, D], lse [R]; causal when first >= 0 (row_limit). work:
 * padded rows of q, acc, m, l and kt. A row block skips the key blocks past its last row's
 * limit (a causal prefill computes ~half the scores). */
TARGET static void one_head(const float *q, const float *k, const float *v, idx_t row_stride,
                            idx_t rows, idx_t L, int d, float scale, idx_t first, idx_t group,
                            float *out, float *lse, float *work) {
    const int RB = d == 128 ? 3 : 6;
    const idx_t padded = (rows + RB - 1) / RB * RB;
    float *qp = work, *acc = qp + padded * d, *m = acc + padded * d, *l = m + padded;
    float *kt = l + padded;
    memset(qp, 0, sizeof(float) * (size_t)(2 * padded * d));
    memcpy(qp, q, sizeof(float) * (size_t)(rows * d));
    for (idx_t r = 0; r < padded; r++) m[r] = -INFINITY, l[r] = 0.0f;
    for (idx_t kb = 0; kb < L; kb += KB) {
        const int nk = L - kb < KB ? (int)(L - kb) : KB;
        transpose_block(k + kb * row_stride, row_stride, nk, d, kt);
        const float *vb = v + kb * row_stride;
        /* the next block's key and value rows (d floats each) into L2 while this one computes,
         * a share per row block: the pool's rows come from memory, not cache */
        const idx_t next = kb + KB, next_n = L - next < KB ? L - next : KB;
        const idx_t lines = next_n > 0 ? next_n * (d / 16) : 0, blocks = (padded + RB - 1) / RB;
        const idx_t per = (2 * lines + blocks - 1) / blocks;
        idx_t issued = 0;
        for (idx_t r = 0; r < padded; r += RB) {
            for (idx_t i = 0; i < per && issued < 2 * lines; i++, issued++) {
                const float *base = issued < lines ? k : v;
                const idx_t line = issued < lines ? issued : issued - lines;
                _mm_prefetch((const char *)(base + (next + line / (d / 16)) * row_stride +
                                            16 * (line % (d / 16))), _MM_HINT_T1);
            }
            const idx_t last = r + RB - 1 < rows ? r + RB - 1 : rows - 1; /* its last real row */
            if (kb >= row_limit(last, L, first, group)) continue;
            int nv[8];
            for (int i = 0; i < RB; i++) { /* padded rows: as the last real one (discarded) */
                const idx_t lim = row_limit(r + i < rows ? r + i : last, L, first, group) - kb;
                nv[i] = lim >= nk ? nk : lim <= 0 ? 0 : (int)lim;
            }
            if (d == 64)
                rows_block_64(qp + r * d, kt, vb, row_stride, nk, nv, scale, acc + r * d, m + r,
                              l + r);
            else if (d == 128)
                rows_block_128(qp + r * d, kt, vb, row_stride, nk, nv, scale, acc + r * d,
                               m + r, l + r);
            else
                rows_block_256(qp + r * d, kt, vb, row_stride, nk, nv, scale, acc + r * d,
                               m + r, l + r);
        }
    }
    for (idx_t r = 0; r < rows; r++) {
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        for (int c = 0; c < d; c++) out[r * d + c] = acc[r * d + c] * inv;
        lse[r] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
    }
}

#include "avx512_attention_decode.h" /* 2. decode_attention (by slot) */

#endif

DEFINE_CPU_SUPPORTED(CPU_HAS("avx512f"))

/* prefix_attention(q, k, v, row_stride, head_stride, out, lse, hkv, rows, L, d, scale,
 * first, group): first -1 for no mask, else causal (row r is query token r / group at key
 * position first + r / group). */
static PyObject *py_prefix_attention(PyObject *UNUSED self, PyObject *args) {
    unsigned long long q, k, v, out, lse;
    Py_ssize_t row_stride, head_stride, hkv, rows, L, first, group;
    int d;
    float scale;
    if (!PyArg_ParseTuple(args, "KKKnnKKnnnifnn", &q, &k, &v, &row_stride, &head_stride, &out,
                          &lse, &hkv, &rows, &L, &d, &scale, &first, &group))
        return NULL;
    if ((d != 64 && d != 128 && d != 256) || hkv < 1 || rows < 1 || L < 0 || row_stride < d ||
        first < -1 || group < 1) {
        PyErr_SetString(PyExc_ValueError, "prefix_attention: need D 64, 128 or 256, hkv >= 1, "
                        "rows >= 1, L >= 0, row_stride >= D, first >= -1, group >= 1");
        return NULL;
    }
    if (!cpu_check(cpu_supported(), "prefix_attention: this CPU lacks AVX-512")) return NULL;
#if HAVE_X86
    const idx_t padded = rows + 6; /* one_head pads rows to its block (6 or 3 rows) */
    float *work = malloc(sizeof(float) * (size_t)(2 * padded * d + 2 * padded + d * KB));
    if (!work) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    for (idx_t h = 0; h < hkv; h++)
        one_head((const float *)(uintptr_t)q + h * rows * d,
                 (const float *)(uintptr_t)k + h * head_stride,
                 (const float *)(uintptr_t)v + h * head_stride, row_stride, rows, L, d, scale,
                 first, group, (float *)(uintptr_t)out + h * rows * d,
                 (float *)(uintptr_t)lse + h * rows, work);
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
    float *s = malloc(sizeof(float) * (size_t)((longest > 0 ? longest : 1) * (hq / hkv)));
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
     "first, group): first -1, or causal with row r at key position first + r // group"},
    {"decode_attention", py_decode_attention, METH_VARARGS,
     "decode_attention(q, k_pool, v_pool, num_slots, indptr, indices, num_indices, out, batch,\n"
     "hq, hkv, dim, window, prior_lse, sm_scale, logit_cap): row_ops.decode_attention's\n"
     "contract for D 64 or 128."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(avx512_attention,
              "Attention on AVX-512: shared-prefix flash attention and decode attention by slot.")
