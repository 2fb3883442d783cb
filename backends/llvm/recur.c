/*
 * recur.c — RECUR kernels with a program (ABI 1.10): the fused scan loop
 * as one LLVM function, and its runner.
 *
 *     void kiln_rr(int64_t T, void **ptrs, const int64_t *st,
 *                  const kiln_runtime *rt, void *acc)
 *
 * (the row signature; acc unused).  ptrs holds every view's data
 * (inputs, then outputs), st[v] view v's axis-0 stride in elements (0
 * for the rank-0 views).  The entry block loads the carries' initial
 * values, the args and the runtime functions once; the loop over t has
 * one phi per carry, and a LOAD is that phi, the arg's value, or element
 * t of a sequence (t * st[v]); every other live instruction is
 * kl_emit_instr's, as in the row functions, so each operation is the
 * interpreter's.  The stacked outputs get their element t, then the phis
 * take the new carries (all at once, as the contract says); the exit
 * block stores the final carries (the initial ones when T = 0).  Loads
 * of sequences and stores of stacked rows carry build.c's alias scopes
 * (outputs alias nothing).  No vectorisation is asked for: each step
 * depends on the last.
 *
 * The front: kl_run_recur (fn) checks the call with the interpreter's
 * kiln_interp_recur_check (T, lengths, no aliasing) and its runtime
 * check, fills ptrs and st on the stack (up to KL_RR_STACK views) and
 * calls kiln_rr once; a prepared call (kl_rplan) keeps T and st and only
 * swaps the data pointers.  A program of more than KL_SEG instructions
 * is refused (kernel.c): kiln_rr is never cut into segments.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  The codegen half is compiled into the compiler
 * module (llvm_codegen.so), the front half into the plugin (llvm.so,
 * -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* A view's typed base pointer: ptrs[v] as a pointer to its dtype. */
static LLVMValueRef kl_rr_base(kl_cg *g, LLVMValueRef ptrs, uint32_t v,
                               unsigned dt)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef idx = LLVMConstInt(g->t_i64, v, 0);
    LLVMValueRef p = LLVMBuildLoad2(b, g->t_p8, LLVMBuildGEP2(
                                        b, g->t_p8, ptrs, &idx, 1, ""), "");
    return LLVMBuildBitCast(b, p, LLVMPointerType(kl_type(g, dt), 0), "");
}

/* Load a value of dtype dt at p (bool: a byte, in a register as i1). */
static LLVMValueRef kl_rr_load(kl_cg *g, unsigned dt, LLVMValueRef p)
{
    LLVMValueRef x = LLVMBuildLoad2(g->b, kl_type(g, dt), p, "");
    if (dt == KILN_BOOL)
        x = LLVMBuildICmp(g->b, LLVMIntNE, x, LLVMConstNull(g->t_i8), "");
    return x;
}

static LLVMValueRef kl_rr_store(kl_cg *g, unsigned dt, LLVMValueRef x,
                                LLVMValueRef p)
{
    if (dt == KILN_BOOL)
        x = LLVMBuildZExt(g->b, x, g->t_i8, "");
    return LLVMBuildStore(g->b, x, p);
}

/* kiln_rr: the whole scan in one function (g->live marks the program's
 * live instructions).  Returns 0, or -1 out of memory. */
