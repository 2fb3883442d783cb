/*
 * vmath.c — f32 exp, log, tanh and sigmoid as straight-line LLVM IR
 * (no calls, no branches), so that the loop vectoriser can turn an
 * elementwise row of them into SIMD code.
 *
 * Without it an f32 transcendental was an indirect call per element
 * through the runtime table (kiln_runtime.exp etc., f64 functions) with
 * an fpext/fptrunc around it: the call blocks vectorisation of the whole
 * row, and the f32 row additionally pays the conversions.
 *
 * Method: each function is evaluated in f64 arithmetic (vectors of f64)
 * and rounded once to f32, so the f64 error (a few 1e-16 relative, the
 * rounding of the Horner steps) is far under f32's half ulp (3e-8): the
 * result is the correctly rounded f32 of the true value except when that
 * value lies within ~1e-15 relative of a
 * rounding boundary, where it may be the other neighbour — an error
 * bound of 0.5 ulp + 2^-20 ulp, the same as the other backends'
 * (float)exp((double)x) through libm, and in practice bit-identical to
 * them.  Special values follow C99 Annex F / NumPy: exp(-inf) = 0,
 * exp(+inf) = inf, log(0) = -inf, log(x < 0) = NaN, log(inf) = inf,
 * tanh(+-0) = +-0, tanh(+-inf) = +-1, NaN in gives NaN out.
 *
 *   exp(u): Cody-Waite argument reduction u = n ln2 + r, n = rint(u /
 *     ln2), |r| <= ln2 / 2, with ln2 split in a high part with trailing
 *     zero bits (so n * ln2_hi is exact for |n| < 2^11) and a low part
 *     (the split of fdlibm's e_exp.c); e^r - 1 by its Taylor series to
 *     degree 13 (remainder < r^14/14! < 3e-18 for |r| <= 0.347); 2^n
 *     built in the exponent bits.  expm1(u) = 2^n (e^r - 1) + (2^n - 1)
 *     keeps relative accuracy near 0 (tanh of small x).  Inputs are
 *     clamped to [-110, 90]: beyond, the f32 result is 0 / inf anyway.
 *   log(x): x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh s,
 *     s = (m-1)/(m+1), |s| <= 0.1716, by the atanh series to s^21
 *     (remainder < 2 s^23/23 < 1e-19 relative to 2s), plus e ln2.
 *   tanh(x) = sign(x) t, t = expm1(2|x|) / (expm1(2|x|) + 2), |x| clamped
 *     to 20 (tanh = 1 in f32 from |x| > 9.01).
 *   sigmoid(x): e = exp(-|x|), s = 1 / (1 + e); x >= 0 ? s : e s (no
 *     overflow, no cancellation; the runtime's kiln_sigmoid rounded).
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives.  Compiled into the compiler module only (llvm_codegen.so;
 * without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

static LLVMValueRef kl_d(const kl_cg *g, double v)
{
    return LLVMConstReal(g->t_f64, v);
}

/* A two-operand f64 intrinsic (llvm.copysign). */
static LLVMValueRef kl_intrinsic2(kl_cg *g, const char *name, LLVMValueRef x,
                                  LLVMValueRef y)
{
    LLVMTypeRef t = g->t_f64;
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(g->ctx, id, &t, 1);
    LLVMValueRef a[2] = {x, y};
    return LLVMBuildCall2(g->b, fty, fn, a, 2, "");
}

/* c[0] + x (c[1] + x (c[2] + ... x c[n-1])), each step one
 * llvm.fmuladd (a fused multiply-add where the CPU has one: the f64
 * result differs in its last bits, far below the f32 rounding) */
static LLVMValueRef kl_horner(kl_cg *g, LLVMValueRef x, const double *c, int n)
{
    static const char name[] = "llvm.fmuladd";
    LLVMTypeRef t = g->t_f64;
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(g->ctx, id, &t, 1);
    LLVMValueRef p = kl_d(g, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) {
        LLVMValueRef a[3] = {p, x, kl_d(g, c[i])};
        p = LLVMBuildCall2(g->b, fty, fn, a, 3, "");
    }
    return p;
}

/* x with NaN replaced by 0, then clamped to [lo, hi] (f64). */
static LLVMValueRef kl_clamp(kl_cg *g, LLVMValueRef x, double lo, double hi)
{
    LLVMBuilderRef b = g->b;
    x = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), kl_d(g, 0), x, "");
    x = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, kl_d(g, lo), ""),
                        kl_d(g, lo), x, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, kl_d(g, hi), ""),
                           kl_d(g, hi), x, "");
}

/* e^u (m1 = 0) or e^u - 1 (m1 = 1) of a finite f64 u in [-110, 90]. */
static LLVMValueRef kl_vexp(kl_cg *g, LLVMValueRef u, int m1)
{
    static const double c[13] = {   /* 1/k!, k = 1..13 */
        1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
        1.0 / 479001600, 1.0 / 6227020800.0};
    LLVMBuilderRef b = g->b;
    LLVMValueRef n = kl_intrinsic(g, "llvm.rint", g->t_f64,
                                  LLVMBuildFMul(b, u, kl_d(g, 0x1.71547652b82fep0), ""));
    /* fdlibm's ln2 split: ln2_hi has its low 32 bits zero */
    LLVMValueRef r = LLVMBuildFSub(b, u, LLVMBuildFMul(b, n, kl_d(g, 0x1.62e42feep-1), ""), "");
    r = LLVMBuildFSub(b, r, LLVMBuildFMul(b, n, kl_d(g, 0x1.a39ef35793c76p-33), ""), "");
    LLVMValueRef p = LLVMBuildFMul(b, r, kl_horner(g, r, c, 13), "");  /* e^r - 1 */
    LLVMValueRef ni = LLVMBuildFPToSI(b, n, g->t_i64, "");
    LLVMValueRef bits = LLVMBuildShl(b, LLVMBuildAdd(b, ni, LLVMConstInt(g->t_i64, 1023, 0), ""),
                                     LLVMConstInt(g->t_i64, 52, 0), "");
    LLVMValueRef s = LLVMBuildBitCast(b, bits, g->t_f64, "");   /* 2^n */
    if (!m1)
        return LLVMBuildFAdd(b, s, LLVMBuildFMul(b, s, p, ""), "");
    return LLVMBuildFAdd(b, LLVMBuildFMul(b, s, p, ""),
                         LLVMBuildFSub(b, s, kl_d(g, 1.0), ""), "");
}

