/*
 * test_builder.c — the C builder API of <kiln/graph.h> and the IR helpers
 * of core/ir/ir.c: every builder function and its errors, names and outputs,
 * cloning, and that a graph built in C prints exactly like the same graph
 * parsed from text.
 */
#include <kiln/graph.h>
#include "ir.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_err(kiln_value v, const kiln_err *e, int code, const char *msg)
{
    if (v >= 0 || e->code != code || (msg && strcmp(e->message, msg) != 0)) {
        diag("got value %d code %d \"%s\"; want code %d \"%s\"", (int)v,
             e->code, e->message, code, msg ? msg : "*");
        return 0;
    }
    return 1;
}

static const char *tstr(const kiln_graph *g, kiln_value v, char *b, size_t n)
{
    if (v < 0 || v >= g->n_nodes)
        return "(bad)";
    return kiln_ir_type_str(g, &g->nodes[v].type, b, n);
}

static kiln_attr attr_int(const char *key, int64_t i)
{
    kiln_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.kind = KILN_ATTR_INT;
    a.i = i;
    return a;
}

static kiln_value op1(kiln_graph *g, const char *op, kiln_value a,
                      kiln_err *e)
{
    return kiln_graph_op(g, op, 1, &a, NULL, 0, e);
}

static kiln_value op2(kiln_graph *g, const char *op, kiln_value a,
                      kiln_value b, kiln_err *e)
{
    kiln_value in[2] = { a, b };
    return kiln_graph_op(g, op, 2, in, NULL, 0, e);
}

/* ---- basics --------------------------------------------------------- */

