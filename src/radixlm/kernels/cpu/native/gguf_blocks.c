/* y = x @ W.T straight on a GGUF matrix's raw blocks (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K,
   Q6_K): by default the tiled kernel of gguf_blocks_tiles.h (passes of 128 rows) and, at
   one row, gguf_blocks_lanes.h in its order; on request (tiled=False) the streaming one
   here, 1..8 activation rows per pass over the weight.

   Weights (kernels/reference/gguf_blocks.py gives the bit layouts): raw [n, row_stride]
   bytes, each row k / E blocks of E = 32 or 256 weights. Every type is, per element e of
   sub-block s (32 weights; Q6_K 16), w = A sc_s (u_e - off) - B mn_s with float16 A, B per
   block, unsigned codes u_e (4, 5, 6 or 8 bits), integer scales sc_s and mins mn_s
   (1 for the 32-weight types), and a type constant off (Q4_0 8, Q5_0 16, Q8_0 128 as the
   code's sign bit flipped, Q6_K 32, else 0).

   Activations are quantized per block as llama.cpp does: a row's block of E values (Q8_0's
   32 for the 32-weight types, Q8_K's 256 for the K-quants) becomes X = round(x / dx), dx =
   max|x| / 127, X in [-127, 127] (a block with max|x| < 2^-100 becomes 0), so |x - dx X| <=
   dx / 2 (times 1 + 2^-22 for the rounding of 127 / max|x|). The dot of a sub-block is then
   exact in integers: vpdpbusd (u8 codes times s8 X, 4 products per int32 lane) and, for the
   K-quants, vpdpwssd to weigh each lane by its sub-block's scale (a lane's 4 products fit
   int16: 4 * 63 * 127 < 2^15), so a super-block's sum stays in int32 (|.| < 2^26) and meets
   float once: y += d dx I - dmin dx sum_s mn_s S_s, S_s the sub-block's sum of X. The
   32-weight types: y += A dx U - (A off + B) dx S per block (U = sum u X, exact int).
   The result differs from float32 x @ W.T by at most sum_e |w_e| dx_e / 2 (activation
   rounding) plus float32 rounding of the per-block products and sums. Why not q4_gemv.c's
   float32-faithful 24-bit activations (three int8 digit planes): on this layout each plane
   costs its own vpdpbusd and vpdpwssd per sub-block and row, three times the integer work,
   for an error llama.cpp's own kernels accept (benchmarks/gguf_block_kernels.py times the
   24-bit kernel on its repacked tiles beside these).

   Two summation orders on the VNNI path, each the same for every row count (a row's bits
   never depend on how many rows share its call: the runtime's exactness needs it):
   tiled (the default): more than one row runs the tiles of gguf_blocks_tiles.h (a lane per
   sub-block, about half the work per row), one row the lanes kernel of gguf_blocks_lanes.h
   (the tiles' float operations in their order, bit-identical). tiled=False: the streaming
   kernel below, passes of up to 8 rows, one output row at a time, its blocks in file
   order (the weight streams once per pass), every activation row of the pass against each
   decoded block, one horizontal sum per output and row; at one row 4 output rows a pass
   (gguf_blocks_decode.h: the same float operations per row, bit-identical). The portable
   path runs passes of 32, each row's operations the same in any pass. Passes of 8 over W
   measured faster at 128 rows than dequantizing W in tiles into torch's GEMM.

   Two paths, the same integers: AVX-512 VNNI on 256-bit vectors (Zen 4 runs 512-bit ones
   as two halves anyway; a 32-weight sub-block is one vector, in the file's own element
   order, so nothing is repacked), and portable C (any CPU; forced by the caller for tests).
   dequantize() decodes rows to float32 bit-equal to gguf.quants (the portable decoder).
   Pointers come from kernels/cpu/gguf_blocks.py, which checks shapes and dtypes; each call
   runs on the caller's thread with the GIL released. */

#include "radixlm_native.h"
#include "gguf_blocks_portable.h" /* the table, activations, portable path */

