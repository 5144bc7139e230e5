/* The tiled VNNI kernel of gguf_blocks.c (its only includer, after its VNNI decoders):
 * batched decode and prefill, more than 8 activation rows, every type. Each weight block is
 * read and decoded once per pass of up to TILE_ROWS (32) rows instead of once per 8, and its
 * work per row is about half the streaming kernel's (row256, row32) or less.
 *
 * Lanes: the streaming kernel keeps 8 int32 lanes that each mix all of a group's
 * sub-blocks (K-quants: 8 of 32 weights in a super-block; the 32-weight types: 8 blocks),
 * so each sub-block's scale is applied on its own (row256: 8 vpdpbusd + 8 vpdpwssd per
 * super-block and row; row32: a vpdpbusd, a conversion and an FMA per block and row). Here
 * a lane holds one sub-block (block): the decoded codes of a group of 256 weights are
 * transposed once per pass (lane j of vector t = dword t of sub-block j; Q6_K: 16
 * sub-blocks of 16 on 16 lanes, in lane_sub()'s order), the activations once per call by
 * prepare_tiles() in the same order. 4 vpdpbusd on 512 bits leave each sub-block's exact
 * dot in its lanes; then one vpmulld by the scales (K-quants), one conversion and one FMA
 * by the lanes' d dx (A dx) per group of 256 weights and row, and one FMA for the mins /
 * offsets (dmin mn_j, A off + B, times dx S_j in float: prepare_tiles' xs).
 *
 * Numerics: the same int8 activations and the same exact integer dot per sub-block (block)
 * as the streaming kernel, grouped in other lanes (|I| < 2^24: converted exactly), so the
 * float32 sums differ in rounding order only: not bit-identical to the passes of 8, within
 * the same bound (tests/kernels/cpu/test_gguf_blocks.py). A call runs one kernel for all
 * its rows (more than 8: the tiles), so a row's result does not depend on the others.
 *
 * Tile: TILE_COLS (2) output rows x M <= 32 activation rows: the two columns' transposed
 * codes stay in registers while the pass's rows run against them four at a time (each
 * activation vector loaded once for both columns); the M x 2 float accumulators live in a
 * stack array. The activations are laid out group major (a pass's rows of one group are
 * adjacent: rows k bytes apart, 4 KiB strides, would share L1 sets). */
#ifndef RADIXLM_GGUF_BLOCKS_TILES_H
#define RADIXLM_GGUF_BLOCKS_TILES_H

#define TILE_COLS 2

/* keeps v in a register: GCC would fold its load into each use, a load per column, and on
   Zen 4 the loads (one 512-bit load a cycle), not the dot products, bound these loops */
#define IN_REGISTER(v) __asm__("" : "+v"(v))

/* Q6_K's lane order on 16 lanes: lane p holds sub-block 4 (p % 4) + p / 4 (what the 4x4
   transposes of transpose16 leave); the others: lane j holds sub-block (block) j */
INLINE int lane_sub(int type, int p) { return type == Q6_K ? 4 * (p % 4) + p / 4 : p; }

/* A 32-weight type's group g of k inputs holds 4 blocks or fewer (its last, ragged one):
   it runs as a half group, 2 vectors of 16 lanes (lane 4 i + j: dword 4 q + i of block j) */
INLINE int half_group(int type, idx_t k, idx_t g) {
    return ELEMS[type] == 32 && k / 32 - 8 * g <= 4;
}

/* The activations for the tiles (0, or -1 without memory; free_tiles frees them), in
   groups of 256 inputs (the 32-weight types' last one may hold fewer blocks: zeros after),
   group major, index g * rows + m: X [256] each (dword t of lane p's sub-block at dword p of
   vector t: 8 vectors of 8 lanes, Q6_K 4 of 16; a half group 2 of 16), s16 [16] (the
   integer lanes' start: Q6_K -32 S16 in lane order, Q4_0/Q5_0/Q8_0 -off S per block j in
   lane j), xs [8] (dx S per 32, float: the mins' and Q4_1's offsets'), dx [8] (per block;
   the K-quants' in [0]). */
