/*
 * gather.c — GATHER: the row functions kiln_gk (index check) and kiln_gc
 * (copy), and their runner, the interpreter's take with compiled rows.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Its code generation (row functions as LLVM IR) is
 * compiled into the compiler module llvm_codegen.so, its runner into the
 * plugin llvm.so (-DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* GATHER (take along an axis, one element per index: x[..., idx, ...]
 * with nothing after the axis) as two row functions with the common
 * signature:
 *   kiln_gk  the index check (kl_emit_idxcheck)
 *   kiln_gc  ptrs {x, idx, out}, st {x, idx, out strides, x's axis
 *            stride, size}: out[j] = x[j*sx + k*sa], k = idx[j] (+ size
 *            when negative)
 * The driver (kl_take) checks every index first, as the interpreter
 * does, and hands any failure, shape mismatch or sub-array gather
 * (x[idx, :]: the interpreter's block copy) to the interpreter, which
 * then reports exactly its own message. */
static void kl_emit_gather(kl_cg *g)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    unsigned it = k->inputs[1].dtype;
    LLVMTypeRef T = kl_type(g, k->inputs[0].dtype);
    kl_emit_idxcheck(g, "kiln_gk", it);
    kl_rowfn r;
    kl_rowfn_begin(g, "kiln_gc", &r);
    LLVMValueRef x = kl_ptr_arg(g, &r, 0, T), ix = kl_ptr_arg(g, &r, 1, kl_type(g, it)),
                 o = kl_ptr_arg(g, &r, 2, T);
    LLVMValueRef st[5];
    for (unsigned v = 0; v < 5; v++)
        st[v] = kl_st_arg(g, &r, v);
    kl_for f;
    kl_for_open(g, r.fn, r.n, &f);
    LLVMValueRef kv = kl_wrap_index(g, kl_load_index(g, ix, it, LLVMBuildMul(
                                                         b, f.j, st[1], "")), st[4]);
    LLVMValueRef xo = LLVMBuildAdd(b, LLVMBuildMul(b, f.j, st[0], ""),
                                   LLVMBuildMul(b, kv, st[3], ""), "");
    LLVMValueRef xv = LLVMBuildLoad2(b, T, LLVMBuildGEP2(b, T, x, &xo, 1, ""), "");
    LLVMValueRef oo = LLVMBuildMul(b, f.j, st[2], "");
    LLVMBuildStore(b, xv, LLVMBuildGEP2(b, T, o, &oo, 1, ""));
    kl_for_close(g, &f, 1);   /* gathers: scalar, not unrolled */
    LLVMBuildRetVoid(b);
}

#else /* KL_FRONT */

/* GATHER: the interpreter's kiln_interp_take with compiled rows, for
 * element gathers that pass every check; anything else (a mismatched
 * output, an index out of range, a sub-array per index) is run by the
 * interpreter itself, which gives its exact result or message. */
typedef struct kl_takectx {
    const kl_state *ls;
    const kiln_view *v[3];
    size_t es[3];
    int64_t st[5];
} kl_takectx;

static int kl_take_check_body(void *ctx, const kiln_interp_iter *it,
                              int64_t j0, int64_t n)
{
    kl_takectx *t = ctx;
    void *p[1] = {kiln_interp_elem(t->v[1], kiln_interp_at(it, 0, j0), t->es[1])};
    int64_t st[2] = {kiln_interp_inner(it, 0), t->st[4]};
    unsigned char bad = 0;
    t->ls->s(n, p, st, NULL, &bad);
    return bad ? 1 : 0;
}

static int kl_take_body(void *ctx, const kiln_interp_iter *it, int64_t j0,
                        int64_t n)
{
    kl_takectx *t = ctx;
    void *p[3];
    for (int v = 0; v < 3; v++) {
        p[v] = kiln_interp_elem(t->v[v], kiln_interp_at(it, (size_t)v, j0), t->es[v]);
        t->st[v] = kiln_interp_inner(it, (size_t)v);
    }
    t->ls->c(n, p, t->st, NULL, NULL);
    return 0;
}

static int kl_take(const kiln_interp_run *r, const kl_state *ls)
{
    const kiln_call *call = r->call;
    const kiln_view *data = &call->inputs[0], *idx = &call->inputs[1],
                    *side = &call->outputs[0];
    int axis = r->k->axis, q = idx->rank;
    if (data->rank - axis - 1 != 0)
        return ls->interp->fn(ls->interp->state, call);
    int64_t want[KILN_MAX_RANK];
    for (int d = 0; d < axis; d++)
        want[d] = data->shape[d];
    for (int d = 0; d < q; d++)
        want[axis + d] = idx->shape[d];
    for (int d = 0; d < side->rank; d++)
        if (side->shape[d] != want[d])
            return ls->interp->fn(ls->interp->state, call);
    kl_takectx t = {.ls = ls, .v = {data, idx, side}};
    for (int v = 0; v < 3; v++)
        t.es[v] = kiln_interp_dtype_size((unsigned)t.v[v]->dtype);
    t.st[3] = data->strides[axis];
    t.st[4] = data->shape[axis];
    /* every index in range, or the interpreter's message */
    int64_t cs[KILN_MAX_RANK], coff;
    kiln_interp_iter ci = {.rank = q, .n_views = 1, .strides = cs, .offs = &coff};
    for (int d = 0; d < q; d++) {
        ci.shape[d] = idx->shape[d];
        cs[d] = idx->strides[d];
    }
    if (kiln_interp_iter_coalesce(&ci)
        && kiln_interp_iter_run(&ci, INT64_MAX, kl_take_check_body, &t))
        return ls->interp->fn(ls->interp->state, call);
    int64_t strides[3 * KILN_MAX_RANK], offs[3];
    kiln_interp_iter it = {.rank = axis + q, .n_views = 3, .strides = strides,
                           .offs = offs};
    for (int d = 0; d < axis + q; d++) {
        int lead = d < axis;
        it.shape[d] = want[d];
        strides[d] = lead ? data->strides[d] : 0;
        strides[KILN_MAX_RANK + d] = lead ? 0 : idx->strides[d - axis];
        strides[2 * KILN_MAX_RANK + d] = side->strides[d];
    }
    if (!kiln_interp_iter_coalesce(&it))
        return 0;
    return kiln_interp_iter_run(&it, INT64_MAX, kl_take_body, &t);
}

#endif /* KL_FRONT */
