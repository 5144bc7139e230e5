/* Grouped int4 / int8 GEMV and small GEMM (1..8 rows) on AVX-512 VNNI, float32-faithful.

   Weights, one float32 scale per group g of 32 along k:
     bits 4: w[n, k] = scale[n, g] * q[n, k] + min[n, g], codes q in [0, 15] (GGUF Q4_0:
             min = -8 scale; Q4_1: min = m; torch's int4 convention (q - 8) s + z: z - 8 s);
     bits 8: w[n, k] = scale[n, g] * c[n, k], codes c in [-128, 127] (GGUF Q8_0), stored as
             c + 128 (vpdpbusd wants the u8 operand there).

   Activations stay float32-faithful: each row x is written as a 24-bit fixed-point integer
   X = round(x * 2^e) with a per-row power of two 2^e (|X| <= 2^23 - 2^15), and X in three
   balanced base-256 digits X = 65536 D2 + 256 D1 + D0, each D in [-128, 127] (one s8 plane
   each). vpdpbusd multiplies the codes (u8) by a plane (s8) and adds 4 products per int32
   lane; per group of 32 and output row that gives A_p = sum code * D_p.
     bits 4: |A_p| <= 32 * 15 * 128 = 61440, so T = 256 A2 + A1 (|T| < 2^24) and A0 convert
             to float exactly, and the group's dot is 256 T + A0 (one float rounding); with
             S = sum of the group's X, y[n] = 2^-e sum_g (scale dot_g + min S_g).
     bits 8: A_p - 128 sum_g(D_p) removes the offset exactly in int32 (|.| <= 2^19), then
             dot = (256 A2 + A1) 256 + A0 in float (two roundings), y = 2^-e sum_g scale dot_g.
   The only approximation beside float32 accumulation is X's rounding: 2^-24 of the row's
   largest |x| (float32 itself keeps 2^-24 of each element).

   Layout (built once by pack()): output rows in blocks of 16 (N padded with zero rows), and
   per block and group one tile, tiles in (block, group) order so a GEMV streams the buffer
   once front to back. Chunk c (64 bytes) of a tile holds 4 codes per row, row 16 b + l at
   bytes 4 l .. 4 l + 3:
     bits 4: 4 chunks; chunk c holds k0 + 8c + j (j < 4) in the low nibbles and k0 + 8c + 4 + j
             in the high ones;
     bits 8: 8 chunks; chunk c holds k0 + 4c + j.
   Then scale[16] (and for bits 4 min[16]): float32, or float16 when the caller found every
   one exactly representable. Bytes per weight: bits 4 0.625 (f16, the size of GGUF's Q4_1)
   or 0.75; bits 8 1.0625 (f16, Q8_0's) or 1.125.

   Per-channel int8 (the rows layout: pack_rows, gemv(..., rows_layout=1)): w[n, k] =
   scale[n] * c[n, k], one float32 scale per output row (codes c in [-128, 127], stored + 128
   as above; kernels/cpu/int8_vnni.py, `int8-vnni`). The same 16 x 32 code tiles, per block
   all groups in order, then the block's scale[16] once (1 + 4 / K bytes per weight). No
   per-group float work: each plane's vpdpbusd products add up in int32 over the whole row,
   |A_p| <= K * 255 * 128 < 2^31 for K <= 65536 (checked); A_p - 128 R_p, R_p the plane's
   digit sum over the row, removes the offset exactly (|.| <= 2^14 K), then
   dot = (256 A2 + A1) 256 + A0 in float (each A_p converts exactly for K <= 1024, else to
   2^-24 of itself: at most float32's own rounding of a K-term dot) and y = 2^-e scale dot:
   one multiply per output.

   Everything runs with the GIL released on the caller's thread. Pointers come in as integers
   from the Python launchers (kernels/cpu/q4_gemv.py, int8_vnni.py), which check shapes,
   dtypes and contiguity; this file trusts them. */

#include "radixlm_native.h"

