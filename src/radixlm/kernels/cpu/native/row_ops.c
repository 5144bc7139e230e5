/* The small per-token kernels of a decoder layer, for the few rows of a CPU decode step:
 * residual add + RMSNorm, rotary on the fused query/key heads, SiLU(gate) * up (and Gemma's
 * tanh-GELU(gate) * up, also run on prefill's rows: torch's took ~0.5 ms a layer), the KV store,
 * and decode attention over a short context read straight from the paged pool. float32
 * throughout.
 *
 * Why: at batch-1 decode each of these is a handful of torch calls on a few hundred floats,
 * and every torch call costs microseconds of dispatch while the arithmetic costs a fraction
 * of one; 30 layers times ~25 such calls was ~20% of a quantized step. One C call each
 * instead.
 *
 * Numbers: rotary and the store are bit-identical to the torch references (the same
 * roundings in the same order: each product rounded, then the sum; contraction into FMA is
 * prevented by computing each product in its own statement, and -std=c11 turns GCC's
 * contraction off). RMSNorm sums its squares in another order than torch (8 float32 lanes;
 * four rows' sums side by side, each in that order) and attention uses libm's expf and its
 * own summation order: ~1e-7 relative. SiLU's e^x is a polynomial of its own (exp_vec: ~1
 * ulp, vectorized), torch's is SLEEF's: ~1e-7; the tanh-GELU runs on the same e^x (~1e-7
 * relative to torch's tanh). On AVX-512 the two activations take row_ops_avx512.h's FMA
 * loops instead (~1e-7 from these).
 *
 * Plain C (the loops are written for the compiler to vectorize on the baseline ISA, and
 * compiled once more for AVX2 and AVX-512 where they are arithmetic: WIDE), so it runs on
 * any CPU; no -march; one run-time check, the activations' AVX-512. Tensors arrive as data pointers (Python
 * ints) from radixlm.kernels.cpu.row_ops, which owns the checks of shapes and dtypes; the
 * calls are METH_FASTCALL because at these sizes argument parsing is a visible part. */
#include "radixlm_native.h"
#define LANES 8 /* independent partial sums: vectorizable, and shorter dependency chains */

/* Wider vectors where the CPU has them, for the loops that are arithmetic rather than
 * dispatch (the SiLU's polynomial): GCC and Clang compile one copy per target and pick one
 * when the module loads (an ifunc: no run-time check of ours, no -march). */
#if HAVE_X86_LINUX
#define WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WIDE
#endif

#include "row_ops_norms.h" /* dot, the RMSNorm rows, add_rms_norm */

/* o = v * c + swap(v) * s for one head of dim, swap exchanging its halves: rotary_rows_ref's
 * roundings (two products, then their sum). */
static inline void rotate_head(const float *v, const float *c, const float *s, float *o,
                               idx_t dim) {
    idx_t half = dim / 2;
    for (idx_t i = 0; i < half; i++) {
        float a = v[i] * c[i];
        float b = v[i + half] * s[i];
        o[i] = a + b;
    }
    for (idx_t i = half; i < dim; i++) {
        float a = v[i] * c[i];
        float b = v[i - half] * s[i];
        o[i] = a + b;
    }
}

/* out[t, h] = rotate_head(x[t, h]) by row t of cos2 / sin2 [T, dim]. x's tokens are `stride`
 * floats apart (a view of the fused QKV rows), its heads contiguous; out is contiguous. */
WIDE static void rotary_rows(const float *x, idx_t stride, const float *cos2, const float *sin2,
                        float *out, idx_t tokens, idx_t heads, idx_t dim) {
    for (idx_t t = 0; t < tokens; t++)
        for (idx_t h = 0; h < heads; h++)
            rotate_head(x + t * stride + h * dim, cos2 + t * dim, sin2 + t * dim,
                        out + (t * heads + h) * dim, dim);
}

/* o = rotate_head(scale_row(v, w, inv)) for one head of dim, in one pass (each element's
 * normalized value computed where the rotation reads it: the same roundings as the two
 * loops through a buffer, no buffer) */
static inline void norm_rotate_head(const float *restrict v, const float *restrict w, float inv,
                                    const float *restrict c, const float *restrict s,
                                    float *restrict o, idx_t dim) {
    idx_t half = dim / 2;
    for (idx_t i = 0; i < half; i++) {
        float lo_scaled = v[i] * inv, hi_scaled = v[i + half] * inv;
        float lo = lo_scaled * w[i], hi = hi_scaled * w[i + half];
        float a = lo * c[i], b = hi * s[i];
        float a2 = hi * c[i + half], b2 = lo * s[i + half];
        o[i] = a + b;
        o[i + half] = a2 + b2;
    }
}

