/*
 * scan.c — SCAN: cumulative sum or product along an axis, in order
 * from index 0, in the dtype itself.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* SCAN (issue 25): walk every line along the axis (all the other
 * indices, odometer order) and accumulate in order from index 0, in the
 * dtype itself (as NumPy's cumsum/cumprod of that dtype). */
static int kiln_interp_scan(const kiln_interp_run *r)
{
    const kiln_view *x = &r->call->inputs[0], *y = &r->call->outputs[0];
    int rank = y->rank, axis = r->k->axis;
    for (int d = 0; d < rank; d++)
        if (x->shape[d] != y->shape[d]) {
            char b1[160], b2[160];
            return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: input has shape "
                                    "%s, output %s", r->label,
                                    kiln_interp_shape_str(b1, sizeof b1,
                                                          x->rank, x->shape),
                                    kiln_interp_shape_str(b2, sizeof b2,
                                                          y->rank, y->shape));
        }
    int64_t len = y->shape[axis], sx = x->strides[axis], sy = y->strides[axis];
    int64_t idx[KILN_MAX_RANK] = {0};
    for (int d = 0; d < rank; d++)
        if (y->shape[d] == 0)
            return 0;
    int prod = r->k->reduce_op == KILN_REDUCE_PROD;
    for (;;) {
        int64_t ox = 0, oy = 0;
        for (int d = 0; d < rank; d++) {
            ox += idx[d] * x->strides[d];
            oy += idx[d] * y->strides[d];
        }
#define KILN_INTERP_SCAN(T)                                                   \
        do {                                                                  \
            const T *xs = (const T *)x->data + ox;                            \
            T *ys = (T *)y->data + oy;                                        \
            T acc = prod ? (T)1 : (T)0;                                       \
            for (int64_t i = 0; i < len; i++) {                               \
                T v = xs[i * sx];                                             \
                /* integers wrap as NumPy's do, without C's overflow UB */   \
                if (prod)                                                     \
                    acc = KILN_INTERP_SCAN_MUL(T, acc, v);                    \
                else                                                          \
                    acc = KILN_INTERP_SCAN_ADD(T, acc, v);                    \
                ys[i * sy] = acc;                                             \
            }                                                                 \
        } while (0)
#define KILN_INTERP_SCAN_ADD(T, a, b) ((T)(a) + (T)(b))
#define KILN_INTERP_SCAN_MUL(T, a, b) ((T)(a) * (T)(b))
        switch (y->dtype) {
        case KILN_F64: KILN_INTERP_SCAN(double); break;
        case KILN_F32: KILN_INTERP_SCAN(float); break;
        default: break;
        }
#undef KILN_INTERP_SCAN_ADD
#undef KILN_INTERP_SCAN_MUL
#define KILN_INTERP_SCAN_ADD(T, a, b)                                         \
    ((T)((uint64_t)(int64_t)(a) + (uint64_t)(int64_t)(b)))
#define KILN_INTERP_SCAN_MUL(T, a, b)                                         \
    ((T)((uint64_t)(int64_t)(a) * (uint64_t)(int64_t)(b)))
        switch (y->dtype) {
        case KILN_I64: KILN_INTERP_SCAN(int64_t); break;
        case KILN_I32: KILN_INTERP_SCAN(int32_t); break;
        default: break;
        }
#undef KILN_INTERP_SCAN_ADD
#undef KILN_INTERP_SCAN_MUL
#undef KILN_INTERP_SCAN
        /* the next line: every index but the axis, last dim fastest */
        int d = rank - 1;
        for (; d >= 0; d--) {
            if (d == axis)
                continue;
            if (++idx[d] < y->shape[d])
                break;
            idx[d] = 0;
        }
        if (d < 0)
            return 0;
    }
}
