/*
 * dot.c — DOT: the row functions kiln_db (BLAS) and kiln_dl (the
 * interpreter's triple loop), and their runner and plan.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Its code generation (row functions as LLVM IR) is
 * compiled into the compiler module llvm_codegen.so, its runner into the
 * plugin llvm.so (-DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* DOT as two row functions, ptrs {a, b, c}:
 *   kiln_db  BLAS: st {transa, transb, m, n, k, lda, ldb, ldc}, a call of
 *            rt->dgemm / rt->sgemm (alpha 1, beta 0), the arguments the
 *            interpreter passes, computed once per shape signature
 *   kiln_dl  any strides (negative, broadcast): st {rows, cols, inner,
 *            a strides, b strides, c strides (two each)}, the
 *            interpreter's triple loop summing in double in order. */
static void kl_emit_dot(kl_cg *g)
{
    LLVMBuilderRef b = g->b;
    unsigned dt = g->k->outputs[0].dtype;
    int f64 = dt == KILN_F64;
    LLVMTypeRef T = kl_type(g, dt), PT = LLVMPointerType(T, 0);
    kl_rowfn r;
    kl_rowfn_begin(g, "kiln_db", &r);
    LLVMTypeRef gp[13] = {g->t_i32, g->t_i32, g->t_i64, g->t_i64, g->t_i64, T, PT,
                          g->t_i64, PT, g->t_i64, T, PT, g->t_i64};
    LLVMTypeRef gty = LLVMFunctionType(g->t_void, gp, 13, 0);
    LLVMValueRef gemm = kl_rt_fn(g, r.rt, f64 ? offsetof(kiln_runtime, dgemm)
                                              : offsetof(kiln_runtime, sgemm), gty);
    LLVMValueRef st[9];
    for (unsigned v = 0; v < 8; v++)
        st[v] = kl_st_arg(g, &r, v);
    LLVMValueRef args[13] = {
        LLVMBuildTrunc(b, st[0], g->t_i32, ""), LLVMBuildTrunc(b, st[1], g->t_i32, ""),
        st[2], st[3], st[4], LLVMConstReal(T, 1.0), kl_ptr_arg(g, &r, 0, T), st[5],
        kl_ptr_arg(g, &r, 1, T), st[6], LLVMConstReal(T, 0.0), kl_ptr_arg(g, &r, 2, T),
        st[7]};
    LLVMBuildCall2(b, gty, gemm, args, 13, "");
    LLVMBuildRetVoid(b);

    kl_rowfn_begin(g, "kiln_dl", &r);
    LLVMValueRef pa = kl_ptr_arg(g, &r, 0, T), pb = kl_ptr_arg(g, &r, 1, T),
                 pc = kl_ptr_arg(g, &r, 2, T);
    for (unsigned v = 0; v < 9; v++)
        st[v] = kl_st_arg(g, &r, v);
    kl_for fi, fj, fp;
    kl_for_open(g, r.fn, st[0], &fi);
    kl_for_open(g, r.fn, st[1], &fj);
    LLVMValueRef zero = LLVMConstReal(g->t_f64, 0.0);
    kl_for_open(g, r.fn, st[2], &fp);
    LLVMValueRef acc = LLVMBuildPhi(b, g->t_f64, "acc");
    LLVMValueRef ao = LLVMBuildAdd(b, LLVMBuildMul(b, fi.j, st[3], ""),
                                   LLVMBuildMul(b, fp.j, st[4], ""), "");
    LLVMValueRef bo = LLVMBuildAdd(b, LLVMBuildMul(b, fp.j, st[5], ""),
                                   LLVMBuildMul(b, fj.j, st[6], ""), "");
    LLVMValueRef x = LLVMBuildLoad2(b, T, LLVMBuildGEP2(b, T, pa, &ao, 1, ""), "");
    LLVMValueRef y = LLVMBuildLoad2(b, T, LLVMBuildGEP2(b, T, pb, &bo, 1, ""), "");
    if (!f64) {
        x = LLVMBuildFPExt(b, x, g->t_f64, "");
        y = LLVMBuildFPExt(b, y, g->t_f64, "");
    }
    LLVMValueRef acc2 = LLVMBuildFAdd(b, acc, LLVMBuildFMul(b, x, y, ""), "");
    kl_for_close(g, &fp, 1);
    LLVMValueRef sum = kl_for_result(g, &fp, acc, zero, acc2);
    if (!f64)
        sum = LLVMBuildFPTrunc(b, sum, g->t_f32, "");
    LLVMValueRef co = LLVMBuildAdd(b, LLVMBuildMul(b, fi.j, st[7], ""),
                                   LLVMBuildMul(b, fj.j, st[8], ""), "");
    LLVMBuildStore(b, sum, LLVMBuildGEP2(b, T, pc, &co, 1, ""));
    kl_for_close(g, &fj, 1);
    kl_for_close(g, &fi, 1);
    LLVMBuildRetVoid(b);
}

