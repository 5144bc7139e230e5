/* Grouped int4 GEMV / small GEMM (1..8 rows) on AVX-512 VNNI, float32-faithful activations.

   Weight: w[n, k] = scale[n, g] * q[n, k] + min[n, g] with codes q in [0, 15] and one float32
   scale and min per group g of 32 along k (GGUF Q4_0: min = -8 scale; Q4_1: min = m; torch's
   int4 convention (q - 8) s + z: min = z - 8 s).

   Activations stay float32-faithful: each row x is written as a 24-bit fixed-point integer
   X = round(x * 2^e) with a per-row power of two 2^e (|X| <= 2^23 - 2^15), and X in three
   balanced base-256 digits X = 65536 D2 + 256 D1 + D0, each D in [-128, 127] (one s8 plane
   each). vpdpbusd multiplies the codes (u8) by a plane (s8) and adds 4 products per int32
   lane. Per group of 32 and output row: A_p = sum q * D_p, |A_p| <= 32 * 15 * 128 = 61440, so
   T = 256 A2 + A1 (|T| < 2^24) and A0 convert to float exactly, and the group's dot is
   256 T + A0 (one float rounding). With S = sum of the group's X (exact in int32):
   y[n] = 2^-e * sum_g (scale[n, g] * dot_g + min[n, g] * S_g). The only approximation beside
   float32 accumulation is X's rounding: 2^-24 of the row's largest |x| (float32 itself keeps
   2^-24 of each element).

   Layout (built once by pack()): output rows in blocks of 16 (N padded with zero rows), and
   per block and group one tile, tiles in (block, group) order so a GEMV streams the
   buffer once front to back:
     bytes 0..255: 4 chunks of 64 bytes; chunk c, byte 4 l + j holds, for row 16 b + l,
                   q[k0 + 8c + j] in its low nibble and q[k0 + 8c + 4 + j] in its high one,
     then scale[16] and min[16]: float32 (a 384-byte tile, 0.75 bytes per weight), or float16
     when the caller found every scale and min exactly representable (320 bytes, 0.625 per
     weight, the size of GGUF's Q4_1).

   Everything runs with the GIL released on the caller's thread. Pointers come in as integers
   from the Python launcher (kernels/cpu_q4_gemv.py), which checks shapes, dtypes and
   contiguity; this file trusts them. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GROUP 32
#define BLOCK_ROWS 16
#define TILE_CODE_BYTES 256
#define TILE_BYTES(half) ((half) ? 320 : 384) /* codes + 16 scales + 16 mins */
#define MAX_ROWS 8
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 4096 /* how far ahead of the tile being read the stream is fetched */
#endif
#define XMAX 8355711.0f     /* 127 * (65536 + 256 + 1): the largest balanced 3-digit value */

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c")))

static Py_ssize_t packed_bytes(Py_ssize_t n, Py_ssize_t k, int half) {
    return (n + BLOCK_ROWS - 1) / BLOCK_ROWS * (k / GROUP) * TILE_BYTES(half);
}

/* -- packing (plain C, once at load) --------------------------------------------------- */
VNNI static void put_scale(uint8_t *at, float v, int half) {
    if (half) {
        uint16_t h = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(v), 0), 0);
        memcpy(at, &h, 2);
    } else {
        memcpy(at, &v, 4);
    }
}

VNNI static void pack_tiles(uint8_t *dst, const uint8_t *codes, const float *scales,
                            const float *mins, Py_ssize_t n, Py_ssize_t k, int half) {
    Py_ssize_t groups = k / GROUP, blocks = (n + BLOCK_ROWS - 1) / BLOCK_ROWS;
    int width = half ? 2 : 4;
    memset(dst, 0, (size_t)packed_bytes(n, k, half));
    for (Py_ssize_t b = 0; b < blocks; b++) {
        for (Py_ssize_t g = 0; g < groups; g++) {
            uint8_t *tile = dst + (b * groups + g) * TILE_BYTES(half);
            uint8_t *ts = tile + TILE_CODE_BYTES, *tm = ts + BLOCK_ROWS * width;
            for (int l = 0; l < BLOCK_ROWS; l++) {
                Py_ssize_t row = b * BLOCK_ROWS + l;
                if (row >= n) break; /* padded rows: zero codes, scales and mins */
                const uint8_t *q = codes + row * k + g * GROUP;
                for (int c = 0; c < 4; c++)
                    for (int j = 0; j < 4; j++)
                        tile[64 * c + 4 * l + j] =
                            (uint8_t)((q[8 * c + j] & 15) | ((q[8 * c + 4 + j] & 15) << 4));
                put_scale(ts + l * width, scales[row * groups + g], half);
                put_scale(tm + l * width, mins[row * groups + g], half);
            }
        }
    }
}

