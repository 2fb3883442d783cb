/*
 * ops.c — the op registry: names, arity, attributes, dtype promotion and
 * shape inference for every graph op (prefix kiln_ir_).
 *
 * Shape inference runs twice with the same code: when a node is built
 * (dims may be symbolic) and when a function is called with concrete
 * input shapes (ctx->symvals set, every dim concrete), so the checks a
 * call makes are exactly the checks the builder makes.
 *
 * Dtype rules follow NumPy 2 (NEP 50, "Promotion rules for Python
 * scalars"): strong dtypes promote along bool < int < float with width
 * taken into account (i32 + f32 -> f64, as NumPy's type lattice gives);
 * weak scalars (literals) take the category of the strong side.
 */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define E(op, name, cat, lo, hi, code) [op] = {name, cat, lo, hi, code}

static const kiln_op_info op_table[KILN_OP_COUNT] = {
    E(KILN_OP_INPUT, "input", KILN_CAT_LEAF, 0, 0, -1),
    E(KILN_OP_SHARED, "shared", KILN_CAT_LEAF, 0, 0, -1),
    E(KILN_OP_CONST, "const", KILN_CAT_LEAF, 0, 0, -1),
    E(KILN_OP_LITERAL, "literal", KILN_CAT_LEAF, 0, 0, -1),
    E(KILN_OP_ADD, "add", KILN_CAT_ELEMWISE, 2, -1, KILN_I_ADD),
    E(KILN_OP_SUB, "sub", KILN_CAT_ELEMWISE, 2, 2, KILN_I_SUB),
    E(KILN_OP_MUL, "mul", KILN_CAT_ELEMWISE, 2, -1, KILN_I_MUL),
    E(KILN_OP_TRUE_DIV, "true_div", KILN_CAT_ELEMWISE, 2, 2, KILN_I_TRUE_DIV),
    E(KILN_OP_NEG, "neg", KILN_CAT_ELEMWISE, 1, 1, KILN_I_NEG),
    E(KILN_OP_ABS, "abs", KILN_CAT_ELEMWISE, 1, 1, KILN_I_ABS),
    E(KILN_OP_EXP, "exp", KILN_CAT_ELEMWISE, 1, 1, KILN_I_EXP),
    E(KILN_OP_EXPM1, "expm1", KILN_CAT_ELEMWISE, 1, 1, KILN_I_EXPM1),
    E(KILN_OP_LOG, "log", KILN_CAT_ELEMWISE, 1, 1, KILN_I_LOG),
    E(KILN_OP_LOG1P, "log1p", KILN_CAT_ELEMWISE, 1, 1, KILN_I_LOG1P),
    E(KILN_OP_SQRT, "sqrt", KILN_CAT_ELEMWISE, 1, 1, KILN_I_SQRT),
    E(KILN_OP_SQUARE, "square", KILN_CAT_ELEMWISE, 1, 1, KILN_I_SQUARE),
    E(KILN_OP_POW, "pow", KILN_CAT_ELEMWISE, 2, 2, KILN_I_POW),
    E(KILN_OP_SIGMOID, "sigmoid", KILN_CAT_ELEMWISE, 1, 1, KILN_I_SIGMOID),
    E(KILN_OP_SOFTPLUS, "softplus", KILN_CAT_ELEMWISE, 1, 1, KILN_I_SOFTPLUS),
    E(KILN_OP_TANH, "tanh", KILN_CAT_ELEMWISE, 1, 1, KILN_I_TANH),
    E(KILN_OP_SIN, "sin", KILN_CAT_ELEMWISE, 1, 1, KILN_I_SIN),
    E(KILN_OP_COS, "cos", KILN_CAT_ELEMWISE, 1, 1, KILN_I_COS),
    E(KILN_OP_ERF, "erf", KILN_CAT_ELEMWISE, 1, 1, KILN_I_ERF),
    E(KILN_OP_ERFC, "erfc", KILN_CAT_ELEMWISE, 1, 1, KILN_I_ERFC),
    E(KILN_OP_GAMMALN, "gammaln", KILN_CAT_ELEMWISE, 1, 1, KILN_I_GAMMALN),
    E(KILN_OP_DIGAMMA, "digamma", KILN_CAT_ELEMWISE, 1, 1, KILN_I_DIGAMMA),
    E(KILN_OP_MAXIMUM, "maximum", KILN_CAT_ELEMWISE, 2, 2, KILN_I_MAXIMUM),
    E(KILN_OP_MINIMUM, "minimum", KILN_CAT_ELEMWISE, 2, 2, KILN_I_MINIMUM),
    E(KILN_OP_WHERE, "where", KILN_CAT_ELEMWISE, 3, 3, KILN_I_WHERE),
    E(KILN_OP_EQ, "eq", KILN_CAT_ELEMWISE, 2, 2, KILN_I_EQ),
    E(KILN_OP_NE, "ne", KILN_CAT_ELEMWISE, 2, 2, KILN_I_NE),
    E(KILN_OP_LT, "lt", KILN_CAT_ELEMWISE, 2, 2, KILN_I_LT),
    E(KILN_OP_LE, "le", KILN_CAT_ELEMWISE, 2, 2, KILN_I_LE),
    E(KILN_OP_GT, "gt", KILN_CAT_ELEMWISE, 2, 2, KILN_I_GT),
    E(KILN_OP_GE, "ge", KILN_CAT_ELEMWISE, 2, 2, KILN_I_GE),
    E(KILN_OP_AND, "and", KILN_CAT_ELEMWISE, 2, 2, KILN_I_AND),
    E(KILN_OP_OR, "or", KILN_CAT_ELEMWISE, 2, 2, KILN_I_OR),
    E(KILN_OP_NOT, "not", KILN_CAT_ELEMWISE, 1, 1, KILN_I_NOT),
    E(KILN_OP_CAST, "cast", KILN_CAT_ELEMWISE, 1, 1, KILN_I_CAST),
    E(KILN_OP_SUM, "sum", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_PROD, "prod", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_MAX, "max", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_MIN, "min", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_MEAN, "mean", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_LOGSUMEXP, "logsumexp", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_RESHAPE, "reshape", KILN_CAT_SHAPE, 1, 1, -1),
    E(KILN_OP_TRANSPOSE, "transpose", KILN_CAT_SHAPE, 1, 1, -1),
    E(KILN_OP_EXPAND_DIMS, "expand_dims", KILN_CAT_SHAPE, 1, 1, -1),
    E(KILN_OP_SQUEEZE, "squeeze", KILN_CAT_SHAPE, 1, 1, -1),
    E(KILN_OP_BROADCAST_TO, "broadcast_to", KILN_CAT_SHAPE, 1, 1, -1),
    E(KILN_OP_ALLOC, "alloc", KILN_CAT_SHAPE, 1, 1, -1),
    E(KILN_OP_ZEROS, "zeros", KILN_CAT_SHAPE, 0, 0, -1),
    E(KILN_OP_ONES, "ones", KILN_CAT_SHAPE, 0, 0, -1),
    E(KILN_OP_JOIN, "join", KILN_CAT_SHAPE, 1, -1, -1),
    E(KILN_OP_STACK, "stack", KILN_CAT_SHAPE, 1, -1, -1),
    E(KILN_OP_SUBTENSOR, "subtensor", KILN_CAT_INDEX, 1, 1, -1),
    E(KILN_OP_TAKE, "take", KILN_CAT_INDEX, 2, 2, -1),
    E(KILN_OP_SET_SUBTENSOR, "set_subtensor", KILN_CAT_INDEX, 2, 2, -1),
    E(KILN_OP_INC_SUBTENSOR, "inc_subtensor", KILN_CAT_INDEX, 2, 2, -1),
    E(KILN_OP_ADVANCED_SET_SUBTENSOR, "advanced_set_subtensor",
      KILN_CAT_INDEX, 3, 3, -1),
    E(KILN_OP_ADVANCED_INC_SUBTENSOR, "advanced_inc_subtensor",
      KILN_CAT_INDEX, 3, 3, -1),
    E(KILN_OP_DOT, "dot", KILN_CAT_DOT, 2, 2, -1),
    E(KILN_OP_MATMUL, "matmul", KILN_CAT_DOT, 2, 2, -1),
    E(KILN_OP_FILL, "fill", KILN_CAT_ELEMWISE, 2, 2, -1),
    E(KILN_OP_TRIGAMMA, "trigamma", KILN_CAT_ELEMWISE, 1, 1, KILN_I_TRIGAMMA),
    /* issue 25, opscheck */
    E(KILN_OP_ALL, "all", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_ANY, "any", KILN_CAT_REDUCE, 1, 1, -1),
    E(KILN_OP_CUMSUM, "cumsum", KILN_CAT_SCAN, 1, 1, -1),
    E(KILN_OP_CUMPROD, "cumprod", KILN_CAT_SCAN, 1, 1, -1),
    E(KILN_OP_CHECK, "check", KILN_CAT_CHECK, 1, -1, -1),
    /* issue 25, elementwise: -1 = lowered to other opcodes (core/lower/lower.c) */
    E(KILN_OP_LOG1MEXP, "log1mexp", KILN_CAT_ELEMWISE, 1, 1, KILN_I_LOG1MEXP),
    E(KILN_OP_ISNAN, "isnan", KILN_CAT_ELEMWISE, 1, 1, -1),
    E(KILN_OP_ISINF, "isinf", KILN_CAT_ELEMWISE, 1, 1, -1),
    E(KILN_OP_FLOOR, "floor", KILN_CAT_ELEMWISE, 1, 1, KILN_I_FLOOR),
    E(KILN_OP_CEIL, "ceil", KILN_CAT_ELEMWISE, 1, 1, KILN_I_CEIL),
    E(KILN_OP_TRUNC, "trunc", KILN_CAT_ELEMWISE, 1, 1, KILN_I_TRUNC),
    E(KILN_OP_ROUND_HALF_TO_EVEN, "round_half_to_even", KILN_CAT_ELEMWISE,
      1, 1, KILN_I_RINT),
    E(KILN_OP_ROUND_HALF_AWAY_FROM_ZERO, "round_half_away_from_zero",
      KILN_CAT_ELEMWISE, 1, 1, KILN_I_ROUND),
    E(KILN_OP_ROUND, "round", KILN_CAT_ELEMWISE, 1, 1, KILN_I_RINT),
    E(KILN_OP_SIGN, "sign", KILN_CAT_ELEMWISE, 1, 1, -1),
    E(KILN_OP_MOD, "mod", KILN_CAT_ELEMWISE, 2, 2, KILN_I_MOD),
    E(KILN_OP_CLIP, "clip", KILN_CAT_ELEMWISE, 3, 3, -1),
    E(KILN_OP_ERFCX, "erfcx", KILN_CAT_ELEMWISE, 1, 1, KILN_I_ERFCX),
    E(KILN_OP_ERFINV, "erfinv", KILN_CAT_ELEMWISE, 1, 1, KILN_I_ERFINV),
    E(KILN_OP_ERFCINV, "erfcinv", KILN_CAT_ELEMWISE, 1, 1, KILN_I_ERFCINV),
    E(KILN_OP_GAMMAINC, "gammainc", KILN_CAT_ELEMWISE, 2, 2, KILN_I_GAMMAINC),
    E(KILN_OP_GAMMAINCC, "gammaincc", KILN_CAT_ELEMWISE, 2, 2,
      KILN_I_GAMMAINCC),
    E(KILN_OP_BETAINC, "betainc", KILN_CAT_ELEMWISE, 3, 3, KILN_I_BETAINC),
    E(KILN_OP_GAMMAINC_DA, "gammainc_da", KILN_CAT_ELEMWISE, 2, 2,
      KILN_I_GAMMAINC_DA),
    E(KILN_OP_BETAINC_DA, "betainc_da", KILN_CAT_ELEMWISE, 3, 3,
      KILN_I_BETAINC_DA),
    E(KILN_OP_SCAN, "scan", KILN_CAT_RECUR, 0, -1, -1),
    E(KILN_OP_RESULT, "result", KILN_CAT_RECUR, 1, -1, -1),
    E(KILN_OP_ODE_RK45, "ode_rk45", KILN_CAT_ODE, 4, 4, -1),
    E(KILN_OP_ODE_BDF, "ode_bdf", KILN_CAT_ODE, 4, 4, -1),
    E(KILN_OP_BETAINC_DB, "betainc_db", KILN_CAT_ELEMWISE, 3, 3,
      KILN_I_BETAINC_DB),
    E(KILN_OP_CHOLESKY, "cholesky", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_CHOLESKY_GRAD, "cholesky_grad", KILN_CAT_LINALG, 2, 2, -1),
    E(KILN_OP_SOLVE_TRIANGULAR, "solve_triangular", KILN_CAT_LINALG, 2, 2,
      -1),
    E(KILN_OP_SOLVE, "solve", KILN_CAT_LINALG, 2, 2, -1),
    E(KILN_OP_INVERSE, "inverse", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_LOG_DET, "log_det", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_TRIL, "tril", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_TRIU, "triu", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_DIAG, "diag", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_DIAGONAL, "diagonal", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_I0E, "i0e", KILN_CAT_ELEMWISE, 1, 1, KILN_I_I0E),
    E(KILN_OP_I1E, "i1e", KILN_CAT_ELEMWISE, 1, 1, KILN_I_I1E),
    E(KILN_OP_DET, "det", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_SIGN_DET, "sign_det", KILN_CAT_LINALG, 1, 1, -1),
    E(KILN_OP_TOP_K, "top_k", KILN_CAT_TOPK, 1, 1, -1),   /* issue 29 */
};

