/*
 * scatter.c — SCATTER: the row functions kiln_sk (index check) and kiln_sc
 * (set or add at the indices, in order), and their runner and plan.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Its code generation (row functions as LLVM IR) is
 * compiled into the compiler module llvm_codegen.so, its runner into the
 * plugin llvm.so (-DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* SCATTER (SET or INC of values at idx along an axis, in place on the
 * output) as two row functions:
 *   kiln_sk  the index check (kl_emit_idxcheck), run over every index
 *            before anything is written
 *   kiln_sc  ptrs {data, idx, values}, st {data stride, idx stride,
 *            values stride, data's axis stride, size, m, data sub-array
 *            stride, values sub-array stride}: for each position j of
 *            the row, k = idx[j] (+ size when negative) and the m
 *            elements of the sub-array data[j*sd + k*sa + i*dd] are set
 *            to (or, INC, incremented by) values[j*sv + i*vd]; m = 1
 *            for one element per index.
 * In order, one element at a time (no vectorisation: indices repeat),
 * so INC sums repeated indices in the interpreter's order and SET keeps
 * the last write. */
static void kl_emit_scatter(kl_cg *g)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    unsigned dt = k->outputs[0].dtype, it = k->inputs[0].dtype;
    LLVMTypeRef T = kl_type(g, dt);
    kl_emit_idxcheck(g, "kiln_sk", it);
    kl_rowfn r;
    kl_rowfn_begin(g, "kiln_sc", &r);
    LLVMValueRef data = kl_ptr_arg(g, &r, 0, T), ix = kl_ptr_arg(g, &r, 1, kl_type(g, it)),
                 side = kl_ptr_arg(g, &r, 2, T);
    LLVMValueRef st[8];
    for (unsigned v = 0; v < 8; v++)
        st[v] = kl_st_arg(g, &r, v);
    kl_for f, e;
    kl_for_open(g, r.fn, r.n, &f);
    LLVMValueRef kv = kl_wrap_index(g, kl_load_index(g, ix, it, LLVMBuildMul(
                                                         b, f.j, st[1], "")), st[4]);
    LLVMValueRef d0 = LLVMBuildAdd(b, LLVMBuildMul(b, f.j, st[0], ""),
                                   LLVMBuildMul(b, kv, st[3], ""), "");
    LLVMValueRef s0 = LLVMBuildMul(b, f.j, st[2], "");
    kl_for_open(g, r.fn, st[5], &e);
    LLVMValueRef dof = LLVMBuildAdd(b, d0, LLVMBuildMul(b, e.j, st[6], ""), "");
    LLVMValueRef sof = LLVMBuildAdd(b, s0, LLVMBuildMul(b, e.j, st[7], ""), "");
    LLVMValueRef dp = LLVMBuildGEP2(b, T, data, &dof, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(b, T, LLVMBuildGEP2(b, T, side, &sof, 1, ""), "");
    if (k->scatter_mode == KILN_SCATTER_INC) {
        LLVMValueRef o = LLVMBuildLoad2(b, T, dp, "");
        v = kl_isf(dt) ? LLVMBuildFAdd(b, o, v, "")
            : dt == KILN_BOOL ? LLVMBuildOr(b, o, v, "") : LLVMBuildAdd(b, o, v, "");
    }
    LLVMBuildStore(b, v, dp);
    kl_for_close(g, &e, 1);
    kl_for_close(g, &f, 1);
    LLVMBuildRetVoid(b);
}

#else /* KL_FRONT */

/* SCATTER: the index check's walk over idx (kiln_sk per row), then the
 * interpreter's walk over data[:axis] + idx with kiln_sc per row; the
 * sub-array written per index (x[axis+1:]) must coalesce to one row
 * (any C-ordered or broadcast values do) — otherwise the interpreter
 * runs the call. */
typedef struct kl_splan {
    kl_planhead h;
    const kl_state *ls;
    const kiln_call *call;                 /* the call being run */
    kiln_interp_iter ci;                   /* the indices (check) */
    int64_t ci_st[KILN_MAX_RANK], ci_off;
    int ci_empty;
    kiln_interp_iter it;                   /* data, idx, values */
    int64_t it_st[3 * KILN_MAX_RANK], it_off[3];
    int empty;                             /* nothing to write */
    size_t es[2];                          /* data (and values), idx */
    int64_t size;                          /* data's extent on the axis */
    int64_t st[8];                         /* kiln_sc's */
} kl_splan;

/* 0, a kiln_code (the interpreter's message written), or -1: the
 * interpreter should run this call. */
