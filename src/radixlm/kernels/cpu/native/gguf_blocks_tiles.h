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

/* Inputs a group: the K-quants' super-block (256), the 32-weight types' 16 blocks (512) */
INLINE int group_in(int type) { return ELEMS[type] == 32 ? 512 : 256; }

/* A 32-weight type's group g of k inputs holds n <= 16 blocks (the last may hold fewer),
   laid out on L lanes a dword: dword i of block j at dword L i + j of the group (L / 2
   vectors of 16 lanes): L = 16 for n > 8 (lane j: block j), 8 for n > 4 (lanes j, 8 + j),
   else 4 (lanes j, 4 + j, 8 + j, 12 + j) */
INLINE int lanes32(idx_t k, idx_t g) {
    const idx_t n = k / 32 - 16 * g;
    return n > 8 ? 16 : n > 4 ? 8 : 4;
}

/* A group of a 32-weight type's column, decoded for the tiles: v its codes in lanes32's
   order (L / 2 vectors), d the blocks' A per lane j (block j), w Q4_1's B per lane */
typedef struct {
    __m512i v[8];
    __m512 d, w;
} Group32;

/* a row's and group's cell of the tiles' activations: the K-quants group major (a pass's
   rows of a group adjacent, for their loop over the rows within a group), the 32-weight
   types row major (a row's groups adjacent, for their loop over the groups within a row) */
INLINE idx_t cell(int type, idx_t m, idx_t g, idx_t rows, idx_t ng) {
    return ELEMS[type] == 32 ? m * ng + g : g * rows + m;
}

/* a 32-weight type's row of X in the tiles: its groups back to back, the last one's L
   dwords a block only (at k = 640, 640 bytes instead of 1024: a pass's rows stay in L1) */
INLINE idx_t xrow32(idx_t k) {
    const idx_t full = k / 512;
    return 512 * full + (k % 512 ? 32 * lanes32(k, full) : 0);
}

/* The activations for the tiles (0, or -1 without memory; free_tiles frees them), in
   groups of group_in inputs, group major, index g * rows + m: X [group_in] each (K-quants:
   dword t of lane p's sub-block at dword p of vector t, 8 vectors of 8 lanes, Q6_K 4 of
   16; the 32-weight types: lanes32's order, zeros after a last group's blocks), s16 [16]
   (the integer lanes' start: Q6_K -32 S16 in lane order, Q4_0/Q5_0/Q8_0 -off S per block
   j in lane j), xs [16] (dx S per 32, float: the mins' and Q4_1's offsets'), dx [16] (per
   block; the K-quants' in [0]). */
static int prepare_tiles(const Prep *p, idx_t rows, idx_t k, int type, Prep *t) {
    const int lanes = type == Q6_K ? 16 : 8, dwords = 64 / lanes, E = ELEMS[type];
    const int in = group_in(type), per = in / 32; /* blocks of 32 a group */
    const idx_t ng = (k + in - 1) / in, cells = rows * ng;
    t->X = calloc(E == 32 ? (size_t)(rows * xrow32(k)) : (size_t)cells * 256, 1);
    t->s16 = calloc((size_t)cells, 16 * sizeof(int32_t));
    t->xs = calloc((size_t)cells, 16 * sizeof(float));
    t->dx = calloc((size_t)cells, 16 * sizeof(float));
    t->work = E == 32 ? aligned_alloc(64, (size_t)ng * TILE_COLS * sizeof(Group32)) : NULL;
    if (!t->X || !t->s16 || !t->xs || !t->dx || (E == 32 && !t->work)) return -1;
    for (idx_t m = 0; m < rows; m++) {
        for (idx_t g = 0; g < ng; g++) {
            const idx_t at = cell(type, m, g, rows, ng), n32 = k / 32 - per * g;
            const int8_t *X = p->X + m * k + in * g;
            int8_t *to = t->X + (E == 32 ? m * xrow32(k) + 512 * g : 256 * at);
            for (int j = 0; j < per && j < n32 && E == 32; j++)
                for (int i = 0; i < 8; i++)
                    memcpy(to + 4 * (lanes32(k, g) * i + j), X + 32 * j + 4 * i, 4);
            for (int l = 0; l < lanes && E == 256; l++) {
                const int sub = lane_sub(type, l);
                for (int q = 0; q < dwords; q++)
                    memcpy(to + 4 * (q * lanes + l), X + 4 * (sub * dwords + q), 4);
                if (type == Q6_K) t->s16[16 * at + l] = -32 * p->s16[m * (k / 16) + 16 * g + sub];
            }
            for (int j = 0; j < per && j < n32; j++) {
                const idx_t b32 = m * (k / 32) + per * g + j, b = m * (k / E) + g * (in / E);
                t->dx[16 * at + j] = p->dx[E == 32 ? b32 : b];
                t->xs[16 * at + j] = E == 32 ? p->xs[b32] : p->dx[b] * (float)p->s32[b32];
                if (E == 32) t->s16[16 * at + j] = -OFFSET[type] * p->s32[b32];
            }
        }
    }
    return 0;
}