/* -- activations: three s8 digit planes per row ---------------------------------------- */
typedef struct {
    int8_t *planes;  /* [rows][3][k] */
    float *sums;     /* [rows][groups]: S_g as float */
    float *unscale;  /* [rows]: 2^-e */
    int *finite;     /* [rows]: 0 when the row holds inf/nan */
} Prepared;

VNNI static float row_absmax(const float *x, Py_ssize_t k, int *finite) {
    __m512 m = _mm512_setzero_ps();
    __m512i bad = _mm512_setzero_si512();
    const __m512i exp_mask = _mm512_set1_epi32(0x7f800000);
    for (Py_ssize_t i = 0; i < k; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        /* an all-ones exponent is inf or nan */
        __m512i e = _mm512_and_si512(_mm512_castps_si512(v), exp_mask);
        bad = _mm512_or_si512(bad, _mm512_maskz_mov_epi32(
                                      _mm512_cmpeq_epi32_mask(e, exp_mask), exp_mask));
        m = _mm512_max_ps(m, _mm512_abs_ps(v));
    }
    *finite = _mm512_reduce_or_epi32(bad) == 0;
    return _mm512_reduce_max_ps(m);
}

VNNI static void prepare_row(const float *x, Py_ssize_t k, int8_t *planes, float *sums,
                             float *unscale, int *finite) {
    float amax = row_absmax(x, k, finite);
    int e = 0;
    if (amax > 0.0f && *finite) {
        int ex;
        frexpf(amax, &ex); /* amax = f * 2^ex, f in [0.5, 1) */
        e = 23 - ex;
        if (ldexpf(amax, e) > XMAX) e -= 1; /* keep round(amax 2^e) within 3 balanced digits */
        if (e > 126) e = 126; /* 2^e stays finite: subnormal rows round to steps of 2^-126 */
    }
    *unscale = ldexpf(1.0f, -e);
    const __m512 scale = _mm512_set1_ps(ldexpf(1.0f, e));
    const __m512i half = _mm512_set1_epi32(128), low = _mm512_set1_epi32(255);
    for (Py_ssize_t g = 0; g < k / GROUP; g++) {
        __m512i total = _mm512_setzero_si512();
        for (int h = 0; h < GROUP; h += 16) {
            Py_ssize_t i = g * GROUP + h;
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), scale));
            if (!*finite) v = _mm512_setzero_si512();
            total = _mm512_add_epi32(total, v);
            /* balanced digits: d = ((v + 128) & 255) - 128, v = (v - d) >> 8 (exact) */
            __m512i d0 = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, half), low), half);
            v = _mm512_srai_epi32(_mm512_sub_epi32(v, d0), 8);
            __m512i d1 = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, half), low), half);
            __m512i d2 = _mm512_srai_epi32(_mm512_sub_epi32(v, d1), 8);
            _mm_storeu_si128((__m128i *)(planes + i), _mm512_cvtepi32_epi8(d0));
            _mm_storeu_si128((__m128i *)(planes + k + i), _mm512_cvtepi32_epi8(d1));
            _mm_storeu_si128((__m128i *)(planes + 2 * k + i), _mm512_cvtepi32_epi8(d2));
        }
        sums[g] = (float)_mm512_reduce_add_epi32(total);
    }
}

