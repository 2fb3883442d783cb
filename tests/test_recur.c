/*
 * test_recur.c — node bodies and the recurrence op `scan` (issue 28),
 * end to end (.kg text -> kiln_parse_string -> kiln_compile -> call)
 * under every backend found, with the rewrite passes and without:
 *
 *  - several `graph` blocks per file; print writes bodies first (a body's
 *    own bodies before it), and print -> parse -> print is stable;
 *  - the RECUR kernel's key depends on the body's structure, not on its
 *    names or the model around it (same body, two models, one key), and
 *    changes with the body;
 *  - values: a linear recurrence, a two-carry recurrence with a vector
 *    carry and a per-step output, ARMA(1,1) errors, the HMM forward
 *    algorithm (log_sum_exp over states each step), T = 0 and T = 1,
 *    n_steps without a sequence; every backend against the interpreter
 *    (each against a reference computed here by a plain C loop, written
 *    from the recurrences' definitions, not from kiln);
 *  - bad input: a body that changes a carried shape (error names the
 *    body, the carry and both types), input count and sequence length
 *    mismatches, an unknown body name;
 *  - gradients by finite differences (gradcheck.h) through the stored
 *    trajectory, for all of the above, on every backend with the passes
 *    and without; the forward scan runs once in a gradient program (its
 *    body gains the trajectory, test_once).
 */
#include <kiln/cache.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/policy.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "found_backends.h"
#include "compile_text.h"
#include "gradcheck.h"

static const char *backend, *passes;

static kiln_function *compile_text(const char *text, kiln_err *err)
{
    return compile_kg_text(text, backend, passes, err);
}

static kiln_tensor T(int rank, const int64_t *shape, double *data)
{
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    t.data = data;
    return t;
}

static void expect(const char *what, const kiln_tensor *t, int n,
                   const double *want, double tol)
{
    int64_t numel = 1;
    for (int i = 0; i < t->rank; i++)
        numel *= t->shape[i];
    int good = t->dtype == KILN_F64 && numel == n;
    for (int i = 0; good && i < n; i++)
        good = fabs(((const double *)t->data)[i] - want[i]) <=
               tol * (1 + fabs(want[i]));
    ok(good, "%s [%s, passes %s]", what, backend, passes);
    if (!good) {
        diag("%lld elements (want %d)", (long long)numel, n);
        for (int i = 0; i < n && i < numel; i++)
            diag("  [%d] got %.17g want %.17g", i,
                 ((const double *)t->data)[i], want[i]);
    }
}

/* ---- text round trip and keys ----------------------------------------- */

static const char NESTED[] =
    "kiln 1\n"
    "graph inner\n"
    "  input c: f64\n"
    "  input x: f64\n"
    "  output c2 = add(c, x)\n"
    "end\n"
    "\n"
    "graph outer\n"
    "  input h: f64\n"
    "  input row: f64[m]\n"
    "  s = scan(h, row, body=inner, carries=1, seqs=1)\n"
    "  output h2 = mul(s, 0.5)\n"
    "  output y = s\n"
    "end\n"
    "\n"
    "graph main\n"
    "  input h0: f64\n"
    "  input xs: f64[n, m]\n"
    "  s = scan(h0, xs, body=outer, carries=1, seqs=1)\n"
    "  ys = result(s, index=1)\n"
    "  output last = s\n"
    "  output ys\n"
    "end\n";

