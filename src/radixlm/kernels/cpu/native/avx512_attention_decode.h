/* avx512_attention.c's second half: decode attention by slot (included once, inside its
 * `#if HAVE_X86`, after exp512 and the TARGET macro it uses). */
#ifndef RADIXLM_AVX512_ATTENTION_DECODE_H
#define RADIXLM_AVX512_ATTENTION_DECODE_H

/* ---- 2. decode attention: each request's query heads over its own keys, by slot ----
 *
 * Why: the portable row_ops kernel spent ~100 cycles per (query head, key) (a lane reduction
 * per score, libm's expf per score, each query head re-reading its keys): 11 ms of a 32-row
 * SmolLM2 decode step at 32 keys each, as much as the step's non-GEMM rest was meant to be.
 * Here one KV head's G query heads go together: each key row is loaded once for all G
 * scores, e^x runs 16 scores a vector, and each value row once into G x D accumulators held
 * in registers (up to 16 zmm: 4 heads of 64, 2 of 128; more heads take more passes over
 * the values, from L1). The key and value rows PF keys ahead are prefetched: slots are
 * scattered over the pool, which the weights' stream has evicted from cache.
 *
 * Numbers: each score is q.k summed over D with FMAs in 16 lanes, then the lanes, then
 * scaled (the logit cap, where set, is tanhf's); e^x is exp512; the values are summed key
 * by key in order with FMAs. The same definition as the merge of a prior part (cascade):
 * top = max(prior lse, scores), the prior weighs exp(lse - top). ~1e-6 relative to the
 * float64 reference (tested). */

#define PF 4      /* keys ahead to prefetch */
#define ACC_ZMM 16 /* value accumulators held in registers per pass */

/* G scores of key row k against the group's query rows q [G, D]: s[h * n] = q_h . k * scale */
INLINE TARGET void key_scores(const float *q, const float *k, idx_t G, float scale, float cap,
                              float *s, idx_t n, const int DV) {
    __m512 kv[8];
    for (int c = 0; c < DV; c++) kv[c] = _mm512_loadu_ps(k + 16 * c);
    for (idx_t h = 0; h < G; h++) {
        const float *qh = q + h * 16 * DV;
        __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qh), kv[0]);
        for (int c = 1; c < DV; c++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * c), kv[c], acc);
        float x = _mm512_reduce_add_ps(acc) * scale;
        if (cap > 0.0f) x = cap * tanhf(x / cap);
        s[h * n] = x;
    }
}

/* The row of key/value at slot `slot`: base + slot * row (the KV head's offset folded in). */
INLINE const float *slot_row(const float *base, const int64_t *slots, idx_t j, idx_t row) {
    return base + slots[j] * row;
}

INLINE TARGET void prefetch_row(const float *r, const int DV) {
    for (int c = 0; c < DV; c++) _mm_prefetch((const char *)(r + 16 * c), _MM_HINT_T0);
}

/* HB query heads' (a compile-time constant: accumulators in zmm) weighted sum of the values:
 * o_h = prior_h * o_h (prior_h 0: from zero) + sum_j p[h * ld + j] * v_j (j < n), then
 * o_h /= total_h. */
