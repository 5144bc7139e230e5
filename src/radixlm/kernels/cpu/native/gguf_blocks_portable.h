/* The portable half of gguf_blocks.c (its only includer): the block types' table, the
 * activation quantization both paths share, each block decoded in plain C to signed codes
 * and scales, dequantize (bit-equal to gguf.quants) and the portable GEMM. The bit layouts:
 * kernels/reference/gguf_blocks.py. */
#ifndef RADIXLM_GGUF_BLOCKS_PORTABLE_H
#define RADIXLM_GGUF_BLOCKS_PORTABLE_H

#include "radixlm_native.h"

#define MAX_ROWS 8    /* activation rows per pass of the streaming kernel */
#define FEW_ROWS 9    /* the most rows a call of gguf_blocks_few.h runs: a verify's 1 + 8 drafts */
#define TILE_ROWS 32  /* per pass of the portable GEMM (and of the tiles on wide K-quant rows) */
#define TINY 7.888609052210118e-31f /* 2^-100: blocks below it quantize to 0 */
enum { Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, NTYPES };
static const int ELEMS[NTYPES] = {32, 32, 32, 32, 256, 256, 256};
static const int BYTES[NTYPES] = {18, 20, 22, 34, 144, 176, 210};
static const int OFFSET[NTYPES] = {8, 0, 16, 128, 0, 0, 32};

/* -- activations --------------------------------------------------------------------- */
typedef struct {
    int8_t *X;      /* [rows][k]: the quantized activations */
    float *dx;      /* [rows][k / E]: each block's step */
    float *xs;      /* [rows][k / 32]: dx S per 32 (the 32-weight types' corrections) */
    int32_t *s16;   /* [rows][k / 16]: sums of X per 16 */
    int32_t *s32;   /* [rows][k / 32]: sums of X per 32 */
    int *finite;    /* [rows]: 0 where the row holds inf or nan */
    void *work;     /* the tiles' decoded weight groups (gguf_blocks_tiles.h) */
    float *dk;      /* wide K-quant tiles: dx per super-block, a pass's rows side by side */
} Prep;

