/*
 * test_parse.c — the `.kg` text format: every error message, every
 * statement form and op, print/parse round trips, wide and long input,
 * and robustness against truncated and mutated files.
 */
#define _POSIX_C_SOURCE 200809L

#include <kiln/graph.h>
#include <kiln/io.h>
#include "ir.h"
#include "tap.h"
#include "guard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------- */

static char tmpdir[256];

static char *cat_lines(const char *const *lines)
{
    size_t n = 1;
    for (int i = 0; lines[i]; i++)
        n += strlen(lines[i]) + 1;
    char *s = malloc(n);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (int i = 0; lines[i]; i++) {
        strcat(s, lines[i]);
        strcat(s, "\n");
    }
    return s;
}

/* Parse `text` (base dir: tmpdir) expecting error `code` with message
 * `msg` exactly. */
static int parse_err(const char *text, int code, const char *msg,
                     const char *what)
{
    kiln_err e;
    memset(&e, 0, sizeof e);
    kiln_graph *g = kiln_parse_string(text, "m.kg", tmpdir, &e);
    int good = !g && e.code == code && strcmp(e.message, msg) == 0;
    ok(good, "error: %s", what);
    if (!good) {
        if (g)
            diag("parsed without error");
        else
            diag("got code %d message \"%s\"\n# want code %d message \"%s\"",
                 e.code, e.message, code, msg);
    }
    kiln_graph_free(g);
    return good;
}

#define ERR(code, msg, what, ...)                                      \
    do {                                                               \
        const char *lines_[] = { __VA_ARGS__, NULL };                  \
        char *t_ = cat_lines(lines_);                                  \
        parse_err(t_, code, msg, what);                                \
        free(t_);                                                      \
    } while (0)

static kiln_graph *parse_ok(const char *text, const char *what)
{
    kiln_err e;
    memset(&e, 0, sizeof e);
    kiln_graph *g = kiln_parse_string(text, "m.kg", tmpdir, &e);
    if (!ok(g != NULL, "parses: %s", what))
        diag("%s", e.message);
    return g;
}

static const char *type_of(const kiln_graph *g, const char *name,
                           char *buf, size_t n)
{
    kiln_value v = kiln_graph_lookup(g, name);
    if (v < 0)
        return "(undefined)";
    return kiln_ir_type_str(g, &g->nodes[v].type, buf, n);
}

/* ---- structural graph equality -------------------------------------- */

typedef struct eqctx {
    const kiln_graph *a, *b;
    int *map;       /* a node -> b node */
    int64_t *sym;   /* a symbol index -> b symbol id (0: unset) */
    char why[256];
} eqctx;

static int dim_eq(eqctx *c, int64_t da, int64_t db)
{
    if (!KILN_DIM_IS_SYM(da) || !KILN_DIM_IS_SYM(db))
        return da == db;
    int ia = KILN_SYM_INDEX(da), ib = KILN_SYM_INDEX(db);
    if (ia >= c->a->n_symbols || ib >= c->b->n_symbols)
        return 0;
    const char *na = c->a->symbols[ia], *nb = c->b->symbols[ib];
    if ((na == NULL) != (nb == NULL) || (na && strcmp(na, nb)))
        return 0;
    if (c->sym[ia] == 0)
        c->sym[ia] = db;
    return c->sym[ia] == db;
}

static int type_eq(eqctx *c, const kiln_type *ta, const kiln_type *tb)
{
    if (ta->dtype != tb->dtype || ta->rank != tb->rank)
        return 0;
    for (int i = 0; i < ta->rank; i++)
        if (!dim_eq(c, ta->dims[i], tb->dims[i]))
            return 0;
    return 1;
}

/* x, y: the nodes (a literal's value and kind are the node's) */
static int attrs_eq(eqctx *c, const kiln_node *xn, const kiln_node *yn)
{
    const kiln_attrs *x = xn->attrs, *y = yn->attrs;
    if (x->has_axes != y->has_axes || x->naxes != y->naxes ||
        x->keepdims != y->keepdims || x->nshape != y->nshape ||
        x->dtype != y->dtype || x->nidx != y->nidx ||
        xn->lit_kind != yn->lit_kind)
        return 0;
    if (memcmp(&xn->value, &yn->value, sizeof xn->value) &&
        !(isnan(xn->value) && isnan(yn->value)))
        return 0;
    for (int i = 0; i < x->naxes; i++)
        if (x->axes[i] != y->axes[i])
            return 0;
    for (int i = 0; i < x->nshape; i++)
        if (!dim_eq(c, x->shape[i], y->shape[i]))
            return 0;
    for (int i = 0; i < x->nidx; i++) {
        const kiln_index *p = &x->idx[i], *q = &y->idx[i];
        if (p->kind != q->kind || p->start != q->start ||
            p->stop != q->stop || p->step != q->step ||
            p->has_start != q->has_start || p->has_stop != q->has_stop ||
            p->has_step != q->has_step)
            return 0;
    }
    return 1;
}

static int node_eq(eqctx *c, int i, int j)
{
    if (c->map[i] >= 0)
        return c->map[i] == j;
    const kiln_node *x = &c->a->nodes[i], *y = &c->b->nodes[j];
    if (x->op != y->op || x->weak != y->weak || x->n_in != y->n_in) {
        snprintf(c->why, sizeof c->why, "node %d/%d: op/weak/arity differ",
                 i, j);
        return 0;
    }
    if (!type_eq(c, &x->type, &y->type)) {
        snprintf(c->why, sizeof c->why, "node %d/%d: types differ", i, j);
        return 0;
    }
    if (!attrs_eq(c, x, y)) {
        snprintf(c->why, sizeof c->why, "node %d/%d: attrs differ", i, j);
        return 0;
    }
    if (x->name && (!y->name || strcmp(x->name, y->name))) {
        snprintf(c->why, sizeof c->why, "node %d/%d: names differ", i, j);
        return 0;
    }
    if (x->nbytes != y->nbytes || (x->data == NULL) != (y->data == NULL) ||
        (x->data && memcmp(x->data, y->data, x->nbytes)) ||
        memcmp(x->vshape, y->vshape, sizeof x->vshape)) {
        snprintf(c->why, sizeof c->why, "node %d/%d: values differ", i, j);
        return 0;
    }
    if ((x->source == NULL) != (y->source == NULL) ||
        (x->source && strcmp(x->source, y->source))) {
        snprintf(c->why, sizeof c->why, "node %d/%d: sources differ", i, j);
        return 0;
    }
    c->map[i] = j;
    for (int k = 0; k < x->n_in; k++)
        if (!node_eq(c, x->in[k], y->in[k]))
            return 0;
    return 1;
}

/* Same graph: same name, declarations in the same order, outputs, and
 * every node paired with one of the same op, type, attrs and inputs. */
static int same_graph(const kiln_graph *a, const kiln_graph *b, char *why,
                      size_t wn)
{
    eqctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.b = b;
    int good = 0;
    c.map = malloc(sizeof *c.map * (size_t)(a->n_nodes + 1));
    c.sym = calloc((size_t)a->n_symbols + 1, sizeof *c.sym);
    if (!c.map || !c.sym)
        goto out;
    for (int i = 0; i < a->n_nodes; i++)
        c.map[i] = -1;
    if (strcmp(a->name, b->name) || a->n_nodes != b->n_nodes ||
        a->n_outputs != b->n_outputs) {
        snprintf(c.why, sizeof c.why, "name/node count/output count differ "
                 "(%d vs %d nodes)", a->n_nodes, b->n_nodes);
        goto out;
    }
    int ja = 0, jb = 0;
    for (;;) {
        while (ja < a->n_nodes && a->nodes[ja].op > KILN_OP_CONST)
            ja++;
        while (jb < b->n_nodes && b->nodes[jb].op > KILN_OP_CONST)
            jb++;
        if (ja == a->n_nodes || jb == b->n_nodes) {
            if (ja != a->n_nodes || jb != b->n_nodes) {
                snprintf(c.why, sizeof c.why, "declarations differ");
                goto out;
            }
            break;
        }
        if (!node_eq(&c, ja++, jb++))
            goto out;
    }
    for (int k = 0; k < a->n_outputs; k++) {
        if (strcmp(a->outputs[k].name, b->outputs[k].name)) {
            snprintf(c.why, sizeof c.why, "output %d names differ", k);
            goto out;
        }
        if (!node_eq(&c, a->outputs[k].value, b->outputs[k].value))
            goto out;
    }
    for (int i = 0; i < a->n_nodes; i++)
        if (a->nodes[i].name) {
            kiln_value j = kiln_graph_lookup(b, a->nodes[i].name);
            if (j < 0 || !node_eq(&c, i, j)) {
                if (!c.why[0])
                    snprintf(c.why, sizeof c.why, "named node '%s' differs",
                             a->nodes[i].name);
                goto out;
            }
        }
    good = 1;
out:
    if (why)
        snprintf(why, wn, "%s", c.why);
    free(c.map);
    free(c.sym);
    return good;
}

/* parse -> print -> parse -> print: the texts agree and the graphs are
 * the same. */
static void round_trip(const char *text, const char *what)
{
    kiln_err e;
    kiln_graph *g1 = kiln_parse_string(text, "m.kg", tmpdir, &e);
    if (!ok(g1 != NULL, "round trip %s: parses", what)) {
        diag("%s", e.message);
        return;
    }
    char *s1 = kiln_graph_print(g1, &e);
    kiln_graph *g2 = s1 ? kiln_parse_string(s1, "p.kg", tmpdir, &e) : NULL;
    if (!ok(g2 != NULL, "round trip %s: printed text parses", what)) {
        diag("%s\n%s", e.message, s1 ? s1 : "");
        free(s1);
        kiln_graph_free(g1);
        return;
    }
    char *s2 = kiln_graph_print(g2, &e);
    ok(s2 && strcmp(s1, s2) == 0, "round trip %s: printing is stable", what);
    char why[256];
    if (!ok(same_graph(g1, g2, why, sizeof why),
            "round trip %s: same graph", what))
        diag("%s\n%s", why, s1);
    free(s1);
    free(s2);
    kiln_graph_free(g1);
    kiln_graph_free(g2);
}

/* ---- data files ----------------------------------------------------- */

static char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static void write_file(const char *name, const char *content, size_t n)
{
    FILE *f = fopen(tmp_path(name), "wb");
    if (f) {
        fwrite(content, 1, n, f);
        fclose(f);
    }
}

static void write_npy_f64(const char *name, int n, double base)
{
    double v[16];
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = 1;
    t.shape[0] = n;
    t.data = v;
    for (int i = 0; i < n; i++)
        v[i] = base + i;
    kiln_err e;
    if (kiln_npy_write(tmp_path(name), &t, &e))
        diag("npy write: %s", e.message);
}

/* ---- the example ---------------------------------------------------- */

static const char *eight_schools =
    "kiln 1                                  # format version, first line\n"
    "graph eight_schools                     # one graph per file in version 1\n"
    "  input mu: f64                         # passed at each call\n"
    "  input log_tau: f64\n"
    "  input theta_t: f64[8]\n"
    "  const y: f64[8] = [28, 8, -3, 7, -1, 1, 18, 12]\n"
    "  const sigma: f64[8] = [15, 10, 16, 11, 9, 11, 10, 18]\n"
    "  tau = exp(log_tau)\n"
    "  theta = add(mu, mul(tau, theta_t))\n"
    "  z = true_div(sub(y, theta), sigma)\n"
    "  output loglik = sum(sub(mul(-0.5, square(z)), add(log(sigma), "
    "0.9189385332046727)))\n"
    "end\n";

