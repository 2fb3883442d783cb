/*
 * test_linalg.c — issue 28's linear algebra (docs/ops.md "Linear
 * algebra"): every op and density against NumPy / SciPy (cases from
 * tests/linalg_cases.py, run at test time) under every backend built;
 * gradients against central differences (gradcheck.h) on random SPD
 * matrices n = 1, 2, 7, 64 and batched; the gradient graphs' values the
 * same on every backend as on the interpreter; and the errors: a
 * non-positive-definite matrix names the node and the leading minor, a
 * singular solve names the node, shape errors name both shapes.
 */
#define _GNU_SOURCE
#include "tap.h"
#include "found_backends.h"
#include "compile_text.h"
#include "gradcheck.h"
#include "graph_cases.h"

#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include "runtime.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- gradients -------------------------------------------------------- */

#define HDR "kiln 1\ngraph t\n"
/* a = m m^T + n I: symmetric positive definite for any m */
#define SPD(n) \
    "  input m: f64[" #n ", " #n "]\n# range m -1 1\n" \
    "  a = add(dot(m, transpose(m)), mul(diag(ones(shape=[" #n "])), " #n \
    ".0))\n"
#define SPDB(b, n) \
    "  input m: f64[" #b ", " #n ", " #n "]\n# range m -1 1\n" \
    "  a = add(sum(mul(expand_dims(m, axis=3), expand_dims(m, axis=1)), " \
    "axis=2), mul(diag(ones(shape=[" #n "])), " #n ".0))\n"

#define CHOL_COST(n)                                                        \
    HDR SPD(n) "  input w: f64[" #n ", " #n "]\n"                           \
    "  output cost = sum(mul(w, cholesky(a)))\nend\n"

