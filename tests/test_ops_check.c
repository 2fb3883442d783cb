/*
 * test_ops_check.c — the ops of issue 25 item 3 (structural part), end to
 * end (.kg text -> kiln_parse_string -> kiln_compile -> call) under every
 * backend found, with the rewrite passes (fusion included) and without:
 *
 *  - all/any (NumPy: nonzero and NaN are true; empty all is true, empty
 *    any false), axis and keepdims;
 *  - cumsum/cumprod along an axis (negative too), ints and bool in i64,
 *    and their gradients (reverse cumsum; PyTensor's cumprod rule);
 *  - check(x, c1, ..., msg=): x unchanged when every condition holds;
 *    KILN_ERR_CHECK with "check failed: MSG" and the .kg line when one
 *    element is false, inside a fused chain and outside; no condition
 *    passes; the gradient passes through; msg= round-trips the printer.
 *
 * Expected values are worked by hand from NumPy's definitions.
 */
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/model.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "found_backends.h"
#include "compile_text.h"

static const char *backend, *passes;

static kiln_function *compile_text(const char *text, kiln_err *err)
{
    return compile_kg_text(text, backend, passes, err);
}

static kiln_tensor T(kiln_dtype dt, int rank, const int64_t *shape,
                     void *data)
{
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    t.data = data;
    return t;
}

static double elem(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_F64: return ((const double *)t->data)[i];
    case KILN_F32: return ((const float *)t->data)[i];
    case KILN_I64: return (double)((const int64_t *)t->data)[i];
    case KILN_I32: return ((const int32_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
    }
}

/* Output k has dtype dt, n elements equal to want[]. */
static void expect(const char *what, const kiln_tensor *out, int k,
                   kiln_dtype dt, int n, const double *want)
{
    const kiln_tensor *t = &out[k];
    int64_t numel = 1;
    for (int i = 0; i < t->rank; i++)
        numel *= t->shape[i];
    int good = t->dtype == dt && numel == n;
    for (int i = 0; good && i < n; i++)
        good = tap_close(elem(t, i), want[i], 1e-12);
    ok(good, "%s [%s, passes %s]", what, backend, passes);
    if (!good) {
        diag("dtype %d (want %d), %lld elements (want %d)", (int)t->dtype,
             (int)dt, (long long)numel, n);
        for (int i = 0; i < n && i < numel; i++)
            diag("  [%d] got %.17g want %.17g", i, elem(t, i), want[i]);
    }
}

static const char REDUCE_TEXT[] =
    "kiln 1\ngraph t\n"
    "  input x: f64[2, 3]\n"
    "  input e: f64[n]\n"
    "  output a = all(x)\n"
    "  output b = any(x, axis=1, keepdims=true)\n"
    "  output c = all(x, axis=0)\n"
    "  output d = any(sub(x, x), axis=[0, 1])\n"
    "  output ea = all(e)\n"
    "  output eb = any(e)\n"
    "  output bo = all(gt(x, -1.0), axis=-1)\n"
    "  output i = any(cast(x, dtype=i64), axis=0)\n"
    "end\n";

static void test_all_any(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(REDUCE_TEXT, &err);
    /* NaN is nonzero: true */
    double x[6] = {1, 0, 2, 3, 4, NAN}, e[1];
    kiln_tensor in[2] = {T(KILN_F64, 2, (int64_t[]){2, 3}, x),
                         T(KILN_F64, 1, (int64_t[]){0}, e)};
    kiln_tensor out[8];
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "all/any compile and run [%s]: %s", backend, err.message);
        kiln_function_free(f);
        return;
    }
    expect("all(x) of a zero is false", out, 0, KILN_BOOL, 1,
           (double[]){0});
    expect("any(axis=1, keepdims)", out, 1, KILN_BOOL, 2, (double[]){1, 1});
    ok(out[1].rank == 2 && out[1].shape[1] == 1, "keepdims keeps the axis");
    expect("all(axis=0): NaN is true", out, 2, KILN_BOOL, 3,
           (double[]){1, 0, 1});
    /* x - x: 0 everywhere but NaN - NaN = NaN, which is true */
    expect("any over a list of axes", out, 3, KILN_BOOL, 1, (double[]){1});
    expect("all of nothing is true", out, 4, KILN_BOOL, 1, (double[]){1});
    expect("any of nothing is false", out, 5, KILN_BOOL, 1, (double[]){0});
    /* NaN > -1 is false */
    expect("all of a bool input", out, 6, KILN_BOOL, 2, (double[]){1, 0});
    /* cast of NaN to i64 is not defined: row 1 only matters where x is
     * finite, so use column 0..1 */
    ok(elem(&out[7], 0) == 1 && elem(&out[7], 1) == 1,
       "any of an i64 input [%s, passes %s]", backend, passes);
    kiln_function_free(f);
}

