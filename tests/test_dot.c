/*
 * test_dot.c — dot on every backend against a plain triple loop written
 * here (an independent reference), and against the interpreter:
 * matrix-vector, vector-matrix, matrix-matrix, vector-vector, transposed
 * operands (read in place through BLAS's transpose flag), f32 and f64,
 * sizes small and large enough for BLAS's blocked paths; the gradient of
 * a dense model against finite differences (gradcheck.h); and what the
 * lowering and the runtime do with it:
 *
 *   - a transpose read only by dots is not a kernel of its own (no copy
 *     of the matrix per call);
 *   - a matrix-vector product calls cblas_dgemv / cblas_sgemv, not gemm
 *     with n = 1 (this binary defines the CBLAS entries it counts, which
 *     interposes them for libkiln, and forwards to the BLAS library);
 *   - the policy's `blas:` section picks BLAS or kiln's own matrix-vector
 *     loop: tall-narrow products (300 x 8 and 300 x 40, all four ways a
 *     graph writes them) under `gemv: blas`, `gemv: loop` and `auto`
 *     with a 16-column threshold, on every backend, take the path the
 *     policy says (counted gemv calls) and equal the reference sums.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tap.h"
#include "gradcheck.h"

#include <kiln/kiln.h>
#include <kiln/policy.h>

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- counting BLAS calls ------------------------------------------- */

static long n_gemv, n_gemm;

