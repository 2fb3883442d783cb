/*
 * grammar.c — the `.kg` text format's grammar (docs/ir.md): a
 * recursive-descent parser (expressions: an explicit stack) over the
 * tokens of lex.c that drives the builder API of <kiln/graph.h> (public
 * kiln_parse_*; the lexer's helpers are kiln_lex_, lex.h).
 *
 * Every error is reported as "FILE:LINE:COL: message" (columns count
 * bytes from 1).  Syntax errors have code KILN_ERR_PARSE; errors found by
 * the builder keep the builder's code (TYPE, SHAPE, NAME, IO, ...) and get
 * the position of the construct that made the call (the op name of a call,
 * the '[' of an index, the name of a declaration).  The statement
 * `NAME1, ..., NAMEk = grad(COST, X1, ..., Xk)` calls kiln_graph_grad and
 * names its results (docs/ir.md section 12).
 *
 * Costs: the text is scanned once; a call with n arguments costs O(n)
 * (argument lists are growable arrays, names are looked up in the graph's
 * hash map), so a join of thousands of values parses in linear time.
 * Expressions nest without recursion (an explicit stack of frames, see
 * "the expression machine"): depth is bounded only by the text's size.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "lex.h"
#include "suggest.h"   /* did you mean */
#include "composite.h"
#include "datafile.h"
#include "safetensors.h"
#include <kiln/io.h>

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define KG_LIT_INT_MAX ((int64_t)1 << 53) /* exact in a literal's double */


/* ---- numbers -------------------------------------------------------- */

/* Decimal text to double, independent of the program's locale.  Returns
 * 0, 1 when the value overflows, -1 out of memory. */
static int text_to_double(const char *s, size_t n, double *out)
{
    const char *dp = localeconv()->decimal_point;
    size_t dpl = dp ? strlen(dp) : 0;
    int plain = !dp || strcmp(dp, ".") == 0;
    char small[80];
    size_t need = n + (plain ? 0 : n * (dpl ? dpl : 1)) + 1;
    char *b = need <= sizeof small ? small : malloc(need);
    if (!b)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.' && !plain) {
            memcpy(b + k, dp, dpl);
            k += dpl;
        } else {
            b[k++] = s[i];
        }
    }
    b[k] = '\0';
    errno = 0;
    double v = strtod(b, NULL);
    int over = errno == ERANGE && isinf(v);
    if (b != small)
        free(b);
    *out = v;
    return over;
}

/* Decimal digits to int64 with sign; returns -1 on overflow. */
static int digits_to_i64(const char *s, size_t n, int neg, int64_t *out)
{
    uint64_t v = 0;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (lim - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return 0;
}

/* A scalar literal as written: [-] INT | [-] FLOAT | [-] inf | nan |
 * true | false. */
typedef struct scalar {
    int kind;        /* KILN_LIT_INT, _FLOAT, _BOOL */
    int64_t i;       /* INT (exact) and BOOL */
    double d;        /* every kind */
    int line, col;   /* where it starts */
    const char *s;   /* its text, for messages */
    size_t n;
} scalar;

static int is_literal_word(const tok *t)
{
    return kiln_lex_is_word(t, "true") || kiln_lex_is_word(t, "false") || kiln_lex_is_word(t, "inf") ||
           kiln_lex_is_word(t, "nan");
}

/* 1 when the current token can start a scalar literal. */
static int starts_scalar(const parser *p)
{
    return p->t.kind == T_INT || p->t.kind == T_FLOAT ||
           p->t.kind == T_MINUS || is_literal_word(&p->t);
}

/* Parse a scalar literal at the current token (starts_scalar holds). */
static int parse_scalar(parser *p, scalar *sc)
{
    int neg = 0;
    memset(sc, 0, sizeof *sc);
    sc->line = p->t.line;
    sc->col = p->t.col;
    sc->s = p->t.s;
    if (p->t.kind == T_MINUS) {
        neg = 1;
        if (kiln_lex_advance(p))
            return -1;
        if (p->t.kind != T_INT && p->t.kind != T_FLOAT &&
            !kiln_lex_is_word(&p->t, "inf") && !kiln_lex_is_word(&p->t, "nan"))
            return kiln_lex_expected(p, "a number after '-'");
    }
    const tok *t = &p->t;
    sc->n = (size_t)(t->s + t->n - sc->s);
    if (t->kind == T_INT) {
        sc->kind = KILN_LIT_INT;
        if (digits_to_i64(t->s, t->n, neg, &sc->i))
            return kiln_lex_fail_at(p, sc->line, sc->col, KILN_ERR_PARSE,
                           "integer '%.*s' is out of range",
                           sc->n > 60 ? 60 : (int)sc->n, sc->s);
        sc->d = (double)sc->i;
    } else if (t->kind == T_FLOAT) {
        sc->kind = KILN_LIT_FLOAT;
        int rc = text_to_double(t->s, t->n, &sc->d);
        if (rc < 0)
            return kiln_lex_nomem(p);
        if (rc > 0)
            return kiln_lex_fail_at(p, sc->line, sc->col, KILN_ERR_PARSE,
                           "number '%.*s' is out of range",
                           sc->n > 60 ? 60 : (int)sc->n, sc->s);
        if (neg)
            sc->d = -sc->d;
    } else if (kiln_lex_is_word(t, "inf")) {
        sc->kind = KILN_LIT_FLOAT;
        sc->d = neg ? -INFINITY : INFINITY;
    } else if (kiln_lex_is_word(t, "nan")) {
        sc->kind = KILN_LIT_FLOAT;
        sc->d = NAN;
    } else {
        sc->kind = KILN_LIT_BOOL;
        sc->i = kiln_lex_is_word(t, "true");
        sc->d = (double)sc->i;
    }
    return kiln_lex_advance(p);
}

/* An integer (with optional '-') at the current token. */
static int parse_int(parser *p, const char *what, int64_t *out)
{
    if (p->t.kind != T_INT && p->t.kind != T_MINUS)
        return kiln_lex_expected(p, what);
    scalar sc;
    if (parse_scalar(p, &sc))
        return -1;
    if (sc.kind != KILN_LIT_INT)
        return kiln_lex_fail_at(p, sc.line, sc.col, KILN_ERR_PARSE,
                       "expected %s, found '%.*s'", what,
                       sc.n > 60 ? 60 : (int)sc.n, sc.s);
    *out = sc.i;
    return 0;
}

/* ---- graph bookkeeping --------------------------------------------- */

static int note_line(int **arr, size_t *cap, int idx, int line)
{
    if ((size_t)idx >= *cap) {
        size_t n = *cap ? *cap : 64;
        while (n <= (size_t)idx)
            n *= 2;
        int *a = realloc(*arr, n * sizeof *a);
        if (!a)
            return -1;
        memset(a + *cap, 0, (n - *cap) * sizeof *a);
        *arr = a;
        *cap = n;
    }
    (*arr)[idx] = line;
    return 0;
}

static int def_line_of(const parser *p, kiln_value v)
{
    return (size_t)v < p->def_cap ? p->def_line[v] : 0;
}

/* A derived dim (`K-1`, `K*(K-1)/2`; core/ir/dimexpr.c) at the current
 * token, an integer or a name: read from the source up to the ',' or ']'
 * that ends it, as one symbol named by its canonical text.  *d gets the
 * symbol and the token after it is current; *done = 0 (nothing read) when
 * the dim is a plain size or name.  Returns 0 or -1 (error set). */
static int parse_dim_expr(parser *p, int64_t *d, int *done)
{
    *done = 0;
    if (p->has_pk || (p->t.kind != T_IDENT && p->t.kind != T_INT))
        return 0;
    const char *s = p->t.s, *end = p->src + p->len;
    size_t n = 0;
    int depth = 0, ops = 0;
    for (; s + n < end; n++) {
        char c = s[n];
        if ((c == ',' || c == ']') && depth == 0)
            break;
        if (c == '(')
            depth++;
        else if (c == ')') {
            if (--depth < 0)
                break;
        } else if (c == '+' || c == '-' || c == '*' || c == '/')
            ops = 1;
        else if (!(c == ' ' || c == '\t' || c == '_' ||
                   (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                   (c >= 'A' && c <= 'Z')))
            break;
    }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (!ops)
        return 0;
    char canon[256];
    size_t cn = kiln_ir_dimexpr_canon(s, n, canon, sizeof canon);
    if (cn == 0 || cn >= sizeof canon || !strpbrk(canon, "abcdefghijklmnopq"
                                                  "rstuvwxyzABCDEFGHIJKLMN"
                                                  "OPQRSTUVWXYZ_"))
        return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                                "bad dim expression '%.*s' (a derived dim "
                                "is integers and names with + - * / and "
                                "parentheses, e.g. K*(K-1)/2)",
                                n > 60 ? 60 : (int)n, s);
    *d = kiln_graph_symbol(p->g, canon);
    if (*d == KILN_DIM_UNKNOWN)
        return kiln_lex_nomem(p);
    p->pos = (size_t)(s + n - p->src);
    *done = 1;
    return kiln_lex_advance(p);
}

/* The value named by identifier token t, or an error. */
static int lookup_name(parser *p, const tok *t, kiln_value *out)
{
    char buf[128];
    kiln_value v = -1;
    if (t->n < sizeof buf) {
        memcpy(buf, t->s, t->n);
        buf[t->n] = '\0';
        v = kiln_graph_lookup(p->g, buf);
    } else {
        char *s = kiln_lex_tok_str(t);
        if (!s)
            return kiln_lex_nomem(p);
        v = kiln_graph_lookup(p->g, s);
        free(s);
    }
    if (v < 0) {
        /* `output y = a` with `a` already named makes y an output name
         * only: say so */
        for (int k = 0; k < p->g->n_outputs; k++) {
            const kiln_output *o = &p->g->outputs[k];
            const char *vn = p->g->nodes[o->value].name;
            if (strlen(o->name) == t->n && memcmp(o->name, t->s, t->n) == 0 &&
                vn && strcmp(vn, o->name) != 0)
                return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_NAME,
                               "undefined name '%s' (it names an output "
                               "only; the value is '%s')", o->name, vn);
        }
        /* the closest named value (a parameter, data, an earlier line) */
        kiln_suggestion sg;
        kiln_suggest_init(&sg, t->s, t->n);
        for (int k = 0; k < p->g->n_nodes; k++)
            if (p->g->nodes[k].name)
                kiln_suggest_offer(&sg, p->g->nodes[k].name);
        char hint[160];
        return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_NAME,
                       "undefined name '%.*s'%s", t->n > 200 ? 200 : (int)t->n,
                       t->s, kiln_suggest_text(&sg, hint, sizeof hint));
    }
    *out = v;
    return 0;
}

/* Refuse to define `name` twice. */
static int check_new_name(parser *p, const tok *t, const char *name)
{
    kiln_value v = kiln_graph_lookup(p->g, name);
    if (v < 0)
        return 0;
    int l = def_line_of(p, v);
    if (l > 0)
        return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_NAME,
                       "duplicate name '%s' (first defined at line %d)", name,
                       l);
    return kiln_lex_fail_at(p, t->line, t->col, KILN_ERR_NAME, "duplicate name '%s'",
                   name);
}

/* ---- expressions ---------------------------------------------------- */

/* An expression's value: a node, or a literal not yet added to the graph
 * (literals become nodes when an op uses them, so that `join(0, ...)` can
 * read its axis and a node's literals sit right before it). */
typedef struct operand {
    int is_lit;
    kiln_value v;
    scalar lit;
    int line, col;
} operand;

static int materialize(parser *p, operand *o)
{
    if (!o->is_lit)
        return 0;
    /* the exact int64, not the double: 2^53 + 1 rounds to 2^53 */
    if (o->lit.kind == KILN_LIT_INT &&
        (o->lit.i > KG_LIT_INT_MAX || o->lit.i < -KG_LIT_INT_MAX))
        return kiln_lex_fail_at(p, o->line, o->col, KILN_ERR_PARSE,
                       "integer literal '%.*s' is too large (at most 2^53 = "
                       "9007199254740992 in magnitude)",
                       o->lit.n > 60 ? 60 : (int)o->lit.n, o->lit.s);
    kiln_value v = kiln_graph_literal(p->g, o->lit.d,
                                      (kiln_literal_kind)o->lit.kind, &p->e);
    if (v < 0)
        return kiln_lex_builder_fail(p, o->line, o->col);
    o->is_lit = 0;
    o->v = v;
    return 0;
}

