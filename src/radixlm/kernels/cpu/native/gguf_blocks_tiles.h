/* The tiled VNNI kernel of gguf_blocks.c (its only includer, after its VNNI decoders):
 * batched decode and prefill, more than 1 activation row, every type. Each weight block is
 * read and decoded once per pass of up to TILE_PASS (128) rows instead of once per 8, and its
 * work per row is about half the streaming kernel's (row256, row32) or less.
 *
 * Lanes: the streaming kernel keeps 8 int32 lanes that each mix all of a group's
 * sub-blocks (K-quants: 8 of 32 weights in a super-block; the 32-weight types: 8 blocks),
 * so each sub-block's scale is applied on its own (row256: 8 vpdpbusd + 8 vpdpwssd per
 * super-block and row; row32: a vpdpbusd, a conversion and an FMA per block and row). Here
 * a lane holds one sub-block (block). K-quants, here: the decoded codes of a super-block
 * are transposed once per pass (lane j of vector t = dword t of sub-block j; Q6_K: 16
 * sub-blocks of 16 on 16 lanes, in lane_sub()'s order), the activations once per call by
 * prepare_tiles() in the same order. 4 vpdpbusd on 512 bits leave each sub-block's exact
 * dot in its lanes; then one vpmulld by the scales, one conversion and one FMA by d dx per
 * super-block and row, and one FMA for the mins (dmin mn_j times dx S_j in float:
 * prepare_tiles' xs). The 32-weight types: groups of 16 blocks, gguf_blocks_tiles32.h.
 *
 * Numerics: the same int8 activations and the same exact integer dot per sub-block (block)
 * as the streaming kernel (Q4_0/Q5_0/Q8_0: of the signed codes q = u - off, as the portable
 * path; the streaming kernel takes off S in float), grouped in other lanes (|I| < 2^24:
 * converted exactly), so the float32 sums differ in rounding order only: not bit-identical
 * to the passes of 8, within the same bound (tests/kernels/cpu/test_gguf_blocks.py). A row's
 * float operations do not depend on where it falls in a pass, and a call of one row runs
 * them in gguf_blocks_lanes.h, so its result does not depend on the others.
 *
 * Tile (K-quants): TILE_COLS (2) output rows: every super-block of them decoded once per
 * pass into t->work, then the pass's rows four at a time run over all super-blocks with
 * their 8 pairs' float sums in registers (each activation vector loaded once for both
 * columns), reduced together by hsum8 at the end, as the 32-weight types' tiles do.
 * Measured on Zen 4 (side by side, core shared, 128 rows): 1.12-1.26x faster than the
 * super-block outer loop it replaced (its M x 2 sums loaded and stored per super-block).
 * The activations are row major (a row's super-blocks back to back). */
#ifndef RADIXLM_GGUF_BLOCKS_TILES_H
#define RADIXLM_GGUF_BLOCKS_TILES_H

#define TILE_COLS 2
/* activation rows a pass: each group decoded once for all of them (their activations, about
   k + 128 bytes a row, stay in L2). Measured on Zen 4 at Gemma's 640 inputs, 128 rows
   (side by side, core shared): 128 a pass ran Q5_0 1.07-1.13x faster than 32. */
#ifndef TILE_PASS
#define TILE_PASS 128
#endif
/* the decoded weights of the 32-weight tiles a block (block32) runs side by side: in L1
   with a row step's activations. Measured (Zen 4, side by side, 128 rows) at 576 to 1536
   inputs: 8 tiles a block 1.08-1.13x faster than 1 (a row step's outputs fill cache lines,
   its activations read into L1 once for all the tiles) */
