/*
 * ode_lv.h — Lotka-Volterra as posteriordb's lotka_volterra.stan writes
 * it (u' = (a - b v) u, v' = (-c + d u) v; theta = (a, b, c, d)): the
 * right-hand side and its Jacobian in C, and the same right-hand side as
 * a kiln body (LV_BODY), for tests/test_ode.c, tests/test_ode_op.c and
 * bench/bench_ode.c.
 */
#ifndef KILN_TESTS_ODE_LV_H
#define KILN_TESTS_ODE_LV_H

#include <string.h>

static const char LV_BODY[] =
    "kiln 1\n"
    "graph lv\n"
    "  input t: f64\n"
    "  input y: f64[2]\n"
    "  input theta: f64[4]\n"
    "  u = y[0]\n"
    "  v = y[1]\n"
    "  du = mul(sub(theta[0], mul(theta[1], v)), u)\n"
    "  dv = mul(add(neg(theta[2]), mul(theta[3], u)), v)\n"
    "  output dy = stack(du, dv, axis=0)\n"
    "end\n";

static inline int lv_f(void *c, double t, const double *y,
                       const double *th, double *o)
{
    (void)c, (void)t;
    o[0] = (th[0] - th[1] * y[1]) * y[0];
    o[1] = (-th[2] + th[3] * y[0]) * y[1];
    return 0;
}

/* Row-major [2, 6]: row i = [d f_i / d y, d f_i / d theta]. */
static inline int lv_j(void *c, double t, const double *y,
                       const double *th, double *o)
{
    (void)c, (void)t;
    double u = y[0], v = y[1];
    double r[12] = {th[0] - th[1] * v, -th[1] * u, u, -u * v, 0, 0,
                    th[3] * v, -th[2] + th[3] * u, 0, 0, -v, u * v};
    memcpy(o, r, sizeof r);
    return 0;
}

#endif
