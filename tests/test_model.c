/*
 * test_model.c — <kiln/model.h>: parameters with Stan's transforms, data
 * bound from CmdStan JSON, the log density with and without Jacobian, its
 * gradient against finite differences, constrain/unconstrain, tp and gq,
 * the Hessian and Hessian-vector product, errors, threads; under every
 * backend, compared with the interpreter.
 *
 * The reference densities are written out here by hand from the Stan
 * programs (normal_lpdf, cauchy_lpdf with every constant), independently of
 * the .kg text.
 */
#include "tap.h"
#include "found_backends.h"

#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_SQRT_2PI 0.91893853320467274178
#define LOG_PI 1.14472988584940017414

/* posteriordb's eight_schools_noncentered (Stan program in
 * ../shared/posteriordb/models), parameters in its order */
static const char *ES_KG =
    "kiln 1\n"
    "graph eight_schools_noncentered\n"
    "  shared J: i64\n"
    "  shared y: f64[J]\n"
    "  shared sigma: f64[J]\n"
    "  param theta_trans: f64[J]\n"
    "  param mu: f64\n"
    "  param tau: f64 lower=0\n"
    "  theta = add(mul(theta_trans, tau), mu)\n"
    "  lp_tt = sum(sub(mul(-0.5, square(theta_trans)), 0.9189385332046727))\n"
    "  z = true_div(sub(y, theta), sigma)\n"
    "  lp_y = sum(sub(sub(mul(-0.5, square(z)), log(sigma)), "
    "0.9189385332046727))\n"
    "  lp_mu = sub(sub(mul(-0.5, square(true_div(mu, 5))), log(5.0)), "
    "0.9189385332046727)\n"
    "  lp_tau = sub(sub(neg(log1p(square(true_div(tau, 5)))), log(5.0)), "
    "1.1447298858494002)\n"
    "  output logp = add(add(add(lp_tt, lp_y), lp_mu), lp_tau)\n"
    "  output tp theta\n"
    "  output gq tau2 = square(tau)\n"
    "end\n";

static const char *ES_DATA =
    "{\"J\": 8, \"y\": [28, 8, -3, 7, -1, 1, 18, 12],\n"
    " \"sigma\": [15, 10, 16, 11, 9, 11, 10, 18]}";

static const double Y[8] = {28, 8, -3, 7, -1, 1, 18, 12};
static const double SIG[8] = {15, 10, 16, 11, 9, 11, 10, 18};

static double normal_lpdf(double x, double m, double s)
{
    double z = (x - m) / s;
    return -0.5 * z * z - log(s) - LOG_SQRT_2PI;
}

/* the Stan model's density at unconstrained u (theta_trans[8], mu,
 * log tau), with the Jacobian log tau when jac */
static double es_ref(const double *u, int jac)
{
    double mu = u[8], tau = exp(u[9]), lp = 0;
    for (int j = 0; j < 8; j++) {
        lp += normal_lpdf(u[j], 0, 1);
        lp += normal_lpdf(Y[j], u[j] * tau + mu, SIG[j]);
    }
    lp += normal_lpdf(mu, 0, 5);
    lp += -log1p((tau / 5) * (tau / 5)) - log(5.0) - LOG_PI;  /* cauchy */
    return lp + (jac ? u[9] : 0);
}

static kiln_model *make(const char *kg, const char *data, const char *backend,
                        kiln_err *e)
{
    kiln_graph *g = kiln_parse_string(kg, "m.kg", NULL, e);
    if (!g)
        return NULL;
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.quiet = 1;
    kiln_model *m = kiln_model_new(g, NULL, data, &o, NULL, e);
    kiln_graph_free(g);
    return m;
}

