/*
 * test_matmul.c — batched matmul (issue 29, ABI 1.11; docs/ops.md "Linear
 * algebra"): numpy.matmul cases from tests/matmul_cases.py (run at test
 * time) in f64 and f32 under every backend built and on the interpreter
 * without passes — batch broadcasting, 1-D operands, rank mixes, grouped-
 * query attention [3,3,T,64] @ [3,1,64,t] with t = 0, transposed and sliced
 * views, m = 1, n = 1, k = 0; the kernels of an attention graph are two
 * DOT kernels and nothing else (its reshape, transposes and expand_dims
 * are read in place; no elementwise, reduce or loop kernel computes a
 * product); gradients against central differences (gradcheck.h) on every
 * backend; the runtime's gemm_batched on hand-made views (negative and
 * non-unit strides everywhere, a strided output) against a C loop, and
 * its errors; shape errors name both shapes.
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

#include "runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the kernels: DOT, views in place ----------------------------------- */

#define HDR "kiln 1\ngraph t\n"
#define ATTENTION(T, t)                                                     \
    HDR "  input q: f32[" #T ", 576]\n  input k: f32[" #t ", 3, 64]\n"      \
    "  input v: f32[" #t ", 3, 64]\n"                                       \
    "  qh = transpose(reshape(q, shape=[" #T ", 3, 3, 64]), "               \
    "axes=[1, 2, 0, 3])\n"                                                  \
    "  kh = expand_dims(transpose(k, axes=[1, 2, 0]), axis=1)\n"            \
    "  vh = expand_dims(transpose(v, axes=[1, 0, 2]), axis=1)\n"            \
    "  output o = matmul(matmul(qh, kh), vh)\nend\n"

static void kernel_tests(const char **bk, int nbk)
{
    static const struct { const char *label, *text; int n; } g[] = {
        {"attention [3,3,T,64] @ [3,1,64,t] @ [3,1,t,64]",
         ATTENTION(5, 7), 2},
        {"a weight read transposed", HDR "  input x: f32[2, 5, 8]\n"
         "  input w: f32[6, 8]\n  output y = matmul(x, transpose(w))\nend\n",
         1},
        {"vector by batch", HDR "  input x: f64[8]\n  input w: f64[2, 8, 3]\n"
         "  output y = matmul(x, w)\nend\n", 1},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        for (int b = 0; b < nbk; b++) {
            kiln_err err = {0, ""};
            kiln_function *f = compile_kg_text(g[i].text, bk[b], NULL, &err);
            int n = f ? kiln_function_n_kernels(f) : -1;
            int dot = count_kernels_of_kind(f, KILN_KERNEL_DOT);
            int other = count_kernels_of_kind(f, KILN_KERNEL_ELEMWISE) +
                        count_kernels_of_kind(f, KILN_KERNEL_REDUCE) +
                        count_kernels_of_kind(f, KILN_KERNEL_LOOP);
            ok(f && dot == g[i].n && n == g[i].n && other == 0,
               "%s on %s: %d DOT kernel(s) and nothing else (kernels %d, "
               "dot %d, elementwise/reduce/loop %d)%s%s", g[i].label, bk[b],
               g[i].n, n, dot, other, f ? "" : ": ", f ? "" : err.message);
            kiln_function_free(f);
        }
}

/* ---- errors ------------------------------------------------------------- */

static void expect_error(const char *label, const char *text,
                         const char *want)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    kiln_function *f = g ? kiln_compile(g, NULL, &err) : NULL;
    ok(!f && strstr(err.message, want) != NULL, "%s: error names '%s' (%s)",
       label, want, err.message);
    kiln_function_free(f);
    kiln_graph_free(g);
}

