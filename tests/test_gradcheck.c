/*
 * test_gradcheck.c — kiln_function_check_grad: a correct gradient (tiny
 * error), deliberately wrong ones (large error at the right flat index,
 * in a vector and a matrix), f32, several costs, which records make rows,
 * counting and truncation, the caller's inputs and f's outputs left as
 * they were, and the errors.  Gradients are hand-written `.kg` outputs
 * recorded in g->grads by the test.
 */
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "tap.h"

static kiln_value output_value(const kiln_graph *g, const char *name)
{
    for (int k = 0; k < g->n_outputs; k++)
        if (strcmp(g->outputs[k].name, name) == 0)
            return g->outputs[k].value;
    return -1;
}

/* Record output `result` as d cost / d wrt (cost, wrt: value names). */
static int record_grad(kiln_graph *g, const char *cost, const char *wrt,
                       const char *result)
{
    kiln_grad_rec r = {kiln_graph_lookup(g, cost), kiln_graph_lookup(g, wrt),
                       output_value(g, result)};
    if (r.result < 0)  /* also a plain value, for the "not an output" case */
        r.result = kiln_graph_lookup(g, result);
    if (r.cost < 0 || r.wrt < 0 || r.result < 0) {
        diag("record_grad: %s %s %s not found", cost, wrt, result);
        return -1;
    }
    kiln_grad_rec *p = realloc(g->grads, sizeof *p * (size_t)(g->n_grads + 1));
    if (!p)
        return -1;
    g->grads = p;
    g->grads[g->n_grads++] = r;
    g->cap_grads = g->n_grads;
    return 0;
}

/* Parse `text`, record the triples in `recs` ("cost wrt result" each),
 * compile. */
static kiln_function *build(const char *text, const char *const *recs,
                            int n_recs)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    if (!g) {
        diag("parse: %s", err.message);
        return NULL;
    }
    for (int i = 0; i < n_recs; i++) {
        char c[64], w[64], r[64];
        if (sscanf(recs[i], "%63s %63s %63s", c, w, r) != 3 ||
            record_grad(g, c, w, r)) {
            kiln_graph_free(g);
            return NULL;
        }
    }
    kiln_function *f = kiln_compile(g, NULL, &err);
    if (!f)
        diag("compile: %s", err.message);
    kiln_graph_free(g);
    return f;
}

static const char *model =
    "kiln 1\n"
    "graph m\n"
    "  input x: f64[3]\n"
    "  input y: f64\n"
    "  input m: f64[2, 3]\n"
    "  const c: f64[3] = [-1, -1, -1.5]\n"
    "  const w: f64[2, 3] = [[1, 2, 3], [4, 5, 6]]\n"
    "  const wbad: f64[2, 3] = [[1, 2, 3], [4, 50, 6]]\n"
    "  logp = add(sub(mul(-0.5, sum(square(x))), mul(0.5, square(y))),"
    " sum(mul(w, m)))\n"
    "  output logp\n"
    "  output d_x = neg(x)\n"
    "  output d_y = neg(y)\n"
    "  output d_m = add(mul(0.0, m), w)\n"
    "  output bad_x = mul(c, x)\n"
    "  output bad_m = add(mul(0.0, m), wbad)\n"
    "  output s = sum(x)\n"
    "  output d_s = add(mul(0.0, x), 1.0)\n"
    "end\n";

static void point(double *x, double *y, double *m, kiln_tensor in[3])
{
    x[0] = 1;
    x[1] = 2;
    x[2] = 3;
    *y = -0.75;
    for (int i = 0; i < 6; i++)
        m[i] = 0.1 * i - 0.2;
    in[0] = (kiln_tensor){KILN_F64, 1, {3}, x};
    in[1] = (kiln_tensor){KILN_F64, 0, {0}, y};
    in[2] = (kiln_tensor){KILN_F64, 2, {2, 3}, m};
}

