/*
 * test_layers_ops.c — issue 29's layer composites (docs/ops.md "Layers
 * (issue 29)"): values against NumPy / SciPy in f64 and f32 (cases from
 * tests/layers_cases.py, run at test time) under every backend built,
 * with the rewrite passes on and off, an f32 input giving f32 outputs;
 * gradients of every differentiable composite against central
 * differences (gradcheck.h) in f64; einsum lowered to a DOT kernel; and
 * the errors (axis out of range, a bad eps, a bad einsum spec naming its
 * position, unknown attributes, repeat/tile sizes past int64, argmax of an
 * empty axis); and the attack's inputs on every backend (tril of a const,
 * var with ddof >= N, gelu of large f32, argmax of an empty symbolic axis
 * failing its run-time check, also when another axis is 0; a non-empty
 * axis with another 0 gives an empty result, as NumPy).
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

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- gradients -------------------------------------------------------- */

#define HDR "kiln 1\ngraph t\n"
#define COST(decl, expr) \
    HDR decl "  output cost = sum(mul(w, " expr "))\nend\n"

static const struct { const char *label, *text; } grads[] = {
    {"softmax axis=-1", COST("  input x: f64[3, 5]\n  input w: f64[3, 5]\n",
                             "softmax(x)")},
    {"softmax axis=0", COST("  input x: f64[3, 5]\n  input w: f64[3, 5]\n",
                            "softmax(x, axis=0)")},
    {"log_softmax", COST("  input x: f64[2, 3, 4]\n  input w: f64[2, 3, 4]\n",
                         "log_softmax(x, axis=1)")},
    {"layer_norm", COST("  input x: f64[4, 6]\n  input g: f64[6]\n"
                        "  input b: f64[6]\n  input w: f64[4, 6]\n",
                        "layer_norm(x, g, b, eps=1e-3)")},
    {"rms_norm", COST("  input x: f64[3, 8]\n  input g: f64[8]\n"
                      "  input w: f64[3, 8]\n", "rms_norm(x, g)")},
    {"gelu", COST("  input x: f64[7]\n  input w: f64[7]\n# range x -4 4\n",
                  "add(gelu(x), gelu(x, approximate=\"tanh\"))")},
    {"silu", COST("  input x: f64[7]\n  input w: f64[7]\n# range x -4 4\n",
                  "silu(x)")},
    {"rsqrt", COST("  input x: f64[5]\n  input w: f64[5]\n# range x 0.5 4\n",
                   "rsqrt(x)")},
    {"var", COST("  input x: f64[3, 4, 5]\n  input w: f64[4]\n",
                 "add(var(x, axis=[0, 2], ddof=1), var(x, axis=[0, 2]))")},
    {"var all", HDR "  input x: f64[3, 4]\n"
     "  output cost = var(x, ddof=1)\nend\n"},
    {"tril triu k", COST("  input x: f64[2, 3, 4]\n  input w: f64[2, 3, 4]\n",
                         "add(tril(x, k=1), triu(x, k=-1))")},
    {"repeat tile", COST("  input x: f64[2, 3]\n  input w: f64[4, 3]\n",
                         "add(repeat(x, repeats=2, axis=0), "
                         "tile(x, reps=[2, 1]))")},
    {"einsum attention", COST("  input q: f64[1, 2, 3, 4]\n"
                              "  input k: f64[1, 2, 5, 4]\n"
                              "  input w: f64[1, 2, 3, 5]\n",
                              "einsum(q, k, spec=\"bhqd,bhkd->bhqk\")")},
    {"einsum grouped heads", COST("  input q: f64[2, 3, 2, 4]\n"
                                  "  input k: f64[2, 5, 4]\n"
                                  "  input w: f64[2, 3, 2, 5]\n",
                                  "einsum(q, k, spec=\"bhqd,bkd->bhqk\")")},
    {"einsum sum-only", COST("  input a: f64[3, 4, 2]\n  input b: f64[4, 5]\n"
                             "  input w: f64[5, 3]\n",
                             "einsum(a, b, spec=\"ijk,jl->li\")")},
    {"attention block", HDR "  input q: f64[2, 3, 4]\n  input k: f64[2, 3, 4]\n"
     "  input v: f64[2, 3, 4]\n  input w: f64[2, 3, 4]\n"
     "  s = mul(einsum(q, k, spec=\"hqd,hkd->hqk\"), 0.5)\n"
     "  m = where(tril(ones(shape=[3, 3]), k=0), s, -inf)\n"
     "  p = softmax(m)\n"
     "  output cost = sum(mul(w, einsum(p, v, spec=\"hqk,hkd->hqd\")))\n"
     "end\n"},
};

