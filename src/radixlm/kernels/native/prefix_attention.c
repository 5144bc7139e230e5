/* Attention of many query rows over one shared run of keys (a group's shared prefix in the
 * cascade decode: every question's query heads of one KV head against the document's keys),
 * float32, on AVX-512, as flash attention: the keys in blocks of 64, a running max and sum per
 * row, the scores never leave the core's registers and a 1 KiB row buffer.
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
 * Shapes: q [Hkv, R, D] contiguous; key j of head h at k + j * row_stride + h * head_stride
 * (a view of the paged pool [L, Hkv, D]), v alike; out [Hkv, R, D] normalized over these
 * keys and lse [Hkv, R] their log-sum-exp (no key: out 0, lse -inf). D is 64 or 128.
 * radixlm.kernels.cpu_prefix_attention checks shapes and dtypes and falls back to torch. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86 1
#include <immintrin.h>
#else
#define HAVE_X86 0
#endif

typedef ptrdiff_t idx_t;

#define KB 64 /* keys per block: 4 zmm of scores per row */

#if HAVE_X86
#define TARGET __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline))

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

/* One block of keys for RB rows (padded: the caller's buffers hold RB rows):
 * kt [D][KB] the block's keys transposed (zero past nk), vb the block's first value row.
 * acc [RB][D] the running unnormalized output, m / l [RB] the running max and sum. */
INLINE TARGET void rows_block(const float *q, const float *kt, const float *vb, idx_t v_stride,
                              int nk, float scale, float *acc, float *m, float *l, int RB,
                              int DV) {
    const int d = 16 * DV;
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
    __mmask16 valid[4];
    for (int c = 0; c < 4; c++) {
        int left = nk - 16 * c;
        valid[c] = left >= 16 ? (__mmask16)0xffff
                              : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
    }
    float p[8][KB] __attribute__((aligned(64)));
    float alpha[8];
    const __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
    for (int r = 0; r < RB; r++) { /* the running softmax */
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
    __m512 a[8][8]; /* RB * DV <= 24 */
    for (int r = 0; r < RB; r++) {
        const __m512 al = _mm512_set1_ps(alpha[r]);
        for (int c = 0; c < DV; c++)
            a[r][c] = _mm512_mul_ps(_mm512_loadu_ps(acc + r * d + 16 * c), al);
    }
    for (int j = 0; j < nk; j++) { /* values: 6 rows x 64 dims */
        const float *vr = vb + j * v_stride;
        __m512 vc[8];
        for (int c = 0; c < DV; c++) vc[c] = _mm512_loadu_ps(vr + 16 * c);
        for (int r = 0; r < RB; r++) {
            const __m512 pb = _mm512_set1_ps(p[r][j]);
            for (int c = 0; c < DV; c++) a[r][c] = _mm512_fmadd_ps(pb, vc[c], a[r][c]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < DV; c++) _mm512_storeu_ps(acc + r * d + 16 * c, a[r][c]);
}

/* rows_block specialised on constants (the loops unroll, the accumulators stay in zmm) */
TARGET static void rows_block_64(const float *q, const float *kt, const float *vb,
                                 idx_t v_stride, int nk, float scale, float *acc, float *m,
                                 float *l) {
    rows_block(q, kt, vb, v_stride, nk, scale, acc, m, l, 6, 4);
}

TARGET static void rows_block_128(const float *q, const float *kt, const float *vb,
                                  idx_t v_stride, int nk, float scale, float *acc, float *m,
                                  float *l) {
    rows_block(q, kt, vb, v_stride, nk, scale, acc, m, l, 3, 8);
}

/* One KV head: q [R, D] -> out [R, D], lse [R]. work: padded rows of q, acc, m, l and kt. */
TARGET static void one_head(const float *q, const float *k, const float *v, idx_t row_stride,
                            idx_t rows, idx_t L, int d, float scale, float *out, float *lse,
                            float *work) {
    const int RB = d == 64 ? 6 : 3;
    const idx_t padded = (rows + RB - 1) / RB * RB;
    float *qp = work, *acc = qp + padded * d, *m = acc + padded * d, *l = m + padded;
    float *kt = l + padded;
    memset(qp, 0, sizeof(float) * (size_t)(2 * padded * d));
    memcpy(qp, q, sizeof(float) * (size_t)(rows * d));
    for (idx_t r = 0; r < padded; r++) m[r] = -INFINITY, l[r] = 0.0f;
    for (idx_t kb = 0; kb < L; kb += KB) {
        const int nk = L - kb < KB ? (int)(L - kb) : KB;
        for (int dd = 0; dd < d; dd++) /* the block's keys transposed, zero past nk */
            for (int j = 0; j < KB; j++)
                kt[dd * KB + j] = j < nk ? k[(kb + j) * row_stride + dd] : 0.0f;
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
            if (d == 64)
                rows_block_64(qp + r * d, kt, vb, row_stride, nk, scale, acc + r * d, m + r,
                              l + r);
            else
                rows_block_128(qp + r * d, kt, vb, row_stride, nk, scale, acc + r * d, m + r,
                               l + r);
        }
    }
    for (idx_t r = 0; r < rows; r++) {
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        for (int c = 0; c < d; c++) out[r * d + c] = acc[r * d + c] * inv;
        lse[r] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
    }
}

static int cpu_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}
#else
static int cpu_supported(void) { return 0; }
#endif

static PyObject *py_supported(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyBool_FromLong(cpu_supported());
}

/* prefix_attention(q, k, v, row_stride, head_stride, out, lse, hkv, rows, L, d, scale) */
static PyObject *py_prefix_attention(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long q, k, v, out, lse;
    Py_ssize_t row_stride, head_stride, hkv, rows, L;
    int d;
    float scale;
    if (!PyArg_ParseTuple(args, "KKKnnKKnnnif", &q, &k, &v, &row_stride, &head_stride, &out,
                          &lse, &hkv, &rows, &L, &d, &scale))
        return NULL;
    if ((d != 64 && d != 128) || hkv < 1 || rows < 1 || L < 0 || row_stride < d) {
        PyErr_SetString(PyExc_ValueError, "prefix_attention: need D 64 or 128, hkv >= 1, "
                        "rows >= 1, L >= 0, row_stride >= D");
        return NULL;
    }
    if (!cpu_supported()) {
        PyErr_SetString(PyExc_RuntimeError, "prefix_attention: this CPU lacks AVX-512");
        return NULL;
    }
#if HAVE_X86
    const idx_t padded = rows + 6; /* one_head pads rows to its block (6 or 3 rows) */
    float *work = malloc(sizeof(float) * (size_t)(2 * padded * d + 2 * padded + d * KB));
    if (!work) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    for (idx_t h = 0; h < hkv; h++)
        one_head((const float *)(uintptr_t)q + h * rows * d,
                 (const float *)(uintptr_t)k + h * head_stride,
                 (const float *)(uintptr_t)v + h * head_stride, row_stride, rows, L, d, scale,
                 (float *)(uintptr_t)out + h * rows * d, (float *)(uintptr_t)lse + h * rows,
                 work);
    Py_END_ALLOW_THREADS
    free(work);
#endif
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS, "True if this CPU has AVX-512 F."},
    {"prefix_attention", py_prefix_attention, METH_VARARGS,
     "prefix_attention(q, k, v, row_stride, head_stride, out, lse, hkv, rows, L, d, scale)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "prefix_attention",
    "Flash attention of many query rows over one shared run of keys (AVX-512).", -1, METHODS};

PyMODINIT_FUNC PyInit_prefix_attention(void) { return PyModule_Create(&MODULE); }