#undef E

const kiln_op_info *kiln_ir_op_info(int op)
{
    if (op < 0 || op >= KILN_OP_COUNT)
        return NULL;
    return &op_table[op];
}

int kiln_ir_op_lookup(const char *name)
{
    if (!name)
        return -1;
    /* Leaves are not callable by name. */
    for (int i = KILN_OP_LITERAL + 1; i < KILN_OP_COUNT; i++)
        if (op_table[i].name[0] == name[0] &&  /* most differ here */
            strcmp(op_table[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- dtypes --------------------------------------------------------- */

static int dt_kind(kiln_dtype d)
{
    switch (d) {
    case KILN_BOOL: return 0;
    case KILN_I32: case KILN_I64: return 1;
    default: return 2;
    }
}

static int dt_is_float(kiln_dtype d) { return d == KILN_F64 || d == KILN_F32; }

kiln_dtype kiln_ir_promote(kiln_dtype a, int a_weak, kiln_dtype b, int b_weak)
{
    if (a_weak && b_weak) {
        int k = dt_kind(a) > dt_kind(b) ? dt_kind(a) : dt_kind(b);
        return k == 0 ? KILN_BOOL : k == 1 ? KILN_I64 : KILN_F64;
    }
    if (a_weak || b_weak) {
        kiln_dtype w = a_weak ? a : b, s = a_weak ? b : a;
        if (dt_kind(w) <= dt_kind(s))
            return s;
        return dt_kind(w) == 2 ? KILN_F64 : KILN_I64;
    }
    if (a == b)
        return a;
    if (a == KILN_BOOL)
        return b;
    if (b == KILN_BOOL)
        return a;
    if (dt_kind(a) == 1 && dt_kind(b) == 1)
        return KILN_I64;
    if (dt_kind(a) == 2 && dt_kind(b) == 2)
        return KILN_F64;
    /* int with float: i32/i64 with f32 -> f64 (NumPy: int32 + float32 is
     * float64), with f64 -> f64. */
    return KILN_F64;
}

static int op_is_float_only(int op)
{
    switch (op) {
    case KILN_OP_TRUE_DIV: case KILN_OP_EXP: case KILN_OP_EXPM1:
    case KILN_OP_LOG: case KILN_OP_LOG1P: case KILN_OP_SQRT:
    case KILN_OP_POW: case KILN_OP_SIGMOID: case KILN_OP_SOFTPLUS:
    case KILN_OP_TANH: case KILN_OP_SIN: case KILN_OP_COS:
    case KILN_OP_ERF: case KILN_OP_ERFC: case KILN_OP_GAMMALN:
    case KILN_OP_DIGAMMA: case KILN_OP_TRIGAMMA:
        return 1;
    /* issue 25 (ints, bool -> f64 as PyTensor's upgrade_to_float) */
    case KILN_OP_LOG1MEXP: case KILN_OP_FLOOR: case KILN_OP_CEIL:
    case KILN_OP_TRUNC: case KILN_OP_ROUND_HALF_TO_EVEN:
    case KILN_OP_ROUND_HALF_AWAY_FROM_ZERO: case KILN_OP_ROUND:
    case KILN_OP_ERFCX: case KILN_OP_ERFINV: case KILN_OP_ERFCINV:
    case KILN_OP_GAMMAINC: case KILN_OP_GAMMAINCC: case KILN_OP_BETAINC:
    case KILN_OP_GAMMAINC_DA: case KILN_OP_BETAINC_DA: case KILN_OP_BETAINC_DB:
    case KILN_OP_I0E: case KILN_OP_I1E:   /* issue 28 */
        return 1;
    default:
        return 0;
    }
}

static int op_is_compare(int op)
{
    return op >= KILN_OP_EQ && op <= KILN_OP_GE;
}

static int op_is_logic(int op)
{
    return op == KILN_OP_AND || op == KILN_OP_OR || op == KILN_OP_NOT;
}

kiln_dtype kiln_ir_compute_dtype(int op, kiln_dtype promoted)
{
    if (op_is_logic(op))
        return KILN_BOOL;
    if (op_is_float_only(op))
        return dt_is_float(promoted) ? promoted : KILN_F64;
    /* maximum/minimum of bool stay bool (or / and), as in NumPy. */
    if (op == KILN_OP_MAXIMUM || op == KILN_OP_MINIMUM)
        return promoted;
    /* Arithmetic and comparisons on bool compute in i64. */
    if (promoted == KILN_BOOL)
        return KILN_I64;
    return promoted;
}

/* ---- attributes ----------------------------------------------------- */

enum {
    A_AXIS = 1, A_AXES = 2, A_KEEPDIMS = 4, A_SHAPE = 8, A_DTYPE = 16,
    A_AXIS_REQ = 32, A_SHAPE_REQ = 64, A_DTYPE_REQ = 128, A_AXIS_ONE = 256,
    A_MSG = 512, A_LINALG = 1024, A_NANERR = 2048, A_SCAN = 4096,
    A_INDEX = 8192, A_ODE = 16384, A_TOPK = 32768
};

static unsigned op_attrs(int op)
{
    switch (op) {
    case KILN_OP_SUM: case KILN_OP_PROD: case KILN_OP_MAX: case KILN_OP_MIN:
    case KILN_OP_MEAN: case KILN_OP_LOGSUMEXP:
    case KILN_OP_ALL: case KILN_OP_ANY:
        return A_AXIS | A_KEEPDIMS;
    case KILN_OP_CUMSUM: case KILN_OP_CUMPROD:
        return A_AXIS | A_AXIS_REQ | A_AXIS_ONE;
    case KILN_OP_CHECK: return A_MSG;
    case KILN_OP_SOLVE_TRIANGULAR: return A_LINALG;
    case KILN_OP_CHOLESKY: return A_NANERR;
    case KILN_OP_SCAN: return A_SCAN;
    case KILN_OP_ODE_RK45: case KILN_OP_ODE_BDF: return A_ODE;
    case KILN_OP_RESULT: return A_INDEX;
    case KILN_OP_TOP_K: return A_AXIS | A_AXIS_ONE | A_TOPK;
    case KILN_OP_TRANSPOSE: return A_AXES;
    case KILN_OP_EXPAND_DIMS: return A_AXIS | A_AXIS_REQ;
    case KILN_OP_SQUEEZE: return A_AXIS;
    case KILN_OP_RESHAPE: case KILN_OP_BROADCAST_TO: case KILN_OP_ALLOC:
        return A_SHAPE | A_SHAPE_REQ;
    case KILN_OP_ZEROS: case KILN_OP_ONES:
        return A_SHAPE | A_SHAPE_REQ | A_DTYPE;
    case KILN_OP_CAST: return A_DTYPE | A_DTYPE_REQ;
    case KILN_OP_JOIN: return A_AXIS | A_AXIS_REQ | A_AXIS_ONE;
    case KILN_OP_STACK: case KILN_OP_TAKE:
    case KILN_OP_ADVANCED_SET_SUBTENSOR: case KILN_OP_ADVANCED_INC_SUBTENSOR:
        return A_AXIS | A_AXIS_ONE;
    default: return 0;
    }
}

static int set_list(const char *opn, const kiln_attr *a, int *n,
                    int64_t *dst, kiln_err *err)
{
    if (a->kind == KILN_ATTR_INT) {
        *n = 1;
        dst[0] = a->i;
        return 0;
    }
    if (a->kind != KILN_ATTR_INTS)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "%s: attribute '%s' must be an integer or a list "
                           "of integers", opn, a->key);
    if (a->n < 0 || a->n > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "%s: attribute '%s' has %d entries (at most %d)",
                           opn, a->key, a->n, KILN_MAX_RANK);
    if (a->n > 0 && !a->ints)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: attribute '%s' has no "
                           "values", opn, a->key);
    *n = a->n;
    for (int i = 0; i < a->n; i++)
        dst[i] = a->ints[i];
    return 0;
}

int kiln_ir_parse_attrs(int op, const kiln_attr *attrs, int n_attrs,
                        kiln_attrs *out, kiln_err *err)
{
    const kiln_op_info *info = kiln_ir_op_info(op);
    if (!info)
        return kiln_seterr(err, KILN_ERR_TYPE, "unknown op %d", op);
    memset(out, 0, sizeof *out);
    out->dtype = -1;
    unsigned allowed = op_attrs(op);
    if (allowed & A_SCAN)
        out->n_steps = -1;
    if (allowed & A_ODE) {   /* Stan's defaults (core/runtime/ode.h) */
        int bdf = op == KILN_OP_ODE_BDF;
        out->rtol = bdf ? 1e-10 : 1e-6;
        out->atol = bdf ? 1e-10 : 1e-6;
        out->max_steps = bdf ? 100000000 : 1000000;
    }
    int seen_shape = 0, seen_k = 0;
    if (n_attrs > 0 && !attrs)
        return kiln_seterr(err, KILN_ERR_ARG, "%s: attributes are NULL",
                           info->name);
    for (int i = 0; i < n_attrs; i++) {
        const kiln_attr *a = &attrs[i];
        const char *k = a->key ? a->key : "";
        int dup = 0;
        for (int j = 0; j < i; j++)
            if (attrs[j].key && strcmp(attrs[j].key, k) == 0)
                dup = 1;
        if (dup)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "%s: attribute '%s' given twice", info->name, k);
        if (strcmp(k, "axis") == 0 && (allowed & A_AXIS)) {
            if ((allowed & A_AXIS_ONE) && a->kind != KILN_ATTR_INT)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute 'axis' must be an integer",
                                   info->name);
            if (set_list(info->name, a, &out->naxes, out->axes, err))
                return err ? err->code : KILN_ERR_TYPE;
            out->has_axes = 1;
        } else if (strcmp(k, "axes") == 0 && (allowed & A_AXES)) {
            if (set_list(info->name, a, &out->naxes, out->axes, err))
                return err ? err->code : KILN_ERR_TYPE;
            out->has_axes = 1;
        } else if (strcmp(k, "keepdims") == 0 && (allowed & A_KEEPDIMS)) {
            if (a->kind != KILN_ATTR_BOOL)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute 'keepdims' must be true or "
                                   "false", info->name);
            out->keepdims = a->i != 0;
        } else if (strcmp(k, "shape") == 0 && (allowed & A_SHAPE)) {
            if (a->kind != KILN_ATTR_INTS && a->kind != KILN_ATTR_INT)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute 'shape' must be a list of "
                                   "dims", info->name);
            if (set_list(info->name, a, &out->nshape, out->shape, err))
                return err ? err->code : KILN_ERR_TYPE;
            seen_shape = 1;
        } else if (strcmp(k, "dtype") == 0 && (allowed & A_DTYPE)) {
            if (a->kind != KILN_ATTR_DTYPE || a->i < 0 || a->i >= KILN_NDTYPES)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute 'dtype' must be one of f64, "
                                   "f32, i64, i32, bool", info->name);
            out->dtype = (int)a->i;
        } else if ((strcmp(k, "lower") == 0 || strcmp(k, "trans") == 0) &&
                   (allowed & A_LINALG)) {
            /* SciPy's solve_triangular flags (defaults false) */
            if (a->kind != KILN_ATTR_BOOL)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute '%s' must be true or "
                                   "false", info->name, k);
            int bit = k[0] == 'l' ? 1 : 2;
            out->linalg = a->i ? out->linalg | bit : out->linalg & ~bit;
        } else if (strcmp(k, "nan_on_error") == 0 && (allowed & A_NANERR)) {
            /* PyTensor's Cholesky(on_error="nan") */
            if (a->kind != KILN_ATTR_BOOL)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute '%s' must be true or "
                                   "false", info->name, k);
            out->linalg = a->i ? 4 : 0;
        } else if (strcmp(k, "msg") == 0 && (allowed & A_MSG)) {
            if (a->kind != KILN_ATTR_STRING || !a->s)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute 'msg' must be a string",
                                   info->name);
            /* one line: the message ends up in a one-line error */
            for (const char *q = a->s; *q; q++)
                if ((unsigned char)*q < 0x20 || *q == 0x7f)
                    return kiln_seterr(err, KILN_ERR_TYPE,
                                       "%s: attribute 'msg' contains the "
                                       "control byte 0x%02x",
                                       info->name,
                                       (unsigned)(unsigned char)*q);
            if (!(out->msg = kiln_ir_intern(a->s)))
                return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        } else if ((allowed & A_SCAN) && (strcmp(k, "carries") == 0 ||
                                          strcmp(k, "seqs") == 0 ||
                                          strcmp(k, "n_steps") == 0)) {
            if (a->kind != KILN_ATTR_INT || a->i < 0 || a->i > INT32_MAX)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute '%s' must be an integer "
                                   ">= 0", info->name, k);
            if (k[0] == 'c')
                out->n_carry = (int)a->i;
            else if (k[0] == 's')
                out->n_seq = (int)a->i;
            else
                out->n_steps = a->i;
        } else if ((allowed & A_ODE) &&
                   (strcmp(k, "rtol") == 0 || strcmp(k, "atol") == 0)) {
            double v = a->kind == KILN_ATTR_INT ? (double)a->i
                       : a->kind == KILN_ATTR_FLOAT ? a->f : -1;
            if (!(v > 0) || !isfinite(v))
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute '%s' must be a positive "
                                   "finite number", info->name, k);
            if (k[0] == 'r')
                out->rtol = v;
            else
                out->atol = v;
        } else if ((allowed & A_ODE) && (strcmp(k, "max_num_steps") == 0 ||
                                         strcmp(k, "sens") == 0)) {
            if (a->kind != KILN_ATTR_INT || a->i < (k[0] == 'm') ||
                (k[0] == 's' && a->i > 2))
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute '%s' must be %s",
                                   info->name, k, k[0] == 'm'
                                   ? "an integer >= 1" : "0, 1 or 2");
            if (k[0] == 'm')
                out->max_steps = a->i;
            else
                out->sens = (int)a->i;
        } else if ((allowed & A_INDEX) && strcmp(k, "index") == 0) {
            if (a->kind != KILN_ATTR_INT || a->i < 0 || a->i > INT32_MAX)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute 'index' must be an integer "
                                   ">= 0", info->name);
            out->index = (int)a->i;
        } else if ((allowed & A_TOPK) && strcmp(k, "k") == 0) {
            if (a->kind == KILN_ATTR_INT && a->i > INT32_MAX)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "%s: k=%lld is too large (more than "
                                   "2^31 - 1)", info->name, (long long)a->i);
            if (a->kind != KILN_ATTR_INT || a->i < 0)
                return kiln_seterr(err, KILN_ERR_TYPE,
                                   "%s: attribute 'k' must be an integer "
                                   ">= 0", info->name);
            out->index = (int)a->i;
            seen_k = 1;
        } else {
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "%s: unknown attribute '%s'", info->name, k);
        }
    }
    if ((allowed & A_TOPK) && !seen_k)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: attribute 'k' is "
                           "required", info->name);
    if ((allowed & A_AXIS_REQ) && !out->has_axes)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: attribute 'axis' is "
                           "required", info->name);
    if ((allowed & A_SHAPE_REQ) && !seen_shape)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: attribute 'shape' is "
                           "required", info->name);
    if ((allowed & A_DTYPE_REQ) && out->dtype < 0)
        return kiln_seterr(err, KILN_ERR_TYPE, "%s: attribute 'dtype' is "
                           "required", info->name);
    if (op == KILN_OP_ZEROS || op == KILN_OP_ONES) {
        if (out->dtype < 0)
            out->dtype = KILN_F64;
    }
    return 0;
}