static void free_tiles(Prep *t) {
    free(t->X), free(t->s16), free(t->xs), free(t->dx), free(t->work);
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

/* cnt <= 8 32-bit (Q4_1: d and m side by side) or 16-bit heads at b, b + bytes, ... as 16
   float16 pairs / values: the low 8 lanes' A (and B) */
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

/* The 32-weight types: rows at, at + ng, .. (R <= 4 cells, the rows' group g; X its first
   row's activations, xrow bytes a row) of a group on L lanes against C decoded columns
   G[c], into acc. Q4_0/Q5_0/Q8_0's codes are u = q +
   off: their exact sums are the dots minus off S (the start). A group on fewer than 16
   lanes (the last) leaves its blocks in the low 8 (4) lanes, zeros above. */
VNNI INLINE void step32(const Group32 *G, int C, int type, int L, const Prep *t, idx_t at,
                        idx_t ng, const int8_t *X, idx_t xrow, int R,
                        __m512 (*acc)[TILE_COLS]) {
    __m512i D[4][TILE_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) D[r][c] = _mm512_setzero_si512();
    for (int q = 0; q < L / 2; q++) { /* one load of X for the columns, of codes for the rows */
        __m512i v[TILE_COLS];
        for (int c = 0; c < C; c++) v[c] = G[c].v[q];
        for (int r = 0; r < R; r++) {
            __m512i x = _mm512_loadu_si512(X + r * xrow + 64 * q);
            IN_REGISTER(x);
            for (int c = 0; c < C; c++) D[r][c] = _mm512_dpbusd_epi32(D[r][c], v[c], x);
        }
    }
    for (int r = 0; r < R; r++) {
        const idx_t i = at + r * ng;
        __m512 dx = _mm512_loadu_ps(t->dx + 16 * i);
        __m512 xs = type == Q4_1 ? _mm512_loadu_ps(t->xs + 16 * i) : dx;
        __m512i start = _mm512_loadu_si512(t->s16 + 16 * i);
        IN_REGISTER(dx);
        IN_REGISTER(xs);
        IN_REGISTER(start);
        for (int c = 0; c < C; c++) {
            __m512i I = D[r][c];
            if (L < 16) { /* L = 8: lanes j and 8 + j hold block j */
                __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(I),
                                             _mm512_extracti64x4_epi64(I, 1));
                if (L == 4) /* lanes j, 4 + j, 8 + j, 12 + j */
                    h = _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(h),
                                                             _mm256_extracti128_si256(h, 1)));
                if (OFFSET[type]) h = _mm256_add_epi32(h, _mm512_castsi512_si256(start));
                /* a row's first step (tile_rows32): its sums start here, on 8 lanes */
                __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(
                    _mm512_castps512_ps256(G[c].d), _mm512_castps512_ps256(dx)));
                if (type == Q4_1)
                    f = _mm256_fnmadd_ps(_mm512_castps512_ps256(G[c].w),
                                         _mm512_castps512_ps256(xs), f);
                acc[r][c] = _mm512_zextps256_ps512(f);
                continue;
            }
            if (OFFSET[type]) I = _mm512_add_epi32(I, start);
            acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(G[c].d, dx),
                                        acc[r][c]);
            if (type == Q4_1) acc[r][c] = _mm512_fnmadd_ps(G[c].w, xs, acc[r][c]);
        }
    }
}

/* The 32-weight types: R (<= 4) rows from row m of the tiles' activations t against C
   decoded columns (G: TILE_COLS a group) over all k inputs -> y [R][ldy], columns 0..C-1.
   The float sums stay in registers; each (row, column) pair's operations are the same
   whatever R and C (its sum's slot in hsum8 included: one tree for all slots). */
