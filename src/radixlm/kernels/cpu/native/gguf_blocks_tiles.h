/* The tiled VNNI kernel of gguf_blocks.c for the K-quants (its only includer, after its VNNI
 * decoders): batched decode and prefill, more than 8 activation rows. Each weight block is
 * read and decoded once per pass of up to TILE_ROWS (32) rows instead of once per 8, and its
 * integer work per row is about half the streaming kernel's (row256).
 *
 * Lanes: row256 keeps 8 int32 lanes that each mix all 8 sub-blocks (so every sub-block's
 * scale is applied with its own vpdpwssd: 8 vpdpbusd + 8 vpdpwssd per super-block and row).
 * Here a lane holds one sub-block: the decoded codes are transposed once per super-block
 * (lane j of vector t = dword t of sub-block j; Q6_K: 16 sub-blocks of 16 on 512-bit
 * vectors, lanes in the order lane_sub()), the activations once per row by permute_rows()
 * in the same order. vpdpbusd chains then leave each sub-block's exact dot in its lane, and
 * one vpmulld weighs all 8 (16) by their scales: 8 vpdpbusd + 1 vpmulld (Q6_K: 4 + 1 on
 * 512 bits).
 *
 * Numerics: the same int8 activations and the same exact integer sum per super-block as the
 * streaming kernel, but grouped in other lanes, so the float32 sums differ in rounding
 * order (each lane: one FMA per super-block of d dx times its exact int32, |I| < 2^24 so
 * converted exactly; one hsum at the end). Not bit-identical to the passes of 8, within the
 * same bound (tests/kernels/cpu/test_gguf_blocks.py). A call uses one kernel for all its
 * rows: more than 8 rows the tiles, else the streaming kernel.
 *
 * Tile: TILE_COLS (2) output rows x M <= 32 activation rows: the two columns' transposed
 * codes stay in registers while every row of the pass runs against them (each activation
 * vector loaded once for both); the M x 2 float accumulators live in a stack array. */
#ifndef RADIXLM_GGUF_BLOCKS_TILES_H
#define RADIXLM_GGUF_BLOCKS_TILES_H

#define TILE_COLS 2

/* Q6_K's lane order on 16 lanes: lane p holds sub-block 4 (p % 4) + p / 4 (what the 4x4
   transposes of transpose16 leave); Q4_K/Q5_K: lane j holds sub-block j */
INLINE int lane_sub(int type, int p) { return type == Q6_K ? 4 * (p % 4) + p / 4 : p; }

/* The activations re-laid for the tiles, in place (0, or -1 without memory): super-block
   major, so a pass's rows of one super-block are adjacent (rows k bytes apart would share
   the L1 sets: 4 KiB strides), index sb * rows + m: X [256] each, its dwords in the tiles'
   order (dword t of lane p's sub-block to dword p of vector t: 8 vectors of 8 lanes, Q6_K
   4 of 16), s16 [16] (Q6_K: lane order), xs [8] (dx S per 32, float: the mins'), dx [1]. */
static int permute_rows(const Prep *p, idx_t rows, idx_t k, int type) {
    const int lanes = type == Q6_K ? 16 : 8, dwords = 256 / 4 / lanes;
    const idx_t nsb = k / 256;
    int8_t *X = malloc((size_t)(rows * k));
    int32_t *s16 = malloc((size_t)(rows * k / 16) * sizeof(int32_t));
    float *dx = malloc((size_t)(rows * nsb) * sizeof(float));
    if (X && s16 && dx) {
        memcpy(X, p->X, (size_t)(rows * k));
        memcpy(s16, p->s16, (size_t)(rows * k / 16) * sizeof(int32_t));
        memcpy(dx, p->dx, (size_t)(rows * nsb) * sizeof(float));
        for (idx_t m = 0; m < rows; m++) {
            for (idx_t sb = 0; sb < nsb; sb++) {
                const idx_t at = sb * rows + m, from = m * nsb + sb;
                for (int l = 0; l < lanes; l++) {
                    const int sub = lane_sub(type, l);
                    for (int q = 0; q < dwords; q++)
                        memcpy(p->X + 256 * at + 4 * (q * lanes + l),
                               X + 256 * from + 4 * (sub * dwords + q), 4);
                    p->s16[16 * at + l] = s16[16 * from + (type == Q6_K ? sub : l)];
                }
                for (int j = 0; j < 8; j++)
                    p->xs[8 * at + j] = dx[from] * (float)p->s32[8 * from + j];
                p->dx[at] = dx[from];
            }
        }
    }
    const int ok = X && s16 && dx ? 0 : -1;
    free(X), free(s16), free(dx);
    return ok;
}

