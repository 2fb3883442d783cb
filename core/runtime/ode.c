/*
 * ode.c — kiln_runtime.ode_solve over SUNDIALS 6 (CVODES BDF with
 * staggered forward sensitivities; ARKODE ERK Dormand-Prince 5(4) on the
 * coupled system).  Methods, sources and thread safety: ode.h.
 */
#include "config.h"

#include "ode.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *errbuf, size_t size, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *errbuf, size_t size, int code, const char *fmt, ...)
{
    if (errbuf && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, size, fmt, ap);
        va_end(ap);
    }
    return code;
}

static const char *label_of(const kiln_ode_problem *pb)
{
    if (pb->label && pb->label[0])
        return pb->label;
    return pb->method == KILN_ODE_BDF ? "ode_bdf" : "ode_rk45";
}

/* The problem's rhs_jac when its struct_size holds it (ABI 1.10), else
 * NULL. */
typedef int (*ode_fj_fn)(void *, double, const double *, const double *,
                         double *, double *);
static ode_fj_fn rhs_jac_of(const kiln_ode_problem *pb)
{
    return pb->struct_size >= offsetof(kiln_ode_problem, rhs_jac) +
                                  sizeof pb->rhs_jac
               ? pb->rhs_jac
               : NULL;
}

/* The checks both builds make: sizes, tolerances, times, finite values. */
static int check_problem(const kiln_ode_problem *pb, double t0,
                         const double *y0, const double *theta, int64_t nts,
                         const double *ts, const double *y_out,
                         const double *sens_out, char *errbuf, size_t size)
{
    if (!pb || pb->struct_size < offsetof(kiln_ode_problem, rhs_jac))
        return fail(errbuf, size, KILN_ERR_ARG,
                    "ode_solve: no problem, or one from another ABI");
    const char *lb = label_of(pb);
    if (pb->method != KILN_ODE_RK45 && pb->method != KILN_ODE_BDF)
        return fail(errbuf, size, KILN_ERR_ARG, "%s: unknown method %u", lb,
                    (unsigned)pb->method);
    if (pb->n < 1 || pb->p < 0 || nts < 0 || pb->n > (1 << 20) ||
        pb->p > (1 << 20))
        return fail(errbuf, size, KILN_ERR_ARG,
                    "%s: bad sizes (states %lld, parameters %lld, "
                    "times %lld)", lb, (long long)pb->n, (long long)pb->p,
                    (long long)nts);
    if (!(pb->rtol > 0) || !(pb->atol > 0) || !isfinite(pb->rtol) ||
        !isfinite(pb->atol))
        return fail(errbuf, size, KILN_ERR_ARG,
                    "%s: relative_tolerance %g and absolute_tolerance %g "
                    "must be positive and finite", lb, pb->rtol, pb->atol);
    if (pb->max_num_steps < 1)
        return fail(errbuf, size, KILN_ERR_ARG,
                    "%s: max_num_steps %lld must be positive", lb,
                    (long long)pb->max_num_steps);
    if (!pb->rhs || (!pb->jac && !rhs_jac_of(pb) &&
                     (pb->method == KILN_ODE_BDF || sens_out)))
        return fail(errbuf, size, KILN_ERR_ARG,
                    "%s: no right-hand side%s", lb,
                    pb->rhs ? " Jacobian (needed for BDF and sensitivities)"
                            : "");
    if (!y0 || (pb->p && !theta) || (nts && (!ts || !y_out)))
        return fail(errbuf, size, KILN_ERR_ARG, "%s: a NULL array", lb);
    if (!isfinite(t0))
        return fail(errbuf, size, KILN_ERR_RUNTIME,
                    "%s: initial time t0 is %g", lb, t0);
    for (int64_t i = 0; i < nts; i++) {
        if (!isfinite(ts[i]))
            return fail(errbuf, size, KILN_ERR_RUNTIME, "%s: ts[%lld] is %g",
                        lb, (long long)i, ts[i]);
        if (i == 0 && !(ts[0] > t0))
            return fail(errbuf, size, KILN_ERR_RUNTIME,
                        "%s: output times must be greater than t0 "
                        "(ts[0] = %g, t0 = %g)", lb, ts[0], t0);
        if (i > 0 && !(ts[i] >= ts[i - 1]))
            return fail(errbuf, size, KILN_ERR_RUNTIME,
                        "%s: output times must be sorted (ts[%lld] = %g "
                        "after %g)", lb, (long long)i, ts[i], ts[i - 1]);
    }
    for (int64_t j = 0; j < pb->n; j++)
        if (!isfinite(y0[j]))
            return fail(errbuf, size, KILN_ERR_RUNTIME, "%s: y0[%lld] is %g",
                        lb, (long long)j, y0[j]);
    for (int64_t k = 0; k < pb->p; k++)
        if (!isfinite(theta[k]))
            return fail(errbuf, size, KILN_ERR_RUNTIME,
                        "%s: theta[%lld] is %g", lb, (long long)k, theta[k]);
    return KILN_OK;
}

