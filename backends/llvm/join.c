/*
 * join.c — JOIN: the row functions kiln_jc / kiln_js (a row copied into
 * its slice of the output), and their runner and plan.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Its code generation (row functions as LLVM IR) is
 * compiled into the compiler module llvm_codegen.so, its runner into the
 * plugin llvm.so (-DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* JOIN: the copy of one row of an input into its slice of the output,
 * ptrs {dst, src}:
 *   kiln_jc  contiguous: memcpy(dst, src, n elements)
 *   kiln_js  strided, st {dst stride, src stride}: dst[j*ds] = src[j*ss]
 * The driver (kl_jpart_run) walks each input's coalesced copy plan,
 * made once per shape signature when the call is prepared. */
static void kl_emit_join(kl_cg *g)
{
    unsigned dt = g->k->outputs[0].dtype;
    LLVMBuilderRef b = g->b;
    LLVMTypeRef T = kl_type(g, dt);
    unsigned es = (unsigned)kiln_interp_dtype_size(dt);
    kl_rowfn r;
    kl_rowfn_begin(g, "kiln_jc", &r);
    LLVMValueRef d = kl_ptr_arg(g, &r, 0, g->t_i8), s = kl_ptr_arg(g, &r, 1, g->t_i8);
    LLVMBuildMemCpy(b, d, es, s, es, LLVMBuildMul(b, r.n, LLVMConstInt(g->t_i64, es, 0),
                                                  ""));
    LLVMBuildRetVoid(b);

    kl_rowfn_begin(g, "kiln_js", &r);
    d = kl_ptr_arg(g, &r, 0, T);
    s = kl_ptr_arg(g, &r, 1, T);
    LLVMValueRef ds = kl_st_arg(g, &r, 0), ss = kl_st_arg(g, &r, 1);
    kl_for f;
    kl_for_open(g, r.fn, r.n, &f);
    LLVMValueRef so = LLVMBuildMul(b, f.j, ss, ""), dof = LLVMBuildMul(b, f.j, ds, "");
    LLVMValueRef v = LLVMBuildLoad2(b, T, LLVMBuildGEP2(b, T, s, &so, 1, ""), "");
    LLVMBuildStore(b, v, LLVMBuildGEP2(b, T, d, &dof, 1, ""));
    kl_for_close(g, &f, 1);
    LLVMBuildRetVoid(b);
}

#else /* KL_FRONT */

/* JOIN: one input's copy into its slice of the output.  The walk is the
 * interpreter's coalesced copy plan; each of its rows is one call of
 * kiln_jc (both inner strides 1: memcpy) or kiln_js. */
typedef struct kl_jpart {
    kiln_interp_plan pl;      /* view 0 the slice, view 1 the input */
    ptrdiff_t off;            /* bytes from the output's data to the slice */
    kl_row_fn row;
    int64_t st[2];            /* the inner strides */
} kl_jpart;

static void kl_jpart_init(kl_jpart *p, const kl_state *ls, const kiln_view *out,
                          const kiln_view *in, int64_t at, int axis)
{
    kiln_interp_plan_init(&p->pl, in->rank, in->shape, out->strides,
                          in->strides, (unsigned)out->dtype, 0);
    p->off = (ptrdiff_t)(at * out->strides[axis] * (int64_t)p->pl.esize);
    p->row = NULL;
    if (p->pl.empty)
        return;
    p->st[0] = kiln_interp_inner(&p->pl.it, 0);
    p->st[1] = kiln_interp_inner(&p->pl.it, 1);
    p->row = p->st[0] == 1 && p->st[1] == 1 ? ls->c : ls->s;
}

static int kl_jpart_body(void *ctx, const kiln_interp_iter *it, int64_t j0,
                         int64_t n)
{
    kl_jpart *p = ctx;
    void *ptrs[2] = {
        p->pl.dst + (ptrdiff_t)(kiln_interp_at(it, 0, j0) * (int64_t)p->pl.esize),
        (char *)(uintptr_t)p->pl.src +
            (ptrdiff_t)(kiln_interp_at(it, 1, j0) * (int64_t)p->pl.esize)};
    p->row(n, ptrs, p->st, NULL, NULL);
    return 0;
}

static void kl_jpart_run(kl_jpart *p, void *out, const void *src)
{
    if (!p->row)
        return;
    p->pl.dst = (char *)out + p->off;
    p->pl.src = src;
    if (p->pl.it.rank == 1) {   /* one row: no walk */
        void *ptrs[2] = {p->pl.dst, (void *)(uintptr_t)src};
        p->row(p->pl.it.shape[0], ptrs, p->st, NULL, NULL);
        return;
    }
    kiln_interp_iter_run(&p->pl.it, INT64_MAX, kl_jpart_body, p);
}

/* An unprepared JOIN: the interpreter's checks, then each input's part
 * made and run on the stack (no allocation, any number of inputs). */
static int kl_join(const kiln_interp_run *r, const kl_state *ls)
{
    int rc = kiln_interp_join_check(r);
    if (rc)
        return rc;
    const kiln_call *call = r->call;
    const kiln_view *out = &call->outputs[0];
    int axis = r->k->axis;
    int64_t at = 0;
    for (uint32_t i = 0; i < call->n_inputs; i++) {
        kl_jpart p;
        kl_jpart_init(&p, ls, out, &call->inputs[i], at, axis);
        kl_jpart_run(&p, out->data, call->inputs[i].data);
        at += call->inputs[i].shape[axis];
    }
    return 0;
}

typedef struct kl_jplan {
    kl_planhead h;
    uint32_t n;
    kl_jpart part[];          /* one per input */
} kl_jplan;

static int kl_jplan_run(void *plan, const kiln_call *call)
{
    kl_jplan *jp = plan;
    void *out = call->outputs[0].data;
    for (uint32_t i = 0; i < jp->n; i++)
        kl_jpart_run(&jp->part[i], out, call->inputs[i].data);
    return 0;
}

static int kl_jplan_make(const kiln_interp_run *r, const kl_state *ls, void **out)
{
    if (kiln_interp_join_check(r))
        return 1;
    const kiln_call *call = r->call;
    kl_jplan *jp = malloc(sizeof *jp + sizeof(kl_jpart) * call->n_inputs);
    if (!jp)
        return 1;
    jp->h.run = kl_jplan_run;
    jp->n = call->n_inputs;
    int64_t at = 0;
    for (uint32_t i = 0; i < call->n_inputs; i++) {
        kl_jpart_init(&jp->part[i], ls, &call->outputs[0], &call->inputs[i], at,
                      r->k->axis);
        at += call->inputs[i].shape[r->k->axis];
    }
    *out = jp;
    return 0;
}

#endif /* KL_FRONT */
