/* float32 GEMM on AMX bfloat16 tiles with float32 accuracy: out = x @ w.T.
 *
 *   out[m, n] = sum_k x[m, k] * w[n, k]
 *
 * AMX multiplies bfloat16 (8 significant bits), so each float32 operand is cut into three
 * bfloat16 pieces by truncation, v = v0 + v1 + v2 exactly (v0 = v's top 16 bits, v1 = the
 * top 16 bits of the remainder, v2 what is left, at most 8 significant bits; |v1| < 2^-7 |v|,
 * |v2| < 2^-14 |v|), and the six products that are not negligible are accumulated in float32
 * (a bfloat16 x bfloat16 product is exact in float32):
 *
 *   x0 w0 + x0 w1 + x1 w0 + x0 w2 + x1 w1 + x2 w0        (dropped: x1 w2 + x2 w1 + x2 w2,
 *                                                          below 2^-20 |x w| together)
 *
 * so each output is a float32 sum of 6K exact products whose own error is below 2^-20 of the
 * sum of |x w|, the size of a float32 dot product's rounding over K >= 16 terms (another
 * summation order than MKL's, not bit-identical to it). Input and output denormals are
 * flushed to zero (AMX's rule), far below any weight or activation of a model.
 *
 * Why: prefill is bound by arithmetic, and one TDPBF16PS is 16 x 16 x 32 multiply-adds in
 * ~16 cycles: even six of them per tile pair, and the cutting, beat AVX-512 FMAs by ~1.2-1.35x
 * (3 layers of SmolLM2's linears: 512 rows 58 vs oneDNN 70 ms, 188 vs 154 GFLOP/s; 128 rows
 * 15 vs 20 ms). Not at decode sizes: cutting a weight unit (~50 ns per 512 weights) and the
 * tile products do not overlap with each other or with the weight stream, so at 32 rows all
 * 121 linears streamed take 83-88 ms against the panel GEMM's 72 (1 row: 57-70 vs 36), and the
 * load-time measurement (runtime/model/gemm_choice.py) keeps this kernel for the large buckets.
 *
 * The weight is packed once at load in tile units of 16 output columns x 32 k, float32 in
 * the order AMX's B operand wants (VNNI pairs): unit (t, b) holds, for r = 0..15 and
 * c = 0..15, w[16t + c, 32b + 2r] and w[16t + c, 32b + 2r + 1] (32 floats a row r), the units
 * of one column tile over all of K back to back, tiles back to back; zeros past N and K.
 * A call cuts x into its three pieces once ([3][M16][K32] bfloat16, zero-padded); then, per
 * block of BLOCK_TILES 16-row tiles of x and per column tile, the block's first pair of row
 * tiles cuts the weight's units into pieces as it goes (into a buffer in L1/L2) and every pair
 * runs over them, two accumulator tiles at a time.
 *
 * Needs: x86-64 with AMX-TILE, AMX-BF16, AVX512-BF16 and AVX-512 F, and the kernel's leave to
 * use AMX state (arch_prctl ARCH_REQ_XCOMP_PERM, asked for by `supported()`). The module
 * builds with any C compiler (the kernel only with GCC or Clang on x86-64); `gemm` raises
 * RuntimeError where it cannot run. The GIL is released while it runs. Plain C on the
 * CPython API: the caller passes data pointers (radixlm.kernels.cpu.f32_amx_gemm checks).
 */
#define RADIXLM_NATIVE_AMX /* the header's AMX tile helpers */
#include "radixlm_native.h"

#define TN 16                  /* output columns per tile */
#define TK 32                  /* k per tile: 16 rows of bfloat16 pairs */
#define TM 16                  /* rows of x per tile */
#define UNIT (TK * TN)         /* floats (or bfloat16 pieces) per weight unit: 512 */
#define PIECES 3
/* Row tiles of x per block: a block's pieces (3 x 128 rows x K bfloat16, 442 KiB at K = 576)
 * stay in L2 while every column tile of the weight passes over them, the weight's units cut
 * into pieces once per block. 3 layers of SmolLM2's linears at 512 rows: blocks of 2, 4, 8,
 * 16 tiles 74, 63, 58, 67 ms (oneDNN 70). */
#define BLOCK_TILES 8

#if HAVE_X86_LINUX
#define TARGET __attribute__((target("avx512f,avx512bf16,amx-tile,amx-bf16")))

/* v = p0 + p1 + p2 exactly: p0 = v's top 16 bits, p1 = the remainder's, p2 what is left
 * (at most 8 significant bits: a bfloat16). */
INLINE TARGET void cut(__m512 v, __m512 *p0, __m512 *p1, __m512 *p2) {
    const __m512i top = _mm512_set1_epi32((int)0xFFFF0000u);
    *p0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), top));
    const __m512 rest = _mm512_sub_ps(v, *p0);
    *p1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(rest), top));
    *p2 = _mm512_sub_ps(rest, *p1);
}

/* 32 floats (lo: the first 16, hi: the next) -> their three pieces as 32 bfloat16 each, in
 * the same order, at dst, dst + stride, dst + 2 stride (stride in bfloat16). */
