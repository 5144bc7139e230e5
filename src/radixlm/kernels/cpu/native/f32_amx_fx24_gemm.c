/* float32 GEMM on AMX int8 tiles, operands as 24-bit fixed point: out = x @ w.T.
 *
 *   out[m, n] = sum_k x[m, k] * w[n, k]
 *
 * Each row of x and each row of w is written as 24-bit fixed-point integers with a per-row
 * power of two, v = V 2^-e (|V| <= XMAX = 127 (65536 + 256 + 1), the row's largest |v|
 * mapped into [XMAX / 2, XMAX]), and V in three balanced base-256 digits, V = 65536 v0 +
 * 256 v1 + v2, each digit in [-128, 127] (one s8 plane each: hi, mid, lo). TDPBSSD
 * multiplies s8 tiles and adds in int32, so with the digit planes' products summed per
 * level L = i + j,
 *
 *   P_L = sum_k sum_{i + j = L} x_i[m, k] w_j[n, k]         (L = 0, 1, 2; six tile products)
 *   X.W ~= 2^16 (65536 P0 + 256 P1 + P2)                     (exact in int64)
 *   out = float32(2^16 T 2^-ex[m] 2^-ew[n]),  T = 65536 P0 + 256 P1 + P2
 *
 * The levels L >= 3 (x_mid w_lo, x_lo w_mid, x_lo w_lo) are dropped: together below 2^-22 of
 * the row maxima's product per k, the size of the fixed-point rounding itself. So the only
 * approximations are each operand's rounding to 24 bits of its row's largest element
 * (1 / XMAX, ~2^-23, of it at most; float32 keeps 2^-24 of each element), those dropped
 * levels, and one final rounding: |out - x.w| <= 2^-20 K max|x[m]| max|w[n]| plus half an
 * ulp; measured 1.6-3.3e-7 of sum |x w| on Gaussian rows, 2-10x MKL's float32
 * (docs/kernels.md). |P_L| <= 3 K 128^2 < 2^31 for
 * K <= 43690 (checked by the launcher). The result is deterministic: it does not depend on
 * which other rows share the call (each row's digits and exponent are its own).
 *
 * Why: one TDPBSSD is 16 x 16 x 64 multiply-adds in ~16 cycles, twice the bfloat16 rate, and
 * the weight is 3 bytes a weight instead of float32's 4. At decode sizes (1-32 rows) a step
 * is bound by streaming the weights, so fewer bytes is the win; the three digit planes of a
 * weight are packed at load, not cut per call (the bfloat16 GEMM, f32_amx_gemm.c, cuts its
 * weight per call, which does not overlap with its tile products). SmolLM2's 121 linears
 * streamed in model order: 1 row 30.4 ms (the GEMV 36.3), 32 rows 45.3 (the panel GEMM
 * 69.1; benchmarks/cpu_weight_stream.py --candidates, docs/kernels.md).
 *
 * The weight is packed once at load (radixlm/kernels/cpu/f32_amx_fx24_gemm.py) in units of
 * 16 output columns x 64 k x 3 planes in the order AMX's B operand wants: unit (t, b), plane
 * p, bytes [r][c][i] for r = 0..15, c = 0..15, i = 0..3 hold w_p[16t + c, 64b + 4r + i]; the
 * units of a column tile over all of K back to back, tiles back to back (one stream in the
 * order the kernel reads it), zeros past N and K; then 2^(16 - ew) per padded row, float32,
 * in the same buffer right after the units (the level sum's 2^16 folded in).
 *
 * `gemm_codes` is the same kernel for a per-row int8 weight w[n, k] = scale[n] c[n, k]
 * (--quantization int8; radixlm/kernels/cpu/int8_amx.py): one weight plane, the codes c
 * themselves (1 byte a weight), so x's three planes times it are P_L = sum_k x_L c (three
 * tile products a block, no level dropped), out = float32(T 2^-ex[m] scale[n]): the only
 * approximation is x's rounding to 24 bits of its row's largest element.
 *
 * Per call x's rows are cut into planes [3][M16][K64] (zeros past M and K) in a per-thread
 * buffer; then per column tile and row tile of 16 x rows, three accumulator tiles take the
 * six products over K, and the tile is combined in int64 and scaled in double. Meanwhile the
 * next column tile is prefetched into L2, a share of it per K block of every row tile's pass
 * (a fixed distance ahead of the first pass alone left the memory idle in the others).
 *
 * A row of x holding inf or nan gives a row of nan (a float32 GEMM gives inf or nan there).
 *
 * Needs: x86-64 with AMX-TILE, AMX-INT8 and AVX-512 F/BW/DQ/VL, and the kernel's leave to use
 * AMX state (arch_prctl ARCH_REQ_XCOMP_PERM, asked for by `supported()`). The module builds
 * with any C compiler (the kernel only with GCC or Clang on x86-64 Linux); `gemm` raises
 * RuntimeError where it cannot run. The GIL is released while it runs; from 8 rows up a call
 * splits its column tiles over `threads` (pthreads started per call; each output is computed
 * as alone, so the result does not depend on the count).
 */
