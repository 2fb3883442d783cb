/*
 * test_topk.c — issue 29's top_k (docs/ops.md "top_k"): values and
 * indices against NumPy (cases from tests/topk_cases.py, run at test
 * time: ties to the lower index, NaN largest, k = 0, k = n, axis 0 and a
 * middle axis, f32, a transposed view, 50 of 4096) under every backend
 * built, the kernel run by the host (no fallback); the errors (k larger
 * than a static axis at build time and than a symbolic one at the call,
 * an integer x, no k, a third result); the gradient of the values
 * against central differences (gradcheck.h).
 */
#define _GNU_SOURCE
#include "tap.h"
#include "found_backends.h"
#include "compile_text.h"
#include "gradcheck.h"

#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct tcase {
    char label[64], dt[8];
    int axis, k, tr, rank;
    int64_t dims[8];
    int64_t nx, nv;
    double *x, *vals, *idx;
} tcase;

static double *read_list(FILE *fp, const char *name, int64_t *n)
{
    char kw[16];
    long long m;
    if (fscanf(fp, "%15s %lld", kw, &m) != 2 || strcmp(kw, name))
        return NULL;
    double *v = malloc(sizeof *v * (size_t)(m ? m : 1));
    for (long long i = 0; v && i < m; i++) {
        char w[64];
        if (fscanf(fp, "%63s", w) != 1) {
            free(v);
            return NULL;
        }
        v[i] = strtod(w, NULL);   /* "nan", "inf", "-inf" too */
    }
    *n = m;
    return v;
}

/* 1 read, 0 at the end, -1 on a format error */
static int read_case(FILE *fp, tcase *c)
{
    memset(c, 0, sizeof *c);
    char kw[16];
    if (fscanf(fp, "%15s", kw) != 1)
        return 0;
    if (strcmp(kw, "case") ||
        fscanf(fp, "%63s %7s %d %d %d %d", c->label, c->dt, &c->axis, &c->k,
               &c->tr, &c->rank) != 6 || c->rank < 1 || c->rank > 8)
        return -1;
    for (int d = 0; d < c->rank; d++) {
        long long x;
        if (fscanf(fp, "%lld", &x) != 1)
            return -1;
        c->dims[d] = x;
    }
    int64_t nv2;
    c->x = read_list(fp, "x", &c->nx);
    c->vals = c->x ? read_list(fp, "vals", &c->nv) : NULL;
    c->idx = c->vals ? read_list(fp, "idx", &nv2) : NULL;
    return c->idx && nv2 == c->nv ? 1 : -1;
}

static void run_case(const tcase *c, const char *be)
{
    char text[1024], dims[128] = "";
    size_t o = 0;
    for (int d = 0; d < c->rank; d++)
        o += (size_t)snprintf(dims + o, sizeof dims - o, "%s%lld",
                              d ? ", " : "", (long long)c->dims[d]);
    snprintf(text, sizeof text,
             "kiln 1\ngraph t\n  input x: %s[%s]\n"
             "  v = top_k(%s, k=%d, axis=%d)\n"
             "  output vals = v\n  output idx = result(v, index=1)\nend\n",
             c->dt, dims, c->tr ? "transpose(x)" : "x", c->k, c->axis);
    kiln_err err = {0, ""};
    kiln_function *f = compile_kg_text(text, be, NULL, &err);
    if (!ok(f != NULL, "%s %s compiles", be, c->label)) {
        diag("%s", err.message);
        return;
    }
    int f32 = strcmp(c->dt, "f32") == 0;
    kiln_tensor in = {f32 ? KILN_F32 : KILN_F64, c->rank, {0}, NULL};
    memcpy(in.shape, c->dims, sizeof c->dims);
    float *xf = malloc(sizeof *xf * (size_t)(c->nx ? c->nx : 1));
    for (int64_t i = 0; i < c->nx; i++)
        xf[i] = (float)c->x[i];
    in.data = f32 ? (void *)xf : (void *)c->x;
    kiln_tensor out[2];
    int rc = kiln_function_call(f, &in, out, &err);
    int good = rc == 0 && out[1].dtype == KILN_I64;
    int64_t nv = 1;
    for (int d = 0; good && d < out[0].rank; d++)
        nv *= out[0].shape[d];
    good = good && nv == c->nv;
    int64_t bad = -1;
    for (int64_t i = 0; good && i < nv; i++) {
        double v = f32 ? (double)((float *)out[0].data)[i]
                       : ((double *)out[0].data)[i];
        double want = f32 ? (double)(float)c->vals[i] : c->vals[i];
        int64_t ix = ((int64_t *)out[1].data)[i];
        if (!((v == want || (isnan(v) && isnan(want))) &&
              ix == (int64_t)c->idx[i]) && bad < 0)
            bad = i;
    }
    if (!ok(good && bad < 0, "%s %s: values and indices equal NumPy's", be,
            c->label)) {
        if (rc)
            diag("%s", err.message);
        else if (bad >= 0)
            diag("first difference at %lld", (long long)bad);
        else
            diag("%lld values, expected %lld", (long long)nv,
                 (long long)c->nv);
    }
    int host = 0;
    for (int i = 0; i < kiln_function_n_kernels(f); i++)
        host += strcmp(kiln_function_kernel_backend(f, i), "host_topk") == 0;
    ok(host == 1 && count_kernels_of_kind(f, KILN_KERNEL_TOPK) == 1,
       "%s %s: one TOPK kernel, run by host_topk", be, c->label);
    free(xf);
    kiln_function_free(f);
}