#define FORWARD(name, ...)                                                    \
    do {                                                                      \
        static __typeof__(name) *next = NULL;                                 \
        if (!next)                                                            \
            *(void **)&next = dlsym(RTLD_NEXT, #name);                        \
        if (next)                                                             \
            next(__VA_ARGS__);                                                \
    } while (0)

void cblas_dgemv(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE t,
                 const int m, const int n, const double alpha,
                 const double *a, const int lda, const double *x,
                 const int incx, const double beta, double *y,
                 const int incy)
{
    n_gemv++;
    FORWARD(cblas_dgemv, o, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

void cblas_sgemv(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE t,
                 const int m, const int n, const float alpha, const float *a,
                 const int lda, const float *x, const int incx,
                 const float beta, float *y, const int incy)
{
    n_gemv++;
    FORWARD(cblas_sgemv, o, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

void cblas_dgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE ta,
                 const enum CBLAS_TRANSPOSE tb, const int m, const int n,
                 const int k, const double alpha, const double *a,
                 const int lda, const double *b, const int ldb,
                 const double beta, double *c, const int ldc)
{
    n_gemm++;
    FORWARD(cblas_dgemm, o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
            ldc);
}

void cblas_sgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE ta,
                 const enum CBLAS_TRANSPOSE tb, const int m, const int n,
                 const int k, const float alpha, const float *a,
                 const int lda, const float *b, const int ldb,
                 const float beta, float *c, const int ldc)
{
    n_gemm++;
    FORWARD(cblas_sgemm, o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
            ldc);
}

/* ---- compiling ----------------------------------------------------- */

static char plugin_dir[4096];

/* Compile text with every kernel on backend: as an explicit backend when
 * blas is NULL, else under a policy sending every kernel there with the
 * section `blas: BLAS` (the choice between BLAS and kiln's matrix-vector
 * loop, docs/policy.md). */
static kiln_function *compile_blas(const char *text, const char *backend,
                                   const char *blas, int *n_other,
                                   kiln_err *err)
{
    kiln_graph *g = kiln_parse_string(text, "dot.kg", NULL, err);
    if (!g)
        return NULL;
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.plugin_path = plugin_dir;
    o.quiet = 1;
    kiln_policy *pol = NULL;
    if (blas) {
        char y[512];
        snprintf(y, sizeof y, "kiln_policy: 1\nbackends: [%s%s]\n"
                 "default: %s\nblas: %s\n", backend,
                 strcmp(backend, "interp") ? ", interp" : "", backend, blas);
        pol = kiln_policy_load_string(y, strlen(y), "blas.yaml", err);
        if (!pol) {
            kiln_graph_free(g);
            return NULL;
        }
        o.policy = pol;
    } else {
        o.backend = backend;
    }
    kiln_function *f = kiln_compile(g, &o, err);
    kiln_policy_free(pol);
    kiln_graph_free(g);
    *n_other = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        const char *b = kiln_function_kernel_backend(f, i);
        if (!b || strcmp(b, backend) != 0)
            (*n_other)++;
    }
    return f;
}

static kiln_function *compile_on(const char *text, const char *backend,
                                 int *n_other, kiln_err *err)
{
    return compile_blas(text, backend, NULL, n_other, err);
}

static int have_backend(const char *name)
{
    kiln_err err;
    int other = 1;
    kiln_function *f = compile_on("kiln 1\ngraph t\n  input x: f64\n"
                                  "  output y = exp(x)\nend\n",
                                  name, &other, &err);
    kiln_function_free(f);
    return f && other == 0;
}

/* ---- the cases ----------------------------------------------------- */

/* out = op(a) . op(b) with a: ra (ta: given transposed), b likewise.
 * Dims: m x k times k x n (a vector operand drops its m or n). */
typedef struct dcase {
    const char *what;
    int ra, rb, ta, tb;
    int64_t m, k, n;
} dcase;

static const dcase cases[] = {
    { "matrix-vector", 2, 1, 0, 0, 7, 5, 1 },
    { "vector-matrix", 1, 2, 0, 0, 1, 5, 6 },
    { "matrix-matrix", 2, 2, 0, 0, 7, 5, 6 },
    { "vector-vector", 1, 1, 0, 0, 1, 9, 1 },
    { "transpose(A)-vector", 2, 1, 1, 0, 7, 5, 1 },
    { "vector-transpose(B)", 1, 2, 0, 1, 1, 5, 6 },
    { "transpose(A)-matrix", 2, 2, 1, 0, 7, 5, 6 },
    { "matrix-transpose(B)", 2, 2, 0, 1, 7, 5, 6 },
    { "transpose(A)-transpose(B)", 2, 2, 1, 1, 7, 5, 6 },
    { "large matrix-vector", 2, 1, 0, 0, 300, 200, 1 },
    { "large transpose(A)-vector", 2, 1, 1, 0, 300, 200, 1 },
    { "large vector-matrix", 1, 2, 0, 0, 1, 200, 150 },
    { "large transpose(A)-transpose(B)", 2, 2, 1, 1, 120, 90, 70 },
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return 2.0 * ((double)(z >> 11) / 9007199254740992.0) - 1.0;
}

/* The .kg text of a case: inputs a, b as stored (a transposed operand
 * is declared with its dims swapped). */
static void case_text(const dcase *c, const char *dt, char *t, size_t n)
{
    char sa[64], sb[64];
    if (c->ra == 2)
        snprintf(sa, sizeof sa, "%s[%lld, %lld]", dt,
                 (long long)(c->ta ? c->k : c->m),
                 (long long)(c->ta ? c->m : c->k));
    else
        snprintf(sa, sizeof sa, "%s[%lld]", dt, (long long)c->k);
    if (c->rb == 2)
        snprintf(sb, sizeof sb, "%s[%lld, %lld]", dt,
                 (long long)(c->tb ? c->n : c->k),
                 (long long)(c->tb ? c->k : c->n));
    else
        snprintf(sb, sizeof sb, "%s[%lld]", dt, (long long)c->k);
    snprintf(t, n, "kiln 1\ngraph d\n  input a: %s\n  input b: %s\n"
             "  output y = dot(%s, %s)\nend\n", sa, sb,
             c->ta ? "transpose(a)" : "a", c->tb ? "transpose(b)" : "b");
}

/* Element (i, p) of op(a) and (p, j) of op(b), read from the stored
 * arrays by hand. */
static double a_at(const dcase *c, const double *a, int64_t i, int64_t p)
{
    if (c->ra == 1)
        return a[p];
    return c->ta ? a[p * c->m + i] : a[i * c->k + p];
}

static double b_at(const dcase *c, const double *b, int64_t p, int64_t j)
{
    if (c->rb == 1)
        return b[p];
    return c->tb ? b[j * c->k + p] : b[p * c->n + j];
}

/* Run case c with dtype dt on backend be (compared with interp when be
 * is not interp) under the policy section `blas: BLAS` (NULL: an explicit
 * backend, no policy); when want_gemv >= 0, the call of c must make that
 * many cblas_?gemv calls.  Returns the TAP result. */
static int run_case_blas(const dcase *c, kiln_dtype dt, const char *be,
                         const char *blas, long want_gemv)
{
    char text[512];
    case_text(c, kiln_dtype_name(dt), text, sizeof text);
    int64_t na = c->ra == 2 ? c->m * c->k : c->k;
    int64_t nb = c->rb == 2 ? c->k * c->n : c->k;
    int64_t nout = c->m * c->n;
    double *a = malloc(sizeof(double) * (size_t)na);
    double *b = malloc(sizeof(double) * (size_t)nb);
    double *want = malloc(sizeof(double) * (size_t)nout);
    float *af = malloc(sizeof(float) * (size_t)na);
    float *bf = malloc(sizeof(float) * (size_t)nb);
    for (int64_t i = 0; i < na; i++)
        af[i] = (float)(a[i] = uniform());
    for (int64_t i = 0; i < nb; i++)
        bf[i] = (float)(b[i] = uniform());
    if (dt == KILN_F32) {   /* the reference from the values kiln sees */
        for (int64_t i = 0; i < na; i++) a[i] = af[i];
        for (int64_t i = 0; i < nb; i++) b[i] = bf[i];
    }
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t j = 0; j < c->n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < c->k; p++)
                acc += a_at(c, a, i, p) * b_at(c, b, p, j);
            want[i * c->n + j] = acc;
        }
    kiln_tensor in[2];
    memset(in, 0, sizeof in);
    for (int i = 0; i < 2; i++) {
        int r = i ? c->rb : c->ra, t = i ? c->tb : c->ta;
        int64_t d0 = i ? (t ? c->n : c->k) : (t ? c->k : c->m);
        int64_t d1 = i ? (t ? c->k : c->n) : (t ? c->m : c->k);
        in[i].dtype = dt;
        in[i].rank = r;
        in[i].shape[0] = r == 2 ? d0 : c->k;
        in[i].shape[1] = d1;
        in[i].data = dt == KILN_F64 ? (void *)(i ? b : a)
                                    : (void *)(i ? bf : af);
    }
    kiln_err err = {0, ""};
    int other = 0, other_i = 0;
    kiln_function *f = compile_blas(text, be, blas, &other, &err);
    kiln_function *fi = f ? compile_on(text, "interp", &other_i, &err) : NULL;
    kiln_tensor out, outi;
    int rc = -1;
    double worst = 0, worst_i = 0;
    long gemv = -1;
    n_gemv = 0;
    if (f && fi && kiln_function_call(f, in, &out, &err) == 0 &&
        (gemv = n_gemv, 1) &&
        kiln_function_call(fi, in, &outi, &err) == 0) {
        rc = 0;
        for (int64_t i = 0; i < nout; i++) {
            double got = dt == KILN_F64 ? ((double *)out.data)[i]
                                        : ((float *)out.data)[i];
            double gi = dt == KILN_F64 ? ((double *)outi.data)[i]
                                       : ((float *)outi.data)[i];
            double e = fabs(got - want[i]) / (1 + fabs(want[i]));
            double ei = fabs(got - gi) / (1 + fabs(gi));
            worst = e > worst ? e : worst;
            worst_i = ei > worst_i ? ei : worst_i;
        }
    }
    /* f32: sums of k products in float, k <= 300, values in [-1, 1] */
    double tol = dt == KILN_F64 ? 1e-12 : 5e-5;
    int res;
    if (want_gemv < 0)
        res = ok(rc == 0 && other == 0 && worst <= tol && worst_i <= tol,
                 "%s %s on %s: equals the loop (%.1e) and interp (%.1e)",
                 c->what, kiln_dtype_name(dt), be, worst, worst_i);
    else
        res = ok(rc == 0 && other == 0 && worst <= tol && worst_i <= tol
                 && gemv == want_gemv,
                 "%s %s on %s, blas: %s: %s (%ld gemv), equals the loop "
                 "(%.1e) and interp (%.1e)", c->what, kiln_dtype_name(dt),
                 be, blas, want_gemv ? "BLAS" : "kiln's loop", gemv, worst,
                 worst_i);
    if (rc)
        diag("%s", err.message);
    kiln_function_free(f);
    kiln_function_free(fi);
    free(a); free(b); free(want); free(af); free(bf);
    return res;
}

