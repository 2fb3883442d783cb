/*
 * test_interp.c — the interpreter backend, called through its plugin
 * descriptor (kiln_backend_entry linked in directly) on hand-built kernel
 * descriptions.  Every expected value is computed here with plain loops
 * and libm; the special functions are checked against published values.
 */
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include "runtime.h"
#include "special.h"
#include "tap.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const kiln_backend *kiln_backend_entry(uint32_t, uint32_t, char *, size_t);

static const kiln_backend *B;

/* ------------------------------------------------------------------ */
/* Values: f64/f32 as double, integers and bool as int64               */
/* ------------------------------------------------------------------ */

typedef struct tv {
    double f;
    int64_t i;
} tv;

static const char *DT[] = { "f64", "f32", "i64", "i32", "bool" };

static int isf(int dt) { return dt == KILN_F64 || dt == KILN_F32; }

static void put(void *buf, int dt, int64_t k, tv v)
{
    switch (dt) {
    case KILN_F64: ((double *)buf)[k] = v.f; break;
    case KILN_F32: ((float *)buf)[k] = (float)v.f; break;
    case KILN_I64: ((int64_t *)buf)[k] = v.i; break;
    case KILN_I32: ((int32_t *)buf)[k] = (int32_t)v.i; break;
    default: ((uint8_t *)buf)[k] = (uint8_t)(v.i != 0); break;
    }
}

static tv get(const void *buf, int dt, int64_t k)
{
    tv v = { 0, 0 };
    switch (dt) {
    case KILN_F64: v.f = ((const double *)buf)[k]; break;
    case KILN_F32: v.f = ((const float *)buf)[k]; break;
    case KILN_I64: v.i = ((const int64_t *)buf)[k]; break;
    case KILN_I32: v.i = ((const int32_t *)buf)[k]; break;
    default: v.i = ((const uint8_t *)buf)[k]; break;
    }
    return v;
}

static tv F(double f) { tv v = { f, 0 }; return v; }
static tv I(int64_t i) { tv v = { 0, i }; return v; }

static int tv_match(int dt, tv got, tv want, double rtol)
{
    if (isf(dt))
        return tap_close(got.f, want.f, rtol);
    return got.i == want.i;
}

/* One TAP line for a whole array; the first mismatch goes to diag. */
static TAP_PRINTF(6, 7) int check_array(int dt, const void *got,
                                        const tv *want, int64_t n,
                                        double rtol, const char *fmt, ...)
{
    int64_t bad = -1, nbad = 0;
    for (int64_t k = 0; k < n; k++)
        if (!tv_match(dt, get(got, dt, k), want[k], rtol)) {
            if (bad < 0)
                bad = k;
            nbad++;
        }
    va_list ap;
    va_start(ap, fmt);
    tap_vok(bad < 0, fmt, ap);
    va_end(ap);
    if (bad >= 0) {
        tv g = get(got, dt, bad);
        if (isf(dt))
            diag("%lld mismatches; [%lld] got %.17g want %.17g",
                 (long long)nbad, (long long)bad, g.f, want[bad].f);
        else
            diag("%lld mismatches; [%lld] got %lld want %lld",
                 (long long)nbad, (long long)bad, (long long)g.i,
                 (long long)want[bad].i);
    }
    return bad < 0;
}

/* Deterministic pseudo-random numbers (xorshift64*). */
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double urand(double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng() >> 11) / 9007199254740992.0;
}

/* ------------------------------------------------------------------ */
/* Building and running kernels                                         */
/* ------------------------------------------------------------------ */

typedef struct prog {
    kiln_instr ins[256];
    uint32_t n;
} prog;

static int32_t emit(prog *p, int op, int dt, int32_t a, int32_t b, int32_t c,
                    double imm)
{
    kiln_instr in = { (uint16_t)op, (uint8_t)dt, 0, a, b, c, imm };
    p->ins[p->n] = in;
    return (int32_t)p->n++;
}
static int32_t LOAD(prog *p, int input, int dt)
{
    return emit(p, KILN_I_LOAD, dt, input, -1, -1, 0);
}
static int32_t OP1(prog *p, int op, int dt, int32_t a)
{
    return emit(p, op, dt, a, -1, -1, 0);
}
static int32_t OP2(prog *p, int op, int dt, int32_t a, int32_t b)
{
    return emit(p, op, dt, a, b, -1, 0);
}
static int32_t CONST(prog *p, int dt, double imm)
{
    return emit(p, KILN_I_CONST, dt, -1, -1, -1, imm);
}

static kiln_arg_desc AD(int dt, int rank)
{
    kiln_arg_desc d = { (uint8_t)dt, (uint8_t)rank, { 0, 0 } };
    return d;
}

static kiln_kernel kernel(uint32_t kind, uint32_t nin, const kiln_arg_desc *in,
                          uint32_t nout, const kiln_arg_desc *out)
{
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = kind;
    k.n_inputs = nin;
    k.inputs = in;
    k.n_outputs = nout;
    k.outputs = out;
    return k;
}

static void with_prog(kiln_kernel *k, const prog *p, const int32_t *refs)
{
    k->n_instrs = p->n;
    k->instrs = p->ins;
    k->out_refs = refs;
}

/* A C-contiguous view. */
static kiln_view V(void *data, int dt, int rank, const int64_t *shape)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.rank = rank;
    v.dtype = dt;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        v.shape[d] = shape[d];
        v.strides[d] = s;
        s *= shape[d];
    }
    return v;
}

/* A view with explicit strides. */
static kiln_view VS(void *data, int dt, int rank, const int64_t *shape,
                    const int64_t *strides)
{
    kiln_view v = V(data, dt, rank, shape);
    for (int d = 0; d < rank; d++)
        v.strides[d] = strides[d];
    return v;
}

static char errbuf[512];

/* The runtime table calls go through; tests may swap in a counting one. */
static const kiln_runtime *RT;
static kiln_runtime counting_rt;
static int n_gemm, n_exp;

static void count_dgemm(int ta, int tb, int64_t m, int64_t n, int64_t k,
                        double alpha, const double *a, int64_t lda,
                        const double *b, int64_t ldb, double beta, double *c,
                        int64_t ldc)
{
    n_gemm++;
    kiln_runtime_get()->dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                              ldc);
}

static void count_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k,
                        float alpha, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float beta, float *c,
                        int64_t ldc)
{
    n_gemm++;
    kiln_runtime_get()->sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                              ldc);
}

static double count_exp(double x)
{
    n_exp++;
    return exp(x);
}

static void use_counting_runtime(int on)
{
    counting_rt = *kiln_runtime_get();
    counting_rt.dgemm = count_dgemm;
    counting_rt.sgemm = count_sgemm;
    /* without the ABI-1.8 entries, as an older host's table: DOT falls
     * back to dgemm / sgemm, which count */
    counting_rt.dgemm_rt = NULL;
    counting_rt.sgemm_rt = NULL;
    counting_rt.exp = count_exp;
    RT = on ? &counting_rt : kiln_runtime_get();
    n_gemm = n_exp = 0;
}

/* supports -> compile -> load -> (artifact freed) -> call.  Returns the
 * call's status, or -1000 when the kernel was refused (with a diag). */
static int run(const kiln_kernel *k, const kiln_view *in, const kiln_view *out)
{
    kiln_plugin_error *err = NULL;
    kiln_artifact *art = NULL;
    kiln_callable *c = NULL;
    if (!B->supports(k, &err)) {
        diag("refused: %s", err ? err->message : "?");
        B->error_free(err);
        return -1000;
    }
    if (B->compile(k, NULL, &art, &err)) {
        diag("compile: %s", err ? err->message : "?");
        B->error_free(err);
        return -1000;
    }
    int rc = B->load(art, &c, &err);
    B->artifact_free(art); /* load keeps its own copy */
    if (rc) {
        diag("load: %s", err ? err->message : "?");
        B->error_free(err);
        return -1000;
    }
    kiln_call call;
    memset(&call, 0, sizeof call);
    call.struct_size = sizeof call;
    call.n_inputs = k->n_inputs;
    call.n_outputs = k->n_outputs;
    call.inputs = in;
    call.outputs = out;
    call.rt = RT ? RT : kiln_runtime_get();
    errbuf[0] = 0;
    call.errbuf = errbuf;
    call.errbuf_size = sizeof errbuf;
    rc = c->fn(c->state, &call);
    B->callable_free(c);
    return rc;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        diag("out of memory");
        /* The tests cannot go on; report and stop the process cleanly. */
        printf("Bail out! out of memory\n");
        exit(1);
    }
    return p;
}

/* ------------------------------------------------------------------ */
/* Reference semantics, written independently of the interpreter        */
/* ------------------------------------------------------------------ */

/* Two's-complement wrap of u to the width of dt. */
static int64_t wrapi(int dt, uint64_t u)
{
    if (dt == KILN_I32) {
        u &= 0xffffffffu;
        return u >= 0x80000000u ? (int64_t)u - 4294967296LL : (int64_t)u;
    }
    int64_t r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static double ref_sigmoid(double x)
{
    return (double)(1.0L / (1.0L + expl(-(long double)x)));
}

static double ref_softplus(double x)
{
    long double lx = x;
    return (double)(x > 0 ? lx + log1pl(expl(-lx)) : log1pl(expl(lx)));
}

static double ref_float(int op, double x, double y)
{
    switch (op) {
    case KILN_I_ADD: return x + y;
    case KILN_I_SUB: return x - y;
    case KILN_I_MUL: return x * y;
    case KILN_I_TRUE_DIV: return x / y;
    case KILN_I_NEG: return -x;
    case KILN_I_ABS: return fabs(x);
    case KILN_I_EXP: return exp(x);
    case KILN_I_EXPM1: return expm1(x);
    case KILN_I_LOG: return log(x);
    case KILN_I_LOG1P: return log1p(x);
    case KILN_I_SQRT: return sqrt(x);
    case KILN_I_SQUARE: return x * x;
    case KILN_I_POW: return pow(x, y);
    case KILN_I_SIGMOID: return ref_sigmoid(x);
    case KILN_I_SOFTPLUS: return ref_softplus(x);
    case KILN_I_TANH: return tanh(x);
    case KILN_I_SIN: return sin(x);
    case KILN_I_COS: return cos(x);
    case KILN_I_ERF: return erf(x);
    case KILN_I_ERFC: return erfc(x);
    case KILN_I_GAMMALN: return lgamma(x);
    case KILN_I_DIGAMMA: return kiln_digamma(x); /* checked on its own */
    case KILN_I_TRIGAMMA: return kiln_trigamma(x); /* checked on its own */
    case KILN_I_MAXIMUM: return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
    case KILN_I_MINIMUM: return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
    default: return NAN;
    }
}

static int64_t ref_int(int op, int dt, int64_t x, int64_t y)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (op) {
    case KILN_I_ADD: return wrapi(dt, ux + uy);
    case KILN_I_SUB: return wrapi(dt, ux - uy);
    case KILN_I_MUL: return wrapi(dt, ux * uy);
    case KILN_I_NEG: return wrapi(dt, 0 - ux);
    case KILN_I_ABS: return x < 0 ? wrapi(dt, 0 - ux) : x;
    case KILN_I_SQUARE: return wrapi(dt, ux * ux);
    case KILN_I_MAXIMUM: return x > y ? x : y;
    case KILN_I_MINIMUM: return x < y ? x : y;
    default: return 0;
    }
}

