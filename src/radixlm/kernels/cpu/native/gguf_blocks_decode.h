/* Decode (one activation row; the code takes any M) on the VNNI path of gguf_blocks.c (its only includer, after
 * its building blocks codes32, head8, half8, prefetch_ahead): several OUTPUT rows per pass of
 * the activation, so that more float chains run side by side.
 *
 * Why: one output row of a 32-weight type keeps two FMA chains (even and odd blocks), and at
 * one activation row each block's FMA waits on the previous one (4 cycles on Zen 4) while
 * its other work takes about 2: the kernel ran at half its issue rate, ~9 GB/s on SmolLM2's
 * Q4_1 matrices in cache. R output rows at once give 2 R independent chains per activation
 * row and load each activation vector once for all R.
 *
 * Numerics: for each (output row, activation row) pair the float operations are row32's,
 * in its order (the group's offset correction first, then even blocks into acc and odd ones
 * into acc2, hsum(acc + acc2) with its pairing), so results are bit-identical to the one-row
 * kernel: only the interleaving across rows changed. hsum4 reduces 4 pairs' vectors at once
 * with hsum's own additions (a 4x4 transpose between its steps). */
#ifndef RADIXLM_GGUF_BLOCKS_DECODE_H
#define RADIXLM_GGUF_BLOCKS_DECODE_H

#define MAX_PAIRS 8 /* output rows times activation rows in one pass: 2 MAX_PAIRS chains */

/* hsum(a[i] + b[i]) for i < 4 -> out[0..3], each with hsum's additions in its order:
   ((l0 + l2) + (l1 + l3)) of l = low half + high half */
VNNI INLINE void hsum4(const __m256 *a, const __m256 *b, float *out) {
    __m128 s[4];
    for (int i = 0; i < 4; i++) {
        const __m256 v = _mm256_add_ps(a[i], b[i]);
        s[i] = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    }
    _MM_TRANSPOSE4_PS(s[0], s[1], s[2], s[3]); /* s[j]: lane j of each pair */
    _mm_storeu_ps(out, _mm_add_ps(_mm_add_ps(s[0], s[2]), _mm_add_ps(s[1], s[3])));
}

/* group32 for R output rows (row, row + stride, ...) and M activation rows: pair r M + m
   accumulates into acc / acc2[r M + m] exactly as group32 would for that row and m */
VNNI INLINE void group32_rows(const uint8_t *row, idx_t stride, int R, idx_t g, int cnt,
                              idx_t k, int type, const Prep *p, int M, __m256 *acc,
                              __m256 *acc2) {
    const idx_t nb = k / 32;
    const int bytes = BYTES[type];
    const __mmask8 live = (__mmask8)((1u << cnt) - 1);
    float adx[MAX_PAIRS][8]; /* A dx per pair and block, read back as broadcast loads */
    for (int r = 0; r < R; r++) {
        const uint8_t *b = row + r * stride + g * bytes;
        prefetch_ahead(b, cnt * bytes);
        __m256 av, cv; /* as group32: A, and A off + B */
        if (type == Q4_1) {
            const __m256i dm = head8(b, bytes, cnt);
            av = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm));
            cv = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_cvtph_ps(
                _mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))));
        } else {
            av = _mm256_cvtph_ps(half8(b, bytes, cnt));
            cv = _mm256_mul_ps(av, _mm256_set1_ps((float)OFFSET[type]));
        }
        for (int m = 0; m < M; m++) {
            const int i = r * M + m;
            const __m256 dx = _mm256_maskz_loadu_ps(live, p->dx + m * nb + g);
            _mm256_storeu_ps(adx[i], _mm256_mul_ps(av, dx));
            acc[i] = _mm256_fnmadd_ps(cv, _mm256_maskz_loadu_ps(live, p->xs + m * nb + g),
                                      acc[i]);
        }
    }
    for (int j = 0; j < cnt; j++) {
        __m256i xm[MAX_PAIRS];
        for (int m = 0; m < M; m++)
            xm[m] = _mm256_loadu_si256((const __m256i *)(p->X + m * k + 32 * (g + j)));
        for (int r = 0; r < R; r++) {
            const __m256i u = codes32(type, row + r * stride + (g + j) * bytes);
            for (int m = 0; m < M; m++) {
                const int i = r * M + m;
                const __m256 dot = _mm256_cvtepi32_ps(
                    _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, xm[m]));
                const __m256 scale = _mm256_set1_ps(adx[i][j]);
                if (j & 1)
                    acc2[i] = _mm256_fmadd_ps(dot, scale, acc2[i]);
                else
                    acc[i] = _mm256_fmadd_ps(dot, scale, acc[i]);
            }
        }
    }
}

/* R output rows of a 32-weight type for M activation rows -> out[r M + m] */
VNNI INLINE void rows32(const uint8_t *row, idx_t stride, int R, idx_t k, int type,
                        const Prep *p, int M, float *out) {
    const idx_t nb = k / 32;
    __m256 acc[MAX_PAIRS], acc2[MAX_PAIRS];
    for (int i = 0; i < R * M; i++) acc[i] = acc2[i] = _mm256_setzero_ps();
    idx_t g = 0;
    for (; g + 8 <= nb; g += 8) group32_rows(row, stride, R, g, 8, k, type, p, M, acc, acc2);
    switch (nb - g) { /* the last group's count a constant too: its loop unrolls */
#define TAIL(c) case c: group32_rows(row, stride, R, g, c, k, type, p, M, acc, acc2); break;
        TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7)
#undef TAIL
    }
    int i = 0;
    for (; i + 4 <= R * M; i += 4) hsum4(acc + i, acc2 + i, out + i);
    for (; i < R * M; i++) out[i] = hsum(_mm256_add_ps(acc[i], acc2[i]));
}

/* Output rows [r0, r1) of a 32-weight type for M activation rows into y [M][ldy],
   R rows a pass (R M <= MAX_PAIRS), the rest one at a time. Measured on Zen 4 (core shared,
   side by side): at M = 1, R = 4 with the last group unrolled ran SmolLM2's Q4_1 576-column
   matrices 1.35-1.5x and its Q8_0 head 1.2-1.45x faster than one row a pass; at M = 2-4
   (R = 2) slower, so those keep row32. Two rows per 512-bit vector (scales by gather) ran
   0.7-1.0x: Zen 4 splits the vectors and the gathers cost more than the scalar loads. */
VNNI INLINE void gemm32_rows(const uint8_t *raw, idx_t stride, idx_t r0, idx_t r1, idx_t k,
                             int type, const Prep *p, int M, int R, float *y, idx_t ldy) {
    float out[MAX_PAIRS];
    idx_t r = r0;
    for (; r + R <= r1; r += R) {
        rows32(raw + r * stride, stride, R, k, type, p, M, out);
        for (int i = 0; i < R; i++)
            for (int m = 0; m < M; m++) y[m * ldy + r + i] = out[i * M + m];
    }
    for (; r < r1; r++) {
        rows32(raw + r * stride, stride, 1, k, type, p, M, out);
        for (int m = 0; m < M; m++) y[m * ldy + r] = out[m];
    }
}


#endif /* RADIXLM_GGUF_BLOCKS_DECODE_H */