/* ---- shapes --------------------------------------------------------- */

static const char *shp(const kiln_shape_ctx *ctx, const kiln_type *t,
                       char *buf, size_t n)
{
    return kiln_ir_shape_str(ctx->g, t->rank, t->dims, buf, n);
}

/* A fresh anonymous symbol at build time; at run time every dim is
 * concrete so this is never reached with ctx->g NULL. */
static int64_t fresh_dim(const kiln_shape_ctx *ctx)
{
    if (!ctx->g)
        return KILN_DIM_UNKNOWN;
    return kiln_ir_fresh_symbol(ctx->g);
}

/* Broadcast one pair of dims into *out; returns 0, or -1 on a mismatch of
 * two static dims.  A static dim against a symbol gives the static dim
 * (the run-time inference checks the symbol's value). */
static int bdim(const kiln_shape_ctx *ctx, int64_t a, int64_t b, int64_t *out)
{
    if (a == b || b == 1)
        *out = a;
    else if (a == 1)
        *out = b;
    else if (a >= 0 && b >= 0)
        return -1;
    else if (a >= 0)
        *out = a;
    else if (b >= 0)
        *out = b;
    else
        *out = fresh_dim(ctx);
    return 0;
}

/* NumPy broadcasting of `out` (in/out) with t; on mismatch an error that
 * names both shapes. */
