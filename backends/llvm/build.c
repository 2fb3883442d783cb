/*
 * build.c — one kernel's LLVM module: which row functions its kind gets
 * (the dispatch by kind, kl_build), optimisation, and the object or the
 * IR text (kl_codegen).
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* A LOOP kernel's row functions: kiln_lc / kiln_ls (contiguous /
 * strided; REDUCE outputs folded into scalar accumulators), kiln_luc /
 * kiln_lus (REDUCE outputs folded along a kept axis) and kiln_lk, the
 * index check: only the instructions that indices depend on, every
 * TAKE's and SCATTER's range tested (a TAKE whose value no index needs
 * is tested, not loaded: live mark 1 in the check's own live set).
 * Returns 0, or -1 out of memory. */
static int kl_emit_loop(kl_cg *g, void (*emit)(kl_cg *, const char *, int, int))
{
    const kiln_kernel *k = g->k;
    int mode = kl_loop_reduces(k) ? KL_RSCALAR : KL_EW;
    emit(g, "kiln_lc", mode, 0);
    emit(g, "kiln_ls", mode, 1);
    if (kl_keeps_axis(k)) {
        emit(g, "kiln_luc", KL_RROW, 0);
        emit(g, "kiln_lus", KL_RROW, 1);
    }
    if (!kl_loop_checks(k))
        return 0;
    uint8_t *sl = calloc(k->n_instrs + 1, 1);
    if (!sl)
        return -1;
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_SCATTER)
            sl[k->out_index[j]] = 2;
    for (uint32_t i = k->n_instrs; i-- > 0;) {
        const kiln_instr *in = &k->instrs[i];
        if (in->op == KILN_I_TAKE && g->live[i] && !sl[i])
            sl[i] = 1;
        if (!sl[i])
            continue;
        for (unsigned a = 0; a < kiln_interp_ops[in->op].arity; a++)
            sl[kiln_interp_operand(in, a)] = 2;
    }
    const uint8_t *live = g->live;
    g->live = sl;
    kl_emit_fn(g, "kiln_lk", KL_CHECK, 1);
    g->live = live;
    free(sl);
    return 0;
}