/* -- AVX-512 VNNI: one 256-bit vector per sub-block of 32, codes u as u8 ------------------ */
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
/* How far ahead of the block being read the weight stream is fetched (into L2, as
   q4_gemv.c does): rows lie back to back, so this runs on into the next row */
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 12288
#endif

/* the cache lines of [p + PREFETCH_BYTES, + bytes) */
VNNI INLINE void prefetch_ahead(const uint8_t *p, int bytes) {
    for (int line = 0; line < bytes; line += 64)
        _mm_prefetch((const char *)p + PREFETCH_BYTES + line, _MM_HINT_T1);
}

VNNI INLINE float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

VNNI INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* 16 bytes of nibbles -> 32 codes: the low nibbles (elements 0-15), then the high ones */
VNNI INLINE __m256i nibbles16(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs), f = _mm_set1_epi8(15);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(b, f)),
                                   _mm_and_si128(_mm_srli_epi16(b, 4), f), 1);
}

/* prepare_row's integers, 16 values a vector: the same products and round-half-even */
VNNI static void prepare_row_vnni(const float *x, idx_t k, int E, int8_t *X, float *dx,
                                  float *xs, int32_t *s16, int32_t *s32, int *finite) {
    const __m512 big = _mm512_set1_ps(3.4028234663852886e38f);
    const __m512i hi = _mm512_set1_epi32(127), lo = _mm512_set1_epi32(-127);
    __mmask16 bad = 0;
    for (idx_t b = 0; b < k / E; b++) {
        const float *xb = x + b * E;
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < E; i += 16) {
            const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + i));
            bad |= ~_mm512_cmp_ps_mask(a, big, _CMP_LE_OQ); /* inf or nan */
            m = _mm512_max_ps(m, a);
        }
        const float amax = _mm512_reduce_max_ps(m);
        const __m512 inv = _mm512_set1_ps(amax >= TINY ? 127.0f / amax : 0.0f);
        dx[b] = amax >= TINY ? amax / 127.0f : 0.0f;
        for (int i = 0; i < E; i += 16) {
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + i), inv));
            v = _mm512_max_epi32(_mm512_min_epi32(v, hi), lo);
            _mm_storeu_si128((__m128i *)(X + b * E + i), _mm512_cvtepi32_epi8(v));
            s16[(b * E + i) / 16] = _mm512_reduce_add_epi32(v);
        }
    }
    *finite = bad == 0;
    for (idx_t j = 0; j < k / 32; j++) s32[j] = s16[2 * j] + s16[2 * j + 1];
    for (idx_t j = 0; j < k / 32 && E == 32; j++) xs[j] = dx[j] * (float)s32[j];
}

/* A 32-weight block's codes u (Q8_0: c + 128, the sign bit flipped) */
VNNI INLINE __m256i codes32(int type, const uint8_t *b) {
    if (type == Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 2)),
                                _mm256_set1_epi8((char)0x80));
    if (type != Q5_0) return nibbles16(b + (type == Q4_0 ? 2 : 4));
    uint32_t qh;
    memcpy(&qh, b + 2, 4); /* bit i: element i's fifth bit */
    const __m256i u = nibbles16(b + 6); /* + 16 where the bit is set: one masked add */
    return _mm256_mask_add_epi8(u, qh, u, _mm256_set1_epi8(16));
}

/* the 16-bit values at p, p + stride, ... (cnt of them, the rest 0) as 8 lanes */
VNNI INLINE __m128i half8(const uint8_t *p, int stride, int cnt) {
    uint16_t h[8] = {0};
    for (int j = 0; j < cnt; j++) memcpy(h + j, p + j * stride, 2);
    return _mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], (short)h[4],
                          (short)h[5], (short)h[6], (short)h[7]);
}

