/*
 * scalar.c — scalar semantics: every opcode over one block of
 * registers (wrapping integer arithmetic, float math through the runtime
 * table, comparisons, logic, where, casts, constants).
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* Two's-complement wrap without implementation-defined conversions. */
static int64_t kiln_interp_s64(uint64_t u)
{
    return u <= (uint64_t)INT64_MAX ? (int64_t)u
                                    : -(int64_t)(UINT64_MAX - u) - 1;
}

static int32_t kiln_interp_s32(uint32_t u)
{
    return u <= (uint32_t)INT32_MAX ? (int32_t)u
                                    : -(int32_t)(UINT32_MAX - u) - 1;
}

/* Float to integer: truncation toward zero as in C; NaN and values out
 * of range (undefined behaviour in C) give the type's minimum, which is
 * what x86-64's cvttsd2si and therefore NumPy's astype produce there. */
static int64_t kiln_interp_f2i64(double x)
{
    if (x >= -0x1p63 && x < 0x1p63)
        return (int64_t)x;
    return INT64_MIN;
}

static int32_t kiln_interp_f2i32(double x)
{
    if (x > -2147483649.0 && x < 2147483648.0)
        return (int32_t)x;
    return INT32_MIN;
}

#define KILN_INTERP_ADD64(x, y) kiln_interp_s64((uint64_t)(x) + (uint64_t)(y))
#define KILN_INTERP_SUB64(x, y) kiln_interp_s64((uint64_t)(x) - (uint64_t)(y))
#define KILN_INTERP_MUL64(x, y) kiln_interp_s64((uint64_t)(x) * (uint64_t)(y))
#define KILN_INTERP_ADD32(x, y) kiln_interp_s32((uint32_t)(x) + (uint32_t)(y))
#define KILN_INTERP_SUB32(x, y) kiln_interp_s32((uint32_t)(x) - (uint32_t)(y))
#define KILN_INTERP_MUL32(x, y) kiln_interp_s32((uint32_t)(x) * (uint32_t)(y))
/* NumPy's maximum/minimum: a NaN on either side wins. */
#define KILN_INTERP_FMAX(x, y) ((x) > (y) || (x) != (x) ? (x) : (y))
#define KILN_INTERP_FMIN(x, y) ((x) < (y) || (x) != (x) ? (x) : (y))
#define KILN_INTERP_MAX(x, y) ((x) > (y) ? (x) : (y))
#define KILN_INTERP_MIN(x, y) ((x) < (y) ? (x) : (y))
#define KILN_INTERP_OR(x, y) ((uint8_t)((x) | (y)))
#define KILN_INTERP_AND(x, y) ((uint8_t)((x) & (y)))

/* Loops over one block: x (and y, z) are the operands' slots j. */
#define KILN_INTERP_LOOP1(T, R, EXPR)                                         \
    do {                                                                      \
        R *d_ = d;                                                            \
        const T *a_ = a;                                                      \
        for (size_t j = 0; j < n; j++) {                                      \
            T x = a_[j];                                                      \
            d_[j] = (EXPR);                                                   \
        }                                                                     \
    } while (0)

#define KILN_INTERP_LOOP2(T, R, EXPR)                                         \
    do {                                                                      \
        R *d_ = d;                                                            \
        const T *a_ = a, *b_ = b;                                             \
        for (size_t j = 0; j < n; j++) {                                      \
            T x = a_[j], y = b_[j];                                           \
            d_[j] = (EXPR);                                                   \
        }                                                                     \
    } while (0)

typedef double (*kiln_interp_d2d)(double);
typedef double (*kiln_interp_dd2d)(double, double);
typedef double (*kiln_interp_ddd2d)(double, double, double);

/* Whether runtime table rt has field F (later versions are longer). */
#define KILN_INTERP_RT_HAS(rt, F)                                             \
    ((rt)->struct_size >= offsetof(kiln_runtime, F) + sizeof((rt)->F))