/* -- the GEMV -------------------------------------------------------------------------- */
VNNI static inline __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* One 16-row block, all groups, for M activation rows: y[m][0..15] (unscaled). */
VNNI static inline __attribute__((always_inline)) void block_rows(
    const uint8_t *tiles, Py_ssize_t groups, Py_ssize_t k, const Prepared *p, int M, int half,
    __m512 *acc) {
    const __m512i nib = _mm512_set1_epi8(15);
    for (int m = 0; m < M; m++) acc[m] = _mm512_setzero_ps();
    for (Py_ssize_t g = 0; g < groups; g++) {
        const uint8_t *tile = tiles + g * TILE_BYTES(half);
        for (int line = 0; line < TILE_BYTES(half); line += 64)
            _mm_prefetch((const char *)tile + PREFETCH_BYTES + line, _MM_HINT_T0);
        __m512i q[8]; /* q[2c]: k0+8c+0..3 (low nibbles), q[2c+1]: k0+8c+4..7 (high) */
        for (int c = 0; c < 4; c++) {
            __m512i raw = _mm512_loadu_si512((const void *)(tile + 64 * c));
            q[2 * c] = _mm512_and_si512(raw, nib);
            q[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
        }
        const uint8_t *sm = tile + TILE_CODE_BYTES;
        const __m512 scale = half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sm))
                                  : _mm512_loadu_ps((const float *)sm);
        const __m512 mins = half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sm + 1))
                                 : _mm512_loadu_ps((const float *)sm + 16);
        for (int m = 0; m < M; m++) {
            const int8_t *x0 = p->planes + (Py_ssize_t)m * 3 * k + g * GROUP;
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0;
#ifdef SPLIT_ACC
            __m512i b0 = a0, b1 = a0, b2 = a0;
            for (int s = 0; s < 8; s += 2) {
                a0 = _mm512_dpbusd_epi32(a0, q[s], bcast4(x0 + 4 * s));
                a1 = _mm512_dpbusd_epi32(a1, q[s], bcast4(x0 + k + 4 * s));
                a2 = _mm512_dpbusd_epi32(a2, q[s], bcast4(x0 + 2 * k + 4 * s));
                b0 = _mm512_dpbusd_epi32(b0, q[s + 1], bcast4(x0 + 4 * s + 4));
                b1 = _mm512_dpbusd_epi32(b1, q[s + 1], bcast4(x0 + k + 4 * s + 4));
                b2 = _mm512_dpbusd_epi32(b2, q[s + 1], bcast4(x0 + 2 * k + 4 * s + 4));
            }
            a0 = _mm512_add_epi32(a0, b0);
            a1 = _mm512_add_epi32(a1, b1);
            a2 = _mm512_add_epi32(a2, b2);
#else
            for (int s = 0; s < 8; s++) {
                a0 = _mm512_dpbusd_epi32(a0, q[s], bcast4(x0 + 4 * s));
                a1 = _mm512_dpbusd_epi32(a1, q[s], bcast4(x0 + k + 4 * s));
                a2 = _mm512_dpbusd_epi32(a2, q[s], bcast4(x0 + 2 * k + 4 * s));
            }
#endif
            __m512i t = _mm512_add_epi32(_mm512_slli_epi32(a2, 8), a1); /* |t| < 2^24 */
            __m512 dot = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(256.0f),
                                         _mm512_cvtepi32_ps(a0));
            acc[m] = _mm512_fmadd_ps(scale, dot, acc[m]);
            acc[m] = _mm512_fmadd_ps(mins, _mm512_set1_ps(p->sums[m * groups + g]), acc[m]);
        }
    }
}

VNNI static inline __attribute__((always_inline)) void gemv_m(
    const uint8_t *packed, Py_ssize_t n, Py_ssize_t k, const Prepared *p, int M, int half,
    float *y) {
    Py_ssize_t groups = k / GROUP, blocks = (n + BLOCK_ROWS - 1) / BLOCK_ROWS;
    for (Py_ssize_t b = 0; b < blocks; b++) {
        __m512 acc[MAX_ROWS];
        block_rows(packed + b * groups * TILE_BYTES(half), groups, k, p, M, half, acc);
        Py_ssize_t left = n - b * BLOCK_ROWS;
        __mmask16 keep = left >= BLOCK_ROWS ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        for (int m = 0; m < M; m++) {
            __m512 v = _mm512_mul_ps(acc[m], _mm512_set1_ps(p->unscale[m]));
            if (!p->finite[m]) v = _mm512_set1_ps(NAN);
            _mm512_mask_storeu_ps(y + m * n + b * BLOCK_ROWS, keep, v);
        }
    }
}

#define GEMV_FOR(M) \
    VNNI static void gemv_##M(const uint8_t *w, Py_ssize_t n, Py_ssize_t k, \
                              const Prepared *p, float *y) { gemv_m(w, n, k, p, M, 0, y); } \
    VNNI static void gemv_h##M(const uint8_t *w, Py_ssize_t n, Py_ssize_t k, \
                               const Prepared *p, float *y) { gemv_m(w, n, k, p, M, 1, y); }
GEMV_FOR(1)
GEMV_FOR(2)
GEMV_FOR(3)
GEMV_FOR(4)
GEMV_FOR(5)
GEMV_FOR(6)
GEMV_FOR(7)
GEMV_FOR(8)
typedef void (*gemv_fn)(const uint8_t *, Py_ssize_t, Py_ssize_t, const Prepared *, float *);
static const gemv_fn GEMV[2][MAX_ROWS + 1] = {
    {NULL, gemv_1, gemv_2, gemv_3, gemv_4, gemv_5, gemv_6, gemv_7, gemv_8},
    {NULL, gemv_h1, gemv_h2, gemv_h3, gemv_h4, gemv_h5, gemv_h6, gemv_h7, gemv_h8}};

