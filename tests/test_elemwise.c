/*
 * test_elemwise.c — the elementwise ops of issue 25 (log1mexp, isnan,
 * isinf, floor, ceil, trunc, round, round_half_to_even,
 * round_half_away_from_zero, sign, mod, clip, erfcx, erfinv, erfcinv,
 * gammainc, gammaincc, betainc):
 *
 *  - values against NumPy / scipy.special at many points, tails and edge
 *    values included, f64, f32 and integer inputs, the output dtype
 *    checked: cases and references from tests/elemwise_cases.py at test
 *    time (SKIP without scipy), each under every backend found and on
 *    interp with no rewrite passes (tests/scipy_cases.h);
 *  - gradients against central finite differences (tests/gradcheck.h),
 *    gammainc / gammaincc with respect to a included (gammainc_da, its
 *    values against mpmath in elemwise_cases.py), betainc with respect
 *    to a, b and x under every backend (betainc_da / betainc_db, values
 *    against mpmath in elemwise_cases.py), and the error for a second
 *    derivative through betainc_da;
 *  - build-time errors (arity, a misspelt name) and the canonical text
 *    round trip.
 */
#define _POSIX_C_SOURCE 200809L
#include "tap.h"
#include "found_backends.h"
#include "gradcheck.h"
#include "scipy_cases.h"

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR "kiln 1\ngraph t\n"

static const struct { const char *label, *text; } grads[] = {
    { "log1mexp", HDR "  input x: f64[4]\n# range x -5 -0.05\n"
      "  output cost = sum(log1mexp(x))\nend\n" },
    { "mod (x/y in [0, 1))", HDR "  input x: f64[3]\n  input y: f64[3]\n"
      "# range x 0.1 0.9\n# range y 1.1 2\n"
      "  output cost = sum(mul(mod(x, y), x))\nend\n" },
    { "mod (floor(x/y) = -3)", HDR "  input x: f64[3]\n  input y: f64\n"
      "# range x -2.9 -2.1\n# range y 1 1.05\n"
      "  output cost = sum(square(mod(x, y)))\nend\n" },
    { "clip", HDR "  input x: f64[8]\n  input lo: f64\n  input hi: f64[8]\n"
      "# range x -3 3\n# range lo -1.5 -0.5\n# range hi 0.5 1.5\n"
      "  output cost = sum(mul(clip(x, lo, hi), x))\nend\n" },
    { "erfcx", HDR "  input x: f64[6]\n# range x -3 12\n"
      "  output cost = sum(erfcx(x))\nend\n" },
    { "i0e", HDR "  input x: f64[6]\n# range x -30 30\n"
      "  output cost = sum(i0e(x))\nend\n" },
    { "i1e", HDR "  input x: f64[6]\n# range x -30 30\n"
      "  output cost = sum(i1e(x))\nend\n" },
    { "erfinv", HDR "  input x: f64[6]\n# range x -0.95 0.95\n"
      "  output cost = sum(erfinv(x))\nend\n" },
    { "erfcinv", HDR "  input x: f64[6]\n# range x 0.05 1.95\n"
      "  output cost = sum(erfcinv(x))\nend\n" },
    { "gammainc (x)", HDR "  input x: f64[5]\n# range x 0.2 8\n"
      "  output cost = sum(gammainc(2.5, x))\nend\n" },
    { "gammainc (a and x)", HDR "  input a: f64[6]\n  input x: f64[6]\n"
      "# range a 0.05 40\n# range x 0.05 60\n"
      "  output cost = sum(gammainc(a, x))\nend\n" },
    { "gammaincc (a and x)", HDR "  input a: f64[6]\n  input x: f64[6]\n"
      "# range a 0.3 8\n# range x 0.01 12\n"
      "  output cost = sum(log(gammaincc(a, x)))\nend\n" },
    { "gammaincc (x)", HDR "  input x: f64[5]\n# range x 0.2 8\n"
      "  const a: f64[5] = [0.5, 1, 2, 7.5, 30]\n"
      "  output cost = sum(gammaincc(a, x))\nend\n" },
    { "betainc (x)", HDR "  input x: f64[5]\n# range x 0.05 0.95\n"
      "  const a: f64[5] = [0.5, 1, 2, 7.5, 30]\n"
      "  output cost = sum(betainc(a, 1.5, x))\nend\n" },
    { "betainc (a, b and x)", HDR "  input a: f64[6]\n  input b: f64[6]\n"
      "  input x: f64[6]\n# range a 0.05 30\n# range b 0.05 30\n"
      "# range x 0.02 0.98\n"
      "  output cost = sum(betainc(a, b, x))\nend\n" },
    { "betainc (small a, b; log)", HDR "  input a: f64[6]\n"
      "  input b: f64[6]\n  input x: f64[6]\n# range a 0.01 0.5\n"
      "# range b 0.01 2\n# range x 0.05 0.95\n"
      "  output cost = sum(log(betainc(a, b, x)))\nend\n" },
    { "betainc (large a, b)", HDR "  input a: f64[4]\n  input b: f64[4]\n"
      "# range a 150 400\n# range b 150 400\n"
      "  const x: f64[4] = [0.35, 0.45, 0.5, 0.6]\n"
      "  output cost = sum(betainc(a, b, x))\nend\n" },
    { "rounding, sign: zero", HDR "  input x: f64[6]\n# range x -3 3\n"
      "  output cost = sum(add(floor(x), ceil(x), trunc(x), round(x), "
      "round_half_away_from_zero(x), round_half_to_even(x), sign(x), x))\n"
      "end\n" },
    { "isnan, isinf in where", HDR "  input x: f64[4]\n"
      "  output cost = sum(where(or(isnan(x), isinf(x)), 0, square(x)))\n"
      "end\n" },
};

