/*
 * cg.c — the code generator's state (kl_cg, one kernel's LLVM context,
 * module and builder; kl_loopctx, one loop body's values) and its value
 * helpers: types, constants, intrinsics, runtime-table calls, casts,
 * maximum/minimum, index normalisation, metadata.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

typedef struct kl_cg {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const kiln_kernel *k;
    const uint8_t *live;
    const struct kl_plan *plan;  /* segments of a wide program */
    LLVMTypeRef t_seg;           /* a segment function */
    LLVMValueRef *seg_base, *seg_stride, *seg_val, *seg_tmp, *seg_tst,
        *seg_tsize;
    uint32_t *seg_stamp, *seg_vmark;
    int fast_math;
    LLVMTypeRef t_i1, t_i8, t_i32, t_i64, t_f32, t_f64, t_void, t_p8,
        t_pp8, t_p64, t_fn, t_d2d, t_dd2d, t_ddd2d;
    unsigned md_scope, md_noalias;
    LLVMValueRef l_in, l_outs, *l_out_scope, *l_out_noalias, l_in_only;
} kl_cg;

static LLVMTypeRef kl_type(const kl_cg *g, unsigned dt)
{
    switch (dt) {
    case KILN_F64: return g->t_f64;
    case KILN_F32: return g->t_f32;
    case KILN_I64: return g->t_i64;
    case KILN_I32: return g->t_i32;
    default: return g->t_i8;
    }
}

/* Register type of a value: bool lives as i1 in registers. */
static LLVMTypeRef kl_rtype(const kl_cg *g, unsigned dt)
{
    return dt == KILN_BOOL ? g->t_i1 : kl_type(g, dt);
}

static int kl_isf(unsigned dt) { return dt == KILN_F64 || dt == KILN_F32; }

/* An immediate as the interpreter converts it (kiln_interp_cast from f64). */
static LLVMValueRef kl_const(const kl_cg *g, unsigned dt, double imm)
{
    unsigned char v[8];
    double one = imm;
    kiln_interp_cast(KILN_F64, dt, v, &one, 1);
    switch (dt) {
    case KILN_F64: { double d; memcpy(&d, v, 8); return LLVMConstReal(g->t_f64, d); }
    case KILN_F32: { float f; memcpy(&f, v, 4); return LLVMConstReal(g->t_f32, (double)f); }
    case KILN_I64: { int64_t i; memcpy(&i, v, 8); return LLVMConstInt(g->t_i64, (unsigned long long)i, 1); }
    case KILN_I32: { int32_t i; memcpy(&i, v, 4); return LLVMConstInt(g->t_i32, (unsigned long long)(int64_t)i, 1); }
    default: return LLVMConstInt(g->t_i1, v[0] != 0, 0);
    }
}

static LLVMValueRef kl_intrinsic(kl_cg *g, const char *name, LLVMTypeRef t,
                                 LLVMValueRef x)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(g->ctx, id, &t, 1);
    return LLVMBuildCall2(g->b, fty, fn, &x, 1, "");
}

/* A runtime-table function pointer, loaded in the entry block. */
static LLVMValueRef kl_rt_fn(kl_cg *g, LLVMValueRef rt, size_t off,
                             LLVMTypeRef fty)
{
    LLVMValueRef idx = LLVMConstInt(g->t_i64, off, 0);
    LLVMValueRef p = LLVMBuildGEP2(g->b, g->t_i8, rt, &idx, 1, "");
    LLVMTypeRef pfty = LLVMPointerType(fty, 0);
    p = LLVMBuildBitCast(g->b, p, LLVMPointerType(pfty, 0), "");
    LLVMValueRef f = LLVMBuildLoad2(g->b, pfty, p, "");
    LLVMSetMetadata(f, LLVMGetMDKindIDInContext(g->ctx, "invariant.load", 14),
                    LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, NULL, 0)));
    return f;
}