static void test_eight_schools(void)
{
    kiln_graph *g = parse_ok(eight_schools, "eight schools");
    if (!g)
        return;
    char b[128];
    ok(strcmp(kiln_graph_name(g), "eight_schools") == 0, "graph name");
    ok(strcmp(type_of(g, "theta_t", b, sizeof b), "f64[8]") == 0,
       "input type f64[8]");
    ok(strcmp(type_of(g, "theta", b, sizeof b), "f64[8]") == 0,
       "theta broadcasts to f64[8]");
    ok(strcmp(type_of(g, "loglik", b, sizeof b), "f64") == 0,
       "output statement names its value: loglik is f64");
    ok(g->n_outputs == 1 && strcmp(g->outputs[0].name, "loglik") == 0,
       "one output named loglik");
    kiln_value y = kiln_graph_lookup(g, "y");
    ok(y >= 0 && g->nodes[y].op == KILN_OP_CONST &&
       g->nodes[y].nbytes == 64 && ((double *)g->nodes[y].data)[2] == -3.0,
       "integer-looking values in an f64 const are stored as f64");
    /* -0.5 and 0.9189... are weak float literals */
    int nlit = 0, weak_ok = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == KILN_OP_LITERAL) {
            nlit++;
            weak_ok &= g->nodes[i].weak && g->nodes[i].type.dtype == KILN_F64 &&
                       g->nodes[i].lit_kind == KILN_LIT_FLOAT;
        }
    ok(nlit == 2 && weak_ok, "two weak float literals");
    char *s = kiln_graph_print(g, NULL);
    ok(s && strstr(s, "  t3 = mul(-0.5, t2)\n") &&
       strstr(s, "  t5 = add(t4, 0.9189385332046727)\n") &&
       strstr(s, "  loglik = sum(t6)\n  output loglik\nend\n"),
       "canonical print: generated names, inline literals, output");
    free(s);
    kiln_graph_free(g);
    round_trip(eight_schools, "eight schools");
}

/* ---- errors --------------------------------------------------------- */

static void test_errors(void)
{
    const int P = KILN_ERR_PARSE;
    ERR(KILN_ERR_TYPE, "m.kg:4:12: unknown op 'ad'; did you mean 'add'?",
        "unknown op",
        "kiln 1", "graph m", "  input x: f64[3]", "  yy = add(ad(x), 1)",
        "end");
    ERR(P, "m.kg:3:9: expected ':' after input name, found '='",
        "missing ':'", "kiln 1", "graph m", "input x = f64", "end");
    ERR(KILN_ERR_NAME, "m.kg:7:3: undefined name 'thta'; did you mean "
        "'theta'?", "undefined name, with the closest named value",
        "kiln 1", "graph m", "  input theta: f64[3]", "  input mu: f64",
        "  a = exp(mu)", "  b = add(a,", "  thta)", "end");
    ERR(KILN_ERR_NAME, "m.kg:6:18: undefined name 'y' (it names an output "
        "only; the value is 'a')", "an output name is not a value name",
        "kiln 1", "graph m", "  input x: f64", "  a = exp(x)",
        "  output y = a", "  output z = add(y, 1)", "end");
    ERR(KILN_ERR_NAME, "m.kg:5:3: duplicate name 'x' (first defined at line 3)",
        "duplicate name (assignment)", "kiln 1", "graph m", "  input x: f64",
        "  input y: f64", "  x = add(y, 1)", "end");
    ERR(KILN_ERR_NAME, "m.kg:6:9: duplicate name 'a' (first defined at line 6)",
        "duplicate name (grad left-hand side)", "kiln 1", "graph m",
        "  input x: f64", "  input y: f64", "  c = mul(x, y)",
        "  a, b, a = grad(c, x, y, x)", "  output a", "end");
    ERR(KILN_ERR_NAME, "m.kg:4:9: duplicate name 'x' (first defined at line 3)",
        "duplicate name (input)", "kiln 1", "graph m", "  input x: f64",
        "  input x: f32", "end");
    ERR(KILN_ERR_NAME,
        "m.kg:5:9: duplicate name 'loglik' (first defined at line 4)",
        "duplicate name (named by an output)", "kiln 1", "graph m",
        "  input x: f64", "  output loglik = exp(x)",
        "  const loglik: f64 = 1", "end");
    ERR(KILN_ERR_SHAPE, "m.kg:6:20: add: cannot broadcast shapes (3) and (4)",
        "builder error with call position", "kiln 1", "graph m",
        "  input a: f64[3]", "  input b: f64[4]", "  c = exp(a)",
        "  d = mul(2.0, exp(add(a, b)))", "end");
    ERR(P, "m.kg:4:14: bad literal '1.2.3'", "bad literal", "kiln 1",
        "graph m", "  input x: f64", "  y = add(x, 1.2.3)", "end");
    ERR(P, "m.kg:4:14: bad literal '1e'", "bad exponent", "kiln 1",
        "graph m", "  input x: f64", "  y = add(x, 1e)", "end");
    ERR(P, "m.kg:4:14: bad literal '2abc'", "digits then letters", "kiln 1",
        "graph m", "  input x: f64", "  y = add(x, 2abc)", "end");
    ERR(KILN_ERR_IO,
        "m.kg:3:26: cannot read data file 'missing.npy': No such file or "
        "directory", "missing data file", "kiln 1", "graph m",
        "  shared d: f64[3] = npy(\"missing.npy\")", "end");
    {
        char want[1024];
        /* a one-letter name is close to no other (kiln_suggest's rule):
         * the error quotes no field of the file */
        snprintf(want, sizeof want,
                 "m.kg:3:22: %s/data.csv: no column 'c' among the 2 fields "
                 "of its first line", tmpdir);
        ERR(KILN_ERR_NAME, want, "csv column missing", "kiln 1", "graph m",
            "  shared d: f64[n] = csv(\"data.csv\", \"c\")", "end");
        snprintf(want, sizeof want,
                 "m.kg:3:22: %s/bad.npy: not a .npy file (bad magic)",
                 tmpdir);
        ERR(KILN_ERR_PARSE, want, "npy reader error", "kiln 1", "graph m",
            "  shared d: f64[3] = npy(\"bad.npy\")", "end");
    }
    ERR(KILN_ERR_SHAPE, "m.kg:3:22: shared 'd': value has shape (4), declared (3)",
        "npy shape differs from the declaration", "kiln 1", "graph m",
        "  shared d: f64[3] = npy(\"four.npy\")", "end");
    ERR(KILN_ERR_TYPE,
        "m.kg:3:22: shared 'd': value has dtype f64, declared f32",
        "npy dtype differs from the declaration", "kiln 1", "graph m",
        "  shared d: f32[4] = npy(\"four.npy\")", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:4:22: shared 'e': value has shape (4) but symbol 'n' is 3 in "
        "shared 'd'", "a symbol bound by two shared values", "kiln 1",
        "graph m", "  shared d: f64[n] = npy(\"three.npy\")",
        "  shared e: f64[n] = npy(\"four.npy\")", "end");
    ERR(P, "m.kg:1:1: expected 'kiln 1' (the format version) on the first "
        "line, found 'graph'", "missing header", "graph m", "end");
    ERR(P, "m.kg:1:6: unsupported format version '2' (this kiln reads "
        "version 1)", "wrong version", "kiln 2", "graph m", "end");
    ERR(P, "m.kg:1:6: unsupported format version '1.0' (this kiln reads "
        "version 1)", "float version", "kiln 1.0", "graph m", "end");
    ERR(P, "m.kg:2:6: expected a graph name after 'graph', found end of line",
        "graph without name", "kiln 1", "graph", "end");
    ERR(P, "m.kg:4:1: expected 'end' to close graph 'm', found end of file",
        "missing end", "kiln 1", "graph m", "  input x: f64");
    ERR(P, "m.kg:4:7: graph 'm' defined twice", "two graphs of one name",
        "kiln 1", "graph m", "end", "graph m", "end");
    ERR(P, "m.kg:4:1: expected end of file or another 'graph NAME' block "
        "after 'end', found 'x'", "junk after a graph", "kiln 1", "graph m",
        "end", "x = 1");
    ERR(P, "m.kg:3:7: expected end of line after 'end', found 'x'",
        "junk after end", "kiln 1", "graph m", "  end x");
    ERR(P, "m.kg:3:12: unknown dtype 'f65' (expected f64, f32, i64, i32 or "
        "bool)", "unknown dtype", "kiln 1", "graph m", "  input x: f65",
        "end");
    ERR(P, "m.kg:3:32: too many dims (at most 8)", "rank 9", "kiln 1",
        "graph m", "  input x: f64[1,1,1,1,1,1,1,1,1]", "end");
    ERR(P, "m.kg:3:16: expected a dim (a size, a name or '?'), found '-'",
        "negative dim", "kiln 1", "graph m", "  input x: f64[-1]", "end");
    ERR(P, "m.kg:3:16: expected a dim (a size, a name or '?'), found ']'",
        "empty dims", "kiln 1", "graph m", "  input x: f64[]", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:3:21: const 'c': expected 3 values for axis 0 of type f64[3], "
        "found 2", "const too short", "kiln 1", "graph m",
        "  const c: f64[3] = [1, 2]", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:3:21: const 'c': more than 2 values for axis 0 of type f64[2]",
        "const too long", "kiln 1", "graph m",
        "  const c: f64[2] = [1, 2, 3]", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:3:21: const 'c': expected a list of 2 values for axis 0 of "
        "type f64[2], found '1.5'", "scalar for a vector const", "kiln 1",
        "graph m", "  const c: f64[2] = 1.5", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:3:22: const 'c': too many nested lists for type f64[2]",
        "const nested too deep", "kiln 1", "graph m",
        "  const c: f64[2] = [[1], [2]]", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:3:33: const 'm': expected 2 values for axis 1 of type "
        "f64[2, 2], found 1", "ragged 2-D const", "kiln 1", "graph m",
        "  const m: f64[2, 2] = [[1, 2], [3]]", "end");
    ERR(P, "m.kg:3:25: const 'k': '2.5' is not a value of dtype i64",
        "float in an i64 const", "kiln 1", "graph m",
        "  const k: i64[2] = [1, 2.5]", "end");
    ERR(P, "m.kg:3:29: const 'b': '2' is not a value of dtype bool",
        "2 in a bool const", "kiln 1", "graph m",
        "  const b: bool[2] = [true, 2]", "end");
    ERR(P, "m.kg:3:18: const 'k': 3000000000 is out of range for i32",
        "i32 overflow", "kiln 1", "graph m", "  const k: i32 = 3000000000",
        "end");
    ERR(P, "m.kg:3:18: const 'f': 1e300 is out of range for f32",
        "f32 overflow", "kiln 1", "graph m", "  const f: f32 = 1e300", "end");
    ERR(P, "m.kg:3:18: number '1e999' is out of range", "f64 overflow",
        "kiln 1", "graph m", "  const f: f64 = 1e999", "end");
    ERR(P, "m.kg:3:18: integer '99999999999999999999' is out of range",
        "i64 overflow", "kiln 1", "graph m",
        "  const k: i64 = 99999999999999999999", "end");
    ERR(P, "m.kg:3:12: const 'c': type f64[n] is not static (a const needs "
        "a known shape)", "symbolic const", "kiln 1", "graph m",
        "  const c: f64[n] = [1]", "end");
    ERR(P, "m.kg:3:16: expected '=' and the value of const 'c', found '1'",
        "const without '='", "kiln 1", "graph m", "  const c: f64 1", "end");
    ERR(P, "m.kg:5:8: with a tensor index every other entry must be ':' (a "
        "full slice)", "tensor index beside an integer", "kiln 1", "graph m",
        "  input x: f64[3, 4]", "  input i: i64[2]", "  y = x[1, i]", "end");
    ERR(P, "m.kg:5:12: at most one tensor index is allowed in x[...]",
        "two tensor indices", "kiln 1", "graph m", "  input x: f64[3, 4]",
        "  input i: i64[2]", "  y = x[i, i]", "end");
    ERR(P, "m.kg:4:21: set_subtensor: the first argument must be indexed, "
        "like x[0:2]", "set_subtensor without index", "kiln 1", "graph m",
        "  input x: f64[3]", "  y = set_subtensor(x, 1.0)", "end");
    ERR(P, "m.kg:4:28: set_subtensor takes two arguments, x[...] and a "
        "value; found ','", "set_subtensor with 3 args", "kiln 1", "graph m",
        "  input x: f64[3]", "  y = set_subtensor(x[0], 1, 2)", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:4:7: inc_subtensor: value of shape (3) does not broadcast to "
        "(2)", "inc_subtensor shape error at the call", "kiln 1", "graph m",
        "  input x: f64[3]", "  y = inc_subtensor(x[0:2], x)", "end");
    ERR(P, "m.kg:5:12: join: axis given twice (first argument and axis=)",
        "join axis twice", "kiln 1", "graph m", "  input a: f64[2]",
        "  input b: f64[2]", "  y = join(0, a, b, axis=0)", "end");
    ERR(KILN_ERR_TYPE, "m.kg:5:7: join: attribute 'axis' is required",
        "join without axis", "kiln 1", "graph m", "  input a: f64[2]",
        "  input b: f64[2]", "  y = join(a, b)", "end");
    ERR(P, "m.kg:4:22: sum: positional argument after keyword argument",
        "positional after keyword", "kiln 1", "graph m", "  input x: f64[3]",
        "  y = sum(x, axis=0, x)", "end");
    ERR(KILN_ERR_TYPE, "m.kg:4:7: sum: unknown attribute 'axs'",
        "unknown attribute", "kiln 1", "graph m", "  input x: f64[3]",
        "  y = sum(x, axs=0)", "end");
    ERR(P, "m.kg:4:19: attribute 'axis': expected a number, true, false, a "
        "dtype, a list or a string, found 'foo'", "bad attribute value", "kiln 1",
        "graph m", "  input x: f64[3]", "  y = sum(x, axis=foo)", "end");
    ERR(P, "m.kg:4:25: attribute 'shape': expected an integer or a dim name "
        "in the list, found '1.5'", "float in an attribute list", "kiln 1",
        "graph m", "  input x: f64[3]", "  y = reshape(x, shape=[1.5])",
        "end");
    ERR(KILN_ERR_NAME, "m.kg:3:3: 'true' is a reserved word and cannot be a "
        "name", "reserved word as a name", "kiln 1", "graph m",
        "  true = 1", "end");
    ERR(P, "m.kg:4:14: integer literal '99999999999999999' is too large (at "
        "most 2^53 = 9007199254740992 in magnitude)", "huge integer literal",
        "kiln 1",
        "graph m", "  input x: f64", "  y = add(x, 99999999999999999)", "end");
    ERR(P, "m.kg:4:9: empty index '[]'", "empty index", "kiln 1", "graph m",
        "  input x: f64[3]", "  y = x[]", "end");
    ERR(P, "m.kg:4:25: too many indices (at most 8)", "nine indices",
        "kiln 1", "graph m", "  input x: f64[3]",
        "  y = x[0,0,0,0,0,0,0,0,0]", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:4:8: subtensor: too many indices (2) for a tensor of rank 1",
        "index rank error at '['", "kiln 1", "graph m", "  input x: f64[3]",
        "  y = x[0, 0]", "end");
    ERR(KILN_ERR_SHAPE,
        "m.kg:4:8: subtensor: index 3 is out of bounds for axis 0 with size 3",
        "index out of bounds", "kiln 1", "graph m", "  input x: f64[3]",
        "  y = x[3]", "end");
    ERR(P, "m.kg:4:9: expected an index (an integer, a slice like 1:3 or an "
        "integer tensor), found '1.5'", "float index", "kiln 1", "graph m",
        "  input x: f64[3]", "  y = x[1.5]", "end");
    ERR(KILN_ERR_TYPE, "m.kg:5:8: take: indices must be i64 or i32, got f64",
        "float index tensor", "kiln 1", "graph m", "  input x: f64[3]",
        "  input f: f64[2]", "  y = x[f]", "end");
    ERR(P, "m.kg:4:7: subtensor is written as indexing: x[1:3, 0]",
        "subtensor by name", "kiln 1", "graph m", "  input x: f64[3]",
        "  y = subtensor(x)", "end");
    ERR(KILN_ERR_NAME, "m.kg:4:3: cannot name a value 'y': it is already "
        "named 'x'", "alias of a named value", "kiln 1", "graph m",
        "  input x: f64[3]", "  y = x", "end");
    ERR(P, "m.kg:3:22: expected npy(\"FILE\"), csv(\"FILE\", \"COLUMN\"), "
        "json(\"FILE\", \"KEY\") or safetensors(\"FILE\", \"TENSOR\") "
        "after '=', found 'foo'", "unknown data source", "kiln 1", "graph m",
        "  shared d: f64[3] = foo(\"a\")", "end");
    ERR(P, "m.kg:3:36: expected ',' and a column name, found ')'",
        "csv without column", "kiln 1", "graph m",
        "  shared d: f64[3] = csv(\"data.csv\")", "end");
    ERR(P, "m.kg:3:26: unterminated string", "unterminated string",
        "kiln 1", "graph m", "  shared d: f64[3] = npy(\"abc", "end");
    ERR(P, "m.kg:3:28: bad escape in string (only \\\\ and \\\" are "
        "allowed)", "bad escape", "kiln 1", "graph m",
        "  shared d: f64[3] = npy(\"a\\q\")", "end");
    ERR(P, "m.kg:4:14: unexpected character '@'", "unexpected character",
        "kiln 1", "graph m", "  input x: f64", "  y = add(x, @)", "end");
    ERR(KILN_ERR_NAME, "m.kg:4:13: output tp 'mu': a parameter has that "
        "name (a model's names must differ; name the output otherwise)",
        "a tp output named like a parameter", "kiln 1", "graph m",
        "  param mu: f64", "  output tp mu = exp(mu)", "end");
    /* Stan and NumPy habits: the hint says what kiln writes instead */
    ERR(P, "m.kg:4:10: unexpected character '+' (kiln has no operators: "
        "write add(a, b), sub, mul, div, pow; docs/stan-cheatsheet.md)",
        "an operator", "kiln 1", "graph m", "  input mu: f64",
        "  y = mu + 1", "  output y", "end");
    ERR(P, "m.kg:4:6: unexpected character '~' (kiln has no '~': add the "
        "density's term to the log density, e.g. logp = "
        "add(normal_lpdf(y, mu, sigma), ...))", "a sampling statement",
        "kiln 1", "graph m", "  input mu: f64", "  mu ~ normal(0, 1)",
        "end");
    ERR(P, "m.kg:3:19: unexpected character '<' (constraints follow the "
        "type: param sigma: f64 lower=0)", "a Stan constraint",
        "kiln 1", "graph m", "  param sigma: f64<lower=0>", "end");
    ERR(P, "m.kg:4:15: expected a number after '-', found 'x'",
        "minus before a name", "kiln 1", "graph m", "  input x: f64",
        "  y = add(x, -x)", "end");
    ERR(KILN_ERR_NAME, "m.kg:5:10: duplicate output 'a' (first defined at "
        "line 4)", "duplicate output", "kiln 1", "graph m", "  input x: f64",
        "  output a = x", "  output a = x", "end");
    ERR(KILN_ERR_NAME, "m.kg:3:10: undefined name 'nope'",
        "output of an undefined name", "kiln 1", "graph m", "  output nope",
        "end");
    ERR(P, "m.kg:3:3: expected a statement (input, param, shared, const, output, "
        "NAME = EXPR or end), found '['", "not a statement", "kiln 1",
        "graph m", "  [x]", "end");
    ERR(P, "m.kg:4:5: expected '=' after the name, found 'add'",
        "assignment without '='", "kiln 1", "graph m", "  input x: f64",
        "  y add(x)", "end");
    ERR(P, "m.kg:3:8: expected a name, found ':'", "input without name",
        "kiln 1", "graph m", "  input: f64", "end");
    ERR(P, "m.kg:3:16: expected end of line, found 'y'", "junk after a "
        "declaration", "kiln 1", "graph m", "  input x: f64 y", "end");
    ERR(P, "m.kg:4:13: expected ',' or ')' in the arguments of add, found "
        "'y'", "missing comma", "kiln 1", "graph m", "  input x: f64",
        "  y = add(x y)", "end");
    ERR(P, "m.kg:4:7: expected an expression, found ')'",
        "missing expression", "kiln 1", "graph m", "  input x: f64",
        "  y = )", "end");
    ERR(KILN_ERR_TYPE, "m.kg:4:7: add: expected at least 2 inputs, got 1",
        "wrong arity from the builder", "kiln 1", "graph m", "  input x: f64",
        "  y = add(x)", "end");
    ERR(KILN_ERR_TYPE, "m.kg:4:7: cast: attribute 'dtype' is required",
        "cast without dtype", "kiln 1", "graph m", "  input x: f64",
        "  y = cast(x)", "end");

    /* nesting: 900 levels (deeper nesting: tests/test_parse_deep.c) */
    {
        size_t n = 900;
        char *t = malloc(n * 15 + 200);
        char *q = t;
        q += sprintf(q, "kiln 1\ngraph m\n  input x: f64\n  y = ");
        for (size_t i = 0; i < n; i++)
            q += sprintf(q, "neg(");
        q += sprintf(q, "x");
        for (size_t i = 0; i < n; i++)
            *q++ = ')';
        sprintf(q, "\n  output y\nend\n");
        kiln_graph *g = parse_ok(t, "900 nested calls");
        ok(g && kiln_graph_n_nodes(g) == 901, "900 nested calls: 901 nodes");
        kiln_graph_free(g);
        kiln_err e;
        q = t;
        q += sprintf(q, "kiln 1\ngraph m\n  input x: i64[3]\n  y = x");
        for (size_t i = 0; i < 900; i++)
            q += sprintf(q, "[x");
        for (size_t i = 0; i < 900; i++)
            *q++ = ']';
        sprintf(q, "\nend\n");
        g = kiln_parse_string(t, "m.kg", NULL, &e);
        ok(g && kiln_graph_n_nodes(g) == 901,
           "900 nested index entries parse");
        kiln_graph_free(g);
        free(t);
    }

    /* API errors */
    kiln_err e;
    ok(!kiln_parse_string(NULL, "m.kg", NULL, &e) && e.code == KILN_ERR_ARG,
       "NULL text is KILN_ERR_ARG");
    ok(!kiln_parse_file("/nonexistent/x.kg", &e) && e.code == KILN_ERR_IO &&
       strcmp(e.message, "cannot read '/nonexistent/x.kg': No such file or "
              "directory") == 0, "missing .kg file is KILN_ERR_IO");
    {
        kiln_graph *g = kiln_parse_string("kiln 1\ngraph m\nend\n", NULL,
                                          NULL, NULL);
        ok(g && kiln_graph_n_nodes(g) == 0 &&
           !kiln_parse_string("kiln 2\n", NULL, NULL, NULL),
           "NULL err and filename are allowed");
        kiln_graph_free(g);
    }
    ok(!kiln_parse_string("graph m\n", NULL, NULL, &e) &&
       strncmp(e.message, "<string>:1:1: ", 14) == 0,
       "default file name is <string>");
    {
        static const char nul[] = "kiln 1\ngraph m\n  input x: f64\0\nend\n";
        write_file("nul.kg", nul, sizeof nul - 1);
        char want[600];
        snprintf(want, sizeof want, "%s: unexpected byte 0x00",
                 tmp_path("nul.kg"));
        kiln_graph *g = kiln_parse_file(tmp_path("nul.kg"), &e);
        size_t wl = strlen(want), ml = strlen(e.message);
        ok(!g && e.code == P && ml > wl &&
           strcmp(e.message + ml - strlen(": unexpected byte 0x00"),
                  ": unexpected byte 0x00") == 0 &&
           strstr(e.message, ":3:15: "), "NUL byte in a file");
        kiln_graph_free(g);
    }
}

