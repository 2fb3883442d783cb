/*
 * test_ops_new.c — the ops added with gradients, end to end (.kg text ->
 * kiln_parse_string -> kiln_compile -> kiln_function_call):
 *
 *  - fill(model, value): value broadcast to broadcast(model, value)'s
 *    shape; the value's dtype, a weak (literal) value taking the model's
 *    dtype category (NEP 50); the model's data is never read;
 *  - trigamma(x) = psi'(x): float-only (ints, bool -> f64), checked
 *    against closed forms (pi^2/6, pi^2/2, ...) and SciPy's poles.
 *
 * Kept apart from test_ops.c (another owner) so the two evolve freely.
 */
#include <kiln/kiln.h>
#include <kiln/graph.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static const double PI = 3.14159265358979323846;

static kiln_graph *parse_body(const char *body, kiln_err *err)
{
    size_t n = strlen(body) + 64;
    char *text = malloc(n);
    if (!text)
        exit(2);
    snprintf(text, n, "kiln 1\ngraph t\n%s\nend\n", body);
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, err);
    free(text);
    return g;
}

/* Compile and call once; NULL (with a failing test) on any error. */
static kiln_function *run(const char *what, const char *body,
                          const kiln_tensor *in, kiln_tensor *out)
{
    kiln_err err = {0, ""};
    kiln_graph *g = parse_body(body, &err);
    kiln_function *f = g ? kiln_compile(g, NULL, &err) : NULL;
    kiln_graph_free(g);
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "%s: compiles and runs", what);
        diag("error %d: %s", err.code, err.message);
        kiln_function_free(f);
        return NULL;
    }
    return f;
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

/* dtype, shape and values (rtol; NaN == NaN) of an output. */
static int check(const kiln_tensor *o, kiln_dtype dt, int rank,
                 const int64_t *shape, const double *want, double rtol,
                 const char *what)
{
    int good = o->dtype == dt && o->rank == rank;
    int64_t n = 1;
    for (int i = 0; good && i < rank; i++) {
        good = o->shape[i] == shape[i];
        n *= shape[i];
    }
    if (!good) {
        ok(0, "%s", what);
        diag("got %s rank %d, want %s rank %d", kiln_dtype_name(o->dtype),
             o->rank, kiln_dtype_name(dt), rank);
        return 0;
    }
    int nbad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!tap_close(elem(o, i), want[i], rtol) && nbad++ < 4)
            diag("  [%lld] got %.17g, want %.17g", (long long)i, elem(o, i),
                 want[i]);
    return ok(nbad == 0, "%s", what);
}

static void expect_error(const char *body, int code, const char *msg)
{
    kiln_err err = {0, ""};
    kiln_graph *g = parse_body(body, &err);
    int good = !g && err.code == code && strcmp(err.message, msg) == 0;
    if (!ok(good, "error: %s", msg))
        diag("got %d: %s", g ? 0 : err.code, g ? "(parsed)" : err.message);
    kiln_graph_free(g);
}