static int ref_compare(int op, int dt, tv a, tv b)
{
    if (isf(dt)) {
        double x = a.f, y = b.f;
        switch (op) {
        case KILN_I_EQ: return x == y;
        case KILN_I_NE: return x != y;
        case KILN_I_LT: return x < y;
        case KILN_I_LE: return x <= y;
        case KILN_I_GT: return x > y;
        default: return x >= y;
        }
    }
    int64_t x = a.i, y = b.i;
    switch (op) {
    case KILN_I_EQ: return x == y;
    case KILN_I_NE: return x != y;
    case KILN_I_LT: return x < y;
    case KILN_I_LE: return x <= y;
    case KILN_I_GT: return x > y;
    default: return x >= y;
    }
}

/* Float -> integer as kiln defines it: truncate; NaN or out of range
 * gives the minimum of the type. */
static int64_t ref_f2i(double x, int dt)
{
    long double lo = dt == KILN_I32 ? -2147483648.0L : -9223372036854775808.0L;
    long double hi = dt == KILN_I32 ? 2147483647.0L : 9223372036854775807.0L;
    if (isnan(x))
        return dt == KILN_I32 ? INT32_MIN : INT64_MIN;
    long double t = truncl((long double)x);
    if (t < lo || t > hi)
        return dt == KILN_I32 ? INT32_MIN : INT64_MIN;
    return (int64_t)t;
}

static tv ref_cast(tv v, int from, int to)
{
    if (to == KILN_BOOL)
        return I(isf(from) ? v.f != 0 : v.i != 0);
    if (isf(from)) {
        if (isf(to))
            return F(to == KILN_F32 ? (double)(float)v.f : v.f);
        return I(ref_f2i(v.f, to));
    }
    if (to == KILN_F64)
        return F((double)v.i);
    if (to == KILN_F32)
        return F((double)(float)v.i); /* int64 -> float rounds once */
    return I(wrapi(to, (uint64_t)v.i));
}

/* ------------------------------------------------------------------ */
/* Test data                                                            */
/* ------------------------------------------------------------------ */

#define N_ELEM 1000 /* crosses the 256-element block boundary */

/* Interesting values first, then random ones. */
static void fill_values(int dt, tv *v, int64_t n, int which)
{
    static const double fs[] = {
        0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1e-300,
        1e300, -1e300, NAN, INFINITY, -INFINITY, 40.0, -40.0, 800.0, -800.0,
        2.5, -2.5, 1e20, -1e20, 3e9, -3e9, 2147483647.9, -2147483648.9,
        -9223372036854775808.0, 9223372036854775808.0, 9.3e18, 1e-8, -1e-8,
        33.4, -37.5
    };
    static const int64_t is[] = {
        0, 1, -1, 2, -2, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1,
        3037000500LL, -3037000500LL, 4294967296LL, INT32_MAX, INT32_MIN,
        46341, -46341, 65536, 2147483648LL, -2147483649LL, 9007199254740993LL
    };
    int nf = (int)(sizeof fs / sizeof fs[0]);
    int ni = (int)(sizeof is / sizeof is[0]);
    for (int64_t k = 0; k < n; k++) {
        int64_t s = (k + which * 7) % (isf(dt) ? nf : ni);
        int special = k < (isf(dt) ? 2 * nf : 2 * ni);
        switch (dt) {
        case KILN_F64:
        case KILN_F32: {
            double f = special ? fs[s] : urand(-6, 6);
            v[k] = F(dt == KILN_F32 ? (double)(float)f : f);
            break;
        }
        case KILN_I64:
            v[k] = I(special ? is[s]
                     : (k % 3 == 0) ? (int64_t)rng()
                                    : (int64_t)(rng() % 2001) - 1000);
            break;
        case KILN_I32:
            v[k] = I(special ? wrapi(KILN_I32, (uint64_t)is[s])
                     : wrapi(KILN_I32, k % 3 == 0 ? rng()
                                        : (uint64_t)(rng() % 2001) - 1000));
            break;
        default:
            v[k] = I((int64_t)(rng() & 1));
            break;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Elementwise: every opcode in every valid dtype                       */
/* ------------------------------------------------------------------ */

enum { C_NUM, C_FLT, C_ORD, C_CMP, C_LOG, C_WHERE, C_CAST };

typedef struct opdef {
    int op;
    const char *name;
    int arity;
    int cls;
} opdef;

static const opdef OPS[] = {
    { KILN_I_ADD, "add", 2, C_NUM }, { KILN_I_SUB, "sub", 2, C_NUM },
    { KILN_I_MUL, "mul", 2, C_NUM }, { KILN_I_TRUE_DIV, "true_div", 2, C_FLT },
    { KILN_I_NEG, "neg", 1, C_NUM }, { KILN_I_ABS, "abs", 1, C_NUM },
    { KILN_I_EXP, "exp", 1, C_FLT }, { KILN_I_EXPM1, "expm1", 1, C_FLT },
    { KILN_I_LOG, "log", 1, C_FLT }, { KILN_I_LOG1P, "log1p", 1, C_FLT },
    { KILN_I_SQRT, "sqrt", 1, C_FLT }, { KILN_I_SQUARE, "square", 1, C_NUM },
    { KILN_I_POW, "pow", 2, C_FLT }, { KILN_I_SIGMOID, "sigmoid", 1, C_FLT },
    { KILN_I_SOFTPLUS, "softplus", 1, C_FLT },
    { KILN_I_TANH, "tanh", 1, C_FLT },
    { KILN_I_SIN, "sin", 1, C_FLT }, { KILN_I_COS, "cos", 1, C_FLT },
    { KILN_I_ERF, "erf", 1, C_FLT }, { KILN_I_ERFC, "erfc", 1, C_FLT },
    { KILN_I_GAMMALN, "gammaln", 1, C_FLT },
    { KILN_I_DIGAMMA, "digamma", 1, C_FLT },
    { KILN_I_MAXIMUM, "maximum", 2, C_ORD },
    { KILN_I_MINIMUM, "minimum", 2, C_ORD },
    { KILN_I_EQ, "eq", 2, C_CMP }, { KILN_I_NE, "ne", 2, C_CMP },
    { KILN_I_LT, "lt", 2, C_CMP }, { KILN_I_LE, "le", 2, C_CMP },
    { KILN_I_GT, "gt", 2, C_CMP }, { KILN_I_GE, "ge", 2, C_CMP },
    { KILN_I_AND, "and", 2, C_LOG }, { KILN_I_OR, "or", 2, C_LOG },
    { KILN_I_NOT, "not", 1, C_LOG },
    { KILN_I_TRIGAMMA, "trigamma", 1, C_FLT },
};

static int op_valid(int cls, int dt)
{
    switch (cls) {
    case C_NUM: return dt != KILN_BOOL;
    case C_FLT: return isf(dt);
    case C_LOG: return dt == KILN_BOOL;
    default: return 1;
    }
}

/* Tolerance: exact where the interpreter and the reference compute the
 * same thing; sigmoid/softplus are referenced in long double. */
static double op_rtol(int op, int dt)
{
    if (op == KILN_I_SIGMOID || op == KILN_I_SOFTPLUS)
        /* ~4 ulp: under valgrind long double is only double */
        return dt == KILN_F32 ? 2e-7 : 1e-15;
    return 0.0;
}

static tv ref_op(const opdef *o, int dt, tv x, tv y)
{
    switch (o->cls) {
    case C_CMP: return I(ref_compare(o->op, dt, x, y));
    case C_LOG:
        return I(o->op == KILN_I_AND ? (x.i && y.i)
                 : o->op == KILN_I_OR ? (x.i || y.i) : !x.i);
    default: break;
    }
    if (dt == KILN_BOOL) /* maximum = or, minimum = and */
        return I(o->op == KILN_I_MAXIMUM ? (x.i | y.i) : (x.i & y.i));
    if (isf(dt)) {
        double r = ref_float(o->op, x.f, y.f);
        return F(dt == KILN_F32 ? (double)(float)r : r);
    }
    return I(ref_int(o->op, dt, x.i, y.i));
}

static void test_elemwise_op(const opdef *o, int dt)
{
    int64_t n = N_ELEM, shape[1] = { N_ELEM };
    int rdt = o->cls == C_CMP ? KILN_BOOL : dt;
    tv *x = xcalloc((size_t)n, sizeof *x), *y = xcalloc((size_t)n, sizeof *y);
    tv *want = xcalloc((size_t)n, sizeof *want);
    void *bx = xcalloc((size_t)n, 8), *by = xcalloc((size_t)n, 8);
    void *bo = xcalloc((size_t)n, 8);
    fill_values(dt, x, n, 0);
    fill_values(dt, y, n, 1);
    for (int64_t k = 0; k < n; k++) {
        put(bx, dt, k, x[k]);
        put(by, dt, k, y[k]);
        /* reference from the stored (rounded) inputs */
        want[k] = ref_op(o, dt, get(bx, dt, k), get(by, dt, k));
    }
    kiln_arg_desc in[2] = { AD(dt, 1), AD(dt, 1) }, out[1] = { AD(rdt, 1) };
    kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, (uint32_t)o->arity, in, 1,
                           out);
    prog p = { .n = 0 };
    int32_t a = LOAD(&p, 0, dt), b = o->arity > 1 ? LOAD(&p, 1, dt) : -1;
    int32_t refs[1] = { emit(&p, o->op, rdt, a, b, -1, 0) };
    with_prog(&k, &p, refs);
    k.label = o->name;
    kiln_view vin[2] = { V(bx, dt, 1, shape), V(by, dt, 1, shape) };
    kiln_view vout[1] = { V(bo, rdt, 1, shape) };
    int rc = run(&k, vin, vout);
    if (rc)
        ok(0, "elemwise %s %s runs (rc %d: %s)", o->name, DT[dt], rc, errbuf);
    else
        check_array(rdt, bo, want, n, op_rtol(o->op, dt), "elemwise %s %s",
                    o->name, DT[dt]);
    free(x); free(y); free(want); free(bx); free(by); free(bo);
}

/* Refused where not defined (the lowering casts before), with a reason. */
static void test_refused_op(const opdef *o, int dt)
{
    kiln_arg_desc in[2] = { AD(dt, 1), AD(dt, 1) }, out[1] = { AD(dt, 1) };
    kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, (uint32_t)o->arity, in, 1,
                           out);
    prog p = { .n = 0 };
    int32_t a = LOAD(&p, 0, dt), b = o->arity > 1 ? LOAD(&p, 1, dt) : -1;
    int32_t refs[1] = { emit(&p, o->op, dt, a, b, -1, 0) };
    with_prog(&k, &p, refs);
    kiln_plugin_error *err = NULL;
    int yes = B->supports(&k, &err);
    ok(!yes && err && err->message && strstr(err->message, o->name),
       "%s on %s is refused with a reason (%s)", o->name, DT[dt],
       err && err->message ? err->message : "no message");
    B->error_free(err);
}

static void test_all_ops(void)
{
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        for (int dt = 0; dt < KILN_NDTYPES; dt++) {
            if (op_valid(OPS[i].cls, dt))
                test_elemwise_op(&OPS[i], dt);
            else if (OPS[i].cls == C_FLT && dt == KILN_I64)
                test_refused_op(&OPS[i], dt);
        }
}

static void test_where_and_casts(void)
{
    int64_t n = N_ELEM, shape[1] = { N_ELEM };
    for (int dt = 0; dt < KILN_NDTYPES; dt++) {
        tv *c = xcalloc((size_t)n, sizeof *c);
        tv *x = xcalloc((size_t)n, sizeof *x);
        tv *y = xcalloc((size_t)n, sizeof *y);
        tv *w = xcalloc((size_t)n, sizeof *w);
        void *bc = xcalloc((size_t)n, 1), *bx = xcalloc((size_t)n, 8);
        void *by = xcalloc((size_t)n, 8), *bo = xcalloc((size_t)n, 8);
        fill_values(KILN_BOOL, c, n, 0);
        fill_values(dt, x, n, 0);
        fill_values(dt, y, n, 3);
        for (int64_t k = 0; k < n; k++) {
            put(bc, KILN_BOOL, k, c[k]);
            put(bx, dt, k, x[k]);
            put(by, dt, k, y[k]);
            w[k] = c[k].i ? get(bx, dt, k) : get(by, dt, k);
        }
        kiln_arg_desc in[3] = { AD(KILN_BOOL, 1), AD(dt, 1), AD(dt, 1) };
        kiln_arg_desc out[1] = { AD(dt, 1) };
        kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, 3, in, 1, out);
        prog p = { .n = 0 };
        int32_t a = LOAD(&p, 0, KILN_BOOL), b = LOAD(&p, 1, dt);
        int32_t cc = LOAD(&p, 2, dt);
        int32_t refs[1] = { emit(&p, KILN_I_WHERE, dt, a, b, cc, 0) };
        with_prog(&k, &p, refs);
        kiln_view vin[3] = { V(bc, KILN_BOOL, 1, shape), V(bx, dt, 1, shape),
                             V(by, dt, 1, shape) };
        kiln_view vout[1] = { V(bo, dt, 1, shape) };
        int rc = run(&k, vin, vout);
        if (rc)
            ok(0, "where %s runs: %s", DT[dt], errbuf);
        else
            check_array(dt, bo, w, n, 0, "where %s", DT[dt]);
        free(c); free(x); free(y); free(w); free(bc); free(bx); free(by);
        free(bo);
    }

    for (int from = 0; from < KILN_NDTYPES; from++)
        for (int to = 0; to < KILN_NDTYPES; to++) {
            tv *x = xcalloc((size_t)n, sizeof *x);
            tv *w = xcalloc((size_t)n, sizeof *w);
            void *bx = xcalloc((size_t)n, 8), *bo = xcalloc((size_t)n, 8);
            fill_values(from, x, n, 2);
            for (int64_t k = 0; k < n; k++) {
                put(bx, from, k, x[k]);
                w[k] = ref_cast(get(bx, from, k), from, to);
            }
            kiln_arg_desc in[1] = { AD(from, 1) }, out[1] = { AD(to, 1) };
            kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, 1, in, 1, out);
            prog p = { .n = 0 };
            int32_t refs[1] = { OP1(&p, KILN_I_CAST, to, LOAD(&p, 0, from)) };
            with_prog(&k, &p, refs);
            kiln_view vin[1] = { V(bx, from, 1, shape) };
            kiln_view vout[1] = { V(bo, to, 1, shape) };
            int rc = run(&k, vin, vout);
            if (rc)
                ok(0, "cast %s -> %s runs: %s", DT[from], DT[to], errbuf);
            else
                check_array(to, bo, w, n, 0, "cast %s -> %s", DT[from],
                            DT[to]);
            free(x); free(w); free(bx); free(bo);
        }

    /* CONST in every dtype, as the whole program (no inputs). */
    for (int dt = 0; dt < KILN_NDTYPES; dt++) {
        const double imm = -2.75;
        tv w[N_ELEM];
        void *bo = xcalloc((size_t)n, 8);
        tv one = ref_cast(F(imm), KILN_F64, dt);
        for (int64_t k = 0; k < n; k++)
            w[k] = one;
        kiln_arg_desc out[1] = { AD(dt, 1) };
        kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, 0, NULL, 1, out);
        prog p = { .n = 0 };
        int32_t refs[1] = { CONST(&p, dt, imm) };
        with_prog(&k, &p, refs);
        kiln_view vout[1] = { V(bo, dt, 1, shape) };
        int rc = run(&k, NULL, vout);
        if (rc)
            ok(0, "const %s runs: %s", DT[dt], errbuf);
        else
            check_array(dt, bo, w, n, 0, "const %s (-2.75)", DT[dt]);
        free(bo);
    }
}

