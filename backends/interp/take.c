/*
 * take.c — GATHER and SCATTER (one runner, kiln_interp_take): the
 * index check, the walk over the leading axes and the indices, each
 * element or sub-array copied (or added) through a copy plan.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

typedef struct kiln_interp_idxcheck {
    const kiln_interp_run *r;
    const kiln_view *idx;
    int64_t size;
    int axis;
} kiln_interp_idxcheck;

static int kiln_interp_idxcheck_body(void *ctx, const kiln_interp_iter *it,
                                     int64_t j0, int64_t n)
{
    const kiln_interp_idxcheck *c = ctx;
    size_t es = kiln_interp_dtype_size((unsigned)c->idx->dtype);
    /* a typed scan first (one compare per index); the general read below
     * finds the culprit and says so */
    int bad = 0;
    int64_t st = kiln_interp_inner(it, 0);
#define KILN_INTERP_IDXSCAN(I)                                               \
    do {                                                                      \
        const I *ix = (const I *)kiln_interp_elem(c->idx,                    \
                                                  kiln_interp_at(it, 0, j0), \
                                                  sizeof(I));                \
        for (int64_t j = 0; j < n; j++) {                                     \
            int64_t k = (int64_t)ix[j * st];                                  \
            bad |= k < -c->size || k >= c->size;                              \
        }                                                                     \
    } while (0)
    if (c->idx->dtype == KILN_I64)
        KILN_INTERP_IDXSCAN(int64_t);
    else
        KILN_INTERP_IDXSCAN(int32_t);
#undef KILN_INTERP_IDXSCAN
    if (!bad)
        return 0;
    for (int64_t j = j0; j < j0 + n; j++) {
        int64_t k = kiln_interp_read_index(
            kiln_interp_elem(c->idx, kiln_interp_at(it, 0, j), es),
            (unsigned)c->idx->dtype);
        if (k < -c->size || k >= c->size)
            return kiln_interp_fail(c->r, KILN_ERR_RUNTIME, "index %lld is "
                                    "out of bounds for axis %d with size "
                                    "%lld", (long long)k, c->axis,
                                    (long long)c->size);
    }
    return 0;
}

/* Every index in [-size, size), checked before anything is written so
 * that a failed SCATTER leaves its (in-place) output untouched. */
static int kiln_interp_check_indices(const kiln_interp_run *r,
                                     const kiln_view *idx, int64_t size)
{
    int64_t strides[KILN_MAX_RANK], off;
    kiln_interp_iter it = { .rank = idx->rank, .n_views = 1,
                            .strides = strides, .offs = &off };
    for (int d = 0; d < idx->rank; d++) {
        it.shape[d] = idx->shape[d];
        strides[d] = idx->strides[d];
    }
    kiln_interp_idxcheck c = { r, idx, size, r->k->axis };
    if (!kiln_interp_iter_coalesce(&it))
        return 0;
    return kiln_interp_iter_run(&it, INT64_MAX, kiln_interp_idxcheck_body,
                                &c);
}

/* GATHER and SCATTER share one walk over x[:axis] + idx.shape with three
 * views: the data (x or the output; stride 0 over the idx dims), the
 * indices (stride 0 over the leading dims) and the indexed side (out or
 * values).  For each position, the sub-array x[..., k, ...] over
 * x[axis+1:] is copied (or added) by a plan. */
typedef struct kiln_interp_take_ctx {
    const kiln_interp_run *r;
    const kiln_view *data, *idx, *side;
    int64_t size, data_axis_stride;
    int gather;
    kiln_interp_plan plan;
    int one;                 /* one element per index (post == 0) */
} kiln_interp_take_ctx;

/* One element per index (data's axis is its last: radon's a[county] and
 * the scatter-add of its gradient): a typed loop, no per-index walk.
 * I: the index type; T: the element type; OP: the element operation on
 * pointers d (data) and s (side). */