static const struct { const char *label, *text; } grads[] = {
    {"cholesky n=1", CHOL_COST(1)},
    {"cholesky n=2", CHOL_COST(2)},
    {"cholesky n=7", CHOL_COST(7)},
    {"cholesky n=64", CHOL_COST(64)},
    /* the lower triangle alone is read: a non-symmetric input's gradient
     * is lower triangular */
    {"cholesky lower triangle", HDR SPD(4)
     "  input u: f64[4, 4]\n# range u -0.1 0.1\n  input w: f64[4, 4]\n"
     "  output cost = sum(mul(w, cholesky(add(a, triu(u)))))\nend\n"},
    {"cholesky batched", HDR SPDB(3, 4) "  input w: f64[3, 4, 4]\n"
     "  output cost = sum(mul(w, cholesky(a)))\nend\n"},
    {"solve_triangular lower", HDR SPD(5) "  input b: f64[5, 2]\n"
     "  input w: f64[5, 2]\n  l = cholesky(a)\n"
     "  output cost = sum(mul(w, solve_triangular(l, b, lower=true)))\nend\n"},
    {"solve_triangular lower trans vector", HDR SPD(5) "  input b: f64[5]\n"
     "  input w: f64[5]\n  l = cholesky(a)\n"
     "  output cost = sum(mul(w, solve_triangular(l, b, lower=true, "
     "trans=true)))\nend\n"},
    {"solve_triangular upper", HDR SPD(5) "  input b: f64[5, 3]\n"
     "  input w: f64[5, 3]\n  u = transpose(cholesky(a))\n"
     "  output cost = sum(mul(w, solve_triangular(u, b)))\nend\n"},
    {"solve_triangular upper trans", HDR SPD(5) "  input b: f64[5]\n"
     "  input w: f64[5]\n  u = triu(a)\n"
     "  output cost = sum(mul(w, solve_triangular(u, b, trans=true)))\nend\n"},
    {"solve_triangular batched", HDR SPDB(2, 3) "  input b: f64[2, 3]\n"
     "  input w: f64[2, 3]\n  l = cholesky(a)\n"
     "  output cost = sum(mul(w, solve_triangular(l, b, lower=true)))\nend\n"},
    {"solve n=7", HDR SPD(7) "  input u: f64[7, 7]\n# range u -1 1\n"
     "  input b: f64[7, 2]\n  input w: f64[7, 2]\n"
     "  output cost = sum(mul(w, solve(add(a, u), b)))\nend\n"},
    {"solve batched vector", HDR SPDB(2, 3) "  input b: f64[2, 3]\n"
     "  input w: f64[2, 3]\n  output cost = sum(mul(w, solve(a, b)))\nend\n"},
    {"inverse n=7", HDR SPD(7) "  input u: f64[7, 7]\n# range u -1 1\n"
     "  input w: f64[7, 7]\n"
     "  output cost = sum(mul(w, inverse(add(a, u))))\nend\n"},
    {"inverse batched", HDR SPDB(3, 3) "  input w: f64[3, 3, 3]\n"
     "  output cost = sum(mul(w, inverse(a)))\nend\n"},
    {"log_det n=64", HDR SPD(64) "  output cost = log_det(a)\nend\n"},
    {"log_det nonsymmetric", HDR SPD(6) "  input u: f64[6, 6]\n"
     "# range u -1 1\n  output cost = log_det(add(a, u))\nend\n"},
    {"log_det batched", HDR SPDB(2, 3) "  input w: f64[2]\n"
     "  output cost = sum(mul(w, log_det(a)))\nend\n"},
    {"det n=5 nonsymmetric", HDR "  input a: f64[5, 5]\n"
     "  output cost = det(a)\nend\n"},
    {"det n=1", HDR "  input a: f64[1, 1]\n  output cost = det(a)\nend\n"},
    {"det batched, sign_det's zero gradient", HDR "  input a: f64[2, 3, 3]\n"
     "  input w: f64[2]\n"
     "  output cost = sum(mul(mul(w, sign_det(a)), det(a)))\nend\n"},
    {"det n=64", HDR SPD(64) "  output cost = det(mul(a, 0.0125))\nend\n"},
    {"matmul batch broadcast", HDR "  input a: f64[1, 3, 2, 4]\n"
     "  input b: f64[4, 1, 4, 5]\n  input w: f64[4, 3, 2, 5]\n"
     "  output cost = sum(mul(w, matmul(a, b)))\nend\n"},
    {"matmul 1-D operands", HDR "  input a: f64[4]\n  input b: f64[3, 4, 2]\n"
     "  input c: f64[2, 3, 4]\n  input w: f64[3, 2]\n  input u: f64[2, 3]\n"
     "  output cost = add(sum(mul(w, matmul(a, b))), "
     "sum(mul(u, matmul(c, a))))\nend\n"},
    {"matmul 3-D by 2-D", HDR "  input a: f64[3, 2, 4]\n"
     "  input b: f64[4, 5]\n  input w: f64[3, 2, 5]\n"
     "  output cost = sum(mul(w, matmul(a, b)))\nend\n"},
    {"diag diagonal tril triu trace", HDR "  input a: f64[4, 4]\n"
     "  input v: f64[4]\n  input w: f64[4, 4]\n"
     "  output cost = add(sum(mul(w, diag(v))), sum(exp(diagonal(a))), "
     "sum(mul(w, tril(a))), sum(mul(exp(w), triu(a))), "
     "mul(trace(a), trace(a)))\nend\n"},
    {"outer", HDR "  input p: f64[3]\n  input q: f64[4]\n"
     "  input w: f64[3, 4]\n  output cost = sum(mul(w, outer(p, q)))\nend\n"},
    {"multi_normal_cholesky_lpdf", HDR SPD(4) "  input y: f64[3, 4]\n"
     "  input mu: f64[4]\n"
     "  output cost = multi_normal_cholesky_lpdf(y, mu, cholesky(a))\nend\n"},
    {"multi_normal_lpdf", HDR SPD(4) "  input y: f64[4]\n"
     "  input mu: f64[4]\n"
     "  output cost = multi_normal_lpdf(y, mu, a)\nend\n"},
    {"lkj_corr_cholesky_lpdf", HDR "  input z: f64[4, 4]\n# range z -1 1\n"
     "  input eta: f64\n# range eta 0.5 3\n"
     "  c = add(dot(z, transpose(z)), mul(diag(ones(shape=[4])), 4.0))\n"
     "  r = true_div(1.0, sqrt(diagonal(c)))\n"
     "  l = cholesky(mul(mul(c, expand_dims(r, axis=1)), r))\n"
     "  output cost = lkj_corr_cholesky_lpdf(l, eta)\nend\n"},
    {"gp_exp_quad_cov", HDR "  input x: f64[5, 2]\n  input al: f64\n"
     "  input rho: f64\n# range al 0.5 2\n# range rho 0.5 2\n"
     "  input w: f64[5, 5]\n"
     "  output cost = sum(mul(w, gp_exp_quad_cov(x, al, rho)))\nend\n"},
    {"gp regression", HDR "  input x: f64[6]\n  input al: f64\n"
     "  input rho: f64\n  input sig: f64\n  input y: f64[6]\n"
     "# range al 0.5 2\n# range rho 0.5 2\n# range sig 0.5 1\n"
     "  k = add(gp_exp_quad_cov(x, al, rho), diag(mul(ones(shape=[6]), "
     "square(sig))))\n"
     "  output cost = multi_normal_cholesky_lpdf(y, zeros(shape=[6]), "
     "cholesky(k))\nend\n"},
};

