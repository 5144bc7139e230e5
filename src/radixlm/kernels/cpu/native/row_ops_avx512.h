/* row_ops.c's activations on AVX-512 F (included by it inside `#if HAVE_X86`, chosen at run
 * time where the CPU has it; the portable loops stay for the others): the gate's e^x is
 * exp512 (avx512_exp.h) and the polynomials are FMAs. The compiler's own vectorization of the
 * portable loops keeps every product and sum apart (no contraction) and ran ~2 cycles a
 * float (Gemma 3's 128 x 2,048 tanh-GELU: ~180 us a layer); here ~110 us, about what
 * reading the 2 MiB of gate and up rows from L3 takes.
 *
 * Numbers: the same functions as the portable loops, in another rounding (fused multiply-
 * adds, exp512's ~2 ulp): ~1e-7 relative to them and to torch's. */
#ifndef RADIXLM_ROW_OPS_AVX512_H
#define RADIXLM_ROW_OPS_AVX512_H

#include "avx512_exp.h"

#define AVX512 __attribute__((target("avx512f")))

/* out[t, i] = act(gate) * up over rows of the fused [T, 2 * inter] projection, 16 floats a
 * step (the last ones masked); act(g) = g / (1 + e^(slope(g))): SiLU's slope is -g, the
 * tanh-GELU's -2 sqrt(2 / pi) (g + 0.044715 g^3). */
INLINE AVX512 void act_mul_avx512(const float *x, float *out, idx_t tokens, idx_t inter,
                                  int gelu) {
    const __m512 one = _mm512_set1_ps(1.0f), kappa = _mm512_set1_ps(0.044715f),
                 nbeta2 = _mm512_set1_ps(-2.0f * 0.7978845608028654f);
    for (idx_t t = 0; t < tokens; t++) {
        const float *gate = x + t * 2 * inter, *up = gate + inter;
        float *o = out + t * inter;
        for (idx_t i = 0; i < inter; i += 16) {
            const __mmask16 m = inter - i >= 16 ? (__mmask16)0xffff
                                                : (__mmask16)((1u << (inter - i)) - 1);
            const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
            const __m512 slope =
                gelu ? _mm512_mul_ps(nbeta2, _mm512_fmadd_ps(_mm512_mul_ps(kappa, g),
                                                             _mm512_mul_ps(g, g), g))
                     : _mm512_sub_ps(_mm512_setzero_ps(), g);
            const __m512 act = _mm512_div_ps(g, _mm512_add_ps(one, exp512(slope)));
            _mm512_mask_storeu_ps(o + i, m, _mm512_mul_ps(act, _mm512_maskz_loadu_ps(m, up + i)));
        }
    }
}

static AVX512 void silu_mul_avx512(const float *x, float *out, idx_t tokens, idx_t inter) {
    act_mul_avx512(x, out, tokens, inter, 0);
}

static AVX512 void gelu_tanh_mul_avx512(const float *x, float *out, idx_t tokens,
                                        idx_t inter) {
    act_mul_avx512(x, out, tokens, inter, 1);
}

#endif