/* A parsed `[...]`: basic entries, or one tensor entry at `tensor_at`. */
typedef struct index_spec {
    int n;
    kiln_index e[KILN_MAX_RANK];
    int tensor_at;          /* -1: basic indexing */
    kiln_value tensor;
    int line, col;          /* the '[' */
    int others_full;        /* every entry so far is ':' */
} index_spec;

static int starts_int(const parser *p)
{
    return p->t.kind == T_INT || p->t.kind == T_MINUS;
}

/* Indexing `[...]` is parsed in steps, because a tensor entry is an
 * expression, which the expression machine below parses (no recursion):
 * idx_begin at the '[', then idx_entries, which stops at a tensor entry
 * (IDX_EXPR: the caller parses it and hands it to idx_tensor) or after
 * the ']' (IDX_DONE). */
enum { IDX_DONE = 0, IDX_EXPR = 1, IDX_MORE = 2 };

static int idx_begin(parser *p, index_spec *ix)
{
    memset(ix, 0, sizeof *ix);
    ix->tensor_at = -1;
    ix->others_full = 1;
    ix->line = p->t.line;
    ix->col = p->t.col;
    if (kiln_lex_advance(p))
        return -1;
    if (p->t.kind == T_RBRACK)
        return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                       "empty index '[]'");
    return 0;
}

/* After an entry: ',' (IDX_MORE) or ']' (IDX_DONE, stepped over). */
static int idx_next(parser *p, index_spec *ix)
{
    ix->n++;
    if (p->t.kind == T_COMMA)
        return kiln_lex_advance(p) ? -1 : IDX_MORE;
    if (p->t.kind != T_RBRACK)
        return kiln_lex_expected(p, "',' or ']' in the index");
    if (ix->tensor_at >= 0 && !ix->others_full)
        return kiln_lex_fail_at(p, ix->line, ix->col, KILN_ERR_PARSE,
                       "with a tensor index every other entry must be ':' "
                       "(a full slice)");
    return kiln_lex_advance(p) ? -1 : IDX_DONE;
}

static int idx_entries(parser *p, index_spec *ix)
{
    for (;;) {
        if (ix->n == KILN_MAX_RANK)
            return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                           "too many indices (at most %d)", KILN_MAX_RANK);
        kiln_index *e = &ix->e[ix->n];
        memset(e, 0, sizeof *e);
        if (starts_int(p) || p->t.kind == T_COLON) {
            int64_t a = 0;
            int has_a = 0;
            if (p->t.kind != T_COLON) {
                if (parse_int(p, "an integer index", &a))
                    return -1;
                has_a = 1;
            }
            if (p->t.kind == T_COLON) {
                e->kind = KILN_INDEX_SLICE;
                e->has_start = has_a;
                e->start = a;
                if (kiln_lex_advance(p))
                    return -1;
                if (starts_int(p)) {
                    if (parse_int(p, "an integer slice bound", &e->stop))
                        return -1;
                    e->has_stop = 1;
                }
                if (p->t.kind == T_COLON) {
                    if (kiln_lex_advance(p))
                        return -1;
                    if (starts_int(p)) {
                        if (parse_int(p, "an integer slice step", &e->step))
                            return -1;
                        e->has_step = 1;
                    }
                }
                if (e->has_start || e->has_stop || e->has_step)
                    ix->others_full = 0;
            } else {
                e->kind = KILN_INDEX_INT;
                e->start = a;
                e->has_start = 1;
                ix->others_full = 0;
            }
        } else if (p->t.kind == T_IDENT && !is_literal_word(&p->t)) {
            if (ix->tensor_at >= 0)
                return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                               "at most one tensor index is allowed in "
                               "x[...]");
            return IDX_EXPR;
        } else {
            return kiln_lex_expected(p, "an index (an integer, a slice like 1:3 or an "
                               "integer tensor)");
        }
        int rc = idx_next(p, ix);
        if (rc != IDX_MORE)
            return rc;
    }
}

/* The tensor entry o, parsed after idx_entries returned IDX_EXPR. */
static int idx_tensor(parser *p, index_spec *ix, operand *o)
{
    if (materialize(p, o))
        return -1;
    ix->tensor_at = ix->n;
    ix->tensor = o->v;
    ix->e[ix->n].kind = KILN_INDEX_SLICE; /* placeholder */
    int rc = idx_next(p, ix);
    return rc == IDX_MORE ? idx_entries(p, ix) : rc;
}

static int apply_index(parser *p, kiln_value base, const index_spec *ix,
                       kiln_value *out)
{
    kiln_value v;
    if (ix->tensor_at >= 0) {
        kiln_attr a;
        memset(&a, 0, sizeof a);
        a.key = "axis";
        a.kind = KILN_ATTR_INT;
        a.i = ix->tensor_at;
        kiln_value in[2] = { base, ix->tensor };
        v = kiln_graph_op(p->g, "take", 2, in, &a, 1, &p->e);
    } else {
        v = kiln_graph_subtensor(p->g, base, ix->n, ix->e, &p->e);
    }
    if (v < 0)
        return kiln_lex_builder_fail(p, ix->line, ix->col);
    *out = v;
    return 0;
}

/* One attribute being parsed. */
typedef struct attr_item {
    kiln_attr a;
    char *key;
    int64_t *ints;
    char *str;          /* a string value (msg="..."), owned */
} attr_item;

/* `op` is the op being called (for the dims of `shape=`). */
static int parse_attr_value(parser *p, attr_item *it, int op)
{
    kiln_attr *a = &it->a;
    if (p->t.kind == T_LBRACK) {
        size_t cap = 0;
        a->kind = KILN_ATTR_INTS;
        if (kiln_lex_advance(p))
            return -1;
        while (p->t.kind != T_RBRACK) {
            int64_t v;
            int derived;
            if (strcmp(it->key, "shape") == 0 &&
                parse_dim_expr(p, &v, &derived))
                return -1;
            if (strcmp(it->key, "shape") == 0 && derived) {
                /* v is the derived symbol; the token after it is current */
            } else if (starts_int(p)) {
                int vline = p->t.line, vcol = p->t.col;
                if (parse_int(p, "an integer", &v))
                    return -1;
                /* a dim in `shape=` is a size, a name, '?' or (reshape
                 * only) -1; other negative numbers would be read as
                 * symbol ids (symbol k is -2-k) */
                if (strcmp(it->key, "shape") == 0 &&
                    (v < -1 || (v == -1 && op != KILN_OP_RESHAPE)))
                    return kiln_lex_fail_at(p, vline, vcol, KILN_ERR_SHAPE,
                                   "%s: bad dim %lld in 'shape'%s",
                                   op >= 0 ? kiln_ir_op_info(op)->name
                                           : "shape",
                                   (long long)v,
                                   v == -1 ? " (-1 is only for reshape)"
                                           : "");
            } else if (p->t.kind == T_QUEST) {
                v = kiln_ir_fresh_symbol(p->g);
                if (v == KILN_DIM_UNKNOWN)
                    return kiln_lex_nomem(p);
                if (kiln_lex_advance(p))
                    return -1;
            } else if (p->t.kind == T_IDENT && !is_literal_word(&p->t)) {
                char *name = kiln_lex_tok_str(&p->t);
                if (!name)
                    return kiln_lex_nomem(p);
                v = kiln_graph_symbol(p->g, name);
                free(name);
                if (v == KILN_DIM_UNKNOWN)
                    return kiln_lex_nomem(p);
                if (kiln_lex_advance(p))
                    return -1;
            } else {
                char b[64];
                return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                               "attribute '%s': expected an integer or a dim "
                               "name in the list, found %s", it->key,
                               kiln_lex_tok_desc(&p->t, b, sizeof b));
            }
            if ((size_t)a->n == cap) {
                size_t nc = cap ? 2 * cap : 8;
                if (nc > (size_t)INT32_MAX)
                    return kiln_lex_nomem(p);
                int64_t *q = realloc(it->ints, nc * sizeof *q);
                if (!q)
                    return kiln_lex_nomem(p);
                it->ints = q;
                cap = nc;
            }
            it->ints[a->n++] = v;
            if (p->t.kind == T_COMMA) {
                if (kiln_lex_advance(p))
                    return -1;
                if (p->t.kind == T_RBRACK)
                    return kiln_lex_expected(p, "an integer or a dim name after ','");
                continue;
            }
            if (p->t.kind != T_RBRACK)
                return kiln_lex_expected(p, "',' or ']' in the list");
        }
        a->ints = it->ints;
        return kiln_lex_advance(p);
    }
    if (p->t.kind == T_STRING) {   /* check's msg="..." (issue 25) */
        if (!(it->str = kiln_lex_str_value(&p->t)))
            return kiln_lex_nomem(p);
        a->kind = KILN_ATTR_STRING;
        a->s = it->str;
        return kiln_lex_advance(p);
    }
    if (p->t.kind == T_IDENT && strcmp(it->key, "body") == 0) {
        /* body=NAME: an earlier graph block (issue 28) */
        if (!(it->str = kiln_lex_tok_str(&p->t)))
            return kiln_lex_nomem(p);
        a->kind = KILN_ATTR_STRING;
        a->s = it->str;
        return kiln_lex_advance(p);
    }
    if (starts_scalar(p)) {
        scalar sc;
        if (parse_scalar(p, &sc))
            return -1;
        a->kind = sc.kind == KILN_LIT_INT    ? KILN_ATTR_INT
                  : sc.kind == KILN_LIT_BOOL ? KILN_ATTR_BOOL
                                             : KILN_ATTR_FLOAT;
        a->i = sc.i;
        a->f = sc.d;
        return 0;
    }
    if (p->t.kind == T_IDENT) {
        char buf[16];
        kiln_dtype dt;
        if (p->t.n < sizeof buf) {
            memcpy(buf, p->t.s, p->t.n);
            buf[p->t.n] = '\0';
            if (kiln_dtype_parse(buf, &dt) == 0) {
                a->kind = KILN_ATTR_DTYPE;
                a->i = dt;
                return kiln_lex_advance(p);
            }
        }
    }
    char b[64];
    return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                   "attribute '%s': expected a number, true, false, a dtype, "
                   "a list or a string, found %s", it->key,
                   kiln_lex_tok_desc(&p->t, b, sizeof b));
}

/* ---- the expression machine ------------------------------------------
 *
 * Expressions nest without recursion on the C stack: each open call,
 * set_subtensor/inc_subtensor or indexing `x[...]` is a frame on a
 * growable stack (one frame per nesting level), so the depth of nesting
 * is bounded only by the size of the text and memory, and parsing stays
 * linear in the text.  A frame asks for a sub-expression by returning
 * R_EXPR (an expression with its indexing) or R_PRIMARY (a literal, name
 * or call without indexing: the first argument of set_subtensor); the
 * machine parses it and hands it back to the frame.  A frame that is
 * complete returns R_DONE with its value, after popping itself. */

enum { F_CALL, F_SET, F_POSTFIX };
enum {
    S_ARGS,   /* CALL: at the next argument or ')' */
    S_ARG,    /* CALL: waiting for a positional argument */
    S_BASE,   /* SET: waiting for its first argument */
    S_TENSOR, /* SET/POSTFIX: waiting for a tensor index entry */
    S_VALUE   /* SET: waiting for the new value */
};
enum { R_EXPR = 0, R_PRIMARY = 1, R_DONE = 2 };

