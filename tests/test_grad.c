/*
 * test_grad.c — reverse-mode gradients: every differentiable op against
 * central finite differences (tests/gradcheck.h), with broadcasting, and
 * every error kiln_graph_grad documents.
 *
 * Each case is a small .kg graph whose `cost` is sum(sin(y)) of the op's
 * result y, so that the adjoint reaching the op is not uniform.
 */
#define _POSIX_C_SOURCE 200809L  /* setenv */
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "gradcheck.h"

typedef struct gcase {
    const char *label;
    const char *decls;   /* input lines (and # range lines) */
    const char *expr;    /* y = ... */
    double tol;
} gcase;

static const gcase cases[] = {
    /* elementwise, with broadcasting */
    {"add (3,1)+(4)", "input a: f64[3, 1]\n input b: f64[4]", "add(a, b)", 1e-6},
    {"add scalar+(2,3)", "input a: f64\n input b: f64[2, 3]", "add(a, b)", 1e-6},
    {"sub", "input a: f64[2, 3]\n input b: f64[3]", "sub(a, b)", 1e-6},
    {"mul (3,1)*(1,4)", "input a: f64[3, 1]\n input b: f64[1, 4]", "mul(a, b)", 1e-6},
    {"mul by literal", "input a: f64[5]", "mul(2.5, a)", 1e-6},
    {"true_div", "input a: f64[4]\n input b: f64[2, 4]\n# range b 0.5 2",
     "true_div(a, b)", 1e-6},
    {"neg", "input a: f64[3]", "neg(a)", 1e-6},
    {"abs", "input a: f64[6]", "abs(a)", 1e-6},
    {"exp", "input a: f64[3]", "exp(a)", 1e-6},
    {"expm1", "input a: f64[3]", "expm1(a)", 1e-6},
    {"log", "input a: f64[3]\n# range a 0.3 3", "log(a)", 1e-6},
    {"log1p", "input a: f64[3]\n# range a -0.5 3", "log1p(a)", 1e-6},
    {"sqrt", "input a: f64[3]\n# range a 0.3 3", "sqrt(a)", 1e-6},
    {"square", "input a: f64[3]", "square(a)", 1e-6},
    {"pow", "input a: f64[3]\n input b: f64[3]\n# range a 0.3 3",
     "pow(a, b)", 1e-6},
    {"pow by literal", "input a: f64[3]\n# range a 0.3 3", "pow(a, 2.5)", 1e-6},
    {"sigmoid", "input a: f64[4]", "sigmoid(a)", 1e-6},
    {"softplus", "input a: f64[4]", "softplus(a)", 1e-6},
    {"tanh", "input a: f64[4]", "tanh(a)", 1e-6},
    {"sin", "input a: f64[4]", "sin(a)", 1e-6},
    {"cos", "input a: f64[4]", "cos(a)", 1e-6},
    {"erf", "input a: f64[4]", "erf(a)", 1e-6},
    {"erfc", "input a: f64[4]", "erfc(a)", 1e-6},
    {"gammaln", "input a: f64[4]\n# range a 0.3 6", "gammaln(a)", 1e-6},
    {"digamma", "input a: f64[4]\n# range a 0.3 6", "digamma(a)", 1e-6},
    {"maximum", "input a: f64[2, 3]\n input b: f64[3]", "maximum(a, b)", 1e-6},
    {"minimum", "input a: f64[2, 3]\n input b: f64[3]", "minimum(a, b)", 1e-6},
    {"where", "input a: f64[2, 3]\n input b: f64[3]",
     "where(gt(a, 0.0), mul(a, 3.0), b)", 1e-6},
    {"cast f64->f64", "input a: f64[3]", "cast(a, dtype=f64)", 1e-6},
    {"cast through f32", "input a: f64[3]",
     "cast(mul(cast(a, dtype=f32), 2.0), dtype=f64)", 2e-2},  /* FD through f32 */
    {"fill", "input a: f64[2, 3]\n input b: f64", "mul(a, fill(a, b))", 1e-6},
    /* reductions */
    {"sum all", "input a: f64[2, 3]", "mul(sum(a), a)", 1e-6},
    {"sum axis 0", "input a: f64[2, 3, 2]", "sum(a, axis=0)", 1e-6},
    {"sum axis [0, 2] keepdims", "input a: f64[2, 3, 2]",
     "mul(sum(a, axis=[0, 2], keepdims=true), a)", 1e-6},
    {"prod", "input a: f64[2, 3]\n# range a 0.5 2", "prod(a, axis=1)", 1e-6},
    {"max", "input a: f64[2, 3]", "max(a, axis=-1)", 1e-6},
    {"min", "input a: f64[2, 3]", "min(a)", 1e-6},
    {"mean", "input a: f64[2, 3]", "mean(a, axis=0)", 1e-6},
    {"logsumexp", "input a: f64[2, 3]", "logsumexp(a, axis=1)", 1e-6},
    /* shape */
    {"reshape", "input a: f64[2, 3]", "mul(reshape(a, shape=[3, 2]), "
                                      "reshape(a, shape=[-1, 2]))", 1e-6},
    {"transpose", "input a: f64[2, 3]\n input b: f64[3, 2]",
     "mul(transpose(a), b)", 1e-6},
    {"transpose axes", "input a: f64[2, 3, 4]",
     "mul(transpose(a, axes=[1, 2, 0]), 1.5)", 1e-6},
    {"expand_dims", "input a: f64[3]\n input b: f64[2, 3]",
     "mul(expand_dims(a, axis=0), b)", 1e-6},
    {"squeeze", "input a: f64[3, 1]", "squeeze(a)", 1e-6},
    {"broadcast_to", "input a: f64[3]", "mul(broadcast_to(a, shape=[2, 3]), "
                                        "2.0)", 1e-6},
    {"alloc", "input a: f64", "alloc(a, shape=[2, 2])", 1e-6},
    {"join", "input a: f64[2]\n input b: f64[3]", "mul(join(0, a, b, a), "
                                                  "2.0)", 1e-6},
    {"join axis 1", "input a: f64[2, 1]\n input b: f64[2, 2]",
     "join(1, a, b)", 1e-6},
    {"stack", "input a: f64\n input b: f64", "mul(stack(a, b, a), 3.0)", 1e-6},
    /* indexing */
    {"subtensor", "input a: f64[4, 3]", "a[1:3, 0]", 1e-6},
    {"subtensor step", "input a: f64[6]", "a[::-2]", 1e-6},
    {"take with repeats", "input a: f64[4]\n const i: i64[5] = [0, 2, 2, -1, 0]",
     "a[i]", 1e-6},
    {"take axis 1", "input a: f64[2, 4]\n const i: i64[3] = [3, 1, 3]",
     "take(a, i, axis=1)", 1e-6},
    {"set_subtensor", "input a: f64[4]\n input v: f64[2]",
     "set_subtensor(a[1:3], v)", 1e-6},
    {"inc_subtensor broadcast", "input a: f64[3, 4]\n input v: f64",
     "inc_subtensor(a[:, 1], v)", 1e-6},
    {"advanced inc", "input a: f64[4]\n input v: f64[3]\n"
                     " const i: i64[3] = [1, 1, 3]",
     "inc_subtensor(a[i], v)", 1e-6},
    {"advanced set", "input a: f64[4]\n input v: f64[2]\n"
                     " const i: i64[2] = [0, 2]",
     "set_subtensor(a[i], v)", 1e-6},
    /* dot */
    {"dot 1x1", "input a: f64[3]\n input b: f64[3]", "dot(a, b)", 1e-6},
    {"dot 2x1", "input a: f64[2, 3]\n input b: f64[3]", "dot(a, b)", 1e-6},
    {"dot 1x2", "input a: f64[3]\n input b: f64[3, 2]", "dot(a, b)", 1e-6},
    {"dot 2x2", "input a: f64[2, 3]\n input b: f64[3, 4]", "matmul(a, b)", 1e-6},
    /* a model-like chain that reuses values (adjoints add up) */
    {"normal logpdf", "input mu: f64\n input log_s: f64\n input x: f64[5]",
     "sub(mul(-0.5, square(true_div(sub(x, mu), exp(log_s)))), log_s)", 1e-6},
};