/* The gradient graph on each backend gives the interpreter's values. */
static void backend_grads(const char *label, const char *text,
                          const char **bk, int nbk)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, label, NULL, &err);
    if (!g) {
        ok(0, "%s: parse: %s", label, err.message);
        return;
    }
    int n_in = 0;
    kiln_value wrt[GC_MAX_IN], d[GC_MAX_IN];
    const char *names[GC_MAX_IN];
    kiln_function *probe = kiln_compile(g, NULL, &err);
    if (probe) {
        n_in = kiln_function_n_inputs(probe);
        for (int i = 0; i < n_in; i++) {
            names[i] = kiln_function_input_name(probe, i);
            wrt[i] = kiln_graph_lookup(g, names[i]);
        }
    }
    int rc = !probe || kiln_graph_grad(g, kiln_graph_lookup(g, "cost"), n_in,
                                       wrt, KILN_GRAD_DISCONNECTED_ZERO, d,
                                       &err);
    for (int i = 0; !rc && i < n_in; i++) {
        char nm[80];
        snprintf(nm, sizeof nm, "d_%s", names[i]);
        rc = kiln_graph_output(g, nm, d[i], &err);
    }
    char *txt = rc ? NULL : kiln_graph_print(g, &err);
    kiln_graph_free(g);
    kiln_tensor in[GC_MAX_IN];
    double *vals[GC_MAX_IN] = {0};
    for (int i = 0; txt && i < n_in; i++) {
        kiln_dtype dt;
        int64_t n = 1;
        kiln_function_input_type(probe, i, &dt, &in[i].rank, in[i].shape,
                                 NULL);
        in[i].dtype = dt;
        for (int k = 0; k < in[i].rank; k++)
            n *= in[i].shape[k];
        double lo, hi;
        gc_range(text, names[i], &lo, &hi);
        vals[i] = malloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t j = 0; j < n; j++)
            vals[i][j] = gc_uniform(lo, hi);
        in[i].data = vals[i];
    }
    double *ref[GC_MAX_IN + 1] = {0};
    int64_t nref[GC_MAX_IN + 1] = {0};
    for (int b = 0; txt && b < nbk; b++) {
        kiln_function *f = compile_kg_text(txt, bk[b], NULL, &err);
        kiln_tensor out[GC_MAX_IN + 1];
        if (!f || kiln_function_call(f, in, out, &err)) {
            ok(0, "%s on %s: %s", label, bk[b], err.message);
            kiln_function_free(f);
            continue;
        }
        double e = 0;
        for (int j = 0; j <= n_in; j++) {
            int64_t n = 1;
            for (int k = 0; k < out[j].rank; k++)
                n *= out[j].shape[k];
            if (b == 0) {
                ref[j] = malloc(sizeof(double) * (size_t)(n ? n : 1));
                memcpy(ref[j], out[j].data, sizeof(double) * (size_t)n);
                nref[j] = n;
            }
            for (int64_t i = 0; i < n && i < nref[j]; i++)
                e = fmax(e, fabs(((double *)out[j].data)[i] - ref[j][i]) /
                                fmax(1, fabs(ref[j][i])));
            if (n != nref[j])
                e = INFINITY;
        }
        if (b > 0)
            ok(e <= 1e-12, "%s: cost and gradient on %s as on interp (max "
               "error %.2g)", label, bk[b], e);
        kiln_function_free(f);
    }
    if (!txt)
        ok(0, "%s: gradient graph: %s", label, err.message);
    for (int j = 0; j <= n_in; j++)
        free(ref[j]);
    for (int i = 0; i < n_in; i++)
        free(vals[i]);
    free(txt);
    kiln_function_free(probe);
}