static int broadcast_into(const kiln_shape_ctx *ctx, const char *opn,
                          kiln_type *out, const kiln_type *t, kiln_err *err)
{
    int r = out->rank > t->rank ? out->rank : t->rank;
    int64_t d[KILN_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int ia = i - (r - out->rank), ib = i - (r - t->rank);
        int64_t a = ia >= 0 ? out->dims[ia] : 1;
        int64_t b = ib >= 0 ? t->dims[ib] : 1;
        int64_t v;
        if (bdim(ctx, a, b, &v)) {
            char s1[256], s2[256];
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "%s: cannot broadcast shapes %s and %s", opn,
                               shp(ctx, out, s1, sizeof s1),
                               shp(ctx, t, s2, sizeof s2));
        }
        d[i] = v;
    }
    out->rank = r;
    memcpy(out->dims, d, sizeof(int64_t) * (size_t)r);
    return 0;
}

/* Normalise an axis for rank r (negative counts from the end). */
static int norm_axis(const char *opn, int64_t ax, int r, int64_t *out,
                     kiln_err *err)
{
    if (ax < -r || ax >= r)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "%s: axis %lld is out of range for rank %d", opn,
                           (long long)ax, r);
    *out = ax < 0 ? ax + r : ax;
    return 0;
}

/* A dim from a `shape=` attribute: symbols resolve at run time. */
static int attr_dim(const kiln_shape_ctx *ctx, const char *opn, int64_t d,
                    int64_t *out, kiln_err *err)
{
    if (KILN_DIM_IS_SYM(d) && ctx->symvals) {
        int64_t v = ctx->symvals[KILN_SYM_INDEX(d)];
        if (v < 0)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "%s: a symbolic dim in 'shape' is not bound "
                               "by any input", opn);
        *out = v;
        return 0;
    }
    /* -1 is only reshape's "infer" (handled before this); a value below
     * -1 must be a symbol of the graph being built: symbol k is -2-k, so
     * a stray negative number would read past g->symbols later */
    if ((d < 0 && !KILN_DIM_IS_SYM(d)) ||
        (KILN_DIM_IS_SYM(d) && ctx->g && -2 - d >= ctx->g->n_symbols))
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "%s: bad dim %lld in 'shape'", opn, (long long)d);
    *out = d;
    return 0;
}

static int dims_equal_or_sym(int64_t a, int64_t b)
{
    return a == b || a < 0 || b < 0;
}

static int64_t slice_len(int64_t n, const kiln_index *ix, int64_t *start_out)
{
    /* NumPy's rules, without signed overflow for any int64 bounds and
     * step: start and stop are clamped into [-1, n] first, so their
     * difference fits, and a negative step is divided as an unsigned
     * magnitude (the step may be INT64_MIN). */
    int64_t step = ix->has_step ? ix->step : 1;
    int64_t start, stop;
    if (step > 0) {
        start = ix->has_start ? ix->start : 0;
        stop = ix->has_stop ? ix->stop : n;
        if (start < 0) start += n;
        if (start < 0) start = 0;
        if (start > n) start = n;
        if (stop < 0) stop += n;
        if (stop < 0) stop = 0;
        if (stop > n) stop = n;
        if (start_out) *start_out = start;
        return stop > start ? 1 + (stop - start - 1) / step : 0;
    }
    start = ix->has_start ? ix->start : n - 1;
    if (start < 0) start += n;
    if (start < -1) start = -1;
    if (start > n - 1) start = n - 1;
    if (ix->has_stop) {
        stop = ix->stop;
        if (stop < 0) stop += n;
        if (stop < -1) stop = -1;
        if (stop > n - 1) stop = n - 1;
    } else {
        stop = -1;
    }
    if (start_out) *start_out = start;
    uint64_t mag = (uint64_t)0 - (uint64_t)step;
    return start > stop
               ? (int64_t)(1 + (uint64_t)(start - stop - 1) / mag)
               : 0;
}

/* Resolve a basic index on a concrete or symbolic shape.  Fills the
 * region type (rank and dims) of x[idx]. */