/* Qwen3 / Gemma 3's QK-norm then rotary, per head: q_out[t, h] (h < hq) and k_out[t, h - hq]
 * = rotate_head(norm_row(x[t, h], wq or wk)), the same arithmetic as add_rms_norm's rows then
 * rotary_rows (bit-identical), with no [T, Hq + Hkv, D] in between. The T * (Hq + Hkv) head
 * rows go four at a time (sumsq4) whatever their token. x as rotary_rows' (a view of the
 * fused QKV rows). */
WIDE static void qk_norm_rotary(const float *x, idx_t stride, const float *wq,
                                const float *wk, const float *cos2, const float *sin2,
                                float *q_out, float *k_out, idx_t tokens, idx_t hq, idx_t hkv,
                                idx_t dim, float eps) {
    const idx_t heads = hq + hkv, rows = tokens * heads;
    for (idx_t r0 = 0; r0 < rows; r0 += 4) {
        const float *src[4];
        for (int i = 0; i < 4; i++) { /* past the last row: the first again (discarded) */
            const idx_t r = r0 + i < rows ? r0 + i : r0;
            src[i] = x + (r / heads) * stride + (r % heads) * dim;
        }
        float sums[4];
        sumsq4(src, dim, sums);
        for (idx_t r = r0; r < rows && r < r0 + 4; r++) {
            const idx_t t = r / heads, h = r % heads;
            float *o = h < hq ? q_out + (t * hq + h) * dim : k_out + (t * hkv + h - hq) * dim;
            norm_rotate_head(src[r - r0], h < hq ? wq : wk, inv_rms(sums[r - r0], dim, eps),
                             cos2 + t * dim, sin2 + t * dim, o, dim);
        }
    }
}

/* e^x for the SiLU, written so that the compiler vectorizes it (libm's expf is a call per
 * element): x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to degree 7
 * (truncation < 1e-8 relative), 2^n built in the exponent bits. Inputs are clamped to
 * [-87, 88], where 2^n stays a normal float; SiLU's x / (1 + e^-x) is then -0 or x anyway. */
