/*
 * test_callback.c — kiln_function_logp_callback: packing of x and grad
 * over inputs of several shapes and both float dtypes, every creation
 * error with its exact message, the return codes (non-finite logp, bad
 * dim, a failing call), no allocation in steady state, calls from several
 * threads, and two samplers written here — random-walk Metropolis and
 * HMC (leapfrog) — driving a 2-D standard normal through the plain
 * function pointer.  Gradients are hand-written `.kg` outputs recorded in
 * g->grads by the test, except for examples/radon.kg, which uses
 * kiln_graph_grad once it is available (skipped before).
 */
#define _GNU_SOURCE
#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/kiln.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "tap.h"

/* counting allocations: n_allocs, COUNT_ALLOCS */
#include "count_allocs.h"

/* ---- helpers ----------------------------------------------------------- */

static kiln_graph *parse(const char *text)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    if (!g)
        diag("parse: %s", err.message);
    return g;
}

static kiln_value output_value(const kiln_graph *g, const char *name)
{
    for (int k = 0; k < g->n_outputs; k++)
        if (strcmp(g->outputs[k].name, name) == 0)
            return g->outputs[k].value;
    return -1;
}

/* Record "output `result` is d `cost` / d `wrt`" as kiln_graph_grad
 * would: cost and wrt are value names, result an output name. */
static int record_grad(kiln_graph *g, const char *cost, const char *wrt,
                       const char *result)
{
    kiln_grad_rec r = {kiln_graph_lookup(g, cost), kiln_graph_lookup(g, wrt),
                       output_value(g, result)};
    if (r.cost < 0 || r.wrt < 0 || r.result < 0) {
        diag("record_grad: %s %s %s not found", cost, wrt, result);
        return -1;
    }
    if (g->n_grads == g->cap_grads) {
        int cap = g->cap_grads ? 2 * g->cap_grads : 4;
        kiln_grad_rec *p = realloc(g->grads, sizeof *p * (size_t)cap);
        if (!p)
            return -1;
        g->grads = p;
        g->cap_grads = cap;
    }
    g->grads[g->n_grads++] = r;
    return 0;
}

static kiln_function *compile(kiln_graph *g)
{
    kiln_err err = {0, ""};
    kiln_function *f = g ? kiln_compile(g, NULL, &err) : NULL;
    if (g && !f)
        diag("compile: %s", err.message);
    kiln_graph_free(g);
    return f;
}

/* splitmix64: uniform in (0, 1), and standard normals by Box-Muller. */
static uint64_t rng_state;
static double uniform01(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}
static double normal01(void)
{
    return sqrt(-2 * log(uniform01())) * cos(6.283185307179586 * uniform01());
}

/* ---- the 2-D standard normal and a 4-element normal ------------------ */

static const char *normal_kg =
    "kiln 1\n"
    "graph normal\n"
    "  input x: f64[3]\n"
    "  input y: f64\n"
    "  logp = sub(mul(-0.5, sum(square(x))), mul(0.5, square(y)))\n"
    "  output logp\n"
    "  output d_x = neg(x)\n"
    "  output d_y = neg(y)\n"
    "end\n";

static kiln_function *normal_function(void)
{
    kiln_graph *g = parse(normal_kg);
    if (!g || record_grad(g, "logp", "x", "d_x") ||
        record_grad(g, "logp", "y", "d_y")) {
        kiln_graph_free(g);
        return NULL;
    }
    return compile(g);
}