static int kl_emit_recur(kl_cg *g)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    uint32_t nc = k->n_carry, ns = k->n_seq, ni = k->n_inputs,
             no = k->n_outputs, nv = ni + no;
    LLVMValueRef fn = kl_add_fn(g, "kiln_rr");
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(g->ctx, fn, "step");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "exit");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef T = LLVMGetParam(fn, 0), ptrs = LLVMGetParam(fn, 1),
                 st = LLVMGetParam(fn, 2), rt = LLVMGetParam(fn, 3);
    kl_loopctx lc = {0};
    lc.strided = 1;
    lc.fn = fn;
    lc.val = calloc(k->n_instrs, sizeof *lc.val);
    LLVMValueRef *base = calloc(nv, sizeof *base),
                 *stride = calloc(nv, sizeof *stride),
                 *value = calloc(ni + 1, sizeof *value),   /* carries, args */
                 *phi = calloc(nc + 1, sizeof *phi);
    uint8_t *used = calloc(nv, 1);
    if (!lc.val || !base || !stride || !value || !phi || !used) {
        free(lc.val);
        free(base);
        free(stride);
        free(value);
        free(phi);
        free(used);
        return -1;
    }
    LLVMValueRef rtfn[KILN_I_COUNT] = {0};
    lc.rtfn = rtfn;
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!g->live[i])
            continue;
        if (in->op == KILN_I_LOAD)
            used[in->a] = 1;
        size_t off = kl_rt_offset(in->op);
        if (off && !rtfn[in->op])
            rtfn[in->op] = kl_rt_fn(g, rt, off, kl_rt_type(g, in->op));
    }
    /* the carries (always: T = 0 stores them), the args and sequences
     * the program reads, every output */
    for (uint32_t v = 0; v < nv; v++) {
        int out = v >= ni;
        unsigned dt = out ? k->outputs[v - ni].dtype : k->inputs[v].dtype;
        if (!out && v >= nc && !used[v])
            continue;
        base[v] = kl_rr_base(g, ptrs, v, dt);
        int rank1 = out ? v - ni >= nc : v >= nc && v < nc + ns;
        if (rank1) {
            LLVMValueRef x = LLVMConstInt(g->t_i64, v, 0);
            stride[v] = LLVMBuildLoad2(b, g->t_i64, LLVMBuildGEP2(
                                           b, g->t_i64, st, &x, 1, ""), "");
        } else if (!out) {
            value[v] = kl_rr_load(g, dt, base[v]);
        }
    }
    LLVMValueRef zero = LLVMConstInt(g->t_i64, 0, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, T, zero, ""), loop, exit);

    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef t = LLVMBuildPhi(b, g->t_i64, "t");
    for (uint32_t c = 0; c < nc; c++)
        phi[c] = LLVMBuildPhi(b, kl_rtype(g, k->inputs[c].dtype), "carry");
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!g->live[i])
            continue;
        if (in->op != KILN_I_LOAD) {
            lc.val[i] = kl_emit_instr(g, &lc, i);
            continue;
        }
        uint32_t a = (uint32_t)in->a;
        if (a < nc) {
            lc.val[i] = phi[a];
        } else if (a < nc + ns) {
            LLVMValueRef idx = LLVMBuildMul(b, t, stride[a], "");
            LLVMValueRef p = LLVMBuildGEP2(b, kl_type(g, in->dtype), base[a],
                                           &idx, 1, "");
            LLVMValueRef x = LLVMBuildLoad2(b, kl_type(g, in->dtype), p, "");
            kl_md(g, x, g->l_in, g->l_outs);
            if (in->dtype == KILN_BOOL)
                x = LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstNull(g->t_i8), "");
            lc.val[i] = x;
        } else {
            lc.val[i] = value[a];
        }
    }
    for (uint32_t j = nc; j < no; j++) {
        uint32_t v = ni + j;
        unsigned dt = k->outputs[j].dtype;
        LLVMValueRef idx = LLVMBuildMul(b, t, stride[v], "");
        LLVMValueRef p = LLVMBuildGEP2(b, kl_type(g, dt), base[v], &idx, 1, "");
        LLVMValueRef s = kl_rr_store(g, dt, lc.val[k->out_refs[j]], p);
        kl_md(g, s, g->l_out_scope[j], g->l_out_noalias[j]);
    }
    LLVMValueRef t1 = LLVMBuildAdd(b, t, LLVMConstInt(g->t_i64, 1, 0), "");
    LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(b);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t1, T, ""), loop, exit);
    LLVMBasicBlockRef in_b[2] = {entry, loop_end};
    LLVMValueRef in_t[2] = {zero, t1};
    LLVMAddIncoming(t, in_t, in_b, 2);
    for (uint32_t c = 0; c < nc; c++) {
        LLVMValueRef in_c[2] = {value[c], lc.val[k->out_refs[c]]};
        LLVMAddIncoming(phi[c], in_c, in_b, 2);
    }

    LLVMPositionBuilderAtEnd(b, exit);
    for (uint32_t c = 0; c < nc; c++) {   /* the phis lead the block */
        phi[c] = LLVMBuildPhi(b, kl_rtype(g, k->inputs[c].dtype), "final");
        LLVMValueRef in_c[2] = {value[c], lc.val[k->out_refs[c]]};
        LLVMAddIncoming(phi[c], in_c, in_b, 2);
    }
    for (uint32_t c = 0; c < nc; c++) {
        LLVMValueRef s = kl_rr_store(g, k->outputs[c].dtype, phi[c],
                                     base[ni + c]);
        kl_md(g, s, g->l_out_scope[c], g->l_out_noalias[c]);
    }
    LLVMBuildRetVoid(b);
    free(lc.val);
    free(base);
    free(stride);
    free(value);
    free(phi);
    free(used);
    return 0;
}

