/*
 * test_partition.c — data partitions (issue 30; <kiln/graph.h> and
 * <kiln/model.h> "Data partitions", docs/mpi.md "Partitions").
 *
 * For each model, on every backend: the sum over the P parts of
 * kiln_model_new_partition's log density and gradient equals the whole
 * model's (kiln_model_new: the serial computation) to 1e-12 relative, for
 * P = 1..5 and P > N (parts with no rows); kiln_graph_partition on plain
 * graphs with grad outputs, with data bound before (csv) and after (JSON)
 * the partition; every part compiles the same kernels (same keys; no new
 * cache misses); every error of the contract.
 */
#define _GNU_SOURCE
#include "tap.h"
#include "found_backends.h"
#include "jsondata.h"   /* kiln_json_data_bind_graph (kiln run --data) */

#include <kiln/cache.h>
#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *srcdir = ".";

/* ---- models ----------------------------------------------------------- */

/* linear regression: X [N, K] @ beta, two data arrays sized N, a bounded
 * sigma (jacobian on and off) */
static const char *LINREG =
    "kiln 1\n"
    "graph linreg\n"
    "  shared X: f64[N, K]\n"
    "  shared y: f64[N]\n"
    "  param beta: f64[K]\n"
    "  param alpha: f64\n"
    "  param sigma: f64 lower=0\n"
    "  partition N\n"
    "  mu = add(matmul(X, beta), alpha)\n"
    "  lp_y = normal_lpdf(y, mu, sigma)\n"
    "  lp_p = add(add(normal_lpdf(beta, 0, 5), normal_lpdf(alpha, 0, 5)), "
    "normal_lpdf(sigma, 0, 2))\n"
    "  output logp = add(lp_y, lp_p)\n"
    "  output tp s2 = square(sigma)\n"
    "end\n";

/* logistic regression (bernoulli_logit) */
static const char *LOGIT =
    "kiln 1\n"
    "graph logit\n"
    "  shared X: f64[N, K]\n"
    "  shared yb: i64[N]\n"
    "  param beta: f64[K]\n"
    "  param alpha: f64\n"
    "  eta = add(matmul(X, beta), alpha)\n"
    "  output logp = add(bernoulli_logit_lpmf(yb, eta), "
    "add(normal_lpdf(beta, 0, 2), normal_lpdf(alpha, 0, 2)))\n"
    "end\n";

/* hierarchical: per-observation group indices (take), a data value whose
 * axis is not its first dim (Xt [K, N]), bounds on both sides */
static const char *HIER =
    "kiln 1\n"
    "graph hier\n"
    "  shared grp: i64[N]\n"
    "  shared Xt: f64[K, N]\n"
    "  shared y: f64[N]\n"
    "  param a: f64[J]\n"
    "  param beta: f64[K]\n"
    "  param mu_a: f64\n"
    "  param tau: f64 lower=0\n"
    "  param sigma: f64 lower=0.1 upper=10\n"
    "  partition N\n"
    "  mu = add(a[grp], matmul(beta, Xt))\n"
    "  lp = add(normal_lpdf(y, mu, sigma), normal_lpdf(a, mu_a, tau))\n"
    "  output logp = add(lp, add(normal_lpdf(mu_a, 0, 1), "
    "normal_lpdf(tau, 0, 1)))\n"
    "  output gq ybar = true_div(sum(y), 3.0)\n"
    "end\n";

/* N read as a value: Stan's `int N` scalar, and a count of ones */
static const char *NVAL =
    "kiln 1\n"
    "graph nval\n"
    "  shared N: i64\n"
    "  shared y: f64[N]\n"
    "  param mu: f64\n"
    "  param sigma: f64 lower=0\n"
    "  partition N\n"
    "  ss = sum(square(sub(y, mu)))\n"
    "  lp = sub(sub(mul(-0.5, true_div(ss, square(sigma))), "
    "mul(N, log(sigma))), mul(N, 0.9189385332046727))\n"
    "  cnt = sum(ones(shape=[N]))\n"
    "  output logp = add(add(lp, normal_lpdf(mu, 0, 10)), mul(0.25, cnt))\n"
    "end\n";

/* checks over the rows as kiln.pymc emits PyMC's check_parameters:
 * where(all(c), x, -inf), the conditions stacked and anded, -inf an f32
 * constant cast; c3 fails on a row y_i within 0.03 of a; lp_z guards a
 * sum (where(GUARD, SUM, -inf)) */
static const char *GUARD =
    "kiln 1\n"
    "graph guard\n"
    "  shared X: f64[N, K]\n"
    "  shared y: f64[N]\n"
    "  shared yb: i64[N]\n"
    "  param beta: f64[K]\n"
    "  param a: f64\n"
    "  const ninf: f32[1] = [-inf]\n"
    "  partition N\n"
    "  eta = add(matmul(X, beta), a)\n"
    "  lrow = where(ne(yb, 0), neg(softplus(neg(eta))), "
    "neg(softplus(eta)))\n"
    "  p = sigmoid(eta)\n"
    "  c1 = all(le(p, 1.0), axis=[0])\n"
    "  c2 = all(ge(p, 0.0), axis=[0])\n"
    "  c3 = all(gt(square(sub(y, a)), 0.001), axis=[0])\n"
    "  okp = expand_dims(all(stack(c2, c1), axis=[0]), axis=[0])\n"
    "  ok3 = expand_dims(c3, axis=[0])\n"
    "  lp_y = sum(where(and(okp, ok3), lrow, cast(ninf, dtype=f64)), "
    "axis=[0])\n"
    "  lp_z = sum(where(ok3, mul(-0.5, sum(square(sub(y, a)))), "
    "cast(ninf, dtype=f64)))\n"
    "  output logp = add(add(lp_y, lp_z), add(normal_lpdf(beta, 0, 2), "
    "normal_lpdf(a, 0, 2)))\n"
    "end\n";

#define NR 7    /* rows */

