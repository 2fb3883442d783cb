/*
 * instr.c — one scalar instruction as LLVM IR, the scalar program, and a
 * reduction's fold and identity (the interpreter's arithmetic).
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* Instruction i of the scalar program at index j (operands in lc->val). */
static LLVMValueRef kl_emit_instr(kl_cg *g, kl_loopctx *lc, uint32_t i)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    {
        const kiln_instr *in = &k->instrs[i];
        unsigned dt = in->dtype;
        LLVMValueRef x = NULL, y = NULL, z = NULL, r = NULL;
        unsigned arity = in->op == KILN_I_TAKE ? 0 : kiln_interp_ops[in->op].arity;
        if (arity > 0) x = lc->val[in->a];
        if (arity > 1) y = lc->val[in->b];
        if (arity > 2) z = lc->val[in->c];
        unsigned odt = arity > 0 ? k->instrs[in->a].dtype : dt;
        int f = kl_isf(dt), isint = dt == KILN_I64 || dt == KILN_I32;
        switch (in->op) {
        case KILN_I_LOAD:
        case KILN_I_TAKE: {
            LLVMValueRef p, idx;
            if (in->op == KILN_I_LOAD) {
                idx = kl_index(g, lc, (uint32_t)in->a);
                p = LLVMBuildGEP2(b, kl_type(g, dt), lc->base[in->a], &idx, 1, "");
            } else {
                /* element b of table a (an index known to be in range,
                 * or tested here by the check function) */
                uint32_t t = (uint32_t)in->a;
                LLVMValueRef bad = NULL;
                LLVMValueRef kx = kl_norm_index(g, lc, lc->val[in->b],
                                                k->instrs[in->b].dtype, t, &bad);
                if (lc->check && g->live[i] == 1) {
                    r = LLVMGetUndef(kl_rtype(g, dt));  /* tested, not read */
                    break;
                }
                idx = LLVMBuildMul(b, kx, lc->tst[t], "");
                p = LLVMBuildGEP2(b, kl_type(g, dt), lc->base[t], &idx, 1, "");
                if (bad)
                    p = LLVMBuildSelect(b, bad, LLVMBuildBitCast(
                                            b, lc->safe, LLVMPointerType(
                                                kl_type(g, dt), 0), ""), p, "");
            }
            r = LLVMBuildLoad2(b, kl_type(g, dt), p, "");
            if (!lc->strided)
                kl_md(g, r, g->l_in, g->l_outs);
            if (dt == KILN_BOOL)
                r = LLVMBuildICmp(b, LLVMIntNE, r, LLVMConstNull(g->t_i8), "");
            break;
        }
        case KILN_I_CONST: r = kl_const(g, dt, in->imm); break;
        case KILN_I_PARAM: r = kl_param(g, lc, in); break;
        case KILN_I_CAST: r = kl_cast(g, x, odt, dt); break;
        case KILN_I_ADD: r = f ? LLVMBuildFAdd(b, x, y, "") : LLVMBuildAdd(b, x, y, ""); break;
        case KILN_I_SUB: r = f ? LLVMBuildFSub(b, x, y, "") : LLVMBuildSub(b, x, y, ""); break;
        case KILN_I_MUL: r = f ? LLVMBuildFMul(b, x, y, "") : LLVMBuildMul(b, x, y, ""); break;
        case KILN_I_TRUE_DIV: r = LLVMBuildFDiv(b, x, y, ""); break;
        case KILN_I_NEG:
            r = f ? LLVMBuildFNeg(b, x, "")
                  : LLVMBuildSub(b, LLVMConstNull(kl_type(g, dt)), x, "");
            break;
        case KILN_I_ABS:
            if (f) {
                r = kl_intrinsic(g, "llvm.fabs", kl_type(g, dt), x);
            } else {
                LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, x,
                                                 LLVMConstNull(kl_type(g, dt)), "");
                r = LLVMBuildSelect(b, neg, LLVMBuildSub(b, LLVMConstNull(
                                        kl_type(g, dt)), x, ""), x, "");
            }
            break;
        case KILN_I_SQUARE: r = f ? LLVMBuildFMul(b, x, x, "") : LLVMBuildMul(b, x, x, ""); break;
        case KILN_I_SQRT:
            /* correctly rounded, like libm's sqrt; for f32,
             * (float)sqrt((double)x) == sqrtf(x) */
            r = kl_intrinsic(g, "llvm.sqrt", kl_type(g, dt), x);
            break;
        case KILN_I_MOD:
            if (!f) {
                r = kl_imod(g, dt, x, y);
                break;
            }
            /* fall through */
        case KILN_I_POW: case KILN_I_GAMMAINC: case KILN_I_GAMMAINCC:
        case KILN_I_GAMMAINC_DA: case KILN_I_BETAINC:
        case KILN_I_BETAINC_DA: case KILN_I_BETAINC_DB: {
            LLVMValueRef a3[3] = {x, y, z};
            unsigned na = kiln_interp_ops[in->op].arity;
            for (unsigned q = 0; q < na && dt == KILN_F32; q++)
                a3[q] = LLVMBuildFPExt(b, a3[q], g->t_f64, "");
            r = LLVMBuildCall2(b, na == 3 ? g->t_ddd2d : g->t_dd2d,
                               lc->rtfn[in->op], a3, na, "");
            if (dt == KILN_F32)
                r = LLVMBuildFPTrunc(b, r, g->t_f32, "");
            break;
        }
        case KILN_I_MAXIMUM: r = kl_maxmin(g, 1, dt, x, y); break;
        case KILN_I_MINIMUM: r = kl_maxmin(g, 0, dt, x, y); break;
        case KILN_I_WHERE: r = LLVMBuildSelect(b, x, y, z, ""); break;
        case KILN_I_EQ: case KILN_I_NE: case KILN_I_LT: case KILN_I_LE:
        case KILN_I_GT: case KILN_I_GE: {
            int q = in->op - KILN_I_EQ;
            if (kl_isf(odt)) {
                static const LLVMRealPredicate fp[6] = {
                    LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE,
                    LLVMRealOGT, LLVMRealOGE};
                r = LLVMBuildFCmp(b, fp[q], x, y, "");
            } else {
                static const LLVMIntPredicate sp[6] = {
                    LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT,
                    LLVMIntSGE};
                static const LLVMIntPredicate up[6] = {
                    LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT,
                    LLVMIntUGE};
                r = LLVMBuildICmp(b, odt == KILN_BOOL ? up[q] : sp[q], x, y, "");
            }
            break;
        }
        case KILN_I_AND: r = LLVMBuildAnd(b, x, y, ""); break;
        case KILN_I_OR: r = LLVMBuildOr(b, x, y, ""); break;
        case KILN_I_NOT: r = LLVMBuildXor(b, x, LLVMConstInt(g->t_i1, 1, 0), ""); break;
        default: { /* unary runtime functions */
            if (dt == KILN_F32 && lc->vec && (r = kl_vmath_f32(g, in->op, x)))
                break;  /* inline, vectorisable (vmath.c) */
            LLVMValueRef a1 = dt == KILN_F32 ? LLVMBuildFPExt(b, x, g->t_f64, "") : x;
            r = LLVMBuildCall2(b, g->t_d2d, lc->rtfn[in->op], &a1, 1, "");
            if (dt == KILN_F32)
                r = LLVMBuildFPTrunc(b, r, g->t_f32, "");
            break;
        }
        }
        (void)isint;
        return r;
    }
}