INLINE TARGET void cut32(__m512 lo, __m512 hi, uint16_t *dst, idx_t stride) {
    __m512 a0, a1, a2, b0, b1, b2;
    cut(lo, &a0, &a1, &a2);
    cut(hi, &b0, &b1, &b2);
    _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(b0, a0));
    _mm512_storeu_si512(dst + stride, (__m512i)_mm512_cvtne2ps_pbh(b1, a1));
    _mm512_storeu_si512(dst + 2 * stride, (__m512i)_mm512_cvtne2ps_pbh(b2, a2));
}

/* x [M, K] -> xp [3][M16][K32] bfloat16 pieces, zeros past M and K. */
static TARGET void cut_rows(const float *x, uint16_t *xp, idx_t M, idx_t K, idx_t M16,
                            idx_t K32) {
    const idx_t plane = M16 * K32;
    for (idx_t m = 0; m < M; m++) {
        for (idx_t k = 0; k < K32; k += TK) {
            const idx_t left = K - k;
            const __mmask16 mlo = left >= 16 ? 0xFFFF : left > 0 ? (1u << left) - 1u : 0;
            const __mmask16 mhi = left >= 32 ? 0xFFFF : left > 16 ? (1u << (left - 16)) - 1u : 0;
            const __m512 lo = _mm512_maskz_loadu_ps(mlo, x + m * K + k);
            const __m512 hi = _mm512_maskz_loadu_ps(mhi, x + m * K + k + 16);
            cut32(lo, hi, xp + m * K32 + k, plane);
        }
    }
    for (int p = 0; p < PIECES; p++)
        memset(xp + p * plane + M * K32, 0, (size_t)((M16 - M) * K32) * sizeof(uint16_t));
}

/* One weight unit (512 floats, B-operand order) -> its three pieces (512 bfloat16 each). */
INLINE TARGET void cut_unit(const float *unit, uint16_t *dst) {
    for (int r = 0; r < TK / 2; r++)
        cut32(_mm512_loadu_ps(unit + 32 * r), _mm512_loadu_ps(unit + 32 * r + 16),
              dst + 32 * r, UNIT);
}

/* Accumulator tile `acc` += the six products of x's pieces (tiles 5, 6, 7) and the weight's
 * (tiles 2, 3, 4), smallest first. Tile numbers are immediates: one macro per accumulator. */
#define SIX_PRODUCTS(acc)              \
    do {                               \
        _tile_dpbf16ps(acc, 7, 2);     \
        _tile_dpbf16ps(acc, 6, 3);     \
        _tile_dpbf16ps(acc, 6, 2);     \
        _tile_dpbf16ps(acc, 5, 4);     \
        _tile_dpbf16ps(acc, 5, 3);     \
        _tile_dpbf16ps(acc, 5, 2);     \
    } while (0)

/* x's three pieces of row tile `mt`, k block `b`, into tiles 5, 6, 7. */
#define LOAD_X(xp, mt, b, plane, K32)                                             \
    do {                                                                         \
        const uint16_t *a_ = (xp) + (mt) * TM * (K32) + (b) * TK;                \
        _tile_loadd(7, a_ + 2 * (plane), (K32) * 2);                             \
        _tile_loadd(6, a_ + (plane), (K32) * 2);                                 \
        _tile_loadd(5, a_, (K32) * 2);                                           \
    } while (0)

/* A 16 x 16 float32 tile at `tile` (row stride 16) into out's rows m0.. and columns n0..,
 * as many as lie inside [M, N]. */
static void copy_tile(const float *tile, float *out, idx_t M, idx_t N, idx_t m0, idx_t n0) {
    const idx_t rows = M - m0 < TM ? M - m0 : TM, cols = N - n0 < TN ? N - n0 : TN;
    for (idx_t i = 0; i < rows; i++)
        memcpy(out + (m0 + i) * N + n0, tile + i * TN, (size_t)cols * sizeof(float));
}

/* Accumulator tile `acc` -> out's rows m0.. and columns n0..: straight into out where the tile
 * lies wholly inside [M, N], else through `scratch` (16 x 16 floats). */
#define STORE_ACC(acc, out, M, N, m0, n0, scratch)                                   \
    do {                                                                            \
        if ((m0) + TM <= (M) && (n0) + TN <= (N)) {                                 \
            _tile_stored(acc, (out) + (m0) * (N) + (n0), (N) * (idx_t)sizeof(float)); \
        } else {                                                                    \
            _tile_stored(acc, scratch, TN * (idx_t)sizeof(float));                  \
            copy_tile(scratch, out, M, N, m0, n0);                                  \
        }                                                                           \
    } while (0)