static void error_tests(void)
{
    expect_error("batch axes that do not broadcast", HDR
                 "  input a: f64[2, 3, 4]\n  input b: f64[3, 4, 2]\n"
                 "  output c = matmul(a, b)\nend\n",
                 "matmul: shapes (2, 3, 4) and (3, 4, 2) do not match");
    expect_error("inner axes that differ", HDR
                 "  input a: f64[2, 3, 4]\n  input b: f64[5]\n"
                 "  output c = matmul(a, b)\nend\n",
                 "matmul: shapes (2, 3, 4) and (5) do not match");
    expect_error("dot of rank 3", HDR
                 "  input a: f64[2, 3, 4]\n  input b: f64[4, 2]\n"
                 "  output c = dot(a, b)\nend\n",
                 "matmul takes leading batch axes");
    /* symbolic dims: checked when called */
    kiln_err err = {0, ""};
    kiln_function *f = compile_kg_text(HDR "  input a: f64[B, 3, K]\n"
                                       "  input b: f64[C, K, 2]\n"
                                       "  output c = matmul(a, b)\nend\n",
                                       "interp", NULL, &err);
    double da[2 * 3 * 4] = {0}, db[3 * 4 * 2] = {0};
    kiln_tensor in[2] = {{KILN_F64, 3, {2, 3, 4}, da},
                         {KILN_F64, 3, {3, 4, 2}, db}};
    kiln_tensor out[1];
    int rc = f ? kiln_function_call(f, in, out, &err) : -1;
    ok(f && rc != 0 && strstr(err.message, "(2, 3, 4)") &&
       strstr(err.message, "(3, 4, 2)"),
       "symbolic batch axes that differ at the call: both shapes named (%s)",
       err.message);
    kiln_function_free(f);
}

/* ---- the runtime's gemm_batched on hand-made views --------------------- */

static void runtime_tests(void)
{
    const kiln_runtime *rt = kiln_runtime_get();
    ok(rt->version >= 6 && rt->gemm_batched != NULL,
       "the runtime table is version %u with gemm_batched", rt->version);
    /* a [2, 3, 4] read with the batch reversed, rows reversed and a
     * column step of 2 (from a [2, 3, 8] buffer); b [2, 4, 5] transposed
     * in storage; c [2, 3, 5] written with a column stride of 2 */
    enum { B = 2, M = 3, K = 4, N = 5 };
    static double abuf[B * M * 8], bbuf[B * N * K], cbuf[B * M * N * 2];
    for (int i = 0; i < B * M * 8; i++)
        abuf[i] = sin(1.0 + i);
    for (int i = 0; i < B * N * K; i++)
        bbuf[i] = cos(2.0 + 0.5 * i);
    for (int i = 0; i < B * M * N * 2; i++)
        cbuf[i] = NAN;
    kiln_view a = {abuf + (B - 1) * M * 8 + (M - 1) * 8, {B, M, K},
                   {-M * 8, -8, 2}, 3, KILN_F64};
    kiln_view b = {bbuf, {B, K, N}, {N * K, 1, K}, 3, KILN_F64};
    kiln_view c = {cbuf, {B, M, N}, {M * N * 2, N * 2, 2}, 3, KILN_F64};
    char why[300] = "";
    int rc = rt->gemm_batched(rt, &a, &b, &c, why, sizeof why);
    double worst = 0;
    for (int q = 0; q < B; q++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int p = 0; p < K; p++)
                    s += abuf[(B - 1 - q) * M * 8 + (M - 1 - i) * 8 + 2 * p] *
                         bbuf[q * N * K + j * K + p];
                worst = fmax(worst, fabs(cbuf[q * M * N * 2 + i * N * 2 +
                                              j * 2] - s));
            }
    int untouched = 1;
    for (int i = 1; i < B * M * N * 2; i += 2)
        untouched = untouched && isnan(cbuf[i]);
    ok(rc == 0 && worst < 1e-13 && untouched,
       "gemm_batched: negative strides, a column step, a transposed b and "
       "a strided c against a C loop (max error %.3g; rc %d %s)", worst, rc,
       why);
    /* f32 with b broadcast over the batch (stride 0) */
    static float fa[3 * 2 * 3], fb[3 * 4], fc[3 * 2 * 4];
    for (int i = 0; i < 18; i++)
        fa[i] = (float)(0.25 * i - 1);
    for (int i = 0; i < 12; i++)
        fb[i] = (float)(0.5 * i - 2);
    kiln_view va = {fa, {3, 2, 3}, {6, 3, 1}, 3, KILN_F32};
    kiln_view vb = {fb, {3, 3, 4}, {0, 4, 1}, 3, KILN_F32};
    kiln_view vc = {fc, {3, 2, 4}, {8, 4, 1}, 3, KILN_F32};
    rc = rt->gemm_batched(rt, &va, &vb, &vc, why, sizeof why);
    double fw = 0;
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int p = 0; p < 3; p++)
                    s += (double)fa[q * 6 + i * 3 + p] * fb[p * 4 + j];
                fw = fmax(fw, fabs(fc[q * 8 + i * 4 + j] - s));
            }
    ok(rc == 0 && fw < 1e-5, "gemm_batched f32, b broadcast over the batch "
       "(folded into one product): max error %.3g", fw);
    kiln_view bad = vb;
    bad.shape[1] = 5;
    rc = rt->gemm_batched(rt, &va, &bad, &vc, why, sizeof why);
    ok(rc == KILN_ERR_SHAPE && strstr(why, "[3,2,3] @ [3,5,4] -> [3,2,4]"),
       "gemm_batched: a shape mismatch names the three shapes (%s)", why);
    kiln_view r2 = va;
    r2.rank = 2;
    rc = rt->gemm_batched(rt, &r2, &vb, &vc, why, sizeof why);
    ok(rc == KILN_ERR_SHAPE && strstr(why, "one rank"),
       "gemm_batched: ranks that differ are refused (%s)", why);
}