static void test_print(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(NESTED, "n.kg", NULL, &err);
    char *p1 = g ? kiln_graph_print(g, &err) : NULL;
    kiln_graph *g2 = p1 ? kiln_parse_string(p1, "p.kg", NULL, &err) : NULL;
    char *p2 = g2 ? kiln_graph_print(g2, &err) : NULL;
    ok(p1 && p2 && strcmp(p1, p2) == 0, "print -> parse -> print of nested "
       "bodies is stable%s%s", err.message[0] ? ": " : "", err.message);
    /* bodies first, innermost first, then the graph itself */
    const char *a = p1 ? strstr(p1, "graph inner") : NULL;
    const char *b = p1 ? strstr(p1, "graph outer") : NULL;
    const char *c = p1 ? strstr(p1, "graph main") : NULL;
    ok(a && b && c && a < b && b < c, "print writes bodies first");
    ok(p1 && strstr(p1, "scan(h0, xs, body=outer, carries=1, seqs=1)") &&
       strstr(p1, "result(s, index=1)"), "scan and result print canonically");
    free(p1);
    free(p2);
    kiln_graph_free(g2);
    /* the builder's body outlives the caller's handle */
    kiln_graph *body = kiln_graph_new("twice", &err);
    int64_t none[1];
    kiln_value x = kiln_graph_input(body, "x", KILN_F64, 0, none, &err);
    kiln_value two = kiln_graph_literal(body, 2, KILN_LIT_FLOAT, &err);
    kiln_value in2[2] = {x, two};
    kiln_graph_output(body, "y", kiln_graph_op(body, "mul", 2, in2, NULL, 0,
                                               &err), &err);
    kiln_graph *m = kiln_graph_new("m", &err);
    kiln_value c0 = kiln_graph_input(m, "c0", KILN_F64, 0, none, &err);
    kiln_value s = kiln_graph_scan(m, body, 1, &c0, 0, NULL, 0, NULL, 3,
                                   &err);
    kiln_graph_free(body);
    kiln_graph_output(m, "out", s, &err);
    kiln_function *f = s >= 0 ? kiln_compile(m, NULL, &err) : NULL;
    double v = 1.5;
    kiln_tensor in = T(0, NULL, &v), out;
    ok(f && kiln_function_call(f, &in, &out, &err) == 0 &&
       *(double *)out.data == 12, "kiln_graph_scan with n_steps=3: "
       "1.5 * 2^3 = 12 after the caller freed the body%s%s",
       err.message[0] ? ": " : "", err.message);
    kiln_function_free(f);
    kiln_graph_free(m);
    kiln_graph_free(g);
}

/* The key of the first RECUR kernel of text's function. */
static int recur_key(const char *text, kiln_key *key)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(text, &err);
    int found = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f) && !found; i++) {
        kiln_kernel_info ki;
        memset(&ki, 0, sizeof ki);
        ki.struct_size = sizeof ki;
        if (kiln_function_kernel_info(f, i, &ki, NULL) == 0 &&
            ki.facts.kind == KILN_KERNEL_RECUR)
            found = kiln_function_kernel_key(f, i, key) == 0;
    }
    if (!f)
        diag("%s", err.message);
    kiln_function_free(f);
    return found;
}

static void test_keys(void)
{
    /* the same step under other names, in another model */
    static const char A[] =
        "kiln 1\ngraph step\n  input h: f64\n  input x: f64\n"
        "  output hn = add(mul(h, 0.9), x)\nend\n"
        "graph ma\n  input h0: f64\n  input xs: f64[n]\n"
        "  output s = scan(h0, xs, body=step, carries=1, seqs=1)\nend\n";
    static const char B[] =
        "kiln 1\ngraph other_name\n  input state: f64\n  input obs: f64\n"
        "  output next = add(mul(state, 0.9), obs)\nend\n"
        "graph mb\n  input a: f64\n  input b: f64\n  input ys: f64[k]\n"
        "  z = mul(a, b)\n"
        "  r = scan(z, ys, body=other_name, carries=1, seqs=1)\n"
        "  output r2 = add(r, 1.0)\nend\n";
    static const char C[] =
        "kiln 1\ngraph step\n  input h: f64\n  input x: f64\n"
        "  output hn = add(mul(h, 0.8), x)\nend\n"
        "graph ma\n  input h0: f64\n  input xs: f64[n]\n"
        "  output s = scan(h0, xs, body=step, carries=1, seqs=1)\nend\n";
    kiln_key ka, kb, kc;
    int got = recur_key(A, &ka) && recur_key(B, &kb) && recur_key(C, &kc);
    ok(got, "scans compile to RECUR kernels with keys [%s, passes %s]",
       backend, passes);
    ok(got && memcmp(&ka, &kb, sizeof ka) == 0,
       "same body in two models, other names: same key [%s, passes %s]",
       backend, passes);
    ok(got && memcmp(&ka, &kc, sizeof ka) != 0,
       "another body (a constant changed): another key [%s, passes %s]",
       backend, passes);
}