/* NaN in -> NaN out: x's NaN (f64) where x is NaN, else r. */
static LLVMValueRef kl_keepnan(kl_cg *g, LLVMValueRef x, LLVMValueRef r)
{
    return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, x, x, ""), x, r, "");
}

static LLVMValueRef kl_vlog(kl_cg *g, LLVMValueRef x)
{
    static const double c[11] = {   /* 2/(2k+1), k = 0..10 */
        2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13,
        2.0 / 15, 2.0 / 17, 2.0 / 19, 2.0 / 21};
    LLVMBuilderRef b = g->b;
    LLVMValueRef bits = LLVMBuildBitCast(b, x, g->t_i64, "");
    LLVMValueRef e = LLVMBuildSub(b, LLVMBuildLShr(b, bits, LLVMConstInt(g->t_i64, 52, 0), ""),
                                  LLVMConstInt(g->t_i64, 1023, 0), "");
    LLVMValueRef mb = LLVMBuildOr(b, LLVMBuildAnd(b, bits, LLVMConstInt(
                                                      g->t_i64, 0xfffffffffffffull, 0), ""),
                                  LLVMConstInt(g->t_i64, 0x3ff0000000000000ull, 0), "");
    LLVMValueRef m = LLVMBuildBitCast(b, mb, g->t_f64, "");       /* [1, 2) */
    LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, m, kl_d(g, 0x1.6a09e667f3bcdp0), "");
    m = LLVMBuildSelect(b, big, LLVMBuildFMul(b, m, kl_d(g, 0.5), ""), m, "");
    e = LLVMBuildAdd(b, e, LLVMBuildZExt(b, big, g->t_i64, ""), "");
    LLVMValueRef s = LLVMBuildFDiv(b, LLVMBuildFSub(b, m, kl_d(g, 1.0), ""),
                                   LLVMBuildFAdd(b, m, kl_d(g, 1.0), ""), "");
    LLVMValueRef lm = LLVMBuildFMul(b, s, kl_horner(g, LLVMBuildFMul(b, s, s, ""), c, 11), "");
    LLVMValueRef ed = LLVMBuildSIToFP(b, e, g->t_f64, "");
    LLVMValueRef r = LLVMBuildFAdd(b, LLVMBuildFMul(b, ed, kl_d(g, 0x1.62e42fefa39efp-1), ""),
                                   lm, "");
    r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, x, kl_d(g, 0), ""),
                        kl_d(g, -INFINITY), r, "");
    r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, kl_d(g, 0), ""),
                        kl_d(g, NAN), r, "");
    r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, x, kl_d(g, INFINITY), ""),
                        x, r, "");
    return kl_keepnan(g, x, r);
}

/* An f32 instruction `op` of x inline (vectorisable), or NULL when `op`
 * has no inline form (it then goes through the runtime table). */
static LLVMValueRef kl_vmath_f32(kl_cg *g, unsigned op, LLVMValueRef x)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef xd, r;
    switch (op) {
    case KILN_I_EXP: case KILN_I_TANH: case KILN_I_SIGMOID: case KILN_I_LOG:
        break;
    default:
        return NULL;
    }
    xd = LLVMBuildFPExt(b, x, g->t_f64, "");
    switch (op) {
    case KILN_I_EXP:
        r = kl_keepnan(g, xd, kl_vexp(g, kl_clamp(g, xd, -110, 90), 0));
        break;
    case KILN_I_LOG:
        r = kl_vlog(g, xd);
        break;
    case KILN_I_TANH: {
        LLVMValueRef a = kl_clamp(g, kl_intrinsic(g, "llvm.fabs", g->t_f64, xd), 0, 20);
        LLVMValueRef em = kl_vexp(g, LLVMBuildFAdd(b, a, a, ""), 1);
        LLVMValueRef t = LLVMBuildFDiv(b, em, LLVMBuildFAdd(b, em, kl_d(g, 2.0), ""), "");
        r = kl_keepnan(g, xd, kl_intrinsic2(g, "llvm.copysign", t, xd));
        break;
    }
    default: {  /* KILN_I_SIGMOID */
        LLVMValueRef a = kl_clamp(g, kl_intrinsic(g, "llvm.fabs", g->t_f64, xd), 0, 110);
        LLVMValueRef e = kl_vexp(g, LLVMBuildFNeg(b, a, ""), 0);
        LLVMValueRef s = LLVMBuildFDiv(b, kl_d(g, 1.0), LLVMBuildFAdd(b, e, kl_d(g, 1.0), ""), "");
        LLVMValueRef neg = LLVMBuildFCmp(b, LLVMRealOLT, xd, kl_d(g, 0), "");
        r = kl_keepnan(g, xd, LLVMBuildSelect(b, neg, LLVMBuildFMul(b, e, s, ""), s, ""));
        break;
    }
    }
    return LLVMBuildFPTrunc(b, r, g->t_f32, "");
}

#endif /* !KL_FRONT */
