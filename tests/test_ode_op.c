/*
 * test_ode_op.c — ODE kernels whose right-hand side is a kiln graph (a
 * node's body): the body and its Jacobian (kiln_ir_ode_jacobian, kiln's
 * own reverse mode) compiled on every backend found, run by the host's
 * ODE callable (core/runtime/ode.c), against the same system written in
 * C and solved by kiln_ode_solve (which tests/test_ode.c checks against
 * SciPy), and the Jacobian graph against the C Jacobian.  The callable
 * runs with the Jacobian alone and with the fused graph of f and J
 * (kiln_ir_ode_rhs_jacobian, what the op uses); the op's gradients are
 * checked against central differences on every backend.
 */
#define _POSIX_C_SOURCE 200809L

#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include "ir.h"
#include "ode.h"
#include "tap.h"
#include "found_backends.h"
#include "gradcheck.h"
#include "ode_lv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kiln_function *compile_on(kiln_graph *g, const char *backend,
                                 kiln_err *err)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.quiet = 1;
    o.jobs = 1;
    return kiln_compile(g, &o, err);
}

static kiln_view vec(double *d, int rank, int64_t n0, int64_t n1,
                     int64_t n2)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = d;
    v.rank = rank;
    v.dtype = KILN_F64;
    int64_t sh[3] = {n0, n1, n2};
    for (int i = 0; i < rank; i++)
        v.shape[i] = sh[i];
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        v.strides[i] = s;
        s *= v.shape[i];
    }
    return v;
}

/* A host callable for the body: with the Jacobian graph jg (fused 0) or
 * with the graph of f and J rjg (fused 1). */
static int callable_on(const char *bk, kiln_graph *body, kiln_graph *jg,
                       kiln_graph *rjg, int fused, int method, double rtol,
                       int64_t steps, const char *label, kiln_callable **c)
{
    kiln_err err = {0, ""};
    kiln_function *r = compile_on(body, bk, &err);
    kiln_function *j = compile_on(fused ? rjg : jg, bk, &err);
    if (!r || !j || kiln_ode_callable(r, fused ? NULL : j, fused ? j : NULL,
                                      method, rtol, rtol, steps, label, 0,
                                      c)) {
        kiln_function_free(r);
        kiln_function_free(j);
        return -1;
    }
    return 0;
}