/* Second derivatives through the shape derivatives: a clear error. */
static void shape_grad_errors(void)
{
    static const struct { const char *body, *want; } cases[] = {
        { "  input a: f64\n  input b: f64\n  input x: f64\n"
          "  c = betainc(a, b, x)\n  g = grad(c, a)\n"
          "  h = grad(g, b)\n  output h\n",
          "grad: no gradient rule for 'betainc_da'" },
        { "  input b: f64\n  input x: f64\n"
          "  c = betainc(2, b, x)\n  g = grad(c, b)\n  h = grad(g, b)\n"
          "  output h\n",
          "grad: no gradient rule for 'betainc_db'" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, HDR "%send\n", cases[i].body);
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_parse_string(text, "g.kg", NULL, &err);
        ok(!g && strstr(err.message, cases[i].want) != NULL,
           "second derivative of a shape derivative: %s", err.message);
        kiln_graph_free(g);
    }
}

static void parse_tests(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(
        HDR "  input x: f64[2]\n  output c = clip(x, 0)\nend\n", "a.kg",
        NULL, &err);
    ok(!g && strstr(err.message, "clip: expected 3 inputs, got 2"),
       "clip arity: %s", err.message);
    kiln_graph_free(g);
    g = kiln_parse_string(HDR "  input x: f64[2]\n"
                          "  output c = betainc(x, x)\nend\n", "b.kg", NULL,
                          &err);
    ok(!g && strstr(err.message, "betainc: expected 3 inputs, got 2"),
       "betainc arity: %s", err.message);
    kiln_graph_free(g);
    g = kiln_parse_string(HDR "  input x: f64[2]\n"
                          "  output c = erfcxx(x)\nend\n", "c.kg", NULL, &err);
    ok(!g && strstr(err.message, "did you mean 'erfcx'"),
       "a misspelt op gets a hint: %s", err.message);
    kiln_graph_free(g);

    /* every op prints by its own name and the text round-trips */
    const char *txt =
        HDR "  input x: f64[3]\n  input k: i64[3]\n"
        "  output a = log1mexp(x)\n  output b = isnan(x)\n"
        "  output c = isinf(k)\n  output d = floor(x)\n"
        "  output e = ceil(x)\n  output f = trunc(x)\n  output h = round(x)\n"
        "  output i = round_half_to_even(x)\n"
        "  output j = round_half_away_from_zero(x)\n  output l = sign(k)\n"
        "  output m = mod(k, 3)\n  output n = clip(x, 0, 1)\n"
        "  output o = erfcx(x)\n  output p = erfinv(x)\n"
        "  output q = erfcinv(x)\n  output r = gammainc(x, x)\n"
        "  output s = gammaincc(x, x)\n  output t = betainc(x, x, x)\n"
        "  output u = i0e(x)\n  output v = i1e(x)\nend\n";
    g = kiln_parse_string(txt, "p.kg", NULL, &err);
    char *p1 = g ? kiln_graph_print(g, &err) : NULL;
    kiln_graph *g2 = p1 ? kiln_parse_string(p1, "p2.kg", NULL, &err) : NULL;
    char *p2 = g2 ? kiln_graph_print(g2, &err) : NULL;
    static const char *const names[] = {
        "log1mexp(", "isnan(", "isinf(", "floor(", "ceil(", "trunc(",
        "round(", "round_half_to_even(", "round_half_away_from_zero(",
        "sign(", "mod(", "clip(", "erfcx(", "erfinv(", "erfcinv(",
        "gammainc(", "gammaincc(", "betainc(", "i0e(", "i1e("};
    int all = p1 != NULL;
    for (size_t i = 0; all && i < sizeof names / sizeof names[0]; i++)
        if (!strstr(p1, names[i])) {
            diag("%s missing from:\n%s", names[i], p1);
            all = 0;
        }
    ok(all && p2 && strcmp(p1, p2) == 0,
       "each op prints by name and the text round-trips (%s)",
       p1 ? "" : err.message);
    free(p1);
    free(p2);
    kiln_graph_free(g);
    kiln_graph_free(g2);
}

int main(void)
{
    const char *bk[3];
    int nbk = found_backends(bk);
    parse_tests();
    shape_grad_errors();
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
        if (strncmp(grads[i].label, "betainc (", 9) != 0)
            gc_check(grads[i].label, grads[i].text, 1e-6);
    /* betainc's gradient in a, b and x under every backend */
    for (int j = 0; j < nbk; j++) {
        setenv("KILN_BACKEND", bk[j], 1);
        for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
            if (strncmp(grads[i].label, "betainc (", 9) == 0) {
                char label[128];
                snprintf(label, sizeof label, "%s on %s", grads[i].label,
                         bk[j]);
                gc_check(label, grads[i].text, 1e-6);
            }
    }
    unsetenv("KILN_BACKEND");
    value_tests("elemwise_cases.py", 45, bk, nbk);
    return done_testing();
}
