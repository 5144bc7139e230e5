/* The K-quants' super-block decoders on the VNNI path of gguf_blocks.c (its only includer,
 * after its VNNI helpers): the codes of a Q4_K, Q5_K or Q6_K super-block as eight 256-bit
 * vectors of 32 codes (u8), with their scales and mins as int32 lanes, for the streaming
 * kernel (row256), the lanes kernel, the tiles (decode256) and dequantize. */
#ifndef RADIXLM_GGUF_BLOCKS_CODES256_H
#define RADIXLM_GGUF_BLOCKS_CODES256_H

/* Q4_K/Q5_K: scale_min_k4 four bytes at a time: the 8 sub-blocks' scales (returned) and
   mins (*mn) as int32 lanes, lane j sub-block j's */
VNNI INLINE __m256i scales_mins_k4(const uint8_t *b, __m256i *mn) {
    uint32_t w[3];
    memcpy(w, b + 4, 12);
    const __m128i sm = _mm_setr_epi32(
        (int)(w[0] & 0x3f3f3f3f), (int)((w[2] & 0x0f0f0f0f) | ((w[0] >> 2) & 0x30303030)),
        (int)(w[1] & 0x3f3f3f3f), (int)(((w[2] >> 4) & 0x0f0f0f0f) | ((w[1] >> 2) & 0x30303030)));
    *mn = _mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8));
    return _mm256_cvtepu8_epi32(sm);
}

/* A K-quant super-block's 8 code vectors u[t] (elements 32t..32t+31) and each vector's
   int32 scale lanes sc[t] (an int16 scale in the low half, 0 in the high one, for
   vpdpwssd); Q4_K/Q5_K: mins mn (lane j: sub-block j's); Q6_K: scn[2], -32 sc per 16. */
VNNI INLINE void codes256(int type, const uint8_t *b, __m256i *u, __m256i *sc, __m256i *mn,
                          __m256i *scn) {
    const __m256i f = _mm256_set1_epi8(15);
    if (type == Q6_K) {
        const __m512i s = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192)));
        const __m512i low16 = _mm512_set1_epi32(0xffff), s16 = _mm512_and_si512(s, low16);
        const __m512i neg = _mm512_and_si512(
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 5)), low16);
        scn[0] = _mm512_castsi512_si256(neg);
        scn[1] = _mm512_extracti64x4_epi64(neg, 1);
        const __m256i h30 = _mm256_set1_epi8(0x30);
        for (int h = 0; h < 2; h++) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            const __m256i hb[4] = {_mm256_slli_epi16(qh, 4), _mm256_slli_epi16(qh, 2), qh,
                                   _mm256_srli_epi16(qh, 2)}; /* bits 2t, 2t+1 -> 4, 5 */
            for (int t = 0; t < 4; t++) {
                const __m256i l = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32 * (t & 1)));
                const __m256i lo = _mm256_and_si256(t < 2 ? l : _mm256_srli_epi16(l, 4), f);
                u[4 * h + t] = _mm256_or_si256(lo, _mm256_and_si256(hb[t], h30));
                const int lo_s = 8 * h + 2 * t; /* lanes 0-3: scale lo_s, 4-7: lo_s + 1 */
                sc[4 * h + t] = _mm512_castsi512_si256(_mm512_permutexvar_epi32(
                    _mm512_setr_epi32(lo_s, lo_s, lo_s, lo_s, lo_s + 1, lo_s + 1, lo_s + 1,
                                      lo_s + 1, 0, 0, 0, 0, 0, 0, 0, 0), s16));
            }
        }
        return;
    }
    int32_t s[8];
    _mm256_storeu_si256((__m256i *)s, scales_mins_k4(b, mn));
    const uint8_t *qs = b + (type == Q5_K ? 48 : 16);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
    for (int j = 0; j < 8; j++) {
        const __m256i l = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j / 2)));
        u[j] = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(l, 4) : l, f);
        if (type == Q5_K) { /* bit j of each qh byte to bit 4 (16-bit shifts: the 0x10 mask
                               keeps only each byte's own bit), or'ed in: one vpternlog */
            const __m256i bit = j <= 4 ? _mm256_slli_epi16(qh, 4 - j)
                                       : _mm256_srli_epi16(qh, j - 4);
            u[j] = _mm256_ternarylogic_epi32(bit, _mm256_set1_epi8(16), u[j], 0xEA);
        }
        sc[j] = _mm256_set1_epi32(s[j]); /* in [0, 63]: the high int16 is 0 */
    }
}

#endif /* RADIXLM_GGUF_BLOCKS_CODES256_H */
