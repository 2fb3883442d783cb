/*
 * nest.c — loop nests over strided and broadcast views (issue 27): the
 * compiled nest functions kiln_n0 .. kiln_n3, each an outer loop over the
 * rows of a (coalesced) 2-D space calling one row function per row, and
 * the plugin's side: when a call can use them (kl_nest_init) and the run
 * (kl_nest_exec), its own odometer over any dims outside those two.
 *
 * Why.  The row functions (rows.c) run one row; the walk over the outer
 * dims was the interpreter's (iter.c: a callback per row or 256-element
 * block, every view's pointer recomputed from its offset).  A view that
 * does not coalesce to one row — a slice X[:, 1:], a transpose, a row
 * broadcast m[None, :], steps, negative steps — then paid that walk per
 * row: posteriordb diamonds' centring (5000 rows of 24) spent 36 % of its
 * time there.  A nest function steps every view's pointer by its own
 * outer stride and calls the row directly, in the kernel's own code.
 *
 *   void kiln_nK(int64_t rows, void **ptrs, const int64_t *st,
 *                const kiln_runtime *rt, void *acc)
 *
 *   for (i = 0; i < rows; i++) {
 *       row(st[4 nv], loc, st, rt, acc);     loc[v] starts at ptrs[v]
 *       loc[v] += st[3 nv + v] bytes, for every view v
 *   }
 *
 * n0 wraps the kind's contiguous row (kiln_ec, kiln_lc), n1 its strided
 * row (kiln_es, kiln_ls), n2 / n3 the rows that fold along a kept axis
 * (kiln_uc / kiln_us, kiln_luc / kiln_lus).  `st` is the row functions'
 * own array (inner strides, a LOOP's table strides and extents) followed
 * by the outer byte strides and the row length: everything about strides
 * is read at run time, so the code (and its cache key) depends on no
 * stride, offset or extent.  Width stays linear (invariant 1): the views
 * are stepped by a loop over nv, not by code per view.
 *
 * A reduction along the row itself (REDUCE's kiln_rc/rs, a LOOP's
 * kiln_lc/ls folding into accumulators) whose rows are at most one
 * 256-element block long runs row by row from the plugin's own loop
 * (kl_nest_plane): the row into the accumulators, each combined into its
 * output as the interpreter combines a block (kl_combine) — exactly the
 * walk's blocks, so the same sums in the same order.
 *
 * The order of floating-point operations is the walk's: rows in C order,
 * each row's elements in order, a kept-axis fold combining each element
 * into its output in row order, a fold along the row one block per row;
 * so the results are bitwise the interpreter's.  What stays on the walk:
 * a reduction along rows longer than one block (the walk cuts them into
 * blocks), a LOOP whose indices are checked per block (kiln_lk), and a
 * row with a broadcast (inner stride 0) input of at least KL_NEST_SPLAT
 * elements (splatted into a buffer and run contiguous, vectorised: the
 * walk's cost per row is amortised there).  Shorter such rows run the
 * strided row with stride 0.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  The codegen half compiles into llvm_codegen.so,
 * the plugin half into llvm.so (-DKL_FRONT).  Prefix: kl_ (the backend's).
 */

/* A broadcast row at least this long runs splatted on the walk. */
#define KL_NEST_SPLAT 64

#ifndef KL_FRONT

