/*
 * dimexpr.c — derived dims: a symbol whose name is an integer expression
 * over other symbols (`K-1`, `a*S+b`, `K*(K-1)/2`), so that a shape can
 * say how its size follows from another (a simplex of K values has K-1
 * unconstrained ones; docs/kg.md, "Derived dims").
 *
 * A derived symbol is an ordinary symbol of the graph (one size at run
 * time; shape inference treats `K-1` and `K` as two symbols) whose name
 * is the expression in canonical form: no spaces, as written otherwise.
 * Grammar: expr = term {('+'|'-') term}; term = factor {('*'|'/') factor};
 * factor = integer | name | '(' expr ')'.  `/` is integer division and
 * must be exact (K*(K-1)/2 is).  Where symbols are sized (a model's data,
 * a call's inputs) kiln_ir_symbols_derive gives each derived symbol its
 * value from its names' sizes, checks a size given both ways, and solves
 * an expression of one unknown name for it (every expression here is
 * nondecreasing in a size >= 1 for the forms above; a size that no value
 * of the name gives is an error naming both).
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dx {
    const char *s;
    size_t i, n;
    const kiln_graph *g;    /* NULL: syntax check only */
    const int64_t *vals;
    int solve_sym;          /* this symbol takes solve_val */
    int64_t solve_val;
    int unknown;            /* a name without a size; its index */
    int bad;                /* 1 syntax, 2 division not exact / by 0,
                               3 overflow, 4 a name that is no symbol */
    char *canon;
    size_t cn, ccap;
} dx;

static void dx_put(dx *d, char c)
{
    if (d->canon && d->cn + 1 < d->ccap)
        d->canon[d->cn] = c;
    d->cn++;
}

static void dx_ws(dx *d)
{
    while (d->i < d->n && (d->s[d->i] == ' ' || d->s[d->i] == '\t'))
        d->i++;
}

