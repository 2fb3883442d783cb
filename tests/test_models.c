/*
 * test_models.c — the example models' logp against an independent
 * computation: plain C loops over the same data, written from the model
 * formulas in the .kg comments (not from kiln's lowering), at several
 * points, to 1e-12 relative.
 */
#define _DEFAULT_SOURCE
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/io.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static const double LOG_SQRT_2PI = 0.91893853320467274178;

static double normal_lpdf(double x, double m, double s)
{
    double z = (x - m) / s;
    return -0.5 * z * z - log(s) - LOG_SQRT_2PI;
}

static char path_buf[4096];
static const char *src_path(const char *rel)
{
    const char *top = getenv("KILN_SRCDIR");
    snprintf(path_buf, sizeof path_buf, "%s/%s", top ? top : ".", rel);
    return path_buf;
}

/* ---- radon ---------------------------------------------------------- */

typedef struct radon_data {
    kiln_tensor county, floor, y;
} radon_data;

static double radon_ref(const radon_data *d, double mu_a, double log_sigma_a,
                        const double *a_t, double b, double log_sigma_y)
{
    double sa = exp(log_sigma_a), sy = exp(log_sigma_y);
    double lp = normal_lpdf(mu_a, 0, 10) + normal_lpdf(b, 0, 10);
    for (int j = 0; j < 85; j++)
        lp += normal_lpdf(a_t[j], 0, 1);
    lp += log(2.0) + normal_lpdf(sa, 0, 5) + log_sigma_a;
    lp += log(2.0) + normal_lpdf(sy, 0, 5) + log_sigma_y;
    const int64_t *c = d->county.data;
    const double *fl = d->floor.data, *y = d->y.data;
    for (int64_t i = 0; i < d->y.shape[0]; i++) {
        double a = mu_a + sa * a_t[c[i]];
        lp += normal_lpdf(y[i], a + b * fl[i], sy);
    }
    return lp;
}

/* Hand-derived gradient of radon's logp (see the model comment):
 * with a_j = mu_a + sa a_t_j, r_i = (y_i - yhat_i) / sy^2 and
 * R_j = sum over houses i in county j of r_i:
 *   d/dmu_a   = -mu_a/100 + sum_i r_i
 *   d/da_t_j  = -a_t_j + sa R_j
 *   d/db      = -b/100 + sum_i r_i floor_i
 *   d/dlsa    = sa (-sa/25 + sum_j a_t_j R_j) + 1
 *   d/dlsy    = sum_i ((y_i - yhat_i)^2/sy^2 - 1) - sy^2/25 + 1 */
static void radon_grad_ref(const radon_data *d, double mu_a, double lsa,
                           const double *a_t, double b, double lsy,
                           double *g /* 89: mu_a, lsa, a_t[85], b, lsy */)
{
    double sa = exp(lsa), sy = exp(lsy), R[85] = {0}, sr = 0, srf = 0;
    double ssq = 0;
    const int64_t *c = d->county.data;
    const double *fl = d->floor.data, *y = d->y.data;
    int64_t n = d->y.shape[0];
    for (int64_t i = 0; i < n; i++) {
        double e = y[i] - (mu_a + sa * a_t[c[i]] + b * fl[i]);
        double r = e / (sy * sy);
        R[c[i]] += r;
        sr += r;
        srf += r * fl[i];
        ssq += e * e / (sy * sy) - 1;
    }
    double ra = 0;
    for (int j = 0; j < 85; j++)
        ra += a_t[j] * R[j];
    g[0] = -mu_a / 100 + sr;
    g[1] = sa * (-sa / 25 + ra) + 1;
    for (int j = 0; j < 85; j++)
        g[2 + j] = -a_t[j] + sa * R[j];
    g[87] = -b / 100 + srf;
    g[88] = ssq - sy * sy / 25 + 1;
}