static void kernel_tests(const char *bk, kiln_graph *body, kiln_graph *jg,
                         kiln_graph *rjg)
{
    kiln_err err = {0, ""};
    kiln_function *rhs = compile_on(body, bk, &err);
    kiln_function *jac = rhs ? compile_on(jg, bk, &err) : NULL;
    kiln_function *rj = jac ? compile_on(rjg, bk, &err) : NULL;
    if (!ok(rhs && jac && rj, "%s: the body, its Jacobian and both fused "
            "compile (%s)", bk, err.message)) {
        kiln_function_free(rhs);
        kiln_function_free(jac);
        kiln_function_free(rj);
        return;
    }
    /* the Jacobian graphs against the C one at a few points */
    double worst = 0, worst_fj = 0;
    for (int k = 0; k < 3; k++) {
        double t = k, y[2] = {30 + 7 * k, 5 + 3 * k};
        double th[4] = {0.55, 0.028 + 0.01 * k, 0.8, 0.024};
        kiln_tensor in[3] = {
            {.dtype = KILN_F64, .rank = 0, .data = &t},
            {.dtype = KILN_F64, .rank = 1, .shape = {2}, .data = y},
            {.dtype = KILN_F64, .rank = 1, .shape = {4}, .data = th}};
        kiln_tensor out[1];
        double want[12];
        lv_j(NULL, t, y, th, want);
        if (kiln_function_call(jac, in, out, &err) || out[0].rank != 2 ||
            out[0].shape[0] != 2 || out[0].shape[1] != 6) {
            worst = INFINITY;
            break;
        }
        for (int i = 0; i < 12; i++)
            worst = fmax(worst, fabs(((double *)out[0].data)[i] - want[i]) /
                                    fmax(1, fabs(want[i])));
        /* the fused graph: dy then jac */
        double wdy[2];
        lv_f(NULL, t, y, th, wdy);
        kiln_tensor o2[2];
        if (kiln_function_call(rj, in, o2, &err) || o2[0].rank != 1 ||
            o2[0].shape[0] != 2 || o2[1].rank != 2 ||
            o2[1].shape[0] != 2 || o2[1].shape[1] != 6) {
            worst_fj = INFINITY;
            break;
        }
        for (int i = 0; i < 12; i++)
            worst_fj = fmax(worst_fj,
                            fabs(((double *)o2[1].data)[i] - want[i]) /
                                fmax(1, fabs(want[i])));
        for (int i = 0; i < 2; i++)
            worst_fj = fmax(worst_fj,
                            fabs(((double *)o2[0].data)[i] - wdy[i]) /
                                fmax(1, fabs(wdy[i])));
    }
    ok(worst <= 1e-14, "%s: the Jacobian graph equals the hand-written one "
       "(worst %.3g)", bk, worst);
    ok(worst_fj <= 1e-14, "%s: the fused graph's dy and jac equal the "
       "hand-written ones (worst %.3g)", bk, worst_fj);

    for (int mf = 0; mf < 4; mf++) {
        const int method = mf / 2, fused = mf % 2;
        char mn[32];
        snprintf(mn, sizeof mn, "%s%s",
                 method == KILN_ODE_BDF ? "ode_bdf" : "ode_rk45",
                 fused ? " fused f+J" : "");
        kiln_callable *c = NULL;
        double rtol = 1e-8;
        if (!ok(!callable_on(bk, body, jg, rjg, fused, method, rtol,
                             1000000, mn, &c),
                "%s %s: a host callable", bk, mn))
            continue;
        double y0[2] = {33.956, 5.933}, t0 = 0, ts[20];
        double th[4] = {0.55, 0.028, 0.8, 0.024};
        for (int i = 0; i < 20; i++)
            ts[i] = i + 1;
        double Y[40], S[240], Yc[40], Sc[240];
        kiln_view vin[4] = {vec(y0, 1, 2, 0, 0), vec(&t0, 0, 0, 0, 0),
                            vec(ts, 1, 20, 0, 0), vec(th, 1, 4, 0, 0)};
        kiln_view vout[2] = {vec(Y, 2, 20, 2, 0), vec(S, 3, 20, 2, 6)};
        char eb[256] = "";
        kiln_call call = {sizeof call, 4, 2, vin, vout, NULL, eb,
                          sizeof eb, NULL, 0};
        int rc = c->fn(c->state, &call);
        kiln_ode_problem pb = {
            .struct_size = sizeof pb, .method = (uint32_t)method, .n = 2,
            .p = 4, .rtol = rtol, .atol = rtol, .max_num_steps = 1000000,
            .rhs = lv_f, .jac = lv_j};
        char e2[256] = "";
        int rc2 = kiln_ode_solve(&pb, 0, y0, th, 20, ts, Yc, Sc, e2,
                                 sizeof e2);
        ok(rc == 0 && rc2 == 0, "%s %s: solves (%s%s)", bk, mn, eb, e2);
        /* the same steps on the same function values: equal up to the
         * rounding of the body's code (fused multiply-adds, order) */
        double wy = 0, ws = 0;
        for (int i = 0; i < 40; i++)
            wy = fmax(wy, fabs(Y[i] - Yc[i]) / fmax(1, fabs(Yc[i])));
        for (int i = 0; i < 240; i++)
            ws = fmax(ws, fabs(S[i] - Sc[i]) / fmax(1, fabs(Sc[i])));
        ok(wy <= 1e-9 && ws <= 1e-7, "%s %s: states and sensitivities "
           "equal the C right-hand side's (worst %.3g, %.3g)", bk, mn, wy,
           ws);
        /* one output: no sensitivities */
        call.n_outputs = 1;
        double Y1[40];
        vout[0].data = Y1;
        rc = c->fn(c->state, &call);
        ok(rc == 0, "%s %s: without sensitivities (%s)", bk, mn, eb);
        /* too many steps: the solver's message with the label */
        kiln_ode_backend.callable_free(c);
        c = NULL;
        if (!callable_on(bk, body, jg, rjg, fused, method, rtol, 3,
                         method ? "ode_bdf 'z'" : "ode_rk45 'z'", &c)) {
            rc = c->fn(c->state, &call);
            /* KILN_ERR_CHECK: the point is rejected (Stan: the draw) */
            ok(rc == KILN_ERR_CHECK &&
                   strstr(eb, method ? "ode_bdf 'z': CVODE failed at t="
                                     : "ode_rk45 'z': ARKODE failed at t=")
                   && strstr(eb, "_TOO_MUCH_WORK)"),
               "%s %s: max_num_steps 3: %s", bk, mn, eb);
            kiln_ode_backend.callable_free(c);
        } else {
            ok(0, "%s %s: a second callable", bk, mn);
        }
    }
    kiln_function_free(rhs);
    kiln_function_free(jac);
    kiln_function_free(rj);
}