static void test_eight_schools(const char *be, double *lp_interp)
{
    kiln_err e;
    kiln_model *m = make(ES_KG, ES_DATA, be, &e);
    if (!ok(m != NULL, "[%s] eight schools: model made", be)) {
        diag("%s", e.message);
        return;
    }
    ok(kiln_model_n_unc(m) == 10 && kiln_model_n_params(m, 0, 0) == 10 &&
           kiln_model_n_params(m, 1, 0) == 18 &&
           kiln_model_n_params(m, 1, 1) == 19 &&
           kiln_model_n_params(m, 0, 1) == 11,
       "[%s] sizes: 10 unconstrained, 8 tp, 1 gq", be);
    ok(strcmp(kiln_model_param_unc_names(m),
              "theta_trans.1,theta_trans.2,theta_trans.3,theta_trans.4,"
              "theta_trans.5,theta_trans.6,theta_trans.7,theta_trans.8,mu,"
              "tau") == 0,
       "[%s] unconstrained names in Stan's dotted form", be);
    const char *pn = kiln_model_param_names(m, 1, 1);
    ok(strstr(pn, ",tau,theta.1,") && strstr(pn, "theta.8,tau2") &&
           strcmp(kiln_model_param_names(m, 0, 0),
                  kiln_model_param_unc_names(m)) == 0,
       "[%s] constrained names with tp and gq", be);
    ok(strcmp(kiln_model_name(m), "eight_schools_noncentered") == 0 &&
           strstr(kiln_model_info(m), "kiln ") != NULL,
       "[%s] name and info", be);

    double u[10], g[10], lp, lp0;
    for (int j = 0; j < 10; j++)
        u[j] = 0.3 * sin(1.7 * j + 0.2);
    int rc = kiln_model_log_density(m, 1, u, &lp, g, &e);
    ok(rc == 0, "[%s] log density runs", be);
    is_close(lp, es_ref(u, 1), 1e-13, "[%s] log density = hand-derived "
             "(jacobian on)", be);
    kiln_model_log_density(m, 0, u, &lp0, NULL, &e);
    is_close(lp0, es_ref(u, 0), 1e-13, "[%s] jacobian off", be);
    is_close(lp - lp0, u[9], 1e-12, "[%s] the difference is log tau", be);
    if (lp_interp) {
        if (!strcmp(be, "interp"))
            *lp_interp = lp;
        else
            ok(lp == *lp_interp, "[%s] log density bitwise equal to the "
               "interpreter's", be);
    }
    double maxerr = 0;
    for (int j = 0; j < 10; j++) {
        double v[10], h = 1e-6;
        memcpy(v, u, sizeof v);
        v[j] += h;
        double a = es_ref(v, 1);
        v[j] -= 2 * h;
        double b = es_ref(v, 1);
        double fd = (a - b) / (2 * h);
        maxerr = fmax(maxerr, fabs(fd - g[j]) / fmax(1, fabs(fd)));
    }
    ok(maxerr < 1e-7, "[%s] gradient = finite differences of the reference "
       "(max rel err %.2g)", be, maxerr);

    /* constrain / unconstrain */
    double th[19], back[10];
    ok(kiln_model_constrain(m, 1, 1, u, th, &e) == 0, "[%s] constrain", be);
    int good = fabs(th[9] - exp(u[9])) < 1e-15 && th[8] == u[8];
    for (int j = 0; j < 8; j++)
        good &= fabs(th[10 + j] - (u[j] * exp(u[9]) + u[8])) < 1e-13;
    good &= fabs(th[18] - exp(2 * u[9])) < 1e-13;
    ok(good, "[%s] constrained values, tp theta and gq tau2", be);
    ok(kiln_model_unconstrain(m, th, back, &e) == 0, "[%s] unconstrain", be);
    double rt = 0;
    for (int j = 0; j < 10; j++)
        rt = fmax(rt, fabs(back[j] - u[j]));
    ok(rt < 1e-14, "[%s] unconstrain(constrain(u)) = u (err %.2g)", be, rt);
    double bad[10];
    memcpy(bad, th, sizeof bad);
    bad[9] = -1;
    rc = kiln_model_unconstrain(m, bad, back, &e);
    ok(rc == KILN_ERR_ARG &&
           strcmp(e.message, "unconstrain: parameter 'tau' is -1, below its "
                             "lower bound 0") == 0,
       "[%s] unconstrain below the bound is an error naming it", be);
    if (rc == 0 || strstr(e.message, "tau") == NULL)
        diag("%s", e.message);
    rc = kiln_model_unconstrain_json(m, "{\"mu\": 1.5, \"tau\": 2, "
                                     "\"theta_trans\": [1,2,3,4,5,6,7,8]}",
                                     back, &e);
    ok(rc == 0 && back[8] == 1.5 && fabs(back[9] - log(2.0)) < 1e-15 &&
           back[7] == 8, "[%s] unconstrain_json", be);
    rc = kiln_model_unconstrain_json(m, "{\"mu\": 1.5, \"tau\": 2, "
                                     "\"theta_trans\": [1,2,3]}", back, &e);
    ok(rc != 0 && strstr(e.message, "theta_trans"),
       "[%s] unconstrain_json with a wrong shape names the variable", be);

    /* Hessian: against central differences of the reference gradient */
    double H[100], g2[10], lp2;
    rc = kiln_model_log_density_hessian(m, 1, u, &lp2, g2, H, &e);
    double herr = 0, sym = 0;
    for (int j = 0; j < 10; j++) {
        double a[10], b[10], ga[10], gb[10], dummy, h = 1e-4;
        memcpy(a, u, sizeof a);
        memcpy(b, u, sizeof b);
        a[j] += h;
        b[j] -= h;
        kiln_model_log_density(m, 1, a, &dummy, ga, &e);
        kiln_model_log_density(m, 1, b, &dummy, gb, &e);
        for (int i = 0; i < 10; i++) {
            double fd = (ga[i] - gb[i]) / (2 * h);
            herr = fmax(herr, fabs(fd - H[i * 10 + j]) / fmax(1, fabs(fd)));
            sym = fmax(sym, fabs(H[i * 10 + j] - H[j * 10 + i]));
        }
    }
    ok(rc == 0 && lp2 == lp && herr < 1e-6 && sym == 0,
       "[%s] Hessian: symmetric, = differences with another step (err "
       "%.2g)", be, herr);
    double v[10], hv[10], lp3, hverr = 0;
    for (int j = 0; j < 10; j++)
        v[j] = cos(0.9 * j);
    rc = kiln_model_log_density_hvp(m, 1, u, v, &lp3, hv, &e);
    for (int i = 0; i < 10; i++) {
        double s = 0;
        for (int j = 0; j < 10; j++)
            s += H[i * 10 + j] * v[j];
        hverr = fmax(hverr, fabs(s - hv[i]) / fmax(1, fabs(s)));
    }
    ok(rc == 0 && lp3 == lp && hverr < 1e-6,
       "[%s] Hessian-vector product = H v (err %.2g)", be, hverr);
    /* issue 24: directions of any magnitude (1e-320 is subnormal; the
     * step used to overflow to inf), each compared with scale * (H v) */
    static const double scales[] = { 1e-320, 5e-324, 1e-300, 1e300 };
    for (int k = 0; k < 4; k++) {
        double vs[10], hs[10], lps, err_s = 0;
        for (int j = 0; j < 10; j++)
            vs[j] = v[j] * scales[k];
        rc = kiln_model_log_density_hvp(m, 1, u, vs, &lps, hs, &e);
        for (int i = 0; i < 10; i++) {
            /* H (vs / scale), times scale: vs / scale is v as rounded */
            double s = 0;
            for (int j = 0; j < 10; j++)
                s += H[i * 10 + j] * (vs[j] / scales[k]);
            double want = s * scales[k];
            /* relative 1e-6 of |H| |v|, at least 8 subnormal ulps */
            double tol = fmax(1e-6 * fabs(want) + 1e-6 * scales[k],
                              8 * 4.9406564584124654e-324);
            double r = fabs(want - hs[i]) / tol;
            err_s = r <= err_s ? err_s : r; /* a NaN sticks */
        }
        ok(rc == 0 && err_s <= 1, "[%s] H v for v = %g * v0: = %g * (H v0)"
           " (err %.2g)", be, scales[k], scales[k], err_s);
    }
    double vn[10], hn[10], lpn;
    for (int j = 0; j < 10; j++)
        vn[j] = NAN;
    rc = kiln_model_log_density_hvp(m, 1, u, vn, &lpn, hn, &e);
    int allnan = 1;
    for (int i = 0; i < 10; i++)
        allnan &= isnan(hn[i]);
    ok(rc == 0 && allnan && lpn == lp,
       "[%s] H v for an all-NaN v: every entry NaN", be);
    memcpy(vn, v, sizeof vn);
    vn[3] = INFINITY;
    rc = kiln_model_log_density_hvp(m, 1, u, vn, &lpn, hn, &e);
    allnan = 1;
    for (int i = 0; i < 10; i++)
        allnan &= isnan(hn[i]);
    ok(rc == 0 && allnan, "[%s] H v for a v with an inf: every entry NaN",
       be);
    kiln_model_free(m);
}