static int kl_splan_init(kl_splan *sp, const kiln_interp_run *r, const kl_state *ls)
{
    const kiln_call *call = r->call;
    const kiln_view *data = &call->outputs[0], *idx = &call->inputs[0];
    int axis = r->k->axis, q = idx->rank, post = data->rank - axis - 1;
    int64_t want[KILN_MAX_RANK], side_st[KILN_MAX_RANK];
    int rc = kiln_interp_take_shapes(r, want, side_st);
    if (rc)
        return rc;
    kiln_interp_plan sub;
    kiln_interp_plan_init(&sub, post, want + axis + q, data->strides + axis + 1,
                          side_st + axis + q, (unsigned)data->dtype, 0);
    if (!sub.empty && sub.it.rank > 1)
        return -1;
    memset(sp, 0, sizeof *sp);
    sp->h.run = NULL;
    sp->ls = ls;
    sp->es[0] = kiln_interp_dtype_size((unsigned)data->dtype);
    sp->es[1] = kiln_interp_dtype_size((unsigned)idx->dtype);
    sp->size = data->shape[axis];
    sp->ci = (kiln_interp_iter){.rank = q, .n_views = 1, .strides = sp->ci_st,
                                .offs = &sp->ci_off};
    for (int d = 0; d < q; d++) {
        sp->ci.shape[d] = idx->shape[d];
        sp->ci_st[d] = idx->strides[d];
    }
    sp->ci_empty = !kiln_interp_iter_coalesce(&sp->ci);
    sp->it = (kiln_interp_iter){.rank = axis + q, .n_views = 3, .strides = sp->it_st,
                                .offs = sp->it_off};
    for (int d = 0; d < axis + q; d++) {
        int lead = d < axis;
        sp->it.shape[d] = want[d];
        sp->it_st[d] = lead ? data->strides[d] : 0;
        sp->it_st[KILN_MAX_RANK + d] = lead ? 0 : idx->strides[d - axis];
        sp->it_st[2 * KILN_MAX_RANK + d] = side_st[d];
    }
    sp->empty = sub.empty || !kiln_interp_iter_coalesce(&sp->it);
    if (!sp->empty) {
        for (int v = 0; v < 3; v++)
            sp->st[v] = kiln_interp_inner(&sp->it, (size_t)v);
        sp->st[3] = data->strides[axis];
        sp->st[4] = sp->size;
        sp->st[5] = sub.it.shape[0];
        sp->st[6] = sub.strides[0];
        sp->st[7] = sub.strides[KILN_MAX_RANK];
    }
    return 0;
}

static int kl_scheck_body(void *ctx, const kiln_interp_iter *it, int64_t j0,
                          int64_t n)
{
    const kl_splan *sp = ctx;
    void *p[1] = {kiln_interp_elem(&sp->call->inputs[0], kiln_interp_at(it, 0, j0),
                                   sp->es[1])};
    int64_t st[2] = {kiln_interp_inner(it, 0), sp->size};
    unsigned char bad = 0;
    sp->ls->s(n, p, st, NULL, &bad);
    return bad ? 1 : 0;
}

static int kl_scatter_body(void *ctx, const kiln_interp_iter *it, int64_t j0,
                           int64_t n)
{
    const kl_splan *sp = ctx;
    const kiln_call *c = sp->call;
    void *p[3] = {
        kiln_interp_elem(&c->outputs[0], kiln_interp_at(it, 0, j0), sp->es[0]),
        kiln_interp_elem(&c->inputs[0], kiln_interp_at(it, 1, j0), sp->es[1]),
        kiln_interp_elem(&c->inputs[1], kiln_interp_at(it, 2, j0), sp->es[0])};
    sp->ls->c(n, p, sp->st, NULL, NULL);
    return 0;
}

/* Every index checked before anything is written (a failed SCATTER
 * leaves its output untouched); the interpreter's check finds the
 * culprit and writes its message. */
static int kl_splan_exec(kl_splan *sp, const kiln_call *call)
{
    sp->call = call;
    if (!sp->ci_empty && kiln_interp_iter_run(&sp->ci, INT64_MAX, kl_scheck_body, sp)) {
        kiln_interp_run r = kl_run_of(sp->ls, call);
        return kiln_interp_check_indices(&r, &call->inputs[0], sp->size);
    }
    if (!sp->empty)
        kiln_interp_iter_run(&sp->it, INT64_MAX, kl_scatter_body, sp);
    return 0;
}

static int kl_splan_run(void *plan, const kiln_call *call)
{
    return kl_splan_exec(plan, call);
}

static int kl_scatter(const kiln_interp_run *r, const kl_state *ls)
{
    kl_splan sp;
    int rc = kl_splan_init(&sp, r, ls);
    if (rc < 0)
        return ls->interp->fn(ls->interp->state, r->call);
    return rc ? rc : kl_splan_exec(&sp, r->call);
}

#endif /* KL_FRONT */