#define RADIXLM_NATIVE_AMX /* the header's AMX tile helpers */
#include "radixlm_native.h"

#define TN 16                   /* output columns per tile */
#define TK 64                   /* k per tile: 16 rows of 4 s8 */
#define TM 16                   /* rows of x per tile */
#define PLANE_UNIT (TK * TN)    /* bytes of one plane of a weight unit: 1024 */
#define XMAX 8355711.0f         /* 127 * (65536 + 256 + 1): the largest balanced 3-digit value */
#define MAX_K 43690             /* 3 K 128^2 < 2^31: a level's int32 sum cannot overflow */
#define MAX_THREADS 64          /* a call's threads at most (the caller's and those it starts) */

#if HAVE_X86_LINUX
#define TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,amx-tile,amx-int8")))

/* Tiles: 0, 1, 2 the accumulators of levels 0, 1, 2 (x rows x 16 int32); 3, 4, 5 x's hi,
 * mid, lo planes (x rows x 64 s8); 6, 7 weight planes (16 rows x 64 s8). `rows`: x rows in a
 * tile, 16, or M when the whole call has fewer (a shorter TDPBSSD). */
static TARGET void configure_tiles(int rows) {
    uint8_t tile_rows[8];
    for (int i = 0; i < 8; i++) tile_rows[i] = (uint8_t)(i < 6 ? rows : TK / 4);
    load_tile_config(tile_rows);
}

/* The row's exponent e (V = round(v 2^e) fits 3 balanced digits, the largest |V| in
 * [XMAX / 2, XMAX]) and whether every element is finite; e <= 126 keeps 2^-e a normal float
 * (a row below 2^-103 then rounds to steps of 2^-126). */