/* ---- gradients -------------------------------------------------------- */

static const struct { const char *label, *text; } grads[] = {
    {"grad batch", HDR "  input a: f64[2, 3, 4]\n  input b: f64[2, 4, 5]\n"
     "  input w: f64[2, 3, 5]\n"
     "  output cost = sum(mul(w, matmul(a, b)))\nend\n"},
    {"grad broadcast batch", HDR "  input a: f64[1, 3, 2, 4]\n"
     "  input b: f64[4, 1, 4, 5]\n  input w: f64[4, 3, 2, 5]\n"
     "  output cost = sum(mul(w, matmul(a, b)))\nend\n"},
    {"grad 1-D operands", HDR "  input a: f64[4]\n  input b: f64[3, 4, 2]\n"
     "  input c: f64[2, 3, 4]\n  input w: f64[3, 2]\n  input u: f64[2, 3]\n"
     "  output cost = add(sum(mul(w, matmul(a, b))), "
     "sum(mul(u, matmul(c, a))))\nend\n"},
    {"grad rank mixes", HDR "  input a: f64[3, 2, 4]\n  input b: f64[4, 5]\n"
     "  input c: f64[3, 5, 2]\n  input w: f64[3, 2, 2]\n"
     "  output cost = sum(mul(w, matmul(matmul(a, b), c)))\nend\n"},
    {"grad transposed views", HDR "  input a: f64[2, 4, 3]\n"
     "  input b: f64[2, 5, 4]\n  input w: f64[2, 3, 5]\n"
     "  output cost = sum(mul(w, matmul(transpose(a, axes=[0, 2, 1]), "
     "transpose(b, axes=[0, 2, 1]))))\nend\n"},
    {"grad attention (GQA, softmax)", HDR "  input q: f64[3, 24]\n"
     "  input k: f64[5, 2, 4]\n  input v: f64[5, 2, 4]\n"
     "  input w: f64[2, 3, 3, 4]\n"
     "  qh = transpose(reshape(q, shape=[3, 2, 3, 4]), axes=[1, 2, 0, 3])\n"
     "  kh = expand_dims(transpose(k, axes=[1, 2, 0]), axis=1)\n"
     "  vh = expand_dims(transpose(v, axes=[1, 0, 2]), axis=1)\n"
     "  s = matmul(qh, kh)\n"
     "  e = exp(sub(s, max(s, axis=3, keepdims=true)))\n"
     "  p = true_div(e, sum(e, axis=3, keepdims=true))\n"
     "  output cost = sum(mul(w, matmul(p, vh)))\nend\n"},
};

int main(void)
{
    const char *bk[3];
    int nbk = found_backends(bk);
    runtime_tests();
    error_tests();
    kernel_tests(bk, nbk);
    graph_value_tests("matmul_cases.py", 30, bk, nbk, 0);
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
        for (int b = 0; b < nbk; b++) {
            char label[160];
            snprintf(label, sizeof label, "%s on %s", grads[i].label, bk[b]);
            gc_check_with(label, grads[i].text, 1e-6, bk[b], NULL);
        }
    return done_testing();
}