/* ---- statements and ops --------------------------------------------- */

static void test_statements(void)
{
    const char *lines[] = {
        "kiln 1",
        "",
        "# a comment line",
        "graph stmts   # trailing comment",
        "  input a: f64",
        "input b: f32[8]",
        "\t\tinput c: i64[n, 3, ?]",
        "  input d: i32[n]",
        "  input e: bool[2, 2]",
        "  shared s0: f64[3]",
        "  shared s1: f64[n] = npy(\"three.npy\")",
        "  shared s2: f64[?] = csv(\"data.csv\", \"b\")",
        "  shared s3: i64[?] = csv(\"data.csv\", \"a\")",
        "  const k0: f64 = 2.5",
        "  const k1: i64[3] = [1, -2, 3]",
        "  const k2: f32[2, 2] = [[1.5, -inf], [inf, nan]]",
        "  const k3: bool[3] = [true, false, 1]",
        "  const k4: i32[2] = [-2147483648, 2147483647]",
        "  const k5: f64[0] = []",
        "  const k6: f64[2, 0] = [[], []]",
        "  const k7: f64[2, 1] = [",
        "      [1e-3],",
        "      [-0.0]]",
        "  v = add(a, 1)",
        "  w = mul(b, true)",
        "  lit = 3",
        "  output out1 = v",
        "  output w",
        "  output out3 = add(w, 1.5)",
        "  output out4 = 7",
        "  output s0",
        "end",
        "",
        "# done",
        NULL
    };
    char *t = cat_lines(lines);
    kiln_graph *g = parse_ok(t, "every statement form");
    if (g) {
        char b[128];
        ok(strcmp(type_of(g, "c", b, sizeof b), "i64[n, 3, ?]") == 0,
           "named, static and unknown dims");
        kiln_value c = kiln_graph_lookup(g, "c"), d = kiln_graph_lookup(g, "d");
        ok(g->nodes[c].type.dims[0] == g->nodes[d].type.dims[0],
           "one symbol for one name");
        kiln_value s2 = kiln_graph_lookup(g, "s2"), s3 = kiln_graph_lookup(g, "s3");
        ok(g->nodes[s2].type.dims[0] != g->nodes[s3].type.dims[0] &&
           g->nodes[c].type.dims[2] != g->nodes[s2].type.dims[0],
           "each '?' is its own symbol");
        kiln_value s0 = kiln_graph_lookup(g, "s0");
        ok(g->nodes[s0].op == KILN_OP_SHARED && !g->nodes[s0].data &&
           !g->nodes[s0].source, "shared without a source");
        kiln_value s1 = kiln_graph_lookup(g, "s1");
        ok(g->nodes[s1].data && g->nodes[s1].vshape[0] == 3 &&
           ((double *)g->nodes[s1].data)[2] == 12.0 &&
           strcmp(g->nodes[s1].source, "npy(\"three.npy\")") == 0,
           "shared from npy: value, bound shape, source");
        ok(g->nodes[s2].data && g->nodes[s2].vshape[0] == 2 &&
           ((double *)g->nodes[s2].data)[1] == 4.0 &&
           strcmp(g->nodes[s2].source, "csv(\"data.csv\", \"b\")") == 0,
           "shared from csv: value, bound shape, source");
        ok(g->nodes[s3].type.dtype == KILN_I64 &&
           ((int64_t *)g->nodes[s3].data)[1] == 3, "csv read as i64");
        kiln_value k2 = kiln_graph_lookup(g, "k2");
        const float *f = g->nodes[k2].data;
        ok(f && f[0] == 1.5f && isinf(f[1]) && f[1] < 0 && isinf(f[2]) &&
           isnan(f[3]), "f32 const with inf and nan");
        kiln_value k3 = kiln_graph_lookup(g, "k3");
        const unsigned char *bb = g->nodes[k3].data;
        ok(bb && bb[0] == 1 && bb[1] == 0 && bb[2] == 1, "bool const");
        kiln_value k4 = kiln_graph_lookup(g, "k4");
        const int32_t *ii = g->nodes[k4].data;
        ok(ii && ii[0] == INT32_MIN && ii[1] == INT32_MAX, "i32 limits");
        kiln_value k6 = kiln_graph_lookup(g, "k6");
        ok(g->nodes[k6].nbytes == 0 &&
           strcmp(type_of(g, "k6", b, sizeof b), "f64[2, 0]") == 0,
           "empty const");
        kiln_value k7 = kiln_graph_lookup(g, "k7");
        const double *dd = g->nodes[k7].data;
        ok(dd && dd[0] == 1e-3 && dd[1] == 0 && signbit(dd[1]),
           "multi-line const, -0.0 keeps its sign");
        ok(strcmp(type_of(g, "v", b, sizeof b), "f64") == 0 &&
           strcmp(type_of(g, "w", b, sizeof b), "f32[8]") == 0,
           "weak literals: f64 + int -> f64, f32 * bool -> f32");
        kiln_value lit = kiln_graph_lookup(g, "lit");
        ok(lit >= 0 && g->nodes[lit].op == KILN_OP_LITERAL &&
           g->nodes[lit].lit_kind == KILN_LIT_INT &&
           g->nodes[lit].value == 3, "a named literal");
        ok(g->n_outputs == 5, "five outputs");
        ok(g->n_outputs == 5 && g->outputs[0].value == kiln_graph_lookup(g, "v") &&
           g->outputs[1].value == kiln_graph_lookup(g, "w") &&
           strcmp(g->outputs[1].name, "w") == 0,
           "output NAME = EXPR and output NAME");
        ok(strcmp(type_of(g, "out3", b, sizeof b), "f32[8]") == 0,
           "output names an unnamed value");
        ok(kiln_graph_lookup(g, "out1") < 0,
           "output of a named value does not rename it");
        kiln_value o4 = kiln_graph_lookup(g, "out4");
        ok(o4 >= 0 && g->nodes[o4].op == KILN_OP_LITERAL, "literal output");
        kiln_graph_free(g);
    }
    round_trip(t, "every statement form");
    free(t);

    /* parse_file: relative data paths resolve against the file's dir */
    {
        const char *fl[] = { "kiln 1", "graph f",
                             "  shared s: f64[n] = npy(\"three.npy\")",
                             "  output s", "end", NULL };
        char *ft = cat_lines(fl);
        write_file("f.kg", ft, strlen(ft));
        free(ft);
        kiln_err e;
        kiln_graph *gf = kiln_parse_file(tmp_path("f.kg"), &e);
        if (!ok(gf != NULL, "kiln_parse_file resolves data next to the file"))
            diag("%s", e.message);
        kiln_graph_free(gf);
    }
}

