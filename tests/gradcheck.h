/*
 * gradcheck.h — a reusable finite-difference check for kiln gradients,
 * for tests (header-only; include after tap.h).
 *
 *   gc_check(label, kg_text, tol)
 *
 * kg_text is a .kg graph with float inputs and one output named `cost`
 * (a scalar).  The check differentiates `cost` with respect to every f64
 * input through kiln_graph_grad, compiles, evaluates at seeded random
 * points (each input's values in [lo, hi] from a "# range NAME LO HI"
 * comment line, default [-2, 2]), and compares every gradient element
 * with a central difference, h = 1e-6 * max(1, |x|):
 *
 *   |analytic - numeric| <= tol * max(1, |numeric|)
 *
 * One TAP point per input; on failure the worst element is printed.
 */
#ifndef KILN_TESTS_GRADCHECK_H
#define KILN_TESTS_GRADCHECK_H

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_text.h"

#define GC_MAX_IN 8

static uint64_t gc_rng = 0x243f6a8885a308d3ull;

static double gc_uniform(double lo, double hi)
{
    uint64_t z = (gc_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * ((double)(z >> 11) / 9007199254740992.0);
}

/* The range of input `name` from a "# range NAME LO HI" line. */
static void gc_range(const char *text, const char *name, double *lo,
                     double *hi)
{
    *lo = -2;
    *hi = 2;
    const char *p = text;
    while ((p = strstr(p, "# range ")) != NULL) {
        char nm[64];
        double a, b;
        if (sscanf(p, "# range %63s %lf %lf", nm, &a, &b) == 3 &&
            strcmp(nm, name) == 0) {
            *lo = a;
            *hi = b;
        }
        p += 8;
    }
}

static double gc_cost(kiln_function *f, const kiln_tensor *in, int *bad)
{
    kiln_tensor out[GC_MAX_IN + 1];
    kiln_err err = {0, ""};
    if (kiln_function_call(f, in, out, &err)) {
        printf("# call failed: %s\n", err.message);
        *bad = 1;
        return NAN;
    }
    return *(double *)out[0].data;
}

/* gc_check with both programs (the cost alone, and with its gradients)
 * compiled with backend and passes (NULL: the defaults), quiet, one
 * job. */
__attribute__((unused))
static int gc_check_with(const char *label, const char *text, double tol,
                         const char *backend, const char *passes)
{
    kiln_err err = {0, ""};
    kiln_options opt, *o = NULL;
    if (backend || passes) {
        kg_test_options(&opt, backend, passes);
        o = &opt;
    }
    kiln_graph *g = kiln_parse_string(text, label, NULL, &err);
    if (!g)
        return ok(0, "%s: parse: %s", label, err.message);
    kiln_value cost = kiln_graph_lookup(g, "cost");
    kiln_function *probe = kiln_compile(g, o, &err);
    if (!probe) {
        kiln_graph_free(g);
        return ok(0, "%s: compile: %s", label, err.message);
    }
    int n_in = kiln_function_n_inputs(probe);
    kiln_value wrt[GC_MAX_IN], d[GC_MAX_IN];
    const char *names[GC_MAX_IN];
    for (int i = 0; i < n_in && i < GC_MAX_IN; i++) {
        names[i] = kiln_function_input_name(probe, i);
        wrt[i] = kiln_graph_lookup(g, names[i]);
    }
    int rc = kiln_graph_grad(g, cost, n_in, wrt,
                             KILN_GRAD_DISCONNECTED_ZERO, d, &err);
    for (int i = 0; rc == 0 && i < n_in; i++) {
        char nm[80];
        snprintf(nm, sizeof nm, "d_%s", names[i]);
        rc = kiln_graph_output(g, nm, d[i], &err);
    }
    if (rc) {
        kiln_function_free(probe);
        kiln_graph_free(g);
        return ok(0, "%s: grad: %s", label, err.message);
    }
    kiln_function *f = kiln_compile(g, o, &err);
    kiln_graph_free(g);
    if (!f) {
        kiln_function_free(probe);
        return ok(0, "%s: compile with gradients: %s", label, err.message);
    }
    /* random inputs of the declared (static) shapes */
    kiln_tensor in[GC_MAX_IN];
    double *vals[GC_MAX_IN];
    int64_t numel[GC_MAX_IN];
    for (int i = 0; i < n_in; i++) {
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &dt, &rank, dims, NULL);
        in[i].dtype = dt;
        in[i].rank = rank;
        numel[i] = 1;
        for (int k = 0; k < rank; k++) {
            in[i].shape[k] = dims[k];
            numel[i] *= dims[k];
        }
        vals[i] = calloc((size_t)(numel[i] ? numel[i] : 1), sizeof(double));
        double lo, hi;
        gc_range(text, names[i], &lo, &hi);
        for (int64_t j = 0; j < numel[i]; j++)
            vals[i][j] = gc_uniform(lo, hi);
        in[i].data = vals[i];
    }
    kiln_tensor out[GC_MAX_IN + 1];
    int all_ok = 1;
    if (kiln_function_call(f, in, out, &err)) {
        all_ok = ok(0, "%s: call: %s", label, err.message);
    } else {
        /* copy the analytic gradients: later calls reuse the buffers */
        double *an[GC_MAX_IN];
        for (int i = 0; i < n_in; i++) {
            an[i] = malloc(sizeof(double) * (size_t)(numel[i] ? numel[i] : 1));
            memcpy(an[i], out[1 + i].data, sizeof(double) * (size_t)numel[i]);
        }
        for (int i = 0; i < n_in; i++) {
            double worst = 0, wa = 0, wn = 0;
            int64_t wj = -1;
            int bad = 0;
            for (int64_t j = 0; j < numel[i]; j++) {
                double x = vals[i][j];
                double h = 1e-6 * fmax(1.0, fabs(x));
                vals[i][j] = x + h;
                double cp = gc_cost(f, in, &bad);
                vals[i][j] = x - h;
                double cm = gc_cost(f, in, &bad);
                vals[i][j] = x;
                double num = (cp - cm) / (2 * h);
                double e = fabs(an[i][j] - num) / fmax(1.0, fabs(num));
                if (!(e <= worst)) {
                    worst = e;
                    wj = j;
                    wa = an[i][j];
                    wn = num;
                }
            }
            int good = !bad && worst <= tol;
            ok(good, "%s: d cost / d %s (worst error %.2g)", label, names[i],
               worst);
            if (!good)
                printf("#   at flat index %lld: analytic %.17g, numeric "
                       "%.17g\n", (long long)wj, wa, wn);
            all_ok = all_ok && good;
        }
        for (int i = 0; i < n_in; i++)
            free(an[i]);
    }
    for (int i = 0; i < n_in; i++)
        free(vals[i]);
    kiln_function_free(f);
    kiln_function_free(probe);
    return all_ok;
}

__attribute__((unused))
static int gc_check(const char *label, const char *text, double tol)
{
    return gc_check_with(label, text, tol, NULL, NULL);
}

#endif
