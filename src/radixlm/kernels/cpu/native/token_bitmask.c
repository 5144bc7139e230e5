/* Grammar bitmasks applied to float32 logits in place: logits[row, t] = -inf where bit t of
 * the row's mask is clear (bit t % 32 of int32 word t / 32).
 *
 * Why: a speculative verify masks k + 1 rows of a 49k vocabulary per request; torch's
 * reference widens every bit into an int32 (~0.15 ms a row), numpy's bit select still passes
 * over the row four times (~0.03 ms a row, more with the caches cold after a forward). Here the
 * AVX-512 loop stores -inf under each word's complement, 16 lanes a store, and reads the
 * logits not at all: 0.01 ms for one 49k row, 0.02 for 5 (thread CPU time, one Zen 4 core).
 *
 * Contract (kernels/cpu/token_bitmask.py's reference, apply_token_bitmask_ref): banned cells
 * hold -inf (its bits: 0xff800000), allowed cells are untouched; bits past the vocabulary are
 * ignored. Rows are distinct (the caller checks). */
#include "radixlm_native.h"

static void row_scalar(float *x, const int32_t *mask, idx_t vocab) {
    for (idx_t t = 0; t < vocab; t++)
        if (!(((uint32_t)mask[t >> 5] >> (t & 31)) & 1u)) x[t] = -INFINITY;
}

#if HAVE_X86
__attribute__((target("avx512f"))) static void row_avx512(float *x, const int32_t *mask,
                                                          idx_t vocab) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    idx_t w = 0;
    for (; 32 * w + 32 <= vocab; w++) {
        const uint32_t banned = ~(uint32_t)mask[w];
        if (!banned) continue;
        _mm512_mask_storeu_ps(x + 32 * w, (__mmask16)(banned & 0xffffu), ninf);
        _mm512_mask_storeu_ps(x + 32 * w + 16, (__mmask16)(banned >> 16), ninf);
    }
    if (32 * w < vocab) row_scalar(x + 32 * w, mask + w, vocab - 32 * w);
}
#endif

DEFINE_CPU_SUPPORTED(1)

/* apply_rows(x, mask, rows, num_rows, vocab, x_stride, mask_stride, wide): for r <
   num_rows, the row rows[r] of x (int64 rows; 0: row r) gets mask row r; strides in
   elements; wide 0 runs the portable loop (what a CPU without AVX-512 runs). */
static PyObject *py_apply_rows(PyObject *UNUSED self, PyObject *const *args, Py_ssize_t nargs) {
    long long a[8];
    if (!parse_long_longs(args, nargs, 8, "apply_rows", a)) return NULL;
    if (!a[0] || !a[1] || a[3] < 0 || a[4] < 0 || a[5] < a[4] || 32 * a[6] < a[4]) {
        PyErr_SetString(PyExc_ValueError, "apply_rows: null pointer or bad size");
        return NULL;
    }
    float *x = PTR(a[0]);
    const int32_t *mask = PTR(a[1]);
    const int64_t *rows = a[2] ? PTR(a[2]) : NULL;
    const int wide = a[7] && cpu_has_avx512f();
    for (long long r = 0; r < a[3]; r++) {
        float *row = x + (rows ? rows[r] : r) * a[5];
        const int32_t *m = mask + r * a[6];
#if HAVE_X86
        if (wide) {
            row_avx512(row, m, a[4]);
            continue;
        }
#endif
        (void)wide;
        row_scalar(row, m, a[4]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"supported", py_supported, METH_NOARGS, "Whether this CPU can run the kernels: always."},
    {"apply_rows", (PyCFunction)(void (*)(void))py_apply_rows, METH_FASTCALL,
     "apply_rows(x, mask, rows, num_rows, vocab, x_stride, mask_stride, wide) -> None\n\n"
     "x[rows[r], t] = -inf where bit t of mask row r is clear; x float32, mask int32,\n"
     "rows int64 (0: row r); strides in elements; wide 0: the portable loop."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(token_bitmask, "Grammar bitmasks applied to float32 logits (token_bitmask.c).")