typedef struct op_case {
    const char *expr;
    const char *type;
} op_case;

static const op_case op_cases[] = {
    {"add(a, b)", "f64[3]"}, {"sub(a, b)", "f64[3]"},
    {"mul(a, b)", "f64[3]"}, {"true_div(k, k)", "f64[3]"},
    {"neg(k)", "i32[3]"}, {"abs(a)", "f64[3]"}, {"exp(a)", "f64[3]"},
    {"expm1(s)", "f32[3]"}, {"log(a)", "f64[3]"}, {"log1p(a)", "f64[3]"},
    {"sqrt(a)", "f64[3]"}, {"square(k)", "i32[3]"}, {"pow(a, 2)", "f64[3]"},
    {"sigmoid(a)", "f64[3]"}, {"softplus(a)", "f64[3]"},
    {"tanh(a)", "f64[3]"}, {"sin(a)", "f64[3]"}, {"cos(a)", "f64[3]"},
    {"erf(a)", "f64[3]"}, {"erfc(a)", "f64[3]"}, {"gammaln(a)", "f64[3]"},
    {"digamma(a)", "f64[3]"}, {"maximum(a, m)", "f64[2, 3]"},
    {"minimum(a, 0)", "f64[3]"}, {"where(p, a, b)", "f64[3]"},
    {"eq(a, b)", "bool[3]"}, {"ne(a, 1)", "bool[3]"}, {"lt(a, b)", "bool[3]"},
    {"le(a, b)", "bool[3]"}, {"gt(a, b)", "bool[3]"}, {"ge(a, b)", "bool[3]"},
    {"and(p, p)", "bool[3]"}, {"or(p, false)", "bool[3]"},
    {"not(p)", "bool[3]"}, {"cast(a, dtype=f32)", "f32[3]"},
    {"sum(m)", "f64"}, {"sum(m, axis=1)", "f64[2]"},
    {"sum(m, axis=[0, 1])", "f64"}, {"sum(m, axis=0, keepdims=true)", "f64[1, 3]"},
    {"prod(k)", "i64"}, {"max(m, axis=-1)", "f64[2]"}, {"min(k)", "i32"},
    {"mean(k)", "f64"}, {"logsumexp(m, axis=1)", "f64[2]"},
    {"reshape(m, shape=[3, 2])", "f64[3, 2]"}, {"reshape(m, shape=[-1])", "f64[6]"},
    {"reshape(q, shape=[n, 3])", "f64[n, 3]"}, {"reshape(a, shape=[1, 3, 1])", "f64[1, 3, 1]"},
    {"transpose(m)", "f64[3, 2]"}, {"transpose(m, axes=[1, 0])", "f64[3, 2]"},
    {"expand_dims(a, axis=0)", "f64[1, 3]"},
    {"squeeze(expand_dims(a, axis=[0, 2]))", "f64[3]"},
    {"squeeze(expand_dims(a, axis=1), axis=1)", "f64[3]"},
    {"broadcast_to(a, shape=[2, 3])", "f64[2, 3]"},
    {"broadcast_to(a, shape=[n, 3])", "f64[n, 3]"},
    {"alloc(0.0, shape=[2, 3])", "f64[2, 3]"}, {"alloc(1, shape=[4])", "i64[4]"},
    {"alloc(a, shape=[2, 3])", "f64[2, 3]"},
    {"zeros(shape=[2])", "f64[2]"}, {"ones(shape=[2, n], dtype=i32)", "i32[2, n]"},
    {"join(0, a, b)", "f64[6]"}, {"join(1, m, m)", "f64[2, 6]"},
    {"join(-1, m, m, m)", "f64[2, 9]"}, {"join(0, q, q)", "f64[?, 3]"},
    {"stack(a, b)", "f64[2, 3]"}, {"stack(a, b, axis=1)", "f64[3, 2]"},
    {"a[1:3]", "f64[2]"}, {"a[1:]", "f64[2]"}, {"a[:2]", "f64[2]"},
    {"a[::2]", "f64[2]"}, {"a[-1]", "f64"}, {"m[0]", "f64[3]"},
    {"m[:, 1]", "f64[2]"}, {"m[::-1, 0:3:2]", "f64[2, 2]"}, {"m[0][1]", "f64"},
    {"q[1:]", "f64[?, 3]"}, {"q[:, 1:]", "f64[n, 2]"},
    {"a[i]", "f64[2]"}, {"m[:, i]", "f64[2, 2]"}, {"m[j]", "f64[2, 2, 3]"},
    {"m[i, :]", "f64[2, 3]"}, {"exp(a)[i]", "f64[2]"},
    {"take(m, i, axis=1)", "f64[2, 2]"}, {"take(a, 1)", "f64"},
    {"set_subtensor(a[0:2], 1.0)", "f64[3]"},
    {"inc_subtensor(m[0], a)", "f64[2, 3]"},
    {"set_subtensor(a[i], 0.0)", "f64[3]"},
    {"inc_subtensor(m[:, i], 1.0)", "f64[2, 3]"},
    {"set_subtensor(exp(m)[1][0:2], 5)", "f64[3]"},
    {"advanced_inc_subtensor(a, i, 1.0)", "f64[3]"},
    {"advanced_set_subtensor(m, i, 0.0, axis=1)", "f64[2, 3]"},
    {"dot(m, a)", "f64[2]"}, {"matmul(m, t)", "f64[2, 2]"},
    {"dot(k, k)", "f64"},
    {"add(s, 1)", "f32[3]"}, {"add(k, 1.5)", "f64[3]"}, {"add(s, a)", "f64[3]"},
    {"add(k, true)", "i32[3]"}, {"mul(2, 3)", "i64"},
    {"add(1e300, -inf)", "f64"}, {"sub(nan, .5)", "f64"},
    {"fill(m, a)", "f64[2, 3]"}, {"fill(s, 1)", "f32[3]"},
    {"fill(k, 1.5)", "f64[3]"}, {"fill(a, s)", "f32[3]"},
    {"trigamma(a)", "f64[3]"}, {"trigamma(k)", "f64[3]"},
    {"trigamma(s)", "f32[3]"},
    /* issue 25, opscheck */
    {"all(m)", "bool"}, {"any(k, axis=0)", "bool"},
    {"all(p, keepdims=true)", "bool[1]"},
    {"cumsum(m, axis=1)", "f64[2, 3]"}, {"cumprod(k, axis=-1)", "i64[3]"},
    {"cumsum(p, axis=0)", "i64[3]"}, {"cumsum(s, axis=0)", "f32[3]"},
    {"check(a, p, gt(m, 0.0), msg=\"a \\\"b\\\" c\")", "f64[3]"},
    {"check(k)", "i32[3]"},
    /* issue 25, elementwise */
    {"log1mexp(a)", "f64[3]"}, {"log1mexp(s)", "f32[3]"},
    {"log1mexp(k)", "f64[3]"}, {"isnan(a)", "bool[3]"},
    {"isinf(k)", "bool[3]"}, {"floor(s)", "f32[3]"}, {"floor(k)", "f64[3]"},
    {"ceil(a)", "f64[3]"}, {"trunc(p)", "f64[3]"}, {"round(s)", "f32[3]"},
    {"round_half_to_even(a)", "f64[3]"},
    {"round_half_away_from_zero(k)", "f64[3]"}, {"sign(k)", "i32[3]"},
    {"sign(p)", "i64[3]"}, {"sign(s)", "f32[3]"}, {"mod(k, 3)", "i32[3]"},
    {"mod(a, k)", "f64[3]"}, {"mod(s, 2.5)", "f32[3]"},
    {"clip(m, 0, 1)", "f64[2, 3]"}, {"clip(k, 0, 2)", "i32[3]"},
    {"clip(s, a, 1)", "f64[3]"}, {"erfcx(a)", "f64[3]"},
    {"erfinv(s)", "f32[3]"}, {"erfcinv(k)", "f64[3]"},
    {"gammainc(a, m)", "f64[2, 3]"}, {"gammaincc(s, 2)", "f32[3]"},
    {"betainc(1, 2, s)", "f32[3]"}, {"betainc(a, k, 0.5)", "f64[3]"},
    {"gammainc_da(s, 1)", "f32[3]"}, {"betainc_da(1, 2, s)", "f32[3]"},
    {"betainc_db(a, k, 0.5)", "f64[3]"},
    /* issue 28, linear algebra */
    {"cholesky(dot(t, m))", "f64[3, 3]"},
    {"cholesky_grad(dot(t, m), dot(t, m))", "f64[3, 3]"},
    {"solve_triangular(dot(t, m), a, lower=true, trans=true)", "f64[3]"},
    {"solve(dot(t, m), t)", "f64[3, 2]"},
    {"inverse(j)", "f64[2, 2]"},
    {"log_det(dot(t, m))", "f64"},
    {"det(j)", "f64"}, {"sign_det(dot(t, m))", "f64"},
    {"tril(m)", "f64[2, 3]"}, {"triu(j)", "f64[2, 2]"},
    {"diag(k)", "f64[3, 3]"}, {"diagonal(m)", "f64[2]"},
    {"i0e(s)", "f32[3]"}, {"i1e(k)", "f64[3]"},   /* issue 28 */
    /* issue 28: a scan over body `acc` (declared before graph ops) and
     * its per-step output */
    {"result(scan(0.0, a, b, body=acc, carries=1, seqs=1), index=1)",
     "f64[3]"},
    {"scan(0.0, 1.5, b, body=acc, carries=1, seqs=0, n_steps=4)", "f64"},
    /* issue 28: ODEs over body `rhs` */
    {"ode_rk45(a, 0.0, b, a, body=rhs)", "f64[3, 3]"},
    {"ode_bdf(a, 0.0, b, b, body=rhs, rtol=1e-8, max_num_steps=100)",
     "f64[3, 3]"},
    /* issue 29: top_k and its indices */
    {"top_k(m, k=2)", "f64[2, 2]"},
    {"result(top_k(s, k=1, axis=0), index=1)", "i64[1]"},
};