INLINE TARGET void value_pass(const float *v, const int64_t *slots, idx_t n, idx_t ld,
                              idx_t row, const float *p, const float *prior, const float *total,
                              float *o, const int HB, const int DV) {
    __m512 a[4][8];
    for (int h = 0; h < HB; h++) {
        const __m512 w = _mm512_set1_ps(prior[h]);
        for (int c = 0; c < DV; c++)
            a[h][c] = prior[h] > 0.0f ? _mm512_mul_ps(_mm512_loadu_ps(o + h * 16 * DV + 16 * c), w)
                                      : _mm512_setzero_ps();
    }
    for (idx_t j = 0; j < n; j++) {
        const float *vr = slot_row(v, slots, j, row);
        __m512 vc[8];
        for (int c = 0; c < DV; c++) vc[c] = _mm512_loadu_ps(vr + 16 * c);
        for (int h = 0; h < HB; h++) {
            const __m512 pb = _mm512_set1_ps(p[h * ld + j]);
            for (int c = 0; c < DV; c++) a[h][c] = _mm512_fmadd_ps(pb, vc[c], a[h][c]);
        }
    }
    for (int h = 0; h < HB; h++) {
        const __m512 inv = _mm512_set1_ps(1.0f / total[h]);
        for (int c = 0; c < DV; c++)
            _mm512_storeu_ps(o + h * 16 * DV + 16 * c, _mm512_mul_ps(a[h][c], inv));
    }
}

/* p[h * ld + j] = e^(s - top_h) (j < n), 16 at a time, the sums added into total. */
INLINE TARGET void softmax_rows(float *s, idx_t G, idx_t n, idx_t ld, const float *top,
                                float *total) {
    for (idx_t h = 0; h < G; h++) {
        float *sh = s + h * ld;
        const __m512 t = _mm512_set1_ps(top[h]);
        __m512 sum = _mm512_setzero_ps();
        for (idx_t j = 0; j < n; j += 16) {
            const __mmask16 m = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
            const __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, sh + j), t)));
            _mm512_mask_storeu_ps(sh + j, m, e);
            sum = _mm512_add_ps(sum, e);
        }
        total[h] += _mm512_reduce_add_ps(sum);
    }
}

/* The G heads' value sums (value_pass), HB at a time: p [G, ld] the weights, out [G, D] */
INLINE TARGET void value_passes(const float *v, const int64_t *slots, idx_t n, idx_t ld,
                                idx_t row, const float *p, idx_t G, const float *prior,
                                const float *total, float *out, const int DV) {
    const int HB = ACC_ZMM / DV;
    for (idx_t h = 0; h < G; h += HB) {
        const idx_t left = G - h;
        const float *ph = p + h * ld;
        float *oh = out + h * 16 * DV;
        if (left >= HB) {
            value_pass(v, slots, n, ld, row, ph, prior + h, total + h, oh, ACC_ZMM / DV, DV);
        } else if (DV == 4 && left == 3) {
            value_pass(v, slots, n, ld, row, ph, prior + h, total + h, oh, 3, DV);
        } else if (DV == 4 && left == 2) {
            value_pass(v, slots, n, ld, row, ph, prior + h, total + h, oh, 2, DV);
        } else {
            for (idx_t r = 0; r < left; r++)
                value_pass(v, slots, n, ld, row, ph + r * ld, prior + h + r, total + h + r,
                           oh + r * 16 * DV, 1, DV);
        }
    }
}

/* One request, one KV head: q [G, D] over the n keys at slots[0..n) of k / v (the head's
 * offset folded in, `row` floats per slot); out [G, D]; prior_lse [G] or NULL; s scratch
 * [G * n]. The G <= 64 heads go through the values HB at a time. */
INLINE TARGET void decode_group(const float *q, const float *k, const float *v,
                                const int64_t *slots, idx_t n, idx_t row, idx_t G, float scale,
                                float cap, const float *prior_lse, float *out, float *s,
                                const int DV) {
    float top[64], prior[64], total[64];
    for (idx_t h = 0; h < G; h++) top[h] = prior_lse ? prior_lse[h] : -INFINITY;
    for (idx_t j = 0; j < n && j < PF; j++) {
        prefetch_row(slot_row(k, slots, j, row), DV);
        prefetch_row(slot_row(v, slots, j, row), DV);
    }
    for (idx_t j = 0; j < n; j++) { /* the values too: by the value pass they are in cache */
        if (j + PF < n) {
            prefetch_row(slot_row(k, slots, j + PF, row), DV);
            prefetch_row(slot_row(v, slots, j + PF, row), DV);
        }
        key_scores(q, slot_row(k, slots, j, row), G, scale, cap, s + j, n, DV);
        for (idx_t h = 0; h < G; h++) top[h] = s[h * n + j] > top[h] ? s[h * n + j] : top[h];
    }
    for (idx_t h = 0; h < G; h++) { /* the prior part's weight; 0 without one (or no key) */
        prior[h] = prior_lse && prior_lse[h] > -INFINITY ? expf(prior_lse[h] - top[h]) : 0.0f;
        total[h] = prior[h];
    }
    softmax_rows(s, G, n, n, top, total);
    value_passes(v, slots, n, n, row, s, G, prior, total, out, DV);
}