static int prepare_tiles(const Prep *p, idx_t rows, idx_t k, int type, Prep *t) {
    const int lanes = type == Q6_K ? 16 : 8, dwords = 64 / lanes, E = ELEMS[type];
    const idx_t ng = (k + 255) / 256, cells = rows * ng;
    t->X = calloc((size_t)cells, 256);
    t->s16 = calloc((size_t)cells, 16 * sizeof(int32_t));
    t->xs = calloc((size_t)cells, 8 * sizeof(float));
    t->dx = calloc((size_t)cells, 8 * sizeof(float));
    if (!t->X || !t->s16 || !t->xs || !t->dx) return -1;
    for (idx_t m = 0; m < rows; m++) {
        for (idx_t g = 0; g < ng; g++) {
            const idx_t at = g * rows + m, n32 = k / 32 - 8 * g; /* blocks of 32 here */
            const int8_t *X = p->X + m * k + 256 * g;
            int8_t *to = t->X + 256 * at;
            for (int l = 0; l < 16 && half_group(type, k, g); l++)
                for (int q = 0; q < 2 && l % 4 < n32; q++)
                    memcpy(to + 4 * (16 * q + l), X + 32 * (l % 4) + 4 * (4 * q + l / 4), 4);
            for (int l = 0; l < lanes && !half_group(type, k, g); l++) {
                const int sub = lane_sub(type, l);
                for (int q = 0; q < dwords && (lanes == 16 || l < n32); q++)
                    memcpy(to + 4 * (q * lanes + l), X + 4 * (sub * dwords + q), 4);
                if (type == Q6_K) t->s16[16 * at + l] = -32 * p->s16[m * (k / 16) + 16 * g + sub];
            }
            for (int j = 0; j < 8 && j < n32; j++) {
                const idx_t b32 = m * (k / 32) + 8 * g + j, b = m * (k / E) + g * (256 / E);
                t->dx[8 * at + j] = p->dx[E == 32 ? b32 : b];
                t->xs[8 * at + j] = E == 32 ? p->xs[b32] : p->dx[b] * (float)p->s32[b32];
                if (E == 32) t->s16[16 * at + j] = -OFFSET[type] * p->s32[b32];
            }
        }
    }
    return 0;
}

static void free_tiles(Prep *t) {
    free(t->X), free(t->s16), free(t->xs), free(t->dx);
}

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

/* A tile's float accumulators per row and column: a the scales' sums (lane j: sub-block
   j), b the mins' and offsets'; Q6_K: its 16 lanes' sums, the low 8 and the high 8 */
typedef struct {
    __m256 a, b;
} Acc;

/* A group of 256 weights of one column, decoded for the tiles: v its codes transposed (two
   vectors of 8 lanes a 512-bit one: the activations' order), sc the K-quants' integer
   scales per lane, d the float scale per lane (d, or the blocks' A), w the mins' or
   offsets' float per lane (dmin mn_j, or A off + B) */
typedef struct {
    __m512i v[4], sc;
    __m256 d, w;
} Group;

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

/* The 32-weight types: cnt (<= 8) blocks from b, group32's A and A off + B per lane */
VNNI INLINE void decode32x8(const uint8_t *b, int cnt, int type, Group *o) {
    const int bytes = BYTES[type];
    prefetch_ahead(b, cnt * bytes);
    if (type == Q4_1) { /* d and m side by side: one 32-bit load per block */
        const __m256i dm = head8(b, bytes, cnt);
        o->d = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm));
        o->w = _mm256_sub_ps(_mm256_setzero_ps(),
                             _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))));
    } else {
        o->d = _mm256_cvtph_ps(half8(b, bytes, cnt));
        o->w = _mm256_mul_ps(o->d, _mm256_set1_ps((float)OFFSET[type]));
    }
    __m256i u[8], t[8];
    for (int j = 0; j < 8; j++) u[j] = j < cnt ? codes32(type, b + j * bytes)
                                               : _mm256_setzero_si256();
    transpose8(u, t);
    for (int q = 0; q < 2 && cnt <= 4; q++) /* a half group: t[d]'s lanes 0-3, 4 d a vector */
        o->v[q] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_permute2x128_si256(t[4 * q], t[4 * q + 1], 0x20)),
            _mm256_permute2x128_si256(t[4 * q + 2], t[4 * q + 3], 0x20), 1);
    for (int q = 0; q < 4 && cnt > 4; q++)
        o->v[q] = _mm512_inserti64x4(_mm512_castsi256_si512(t[2 * q]), t[2 * q + 1], 1);
}

/* rows at .. at + R - 1 (R <= 4; the pass's m0 .. m0 + R - 1) against C decoded columns;
   half: a 32-weight type's half group */
