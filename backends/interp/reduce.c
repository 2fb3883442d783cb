/*
 * reduce.c — REDUCE: folding a block into its outputs (a local
 * accumulator when the row is reduced), the reduction's identity, and the
 * fill and MEAN division over an output's distinct elements.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* Reduction of one block into the output: `o` is the output element of
 * the block's first position, `os` the output's stride along the row.
 * When the row is reduced (os == 0) the block is combined in a local
 * accumulator first (in double for f32) and stored once. */
#define KILN_INTERP_DEFINE_REDUCE(NAME, T, ACC, ADD, MUL, MAX, MIN, LOW, HIGH)\
    static void NAME(uint32_t op, void *o_, int64_t os, const void *v_,       \
                     size_t n)                                                \
    {                                                                         \
        T *o = o_;                                                            \
        const T *v = v_;                                                      \
        if (os == 0) {                                                        \
            ACC acc;                                                          \
            switch (op) {                                                     \
            case KILN_REDUCE_PROD:                                            \
                acc = 1;                                                      \
                for (size_t j = 0; j < n; j++) acc = MUL(acc, (ACC)v[j]);     \
                *o = (T)MUL((ACC)*o, acc);                                    \
                break;                                                        \
            case KILN_REDUCE_MAX:                                             \
                acc = LOW;                                                    \
                for (size_t j = 0; j < n; j++) acc = MAX(acc, (ACC)v[j]);     \
                *o = (T)MAX((ACC)*o, acc);                                    \
                break;                                                        \
            case KILN_REDUCE_MIN:                                             \
                acc = HIGH;                                                   \
                for (size_t j = 0; j < n; j++) acc = MIN(acc, (ACC)v[j]);     \
                *o = (T)MIN((ACC)*o, acc);                                    \
                break;                                                        \
            default:                                                          \
                acc = 0;                                                      \
                for (size_t j = 0; j < n; j++) acc = ADD(acc, (ACC)v[j]);     \
                *o = (T)ADD((ACC)*o, acc);                                    \
                break;                                                        \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        for (size_t j = 0; j < n; j++) {                                      \
            T *oj = o + (ptrdiff_t)((int64_t)j * os);                         \
            switch (op) {                                                     \
            case KILN_REDUCE_PROD: *oj = (T)MUL(*oj, v[j]); break;            \
            case KILN_REDUCE_MAX: *oj = (T)MAX(*oj, v[j]); break;             \
            case KILN_REDUCE_MIN: *oj = (T)MIN(*oj, v[j]); break;             \
            default: *oj = (T)ADD(*oj, v[j]); break;                          \
            }                                                                 \
        }                                                                     \
    }

#define KILN_INTERP_FADD(x, y) ((x) + (y))
#define KILN_INTERP_FMUL(x, y) ((x) * (y))
KILN_INTERP_DEFINE_REDUCE(kiln_interp_reduce_f64, double, double,
                          KILN_INTERP_FADD, KILN_INTERP_FMUL,
                          KILN_INTERP_FMAX, KILN_INTERP_FMIN, -INFINITY,
                          INFINITY)
KILN_INTERP_DEFINE_REDUCE(kiln_interp_reduce_f32, float, double,
                          KILN_INTERP_FADD, KILN_INTERP_FMUL,
                          KILN_INTERP_FMAX, KILN_INTERP_FMIN, -INFINITY,
                          INFINITY)
KILN_INTERP_DEFINE_REDUCE(kiln_interp_reduce_i64, int64_t, int64_t,
                          KILN_INTERP_ADD64, KILN_INTERP_MUL64,
                          KILN_INTERP_MAX, KILN_INTERP_MIN, INT64_MIN,
                          INT64_MAX)
KILN_INTERP_DEFINE_REDUCE(kiln_interp_reduce_i32, int32_t, int32_t,
                          KILN_INTERP_ADD32, KILN_INTERP_MUL32,
                          KILN_INTERP_MAX, KILN_INTERP_MIN, INT32_MIN,
                          INT32_MAX)
/* bool: max is "any", min is "all"; sum and prod are refused. */
KILN_INTERP_DEFINE_REDUCE(kiln_interp_reduce_bool, uint8_t, uint8_t,
                          KILN_INTERP_OR, KILN_INTERP_AND, KILN_INTERP_OR,
                          KILN_INTERP_AND, 0, 1)

static void kiln_interp_reduce_block(unsigned dt, uint32_t op, void *o,
                                     int64_t os, const void *v, size_t n)
{
    switch (dt) {
    case KILN_F64: kiln_interp_reduce_f64(op, o, os, v, n); break;
    case KILN_F32: kiln_interp_reduce_f32(op, o, os, v, n); break;
    case KILN_I64: kiln_interp_reduce_i64(op, o, os, v, n); break;
    case KILN_I32: kiln_interp_reduce_i32(op, o, os, v, n); break;
    default: kiln_interp_reduce_bool(op, o, os, v, n); break;
    }
}

static int kiln_interp_reduce_body(void *ctx, const kiln_interp_iter *it,
                                   int64_t j0, int64_t n)
{
    const kiln_interp_prun *p = ctx;
    const kiln_kernel *k = p->r->k;
    (void)kiln_interp_run_block(p, it, j0, (size_t)n);  /* no TAKE */
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        size_t v = p->n_in + j;
        unsigned dt = k->outputs[j].dtype;
        void *o = kiln_interp_elem(&p->r->call->outputs[j],
                                   kiln_interp_at(it, v, j0),
                                   kiln_interp_dtype_size(dt));
        kiln_interp_reduce_block(dt, k->reduce_op, o, kiln_interp_inner(it, v),
                                 kiln_interp_reg(p, (uint32_t)k->out_refs[j]),
                                 (size_t)n);
    }
    return 0;
}

/* The identity of a reduction, written as one element of dtype `dt`. */
static void kiln_interp_identity(unsigned dt, uint32_t op, void *out)
{
    double val = 0.0;
    switch (op) {
    case KILN_REDUCE_PROD: val = 1.0; break;
    case KILN_REDUCE_MAX: val = -INFINITY; break;
    case KILN_REDUCE_MIN: val = INFINITY; break;
    default: break;
    }
    if (kiln_interp_is_int(dt) && isinf(val)) {
        /* The integer limits are not doubles: write them directly. */
        int64_t i64 = val < 0 ? INT64_MIN : INT64_MAX;
        int32_t i32 = val < 0 ? INT32_MIN : INT32_MAX;
        if (dt == KILN_I64)
            memcpy(out, &i64, sizeof i64);
        else
            memcpy(out, &i32, sizeof i32);
        return;
    }
    /* bool: -inf -> 1 would be wrong for max ("any" starts false). */
    if (dt == KILN_BOOL)
        val = op == KILN_REDUCE_MIN || op == KILN_REDUCE_PROD;
    kiln_interp_cast(KILN_F64, dt, out, &val, 1);
}

typedef struct kiln_interp_fill {
    const kiln_view *view;
    size_t esize;
    unsigned char value[8];
    double divisor; /* MEAN: divide instead of fill */
} kiln_interp_fill;

static int kiln_interp_fill_body(void *ctx, const kiln_interp_iter *it,
                                 int64_t j0, int64_t n)
{
    const kiln_interp_fill *f = ctx;
    void *d = kiln_interp_elem(f->view, kiln_interp_at(it, 0, j0), f->esize);
    kiln_interp_move(d, kiln_interp_inner(it, 0), f->value, 0, n, f->esize);
    return 0;
}

static int kiln_interp_mean_body(void *ctx, const kiln_interp_iter *it,
                                 int64_t j0, int64_t n)
{
    const kiln_interp_fill *f = ctx;
    int64_t s = kiln_interp_inner(it, 0);
    if (f->view->dtype == KILN_F64) {
        double *o = kiln_interp_elem(f->view, kiln_interp_at(it, 0, j0), 8);
        for (int64_t j = 0; j < n; j++)
            o[j * s] /= f->divisor;
    } else {
        float *o = kiln_interp_elem(f->view, kiln_interp_at(it, 0, j0), 4);
        for (int64_t j = 0; j < n; j++)
            o[j * s] = (float)((double)o[j * s] / f->divisor);
    }
    return 0;
}

/* Walk the distinct elements of a reduce output (`shape` has extent 1 on
 * the reduced axes) with `body`. */
static void kiln_interp_over_output(const kiln_view *out, const int64_t *shape,
                                    kiln_interp_body body,
                                    kiln_interp_fill *f)
{
    int64_t strides[KILN_MAX_RANK], off;
    kiln_interp_iter it = { .rank = out->rank, .n_views = 1,
                            .strides = strides, .offs = &off };
    for (int d = 0; d < out->rank; d++) {
        it.shape[d] = shape[d];
        strides[d] = out->strides[d];
    }
    if (kiln_interp_iter_coalesce(&it))
        kiln_interp_iter_run(&it, INT64_MAX, body, f);
}
