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
 *    body gains the trajectory, test_once);
 *  - the fused RECUR kernel (the pass `recur`, ABI 1.10): garch11 and a
 *    body with i64, bool and f64 carries at T = 0, 1, 2, 5 under passes
 *    all (fused) and none (the host loop), each against a C loop, against
 *    each other (1e-13) and bitwise against the interpreter's fused run;
 *    strided sequences (steps -1 and 2), T from n_steps; which kernels
 *    fuse (kiln_function_kernel_info: arma11's and the HMM's logp+grad
 *    scans all have a program under passes all, none under none); an HMM
 *    forward over tensors (vector carry, matrix arg, stacked vectors,
 *    broadcasting, logsumexp/max/mean, transpose, subtensor, stack, join)
 *    fused against its C loop, the host path and the interpreter; a
 *    vector carry through dot(w, v): logp+grad fused, its value against
 *    the host path.
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
                 "outputs (scan, top_k), got exp");
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


/* Two carries, one of them a vector, a matrix arg and dot (fused under
 * passes all: tiny dots are scalarized). */
static const char VDOT[] =
    "kiln 1\ngraph step\n"
    "  input s: f64\n  input v: f64[3]\n  input x: f64[3]\n"
    "  input w: f64[3, 3]\n  vn = tanh(add(dot(w, v), x))\n"
    "  output sn = add(s, sum(vn))\n  output vn\n"
    "  output e = exp(vn)\nend\n"
    "graph main\n  input s0: f64\n  input v0: f64[3]\n"
    "  input xs: f64[4, 3]\n  input w: f64[3, 3]\n"
    "  r = scan(s0, v0, xs, w, body=step, carries=2, seqs=1)\n"
    "  output cost = add(mul(r, 0.5), add(sum(result(r, index=1)), "
    "sum(mul(result(r, index=2), 0.1))))\nend\n";

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
    gc_here("scan grad: two carries, vector carry, matrix arg", VDOT, 1e-6);
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


/* ---- the fused RECUR kernel (the pass `recur`, ABI 1.10) ---------------- */

/* The RECUR kernels of f: how many, and how many have a program. */
static void recur_kernels(const kiln_function *f, int *n, int *fused)
{
    *n = *fused = 0;
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_info ki;
        memset(&ki, 0, sizeof ki);
        ki.struct_size = sizeof ki;
        if (kiln_function_kernel_info(f, i, &ki, NULL) ||
            ki.facts.kind != KILN_KERNEL_RECUR)
            continue;
        (*n)++;
        *fused += ki.facts.scalar_ops > 0;
    }
}

/* GARCH(1,1) (posteriordb garch-garch11): sigma_t^2 = alpha0 + alpha1
 * (y_{t-1} - mu)^2 + beta1 sigma_{t-1}^2; the per-step log density
 * normal(y_t | mu, sigma_t) without its constant. */
static const char GARCH[] =
    "kiln 1\ngraph garch_step\n"
    "  input s2: f64\n  input y: f64\n  input yprev: f64\n"
    "  input mu: f64\n  input a0: f64\n  input a1: f64\n  input b1: f64\n"
    "  s2n = add(add(a0, mul(a1, square(sub(yprev, mu)))), mul(b1, s2))\n"
    "  lp = sub(mul(-0.5, true_div(square(sub(y, mu)), s2n)), "
    "mul(0.5, log(s2n)))\n"
    "  output s2n\n  output lp\nend\n"
    "graph main\n  input y: f64[n]\n  input yprev: f64[n]\n"
    "  input s20: f64\n  input mu: f64\n  input a0: f64\n  input a1: f64\n"
    "  input b1: f64\n"
    "  s = scan(s20, y, yprev, mu, a0, a1, b1, body=garch_step, carries=1, "
    "seqs=2)\n"
    "  output s2T = s\n  output lps = result(s, index=1)\nend\n";

/* An i64 and a bool carry beside an f64 one: the count of positive
 * elements, whether every element so far was below 1, and a running
 * sum that restarts when the count is even; stacked: the count as f64
 * and the input itself (a per-step output that is a body input). */