/* -- Python entry points --------------------------------------------------------------- */
static int cpu_ok(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("f16c");
}

static PyObject *py_supported(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyBool_FromLong(cpu_ok());
}

static PyObject *py_packed_bytes(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n, k;
    int half;
    if (!PyArg_ParseTuple(args, "nnp", &n, &k, &half)) return NULL;
    return PyLong_FromSsize_t(packed_bytes(n, k, half));
}

/* pack(dst, codes, scales, mins, n, k, half): codes u8 [n, k]; scales, mins f32 [n, k / 32]
   (stored as float16 when half: the caller checked they are exactly representable) */
static PyObject *py_pack(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long dst, codes, scales, mins;
    Py_ssize_t n, k;
    int half;
    if (!PyArg_ParseTuple(args, "KKKKnnp", &dst, &codes, &scales, &mins, &n, &k, &half))
        return NULL;
    if (!cpu_ok()) {
        PyErr_SetString(PyExc_RuntimeError, "q4_gemv: this CPU lacks AVX-512 VNNI");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    pack_tiles((uint8_t *)(uintptr_t)dst, (const uint8_t *)(uintptr_t)codes,
               (const float *)(uintptr_t)scales, (const float *)(uintptr_t)mins, n, k, half);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

VNNI static void run_gemv(const uint8_t *w, Py_ssize_t n, Py_ssize_t k, const float *x, int rows,
                          int half, float *y, Prepared *p) {
    for (int m = 0; m < rows; m++)
        prepare_row(x + m * k, k, p->planes + (Py_ssize_t)m * 3 * k, p->sums + m * (k / GROUP),
                    p->unscale + m, p->finite + m);
    GEMV[half][rows](w, n, k, p, y);
}

/* gemv(packed, n, k, half, x, rows, y): x f32 [rows, k], y f32 [rows, n], 1 <= rows <= 8 */
static PyObject *py_gemv(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long w, x, y;
    Py_ssize_t n, k;
    int rows, half;
    if (!PyArg_ParseTuple(args, "KnnpKiK", &w, &n, &k, &half, &x, &rows, &y)) return NULL;
    if (rows < 1 || rows > MAX_ROWS || k % GROUP || k < GROUP || n < 1) {
        PyErr_Format(PyExc_ValueError, "q4_gemv: need 1 <= rows <= %d, k a positive multiple "
                     "of 32, n >= 1", MAX_ROWS);
        return NULL;
    }
    if (!cpu_ok()) {
        PyErr_SetString(PyExc_RuntimeError, "q4_gemv: this CPU lacks AVX-512 VNNI");
        return NULL;
    }
    Py_ssize_t groups = k / GROUP;
    size_t plane_bytes = ((size_t)rows * 3 * k + 63) & ~(size_t)63;
    size_t bytes = plane_bytes + (size_t)rows * (groups + 1) * sizeof(float) + rows * sizeof(int);
    char *work = malloc(bytes);
    if (!work) return PyErr_NoMemory();
    Prepared p = {(int8_t *)work, (float *)(work + plane_bytes), NULL, NULL};
    p.unscale = p.sums + rows * groups;
    p.finite = (int *)(p.unscale + rows);
    Py_BEGIN_ALLOW_THREADS
    run_gemv((const uint8_t *)(uintptr_t)w, n, k, (const float *)(uintptr_t)x, rows, half,
             (float *)(uintptr_t)y, &p);
    Py_END_ALLOW_THREADS
    free(work);
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS, "True if this CPU has AVX-512 VNNI."},
    {"packed_bytes", py_packed_bytes, METH_VARARGS,
     "packed_bytes(n, k, half): bytes of pack()'s layout."},
    {"pack", py_pack, METH_VARARGS,
     "pack(dst, codes, scales, mins, n, k, half): build the layout."},
    {"gemv", py_gemv, METH_VARARGS,
     "gemv(packed, n, k, half, x, rows, y): y = x @ W.T (float32)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "q4_gemv",
                                    "Grouped int4 GEMV on AVX-512 VNNI.", -1, METHODS};

PyMODINIT_FUNC PyInit_q4_gemv(void) { return PyModule_Create(&MODULE); }
