/* The tiles' float order for few activation rows (decode: 1 row, the hot path), on the VNNI
 * path of gguf_blocks.c (its only includer, after gguf_blocks_tiles.h, whose lanes, lane_sub,
 * heads8 and hsum8 it reuses).
 *
 * Why: a row's result must not depend on how many rows share its call (a cached prefix's
 * continuation equals the cold run, a speculative verify's rows equal the one-token steps),
 * and the tiles (more rows) keep one float32 chain per sub-block (block) lane. Their lanes
 * come from transposing the decoded codes, which pays off only when many rows share each
 * decoded block: at 1 row the tiles ran 1.7-2.9x slower than the streaming kernel. Here
 * the codes stay in file order and each lane's exact integer comes from reducing the
 * dot products instead (vpdpbusd per sub-block, then an add tree across vectors: lane j of
 * the result = sub-block j's sum), once per row and group. Q4_1's full groups (its blocks are
 * 5 dwords: SmolLM2's file) go the other way round: the group's blocks put on the lanes by
 * permutes and the activations transposed once per call to meet them (q4_1_on_lanes), which
 * leaves the same integers on the same lanes with about half the shuffles.
 *
 * Numerics (bit-identical to the tiles for every row, tested by
 * tests/kernels/cpu/test_gguf_blocks_row_invariance.py): the same exact integers per
 * sub-block (block) on the same lanes, then the tiles' float operations in their order:
 * K-quants per super-block a += float(I_j sc_j) (d dx) (Q6_K: 16 lanes in lane_sub's order,
 * the low 8 in a, the high 8 in b), Q4_K/Q5_K b -= (mn_j dmin) (dx S_j); the 32-weight
 * types per group of 16 blocks acc += float(I_j) (A_j dx_j) (Q4_1: acc -= (-m_j) (dx S_j)),
 * the ragged last group first (a product, not a sum, on up to 8 blocks: the tiles' step32
 * or last4); then a + b (acc's two halves) and hsum8's tree. */
#ifndef RADIXLM_GGUF_BLOCKS_LANES_H
#define RADIXLM_GGUF_BLOCKS_LANES_H

#define XT_MAX_COLS 16384 /* q4_1_on_lanes' transposed activations on the stack: 16 KiB */

#ifndef LANES_R
#define LANES_R 2 /* the 32-weight types' output rows side by side */
#endif

/* r[j] = the sum of the 8 lanes of P[j] (integers: any order is exact) */
VNNI INLINE __m256i reduce8(const __m256i *P) {
    __m256i a[4], b[2];
    for (int i = 0; i < 4; i++) /* per 128-bit half: P2i (0+2), P2i+1 (0+2), (1+3), (1+3) */
        a[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(P[2 * i], P[2 * i + 1]),
                                _mm256_unpackhi_epi32(P[2 * i], P[2 * i + 1]));
    for (int i = 0; i < 2; i++) /* per half: the half sums of P4i .. P4i+3 */
        b[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(a[2 * i], a[2 * i + 1]),
                                _mm256_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(b[0], b[1], 0x20),
                            _mm256_permute2x128_si256(b[0], b[1], 0x31));
}

/* Z[a] 512-bit, 16 lanes: its 128-bit chunks c hold parts of items 4 a + c... reduced per
   chunk: out chunk c = the chunk-c sums of Z[0..3] (lane i: Z[i]'s chunk c) */