#ifdef KILN_HAVE_SUNDIALS

#include <arkode/arkode_erkstep.h>
#include <cvodes/cvodes.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

int kiln_ode_available(void) { return 1; }

/* One solve's state, passed to SUNDIALS as user data. */
typedef struct solve {
    const kiln_ode_problem *pb;
    ode_fj_fn rhs_jac;   /* pb's, or NULL */
    const double *theta;
    int64_t n, m;        /* states; n + p (Jacobian row length) */
    int64_t ns;          /* sensitivities carried: n + p, or 0 */
    double *jac;         /* [n, m] row-major, at (jac_t, jac_y) */
    double *jac_y;       /* n */
    double *dy;          /* n: jac_at's scratch when it calls rhs_jac */
    double jac_t;
    int jac_valid;
    int failed;          /* a callback returned a negative value */
} solve;

static int all_finite(const double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* SUNDIALS's convention: 0, > 0 recoverable (a smaller step), < 0 fatal. */
static int call_rhs(solve *s, double t, const double *y, double *dy)
{
    int rc = s->pb->rhs(s->pb->ctx, t, y, s->theta, dy);
    if (rc < 0) {
        s->failed = 1;
        return -1;
    }
    return rc > 0 || !all_finite(dy, s->n) ? 1 : 0;
}

/* After the Jacobian was written at (t, y) with the callback's return
 * rc: keeps it when it is usable; SUNDIALS's convention. */
static int jac_kept(solve *s, double t, const double *y, int rc)
{
    if (rc < 0) {
        s->failed = 1;
        return -1;
    }
    if (rc > 0 || !all_finite(s->jac, s->n * s->m))
        return 1;
    memcpy(s->jac_y, y, sizeof(double) * (size_t)s->n);
    s->jac_t = t;
    s->jac_valid = 1;
    return 0;
}

/* The Jacobian at (t, y), kept: CVODES asks for the sensitivity rhs of
 * every parameter in turn at one point, and the Newton matrix there too. */
static int jac_at(solve *s, double t, const double *y)
{
    size_t yb = sizeof(double) * (size_t)s->n;
    if (s->jac_valid && s->jac_t == t && !memcmp(s->jac_y, y, yb))
        return 0;
    s->jac_valid = 0;
    int rc = s->pb->jac ? s->pb->jac(s->pb->ctx, t, y, s->theta, s->jac)
                        : s->rhs_jac(s->pb->ctx, t, y, s->theta, s->dy,
                                     s->jac);
    return jac_kept(s, t, y, rc);
}

/* ds/dt = J_y s + (column k of J_theta when k >= n). */
static void sens_rhs(const solve *s, int64_t k, const double *sk,
                     double *out)
{
    for (int64_t i = 0; i < s->n; i++) {
        const double *row = s->jac + i * s->m;
        double acc = k >= s->n ? row[k] : 0.0;
        for (int64_t j = 0; j < s->n; j++)
            acc += row[j] * sk[j];
        out[i] = acc;
    }
}

/* SUNDIALS reports through this instead of printing to stderr; the
 * return flag tells what failed, so the text is not kept. */
static void quiet_handler(int code, const char *module, const char *func,
                          char *msg, void *ud)
{
    (void)code, (void)module, (void)func, (void)msg, (void)ud;
}

/* ---- CVODES (BDF) ---- */

static int cv_rhs(sunrealtype t, N_Vector y, N_Vector yd, void *ud)
{
    return call_rhs(ud, t, N_VGetArrayPointer(y), N_VGetArrayPointer(yd));
}

static int cv_jac(sunrealtype t, N_Vector y, N_Vector fy, SUNMatrix J,
                  void *ud, N_Vector t1, N_Vector t2, N_Vector t3)
{
    (void)fy, (void)t1, (void)t2, (void)t3;
    solve *s = ud;
    int rc = jac_at(s, t, N_VGetArrayPointer(y));
    if (rc)
        return rc;
    for (int64_t i = 0; i < s->n; i++)
        for (int64_t j = 0; j < s->n; j++)
            SM_ELEMENT_D(J, i, j) = s->jac[i * s->m + j];
    return 0;
}

static int cv_sens1(int ns, sunrealtype t, N_Vector y, N_Vector yd, int is,
                    N_Vector yS, N_Vector ySd, void *ud, N_Vector t1,
                    N_Vector t2)
{
    (void)ns, (void)yd, (void)t1, (void)t2;
    solve *s = ud;
    int rc = jac_at(s, t, N_VGetArrayPointer(y));
    if (rc)
        return rc;
    sens_rhs(s, is, N_VGetArrayPointer(yS), N_VGetArrayPointer(ySd));
    return 0;
}

/* ---- ARKODE ERK on the coupled system ---- */

static int erk_rhs(sunrealtype t, N_Vector z, N_Vector zd, void *ud)
{
    solve *s = ud;
    const double *zv = N_VGetArrayPointer(z);
    double *dv = N_VGetArrayPointer(zd);
    int rc;
    if (s->ns && s->rhs_jac) {
        /* f and J at this (t, y) from one call (issue 28) */
        s->jac_valid = 0;
        rc = jac_kept(s, t, zv,
                      s->rhs_jac(s->pb->ctx, t, zv, s->theta, dv, s->jac));
        if (!rc && !all_finite(dv, s->n))
            rc = 1;
    } else {
        rc = call_rhs(s, t, zv, dv);
        if (rc || !s->ns)
            return rc;
        rc = jac_at(s, t, zv);
    }
    if (rc)
        return rc;
    for (int64_t k = 0; k < s->ns; k++)
        sens_rhs(s, k, zv + s->n * (1 + k), dv + s->n * (1 + k));
    return 0;
}

/* Row i of the outputs from a state and its sensitivities, the latter
 * stored as ns columns of n (column k: d y / d z_k). */
static void store(const solve *s, int64_t i, const double *y,
                  const double *const *cols, double *y_out, double *sens_out)
{
    memcpy(y_out + i * s->n, y, sizeof(double) * (size_t)s->n);
    if (!sens_out)
        return;
    for (int64_t j = 0; j < s->n; j++)
        for (int64_t k = 0; k < s->ns; k++)
            sens_out[(i * s->n + j) * s->ns + k] = cols[k][j];
}

static int solver_failed(const solve *s, char *errbuf, size_t size,
                         int bdf, long flag, double t)
{
    char *name = bdf ? CVodeGetReturnFlagName(flag)
                     : ERKStepGetReturnFlagName(flag);
    int rc = fail(errbuf, size, KILN_ERR_RUNTIME,
                  "%s: %s failed at t=%g (%s)%s", label_of(s->pb),
                  bdf ? "CVODE" : "ARKODE", t, name ? name : "unknown flag",
                  s->failed ? ": the right-hand side could not be evaluated"
                            : "");
    free(name);
    return rc;
}

static int sundials_solve(const kiln_ode_problem *pb, double t0,
                          const double *y0, const double *theta, int64_t nts,
                          const double *ts, double *y_out, double *sens_out,
                          char *errbuf, size_t errbuf_size)
{
    int rc;
    const int bdf = pb->method == KILN_ODE_BDF;
    const char *lb = label_of(pb);
    solve s = {.pb = pb, .rhs_jac = rhs_jac_of(pb), .theta = theta,
               .n = pb->n, .m = pb->n + pb->p,
               .ns = sens_out ? pb->n + pb->p : 0};
    if (s.ns > 0x7fffffff)
        return fail(errbuf, errbuf_size, KILN_ERR_ARG,
                    "%s: too many sensitivities (%lld)", lb,
                    (long long)s.ns);
    SUNContext ctx = NULL;
    void *mem = NULL;
    N_Vector y = NULL;
    N_Vector *yS = NULL;
    SUNMatrix A = NULL;
    SUNLinearSolver LS = NULL;
    double **cols = NULL;
    s.jac = calloc((size_t)(s.n * s.m) + 2 * (size_t)s.n, sizeof(double));
    cols = calloc((size_t)s.ns + 1, sizeof *cols);
    if (!s.jac || !cols || SUNContext_Create(NULL, &ctx)) {
        rc = fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                  "%s: out of memory", lb);
        goto done;
    }
    s.jac_y = s.jac + s.n * s.m;
    s.dy = s.jac_y + s.n;
    /* the solver's vector: the state (BDF, or RK45 without
     * sensitivities) or the coupled state (RK45 with them) */
    int64_t len = bdf ? s.n : s.n * (1 + s.ns);
    y = N_VNew_Serial((sunindextype)len, ctx);
    if (!y) {
        rc = fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                  "%s: out of memory", lb);
        goto done;
    }
    double *yv = N_VGetArrayPointer(y);
    memset(yv, 0, sizeof(double) * (size_t)len);
    memcpy(yv, y0, sizeof(double) * (size_t)s.n);
    long flag;
    if (bdf) {
        mem = CVodeCreate(CV_BDF, ctx);
        if (!mem || CVodeInit(mem, cv_rhs, t0, y) ||
            CVodeSetUserData(mem, &s) ||
            CVodeSetErrHandlerFn(mem, quiet_handler, NULL) ||
            CVodeSStolerances(mem, pb->rtol, pb->atol) ||
            CVodeSetMaxNumSteps(mem, (long)pb->max_num_steps)) {
            rc = fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                      "%s: CVODES could not be set up", lb);
            goto done;
        }
        A = SUNDenseMatrix((sunindextype)s.n, (sunindextype)s.n, ctx);
        LS = A ? SUNLinSol_Dense(y, A, ctx) : NULL;
        if (!LS || CVodeSetLinearSolver(mem, LS, A) ||
            CVodeSetJacFn(mem, cv_jac)) {
            rc = fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                      "%s: CVODES's dense linear solver could not be set "
                      "up", lb);
            goto done;
        }
        if (s.ns) {
            yS = N_VCloneVectorArray((int)s.ns, y);
            if (!yS) {
                rc = fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                          "%s: out of memory", lb);
                goto done;
            }
            for (int64_t k = 0; k < s.ns; k++) {
                double *v = N_VGetArrayPointer(yS[k]);
                memset(v, 0, sizeof(double) * (size_t)s.n);
                if (k < s.n)
                    v[k] = 1.0;     /* d y(t0) / d y0 = I, / d theta = 0 */
                cols[k] = v;
            }
            if (CVodeSensInit1(mem, (int)s.ns, CV_STAGGERED, cv_sens1, yS) ||
                CVodeSensEEtolerances(mem) ||
                CVodeSetSensErrCon(mem, SUNTRUE)) {
                rc = fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                          "%s: CVODES's sensitivities could not be set up",
                          lb);
                goto done;
            }
        }
    } else {
        for (int64_t k = 0; k < s.ns; k++) {
            cols[k] = yv + s.n * (1 + k);
            if (k < s.n)
                cols[k][k] = 1.0;
        }
        mem = ERKStepCreate(erk_rhs, t0, y, ctx);
        if (!mem || ERKStepSetUserData(mem, &s) ||
            ERKStepSetErrHandlerFn(mem, quiet_handler, NULL) ||
            ERKStepSetTableNum(mem, ARKODE_DORMAND_PRINCE_7_4_5) ||
            ERKStepSStolerances(mem, pb->rtol, pb->atol) ||
            ERKStepSetMaxNumSteps(mem, (long)pb->max_num_steps)) {
            rc = fail(errbuf, errbuf_size, KILN_ERR_NOMEM,
                      "%s: ARKODE could not be set up", lb);
            goto done;
        }
    }
    double t = t0;
    for (int64_t i = 0; i < nts; i++) {
        if (i > 0 && ts[i] == ts[i - 1]) {
            memcpy(y_out + i * s.n, y_out + (i - 1) * s.n,
                   sizeof(double) * (size_t)s.n);
            if (sens_out)
                memcpy(sens_out + i * s.n * s.ns,
                       sens_out + (i - 1) * s.n * s.ns,
                       sizeof(double) * (size_t)(s.n * s.ns));
            continue;
        }
        flag = bdf ? CVode(mem, ts[i], y, &t, CV_NORMAL)
                   : ERKStepEvolve(mem, ts[i], y, &t, ARK_NORMAL);
        if (flag < 0) {
            rc = solver_failed(&s, errbuf, errbuf_size, bdf, flag, t);
            goto done;
        }
        if (bdf && s.ns) {
            flag = CVodeGetSens(mem, &t, yS);
            if (flag < 0) {
                rc = solver_failed(&s, errbuf, errbuf_size, bdf, flag, t);
                goto done;
            }
        }
        store(&s, i, yv, (const double *const *)cols, y_out, sens_out);
    }
    rc = KILN_OK;
