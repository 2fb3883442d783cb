/*
 * test_lpdf.c — the composite ops of core/composite.c (Stan's log
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

#define MAXA 4

typedef struct lcase {
    char label[128], op[64], mode[8];
    double rtol;
    int nargs;
    kiln_dtype dt[MAXA];
    int rank[MAXA];
    int64_t n[MAXA];
    double *v[MAXA];
    int64_t *iv[MAXA];
    int nref;
    double *ref, *scale;
} lcase;

static double *read_list(FILE *fp, int64_t n)
{
    double *p = calloc((size_t)(n ? n : 1), sizeof *p);
    char buf[64];
    for (int64_t i = 0; i < n; i++) {
        if (fscanf(fp, "%63s", buf) != 1) {
            free(p);
            return NULL;
        }
        p[i] = strtod(buf, NULL);
    }
    return p;
}

static void free_case(lcase *c)
{
    for (int k = 0; k < c->nargs; k++) {
        free(c->v[k]);
        free(c->iv[k]);
    }
    free(c->ref);
    free(c->scale);
    memset(c, 0, sizeof *c);
}

/* Read one case; 1 on success, 0 at the end, -1 on a format error. */
static int read_case(FILE *fp, lcase *c)
{
    char kw[16];
    memset(c, 0, sizeof *c);
    if (fscanf(fp, "%15s", kw) != 1)
        return 0;
    if (strcmp(kw, "case") != 0 ||
        fscanf(fp, "%127s %63s %7s %lf", c->label, c->op, c->mode,
               &c->rtol) != 4)
        return -1;
    for (;;) {
        long pos = ftell(fp);
        if (fscanf(fp, "%15s", kw) != 1)
            return -1;
        if (strcmp(kw, "arg") == 0) {
            char dt[8];
            int k = c->nargs;
            if (k == MAXA ||
                fscanf(fp, "%7s %d %lld", dt, &c->rank[k],
                       (long long *)&c->n[k]) != 3)
                return -1;
            c->dt[k] = strcmp(dt, "i64") == 0 ? KILN_I64 : KILN_F64;
            if (!(c->v[k] = read_list(fp, c->n[k])))
                return -1;
            if (c->dt[k] == KILN_I64) {
                c->iv[k] = calloc((size_t)c->n[k] + 1, sizeof(int64_t));
                for (int64_t i = 0; i < c->n[k]; i++)
                    c->iv[k][i] = (int64_t)c->v[k][i];
            }
            c->nargs++;
        } else if (strcmp(kw, "ref") == 0) {
            if (fscanf(fp, "%d", &c->nref) != 1 ||
                !(c->ref = read_list(fp, c->nref)))
                return -1;
        } else if (strcmp(kw, "scale") == 0) {
            int m;
            if (fscanf(fp, "%d", &m) != 1 || m != c->nref ||
                !(c->scale = read_list(fp, m)))
                return -1;
            return 1;
        } else {
            (void)pos;
            return -1;
        }
    }
}

/* the largest |got - want| / max(|want|, scale) seen, and where */
static double worst_err;
static char worst_where[200];

static int close_to(double got, double want, double rtol, double scale)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    if (got == want)
        return 1;
    double s = fabs(want) > scale ? fabs(want) : scale;
    return fabs(got - want) <= rtol * s;
}

/* Build, compile with backend `bk` and passes `passes`, call, compare. */
static void run_case(const lcase *c, const char *bk, const char *passes)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_graph_new("lpdf", &err);
    kiln_value in[MAXA];
    kiln_tensor t[MAXA];
    for (int k = 0; k < c->nargs; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "a%d", k);
        in[k] = kiln_graph_input(g, nm, c->dt[k], c->rank[k], &c->n[k],
                                 &err);
        t[k].dtype = c->dt[k];
        t[k].rank = c->rank[k];
        t[k].shape[0] = c->n[k];
        t[k].data = c->dt[k] == KILN_I64 ? (void *)c->iv[k]
                                         : (void *)c->v[k];
    }
    kiln_value v = kiln_graph_op(g, c->op, c->nargs, in, NULL, 0, &err);
    if (v < 0 || kiln_graph_output(g, "v", v, &err)) {
        ok(0, "%s [%s]: build: %s", c->label, bk, err.message);
        kiln_graph_free(g);
        return;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = bk;
    o.passes = passes;
    o.quiet = 1;
    o.jobs = 1;
    kiln_function *f = kiln_compile(g, &o, &err);
    kiln_graph_free(g);
    if (!f) {
        ok(0, "%s [%s]: compile: %s", c->label, bk, err.message);
        return;
    }
    kiln_tensor out[1];
    if (kiln_function_call(f, t, out, &err)) {
        ok(0, "%s [%s]: call: %s", c->label, bk, err.message);
        kiln_function_free(f);
        return;
    }
    int64_t m = 1;
    for (int i = 0; i < out[0].rank; i++)
        m *= out[0].shape[i];
    const double *r = out[0].data;
    int good = m == c->nref;
    int worst = -1;
    for (int64_t i = 0; good && i < m; i++) {
        double s = fabs(c->ref[i]) > c->scale[i] ? fabs(c->ref[i])
                                                  : c->scale[i];
        double e = fabs(r[i] - c->ref[i]) / s;
        if (isfinite(e) && e > worst_err) {
            worst_err = e;
            snprintf(worst_where, sizeof worst_where, "%s [%s] element %d",
                     c->label, bk, (int)i);
        }
    }
    for (int64_t i = 0; good && i < m; i++)
        if (!close_to(r[i], c->ref[i], c->rtol, c->scale[i])) {
            good = 0;
            worst = (int)i;
        }
    ok(good, "%s [%s%s%s]", c->label, bk, passes ? ", passes " : "",
       passes ? passes : "");
    if (m != c->nref)
        diag("got %lld values, want %d", (long long)m, c->nref);
    else if (worst >= 0)
        diag("element %d: got %.17g, want %.17g (rtol %g, scale %g)", worst,
             r[worst], c->ref[worst], c->rtol, c->scale[worst]);
    kiln_function_free(f);
}

static void value_tests(const char **bk, int nbk)
{
    const char *top = getenv("KILN_SRCDIR");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/lpdf_cases.py'",
             top ? top : "..");
    FILE *fp = access("/usr/bin/python3", X_OK) == 0 ? popen(cmd, "r")
                                                     : NULL;
    if (!fp) {
        ok(1, "values against scipy # SKIP no /usr/bin/python3");
        return;
    }
    int c0 = fgetc(fp);
    if (c0 == 'S') {
        char why[256] = "";
        if (!fgets(why, sizeof why, fp))
            why[0] = '\0';
        why[strcspn(why, "\n")] = '\0';
        ok(1, "values against scipy # S%s", why);
        pclose(fp);
        return;
    }
    if (c0 != EOF)
        ungetc(c0, fp);
    lcase c;
    int n = 0, rc;
    while ((rc = read_case(fp, &c)) == 1) {
        for (int b = 0; b < nbk; b++)
            run_case(&c, bk[b], NULL);
        run_case(&c, "interp", "none");
        free_case(&c);
        n++;
    }
    free_case(&c);
    int st = pclose(fp);
    diag("largest error relative to max(|ref|, scale): %.3g at %s",
         worst_err, worst_where);
    ok(rc == 0 && st == 0 && n > 50, "read %d cases from lpdf_cases.py "
       "(exit status %d)", n, st);
}

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
    value_tests(bk, nbk);
    return done_testing();
}
