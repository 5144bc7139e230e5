/* What every native kernel module of radixlm.kernels.cpu.native shares, included first by
 * each .c here (setup.py lists it in every module's `depends`; MANIFEST.in ships it).
 *
 * - the includes: CPython, the C library, and on x86-64 with GCC or Clang the intrinsics
 *   (HAVE_X86); HAVE_X86_LINUX where AMX's tile state can also be asked of the kernel;
 * - idx_t, INLINE, PTR, UNUSED: sizes, forced inlining, data pointers passed as Python ints,
 *   an entry point's unused `self`;
 * - CPU_HAS: one feature of this CPU, checked at run time (no -march: the modules run on any
 *   x86-64 and say which kernels this CPU can use), and cpu_check, an entry's refusal to run
 *   on a CPU without them;
 * - with RADIXLM_NATIVE_AMX defined before the include (the AMX modules only, so a compiler
 *   without AMX support still builds the others): load_tile_config, and amx_permission(),
 *   the arch_prctl asking Linux for this process's use of the tile state;
 * - argument checks two or more modules share (GEMM/GEMV sizes and pointers, decode
 *   attention's requests and slots, a fast call's int arguments), cpu_has_avx512f, and
 *   WITHOUT_GIL, a call with the GIL released;
 * - the module definition: DEFINE_CPU_SUPPORTED / DEFINE_SUPPORTED (`supported()`) and
 *   DEFINE_MODULE (the PyModuleDef and PyInit_<name>).
 *
 * Header-only: functions are static inline (no unused-function warning where a module
 * does not call one) and compute nothing of any kernel. */
#ifndef RADIXLM_NATIVE_H
#define RADIXLM_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86 1
#include <immintrin.h>
#else
#define HAVE_X86 0
#endif

#if HAVE_X86 && defined(__linux__)
#define HAVE_X86_LINUX 1
#include <cpuid.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define HAVE_X86_LINUX 0
#endif

typedef ptrdiff_t idx_t; /* sizes and offsets: 64-bit wherever pointers are */

#define PTR(v) ((void *)(uintptr_t)(v)) /* a data pointer that came in as a Python int */
#if defined(__GNUC__) || defined(__clang__)
#define UNUSED __attribute__((unused)) /* an entry point's `self`, a METH_NOARGS's `noargs` */
#else
#define UNUSED
#endif

#if HAVE_X86
#define INLINE static inline __attribute__((always_inline))

/* Whether this CPU has `feature` (a string literal, as __builtin_cpu_supports takes it),
 * after the initialisation the builtin needs; never where the kernels were not compiled. */
#define CPU_HAS(feature) (__builtin_cpu_init(), __builtin_cpu_supports(feature))
#else
#define CPU_HAS(feature) 0
#endif

/* 1 when `supported` (the module's cpu_supported()), else 0 with RuntimeError(message) set:
 * each entry's check of this CPU before any work. */
static inline int cpu_check(int supported, const char *message) {
    if (!supported) PyErr_SetString(PyExc_RuntimeError, message);
    return supported;
}

#if defined(RADIXLM_NATIVE_AMX) && HAVE_X86_LINUX
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* ldtilecfg's 64-byte operand. */
typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config_t;

/* Loads palette 1 with the eight tiles' rows (rows[t] for tile t), each row 64 bytes. */
static inline __attribute__((target("amx-tile"))) void load_tile_config(const uint8_t rows[8]) {
    tile_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.rows[i] = rows[i];
        cfg.colsb[i] = 64;
    }
    _tile_loadconfig(&cfg);
}