static size_t kl_rt_offset(unsigned op)
{
    switch (op) {
    case KILN_I_EXP: return offsetof(kiln_runtime, exp);
    case KILN_I_EXPM1: return offsetof(kiln_runtime, expm1);
    case KILN_I_LOG: return offsetof(kiln_runtime, log);
    case KILN_I_LOG1P: return offsetof(kiln_runtime, log1p);
    case KILN_I_POW: return offsetof(kiln_runtime, pow);
    case KILN_I_SIGMOID: return offsetof(kiln_runtime, sigmoid);
    case KILN_I_SOFTPLUS: return offsetof(kiln_runtime, softplus);
    case KILN_I_TANH: return offsetof(kiln_runtime, tanh);
    case KILN_I_SIN: return offsetof(kiln_runtime, sin);
    case KILN_I_COS: return offsetof(kiln_runtime, cos);
    case KILN_I_ERF: return offsetof(kiln_runtime, erf);
    case KILN_I_ERFC: return offsetof(kiln_runtime, erfc);
    case KILN_I_GAMMALN: return offsetof(kiln_runtime, gammaln);
    case KILN_I_DIGAMMA: return offsetof(kiln_runtime, digamma);
    case KILN_I_TRIGAMMA: return offsetof(kiln_runtime, trigamma);
    /* runtime version 3 (ABI 1.7) */
    case KILN_I_FLOOR: return offsetof(kiln_runtime, floor);
    case KILN_I_CEIL: return offsetof(kiln_runtime, ceil);
    case KILN_I_TRUNC: return offsetof(kiln_runtime, trunc);
    case KILN_I_RINT: return offsetof(kiln_runtime, rint);
    case KILN_I_ROUND: return offsetof(kiln_runtime, round);
    case KILN_I_LOG1MEXP: return offsetof(kiln_runtime, log1mexp);
    case KILN_I_ERFCX: return offsetof(kiln_runtime, erfcx);
    case KILN_I_ERFINV: return offsetof(kiln_runtime, erfinv);
    case KILN_I_ERFCINV: return offsetof(kiln_runtime, erfcinv);
    case KILN_I_MOD: return offsetof(kiln_runtime, mod);
    case KILN_I_GAMMAINC: return offsetof(kiln_runtime, gammainc);
    case KILN_I_GAMMAINCC: return offsetof(kiln_runtime, gammaincc);
    case KILN_I_BETAINC: return offsetof(kiln_runtime, betainc);
    case KILN_I_GAMMAINC_DA: return offsetof(kiln_runtime, gammainc_da);
    case KILN_I_BETAINC_DA: return offsetof(kiln_runtime, betainc_da);
    case KILN_I_BETAINC_DB: return offsetof(kiln_runtime, betainc_db);
    /* runtime version 5 (ABI 1.9) */
    case KILN_I_I0E: return offsetof(kiln_runtime, i0e);
    case KILN_I_I1E: return offsetof(kiln_runtime, i1e);
    default: return 0;
    }
}

/* The type of the runtime function behind `op` (its float arity). */
static LLVMTypeRef kl_rt_type(kl_cg *g, unsigned op)
{
    unsigned n = kiln_interp_ops[op].arity;
    return n == 3 ? g->t_ddd2d : n == 2 ? g->t_dd2d : g->t_d2d;
}

/* NumPy's integer remainder (the interpreter's KILN_INTERP_IMOD): the
 * sign of y; 0 for y = 0 and y = -1 (no srem trap or overflow). */
static LLVMValueRef kl_imod(kl_cg *g, unsigned dt, LLVMValueRef x,
                            LLVMValueRef y)
{
    LLVMBuilderRef b = g->b;
    LLVMTypeRef t = kl_type(g, dt);
    LLVMValueRef zero = LLVMConstNull(t), one = LLVMConstInt(t, 1, 0);
    LLVMValueRef m1 = LLVMConstAllOnes(t);
    LLVMValueRef bad = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntEQ, y, zero, ""),
                                   LLVMBuildICmp(b, LLVMIntEQ, y, m1, ""), "");
    LLVMValueRef ys = LLVMBuildSelect(b, bad, one, y, "");
    LLVMValueRef r = LLVMBuildSRem(b, x, ys, "");
    LLVMValueRef fix = LLVMBuildAnd(
        b, LLVMBuildICmp(b, LLVMIntNE, r, zero, ""),
        LLVMBuildICmp(b, LLVMIntNE, LLVMBuildICmp(b, LLVMIntSLT, r, zero, ""),
                      LLVMBuildICmp(b, LLVMIntSLT, ys, zero, ""), ""), "");
    r = LLVMBuildSelect(b, fix, LLVMBuildAdd(b, r, ys, ""), r, "");
    return LLVMBuildSelect(b, bad, zero, r, "");
}

static void kl_md(kl_cg *g, LLVMValueRef inst, LLVMValueRef scope,
                  LLVMValueRef noalias)
{
    LLVMSetMetadata(inst, g->md_scope, scope);
    LLVMSetMetadata(inst, g->md_noalias, noalias);
}