typedef struct frame {
    int kind, state;
    int primary_only;   /* CALL/SET: no indexing after it (a set's base) */
    int inc;            /* SET: inc_subtensor */
    tok name;           /* CALL/SET: the op name */
    int aline, acol;    /* SET: its first argument */
    char opname[32];    /* CALL */
    int op, composite;  /* CALL */
    operand o;          /* SET: the base; POSTFIX: the value being indexed */
    index_spec *ix;     /* SET/POSTFIX */
    operand *args;      /* CALL: positional arguments */
    size_t nargs, cargs;
    attr_item *attrs;   /* CALL: key=value attributes */
    size_t nattrs, cattrs;
} frame;

typedef struct xstack {
    frame *f;
    size_t n, cap;
} xstack;

static void frame_clear(frame *f)
{
    for (size_t k = 0; k < f->nattrs; k++) {
        free(f->attrs[k].key);
        free(f->attrs[k].ints);
        free(f->attrs[k].str);
    }
    free(f->attrs);
    free(f->args);
    free(f->ix);
    f->attrs = NULL;
    f->args = NULL;
    f->ix = NULL;
    f->nattrs = f->cattrs = f->nargs = f->cargs = 0;
}

static frame *push_frame(parser *p, xstack *st, int kind)
{
    if (st->n == st->cap) {
        size_t nc = st->cap ? 2 * st->cap : 16;
        frame *q = nc > SIZE_MAX / sizeof *q ? NULL
                                              : realloc(st->f, nc * sizeof *q);
        if (!q) {
            kiln_lex_nomem(p);
            return NULL;
        }
        st->f = q;
        st->cap = nc;
    }
    frame *f = &st->f[st->n++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    return f;
}

static int pop_frame(xstack *st)
{
    frame_clear(&st->f[--st->n]);
    return R_DONE;
}

/* Look up the op a call names (its name token): the op's id in *op, or
 * -1 with *composite set for a composite density (core/ir/composite.c); an
 * unknown name is an error at the name. */
static int lookup_op(parser *p, const tok *name, char opname[32], int *op,
                     int *composite)
{
    *op = -1;
    *composite = 0;
    if (name->n < 32) {
        memcpy(opname, name->s, name->n);
        opname[name->n] = '\0';
        *op = kiln_ir_op_lookup(opname);
        /* a composite (normal_lpdf, softmax, ...) expands in
         * kiln_graph_op, which checks its attributes */
        *composite = *op < 0 && kiln_composite_lookup(opname) >= 0;
    } else {
        opname[0] = '\0';
    }
    if (*op < 0 && !*composite)
        return kiln_lex_fail_at(p, name->line, name->col, KILN_ERR_TYPE,
                       "unknown op '%.*s'%s", name->n > 60 ? 60 : (int)name->n,
                       name->s, kiln_ir_op_hint(name->s, name->n));
    return 0;
}

/* The current token is the name of a call (a '(' follows): push its
 * frame.  Returns the frame's first request. */
static int call_begin(parser *p, xstack *st, int primary_only)
{
    tok name = p->t;
    if (kiln_lex_advance(p) || kiln_lex_advance(p)) /* name, '(' */
        return -1;
    int inc = kiln_lex_is_word(&name, "inc_subtensor");
    if (inc || kiln_lex_is_word(&name, "set_subtensor")) {
        frame *f = push_frame(p, st, F_SET);
        if (!f)
            return -1;
        f->name = name;
        f->inc = inc;
        f->primary_only = primary_only;
        f->aline = p->t.line;
        f->acol = p->t.col;
        f->state = S_BASE;
        return R_PRIMARY;
    }
    if (kiln_lex_is_word(&name, "subtensor"))
        return kiln_lex_fail_at(p, name.line, name.col, KILN_ERR_PARSE,
                       "subtensor is written as indexing: x[1:3, 0]");
    if (kiln_lex_is_word(&name, "grad"))
        return kiln_lex_fail_at(p, name.line, name.col, KILN_ERR_PARSE,
                       "grad can only be used as a statement: NAMES = "
                       "grad(...)");
    char opname[32];
    int op, composite;
    if (lookup_op(p, &name, opname, &op, &composite))
        return -1;
    frame *f = push_frame(p, st, F_CALL);
    if (!f)
        return -1;
    f->name = name;
    memcpy(f->opname, opname, sizeof opname);
    f->op = op;
    f->composite = composite;
    f->primary_only = primary_only;
    f->state = S_ARGS;
    return -2; /* the frame starts scanning (see parse_expr) */
}

/* Start indexing the value of frame f (the current token is '['). */
static int index_start(parser *p, frame *f)
{
    if (materialize(p, &f->o) || idx_begin(p, f->ix))
        return -1;
    return idx_entries(p, f->ix);
}

/* Start indexing value o in a POSTFIX frame (the current token is '['):
 * `f` is the frame of the call that produced o (it becomes the POSTFIX
 * frame) or NULL (o is a literal or a name). */
static int postfix_step(parser *p, xstack *st, const operand *in,
                        operand *res);

static int postfix_begin(parser *p, xstack *st, frame *f, const operand *o,
                         operand *res)
{
    if (f) {
        frame_clear(f);
    } else if (!(f = push_frame(p, st, F_POSTFIX))) {
        return -1;
    }
    f->kind = F_POSTFIX;
    f->o = *o;
    if (!(f->ix = malloc(sizeof *f->ix)))
        return kiln_lex_nomem(p);
    return postfix_step(p, st, NULL, res);
}

/* A call or set frame produced value v: index it if a '[' follows and
 * the frame may be indexed, else pop the frame. */
static int value_done(parser *p, xstack *st, kiln_value v, operand *res)
{
    frame *f = &st->f[st->n - 1];
    memset(res, 0, sizeof *res);
    res->v = v;
    res->line = f->name.line;
    res->col = f->name.col;
    if (!f->primary_only && p->t.kind == T_LBRACK) {
        operand o = *res;
        return postfix_begin(p, st, f, &o, res);
    }
    return pop_frame(st);
}

static int postfix_step(parser *p, xstack *st, const operand *in,
                        operand *res)
{
    frame *f = &st->f[st->n - 1];
    int rc;
    if (in) { /* the tensor entry */
        operand t = *in;
        rc = idx_tensor(p, f->ix, &t);
    } else {
        rc = index_start(p, f);
    }
    for (;;) {
        if (rc < 0)
            return -1;
        if (rc == IDX_EXPR) {
            f->state = S_TENSOR;
            return R_EXPR;
        }
        if (apply_index(p, f->o.v, f->ix, &f->o.v))
            return -1;
        if (p->t.kind != T_LBRACK)
            break;
        rc = idx_begin(p, f->ix) ? -1 : idx_entries(p, f->ix);
    }
    *res = f->o;
    return pop_frame(st);
}

static int set_step(parser *p, xstack *st, const operand *in, operand *res)
{
    frame *f = &st->f[st->n - 1];
    const char *opn = f->inc ? "inc_subtensor" : "set_subtensor";
    int rc;
    switch (f->state) {
    case S_BASE:
        f->o = *in;
        if (p->t.kind != T_LBRACK)
            return kiln_lex_fail_at(p, f->aline, f->acol, KILN_ERR_PARSE,
                           "%s: the first argument must be indexed, like "
                           "x[0:2]", opn);
        if (!(f->ix = malloc(sizeof *f->ix)))
            return kiln_lex_nomem(p);
        rc = index_start(p, f);
        break;
    case S_TENSOR: {
        operand t = *in;
        rc = idx_tensor(p, f->ix, &t);
        break;
    }
    default: { /* S_VALUE */
        operand val = *in;
        if (materialize(p, &val))
            return -1;
        if (p->t.kind != T_RPAREN) {
            char b[64];
            return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                           "%s takes two arguments, x[...] and a value; "
                           "found %s", opn, kiln_lex_tok_desc(&p->t, b, sizeof b));
        }
        const index_spec *ix = f->ix;
        kiln_value v;
        if (ix->tensor_at >= 0)
            v = kiln_graph_advanced_set_subtensor(p->g, f->o.v, ix->tensor,
                                                  ix->tensor_at, val.v,
                                                  f->inc, &p->e);
        else
            v = kiln_graph_set_subtensor(p->g, f->o.v, ix->n, ix->e, val.v,
                                         f->inc, &p->e);
        if (v < 0)
            return kiln_lex_builder_fail(p, f->name.line, f->name.col);
        if (kiln_lex_advance(p))
            return -1;
        return value_done(p, st, v, res);
    }
    }
    /* the indices of the base: all but the last are applied to it */
    for (;;) {
        if (rc < 0)
            return -1;
        if (rc == IDX_EXPR) {
            f->state = S_TENSOR;
            return R_EXPR;
        }
        if (p->t.kind != T_LBRACK)
            break;
        if (apply_index(p, f->o.v, f->ix, &f->o.v))
            return -1;
        rc = idx_begin(p, f->ix) ? -1 : idx_entries(p, f->ix);
    }
    if (p->t.kind != T_COMMA)
        return kiln_lex_expected(p, "',' and the new value");
    if (kiln_lex_advance(p))
        return -1;
    f->state = S_VALUE;
    return R_EXPR;
}

/* Add op `f` to the graph with its arguments (the current token is ')'). */
/* scan(..., body=NAME, ...): NAME is an earlier graph block. */
static kiln_value call_body(parser *p, const frame *f, const kiln_value *in,
                            int nin, kiln_attr *ka, int nka)
{
    int k = 0;
    while (k < nka && strcmp(ka[k].key, "body") != 0)
        k++;
    if (k == nka) {
        kiln_lex_fail_at(p, f->name.line, f->name.col, KILN_ERR_PARSE,
                         "%s: attribute 'body' (an earlier graph's name) "
                         "is required", f->opname);
        return -2;
    }
    if (ka[k].kind != KILN_ATTR_STRING) {
        kiln_lex_fail_at(p, f->name.line, f->name.col, KILN_ERR_PARSE,
                         "%s: attribute 'body' must name a graph",
                         f->opname);
        return -2;
    }
    kiln_graph *body = NULL;
    for (int i = p->n_bodies - 1; i >= 0 && !body; i--)
        if (strcmp(p->bodies[i]->name, ka[k].s) == 0)
            body = p->bodies[i];
    if (!body) {
        kiln_lex_fail_at(p, f->name.line, f->name.col, KILN_ERR_NAME,
                         "%s: no graph named '%s' before this one (a body "
                         "is a 'graph NAME ... end' block earlier in the "
                         "file)", f->opname, ka[k].s);
        return -2;
    }
    ka[k] = ka[nka - 1];
    return kiln_graph_op_body(p->g, f->opname, nin, in, body, ka, nka - 1,
                              &p->e);
}

/* result(v, index=I) */
static kiln_value call_result(parser *p, const frame *f, const kiln_value *in,
                              int nin, const kiln_attr *ka, int nka)
{
    if (nin != 1 || nka != 1 || strcmp(ka[0].key, "index") != 0 ||
        ka[0].kind != KILN_ATTR_INT || ka[0].i < 0 || ka[0].i > INT32_MAX) {
        kiln_lex_fail_at(p, f->name.line, f->name.col, KILN_ERR_TYPE,
                         "result: expected result(VALUE, index=I) with I "
                         ">= 0");
        return -2;
    }
    return kiln_graph_result(p->g, in[0], (int)ka[0].i, &p->e);
}

