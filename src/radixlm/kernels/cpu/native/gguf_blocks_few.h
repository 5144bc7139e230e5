/* A few activation rows (2 .. FEW_ROWS: a speculative verify's draft rows) on the VNNI path
 * of gguf_blocks.c (its only includer, after gguf_blocks_lanes.h, whose group pieces,
 * row256_lanes and hsum8 it reuses).
 *
 * Why: at batch 1 the weight stream dominates a step, so R rows should cost little more than
 * one. The tiles (passes of 128 rows) transpose each decoded group for the rows of a pass:
 * worth it at 128 rows, not at 2-8 (2 rows in one call cost 2.0-2.5x a 1-row call, 8 rows
 * 3.0-3.8x; benchmarks/gguf_few_rows.py). Here each output row's blocks are read and decoded
 * once, as the lanes kernel does for one row, and dotted with every activation row of the call.
 *
 * Numerics (bit-identical per row to the lanes kernel, so to the tiles: tested by
 * tests/kernels/cpu/test_gguf_blocks_row_invariance.py): each activation row gets the same
 * exact integer per sub-block (block) on the same lane as the lanes kernel, then that
 * kernel's float operations in its order (group_lanes32's products and FMAs, the ragged last
 * group first; row256_lanes per row; acc's halves added; hsum8's tree per 8 output rows). The
 * integers are exact, so any way of computing them gives the lanes kernel's: a full group of
 * 16 blocks puts its blocks on the lanes once for all rows (Q4_1 by q4_1_on_lanes' permutes,
 * the others by transposing the decoded codes) and meets each row's activations transposed
 * once per call, 8 dot products a row; a ragged last group of <= 8 blocks puts 8 output rows'
 * blocks on the lanes (ragged_rows), one of 9-15 reduces each row's dot products as the lanes
 * kernel does; Q4_K/Q5_K from 3 rows put two super-blocks' sub-blocks on the lanes
 * (row256_few), Q6_K and 2 rows reduce per row and super-block (row256_lanes).
 *
 * Cost (Zen 4): from 4 rows the bound is the vector pipes that run both vpdpbusd and the FMAs
 * (measured: a vpdpbusd and an FMA do not overlap), about 9 vpdpbusd and 3-4 float products a
 * row and 576 inputs; the per-lane float operations are the lanes kernel's, fixed by its
 * bits, so what is left to cut is shuffles and reductions. */
#ifndef RADIXLM_GGUF_BLOCKS_FEW_H
#define RADIXLM_GGUF_BLOCKS_FEW_H

/* transpose8 (gguf_blocks_tiles.h) on both 256-bit halves of u at once: u[i] holds block i's
   8 code dwords (low half) and block 8 + i's (high half) -> v[t] lane j = dword t of block j
   (a full group's 16 blocks on the lanes, in order) */