static TARGET void gemm_all(const float *x, const float *packed, float *out, idx_t M, idx_t N,
                            idx_t K, uint16_t *xp, uint16_t *wp) {
    const idx_t M16 = (M + TM - 1) / TM * TM, K32 = (K + TK - 1) / TK * TK;
    const idx_t tiles = (N + TN - 1) / TN, blocks = K32 / TK, row_tiles = M16 / TM;
    const idx_t plane = M16 * K32;
    float scratch[TM * TN];
    static const uint8_t tile_rows[8] = {16, 16, 16, 16, 16, 16, 16, 16}; /* of 64 bytes */
    load_tile_config(tile_rows);
    cut_rows(x, xp, M, K, M16, K32);
    for (idx_t m0 = 0; m0 < row_tiles; m0 += BLOCK_TILES) {
        const idx_t m1 = m0 + BLOCK_TILES < row_tiles ? m0 + BLOCK_TILES : row_tiles;
        for (idx_t t = 0; t < tiles; t++) {
            const float *units = packed + t * blocks * UNIT;
            for (idx_t mt = m0; mt < m1; mt += 2) {
                const int pair = mt + 1 < m1;
                _tile_zero(0);
                _tile_zero(1);
                for (idx_t b = 0; b < blocks; b++) {
                    uint16_t *w = wp + b * PIECES * UNIT;
                    if (mt == m0) cut_unit(units + b * UNIT, w); /* first pass: cut as it goes */
                    _tile_loadd(2, w, 64);
                    _tile_loadd(3, w + UNIT, 64);
                    _tile_loadd(4, w + 2 * UNIT, 64);
                    LOAD_X(xp, mt, b, plane, K32);
                    SIX_PRODUCTS(0);
                    if (pair) {
                        LOAD_X(xp, mt + 1, b, plane, K32);
                        SIX_PRODUCTS(1);
                    }
                }
                STORE_ACC(0, out, M, N, mt * TM, t * TN, scratch);
                if (pair) STORE_ACC(1, out, M, N, (mt + 1) * TM, t * TN, scratch);
            }
        }
    }
    _tile_release();
}

/* The CPU has the instructions and the kernel lets this process use AMX's tile state. */
static int cpu_supported(void) {
    static int answer = -1;
    if (answer >= 0) return answer;
    unsigned a, b, c, d;
    answer = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return answer;
    const int avx512f = (b >> 16) & 1, amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return answer;
    const int avx512bf16 = (a >> 5) & 1;
    if (!(avx512f && amx_bf16 && amx_tile && avx512bf16)) return answer;
    answer = amx_permission();
    return answer;
}
#else
static int cpu_supported(void) { return 0; }
#endif

DEFINE_SUPPORTED

static PyObject *py_tile_shape(PyObject *UNUSED self, PyObject *UNUSED noargs) {
    return Py_BuildValue("(ii)", TN, TK);
}

static PyObject *py_gemm(PyObject *UNUSED self, PyObject *args) {
    float *ptrs[3];
    long long sizes[4]; /* M, N, K, 0 */
    if (!cpu_check(cpu_supported(), "f32_amx_gemm.gemm needs a CPU with AMX-BF16 and "
                   "AVX512-BF16 and the kernel's leave to use AMX (check supported())"))
        return NULL;
    if (!parse_float_gemm(args, "KKKLLL:gemm", "gemm", ptrs, sizes)) return NULL;
#if HAVE_X86_LINUX
    const idx_t M = (idx_t)sizes[0], N = (idx_t)sizes[1], K = (idx_t)sizes[2];
    const idx_t M16 = (M + TM - 1) / TM * TM, K32 = (K + TK - 1) / TK * TK;
    /* x's pieces, then one column tile's weight pieces; 64-byte aligned for the tiles */
    const size_t xp_bytes = (size_t)(PIECES * M16 * K32) * sizeof(uint16_t);
    const size_t wp_bytes = (size_t)(PIECES * K32 * TN) * sizeof(uint16_t);
    /* a fresh buffer each call: one kept per thread between calls measured no faster */
    uint16_t *buf = aligned_alloc(64, (xp_bytes + wp_bytes + 63) / 64 * 64);
    if (!buf) return PyErr_NoMemory();
    WITHOUT_GIL(gemm_all(ptrs[0], ptrs[1], ptrs[2], M, N, K, buf,
                         buf + xp_bytes / sizeof(uint16_t)));
    free(buf);
#endif
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS,
     "supported() -> bool: whether this CPU has AMX-BF16 and AVX512-BF16 and this process may "
     "use AMX (what gemm needs)."},
    {"tile_shape", py_tile_shape, METH_NOARGS,
     "tile_shape() -> (16, 32): output columns and k per packed weight unit."},
    {"gemm", py_gemm, METH_VARARGS,
     "gemm(x, packed, out, M, N, K) -> None\n\n"
     "out[m, n] = sum_k x[m, k] * w[n, k] on data pointers (ints): x float32 [M, K], packed\n"
     "float32 [ceil(N / 16), ceil(K / 32), 16, 16, 2] (w's units, zero-padded), out float32\n"
     "[M, N], contiguous. The caller owns the checks of the buffers themselves\n"
     "(radixlm.kernels.cpu.f32_amx_gemm)."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(f32_amx_gemm, "float32 GEMM on AMX bfloat16 tiles, each operand cut into three "
                            "bfloat16 pieces (f32_amx_gemm.c).")
