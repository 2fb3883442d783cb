/*
 * iter.c — the strided walk: several views over one shape, coalesced
 * to as few dimensions as possible and run row by row in blocks through a
 * body callback; element moves between strided runs.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* Several views walked together over one shape.  Strides are in
 * elements, per view: strides[v * KILN_MAX_RANK + d].  offs[v] is the
 * offset of the current row's first element; a body reads element j of
 * the row at offs[v] + j * (inner stride of v). */
typedef struct kiln_interp_iter {
    int rank;
    int64_t shape[KILN_MAX_RANK];
    int64_t idx[KILN_MAX_RANK];
    size_t n_views;
    int64_t *strides;
    int64_t *offs;
} kiln_interp_iter;

static int64_t *kiln_interp_strides(const kiln_interp_iter *it, size_t v)
{
    return &it->strides[v * KILN_MAX_RANK];
}

static int64_t kiln_interp_inner(const kiln_interp_iter *it, size_t v)
{
    return it->strides[v * KILN_MAX_RANK + (size_t)(it->rank - 1)];
}

static int64_t kiln_interp_at(const kiln_interp_iter *it, size_t v,
                              int64_t j)
{
    return it->offs[v] + j * kiln_interp_inner(it, v);
}

/* Simplify the walk: drop extent-1 dims and merge a dim into the one
 * outside it whenever every view steps through both as one (outer stride
 * = inner stride * inner extent), so a C-contiguous (1000, 3) walks as one
 * row of 3000.  The order of visits does not change.  Returns 0 when the
 * space is empty (nothing to do), 1 otherwise; afterwards rank >= 1. */
static int kiln_interp_iter_coalesce(kiln_interp_iter *it)
{
    int w = 0;
    for (int d = 0; d < it->rank; d++) {
        if (it->shape[d] == 0)
            return 0;
        if (it->shape[d] == 1)
            continue;
        int merge = w > 0;
        for (size_t v = 0; merge && v < it->n_views; v++) {
            int64_t *s = kiln_interp_strides(it, v);
            merge = s[w - 1] == s[d] * it->shape[d];
        }
        if (merge) {
            it->shape[w - 1] *= it->shape[d];
            for (size_t v = 0; v < it->n_views; v++) {
                int64_t *s = kiln_interp_strides(it, v);
                s[w - 1] = s[d];
            }
        } else {
            it->shape[w] = it->shape[d];
            for (size_t v = 0; v < it->n_views; v++) {
                int64_t *s = kiln_interp_strides(it, v);
                s[w] = s[d];
            }
            w++;
        }
    }
    if (w == 0) {
        it->shape[0] = 1;
        for (size_t v = 0; v < it->n_views; v++)
            kiln_interp_strides(it, v)[0] = 0;
        w = 1;
    }
    it->rank = w;
    return 1;
}

typedef int (*kiln_interp_body)(void *ctx, const kiln_interp_iter *it,
                                int64_t j0, int64_t n);

/* Call `body` for every row of the (coalesced) space, in chunks of at
 * most `block` elements.  Stops at the first non-zero return. */
static int kiln_interp_iter_run(kiln_interp_iter *it, int64_t block,
                                kiln_interp_body body, void *ctx)
{
    int64_t row = it->shape[it->rank - 1];
    for (int d = 0; d < it->rank; d++)
        it->idx[d] = 0;
    for (size_t v = 0; v < it->n_views; v++)
        it->offs[v] = 0;
    for (;;) {
        for (int64_t j0 = 0; j0 < row; j0 += block) {
            int rc = body(ctx, it, j0, row - j0 < block ? row - j0 : block);
            if (rc)
                return rc;
        }
        int d = it->rank - 2;
        for (; d >= 0; d--) {
            it->idx[d]++;
            for (size_t v = 0; v < it->n_views; v++)
                it->offs[v] += kiln_interp_strides(it, v)[d];
            if (it->idx[d] < it->shape[d])
                break;
            for (size_t v = 0; v < it->n_views; v++)
                it->offs[v] -= kiln_interp_strides(it, v)[d] * it->shape[d];
            it->idx[d] = 0;
        }
        if (d < 0)
            return 0;
    }
}

/* Copy n elements between strided rows; stride 0 in the source fills. */
static void kiln_interp_move(void *dst, int64_t ds, const void *src,
                             int64_t ss, int64_t n, size_t esize)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (ds == 1 && ss == 1) {
        memcpy(d, s, (size_t)n * esize);
        return;
    }
    /* memcpy with a constant size compiles to one load and store, and
     * keeps the copy free of type punning. */
#define KILN_INTERP_MOVE(SZ)                                                  \
    for (int64_t j = 0; j < n; j++)                                           \
        memcpy(d + (ptrdiff_t)(j * ds * (SZ)), s + (ptrdiff_t)(j * ss * (SZ)),\
               (SZ));
    switch (esize) {
    case 8: KILN_INTERP_MOVE(8) break;
    case 4: KILN_INTERP_MOVE(4) break;
    default: KILN_INTERP_MOVE(1) break;
    }
#undef KILN_INTERP_MOVE
}