static void test_fill(void)
{
    float xf[6] = {1, 2, 3, 4, 5, 6};
    double x[6] = {1, 2, 3, 4, 5, 6};
    double v[3] = {1.5, -2, 7};
    int64_t k[3] = {4, 5, 6};
    uint8_t b[2] = {1, 0};
    double y[2] = {NAN, NAN}; /* a model's data is never read */
    kiln_tensor in[5] = {T(KILN_F32, 2, SHAPE(2, 3), xf),
                         T(KILN_F64, 1, SHAPE(3), v),
                         T(KILN_I64, 1, SHAPE(3), k),
                         T(KILN_BOOL, 1, SHAPE(2), b),
                         T(KILN_F64, 1, SHAPE(2), y)};
    kiln_tensor out[9];
    kiln_function *f = run(
        "fill", "input x: f32[2, 3]\ninput v: f64[3]\ninput k: i64[3]\n"
        "input b: bool[2]\ninput y: f64[2]\n"
        "output a = fill(x, v)\n"       /* f64[2, 3]: v's dtype */
        "output c = fill(x, 1)\n"       /* f32[2, 3]: weak int -> f32 */
        "output d = fill(k, 1.5)\n"     /* f64[3]: float beats int */
        "output e = fill(k, true)\n"    /* i64[3] */
        "output g = fill(b, 2)\n"       /* i64[2] */
        "output h = fill(v, x)\n"       /* f32[2, 3]: value's shape wins */
        "output m = fill(2.5, v)\n"     /* f64[3]: a scalar model */
        "output n = fill(v, cast(k, dtype=i32))\n" /* i32[3] */
        "output r = fill(y, 3.0)",      /* y's NaNs do not matter */
        in, out);
    if (f) {
        const double wa[6] = {1.5, -2, 7, 1.5, -2, 7};
        check(&out[0], KILN_F64, 2, SHAPE(2, 3), wa, 0,
              "fill(f32[2, 3], f64[3]) is v broadcast, f64[2, 3]");
        const double wc[6] = {1, 1, 1, 1, 1, 1};
        check(&out[1], KILN_F32, 2, SHAPE(2, 3), wc, 0,
              "fill(f32 x, 1): a weak int takes x's f32");
        const double wd[3] = {1.5, 1.5, 1.5};
        check(&out[2], KILN_F64, 1, SHAPE(3), wd, 0,
              "fill(i64 k, 1.5): a weak float gives f64");
        const double we[3] = {1, 1, 1};
        check(&out[3], KILN_I64, 1, SHAPE(3), we, 0,
              "fill(i64 k, true): a weak bool takes i64");
        const double wg[2] = {2, 2};
        check(&out[4], KILN_I64, 1, SHAPE(2), wg, 0,
              "fill(bool b, 2): a weak int over bool gives i64");
        check(&out[5], KILN_F32, 2, SHAPE(2, 3), x, 0,
              "fill(f64[3], f32[2, 3]) is the value, f32[2, 3]");
        check(&out[6], KILN_F64, 1, SHAPE(3), v, 0,
              "fill(2.5, v) is v");
        const double wn[3] = {4, 5, 6};
        check(&out[7], KILN_I32, 1, SHAPE(3), wn, 0,
              "fill(v, i32 value) keeps i32");
        const double wr[2] = {3, 3};
        check(&out[8], KILN_F64, 1, SHAPE(2), wr, 0,
              "fill(y, 3.0) does not read y (NaN there)");
        kiln_function_free(f);
    }

    /* a symbolic model */
    double q[4] = {1, 2, 3, 4};
    kiln_tensor qi[1] = {T(KILN_F64, 1, SHAPE(4), q)};
    kiln_tensor qo[1];
    f = run("fill symbolic", "input q: f64[n]\noutput z = fill(q, 0.25)",
            qi, qo);
    if (f) {
        const double w[4] = {0.25, 0.25, 0.25, 0.25};
        check(&qo[0], KILN_F64, 1, SHAPE(4), w, 0,
              "fill(f64[n], 0.25) at n = 4");
        kiln_function_free(f);
    }

    /* prints and re-parses to the same text */
    kiln_err err = {0, ""};
    kiln_graph *g = parse_body("input x: f32[3]\ninput v: f64\n"
                               "output a = fill(x, v)\n"
                               "output c = fill(x, 1)", &err);
    char *t1 = g ? kiln_graph_print(g, &err) : NULL;
    kiln_graph *g2 = t1 ? kiln_parse_string(t1, "p.kg", NULL, &err) : NULL;
    char *t2 = g2 ? kiln_graph_print(g2, &err) : NULL;
    ok(t1 && t2 && strcmp(t1, t2) == 0 && strstr(t1, "fill(x, v)")
       && strstr(t1, "fill(x, 1)"), "fill prints and round-trips");
    if (!(t1 && t2))
        diag("%s", err.message);
    free(t1);
    free(t2);
    kiln_graph_free(g);
    kiln_graph_free(g2);

    expect_error("input x: f64[3]\ninput y: f64[4]\noutput z = fill(x, y)",
                 KILN_ERR_SHAPE,
                 "t.kg:5:12: fill: cannot broadcast shapes (3) and (4)");
    expect_error("input x: f64[3]\noutput z = fill(x)", KILN_ERR_TYPE,
                 "t.kg:4:12: fill: expected 2 inputs, got 1");
}