/* The op in .kg: the body block, then the graph using it. */
#define LV_OP_BODY                                                       \
    "kiln 1\ngraph lv\n  input t: f64\n  input y: f64[2]\n"             \
    "  input theta: f64[4]\n  u = y[0]\n  v = y[1]\n"                    \
    "  du = mul(sub(theta[0], mul(theta[1], v)), u)\n"                   \
    "  dv = mul(add(neg(theta[2]), mul(theta[3], u)), v)\n"              \
    "  output dy = stack(du, dv, axis=0)\nend\n"

static char *op_text(const char *op, const char *attrs, const char *tail)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             LV_OP_BODY
             "graph g\n"
             "  # range y0 20 40\n"
             "  # range theta 0.01 0.6\n"
             "  input y0: f64[2]\n"
             "  input theta: f64[4]\n"
             "  const t0: f64 = 0.0\n"
             "  const ts: f64[4] = [1.0, 2.0, 2.0, 5.0]\n"
             "  z = %s(y0, t0, ts, theta, body=lv, rtol=1e-10, atol=1e-10%s)\n"
             "%s"
             "end\n", op, attrs, tail);
    return buf;
}

/* The gradient solves once (issue 28): kiln_graph_grad makes the ODE node
 * itself sens=2 (Y as output 0, S as result(z, index=1)) instead of
 * adding a second node, so the cost + gradient program has one ODE step;
 * its cost is the state-only solve's within the tolerances (an RK45 Y
 * comes from the coupled system: not bitwise); gradients by central
 * differences on every backend; the graph prints with sens=2 and parses
 * back; a second derivative through S and result(index=1) of a node
 * without sensitivities are refused with clear errors. */
static int n_ode_steps(kiln_function *f)
{
    return count_kernels_of_kind(f, KILN_KERNEL_ODE);
}

/* Two solves of one problem at different tolerances (or step caps) are
 * two nodes: CSE compares rtol, atol, max_num_steps and sens, not only
 * the inputs and the body (a bug found in issue 28's second half). */
static void cse_tests(const char *op)
{
    char tail[512];
    snprintf(tail, sizeof tail,
             "  z2 = %s(y0, t0, ts, theta, body=lv, rtol=1e-3, atol=1e-3)\n"
             "  z3 = %s(y0, t0, ts, theta, body=lv, rtol=1e-10, atol=1e-10, "
             "max_num_steps=7)\n"
             "  output a = z\n  output b = z2\n  output c = z3\n",
             op, op);
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(op_text(op, "", tail), "ode.kg", NULL,
                                      &err);
    kiln_function *f = g ? compile_on(g, NULL, &err) : NULL;
    ok(f && count_kernels_of_kind(f, KILN_KERNEL_ODE) == 3,
       "%s: three solves differing only in rtol/atol or max_num_steps stay "
       "three ODE steps after CSE (got %d) %s", op,
       f ? count_kernels_of_kind(f, KILN_KERNEL_ODE) : -1,
       f ? "" : err.message);
    kiln_function_free(f);
    kiln_graph_free(g);
}

