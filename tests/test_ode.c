/*
 * test_ode.c — the runtime's ODE solvers (kiln_runtime.ode_solve,
 * core/runtime/ode.c) driven by C right-hand sides:
 *   - states and sensitivities against SciPy's solve_ivp (references from
 *     tests/ode_cases.py at test time): exponential decay and
 *     Lotka-Volterra on both methods, Robertson's stiff system on BDF;
 *   - sensitivities against central differences of the solver's own
 *     states;
 *   - f and J from one call (kiln_ode_problem.rhs_jac, ABI 1.10), with and
 *     without `jac`, give the same states and sensitivities; a problem
 *     of ABI 1.9's size is not read past its end;
 *   - repeated output times, no output times;
 *   - failures: too many steps (CV_TOO_MUCH_WORK, ARK_TOO_MUCH_WORK),
 *     a right-hand side that fails, bad times, tolerances and values;
 *   - two threads solving at once give the serial results bit for bit
 *     (run under ThreadSanitizer by `make check-threads`).
 * Built without SUNDIALS, it checks the "built without SUNDIALS" error.
 */
#define _POSIX_C_SOURCE 200809L

#include <kiln/backend.h>
#include <kiln/kiln.h>

#include "ode.h"
#include "runtime.h"
#include "tap.h"
#include "ode_lv.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the systems (the same as tests/ode_cases.py's) ---- */

static int decay_f(void *c, double t, const double *y, const double *th,
                   double *o)
{
    (void)c, (void)t;
    o[0] = -th[0] * y[0];
    return 0;
}

static int decay_j(void *c, double t, const double *y, const double *th,
                   double *o)
{
    (void)c, (void)t;
    o[0] = -th[0];
    o[1] = -y[0];
    return 0;
}

static int rob_f(void *c, double t, const double *y, const double *k,
                 double *o)
{
    (void)c, (void)t;
    o[0] = -k[0] * y[0] + k[1] * y[1] * y[2];
    o[1] = k[0] * y[0] - k[1] * y[1] * y[2] - k[2] * y[1] * y[1];
    o[2] = k[2] * y[1] * y[1];
    return 0;
}

static int rob_j(void *c, double t, const double *y, const double *k,
                 double *o)
{
    (void)c, (void)t;
    double a = y[0], b = y[1], d = y[2];
    double J[18] = {
        -k[0], k[1] * d, k[1] * b, -a, b * d, 0,
        k[0], -k[1] * d - 2 * k[2] * b, -k[1] * b, a, -b * d, -b * b,
        0, 2 * k[2] * b, 0, 0, 0, b * b};
    memcpy(o, J, sizeof J);
    return 0;
}

static int broken_f(void *c, double t, const double *y, const double *th,
                    double *o)
{
    (void)c, (void)y, (void)th;
    o[0] = 0;
    return t > 0.25 ? -1 : 0;
}

typedef struct ode_sys {
    const char *name;
    kiln_ode_fn f, j;
} ode_sys;

/* rhs_jac for the systems: ctx is the ode_sys; counts its calls. */
static long fj_calls;
static int sys_fj(void *c, double t, const double *y, const double *th,
                  double *dy, double *jac)
{
    const ode_sys *s = c;
    fj_calls++;
    int rc = s->f(NULL, t, y, th, dy);
    return rc ? rc : s->j(NULL, t, y, th, jac);
}

static int failing_fj(void *c, double t, const double *y, const double *th,
                      double *dy, double *jac)
{
    (void)c, (void)t, (void)y, (void)th, (void)dy, (void)jac;
    return -1;
}

static const ode_sys SYSTEMS[] = {
    {"decay", decay_f, decay_j},
    {"lv", lv_f, lv_j},
    {"robertson", rob_f, rob_j},
};

static kiln_ode_problem problem(const ode_sys *s, int method, int64_t n,
                                int64_t p, double rtol, double atol,
                                int64_t steps)
{
    kiln_ode_problem pb = {
        .struct_size = sizeof pb, .method = (uint32_t)method, .n = n,
        .p = p, .rtol = rtol, .atol = atol, .max_num_steps = steps,
        .label = method == KILN_ODE_BDF ? "ode_bdf 'C'" : "ode_rk45 'C'",
        .rhs = s->f, .jac = s->j};
    return pb;
}

/* ---- the SciPy cases ---- */

typedef struct ode_case {
    char name[32], system[32];
    int n, p, nts;
    double t0;
    double *y0, *theta, *ts, *y, *sens;
} ode_case;