/* every kind of bound, and a bound from the data */
static void test_bounds(const char *be)
{
    static const char *kg =
        "kiln 1\ngraph b\n"
        "  shared L: f64\n"
        "  param a: f64[2] lower=L\n"
        "  param b: f64 upper=3\n"
        "  param c: f64[3] lower=-1 upper=2\n"
        "  param d: f64\n"
        "  output logp = add(add(sum(a), b), add(sum(c), d))\n"
        "end\n";
    kiln_err e;
    kiln_model *m = make(kg, "{\"L\": 0.5}", be, &e);
    if (!ok(m != NULL, "[%s] bounds: model made", be)) {
        diag("%s", e.message);
        return;
    }
    double u[7] = {0.1, -0.7, 0.4, -2, 0, 3.5, 0.25}, x[7], lp1, lp0, g[7];
    kiln_model_constrain(m, 0, 0, u, x, &e);
    double want[7] = {0.5 + exp(0.1), 0.5 + exp(-0.7), 3 - exp(0.4),
                      -1 + 3 / (1 + exp(2.0)), -1 + 3 * 0.5,
                      -1 + 3 / (1 + exp(-3.5)), 0.25};
    double err = 0, jsum = 0.1 - 0.7 + 0.4;
    for (int k = 0; k < 7; k++)
        err = fmax(err, fabs(x[k] - want[k]));
    for (int k = 3; k < 6; k++) {
        double s = 1 / (1 + exp(-u[k]));
        jsum += log(3.0) + log(s) + log(1 - s);
    }
    ok(err < 1e-14, "[%s] lower (from data), upper, both, none: Stan's "
       "transforms (err %.2g)", be, err);
    kiln_model_log_density(m, 1, u, &lp1, g, &e);
    kiln_model_log_density(m, 0, u, &lp0, NULL, &e);
    double sum = 0;
    for (int k = 0; k < 7; k++)
        sum += want[k];
    is_close(lp0, sum, 1e-14, "[%s] jacobian=0: the density alone", be);
    is_close(lp1 - lp0, jsum, 1e-13, "[%s] jacobian=1 adds the "
             "log-Jacobians", be);
    /* d/du of x + logJ for the lower bound: exp(u) + 1 */
    is_close(g[0], exp(0.1) + 1, 1e-14, "[%s] gradient through lower", be);
    double s3 = 1 / (1 + exp(2.0));
    is_close(g[3], 3 * s3 * (1 - s3) + (1 - 2 * s3), 1e-13,
             "[%s] gradient through both bounds", be);
    double back[7];
    kiln_model_unconstrain(m, x, back, &e);
    err = 0;
    for (int k = 0; k < 7; k++)
        err = fmax(err, fabs(back[k] - u[k]));
    ok(err < 1e-12, "[%s] round trip through every transform (err %.2g)",
       be, err);
    x[4] = 2.5;
    int rc = kiln_model_unconstrain(m, x, back, &e);
    ok(rc && strcmp(e.message, "unconstrain: parameter 'c.2' is 2.5, above "
                               "its upper bound 2") == 0,
       "[%s] above the upper bound: error names c.2", be);
    if (!rc || !strstr(e.message, "c.2"))
        diag("%s", rc ? e.message : "no error");
    kiln_model_free(m);
}