/* kiln_nK over row function `row` (when the module defines it). */
static void kl_emit_nest(kl_cg *g, const char *name, const char *row)
{
    LLVMValueRef rf = LLVMGetNamedFunction(g->mod, row);
    if (!rf)
        return;
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    uint32_t nv = k->n_inputs + k->n_outputs;
    LLVMValueRef nvc = LLVMConstInt(g->t_i64, nv, 0);
    kl_rowfn r;
    kl_rowfn_begin(g, name, &r);
    /* loc has nv + 1 slots: ptrs[nv] is the constant block (ABI 1.8),
     * copied with the views and never stepped */
    LLVMValueRef nv1 = LLVMConstInt(g->t_i64, nv + 1, 0);
    LLVMValueRef loc = LLVMBuildArrayAlloca(b, g->t_p8, nv1, "loc");
    LLVMValueRef at = LLVMConstInt(g->t_i64, 4ull * nv, 0);
    LLVMValueRef len = LLVMBuildLoad2(b, g->t_i64, LLVMBuildGEP2(b, g->t_i64, r.st,
                                                                  &at, 1, ""), "len");
    at = LLVMConstInt(g->t_i64, 3ull * nv, 0);
    LLVMValueRef ob = LLVMBuildGEP2(b, g->t_i64, r.st, &at, 1, "outer");
    kl_for f;
    kl_for_open(g, r.fn, nv1, &f);       /* loc[v] = ptrs[v], v <= nv */
    LLVMValueRef p = LLVMBuildLoad2(b, g->t_p8, LLVMBuildGEP2(b, g->t_p8, r.ptrs,
                                                              &f.j, 1, ""), "");
    LLVMBuildStore(b, p, LLVMBuildGEP2(b, g->t_p8, loc, &f.j, 1, ""));
    kl_for_close(g, &f, 1);   /* small loops: not vectorised, not unrolled */
    kl_for o;
    kl_for_open(g, r.fn, r.n, &o);       /* the rows */
    LLVMValueRef args[5] = {len, loc, r.st, r.rt, r.acc};
    LLVMValueRef call = LLVMBuildCall2(b, g->t_fn, rf, args, 5, "");
    /* a call, not a copy of the row: inlined, every row function's body
     * (vectorised, with its remainder loops) was compiled twice (+20-30 %
     * of llvm's compile time on radon and logistic_county); the call costs
     * 5-10 % of a nest kernel's run time.  (The same loop in the plugin's
     * C, calling the row through a pointer, cost no compile time but ran
     * diamonds' centring 1.4x slower than this; measured, issue 27.) */
    unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateEnumAttribute(g->ctx, noinline, 0));
    kl_for s;
    kl_for_open(g, r.fn, nvc, &s);       /* loc[v] += outer[v] bytes */
    LLVMValueRef lp = LLVMBuildGEP2(b, g->t_p8, loc, &s.j, 1, "");
    LLVMValueRef q = LLVMBuildLoad2(b, g->t_p8, lp, "");
    LLVMValueRef d = LLVMBuildLoad2(b, g->t_i64, LLVMBuildGEP2(b, g->t_i64, ob,
                                                               &s.j, 1, ""), "");
    LLVMBuildStore(b, LLVMBuildGEP2(b, g->t_i8, q, &d, 1, ""), lp);
    kl_for_close(g, &s, 1);
    kl_for_close(g, &o, 1);
    LLVMBuildRetVoid(b);
}

/* The nests of the row functions the kind runs row by row: ELEMWISE's,
 * REDUCE's kept-axis folds, a LOOP's when it checks no index (and, for
 * kiln_n0 / n1, reduces nothing into accumulators). */
static void kl_emit_nests(kl_cg *g)
{
    const kiln_kernel *k = g->k;
    if (k->kind == KILN_KERNEL_ELEMWISE) {
        kl_emit_nest(g, "kiln_n0", "kiln_ec");
        kl_emit_nest(g, "kiln_n1", "kiln_es");
    } else if (k->kind == KILN_KERNEL_REDUCE) {
        kl_emit_nest(g, "kiln_n2", "kiln_uc");
        kl_emit_nest(g, "kiln_n3", "kiln_us");
    } else if (k->kind == KILN_KERNEL_LOOP && !kl_loop_checks(k)) {
        if (!kl_loop_reduces(k)) {
            kl_emit_nest(g, "kiln_n0", "kiln_lc");
            kl_emit_nest(g, "kiln_n1", "kiln_ls");
        }
        kl_emit_nest(g, "kiln_n2", "kiln_luc");
        kl_emit_nest(g, "kiln_n3", "kiln_lus");
    }
}

#else /* KL_FRONT */

/* Calls whose rows ran on the interpreter's walk (or on the embedded
 * interpreter), for tests and debugging: kiln_llvm_walks(). */
static _Atomic uint64_t kl_walk_count;

__attribute__((visibility("default"))) uint64_t kiln_llvm_walks(void);

/* The number of kernel calls, since the plugin was loaded, whose rows the
 * interpreter's walk drove (iter.c) or the embedded interpreter ran
 * instead of this plugin's nests: a diagnostic (tests read it with
 * dlsym), not part of the ABI.  Thread-safe. */
uint64_t kiln_llvm_walks(void)
{
    return kl_walk_count;
}

static void kl_walked(void)
{
    kl_walk_count++;
}

/* After kl_callplan_init (the walk coalesced, the row mode picked): the
 * nest function this call runs, if any, and its part of st (each view's
 * outer byte stride, the row length).  Data-independent: done once per
 * prepared shape. */