static char *fmt_data(const char *which)
{
    static char buf[4096];
    char *p = buf;
    size_t left = sizeof buf;
    int k;
#define PUT(...) (k = snprintf(p, left, __VA_ARGS__), p += k, left -= (size_t)k)
    PUT("{\"N\": %d, \"K\": 2, \"J\": 3, \"X\": [", NR);
    for (int i = 0; i < NR; i++)
        PUT("%s[%.3f, %.3f]", i ? ", " : "", sin(1.0 + i), cos(2.0 * i));
    PUT("], \"Xt\": [");
    for (int r = 0; r < 2; r++) {
        PUT("%s[", r ? ", " : "");
        for (int i = 0; i < NR; i++)
            PUT("%s%.3f", i ? ", " : "", r ? cos(2.0 * i) : sin(1.0 + i));
        PUT("]");
    }
    PUT("], \"y\": [");
    for (int i = 0; i < NR; i++)
        PUT("%s%.3f", i ? ", " : "", 0.7 * i - 1.5 + 0.3 * sin(5.0 * i));
    PUT("], \"yb\": [");
    for (int i = 0; i < NR; i++)
        PUT("%s%d", i ? ", " : "", (i * 5 + 1) % 3 == 0);
    PUT("], \"grp\": [");
    for (int i = 0; i < NR; i++)
        PUT("%s%d", i ? ", " : "", (i * 2) % 3);
    PUT("]}");
#undef PUT
    (void)which;
    return buf;
}

static kiln_options opts(const char *be)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = be;
    o.quiet = 1;
    o.jobs = 1;
    return o;
}

static int close_rel(const double *got, const double *want, int n)
{
    double scale = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(want[i]))
            scale = fmax(scale, fabs(want[i]));
    for (int i = 0; i < n; i++)
        if (!(isnan(got[i]) && isnan(want[i])) &&   /* NaN where serial is */
            !(fabs(got[i] - want[i]) <= 1e-12 * fmax(scale, 1e-300)) &&
            !(fabs(got[i] - want[i]) <= 1e-12 * fabs(want[i]))) {
            diag("value %d: got %.17g, want %.17g", i, got[i], want[i]);
            return 0;
        }
    return 1;
}

/* Sum over parts == the whole, for P in 1..5 and nbig (> rows). */
static void check_model(const char *name, const char *kg, const char *path,
                        const char *data, const char *axis, int nbig,
                        const char *be)
{
    kiln_err e;
    kiln_graph *g = kg ? kiln_parse_string(kg, "m.kg", NULL, &e)
                       : kiln_parse_file(path, &e);
    if (!ok(g != NULL, "[%s] %s: parsed", be, name)) {
        diag("%s", e.message);
        return;
    }
    kiln_options o = opts(be);
    kiln_model *whole = kiln_model_new(g, NULL, data, &o, NULL, &e);
    if (!ok(whole != NULL, "[%s] %s: whole model", be, name)) {
        diag("%s", e.message);
        kiln_graph_free(g);
        return;
    }
    int n = kiln_model_n_unc(whole);
    double *u = malloc(sizeof *u * (size_t)(n + 1));
    double *gw = malloc(sizeof *gw * (size_t)(n + 1));
    double *gs = malloc(sizeof *gs * (size_t)(n + 1));
    double *gp = malloc(sizeof *gp * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        u[i] = 0.3 * sin(1.7 * i + 0.4);
    int sizes[6] = {1, 2, 3, 4, 5, nbig};
    for (int jac = 0; jac < 2; jac++) {
        double lpw;
        if (kiln_model_log_density(whole, jac, u, &lpw, gw, &e)) {
            ok(0, "[%s] %s: whole log density", be, name);
            diag("%s", e.message);
            continue;
        }
        for (int s = 0; s < 6; s++) {
            int P = sizes[s], good = 1;
            double lps = 0;
            int64_t next = 0, tot = -1;
            memset(gs, 0, sizeof *gs * (size_t)n);
            for (int p = 0; p < P && good; p++) {
                kiln_partition part = {axis, p, P};
                kiln_model *m = kiln_model_new_partition(g, NULL, data, &part,
                                                         &o, NULL, &e);
                double lpp;
                if (!m || kiln_model_log_density(m, jac, u, &lpp, gp, &e)) {
                    diag("part %d of %d: %s", p, P, e.message);
                    good = 0;
                    kiln_model_free(m);
                    break;
                }
                int64_t t, b, en;
                const char *an = kiln_model_partition_range(m, &t, &b, &en);
                /* the part's row count: the rows r with floor(r P / t)
                 * = p (so part 0 has rows whenever any; parts nest) */
                int64_t want = 0;
                for (int64_t r = 0; r < t; r++)
                    want += r * P / t == p;
                if (!an || b != next || en - b != want ||
                    (axis && strcmp(an, axis)))
                    good = 0;
                next = en;
                tot = t;
                lps += lpp;
                for (int i = 0; i < n; i++)
                    gs[i] += gp[i];
                kiln_model_free(m);
            }
            int rows_ok = good && next == tot;
            ok(good && rows_ok, "[%s] %s: %d part%s made, rows contiguous, "
               "floor(r P / T) = p's counts (jacobian %d)", be, name, P, P > 1 ? "s" : "", jac);
            ok(good && close_rel(&lps, &lpw, 1) && close_rel(gs, gw, n),
               "[%s] %s: sum of %d parts' lp and gradient = the whole's "
               "(jacobian %d)", be, name, P, jac);
        }
    }
    free(u);
    free(gw);
    free(gs);
    free(gp);
    kiln_model_free(whole);
    kiln_graph_free(g);
}

/* GUARD at points where one row's check fails (a = y_0, y_3, y_6: rows in
 * the first, a middle and the last part): the whole's lp is -inf, and so
 * is the sum of the parts' for P = 1..5 and P > N. */
static void check_guard_fails(const char *data, const char *be)
{
    kiln_err e;
    kiln_graph *g = kiln_parse_string(GUARD, "m.kg", NULL, &e);
    kiln_options o = opts(be);
    kiln_model *whole = g ? kiln_model_new(g, NULL, data, &o, NULL, &e)
                          : NULL;
    if (!ok(whole != NULL, "[%s] guard: whole model", be)) {
        diag("%s", e.message);
        kiln_graph_free(g);
        return;
    }
    const int rows[3] = {0, 3, NR - 1};
    int sizes[6] = {1, 2, 3, 4, 5, NR + 2};
    for (int r = 0; r < 3; r++) {
        int i = rows[r];
        double yi = 0.7 * i - 1.5 + 0.3 * sin(5.0 * i);   /* fmt_data */
        double u[3] = {0.1, -0.2, round(yi * 1000) / 1000 + 0.01}, lpw, gw[3];
        int good = !kiln_model_log_density(whole, 1, u, &lpw, gw, &e) &&
                   isinf(lpw) && lpw < 0;
        for (int s = 0; s < 6 && good; s++) {
            double lps = 0;
            for (int p = 0; p < sizes[s] && good; p++) {
                kiln_partition part = {"N", p, sizes[s]};
                kiln_model *m = kiln_model_new_partition(g, NULL, data, &part,
                                                         &o, NULL, &e);
                double lpp, gp[3];
                good = m && !kiln_model_log_density(m, 1, u, &lpp, gp, &e);
                lps += good ? lpp : 0;
                kiln_model_free(m);
            }
            good = good && isinf(lps) && lps < 0;
            if (!good)
                diag("%d parts: %.17g (%s)", sizes[s], lps, e.message);
        }
        ok(good, "[%s] guard: row %d's check fails: the whole's lp is -inf, "
           "and the sum of 1..5 and %d parts' lp", be, i, NR + 2);
    }
    kiln_model_free(whole);
    kiln_graph_free(g);
}

/* ---- plain graphs ------------------------------------------------------- */

/* Add d out / d each of the NULL-terminated inputs as outputs gradK. */
static int add_grads(kiln_graph *g, const char *out, const char *const *ins,
                     kiln_err *e)
{
    kiln_value wrt[16], res[16];
    int n = 0;
    while (ins[n] && n < 16) {
        wrt[n] = kiln_graph_lookup(g, ins[n]);
        n++;
    }
    kiln_value cost = kiln_graph_lookup(g, out);
    if (kiln_graph_grad(g, cost, n, wrt, KILN_GRAD_DISCONNECTED_ZERO, res, e))
        return -1;
    for (int k = 0; k < n; k++) {
        char on[64];
        snprintf(on, sizeof on, "grad%d", k);
        if (kiln_graph_output(g, on, res[k], e))
            return -1;
    }
    return 0;
}

/* Run f on inputs filled from a formula; outputs flattened into out. */
static int run(kiln_function *f, double *out, int max, kiln_err *e)
{
    int ni = kiln_function_n_inputs(f), no = kiln_function_n_outputs(f);
    kiln_tensor in[16], res[16];
    double buf[16][128];
    for (int i = 0; i < ni; i++) {
        memset(&in[i], 0, sizeof in[i]);
        kiln_function_input_type(f, i, &in[i].dtype, &in[i].rank,
                                 in[i].shape, NULL);
        int64_t ne = 1;
        for (int k = 0; k < in[i].rank; k++)
            ne *= in[i].shape[k];
        for (int64_t j = 0; j < ne; j++)
            buf[i][j] = 0.2 * sin(1.3 * (double)j + i);
        in[i].data = buf[i];
    }
    if (kiln_function_call(f, in, res, e))
        return -1;
    int c = 0;
    for (int k = 0; k < no; k++) {
        int64_t ne = kiln_shape_numel(res[k].rank, res[k].shape);
        for (int64_t j = 0; j < ne && c < max; j++)
            out[c++] = res[k].dtype == KILN_F64
                           ? ((double *)res[k].data)[j]
                           : ((float *)res[k].data)[j];
    }
    return c;
}

static kiln_graph *radon_graph(kiln_err *e)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/radon.kg", srcdir);
    kiln_graph *g = kiln_parse_file(path, e);
    static const char *const ins[] = {"mu_a", "log_sigma_a", "a_t", "b",
                                      "log_sigma_y", NULL};
    if (g && add_grads(g, "logp", ins, e)) {
        kiln_graph_free(g);
        return NULL;
    }
    return g;
}