/* ---- values ------------------------------------------------------------ */

static const char LINEAR[] =
    "kiln 1\ngraph step\n  input h: f64\n  input x: f64\n  input a: f64\n"
    "  hn = add(mul(a, h), x)\n  output hn\n  output y = mul(hn, hn)\nend\n"
    "graph main\n  input h0: f64\n  input xs: f64[n]\n  input a: f64\n"
    "  s = scan(h0, xs, a, body=step, carries=1, seqs=1)\n"
    "  output last = s\n  output ys = result(s, index=1)\nend\n";

static void test_linear(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(LINEAR, &err);
    for (int n = 0; n <= 5; n += (n < 2 ? 1 : 3)) {   /* T = 0, 1, 2, 5 */
        double h0 = 0.7, a = -1.3, xs[5] = {0.5, -1, 2, 0.25, 3};
        kiln_tensor in[3] = {T(0, NULL, &h0), T(1, (int64_t[]){n}, xs),
                             T(0, NULL, &a)};
        kiln_tensor out[2];
        if (!f || kiln_function_call(f, in, out, &err)) {
            ok(0, "linear scan T=%d [%s]: %s", n, backend, err.message);
            continue;
        }
        double h = h0, ys[5];
        for (int t = 0; t < n; t++) {
            h = a * h + xs[t];
            ys[t] = h * h;
        }
        char what[64];
        snprintf(what, sizeof what, "linear recurrence T=%d: last", n);
        expect(what, &out[0], 1, &h, 1e-14);
        snprintf(what, sizeof what, "linear recurrence T=%d: stacked", n);
        expect(what, &out[1], n, ys, 1e-14);
        ok(out[1].rank == 1 && out[1].shape[0] == n,
           "stacked output has shape (%d) [%s, passes %s]", n, backend,
           passes);
    }
    kiln_function_free(f);
}

/* two carries (a scalar and a vector), a matrix arg, a stacked vector */
static const char TWO[] =
    "kiln 1\ngraph step\n"
    "  input s: f64\n  input v: f64[k]\n  input x: f64[k]\n"
    "  input w: f64[k, k]\n"
    "  vn = tanh(add(dot(w, v), x))\n"
    "  sn = add(s, sum(vn))\n"
    "  output sn\n  output vn\n  output e = exp(vn)\nend\n"
    "graph main\n  input s0: f64\n  input v0: f64[k]\n  input xs: f64[n, k]\n"
    "  input w: f64[k, k]\n"
    "  r = scan(s0, v0, xs, w, body=step, carries=2, seqs=1)\n"
    "  output sT = r\n  output vT = result(r, index=1)\n"
    "  output es = result(r, index=2)\nend\n";

static void test_two(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(TWO, &err);
    enum { N = 4, K = 3 };
    double s0 = 0.1, v0[K] = {0.2, -0.4, 0.3};
    double xs[N * K], w[K * K];
    for (int i = 0; i < N * K; i++)
        xs[i] = sin(1.7 * i);
    for (int i = 0; i < K * K; i++)
        w[i] = cos(0.9 * i) * 0.5;
    kiln_tensor in[4] = {T(0, NULL, &s0), T(1, (int64_t[]){K}, v0),
                         T(2, (int64_t[]){N, K}, xs),
                         T(2, (int64_t[]){K, K}, w)};
    kiln_tensor out[3];
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "two-carry scan [%s]: %s", backend, err.message);
        kiln_function_free(f);
        return;
    }
    double s = s0, v[K], es[N * K];
    memcpy(v, v0, sizeof v);
    for (int t = 0; t < N; t++) {
        double vn[K];
        for (int i = 0; i < K; i++) {
            double acc = 0;
            for (int j = 0; j < K; j++)
                acc += w[i * K + j] * v[j];
            vn[i] = tanh(acc + xs[t * K + i]);
        }
        for (int i = 0; i < K; i++) {
            v[i] = vn[i];
            s += vn[i];
            es[t * K + i] = exp(vn[i]);
        }
    }
    expect("two carries: scalar", &out[0], 1, &s, 1e-13);
    expect("two carries: vector", &out[1], K, v, 1e-13);
    expect("two carries: stacked (T, k)", &out[2], N * K, es, 1e-13);
    kiln_function_free(f);
}