done:
    if (mem) {
        if (bdf)
            CVodeFree(&mem);
        else
            ERKStepFree(&mem);
    }
    if (yS)
        N_VDestroyVectorArray(yS, (int)s.ns);
    if (LS)
        SUNLinSolFree(LS);
    if (A)
        SUNMatDestroy(A);
    if (y)
        N_VDestroy(y);
    if (ctx)
        SUNContext_Free(&ctx);
    free(cols);
    free(s.jac);
    return rc;
}

#else

int kiln_ode_available(void) { return 0; }

#endif

int kiln_ode_solve(const kiln_ode_problem *pb, double t0, const double *y0,
                   const double *theta, int64_t nts, const double *ts,
                   double *y_out, double *sens_out, char *errbuf,
                   size_t errbuf_size)
{
    int rc = check_problem(pb, t0, y0, theta, nts, ts, y_out, sens_out,
                           errbuf, errbuf_size);
    if (rc)
        return rc;
#ifdef KILN_HAVE_SUNDIALS
    if (nts == 0)
        return KILN_OK;
    return sundials_solve(pb, t0, y0, theta, nts, ts, y_out, sens_out,
                          errbuf, errbuf_size);
#else
    return fail(errbuf, errbuf_size, KILN_ERR_RUNTIME,
                "%s: kiln was built without SUNDIALS (install "
                "libsundials-dev and configure --with-sundials)",
                label_of(pb));
#endif
}