/* ---- errors ----------------------------------------------------------- */

static void call_error(const char *text, const double *av, int n,
                       const char *want1, const char *want2,
                       const char **bk, int nbk)
{
    for (int b = 0; b < nbk; b++) {
        kiln_err err = {0, ""};
        kiln_function *f = compile_kg_text(text, bk[b], NULL, &err);
        kiln_tensor in[2];
        double bv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        in[0] = (kiln_tensor){.data = (void *)av, .dtype = KILN_F64,
                              .rank = 2, .shape = {n, n}};
        in[1] = (kiln_tensor){.data = bv, .dtype = KILN_F64, .rank = 1,
                              .shape = {n}};
        kiln_tensor out[2];
        int rc = f ? kiln_function_call(f, in, out, &err) : -1;
        ok(f && rc == KILN_ERR_RUNTIME && strstr(err.message, want1) &&
               strstr(err.message, want2),
           "%s: error names the node and the value: %s", bk[b], err.message);
        kiln_function_free(f);
    }
}

static void build_error(const char *text, const char *want)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    ok(!g && strstr(err.message, want), "refused: %s", err.message);
    kiln_graph_free(g);
}

static void error_tests(const char **bk, int nbk)
{
    /* leading minor 2 of [[1, 2, 0], [2, 1, 0], [0, 0, 1]] is -3 */
    static const double npd[9] = {1, 2, 0, 2, 1, 0, 0, 0, 1};
    call_error(HDR "  input a: f64[3, 3]\n  input b: f64[3]\n"
               "  output L_cov = cholesky(a)\nend\n", npd, 3,
               "'L_cov'", "not positive definite (leading minor 2 of 3)",
               bk, nbk);
    call_error(HDR "  input a: f64[3, 3]\n  input b: f64[3]\n"
               "  output lp = multi_normal_lpdf(b, b, a)\nend\n", npd, 3,
               "cholesky", "not positive definite (leading minor 2 of 3)",
               bk, nbk);
    static const double sing[9] = {1, 2, 3, 2, 4, 6, 1, 0, 1};
    call_error(HDR "  input a: f64[3, 3]\n  input b: f64[3]\n"
               "  output x = solve(a, b)\nend\n", sing, 3, "'x'",
               "singular matrix", bk, nbk);
    call_error(HDR "  input a: f64[3, 3]\n  input b: f64[3]\n"
               "  output ai = inverse(a)\nend\n", sing, 3, "'ai'",
               "singular matrix", bk, nbk);
    static const double ztri[4] = {1, 0, 5, 0};
    call_error(HDR "  input a: f64[2, 2]\n  input b: f64[2]\n"
               "  output x = solve_triangular(a, b, lower=true)\nend\n", ztri,
               2, "'x'", "singular triangular matrix (diagonal element 1 is "
               "zero)", bk, nbk);
    /* log_det of a singular matrix is -inf, as NumPy's slogdet; det and
     * sign_det are 0 */
    {
        kiln_err err = {0, ""};
        kiln_function *f = compile_kg_text(HDR "  input a: f64[3, 3]\n"
                                        "  output d = log_det(a)\n"
                                        "  output e = det(a)\n"
                                        "  output s = sign_det(a)\nend\n",
                                        "interp", NULL, &err);
        kiln_tensor in = {.data = (void *)sing, .dtype = KILN_F64,
                          .rank = 2, .shape = {3, 3}};
        kiln_tensor out[3];
        int rc = f ? kiln_function_call(f, &in, out, &err) : -1;
        ok(rc == 0 && isinf(*(double *)out[0].data) &&
               *(double *)out[0].data < 0, "log_det of a singular matrix is "
           "-inf");
        ok(rc == 0 && *(double *)out[1].data == 0 &&
               *(double *)out[2].data == 0,
           "det and sign_det of a singular matrix are 0");
        kiln_function_free(f);
    }
    build_error(HDR "  input a: f64[2, 3]\n  output l = cholesky(a)\nend\n",
                "expected a square matrix, got shape (2, 3)");
    build_error(HDR "  input a: f64[3, 3]\n  input b: f64[4, 2]\n"
                "  output x = solve(a, b)\nend\n",
                "shapes (3, 3) and (4, 2) do not match");
    build_error(HDR "  input a: f64[2, 3, 4]\n  input b: f64[3, 4, 2]\n"
                "  output c = matmul(a, b)\nend\n",
                "matmul: shapes (2, 3, 4) and (3, 4, 2) do not match");
    build_error(HDR "  input a: f64[2, 3, 4]\n  input b: f64[3, 2]\n"
                "  output c = matmul(a, b)\nend\n",
                "matmul: shapes (2, 3, 4) and (3, 2) do not match");
    build_error(HDR "  input a: f64[2, 3]\n  output d = det(a)\nend\n",
                "det: expected a square matrix, got shape (2, 3)");
    build_error(HDR "  input a: f64[3]\n  output l = inverse(a)\nend\n",
                "expected a matrix");
    build_error(HDR "  input a: f64[3, 3]\n  input b: f64[3]\n"
                "  output x = solve_triangular(a, b, lower=1)\nend\n",
                "attribute 'lower' must be true or false");
    build_error(HDR "  input a: f64[n, n]\n  input e: f64\n"
                "  output x = lkj_corr_cholesky_lpdf(a, e)\nend\n",
                "static size");
    /* at run time, a symbolic size that does not fit */
    {
        kiln_err err = {0, ""};
        kiln_function *f = compile_kg_text(HDR "  input a: f64[n, n]\n"
                                        "  input b: f64[k]\n"
                                        "  output x = solve(a, b)\nend\n",
                                        "interp", NULL, &err);
        double av[4] = {1, 0, 0, 1}, bv[3] = {1, 2, 3};
        kiln_tensor in[2] = {{.data = av, .dtype = KILN_F64, .rank = 2,
                              .shape = {2, 2}},
                             {.data = bv, .dtype = KILN_F64, .rank = 1,
                              .shape = {3}}};
        kiln_tensor out[1];
        int rc = f ? kiln_function_call(f, in, out, &err) : -1;
        ok(rc != 0 && strstr(err.message, "'x'"), "run-time shape mismatch "
           "refused: %s", err.message);
        kiln_function_free(f);
    }
}