/* radon.kg (csv data bound at parse time, axis n), grad outputs: parts
 * sum to the whole; every part has the same kernel keys. */
static void test_plain_radon(const char *be)
{
    kiln_err e;
    kiln_options o = opts(be);
    kiln_graph *g = radon_graph(&e);
    kiln_function *fw = g ? kiln_compile(g, &o, &e) : NULL;
    double whole[256], sum[256], part[256];
    int nw = fw ? run(fw, whole, 256, &e) : -1;
    if (!ok(nw > 80, "[%s] radon.kg with grad outputs: whole runs", be)) {
        diag("%s", e.message);
        kiln_function_free(fw);
        kiln_graph_free(g);
        return;
    }
    int P[3] = {2, 5, 1000};
    for (int s = 0; s < 3; s++) {
        int good = 1, keys = 1, nk0 = -1;
        kiln_key k0[256];
        memset(sum, 0, sizeof sum);
        for (int p = 0; p < P[s] && good; p++) {
            kiln_graph *c = radon_graph(&e);
            kiln_partition pt = {"n", p, P[s]};
            kiln_function *f = NULL;
            if (!c || kiln_graph_partition(c, &pt, &e) ||
                !(f = kiln_compile(c, &o, &e)) ||
                run(f, part, 256, &e) != nw) {
                diag("part %d of %d: %s", p, P[s], e.message);
                good = 0;
            }
            for (int i = 0; good && i < nw; i++)
                sum[i] += part[i];
            int nk = f ? kiln_function_n_kernels(f) : 0;
            if (good && p == 0) {
                nk0 = nk;
                for (int i = 0; i < nk && i < 256; i++)
                    kiln_function_kernel_key(f, i, &k0[i]);
            } else if (good) {
                keys &= nk == nk0;
                for (int i = 0; keys && i < nk && i < 256; i++) {
                    kiln_key k;
                    kiln_function_kernel_key(f, i, &k);
                    keys &= memcmp(&k, &k0[i], sizeof k) == 0;
                }
            }
            kiln_function_free(f);
            kiln_graph_free(c);
            if (P[s] == 1000 && p == 2 && good) /* the rest are like it */
                break;
        }
        if (P[s] == 1000) {
            ok(good && keys, "[%s] radon.kg: parts 0..2 of 1000 (<= 1 row "
               "each) run, same kernel keys", be);
            continue;
        }
        ok(good && close_rel(sum, whole, nw),
           "[%s] radon.kg: sum of %d parts' logp and gradients = the "
           "whole's", be, P[s]);
        ok(good && keys, "[%s] radon.kg: the %d parts compile the same "
           "kernels (keys equal)", be, P[s]);
    }
    kiln_function_free(fw);
    kiln_graph_free(g);
}

