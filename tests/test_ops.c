/*
 * test_ops.c — every graph op, end to end: .kg text -> kiln_parse_string
 * -> kiln_compile -> kiln_function_call, compared against references
 * computed here with plain C loops and libm (never with kiln's code).
 *
 * Covered, op by op: values (edge cases 0, -0, tiny, huge, inf, nan),
 * output dtypes in every accepted input dtype (NumPy 2 promotion, NEP 50
 * weak literals, kiln's documented choices: arithmetic on bool computes
 * in i64, float-only ops send integers to f64), integer wrap-around,
 * broadcasting (incl. rank 0, zero-size and symbolic dims), reductions
 * (axes, keepdims, empty inputs, logsumexp's infinities), shape ops,
 * join/stack (1200 inputs), basic and advanced indexing, set/inc
 * subtensor, dot/matmul, and the exact build- and run-time error
 * messages.
 *
 * Documented (kiln's, not NumPy's) behaviour checked here:
 *  - max/min of an empty array give the identity (-inf / +inf, or the
 *    integer type's minimum / maximum) instead of raising;
 *  - float -> int casts of NaN or out-of-range values give the integer
 *    type's minimum (x86-64's and therefore NumPy's result there);
 *  - pow of integers computes in f64 (float-only op);
 *  - add/sub/mul/neg/abs/square of bool compute in i64, while
 *    maximum/minimum of bool stay bool (or / and) as in NumPy.
 */
#include <kiln/kiln.h>
#include <kiln/graph.h>

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static const kiln_dtype ALL_DT[5] = {KILN_F64, KILN_F32, KILN_I64, KILN_I32,
                                     KILN_BOOL};

static const char *dn(kiln_dtype d)
{
    static const char *n[] = {"f64", "f32", "i64", "i32", "bool"};
    return (unsigned)d < 5 ? n[d] : "?";
}

static int is_float(kiln_dtype d) { return d == KILN_F64 || d == KILN_F32; }
static int is_int(kiln_dtype d) { return d == KILN_I64 || d == KILN_I32; }

/* ---- scratch memory, freed at the end of each test group ------------ */

static void **scratch;
static size_t n_scratch, cap_scratch;

static void *smalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    if (n_scratch == cap_scratch) {
        cap_scratch = cap_scratch ? 2 * cap_scratch : 64;
        scratch = realloc(scratch, cap_scratch * sizeof *scratch);
        if (!scratch)
            exit(2);
    }
    scratch[n_scratch++] = p;
    return p;
}

static void scratch_free(void)
{
    for (size_t i = 0; i < n_scratch; i++)
        free(scratch[i]);
    n_scratch = 0;
}

/* printf into scratch memory */
static TAP_PRINTF(1, 2) char *S(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = smalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- tensors -------------------------------------------------------- */

static int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

/* Store v into element i of a buffer of dtype dt (as C converts). */
static void put(kiln_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case KILN_F64: ((double *)p)[i] = v; break;
    case KILN_F32: ((float *)p)[i] = (float)v; break;
    case KILN_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case KILN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

static double getd_raw(kiln_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case KILN_F64: return ((const double *)p)[i];
    case KILN_F32: return ((const float *)p)[i];
    case KILN_I64: return (double)((const int64_t *)p)[i];
    case KILN_I32: return ((const int32_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static int64_t geti_raw(kiln_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case KILN_I64: return ((const int64_t *)p)[i];
    case KILN_I32: return ((const int32_t *)p)[i];
    case KILN_BOOL: return ((const uint8_t *)p)[i];
    default: return (int64_t)getd_raw(dt, p, i);
    }
}

static double getd(const kiln_tensor *t, int64_t i)
{
    return getd_raw(t->dtype, t->data, i);
}

static int64_t geti(const kiln_tensor *t, int64_t i)
{
    return geti_raw(t->dtype, t->data, i);
}

/* A tensor of dtype dt holding vals (converted); scratch memory. */
static kiln_tensor TD(kiln_dtype dt, int rank, const int64_t *shape,
                      const double *vals)
{
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    int64_t n = numel(rank, shape);
    t.data = smalloc((size_t)n * kiln_dtype_size(dt));
    for (int64_t i = 0; vals && i < n; i++)
        put(dt, t.data, i, vals[i]);
    return t;
}

/* An integer tensor from exact int64 values (wrapped for i32). */
static kiln_tensor TI(kiln_dtype dt, int rank, const int64_t *shape,
                      const int64_t *vals)
{
    kiln_tensor t = TD(dt, rank, shape, NULL);
    int64_t n = numel(rank, shape);
    for (int64_t i = 0; i < n; i++) {
        if (dt == KILN_I64)
            ((int64_t *)t.data)[i] = vals[i];
        else if (dt == KILN_I32)
            ((int32_t *)t.data)[i] = (int32_t)(uint32_t)(uint64_t)vals[i];
        else
            put(dt, t.data, i, (double)vals[i]);
    }
    return t;
}

/* A copy of a tensor's data (to check inputs are left alone). */
static void *snapshot(const kiln_tensor *t)
{
    size_t n = (size_t)numel(t->rank, t->shape) * kiln_dtype_size(t->dtype);
    void *p = smalloc(n);
    memcpy(p, t->data, n);
    return p;
}

static const char *shape_str(int rank, const int64_t *shape)
{
    char buf[200];
    int k = snprintf(buf, sizeof buf, "(");
    for (int i = 0; i < rank; i++)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%lld",
                      i ? ", " : "", (long long)shape[i]);
    snprintf(buf + k, sizeof buf - (size_t)k, ")");
    return S("%s", buf);
}

/* ---- compiling and calling ------------------------------------------ */

static const char *HEAD = "kiln 1\ngraph t\n";

static kiln_graph *parse_body(const char *body, kiln_err *err)
{
    size_t n = strlen(HEAD) + strlen(body) + 16;
    char *text = malloc(n);
    if (!text)
        exit(2);
    snprintf(text, n, "%s%s\nend\n", HEAD, body);
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, err);
    free(text);
    return g;
}

static kiln_function *compile_body(const char *body, kiln_err *err)
{
    kiln_graph *g = parse_body(body, err);
    if (!g)
        return NULL;
    kiln_function *f = kiln_compile(g, NULL, err);
    kiln_graph_free(g);
    return f;
}

/* Compile `body` and call it once; on any failure emit a failing test
 * named `what` and return NULL.  The caller frees the function (outputs
 * live in it). */
static kiln_function *run(const char *what, const char *body,
                          const kiln_tensor *in, kiln_tensor *out)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_body(body, &err);
    if (!f) {
        ok(0, "%s: compiles", what);
        diag("error %d: %s", err.code, err.message);
        diag("body: %s", body);
        return NULL;
    }
    if (kiln_function_call(f, in, out, &err)) {
        ok(0, "%s: call", what);
        diag("error %d: %s", err.code, err.message);
        kiln_function_free(f);
        return NULL;
    }
    return f;
}

/* ---- comparing ------------------------------------------------------ */

static double rtol_for(kiln_dtype dt, double rtol64)
{
    return dt == KILN_F32 ? 2e-6 : rtol64;
}

/* Check dtype, shape and every element of `o`.  Expected values come
 * from wd (floats, bool) or wi (integers; when NULL, (int64_t)wd).
 * signs: also check the sign of zero results. */
static int check_out(const kiln_tensor *o, kiln_dtype dt, int rank,
                     const int64_t *shape, const double *wd,
                     const int64_t *wi, double rtol, int signs,
                     const char *what)
{
    if (o->dtype != dt) {
        ok(0, "%s", what);
        diag("dtype %s, want %s", dn(o->dtype), dn(dt));
        return 0;
    }
    int bad_shape = o->rank != rank;
    for (int i = 0; !bad_shape && i < rank; i++)
        bad_shape = o->shape[i] != shape[i];
    if (bad_shape) {
        ok(0, "%s", what);
        diag("shape %s, want %s", shape_str(o->rank, o->shape),
             shape_str(rank, shape));
        return 0;
    }
    int64_t n = numel(rank, shape);
    int nbad = 0;
    double tol = rtol_for(dt, rtol);
    for (int64_t i = 0; i < n; i++) {
        int good;
        if (is_int(dt) || dt == KILN_BOOL) {
            int64_t w = wi ? wi[i] : (int64_t)wd[i];
            if (dt == KILN_BOOL)
                w = w != 0;
            good = geti(o, i) == w;
            if (!good && nbad < 4)
                diag("  [%lld] got %lld, want %lld", (long long)i,
                     (long long)geti(o, i), (long long)w);
        } else {
            double g = getd(o, i), w = wd[i];
            good = tap_close(g, w, tol);
            if (good && signs && g == 0 && w == 0)
                good = !signbit(g) == !signbit(w);
            if (!good && nbad < 4)
                diag("  [%lld] got %.17g, want %.17g", (long long)i, g, w);
        }
        if (!good)
            nbad++;
    }
    if (nbad > 4)
        diag("  ... %d mismatches in all", nbad);
    return ok(nbad == 0, "%s", what);
}

/* Expect a build-time error (parse or compile) with code and message. */
static void expect_build_error(const char *body, int code, const char *msg,
                               const char *what)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_body(body, &err);
    int good = !f && err.code == code && strcmp(err.message, msg) == 0;
    ok(good, "build error: %s", what);
    if (!good) {
        diag("got code %d: %s", f ? 0 : err.code, f ? "(compiled)" :
             err.message);
        diag("want code %d: %s", code, msg);
    }
    kiln_function_free(f);
}

/* ---- references: plain C and libm ----------------------------------- */

/* wrap-around integer arithmetic of `bits` bits */
static int64_t wrap(uint64_t u, int bits)
{
    if (bits == 32) {
        uint32_t v = (uint32_t)u;
        return v <= (uint32_t)INT32_MAX ? (int64_t)v
                                        : (int64_t)v - 4294967296LL;
    }
    return u <= (uint64_t)INT64_MAX ? (int64_t)u
                                    : -(int64_t)(UINT64_MAX - u) - 1;
}

static double ref_sigmoid(double x)
{
    return (double)(1.0L / (1.0L + expl(-(long double)x)));
}

static double ref_softplus(double x)
{
    long double v = x;
    if (x > 40)
        return (double)(v + log1pl(expl(-v)));
    return (double)log1pl(expl(v));
}

/* psi(x) in long double: recurrence to x >= 20, then the asymptotic
 * series; reflection for x < 0.  SciPy conventions: psi(+0) = -inf,
 * psi(-0) = +inf, poles (negative integers) and -inf give NaN. */
static long double psi_pos(long double x)
{
    long double s = 0;
    while (x < 20) {
        s += 1 / x;
        x += 1;
    }
    long double z = 1 / (x * x);
    long double t = z * (1.0L / 12 - z * (1.0L / 120 - z * (1.0L / 252 -
                    z * (1.0L / 240 - z * (1.0L / 132)))));
    return logl(x) - 0.5L / x - t - s;
}

static double ref_digamma(double x)
{
    const long double pi = 3.141592653589793238462643383279502884L;
    if (isnan(x))
        return x;
    if (isinf(x))
        return x > 0 ? x : NAN;
    if (x == 0)
        return signbit(x) ? INFINITY : -INFINITY;
    if (x > 0)
        return (double)psi_pos(x);
    if (x == floor(x))
        return NAN;
    /* tan has period pi: fold x into r in [-1/2, 1/2], exactly */
    long double r = (long double)x - roundl((long double)x);
    return (double)(psi_pos(1.0L - x) - pi / tanl(pi * r));
}

static double ref_neg(double x) { return -x; }
static double ref_square(double x) { return x * x; }
static double ref_lgamma(double x) { return lgamma(x); }

/* ---- unary ops ------------------------------------------------------ */

enum { U_FLOAT, U_ARITH };

typedef struct unary_case {
    const char *op;
    double (*ref)(double);
    int kind;
    double rtol;
} unary_case;

static const unary_case UNARY[] = {
    {"neg", ref_neg, U_ARITH, 0},
    {"abs", fabs, U_ARITH, 0},
    {"square", ref_square, U_ARITH, 0},
    {"exp", exp, U_FLOAT, 1e-15},
    {"expm1", expm1, U_FLOAT, 1e-15},
    {"log", log, U_FLOAT, 1e-15},
    {"log1p", log1p, U_FLOAT, 1e-15},
    {"sqrt", sqrt, U_FLOAT, 1e-15},
    {"sigmoid", ref_sigmoid, U_FLOAT, 1e-14},
    {"softplus", ref_softplus, U_FLOAT, 1e-14},
    {"tanh", tanh, U_FLOAT, 1e-15},
    {"sin", sin, U_FLOAT, 1e-15},
    {"cos", cos, U_FLOAT, 1e-15},
    {"erf", erf, U_FLOAT, 1e-15},
    {"erfc", erfc, U_FLOAT, 1e-15},
    {"gammaln", ref_lgamma, U_FLOAT, 1e-15},
    {"digamma", ref_digamma, U_FLOAT, 1e-12},
};

static const double FLOAT_VALS[] = {
    0.0, -0.0, 1e-300, 1e-8, -1e-8, 0.5, 1, -1, 2, 2.5, -2.5, 3, 10, 30,
    -30, 100.25, -700, 710, 1000, -1000, 1e300, -1e300, INFINITY, -INFINITY,
    NAN
};
static const double INT_VALS[] = {0, 1, -1, 2, -3, 7, 10, -100, 1000};
static const double BOOL_VALS[] = {0, 1, 1, 0};

static void test_unary_one(const unary_case *u, kiln_dtype dt)
{
    const double *vals = is_float(dt) ? FLOAT_VALS
                         : is_int(dt) ? INT_VALS : BOOL_VALS;
    int n = is_float(dt) ? NELEM(FLOAT_VALS)
            : is_int(dt) ? NELEM(INT_VALS) : NELEM(BOOL_VALS);
    kiln_dtype odt;
    if (u->kind == U_FLOAT)
        odt = is_float(dt) ? dt : KILN_F64;
    else
        odt = dt == KILN_BOOL ? KILN_I64 : dt;
    kiln_tensor x = TD(dt, 1, SHAPE(n), vals);
    double *wd = smalloc(sizeof(double) * (size_t)n);
    int64_t *wi = smalloc(sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
        double xv = getd(&x, i); /* the stored (converted) value */
        if (odt == KILN_F32)
            wd[i] = (float)u->ref(xv);
        else if (odt == KILN_F64)
            wd[i] = u->ref(xv);
        else { /* integer arith: exact */
            int64_t v = (int64_t)xv;
            int bits = odt == KILN_I32 ? 32 : 64;
            if (u->ref == ref_neg)
                wi[i] = wrap(0 - (uint64_t)v, bits);
            else if (u->ref == ref_square)
                wi[i] = wrap((uint64_t)v * (uint64_t)v, bits);
            else
                wi[i] = v < 0 ? wrap(0 - (uint64_t)v, bits) : v;
        }
    }
    kiln_tensor out[1];
    const char *what = S("%s(%s[%d]) -> %s", u->op, dn(dt), n, dn(odt));
    kiln_function *f = run(what, S("input x: %s[%d]\noutput y = %s(x)",
                                   dn(dt), n, u->op), &x, out);
    if (f)
        check_out(&out[0], odt, 1, SHAPE(n), wd, wi, u->rtol, 1, what);
    kiln_function_free(f);
}

static void test_unary(void)
{
    for (int k = 0; k < NELEM(UNARY); k++)
        for (int d = 0; d < 5; d++)
            test_unary_one(&UNARY[k], ALL_DT[d]);

    /* integer extremes wrap as in NumPy: -INT_MIN = INT_MIN, abs too */
    static const int64_t i64v[] = {0, 1, -1, 7, -100, 3037000500LL,
                                   INT64_MAX, INT64_MIN};
    static const int64_t i32v[] = {0, 1, -1, 7, -100, 46341, INT32_MAX,
                                   INT32_MIN};
    for (int w = 0; w < 2; w++) {
        kiln_dtype dt = w ? KILN_I32 : KILN_I64;
        const int64_t *v = w ? i32v : i64v;
        int bits = w ? 32 : 64;
        kiln_tensor x = TI(dt, 1, SHAPE(8), v);
        int64_t wn[8], wa[8], ws[8];
        for (int i = 0; i < 8; i++) {
            wn[i] = wrap(0 - (uint64_t)v[i], bits);
            wa[i] = v[i] < 0 ? wn[i] : v[i];
            ws[i] = wrap((uint64_t)v[i] * (uint64_t)v[i], bits);
        }
        kiln_tensor out[3];
        const char *what = S("neg/abs/square of %s extremes wrap", dn(dt));
        kiln_function *f = run(what, S("input x: %s[8]\noutput n = neg(x)\n"
                                       "output a = abs(x)\n"
                                       "output s = square(x)", dn(dt)),
                               &x, out);
        if (f) {
            check_out(&out[0], dt, 1, SHAPE(8), NULL, wn, 0, 0,
                      S("neg %s extremes", dn(dt)));
            check_out(&out[1], dt, 1, SHAPE(8), NULL, wa, 0, 0,
                      S("abs %s extremes", dn(dt)));
            check_out(&out[2], dt, 1, SHAPE(8), NULL, ws, 0, 0,
                      S("square %s extremes", dn(dt)));
        }
        kiln_function_free(f);
    }

    /* a few known values, independent of any formula */
    static const struct { const char *op; double x, want; } known[] = {
        {"digamma", 1, -0.57721566490153286},
        {"digamma", 0.5, -1.9635100260214235},
        {"digamma", 10, 2.2517525890667211},
        {"digamma", -0.5, 0.03648997397857652},
        {"gammaln", 0.5, 0.57236494292470008},
        {"gammaln", 10, 12.801827480081469},
        {"erf", 0.5, 0.52049987781304654},
        {"erfc", 3, 2.2090496998585441e-05},
        {"sigmoid", -40, 4.2483542552915889e-18},
        {"softplus", -40, 4.2483542552915889e-18},
        {"softplus", 0, 0.69314718055994531},
        {"expm1", 1e-10, 1.00000000005e-10},
        {"log1p", 1e-10, 9.9999999995e-11},
    };
    for (int k = 0; k < NELEM(known); k++) {
        kiln_tensor x = TD(KILN_F64, 0, NULL, &known[k].x);
        kiln_tensor out[1];
        const char *what = S("%s(%g) = %.17g", known[k].op, known[k].x,
                             known[k].want);
        kiln_function *f = run(what, S("input x: f64\noutput y = %s(x)",
                                       known[k].op), &x, out);
        if (f)
            check_out(&out[0], KILN_F64, 0, NULL, &known[k].want, NULL,
                      1e-13, 0, what);
        kiln_function_free(f);
    }
    scratch_free();
}

/* ---- binary ops ----------------------------------------------------- */

enum { B_ARITH, B_ORDER, B_FLOAT, B_CMP, B_LOGIC };