/* a model whose covariance is not positive definite fails log_density
 * (Stan rejects the draw) */
static void model_test(void)
{
    static const char text[] =
        "kiln 1\ngraph t\n  param r: f64\n"
        "  one = ones(shape=[2])\n"
        "  s = add(diag(one), mul(r, sub(ones(shape=[2, 2]), diag(one))))\n"
        "  y = zeros(shape=[2])\n"
        "  output logp = multi_normal_lpdf(y, y, s)\nend\n";
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    kiln_model *m = g ? kiln_model_new(g, "logp", NULL, NULL, NULL, &err)
                      : NULL;
    if (!m) {
        ok(0, "model: %s", err.message);
        kiln_graph_free(g);
        return;
    }
    double lp = 0, grad = 0, r = 0.5;
    int rc = kiln_model_log_density(m, 1, &r, &lp, &grad, &err);
    /* log N(0 | 0, [[1, .5], [.5, 1]]) = -log(2 pi) - log(0.75)/2 */
    ok(rc == 0 && fabs(lp - (-log(2 * 3.14159265358979323846) - 0.5 * log(0.75))) < 1e-13 &&
           fabs(grad - 0.5 / 0.75) < 1e-12,
       "model log density and gradient at r = 0.5 (%.17g, %.17g)", lp, grad);
    r = 1.5;
    rc = kiln_model_log_density(m, 1, &r, &lp, &grad, &err);
    ok(rc == KILN_ERR_RUNTIME && strstr(err.message, "not positive definite"),
       "model at r = 1.5 rejects: %s", err.message);
    kiln_model_free(m);
    kiln_graph_free(g);
}

/* ---- the runtime's fast paths against its generic path ---------------
 * core/runtime/linalg.c takes a zero-copy path for row-major contiguous
 * matrices and the generic (copy to column-major scratch) path for other
 * strides: the same matrix given transposed in memory or as a slice of a
 * wider array, or an output of other strides, must give the same values
 * (the generic path is checked against NumPy above). n = 300 uses the
 * per-thread scratch, n <= 22 the stack; two threads at once. */

static double lcg(uint64_t *st)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*st >> 11) / 9007199254740992.0 * 2 - 1;
}

typedef struct fp_case {
    uint32_t op;
    int n, vec;      /* vec: b is a vector (else no b) */
    const char *name;
} fp_case;