#define GROUP 32
#define BLOCK_ROWS 16
#define CODE_BYTES(bits) ((bits) == 8 ? 512 : 256) /* a tile's codes: 16 rows x 32 */
/* codes, then 16 scales (and for 4 bits 16 mins) of 2 or 4 bytes */
#define TILE_BYTES(bits, half) (CODE_BYTES(bits) + ((bits) == 8 ? 1 : 2) * ((half) ? 32 : 64))
#define MAX_ROWS 8
/* How far ahead of the tile being read the stream is fetched, and into L2 (T1), not L1:
   SmolLM2's 210 matrices in model order took 3-12% less time at 1-2 rows (int4; Q8_0 3-14% at
   1 row, 18-21% at 2) than 4 KiB into L1, the model's GEMMs 7% (benchmarks/
   cpu_quant_gemv_builds.py, cpu_weight_stream.py); 8-16 KiB measured alike, 8 rows unchanged */
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 12288
#endif
#ifndef PREFETCH_HINT
#define PREFETCH_HINT _MM_HINT_T1
#endif
#define XMAX 8355711.0f     /* 127 * (65536 + 256 + 1): the largest balanced 3-digit value */

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c")))

static Py_ssize_t packed_bytes(Py_ssize_t n, Py_ssize_t k, int bits, int half) {
    return (n + BLOCK_ROWS - 1) / BLOCK_ROWS * (k / GROUP) * TILE_BYTES(bits, half);
}

/* rows layout: per block, the groups' code tiles then scale[16] float32 */
#define ROWS_MAX_K 65536 /* int32 plane sums: K * 255 * 128 < 2^31 */
static Py_ssize_t block_bytes_rows(Py_ssize_t k) { return (k / GROUP) * CODE_BYTES(8) + 64; }
static Py_ssize_t packed_bytes_rows(Py_ssize_t n, Py_ssize_t k) {
    return (n + BLOCK_ROWS - 1) / BLOCK_ROWS * block_bytes_rows(k);
}

/* -- packing (plain C, once at load) --------------------------------------------------- */
VNNI static void put_scale(uint8_t *at, float v, int half) {
    if (half) {
        uint16_t h = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(v), 0), 0);
        memcpy(at, &h, 2);
    } else {
        memcpy(at, &v, 4);
    }
}

/* row l of a tile's 8 chunks of int8 codes (chunk c: k0 + 4c .. + 3), stored + 128 */
static void put_int8_codes(uint8_t *tile, int l, const uint8_t *q) {
    for (int c = 0; c < 8; c++)
        for (int j = 0; j < 4; j++)
            tile[64 * c + 4 * l + j] = (uint8_t)((int)(int8_t)q[4 * c + j] + 128);
}

/* codes: u8 in [0, 15] (bits 4) or s8 (bits 8, stored + 128 as u8); mins unused for 8 */
VNNI static void pack_tiles(uint8_t *dst, const uint8_t *codes, const float *scales,
                            const float *mins, Py_ssize_t n, Py_ssize_t k, int bits, int half) {
    Py_ssize_t groups = k / GROUP, blocks = (n + BLOCK_ROWS - 1) / BLOCK_ROWS;
    int width = half ? 2 : 4;
    memset(dst, 0, (size_t)packed_bytes(n, k, bits, half));
    for (Py_ssize_t b = 0; b < blocks; b++) {
        for (Py_ssize_t g = 0; g < groups; g++) {
            uint8_t *tile = dst + (b * groups + g) * TILE_BYTES(bits, half);
            uint8_t *ts = tile + CODE_BYTES(bits), *tm = ts + BLOCK_ROWS * width;
            for (int l = 0; l < BLOCK_ROWS; l++) {
                Py_ssize_t row = b * BLOCK_ROWS + l;
                if (row >= n) break; /* padded rows: zero codes, scales and mins */
                const uint8_t *q = codes + row * k + g * GROUP;
                for (int c = 0; c < 4 && bits == 4; c++)
                    for (int j = 0; j < 4; j++)
                        tile[64 * c + 4 * l + j] =
                            (uint8_t)((q[8 * c + j] & 15) | ((q[8 * c + 4 + j] & 15) << 4));
                if (bits == 8) put_int8_codes(tile, l, q);
                put_scale(ts + l * width, scales[row * groups + g], half);
                if (bits == 4) put_scale(tm + l * width, mins[row * groups + g], half);
            }
        }
    }
}