/* the 32-bit values at p, p + stride, ... (cnt of them, the rest 0) as 8 lanes */
VNNI INLINE __m256i head8(const uint8_t *p, int stride, int cnt) {
    uint32_t h[8] = {0};
    for (int j = 0; j < cnt; j++) memcpy(h + j, p + j * stride, 4);
    return _mm256_setr_epi32((int)h[0], (int)h[1], (int)h[2], (int)h[3], (int)h[4], (int)h[5],
                             (int)h[6], (int)h[7]);
}

/* Blocks g .. g + cnt - 1 of one output row (32-weight types) into acc / acc2 (even / odd
   blocks: two FMA chains) for M activation rows. The group's A (and A off + B) are one
   vector, so the offset correction is one FMA per row and 8 blocks. */
VNNI INLINE void group32(const uint8_t *row, idx_t g, int cnt, idx_t k, int type,
                         const Prep *p, int M, __m256 *acc, __m256 *acc2) {
    const idx_t nb = k / 32;
    const int bytes = BYTES[type];
    const __mmask8 live = (__mmask8)((1u << cnt) - 1);
    prefetch_ahead(row + g * bytes, cnt * bytes);
    /* the blocks' float16 d (and Q4_1's m) as 8 lanes: scalar loads beat a gather here */
    __m256 av, cv; /* A, and A off + B: -m, or A times a power of 2 (exact) */
    if (type == Q4_1) { /* d and m side by side: one 32-bit load per block */
        const __m256i dm = head8(row + g * bytes, bytes, cnt);
        av = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm));
        cv = _mm256_sub_ps(_mm256_setzero_ps(),
                           _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))));
    } else {
        av = _mm256_cvtph_ps(half8(row + g * bytes, bytes, cnt));
        cv = _mm256_mul_ps(av, _mm256_set1_ps((float)OFFSET[type]));
    }
    float adx[MAX_ROWS][8]; /* A dx per row and block, read back as broadcast loads */
    for (int m = 0; m < M; m++) {
        const __m256 dx = _mm256_maskz_loadu_ps(live, p->dx + m * nb + g);
        _mm256_storeu_ps(adx[m], _mm256_mul_ps(av, dx));
        acc[m] = _mm256_fnmadd_ps(cv, _mm256_maskz_loadu_ps(live, p->xs + m * nb + g), acc[m]);
    }
    for (int j = 0; j < cnt; j++) {
        const __m256i u = codes32(type, row + (g + j) * bytes);
        for (int m = 0; m < M; m++) {
            const __m256i xm = _mm256_loadu_si256((const __m256i *)(p->X + m * k + 32 * (g + j)));
            const __m256 dot = _mm256_cvtepi32_ps(
                _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, xm));
            const __m256 scale = _mm256_set1_ps(adx[m][j]);
            if (j & 1)
                acc2[m] = _mm256_fmadd_ps(dot, scale, acc2[m]);
            else
                acc[m] = _mm256_fmadd_ps(dot, scale, acc[m]);
        }
    }
}

/* One output row of a 32-weight type for M activation rows -> out[m]: groups of 8 blocks
   (a constant count, unrolled), then the rest. */
VNNI INLINE void row32(const uint8_t *row, idx_t k, int type, const Prep *p, int M,
                       float *out) {
    const idx_t nb = k / 32;
    __m256 acc[MAX_ROWS], acc2[MAX_ROWS];
    for (int m = 0; m < M; m++) acc[m] = acc2[m] = _mm256_setzero_ps();
    idx_t g = 0;
    for (; g + 8 <= nb; g += 8) group32(row, g, 8, k, type, p, M, acc, acc2);
    if (g < nb) group32(row, g, (int)(nb - g), k, type, p, M, acc, acc2);
    for (int m = 0; m < M; m++) out[m] = hsum(_mm256_add_ps(acc[m], acc2[m]));
}

#include "gguf_blocks_codes256.h" /* the K-quants' codes, scales and mins */

/* One output row of a K-quant for M activation rows -> out[m]: per super-block an exact
   int32 sum I = sum_t sc_t (u_t . X_t) (- 32 sum_s sc_s S_s for Q6_K), then d dx I
   (- dmin dx sum_j mn_j S_j for Q4_K/Q5_K) in float */