static const struct { const char *op; int kind; } BINARY[] = {
    {"add", B_ARITH}, {"sub", B_ARITH}, {"mul", B_ARITH},
    {"true_div", B_FLOAT}, {"pow", B_FLOAT},
    {"maximum", B_ORDER}, {"minimum", B_ORDER},
    {"eq", B_CMP}, {"ne", B_CMP}, {"lt", B_CMP}, {"le", B_CMP},
    {"gt", B_CMP}, {"ge", B_CMP},
    {"and", B_LOGIC}, {"or", B_LOGIC},
};

/* NumPy 2 promotion of two strong dtypes (kiln has no unsigned types):
 * bool < ints < floats; i32 + i64 -> i64; f32 + f64 -> f64; any int with
 * f32 -> f64 (int32 + float32 is float64 in NumPy). */
static kiln_dtype promote(kiln_dtype a, kiln_dtype b)
{
    if (a == b)
        return a;
    if (a == KILN_BOOL)
        return b;
    if (b == KILN_BOOL)
        return a;
    if (is_int(a) && is_int(b))
        return KILN_I64;
    return KILN_F64;
}

static kiln_dtype binary_dtype(int kind, kiln_dtype a, kiln_dtype b)
{
    kiln_dtype p = promote(a, b);
    switch (kind) {
    case B_ARITH: return p == KILN_BOOL ? KILN_I64 : p;
    case B_ORDER: return p;
    case B_FLOAT: return is_float(p) ? p : KILN_F64;
    default: return KILN_BOOL;
    }
}

static const double FA[] = {0, -0.0, 1.5, -2, 3, INFINITY, -INFINITY, NAN,
                            1e300, 7, -7, 2, 0.5, -0.0};
static const double FB[] = {1, 2, -0.0, 0.5, -3, INFINITY, 2, 1, 1e300, -2,
                            3, NAN, 0, 0};
static const double IA[] = {0, 1, -2, 3, 7, -7, 100, 5, 2, -1, 6, 4, 0, 9};
static const double IB[] = {1, 2, 0, -3, 3, 2, -7, 5, 1, 2, -3, 4, 0, -9};
static const double BA[] = {0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0};
static const double BB[] = {1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0};
#define NB 14

static const double *vals_for(kiln_dtype dt, int second)
{
    if (is_float(dt))
        return second ? FB : FA;
    if (is_int(dt))
        return second ? IB : IA;
    return second ? BB : BA;
}

static double ref_float_binop(const char *op, double x, double y)
{
    if (!strcmp(op, "add")) return x + y;
    if (!strcmp(op, "sub")) return x - y;
    if (!strcmp(op, "mul")) return x * y;
    if (!strcmp(op, "true_div")) return x / y;
    if (!strcmp(op, "pow")) return pow(x, y);
    if (!strcmp(op, "maximum"))
        return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
    /* minimum */
    return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
}

static int64_t ref_int_binop(const char *op, int64_t x, int64_t y, int bits)
{
    if (!strcmp(op, "add")) return wrap((uint64_t)x + (uint64_t)y, bits);
    if (!strcmp(op, "sub")) return wrap((uint64_t)x - (uint64_t)y, bits);
    if (!strcmp(op, "mul")) return wrap((uint64_t)x * (uint64_t)y, bits);
    if (!strcmp(op, "maximum")) return x > y ? x : y;
    return x < y ? x : y;
}

static int ref_cmp(const char *op, double x, double y)
{
    if (!strcmp(op, "eq")) return x == y;
    if (!strcmp(op, "ne")) return x != y;
    if (!strcmp(op, "lt")) return x < y;
    if (!strcmp(op, "le")) return x <= y;
    if (!strcmp(op, "gt")) return x > y;
    return x >= y;
}

static int ref_icmp(const char *op, int64_t x, int64_t y)
{
    if (!strcmp(op, "eq")) return x == y;
    if (!strcmp(op, "ne")) return x != y;
    if (!strcmp(op, "lt")) return x < y;
    if (!strcmp(op, "le")) return x <= y;
    if (!strcmp(op, "gt")) return x > y;
    return x >= y;
}

static void test_binary_one(const char *op, int kind, kiln_dtype da,
                            kiln_dtype db)
{
    kiln_tensor in[2] = {TD(da, 1, SHAPE(NB), vals_for(da, 0)),
                         TD(db, 1, SHAPE(NB), vals_for(db, 1))};
    kiln_dtype odt = binary_dtype(kind, da, db);
    kiln_dtype cd = promote(da, db); /* compare / compute dtype */
    if (kind == B_FLOAT || kind == B_ARITH || kind == B_ORDER)
        cd = odt;
    double wd[NB];
    int64_t wi[NB];
    for (int i = 0; i < NB; i++) {
        double x = getd(&in[0], i), y = getd(&in[1], i);
        int64_t xi = geti(&in[0], i), yi = geti(&in[1], i);
        wi[i] = 0;
        wd[i] = 0;
        if (kind == B_LOGIC) {
            int a = x != 0 || isnan(x), b = y != 0 || isnan(y);
            wi[i] = !strcmp(op, "and") ? a && b : a || b;
        } else if (kind == B_CMP) {
            wi[i] = is_float(cd) ? ref_cmp(op, x, y) : ref_icmp(op, xi, yi);
        } else if (cd == KILN_BOOL) { /* maximum = or, minimum = and */
            wi[i] = !strcmp(op, "maximum") ? (xi || yi) : (xi && yi);
        } else if (is_int(cd)) {
            wi[i] = ref_int_binop(op, xi, yi, cd == KILN_I32 ? 32 : 64);
        } else if (cd == KILN_F32) {
            wd[i] = (float)ref_float_binop(op, x, y);
        } else {
            wd[i] = ref_float_binop(op, x, y);
        }
    }
    kiln_tensor out[1];
    const char *what = S("%s(%s, %s) -> %s", op, dn(da), dn(db), dn(odt));
    kiln_function *f = run(what, S("input a: %s[%d]\ninput b: %s[%d]\n"
                                   "output y = %s(a, b)", dn(da), NB, dn(db),
                                   NB, op), in, out);
    if (f)
        check_out(&out[0], odt, 1, SHAPE(NB), wd, wi, 1e-15, 0, what);
    kiln_function_free(f);
}

static void test_binary(void)
{
    for (int k = 0; k < NELEM(BINARY); k++)
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 5; b++)
                test_binary_one(BINARY[k].op, BINARY[k].kind, ALL_DT[a],
                                ALL_DT[b]);
    scratch_free();
}

/* ---- not, where, cast ----------------------------------------------- */

static void test_not_where(void)
{
    for (int d = 0; d < 5; d++) {
        kiln_dtype dt = ALL_DT[d];
        const double *v = vals_for(dt, 0);
        kiln_tensor x = TD(dt, 1, SHAPE(NB), v);
        int64_t wi[NB];
        for (int i = 0; i < NB; i++) {
            double xv = getd(&x, i);
            wi[i] = xv == 0;
        }
        kiln_tensor out[1];
        const char *what = S("not(%s) -> bool", dn(dt));
        kiln_function *f = run(what, S("input x: %s[%d]\noutput y = not(x)",
                                       dn(dt), NB), &x, out);
        if (f)
            check_out(&out[0], KILN_BOOL, 1, SHAPE(NB), NULL, wi, 0, 0, what);
        kiln_function_free(f);
    }

    /* where(c, a, b) over every pair of branch dtypes, c bool */
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++) {
            kiln_dtype da = ALL_DT[a], db = ALL_DT[b];
            kiln_dtype odt = promote(da, db);
            kiln_tensor in[3] = {TD(KILN_BOOL, 1, SHAPE(NB), BB),
                                 TD(da, 1, SHAPE(NB), vals_for(da, 0)),
                                 TD(db, 1, SHAPE(NB), vals_for(db, 1))};
            double wd[NB];
            int64_t wi[NB];
            for (int i = 0; i < NB; i++) {
                const kiln_tensor *src = BB[i] != 0 ? &in[1] : &in[2];
                wd[i] = odt == KILN_F32 ? (float)getd(src, i) : getd(src, i);
                wi[i] = geti(src, i);
            }
            kiln_tensor out[1];
            const char *what = S("where(bool, %s, %s) -> %s", dn(da), dn(db),
                                 dn(odt));
            kiln_function *f = run(what, S("input c: bool[%d]\n"
                                           "input a: %s[%d]\ninput b: %s[%d]\n"
                                           "output y = where(c, a, b)", NB,
                                           dn(da), NB, dn(db), NB), in, out);
            if (f)
                check_out(&out[0], odt, 1, SHAPE(NB), wd, wi, 0, 0, what);
            kiln_function_free(f);
        }

    /* a float condition is truthiness (nan is true), broadcast branches */
    {
        static const double c[] = {0, 1, -0.0, NAN, 2};
        kiln_tensor in[2] = {TD(KILN_F64, 1, SHAPE(5), c),
                             TD(KILN_F32, 0, NULL, (const double[]){7})};
        double wd[5] = {-1.5, 7, -1.5, 7, 7};
        kiln_tensor out[1];
        const char *what = "where(f64 cond, f32 scalar, -1.5) -> f32";
        kiln_function *f = run(what, "input c: f64[5]\ninput a: f32\n"
                               "output y = where(c, a, -1.5)", in, out);
        if (f)
            check_out(&out[0], KILN_F32, 1, SHAPE(5), wd, NULL, 0, 0, what);
        kiln_function_free(f);
    }
    scratch_free();
}

/* float -> int: truncation; NaN / out of range -> the type's minimum */
static int64_t ref_f2i(double x, int bits)
{
    if (bits == 32)
        return x > -2147483649.0 && x < 2147483648.0 ? (int64_t)trunc(x)
                                                     : INT32_MIN;
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0
               ? (int64_t)trunc(x)
               : INT64_MIN;
}

static void test_cast(void)
{
    static const double fv[] = {0, -0.0, 1.7, -1.7, 2.5, -2.5, 1e10, -1e10,
                                3e9, 1e300, INFINITY, -INFINITY, NAN, 0.1,
                                16777217, 2147483647, -2147483648.0};
    static const int64_t iv[] = {0, 1, -1, 2, INT64_MAX, INT64_MIN,
                                 4294967297LL, -4294967297LL, 2147483648LL,
                                 (1LL << 53) + 1, 16777217};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++) {
            kiln_dtype from = ALL_DT[a], to = ALL_DT[b];
            int n;
            kiln_tensor x;
            if (is_float(from)) {
                n = NELEM(fv);
                x = TD(from, 1, SHAPE(n), fv);
            } else if (is_int(from)) {
                n = NELEM(iv);
                x = TI(from, 1, SHAPE(n), iv);
            } else {
                n = NELEM(BOOL_VALS);
                x = TD(from, 1, SHAPE(n), BOOL_VALS);
            }
            double *wd = smalloc(sizeof(double) * (size_t)n);
            int64_t *wi = smalloc(sizeof(int64_t) * (size_t)n);
            for (int i = 0; i < n; i++) {
                if (is_float(from)) {
                    double v = getd(&x, i);
                    wd[i] = to == KILN_F32 ? (float)v : v;
                    if (is_int(to))
                        wi[i] = ref_f2i(v, to == KILN_I32 ? 32 : 64);
                    else if (to == KILN_BOOL)
                        wi[i] = v != 0 || isnan(v);
                } else {
                    int64_t v = geti(&x, i);
                    wd[i] = to == KILN_F32 ? (double)(float)v : (double)v;
                    if (to == KILN_I32)
                        wi[i] = wrap((uint64_t)v, 32);
                    else if (to == KILN_I64)
                        wi[i] = v;
                    else
                        wi[i] = v != 0;
                }
            }
            kiln_tensor out[1];
            const char *what = S("cast(%s, dtype=%s)", dn(from), dn(to));
            kiln_function *f = run(what, S("input x: %s[%d]\n"
                                           "output y = cast(x, dtype=%s)",
                                           dn(from), n, dn(to)), &x, out);
            if (f)
                check_out(&out[0], to, 1, SHAPE(n), wd, wi, 0, 1, what);
            kiln_function_free(f);
        }
    scratch_free();
}

/* ---- weak literals (NEP 50) and overflow ----------------------------- */

typedef struct lit_case {
    const char *decl;   /* input x declaration */
    const char *expr;
    kiln_dtype odt;
    double x[3];
    double want[3];
} lit_case;

static void test_literals(void)
{
    static const lit_case L[] = {
        {"f32[3]", "mul(0.5, x)", KILN_F32, {1, 3, -5}, {0.5, 1.5, -2.5}},
        {"f32[3]", "add(x, 2)", KILN_F32, {1, 3, -5}, {3, 5, -3}},
        {"f32[3]", "pow(x, 2)", KILN_F32, {1, 3, -5}, {1, 9, 25}},
        {"f32[3]", "true_div(1, x)", KILN_F32, {1, 4, -5}, {1, 0.25, -0.2}},
        {"i32[3]", "add(x, 1)", KILN_I32, {1, 3, -5}, {2, 4, -4}},
        {"i32[3]", "add(x, 1.5)", KILN_F64, {1, 3, -5}, {2.5, 4.5, -3.5}},
        {"i32[3]", "mul(x, -2)", KILN_I32, {1, 3, -5}, {-2, -6, 10}},
        {"i32[3]", "true_div(x, 2)", KILN_F64, {1, 3, -5}, {0.5, 1.5, -2.5}},
        {"i32[3]", "maximum(x, 0)", KILN_I32, {1, 3, -5}, {1, 3, 0}},
        {"i32[3]", "lt(x, 2.5)", KILN_BOOL, {2, 3, -5}, {1, 0, 1}},
        {"i32[3]", "eq(x, 3)", KILN_BOOL, {2, 3, -5}, {0, 1, 0}},
        {"i32[3]", "exp(x)", KILN_F64, {0, 1, -1},
         {1, 2.7182818284590452, 0.36787944117144233}},
        {"i64[3]", "sub(1, x)", KILN_I64, {1, 3, -5}, {0, -2, 6}},
        {"i64[3]", "mul(x, 0.5)", KILN_F64, {1, 3, -5}, {0.5, 1.5, -2.5}},
        {"bool[3]", "add(x, 1)", KILN_I64, {1, 0, 1}, {2, 1, 2}},
        {"bool[3]", "add(x, true)", KILN_I64, {1, 0, 1}, {2, 1, 2}},
        {"bool[3]", "mul(x, 2.5)", KILN_F64, {1, 0, 1}, {2.5, 0, 2.5}},
        {"bool[3]", "and(x, true)", KILN_BOOL, {1, 0, 1}, {1, 0, 1}},
        {"bool[3]", "maximum(x, false)", KILN_BOOL, {1, 0, 1}, {1, 0, 1}},
        {"f64[3]", "add(x, 1)", KILN_F64, {1, 3, -5}, {2, 4, -4}},
        {"f32[3]", "where(gt(x, 0), x, 0)", KILN_F32, {1, 3, -5}, {1, 3, 0}},
        {"i32[3]", "where(gt(x, 0), x, 1.5)", KILN_F64, {1, 3, -5},
         {1, 3, 1.5}},
        {"i32[3]", "where(gt(x, 0), x, 7)", KILN_I32, {1, 3, -5}, {1, 3, 7}},
        /* a computation on literals only stays weak */
        {"f32[3]", "add(x, mul(2, 3))", KILN_F32, {1, 3, -5}, {7, 9, 1}},
        {"i32[3]", "add(x, neg(4))", KILN_I32, {1, 3, -5}, {-3, -1, -9}},
        {"f32[3]", "cast(x, dtype=i32)", KILN_I32, {1.9, -3.9, 5}, {1, -3, 5}},
    };
    for (int k = 0; k < NELEM(L); k++) {
        kiln_dtype idt = KILN_F64;
        char dname[8];
        sscanf(L[k].decl, "%7[a-z0-9]", dname);
        kiln_dtype_parse(dname, &idt);
        kiln_tensor x = TD(idt, 1, SHAPE(3), L[k].x);
        double wd[3];
        for (int i = 0; i < 3; i++)
            wd[i] = L[k].odt == KILN_F32 ? (float)L[k].want[i] : L[k].want[i];
        kiln_tensor out[1];
        const char *what = S("x: %s, %s -> %s", L[k].decl, L[k].expr,
                             dn(L[k].odt));
        kiln_function *f = run(what, S("input x: %s\noutput y = %s",
                                       L[k].decl, L[k].expr), &x, out);
        if (f)
            check_out(&out[0], L[k].odt, 1, SHAPE(3), wd, NULL, 1e-15, 0,
                      what);
        kiln_function_free(f);
    }

    /* expressions of literals only: rank 0, weak kinds */
    static const struct { const char *expr; kiln_dtype odt; double want; }
        C[] = {
        {"add(1, 2)", KILN_I64, 3},
        {"add(1, 2.5)", KILN_F64, 3.5},
        {"mul(true, 3)", KILN_I64, 3},
        {"mul(true, true)", KILN_I64, 1},
        {"and(true, false)", KILN_BOOL, 0},
        {"true_div(1, 4)", KILN_F64, 0.25},
        {"exp(0)", KILN_F64, 1},
        {"neg(-0.0)", KILN_F64, 0},
        {"sub(0, 9007199254740992)", KILN_I64, -9007199254740992.0},
    };
    for (int k = 0; k < NELEM(C); k++) {
        kiln_tensor out[1];
        const char *what = S("%s -> %s %g", C[k].expr, dn(C[k].odt),
                             C[k].want);
        kiln_function *f = run(what, S("output y = %s", C[k].expr), NULL,
                               out);
        if (f)
            check_out(&out[0], C[k].odt, 0, NULL, &C[k].want, NULL, 1e-15, 0,
                      what);
        kiln_function_free(f);
    }
    scratch_free();
}

