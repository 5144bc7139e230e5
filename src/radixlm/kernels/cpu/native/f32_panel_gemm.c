/* float32 GEMM for decode-sized batches on a weight packed in panels: out = x @ w.T.
 *
 *   out[m, n] = sum_k x[m, k] * w[n, k]
 *
 * x float32 [M, K] row-major, out float32 [M, N] row-major, and the weight packed once at
 * load as panels of NR = 48 output columns: panel p holds w[48p .. 48p + 47, k] for k = 0..K-1,
 * 48 floats (three cache lines) per k, K * 48 floats per panel, panels back to back; the last
 * panel is zero-padded past N. Each output is one float32 FMA chain over k = 0, 1, .., K-1
 * (its own lane of an accumulator: no cross-lane reduction), so a row's result does not
 * depend on the other rows or on M.
 *
 * Why: at 32 rows a step's GEMMs are as much arithmetic (16 FLOP per weight byte) as this
 * machine's one-core memory stream can feed (~12 GB/s against ~150 GFLOP/s), so neither may
 * wait on the other. The register block is MR = 8 rows x 48 columns (24 zmm accumulators,
 * 3 for the panel's k-th line, broadcasts from memory): per k, 3 vector loads + 8 broadcasts
 * for 24 FMAs, FMA-bound from L1 (~160 GFLOP/s on one weight in cache). The ceil(M / 8) row
 * blocks pass over a chunk of KC lines of a panel (in L1) before the next chunk, and
 * meanwhile the NEXT panel is prefetched into L2 a few cache lines per k, spread over all the
 * passes, so the stream from memory runs at the pace of the arithmetic instead of in bursts
 * that the fill buffers cannot hold (SmolLM2's 121 linears at 32 rows, in model order:
 * 75 ms, 100 without the prefetch; oneDNN 95, MKL 94-106). The
 * packed layout is one contiguous stream per matrix (the hardware prefetcher sees one run).
 *
 * Needs: x86-64 with AVX-512 F. The module builds with any C compiler (the kernel itself only
 * with GCC or Clang on x86-64); `supported()` says whether this CPU can run it, and `gemm`
 * raises RuntimeError where it cannot. The GIL is released while it runs. Plain C on the
 * CPython API: the caller passes data pointers (radixlm.kernels.cpu.f32_panel_gemm checks).
 */
#include "radixlm_native.h"

#define NR 48    /* output columns per panel: 3 zmm of 16 floats */
#define VPR 3    /* zmm per panel line */
#define MR_MAX 8 /* rows per register block: 8 * 3 accumulators + 3 panel registers <= 32 */
#define LINE 64  /* bytes per cache line */
/* k per chunk: the ceil(M / 8) row blocks pass over 64 lines of the panel (12 KiB, in L1)
 * before the next 64, the accumulators saved to `out` and reloaded between chunks (the same
 * FMA chain, so the same result). At 32 rows, streaming SmolLM2's linears in model order,
 * 64-80 measured ~4% faster than one chunk of all of K (72-73 vs 76 ms; 32, 48: no gain) */
#define KC 64

#if HAVE_X86
#define TARGET __attribute__((target("avx512f")))

/* The prefetch cursor over the next panel: `at` advances `lines` cache lines per k until it
 * reaches `end` (the end of the matrix: nothing past it is touched). */
typedef struct {
    const char *at;
    const char *end;
    int lines;
} prefetch_t;

INLINE TARGET void prefetch_step(prefetch_t *pf) {
    for (int i = 0; i < pf->lines; i++) {
        if (pf->at >= pf->end) return;
        _mm_prefetch(pf->at, _MM_HINT_T1);
        pf->at += LINE;
    }
}

/* The lanes of vector v (columns 16v .. 16v + 15 of the panel) that hold one of its `cols`
 * valid columns. */
INLINE __mmask16 col_mask(int cols, int v) {
    const int left = cols - 16 * v;
    return left >= 16 ? (__mmask16)0xFFFF : left > 0 ? (__mmask16)((1u << left) - 1u) : 0;
}

/* MR rows (a compile-time constant at every call site: the loops unroll, the accumulators
 * live in registers) times one panel over k0 <= k < k1, into out[m * N + c] for the panel's
 * `cols` valid columns (48, or fewer in a padded last panel: masked loads and stores); from
 * k0 > 0 on, the chains go on from the sums the previous chunk left in `out`. */