/* A [batch, n, n] as (layout 0) row-major, (1) transposed in memory,
 * (2) rows n + 3 apart; b [batch, n] with stride 1 (layout 0) or 2. */
static kiln_view fp_view(double *buf, const double *a, int batch, int n,
                         int layout)
{
    int64_t ld = layout == 2 ? n + 3 : n;
    kiln_view v = {.data = buf, .rank = 3, .dtype = KILN_F64,
                   .shape = {batch, n, n},
                   .strides = {ld * n, layout == 1 ? 1 : ld,
                               layout == 1 ? n : 1}};
    for (int k = 0; k < batch; k++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                buf[k * v.strides[0] + i * v.strides[1] + j * v.strides[2]] =
                    a[((size_t)k * n + i) * n + j];
    return v;
}

/* Runs case c with A in `layout` (and, out_stride > 1, an output whose
 * last axis has that stride); writes the output densely into res.
 * Returns lapack_run's code. */
static int fp_run(const fp_case *c, const double *a, const double *b,
                  int batch, int layout, int out_stride, double *res,
                  char *msg, size_t msz)
{
    int n = c->n, no;
    int64_t nn = (int64_t)n * n;
    double *abuf = calloc((size_t)batch * n * (n + 3), sizeof *abuf);
    double *bbuf = calloc((size_t)batch * n * 2, sizeof *bbuf);
    double *obuf = calloc((size_t)batch * nn * out_stride + 1, sizeof *obuf);
    kiln_view in[2], out;
    in[0] = fp_view(abuf, a, batch, n, layout);
    in[1] = (kiln_view){.data = bbuf, .rank = 2, .dtype = KILN_F64,
                        .shape = {batch, n},
                        .strides = {2 * n, layout ? 2 : 1}};
    for (int k = 0; k < batch; k++)
        for (int i = 0; i < n; i++)
            bbuf[k * 2 * n + i * in[1].strides[1]] = b[k * n + i];
    int det = c->op == KILN_LINALG_DET || c->op == KILN_LINALG_SIGNDET ||
              c->op == KILN_LINALG_LOGDET;
    no = det ? 1 : c->vec ? n : (int)nn;
    out = (kiln_view){.data = obuf, .dtype = KILN_F64,
                      .rank = det ? 1 : c->vec ? 2 : 3,
                      .shape = {batch, n, n}};
    out.strides[0] = (int64_t)no * out_stride;
    if (!det) {
        out.strides[out.rank - 1] = out_stride;
        if (!c->vec)
            out.strides[1] = (int64_t)n * out_stride;
    }
    int rc = kiln_runtime_get()->lapack_run(kiln_runtime_get(), c->op,
                                            c->vec ? 2 : 1, in, 1, &out,
                                            msg, msz);
    for (int k = 0; k < batch; k++)
        for (int i = 0; i < no; i++)
            res[k * no + i] = obuf[k * out.strides[0] + i * (det ? 1
                                                             : out_stride)];
    free(abuf);
    free(bbuf);
    free(obuf);
    return rc;
}

static const fp_case fp_cases[] = {
    {KILN_LINALG_POTRF, 5, 0, "cholesky"},
    {KILN_LINALG_POTRF_NAN, 4, 0, "cholesky nan_on_error"},
    {KILN_LINALG_TRSM_LN, 6, 1, "solve_triangular lower"},
    {KILN_LINALG_TRSM_LT, 6, 1, "solve_triangular lower trans"},
    {KILN_LINALG_TRSM_UN, 6, 1, "solve_triangular upper"},
    {KILN_LINALG_TRSM_UT, 6, 1, "solve_triangular upper trans"},
    {KILN_LINALG_GESV, 7, 1, "solve vector"},
    {KILN_LINALG_GETRI, 7, 0, "inverse"},
    {KILN_LINALG_LOGDET, 7, 0, "log_det"},
    {KILN_LINALG_SIGNDET, 7, 0, "sign_det"},
    {KILN_LINALG_DET, 7, 0, "det"},
    {KILN_LINALG_POTRF, 1, 0, "cholesky n=1"},
    {KILN_LINALG_GESV, 1, 1, "solve n=1"},
    {KILN_LINALG_POTRF, 300, 0, "cholesky n=300 (per-thread scratch)"},
    {KILN_LINALG_GETRI, 300, 0, "inverse n=300 (per-thread scratch)"},
    {KILN_LINALG_TRSM_LT, 300, 1, "solve_triangular n=300"},
};

/* The matrices of case c: symmetric positive definite with garbage in
 * the upper triangle for POTRF (which reads the lower one), not
 * positive definite for POTRF_NAN's second batch element, else
 * nonsymmetric and diagonally dominant (no triangle is symmetric, so a
 * transposed read would show). */
static void fp_data(const fp_case *c, int batch, double *a, double *b,
                    uint64_t seed)
{
    int n = c->n;
    for (int k = 0; k < batch; k++) {
        double *m = a + (size_t)k * n * n;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                m[i * n + j] = lcg(&seed) + (i == j ? n + 1.0 : 0);
        if (c->op == KILN_LINALG_POTRF || c->op == KILN_LINALG_POTRF_NAN)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < i; j++)
                    m[j * n + i] = 1e3 + lcg(&seed);   /* not read */
        if (c->op == KILN_LINALG_POTRF_NAN && k == 1)
            m[0] = -1;
        for (int i = 0; i < n; i++)
            b[k * n + i] = lcg(&seed);
    }
}