static void test_overflow(void)
{
    static const int64_t a[] = {INT64_MAX, INT64_MIN, INT64_MAX, 3, -1};
    static const int64_t b[] = {1, -1, INT64_MAX, INT64_MIN, INT64_MIN};
    kiln_tensor in[2] = {TI(KILN_I64, 1, SHAPE(5), a),
                         TI(KILN_I64, 1, SHAPE(5), b)};
    int64_t ws[5], wd[5], wm[5];
    for (int i = 0; i < 5; i++) {
        ws[i] = wrap((uint64_t)a[i] + (uint64_t)b[i], 64);
        wd[i] = wrap((uint64_t)a[i] - (uint64_t)b[i], 64);
        wm[i] = wrap((uint64_t)a[i] * (uint64_t)b[i], 64);
    }
    kiln_tensor out[4];
    kiln_function *f = run("i64 overflow",
                           "input a: i64[5]\ninput b: i64[5]\n"
                           "output s = add(a, b)\noutput d = sub(a, b)\n"
                           "output m = mul(a, b)\noutput one = add(a, 1)",
                           in, out);
    if (f) {
        check_out(&out[0], KILN_I64, 1, SHAPE(5), NULL, ws, 0, 0,
                  "add i64 wraps (INT64_MAX + 1 = INT64_MIN)");
        check_out(&out[1], KILN_I64, 1, SHAPE(5), NULL, wd, 0, 0,
                  "sub i64 wraps");
        check_out(&out[2], KILN_I64, 1, SHAPE(5), NULL, wm, 0, 0,
                  "mul i64 wraps");
        ok(geti(&out[3], 0) == INT64_MIN, "add(INT64_MAX, literal 1) = "
           "INT64_MIN");
    }
    kiln_function_free(f);

    static const int64_t c[] = {INT32_MAX, INT32_MIN, 65536, -7};
    kiln_tensor x = TI(KILN_I32, 1, SHAPE(4), c);
    int64_t w1[4], w2[4];
    for (int i = 0; i < 4; i++) {
        w1[i] = wrap((uint64_t)c[i] + 1, 32);
        w2[i] = wrap((uint64_t)c[i] * (uint64_t)c[i], 32);
    }
    f = run("i32 overflow", "input x: i32[4]\noutput p = add(x, 1)\n"
            "output q = mul(x, x)\noutput w = add(x, cast(x, dtype=i64))",
            &x, out);
    if (f) {
        check_out(&out[0], KILN_I32, 1, SHAPE(4), NULL, w1, 0, 0,
                  "add(i32, 1) wraps in i32");
        check_out(&out[1], KILN_I32, 1, SHAPE(4), NULL, w2, 0, 0,
                  "mul(i32, i32) wraps in i32");
        int64_t w3[4];
        for (int i = 0; i < 4; i++)
            w3[i] = 2 * c[i];
        check_out(&out[2], KILN_I64, 1, SHAPE(4), NULL, w3, 0, 0,
                  "add(i32, i64) computes in i64 (no i32 wrap)");
    }
    kiln_function_free(f);

    /* sum of i32 accumulates in i64 */
    static const int64_t big[] = {INT32_MAX, INT32_MAX, INT32_MAX};
    x = TI(KILN_I32, 1, SHAPE(3), big);
    f = run("sum i32 -> i64", "input x: i32[3]\noutput s = sum(x)", &x, out);
    if (f)
        check_out(&out[0], KILN_I64, 0, NULL, NULL,
                  (const int64_t[]){3LL * INT32_MAX}, 0, 0,
                  "sum of i32 is i64 without overflow");
    kiln_function_free(f);
    scratch_free();
}

/* ---- broadcasting --------------------------------------------------- */

/* NumPy broadcasting of two shapes; a reference for elementwise ops. */
static int bcast_shape(int ra, const int64_t *sa, int rb, const int64_t *sb,
                       int64_t *out)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t a = i - (r - ra) >= 0 ? sa[i - (r - ra)] : 1;
        int64_t b = i - (r - rb) >= 0 ? sb[i - (r - rb)] : 1;
        out[i] = a == 1 ? b : a;
    }
    return r;
}

/* offset into a C-ordered array of shape s (rank rs) of the broadcast
 * position idx (rank r) */
static int64_t bcast_off(int r, const int64_t *idx, int rs, const int64_t *s)
{
    int64_t off = 0;
    for (int i = 0; i < rs; i++) {
        int64_t k = s[i] == 1 ? 0 : idx[i + (r - rs)];
        off = off * s[i] + k;
    }
    return off;
}

static void unravel(int64_t flat, int r, const int64_t *shape, int64_t *idx)
{
    for (int i = r - 1; i >= 0; i--) {
        idx[i] = shape[i] ? flat % shape[i] : 0;
        flat = shape[i] ? flat / shape[i] : 0;
    }
}

static void check_add_bcast(int ra, const int64_t *sa, int rb,
                            const int64_t *sb, const char *body,
                            const char *what)
{
    int64_t so[KILN_MAX_RANK];
    int r = bcast_shape(ra, sa, rb, sb, so);
    int64_t na = numel(ra, sa), nb = numel(rb, sb), no = numel(r, so);
    double *va = smalloc(sizeof(double) * (size_t)(na + 1));
    double *vb = smalloc(sizeof(double) * (size_t)(nb + 1));
    for (int64_t i = 0; i < na; i++)
        va[i] = (double)(i + 1);
    for (int64_t i = 0; i < nb; i++)
        vb[i] = 100.0 * (double)(i + 1);
    double *w = smalloc(sizeof(double) * (size_t)(no + 1));
    for (int64_t i = 0; i < no; i++) {
        int64_t idx[KILN_MAX_RANK];
        unravel(i, r, so, idx);
        w[i] = va[bcast_off(r, idx, ra, sa)] * vb[bcast_off(r, idx, rb, sb)] +
               1;
    }
    kiln_tensor in[2] = {TD(KILN_F64, ra, sa, va), TD(KILN_F64, rb, sb, vb)};
    kiln_tensor out[1];
    kiln_function *f = run(what, body, in, out);
    if (f)
        check_out(&out[0], KILN_F64, r, so, w, NULL, 1e-15, 0, what);
    kiln_function_free(f);
}

static void test_broadcast(void)
{
    static const char *B = "output y = add(mul(a, b), 1)";
    check_add_bcast(2, SHAPE(3, 1), 2, SHAPE(1, 4),
                    S("input a: f64[3, 1]\ninput b: f64[1, 4]\n%s", B),
                    "(3,1) * (1,4) -> (3,4)");
    check_add_bcast(0, NULL, 2, SHAPE(2, 3),
                    S("input a: f64\ninput b: f64[2, 3]\n%s", B),
                    "scalar * (2,3)");
    check_add_bcast(1, SHAPE(4), 2, SHAPE(2, 4),
                    S("input a: f64[4]\ninput b: f64[2, 4]\n%s", B),
                    "(4,) * (2,4)");
    check_add_bcast(3, SHAPE(2, 1, 3), 2, SHAPE(4, 1),
                    S("input a: f64[2, 1, 3]\ninput b: f64[4, 1]\n%s", B),
                    "(2,1,3) * (4,1) -> (2,4,3)");
    check_add_bcast(0, NULL, 0, NULL, S("input a: f64\ninput b: f64\n%s", B),
                    "rank-0 output");
    check_add_bcast(2, SHAPE(0, 3), 1, SHAPE(3),
                    S("input a: f64[0, 3]\ninput b: f64[3]\n%s", B),
                    "(0,3) * (3,) -> (0,3)");
    check_add_bcast(2, SHAPE(0, 3), 2, SHAPE(1, 3),
                    S("input a: f64[0, 3]\ninput b: f64[1, 3]\n%s", B),
                    "(0,3) * (1,3) -> (0,3)");
    check_add_bcast(2, SHAPE(4, 0), 2, SHAPE(4, 1),
                    S("input a: f64[4, 0]\ninput b: f64[4, 1]\n%s", B),
                    "(4,0) * (4,1) -> (4,0)");
    check_add_bcast(2, SHAPE(1, 1), 3, SHAPE(2, 3, 1),
                    S("input a: f64[1, 1]\ninput b: f64[2, 3, 1]\n%s", B),
                    "(1,1) * (2,3,1) -> (2,3,1)");

    /* symbolic dims: one compiled function, several sizes */
    kiln_err err = {0, ""};
    kiln_function *f = compile_body("input a: f64[n]\ninput b: f64[n]\n"
                                    "input c: f64[m, 1]\n"
                                    "output y = add(mul(a, b), 1)\n"
                                    "output z = sub(c, a)", &err);
    ok(f != NULL, "symbolic dims compile %s", f ? "" : err.message);
    static const int64_t sizes[][2] = {{3, 2}, {5, 1}, {0, 4}, {1, 0}, {3, 2},
                                       {7, 3}};
    for (int k = 0; f && k < NELEM(sizes); k++) {
        int64_t n = sizes[k][0], m = sizes[k][1];
        double *a = smalloc(sizeof(double) * (size_t)(n + 1));
        double *b = smalloc(sizeof(double) * (size_t)(n + 1));
        double *c = smalloc(sizeof(double) * (size_t)(m + 1));
        for (int64_t i = 0; i < n; i++) {
            a[i] = (double)i + 0.5;
            b[i] = 3.0 - (double)i;
        }
        for (int64_t i = 0; i < m; i++)
            c[i] = 10.0 * (double)i;
        kiln_tensor in[3] = {TD(KILN_F64, 1, SHAPE(n), a),
                             TD(KILN_F64, 1, SHAPE(n), b),
                             TD(KILN_F64, 2, SHAPE(m, 1), c)};
        double *wy = smalloc(sizeof(double) * (size_t)(n + 1));
        double *wz = smalloc(sizeof(double) * (size_t)(n * m + 1));
        for (int64_t i = 0; i < n; i++)
            wy[i] = a[i] * b[i] + 1;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                wz[i * n + j] = c[i] - a[j];
        kiln_tensor out[2];
        int rc = kiln_function_call(f, in, out, &err);
        ok(rc == 0, "symbolic call n=%lld m=%lld %s", (long long)n,
           (long long)m, rc ? err.message : "");
        if (rc)
            continue;
        check_out(&out[0], KILN_F64, 1, SHAPE(n), wy, NULL, 1e-15, 0,
                  S("f64[n] * f64[n] with n=%lld", (long long)n));
        check_out(&out[1], KILN_F64, 2, SHAPE(m, n), wz, NULL, 1e-15, 0,
                  S("f64[m,1] - f64[n] with m=%lld n=%lld", (long long)m,
                    (long long)n));
    }
    kiln_function_free(f);

    /* symbolic against static: checked at call time */
    f = compile_body("input x: f64[n]\ninput c: f64[3]\n"
                     "output z = add(x, c)", &err);
    ok(f != NULL, "f64[n] + f64[3] compiles %s", f ? "" : err.message);
    if (f) {
        double x[4] = {1, 2, 3, 4}, c[3] = {10, 20, 30};
        kiln_tensor in[2] = {{KILN_F64, 1, {1}, x}, {KILN_F64, 1, {3}, c}};
        kiln_tensor out[1];
        int rc = kiln_function_call(f, in, out, &err);
        ok(rc == 0, "n=1 broadcasts against 3");
        if (!rc)
            check_out(&out[0], KILN_F64, 1, SHAPE(3),
                      (const double[]){11, 21, 31}, NULL, 0, 0,
                      "f64[n=1] + f64[3] values");
        in[0].shape[0] = 4;
        rc = kiln_function_call(f, in, out, &err);
        const char *want = "node 'z' (add, .kg line 5): add: cannot broadcast shapes (4) "
                           "and (3)";
        ok(rc == KILN_ERR_SHAPE && !strcmp(err.message, want),
           "n=4 against 3 is a run-time shape error naming the node");
        if (rc != KILN_ERR_SHAPE || strcmp(err.message, want))
            diag("got %d: %s", rc, err.message);
        in[0].shape[0] = 3;
        rc = kiln_function_call(f, in, out, &err);
        ok(rc == 0 && getd(&out[0], 2) == 33, "n=3 works after the error");
    }
    kiln_function_free(f);

    expect_build_error("input x: f64[3]\ninput y: f64[4]\n"
                       "output z = add(x, y)", KILN_ERR_SHAPE,
                       "t.kg:5:12: add: cannot broadcast shapes (3) and (4)",
                       "add (3) and (4)");
    expect_build_error("input x: f64[2, 3]\ninput y: f64[3, 2]\n"
                       "output z = mul(x, y)", KILN_ERR_SHAPE,
                       "t.kg:5:12: mul: cannot broadcast shapes (2, 3) and "
                       "(3, 2)", "mul (2,3) and (3,2)");
    expect_build_error("input c: bool[2]\ninput x: f64[3]\n"
                       "output z = where(c, x, 0)", KILN_ERR_SHAPE,
                       "t.kg:5:12: where: cannot broadcast shapes (2) and "
                       "(3)", "where (2) and (3)");
    scratch_free();
}

/* ---- reductions ----------------------------------------------------- */

typedef struct red_axes {
    const char *attr;   /* text after the input in the call */
    int naxes;          /* -1: all */
    int axes[3];
    int keepdims;
} red_axes;

static const red_axes AXES[] = {
    {"", -1, {0}, 0},
    {", axis=0", 1, {0}, 0},
    {", axis=-1", 1, {2}, 0},
    {", axis=[0, 2]", 2, {0, 2}, 0},
    {", axis=1, keepdims=true", 1, {1}, 1},
    {", keepdims=true", -1, {0}, 1},
    {", axis=[-1, 0], keepdims=true", 2, {2, 0}, 1},
    {", axis=[0, 1, 2]", 3, {0, 1, 2}, 0},
};

/* Reduce x (rank r, shape s) over mask with op; out has the kept dims. */
static int ref_reduce(const char *op, const double *x, int r,
                      const int64_t *s, const int *mask, int keepdims,
                      double *out, int64_t *oshape)
{
    int orank = 0;
    int64_t red_shape[KILN_MAX_RANK];
    for (int i = 0; i < r; i++) {
        red_shape[i] = mask[i] ? 1 : s[i];
        if (!mask[i] || keepdims)
            oshape[orank++] = mask[i] ? 1 : s[i];
    }
    int64_t no = numel(r, red_shape), nx = numel(r, s);
    for (int64_t o = 0; o < no; o++) {
        int64_t oidx[KILN_MAX_RANK];
        unravel(o, r, red_shape, oidx);
        long double acc = 0, m = -INFINITY;
        int64_t cnt = 0;
        if (!strcmp(op, "prod")) acc = 1;
        if (!strcmp(op, "max")) acc = -INFINITY;
        if (!strcmp(op, "min")) acc = INFINITY;
        /* logsumexp: max first */
        for (int pass = 0; pass < 2; pass++) {
            for (int64_t i = 0; i < nx; i++) {
                int64_t idx[KILN_MAX_RANK];
                unravel(i, r, s, idx);
                int mine = 1;
                for (int d = 0; d < r; d++)
                    if (!mask[d] && idx[d] != oidx[d])
                        mine = 0;
                if (!mine)
                    continue;
                long double v = x[i];
                if (!strcmp(op, "logsumexp")) {
                    if (pass == 0) {
                        if (v > m || isnan(v))
                            m = isnan(m) ? m : v;
                    } else {
                        long double sh = isinf(m) ? 0 : m;
                        acc += expl(v - sh);
                    }
                    continue;
                }
                if (pass == 1)
                    break;
                cnt++;
                if (!strcmp(op, "sum") || !strcmp(op, "mean")) acc += v;
                else if (!strcmp(op, "prod")) acc *= v;
                else if (!strcmp(op, "max"))
                    acc = isnan(acc) || isnan(v) ? NAN : v > acc ? v : acc;
                else
                    acc = isnan(acc) || isnan(v) ? NAN : v < acc ? v : acc;
            }
        }
        if (!strcmp(op, "mean"))
            acc = cnt ? acc / cnt : NAN;
        if (!strcmp(op, "logsumexp"))
            acc = logl(acc) + (isinf(m) ? 0 : m);
        out[o] = (double)acc;
    }
    return orank;
}