static void test_correct(void)
{
    kiln_err err = {0, ""};
    static const char *const recs[] = {"logp x d_x", "logp y d_y",
                                       "logp m d_m"};
    kiln_function *f = build(model, recs, 3);
    ok(f != NULL, "compile");
    if (!f)
        return;
    double x[3], y, m[6];
    kiln_tensor in[3];
    point(x, &y, m, in);
    kiln_grad_check rows[4];
    int n = -1;
    ok(kiln_function_check_grad(f, in, rows, 4, &n, &err) == 0 && n == 3,
       "three rows %s", err.message);
    if (n != 3) {
        kiln_function_free(f);
        return;
    }
    ok(strcmp(rows[0].input, "x") == 0 && strcmp(rows[0].output, "logp") == 0 &&
       strcmp(rows[0].gradient, "d_x") == 0 &&
       strcmp(rows[1].input, "y") == 0 && strcmp(rows[2].input, "m") == 0 &&
       strcmp(rows[2].gradient, "d_m") == 0,
       "rows in record order, named by input, cost and gradient output");
    for (int r = 0; r < 3; r++)
        ok(rows[r].max_error < 1e-8 && rows[r].worst_index >= 0,
           "d(logp)/d(%s): max error %.2g at [%lld] (analytic %.17g, numeric "
           "%.17g)", rows[r].input, rows[r].max_error,
           (long long)rows[r].worst_index, rows[r].analytic, rows[r].numeric);
    kiln_function_free(f);
}

static void test_wrong(void)
{
    kiln_err err = {0, ""};
    static const char *const recs[] = {"logp x bad_x", "logp m bad_m",
                                       "logp y d_y"};
    kiln_function *f = build(model, recs, 3);
    if (!f) {
        ok(0, "compile");
        return;
    }
    double x[3], y, m[6];
    kiln_tensor in[3];
    point(x, &y, m, in);
    /* keep a copy of every input to prove they are not modified */
    double x0[3], y0 = y, m0[6];
    memcpy(x0, x, sizeof x);
    memcpy(m0, m, sizeof m);
    kiln_tensor out[8];
    ok(kiln_function_call(f, in, out, &err) == 0, "a call before the check");
    double lp_before = *(double *)out[0].data;
    kiln_grad_check rows[3];
    int n = 0;
    ok(kiln_function_check_grad(f, in, rows, 3, &n, &err) == 0 && n == 3,
       "check %s", err.message);
    if (n != 3) {
        kiln_function_free(f);
        return;
    }
    /* bad_x = c * x: -4.5 instead of -3 at [2], error 1.5 / 3 */
    ok(rows[0].worst_index == 2, "wrong vector gradient found at [2] (%lld)",
       (long long)rows[0].worst_index);
    is_close(rows[0].max_error, 0.5, 1e-6, "its error |g - fd| / |fd|");
    ok(rows[0].analytic == -4.5 && fabs(rows[0].numeric + 3) < 1e-7,
       "both values: analytic %.17g numeric %.17g", rows[0].analytic,
       rows[0].numeric);
    /* bad_m: 50 instead of 5 at [1][1], flat index 4 */
    ok(rows[1].worst_index == 4, "wrong matrix gradient at flat index 4 "
       "(%lld)", (long long)rows[1].worst_index);
    is_close(rows[1].max_error, 45.0 / 5.0, 1e-6, "error 45 / 5");
    ok(rows[2].max_error < 1e-8, "the right gradient of y still passes");
    ok(memcmp(x, x0, sizeof x) == 0 && y == y0 && memcmp(m, m0, sizeof m) == 0,
       "the caller's inputs are unchanged");
    ok(*(double *)out[0].data == lp_before,
       "f's outputs are those at the caller's point again");
    kiln_function_free(f);
}

/* max_error below 1 is relative, above |fd| = 1 absolute: with fd tiny an
 * absolute error. */