/* ---- the host's ODE kernels (the ops ode_rk45, ode_bdf) ---- */

typedef struct ode_state {
    kiln_function *rhs, *jac;   /* owned: the body and its Jacobian
                                   (NULL when rhs_jac is set) */
    kiln_function *rhs_jac;     /* owned or NULL: dy and jac, one call */
    kiln_ode_problem pb;        /* method, tolerances, label; n, p, ctx
                                   per call */
    char label[128];
    int sens_only;              /* one output: S */
} ode_state;

/* One call's evaluation context: the body functions run on the calling
 * thread (each keeps a context per thread, so calls on several threads
 * at once are fine). */
typedef struct ode_eval {
    const ode_state *st;
    int64_t n, p;
    kiln_err e;
    int failed;
} ode_eval;

/* Calls f at (t, y, theta) and copies its outputs: out0 (m0 doubles)
 * and, when out1 is not NULL, the second output (m1 doubles). */
static int ode_eval_fn(ode_eval *ev, kiln_function *f, double t,
                       const double *y, const double *theta, double *out0,
                       int64_t m0, double *out1, int64_t m1)
{
    static const double none = 0;
    kiln_tensor in[3] = {
        {.dtype = KILN_F64, .rank = 0, .data = &t},
        {.dtype = KILN_F64, .rank = 1, .shape = {ev->n},
         .data = (void *)(uintptr_t)y},
        {.dtype = KILN_F64, .rank = 1, .shape = {ev->p},
         .data = (void *)(uintptr_t)(ev->p ? theta : &none)}};
    kiln_tensor o[2];
    memset(o, 0, sizeof o);
    if (kiln_function_call(f, in, o, &ev->e)) {
        ev->failed = 1;
        return -1;
    }
    memcpy(out0, o[0].data, sizeof(double) * (size_t)m0);
    if (out1)
        memcpy(out1, o[1].data, sizeof(double) * (size_t)m1);
    return 0;
}