static void once_tests(const char *op, const char **bk, int nbk)
{
    const char *txt = op_text(op, "", "  w = sum(mul(z, z))\n"
                                      "  output cost = mul(1e-3, w)\n");
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(txt, "ode.kg", NULL, &err);
    kiln_value z = g ? kiln_graph_lookup(g, "z") : -1;
    kiln_err e2 = {0, ""};
    ok(g && kiln_graph_result(g, z, 1, &e2) < 0 &&
           strstr(e2.message, "has one output (two with sens=2"),
       "%s: result(z, index=1) before the gradient: %s", op, e2.message);
    kiln_value wrt[2] = {g ? kiln_graph_lookup(g, "y0") : -1,
                         g ? kiln_graph_lookup(g, "theta") : -1}, d[2];
    kiln_value cost = g ? kiln_graph_lookup(g, "cost") : -1;
    int rc = g ? kiln_graph_grad(g, cost, 2, wrt, 0, d, &err) : -1;
    if (!rc)
        rc = kiln_graph_output(g, "d_y0", d[0], &err) ||
             kiln_graph_output(g, "d_theta", d[1], &err);
    if (!ok(!rc, "%s: gradient builds (%s)", op, err.message)) {
        kiln_graph_free(g);
        return;
    }
    char *t = kiln_graph_print(g, &err);
    kiln_graph *g2 = t ? kiln_parse_string(t, "p.kg", NULL, &err) : NULL;
    char *t3 = g2 ? kiln_graph_print(g2, &err) : NULL;
    ok(t && t3 && !strcmp(t, t3) && strstr(t, "sens=2") &&
           strstr(t, "result(z, index=1)") && !strstr(t, "sens=1"),
       "%s: the gradient graph holds one solve with sens=2 and its "
       "result(index=1); print -> parse -> print is stable", op);
    free(t);
    free(t3);
    kiln_graph_free(g2);
    double y0[2] = {33.956, 5.933}, th[4] = {0.55, 0.028, 0.8, 0.024};
    kiln_tensor in[2] = {
        {.dtype = KILN_F64, .rank = 1, .shape = {2}, .data = y0},
        {.dtype = KILN_F64, .rank = 1, .shape = {4}, .data = th}};
    kiln_graph *plain = kiln_parse_string(txt, "ode.kg", NULL, &err);
    /* every backend's central differences at the same points (BDF's at
     * other random points have errors near 1e-4 whichever Jacobian path
     * runs) */
    uint64_t rng = gc_rng;
    for (int b = 0; b < nbk; b++) {
        gc_rng = rng;
        kiln_function *f = compile_on(g, bk[b], &err);
        kiln_function *fp = plain ? compile_on(plain, bk[b], &err) : NULL;
        kiln_tensor out[3], op1[1];
        int r1 = f ? kiln_function_call(f, in, out, &err) : -1;
        double c1 = r1 ? NAN : *(double *)out[0].data;
        int r2 = fp ? kiln_function_call(fp, in, op1, &err) : -1;
        double c0 = r2 ? NAN : *(double *)op1[0].data;
        ok(f && n_ode_steps(f) == 1 && n_ode_steps(fp) == 1,
           "%s on %s: the cost + gradient program has one ODE step (got "
           "%d) %s", op, bk[b], n_ode_steps(f), f ? "" : err.message);
        ok(!r1 && !r2 && fabs(c1 - c0) <= 1e-8 * fabs(c0),
           "%s on %s: its cost %.17g is the state-only solve's %.17g "
           "within the tolerances %s", op, bk[b], c1, c0,
           r1 || r2 ? err.message : "");
        kiln_function_free(f);
        kiln_function_free(fp);
        char label[64];
        snprintf(label, sizeof label, "%s gradient on %s", op, bk[b]);
        gc_check_with(label, txt, 1e-5, bk[b], NULL);
    }
    kiln_graph_free(plain);
    /* second derivatives through S */
    kiln_value h[1];
    kiln_value dt = kiln_graph_lookup(g, "d_theta");
    kiln_value sdt = kiln_graph_op(g, "sum", 1, &dt, NULL, 0, &err);
    rc = sdt >= 0 ? kiln_graph_grad(g, sdt, 1, wrt + 1, 0, h, &err) : -1;
    ok(rc == KILN_ERR_TYPE &&
           strstr(err.message, "no second derivatives (through the "
                               "sensitivities)"),
       "%s: a second derivative through S is refused: %s", op,
       err.message);
    kiln_graph_free(g);
}