static int run_case(const dcase *c, kiln_dtype dt, const char *be)
{
    return run_case_blas(c, dt, be, NULL, -1);
}

/* ---- BLAS or kiln's matrix-vector loop ------------------------------ */

/* The tall-narrow products of a regression's design matrix (300 rows, 8
 * or 40 columns) in each of the four ways a graph writes them: X b,
 * X^T g, g X (vector-matrix) and b X^T; cols is the narrow side. */
typedef struct gcase {
    dcase c;
    int64_t cols;
} gcase;

static const gcase gcases[] = {
    {{ "tall matrix-vector", 2, 1, 0, 0, 300, 8, 1 }, 8},
    {{ "tall matrix-vector", 2, 1, 0, 0, 300, 40, 1 }, 40},
    {{ "tall transpose(A)-vector", 2, 1, 1, 0, 8, 300, 1 }, 8},
    {{ "tall transpose(A)-vector", 2, 1, 1, 0, 40, 300, 1 }, 40},
    {{ "tall vector-matrix", 1, 2, 0, 0, 1, 300, 8 }, 8},
    {{ "tall vector-matrix", 1, 2, 0, 0, 1, 300, 40 }, 40},
    {{ "tall vector-transpose(B)", 1, 2, 0, 1, 1, 8, 300 }, 8},
    {{ "tall vector-transpose(B)", 1, 2, 0, 1, 1, 40, 300 }, 40},
};