/* One row x [k] in blocks of E; plain C (the VNNI and portable paths share its integers). */
static void prepare_row(const float *x, idx_t k, int E, int8_t *X, float *dx, float *xs,
                        int32_t *s16, int32_t *s32, int *finite) {
    *finite = 1;
    for (idx_t b = 0; b < k / E; b++) {
        const float *xb = x + b * E;
        float amax = 0.0f;
        for (int i = 0; i < E; i++) {
            float a = fabsf(xb[i]);
            if (!(a <= 3.4028234663852886e38f)) *finite = 0; /* inf or nan */
            amax = a > amax ? a : amax;
        }
        float inv = amax >= TINY ? 127.0f / amax : 0.0f;
        dx[b] = amax >= TINY ? amax / 127.0f : 0.0f;
        for (int i = 0; i < E; i++) {
            long v = *finite ? lrintf(xb[i] * inv) : 0; /* round half to even */
            X[b * E + i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    for (idx_t j = 0; j < k / 16; j++) {
        int32_t t = 0;
        for (int i = 0; i < 16; i++) t += X[16 * j + i];
        s16[j] = t;
        if (j & 1) s32[j / 2] = s16[j - 1] + t;
    }
    for (idx_t j = 0; j < k / 32 && E == 32; j++) xs[j] = dx[j] * (float)s32[j];
}

/* -- portable decoding: one block to signed codes q = u - off and its scales ----------- */
typedef struct {
    int8_t q[256];
    int32_t sc[16], mn[16]; /* per sub-block of `sub` */
    int sub;
    float A, B;
} Block;

static float half_to_float(const uint8_t *p) {
    uint32_t h = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 31) {
        bits = sign | 0x7f800000u | (m << 13);
    } else if (e) {
        bits = sign | ((e + 112) << 23) | (m << 13);
    } else { /* zero or subnormal: m 2^-24, exact in float32 */
        float f = ldexpf((float)m, -24);
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Q4_K/Q5_K's 12 bytes: sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7
   (mins); 4-7 from byte j + 4's nibbles with the top bits of bytes j - 4 (scales), j (mins) */
static void scale_min_k4(const uint8_t *s, int32_t *sc, int32_t *mn) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 15) | ((s[j] >> 6) << 4);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
}

static void decode_block(int type, const uint8_t *b, Block *o) {
    o->sub = type == Q6_K ? 16 : 32;
    o->A = half_to_float(type == Q6_K ? b + 208 : b);
    o->B = type == Q4_1 ? -half_to_float(b + 2) : type == Q4_K || type == Q5_K ?
           half_to_float(b + 2) : 0.0f;
    o->sc[0] = o->mn[0] = 1;
    const int off = OFFSET[type];
    if (type <= Q8_0) {
        const uint8_t *qs = b + (type == Q4_0 ? 2 : type == Q4_1 ? 4 : 6);
        uint32_t qh = 0;
        if (type == Q5_0) memcpy(&qh, b + 2, 4); /* little-endian: bit i, element i */
        for (int i = 0; i < 32; i++) {
            int u = type == Q8_0 ? (int)(int8_t)b[2 + i] + 128
                                 : ((i < 16 ? qs[i] : qs[i - 16] >> 4) & 15) |
                                   (int)((qh >> i) & 1) << 4;
            o->q[i] = (int8_t)(u - off);
        }
    } else if (type == Q6_K) { /* element 32 (4h + t) + i: ql[64h + 32(t & 1) + i], qh[32h + i] */
        for (int s = 0; s < 16; s++) o->sc[s] = (int8_t)b[192 + s], o->mn[s] = 0;
        for (int e = 0; e < 256; e++) {
            int h = e / 128, t = (e / 32) % 4, i = e % 32;
            int lo = (b[64 * h + 32 * (t & 1) + i] >> (4 * (t >> 1))) & 15;
            int hi = (b[128 + 32 * h + i] >> (2 * t)) & 3;
            o->q[e] = (int8_t)((lo | hi << 4) - off);
        }
    } else { /* Q4_K/Q5_K: sub-block j from byte run j / 2's low (even j) or high nibbles */
        scale_min_k4(b + 4, o->sc, o->mn);
        const uint8_t *qs = b + (type == Q5_K ? 48 : 16), *qh = b + 16;
        for (int e = 0; e < 256; e++) {
            int j = e / 32, i = e % 32;
            int u = (qs[32 * (j / 2) + i] >> (4 * (j & 1))) & 15;
            if (type == Q5_K) u |= ((qh[i] >> j) & 1) << 4;
            o->q[e] = (int8_t)u;
        }
    }
}

/* rows [r0, r0 + count) of raw -> float32 out [count][k], gguf.quants' operation order */
static void dequantize_rows(const uint8_t *raw, idx_t stride, idx_t r0, idx_t count, idx_t k,
                            int type, float *out) {
    Block blk;
    const int E = ELEMS[type];
    for (idx_t r = 0; r < count; r++) {
        for (idx_t b = 0; b < k / E; b++) {
            decode_block(type, raw + (r0 + r) * stride + b * BYTES[type], &blk);
            float *o = out + r * k + b * E;
            for (int e = 0; e < E; e++) {
                int s = e / blk.sub;
                o[e] = (blk.A * (float)blk.sc[s]) * (float)blk.q[e] - blk.B * (float)blk.mn[s];
            }
        }
    }
}

/* the portable GEMM: per block, exact int sums, then one float multiply-add per row */
/* an AVX2 clone where the CPU has it: the same C, so the same integers and float32 order */
__attribute__((target_clones("avx2", "default")))
static void gemm_portable(const uint8_t *raw, idx_t stride, idx_t n, idx_t k, int type,
                          const Prep *p, int M, float *y) {
    Block blk;
    const int E = ELEMS[type];
    const idx_t nb = k / E;
    for (idx_t r = 0; r < n; r++) {
        float acc[TILE_ROWS] = {0};
        for (idx_t b = 0; b < nb; b++) {
            decode_block(type, raw + r * stride + b * BYTES[type], &blk);
            for (int m = 0; m < M; m++) {
                const int8_t *X = p->X + m * k + b * E;
                const int32_t *S = blk.sub == 16 ? p->s16 + m * (k / 16) + b * (E / 16)
                                                 : p->s32 + m * (k / 32) + b * (E / 32);
                int32_t isum = 0, msum = 0; /* |isum| <= 256 * 128 * 127 * 128 < 2^31 */
                for (int s = 0; s < E / blk.sub; s++) {
                    int32_t dot = 0;
                    for (int i = s * blk.sub; i < (s + 1) * blk.sub; i++) dot += blk.q[i] * X[i];
                    isum += blk.sc[s] * dot;
                    msum += blk.mn[s] * S[s];
                }
                float dxb = p->dx[m * nb + b];
                acc[m] += (blk.A * dxb) * (float)isum - (blk.B * dxb) * (float)msum;
            }
        }
        for (int m = 0; m < M; m++) y[m * n + r] = acc[m];
    }
}

#endif /* RADIXLM_GGUF_BLOCKS_PORTABLE_H */