#else /* KL_FRONT */

/* DOT: the interpreter's matrices and BLAS decision, once; a call is
 * one call of the runtime's gemm (kiln_interp_gemm, the arguments kiln_db
 * would pass) or of kiln_dl (the loop) with the plan's st. */
typedef struct kl_dplan {
    kl_planhead h;
    kl_row_fn row;            /* NULL: an empty product */
    int blas;                 /* st is kiln_db's: the runtime's gemm */
    int batched;              /* ABI 1.11: the runtime's gemm_batched */
    const char *label;        /* the kernel's, for messages (batched) */
    int64_t st[9];
} kl_dplan;

static int kl_dplan_init(kl_dplan *dp, const kiln_interp_run *r, const kl_state *ls)
{
    kiln_interp_mat A = {0}, B = {0}, C = {0};  /* (set by dot_mats; gcc cannot tell) */
    memset(dp, 0, sizeof *dp);
    if (r->call->outputs[0].rank > 2) {
        /* the BLAS decisions are the runtime's (core/runtime/
         * gemm_batched.c), made per call from the views */
        dp->batched = 1;
        dp->label = r->label;
        return 0;
    }
    int rc = kiln_interp_dot_mats(r, &A, &B, &C);
    if (rc)
        return rc;
    if (C.rows == 0 || C.cols == 0)
        return 0;
    if (kiln_interp_dot_blas(r->rt, (unsigned)r->call->outputs[0].dtype, &A, &B, &C)) {
        int64_t st[8] = {A.trans, B.trans, C.rows, C.cols, A.cols, A.ld, B.ld, C.ld};
        memcpy(dp->st, st, sizeof st);
        dp->row = ls->c;
        dp->blas = 1;
    } else {
        int64_t st[9] = {A.rows, B.cols, A.cols, A.s0, A.s1, B.s0, B.s1, C.s0, C.s1};
        memcpy(dp->st, st, sizeof st);
        dp->row = ls->s;
    }
    return 0;
}

static int kl_dplan_run(void *plan, const kiln_call *call)
{
    const kl_dplan *dp = plan;
    if (dp->batched)
        return kiln_interp_dot_batched(call->rt, call, dp->label);
    if (dp->blas) {
        /* from here rather than kiln_db: the runtime's dgemm_rt (ABI 1.8)
         * takes the table, which generated code does not pass on */
        kiln_interp_gemm(call->rt, (unsigned)call->outputs[0].dtype, dp->st,
                         call->inputs[0].data, call->inputs[1].data,
                         call->outputs[0].data);
    } else if (dp->row) {
        void *p[3] = {call->inputs[0].data, call->inputs[1].data,
                      call->outputs[0].data};
        dp->row(0, p, dp->st, call->rt, NULL);
    }
    return 0;
}

static int kl_dot(const kiln_interp_run *r, const kl_state *ls)
{
    kl_dplan dp;
    int rc = kl_dplan_init(&dp, r, ls);
    return rc ? rc : kl_dplan_run(&dp, r->call);
}

#endif /* KL_FRONT */