/* ---- errors ----------------------------------------------------------- */

static void build_error(const char *text, const char *want)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    ok(!g && strstr(err.message, want), "refused (want '%s'): %s", want,
       err.message);
    kiln_graph_free(g);
}

#define ERR1(decl, expr) HDR decl "  output y = " expr "\nend\n"
#define X34 "  input x: f64[3, 4]\n"

static void error_tests(void)
{
    build_error(ERR1(X34, "softmax(x, axis=2)"),
                "softmax: axis 2 is out of range for a tensor of rank 2");
    build_error(ERR1(X34, "log_softmax(x, axis=-3)"),
                "log_softmax: axis -3 is out of range");
    build_error(ERR1(X34 "  input w: f64[4]\n", "rms_norm(x, w, eps=true)"),
                "rms_norm: attribute 'eps' must be a number");
    build_error(ERR1(X34 "  input w: f64[4]\n", "rms_norm(x, w, eps=-1.0)"),
                "rms_norm: attribute 'eps' must be a finite number >= 0");
    build_error(ERR1(X34 "  input w: f64[4]\n",
                     "layer_norm(x, w, w, eps=\"x\")"),
                "layer_norm: attribute 'eps' must be a number");
    build_error(ERR1(X34, "softmax(x, axes=1)"),
                "softmax: unknown attribute 'axes' (takes axis)");
    build_error(ERR1(X34, "silu(x, axis=1)"), "silu: takes no attributes");
    build_error(ERR1(X34, "gelu(x, approximate=\"fast\")"),
                "gelu: approximate must be \"none\" or \"tanh\"");
    build_error(ERR1(X34 "  input i: i64[3]\n", "softmax(i)"),
                "softmax: x has dtype i64; expected a float");
    build_error(ERR1(X34, "var(x, axis=[0, 0])"), "var: axis 0 is repeated");
    build_error(ERR1(X34, "einsum(x, x, spec=\"ij,jk->i1\")"),
                "einsum: spec \"ij,jk->i1\" position 9: expected a letter");
    build_error(ERR1(X34, "einsum(x, x, spec=\"ij,kj->iz\")"),
                "einsum: spec \"ij,kj->iz\" position 9: output letter is in "
                "neither operand");
    build_error(ERR1(X34, "einsum(x, x, spec=\"ii,jk->ik\")"),
                "position 2: letter repeated in one operand");
    build_error(ERR1(X34, "einsum(x, x, spec=\"ij,jk,kl->il\")"),
                "position 6: einsum takes two operands");
    build_error(ERR1(X34, "einsum(x, x, spec=\"...j,jk->k\")"),
                "position 1: '...' is not supported");
    build_error(ERR1(X34, "einsum(x, x, spec=\"ijk,jk->i\")"),
                "operand 1 (a) has 3 letters but shape (3, 4)");
    build_error(ERR1(X34, "einsum(x, x, spec=\"ij,jk->ik\")"),
                "letter 'j' is 4 in a but 3 in b");
    build_error(ERR1(X34, "einsum(x, x)"),
                "einsum: attribute 'spec' (\"ab,bc->ac\") is required");
    build_error(ERR1(X34, "tril(x, k=1.5)"),
                "tril: attribute 'k' must be an integer");
    build_error(ERR1(X34, "triu(x, j=1)"), "triu: unknown attribute 'j'");
    build_error(ERR1("  input v: f32[4]\n", "tril(v, k=1)"),
                "tril: a must have rank >= 2, got rank 1");
    build_error(ERR1(X34, "arange(x)"), "arange: n must be a non-negative "
                "integer literal");
    build_error(ERR1(X34, "argmax(x, axis=5)"),
                "argmax: axis 5 is out of range");
    build_error(ERR1(X34, "repeat(x, axis=0)"),
                "repeat: attribute 'repeats' is required");
    build_error(ERR1(X34, "tile(x, reps=[2, -1])"),
                "tile: reps entry 1 is -1");
    /* sizes whose product does not fit in int64 are refused, not wrapped
     * (3 x 3074457345618258603 > 2^63 - 1) */
    build_error(ERR1("  const x: f64[3] = [1, 2, 3]\n",
                     "repeat(x, repeats=3074457345618258603)"),
                "repeat: the result would have 3 x 3074457345618258603 "
                "elements (more than 2^63 - 1)");
    build_error(ERR1("  const x: f64[3] = [1, 2, 3]\n",
                     "tile(x, reps=[3074457345618258603])"),
                "tile: the result would have 3 x 3074457345618258603 "
                "elements (more than 2^63 - 1)");
    build_error(ERR1(X34, "repeat(x, repeats=768614336404564651, axis=0)"),
                "repeat: the result would have 3 x 4 x 768614336404564651");
    /* NumPy: "attempt to get argmax of an empty sequence" */
    build_error(ERR1("  input e: f64[3, 0]\n", "argmax(e)"),
                "argmax: attempt to get argmax of an empty sequence "
                "(axis 1 has size 0)");
    build_error(ERR1("  input e: f64[0]\n", "argmin(e, axis=0)"),
                "argmin: attempt to get argmin of an empty sequence");
}