#ifndef BLOCK_BYTES
#define BLOCK_BYTES 20480
#endif
/* K-quant rows of up to WIDE256 super-blocks run rows over all super-blocks (tile_rows256),
   wider ones super-blocks over rows (tile_cols_wide, the loop before it). Measured (Zen 4,
   side by side, 128 rows) against that loop: 1.11-1.27x at 4 to 16 (1024 to 4096 inputs),
   0.84x at 32, 0.82-0.92x at 56 (14336). Calls of up to WIDE_ROWS rows (batched decode: 32
   streams) run tile_cols_wide at any width: its columns' super-block in registers for all
   the rows, the products d dx 16 rows a multiply (d_dx_rows). Measured (Zen 4, thread CPU
   time, core shared, side by side, an 8B model's shapes, weights from DRAM) against the
   rows over all super-blocks: 1.05x at 4096 inputs and 32 rows (Q4_K), ~1.0x at 16 rows */
#ifndef WIDE256
#define WIDE256 16
#endif
#ifndef WIDE_ROWS
#define WIDE_ROWS TILE_ROWS
#endif

/* keeps v in a register: GCC would fold its load into each use, a load per column, and on
   Zen 4 the loads (one 512-bit load a cycle), not the dot products, bound these loops */
#define IN_REGISTER(v) __asm__("" : "+v"(v))

/* Q6_K's lane order on 16 lanes: lane p holds sub-block 4 (p % 4) + p / 4 (what the 4x4
   transposes of transpose16 leave); the others: lane j holds sub-block (block) j */
INLINE int lane_sub(int type, int p) { return type == Q6_K ? 4 * (p % 4) + p / 4 : p; }

/* the 8x8 dword transpose of u (sub-block j = u[j]) into v (lane j = sub-block j) */
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

/* the high 8 lanes of a 512-bit float vector */
VNNI INLINE __m256 high8(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* 8 float vectors' horizontal sums -> out[0..7], each by the same tree (so a sum does not
   depend on its slot): lanes (0 + 2) + (1 + 3), then + ((4 + 6) + (5 + 7)) */
VNNI INLINE void hsum8(const __m256 *v, float *out) {
    __m256 s[4], u[2];
    for (int i = 0; i < 4; i++)
        s[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                             _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; i++)
        u[i] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * i], s[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(s[2 * i], s[2 * i + 1], 0xEE));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                                        _mm256_permute2f128_ps(u[0], u[1], 0x31)));
}

#include "gguf_blocks_tiles32.h" /* Q4_0, Q4_1, Q5_0, Q8_0 */

/* Inputs a group: the K-quants' super-block (256), the 32-weight types' 16 blocks (512) */
INLINE int group_in(int type) { return ELEMS[type] == 32 ? 512 : 256; }

/* K-quant calls run by tile_cols_wide: rows of more than WIDE256 super-blocks, or up to
   WIDE_ROWS rows (the call's: every pass of it in the same cell order) */
INLINE int wide256(int type, idx_t k, idx_t rows) {
    return ELEMS[type] == 256 && (k / 256 > WIDE256 || rows <= WIDE_ROWS);
}

/* activation rows a pass of the tiles */
INLINE int tile_pass(int type, idx_t k, idx_t rows) {
    return wide256(type, k, rows) ? TILE_ROWS : TILE_PASS;
}

/* a row's and group's cell of the tiles' activations: row major (a row's groups adjacent,
   for the loop over the groups within a row), wide K-quant rows group major (a pass's rows
   of a group adjacent, for their loop over the rows within a group) */
INLINE idx_t cell(int type, idx_t k, idx_t m, idx_t g, idx_t rows, idx_t ng) {
    return wide256(type, k, rows) ? g * rows + m : m * ng + g;
}

/* A tile's float accumulators per row and column, their lanes summed at the end: K-quants
   a the scales' sums (lane j: sub-block j), b the mins'; Q6_K: its 16 lanes' sums, the low
   8 and the high 8; the 32-weight types: z, lane j block j of each group (the low 8 lanes
   a group of 8 blocks or fewer) */
typedef union {
    struct {
        __m256 a, b;
    };
    __m512 z;
} Acc;

/* A group of 256 weights of one column, decoded for the tiles: v its codes transposed (two
   vectors of 8 lanes a 512-bit one: the activations' order), sc the K-quants' integer
   scales per lane, d the float scale per lane (d, or the blocks' A), w the mins' or
   offsets' float per lane (dmin mn_j, or A off + B) */