static int call_finish(parser *p, xstack *st, operand *res)
{
    frame *f = &st->f[st->n - 1];
    operand *args = f->args;
    attr_item *attrs = f->attrs;
    size_t nargs = f->nargs, nattrs = f->nattrs;
    /* join(AXIS, x1, ...): a leading integer literal is the axis */
    size_t first = 0;
    int64_t join_axis = 0;
    int has_join_axis = 0;
    if (f->op == KILN_OP_JOIN && nargs > 0 && args[0].is_lit &&
        args[0].lit.kind == KILN_LIT_INT) {
        for (size_t k = 0; k < nattrs; k++)
            if (strcmp(attrs[k].key, "axis") == 0)
                return kiln_lex_fail_at(p, args[0].line, args[0].col, KILN_ERR_PARSE,
                               "join: axis given twice (first argument and "
                               "axis=)");
        join_axis = args[0].lit.i;
        has_join_axis = 1;
        first = 1;
    }
    for (size_t k = first; k < nargs; k++)
        if (materialize(p, &args[k]))
            return -1;
    size_t nin = nargs - first;
    size_t nka = nattrs + (size_t)has_join_axis;
    kiln_value *in = malloc((nin ? nin : 1) * sizeof *in);
    kiln_attr *ka = malloc((nka ? nka : 1) * sizeof *ka);
    if (!in || !ka) {
        free(in);
        free(ka);
        return kiln_lex_nomem(p);
    }
    for (size_t k = 0; k < nin; k++)
        in[k] = args[first + k].v;
    for (size_t k = 0; k < nattrs; k++)
        ka[k] = attrs[k].a;
    if (has_join_axis) {
        memset(&ka[nattrs], 0, sizeof ka[nattrs]);
        ka[nattrs].key = "axis";
        ka[nattrs].kind = KILN_ATTR_INT;
        ka[nattrs].i = join_axis;
    }
    kiln_value v;
    if (f->op == KILN_OP_SCAN || f->op == KILN_OP_ODE_RK45 ||
        f->op == KILN_OP_ODE_BDF) {
        v = call_body(p, f, in, (int)nin, ka, (int)nka);
    } else if (f->op == KILN_OP_RESULT) {
        v = call_result(p, f, in, (int)nin, ka, (int)nka);
    } else {
        v = kiln_graph_op(p->g, f->opname, (int)nin, in, ka, (int)nka,
                          &p->e);
    }
    free(in);
    free(ka);
    if (v == -2)   /* reported with its position already */
        return -1;
    if (v < 0)
        return kiln_lex_builder_fail(p, f->name.line, f->name.col);
    if (kiln_lex_advance(p)) /* ')' */
        return -1;
    return value_done(p, st, v, res);
}

/* After an argument of a call: ',' and another, or ')'. */
static int after_arg(parser *p, const char *opname)
{
    if (p->t.kind == T_COMMA) {
        if (kiln_lex_advance(p))
            return -1;
        if (p->t.kind == T_RPAREN)
            return kiln_lex_expected(p, "an argument after ','");
        return 0;
    }
    if (p->t.kind != T_RPAREN) {
        char what[80];
        snprintf(what, sizeof what, "',' or ')' in the arguments of %s",
                 opname);
        return kiln_lex_expected(p, what);
    }
    return 0;
}

/* op(arg, ..., key=value, ...): scan attributes up to the next
 * positional argument (R_EXPR) or the ')' (the call is complete). */
static int call_step(parser *p, xstack *st, const operand *in, operand *res)
{
    frame *f = &st->f[st->n - 1];
    if (f->state == S_ARG) {
        if (f->nargs == f->cargs) {
            size_t nc = f->cargs ? 2 * f->cargs : 8;
            operand *q = nc > (size_t)INT32_MAX / 2
                             ? NULL
                             : realloc(f->args, nc * sizeof *q);
            if (!q)
                return kiln_lex_nomem(p);
            f->args = q;
            f->cargs = nc;
        }
        f->args[f->nargs++] = *in;
        f->state = S_ARGS;
        if (after_arg(p, f->opname))
            return -1;
    }
    while (p->t.kind != T_RPAREN) {
        const tok *nx = NULL;
        if (p->t.kind == T_IDENT && !(nx = kiln_lex_peek(p)))
            return -1;
        if (!nx || nx->kind != T_EQ) {
            if (f->nattrs > 0)
                return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                               "%s: positional argument after keyword "
                               "argument", f->opname);
            f->state = S_ARG;
            return R_EXPR;
        }
        if (f->nattrs == f->cattrs) {
            size_t nc = f->cattrs ? 2 * f->cattrs : 4;
            attr_item *q = realloc(f->attrs, nc * sizeof *q);
            if (!q)
                return kiln_lex_nomem(p);
            f->attrs = q;
            f->cattrs = nc;
        }
        attr_item *it = &f->attrs[f->nattrs++];
        memset(it, 0, sizeof *it);
        if (!(it->key = kiln_lex_tok_str(&p->t)))
            return kiln_lex_nomem(p);
        it->a.key = it->key;
        if (kiln_lex_advance(p) || kiln_lex_advance(p) || parse_attr_value(p, it, f->op) ||
            after_arg(p, f->opname))
            return -1;
    }
    return call_finish(p, st, res);
}

/* Hand value `in` (NULL: none, the frame was just pushed) to the top
 * frame; returns its next request or R_DONE with *res. */
static int frame_step(parser *p, xstack *st, const operand *in, operand *res)
{
    switch (st->f[st->n - 1].kind) {
    case F_CALL: return call_step(p, st, in, res);
    case F_SET: return set_step(p, st, in, res);
    default: return postfix_step(p, st, in, res);
    }
}

/* Start an expression at the current token (primary_only: no indexing
 * after it).  A literal or a name is complete at once (R_DONE, *res); a
 * call pushes a frame and returns that frame's first request. */
static int start_expr(parser *p, xstack *st, int primary_only, operand *res)
{
    memset(res, 0, sizeof *res);
    res->line = p->t.line;
    res->col = p->t.col;
    if (starts_scalar(p)) {
        res->is_lit = 1;
        if (parse_scalar(p, &res->lit))
            return -1;
    } else if (p->t.kind == T_IDENT) {
        const tok *nx = kiln_lex_peek(p);
        if (!nx)
            return -1;
        if (nx->kind == T_LPAREN) {
            int rc = call_begin(p, st, primary_only);
            return rc == -2 ? frame_step(p, st, NULL, res) : rc;
        }
        if (lookup_name(p, &p->t, &res->v) || kiln_lex_advance(p))
            return -1;
    } else {
        return kiln_lex_expected(p, "an expression");
    }
    if (!primary_only && p->t.kind == T_LBRACK) {
        operand o = *res;
        return postfix_begin(p, st, NULL, &o, res);
    }
    return R_DONE;
}

/* An expression at the current token into *o. */
static int parse_expr(parser *p, operand *o)
{
    xstack st = { NULL, 0, 0 };
    operand res;
    int rc = start_expr(p, &st, 0, &res);
    for (;;) {
        while (rc == R_DONE && st.n > 0)
            rc = frame_step(p, &st, &res, &res);
        if (rc < 0 || st.n == 0)
            break;
        rc = start_expr(p, &st, rc == R_PRIMARY, &res);
    }
    while (st.n > 0)
        pop_frame(&st);
    free(st.f);
    if (rc < 0)
        return -1;
    *o = res;
    return 0;
}

/* Parse one positional argument into a growing array (arguments of
 * grad): linear in the number of arguments. */
static int parse_arg(parser *p, operand **args, size_t *nargs, size_t *cargs)
{
    if (*nargs == *cargs) {
        size_t nc = *cargs ? 2 * *cargs : 8;
        if (nc > (size_t)INT32_MAX / 2)
            return kiln_lex_nomem(p);
        operand *q = realloc(*args, nc * sizeof *q);
        if (!q)
            return kiln_lex_nomem(p);
        *args = q;
        *cargs = nc;
    }
    if (parse_expr(p, &(*args)[*nargs]))
        return -1;
    (*nargs)++;
    return 0;
}


/* ---- declarations --------------------------------------------------- */

typedef struct decl_type {
    kiln_dtype dt;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    int line, col;
} decl_type;

static int parse_type(parser *p, decl_type *ty)
{
    memset(ty, 0, sizeof *ty);
    ty->line = p->t.line;
    ty->col = p->t.col;
    if (p->t.kind != T_IDENT)
        return kiln_lex_expected(p, "a type (f64, f32, i64, i32 or bool)");
    char buf[16];
    int ok = 0;
    if (p->t.n < sizeof buf) {
        memcpy(buf, p->t.s, p->t.n);
        buf[p->t.n] = '\0';
        ok = kiln_dtype_parse(buf, &ty->dt) == 0;
    }
    if (!ok)
        return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                       "unknown dtype '%.*s' (expected f64, f32, i64, i32 or "
                       "bool)", p->t.n > 60 ? 60 : (int)p->t.n, p->t.s);
    if (kiln_lex_advance(p))
        return -1;
    if (p->t.kind != T_LBRACK)
        return 0;
    if (kiln_lex_advance(p))
        return -1;
    for (;;) {
        int64_t d;
        if (ty->rank == KILN_MAX_RANK)
            return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                           "too many dims (at most %d)", KILN_MAX_RANK);
        int derived;
        if (parse_dim_expr(p, &d, &derived))
            return -1;
        if (derived) {
            ty->dims[ty->rank++] = d;
            goto next_dim;
        }
        if (p->t.kind == T_INT) {
            if (digits_to_i64(p->t.s, p->t.n, 0, &d))
                return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                               "dim '%.*s' is out of range",
                               p->t.n > 60 ? 60 : (int)p->t.n, p->t.s);
        } else if (p->t.kind == T_QUEST) {
            d = KILN_DIM_UNKNOWN;
        } else if (p->t.kind == T_IDENT) {
            char *name = kiln_lex_tok_str(&p->t);
            if (!name)
                return kiln_lex_nomem(p);
            d = kiln_graph_symbol(p->g, name);
            free(name);
            if (d == KILN_DIM_UNKNOWN)
                return kiln_lex_nomem(p);
        } else {
            return kiln_lex_expected(p, "a dim (a size, a name or '?')");
        }
        ty->dims[ty->rank++] = d;
        if (kiln_lex_advance(p))
            return -1;
    next_dim:
        if (p->t.kind == T_COMMA) {
            if (kiln_lex_advance(p))
                return -1;
            continue;
        }
        if (p->t.kind == T_RBRACK)
            return kiln_lex_advance(p);
        return kiln_lex_expected(p, "',' or ']' in the dims");
    }
}

/* `NAME:` of a declaration; the current token is the keyword. */
static int decl_head(parser *p, const char *what, tok *name, char **sname)
{
    char m[64];
    if (kiln_lex_advance(p))
        return -1;
    *name = p->t; /* an identifier: checked by the statement dispatch */
    if (!(*sname = kiln_lex_tok_str(name)))
        return kiln_lex_nomem(p);
    if (kiln_lex_advance(p))
        return -1;
    snprintf(m, sizeof m, "':' after %s name", what);
    if (p->t.kind != T_COLON)
        return kiln_lex_expected(p, m);
    if (kiln_lex_advance(p))
        return -1;
    return check_new_name(p, name, *sname);
}

static int record_def(parser *p, kiln_value v, int line)
{
    if (note_line(&p->def_line, &p->def_cap, v, line))
        return kiln_lex_nomem(p);
    return 0;
}

static int stmt_input(parser *p)
{
    tok name;
    char *s = NULL;
    decl_type ty;
    int rc = -1;
    if (decl_head(p, "input", &name, &s) || parse_type(p, &ty) ||
        kiln_lex_end_of_statement(p))
        goto out;
    kiln_value v = kiln_graph_input(p->g, s, ty.dt, ty.rank, ty.dims, &p->e);
    if (v < 0) {
        kiln_lex_builder_fail(p, name.line, name.col);
        goto out;
    }
    rc = record_def(p, v, name.line);
out:
    free(s);
    return rc;
}

/* A bound written `(EXPR)`: numbers, names of scalar values, unary '-',
 * + - * / and parentheses (garch11's `upper=(1 - alpha1)`), read from the
 * source (kiln's other expressions are calls: add(a, b)) into add / sub /
 * mul / true_div nodes.  The current token is the '('. */
typedef struct bexpr {
    parser *p;
    const char *s;
    size_t i, n;
    int line, col0;
} bexpr;

static kiln_value bx_expr(bexpr *b);

static int bx_fail(bexpr *b, const char *what)
{
    return kiln_lex_fail_at(b->p, b->line, b->col0 + (int)b->i,
                            KILN_ERR_PARSE, "bound expression: %s", what);
}