/* A graph whose data is bound after the partition (kiln run --data). */
static const char *LATE =
    "kiln 1\n"
    "graph late\n"
    "  input mu: f64\n"
    "  input ls: f64\n"
    "  shared M: i64\n"
    "  shared y: f64[M]\n"
    "  shared w: f64[2, M]\n"
    "  partition M\n"
    "  s = exp(ls)\n"
    "  r = true_div(sub(y, mu), s)\n"
    "  lp = sum(mul(sum(w, axis=0), mul(-0.5, square(r))))\n"
    "  output logp = sub(sub(lp, mul(0.5, square(mu))), mul(M, ls))\n"
    "end\n";
static const char *const LATE_IN[] = {"mu", "ls", NULL};

static void test_late_binding(const char *be)
{
    kiln_err e;
    kiln_options o = opts(be);
    const char *data = "{\"M\": 5, \"y\": [1, 2.5, -1, 0.5, 3], "
                       "\"w\": [[1, 2, 3, 4, 5], [0.5, 0.5, 1, 1, 2]]}";
    kiln_json_data *d = kiln_json_data_parse(data, strlen(data), "<d>", &e);
    double whole[16], sum[16] = {0}, part[16];
    kiln_graph *g = kiln_parse_string(LATE, "late.kg", NULL, &e);
    int nw = -1;
    if (g && !add_grads(g, "logp", LATE_IN, &e) &&
        !kiln_json_data_bind_graph(g, d, NULL, &e)) {
        kiln_function *f = kiln_compile(g, &o, &e);
        nw = f ? run(f, whole, 16, &e) : -1;
        kiln_function_free(f);
    }
    kiln_graph_free(g);
    if (!ok(nw == 3, "[%s] late binding: whole runs", be)) {
        diag("%s", e.message);
        kiln_json_data_free(d);
        return;
    }
    int good = 1;
    for (int p = 0; p < 3 && good; p++) {
        kiln_graph *c = kiln_parse_string(LATE, "late.kg", NULL, &e);
        kiln_partition pt = {NULL, p, 3};   /* the declared axis */
        kiln_function *f = NULL;
        if (!c || add_grads(c, "logp", LATE_IN, &e) ||
            kiln_graph_partition(c, &pt, &e) ||
            kiln_json_data_bind_graph(c, d, NULL, &e) ||
            !(f = kiln_compile(c, &o, &e)) || run(f, part, 16, &e) != nw) {
            diag("part %d: %s", p, e.message);
            good = 0;
        }
        for (int i = 0; good && i < nw; i++)
            sum[i] += part[i];
        kiln_function_free(f);
        kiln_graph_free(c);
    }
    ok(good && close_rel(sum, whole, nw), "[%s] data bound after the "
       "partition (JSON, M as a value): parts sum to the whole", be);
    kiln_json_data_free(d);
}

/* Many ops at once (bound through the C API before the partition): sums
 * over several axes and with keepdims, y @ X, X^T @ y, where, cast,
 * check, a reduction over another axis, a mean of a sum, ones(shape=[N]),
 * per-row gathers, a FREE term; with grad outputs. */
static const char *OPS =
    "kiln 1\n"
    "graph ops\n"
    "  input b: f64[2]\n"
    "  input s: f64\n"
    "  input t: f64[3]\n"
    "  shared X: f64[N, 2]\n"
    "  shared y: f64[N]\n"
    "  shared grp: i64[N]\n"
    "  shared W: f64[N, 2, 2]\n"
    "  shared N: i64\n"
    "  a1 = sum(mul(X, b), axis=[0, 1])\n"
    "  a2 = sum(sum(square(sub(X, b)), axis=0, keepdims=true))\n"
    "  a3 = sum(mul(dot(y, X), b))\n"
    "  c = where(gt(y, 0), exp(mul(y, s)), log1p(square(mul(y, s))))\n"
    "  a5 = sum(mul(cast(grp, dtype=f64), c))\n"
    "  a6 = sum(check(mul(y, s), ge(square(y), 0), msg=\"never\"))\n"
    "  a7 = sum(mul(max(W, axis=2), s))\n"
    "  a8 = sum(mul(matmul(transpose(X), y), b))\n"
    "  a9 = mul(mean(sum(mul(X, s), axis=0)), 2.0)\n"
    "  a10 = mul(sum(ones(shape=[N])), s)\n"
    "  a11 = sum(mul(t[grp], y))\n"
    "  a12 = mul(true_div(sum(y), cast(N, dtype=f64)), 0.0)\n"
    "  a13 = mul(sum(mul(W, b), axis=[0, 2]), s)\n"
    "  free = add(square(s), sum(square(b)))\n"
    "  lp = add(add(add(add(add(a1, a2), a3), a5), a6), a7)\n"
    "  lp2 = add(add(add(add(add(lp, a8), a9), a10), a11), free)\n"
    "  output o = add(lp2, mul(N, s))\n"
    "  output o2 = add(a13, t[0:2])\n"
    "  output f = mul(free, 3.0)\n"
    "end\n";
static const char *const OPS_IN[] = {"b", "s", "t", NULL};

static kiln_graph *ops_graph(kiln_json_data *d, kiln_err *e)
{
    kiln_graph *g = kiln_parse_string(OPS, "ops.kg", NULL, e);
    if (g && (add_grads(g, "o", OPS_IN, e) ||
              kiln_json_data_bind_graph(g, d, NULL, e))) {
        kiln_graph_free(g);
        return NULL;
    }
    return g;
}