static TARGET int row_exponent(const float *x, idx_t k, int *finite) {
    __m512 m = _mm512_setzero_ps();
    __m512i bad = _mm512_setzero_si512();
    const __m512i exp_mask = _mm512_set1_epi32(0x7f800000);
    for (idx_t i = 0; i < k; i += 16) {
        const __mmask16 live = k - i >= 16 ? 0xFFFF : (__mmask16)((1u << (k - i)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
        const __m512i e = _mm512_and_si512(_mm512_castps_si512(v), exp_mask);
        bad = _mm512_or_si512(bad, _mm512_maskz_mov_epi32(
                                      _mm512_cmpeq_epi32_mask(e, exp_mask), exp_mask));
        m = _mm512_max_ps(m, _mm512_abs_ps(v));
    }
    *finite = _mm512_reduce_or_epi32(bad) == 0;
    const float amax = _mm512_reduce_max_ps(m);
    if (!(amax > 0.0f) || !*finite) return 0;
    int ex;
    frexpf(amax, &ex); /* amax = f 2^ex, f in [0.5, 1) */
    int e = 23 - ex;
    if (ldexpf(amax, e) > XMAX) e -= 1;
    return e > 126 ? 126 : e;
}

/* x [M, K] -> planes [3][M16][K64] (hi, mid, lo digits; zeros past M and K), unscale[m] =
 * 2^-e, finite[m]. */
static TARGET void cut_rows(const float *x, idx_t M, idx_t K, idx_t M16, idx_t K64,
                            int8_t *planes, double *unscale, int *finite) {
    const idx_t plane = M16 * K64;
    const __m512i half = _mm512_set1_epi32(128), low = _mm512_set1_epi32(255);
    memset(planes, 0, (size_t)(3 * plane));
    for (idx_t m = 0; m < M; m++) {
        const int e = row_exponent(x + m * K, K, &finite[m]);
        unscale[m] = ldexp(1.0, -e);
        const __m512 scale = _mm512_set1_ps(ldexpf(1.0f, e));
        int8_t *row = planes + m * K64;
        for (idx_t i = 0; i < K && finite[m]; i += 16) {
            const __mmask16 live = K - i >= 16 ? 0xFFFF : (__mmask16)((1u << (K - i)) - 1u);
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(live, x + m * K + i),
                                                         scale));
            /* balanced digits: d = ((v + 128) & 255) - 128, then v = (v - d) >> 8 (exact) */
            const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, half), low),
                                                half);
            v = _mm512_srai_epi32(_mm512_sub_epi32(v, lo), 8);
            const __m512i mid = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, half), low),
                                                 half);
            const __m512i hi = _mm512_srai_epi32(_mm512_sub_epi32(v, mid), 8);
            _mm_mask_storeu_epi8(row + i, live, _mm512_cvtepi32_epi8(hi));
            _mm_mask_storeu_epi8(row + plane + i, live, _mm512_cvtepi32_epi8(mid));
            _mm_mask_storeu_epi8(row + 2 * plane + i, live, _mm512_cvtepi32_epi8(lo));
        }
    }
}

/* 8 int32 levels -> T = 65536 P0 + 256 P1 + P2 in double (exact in int64, then in double). */
INLINE TARGET __m512d combine8(__m256i p0, __m256i p1, __m256i p2) {
    const __m512i t = _mm512_add_epi64(
        _mm512_add_epi64(_mm512_slli_epi64(_mm512_cvtepi32_epi64(p0), 16),
                         _mm512_slli_epi64(_mm512_cvtepi32_epi64(p1), 8)),
        _mm512_cvtepi32_epi64(p2));
    return _mm512_cvtepi64_pd(t); /* |T| <= K 2^31: exact in double */
}

/* The three level tiles (in `acc`, [3][16][16] int32) of row tile m0.., column tile n0.. ->
 * out = T ux[m] uw[n], as many rows and columns as lie inside [M, N]. */
static TARGET void store_tile(const int32_t *acc, float *out, idx_t M, idx_t N, idx_t m0,
                              idx_t n0, const double *ux, const float *uw, const int *finite) {
    const idx_t rows = M - m0 < TM ? M - m0 : TM, cols = N - n0 < TN ? N - n0 : TN;
    const __mmask8 first = cols >= 8 ? 0xFF : (__mmask8)((1u << cols) - 1u);
    const __mmask8 second = cols >= 16 ? 0xFF : cols > 8 ? (__mmask8)((1u << (cols - 8)) - 1u) : 0;
    const __m512d w_lo = _mm512_cvtps_pd(_mm256_loadu_ps(uw + n0));
    const __m512d w_hi = _mm512_cvtps_pd(_mm256_loadu_ps(uw + n0 + 8));
    for (idx_t i = 0; i < rows; i++) {
        float *dst = out + (m0 + i) * N + n0;
        if (!finite[m0 + i]) {
            const __m256 nan = _mm256_set1_ps(NAN);
            _mm256_mask_storeu_ps(dst, first, nan);
            _mm256_mask_storeu_ps(dst + 8, second, nan);
            continue;
        }
        const int32_t *p = acc + i * TN;
        const __m512d s = _mm512_set1_pd(ux[m0 + i]);
        for (int h = 0; h < 2; h++) {
            const __m256i p0 = _mm256_loadu_si256((const __m256i *)(p + 8 * h));
            const __m256i p1 = _mm256_loadu_si256((const __m256i *)(p + TM * TN + 8 * h));
            const __m256i p2 = _mm256_loadu_si256((const __m256i *)(p + 2 * TM * TN + 8 * h));
            const __m512d y = _mm512_mul_pd(_mm512_mul_pd(combine8(p0, p1, p2), s),
                                            h ? w_hi : w_lo);
            _mm256_mask_storeu_ps(dst + 8 * h, h ? second : first, _mm512_cvtpd_ps(y));
        }
    }
}