VNNI INLINE void row256(const uint8_t *row, idx_t k, int type, const Prep *p, int M,
                        float *out) {
    const idx_t nsb = k / 256;
    __m256 acc[MAX_ROWS], acc2[MAX_ROWS]; /* the scales' and the mins' float chains */
    for (int m = 0; m < M; m++) acc[m] = acc2[m] = _mm256_setzero_ps();
    for (idx_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b = row + sb * BYTES[type];
        prefetch_ahead(b, BYTES[type]);
        __m256i u[8], sc[8], mn = _mm256_setzero_si256(), scn[2] = {mn, mn};
        codes256(type, b, u, sc, &mn, scn);
        const float d = f16(type == Q6_K ? b + 208 : b), dmin = type == Q6_K ? 0.0f : f16(b + 2);
        for (int m = 0; m < M; m++) {
            const int8_t *X = p->X + m * k + sb * 256;
            const float dx = p->dx[m * nsb + sb];
            /* four independent vpdpwssd chains (latency); Q6_K's offset terms start two */
            const __m256i zero = _mm256_setzero_si256();
            __m256i I[4] = {zero, zero, zero, zero};
            if (type == Q6_K) { /* |S16| <= 2032 fits int16 */
                const int32_t *s = p->s16 + m * (k / 16) + sb * 16;
                I[2] = _mm256_dpwssd_epi32(I[2], _mm256_loadu_si256((const __m256i *)s), scn[0]);
                I[3] = _mm256_dpwssd_epi32(I[3], _mm256_loadu_si256((const __m256i *)(s + 8)),
                                           scn[1]);
            } else { /* the mins: their own float chain */
                const __m256i S = _mm256_loadu_si256(
                    (const __m256i *)(p->s32 + m * (k / 32) + sb * 8));
                const __m256i mins = _mm256_dpwssd_epi32(_mm256_setzero_si256(), S, mn);
                acc2[m] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(dmin * dx),
                                           acc2[m]);
            }
            for (int t = 0; t < 8; t++) { /* a lane's 4 products fit int16 */
                const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[t],
                    _mm256_loadu_si256((const __m256i *)(X + 32 * t)));
                I[t & 3] = _mm256_dpwssd_epi32(I[t & 3], dot, sc[t]);
            }
            const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(I[0], I[1]),
                                                 _mm256_add_epi32(I[2], I[3]));
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d * dx), acc[m]);
        }
    }
    for (int m = 0; m < M; m++) out[m] = hsum(_mm256_add_ps(acc[m], acc2[m]));
}

/* 16 codes u (bytes) -> o[0..15] = (u - off) scale - minus: the portable decoder's float
   operations in its order (bit-equal) */
VNNI INLINE void dequant16(float *o, __m128i u, int off, float scale, float minus) {
    const __m512 q = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(u),
                                                         _mm512_set1_epi32(off)));
    _mm512_storeu_ps(o, _mm512_sub_ps(_mm512_mul_ps(q, _mm512_set1_ps(scale)),
                                      _mm512_set1_ps(minus)));
}