/* One graph on one backend: in (f64 or f32 per the graph; shape (rows,
 * cols), or (cols) with rows -1, no input with both -1) gives want[] for
 * output 0 (NaN matches NaN, inf matches inf), or the call fails with a
 * message holding `fail`. */
static void value_case_2d(const char *label, const char *text,
                          const char *bk, kiln_dtype dt, int64_t rows,
                          int64_t cols, const double *in, int64_t n_out,
                          const double *want, const char *fail)
{
    int64_t n_in = rows >= 0 ? rows * cols : cols;
    kiln_err err = {0, ""};
    kiln_function *f = compile_kg_text(text, bk, NULL, &err);
    if (!f) {
        ok(0, "%s on %s: %s", label, bk, err.message);
        return;
    }
    float inf32[8];
    for (int64_t i = 0; i < n_in && i < 8; i++)
        inf32[i] = (float)in[i];
    double dummy = 0;
    kiln_tensor x = {.data = n_in ? (dt == KILN_F32 ? (void *)inf32
                                                    : (void *)in)
                                  : (void *)&dummy,
                     .dtype = dt, .rank = 1, .shape = {n_in}};
    if (rows >= 0) {
        x.rank = 2;
        x.shape[0] = rows;
        x.shape[1] = cols;
    }
    kiln_tensor out[2];
    int rc = kiln_function_call(f, n_in >= 0 ? &x : NULL, out, &err);
    if (fail) {
        ok(rc != 0 && strstr(err.message, fail), "%s on %s: refused at run "
           "time: %s", label, bk, rc ? err.message : "(passed)");
        kiln_function_free(f);
        return;
    }
    int good = rc == 0 && out[0].rank <= 2;
    int64_t m = 1;
    for (int i = 0; good && i < out[0].rank; i++)
        m *= out[0].shape[i];
    good = good && m == n_out;
    for (int64_t i = 0; good && i < n_out; i++) {
        double v = out[0].dtype == KILN_F32 ? ((float *)out[0].data)[i]
                   : out[0].dtype == KILN_I64
                       ? (double)((int64_t *)out[0].data)[i]
                       : ((double *)out[0].data)[i];
        double w = want[i];
        good = (isnan(w) && isnan(v)) || v == w ||
               (isfinite(w) && fabs(v - w) <= 1e-6 * fmax(1, fabs(w)));
        if (!good)
            diag("%s: element %lld is %.17g, want %.17g", label,
                 (long long)i, v, w);
    }
    ok(good, "%s on %s%s%s", label, bk, rc ? ": " : "", rc ? err.message : "");
    kiln_function_free(f);
}