/* ------------------------------------------------------------------ */
/* Elementwise: views, broadcasting, several outputs                    */
/* ------------------------------------------------------------------ */

/* out = x * y + z over a (3, 1000) space: y broadcast along rows by a
 * shape-1 dim, z along columns by an explicit stride 0, x reversed. */
static void test_broadcast_strides(void)
{
    enum { R = 3, C = 1000 };
    static double x[R * C], y[C], z[R], o[R * C];
    tv w[R * C];
    for (int k = 0; k < R * C; k++)
        x[k] = urand(-2, 2);
    for (int k = 0; k < C; k++)
        y[k] = urand(-2, 2);
    for (int k = 0; k < R; k++)
        z[k] = urand(-2, 2);
    /* x viewed reversed in both dims: element (i, j) = x[(R-1-i)*C + C-1-j] */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            w[i * C + j] = F(x[(R - 1 - i) * C + (C - 1 - j)] * y[j] + z[i]);
    kiln_arg_desc in[3] = { AD(KILN_F64, 2), AD(KILN_F64, 2), AD(KILN_F64, 2) };
    kiln_arg_desc out[1] = { AD(KILN_F64, 2) };
    kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, 3, in, 1, out);
    prog p = { .n = 0 };
    int32_t m = OP2(&p, KILN_I_MUL, KILN_F64, LOAD(&p, 0, KILN_F64),
                    LOAD(&p, 1, KILN_F64));
    int32_t refs[1] = { OP2(&p, KILN_I_ADD, KILN_F64, m,
                            LOAD(&p, 2, KILN_F64)) };
    with_prog(&k, &p, refs);
    int64_t sh[2] = { R, C }, shy[2] = { 1, C };
    int64_t strx[2] = { -C, -1 }, strz[2] = { 1, 0 };
    kiln_view vin[3] = { VS(&x[R * C - 1], KILN_F64, 2, sh, strx),
                         V(y, KILN_F64, 2, shy),
                         VS(z, KILN_F64, 2, sh, strz) };
    kiln_view vout[1] = { V(o, KILN_F64, 2, sh) };
    int rc = run(&k, vin, vout);
    ok(rc == 0, "broadcast + negative strides run (%s)", errbuf);
    check_array(KILN_F64, o, w, R * C, 1e-15,
                "x[::-1, ::-1] * y[None, :] + z[:, None] over (3, 1000)");

    /* A transposed input and a strided output: o2[::2] = t.T where t is
     * a (300, 4) C array read as (4, 300). */
    static double t[300 * 4], o2[4 * 300 * 2];
    tv w2[4 * 300];
    for (int k2 = 0; k2 < 1200; k2++)
        t[k2] = k2 * 0.5;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 300; j++)
            w2[i * 300 + j] = F(-t[j * 4 + i]);
    for (int k2 = 0; k2 < 2400; k2++)
        o2[k2] = 12345.0;
    kiln_kernel k2 = kernel(KILN_KERNEL_ELEMWISE, 1, in, 1, out);
    prog p2 = { .n = 0 };
    int32_t refs2[1] = { OP1(&p2, KILN_I_NEG, KILN_F64,
                             LOAD(&p2, 0, KILN_F64)) };
    with_prog(&k2, &p2, refs2);
    int64_t sht[2] = { 4, 300 }, strt[2] = { 1, 4 }, stro[2] = { 600, 2 };
    kiln_view vin2[1] = { VS(t, KILN_F64, 2, sht, strt) };
    kiln_view vout2[1] = { VS(o2, KILN_F64, 2, sht, stro) };
    rc = run(&k2, vin2, vout2);
    double got[1200];
    int untouched = 1;
    for (int k3 = 0; k3 < 1200; k3++) {
        got[k3] = o2[2 * k3];
        untouched &= o2[2 * k3 + 1] == 12345.0;
    }
    ok(rc == 0, "transposed input, strided output run");
    check_array(KILN_F64, got, w2, 1200, 0, "neg of a transposed view into "
                "every other element");
    ok(untouched, "the elements between a strided output are untouched");

    /* Rank 5 with broadcasting on several axes, i32. */
    int64_t s5[5] = { 2, 3, 1, 4, 50 }, s5b[5] = { 2, 1, 1, 4, 1 };
    static int32_t a5[1200], b5[8], o5[1200];
    tv w5[1200];
    for (int k5 = 0; k5 < 1200; k5++)
        a5[k5] = (int32_t)(k5 * 7 - 600);
    for (int k5 = 0; k5 < 8; k5++)
        b5[k5] = (int32_t)(k5 - 3);
    for (int i0 = 0; i0 < 2; i0++)
        for (int i1 = 0; i1 < 3; i1++)
            for (int i3 = 0; i3 < 4; i3++)
                for (int i4 = 0; i4 < 50; i4++) {
                    int ka = ((i0 * 3 + i1) * 4 + i3) * 50 + i4;
                    w5[ka] = I(wrapi(KILN_I32, (uint64_t)((int64_t)a5[ka]
                                                 - b5[i0 * 4 + i3])));
                }
    kiln_arg_desc in5[2] = { AD(KILN_I32, 5), AD(KILN_I32, 5) };
    kiln_arg_desc out5[1] = { AD(KILN_I32, 5) };
    kiln_kernel k5 = kernel(KILN_KERNEL_ELEMWISE, 2, in5, 1, out5);
    prog p5 = { .n = 0 };
    int32_t refs5[1] = { OP2(&p5, KILN_I_SUB, KILN_I32, LOAD(&p5, 0, KILN_I32),
                             LOAD(&p5, 1, KILN_I32)) };
    with_prog(&k5, &p5, refs5);
    kiln_view vin5[2] = { V(a5, KILN_I32, 5, s5), V(b5, KILN_I32, 5, s5b) };
    kiln_view vout5[1] = { V(o5, KILN_I32, 5, s5) };
    rc = run(&k5, vin5, vout5);
    ok(rc == 0, "rank-5 broadcast runs (%s)", errbuf);
    check_array(KILN_I32, o5, w5, 1200, 0, "rank 5: a - b[:, None, None, :, "
                "None] in i32");

    /* Rank 0: a scalar program. */
    double s0 = 3.0, s1 = 4.0, so = 0;
    kiln_arg_desc in0[2] = { AD(KILN_F64, 0), AD(KILN_F64, 0) };
    kiln_arg_desc out0[1] = { AD(KILN_F64, 0) };
    kiln_kernel k0 = kernel(KILN_KERNEL_ELEMWISE, 2, in0, 1, out0);
    prog p0 = { .n = 0 };
    int32_t sq = OP2(&p0, KILN_I_ADD, KILN_F64,
                     OP1(&p0, KILN_I_SQUARE, KILN_F64, LOAD(&p0, 0, KILN_F64)),
                     OP1(&p0, KILN_I_SQUARE, KILN_F64, LOAD(&p0, 1, KILN_F64)));
    int32_t refs0[1] = { OP1(&p0, KILN_I_SQRT, KILN_F64, sq) };
    with_prog(&k0, &p0, refs0);
    kiln_view vin0[2] = { V(&s0, KILN_F64, 0, NULL),
                          V(&s1, KILN_F64, 0, NULL) };
    kiln_view vout0[1] = { V(&so, KILN_F64, 0, NULL) };
    rc = run(&k0, vin0, vout0);
    ok(rc == 0 && so == 5.0, "rank 0: sqrt(3^2 + 4^2) = %g", so);

    /* Zero-size dims: nothing runs, nothing is touched. */
    int64_t sz[2] = { 0, 5 };
    double zo = 7.0;
    kiln_view vinz[2] = { V(&s0, KILN_F64, 2, sz), V(&s1, KILN_F64, 2, sz) };
    kiln_view voutz[1] = { V(&zo, KILN_F64, 2, sz) };
    kiln_arg_desc inz[2] = { AD(KILN_F64, 2), AD(KILN_F64, 2) };
    kiln_arg_desc outz[1] = { AD(KILN_F64, 2) };
    kiln_kernel kz = kernel(KILN_KERNEL_ELEMWISE, 2, inz, 1, outz);
    with_prog(&kz, &p0, refs0);
    rc = run(&kz, vinz, voutz);
    ok(rc == 0 && zo == 7.0, "elemwise over shape (0, 5) does nothing");
}