static void test_errors(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(
        "kiln 1\ngraph e\n  input x: f64[3]\n  input k: i64\n"
        "  input u: f64\n  y = mul(x, 2.0)\n  c = sum(y)\n"
        "  kc = mul(cast(k, dtype=f64), c)\nend\n", "e.kg", NULL, &err);
    ok(g != NULL, "error graph parses %s", g ? "" : err.message);
    if (!g)
        return;
    kiln_value x = kiln_graph_lookup(g, "x"), k = kiln_graph_lookup(g, "k");
    kiln_value u = kiln_graph_lookup(g, "u"), y = kiln_graph_lookup(g, "y");
    kiln_value c = kiln_graph_lookup(g, "c"), out[2];
    ok(kiln_graph_grad(g, y, 1, &x, 0, out, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "grad: the cost must be a scalar, got shape (3)") ==
           0, "non-scalar cost: %s", err.message);
    ok(kiln_graph_grad(g, c, 1, &k, 0, out, &err) == KILN_ERR_TYPE &&
       strcmp(err.message, "grad: cannot differentiate with respect to 'k': "
                           "it has integer dtype i64") == 0,
       "integer wrt: %s", err.message);
    ok(kiln_graph_grad(g, c, 1, &y, 0, out, &err) == KILN_ERR_TYPE &&
       strcmp(err.message, "grad: 'y' is not an input or shared value") == 0,
       "wrt not an input: %s", err.message);
    ok(kiln_graph_grad(g, c, 1, &u, 0, out, &err) == KILN_ERR_TYPE &&
       strcmp(err.message, "grad: the cost does not depend on 'u'") == 0,
       "disconnected wrt is an error by default: %s", err.message);
    kiln_value w[2] = {x, u};
    ok(kiln_graph_grad(g, c, 2, w, KILN_GRAD_DISCONNECTED_ZERO, out, &err) ==
           0, "disconnected=zero %s", err.message);
    kiln_graph_output(g, "dx", out[0], &err);
    kiln_graph_output(g, "du", out[1], &err);
    kiln_function *f = kiln_compile(g, NULL, &err);
    ok(f != NULL, "compiles %s", f ? "" : err.message);
    if (f) {
        double xv[3] = {1, 2, 3}, uv = 7;
        int64_t kv = 2;
        kiln_tensor in[3] = {{KILN_F64, 1, {3}, xv}, {KILN_I64, 0, {0}, &kv},
                             {KILN_F64, 0, {0}, &uv}};
        kiln_tensor o[2];
        int rc = kiln_function_call(f, in, o, &err);
        const double *dx = rc ? NULL : o[0].data;
        ok(rc == 0 && dx[0] == 2 && dx[2] == 2 && *(double *)o[1].data == 0 &&
               o[1].rank == 0,
           "d sum(2x)/dx = 2 and the disconnected gradient is 0");
        kiln_function_free(f);
    }
    /* the gradient through an integer cast is zero (disconnected) */
    kiln_value kc = kiln_graph_lookup(g, "kc");
    ok(kiln_graph_grad(g, kc, 1, &x, 0, out, &err) == 0,
       "gradient through a product with an integer input %s", err.message);
    kiln_graph_free(g);
}