/* value_case_2d of a rank-1 input of n_in elements (-1: none) */
static void value_case(const char *label, const char *text, const char *bk,
                       kiln_dtype dt, int64_t n_in, const double *in,
                       int64_t n_out, const double *want, const char *fail)
{
    value_case_2d(label, text, bk, dt, -1, n_in, in, n_out, want, fail);
}

/* the attack's inputs (fix29-ops): tril/triu of a const (the pushes once
 * moved the node array under a held pointer), var with ddof >= N (NumPy
 * divides by max(N - ddof, 0)), gelu of large f32 (finite: exact is x),
 * argmax of an empty symbolic axis (a run-time check) */
static void attack_values(const char **bk, int nbk)
{
    static const double tril_k1[] = {1, 2, 3, 4}, tril_f32[] = {1, 0, 3, 4},
                        triu_k1[] = {0, 2, 0, 0};
    static const double x3[] = {1, 2, 3}, same[] = {2, 2, 2};
    static const double var_inf[] = {INFINITY}, var_nan[] = {NAN};
    static const double big[] = {3e38, 2e38, -3e38};
    double gbig[3];
    for (int i = 0; i < 3; i++)   /* x Phi(x): Phi = 1 (or 0 at -3e38) */
        gbig[i] = big[i] > 0 ? (double)(float)big[i] : 0.0;
    for (int b = 0; b < nbk; b++) {
        value_case("tril(x, k=1) of a const f64[2, 2]",
                   HDR "  const x: f64[2,2] = [[1,2],[3,4]]\n"
                       "  output a = tril(x, k=1)\nend\n",
                   bk[b], KILN_F64, -1, NULL, 4, tril_k1, NULL);
        value_case("tril(x) of a const f32[2, 2]",
                   HDR "  const x: f32[2,2] = [[1,2],[3,4]]\n"
                       "  output a = tril(x)\nend\n",
                   bk[b], KILN_F32, -1, NULL, 4, tril_f32, NULL);
        value_case("triu(x, k=1) of a const i64[2, 2]",
                   HDR "  const x: i64[2,2] = [[1,2],[3,4]]\n"
                       "  output a = triu(x, k=1)\nend\n",
                   bk[b], KILN_F64, -1, NULL, 4, triu_k1, NULL);
        value_case("var(x, ddof=3) of 3 elements = inf",
                   HDR "  input x: f64[3]\n  output y = var(x, ddof=3)\nend\n",
                   bk[b], KILN_F64, 3, x3, 1, var_inf, NULL);
        value_case("var(x, ddof=5) of 3 elements = inf (not -1)",
                   HDR "  input x: f64[3]\n  output y = var(x, ddof=5)\nend\n",
                   bk[b], KILN_F64, 3, x3, 1, var_inf, NULL);
        value_case("var(x, ddof=5) of 3 equal elements = nan",
                   HDR "  input x: f64[3]\n  output y = var(x, ddof=5)\nend\n",
                   bk[b], KILN_F64, 3, same, 1, var_nan, NULL);
        value_case("gelu(x) of large f32 stays finite",
                   HDR "  input x: f32[3]\n  output y = gelu(x)\nend\n",
                   bk[b], KILN_F32, 3, big, 3, gbig, NULL);
        value_case("gelu(x, approximate=\"tanh\") of large f32",
                   HDR "  input x: f32[3]\n"
                       "  output y = gelu(x, approximate=\"tanh\")\nend\n",
                   bk[b], KILN_F32, 3, big, 3, gbig, NULL);
        value_case("argmax(x) of f64[n], n = 3",
                   HDR "  input x: f64[n]\n  output a = argmax(x)\nend\n",
                   bk[b], KILN_F64, 3, x3, 1, (const double[]){2}, NULL);
        value_case("argmin(x) of f64[n], n = 0",
                   HDR "  input x: f64[n]\n  output a = argmin(x)\nend\n",
                   bk[b], KILN_F64, 0, NULL, 0, NULL,
                   "check failed: attempt to get argmin of an empty sequence");
        value_case("argmax(x) of f64[n], n = 0",
                   HDR "  input x: f64[n]\n  output a = argmax(x)\nend\n",
                   bk[b], KILN_F64, 0, NULL, 0, NULL,
                   "check failed: attempt to get argmax of an empty sequence");
        /* an empty symbolic axis with another axis 0: NumPy raises
         * (np.argmax(np.zeros((0, 0)), axis=1)); the check once looked at
         * an empty tensor and passed */
        value_case_2d("argmax(x, axis=1) of f64[m, n], m = n = 0",
                      HDR "  input x: f64[m, n]\n"
                          "  output a = argmax(x, axis=1)\nend\n",
                      bk[b], KILN_F64, 0, 0, NULL, 0, NULL,
                      "check failed: attempt to get argmax of an empty "
                      "sequence");
        value_case_2d("argmin(x, axis=0) of f64[m, n], m = n = 0",
                      HDR "  input x: f64[m, n]\n"
                          "  output a = argmin(x, axis=0)\nend\n",
                      bk[b], KILN_F64, 0, 0, NULL, 0, NULL,
                      "check failed: attempt to get argmin of an empty "
                      "sequence");
        value_case_2d("argmax(x, axis=1) of f64[0, n], n = 0",
                      HDR "  input x: f64[0, n]\n"
                          "  output a = argmax(x, axis=1)\nend\n",
                      bk[b], KILN_F64, 0, 0, NULL, 0, NULL,
                      "check failed: attempt to get argmax of an empty "
                      "sequence");
        value_case_2d("argmax(x, axis=1) of f64[m, n], m = 2, n = 0",
                      HDR "  input x: f64[m, n]\n"
                          "  output a = argmax(x, axis=1)\nend\n",
                      bk[b], KILN_F64, 2, 0, NULL, 0, NULL,
                      "check failed: attempt to get argmax of an empty "
                      "sequence");
        /* the reduced axis not empty, another 0: an empty result, as
         * np.argmax(np.zeros((0, 3)), axis=1) (shape (0,)) */
        value_case_2d("argmax(x, axis=1) of f64[m, n], m = 0, n = 3",
                      HDR "  input x: f64[m, n]\n"
                          "  output a = argmax(x, axis=1)\nend\n",
                      bk[b], KILN_F64, 0, 3, NULL, 0, NULL, NULL);
        value_case_2d("argmax(x, axis=1) of f64[m, n], m = 2, n = 3",
                      HDR "  input x: f64[m, n]\n"
                          "  output a = argmax(x, axis=1)\nend\n",
                      bk[b], KILN_F64, 2, 3, (const double[]){1, 5, 2, 7, 7, 0},
                      2, (const double[]){1, 0}, NULL);
    }
}