static void test_basic(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = normal_function();
    ok(f != NULL, "compile the normal model");
    if (!f)
        return;
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = kiln_function_logp_callback(f, "logp", &dim, &ud, &err);
    ok(fn != NULL && ud != NULL, "callback made %s", fn ? "" : err.message);
    if (!fn) {
        kiln_function_free(f);
        return;
    }
    ok(dim == 4, "dim is 3 + 1 = %llu", (unsigned long long)dim);
    double x[4] = {1, 2, 3, 0.5}, grad[4] = {0}, lp = 0;
    ok(fn(dim, x, grad, &lp, ud) == 0, "call returns 0");
    is_close(lp, -0.5 * 14 - 0.125, 1e-15, "logp = -7.125");
    ok(grad[0] == -1 && grad[1] == -2 && grad[2] == -3 && grad[3] == -0.5,
       "grad = -x, -y packed in declaration order: %g %g %g %g", grad[0],
       grad[1], grad[2], grad[3]);
    ok(strcmp(kiln_logp_callback_message(ud), "") == 0,
       "no message after success");
    ok(x[0] == 1 && x[3] == 0.5, "x is untouched");
    /* the pointer moves with x at every call */
    double x2[4] = {0, 0, 1, -2};
    ok(fn(dim, x2, grad, &lp, ud) == 0 && lp == -0.5 - 2 && grad[2] == -1 &&
       grad[3] == 2, "a second point: logp %g", lp);
    /* grad NULL: logp only */
    lp = 0;
    ok(fn(dim, x, NULL, &lp, ud) == 0 && lp == -7.125, "grad NULL: logp only");

    /* bad dims and NULL pointers: negative (non-recoverable), nothing
     * written */
    lp = 42;
    ok(fn(5, x, grad, &lp, ud) == KILN_LOGP_BAD_DIM && lp == 42,
       "dim 5 -> KILN_LOGP_BAD_DIM (%d)", KILN_LOGP_BAD_DIM);
    ok(strcmp(kiln_logp_callback_message(ud),
              "logp callback: called with dim 5, but the function's inputs "
              "have 4 elements") == 0,
       "message: %s", kiln_logp_callback_message(ud));
    ok(fn(4, NULL, grad, &lp, ud) == KILN_LOGP_BAD_DIM &&
       strcmp(kiln_logp_callback_message(ud),
              "logp callback: called with dim 4 and x NULL, but the "
              "function's inputs have 4 elements") == 0,
       "x NULL: %s", kiln_logp_callback_message(ud));
    ok(fn(4, x, grad, NULL, ud) == KILN_LOGP_BAD_DIM, "logp NULL");
    ok(fn(4, x, grad, &lp, NULL) == KILN_LOGP_BAD_DIM, "user_data NULL");
    ok(KILN_LOGP_BAD_DIM < 0 && KILN_LOGP_ERROR < 0 && KILN_LOGP_NONFINITE > 0,
       "nutpie's convention: positive = recoverable");

    /* a second callback on the same function is independent */
    uint64_t dim2 = 0;
    void *ud2 = NULL;
    kiln_logp_fn fn2 = kiln_function_logp_callback(f, "logp", &dim2, &ud2,
                                                   &err);
    ok(fn2 == fn && ud2 != ud && dim2 == 4, "a second callback of f");
    ok(fn(dim, x, grad, &lp, ud) == 0 && fn2(dim, x2, grad, &lp, ud2) == 0 &&
       lp == -2.5, "both usable");
    kiln_function_free(f);  /* frees both user_data (ASan: no leak) */
}

/* Mixed shapes and dtypes: a f64[2, 3] matrix, a f32 scalar, a f32[2]
 * vector; packing is C order, f32 values are rounded and widened. */
static void test_packing(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = parse(
        "kiln 1\n"
        "graph mixed\n"
        "  input a: f64[2, 3]\n"
        "  input s: f32\n"
        "  input b: f32[2]\n"
        "  const w: f64[2, 3] = [[1, 2, 3], [4, 5, 6]]\n"
        "  const c: f32[2] = [7, 8]\n"
        "  lp = add(sub(mul(0.5, sum(mul(w, square(a)))), mul(0.5, square(s))),"
        " mul(0.5, sum(mul(c, square(b)))))\n"
        "  output lp\n"
        "  output d_a = mul(w, a)\n"
        "  output d_s = neg(s)\n"
        "  output d_b = mul(c, b)\n"
        "end\n");
    if (!g || record_grad(g, "lp", "a", "d_a") ||
        record_grad(g, "lp", "s", "d_s") || record_grad(g, "lp", "b", "d_b")) {
        kiln_graph_free(g);
        ok(0, "mixed model");
        return;
    }
    kiln_function *f = compile(g);
    ok(f != NULL, "compile the mixed model");
    if (!f)
        return;
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = kiln_function_logp_callback(f, "lp", &dim, &ud, &err);
    ok(fn && dim == 9, "dim 6 + 1 + 2 = %llu %s", (unsigned long long)dim,
       fn ? "" : err.message);
    if (!fn) {
        kiln_function_free(f);
        return;
    }
    /* a[i][j] = x[3i + j]; s = x[6]; b = x[7..8]; 0.1 is not an f32 */
    double x[9] = {1, -1, 2, 0.5, 3, -2, 0.1, 0.5, -1.5};
    double grad[9], lp;
    ok(fn(dim, x, grad, &lp, ud) == 0, "call");
    double w[6] = {1, 2, 3, 4, 5, 6}, want = 0;
    int good = 1;
    for (int i = 0; i < 6; i++) {
        want += 0.5 * w[i] * x[i] * x[i];
        good &= grad[i] == w[i] * x[i];
    }
    ok(good, "d_a = w * a in C order: %g %g %g %g %g %g", grad[0], grad[1],
       grad[2], grad[3], grad[4], grad[5]);
    float s = (float)0.1;
    want += -0.5 * (double)(s * s) + 0.5 * (7 * 0.25 + 8 * 2.25);
    is_close(lp, want, 1e-6, "logp over mixed dtypes");
    ok(grad[6] == -(double)s, "f32 gradient widened: %.17g", grad[6]);
    ok(grad[7] == 3.5 && grad[8] == -12, "d_b = c * b: %g %g", grad[7],
       grad[8]);
    kiln_function_free(f);
}