/* Each policy choice forces its path: `gemv: blas` one gemv call per
 * product, `gemv: loop` none, and `auto` with a threshold of 16 columns
 * the loop for 8 columns and BLAS for 40; every path equals the
 * reference sums and the interpreter. */
static void test_gemv_choice(const char *be)
{
    static const char *const modes[] = {
        "{gemv: blas}", "{gemv: loop}",
        "{gemv: auto, loop_max_cols: 16, loop_max_cols_t: 16}"};
    for (int m = 0; m < 3; m++)
        for (size_t i = 0; i < sizeof gcases / sizeof gcases[0]; i++) {
            const gcase *g = &gcases[i];
            long want = m == 0 ? 1 : m == 1 ? 0 : g->cols > 16;
            run_case_blas(&g->c, KILN_F64, be, modes[m], want);
            run_case_blas(&g->c, KILN_F32, be, modes[m], want);
        }
}

/* ---- what the lowering makes --------------------------------------- */

static int n_kernels(const char *text)
{
    kiln_err err = {0, ""};
    int other;
    kiln_function *f = compile_on(text, "interp", &other, &err);
    int n = f ? kiln_function_n_kernels(f) : -1;
    if (!f)
        diag("%s", err.message);
    kiln_function_free(f);
    return n;
}

static void test_no_transpose_copy(void)
{
    int plain = n_kernels("kiln 1\ngraph t\n  input a: f64[30, 20]\n"
                          "  input x: f64[30]\n"
                          "  output y = dot(transpose(a), x)\nend\n");
    ok(plain == 1, "dot(transpose(a), x) is one kernel, no transpose copy "
       "(got %d)", plain);
    int mm = n_kernels("kiln 1\ngraph t\n  input a: f64[4, 3]\n"
                       "  input b: f64[5, 4]\n"
                       "  output y = dot(transpose(a), transpose(b))\nend\n");
    ok(mm == 1, "dot(transpose(a), transpose(b)) is one kernel (got %d)", mm);
    /* the dense model's gradient: dot(A, x) and dot(transpose(A), g);
     * with A shared data (here a const) the transpose is not computed at
     * all, neither per call nor once */
    const char *dense =
        "kiln 1\ngraph t\n  input x: f64[3]\n"
        "  const A: f64[2, 3] = [[1, 2, 3], [4, 5, 6]]\n"
        "  output cost = sum(square(dot(A, x)))\n"
        "  gx = grad(cost, x)\n  output gx\nend\n";
    int nd = n_kernels(dense);
    const char *dense_t =
        "kiln 1\ngraph t\n  input x: f64[3]\n"
        "  const A: f64[2, 3] = [[1, 2, 3], [4, 5, 6]]\n"
        "  output cost = sum(square(dot(A, x)))\n"
        "  output t = transpose(A)\n"
        "  gx = grad(cost, x)\n  output gx\nend\n";
    int ndt = n_kernels(dense_t);
    ok(nd > 0 && ndt == nd + 1, "the dense gradient computes no transpose: "
       "%d kernels, %d when transpose(A) is also an output", nd, ndt);
}