/* A builder's result: on failure its message gets the position. */
static kiln_value bx_built(bexpr *b, kiln_value v)
{
    if (v < 0)
        kiln_lex_builder_fail(b->p, b->line, b->col0);
    return v;
}

static void bx_ws(bexpr *b)
{
    while (b->i < b->n && (b->s[b->i] == ' ' || b->s[b->i] == '\t'))
        b->i++;
}

static kiln_value bx_factor(bexpr *b)
{
    bx_ws(b);
    if (b->i >= b->n)
        return bx_fail(b, "expected a number, a name or '('");
    char c = b->s[b->i];
    kiln_graph *g = b->p->g;
    if (c == '-') {
        b->i++;
        kiln_value x = bx_factor(b);
        return x < 0 ? -1 : bx_built(b, kiln_graph_op(g, "neg", 1, &x, NULL,
                                                      0, &b->p->e));
    }
    if (c == '(') {
        b->i++;
        kiln_value x = bx_expr(b);
        bx_ws(b);
        if (x >= 0 && (b->i >= b->n || b->s[b->i] != ')'))
            return bx_fail(b, "expected ')'");
        b->i++;
        return x;
    }
    size_t at = b->i;
    if ((c >= '0' && c <= '9') || c == '.') {
        while (b->i < b->n && ((b->s[b->i] >= '0' && b->s[b->i] <= '9') ||
                               b->s[b->i] == '.' || b->s[b->i] == 'e' ||
                               b->s[b->i] == 'E' ||
                               ((b->s[b->i] == '-' || b->s[b->i] == '+') &&
                                (b->s[b->i - 1] == 'e' ||
                                 b->s[b->i - 1] == 'E'))))
            b->i++;
        char buf[64];
        size_t len = b->i - at;
        if (len >= sizeof buf)
            return bx_fail(b, "number too long");
        memcpy(buf, b->s + at, len);
        buf[len] = '\0';
        char *end;
        double v = strtod(buf, &end);
        if (*end)
            return bx_fail(b, "bad number");
        return bx_built(b, kiln_graph_literal(g, v, KILN_LIT_FLOAT,
                                              &b->p->e));
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        while (b->i < b->n && ((b->s[b->i] >= 'a' && b->s[b->i] <= 'z') ||
                               (b->s[b->i] >= 'A' && b->s[b->i] <= 'Z') ||
                               (b->s[b->i] >= '0' && b->s[b->i] <= '9') ||
                               b->s[b->i] == '_'))
            b->i++;
        tok t = {T_IDENT, b->s + at, b->i - at, b->line,
                 b->col0 + (int)at};
        kiln_value v;
        return lookup_name(b->p, &t, &v) ? -1 : v;
    }
    return bx_fail(b, "expected a number, a name or '('");
}

static kiln_value bx_chain(bexpr *b, int mul)
{
    kiln_value v = mul ? bx_factor(b) : bx_chain(b, 1);
    for (;;) {
        bx_ws(b);
        if (v < 0 || b->i >= b->n)
            return v;
        char c = b->s[b->i];
        const char *op = mul ? (c == '*' ? "mul" : c == '/' ? "true_div"
                                                            : NULL)
                             : (c == '+' ? "add" : c == '-' ? "sub" : NULL);
        if (!op)
            return v;
        b->i++;
        kiln_value in[2] = {v, mul ? bx_factor(b) : bx_chain(b, 1)};
        v = in[1] < 0 ? -1 : bx_built(b, kiln_graph_op(b->p->g, op, 2, in,
                                                       NULL, 0, &b->p->e));
    }
}

static kiln_value bx_expr(bexpr *b)
{
    return bx_chain(b, 0);
}

static int parse_bound_expr(parser *p, kiln_value *out)
{
    if (p->has_pk)
        return kiln_lex_expected(p, "a bound");
    const char *s = p->t.s, *end = p->src + p->len;
    size_t n = 0;
    int depth = 0;
    for (; s + n < end && s[n] != '\n'; n++) {
        if (s[n] == '(')
            depth++;
        else if (s[n] == ')' && --depth == 0) {
            n++;
            break;
        }
    }
    if (depth != 0)
        return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                                "bound expression: unclosed '('");
    bexpr b = {p, s, 0, n, p->t.line, p->t.col};
    int first = p->g->n_nodes;
    kiln_value v = bx_expr(&b);
    if (v < 0)
        return -1;
    bx_ws(&b);
    if (b.i != b.n)
        return bx_fail(&b, "unexpected text");
    kiln_ir_stamp_lines(p->g, first, p->t.line);
    /* the lexer saw the '(' (one open bracket); skip to after ')' */
    if (p->nest)
        p->nest--;
    p->pos = (size_t)(s + n - p->src);
    *out = v;
    return kiln_lex_advance(p);
}

/* `param NAME: TYPE [lower=L] [upper=U]`: L and U are numbers or names
 * of scalar const/shared values (kiln_graph_param, core/ir/param.c). */
static int stmt_param(parser *p)
{
    tok name;
    char *s = NULL;
    decl_type ty;
    int rc = -1;
    double bound[2] = {-INFINITY, INFINITY};
    kiln_value ref[2] = {-1, -1};
    int seen[2] = {0, 0};
    if (decl_head(p, "param", &name, &s) || parse_type(p, &ty))
        goto out;
    int transform = 0;
    tok trtok = p->t;
    while (p->t.kind == T_IDENT) {
        tok kw = p->t;
        int which = kiln_lex_is_word(&kw, "lower") ? 0 : kiln_lex_is_word(&kw, "upper") ? 1 : -1;
        int tr = which < 0 ? kiln_param_transform_lookup(kw.s, kw.n) : -1;
        if (tr > 0 && !transform) {
            transform = tr;
            trtok = kw;
            if (kiln_lex_advance(p))
                goto out;
            continue;
        }
        if (which < 0) {
            kiln_lex_expected(p, transform ? "end of line (one transform a "
                                             "parameter)"
                                           : "lower=BOUND, upper=BOUND, a "
                                             "transform (simplex, ordered, "
                                             "...) or end of line");
            goto out;
        }
        if (seen[which]) {
            kiln_lex_fail_at(p, kw.line, kw.col, KILN_ERR_PARSE,
                    "param: %s given twice", which ? "upper" : "lower");
            goto out;
        }
        seen[which] = 1;
        if (kiln_lex_advance(p) || kiln_lex_expect(p, T_EQ, "'=' after the bound's keyword"))
            goto out;
        if (starts_scalar(p)) {
            scalar sc;
            if (parse_scalar(p, &sc))
                goto out;
            if (sc.kind == KILN_LIT_BOOL || isnan(sc.d)) {
                kiln_lex_fail_at(p, sc.line, sc.col, KILN_ERR_PARSE,
                        "param: a bound is a number or a name, found '%.*s'",
                        sc.n > 60 ? 60 : (int)sc.n, sc.s);
                goto out;
            }
            bound[which] = sc.d;
        } else if (p->t.kind == T_IDENT) {
            tok bt = p->t;
            if (lookup_name(p, &bt, &ref[which]) || kiln_lex_advance(p))
                goto out;
        } else if (p->t.kind == T_LPAREN) {
            if (parse_bound_expr(p, &ref[which]))
                goto out;
            /* `(2)`: a number */
            if (p->g->nodes[ref[which]].op == KILN_OP_LITERAL) {
                bound[which] = p->g->nodes[ref[which]].value;
                ref[which] = -1;
            }
        } else {
            kiln_lex_expected(p, "a number, the name of a scalar value or "
                                 "(EXPRESSION)");
            goto out;
        }
    }
    if (kiln_lex_end_of_statement(p))
        goto out;
    if (transform && (seen[0] || seen[1])) {
        kiln_lex_fail_at(p, trtok.line, trtok.col, KILN_ERR_PARSE,
                         "param: a %s takes no bounds",
                         kiln_param_transform_name(transform));
        goto out;
    }
    kiln_value v = transform
        ? kiln_graph_param_transform(p->g, s, ty.dt, ty.rank, ty.dims,
                                     transform, &p->e)
        : kiln_graph_param(p->g, s, ty.dt, ty.rank, ty.dims, bound[0],
                           ref[0], bound[1], ref[1], &p->e);
    if (v < 0) {
        kiln_lex_builder_fail(p, name.line, name.col);
        goto out;
    }
    rc = record_def(p, v, name.line);
    if (!rc && p->g->params[p->g->n_params - 1].unc != v)
        rc = record_def(p, p->g->params[p->g->n_params - 1].unc, name.line);
out:
    free(s);
    return rc;
}

/* Growable typed buffer for a const's values. */
typedef struct cbuf {
    unsigned char *data;
    size_t n, cap;    /* elements */
    size_t esize;
    int64_t numel;
} cbuf;

static int const_put(parser *p, cbuf *b, const char *name, kiln_dtype dt,
                     const scalar *sc)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 16;
        if ((int64_t)nc > b->numel)
            nc = (size_t)b->numel;
        unsigned char *q = realloc(b->data, nc * b->esize);
        if (!q)
            return kiln_lex_nomem(p);
        b->data = q;
        b->cap = nc;
    }
    unsigned char *dst = b->data + b->n * b->esize;
    int bad = 0;
    switch (dt) {
    case KILN_F64:
        if (sc->kind == KILN_LIT_BOOL)
            bad = 1;
        else
            memcpy(dst, &sc->d, 8);
        break;
    case KILN_F32: {
        float f = (float)sc->d;
        if (sc->kind == KILN_LIT_BOOL)
            bad = 1;
        else if (isinf(f) && !isinf(sc->d))
            return kiln_lex_fail_at(p, sc->line, sc->col, KILN_ERR_PARSE,
                           "const '%s': %.*s is out of range for f32", name,
                           (int)sc->n, sc->s);
        else
            memcpy(dst, &f, 4);
        break;
    }
    case KILN_I64:
        if (sc->kind != KILN_LIT_INT)
            bad = 1;
        else
            memcpy(dst, &sc->i, 8);
        break;
    case KILN_I32: {
        if (sc->kind != KILN_LIT_INT)
            bad = 1;
        else if (sc->i < INT32_MIN || sc->i > INT32_MAX)
            return kiln_lex_fail_at(p, sc->line, sc->col, KILN_ERR_PARSE,
                           "const '%s': %.*s is out of range for i32", name,
                           (int)sc->n, sc->s);
        int32_t v = (int32_t)sc->i;
        memcpy(dst, &v, 4);
        break;
    }
    default: /* bool */
        if (sc->kind == KILN_LIT_FLOAT ||
            (sc->kind == KILN_LIT_INT && sc->i != 0 && sc->i != 1))
            bad = 1;
        else
            *dst = (unsigned char)(sc->i != 0);
    }
    if (bad)
        return kiln_lex_fail_at(p, sc->line, sc->col, KILN_ERR_PARSE,
                       "const '%s': '%.*s' is not a value of dtype %s", name,
                       sc->n > 60 ? 60 : (int)sc->n, sc->s,
                       kiln_dtype_name(dt));
    b->n++;
    return 0;
}

/* The values of axis `level` and below (recursion depth <= rank). */
static int const_level(parser *p, cbuf *b, const char *name,
                       const decl_type *ty, int level, const char *tstr)
{
    char d[64];
    if (level == ty->rank) {
        if (!starts_scalar(p)) {
            if (p->t.kind == T_LBRACK)
                return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_SHAPE,
                               "const '%s': too many nested lists for type "
                               "%s", name, tstr);
            return kiln_lex_expected(p, "a number");
        }
        scalar sc;
        return parse_scalar(p, &sc) || const_put(p, b, name, ty->dt, &sc)
                   ? -1 : 0;
    }
    int64_t want = ty->dims[level];
    if (p->t.kind != T_LBRACK)
        return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_SHAPE,
                       "const '%s': expected a list of %lld values for axis "
                       "%d of type %s, found %s", name, (long long)want,
                       level, tstr, kiln_lex_tok_desc(&p->t, d, sizeof d));
    int lline = p->t.line, lcol = p->t.col;
    if (kiln_lex_advance(p))
        return -1;
    int64_t got = 0;
    while (p->t.kind != T_RBRACK) {
        if (got == want)
            return kiln_lex_fail_at(p, lline, lcol, KILN_ERR_SHAPE,
                           "const '%s': more than %lld values for axis %d "
                           "of type %s", name, (long long)want, level, tstr);
        if (const_level(p, b, name, ty, level + 1, tstr))
            return -1;
        got++;
        if (p->t.kind == T_COMMA) {
            if (kiln_lex_advance(p))
                return -1;
            if (p->t.kind == T_RBRACK)
                return kiln_lex_expected(p, "a value after ','");
            continue;
        }
        if (p->t.kind != T_RBRACK)
            return kiln_lex_expected(p, "',' or ']' in the list");
    }
    if (got != want)
        return kiln_lex_fail_at(p, lline, lcol, KILN_ERR_SHAPE,
                       "const '%s': expected %lld values for axis %d of type "
                       "%s, found %lld", name, (long long)want, level, tstr,
                       (long long)got);
    return kiln_lex_advance(p);
}