VNNI INLINE void rows_step(const Group *G, int C, int type, int half, const Prep *t, idx_t at,
                           int m0, int R, Acc (*acc)[TILE_COLS]) {
    /* Q4_0/Q5_0/Q8_0's codes are u = q + off: their sums start at -off S (added to the
       dots' lanes); Q6_K's are q + 32: its dots start at -32 S16 */
    const int offs = ELEMS[type] == 32 && OFFSET[type];
    __m512i D[4][TILE_COLS];
    for (int r = 0; r < R; r++) {
        __m512i s = _mm512_setzero_si512();
        if (type == Q6_K) {
            s = _mm512_loadu_si512(t->s16 + 16 * (at + r));
            IN_REGISTER(s);
        }
        for (int c = 0; c < C; c++) D[r][c] = s;
    }
    for (int q = 0; q < (half ? 2 : 4); q++) /* one load of X for the tile's columns */
        for (int r = 0; r < R; r++) {
            __m512i x = _mm512_loadu_si512(t->X + 256 * (at + r) + 64 * q);
            IN_REGISTER(x);
            for (int c = 0; c < C; c++) D[r][c] = _mm512_dpbusd_epi32(D[r][c], G[c].v[q], x);
        }
    for (int r = 0; r < R; r++) {
        Acc *a = acc[m0 + r];
        const float *dxp = t->dx + 8 * (at + r);
        __m256 dx = ELEMS[type] == 32 ? _mm256_loadu_ps(dxp) : _mm256_set1_ps(*dxp);
        __m256 xs = _mm256_loadu_ps(t->xs + 8 * (at + r));
        __m256i start = _mm256_setzero_si256();
        if (offs) start = _mm256_loadu_si256((const __m256i *)(t->s16 + 16 * (at + r)));
        IN_REGISTER(dx);
        IN_REGISTER(xs);
        IN_REGISTER(start);
        for (int c = 0; c < C; c++) {
            const __m256 ddx = _mm256_mul_ps(G[c].d, dx);
            if (type == Q6_K) {
                const __m512 f = _mm512_cvtepi32_ps(_mm512_mullo_epi32(D[r][c], G[c].sc));
                a[c].a = _mm256_fmadd_ps(_mm512_castps512_ps256(f), ddx, a[c].a);
                a[c].b = _mm256_fmadd_ps(high8(f), ddx, a[c].b);
                continue;
            }
            __m256i I = _mm256_add_epi32( /* lanes j and 8 + j: sub-block (block) j */
                _mm512_castsi512_si256(D[r][c]), _mm512_extracti64x4_epi64(D[r][c], 1));
            if (half) /* lanes j, 4 + j, 8 + j, 12 + j: block j */
                I = _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(I),
                                                         _mm256_extracti128_si256(I, 1)));
            if (offs) I = _mm256_add_epi32(I, start);
            if (ELEMS[type] == 256) I = _mm256_mullo_epi32(I, _mm512_castsi512_si256(G[c].sc));
            a[c].a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), ddx, a[c].a);
            if (ELEMS[type] == 256) /* the mins: their own chain */
                a[c].b = _mm256_fnmadd_ps(G[c].w, xs, a[c].b);
            else if (type == Q4_1) /* the offsets: one chain with the dots */
                a[c].a = _mm256_fnmadd_ps(G[c].w, xs, a[c].a);
        }
    }
}

/* the pass's M rows of one group (at: its first) against C decoded columns, four rows at a
   time: 4 C independent dot chains in flight */
VNNI INLINE void group_rows(const Group *G, int C, int type, int half, const Prep *t, idx_t at,
                            int M, Acc (*acc)[TILE_COLS]) {
    int m = 0;
    for (; m + 4 <= M; m += 4) rows_step(G, C, type, half, t, at + m, m, 4, acc);
    for (; m < M; m++) rows_step(G, C, type, half, t, at + m, m, 1, acc);
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

/* C (<= TILE_COLS) output rows from r0 for the pass's M (<= TILE_ROWS) activation rows
   m0 .. m0 + M - 1 of t (prepare_tiles' rows) -> y */
VNNI INLINE void tile_cols(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, int C, idx_t k,
                           int type, const Prep *t, idx_t rows, idx_t m0, int M, float *y) {
    Acc acc[TILE_ROWS][TILE_COLS];
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++) acc[m][c].a = acc[m][c].b = _mm256_setzero_ps();
    const int E = ELEMS[type], per = 256 / E; /* blocks a group */
    const idx_t ng = (k + 255) / 256;
    for (idx_t g = 0; g < ng; g++) {
        Group G[TILE_COLS];
        for (int c = 0; c < C; c++) {
            const uint8_t *b = raw + (r0 + c) * stride + g * per * BYTES[type];
            if (E == 256)
                decode256(b, type, &G[c]);
            else
                decode32x8(b, k / 32 - 8 * g < 8 ? (int)(k / 32 - 8 * g) : 8, type, &G[c]);
        }
        if (half_group(type, k, g))
            group_rows(G, C, type, 1, t, g * rows + m0, M, acc);
        else
            group_rows(G, C, type, 0, t, g * rows + m0, M, acc);
    }
    /* the sums, 8 at a time (zeros after the last): slot m C + c */
    __m256 v[TILE_ROWS * TILE_COLS + 7];
    float s[TILE_ROWS * TILE_COLS + 7];
    for (int i = 0; i < M * C; i++) {
        const Acc *a = &acc[i / C][i % C];
        v[i] = E == 32 ? a->a : _mm256_add_ps(a->a, a->b);
    }
    for (int i = M * C; i % 8; i++) v[i] = _mm256_setzero_ps();
    for (int i = 0; i < M * C; i += 8) hsum8(v + i, s + i);
    for (int i = 0; i < M * C; i++) y[(i / C) * n + r0 + i % C] = s[i];
}

/* all n output rows for a pass's M activation rows, in tiles of TILE_COLS (a last one of 1) */
VNNI INLINE void gemm_tiles_vnni(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                                 const Prep *t, idx_t rows, idx_t m0, int M, float *y) {
    idx_t r = 0;
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
