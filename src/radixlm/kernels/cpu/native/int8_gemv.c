/* int8 per-output-channel weight-only GEMV / small GEMM on AVX-512, float32 throughout.
 *
 *   out[m, n] = scales[n] * sum_k x[m, k] * codes[n, k]
 *
 * x float32 [M, K], codes int8 [N, K], scales float32 [N], out float32 [M, N], all
 * row-major and contiguous. Each code is widened to float32 (vpmovsxbd + vcvtdq2ps: exact)
 * and multiplied into 16-lane float32 FMA accumulators, so the only roundings are
 * float32's (the summation order differs from a plain loop's: ~1e-7 relative).
 *
 * Why: at batch-1 decode a linear is bound by streaming its weight from memory, and
 * int8 codes are a quarter of float32's bytes. A tile of NR output rows (4; 8 for 1-2
 * activation rows: more streams in flight) is read once for all (up to 8) activation rows; M > 8 runs in chunks of 8 rows (each chunk streams the
 * weight again: more rows belong to the dequantizing GEMMs). Small matrices read one
 * after another get little help from the hardware prefetcher (each new one ramps it up
 * again), so every 64 bytes read of a row also prefetch (into L2) the line `prefetch`
 * bytes further on: rows of one matrix are contiguous, so that is the same stream ahead
 * (past the end of the matrix it touches whatever follows, harmless: prefetches never
 * fault). Interleaving the activation rows inside a tile keeps the weight read once.
 *
 * Needs: x86-64 with AVX-512 F, BW and VL (masked byte loads for the K tail). The module
 * builds with any C compiler (the kernel itself only with GCC or Clang on x86-64);
 * `supported()` says whether this CPU can run it, and `gemv` raises RuntimeError where
 * it cannot. The GIL is released while it runs. Plain C on the CPython API: the caller
 * passes data pointers.
 */
#include "radixlm_native.h"

#define MAX_ROWS 8 /* activation rows per weight pass */
#define NR 4       /* output rows per tile */
#define NR_WIDE 8  /* ... for 1-2 activation rows: MR * 8 + 8 + 1 <= 25 zmm */


#if HAVE_X86
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
/* into L2, not L1: streaming SmolLM2's 210 int8 matrices at batch 1 measured 11.7 GB/s with
 * T1 against 10.6 with T0 and 6 with NTA (8 KiB ahead; T2 is T1 on Intel) */
#define PREFETCH_HINT _MM_HINT_T1

/* The lane sums of 4 accumulators as one vector {sum a[0], .., sum a[3]}, each added in the
 * order of GCC's _mm512_reduce_add_ps (256-bit halves, then 128-bit ones, then lanes
 * (0 + 2) + (1 + 3)), so the results are bit for bit those of 4 reductions, in ~20
 * instructions instead of ~32 (two rows per 256-bit register from the 128-bit stage on). */