#define KILN_INTERP_RT_GET(rt, F) (KILN_INTERP_RT_HAS(rt, F) ? (rt)->F : NULL)

/* The runtime function behind a binary float opcode (pow, and ABI 1.7's
 * mod, gammainc, gammaincc), NULL when the table lacks it. */
static kiln_interp_dd2d kiln_interp_rt_binary(const kiln_runtime *rt,
                                              unsigned op)
{
    switch (op) {
    case KILN_I_POW: return rt->pow;
    case KILN_I_MOD: return KILN_INTERP_RT_GET(rt, mod);
    case KILN_I_GAMMAINC: return KILN_INTERP_RT_GET(rt, gammainc);
    case KILN_I_GAMMAINCC: return KILN_INTERP_RT_GET(rt, gammaincc);
    case KILN_I_GAMMAINC_DA: return KILN_INTERP_RT_GET(rt, gammainc_da);
    default: return NULL;
    }
}

/* The runtime function behind a ternary float opcode (betainc and its
 * derivatives), NULL when the table lacks it. */
static kiln_interp_ddd2d kiln_interp_rt_ternary(const kiln_runtime *rt,
                                                unsigned op)
{
    switch (op) {
    case KILN_I_BETAINC: return KILN_INTERP_RT_GET(rt, betainc);
    case KILN_I_BETAINC_DA: return KILN_INTERP_RT_GET(rt, betainc_da);
    case KILN_I_BETAINC_DB: return KILN_INTERP_RT_GET(rt, betainc_db);
    default: return NULL;
    }
}

/* The runtime function behind a unary transcendental opcode. */
static kiln_interp_d2d kiln_interp_rt_unary(const kiln_runtime *rt,
                                            unsigned op)
{
    switch (op) {
    case KILN_I_EXP: return rt->exp;
    case KILN_I_EXPM1: return rt->expm1;
    case KILN_I_LOG: return rt->log;
    case KILN_I_LOG1P: return rt->log1p;
    case KILN_I_SQRT: return rt->sqrt;
    case KILN_I_SIGMOID: return rt->sigmoid;
    case KILN_I_SOFTPLUS: return rt->softplus;
    case KILN_I_TANH: return rt->tanh;
    case KILN_I_SIN: return rt->sin;
    case KILN_I_COS: return rt->cos;
    case KILN_I_ERF: return rt->erf;
    case KILN_I_ERFC: return rt->erfc;
    case KILN_I_GAMMALN: return rt->gammaln;
    case KILN_I_DIGAMMA: return rt->digamma;
    case KILN_I_TRIGAMMA: /* runtime version 2: absent from older tables */
        return rt->struct_size >= offsetof(kiln_runtime, trigamma)
                                       + sizeof(rt->trigamma)
                   ? rt->trigamma : NULL;
    /* runtime version 3 */
    case KILN_I_FLOOR: return KILN_INTERP_RT_GET(rt, floor);
    case KILN_I_CEIL: return KILN_INTERP_RT_GET(rt, ceil);
    case KILN_I_TRUNC: return KILN_INTERP_RT_GET(rt, trunc);
    case KILN_I_RINT: return KILN_INTERP_RT_GET(rt, rint);
    case KILN_I_ROUND: return KILN_INTERP_RT_GET(rt, round);
    case KILN_I_LOG1MEXP: return KILN_INTERP_RT_GET(rt, log1mexp);
    case KILN_I_ERFCX: return KILN_INTERP_RT_GET(rt, erfcx);
    case KILN_I_ERFINV: return KILN_INTERP_RT_GET(rt, erfinv);
    case KILN_I_ERFCINV: return KILN_INTERP_RT_GET(rt, erfcinv);
    /* runtime version 5 */
    case KILN_I_I0E: return KILN_INTERP_RT_GET(rt, i0e);
    case KILN_I_I1E: return KILN_INTERP_RT_GET(rt, i1e);
    default: return NULL;
    }
}