static int subtensor_type(const kiln_shape_ctx *ctx, const kiln_attrs *at,
                          const kiln_type *x, kiln_type *out, kiln_err *err)
{
    if (at->nidx > x->rank)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "subtensor: too many indices (%d) for a tensor of "
                           "rank %d", at->nidx, x->rank);
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        int64_t n = x->dims[i];
        if (i >= at->nidx) {
            out->dims[r++] = n;
            continue;
        }
        const kiln_index *ix = &at->idx[i];
        if (ix->kind == KILN_INDEX_INT) {
            if (n >= 0 && (ix->start < -n || ix->start >= n))
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "subtensor: index %lld is out of bounds "
                                   "for axis %d with size %lld",
                                   (long long)ix->start, i, (long long)n);
            continue;
        }
        if (ix->has_step && ix->step == 0)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "subtensor: slice step cannot be zero");
        if (n >= 0) {
            out->dims[r++] = slice_len(n, ix, NULL);
        } else if (!ix->has_start && !ix->has_stop &&
                   (!ix->has_step || ix->step == 1)) {
            out->dims[r++] = n;
        } else {
            out->dims[r++] = fresh_dim(ctx);
        }
    }
    out->rank = r;
    return 0;
}

int64_t kiln_ir_slice_start(int64_t n, const kiln_index *ix, int64_t *len)
{
    int64_t start = 0;
    int64_t l = slice_len(n, ix, &start);
    if (len)
        *len = l;
    return start;
}

static int check_broadcast_to(const kiln_shape_ctx *ctx, const char *opn,
                              const char *what, const kiln_type *v,
                              const kiln_type *region, kiln_err *err)
{
    char s1[256], s2[256];
    if (v->rank > region->rank)
        goto bad;
    for (int i = 0; i < v->rank; i++) {
        int64_t a = v->dims[v->rank - 1 - i];
        int64_t b = region->dims[region->rank - 1 - i];
        if (a == 1 || a == b)
            continue;
        if (a >= 0 && b >= 0)
            goto bad;
    }
    return 0;
bad:
    return kiln_seterr(err, KILN_ERR_SHAPE,
                       "%s: %s of shape %s does not broadcast to %s", opn,
                       what, shp(ctx, v, s1, sizeof s1),
                       shp(ctx, region, s2, sizeof s2));
}

static int infer_reduce(int op,
                        const kiln_attrs *at, const kiln_type *x,
                        kiln_type *out, kiln_err *err)
{
    const char *opn = op_table[op].name;
    int mask[KILN_MAX_RANK] = {0};
    if (at->has_axes) {
        for (int i = 0; i < at->naxes; i++) {
            int64_t a = 0;
            if (norm_axis(opn, at->axes[i], x->rank, &a, err))
                return err ? err->code : KILN_ERR_SHAPE;
            if (mask[a])
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "%s: axis %lld given twice", opn,
                                   (long long)a);
            mask[a] = 1;
        }
    } else {
        for (int i = 0; i < x->rank; i++)
            mask[i] = 1;
    }
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!mask[i])
            out->dims[r++] = x->dims[i];
        else if (at->keepdims)
            out->dims[r++] = 1;
    }
    out->rank = r;
    kiln_dtype d = x->dtype;
    switch (op) {
    case KILN_OP_SUM: case KILN_OP_PROD:
        if (!dt_is_float(d))
            d = KILN_I64;
        break;
    case KILN_OP_ALL: case KILN_OP_ANY:
        d = KILN_BOOL;   /* NumPy: any dtype, nonzero is true */
        break;
    case KILN_OP_MAX: case KILN_OP_MIN:
        if (d == KILN_BOOL)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "%s: bool input is not supported; cast to i64 "
                               "first", opn);
        break;
    default: /* mean, logsumexp */
        if (!dt_is_float(d))
            d = KILN_F64;
    }
    out->dtype = d;
    return 0;
}

/* *acc *= d for d >= 0; 1 (and *acc unchanged) when it overflows.  A
 * product with a 0 is 0 whatever came before, so the caller multiplies
 * the zeros in last (see static_numel). */
static int mul_dims(int64_t *acc, int64_t d)
{
    if (d != 0 && *acc > INT64_MAX / d)
        return 1;
    *acc *= d;
    return 0;
}

/* The product of the static dims of dims[0..n) (symbols skipped); sets
 * *all_static, and returns 1 when the product does not fit in int64. */
static int static_numel(int n, const int64_t *dims, int skip, int64_t *out,
                        int *all_static)
{
    int64_t p = 1;
    int over = 0, zero = 0;
    *all_static = 1;
    for (int i = 0; i < n; i++) {
        if (i == skip)
            continue;
        if (dims[i] < 0)
            *all_static = 0;
        else if (dims[i] == 0)
            zero = 1;
        else if (mul_dims(&p, dims[i]))
            over = 1;
    }
    *out = zero ? 0 : p;
    return zero ? 0 : over;
}

/* broadcast_to, alloc, zeros and ones make a result of the size their
 * 'shape' names: refused when every dim is static and the result's bytes
 * do not fit in int64 (nor size_t): the limit of every kiln buffer
 * (kiln_vm_size_fits), checked here so that a shape such as
 * [3000000000000000000] fails when the node is added, not at the call.  A
 * symbolic dim (maybe 0 at run time) leaves it to the run-time check of
 * every buffer ("shape ... is too large"), so at run time (symvals set)
 * nothing is checked here. */
static int check_shape_size(const kiln_shape_ctx *ctx, const char *opn,
                            const kiln_type *in, const kiln_type *out,
                            kiln_err *err)
{
    if (ctx->symvals)
        return 0;
    int64_t n;
    int all_static;
    int over = static_numel(out->rank, out->dims, -1, &n, &all_static);
    size_t es = kiln_dtype_size(out->dtype);
    if (!all_static || es == 0 ||
        (!over && (uint64_t)n <= (uint64_t)INT64_MAX / es &&
         (uint64_t)n <= SIZE_MAX / es))
        return 0;
    char s1[256], s2[256], f[512];
    int len = 0;
    f[0] = '\0';
    for (int i = 0; i < out->rank && len < (int)sizeof f; i++)
        len += snprintf(f + len, sizeof f - (size_t)len, "%s%lld",
                        i ? " x " : "", (long long)out->dims[i]);
    if (in)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "%s: input of shape %s to shape %s: the result "
                           "would have %s elements of %s (more than 2^63 - 1 "
                           "bytes)", opn, shp(ctx, in, s1, sizeof s1),
                           shp(ctx, out, s2, sizeof s2), f,
                           kiln_dtype_name(out->dtype));
    return kiln_seterr(err, KILN_ERR_SHAPE,
                       "%s: shape %s: the result would have %s elements of "
                       "%s (more than 2^63 - 1 bytes)", opn,
                       shp(ctx, out, s2, sizeof s2), f,
                       kiln_dtype_name(out->dtype));
}

static int infer_reshape(const kiln_shape_ctx *ctx, const kiln_attrs *at,
                         const kiln_type *x, kiln_type *out, kiln_err *err)
{
    int infer_at = -1;
    out->rank = at->nshape;
    for (int i = 0; i < at->nshape; i++) {
        int64_t d = at->shape[i];
        if (d == -1) {
            if (infer_at >= 0)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "reshape: only one dim may be -1");
            infer_at = i;
            out->dims[i] = -1;
            continue;
        }
        if (attr_dim(ctx, "reshape", d, &out->dims[i], err))
            return err ? err->code : KILN_ERR_SHAPE;
    }
    int64_t known, n;
    int all_static, x_static;
    int known_over = static_numel(out->rank, out->dims, infer_at, &known,
                                  &all_static);
    int n_over = static_numel(x->rank, x->dims, -1, &n, &x_static);
    char s1[256], s2[256];
    /* products that do not fit in int64 are never wrapped */
    if (x_static && n_over)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "reshape: input of shape %s has more than "
                           "2^63 elements", shp(ctx, x, s1, sizeof s1));
    if (x_static && all_static && known_over)
        goto bad;
    if (infer_at >= 0) {
        if (x_static && all_static) {
            if (known == 0 || n % known != 0)
                goto bad;
            out->dims[infer_at] = n / known;
        } else {
            out->dims[infer_at] = fresh_dim(ctx);
        }
    } else if (x_static && all_static && n != known) {
        goto bad;
    }
    return 0;
bad: {
        kiln_type want = *out;
        if (infer_at >= 0)
            want.dims[infer_at] = -1;
        /* print -1 literally */
        int len = snprintf(s2, sizeof s2, "(");
        for (int i = 0; i < want.rank && len < (int)sizeof s2; i++)
            len += snprintf(s2 + len, sizeof s2 - (size_t)len, "%s%lld",
                            i ? ", " : "", (long long)want.dims[i]);
        if (len < (int)sizeof s2)
            snprintf(s2 + len, sizeof s2 - (size_t)len, ")");
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "reshape: cannot reshape %s into %s",
                           shp(ctx, x, s1, sizeof s1), s2);
    }
}