INLINE TARGET __m128 lane_sums4(const __m512 a[4]) {
    __m256 h[4]; /* h[r]: a[r]'s 256-bit halves added (upper via extractf64x4: 32x8 is DQ) */
    for (int r = 0; r < 4; r++)
        h[r] = _mm256_add_ps(_mm512_castps512_ps256(a[r]),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[r]), 1)));
    /* v = {u0 | u1}, w = {u2 | u3}: each row's 128-bit halves added */
    const __m256 v = _mm256_add_ps(_mm256_permute2f128_ps(h[0], h[1], 0x20),
                                   _mm256_permute2f128_ps(h[0], h[1], 0x31));
    const __m256 w = _mm256_add_ps(_mm256_permute2f128_ps(h[2], h[3], 0x20),
                                   _mm256_permute2f128_ps(h[2], h[3], 0x31));
    /* p: {u0[0] + u0[2], u0[1] + u0[3], u2[0] + u2[2], u2[1] + u2[3] | the same of u1, u3} */
    const __m256 p = _mm256_add_ps(_mm256_shuffle_ps(v, w, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(v, w, _MM_SHUFFLE(3, 2, 3, 2)));
    /* t: {s0, s2, s0, s2 | s1, s3, s1, s3} */
    const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(p, p, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(p, p, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm_unpacklo_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* 16 codes -> float32 (exact: |code| <= 128) */
#define WIDEN(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define WIDEN_MASKED(p, mask) \
    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8((mask), (p))))

/* One tile: MR activation rows times R output rows over all of K. MR and R are
 * compile-time constants at every call site, so the loops unroll and the MR * R
 * accumulators live in registers (MR * R + R + 1 <= 32 zmm). Tiles of 4 or 8 rows end in
 * lane_sums4 times 4 scales at once. */
INLINE TARGET void tile(const float *x, const int8_t *w, const float *scales, float *out,
                        idx_t N, idx_t K, idx_t prefetch, const int MR, const int R) {
    __m512 acc[MAX_ROWS][NR_WIDE];
    for (int m = 0; m < MR; m++)
        for (int r = 0; r < R; r++) acc[m][r] = _mm512_setzero_ps();
    idx_t k = 0;
    for (; k + 64 <= K; k += 64) {
        for (int r = 0; r < R; r++)
            _mm_prefetch((const char *)(w + r * K + k + prefetch), PREFETCH_HINT);
        for (int j = 0; j < 64; j += 16) {
            __m512 wv[NR_WIDE];
            for (int r = 0; r < R; r++) wv[r] = WIDEN(w + r * K + k + j);
            for (int m = 0; m < MR; m++) {
                __m512 xv = _mm512_loadu_ps(x + m * K + k + j);
                for (int r = 0; r < R; r++) acc[m][r] = _mm512_fmadd_ps(xv, wv[r], acc[m][r]);
            }
        }
    }
    for (; k + 16 <= K; k += 16) {
        __m512 wv[NR_WIDE];
        for (int r = 0; r < R; r++) wv[r] = WIDEN(w + r * K + k);
        for (int m = 0; m < MR; m++) {
            __m512 xv = _mm512_loadu_ps(x + m * K + k);
            for (int r = 0; r < R; r++) acc[m][r] = _mm512_fmadd_ps(xv, wv[r], acc[m][r]);
        }
    }
    if (k < K) { /* the last K % 16 columns: masked loads read nothing past the row */
        const __mmask16 mask = (__mmask16)((1u << (K - k)) - 1u);
        __m512 wv[NR_WIDE];
        for (int r = 0; r < R; r++) wv[r] = WIDEN_MASKED(w + r * K + k, mask);
        for (int m = 0; m < MR; m++) {
            __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * K + k);
            for (int r = 0; r < R; r++) acc[m][r] = _mm512_fmadd_ps(xv, wv[r], acc[m][r]);
        }
    }
    for (int m = 0; m < MR; m++) {
        if (R % 4 == 0) {
            for (int r = 0; r < R; r += 4)
                _mm_storeu_ps(out + m * N + r,
                              _mm_mul_ps(lane_sums4(acc[m] + r), _mm_loadu_ps(scales + r)));
        } else {
            for (int r = 0; r < R; r++)
                out[m * N + r] = _mm512_reduce_add_ps(acc[m][r]) * scales[r];
        }
    }
}

/* All N output rows for MR activation rows: for 1-2 rows tiles of NR_WIDE (both rows in one
 * pass: each code widened once), then tiles of NR rows, then single rows. Past 6 rows the
 * accumulators would not fit: each tile runs for the first 4 activation rows, then for the
 * others (MR - 4), while its codes are still in L1 (read once from memory). */