static void test_errors(void)
{
    kiln_err e;
    kiln_model *m = make(ES_KG, "{\"J\": 8, \"y\": [1,2,3,4,5,6,7,8]}",
                         "interp", &e);
    ok(!m && e.code == KILN_ERR_NAME &&
           strstr(e.message, "no variable 'sigma'") &&
           strstr(e.message, "f64[J]") &&
           strstr(e.message, "(it has: J, y)"),
       "a missing data variable is named, with its declared type and what "
       "the data has");
    diag("%s", e.message);
    m = make(ES_KG, "{\"J\": 8, \"y\": [1,2,3,4,5,6,7,8], \"sigma\": [1,2]}",
             "interp", &e);
    ok(!m && e.code == KILN_ERR_SHAPE &&
           strstr(e.message, "shared value 'sigma' (declared f64[J])") &&
           strstr(e.message, "shape (2)"),
       "a wrong shape is an error naming the variable, its declared type "
       "and what the data holds");
    diag("%s", e.message);
    m = make(ES_KG, "{\"J\": 9, \"y\": [1,2,3,4,5,6,7,8], "
             "\"sigma\": [1,2,3,4,5,6,7,8]}", "interp", &e);
    ok(!m && e.code == KILN_ERR_SHAPE && strstr(e.message, "'J'"),
       "J disagreeing with the arrays it sizes is an error");
    diag("%s", e.message);
    /* issue 24: bounds from the data whose width overflows */
    static const char *wide =
        "kiln 1\ngraph w\n  shared L: f64\n  shared U: f64\n"
        "  param x: f64 lower=L upper=U\n  output logp = mul(x, 0)\nend\n";
    m = make(wide, "{\"L\": -1e308, \"U\": 1e308}", "interp", &e);
    ok(!m && e.code == KILN_ERR_ARG &&
           strcmp(e.message, "model: parameter 'x': upper bound 1e+308 "
                             "minus lower bound -1e+308 overflows (the "
                             "width must be finite)") == 0,
       "data bounds -1e308, 1e308 (width overflows): refused, naming x");
    diag("%s", m ? "made" : e.message);
    kiln_model_free(m);
    m = make(wide, "{\"L\": -1e307, \"U\": 1e308}", "interp", &e);
    ok(m != NULL, "data bounds -1e307, 1e308 (finite width): accepted");
    kiln_model_free(m);
    m = make(ES_KG, "{\"J\": 8, \"y\": [1,2,3,4,5,6,7,8", "interp", &e);
    ok(!m && e.code == KILN_ERR_PARSE, "bad JSON is a parse error");
    diag("%s", e.message);
    m = make(ES_KG, NULL, "interp", &e);
    ok(!m && e.code == KILN_ERR_NAME && strstr(e.message, "no data"),
       "no data for a model that needs some");
    diag("%s", e.message);
    m = make("kiln 1\ngraph n\n  input k: f64[n]\n  output logp = sum(k)\n"
             "end\n", NULL, "interp", &e);
    ok(!m && e.code == KILN_ERR_SHAPE &&
           strstr(e.message, "symbol 'n' of parameter 'k'"),
       "a parameter whose size no data gives");
    diag("%s", e.message);
    kiln_graph *g = kiln_parse_string(ES_KG, "m.kg", NULL, &e);
    m = kiln_model_new(g, "nope", ES_DATA, NULL, NULL, &e);
    ok(!m && e.code == KILN_ERR_NAME &&
           strcmp(e.message, "model: no output named 'nope'") == 0,
       "an unknown log-density output");
    m = kiln_model_new(g, "theta", ES_DATA, NULL, NULL, &e);
    ok(!m && e.code == KILN_ERR_TYPE && strstr(e.message, "float scalar"),
       "a log density that is not a scalar");
    diag("%s", e.message);
    kiln_graph_free(g);
    ok(kiln_model_new(NULL, NULL, NULL, NULL, NULL, &e) == NULL &&
           e.code == KILN_ERR_ARG, "NULL graph");
    kiln_model_free(NULL);
}