static const char MIXED[] =
    "kiln 1\ngraph mixed_step\n"
    "  input c: i64\n  input b: bool\n  input acc: f64\n  input x: f64\n"
    "  cn = add(c, cast(gt(x, 0.0), dtype=i64))\n"
    "  bn = and(b, lt(x, 1.0))\n"
    "  even = eq(mod(cn, 2), 0)\n"
    "  accn = where(even, x, add(acc, x))\n"
    "  output cn\n  output bn\n  output accn\n"
    "  output cf = cast(cn, dtype=f64)\n  output xe = x\nend\n"
    "graph main\n  input c0: i64\n  input b0: bool\n  input acc0: f64\n"
    "  input xs: f64[n]\n"
    "  s = scan(c0, b0, acc0, xs, body=mixed_step, carries=3, seqs=1)\n"
    "  output cT = s\n  output bT = result(s, index=1)\n"
    "  output accT = result(s, index=2)\n  output cfs = result(s, index=3)\n"
    "  output xes = result(s, index=4)\nend\n";

static kiln_tensor TT(kiln_dtype dt, int rank, const int64_t *shape,
                      void *data)
{
    kiln_tensor t = T(rank, shape, data);
    t.dtype = dt;
    return t;
}

/* out[k] of a call as doubles (f64, i64 or bool), nout outputs into
 * vals (row after row); the element count of each into counts. */
static int flatten(const kiln_tensor *out, int nout, double *vals, int cap,
                   int *counts)
{
    int at = 0;
    for (int k = 0; k < nout; k++) {
        int64_t numel = 1;
        for (int d = 0; d < out[k].rank; d++)
            numel *= out[k].shape[d];
        counts[k] = (int)numel;
        for (int64_t i = 0; i < numel && at < cap; i++, at++) {
            const void *p = out[k].data;
            vals[at] = out[k].dtype == KILN_F64 ? ((const double *)p)[i]
                       : out[k].dtype == KILN_I64
                           ? (double)((const int64_t *)p)[i]
                           : (double)((const uint8_t *)p)[i];
        }
    }
    return at;
}

/* Values of the garch and mixed scans at T: the call's outputs
 * flattened; -1 when it fails. */
static int run_garch(kiln_function *f, int n, double *vals, int cap,
                     kiln_err *err)
{
    double y[5] = {0.4, -1.2, 0.3, 2.0, -0.7}, yp[5] = {0.1, 0.4, -1.2, 0.3,
                                                         2.0};
    double s20 = 0.9, mu = 0.05, a0 = 0.2, a1 = 0.3, b1 = 0.5;
    kiln_tensor in[7] = {T(1, (int64_t[]){n}, y), T(1, (int64_t[]){n}, yp),
                         T(0, NULL, &s20), T(0, NULL, &mu), T(0, NULL, &a0),
                         T(0, NULL, &a1), T(0, NULL, &b1)};
    kiln_tensor out[2];
    int counts[2];
    if (kiln_function_call(f, in, out, err))
        return -1;
    return flatten(out, 2, vals, cap, counts);
}

static int run_mixed(kiln_function *f, int n, double *vals, int cap,
                     kiln_err *err)
{
    double xs[5] = {0.5, -0.3, 2.5, 0.25, 0.7};
    int64_t c0 = 3;
    uint8_t b0 = 1;
    double acc0 = 0.125;
    kiln_tensor in[4] = {TT(KILN_I64, 0, NULL, &c0),
                         TT(KILN_BOOL, 0, NULL, &b0), T(0, NULL, &acc0),
                         T(1, (int64_t[]){n}, xs)};
    kiln_tensor out[5];
    int counts[5];
    if (kiln_function_call(f, in, out, err))
        return -1;
    return flatten(out, 5, vals, cap, counts);
}

/* The references, by plain C loops from the definitions above. */
static int garch_ref(int n, double *vals)
{
    double y[5] = {0.4, -1.2, 0.3, 2.0, -0.7}, yp[5] = {0.1, 0.4, -1.2, 0.3,
                                                         2.0};
    double s2 = 0.9, mu = 0.05, a0 = 0.2, a1 = 0.3, b1 = 0.5, lp[5];
    for (int t = 0; t < n; t++) {
        s2 = a0 + a1 * (yp[t] - mu) * (yp[t] - mu) + b1 * s2;
        lp[t] = -0.5 * ((y[t] - mu) * (y[t] - mu)) / s2 - 0.5 * log(s2);
    }
    vals[0] = s2;
    memcpy(vals + 1, lp, sizeof(double) * (size_t)n);
    return 1 + n;
}