/* Three outputs of different dtypes from one program, one of them
 * written in place over input 0. */
static void test_multi_output(void)
{
    enum { N = 777 };
    static double x[N], y[N], o1[N];
    static uint8_t o2[N];
    tv w0[N], w1[N], w2[N];
    for (int k = 0; k < N; k++) {
        x[k] = urand(-3, 3);
        y[k] = urand(-3, 3);
        w0[k] = F(x[k] + y[k]);
        w1[k] = F(x[k] * y[k]);
        w2[k] = I(x[k] < y[k]);
    }
    kiln_arg_desc in[2] = { AD(KILN_F64, 1), AD(KILN_F64, 1) };
    kiln_arg_desc out[3] = { AD(KILN_F64, 1), AD(KILN_F64, 1),
                             AD(KILN_BOOL, 1) };
    kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, 2, in, 3, out);
    prog p = { .n = 0 };
    int32_t a = LOAD(&p, 0, KILN_F64), b = LOAD(&p, 1, KILN_F64);
    int32_t refs[3] = { OP2(&p, KILN_I_ADD, KILN_F64, a, b),
                        OP2(&p, KILN_I_MUL, KILN_F64, a, b),
                        OP2(&p, KILN_I_LT, KILN_BOOL, a, b) };
    with_prog(&k, &p, refs);
    int64_t sh[1] = { N };
    kiln_view vin[2] = { V(x, KILN_F64, 1, sh), V(y, KILN_F64, 1, sh) };
    kiln_view vout[3] = { V(x, KILN_F64, 1, sh), V(o1, KILN_F64, 1, sh),
                          V(o2, KILN_BOOL, 1, sh) };
    int rc = run(&k, vin, vout);
    ok(rc == 0, "three outputs run (%s)", errbuf);
    check_array(KILN_F64, x, w0, N, 0, "multi-output: x + y, in place on x");
    check_array(KILN_F64, o1, w1, N, 0, "multi-output: x * y (reads x "
                "before the in-place store)");
    check_array(KILN_BOOL, o2, w2, N, 0, "multi-output: x < y as bool");
}

/* Programs that need more registers than fit on the stack, many inputs,
 * and a long chain (register reuse). */
static void test_big_programs(void)
{
    enum { NIN = 40, N = 300 };
    static double data[NIN][N], o[N];
    tv w[N];
    kiln_arg_desc in[NIN], out[1] = { AD(KILN_F64, 1) };
    kiln_view vin[NIN];
    int64_t sh[1] = { N };
    prog p = { .n = 0 };
    for (int i = 0; i < NIN; i++) {
        in[i] = AD(KILN_F64, 1);
        for (int k = 0; k < N; k++)
            data[i][k] = urand(-1, 1);
        vin[i] = V(data[i], KILN_F64, 1, sh);
        LOAD(&p, i, KILN_F64); /* all 40 loads live at once */
    }
    int32_t acc = 0;
    for (int i = 1; i < NIN; i++)
        acc = OP2(&p, KILN_I_ADD, KILN_F64, acc, i);
    for (int k = 0; k < N; k++) {
        double s = data[0][k];
        for (int i = 1; i < NIN; i++)
            s += data[i][k];
        w[k] = F(s);
    }
    int32_t refs[1] = { acc };
    kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, NIN, in, 1, out);
    with_prog(&k, &p, refs);
    kiln_view vout[1] = { V(o, KILN_F64, 1, sh) };
    int rc = run(&k, vin, vout);
    ok(rc == 0, "40 live registers (heap register file) run (%s)", errbuf);
    check_array(KILN_F64, o, w, N, 0, "sum of 40 inputs");

    /* A chain of 250 instructions alternating exp/log keeps few values
     * live; also a dead instruction and a CONST reused everywhere. */
    prog q = { .n = 0 };
    int32_t v = LOAD(&q, 0, KILN_F64), c = CONST(&q, KILN_F64, 0.25);
    OP1(&q, KILN_I_SIN, KILN_F64, v); /* dead */
    for (int i = 0; i < 120; i++)
        v = OP2(&q, KILN_I_ADD, KILN_F64, OP1(&q, KILN_I_TANH, KILN_F64, v), c);
    for (int k2 = 0; k2 < N; k2++) {
        double s = data[0][k2];
        for (int i = 0; i < 120; i++)
            s = tanh(s) + 0.25;
        w[k2] = F(s);
    }
    int32_t refs2[1] = { v };
    kiln_kernel k2 = kernel(KILN_KERNEL_ELEMWISE, 1, in, 1, out);
    with_prog(&k2, &q, refs2);
    rc = run(&k2, vin, vout);
    ok(rc == 0, "a 243-instruction chain runs (%s)", errbuf);
    check_array(KILN_F64, o, w, N, 0, "chain of tanh(v) + 0.25");

    /* An instruction reading one register twice (x * x) frees it once:
     * the three later values must not share a register. */
    prog r = { .n = 0 };
    int32_t x0 = LOAD(&r, 0, KILN_F64);
    int32_t sq = OP2(&r, KILN_I_MUL, KILN_F64, x0, x0);
    int32_t y1 = LOAD(&r, 1, KILN_F64), y2 = LOAD(&r, 2, KILN_F64);
    int32_t e = OP1(&r, KILN_I_EXP, KILN_F64, y2);
    int32_t t1 = OP2(&r, KILN_I_SUB, KILN_F64, y1, e);
    int32_t refs3[1] = { OP2(&r, KILN_I_ADD, KILN_F64, sq, t1) };
    for (int k3 = 0; k3 < N; k3++)
        w[k3] = F(data[0][k3] * data[0][k3]
                  + (data[1][k3] - exp(data[2][k3])));
    kiln_kernel k3 = kernel(KILN_KERNEL_ELEMWISE, 3, in, 1, out);
    with_prog(&k3, &r, refs3);
    use_counting_runtime(1);
    rc = run(&k3, vin, vout);
    int exps = n_exp;
    use_counting_runtime(0);
    ok(rc == 0, "x*x then three live values runs (%s)", errbuf);
    check_array(KILN_F64, o, w, N, 0, "x*x + (y - exp(z)): registers freed "
                "once");
    ok(exps == N, "exp went through the runtime table once per element (%d)",
       exps);
}

/* ------------------------------------------------------------------ */
/* REDUCE                                                               */
/* ------------------------------------------------------------------ */

static const char *RED[] = { "sum", "prod", "max", "min", "mean" };

/* Reduce x (shape (D0, D1, D2)) over the axes in `mask` with `op`. */
static void check_reduce(int op, int dt, unsigned mask, int with_nan)
{
    enum { D0 = 4, D1 = 5, D2 = 300, N = D0 * D1 * D2 };
    int64_t sh[3] = { D0, D1, D2 };
    static tv x[N];
    void *bx = xcalloc(N, 8), *bo = xcalloc(N, 8);
    for (int k = 0; k < N; k++) {
        switch (dt) {
        case KILN_F64:
        case KILN_F32:
            x[k] = F(op == KILN_REDUCE_PROD ? urand(0.99, 1.01)
                                            : urand(0.5, 1.5));
            if (with_nan && k % 997 == 5)
                x[k] = F(NAN);
            break;
        case KILN_BOOL:
            x[k] = I(rng() % 7 != 0);
            break;
        default: {
            static const int64_t pm[6] = { -3, -2, -1, 1, 2, 3 };
            x[k] = op == KILN_REDUCE_PROD ? I(pm[rng() % 6])
                 : I((int64_t)(rng() % 2000001) - 1000000);
            if (dt == KILN_I64 && op == KILN_REDUCE_SUM && k % 3 == 0)
                x[k] = I((int64_t)rng()); /* the sum wraps */
            break;
        }
        }
        put(bx, dt, k, x[k]);
        x[k] = get(bx, dt, k);
    }
    /* Output: C-contiguous over the kept axes; the view steps 0 on the
     * reduced ones. */
    int64_t ostr[3], s = 1, nout = 1;
    for (int d = 2; d >= 0; d--) {
        if (mask & (1u << d)) {
            ostr[d] = 0;
        } else {
            ostr[d] = s;
            s *= sh[d];
            nout *= sh[d];
        }
    }
    long double acc[N];
    int seen_nan[N];
    int64_t iacc[N];
    for (int64_t k = 0; k < nout; k++) {
        acc[k] = op == KILN_REDUCE_PROD ? 1.0L
               : op == KILN_REDUCE_MAX ? -INFINITY
               : op == KILN_REDUCE_MIN ? INFINITY : 0.0L;
        iacc[k] = op == KILN_REDUCE_PROD ? 1
                : op == KILN_REDUCE_MAX ? (dt == KILN_BOOL ? 0 : INT64_MIN)
                : op == KILN_REDUCE_MIN ? (dt == KILN_BOOL ? 1 : INT64_MAX) : 0;
        seen_nan[k] = 0;
    }
    for (int i0 = 0; i0 < D0; i0++)
        for (int i1 = 0; i1 < D1; i1++)
            for (int i2 = 0; i2 < D2; i2++) {
                int64_t ki = ((int64_t)i0 * D1 + i1) * D2 + i2;
                int64_t ko = i0 * ostr[0] + i1 * ostr[1] + i2 * ostr[2];
                tv v = x[ki];
                if (isf(dt)) {
                    if (isnan(v.f))
                        seen_nan[ko] = 1;
                    if (op == KILN_REDUCE_PROD)
                        acc[ko] *= v.f;
                    else if (op == KILN_REDUCE_MAX)
                        acc[ko] = v.f > acc[ko] ? v.f : acc[ko];
                    else if (op == KILN_REDUCE_MIN)
                        acc[ko] = v.f < acc[ko] ? v.f : acc[ko];
                    else
                        acc[ko] += v.f;
                } else {
                    if (op == KILN_REDUCE_PROD)
                        iacc[ko] = wrapi(dt, (uint64_t)iacc[ko]
                                             * (uint64_t)v.i);
                    else if (op == KILN_REDUCE_MAX)
                        iacc[ko] = v.i > iacc[ko] ? v.i : iacc[ko];
                    else if (op == KILN_REDUCE_MIN)
                        iacc[ko] = v.i < iacc[ko] ? v.i : iacc[ko];
                    else
                        iacc[ko] = wrapi(dt, (uint64_t)iacc[ko]
                                             + (uint64_t)v.i);
                }
            }
    static tv want[N];
    for (int64_t k = 0; k < nout; k++) {
        if (isf(dt)) {
            long double r = acc[k];
            if (op == KILN_REDUCE_MEAN)
                r /= (long double)(N / nout);
            if (seen_nan[k])
                r = NAN;
            want[k] = F(dt == KILN_F32 ? (double)(float)r : (double)r);
        } else {
            want[k] = I(iacc[k]); /* wrapped at every step above */
        }
    }
    kiln_arg_desc in[1] = { AD(dt, 3) }, out[1] = { AD(dt, 3) };
    kiln_kernel k = kernel(KILN_KERNEL_REDUCE, 1, in, 1, out);
    prog p = { .n = 0 };
    int32_t refs[1] = { LOAD(&p, 0, dt) };
    with_prog(&k, &p, refs);
    k.reduce_op = (uint32_t)op;
    kiln_view vin[1] = { V(bx, dt, 3, sh) };
    kiln_view vout[1] = { VS(bo, dt, 3, sh, ostr) };
    for (int64_t k2 = 0; k2 < nout; k2++)
        put(bo, dt, k2, isf(dt) ? F(-77.0) : I(1)); /* must be reset */
    int rc = run(&k, vin, vout);
    char axes[8];
    int na = 0;
    for (int d = 0; d < 3; d++)
        if (mask & (1u << d))
            axes[na++] = (char)('0' + d);
    axes[na] = 0;
    if (rc)
        ok(0, "reduce %s %s axes %s runs: %s", RED[op], DT[dt], axes, errbuf);
    else
        check_array(dt, bo, want, nout, dt == KILN_F32 ? 2e-6 : 1e-13,
                    "reduce %s %s over axes {%s} of (4, 5, 300)%s", RED[op],
                    DT[dt], axes, with_nan ? " with NaNs" : "");
    free(bx);
    free(bo);
}