static void test_trigamma(void)
{
    double x[8] = {1, 0.5, 2, -0.5, 0, -1, INFINITY, NAN};
    float xf[3] = {1, 0.5f, 2};
    int64_t k[2] = {1, 2};
    uint8_t b[2] = {1, 0};
    kiln_tensor in[4] = {T(KILN_F64, 1, SHAPE(8), x),
                         T(KILN_F32, 1, SHAPE(3), xf),
                         T(KILN_I64, 1, SHAPE(2), k),
                         T(KILN_BOOL, 1, SHAPE(2), b)};
    kiln_tensor out[5];
    kiln_function *f = run(
        "trigamma", "input x: f64[8]\ninput s: f32[3]\ninput k: i64[2]\n"
        "input b: bool[2]\n"
        "output a = trigamma(x)\noutput c = trigamma(s)\n"
        "output d = trigamma(k)\noutput e = trigamma(b)\n"
        "output g = trigamma(2)", in, out);
    if (f) {
        const double p6 = PI * PI / 6;
        const double wa[8] = {p6, PI * PI / 2, p6 - 1, PI * PI / 2 + 4,
                              INFINITY, INFINITY, 0, NAN};
        check(&out[0], KILN_F64, 1, SHAPE(8), wa, 1e-15,
              "trigamma f64: pi^2/6, pi^2/2, pi^2/6 - 1, pi^2/2 + 4, poles "
              "+inf, psi1(inf) = 0, NaN");
        const double wc[3] = {(float)p6, (float)(PI * PI / 2),
                              (float)(p6 - 1)};
        check(&out[1], KILN_F32, 1, SHAPE(3), wc, 0,
              "trigamma f32 stays f32 (rounded once)");
        const double wd[2] = {p6, p6 - 1};
        check(&out[2], KILN_F64, 1, SHAPE(2), wd, 1e-15,
              "trigamma i64 computes in f64");
        const double we[2] = {p6, INFINITY};
        check(&out[3], KILN_F64, 1, SHAPE(2), we, 1e-15,
              "trigamma bool computes in f64");
        const double wg[1] = {p6 - 1};
        check(&out[4], KILN_F64, 0, NULL, wg, 1e-15,
              "trigamma of a literal");
        kiln_function_free(f);
    }
    expect_error("input x: f64[3]\noutput z = trigamma(x, x)", KILN_ERR_TYPE,
                 "t.kg:4:12: trigamma: expected 1 input, got 2");
}

/* The reason trigamma exists: d digamma / dx, through `grad` in text. */
static void test_grad_text(void)
{
    double x[3] = {1, 0.5, 2};
    kiln_tensor in[1] = {T(KILN_F64, 1, SHAPE(3), x)};
    kiln_tensor out[3];
    kiln_function *f = run(
        "grad of digamma and fill", "input x: f64[3]\n"
        "c = sum(digamma(x))\n"
        "d = grad(c, x)\n"
        "e, h = grad(sum(fill(x, mul(x, 3.0))), x, x)\n"
        "output d\noutput e\noutput h", in, out);
    if (f) {
        const double p6 = PI * PI / 6;
        const double wd[3] = {p6, PI * PI / 2, p6 - 1};
        check(&out[0], KILN_F64, 1, SHAPE(3), wd, 1e-15,
              "d/dx sum(digamma(x)) = trigamma(x)");
        const double we[3] = {3, 3, 3};
        check(&out[1], KILN_F64, 1, SHAPE(3), we, 0,
              "d/dx sum(fill(x, 3x)) = 3 (the model gives no gradient)");
        check(&out[2], KILN_F64, 1, SHAPE(3), we, 0,
              "the same wrt twice gives the same gradient twice");
        kiln_function_free(f);
    }
}

int main(void)
{
    test_fill();
    test_trigamma();
    test_grad_text();
    return done_testing();
}