static int stmt_const(parser *p)
{
    tok name;
    char *s = NULL;
    decl_type ty;
    cbuf b = { NULL, 0, 0, 0, 0 };
    int rc = -1;
    char tstr[256];
    if (decl_head(p, "const", &name, &s) || parse_type(p, &ty))
        goto out;
    kiln_type kt;
    memset(&kt, 0, sizeof kt);
    kt.dtype = ty.dt;
    kt.rank = ty.rank;
    memcpy(kt.dims, ty.dims, sizeof kt.dims);
    kiln_ir_type_str(p->g, &kt, tstr, sizeof tstr);
    for (int i = 0; i < ty.rank; i++)
        if (ty.dims[i] < 0) {
            kiln_lex_fail_at(p, ty.line, ty.col, KILN_ERR_PARSE,
                    "const '%s': type %s is not static (a const needs a "
                    "known shape)", s, tstr);
            goto out;
        }
    if (p->t.kind != T_EQ) {
        char m[300];
        snprintf(m, sizeof m, "'=' and the value of const '%.200s'", s);
        kiln_lex_expected(p, m);
        goto out;
    }
    if (kiln_lex_advance(p))
        goto out;
    b.esize = kiln_dtype_size(ty.dt);
    b.numel = kiln_shape_numel(ty.rank, ty.dims);
    if (b.numel < 0 || (uint64_t)b.numel > SIZE_MAX / 16) {
        kiln_lex_fail_at(p, ty.line, ty.col, KILN_ERR_SHAPE,
                "const '%s': type %s is too large", s, tstr);
        goto out;
    }
    if (const_level(p, &b, s, &ty, 0, tstr) || kiln_lex_end_of_statement(p))
        goto out;
    kiln_value v = kiln_graph_const(p->g, s, ty.dt, ty.rank, ty.dims, b.data,
                                    &p->e);
    if (v < 0) {
        kiln_lex_builder_fail(p, name.line, name.col);
        goto out;
    }
    rc = record_def(p, v, name.line);
out:
    free(b.data);
    free(s);
    return rc;
}

/* Append `s` to dst at *k, escaping '\\' and '"'. */
static size_t put_escaped(char *dst, size_t k, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            dst[k++] = '\\';
        dst[k++] = *s;
    }
    return k;
}

/* The dim of a shared value's declared type that the read options'
 * partition axis sizes (issue 30: read only a part's rows), or -1. */
static int part_dim(const parser *p, const decl_type *ty)
{
    const kiln_read_options *ro = p->data;
    if (!ro || ro->struct_size < offsetof(kiln_read_options, part_nparts) +
                                     sizeof ro->part_nparts ||
        !ro->part_axis || ro->part_nparts < 1 || ro->part_index < 0 ||
        ro->part_index >= ro->part_nparts)
        return -1;
    for (int k = 0; k < ty->rank; k++) {
        int64_t d = ty->dims[k];
        if (KILN_DIM_IS_SYM(d) && p->g->symbols[KILN_SYM_INDEX(d)] &&
            strcmp(p->g->symbols[KILN_SYM_INDEX(d)], ro->part_axis) == 0)
            return k;
    }
    return -1;
}

static int stmt_shared(parser *p)
{
    tok name;
    char *s = NULL, *path = NULL, *column = NULL, *full = NULL;
    char *source = NULL;
    decl_type ty;
    kiln_tensor t;
    int have_t = 0;
    int pk = -1, read_part = 0;     /* a part's rows read (issue 30) */
    int64_t rtotal = 0;
    uint64_t rdig = 0;
    int rc = -1;
    memset(&t, 0, sizeof t);
    if (decl_head(p, "shared", &name, &s) || parse_type(p, &ty))
        goto out;
    tok src = name, ptok = name;
    const char *kind = NULL;   /* "npy", "csv", "json" or "safetensors" */
    if (p->t.kind == T_EQ) {
        if (kiln_lex_advance(p))
            goto out;
        src = p->t;
        kind = kiln_lex_is_word(&p->t, "npy") ? "npy" : kiln_lex_is_word(&p->t, "csv") ? "csv"
               : kiln_lex_is_word(&p->t, "json") ? "json"
               : kiln_lex_is_word(&p->t, "safetensors") ? "safetensors" : NULL;
        if (!kind) {
            kiln_lex_expected(p, "npy(\"FILE\"), csv(\"FILE\", \"COLUMN\"), "
                        "json(\"FILE\", \"KEY\") or safetensors(\"FILE\", "
                        "\"TENSOR\") after '='");
            goto out;
        }
        if (kiln_lex_advance(p) || kiln_lex_expect(p, T_LPAREN, "'('"))
            goto out;
        ptok = p->t;
        if (p->t.kind != T_STRING) {
            kiln_lex_expected(p, "a file name in double quotes");
            goto out;
        }
        if (!(path = kiln_lex_str_value(&p->t))) {
            kiln_lex_nomem(p);
            goto out;
        }
        if (kiln_lex_advance(p))
            goto out;
        if (kind[0] != 'n') {
            int csv = kind[0] == 'c';
            const char *what = csv ? "a column name"
                               : kind[0] == 's' ? "a tensor name"
                                                : "a variable name";
            char want[64];
            snprintf(want, sizeof want, "',' and %s", what);
            if (kiln_lex_expect(p, T_COMMA, want))
                goto out;
            if (p->t.kind != T_STRING) {
                snprintf(want, sizeof want, "%s in double quotes", what);
                kiln_lex_expected(p, want);
                goto out;
            }
            if (!(column = kiln_lex_str_value(&p->t))) {
                kiln_lex_nomem(p);
                goto out;
            }
            if (kiln_lex_advance(p))
                goto out;
        }
        if (kiln_lex_expect(p, T_RPAREN, "')'") || kiln_lex_end_of_statement(p))
            goto out;
        /* resolve the path against base_dir */
        size_t bl = p->base_dir && path[0] != '/' ? strlen(p->base_dir) : 0;
        full = malloc(bl + strlen(path) + 2);
        if (!full) {
            kiln_lex_nomem(p);
            goto out;
        }
        if (bl)
            snprintf(full, bl + strlen(path) + 2, "%s/%s", p->base_dir, path);
        else
            strcpy(full, path);
        /* access(), not open(): opening a FIFO would block, or release
         * and then break the writer the caller allowed */
        int only;
        if (!data_memfile(full, p->data, &only) && !only &&
            access(full, R_OK) != 0) {
            kiln_lex_fail_at(p, ptok.line, ptok.col, KILN_ERR_IO,
                    "cannot read data file '%s': %s", path, strerror(errno));
            goto out;
        }
        int r;
        if (kind[0] == 'j') {
            /* one read of a file that several json() values name */
            if (!p->json || strcmp(p->json_path, full) != 0) {
                kiln_json_data_free(p->json);
                free(p->json_path);
                p->json_path = NULL;
                p->json = kiln_json_data_read(full, p->data, &p->e);
                if (p->json && !(p->json_path = strdup(full))) {
                    kiln_json_data_free(p->json);
                    p->json = NULL;
                    kiln_lex_nomem(p);
                    goto out;
                }
            }
            r = !p->json || kiln_json_data_get(p->json, column, ty.dt,
                                               ty.rank, ty.dims, &t, &p->e);
        } else if (kind[0] == 's') {
            /* one open (and mapping) of a file that several values name;
             * the tensor is bound in place below */
            r = 0;
            if (!p->st || strcmp(p->st_path, full) != 0) {
                kiln_safetensors_close(p->st);
                p->st = NULL;
                free(p->st_path);
                if (!(p->st_path = strdup(full))) {
                    kiln_lex_nomem(p);
                    goto out;
                }
                r = kiln_safetensors_open(full, p->data, &p->st, &p->e);
            }
        } else if (kind[0] == 'c') {
            r = kiln_csv_read_column_opts(full, column, ty.dt, p->data, &t,
                                          &p->e);
        } else if ((pk = part_dim(p, &ty)) >= 0) {
            /* a part's rows only (issue 30): the whole is streamed
             * through its digest, the part's bytes kept */
            const kiln_read_options *ro = p->data;
            r = kiln_ir_part_npy_read(full, ro, pk, ro->part_index,
                                      ro->part_nparts, &t, &rtotal, &rdig,
                                      &p->e);
            read_part = !r;
        } else {
            r = kiln_npy_read_opts(full, p->data, &t, &p->e);
        }
        if (!r && !read_part && kind[0] != 's' &&
            (pk = part_dim(p, &ty)) >= 0 && pk < t.rank) {
            /* csv(), json(): read whole, then the part's rows kept */
            const kiln_read_options *ro = p->data;
            int64_t b, e;
            kiln_tensor s2;
            rtotal = t.shape[pk];
            rdig = kiln_ir_part_value_digest(&t);
            kiln_ir_part_rows(rtotal, ro->part_index, ro->part_nparts, &b,
                              &e);
            r = kiln_ir_part_slice_value(p->g, NULL, pk, &t, b, e, &s2,
                                         &p->e);
            if (!r) {
                free(t.data);
                t = s2;
                read_part = 1;
            }
        }
        if (r) {
            kiln_lex_builder_fail(p, src.line, src.col);
            goto out;
        }
        have_t = kind[0] != 's';
        size_t sl = 32 + 2 * strlen(path) + (column ? 2 * strlen(column) : 0);
        if (!(source = malloc(sl))) {
            kiln_lex_nomem(p);
            goto out;
        }
        size_t k = strlen(kind);
        memcpy(source, kind, k);
        memcpy(source + k, "(\"", 2);
        k = put_escaped(source, k + 2, path);
        source[k++] = '"';
        if (column) {
            memcpy(source + k, ", \"", 3);
            k = put_escaped(source, k + 3, column);
            source[k++] = '"';
        }
        source[k++] = ')';
        source[k] = '\0';
    } else if (kiln_lex_end_of_statement(p)) {
        goto out;
    }
    kiln_value v = kiln_graph_shared(p->g, s, ty.dt, ty.rank, ty.dims,
                                     have_t ? &t : NULL, &p->e);
    if (v < 0 || (kind && kind[0] == 's' &&
                  kiln_safetensors_bind(p->g, v, p->st, column, &p->e))) {
        kiln_lex_builder_fail(p, src.line, src.col);
        goto out;
    }
    p->g->nodes[v].source = source;
    source = NULL;
    if (read_part) {
        const kiln_read_options *ro = p->data;
        kiln_node *nd = &p->g->nodes[v];
        nd->read_part = 1;
        nd->read_total = rtotal;
        nd->has_wdigest = 1;
        nd->wdigest = rdig;
        p->g->read_k = ro->part_index;
        p->g->read_n = ro->part_nparts;
        p->g->read_sym = KILN_SYM_INDEX(ty.dims[pk]);
    }
    rc = record_def(p, v, name.line);
out:
    if (have_t)
        free(t.data);
    free(source);
    free(full);
    free(column);
    free(path);
    free(s);
    return rc;
}

/* `partition NAME`: the graph's observation axis (issue 30;
 * kiln_graph_set_partition_axis), a symbol already in the graph. */