static void test_reduce(void)
{
    static const unsigned masks[] = { 4u, 1u, 2u, 7u, 5u };
    for (int op = 0; op <= KILN_REDUCE_MEAN; op++)
        for (int dt = 0; dt < KILN_NDTYPES; dt++) {
            int valid = dt == KILN_BOOL ? op == KILN_REDUCE_MAX
                                           || op == KILN_REDUCE_MIN
                      : op == KILN_REDUCE_MEAN ? isf(dt) : 1;
            if (!valid)
                continue;
            for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
                check_reduce(op, dt, masks[m], 0);
        }
    check_reduce(KILN_REDUCE_MAX, KILN_F64, 4u, 1);
    check_reduce(KILN_REDUCE_MIN, KILN_F64, 1u, 1);
    check_reduce(KILN_REDUCE_MAX, KILN_F32, 7u, 1);
    check_reduce(KILN_REDUCE_SUM, KILN_F64, 2u, 1);

    /* refused: sum of bool, mean of ints */
    kiln_arg_desc ib[1] = { AD(KILN_BOOL, 1) }, ii[1] = { AD(KILN_I64, 1) };
    kiln_kernel kb = kernel(KILN_KERNEL_REDUCE, 1, ib, 1, ib);
    prog pb = { .n = 0 };
    int32_t rb[1] = { LOAD(&pb, 0, KILN_BOOL) };
    with_prog(&kb, &pb, rb);
    kiln_plugin_error *err = NULL;
    ok(!B->supports(&kb, &err) && err, "sum of bool is refused (%s)",
       err ? err->message : "");
    B->error_free(err);
    err = NULL;
    kiln_kernel ki = kernel(KILN_KERNEL_REDUCE, 1, ii, 1, ii);
    prog pi = { .n = 0 };
    int32_t ri[1] = { LOAD(&pi, 0, KILN_I64) };
    with_prog(&ki, &pi, ri);
    ki.reduce_op = KILN_REDUCE_MEAN;
    ok(!B->supports(&ki, &err) && err, "mean of i64 is refused (%s)",
       err ? err->message : "");
    B->error_free(err);

    /* sum(x * w) with w broadcast along the middle axis (two inputs). */
    enum { A = 6, Bm = 7, C = 40 };
    static double x[A * Bm * C], wv[Bm], o[A * C];
    tv want[A * C];
    for (int k = 0; k < A * Bm * C; k++)
        x[k] = urand(-1, 1);
    for (int k = 0; k < Bm; k++)
        wv[k] = urand(-1, 1);
    for (int i = 0; i < A; i++)
        for (int j = 0; j < C; j++) {
            long double s = 0;
            for (int m = 0; m < Bm; m++)
                s += (long double)x[(i * Bm + m) * C + j] * wv[m];
            want[i * C + j] = F((double)s);
        }
    int64_t sh[3] = { A, Bm, C }, shw[3] = { 1, Bm, 1 };
    int64_t ostr[3] = { C, 0, 1 };
    kiln_arg_desc in2[2] = { AD(KILN_F64, 3), AD(KILN_F64, 3) };
    kiln_arg_desc out2[1] = { AD(KILN_F64, 3) };
    kiln_kernel k2 = kernel(KILN_KERNEL_REDUCE, 2, in2, 1, out2);
    prog p2 = { .n = 0 };
    int32_t r2[1] = { OP2(&p2, KILN_I_MUL, KILN_F64, LOAD(&p2, 0, KILN_F64),
                          LOAD(&p2, 1, KILN_F64)) };
    with_prog(&k2, &p2, r2);
    k2.reduce_op = KILN_REDUCE_SUM;
    kiln_view vin2[2] = { V(x, KILN_F64, 3, sh), V(wv, KILN_F64, 3, shw) };
    kiln_view vout2[1] = { VS(o, KILN_F64, 3, sh, ostr) };
    int rc = run(&k2, vin2, vout2);
    ok(rc == 0, "reduce with a program of two inputs runs (%s)", errbuf);
    check_array(KILN_F64, o, want, A * C, 1e-13, "sum over axis 1 of x * "
                "w[None, :, None]");

    /* The keepdims form: the output view has extent 1 on reduced axes. */
    int64_t shk[3] = { A, 1, C };
    vout2[0] = V(o, KILN_F64, 3, shk);
    rc = run(&k2, vin2, vout2);
    check_array(KILN_F64, o, want, A * C, 1e-13, "same with a keepdims "
                "output view (extent 1)");

    /* Empty reductions give the identity; mean gives NaN. */
    static const double ident[5] = { 0.0, 1.0, -INFINITY, INFINITY, NAN };
    for (int op = 0; op <= KILN_REDUCE_MEAN; op++) {
        double e[3] = { 5, 5, 5 }, dummy = 0;
        int64_t she[2] = { 3, 0 }, se[2] = { 1, 0 };
        kiln_arg_desc i1[1] = { AD(KILN_F64, 2) };
        kiln_kernel ke = kernel(KILN_KERNEL_REDUCE, 1, i1, 1, i1);
        prog pe = { .n = 0 };
        int32_t re[1] = { LOAD(&pe, 0, KILN_F64) };
        with_prog(&ke, &pe, re);
        ke.reduce_op = (uint32_t)op;
        kiln_view vi[1] = { V(&dummy, KILN_F64, 2, she) };
        kiln_view vo[1] = { VS(e, KILN_F64, 2, she, se) };
        rc = run(&ke, vi, vo);
        ok(rc == 0 && tap_close(e[0], ident[op], 0)
           && tap_close(e[2], ident[op], 0),
           "empty %s over axis 1 of (3, 0) gives %g", RED[op], e[0]);
    }
    /* Nothing to write: reduce (0, 3) over axis 1. */
    {
        double dummy = 0, e = 9;
        int64_t she[2] = { 0, 3 }, se[2] = { 1, 0 };
        kiln_arg_desc i1[1] = { AD(KILN_F64, 2) };
        kiln_kernel ke = kernel(KILN_KERNEL_REDUCE, 1, i1, 1, i1);
        prog pe = { .n = 0 };
        int32_t re[1] = { LOAD(&pe, 0, KILN_F64) };
        with_prog(&ke, &pe, re);
        kiln_view vi[1] = { V(&dummy, KILN_F64, 2, she) };
        kiln_view vo[1] = { VS(&e, KILN_F64, 2, she, se) };
        rc = run(&ke, vi, vo);
        ok(rc == 0 && e == 9, "reduce of (0, 3) over axis 1 writes nothing");
    }
    /* Rank 0: nothing is reduced. */
    {
        double s = 2.5, o0 = 0;
        kiln_arg_desc i0[1] = { AD(KILN_F64, 0) };
        kiln_kernel ke = kernel(KILN_KERNEL_REDUCE, 1, i0, 1, i0);
        prog pe = { .n = 0 };
        int32_t re[1] = { OP1(&pe, KILN_I_NEG, KILN_F64,
                              LOAD(&pe, 0, KILN_F64)) };
        with_prog(&ke, &pe, re);
        ke.reduce_op = KILN_REDUCE_MEAN;
        kiln_view vi[1] = { V(&s, KILN_F64, 0, NULL) };
        kiln_view vo[1] = { V(&o0, KILN_F64, 0, NULL) };
        rc = run(&ke, vi, vo);
        ok(rc == 0 && o0 == -2.5, "rank-0 mean of -x is -2.5 (%g)", o0);
    }
}

/* ------------------------------------------------------------------ */
/* JOIN                                                                 */
/* ------------------------------------------------------------------ */

static void test_join(void)
{
    /* Three i32 inputs along axis 1: (2,3) (2,0) (2,4) -> (2,7), the
     * first read transposed. */
    int32_t a[6] = { 1, 4, 2, 5, 3, 6 }; /* a.T is [[1,2,3],[4,5,6]] */
    int32_t c[8] = { 7, 8, 9, 10, 11, 12, 13, 14 }, dummy = 0, o[14];
    int32_t wanti[14] = { 1, 2, 3, 7, 8, 9, 10, 4, 5, 6, 11, 12, 13, 14 };
    tv want[14];
    for (int k = 0; k < 14; k++)
        want[k] = I(wanti[k]);
    int64_t sa[2] = { 2, 3 }, sta[2] = { 1, 2 }, sb[2] = { 2, 0 };
    int64_t sc[2] = { 2, 4 }, so[2] = { 2, 7 };
    kiln_arg_desc in[3] = { AD(KILN_I32, 2), AD(KILN_I32, 2), AD(KILN_I32, 2) };
    kiln_arg_desc out[1] = { AD(KILN_I32, 2) };
    kiln_kernel k = kernel(KILN_KERNEL_JOIN, 3, in, 1, out);
    k.axis = 1;
    kiln_view vin[3] = { VS(a, KILN_I32, 2, sa, sta),
                         V(&dummy, KILN_I32, 2, sb),
                         V(c, KILN_I32, 2, sc) };
    kiln_view vout[1] = { V(o, KILN_I32, 2, so) };
    int rc = run(&k, vin, vout);
    ok(rc == 0, "join of 3 runs (%s)", errbuf);
    check_array(KILN_I32, o, want, 14, 0, "join of 3 i32 along axis 1 (one "
                "transposed, one empty)");

    /* 2000 f32 inputs of 0, 1 or 2 rows each along axis 0. */
    enum { NI = 2000 };
    kiln_arg_desc *ins = xcalloc(NI, sizeof *ins);
    kiln_view *vins = xcalloc(NI, sizeof *vins);
    float *data = xcalloc(NI * 2 * 3, sizeof *data);
    int64_t rows = 0;
    for (int i = 0; i < NI; i++)
        rows += i % 3;
    float *ob = xcalloc((size_t)rows * 3, sizeof *ob);
    tv *w = xcalloc((size_t)rows * 3, sizeof *w);
    int64_t at = 0;
    for (int i = 0; i < NI; i++) {
        int64_t shi[2] = { i % 3, 3 };
        ins[i] = AD(KILN_F32, 2);
        for (int k2 = 0; k2 < (i % 3) * 3; k2++) {
            data[i * 6 + k2] = (float)(i * 10 + k2);
            w[at++] = F((double)(float)(i * 10 + k2));
        }
        vins[i] = V(&data[i * 6], KILN_F32, 2, shi);
    }
    kiln_arg_desc out2[1] = { AD(KILN_F32, 2) };
    kiln_kernel k2 = kernel(KILN_KERNEL_JOIN, NI, ins, 1, out2);
    int64_t so2[2] = { rows, 3 };
    kiln_view vout2[1] = { V(ob, KILN_F32, 2, so2) };
    rc = run(&k2, vins, vout2);
    ok(rc == 0, "join of 2000 inputs runs (%s)", errbuf);
    check_array(KILN_F32, ob, w, rows * 3, 0, "join of 2000 f32 inputs along "
                "axis 0 (%lld rows)", (long long)rows);

    /* A shape mismatch is an error, not a crash. */
    so2[1] = 4;
    vout2[0] = V(ob, KILN_F32, 2, so2);
    rc = run(&k2, vins, vout2);
    ok(rc != 0 && strstr(errbuf, "join"), "join shape mismatch: %s", errbuf);
    free(ins); free(vins); free(data); free(ob); free(w);
}