typedef struct {
    __m512i v[4], sc;
    __m256 d, w;
} Group;

/* The activations for the tiles (0, or -1 without memory; free_tiles frees them), in
   groups of group_in inputs, cell() order: X (K-quants: [256] a cell, dword t of lane p's
   sub-block at dword p of vector t, 8 vectors of 8 lanes, Q6_K 4 of 16; the 32-weight
   types: xrow32 bytes a row, lanes32's order), s16 [16] a cell (the integer lanes' start:
   Q6_K -32 S16 in lane order, Q4_0/Q5_0/Q8_0 -off S per block j in lane j), xs and dx
   [blocks of 32 a group: 16, K-quants 8] (dx S per 32, float: the mins' and Q4_1's
   offsets'; dx per block, the K-quants' in [0]); zeros after a last group's blocks; wide
   K-quant rows dk [k / 256][rows + 16] (a super-block's dx of every row side by side, 16
   zeros after: the products d dx of 16 rows a multiply). */
static int prepare_tiles(const Prep *p, idx_t rows, idx_t k, int type, Prep *t) {
    const int lanes = type == Q6_K ? 16 : 8, dwords = 64 / lanes, E = ELEMS[type];
    const int in = group_in(type), per = in / 32; /* blocks of 32 a group */
    const idx_t ng = (k + in - 1) / in, cells = rows * ng;
    t->X = calloc(E == 32 ? (size_t)(rows * xrow32(k)) : (size_t)cells * 256, 1);
    t->s16 = calloc((size_t)cells, 16 * sizeof(int32_t));
    t->xs = calloc((size_t)cells, (size_t)per * sizeof(float));
    t->dx = calloc((size_t)cells, (size_t)per * sizeof(float));
    t->work = aligned_alloc(64, (size_t)ng * (E == 32 ? block32(k) * COLS32 * sizeof(Group32)
                                                   : TILE_COLS * sizeof(Group)));
    t->dk = wide256(type, k, rows) ? calloc((size_t)(ng * (rows + 16)), sizeof(float)) : NULL;
    if (!t->X || !t->s16 || !t->xs || !t->dx || !t->work || (wide256(type, k, rows) && !t->dk))
        return -1;
    for (idx_t m = 0; m < rows; m++) {
        for (idx_t g = 0; g < ng; g++) {
            const idx_t at = cell(type, k, m, g, rows, ng), n32 = k / 32 - per * g;
            const int8_t *X = p->X + m * k + in * g;
            int8_t *to = t->X + (E == 32 ? m * xrow32(k) + 512 * g : 256 * at);
            for (int j = 0; j < per && j < n32 && E == 32; j++)
                for (int i = 0; i < 8; i++)
                    memcpy(to + 4 * slot32(lanes32(k, g), i, j), X + 32 * j + 4 * i, 4);
            for (int l = 0; l < lanes && E == 256; l++) {
                const int sub = lane_sub(type, l);
                for (int q = 0; q < dwords; q++)
                    memcpy(to + 4 * (q * lanes + l), X + 4 * (sub * dwords + q), 4);
                if (type == Q6_K) t->s16[16 * at + l] = -32 * p->s16[m * (k / 16) + 16 * g + sub];
            }
            if (t->dk) t->dk[g * (rows + 16) + m] = p->dx[m * ng + g];
            for (int j = 0; j < per && j < n32; j++) {
                const idx_t b32 = m * (k / 32) + per * g + j, b = m * (k / E) + g * (in / E);
                t->dx[per * at + j] = p->dx[E == 32 ? b32 : b];
                t->xs[per * at + j] = E == 32 ? p->xs[b32] : p->dx[b] * (float)p->s32[b32];
                if (E == 32) t->s16[16 * at + j] = -OFFSET[type] * p->s32[b32];
            }
        }
    }
    return 0;
}

static void free_tiles(Prep *t) {
    free(t->X), free(t->s16), free(t->xs), free(t->dx), free(t->work), free(t->dk);
}

