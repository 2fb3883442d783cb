/*
 * rows.c — the row functions of the kinds with a scalar program (ELEMWISE
 * kiln_ec/es, REDUCE kiln_rc/rs/uc/us, LOOP kiln_lc/ls/luc/lus/lk): one
 * loop over a row, the views' pointers and strides, each output by its
 * mode and role (stored, folded, scattered in a register run).
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* A row function's declaration and attributes.  With fast_math, the
 * function attributes that let the code generator reassociate, contract
 * (FMA) and ignore the sign of zero; never "no-nans"/"no-infs", which
 * would let it fold away maximum/minimum's NaN test and isnan-style
 * comparisons.  (The LLVM 14 C API has no setters for per-instruction
 * fast-math flags.) */
static LLVMValueRef kl_add_fn(kl_cg *g, const char *name)
{
    LLVMValueRef fn = LLVMAddFunction(g->mod, name, g->t_fn);
    LLVMSetLinkage(fn, LLVMExternalLinkage);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(g->ctx, nounwind, 0));
    if (g->fast_math) {
        static const char *const fa[] = {
            "unsafe-fp-math", "no-signed-zeros-fp-math", "approx-func-fp-math",
            "less-precise-fpmad"};
        for (size_t q = 0; q < sizeof fa / sizeof fa[0]; q++)
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMCreateStringAttribute(
                                        g->ctx, fa[q], (unsigned)strlen(fa[q]),
                                        "true", 4));
    }
    return fn;
}

/* Loop metadata on a latch.  Strided loops (they run only when some
 * stride is not 1): no vectorisation (on a speculated stride of 1,
 * behind run-time checks: wasted compile time) and no unrolling.  A
 * contiguous reduction into a scalar under fast_math: vectorisation
 * forced, which (LoopVectorizeHints::allowReordering) lets the loop
 * vectoriser reorder the floating-point fold into vector partial sums. */
static void kl_loop_md(kl_cg *g, LLVMValueRef latch, int strided, int mode)
{
    int force = !strided && mode == KL_RSCALAR && g->fast_math;
    if (!strided && !force)
        return;
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    LLVMMetadataRef v_ops[2] = {
        kl_mdstr(g, "llvm.loop.vectorize.enable"),
        LLVMValueAsMetadata(LLVMConstInt(g->t_i1, force ? 1 : 0, 0))};
    LLVMMetadataRef u_ops[1] = {kl_mdstr(g, "llvm.loop.unroll.disable")};
    LLVMMetadataRef ops[3] = {tmp, LLVMMDNodeInContext2(g->ctx, v_ops, 2),
                              LLVMMDNodeInContext2(g->ctx, u_ops, 1)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(g->ctx, ops, force ? 2 : 3);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", 9),
                    LLVMMetadataAsValue(g->ctx, id));
}

/* Store a SCATTER run's value (register type) at index kx of output j. */
static void kl_scatter_store(kl_cg *g, const kl_loopctx *lc, uint32_t j,
                             LLVMValueRef kx, LLVMValueRef x, int strided)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    uint32_t v = k->n_inputs + j;
    unsigned dt = k->outputs[j].dtype;
    LLVMValueRef idx = LLVMBuildMul(b, kx, lc->tst[v], "");
    LLVMValueRef p = LLVMBuildGEP2(b, kl_type(g, dt), lc->base[v], &idx, 1, "");
    if (dt == KILN_BOOL)
        x = LLVMBuildZExt(b, x, g->t_i8, "");
    LLVMValueRef s = LLVMBuildStore(b, x, p);
    if (!strided)
        kl_md(g, s, g->l_out_scope[j], g->l_out_noalias[j]);
}

/* A SCATTER output's add at one element, its target's value kept in a
 * register while the index repeats: when the (normalised, checked)
 * index kx differs from the run's, the run's value is stored and
 * out[kx] loaded; then value += x.  The same additions in the same
 * order as out[kx] += x through memory, so the same bits; the last
 * run is stored after the loop (kl_scatter_flush). */