static int mixed_ref(int n, double *vals)
{
    double xs[5] = {0.5, -0.3, 2.5, 0.25, 0.7}, acc = 0.125, cf[5];
    int64_t c = 3;
    int b = 1;
    for (int t = 0; t < n; t++) {
        c += xs[t] > 0;
        b = b && xs[t] < 1;
        acc = c % 2 == 0 ? xs[t] : acc + xs[t];
        cf[t] = (double)c;
    }
    vals[0] = (double)c;
    vals[1] = b;
    vals[2] = acc;
    memcpy(vals + 3, cf, sizeof(double) * (size_t)n);
    memcpy(vals + 3 + n, xs, sizeof(double) * (size_t)n);
    return 3 + 2 * n;
}

/* An HMM forward step over tensors (vector carry, matrix arg, a
 * sequence of vectors read through a slice, stacked vectors) with the
 * ops the scalarizer handles: broadcasting, expand_dims, logsumexp, max,
 * mean, transpose, subtensor, stack and join; a stacked matrix. */
static const char HMMF[] =
    "kiln 1\ngraph hstep\n"
    "  input a: f64[3]\n  input ll: f64[3]\n  input lG: f64[3, 3]\n"
    "  m = add(expand_dims(a, axis=1), lG)\n"
    "  an = add(logsumexp(m, axis=0), ll)\n"
    "  output an\n  output tr = an\n"
    "  output o = join(an[1:], stack(max(transpose(m), axis=1)[0], "
    "mean(an)), axis=0)\n  output mt = transpose(m)\nend\n"
    "graph main\n  input a0: f64[3]\n  input lls: f64[m, 3]\n"
    "  input lG: f64[3, 3]\n"
    "  s = scan(a0, lls[1:], lG, body=hstep, carries=1, seqs=1)\n"
    "  output aT = s\n  output tr = result(s, index=1)\n"
    "  output o = result(s, index=2)\n"
    "  output mt = result(s, index=3)\nend\n";

static const double hmm_a0[3] = {-0.7, -1.2, -1.6};
static const double hmm_lG[9] = {-0.2, -1.9, -3.0, -2.3, -0.36, -1.6, -1.2,
                                 -1.2, -0.9};
static const double hmm_lls[18] = {9, 9, 9, -0.5, -2.1, -4.0, -1.3, -0.2,
                                   -0.9, -3.3, -0.6, -0.1, -0.4, -1.7, -2.5,
                                   -2.0, -0.3, -1.1};

static int run_hmmf(kiln_function *f, int n, double *vals, int cap,
                    kiln_err *err)
{
    double a0[3], lG[9], lls[18];
    memcpy(a0, hmm_a0, sizeof a0);
    memcpy(lG, hmm_lG, sizeof lG);
    memcpy(lls, hmm_lls, sizeof lls);
    kiln_tensor in[3] = {T(1, (int64_t[]){3}, a0),
                         T(2, (int64_t[]){n + 1, 3}, lls),
                         T(2, (int64_t[]){3, 3}, lG)};
    kiln_tensor out[4];
    int counts[4];
    if (kiln_function_call(f, in, out, err))
        return -1;
    return flatten(out, 4, vals, cap, counts);
}

static int hmmf_ref(int n, double *vals)
{
    double a[3], an[3], tr[15], o[20], mt[45];
    memcpy(a, hmm_a0, sizeof a);
    for (int t = 0; t < n; t++) {
        double m[3][3];
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                m[j][k] = a[j] + hmm_lG[3 * j + k];
        for (int k = 0; k < 3; k++) {
            double mx = -INFINITY, s = 0;
            for (int j = 0; j < 3; j++)
                mx = m[j][k] > mx ? m[j][k] : mx;
            for (int j = 0; j < 3; j++)
                s += exp(m[j][k] - mx);
            an[k] = log(s) + mx + hmm_lls[3 * (t + 1) + k];
        }
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                mt[9 * t + 3 * k + j] = m[j][k];
        double mx0 = m[0][0] > m[1][0] ? m[0][0] : m[1][0];
        mx0 = m[2][0] > mx0 ? m[2][0] : mx0;
        memcpy(a, an, sizeof a);
        memcpy(tr + 3 * t, an, sizeof an);
        o[4 * t] = an[1];
        o[4 * t + 1] = an[2];
        o[4 * t + 2] = mx0;
        o[4 * t + 3] = (an[0] + an[1] + an[2]) / 3;
    }
    memcpy(vals, a, sizeof a);
    memcpy(vals + 3, tr, sizeof(double) * 3 * (size_t)n);
    memcpy(vals + 3 + 3 * n, o, sizeof(double) * 4 * (size_t)n);
    memcpy(vals + 3 + 7 * n, mt, sizeof(double) * 9 * (size_t)n);
    return 3 + 16 * n;
}