static int infer_shape_op(const kiln_shape_ctx *ctx, int op,
                          const kiln_attrs *at, int n_in,
                          const kiln_type *in, const int *in_weak,
                          kiln_type *out, kiln_err *err)
{
    const char *opn = op_table[op].name;
    char s1[256], s2[256];
    switch (op) {
    case KILN_OP_RESHAPE:
        out->dtype = in[0].dtype;
        return infer_reshape(ctx, at, &in[0], out, err);
    case KILN_OP_TRANSPOSE: {
        int r = in[0].rank;
        int64_t perm[KILN_MAX_RANK];
        int seen[KILN_MAX_RANK] = {0};
        if (at->has_axes) {
            if (at->naxes != r)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "transpose: axes has %d entries for a "
                                   "tensor of rank %d", at->naxes, r);
            for (int i = 0; i < r; i++) {
                if (norm_axis(opn, at->axes[i], r, &perm[i], err))
                    return err ? err->code : KILN_ERR_SHAPE;
                if (seen[perm[i]]++)
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "transpose: axes is not a "
                                       "permutation");
            }
        } else {
            for (int i = 0; i < r; i++)
                perm[i] = r - 1 - i;
        }
        out->dtype = in[0].dtype;
        out->rank = r;
        for (int i = 0; i < r; i++)
            out->dims[i] = in[0].dims[perm[i]];
        return 0;
    }
    case KILN_OP_EXPAND_DIMS: {
        int r = in[0].rank + at->naxes;
        if (r > KILN_MAX_RANK)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "expand_dims: result rank %d exceeds %d", r,
                               KILN_MAX_RANK);
        int mask[KILN_MAX_RANK] = {0};
        for (int i = 0; i < at->naxes; i++) {
            int64_t a = 0;
            if (norm_axis(opn, at->axes[i], r, &a, err))
                return err ? err->code : KILN_ERR_SHAPE;
            if (mask[a]++)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "expand_dims: axis %lld given twice",
                                   (long long)a);
        }
        out->dtype = in[0].dtype;
        out->rank = r;
        for (int i = 0, j = 0; i < r; i++)
            out->dims[i] = mask[i] ? 1 : in[0].dims[j++];
        return 0;
    }
    case KILN_OP_SQUEEZE: {
        int r = in[0].rank;
        int mask[KILN_MAX_RANK] = {0};
        if (at->has_axes) {
            for (int i = 0; i < at->naxes; i++) {
                int64_t a = 0;
                if (norm_axis(opn, at->axes[i], r, &a, err))
                    return err ? err->code : KILN_ERR_SHAPE;
                if (in[0].dims[a] != 1)
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "squeeze: axis %lld of shape %s does "
                                       "not have size 1", (long long)a,
                                       shp(ctx, &in[0], s1, sizeof s1));
                if (mask[a])
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "squeeze: axis %lld given twice",
                                       (long long)a);
                mask[a] = 1;
            }
        } else {
            for (int i = 0; i < r; i++)
                mask[i] = in[0].dims[i] == 1;
        }
        out->dtype = in[0].dtype;
        out->rank = 0;
        for (int i = 0; i < r; i++)
            if (!mask[i])
                out->dims[out->rank++] = in[0].dims[i];
        return 0;
    }
    case KILN_OP_BROADCAST_TO:
    case KILN_OP_ALLOC:
    case KILN_OP_ZEROS:
    case KILN_OP_ONES: {
        out->rank = at->nshape;
        for (int i = 0; i < at->nshape; i++)
            if (attr_dim(ctx, opn, at->shape[i], &out->dims[i], err))
                return err ? err->code : KILN_ERR_SHAPE;
        if (op == KILN_OP_ZEROS || op == KILN_OP_ONES) {
            out->dtype = (kiln_dtype)at->dtype;
            return check_shape_size(ctx, opn, NULL, out, err);
        }
        out->dtype = in[0].dtype;
        if (op == KILN_OP_ALLOC && in_weak && in_weak[0])
            out->dtype = kiln_ir_promote(in[0].dtype, 1, in[0].dtype, 1);
        int brc = check_broadcast_to(ctx, opn, "input", &in[0], out, err);
        if (brc)
            return brc;
        return check_shape_size(ctx, opn, &in[0], out, err);
    }
    case KILN_OP_JOIN: {
        int r = in[0].rank;
        int64_t ax = 0;
        if (r == 0)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "join: input 1 is a scalar; join needs rank "
                               ">= 1");
        if (norm_axis(opn, at->axes[0], r, &ax, err))
            return err ? err->code : KILN_ERR_SHAPE;
        *out = in[0];
        int64_t total = 0;
        int sym = 0;
        kiln_dtype d = in[0].dtype;
        int w = in_weak ? in_weak[0] : 0;
        for (int k = 0; k < n_in; k++) {
            const kiln_type *t = &in[k];
            if (t->rank != r)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "join: input %d has shape %s but input 1 "
                                   "has shape %s (ranks differ)", k + 1,
                                   shp(ctx, t, s1, sizeof s1),
                                   shp(ctx, &in[0], s2, sizeof s2));
            for (int i = 0; i < r; i++) {
                if (i == ax)
                    continue;
                if (!dims_equal_or_sym(t->dims[i], in[0].dims[i]))
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "join: input %d has shape %s but "
                                       "input 1 has shape %s (only axis %lld "
                                       "may differ)", k + 1,
                                       shp(ctx, t, s1, sizeof s1),
                                       shp(ctx, &in[0], s2, sizeof s2),
                                       (long long)ax);
                if (out->dims[i] < 0 && t->dims[i] >= 0)
                    out->dims[i] = t->dims[i];
            }
            if (t->dims[ax] < 0)
                sym = 1;
            else if (t->dims[ax] > INT64_MAX - total)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "join: the result's size along axis %lld "
                                   "overflows", (long long)ax);
            else
                total += t->dims[ax];
            if (k > 0) {
                int tw = in_weak ? in_weak[k] : 0;
                d = kiln_ir_promote(d, w, t->dtype, tw);
                w = w && tw;
            }
        }
        out->dims[ax] = sym ? fresh_dim(ctx) : total;
        out->dtype = w ? kiln_ir_promote(d, 1, d, 1) : d;
        return 0;
    }
    case KILN_OP_STACK: {
        int r = in[0].rank;
        int64_t ax = at->has_axes ? at->axes[0] : 0;
        if (r + 1 > KILN_MAX_RANK)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "stack: result rank %d exceeds %d", r + 1,
                               KILN_MAX_RANK);
        if (norm_axis(opn, ax, r + 1, &ax, err))
            return err ? err->code : KILN_ERR_SHAPE;
        kiln_type base = in[0];
        kiln_dtype d = in[0].dtype;
        int w = in_weak ? in_weak[0] : 0;
        for (int k = 1; k < n_in; k++) {
            const kiln_type *t = &in[k];
            int same = t->rank == r;
            for (int i = 0; same && i < r; i++) {
                if (!dims_equal_or_sym(t->dims[i], base.dims[i]))
                    same = 0;
                else if (base.dims[i] < 0 && t->dims[i] >= 0)
                    base.dims[i] = t->dims[i];
            }
            if (!same)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "stack: input %d has shape %s but input 1 "
                                   "has shape %s (all must be equal)", k + 1,
                                   shp(ctx, t, s1, sizeof s1),
                                   shp(ctx, &in[0], s2, sizeof s2));
            int tw = in_weak ? in_weak[k] : 0;
            d = kiln_ir_promote(d, w, t->dtype, tw);
            w = w && tw;
        }
        out->rank = r + 1;
        for (int i = 0, j = 0; i < r + 1; i++)
            out->dims[i] = i == ax ? n_in : base.dims[j++];
        out->dtype = w ? kiln_ir_promote(d, 1, d, 1) : d;
        return 0;
    }
    }
    return kiln_seterr(err, KILN_ERR_TYPE, "%s: not a shape op", opn);
}

static int is_int_dtype(kiln_dtype d) { return d == KILN_I64 || d == KILN_I32; }

static int take_type(const char *opn,
                     const kiln_type *x, const kiln_type *idx, int64_t axis,
                     kiln_type *out, int64_t *axis_out, kiln_err *err)
{
    if (!is_int_dtype(idx->dtype))
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "%s: indices must be i64 or i32, got %s", opn,
                           kiln_dtype_name(idx->dtype));
    if (x->rank == 0)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "%s: cannot index a scalar", opn);
    int64_t ax = 0;
    if (norm_axis(opn, axis, x->rank, &ax, err))
        return err ? err->code : KILN_ERR_SHAPE;
    int r = x->rank - 1 + idx->rank;
    if (r > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_SHAPE, "%s: result rank %d exceeds "
                           "%d", opn, r, KILN_MAX_RANK);
    int k = 0;
    for (int i = 0; i < ax; i++)
        out->dims[k++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++)
        out->dims[k++] = idx->dims[i];
    for (int i = (int)ax + 1; i < x->rank; i++)
        out->dims[k++] = x->dims[i];
    out->rank = r;
    out->dtype = x->dtype;
    if (axis_out)
        *axis_out = ax;
    return 0;
}