static double *read_line(FILE *fp, const char *key, int64_t n)
{
    char k[32];
    if (fscanf(fp, "%31s", k) != 1 || strcmp(k, key))
        return NULL;
    double *v = calloc((size_t)(n ? n : 1), sizeof *v);
    for (int64_t i = 0; v && i < n; i++)
        if (fscanf(fp, "%lf", &v[i]) != 1) {
            free(v);
            return NULL;
        }
    return v;
}

/* Reads the cases (at most `max`); returns how many, or -1 to skip with
 * the reason in why. */
static int read_cases(ode_case *c, int max, char *why, size_t wsz)
{
    const char *top = getenv("KILN_SRCDIR");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/ode_cases.py'",
             top ? top : "..");
    FILE *fp = access("/usr/bin/python3", X_OK) == 0 ? popen(cmd, "r")
                                                     : NULL;
    if (!fp) {
        snprintf(why, wsz, "no /usr/bin/python3");
        return -1;
    }
    int nc = 0;
    char word[32];
    while (nc < max && fscanf(fp, "%31s", word) == 1) {
        if (!strcmp(word, "SKIP")) {
            snprintf(why, wsz, "no scipy");
            pclose(fp);
            return -1;
        }
        ode_case *k = &c[nc];
        double *t0;
        if (strcmp(word, "case") ||
            fscanf(fp, "%31s %31s %d %d %d", k->name, k->system, &k->n,
                   &k->p, &k->nts) != 5 ||
            !(t0 = read_line(fp, "t0", 1)))
            break;
        k->t0 = *t0;
        free(t0);
        int64_t m = k->n + k->p;
        k->y0 = read_line(fp, "y0", k->n);
        k->theta = read_line(fp, "theta", k->p);
        k->ts = read_line(fp, "ts", k->nts);
        k->y = read_line(fp, "y", (int64_t)k->nts * k->n);
        k->sens = read_line(fp, "sens", (int64_t)k->nts * k->n * m);
        if (!k->y0 || !k->theta || !k->ts || !k->y || !k->sens)
            break;
        nc++;
    }
    pclose(fp);
    return nc;
}

static const ode_sys *system_named(const char *name)
{
    for (size_t i = 0; i < sizeof SYSTEMS / sizeof *SYSTEMS; i++)
        if (!strcmp(SYSTEMS[i].name, name))
            return &SYSTEMS[i];
    return NULL;
}

/* The largest of |got - want| / (rtol |want| + atol) over v. */
static double worst(const double *got, const double *want, int64_t n,
                    double rtol, double atol)
{
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / (rtol * fabs(want[i]) + atol);
        if (!(e <= w))
            w = e;
    }
    return w;
}

/* The sensitivities are compared per column k (one d/dz_k) relative to
 * that column's largest magnitude: its entries span many decades. */
static double worst_sens(const double *got, const double *want, int nts,
                         int n, int m, double rtol)
{
    double w = 0;
    for (int k = 0; k < m; k++) {
        double scale = 0;
        for (int r = 0; r < nts * n; r++)
            scale = fmax(scale, fabs(want[r * m + k]));
        for (int r = 0; r < nts * n; r++) {
            double e = fabs(got[r * m + k] - want[r * m + k]) /
                       (rtol * scale + 1e-300);
            if (!(e <= w))
                w = e;
        }
    }
    return w;
}

