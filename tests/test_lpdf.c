/*
 * test_lpdf.c — the composite ops of core/ir/composite.c (Stan's log
 * densities and their helpers; docs/ops.md, "Composite ops"):
 *
 *  - values against scipy.stats at many points, tails included: the cases
 *    and reference values come from tests/lpdf_cases.py, run at test time
 *    with /usr/bin/python3 (SKIP without scipy); each case runs under every
 *    backend found, with the rewrite passes on, and on interp with none;
 *    the tolerances are explained in lpdf_cases.py;
 *  - gradients against central finite differences (tests/gradcheck.h);
 *  - build-time errors (arity, dtypes, attributes), a failed expansion
 *    leaving the graph as it was, no composite shadowing a primitive, and
 *    the canonical text holding no composite call.
 */
#define _POSIX_C_SOURCE 200809L
#include "tap.h"
#include "found_backends.h"
#include "gradcheck.h"

#include "composite.h"
#include "ir.h"

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scipy_cases.h"


/* ---- gradients ------------------------------------------------------ */

#define HDR "kiln 1\ngraph t\n"
static const struct { const char *label, *text; } grads[] = {
    { "normal_lpdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64[3]\n# range s 0.5 3\n"
      "  output cost = normal_lpdf(y, mu, s)\nend\n" },
    { "normal_lcdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range s 0.5 3\n"
      "  output cost = normal_lcdf(y, mu, s)\nend\n" },
    { "normal_lccdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range s 0.5 3\n"
      "  output cost = normal_lccdf(y, mu, s)\nend\n" },
    { "student_t_lpdf", HDR "  input y: f64[3]\n  input nu: f64\n"
      "  input mu: f64\n  input s: f64\n# range nu 0.5 30\n# range s 0.5 3\n"
      "  output cost = student_t_lpdf(y, nu, mu, s)\nend\n" },
    { "cauchy_lpdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range s 0.5 3\n"
      "  output cost = cauchy_lpdf(y, mu, s)\nend\n" },
    { "double_exponential_lpdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range s 0.5 3\n"
      "  output cost = double_exponential_lpdf(y, mu, s)\nend\n" },
    { "logistic_lpdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range s 0.5 3\n"
      "  output cost = logistic_lpdf(y, mu, s)\nend\n" },
    { "lognormal_lpdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range y 0.1 5\n# range s 0.5 3\n"
      "  output cost = lognormal_lpdf(y, mu, s)\nend\n" },
    { "gamma_lpdf", HDR "  input y: f64[3]\n  input a: f64\n"
      "  input b: f64\n# range y 0.1 5\n# range a 0.5 5\n# range b 0.5 3\n"
      "  output cost = gamma_lpdf(y, a, b)\nend\n" },
    { "inv_gamma_lpdf", HDR "  input y: f64[3]\n  input a: f64\n"
      "  input b: f64\n# range y 0.1 5\n# range a 0.5 5\n# range b 0.5 3\n"
      "  output cost = inv_gamma_lpdf(y, a, b)\nend\n" },
    { "exponential_lpdf", HDR "  input y: f64[3]\n  input b: f64\n"
      "# range y 0.1 5\n# range b 0.5 3\n"
      "  output cost = exponential_lpdf(y, b)\nend\n" },
    { "weibull_lpdf", HDR "  input y: f64[3]\n  input a: f64\n"
      "  input s: f64\n# range y 0.1 5\n# range a 0.5 5\n# range s 0.5 3\n"
      "  output cost = weibull_lpdf(y, a, s)\nend\n" },
    { "beta_lpdf", HDR "  input t: f64[3]\n  input a: f64\n"
      "  input b: f64\n# range t 0.05 0.95\n# range a 0.5 5\n"
      "# range b 0.5 5\n"
      "  output cost = beta_lpdf(t, a, b)\nend\n" },
    { "uniform_lpdf", HDR "  input y: f64[3]\n  input lo: f64\n"
      "  input hi: f64\n# range y -0.5 0.5\n# range lo -3 -1\n"
      "# range hi 1 3\n"
      "  output cost = uniform_lpdf(y, lo, hi)\nend\n" },
    { "bernoulli_lpmf", HDR "  const n: i64[4] = [0, 1, 1, 0]\n"
      "  input t: f64[4]\n# range t 0.05 0.95\n"
      "  output cost = bernoulli_lpmf(n, t)\nend\n" },
    { "bernoulli_logit_lpmf", HDR "  const n: i64[4] = [0, 1, 1, 0]\n"
      "  input a: f64[4]\n# range a -5 5\n"
      "  output cost = bernoulli_logit_lpmf(n, a)\nend\n" },
    { "binomial_lpmf", HDR "  const n: i64[3] = [0, 3, 7]\n"
      "  const N: i64[3] = [5, 9, 7]\n  input t: f64\n# range t 0.05 0.95\n"
      "  output cost = binomial_lpmf(n, N, t)\nend\n" },
    { "binomial_logit_lpmf", HDR "  const n: i64[3] = [0, 3, 7]\n"
      "  const N: i64[3] = [5, 9, 7]\n  input a: f64[3]\n# range a -4 4\n"
      "  output cost = binomial_logit_lpmf(n, N, a)\nend\n" },
    { "poisson_lpmf", HDR "  const n: i64[3] = [0, 3, 40]\n"
      "  input l: f64[3]\n# range l 0.1 30\n"
      "  output cost = poisson_lpmf(n, l)\nend\n" },
    { "poisson_log_lpmf", HDR "  const n: i64[3] = [0, 3, 40]\n"
      "  input a: f64[3]\n# range a -3 3\n"
      "  output cost = poisson_log_lpmf(n, a)\nend\n" },
    { "neg_binomial_2_lpmf", HDR "  const n: i64[3] = [0, 3, 40]\n"
      "  input mu: f64[3]\n  input phi: f64\n# range mu 0.1 30\n"
      "# range phi 0.2 20\n"
      "  output cost = neg_binomial_2_lpmf(n, mu, phi)\nend\n" },
    { "neg_binomial_2_log_lpmf", HDR "  const n: i64[3] = [0, 3, 40]\n"
      "  input eta: f64[3]\n  input phi: f64\n# range eta -2 3\n"
      "# range phi 0.2 20\n"
      "  output cost = neg_binomial_2_log_lpmf(n, eta, phi)\nend\n" },
    { "categorical_logit_lpmf", HDR "  const y: i64[5] = [0, 2, 2, 3, 1]\n"
      "  input b: f64[4]\n"
      "  output cost = categorical_logit_lpmf(y, b)\nend\n" },
    { "inv_logit", HDR "  input x: f64[4]\n# range x -6 6\n"
      "  output cost = sum(inv_logit(x))\nend\n" },
    { "log_inv_logit", HDR "  input x: f64[4]\n# range x -6 6\n"
      "  output cost = sum(log_inv_logit(x))\nend\n" },
    { "log1m_inv_logit", HDR "  input x: f64[4]\n# range x -6 6\n"
      "  output cost = sum(log1m_inv_logit(x))\nend\n" },
    { "log1p_exp", HDR "  input x: f64[4]\n# range x -6 6\n"
      "  output cost = sum(log1p_exp(x))\nend\n" },
    { "log_sum_exp", HDR "  input a: f64[4]\n  input b: f64[4]\n"
      "# range a -5 5\n# range b -5 5\n"
      "  output cost = sum(log_sum_exp(a, b))\nend\n" },
    { "log_mix", HDR "  input t: f64[3]\n  input l1: f64[3]\n"
      "  input l2: f64\n# range t 0.05 0.95\n"
      "  output cost = sum(log_mix(t, l1, l2))\nend\n" },
    { "lbeta", HDR "  input a: f64[3]\n  input b: f64[3]\n"
      "# range a 0.2 8\n# range b 0.2 8\n"
      "  output cost = sum(lbeta(a, b))\nend\n" },
    { "lchoose", HDR "  input n: f64[3]\n  input k: f64[3]\n"
      "# range n 8 12\n# range k 0.5 6\n"
      "  output cost = sum(lchoose(n, k))\nend\n" },
    /* issue 28 */
    { "normal_lcdf (far tail)", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range y -90 -45\n# range s 0.9 1.1\n"
      "  output cost = normal_lcdf(y, mu, s)\nend\n" },
    { "normal_lccdf (far tail)", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range y 45 90\n# range s 0.9 1.1\n"
      "  output cost = normal_lccdf(y, mu, s)\nend\n" },
    { "dirichlet_lpdf", HDR "  input t: f64[3]\n  input a: f64[3]\n"
      "# range t 0.1 0.9\n# range a 0.5 5\n"
      "  output cost = dirichlet_lpdf(t, a)\nend\n" },
    { "ordered_logistic_lpmf", HDR "  const y: i64[7] = [0, 1, 2, 3, 3, 1, 2]\n"
      "  input eta: f64[7]\n  input d: f64[3]\n# range eta -3 3\n"
      "# range d 0.5 2\n  c = sub(cumsum(d, axis=0), 2.5)\n"
      "  output cost = ordered_logistic_lpmf(y, eta, c)\nend\n" },
    { "beta_binomial_lpmf", HDR "  const n: i64[3] = [0, 3, 7]\n"
      "  const N: i64[3] = [5, 9, 7]\n  input a: f64\n  input b: f64[3]\n"
      "# range a 0.5 5\n# range b 0.5 5\n"
      "  output cost = beta_binomial_lpmf(n, N, a, b)\nend\n" },
    { "von_mises_lpdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input k: f64[3]\n# range y -3 3\n# range k 0.05 40\n"
      "  output cost = von_mises_lpdf(y, mu, k)\nend\n" },
    { "skew_normal_lpdf", HDR "  input y: f64[4]\n  input xi: f64\n"
      "  input om: f64\n  input al: f64[4]\n# range y -4 4\n"
      "# range om 0.5 3\n# range al -6 6\n"
      "  output cost = skew_normal_lpdf(y, xi, om, al)\nend\n" },
    { "categorical_lpmf", HDR "  const y: i64[5] = [0, 2, 2, 1, 0]\n"
      "  input t: f64[3]\n# range t 0.1 0.9\n"
      "  output cost = categorical_lpmf(y, t)\nend\n" },
    { "multinomial_lpmf", HDR "  const y: i64[3] = [3, 0, 5]\n"
      "  input t: f64[3]\n# range t 0.1 0.9\n"
      "  output cost = multinomial_lpmf(y, t)\nend\n" },
    { "exp_mod_normal_lpdf", HDR "  input y: f64[4]\n  input mu: f64\n"
      "  input s: f64\n  input l: f64[4]\n# range y -3 6\n"
      "# range s 0.5 3\n# range l 0.2 8\n"
      "  output cost = exp_mod_normal_lpdf(y, mu, s, l)\nend\n" },
    { "gumbel_lpdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input b: f64\n# range y -3 5\n# range b 0.5 3\n"
      "  output cost = gumbel_lpdf(y, mu, b)\nend\n" },
    { "pareto_lpdf", HDR "  input y: f64[3]\n  input m: f64\n"
      "  input a: f64\n# range y 2 5\n# range m 0.5 1.5\n# range a 0.5 5\n"
      "  output cost = pareto_lpdf(y, m, a)\nend\n" },
    { "rayleigh_lpdf", HDR "  input y: f64[3]\n  input s: f64\n"
      "# range y 0.1 5\n# range s 0.5 3\n"
      "  output cost = rayleigh_lpdf(y, s)\nend\n" },
    { "lognormal_lcdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range y 0.1 5\n# range s 0.5 3\n"
      "  output cost = lognormal_lcdf(y, mu, s)\nend\n" },
    { "lognormal_lccdf", HDR "  input y: f64[3]\n  input mu: f64\n"
      "  input s: f64\n# range y 0.1 5\n# range s 0.5 3\n"
      "  output cost = lognormal_lccdf(y, mu, s)\nend\n" },
    { "exponential_lcdf", HDR "  input y: f64[3]\n  input b: f64\n"
      "# range y 0.1 5\n# range b 0.5 3\n"
      "  output cost = exponential_lcdf(y, b)\nend\n" },
    { "exponential_lccdf", HDR "  input y: f64[3]\n  input b: f64\n"
      "# range y 0.1 5\n# range b 0.5 3\n"
      "  output cost = exponential_lccdf(y, b)\nend\n" },
    { "gamma_lcdf", HDR "  input y: f64[3]\n  input a: f64\n"
      "  input b: f64\n# range y 0.1 5\n# range a 0.5 5\n# range b 0.5 3\n"
      "  output cost = gamma_lcdf(y, a, b)\nend\n" },
    { "gamma_lccdf", HDR "  input y: f64[3]\n  input a: f64\n"
      "  input b: f64\n# range y 0.1 5\n# range a 0.5 5\n# range b 0.5 3\n"
      "  output cost = gamma_lccdf(y, a, b)\nend\n" },
    { "beta_lcdf", HDR "  input t: f64[3]\n  input a: f64\n"
      "  input b: f64\n# range t 0.05 0.95\n# range a 0.5 5\n"
      "# range b 0.5 5\n"
      "  output cost = beta_lcdf(t, a, b)\nend\n" },
    { "beta_lccdf", HDR "  input t: f64[3]\n  input a: f64\n"
      "  input b: f64\n# range t 0.05 0.95\n# range a 0.5 5\n"
      "# range b 0.5 5\n"
      "  output cost = beta_lccdf(t, a, b)\nend\n" },
    { "student_t_lcdf", HDR "  input y: f64[4]\n  input nu: f64\n"
      "  input mu: f64\n  input s: f64\n# range y -6 6\n# range nu 0.5 30\n"
      "# range s 0.5 3\n"
      "  output cost = student_t_lcdf(y, nu, mu, s)\nend\n" },
    { "student_t_lccdf", HDR "  input y: f64[4]\n  input nu: f64\n"
      "  input mu: f64\n  input s: f64\n# range y -6 6\n# range nu 0.5 30\n"
      "# range s 0.5 3\n"
      "  output cost = student_t_lccdf(y, nu, mu, s)\nend\n" },
    { "i0", HDR "  input x: f64[4]\n# range x -12 12\n"
      "  output cost = sum(i0(x))\nend\n" },
    { "i1", HDR "  input x: f64[4]\n# range x -12 12\n"
      "  output cost = sum(i1(x))\nend\n" },
};