/* The prefetch cursor over the next column tile: `at` advances `lines` cache lines per
 * K block of every row tile's pass, so the whole next tile is in L2 when its first pass
 * starts and the memory stream runs through every pass, not only the first. */
typedef struct {
    const char *at;
    int lines;
} prefetch_t;

INLINE TARGET void prefetch_step(prefetch_t *pf) {
    for (int i = 0; i < pf->lines; i++) _mm_prefetch(pf->at + 64 * i, _MM_HINT_T1);
    pf->at += 64 * pf->lines;
}

/* Row tile `mt` times column tile t (its units from `units`) over all K blocks, into the
 * accumulator tiles 0-2; `wplanes` 3 (a fixed-point weight: six products a block) or 1
 * (int8 codes: x's three planes times the codes, three products a block, every level). */
INLINE TARGET void tile_products(const int8_t *units, const int8_t *planes, idx_t plane,
                                 idx_t mt, idx_t K64, idx_t blocks, int wplanes,
                                 prefetch_t *pf) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    const int8_t *a = planes + mt * TM * K64;
    if (wplanes == 1) {
        for (idx_t b = 0; b < blocks; b++) {
            const int8_t *u = units + b * PLANE_UNIT;
            prefetch_step(pf);
            _tile_loadd(3, a + b * TK, K64);
            _tile_loadd(4, a + plane + b * TK, K64);
            _tile_loadd(5, a + 2 * plane + b * TK, K64);
            _tile_loadd(6, u, 64);
            _tile_dpbssd(0, 3, 6);
            _tile_dpbssd(1, 4, 6);
            _tile_dpbssd(2, 5, 6);
        }
        return;
    }
    for (idx_t b = 0; b < blocks; b++) {
        const int8_t *u = units + b * 3 * PLANE_UNIT;
        prefetch_step(pf);
        _tile_loadd(3, a + b * TK, K64);
        _tile_loadd(4, a + plane + b * TK, K64);
        _tile_loadd(5, a + 2 * plane + b * TK, K64);
        _tile_loadd(6, u, 64);                     /* w hi */
        _tile_dpbssd(0, 3, 6);
        _tile_dpbssd(1, 4, 6);
        _tile_dpbssd(2, 5, 6);
        _tile_loadd(7, u + PLANE_UNIT, 64);        /* w mid */
        _tile_dpbssd(1, 3, 7);
        _tile_dpbssd(2, 4, 7);
        _tile_loadd(6, u + 2 * PLANE_UNIT, 64);    /* w lo */
        _tile_dpbssd(2, 3, 6);
    }
}

/* One thread's share of a call: column tiles [t0, t1) over every row tile. */
typedef struct {
    const int8_t *packed;
    float *out;
    idx_t M, N, K, t0, t1;
    int wplanes;
    const int8_t *planes;
    const double *ux;
    const int *finite;
} share_t;