VNNI INLINE __m512i reduce_chunks4(const __m512i *Z) {
    const __m512i a0 = _mm512_add_epi32(_mm512_unpacklo_epi32(Z[0], Z[1]),
                                        _mm512_unpackhi_epi32(Z[0], Z[1]));
    const __m512i a1 = _mm512_add_epi32(_mm512_unpacklo_epi32(Z[2], Z[3]),
                                        _mm512_unpackhi_epi32(Z[2], Z[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a0, a1), _mm512_unpackhi_epi64(a0, a1));
}

/* A K-quant's output row for M activation rows -> v[m] (a + b, before hsum8) */
VNNI INLINE void row256_lanes(const uint8_t *row, idx_t k, int type, const Prep *p, int M,
                              __m256 *v) {
    const idx_t nsb = k / 256;
    /* Q6_K: lane p <- sub-block lane_sub(p) from the sub-blocks' natural order (S), and
       from reduce_chunks4's pair [0 2 4 6 1 3 5 7 | 8 10 12 14 9 11 13 15] (Z) */
    const __m512i S = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i Z = _mm512_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14, 1, 3, 9, 11, 5, 7, 13, 15);
    __m256 a[FEW_ROWS], b[FEW_ROWS]; /* M <= FEW_ROWS (gguf_blocks_few.h) */
    for (int m = 0; m < M; m++) a[m] = b[m] = _mm256_setzero_ps();
    for (idx_t sb = 0; sb < nsb; sb++) {
        const uint8_t *blk = row + sb * BYTES[type];
        prefetch_ahead(blk, BYTES[type]);
        __m256i u[8], scs[8], mn = _mm256_setzero_si256(), scn[2] = {mn, mn};
        codes256(type, blk, u, scs, &mn, scn);
        __m256i sc8 = _mm256_setzero_si256();
        __m512i sc16 = _mm512_setzero_si512();
        __m256 w = _mm256_setzero_ps();
        if (type == Q6_K) {
            sc16 = _mm512_permutexvar_epi32(
                S, _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192))));
        } else {
            sc8 = scales_mins_k4(blk, &mn);
            w = _mm256_mul_ps(_mm256_cvtepi32_ps(mn), _mm256_set1_ps(f16(blk + 2)));
        }
        const __m256 d = _mm256_set1_ps(f16(type == Q6_K ? blk + 208 : blk));
        for (int m = 0; m < M; m++) {
            const int8_t *X = p->X + m * k + sb * 256;
            const float dxs = p->dx[m * nsb + sb];
            const __m256 ddx = _mm256_mul_ps(d, _mm256_set1_ps(dxs));
            __m256i P[8];
            for (int t = 0; t < 8; t++)
                P[t] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[t],
                                           _mm256_loadu_si256((const __m256i *)(X + 32 * t)));
            if (type == Q6_K) { /* P[t]: sub-blocks 2t (lanes 0-3), 2t + 1 (4-7) */
                __m512i Zp[4];
                for (int i = 0; i < 4; i++)
                    Zp[i] = _mm512_inserti64x4(_mm512_castsi256_si512(P[i]), P[4 + i], 1);
                /* chunk c of Zp[i]: P[i] (c = 0, 1) or P[4 + i] (2, 3): sub-blocks
                   [0 2 4 6 | 1 3 5 7 | 8 10 12 14 | 9 11 13 15] */
                const __m512i dots = reduce_chunks4(Zp);
                const __m512i s16 = _mm512_loadu_si512(p->s16 + m * (k / 16) + sb * 16);
                const __m512i start = _mm512_mullo_epi32(_mm512_permutexvar_epi32(S, s16),
                                                         _mm512_set1_epi32(-32));
                const __m512i D = _mm512_add_epi32(start, _mm512_permutexvar_epi32(Z, dots));
                const __m512 f = _mm512_cvtepi32_ps(_mm512_mullo_epi32(D, sc16));
                a[m] = _mm256_fmadd_ps(_mm512_castps512_ps256(f), ddx, a[m]);
                b[m] = _mm256_fmadd_ps(high8(f), ddx, b[m]);
                continue;
            }
            const __m256i I = _mm256_mullo_epi32(reduce8(P), sc8);
            a[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), ddx, a[m]);
            const __m256 xs = _mm256_mul_ps(_mm256_set1_ps(dxs), _mm256_cvtepi32_ps(
                _mm256_loadu_si256((const __m256i *)(p->s32 + m * (k / 32) + sb * 8))));
            b[m] = _mm256_fnmadd_ps(w, xs, b[m]);
        }
    }
    for (int m = 0; m < M; m++) v[m] = _mm256_add_ps(a[m], b[m]);
}