static int ode_rhs_cb(void *ctx, double t, const double *y,
                      const double *theta, double *out)
{
    ode_eval *ev = ctx;
    return ode_eval_fn(ev, ev->st->rhs, t, y, theta, out, ev->n, NULL, 0);
}

static int ode_jac_cb(void *ctx, double t, const double *y,
                      const double *theta, double *out)
{
    ode_eval *ev = ctx;
    return ode_eval_fn(ev, ev->st->jac, t, y, theta, out,
                       ev->n * (ev->n + ev->p), NULL, 0);
}

static int ode_rhs_jac_cb(void *ctx, double t, const double *y,
                          const double *theta, double *dy, double *jac)
{
    ode_eval *ev = ctx;
    return ode_eval_fn(ev, ev->st->rhs_jac, t, y, theta, dy, ev->n, jac,
                       ev->n * (ev->n + ev->p));
}

static int64_t view_numel(const kiln_view *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->rank; d++)
        n *= v->shape[d];
    return n;
}

/* Between a strided f64 view and contiguous memory (to_view: into v). */
static void view_copy(const kiln_view *v, double *buf, int to_view)
{
    int64_t n = view_numel(v), idx[KILN_MAX_RANK] = {0};
    double *base = v->data;
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < v->rank; d++)
            off += idx[d] * v->strides[d];
        if (to_view)
            base[off] = buf[k];
        else
            buf[k] = base[off];
        for (int d = v->rank - 1; d >= 0; d--) {
            if (++idx[d] < v->shape[d])
                break;
            idx[d] = 0;
        }
    }
}