/* ------------------------------------------------------------------ */
/* GATHER and SCATTER                                                   */
/* ------------------------------------------------------------------ */

static void test_gather(void)
{
    enum { R = 5, C = 85 };
    static double x[R * C];
    for (int k = 0; k < R * C; k++)
        x[k] = k + 0.5;
    int64_t sx[2] = { R, C };
    kiln_arg_desc in64[2] = { AD(KILN_F64, 2), AD(KILN_I64, 1) };
    kiln_arg_desc out2[1] = { AD(KILN_F64, 2) };

    /* along axis 1 with negative and repeated indices */
    int64_t idx[6] = { 0, -1, 84, 3, 3, -85 };
    double o[R * 6];
    tv w[R * 6];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < 6; j++) {
            int64_t c = idx[j] < 0 ? idx[j] + C : idx[j];
            w[i * 6 + j] = F(x[i * C + c]);
        }
    kiln_kernel k = kernel(KILN_KERNEL_GATHER, 2, in64, 1, out2);
    k.axis = 1;
    int64_t si[1] = { 6 }, so[2] = { R, 6 };
    kiln_view vin[2] = { V(x, KILN_F64, 2, sx), V(idx, KILN_I64, 1, si) };
    kiln_view vout[1] = { V(o, KILN_F64, 2, so) };
    int rc = run(&k, vin, vout);
    ok(rc == 0, "gather axis 1 runs (%s)", errbuf);
    check_array(KILN_F64, o, w, R * 6, 0, "gather along axis 1, negative and "
                "repeated indices");

    /* along axis 0 with a 2-D i32 index of a transposed x */
    int32_t idx2[6] = { 84, -85, 0, 2, 2, -1 };
    static double o2[2 * 3 * R];
    tv w2[2 * 3 * R];
    /* xt = x.T has shape (85, 5): xt[i, j] = x[j * 85 + i] */
    for (int t = 0; t < 6; t++) {
        int64_t r = idx2[t] < 0 ? idx2[t] + C : idx2[t];
        for (int j = 0; j < R; j++)
            w2[t * R + j] = F(x[j * C + r]);
    }
    kiln_arg_desc in32[2] = { AD(KILN_F64, 2), AD(KILN_I32, 2) };
    kiln_arg_desc out3[1] = { AD(KILN_F64, 3) };
    kiln_kernel k2 = kernel(KILN_KERNEL_GATHER, 2, in32, 1, out3);
    k2.axis = 0;
    int64_t sxt[2] = { C, R }, stt[2] = { 1, C }, si2[2] = { 2, 3 };
    int64_t so2[3] = { 2, 3, R };
    kiln_view vin2[2] = { VS(x, KILN_F64, 2, sxt, stt),
                          V(idx2, KILN_I32, 2, si2) };
    kiln_view vout2[1] = { V(o2, KILN_F64, 3, so2) };
    rc = run(&k2, vin2, vout2);
    ok(rc == 0, "gather axis 0, 2-D i32 index runs (%s)", errbuf);
    check_array(KILN_F64, o2, w2, 6 * R, 0, "gather rows of x.T with a (2, 3) "
                "i32 index");

    /* a rank-0 index selects one column */
    int64_t one = -2;
    double o3[R];
    tv w3[R];
    for (int i = 0; i < R; i++)
        w3[i] = F(x[i * C + C - 2]);
    kiln_arg_desc in0[2] = { AD(KILN_F64, 2), AD(KILN_I64, 0) };
    kiln_arg_desc out1[1] = { AD(KILN_F64, 1) };
    kiln_kernel k3 = kernel(KILN_KERNEL_GATHER, 2, in0, 1, out1);
    k3.axis = 1;
    int64_t so3[1] = { R };
    kiln_view vin3[2] = { V(x, KILN_F64, 2, sx), V(&one, KILN_I64, 0, NULL) };
    kiln_view vout3[1] = { V(o3, KILN_F64, 1, so3) };
    rc = run(&k3, vin3, vout3);
    check_array(KILN_F64, o3, w3, R, 0, "gather with a rank-0 index (-2) "
                "(rc %d)", rc);

    /* out of range */
    static double x1[85], o4[2];
    int64_t bad[2] = { 3, 90 }, sx1[1] = { 85 }, sb[1] = { 2 };
    kiln_arg_desc in1[2] = { AD(KILN_F64, 1), AD(KILN_I64, 1) };
    kiln_kernel k4 = kernel(KILN_KERNEL_GATHER, 2, in1, 1, out1);
    kiln_view vin4[2] = { V(x1, KILN_F64, 1, sx1), V(bad, KILN_I64, 1, sb) };
    kiln_view vout4[1] = { V(o4, KILN_F64, 1, sb) };
    rc = run(&k4, vin4, vout4);
    ok(rc != 0 && strcmp(errbuf, "index 90 is out of bounds for axis 0 "
                                 "with size 85") == 0,
       "gather out of range: \"%s\"", errbuf);
    bad[1] = -86;
    rc = run(&k4, vin4, vout4);
    ok(rc != 0 && strstr(errbuf, "index -86 is out of bounds"),
       "gather negative out of range: \"%s\"", errbuf);
}

static void test_scatter(void)
{
    enum { R = 4, C = 10 };
    double x[R * C], base[R * C], v[R * 4];
    int64_t idx[4] = { 1, -1, 1, 3 };
    for (int k = 0; k < R * C; k++)
        base[k] = k * 1.0;
    for (int k = 0; k < R * 4; k++)
        v[k] = 100.0 + k;
    kiln_arg_desc in[2] = { AD(KILN_I64, 1), AD(KILN_F64, 2) };
    kiln_arg_desc out[1] = { AD(KILN_F64, 2) };
    int64_t sx[2] = { R, C }, si[1] = { 4 }, sv[2] = { R, 4 };
    for (int mode = 0; mode < 2; mode++) {
        tv w[R * C];
        memcpy(x, base, sizeof x);
        for (int k = 0; k < R * C; k++)
            w[k] = F(base[k]);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < 4; j++) {
                int64_t c = idx[j] < 0 ? idx[j] + C : idx[j];
                double *t = &w[i * C + c].f;
                *t = mode ? *t + v[i * 4 + j] : v[i * 4 + j];
            }
        kiln_kernel k = kernel(KILN_KERNEL_SCATTER, 2, in, 1, out);
        k.axis = 1;
        k.scatter_mode = (uint32_t)mode;
        kiln_view vin[2] = { V(idx, KILN_I64, 1, si), V(v, KILN_F64, 2, sv) };
        kiln_view vout[1] = { V(x, KILN_F64, 2, sx) };
        int rc = run(&k, vin, vout);
        ok(rc == 0, "scatter runs (%s)", errbuf);
        check_array(KILN_F64, x, w, R * C, 0, "scatter %s along axis 1 with "
                    "repeated and negative indices", mode ? "INC" : "SET");
    }

    /* INC in i32 along axis 0 with values broadcast along both axes:
     * values view (5, 3) over a (3,) buffer, and 3 of the 5 indices
     * equal. */
    int32_t xi[4 * 3] = { 0 }, vi[3] = { 1, -2, 3 };
    int32_t ii[5] = { 2, 2, -2, 0, 2 };
    tv wi[12];
    for (int k = 0; k < 12; k++)
        wi[k] = I(0);
    for (int t = 0; t < 5; t++) {
        int r = ii[t] < 0 ? ii[t] + 4 : ii[t];
        for (int j = 0; j < 3; j++)
            wi[r * 3 + j].i += vi[j];
    }
    kiln_arg_desc in2[2] = { AD(KILN_I32, 1), AD(KILN_I32, 2) };
    kiln_arg_desc out2[1] = { AD(KILN_I32, 2) };
    kiln_kernel k2 = kernel(KILN_KERNEL_SCATTER, 2, in2, 1, out2);
    k2.scatter_mode = KILN_SCATTER_INC;
    int64_t sxi[2] = { 4, 3 }, sii[1] = { 5 }, svi[2] = { 5, 3 };
    int64_t stvi[2] = { 0, 1 };
    kiln_view vin2[2] = { V(ii, KILN_I32, 1, sii),
                          VS(vi, KILN_I32, 2, svi, stvi) };
    kiln_view vout2[1] = { V(xi, KILN_I32, 2, sxi) };
    int rc = run(&k2, vin2, vout2);
    ok(rc == 0, "scatter INC i32 runs (%s)", errbuf);
    check_array(KILN_I32, xi, wi, 12, 0, "scatter INC i32 along axis 0, "
                "broadcast values, index 2 three times");

    /* An out-of-range index fails before anything is written. */
    int64_t bad[4] = { 1, 2, 10, 0 };
    memcpy(x, base, sizeof x);
    kiln_kernel k3 = kernel(KILN_KERNEL_SCATTER, 2, in, 1, out);
    k3.axis = 1;
    k3.scatter_mode = KILN_SCATTER_SET;
    kiln_view vin3[2] = { V(bad, KILN_I64, 1, si), V(v, KILN_F64, 2, sv) };
    kiln_view vout3[1] = { V(x, KILN_F64, 2, sx) };
    rc = run(&k3, vin3, vout3);
    ok(rc != 0 && strcmp(errbuf, "index 10 is out of bounds for axis 1 "
                                 "with size 10") == 0
       && memcmp(x, base, sizeof x) == 0,
       "scatter out of range fails and leaves x untouched: \"%s\"", errbuf);
}

/* ------------------------------------------------------------------ */
/* DOT                                                                  */
/* ------------------------------------------------------------------ */