/* Ops on floats: f32 goes through the double runtime functions and is
 * rounded once (for + - * / computing in float gives the same result,
 * double having more than twice float's precision). */
#define KILN_INTERP_FLOAT_OPS(T, FABS)                                        \
    switch (op) {                                                             \
    case KILN_I_ADD: KILN_INTERP_LOOP2(T, T, x + y); break;                   \
    case KILN_I_SUB: KILN_INTERP_LOOP2(T, T, x - y); break;                   \
    case KILN_I_MUL: KILN_INTERP_LOOP2(T, T, x * y); break;                   \
    case KILN_I_TRUE_DIV: KILN_INTERP_LOOP2(T, T, x / y); break;              \
    case KILN_I_MAXIMUM: KILN_INTERP_LOOP2(T, T, KILN_INTERP_FMAX(x, y));     \
        break;                                                                \
    case KILN_I_MINIMUM: KILN_INTERP_LOOP2(T, T, KILN_INTERP_FMIN(x, y));     \
        break;                                                                \
    case KILN_I_POW: case KILN_I_MOD: case KILN_I_GAMMAINC:                   \
    case KILN_I_GAMMAINCC: case KILN_I_GAMMAINC_DA: {                         \
        kiln_interp_dd2d f2 = kiln_interp_rt_binary(rt, op);                  \
        KILN_INTERP_LOOP2(T, T, (T)f2((double)x, (double)y));                 \
        break;                                                                \
    }                                                                         \
    case KILN_I_BETAINC: case KILN_I_BETAINC_DA: case KILN_I_BETAINC_DB: {    \
        kiln_interp_ddd2d f3 = kiln_interp_rt_ternary(rt, op);                \
        T *d_ = d;                                                            \
        const T *a_ = a, *b_ = b, *c_ = c;                                    \
        for (size_t j = 0; j < n; j++)                                        \
            d_[j] = (T)f3((double)a_[j], (double)b_[j], (double)c_[j]);       \
        break;                                                                \
    }                                                                         \
    case KILN_I_NEG: KILN_INTERP_LOOP1(T, T, -x); break;                      \
    case KILN_I_ABS: KILN_INTERP_LOOP1(T, T, FABS(x)); break;                 \
    case KILN_I_SQUARE: KILN_INTERP_LOOP1(T, T, x * x); break;                \
    default: {                                                                \
        kiln_interp_d2d f = kiln_interp_rt_unary(rt, op);                     \
        KILN_INTERP_LOOP1(T, T, (T)f((double)x));                             \
        break;                                                                \
    }                                                                         \
    }

/* Ops on integers wrap like two's complement (NumPy), without UB. */
#define KILN_INTERP_INT_OPS(T, ADD, SUB, MUL)                                 \
    switch (op) {                                                             \
    case KILN_I_ADD: KILN_INTERP_LOOP2(T, T, ADD(x, y)); break;               \
    case KILN_I_SUB: KILN_INTERP_LOOP2(T, T, SUB(x, y)); break;               \
    case KILN_I_MUL: KILN_INTERP_LOOP2(T, T, MUL(x, y)); break;               \
    case KILN_I_MAXIMUM: KILN_INTERP_LOOP2(T, T, KILN_INTERP_MAX(x, y));      \
        break;                                                                \
    case KILN_I_MINIMUM: KILN_INTERP_LOOP2(T, T, KILN_INTERP_MIN(x, y));      \
        break;                                                                \
    case KILN_I_NEG: KILN_INTERP_LOOP1(T, T, SUB(0, x)); break;               \
    case KILN_I_ABS: KILN_INTERP_LOOP1(T, T, x < 0 ? SUB(0, x) : x); break;   \
    case KILN_I_SQUARE: KILN_INTERP_LOOP1(T, T, MUL(x, x)); break;            \
    case KILN_I_MOD: KILN_INTERP_LOOP2(T, T, KILN_INTERP_IMOD(T, x, y)); break; \
    default: break;                                                           \
    }