static void kl_emit_scatter_run(kl_cg *g, kl_loopctx *lc, uint32_t j,
                                LLVMValueRef kx, LLVMValueRef x, int strided)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    uint32_t v = k->n_inputs + j;
    unsigned dt = k->outputs[j].dtype;
    LLVMTypeRef T = kl_type(g, dt);
    LLVMValueRef ck = lc->run_k[j], cv = lc->run_v[j];
    LLVMBasicBlockRef here = LLVMGetInsertBlock(b);
    LLVMBasicBlockRef change = LLVMAppendBasicBlockInContext(g->ctx, lc->fn, "sc.new");
    LLVMBasicBlockRef flush = LLVMAppendBasicBlockInContext(g->ctx, lc->fn, "sc.flush");
    LLVMBasicBlockRef load = LLVMAppendBasicBlockInContext(g->ctx, lc->fn, "sc.load");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, lc->fn, "sc.add");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, kx, ck, ""), join, change);
    LLVMPositionBuilderAtEnd(b, change);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGE, ck, LLVMConstInt(g->t_i64, 0, 0),
                                     ""), flush, load);
    LLVMPositionBuilderAtEnd(b, flush);
    kl_scatter_store(g, lc, j, ck, cv, strided);
    LLVMBuildBr(b, load);
    LLVMPositionBuilderAtEnd(b, load);
    LLVMValueRef idx = LLVMBuildMul(b, kx, lc->tst[v], "");
    LLVMValueRef p = LLVMBuildGEP2(b, T, lc->base[v], &idx, 1, "");
    LLVMValueRef l = LLVMBuildLoad2(b, T, p, "");
    if (!strided)
        kl_md(g, l, g->l_out_scope[j], g->l_out_noalias[j]);
    if (dt == KILN_BOOL)
        l = LLVMBuildICmp(b, LLVMIntNE, l, LLVMConstNull(g->t_i8), "");
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, join);
    LLVMValueRef cur = LLVMBuildPhi(b, kl_rtype(g, dt), "sc.cur");
    LLVMValueRef in_v[2] = {cv, l};
    LLVMBasicBlockRef in_b[2] = {here, load};
    LLVMAddIncoming(cur, in_v, in_b, 2);
    lc->run_k2[j] = kx;
    lc->run_v2[j] = kl_fold(g, dt, KILN_REDUCE_SUM, cur, x);
}

/* After the loop: store each SCATTER output's last run (index rk, -1
 * when the row was empty, value rv). */
static void kl_scatter_flush(kl_cg *g, const kl_loopctx *lc, uint32_t j,
                             LLVMValueRef rk, LLVMValueRef rv, int strided)
{
    LLVMBuilderRef b = g->b;
    LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(g->ctx, lc->fn, "sc.last");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, lc->fn, "sc.done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGE, rk, LLVMConstInt(g->t_i64, 0, 0),
                                     ""), st, done);
    LLVMPositionBuilderAtEnd(b, st);
    kl_scatter_store(g, lc, j, rk, rv, strided);
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
}

/* A LOOP kernel's outputs at one element, each by its role: ITER
 * stored, REDUCE folded (into acc[j], or into the output element along a
 * kept axis), SCATTER added at its index; in the check function only the
 * SCATTER indices are tested.  Outputs in order, as the interpreter
 * handles them per block (they alias nothing that a later one reads). */
