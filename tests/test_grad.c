/*
 * test_grad.c — reverse-mode gradients: every differentiable op against
 * central finite differences (tests/gradcheck.h), with broadcasting, and
 * every error kiln_graph_grad documents.
 *
 * Each case is a small .kg graph whose `cost` is sum(sin(y)) of the op's
 * result y, so that the adjoint reaching the op is not uniform.
 */
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <stdio.h>
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
    return done_testing();
}
