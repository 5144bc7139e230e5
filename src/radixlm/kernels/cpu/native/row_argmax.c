/* The sampler's greedy pick: the first maximum of each row of a float32 [rows, n] block.
 *
 * Why: torch's max(dim=-1) with indices runs ~220 us on one 262,144-float row (Gemma 3's
 * vocabulary) where the max alone takes ~30 us; at batch 32 that is ~7 ms a step.
 *
 * Contract (kernels/cpu/row_argmax.py's reference is torch's `x.max(dim=-1).indices`): the
 * index of the first element equal to the row's maximum; a row holding a NaN answers the
 * index of its first NaN (torch's max propagates NaN). The AVX-512 loop keeps, per lane, the
 * first index of that lane's maximum (a strict `>`), then takes the smallest index among
 * the lanes that hold the row's maximum: the first maximum overall. NaNs never win a `>`,
 * so a row with one is finished by the scalar scan instead. */
#include "radixlm_native.h"

/* the first NaN of x[0:n], or -1 */
static idx_t first_nan(const float *x, idx_t n) {
    for (idx_t i = 0; i < n; i++)
        if (x[i] != x[i]) return i;
    return -1;
}

/* the portable loop: first maximum, first NaN if any */
static idx_t argmax_scalar(const float *x, idx_t n) {
    idx_t best = 0;
    for (idx_t i = 1; i < n; i++) {
        if (x[i] != x[i]) return i;
        if (x[i] > x[best]) best = i;
    }
    return x[0] != x[0] ? 0 : best;
}

#if HAVE_X86
__attribute__((target("avx512f"))) static idx_t argmax_avx512(const float *x, idx_t n) {
    const __m512i step = _mm512_set1_epi32(16);
    __m512 best = _mm512_set1_ps(-INFINITY);
    __m512i at = _mm512_setzero_si512();
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __mmask16 nan = 0;
    idx_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __mmask16 up = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        best = _mm512_mask_mov_ps(best, up, v);
        at = _mm512_mask_mov_epi32(at, up, idx);
        idx = _mm512_add_epi32(idx, step);
    }
    if (i < n) { /* the tail: missing lanes read as -inf, which never wins */
        const __mmask16 live = (__mmask16)((1u << (n - i)) - 1);
        const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), live, x + i);
        const __mmask16 up = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        best = _mm512_mask_mov_ps(best, up, v);
        at = _mm512_mask_mov_epi32(at, up, idx);
    }
    if (nan) return first_nan(x, n);
    const float top = _mm512_reduce_max_ps(best);
    const __mmask16 holders = _mm512_cmp_ps_mask(best, _mm512_set1_ps(top), _CMP_EQ_OQ);
    /* every lane -inf (a row of -inf): element 0 is the first maximum */
    if (!holders) return 0;
    const int first = _mm512_mask_reduce_min_epi32(holders, at);
    return top == -INFINITY ? 0 : first;
}
#endif

DEFINE_CPU_SUPPORTED(1)

/* argmax_rows(x, out, rows, n, wide): out[r] = the first maximum's index of row r (int64);
   wide 0 runs the portable loop (what a CPU without AVX-512 runs), 1 the AVX-512 one where
   this CPU has it. */
static PyObject *py_argmax_rows(PyObject *UNUSED self, PyObject *const *args, Py_ssize_t nargs) {
    long long a[5];
    if (!parse_long_longs(args, nargs, 5, "argmax_rows", a)) return NULL;
    /* n < 2^31: the AVX-512 loop's indices are int32 lanes */
    if (!a[0] || !a[1] || a[2] < 0 || a[3] < 1 || a[3] >= (1LL << 31)) {
        PyErr_SetString(PyExc_ValueError, "argmax_rows: null pointer or bad size");
        return NULL;
    }
    const float *x = PTR(a[0]);
    int64_t *out = PTR(a[1]);
    const int wide = a[4] && cpu_has_avx512f();
    for (long long r = 0; r < a[2]; r++) {
        const float *row = x + r * a[3];
#if HAVE_X86
        out[r] = wide ? argmax_avx512(row, a[3]) : argmax_scalar(row, a[3]);
#else
        (void)wide;
        out[r] = argmax_scalar(row, a[3]);
#endif
    }
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS, "Whether this CPU can run the kernels: always."},
    {"argmax_rows", (PyCFunction)(void (*)(void))py_argmax_rows, METH_FASTCALL,
     "argmax_rows(x, out, rows, n, wide) -> None\n\n"
     "out[r] = index of the first maximum of row r (the first NaN if any); x float32\n"
     "[rows, n] contiguous, out int64 [rows]; wide 0: the portable loop."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(row_argmax, "The first maximum of each float32 row (row_argmax.c).")