static void test_scale(void)
{
    kiln_err err = {0, ""};
    static const char *const recs[] = {"logp y bad"};
    kiln_function *f = build("kiln 1\ngraph g\n  input y: f64\n"
                             "  logp = mul(1e-3, y)\n  output logp\n"
                             "  output bad = add(mul(0.0, y), 0.5)\nend\n",
                             recs, 1);
    double y = 2;
    kiln_tensor in[1] = {{KILN_F64, 0, {0}, &y}};
    kiln_grad_check row;
    int n = 0;
    ok(f && kiln_function_check_grad(f, in, &row, 1, &n, &err) == 0 && n == 1,
       "check %s", err.message);
    if (n == 1)
        is_close(row.max_error, 0.499, 1e-6,
                 "|fd| < 1: the error is absolute (%.17g)", row.max_error);
    kiln_function_free(f);
}

static void test_f32(void)
{
    kiln_err err = {0, ""};
    static const char *const recs[] = {"lz z d_z"};
    kiln_function *f = build("kiln 1\ngraph g\n  input z: f32[2]\n"
                             "  lz = sum(mul(0.5, square(z)))\n"
                             "  output lz\n  output d_z = mul(1.0, z)\nend\n",
                             recs, 1);
    float z[2] = {0.5f, -1.25f};
    kiln_tensor in[1] = {{KILN_F32, 1, {2}, z}};
    kiln_grad_check row;
    int n = 0;
    ok(f && kiln_function_check_grad(f, in, &row, 1, &n, &err) == 0 && n == 1,
       "f32 check %s", err.message);
    if (n == 1)
        ok(row.max_error < 1e-3, "f32 gradient within f32 accuracy: %.2g",
           row.max_error);
    ok(z[0] == 0.5f && z[1] == -1.25f, "f32 inputs unchanged");
    kiln_function_free(f);
}

/* Which records make rows: duplicates once, wrt not an input, cost or
 * result not an output are skipped; two costs of one input; counting
 * with max_rows 0, truncation. */
static void test_rows(void)
{
    kiln_err err = {0, ""};
    static const char *const recs[] = {
        "logp x d_x", "logp x d_x",  /* duplicate */
        "s x d_s",                   /* a second cost of x */
        "logp w d_m",                /* w is a const, not an input */
        "t0 x d_x",                  /* cost not an output: never made */
        "logp y hidden",             /* result not an output */
    };
    const char *text =
        "kiln 1\ngraph g\n  input x: f64[3]\n  input y: f64\n"
        "  input m: f64[2, 3]\n  const w: f64[2, 3] = [[1, 2, 3], [4, 5, 6]]\n"
        "  logp = add(sub(mul(-0.5, sum(square(x))), mul(0.5, square(y))),"
        " sum(mul(w, m)))\n"
        "  t0 = mul(2.0, logp)\n  hidden = neg(y)\n"
        "  output logp\n  output d_x = neg(x)\n  output d_m = add(mul(0.0, m), w)\n"
        "  output s = sum(x)\n  output d_s = add(mul(0.0, x), 1.0)\nend\n";
    kiln_function *f = build(text, recs, 6);
    if (!f) {
        ok(0, "compile");
        return;
    }
    int n = -1;
    ok(kiln_function_check_grad(f, NULL, NULL, 0, &n, &err) == 0 && n == 2,
       "max_rows 0 counts without calling (inputs may be NULL): %d", n);
    double x[3], y, m[6];
    kiln_tensor in[3];
    point(x, &y, m, in);
    kiln_grad_check rows[2];
    memset(rows, 0, sizeof rows);
    ok(kiln_function_check_grad(f, in, rows, 1, &n, &err) == 0 && n == 2 &&
       rows[0].input && rows[1].input == NULL,
       "max_rows 1 fills one row and reports 2");
    ok(kiln_function_check_grad(f, in, rows, 2, &n, &err) == 0 && n == 2 &&
       strcmp(rows[1].output, "s") == 0 && strcmp(rows[1].input, "x") == 0 &&
       rows[0].max_error < 1e-8 && rows[1].max_error < 1e-8,
       "two costs of x: %s, %s", rows[0].output, rows[1].output);
    kiln_function_free(f);

    /* no records at all */
    f = build(text, NULL, 0);
    n = -1;
    ok(f && kiln_function_check_grad(f, in, rows, 2, &n, &err) == 0 && n == 0,
       "no recorded gradient: 0 rows");
    kiln_function_free(f);
}