static void kl_nest_init(kl_callplan *pl, const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;
    const kl_state *ls = pl->ls;
    const kiln_interp_iter *it = &pl->it;
    uint32_t nv = pl->nv;
    pl->nest = NULL;
    pl->fold = 0;
    if (pl->empty || pl->interp)
        return;
    int w = it->rank;
    int64_t len = it->shape[w - 1];
    if (pl->mode == 1 && len >= KL_NEST_SPLAT)
        return;   /* splatted, contiguous, on the walk */
    int plain = pl->mode == 0;
    kl_row_fn f = NULL;
    if (k->kind == KILN_KERNEL_ELEMWISE) {
        f = plain ? ls->nest[0] : ls->nest[1];
    } else if (k->kind == KILN_KERNEL_REDUCE) {
        int64_t os = pl->st[pl->n_in];   /* output 0 decides (siblings agree) */
        if (os != 0)
            f = plain && os == 1 ? ls->nest[2] : ls->nest[3];
        else
            pl->fold = 1;
    } else if (k->kind == KILN_KERNEL_LOOP && !ls->lk) {
        if (!kl_loop_reduces(k))
            f = plain ? ls->nest[0] : ls->nest[1];
        else if (pl->rows)
            f = plain && pl->rows_unit ? ls->nest[2] : ls->nest[3];
        else
            pl->fold = 1;
    }
    if (pl->fold) {   /* one block per row, or the walk's blocks */
        pl->fold = len <= KILN_INTERP_BLOCK && ls->c && ls->s;
        if (pl->fold)
            pl->row = plain ? ls->c : ls->s;
    }
    if (!f && !pl->fold)
        return;
    for (uint32_t v = 0; v < nv; v++)
        pl->st[3 * (size_t)nv + v] =
            w >= 2 ? kiln_interp_strides(it, v)[w - 2] * (int64_t)pl->esize[v] : 0;
    pl->st[4 * (size_t)nv] = len;
    pl->nest = f;
}

/* One 2-D plane of `rows` rows from pl->ptrs (stepped here): the nest
 * function, or a fold along each row (one block: the row into the
 * accumulators, then each REDUCE output combined as the interpreter
 * combines a block). */
static void kl_nest_plane(kl_callplan *pl, const kiln_interp_run *r,
                          int64_t rows)
{
    const kiln_call *call = r->call;
    if (pl->nest) {
        pl->nest(rows, pl->ptrs, pl->st, call->rt, NULL);
        return;
    }
    const kiln_kernel *k = r->k;
    uint32_t nv = pl->nv, n_in = pl->n_in;
    int64_t len = pl->st[4 * (size_t)nv];
    const int64_t *ob = pl->st + 3 * (size_t)nv;
    unsigned char **p = (unsigned char **)pl->ptrs;
    for (int64_t i = 0; i < rows; i++) {
        pl->row(len, pl->ptrs, pl->st, call->rt, pl->acc);
        for (uint32_t j = 0; j < k->n_outputs; j++)
            if (kl_role(k, n_in + j) == KILN_ROLE_REDUCE)
                kl_combine(k->outputs[j].dtype, k->reduce_op, p[n_in + j],
                           pl->acc + 8 * (size_t)j);
        for (uint32_t v = 0; v < nv; v++)
            p[v] += ob[v];
    }
}

/* Run a call through its nest: the views' first elements, one call per
 * 2-D plane (the odometer over dims 0 .. w-3, when there are more). */
static void kl_nest_exec(kl_callplan *pl, const kiln_interp_run *r)
{
    const kiln_call *call = r->call;
    kiln_interp_iter *it = &pl->it;
    uint32_t nv = pl->nv, n_in = pl->n_in;
    int w = it->rank;
    int64_t rows = w >= 2 ? it->shape[w - 2] : 1;
    unsigned char **base = (unsigned char **)pl->ptrs;
    if (w <= 2) {
        for (uint32_t v = 0; v < nv; v++)
            base[v] = v < n_in ? call->inputs[v].data : call->outputs[v - n_in].data;
        kl_nest_plane(pl, r, rows);
        return;
    }
    int64_t idx[KILN_MAX_RANK] = {0};
    for (uint32_t v = 0; v < nv; v++)
        it->offs[v] = 0;
    for (;;) {
        for (uint32_t v = 0; v < nv; v++)
            pl->ptrs[v] = kiln_interp_elem(v < n_in ? &call->inputs[v]
                                                    : &call->outputs[v - n_in],
                                           it->offs[v], pl->esize[v]);
        kl_nest_plane(pl, r, rows);
        int d = w - 3;
        for (; d >= 0; d--) {
            idx[d]++;
            for (uint32_t v = 0; v < nv; v++)
                it->offs[v] += kiln_interp_strides(it, v)[d];
            if (idx[d] < it->shape[d])
                break;
            for (uint32_t v = 0; v < nv; v++)
                it->offs[v] -= kiln_interp_strides(it, v)[d] * it->shape[d];
            idx[d] = 0;
        }
        if (d < 0)
            return;
    }
}

#endif /* KL_FRONT */