static void test_errors(void)
{
    kiln_err err = {0, ""};
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_function *f = normal_function();
    if (!f) {
        ok(0, "compile");
        return;
    }
    ok(kiln_function_logp_callback(f, "lp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_NAME &&
       strcmp(err.message, "logp callback: no output named 'lp'") == 0,
       "no such output: %s", err.message);
    ok(kiln_function_logp_callback(f, "d_x", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_SHAPE &&
       strcmp(err.message, "logp callback: output 'd_x' must be a float "
                           "scalar, got f64[3]") == 0,
       "vector output: %s", err.message);
    ok(kiln_function_logp_callback(NULL, "logp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_ARG, "NULL f");
    ok(kiln_function_logp_callback(f, NULL, &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_ARG, "NULL name");
    ok(kiln_function_logp_callback(f, "logp", NULL, &ud, &err) == NULL &&
       kiln_function_logp_callback(f, "logp", &dim, NULL, &err) == NULL &&
       err.code == KILN_ERR_ARG &&
       strcmp(err.message, "kiln_function_logp_callback: NULL argument") == 0,
       "NULL dim / user_data: %s", err.message);
    kiln_function_free(f);

    /* an integer output; a symbolic input */
    kiln_graph *g = parse("kiln 1\ngraph g\n  input x: f64[n]\n"
                          "  input k: i64\n  output lp = sum(x)\n"
                          "  output ki = mul(k, 2)\nend\n");
    f = compile(g);
    ok(f && kiln_function_logp_callback(f, "ki", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_TYPE &&
       strcmp(err.message, "logp callback: output 'ki' must be a float "
                           "scalar, got i64") == 0,
       "integer output: %s", err.message);
    ok(f && kiln_function_logp_callback(f, "lp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_SHAPE &&
       strcmp(err.message, "logp callback: input 'x' has a symbolic or "
                           "unknown dim, f64[n]; the callback needs static "
                           "shapes") == 0,
       "symbolic input: %s", err.message);
    kiln_function_free(f);
    g = parse("kiln 1\ngraph g\n  input x: f64[2, ?]\n"
              "  output lp = sum(x)\nend\n");
    f = compile(g);
    ok(f && kiln_function_logp_callback(f, "lp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_SHAPE &&
       strcmp(err.message, "logp callback: input 'x' has a symbolic or "
                           "unknown dim, f64[2, ?]; the callback needs "
                           "static shapes") == 0,
       "unknown dim: %s", err.message);
    kiln_function_free(f);

    /* an integer input */
    g = parse("kiln 1\ngraph g\n  input k: i64\n  input x: f64[2]\n"
              "  output lp = mul(sum(x), k)\nend\n");
    f = compile(g);
    ok(f && kiln_function_logp_callback(f, "lp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_TYPE &&
       strcmp(err.message, "logp callback: input 'k' has dtype i64; every "
                           "input must be f64 or f32") == 0,
       "integer input: %s", err.message);
    kiln_function_free(f);

    /* a missing gradient (only x's is recorded); a gradient that is not an
     * output; a gradient of the wrong shape */
    g = parse(normal_kg);
    if (g)
        record_grad(g, "logp", "x", "d_x");
    f = compile(g);
    ok(f && kiln_function_logp_callback(f, "logp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_ARG &&
       strcmp(err.message, "logp callback: no output is the gradient of "
                           "'logp' with respect to input 'y'") == 0,
       "no gradient for y: %s", err.message);
    kiln_function_free(f);
    g = parse("kiln 1\ngraph g\n  input y: f64\n  lp = mul(-0.5, square(y))\n"
              "  dy = neg(y)\n  output lp\nend\n");
    if (g) {
        kiln_grad_rec *r = malloc(sizeof *r);
        r->cost = kiln_graph_lookup(g, "lp");
        r->wrt = kiln_graph_lookup(g, "y");
        r->result = kiln_graph_lookup(g, "dy");
        g->grads = r;
        g->n_grads = g->cap_grads = 1;
    }
    f = compile(g);
    ok(f && kiln_function_logp_callback(f, "lp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_ARG &&
       strcmp(err.message, "logp callback: no output is the gradient of "
                           "'lp' with respect to input 'y'") == 0,
       "a recorded gradient that is not an output: %s", err.message);
    kiln_function_free(f);
    g = parse(normal_kg);
    if (g) {
        record_grad(g, "logp", "x", "d_x");
        record_grad(g, "logp", "y", "d_x");
    }
    f = compile(g);
    ok(f && kiln_function_logp_callback(f, "logp", &dim, &ud, &err) == NULL &&
       err.code == KILN_ERR_SHAPE &&
       strcmp(err.message, "logp callback: gradient output 'd_x' is f64[3], "
                           "but input 'y' is f64") == 0,
       "gradient of the wrong shape: %s", err.message);
    kiln_function_free(f);
}

/* logp NaN, -inf and +inf: return 1 (recoverable), *logp set; two
 * callbacks on two outputs of one function. */
static void test_nonfinite(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = parse("kiln 1\ngraph g\n  input x: f64[2]\n"
                          "  output lp = sum(log(x))\n"
                          "  output g1 = true_div(1.0, x)\n"
                          "  output lq = sum(exp(x))\n"
                          "  output g2 = exp(x)\nend\n");
    if (g && (record_grad(g, "lp", "x", "g1") ||
              record_grad(g, "lq", "x", "g2"))) {
        kiln_graph_free(g);
        g = NULL;
    }
    kiln_function *f = compile(g);
    uint64_t dim = 0, dim2 = 0;
    void *ud = NULL, *ud2 = NULL;
    kiln_logp_fn fn = f ? kiln_function_logp_callback(f, "lp", &dim, &ud,
                                                      &err)
                        : NULL;
    kiln_logp_fn fq = f ? kiln_function_logp_callback(f, "lq", &dim2, &ud2,
                                                      &err)
                        : NULL;
    ok(fn && fq && dim == 2 && dim2 == 2, "two callbacks on one function %s",
       err.message);
    if (!fn || !fq) {
        kiln_function_free(f);
        return;
    }
    double grad[2], lp = 0;
    double x1[2] = {1, -1};
    ok(fn(2, x1, grad, &lp, ud) == KILN_LOGP_NONFINITE && isnan(lp) &&
       strcmp(kiln_logp_callback_message(ud), "logp callback: logp is nan") ==
           0,
       "log(-1): returns %d, logp nan, %s", KILN_LOGP_NONFINITE,
       kiln_logp_callback_message(ud));
    double x2[2] = {0, 1};
    ok(fn(2, x2, grad, &lp, ud) == KILN_LOGP_NONFINITE && isinf(lp) && lp < 0 &&
       strcmp(kiln_logp_callback_message(ud), "logp callback: logp is -inf") ==
           0,
       "log(0): logp -inf");
    double x3[2] = {1000, 0};
    ok(fq(2, x3, grad, &lp, ud2) == KILN_LOGP_NONFINITE && isinf(lp) &&
       lp > 0 &&
       strcmp(kiln_logp_callback_message(ud2), "logp callback: logp is inf") ==
           0,
       "exp(1000): logp inf");
    double x4[2] = {1, 2};
    ok(fn(2, x4, grad, &lp, ud) == 0 && lp == log(2.0) && grad[0] == 1 &&
       grad[1] == 0.5 && kiln_logp_callback_message(ud)[0] == 0,
       "back to a finite point: logp %g, grad %g %g", lp, grad[0], grad[1]);
    ok(fq(2, x4, grad, &lp, ud2) == 0 && lp == exp(1.0) + exp(2.0) &&
       grad[1] == exp(2.0), "the other output's callback: %g", lp);
    kiln_function_free(f);
}

/* The logp callback of `text`'s output lp over input x, dx recorded as
 * its gradient; *f is the compiled function (NULL on failure). */
static kiln_logp_fn lp_callback(const char *text, kiln_function **f,
                                uint64_t *dim, void **ud, kiln_err *err)
{
    kiln_graph *g = parse(text);
    if (g && record_grad(g, "lp", "x", "dx")) {
        kiln_graph_free(g);
        g = NULL;
    }
    *f = compile(g);
    return *f ? kiln_function_logp_callback(*f, "lp", dim, ud, err) : NULL;
}

/* A point the function rejects (a `check` op's false condition, as an
 * ODE solver's failure: KILN_ERR_CHECK) is KILN_LOGP_NONFINITE with logp
 * -inf, as Stan rejects a draw; a true condition runs as usual. */
static void test_call_reject(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = NULL;
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = lp_callback("kiln 1\ngraph g\n  input x: f64\n"
                                  "  lp0 = neg(square(x))\n"
                                  "  output lp = check(lp0, gt(x, 0.0), "
                                  "msg=\"x must be positive\")\n"
                                  "  output dx = mul(-2.0, x)\nend\n",
                                  &f, &dim, &ud, &err);
    if (!ok(fn && dim == 1, "callback over a check %s", err.message)) {
        kiln_function_free(f);
        return;
    }
    double x = -1, grad = 0, lp = 0;
    int rc = fn(1, &x, &grad, &lp, ud);
    ok(rc == KILN_LOGP_NONFINITE && lp == -INFINITY &&
           strstr(kiln_logp_callback_message(ud), "x must be positive"),
       "a rejected point -> KILN_LOGP_NONFINITE, logp -inf: %s",
       kiln_logp_callback_message(ud));
    x = 2;
    rc = fn(1, &x, &grad, &lp, ud);
    ok(rc == KILN_LOGP_OK && lp == -4 && grad == -4,
       "then an accepted point: logp %g", lp);
    kiln_function_free(f);
}

/* A call that fails inside kiln (a shared value never bound) is
 * KILN_LOGP_ERROR with kiln's message; binding it fixes the calls. */
static void test_call_error(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = NULL;
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = lp_callback("kiln 1\ngraph g\n  shared s: f64\n"
                                  "  input x: f64\n"
                                  "  output lp = mul(s, square(x))\n"
                                  "  output dx = mul(mul(2.0, s), x)\n"
                                  "end\n", &f, &dim, &ud, &err);
    ok(fn && dim == 1, "callback with an unbound shared value %s",
       err.message);
    if (!fn) {
        kiln_function_free(f);
        return;
    }
    double x = 2, grad = 0, lp = 0;
    ok(fn(1, &x, &grad, &lp, ud) == KILN_LOGP_ERROR &&
       strcmp(kiln_logp_callback_message(ud),
              "shared value 's' has no value; give it as data (kiln run "
              "--data FILE.json) or bind it with kiln_function_bind_shared")
           == 0,
       "failing call -> KILN_LOGP_ERROR: %s", kiln_logp_callback_message(ud));
    double s = 3;
    kiln_tensor st = {KILN_F64, 0, {0}, &s};
    int rc = kiln_function_bind_shared(f, "s", &st, &err);
    if (rc == 0)
        rc = fn(1, &x, &grad, &lp, ud);
    ok(rc == 0 && lp == 12 && grad == 12, "after binding: logp %g grad %g",
       lp, grad);
    kiln_function_free(f);
}

static void test_no_alloc(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = normal_function();
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = f ? kiln_function_logp_callback(f, "logp", &dim, &ud,
                                                      &err)
                        : NULL;
    if (!fn) {
        ok(0, "callback %s", err.message);
        kiln_function_free(f);
        return;
    }
    double x[4] = {1, 2, 3, 4}, grad[4], lp;
    ok(fn(dim, x, grad, &lp, ud) == 0, "first call");
#if COUNT_ALLOCS
    long before = n_allocs;
    int bad = 0;
    for (int r = 0; r < 1000; r++) {
        x[r % 4] = 0.001 * r;
        bad |= fn(dim, x, grad, &lp, ud) != 0;
        bad |= fn(dim, x, NULL, &lp, ud) != 0;
    }
    bad |= fn(dim + 1, x, grad, &lp, ud) != KILN_LOGP_BAD_DIM;
    ok(!bad && n_allocs == before,
       "no allocation in 2000 steady-state calls (%ld)", n_allocs - before);
#else
    ok(1, "# SKIP allocation counting under a sanitizer");
#endif
    kiln_function_free(f);
}

/* Several threads through one callback at once: each sees its own
 * point's result (tests/test_threads.c does this on real models, with
 * every backend, and checks the per-thread messages). */
typedef struct thread_arg {
    kiln_logp_fn fn;
    void *ud;
    double offset;
    int bad;
} thread_arg;

static void *thread_main(void *p)
{
    thread_arg *a = p;
    for (int r = 0; r < 300; r++) {
        double v = a->offset + r;
        double x[4] = {v, 0, 0, 1}, grad[4], lp;
        if (a->fn(4, x, grad, &lp, a->ud) != 0 ||
            lp != -0.5 * v * v - 0.5 || grad[0] != -v || grad[3] != -1)
            a->bad++;
    }
    return NULL;
}

static void test_threads(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = normal_function();
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = f ? kiln_function_logp_callback(f, "logp", &dim, &ud,
                                                      &err)
                        : NULL;
    if (!fn) {
        ok(0, "callback %s", err.message);
        kiln_function_free(f);
        return;
    }
    enum { NT = 4 };
    pthread_t th[NT];
    thread_arg args[NT];
    int started = 0;
    for (int t = 0; t < NT; t++) {
        args[t] = (thread_arg){fn, ud, 1000.0 * t, 0};
        if (pthread_create(&th[t], NULL, thread_main, &args[t]) == 0)
            started++;
        else
            break;
    }
    int bad = 0;
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        bad += args[t].bad;
    }
    ok(started == NT && bad == 0,
       "%d threads x 300 calls through one callback: %d wrong", started, bad);
    kiln_function_free(f);
}

/* ---- samplers through the plain function pointer ---------------------- */

static const char *std_normal_2d =
    "kiln 1\n"
    "graph std_normal\n"
    "  input q: f64[2]\n"
    "  logp = mul(-0.5, sum(square(q)))\n"
    "  output logp\n"
    "  output d_q = neg(q)\n"
    "end\n";

typedef struct moments {
    double mean[2], var[2];
    double accept;
} moments;

static void summarize(double (*draws)[2], int n, moments *m)
{
    for (int d = 0; d < 2; d++) {
        double s = 0, ss = 0;
        for (int i = 0; i < n; i++)
            s += draws[i][d];
        s /= n;
        for (int i = 0; i < n; i++)
            ss += (draws[i][d] - s) * (draws[i][d] - s);
        m->mean[d] = s;
        m->var[d] = ss / (n - 1);
    }
}

/* Random-walk Metropolis, proposal N(0, step^2 I). */
static int rwm(kiln_logp_fn fn, void *ud, int n, double step,
               double (*draws)[2], moments *m)
{
    double q[2] = {0, 0}, lp, prop[2], lpp;
    if (fn(2, q, NULL, &lp, ud))
        return -1;
    int acc = 0;
    for (int i = 0; i < n; i++) {
        prop[0] = q[0] + step * normal01();
        prop[1] = q[1] + step * normal01();
        int rc = fn(2, prop, NULL, &lpp, ud);
        if (rc < 0)
            return -1;
        if (rc == 0 && log(uniform01()) < lpp - lp) {
            q[0] = prop[0];
            q[1] = prop[1];
            lp = lpp;
            acc++;
        }
        draws[i][0] = q[0];
        draws[i][1] = q[1];
    }
    m->accept = (double)acc / n;
    summarize(draws, n, m);
    return 0;
}

/* HMC with an identity mass matrix: `steps` leapfrog steps of size eps. */
static int hmc(kiln_logp_fn fn, void *ud, int n, double eps, int steps,
               double (*draws)[2], moments *m)
{
    double q[2] = {0.5, -0.5}, g[2], lp;
    if (fn(2, q, g, &lp, ud))
        return -1;
    int acc = 0;
    for (int i = 0; i < n; i++) {
        double p[2] = {normal01(), normal01()};
        double qn[2] = {q[0], q[1]}, gn[2] = {g[0], g[1]}, lpn = lp;
        double h0 = -lp + 0.5 * (p[0] * p[0] + p[1] * p[1]);
        int rc = 0;
        for (int s = 0; s < steps && rc == 0; s++) {
            for (int d = 0; d < 2; d++) {
                p[d] += 0.5 * eps * gn[d];
                qn[d] += eps * p[d];
            }
            rc = fn(2, qn, gn, &lpn, ud);
            for (int d = 0; d < 2 && rc == 0; d++)
                p[d] += 0.5 * eps * gn[d];
        }
        if (rc < 0)
            return -1;
        double h1 = -lpn + 0.5 * (p[0] * p[0] + p[1] * p[1]);
        if (rc == 0 && log(uniform01()) < h0 - h1) {
            q[0] = qn[0];
            q[1] = qn[1];
            g[0] = gn[0];
            g[1] = gn[1];
            lp = lpn;
            acc++;
        }
        draws[i][0] = q[0];
        draws[i][1] = q[1];
    }
    m->accept = (double)acc / n;
    summarize(draws, n, m);
    return 0;
}

static void test_samplers(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = parse(std_normal_2d);
    if (g && record_grad(g, "logp", "q", "d_q")) {
        kiln_graph_free(g);
        g = NULL;
    }
    kiln_function *f = compile(g);
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = f ? kiln_function_logp_callback(f, "logp", &dim, &ud,
                                                      &err)
                        : NULL;
    ok(fn && dim == 2, "2-D standard normal callback %s", err.message);
    if (!fn) {
        kiln_function_free(f);
        return;
    }
    enum { N = 2000 };
    static double draws[N][2];
    moments m;
    rng_state = 20240611;
    ok(rwm(fn, ud, N, 1.5, draws, &m) == 0, "random-walk Metropolis, %d steps",
       N);
    diag("RWM: accept %.3f, mean (%.3f, %.3f), var (%.3f, %.3f)", m.accept,
         m.mean[0], m.mean[1], m.var[0], m.var[1]);
    ok(m.accept > 0.3 && m.accept < 0.8, "RWM acceptance %.3f in (0.3, 0.8)",
       m.accept);
    ok(fabs(m.mean[0]) < 0.3 && fabs(m.mean[1]) < 0.3,
       "RWM means %.3f %.3f near 0", m.mean[0], m.mean[1]);
    ok(m.var[0] > 0.6 && m.var[0] < 1.5 && m.var[1] > 0.6 && m.var[1] < 1.5,
       "RWM variances %.3f %.3f near 1", m.var[0], m.var[1]);

    rng_state = 77;
    ok(hmc(fn, ud, 1000, 0.25, 8, draws, &m) == 0,
       "HMC, 1000 iterations of 8 leapfrog steps");
    diag("HMC: accept %.3f, mean (%.3f, %.3f), var (%.3f, %.3f)", m.accept,
         m.mean[0], m.mean[1], m.var[0], m.var[1]);
    ok(m.accept > 0.9, "HMC acceptance %.3f > 0.9", m.accept);
    ok(fabs(m.mean[0]) < 0.15 && fabs(m.mean[1]) < 0.15,
       "HMC means %.3f %.3f near 0", m.mean[0], m.mean[1]);
    ok(m.var[0] > 0.8 && m.var[0] < 1.25 && m.var[1] > 0.8 && m.var[1] < 1.25,
       "HMC variances %.3f %.3f near 1", m.var[0], m.var[1]);
    kiln_function_free(f);
}

/* HMC in any dimension (identity mass matrix), for the radon model.
 * Returns -1 on a callback error; fills the acceptance rate and the means
 * of the draws after `burn` iterations. */
static int hmc_n(kiln_logp_fn fn, void *ud, uint64_t dim, double *q, int n,
                 int burn, double eps, int steps, double *accept,
                 double *mean)
{
    enum { MAXD = 128 };
    double g[MAXD], qn[MAXD], gn[MAXD], p[MAXD], lp, lpn;
    if (dim > MAXD || fn(dim, q, g, &lp, ud))
        return -1;
    int acc = 0;
    for (uint64_t d = 0; d < dim; d++)
        mean[d] = 0;
    for (int i = 0; i < n; i++) {
        double h0 = -lp;
        for (uint64_t d = 0; d < dim; d++) {
            p[d] = normal01();
            h0 += 0.5 * p[d] * p[d];
            qn[d] = q[d];
            gn[d] = g[d];
        }
        int rc = 0;
        for (int s = 0; s < steps && rc == 0; s++) {
            for (uint64_t d = 0; d < dim; d++) {
                p[d] += 0.5 * eps * gn[d];
                qn[d] += eps * p[d];
            }
            rc = fn(dim, qn, gn, &lpn, ud);
            for (uint64_t d = 0; d < dim && rc == 0; d++)
                p[d] += 0.5 * eps * gn[d];
        }
        if (rc < 0)
            return -1;
        double h1 = -lpn;
        for (uint64_t d = 0; d < dim; d++)
            h1 += 0.5 * p[d] * p[d];
        if (rc == 0 && log(uniform01()) < h0 - h1) {
            memcpy(q, qn, sizeof(double) * dim);
            memcpy(g, gn, sizeof(double) * dim);
            lp = lpn;
            acc++;
        }
        if (i >= burn)
            for (uint64_t d = 0; d < dim; d++)
                mean[d] += q[d] / (n - burn);
    }
    *accept = (double)acc / n;
    return 0;
}

/* ---- the radon model with kiln_graph_grad ------------------------------ */

static const char *radon_inputs[5] = {"mu_a", "log_sigma_a", "a_t", "b",
                                      "log_sigma_y"};

static void test_radon(void)
{
    kiln_err err = {0, ""};
    const char *top = getenv("KILN_SRCDIR");
    char path[4096], csv[4096];
    snprintf(path, sizeof path, "%s/examples/radon.kg", top ? top : ".");
    snprintf(csv, sizeof csv, "%s/examples/data/radon.csv", top ? top : ".");
    kiln_graph *g = kiln_parse_file(path, &err);
    ok(g != NULL, "parse radon.kg %s", g ? "" : err.message);
    if (!g)
        return;
    kiln_value logp = output_value(g, "logp");
    int recorded = 0;
    for (int r = 0; r < g->n_grads; r++)
        recorded += g->grads[r].cost == logp;
    if (recorded < 5) {
        /* the file has no grad(...) yet: differentiate here */
        kiln_value wrt[5], out[5];
        for (int i = 0; i < 5; i++)
            wrt[i] = kiln_graph_lookup(g, radon_inputs[i]);
        if (kiln_graph_grad(g, logp, 5, wrt, 0, out, &err)) {
            if (strstr(err.message, "not available yet"))
                ok(1, "# SKIP radon gradients: %s", err.message);
            else
                ok(0, "kiln_graph_grad on radon: %s", err.message);
            kiln_graph_free(g);
            return;
        }
        int bad = 0;
        for (int i = 0; i < 5; i++) {
            char name[64];
            snprintf(name, sizeof name, "test_d_%s", radon_inputs[i]);
            bad |= kiln_graph_output(g, name, out[i], &err) != 0;
        }
        ok(!bad, "gradient outputs added %s", err.message);
    } else {
        ok(1, "radon.kg records %d gradients of logp", recorded);
    }
    kiln_function *f = compile(g);
    uint64_t dim = 0;
    void *ud = NULL;
    kiln_logp_fn fn = f ? kiln_function_logp_callback(f, "logp", &dim, &ud,
                                                      &err)
                        : NULL;
    ok(fn && dim == 89, "radon callback, dim %llu (1 + 1 + 85 + 1 + 1) %s",
       (unsigned long long)dim, fn ? "" : err.message);
    if (!fn) {
        kiln_function_free(f);
        return;
    }
    /* the reference point of tests/test_cli.sh */
    double x[89] = {0}, grad[89], lp;
    x[0] = 1.5;
    x[1] = -0.5;
    x[87] = -0.7;
    x[88] = -0.3;
    ok(fn(dim, x, grad, &lp, ud) == 0, "radon call %s",
       kiln_logp_callback_message(ud));
    is_close(lp, -1192.6756431210813, 1e-12, "radon logp at the reference");

    /* independent derivatives at a_t = 0 (yhat = mu_a + b floor):
     * d/dmu_a = -mu_a/100 + sum r_i / sy^2,
     * d/dlog_sigma_y = 1 - sy^2/25 + sum (r_i/sy)^2 - N */
    kiln_tensor fl, yr;
    if (kiln_csv_read_column(csv, "floor", KILN_F64, &fl, &err) == 0 &&
        kiln_csv_read_column(csv, "log_radon", KILN_F64, &yr, &err) == 0) {
        double sy = exp(-0.3), sr = 0, sz2 = 0;
        int64_t n = yr.shape[0];
        for (int64_t i = 0; i < n; i++) {
            double r = ((double *)yr.data)[i] - 1.5 +
                       0.7 * ((double *)fl.data)[i];
            sr += r;
            sz2 += (r / sy) * (r / sy);
        }
        is_close(grad[0], -1.5 / 100 + sr / (sy * sy), 1e-10,
                 "d logp / d mu_a by hand");
        is_close(grad[88], 1 - sy * sy / 25 + sz2 - (double)n, 1e-10,
                 "d logp / d log_sigma_y by hand");
        free(fl.data);
        free(yr.data);
    } else {
        ok(0, "read radon.csv: %s", err.message);
    }

    /* every gradient against finite differences */
    kiln_tensor in[5];
    int64_t off = 0;
    for (int i = 0; i < 5; i++) {
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &dt, &rank, dims, NULL);
        in[i].dtype = dt;
        in[i].rank = rank;
        for (int k = 0; k < rank; k++)
            in[i].shape[k] = dims[k];
        in[i].data = x + off;
        off += kiln_shape_numel(rank, dims);
    }
    kiln_grad_check rows[8];
    int n_rows = 0;
    int rc = kiln_function_check_grad(f, in, rows, 8, &n_rows, &err);
    ok(rc == 0 && n_rows >= 5, "check_grad on radon: %d rows %s", n_rows,
       rc ? err.message : "");
    double worst = 0;
    for (int r = 0; r < n_rows && r < 8; r++)
        if (strcmp(rows[r].output, "logp") == 0 && rows[r].max_error > worst)
            worst = rows[r].max_error;
    ok(worst < 1e-6, "radon gradients match finite differences (%.2g)",
       worst);
#if COUNT_ALLOCS
    /* steady state: a tier-up that ends during the count swaps code in
     * and prepares its call (allocation that is not per call).  Let the
     * compiles queued so far end, swap them in, forbid more, then count. */
    kiln_function_tier_wait(f, -1);
    fn(dim, x, grad, &lp, ud);
    kiln_function_tier_forbid(f);
    fn(dim, x, grad, &lp, ud);
    long before = n_allocs;
    for (int r = 0; r < 50; r++)
        fn(dim, x, grad, &lp, ud);
    ok(n_allocs == before, "radon: no allocation in 50 calls (%ld)",
       n_allocs - before);
#endif
    /* a short HMC run on the real data through the plain function
     * pointer: the posterior means should land near the published
     * estimates (Gelman & Hill 2007, 12.3: mu_a ~ 1.46, b ~ -0.69, sigma_y
     * ~ 0.76), with loose bounds for 200 draws */
    {
        double q[89] = {0}, mean[89], accept = 0;
        q[0] = 1.5;
        q[1] = -0.5;
        q[87] = -0.7;
        q[88] = -0.3;
        int rc = hmc_n(fn, ud, dim, q, 200, 50, 0.01, 30, &accept, mean);
        ok(rc == 0, "HMC on radon, 200 iterations of 30 leapfrog steps %s",
           rc ? kiln_logp_callback_message(ud) : "");
        diag("radon HMC: accept %.2f, mu_a %.3f, b %.3f, sigma_y %.3f",
             accept, mean[0], mean[87], exp(mean[88]));
        ok(rc == 0 && accept > 0.3, "acceptance %.2f > 0.3", accept);
        ok(rc == 0 && fabs(mean[0] - 1.46) < 0.3 &&
               fabs(mean[87] + 0.69) < 0.25 && fabs(exp(mean[88]) - 0.76) <
                                                   0.1,
           "posterior means near the published estimates");
    }
    kiln_function_free(f);
}

int main(void)
{
    test_basic();
    test_packing();
    test_errors();
    test_nonfinite();
    test_call_error();
    test_call_reject();
    test_no_alloc();
    test_threads();
    test_samplers();
    test_radon();
    return done_testing();
}