VNNI INLINE void transpose8x2(const __m512i *u, __m512i *v) {
    __m512i t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(u[2 * i], u[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(u[2 * i], u[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        s[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        s[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        s[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        s[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    /* per half, permute2x128's 0x20 (the low 128 bits of each) and 0x31 (the high) */
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13),
                  hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int q = 0; q < 4; q++) {
        v[q] = _mm512_permutex2var_epi64(s[q], lo, s[4 + q]);
        v[4 + q] = _mm512_permutex2var_epi64(s[q], hi, s[4 + q]);
    }
}

/* A group's exact integers for activation rows m < M: I[m] lane j = block 16 g + j's sum of
   codes times X (zeros past cnt), the codes of the group at b decoded once. *heads: the
   blocks' first dwords (their float16 A; Q4_1 with m above it), zeros past cnt. xt: the rows'
   transposed activations (transpose_x, k / 4 dwords a row) or NULL. */
VNNI INLINE void group_ints_few(const uint8_t *b, idx_t g, int cnt, idx_t k, int type,
                                const Prep *p, int M, const int32_t *xt, __m512i *heads,
                                __m512i *I) {
    const int bytes = BYTES[type];
    prefetch_ahead(b, cnt * bytes);
    if (type == Q4_1 && cnt == 16 && xt) { /* the blocks on the lanes (q4_1_on_lanes) */
        __m512i v[5], q[8];
        for (int i = 0; i < 5; i++) v[i] = _mm512_loadu_si512(b + 64 * i);
        *heads = column5(v, 0);
        const __m512i nib = _mm512_set1_epi8(15);
        for (int s = 0; s < 4; s++) {
            const __m512i c = column5(v, 1 + s);
            q[s] = _mm512_and_si512(c, nib);
            q[4 + s] = _mm512_and_si512(_mm512_srli_epi32(c, 4), nib);
        }
        for (int m = 0; m < M; m++) {
            const int32_t *x = xt + m * (k / 4) + 128 * g;
            __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
            for (int s = 0; s < 4; s++) {
                lo = _mm512_dpbusd_epi32(lo, q[s], _mm512_loadu_si512(x + 16 * s));
                hi = _mm512_dpbusd_epi32(hi, q[4 + s], _mm512_loadu_si512(x + 16 * (4 + s)));
            }
            I[m] = _mm512_add_epi32(lo, hi);
        }
        return;
    }
    *heads = heads16(type, b, bytes, cnt);
    if (cnt == 16 && xt) { /* the other types' full groups: codes transposed once, all rows */
        __m512i u[8], q[8];
        for (int i = 0; i < 8; i++) u[i] = codes32_two(type, b + i * bytes, b + (8 + i) * bytes);
        transpose8x2(u, q);
        for (int m = 0; m < M; m++) {
            const int32_t *x = xt + m * (k / 4) + 128 * g;
            __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
            for (int t = 0; t < 4; t++) {
                lo = _mm512_dpbusd_epi32(lo, q[t], _mm512_loadu_si512(x + 16 * t));
                hi = _mm512_dpbusd_epi32(hi, q[4 + t], _mm512_loadu_si512(x + 16 * (4 + t)));
            }
            I[m] = _mm512_add_epi32(lo, hi);
        }
        return;
    }
    if (cnt <= 4) { /* a short last group: 256-bit dots, reduced on 128 bits */
        __m256i u[4];
        for (int j = 0; j < cnt; j++) u[j] = codes32(type, b + j * bytes);
        for (int m = 0; m < M; m++)
            I[m] = short_group_dots(u, p->X + m * k + 512 * g, cnt);
        return;
    }
    /* blocks 2 i, 2 i + 1 in u[i] (zeros past cnt); each row's dots reduced as
       group_lanes32 does: reduce_chunks4 per 8 blocks, then the chunks put in block order */
    const __m512i Z = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    __m512i u[8];
    for (int i = 0; i < 8; i++)
        u[i] = 2 * i >= cnt ? _mm512_setzero_si512()
             : 2 * i + 1 < cnt ? codes32x2(type, b + 2 * i * bytes, bytes)
             : _mm512_castsi256_si512(codes32(type, b + 2 * i * bytes));
    for (int m = 0; m < M; m++) {
        const int8_t *X = p->X + m * k + 512 * g;
        __m512i P[8];
        for (int i = 0; i < 8; i++) {
            if (2 * i >= cnt) {
                P[i] = _mm512_setzero_si512();
                continue;
            }
            /* blocks 2 i, 2 i + 1 of the activations (no reads past the last block) */
            const __m512i x = cnt == 16 ? _mm512_loadu_si512(X + 64 * i)
                : _mm512_inserti64x4(_mm512_castsi256_si512(
                      _mm256_loadu_si256((const __m256i *)(X + 64 * i))),
                      2 * i + 1 < cnt ? _mm256_loadu_si256((const __m256i *)(X + 64 * i + 32))
                                      : _mm256_setzero_si256(), 1);
            P[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[i], x);
        }
        const __m512i c0 = reduce_chunks4(P);
        const __m512i c1 = cnt > 8 ? reduce_chunks4(P + 4) : _mm512_setzero_si512();
        I[m] = _mm512_permutexvar_epi32(Z, _mm512_add_epi32(_mm512_shuffle_i64x2(c0, c1, 0x88),
                                                            _mm512_shuffle_i64x2(c0, c1, 0xDD)));
    }
}

/* Blocks 16 g .. 16 g + cnt - 1 of one output row (at row) into acc[m] for activation rows
   m < M: group_lanes32's float operations on each row's integers (first: the ragged last
   group, which sets acc) */
VNNI INLINE void group_few32(const uint8_t *row, idx_t g, int cnt, int first, idx_t k,
                             int type, const Prep *p, int M, const int32_t *xt, __m512 *acc) {
    const idx_t nb = k / 32;
    const __mmask16 live = (__mmask16)((1u << cnt) - 1);
    __m512i heads, I[FEW_ROWS];
    group_ints_few(row + 16 * g * BYTES[type], g, cnt, k, type, p, M, xt, &heads, I);
    const __m512 A = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(heads));
    const __m512 w = type == Q4_1 ? _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(
        _mm512_cvtepi32_epi16(_mm512_srli_epi32(heads, 16)))) : A;
    for (int m = 0; m < M; m++) {
        const __m512 dx = _mm512_maskz_loadu_ps(live, p->dx + m * nb + 16 * g);
        __m512i Im = I[m];
        if (OFFSET[type]) /* the codes are q + off: the exact sum of q X starts at -off S */
            Im = _mm512_add_epi32(Im, _mm512_mullo_epi32(
                _mm512_maskz_loadu_epi32(live, p->s32 + m * nb + 16 * g),
                _mm512_set1_epi32(-OFFSET[type])));
        const __m512 f = _mm512_cvtepi32_ps(Im), scale = _mm512_mul_ps(A, dx);
        if (first && cnt <= 8) /* the tiles' step32 on 8 lanes, last4 on 4: a product */
            acc[m] = _mm512_mul_ps(f, scale);
        else
            acc[m] = _mm512_fmadd_ps(f, scale, first ? _mm512_setzero_ps() : acc[m]);
        if (type == Q4_1)
            acc[m] = _mm512_fnmadd_ps(w, _mm512_maskz_loadu_ps(live, p->xs + m * nb + 16 * g),
                                      acc[m]);
    }
}

#define RAG_STRIDE 64 /* floats a row of the ragged accs: 8 output rows x P <= 8 lanes */

/* One output row of a 32-weight type for M activation rows -> v[m] (acc's halves added).
   rag (or NULL): the ragged last group's acc for this row, already computed by ragged_rows
   (row m at rag + RAG_STRIDE m, its `last` lanes) */
VNNI INLINE void row_few32(const uint8_t *row, idx_t k, int type, const Prep *p, int M,
                           const int32_t *xt, const float *rag, __m256 *v) {
    const idx_t full = k / 512;
    const int last = (int)(k / 32 - 16 * full);
    __m512 acc[FEW_ROWS];
    if (rag) { /* the masked lanes +0, as the ragged group leaves them */
        for (int m = 0; m < M; m++)
            acc[m] = _mm512_maskz_loadu_ps((__mmask16)((1u << last) - 1),
                                           rag + RAG_STRIDE * m);
    } else {
        for (int m = 0; m < M; m++) acc[m] = _mm512_setzero_ps();
        switch (last) { /* the ragged last group first, its count a constant */
#define LAST(c) case c: group_few32(row, full, c, 1, k, type, p, M, xt, acc); break;
            LAST(1) LAST(2) LAST(3) LAST(4) LAST(5) LAST(6) LAST(7) LAST(8)
            LAST(9) LAST(10) LAST(11) LAST(12) LAST(13) LAST(14) LAST(15)
#undef LAST
        }
    }
    for (idx_t g = 0; g < full; g++) group_few32(row, g, 16, 0, k, type, p, M, xt, acc);
    for (int m = 0; m < M; m++)
        v[m] = _mm256_add_ps(_mm512_castps512_ps256(acc[m]), high8(acc[m]));
}

/* The ragged last group (last <= 8 blocks) of 8 output rows at once, its blocks on the
 * lanes: lane l of vector v holds output row c = (16 v + l) / P's block j = (16 v + l) % P
 * (P: last rounded up to a power of two; lanes with j >= last are dead). Per row alone the
 * group fills `last` of 16 lanes and its dot products need an add tree per activation row
 * (short_group_dots, reduce_chunks4): at 4+ rows that cost more than the full group's work.
 * Here the codes are transposed once per 8 output rows (transpose8x2, as a full group's)
 * and meet each activation row's ragged blocks, transposed once per call: 8 vpdpbusd per
 * activation row and 8 output rows. The integers are exact, so equal to the lanes kernel's;
 * then group_few32's float operations for a first group of <= 8 blocks, lane by lane
 * (acc = f (A dx); Q4_1: acc -= w xs), so each live lane holds the bits it would alone. */
typedef struct {
    __m512i xr[FEW_ROWS][8]; /* lane l: act dword t of block 16 full + l % P, 0 if dead */
    __m512i start[FEW_ROWS]; /* lane l: -off S of that block (0 if dead) */
    __m512 dx[FEW_ROWS], xs[FEW_ROWS]; /* lane l: that block's dx, dx S (0 if dead) */
    int32_t off[64]; /* byte offset of lane l's block from the 8 rows' ragged group */
    int P, V, last;  /* lanes a row, vectors (8 P / 16, at least 1), live lanes a row */
} Ragged;

/* Ragged's per-call parts from the prepared activations (its lanes: see ragged_rows) */
VNNI static void ragged_prepare(const Prep *p, idx_t k, idx_t stride, int type, int M,
                                Ragged *r) {
    const idx_t nb = k / 32, first = nb / 16 * 16;
    r->last = (int)(nb - first);
    for (r->P = 1; r->P < r->last; r->P *= 2) {}
    r->V = r->P == 1 ? 1 : r->P / 2;
    for (int m = 0; m < M; m++) {
        int32_t xr[8][16], start[16];
        float dx[16], xs[16];
        for (int l = 0; l < 16; l++) {
            const int j = l % r->P, live = j < r->last;
            const idx_t b = m * nb + first + j;
            for (int t = 0; t < 8; t++) {
                xr[t][l] = 0;
                if (live) memcpy(&xr[t][l], p->X + m * k + 32 * (first + j) + 4 * t, 4);
            }
            start[l] = live ? -OFFSET[type] * p->s32[b] : 0;
            dx[l] = live ? p->dx[b] : 0.0f;
            xs[l] = live && type == Q4_1 ? p->xs[b] : 0.0f;
        }
        for (int t = 0; t < 8; t++) r->xr[m][t] = _mm512_loadu_si512(xr[t]);
        r->start[m] = _mm512_loadu_si512(start);
        r->dx[m] = _mm512_loadu_ps(dx);
        r->xs[m] = _mm512_loadu_ps(xs);
    }
    for (int l = 0; l < 64; l++) { /* dead lanes read the first row's first ragged block */
        const int c = l / r->P, j = l % r->P;
        r->off[l] = c < 8 && j < r->last ? (int32_t)(c * stride + j * BYTES[type]) : 0;
    }
}

/* The ragged last group of output rows g0 .. g0 + C - 1 (C <= 8; g0: their group's first
   byte) -> rag[m][c P + j] for activation rows m < M (see Ragged) */
VNNI INLINE void ragged_rows(const uint8_t *g0, idx_t stride, int C, int type, int M,
                             const Ragged *r, float *rag) {
    const int bytes = BYTES[type];
    for (int c = 0; c < C; c++) prefetch_ahead(g0 + c * stride, r->last * bytes);
    int32_t off[64];
    const int32_t *o = r->off;
    if (C < 8) { /* the rows past n read the first row's blocks (their lanes unused) */
        for (int l = 0; l < 16 * r->V; l++) off[l] = l / r->P < C ? r->off[l] : 0;
        o = off;
    }
    for (int v = 0; v < r->V; v++) {
        const int32_t *ov = o + 16 * v;
        __m512i u[8], q[8];
        for (int i = 0; i < 8; i++) u[i] = codes32_two(type, g0 + ov[i], g0 + ov[8 + i]);
        transpose8x2(u, q);
        const __m512i heads = _mm512_i32gather_epi32(_mm512_loadu_si512(ov), g0, 1);
        const __m512 A = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(heads));
        const __m512 w = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(
            _mm512_cvtepi32_epi16(_mm512_srli_epi32(heads, 16))));
        for (int m = 0; m < M; m++) {
            __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
            for (int t = 0; t < 4; t++) {
                lo = _mm512_dpbusd_epi32(lo, q[t], r->xr[m][t]);
                hi = _mm512_dpbusd_epi32(hi, q[4 + t], r->xr[m][4 + t]);
            }
            __m512i I = _mm512_add_epi32(lo, hi);
            if (OFFSET[type]) I = _mm512_add_epi32(I, r->start[m]);
            __m512 acc = _mm512_mul_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(A, r->dx[m]));
            if (type == Q4_1) acc = _mm512_fnmadd_ps(w, r->xs[m], acc);
            _mm512_storeu_ps(rag + RAG_STRIDE * m + 16 * v, acc);
        }
    }
}

/* Q4_K/Q5_K for a few rows: two super-blocks' 16 sub-blocks on the lanes (their decoded
 * codes transposed once per output row, as a full 32-weight group's) meet each activation
 * row's sub-blocks transposed once per call (KQuantX): 8 vpdpbusd per activation row and
 * pair, no reduce8 per row and super-block as in row256_lanes; and each super-block's
 * dx S products (xs, the same for every output row) computed once per call. Numerics:
 * row256_lanes' per super-block a += float(I_j sc_j) (d dx), b -= (mn_j dmin) xs_j in its
 * order (the pair's low half, then its high half), the same exact integers per lane. */
typedef struct {
    int32_t *xt;  /* [M][groups][8][16]: act dword t of sub-block 16 g + j (0 past the row) */
    float *dx8;   /* [M][2 groups][8]: super-block sb's dx on lanes 8 sb .. 8 sb + 7 */
    float *xs;    /* [M][2 groups][8]: dx S_j of super-block sb's sub-block j (lane 8 sb + j) */
    idx_t groups; /* k / 512 rounded up: pairs of super-blocks */
} KQuantX;

/* the activations' transposed sub-blocks, as transpose_x, with a ragged last group */
static void transpose_x_padded(const int8_t *X, idx_t blocks, idx_t groups, int32_t *xt) {
    for (idx_t g = 0; g < groups; g++)
        for (int j = 0; j < 16; j++)
            for (int t = 0; t < 8; t++) {
                int32_t d = 0;
                if (16 * g + j < blocks) memcpy(&d, X + 512 * g + 32 * j + 4 * t, 4);
                xt[g * 128 + 16 * t + j] = d;
            }
}

/* KQuantX for M rows in one malloc'd block (its xt; NULL: no memory) */
static int32_t *kquant_x(const Prep *p, idx_t k, int M, KQuantX *kx) {
    const idx_t nsb = k / 256, groups = (nsb + 1) / 2, lanes = 16 * groups;
    int32_t *buf = aligned_alloc(64, (size_t)M * (128 * groups + 2 * lanes) * 4);
    if (!buf) return NULL;
    kx->groups = groups;
    kx->xt = buf;
    kx->dx8 = (float *)(buf + M * 128 * groups);
    kx->xs = kx->dx8 + M * lanes;
    for (int m = 0; m < M; m++) {
        transpose_x_padded(p->X + m * k, k / 32, groups, kx->xt + m * 128 * groups);
        for (idx_t l = 0; l < lanes; l++) {
            const idx_t sb = l / 8, live = sb < nsb;
            const float dxs = live ? p->dx[m * nsb + sb] : 0.0f;
            kx->dx8[m * lanes + l] = dxs;
            kx->xs[m * lanes + l] = live ? dxs * (float)p->s32[m * (k / 32) + l] : 0.0f;
        }
    }
    return buf;
}

/* A Q4_K/Q5_K output row for M activation rows -> v[m] (a + b, before hsum8) */
VNNI INLINE void row256_few(const uint8_t *row, idx_t k, int type, const KQuantX *kx, int M,
                            __m256 *v) {
    const idx_t nsb = k / 256;
    __m256 a[FEW_ROWS], b[FEW_ROWS];
    for (int m = 0; m < M; m++) a[m] = b[m] = _mm256_setzero_ps();
    for (idx_t g = 0; g < kx->groups; g++) {
        const int two = 2 * g + 1 < nsb; /* else the high lanes' codes 0 */
        __m256i u[2][8], sc[2], scs[8], scn[2], mn;
        __m256 w[2], d[2];
        for (int h = 0; h < 2; h++) {
            if (h && !two) {
                for (int t = 0; t < 8; t++) u[h][t] = _mm256_setzero_si256();
                sc[h] = _mm256_setzero_si256();
                w[h] = d[h] = _mm256_setzero_ps();
                continue;
            }
            const uint8_t *blk = row + (2 * g + h) * BYTES[type];
            prefetch_ahead(blk, BYTES[type]);
            codes256(type, blk, u[h], scs, &mn, scn);
            sc[h] = scales_mins_k4(blk, &mn);
            w[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(mn), _mm256_set1_ps(f16(blk + 2)));
            d[h] = _mm256_set1_ps(f16(blk));
        }
        __m512i uu[8], q[8];
        for (int t = 0; t < 8; t++)
            uu[t] = _mm512_inserti64x4(_mm512_castsi256_si512(u[0][t]), u[1][t], 1);
        transpose8x2(uu, q);
        const __m512i sc16 = _mm512_inserti64x4(_mm512_castsi256_si512(sc[0]), sc[1], 1);
        const __m512 d16 = _mm512_castpd_ps(_mm512_insertf64x4(
            _mm512_castps_pd(_mm512_castps256_ps512(d[0])), _mm256_castps_pd(d[1]), 1));
        for (int m = 0; m < M; m++) {
            const int32_t *x = kx->xt + (m * kx->groups + g) * 128;
            __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
            for (int t = 0; t < 4; t++) {
                lo = _mm512_dpbusd_epi32(lo, q[t], _mm512_loadu_si512(x + 16 * t));
                hi = _mm512_dpbusd_epi32(hi, q[4 + t], _mm512_loadu_si512(x + 16 * (4 + t)));
            }
            const __m512 f = _mm512_cvtepi32_ps(_mm512_mullo_epi32(_mm512_add_epi32(lo, hi),
                                                                   sc16));
            const idx_t at = (m * kx->groups + g) * 16;
            const __m512 ddx = _mm512_mul_ps(d16, _mm512_loadu_ps(kx->dx8 + at)),
                         xs = _mm512_loadu_ps(kx->xs + at);
            a[m] = _mm256_fmadd_ps(_mm512_castps512_ps256(f), _mm512_castps512_ps256(ddx), a[m]);
            b[m] = _mm256_fnmadd_ps(w[0], _mm512_castps512_ps256(xs), b[m]);
            if (two) {
                a[m] = _mm256_fmadd_ps(high8(f), high8(ddx), a[m]);
                b[m] = _mm256_fnmadd_ps(w[1], high8(xs), b[m]);
            }
        }
    }
    for (int m = 0; m < M; m++) v[m] = _mm256_add_ps(a[m], b[m]);
}

/* all n output rows for M activation rows -> y [M, n]: each output row decoded once for
   all M; 8 output rows' sums at a time per activation row through hsum8 (gemm_lanes') */
VNNI INLINE void gemm_few(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                          const Prep *p, int M, float *y) {
    __m256 v[FEW_ROWS][8], vr[FEW_ROWS];
    float s[8];
    /* the 32-weight types: each row's activations transposed for the full groups' blocks
       on the lanes (no memory: the reductions, the same integers) */
    int32_t *xt = NULL;
    if (ELEMS[type] == 32 && k >= 512 &&
        (xt = aligned_alloc(64, (size_t)(M * k + 63) / 64 * 64)))
        for (int m = 0; m < M; m++) transpose_x(p->X + m * k, k / 512, xt + m * (k / 4));
    /* Q4_K/Q5_K from 3 rows: super-block pairs on the lanes (row256_few; at 2 rows
       1.01-1.12x row256_lanes' time, at 3 0.83-0.98x) */
    KQuantX kx;
    int32_t *kbuf = (type == Q4_K || type == Q5_K) && M >= 3 ? kquant_x(p, k, M, &kx) : NULL;
    /* a ragged last group of <= 8 blocks: 8 output rows at a time (ragged_rows) */
    const int last = (int)(k / 32 % 16), ragged = ELEMS[type] == 32 && last && last <= 8;
    Ragged rg;
    float rag[FEW_ROWS * RAG_STRIDE];
    if (ragged) ragged_prepare(p, k, stride, type, M, &rg);
    for (idx_t r0 = 0; r0 < n; r0 += 8) {
        const int C = n - r0 < 8 ? (int)(n - r0) : 8;
        if (ragged)
            ragged_rows(raw + r0 * stride + k / 512 * 16 * BYTES[type], stride, C, type, M,
                        &rg, rag);
        for (int c = 0; c < C; c++) {
            const uint8_t *row = raw + (r0 + c) * stride;
            if (ELEMS[type] == 32)
                row_few32(row, k, type, p, M, xt, ragged ? rag + c * rg.P : NULL, vr);
            else if (kbuf)
                row256_few(row, k, type, &kx, M, vr);
            else
                row256_lanes(row, k, type, p, M, vr);
            for (int m = 0; m < M; m++) v[m][c] = vr[m];
        }
        for (int m = 0; m < M; m++) {
            for (int c = C; c < 8; c++) v[m][c] = _mm256_setzero_ps();
            hsum8(v[m], s);
            for (int c = 0; c < C; c++) y[m * n + r0 + c] = s[c];
        }
    }
    free(xt);
    free(kbuf);
}

/* one specialisation per (type, M) so the row loops unroll */
#define FEW_FOR(T, M)                                                                     \
    VNNI static void few_##T##_##M(const uint8_t *raw, idx_t stride, idx_t n, idx_t k,    \
                                   const Prep *p, float *y) {                             \
        gemm_few(raw, stride, n, k, T, p, M, y);                                          \
    }