static void test_reduce_one(const char *op, kiln_dtype dt, const red_axes *ax)
{
    static const int64_t s[3] = {2, 3, 4};
    double x[24];
    for (int i = 0; i < 24; i++) {
        if (dt == KILN_BOOL)
            x[i] = i % 3 == 0;
        else if (is_int(dt))
            x[i] = (i * 7) % 11 - 5;
        else
            x[i] = ((i * 7) % 11 - 5) * 0.375 + 0.0625;
        if (!strcmp(op, "prod") && !is_float(dt) && dt != KILN_BOOL)
            x[i] = (i * 5) % 7 - 3 ? ((i * 5) % 7 > 3 ? 2 : -1) : 1;
    }
    kiln_tensor xt = TD(dt, 3, s, x);
    double xs[24];
    for (int i = 0; i < 24; i++)
        xs[i] = getd(&xt, i);
    int mask[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        mask[i] = ax->naxes < 0;
    for (int i = 0; i < ax->naxes; i++)
        mask[ax->axes[i]] = 1;
    double want[24];
    int64_t oshape[3];
    int orank = ref_reduce(op, xs, 3, s, mask, ax->keepdims, want, oshape);
    kiln_dtype odt;
    if (!strcmp(op, "sum") || !strcmp(op, "prod"))
        odt = is_float(dt) ? dt : KILN_I64;
    else if (!strcmp(op, "max") || !strcmp(op, "min"))
        odt = dt;
    else
        odt = is_float(dt) ? dt : KILN_F64;
    if (odt == KILN_F32)
        for (int i = 0; i < numel(orank, oshape); i++)
            want[i] = (float)want[i];
    kiln_tensor out[1];
    const char *what = S("%s(%s[2, 3, 4]%s) -> %s%s", op, dn(dt), ax->attr,
                         dn(odt), shape_str(orank, oshape));
    kiln_function *f = run(what, S("input x: %s[2, 3, 4]\n"
                                   "output y = %s(x%s)", dn(dt), op,
                                   ax->attr), &xt, out);
    if (f)
        check_out(&out[0], odt, orank, oshape, want, NULL, 1e-14, 0, what);
    kiln_function_free(f);
}

static void test_reductions(void)
{
    static const char *ops[] = {"sum", "prod", "max", "min", "mean",
                                "logsumexp"};
    for (int k = 0; k < NELEM(ops); k++)
        for (int d = 0; d < 5; d++) {
            if (ALL_DT[d] == KILN_BOOL &&
                (!strcmp(ops[k], "max") || !strcmp(ops[k], "min")))
                continue;
            for (int a = 0; a < NELEM(AXES); a++)
                test_reduce_one(ops[k], ALL_DT[d], &AXES[a]);
        }

    /* NaN propagates through max/min/sum (NumPy), inf through sum */
    {
        static const double v[] = {1, NAN, 3, 2, INFINITY, -1};
        kiln_tensor x = TD(KILN_F64, 2, SHAPE(2, 3), v);
        kiln_tensor out[4];
        kiln_function *f = run("nan in reductions",
                               "input x: f64[2, 3]\n"
                               "output a = max(x, axis=1)\n"
                               "output b = min(x, axis=1)\n"
                               "output c = sum(x, axis=1)\n"
                               "output d = max(x, axis=0)", &x, out);
        if (f) {
            check_out(&out[0], KILN_F64, 1, SHAPE(2),
                      (const double[]){NAN, INFINITY}, NULL, 0, 0,
                      "max with nan is nan");
            check_out(&out[1], KILN_F64, 1, SHAPE(2),
                      (const double[]){NAN, -1}, NULL, 0, 0,
                      "min with nan is nan");
            check_out(&out[2], KILN_F64, 1, SHAPE(2),
                      (const double[]){NAN, INFINITY}, NULL, 0, 0,
                      "sum with nan / inf");
            check_out(&out[3], KILN_F64, 1, SHAPE(3),
                      (const double[]){2, NAN, 3}, NULL, 0, 0,
                      "max over axis 0 with nan");
        }
        kiln_function_free(f);
    }

    /* a long reduction (crosses the interpreter's blocks) */
    {
        enum { N = 3000 };
        double *v = smalloc(sizeof(double) * N);
        long double s = 0;
        double mx = -INFINITY;
        for (int i = 0; i < N; i++) {
            v[i] = sin(i * 0.37) * 10;
            s += v[i];
            mx = v[i] > mx ? v[i] : mx;
        }
        kiln_tensor x = TD(KILN_F32, 2, SHAPE(3, N / 3), v);
        long double s32 = 0;
        for (int i = 0; i < N; i++)
            s32 += getd(&x, i);
        kiln_tensor out[3];
        kiln_function *f = run("long f32 reductions",
                               "input x: f32[3, 1000]\noutput s = sum(x)\n"
                               "output m = mean(x, axis=1)\n"
                               "output p = max(x, axis=0)", &x, out);
        if (f) {
            ok(out[0].dtype == KILN_F32 && out[0].rank == 0 &&
               fabs(getd(&out[0], 0) - (double)s32) < 1e-3,
               "sum of 3000 f32 (got %.9g want %.9g)", getd(&out[0], 0),
               (double)s32);
            double m0 = 0;
            for (int i = 0; i < N / 3; i++)
                m0 += getd(&x, i);
            m0 /= N / 3;
            ok(fabs(getd(&out[1], 0) - m0) < 1e-4,
               "mean of a 1000-element f32 row (got %.9g want %.9g)",
               getd(&out[1], 0), m0);
            int good = out[2].rank == 1 && out[2].shape[0] == N / 3;
            for (int j = 0; good && j < N / 3; j++) {
                double w = fmax(fmax(getd(&x, j), getd(&x, j + N / 3)),
                                getd(&x, j + 2 * N / 3));
                good = getd(&out[2], j) == w;
            }
            ok(good, "max over axis 0 of (3, 1000) f32");
        }
        kiln_function_free(f);
    }

    /* empty reductions */
    {
        kiln_tensor x = TD(KILN_F64, 1, SHAPE(0), NULL);
        kiln_tensor out[6];
        kiln_function *f = run("empty f64 reductions",
                               "input x: f64[0]\noutput s = sum(x)\n"
                               "output p = prod(x)\noutput a = max(x)\n"
                               "output b = min(x)\noutput m = mean(x)\n"
                               "output l = logsumexp(x)", &x, out);
        if (f) {
            static const double w[] = {0, 1, -INFINITY, INFINITY, NAN,
                                       -INFINITY};
            static const char *names[] = {
                "sum of (0,) = 0", "prod of (0,) = 1",
                "max of (0,) = -inf (the identity; NumPy raises)",
                "min of (0,) = +inf (the identity; NumPy raises)",
                "mean of (0,) = nan", "logsumexp of (0,) = -inf"};
            for (int k = 0; k < 6; k++)
                check_out(&out[k], KILN_F64, 0, NULL, &w[k], NULL, 0, 0,
                          names[k]);
        }
        kiln_function_free(f);

        kiln_tensor xi = TD(KILN_I32, 1, SHAPE(0), NULL);
        f = run("empty i32 reductions", "input x: i32[0]\noutput s = sum(x)\n"
                "output p = prod(x)\noutput a = max(x)\noutput b = min(x)\n"
                "output m = mean(x)", &xi, out);
        if (f) {
            check_out(&out[0], KILN_I64, 0, NULL, NULL, (const int64_t[]){0},
                      0, 0, "sum of i32 (0,) = 0 (i64)");
            check_out(&out[1], KILN_I64, 0, NULL, NULL, (const int64_t[]){1},
                      0, 0, "prod of i32 (0,) = 1 (i64)");
            check_out(&out[2], KILN_I32, 0, NULL, NULL,
                      (const int64_t[]){INT32_MIN}, 0, 0,
                      "max of i32 (0,) = INT32_MIN (identity)");
            check_out(&out[3], KILN_I32, 0, NULL, NULL,
                      (const int64_t[]){INT32_MAX}, 0, 0,
                      "min of i32 (0,) = INT32_MAX (identity)");
            check_out(&out[4], KILN_F64, 0, NULL, (const double[]){NAN}, NULL,
                      0, 0, "mean of i32 (0,) = nan (f64)");
        }
        kiln_function_free(f);

        /* empty along one axis only */
        kiln_tensor x2 = TD(KILN_F64, 2, SHAPE(3, 0), NULL);
        f = run("(3, 0) reductions", "input x: f64[3, 0]\n"
                "output s = sum(x, axis=1)\noutput p = prod(x, axis=-1)\n"
                "output a = max(x, axis=1, keepdims=true)\n"
                "output t = sum(x, axis=0)\noutput m = mean(x, axis=1)", &x2,
                out);
        if (f) {
            check_out(&out[0], KILN_F64, 1, SHAPE(3),
                      (const double[]){0, 0, 0}, NULL, 0, 0,
                      "sum over the empty axis of (3, 0)");
            check_out(&out[1], KILN_F64, 1, SHAPE(3),
                      (const double[]){1, 1, 1}, NULL, 0, 0,
                      "prod over the empty axis of (3, 0)");
            check_out(&out[2], KILN_F64, 2, SHAPE(3, 1),
                      (const double[]){-INFINITY, -INFINITY, -INFINITY}, NULL,
                      0, 0, "max over the empty axis, keepdims");
            check_out(&out[3], KILN_F64, 1, SHAPE(0), NULL, NULL, 0, 0,
                      "sum over the full axis of (3, 0) -> (0,)");
            check_out(&out[4], KILN_F64, 1, SHAPE(3),
                      (const double[]){NAN, NAN, NAN}, NULL, 0, 0,
                      "mean over the empty axis is nan");
        }
        kiln_function_free(f);
    }

    /* symbolic dims: sizes change between calls, incl. 0 and bool */
    {
        kiln_err err = {0, ""};
        kiln_function *f = compile_body(
            "input x: f64[n, 3]\ninput b: bool[n]\ninput k: i32[n]\n"
            "output s = sum(x, axis=0)\noutput m = max(x, axis=1)\n"
            "output c = sum(b)\noutput l = logsumexp(b)\n"
            "output q = logsumexp(k)\noutput r = mean(b)", &err);
        ok(f != NULL, "symbolic reductions compile %s", f ? "" : err.message);
        static const int64_t ns[] = {4, 0, 1, 6, 4};
        for (int t = 0; f && t < NELEM(ns); t++) {
            int64_t n = ns[t];
            double *xv = smalloc(sizeof(double) * (size_t)(3 * n + 1));
            double *bv = smalloc(sizeof(double) * (size_t)(n + 1));
            for (int64_t i = 0; i < 3 * n; i++)
                xv[i] = (double)((i * 5) % 7) - 2.5;
            for (int64_t i = 0; i < n; i++)
                bv[i] = i % 2 == 0;
            kiln_tensor in[3] = {TD(KILN_F64, 2, SHAPE(n, 3), xv),
                                 TD(KILN_BOOL, 1, SHAPE(n), bv),
                                 TD(KILN_I32, 1, SHAPE(n), bv)};
            kiln_tensor out[6];
            int rc = kiln_function_call(f, in, out, &err);
            ok(rc == 0, "symbolic reductions n=%lld %s", (long long)n,
               rc ? err.message : "");
            if (rc)
                continue;
            double ws[3] = {0, 0, 0}, *wm = smalloc(sizeof(double) *
                                                    (size_t)(n + 1));
            double cnt = 0;
            long double lse = 0;
            for (int64_t i = 0; i < n; i++) {
                wm[i] = -INFINITY;
                for (int j = 0; j < 3; j++) {
                    ws[j] += xv[i * 3 + j];
                    wm[i] = fmax(wm[i], xv[i * 3 + j]);
                }
                cnt += bv[i];
                lse += expl(bv[i]);
            }
            double wl = n ? (double)logl(lse) : -INFINITY;
            check_out(&out[0], KILN_F64, 1, SHAPE(3), ws, NULL, 1e-15, 0,
                      S("sum(f64[n=%lld, 3], axis=0)", (long long)n));
            check_out(&out[1], KILN_F64, 1, SHAPE(n), wm, NULL, 0, 0,
                      S("max(f64[n=%lld, 3], axis=1)", (long long)n));
            check_out(&out[2], KILN_I64, 0, NULL, &cnt, NULL, 0, 0,
                      S("sum(bool[n=%lld]) counts (i64)", (long long)n));
            check_out(&out[3], KILN_F64, 0, NULL, &wl, NULL, 1e-15, 0,
                      S("logsumexp(bool[n=%lld])", (long long)n));
            check_out(&out[4], KILN_F64, 0, NULL, &wl, NULL, 1e-15, 0,
                      S("logsumexp(i32[n=%lld])", (long long)n));
            double wr = n ? cnt / (double)n : NAN;
            check_out(&out[5], KILN_F64, 0, NULL, &wr, NULL, 1e-15, 0,
                      S("mean(bool[n=%lld]) (f64)", (long long)n));
        }
        kiln_function_free(f);
    }
    scratch_free();
}

static void test_logsumexp(void)
{
    const double L2 = log(2.0);
    static const struct { double a, b; } rows[] = {
        {1000, 1000}, {-1000, -1000}, {-INFINITY, -INFINITY},
        {-INFINITY, 0}, {INFINITY, 1}, {INFINITY, -INFINITY},
        {INFINITY, INFINITY}, {NAN, 1}, {0, 0}, {1e308, 1e308},
        {-745, -745}, {710, 0},
    };
    const double want[] = {1000 + L2, -1000 + L2, -INFINITY, 0, INFINITY,
                           INFINITY, INFINITY, NAN, L2, 1e308,
                           -745 + L2, 710};
    int n = NELEM(rows);
    double *v = smalloc(sizeof(double) * (size_t)(2 * n));
    for (int i = 0; i < n; i++) {
        v[2 * i] = rows[i].a;
        v[2 * i + 1] = rows[i].b;
    }
    double *w = smalloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++)
        w[i] = want[i];
    w[9] = (double)(1e308L + logl(2)); /* 1e308 + log 2 rounds to 1e308 */
    kiln_tensor x = TD(KILN_F64, 2, SHAPE(n, 2), v);
    kiln_tensor out[3];
    kiln_function *f = run("logsumexp rows",
                           S("input x: f64[%d, 2]\n"
                             "output y = logsumexp(x, axis=1)\n"
                             "output k = logsumexp(x, axis=-1, "
                             "keepdims=true)\n"
                             "output t = logsumexp(x, axis=0)", n), &x, out);
    if (f) {
        for (int i = 0; i < n; i++) {
            const char *what = S("logsumexp([%g, %g]) = %.17g", rows[i].a,
                                 rows[i].b, w[i]);
            ok(out[0].dtype == KILN_F64 && out[0].rank == 1 &&
               tap_close(getd(&out[0], i), w[i], 1e-15), "%s", what);
            if (!tap_close(getd(&out[0], i), w[i], 1e-15))
                diag("got %.17g", getd(&out[0], i));
        }
        check_out(&out[1], KILN_F64, 2, SHAPE(n, 1), w, NULL, 1e-15, 0,
                  "logsumexp keepdims=true");
        /* column 0 holds a nan (nan); column 1 an inf and no nan (inf) */
        check_out(&out[2], KILN_F64, 1, SHAPE(2),
                  (const double[]){NAN, INFINITY}, NULL, 0, 0,
                  "logsumexp over axis 0: nan column, inf column");
    }
    kiln_function_free(f);

    /* f32: exp(100) overflows f32; the shift keeps it finite */
    kiln_tensor x32 = TD(KILN_F32, 1, SHAPE(3), (const double[]){100, 100,
                                                                 -INFINITY});
    f = run("logsumexp f32", "input x: f32[3]\noutput y = logsumexp(x)", &x32,
            out);
    if (f)
        check_out(&out[0], KILN_F32, 0, NULL,
                  (const double[]){(float)(100 + log(2.0))}, NULL, 0, 0,
                  "logsumexp f32 [100, 100, -inf] = 100 + log 2 (f32)");
    kiln_function_free(f);

    /* all -inf rows mixed with finite ones, rank 3, axes [0, 2] */
    double v3[2 * 2 * 2] = {-INFINITY, -INFINITY, 1, 2,
                            -INFINITY, -INFINITY, 3, 4};
    kiln_tensor x3 = TD(KILN_F64, 3, SHAPE(2, 2, 2), v3);
    f = run("logsumexp axes [0, 2]", "input x: f64[2, 2, 2]\n"
            "output y = logsumexp(x, axis=[0, 2])", &x3, out);
    if (f)
        check_out(&out[0], KILN_F64, 1, SHAPE(2),
                  (const double[]){-INFINITY, (double)logl(expl(1) + expl(2) +
                                                           expl(3) + expl(4))},
                  NULL, 1e-15, 0, "logsumexp over axes [0, 2]");
    kiln_function_free(f);
    scratch_free();
}

/* ---- shape ops ------------------------------------------------------ */

static double *iota(int64_t n, double scale)
{
    double *v = smalloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)i * scale + 1;
    return v;
}

/* transpose reference: out[perm-ordered idx] */
static void ref_transpose(const double *x, int r, const int64_t *s,
                          const int *perm, double *out, int64_t *os)
{
    for (int i = 0; i < r; i++)
        os[i] = s[perm[i]];
    int64_t n = numel(r, s);
    for (int64_t o = 0; o < n; o++) {
        int64_t oi[KILN_MAX_RANK], xi[KILN_MAX_RANK];
        unravel(o, r, os, oi);
        for (int i = 0; i < r; i++)
            xi[perm[i]] = oi[i];
        int64_t off = 0;
        for (int i = 0; i < r; i++)
            off = off * s[i] + xi[i];
        out[o] = x[off];
    }
}