/* Q4_K, Q5_K, Q6_K: super-block b */
VNNI INLINE void decode256(const uint8_t *b, int type, Group *o) {
    __m256i u[8], scs[8], mn = _mm256_setzero_si256(), scn[2] = {mn, mn};
    prefetch_ahead(b, BYTES[type]);
    codes256(type, b, u, scs, &mn, scn);
    o->d = _mm256_set1_ps(f16(type == Q6_K ? b + 208 : b));
    o->w = _mm256_mul_ps(_mm256_cvtepi32_ps(mn),
                         _mm256_set1_ps(type == Q6_K ? 0.0f : f16(b + 2)));
    if (type == Q6_K) {
        int32_t s[16];
        for (int l = 0; l < 16; l++) s[l] = (int8_t)b[192 + lane_sub(Q6_K, l)];
        o->sc = _mm512_loadu_si512(s);
        transpose16(u, o->v);
        return;
    }
    const __m256i s8 = _mm256_setr_epi32( /* scs[j]: sub-block j's scale in every lane */
        _mm256_cvtsi256_si32(scs[0]), _mm256_cvtsi256_si32(scs[1]),
        _mm256_cvtsi256_si32(scs[2]), _mm256_cvtsi256_si32(scs[3]),
        _mm256_cvtsi256_si32(scs[4]), _mm256_cvtsi256_si32(scs[5]),
        _mm256_cvtsi256_si32(scs[6]), _mm256_cvtsi256_si32(scs[7]));
    o->sc = _mm512_inserti64x4(_mm512_castsi256_si512(s8), s8, 1);
    __m256i t[8];
    transpose8(u, t);
    for (int q = 0; q < 4; q++)
        o->v[q] = _mm512_inserti64x4(_mm512_castsi256_si512(t[2 * q]), t[2 * q + 1], 1);
}

/* The K-quants: the cells at, at + step, .. (R <= 4 rows' super-block) against C decoded
   columns, into acc[r]; the pairs' products d dx: dd[c ldd + r] (d_dx's), or with dd NULL
   one at a time here (the same products) */
VNNI INLINE void rows_step(const Group *G, int C, int type, const Prep *t, idx_t at,
                           idx_t step, int R, const float *dd, idx_t ldd,
                           Acc (*acc)[TILE_COLS]) {
    __m512i D[4][TILE_COLS];
    for (int r = 0; r < R; r++) {
        __m512i s = _mm512_setzero_si512();
        if (type == Q6_K) { /* Q6_K's codes are q + 32: its dots start at -32 S16 */
            s = _mm512_loadu_si512(t->s16 + 16 * (at + r * step));
            IN_REGISTER(s);
        }
        for (int c = 0; c < C; c++) D[r][c] = s;
    }
    for (int q = 0; q < 4; q++) /* one load of X for the tile's columns */
        for (int r = 0; r < R; r++) {
            __m512i x = _mm512_loadu_si512(t->X + 256 * (at + r * step) + 64 * q);
            IN_REGISTER(x);
            for (int c = 0; c < C; c++) D[r][c] = _mm512_dpbusd_epi32(D[r][c], G[c].v[q], x);
        }
    for (int r = 0; r < R; r++) {
        Acc *a = acc[r];
        __m256 dx = _mm256_set1_ps(t->dx[8 * (at + r * step)]);
        __m256 xs = _mm256_loadu_ps(t->xs + 8 * (at + r * step));
        IN_REGISTER(dx);
        IN_REGISTER(xs);
        for (int c = 0; c < C; c++) { /* dd's: a broadcast operand of the FMA */
            const __m256 ddx = dd ? _mm256_set1_ps(dd[c * ldd + r]) : _mm256_mul_ps(G[c].d, dx);
            if (type == Q6_K) {
                const __m512 f = _mm512_cvtepi32_ps(_mm512_mullo_epi32(D[r][c], G[c].sc));
                a[c].a = _mm256_fmadd_ps(_mm512_castps512_ps256(f), ddx, a[c].a);
                a[c].b = _mm256_fmadd_ps(high8(f), ddx, a[c].b);
                continue;
            }
            __m256i I = _mm256_add_epi32( /* lanes j and 8 + j: sub-block j */
                _mm512_castsi512_si256(D[r][c]), _mm512_extracti64x4_epi64(D[r][c], 1));
            I = _mm256_mullo_epi32(I, _mm512_castsi512_si256(G[c].sc));
            a[c].a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), ddx, a[c].a);
            a[c].b = _mm256_fnmadd_ps(G[c].w, xs, a[c].b); /* the mins */
        }
    }
}