static void test_radon(const char *backend)
{
    kiln_err err = {0, ""};
    radon_data d;
    const char *csv = src_path("examples/data/radon.csv");
    int rc = kiln_csv_read_column(csv, "county_code", KILN_I64, &d.county,
                                  &err);
    rc = rc || kiln_csv_read_column(csv, "floor", KILN_F64, &d.floor, &err);
    rc = rc || kiln_csv_read_column(csv, "log_radon", KILN_F64, &d.y, &err);
    ok(rc == 0, "radon data read (%s)", err.message);
    if (rc)
        return;
    ok(d.y.shape[0] == 919, "919 houses");

    kiln_graph *g = kiln_parse_file(src_path("examples/radon.kg"), &err);
    ok(g != NULL, "radon.kg parses %s", g ? "" : err.message);
    if (!g)
        return;
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = backend;
    kiln_function *f = kiln_compile(g, &opt, &err);
    kiln_graph_free(g);
    ok(f != NULL, "radon compiles with %s %s", backend, f ? "" : err.message);
    if (!f)
        return;
    ok(kiln_function_n_inputs(f) == 5, "radon has 5 inputs");
    int n_out = kiln_function_n_outputs(f);
    ok(n_out == 6 && strcmp(kiln_function_output_name(f, 1), "d_mu_a") == 0 &&
       strcmp(kiln_function_output_name(f, 5), "d_log_sigma_y") == 0,
       "radon outputs logp and its gradient (d_mu_a ... d_log_sigma_y)");

    double a_t[85];
    static const double points[4][4] = {
        {1.5, -0.5, -0.7, -0.3},
        {0.0, 0.0, 0.0, 0.0},
        {1.2, -1.3, -0.6, -0.25},
        {-3.0, 1.0, 2.0, 0.5},
    };
    for (int p = 0; p < 4; p++) {
        for (int j = 0; j < 85; j++)
            a_t[j] = p == 0 ? 0.0 : sin(0.37 * j + p) * (0.5 + 0.3 * p);
        double mu_a = points[p][0], lsa = points[p][1], b = points[p][2];
        double lsy = points[p][3];
        kiln_tensor in[5] = {
            {KILN_F64, 0, {0}, &mu_a}, {KILN_F64, 0, {0}, &lsa},
            {KILN_F64, 1, {85}, a_t},  {KILN_F64, 0, {0}, &b},
            {KILN_F64, 0, {0}, &lsy},
        };
        kiln_tensor out[8];
        rc = kiln_function_call(f, in, out, &err);
        ok(rc == 0, "radon call %d %s", p, rc ? err.message : "");
        if (rc)
            continue;
        double want = radon_ref(&d, mu_a, lsa, a_t, b, lsy);
        double got = *(double *)out[0].data;
        is_close(got, want, 1e-12, "radon logp at point %d (%s): %.17g vs "
                 "%.17g", p, backend, got, want);
        if (n_out != 6)
            continue;
        double gr[89], worst = 0;
        radon_grad_ref(&d, mu_a, lsa, a_t, b, lsy, gr);
        const double *ga = out[3].data;
        double gk[89];
        gk[0] = *(double *)out[1].data;
        gk[1] = *(double *)out[2].data;
        for (int j = 0; j < 85; j++)
            gk[2 + j] = ga[j];
        gk[87] = *(double *)out[4].data;
        gk[88] = *(double *)out[5].data;
        for (int j = 0; j < 89; j++)
            worst = fmax(worst, fabs(gk[j] - gr[j]) / fmax(1, fabs(gr[j])));
        ok(worst <= 1e-11, "radon gradient at point %d matches the hand-derived "
           "one (worst relative error %.2g)", p, worst);
    }
    kiln_function_free(f);
    free(d.county.data);
    free(d.floor.data);
    free(d.y.data);
}

/* ---- eight schools -------------------------------------------------- */

static double eight_ref(double mu, double log_tau, const double *theta_t)
{
    static const double y[8] = {28, 8, -3, 7, -1, 1, 18, 12};
    static const double s[8] = {15, 10, 16, 11, 9, 11, 10, 18};
    double tau = exp(log_tau);
    double lp = normal_lpdf(mu, 0, 5);
    lp += log(2.0) - log(M_PI) - log(5.0) - log1p((tau / 5) * (tau / 5));
    lp += log_tau;
    for (int j = 0; j < 8; j++) {
        lp += normal_lpdf(theta_t[j], 0, 1);
        lp += normal_lpdf(y[j], mu + tau * theta_t[j], s[j]);
    }
    return lp;
}

/* Hand-derived gradient of eight schools' logp: with theta_j = mu +
 * tau th_j and r_j = (y_j - theta_j)/s_j^2:
 *   d/dmu      = -mu/25 + sum_j r_j
 *   d/dlog_tau = tau (-(2 tau/25) / (1 + tau^2/25) + sum_j r_j th_j) + 1
 *   d/dth_j    = -th_j + tau r_j */