static void test_shape_ops(void)
{
    kiln_tensor out[4];
    kiln_function *f;
    /* reshape: a copy in C order */
    {
        double *v = iota(24, 1);
        static const struct { const char *shape; int r; int64_t s[4]; } R[] = {
            {"[4, 6]", 2, {4, 6}}, {"[-1]", 1, {24}},
            {"[2, -1, 3]", 3, {2, 4, 3}},
            {"[24, 1]", 2, {24, 1}}, {"[1, 2, 3, 4]", 4, {1, 2, 3, 4}},
        };
        for (int k = 0; k < NELEM(R); k++)
            for (int d = 0; d < 2; d++) {
                kiln_dtype dt = d ? KILN_I32 : KILN_F64;
                kiln_tensor x = TD(dt, 3, SHAPE(2, 3, 4), v);
                const char *what = S("reshape(%s[2, 3, 4], shape=%s)", dn(dt),
                                     R[k].shape);
                f = run(what, S("input x: %s[2, 3, 4]\n"
                                "output y = reshape(x, shape=%s)", dn(dt),
                                R[k].shape), &x, out);
                if (f)
                    check_out(&out[0], dt, R[k].r, R[k].s, v, NULL, 0, 0,
                              what);
                kiln_function_free(f);
            }
        /* symbolic: -1 resolved per call */
        kiln_err err = {0, ""};
        f = compile_body("input x: f64[n, 4]\n"
                         "output y = reshape(x, shape=[-1, 2])\n"
                         "output z = reshape(x, shape=[2, n, 2])", &err);
        ok(f != NULL, "symbolic reshape compiles %s", f ? "" : err.message);
        for (int n = 0; f && n < 4; n += 3) {
            double *xv = iota(4 * n, 0.5);
            kiln_tensor x = TD(KILN_F64, 2, SHAPE(n, 4), xv);
            int rc = kiln_function_call(f, &x, out, &err);
            ok(rc == 0, "symbolic reshape call n=%d %s", n,
               rc ? err.message : "");
            if (!rc) {
                check_out(&out[0], KILN_F64, 2, SHAPE(2 * n, 2), xv, NULL, 0,
                          0, S("reshape(f64[n=%d, 4], shape=[-1, 2])", n));
                check_out(&out[1], KILN_F64, 3, SHAPE(2, n, 2), xv, NULL, 0,
                          0, S("reshape(f64[n=%d, 4], shape=[2, n, 2])", n));
            }
        }
        kiln_function_free(f);
    }

    /* transpose */
    {
        double *v = iota(24, 1);
        static const struct { const char *attr; int perm[3]; } T[] = {
            {"", {2, 1, 0}}, {", axes=[1, 0, 2]", {1, 0, 2}},
            {", axes=[-1, 0, 1]", {2, 0, 1}}, {", axes=[0, 1, 2]", {0, 1, 2}},
            {", axes=[1, 2, 0]", {1, 2, 0}},
        };
        for (int k = 0; k < NELEM(T); k++)
            for (int d = 0; d < 5; d++) {
                kiln_dtype dt = ALL_DT[d];
                double w[24];
                int64_t os[3];
                kiln_tensor x = TD(dt, 3, SHAPE(2, 3, 4), v);
                double xs[24];
                for (int i = 0; i < 24; i++)
                    xs[i] = getd(&x, i);
                ref_transpose(xs, 3, SHAPE(2, 3, 4), T[k].perm, w, os);
                const char *what = S("transpose(%s[2, 3, 4]%s)", dn(dt),
                                     T[k].attr);
                f = run(what, S("input x: %s[2, 3, 4]\n"
                                "output y = transpose(x%s)", dn(dt),
                                T[k].attr), &x, out);
                if (f)
                    check_out(&out[0], dt, 3, os, w, NULL, 0, 0, what);
                kiln_function_free(f);
            }
        /* rank 2 and rank 1 */
        double *m = iota(6, 1);
        kiln_tensor x = TD(KILN_F32, 2, SHAPE(2, 3), m);
        f = run("transpose (2,3)", "input x: f32[2, 3]\n"
                "output y = transpose(x)\noutput z = transpose(x[0])", &x,
                out);
        if (f) {
            check_out(&out[0], KILN_F32, 2, SHAPE(3, 2),
                      (const double[]){1, 4, 2, 5, 3, 6}, NULL, 0, 0,
                      "transpose(f32[2, 3])");
            check_out(&out[1], KILN_F32, 1, SHAPE(3),
                      (const double[]){1, 2, 3}, NULL, 0, 0,
                      "transpose of rank 1 is the identity");
        }
        kiln_function_free(f);
    }

    /* expand_dims, squeeze, broadcast_to */
    {
        double *v = iota(6, 1);
        kiln_tensor x = TD(KILN_F64, 2, SHAPE(2, 3), v);
        f = run("expand_dims", "input x: f64[2, 3]\n"
                "output a = expand_dims(x, axis=0)\n"
                "output b = expand_dims(x, axis=-1)\n"
                "output c = expand_dims(x, axis=[0, 2])\n"
                "output d = expand_dims(x, axis=1)", &x, out);
        if (f) {
            check_out(&out[0], KILN_F64, 3, SHAPE(1, 2, 3), v, NULL, 0, 0,
                      "expand_dims axis=0 -> (1, 2, 3)");
            check_out(&out[1], KILN_F64, 3, SHAPE(2, 3, 1), v, NULL, 0, 0,
                      "expand_dims axis=-1 -> (2, 3, 1)");
            check_out(&out[2], KILN_F64, 4, SHAPE(1, 2, 1, 3), v, NULL, 0, 0,
                      "expand_dims axis=[0, 2] -> (1, 2, 1, 3)");
            check_out(&out[3], KILN_F64, 3, SHAPE(2, 1, 3), v, NULL, 0, 0,
                      "expand_dims axis=1 -> (2, 1, 3)");
        }
        kiln_function_free(f);

        kiln_tensor y = TD(KILN_I64, 4, SHAPE(1, 3, 1, 2), v);
        f = run("squeeze", "input x: i64[1, 3, 1, 2]\n"
                "output a = squeeze(x)\noutput b = squeeze(x, axis=0)\n"
                "output c = squeeze(x, axis=-2)\n"
                "output d = squeeze(x, axis=[0, 2])", &y, out);
        if (f) {
            check_out(&out[0], KILN_I64, 2, SHAPE(3, 2), v, NULL, 0, 0,
                      "squeeze -> (3, 2)");
            check_out(&out[1], KILN_I64, 3, SHAPE(3, 1, 2), v, NULL, 0, 0,
                      "squeeze axis=0 -> (3, 1, 2)");
            check_out(&out[2], KILN_I64, 3, SHAPE(1, 3, 2), v, NULL, 0, 0,
                      "squeeze axis=-2 -> (1, 3, 2)");
            check_out(&out[3], KILN_I64, 2, SHAPE(3, 2), v, NULL, 0, 0,
                      "squeeze axis=[0, 2] -> (3, 2)");
        }
        kiln_function_free(f);

        kiln_tensor z[2] = {TD(KILN_F32, 1, SHAPE(3), v),
                            TD(KILN_BOOL, 2, SHAPE(3, 1),
                               (const double[]){1, 0, 1})};
        f = run("broadcast_to", "input x: f32[3]\ninput b: bool[3, 1]\n"
                "output a = broadcast_to(x, shape=[2, 3])\n"
                "output c = broadcast_to(b, shape=[2, 3, 2])\n"
                "output d = broadcast_to(2.5, shape=[2])\n"
                "output e = broadcast_to(x, shape=[3])", z, out);
        if (f) {
            check_out(&out[0], KILN_F32, 2, SHAPE(2, 3),
                      (const double[]){1, 2, 3, 1, 2, 3}, NULL, 0, 0,
                      "broadcast_to (3,) -> (2, 3)");
            check_out(&out[1], KILN_BOOL, 3, SHAPE(2, 3, 2),
                      (const double[]){1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1},
                      NULL, 0, 0, "broadcast_to bool (3, 1) -> (2, 3, 2)");
            check_out(&out[2], KILN_F64, 1, SHAPE(2),
                      (const double[]){2.5, 2.5}, NULL, 0, 0,
                      "broadcast_to of a float literal -> f64");
            check_out(&out[3], KILN_F32, 1, SHAPE(3),
                      (const double[]){1, 2, 3}, NULL, 0, 0,
                      "broadcast_to the same shape");
        }
        kiln_function_free(f);
    }

    /* alloc, zeros, ones */
    {
        kiln_tensor in[2] = {TD(KILN_F32, 0, NULL, (const double[]){1.5}),
                             TD(KILN_I32, 1, SHAPE(3), (const double[]){1, 2,
                                                                        3})};
        f = run("alloc", "input s: f32\ninput x: i32[n]\n"
                "output a = alloc(0.5, shape=[2, 3])\n"
                "output b = alloc(s, shape=[2])\n"
                "output c = alloc(7, shape=[n])\n"
                "output d = alloc(x, shape=[2, n])", in, out);
        if (f) {
            check_out(&out[0], KILN_F64, 2, SHAPE(2, 3),
                      (const double[]){.5, .5, .5, .5, .5, .5}, NULL, 0, 0,
                      "alloc(0.5, shape=[2, 3]) -> f64");
            check_out(&out[1], KILN_F32, 1, SHAPE(2),
                      (const double[]){1.5, 1.5}, NULL, 0, 0,
                      "alloc(f32 scalar, shape=[2]) -> f32");
            check_out(&out[2], KILN_I64, 1, SHAPE(3),
                      (const double[]){7, 7, 7}, NULL, 0, 0,
                      "alloc(7, shape=[n]) -> i64, n from an input");
            check_out(&out[3], KILN_I32, 2, SHAPE(2, 3),
                      (const double[]){1, 2, 3, 1, 2, 3}, NULL, 0, 0,
                      "alloc(i32[n], shape=[2, n])");
        }
        kiln_function_free(f);

        f = run("zeros/ones", "output a = zeros(shape=[2, 3])\n"
                "output b = zeros(shape=[2], dtype=i32)\n"
                "output c = ones(shape=[3], dtype=bool)\n"
                "output d = ones(shape=[2, 2], dtype=f32)", NULL, out);
        if (f) {
            check_out(&out[0], KILN_F64, 2, SHAPE(2, 3),
                      (const double[]){0, 0, 0, 0, 0, 0}, NULL, 0, 1,
                      "zeros(shape=[2, 3]) is f64 +0");
            check_out(&out[1], KILN_I32, 1, SHAPE(2), (const double[]){0, 0},
                      NULL, 0, 0, "zeros(dtype=i32)");
            check_out(&out[2], KILN_BOOL, 1, SHAPE(3),
                      (const double[]){1, 1, 1}, NULL, 0, 0,
                      "ones(dtype=bool)");
            check_out(&out[3], KILN_F32, 2, SHAPE(2, 2),
                      (const double[]){1, 1, 1, 1}, NULL, 0, 0,
                      "ones(dtype=f32)");
        }
        kiln_function_free(f);

        f = run("zeros/ones rank 0 and empty",
                "output a = ones(shape=[])\n"
                "output b = zeros(shape=[0, 3], dtype=i64)\n"
                "output c = add(ones(shape=[2], dtype=i32), 1)", NULL, out);
        if (f) {
            check_out(&out[0], KILN_F64, 0, NULL, (const double[]){1}, NULL,
                      0, 0, "ones(shape=[]) is a rank-0 1.0");
            check_out(&out[1], KILN_I64, 2, SHAPE(0, 3), NULL, NULL, 0, 0,
                      "zeros(shape=[0, 3])");
            check_out(&out[2], KILN_I32, 1, SHAPE(2), (const double[]){2, 2},
                      NULL, 0, 0, "add(ones(i32), 1) stays i32");
        }
        kiln_function_free(f);
    }
    scratch_free();
}

/* ---- join and stack ------------------------------------------------- */

static void test_join_stack(void)
{
    kiln_tensor out[4];
    kiln_function *f;
    double *a = iota(6, 1), *b = iota(3, 10), *c = iota(4, 100);
    kiln_tensor in[3] = {TD(KILN_F64, 2, SHAPE(2, 3), a),
                         TD(KILN_F64, 2, SHAPE(1, 3), b),
                         TD(KILN_F64, 2, SHAPE(2, 2), c)};
    f = run("join", "input a: f64[2, 3]\ninput b: f64[1, 3]\n"
            "input c: f64[2, 2]\n"
            "output x = join(0, a, b)\noutput y = join(a, c, axis=1)\n"
            "output z = join(-1, c, a, c)\noutput w = join(0, a)", in, out);
    if (f) {
        check_out(&out[0], KILN_F64, 2, SHAPE(3, 3),
                  (const double[]){1, 2, 3, 4, 5, 6, 1, 11, 21}, NULL, 0, 0,
                  "join(0, (2,3), (1,3)) -> (3,3)");
        check_out(&out[1], KILN_F64, 2, SHAPE(2, 5),
                  (const double[]){1, 2, 3, 1, 101, 4, 5, 6, 201, 301},
                  NULL, 0, 0, "join axis=1 (2,3), (2,2) -> (2,5)");
        check_out(&out[2], KILN_F64, 2, SHAPE(2, 7),
                  (const double[]){1, 101, 1, 2, 3, 1, 101,
                                   201, 301, 4, 5, 6, 201, 301}, NULL, 0, 0,
                  "join(-1, c, a, c) -> (2,7)");
        check_out(&out[3], KILN_F64, 2, SHAPE(2, 3), a, NULL, 0, 0,
                  "join of one input is a copy");
    }
    kiln_function_free(f);

    /* mixed dtypes promote */
    kiln_tensor m[4] = {TD(KILN_I32, 1, SHAPE(2), (const double[]){1, -2}),
                        TD(KILN_F32, 1, SHAPE(1), (const double[]){0.5}),
                        TD(KILN_I64, 1, SHAPE(2), (const double[]){7, 8}),
                        TD(KILN_BOOL, 1, SHAPE(2), (const double[]){1, 0})};
    f = run("join mixed dtypes", "input i: i32[2]\ninput s: f32[1]\n"
            "input l: i64[2]\ninput b: bool[2]\n"
            "output x = join(0, i, s)\noutput y = join(0, i, l)\n"
            "output z = join(0, b, i)\noutput w = join(0, b, b)", m, out);
    if (f) {
        check_out(&out[0], KILN_F64, 1, SHAPE(3),
                  (const double[]){1, -2, 0.5}, NULL, 0, 0,
                  "join(i32, f32) -> f64");
        check_out(&out[1], KILN_I64, 1, SHAPE(4),
                  (const double[]){1, -2, 7, 8}, NULL, 0, 0,
                  "join(i32, i64) -> i64");
        check_out(&out[2], KILN_I32, 1, SHAPE(4),
                  (const double[]){1, 0, 1, -2}, NULL, 0, 0,
                  "join(bool, i32) -> i32");
        check_out(&out[3], KILN_BOOL, 1, SHAPE(4),
                  (const double[]){1, 0, 1, 0}, NULL, 0, 0,
                  "join(bool, bool) -> bool");
    }
    kiln_function_free(f);

    /* 1200 inputs, symbolic sizes, one of them empty */
    {
        enum { N = 1200 };
        size_t cap = (size_t)N * 48 + 256;
        char *body = smalloc(cap);
        size_t k = 0;
        for (int i = 0; i < N; i++)
            k += (size_t)snprintf(body + k, cap - k, "input x%d: f64[%s]\n",
                                  i, i % 2 ? "2" : "m");
        k += (size_t)snprintf(body + k, cap - k, "output y = join(0");
        for (int i = 0; i < N; i++)
            k += (size_t)snprintf(body + k, cap - k, ", x%d", i);
        snprintf(body + k, cap - k, ")\noutput s = stack(");
        k += strlen(body + k);
        for (int i = 0; i < N; i += 2)
            k += (size_t)snprintf(body + k, cap - k, "%sx%d", i ? ", " : "",
                                  i);
        snprintf(body + k, cap - k, ", axis=-1)");
        kiln_err err = {0, ""};
        f = compile_body(body, &err);
        ok(f != NULL, "join of %d inputs compiles %s", N, f ? "" :
           err.message);
        for (int m3 = 3; f && m3 >= 0; m3 -= 3) {
            kiln_tensor *xs = smalloc(sizeof(kiln_tensor) * N);
            int64_t total = 0;
            for (int i = 0; i < N; i++) {
                int64_t len = i % 2 ? 2 : m3;
                double v[3] = {i * 10.0, i * 10.0 + 1, i * 10.0 + 2};
                xs[i] = TD(KILN_F64, 1, SHAPE(len), v);
                total += len;
            }
            double *w = smalloc(sizeof(double) * (size_t)(total + 1));
            double *ws = smalloc(sizeof(double) * (size_t)(3 * N / 2 + 1));
            int64_t at = 0;
            for (int i = 0; i < N; i++)
                for (int64_t j = 0; j < (i % 2 ? 2 : m3); j++)
                    w[at++] = i * 10.0 + (double)j;
            for (int j = 0; j < m3; j++)
                for (int i = 0; i < N; i += 2)
                    ws[j * (N / 2) + i / 2] = i * 10.0 + j;
            int rc = kiln_function_call(f, xs, out, &err);
            ok(rc == 0, "join of %d inputs, m=%d: call %s", N, m3,
               rc ? err.message : "");
            if (!rc) {
                check_out(&out[0], KILN_F64, 1, SHAPE(total), w, NULL, 0, 0,
                          S("join of %d inputs, m=%d", N, m3));
                check_out(&out[1], KILN_F64, 2, SHAPE(m3, N / 2), ws, NULL, 0,
                          0, S("stack of %d inputs, axis=-1, m=%d", N / 2,
                               m3));
            }
        }
        kiln_function_free(f);
    }

    /* stack */
    double *p = iota(6, 1), *q = iota(6, 10);
    kiln_tensor st[3] = {TD(KILN_F64, 2, SHAPE(2, 3), p),
                         TD(KILN_F64, 2, SHAPE(2, 3), q),
                         TD(KILN_I32, 0, NULL, (const double[]){5})};
    f = run("stack", "input p: f64[2, 3]\ninput q: f64[2, 3]\ninput s: i32\n"
            "output a = stack(p, q)\noutput b = stack(p, q, axis=-1)\n"
            "output c = stack(p, q, axis=1)\n"
            "output d = stack(s, s, s)", st, out);
    if (f) {
        check_out(&out[0], KILN_F64, 3, SHAPE(2, 2, 3),
                  (const double[]){1, 2, 3, 4, 5, 6, 1, 11, 21, 31, 41, 51},
                  NULL, 0, 0, "stack axis 0 -> (2, 2, 3)");
        check_out(&out[1], KILN_F64, 3, SHAPE(2, 3, 2),
                  (const double[]){1, 1, 2, 11, 3, 21, 4, 31, 5, 41, 6, 51},
                  NULL, 0, 0, "stack axis -1 -> (2, 3, 2)");
        check_out(&out[2], KILN_F64, 3, SHAPE(2, 2, 3),
                  (const double[]){1, 2, 3, 1, 11, 21, 4, 5, 6, 31, 41, 51},
                  NULL, 0, 0, "stack axis 1 -> (2, 2, 3)");
        check_out(&out[3], KILN_I32, 1, SHAPE(3), (const double[]){5, 5, 5},
                  NULL, 0, 0, "stack of scalars -> (3,)");
    }
    kiln_function_free(f);

    kiln_tensor sm[2] = {TD(KILN_I32, 1, SHAPE(2), (const double[]){1, 2}),
                         TD(KILN_F32, 1, SHAPE(2), (const double[]){.5, .25})};
    f = run("stack mixed", "input a: i32[2]\ninput b: f32[2]\n"
            "output y = stack(a, b, axis=1)", sm, out);
    if (f)
        check_out(&out[0], KILN_F64, 2, SHAPE(2, 2),
                  (const double[]){1, .5, 2, .25}, NULL, 0, 0,
                  "stack(i32, f32, axis=1) -> f64 (2, 2)");
    kiln_function_free(f);
    scratch_free();
}

/* ---- indexing ------------------------------------------------------- */

/* A NumPy basic index, parsed here from the text used in the .kg. */
typedef struct ref_index {
    int n;
    int is_int[KILN_MAX_RANK];
    int has[KILN_MAX_RANK][3];
    int64_t v[KILN_MAX_RANK][3];
} ref_index;

static void parse_ref_index(const char *s, ref_index *ix)
{
    memset(ix, 0, sizeof *ix);
    while (*s) {
        int e = ix->n++, part = 0;
        const char *end = strchr(s, ',');
        if (!end)
            end = s + strlen(s);
        ix->is_int[e] = memchr(s, ':', (size_t)(end - s)) == NULL;
        while (s < end && part < 3) {
            while (*s == ' ')
                s++;
            if (*s == '-' || (*s >= '0' && *s <= '9')) {
                char *stop;
                ix->v[e][part] = strtoll(s, &stop, 10);
                ix->has[e][part] = 1;
                s = stop;
            }
            while (*s == ' ')
                s++;
            if (*s != ':')
                break;
            part++;
            s++;
        }
        s = *end ? end + 1 : end;
    }
}

/* Python's slice.indices + length */
static int64_t ref_slice(int64_t n, const int *has, const int64_t *v,
                         int64_t *start, int64_t *step)
{
    int64_t st = has[2] ? v[2] : 1;
    int64_t lo, hi;
    if (st > 0) {
        lo = has[0] ? v[0] : 0;
        hi = has[1] ? v[1] : n;
        if (lo < 0) lo = lo + n < 0 ? 0 : lo + n;
        if (lo > n) lo = n;
        if (hi < 0) hi = hi + n < 0 ? 0 : hi + n;
        if (hi > n) hi = n;
        *start = lo;
        *step = st;
        return hi > lo ? (hi - lo + st - 1) / st : 0;
    }
    lo = has[0] ? v[0] : n - 1;
    hi = has[1] ? v[1] : -1 - n;
    if (lo < 0) lo = lo + n < -1 ? -1 : lo + n;
    if (lo > n - 1) lo = n - 1;
    if (hi < 0) hi = hi + n < -1 ? -1 : hi + n;
    if (hi > n - 1) hi = n - 1;
    *start = lo;
    *step = st;
    return lo > hi ? (lo - hi - st - 1) / (-st) : 0;
}

/* Offsets (into C-ordered x of rank r, shape s) of x[ix], in C order of
 * the result; returns the count, fills the result shape. */
static int64_t ref_basic(const ref_index *ix, int r, const int64_t *s,
                         int64_t *offs, int *orank, int64_t *oshape)
{
    int64_t start[KILN_MAX_RANK], step[KILN_MAX_RANK], len[KILN_MAX_RANK];
    int axis_of[KILN_MAX_RANK];
    int k = 0;
    for (int i = 0; i < r; i++) {
        if (i < ix->n && ix->is_int[i]) {
            start[i] = ix->v[i][0] < 0 ? ix->v[i][0] + s[i] : ix->v[i][0];
            step[i] = 0;
            len[i] = 1;
            continue;
        }
        int full[3] = {0, 0, 0};
        len[i] = i < ix->n ? ref_slice(s[i], ix->has[i], ix->v[i], &start[i],
                                       &step[i])
                           : ref_slice(s[i], full, ix->v[0], &start[i],
                                       &step[i]);
        axis_of[k] = i;
        oshape[k++] = len[i];
    }
    *orank = k;
    int64_t n = numel(k, oshape);
    for (int64_t o = 0; o < n; o++) {
        int64_t oi[KILN_MAX_RANK];
        unravel(o, k, oshape, oi);
        int64_t xi[KILN_MAX_RANK];
        for (int i = 0; i < r; i++)
            xi[i] = start[i];
        for (int j = 0; j < k; j++)
            xi[axis_of[j]] = start[axis_of[j]] + oi[j] * step[axis_of[j]];
        int64_t off = 0;
        for (int i = 0; i < r; i++)
            off = off * s[i] + xi[i];
        offs[o] = off;
    }
    return n;
}