/* A bound named from the data must be a finite number: lower=L with
 * L = NaN or -inf made every constrained value NaN or -inf (the transform
 * L + exp(u) was built before the value was known). */
static void test_data_bounds(void)
{
    static const char *kg = "kiln 1\ngraph b\n  shared L: f64\n"
                            "  param x: f64 lower=L\n"
                            "  output logp = mul(-0.5, square(x))\nend\n";
    static const char *kgu = "kiln 1\ngraph b\n  shared U: f64\n"
                             "  param x: f64 upper=U\n"
                             "  output logp = mul(-0.5, square(x))\nend\n";
    static const char *bad[] = {"NaN", "\"-Inf\"", "\"Inf\""};
    kiln_err e;
    for (int k = 0; k < 3; k++) {
        char data[64];
        snprintf(data, sizeof data, "{\"L\": %s}", bad[k]);
        kiln_model *m = make(kg, data, "interp", &e);
        ok(!m && e.code == KILN_ERR_ARG && strstr(e.message, "'x'") &&
               strstr(e.message, "'L'") && strstr(e.message, "finite"),
           "lower bound L = %s from the data is refused, naming it", bad[k]);
        diag("%s", m ? "(made)" : e.message);
        kiln_model_free(m);
        snprintf(data, sizeof data, "{\"U\": %s}", bad[k]);
        m = make(kgu, data, "interp", &e);
        ok(!m && e.code == KILN_ERR_ARG && strstr(e.message, "'U'"),
           "upper bound U = %s from the data is refused", bad[k]);
        kiln_model_free(m);
    }
    kiln_model *m = make(kg, "{\"L\": 1.5}", "interp", &e);
    double u = 0, x = 0;
    ok(m && kiln_model_constrain(m, 0, 0, &u, &x, &e) == 0 && x == 2.5,
       "a finite bound from the data still works (L + exp(0))");
    kiln_model_free(m);
}

/* A parameter whose size overflows int64: f64[N, N, N] with N = 2^21 has
 * 2^63 values; the product wrapped to a negative count and the model was
 * made with a negative (or zero) number of unconstrained values. */
static void test_huge_param(void)
{
    static const char *kg = "kiln 1\ngraph h\n  param x: f64[N, N, N]\n"
                            "  output logp = sum(mul(-0.5, square(x)))\n"
                            "end\n";
    static const char *ns[] = {"2097152", "1000000000", "3037000500"};
    kiln_err e;
    for (int k = 0; k < 3; k++) {
        char data[64];
        snprintf(data, sizeof data, "{\"N\": %s}", ns[k]);
        kiln_model *m = make(kg, data, "interp", &e);
        ok(!m && e.code == KILN_ERR_SHAPE &&
               strstr(e.message, "too many parameter values"),
           "f64[N, N, N] with N = %s is refused as too large", ns[k]);
        diag("%s", m ? "(made)" : e.message);
        if (m)
            diag("n_unc %d", kiln_model_n_unc(m));
        kiln_model_free(m);
    }
}

/* The default log density (no "logp" output) is the first output that is
 * neither a gradient nor a tp / gq: a graph whose outputs are `grad`
 * results only used d logp / dx as the log density. */
static void test_default_logp(void)
{
    kiln_err e;
    kiln_model *m = make("kiln 1\ngraph d\n  param x: f64\n"
                         "  lp = mul(-0.5, square(x))\n"
                         "  d = grad(lp, x)\n  output d\nend\n", NULL,
                         "interp", &e);
    ok(!m && e.code == KILN_ERR_ARG && strstr(e.message, "gradient"),
       "a graph whose only output is a gradient has no log density");
    diag("%s", m ? "(made)" : e.message);
    kiln_model_free(m);
    m = make("kiln 1\ngraph d\n  param x: f64\n"
             "  lp = mul(-0.5, square(x))\n  d = grad(lp, x)\n"
             "  output tp x2 = square(x)\n  output d\n  output lp\nend\n",
             NULL, "interp", &e);
    double u = 0.7, lp = 0, g = 0;
    ok(m && kiln_model_log_density(m, 1, &u, &lp, &g, &e) == 0 &&
           fabs(lp - -0.245) < 1e-15 && fabs(g - -0.7) < 1e-15,
       "the first output that is not a tp, gq or gradient is the density");
    diag("lp %g grad %g", lp, g);
    kiln_model_free(m);
}