static inline float exp_vec(float x) {
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,
                ln2_lo = 1.428606765330187e-06f, round = 12582912.0f; /* 1.5 * 2^23 */
    x = x > 88.0f ? 88.0f : x;
    x = x < -87.0f ? -87.0f : x;
    float n = (x * log2e + round) - round; /* x / ln2 to the nearest integer */
    float r = (x - n * ln2_hi) - n * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* out[t, i] = silu(x[t, i]) * x[t, inter + i]: the gate and up halves of the fused
 * projection's rows [T, 2 * inter]; out [T, inter]. */
WIDE static void silu_mul(const float *x, float *out, idx_t tokens, idx_t inter) {
    for (idx_t t = 0; t < tokens; t++) {
        const float *gate = x + t * 2 * inter, *up = gate + inter;
        float *o = out + t * inter;
        for (idx_t i = 0; i < inter; i++) {
            float silu = gate[i] / (1.0f + exp_vec(-gate[i]));
            o[i] = silu * up[i];
        }
    }
}

/* out[t, i] = gelu_tanh(x[t, i]) * x[t, inter + i] (Gemma's gelu_pytorch_tanh), rows as
 * silu_mul's. torch's 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), rewritten as
 * x / (1 + e^(-2u)) (the same function: 1 + tanh(u) = 2 / (1 + e^(-2u))) so that it costs one
 * exp_vec and no cancellation near u = 0; far negative x gives -0 or a denormal-small value
 * where torch's tanh saturates to 0. */
WIDE static void gelu_tanh_mul(const float *x, float *out, idx_t tokens, idx_t inter) {
    const float beta2 = 2.0f * 0.7978845608028654f, kappa = 0.044715f; /* 2 sqrt(2 / pi) */
    for (idx_t t = 0; t < tokens; t++) {
        const float *gate = x + t * 2 * inter, *up = gate + inter;
        float *o = out + t * inter;
        for (idx_t i = 0; i < inter; i++) {
            float g = gate[i];
            float inner = g + kappa * g * g * g;
            float gelu = g / (1.0f + exp_vec(-beta2 * inner));
            o[i] = gelu * up[i];
        }
    }
}

/* One request's decode attention: q [Hq, D] over the keys/values at slots[0..len) of the
 * flat pools [S, Hkv, D] (only the last `window` when window > 0); out [Hq, D]. Query head h
 * reads KV head h / (Hq / Hkv). scores: scratch of len floats.
 *
 * prior_lse non-NULL (cascade): out arrives holding the normalized attention of q over other
 * keys (a group's shared prefix) and prior_lse [Hq] its log-sum-exp (-inf: no key); the
 * result is the attention over both key sets, merged as merge_partial does: the prior part
 * weighs exp(lse - top) against this part's exp(s_j - top). */
WIDE static void attend_one(const float *q, const float *k_pool, const float *v_pool,
                       const int64_t *slots, idx_t len, idx_t hq, idx_t hkv, idx_t dim,
                       float sm_scale, float logit_cap, idx_t window, float *scores,
                       const float *prior_lse, float *out) {
    idx_t first = window > 0 && len > window ? len - window : 0;
    idx_t group = hq / hkv, row = hkv * dim;
    for (idx_t h = 0; h < hq; h++) {
        idx_t g = h / group;
        const float *qh = q + h * dim;
        float top = prior_lse ? prior_lse[h] : -INFINITY;
        for (idx_t j = first; j < len; j++) {
            float s = dot(qh, k_pool + slots[j] * row + g * dim, dim) * sm_scale;
            if (logit_cap > 0.0f) s = logit_cap * tanhf(s / logit_cap);
            scores[j] = s;
            if (s > top) top = s;
        }
        /* the prior part's weight; 0 without one (or when it saw no key: lse -inf) */
        float prior = prior_lse && prior_lse[h] > -INFINITY ? expf(prior_lse[h] - top) : 0.0f;
        float total = prior;
        for (idx_t j = first; j < len; j++) {
            scores[j] = expf(scores[j] - top);
            total += scores[j];
        }
        float *o = out + h * dim;
        for (idx_t i = 0; i < dim; i++) o[i] = prior > 0.0f ? o[i] * prior : 0.0f;
        for (idx_t j = first; j < len; j++) {
            const float *vj = v_pool + slots[j] * row + g * dim;
            float p = scores[j];
            for (idx_t i = 0; i < dim; i++) o[i] += p * vj[i];
        }
        float inv = 1.0f / total;
        for (idx_t i = 0; i < dim; i++) o[i] *= inv;
    }
}

/* ---- the Python side: every argument an int (pointers, sizes) or a float ---- */

static int args_ok(Py_ssize_t got, Py_ssize_t want, const char *name) {
    if (got == want) return 1;
    PyErr_Format(PyExc_TypeError, "%s: expected %zd arguments, got %zd", name, want, got);
    return 0;
}

/* ints[i] = args[i] as an integer, for the first n arguments; 0 with an error set if not */
static int as_ints(PyObject *const *args, Py_ssize_t n, long long *ints) {
    for (Py_ssize_t i = 0; i < n; i++) {
        ints[i] = PyLong_AsLongLong(args[i]);
        if (ints[i] == -1 && PyErr_Occurred()) return 0;
    }
    return 1;
}

/* n integers then a float eps, the norms' arguments: ints[0..n-1] and *eps; 0 with an error
   set if the count or a type is wrong */
static int ints_then_eps(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t n,
                         const char *name, long long *ints, double *eps) {
    if (!args_ok(nargs, n + 1, name) || !as_ints(args, n, ints)) return 0;
    *eps = PyFloat_AsDouble(args[n]);
    return !(*eps == -1.0 && PyErr_Occurred());
}

static PyObject *py_add_rms_norm(PyObject *UNUSED self, PyObject *const *args, Py_ssize_t nargs) {
    long long a[7];
    double eps;
    if (!ints_then_eps(args, nargs, 7, "add_rms_norm", a, &eps)) return NULL;
    if (!a[0] || !a[2] || !a[3] || (a[1] && !a[4]) || a[5] < 0 || a[6] < 1) {
        PyErr_SetString(PyExc_ValueError, "add_rms_norm: null pointer or bad size");
        return NULL;
    }
    add_rms_norm(PTR(a[0]), PTR(a[1]), PTR(a[2]), PTR(a[3]), PTR(a[4]), a[5], a[6],
                 (float)eps);
    Py_RETURN_NONE;
}

/* norm_add_rms_norm(x, w1, residual, w2, out, summed, rows, n, eps) */
static PyObject *py_norm_add_rms_norm(PyObject *UNUSED self, PyObject *const *args,
                                      Py_ssize_t nargs) {
    long long a[8];
    double eps;
    if (!ints_then_eps(args, nargs, 8, "norm_add_rms_norm", a, &eps)) return NULL;
    if (!a[0] || !a[1] || !a[2] || !a[3] || !a[4] || !a[5] || a[6] < 0 || a[7] < 1) {
        PyErr_SetString(PyExc_ValueError, "norm_add_rms_norm: null pointer or bad size");
        return NULL;
    }
    norm_add_rms_norm(PTR(a[0]), PTR(a[1]), PTR(a[2]), PTR(a[3]), PTR(a[4]), PTR(a[5]), a[6],
                      a[7], (float)eps);
    Py_RETURN_NONE;
}

static PyObject *py_rotary_rows(PyObject *UNUSED self, PyObject *const *args, Py_ssize_t nargs) {
    long long a[8];
    if (!args_ok(nargs, 8, "rotary_rows") || !as_ints(args, 8, a)) return NULL;
    if (!a[0] || !a[2] || !a[3] || !a[4] || a[5] < 0 || a[6] < 0 || a[7] < 2 || a[7] % 2 ||
        a[1] < a[6] * a[7]) {
        PyErr_SetString(PyExc_ValueError, "rotary_rows: null pointer or bad size");
        return NULL;
    }
    rotary_rows(PTR(a[0]), a[1], PTR(a[2]), PTR(a[3]), PTR(a[4]), a[5], a[6], a[7]);
    Py_RETURN_NONE;
}

/* (x, out, tokens, inter) of an activation * up kernel, checked; 0 with an error set */
static int act_mul_args(PyObject *const *args, Py_ssize_t nargs, const char *name,
                        long long a[4]) {
    if (!args_ok(nargs, 4, name) || !as_ints(args, 4, a)) return 0;
    if (!a[0] || !a[1] || a[2] < 0 || a[3] < 1) {
        PyErr_Format(PyExc_ValueError, "%s: null pointer or bad size", name);
        return 0;
    }
    return 1;
}

#if HAVE_X86
#include "row_ops_avx512.h"

/* 1 where the activations take row_ops_avx512.h's loops (this CPU has AVX-512 F) */
static int act_avx512(void) {
    static int has = -1;
    if (has < 0) has = CPU_HAS("avx512f") ? 1 : 0;
    return has;
}
#endif

static PyObject *py_silu_mul(PyObject *UNUSED self, PyObject *const *args, Py_ssize_t nargs) {
    long long a[4];
    if (!act_mul_args(args, nargs, "silu_mul", a)) return NULL;
#if HAVE_X86
    if (act_avx512()) {
        silu_mul_avx512(PTR(a[0]), PTR(a[1]), a[2], a[3]);
        Py_RETURN_NONE;
    }
#endif
    silu_mul(PTR(a[0]), PTR(a[1]), a[2], a[3]);
    Py_RETURN_NONE;
}

static PyObject *py_gelu_tanh_mul(PyObject *UNUSED self, PyObject *const *args,
                                  Py_ssize_t nargs) {
    long long a[4];
    if (!act_mul_args(args, nargs, "gelu_tanh_mul", a)) return NULL;
#if HAVE_X86
    if (act_avx512()) {
        gelu_tanh_mul_avx512(PTR(a[0]), PTR(a[1]), a[2], a[3]);
        Py_RETURN_NONE;
    }
#endif
    gelu_tanh_mul(PTR(a[0]), PTR(a[1]), a[2], a[3]);
    Py_RETURN_NONE;
}

/* qk_norm_rotary(x, stride, wq, wk, cos2, sin2, q_out, k_out, tokens, hq, hkv, dim, eps) */
static PyObject *py_qk_norm_rotary(PyObject *UNUSED self, PyObject *const *args,
                                   Py_ssize_t nargs) {
    long long a[12];
    double eps;
    if (!ints_then_eps(args, nargs, 12, "qk_norm_rotary", a, &eps)) return NULL;
    long long tokens = a[8], hq = a[9], hkv = a[10], dim = a[11];
    if (!a[0] || !a[2] || !a[3] || !a[4] || !a[5] || !a[6] || !a[7] || tokens < 0 || hq < 1 ||
        hkv < 1 || dim < 2 || dim % 2 || a[1] < (hq + hkv) * dim) {
        PyErr_SetString(PyExc_ValueError, "qk_norm_rotary: null pointer or bad size");
        return NULL;
    }
    qk_norm_rotary(PTR(a[0]), a[1], PTR(a[2]), PTR(a[3]), PTR(a[4]), PTR(a[5]), PTR(a[6]),
                   PTR(a[7]), tokens, hq, hkv, dim, (float)eps);
    Py_RETURN_NONE;
}

/* store_kv(k_pool, v_pool, num_slots, slots, k, v, tokens, row[, k_stride, v_stride]):
 * pool[slots[t]] = new[t], rows of `row` floats, new token t at k + t * k_stride (default
 * `row`: contiguous; a wider stride reads the rows in place, as v's in the fused QKV
 * projection); a slot outside [0, num_slots) raises IndexError before any write. */
static PyObject *py_store_kv(PyObject *UNUSED self, PyObject *const *args, Py_ssize_t nargs) {
    long long a[10];
    if (nargs != 10 && !args_ok(nargs, 8, "store_kv")) return NULL;
    if (!as_ints(args, nargs, a)) return NULL;
    if (nargs == 8) a[8] = a[9] = a[7];
    if (!a[0] || !a[1] || !a[3] || !a[4] || !a[5] || a[6] < 0 || a[7] < 1 || a[8] < a[7] ||
        a[9] < a[7]) {
        PyErr_SetString(PyExc_ValueError, "store_kv: null pointer or bad size");
        return NULL;
    }
    const int64_t *slots = PTR(a[3]);
    for (long long t = 0; t < a[6]; t++)
        if (slots[t] < 0 || slots[t] >= a[2]) {
            PyErr_Format(PyExc_IndexError, "store_kv: slot %lld outside the pool of %lld",
                         (long long)slots[t], a[2]);
            return NULL;
        }
    size_t bytes = (size_t)a[7] * sizeof(float);
    for (long long t = 0; t < a[6]; t++) {
        memcpy((float *)PTR(a[0]) + slots[t] * a[7], (const float *)PTR(a[4]) + t * a[8], bytes);
        memcpy((float *)PTR(a[1]) + slots[t] * a[7], (const float *)PTR(a[5]) + t * a[9], bytes);
    }
    Py_RETURN_NONE;
}

/* decode_attention(q, k_pool, v_pool, num_slots, indptr, indices, num_indices, out, batch,
 * hq, hkv, dim, window, prior_lse, sm_scale, logit_cap): request b attends the slots
 * indices[indptr[b]:indptr[b+1]]; every index and slot is checked before any work.
 * prior_lse (0: none) [B, Hq]: out holds a partial attention over other keys to merge with
 * (see attend_one). */
static PyObject *py_decode_attention(PyObject *UNUSED self, PyObject *const *args,
                                     Py_ssize_t nargs) {
    long long a[14];
    if (!args_ok(nargs, 16, "decode_attention") || !as_ints(args, 14, a)) return NULL;
    double sm_scale = PyFloat_AsDouble(args[14]), cap = PyFloat_AsDouble(args[15]);
    const float *prior_lse = PTR(a[13]);
    if (PyErr_Occurred()) return NULL;
    const int64_t *indptr = PTR(a[4]), *indices = PTR(a[5]);
    long long num_indices = a[6], batch = a[8], hq = a[9], hkv = a[10], dim = a[11];
    if (!a[0] || !a[1] || !a[2] || !indptr || !indices || !a[7] || batch < 0 || hkv < 1 ||
        dim < 1 || hq % hkv || (batch > 0 && (indptr[0] < 0 || indptr[batch] > num_indices))) {
        PyErr_SetString(PyExc_ValueError, "decode_attention: null pointer or bad size");
        return NULL;
    }
    idx_t longest;
    if (!check_decode_slots(indptr, indices, batch, a[3], &longest)) return NULL;
    float *scores = malloc((size_t)(longest > 0 ? longest : 1) * sizeof(float));
    if (!scores) return PyErr_NoMemory();
    /* The longest call of the set (up to ~0.5 ms a layer): without the GIL, as torch's ops
     * and the GEMVs run, so the grammar compiler's worker computes masks meanwhile. The
     * short calls keep it: releasing costs more than they take. */
    Py_BEGIN_ALLOW_THREADS
    for (long long b = 0; b < batch; b++)
        attend_one((const float *)PTR(a[0]) + b * hq * dim, PTR(a[1]), PTR(a[2]),
                   indices + indptr[b], indptr[b + 1] - indptr[b], hq, hkv, dim,
                   (float)sm_scale, (float)cap, a[12], scores,
                   prior_lse ? prior_lse + b * hq : NULL, (float *)PTR(a[7]) + b * hq * dim);
    Py_END_ALLOW_THREADS
    free(scores);
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"add_rms_norm", (PyCFunction)(void (*)(void))py_add_rms_norm, METH_FASTCALL,
     "add_rms_norm(x, residual, weight, out, summed, rows, n, eps) -> None\n\n"
     "summed = x + residual (residual 0: none, summed unused), out = RMSNorm(summed) * weight;\n"
     "float32 [rows, n] contiguous, weight [n]."},
    {"norm_add_rms_norm", (PyCFunction)(void (*)(void))py_norm_add_rms_norm, METH_FASTCALL,
     "norm_add_rms_norm(x, w1, residual, w2, out, summed, rows, n, eps) -> None\n\n"
     "summed = RMSNorm(x) * w1 + residual, out = RMSNorm(summed) * w2 (Gemma 3's sandwich);\n"
     "float32 [rows, n] contiguous, w1 / w2 [n]."},
    {"rotary_rows", (PyCFunction)(void (*)(void))py_rotary_rows, METH_FASTCALL,
     "rotary_rows(x, stride, cos2, sin2, out, tokens, heads, dim) -> None\n\n"
     "out = x * cos2 + swap_halves(x) * sin2; x [T, H, D] (tokens `stride` floats apart),\n"
     "out [T, H, D], cos2/sin2 [T, D] float32."},
    {"silu_mul", (PyCFunction)(void (*)(void))py_silu_mul, METH_FASTCALL,
     "silu_mul(x, out, tokens, inter) -> None\n\n"
     "out = silu(x[:, :inter]) * x[:, inter:]; x float32 [T, 2 * inter], out [T, inter]."},
    {"qk_norm_rotary", (PyCFunction)(void (*)(void))py_qk_norm_rotary, METH_FASTCALL,
     "qk_norm_rotary(x, stride, wq, wk, cos2, sin2, q_out, k_out, tokens, hq, hkv, dim, eps)\n"
     "-> None\n\n"
     "q_out [T, hq, dim] / k_out [T, hkv, dim] = rotary(RMSNorm(head) * wq / wk) of the heads\n"
     "x [T, hq + hkv, dim] (tokens `stride` floats apart); cos2/sin2 [T, dim] float32."},
    {"gelu_tanh_mul", (PyCFunction)(void (*)(void))py_gelu_tanh_mul, METH_FASTCALL,
     "gelu_tanh_mul(x, out, tokens, inter) -> None\n\n"
     "out = gelu_tanh(x[:, :inter]) * x[:, inter:]; x float32 [T, 2 * inter], out [T, inter]."},
    {"store_kv", (PyCFunction)(void (*)(void))py_store_kv, METH_FASTCALL,
     "store_kv(k_pool, v_pool, num_slots, slots, k, v, tokens, row[, k_stride, v_stride])\n"
     "-> None\n\n"
     "pool[slots[t]] = new[t] for rows of `row` float32 (new token t at k + t * k_stride,\n"
     "default row); slots int64 [tokens]."},
    {"decode_attention", (PyCFunction)(void (*)(void))py_decode_attention, METH_FASTCALL,
     "decode_attention(q, k_pool, v_pool, num_slots, indptr, indices, num_indices, out,\n"
     "batch, hq, hkv, dim, window, prior_lse, sm_scale, logit_cap) -> None\n\n"
     "Softmax attention of q [B, Hq, D] over each request's slots (int64 indptr [B+1],\n"
     "indices) of the flat pools [num_slots, Hkv, D]; out [B, Hq, D] float32. prior_lse\n"
     "(0: none) [B, Hq]: out holds a partial attention over other keys, merged into."},
    {NULL, NULL, 0, NULL},
};

DEFINE_MODULE(row_ops, "A decoder layer's per-token kernels for few rows, float32 (row_ops.c).")