/* Asks Linux for this process's leave to use AMX's tile state: 1 when granted. */
static inline int amx_permission(void) {
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

/* A GEMM or GEMV entry's own sanity (the launcher checks the tensors): M, N, K >= 1, the
 * prefetch distance (0 where there is none) >= 0, no null data pointer (`any_null`). 1, or
 * 0 with a ValueError whose message begins with `name`. */
static inline int check_gemm_args(const char *name, long long M, long long N, long long K,
                                  long long prefetch, int any_null) {
    if (M < 1 || N < 1 || K < 1) {
        PyErr_Format(PyExc_ValueError, "%s: M, N and K must be >= 1, got %lld, %lld, %lld",
                     name, M, N, K);
        return 0;
    }
    if (prefetch < 0) {
        PyErr_Format(PyExc_ValueError, "%s: prefetch must be >= 0 bytes, got %lld", name,
                     prefetch);
        return 0;
    }
    if (any_null) {
        PyErr_Format(PyExc_ValueError, "%s: a data pointer is null", name);
        return 0;
    }
    return 1;
}

/* float32 x, w, out (data pointers) then M, N, K and, where `format` has a fourth size
 * (f32_gemv's "KKKLLLL:gemv"), the prefetch distance: parsed and checked into ptrs[3] and
 * sizes[4] (sizes[3] = 0 without it). 1, or 0 with an error set. */
static inline int parse_float_gemm(PyObject *args, const char *format, const char *name,
                                   float **ptrs, long long *sizes) {
    unsigned long long x, w, out;
    sizes[3] = 0;
    if (!PyArg_ParseTuple(args, format, &x, &w, &out, &sizes[0], &sizes[1], &sizes[2],
                          &sizes[3]))
        return 0;
    if (!check_gemm_args(name, sizes[0], sizes[1], sizes[2], sizes[3], !x || !w || !out))
        return 0;
    ptrs[0] = PTR(x);
    ptrs[1] = PTR(w);
    ptrs[2] = PTR(out);
    return 1;
}

/* decode_attention's checks of the requests before any work (both modules that offer it):
 * each request b has a KV token (indptr[b + 1] > indptr[b]) and every slot of
 * indices[indptr[0]:indptr[batch]] lies in [0, num_slots). 1 with *longest the longest
 * request (0 for no request), or 0 with a ValueError or IndexError set. */
static inline int check_decode_slots(const int64_t *indptr, const int64_t *indices,
                                     long long batch, long long num_slots, idx_t *longest) {
    *longest = 0;
    for (long long b = 0; b < batch; b++) {
        const idx_t len = indptr[b + 1] - indptr[b];
        if (len < 1) {
            PyErr_Format(PyExc_ValueError, "decode_attention: request %lld has no KV token", b);
            return 0;
        }
        if (len > *longest) *longest = len;
    }
    for (idx_t j = batch > 0 ? indptr[0] : 0; batch > 0 && j < indptr[batch]; j++)
        if (indices[j] < 0 || indices[j] >= num_slots) {
            PyErr_Format(PyExc_IndexError, "decode_attention: slot %lld outside the pool of %lld",
                         (long long)indices[j], num_slots);
            return 0;
        }
    return 1;
}

/* A METH_FASTCALL entry's `expected` int arguments into out[]: 1, or 0 with the error set
 * (another count, or an argument that is no int). */
static inline int parse_long_longs(PyObject *const *args, Py_ssize_t nargs, int expected,
                                   const char *name, long long *out) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s: expected %d arguments, got %zd", name, expected,
                     nargs);
        return 0;
    }
    for (int k = 0; k < expected; k++) {
        out[k] = PyLong_AsLongLong(args[k]);
        if (out[k] == -1 && PyErr_Occurred()) return 0;
    }
    return 1;
}

/* Whether this CPU runs AVX-512F (0 where the intrinsics were not compiled). */
static inline int cpu_has_avx512f(void) {
#if HAVE_X86
    return CPU_HAS("avx512f");
#else
    return 0;
#endif
}

/* `call` (one statement that touches no Python object) with the GIL released. */
#define WITHOUT_GIL(call)                                                                    \
    do {                                                                                     \
        Py_BEGIN_ALLOW_THREADS call;                                                         \
        Py_END_ALLOW_THREADS                                                                 \
    } while (0)

/* py_supported, the module's `supported()`: its cpu_supported() (0 where the kernels were
 * not compiled) as a bool. */
#define DEFINE_SUPPORTED                                                                     \
    static PyObject *py_supported(PyObject *UNUSED self, PyObject *UNUSED noargs) {          \
        return PyBool_FromLong(cpu_supported());                                             \
    }

/* cpu_supported() as the CPU_HAS test `features`, and py_supported over it. */
#define DEFINE_CPU_SUPPORTED(features)                                                       \
    static int cpu_supported(void) { return features; }                                      \
    DEFINE_SUPPORTED

/* The module `name` (an identifier: its PyInit_<name>) with docstring `doc` and the
 * methods of its METHODS table. */
#define DEFINE_MODULE(name, doc)                                                             \
    static struct PyModuleDef MODULE = {                                                     \
        PyModuleDef_HEAD_INIT, .m_name = #name, .m_doc = doc, .m_size = -1,                  \
        .m_methods = METHODS,                                                                \
    };                                                                                       \
    PyMODINIT_FUNC PyInit_##name(void) { return PyModule_Create(&MODULE); }

#endif /* RADIXLM_NATIVE_H */