/* rows layout: codes s8 [n, k], scales f32 [n] */
static void pack_tiles_rows(uint8_t *dst, const uint8_t *codes, const float *scales,
                            Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t groups = k / GROUP, blocks = (n + BLOCK_ROWS - 1) / BLOCK_ROWS;
    memset(dst, 0, (size_t)packed_bytes_rows(n, k));
    for (Py_ssize_t b = 0; b < blocks; b++) {
        uint8_t *block = dst + b * block_bytes_rows(k);
        for (int l = 0; l < BLOCK_ROWS && b * BLOCK_ROWS + l < n; l++) { /* padded rows: 0 */
            Py_ssize_t row = b * BLOCK_ROWS + l;
            for (Py_ssize_t g = 0; g < groups; g++)
                put_int8_codes(block + g * CODE_BYTES(8), l, codes + row * k + g * GROUP);
            memcpy(block + groups * CODE_BYTES(8) + 4 * l, scales + row, 4);
        }
    }
}

/* -- activations: three s8 digit planes per row ---------------------------------------- */
typedef struct {
    int8_t *planes;  /* [rows][3][k] */
    float *sums;     /* [rows][groups]: S_g as float */
    int32_t *psums;  /* [rows][groups][4]: each plane's digit sum per group (3 used) */
    int32_t *rowsums; /* [rows][4]: each plane's digit sum over the row (3 used) */
    float *unscale;  /* [rows]: 2^-e */
    int *finite;     /* [rows]: 0 when the row holds inf/nan */
} Prepared;

VNNI static float row_absmax(const float *x, Py_ssize_t k, int *finite) {
    __m512 m = _mm512_setzero_ps();
    __m512i bad = _mm512_setzero_si512();
    const __m512i exp_mask = _mm512_set1_epi32(0x7f800000);
    for (Py_ssize_t i = 0; i < k; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        /* an all-ones exponent is inf or nan */
        __m512i e = _mm512_and_si512(_mm512_castps_si512(v), exp_mask);
        bad = _mm512_or_si512(bad, _mm512_maskz_mov_epi32(
                                      _mm512_cmpeq_epi32_mask(e, exp_mask), exp_mask));
        m = _mm512_max_ps(m, _mm512_abs_ps(v));
    }
    *finite = _mm512_reduce_or_epi32(bad) == 0;
    return _mm512_reduce_max_ps(m);
}