static void test_ops(const char *be)
{
    kiln_err e;
    kiln_options o = opts(be);
    char *data = fmt_data("");
    /* W [N, 2, K] */
    char extra[1024], *q = extra;
    q += sprintf(q, ", \"W\": [");
    for (int i = 0; i < NR; i++)
        q += sprintf(q, "%s[[%d, %.2f], [%.2f, %d]]", i ? ", " : "", i - 3,
                     0.5 * i, sin(i), i % 2);
    sprintf(q, "]}");
    char all[5120];
    snprintf(all, sizeof all, "%.*s%s", (int)strlen(data) - 1, data, extra);
    kiln_json_data *d = kiln_json_data_parse(all, strlen(all), "<d>", &e);
    kiln_graph *g = d ? ops_graph(d, &e) : NULL;
    kiln_function *fw = g ? kiln_compile(g, &o, &e) : NULL;
    double whole[64], sum[64], part[64];
    int nw = fw ? run(fw, whole, 64, &e) : -1;
    if (!ok(nw > 5, "[%s] many ops: whole runs", be)) {
        diag("%s", e.message);
        goto done;
    }
    int P[6] = {1, 2, 3, 4, 5, NR + 2};
    for (int s = 0; s < 6; s++) {
        int good = 1;
        memset(sum, 0, sizeof sum);
        for (int p = 0; p < P[s] && good; p++) {
            kiln_graph *c = ops_graph(d, &e);
            kiln_partition pt = {"N", p, P[s]};
            kiln_function *f = NULL;
            if (!c || kiln_graph_partition(c, &pt, &e) ||
                !(f = kiln_compile(c, &o, &e)) ||
                run(f, part, 64, &e) != nw) {
                diag("part %d of %d: %s", p, P[s], e.message);
                good = 0;
            }
            for (int i = 0; good && i < nw; i++)
                sum[i] += part[i];
            kiln_function_free(f);
            kiln_graph_free(c);
        }
        ok(good && close_rel(sum, whole, nw), "[%s] many ops (bound before "
           "the partition): sum of %d parts = the whole", be, P[s]);
    }
done:
    kiln_function_free(fw);
    kiln_graph_free(g);
    kiln_json_data_free(d);
}

/* The posteriordb corpus (examples/posteriordb/CORPUS) over axis N on the
 * interpreter, 3 parts: each posterior either sums to the whole, or is
 * one the rules must refuse — a mean over the data (diamonds centres its
 * predictors), a GP's N x N covariance, a latent value per observation, an
 * HMM's or an ODE's sequence over time, or no symbol N at all. */
static void test_corpus(void)
{
    static const char *const refused[] = {
        "diamonds", "gp_regr", "gp_pois_regr", "hmm_example", "hmm_drive_0",
        "hmm_drive_1", "lotka_volterra", "eight_schools_noncentered",
        "eight_schools_centered", "arma11", "garch11",
        "one_comp_mm_elim_abs", NULL};
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/examples/posteriordb/CORPUS", srcdir);
    FILE *f = fopen(path, "r");
    if (!ok(f != NULL, "corpus: %s opened", path))
        return;
    int n_ok = 0, n_ref = 0;
    kiln_options o = opts("interp");
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *dash = strchr(line, '-');
        if (!*line || *line == '#' || !dash)
            continue;
        *dash = 0;
        const char *mn = dash + 1;
        char kg[1024], data[1024];
        static const char *const dirs[3] = {"examples/posteriordb/data",
                                            "examples/data/posteriordb",
                                            "../shared/posteriordb/data"};
        int found = 0;
        for (int k = 0; k < 3 && !found; k++) {
            snprintf(data, sizeof data, "%s/%s/%s.json", srcdir, dirs[k],
                     line);
            found = access(data, R_OK) == 0;
        }
        if (!found)
            continue;
        snprintf(kg, sizeof kg, "%s/examples/posteriordb/%s.kg", srcdir, mn);
        kiln_err e;
        kiln_graph *g = kiln_parse_file(kg, &e);
        kiln_model *w = g ? kiln_model_new(g, NULL, data, &o, NULL, &e)
                          : NULL;
        if (!w) {
            ok(0, "corpus %s-%s: whole model", line, mn);
            diag("%s", e.message);
            kiln_graph_free(g);
            continue;
        }
        int n = kiln_model_n_unc(w), bad = 0;
        double *u = calloc((size_t)n + 1, sizeof *u);
        double *gw = calloc((size_t)n + 1, sizeof *u);
        double *gs = calloc((size_t)n + 1, sizeof *u);
        double *gp = calloc((size_t)n + 1, sizeof *u), lpw = 0, lps = 0;
        for (int i = 0; i < n; i++)
            u[i] = 0.1 * sin(i + 1.0);
        kiln_model_log_density(w, 1, u, &lpw, gw, &e);
        for (int p = 0; p < 3 && !bad; p++) {
            kiln_partition pt = {"N", p, 3};
            kiln_model *m = kiln_model_new_partition(g, NULL, data, &pt, &o,
                                                     NULL, &e);
            double lpp;
            if (!m || kiln_model_log_density(m, 1, u, &lpp, gp, &e))
                bad = 1;
            for (int i = 0; !bad && i < n; i++)
                gs[i] += gp[i];
            lps += bad ? 0 : lpp;
            kiln_model_free(m);
        }
        int expect_refused = 0;
        for (int k = 0; refused[k]; k++)
            expect_refused |= !strcmp(refused[k], mn);
        if (bad) {
            n_ref++;
            ok(expect_refused && (e.code == KILN_ERR_TYPE ||
                                  e.code == KILN_ERR_NAME),
               "corpus %s-%s: refused, as it must be", line, mn);
            diag("%s", e.message);
        } else {
            n_ok++;
            ok(!expect_refused && close_rel(&lps, &lpw, 1) &&
                   close_rel(gs, gw, n),
               "corpus %s-%s: 3 parts sum to the whole", line, mn);
        }
        free(u);
        free(gw);
        free(gs);
        free(gp);
        kiln_model_free(w);
        kiln_graph_free(g);
    }
    fclose(f);
    diag("corpus: %d posteriors partitioned, %d refused", n_ok, n_ref);
}

/* ---- compile once: no new cache misses ----------------------------------- */