static int ode_run(void *state, const kiln_call *call)
{
    const ode_state *st = state;
    if (call->n_inputs != 4 || call->n_outputs < 1 || call->n_outputs > 2)
        return fail(call->errbuf, call->errbuf_size, KILN_ERR_ARG,
                    "%s: %u inputs and %u outputs, expected 4 and 1 or 2",
                    st->label, call->n_inputs, call->n_outputs);
    const kiln_view *in = call->inputs, *out = call->outputs;
    ode_eval ev = {.st = st, .n = view_numel(&in[0]),
                   .p = view_numel(&in[3])};
    int64_t nts = view_numel(&in[2]);
    int64_t m = ev.n + ev.p;
    int sens = call->n_outputs == 2 || st->sens_only;
    size_t total = (size_t)(ev.n + 1 + nts + ev.p + nts * ev.n +
                            (sens ? nts * ev.n * m : 0));
    double *buf = malloc(sizeof(double) * (total ? total : 1));
    if (!buf)
        return fail(call->errbuf, call->errbuf_size, KILN_ERR_NOMEM,
                    "%s: out of memory", st->label);
    double *y0 = buf, *t0 = y0 + ev.n, *ts = t0 + 1, *th = ts + nts;
    double *Y = th + ev.p, *S = sens ? Y + nts * ev.n : NULL;
    view_copy(&in[0], y0, 0);
    view_copy(&in[1], t0, 0);
    view_copy(&in[2], ts, 0);
    view_copy(&in[3], th, 0);
    kiln_ode_problem pb = st->pb;
    pb.n = ev.n;
    pb.p = ev.p;
    pb.ctx = &ev;
    int rc = kiln_ode_solve(&pb, *t0, y0, th, nts, ts, Y, S, call->errbuf,
                            call->errbuf_size);
    /* a solver's failure or a non-finite value rejects the point, as
     * Stan's ODE functions throw a domain error that rejects the draw:
     * KILN_ERR_CHECK (a model's log density then rejects it) */
    if (rc == KILN_ERR_RUNTIME && kiln_ode_available() && !ev.failed)
        rc = KILN_ERR_CHECK;
    if (rc && ev.failed) {
        /* the body's own error says more than the solver's flag */
        fail(call->errbuf, call->errbuf_size, rc,
             "%s: the right-hand side failed: %s", st->label,
             ev.e.message);
    } else if (!rc && st->sens_only) {
        view_copy(&out[0], S, 1);
    } else if (!rc) {
        view_copy(&out[0], Y, 1);
        if (sens)
            view_copy(&out[1], S, 1);
    }
    free(buf);
    return rc;
}