static void kl_emit_loop_outputs(kl_cg *g, kl_loopctx *lc, int mode,
                                 int strided, const LLVMValueRef *acc,
                                 LLVMValueRef *acc2)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        uint32_t v = k->n_inputs + j;
        unsigned dt = k->outputs[j].dtype, role = k->out_roles[j];
        LLVMTypeRef T = kl_type(g, dt);
        LLVMValueRef x = lc->val[k->out_refs[j]];
        if (mode == KL_CHECK) {
            LLVMValueRef bad;
            if (role == KILN_ROLE_SCATTER)
                (void)kl_norm_index(g, lc, lc->val[k->out_index[j]],
                                    k->instrs[k->out_index[j]].dtype, v, &bad);
            continue;
        }
        if (kl_has_acc(k, mode, j)) {
            if (dt == KILN_F32)
                x = LLVMBuildFPExt(b, x, g->t_f64, "");
            acc2[j] = kl_fold(g, dt == KILN_F32 ? KILN_F64 : dt, k->reduce_op,
                              acc[j], x);
            continue;
        }
        LLVMValueRef idx, scope = g->l_out_scope[j], other = g->l_out_noalias[j];
        LLVMValueRef load = NULL;
        if (role == KILN_ROLE_SCATTER) {
            LLVMValueRef kx = kl_norm_index(g, lc, lc->val[k->out_index[j]],
                                            k->instrs[k->out_index[j]].dtype,
                                            v, NULL);
            if (lc->run_k) {
                kl_emit_scatter_run(g, lc, j, kx, x, strided);
                continue;
            }
            idx = LLVMBuildMul(b, kx, lc->tst[v], "");
        } else {
            idx = kl_index(g, lc, v);
        }
        LLVMValueRef p = LLVMBuildGEP2(b, T, lc->base[v], &idx, 1, "");
        if (role != KILN_ROLE_ITER) {   /* REDUCE along a row, SCATTER */
            load = LLVMBuildLoad2(b, T, p, "");
            if (!strided)
                kl_md(g, load, scope, other);
            if (dt == KILN_BOOL)
                load = LLVMBuildICmp(b, LLVMIntNE, load, LLVMConstNull(g->t_i8), "");
            x = kl_fold(g, dt, role == KILN_ROLE_SCATTER ? KILN_REDUCE_SUM
                                                         : k->reduce_op, load, x);
        }
        if (dt == KILN_BOOL)
            x = LLVMBuildZExt(b, x, g->t_i8, "");
        LLVMValueRef s = LLVMBuildStore(b, x, p);
        if (!strided)
            kl_md(g, s, scope, other);
    }
}

/* One row function. */
/* The end of one element in a row function's loop: store the outputs
 * (KL_EW), fold program output 0 into the running accumulator `acc`
 * (KL_RSCALAR; returns the new accumulator), or combine it into the
 * output element (KL_RROW).  Contiguous rows carry the alias scopes. */
static void kl_emit_outputs(kl_cg *g, kl_loopctx *lc, int mode,
                            int strided, const LLVMValueRef *acc,
                            LLVMValueRef *acc2)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    if (k->kind == KILN_KERNEL_LOOP) {
        kl_emit_loop_outputs(g, lc, mode, strided, acc, acc2);
        return;
    }
    if (mode == KL_EW) {
        for (uint32_t j = 0; j < k->n_outputs; j++) {
            uint32_t v = k->n_inputs + j;
            unsigned dt = k->outputs[j].dtype;
            LLVMValueRef x = lc->val[k->out_refs[j]];
            if (dt == KILN_BOOL)
                x = LLVMBuildZExt(b, x, g->t_i8, "");
            LLVMValueRef idx = kl_index(g, lc, v);
            LLVMValueRef p = LLVMBuildGEP2(b, kl_type(g, dt), lc->base[v],
                                           &idx, 1, "");
            LLVMValueRef s = LLVMBuildStore(b, x, p);
            if (!strided)
                kl_md(g, s, g->l_out_scope[j], g->l_out_noalias[j]);
        }
        return;
    }
    /* a reduction: every output folds its own program output (sibling
     * reductions, ABI 1.4) */
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        unsigned odt = k->outputs[j].dtype;
        unsigned accdt = odt == KILN_F32 ? KILN_F64 : odt;
        if (mode == KL_RSCALAR) {
            LLVMValueRef x = lc->val[k->out_refs[j]];
            if (odt == KILN_F32)
                x = LLVMBuildFPExt(b, x, g->t_f64, "");
            acc2[j] = kl_fold(g, accdt, k->reduce_op, acc[j], x);
            continue;
        }
        uint32_t v = k->n_inputs + j;
        LLVMValueRef idx = kl_index(g, lc, v);
        LLVMValueRef p = LLVMBuildGEP2(b, kl_type(g, odt), lc->base[v], &idx, 1,
                                       "");
        LLVMValueRef o = LLVMBuildLoad2(b, kl_type(g, odt), p, "");
        if (!strided)
            kl_md(g, o, g->l_out_scope[j], g->l_in_only);
        if (odt == KILN_BOOL)
            o = LLVMBuildICmp(b, LLVMIntNE, o, LLVMConstNull(g->t_i8), "");
        LLVMValueRef x = kl_fold(g, odt, k->reduce_op, o, lc->val[k->out_refs[j]]);
        if (odt == KILN_BOOL)
            x = LLVMBuildZExt(b, x, g->t_i8, "");
        LLVMValueRef s = LLVMBuildStore(b, x, p);
        if (!strided)
            kl_md(g, s, g->l_out_scope[j], g->l_in_only);
    }
}