VNNI static void prepare_row(const float *x, Py_ssize_t k, int8_t *planes, float *sums,
                             int32_t *psums, float *unscale, int *finite) {
    float amax = row_absmax(x, k, finite);
    int e = 0;
    if (amax > 0.0f && *finite) {
        int ex;
        frexpf(amax, &ex); /* amax = f * 2^ex, f in [0.5, 1) */
        e = 23 - ex;
        if (ldexpf(amax, e) > XMAX) e -= 1; /* keep round(amax 2^e) within 3 balanced digits */
        if (e > 126) e = 126; /* 2^e stays finite: subnormal rows round to steps of 2^-126 */
    }
    *unscale = ldexpf(1.0f, -e);
    const __m512 scale = _mm512_set1_ps(ldexpf(1.0f, e));
    const __m512i half = _mm512_set1_epi32(128), low = _mm512_set1_epi32(255);
    for (Py_ssize_t g = 0; g < k / GROUP; g++) {
        __m512i total = _mm512_setzero_si512(), t0 = total, t1 = total, t2 = total;
        for (int h = 0; h < GROUP; h += 16) {
            Py_ssize_t i = g * GROUP + h;
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), scale));
            if (!*finite) v = _mm512_setzero_si512();
            total = _mm512_add_epi32(total, v);
            /* balanced digits: d = ((v + 128) & 255) - 128, v = (v - d) >> 8 (exact) */
            __m512i d0 = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, half), low), half);
            v = _mm512_srai_epi32(_mm512_sub_epi32(v, d0), 8);
            __m512i d1 = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, half), low), half);
            __m512i d2 = _mm512_srai_epi32(_mm512_sub_epi32(v, d1), 8);
            t0 = _mm512_add_epi32(t0, d0);
            t1 = _mm512_add_epi32(t1, d1);
            t2 = _mm512_add_epi32(t2, d2);
            _mm_storeu_si128((__m128i *)(planes + i), _mm512_cvtepi32_epi8(d0));
            _mm_storeu_si128((__m128i *)(planes + k + i), _mm512_cvtepi32_epi8(d1));
            _mm_storeu_si128((__m128i *)(planes + 2 * k + i), _mm512_cvtepi32_epi8(d2));
        }
        sums[g] = (float)_mm512_reduce_add_epi32(total);
        psums[4 * g] = _mm512_reduce_add_epi32(t0);
        psums[4 * g + 1] = _mm512_reduce_add_epi32(t1);
        psums[4 * g + 2] = _mm512_reduce_add_epi32(t2);
        psums[4 * g + 3] = 0;
    }
}

/* -- the GEMV -------------------------------------------------------------------------- */
VNNI static inline __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* One 16-row block, all groups, for M activation rows: y[m][0..15] (unscaled).
   bits 4: q[2c] holds k0 + 8c + 0..3 (low nibbles), q[2c + 1] k0 + 8c + 4..7 (high ones);
   bits 8: q[c] holds k0 + 4c + 0..3 as code + 128. Either way q[s] meets x[k0 + 4s ..]. */
VNNI static inline __attribute__((always_inline)) void block_rows(
    const uint8_t *tiles, Py_ssize_t groups, Py_ssize_t k, const Prepared *p, int M, int bits,
    int half, __m512 *acc) {
    const __m512i nib = _mm512_set1_epi8(15);
    for (int m = 0; m < M; m++) acc[m] = _mm512_setzero_ps();
    for (Py_ssize_t g = 0; g < groups; g++) {
        const uint8_t *tile = tiles + g * TILE_BYTES(bits, half);
        for (int line = 0; line < TILE_BYTES(bits, half); line += 64)
            _mm_prefetch((const char *)tile + PREFETCH_BYTES + line, PREFETCH_HINT);
        __m512i q[8];
        for (int c = 0; c < 4 && bits == 4; c++) {
            __m512i raw = _mm512_loadu_si512((const void *)(tile + 64 * c));
            q[2 * c] = _mm512_and_si512(raw, nib);
            q[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
        }
        for (int c = 0; c < 8 && bits == 8; c++)
            q[c] = _mm512_loadu_si512((const void *)(tile + 64 * c));
        const uint8_t *sm = tile + CODE_BYTES(bits);
        const __m512 scale = half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sm))
                                  : _mm512_loadu_ps((const float *)sm);
        __m512 mins = _mm512_setzero_ps();
        if (bits == 4)
            mins = half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sm + 1))
                        : _mm512_loadu_ps((const float *)sm + 16);
        for (int m = 0; m < M; m++) {
            const int8_t *x0 = p->planes + (Py_ssize_t)m * 3 * k + g * GROUP;
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0;
            for (int s = 0; s < 8; s++) {
                a0 = _mm512_dpbusd_epi32(a0, q[s], bcast4(x0 + 4 * s));
                a1 = _mm512_dpbusd_epi32(a1, q[s], bcast4(x0 + k + 4 * s));
                a2 = _mm512_dpbusd_epi32(a2, q[s], bcast4(x0 + 2 * k + 4 * s));
            }
            __m512 dot;
            if (bits == 4) {
                __m512i t = _mm512_add_epi32(_mm512_slli_epi32(a2, 8), a1); /* |t| < 2^24 */
                dot = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(256.0f),
                                      _mm512_cvtepi32_ps(a0));
            } else { /* undo the + 128 per plane, exactly: |a_p| <= 32 * 128 * 128 = 2^19 */
                const int32_t *ps = p->psums + ((Py_ssize_t)m * groups + g) * 4;
                a0 = _mm512_sub_epi32(a0, _mm512_set1_epi32(128 * ps[0]));
                a1 = _mm512_sub_epi32(a1, _mm512_set1_epi32(128 * ps[1]));
                a2 = _mm512_sub_epi32(a2, _mm512_set1_epi32(128 * ps[2]));
                const __m512 b = _mm512_set1_ps(256.0f);
                dot = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(a2), b,
                                                      _mm512_cvtepi32_ps(a1)),
                                      b, _mm512_cvtepi32_ps(a0));
            }
            acc[m] = _mm512_fmadd_ps(scale, dot, acc[m]);
            if (bits == 4)
                acc[m] = _mm512_fmadd_ps(mins, _mm512_set1_ps(p->sums[m * groups + g]), acc[m]);
        }
    }
}