/* the 32-bit values at b, b + bytes, ... (cnt <= 16 of them, a constant; zeros after) as 16
   lanes, by register inserts: a gather, or scalar stores read back as a vector (store
   forwarding fails), cost a quarter of the kernel's time */
VNNI INLINE __m512i dwords16(const uint8_t *b, int bytes, int cnt) {
    __m128i q[4];
    for (int i = 0; i < 4; i++) {
        q[i] = _mm_setzero_si128();
        int32_t d[4];
        for (int j = 0; j < 4 && 4 * i + j < cnt; j++) memcpy(d + j, b + (4 * i + j) * bytes, 4);
        if (4 * i < cnt) q[i] = _mm_cvtsi32_si128(d[0]);
        if (4 * i + 1 < cnt) q[i] = _mm_insert_epi32(q[i], d[1], 1);
        if (4 * i + 2 < cnt) q[i] = _mm_insert_epi32(q[i], d[2], 2);
        if (4 * i + 3 < cnt) q[i] = _mm_insert_epi32(q[i], d[3], 3);
    }
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(q[1], q[0])),
                              _mm256_set_m128i(q[3], q[2]), 1);
}

/* dwords16's values for the heads of cnt blocks: Q8_0's full groups by one gather (SmolLM2's
   Q8_0 LM head ~10% faster than with dwords16's loads and inserts; Q4_0 and Q5_0 measured no
   faster or slower) */
VNNI INLINE __m512i heads16(int type, const uint8_t *b, int bytes, int cnt) {
    if (type == Q8_0 && cnt == 16)
        return _mm512_i32gather_epi32(_mm512_mullo_epi32(_mm512_setr_epi32(
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(bytes)),
            (const void *)b, 1);
    return dwords16(b, bytes, cnt);
}

/* Q4_1's 16 blocks of a full group (320 bytes: 80 dwords in v[0..4], block j's head at
   dword 5 j, its 16 code bytes at 5 j + 1 .. 5 j + 4) -> lane j = block j's dword 5 j + c,
   by permutes (the index's low bits address each pair of vectors alike) */
VNNI INLINE __m512i column5(const __m512i *v, int c) {
    const __m512i col = _mm512_add_epi32(
        _mm512_setr_epi32(0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75),
        _mm512_set1_epi32(c));
    const __mmask16 high = _mm512_cmpge_epi32_mask(col, _mm512_set1_epi32(32)),
                    top = _mm512_cmpge_epi32_mask(col, _mm512_set1_epi32(64));
    const __m512i r = _mm512_mask_mov_epi32(_mm512_permutex2var_epi32(v[0], col, v[1]), high,
                                            _mm512_permutex2var_epi32(v[2], col, v[3]));
    return _mm512_mask_permutexvar_epi32(r, top, col, v[4]);
}

/* Q4_1's full group with the blocks on the lanes: *heads = dwords16(b, 20, 16) and the
   return value lane j = block j's exact sum of codes x activations, the I group_lanes32's
   reduction gives (integers: any order is exact). Code dword s of a block holds its
   elements 4 s .. 4 s + 3 (low nibbles) and 16 + 4 s .. (high); xt [8][16] (transpose_x)
   holds the activation dword t of block j at lane j of xt[t]: 8 vpdpbusd, no reduction
   shuffles, no scalar head loads. */
VNNI INLINE __m512i q4_1_on_lanes(const uint8_t *b, const int32_t *xt, __m512i *heads) {
    __m512i v[5];
    for (int i = 0; i < 5; i++) v[i] = _mm512_loadu_si512(b + 64 * i);
    *heads = column5(v, 0);
    const __m512i nib = _mm512_set1_epi8(15);
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    for (int s = 0; s < 4; s++) {
        const __m512i q = column5(v, 1 + s);
        lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(q, nib),
                                 _mm512_loadu_si512(xt + 16 * s));
        hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi32(q, 4), nib),
                                 _mm512_loadu_si512(xt + 16 * (4 + s)));
    }
    return _mm512_add_epi32(lo, hi);
}