#define KILN_INTERP_TAKE1(I, T, OP)                                          \
    do {                                                                      \
        const I *ix = (const I *)kiln_interp_elem(t->idx,                    \
                                                  kiln_interp_at(it, 1, j0), \
                                                  sizeof(I));                \
        T *dd = (T *)kiln_interp_elem(t->data, kiln_interp_at(it, 0, j0),    \
                                      sizeof(T));                            \
        T *ss = (T *)kiln_interp_elem(t->side, kiln_interp_at(it, 2, j0),    \
                                      sizeof(T));                            \
        int64_t is = kiln_interp_inner(it, 1), ds = t->data_axis_stride;     \
        int64_t sst = kiln_interp_inner(it, 2), dst = kiln_interp_inner(it, 0); \
        for (int64_t j = 0; j < n; j++) {                                     \
            int64_t k = (int64_t)ix[j * is];                                  \
            if (k < 0)                                                        \
                k += t->size; /* in range: checked beforehand */              \
            T *d = dd + j * dst + k * ds;                                     \
            T *s = ss + j * sst;                                              \
            OP;                                                               \
        }                                                                     \
    } while (0)
#define KILN_INTERP_TAKE1_OPS(I, T, ADD)                                     \
    do {                                                                      \
        if (t->gather)                                                        \
            KILN_INTERP_TAKE1(I, T, *s = *d);                                 \
        else if (t->plan.add)                                                 \
            KILN_INTERP_TAKE1(I, T, *d = (T)ADD(*d, *s));                     \
        else                                                                  \
            KILN_INTERP_TAKE1(I, T, *d = *s);                                 \
    } while (0)
#define KILN_INTERP_TAKE1_TYPES(I)                                           \
    do {                                                                      \
        switch (t->data->dtype) {                                             \
        case KILN_F64: KILN_INTERP_TAKE1_OPS(I, double, KILN_INTERP_FADD); break; \
        case KILN_F32: KILN_INTERP_TAKE1_OPS(I, float, KILN_INTERP_FADD); break;  \
        case KILN_I64: KILN_INTERP_TAKE1_OPS(I, int64_t, KILN_INTERP_ADD64); break; \
        case KILN_I32: KILN_INTERP_TAKE1_OPS(I, int32_t, KILN_INTERP_ADD32); break; \
        default: KILN_INTERP_TAKE1_OPS(I, uint8_t, KILN_INTERP_OR); break;    \
        }                                                                     \
    } while (0)

static int kiln_interp_take_body(void *ctx, const kiln_interp_iter *it,
                                 int64_t j0, int64_t n)
{
    kiln_interp_take_ctx *t = ctx;
    if (t->one) {
        if (t->idx->dtype == KILN_I64)
            KILN_INTERP_TAKE1_TYPES(int64_t);
        else
            KILN_INTERP_TAKE1_TYPES(int32_t);
        return 0;
    }
    size_t es = kiln_interp_dtype_size((unsigned)t->data->dtype);
    size_t ies = kiln_interp_dtype_size((unsigned)t->idx->dtype);
    for (int64_t j = j0; j < j0 + n; j++) {
        int64_t k = kiln_interp_read_index(
            kiln_interp_elem(t->idx, kiln_interp_at(it, 1, j), ies),
            (unsigned)t->idx->dtype);
        if (k < 0)
            k += t->size; /* in range: checked beforehand */
        char *data = kiln_interp_elem(t->data, kiln_interp_at(it, 0, j)
                                      + k * t->data_axis_stride, es);
        char *side = kiln_interp_elem(t->side, kiln_interp_at(it, 2, j), es);
        if (t->gather)
            kiln_interp_plan_run(&t->plan, side, data);
        else
            kiln_interp_plan_run(&t->plan, data, side);
    }
    return 0;
}

/* GATHER (x, idx) -> out and SCATTER (idx, values) into out: the data,
 * the indices and the indexed side (out or values). */