static int stmt_partition(parser *p)
{
    if (kiln_lex_advance(p))
        return -1;
    tok name = p->t;
    if (name.kind != T_IDENT)
        return kiln_lex_expected(p, "the observation axis after 'partition' "
                                  "(a symbol that sizes data, as in "
                                  "'partition N')");
    if (p->g->part_axis)
        return kiln_lex_fail_at(p, name.line, name.col, KILN_ERR_PARSE,
                                "partition: the graph declares its axis "
                                "'%s' already", p->g->part_axis);
    char *s = kiln_lex_tok_str(&name);
    if (!s)
        return kiln_lex_nomem(p);
    int rc = kiln_lex_advance(p) || kiln_lex_end_of_statement(p) ? -1 : 0;
    if (!rc && kiln_graph_set_partition_axis(p->g, s, &p->e)) {
        kiln_lex_fail_at(p, name.line, name.col, p->e.code,
                         "partition: the graph has no symbol '%s' (declare "
                         "the data it sizes first)", s);
        rc = -1;
    }
    free(s);
    return rc;
}

static int stmt_output(parser *p)
{
    if (kiln_lex_advance(p))
        return -1;
    /* `output tp NAME ...`, `output gq NAME ...`: a model's transformed
     * parameter or generated quantity (tp and gq are keywords only
     * here, before a name) */
    int kind = KILN_OUTPUT_PLAIN;
    if (kiln_lex_is_word(&p->t, "tp") || kiln_lex_is_word(&p->t, "gq")) {
        const tok *nx = kiln_lex_peek(p);
        if (!nx)
            return -1;
        if (nx->kind == T_IDENT) {
            kind = kiln_lex_is_word(&p->t, "tp") ? KILN_OUTPUT_TP : KILN_OUTPUT_GQ;
            if (kiln_lex_advance(p))
                return -1;
        }
    }
    tok name = p->t;
    char *s = kiln_lex_tok_str(&name);
    int rc = -1;
    if (!s)
        return kiln_lex_nomem(p);
    if (kiln_lex_advance(p))
        goto out;
    kiln_value v;
    if (p->t.kind == T_EQ) {
        operand o;
        if (kiln_lex_advance(p) || parse_expr(p, &o) || materialize(p, &o))
            goto out;
        v = o.v;
    } else if (lookup_name(p, &name, &v)) {
        goto out;
    }
    if (kiln_lex_end_of_statement(p))
        goto out;
    /* a model's names (BridgeStan's param_names) must not repeat: a tp
     * or gq output may not take a parameter's name */
    for (int k = 0; kind != KILN_OUTPUT_PLAIN && k < p->g->n_params; k++)
        if (strcmp(p->g->params[k].name, s) == 0) {
            kiln_lex_fail_at(p, name.line, name.col, KILN_ERR_NAME,
                    "output %s '%s': a parameter has that name (a model's "
                    "names must differ; name the output otherwise)",
                    kind == KILN_OUTPUT_TP ? "tp" : "gq", s);
            goto out;
        }
    int was_named = p->g->nodes[v].name != NULL;
    if (kiln_graph_output(p->g, s, v, &p->e)) {
        /* output names are their own namespace; a duplicate is found by
         * the builder's map, the line of the first one only now */
        if (p->e.code == KILN_ERR_NAME &&
            strncmp(p->e.message, "duplicate output", 16) == 0)
            for (int k = 0; k < p->g->n_outputs; k++)
                if (strcmp(p->g->outputs[k].name, s) == 0) {
                    int l = (size_t)k < p->out_cap ? p->out_line[k] : 0;
                    kiln_lex_fail_at(p, name.line, name.col, KILN_ERR_NAME,
                            "duplicate output '%s' (first defined at line "
                            "%d)", s, l);
                    goto out;
                }
        kiln_lex_builder_fail(p, name.line, name.col);
        goto out;
    }
    p->g->outputs[p->g->n_outputs - 1].kind = kind;
    if (note_line(&p->out_line, &p->out_cap, p->g->n_outputs - 1, name.line)) {
        kiln_lex_nomem(p);
        goto out;
    }
    if (!was_named && p->g->nodes[v].name && record_def(p, v, name.line))
        goto out;
    rc = 0;
out:
    free(s);
    return rc;
}

/* ---- gradients ------------------------------------------------------ */

/* A name on the left of `NAME1, ..., NAMEk = grad(...)`. */
typedef struct lhs_name {
    tok t;
    char *s;      /* its text (owned by the caller) */
} lhs_name;

/* 1 when the current token starts `grad(`, 0 when not, -1 on a lexer
 * error in the token after it. */
static int starts_grad(parser *p)
{
    if (!kiln_lex_is_word(&p->t, "grad"))
        return 0;
    const tok *nx = kiln_lex_peek(p);
    if (!nx)
        return -1;
    return nx->kind == T_LPAREN;
}

/* `grad(COST, WRT1, ..., WRTk [, disconnected="zero"|"error"])` after
 * `NAMES =` (names[0..n), each already checked to be new): calls
 * kiln_graph_grad and names out[i] names[i].  The current token is
 * `grad`; errors about the call as a whole are at its position. */
static int parse_grad(parser *p, const lhs_name *names, size_t n)
{
    tok gt = p->t;
    operand *args = NULL;
    kiln_value *wrt = NULL, *out = NULL;
    size_t nargs = 0, cargs = 0;
    unsigned flags = 0;
    int seen_kw = 0, rc = -1;
    char b[64];
    if (kiln_lex_advance(p) || kiln_lex_advance(p)) /* grad '(' */
        return -1;
    while (p->t.kind != T_RPAREN) {
        const tok *nx = NULL;
        if (p->t.kind == T_IDENT && !(nx = kiln_lex_peek(p)))
            goto done;
        if (nx && nx->kind == T_EQ) {
            tok key = p->t;
            if (!kiln_lex_is_word(&key, "disconnected")) {
                kiln_lex_fail_at(p, key.line, key.col, KILN_ERR_PARSE,
                        "grad: unknown keyword %s (grad takes only "
                        "disconnected=\"zero\" or disconnected=\"error\")",
                        kiln_lex_tok_desc(&key, b, sizeof b));
                goto done;
            }
            if (seen_kw) {
                kiln_lex_fail_at(p, key.line, key.col, KILN_ERR_PARSE,
                        "grad: disconnected given twice");
                goto done;
            }
            seen_kw = 1;
            if (kiln_lex_advance(p) || kiln_lex_advance(p)) /* key '=' */
                goto done;
            if (p->t.kind == T_STRING && p->t.n == 4 &&
                memcmp(p->t.s, "zero", 4) == 0) {
                flags |= KILN_GRAD_DISCONNECTED_ZERO;
            } else if (!(p->t.kind == T_STRING && p->t.n == 5 &&
                         memcmp(p->t.s, "error", 5) == 0)) {
                kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                        "grad: disconnected must be \"zero\" or \"error\", "
                        "found %s", kiln_lex_tok_desc(&p->t, b, sizeof b));
                goto done;
            }
            if (kiln_lex_advance(p))
                goto done;
        } else {
            if (seen_kw) {
                kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                        "grad: positional argument after keyword argument");
                goto done;
            }
            if (parse_arg(p, &args, &nargs, &cargs))
                goto done;
        }
        if (p->t.kind == T_COMMA) {
            if (kiln_lex_advance(p))
                goto done;
            if (p->t.kind == T_RPAREN) {
                kiln_lex_expected(p, "an argument after ','");
                goto done;
            }
            continue;
        }
        if (p->t.kind != T_RPAREN) {
            kiln_lex_expected(p, "',' or ')' in the arguments of grad");
            goto done;
        }
    }
    if (nargs < 2) {
        kiln_lex_fail_at(p, gt.line, gt.col, KILN_ERR_PARSE,
                "grad: expected the cost and at least one value to "
                "differentiate with respect to: NAMES = grad(COST, X1, ...)");
        goto done;
    }
    if (nargs - 1 != n) {
        kiln_lex_fail_at(p, gt.line, gt.col, KILN_ERR_PARSE,
                "grad: %zu name%s on the left but %zu value%s to "
                "differentiate with respect to", n, n == 1 ? "" : "s",
                nargs - 1, nargs == 2 ? "" : "s");
        goto done;
    }
    if (kiln_lex_advance(p)) /* ')' */
        goto done;
    if (p->t.kind == T_LBRACK) {
        kiln_lex_fail_at(p, gt.line, gt.col, KILN_ERR_PARSE,
                "grad can only be used as a statement: NAMES = grad(...)");
        goto done;
    }
    if (kiln_lex_end_of_statement(p))
        goto done;
    for (size_t k = 0; k < nargs; k++)
        if (materialize(p, &args[k]))
            goto done;
    wrt = malloc(n * sizeof *wrt);
    out = malloc(n * sizeof *out);
    if (!wrt || !out) {
        kiln_lex_nomem(p);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        wrt[i] = args[i + 1].v;
    if (kiln_graph_grad(p->g, args[0].v, (int)n, wrt, flags, out, &p->e)) {
        kiln_lex_builder_fail(p, gt.line, gt.col);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        kiln_value v = out[i];
        if (p->g->nodes[v].name) {
            /* a value has one name: when kiln_graph_grad returned a value
             * that is already named (the same gradient for two wrt, as
             * for add(x, y)), name a copy and record the copy */
            kiln_attr at = {.key = "dtype", .kind = KILN_ATTR_DTYPE,
                            .i = p->g->nodes[v].type.dtype};
            kiln_value c = kiln_graph_op(p->g, "cast", 1, &v, &at, 1,
                                         &p->e);
            if (c < 0) {
                kiln_lex_builder_fail(p, gt.line, gt.col);
                goto done;
            }
            for (int r = p->g->n_grads - 1; r >= 0; r--)
                if (p->g->grads[r].result == v &&
                    p->g->grads[r].wrt == wrt[i]) {
                    p->g->grads[r].result = c;
                    break;
                }
            v = c;
        }
        if (kiln_graph_set_name(p->g, v, names[i].s, &p->e)) {
            kiln_lex_builder_fail(p, names[i].t.line, names[i].t.col);
            goto done;
        }
        if (record_def(p, v, names[i].t.line))
            goto done;
    }
    rc = 0;
done:
    free(args);
    free(wrt);
    free(out);
    return rc;
}

/* The names of one multi-assignment, hashed (open addressing, XXH3), so
 * that the duplicate check is linear in their number: a 10,000-output
 * `grad` line compared every pair before (50 million strcmp). */
typedef struct name_set {
    size_t *slot;        /* index + 1 into the names; 0 = empty */
    size_t cap, n;       /* cap: a power of two, or 0 */
} name_set;

/* Add names[i] to *s.  Returns the index of an earlier equal name, -1
 * when it is new, -2 when out of memory. */
static long seen_name(name_set *s, const lhs_name *names, size_t i)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        size_t *t = calloc(cap, sizeof *t);
        if (!t)
            return -2;
        for (size_t k = 0; k < s->cap; k++)
            if (s->slot[k]) {
                const char *x = names[s->slot[k] - 1].s;
                size_t h = (size_t)XXH3_64bits(x, strlen(x)) & (cap - 1);
                while (t[h])
                    h = (h + 1) & (cap - 1);
                t[h] = s->slot[k];
            }
        free(s->slot);
        s->slot = t;
        s->cap = cap;
    }
    const char *x = names[i].s;
    size_t h = (size_t)XXH3_64bits(x, strlen(x)) & (s->cap - 1);
    for (; s->slot[h]; h = (h + 1) & (s->cap - 1))
        if (strcmp(names[s->slot[h] - 1].s, x) == 0)
            return (long)(s->slot[h] - 1);
    s->slot[h] = i + 1;
    s->n++;
    return -1;
}

/* `NAME1, NAME2, ... = grad(...)`: the current token is NAME1, a ','
 * follows. */