/* the full groups' activations for q4_1_on_lanes: xt[g][t][j] = dword t of block 16 g + j
   (a transpose of each group's 16 x 8 dwords; once per activation row) */
static void transpose_x(const int8_t *X, idx_t groups, int32_t *xt) {
    for (idx_t g = 0; g < groups; g++)
        for (int j = 0; j < 16; j++)
            for (int t = 0; t < 8; t++)
                memcpy(xt + g * 128 + 16 * t + j, X + 512 * g + 32 * j + 4 * t, 4);
}

/* codes32 of the blocks at b and c in one 512-bit vector (b's in the low half), decoding
   both at once: half the nibble work of two codes32 */
VNNI INLINE __m512i codes32_two(int type, const uint8_t *b, const uint8_t *c) {
    if (type == Q8_0)
        return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(
            _mm256_loadu_si256((const __m256i *)(b + 2))),
            _mm256_loadu_si256((const __m256i *)(c + 2)), 1),
            _mm512_set1_epi8((char)0x80));
    const int at = type == Q4_0 ? 2 : type == Q4_1 ? 4 : 6; /* the nibbles' offset */
    const __m256i q = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b + at))),
        _mm_loadu_si128((const __m128i *)(c + at)), 1);
    /* 128-bit chunks [first, first, second, second]; the high nibbles in chunks 1 and 3 */
    __m512i u = _mm512_shuffle_i64x2(_mm512_castsi256_si512(q), _mm512_castsi256_si512(q),
                                     0x50);
    u = _mm512_and_si512(_mm512_mask_srli_epi16(u, 0xFF00FF00u, u, 4), _mm512_set1_epi8(15));
    if (type != Q5_0) return u;
    uint32_t h0, h1; /* bit i: element i's fifth bit, per block */
    memcpy(&h0, b + 2, 4);
    memcpy(&h1, c + 2, 4);
    return _mm512_mask_add_epi8(u, (__mmask64)h0 | (__mmask64)h1 << 32, u,
                                _mm512_set1_epi8(16));
}

/* codes32_two of the adjacent blocks at b and b + bytes */
VNNI INLINE __m512i codes32x2(int type, const uint8_t *b, int bytes) {
    return codes32_two(type, b, b + bytes);
}

/* A short last group (cnt <= 4 blocks): block j's 32 codes u[j] dotted with X's 32 bytes
 * on 256 bits, each block's int32 sum in lane j of the result (zeros past cnt); the lanes
 * kernel's and the few-rows kernel's (one order for both: a row's bits never depend on
 * how many rows share its call). */
VNNI INLINE __m512i short_group_dots(const __m256i *u, const int8_t *X, int cnt) {
    __m256i P4[4], a[2];
    for (int j = 0; j < 4; j++)
        P4[j] = j < cnt ? _mm256_dpbusd_epi32(
            _mm256_setzero_si256(), u[j],
            _mm256_loadu_si256((const __m256i *)(X + 32 * j))) : _mm256_setzero_si256();
    for (int i = 0; i < 2; i++)
        a[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(P4[2 * i], P4[2 * i + 1]),
                                _mm256_unpackhi_epi32(P4[2 * i], P4[2 * i + 1]));
    const __m256i h = _mm256_add_epi32(_mm256_unpacklo_epi64(a[0], a[1]),
                                       _mm256_unpackhi_epi64(a[0], a[1]));
    return _mm512_zextsi128_si512(_mm_add_epi32(_mm256_castsi256_si128(h),
                                                _mm256_extracti128_si256(h, 1)));
}

/* Blocks 16 g .. 16 g + cnt - 1 (cnt <= 16) of R output rows (row, row + stride, ...) for
   the one activation row into acc[r] (first: the ragged last group, which sets acc as the
   tiles' step32 or last4 does). R rows side by side: independent chains for the scheduler. */