typedef int (*run_fn)(kiln_function *, int, double *, int, kiln_err *);
typedef int (*ref_fn)(int, double *);

/* the interpreter's fused values: [case][T index] */
static double fused_vals[3][4][128];
static int fused_n[3][4];

/* One scan text at T = 0, 1, 2, 5: fused (passes all) and host (passes
 * none) against the C loop (1e-13 relative), fused against host, and
 * fused bitwise against the interpreter's fused values. */
static void fused_case(int which, const char *name, const char *text,
                       run_fn run, ref_fn ref, int b)
{
    static const int Ts[4] = {0, 1, 2, 5};
    kiln_err err = {0, ""};
    kiln_function *ff = compile_kg_text(text, backend, "all", &err);
    kiln_function *fh = ff ? compile_kg_text(text, backend, "none", &err)
                           : NULL;
    if (!ff || !fh) {
        ok(0, "%s: compile [%s]: %s", name, backend, err.message);
        kiln_function_free(ff);
        kiln_function_free(fh);
        return;
    }
    int nr, nf;
    recur_kernels(ff, &nr, &nf);
    ok(nr == 1 && nf == 1, "%s: passes all fuse the scan into one RECUR "
       "kernel with a program [%s] (%d of %d)", name, backend, nf, nr);
    recur_kernels(fh, &nr, &nf);
    ok(nr == 1 && nf == 0, "%s: passes none keep the host's RECUR kernel "
       "[%s]", name, backend);
    for (int ti = 0; ti < 4; ti++) {
        int n = Ts[ti];
        double want[128], got[128], host[128];
        int nw = ref(n, want);
        int ng = run(ff, n, got, 128, &err);
        int nh = ng >= 0 ? run(fh, n, host, 128, &err) : -1;
        if (ng < 0 || nh < 0) {
            ok(0, "%s T=%d [%s]: %s", name, n, backend, err.message);
            continue;
        }
        int good = ng == nw && nh == nw, same = good, bit = good;
        for (int i = 0; good && i < nw; i++)
            good = fabs(got[i] - want[i]) <= 1e-13 * (1 + fabs(want[i]));
        for (int i = 0; same && i < nw; i++)
            same = fabs(got[i] - host[i]) <= 1e-13 * (1 + fabs(host[i]));
        if (b == 0) {
            memcpy(fused_vals[which][ti], got, sizeof got);
            fused_n[which][ti] = ng;
        } else if (bit) {
            bit = fused_n[which][ti] == ng &&
                  !memcmp(fused_vals[which][ti], got,
                          sizeof(double) * (size_t)ng);
        }
        ok(good, "%s T=%d fused: values [%s]", name, n, backend);
        ok(same, "%s T=%d fused against the host path within 1e-13 [%s]",
           name, n, backend);
        if (b > 0)
            ok(bit, "%s T=%d fused: bitwise the interpreter's [%s]", name, n,
               backend);
        if (!good || !same)
            for (int i = 0; i < nw && i < ng; i++)
                diag("  [%d] fused %.17g host %.17g want %.17g", i, got[i],
                     host[i], want[i]);
    }
    kiln_function_free(ff);
    kiln_function_free(fh);
}

/* f's gradient graph (d cost / d every input) compiled with `ps`. */
static kiln_function *grad_fn(const char *text, const char *ps,
                              kiln_err *err)
{
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, err);
    if (!g)
        return NULL;
    kiln_value cost = kiln_graph_lookup(g, "cost");
    kiln_value wrt[8], d[8];
    int n = 0;
    static const char *const names[] = {"y", "mu", "phi", "theta", "alpha0",
                                        "logG", "v0", "w"};
    for (int i = 0; i < 8; i++) {
        kiln_value v = kiln_graph_lookup(g, names[i]);
        if (v >= 0)
            wrt[n++] = v;
    }
    int rc = kiln_graph_grad(g, cost, n, wrt, KILN_GRAD_DISCONNECTED_ZERO, d,
                             err);
    for (int i = 0; !rc && i < n; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "d%d", i);
        rc = kiln_graph_output(g, nm, d[i], err);
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.passes = ps;
    o.quiet = 1;
    o.jobs = 1;
    kiln_function *f = rc ? NULL : kiln_compile(g, &o, err);
    kiln_graph_free(g);
    return f;
}