/* The views a row function reads or writes (need[v] = 1): the LOADs'
 * and TAKEs' inputs of the live program, the outputs `mode` uses. */
static void kl_need_views(kl_cg *g, int mode, uint8_t *need)
{
    const kiln_kernel *k = g->k;
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (g->live[i] && (in->op == KILN_I_LOAD || in->op == KILN_I_TAKE))
            need[in->a] = 1;
    }
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (mode != KL_RSCALAR ? kl_out_used(k, mode, j)
                               : !kl_has_acc(k, mode, j))
            need[k->n_inputs + j] = 1;
}

/* View v's typed base pointer (offset by `off` elements of its walk
 * stride when off is not NULL and v is walked), its stride (strided
 * rows), and for an indexed view its element stride and extent. */
static void kl_view_base(kl_cg *g, kl_loopctx *lc, LLVMValueRef ptrs,
                         LLVMValueRef st, uint32_t v, LLVMValueRef off)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    uint32_t nv = k->n_inputs + k->n_outputs;
    unsigned dt = v < k->n_inputs ? k->inputs[v].dtype
                                  : k->outputs[v - k->n_inputs].dtype;
    LLVMValueRef idx = LLVMConstInt(g->t_i64, v, 0);
    LLVMValueRef p = LLVMBuildGEP2(b, g->t_p8, ptrs, &idx, 1, "");
    p = LLVMBuildLoad2(b, g->t_p8, p, "");
    p = LLVMBuildBitCast(b, p, LLVMPointerType(kl_type(g, dt), 0), "");
    if (kl_indexed(k, v)) {
        for (int q = 1; q <= 2; q++) {
            LLVMValueRef x = LLVMConstInt(g->t_i64, (unsigned long long)q * nv + v, 0);
            LLVMValueRef sv = LLVMBuildLoad2(b, g->t_i64, LLVMBuildGEP2(
                                                 b, g->t_i64, st, &x, 1, ""), "");
            if (q == 1)
                lc->tst[v] = sv;
            else
                lc->tsize[v] = sv;
        }
        lc->base[v] = p;
        return;
    }
    if (lc->strided) {
        LLVMValueRef sp = LLVMBuildGEP2(b, g->t_i64, st, &idx, 1, "");
        lc->stride[v] = LLVMBuildLoad2(b, g->t_i64, sp, "");
        if (off)
            off = LLVMBuildMul(b, off, lc->stride[v], "");
    }
    lc->base[v] = off ? LLVMBuildGEP2(b, kl_type(g, dt), p, &off, 1, "") : p;
}

/* (strips.c: a contiguous fold into scalars whose program has f32 math) */
static int kl_strips_ok(kl_cg *g, int mode, int strided);
static void kl_emit_fn_strips(kl_cg *g, const char *name);