static void op_tests(const char **bk, int nbk)
{
    for (int m = 0; m < 2; m++) {
        const char *op = m ? "ode_bdf" : "ode_rk45";
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_parse_string(op_text(op, "", "  output z2 = z\n"),
                                          "ode.kg", NULL, &err);
        if (!ok(g != NULL, "%s: parses (%s)", op, err.message))
            continue;
        double y0[2] = {33.956, 5.933}, th[4] = {0.55, 0.028, 0.8, 0.024};
        double ts[4] = {1, 2, 2, 5}, want[8];
        kiln_ode_problem pb = {
            .struct_size = sizeof pb, .method = (uint32_t)m, .n = 2, .p = 4,
            .rtol = 1e-10, .atol = 1e-10, .max_num_steps = 100000000,
            .rhs = lv_f, .jac = lv_j};
        char e2[256];
        kiln_ode_solve(&pb, 0, y0, th, 4, ts, want, NULL, e2, sizeof e2);
        for (int b = 0; b < nbk; b++) {
            kiln_function *f = compile_on(g, bk[b], &err);
            kiln_tensor in[2] = {
                {.dtype = KILN_F64, .rank = 1, .shape = {2}, .data = y0},
                {.dtype = KILN_F64, .rank = 1, .shape = {4}, .data = th}};
            kiln_tensor out[1];
            int rc = f ? kiln_function_call(f, in, out, &err) : -1;
            double w = rc ? INFINITY : 0;
            for (int i = 0; !rc && i < 8; i++)
                w = fmax(w, fabs(((double *)out[0].data)[i] - want[i]) /
                                fmax(1, fabs(want[i])));
            ok(!rc && out[0].rank == 2 && out[0].shape[0] == 4 &&
                   out[0].shape[1] == 2 && w <= 1e-9,
               "%s on %s: [4, 2] equal to the C right-hand side's solve "
               "(worst %.3g) %s", op, bk[b], w, rc ? err.message : "");
            kiln_function_free(f);
        }
        /* print -> parse keeps the op, body and attributes */
        char *t = kiln_graph_print(g, &err);
        kiln_graph *g2 = t ? kiln_parse_string(t, "p.kg", NULL, &err) : NULL;
        char *t2 = g2 ? kiln_graph_print(g2, &err) : NULL;
        ok(t && t2 && !strcmp(t, t2) && strstr(t, "rtol=1e-10"),
           "%s: print -> parse -> print is stable", op);
        free(t);
        free(t2);
        kiln_graph_free(g2);
        kiln_graph_free(g);
        /* gradients by forward sensitivities from the one solve */
        once_tests(op, bk, nbk);
        cse_tests(op);
        /* too many steps: the point is rejected (KILN_ERR_CHECK) */
        const char *txt = op_text(op, ", max_num_steps=2",
                                  "  output z2 = z\n");
        g = kiln_parse_string(txt, "ode.kg", NULL, &err);
        kiln_function *f = g ? compile_on(g, "interp", &err) : NULL;
        kiln_tensor in[2] = {
            {.dtype = KILN_F64, .rank = 1, .shape = {2}, .data = y0},
            {.dtype = KILN_F64, .rank = 1, .shape = {4}, .data = th}};
        kiln_tensor out[1];
        int rc = f ? kiln_function_call(f, in, out, &err) : -1;
        ok(rc == KILN_ERR_CHECK && strstr(err.message, "_TOO_MUCH_WORK)") &&
               strstr(err.message, m ? "ode_bdf 'z': CVODE failed at t="
                                     : "ode_rk45 'z': ARKODE failed at t="),
           "%s: max_num_steps 2 rejects: %s", op, err.message);
        kiln_function_free(f);
        kiln_graph_free(g);
    }
    /* a body returning the wrong size */
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(
        "kiln 1\ngraph f\n  input t: f64\n  input y: f64[2]\n"
        "  input theta: f64[1]\n  output dy = y[0:1]\nend\n"
        "graph g\n  input y0: f64[2]\n  input theta: f64[1]\n"
        "  const ts: f64[1] = [1.0]\n"
        "  output z = ode_rk45(y0, 0.0, ts, theta, body=f)\nend\n",
        "bad.kg", NULL, &err);
    ok(!g && err.code == KILN_ERR_SHAPE &&
           strstr(err.message, "ode_rk45: body 'f' returns f64[1], but its "
                               "state y is f64[2]"),
       "a body of the wrong output size: %s", err.message);
    kiln_graph_free(g);
}