/* dequantize_rows with the VNNI path's decoders, 16 weights a vector */
VNNI static void dequantize_rows_vnni(const uint8_t *raw, idx_t stride, idx_t r0, idx_t count,
                                      idx_t k, int type, float *out) {
    const int E = ELEMS[type], off = OFFSET[type];
    for (idx_t r = 0; r < count; r++) {
        for (idx_t b = 0; b < k / E; b++) {
            const uint8_t *blk = raw + (r0 + r) * stride + b * BYTES[type];
            float *o = out + r * k + b * E;
            __m256i u[8], sc[8], mn, scn[2];
            float scale[16], minus[16] = {0}; /* per 16 weights */
            if (E == 32) {
                u[0] = codes32(type, blk);
                scale[0] = scale[1] = f16(blk) * 1.0f; /* A sc, sc = 1 */
                minus[0] = minus[1] = type == Q4_1 ? -f16(blk + 2) * 1.0f : 0.0f;
            } else {
                codes256(type, blk, u, sc, &mn, scn);
                int32_t s[16], m[16];
                if (type == Q6_K) {
                    for (int j = 0; j < 16; j++) s[j] = (int8_t)blk[192 + j], m[j] = 0;
                } else {
                    scale_min_k4(blk + 4, s, m);
                }
                const float d = f16(type == Q6_K ? blk + 208 : blk);
                const float dmin = type == Q6_K ? 0.0f : f16(blk + 2);
                for (int j = 0; j < 16; j++) { /* Q4_K/Q5_K: sub-blocks of 32 */
                    const int sub = type == Q6_K ? j : j / 2;
                    scale[j] = d * (float)s[sub];
                    minus[j] = dmin * (float)m[sub];
                }
            }
            for (int j = 0; j < E / 16; j++) {
                const __m128i half = j & 1 ? _mm256_extracti128_si256(u[j / 2], 1)
                                           : _mm256_castsi256_si128(u[j / 2]);
                dequant16(o + 16 * j, half, off, scale[j], minus[j]);
            }
        }
    }
}

/* rows of W for M activation rows; one specialisation per (type, M) so the loops unroll */
#include "gguf_blocks_decode.h" /* decode: several output rows a pass */

VNNI INLINE void gemm_vnni_m(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                             const Prep *p, int M, float *y) {
    if (ELEMS[type] == 32 && M == 1) {
        gemm32_rows(raw, stride, 0, n, k, type, p, M, 4, y, n);
        return;
    }
    float out[MAX_ROWS];
    for (idx_t r = 0; r < n; r++) {
        if (ELEMS[type] == 32)
            row32(raw + r * stride, k, type, p, M, out);
        else
            row256(raw + r * stride, k, type, p, M, out);
        for (int m = 0; m < M; m++) y[m * n + r] = out[m];
    }
}

typedef void (*gemm_fn)(const uint8_t *, idx_t, idx_t, idx_t, const Prep *, float *);
#define GEMM_FOR(T, M)                                                                   \
    VNNI static void gemm_##T##_##M(const uint8_t *raw, idx_t stride, idx_t n, idx_t k,  \
                                    const Prep *p, float *y) {                           \
        gemm_vnni_m(raw, stride, n, k, T, p, M, y);                                      \
    }
#define GEMM_TYPE(T) \
    GEMM_FOR(T, 1) GEMM_FOR(T, 2) GEMM_FOR(T, 3) GEMM_FOR(T, 4) \
    GEMM_FOR(T, 5) GEMM_FOR(T, 6) GEMM_FOR(T, 7) GEMM_FOR(T, 8)