/* NumPy's integer remainder: the sign of y; 0 for y = 0 (NumPy warns
 * and gives 0) and for y = -1 (no INT_MIN % -1 overflow). */
#define KILN_INTERP_IMOD(T, x, y)                                             \
    ((y) == 0 || (y) == -1 ? (T)0                                             \
     : ((x) % (y) != 0 && (((x) % (y) < 0) != ((y) < 0)))                     \
         ? (T)((x) % (y) + (y)) : (T)((x) % (y)))

/* Arithmetic, maximum/minimum and the transcendental functions. */
static void kiln_interp_arith(const kiln_runtime *rt, unsigned op,
                              unsigned dt, void *d, const void *a,
                              const void *b, const void *c, size_t n)
{
    switch (dt) {
    case KILN_F64: KILN_INTERP_FLOAT_OPS(double, fabs) break;
    case KILN_F32: KILN_INTERP_FLOAT_OPS(float, fabsf) break;
    case KILN_I64:
        KILN_INTERP_INT_OPS(int64_t, KILN_INTERP_ADD64, KILN_INTERP_SUB64,
                            KILN_INTERP_MUL64)
        break;
    case KILN_I32:
        KILN_INTERP_INT_OPS(int32_t, KILN_INTERP_ADD32, KILN_INTERP_SUB32,
                            KILN_INTERP_MUL32)
        break;
    default: /* bool: only maximum/minimum pass the checks */
        if (op == KILN_I_MAXIMUM)
            KILN_INTERP_LOOP2(uint8_t, uint8_t, KILN_INTERP_OR(x, y));
        else
            KILN_INTERP_LOOP2(uint8_t, uint8_t, KILN_INTERP_AND(x, y));
        break;
    }
}

#define KILN_INTERP_COMPARE_OPS(T)                                            \
    switch (op) {                                                             \
    case KILN_I_EQ: KILN_INTERP_LOOP2(T, uint8_t, x == y); break;             \
    case KILN_I_NE: KILN_INTERP_LOOP2(T, uint8_t, x != y); break;             \
    case KILN_I_LT: KILN_INTERP_LOOP2(T, uint8_t, x < y); break;              \
    case KILN_I_LE: KILN_INTERP_LOOP2(T, uint8_t, x <= y); break;             \
    case KILN_I_GT: KILN_INTERP_LOOP2(T, uint8_t, x > y); break;              \
    default: KILN_INTERP_LOOP2(T, uint8_t, x >= y); break;                    \
    }

/* Comparisons of two operands of dtype `dt`, giving bool (NaN compares
 * unequal and unordered, as in C and NumPy). */
static void kiln_interp_compare(unsigned op, unsigned dt, void *d,
                                const void *a, const void *b, size_t n)
{
    switch (dt) {
    case KILN_F64: KILN_INTERP_COMPARE_OPS(double) break;
    case KILN_F32: KILN_INTERP_COMPARE_OPS(float) break;
    case KILN_I64: KILN_INTERP_COMPARE_OPS(int64_t) break;
    case KILN_I32: KILN_INTERP_COMPARE_OPS(int32_t) break;
    default: KILN_INTERP_COMPARE_OPS(uint8_t) break;
    }
}

static void kiln_interp_logic(unsigned op, void *d, const void *a,
                              const void *b, size_t n)
{
    switch (op) {
    case KILN_I_AND:
        KILN_INTERP_LOOP2(uint8_t, uint8_t, (uint8_t)(x != 0 && y != 0));
        break;
    case KILN_I_OR:
        KILN_INTERP_LOOP2(uint8_t, uint8_t, (uint8_t)(x != 0 || y != 0));
        break;
    default:
        KILN_INTERP_LOOP1(uint8_t, uint8_t, (uint8_t)(x == 0));
        break;
    }
}