/* Data that is neither JSON text nor a path ending in .json (a path to a
 * .txt file, /dev/null, "d.JSON") was parsed as JSON text: "<data>:1:1:
 * unexpected character (at '/tmp/d.txt')" never said it was taken for
 * JSON, nor that only .json paths are read. */
static void test_data_not_json(void)
{
    static const char *bad[] = {"/tmp/data.txt", "/dev/null", "d.JSON",
                                "  data.csv"};
    kiln_err e;
    for (int k = 0; k < 4; k++) {
        kiln_model *m = make(ES_KG, bad[k], "interp", &e);
        ok(!m && strstr(e.message, "neither JSON text") &&
               strstr(e.message, ".json"),
           "data '%s': the message says what data may be", bad[k]);
        diag("%s", m ? "(made)" : e.message);
        kiln_model_free(m);
    }
}

/* A model whose only parameter has no values (f64[0]): every call takes
 * NULL vectors.  The Hessian-vector product wrote memset(NULL, 0, 0)
 * (undefined behaviour; UBSan stops the sanitizer build there). */
static void test_zero_size(void)
{
    kiln_err e;
    kiln_model *m = make("kiln 1\ngraph z\n  param x: f64[0] lower=0\n"
                         "  output tp t = sum(x)\n"
                         "  output logp = sum(x)\nend\n", NULL, "interp", &e);
    if (!ok(m != NULL && kiln_model_n_unc(m) == 0, "f64[0]: model made"))
        return;
    double lp = 1, grad = 0, hess = 0, t = -1;
    ok(kiln_model_log_density(m, 1, NULL, &lp, &grad, &e) == 0 && lp == 0,
       "f64[0]: log density of no values is 0");
    ok(kiln_model_log_density_hessian(m, 1, NULL, &lp, NULL, &hess, &e) == 0,
       "f64[0]: Hessian");
    ok(kiln_model_log_density_hvp(m, 1, NULL, NULL, &lp, NULL, &e) == 0 &&
           lp == 0, "f64[0]: Hessian-vector product with NULL vectors");
    ok(kiln_model_constrain(m, 1, 0, NULL, &t, &e) == 0 && t == 0,
       "f64[0]: constrain gives the tp (a sum of nothing)");
    kiln_model_free(m);
}

/* A symbol named in the data by a value that is not an integer scalar
 * ("N": 3.5, "N": [2]) was reported as "no data binds it", as if the data
 * had no N at all. */
static void test_symbol_not_int(void)
{
    const char *kg = "kiln 1\ngraph s\n  param x: f64[N]\n"
                     "  output logp = sum(x)\nend\n";
    /* the third: N = 8.5 and an array of 1 that N sizes ran with N = 1 */
    static const char *kg2 = "kiln 1\ngraph s\n  param x: f64[N]\n"
                             "  shared y: f64[N]\n"
                             "  output logp = sum(mul(x, y))\nend\n";
    static const char *data[] = {"{\"N\": 3.5}", "{\"N\": [2]}",
                                 "{\"N\": 8.5, \"y\": [1]}"};
    kiln_err e;
    for (int k = 0; k < 3; k++) {
        if (k == 2)
            kg = kg2;
        kiln_model *m = make(kg, data[k], "interp", &e);
        ok(!m && e.code == KILN_ERR_SHAPE &&
               strstr(e.message, "'N' is not an integer scalar"),
           "data %s: the message says N is not an integer scalar", data[k]);
        diag("%s", m ? "(made)" : e.message);
        kiln_model_free(m);
    }
}

/* 4 threads on one model agree with serial calls */
typedef struct job {
    kiln_model *m;
    double lp[64], g[64][10];
    int rc;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    kiln_err e;
    for (int r = 0; r < 200; r++)
        for (int k = 0; k < 64; k++) {
            double u[10];
            for (int i = 0; i < 10; i++)
                u[i] = 0.01 * k - 0.1 * i;
            j->rc |= kiln_model_log_density(j->m, 1, u, &j->lp[k], j->g[k],
                                            &e);
        }
    return NULL;
}

static void test_threads(void)
{
    kiln_err e;
    kiln_model *m = make(ES_KG, ES_DATA, NULL, &e);
    if (!ok(m != NULL, "threads: model made"))
        return;
    job serial = {m, {0}, {{0}}, 0}, par[4];
    for (int k = 0; k < 64; k++) {
        double u[10];
        for (int i = 0; i < 10; i++)
            u[i] = 0.01 * k - 0.1 * i;
        kiln_model_log_density(m, 1, u, &serial.lp[k], serial.g[k], &e);
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        memset(&par[i], 0, sizeof par[i]);
        par[i].m = m;
        pthread_create(&t[i], NULL, worker, &par[i]);
    }
    int same = 1;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        same &= par[i].rc == 0 &&
                memcmp(par[i].lp, serial.lp, sizeof serial.lp) == 0 &&
                memcmp(par[i].g, serial.g, sizeof serial.g) == 0;
    }
    ok(same, "4 threads calling one model agree with serial calls bit for "
       "bit");
    kiln_model_free(m);
}