TARGET static void decode_group_64(const float *q, const float *k, const float *v,
                                   const int64_t *slots, idx_t n, idx_t row, idx_t G,
                                   float scale, float cap, const float *prior_lse, float *out,
                                   float *s) {
    decode_group(q, k, v, slots, n, row, G, scale, cap, prior_lse, out, s, 4);
}

TARGET static void decode_group_128(const float *q, const float *k, const float *v,
                                    const int64_t *slots, idx_t n, idx_t row, idx_t G,
                                    float scale, float cap, const float *prior_lse, float *out,
                                    float *s) {
    decode_group(q, k, v, slots, n, row, G, scale, cap, prior_lse, out, s, 8);
}

/* ---- a verify's rows together: one request's rows whose keys are prefixes of the last's ----
 *
 * Why: a speculative verify runs one request's 1 + k tokens as k + 1 decode rows, row r over
 * the first n_r of the same slots. Alone, each row streams every key and value row of the
 * context again (at ~1,500 tokens about 10 ms of SmolLM2's 18 ms step is that stream; the
 * later rows find it in L3). Here each key row is read once for all the rows' scores, and
 * each row's values right after, from L2.
 *
 * Numbers: each row's scores, maximum, e^x sums and value sums are decode_group's without a
 * prior part, the same operations in the same order on the same values (the scores of keys
 * past a row's n_r are not computed, its sums stop at n_r): bit for bit the row's result
 * alone (tests/kernels/cpu/test_avx512_attention_rows.py). */

#define RUN_ROWS 16 /* the most rows attended together */

/* R (<= RUN_ROWS) rows, one KV head: row r's G query heads at q + r * q_row over the first
 * n[r] of slots (n nondecreasing), its output at out + r * q_row; s scratch [R, G, N]. */
INLINE TARGET void decode_rows(const float *q, idx_t q_row, const float *k, const float *v,
                               const int64_t *slots, const idx_t *n, idx_t R, idx_t row,
                               idx_t G, float scale, float cap, float *out, float *s,
                               const int DV) {
    const idx_t N = n[R - 1], GN = G * N;
    float top[RUN_ROWS * 64], total[RUN_ROWS * 64], zero[64] = {0};
    for (idx_t h = 0; h < R * G; h++) top[h] = -INFINITY, total[h] = 0.0f;
    for (idx_t j = 0; j < N && j < PF; j++) {
        prefetch_row(slot_row(k, slots, j, row), DV);
        prefetch_row(slot_row(v, slots, j, row), DV);
    }
    for (idx_t j = 0; j < N; j++) {
        if (j + PF < N) {
            prefetch_row(slot_row(k, slots, j + PF, row), DV);
            prefetch_row(slot_row(v, slots, j + PF, row), DV);
        }
        const float *kr = slot_row(k, slots, j, row);
        for (idx_t r = 0; r < R; r++) {
            if (j >= n[r]) continue;
            float *sr = s + r * GN, *tr = top + r * G;
            key_scores(q + r * q_row, kr, G, scale, cap, sr + j, N, DV);
            for (idx_t h = 0; h < G; h++) tr[h] = sr[h * N + j] > tr[h] ? sr[h * N + j] : tr[h];
        }
    }
    for (idx_t r = 0; r < R; r++) {
        softmax_rows(s + r * GN, G, n[r], N, top + r * G, total + r * G);
        value_passes(v, slots, n[r], N, row, s + r * GN, G, zero, total + r * G,
                     out + r * q_row, DV);
    }
}