static void check_dot(int dt, int ra, int rb, int transposed_a)
{
    enum { M = 7, K = 300, N = 5 };
    static double a[M * K], b[K * N];
    static unsigned char ba[M * K * 8], bb[K * N * 8], bo[M * N * 8];
    for (int k = 0; k < M * K; k++) {
        a[k] = urand(-1, 1);
        if (dt == KILN_F32)
            a[k] = (float)a[k];
        put(ba, dt, k, F(a[k]));
    }
    for (int k = 0; k < K * N; k++) {
        b[k] = urand(-1, 1);
        if (dt == KILN_F32)
            b[k] = (float)b[k];
        put(bb, dt, k, F(b[k]));
    }
    int64_t m = ra == 2 ? M : 1, n = rb == 2 ? N : 1;
    tv want[M * N];
    double mag[M * N];
    /* a is read as (m, K) C-ordered, or as the transpose of a (K, m)
     * C array; b as (K, n).  mag = sum |a||b| bounds the rounding error
     * of any summation order (sgemm sums in float). */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            long double s = 0, sa = 0;
            for (int p = 0; p < K; p++) {
                double av = transposed_a ? a[p * m + i] : a[i * K + p];
                s += (long double)av * b[p * n + j];
                sa += fabsl((long double)av * b[p * n + j]);
            }
            want[i * n + j] = F((double)s);
            mag[i * n + j] = (double)sa;
        }
    int rc_ = ra + rb - 2;
    kiln_arg_desc in[2] = { AD(dt, ra), AD(dt, rb) }, out[1] = { AD(dt, rc_) };
    kiln_kernel k = kernel(KILN_KERNEL_DOT, 2, in, 1, out);
    int64_t sa[2] = { m, K }, sb[2] = { K, n }, so[2];
    if (ra == 1)
        sa[0] = K;
    int nso = 0;
    if (ra == 2)
        so[nso++] = m;
    if (rb == 2)
        so[nso++] = n;
    kiln_view va = V(ba, dt, ra, sa);
    if (transposed_a) {
        int64_t st[2] = { 1, m };
        va = VS(ba, dt, 2, sa, st);
    }
    kiln_view vin[2] = { va, V(bb, dt, rb, sb) };
    kiln_view vout[1] = { V(bo, dt, rc_, so) };
    memset(bo, 0xff, sizeof bo); /* NaN garbage: must be overwritten */
    use_counting_runtime(1);
    int rc = run(&k, vin, vout);
    int gemms = n_gemm;
    use_counting_runtime(0);
    double eps = dt == KILN_F32 ? FLT_EPSILON : DBL_EPSILON, worst = 0;
    for (int64_t t = 0; t < m * n; t++) {
        double err = fabs(get(bo, dt, t).f - want[t].f) / (mag[t] * eps);
        worst = isnan(err) || err > worst ? (isnan(err) ? INFINITY : err)
                                          : worst;
    }
    ok(rc == 0 && worst <= 2.0 * K, "dot %s rank %d @ rank %d%s (error %.3g "
       "eps * sum|ab|)", DT[dt], ra, rb,
       transposed_a ? " (a transposed)" : "", worst);
    ok(gemms == 1, "... computed by one runtime %cgemm call (%d)",
       dt == KILN_F64 ? 'd' : 's', gemms);
}

static void test_dot(void)
{
    for (int dt = 0; dt < 2; dt++)
        for (int ra = 1; ra <= 2; ra++)
            for (int rb = 1; rb <= 2; rb++)
                check_dot(dt, ra, rb, 0);
    check_dot(KILN_F64, 2, 2, 1);
    check_dot(KILN_F32, 2, 1, 1);

    /* A reversed vector (negative stride) takes the loop path. */
    double a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 }, o = 0;
    int64_t s4[1] = { 4 }, neg[1] = { -1 };
    kiln_arg_desc in[2] = { AD(KILN_F64, 1), AD(KILN_F64, 1) };
    kiln_arg_desc out[1] = { AD(KILN_F64, 0) };
    kiln_kernel k = kernel(KILN_KERNEL_DOT, 2, in, 1, out);
    kiln_view vin[2] = { VS(&a[3], KILN_F64, 1, s4, neg),
                         V(b, KILN_F64, 1, s4) };
    kiln_view vout[1] = { V(&o, KILN_F64, 0, NULL) };
    int rc = run(&k, vin, vout);
    ok(rc == 0 && o == 200.0, "dot of a reversed vector: %g (want 200)", o);

    /* k = 0: the product of (2, 0) and (0, 3) is zeros. */
    double z[6] = { 9, 9, 9, 9, 9, 9 }, dummy = 0;
    int64_t sa[2] = { 2, 0 }, sb[2] = { 0, 3 }, so[2] = { 2, 3 };
    kiln_arg_desc in2[2] = { AD(KILN_F64, 2), AD(KILN_F64, 2) };
    kiln_arg_desc out2[1] = { AD(KILN_F64, 2) };
    kiln_kernel k2 = kernel(KILN_KERNEL_DOT, 2, in2, 1, out2);
    kiln_view vin2[2] = { V(&dummy, KILN_F64, 2, sa),
                          V(&dummy, KILN_F64, 2, sb) };
    kiln_view vout2[1] = { V(z, KILN_F64, 2, so) };
    rc = run(&k2, vin2, vout2);
    int zeros = 1;
    for (int i = 0; i < 6; i++)
        zeros &= z[i] == 0.0;
    ok(rc == 0 && zeros, "dot with k = 0 gives zeros");

    /* shape mismatch */
    int64_t s3[1] = { 3 };
    vin[1] = V(b, KILN_F64, 1, s3);
    rc = run(&k, vin, vout);
    ok(rc != 0 && strstr(errbuf, "(4)") && strstr(errbuf, "(3)"),
       "dot shape mismatch names both shapes: %s", errbuf);
}

/* ------------------------------------------------------------------ */
/* Special functions                                                    */
/* ------------------------------------------------------------------ */

static void test_special(void)
{
    const double euler = 0.57721566490153286061;
    is_close(kiln_digamma(1.0), -0.5772156649015329, 2e-15, "psi(1) = -gamma");
    is_close(kiln_digamma(0.5), -1.9635100260214235, 2e-15,
             "psi(0.5) = -gamma - 2 ln 2");
    is_close(kiln_digamma(2.0), 1.0 - euler, 2e-15, "psi(2) = 1 - gamma");
    is_close(kiln_digamma(10.0), 2.251752589066721, 2e-15, "psi(10)");
    is_close(kiln_digamma(100.0), 4.600161852738087, 2e-15, "psi(100)");
    is_close(kiln_digamma(1e-8), -100000000.57721566, 2e-15, "psi(1e-8)");
    is_close(kiln_digamma(1e15), log(1e15) - 0.5e-15, 2e-15, "psi(1e15)");
    static const double xs[] = { 0.1, 0.75, 1.3, 2.5, 5.9, 9.99, 12.5, 77.0 };
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        is_close(kiln_digamma(x + 1), kiln_digamma(x) + 1 / x, 4e-15,
                 "recurrence psi(%g + 1) = psi(%g) + 1/%g", x, x, x);
    }
    static const double ns[] = { -0.5, -1.25, -2.75, -10.1, -100.3,
                                 -1e6 + 0.5 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        double x = ns[i];
        double pi = 3.14159265358979323846;
        /* fmod is exact: tan(pi x) without pi*x's rounding at large x */
        is_close(kiln_digamma(x),
                 kiln_digamma(1 - x) - pi / tan(pi * fmod(x, 1.0)), 1e-14,
                 "reflection at %g", x);
    }
    is_close(kiln_digamma(-0.5), 0.03648997397857652, 1e-14,
             "psi(-0.5) = psi(0.5) + 2");
    ok(isinf(kiln_digamma(0.0)) && kiln_digamma(0.0) < 0, "psi(+0) = -inf");
    ok(isinf(kiln_digamma(-0.0)) && kiln_digamma(-0.0) > 0, "psi(-0) = +inf");
    ok(isnan(kiln_digamma(-1.0)) && isnan(kiln_digamma(-7.0)),
       "psi(negative integer) = NaN");
    ok(isnan(kiln_digamma(NAN)) && isnan(kiln_digamma(-INFINITY))
       && kiln_digamma(INFINITY) == INFINITY, "psi(NaN, -inf, inf)");

    is_close(kiln_gammaln(0.5), 0.5723649429247001, 1e-15, "gammaln(0.5)");
    is_close(kiln_gammaln(100.0), 359.1342053695754, 1e-15, "gammaln(100)");
    is_close(kiln_gammaln(-2.5), -0.05624371649767405, 1e-14,
             "gammaln(-2.5) = log|Gamma(-2.5)|");
    ok(kiln_gammaln(0.0) == INFINITY && kiln_gammaln(-3.0) == INFINITY,
       "gammaln at the poles is +inf");

    ok(kiln_sigmoid(-800.0) == 0.0 && kiln_sigmoid(800.0) == 1.0,
       "sigmoid(+-800) is 0 and 1 without overflow");
    is_close(kiln_sigmoid(-40.0), 4.248354255291589e-18, 1e-15,
             "sigmoid(-40) keeps its tail");
    is_close(kiln_sigmoid(0.0), 0.5, 0, "sigmoid(0)");
    ok(isnan(kiln_sigmoid(NAN)), "sigmoid(NaN) is NaN");
    ok(kiln_softplus(800.0) == 800.0 && kiln_softplus(1e300) == 1e300,
       "softplus of large x is x");
    is_close(kiln_softplus(-800.0), 0.0, 0, "softplus(-800) = 0");
    is_close(kiln_softplus(-40.0), 4.248354255291589e-18, 1e-15,
             "softplus(-40) = exp(-40)");
    is_close(kiln_softplus(0.0), log(2.0), 1e-16, "softplus(0) = ln 2");
    for (double x = 30.0; x < 38.0; x += 0.5) {
        is_close(kiln_softplus(x), ref_softplus(x), 2.3e-16,
                 "softplus(%g) near the upper threshold", x);
        is_close(kiln_softplus(-x), ref_softplus(-x), 2.3e-16,
                 "softplus(%g) near the lower threshold", -x);
    }
    ok(kiln_softplus(INFINITY) == INFINITY && kiln_softplus(-INFINITY) == 0,
       "softplus(+-inf)");
}

/* trigamma: reference values (mpmath.polygamma(1, x) to 20 digits),
 * recurrence, reflection, poles as in SciPy's polygamma(1, x); then the
 * interpreter with a runtime table from before trigamma (version 1). */
