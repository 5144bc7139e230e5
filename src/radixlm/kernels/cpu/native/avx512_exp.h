/* e^x on 16 floats with AVX-512 F, shared by the attention kernels (avx512_attention.c) and
 * the activations (row_ops_avx512.h): included inside an `#if HAVE_X86` after
 * radixlm_native.h. */
#ifndef RADIXLM_AVX512_EXP_H
#define RADIXLM_AVX512_EXP_H

/* e^x: n = round(x log2 e), r = x - n ln 2 (two-part constant), Taylor to r^7 on
 * |r| <= ln2 / 2 (truncation < 1e-8 relative), scaled by 2^n. Inputs clamped to float's
 * range; callers mask the lanes that must be exactly 0. */
INLINE __attribute__((target("avx512f"))) __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.72283f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#endif