static void test_helpers(void)
{
    ok(strcmp(kiln_dtype_name(KILN_F64), "f64") == 0 &&
       strcmp(kiln_dtype_name(KILN_BOOL), "bool") == 0 &&
       strcmp(kiln_dtype_name((kiln_dtype)99), "?") == 0, "dtype names");
    ok(kiln_dtype_size(KILN_F64) == 8 && kiln_dtype_size(KILN_F32) == 4 &&
       kiln_dtype_size(KILN_I64) == 8 && kiln_dtype_size(KILN_I32) == 4 &&
       kiln_dtype_size(KILN_BOOL) == 1 && kiln_dtype_size((kiln_dtype)-1) == 0,
       "dtype sizes");
    kiln_dtype d = KILN_F64;
    ok(kiln_dtype_parse("i32", &d) == 0 && d == KILN_I32 &&
       kiln_dtype_parse("float", &d) == -1 && d == KILN_I32 &&
       kiln_dtype_parse(NULL, &d) == -1, "dtype parse");
    int64_t s[3] = { 2, 3, 4 };
    int64_t big[2] = { INT64_MAX, 2 };
    int64_t neg[2] = { 3, -2 };
    int64_t zero[2] = { 0, INT64_MAX };
    ok(kiln_shape_numel(0, NULL) == 1 && kiln_shape_numel(3, s) == 24 &&
       kiln_shape_numel(2, big) == -1 && kiln_shape_numel(2, neg) == -1 &&
       kiln_shape_numel(2, zero) == 0, "shape numel (1 for rank 0, -1 on "
       "overflow or symbolic dims)");

    kiln_err e;
    memset(&e, 0, sizeof e);
    ok(kiln_seterr(&e, KILN_ERR_SHAPE, "x %d", 5) == KILN_ERR_SHAPE &&
       e.code == KILN_ERR_SHAPE && strcmp(e.message, "x 5") == 0, "seterr");
    kiln_err_prefix(&e, "f.kg:%d:%d: ", 3, 4);
    ok(strcmp(e.message, "f.kg:3:4: x 5") == 0 && e.code == KILN_ERR_SHAPE,
       "err prefix keeps the code");
    ok(kiln_seterr(NULL, KILN_ERR_IO, "nothing") == KILN_ERR_IO,
       "seterr with NULL err returns the code");
    kiln_err_prefix(NULL, "x");
    kiln_seterr(&e, KILN_ERR_ARG, "%s %s", e.message, e.message);
    ok(strcmp(e.message, "f.kg:3:4: x 5 f.kg:3:4: x 5") == 0,
       "seterr may format its own message");
    char longs[2000];
    memset(longs, 'a', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    kiln_seterr(&e, KILN_ERR_ARG, "%s", longs);
    kiln_err_prefix(&e, "p: ");
    ok(strlen(e.message) == sizeof e.message - 1 &&
       strncmp(e.message, "p: aaa", 6) == 0, "long messages are truncated");
}

static void test_graph_and_symbols(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new(NULL, &e);
    ok(g && strcmp(kiln_graph_name(g), "main") == 0 &&
       kiln_graph_n_nodes(g) == 0, "new graph: default name, no nodes");
    kiln_graph_free(g);
    kiln_graph_free(NULL);
    g = kiln_graph_new("model", &e);
    ok(strcmp(kiln_graph_name(g), "model") == 0, "graph name is copied");
    int64_t n = kiln_graph_symbol(g, "n");
    int64_t m = kiln_graph_symbol(g, "m");
    ok(n <= -2 && m <= -2 && n != m && kiln_graph_symbol(g, "n") == n,
       "symbols: <= -2, one id per name");
    int64_t anon = kiln_graph_symbol(g, NULL);
    ok(anon <= -2 && anon != n && anon != m &&
       g->symbols[KILN_SYM_INDEX(anon)] == NULL,
       "symbol(NULL) is a fresh anonymous symbol");
    char b[64];
    ok(strcmp(kiln_ir_dim_str(g, n, b, sizeof b), "n") == 0 &&
       strcmp(kiln_ir_dim_str(g, 7, b, sizeof b), "7") == 0 &&
       strcmp(kiln_ir_dim_str(g, anon, b, sizeof b), "?") == 0 &&
       strcmp(kiln_ir_dim_str(g, -999, b, sizeof b), "?") == 0 &&
       strcmp(kiln_ir_dim_str(NULL, n, b, sizeof b), "?") == 0,
       "dim strings");
    int64_t dims[3] = { 3, n, anon };
    ok(strcmp(kiln_ir_shape_str(g, 3, dims, b, sizeof b), "(3, n, ?)") == 0 &&
       strcmp(kiln_ir_shape_str(g, 1, dims, b, sizeof b), "(3)") == 0 &&
       strcmp(kiln_ir_shape_str(g, 0, NULL, b, sizeof b), "()") == 0,
       "shape strings");
    kiln_type t;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = 2;
    t.dims[0] = 3;
    t.dims[1] = n;
    ok(strcmp(kiln_ir_type_str(g, &t, b, sizeof b), "f64[3, n]") == 0,
       "type string");
    t.rank = 0;
    ok(strcmp(kiln_ir_type_str(g, &t, b, sizeof b), "f64") == 0,
       "type string of a scalar");
    char tiny[5];
    t.rank = 2;
    ok(strlen(kiln_ir_type_str(g, &t, tiny, sizeof tiny)) == 4,
       "type string truncates safely");
    kiln_graph_free(g);
}

/* ---- declarations --------------------------------------------------- */

static void test_inputs(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("g", &e);
    char b[64];
    int64_t n = kiln_graph_symbol(g, "n");
    int64_t d1[2] = { n, 3 };
    kiln_value x = kiln_graph_input(g, "x", KILN_F64, 2, d1, &e);
    ok(x == 0 && strcmp(tstr(g, x, b, sizeof b), "f64[n, 3]") == 0,
       "input with a named symbol");
    ok(kiln_graph_lookup(g, "x") == x && g->nodes[x].op == KILN_OP_INPUT,
       "input is looked up by name");
    int64_t du[3] = { KILN_DIM_UNKNOWN, KILN_DIM_UNKNOWN, 2 };
    kiln_value u = kiln_graph_input(g, "u", KILN_I32, 3, du, &e);
    ok(u == 1 && KILN_DIM_IS_SYM(g->nodes[u].type.dims[0]) &&
       KILN_DIM_IS_SYM(g->nodes[u].type.dims[1]) &&
       g->nodes[u].type.dims[0] != g->nodes[u].type.dims[1] &&
       strcmp(tstr(g, u, b, sizeof b), "i32[?, ?, 2]") == 0,
       "each unknown dim becomes its own anonymous symbol");
    kiln_value s = kiln_graph_input(g, "s", KILN_BOOL, 0, NULL, &e);
    ok(s == 2 && strcmp(tstr(g, s, b, sizeof b), "bool") == 0,
       "scalar input with NULL dims");

    int nn = kiln_graph_n_nodes(g);
    ok(is_err(kiln_graph_input(g, "x", KILN_F64, 0, NULL, &e), &e,
              KILN_ERR_NAME, "duplicate name 'x'"), "duplicate input");
    ok(is_err(kiln_graph_input(g, "y", (kiln_dtype)7, 0, NULL, &e), &e,
              KILN_ERR_ARG, "input 'y': bad dtype 7"), "bad dtype");
    int64_t d9[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    ok(is_err(kiln_graph_input(g, "y", KILN_F64, 9, d9, &e), &e,
              KILN_ERR_ARG, "input 'y': rank 9 is out of range (0 to 8)"),
       "rank 9");
    ok(is_err(kiln_graph_input(g, "y", KILN_F64, -1, NULL, &e), &e,
              KILN_ERR_ARG, NULL), "negative rank");
    int64_t dbad[1] = { -57 };
    ok(is_err(kiln_graph_input(g, "y", KILN_F64, 1, dbad, &e), &e,
              KILN_ERR_ARG, "input 'y': dim 0 (-57) is neither a size, "
              "KILN_DIM_UNKNOWN nor a symbol of this graph"),
       "dim that is not a symbol");
    ok(is_err(kiln_graph_input(g, "y", KILN_F64, 2, NULL, &e), &e,
              KILN_ERR_ARG, "input 'y': dims are NULL"), "NULL dims");
    ok(is_err(kiln_graph_input(g, "2y", KILN_F64, 0, NULL, &e), &e,
              KILN_ERR_NAME, "invalid input name '2y' (names are letters, "
              "digits and '_', not starting with a digit)"),
       "name starting with a digit");
    ok(is_err(kiln_graph_input(g, "a b", KILN_F64, 0, NULL, &e), &e,
              KILN_ERR_NAME, NULL), "name with a space");
    ok(is_err(kiln_graph_input(g, "nan", KILN_F64, 0, NULL, &e), &e,
              KILN_ERR_NAME, "'nan' is a reserved word and cannot be a name"), "reserved name");
    ok(is_err(kiln_graph_input(g, NULL, KILN_F64, 0, NULL, &e), &e,
              KILN_ERR_ARG, "input name is NULL"), "NULL name");
    ok(is_err(kiln_graph_input(NULL, "y", KILN_F64, 0, NULL, &e), &e,
              KILN_ERR_ARG, NULL), "NULL graph");
    ok(kiln_graph_n_nodes(g) == nn, "failed declarations add no node");
    ok(kiln_graph_input(g, "y", KILN_F64, 0, NULL, NULL) == nn,
       "NULL err is allowed");
    kiln_graph_free(g);
}

static void test_shared_const(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("g", &e);
    int64_t n = kiln_graph_symbol(g, "n");
    double vals[4] = { 1, 2, 3, 4 };
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = 1;
    t.shape[0] = 4;
    t.data = vals;
    int64_t dn[1] = { n };
    kiln_value s = kiln_graph_shared(g, "s", KILN_F64, 1, dn, &t, &e);
    vals[0] = 100;
    ok(s >= 0 && g->nodes[s].op == KILN_OP_SHARED && g->nodes[s].nbytes == 32 &&
       ((double *)g->nodes[s].data)[0] == 1 && g->nodes[s].vshape[0] == 4 &&
       g->nodes[s].type.dims[0] == n, "shared: data copied, symbol kept, "
       "concrete shape in vshape");
    kiln_value s2 = kiln_graph_shared(g, "s2", KILN_F64, 1, dn, NULL, &e);
    ok(s2 >= 0 && g->nodes[s2].data == NULL, "shared without a value");
    t.shape[0] = 3;
    ok(is_err(kiln_graph_shared(g, "s3", KILN_F64, 1, dn, &t, &e), &e,
              KILN_ERR_SHAPE, "shared 's3': value has shape (3) but symbol "
              "'n' is 4 in shared 's'"), "symbol bound twice differently");
    int64_t d4[1] = { 4 };
    ok(is_err(kiln_graph_shared(g, "s3", KILN_F64, 1, d4, &t, &e), &e,
              KILN_ERR_SHAPE, "shared 's3': value has shape (3), declared "
              "(4)"), "static dim differs");
    ok(is_err(kiln_graph_shared(g, "s3", KILN_F32, 1, d4, &t, &e), &e,
              KILN_ERR_TYPE, "shared 's3': value has dtype f64, declared "
              "f32"), "dtype differs");
    int64_t dnn[2] = { n, n };
    t.rank = 2;
    t.shape[0] = 4;
    t.shape[1] = 2;
    ok(is_err(kiln_graph_shared(g, "s3", KILN_F64, 2, dnn, &t, &e), &e,
              KILN_ERR_SHAPE, "shared 's3': value has shape (4, 2) but "
              "declared (n, n) needs dims 0 and 1 equal"),
       "one symbol twice in one shape");
    t.data = NULL;
    t.rank = 1;
    t.shape[0] = 4;
    ok(is_err(kiln_graph_shared(g, "s3", KILN_F64, 1, dn, &t, &e), &e,
              KILN_ERR_ARG, "shared 's3': value has no data"), "NULL data");
    t.data = vals;
    int64_t du[1] = { KILN_DIM_UNKNOWN };
    t.shape[0] = 2;
    kiln_value s4 = kiln_graph_shared(g, "s4", KILN_F64, 1, du, &t, &e);
    ok(s4 >= 0 && g->nodes[s4].vshape[0] == 2 &&
       KILN_DIM_IS_SYM(g->nodes[s4].type.dims[0]),
       "shared with '?' takes the value's size");

    int64_t dc[2] = { 2, 2 };
    int32_t iv[4] = { 1, -2, 3, 4 };
    kiln_value c = kiln_graph_const(g, "c", KILN_I32, 2, dc, iv, &e);
    iv[0] = 9;
    ok(c >= 0 && g->nodes[c].op == KILN_OP_CONST && g->nodes[c].nbytes == 16 &&
       ((int32_t *)g->nodes[c].data)[0] == 1 && g->nodes[c].vshape[1] == 2,
       "const: data copied");
    ok(is_err(kiln_graph_const(g, "c2", KILN_F64, 1, dn, vals, &e), &e,
              KILN_ERR_ARG, "const 'c2': dim 0 must be static (a constant "
              "has a known shape)"), "symbolic const dim");
    ok(is_err(kiln_graph_const(g, "c2", KILN_F64, 2, dc, NULL, &e), &e,
              KILN_ERR_ARG, "const 'c2': data is NULL"), "NULL const data");
    unsigned char bb[2] = { 1, 2 };
    int64_t d2[1] = { 2 };
    ok(is_err(kiln_graph_const(g, "c2", KILN_BOOL, 1, d2, bb, &e), &e,
              KILN_ERR_ARG, "const 'c2': bool element 1 is 2 (must be 0 or "
              "1)"), "bool const must be 0/1");
    int64_t d0[1] = { 0 };
    kiln_value c0 = kiln_graph_const(g, "c0", KILN_F64, 1, d0, NULL, &e);
    ok(c0 >= 0 && g->nodes[c0].nbytes == 0, "empty const with NULL data");
    ok(is_err(kiln_graph_const(g, "c", KILN_F64, 0, NULL, vals, &e), &e,
              KILN_ERR_NAME, "duplicate name 'c'"), "duplicate const");
    kiln_graph_free(g);
}

static void test_literals(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("g", &e);
    char b[64];
    kiln_value i = kiln_graph_literal(g, 3, KILN_LIT_INT, &e);
    kiln_value f = kiln_graph_literal(g, 0.5, KILN_LIT_FLOAT, &e);
    kiln_value t = kiln_graph_literal(g, 1, KILN_LIT_BOOL, &e);
    kiln_value in = kiln_graph_literal(g, -INFINITY, KILN_LIT_FLOAT, &e);
    ok(i >= 0 && strcmp(tstr(g, i, b, sizeof b), "i64") == 0 &&
       g->nodes[i].weak && g->nodes[i].op == KILN_OP_LITERAL &&
       g->nodes[i].value == 3 && g->nodes[i].lit_kind == KILN_LIT_INT,
       "int literal: weak i64");
    ok(f >= 0 && strcmp(tstr(g, f, b, sizeof b), "f64") == 0 && g->nodes[f].weak,
       "float literal: weak f64");
    ok(t >= 0 && strcmp(tstr(g, t, b, sizeof b), "bool") == 0, "bool literal");
    ok(in >= 0 && isinf(g->nodes[in].value), "infinite float literal");
    ok(is_err(kiln_graph_literal(g, 1.5, KILN_LIT_INT, &e), &e, KILN_ERR_ARG,
              "integer literal 1.5 is not an integer of at most 2^53 in "
              "magnitude"), "non-integral int literal");
    ok(is_err(kiln_graph_literal(g, 1e300, KILN_LIT_INT, &e), &e,
              KILN_ERR_ARG, NULL), "huge int literal");
    ok(is_err(kiln_graph_literal(g, NAN, KILN_LIT_INT, &e), &e, KILN_ERR_ARG,
              NULL), "nan int literal");
    ok(is_err(kiln_graph_literal(g, 2, KILN_LIT_BOOL, &e), &e, KILN_ERR_ARG,
              "bool literal must be 0 or 1, got 2"), "bool literal 2");
    ok(is_err(kiln_graph_literal(g, 2, (kiln_literal_kind)7, &e), &e,
              KILN_ERR_ARG, "bad literal kind 7"), "bad kind");
    kiln_graph_free(g);
}

/* ---- ops ------------------------------------------------------------ */

static void test_ops(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("g", &e);
    char b[64];
    int64_t d3[1] = { 3 }, d4[1] = { 4 }, d23[2] = { 2, 3 };
    kiln_value a = kiln_graph_input(g, "a", KILN_F64, 1, d3, &e);
    kiln_value c = kiln_graph_input(g, "c", KILN_F64, 1, d4, &e);
    kiln_value m = kiln_graph_input(g, "m", KILN_F32, 2, d23, &e);
    kiln_value k = kiln_graph_input(g, "k", KILN_I64, 1, d3, &e);
    kiln_value one = kiln_graph_literal(g, 1, KILN_LIT_INT, &e);

    kiln_value v = op2(g, "add", m, one, &e);
    ok(v >= 0 && strcmp(tstr(g, v, b, sizeof b), "f32[2, 3]") == 0 &&
       !g->nodes[v].weak, "f32 + int literal -> f32 (NEP 50)");
    kiln_value half = kiln_graph_literal(g, 0.5, KILN_LIT_FLOAT, &e);
    v = op2(g, "mul", k, half, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f64[3]") == 0,
       "i64 * float literal -> f64");
    v = op2(g, "add", one, half, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f64") == 0 && g->nodes[v].weak,
       "literal + literal stays weak");
    v = op2(g, "add", a, m, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f64[2, 3]") == 0,
       "broadcast (3) with (2, 3)");

    int nn = kiln_graph_n_nodes(g);
    ok(is_err(op2(g, "foo", a, a, &e), &e, KILN_ERR_TYPE,
              "unknown op 'foo'"), "unknown op");
    ok(is_err(op2(g, "input", a, a, &e), &e, KILN_ERR_TYPE,
              "unknown op 'input'"), "declarations are not ops");
    ok(is_err(op2(g, "add", a, c, &e), &e, KILN_ERR_SHAPE,
              "add: cannot broadcast shapes (3) and (4)"), "broadcast error");
    ok(is_err(op1(g, "add", a, &e), &e, KILN_ERR_TYPE,
              "add: expected at least 2 inputs, got 1"), "arity error");
    ok(is_err(op2(g, "add", a, 999, &e), &e, KILN_ERR_ARG,
              "add: input 2 (id 999) is not a value of this graph"),
       "input id out of range");
    ok(is_err(op2(g, "add", -1, a, &e), &e, KILN_ERR_ARG, NULL),
       "negative input id");
    ok(is_err(kiln_graph_op(g, "add", 2, NULL, NULL, 0, &e), &e, KILN_ERR_ARG,
              NULL), "NULL input list");
    kiln_attr bad = attr_int("axs", 0);
    ok(is_err(kiln_graph_op(g, "sum", 1, &a, &bad, 1, &e), &e, KILN_ERR_TYPE,
              "sum: unknown attribute 'axs'"), "unknown attribute");
    ok(is_err(kiln_graph_op(g, "subtensor", 1, &a, NULL, 0, &e), &e,
              KILN_ERR_TYPE, "subtensor: needs an index; build it with "
              "kiln_graph_subtensor"), "subtensor needs the index builder");
    ok(is_err(kiln_graph_op(NULL, "add", 1, &a, NULL, 0, &e), &e,
              KILN_ERR_ARG, NULL), "NULL graph");
    ok(kiln_graph_n_nodes(g) == nn, "failed ops add no node");

    kiln_attr ax = attr_int("axis", 1);
    v = kiln_graph_op(g, "sum", 1, &m, &ax, 1, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f32[2]") == 0, "sum with axis");
    kiln_value jin[3] = { a, c, a };
    kiln_attr ax0 = attr_int("axis", 0);
    v = kiln_graph_op(g, "join", 3, jin, &ax0, 1, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f64[10]") == 0, "join");
    kiln_value tin[2] = { m, k };
    kiln_attr axm = attr_int("axis", -1);
    v = kiln_graph_op(g, "take", 2, tin, &axm, 1, &e);
    ok(v >= 0 && strcmp(tstr(g, v, b, sizeof b), "f32[2, 3]") == 0 &&
       g->nodes[v].attrs->axes[0] == 1, "take: negative axis is stored "
       "non-negative");
    v = kiln_graph_op(g, "take", 2, tin, NULL, 0, &e);
    ok(v >= 0 && g->nodes[v].attrs->has_axes && g->nodes[v].attrs->axes[0] == 0,
       "take: default axis 0 is stored");
    kiln_attr sh[2];
    int64_t shape[2] = { 3, 2 };
    memset(sh, 0, sizeof sh);
    sh[0].key = "shape";
    sh[0].kind = KILN_ATTR_INTS;
    sh[0].n = 2;
    sh[0].ints = shape;
    v = kiln_graph_op(g, "reshape", 1, &m, sh, 1, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f32[3, 2]") == 0, "reshape");
    sh[1].key = "dtype";
    sh[1].kind = KILN_ATTR_DTYPE;
    sh[1].i = KILN_BOOL;
    v = kiln_graph_op(g, "zeros", 0, NULL, sh, 2, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "bool[3, 2]") == 0,
       "zeros with no inputs");

    /* wide: one op with 3000 inputs */
    kiln_value *many = malloc(3000 * sizeof *many);
    for (int i = 0; i < 3000; i++)
        many[i] = i % 2 ? a : c;
    v = kiln_graph_op(g, "join", 3000, many, &ax0, 1, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f64[10500]") == 0 &&
       g->nodes[v].n_in == 3000, "join of 3000 inputs");
    free(many);
    kiln_graph_free(g);
}

static void test_indexing(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("g", &e);
    char b[64];
    int64_t d[2] = { 4, 5 }, di[1] = { 2 };
    kiln_value x = kiln_graph_input(g, "x", KILN_F64, 2, d, &e);
    kiln_value idx = kiln_graph_input(g, "i", KILN_I32, 1, di, &e);
    kiln_value fi = kiln_graph_input(g, "f", KILN_F64, 1, di, &e);
    kiln_index ix[3];
    memset(ix, 0, sizeof ix);
    ix[0].kind = KILN_INDEX_SLICE;
    ix[0].start = 1;
    ix[0].has_start = 1;
    ix[0].stop = 3;
    ix[0].has_stop = 1;
    ix[1].kind = KILN_INDEX_INT;
    ix[1].start = -1;
    ix[1].stop = 77;     /* ignored for an integer index */
    ix[1].has_step = 1;
    kiln_value v = kiln_graph_subtensor(g, x, 2, ix, &e);
    ok(v >= 0 && strcmp(tstr(g, v, b, sizeof b), "f64[2]") == 0,
       "x[1:3, -1]");
    ok(v >= 0 && g->nodes[v].attrs->nidx == 2 &&
       g->nodes[v].attrs->idx[1].stop == 0 && !g->nodes[v].attrs->idx[1].has_step,
       "unused index fields are cleared");
    v = kiln_graph_subtensor(g, x, 1, ix, &e);
    ok(strcmp(tstr(g, v, b, sizeof b), "f64[2, 5]") == 0,
       "missing trailing entries are full slices");
    ok(is_err(kiln_graph_subtensor(g, x, 3, ix, &e), &e, KILN_ERR_SHAPE,
              "subtensor: too many indices (3) for a tensor of rank 2"),
       "too many indices");
    ok(is_err(kiln_graph_subtensor(g, x, 9, ix, &e), &e, KILN_ERR_SHAPE,
              "subtensor: too many indices (9, at most 8)"),
       "more indices than KILN_MAX_RANK");
    kiln_index oob = { KILN_INDEX_INT, 4, 0, 0, 1, 0, 0 };
    ok(is_err(kiln_graph_subtensor(g, x, 1, &oob, &e), &e, KILN_ERR_SHAPE,
              "subtensor: index 4 is out of bounds for axis 0 with size 4"),
       "index out of bounds");
    kiln_index step0 = { KILN_INDEX_SLICE, 0, 0, 0, 0, 0, 1 };
    ok(is_err(kiln_graph_subtensor(g, x, 1, &step0, &e), &e, KILN_ERR_SHAPE,
              "subtensor: slice step cannot be zero"), "step 0");
    kiln_index badk = { (kiln_index_kind)5, 0, 0, 0, 0, 0, 0 };
    ok(is_err(kiln_graph_subtensor(g, x, 1, &badk, &e), &e, KILN_ERR_ARG,
              "subtensor: index 0 has a bad kind 5"), "bad index kind");
    ok(is_err(kiln_graph_subtensor(g, 99, 1, ix, &e), &e, KILN_ERR_ARG, NULL),
       "subtensor of a bad id");

    kiln_value zero = kiln_graph_literal(g, 0, KILN_LIT_INT, &e);
    v = kiln_graph_set_subtensor(g, x, 1, ix, zero, 0, &e);
    ok(v >= 0 && g->nodes[v].op == KILN_OP_SET_SUBTENSOR &&
       strcmp(tstr(g, v, b, sizeof b), "f64[4, 5]") == 0, "set_subtensor");
    v = kiln_graph_set_subtensor(g, x, 2, ix, zero, 1, &e);
    ok(v >= 0 && g->nodes[v].op == KILN_OP_INC_SUBTENSOR, "inc_subtensor");
    int64_t d3[1] = { 3 };
    kiln_value w = kiln_graph_input(g, "w", KILN_F64, 1, d3, &e);
    ok(is_err(kiln_graph_set_subtensor(g, x, 1, ix, w, 0, &e), &e,
              KILN_ERR_SHAPE, "set_subtensor: value of shape (3) does not "
              "broadcast to (2, 5)"), "value does not broadcast");

    v = kiln_graph_advanced_set_subtensor(g, x, idx, -1, zero, 1, &e);
    ok(v >= 0 && g->nodes[v].op == KILN_OP_ADVANCED_INC_SUBTENSOR &&
       g->nodes[v].n_in == 3 && g->nodes[v].attrs->axes[0] == 1 &&
       strcmp(tstr(g, v, b, sizeof b), "f64[4, 5]") == 0,
       "advanced inc on axis -1 (stored as 1)");
    ok(is_err(kiln_graph_advanced_set_subtensor(g, x, fi, 0, zero, 0, &e), &e,
              KILN_ERR_TYPE, "advanced_set_subtensor: indices must be i64 or "
              "i32, got f64"), "float index tensor");
    ok(is_err(kiln_graph_advanced_set_subtensor(g, x, idx, 2, zero, 0, &e), &e,
              KILN_ERR_SHAPE, "advanced_set_subtensor: axis 2 is out of range "
              "for rank 2"), "axis out of range");
    kiln_graph_free(g);
}

/* ---- names and outputs ---------------------------------------------- */

static void test_names(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("g", &e);
    kiln_value x = kiln_graph_input(g, "x", KILN_F64, 0, NULL, &e);
    kiln_value a = op1(g, "exp", x, &e);
    kiln_value b2 = op1(g, "log", x, &e);
    ok(kiln_graph_set_name(g, a, "a", &e) == 0 && kiln_graph_lookup(g, "a") == a &&
       strcmp(g->nodes[a].name, "a") == 0, "set_name");
    ok(kiln_graph_set_name(g, a, "a", &e) == 0, "same name again is a no-op");
    ok(kiln_graph_set_name(g, a, "z", &e) == KILN_ERR_NAME &&
       strcmp(e.message, "cannot name a value 'z': it is already named 'a'") == 0,
       "a value has one name");
    ok(kiln_graph_set_name(g, b2, "x", &e) == KILN_ERR_NAME &&
       strcmp(e.message, "duplicate name 'x'") == 0, "names are unique");
    ok(kiln_graph_set_name(g, 99, "q", &e) == KILN_ERR_ARG, "bad id");
    ok(kiln_graph_set_name(g, b2, "end", &e) == KILN_ERR_NAME, "reserved");
    ok(kiln_graph_lookup(g, "nope") == -1 && kiln_graph_lookup(NULL, "x") == -1 &&
       kiln_graph_lookup(g, NULL) == -1, "lookup misses");

    ok(kiln_graph_output(g, "out", b2, &e) == 0 && g->n_outputs == 1 &&
       kiln_graph_lookup(g, "out") == b2, "output names an unnamed value");
    ok(kiln_graph_output(g, "out", a, &e) == KILN_ERR_NAME &&
       strcmp(e.message, "duplicate output 'out'") == 0, "duplicate output");
    ok(kiln_graph_output(g, "x", a, &e) == 0 && kiln_graph_lookup(g, "x") == x &&
       g->outputs[1].value == a, "output names live in their own namespace");
    ok(kiln_graph_output(g, "a2", a, &e) == 0 && kiln_graph_lookup(g, "a2") < 0,
       "output of a named value keeps its name");
    kiln_value c = op1(g, "neg", x, &e);
    ok(kiln_graph_output(g, "a", c, &e) == 0 && g->nodes[c].name == NULL,
       "output whose name is another value's leaves the value unnamed");
    ok(kiln_graph_output(g, "q", 99, &e) == KILN_ERR_ARG, "output of bad id");
    ok(kiln_graph_output(g, "1q", x, &e) == KILN_ERR_NAME, "bad output name");
    ok(kiln_graph_output(NULL, "q", x, &e) == KILN_ERR_ARG, "NULL graph");

    /* many names and outputs: the map grows */
    int good = 1;
    for (int i = 0; i < 3000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "v%d", i);
        kiln_value v = op1(g, "exp", x, &e);
        good &= kiln_graph_set_name(g, v, nm, &e) == 0;
        snprintf(nm, sizeof nm, "o%d", i);
        good &= kiln_graph_output(g, nm, v, &e) == 0;
    }
    for (int i = 0; i < 3000; i += 7) {
        char nm[32];
        snprintf(nm, sizeof nm, "v%d", i);
        kiln_value v = kiln_graph_lookup(g, nm);
        good &= v >= 0 && strcmp(g->nodes[v].name, nm) == 0;
    }
    ok(good && g->n_outputs == 3004, "3000 names and outputs");
    kiln_graph_free(g);
}

/* ---- append and clone ----------------------------------------------- */

static void test_append_clone(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("g", &e);
    int64_t d[1] = { 2 };
    double vals[2] = { 1.5, 2.5 };
    kiln_value x = kiln_graph_input(g, "x", KILN_F64, 1, d, &e);
    kiln_value c = kiln_graph_const(g, "c", KILN_F64, 1, d, vals, &e);
    kiln_node proto;
    memset(&proto, 0, sizeof proto);
    proto.op = KILN_OP_ADD;
    proto.type = g->nodes[x].type;
    proto.attrs = NULL; /* none: kiln_ir_append reads NULL as none */
    kiln_value in[2] = { x, c };
    proto.n_in = 2;
    proto.in = in;
    proto.name = "s";
    kiln_value v = kiln_ir_append(g, &proto, &e);
    in[0] = c;
    ok(v == 2 && g->nodes[v].in[0] == x && g->nodes[v].in != in &&
       kiln_graph_lookup(g, "s") == v && g->nodes[v].name != proto.name,
       "append copies inputs and name");
    ok(is_err(kiln_ir_append(g, &proto, &e), &e, KILN_ERR_NAME,
              "duplicate name 's'"), "append: duplicate name");
    proto.name = NULL;
    in[1] = 7;
    ok(is_err(kiln_ir_append(g, &proto, &e), &e, KILN_ERR_ARG, NULL),
       "append: input not an earlier node");
    proto.op = 999;
    ok(is_err(kiln_ir_append(g, &proto, &e), &e, KILN_ERR_ARG, NULL),
       "append: bad op");
    ok(g->nodes[v].attrs == &kiln_ir_no_attrs,
       "a node that sets no attribute shares the empty attrs");
    /* a node with attributes owns them: the clone's copy outlives g */
    kiln_index ix = {KILN_INDEX_SLICE, 1, 2, 0, 1, 1, 0};
    kiln_value sl = kiln_graph_subtensor(g, x, 1, &ix, &e);
    proto.op = KILN_OP_SUBTENSOR;
    proto.n_in = 1;
    in[0] = x;
    proto.type = g->nodes[sl].type;
    proto.attrs = g->nodes[sl].attrs;
    kiln_value sl2 = kiln_ir_append(g, &proto, &e);
    ok(sl >= 0 && sl2 >= 0 && g->nodes[sl].attrs != &kiln_ir_no_attrs &&
       g->nodes[sl2].attrs != g->nodes[sl].attrs &&
       g->nodes[sl2].attrs->idx[0].stop == 2,
       "append copies the attrs");
    kiln_graph_output(g, "out", v, &e);
    kiln_graph_output(g, "part", sl2, &e);
    kiln_graph_symbol(g, "n");
    kiln_graph *cl = kiln_ir_clone(g, &e);
    char *p1 = kiln_graph_print(g, &e), *p2 = cl ? kiln_graph_print(cl, &e) : NULL;
    ok(cl && p1 && p2 && strcmp(p1, p2) == 0 && cl->n_symbols == g->n_symbols,
       "clone prints the same");
    ok(cl && cl->nodes[c].data != g->nodes[c].data &&
       ((double *)cl->nodes[c].data)[1] == 2.5 && kiln_graph_lookup(cl, "s") == v,
       "clone is deep and keeps the name map");
    ok(cl && cl->nodes[sl].attrs != g->nodes[sl].attrs &&
       cl->nodes[v].attrs == &kiln_ir_no_attrs,
       "clone copies owned attrs, shares the empty ones");
    kiln_graph_free(g);
    ok(cl && kiln_graph_lookup(cl, "x") == x, "clone outlives the original");
    ok(cl && cl->nodes[sl].attrs->nidx == 1 &&
       cl->nodes[sl].attrs->idx[0].start == 1 &&
       cl->nodes[sl].attrs->idx[0].stop == 2,
       "the clone's attrs outlive the original");
    free(p1);
    free(p2);
    kiln_graph_free(cl);
    ok(kiln_ir_clone(NULL, &e) == NULL && e.code == KILN_ERR_ARG, "clone NULL");
    ok(kiln_graph_print(NULL, &e) == NULL && e.code == KILN_ERR_ARG,
       "print NULL");
}

/* ---- C API == text -------------------------------------------------- */

static const char *eight_schools =
    "kiln 1\n"
    "graph eight_schools\n"
    "  input mu: f64\n"
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

static void test_same_as_text(void)
{
    kiln_err e;
    kiln_graph *g = kiln_graph_new("eight_schools", &e);
    int64_t d8[1] = { 8 };
    double y[8] = { 28, 8, -3, 7, -1, 1, 18, 12 };
    double sg[8] = { 15, 10, 16, 11, 9, 11, 10, 18 };
    kiln_value mu = kiln_graph_input(g, "mu", KILN_F64, 0, NULL, &e);
    kiln_value lt = kiln_graph_input(g, "log_tau", KILN_F64, 0, NULL, &e);
    kiln_value th = kiln_graph_input(g, "theta_t", KILN_F64, 1, d8, &e);
    kiln_value yy = kiln_graph_const(g, "y", KILN_F64, 1, d8, y, &e);
    kiln_value sig = kiln_graph_const(g, "sigma", KILN_F64, 1, d8, sg, &e);
    kiln_value tau = op1(g, "exp", lt, &e);
    kiln_graph_set_name(g, tau, "tau", &e);
    kiln_value theta = op2(g, "add", mu, op2(g, "mul", tau, th, &e), &e);
    kiln_graph_set_name(g, theta, "theta", &e);
    kiln_value z = op2(g, "true_div", op2(g, "sub", yy, theta, &e), sig, &e);
    kiln_graph_set_name(g, z, "z", &e);
    kiln_value sq = op1(g, "square", z, &e);
    kiln_value m05 = kiln_graph_literal(g, -0.5, KILN_LIT_FLOAT, &e);
    kiln_value t3 = op2(g, "mul", m05, sq, &e);
    kiln_value t4 = op1(g, "log", sig, &e);
    kiln_value cst = kiln_graph_literal(g, 0.9189385332046727, KILN_LIT_FLOAT, &e);
    kiln_value t5 = op2(g, "add", t4, cst, &e);
    kiln_value ll = op1(g, "sum", op2(g, "sub", t3, t5, &e), &e);
    ok(kiln_graph_output(g, "loglik", ll, &e) == 0, "C API eight schools");

    kiln_graph *gt = kiln_parse_string(eight_schools, "m.kg", NULL, &e);
    char *pc = kiln_graph_print(g, &e);
    char *pt = gt ? kiln_graph_print(gt, &e) : NULL;
    if (!ok(pc && pt && strcmp(pc, pt) == 0,
            "C API and text print the same graph"))
        diag("C API:\n%s\ntext:\n%s", pc ? pc : "", pt ? pt : "");
    free(pc);
    free(pt);
    kiln_graph_free(gt);
    kiln_graph_free(g);

    /* a C graph the text cannot write directly: a literal used twice and
     * as an output, a dangling literal, an unnamed output, take on axis 0
     * without an axis attribute, advanced set with a literal index */
    g = kiln_graph_new("shapes", &e);
    int64_t d3[2] = { 3, 2 };
    kiln_value x = kiln_graph_input(g, "x", KILN_F64, 2, d3, &e);
    kiln_value two = kiln_graph_literal(g, 2, KILN_LIT_INT, &e);
    kiln_graph_literal(g, 7.5, KILN_LIT_FLOAT, &e); /* unused */
    kiln_value p = op2(g, "pow", x, two, &e);
    kiln_value q = op2(g, "mul", p, two, &e);
    kiln_value i1 = kiln_graph_literal(g, 1, KILN_LIT_INT, &e);
    kiln_value tk[2] = { q, i1 };
    kiln_value tkv = kiln_graph_op(g, "take", 2, tk, NULL, 0, &e);
    kiln_value i2 = kiln_graph_literal(g, 1, KILN_LIT_INT, &e);
    kiln_value adv = kiln_graph_advanced_set_subtensor(g, x, i2, 0, tkv, 0, &e);
    kiln_graph_output(g, "two", two, &e);
    kiln_graph_output(g, "x", adv, &e);
    kiln_graph_output(g, "t0", q, &e);
    char *s1 = kiln_graph_print(g, &e);
    kiln_graph *g2 = s1 ? kiln_parse_string(s1, "c.kg", NULL, &e) : NULL;
    if (!ok(g2 != NULL, "printed C graph parses"))
        diag("%s\n%s", e.message, s1 ? s1 : "");
    char *s2 = g2 ? kiln_graph_print(g2, &e) : NULL;
    ok(s1 && s2 && strcmp(s1, s2) == 0 &&
       kiln_graph_n_nodes(g) == kiln_graph_n_nodes(g2),
       "printed C graph is stable and keeps every node");
    ok(s1 && strstr(s1, "  two = 2\n") && strstr(s1, "  t1 = 7.5\n") &&
       strstr(s1, "  t0 = mul(t2, two)\n") &&
       strstr(s1, "  t3 = take(t0, 1, axis=0)\n") &&
       strstr(s1, "  t4 = advanced_set_subtensor(x, 1, t3, axis=0)\n") &&
       strstr(s1, "  output two\n  output x = t4\n  output t0\n"),
       "shared and dangling literals get their own lines");
    if (s1 && !strstr(s1, "  two = 2\n"))
        diag("%s", s1);
    free(s1);
    free(s2);
    kiln_graph_free(g2);
    kiln_graph_free(g);
}

int main(void)
{
    test_helpers();
    test_graph_and_symbols();
    test_inputs();
    test_shared_const();
    test_literals();
    test_ops();
    test_indexing();
    test_names();
    test_append_clone();
    test_same_as_text();
    return done_testing();
}