/* Q4_K/Q5_K: the 8x8 dword transpose of u (sub-block j = u[j]) into v (lane j = sub-block j) */
VNNI INLINE void transpose8(const __m256i *u, __m256i *v) {
    __m256i t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(u[2 * i], u[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(u[2 * i], u[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* h: sub-blocks 0-3 or 4-7 */
        s[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        s[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        s[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        s[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int q = 0; q < 4; q++) {
        v[q] = _mm256_permute2x128_si256(s[q], s[4 + q], 0x20);
        v[4 + q] = _mm256_permute2x128_si256(s[q], s[4 + q], 0x31);
    }
}

/* Q6_K: u[t] holds sub-blocks 2t, 2t + 1 (4 dwords each); z[a] = sub-blocks 4a .. 4a + 3,
   one per 128-bit lane; 4x4 transposes within those lanes leave v[q] lane 4 L + a = dword q
   of sub-block 4 a + L (lane_sub's order) */
VNNI INLINE void transpose16(const __m256i *u, __m512i *v) {
    __m512i z[4], t[4];
    for (int a = 0; a < 4; a++)
        z[a] = _mm512_inserti64x4(_mm512_castsi256_si512(u[2 * a]), u[2 * a + 1], 1);
    t[0] = _mm512_unpacklo_epi32(z[0], z[1]);
    t[1] = _mm512_unpackhi_epi32(z[0], z[1]);
    t[2] = _mm512_unpacklo_epi32(z[2], z[3]);
    t[3] = _mm512_unpackhi_epi32(z[2], z[3]);
    v[0] = _mm512_unpacklo_epi64(t[0], t[2]);
    v[1] = _mm512_unpackhi_epi64(t[0], t[2]);
    v[2] = _mm512_unpacklo_epi64(t[1], t[3]);
    v[3] = _mm512_unpackhi_epi64(t[1], t[3]);
}

/* A tile's float accumulators per row and column: Q4_K/Q5_K the scales' sums (lane j:
   sub-block j) and the mins'; Q6_K its 16 lanes' sums, the low and the high 8 */
typedef struct {
    __m256 a, b;
} Acc;

/* the high 8 lanes of a 512-bit float vector */
VNNI INLINE __m256 high8(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* rows m .. m + R - 1 (R <= 2) of tile256 against the tile's decoded columns */
VNNI INLINE void rows_step(const __m512i (*v)[4], const __m512i *sc, const __m256 *d,
                           const __m256 *wmin, int C, idx_t sb, idx_t k, int type,
                           const Prep *p, idx_t at, int m0, int R, Acc (*acc)[TILE_COLS]) {
    __m512i D[2][TILE_COLS];
    for (int r = 0; r < R; r++) {
        /* Q6_K's codes are q + 32: its dots start at -32 S16 (lane order as the codes') */
        const __m512i start = type != Q6_K ? _mm512_setzero_si512() : _mm512_sub_epi32(
            _mm512_setzero_si512(),
            _mm512_slli_epi32(_mm512_loadu_si512(p->s16 + 16 * (at + r)), 5));
        for (int c = 0; c < C; c++) D[r][c] = start;
    }
    for (int q = 0; q < 4; q++) /* one load of X for the tile's columns */
        for (int r = 0; r < R; r++) {
            const __m512i x = _mm512_loadu_si512(p->X + 256 * (at + r) + 64 * q);
            for (int c = 0; c < C; c++) D[r][c] = _mm512_dpbusd_epi32(D[r][c], v[c][q], x);
        }
    for (int r = 0; r < R; r++) {
        const int m = m0 + r;
        const __m256 dx = _mm256_set1_ps(p->dx[at + r]);
        for (int c = 0; c < C; c++) {
            const __m256 ddx = _mm256_mul_ps(d[c], dx);
            if (type == Q6_K) {
                const __m512 f = _mm512_cvtepi32_ps(_mm512_mullo_epi32(D[r][c], sc[c]));
                acc[m][c].a = _mm256_fmadd_ps(_mm512_castps512_ps256(f), ddx, acc[m][c].a);
                acc[m][c].b = _mm256_fmadd_ps(high8(f), ddx, acc[m][c].b);
                continue;
            }
            const __m256i I = _mm256_mullo_epi32( /* lanes j and 8 + j: sub-block j */
                _mm256_add_epi32(_mm512_castsi512_si256(D[r][c]),
                                 _mm512_extracti64x4_epi64(D[r][c], 1)),
                _mm512_castsi512_si256(sc[c]));
            acc[m][c].a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), ddx, acc[m][c].a);
            acc[m][c].b = _mm256_fnmadd_ps(
                wmin[c], _mm256_loadu_ps(p->xs + 8 * (at + r)), acc[m][c].b);
        }
    }
}

/* One super-block of C output rows (b[c] its bytes) against M activation rows (permuted by
   permute_rows) into acc[m][c]: per row and column 4 vpdpbusd (512 bits) leave each
   sub-block's exact dot in its lanes, one vpmulld weighs them by the scales, one FMA by d dx.
   The mins (Q4_K/Q5_K): one FMA of (dmin mn_j) by (dx S_j), both float (p->xs). */
VNNI INLINE void tile256(const uint8_t *const *b, int C, idx_t sb, idx_t k, int type,
                         const Prep *p, idx_t rows, idx_t m0, int M,
                         Acc (*acc)[TILE_COLS]) {
    __m512i v[TILE_COLS][4], sc[TILE_COLS];
    __m256 d[TILE_COLS];
    __m256 wmin[TILE_COLS];
    for (int c = 0; c < C; c++) {
        __m256i u[8], scs[8], mn = _mm256_setzero_si256(), scn[2] = {mn, mn};
        prefetch_ahead(b[c], BYTES[type]);
        codes256(type, b[c], u, scs, &mn, scn);
        d[c] = _mm256_set1_ps(f16(type == Q6_K ? b[c] + 208 : b[c]));
        wmin[c] = _mm256_mul_ps(_mm256_cvtepi32_ps(mn),
                                _mm256_set1_ps(type == Q6_K ? 0.0f : f16(b[c] + 2)));
        if (type == Q6_K) {
            int32_t s[16];
            for (int l = 0; l < 16; l++) s[l] = (int8_t)b[c][192 + lane_sub(Q6_K, l)];
            sc[c] = _mm512_loadu_si512(s);
            transpose16(u, v[c]);
        } else { /* scs[j]: sub-block j's scale in every lane; lane p: sub-block p % 8 */
            const __m256i s8 = _mm256_setr_epi32(
                _mm256_cvtsi256_si32(scs[0]), _mm256_cvtsi256_si32(scs[1]),
                _mm256_cvtsi256_si32(scs[2]), _mm256_cvtsi256_si32(scs[3]),
                _mm256_cvtsi256_si32(scs[4]), _mm256_cvtsi256_si32(scs[5]),
                _mm256_cvtsi256_si32(scs[6]), _mm256_cvtsi256_si32(scs[7]));
            sc[c] = _mm512_inserti64x4(_mm512_castsi256_si512(s8), s8, 1);
            __m256i t[8]; /* two vectors of 8 lanes a 512-bit one: X's order as it is */
            transpose8(u, t);
            for (int q = 0; q < 4; q++)
                v[c][q] = _mm512_inserti64x4(_mm512_castsi256_si512(t[2 * q]), t[2 * q + 1], 1);
        }
    }
    int m = 0; /* two rows at a time: 2 C independent dot chains in flight */
    const idx_t at = sb * rows + m0; /* permute_rows' index of this pass's first row */
    for (; m + 2 <= M; m += 2) rows_step(v, sc, d, wmin, C, sb, k, type, p, at + m, m, 2, acc);
    if (m < M) rows_step(v, sc, d, wmin, C, sb, k, type, p, at + m, m, 1, acc);
}

/* C (<= TILE_COLS) output rows from r0 for M (<= TILE_ROWS) activation rows -> y */
VNNI INLINE void tile_cols(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, int C, idx_t k,
                           int type, const Prep *p, idx_t rows, idx_t m0, int M, float *y) {
    Acc acc[TILE_ROWS][TILE_COLS];
    const uint8_t *row[TILE_COLS];
    for (int c = 0; c < C; c++) row[c] = raw + (r0 + c) * stride;
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++)
            acc[m][c].a = acc[m][c].b = _mm256_setzero_ps();
    for (idx_t sb = 0; sb < k / 256; sb++) {
        const uint8_t *b[TILE_COLS];
        for (int c = 0; c < C; c++) b[c] = row[c] + sb * BYTES[type];
        tile256(b, C, sb, k, type, p, rows, m0, M, acc);
    }
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++)
            y[m * n + r0 + c] = hsum(_mm256_add_ps(acc[m][c].a, acc[m][c].b));
}

/* all n output rows for M activation rows, in tiles of TILE_COLS (a last one of 1) */
VNNI INLINE void gemm_tiles_vnni(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                                 const Prep *p, idx_t rows, idx_t m0, int M, float *y) {
    idx_t r = 0;
    for (; r + TILE_COLS <= n; r += TILE_COLS)
        tile_cols(raw, stride, n, r, TILE_COLS, k, type, p, rows, m0, M, y);
    for (; r < n; r++) tile_cols(raw, stride, n, r, 1, k, type, p, rows, m0, M, y);
}

typedef void (*tiles_fn)(const uint8_t *, idx_t, idx_t, idx_t, const Prep *, idx_t, idx_t, int,
                         float *);
#define TILES_FOR(T)                                                                      \
    VNNI static void tiles_##T(const uint8_t *raw, idx_t stride, idx_t n, idx_t k,        \
                               const Prep *p, idx_t rows, idx_t m0, int M, float *y) {    \
        gemm_tiles_vnni(raw, stride, n, k, T, p, rows, m0, M, y);                         \
    }
TILES_FOR(Q4_K) TILES_FOR(Q5_K) TILES_FOR(Q6_K)
/* the 32-weight types have none (NULL): their decode is a few operations per block, so
   tiles measured no faster than the streaming kernel's passes (whose group32 keeps its
   rows' accumulators in registers); they stay on those passes */
static const tiles_fn TILES[NTYPES] = {NULL, NULL, NULL, NULL, tiles_Q4_K, tiles_Q5_K,
                                       tiles_Q6_K};

#endif /* RADIXLM_GGUF_BLOCKS_TILES_H */