int main(void)
{
    if (!kiln_ode_available()) {
        ok(1, "ODE kernels # SKIP kiln was built without SUNDIALS");
        return done_testing();
    }
    kiln_err err = {0, ""};
    kiln_graph *body = kiln_parse_string(LV_BODY, "lv.kg", NULL, &err);
    kiln_graph *jg = body ? kiln_ir_ode_jacobian(body, &err) : NULL;
    kiln_graph *rjg = jg ? kiln_ir_ode_rhs_jacobian(body, &err) : NULL;
    if (!ok(body && jg && rjg, "the Lotka-Volterra body, its Jacobian graph "
            "and the fused one (%s)", err.message)) {
        kiln_graph_free(jg);
        kiln_graph_free(body);
        return done_testing();
    }
    const char *bk[8];
    int nbk = found_backends(bk);
    for (int i = 0; i < nbk; i++)
        kernel_tests(bk[i], body, jg, rjg);
    op_tests(bk, nbk);
    /* a body that is not (t, y, theta) -> dy */
    static const char BAD[] = "kiln 1\ngraph b\n  input y: f64[2]\n"
                              "  output dy = neg(y)\nend\n";
    kiln_graph *bad = kiln_parse_string(BAD, "b.kg", NULL, &err);
    kiln_graph *bj = bad ? kiln_ir_ode_jacobian(bad, &err) : NULL;
    ok(bad && !bj && err.code == KILN_ERR_TYPE &&
           strstr(err.message, "(t, y, theta)"),
       "a body with the wrong inputs: %s", err.message);
    kiln_graph_free(bad);
    /* LV reads y and theta element by element and stacks scalars into dy:
     * its Jacobian is taken of each scalar with respect to the reads, so
     * nothing is scattered into a vector (no inc_subtensor, not even a
     * seed) */
    char *txt = kiln_graph_print(rjg, &err);
    int nscat = 0;
    for (const char *q = txt; q && (q = strstr(q, "inc_subtensor(")); q++)
        nscat++;
    ok(txt && nscat == 0, "the fused LV graph scatters nothing (%d "
       "inc_subtensor)", nscat);
    free(txt);
    /* the same system written two more ways: y used as a whole vector
     * (the general path), and scalar reads with dy not a stack of scalars
     * (the reads path with a seed per row) */
    static const char *const MIX[2] = {
        "kiln 1\ngraph m\n  input t: f64\n  input y: f64[2]\n"
        "  input theta: f64[1]\n  output dy = mul(neg(theta[0]), y)\nend\n",
        "kiln 1\ngraph m\n  input t: f64\n  input y: f64[2]\n"
        "  input theta: f64[1]\n"
        "  output dy = mul(neg(theta[0]), stack(y[0], y[1], axis=0))\n"
        "end\n"};
    for (int k = 0; k < 2; k++) {
        kiln_graph *mb = kiln_parse_string(MIX[k], "m.kg", NULL, &err);
        kiln_graph *mj = mb ? kiln_ir_ode_rhs_jacobian(mb, &err) : NULL;
        kiln_function *mf = mj ? compile_on(mj, "interp", &err) : NULL;
        double mt = 0, my[2] = {2, 3}, mth = 0.7, wmix = INFINITY;
        kiln_tensor min[3] = {
            {.dtype = KILN_F64, .rank = 0, .data = &mt},
            {.dtype = KILN_F64, .rank = 1, .shape = {2}, .data = my},
            {.dtype = KILN_F64, .rank = 1, .shape = {1}, .data = &mth}};
        kiln_tensor mo[2];
        if (mf && !kiln_function_call(mf, min, mo, &err)) {
            const double wdy[2] = {-1.4, -2.1};
            const double wj[6] = {-0.7, 0, -2, 0, -0.7, -3};
            wmix = 0;
            for (int i = 0; i < 2; i++)
                wmix = fmax(wmix, fabs(((double *)mo[0].data)[i] - wdy[i]));
            for (int i = 0; i < 6; i++)
                wmix = fmax(wmix, fabs(((double *)mo[1].data)[i] - wj[i]));
        }
        ok(wmix <= 1e-15, "%s: dy and jac (worst %.3g) %s",
           k ? "reads, dy not a stack" : "a body using y whole", wmix,
           mf ? "" : err.message);
        kiln_function_free(mf);
        kiln_graph_free(mj);
        kiln_graph_free(mb);
    }
    /* a body whose output is named jac: the Jacobian output gets another
     * name */
    static const char JAC[] = "kiln 1\ngraph b\n  input t: f64\n"
                              "  input y: f64[1]\n  input theta: f64[1]\n"
                              "  output jac = mul(theta, y)\nend\n";
    kiln_graph *jb = kiln_parse_string(JAC, "j.kg", NULL, &err);
    kiln_graph *jj = jb ? kiln_ir_ode_rhs_jacobian(jb, &err) : NULL;
    ok(jj && jj->n_outputs == 2 && !strcmp(jj->outputs[0].name, "jac") &&
           !strcmp(jj->outputs[1].name, "jac_"),
       "a body's output named jac: the fused graph's outputs jac, jac_ %s",
       jj ? "" : err.message);
    kiln_graph_free(jj);
    kiln_graph_free(jb);
    kiln_graph_free(rjg);
    kiln_graph_free(jg);
    kiln_graph_free(body);
    return done_testing();
}