/* posteriordb arma11: nu_t = mu + phi y_{t-1} + theta err_{t-1},
 * err_t = y_t - nu_t (t >= 2; err_1 = y_1 - mu - phi mu) */
static const char ARMA[] =
    "kiln 1\ngraph arma_step\n"
    "  input err: f64\n  input y: f64\n  input yprev: f64\n"
    "  input mu: f64\n  input phi: f64\n  input theta: f64\n"
    "  nu = add(add(mu, mul(phi, yprev)), mul(theta, err))\n"
    "  e = sub(y, nu)\n"
    "  output e\n  output e2 = e\nend\n"
    "graph main\n  input y: f64[n]\n  input mu: f64\n  input phi: f64\n"
    "  input theta: f64\n"
    "  err1 = sub(y[0], add(mu, mul(phi, mu)))\n"
    "  s = scan(err1, y[1:], y[:-1], mu, phi, theta, body=arma_step, "
    "carries=1, seqs=2)\n"
    "  errs = result(s, index=1)\n"
    "  output ss = add(square(err1), sum(square(errs)))\nend\n";

static void test_arma(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(ARMA, &err);
    enum { N = 7 };
    double y[N] = {0.3, -0.2, 1.1, 0.8, -0.5, 0.05, 0.6};
    double mu = 0.1, phi = 0.6, theta = -0.3;
    kiln_tensor in[4] = {T(1, (int64_t[]){N}, y), T(0, NULL, &mu),
                         T(0, NULL, &phi), T(0, NULL, &theta)};
    kiln_tensor out[1];
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "arma11 scan [%s]: %s", backend, err.message);
        kiln_function_free(f);
        return;
    }
    double e = y[0] - (mu + phi * mu), ss = e * e;
    for (int t = 1; t < N; t++) {
        e = y[t] - (mu + phi * y[t - 1] + theta * e);
        ss += e * e;
    }
    expect("arma11 errors: sum of squares", &out[0], 1, &ss, 1e-13);
    kiln_function_free(f);
}

/* HMM forward algorithm in log space:
 * a_t[k] = log_sum_exp_j(a_{t-1}[j] + log G[j, k]) + log p(y_t | k) */
static const char HMM[] =
    "kiln 1\ngraph fwd\n"
    "  input alpha: f64[K]\n  input ll: f64[K]\n  input logG: f64[K, K]\n"
    "  m = add(expand_dims(alpha, axis=1), logG)\n"
    "  an = add(logsumexp(m, axis=0), ll)\n"
    "  output an\nend\n"
    "graph main\n  input y: f64[n]\n  input mu: f64[K]\n"
    "  input logG: f64[K, K]\n  input alpha0: f64[K]\n"
    "  ll = sub(mul(-0.5, square(sub(expand_dims(y, axis=1), mu))), 0.91893853320467274)\n"
    "  aT = scan(alpha0, ll, logG, body=fwd, carries=1, seqs=1)\n"
    "  output lp = logsumexp(aT)\nend\n";