VNNI INLINE void tile_rows32(const Group32 *G, int C, int type, const Prep *t, idx_t k, idx_t m,
                             int R, float *y, idx_t ldy) {
    const idx_t ng = (k + 511) / 512, full = k / 512, xrow = xrow32(k);
    const int8_t *X = t->X + m * xrow;
    __m512 acc[4][TILE_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    if (full < ng) { /* the last group's blocks first (a constant L: the loops unroll; on
                        fewer than 16 lanes it sets acc): its sums' reductions overlap the
                        full groups' dot products */
        const Group32 *last = G + full * TILE_COLS;
        switch (lanes32(k, full)) {
        case 16: step32(last, C, type, 16, t, m * ng + full, ng, X + 512 * full, xrow, R, acc);
            break;
        case 8: step32(last, C, type, 8, t, m * ng + full, ng, X + 512 * full, xrow, R, acc);
            break;
        default: step32(last, C, type, 4, t, m * ng + full, ng, X + 512 * full, xrow, R, acc);
        }
    }
    for (idx_t g = 0; g < full; g++)
        step32(G + g * TILE_COLS, C, type, 16, t, m * ng + g, ng, X + 512 * g, xrow, R, acc);
    __m256 v[8];
    float s[8];
    for (int i = 0; i < 8; i++) /* slot r C + c; zeros after */
        v[i] = i >= R * C ? _mm256_setzero_ps() : _mm256_add_ps(
            _mm512_castps512_ps256(acc[i / C][i % C]), high8(acc[i / C][i % C]));
    hsum8(v, s);
    for (int i = 0; i < R * C; i++) y[(i / C) * ldy + i % C] = s[i];
}

/* The 32-weight types: C (<= TILE_COLS) output rows from r0 for the pass's M (<= TILE_ROWS)
   activation rows m0 .. m0 + M - 1 of t -> y: every group of the C columns decoded once
   (into t->work), then the rows four at a time against them */
VNNI INLINE void tile_cols32(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, int C,
                             idx_t k, int type, const Prep *t, idx_t m0, int M, float *y) {
    Group32 *G = t->work;
    for (idx_t g = 0; g < (k + 511) / 512; g++) {
        const int cnt = k / 32 - 16 * g < 16 ? (int)(k / 32 - 16 * g) : 16;
        for (int c = 0; c < C; c++)
            decode32(raw + (r0 + c) * stride + 16 * g * BYTES[type], cnt, type,
                     &G[g * TILE_COLS + c]);
    }
    int m = 0;
    for (; m + 4 <= M; m += 4) tile_rows32(G, C, type, t, k, m0 + m, 4, y + m * n + r0, n);
    for (; m < M; m++) tile_rows32(G, C, type, t, k, m0 + m, 1, y + m * n + r0, n);
}

/* The K-quants: rows at .. at + R - 1 (R <= 4; the pass's m0 .. m0 + R - 1) against C
   decoded columns */
VNNI INLINE void rows_step(const Group *G, int C, int type, const Prep *t, idx_t at, int m0,
                           int R, Acc (*acc)[TILE_COLS]) {
    __m512i D[4][TILE_COLS];
    for (int r = 0; r < R; r++) {
        __m512i s = _mm512_setzero_si512();
        if (type == Q6_K) { /* Q6_K's codes are q + 32: its dots start at -32 S16 */
            s = _mm512_loadu_si512(t->s16 + 16 * (at + r));
            IN_REGISTER(s);
        }
        for (int c = 0; c < C; c++) D[r][c] = s;
    }
    for (int q = 0; q < 4; q++) /* one load of X for the tile's columns */
        for (int r = 0; r < R; r++) {
            __m512i x = _mm512_loadu_si512(t->X + 256 * (at + r) + 64 * q);
            IN_REGISTER(x);
            for (int c = 0; c < C; c++) D[r][c] = _mm512_dpbusd_epi32(D[r][c], G[c].v[q], x);
        }
    for (int r = 0; r < R; r++) {
        Acc *a = acc[m0 + r];
        __m256 dx = _mm256_set1_ps(t->dx[16 * (at + r)]);
        __m256 xs = _mm256_loadu_ps(t->xs + 16 * (at + r));
        IN_REGISTER(dx);
        IN_REGISTER(xs);
        for (int c = 0; c < C; c++) {
            const __m256 ddx = _mm256_mul_ps(G[c].d, dx);
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

/* the pass's M rows of a K-quant's group (at: its first) against C decoded columns, four
   rows at a time: 4 C independent dot chains in flight */
VNNI INLINE void group_rows(const Group *G, int C, int type, const Prep *t, idx_t at, int M,
                            Acc (*acc)[TILE_COLS]) {
    int m = 0;
    for (; m + 4 <= M; m += 4) rows_step(G, C, type, t, at + m, m, 4, acc);
    for (; m < M; m++) rows_step(G, C, type, t, at + m, m, 1, acc);
}

/* C (<= TILE_COLS) output rows from r0 for the pass's M (<= TILE_ROWS) activation rows
   m0 .. m0 + M - 1 of t (prepare_tiles' rows) -> y */
VNNI INLINE void tile_cols(const uint8_t *raw, idx_t stride, idx_t n, idx_t r0, int C, idx_t k,
                           int type, const Prep *t, idx_t rows, idx_t m0, int M, float *y) {
    Acc acc[TILE_ROWS][TILE_COLS];
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++) acc[m][c].z = _mm512_setzero_ps();
    for (idx_t g = 0; g < k / 256; g++) {
        Group G[TILE_COLS];
        for (int c = 0; c < C; c++)
            decode256(raw + (r0 + c) * stride + g * BYTES[type], type, &G[c]);
        group_rows(G, C, type, t, g * rows + m0, M, acc);
    }
    /* the sums, 8 at a time (zeros after the last): slot m C + c */
    __m256 v[TILE_ROWS * TILE_COLS + 7];
    float s[TILE_ROWS * TILE_COLS + 7];
    for (int i = 0; i < M * C; i++) {
        const Acc *a = &acc[i / C][i % C];
        v[i] = _mm256_add_ps(a->a, a->b);
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
        if (ELEMS[type] == 32)
            tile_cols32(raw, stride, n, r, TILE_COLS, k, type, t, m0, M, y);
        else
            tile_cols(raw, stride, n, r, TILE_COLS, k, type, t, rows, m0, M, y);
    for (; r < n; r++)
        if (ELEMS[type] == 32)
            tile_cols32(raw, stride, n, r, 1, k, type, t, m0, M, y);
        else
            tile_cols(raw, stride, n, r, 1, k, type, t, rows, m0, M, y);
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