static double fp_diff(const double *x, const double *y, int64_t n)
{
    double e = 0, scale = 1;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(y[i]));
    for (int64_t i = 0; i < n; i++)
        if (isnan(x[i]) != isnan(y[i]))
            return INFINITY;
        else if (!isnan(x[i]))
            e = fmax(e, fabs(x[i] - y[i]) / scale);
    return e;
}

static void fast_path_tests(void)
{
    for (size_t ci = 0; ci < sizeof fp_cases / sizeof fp_cases[0]; ci++) {
        const fp_case *c = &fp_cases[ci];
        int batch = c->n > 100 ? 1 : 2, n = c->n;
        size_t na = (size_t)batch * n * n;
        double *a = malloc(na * sizeof *a), *b = malloc(na * sizeof *b);
        double *r[4];
        for (int k = 0; k < 4; k++)
            r[k] = malloc(na * sizeof *r[k]);
        fp_data(c, batch, a, b, 7 + ci);
        char msg[4][200] = {"", "", "", ""};
        int rc[4];
        rc[0] = fp_run(c, a, b, batch, 0, 1, r[0], msg[0], sizeof msg[0]);
        rc[1] = fp_run(c, a, b, batch, 1, 1, r[1], msg[1], sizeof msg[1]);
        rc[2] = fp_run(c, a, b, batch, 2, 1, r[2], msg[2], sizeof msg[2]);
        rc[3] = fp_run(c, a, b, batch, 0, 3, r[3], msg[3], sizeof msg[3]);
        int det = c->op == KILN_LINALG_DET || c->op == KILN_LINALG_SIGNDET ||
                  c->op == KILN_LINALG_LOGDET;
        int64_t nout = (int64_t)batch * (det ? 1 : c->vec ? n : n * n);
        double e = 0;
        for (int k = 1; k < 4; k++)
            e = fmax(e, fp_diff(r[0], r[k], nout));
        ok(!rc[0] && !rc[1] && !rc[2] && !rc[3] && e <= 1e-12,
           "runtime %s: contiguous (fast path) as transposed, sliced and "
           "strided-output views (generic), max error %.2g %s", c->name, e,
           msg[0]);
        for (int k = 0; k < 4; k++)
            free(r[k]);
        free(a);
        free(b);
    }
}

/* In place: the output is the input's own memory (POTRF, GETRI) or b's
 * (a vector solve), against separate buffers. */
static void fast_path_inplace(void)
{
    static const fp_case cs[] = {{KILN_LINALG_POTRF, 6, 0, "cholesky"},
                                 {KILN_LINALG_GETRI, 6, 0, "inverse"},
                                 {KILN_LINALG_TRSM_UT, 6, 1, "trsm"},
                                 {KILN_LINALG_GESV, 6, 1, "solve"}};
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        const fp_case *c = &cs[ci];
        int n = c->n;
        double a[36], b[6], ref[36], buf[36], bb[6];
        char msg[200] = "";
        fp_data(c, 1, a, b, 99);
        fp_run(c, a, b, 1, 0, 1, ref, msg, sizeof msg);
        memcpy(buf, a, sizeof a);
        memcpy(bb, b, sizeof b);
        kiln_view in[2] = {
            {.data = buf, .rank = 2, .dtype = KILN_F64, .shape = {n, n},
             .strides = {n, 1}},
            {.data = bb, .rank = 1, .dtype = KILN_F64, .shape = {n},
             .strides = {1}}};
        kiln_view out = c->vec ? in[1] : in[0];
        int rc = kiln_runtime_get()->lapack_run(kiln_runtime_get(), c->op,
                                                c->vec ? 2 : 1, in, 1, &out,
                                                msg, sizeof msg);
        double e = fp_diff(c->vec ? bb : buf, ref, c->vec ? n : n * n);
        ok(rc == 0 && e <= 1e-13, "runtime %s in place: as separate "
           "buffers (max error %.2g) %s", c->name, e, msg);
    }
}