static const char SCAN_TEXT[] =
    "kiln 1\ngraph t\n"
    "  input x: f64[2, 3]\n"
    "  input k: i32[3]\n"
    "  input b: bool[4]\n"
    "  output s1 = cumsum(x, axis=1)\n"
    "  output p0 = cumprod(x, axis=0)\n"
    "  output sm = cumsum(x, axis=-2)\n"
    "  output pm = cumprod(x, axis=-1)\n"
    "  output ki = cumsum(k, axis=0)\n"
    "  output bc = cumsum(b, axis=0)\n"
    "  output tr = cumsum(transpose(x), axis=1)\n"
    "end\n";

static void test_scan(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(SCAN_TEXT, &err);
    double x[6] = {1, 2, 3, 4, 5, 6};
    int32_t k[3] = {7, -2, 5};
    uint8_t b[4] = {1, 0, 1, 1};
    kiln_tensor in[3] = {T(KILN_F64, 2, (int64_t[]){2, 3}, x),
                         T(KILN_I32, 1, (int64_t[]){3}, k),
                         T(KILN_BOOL, 1, (int64_t[]){4}, b)};
    kiln_tensor out[7];
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "cumsum/cumprod compile and run [%s]: %s", backend,
           err.message);
        kiln_function_free(f);
        return;
    }
    /* no silent fallback: every kernel ran on the backend asked for */
    int same = 1;
    for (int i = 0; i < kiln_function_n_kernels(f); i++)
        same &= strcmp(kiln_function_kernel_backend(f, i), backend) == 0;
    ok(same, "every scan kernel runs on %s [passes %s]", backend, passes);
    expect("cumsum axis 1", out, 0, KILN_F64, 6,
           (double[]){1, 3, 6, 4, 9, 15});
    expect("cumprod axis 0", out, 1, KILN_F64, 6,
           (double[]){1, 2, 3, 4, 10, 18});
    expect("cumsum axis -2", out, 2, KILN_F64, 6,
           (double[]){1, 2, 3, 5, 7, 9});
    expect("cumprod axis -1", out, 3, KILN_F64, 6,
           (double[]){1, 2, 6, 4, 20, 120});
    expect("cumsum of i32 is i64", out, 4, KILN_I64, 3,
           (double[]){7, 5, 10});
    expect("cumsum of bool counts in i64", out, 5, KILN_I64, 4,
           (double[]){1, 1, 2, 3});
    /* transpose(x) = [[1,4],[2,5],[3,6]] */
    expect("cumsum of a transposed view", out, 6, KILN_F64, 6,
           (double[]){1, 5, 2, 7, 3, 9});
    kiln_function_free(f);
}

static const char GRAD_TEXT[] =
    "kiln 1\ngraph t\n"
    "  input x: f64[3]\n"
    "  input w: f64[3]\n"
    "  ls = sum(mul(w, cumsum(x, axis=0)))\n"
    "  lp = sum(cumprod(x, axis=0))\n"
    "  lc = sum(check(mul(x, x), gt(x, 0.0), msg=\"x > 0\"))\n"
    "  gs = grad(ls, x)\n"
    "  gp = grad(lp, x)\n"
    "  gc = grad(lc, x)\n"
    "  output gs\n"
    "  output gp\n"
    "  output gc\n"
    "end\n";