int kiln_ode_callable(kiln_function *rhs, kiln_function *jac,
                      kiln_function *rhs_jac, int method,
                      double rtol, double atol, int64_t max_num_steps,
                      const char *label, int sens_only, kiln_callable **out)
{
    ode_state *st = calloc(1, sizeof *st);
    kiln_callable *c = calloc(1, sizeof *c);
    if (!st || !c) {
        free(st);
        free(c);
        return KILN_ERR_NOMEM;
    }
    st->rhs = rhs;
    st->jac = jac;
    st->rhs_jac = rhs_jac;
    st->sens_only = sens_only;
    snprintf(st->label, sizeof st->label, "%s",
             label ? label : method == KILN_ODE_BDF ? "ode_bdf" : "ode_rk45");
    st->pb = (kiln_ode_problem){
        .struct_size = sizeof st->pb, .method = (uint32_t)method,
        .rtol = rtol, .atol = atol, .max_num_steps = max_num_steps,
        .label = st->label, .rhs = ode_rhs_cb,
        .jac = jac ? ode_jac_cb : NULL,
        .rhs_jac = rhs_jac ? ode_rhs_jac_cb : NULL};
    c->struct_size = sizeof *c;
    c->fn = ode_run;
    c->state = st;
    *out = c;
    return 0;
}

static int ode_host_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    (void)err;
    return k && k->kind == KILN_KERNEL_ODE;
}

static void ode_host_callable_free(kiln_callable *c)
{
    if (!c)
        return;
    ode_state *st = c->state;
    if (st) {
        kiln_function_free(st->rhs);
        kiln_function_free(st->jac);
        kiln_function_free(st->rhs_jac);
    }
    free(st);
    free(c);
}

static void ode_host_error_free(kiln_plugin_error *e)
{
    (void)e;
}

const kiln_backend kiln_ode_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "host_ode",
    .version = "1",
    .build_id = "host-ode-1",
    .flags = KILN_BACKEND_THREAD_SAFE,
    .supports = ode_host_supports,
    .callable_free = ode_host_callable_free,
    .error_free = ode_host_error_free,
};