/* kiln_model_logp_callback: the density through the plain C pointer,
 * against es_ref (jacobian on and off), a NULL grad, the wrong dim, a
 * non-finite density, and the per-thread message. */
static void test_callback(void)
{
    kiln_err e;
    kiln_model *m = make(ES_KG, ES_DATA, NULL, &e);
    if (!ok(m != NULL, "callback: model made"))
        return;
    uint64_t dim = 0, dim0 = 0;
    void *ud = NULL, *ud0 = NULL;
    kiln_logp_fn fn = kiln_model_logp_callback(m, 1, &dim, &ud, &e);
    kiln_logp_fn fn0 = kiln_model_logp_callback(m, 0, &dim0, &ud0, &e);
    ok(fn && fn0 && dim == 10 && dim0 == 10 && ud && ud0 && ud != ud0,
       "callback: made for jacobian on and off, dim 10");
    double u[10], g[10], g2[10], lp = 0, lp2 = 0;
    for (int j = 0; j < 10; j++)
        u[j] = 0.2 * cos(0.9 * j + 0.4);
    int rc = fn(dim, u, g, &lp, ud);
    ok(rc == KILN_LOGP_OK && *kiln_model_logp_callback_message(ud) == '\0',
       "callback: returns 0 and no message");
    is_close(lp, es_ref(u, 1), 1e-13, "callback: log density with the "
             "Jacobian = hand-derived");
    kiln_model_log_density(m, 1, u, &lp2, g2, &e);
    ok(memcmp(g, g2, sizeof g) == 0, "callback: gradient = "
       "kiln_model_log_density's, bit for bit");
    rc = fn0(dim0, u, NULL, &lp, ud0);
    ok(rc == 0, "callback: grad NULL allowed");
    is_close(lp, es_ref(u, 0), 1e-13, "callback: jacobian off = "
             "hand-derived");
    lp = 7;
    rc = fn(9, u, g, &lp, ud);
    ok(rc == KILN_LOGP_BAD_DIM && lp == 7 &&
           strstr(kiln_model_logp_callback_message(ud), "called with dim 9"),
       "callback: wrong dim is -1, nothing written, a message (%s)",
       kiln_model_logp_callback_message(ud));
    ok(*kiln_model_logp_callback_message(ud0) == '\0',
       "callback: the other callback's message is its own");
    u[9] = 800;                 /* tau = exp(800) = inf */
    rc = fn(dim, u, g, &lp, ud);
    ok(rc == KILN_LOGP_NONFINITE && !isfinite(lp) &&
           strstr(kiln_model_logp_callback_message(ud), "logp is"),
       "callback: a non-finite density is 1 with a message (%s)",
       kiln_model_logp_callback_message(ud));
    ok(kiln_model_logp_callback(NULL, 1, &dim, &ud, &e) == NULL &&
           e.code == KILN_ERR_ARG,
       "callback: NULL model refused");
    kiln_model_free(m);
}

/* Derived dims (core/ir/dimexpr.c): an unconstrained size K*(K-1)/2
 * given by data sizes K, solved back; sizes that disagree or that no K
 * gives are errors; bad expressions are parse errors, never a crash. */
