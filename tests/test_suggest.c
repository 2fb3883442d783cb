/*
 * test_suggest.c — "did you mean" (core/support/suggest.c) and the parser's
 * source lines on nodes (kiln_node.line, for --trace-nonfinite).  TAP.
 * Expected distances are counted by hand.
 */
#include "suggest.h"
#include "ir.h"
#include "tap.h"

#include <kiln/graph.h>
#include <string.h>

static int dist(const char *a, const char *b)
{
    return kiln_suggest_distance(a, strlen(a), b, strlen(b));
}

int main(void)
{
    ok(dist("exp", "exp") == 0, "equal: 0");
    ok(dist("exq", "exp") == 1, "one substitution: 1");
    ok(dist("ex", "exp") == 1 && dist("expp", "exp") == 1,
       "one insertion or deletion: 1");
    ok(dist("lgo", "log") == 1, "a transposition: 1");
    ok(dist("Y", "y") == 1 && dist("SIGMA", "sigma") == 3,
       "case differences cost a half each, rounded up");
    ok(dist("", "abc") == 3 && dist("abc", "") == 3, "against empty: length");

    const char *ops[] = {"add", "and", "abs", "exp", "log", "normal_lpdf"};
    ok(kiln_suggest("ad", ops, 6) == ops[0], "ad: the first at distance 1 "
       "(add before and)");
    ok(kiln_suggest("normal_lpfd", ops, 6) == ops[5], "normal_lpfd: "
       "normal_lpdf");
    ok(kiln_suggest("qwerty", ops, 6) == NULL, "nothing close: NULL");
    ok(kiln_suggest("x", ops, 6) == NULL,
       "a one-letter name is not 'close' to a two-letter one");
    const char *one[] = {"y", NULL};
    ok(kiln_suggest("Y", one, 2) == one[0], "Y suggests y (NULL skipped)");
    ok(kiln_suggest("y", one, 1) == NULL, "the name itself is no suggestion");
    char buf[96];
    kiln_suggestion s;
    kiln_suggest_init(&s, "fsue", 4);
    kiln_suggest_offer(&s, "cse");
    kiln_suggest_offer(&s, "fuse");
    ok(strcmp(kiln_suggest_text(&s, buf, sizeof buf),
              "; did you mean 'fuse'?") == 0, "text: %s", buf);
    kiln_suggest_init(&s, "zzzz", 4);
    kiln_suggest_offer(&s, "fuse");
    ok(strcmp(kiln_suggest_text(&s, buf, sizeof buf), "") == 0,
       "text without a suggestion: empty");
    ok(strcmp(kiln_ir_op_hint("sqr", 3), "; did you mean 'sqrt'?") == 0,
       "op hint: %s", kiln_ir_op_hint("sqr", 3));

    /* the parser stamps each node with its statement's line */
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string("kiln 1\ngraph g\n  input x: f64\n"
                                      "\n  y = exp(x)\n  z = log(y)\n"
                                      "  output z\nend\n", "t.kg", NULL,
                                      &err);
    ok(g != NULL, "parse: %s", err.message);
    if (g) {
        kiln_value x = kiln_graph_lookup(g, "x"), y = kiln_graph_lookup(g, "y");
        kiln_value z = kiln_graph_lookup(g, "z");
        ok(g->nodes[x].line == 3 && g->nodes[y].line == 5 &&
           g->nodes[z].line == 6, "lines: x %d, y %d, z %d",
           g->nodes[x].line, g->nodes[y].line, g->nodes[z].line);
        kiln_graph_free(g);
    }
    return done_testing();
}