static void test_cache_misses(const char *be)
{
    char dir[] = "/tmp/kiln-part-XXXXXX";
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp");
        return;
    }
    kiln_err e;
    kiln_options o = opts(be);
    o.cache_dir = dir;
    o.tiers = KILN_TIERS_BASELINE;
    kiln_graph *g = kiln_parse_string(LINREG, "m.kg", NULL, &e);
    const char *data = fmt_data("");
    kiln_cache *c = kiln_cache_open(dir, 1, &e);
    kiln_cache_stats st0, st1;
    kiln_partition p0 = {NULL, 0, 3}, p2 = {NULL, 2, 3}, pe = {NULL, 4, 20};
    kiln_model *m0 = g ? kiln_model_new_partition(g, NULL, data, &p0, &o,
                                                   NULL, &e) : NULL;
    int r = c && m0 && !kiln_cache_get_stats(c, &st0, &e);
    kiln_model *m2 = r ? kiln_model_new_partition(g, NULL, data, &p2, &o,
                                                   NULL, &e) : NULL;
    kiln_model *me = m2 ? kiln_model_new_partition(g, NULL, data, &pe, &o,
                                                    NULL, &e) : NULL;
    r = r && me && !kiln_cache_get_stats(c, &st1, &e);
    if (!ok(r, "[%s] cache: parts 0, 2 of 3 and empty part 4 of 20 made",
            be))
        diag("%s", e.message);
    else {
        ok(st0.misses > 0, "[%s] cache: part 0 compiled %llu kernels", be,
           (unsigned long long)st0.misses);
        ok(st1.misses == st0.misses && st1.hits >= st0.hits + 1,
           "[%s] cache: the other parts compile nothing (misses %llu -> "
           "%llu, hits %llu -> %llu)", be, (unsigned long long)st0.misses,
           (unsigned long long)st1.misses, (unsigned long long)st0.hits,
           (unsigned long long)st1.hits);
    }
    kiln_model_free(m0);
    kiln_model_free(m2);
    kiln_model_free(me);
    if (c)
        kiln_cache_clear(c, NULL, &e);
    kiln_cache_close(c);
    kiln_graph_free(g);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
}

/* ---- errors ------------------------------------------------------------ */

static void expect_err(const char *what, const char *body, const char *axis,
                       int part, int nparts, int code, const char *needle)
{
    char kg[2048];
    snprintf(kg, sizeof kg, "kiln 1\ngraph t\n  input mu: f64\n"
             "  shared y: f64[N]\n  shared z: f64[K]\n"
             "%send\n", body);
    kiln_err e = {0, ""};
    kiln_graph *g = kiln_parse_string(kg, "t.kg", NULL, &e);
    if (!g) {
        ok(0, "%s: parses", what);
        diag("%s", e.message);
        return;
    }
    char *before = kiln_graph_print(g, &e);
    kiln_partition p = {axis, part, nparts};
    int rc = kiln_graph_partition(g, &p, &e);
    char *after = kiln_graph_print(g, &e);
    int r = ok(rc == code && strstr(e.message, needle) != NULL,
               "%s: refused (%d, \"%s\")", what, code, needle);
    if (!r)
        diag("got %d: %s", rc, e.message);
    ok(before && after && strcmp(before, after) == 0,
       "%s: the graph is unchanged", what);
    free(before);
    free(after);
    kiln_graph_free(g);
}