static double hmm_ref(int n, const double *y, int K, const double *mu,
                      const double *logG, const double *alpha0)
{
    double a[8], an[8];
    memcpy(a, alpha0, sizeof *a * (size_t)K);
    for (int t = 0; t < n; t++) {
        for (int k = 0; k < K; k++) {
            double mx = -INFINITY, s = 0;
            for (int j = 0; j < K; j++)
                if (a[j] + logG[j * K + k] > mx)
                    mx = a[j] + logG[j * K + k];
            for (int j = 0; j < K; j++)
                s += exp(a[j] + logG[j * K + k] - mx);
            double d = y[t] - mu[k];
            an[k] = mx + log(s) - 0.5 * d * d - 0.91893853320467274178;
        }
        memcpy(a, an, sizeof *a * (size_t)K);
    }
    double mx = -INFINITY, s = 0;
    for (int k = 0; k < K; k++)
        mx = a[k] > mx ? a[k] : mx;
    for (int k = 0; k < K; k++)
        s += exp(a[k] - mx);
    return mx + log(s);
}

static void test_hmm(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(HMM, &err);
    enum { N = 6, K = 3 };
    double y[N] = {0.2, 1.9, 2.2, -0.4, 0.1, 3.0};
    double mu[K] = {0, 2, 3};
    double G[K * K] = {0.8, 0.15, 0.05, 0.1, 0.7, 0.2, 0.3, 0.3, 0.4};
    double logG[K * K], alpha0[K] = {log(0.5), log(0.3), log(0.2)};
    for (int i = 0; i < K * K; i++)
        logG[i] = log(G[i]);
    kiln_tensor in[4] = {T(1, (int64_t[]){N}, y), T(1, (int64_t[]){K}, mu),
                         T(2, (int64_t[]){K, K}, logG),
                         T(1, (int64_t[]){K}, alpha0)};
    kiln_tensor out[1];
    if (!f || kiln_function_call(f, in, out, &err)) {
        ok(0, "hmm forward [%s]: %s", backend, err.message);
        kiln_function_free(f);
        return;
    }
    double want = hmm_ref(N, y, K, mu, logG, alpha0);
    expect("HMM forward algorithm: log p(y)", &out[0], 1, &want, 1e-12);
    kiln_function_free(f);
}

/* ---- bad input ---------------------------------------------------------- */

static void expect_error(const char *what, const char *text, int code,
                         const char *msg)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "bad.kg", NULL, &err);
    int good = !g && err.code == code && strstr(err.message, msg);
    ok(good, "%s", what);
    if (!good)
        diag("got code %d \"%s\", want %d with \"%s\"", err.code,
             err.message, code, msg);
    kiln_graph_free(g);
}