#define FEW_TYPE(T) \
    FEW_FOR(T, 2) FEW_FOR(T, 3) FEW_FOR(T, 4) FEW_FOR(T, 5) FEW_FOR(T, 6) FEW_FOR(T, 7) \
    FEW_FOR(T, 8) FEW_FOR(T, 9)
#define FEW_ROW(T) \
    {few_##T##_2, few_##T##_3, few_##T##_4, few_##T##_5, few_##T##_6, few_##T##_7, few_##T##_8, \
     few_##T##_9}
FEW_TYPE(Q4_0) FEW_TYPE(Q4_1) FEW_TYPE(Q5_0) FEW_TYPE(Q8_0)
FEW_TYPE(Q4_K) FEW_TYPE(Q5_K) FEW_TYPE(Q6_K)
/* The most rows a call of each type runs here, more going to the tiles (the same bits):
   where R rows cost less than the tiles' R rows (benchmarks/gguf_few_rows.py --cold, Zen 4,
   thread CPU time, side by side on a shared core; SmolLM2's shapes). The 32-weight types,
   their full groups' blocks on the lanes (8 dot products a row and group), beat the tiles at
   every count to 9 (SmolLM2's Q8_0 LM head: 2 rows 0.69x the tiles' time, 4 0.84x, 9 0.95x;
   Q4_1's matrices 9 rows 2.3-2.9x a 1-row call, the tiles 3.0-3.7x; with ragged_rows
   1.6-1.7x on the 576-input ones). Q4_K/Q5_K with super-block pairs on the lanes
   (row256_few) against the tiles at 4 and 5 rows: 0.86-0.96x (cold; 0.93-1.05x warm), at
   6-9 rows a tie (0.95-1.16x), so 5; SmolLM2's down and Gemma 3's o and down. Q6_K (16
   sub-blocks of 16, row256_lanes' reduction per row) falls behind the tiles from 3 rows. */
static const int FEW_MAX[NTYPES] = {FEW_ROWS, FEW_ROWS, FEW_ROWS, FEW_ROWS, 5, 5, 2};

/* FEW[type][M - 2]: M = 2 .. FEW_ROWS activation rows */
static const gemm_fn FEW[NTYPES][FEW_ROWS - 1] = {
    FEW_ROW(Q4_0), FEW_ROW(Q4_1), FEW_ROW(Q5_0), FEW_ROW(Q8_0),
    FEW_ROW(Q4_K), FEW_ROW(Q5_K), FEW_ROW(Q6_K)};

#endif /* RADIXLM_GGUF_BLOCKS_FEW_H */