static void test_errors(void)
{
    const char *sum_out = "  output o = sum(mul(y, mu))\n";
    expect_err("no such symbol", sum_out, "Q", 0, 2, KILN_ERR_NAME,
               "no symbol 'Q'");
    expect_err("part out of range", sum_out, "N", 2, 2, KILN_ERR_ARG,
               "out of range");
    expect_err("negative part", sum_out, "N", -1, 2, KILN_ERR_ARG,
               "out of range");
    expect_err("nparts 0", sum_out, "N", 0, 0, KILN_ERR_ARG,
               "out of range");
    expect_err("no axis named or declared", sum_out, NULL, 0, 2,
               KILN_ERR_ARG, "no axis");
    expect_err("max over the axis", "  output o = max(mul(y, mu))\n", "N",
               0, 2, KILN_ERR_TYPE, "(op max");
    expect_err("mean over the axis", "  output o = mean(mul(y, mu))\n",
               "N", 0, 2, KILN_ERR_TYPE, "(op mean");
    expect_err("exp of a sum", "  output o = exp(sum(mul(y, mu)))\n", "N",
               0, 2, KILN_ERR_TYPE, "(op exp");
    expect_err("SUM * SUM",
               "  s = sum(mul(y, mu))\n  output o = mul(s, s)\n", "N", 0, 2,
               KILN_ERR_TYPE, "multiplies two sums");
    expect_err("cumsum along the axis",
               "  output o = sum(cumsum(mul(y, mu), axis=0))\n", "N", 0, 2,
               KILN_ERR_TYPE, "(op cumsum");
    expect_err("an output sized by N", "  output o = mul(y, mu)\n", "N", 0,
               2, KILN_ERR_NAME, "sizes output 'o'");
    expect_err("a row picked out", "  output o = mul(y[0], mu)\n", "N", 0, 2,
               KILN_ERR_TYPE, "selects rows");
    expect_err("y minus its sum (sum spread over rows)",
               "  output o = sum(sub(y, sum(y)))\n", "N", 0, 2,
               KILN_ERR_TYPE, "");
    expect_err("log of a sum", "  output o = log(sum(y))\n", "N", 0, 2,
               KILN_ERR_TYPE, "(op log");
    expect_err("logsumexp over the axis", "  output o = logsumexp(y)\n", "N",
               0, 2, KILN_ERR_TYPE, "(op logsumexp");
    /* all over the axis other than as a check where(all(c), x, -inf) */
#define NINF "  const ninf: f64[1] = [-inf]\n" \
             "  c = expand_dims(all(gt(y, mu), axis=[0]), axis=[0])\n"
    expect_err("where(all(c), y, 0): not a check",
               NINF "  output o = sum(where(c, y, 0.0))\n", "N", 0, 2,
               KILN_ERR_TYPE, "(op where, line 8) selects by all over it "
               "other than as a check");
    expect_err("all(c) added to the lp",
               NINF "  output o = add(sum(y), sum(cast(c, dtype=f64)))\n",
               "N", 0, 2, KILN_ERR_TYPE, "(op cast, line 8) uses all over "
               "it other than as a check's condition");
    expect_err("all(c) as an output",
               "  output o = all(gt(y, mu), axis=[0])\n", "N", 0, 2,
               KILN_ERR_TYPE, "(op all, line 6) is a check over it given");
    expect_err("or of two checks",
               NINF "  d = or(c, expand_dims(all(lt(y, mu), axis=[0]), "
               "axis=[0]))\n  output o = sum(where(d, y, ninf))\n", "N", 0,
               2, KILN_ERR_TYPE, "(op or, line 8) uses all over it");
    expect_err("any over the axis as a check",
               "  const ninf: f64[1] = [-inf]\n  output o = sum(where("
               "expand_dims(any(gt(y, mu), axis=[0]), axis=[0]), y, ninf))\n",
               "N", 0, 2, KILN_ERR_TYPE, "(op any, line 7) reduces over it "
               "by any");
    expect_err("exp of a checked value",
               NINF "  output o = sum(exp(where(c, y, ninf)))\n", "N", 0, 2,
               KILN_ERR_TYPE, "(op exp, line 8) uses a checked value");
    expect_err("a check guarding a FREE value",
               NINF "  output o = sum(where(c, mu, ninf))\n", "N", 0, 2,
               KILN_ERR_TYPE, "guards a value that is neither per row");
#undef NINF

    /* an input sized by the axis */
    {
        kiln_err e;
        kiln_graph *g = kiln_parse_string(
            "kiln 1\ngraph t\n  input x: f64[N]\n  shared y: f64[N]\n"
            "  output o = sum(mul(x, y))\nend\n", "t.kg", NULL, &e);
        kiln_partition p = {"N", 0, 2};
        int rc = g ? kiln_graph_partition(g, &p, &e) : -1;
        ok(rc == KILN_ERR_NAME && strstr(e.message, "sizes input 'x'"),
           "an input sized by the axis: KILN_ERR_NAME");
        diag("%s", e.message);
        kiln_graph_free(g);
    }
    /* twice */
    {
        kiln_err e;
        kiln_graph *g = kiln_parse_string(
            "kiln 1\ngraph t\n  input mu: f64\n  shared y: f64[N]\n"
            "  output o = sum(mul(y, mu))\nend\n", "t.kg", NULL, &e);
        kiln_partition p = {"N", 0, 2};
        int r1 = g ? kiln_graph_partition(g, &p, &e) : -1;
        int r2 = g ? kiln_graph_partition(g, &p, &e) : -1;
        ok(r1 == 0 && r2 == KILN_ERR_ARG && strstr(e.message, "already"),
           "partition twice: KILN_ERR_ARG");
        ok(kiln_graph_partition(NULL, &p, &e) == KILN_ERR_ARG &&
               kiln_graph_partition(g, NULL, &e) == KILN_ERR_ARG,
           "NULL graph or partition: KILN_ERR_ARG");
        kiln_graph_free(g);
    }
    /* a bare `partition` line: the file, line and column, and what is
     * expected there (it said "expected '=' after the name") */
    {
        kiln_err e;
        static const char *bad[] = {"  partition\n", "  partition 3\n"};
        static const char *col[] = {"b.kg:4:12: ", "b.kg:4:13: "};
        for (int k = 0; k < 2; k++) {
            char text[256];
            snprintf(text, sizeof text, "kiln 1\ngraph t\n  shared y: "
                     "f64[N]\n%s  output o = sum(y)\nend\n", bad[k]);
            kiln_graph *g = kiln_parse_string(text, "b.kg", NULL, &e);
            ok(!g && e.code == KILN_ERR_PARSE &&
                   strncmp(e.message, col[k], strlen(col[k])) == 0 &&
                   strstr(e.message, "expected the observation axis after "
                          "'partition'"),
               "a bare 'partition' line: file:line:column and what is "
               "expected (%s)", e.message);
            kiln_graph_free(g);
        }
    }
    /* the model API */
    kiln_options o = opts("interp");
    kiln_err e;
    const char *data = fmt_data("");
    kiln_graph *g = kiln_parse_string(
        "kiln 1\ngraph t\n  shared y: f64[N]\n  param z: f64[N]\n"
        "  output logp = sum(mul(y, z))\nend\n", "t.kg", NULL, &e);
    kiln_partition p = {"N", 0, 2};
    kiln_model *m = g ? kiln_model_new_partition(g, NULL, data, &p, &o,
                                                 NULL, &e) : NULL;
    ok(!m && e.code == KILN_ERR_NAME &&
           strstr(e.message, "sizes parameter 'z'"),
       "model: an axis that sizes a parameter: KILN_ERR_NAME");
    diag("%s", e.message);
    kiln_model_free(m);
    kiln_graph_free(g);
    g = kiln_parse_string(LINREG, "m.kg", NULL, &e);
    kiln_partition pm = {"M", 0, 2}, pk = {NULL, 3, 3}, pn = {NULL, 0, 0};
    m = kiln_model_new_partition(g, NULL, data, &pm, &o, NULL, &e);
    ok(!m && e.code == KILN_ERR_NAME && strstr(e.message, "no symbol 'M'"),
       "model: no such symbol: KILN_ERR_NAME");
    m = kiln_model_new_partition(g, NULL, data, &pk, &o, NULL, &e);
    ok(!m && e.code == KILN_ERR_ARG, "model: part out of range");
    m = kiln_model_new_partition(g, NULL, data, &pn, &o, NULL, &e);
    ok(!m && e.code == KILN_ERR_ARG, "model: nparts 0");
    kiln_graph_free(g);
    g = kiln_parse_string(LOGIT, "m.kg", NULL, &e);
    kiln_partition pd = {NULL, 0, 2};
    m = g ? kiln_model_new_partition(g, NULL, data, &pd, &o, NULL, &e)
          : NULL;
    ok(!m && e.code == KILN_ERR_ARG && strstr(e.message, "no axis"),
       "model: no axis named or declared: KILN_ERR_ARG");
    kiln_graph_free(g);
    g = kiln_parse_string(
        "kiln 1\ngraph t\n  shared y: f64[N]\n  param mu: f64\n"
        "  output logp = max(mul(y, mu))\nend\n", "t.kg", NULL, &e);
    m = g ? kiln_model_new_partition(g, NULL, data, &p, &o, NULL, &e) : NULL;
    ok(!m && e.code == KILN_ERR_TYPE && strstr(e.message, "(op max") &&
           strstr(e.message, "the log density is not a sum over axis 'N'"),
       "model: max over the axis: KILN_ERR_TYPE naming the node and op");
    diag("%s", e.message);
    kiln_graph_free(g);
}