static const char HMM_GRAD[] =
    "kiln 1\ngraph fwd\n"
    "  input alpha: f64[3]\n  input ll: f64[3]\n  input logG: f64[3, 3]\n"
    "  m = add(expand_dims(alpha, axis=1), logG)\n"
    "  output an = add(logsumexp(m, axis=0), ll)\nend\n"
    "graph main\n  input y: f64[5]\n  input mu: f64[3]\n"
    "  input logG: f64[3, 3]\n  input alpha0: f64[3]\n"
    "  ll = mul(-0.5, square(sub(expand_dims(y, axis=1), mu)))\n"
    "  aT = scan(alpha0, ll, logG, body=fwd, carries=1, seqs=1)\n"
    "  output cost = logsumexp(aT)\nend\n";

/* Which scans fuse: every RECUR kernel of arma's logp + gradient (the
 * forward, trajectory and reverse scans have rank-0 bodies) and of the
 * HMM's (vector carries, matrix args: scalarized) under passes all, none
 * under passes none. */
static void test_fused_which(void)
{
    kiln_err err = {0, ""};
    kiln_function *fa = grad_fn(ARMA_GRAD, "all", &err);
    kiln_function *fn = fa ? grad_fn(ARMA_GRAD, "none", &err) : NULL;
    kiln_function *fh = fn ? grad_fn(HMM_GRAD, "all", &err) : NULL;
    if (!fh) {
        ok(0, "logp+grad graphs compile [%s]: %s", backend, err.message);
    } else {
        int n, f;
        recur_kernels(fa, &n, &f);
        ok(n >= 2 && f == n, "arma11 logp+grad: all %d RECUR kernels have a "
           "program under passes all [%s] (%d fused)", n, backend, f);
        recur_kernels(fn, &n, &f);
        ok(n >= 2 && f == 0, "arma11 logp+grad: none of %d under passes "
           "none [%s]", n, backend);
        recur_kernels(fh, &n, &f);
        ok(n >= 2 && f == n, "HMM logp+grad: all %d RECUR kernels have a "
           "program under passes all (vector carries) [%s] (%d fused)", n,
           backend, f);
        kiln_function *fd = grad_fn(VDOT, "all", &err);
        recur_kernels(fd, &n, &f);
        ok(fd && n >= 2 && f == n, "vector carry, matrix arg, dot: logp+grad "
           "all %d RECUR kernels have a program under passes all [%s] (%d "
           "fused) %s", n, backend, f, fd ? "" : err.message);
        kiln_function_free(fd);
        /* its value fused (passes all) against the host loop (none) */
        kiln_function *va = compile_kg_text(VDOT, backend, "all", &err);
        kiln_function *vn = va ? compile_kg_text(VDOT, backend, "none", &err)
                               : NULL;
        double s0 = 0.3, v0[3] = {0.1, -0.4, 0.7},
               xs[12] = {0.5, -1, 0.2, 0.3, 0.9, -0.6, 1.1, 0, -0.2, 0.4,
                         0.8, -0.9},
               w[9] = {0.9, -0.3, 0.2, 0.1, 0.6, -0.5, -0.7, 0.4, 0.3};
        kiln_tensor vin[4] = {T(0, NULL, &s0), T(1, (int64_t[]){3}, v0),
                              T(2, (int64_t[]){4, 3}, xs),
                              T(2, (int64_t[]){3, 3}, w)};
        kiln_tensor o1[1], o2[1];
        int good = vn && !kiln_function_call(va, vin, o1, &err) &&
                   !kiln_function_call(vn, vin, o2, &err);
        double c1 = good ? *(double *)o1[0].data : 0,
               c2 = good ? *(double *)o2[0].data : 1;
        ok(good && fabs(c1 - c2) <= 1e-13 * (1 + fabs(c2)),
           "vector carry, matrix arg, dot: fused cost %.17g, host %.17g "
           "[%s] %s", c1, c2, backend, good ? "" : err.message);
        kiln_function_free(va);
        kiln_function_free(vn);
    }
    kiln_function_free(fa);
    kiln_function_free(fn);
    kiln_function_free(fh);
}


/* Strided sequences (step -1 and step 2 views), and a step
 * count from n_steps alone (no sequence, no stacked output) or from the
 * stacked outputs: fused (passes all) against plain C loops. */