static void test_basic_index(void)
{
    static const char *IX2[] = {
        "1", "-1", "1:3", "::2", "::-1", ":, 0", "1:, ::2", "-3:-1, 4",
        "5:2", "-100:100", "1, 2", "::-2, 1:4:2", "0:0", ":, -1:", ":, ::-3",
        "3:0:-1, 1", "-1, ::-1", "2:"
    };
    static const char *IX3[] = {
        "1", ":, 2", "1:, ::2, -1", "::-1, 1:3, ::-2", "-1, -1, -1",
        ":, :, 1:2", "0:1, ::2", ":, 1", "::2, ::-1, 3:"
    };
    double *v = iota(60, 1);
    for (int r = 2; r <= 3; r++) {
        const char **list = r == 2 ? IX2 : IX3;
        int nl = r == 2 ? NELEM(IX2) : NELEM(IX3);
        const int64_t *s = r == 2 ? SHAPE(4, 5) : SHAPE(3, 4, 5);
        for (int k = 0; k < nl; k++)
            for (int d = 0; d < 5; d += 2) {
                kiln_dtype dt = ALL_DT[d];
                kiln_tensor x = TD(dt, r, s, v);
                void *before = snapshot(&x);
                ref_index ix;
                parse_ref_index(list[k], &ix);
                int64_t offs[60], oshape[KILN_MAX_RANK];
                int orank;
                int64_t n = ref_basic(&ix, r, s, offs, &orank, oshape);
                double w[60];
                for (int64_t i = 0; i < n; i++)
                    w[i] = getd(&x, offs[i]);
                kiln_tensor out[1];
                const char *what = S("%s%s[%s]", dn(dt),
                                     shape_str(r, s), list[k]);
                kiln_function *f = run(what, S("input x: %s[%s]\n"
                                               "output y = x[%s]", dn(dt),
                                               r == 2 ? "4, 5" : "3, 4, 5",
                                               list[k]), &x, out);
                if (f) {
                    check_out(&out[0], dt, orank, oshape, w, NULL, 0, 0,
                              what);
                    if (memcmp(before, x.data, (size_t)numel(r, s) *
                               kiln_dtype_size(dt)))
                        ok(0, "%s: the input was modified", what);
                }
                kiln_function_free(f);
            }
    }

    /* chained indexing and a symbolic dim */
    kiln_err err = {0, ""};
    kiln_function *f = compile_body("input x: f64[n, 3]\n"
                                    "output a = x[1:]\noutput b = x[::-1, 0]\n"
                                    "output c = x[1:][0]\n"
                                    "output d = x[-1]", &err);
    ok(f != NULL, "symbolic subtensor compiles %s", f ? "" : err.message);
    for (int n = 2; f && n <= 5; n += 3) {
        double *xv = iota(3 * n, 1);
        kiln_tensor x = TD(KILN_F64, 2, SHAPE(n, 3), xv);
        kiln_tensor out[4];
        int rc = kiln_function_call(f, &x, out, &err);
        ok(rc == 0, "symbolic subtensor call n=%d %s", n,
           rc ? err.message : "");
        if (rc)
            continue;
        double wb[5];
        for (int i = 0; i < n; i++)
            wb[i] = xv[(n - 1 - i) * 3];
        check_out(&out[0], KILN_F64, 2, SHAPE(n - 1, 3), xv + 3, NULL, 0, 0,
                  S("f64[n=%d, 3][1:]", n));
        check_out(&out[1], KILN_F64, 1, SHAPE(n), wb, NULL, 0, 0,
                  S("f64[n=%d, 3][::-1, 0]", n));
        check_out(&out[2], KILN_F64, 1, SHAPE(3), xv + 3, NULL, 0, 0,
                  S("f64[n=%d, 3][1:][0]", n));
        check_out(&out[3], KILN_F64, 1, SHAPE(3), xv + 3 * (n - 1), NULL, 0,
                  0, S("f64[n=%d, 3][-1]", n));
    }
    if (f) {
        /* x[1:][0] needs n >= 2: a run-time shape error naming the node */
        double one[3] = {1, 2, 3};
        kiln_tensor x = {KILN_F64, 2, {1, 3}, one};
        kiln_tensor out[4];
        int rc = kiln_function_call(f, &x, out, &err);
        const char *want = "node 'c' (subtensor, .kg line 6): subtensor: index 0 is out "
                           "of bounds for axis 0 with size 0";
        ok(rc == KILN_ERR_SHAPE && !strcmp(err.message, want),
           "x[1:][0] with n=1: run-time error naming the node");
        if (rc != KILN_ERR_SHAPE || strcmp(err.message, want))
            diag("got %d: %s", rc, err.message);
    }
    kiln_function_free(f);
    scratch_free();
}

static void test_take(void)
{
    double *v = iota(20, 1);
    kiln_tensor out[4];
    kiln_function *f;
    static const int64_t idx[] = {3, 0, -1, 3, -4};
    for (int it = 0; it < 2; it++) {
        kiln_dtype idt = it ? KILN_I32 : KILN_I64;
        kiln_tensor in[3] = {TD(KILN_F64, 2, SHAPE(4, 5), v),
                             TI(idt, 1, SHAPE(5), idx),
                             TI(idt, 2, SHAPE(2, 2),
                                (const int64_t[]){4, -5, 0, 2})};
        f = run("take", S("input x: f64[4, 5]\ninput i: %s[5]\n"
                          "input j: %s[2, 2]\n"
                          "output a = x[i]\noutput b = take(x, i, axis=1)\n"
                          "output c = x[:, j]\noutput d = x[i, :]",
                          dn(idt), dn(idt)), in, out);
        if (!f)
            continue;
        double wa[25], wb[20], wc[16];
        for (int r = 0; r < 5; r++) {
            int64_t k = idx[r] < 0 ? idx[r] + 4 : idx[r];
            for (int c = 0; c < 5; c++)
                wa[r * 5 + c] = v[k * 5 + c];
        }
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 5; c++) {
                int64_t k = idx[c] < 0 ? idx[c] + 5 : idx[c];
                wb[r * 5 + c] = v[r * 5 + k];
            }
        static const int64_t jj[] = {4, 0, 0, 2};
        for (int r = 0; r < 4; r++)
            for (int q = 0; q < 4; q++)
                wc[r * 4 + q] = v[r * 5 + jj[q]];
        check_out(&out[0], KILN_F64, 2, SHAPE(5, 5), wa, NULL, 0, 0,
                  S("x[idx] with repeated and negative %s indices",
                    dn(idt)));
        check_out(&out[1], KILN_F64, 2, SHAPE(4, 5), wb, NULL, 0, 0,
                  S("take(x, %s idx, axis=1)", dn(idt)));
        check_out(&out[2], KILN_F64, 3, SHAPE(4, 2, 2), wc, NULL, 0, 0,
                  S("x[:, idx] with a (2, 2) %s index", dn(idt)));
        check_out(&out[3], KILN_F64, 2, SHAPE(5, 5), wa, NULL, 0, 0,
                  S("x[idx, :] = x[idx] (%s)", dn(idt)));
        kiln_function_free(f);
    }

    /* rank 3, other dtypes, scalar and empty index */
    {
        double *y = iota(24, 1);
        kiln_tensor in[3] = {TD(KILN_I32, 3, SHAPE(2, 3, 4), y),
                             TI(KILN_I64, 1, SHAPE(2),
                                (const int64_t[]){-1, 1}),
                             TI(KILN_I64, 1, SHAPE(0), NULL)};
        f = run("take rank 3", "input y: i32[2, 3, 4]\ninput i: i64[2]\n"
                "input e: i64[0]\n"
                "output a = y[:, i]\noutput b = take(y, i, axis=-1)\n"
                "output c = take(y, -1, axis=1)\noutput d = y[e]", in, out);
        if (f) {
            double wa[16], wb[12], wc[8];
            for (int p = 0; p < 2; p++)
                for (int q = 0; q < 2; q++)
                    for (int r = 0; r < 4; r++)
                        wa[p * 8 + q * 4 + r] =
                            y[p * 12 + (q ? 1 : 2) * 4 + r];
            for (int p = 0; p < 2; p++)
                for (int q = 0; q < 3; q++)
                    for (int r = 0; r < 2; r++)
                        wb[p * 6 + q * 2 + r] =
                            y[p * 12 + q * 4 + (r ? 1 : 3)];
            for (int p = 0; p < 2; p++)
                for (int r = 0; r < 4; r++)
                    wc[p * 4 + r] = y[p * 12 + 2 * 4 + r];
            check_out(&out[0], KILN_I32, 3, SHAPE(2, 2, 4), wa, NULL, 0, 0,
                      "i32 y[:, idx] (rank 3)");
            check_out(&out[1], KILN_I32, 3, SHAPE(2, 3, 2), wb, NULL, 0, 0,
                      "take(y, idx, axis=-1) (rank 3)");
            check_out(&out[2], KILN_I32, 2, SHAPE(2, 4), wc, NULL, 0, 0,
                      "take(y, -1, axis=1): a scalar index drops the axis");
            check_out(&out[3], KILN_I32, 3, SHAPE(0, 3, 4), NULL, NULL, 0, 0,
                      "y[empty index] -> (0, 3, 4)");
        }
        kiln_function_free(f);
    }

    /* out of range: a run-time error naming the node */
    {
        kiln_err err = {0, ""};
        f = compile_body("input x: f64[4, 5]\ninput i: i64[n]\n"
                         "output z = x[i]\noutput w = take(x, i, axis=1)",
                         &err);
        ok(f != NULL, "take compiles %s", f ? "" : err.message);
        static const struct { int64_t bad; const char *msg; } B[] = {
            {4, "node 'z' (take, .kg line 5): index 4 is out of bounds for "
                "axis 0 with size 4 (kiln's indices are 0-based, 0 to size-1: "
                "for 1-based data, index with sub(i, 1))"},
            {-5, "node 'z' (take, .kg line 5): index -5 is out of bounds "
                 "for axis 0 with size 4"},
        };
        for (int k = 0; f && k < NELEM(B); k++) {
            int64_t iv[3] = {0, B[k].bad, 1};
            kiln_tensor in[2] = {TD(KILN_F64, 2, SHAPE(4, 5), v),
                                 TI(KILN_I64, 1, SHAPE(3), iv)};
            int rc = kiln_function_call(f, in, out, &err);
            ok(rc == KILN_ERR_RUNTIME && !strcmp(err.message, B[k].msg),
               "take index %lld out of range: KILN_ERR_RUNTIME naming the "
               "node", (long long)B[k].bad);
            if (rc != KILN_ERR_RUNTIME || strcmp(err.message, B[k].msg))
                diag("got %d: %s", rc, err.message);
        }
        if (f) {
            int64_t iv[2] = {3, -4};
            kiln_tensor in[2] = {TD(KILN_F64, 2, SHAPE(4, 5), v),
                                 TI(KILN_I64, 1, SHAPE(2), iv)};
            int rc = kiln_function_call(f, in, out, &err);
            ok(rc == 0 && getd(&out[0], 5) == v[0] &&
               getd(&out[1], 1) == v[1], "take works again after the error");
            ((int64_t *)in[1].data)[0] = 4; /* in range for axis 1 only */
            rc = kiln_function_call(f, in, out, &err);
            ok(rc == KILN_ERR_RUNTIME && strstr(err.message, "node 'z'"),
               "4 is out of range for axis 0 (error: %s)", err.message);
        }
        kiln_function_free(f);
    }
    scratch_free();
}

static void test_set_subtensor(void)
{
    double *v = iota(20, 1);
    kiln_tensor out[6];
    kiln_function *f;
    /* basic: set and inc, broadcasting values */
    {
        kiln_tensor in[4] = {TD(KILN_F64, 2, SHAPE(4, 5), v),
                             TD(KILN_F64, 2, SHAPE(2, 5), iota(10, -1)),
                             TD(KILN_F64, 1, SHAPE(5), iota(5, 100)),
                             TD(KILN_I32, 1, SHAPE(2),
                                (const double[]){7, 9})};
        void *before = snapshot(&in[0]);
        f = run("set/inc_subtensor",
                "input x: f64[4, 5]\ninput v: f64[2, 5]\ninput r: f64[5]\n"
                "input k: i32[2]\n"
                "output a = set_subtensor(x[1:3], v)\n"
                "output b = set_subtensor(x[1:3], r)\n"
                "output c = inc_subtensor(x[:, 1], 10)\n"
                "output d = inc_subtensor(x[::2, 1:3], k)\n"
                "output e = set_subtensor(x[-1], 0)\n"
                "output g = inc_subtensor(x[::-1, -1], r[1:])", in, out);
        if (f) {
            double w[6][20];
            for (int t = 0; t < 6; t++)
                memcpy(w[t], v, sizeof(double) * 20);
            for (int i = 1; i < 3; i++)
                for (int j = 0; j < 5; j++) {
                    w[0][i * 5 + j] = getd(&in[1], (i - 1) * 5 + j);
                    w[1][i * 5 + j] = getd(&in[2], j);
                }
            for (int i = 0; i < 4; i++)
                w[2][i * 5 + 1] += 10;
            for (int i = 0; i < 4; i += 2)
                for (int j = 1; j < 3; j++)
                    w[3][i * 5 + j] += j == 1 ? 7 : 9;
            for (int j = 0; j < 5; j++)
                w[4][15 + j] = 0;
            for (int i = 0; i < 4; i++) /* row 3-i gets r[1 + i] */
                w[5][(3 - i) * 5 + 4] += getd(&in[2], 1 + i);
            static const char *names[] = {
                "set_subtensor(x[1:3], (2,5) v)",
                "set_subtensor(x[1:3], (5,) v) broadcasts",
                "inc_subtensor(x[:, 1], 10)",
                "inc_subtensor(x[::2, 1:3], i32 (2,) v) broadcasts and casts",
                "set_subtensor(x[-1], 0)",
                "inc_subtensor(x[::-1, -1], r[1:])"};
            for (int t = 0; t < 6; t++)
                check_out(&out[t], KILN_F64, 2, SHAPE(4, 5), w[t], NULL, 0, 0,
                          names[t]);
            ok(!memcmp(before, in[0].data, sizeof(double) * 20),
               "set/inc_subtensor leave the input tensor unmodified");
        }
        kiln_function_free(f);
    }

    /* dtypes: the value is cast to x's dtype; rank 3; rank-0 region */
    {
        kiln_tensor in[2] = {TD(KILN_I32, 1, SHAPE(4),
                                (const double[]){1, 2, 3, 4}),
                             TD(KILN_F32, 3, SHAPE(2, 3, 4), iota(24, 1))};
        f = run("set_subtensor dtypes",
                "input x: i32[4]\ninput y: f32[2, 3, 4]\n"
                "output a = set_subtensor(x[0:2], 1.7)\n"
                "output b = inc_subtensor(x[1:], -2)\n"
                "output c = inc_subtensor(y[1:, ::2, -1], 0.5)\n"
                "output d = set_subtensor(x[2], 9)\n"
                "output e = inc_subtensor(x[3:1], 5)", in, out);
        if (f) {
            check_out(&out[0], KILN_I32, 1, SHAPE(4),
                      (const double[]){1, 1, 3, 4}, NULL, 0, 0,
                      "set_subtensor(i32[0:2], 1.7) stores 1 (cast to i32)");
            check_out(&out[1], KILN_I32, 1, SHAPE(4),
                      (const double[]){1, 0, 1, 2}, NULL, 0, 0,
                      "inc_subtensor(i32[1:], -2)");
            double w[24];
            for (int i = 0; i < 24; i++)
                w[i] = getd(&in[1], i);
            w[12 + 0 * 4 + 3] += 0.5;
            w[12 + 2 * 4 + 3] += 0.5;
            check_out(&out[2], KILN_F32, 3, SHAPE(2, 3, 4), w, NULL, 0, 0,
                      "inc_subtensor(f32 y[1:, ::2, -1], 0.5)");
            check_out(&out[3], KILN_I32, 1, SHAPE(4),
                      (const double[]){1, 2, 9, 4}, NULL, 0, 0,
                      "set_subtensor(x[2], 9): a rank-0 region");
            check_out(&out[4], KILN_I32, 1, SHAPE(4),
                      (const double[]){1, 2, 3, 4}, NULL, 0, 0,
                      "inc_subtensor on an empty slice changes nothing");
        }
        kiln_function_free(f);
    }

    /* advanced: an index tensor, repeated indices */
    {
        kiln_tensor in[5] = {TD(KILN_F64, 2, SHAPE(4, 5), v),
                             TI(KILN_I64, 1, SHAPE(3),
                                (const int64_t[]){2, 0, 2}),
                             TD(KILN_F64, 2, SHAPE(3, 5), iota(15, 100)),
                             TI(KILN_I32, 1, SHAPE(4),
                                (const int64_t[]){-1, 1, -1, 4}),
                             TD(KILN_F64, 1, SHAPE(4), iota(4, 10))};
        void *before = snapshot(&in[0]);
        f = run("advanced set/inc",
                "input x: f64[4, 5]\ninput i: i64[3]\ninput v: f64[3, 5]\n"
                "input j: i32[4]\ninput w: f64[4]\n"
                "output a = set_subtensor(x[i], v)\n"
                "output b = inc_subtensor(x[i], v)\n"
                "output c = inc_subtensor(x[i], 1)\n"
                "output d = inc_subtensor(x[:, j], w)\n"
                "output e = set_subtensor(x[:, j], w)\n"
                "output g = inc_subtensor(x[:, j], 1.5)", in, out);
        if (f) {
            double W[6][20];
            for (int t = 0; t < 6; t++)
                memcpy(W[t], v, sizeof W[t]);
            static const int ii[] = {2, 0, 2};
            for (int p = 0; p < 3; p++)
                for (int c = 0; c < 5; c++) {
                    double val = getd(&in[2], p * 5 + c);
                    W[0][ii[p] * 5 + c] = val; /* last write wins */
                    W[1][ii[p] * 5 + c] += val;
                    W[2][ii[p] * 5 + c] += 1;
                }
            static const int jj[] = {4, 1, 4, 4};
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < 4; q++) {
                    double val = getd(&in[4], q);
                    W[3][r * 5 + jj[q]] += val;
                    W[4][r * 5 + jj[q]] = val;
                    W[5][r * 5 + jj[q]] += 1.5;
                }
            static const char *names[] = {
                "set_subtensor(x[idx], v): the last repeated index wins",
                "inc_subtensor(x[idx], v): repeated indices sum",
                "inc_subtensor(x[idx], 1): a literal broadcasts",
                "inc_subtensor(x[:, idx], (4,) v), negative and repeated",
                "set_subtensor(x[:, idx], (4,) v)",
                "inc_subtensor(x[:, idx], 1.5)"};
            for (int t = 0; t < 6; t++)
                check_out(&out[t], KILN_F64, 2, SHAPE(4, 5), W[t], NULL,
                          1e-15, 0, names[t]);
            ok(!memcmp(before, in[0].data, sizeof(double) * 20),
               "advanced set/inc leave the input tensor unmodified");
        }
        kiln_function_free(f);

        /* out of range in a scatter */
        kiln_err err = {0, ""};
        f = compile_body("input x: f64[4]\ninput i: i64[2]\n"
                         "output z = inc_subtensor(x[i], 1)", &err);
        if (f) {
            kiln_tensor a[2] = {TD(KILN_F64, 1, SHAPE(4), v),
                                TI(KILN_I64, 1, SHAPE(2),
                                   (const int64_t[]){1, 7})};
            int rc = kiln_function_call(f, a, out, &err);
            const char *want = "node 'z' (advanced_inc_subtensor, .kg line 5): index 7 "
                               "is out of bounds for axis 0 with size 4";
            ok(rc == KILN_ERR_RUNTIME && !strcmp(err.message, want),
               "inc_subtensor with index 7 of 4: run-time error naming the "
               "node");
            if (rc != KILN_ERR_RUNTIME || strcmp(err.message, want))
                diag("got %d: %s", rc, err.message);
        } else {
            ok(0, "scatter out of range compiles: %s", err.message);
        }
        kiln_function_free(f);
    }
    scratch_free();
}

