/*
 * copy.c — copying (or, for SCATTER INC, adding) between two views of
 * one shape: a plan (the coalesced walk) made once and run from many base
 * addresses; JOIN, GATHER and SCATTER move their data with it.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* Copy (or, for SCATTER INC, add) between two views of one shape.  Made
 * once per call (a "plan": the coalesced walk) and run from many base
 * addresses.  View 0 is the destination, view 1 the source. */
typedef struct kiln_interp_plan {
    kiln_interp_iter it;
    int64_t strides[2 * KILN_MAX_RANK];
    int64_t offs[2];
    int empty;
    int single;      /* one element: skip the walk */
    unsigned dtype;
    size_t esize;
    int add;         /* add into the destination instead of copying */
    char *dst;       /* set before each run */
    const char *src;
} kiln_interp_plan;

static void kiln_interp_plan_init(kiln_interp_plan *pl, int rank,
                                  const int64_t *shape, const int64_t *dst_st,
                                  const int64_t *src_st, unsigned dtype,
                                  int add)
{
    memset(pl, 0, sizeof *pl);
    pl->it.rank = rank;
    pl->it.n_views = 2;
    pl->it.strides = pl->strides;
    pl->it.offs = pl->offs;
    for (int d = 0; d < rank; d++) {
        pl->it.shape[d] = shape[d];
        pl->strides[d] = dst_st[d];
        pl->strides[KILN_MAX_RANK + d] = src_st[d];
    }
    pl->dtype = dtype;
    pl->esize = kiln_interp_dtype_size(dtype);
    pl->add = add;
    pl->empty = !kiln_interp_iter_coalesce(&pl->it);
    pl->single = !pl->empty && pl->it.rank == 1 && pl->it.shape[0] == 1;
}

#define KILN_INTERP_ADD_LOOP(T, ADD)                                          \
    do {                                                                      \
        T *d_ = d;                                                            \
        const T *s_ = s;                                                      \
        for (int64_t j = 0; j < n; j++)                                       \
            d_[j * ds] = (T)ADD(d_[j * ds], s_[j * ss]);                      \
    } while (0)

/* d[j*ds] += s[j*ss] in dtype `dt` (bool: or). */
static void kiln_interp_add_into(unsigned dt, void *d, int64_t ds,
                                 const void *s, int64_t ss, int64_t n)
{
    switch (dt) {
    case KILN_F64: KILN_INTERP_ADD_LOOP(double, KILN_INTERP_FADD); break;
    case KILN_F32: KILN_INTERP_ADD_LOOP(float, KILN_INTERP_FADD); break;
    case KILN_I64: KILN_INTERP_ADD_LOOP(int64_t, KILN_INTERP_ADD64); break;
    case KILN_I32: KILN_INTERP_ADD_LOOP(int32_t, KILN_INTERP_ADD32); break;
    default: KILN_INTERP_ADD_LOOP(uint8_t, KILN_INTERP_OR); break;
    }
}

static int kiln_interp_plan_body(void *ctx, const kiln_interp_iter *it,
                                 int64_t j0, int64_t n)
{
    const kiln_interp_plan *pl = ctx;
    char *d = pl->dst + (ptrdiff_t)(kiln_interp_at(it, 0, j0)
                                    * (int64_t)pl->esize);
    const char *s = pl->src + (ptrdiff_t)(kiln_interp_at(it, 1, j0)
                                          * (int64_t)pl->esize);
    if (pl->add)
        kiln_interp_add_into(pl->dtype, d, kiln_interp_inner(it, 0), s,
                             kiln_interp_inner(it, 1), n);
    else
        kiln_interp_move(d, kiln_interp_inner(it, 0), s,
                         kiln_interp_inner(it, 1), n, pl->esize);
    return 0;
}

static void kiln_interp_plan_run(kiln_interp_plan *pl, void *dst,
                                 const void *src)
{
    if (pl->empty)
        return;
    if (pl->single) {
        if (pl->add)
            kiln_interp_add_into(pl->dtype, dst, 0, src, 0, 1);
        else
            memcpy(dst, src, pl->esize);
        return;
    }
    pl->dst = dst;
    pl->src = src;
    kiln_interp_iter_run(&pl->it, INT64_MAX, kiln_interp_plan_body, pl);
}