/* Build the module of kernel k (checked, with a program) into g->mod. */
static int kl_build(kl_cg *g, char *why, size_t why_n)
{
    const kiln_kernel *k = g->k;
    LLVMContextRef c = g->ctx;
    g->t_i1 = LLVMInt1TypeInContext(c);
    g->t_i8 = LLVMInt8TypeInContext(c);
    g->t_i32 = LLVMInt32TypeInContext(c);
    g->t_i64 = LLVMInt64TypeInContext(c);
    g->t_f32 = LLVMFloatTypeInContext(c);
    g->t_f64 = LLVMDoubleTypeInContext(c);
    g->t_void = LLVMVoidTypeInContext(c);
    g->t_p8 = LLVMPointerType(g->t_i8, 0);
    g->t_pp8 = LLVMPointerType(g->t_p8, 0);
    g->t_p64 = LLVMPointerType(g->t_i64, 0);
    LLVMTypeRef params[5] = {g->t_i64, g->t_pp8, g->t_p64, g->t_p8, g->t_p8};
    g->t_fn = LLVMFunctionType(g->t_void, params, 5, 0);
    LLVMTypeRef sparams[7] = {g->t_i64, g->t_pp8, g->t_p64, g->t_p8, g->t_p8,
                              g->t_i64, g->t_p8};
    g->t_seg = LLVMFunctionType(g->t_void, sparams, 7, 0);
    LLVMTypeRef d1[3] = {g->t_f64, g->t_f64, g->t_f64};
    g->t_d2d = LLVMFunctionType(g->t_f64, d1, 1, 0);
    g->t_dd2d = LLVMFunctionType(g->t_f64, d1, 2, 0);
    g->t_ddd2d = LLVMFunctionType(g->t_f64, d1, 3, 0);
    g->md_scope = LLVMGetMDKindIDInContext(c, "alias.scope", 11);
    g->md_noalias = LLVMGetMDKindIDInContext(c, "noalias", 7);

    /* alias scopes: one for all inputs, one per output, in one domain */
    LLVMMetadataRef dom_ops[1] = {kl_mdstr(g, "kiln.domain")};
    LLVMMetadataRef dom = LLVMMDNodeInContext2(c, dom_ops, 1);
    LLVMMetadataRef in_ops[2] = {kl_mdstr(g, "kiln.inputs"), dom};
    LLVMMetadataRef s_in = LLVMMDNodeInContext2(c, in_ops, 2);
    uint32_t no = k->n_outputs;
    LLVMMetadataRef *s_out = calloc(no + 1, sizeof *s_out);
    LLVMMetadataRef *tmp = calloc(no + 1, sizeof *tmp);
    g->l_out_scope = calloc(no, sizeof *g->l_out_scope);
    g->l_out_noalias = calloc(no, sizeof *g->l_out_noalias);
    if (!s_out || !tmp || !g->l_out_scope || !g->l_out_noalias) {
        free(s_out);
        free(tmp);
        snprintf(why, why_n, "out of memory");
        return -1;
    }
    for (uint32_t j = 0; j < no; j++) {
        char name[48];
        snprintf(name, sizeof name, "kiln.output%u", j);
        LLVMMetadataRef ops[2] = {kl_mdstr(g, name), dom};
        s_out[j] = LLVMMDNodeInContext2(c, ops, 2);
    }
    g->l_in = kl_mdlist(g, &s_in, 1);
    g->l_in_only = g->l_in;
    g->l_outs = kl_mdlist(g, s_out, no);
    for (uint32_t j = 0; j < no; j++) {
        g->l_out_scope[j] = kl_mdlist(g, &s_out[j], 1);
        size_t m = 0;
        tmp[m++] = s_in;
        for (uint32_t q = 0; q < no; q++)
            if (q != j)
                tmp[m++] = s_out[q];
        g->l_out_noalias[j] = kl_mdlist(g, tmp, m);
    }
    free(s_out);
    free(tmp);

    void (*move)(kl_cg *) = k->kind == KILN_KERNEL_GATHER ? kl_emit_gather
                            : k->kind == KILN_KERNEL_JOIN ? kl_emit_join
                            : k->kind == KILN_KERNEL_SCATTER ? kl_emit_scatter
                            : k->kind == KILN_KERNEL_DOT ? kl_emit_dot : NULL;
    if (move || k->kind == KILN_KERNEL_RECUR) {
        /* the kinds without row loops over a space: data movement, and
         * RECUR's one loop over the steps (recur.c, no nests) */
        int oom = move ? (move(g), 0) : kl_emit_recur(g);
        free(g->l_out_scope);
        free(g->l_out_noalias);
        if (oom) {
            snprintf(why, why_n, "out of memory");
            return -1;
        }
        goto verify;
    }
    kl_plan plan;
    if (kl_plan_make(k, g->live, &plan)) {
        free(g->l_out_scope);
        free(g->l_out_noalias);
        snprintf(why, why_n, "out of memory");
        return -1;
    }
    g->plan = &plan;
    void (*emit)(kl_cg *, const char *, int, int) =
        plan.nseg > 1 ? kl_emit_fn_seg : kl_emit_fn;
    if (k->kind == KILN_KERNEL_ELEMWISE) {
        emit(g, "kiln_ec", KL_EW, 0);
        emit(g, "kiln_es", KL_EW, 1);
    } else if (k->kind == KILN_KERNEL_LOOP) {
        if (kl_emit_loop(g, emit)) {
            g->plan = NULL;
            kl_plan_free(&plan);
            free(g->l_out_scope);
            free(g->l_out_noalias);
            snprintf(why, why_n, "out of memory");
            return -1;
        }
    } else {
        emit(g, "kiln_rc", KL_RSCALAR, 0);
        emit(g, "kiln_rs", KL_RSCALAR, 1);
        /* A reduction over every axis never keeps an inner axis: its
         * output's strides are all 0, so kiln_uc/kiln_us would never
         * run (kl_run checks the call's output shape before relying on
         * this). */
        if (!kl_full_reduce(k)) {
            emit(g, "kiln_uc", KL_RROW, 0);
            emit(g, "kiln_us", KL_RROW, 1);
        }
    }
    kl_emit_nests(g);
    g->plan = NULL;
    kl_plan_free(&plan);
    free(g->l_out_scope);
    free(g->l_out_noalias);
verify:;
    char *msg = NULL;
    if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &msg)) {
        snprintf(why, why_n, "invalid IR: %.400s", msg ? msg : "?");
        for (char *q = why; *q; q++)   /* the verifier's text: one line */
            if (*q == '\n' || *q == '\r' || *q == '\t')
                *q = ' ';
        LLVMDisposeMessage(msg);
        return -1;
    }
    LLVMDisposeMessage(msg);
    return 0;
}

/* Build, optimise and then either emit an object (obj != NULL) or print
 * the optimised IR (text != NULL). */