/* ---- dot / matmul --------------------------------------------------- */

static void ref_dot(const double *a, int ra, const int64_t *sa,
                    const double *b, int rb, const int64_t *sb, double *out)
{
    int64_t m = ra == 2 ? sa[0] : 1, k = sa[ra - 1];
    int64_t n = rb == 2 ? sb[1] : 1;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            long double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (long double)a[i * k + p] * b[p * n + j];
            out[i * n + j] = (double)acc;
        }
}

static void test_dot_case(const char *op, kiln_dtype da, int ra,
                          const int64_t *sa, kiln_dtype db, int rb,
                          const int64_t *sb)
{
    int64_t na = numel(ra, sa), nb = numel(rb, sb);
    double *a = smalloc(sizeof(double) * (size_t)(na + 1));
    double *b = smalloc(sizeof(double) * (size_t)(nb + 1));
    for (int64_t i = 0; i < na; i++)
        a[i] = is_float(da) ? ((i * 7) % 13) * 0.25 - 1.5 : (i * 7) % 13 - 6;
    for (int64_t i = 0; i < nb; i++)
        b[i] = is_float(db) ? ((i * 5) % 11) * 0.5 - 2 : (i * 5) % 11 - 5;
    kiln_tensor in[2] = {TD(da, ra, sa, a), TD(db, rb, sb, b)};
    double *as = smalloc(sizeof(double) * (size_t)(na + 1));
    double *bs = smalloc(sizeof(double) * (size_t)(nb + 1));
    for (int64_t i = 0; i < na; i++)
        as[i] = getd(&in[0], i);
    for (int64_t i = 0; i < nb; i++)
        bs[i] = getd(&in[1], i);
    int64_t os[2];
    int orank = 0;
    if (ra == 2)
        os[orank++] = sa[0];
    if (rb == 2)
        os[orank++] = sb[1];
    kiln_dtype p = promote(da, db);
    kiln_dtype odt = is_float(p) ? p : KILN_F64;
    double *w = smalloc(sizeof(double) * (size_t)(numel(orank, os) + 1));
    ref_dot(as, ra, sa, bs, rb, sb, w);
    if (odt == KILN_F32)
        for (int64_t i = 0; i < numel(orank, os); i++)
            w[i] = (float)w[i];
    const char *what = S("%s(%s%s, %s%s) -> %s%s", op, dn(da),
                         shape_str(ra, sa), dn(db), shape_str(rb, sb),
                         dn(odt), shape_str(orank, os));
    char sha[64], shb[64];
    snprintf(sha, sizeof sha, "%s", shape_str(ra, sa));
    snprintf(shb, sizeof shb, "%s", shape_str(rb, sb));
    sha[strlen(sha) - 1] = ']';
    sha[0] = '[';
    shb[strlen(shb) - 1] = ']';
    shb[0] = '[';
    kiln_tensor out[1];
    kiln_function *f = run(what, S("input a: %s%s\ninput b: %s%s\n"
                                   "output y = %s(a, b)", dn(da), sha, dn(db),
                                   shb, op), in, out);
    if (f)
        check_out(&out[0], odt, orank, os, w, NULL, 1e-13, 0, what);
    kiln_function_free(f);
}

static void test_dot(void)
{
    static const char *ops[] = {"dot", "matmul"};
    static const kiln_dtype dts[][2] = {
        {KILN_F64, KILN_F64}, {KILN_F32, KILN_F32}, {KILN_I64, KILN_I32},
        {KILN_F32, KILN_F64}, {KILN_I32, KILN_F32}, {KILN_BOOL, KILN_F64},
    };
    for (int o = 0; o < 2; o++)
        for (int d = 0; d < NELEM(dts); d++) {
            kiln_dtype a = dts[d][0], b = dts[d][1];
            test_dot_case(ops[o], a, 1, SHAPE(3), b, 1, SHAPE(3));
            test_dot_case(ops[o], a, 2, SHAPE(2, 3), b, 1, SHAPE(3));
            test_dot_case(ops[o], a, 1, SHAPE(2), b, 2, SHAPE(2, 3));
            test_dot_case(ops[o], a, 2, SHAPE(2, 3), b, 2, SHAPE(3, 4));
        }
    test_dot_case("dot", KILN_F64, 2, SHAPE(17, 13), KILN_F64, 2,
                  SHAPE(13, 9));
    test_dot_case("dot", KILN_F32, 2, SHAPE(33, 20), KILN_F32, 2,
                  SHAPE(20, 1));
    test_dot_case("dot", KILN_F64, 2, SHAPE(2, 0), KILN_F64, 2,
                  SHAPE(0, 3));
    test_dot_case("dot", KILN_F64, 1, SHAPE(0), KILN_F64, 1, SHAPE(0));
    test_dot_case("matmul", KILN_F64, 2, SHAPE(1, 1), KILN_F64, 2,
                  SHAPE(1, 1));

    /* dot of shape-op results (views turned into copies) */
    {
        double *m = iota(6, 1);
        kiln_tensor x = TD(KILN_F64, 2, SHAPE(2, 3), m);
        kiln_tensor out[2];
        kiln_function *f = run("dot of transposes",
                               "input x: f64[2, 3]\n"
                               "output y = dot(transpose(x), x)\n"
                               "output z = dot(x[:, ::-1], x[0])", &x, out);
        if (f) {
            double wy[9], wz[2];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    wy[i * 3 + j] = m[i] * m[j] + m[3 + i] * m[3 + j];
            for (int i = 0; i < 2; i++)
                wz[i] = m[i * 3 + 2] * m[0] + m[i * 3 + 1] * m[1] +
                        m[i * 3] * m[2];
            check_out(&out[0], KILN_F64, 2, SHAPE(3, 3), wy, NULL, 1e-15, 0,
                      "dot(x.T, x)");
            check_out(&out[1], KILN_F64, 1, SHAPE(2), wz, NULL, 1e-15, 0,
                      "dot(x[:, ::-1], x[0])");
        }
        kiln_function_free(f);
    }

    /* symbolic inner dims: checked at call time */
    {
        kiln_err err = {0, ""};
        kiln_function *f = compile_body("input a: f64[2, k]\ninput b: f64[m]\n"
                                        "output z = dot(a, b)", &err);
        ok(f != NULL, "dot with symbolic dims compiles %s",
           f ? "" : err.message);
        if (f) {
            double a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[4] = {1, 1, 1, 1};
            kiln_tensor in[2] = {{KILN_F64, 2, {2, 4}, a},
                                 {KILN_F64, 1, {4}, b}};
            kiln_tensor out[1];
            int rc = kiln_function_call(f, in, out, &err);
            ok(rc == 0 && getd(&out[0], 0) == 10 && getd(&out[0], 1) == 26,
               "dot (2, k=4) . (m=4)");
            in[0].shape[1] = 3;
            rc = kiln_function_call(f, in, out, &err);
            const char *want = "node 'z' (dot, .kg line 5): dot: shapes (2, 3) and (4) "
                               "are not aligned (3 != 4)";
            ok(rc == KILN_ERR_SHAPE && !strcmp(err.message, want),
               "dot (2, 3) . (4): run-time shape error naming the node");
            if (rc != KILN_ERR_SHAPE || strcmp(err.message, want))
                diag("got %d: %s", rc, err.message);
        }
        kiln_function_free(f);
    }

    expect_build_error("input a: f64[2, 3]\ninput b: f64[4]\n"
                       "output z = dot(a, b)", KILN_ERR_SHAPE,
                       "t.kg:5:12: dot: shapes (2, 3) and (4) are not aligned "
                       "(3 != 4)", "dot misaligned (2,3).(4)");
    expect_build_error("input a: f64[2, 3]\ninput b: f64[2, 3]\n"
                       "output z = matmul(a, b)", KILN_ERR_SHAPE,
                       "t.kg:5:12: matmul: shapes (2, 3) and (2, 3) are not "
                       "aligned (3 != 2)", "matmul misaligned (2,3).(2,3)");
    expect_build_error("input a: f64[3]\ninput b: f64\n"
                       "output z = dot(a, b)", KILN_ERR_SHAPE,
                       "t.kg:5:12: dot: operands must be 1-D or 2-D, got "
                       "shapes (3) and ()", "dot with a scalar");
    scratch_free();
}

/* ---- build-time errors (exact messages) ----------------------------- */

static void test_build_errors(void)
{
    static const struct {
        const char *body;
        int code;
        const char *msg;
    } E[] = {
        {"input x: f64[3]\noutput z = foo(x)", KILN_ERR_TYPE,
         "t.kg:4:12: unknown op 'foo'"},
        {"input x: f64[3]\noutput z = exp(x, x)", KILN_ERR_TYPE,
         "t.kg:4:12: exp: expected 1 input, got 2"},
        {"input x: f64[3]\noutput z = add(x)", KILN_ERR_TYPE,
         "t.kg:4:12: add: expected at least 2 inputs, got 1"},
        {"input x: f64[3]\noutput z = where(x, x)", KILN_ERR_TYPE,
         "t.kg:4:12: where: expected 3 inputs, got 2"},
        {"input x: f64[3]\noutput z = zeros(x, shape=[2])", KILN_ERR_TYPE,
         "t.kg:4:12: zeros: expected 0 inputs, got 1"},
        {"input x: f64[3]\noutput z = take(x)", KILN_ERR_TYPE,
         "t.kg:4:12: take: expected 2 inputs, got 1"},
        {"input x: f64[3]\noutput z = sum(x, axs=0)", KILN_ERR_TYPE,
         "t.kg:4:12: sum: unknown attribute 'axs'"},
        {"input x: f64[3]\noutput z = add(x, x, axis=0)", KILN_ERR_TYPE,
         "t.kg:4:12: add: unknown attribute 'axis'"},
        {"input x: f64[3]\noutput z = cast(x)", KILN_ERR_TYPE,
         "t.kg:4:12: cast: attribute 'dtype' is required"},
        {"input x: f64[3]\noutput z = sum(x, axis=1)", KILN_ERR_SHAPE,
         "t.kg:4:12: sum: axis 1 is out of range for rank 1"},
        {"input x: f64[2, 3]\noutput z = max(x, axis=-3)", KILN_ERR_SHAPE,
         "t.kg:4:12: max: axis -3 is out of range for rank 2"},
        {"input x: f64[2, 3]\noutput z = sum(x, axis=[0, -2])", KILN_ERR_SHAPE,
         "t.kg:4:12: sum: axis 0 given twice"},
        {"input x: f64[2, 3]\noutput z = transpose(x, axes=[0, 0])",
         KILN_ERR_SHAPE, "t.kg:4:12: transpose: axes is not a permutation"},
        {"input x: f64[2, 3]\noutput z = transpose(x, axes=[1])",
         KILN_ERR_SHAPE,
         "t.kg:4:12: transpose: axes has 1 entries for a tensor of rank 2"},
        {"input x: f64[2, 3]\noutput z = expand_dims(x, axis=3)",
         KILN_ERR_SHAPE,
         "t.kg:4:12: expand_dims: axis 3 is out of range for rank 3"},
        {"input x: f64[2, 3]\noutput z = squeeze(x, axis=0)", KILN_ERR_SHAPE,
         "t.kg:4:12: squeeze: axis 0 of shape (2, 3) does not have size 1"},
        {"input x: f64[2, 3]\noutput z = join(2, x, x)", KILN_ERR_SHAPE,
         "t.kg:4:12: join: axis 2 is out of range for rank 2"},
        {"input x: f64[2, 3]\noutput z = stack(x, x, axis=3)", KILN_ERR_SHAPE,
         "t.kg:4:12: stack: axis 3 is out of range for rank 3"},
        {"input x: f64[3]\noutput z = reshape(x, shape=[2, 2])",
         KILN_ERR_SHAPE, "t.kg:4:12: reshape: cannot reshape (3) into (2, 2)"},
        {"input x: f64[2, 3]\noutput z = reshape(x, shape=[4, -1])",
         KILN_ERR_SHAPE,
         "t.kg:4:12: reshape: cannot reshape (2, 3) into (4, -1)"},
        {"input x: f64[2, 3]\noutput z = reshape(x, shape=[-1, -1])",
         KILN_ERR_SHAPE, "t.kg:4:12: reshape: only one dim may be -1"},
        {"input x: f64[3]\ninput y: f64[2, 2]\noutput z = join(0, x, y)",
         KILN_ERR_SHAPE, "t.kg:5:12: join: input 2 has shape (2, 2) but "
                         "input 1 has shape (3) (ranks differ)"},
        {"input x: f64[3, 2]\ninput y: f64[2, 3]\noutput z = join(0, x, y)",
         KILN_ERR_SHAPE, "t.kg:5:12: join: input 2 has shape (2, 3) but "
                         "input 1 has shape (3, 2) (only axis 0 may differ)"},
        {"input x: f64[3]\noutput z = join(x)", KILN_ERR_TYPE,
         "t.kg:4:12: join: attribute 'axis' is required"},
        {"input x: f64[2]\ninput y: f64[3]\noutput z = stack(x, y)",
         KILN_ERR_SHAPE, "t.kg:5:12: stack: input 2 has shape (3) but input 1 "
                         "has shape (2) (all must be equal)"},
        {"input x: f64[3]\ninput i: f64[2]\noutput z = x[i]", KILN_ERR_TYPE,
         "t.kg:5:13: take: indices must be i64 or i32, got f64"},
        {"input x: f64[3]\ninput i: bool[2]\noutput z = take(x, i)",
         KILN_ERR_TYPE,
         "t.kg:5:12: take: indices must be i64 or i32, got bool"},
        {"input x: bool[3]\noutput z = max(x)", KILN_ERR_TYPE,
         "t.kg:4:12: max: bool input is not supported; cast to i64 first"},
        {"input x: bool[3]\noutput z = min(x, axis=0)", KILN_ERR_TYPE,
         "t.kg:4:12: min: bool input is not supported; cast to i64 first"},
        {"input x: f64[4]\noutput z = x[4]", KILN_ERR_SHAPE,
         "t.kg:4:13: subtensor: index 4 is out of bounds for axis 0 with "
         "size 4"},
        {"input x: f64[4]\noutput z = x[1, 2]", KILN_ERR_SHAPE,
         "t.kg:4:13: subtensor: too many indices (2) for a tensor of rank 1"},
        {"input x: f64[4]\noutput z = x[::0]", KILN_ERR_SHAPE,
         "t.kg:4:13: subtensor: slice step cannot be zero"},
        {"input x: f64[4, 5]\ninput v: f64[3]\n"
         "output z = set_subtensor(x[1:3], v)", KILN_ERR_SHAPE,
         "t.kg:5:12: set_subtensor: value of shape (3) does not broadcast to "
         "(2, 5)"},
        {"input x: f64[4]\ninput i: i64[2]\ninput v: f64[3]\n"
         "output z = inc_subtensor(x[i], v)", KILN_ERR_SHAPE,
         "t.kg:6:12: advanced_inc_subtensor: value of shape (3) does not "
         "broadcast to (2)"},
        {"input x: f64[3]\noutput z = broadcast_to(x, shape=[3, 2])",
         KILN_ERR_SHAPE,
         "t.kg:4:12: broadcast_to: input of shape (3) does not broadcast to "
         "(3, 2)"},
        /* a result whose bytes do not fit in int64 is refused when the
         * node is added (3e18 f64 is 2.4e19 bytes), not at the call */
        {"input x: f64[1]\n"
         "output z = broadcast_to(x, shape=[3000000000000000000])",
         KILN_ERR_SHAPE,
         "t.kg:4:12: broadcast_to: input of shape (1) to shape "
         "(3000000000000000000): the result would have 3000000000000000000 "
         "elements of f64 (more than 2^63 - 1 bytes)"},
        {"input x: f32[3]\noutput z = broadcast_to(x, shape=[3000000000, "
         "3000000000, 3])", KILN_ERR_SHAPE,
         "t.kg:4:12: broadcast_to: input of shape (3) to shape (3000000000, "
         "3000000000, 3): the result would have 3000000000 x 3000000000 x 3 "
         "elements of f32 (more than 2^63 - 1 bytes)"},
        {"input x: f64[3]\noutput z = alloc(x, shape=[2305843009213693952, "
         "3])", KILN_ERR_SHAPE,
         "t.kg:4:12: alloc: input of shape (3) to shape (2305843009213693952, "
         "3): the result would have 2305843009213693952 x 3 elements of f64 "
         "(more than 2^63 - 1 bytes)"},
        {"output z = zeros(shape=[2305843009213693952], dtype=f32)",
         KILN_ERR_SHAPE,
         "t.kg:3:12: zeros: shape (2305843009213693952): the result would "
         "have 2305843009213693952 elements of f32 (more than 2^63 - 1 "
         "bytes)"},
        {"input x: f64[3]\noutput z = zeros(shape=[2], dtype=f16)",
         KILN_ERR_PARSE,
         "t.kg:4:35: attribute 'dtype': expected a number, true, false, a "
         "dtype, a list or a string, found 'f16'"},
        {"input x: f64[3]\noutput z = add(x, y)", KILN_ERR_NAME,
         "t.kg:4:19: undefined name 'y'"},
    };
    for (int k = 0; k < NELEM(E); k++)
        expect_build_error(E[k].body, E[k].code, E[k].msg, E[k].msg + 11);
    /* the largest sizes are accepted when the node is added: 2^60 - 1 f64
     * (8 bytes each: < 2^63), 2^62 bool; a symbolic dim (maybe 0) leaves
     * the size to the run-time check */
    static const char *const fits[] = {
        "input x: f64[1]\n"
        "output z = broadcast_to(x, shape=[1152921504606846975])",
        "output z = zeros(shape=[4611686018427387904], dtype=bool)",
        "input x: f64[n]\n"
        "output z = broadcast_to(x, shape=[3000000000000000000, n])",
    };
    for (int k = 0; k < NELEM(fits); k++) {
        kiln_err err = {0, ""};
        kiln_graph *g = parse_body(fits[k], &err);
        ok(g != NULL, "builds: %s%s%s", strchr(fits[k], '=') + 2,
           g ? "" : ": ", g ? "" : err.message);
        kiln_graph_free(g);
    }
}