#endif /* !KL_FRONT */

#ifdef KL_FRONT

#define KL_RR_STACK 64   /* views whose ptrs / st an unprepared call keeps
                            on its stack */

/* Every view's data into ptrs and axis-0 stride into st (0 at rank 0). */
static void kl_rr_views(const kiln_call *call, void **ptrs, int64_t *st)
{
    uint32_t ni = call->n_inputs, nv = ni + call->n_outputs;
    for (uint32_t v = 0; v < nv; v++) {
        const kiln_view *w = v < ni ? &call->inputs[v] : &call->outputs[v - ni];
        ptrs[v] = w->data;
        if (st)
            st[v] = w->rank > 0 ? w->strides[0] : 0;
    }
}

/* fn: the interpreter's checks, then one call of kiln_rr. */
static int kl_run_recur(const kiln_interp_run *r, const kl_state *ls)
{
    int64_t T = 0;
    int rc = kiln_interp_recur_check(r, &T);
    if (rc || (rc = kiln_interp_check_runtime(r)))
        return rc;
    const kiln_call *call = r->call;
    uint32_t nv = call->n_inputs + call->n_outputs;
    void *sp[KL_RR_STACK];
    int64_t ss[KL_RR_STACK];
    void **ptrs = sp;
    int64_t *st = ss;
    if (nv > KL_RR_STACK) {
        ptrs = malloc(nv * (sizeof *ptrs + sizeof *st));
        if (!ptrs)
            return kiln_interp_fail(r, KILN_ERR_NOMEM, "%s: out of memory",
                                    r->label);
        st = (int64_t *)(void *)(ptrs + nv);
    }
    kl_rr_views(call, ptrs, st);
    ls->c(T, ptrs, st, call->rt, NULL);
    if (ptrs != sp)
        free(ptrs);
    return 0;
}

/* A prepared RECUR call: T and the strides, fixed by the prepared
 * views; ptrs and st follow the struct. */
typedef struct kl_rplan {
    kl_planhead h;
    kl_row_fn rr;
    int64_t T;
    void **ptrs;
    int64_t *st;
} kl_rplan;

static int kl_rplan_run(void *plan, const kiln_call *call)
{
    kl_rplan *p = plan;
    kl_rr_views(call, p->ptrs, NULL);
    p->rr(p->T, p->ptrs, p->st, call->rt, NULL);
    return 0;
}

/* prepare: r's call checked (kiln_interp_check_call, the runtime) with
 * prepare's own message buffer; 1 when the call is refused (fn then
 * reports it). */
static int kl_rplan_make(const kiln_interp_run *r, const kl_state *ls,
                         void **out)
{
    int64_t T = 0;
    if (!ls->c || kiln_interp_recur_check(r, &T))
        return 1;
    uint32_t nv = r->call->n_inputs + r->call->n_outputs;
    kl_rplan *p = malloc(sizeof *p + nv * (sizeof(void *) + sizeof(int64_t)));
    if (!p)
        return 1;
    p->h.run = kl_rplan_run;
    p->rr = ls->c;
    p->T = T;
    p->ptrs = (void **)(void *)(p + 1);
    p->st = (int64_t *)(void *)(p->ptrs + nv);
    kl_rr_views(r->call, p->ptrs, p->st);
    *out = p;
    return 0;
}

#endif /* KL_FRONT */
