/*
 * strips.c — a contiguous row that folds into scalar accumulators, cut
 * into strips so that its elementwise part vectorises (issue 29: the
 * exp of softmax, fused with the sum that follows it).
 *
 * A fold into one value per row runs in order (the interpreter's order,
 * so results agree bit for bit), which keeps its loop scalar, and with it
 * every f32 exp / log / tanh / sigmoid of the program (vmath.c's inline
 * code is 3x slower than libm's call in a scalar loop).  When such a
 * row's program has one of them, the row is walked in strips of
 * KL_STRIP elements: a first loop (vectorised) runs the program, stores
 * the elementwise outputs and puts each fold's operand (as the f64
 * accumulator type) in a stack buffer; a second loop folds the buffer in
 * order.  The folds see the same operands in the same order: the results
 * are those of the one-loop row.
 *
 * Part of the llvm backend: #included by llvm.c after rows.c (whose
 * kl_emit_fn hands such rows here).  Compiled into the compiler module
 * only (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_.
 */

#ifndef KL_FRONT

#define KL_STRIP 256       /* elements of one strip */
#define KL_STRIP_ACC 4     /* at most this many accumulators (buffers) */

/* Row function `mode`/`strided` of g->k is worth strips: a contiguous
 * fold into 1..KL_STRIP_ACC float accumulators, no SCATTER runs, no
 * fast_math (that vectorises the fold itself), and a live f32 function
 * that vmath.c inlines. */
static int kl_strips_ok(kl_cg *g, int mode, int strided)
{
    const kiln_kernel *k = g->k;
    uint32_t nacc = 0;
    if (mode != KL_RSCALAR || strided || g->fast_math)
        return 0;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        if (k->kind == KILN_KERNEL_LOOP && k->out_roles[j] == KILN_ROLE_SCATTER)
            return 0;
        if (kl_has_acc(k, mode, j)) {
            if (!kl_isf(k->outputs[j].dtype))
                return 0;
            nacc++;
        }
    }
    if (nacc == 0 || nacc > KL_STRIP_ACC)
        return 0;
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (g->live[i] && in->dtype == KILN_F32 &&
            (in->op == KILN_I_EXP || in->op == KILN_I_LOG ||
             in->op == KILN_I_TANH || in->op == KILN_I_SIGMOID))
            return 1;
    }
    return 0;
}