/* ---- build-time errors ---------------------------------------------- */

static void error_tests(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_graph_new("e", &err);
    int64_t d3 = 3, d2 = 2;
    kiln_value y = kiln_graph_input(g, "y", KILN_F64, 1, &d3, &err);
    kiln_value mu = kiln_graph_input(g, "mu", KILN_F64, 0, NULL, &err);
    kiln_value b = kiln_graph_input(g, "b", KILN_BOOL, 1, &d3, &err);
    kiln_value k = kiln_graph_input(g, "k", KILN_I64, 1, &d3, &err);
    kiln_value w = kiln_graph_input(g, "w", KILN_F64, 1, &d2, &err);
    int before = g->n_nodes;
    kiln_value in[4] = { y, mu, 0, 0 };

    kiln_value v = kiln_graph_op(g, "normal_lpdf", 2, in, NULL, 0, &err);
    ok(v < 0 && err.code == KILN_ERR_TYPE &&
       strcmp(err.message, "normal_lpdf: expected 3 arguments (y, mu, "
              "sigma), got 2") == 0, "arity: %s", err.message);
    v = kiln_graph_op(g, "inv_logit", 2, in, NULL, 0, &err);
    ok(v < 0 && strstr(err.message, "inv_logit: expected 1 argument (x), "
                       "got 2"), "arity of a helper: %s", err.message);
    kiln_value bin[3] = { b, mu, mu };
    v = kiln_graph_op(g, "normal_lpdf", 3, bin, NULL, 0, &err);
    ok(v < 0 && err.code == KILN_ERR_TYPE &&
       strstr(err.message, "normal_lpdf: argument 1 (y) has dtype bool"),
       "bool argument: %s", err.message);
    kiln_value cin[2] = { y, y };
    v = kiln_graph_op(g, "categorical_logit_lpmf", 2, cin, NULL, 0, &err);
    ok(v < 0 && strstr(err.message, "argument 1 (y) has dtype f64; "
                       "expected an integer"),
       "categorical_logit with float y: %s", err.message);
    kiln_value cin2[2] = { k, mu };
    v = kiln_graph_op(g, "categorical_logit_lpmf", 2, cin2, NULL, 0, &err);
    ok(v < 0 && strstr(err.message, "argument 2 (beta) must be a vector"),
       "categorical_logit with scalar beta: %s", err.message);
    /* issue 28: vector arguments other than the last */
    kiln_value din[2] = { mu, y };
    v = kiln_graph_op(g, "dirichlet_lpdf", 2, din, NULL, 0, &err);
    ok(v < 0 && strstr(err.message, "dirichlet_lpdf: argument 1 (theta) "
                       "must be a vector, got rank 0"),
       "dirichlet with scalar theta: %s", err.message);
    kiln_value min_[2] = { y, y };
    v = kiln_graph_op(g, "multinomial_lpmf", 2, min_, NULL, 0, &err);
    ok(v < 0 && strstr(err.message, "multinomial_lpmf: argument 1 (y) has "
                       "dtype f64; expected an integer"),
       "multinomial with float counts: %s", err.message);
    kiln_value oin[3] = { k, mu, mu };
    v = kiln_graph_op(g, "ordered_logistic_lpmf", 3, oin, NULL, 0, &err);
    ok(v < 0 && strstr(err.message, "argument 3 (c) must be a vector"),
       "ordered_logistic with scalar cutpoints: %s", err.message);
    kiln_value oin2[3] = { k, w, y };   /* y: 3 outcomes, eta: 2 */
    v = kiln_graph_op(g, "ordered_logistic_lpmf", 3, oin2, NULL, 0, &err);
    ok(v < 0 && strncmp(err.message, "ordered_logistic_lpmf: ", 23) == 0 &&
       (strstr(err.message, "(2) and (3)") ||
        strstr(err.message, "(3) and (2)")),
       "ordered_logistic y/eta shape clash: %s", err.message);
    kiln_attr at = { "axis", KILN_ATTR_INT, 0, 0, 0, NULL, NULL};
    kiln_value nin[3] = { y, mu, mu };
    v = kiln_graph_op(g, "normal_lpdf", 3, nin, &at, 1, &err);
    ok(v < 0 && strstr(err.message, "normal_lpdf: takes no attributes"),
       "attributes: %s", err.message);
    /* a shape error deep inside: named by the composite, nothing left */
    kiln_value sin[3] = { y, w, mu };
    v = kiln_graph_op(g, "normal_lpdf", 3, sin, NULL, 0, &err);
    ok(v < 0 && err.code == KILN_ERR_SHAPE &&
       strncmp(err.message, "normal_lpdf: ", 13) == 0 &&
       strstr(err.message, "(3) and (2)"), "shape: %s", err.message);
    ok(g->n_nodes == before, "failed expansions leave no node (%d, %d)",
       g->n_nodes, before);
    /* result types: a scalar of the arguments' float dtype */
    kiln_value y32 = kiln_graph_input(g, "y32", KILN_F32, 1, &d3, &err);
    kiln_value one = kiln_graph_literal(g, 1, KILN_LIT_INT, &err);
    kiln_value fin[3] = { y32, one, one };
    v = kiln_graph_op(g, "normal_lpdf", 3, fin, NULL, 0, &err);
    ok(v >= 0 && g->nodes[v].type.dtype == KILN_F32 &&
       g->nodes[v].type.rank == 0, "normal_lpdf of f32 is an f32 scalar");
    kiln_value pin[2] = { k, mu };
    v = kiln_graph_op(g, "poisson_lpmf", 2, pin, NULL, 0, &err);
    ok(v >= 0 && g->nodes[v].type.dtype == KILN_F64 &&
       g->nodes[v].type.rank == 0, "poisson_lpmf of i64 counts is an f64 "
       "scalar");
    v = kiln_graph_op(g, "log1p_exp", 1, &y, NULL, 0, &err);
    ok(v >= 0 && g->nodes[v].type.rank == 1 &&
       g->nodes[v].type.dims[0] == 3, "helpers are elementwise");
    kiln_value bad[3] = { y, mu, 999 };
    v = kiln_graph_op(g, "normal_lpdf", 3, bad, NULL, 0, &err);
    ok(v < 0 && err.code == KILN_ERR_ARG, "bad id: %s", err.message);
    kiln_graph_free(g);

    const char *txt = HDR "  input y: f64[3]\n"
                      "  output l = normal_lpdf(y, 0, 1, 2)\nend\n";
    g = kiln_parse_string(txt, "a.kg", NULL, &err);
    ok(!g && strstr(err.message, "a.kg:4:") &&
       strstr(err.message, "normal_lpdf: expected 3 arguments"),
       "text arity error has a position: %s", err.message);
    kiln_graph_free(g);
    txt = HDR "  input y: f64[3]\n"
          "  output l = normal_lpdf(y, 0, 1, axis=0)\nend\n";
    g = kiln_parse_string(txt, "a.kg", NULL, &err);
    ok(!g && strstr(err.message, "normal_lpdf: takes no attributes"),
       "text attribute error: %s", err.message);
    kiln_graph_free(g);

    int shadow = 0;
    for (int i = 0; i < kiln_composite_count(); i++)
        if (kiln_ir_op_lookup(kiln_composite_name(i)) >= 0) {
            diag("%s shadows a primitive", kiln_composite_name(i));
            shadow = 1;
        }
    ok(!shadow, "no composite shadows a primitive (%d composites)",
       kiln_composite_count());

    /* printing: primitives only; the text parses back to the same text */
    txt = HDR "  input y: f64[3]\n  input s: f64\n"
          "  output l = student_t_lpdf(y, 3, 0, s)\nend\n";
    g = kiln_parse_string(txt, "p.kg", NULL, &err);
    char *p1 = g ? kiln_graph_print(g, &err) : NULL;
    kiln_graph *g2 = p1 ? kiln_parse_string(p1, "p2.kg", NULL, &err) : NULL;
    char *p2 = g2 ? kiln_graph_print(g2, &err) : NULL;
    ok(p1 && p2 && !strstr(p1, "lpdf(") && strstr(p1, "gammaln(") &&
       strcmp(p1, p2) == 0, "canonical text has only primitives and "
       "round-trips");
    free(p1);
    free(p2);
    kiln_graph_free(g);
    kiln_graph_free(g2);
}

int main(void)
{
    const char *bk[3];
    int nbk = found_backends(bk);
    error_tests();
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
        gc_check(grads[i].label, grads[i].text, 1e-6);
    value_tests("lpdf_cases.py", 50, bk, nbk);
    return done_testing();
}