/* float -> int as the interpreter: truncate; NaN / out of range -> MIN. */
static LLVMValueRef kl_f2i(kl_cg *g, LLVMValueRef x, unsigned from,
                           unsigned to)
{
    LLVMBuilderRef b = g->b;
    if (from == KILN_F32)
        x = LLVMBuildFPExt(b, x, g->t_f64, "");
    LLVMTypeRef it = kl_type(g, to);
    double lo = to == KILN_I64 ? -0x1p63 : -2147483649.0;
    double hi = to == KILN_I64 ? 0x1p63 : 2147483648.0;
    LLVMValueRef ok1 = LLVMBuildFCmp(b, to == KILN_I64 ? LLVMRealOGE : LLVMRealOGT,
                                     x, LLVMConstReal(g->t_f64, lo), "");
    LLVMValueRef ok2 = LLVMBuildFCmp(b, LLVMRealOLT, x,
                                     LLVMConstReal(g->t_f64, hi), "");
    LLVMValueRef ok = LLVMBuildAnd(b, ok1, ok2, "");
    /* fptosi of an out-of-range value is poison; select discards it */
    LLVMValueRef v = LLVMBuildFPToSI(b, x, it, "");
    LLVMValueRef mn = to == KILN_I64
        ? LLVMConstInt(it, (unsigned long long)INT64_MIN, 1)
        : LLVMConstInt(it, (unsigned long long)(int64_t)INT32_MIN, 1);
    return LLVMBuildSelect(b, ok, v, mn, "");
}

static LLVMValueRef kl_cast(kl_cg *g, LLVMValueRef x, unsigned from,
                            unsigned to)
{
    LLVMBuilderRef b = g->b;
    if (from == to)
        return x;
    if (to == KILN_BOOL) {
        if (kl_isf(from))
            return LLVMBuildFCmp(b, LLVMRealUNE, x,
                                 LLVMConstReal(kl_type(g, from), 0.0), "");
        return LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstNull(kl_type(g, from)), "");
    }
    if (from == KILN_BOOL) {
        if (kl_isf(to))
            return LLVMBuildUIToFP(b, x, kl_type(g, to), "");
        return LLVMBuildZExt(b, x, kl_type(g, to), "");
    }
    if (kl_isf(from) && kl_isf(to))
        return to == KILN_F64 ? LLVMBuildFPExt(b, x, g->t_f64, "")
                              : LLVMBuildFPTrunc(b, x, g->t_f32, "");
    if (kl_isf(from))
        return kl_f2i(g, x, from, to);
    if (kl_isf(to))
        return LLVMBuildSIToFP(b, x, kl_type(g, to), "");
    return to == KILN_I64 ? LLVMBuildSExt(b, x, g->t_i64, "")
                          : LLVMBuildTrunc(b, x, g->t_i32, "");
}

/* NumPy maximum/minimum (NaN on either side wins) and the integer /
 * bool versions, exactly as the interpreter's macros. */
static LLVMValueRef kl_maxmin(kl_cg *g, int is_max, unsigned dt,
                              LLVMValueRef x, LLVMValueRef y)
{
    LLVMBuilderRef b = g->b;
    if (dt == KILN_BOOL)
        return is_max ? LLVMBuildOr(b, x, y, "") : LLVMBuildAnd(b, x, y, "");
    LLVMValueRef c;
    if (kl_isf(dt)) {
        LLVMValueRef cmp = LLVMBuildFCmp(b, is_max ? LLVMRealOGT : LLVMRealOLT,
                                         x, y, "");
        LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
        c = LLVMBuildOr(b, cmp, nan, "");
    } else {
        c = LLVMBuildICmp(b, is_max ? LLVMIntSGT : LLVMIntSLT, x, y, "");
    }
    return LLVMBuildSelect(b, c, x, y, "");
}

typedef struct kl_loopctx {
    LLVMValueRef j;            /* the loop index */
    LLVMValueRef *base;        /* typed base pointer per view (or NULL) */
    LLVMValueRef *stride;      /* inner stride per view (strided) */
    LLVMValueRef *rtfn;        /* runtime fn pointer per opcode */
    LLVMValueRef *val;         /* value per instruction */
    int strided;
    /* the loop will be vectorised (a contiguous elementwise row or fold
     * along a kept axis, or a scalar fold under fast_math): f32 exp, log,
     * tanh, sigmoid are then inline (vmath.c); in a scalar loop the
     * runtime's libm call is faster (measured 3x) and stays */
    int vec;
    /* LOOP kernels: per TABLE / SCATTER view its element stride and
     * extent (st[nv + v], st[2 nv + v]); the check function (KL_CHECK)
     * ORs every index's range test into `bad` and loads a TAKE whose
     * index is bad from `safe` (a zeroed stack slot) instead */
    LLVMValueRef *tst, *tsize;
    LLVMValueRef bad, safe;
    int check;
    /* SCATTER outputs run in a register (kl_emit_fn): per output j the
     * current target's index (-1: none yet) and running value, as phis
     * at the top of the element (run_k, run_v) and after it (run_k2,
     * run_v2); NULL: every add goes through memory (segments) */
    LLVMValueRef *run_k, *run_v, *run_k2, *run_v2;
    LLVMValueRef fn;
} kl_loopctx;