static void kiln_interp_take_views(const kiln_interp_run *r,
                                   const kiln_view **data,
                                   const kiln_view **idx,
                                   const kiln_view **side)
{
    const kiln_call *call = r->call;
    int gather = r->k->kind == KILN_KERNEL_GATHER;
    *data = gather ? &call->inputs[0] : &call->outputs[0];
    *idx = gather ? &call->inputs[1] : &call->inputs[0];
    *side = gather ? &call->outputs[0] : &call->inputs[1];
}

/* The indexed side's shape, want = data[:axis] + idx + data[axis+1:],
 * and its strides for the walk (SCATTER values may broadcast: extent 1,
 * stride 0; GATHER's output may not); 0 or a kiln_code with the
 * message. */
static int kiln_interp_take_shapes(const kiln_interp_run *r, int64_t *want,
                                   int64_t *side_st)
{
    int gather = r->k->kind == KILN_KERNEL_GATHER;
    const kiln_view *data, *idx, *side;
    kiln_interp_take_views(r, &data, &idx, &side);
    int axis = r->k->axis, q = idx->rank;
    int post = data->rank - axis - 1;
    for (int d = 0; d < axis; d++)
        want[d] = data->shape[d];
    for (int d = 0; d < q; d++)
        want[axis + d] = idx->shape[d];
    for (int d = 0; d < post; d++)
        want[axis + q + d] = data->shape[axis + 1 + d];
    for (int d = 0; d < side->rank; d++) {
        int bcast = !gather && side->shape[d] == 1;
        if (side->shape[d] != want[d] && !bcast) {
            char b1[160], b2[160];
            return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: %s has shape %s, "
                                    "expected %s", r->label,
                                    gather ? "output" : "values",
                                    kiln_interp_shape_str(b1, sizeof b1,
                                                          side->rank,
                                                          side->shape),
                                    kiln_interp_shape_str(b2, sizeof b2,
                                                          side->rank, want));
        }
        side_st[d] = bcast ? 0 : side->strides[d];
    }
    return 0;
}

static int kiln_interp_take(const kiln_interp_run *r)
{
    int gather = r->k->kind == KILN_KERNEL_GATHER;
    const kiln_view *data, *idx, *side;
    kiln_interp_take_views(r, &data, &idx, &side);
    int axis = r->k->axis, q = idx->rank;
    int post = data->rank - axis - 1;
    int64_t want[KILN_MAX_RANK], side_st[KILN_MAX_RANK];
    int rc = kiln_interp_take_shapes(r, want, side_st);
    if (rc)
        return rc;
    rc = kiln_interp_check_indices(r, idx, data->shape[axis]);
    if (rc)
        return rc;

    kiln_interp_take_ctx t = { .r = r, .data = data, .idx = idx, .side = side,
                           .size = data->shape[axis],
                           .data_axis_stride = data->strides[axis],
                           .gather = gather };
    const int64_t *data_post = data->strides + axis + 1;
    const int64_t *side_post = side_st + axis + q;
    if (gather)
        kiln_interp_plan_init(&t.plan, post, want + axis + q, side_post,
                              data_post, (unsigned)data->dtype, 0);
    else
        kiln_interp_plan_init(&t.plan, post, want + axis + q, data_post,
                              side_post, (unsigned)data->dtype,
                              r->k->scatter_mode == KILN_SCATTER_INC);
    if (t.plan.empty)
        return 0;
    t.one = post == 0;

    int64_t strides[3 * KILN_MAX_RANK], offs[3];
    kiln_interp_iter it = { .rank = axis + q, .n_views = 3,
                            .strides = strides, .offs = offs };
    for (int d = 0; d < axis + q; d++) {
        int lead = d < axis;
        it.shape[d] = want[d];
        strides[d] = lead ? data->strides[d] : 0;
        strides[KILN_MAX_RANK + d] = lead ? 0 : idx->strides[d - axis];
        strides[2 * KILN_MAX_RANK + d] = side_st[d];
    }
    if (!kiln_interp_iter_coalesce(&it))
        return 0;
    return kiln_interp_iter_run(&it, INT64_MAX, kiln_interp_take_body, &t);
}
