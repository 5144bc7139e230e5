/* The 32-weight types' part of the tiled kernel (gguf_blocks_tiles.h, its only includer,
 * after its transposes and hsum8): Q4_0, Q4_1, Q5_0, Q8_0 above 1 activation row.
 *
 * Lanes: a group of 16 blocks (512 weights) of one output row is decoded once per pass and
 * transposed so that lane j of 512-bit vector i holds dword i of block j (8 vectors); the
 * activations are laid out the same way once per call (prepare_tiles). 8 vpdpbusd leave
 * each block's exact dot in its lane (two chains, even and odd vectors, added: half the
 * latency); then per group and row one integer add (the start: -off S per block for
 * Q4_0/Q5_0/Q8_0, whose codes are u = q + off, so the lane holds the exact sum of q X, the
 * portable path's integer), one conversion, one multiply (A dx) and one FMA on 16 lanes
 * (Q4_1: one more FMA for its B dx S). A last group of n < 16 blocks lies on fewer lanes
 * (lanes32: 8 or 4 dwords a block, 4 or 2 vectors, lanes summed down to one a block) and
 * runs first, setting the row's sums. On 4 lanes (Gemma's 640 inputs: 16 + 4 blocks) the
 * tile's two columns share one vector (last4): a vpdpbusd, no lane reduction, per row
 * and 64 bytes, a conversion and two multiplies per row for both columns, not each.
 *
 * Tile: COLS32 (2) output rows: every group of them decoded once per pass (TILE_PASS rows)
 * into t->work (1.25 bytes a weight), then the pass's rows ROWS32 (4) at a time run over
 * all groups with their 8 float sums in registers (no loads and stores of sums per group),
 * reduced together by hsum8 at the end; block32's tiles (8 at 640 inputs) decoded at a
 * time, each row step run against all of them in turn. Measured on Zen 4 (core shared,
 * side by side): 4 output rows x 2 activation rows ran 0.9-1.0x; at Gemma's 640 inputs,
 * 128 rows, passes of 128 rows 1.07-1.13x faster than of 32, last4 with the two chains
 * 1.03-1.06x and blocks of 8 tiles 1.08-1.13x on top. The
 * activations are row major (a row's groups back to back, the last one unpadded: xrow32),
 * a pass's rows in L2. */
#ifndef RADIXLM_GGUF_BLOCKS_TILES32_H
#define RADIXLM_GGUF_BLOCKS_TILES32_H

/* the tile: COLS32 output rows, ROWS32 activation rows a step (8 float sums) */
#ifndef COLS32
#define COLS32 2
#endif
#define ROWS32 (8 / COLS32)

/* A 32-weight type's group g of k inputs holds n <= 16 blocks (the last may hold fewer),
   laid out on L lanes a dword: dword i of block j at dword L i + j of the group (L / 2
   vectors of 16 lanes): L = 16 for n > 8 (lane j: block j), 8 for n > 4 (lanes j, 8 + j),
   else 4 (lanes j, 4 + j, 8 + j, 12 + j) */
INLINE int lanes32(idx_t k, idx_t g) {
    const idx_t n = k / 32 - 16 * g;
    return n > 8 ? 16 : n > 4 ? 8 : 4;
}

/* the dword of a group on L lanes that holds dword i of block j: L i + j, except on 4 lanes
   (a last group of 4 blocks or fewer), where each 32 bytes hold dwords q and q + 4 of the
   blocks, [q | q + 4] (last4's order: one 256-bit load per q, broadcast to both halves) */
INLINE int slot32(int L, int i, int j) {
    return L == 4 ? 8 * (i % 4) + 4 * (i / 4) + j : L * i + j;
}

/* A group of a 32-weight type's column, decoded for the tiles: v its codes in lanes32's
   order (L / 2 vectors), d the blocks' A per lane j (block j), w Q4_1's B per lane */
typedef struct {
    __m512i v[8];
    __m512 d, w;
} Group32;

/* a 32-weight type's row of X in the tiles: its groups back to back, the last one's L
   dwords a block only (at k = 640, 640 bytes instead of 1024: a pass's rows stay in L1) */
INLINE idx_t xrow32(idx_t k) {
    const idx_t full = k / 512;
    return 512 * full + (k % 512 ? 32 * lanes32(k, full) : 0);
}

/* the float16 A (Q4_1: and m, side by side) of cnt <= 8 blocks at b, b + bytes, ... as 8
   values each, zeros after */
VNNI INLINE void heads8(const uint8_t *b, int bytes, int cnt, int type, __m128i *a, __m128i *m) {
    if (type != Q4_1) {
        *a = half8(b, bytes, cnt);
        return;
    }
    const __m256i dm = head8(b, bytes, cnt);
    *a = _mm256_cvtepi32_epi16(dm);
    *m = _mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16));
}