static void test_errors(void)
{
    expect_error("a body that changes a carried shape is refused, naming "
                 "the body, the carry and both types",
                 "kiln 1\ngraph grow\n  input v: f64[3]\n"
                 "  output w = join(0, v, v)\nend\n"
                 "graph m\n  input v0: f64[3]\n"
                 "  s = scan(v0, body=grow, carries=1, seqs=0, n_steps=2)\n"
                 "  output s\nend\n", KILN_ERR_SHAPE,
                 "bad.kg:8:7: scan: body 'grow' changes carry 'v' from "
                 "f64[3] to f64[6] (output 'w')");
    expect_error("a carry of the wrong shape for the body",
                 "kiln 1\ngraph b\n  input v: f64[3]\n  output w = v\nend\n"
                 "graph m\n  input v0: f64[4]\n"
                 "  s = scan(v0, body=b, carries=1, seqs=0, n_steps=2)\n"
                 "  output s\nend\n", KILN_ERR_SHAPE,
                 "scan: body 'b' input 'v' (carry 1) is f64[3], the scan "
                 "passes f64[4]");
    expect_error("input count mismatch",
                 "kiln 1\ngraph b\n  input v: f64\n  output w = v\nend\n"
                 "graph m\n  input v0: f64\n  input q: f64\n"
                 "  s = scan(v0, q, body=b, carries=1, seqs=0, n_steps=2)\n"
                 "  output s\nend\n", KILN_ERR_TYPE,
                 "scan: body 'b' has 1 input, the scan passes 2");
    expect_error("sequences of different lengths",
                 "kiln 1\ngraph b\n  input c: f64\n  input x: f64\n"
                 "  input z: f64\n  output w = add(c, mul(x, z))\nend\n"
                 "graph m\n  input c0: f64\n  input x: f64[3]\n"
                 "  input z: f64[4]\n"
                 "  s = scan(c0, x, z, body=b, carries=1, seqs=2)\n"
                 "  output s\nend\n", KILN_ERR_SHAPE,
                 "scan: sequence 2 has 4 steps, expected 3");
    expect_error("an unknown body",
                 "kiln 1\ngraph m\n  input c0: f64\n"
                 "  s = scan(c0, body=nope, carries=1, seqs=0, n_steps=2)\n"
                 "  output s\nend\n", KILN_ERR_NAME,
                 "scan: no graph named 'nope' before this one");
    expect_error("no step count",
                 "kiln 1\ngraph b\n  input v: f64\n  output w = v\nend\n"
                 "graph m\n  input v0: f64\n"
                 "  s = scan(v0, body=b, carries=1, seqs=0)\n"
                 "  output s\nend\n", KILN_ERR_TYPE,
                 "without a sequence, attribute 'n_steps'");
    expect_error("result of a node with one output",
                 "kiln 1\ngraph m\n  input c0: f64\n"
                 "  output r = result(exp(c0), index=1)\nend\n",
                 KILN_ERR_TYPE, "result: input must be a node with several "
                 "outputs (scan), got exp");
    expect_error("result index out of range",
                 "kiln 1\ngraph b\n  input v: f64\n  output w = v\nend\n"
                 "graph m\n  input v0: f64\n"
                 "  s = scan(v0, body=b, carries=1, seqs=0, n_steps=2)\n"
                 "  output r = result(s, index=1)\nend\n", KILN_ERR_TYPE,
                 "result: index 1, but the scan has 1 output");
    /* run time: the symbolic carry [k] of the body bound to 3, a step
     * changing it is caught when shapes are checked, never a crash */
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(
        "kiln 1\ngraph b\n  input c: f64[k]\n  input x: f64[k]\n"
        "  output w = add(c, x)\nend\n"
        "graph m\n  input c0: f64[k]\n  input xs: f64[n, j]\n"
        "  output s = scan(c0, xs, body=b, carries=1, seqs=1)\nend\n", &err);
    double c0[3] = {1, 2, 3}, xs[8] = {0};
    kiln_tensor in[2] = {T(1, (int64_t[]){3}, c0),
                         T(2, (int64_t[]){2, 4}, xs)};
    kiln_tensor out[1];
    int rc = f ? kiln_function_call(f, in, out, &err) : -1;
    ok(f && rc != 0 && strstr(err.message, "scan"),
       "a run-time size mismatch between carry and sequence fails the call "
       "with an error naming the scan [%s]: %s", backend, err.message);
    kiln_function_free(f);
}

/* ---- gradients ---------------------------------------------------------- */

static const char ARMA_GRAD[] =
    "kiln 1\ngraph arma_step\n"
    "  input err: f64\n  input y: f64\n  input yprev: f64\n"
    "  input mu: f64\n  input phi: f64\n  input theta: f64\n"
    "  nu = add(add(mu, mul(phi, yprev)), mul(theta, err))\n"
    "  e = sub(y, nu)\n"
    "  output e\n  output e2 = e\nend\n"
    "graph main\n  input y: f64[6]\n  input mu: f64\n  input phi: f64\n"
    "  input theta: f64\n"
    "  # range theta -0.9 0.9\n"
    "  err1 = sub(y[0], add(mu, mul(phi, mu)))\n"
    "  s = scan(err1, y[1:], y[:-1], mu, phi, theta, body=arma_step, "
    "carries=1, seqs=2)\n"
    "  output cost = add(square(err1), sum(square(result(s, index=1))))\n"
    "end\n";

/* A gradient check on the current backend and passes. */
static void gc_here(const char *what, const char *text, double tol)
{
    char label[160];
    snprintf(label, sizeof label, "%s [%s, passes %s]", what, backend,
             passes);
    gc_check_with(label, text, tol, backend, passes);
}