static const char VIEWS[] =
    "kiln 1\ngraph vstep\n"
    "  input h: f64\n  input x: f64\n  input z: f64\n  input a: f64\n"
    "  hn = add(mul(a, h), mul(x, z))\n  output hn\n  output o = sub(hn, x)\n"
    "end\n"
    "graph main\n  input h0: f64\n  input xs: f64[8]\n  input zs: f64[16]\n"
    "  input a: f64\n"
    "  s = scan(h0, xs[::-1], zs[::2], a, body=vstep, carries=1, seqs=2)\n"
    "  output hT = s\n  output os = result(s, index=1)\nend\n";

static const char NSTEPS[] =
    "kiln 1\ngraph nstep\n  input h: f64\n  input c: i64\n  input a: f64\n"
    "  output hn = add(mul(a, h), 1.0)\n  output cn = add(c, 3)\nend\n"
    "graph main\n  input h0: f64\n  input c0: i64\n  input a: f64\n"
    "  s = scan(h0, c0, a, body=nstep, carries=2, seqs=0, n_steps=6)\n"
    "  output hT = s\n  output cT = result(s, index=1)\nend\n";

static void test_fused_views(void)
{
    kiln_err err = {0, ""};
    kiln_function *fv = compile_kg_text(VIEWS, backend, "all", &err);
    kiln_function *fn = fv ? compile_kg_text(NSTEPS, backend, "all", &err)
                           : NULL;
    if (!fn) {
        ok(0, "strided/n_steps scans compile [%s]: %s", backend,
           err.message);
        kiln_function_free(fv);
        return;
    }
    int nr, nf, nr2, nf2;
    recur_kernels(fv, &nr, &nf);
    recur_kernels(fn, &nr2, &nf2);
    ok(nf == 1 && nf2 == 1, "strided sequences and n_steps: fused [%s]",
       backend);
    double h0 = 0.3, a = 0.8, xs[8], zs[16], got[9], want[9];
    for (int i = 0; i < 8; i++)
        xs[i] = 0.25 * i - 0.6;
    for (int i = 0; i < 16; i++)
        zs[i] = cos(0.7 * i);
    kiln_tensor in[4] = {T(0, NULL, &h0), T(1, (int64_t[]){8}, xs),
                         T(1, (int64_t[]){16}, zs), T(0, NULL, &a)};
    kiln_tensor out[2];
    int counts[2];
    if (kiln_function_call(fv, in, out, &err)) {
        ok(0, "strided sequences [%s]: %s", backend, err.message);
    } else {
        int n = flatten(out, 2, got, 9, counts);
        double h = h0;
        for (int t = 0; t < 8; t++) {
            h = a * h + xs[7 - t] * zs[2 * t];
            want[1 + t] = h - xs[7 - t];
        }
        want[0] = h;
        int good = n == 9;
        for (int i = 0; good && i < 9; i++)
            good = fabs(got[i] - want[i]) <= 1e-13 * (1 + fabs(want[i]));
        ok(good, "sequences xs[::-1] and zs[::2] (strides -1, 2) [%s]",
           backend);
    }
    int64_t c0 = 5;
    kiln_tensor in2[3] = {T(0, NULL, &h0), TT(KILN_I64, 0, NULL, &c0),
                          T(0, NULL, &a)};
    if (kiln_function_call(fn, in2, out, &err)) {
        ok(0, "n_steps scan [%s]: %s", backend, err.message);
    } else {
        double h = h0;
        for (int t = 0; t < 6; t++)
            h = a * h + 1.0;
        ok(out[0].dtype == KILN_F64 && out[1].dtype == KILN_I64 &&
               fabs(*(double *)out[0].data - h) <= 1e-13 &&
               *(int64_t *)out[1].data == c0 + 18,
           "n_steps=6 without sequences: f64 and i64 carries [%s]", backend);
    }
    kiln_function_free(fv);
    kiln_function_free(fn);
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
    /* the fused loop kernel: each backend against the C loops, the host
     * path, and (bitwise) the interpreter (bk[0]) */
    for (int b = 0; b < nb; b++) {
        backend = bk[b];
        passes = "all";
        fused_case(0, "garch11", GARCH, run_garch, garch_ref, b);
        fused_case(1, "i64/bool/f64 carries", MIXED, run_mixed, mixed_ref,
                   b);
        fused_case(2, "HMM forward over tensors", HMMF, run_hmmf, hmmf_ref,
                   b);
        test_fused_which();
        test_fused_views();
    }
    backend = NULL;
    passes = NULL;
    return done_testing();
}