#define KILN_INTERP_WHERE_LOOP(T)                                             \
    do {                                                                      \
        T *d_ = d;                                                            \
        const T *b_ = b, *c_ = c;                                             \
        for (size_t j = 0; j < n; j++)                                        \
            d_[j] = cond[j] ? b_[j] : c_[j];                                  \
    } while (0)

static void kiln_interp_where(unsigned dt, void *d, const uint8_t *cond,
                              const void *b, const void *c, size_t n)
{
    switch (dt) {
    case KILN_F64: KILN_INTERP_WHERE_LOOP(double); break;
    case KILN_F32: KILN_INTERP_WHERE_LOOP(float); break;
    case KILN_I64: KILN_INTERP_WHERE_LOOP(int64_t); break;
    case KILN_I32: KILN_INTERP_WHERE_LOOP(int32_t); break;
    default: KILN_INTERP_WHERE_LOOP(uint8_t); break;
    }
}

/* One source dtype to every destination dtype; TO64/TO32 convert x to
 * the integer types, floats go through C's (defined) conversions. */
#define KILN_INTERP_CAST_FROM(TS, TO64, TO32)                                 \
    switch (to) {                                                             \
    case KILN_F64: KILN_INTERP_LOOP1(TS, double, (double)x); break;           \
    case KILN_F32: KILN_INTERP_LOOP1(TS, float, (float)x); break;             \
    case KILN_I64: KILN_INTERP_LOOP1(TS, int64_t, TO64); break;               \
    case KILN_I32: KILN_INTERP_LOOP1(TS, int32_t, TO32); break;               \
    default: KILN_INTERP_LOOP1(TS, uint8_t, (uint8_t)(x != 0)); break;        \
    }

static void kiln_interp_cast(unsigned from, unsigned to, void *d,
                             const void *a, size_t n)
{
    switch (from) {
    case KILN_F64:
        KILN_INTERP_CAST_FROM(double, kiln_interp_f2i64(x),
                              kiln_interp_f2i32(x))
        break;
    case KILN_F32:
        KILN_INTERP_CAST_FROM(float, kiln_interp_f2i64((double)x),
                              kiln_interp_f2i32((double)x))
        break;
    case KILN_I64:
        KILN_INTERP_CAST_FROM(int64_t, x, kiln_interp_s32((uint32_t)x))
        break;
    case KILN_I32:
        KILN_INTERP_CAST_FROM(int32_t, (int64_t)x, x)
        break;
    default:
        KILN_INTERP_CAST_FROM(uint8_t, (int64_t)(x != 0), (int32_t)(x != 0))
        break;
    }
}

/* Fill the first `count` slots of a register (no block of this call is
 * longer) with the constant `imm` converted to `dt`.  Filling only what a
 * call can read keeps small kernels (scalars) cheap. */
static void kiln_interp_fill_const(unsigned dt, double imm, void *reg,
                                   size_t count)
{
    double one = imm;
    kiln_interp_cast(KILN_F64, dt, reg, &one, 1);
    size_t es = kiln_interp_dtype_size(dt);
    for (size_t j = 1; j < count; j++)
        memcpy((char *)reg + j * es, reg, es);
}

/* Run one non-LOAD, non-CONST instruction over a block. */
static void kiln_interp_exec(const kiln_runtime *rt, const kiln_instr *in,
                             unsigned odt, void *d, const void *a,
                             const void *b, const void *c, size_t n)
{
    switch (kiln_interp_ops[in->op].cls) {
    case KILN_INTERP_C_CAST:
        kiln_interp_cast(odt, in->dtype, d, a, n);
        break;
    case KILN_INTERP_C_WHERE:
        kiln_interp_where(in->dtype, d, a, b, c, n);
        break;
    case KILN_INTERP_C_COMPARE:
        kiln_interp_compare(in->op, odt, d, a, b, n);
        break;
    case KILN_INTERP_C_LOGIC:
        kiln_interp_logic(in->op, d, a, b, n);
        break;
    default:
        kiln_interp_arith(rt, in->op, in->dtype, d, a, b, c, n);
        break;
    }
}