static int kl_codegen(const kiln_kernel *k, const kiln_compile_options *opt,
                      LLVMMemoryBufferRef *obj, char **text,
                      kiln_plugin_error **err)
{
    int level = 2, fast = 0;
    if (opt && opt->struct_size >= offsetof(kiln_compile_options, opt_level) + sizeof(int))
        level = opt->opt_level;
    if (opt && opt->struct_size >= offsetof(kiln_compile_options, fast_math) + sizeof(int))
        fast = opt->fast_math;
    if (level < 0) level = 0;
    if (level > 3) level = 3;
    uint8_t *live = calloc(k->n_instrs ? k->n_instrs : 1, 1);
    if (!live)
        return kl_fail(err, KILN_ERR_NOMEM, "out of memory");
    if (kiln_interp_has_program(k->kind))
        kiln_interp_mark_live(k, live);
    kl_cg g = {0};
    g.k = k;
    g.live = live;
    g.fast_math = fast;
    g.ctx = LLVMContextCreate();
    g.mod = LLVMModuleCreateWithNameInContext("kiln_kernel", g.ctx);
    g.b = LLVMCreateBuilderInContext(g.ctx);
    int rc = 0;
    char why[512];
    LLVMTargetMachineRef tm = NULL;
    LLVMPassBuilderOptionsRef pbo = NULL;
    if (kl_build(&g, why, sizeof why)) {
        rc = kl_fail(err, KILN_ERR_BACKEND, "%s", why);
        goto out;
    }
    LLVMTargetRef target;
    char *terr = NULL;
    if (LLVMGetTargetFromTriple(kl_triple, &target, &terr)) {
        rc = kl_fail(err, KILN_ERR_BACKEND, "no target for %s: %s", kl_triple,
                     terr ? terr : "?");
        LLVMDisposeMessage(terr);
        goto out;
    }
    static const LLVMCodeGenOptLevel cgl[4] = {
        LLVMCodeGenLevelNone, LLVMCodeGenLevelLess, LLVMCodeGenLevelDefault,
        LLVMCodeGenLevelAggressive};
    /* generic_target (ABI 1.3): the baseline CPU of the architecture, so
     * that the code runs on every node of a mixed cluster */
    int generic = opt && opt->struct_size >=
                             offsetof(kiln_compile_options, generic_target) +
                                 sizeof(int) && opt->generic_target;
    tm = LLVMCreateTargetMachine(target, kl_triple,
                                 generic ? "x86-64" : kl_cpu,
                                 generic ? "" : kl_features, cgl[level],
                                 LLVMRelocPIC, LLVMCodeModelJITDefault);
    if (!tm) {
        rc = kl_fail(err, KILN_ERR_BACKEND, "cannot create a target machine");
        goto out;
    }
    LLVMSetTarget(g.mod, kl_triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    char *dl = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(g.mod, dl);
    LLVMDisposeMessage(dl);
    LLVMDisposeTargetData(td);
    if (level > 0) {
        pbo = LLVMCreatePassBuilderOptions();
        LLVMPassBuilderOptionsSetLoopVectorization(pbo, 1);
        LLVMPassBuilderOptionsSetSLPVectorization(pbo, 1);
        LLVMPassBuilderOptionsSetLoopInterleaving(pbo, 1);
        LLVMPassBuilderOptionsSetLoopUnrolling(pbo, 1);
        char passes[32];
        snprintf(passes, sizeof passes, "default<O%d>", level);
        LLVMErrorRef e = LLVMRunPasses(g.mod, passes, tm, pbo);
        if (e) {
            char *m = kl_errmsg(e);
            rc = kl_fail(err, KILN_ERR_BACKEND, "optimisation failed: %s", m);
            LLVMDisposeErrorMessage(m);
            goto out;
        }
    }
    if (text) {
        *text = LLVMPrintModuleToString(g.mod);
    } else {
        char *emsg = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, g.mod, LLVMObjectFile,
                                                &emsg, obj)) {
            rc = kl_fail(err, KILN_ERR_BACKEND, "code generation failed: %s",
                         emsg ? emsg : "?");
            LLVMDisposeMessage(emsg);
            goto out;
        }
    }
out:
    if (pbo)
        LLVMDisposePassBuilderOptions(pbo);
    if (tm)
        LLVMDisposeTargetMachine(tm);
    LLVMDisposeBuilder(g.b);
    LLVMDisposeModule(g.mod);
    LLVMContextDispose(g.ctx);
    free(live);
    return rc;
}

#endif /* !KL_FRONT */