static void test_trigamma(void)
{
    const double pi = 3.14159265358979323846;
    is_close(kiln_trigamma(1.0), pi * pi / 6, 2e-16, "psi1(1) = pi^2/6");
    is_close(kiln_trigamma(0.5), pi * pi / 2, 2e-16, "psi1(0.5) = pi^2/2");
    is_close(kiln_trigamma(2.0), pi * pi / 6 - 1, 4e-16,
             "psi1(2) = pi^2/6 - 1");
    is_close(kiln_trigamma(3.7), 0.31003785767003830216, 4e-16, "psi1(3.7)");
    is_close(kiln_trigamma(10.0), 0.10516633568168574612, 4e-16,
             "psi1(10), where the series starts");
    /* the double nearest 1e-8 is 1e-8 (1 - 6.1e-17): mpmath's value */
    is_close(kiln_trigamma(1e-8), 10000000000000001.22648283, 4e-16,
             "psi1(1e-8) ~ 1/x^2 + pi^2/6");
    is_close(kiln_trigamma(1e15), 1.0000000000000005e-15, 2e-16,
             "psi1(1e15) ~ 1/x + 1/(2x^2)");
    static const double xs[] = { 0.1, 0.75, 1.3, 2.5, 5.9, 9.5, 9.99, 12.5,
                                 77.0 };
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        is_close(kiln_trigamma(x + 1), kiln_trigamma(x) - 1 / (x * x), 4e-15,
                 "recurrence psi1(%g + 1) = psi1(%g) - 1/%g^2", x, x, x);
    }
    static const double ns[] = { -0.5, -1.25, -2.75, -10.1, -100.3,
                                 -1e6 + 0.5, -1e-8 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        double x = ns[i];
        /* fmod is exact: sin(pi x) without pi*x's rounding at large x */
        double s = sin(pi * fmod(x, 1.0));
        is_close(kiln_trigamma(x) + kiln_trigamma(1 - x), pi * pi / (s * s),
                 1e-15, "reflection psi1(1 - x) + psi1(x) = pi^2/sin^2(pi x) "
                 "at %g", x);
    }
    is_close(kiln_trigamma(-0.5), pi * pi / 2 + 4, 4e-16,
             "psi1(-0.5) = pi^2/2 + 4");
    is_close(kiln_trigamma(-1.25), 19.181879647671606498, 4e-16,
             "psi1(-1.25)");
    ok(kiln_trigamma(0.0) == INFINITY && kiln_trigamma(-0.0) == INFINITY
       && kiln_trigamma(-1.0) == INFINITY && kiln_trigamma(-7.0) == INFINITY
       && kiln_trigamma(-1e300) == INFINITY,
       "psi1 at 0 and the negative integers is +inf (SciPy)");
    ok(isnan(kiln_trigamma(NAN)) && kiln_trigamma(INFINITY) == 0.0
       && kiln_trigamma(-INFINITY) == INFINITY,
       "psi1(NaN) = NaN, psi1(inf) = 0, psi1(-inf) = +inf (SciPy)");

    /* through the interpreter */
    double x[4] = { 1.0, 0.5, 2.0, -0.5 }, o[4] = { 0 };
    int64_t sh[1] = { 4 };
    kiln_arg_desc d1[1] = { AD(KILN_F64, 1) };
    kiln_kernel k = kernel(KILN_KERNEL_ELEMWISE, 1, d1, 1, d1);
    prog p = { .n = 0 };
    int32_t refs[1] = { OP1(&p, KILN_I_TRIGAMMA, KILN_F64,
                            LOAD(&p, 0, KILN_F64)) };
    with_prog(&k, &p, refs);
    k.label = "trigamma";
    kiln_view vi[1] = { V(x, KILN_F64, 1, sh) };
    kiln_view vo[1] = { V(o, KILN_F64, 1, sh) };
    int rc = run(&k, vi, vo);
    ok(rc == 0 && o[0] == kiln_trigamma(1.0) && o[1] == kiln_trigamma(0.5)
       && o[2] == kiln_trigamma(2.0) && o[3] == kiln_trigamma(-0.5),
       "trigamma kernel computes kiln_trigamma (rc %d)", rc);

    /* a host whose runtime table ends before trigamma (version 1): the
     * kernel compiles (supports sees no table) but the call refuses */
    kiln_runtime old = *kiln_runtime_get();
    old.struct_size = offsetof(kiln_runtime, sgemm) + sizeof old.sgemm;
    old.version = 1;
    old.trigamma = NULL;
    ok(kiln_runtime_get()->version >= 2 && kiln_runtime_get()->trigamma
       && kiln_runtime_get()->struct_size >= offsetof(kiln_runtime, trigamma)
                                             + sizeof(void (*)(void)),
       "the host's runtime table is version 2 or later and has trigamma");
    old.trigamma = kiln_trigamma; /* beyond struct_size: must be ignored */
    RT = &old;
    o[0] = 0;
    rc = run(&k, vi, vo);
    RT = NULL;
    ok(rc == KILN_ERR_ARG && strstr(errbuf, "trigamma") && o[0] == 0,
       "trigamma with a version-1 runtime table fails cleanly: %s", errbuf);
    /* exp still works with that table */
    prog q = { .n = 0 };
    int32_t r2[1] = { OP1(&q, KILN_I_EXP, KILN_F64, LOAD(&q, 0, KILN_F64)) };
    with_prog(&k, &q, r2);
    RT = &old;
    rc = run(&k, vi, vo);
    RT = NULL;
    ok(rc == 0 && o[0] == exp(1.0), "exp with a version-1 table still runs");

    /* version 3 (ABI 1.7, issue 25): a version-2 table lacks betainc and
     * erfcx; the call refuses them by name */
    old = *kiln_runtime_get();
    old.struct_size = offsetof(kiln_runtime, trigamma) + sizeof old.trigamma;
    old.version = 2;
    ok(kiln_runtime_get()->version == 6 && kiln_runtime_get()->betainc
       && kiln_runtime_get()->dgemm_rt && kiln_runtime_get()->sgemm_rt
       && kiln_runtime_get()->lapack_run
       && kiln_runtime_get()->i0e && kiln_runtime_get()->i1e
       && kiln_runtime_get()->ode_solve && kiln_runtime_get()->gemm_batched,
       "the host's runtime table is version 6 (ABI 1.11) and has betainc, "
       "dgemm_rt, sgemm_rt, lapack_run, i0e, i1e, ode_solve and gemm_batched");
    static const unsigned v3ops[2] = { KILN_I_ERFCX, KILN_I_BETAINC };
    for (int t = 0; t < 2; t++) {
        prog q3 = { .n = 0 };
        int32_t l = LOAD(&q3, 0, KILN_F64);
        int32_t r3[1] = { t == 0 ? OP1(&q3, v3ops[t], KILN_F64, l)
                                 : emit(&q3, v3ops[t], KILN_F64, l, l, l, 0) };
        with_prog(&k, &q3, r3);
        RT = &old;
        o[0] = 0;
        rc = run(&k, vi, vo);
        RT = NULL;
        ok(rc == KILN_ERR_ARG && strstr(errbuf, t ? "betainc" : "erfcx")
           && o[0] == 0, "a version-3 opcode with a version-2 table fails "
           "cleanly: %s", errbuf);
        rc = run(&k, vi, vo);
        ok(rc == 0 && o[0] == (t ? kiln_betainc(1.0, 1.0, 1.0)
                                 : kiln_erfcx(1.0)),
           "and runs with the host's table (rc %d)", rc);
    }
    /* version 5 (ABI 1.9, issue 28): a version-4 table lacks i0e */
    old = *kiln_runtime_get();
    old.struct_size = offsetof(kiln_runtime, sgemm_rt) + sizeof old.sgemm_rt;
    old.version = 4;
    prog q5 = { .n = 0 };
    int32_t l5 = LOAD(&q5, 0, KILN_F64);
    int32_t r5[1] = { OP1(&q5, KILN_I_I0E, KILN_F64, l5) };
    with_prog(&k, &q5, r5);
    RT = &old;
    o[0] = 0;
    rc = run(&k, vi, vo);
    RT = NULL;
    ok(rc == KILN_ERR_ARG && strstr(errbuf, "i0e") && o[0] == 0,
       "a version-5 opcode with a version-4 table fails cleanly: %s",
       errbuf);
    rc = run(&k, vi, vo);
    ok(rc == 0 && o[0] == kiln_i0e(1.0),
       "and runs with the host's table (rc %d)", rc);
}

/* ------------------------------------------------------------------ */
/* The plugin interface                                                 */
/* ------------------------------------------------------------------ */

static void test_plugin_api(void)
{
    char msg[256] = "";
    ok(kiln_backend_entry(KILN_ABI_MAJOR + 1, 0, msg, sizeof msg) == NULL
       && strstr(msg, "ABI"), "another ABI major is refused: %s", msg);
    ok(B && B->struct_size == sizeof(kiln_backend)
       && B->abi_major == KILN_ABI_MAJOR && strcmp(B->name, "interp") == 0
       && strcmp(B->version, KILN_VERSION_STRING) == 0 && B->build_id
       && (B->flags & KILN_BACKEND_THREAD_SAFE),
       "descriptor: interp %s (%s), thread-safe", B ? B->version : "",
       B ? B->build_id : "");
    ok(kiln_backend_entry(KILN_ABI_MAJOR, KILN_ABI_MINOR + 5, NULL, 0) == B,
       "a newer minor is served");

    kiln_arg_desc d1[1] = { AD(KILN_F64, 1) };
    kiln_kernel k = kernel(99, 1, d1, 1, d1);
    kiln_plugin_error *err = NULL;
    ok(!B->supports(&k, &err) && err && strstr(err->message, "kind"),
       "unknown kind refused: %s", err ? err->message : "");
    B->error_free(err);

    prog p = { .n = 0 };
    int32_t refs[1] = { emit(&p, KILN_I_COUNT + 3, KILN_F64,
                             LOAD(&p, 0, KILN_F64), -1, -1, 0) };
    k = kernel(KILN_KERNEL_ELEMWISE, 1, d1, 1, d1);
    with_prog(&k, &p, refs);
    err = NULL;
    ok(!B->supports(&k, &err) && err && strstr(err->message, "opcode"),
       "unknown opcode refused: %s", err ? err->message : "");
    B->error_free(err);

    /* operand referring forward */
    prog q = { .n = 0 };
    int32_t r2[1] = { OP2(&q, KILN_I_ADD, KILN_F64, LOAD(&q, 0, KILN_F64), 5) };
    with_prog(&k, &q, r2);
    err = NULL;
    kiln_artifact *art = NULL;
    int rc = B->compile(&k, NULL, &art, &err);
    ok(rc != 0 && art == NULL && err && err->code == rc,
       "compile refuses a forward operand: %s", err ? err->message : "");
    B->error_free(err);

    /* a kernel from an older host (smaller struct_size) still works:
     * fields past it read as 0 */
    prog s = { .n = 0 };
    int32_t r3[1] = { OP1(&s, KILN_I_NEG, KILN_F64, LOAD(&s, 0, KILN_F64)) };
    k = kernel(KILN_KERNEL_ELEMWISE, 1, d1, 1, d1);
    with_prog(&k, &s, r3);
    k.struct_size = offsetof(kiln_kernel, reduce_op);
    double x[3] = { 1, 2, 3 }, o[3];
    int64_t sh[1] = { 3 };
    kiln_view vi[1] = { V(x, KILN_F64, 1, sh) };
    kiln_view vo[1] = { V(o, KILN_F64, 1, sh) };
    rc = run(&k, vi, vo);
    ok(rc == 0 && o[2] == -3.0, "a kernel with a short struct_size runs");

    /* call-time checks */
    k.struct_size = sizeof k;
    kiln_view wrong[1] = { V(x, KILN_F32, 1, sh) };
    rc = run(&k, wrong, vo);
    ok(rc == KILN_ERR_TYPE && strstr(errbuf, "f32") && strstr(errbuf, "f64"),
       "a view of the wrong dtype is refused: %s", errbuf);
    int64_t sh2[1] = { 2 };
    kiln_view shorter[1] = { V(o, KILN_F64, 1, sh2) };
    rc = run(&k, vi, shorter);
    ok(rc == KILN_ERR_SHAPE && strstr(errbuf, "(3)") && strstr(errbuf, "(2)"),
       "a shape that does not broadcast is refused: %s", errbuf);

    /* no runtime table for a program that needs one */
    prog t = { .n = 0 };
    int32_t r4[1] = { OP1(&t, KILN_I_EXP, KILN_F64, LOAD(&t, 0, KILN_F64)) };
    with_prog(&k, &t, r4);
    kiln_callable *c = NULL;
    art = NULL;
    rc = B->compile(&k, NULL, &art, NULL) || B->load(art, &c, NULL);
    B->artifact_free(art);
    kiln_call call;
    memset(&call, 0, sizeof call);
    call.struct_size = sizeof call;
    call.n_inputs = call.n_outputs = 1;
    call.inputs = vi;
    call.outputs = vo;
    call.errbuf = errbuf;
    call.errbuf_size = sizeof errbuf;
    ok(rc == 0 && c && c->fn(c->state, &call) != 0 && strstr(errbuf, "runtime"),
       "exp without a runtime table fails cleanly: %s", errbuf);
    B->callable_free(c);
    ok(B->artifact_bytes(NULL, NULL) == NULL, "no artifact bytes (nothing "
       "worth caching)");
}

int main(void)
{
    B = kiln_backend_entry(KILN_ABI_MAJOR, KILN_ABI_MINOR, NULL, 0);
    if (!B) {
        printf("Bail out! kiln_backend_entry returned NULL\n");
        return 1;
    }
    test_plugin_api();
    test_special();
    test_trigamma();
    test_all_ops();
    test_where_and_casts();
    test_broadcast_strides();
    test_multi_output();
    test_big_programs();
    test_reduce();
    test_join();
    test_gather();
    test_scatter();
    test_dot();
    return done_testing();
}