/* The transposed operand is still stored when an elementwise group would
 * otherwise swallow it: b = mul(a, 2) is read by sum (fusable) and by the
 * dot through transpose(b). */
static void test_fused_source(void)
{
    const char *text =
        "kiln 1\ngraph t\n  input a: f64[3, 2]\n  input x: f64[3]\n"
        "  b = mul(a, 2.0)\n"
        "  output s = sum(b)\n"
        "  output y = dot(transpose(b), x)\nend\n";
    double a[6] = {1, 2, 3, 4, 5, 6}, x[3] = {1, -1, 0.5};
    kiln_tensor in[2] = {
        { KILN_F64, 2, {3, 2}, a }, { KILN_F64, 1, {3}, x }
    };
    kiln_err err = {0, ""};
    int other;
    const char *bes[] = {"interp", "tcc", "llvm"};
    for (int i = 0; i < 3; i++) {
        if (!have_backend(bes[i]))
            continue;
        kiln_function *f = compile_on(text, bes[i], &other, &err);
        kiln_tensor out[2];
        int rc = f ? kiln_function_call(f, in, out, &err) : -1;
        /* y_j = sum_i 2 a[i][j] x[i] */
        double y0 = 2 * (1 * 1 - 3 + 0.5 * 5), y1 = 2 * (2 - 4 + 0.5 * 6);
        ok(rc == 0 && *(double *)out[0].data == 42 &&
           ((double *)out[1].data)[0] == y0 && ((double *)out[1].data)[1] == y1,
           "%s: dot(transpose(b), x) with b also summed", bes[i]);
        if (rc)
            diag("%s", err.message);
        kiln_function_free(f);
    }
}

/* A transpose of another dtype is cast first (a copy), and stays right. */
static void test_cast_source(void)
{
    const char *text =
        "kiln 1\ngraph t\n  input a: f32[2, 2]\n  input x: f64[2]\n"
        "  output y = dot(transpose(a), x)\nend\n";
    float a[4] = {1, 2, 3, 4};
    double x[2] = {1, 10};
    kiln_tensor in[2] = {
        { KILN_F32, 2, {2, 2}, a }, { KILN_F64, 1, {2}, x }
    };
    kiln_err err = {0, ""};
    int other;
    kiln_function *f = compile_on(text, "interp", &other, &err);
    kiln_tensor out;
    int rc = f ? kiln_function_call(f, in, &out, &err) : -1;
    ok(rc == 0 && out.dtype == KILN_F64 && ((double *)out.data)[0] == 31 &&
       ((double *)out.data)[1] == 42, "dot(transpose(f32), f64) = [31, 42]");
    if (rc)
        diag("%s", err.message);
    kiln_function_free(f);
}

/* Matrix-vector products never go through gemm: under `blas: {gemv:
 * blas}` they are one gemv call per dot of the dense gradient, under
 * `gemv: loop` kiln's loop computes them (no BLAS call at all). */