/* ---- advanced set/inc with repeated indices, every backend ---------- */

/* set keeps the last write of each entry, so only the last position
 * writing an entry (after negative entries count from the end) gets that
 * entry's adjoint; inc sums, so every position gets it.  Each index is
 * checked as a constant (the survivors are found when the gradient is
 * built) and as a computed tensor (`j = add(i, 0)`: found at run time). */
typedef struct rcase {
    const char *label;
    const char *decls;   /* inputs, and `const i: ...` */
    const char *expr;    /* y = ..., with the index named IDX */
} rcase;

static const rcase repeats[] = {
    /* the reported case: lp = sum(b*b) */
    {"set [1, 4, 1]", "input x: f64[5]\n input v: f64[3]\n"
                      " const i: i64[3] = [1, 4, 1]",
     "set_subtensor(x[IDX], v)"},
    {"set, negative entries repeat positive ones",
     "input x: f64[5]\n input v: f64[4]\n"
     " const i: i64[4] = [-1, 4, 1, -4]",
     "set_subtensor(x[IDX], v)"},
    {"set, every entry the same", "input x: f64[3]\n input v: f64[4]\n"
                                  " const i: i32[4] = [2, 2, -1, 2]",
     "set_subtensor(x[IDX], v)"},
    {"set axis 1", "input x: f64[2, 5]\n input v: f64[2, 4]\n"
                   " const i: i64[4] = [3, -2, 0, 3]",
     "set_subtensor(x[:, IDX], v)"},
    {"set axis 1, v broadcast", "input x: f64[3, 4, 2]\n input v: f64[3, 1]\n"
                                " const i: i64[3] = [1, 3, -3]",
     "set_subtensor(x[:, IDX], v)"},
    {"set rank-2 index", "input x: f64[4, 3]\n input v: f64[2, 2, 3]\n"
                         " const i: i64[2, 2] = [[0, 2], [2, -4]]",
     "set_subtensor(x[IDX], v)"},
    {"set rank-2 index axis 1", "input x: f64[2, 4, 3]\n"
                                " input v: f64[2, 2, 2, 3]\n"
                                " const i: i64[2, 2] = [[1, 1], [3, -3]]",
     "set_subtensor(x[:, IDX], v)"},
    {"set, no repeats", "input x: f64[5]\n input v: f64[3]\n"
                        " const i: i64[3] = [4, 0, 2]",
     "set_subtensor(x[IDX], v)"},
    {"inc [1, 4, 1]", "input x: f64[5]\n input v: f64[3]\n"
                      " const i: i64[3] = [1, 4, 1]",
     "inc_subtensor(x[IDX], v)"},
    {"inc axis 1", "input x: f64[2, 5]\n input v: f64[2, 4]\n"
                   " const i: i64[4] = [3, -2, 0, 3]",
     "inc_subtensor(x[:, IDX], v)"},
    {"inc rank-2 index", "input x: f64[4, 3]\n input v: f64[2, 2, 3]\n"
                         " const i: i64[2, 2] = [[0, 2], [2, -4]]",
     "inc_subtensor(x[IDX], v)"},
    /* basic slices name every entry once; a step and a negative step */
    {"set basic ::-2", "input x: f64[5, 2]\n input v: f64[3, 2]",
     "set_subtensor(x[::-2], v)"},
    {"set basic 1:4, v broadcast", "input x: f64[5, 3]\n input v: f64[3]",
     "set_subtensor(x[1:4], v)"},
};

