/* float32 GEMV / GEMM for a few rows on AVX-512: out = x @ w.T, float32 throughout.
 *
 *   out[m, n] = sum_k x[m, k] * w[n, k]
 *
 * x float32 [M, K], w float32 [N, K] (a linear's weight as torch stores it, no packed copy),
 * out float32 [M, N], all row-major and contiguous. 16-lane float32 FMA accumulators, one
 * per (activation row, weight row) of a tile, reduced across lanes at the end: only float32
 * roundings, in another order than MKL's (~1e-7 relative).
 *
 * Why: a batch-1 decode step streams every float32 weight once (540 MB on SmolLM2-135M) and
 * is bound by that read. The loop order reads each weight tile from memory once for ALL
 * M activation rows: a tile of NR weight rows (NR * K * 4 bytes: 9 KiB at K = 576; 8 rows
 * for 1-2 activation rows) is multiplied into up to MR activation rows at a time (the
 * accumulators must fit in the 32 zmm registers), then into the next MR rows while it is
 * still in L1/L2. And since the
 * hardware prefetcher ramps up again on every new small matrix (a step reads ~120 of them
 * one after another), each cache line read of a weight row also prefetches (into L2) the
 * line `prefetch` bytes further along: rows are contiguous, so that is the same stream ahead
 * (past the end of the matrix it touches whatever follows, harmless: prefetches never fault).
 *
 * Needs: x86-64 with AVX-512 F (masked loads for the K tail). The module builds with any C
 * compiler (the kernel itself only with GCC or Clang on x86-64); `supported()` says whether
 * this CPU can run it, and `gemv` raises RuntimeError where it cannot. The GIL is released
 * while it runs. Plain C on the CPython API: the caller passes data pointers.
 */
#include "radixlm_native.h"

#if HAVE_X86
#define TARGET __attribute__((target("avx512f")))
#define NR 4     /* weight rows per tile: 4 concurrent streams along the matrix */
#define NR_WIDE 8 /* ... 8 for 1-2 activation rows, one at a time (8 + 8 + 1 zmm) */
#define MR_MAX 6 /* activation rows per pass over a tile: MR * NR + NR + 1 <= 32 zmm */
#define LANES 16 /* floats per zmm register = per 64-byte cache line */

/* The lane sums of 4 accumulators as one vector {sum a[0], .., sum a[3]}: halves added,
 * then pairwise (hadd) across the four, 13 instructions instead of 4 full reductions' ~32
 * (with 6 activation rows at K = 576 those were ~15% of a tile's work). */
INLINE TARGET __m256 upper256(__m512 a) { /* AVX-512 F only (extractf32x8 is DQ) */
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
}

INLINE TARGET __m128 sum4(const __m512 a[4]) {
    __m256 h[4];
    for (int r = 0; r < 4; r++)
        h[r] = _mm256_add_ps(_mm512_castps512_ps256(a[r]), upper256(a[r]));
    /* each 128-bit half: {s0, s1, s2, s3} partial sums */
    const __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
    return _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
}

/* MR activation rows times R weight rows (R <= NR_WIDE; MR * R <= 24) over all of K, into out[m * N + r].
 * MR and R are compile-time constants at every call site, so the loops unroll and the
 * accumulators live in registers. */
INLINE TARGET void tile(const float *x, const float *w, float *out, idx_t N, idx_t K,
                        idx_t ahead, const int MR, const int R) {
    __m512 acc[MR_MAX][NR_WIDE];
    for (int m = 0; m < MR; m++)
        for (int r = 0; r < R; r++) acc[m][r] = _mm512_setzero_ps();
    idx_t k = 0;
    for (; k + LANES <= K; k += LANES) { /* one cache line of each weight row */
        __m512 wv[NR_WIDE];
        for (int r = 0; r < R; r++) {
            _mm_prefetch((const char *)(w + r * K + k + ahead), _MM_HINT_T1);
            wv[r] = _mm512_loadu_ps(w + r * K + k);
        }
        for (int m = 0; m < MR; m++) {
            const __m512 xv = _mm512_loadu_ps(x + m * K + k);
            for (int r = 0; r < R; r++) acc[m][r] = _mm512_fmadd_ps(xv, wv[r], acc[m][r]);
        }
    }
    if (k < K) { /* the last K % 16 columns: masked loads read nothing past the row */
        const __mmask16 mask = (__mmask16)((1u << (K - k)) - 1u);
        __m512 wv[NR_WIDE];
        for (int r = 0; r < R; r++) wv[r] = _mm512_maskz_loadu_ps(mask, w + r * K + k);
        for (int m = 0; m < MR; m++) {
            const __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * K + k);
            for (int r = 0; r < R; r++) acc[m][r] = _mm512_fmadd_ps(xv, wv[r], acc[m][r]);
        }
    }
    for (int m = 0; m < MR; m++) {
        if (R % 4 == 0) {
            for (int r = 0; r < R; r += 4) _mm_storeu_ps(out + m * N + r, sum4(acc[m] + r));
        } else {
            for (int r = 0; r < R; r++) out[m * N + r] = _mm512_reduce_add_ps(acc[m][r]);
        }
    }
}