static void test_ops(void)
{
    size_t n = sizeof op_cases / sizeof op_cases[0];
    size_t cap = 4096;
    for (size_t i = 0; i < n; i++)
        cap += strlen(op_cases[i].expr) + 32;
    char *t = malloc(cap);
    char *q = t;
    q += sprintf(q, "kiln 1\ngraph acc\n  input h: f64\n  input x: f64\n"
                    "  input w: f64[3]\n  o = add(h, mul(x, sum(w)))\n"
                    "  output o\n  output y = mul(o, 2)\nend\n\n"
                    "graph rhs\n  input t: f64\n  input y: f64[3]\n"
                    "  input theta: f64[3]\n"
                    "  output dy = mul(neg(theta), y)\nend\n\n"
                    "graph ops\n"
                    "  input a: f64[3]\n  input b: f64[3]\n"
                    "  input m: f64[2, 3]\n  input t: f64[3, 2]\n"
                    "  input i: i64[2]\n  input j: i32[2, 2]\n"
                    "  input k: i32[3]\n  input p: bool[3]\n"
                    "  input s: f32[3]\n  input q: f64[n, 3]\n");
    for (size_t i = 0; i < n; i++)
        q += sprintf(q, "  e%zu = %s\n", i, op_cases[i].expr);
    q += sprintf(q, "  output e0\nend\n");
    kiln_graph *g = parse_ok(t, "one graph with every op");
    if (g) {
        for (size_t i = 0; i < n; i++) {
            char name[32], b[128];
            snprintf(name, sizeof name, "e%zu", i);
            const char *got = type_of(g, name, b, sizeof b);
            if (!ok(strcmp(got, op_cases[i].type) == 0, "%s : %s",
                    op_cases[i].expr, op_cases[i].type))
                diag("got %s", got);
        }
        int seen[KILN_OP_COUNT] = {0};
        for (int i = 0; i < g->n_nodes; i++)
            seen[g->nodes[i].op] = 1;
        int all = 1;
        for (int o = KILN_OP_LITERAL; o < KILN_OP_COUNT; o++)
            if (!seen[o]) {
                all = 0;
                diag("op %s not covered", kiln_ir_op_info(o)->name);
            }
        ok(all, "every non-declaration op is covered");
        kiln_graph_free(g);
    }
    round_trip(t, "every op");
    free(t);
}