static void case_tests(const ode_case *c, int method)
{
    const ode_sys *s = system_named(c->system);
    const char *mn = method == KILN_ODE_BDF ? "bdf" : "rk45";
    if (!s) {
        ok(0, "%s: unknown system %s", c->name, c->system);
        return;
    }
    int n = c->n, m = c->n + c->p, nts = c->nts;
    int rob = !strcmp(c->system, "robertson");
    kiln_ode_problem pb = problem(s, method, n, c->p, 1e-10,
                                  rob ? 1e-14 : 1e-10, 100000000);
    double *y = calloc((size_t)(nts * n), sizeof *y);
    double *S = calloc((size_t)(nts * n * m), sizeof *S);
    double *yp = calloc((size_t)(nts * n), sizeof *yp);
    double *ym = calloc((size_t)(nts * n), sizeof *ym);
    double *fd = calloc((size_t)(nts * n * m), sizeof *fd);
    double *z = calloc((size_t)m, sizeof *z);
    char err[256] = "";
    int rc = kiln_ode_solve(&pb, c->t0, c->y0, c->theta, nts, c->ts, y, S,
                            err, sizeof err);
    ok(rc == KILN_OK, "%s %s: solves (%s)", c->name, mn, err);
    /* f and J from one call, beside jac and instead of it: the same
     * values on the same steps */
    for (int nojac = 0; nojac < 2; nojac++) {
        kiln_ode_problem p2 = pb;
        p2.rhs_jac = sys_fj;
        p2.ctx = (void *)(uintptr_t)s;
        if (nojac)
            p2.jac = NULL;
        fj_calls = 0;
        int rc2 = kiln_ode_solve(&p2, c->t0, c->y0, c->theta, nts, c->ts,
                                 yp, fd, err, sizeof err);
        double w = rc2 ? INFINITY : 0;
        for (int i = 0; i < nts * n; i++)
            w = fmax(w, fabs(yp[i] - y[i]) / fmax(1e-300, fabs(y[i])));
        for (int i = 0; i < nts * n * m; i++)
            w = fmax(w, fabs(fd[i] - S[i]) / fmax(1, fabs(S[i])));
        /* RK45 always takes f and J from rhs_jac; BDF only when there is
         * no jac */
        int used = method == KILN_ODE_RK45 || nojac ? fj_calls > 0
                                                    : fj_calls == 0;
        ok(w <= 1e-14 && used,
           "%s %s: rhs_jac %s jac: states and sensitivities equal (worst "
           "%.3g, %ld calls) %s", c->name, mn, nojac ? "without" : "beside",
           w, fj_calls, err);
    }
    /* rtol 1e-10 in the solver; global errors grow past it */
    double wy = worst(y, c->y, nts * n, 1e-7, rob ? 1e-12 : 1e-8);
    ok(wy <= 1, "%s %s: states match solve_ivp (error %.3g of the "
       "tolerance 1e-7)", c->name, mn, wy);
    double ws = worst_sens(S, c->sens, nts, n, m, 1e-6);
    ok(ws <= 1,
       "%s %s: sensitivities match solve_ivp's (error %.3g of the "
       "tolerance 1e-6)", c->name, mn, ws);
    /* central differences of the solver's own states, at a tighter
     * tolerance so that the difference error dominates */
    pb.rtol = 1e-12;
    pb.atol = rob ? 1e-16 : 1e-12;
    memcpy(z, c->y0, sizeof(double) * (size_t)n);
    memcpy(z + n, c->theta, sizeof(double) * (size_t)c->p);
    int fd_ok = 1;
    for (int k = 0; k < m && fd_ok; k++) {
        double h = 1e-5 * fmax(fabs(z[k]), 1e-2), zk = z[k];
        if (zk == 0 && rob) {
            /* a step either side of a zero concentration leaves the
             * chemistry (y < 0 blows up): solve_ivp's column only */
            for (int r = 0; r < nts * n; r++)
                fd[r * m + k] = S[r * m + k];
            continue;
        }
        z[k] = zk + h;
        fd_ok &= kiln_ode_solve(&pb, c->t0, z, z + n, nts, c->ts, yp,
                                NULL, err, sizeof err) == KILN_OK;
        z[k] = zk - h;
        fd_ok &= kiln_ode_solve(&pb, c->t0, z, z + n, nts, c->ts, ym,
                                NULL, err, sizeof err) == KILN_OK;
        z[k] = zk;
        for (int r = 0; r < nts * n; r++)
            fd[r * m + k] = (yp[r] - ym[r]) / (2 * h);
    }
    double wf = worst_sens(S, fd, nts, n, m, 1e-5);
    ok(fd_ok && wf <= 1,
       "%s %s: sensitivities match central differences (error %.3g of "
       "the tolerance 1e-5)", c->name, mn, wf);
    for (int i = 1; i < nts; i++)
        if (c->ts[i] == c->ts[i - 1])
            ok(!memcmp(y + i * n, y + (i - 1) * n, sizeof(double) * n) &&
                   !memcmp(S + i * n * m, S + (i - 1) * n * m,
                           sizeof(double) * n * m),
               "%s %s: a repeated output time repeats the row", c->name,
               mn);
    free(y), free(S), free(yp), free(ym), free(fd), free(z);
}

/* ---- failures ---- */

static int has(const char *s, const char *part)
{
    return strstr(s, part) != NULL;
}