static void cases(const char **bk, int nb)
{
    const char *src = getenv("srcdir");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/topk_cases.py'",
             src ? src : ".");
    FILE *fp = access("/usr/bin/python3", X_OK) == 0 ? popen(cmd, "r") : NULL;
    if (!fp) {
        ok(1, "cases # SKIP no /usr/bin/python3");
        return;
    }
    int n = 0, rc;
    tcase c;
    while ((rc = read_case(fp, &c)) == 1) {
        for (int b = 0; b < nb; b++)
            run_case(&c, bk[b]);
        free(c.x);
        free(c.vals);
        free(c.idx);
        n++;
    }
    int st = pclose(fp);
    ok(rc == 0 && st == 0 && n >= 10, "read %d cases from topk_cases.py", n);
}

/* The error of compiling (or, when it compiles, calling with x of
 * shape [3]) `body`; "" when both worked. */
static void error_of(const char *body, char *msg, size_t size)
{
    char text[512];
    snprintf(text, sizeof text, "kiln 1\ngraph t\n%send\n", body);
    kiln_err err = {0, ""};
    kiln_function *f = compile_kg_text(text, "interp", NULL, &err);
    msg[0] = 0;
    if (!f) {
        snprintf(msg, size, "%s", err.message);
        return;
    }
    double x[3] = {1, 2, 3};
    kiln_tensor in = {KILN_F64, 1, {3}, x}, out[2];
    if (kiln_function_call(f, &in, out, &err))
        snprintf(msg, size, "%s", err.message);
    kiln_function_free(f);
}

static void errors(void)
{
    static const struct {
        const char *body, *want;
    } e[] = {
        {"  input x: f64[3]\n  output y = top_k(x, k=4)\n",
         "top_k: k=4 exceeds the length 3 of axis 0 of x (3)"},
        {"  input x: f64[n]\n  output y = top_k(x, k=4)\n",
         "top_k: k=4 exceeds the length 3 of axis 0"},
        {"  input x: i64[3]\n  output y = top_k(x, k=1)\n",
         "top_k: x must be f32 or f64, got i64"},
        {"  input x: f64[3]\n  output y = top_k(x)\n",
         "top_k: attribute 'k' is required"},
        {"  input x: f64[3]\n  output y = top_k(x, k=-1)\n",
         "top_k: attribute 'k' must be an integer >= 0"},
        {"  input x: f64[3]\n  output y = top_k(x, k=9223372036854775807)\n",
         "top_k: k=9223372036854775807 is too large (more than 2^31 - 1)"},
        {"  input x: f64[3]\n  output y = top_k(x, k=9007199254740992)\n",
         "top_k: k=9007199254740992 is too large (more than 2^31 - 1)"},
        {"  input x: f64[3]\n  output y = top_k(x, k=1, axis=1)\n",
         "top_k: axis 1"},
        {"  input x: f64[3]\n  v = top_k(x, k=1)\n"
         "  output y = result(v, index=2)\n",
         "result: top_k has 2 outputs (the values, then the indices), "
         "not 3"},
        {"  input x: f64\n  output y = top_k(x, k=0)\n",
         "top_k: x must have rank >= 1"},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        char msg[512];
        error_of(e[i].body, msg, sizeof msg);
        if (!ok(strstr(msg, e[i].want) != NULL, "error %zu: %s", i,
                e[i].want))
            diag("got: %s", msg[0] ? msg : "(no error)");
    }
}

static void gradients(void)
{
    /* random points: no ties, so top_k is differentiable there */
    gc_check("top_k values along the last axis",
             "kiln 1\ngraph t\n  input x: f64[3, 6]\n"
             "  const w: f64[3] = [0.5, -1.5, 2.0]\n"
             "  v = top_k(x, k=3)\n"
             "  output cost = sum(mul(square(v), w))\nend\n",
             1e-6);
    gc_check("top_k values along axis 0, and sin of them",
             "kiln 1\ngraph t\n  input x: f64[5, 2, 3]\n"
             "  v = top_k(x, k=2, axis=0)\n"
             "  output cost = sum(sin(v))\nend\n",
             1e-6);
}

int main(void)
{
    const char *bk[3];
    int nb = found_backends(bk);
    cases(bk, nb);
    errors();
    gradients();
    return done_testing();
}