static int infer_index(const kiln_shape_ctx *ctx, int op,
                       const kiln_attrs *at, const kiln_type *in,
                       kiln_type *out, kiln_err *err)
{
    const char *opn = op_table[op].name;
    kiln_type region;
    switch (op) {
    case KILN_OP_SUBTENSOR:
        out->dtype = in[0].dtype;
        return subtensor_type(ctx, at, &in[0], out, err);
    case KILN_OP_TAKE:
        return take_type(opn, &in[0], &in[1],
                         at->has_axes ? at->axes[0] : 0, out, NULL, err);
    case KILN_OP_SET_SUBTENSOR:
    case KILN_OP_INC_SUBTENSOR:
        if (subtensor_type(ctx, at, &in[0], &region, err))
            return err ? err->code : KILN_ERR_SHAPE;
        if (check_broadcast_to(ctx, opn, "value", &in[1], &region, err))
            return err ? err->code : KILN_ERR_SHAPE;
        *out = in[0];
        return 0;
    default: /* advanced set/inc: x, idx, v */
        if (take_type(opn, &in[0], &in[1],
                      at->has_axes ? at->axes[0] : 0, &region, NULL, err))
            return err ? err->code : KILN_ERR_SHAPE;
        if (check_broadcast_to(ctx, opn, "value", &in[2], &region, err))
            return err ? err->code : KILN_ERR_SHAPE;
        *out = in[0];
        return 0;
    }
}

/* issue 29: numpy.matmul with an operand of rank > 2.  The last two
 * axes are the matrices (a 1-D a is a row [k], a 1-D b a column [k],
 * whose unit axis the result drops); the leading axes are a batch
 * broadcast by NumPy's rules (right-aligned; 1 stretches; symbolic
 * dims as elementwise broadcasting treats them, bdim).  One DOT kernel
 * (ABI 1.11, core/runtime/gemm_batched.c).  Float result: an integer or
 * bool promotion gives f64. */
static int infer_batched_matmul(const kiln_shape_ctx *ctx,
                                const kiln_type *in, const int *in_weak,
                                kiln_type *out, kiln_err *err)
{
    char s1[256], s2[256];
    const kiln_type *a = &in[0], *b = &in[1];
    int ra = a->rank, rb = b->rank;
    int64_t ka = a->dims[ra - 1], kb = b->dims[rb > 1 ? rb - 2 : 0];
    int ok = dims_equal_or_sym(ka, kb);
    int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;
    int nbat = ba > bb ? ba : bb;
    int64_t bat[KILN_MAX_RANK];
    for (int d = 1; d <= nbat; d++) {
        int64_t x = d <= ba ? a->dims[ba - d] : 1;
        int64_t y = d <= bb ? b->dims[bb - d] : 1;
        if (bdim(ctx, x, y, &bat[nbat - d]))
            ok = 0;
    }
    int r = nbat + (ra > 1) + (rb > 1);
    if (!ok || r > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "matmul: shapes %s and %s do not match (a's last "
                           "axis must be b's second-to-last, the leading "
                           "batch axes broadcast)",
                           shp(ctx, a, s1, sizeof s1),
                           shp(ctx, b, s2, sizeof s2));
    out->rank = 0;
    for (int d = 0; d < nbat; d++)
        out->dims[out->rank++] = bat[d];
    if (ra > 1)
        out->dims[out->rank++] = a->dims[ra - 2];
    if (rb > 1)
        out->dims[out->rank++] = b->dims[rb - 1];
    kiln_dtype d = kiln_ir_promote(a->dtype, in_weak ? in_weak[0] : 0,
                                   b->dtype, in_weak ? in_weak[1] : 0);
    out->dtype = dt_is_float(d) ? d : KILN_F64;
    return 0;
}

static int infer_dot(const kiln_shape_ctx *ctx, int op, const kiln_type *in,
                     const int *in_weak, kiln_type *out, kiln_err *err)
{
    const char *opn = op_table[op].name;
    char s1[256], s2[256];
    const kiln_type *a = &in[0], *b = &in[1];
    if (op == KILN_OP_MATMUL && a->rank >= 1 && b->rank >= 1 &&
        (a->rank > 2 || b->rank > 2))
        return infer_batched_matmul(ctx, in, in_weak, out, err);
    if (a->rank < 1 || a->rank > 2 || b->rank < 1 || b->rank > 2)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "%s: operands must be 1-D or 2-D, got shapes %s "
                           "and %s%s", opn, shp(ctx, a, s1, sizeof s1),
                           shp(ctx, b, s2, sizeof s2),
                           op == KILN_OP_DOT && a->rank >= 1 && b->rank >= 1
                               ? " (matmul takes leading batch axes)" : "");
    int64_t ka = a->dims[a->rank - 1];
    int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[0];
    if (!dims_equal_or_sym(ka, kb))
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "%s: shapes %s and %s are not aligned (%lld != "
                           "%lld)", opn, shp(ctx, a, s1, sizeof s1),
                           shp(ctx, b, s2, sizeof s2), (long long)ka,
                           (long long)kb);
    out->rank = 0;
    if (a->rank == 2)
        out->dims[out->rank++] = a->dims[0];
    if (b->rank == 2)
        out->dims[out->rank++] = b->dims[1];
    kiln_dtype d = kiln_ir_promote(a->dtype, in_weak ? in_weak[0] : 0,
                                   b->dtype, in_weak ? in_weak[1] : 0);
    out->dtype = dt_is_float(d) ? d : KILN_F64;
    return 0;
}

/* Linear algebra (issue 28): the matrix is the last two axes, the
 * leading ones a batch that every argument shares (no broadcasting);
 * the result is f64 (other number dtypes are converted). */
static int infer_linalg(const kiln_shape_ctx *ctx, int op, int n_in,
                        const kiln_type *in, kiln_type *out, kiln_err *err)
{
    const char *opn = op_table[op].name;
    char s1[256], s2[256];
    for (int i = 0; i < n_in; i++)
        if (in[i].dtype == KILN_BOOL)
            return kiln_seterr(err, KILN_ERR_TYPE, "%s: argument %d has "
                               "dtype bool; expected a number", opn, i + 1);
    const kiln_type *a = &in[0];
    int need = op == KILN_OP_DIAG ? 1 : 2;
    if (a->rank < need)
        return kiln_seterr(err, KILN_ERR_SHAPE, "%s: expected a %s (rank >= "
                           "%d), got shape %s", opn,
                           need == 1 ? "vector" : "matrix", need,
                           shp(ctx, a, s1, sizeof s1));
    int r = a->rank;
    int square = op != KILN_OP_TRIL && op != KILN_OP_TRIU &&
                 op != KILN_OP_DIAG && op != KILN_OP_DIAGONAL;
    if (square && !dims_equal_or_sym(a->dims[r - 1], a->dims[r - 2]))
        return kiln_seterr(err, KILN_ERR_SHAPE, "%s: expected a square "
                           "matrix, got shape %s", opn,
                           shp(ctx, a, s1, sizeof s1));
    *out = *a;
    out->dtype = KILN_F64;
    switch (op) {
    case KILN_OP_LOG_DET:
    case KILN_OP_DET:
    case KILN_OP_SIGN_DET:
        out->rank = r - 2;
        return 0;
    case KILN_OP_DIAG:
        if (r + 1 > KILN_MAX_RANK)
            return kiln_seterr(err, KILN_ERR_SHAPE, "%s: rank %d is the "
                               "most", opn, KILN_MAX_RANK - 1);
        out->rank = r + 1;
        out->dims[r] = a->dims[r - 1];
        return 0;
    case KILN_OP_DIAGONAL: {
        /* a symbolic dim: the row count (a matrix with fewer columns
         * than rows then fails at run time, naming the node) */
        int64_t m = a->dims[r - 2], n = a->dims[r - 1];
        out->rank = r - 1;
        out->dims[r - 2] = m < 0 || n < 0 ? m : m < n ? m : n;
        return 0;
    }
    case KILN_OP_CHOLESKY_GRAD:
    case KILN_OP_SOLVE_TRIANGULAR:
    case KILN_OP_SOLVE: {
        const kiln_type *b = &in[1];
        int vec = op != KILN_OP_CHOLESKY_GRAD && b->rank == r - 1;
        int ok = vec || b->rank == r;
        for (int d = 0; ok && d < r - 2; d++)
            ok = dims_equal_or_sym(a->dims[d], b->dims[d]);
        if (ok)
            ok = dims_equal_or_sym(a->dims[r - 1],
                                   b->dims[vec ? r - 2 : r - 2]);
        if (ok && op == KILN_OP_CHOLESKY_GRAD)
            ok = dims_equal_or_sym(a->dims[r - 1], b->dims[r - 1]);
        if (!ok)
            return kiln_seterr(err, KILN_ERR_SHAPE, "%s: shapes %s and %s do "
                               "not match (the batch axes must be equal and "
                               "the second's rows the first's size)", opn,
                               shp(ctx, a, s1, sizeof s1),
                               shp(ctx, b, s2, sizeof s2));
        *out = *b;
        out->dtype = KILN_F64;
        return 0;
    }
    default:
        return 0;
    }
}

