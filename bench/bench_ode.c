/*
 * bench_ode.c — time per ODE solve (make bench-ode; docs/backends.md
 * "ODE solvers"): posteriordb's Lotka-Volterra (N 2, P 4, 20 output
 * times, its data's initial state and a posterior-like theta), with and
 * without forward sensitivities, rk45 at Stan's lotka_volterra.stan
 * tolerances (rtol 1e-5, atol 1e-3) and bdf at Stan's defaults (1e-10),
 * right-hand side (a) in C, (b) a kiln body compiled on each backend
 * (the host's ODE callable) with its Jacobian graph called separately,
 * (c) "fused f+J": the body with the graph of f and J in one function
 * (kiln_ir_ode_rhs_jacobian; what the op runs since issue 28b: one call
 * per RK45 stage of the sensitivity system instead of two).  Median of
 * repeats.
 */
#define _POSIX_C_SOURCE 200809L

#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include "bench_common.h"
#include "ir.h"
#include "ode.h"
#include "../tests/ode_lv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double y0v[2] = {30.0, 4.0}, t0v = 0, tsv[20];
static double thv[4] = {0.55, 0.028, 0.80, 0.024};
static double Y[40], S[240];

static double median_us(int (*one)(void *), void *arg, int reps)
{
    double t[15];
    for (int r = 0; r < 15; r++) {
        double a = bench_now();
        for (int i = 0; i < reps; i++)
            if (one(arg))
                return -1;
        t[r] = (bench_now() - a) / reps * 1e6;
    }
    qsort(t, 15, sizeof *t, bench_cmp_double);
    return t[7];
}

typedef struct cjob {
    kiln_ode_problem pb;
    int sens;
} cjob;

static int one_c(void *arg)
{
    cjob *j = arg;
    char e[256];
    return kiln_ode_solve(&j->pb, 0, y0v, thv, 20, tsv, Y,
                          j->sens ? S : NULL, e, sizeof e);
}

static kiln_view view(double *d, int rank, int64_t a, int64_t b, int64_t c)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = d;
    v.rank = rank;
    v.dtype = KILN_F64;
    int64_t sh[3] = {a, b, c}, s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        v.shape[i] = sh[i];
        v.strides[i] = s;
        s *= sh[i];
    }
    return v;
}

typedef struct kjob {
    kiln_callable *c;
    int sens;
} kjob;

static int one_k(void *arg)
{
    kjob *j = arg;
    kiln_view in[4] = {view(y0v, 1, 2, 0, 0), view(&t0v, 0, 0, 0, 0),
                       view(tsv, 1, 20, 0, 0), view(thv, 1, 4, 0, 0)};
    kiln_view out[2] = {view(Y, 2, 20, 2, 0), view(S, 3, 20, 2, 6)};
    char e[256];
    kiln_call call = {sizeof call, 4, (uint32_t)(j->sens ? 2 : 1), in, out,
                      NULL, e, sizeof e, NULL, 0};
    return j->c->fn(j->c->state, &call);
}

static kiln_function *compile_on(kiln_graph *g, const char *bk)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = bk;
    o.quiet = 1;
    o.jobs = 1;
    kiln_err e;
    return kiln_compile(g, &o, &e);
}

int main(void)
{
    if (!kiln_ode_available()) {
        printf("kiln was built without SUNDIALS: nothing to time\n");
        return 0;
    }
    for (int i = 0; i < 20; i++)
        tsv[i] = i + 1;
    struct { const char *name; int method; double rtol, atol; } M[2] = {
        {"ode_rk45", KILN_ODE_RK45, 1e-5, 1e-3},
        {"ode_bdf", KILN_ODE_BDF, 1e-10, 1e-10}};
    kiln_err err;
    kiln_graph *body = kiln_parse_string(LV_BODY, "lv.kg", NULL, &err);
    kiln_graph *jg = body ? kiln_ir_ode_jacobian(body, &err) : NULL;
    kiln_graph *rjg = jg ? kiln_ir_ode_rhs_jacobian(body, &err) : NULL;
    if (!rjg) {
        fprintf(stderr, "bench_ode: %s\n", err.message);
        return 1;
    }
    const char *bks[3] = {"interp", "tcc", "llvm"};
    printf("Lotka-Volterra, 20 output times: microseconds per solve "
           "(median of 15)\n");
    printf("%-9s %-16s %10s %10s\n", "method", "rhs", "states", "+sens");
    for (int m = 0; m < 2; m++) {
        cjob cj = {{.struct_size = sizeof cj.pb, .method = (uint32_t)M[m].method,
                    .n = 2, .p = 4, .rtol = M[m].rtol, .atol = M[m].atol,
                    .max_num_steps = 100000000, .rhs = lv_f, .jac = lv_j},
                   0};
        double a = median_us(one_c, &cj, 20);
        cj.sens = 1;
        double b = median_us(one_c, &cj, 20);
        printf("%-9s %-16s %10.1f %10.1f\n", M[m].name, "C", a, b);
        for (int k = 0; k < 6; k++) {
            int fused = k % 2;
            char rn[32];
            snprintf(rn, sizeof rn, "%s%s", bks[k / 2],
                     fused ? " fused f+J" : "");
            kiln_function *r = compile_on(body, bks[k / 2]);
            kiln_function *j = r ? compile_on(fused ? rjg : jg, bks[k / 2])
                                 : NULL;
            kiln_callable *c = NULL;
            if (!j || kiln_ode_callable(r, fused ? NULL : j,
                                        fused ? j : NULL, M[m].method,
                                        M[m].rtol, M[m].atol, 100000000,
                                        M[m].name, 0, &c)) {
                kiln_function_free(r);
                kiln_function_free(j);
                printf("%-9s %-16s %10s\n", M[m].name, rn, "n/a");
                continue;
            }
            kjob kj = {c, 0};
            a = median_us(one_k, &kj, 5);
            kj.sens = 1;
            b = median_us(one_k, &kj, 5);
            printf("%-9s %-16s %10.1f %10.1f\n", M[m].name, rn, a, b);
            kiln_ode_backend.callable_free(c);
        }
    }
    kiln_graph_free(rjg);
    kiln_graph_free(jg);
    kiln_graph_free(body);
    return 0;
}