static void test_grads(void)
{
    gc_here("scan grad: linear recurrence, carry and stacked outputs",
             "kiln 1\ngraph step\n  input h: f64\n  input x: f64\n"
             "  input a: f64\n  hn = add(mul(a, h), x)\n  output hn\n"
             "  output y = mul(hn, hn)\nend\n"
             "graph main\n  input h0: f64\n  input xs: f64[5]\n"
             "  input a: f64\n"
             "  s = scan(h0, xs, a, body=step, carries=1, seqs=1)\n"
             "  output cost = add(sum(result(s, index=1)), mul(s, 3.0))\n"
             "end\n", 1e-6);
    gc_here("scan grad: two carries, vector carry, matrix arg",
             "kiln 1\ngraph step\n"
             "  input s: f64\n  input v: f64[3]\n  input x: f64[3]\n"
             "  input w: f64[3, 3]\n  vn = tanh(add(dot(w, v), x))\n"
             "  output sn = add(s, sum(vn))\n  output vn\n"
             "  output e = exp(vn)\nend\n"
             "graph main\n  input s0: f64\n  input v0: f64[3]\n"
             "  input xs: f64[4, 3]\n  input w: f64[3, 3]\n"
             "  r = scan(s0, v0, xs, w, body=step, carries=2, seqs=1)\n"
             "  output cost = add(mul(r, 0.5), add(sum(result(r, index=1)), "
             "sum(mul(result(r, index=2), 0.1))))\nend\n", 1e-6);
    gc_here("scan grad: arma11 sum of squared errors", ARMA_GRAD, 1e-6);
    gc_here("scan grad: HMM forward algorithm",
             "kiln 1\ngraph fwd\n"
             "  input alpha: f64[3]\n  input ll: f64[3]\n"
             "  input logG: f64[3, 3]\n"
             "  m = add(expand_dims(alpha, axis=1), logG)\n"
             "  output an = add(logsumexp(m, axis=0), ll)\nend\n"
             "graph main\n  input y: f64[5]\n  input mu: f64[3]\n"
             "  input logG: f64[3, 3]\n  input alpha0: f64[3]\n"
             "  ll = sub(mul(-0.5, square(sub(expand_dims(y, axis=1), mu))), 0.91893853320467274)\n"
             "  aT = scan(alpha0, ll, logG, body=fwd, carries=1, seqs=1)\n"
             "  output cost = logsumexp(aT)\nend\n", 1e-6);
    gc_here("scan grad: T = 1",
             "kiln 1\ngraph step\n  input h: f64\n  input x: f64\n"
             "  output hn = sin(add(h, x))\nend\n"
             "graph main\n  input h0: f64\n  input xs: f64[1]\n"
             "  output cost = scan(h0, xs, body=step, carries=1, seqs=1)\n"
             "end\n", 1e-6);
    gc_here("scan grad: n_steps, no sequence",
             "kiln 1\ngraph step\n  input h: f64[2]\n  input a: f64[2]\n"
             "  output hn = tanh(mul(h, a))\n  output o = sum(hn)\nend\n"
             "graph main\n  input h0: f64[2]\n  input a: f64[2]\n"
             "  s = scan(h0, a, body=step, carries=1, seqs=0, n_steps=4)\n"
             "  output cost = add(sum(s), sum(result(s, index=1)))\nend\n",
             1e-6);
}

/* ---- the forward runs once in a gradient program ------------------------
 *
 * The gradient replaces the forward scan's body by one that also outputs
 * the trajectory (its incoming carries) instead of adding a second
 * forward scan: arma's cost + gradient program has 2 RECUR steps (the
 * forward and the reverse scan), not 3.  A second gradient of the same
 * graph reuses the trajectory (the body gains no more outputs) and gives
 * the same values; the cost is the plain C loop's. */
static int n_recur(kiln_function *f)
{
    return count_kernels_of_kind(f, KILN_KERNEL_RECUR);
}

static kiln_function *compile_here(kiln_graph *g, kiln_err *err)
{
    return compile_kg_graph(g, backend, passes, err);
}