/* The row function `name` (KL_RSCALAR, contiguous) in strips. */
static void kl_emit_fn_strips(kl_cg *g, const char *name)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    LLVMValueRef fn = kl_add_fn(g, name);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
    LLVMBasicBlockRef outer = LLVMAppendBasicBlockInContext(g->ctx, fn, "strip");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
    LLVMBasicBlockRef fold = LLVMAppendBasicBlockInContext(g->ctx, fn, "fold");
    LLVMBasicBlockRef fend = LLVMAppendBasicBlockInContext(g->ctx, fn, "next");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "exit");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef n = LLVMGetParam(fn, 0), ptrs = LLVMGetParam(fn, 1),
                 st = LLVMGetParam(fn, 2), rt = LLVMGetParam(fn, 3),
                 accp = LLVMGetParam(fn, 4);
    uint32_t nv = k->n_inputs + k->n_outputs, no = k->n_outputs;
    kl_loopctx lc = {0};
    lc.strided = 0;
    lc.vec = 1;
    lc.fn = fn;
    kl_lc_alloc(&lc, nv, k->n_instrs);
    LLVMValueRef rtfn[KILN_I_COUNT] = {0};
    lc.rtfn = rtfn;
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        size_t off = kl_rt_offset(in->op);
        if (g->live[i] && off && !rtfn[in->op])
            rtfn[in->op] = kl_rt_fn(g, rt, off, kl_rt_type(g, in->op));
    }
    uint8_t *need = calloc(nv, 1);
    kl_need_views(g, KL_RSCALAR, need);
    for (uint32_t v = 0; v < nv; v++)
        if (need[v])
            kl_view_base(g, &lc, ptrs, st, v, NULL);
    /* per accumulator: its identity, buffer and phis */
    LLVMValueRef *ident = calloc(7 * (size_t)no + 1, sizeof *ident);
    LLVMValueRef *buf = ident + no, *acco = buf + no, *accf = acco + no,
                 *accf2 = accf + no, *dummy = accf2 + no, *junk = dummy + no;
    LLVMTypeRef bt = LLVMArrayType(g->t_f64, KL_STRIP);
    for (uint32_t j = 0; j < no; j++) {
        if (!kl_has_acc(k, KL_RSCALAR, j))
            continue;
        ident[j] = kl_identity(g, KILN_F64, k->reduce_op);
        buf[j] = LLVMBuildBitCast(b, LLVMBuildAlloca(b, bt, "strip"),
                                  LLVMPointerType(g->t_f64, 0), "");
        dummy[j] = ident[j];
    }
    LLVMValueRef zero = LLVMConstInt(g->t_i64, 0, 0);
    LLVMValueRef one = LLVMConstInt(g->t_i64, 1, 0);
    LLVMValueRef sn = LLVMConstInt(g->t_i64, KL_STRIP, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, ""), outer, exit);

    /* strip: [s0, e) */
    LLVMPositionBuilderAtEnd(b, outer);
    LLVMValueRef s0 = LLVMBuildPhi(b, g->t_i64, "s0");
    for (uint32_t j = 0; j < no; j++)
        if (ident[j])
            acco[j] = LLVMBuildPhi(b, g->t_f64, "acc");
    LLVMValueRef rem = LLVMBuildSub(b, n, s0, "");
    LLVMValueRef len = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, rem, sn, ""),
                                       rem, sn, "");
    LLVMValueRef e = LLVMBuildAdd(b, s0, len, "");
    LLVMBuildBr(b, loop);

    /* the program, the elementwise outputs, the fold operands buffered */
    LLVMPositionBuilderAtEnd(b, loop);
    lc.j = LLVMBuildPhi(b, g->t_i64, "j");
    kl_emit_program(g, &lc);
    LLVMValueRef bi = LLVMBuildSub(b, lc.j, s0, "");
    for (uint32_t j = 0; j < no; j++) {
        if (!ident[j])
            continue;
        LLVMValueRef x = lc.val[k->out_refs[j]];
        if (k->outputs[j].dtype == KILN_F32)
            x = LLVMBuildFPExt(b, x, g->t_f64, "");
        LLVMBuildStore(b, x, LLVMBuildGEP2(b, g->t_f64, buf[j], &bi, 1, ""));
    }
    /* (the folds it emits into `junk` are dead) */
    kl_emit_outputs(g, &lc, KL_RSCALAR, 0, dummy, junk);
    LLVMValueRef j1 = LLVMBuildAdd(b, lc.j, one, "");
    LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(b);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j1, e, ""), loop, fold);
    LLVMValueRef in_j[2] = {s0, j1};
    LLVMBasicBlockRef in_jb[2] = {outer, loop_end};
    LLVMAddIncoming(lc.j, in_j, in_jb, 2);

    /* the folds, in order */
    LLVMPositionBuilderAtEnd(b, fold);
    LLVMValueRef i = LLVMBuildPhi(b, g->t_i64, "i");
    for (uint32_t j = 0; j < no; j++)
        if (ident[j])
            accf[j] = LLVMBuildPhi(b, g->t_f64, "acc");
    for (uint32_t j = 0; j < no; j++) {
        if (!ident[j])
            continue;
        LLVMValueRef x = LLVMBuildLoad2(b, g->t_f64, LLVMBuildGEP2(
                                            b, g->t_f64, buf[j], &i, 1, ""), "");
        accf2[j] = kl_fold(g, KILN_F64, k->reduce_op, accf[j], x);
    }
    LLVMValueRef i1 = LLVMBuildAdd(b, i, one, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i1, len, ""), fold, fend);
    LLVMValueRef in_i[2] = {zero, i1};
    LLVMBasicBlockRef in_ib[2] = {loop_end, fold};
    LLVMAddIncoming(i, in_i, in_ib, 2);
    for (uint32_t j = 0; j < no; j++) {
        if (!ident[j])
            continue;
        LLVMValueRef in_a[2] = {acco[j], accf2[j]};
        LLVMAddIncoming(accf[j], in_a, in_ib, 2);
    }

    LLVMPositionBuilderAtEnd(b, fend);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, e, n, ""), outer, exit);
    LLVMValueRef in_s[2] = {zero, e};
    LLVMBasicBlockRef in_sb[2] = {entry, fend};
    LLVMAddIncoming(s0, in_s, in_sb, 2);
    for (uint32_t j = 0; j < no; j++) {
        if (!ident[j])
            continue;
        LLVMValueRef in_a[2] = {ident[j], accf2[j]};
        LLVMAddIncoming(acco[j], in_a, in_sb, 2);
    }

    /* accumulator j at byte 8 j of acc (kl_reduce_body's array) */
    LLVMPositionBuilderAtEnd(b, exit);
    LLVMValueRef *res = junk;
    for (uint32_t j = 0; j < no; j++) {
        if (!ident[j])
            continue;
        res[j] = LLVMBuildPhi(b, g->t_f64, "res");
        LLVMValueRef in_a[2] = {ident[j], accf2[j]};
        LLVMAddIncoming(res[j], in_a, in_sb, 2);
    }
    for (uint32_t j = 0; j < no; j++) {
        if (!ident[j])
            continue;
        LLVMValueRef off = LLVMConstInt(g->t_i64, 8ull * j, 0);
        LLVMValueRef ap = LLVMBuildGEP2(b, g->t_i8, accp, &off, 1, "");
        ap = LLVMBuildBitCast(b, ap, LLVMPointerType(g->t_f64, 0), "");
        LLVMBuildStore(b, res[j], ap);
    }
    LLVMBuildRetVoid(b);
    free(ident);
    kl_lc_free(&lc);
    free(need);
}

#endif /* !KL_FRONT */