VNNI INLINE void group_lanes32(const uint8_t *row, idx_t stride, int R, idx_t g, int cnt,
                               int first, idx_t k, int type, const Prep *p, const int32_t *xt,
                               __m512 *acc) {
    const int bytes = BYTES[type];
    const __m512i Z = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    const __mmask16 live = (__mmask16)((1u << cnt) - 1);
    const int8_t *X = p->X + 512 * g;
    __m512i x[8]; /* blocks 2 i, 2 i + 1 of the activations (no reads past the last) */
    for (int i = 0; i < 8 && 2 * i < cnt && cnt > 4; i++) {
        if (cnt == 16) {
            x[i] = _mm512_loadu_si512(X + 64 * i);
            continue;
        }
        const __m256i x1 = 2 * i + 1 < cnt
            ? _mm256_loadu_si256((const __m256i *)(X + 64 * i + 32)) : _mm256_setzero_si256();
        x[i] = _mm512_inserti64x4(_mm512_castsi256_si512(
            _mm256_loadu_si256((const __m256i *)(X + 64 * i))), x1, 1);
    }
    const __m512 dx = _mm512_maskz_loadu_ps(live, p->dx + 16 * g);
    const __m512 xs = type == Q4_1 ? _mm512_maskz_loadu_ps(live, p->xs + 16 * g) : dx;
    /* the codes are q + off: the exact sum of q X starts at -off S */
    const __m512i start = _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(live, p->s32 + 16 * g),
                                             _mm512_set1_epi32(-OFFSET[type]));
    for (int r = 0; r < R; r++) {
        const uint8_t *b = row + r * stride + 16 * g * bytes;
        prefetch_ahead(b, cnt * bytes);
        /* the blocks' float16 A (Q4_1: and m above it), decode32's values (zeros past cnt) */
        __m512i heads, I;
        if (type == Q4_1 && cnt == 16 && xt) {
            I = q4_1_on_lanes(b, xt + 128 * g, &heads);
        } else if (cnt <= 4) {
            /* a short last group: 256-bit dots, reduced on 128 bits */
            heads = heads16(type, b, bytes, cnt);
            __m256i u[4];
            for (int j = 0; j < cnt; j++) u[j] = codes32(type, b + j * bytes);
            I = short_group_dots(u, X, cnt);
        } else {
            heads = heads16(type, b, bytes, cnt);
            __m512i P[8];
            for (int i = 0; i < 8; i++) {
                if (2 * i >= cnt) { /* a constant cnt (row32_lanes' switch): no work here */
                    P[i] = _mm512_setzero_si512();
                    continue;
                }
                const __m512i u = 2 * i + 1 < cnt
                    ? codes32x2(type, b + 2 * i * bytes, bytes)
                    : _mm512_castsi256_si512(codes32(type, b + 2 * i * bytes)); /* zeros above */
                P[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x[i]);
        }
        /* reduce_chunks4: blocks [0 2 4 6 | 1 3 5 7] and [8 10 12 14 | 9 11 13 15] per
           chunk pair; their chunks added: [0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15] */
        const __m512i c0 = reduce_chunks4(P);
        const __m512i c1 = cnt > 8 ? reduce_chunks4(P + 4) : _mm512_setzero_si512();
        I = _mm512_permutexvar_epi32(Z, _mm512_add_epi32(_mm512_shuffle_i64x2(c0, c1, 0x88),
                                                         _mm512_shuffle_i64x2(c0, c1, 0xDD)));
        }
        if (OFFSET[type]) I = _mm512_add_epi32(I, start);
        const __m512 A = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(heads));
        const __m512 f = _mm512_cvtepi32_ps(I), scale = _mm512_mul_ps(A, dx);
        if (first && cnt <= 8) /* the tiles' step32 on 8 lanes, last4 on 4: a product */
            acc[r] = _mm512_mul_ps(f, scale);
        else
            acc[r] = _mm512_fmadd_ps(f, scale, first ? _mm512_setzero_ps() : acc[r]);
        if (type == Q4_1) {
            const __m512 w = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(
                _mm512_cvtepi32_epi16(_mm512_srli_epi32(heads, 16))));
            acc[r] = _mm512_fnmadd_ps(w, xs, acc[r]);
        }
    }
}