static TARGET void column_tiles(const share_t *sh) {
    const idx_t M = sh->M, N = sh->N, K = sh->K;
    const idx_t M16 = (M + TM - 1) / TM * TM, K64 = (K + TK - 1) / TK * TK;
    const idx_t tiles = (N + TN - 1) / TN, blocks = K64 / TK, row_tiles = M16 / TM;
    const idx_t plane = M16 * K64, unit = sh->wplanes * PLANE_UNIT;
    const float *uw = (const float *)(sh->packed + tiles * blocks * unit); /* after the units */
    int32_t acc[3 * TM * TN];
    configure_tiles(M < TM ? (int)M : TM); /* tile state is per thread */
    for (idx_t t = sh->t0; t < sh->t1; t++) {
        const int8_t *units = sh->packed + t * blocks * unit;
        /* the next column tile, a share per K block of each row tile's pass */
        prefetch_t pf = {(const char *)(units + blocks * unit),
                         (int)((unit / 64 + row_tiles - 1) / row_tiles)};
        for (idx_t mt = 0; mt < row_tiles; mt++) {
            tile_products(units, sh->planes, plane, mt, K64, blocks, sh->wplanes, &pf);
            _tile_stored(0, acc, TN * (idx_t)sizeof(int32_t));
            _tile_stored(1, acc + TM * TN, TN * (idx_t)sizeof(int32_t));
            _tile_stored(2, acc + 2 * TM * TN, TN * (idx_t)sizeof(int32_t));
            store_tile(acc, sh->out, M, N, mt * TM, t * TN, sh->ux, uw, sh->finite);
        }
    }
    _tile_release();
}

static void *column_tiles_thread(void *arg) {
    column_tiles((const share_t *)arg);
    return NULL;
}

/* Fewer rows stay on one thread: a call there is bound by the weight stream, which a second
 * core shares, and starting a thread (~10-30 us) would cost more than it brings. */
#define THREADED_ROWS 8

static TARGET void gemm_all(const float *x, const int8_t *packed, float *out, idx_t M, idx_t N,
                            idx_t K, int wplanes, int threads, int8_t *planes, double *ux,
                            int *finite) {
    const idx_t M16 = (M + TM - 1) / TM * TM, K64 = (K + TK - 1) / TK * TK;
    const idx_t tiles = (N + TN - 1) / TN;
    cut_rows(x, M, K, M16, K64, planes, ux, finite);
    int n = M >= THREADED_ROWS ? threads : 1;
    if (n > tiles) n = (int)tiles;
    share_t shares[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int i = 0; i < n; i++) {
        shares[i] = (share_t){packed, out, M, N, K, tiles * i / n, tiles * (i + 1) / n,
                              wplanes, planes, ux, finite};
        started[i] = i > 0 && pthread_create(&ids[i], NULL, column_tiles_thread,
                                             &shares[i]) == 0;
    }
    column_tiles(&shares[0]);
    for (int i = 1; i < n; i++) {
        if (started[i]) pthread_join(ids[i], NULL);
        else column_tiles(&shares[i]); /* no thread to be had: this one does it */
    }
}

/* The CPU has the instructions and the kernel lets this process use AMX's tile state. */
static int cpu_supported(void) {
    static int answer = -1;
    if (answer >= 0) return answer;
    unsigned a, b, c, d;
    answer = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return answer;
    const int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1;
    const int avx512vl = (b >> 31) & 1, amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
    if (!(avx512f && avx512dq && avx512bw && avx512vl && amx_tile && amx_int8)) return answer;
    answer = amx_permission();
    return answer;
}

/* A per-thread work buffer, grown as needed and kept (decode calls are small and frequent:
 * a fresh allocation above malloc's mmap threshold would fault its pages in every call). */
static __thread void *work_buf;
static __thread size_t work_size;

static void *work_buffer(size_t bytes) {
    if (bytes <= work_size) return work_buf;
    free(work_buf);
    work_size = 0;
    work_buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (work_buf) work_size = (bytes + 63) / 64 * 64;
    return work_buf;
}
#else
static int cpu_supported(void) { return 0; }
#endif

DEFINE_SUPPORTED

static PyObject *py_unit_shape(PyObject *UNUSED self, PyObject *UNUSED noargs) {
    return Py_BuildValue("(iin)", TN, TK, (Py_ssize_t)MAX_K);
}