/* .kg text parsed and compiled with `backend` */
static kiln_function *compile_on(const char *text, const char *backend,
                                 kiln_err *err)
{
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, err);
    setenv("KILN_BACKEND", backend, 1);
    kiln_function *f = g ? kiln_compile(g, NULL, err) : NULL;
    unsetenv("KILN_BACKEND");
    kiln_graph_free(g);
    return f;
}

/* every kernel of a probe compiled by `name` (no fallback) */
static int have_backend(const char *name)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_on(
        "kiln 1\ngraph p\n  input x: f64[2]\n  output y = exp(x)\nend\n",
        name, &err);
    int r = f && kiln_function_n_kernels(f) > 0 &&
            strcmp(kiln_function_kernel_backend(f, 0), name) == 0;
    kiln_function_free(f);
    return r;
}

/* s with every "IDX" replaced by idx */
static void subst(char *out, size_t size, const char *s, const char *idx)
{
    size_t n = 0;
    for (; *s && n + 1 < size; s++) {
        if (strncmp(s, "IDX", 3) == 0) {
            n += (size_t)snprintf(out + n, size - n, "%s", idx);
            s += 2;
        } else {
            out[n++] = *s;
        }
        if (n >= size)
            n = size - 1;
    }
    out[n] = 0;
}

static void test_repeats(const char *backend)
{
    char expr[256], text[4096], label[160];
    static const char *const costs[] = {"sum(mul(y, y))", "sum(sin(y))"};
    setenv("KILN_BACKEND", backend, 1);
    for (size_t i = 0; i < sizeof repeats / sizeof repeats[0]; i++) {
        int has_idx = strstr(repeats[i].expr, "IDX") != NULL;
        for (int computed = 0; computed < 1 + has_idx; computed++)
            for (int k = 0; k < 3; k++) {
                /* the third: the first cost with every rewrite pass off */
                if (k == 2)
                    setenv("KILN_PASSES", "none", 1);
                subst(expr, sizeof expr, repeats[i].expr,
                      computed ? "j" : "i");
                snprintf(text, sizeof text,
                         "kiln 1\ngraph t\n %s\n%s y = %s\n"
                         " output cost = %s\nend\n",
                         repeats[i].decls, computed ? " j = add(i, 0)\n" : "",
                         expr, costs[k % 2]);
                snprintf(label, sizeof label, "%s (%s, %s, %s%s)",
                         repeats[i].label, backend,
                         has_idx ? computed ? "index computed"
                                            : "index constant"
                                 : "basic",
                         costs[k % 2], k == 2 ? ", passes none" : "");
                gc_check(label, text, 1e-6);
                unsetenv("KILN_PASSES");
            }
    }
    unsetenv("KILN_BACKEND");
}