/* top_k (issue 29): the values (which 0) or the indices (which 1). */
int kiln_ir_topk_type(const kiln_shape_ctx *ctx, const kiln_attrs *a,
                      const kiln_type *x, int which, kiln_type *out,
                      kiln_err *err)
{
    if (which < 0 || which > 1)
        return kiln_seterr(err, KILN_ERR_TYPE, "result: top_k has 2 "
                           "outputs (the values, then the indices), not "
                           "%d", which + 1);
    if (x->dtype != KILN_F64 && x->dtype != KILN_F32)
        return kiln_seterr(err, KILN_ERR_TYPE, "top_k: x must be f32 or "
                           "f64, got %s", kiln_dtype_name(x->dtype));
    if (x->rank == 0)
        return kiln_seterr(err, KILN_ERR_SHAPE, "top_k: x must have rank "
                           ">= 1 (reshape a scalar to (1) first)");
    int64_t ax = 0;
    if (norm_axis("top_k", a->has_axes ? a->axes[0] : -1, x->rank, &ax,
                  err))
        return err ? err->code : KILN_ERR_SHAPE;
    int64_t n = x->dims[ax];
    if (n >= 0 && a->index > n) {
        char s[256];
        return kiln_seterr(err, KILN_ERR_SHAPE, "top_k: k=%d exceeds the "
                           "length %lld of axis %lld of x %s", a->index,
                           (long long)n, (long long)ax,
                           shp(ctx, x, s, sizeof s));
    }
    *out = *x;
    out->dims[ax] = a->index;
    if (which == 1)
        out->dtype = KILN_I64;
    return 0;
}

int kiln_ir_infer(const kiln_shape_ctx *ctx, int op, const kiln_attrs *attrs,
                  int n_in, const kiln_type *in, const int *in_weak,
                  kiln_type *out, int *out_weak, kiln_err *err)
{
    const kiln_op_info *info = kiln_ir_op_info(op);
    if (!info || info->category == KILN_CAT_LEAF)
        return kiln_seterr(err, KILN_ERR_TYPE, "op %d cannot be inferred", op);
    if (n_in < info->min_in || (info->max_in >= 0 && n_in > info->max_in)) {
        if (info->min_in == info->max_in)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "%s: expected %d input%s, got %d", info->name,
                               info->min_in, info->min_in == 1 ? "" : "s",
                               n_in);
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "%s: expected at least %d input%s, got %d",
                           info->name, info->min_in,
                           info->min_in == 1 ? "" : "s", n_in);
    }
    for (int i = 0; i < n_in; i++)
        if ((unsigned)in[i].dtype >= KILN_NDTYPES || in[i].rank < 0 ||
            in[i].rank > KILN_MAX_RANK)
            return kiln_seterr(err, KILN_ERR_ARG, "%s: input %d has a bad "
                               "type", info->name, i + 1);
    kiln_type t;
    memset(&t, 0, sizeof t);
    int weak = 0;
    int rc = 0;
    switch (info->category) {
    case KILN_CAT_ELEMWISE: {
        weak = 1;
        t.rank = 0;
        for (int i = 0; i < n_in; i++) {
            if ((rc = broadcast_into(ctx, info->name, &t, &in[i], err)))
                return rc;
            weak = weak && in_weak && in_weak[i];
        }
        if (op == KILN_OP_CAST) {
            t.dtype = (kiln_dtype)attrs->dtype;
            weak = 0;
            break;
        }
        if (op == KILN_OP_FILL) {
            /* the value's dtype; a weak value takes the model's category
             * (NEP 50) */
            int vw = in_weak && in_weak[1];
            t.dtype = vw ? kiln_ir_promote(in[0].dtype, 0, in[1].dtype, 1)
                         : in[1].dtype;
            weak = 0;
            break;
        }
        /* promote the value operands (for where: inputs 2 and 3) */
        int first = op == KILN_OP_WHERE ? 1 : 0;
        kiln_dtype d = in[first].dtype;
        int w = in_weak ? in_weak[first] : 0;
        for (int i = first + 1; i < n_in; i++) {
            int iw = in_weak ? in_weak[i] : 0;
            d = kiln_ir_promote(d, w, in[i].dtype, iw);
            w = w && iw;
        }
        if (op == KILN_OP_WHERE)
            t.dtype = d;
        else if (op_is_compare(op) || op_is_logic(op) ||
                 op == KILN_OP_ISNAN || op == KILN_OP_ISINF)
            t.dtype = KILN_BOOL;
        else
            t.dtype = kiln_ir_compute_dtype(op, d);
        break;
    }
    case KILN_CAT_REDUCE:
        rc = infer_reduce(op, attrs, &in[0], &t, err);
        break;
    case KILN_CAT_SHAPE:
        rc = infer_shape_op(ctx, op, attrs, n_in, in, in_weak, &t, err);
        break;
    case KILN_CAT_INDEX:
        rc = infer_index(ctx, op, attrs, in, &t, err);
        break;
    case KILN_CAT_DOT:
        rc = infer_dot(ctx, op, in, in_weak, &t, err);
        break;
    case KILN_CAT_SCAN: {
        /* cumsum, cumprod: x's shape; the dtype of sum/prod (NumPy:
         * bool and ints accumulate in i64) */
        int64_t ax = 0;
        if (in[0].rank == 0)
            return kiln_seterr(err, KILN_ERR_SHAPE, "%s: input must have "
                               "rank >= 1 (reshape a scalar to (1) first)",
                               info->name);
        if ((rc = norm_axis(info->name, attrs->axes[0], in[0].rank, &ax,
                            err)))
            return rc;
        t = in[0];
        if (!dt_is_float(t.dtype))
            t.dtype = KILN_I64;
        break;
    }
    case KILN_CAT_LINALG:
        rc = infer_linalg(ctx, op, n_in, in, &t, err);
        break;
    case KILN_CAT_CHECK:
        /* check(x, c1, ...): x as it is; conditions of any shape and
         * dtype (nonzero is true, as all() reads them) */
        t = in[0];
        weak = in_weak ? in_weak[0] : 0;
        break;
    case KILN_CAT_ODE:
        rc = kiln_ir_ode_type(ctx, op, attrs, n_in, in, &t, err);
        break;
    case KILN_CAT_TOPK:   /* issue 29: output 0, the values */
        rc = kiln_ir_topk_type(ctx, attrs, &in[0], 0, &t, err);
        break;
    case KILN_CAT_RECUR:
        if (op == KILN_OP_SCAN) {
            /* a scan's own value is its output 0 (recur.c) */
            rc = kiln_ir_scan_types(ctx, attrs, n_in, in, 0, &t, err);
        } else if (attrs->body && attrs->sens == 2) {
            /* result in a lowered program over an ODE's inputs with its
             * attributes: S (only an ODE node has sens; the op's name in
             * an error is rk45's, the node itself was checked first) */
            rc = kiln_ir_ode_types(ctx, KILN_OP_ODE_RK45, attrs, n_in, in,
                                   attrs->index, &t, err);
        } else if (attrs->body) {
            /* result in a lowered program (core/lower/lower.c): over the
             * scan's inputs, with the scan's attributes */
            rc = kiln_ir_scan_types(ctx, attrs, n_in, in, attrs->index, &t,
                                    err);
        } else {
            /* result: the type the builder stored (kiln_graph_result), its
             * symbols sized at run time */
            t.dtype = (kiln_dtype)attrs->dtype;
            t.rank = attrs->nshape;
            for (int i = 0; i < t.rank; i++) {
                int64_t d = attrs->shape[i];
                t.dims[i] = ctx->symvals && KILN_DIM_IS_SYM(d)
                                ? ctx->symvals[KILN_SYM_INDEX(d)] : d;
            }
        }
        break;
    }
    if (rc)
        return rc;
    *out = t;
    if (out_weak)
        *out_weak = weak;
    return 0;
}

int64_t kiln_ir_fresh_symbol(kiln_graph *g)
{
    if (g->n_symbols == g->cap_symbols) {
        int cap = g->cap_symbols ? 2 * g->cap_symbols : 8;
        char **p = realloc(g->symbols, sizeof *p * (size_t)cap);
        if (!p)
            return KILN_DIM_UNKNOWN;
        g->symbols = p;
        g->cap_symbols = cap;
    }
    g->symbols[g->n_symbols] = NULL;
    return KILN_SYM_ID(g->n_symbols++);
}