/* R output rows of a 32-weight type for the one activation row -> v[r] (acc's halves
   added) */
VNNI INLINE void rows32_lanes(const uint8_t *row, idx_t stride, int R, idx_t k, int type,
                              const Prep *p, const int32_t *xt, __m256 *v) {
    const idx_t full = k / 512;
    const int last = (int)(k / 32 - 16 * full);
    __m512 acc[LANES_R];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    switch (last) { /* the ragged last group first, its count a constant */
#define LAST(c) case c: group_lanes32(row, stride, R, full, c, 1, k, type, p, xt, acc); break;
        LAST(1) LAST(2) LAST(3) LAST(4) LAST(5) LAST(6) LAST(7) LAST(8)
        LAST(9) LAST(10) LAST(11) LAST(12) LAST(13) LAST(14) LAST(15)
#undef LAST
    }
    for (idx_t g = 0; g < full; g++)
        group_lanes32(row, stride, R, g, 16, 0, k, type, p, xt, acc);
    for (int r = 0; r < R; r++)
        v[r] = _mm256_add_ps(_mm512_castps512_ps256(acc[r]), high8(acc[r]));
}

/* all n output rows for one activation row -> y [n]: 8 output rows' sums at a time through
   hsum8 (each slot by the same tree); the 32-weight types LANES_R rows side by side */
VNNI INLINE void gemm_lanes(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                            const Prep *p, float *y) {
    __m256 v[8];
    float s[8];
    /* Q4_1: the activations transposed for q4_1_on_lanes (wider rows: the reductions) */
    _Alignas(64) int32_t buf[XT_MAX_COLS / 4];
    const int32_t *xt = NULL;
    if (type == Q4_1 && k >= 512 && k <= XT_MAX_COLS) {
        transpose_x(p->X, k / 512, buf);
        xt = buf;
    }
    for (idx_t r0 = 0; r0 < n; r0 += 8) {
        const int C = n - r0 < 8 ? (int)(n - r0) : 8;
        int c = 0;
        for (; ELEMS[type] == 32 && c + LANES_R <= C; c += LANES_R)
            rows32_lanes(raw + (r0 + c) * stride, stride, LANES_R, k, type, p, xt, v + c);
        for (; c < C; c++) {
            if (ELEMS[type] == 32)
                rows32_lanes(raw + (r0 + c) * stride, stride, 1, k, type, p, xt, v + c);
            else
                row256_lanes(raw + (r0 + c) * stride, k, type, p, 1, v + c);
        }
        for (; c < 8; c++) v[c] = _mm256_setzero_ps();
        hsum8(v, s);
        for (c = 0; c < C; c++) y[r0 + c] = s[c];
    }
}

/* one activation row (decode) per type; more rows run the tiles */
#define LANES_FOR(T)                                                                      \
    VNNI static void lanes_##T(const uint8_t *raw, idx_t stride, idx_t n, idx_t k,        \
                               const Prep *p, float *y) {                                 \
        gemm_lanes(raw, stride, n, k, T, p, y);                                           \
    }
LANES_FOR(Q4_0) LANES_FOR(Q4_1) LANES_FOR(Q5_0) LANES_FOR(Q8_0)
LANES_FOR(Q4_K) LANES_FOR(Q5_K) LANES_FOR(Q6_K)
static const gemm_fn LANES[NTYPES] = {lanes_Q4_0, lanes_Q4_1, lanes_Q5_0, lanes_Q8_0,
                                      lanes_Q4_K, lanes_Q5_K, lanes_Q6_K};

#endif /* RADIXLM_GGUF_BLOCKS_LANES_H */