static int stmt_multi_assign(parser *p)
{
    lhs_name *names = NULL;
    name_set seen = {NULL, 0, 0};
    size_t n = 0, cap = 0;
    int rc = -1;
    for (;;) {
        if (p->t.kind != T_IDENT) {
            kiln_lex_expected(p, "a name after ','");
            goto out;
        }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 8;
            lhs_name *q = realloc(names, nc * sizeof *q);
            if (!q) {
                kiln_lex_nomem(p);
                goto out;
            }
            names = q;
            cap = nc;
        }
        names[n].t = p->t;
        if (!(names[n].s = kiln_lex_tok_str(&p->t))) {
            kiln_lex_nomem(p);
            goto out;
        }
        n++;
        if (check_new_name(p, &names[n - 1].t, names[n - 1].s))
            goto out;
        long dup = seen_name(&seen, names, n - 1);
        if (dup == -2) {
            kiln_lex_nomem(p);
            goto out;
        }
        if (dup >= 0) {
            kiln_lex_fail_at(p, names[n - 1].t.line, names[n - 1].t.col,
                    KILN_ERR_NAME, "duplicate name '%s' (first defined "
                    "at line %d)", names[n - 1].s, names[dup].t.line);
            goto out;
        }
        if (kiln_lex_advance(p))
            goto out;
        if (p->t.kind == T_EQ)
            break;
        if (p->t.kind != T_COMMA) {
            kiln_lex_expected(p, "',' or '=' after a name");
            goto out;
        }
        if (kiln_lex_advance(p))
            goto out;
    }
    if (kiln_lex_advance(p)) /* '=' */
        goto out;
    int sg = starts_grad(p);
    if (sg < 0)
        goto out;
    if (!sg) {
        kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                "several names on the left need grad on the right: "
                "NAME1, NAME2 = grad(COST, X1, X2)");
        goto out;
    }
    rc = parse_grad(p, names, n);
out:
    for (size_t i = 0; i < n; i++)
        free(names[i].s);
    free(names);
    free(seen.slot);
    return rc;
}

static int stmt_assign(parser *p)
{
    tok name = p->t;
    char *s = kiln_lex_tok_str(&name);
    int rc = -1;
    operand o;
    if (!s)
        return kiln_lex_nomem(p);
    if (kiln_lex_advance(p) || kiln_lex_advance(p)) /* NAME '=' */
        goto out;
    if (check_new_name(p, &name, s))
        goto out;
    int sg = starts_grad(p);
    if (sg < 0)
        goto out;
    if (sg) {
        lhs_name one = {name, s};
        rc = parse_grad(p, &one, 1);
        goto out;
    }
    if (parse_expr(p, &o) || materialize(p, &o) || kiln_lex_end_of_statement(p))
        goto out;
    if (kiln_graph_set_name(p->g, o.v, s, &p->e)) {
        kiln_lex_builder_fail(p, name.line, name.col);
        goto out;
    }
    rc = record_def(p, o.v, name.line);
out:
    free(s);
    return rc;
}

/* ---- file ----------------------------------------------------------- */

static int skip_blank_lines(parser *p)
{
    while (p->t.kind == T_NL)
        if (kiln_lex_advance(p))
            return -1;
    return 0;
}

static int parse_block(parser *p);

static int parse_graph(parser *p)
{
    char b[64];
    if (kiln_lex_advance(p) || skip_blank_lines(p))
        return -1;
    if (!kiln_lex_is_word(&p->t, "kiln"))
        return kiln_lex_expected(p, "'kiln 1' (the format version) on the first line");
    if (kiln_lex_advance(p))
        return -1;
    if (p->t.kind != T_INT && p->t.kind != T_FLOAT)
        return kiln_lex_expected(p, "a format version number after 'kiln'");
    if (!(p->t.kind == T_INT && p->t.n == 1 && p->t.s[0] == '1'))
        return kiln_lex_fail_at(p, p->t.line, p->t.col, KILN_ERR_PARSE,
                       "unsupported format version %s (this kiln reads "
                       "version 1)", kiln_lex_tok_desc(&p->t, b, sizeof b));
    if (kiln_lex_advance(p) || kiln_lex_end_of_statement(p) || skip_blank_lines(p))
        return -1;
    for (;;) {
        int rc = parse_block(p);
        if (rc)
            return rc;
        if (skip_blank_lines(p))
            return -1;
        if (p->t.kind == T_EOF)
            return 0;
        /* another block: the one just read is a body for later ones */
        if (p->n_bodies == p->cap_bodies) {
            int cap = p->cap_bodies ? 2 * p->cap_bodies : 4;
            kiln_graph **q = realloc(p->bodies, sizeof *q * (size_t)cap);
            if (!q)
                return kiln_lex_nomem(p);
            p->bodies = q;
            p->cap_bodies = cap;
        }
        p->bodies[p->n_bodies++] = p->g;
        p->g = NULL;
        free(p->def_line);
        free(p->out_line);
        p->def_line = NULL;
        p->out_line = NULL;
        p->def_cap = p->out_cap = 0;
        if (!kiln_lex_is_word(&p->t, "graph"))
            return kiln_lex_expected(p, "end of file or another 'graph "
                                        "NAME' block after 'end'");
    }
}

/* One `graph NAME ... end` block into p->g. */
static int parse_block(parser *p)
{
    if (!kiln_lex_is_word(&p->t, "graph"))
        return kiln_lex_expected(p, "'graph NAME'");
    if (kiln_lex_advance(p))
        return -1;
    if (p->t.kind != T_IDENT)
        return kiln_lex_expected(p, "a graph name after 'graph'");
    tok gname = p->t;
    char *s = kiln_lex_tok_str(&gname);
    if (!s)
        return kiln_lex_nomem(p);
    for (int i = 0; i < p->n_bodies; i++)
        if (strcmp(p->bodies[i]->name, s) == 0) {
            free(s);
            return kiln_lex_fail_at(p, gname.line, gname.col, KILN_ERR_PARSE,
                                    "graph '%.*s' defined twice",
                                    gname.n > 60 ? 60 : (int)gname.n,
                                    gname.s);
        }
    p->g = kiln_graph_new(s, &p->e);
    free(s);
    if (!p->g)
        return -1;
    if (kiln_lex_advance(p) || kiln_lex_end_of_statement(p))
        return -1;
    for (;;) {
        if (skip_blank_lines(p))
            return -1;
        if (p->t.kind == T_EOF) {
            char m[128];
            snprintf(m, sizeof m, "'end' to close graph '%.*s'",
                     gname.n > 60 ? 60 : (int)gname.n, gname.s);
            return kiln_lex_expected(p, m);
        }
        if (p->t.kind != T_IDENT)
            return kiln_lex_expected(p, "a statement (input, param, shared, const, output, "
                               "NAME = EXPR or end)");
        const tok *nx = kiln_lex_peek(p);
        if (!nx)
            return -1;
        int rc, n0 = kiln_graph_n_nodes(p->g), line = p->t.line;
        if (kiln_lex_is_word(&p->t, "end") && (nx->kind == T_NL || nx->kind == T_EOF))
            break;
        if (nx->kind == T_IDENT && kiln_lex_is_word(&p->t, "input"))
            rc = stmt_input(p);
        else if (nx->kind == T_IDENT && kiln_lex_is_word(&p->t, "shared"))
            rc = stmt_shared(p);
        else if (nx->kind == T_IDENT && kiln_lex_is_word(&p->t, "const"))
            rc = stmt_const(p);
        else if (nx->kind == T_IDENT && kiln_lex_is_word(&p->t, "output"))
            rc = stmt_output(p);
        else if (nx->kind == T_IDENT && kiln_lex_is_word(&p->t, "param"))
            rc = stmt_param(p);
        else if (nx->kind != T_EQ && nx->kind != T_COMMA &&
                 kiln_lex_is_word(&p->t, "partition"))
            rc = stmt_partition(p);   /* a bare `partition` too: says what */
        else if (nx->kind == T_EQ)
            rc = stmt_assign(p);
        else if (nx->kind == T_COMMA)
            rc = stmt_multi_assign(p);
        else if (kiln_lex_is_word(&p->t, "end")) {
            if (kiln_lex_advance(p))
                return -1;
            rc = kiln_lex_expected(p, "end of line after 'end'");
        }
        else if (kiln_lex_is_word(&p->t, "input") || kiln_lex_is_word(&p->t, "shared") ||
                 kiln_lex_is_word(&p->t, "const") || kiln_lex_is_word(&p->t, "output")) {
            if (kiln_lex_advance(p))
                return -1;
            rc = kiln_lex_expected(p, "a name");
        } else {
            if (kiln_lex_advance(p))
                return -1;
            rc = kiln_lex_expected(p, "'=' after the name");
        }
        if (rc)
            return -1;
        kiln_ir_stamp_lines(p->g, n0, line); /* kiln run --trace-nonfinite */
    }
    if (kiln_lex_advance(p) || kiln_lex_end_of_statement(p))
        return -1;
    return 0;
}

static kiln_graph *parse_text(const char *text, size_t len,
                              const char *filename, const char *base_dir,
                              const kiln_read_options *data, kiln_err *err)
{
    parser p;
    memset(&p, 0, sizeof p);
    /* a UTF-8 byte order mark, as some editors write, is not text */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        text += 3;
        len -= 3;
    }
    p.src = text;
    p.len = len;
    p.line = 1;
    p.file = filename ? filename : "<string>";
    p.base_dir = base_dir && *base_dir ? base_dir : NULL;
    p.data = data;
    int rc = parse_graph(&p);
    for (int i = 0; i < p.n_bodies; i++)
        kiln_graph_free(p.bodies[i]);   /* scans hold their own references */
    free(p.bodies);
    kiln_json_data_free(p.json);
    free(p.json_path);
    kiln_safetensors_close(p.st);   /* bound values keep the mapping */
    free(p.st_path);
    free(p.def_line);
    free(p.out_line);
    free(p.open_at);
    if (rc) {
        kiln_graph_free(p.g);
        if (err)
            *err = p.e;
        return NULL;
    }
    return p.g;
}

kiln_graph *kiln_parse_string(const char *text, const char *filename,
                              const char *base_dir, kiln_err *err)
{
    return kiln_parse_string_opts(text, filename, base_dir, NULL, err);
}

kiln_graph *kiln_parse_string_opts(const char *text, const char *filename,
                                   const char *base_dir,
                                   const kiln_read_options *data,
                                   kiln_err *err)
{
    if (!text) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_parse_string: text is NULL");
        return NULL;
    }
    return parse_text(text, strlen(text), filename, base_dir, data, err);
}

kiln_graph *kiln_parse_file(const char *path, kiln_err *err)
{
    return kiln_parse_file_opts(path, NULL, err);
}

kiln_graph *kiln_parse_file_opts(const char *path,
                                 const kiln_read_options *data, kiln_err *err)
{
    if (!path) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_parse_file: path is NULL");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        kiln_seterr(err, KILN_ERR_IO, "cannot read '%s': %s", path,
                    strerror(errno));
        return NULL;
    }
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", path);
            return NULL;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        /* a NUL byte is never part of a model: stop there and let the
         * lexer report its line:column (reading /dev/zero to the end
         * would never end) */
        int nul = memchr(buf + n, 0, got) != NULL;
        n += got;
        if (n < cap || nul)
            break;
        char *q = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
        if (!q)
            free(buf);
        buf = q;
        cap *= 2;
    }
    int bad = ferror(f);
    int e = errno;
    fclose(f);
    if (bad) {
        free(buf);
        kiln_seterr(err, KILN_ERR_IO, "cannot read '%s': %s", path,
                    strerror(e));
        return NULL;
    }
    /* data paths are relative to the file's directory */
    char *dir = NULL;
    const char *slash = strrchr(path, '/');
    if (slash) {
        size_t dl = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(dl + 1);
        if (!dir) {
            free(buf);
            kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", path);
            return NULL;
        }
        memcpy(dir, path, dl);
        dir[dl] = '\0';
    }
    kiln_graph *g = parse_text(buf, n, path, dir, data, err);
    free(dir);
    free(buf);
    return g;
}