typedef struct fp_thread {
    int bad;
} fp_thread;

static void *fp_worker(void *arg)
{
    fp_thread *t = arg;
    static const fp_case cs[] = {{KILN_LINALG_GETRI, 40, 0, ""},
                                 {KILN_LINALG_POTRF, 5, 0, ""},
                                 {KILN_LINALG_GESV, 30, 1, ""}};
    for (int it = 0; it < 20; it++)
        for (int ci = 0; ci < 3; ci++) {
            const fp_case *c = &cs[ci];
            size_t na = (size_t)2 * c->n * c->n;
            double *a = malloc(na * sizeof *a), *b = malloc(na * sizeof *b);
            double *x = malloc(na * sizeof *x), *y = malloc(na * sizeof *y);
            char msg[200];
            fp_data(c, 2, a, b, 1000 + it * 3 + ci);
            int r0 = fp_run(c, a, b, 2, 0, 1, x, msg, sizeof msg);
            int r1 = fp_run(c, a, b, 2, 1, 1, y, msg, sizeof msg);
            if (r0 || r1 || fp_diff(x, y, c->vec ? 2 * c->n : (int64_t)na) >
                                1e-12)
                t->bad++;
            free(a);
            free(b);
            free(x);
            free(y);
        }
    return NULL;
}

static void fast_path_threads(void)
{
    pthread_t th[2];
    fp_thread t[2] = {{0}, {0}};
    int made = 0;
    for (int i = 0; i < 2; i++)
        made += pthread_create(&th[i], NULL, fp_worker, &t[i]) == 0;
    for (int i = 0; i < made; i++)
        pthread_join(th[i], NULL);
    ok(made == 2 && t[0].bad == 0 && t[1].bad == 0, "two threads at once "
       "(stack and per-thread scratch): fast and generic paths agree (%d, "
       "%d bad)", t[0].bad, t[1].bad);
}

/* The first LINALG call of a process holds OpenBLAS to one thread, as
 * kiln's first gemm does (docs/backends.md "BLAS"): run before anything
 * else in this program touches the BLAS. */
static void openblas_threads_test(void)
{
    int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT,
                                            "openblas_get_num_threads");
    if (!get || getenv("OPENBLAS_NUM_THREADS") ||
        getenv("GOTO_NUM_THREADS") || getenv("OMP_NUM_THREADS")) {
        ok(1, "OpenBLAS threads # SKIP not OpenBLAS, or its threads set "
           "by the environment");
        return;
    }
    double a[4] = {4, 1, 1, 3}, l[4];
    char msg[200] = "";
    kiln_view in = {.data = a, .rank = 2, .dtype = KILN_F64,
                    .shape = {2, 2}, .strides = {2, 1}};
    kiln_view out = in;
    out.data = l;
    int rc = kiln_runtime_get()->lapack_run(kiln_runtime_get(),
                                            KILN_LINALG_POTRF, 1, &in, 1,
                                            &out, msg, sizeof msg);
    ok(rc == 0 && get() == 1, "after the first lapack_run OpenBLAS runs "
       "one thread (%d) %s", get(), msg);
}

int main(void)
{
    openblas_threads_test();
    const char *bk[3];
    int nbk = found_backends(bk);
    error_tests(bk, nbk);
    model_test();
    fast_path_tests();
    fast_path_inplace();
    fast_path_threads();
    graph_value_tests("linalg_cases.py", 20, bk, nbk, 0);
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++) {
        gc_check(grads[i].label, grads[i].text, 1e-6);
        backend_grads(grads[i].label, grads[i].text, bk, nbk);
    }
    return done_testing();
}