static void kl_emit_fn(kl_cg *g, const char *name, int mode, int strided)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    if (kl_strips_ok(g, mode, strided)) {
        kl_emit_fn_strips(g, name);
        return;
    }
    LLVMValueRef fn = kl_add_fn(g, name);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "exit");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef n = LLVMGetParam(fn, 0), ptrs = LLVMGetParam(fn, 1),
                 st = LLVMGetParam(fn, 2), rt = LLVMGetParam(fn, 3),
                 accp = LLVMGetParam(fn, 4);
    uint32_t nv = k->n_inputs + k->n_outputs;
    kl_loopctx lc = {0};
    lc.strided = strided;
    lc.check = mode == KL_CHECK;
    kl_lc_alloc(&lc, nv, k->n_instrs);
    lc.fn = fn;
    int runs = 0;   /* SCATTER outputs kept in registers */
    for (uint32_t j = 0; k->kind == KILN_KERNEL_LOOP && mode != KL_CHECK &&
                         j < k->n_outputs; j++)
        runs |= k->out_roles[j] == KILN_ROLE_SCATTER;
    lc.vec = !strided && !runs && (mode == KL_EW || mode == KL_RROW ||
                                   (mode == KL_RSCALAR && g->fast_math));
    if (runs) {
        lc.run_k = calloc(4 * (size_t)k->n_outputs, sizeof *lc.run_k);
        lc.run_v = lc.run_k + k->n_outputs;
        lc.run_k2 = lc.run_v + k->n_outputs;
        lc.run_v2 = lc.run_k2 + k->n_outputs;
    }
    LLVMValueRef rtfn[KILN_I_COUNT] = {0};
    lc.rtfn = rtfn;
    uint8_t *need = calloc(nv, 1);
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!g->live[i])
            continue;
        size_t off = kl_rt_offset(in->op);
        if (off && !rtfn[in->op])
            rtfn[in->op] = kl_rt_fn(g, rt, off, kl_rt_type(g, in->op));
    }
    kl_need_views(g, mode, need);
    for (uint32_t v = 0; v < nv; v++)
        if (need[v])
            kl_view_base(g, &lc, ptrs, st, v, NULL);
    if (lc.check) {
        lc.safe = LLVMBuildAlloca(b, g->t_i64, "safe");
        LLVMBuildStore(b, LLVMConstInt(g->t_i64, 0, 0), lc.safe);
    }
    /* RSCALAR: one accumulator per reducing output, each from its
     * identity; KL_CHECK: one flag */
    uint32_t no = k->n_outputs;
    LLVMValueRef *ident = calloc(no + 1, sizeof *ident),
                 *acc = calloc(no + 1, sizeof *acc),
                 *acc2 = calloc(no + 1, sizeof *acc2);
    for (uint32_t j = 0; j < no; j++) {
        unsigned odt = k->outputs[j].dtype;
        if (kl_has_acc(k, mode, j))
            ident[j] = kl_identity(g, odt == KILN_F32 ? KILN_F64 : odt,
                                   k->reduce_op);
    }
    LLVMValueRef f0 = LLVMConstInt(g->t_i1, 0, 0), bad = NULL;
    LLVMValueRef zero = LLVMConstInt(g->t_i64, 0, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, ""), loop, exit);

    LLVMPositionBuilderAtEnd(b, loop);
    lc.j = LLVMBuildPhi(b, g->t_i64, "j");
    for (uint32_t j = 0; j < no; j++) {
        unsigned odt = k->outputs[j].dtype;
        if (kl_has_acc(k, mode, j))
            acc[j] = LLVMBuildPhi(b, kl_rtype(g, odt == KILN_F32 ? KILN_F64 : odt),
                                  "acc");
    }
    if (lc.check)
        lc.bad = bad = LLVMBuildPhi(b, g->t_i1, "bad");
    LLVMValueRef none = LLVMConstInt(g->t_i64, (unsigned long long)-1, 1);
    for (uint32_t j = 0; runs && j < no; j++) {
        if (k->out_roles[j] != KILN_ROLE_SCATTER)
            continue;
        lc.run_k[j] = LLVMBuildPhi(b, g->t_i64, "sc.k");
        lc.run_v[j] = LLVMBuildPhi(b, kl_rtype(g, k->outputs[j].dtype), "sc.v");
    }
    kl_emit_program(g, &lc);
    kl_emit_outputs(g, &lc, mode, strided, acc, acc2);
    LLVMValueRef j1 = LLVMBuildAdd(b, lc.j, LLVMConstInt(g->t_i64, 1, 0), "");
    LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(b);
    LLVMValueRef latch = LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j1,
                                                          n, ""), loop, exit);
    /* the check: small, and vectorised whatever its strides */
    kl_loop_md(g, latch, strided && !lc.check, mode);
    LLVMValueRef in_j[2] = {zero, j1};
    LLVMBasicBlockRef in_b[2] = {entry, loop_end};
    LLVMAddIncoming(lc.j, in_j, in_b, 2);
    for (uint32_t j = 0; j < no; j++) {
        if (!acc[j])
            continue;
        LLVMValueRef in_a[2] = {ident[j], acc2[j]};
        LLVMAddIncoming(acc[j], in_a, in_b, 2);
    }
    if (bad) {
        LLVMValueRef in_v[2] = {f0, lc.bad};
        LLVMAddIncoming(bad, in_v, in_b, 2);
    }
    for (uint32_t j = 0; runs && j < no; j++) {
        if (!lc.run_k[j])
            continue;
        LLVMValueRef in_k[2] = {none, lc.run_k2[j]};
        LLVMValueRef in_v[2] = {LLVMConstNull(LLVMTypeOf(lc.run_v2[j])), lc.run_v2[j]};
        LLVMAddIncoming(lc.run_k[j], in_k, in_b, 2);
        LLVMAddIncoming(lc.run_v[j], in_v, in_b, 2);
    }

    LLVMPositionBuilderAtEnd(b, exit);
    /* (SCATTER runs: the last one's index and value) */
    for (uint32_t j = 0; runs && j < no; j++) {
        if (!lc.run_k[j])
            continue;
        LLVMValueRef rk = LLVMBuildPhi(b, g->t_i64, "");
        LLVMValueRef rv = LLVMBuildPhi(b, LLVMTypeOf(lc.run_v2[j]), "");
        LLVMValueRef in_k[2] = {none, lc.run_k2[j]};
        LLVMValueRef in_v[2] = {LLVMConstNull(LLVMTypeOf(lc.run_v2[j])), lc.run_v2[j]};
        LLVMAddIncoming(rk, in_k, in_b, 2);
        LLVMAddIncoming(rv, in_v, in_b, 2);
        lc.run_k2[j] = rk;
        lc.run_v2[j] = rv;
    }
    /* the phis first (a block's phis lead it), then the stores */
    for (uint32_t j = 0; j < no; j++) {
        if (!acc[j])
            continue;
        unsigned odt = k->outputs[j].dtype;
        unsigned accdt = odt == KILN_F32 ? KILN_F64 : odt;
        LLVMValueRef res = LLVMBuildPhi(b, kl_rtype(g, accdt), "res");
        LLVMValueRef in_r[2] = {ident[j], acc2[j]};
        LLVMAddIncoming(res, in_r, in_b, 2);
        acc[j] = res;
    }
    LLVMValueRef badr = NULL;
    if (bad) {
        badr = LLVMBuildPhi(b, g->t_i1, "");
        LLVMValueRef in_r[2] = {f0, lc.bad};
        LLVMAddIncoming(badr, in_r, in_b, 2);
        LLVMBuildStore(b, LLVMBuildZExt(b, badr, g->t_i8, ""), accp);
    }
    for (uint32_t j = 0; j < no; j++) {
        if (!acc[j])
            continue;
        /* accumulator j at byte 8 j of acc (kl_reduce_body's array) */
        unsigned odt = k->outputs[j].dtype;
        unsigned accdt = odt == KILN_F32 ? KILN_F64 : odt;
        LLVMValueRef res = acc[j];
        if (accdt == KILN_BOOL)
            res = LLVMBuildZExt(b, res, g->t_i8, "");
        LLVMValueRef off = LLVMConstInt(g->t_i64, 8ull * j, 0);
        LLVMValueRef ap = LLVMBuildGEP2(b, g->t_i8, accp, &off, 1, "");
        ap = LLVMBuildBitCast(b, ap, LLVMPointerType(kl_type(g, accdt), 0), "");
        LLVMBuildStore(b, res, ap);
    }
    for (uint32_t j = 0; runs && j < no; j++)
        if (lc.run_k[j])
            kl_scatter_flush(g, &lc, j, lc.run_k2[j], lc.run_v2[j], strided);
    LLVMBuildRetVoid(b);
    free(lc.run_k);
    free(ident);
    free(acc);
    free(acc2);
    kl_lc_free(&lc);
    free(need);
}

#endif /* !KL_FRONT */