/* einsum's contraction is one DOT kernel, not an elementwise product and
 * a sum */
static void dot_test(const char **bk, int nbk)
{
    for (int b = 0; b < nbk; b++) {
        kiln_err err = {0, ""};
        kiln_function *f = compile_kg_text(
            HDR "  input a: f32[6, 5]\n  input b: f32[7, 5]\n"
                "  output y = einsum(a, b, spec=\"ik,jk->ij\")\nend\n",
            bk[b], NULL, &err);
        int nd = count_kernels_of_kind(f, KILN_KERNEL_DOT);
        ok(f && nd == 1, "einsum ik,jk->ij on %s: %d DOT kernel%s%s",
           bk[b], nd, f ? "" : ": ", f ? "" : err.message);
        kiln_function_free(f);
    }
}

/* reshape with several symbolic dims differentiates: d cost / d x of
 * cost = sum(w * sin(reshape(x', [-1]))) against central differences, x'
 * x itself (two `?` dims, sized by the input) or a slice x[1:, 1:] of
 * x: f64[T, S] (two anonymous dims sized when the slice is computed) */
static void reshape_grad_test(const char *label, const char *decl,
                              const char *xp, int64_t rows, int64_t cols,
                              const char *backend, const char *passes)
{
    char text[1024];
    snprintf(text, sizeof text, HDR "%s  input w: f64[?]\n"
             "  y = reshape(%s, shape=[-1])\n"
             "  output cost = sum(mul(w, sin(y)))\nend\n", decl, xp);
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    kiln_value wrt = g ? kiln_graph_lookup(g, "x") : -1, d = -1;
    int rc = !g || kiln_graph_grad(g, kiln_graph_lookup(g, "cost"), 1, &wrt,
                                   0, &d, &err) ||
             kiln_graph_output(g, "d_x", d, &err);
    kiln_function *f = rc ? NULL : compile_kg_graph(g, backend, passes, &err);
    kiln_graph_free(g);
    if (!f) {
        ok(0, "%s on %s: %s", label, backend, err.message);
        return;
    }
    int64_t n = rows * cols, nw = strstr(xp, "[") ? (rows - 1) * (cols - 1)
                                                   : n;
    double x[64], w[64], worst_e = 0;
    for (int64_t i = 0; i < n; i++)
        x[i] = gc_uniform(-2, 2);
    for (int64_t i = 0; i < nw; i++)
        w[i] = gc_uniform(-2, 2);
    kiln_tensor in[2] = {
        {.data = x, .dtype = KILN_F64, .rank = 2, .shape = {rows, cols}},
        {.data = w, .dtype = KILN_F64, .rank = 1, .shape = {nw}}};
    kiln_tensor out[2];
    double grad[64];
    int good = kiln_function_call(f, in, out, &err) == 0 &&
               out[1].rank == 2 && out[1].shape[0] == rows &&
               out[1].shape[1] == cols;
    if (good)
        memcpy(grad, out[1].data, sizeof(double) * (size_t)n);
    for (int64_t i = 0; good && i < n; i++) {
        double x0 = x[i], h = 1e-6, c[2];
        for (int s = 0; s < 2 && good; s++) {
            x[i] = x0 + (s ? -h : h);
            good = kiln_function_call(f, in, out, &err) == 0;
            c[s] = good ? *(double *)out[0].data : 0;
        }
        x[i] = x0;
        worst_e = fmax(worst_e, fabs(grad[i] - (c[0] - c[1]) / (2 * h)));
    }
    ok(good && worst_e < 1e-7, "%s on %s passes=%s: gradient against "
       "differences (worst %.2g)%s%s", label, backend,
       passes ? passes : "default", worst_e, good ? "" : ": ", good ? "" :
       err.message);
    kiln_function_free(f);
}

int main(void)
{
    const char *bk[3];
    int nbk = found_backends(bk);
    graph_value_tests("layers_cases.py", 60, bk, nbk, 1);
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++) {
        gc_check(grads[i].label, grads[i].text, 1e-5);
        gc_check_with(grads[i].label, grads[i].text, 1e-5, "interp",
                      "none");
    }
    for (int b = 0; b < nbk; b++)
        for (int p = 0; p < 2; p++) {
            const char *ps = p ? "none" : NULL;
            reshape_grad_test("reshape of x: f64[?, ?]",
                              "  input x: f64[?, ?]\n", "x", 3, 4, bk[b], ps);
            reshape_grad_test("reshape of a slice x[1:, 1:] of f64[T, S]",
                              "  input x: f64[T, S]\n", "x[1:, 1:]", 4, 5,
                              bk[b], ps);
        }
    error_tests();
    attack_values(bk, nbk);
    dot_test(bk, nbk);
    return done_testing();
}