static void test_printing(void)
{
    const char *lines[] = {
        "kiln 1", "graph pr",
        "  input x: f64[4, n]", "  input i: i64[3]",
        "  input t0: f64", "  input t2: f64",
        "  const c: f32[2] = [0.1, 3]",
        "  const z: i64 = -9223372036854775808",
        "  a = exp(x)",
        "  b = add(a, 1.0)",
        "  c2 = x[1:3, ::-1]",
        "  d = a[i]",
        "  e = take(a, i, axis=1)",
        "  f = set_subtensor(a[:, i], 0)",
        "  g = inc_subtensor(x[0, 1:], 2)",
        "  h = join(1, a, a)",
        "  k = sum(a, axis=0, keepdims=true)",
        "  l = reshape(a, shape=[-1, n])",
        "  m = zeros(shape=[2], dtype=i32)",
        "  o = add(add(t0, t2), mul(x, 1e20))",
        "  p = take(a, 2)",
        "  output y = add(b, 1)",
        "  output y2 = y",
        "  output q = 2.5",
        "end", NULL
    };
    char *t = cat_lines(lines);
    kiln_graph *g = parse_ok(t, "printing graph");
    char *s = g ? kiln_graph_print(g, NULL) : NULL;
    ok(s != NULL, "prints");
    if (s) {
        const char *want[] = {
            "kiln 1\ngraph pr\n  input x: f64[4, n]\n",
            "  const c: f32[2] = [0.1, 3]\n",
            "  const z: i64 = -9223372036854775808\n",
            "  b = add(a, 1.0)\n",
            "  c2 = x[1:3, ::-1]\n",
            "  d = a[i]\n",
            "  e = take(a, i, axis=1)\n",
            "  f = set_subtensor(a[:, i], 0)\n",
            "  g = inc_subtensor(x[0, 1:], 2)\n",
            "  h = join(1, a, a)\n",
            "  k = sum(a, axis=0, keepdims=true)\n",
            "  l = reshape(a, shape=[-1, n])\n",
            "  m = zeros(shape=[2], dtype=i32)\n",
            "  t1 = add(t0, t2)\n",
            "  t3 = mul(x, 1e+20)\n",
            "  o = add(t1, t3)\n",
            "  p = take(a, 2, axis=0)\n",
            "  y = add(b, 1)\n",
            "  q = 2.5\n",
            "  output y\n  output y2 = y\n  output q\nend\n",
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            if (!ok(strstr(s, want[i]) != NULL, "printed: %.*s",
                    (int)strcspn(want[i], "\n"), want[i]))
                diag("in:\n%s", s);
    }
    free(s);
    kiln_graph_free(g);
    round_trip(t, "printing graph");
    free(t);

    /* literal formatting: floats that look like ints, specials, -0 */
    const char *lit_lines[] = {
        "kiln 1", "graph lits", "  input x: f64",
        "  a = add(x, 1.0)", "  b = add(x, -0.0)", "  c = add(x, inf)",
        "  d = add(x, -inf)", "  e = add(x, nan)", "  f = add(x, 0.1)",
        "  g = add(x, 123456789012345678.0)", "  h = add(x, 5e-324)",
        "  i = add(x, -7)", "  j = and(true, false)", "end", NULL
    };
    t = cat_lines(lit_lines);
    g = parse_ok(t, "literal graph");
    s = g ? kiln_graph_print(g, NULL) : NULL;
    ok(s && strstr(s, "a = add(x, 1.0)\n") && strstr(s, "b = add(x, -0.0)\n") &&
       strstr(s, "c = add(x, inf)\n") && strstr(s, "d = add(x, -inf)\n") &&
       strstr(s, "e = add(x, nan)\n") && strstr(s, "f = add(x, 0.1)\n") &&
       strstr(s, "g = add(x, 1.2345678901234568e+17)\n") &&
       strstr(s, "h = add(x, 4.94065645841247e-324)\n") &&
       strstr(s, "i = add(x, -7)\n") && strstr(s, "j = and(true, false)\n"),
       "literal formatting");
    if (s && !strstr(s, "a = add(x, 1.0)"))
        diag("%s", s);
    free(s);
    kiln_graph_free(g);
    round_trip(t, "literal graph");
    free(t);

    /* names that look generated, and names that look like ops */
    const char *nm_lines[] = {
        "kiln 1", "graph names", "  input exp: f64", "  input t1: f64",
        "  t0 = exp(exp(exp))", "  f32 = add(exp(t1), t0)",
        "  output t0 = add(f32, mul(t1, 2))", "end", NULL
    };
    t = cat_lines(nm_lines);
    round_trip(t, "user names t0/t1, op and dtype names as values");
    free(t);

    /* shared values print with their source */
    const char *sh_lines[] = {
        "kiln 1", "graph sh", "  shared s: f64[n] = npy(\"three.npy\")",
        "  shared c: f64[m] = csv(\"data.csv\", \"b\")", "  shared u: f64[m]",
        "  input x: f64[n]", "  output y = add(x, s)", "end", NULL
    };
    t = cat_lines(sh_lines);
    g = parse_ok(t, "shared graph");
    s = g ? kiln_graph_print(g, NULL) : NULL;
    ok(s && strstr(s, "  shared s: f64[n] = npy(\"three.npy\")\n") &&
       strstr(s, "  shared c: f64[m] = csv(\"data.csv\", \"b\")\n") &&
       strstr(s, "  shared u: f64[m]\n"), "shared values print their source");
    free(s);
    kiln_graph_free(g);
    round_trip(t, "shared graph");
    free(t);
}

/* ---- size ----------------------------------------------------------- */

static void test_wide(void)
{
    int n = 5000;
    size_t cap = (size_t)n * 40 + 256;
    char *t = malloc(cap);
    char *q = t;
    q += sprintf(q, "kiln 1\ngraph wide\n");
    for (int i = 0; i < n; i++)
        q += sprintf(q, "  input x%d: f64[1]\n", i);
    q += sprintf(q, "  y = join(0");
    for (int i = 0; i < n; i++)
        q += sprintf(q, ", x%d", i);
    q += sprintf(q, ")\n  output y\nend\n");
    kiln_graph *g = parse_ok(t, "join of 5000 inputs");
    if (g) {
        char b[64];
        ok(strcmp(type_of(g, "y", b, sizeof b), "f64[5000]") == 0,
           "join of 5000: f64[5000]");
        kiln_value y = kiln_graph_lookup(g, "y");
        ok(g->nodes[y].n_in == 5000 && g->nodes[y].in[4999] == 4999,
           "join of 5000: inputs in order");
    }
    kiln_graph_free(g);
    round_trip(t, "join of 5000 inputs");
    free(t);

    /* a grad line with 3000 names on the left (the duplicate check is a
     * hash set: every pair was compared before), and the same line with
     * the last name repeating one from the middle */
    n = 3000;
    cap = (size_t)n * 64 + 256;
    t = malloc(cap);
    for (int dup = 0; dup < 2; dup++) {
        q = t;
        q += sprintf(q, "kiln 1\ngraph wideg\n");
        for (int i = 0; i < n; i++)
            q += sprintf(q, "  input x%d: f64\n", i);
        q += sprintf(q, "  s = add(x0");
        for (int i = 1; i < n; i++)
            q += sprintf(q, ", x%d", i);
        q += sprintf(q, ")\n  ");
        for (int i = 0; i < n; i++)
            q += sprintf(q, "%sd%d", i ? ", " : "",
                         dup && i == n - 1 ? 1234 : i);
        q += sprintf(q, " = grad(s");
        for (int i = 0; i < n; i++)
            q += sprintf(q, ", x%d", i);
        q += sprintf(q, ")\n  output d%d\nend\n", n - 2);
        if (!dup) {
            g = parse_ok(t, "grad with 3000 names");
            ok(g && kiln_graph_lookup(g, "d2999") >= 0 &&
                   g->n_grads == n,
               "grad with 3000 names: every name defined, one record each");
            kiln_graph_free(g);
        } else {
            kiln_err e = {0, ""};
            g = kiln_parse_string(t, "w.kg", NULL, &e);
            ok(!g && e.code == KILN_ERR_NAME &&
                   strstr(e.message, "duplicate name 'd1234' (first "
                                     "defined at line 3004)"),
               "grad with 3000 names: a late duplicate is found (%s)",
               e.message);
            kiln_graph_free(g);
        }
    }
    free(t);

    /* one line of a million bytes: a const of 100000 values */
    n = 100000;
    t = malloc((size_t)n * 12 + 256);
    q = t;
    q += sprintf(q, "kiln 1\ngraph long\n  const c: f64[%d] = [", n);
    for (int i = 0; i < n; i++)
        q += sprintf(q, "%s%d.5", i ? ", " : "", i);
    q += sprintf(q, "]\n  output s = sum(c)\nend\n");
    g = parse_ok(t, "a const line of ~1 MB");
    if (g) {
        kiln_value c = kiln_graph_lookup(g, "c");
        ok(((double *)g->nodes[c].data)[n - 1] == n - 1 + 0.5,
           "long const: last value");
    }
    kiln_graph_free(g);
    free(t);
}

/* ---- robustness ----------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Parse; a success must print and re-parse to the same text, an error
 * must carry a position. */
static int robust_one(const char *text, int *n_ok)
{
    kiln_err e;
    memset(&e, 0, sizeof e);
    kiln_graph *g = kiln_parse_string(text, "m.kg", tmpdir, &e);
    if (!g) {
        return e.code != 0 &&
               (strncmp(e.message, "m.kg:", 5) == 0 ||
                e.code == KILN_ERR_NOMEM);
    }
    (*n_ok)++;
    int good = 0;
    char *s1 = kiln_graph_print(g, &e);
    kiln_graph *g2 = s1 ? kiln_parse_string(s1, "p.kg", tmpdir, &e) : NULL;
    char *s2 = g2 ? kiln_graph_print(g2, &e) : NULL;
    good = s2 && strcmp(s1, s2) == 0;
    if (!good)
        diag("unstable: %s\n%s", e.message, s1 ? s1 : "(null)");
    free(s1);
    free(s2);
    kiln_graph_free(g);
    kiln_graph_free(g2);
    return good;
}

static const char *fuzz_base =
    "kiln 1\n"
    "graph fuzz\n"
    "  input x: f64[3, n]\n"
    "  input i: i64[2]\n"
    "  shared s: f64[3] = npy(\"three.npy\")\n"
    "  const c: f64[2, 2] = [[1, 2.5], [-3e2, inf]]\n"
    "  a = add(x, mul(-0.5, exp(x)))\n"
    "  b = sum(a[0:2, ::2], axis=[0], keepdims=true)\n"
    "  d = set_subtensor(a[:, i], 1)  # advanced\n"
    "  e = join(0, a, d, a)\n"
    "  f = reshape(e, shape=[-1])\n"
    "  output loglik = sum(where(gt(f, 0), f, 0.0))\n"
    "  output s2 = add(s, c[0, 1])\n"
    "end\n";

static void test_robustness(void)
{
    size_t n = strlen(fuzz_base);
    char *buf = malloc(n + 64);
    int good = 1, n_ok = 0;
    for (size_t k = 0; k <= n; k++) {
        memcpy(buf, fuzz_base, k);
        buf[k] = '\0';
        good &= robust_one(buf, &n_ok);
    }
    ok(good, "every prefix of a valid file: no crash, positioned errors");
    ok(n_ok >= 1, "the full file parses (%d prefixes parsed)", n_ok);

    static const char alphabet[] = "()[],:=?-#\"\n 0123456789.eE_abxyz\t\\\x01\xff";
    good = 1;
    n_ok = 0;
    for (int r = 0; r < 600; r++) {
        memcpy(buf, fuzz_base, n + 1);
        size_t len = n;
        int edits = 1 + (int)(rng() % 4);
        for (int k = 0; k < edits; k++) {
            size_t at = rng() % (len + 1);
            char ch = alphabet[rng() % (sizeof alphabet - 1)];
            switch (rng() % 3) {
            case 0: /* replace */
                if (at < len)
                    buf[at] = ch;
                break;
            case 1: /* insert */
                if (len + 1 < n + 64) {
                    memmove(buf + at + 1, buf + at, len - at + 1);
                    buf[at] = ch;
                    len++;
                }
                break;
            default: /* delete */
                if (at < len) {
                    memmove(buf + at, buf + at + 1, len - at);
                    len--;
                }
            }
        }
        good &= robust_one(buf, &n_ok);
    }
    ok(good, "600 random mutations: no crash, positioned errors, stable "
       "printing (%d still parsed)", n_ok);
    free(buf);
}

/* ---- the grad statement -------------------------------------------- */

/* The record kiln_graph_grad keeps for (cost, wrt) names `result`. */
static int grad_recorded(const kiln_graph *g, const char *cost,
                         const char *wrt, const char *result)
{
    kiln_value c = kiln_graph_lookup(g, cost), w = kiln_graph_lookup(g, wrt);
    kiln_value r = kiln_graph_lookup(g, result);
    for (int i = 0; i < g->n_grads; i++)
        if (g->grads[i].cost == c && g->grads[i].wrt == w)
            return g->grads[i].result == r && r >= 0;
    return 0;
}

static void test_grad_statement(void)
{
    const int P = KILN_ERR_PARSE;
#define GHEAD "kiln 1", "graph m", "  input x: f64[3]", "  input y: f64"
    const char *lines[] = {
        GHEAD, "  input z: f64[2]", "  input w: f64[3]",
        "  logp = sub(mul(-0.5, sum(square(x))), mul(0.5, square(y)))",
        "  d_x, d_y = grad(logp, x, y)",
        "  d2 = grad(sum(exp(x)), x)",
        "  ax,ay=grad(logp,",
        "             x,   # newlines inside the parentheses",
        "             y, disconnected=\"error\")",
        "  dz, dy2 = grad(logp, z, y, disconnected=\"zero\")",
        "  s = sum(add(x, w))",
        "  gx, gw = grad(s, x, w)",
        "  output d_x",
        "  output e = add(d_x, d2)",
        "end", NULL
    };
    char *t = cat_lines(lines);
    kiln_graph *g = parse_ok(t, "grad statements");
    if (g) {
        char b[128];
        ok(strcmp(type_of(g, "d_x", b, sizeof b), "f64[3]") == 0 &&
           strcmp(type_of(g, "d_y", b, sizeof b), "f64") == 0 &&
           strcmp(type_of(g, "d2", b, sizeof b), "f64[3]") == 0 &&
           strcmp(type_of(g, "dz", b, sizeof b), "f64[2]") == 0,
           "each gradient has its wrt's type");
        ok(grad_recorded(g, "logp", "x", "d_x") &&
           grad_recorded(g, "logp", "y", "d_y"),
           "NAMES = grad(...) names out[i] NAMEi and keeps the record");
        ok(g->n_grads == 2 + 1 + 2 + 2 + 2, "one record per wrt (%d)",
           g->n_grads);
        ok(kiln_graph_lookup(g, "ax") != kiln_graph_lookup(g, "d_x") &&
           kiln_graph_lookup(g, "ax") >= 0,
           "a second grad statement makes new nodes");
        /* for add(x, w) both adjoints are one node: the second name goes
         * to a copy (an identity cast), and the record follows the name */
        kiln_value gx = kiln_graph_lookup(g, "gx"), gw = kiln_graph_lookup(g, "gw");
        ok(gx >= 0 && gw >= 0 && gx != gw &&
           g->nodes[gw].op == KILN_OP_CAST && g->nodes[gw].in[0] == gx &&
           strcmp(type_of(g, "gw", b, sizeof b), "f64[3]") == 0,
           "one gradient node for two wrt: the second name is a copy");
        ok(grad_recorded(g, "s", "x", "gx") && grad_recorded(g, "s", "w", "gw"),
           "records name the values the statement named");
        kiln_graph_free(g);
    }
    round_trip(t, "grad statements (printed expanded)");
    free(t);

    /* d = grad(...) with one wrt is an ordinary assignment */
    {
        const char *l2[] = { GHEAD, "  c = mul(y, 3.0)", "  d = grad(c, y)",
                             "  output d", "end", NULL };
        char *t2 = cat_lines(l2);
        g = parse_ok(t2, "d = grad(c, y)");
        kiln_value d = g ? kiln_graph_lookup(g, "d") : -1;
        ok(d >= 0 && g->n_outputs == 1 && g->outputs[0].value == d &&
           grad_recorded(g, "c", "y", "d"), "single-name grad");
        kiln_graph_free(g);
        free(t2);
    }

    ERR(P, "m.kg:5:11: grad: 2 names on the left but 3 values to "
        "differentiate with respect to", "grad: fewer names than wrt",
        GHEAD, "  a, bb = grad(sum(x), x, y, y)", "end");
    ERR(P, "m.kg:5:7: grad: 1 name on the left but 2 values to "
        "differentiate with respect to", "grad: one name, two wrt",
        GHEAD, "  d = grad(sum(x), x, y)", "end");
    ERR(P, "m.kg:5:13: grad: 3 names on the left but 1 value to "
        "differentiate with respect to", "grad: more names than wrt",
        GHEAD, "  a, b, c = grad(sum(x), x)", "end");
    ERR(P, "m.kg:5:7: grad: expected the cost and at least one value to "
        "differentiate with respect to: NAMES = grad(COST, X1, ...)",
        "grad: no wrt", GHEAD, "  d = grad(y)", "end");
    ERR(P, "m.kg:5:11: grad can only be used as a statement: NAMES = "
        "grad(...)", "grad nested in an expression",
        GHEAD, "  d = exp(grad(y, y))", "end");
    ERR(P, "m.kg:5:14: grad can only be used as a statement: NAMES = "
        "grad(...)", "grad in an output statement",
        GHEAD, "  output d = grad(y, y)", "end");
    ERR(P, "m.kg:5:7: grad can only be used as a statement: NAMES = "
        "grad(...)", "grad indexed",
        GHEAD, "  d = grad(sum(x), x)[0]", "end");
    ERR(P, "m.kg:5:20: grad can only be used as a statement: NAMES = "
        "grad(...)", "grad as an argument of grad",
        GHEAD, "  d = grad(sum(x), grad(y, y))", "end");
    ERR(P, "m.kg:5:18: grad: unknown keyword 'disconnect' (grad takes only "
        "disconnected=\"zero\" or disconnected=\"error\")",
        "grad: unknown keyword", GHEAD,
        "  d = grad(y, y, disconnect=\"zero\")", "end");
    ERR(P, "m.kg:5:31: grad: disconnected must be \"zero\" or \"error\", "
        "found \"ignore\"", "grad: bad disconnected value", GHEAD,
        "  d = grad(y, y, disconnected=\"ignore\")", "end");
    ERR(P, "m.kg:5:31: grad: disconnected must be \"zero\" or \"error\", "
        "found 'zero'", "grad: disconnected value not a string", GHEAD,
        "  d = grad(y, y, disconnected=zero)", "end");
    ERR(P, "m.kg:5:39: grad: disconnected given twice",
        "grad: disconnected twice", GHEAD,
        "  d = grad(y, y, disconnected=\"zero\", disconnected=\"error\")",
        "end");
    ERR(P, "m.kg:5:36: grad: positional argument after keyword argument",
        "grad: positional after keyword", GHEAD,
        "  d = grad(y, disconnected=\"zero\", y)", "end");
    ERR(P, "m.kg:5:19: expected ',' or ')' in the arguments of grad, found "
        "'y'", "grad: missing comma", GHEAD, "  d = grad(sum(x) y)", "end");
    ERR(P, "m.kg:5:10: several names on the left need grad on the right: "
        "NAME1, NAME2 = grad(COST, X1, X2)", "multi-name without grad",
        GHEAD, "  a, b = add(x, y)", "end");
    ERR(P, "m.kg:5:10: several names on the left need grad on the right: "
        "NAME1, NAME2 = grad(COST, X1, X2)", "multi-name with a name",
        GHEAD, "  a, b = grad", "end");
    ERR(P, "m.kg:5:6: expected a name after ',', found '='",
        "multi-name: trailing comma", GHEAD, "  a, = grad(y, y)", "end");
    ERR(P, "m.kg:5:8: expected ',' or '=' after a name, found 'c'",
        "multi-name: missing '='", GHEAD, "  a, b c = grad(y, y)", "end");
    ERR(KILN_ERR_NAME, "m.kg:5:6: duplicate name 'a' (first defined at line "
        "5)", "multi-name: a name twice", GHEAD,
        "  a, a = grad(sum(x), x, y)", "end");
    ERR(KILN_ERR_NAME, "m.kg:5:6: duplicate name 'x' (first defined at line "
        "3)", "multi-name: an existing name", GHEAD,
        "  a, x = grad(sum(x), x, y)", "end");
    ERR(KILN_ERR_NAME, "m.kg:5:3: duplicate name 'y' (first defined at line "
        "4)", "single name: an existing name", GHEAD,
        "  y = grad(sum(x), x)", "end");

    /* kiln_graph_grad's own errors, at the position of grad */
    ERR(KILN_ERR_TYPE, "m.kg:6:7: grad: 'c' is not an input or shared value",
        "grad: wrt not an input", GHEAD, "  c = exp(y)",
        "  d = grad(c, c)", "end");
    ERR(KILN_ERR_TYPE, "m.kg:6:10: grad: cannot differentiate with respect "
        "to 'k': it has integer dtype i64", "grad: integer wrt", GHEAD,
        "  input k: i64", "  a, b = grad(mul(y, k), y, k)", "end");
    ERR(KILN_ERR_SHAPE, "m.kg:5:7: grad: the cost must be a scalar, got "
        "shape (3)", "grad: non-scalar cost", GHEAD, "  d = grad(x, x)",
        "end");
    ERR(KILN_ERR_TYPE, "m.kg:5:10: grad: the cost does not depend on 'x'",
        "grad: disconnected (default error)", GHEAD,
        "  a, b = grad(square(y), y, x)", "end");
    ERR(KILN_ERR_TYPE, "m.kg:5:10: grad: the cost does not depend on 'x'",
        "grad: disconnected=\"error\"", GHEAD,
        "  a, b = grad(square(y), y, x, disconnected=\"error\")", "end");
    ERR(KILN_ERR_NAME, "m.kg:5:3: 'input' is a reserved word and cannot be "
        "a name", "grad: a reserved word on the left", GHEAD,
        "  input, b = grad(add(sum(x), y), x, y)", "end");
#undef GHEAD

    /* every prefix and some mutations of a file with grad statements */
    static const char gtext[] =
        "kiln 1\ngraph g\n  input x: f64[3]\n  input y: f64\n"
        "  c = add(sum(square(x)), y)\n"
        "  dx, dy = grad(c, x, y, disconnected=\"zero\")\n"
        "  d = grad(mul(c, 2), y)\n  output dx\nend\n";
    size_t n = strlen(gtext);
    char *buf = malloc(n + 8);
    int good = 1, n_ok = 0;
    for (size_t k = 0; buf && k <= n; k++) {
        memcpy(buf, gtext, k);
        buf[k] = '\0';
        good &= robust_one(buf, &n_ok);
    }
    static const char alphabet[] = "(),=\"x\n 1_g";
    for (int r = 0; buf && r < 300; r++) {
        memcpy(buf, gtext, n + 1);
        size_t at = rng() % n;
        buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
        good &= robust_one(buf, &n_ok);
    }
    ok(buf && good && n_ok >= 1, "grad text: every prefix and 300 "
       "mutations give a graph or a positioned error (%d parsed)", n_ok);
    free(buf);
}

/* Hostile text: dims in shape= that would be symbol ids, integer literals
 * past 2^53, unclosed brackets before 'end', trailing commas. */
static void test_hostile_text(void)
{
    const int P = KILN_ERR_PARSE, SH = KILN_ERR_SHAPE;
#define HHEAD "kiln 1", "graph m", "  input x: f64[6]"
    /* a negative dim other than reshape's -1 would be read as a symbol
     * id (symbol k is -2-k): refused where it is written */
    ERR(SH, "m.kg:4:27: zeros: bad dim -5 in 'shape'", "shape=[-5]", HHEAD,
        "  output o = zeros(shape=[-5])", "end");
    ERR(SH, "m.kg:4:25: reshape: bad dim -2 in 'shape'", "shape=[-2, -3]",
        HHEAD, "  y = reshape(x, shape=[-2, -3])", "end");
    ERR(SH, "m.kg:4:28: reshape: bad dim -9223372036854775808 in 'shape'",
        "shape=[n, -2^63]", HHEAD,
        "  y = reshape(x, shape=[n, -9223372036854775808])", "end");
    ERR(SH, "m.kg:4:23: zeros: bad dim -1 in 'shape' (-1 is only for "
        "reshape)", "shape=[-1] outside reshape", HHEAD,
        "  y = zeros(shape=[2, -1])", "end");
    ERR(SH, "m.kg:4:30: broadcast_to: bad dim -3 in 'shape'",
        "broadcast_to shape=[-3]", HHEAD,
        "  y = broadcast_to(x, shape=[-3, 6])", "end");
    {
        const char *l[] = { HHEAD, "  input m: f64[2, 3]",
                            "  a = reshape(x, shape=[-1, 3])",
                            "  b = sum(m, axis=[-1, -2])",
                            "  output c = transpose(m, axes=[-1, 0])",
                            "  output d = add(a, sum(b))", "end", NULL };
        char *t = cat_lines(l);
        kiln_graph *g = parse_ok(t, "-1 in reshape, negative axes in lists");
        kiln_graph_free(g);
        free(t);
    }
    /* integer literals are stored as doubles: the bound is checked on the
     * exact integer, so 2^53 + 1 (which rounds to 2^53) is refused */
    ERR(P, "m.kg:4:14: integer literal '9007199254740993' is too large (at "
        "most 2^53 = 9007199254740992 in magnitude)", "2^53 + 1", HHEAD,
        "  y = add(x, 9007199254740993)", "end");
    ERR(P, "m.kg:4:14: integer literal '-9007199254740993' is too large (at "
        "most 2^53 = 9007199254740992 in magnitude)", "-(2^53 + 1)", HHEAD,
        "  y = add(x, -9007199254740993)", "end");
    {
        const char *l[] = { HHEAD, "  a = add(x, 9007199254740992)",
                            "  output b = sub(a, -9007199254740992)", "end",
                            NULL };
        char *t = cat_lines(l);
        kiln_graph *g = parse_ok(t, "2^53 and -2^53 are integer literals");
        int found = 0;
        for (int i = 0; g && i < g->n_nodes; i++)
            if (g->nodes[i].op == KILN_OP_LITERAL &&
                fabs(g->nodes[i].value) == 9007199254740992.0)
                found++;
        ok(found == 2, "both literals are exactly +-2^53 (%d)", found);
        kiln_graph_free(g);
        free(t);
    }
    /* an unclosed ( or [ is reported where it opens, not at 'end' (which
     * the newlines-inside-brackets rule would otherwise read as a name) */
    ERR(P, "m.kg:4:15: '[' is not closed", "x[ before end", HHEAD,
        "  output o = x[", "end");
    ERR(P, "m.kg:4:10: '(' is not closed", "add( before output", HHEAD,
        "  y = add(x,", "  output o = y", "end");
    ERR(P, "m.kg:4:17: '(' is not closed", "innermost open bracket", HHEAD,
        "  y = add(x, sum(x[0:2]", "", "end");
    ERR(P, "m.kg:4:10: '(' is not closed", "( at end of file", HHEAD,
        "  y = exp(x");
    ERR(P, "m.kg:4:21: '[' is not closed", "const list before end", HHEAD,
        "  const c: f64[2] = [1, 2", "end");
    ERR(P, "m.kg:4:19: '[' is not closed", "attribute list before input",
        HHEAD, "  y = sum(x, axis=[0", "  input z: f64", "end");
    /* no trailing commas (docs/ir.md's grammar has none) */
    ERR(P, "m.kg:4:16: expected an argument after ',', found ')'",
        "add(x, 1,)", HHEAD, "  y = add(x, 1,)", "end");
    ERR(P, "m.kg:4:22: expected an integer or a dim name after ',', found "
        "']'", "axis=[0,]", HHEAD, "  y = sum(x, axis=[0,])", "end");
    ERR(P, "m.kg:4:27: expected a value after ',', found ']'",
        "const [1, 2,]", HHEAD, "  const c: f64[2] = [1, 2,]", "end");
    ERR(P, "m.kg:5:17: expected an argument after ',', found ')'",
        "grad(c, x,)", HHEAD, "  c = sum(x)", "  d = grad(c, x,)", "end");
#undef HHEAD
}

/* A model is untrusted: a NUL must not cut a data path short, and the
 * caller's read options (not the model) decide the size limit and special
 * files (issue 13). */
static int parse_fifo_model(void *arg, char *msg, size_t size)
{
    kiln_err e = {0, ""};
    kiln_graph *g = kiln_parse_file((const char *)arg, &e);
    kiln_graph_free(g);
    snprintf(msg, size, "%s", e.message);
    return g ? 0 : e.code;
}

static void test_data_trust(void)
{
    kiln_err e;
    {
        /* the path is "d.npy" then a NUL then "/../x": the old lexer kept
         * the NUL in the string and fopen read "d.npy" */
        static const char nul[] =
            "kiln 1\ngraph m\n  shared d: f64[3] = npy(\"d.npy\0/../x\")\n"
            "end\n";
        static const char npy[] =
            "\x93NUMPY\x01\x00\x76\x00{'descr': '<f8', 'fortran_order': "
            "False, 'shape': (3,), }                                     "
            "                         \n"
            "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        write_file("d.npy", npy, sizeof npy - 1);
        write_file("nulstr.kg", nul, sizeof nul - 1);
        memset(&e, 0, sizeof e);
        kiln_graph *g = kiln_parse_file(tmp_path("nulstr.kg"), &e);
        char want[700];
        snprintf(want, sizeof want, "%s:3:32: NUL byte in string",
                 tmp_path("nulstr.kg"));
        ok(!g && e.code == KILN_ERR_PARSE && strcmp(e.message, want) == 0,
           "a NUL inside a string literal is a parse error at its column");
        if (!(!g && strcmp(e.message, want) == 0))
            diag("got: %s", g ? "a graph" : e.message);
        kiln_graph_free(g);
    }
    {
        /* kiln_read_options.memfiles: data files served from memory (how a
         * BridgeStan library reads the data bound into it) */
        static const char csvb[] = "a,b\n1.5,x\n-2,y\n";
        kiln_memfile mf = { "/nowhere/v.csv", csvb, sizeof csvb - 1 };
        kiln_read_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.memfiles = &mf;
        o.n_memfiles = 1;
        o.memfiles_only = 1;
        static const char m[] =
            "kiln 1\ngraph m\n  shared d: f64[n] = csv(\"v.csv\", \"a\")\n"
            "end\n";
        memset(&e, 0, sizeof e);
        kiln_graph *g = kiln_parse_string_opts(m, "m.kg", "/nowhere", &o, &e);
        const kiln_node *nd = g ? &g->nodes[0] : NULL;
        ok(nd && nd->data && nd->vshape[0] == 2 &&
               ((const double *)nd->data)[0] == 1.5 &&
               ((const double *)nd->data)[1] == -2,
           "memfiles: csv() of a path that does not exist is read from "
           "memory: [1.5, -2]");
        if (!g)
            diag("%s", e.message);
        kiln_graph_free(g);
        /* memfiles_only: a path not among them is refused, not read */
        write_file("real.csv", "a\n1\n", 4);
        static const char m2[] =
            "kiln 1\ngraph m\n  shared d: f64[n] = csv(\"real.csv\", "
            "\"a\")\nend\n";
        g = kiln_parse_string_opts(m2, "m.kg", tmpdir, &o, &e);
        char want[900];
        snprintf(want, sizeof want, "m.kg:3:22: %s/real.csv: not a data "
                 "file bound into the model", tmpdir);
        ok(!g && e.code == KILN_ERR_IO && strcmp(e.message, want) == 0,
           "memfiles_only: a file on disk that is not bound is refused");
        if (g || strcmp(e.message, want))
            diag("%s", g ? "parsed" : e.message);
        kiln_graph_free(g);
        o.memfiles_only = 0;
        g = kiln_parse_string_opts(m2, "m.kg", tmpdir, &o, &e);
        ok(g != NULL, "without memfiles_only, other files are read from "
           "disk");
        kiln_graph_free(g);
    }
    {
        /* the caller's size limit, reported at the data call */
        kiln_read_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.max_size = 50;
        write_file("lim.csv", "a\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"
                   "13\n14\n15\n16\n17\n18\n19\n20\n", 53);
        static const char m[] =
            "kiln 1\ngraph m\n  shared d: f64[n] = csv(\"lim.csv\", \"a\")\n"
            "end\n";
        memset(&e, 0, sizeof e);
        kiln_graph *g = kiln_parse_string_opts(m, "m.kg", tmpdir, &o, &e);
        char want[900];
        snprintf(want, sizeof want, "m.kg:3:22: %s/lim.csv: 53 bytes is "
                 "over the data size limit of 50 bytes (raise it with "
                 "KILN_DATA_MAX_SIZE=SIZE, kiln run --data-max-size SIZE or "
                 "kiln_read_options.max_size)", tmpdir);
        ok(!g && e.code == KILN_ERR_PARSE && strcmp(e.message, want) == 0,
           "kiln_parse_string_opts: the caller's limit, at the csv call");
        if (g || strcmp(e.message, want) != 0)
            diag("got: %s", g ? "a graph" : e.message);
        kiln_graph_free(g);
        o.max_size = 53;
        g = kiln_parse_string_opts(m, "m.kg", tmpdir, &o, &e);
        ok(g != NULL, "... and read when the limit allows it");
        kiln_graph_free(g);
    }
    {
        /* a model naming a FIFO: refused at once (the old parser's probe
         * blocked in fopen forever) */
        char *fifo = tmp_path("data.fifo");
        unlink(fifo);
        if (mkfifo(fifo, 0600) != 0) {
            ok(1, "# SKIP mkfifo failed");
        } else {
            static const char m[] =
                "kiln 1\ngraph m\n  shared d: f64[n] = npy(\"data.fifo\")\n"
                "end\n";
            write_file("fifo.kg", m, sizeof m - 1);
            char path[600], msg[1100];
            snprintf(path, sizeof path, "%s", tmp_path("fifo.kg"));
            int rc = guarded(parse_fifo_model, path, 10, msg, sizeof msg);
            ok(rc == KILN_ERR_IO && strstr(msg, ":3:22: ") &&
                   strstr(msg, "data.fifo: is a FIFO; "),
               "a model naming a FIFO is refused without blocking");
            diag("rc %d: %s", rc, msg);
            unlink(tmp_path("data.fifo"));
        }
    }
}

/* `param NAME: TYPE [lower=L] [upper=U]` and `output tp|gq NAME`
 * (core/ir/param.c; docs/ir.md "Parameters"). */
static void test_params(void)
{
    /* `output tp` and `output gq = ...` are outputs named tp and gq,
     * `param = ...` an assignment: keywords only before a name */
    const char *lines2[] = {
        "kiln 1", "graph m",
        "  param a: f64[3]",
        "  tp = sum(a)",
        "  param = mul(tp, 2)",
        "  output tp",
        "  output gq = param",
        "end", NULL};
    char *t = cat_lines(lines2);
    kiln_graph *g2 = parse_ok(t, "tp, gq and param are names elsewhere");
    free(t);
    if (g2) {
        ok(kiln_graph_output_kind(g2, "tp") == KILN_OUTPUT_PLAIN &&
               kiln_graph_output_kind(g2, "gq") == KILN_OUTPUT_PLAIN &&
               kiln_graph_lookup(g2, "param") >= 0,
           "output tp / output gq = ... / param = ... keep their old meaning");
        kiln_graph_free(g2);
    }
    const char *lines3[] = {
        "kiln 1", "graph m",
        "  param a: f64[3]",
        "  param tau: f64 lower=0",
        "  const hi: f64 = 3.5",
        "  param rho: f64 lower=-1 upper=1",
        "  param s: f64[2] upper=hi",
        "  param w: f32 lower=-0.5",
        "  theta = add(a, tau)",
        "  output logp = add(sum(theta), add(rho, sum(s)))",
        "  output tp th = theta",
        "  output gq s2 = mul(s, 2)",
        "end", NULL};
    t = cat_lines(lines3);
    kiln_graph *g = parse_ok(t, "parameters with bounds");
    round_trip(t, "parameters");
    free(t);
    if (g) {
        const char *name;
        kiln_value unc, val, lj;
        ok(kiln_graph_n_params(g) == 5, "five parameters");
        kiln_graph_param_info(g, 0, &name, &unc, &val, &lj);
        ok(strcmp(name, "a") == 0 && unc == val && lj == -1 &&
               unc == kiln_graph_lookup(g, "a"),
           "an unbounded parameter is its input, without a log-Jacobian");
        kiln_graph_param_info(g, 1, &name, &unc, &val, &lj);
        ok(strcmp(name, "tau") == 0 && unc == kiln_graph_lookup(g, "tau_unc") &&
               val == kiln_graph_lookup(g, "tau") && lj >= 0 && unc != val,
           "a bounded parameter: input tau_unc, value tau, a log-Jacobian");
        char b1[64], b2[64];
        ok(strcmp(type_of(g, "w", b1, sizeof b1), "f32") == 0 &&
               strcmp(type_of(g, "s", b2, sizeof b2), "f64[2]") == 0,
           "constrained values keep the declared type");
        ok(kiln_graph_param_info(g, 5, NULL, NULL, NULL, NULL) ==
               KILN_ERR_ARG, "param_info out of range is KILN_ERR_ARG");
        ok(kiln_graph_output_kind(g, "th") == KILN_OUTPUT_TP &&
               kiln_graph_output_kind(g, "s2") == KILN_OUTPUT_GQ &&
               kiln_graph_output_kind(g, "logp") == KILN_OUTPUT_PLAIN,
           "output kinds tp, gq and plain");
        kiln_err e;
        char *s = kiln_graph_print(g, &e);
        ok(s && strstr(s, "  param tau: f64 lower=0\n") &&
               strstr(s, "  param rho: f64 lower=-1 upper=1\n") &&
               strstr(s, "  param s: f64[2] upper=hi\n") &&
               strstr(s, "  param w: f32 lower=-0.5\n") &&
               strstr(s, "  output tp th = theta\n") &&
               strstr(s, "  output gq s2\n") && !strstr(s, "exp("),
           "printed as param lines, transforms not repeated");
        free(s);
        kiln_graph_free(g);
    }
    /* a gradient through a transform: its nodes are printed as ordinary
     * lines and the text parses back to a graph that prints the same */
    const char *lines4[] = {
        "kiln 1", "graph m",
        "  param tau: f64 lower=1 upper=3",
        "  lp = mul(-0.5, square(tau))",
        "  d = grad(lp, tau_unc)",
        "  output lp",
        "  output d",
        "end", NULL};
    t = cat_lines(lines4);
    kiln_err e;
    kiln_graph *g4 = kiln_parse_string(t, "m.kg", tmpdir, &e);
    char *s1 = g4 ? kiln_graph_print(g4, &e) : NULL;
    kiln_graph *g5 = s1 ? kiln_parse_string(s1, "p.kg", tmpdir, &e) : NULL;
    char *s2 = g5 ? kiln_graph_print(g5, &e) : NULL;
    if (!ok(s1 && s2 && strcmp(s1, s2) == 0 &&
                kiln_graph_n_params(g5) == 1,
            "a gradient through a bounded parameter prints and re-parses"))
        diag("%s\n---\n%s", s1 ? s1 : e.message, s2 ? s2 : "");
    free(s1);
    free(s2);
    kiln_graph_free(g4);
    kiln_graph_free(g5);
    free(t);

    /* upper=-0.0 printed as "upper=-0", which parses as the integer 0 and
     * prints "upper=0": printing was not stable */
    const char *lines6[] = {
        "kiln 1", "graph m",
        "  param t: f64 upper=-0.0",
        "  param v: f64 lower=-0",
        "  output lp = mul(t, v)",
        "end", NULL};
    t = cat_lines(lines6);
    round_trip(t, "bounds -0.0 and -0");
    free(t);

    ERR(KILN_ERR_TYPE, "m.kg:3:9: param 'k': dtype i64: a parameter is f64 "
        "or f32", "integer parameter", "kiln 1", "graph m",
        "  param k: i64", "end");
    ERR(KILN_ERR_PARSE, "m.kg:3:24: param: lower given twice",
        "lower twice", "kiln 1", "graph m",
        "  param k: f64 lower=0 lower=1", "end");
    ERR(KILN_ERR_PARSE, "m.kg:3:22: param: a bound is a number or a name, "
        "found 'true'", "bool bound", "kiln 1", "graph m",
        "  param k: f64 lower=true", "end");
    ERR(KILN_ERR_PARSE, "m.kg:3:22: param: a bound is a number or a name, "
        "found 'nan'", "nan bound", "kiln 1", "graph m",
        "  param k: f64 lower=nan", "end");
    ERR(KILN_ERR_NAME, "m.kg:3:22: undefined name 'L'", "undefined bound",
        "kiln 1", "graph m", "  param k: f64 lower=L", "end");
    ERR(KILN_ERR_SHAPE, "m.kg:4:9: param 'k': bound 'v' must be a scalar, "
        "got shape (2)", "vector bound", "kiln 1", "graph m",
        "  const v: f64[2] = [1, 2]", "  param k: f64 upper=v", "end");
    ERR(KILN_ERR_ARG, "m.kg:3:9: param 'k': lower bound 2 is not below the "
        "upper bound 1", "lower >= upper", "kiln 1", "graph m",
        "  param k: f64 lower=2 upper=1", "end");
    ERR(KILN_ERR_ARG, "m.kg:3:9: param 'k': upper bound 1e+308 minus lower "
        "bound -1e+308 overflows (the width must be finite)",
        "bounds whose width overflows", "kiln 1", "graph m",
        "  param k: f64 lower=-1e308 upper=1e308", "end");
    ERR(KILN_ERR_PARSE, "m.kg:3:16: expected lower=BOUND, upper=BOUND, a "
        "transform (simplex, ordered, ...) or end of line, found 'low'",
        "unknown keyword", "kiln 1", "graph m",
        "  param k: f64 low=1", "end");
    ERR(KILN_ERR_PARSE, "m.kg:3:19: param: a simplex takes no bounds",
        "a transform with a bound", "kiln 1", "graph m",
        "  param s: f64[3] simplex lower=0", "end");
    ERR(KILN_ERR_PARSE, "m.kg:3:35: bound expression: expected a number, a "
        "name or '('", "a bound expression cut short", "kiln 1", "graph m",
        "  param k: f64 lower=0 upper=(1 - )", "end");
    ERR(KILN_ERR_NAME, "m.kg:3:33: undefined name 'alpha'",
        "a bound expression naming nothing", "kiln 1", "graph m",
        "  param k: f64 lower=0 upper=(1-alpha)", "end");
    ERR(KILN_ERR_NAME, "m.kg:4:9: duplicate name 'k_unc'",
        "the unconstrained name is taken", "kiln 1", "graph m",
        "  input k_unc: f64", "  param k: f64 lower=0", "end");
    ERR(KILN_ERR_NAME, "m.kg:4:9: duplicate name 'k' (first defined at line 3)",
        "a parameter's name is taken", "kiln 1", "graph m",
        "  input k: f64", "  param k: f64 lower=0", "end");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kiln-test-parse-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! cannot create a temporary directory\n");
        return 1;
    }
    write_file("data.csv", "a,b\n1,2\n3,4\n", 12);
    write_file("bad.npy", "not an npy file at all", 22);
    write_npy_f64("three.npy", 3, 10.0);
    write_npy_f64("four.npy", 4, 0.0);

    test_eight_schools();
    test_errors();
    test_statements();
    test_ops();
    test_printing();
    test_wide();
    test_robustness();
    test_grad_statement();
    test_hostile_text();
    test_data_trust();
    test_params();

    const char *files[] = { "data.csv", "bad.npy", "three.npy", "four.npy",
                            "f.kg", "nul.kg", NULL };
    for (int i = 0; files[i]; i++)
        unlink(tmp_path(files[i]));
    rmdir(tmpdir);
    return done_testing();
}