VNNI static inline __attribute__((always_inline)) void gemv_m(
    const uint8_t *packed, Py_ssize_t n, Py_ssize_t k, const Prepared *p, int M, int bits,
    int half, float *y) {
    Py_ssize_t groups = k / GROUP, blocks = (n + BLOCK_ROWS - 1) / BLOCK_ROWS;
    for (Py_ssize_t b = 0; b < blocks; b++) {
        __m512 acc[MAX_ROWS];
        block_rows(packed + b * groups * TILE_BYTES(bits, half), groups, k, p, M, bits, half,
                   acc);
        Py_ssize_t left = n - b * BLOCK_ROWS;
        __mmask16 keep = left >= BLOCK_ROWS ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        for (int m = 0; m < M; m++) {
            __m512 v = _mm512_mul_ps(acc[m], _mm512_set1_ps(p->unscale[m]));
            if (!p->finite[m]) v = _mm512_set1_ps(NAN);
            _mm512_mask_storeu_ps(y + m * n + b * BLOCK_ROWS, keep, v);
        }
    }
}

/* rows layout, one 16-row block for M activation rows: y[m][0..15] = 2^-e scale dot. (Two
   accumulator sets for one row, against vpdpbusd's latency, measured no faster: the stream
   is the bound.) */
VNNI static inline __attribute__((always_inline)) void block_rows_pc(
    const uint8_t *block, Py_ssize_t groups, Py_ssize_t k, const Prepared *p, int M,
    __m512 *out) {
    __m512i a[3][MAX_ROWS];
    for (int m = 0; m < M; m++) a[0][m] = a[1][m] = a[2][m] = _mm512_setzero_si512();
    for (Py_ssize_t g = 0; g < groups; g++) {
        const uint8_t *tile = block + g * CODE_BYTES(8);
        for (int line = 0; line < CODE_BYTES(8); line += 64)
            _mm_prefetch((const char *)tile + PREFETCH_BYTES + line, PREFETCH_HINT);
        for (int s = 0; s < 8; s++) {
            __m512i q = _mm512_loadu_si512((const void *)(tile + 64 * s));
            for (int m = 0; m < M; m++) {
                const int8_t *x0 = p->planes + (Py_ssize_t)m * 3 * k + g * GROUP + 4 * s;
                a[0][m] = _mm512_dpbusd_epi32(a[0][m], q, bcast4(x0));
                a[1][m] = _mm512_dpbusd_epi32(a[1][m], q, bcast4(x0 + k));
                a[2][m] = _mm512_dpbusd_epi32(a[2][m], q, bcast4(x0 + 2 * k));
            }
        }
    }
    const __m512 scale = _mm512_loadu_ps((const float *)(block + groups * CODE_BYTES(8)));
    const __m512 b = _mm512_set1_ps(256.0f);
    for (int m = 0; m < M; m++) {
        __m512 f[3];
        for (int d = 0; d < 3; d++) { /* undo the + 128, exactly: |.| <= 2^14 K */
            __m512i t = _mm512_sub_epi32(a[d][m], _mm512_set1_epi32(128 * p->rowsums[4 * m + d]));
            f[d] = _mm512_cvtepi32_ps(t);
        }
        __m512 dot = _mm512_fmadd_ps(_mm512_fmadd_ps(f[2], b, f[1]), b, f[0]);
        out[m] = _mm512_mul_ps(_mm512_mul_ps(scale, dot), _mm512_set1_ps(p->unscale[m]));
        if (!p->finite[m]) out[m] = _mm512_set1_ps(NAN);
    }
}