INLINE TARGET void rows_pass(const float *x, const int8_t *w, const float *scales, float *out,
                             idx_t N, idx_t K, idx_t prefetch, const int MR) {
    const int first = MR > 6 ? 4 : MR;
    idx_t n = 0;
    if (MR <= 2) /* SmolLM2's 210 matrices in model order: ~5% less time at 1 row, ~8% at 2 */
        for (; n + NR_WIDE <= N; n += NR_WIDE)
            tile(x, w + n * K, scales + n, out + n, N, K, prefetch, MR, NR_WIDE);
    for (; n + NR <= N; n += NR) {
        tile(x, w + n * K, scales + n, out + n, N, K, prefetch, first, NR);
        if (MR > first)
            tile(x + first * K, w + n * K, scales + n, out + first * N + n, N, K, prefetch,
                 MR - first, NR);
    }
    for (; n < N; n++) tile(x, w + n * K, scales + n, out + n, N, K, prefetch, MR, 1);
}

/* one pass per activation-row count: the loops unroll on constants */
#define PASS(MR)                                                                           \
    static TARGET void pass_##MR(const float *x, const int8_t *w, const float *s, float *o, \
                                 idx_t N, idx_t K, idx_t p) {                               \
        rows_pass(x, w, s, o, N, K, p, MR);                                                \
    }
PASS(1)
PASS(2)
PASS(3)
PASS(4)
PASS(5)
PASS(6)
PASS(7)
PASS(8)

typedef void (*pass_fn)(const float *, const int8_t *, const float *, float *, idx_t, idx_t,
                        idx_t);
static const pass_fn PASSES[MAX_ROWS + 1] = {NULL,   pass_1, pass_2, pass_3, pass_4,
                                             pass_5, pass_6, pass_7, pass_8};

static void gemv_all(const float *x, const int8_t *w, const float *s, float *out, idx_t M,
                     idx_t N, idx_t K, idx_t prefetch) {
    for (idx_t m = 0; m < M; m += MAX_ROWS) {
        idx_t rows = M - m < MAX_ROWS ? M - m : MAX_ROWS;
        PASSES[rows](x + m * K, w, s, out + m * N, N, K, prefetch);
    }
}

#endif

DEFINE_CPU_SUPPORTED(CPU_HAS("avx512f") && CPU_HAS("avx512bw") && CPU_HAS("avx512vl"))

static PyObject *py_gemv(PyObject *UNUSED self, PyObject *args) {
    unsigned long long x, w, s, out;
    long long m, n, k, prefetch;
    if (!PyArg_ParseTuple(args, "KKKKLLLL:gemv", &x, &w, &s, &out, &m, &n, &k, &prefetch))
        return NULL;
    if (!cpu_check(cpu_supported(),
                   "int8_gemv.gemv needs a CPU with AVX-512 F, BW and VL (check supported())"))
        return NULL;
    if (!check_gemm_args("gemv", m, n, k, prefetch, !x || !w || !s || !out)) return NULL;
#if HAVE_X86
    Py_BEGIN_ALLOW_THREADS
    gemv_all((const float *)(uintptr_t)x, (const int8_t *)(uintptr_t)w,
             (const float *)(uintptr_t)s, (float *)(uintptr_t)out, (idx_t)m, (idx_t)n,
             (idx_t)k, (idx_t)prefetch);
    Py_END_ALLOW_THREADS
#endif
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS,
     "supported() -> bool: whether this CPU has AVX-512 F, BW and VL (what gemv needs)."},
    {"gemv", py_gemv, METH_VARARGS,
     "gemv(x, codes, scales, out, M, N, K, prefetch) -> None\n\n"
     "out[m, n] = scales[n] * sum_k x[m, k] * codes[n, k] on data pointers (ints): x float32\n"
     "[M, K], codes int8 [N, K], scales float32 [N], out float32 [M, N], contiguous;\n"
     "prefetch: bytes ahead of each weight row to prefetch. The caller owns the checks of\n"
     "the buffers themselves (radixlm.kernels.cpu.int8_gemv)."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(int8_gemv,
              "int8 per-channel weight-only GEMV for 1-8 float32 rows on AVX-512 (int8_gemv.c).")