/* A row function's per-view and per-instruction arrays (nv views). */
static void kl_lc_alloc(kl_loopctx *lc, uint32_t nv, uint32_t n_instrs)
{
    lc->base = calloc(nv, sizeof *lc->base);
    lc->stride = calloc(nv, sizeof *lc->stride);
    lc->tst = calloc(nv, sizeof *lc->tst);
    lc->tsize = calloc(nv, sizeof *lc->tsize);
    lc->val = calloc(n_instrs, sizeof *lc->val);
}

static void kl_lc_free(kl_loopctx *lc)
{
    free(lc->base);
    free(lc->stride);
    free(lc->tst);
    free(lc->tsize);
    free(lc->val);
}

/* A lifted literal (ABI 1.8): element in->a of the constant block, whose
 * pointer the host's runner puts after the views' (ptrs[nv], parameter 1
 * of every row and segment function), loaded and converted in the
 * function's entry block: once per row, never per element, and the
 * value is then a loop invariant like an immediate. */
static LLVMValueRef kl_param(kl_cg *g, kl_loopctx *lc, const kiln_instr *in)
{
    LLVMBuilderRef b = g->b;
    LLVMBasicBlockRef here = LLVMGetInsertBlock(b);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(lc->fn);
    LLVMValueRef term = LLVMGetBasicBlockTerminator(entry);
    if (term)
        LLVMPositionBuilderBefore(b, term);
    else
        LLVMPositionBuilderAtEnd(b, entry);
    uint32_t nv = g->k->n_inputs + g->k->n_outputs;
    LLVMValueRef idx = LLVMConstInt(g->t_i64, nv, 0);
    LLVMValueRef p = LLVMBuildLoad2(b, g->t_p8, LLVMBuildGEP2(
                                        b, g->t_p8, LLVMGetParam(lc->fn, 1),
                                        &idx, 1, ""), "");
    p = LLVMBuildBitCast(b, p, LLVMPointerType(g->t_f64, 0), "");
    LLVMValueRef slot = LLVMConstInt(g->t_i64, (unsigned long long)in->a, 0);
    LLVMValueRef v = LLVMBuildLoad2(b, g->t_f64, LLVMBuildGEP2(
                                        b, g->t_f64, p, &slot, 1, ""), "");
    if (in->dtype == KILN_F32)
        v = LLVMBuildFPTrunc(b, v, g->t_f32, "");
    LLVMPositionBuilderAtEnd(b, here);
    return v;
}

static LLVMValueRef kl_index(kl_cg *g, const kl_loopctx *lc, uint32_t v)
{
    return lc->strided ? LLVMBuildMul(g->b, lc->j, lc->stride[v], "") : lc->j;
}

/* Output j folds into an accumulator in `mode` (a scalar reduction). */
static int kl_has_acc(const kiln_kernel *k, int mode, uint32_t j)
{
    return mode == KL_RSCALAR && kl_role(k, k->n_inputs + j) == KILN_ROLE_REDUCE;
}

/* Output j's base pointer is used in `mode`. */
static int kl_out_used(const kiln_kernel *k, int mode, uint32_t j)
{
    unsigned r = kl_role(k, k->n_inputs + j);
    if (mode == KL_CHECK)
        return r == KILN_ROLE_SCATTER;
    return r == KILN_ROLE_REDUCE ? mode == KL_RROW : 1;
}

/* An index (i64/i32 value x) into an indexed view v, negative counting
 * from the end; in the check function its range test joins lc->bad
 * (the interpreter's: x < -size || x >= size).  Returns the index in
 * [0, size) when it is in range, and sets *badp to its test (check). */
static LLVMValueRef kl_norm_index(kl_cg *g, kl_loopctx *lc, LLVMValueRef x,
                                  unsigned xdt, uint32_t v, LLVMValueRef *badp)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef zero = LLVMConstInt(g->t_i64, 0, 0);
    if (xdt != KILN_I64)
        x = LLVMBuildSExt(b, x, g->t_i64, "");
    LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, x, zero, "");
    x = LLVMBuildAdd(b, x, LLVMBuildSelect(b, neg, lc->tsize[v], zero, ""), "");
    if (lc->check) {
        /* x + size < 0 or x >= size: unsigned x >= size */
        LLVMValueRef bad = LLVMBuildICmp(b, LLVMIntUGE, x, lc->tsize[v], "");
        lc->bad = LLVMBuildOr(b, lc->bad, bad, "");
        *badp = bad;
    }
    return x;
}

static LLVMMetadataRef kl_mdstr(kl_cg *g, const char *s)
{
    return LLVMMDStringInContext2(g->ctx, s, strlen(s));
}

static LLVMValueRef kl_mdlist(kl_cg *g, LLVMMetadataRef *m, size_t n)
{
    return LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, m, n));
}

#endif /* !KL_FRONT */