VNNI static inline __attribute__((always_inline)) void gemv_rows_m(
    const uint8_t *packed, Py_ssize_t n, Py_ssize_t k, const Prepared *p, int M, float *y) {
    Py_ssize_t groups = k / GROUP, blocks = (n + BLOCK_ROWS - 1) / BLOCK_ROWS;
    for (Py_ssize_t b = 0; b < blocks; b++) {
        __m512 out[MAX_ROWS];
        block_rows_pc(packed + b * block_bytes_rows(k), groups, k, p, M, out);
        Py_ssize_t left = n - b * BLOCK_ROWS;
        __mmask16 keep = left >= BLOCK_ROWS ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        for (int m = 0; m < M; m++) _mm512_mask_storeu_ps(y + m * n + b * BLOCK_ROWS, keep, out[m]);
    }
}

#define GEMV_ROWS_FOR(M)                                                                   \
    VNNI static void gemv_pc_##M(const uint8_t *w, Py_ssize_t n, Py_ssize_t k,            \
                                 const Prepared *p, float *y) {                          \
        gemv_rows_m(w, n, k, p, M, y);                                                   \
    }
GEMV_ROWS_FOR(1) GEMV_ROWS_FOR(2) GEMV_ROWS_FOR(3) GEMV_ROWS_FOR(4)
GEMV_ROWS_FOR(5) GEMV_ROWS_FOR(6) GEMV_ROWS_FOR(7) GEMV_ROWS_FOR(8)

/* one specialised kernel per (bits, half, rows): the loops above unroll on constants */
#define GEMV_FOR(B, H, M)                                                                  \
    VNNI static void gemv_##B##_##H##_##M(const uint8_t *w, Py_ssize_t n, Py_ssize_t k,  \
                                          const Prepared *p, float *y) {                 \
        gemv_m(w, n, k, p, M, B, H, y);                                                  \
    }
#define GEMV_ROWS(B, H) \
    GEMV_FOR(B, H, 1) GEMV_FOR(B, H, 2) GEMV_FOR(B, H, 3) GEMV_FOR(B, H, 4) \
    GEMV_FOR(B, H, 5) GEMV_FOR(B, H, 6) GEMV_FOR(B, H, 7) GEMV_FOR(B, H, 8)