static int is_al(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_dg(int c)
{
    return c >= '0' && c <= '9';
}

static int64_t dx_expr(dx *d);

static int64_t dx_name(dx *d, size_t at, size_t len)
{
    if (!d->g)
        return 1;
    for (int s = 0; s < d->g->n_symbols; s++) {
        const char *nm = d->g->symbols[s];
        if (nm && strlen(nm) == len && memcmp(nm, d->s + at, len) == 0) {
            if (s == d->solve_sym)
                return d->solve_val;
            if (!d->vals || d->vals[s] < 0) {
                if (d->unknown < 0)
                    d->unknown = s;
                else if (d->unknown != s)
                    d->unknown = -2;    /* two unknown names */
                return 1;
            }
            return d->vals[s];
        }
    }
    d->bad = d->bad ? d->bad : 4;
    return 1;
}

static int64_t dx_factor(dx *d)
{
    dx_ws(d);
    if (d->i >= d->n) {
        d->bad = d->bad ? d->bad : 1;
        return 1;
    }
    char c = d->s[d->i];
    if (c == '(') {
        d->i++;
        dx_put(d, '(');
        int64_t v = dx_expr(d);
        dx_ws(d);
        if (d->i >= d->n || d->s[d->i] != ')') {
            d->bad = d->bad ? d->bad : 1;
            return 1;
        }
        d->i++;
        dx_put(d, ')');
        return v;
    }
    if (is_dg(c)) {
        int64_t v = 0;
        while (d->i < d->n && is_dg(d->s[d->i])) {
            if (__builtin_mul_overflow(v, 10, &v) ||
                __builtin_add_overflow(v, d->s[d->i] - '0', &v))
                d->bad = d->bad ? d->bad : 3;
            dx_put(d, d->s[d->i++]);
        }
        return v;
    }
    if (is_al(c)) {
        size_t at = d->i;
        while (d->i < d->n && (is_al(d->s[d->i]) || is_dg(d->s[d->i])))
            dx_put(d, d->s[d->i++]);
        return dx_name(d, at, d->i - at);
    }
    d->bad = d->bad ? d->bad : 1;
    return 1;
}

static int64_t dx_term(dx *d)
{
    int64_t v = dx_factor(d);
    for (;;) {
        dx_ws(d);
        if (d->i >= d->n || (d->s[d->i] != '*' && d->s[d->i] != '/'))
            return v;
        char op = d->s[d->i++];
        dx_put(d, op);
        int64_t w = dx_factor(d);
        if (op == '*') {
            if (__builtin_mul_overflow(v, w, &v))
                d->bad = d->bad ? d->bad : 3;
        } else if (w == -1) {
            if (__builtin_mul_overflow(v, -1, &v))
                d->bad = d->bad ? d->bad : 3;
        } else if (w == 0 || v % w != 0) {
            /* with an unknown name the value is a placeholder */
            if (d->unknown == -1)
                d->bad = d->bad ? d->bad : 2;
            v = w ? v / w : 0;
        } else {
            v /= w;
        }
    }
}

static int64_t dx_expr(dx *d)
{
    int64_t v = dx_term(d);
    for (;;) {
        dx_ws(d);
        if (d->i >= d->n || (d->s[d->i] != '+' && d->s[d->i] != '-'))
            return v;
        char op = d->s[d->i++];
        dx_put(d, op);
        int64_t w = dx_term(d);
        if (op == '+' ? __builtin_add_overflow(v, w, &v)
                      : __builtin_sub_overflow(v, w, &v))
            d->bad = d->bad ? d->bad : 3;
    }
}

int kiln_ir_dim_is_expr(const char *name)
{
    return name && strpbrk(name, "+-*/()") != NULL;
}

size_t kiln_ir_dimexpr_canon(const char *text, size_t n, char *canon,
                             size_t cap)
{
    dx d = {.s = text, .n = n, .solve_sym = -1, .unknown = -1,
            .canon = canon, .ccap = cap};
    dx_expr(&d);
    dx_ws(&d);
    if (d.bad == 1 || d.i != d.n)
        return 0;
    if (canon && cap)
        canon[d.cn < cap ? d.cn : cap - 1] = '\0';
    return d.cn;
}

int kiln_ir_dimexpr_names(const char *expr, int (*each)(const char *name,
                                                        size_t len,
                                                        void *arg),
                          void *arg)
{
    for (size_t i = 0; expr[i];) {
        if (is_al(expr[i])) {
            size_t at = i;
            while (is_al(expr[i]) || is_dg(expr[i]))
                i++;
            int rc = each(expr + at, i - at, arg);
            if (rc)
                return rc;
        } else if (is_dg(expr[i])) {
            while (is_dg(expr[i]))
                i++;
        } else {
            i++;
        }
    }
    return 0;
}

/* Evaluate derived symbol s's expression; *unknown gets -1 (all sized),
 * the index of the one unsized name, or -2 (several). */
static int64_t eval_sym(const kiln_graph *g, int s, const int64_t *vals,
                        int solve_sym, int64_t solve_val, int *unknown,
                        int *bad)
{
    const char *e = g->symbols[s];
    dx d = {.s = e, .n = strlen(e), .g = g, .vals = vals,
            .solve_sym = solve_sym, .solve_val = solve_val, .unknown = -1};
    int64_t v = dx_expr(&d);
    *unknown = d.unknown;
    *bad = d.bad;
    return v;
}

int kiln_ir_symbols_derive(const kiln_graph *g, int64_t *vals, int *which,
                           kiln_err *err)
{
    int any = 0;
    for (int s = 0; s < g->n_symbols; s++)
        any |= kiln_ir_dim_is_expr(g->symbols[s]);
    if (!any)
        return 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int s = 0; s < g->n_symbols; s++) {
            if (!kiln_ir_dim_is_expr(g->symbols[s]))
                continue;
            int unk, bad;
            int64_t v = eval_sym(g, s, vals, -1, 0, &unk, &bad);
            if (which)
                *which = s;
            if (unk == -1) {
                if (bad || v < 0)
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "dim '%s' is %s%lld%s",
                                       g->symbols[s],
                                       bad == 2 ? "not a whole number ("
                                       : bad == 3 ? "out of range (" : "",
                                       (long long)v,
                                       bad == 2 || bad == 3 ? ")"
                                       : ": a size is never negative");
                if (vals[s] < 0) {
                    vals[s] = v;
                    changed = 1;
                } else if (vals[s] != v) {
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "dim '%s' is %lld, but the sizes of "
                                       "its names make it %lld",
                                       g->symbols[s], (long long)vals[s],
                                       (long long)v);
                }
                continue;
            }
            if (unk < 0 || vals[s] < 0)
                continue;
            /* one unknown name: the least size >= 0 that gives vals[s]
             * (binary search; the expression is nondecreasing in it) */
            int64_t lo = 0, hi = (int64_t)1 << 31;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                int u2, b2;
                int64_t w = eval_sym(g, s, vals, unk, mid, &u2, &b2);
                if (b2 == 3 || w >= vals[s])
                    hi = mid;
                else
                    lo = mid + 1;
            }
            int u2, b2;
            int64_t w = eval_sym(g, s, vals, unk, lo, &u2, &b2);
            if (b2 || w != vals[s])
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "dim '%s' is %lld, which no size of '%s' "
                                   "gives", g->symbols[s],
                                   (long long)vals[s], g->symbols[unk]);
            vals[unk] = lo;
            changed = 1;
        }
    }
    return 0;
}