static void test_derived_dims(void)
{
    static const char *kg =
        "kiln 1\ngraph d\n  param x: f64[K*(K-1)/2]\n  shared y: f64[K]\n"
        "  output logp = add(sum(mul(x, x)), sum(y))\nend\n";
    kiln_err e;
    kiln_model *m = make(kg, "{\"y\": [1, 2, 3, 4, 5]}", "interp", &e);
    ok(m && kiln_model_n_unc(m) == 10,
       "f64[K*(K-1)/2] with K = 5 from data has 10 values (%d)",
       m ? kiln_model_n_unc(m) : -1);
    if (!m)
        diag("%s", e.message);
    kiln_model_free(m);
    /* the other way: K from the derived size of a call's input */
    kiln_graph *g = kiln_parse_string(
        "kiln 1\ngraph s\n  input t: f64[K*(K-1)/2]\n  input v: f64[?]\n"
        "  output o = add(sum(t), sum(v))\n  output k = zeros(shape=[K])\n"
        "end\n", NULL, NULL, &e);
    kiln_function *f = g ? kiln_compile(g, NULL, &e) : NULL;
    double t6[6] = {1, 2, 3, 4, 5, 6}, v1 = 0;
    kiln_tensor in[2] = {{KILN_F64, 1, {6}, t6}, {KILN_F64, 1, {1}, &v1}};
    kiln_tensor out[2];
    int rc = f ? kiln_function_call(f, in, out, &e) : -1;
    ok(rc == 0 && out[1].rank == 1 && out[1].shape[0] == 4,
       "an input of K*(K-1)/2 = 6 values solves K = 4 (zeros(shape=[K]))");
    if (rc)
        diag("%s", e.message);
    in[0].shape[0] = 5;
    rc = f ? kiln_function_call(f, in, out, &e) : -1;
    ok(rc == KILN_ERR_SHAPE && strstr(e.message, "input 't'") &&
           strstr(e.message, "'K*(K-1)/2' is 5, which no size of 'K' gives"),
       "5 values: no K gives them, the message names the input and dim");
    diag("%s", rc ? e.message : "(ran)");
    kiln_function_free(f);
    kiln_graph_free(g);
    static const char *bad[] = {"f64[K-]", "f64[K*(K-1]", "f64[K+(]",
                                "f64[2*3]", "f64[K/0+1]",
                                "f64[K-9223372036854775807-9]",
                                "f64[K)]", "f64[K--1]"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[256];
        snprintf(text, sizeof text, "kiln 1\ngraph b\n  input x: %s\n"
                 "  output o = sum(x)\nend\n", bad[k]);
        kiln_graph *gb = kiln_parse_string(text, NULL, NULL, &e);
        kiln_function *fb = gb ? kiln_compile(gb, NULL, &e) : NULL;
        double x[3] = {0};
        kiln_tensor xi = {KILN_F64, 1, {3}, x}, o;
        int r = fb ? kiln_function_call(fb, &xi, &o, &e) : -1;
        ok(!gb || r != 0 || k == 4 || k == 6,
           "%s: an error (parse or call), no crash", bad[k]);
        diag("%s", gb && !r ? "(ran)" : e.message);
        kiln_function_free(fb);
        kiln_graph_free(gb);
    }
}

/* f(u) = u0^2 u1 + 3 u1^2 (+ u0 with the Jacobian): its exact Hessian
 * [[2 u1, 2 u0], [2 u0, 6]], for kiln_fd_hessian / kiln_fd_hvp over a
 * caller's function (the BridgeStan library under MPI uses them so). */
static int quad_calls;

static int quad(const void *ctx, int jac, const double *u, double *lp,
                double *g, kiln_err *err)
{
    (void)ctx, (void)err;
    quad_calls++;
    *lp = u[0] * u[0] * u[1] + 3 * u[1] * u[1] + (jac ? u[0] : 0);
    if (g) {
        g[0] = 2 * u[0] * u[1] + (jac ? 1 : 0);
        g[1] = u[0] * u[0] + 6 * u[1];
    }
    return 0;
}

static void test_fd_generic(void)
{
    double u[2] = {1.5, -0.5}, lp, g[2], H[4], v[2] = {2, 1}, hv[2];
    kiln_err e = {0, ""};
    int rc = kiln_fd_hessian(quad, NULL, 2, 1, u, &lp, g, H, &e), calls;
    calls = quad_calls;
    ok(rc == 0 && calls == 5, "kiln_fd_hessian over a caller's function: "
       "2n + 1 calls (%d)", calls);
    is_close(lp, 1.5 * 1.5 * -0.5 + 0.75 + 1.5, 1e-15, "... its value");
    is_close(H[0], -1.0, 1e-8, "... H00 = 2 u1");
    is_close(H[1], 3.0, 1e-8, "... H01 = 2 u0");
    is_close(H[2], 3.0, 1e-8, "... H10 = 2 u0");
    is_close(H[3], 6.0, 1e-8, "... H11 = 6");
    rc = kiln_fd_hvp(quad, NULL, 2, 1, u, v, &lp, hv, &e);
    ok(rc == 0, "kiln_fd_hvp over a caller's function");
    is_close(hv[0], -1.0 * 2 + 3.0 * 1, 1e-8, "... (H v)0");
    is_close(hv[1], 3.0 * 2 + 6.0 * 1, 1e-8, "... (H v)1");
    ok(kiln_fd_hessian(NULL, NULL, 2, 1, u, &lp, g, H, &e) == KILN_ERR_ARG &&
       strstr(e.message, "NULL"), "kiln_fd_hessian(NULL fn): %s", e.message);
    ok(kiln_fd_hvp(quad, NULL, 2, 1, u, NULL, &lp, hv, &e) == KILN_ERR_ARG,
       "kiln_fd_hvp(NULL v): %s", e.message);
}

int main(void)
{
    const char *bk[3];
    int nb = found_backends(bk);
    double lp_interp = 0;
    for (int b = 0; b < nb; b++) {
        test_eight_schools(bk[b], &lp_interp);
        test_bounds(bk[b]);
    }
    test_errors();
    test_data_bounds();
    test_huge_param();
    test_default_logp();
    test_data_not_json();
    test_zero_size();
    test_symbol_not_int();
    test_derived_dims();
    test_threads();
    test_callback();
    test_fd_generic();
    return done_testing();
}