/* An index of symbolic shape: the positions are not a constant, so the
 * last writer cannot be told apart; entries written once keep their
 * adjoint, repeated ones get NaN (docs/ops.md, Limits). */
static void test_repeats_symbolic(const char *backend)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_on(
        "kiln 1\ngraph s\n  input x: f64[5]\n  input v: f64[n]\n"
        "  input i: i64[n]\n  b = set_subtensor(x[i], v)\n"
        "  lp = sum(mul(b, b))\n  d_x, d_v = grad(lp, x, v)\n"
        "  output d_x\n  output d_v\nend\n", backend, &err);
    ok(f != NULL, "symbolic index (%s): compiles %s", backend,
       f ? "" : err.message);
    if (!f)
        return;
    double x[5] = {1, 2, 3, 4, 5}, v[3] = {10, 20, 30};
    int64_t rep[3] = {1, -1, -4}, uniq[3] = {1, -1, 2};
    for (int r = 0; r < 2; r++) {
        kiln_tensor in[3] = {{KILN_F64, 1, {5}, x}, {KILN_F64, 1, {3}, v},
                             {KILN_I64, 1, {3}, r ? uniq : rep}};
        kiln_tensor o[2];
        int rc = kiln_function_call(f, in, o, &err);
        const double *dx = rc ? NULL : o[0].data, *dv = rc ? NULL : o[1].data;
        if (r == 0)
            ok(rc == 0 && isnan(dv[0]) && dv[1] == 40 && isnan(dv[2]) &&
                   dx[0] == 2 && dx[1] == 0 && dx[4] == 0,
               "symbolic index (%s), repeated entries: NaN there, 2*v at "
               "the others %s", backend, rc ? err.message : "");
        else
            ok(rc == 0 && dv[0] == 20 && dv[1] == 40 && dv[2] == 60 &&
                   dx[0] == 2 && dx[2] == 0 && dx[3] == 8,
               "symbolic index (%s), no repeats: exact %s", backend,
               rc ? err.message : "");
    }
    kiln_function_free(f);
}

/* A constant index with a negative entry on an axis of symbolic length:
 * the entries cannot be normalised when the gradient is built, so the
 * survivors are found at run time, along x's axis 1. */
static void test_repeats_symbolic_axis(const char *backend)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_on(
        "kiln 1\ngraph s\n  input x: f64[2, ?]\n  input v: f64[2, 3]\n"
        "  const i: i64[3] = [1, -4, 2]\n  b = set_subtensor(x[:, i], v)\n"
        "  lp = sum(mul(b, b))\n  d_x, d_v = grad(lp, x, v)\n"
        "  output d_x\n  output d_v\nend\n", backend, &err);
    double x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    double v[6] = {1, 2, 3, 4, 5, 6};
    kiln_tensor in[2] = {{KILN_F64, 2, {2, 5}, x}, {KILN_F64, 2, {2, 3}, v}};
    kiln_tensor o[2];
    int rc = f ? kiln_function_call(f, in, o, &err) : -1;
    const double *dx = rc ? NULL : o[0].data, *dv = rc ? NULL : o[1].data;
    static const double want_dx[10] = {2, 0, 0, 8, 10, 12, 0, 0, 18, 20};
    static const double want_dv[6] = {0, 4, 6, 0, 10, 12};
    ok(rc == 0 && memcmp(dx, want_dx, sizeof want_dx) == 0 &&
           memcmp(dv, want_dv, sizeof want_dv) == 0,
       "constant index [1, -4, 2] on a symbolic axis (%s): the last writers "
       "found at run time %s", backend, rc ? err.message : "");
    kiln_function_free(f);
}

int main(void)
{
    char text[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text,
                 "kiln 1\ngraph t\n %s\n y = %s\n output cost = sum(sin(y))\n"
                 "end\n", cases[i].decls, cases[i].expr);
        gc_check(cases[i].label, text, cases[i].tol);
    }
    test_errors();
    static const char *const backends[] = {"interp", "tcc", "llvm"};
    for (int b = 0; b < 3; b++) {
        if (!have_backend(backends[b])) {
            ok(1, "%s # SKIP not built", backends[b]);
            continue;
        }
        test_repeats(backends[b]);
        test_repeats_symbolic(backends[b]);
        test_repeats_symbolic_axis(backends[b]);
    }
    return done_testing();
}