static void failure_tests(void)
{
    const double y0[3] = {1, 0, 0}, k[3] = {0.04, 1e4, 3e7};
    const double ts[3] = {0.5, 4e4, 4e5};
    double y[9], S[54];
    char err[256];
    kiln_ode_problem pb = problem(&SYSTEMS[2], KILN_ODE_BDF, 3, 3, 1e-10,
                                  1e-14, 20);
    int rc = kiln_ode_solve(&pb, 0, y0, k, 3, ts, y, S, err, sizeof err);
    ok(rc == KILN_ERR_RUNTIME && has(err, "ode_bdf 'C': CVODE failed at t=")
           && has(err, "(CV_TOO_MUCH_WORK)"),
       "bdf: too many steps is CV_TOO_MUCH_WORK: %s", err);
    pb = problem(&SYSTEMS[2], KILN_ODE_RK45, 3, 3, 1e-6, 1e-6, 500);
    rc = kiln_ode_solve(&pb, 0, y0, k, 3, ts, y, NULL, err, sizeof err);
    ok(rc == KILN_ERR_RUNTIME &&
           has(err, "ode_rk45 'C': ARKODE failed at t=") &&
           has(err, "(ARK_TOO_MUCH_WORK)"),
       "rk45 on a stiff system: ARK_TOO_MUCH_WORK: %s", err);

    const ode_sys broken = {"broken", broken_f, decay_j};
    const double one = 1, th = 1, t1[1] = {1};
    for (int mth = 0; mth < 2; mth++) {
        pb = problem(&broken, mth, 1, 1, 1e-6, 1e-6, 1000);
        rc = kiln_ode_solve(&pb, 0, &one, &th, 1, t1, y, NULL, err,
                            sizeof err);
        ok(rc == KILN_ERR_RUNTIME &&
               has(err, "the right-hand side could not be evaluated"),
           "%s: a failing right-hand side: %s", mth ? "bdf" : "rk45", err);
    }

    pb = problem(&SYSTEMS[0], KILN_ODE_BDF, 1, 1, 1e-6, 1e-6, 1000);
    const double bad_t[2] = {1, 0.5}, eq_t0[1] = {0};
    rc = kiln_ode_solve(&pb, 0, &one, &th, 2, bad_t, y, NULL, err,
                        sizeof err);
    ok(rc == KILN_ERR_RUNTIME && has(err, "must be sorted"),
       "unsorted times: %s", err);
    rc = kiln_ode_solve(&pb, 0, &one, &th, 1, eq_t0, y, NULL, err,
                        sizeof err);
    ok(rc == KILN_ERR_RUNTIME && has(err, "greater than t0"),
       "ts[0] == t0: %s", err);
    const double nan_th = NAN;
    rc = kiln_ode_solve(&pb, 0, &one, &nan_th, 1, t1, y, NULL, err,
                        sizeof err);
    ok(rc == KILN_ERR_RUNTIME && has(err, "theta[0] is nan"),
       "nan theta: %s", err);
    pb.rtol = 0;
    rc = kiln_ode_solve(&pb, 0, &one, &th, 1, t1, y, NULL, err, sizeof err);
    ok(rc == KILN_ERR_ARG && has(err, "relative_tolerance"),
       "rtol 0: %s", err);
    pb.rtol = 1e-6;
    pb.jac = NULL;
    rc = kiln_ode_solve(&pb, 0, &one, &th, 1, t1, y, NULL, err, sizeof err);
    ok(rc == KILN_ERR_ARG && has(err, "Jacobian"), "bdf without a "
       "Jacobian: %s", err);
    /* rhs_jac stands in for jac, but not past an ABI 1.9 problem's end */
    pb.rhs_jac = sys_fj;
    pb.ctx = (void *)(uintptr_t)&SYSTEMS[0];
    rc = kiln_ode_solve(&pb, 0, &one, &th, 1, t1, y, NULL, err, sizeof err);
    ok(rc == KILN_OK, "bdf with rhs_jac and no jac solves (%s)",
       rc ? err : "");
    pb.struct_size = offsetof(kiln_ode_problem, rhs_jac);
    rc = kiln_ode_solve(&pb, 0, &one, &th, 1, t1, y, NULL, err, sizeof err);
    ok(rc == KILN_ERR_ARG && has(err, "Jacobian"), "an ABI 1.9 problem's "
       "size hides rhs_jac: %s", err);
    pb.jac = decay_j;
    pb.rhs_jac = failing_fj;
    rc = kiln_ode_solve(&pb, 0, &one, &th, 1, t1, y, S, err, sizeof err);
    ok(rc == KILN_OK, "an ABI 1.9 problem with jac solves (rhs_jac unread) "
       "(%s)", rc ? err : "");
    pb.struct_size = sizeof pb;
    for (int mth = 0; mth < 2; mth++) {
        pb.method = (uint32_t)mth;
        pb.label = mth ? "ode_bdf 'C'" : "ode_rk45 'C'";
        pb.jac = NULL;
        rc = kiln_ode_solve(&pb, 0, &one, &th, 1, t1, y, S, err,
                            sizeof err);
        ok(rc == KILN_ERR_RUNTIME &&
               has(err, "the right-hand side could not be evaluated"),
           "%s: a failing rhs_jac: %s", mth ? "bdf" : "rk45", err);
    }
    pb = problem(&SYSTEMS[0], KILN_ODE_BDF, 1, 1, 1e-6, 1e-6, 1000);
    rc = kiln_ode_solve(&pb, 0, &one, &th, 0, NULL, NULL, NULL, err,
                        sizeof err);
    ok(rc == KILN_OK, "no output times: nothing to do");
    const kiln_runtime *rt = kiln_runtime_get();
    ok(rt->version >= 5 && rt->ode_solve == kiln_ode_solve,
       "the runtime table (version %u) carries ode_solve", rt->version);
}