static void test_nonfinite(void)
{
    kiln_err err = {0, ""};
    static const char *const recs[] = {"lp x dx"};
    /* sqrt near 0: x - h < 0 gives nan; the row reports +inf */
    kiln_function *f = build("kiln 1\ngraph g\n  input x: f64[2]\n"
                             "  lp = sum(sqrt(x))\n  output lp\n"
                             "  output dx = true_div(0.5, sqrt(x))\nend\n",
                             recs, 1);
    double x[2] = {4, 1e-9};
    kiln_tensor in[1] = {{KILN_F64, 1, {2}, x}};
    kiln_grad_check row;
    int n = 0;
    ok(f && kiln_function_check_grad(f, in, &row, 1, &n, &err) == 0 && n == 1,
       "check %s", err.message);
    ok(n == 1 && isinf(row.max_error) && row.worst_index == 1 &&
       isnan(row.numeric),
       "a nan finite difference is an infinite error at [1] (%g)",
       row.max_error);
    kiln_function_free(f);
}

static void test_errors(void)
{
    kiln_err err = {0, ""};
    static const char *const recs[] = {"logp x d_x", "logp y d_x"};
    kiln_function *f = build(model, recs, 2);
    if (!f) {
        ok(0, "compile");
        return;
    }
    double x[3], y, m[6];
    kiln_tensor in[3];
    point(x, &y, m, in);
    kiln_grad_check rows[2];
    int n = 0;
    ok(kiln_function_check_grad(f, in, rows, 2, &n, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "check-grad: gradient output 'd_x' has 3 f64 "
                           "elements, input 'y' has 1") == 0,
       "gradient of the wrong size: %s", err.message);
    ok(kiln_function_check_grad(NULL, in, rows, 2, &n, &err) == KILN_ERR_ARG,
       "NULL f");
    ok(kiln_function_check_grad(f, in, NULL, 2, &n, &err) == KILN_ERR_ARG,
       "rows NULL with max_rows 2");
    ok(kiln_function_check_grad(f, in, rows, -1, &n, &err) == KILN_ERR_ARG,
       "max_rows < 0");
    ok(kiln_function_check_grad(f, in, rows, 2, NULL, &err) == KILN_ERR_ARG,
       "n_rows NULL");
    kiln_tensor bad[3];
    memcpy(bad, in, sizeof bad);
    bad[1].dtype = KILN_F32;
    ok(kiln_function_check_grad(f, bad, rows, 2, &n, &err) == KILN_ERR_TYPE &&
       strcmp(err.message, "input 'y': expected dtype f64, got f32") == 0,
       "a bad input is kiln_function_call's error: %s", err.message);
    kiln_function_free(f);

    /* a call failing at a perturbed point names the input and element */
    static const char *const recs2[] = {"lp x dx"};
    f = build("kiln 1\ngraph g\n  input x: f64\n  const v: f64[2] = [1, 2]\n"
              "  lp = add(take(v, cast(x, dtype=i64)), x)\n  output lp\n"
              "  output dx = add(mul(0.0, x), 1.0)\nend\n", recs2, 1);
    double xv = 1.9999995;
    kiln_tensor in1[1] = {{KILN_F64, 0, {0}, &xv}};
    int rc = f ? kiln_function_check_grad(f, in1, rows, 1, &n, &err) : -1;
    ok(rc == KILN_ERR_RUNTIME &&
       strncmp(err.message, "check-grad: at input 'x'[0] + h: ", 33) == 0,
       "failure at x + h: %s", err.message);
    kiln_function_free(f);
}

int main(void)
{
    test_correct();
    test_wrong();
    test_scale();
    test_f32();
    test_rows();
    test_nonfinite();
    test_errors();
    return done_testing();
}