static void test_grads(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(GRAD_TEXT, &err);
    double x[3] = {1, 2, 3}, w[3] = {1, 2, 3};
    kiln_tensor in[2] = {T(KILN_F64, 1, (int64_t[]){3}, x),
                         T(KILN_F64, 1, (int64_t[]){3}, w)};
    kiln_tensor out[3];
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "gradients compile and run [%s]: %s", backend, err.message);
        kiln_function_free(f);
        return;
    }
    /* d/dx_i sum_j w_j cumsum_j = sum_{j >= i} w_j */
    expect("grad of cumsum: reverse cumsum", out, 0, KILN_F64, 3,
           (double[]){6, 5, 3});
    /* lp = x1 + x1 x2 + x1 x2 x3 */
    expect("grad of cumprod", out, 1, KILN_F64, 3, (double[]){9, 4, 2});
    expect("grad through check", out, 2, KILN_F64, 3, (double[]){2, 4, 6});
    kiln_function_free(f);
}

/* y = check(...) between elementwise ops (a fusable chain), a second
 * check of a scalar bool and one with no condition, an unused check */
static const char CHECK_TEXT[] =
    "kiln 1\ngraph t\n"
    "  input x: f64[3]\n"
    "  input s: f64\n"
    "  input m: f64[2, 2]\n"
    "  y = check(mul(x, 2.0), gt(x, -5.0), le(m, 10.0), msg=\"x in \\\"range\\\"\")\n"
    "  z = check(add(y, 1.0), ge(s, 0.0), msg=\"sigma >= 0\")\n"
    "  n = check(z)\n"
    "  unused = check(x, false, msg=\"never\")\n"
    "  output lp = sum(exp(n))\n"
    "  output same = check(x, gt(x, -100.0))\n"
    "end\n";

static void test_check(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(CHECK_TEXT, &err);
    double x[3] = {0, 1, -1}, s = 1, m[4] = {1, 2, 3, 4};
    kiln_tensor in[3] = {T(KILN_F64, 1, (int64_t[]){3}, x),
                         T(KILN_F64, 0, NULL, &s),
                         T(KILN_F64, 2, (int64_t[]){2, 2}, m)};
    kiln_tensor out[2];
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "check compiles and runs [%s]: %s", backend, err.message);
        kiln_function_free(f);
        return;
    }
    double want = exp(1.0) + exp(3.0) + exp(-1.0);
    expect("every check passes: x unchanged", out, 0, KILN_F64, 1, &want);
    expect("check returns x", out, 1, KILN_F64, 3, (double[]){0, 1, -1});
    /* one element of one condition false */
    x[2] = -6;
    err.code = 0;
    int rc = kiln_function_call(f, in, out, &err);
    ok(rc == KILN_ERR_CHECK && err.code == KILN_ERR_CHECK &&
       strstr(err.message, "check failed: x in \"range\"") &&
       strstr(err.message, "node 'y' (check, .kg line 6)"),
       "a false element fails the call with KILN_ERR_CHECK and the msg "
       "[%s, passes %s]", backend, passes);
    diag("%s", err.message);
    x[2] = -1;
    m[3] = 11;   /* the second condition, of another shape */
    rc = kiln_function_call(f, in, out, &err);
    ok(rc == KILN_ERR_CHECK && strstr(err.message, "x in"),
       "any condition fails it [%s, passes %s]", backend, passes);
    m[3] = 4;
    s = -0.5;   /* the second check, a scalar condition */
    rc = kiln_function_call(f, in, out, &err);
    ok(rc == KILN_ERR_CHECK && strstr(err.message, "sigma >= 0") &&
       strstr(err.message, ".kg line 7"),
       "the failing check is named [%s, passes %s]", backend, passes);
    s = 1;
    rc = kiln_function_call(f, in, out, &err);
    ok(rc == 0 && tap_close(elem(&out[0], 0), want, 1e-12),
       "passes again after a failure [%s, passes %s]", backend, passes);
    kiln_function_free(f);
}