/* R (<= 4) rows' sums acc -> y [R][ldy], columns 0..C-1: each (row, column) pair's a + b,
   then hsum8's tree (the same for every slot r C + c) */
VNNI INLINE void sums256(Acc (*acc)[TILE_COLS], int C, int R, float *y, idx_t ldy) {
    __m256 v[8];
    float s[8];
    for (int i = 0; i < 8; i++) /* slot r C + c; zeros after */
        v[i] = i >= R * C ? _mm256_setzero_ps()
                          : _mm256_add_ps(acc[i / C][i % C].a, acc[i / C][i % C].b);
    hsum8(v, s);
    for (int i = 0; i < R * C; i++) y[(i / C) * ldy + i % C] = s[i];
}

/* The K-quants: R (<= 4) rows from row m of the tiles' activations t against C decoded
   columns (G: TILE_COLS a super-block) over all k inputs -> y [R][ldy], columns 0..C-1.
   The float sums stay in registers across the super-blocks; each (row, column) pair's
   operations are the same whatever R and C (its slot in hsum8 included: one tree) */
VNNI INLINE void tile_rows256(const Group *G, int C, int type, const Prep *t, idx_t k, idx_t m,
                              int R, float *y, idx_t ldy) {
    const idx_t ng = k / 256;
    Acc acc[4][TILE_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c].z = _mm512_setzero_ps();
    for (idx_t g = 0; g < ng; g++)
        rows_step(G + g * TILE_COLS, C, type, t, m * ng + g, ng, R, NULL, 0, acc);
    sums256(acc, C, R, y, ldy);
}

/* The products d dx of a super-block g for the pass's M rows from m0 (dk's) and C columns
   (d) -> dd[c][m]: 16 products a multiply (the same products as one at a time) */
VNNI INLINE void d_dx_rows(const Prep *t, idx_t rows, idx_t g, idx_t m0, int M, const float *d,
                           int C, float (*dd)[TILE_ROWS]) {
    const float *dk = t->dk + g * (rows + 16) + m0;
    for (int m = 0; m < M; m += 16) {
        const __m512 x = _mm512_loadu_ps(dk + m); /* zeros past the call's rows */
        for (int c = 0; c < C; c++)
            _mm512_storeu_ps(dd[c] + m, _mm512_mul_ps(_mm512_set1_ps(d[c]), x));
    }
}

/* Wide rows (more than WIDE256 super-blocks, passes of TILE_ROWS): the C columns'
   super-blocks one at a time in registers, the pass's rows four at a time against each
   (their activations group major: rows of a call apart), their sums in a stack array */
VNNI INLINE void tile_cols_wide(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, int C,
                                idx_t k, int type, const Prep *t, idx_t rows, idx_t m0, int M,
                                float *y) {
    const idx_t ng = k / 256;
    Acc acc[TILE_ROWS][TILE_COLS];
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++) acc[m][c].z = _mm512_setzero_ps();
    for (idx_t g = 0; g < ng; g++) {
        Group G[TILE_COLS];
        float d[TILE_COLS], dd[TILE_COLS][TILE_ROWS];
        for (int c = 0; c < C; c++) {
            const uint8_t *b = raw + (r0 + c) * stride + g * BYTES[type];
            decode256(b, type, &G[c]);
            d[c] = f16(type == Q6_K ? b + 208 : b);
        }
        d_dx_rows(t, rows, g, m0, M, d, C, dd);
        int m = 0;
        for (; m + 4 <= M; m += 4)
            rows_step(G, C, type, t, g * rows + m0 + m, 1, 4, dd[0] + m, TILE_ROWS, acc + m);
        for (; m < M; m++)
            rows_step(G, C, type, t, g * rows + m0 + m, 1, 1, dd[0] + m, TILE_ROWS, acc + m);
    }
    int m = 0;
    for (; m + 4 <= M; m += 4) sums256(acc + m, C, 4, y + m * n + r0, n);
    for (; m < M; m++) sums256(acc + m, C, 1, y + m * n + r0, n);
}