/* One tile of R weight rows times all M activation rows, MR_MAX rows at a time. */
INLINE TARGET void tile_all_rows(const float *x, const float *w, float *out, idx_t M,
                                 idx_t N, idx_t K, idx_t ahead, const int R) {
    idx_t m = 0;
    for (; m + MR_MAX <= M; m += MR_MAX)
        tile(x + m * K, w, out + m * N, N, K, ahead, MR_MAX, R);
    switch (M - m) { /* the remaining 0-5 rows, each count its own unrolled tile */
    case 1: tile(x + m * K, w, out + m * N, N, K, ahead, 1, R); break;
    case 2: tile(x + m * K, w, out + m * N, N, K, ahead, 2, R); break;
    case 3: tile(x + m * K, w, out + m * N, N, K, ahead, 3, R); break;
    case 4: tile(x + m * K, w, out + m * N, N, K, ahead, 4, R); break;
    case 5: tile(x + m * K, w, out + m * N, N, K, ahead, 5, R); break;
    default: break;
    }
}

static TARGET void tiles_full(const float *x, const float *w, float *out, idx_t M, idx_t N,
                              idx_t K, idx_t ahead) {
    tile_all_rows(x, w, out, M, N, K, ahead, NR);
}

static TARGET void tiles_wide(const float *x, const float *w, float *out, idx_t M, idx_t N,
                              idx_t K, idx_t ahead) {
    /* one activation row per pass (the second reads the tile from L1/L2): two rows in one
     * pass (25 zmm) measured 12% slower streaming SmolLM2 */
    tile(x, w, out, N, K, ahead, 1, NR_WIDE);
    if (M == 2) tile(x + K, w, out + N, N, K, ahead, 1, NR_WIDE);
}

static TARGET void tiles_single(const float *x, const float *w, float *out, idx_t M, idx_t N,
                                idx_t K, idx_t ahead) {
    tile_all_rows(x, w, out, M, N, K, ahead, 1);
}

/* All N weight rows: tiles of NR (NR_WIDE for 1-2 activation rows, more streams in flight),
 * then the last N % NR rows one at a time. `ahead` is the
 * prefetch distance in floats. */
static void gemv_all(const float *x, const float *w, float *out, idx_t M, idx_t N, idx_t K,
                     idx_t prefetch_bytes) {
    const idx_t ahead = prefetch_bytes / (idx_t)sizeof(float);
    idx_t n = 0;
    if (M <= 2) /* streaming SmolLM2 in model order: 8% less time at 1 row, 16% at 2 */
        for (; n + NR_WIDE <= N; n += NR_WIDE) tiles_wide(x, w + n * K, out + n, M, N, K, ahead);
    for (; n + NR <= N; n += NR) tiles_full(x, w + n * K, out + n, M, N, K, ahead);
    for (; n < N; n++) tiles_single(x, w + n * K, out + n, M, N, K, ahead);
}

#endif

DEFINE_CPU_SUPPORTED(CPU_HAS("avx512f"))

static PyObject *py_gemv(PyObject *UNUSED self, PyObject *args) {
    float *ptrs[3];
    long long sizes[4]; /* M, N, K, prefetch bytes */
    if (!cpu_check(cpu_supported(),
                   "f32_gemv.gemv needs a CPU with AVX-512 F (check supported())"))
        return NULL;
    if (!parse_float_gemm(args, "KKKLLLL:gemv", "gemv", ptrs, sizes)) return NULL;
#if HAVE_X86
    WITHOUT_GIL(gemv_all(ptrs[0], ptrs[1], ptrs[2], (idx_t)sizes[0], (idx_t)sizes[1],
                         (idx_t)sizes[2], (idx_t)sizes[3]));
#endif
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS,
     "supported() -> bool: whether this CPU has AVX-512 F (what gemv needs)."},
    {"gemv", py_gemv, METH_VARARGS,
     "gemv(x, w, out, M, N, K, prefetch) -> None\n\n"
     "out[m, n] = sum_k x[m, k] * w[n, k] on data pointers (ints): x float32 [M, K], w\n"
     "float32 [N, K], out float32 [M, N], contiguous; prefetch: bytes ahead of each weight\n"
     "row to prefetch. The caller owns the checks of the buffers themselves\n"
     "(radixlm.kernels.cpu.f32_gemv)."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(f32_gemv, "float32 GEMV for a few rows on AVX-512, weight read once for all "
                        "rows (f32_gemv.c).")