/* ---- programs longer than one interpreter block, views, aliasing ----- */

static void test_misc(void)
{
    kiln_tensor out[6];
    kiln_function *f;
    /* casts and constants in one program over 1000 elements (the
     * interpreter runs blocks of 256; constants must survive them) */
    {
        enum { N = 1000 };
        double *v = smalloc(sizeof(double) * N);
        for (int i = 0; i < N; i++)
            v[i] = (i * 37) % 201 - 100;
        kiln_tensor in[2] = {TD(KILN_I32, 1, SHAPE(N), v),
                             TD(KILN_F32, 1, SHAPE(N), v)};
        f = run("long programs", S("input x: i32[%d]\ninput y: f32[%d]\n"
                "output a = add(mul(x, 0.5), 1)\n"
                "output b = where(gt(y, 0), y, 0.25)\n"
                "output c = logsumexp(stack(x, mul(x, 2), "
                "alloc(3, shape=[%d])), axis=0)\n"
                "output d = sub(sigmoid(x), "
                "true_div(1, add(exp(neg(x)), 1)))\n"
                "output e = maximum(minimum(x, 50), -50.5)\n"
                "output g = mul(cast(x, dtype=bool), 3)", N, N, N), in, out);
        if (f) {
            double *w[6];
            for (int k = 0; k < 6; k++)
                w[k] = smalloc(sizeof(double) * N);
            for (int i = 0; i < N; i++) {
                double x = v[i];
                w[0][i] = x * 0.5 + 1;
                w[1][i] = x > 0 ? (float)x : 0.25f;
                long double m = fmax(fmax(x, 2 * x), 3);
                w[2][i] = (double)(m + logl(expl(x - m) + expl(2 * x - m) +
                                            expl(3 - m)));
                w[3][i] = ref_sigmoid(x) - 1 / (exp(-x) + 1);
                w[4][i] = x < 50 ? (x > -50.5 ? x : -50.5) : 50;
                w[5][i] = x != 0 ? 3 : 0;
            }
            check_out(&out[0], KILN_F64, 1, SHAPE(N), w[0], NULL, 0, 0,
                      "add(mul(i32, 0.5), 1) over 1000 elements");
            check_out(&out[1], KILN_F32, 1, SHAPE(N), w[1], NULL, 0, 0,
                      "where(gt(f32, 0), f32, 0.25) over 1000 elements");
            check_out(&out[2], KILN_F64, 1, SHAPE(N), w[2], NULL, 1e-14, 0,
                      "logsumexp(stack(i32, 2 i32, alloc(3)), axis=0)");
            int good = out[3].dtype == KILN_F64;
            for (int i = 0; good && i < N; i++)
                good = fabs(getd(&out[3], i) - w[3][i]) < 1e-15;
            ok(good, "sigmoid(i32) agrees with 1/(exp(-x)+1) over 1000");
            check_out(&out[4], KILN_F64, 1, SHAPE(N), w[4], NULL, 0, 0,
                      "maximum(minimum(i32, 50), -50.5) -> f64");
            check_out(&out[5], KILN_I64, 1, SHAPE(N), w[5], NULL, 0, 0,
                      "mul(cast(i32, dtype=bool), 3) -> i64");
        }
        kiln_function_free(f);
    }

    /* elementwise ops over strided and reversed views */
    {
        double *v = iota(12, 1);
        kiln_tensor x = TD(KILN_F64, 2, SHAPE(3, 4), v);
        f = run("views", "input x: f64[3, 4]\n"
                "output a = add(x[::2], 1)\n"
                "output b = mul(transpose(x), x[0, :3])\n"
                "output c = exp(x[::-1, ::-1])\n"
                "output d = sum(transpose(x)[1:], axis=1)\n"
                "output e = mul(x, x)\n"
                "output g = sub(x[:, 1:], x[:, :-1])", &x, out);
        if (f) {
            double wa[8], wb[12], wc[12], wd[3], we[12], wg[9];
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < 4; c++)
                    wa[r * 4 + c] = v[r * 8 + c] + 1;
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++)
                    wb[i * 3 + j] = v[j * 4 + i] * v[j];
            for (int i = 0; i < 12; i++) {
                wc[i] = exp(v[11 - i]);
                we[i] = v[i] * v[i];
            }
            for (int i = 1; i < 4; i++)
                wd[i - 1] = v[i] + v[4 + i] + v[8 + i];
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 3; c++)
                    wg[r * 3 + c] = v[r * 4 + c + 1] - v[r * 4 + c];
            check_out(&out[0], KILN_F64, 2, SHAPE(2, 4), wa, NULL, 0, 0,
                      "add(x[::2], 1)");
            check_out(&out[1], KILN_F64, 2, SHAPE(4, 3), wb, NULL, 0, 0,
                      "mul(transpose(x), x[0, :3])");
            check_out(&out[2], KILN_F64, 2, SHAPE(3, 4), wc, NULL, 1e-15, 0,
                      "exp(x[::-1, ::-1])");
            check_out(&out[3], KILN_F64, 1, SHAPE(3), wd, NULL, 0, 0,
                      "sum(transpose(x)[1:], axis=1)");
            check_out(&out[4], KILN_F64, 2, SHAPE(3, 4), we, NULL, 0, 0,
                      "mul(x, x)");
            check_out(&out[5], KILN_F64, 2, SHAPE(3, 3), wg, NULL, 0, 0,
                      "sub(x[:, 1:], x[:, :-1])");
        }
        kiln_function_free(f);
    }

    /* set/inc_subtensor and scatter with symbolic sizes */
    {
        kiln_err err = {0, ""};
        f = compile_body("input x: f64[n]\ninput i: i64[k]\ninput v: f64[k]\n"
                         "output a = set_subtensor(x[1:], 0)\n"
                         "output b = inc_subtensor(x[::-2], 10)\n"
                         "output c = inc_subtensor(x[i], v)\n"
                         "output d = set_subtensor(x[i], 7)", &err);
        ok(f != NULL, "symbolic set/inc compile %s", f ? "" : err.message);
        static const int ns[] = {5, 1, 0, 8};
        for (int t = 0; f && t < NELEM(ns); t++) {
            int n = ns[t], k = n ? 3 : 0;
            double *xv = iota(n, 1);
            int64_t iv[3] = {n - 1, 0, n - 1};
            double vv[3] = {0.5, 0.25, 2};
            kiln_tensor in[3] = {TD(KILN_F64, 1, SHAPE(n), xv),
                                 TI(KILN_I64, 1, SHAPE(k), iv),
                                 TD(KILN_F64, 1, SHAPE(k), vv)};
            int rc = kiln_function_call(f, in, out, &err);
            ok(rc == 0, "symbolic set/inc call n=%d %s", n,
               rc ? err.message : "");
            if (rc)
                continue;
            double wa[8], wb[8], wc[8], wd[8];
            for (int j = 0; j < n; j++) {
                wa[j] = j ? 0 : xv[j];
                wb[j] = xv[j] + ((n - 1 - j) % 2 == 0 ? 10 : 0);
                wc[j] = wd[j] = xv[j];
            }
            for (int q = 0; q < k; q++) {
                wc[iv[q]] += vv[q];
                wd[iv[q]] = 7;
            }
            check_out(&out[0], KILN_F64, 1, SHAPE(n), wa, NULL, 0, 0,
                      S("set_subtensor(f64[n=%d][1:], 0)", n));
            check_out(&out[1], KILN_F64, 1, SHAPE(n), wb, NULL, 0, 0,
                      S("inc_subtensor(f64[n=%d][::-2], 10)", n));
            check_out(&out[2], KILN_F64, 1, SHAPE(n), wc, NULL, 0, 0,
                      S("inc_subtensor(f64[n=%d][idx], v), repeated idx", n));
            check_out(&out[3], KILN_F64, 1, SHAPE(n), wd, NULL, 0, 0,
                      S("set_subtensor(f64[n=%d][idx], 7)", n));
        }
        kiln_function_free(f);
    }

    /* outputs that are inputs, literals, or the same node twice */
    {
        kiln_tensor x = TD(KILN_I32, 1, SHAPE(3), (const double[]){4, 5, 6});
        f = run("aliased outputs", "input x: i32[3]\noutput a = x\n"
                "output b = 2.5\noutput c = add(x, 1)\noutput d = c\n"
                "output e = true", &x, out);
        if (f) {
            check_out(&out[0], KILN_I32, 1, SHAPE(3),
                      (const double[]){4, 5, 6}, NULL, 0, 0,
                      "an input as an output");
            check_out(&out[1], KILN_F64, 0, NULL, (const double[]){2.5}, NULL,
                      0, 0, "a float literal as an output (f64)");
            check_out(&out[2], KILN_I32, 1, SHAPE(3),
                      (const double[]){5, 6, 7}, NULL, 0, 0,
                      "add(x, 1) as an output");
            check_out(&out[3], KILN_I32, 1, SHAPE(3),
                      (const double[]){5, 6, 7}, NULL, 0, 0,
                      "the same node as a second output");
            check_out(&out[4], KILN_BOOL, 0, NULL, (const double[]){1}, NULL,
                      0, 0, "a bool literal as an output");
        }
        kiln_function_free(f);
    }
    scratch_free();
}

/* ---- hostile dims, slice bounds and sizes --------------------------- */

/* A `shape=` attribute built through the C API with one dim d. */
static kiln_value shape_op(kiln_graph *g, const char *op, kiln_value x,
                           int n, const int64_t *dims, kiln_err *err)
{
    kiln_attr a;
    memset(&a, 0, sizeof a);
    a.key = "shape";
    a.kind = KILN_ATTR_INTS;
    a.n = n;
    a.ints = dims;
    return kiln_graph_op(g, op, x >= 0 ? 1 : 0, x >= 0 ? &x : NULL, &a, 1,
                         err);
}

static void expect_shape_op_error(kiln_graph *g, const char *op, kiln_value x,
                                  int n, const int64_t *dims, const char *msg)
{
    kiln_err err = {0, ""};
    kiln_value v = shape_op(g, op, x, n, dims, &err);
    int good = v < 0 && err.code == KILN_ERR_SHAPE &&
               strcmp(err.message, msg) == 0;
    ok(good, "builder refuses: %s", msg);
    if (!good)
        diag("got value %d, code %d: %s", (int)v, err.code, err.message);
}

static void test_hostile_shapes(void)
{
    /* shape= dims: >= 0, -1 (reshape only) or a symbol of this graph; a
     * symbol id is -2-k, so any other negative number used to reach past
     * g->symbols (zeros(shape=[-5]) ran as 33 zeros, ASan: overflow) */
    {
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_graph_new("g", &err);
        kiln_value x = kiln_graph_input(g, "x", KILN_F64, 1, SHAPE(6), &err);
        expect_shape_op_error(g, "zeros", -1, 1, SHAPE(-5),
                              "zeros: bad dim -5 in 'shape'");
        expect_shape_op_error(g, "zeros", -1, 1, SHAPE(-2),
                              "zeros: bad dim -2 in 'shape'");
        expect_shape_op_error(g, "ones", -1, 2, SHAPE(3, INT64_MIN),
                              "ones: bad dim -9223372036854775808 in "
                              "'shape'");
        expect_shape_op_error(g, "zeros", -1, 1, SHAPE(-1),
                              "zeros: bad dim -1 in 'shape'");
        expect_shape_op_error(g, "reshape", x, 2, SHAPE(-2, -3),
                              "reshape: bad dim -2 in 'shape'");
        expect_shape_op_error(g, "broadcast_to", x, 2, SHAPE(-7, 6),
                              "broadcast_to: bad dim -7 in 'shape'");
        int64_t n = kiln_graph_symbol(g, "n");
        kiln_value z = shape_op(g, "zeros", -1, 2, (int64_t[]){n, 2}, &err);
        ok(z >= 0 && n == -2, "a symbol of the graph is a good dim (%s)",
           z >= 0 ? "built" : err.message);
        expect_shape_op_error(g, "reshape", x, 2, SHAPE(-2, -3),
                              "reshape: bad dim -3 in 'shape'");
        kiln_value r = shape_op(g, "reshape", x, 2, SHAPE(-1, 3), &err);
        ok(r >= 0, "reshape keeps -1 (%s)", r >= 0 ? "built" : err.message);
        kiln_graph_free(g);
    }

    /* slices whose bounds or step are at the ends of int64: NumPy's
     * clamping, no signed overflow (UBSan), at build and at call time */
    {
        static const struct { const char *ix; int n; double w[3]; } SL[] = {
            {"::-9223372036854775808", 1, {3}},
            {"0:3:9223372036854775807", 1, {1}},
            {"::9223372036854775807", 1, {1}},
            {"9223372036854775807:-9223372036854775808:"
             "-9223372036854775808", 1, {3}},
            {"-9223372036854775808:9223372036854775807:"
             "9223372036854775807", 1, {1}},
            {"-9223372036854775808:9223372036854775807:-1", 0, {0}},
            {"9223372036854775807::-2", 2, {3, 1}},
            {"-9223372036854775808::-9223372036854775807", 0, {0}},
            {"1:9223372036854775807:9223372036854775806", 1, {2}},
        };
        double xv[3] = {1, 2, 3};
        for (int k = 0; k < NELEM(SL); k++)
            for (int sym = 0; sym < 2; sym++) {
                kiln_tensor x = TD(KILN_F64, 1, SHAPE(3), xv), out[1];
                const char *what = S("x[%s] (x: f64[%s])", SL[k].ix,
                                     sym ? "n" : "3");
                kiln_function *f = run(what, S("input x: f64[%s]\n"
                                               "output y = x[%s]",
                                               sym ? "n" : "3", SL[k].ix),
                                       &x, out);
                if (f)
                    check_out(&out[0], KILN_F64, 1, SHAPE(SL[k].n), SL[k].w,
                              NULL, 0, 0, what);
                kiln_function_free(f);
            }
        /* the same slice as a written region, and on a 2-D view */
        kiln_tensor x = TD(KILN_F64, 1, SHAPE(3), xv), out[1];
        kiln_function *f = run("set_subtensor(x[::-2^63], 10)",
                               "input x: f64[3]\noutput y = "
                               "set_subtensor(x[::-9223372036854775808], 10)",
                               &x, out);
        if (f)
            check_out(&out[0], KILN_F64, 1, SHAPE(3), (double[]){1, 2, 10},
                      NULL, 0, 0, "set_subtensor(x[::-2^63], 10)");
        kiln_function_free(f);
        double mv[6] = {1, 2, 3, 4, 5, 6};
        kiln_tensor m = TD(KILN_F64, 2, SHAPE(2, 3), mv);
        f = run("m[::9223372036854775807, ::-9223372036854775808]",
                "input m: f64[2, 3]\noutput y = "
                "m[::9223372036854775807, ::-9223372036854775808]", &m, out);
        if (f)
            check_out(&out[0], KILN_F64, 2, SHAPE(1, 1), (double[]){3}, NULL,
                      0, 0, "m[::2^63-1, ::-2^63]");
        kiln_function_free(f);
    }

    /* sizes that overflow int64 are errors, not wrapped products (bool
     * zeros: 2^63 - 1 bytes each, the largest zeros accepted) */
    expect_build_error("output o = join(0, zeros(shape=[9223372036854775807], "
                       "dtype=bool), zeros(shape=[9223372036854775807], "
                       "dtype=bool))", KILN_ERR_SHAPE,
                       "t.kg:3:12: join: the result's size along axis 0 "
                       "overflows", "join of two 2^63-1 sizes");
    expect_build_error("input x: f64[6]\n"
                       "output o = reshape(x, shape=[4611686018427387904, 4])",
                       KILN_ERR_SHAPE, "t.kg:4:12: reshape: cannot reshape "
                       "(6) into (4611686018427387904, 4)",
                       "reshape into a shape of 2^64 elements");
    expect_build_error("input x: f64[3037000500, 3037000500]\n"
                       "output o = reshape(x, shape=[-1])", KILN_ERR_SHAPE,
                       "t.kg:4:12: reshape: input of shape (3037000500, "
                       "3037000500) has more than 2^63 elements",
                       "reshape of a shape of more than 2^63 elements");
    /* a zero dim makes the product 0 whatever the other dims */
    {
        kiln_tensor out[1];
        kiln_function *f = run("empty tensors with a 2^63-1 dim",
                               "output o = reshape(zeros(shape=[0, "
                               "9223372036854775807, 4]), shape="
                               "[9223372036854775807, 0, 4])", NULL, out);
        if (f)
            check_out(&out[0], KILN_F64, 3,
                      SHAPE(9223372036854775807, 0, 4), NULL, NULL, 0, 0,
                      "reshape(zeros(0, 2^63-1, 4)) has shape (2^63-1, 0, 4)");
        kiln_function_free(f);
        f = run("exp and sum over (0, 2^63-1, 2)",
                "output o = sum(exp(zeros(shape=[0, 9223372036854775807, 2]))"
                ", axis=1)", NULL, out);
        if (f)
            check_out(&out[0], KILN_F64, 2, SHAPE(0, 2), NULL, NULL, 0, 0,
                      "sum(exp(zeros(0, 2^63-1, 2)), axis=1) has shape "
                      "(0, 2)");
        kiln_function_free(f);
    }

    /* squeeze refuses a repeated axis, as the reductions do */
    expect_build_error("input m: f64[1, 3]\n"
                       "output o = squeeze(m, axis=[0, 0])", KILN_ERR_SHAPE,
                       "t.kg:4:12: squeeze: axis 0 given twice",
                       "squeeze(m, axis=[0, 0])");
    expect_build_error("input m: f64[1, 3]\n"
                       "output o = squeeze(m, axis=[0, -2])", KILN_ERR_SHAPE,
                       "t.kg:4:12: squeeze: axis 0 given twice",
                       "squeeze(m, axis=[0, -2])");
}

int main(void)
{
    test_unary();
    test_binary();
    test_not_where();
    test_cast();
    test_literals();
    test_overflow();
    test_broadcast();
    test_reductions();
    test_logsumexp();
    test_shape_ops();
    test_join_stack();
    test_basic_index();
    test_take();
    test_set_subtensor();
    test_dot();
    test_misc();
    test_build_errors();
    test_hostile_shapes();
    scratch_free();
    free(scratch);
    return done_testing();
}