#define GEMM_ROW(T) \
    {gemm_##T##_1, gemm_##T##_2, gemm_##T##_3, gemm_##T##_4, gemm_##T##_5, gemm_##T##_6, \
     gemm_##T##_7, gemm_##T##_8}
GEMM_TYPE(Q4_0) GEMM_TYPE(Q4_1) GEMM_TYPE(Q5_0) GEMM_TYPE(Q8_0)
GEMM_TYPE(Q4_K) GEMM_TYPE(Q5_K) GEMM_TYPE(Q6_K)
static const gemm_fn GEMM[NTYPES][MAX_ROWS] = {GEMM_ROW(Q4_0), GEMM_ROW(Q4_1), GEMM_ROW(Q5_0),
                                               GEMM_ROW(Q8_0), GEMM_ROW(Q4_K), GEMM_ROW(Q5_K),
                                               GEMM_ROW(Q6_K)};

#include "gguf_blocks_tiles.h" /* the tiled kernel: passes of up to 128 rows */
#include "gguf_blocks_lanes.h" /* the tiles' float order for one row */
#include "gguf_blocks_few.h"   /* ... and for 2 .. FEW_ROWS rows, each block decoded once */

/* -- Python entry points ------------------------------------------------------------- */
DEFINE_CPU_SUPPORTED(CPU_HAS("avx512f") && CPU_HAS("avx512bw") && CPU_HAS("avx512vl") &&
                     CPU_HAS("avx512vnni") && CPU_HAS("f16c") && CPU_HAS("fma"))

/* every row of x [rows, k] quantized in blocks of E into p */
static void prepare_rows(const float *x, idx_t rows, idx_t k, int E, int vnni, Prep *p) {
    for (idx_t m = 0; m < rows; m++)
        (vnni ? prepare_row_vnni : prepare_row)(
            x + m * k, k, E, p->X + m * k, p->dx + m * (k / E), p->xs + m * (k / 32),
            p->s16 + m * (k / 16), p->s32 + m * (k / 32), p->finite + m);
}

/* y [rows, n] from prepared activations: passes of up to 8 rows over W (the streaming
   kernel), or with `tiled` (VNNI) the tiled kernel for 2+ rows (passes of up to 128, each
   block decoded once per pass) and the lanes kernel for 1 (or, the tiles' memory short,
   for each row in turn): the same order either way */
static void gemm_passes(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                        idx_t rows, float *y, int vnni, int tiled, const Prep *p) {
    const int E = ELEMS[type];
    if (vnni && tiled && rows > 1 && rows <= FEW_MAX[type]) { /* a verify's few rows */
        FEW[type][rows - 2](raw, stride, n, k, p, y);
        return;
    }
    tiles_fn tiles = vnni && tiled && rows > 1 ? TILES[type] : NULL;
    Prep t = {0};
    if (tiles && prepare_tiles(p, rows, k, type, &t)) tiles = NULL; /* no memory: lanes */
    const int lanes = vnni && tiled && !tiles; /* the tiles' order, a row at a time */
    const int pass = tiles ? tile_pass(type, k, rows) : !vnni ? TILE_ROWS : lanes ? 1 : MAX_ROWS;
    for (idx_t m0 = 0; m0 < rows;) {
        const int M = rows - m0 < pass ? (int)(rows - m0) : pass;
        Prep q = {p->X + m0 * k, p->dx + m0 * (k / E), p->xs + m0 * (k / 32),
                  p->s16 + m0 * (k / 16), p->s32 + m0 * (k / 32), p->finite + m0};
        if (!vnni)
            gemm_portable(raw, stride, n, k, type, &q, M, y + m0 * n);
        else if (tiles)
            tiles(raw, stride, n, k, &t, rows, m0, M, y + m0 * n);
        else
            (lanes ? LANES[type] : GEMM[type][M - 1])(raw, stride, n, k, &q, y + m0 * n);
        m0 += M;
    }
    free_tiles(&t);
}

/* an inf or nan in a row of x: that row of y [rows, n] NaN, as float32 would give */
static void nan_rows(const Prep *p, idx_t rows, idx_t n, float *y) {
    for (idx_t m = 0; m < rows; m++)
        for (idx_t r = 0; r < n && !p->finite[m]; r++) y[m * n + r] = NAN;
}

static void run_gemm(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                     const float *x, idx_t rows, float *y, int vnni, int tiled, Prep *p) {
    prepare_rows(x, rows, k, ELEMS[type], vnni, p);
    gemm_passes(raw, stride, n, k, type, rows, y, vnni, tiled, p);
    nan_rows(p, rows, n, y);
}

static int check_args(idx_t stride, idx_t n, idx_t k, int type, int vnni) {
    if (type < 0 || type >= NTYPES || n < 1 || k < ELEMS[type] || k % ELEMS[type] ||
        stride < k / ELEMS[type] * BYTES[type]) {
        PyErr_SetString(PyExc_ValueError, "gguf_blocks: need a type id in [0, 7), n >= 1, k a "
                        "positive multiple of the block size, row_stride >= the row's bytes");
        return 0;
    }
    return !vnni || cpu_check(cpu_supported(), "gguf_blocks: this CPU lacks AVX-512 VNNI");
}

/* Prep's arrays for rows x [rows, k] in blocks of E, in one malloc'd block (NULL: no memory);
   extra floats more after them for the caller */
static char *prep_alloc(Prep *p, idx_t rows, idx_t k, int E, size_t extra) {
    size_t xbytes = ((size_t)(rows * k) + 63) & ~(size_t)63;
    size_t bytes = xbytes + (size_t)rows * ((k / E + k / 32) * sizeof(float) +
                                            (k / 16 + k / 32) * sizeof(int32_t) + sizeof(int));
    char *work = malloc(bytes + extra * sizeof(float) + 64);
    if (!work) return NULL;
    p->X = (int8_t *)work;
    p->dx = (float *)(work + xbytes);
    p->xs = p->dx + rows * (k / E);
    p->s16 = (int32_t *)(p->xs + rows * (k / 32));
    p->s32 = p->s16 + rows * (k / 16);
    p->finite = (int *)(p->s32 + rows * (k / 32));
    return work;
}

/* gemm(raw, row_stride, n, k, type, x, rows, y, vnni[, tiled]): x f32 [rows, k] -> y f32
   [rows, n]; tiled (default True, VNNI): the tiles' order (tiles above 1 row, lanes at 1) */
static PyObject *py_gemm(PyObject *UNUSED self, PyObject *args) {
    unsigned long long raw, x, y;
    Py_ssize_t stride, n, k, rows;
    int type, vnni, tiled = 1;
    if (!PyArg_ParseTuple(args, "KnnniKnKp|p", &raw, &stride, &n, &k, &type, &x, &rows, &y,
                          &vnni, &tiled))
        return NULL;
    if (!check_args(stride, n, k, type, vnni)) return NULL;
    if (rows < 1 || !raw || !x || !y) {
        PyErr_SetString(PyExc_ValueError, "gguf_blocks: need rows >= 1 and non-null pointers");
        return NULL;
    }
    Prep p;
    char *work = prep_alloc(&p, rows, k, ELEMS[type], 0);
    if (!work) return PyErr_NoMemory();
    WITHOUT_GIL(run_gemm(PTR(raw), stride, n, k, type, PTR(x), rows, PTR(y), vnni, tiled, &p));
    free(work);
    Py_RETURN_NONE;
}

#include "gguf_blocks_fused.h" /* gemm_fused: the pieces of one fused linear in one call */

/* dequantize(raw, row_stride, first_row, count, k, type, out[, vnni]): out f32 [count, k];
   vnni (default True): the AVX-512 decoder where the CPU has it, else the portable one */
static PyObject *py_dequantize(PyObject *UNUSED self, PyObject *args) {
    unsigned long long raw, out;
    Py_ssize_t stride, first, count, k;
    int type, vnni = 1;
    if (!PyArg_ParseTuple(args, "KnnnniK|p", &raw, &stride, &first, &count, &k, &type, &out,
                          &vnni))
        return NULL;
    if (!check_args(stride, count, k, type, 0)) return NULL;
    if (vnni && cpu_supported())
        WITHOUT_GIL(dequantize_rows_vnni(PTR(raw), stride, first, count, k, type, PTR(out)));
    else
        WITHOUT_GIL(dequantize_rows(PTR(raw), stride, first, count, k, type, PTR(out)));
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS, "True if this CPU has AVX-512 VNNI."},
    {"gemm", py_gemm, METH_VARARGS,
     "gemm(raw, row_stride, n, k, type, x, rows, y, vnni[, tiled]): y = x @ W.T on raw "
     "GGUF blocks."},
    {"gemm_fused", py_gemm_fused, METH_VARARGS,
     "gemm_fused(pieces, count, k, x, rows, y, width, dest, vnni): several matrices' y = "
     "x @ W.T side by side in one y [rows, width], rows placed by dest (int32) if non-zero."},
    {"dequantize", py_dequantize, METH_VARARGS,
     "dequantize(raw, row_stride, first_row, count, k, type, out[, vnni]): rows to float32."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(gguf_blocks, "Linear layers on raw GGUF blocks (Q4_0..Q8_0, Q4_K, Q5_K, Q6_K).")