/* The scalar program at index j. */
static void kl_emit_program(kl_cg *g, kl_loopctx *lc)
{
    for (uint32_t i = 0; i < g->k->n_instrs; i++)
        if (g->live[i])
            lc->val[i] = kl_emit_instr(g, lc, i);
}

/* Fold v into acc (the interpreter's block accumulator arithmetic). */
static LLVMValueRef kl_fold(kl_cg *g, unsigned dt, uint32_t op,
                            LLVMValueRef acc, LLVMValueRef v)
{
    LLVMBuilderRef b = g->b;
    int f = kl_isf(dt);
    switch (op) {
    case KILN_REDUCE_PROD:
        if (dt == KILN_BOOL) return LLVMBuildAnd(b, acc, v, "");
        return f ? LLVMBuildFMul(b, acc, v, "") : LLVMBuildMul(b, acc, v, "");
    case KILN_REDUCE_MAX: return kl_maxmin(g, 1, dt, acc, v);
    case KILN_REDUCE_MIN: return kl_maxmin(g, 0, dt, acc, v);
    default:
        if (dt == KILN_BOOL) return LLVMBuildOr(b, acc, v, "");
        return f ? LLVMBuildFAdd(b, acc, v, "") : LLVMBuildAdd(b, acc, v, "");
    }
}

static LLVMValueRef kl_identity(kl_cg *g, unsigned accdt, uint32_t op)
{
    unsigned char v[8];
    kiln_interp_identity(accdt, op == KILN_REDUCE_MEAN ? KILN_REDUCE_SUM : op, v);
    switch (accdt) {
    case KILN_F64: { double d; memcpy(&d, v, 8); return LLVMConstReal(g->t_f64, d); }
    case KILN_I64: { int64_t i; memcpy(&i, v, 8); return LLVMConstInt(g->t_i64, (unsigned long long)i, 1); }
    case KILN_I32: { int32_t i; memcpy(&i, v, 4); return LLVMConstInt(g->t_i32, (unsigned long long)(int64_t)i, 1); }
    default: return LLVMConstInt(g->t_i1, v[0] != 0, 0);
    }
}

#endif /* !KL_FRONT */