static void test_print(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(CHECK_TEXT, "t.kg", NULL, &err);
    char *t1 = g ? kiln_graph_print(g, &err) : NULL;
    kiln_graph *g2 = t1 ? kiln_parse_string(t1, "p.kg", NULL, &err) : NULL;
    char *t2 = g2 ? kiln_graph_print(g2, &err) : NULL;
    ok(t1 && t2 && strcmp(t1, t2) == 0 &&
       strstr(t1, "msg=\"x in \\\"range\\\"\"") &&
       strstr(t1, "msg=\"sigma >= 0\""),
       "msg= round-trips the printer");
    if (t1)
        diag("%s", t1);
    free(t1);
    free(t2);
    kiln_graph_free(g);
    kiln_graph_free(g2);
    /* bad input: one clear line each */
    static const char *const bad[][2] = {
        {"  output y = check(x, msg=3)\n", "'msg' must be a string"},
        {"  output y = sum(x, msg=\"a\")\n", "unknown attribute 'msg'"},
        {"  output y = cumsum(x)\n", "'axis' is required"},
        {"  output y = cumsum(x, axis=2)\n", "out of range"},
        {"  output y = cumsum(x, axis=[0])\n", "must be an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "kiln 1\ngraph t\n  input x: f64[3]\n"
                 "%send\n", bad[i][0]);
        err.code = 0;
        kiln_graph *b = kiln_parse_string(text, "b.kg", NULL, &err);
        ok(!b && err.code && strstr(err.message, bad[i][1]),
           "refused: %s", bad[i][1]);
        if (b || !strstr(err.message, bad[i][1]))
            diag("got: %s", err.message);
        kiln_graph_free(b);
    }
    /* the graph API: a KILN_ATTR_STRING attribute */
    kiln_graph *h = kiln_graph_new("h", &err);
    kiln_value x = kiln_graph_input(h, "x", KILN_F64, 1, (int64_t[]){2},
                                    &err);
    kiln_value c = kiln_graph_literal(h, 1, KILN_LIT_BOOL, &err);
    kiln_attr a = {.key = "msg", .kind = KILN_ATTR_STRING, .s = "api msg"};
    kiln_value y = kiln_graph_op(h, "check", 2, (kiln_value[]){x, c}, &a, 1,
                                 &err);
    char *ht = y >= 0 ? kiln_graph_print(h, &err) : NULL;
    ok(ht && strstr(ht, "check(x, true, msg=\"api msg\")"),
       "kiln_graph_op takes KILN_ATTR_STRING");
    free(ht);
    kiln_graph_free(h);
}

/* the model API: log density and gradient through a check, and the
 * check's error code when it fails */
static void test_model(void)
{
    static const char text[] =
        "kiln 1\ngraph m\n  param mu: f64\n"
        "  z = check(sub(2.0, mu), lt(mu, 1.0), msg=\"mu < 1\")\n"
        "  output lp = neg(square(z))\nend\n";
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "m.kg", NULL, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.passes = passes;
    o.quiet = 1;
    kiln_model *m = g ? kiln_model_new(g, "lp", NULL, &o, NULL, &err) : NULL;
    kiln_graph_free(g);
    if (!m) {
        ok(0, "model with a check [%s]: %s", backend, err.message);
        return;
    }
    double unc = 0.5, lp = 0, grad = 0;
    int rc = kiln_model_log_density(m, 1, &unc, &lp, &grad, &err);
    ok(rc == 0 && tap_close(lp, -2.25, 1e-12) && tap_close(grad, 3, 1e-12),
       "model log density and gradient through a check [%s, passes %s]",
       backend, passes);
    unc = 1.5;
    rc = kiln_model_log_density(m, 1, &unc, &lp, &grad, &err);
    ok(rc == KILN_ERR_CHECK && strstr(err.message, "check failed: mu < 1"),
       "kiln_model_log_density fails with KILN_ERR_CHECK [%s, passes %s]",
       backend, passes);
    kiln_model_free(m);
}

int main(void)
{
    const char *bk[3];
    int nb = found_backends(bk);
    static const char *const pass_sets[] = {"all", "none"};
    test_print();
    for (int b = 0; b < nb; b++)
        for (int p = 0; p < 2; p++) {
            backend = bk[b];
            passes = pass_sets[p];
            test_all_any();
            test_scan();
            test_grads();
            test_check();
            test_model();
        }
    return done_testing();
}