/* The 32-weight types: cnt (<= 16) blocks from b */
VNNI INLINE void decode32(const uint8_t *b, int cnt, int type, Group32 *o) {
    const int bytes = BYTES[type], lo = cnt < 8 ? cnt : 8;
    prefetch_ahead(b, cnt * bytes);
    __m128i a[2], m[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    heads8(b, bytes, lo, type, a, m);
    a[1] = m[1] = _mm_setzero_si128();
    if (cnt > 8) heads8(b + 8 * bytes, bytes, cnt - 8, type, a + 1, m + 1);
    o->d = _mm512_cvtph_ps(_mm256_set_m128i(a[1], a[0]));
    o->w = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm256_set_m128i(m[1], m[0])));
    __m256i u[8], t[8], t2[8];
    for (int j = 0; j < 8; j++) u[j] = j < lo ? codes32(type, b + j * bytes)
                                              : _mm256_setzero_si256();
    transpose8(u, t); /* t[i] lane j: dword i of block j */
    if (cnt > 8) { /* L = 16 */
        for (int j = 0; j < 8; j++) u[j] = 8 + j < cnt ? codes32(type, b + (8 + j) * bytes)
                                                       : _mm256_setzero_si256();
        transpose8(u, t2);
        for (int i = 0; i < 8; i++)
            o->v[i] = _mm512_inserti64x4(_mm512_castsi256_si512(t[i]), t2[i], 1);
    } else if (cnt > 4) { /* L = 8 */
        for (int q = 0; q < 4; q++)
            o->v[q] = _mm512_inserti64x4(_mm512_castsi256_si512(t[2 * q]), t[2 * q + 1], 1);
    } else { /* L = 4: t[i]'s lanes 0-3, 4 dwords a vector */
        for (int q = 0; q < 2; q++)
            o->v[q] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_permute2x128_si256(t[4 * q], t[4 * q + 1], 0x20)),
                _mm256_permute2x128_si256(t[4 * q + 2], t[4 * q + 3], 0x20), 1);
    }
}

/* a cell's integer start (i: its index): -off S per block j in lane j (Q4_0/Q5_0/Q8_0,
   whose codes are u = q + off: their exact sums are the dots minus off S), else 0 */
VNNI INLINE __m512i start32(int type, const Prep *t, idx_t i) {
    return OFFSET[type] ? _mm512_loadu_si512(t->s16 + 16 * i) : _mm512_setzero_si512();
}

/* The 32-weight types: rows at, at + ng, .. (R <= ROWS32 cells, the rows' group g; X its
   first row's activations, xrow bytes a row) of a group on L (16 or 8) lanes against C
   decoded columns G[c], into acc. The dots start at start32 (on 8 lanes: lanes j, 8 + j
   hold block j, the start in lane j only). A group on 8 lanes (the last) leaves its blocks
   in the low 8 lanes, zeros above. */
VNNI INLINE void step32(const Group32 *G, int C, int type, int L, const Prep *t, idx_t at,
                        idx_t ng, const int8_t *X, idx_t xrow, int R,
                        __m512 (*acc)[COLS32]) {
    __m512i D[ROWS32][COLS32], E[ROWS32][COLS32]; /* two chains: q even, odd (latency) */
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) D[r][c] = E[r][c] = _mm512_setzero_si512();
    for (int q = 0; q < L / 2; q++) { /* one load of X for the columns, of codes for the rows */
        __m512i v[COLS32];
        for (int c = 0; c < C; c++) v[c] = G[c].v[q];
        for (int r = 0; r < R; r++) {
            __m512i x = _mm512_loadu_si512(X + r * xrow + 64 * q);
            IN_REGISTER(x);
            for (int c = 0; c < C; c++) {
                if (q & 1) E[r][c] = _mm512_dpbusd_epi32(E[r][c], v[c], x);
                else D[r][c] = _mm512_dpbusd_epi32(D[r][c], v[c], x);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) D[r][c] = _mm512_add_epi32(D[r][c], E[r][c]);
    for (int r = 0; r < R; r++) {
        const idx_t i = at + r * ng;
        __m512 dx = _mm512_loadu_ps(t->dx + 16 * i);
        __m512 xs = type == Q4_1 ? _mm512_loadu_ps(t->xs + 16 * i) : dx;
        __m512i start = start32(type, t, i);
        IN_REGISTER(dx);
        IN_REGISTER(xs);
        IN_REGISTER(start);
        for (int c = 0; c < C; c++) {
            const __m512i I = OFFSET[type] ? _mm512_add_epi32(D[r][c], start) : D[r][c];
            if (L < 16) { /* L = 8: lanes j and 8 + j hold block j */
                const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(I),
                                                   _mm512_extracti64x4_epi64(I, 1));
                /* a row's first step (tile_rows32): its sums start here, on 8 lanes */
                __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(
                    _mm512_castps512_ps256(G[c].d), _mm512_castps512_ps256(dx)));
                if (type == Q4_1)
                    f = _mm256_fnmadd_ps(_mm512_castps512_ps256(G[c].w),
                                         _mm512_castps512_ps256(xs), f);
                acc[r][c] = _mm512_zextps256_ps512(f);
                continue;
            }
            acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(G[c].d, dx),
                                        acc[r][c]);
            if (type == Q4_1) acc[r][c] = _mm512_fnmadd_ps(G[c].w, xs, acc[r][c]);
        }
    }
}