INLINE TARGET void block(const float *x, const float *panel, float *out, idx_t N, idx_t K,
                         idx_t k0, idx_t k1, int cols, prefetch_t *pf, const int MR) {
    __m512 acc[MR_MAX][VPR];
    for (int m = 0; m < MR; m++)
        for (int v = 0; v < VPR; v++)
            acc[m][v] = k0 ? _mm512_maskz_loadu_ps(col_mask(cols, v), out + m * N + 16 * v)
                           : _mm512_setzero_ps();
    for (idx_t k = k0; k < k1; k++) {
        const float *line = panel + k * NR;
        const __m512 w0 = _mm512_loadu_ps(line);
        const __m512 w1 = _mm512_loadu_ps(line + 16);
        const __m512 w2 = _mm512_loadu_ps(line + 32);
        prefetch_step(pf);
        for (int m = 0; m < MR; m++) {
            const __m512 xb = _mm512_set1_ps(x[m * K + k]);
            acc[m][0] = _mm512_fmadd_ps(xb, w0, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(xb, w1, acc[m][1]);
            acc[m][2] = _mm512_fmadd_ps(xb, w2, acc[m][2]);
        }
    }
    for (int m = 0; m < MR; m++)
        for (int v = 0; v < VPR; v++)
            _mm512_mask_storeu_ps(out + m * N + 16 * v, col_mask(cols, v), acc[m][v]);
}

/* One chunk of one panel times all M rows, MR_MAX at a time, then the 1-7 left, each count
 * unrolled. */
static TARGET void panel_rows(const float *x, const float *panel, float *out, idx_t M, idx_t N,
                              idx_t K, idx_t k0, idx_t k1, int cols, prefetch_t *pf) {
    idx_t m = 0;
    for (; m + MR_MAX <= M; m += MR_MAX)
        block(x + m * K, panel, out + m * N, N, K, k0, k1, cols, pf, 8);
    const float *xm = x + m * K;
    float *om = out + m * N;
    switch (M - m) {
    case 1: block(xm, panel, om, N, K, k0, k1, cols, pf, 1); break;
    case 2: block(xm, panel, om, N, K, k0, k1, cols, pf, 2); break;
    case 3: block(xm, panel, om, N, K, k0, k1, cols, pf, 3); break;
    case 4: block(xm, panel, om, N, K, k0, k1, cols, pf, 4); break;
    case 5: block(xm, panel, om, N, K, k0, k1, cols, pf, 5); break;
    case 6: block(xm, panel, om, N, K, k0, k1, cols, pf, 6); break;
    case 7: block(xm, panel, om, N, K, k0, k1, cols, pf, 7); break;
    default: break;
    }
}

/* All panels, chunk by chunk. The next panel's 3K cache lines are prefetched over the
 * R * K steps of the R = ceil(M / 8) row blocks' passes: ceil(3 / R) lines a step (all of
 * them by the end of the passes). */
static void gemm_all(const float *x, const float *packed, float *out, idx_t M, idx_t N,
                     idx_t K) {
    const idx_t panels = (N + NR - 1) / NR;
    const idx_t passes = (M + MR_MAX - 1) / MR_MAX;
    const int lines = (int)((VPR + passes - 1) / passes);
    const char *end = (const char *)(packed + panels * K * NR);
    for (idx_t p = 0; p < panels; p++) {
        const float *panel = packed + p * K * NR;
        prefetch_t pf = {(const char *)(panel + K * NR), end, lines};
        const idx_t left = N - p * NR;
        const int cols = left < NR ? (int)left : NR;
        for (idx_t k0 = 0; k0 < K; k0 += KC)
            panel_rows(x, panel, out + p * NR, M, N, K, k0, k0 + KC < K ? k0 + KC : K, cols, &pf);
    }
}

#endif

DEFINE_CPU_SUPPORTED(CPU_HAS("avx512f"))

static PyObject *py_panel_width(PyObject *UNUSED self, PyObject *UNUSED noargs) {
    return PyLong_FromLong(NR);
}

static PyObject *py_gemm(PyObject *UNUSED self, PyObject *args) {
    float *ptrs[3];
    long long sizes[4]; /* M, N, K, 0 */
    if (!cpu_check(cpu_supported(),
                   "f32_panel_gemm.gemm needs a CPU with AVX-512 F (check supported())"))
        return NULL;
    if (!parse_float_gemm(args, "KKKLLL:gemm", "gemm", ptrs, sizes)) return NULL;
#if HAVE_X86
    WITHOUT_GIL(gemm_all(ptrs[0], ptrs[1], ptrs[2], (idx_t)sizes[0], (idx_t)sizes[1],
                         (idx_t)sizes[2]));
#endif
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS,
     "supported() -> bool: whether this CPU has AVX-512 F (what gemm needs)."},
    {"panel_width", py_panel_width, METH_NOARGS,
     "panel_width() -> int: output columns per packed panel (48)."},
    {"gemm", py_gemm, METH_VARARGS,
     "gemm(x, packed, out, M, N, K) -> None\n\n"
     "out[m, n] = sum_k x[m, k] * w[n, k] on data pointers (ints): x float32 [M, K], packed\n"
     "float32 [ceil(N / 48), K, 48] (w's panels, zero-padded past N), out float32 [M, N],\n"
     "contiguous. The caller owns the checks of the buffers themselves\n"
     "(radixlm.kernels.cpu.f32_panel_gemm)."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(f32_panel_gemm, "float32 GEMM for decode-sized batches on AVX-512, the weight "
                              "packed in panels of 48 output columns (f32_panel_gemm.c).")
