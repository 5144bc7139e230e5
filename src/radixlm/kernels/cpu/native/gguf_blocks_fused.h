/* gemm_fused: the pieces of one fused linear (q|k|v, gate|up: matrices sharing the input)
 * in one call of gguf_blocks.c (its only includer, after run_gemm's parts). The activation
 * rows are quantized once per block size the pieces use (32 and/or 256), not once per
 * piece; each piece's rows go to their columns of one output y [rows, width] (width = the
 * pieces' rows together), to dest[off + r] for row r of a piece that starts at off when a
 * destination table is given (llama's permuted q/k rows put back in Hugging Face order:
 * no separate gather), else to off + r (the concatenation). The products are gemm's (with
 * its tiled choice, the pieces' own), so every value is bit-equal to the piece's own gemm
 * call. dest comes checked from
 * kernels/cpu/gguf_blocks_fused.py (a permutation of [0, width)). */
#ifndef RADIXLM_GGUF_BLOCKS_FUSED_H
#define RADIXLM_GGUF_BLOCKS_FUSED_H

#define MAX_PIECES 8
enum { PIECE_RAW, PIECE_STRIDE, PIECE_ROWS, PIECE_TYPE, PIECE_FIELDS };

/* pieces int64 [count][PIECE_FIELDS]; prep[0] for blocks of 32, prep[1] of 256; tmp
   [rows, the largest piece's rows] holds a piece's result before it is placed */
static void run_fused(const int64_t *pieces, int count, idx_t k, const float *x, idx_t rows,
                      float *y, idx_t width, const int32_t *dest, int vnni, int tiled,
                      Prep *prep, float *tmp) {
    int need[2] = {0, 0};
    for (int i = 0; i < count; i++) need[ELEMS[pieces[i * PIECE_FIELDS + PIECE_TYPE]] == 256] = 1;
    for (int e = 0; e < 2; e++)
        if (need[e]) prepare_rows(x, rows, k, e ? 256 : 32, vnni, prep + e);
    idx_t off = 0;
    for (int i = 0; i < count; i++) {
        const int64_t *pc = pieces + i * PIECE_FIELDS;
        const idx_t n = pc[PIECE_ROWS];
        const int type = (int)pc[PIECE_TYPE], direct = count == 1 && !dest;
        float *out = direct ? y : tmp;
        gemm_passes(PTR(pc[PIECE_RAW]), pc[PIECE_STRIDE], n, k, type, rows, out, vnni, tiled,
                    prep + (ELEMS[type] == 256));
        for (idx_t m = 0; m < rows && !direct; m++)
            for (idx_t r = 0; r < n; r++)
                y[m * width + (dest ? dest[off + r] : off + r)] = tmp[m * n + r];
        off += n;
    }
    nan_rows(prep + (need[0] ? 0 : 1), rows, width, y);
}

/* gemm_fused(pieces, count, k, x, rows, y, width, dest, vnni[, tiled]): pieces a pointer to
   int64 [count][4] (raw pointer, row stride, rows, type id), x f32 [rows, k] -> y f32
   [rows, width]; dest 0 or a pointer to int32 [width]; tiled as gemm's (default True) */
static PyObject *py_gemm_fused(PyObject *UNUSED self, PyObject *args) {
    unsigned long long pieces_ptr, x, y, dest;
    Py_ssize_t k, rows, width;
    int count, vnni, tiled = 1;
    if (!PyArg_ParseTuple(args, "KinKnKnKp|p", &pieces_ptr, &count, &k, &x, &rows, &y, &width,
                          &dest, &vnni, &tiled))
        return NULL;
    const int64_t *pieces = PTR(pieces_ptr);
    if (!pieces || count < 1 || count > MAX_PIECES || rows < 1 || !x || !y) {
        PyErr_SetString(PyExc_ValueError, "gguf_blocks.gemm_fused: need 1 to 8 pieces, "
                        "rows >= 1 and non-null pointers");
        return NULL;
    }
    idx_t total = 0, widest = 0;
    for (int i = 0; i < count; i++) {
        const int64_t *pc = pieces + i * PIECE_FIELDS;
        if (!check_args(pc[PIECE_STRIDE], pc[PIECE_ROWS], k, (int)pc[PIECE_TYPE], vnni))
            return NULL;
        if (!pc[PIECE_RAW]) {
            PyErr_SetString(PyExc_ValueError, "gguf_blocks.gemm_fused: a null piece");
            return NULL;
        }
        total += pc[PIECE_ROWS];
        widest = pc[PIECE_ROWS] > widest ? pc[PIECE_ROWS] : widest;
    }
    if (total != width) {
        PyErr_SetString(PyExc_ValueError, "gguf_blocks.gemm_fused: width != the pieces' rows");
        return NULL;
    }
    Prep prep[2];
    char *work = prep_alloc(prep, rows, k, 32, (size_t)(rows * widest));
    char *work256 = work ? prep_alloc(prep + 1, rows, k, 32, 0) : NULL;
    if (!work256) {
        free(work);
        return PyErr_NoMemory();
    }
    float *tmp = (float *)(((uintptr_t)(prep[0].finite + rows) + 63) & ~(uintptr_t)63);
    WITHOUT_GIL(run_fused(pieces, count, k, PTR(x), rows, PTR(y), width, PTR(dest), vnni, tiled,
                          prep, tmp));
    free(work256);
    free(work);
    Py_RETURN_NONE;
}

#endif /* RADIXLM_GGUF_BLOCKS_FUSED_H */