/* A last group of 4 blocks or fewer (Gemma's 640 inputs: 4), the tile's two columns in one
   vector: pack_last4 leaves in G->v[q] the 128-bit chunks [c0: dwords q | c0: q + 4 |
   c1: q | c1: q + 4] of the blocks' codes (block j in lane j of a chunk; an odd last
   column stands in for both), in G->d (G->w) [c0 | c0 | c1 | c1]'s A (Q4_1's B) */
_Static_assert(COLS32 == 2, "pack_last4 and last4 hold a tile's two columns in a vector");
VNNI INLINE void pack_last4(Group32 *G, int C) {
    const Group32 *a = G, *b = G + (C > 1);
    __m512i v[4];
    for (int q = 0; q < 4; q++) { /* [x.v[0] chunk q | x.v[1] chunk q | the same] */
        const __m512i at = _mm512_setr_epi64(2 * q, 2 * q + 1, 8 + 2 * q, 9 + 2 * q, 2 * q,
                                             2 * q + 1, 8 + 2 * q, 9 + 2 * q);
        v[q] = _mm512_shuffle_i64x2(_mm512_permutex2var_epi64(a->v[0], at, a->v[1]),
                                    _mm512_permutex2var_epi64(b->v[0], at, b->v[1]), 0x44);
    }
    const __m512 d = _mm512_shuffle_f32x4(a->d, b->d, 0x00), w = _mm512_shuffle_f32x4(a->w, b->w,
                                                                                     0x00);
    for (int q = 0; q < 4; q++) G->v[q] = v[q];
    G->d = d, G->w = w;
}

/* rows at, at + ng, .. (R cells) of a last group packed by pack_last4 into acc (the rows'
   first step): one vpdpbusd per q and row (the activations' [dwords q | q + 4], slot32,
   in both halves), the chunks' halves added (the exact integers of a group on 4 lanes,
   from start32 in one half per column), then on each column's 4 lanes step32's float
   operations on 8 (zeros above): float(I) (A dx) (Q4_1: - B xs) */
VNNI INLINE void last4(const Group32 *G, int type, const Prep *t, idx_t at, idx_t ng,
                       const int8_t *X, idx_t xrow, int R, __m512 (*acc)[COLS32]) {
    for (int r = 0; r < R; r++) {
        const idx_t i = at + r * ng;
        __m512i D = OFFSET[type] ? _mm512_maskz_broadcast_i32x4(
            0x0F0F, _mm_loadu_si128((const __m128i *)(t->s16 + 16 * i))) : _mm512_setzero_si512();
        for (int q = 0; q < 4; q++)
            D = _mm512_dpbusd_epi32(D, G->v[q], _mm512_broadcast_i64x4(
                _mm256_loadu_si256((const __m256i *)(X + r * xrow + 32 * q))));
        D = _mm512_add_epi32(D, _mm512_shuffle_i64x2(D, D, 0xB1)); /* chunks 0, 2: c0, c1 */
        const __m512 dx = _mm512_broadcast_f32x4(_mm_loadu_ps(t->dx + 16 * i));
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(D), _mm512_mul_ps(G->d, dx));
        if (type == Q4_1)
            f = _mm512_fnmadd_ps(G->w, _mm512_broadcast_f32x4(_mm_loadu_ps(t->xs + 16 * i)), f);
        acc[r][0] = _mm512_maskz_shuffle_f32x4(0x000F, f, f, 0x00);
        acc[r][1] = _mm512_maskz_shuffle_f32x4(0x000F, f, f, 0x02);
    }
}

/* The 32-weight types: R (<= ROWS32) rows from row m of the tiles' activations t against C
   decoded columns (G: COLS32 a group) over all k inputs -> y [R][ldy], columns 0..C-1.
   The float sums stay in registers; each (row, column) pair's operations are the same
   whatever R and C (its sum's slot in hsum8 included: one tree for all slots). */