GEMV_ROWS(4, 0)
GEMV_ROWS(4, 1)
GEMV_ROWS(8, 0)
GEMV_ROWS(8, 1)
typedef void (*gemv_fn)(const uint8_t *, Py_ssize_t, Py_ssize_t, const Prepared *, float *);
#define GEMV_TABLE(B, H) \
    {NULL, gemv_##B##_##H##_1, gemv_##B##_##H##_2, gemv_##B##_##H##_3, gemv_##B##_##H##_4, \
     gemv_##B##_##H##_5, gemv_##B##_##H##_6, gemv_##B##_##H##_7, gemv_##B##_##H##_8}
static const gemv_fn GEMV[2][2][MAX_ROWS + 1] = {
    {GEMV_TABLE(4, 0), GEMV_TABLE(4, 1)}, {GEMV_TABLE(8, 0), GEMV_TABLE(8, 1)}};
static const gemv_fn GEMV_PC[MAX_ROWS + 1] = {NULL, gemv_pc_1, gemv_pc_2, gemv_pc_3, gemv_pc_4,
                                             gemv_pc_5, gemv_pc_6, gemv_pc_7, gemv_pc_8};

/* -- Python entry points --------------------------------------------------------------- */
DEFINE_CPU_SUPPORTED(CPU_HAS("avx512f") && CPU_HAS("avx512bw") && CPU_HAS("avx512vl") &&
                     CPU_HAS("avx512vnni") && CPU_HAS("f16c"))

static PyObject *py_packed_bytes(PyObject *UNUSED self, PyObject *args) {
    Py_ssize_t n, k;
    int bits, half;
    if (!PyArg_ParseTuple(args, "nnip", &n, &k, &bits, &half)) return NULL;
    if (bits != 4 && bits != 8) {
        PyErr_Format(PyExc_ValueError, "q4_gemv: bits must be 4 or 8, got %d", bits);
        return NULL;
    }
    return PyLong_FromSsize_t(packed_bytes(n, k, bits, half));
}

/* pack(dst, codes, scales, mins, n, k, bits, half): codes [n, k] (u8 in [0, 15] for bits 4,
   s8 for 8); scales, mins f32 [n, k / 32] (mins unused for 8); stored as float16 when half
   (the caller checked they are exactly representable) */
static PyObject *py_pack(PyObject *UNUSED self, PyObject *args) {
    unsigned long long dst, codes, scales, mins;
    Py_ssize_t n, k;
    int bits, half;
    if (!PyArg_ParseTuple(args, "KKKKnnip", &dst, &codes, &scales, &mins, &n, &k, &bits,
                          &half))
        return NULL;
    if (bits != 4 && bits != 8) {
        PyErr_Format(PyExc_ValueError, "q4_gemv: bits must be 4 or 8, got %d", bits);
        return NULL;
    }
    if (!cpu_check(cpu_supported(), "q4_gemv: this CPU lacks AVX-512 VNNI")) return NULL;
    WITHOUT_GIL(pack_tiles(PTR(dst), PTR(codes), PTR(scales), PTR(mins), n, k, bits, half));
    Py_RETURN_NONE;
}

/* rows_layout: bits 8 with one scale per output row (pack_rows); else bits 4/8 grouped */
VNNI static void run_gemv(const uint8_t *w, Py_ssize_t n, Py_ssize_t k, const float *x, int rows,
                          int bits, int half, int rows_layout, float *y, Prepared *p) {
    Py_ssize_t groups = k / GROUP;
    for (int m = 0; m < rows; m++) {
        prepare_row(x + m * k, k, p->planes + (Py_ssize_t)m * 3 * k, p->sums + m * groups,
                    p->psums + m * groups * 4, p->unscale + m, p->finite + m);
        for (int d = 0; d < 4; d++) {
            int32_t total = 0; /* |.| <= 128 K */
            for (Py_ssize_t g = 0; g < groups; g++) total += p->psums[(m * groups + g) * 4 + d];
            p->rowsums[4 * m + d] = total;
        }
    }
    if (rows_layout)
        GEMV_PC[rows](w, n, k, p, y);
    else
        GEMV[bits == 8][half][rows](w, n, k, p, y);
}

/* checks, the workspace, then run_gemv without the GIL */
static PyObject *gemv_call(unsigned long long w, Py_ssize_t n, Py_ssize_t k, int bits, int half,
                           int rows_layout, unsigned long long x, int rows,
                           unsigned long long y) {
    if (rows < 1 || rows > MAX_ROWS || k % GROUP || k < GROUP || n < 1 ||
        (bits != 4 && bits != 8)) {
        PyErr_Format(PyExc_ValueError, "q4_gemv: need 1 <= rows <= %d, k a positive multiple "
                     "of 32, n >= 1, bits 4 or 8", MAX_ROWS);
        return NULL;
    }
    if (rows_layout && k > ROWS_MAX_K) {
        PyErr_Format(PyExc_ValueError, "q4_gemv: the per-row layout needs k <= %d (int32 sums), "
                     "got %zd; use the grouped layout (pack)", ROWS_MAX_K, k);
        return NULL;
    }
    if (!cpu_check(cpu_supported(), "q4_gemv: this CPU lacks AVX-512 VNNI")) return NULL;
    Py_ssize_t groups = k / GROUP;
    size_t plane_bytes = ((size_t)rows * 3 * k + 63) & ~(size_t)63;
    size_t psum_bytes = (size_t)rows * (groups + 1) * 4 * sizeof(int32_t);
    size_t bytes = plane_bytes + psum_bytes + (size_t)rows * (groups + 1) * sizeof(float) +
                   rows * sizeof(int);
    char *work = malloc(bytes);
    if (!work) return PyErr_NoMemory();
    Prepared p = {(int8_t *)work, NULL, (int32_t *)(work + plane_bytes), NULL, NULL, NULL};
    p.rowsums = p.psums + (size_t)rows * groups * 4;
    p.sums = (float *)(work + plane_bytes + psum_bytes);
    p.unscale = p.sums + rows * groups;
    p.finite = (int *)(p.unscale + rows);
    WITHOUT_GIL(run_gemv(PTR(w), n, k, PTR(x), rows, bits, half, rows_layout, PTR(y), &p));
    free(work);
    Py_RETURN_NONE;
}

/* gemv(packed, n, k, bits, half, x, rows, y[, rows_layout]): x f32 [rows, k], y f32 [rows, n],
   1..8 rows; rows_layout: pack_rows' per-row int8 layout (bits 8, half false) */
static PyObject *py_gemv(PyObject *UNUSED self, PyObject *args) {
    unsigned long long w, x, y;
    Py_ssize_t n, k;
    int rows, bits, half, rows_layout = 0;
    if (!PyArg_ParseTuple(args, "KnnipKiK|p", &w, &n, &k, &bits, &half, &x, &rows, &y,
                          &rows_layout))
        return NULL;
    if (rows_layout && (bits != 8 || half)) {
        PyErr_SetString(PyExc_ValueError, "q4_gemv: the per-row layout is bits 8, half false");
        return NULL;
    }
    return gemv_call(w, n, k, bits, half, rows_layout, x, rows, y);
}

static PyObject *py_packed_bytes_rows(PyObject *UNUSED self, PyObject *args) {
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "nn", &n, &k)) return NULL;
    return PyLong_FromSsize_t(packed_bytes_rows(n, k));
}