static void eight_grad_ref(double mu, double log_tau, const double *th,
                           double *g /* 10 */)
{
    static const double y[8] = {28, 8, -3, 7, -1, 1, 18, 12};
    static const double s[8] = {15, 10, 16, 11, 9, 11, 10, 18};
    double tau = exp(log_tau), sr = 0, srt = 0;
    for (int j = 0; j < 8; j++) {
        double r = (y[j] - (mu + tau * th[j])) / (s[j] * s[j]);
        sr += r;
        srt += r * th[j];
        g[2 + j] = -th[j] + tau * r;
    }
    g[0] = -mu / 25 + sr;
    g[1] = tau * (-(2 * tau / 25) / (1 + tau * tau / 25) + srt) + 1;
}

static void test_eight_schools(const char *backend)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(src_path("examples/eight_schools.kg"),
                                    &err);
    ok(g != NULL, "eight_schools.kg parses %s", g ? "" : err.message);
    if (!g)
        return;
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = backend;
    kiln_function *f = kiln_compile(g, &opt, &err);
    kiln_graph_free(g);
    ok(f != NULL, "eight schools compiles %s", f ? "" : err.message);
    if (!f)
        return;
    for (int p = 0; p < 4; p++) {
        double mu = 4.0 - 2.5 * p, log_tau = 1.2 - 0.8 * p, th[8];
        for (int j = 0; j < 8; j++)
            th[j] = cos(1.1 * j + p);
        kiln_tensor in[3] = {{KILN_F64, 0, {0}, &mu},
                             {KILN_F64, 0, {0}, &log_tau},
                             {KILN_F64, 1, {8}, th}};
        kiln_tensor out[4];
        int rc = kiln_function_call(f, in, out, &err);
        ok(rc == 0, "eight schools call %d %s", p, rc ? err.message : "");
        if (rc)
            continue;
        double want = eight_ref(mu, log_tau, th);
        double got = *(double *)out[0].data;
        is_close(got, want, 1e-12, "eight schools logp at point %d (%s): "
                 "%.17g vs %.17g", p, backend, got, want);
        if (kiln_function_n_outputs(f) != 4) {
            ok(0, "eight schools has outputs logp, d_mu, d_log_tau, "
               "d_theta_t");
            continue;
        }
        double gr[10], gk[10], worst = 0;
        eight_grad_ref(mu, log_tau, th, gr);
        gk[0] = *(double *)out[1].data;
        gk[1] = *(double *)out[2].data;
        memcpy(gk + 2, out[3].data, sizeof(double) * 8);
        for (int j = 0; j < 10; j++)
            worst = fmax(worst, fabs(gk[j] - gr[j]) / fmax(1, fabs(gr[j])));
        ok(worst <= 1e-12, "eight schools gradient at point %d matches the "
           "hand-derived one (worst relative error %.2g)", p, worst);
    }
    /* a hand-derived value: mu = 0, tau = 1, theta_t = 0 gives
     * N(0|0,5) + log(2/(5 pi)) - log1p(1/25) + 8 N(0|0,1)
     * + sum_j N(y_j|0,s_j) */
    {
        double mu = 0, log_tau = 0, th[8] = {0};
        kiln_tensor in[3] = {{KILN_F64, 0, {0}, &mu},
                             {KILN_F64, 0, {0}, &log_tau},
                             {KILN_F64, 1, {8}, th}};
        kiln_tensor out[4];
        static const double y[8] = {28, 8, -3, 7, -1, 1, 18, 12};
        static const double s[8] = {15, 10, 16, 11, 9, 11, 10, 18};
        double want = -log(5.0) - LOG_SQRT_2PI + log(2.0 / (5.0 * M_PI)) -
                      log1p(1.0 / 25.0) + 8 * -LOG_SQRT_2PI;
        for (int j = 0; j < 8; j++)
            want += -0.5 * (y[j] / s[j]) * (y[j] / s[j]) - log(s[j]) -
                    LOG_SQRT_2PI;
        int rc = kiln_function_call(f, in, out, &err);
        ok(rc == 0 && fabs(*(double *)out[0].data - want) <=
                          1e-12 * fabs(want),
           "eight schools hand-derived value at the origin (%s)", backend);
    }
    kiln_function_free(f);
}

int main(void)
{
    test_radon("interp");
    test_eight_schools("interp");
    return done_testing();
}