/* C (<= TILE_COLS) output rows from r0 for the pass's M activation rows m0 .. m0 + M - 1 of
   t -> y: every super-block of the C columns decoded once (into t->work), then the rows
   four at a time against them (wide rows: tile_cols_wide). 8 tiles side by side, as the
   32-weight types' blocks, measured 0.97-1.07x at Gemma's shapes: not taken */
VNNI INLINE void tile_cols(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, int C, idx_t k,
                           int type, const Prep *t, idx_t rows, idx_t m0, int M, float *y) {
    if (wide256(type, k, rows)) {
        tile_cols_wide(raw, stride, n, r0, C, k, type, t, rows, m0, M, y);
        return;
    }
    Group *G = t->work;
    for (idx_t g = 0; g < k / 256; g++)
        for (int c = 0; c < C; c++)
            decode256(raw + (r0 + c) * stride + g * BYTES[type], type, &G[g * TILE_COLS + c]);
    int m = 0;
    for (; m + 4 <= M; m += 4) tile_rows256(G, C, type, t, k, m0 + m, 4, y + m * n + r0, n);
    for (; m < M; m++) tile_rows256(G, C, type, t, k, m0 + m, 1, y + m * n + r0, n);
}

/* all n output rows for a pass's M activation rows, in tiles of TILE_COLS (COLS32), the
   last ones one at a time */
VNNI INLINE void gemm_tiles_vnni(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                                 const Prep *t, idx_t rows, idx_t m0, int M, float *y) {
    idx_t r = 0;
    if (ELEMS[type] == 32) {
        for (int nt; (nt = (int)((n - r) / COLS32)) > 0; r += nt * COLS32) {
            nt = nt < block32(k) ? nt : block32(k);
            tile_block32(raw, stride, n, r, nt, k, type, t, m0, M, y);
        }
        for (; r < n; r++) tile_col32(raw, stride, n, r, k, type, t, m0, M, y);
        return;
    }
    for (; r + TILE_COLS <= n; r += TILE_COLS)
        tile_cols(raw, stride, n, r, TILE_COLS, k, type, t, rows, m0, M, y);
    for (; r < n; r++) tile_cols(raw, stride, n, r, 1, k, type, t, rows, m0, M, y);
}

typedef void (*tiles_fn)(const uint8_t *, idx_t, idx_t, idx_t, const Prep *, idx_t, idx_t, int,
                         float *);
#define TILES_FOR(T)                                                                      \
    VNNI static void tiles_##T(const uint8_t *raw, idx_t stride, idx_t n, idx_t k,        \
                               const Prep *t, idx_t rows, idx_t m0, int M, float *y) {    \
        gemm_tiles_vnni(raw, stride, n, k, T, t, rows, m0, M, y);                         \
    }
TILES_FOR(Q4_0) TILES_FOR(Q4_1) TILES_FOR(Q5_0) TILES_FOR(Q8_0)
TILES_FOR(Q4_K) TILES_FOR(Q5_K) TILES_FOR(Q6_K)
static const tiles_fn TILES[NTYPES] = {tiles_Q4_0, tiles_Q4_1, tiles_Q5_0, tiles_Q8_0,
                                       tiles_Q4_K, tiles_Q5_K, tiles_Q6_K};

#endif /* RADIXLM_GGUF_BLOCKS_TILES_H */