/* tp / gq that depend on the axis: refused by constrain only */
static void test_constrain(void)
{
    kiln_err e;
    kiln_options o = opts("interp");
    const char *data = fmt_data("");
    kiln_graph *g = kiln_parse_string(HIER, "m.kg", NULL, &e);
    kiln_partition p = {NULL, 1, 2};
    kiln_model *m = g ? kiln_model_new_partition(g, NULL, data, &p, &o, NULL,
                                                 &e) : NULL;
    kiln_model *w = g ? kiln_model_new(g, NULL, data, &o, NULL, &e) : NULL;
    if (!ok(m && w, "hier: part and whole made")) {
        diag("%s", e.message);
    } else {
        int n = kiln_model_n_unc(m), nc = kiln_model_n_params(m, 0, 0);
        double u[64] = {0}, a[64], b[64];
        for (int i = 0; i < n; i++)
            u[i] = 0.1 * i;
        ok(kiln_model_constrain(m, 1, 0, u, a, &e) == 0 &&
               kiln_model_constrain(w, 1, 0, u, b, &e) == 0 &&
               memcmp(a, b, sizeof *a * (size_t)nc) == 0,
           "constrain of a part (no gq): the whole's values");
        int rc = kiln_model_constrain(m, 1, 1, u, a, &e);
        ok(rc == KILN_ERR_ARG && strstr(e.message, "'ybar'"),
           "constrain with a gq that depends on the axis: KILN_ERR_ARG "
           "naming it");
        diag("%s", e.message);
    }
    kiln_model_free(m);
    kiln_model_free(w);
    kiln_graph_free(g);
}

/* ---- .kg: `partition N` ------------------------------------------------ */

static void test_kg(void)
{
    kiln_err e;
    kiln_graph *g = kiln_parse_string(LINREG, "m.kg", NULL, &e);
    ok(g && kiln_graph_partition_axis(g) &&
           !strcmp(kiln_graph_partition_axis(g), "N"),
       ".kg: `partition N` declares the axis");
    char *t1 = g ? kiln_graph_print(g, &e) : NULL;
    kiln_graph *g2 = t1 ? kiln_parse_string(t1, "p.kg", NULL, &e) : NULL;
    char *t2 = g2 ? kiln_graph_print(g2, &e) : NULL;
    ok(t1 && t2 && strstr(t1, "\n  partition N\n") && !strcmp(t1, t2),
       ".kg: printed and parsed back, the same text");
    ok(g && kiln_graph_set_partition_axis(g, "nope", &e) == KILN_ERR_NAME,
       "set_partition_axis: no such symbol: KILN_ERR_NAME");
    ok(g && kiln_graph_set_partition_axis(g, "K", &e) == 0 &&
           !strcmp(kiln_graph_partition_axis(g), "K") &&
           kiln_graph_set_partition_axis(g, NULL, &e) == 0 &&
           !kiln_graph_partition_axis(g),
       "set_partition_axis: set, replaced, cleared");
    ok(kiln_graph_set_partition_axis(NULL, "N", &e) == KILN_ERR_ARG,
       "set_partition_axis: NULL graph: KILN_ERR_ARG");
    free(t1);
    free(t2);
    kiln_graph_free(g);
    kiln_graph_free(g2);
    g = kiln_parse_string("kiln 1\ngraph t\n  shared y: f64[N]\n"
                          "  partition Q\n  output o = sum(y)\nend\n", "t.kg",
                          NULL, &e);
    ok(!g && strstr(e.message, "no symbol 'Q'") && strstr(e.message, ":4:"),
       ".kg: `partition Q` with no symbol Q: an error at its line");
    diag("%s", e.message);
    g = kiln_parse_string("kiln 1\ngraph t\n  shared y: f64[N]\n"
                          "  partition N\n  partition N\n  output o = sum(y)\n"
                          "end\n", "t.kg", NULL, &e);
    ok(!g && strstr(e.message, "already"), ".kg: two `partition` lines: an "
       "error");
    kiln_graph_free(g);
}

int main(void)
{
    if (getenv("KILN_SRCDIR"))
        srcdir = getenv("KILN_SRCDIR");
    const char *bk[3];
    int nb = found_backends(bk);
    const char *data = fmt_data("");
    char radon[1024], radon_data[1024];
    snprintf(radon, sizeof radon,
             "%s/examples/radon_variable_intercept_noncentered.kg", srcdir);
    snprintf(radon_data, sizeof radon_data,
             "%s/examples/data/posteriordb/radon_mn.json", srcdir);
    test_kg();
    test_errors();
    test_constrain();
    test_corpus();
    for (int b = 0; b < nb; b++) {
        check_model("linreg", LINREG, NULL, data, NULL, NR + 3, bk[b]);
        check_model("logit", LOGIT, NULL, data, "N", NR + 2, bk[b]);
        check_model("hier", HIER, NULL, data, NULL, 2 * NR, bk[b]);
        check_model("nval", NVAL, NULL, data, NULL, NR + 1, bk[b]);
        check_model("radon", NULL, radon, radon_data, "N", 6, bk[b]);
        check_model("guard", GUARD, NULL, data, "N", NR + 2, bk[b]);
        check_guard_fails(data, bk[b]);
        test_plain_radon(bk[b]);
        test_late_binding(bk[b]);
        test_ops(bk[b]);
        if (strcmp(bk[b], "interp"))
            test_cache_misses(bk[b]);
    }
    return done_testing();
}