/* pack_rows(dst, codes, scales, n, k): codes s8 [n, k], scales f32 [n] */
static PyObject *py_pack_rows(PyObject *UNUSED self, PyObject *args) {
    unsigned long long dst, codes, scales;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "KKKnn", &dst, &codes, &scales, &n, &k)) return NULL;
    WITHOUT_GIL(pack_tiles_rows(PTR(dst), PTR(codes), PTR(scales), n, k));
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS, "True if this CPU has AVX-512 VNNI."},
    {"packed_bytes", py_packed_bytes, METH_VARARGS,
     "packed_bytes(n, k, bits, half): bytes of pack()'s layout."},
    {"pack", py_pack, METH_VARARGS,
     "pack(dst, codes, scales, mins, n, k, bits, half): build the layout."},
    {"gemv", py_gemv, METH_VARARGS,
     "gemv(packed, n, k, bits, half, x, rows, y[, rows_layout]): y = x @ W.T (float32)."},
    {"packed_bytes_rows", py_packed_bytes_rows, METH_VARARGS,
     "packed_bytes_rows(n, k): bytes of pack_rows()'s layout."},
    {"pack_rows", py_pack_rows, METH_VARARGS,
     "pack_rows(dst, codes, scales, n, k): int8 codes with one scale per output row."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(q4_gemv, "Grouped int4/int8 and per-row int8 GEMV on AVX-512 VNNI.")