static void test_once(void)
{
    static const char *const wn[4] = {"y", "mu", "phi", "theta"};
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(ARMA_GRAD, "t.kg", NULL, &err);
    kiln_value s = g ? kiln_graph_lookup(g, "s") : -1;
    kiln_value cost = g ? kiln_graph_lookup(g, "cost") : -1;
    kiln_value wrt[4], d[8];
    for (int i = 0; g && i < 4; i++)
        wrt[i] = kiln_graph_lookup(g, wn[i]);
    int rc = g ? kiln_graph_grad(g, cost, 4, wrt, 0, d, &err) : -1;
    for (int i = 0; !rc && i < 4; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "d_%s", wn[i]);
        rc = kiln_graph_output(g, nm, d[i], &err);
    }
    if (!ok(!rc, "arma grad builds [%s, passes %s]: %s", backend, passes,
            err.message)) {
        kiln_graph_free(g);
        return;
    }
    kiln_err e2 = {0, ""};
    ok(kiln_graph_result(g, s, 2, &e2) >= 0 &&
           kiln_graph_result(g, s, 3, &e2) < 0,
       "the forward scan's body gained the trajectory as output 2, one "
       "output more [%s, passes %s]", backend, passes);
    kiln_function *f = compile_here(g, &err);
    ok(f && n_recur(f) == 2, "arma cost + gradient: 2 RECUR steps (the "
       "forward once, the reverse), got %d [%s, passes %s] %s", n_recur(f),
       backend, passes, f ? "" : err.message);
    double y[6] = {0.3, -0.2, 1.1, 0.8, -0.5, 0.05};
    double mu = 0.1, phi = 0.6, theta = -0.3;
    kiln_tensor in[4] = {T(1, (int64_t[]){6}, y), T(0, NULL, &mu),
                         T(0, NULL, &phi), T(0, NULL, &theta)};
    kiln_tensor out[9];
    double e = y[0] - (mu + phi * mu), ss = e * e;
    for (int t = 1; t < 6; t++) {
        e = y[t] - (mu + phi * y[t - 1] + theta * e);
        ss += e * e;
    }
    double g1[9];
    if (f && kiln_function_call(f, in, out, &err) == 0) {
        expect("arma cost from the gradient program", &out[0], 1, &ss,
               1e-13);
        for (int i = 0; i < 3; i++)
            g1[i] = *(double *)out[2 + i].data;
    } else {
        ok(0, "arma gradient program runs [%s, passes %s]: %s", backend,
           passes, err.message);
    }
    kiln_function_free(f);
    /* a second gradient reuses the trajectory */
    rc = kiln_graph_grad(g, cost, 4, wrt, 0, d + 4, &err);
    for (int i = 0; !rc && i < 4; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "e_%s", wn[i]);
        rc = kiln_graph_output(g, nm, d[4 + i], &err);
    }
    ok(!rc && kiln_graph_result(g, s, 2, &e2) >= 0 &&
           kiln_graph_result(g, s, 3, &e2) < 0,
       "a second gradient reuses the trajectory (no output added) [%s, "
       "passes %s] %s", backend, passes, rc ? err.message : "");
    f = rc ? NULL : compile_here(g, &err);
    int same = f && n_recur(f) == 3 &&
               kiln_function_call(f, in, out, &err) == 0;
    for (int i = 0; same && i < 3; i++)
        same = *(double *)out[2 + i].data == g1[i] &&
               *(double *)out[6 + i].data == g1[i];
    ok(same, "two gradients of one graph: 3 RECUR steps (one forward, two "
       "reverse), equal values [%s, passes %s] %s", backend, passes,
       f ? "" : err.message);
    kiln_function_free(f);
    kiln_graph_free(g);
}

int main(void)
{
    const char *bk[3];
    int nb = found_backends(bk);
    static const char *const pass_sets[] = {"all", "none"};
    test_print();
    test_errors();
    for (int b = 0; b < nb; b++)
        for (int p = 0; p < 2; p++) {
            backend = bk[b];
            passes = pass_sets[p];
            test_keys();
            test_linear();
            test_two();
            test_arma();
            test_hmm();
            test_grads();
            test_once();
        }
    backend = NULL;
    passes = NULL;
    return done_testing();
}
