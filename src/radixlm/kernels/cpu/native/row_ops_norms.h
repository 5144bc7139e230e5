/* row_ops.c's RMSNorm rows (included by it once, after LANES and WIDE): dot products in
 * LANES partial sums, the norm of one row and of four rows side by side, and the entry
 * points' loops: residual add + norm, and Gemma 3's norm + residual add + norm. */
#ifndef RADIXLM_ROW_OPS_NORMS_H
#define RADIXLM_ROW_OPS_NORMS_H

/* sum_i a[i] * b[i] in LANES partial sums */
static inline float dot(const float *a, const float *b, idx_t n) {
    float acc[LANES] = {0};
    idx_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += a[i + j] * b[i + j];
    for (; i < n; i++) acc[0] += a[i] * b[i];
    float total = 0.0f;
    for (int j = 0; j < LANES; j++) total += acc[j];
    return total;
}

/* 1 / sqrt(mean + eps) of a row's sum of squares over n: the RMSNorm's factor */
static inline float inv_rms(float sumsq, idx_t n, float eps) {
    float mean = sumsq / (float)n;
    return 1.0f / sqrtf(mean + eps);
}

/* o = src * inv * weight: one row of n */
static inline void scale_row(const float *src, const float *weight, float *o, idx_t n,
                             float inv) {
    for (idx_t i = 0; i < n; i++) {
        float scaled = src[i] * inv;
        o[i] = scaled * weight[i];
    }
}

/* o = src * inv * weight with inv = 1 / sqrt(mean(src^2) + eps): one row of n */
static inline void norm_row(const float *src, const float *weight, float *o, idx_t n,
                            float eps) {
    scale_row(src, weight, o, n, inv_rms(dot(src, src, n), n, eps));
}

/* LANES floats as one vector value (GCC / Clang vector extension: one ymm, or two xmm on
 * the baseline), loaded unaligned; its arithmetic is the lanes' own, in the same order */
typedef float lanes_t __attribute__((vector_size(LANES * sizeof(float))));
#define LOAD_LANES(v, p) memcpy(&(v), (p), sizeof(lanes_t))

/* sums[r] = dot(a[r], a[r], n) for 4 rows, bit-identical to it (each row's lanes and order),
 * the rows' addition chains interleaved: one row's chain is latency-bound (an add per 8
 * floats waits on the last), four run in the time of one. */
static inline void sumsq4(const float *const a[4], idx_t n, float sums[4]) {
    lanes_t acc[4] = {{0}};
    idx_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int r = 0; r < 4; r++) {
            lanes_t v;
            LOAD_LANES(v, a[r] + i);
            acc[r] += v * v;
        }
    for (int r = 0; r < 4; r++) {
        for (idx_t k = i; k < n; k++) acc[r][0] += a[r][k] * a[r][k];
        float total = 0.0f;
        for (int j = 0; j < LANES; j++) total += acc[r][j];
        sums[r] = total;
    }
}

/* summed = x + residual (residual NULL: summed is x itself); out = norm_row(summed), per row
 * of n, four rows at a time (sumsq4). */
WIDE static void add_rms_norm(const float *x, const float *residual, const float *weight,
                              float *out, float *summed, idx_t rows, idx_t n, float eps) {
    idx_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *src[4];
        for (int i = 0; i < 4; i++) {
            src[i] = x + (r + i) * n;
            if (residual) {
                float *s = summed + (r + i) * n;
                const float *res = residual + (r + i) * n;
                for (idx_t c = 0; c < n; c++) s[c] = src[i][c] + res[c];
                src[i] = s;
            }
        }
        float sums[4];
        sumsq4(src, n, sums);
        for (int i = 0; i < 4; i++)
            scale_row(src[i], weight, out + (r + i) * n, n, inv_rms(sums[i], n, eps));
    }
    for (; r < rows; r++) {
        const float *src = x + r * n;
        if (residual) {
            float *s = summed + r * n;
            const float *res = residual + r * n;
            for (idx_t i = 0; i < n; i++) s[i] = src[i] + res[i];
            src = s;
        }
        norm_row(src, weight, out + r * n, n, eps);
    }
}

/* summed = norm_row(x, w1) + residual, out = norm_row(summed, w2), per row of n: Gemma 3's
 * post-attention norm, residual add and pre-MLP norm in one pass, bit-identical to
 * add_rms_norm without then with the residual (each product, sum and norm rounded as
 * there), four rows at a time (sumsq4). */
WIDE static void norm_add_rms_norm(const float *x, const float *w1, const float *residual,
                                   const float *w2, float *out, float *summed, idx_t rows,
                                   idx_t n, float eps) {
    for (idx_t r = 0; r < rows; r += 4) {
        const int k = rows - r < 4 ? (int)(rows - r) : 4;
        const float *src[4];
        float sums[4];
        for (int i = 0; i < 4; i++) src[i] = x + (r + (i < k ? i : 0)) * n;
        sumsq4(src, n, sums);
        for (int i = 0; i < k; i++) {
            const float inv = inv_rms(sums[i], n, eps);
            const float *res = residual + (r + i) * n;
            float *s = summed + (r + i) * n;
            for (idx_t c = 0; c < n; c++) {
                float scaled = src[i][c] * inv;
                float normed = scaled * w1[c];
                s[c] = normed + res[c];
            }
            src[i] = s;
        }
        for (int i = k; i < 4; i++) src[i] = src[0];
        sumsq4(src, n, sums);
        for (int i = 0; i < k; i++)
            scale_row(src[i], w2, out + (r + i) * n, n, inv_rms(sums[i], n, eps));
    }
}

#endif