/* ---- threads ---- */

typedef struct job {
    int method;
    double y[40], S[240];
    int rc;
} job;

static void *run_lv(void *arg)
{
    job *j = arg;
    const double y0[2] = {33.956, 5.933}, th[4] = {0.55, 0.028, 0.8, 0.024};
    double ts[20];
    for (int i = 0; i < 20; i++)
        ts[i] = i + 1;
    kiln_ode_problem pb = problem(&SYSTEMS[1], j->method, 2, 4, 1e-8, 1e-8,
                                  1000000);
    char err[256];
    j->rc = 0;
    for (int r = 0; r < 5; r++)
        j->rc |= kiln_ode_solve(&pb, 0, y0, th, 20, ts, j->y, j->S, err,
                                sizeof err);
    return NULL;
}

static void thread_tests(void)
{
    job serial[2] = {{.method = KILN_ODE_BDF}, {.method = KILN_ODE_RK45}};
    job par[2] = {{.method = KILN_ODE_BDF}, {.method = KILN_ODE_RK45}};
    run_lv(&serial[0]);
    run_lv(&serial[1]);
    pthread_t th[2];
    int started = 0;
    for (int i = 0; i < 2; i++)
        started += pthread_create(&th[i], NULL, run_lv, &par[i]) == 0;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    ok(started == 2 && !par[0].rc && !par[1].rc && !serial[0].rc &&
           !serial[1].rc,
       "two threads solve at once");
    ok(!memcmp(par, serial, sizeof par),
       "each thread's results equal the serial ones bit for bit");
}

int main(void)
{
    if (!kiln_ode_available()) {
        const double y0 = 1, th = 1, ts = 1;
        double y;
        char err[256];
        kiln_ode_problem pb = problem(&SYSTEMS[0], KILN_ODE_BDF, 1, 1, 1e-6,
                                      1e-6, 100);
        int rc = kiln_ode_solve(&pb, 0, &y0, &th, 1, &ts, &y, NULL, err,
                                sizeof err);
        ok(rc == KILN_ERR_RUNTIME &&
               has(err, "kiln was built without SUNDIALS"),
           "without SUNDIALS: %s", err);
        return done_testing();
    }
    ode_case cases[8];
    memset(cases, 0, sizeof cases);
    char why[64] = "";
    int nc = read_cases(cases, 8, why, sizeof why);
    if (nc < 0) {
        ok(1, "against solve_ivp # SKIP %s", why);
    } else {
        ok(nc == 3, "tests/ode_cases.py gave %d cases (3 expected)", nc);
        for (int i = 0; i < nc; i++) {
            case_tests(&cases[i], KILN_ODE_BDF);
            if (strcmp(cases[i].system, "robertson"))
                case_tests(&cases[i], KILN_ODE_RK45);
        }
    }
    for (int i = 0; i < 8; i++) {
        free(cases[i].y0), free(cases[i].theta), free(cases[i].ts);
        free(cases[i].y), free(cases[i].sens);
    }
    failure_tests();
    thread_tests();
    return done_testing();
}
