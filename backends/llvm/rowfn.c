/*
 * rowfn.c — helpers of the data-movement row functions (GATHER, JOIN,
 * SCATTER, DOT): a row function's parameters, ptrs[v] / st[v] loads, a
 * counted loop, index loads, the index-check row, index wrapping.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* ---- helpers of the data-movement row functions (GATHER, JOIN,
 * SCATTER, DOT): a row function's parameters, ptrs[v] / st[v] loads and
 * a counted loop ---- */

typedef struct kl_rowfn {
    LLVMValueRef fn, n, ptrs, st, rt, acc;
} kl_rowfn;

/* Declare row function `name` and position the builder in its entry. */
static void kl_rowfn_begin(kl_cg *g, const char *name, kl_rowfn *r)
{
    r->fn = kl_add_fn(g, name);
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, r->fn,
                                                                 "entry"));
    r->n = LLVMGetParam(r->fn, 0);
    r->ptrs = LLVMGetParam(r->fn, 1);
    r->st = LLVMGetParam(r->fn, 2);
    r->rt = LLVMGetParam(r->fn, 3);
    r->acc = LLVMGetParam(r->fn, 4);
}

/* ptrs[v] as a pointer to elements of type t. */
static LLVMValueRef kl_ptr_arg(kl_cg *g, const kl_rowfn *r, unsigned v,
                               LLVMTypeRef t)
{
    LLVMValueRef idx = LLVMConstInt(g->t_i64, v, 0);
    LLVMValueRef p = LLVMBuildLoad2(g->b, g->t_p8, LLVMBuildGEP2(
                                        g->b, g->t_p8, r->ptrs, &idx, 1, ""), "");
    return LLVMBuildBitCast(g->b, p, LLVMPointerType(t, 0), "");
}

/* st[v]. */
static LLVMValueRef kl_st_arg(kl_cg *g, const kl_rowfn *r, unsigned v)
{
    LLVMValueRef idx = LLVMConstInt(g->t_i64, v, 0);
    return LLVMBuildLoad2(g->b, g->t_i64, LLVMBuildGEP2(g->b, g->t_i64, r->st,
                                                        &idx, 1, ""), "");
}

/* for (j = 0; j < n; j++): kl_for_open leaves the builder in the body
 * with j set; kl_for_close ends the body (vectorisation and unrolling
 * off when `scalar`) and leaves the builder after the loop.  pre/end are
 * the blocks a phi after the loop merges (0 trips / the last trip). */
typedef struct kl_for {
    LLVMValueRef n, j;
    LLVMBasicBlockRef pre, body, end, exit;
} kl_for;

static void kl_for_open(kl_cg *g, LLVMValueRef fn, LLVMValueRef n, kl_for *f)
{
    LLVMBuilderRef b = g->b;
    f->n = n;
    f->pre = LLVMGetInsertBlock(b);
    f->body = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
    f->exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, LLVMConstInt(g->t_i64, 0, 0),
                                     ""), f->body, f->exit);
    LLVMPositionBuilderAtEnd(b, f->body);
    f->j = LLVMBuildPhi(b, g->t_i64, "j");
}

static void kl_for_close(kl_cg *g, kl_for *f, int scalar)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef j1 = LLVMBuildAdd(b, f->j, LLVMConstInt(g->t_i64, 1, 0), "");
    f->end = LLVMGetInsertBlock(b);
    LLVMValueRef latch = LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j1, f->n,
                                                          ""), f->body, f->exit);
    if (scalar)
        kl_loop_md(g, latch, 1, KL_EW);
    LLVMValueRef in_j[2] = {LLVMConstInt(g->t_i64, 0, 0), j1};
    LLVMBasicBlockRef in_b[2] = {f->pre, f->end};
    LLVMAddIncoming(f->j, in_j, in_b, 2);
    LLVMPositionBuilderAtEnd(b, f->exit);
}

/* An i1 loop-carried value of a kl_for (phi in the body from `init`,
 * `next` at the end of each trip); returns the value after the loop. */
static LLVMValueRef kl_for_result(kl_cg *g, const kl_for *f, LLVMValueRef phi,
                                  LLVMValueRef init, LLVMValueRef next)
{
    LLVMValueRef in_v[2] = {init, next};
    LLVMBasicBlockRef in_b[2] = {f->pre, f->end};
    LLVMAddIncoming(phi, in_v, in_b, 2);
    LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b);
    LLVMPositionBuilderAtEnd(g->b, f->exit);
    LLVMValueRef r = LLVMBuildPhi(g->b, LLVMTypeOf(init), "");
    LLVMAddIncoming(r, in_v, in_b, 2);
    LLVMPositionBuilderAtEnd(g->b, here);
    return r;
}

/* Index k (type it) as i64. */
static LLVMValueRef kl_load_index(kl_cg *g, LLVMValueRef base, unsigned it,
                                  LLVMValueRef at)
{
    LLVMTypeRef IT = kl_type(g, it);
    LLVMValueRef k = LLVMBuildLoad2(g->b, IT, LLVMBuildGEP2(g->b, IT, base, &at, 1,
                                                           ""), "");
    return it == KILN_I64 ? k : LLVMBuildSExt(g->b, k, g->t_i64, "");
}

/* An index check row (GATHER's kiln_gk, SCATTER's kiln_sk): ptrs {idx},
 * st {idx stride, size}: *acc = 1 when an index of the row is outside
 * [-size, size), else 0 (an OR reduction, vectorised). */
static void kl_emit_idxcheck(kl_cg *g, const char *name, unsigned it)
{
    LLVMBuilderRef b = g->b;
    kl_rowfn r;
    kl_rowfn_begin(g, name, &r);
    LLVMValueRef ix = kl_ptr_arg(g, &r, 0, kl_type(g, it));
    LLVMValueRef is = kl_st_arg(g, &r, 0), size = kl_st_arg(g, &r, 1);
    LLVMValueRef nsize = LLVMBuildNeg(b, size, "");
    LLVMValueRef f0 = LLVMConstInt(g->t_i1, 0, 0);
    kl_for f;
    kl_for_open(g, r.fn, r.n, &f);
    LLVMValueRef bad = LLVMBuildPhi(b, g->t_i1, "bad");
    LLVMValueRef kv = kl_load_index(g, ix, it, LLVMBuildMul(b, f.j, is, ""));
    LLVMValueRef out = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, kv, nsize, ""),
                                   LLVMBuildICmp(b, LLVMIntSGE, kv, size, ""), "");
    LLVMValueRef bad2 = LLVMBuildOr(b, bad, out, "");
    kl_for_close(g, &f, 0);
    LLVMValueRef res = kl_for_result(g, &f, bad, f0, bad2);
    LLVMBuildStore(b, LLVMBuildZExt(b, res, g->t_i8, ""), r.acc);
    LLVMBuildRetVoid(b);
}

/* k + size when k < 0 (an index already checked to be in range). */
static LLVMValueRef kl_wrap_index(kl_cg *g, LLVMValueRef k, LLVMValueRef size)
{
    LLVMValueRef neg = LLVMBuildICmp(g->b, LLVMIntSLT, k, LLVMConstInt(g->t_i64, 0, 0),
                                     "");
    return LLVMBuildAdd(g->b, k, LLVMBuildSelect(g->b, neg, size,
                                                 LLVMConstInt(g->t_i64, 0, 0), ""),
                        "");
}

#endif /* !KL_FRONT */