static void test_gemv_used(void)
{
    const char *text =
        "kiln 1\ngraph t\n  input x: f64[40]\n  input A: f64[50, 40]\n"
        "  input y: f32[50]\n  input B: f32[50, 40]\n"
        "  output cost = sum(square(dot(A, x)))\n"
        "  output v = dot(y, B)\n"
        "  gx = grad(cost, x)\n  output gx\nend\n";
    static double x[40], A[2000];
    static float y[50], B[2000];
    for (int i = 0; i < 40; i++) x[i] = uniform();
    for (int i = 0; i < 2000; i++) { A[i] = uniform(); B[i] = (float)uniform(); }
    for (int i = 0; i < 50; i++) y[i] = (float)uniform();
    kiln_tensor in[4] = {
        { KILN_F64, 1, {40}, x }, { KILN_F64, 2, {50, 40}, A },
        { KILN_F32, 1, {50}, y }, { KILN_F32, 2, {50, 40}, B },
    };
    const char *bes[] = {"interp", "tcc", "llvm"};
    for (int i = 0; i < 6; i++) {
        const char *be = bes[i / 2];
        if (!have_backend(be))
            continue;
        int loop = i % 2;
        kiln_err err = {0, ""};
        int other;
        kiln_function *f = compile_blas(text, be, loop ? "{gemv: loop}"
                                                       : "{gemv: blas}",
                                        &other, &err);
        kiln_tensor out[3];
        n_gemv = n_gemm = 0;
        int rc = f ? kiln_function_call(f, in, out, &err) : -1;
        ok(rc == 0 && other == 0 && n_gemv == (loop ? 0 : 3) && n_gemm == 0,
           "%s, gemv: %s: dot(A, x), dot(transpose(A), g) and dot(y, B) are "
           "%s, no gemm (gemv %ld, gemm %ld)", be, loop ? "loop" : "blas",
           loop ? "kiln's loop" : "3 gemv calls", n_gemv, n_gemm);
        if (rc)
            diag("%s", err.message);
        kiln_function_free(f);
    }
}

int main(void)
{
    const char *builddir = getenv("KILN_BUILDDIR");
    snprintf(plugin_dir, sizeof plugin_dir, "%s/tests/plugins/.libs",
             builddir ? builddir : ".");
    const char *bes[] = {"interp", "tcc", "llvm"};
    for (int b = 0; b < 3; b++) {
        if (!have_backend(bes[b])) {
            ok(1, "# SKIP backend %s is not in this build", bes[b]);
            continue;
        }
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            run_case(&cases[i], KILN_F64, bes[b]);
            run_case(&cases[i], KILN_F32, bes[b]);
        }
        test_gemv_choice(bes[b]);
    }
    test_no_transpose_copy();
    test_fused_source();
    test_cast_source();
    test_gemv_used();
    /* gradients of dense models against finite differences */
    gc_check("dense normal model, A data",
             "kiln 1\ngraph t\n  input x: f64[3]\n"
             "  const A: f64[4, 3] = [[1, 2, 3], [4, 5, 6], [-1, 0.5, 2], "
             "[0, -3, 1]]\n"
             "  const y: f64[4] = [1, -2, 0.5, 3]\n"
             "  z = true_div(sub(y, dot(A, x)), 0.7)\n"
             "  output cost = sum(sub(mul(-0.5, square(z)), log(0.7)))\nend\n",
             1e-6);
    gc_check("dense model, A and x inputs",
             "kiln 1\ngraph t\n  input A: f64[4, 3]\n  input x: f64[3]\n"
             "  output cost = sum(tanh(dot(A, x)))\nend\n", 1e-6);
    gc_check("vector-matrix and matrix-matrix",
             "kiln 1\ngraph t\n  input v: f64[4]\n  input B: f64[4, 3]\n"
             "  input C: f64[3, 2]\n"
             "  output cost = add(sum(sin(dot(v, B))), "
             "sum(square(dot(B, C))))\nend\n", 1e-6);
    gc_check("transposed operands",
             "kiln 1\ngraph t\n  input B: f64[3, 4]\n  input C: f64[2, 3]\n"
             "  input v: f64[3]\n"
             "  output cost = add(sum(square(dot(transpose(B), transpose(C)))), "
             "sum(cos(dot(transpose(B), v))))\nend\n", 1e-6);
    return done_testing();
}