static PyObject *gemm_entry(PyObject *args, PyObject *kwargs, int wplanes) {
    static char *kwlist[] = {"x", "packed", "out", "M", "N", "K", "threads", NULL};
    unsigned long long px, pw, pout;
    long long M, N, K;
    int threads = 1;
    if (!cpu_check(cpu_supported(), "f32_amx_fx24_gemm.gemm needs a CPU with AMX-INT8 and "
                   "AVX-512 F/BW/DQ/VL and the kernel's leave to use AMX (check supported())"))
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KKKLLL|i:gemm", kwlist, &px, &pw, &pout,
                                     &M, &N, &K, &threads))
        return NULL;
    if (threads < 1) {
        PyErr_Format(PyExc_ValueError, "gemm: threads must be >= 1, got %d", threads);
        return NULL;
    }
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (M < 1 || N < 1 || K < 1 || K > MAX_K) {
        PyErr_Format(PyExc_ValueError,
                     "gemm: M, N and K must be >= 1 and K <= %d, got M=%lld, N=%lld, K=%lld",
                     MAX_K, M, N, K);
        return NULL;
    }
    if (!px || !pw || !pout) {
        PyErr_SetString(PyExc_ValueError, "gemm: a data pointer is null");
        return NULL;
    }
#if HAVE_X86_LINUX
    const idx_t M16 = (M + TM - 1) / TM * TM, K64 = (K + TK - 1) / TK * TK;
    const size_t plane_bytes = (size_t)(3 * M16 * K64);
    const size_t ux_off = (plane_bytes + 63) / 64 * 64;
    const size_t finite_off = ux_off + (size_t)M16 * sizeof(double);
    char *buf = work_buffer(finite_off + (size_t)M16 * sizeof(int));
    if (!buf) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    gemm_all((const float *)(uintptr_t)px, (const int8_t *)(uintptr_t)pw,
             (float *)(uintptr_t)pout, (idx_t)M, (idx_t)N, (idx_t)K, wplanes, threads,
             (int8_t *)buf, (double *)(buf + ux_off), (int *)(buf + finite_off));
    Py_END_ALLOW_THREADS
#else
    (void)wplanes;
    (void)threads;
#endif
    Py_RETURN_NONE;
}

static PyObject *py_gemm(PyObject *UNUSED self, PyObject *args, PyObject *kwargs) {
    return gemm_entry(args, kwargs, 3);
}

static PyObject *py_gemm_codes(PyObject *UNUSED self, PyObject *args, PyObject *kwargs) {
    return gemm_entry(args, kwargs, 1);
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS,
     "supported() -> bool: whether this CPU has AMX-INT8 and AVX-512 F/BW/DQ/VL and this process "
     "may use AMX (what gemm needs)."},
    {"unit_shape", py_unit_shape, METH_NOARGS,
     "unit_shape() -> (16, 64, max_k): output columns and k per packed weight unit, and the "
     "largest K the int32 sums allow."},
    {"gemm", (PyCFunction)(void (*)(void))py_gemm, METH_VARARGS | METH_KEYWORDS,
     "gemm(x, packed, out, M, N, K, threads=1) -> None\n\n"
     "out[m, n] = sum_k x[m, k] * w[n, k] on data pointers (ints): x float32 [M, K], packed\n"
     "bytes: int8 [ceil(N / 16), ceil(K / 64), 3, 16, 16, 4] (w's digit planes, zero-padded)\n"
     "then float32 [16 ceil(N / 16)] (2^(16 - e) of each row of w); out float32 [M, N];\n"
     "contiguous. From 8 rows up the column tiles are split over `threads` threads (the\n"
     "caller's and threads - 1 started for the call; at most 64). The caller owns the\n"
     "checks of the buffers themselves (radixlm.kernels.cpu.f32_amx_fx24_gemm)."},
    {"gemm_codes", (PyCFunction)(void (*)(void))py_gemm_codes, METH_VARARGS | METH_KEYWORDS,
     "gemm_codes(x, packed, out, M, N, K, threads=1) -> None\n\n"
     "The same product for a per-row int8 weight w[n, k] = scale[n] c[n, k]: packed bytes\n"
     "int8 [ceil(N / 16), ceil(K / 64), 1, 16, 16, 4] (the codes c in the same order)\n"
     "then float32 [16 ceil(N / 16)] (scale); every digit level kept\n"
     "(radixlm.kernels.cpu.int8_amx)."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(f32_amx_fx24_gemm, "float32 GEMM on AMX int8 tiles, each operand row as 24-bit "
                                 "fixed point in three s8 digit planes (f32_amx_fx24_gemm.c).")