VNNI INLINE void tile_rows32(const Group32 *G, int C, int type, const Prep *t, idx_t k, idx_t m,
                             int R, float *y, idx_t ldy) {
    const idx_t ng = (k + 511) / 512, full = k / 512, xrow = xrow32(k);
    const int8_t *X = t->X + m * xrow;
    __m512 acc[ROWS32][COLS32];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    if (full < ng) { /* the last group's blocks first (a constant L: the loops unroll; on
                        fewer than 16 lanes it sets acc): its sums' reductions overlap the
                        full groups' dot products */
        const Group32 *last = G + full * COLS32;
        switch (lanes32(k, full)) {
        case 16: step32(last, C, type, 16, t, m * ng + full, ng, X + 512 * full, xrow, R, acc);
            break;
        case 8: step32(last, C, type, 8, t, m * ng + full, ng, X + 512 * full, xrow, R, acc);
            break;
        default: last4(last, type, t, m * ng + full, ng, X + 512 * full, xrow, R, acc);
        }
    }
    for (idx_t g = 0; g < full; g++)
        step32(G + g * COLS32, C, type, 16, t, m * ng + g, ng, X + 512 * g, xrow, R, acc);
    __m256 v[8];
    float s[8];
    for (int i = 0; i < 8; i++) /* slot r C + c; zeros after */
        v[i] = i >= R * C ? _mm256_setzero_ps() : _mm256_add_ps(
            _mm512_castps512_ps256(acc[i / C][i % C]), high8(acc[i / C][i % C]));
    hsum8(v, s);
    for (int i = 0; i < R * C; i++) y[(i / C) * ldy + i % C] = s[i];
}

/* the groups of C (<= COLS32) output rows from r0 decoded into G (COLS32 a group) */
VNNI INLINE void decode_tile32(const uint8_t *raw, idx_t stride, idx_t r0, int C, idx_t k,
                               int type, Group32 *G) {
    for (idx_t g = 0; g < (k + 511) / 512; g++) {
        const int cnt = k / 32 - 16 * g < 16 ? (int)(k / 32 - 16 * g) : 16;
        for (int c = 0; c < C; c++)
            decode32(raw + (r0 + c) * stride + 16 * g * BYTES[type], cnt, type,
                     &G[g * COLS32 + c]);
        if (cnt <= 4) pack_last4(G + g * COLS32, C);
    }
}

/* tiles of COLS32 output rows decoded at a time (their groups in t->work: up to
   BLOCK_BYTES, in L1 with a row step's activations) */
INLINE int block32(idx_t k) {
    const idx_t b = BLOCK_BYTES / ((k + 511) / 512 * COLS32 * (idx_t)sizeof(Group32));
    return b < 1 ? 1 : b > 8 ? 8 : (int)b;
}

/* The 32-weight types: nt (<= block32(k)) tiles of COLS32 output rows from r0 for the
   pass's M activation rows m0 .. m0 + M - 1 of t -> y: every group of them decoded once
   (into t->work), then the rows four at a time against each tile in turn (a row step's
   activations read into L1 once for all the tiles, its outputs whole cache lines) */
VNNI INLINE void tile_block32(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, int nt,
                              idx_t k, int type, const Prep *t, idx_t m0, int M, float *y) {
    const idx_t per = (k + 511) / 512 * COLS32; /* a tile's groups */
    Group32 *G = t->work;
    for (int i = 0; i < nt; i++)
        decode_tile32(raw, stride, r0 + i * COLS32, COLS32, k, type, G + i * per);
    int m = 0;
    for (; m + ROWS32 <= M; m += ROWS32)
        for (int i = 0; i < nt; i++)
            tile_rows32(G + i * per, COLS32, type, t, k, m0 + m, ROWS32,
                        y + m * n + r0 + i * COLS32, n);
    for (; m < M; m++)
        for (int i = 0; i < nt; i++)
            tile_rows32(G + i * per, COLS32, type, t, k, m0 + m, 1, y + m * n + r0 + i * COLS32,
                        n);
}

/* The 32-weight types: one output row r0 (an odd last one) for the pass's M rows */
VNNI INLINE void tile_col32(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, idx_t k,
                            int type, const Prep *t, idx_t m0, int M, float *y) {
    Group32 *G = t->work;
    decode_tile32(raw, stride, r0, 1, k, type, G);
    for (int m = 0; m < M; m++) tile_rows32(G, 1, type, t, k, m0 + m, 1, y + m * n + r0, n);
}

#endif /* RADIXLM_GGUF_BLOCKS_TILES32_H */