TARGET static void decode_rows_64(const float *q, idx_t q_row, const float *k, const float *v,
                                  const int64_t *slots, const idx_t *n, idx_t R, idx_t row,
                                  idx_t G, float scale, float cap, float *out, float *s) {
    decode_rows(q, q_row, k, v, slots, n, R, row, G, scale, cap, out, s, 4);
}

TARGET static void decode_rows_128(const float *q, idx_t q_row, const float *k, const float *v,
                                   const int64_t *slots, const idx_t *n, idx_t R, idx_t row,
                                   idx_t G, float scale, float cap, float *out, float *s) {
    decode_rows(q, q_row, k, v, slots, n, R, row, G, scale, cap, out, s, 8);
}

/* How many rows from b on attend together (1: alone): while the next row's slots start with
   this one's (a verify's rows), up to RUN_ROWS, none cut by a window; their counts in n. */
static idx_t rows_together(const int64_t *indptr, const int64_t *indices, idx_t b, idx_t batch,
                           idx_t window, idx_t *n) {
    n[0] = indptr[b + 1] - indptr[b];
    idx_t R = 1;
    while (b + R < batch && R < RUN_ROWS) {
        const idx_t m = indptr[b + R + 1] - indptr[b + R], prev = n[R - 1];
        if (m < prev || (window > 0 && m > window) ||
            memcmp(indices + indptr[b + R], indices + indptr[b + R - 1],
                   (size_t)prev * sizeof(int64_t)))
            break;
        n[R++] = m;
    }
    return window > 0 && n[0] > window ? 1 : R;
}

/* Every request b and KV head g: the query heads g * G .. g * G + G - 1 of q [B, Hq, D] over
 * the slots indices[indptr[b] .. indptr[b + 1]) (the last `window` only, when window > 0);
 * without a prior part, a verify's rows together (decode_rows). */
TARGET static void decode_all(const float *q, const float *k_pool, const float *v_pool,
                              const int64_t *indptr, const int64_t *indices, idx_t batch,
                              idx_t hq, idx_t hkv, idx_t d, idx_t window, const float *prior_lse,
                              float scale, float cap, float *out, float *s) {
    const idx_t G = hq / hkv, row = hkv * d;
    idx_t counts[RUN_ROWS];
    for (idx_t b = 0; b < batch; b++) {
        const idx_t R = prior_lse ? 1 : rows_together(indptr, indices, b, batch, window, counts);
        for (idx_t g = 0; g < hkv && R > 1; g++) {
            const idx_t h0 = b * hq + g * G;
            (d == 64 ? decode_rows_64 : decode_rows_128)(
                q + h0 * d, hq * d, k_pool + g * d, v_pool + g * d, indices + indptr[b + R - 1],
                counts, R, row, G, scale, cap, out + h0 * d, s);
        }
        if (R > 1) {
            b += R - 1;
            continue;
        }
        idx_t first = indptr[b], n = indptr[b + 1] - first;
        if (window > 0 && n > window) first += n - window, n = window;
        for (idx_t g = 0; g < hkv; g++) {
            const idx_t h0 = b * hq + g * G;
            const float *lse = prior_lse ? prior_lse + h0 : NULL;
            if (d == 64)
                decode_group_64(q + h0 * d, k_pool + g * d, v_pool + g * d, indices + first, n,
                                row, G, scale, cap, lse, out + h0 * d, s);
            else
                decode_group_128(q + h0 * d, k_pool + g * d, v_pool + g * d, indices + first,
                                 n, row, G, scale, cap, lse, out + h0 * d, s);
        }
    }
}

#endif
