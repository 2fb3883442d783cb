/*
 * composite_nn.c — the layer composites of issue 29 (softmax, log_softmax,
 * layer_norm, rms_norm, gelu, silu, rsqrt, var, arange, argmax, argmin,
 * repeat, tile, einsum) and the divert of tril/triu with `k=` or an f32
 * input to an elementwise mask.  Each expands into primitives through
 * the builder composite.c hands over (kiln_nn_call.op, its kiln_graph_op:
 * a pointer, so that this file does not use composite.c back,
 * tools/layercheck.py); composite.c holds the table and checks arity,
 * argument dtypes and attribute keys.  Every literal is weak, so an f32
 * input computes in f32 (NEP 50).  Formulas, gradients and references:
 * docs/ops.md, "Layers (issue 29)".
 */
#include "composite.h"

#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef const kiln_nn_call nn;

/* ---- builders that stop at the first error (-1 in, -1 out) ---------- */

static kiln_value opa(nn *c, const char *op, int n, const kiln_value *in,
                      const kiln_attr *at, int n_at)
{
    for (int i = 0; i < n; i++)
        if (in[i] < 0)
            return -1;
    return c->op(c->g, op, n, in, at, n_at, c->err);
}

static kiln_value u(nn *c, const char *op, kiln_value x)
{
    return opa(c, op, 1, &x, NULL, 0);
}

static kiln_value b2(nn *c, const char *op, kiln_value x, kiln_value y)
{
    kiln_value in[2] = {x, y};
    return opa(c, op, 2, in, NULL, 0);
}

static kiln_value lit(nn *c, double v, kiln_literal_kind k)
{
    return kiln_graph_literal(c->g, v, k, c->err);
}

#define F(v) lit(c, v, KILN_LIT_FLOAT)
#define I(v) lit(c, (double)(v), KILN_LIT_INT)

/* op(x, axis=AX, keepdims=KD) with AX one int (n_ax 1) or a list */
static kiln_value reduce(nn *c, const char *op, kiln_value x, int n_ax,
                         const int64_t *ax, int kd)
{
    kiln_attr at[2] = {{.key = "keepdims", .kind = KILN_ATTR_BOOL, .i = kd},
                       {.key = "axis", .kind = KILN_ATTR_INTS, .n = n_ax,
                        .ints = ax}};
    return opa(c, op, 1, &x, at, n_ax < 0 ? 1 : 2);
}

static kiln_value with_ints(nn *c, const char *op, kiln_value x,
                            const char *key, int n, const int64_t *v)
{
    kiln_attr at = {.key = key, .kind = KILN_ATTR_INTS, .n = n, .ints = v};
    return opa(c, op, 1, &x, &at, 1);
}

static kiln_value cast(nn *c, kiln_value x, kiln_dtype d)
{
    kiln_attr at = {.key = "dtype", .kind = KILN_ATTR_DTYPE, .i = d};
    return opa(c, "cast", 1, &x, &at, 1);
}

static kiln_value where(nn *c, kiln_value k, kiln_value a, kiln_value b)
{
    kiln_value in[3] = {k, a, b};
    return opa(c, "where", 3, in, NULL, 0);
}

/* x's type: a pointer into g->nodes, which every node pushed may move
 * (realloc) -- read it at once or copy it, never hold it across a push */
static const kiln_type *ty(nn *c, kiln_value x)
{
    return &c->g->nodes[x].type;
}

#define FAIL(code, ...) return (kiln_seterr(c->err, code, __VA_ARGS__), -1)

/* ---- attributes ------------------------------------------------------ */

static const kiln_attr *attr(nn *c, const char *key)
{
    for (int i = 0; i < c->n_attrs; i++)
        if (strcmp(c->attrs[i].key, key) == 0)
            return &c->attrs[i];
    return NULL;
}

/* An integer attribute (default dflt). */
static int get_int(nn *c, const char *key, int64_t dflt, int64_t *v)
{
    const kiln_attr *a = attr(c, key);
    *v = dflt;
    if (!a)
        return 0;
    if (a->kind != KILN_ATTR_INT)
        FAIL(KILN_ERR_TYPE, "attribute '%s' must be an integer",
             key);
    *v = a->i;
    return 0;
}

/* Axis attribute `axis` of a rank-r tensor, normalised into [0, r). */
static int get_axis(nn *c, int64_t dflt, int r, int64_t *ax)
{
    int64_t v;
    if (get_int(c, "axis", dflt, &v))
        return -1;
    if (v < -r || v >= r)
        FAIL(KILN_ERR_SHAPE, "axis %lld is out of range for a "
             "tensor of rank %d", (long long)v, r);
    *ax = v < 0 ? v + r : v;
    return 0;
}

/* `axis` as an int or a list (absent: every axis), each normalised;
 * *n = -1 when absent. */
static int get_axes(nn *c, int r, int *n, int64_t ax[KILN_MAX_RANK])
{
    const kiln_attr *a = attr(c, "axis");
    *n = -1;
    if (!a)
        return 0;
    if (a->kind != KILN_ATTR_INT && a->kind != KILN_ATTR_INTS)
        FAIL(KILN_ERR_TYPE, "attribute 'axis' must be an integer or "
             "a list of integers");
    int m = a->kind == KILN_ATTR_INT ? 1 : a->n;
    if (m > r)
        FAIL(KILN_ERR_SHAPE, "axis has %d entries for a tensor of "
             "rank %d", m, r);
    for (int i = 0; i < m; i++) {
        int64_t v = a->kind == KILN_ATTR_INT ? a->i : a->ints[i];
        if (v < -r || v >= r) {
            kiln_seterr(c->err, KILN_ERR_SHAPE, "axis %lld is out of range "
                        "for a tensor of rank %d", (long long)v, r);
            return -1;
        }
        ax[i] = v < 0 ? v + r : v;
        for (int j = 0; j < i; j++)
            if (ax[j] == ax[i])
                FAIL(KILN_ERR_SHAPE, "axis %lld is repeated",
                     (long long)v);
    }
    *n = m;
    return 0;
}

/* A finite, non-negative number attribute (eps). */
static int get_eps(nn *c, double dflt, double *v)
{
    const kiln_attr *a = attr(c, "eps");
    *v = dflt;
    if (!a)
        return 0;
    if (a->kind == KILN_ATTR_FLOAT)
        *v = a->f;
    else if (a->kind == KILN_ATTR_INT)
        *v = (double)a->i;
    else
        FAIL(KILN_ERR_TYPE, "attribute 'eps' must be a number");
    if (!isfinite(*v) || *v < 0) {
        kiln_seterr(c->err, KILN_ERR_TYPE, "attribute 'eps' must be a finite "
                    "number >= 0, got %g", *v);
        return -1;
    }
    return 0;
}

static int get_str(nn *c, const char *key, const char *dflt, const char **s)
{
    const kiln_attr *a = attr(c, key);
    *s = dflt;
    if (!a)
        return 0;
    if (a->kind != KILN_ATTR_STRING)
        FAIL(KILN_ERR_TYPE, "attribute '%s' must be a string",
             key);
    *s = a->s;
    return 0;
}

static int need_float(nn *c, kiln_value x, const char *what)
{
    kiln_dtype d = ty(c, x)->dtype;
    if (d == KILN_F64 || d == KILN_F32)
        return 0;
    kiln_seterr(c->err, KILN_ERR_TYPE, "%s has dtype %s; expected a float "
                "(f64 or f32)", what, kiln_dtype_name(d));
    return -1;
}

/* ---- index helpers --------------------------------------------------- */

/* i64 0, 1, ..., n-1 along axis `ax` of x's shape, size 1 on every other
 * axis (x sliced to 0:1 there): works for any dim, static or symbolic,
 * since it never names a size. */
static kiln_value iota_like(nn *c, kiln_value x, int ax)
{
    int r = ty(c, x)->rank;
    kiln_index ix[KILN_MAX_RANK];
    for (int i = 0; i < r; i++) {
        ix[i] = (kiln_index){.kind = KILN_INDEX_SLICE};
        if (i != ax)
            ix[i].start = 0, ix[i].has_start = 1, ix[i].stop = 1,
            ix[i].has_stop = 1;
    }
    kiln_value s = kiln_graph_subtensor(c->g, x, r, ix, c->err);
    kiln_value one = cast(c, b2(c, "fill", s, I(1)), KILN_I64);
    kiln_attr at = {.key = "axis", .kind = KILN_ATTR_INT, .i = ax};
    return b2(c, "sub", opa(c, "cumsum", 1, &one, &at, 1), I(1));
}

/* ---- normalisation and activations ------------------------------------ */

static kiln_value softmax_(nn *c, int log_form)
{
    kiln_value x = c->in[0];
    int64_t ax;
    if (need_float(c, x, "x") || get_axis(c, -1, ty(c, x)->rank, &ax))
        return -1;
    kiln_value d = b2(c, "sub", x, reduce(c, "max", x, 1, &ax, 1));
    kiln_value s = reduce(c, "sum", u(c, "exp", d), 1, &ax, 1);
    return log_form ? b2(c, "sub", d, u(c, "log", s))
                    : b2(c, "true_div", u(c, "exp", d), s);
}

kiln_value kiln_nn_softmax(nn *c) { return softmax_(c, 0); }
kiln_value kiln_nn_log_softmax(nn *c) { return softmax_(c, 1); }

static kiln_value rsqrt(nn *c, kiln_value x)
{
    return b2(c, "true_div", F(1), u(c, "sqrt", x));
}

kiln_value kiln_nn_rsqrt(nn *c) { return rsqrt(c, c->in[0]); }

kiln_value kiln_nn_silu(nn *c)
{
    return b2(c, "mul", c->in[0], u(c, "sigmoid", c->in[0]));
}

kiln_value kiln_nn_gelu(nn *c)
{
    kiln_value x = c->in[0];
    const char *ap;
    if (get_str(c, "approximate", "none", &ap))
        return -1;
    /* x * (0.5 (1 + ...)): the factor is in [0, 1], so a large finite x
     * stays finite (0.5 x (1 + ...) overflows near the f32 max) */
    if (strcmp(ap, "none") == 0) /* x/2 (1 + erf(x / sqrt 2)) */
        return b2(c, "mul", x, b2(c, "mul", F(0.5),
                  b2(c, "add", F(1),
                     u(c, "erf", b2(c, "mul", x, F(0.70710678118654752))))));
    if (strcmp(ap, "tanh") == 0) {
        /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        kiln_value x3 = b2(c, "mul", x, u(c, "square", x));
        kiln_value t = b2(c, "mul", F(0.79788456080286536),
                          b2(c, "add", x, b2(c, "mul", F(0.044715), x3)));
        return b2(c, "mul", x, b2(c, "mul", F(0.5),
                                  b2(c, "add", F(1), u(c, "tanh", t))));
    }
    kiln_seterr(c->err, KILN_ERR_TYPE, "approximate must be \"none\" or "
                "\"tanh\", got \"%.60s\"", ap);
    return -1;
}

/* The normalised axes (default the last) and eps of rms_norm and
 * layer_norm: x (float, rank >= 1) over ax[0..n) */
static int norm_args(nn *c, double dflt_eps, int *n, int64_t *ax,
                     double *eps)
{
    kiln_value x = c->in[0];
    if (need_float(c, x, "x") || get_eps(c, dflt_eps, eps))
        return -1;
    if (ty(c, x)->rank == 0)
        FAIL(KILN_ERR_SHAPE, "x must have rank >= 1");
    if (!attr(c, "axis")) {
        *n = 1;
        ax[0] = ty(c, x)->rank - 1;
        return 0;
    }
    return get_axes(c, ty(c, x)->rank, n, ax);
}

/* x * rsqrt(mean(x^2) + eps) * w */
kiln_value kiln_nn_rms_norm(nn *c)
{
    kiln_value x = c->in[0];
    int n;
    int64_t ax[KILN_MAX_RANK];
    double eps;
    if (norm_args(c, 1e-6, &n, ax, &eps))
        return -1;
    kiln_value ms = reduce(c, "mean", u(c, "square", x), n, ax, 1);
    kiln_value y = b2(c, "mul", x, rsqrt(c, b2(c, "add", ms, F(eps))));
    return b2(c, "mul", y, c->in[1]);
}

/* (x - mean) * rsqrt(biased var + eps) * w + b */
kiln_value kiln_nn_layer_norm(nn *c)
{
    kiln_value x = c->in[0];
    int n;
    int64_t ax[KILN_MAX_RANK];
    double eps;
    if (norm_args(c, 1e-5, &n, ax, &eps))
        return -1;
    kiln_value d = b2(c, "sub", x, reduce(c, "mean", x, n, ax, 1));
    kiln_value v = reduce(c, "mean", u(c, "square", d), n, ax, 1);
    kiln_value y = b2(c, "mul", d, rsqrt(c, b2(c, "add", v, F(eps))));
    return b2(c, "add", b2(c, "mul", y, c->in[1]), c->in[2]);
}

/* var(x, axis, ddof, keepdims) = sum((x - mean)^2) / (N - ddof) */
kiln_value kiln_nn_var(nn *c)
{
    kiln_value x = c->in[0];
    const int rank = ty(c, x)->rank;   /* a copy: pushes move g->nodes */
    int n, kd = 0;
    int64_t ax[KILN_MAX_RANK], ddof;
    const kiln_attr *k = attr(c, "keepdims");
    if (k && k->kind != KILN_ATTR_BOOL)
        FAIL(KILN_ERR_TYPE, "attribute 'keepdims' must be true or "
             "false");
    kd = k ? (int)k->i : 0;
    if (get_axes(c, rank, &n, ax) || get_int(c, "ddof", 0, &ddof))
        return -1;
    if (ddof < 0)
        FAIL(KILN_ERR_TYPE, "attribute 'ddof' must be >= 0, got %lld",
             (long long)ddof);
    if (n < 0) {
        n = rank;
        for (int i = 0; i < n; i++)
            ax[i] = i;
    }
    kiln_value d = b2(c, "sub", x, reduce(c, "mean", x, n, ax, 1));
    kiln_value d2 = u(c, "square", d);
    if (ddof == 0)
        return reduce(c, "mean", d2, n, ax, kd);
    /* N = the count of the reduced elements (symbolic dims counted) */
    kiln_value cnt = reduce(c, "sum", b2(c, "fill", d2, F(1)), n, ax, kd);
    /* NumPy divides by max(N - ddof, 0): ddof >= N gives inf (or nan) */
    return b2(c, "true_div", reduce(c, "sum", d2, n, ax, kd),
              b2(c, "maximum", b2(c, "sub", cnt, F((double)ddof)), F(0)));
}

/* ---- indices ------------------------------------------------------------ */

/* A rank-0 integer literal's value, or -1 with an error. */
static int64_t literal_count(nn *c, kiln_value v, const char *what)
{
    const kiln_node *nd = &c->g->nodes[v];
    if (nd->op != KILN_OP_LITERAL || nd->lit_kind != KILN_LIT_INT ||
        nd->value < 0)
        FAIL(KILN_ERR_TYPE, "%s must be a non-negative integer "
             "literal (a symbolic length is written shape=[N])", what);
    return (int64_t)nd->value;
}

/* arange(n), arange(start, n), arange(shape=[N]), arange(start,
 * shape=[N]): i64 [n], start + 0, 1, ..., n-1 */
kiln_value kiln_nn_arange(nn *c)
{
    const kiln_attr *sh = attr(c, "shape");
    int64_t len;
    kiln_value start = -1;
    if (sh) {
        if (sh->kind != KILN_ATTR_INTS || sh->n != 1)
            FAIL(KILN_ERR_TYPE, "attribute 'shape' must be a list of "
                 "one dim");
        if (c->n_in > 1)
            FAIL(KILN_ERR_TYPE, "takes (n), (start, n), "
                 "(shape=[N]) or (start, shape=[N])");
        len = sh->ints[0];
        start = c->n_in == 1 ? c->in[0] : -1;
    } else {
        if (c->n_in < 1)
            FAIL(KILN_ERR_TYPE, "takes (n), (start, n), "
                 "(shape=[N]) or (start, shape=[N])");
        len = literal_count(c, c->in[c->n_in - 1], "n");
        if (len < 0)
            return -1;
        start = c->n_in == 2 ? c->in[0] : -1;
    }
    if (start >= 0) {
        const kiln_type t = *ty(c, start);
        if (t.rank != 0 || (t.dtype != KILN_I64 && t.dtype != KILN_I32))
            FAIL(KILN_ERR_TYPE, "start must be a rank-0 integer "
                 "(i64 or i32)");
    }
    kiln_attr at[2] = {{.key = "shape", .kind = KILN_ATTR_INTS, .n = 1,
                        .ints = &len},
                       {.key = "dtype", .kind = KILN_ATTR_DTYPE, .i = KILN_I64}};
    kiln_value ones = c->op(c->g, "ones", 0, NULL, at, 2, c->err);
    kiln_attr a0 = {.key = "axis", .kind = KILN_ATTR_INT, .i = 0};
    kiln_value r = b2(c, "sub", opa(c, "cumsum", 1, &ones, &a0, 1), I(1));
    return start >= 0 ? b2(c, "add", r, cast(c, start, KILN_I64)) : r;
}

/* first index of the max (min) along axis; NaN counts as the extreme, its
 * first index wins (NumPy) */
static kiln_value arg_ext(nn *c, const char *ext)
{
    kiln_value x = c->in[0];
    int64_t ax;
    if (get_axis(c, -1, ty(c, x)->rank, &ax))
        return -1;
    int64_t len = ty(c, x)->dims[ax];
    if (len == 0)   /* NumPy raises; a symbolic length: the check below */
        FAIL(KILN_ERR_SHAPE, "attempt to get arg%s of an empty sequence "
             "(axis %lld has size 0)", ext, (long long)ax);
    kiln_value m = reduce(c, ext, x, 1, &ax, 1);
    kiln_value hit = b2(c, "eq", x, m);
    kiln_dtype d = ty(c, x)->dtype;
    if (d == KILN_F64 || d == KILN_F32)
        hit = b2(c, "or", hit, u(c, "isnan", x));
    kiln_value idx = iota_like(c, x, (int)ax);
    /* a position that is not a hit gets n (one past the last index) */
    kiln_value big = reduce(c, "max", idx, 1, &ax, 1);
    kiln_value cand = where(c, hit, idx, b2(c, "add", big, I(1)));
    kiln_value res = reduce(c, "min", cand, 1, &ax, 0);
    if (len >= 0)
        return res;
    /* a symbolic axis: empty at run time fails the call (NumPy raises,
     * whatever the other axes).  With every other dim static and > 0, big
     * (the last index, shape x's with the axis 1) has elements, all >= 0
     * exactly when the axis is not empty.  Else big may itself be empty
     * (another axis 0) and its check vacuous: the test is on a vector of
     * the axis's length, hit reduced over the other axes (its values
     * made true), any() of it true exactly when the axis is not empty. */
    const kiln_type t = *ty(c, x);
    int64_t oth[KILN_MAX_RANK];
    int n_oth = 0, all_full = 1;
    for (int i = 0; i < t.rank; i++)
        if (i != ax) {
            oth[n_oth++] = i;
            all_full = all_full && t.dims[i] > 0;
        }
    kiln_value ok;
    if (all_full) {
        ok = b2(c, "ge", big, I(0));
    } else {
        kiln_value v = reduce(c, "any", hit, n_oth, oth, 0);
        ok = reduce(c, "any", b2(c, "or", v, u(c, "not", v)), -1, NULL, 0);
    }
    char msg[64];
    snprintf(msg, sizeof msg, "attempt to get arg%s of an empty sequence",
             ext);
    kiln_attr at = {.key = "msg", .kind = KILN_ATTR_STRING, .s = msg};
    kiln_value in[2] = {res, ok};
    return opa(c, "check", 2, in, &at, 1);
}

kiln_value kiln_nn_argmax(nn *c) { return arg_ext(c, "max"); }
kiln_value kiln_nn_argmin(nn *c) { return arg_ext(c, "min"); }

/* ---- tril/triu(x, k): an elementwise mask ------------------------------ */

int kiln_composite_divert(const kiln_nn_call *c, int op, kiln_value *out)
{
    kiln_graph *g = c->g;
    kiln_err *err = c->err;
    const kiln_value *in = c->in;
    const kiln_attr *attrs = c->attrs;
    int n_in = c->n_in, n_attrs = c->n_attrs;
    if ((op != KILN_OP_TRIL && op != KILN_OP_TRIU) || n_in != 1 || !in ||
        in[0] < 0 || in[0] >= g->n_nodes || (n_attrs > 0 && !attrs))
        return 0;
    const char *name = op == KILN_OP_TRIL ? "tril" : "triu";
    int64_t k = 0;
    for (int i = 0; i < n_attrs; i++)
        if (strcmp(attrs[i].key, "k") != 0) {
            *out = -1;
            kiln_seterr(err, KILN_ERR_TYPE, "%s: unknown attribute '%.60s' "
                        "(takes k)", name, attrs[i].key);
            return 1;
        }
    if (get_int(c, "k", 0, &k)) {
        *out = -1;
        kiln_err_prefix(err, "%s: ", name);
        return 1;
    }
    kiln_value x = in[0];
    /* a copy: the pushes below may move g->nodes */
    const kiln_type t = *ty(c, x);
    if (k == 0 && t.dtype != KILN_F32) {   /* LINALG tril/triu (f64) */
        *out = kiln_ir_graph_op(g, op, name, n_in, in, NULL, 0, err);
        return 1;
    }
    int r = t.rank, mark = g->n_nodes;
    if (r < 2) {
        *out = -1;
        kiln_seterr(err, KILN_ERR_SHAPE, "%s: a must have rank >= 2, got "
                    "rank %d", name, r);
        return 1;
    }
    /* tril keeps j <= i + k, triu j >= i + k */
    kiln_value i = iota_like(c, x, r - 2), j = iota_like(c, x, r - 1);
    kiln_value ik = b2(c, "add", i, I(k));
    kiln_value keep = b2(c, op == KILN_OP_TRIL ? "le" : "ge", j, ik);
    int isf = t.dtype == KILN_F64 || t.dtype == KILN_F32;
    *out = where(c, keep, x, isf ? F(0) : I(0));
    if (*out < 0) {
        kiln_err_prefix(err, "%s: ", name);
        kiln_ir_truncate(g, mark);
    }
    return 1;
}

/* ---- repeat and tile ---------------------------------------------------- */

/* d is a named symbol (sized from the inputs at run time) */
static int named(nn *c, int64_t d)
{
    return KILN_DIM_IS_SYM(d) && KILN_SYM_INDEX(d) < c->g->n_symbols &&
           c->g->symbols[KILN_SYM_INDEX(d)];
}

/* The result's element count is the product of the static factors f[0..n)
 * (negative entries, symbolic dims, skipped): -1 with an error naming the
 * product when it does not fit in int64 (never wrapped). */
static int fits(nn *c, int n, const int64_t *f)
{
    int64_t p = 1;
    int over = 0;
    for (int i = 0; i < n; i++) {
        if (f[i] == 0)
            return 0;
        if (f[i] > 0 && __builtin_mul_overflow(p, f[i], &p))
            over = 1;
    }
    if (!over)
        return 0;
    char s[512];
    int len = 0;
    s[0] = '\0';
    for (int i = 0; i < n && len < (int)sizeof s; i++)
        if (f[i] > 0)
            len += snprintf(s + len, sizeof s - (size_t)len, "%s%lld",
                            len ? " x " : "", (long long)f[i]);
    FAIL(KILN_ERR_SHAPE, "the result would have %s elements (more than "
         "2^63 - 1)", s);
}

/* reshape x to `shape` where entry `merged` (if >= 0) may be a product of
 * a symbol and a count: written -1 */
static kiln_value reshape(nn *c, kiln_value x, int n, const int64_t *shape)
{
    return with_ints(c, "reshape", x, "shape", n, shape);
}

/* numpy.repeat(x, r, axis): each element r times along axis (no axis:
 * flattened first) */
kiln_value kiln_nn_repeat(nn *c)
{
    kiln_value x = c->in[0];
    int64_t r, ax;
    const kiln_attr *ra = attr(c, "repeats");
    if (!ra)
        FAIL(KILN_ERR_TYPE, "attribute 'repeats' is required");
    if (get_int(c, "repeats", 1, &r))
        return -1;
    if (r < 0)
        FAIL(KILN_ERR_TYPE, "attribute 'repeats' must be >= 0, got "
             "%lld", (long long)r);
    if (!attr(c, "axis")) {
        int64_t flat = -1;
        x = reshape(c, x, 1, &flat);
        ax = 0;
    } else if (get_axis(c, 0, ty(c, x)->rank, &ax)) {
        return -1;
    }
    if (x < 0)
        return -1;
    const kiln_type t = *ty(c, x);
    int64_t bshape[KILN_MAX_RANK], oshape[KILN_MAX_RANK];
    if (t.rank + 1 > KILN_MAX_RANK)
        FAIL(KILN_ERR_SHAPE, "x of rank %d has no room for the "
             "repeated axis", t.rank);
    int nsym = 0;
    for (int i = 0; i <= t.rank; i++)
        bshape[i] = i == ax + 1 ? r : t.dims[i < ax + 1 ? i : i - 1];
    for (int i = 0; i < t.rank; i++)
        oshape[i] = t.dims[i];
    int64_t da = t.dims[ax], f[KILN_MAX_RANK + 1];
    for (int i = 0; i < t.rank; i++)
        f[i] = t.dims[i];
    f[t.rank] = r;
    if (fits(c, t.rank + 1, f))
        return -1;
    oshape[ax] = da >= 0 ? da * r : -1;
    for (int i = 0; i < t.rank; i++)
        nsym += oshape[i] < 0 && !named(c, oshape[i]);
    if (nsym > 1)
        FAIL(KILN_ERR_SHAPE, "x has several unnamed symbolic dims; "
             "cannot name the result's shape");
    kiln_value e = with_ints(c, "expand_dims", x, "axis", 1, &(int64_t){ax + 1});
    e = with_ints(c, "broadcast_to", e, "shape", t.rank + 1, bshape);
    return reshape(c, e, t.rank, oshape);
}

/* numpy.tile(x, reps) */
kiln_value kiln_nn_tile(nn *c)
{
    kiln_value x = c->in[0];
    const kiln_attr *ra = attr(c, "reps");
    if (!ra || ra->kind != KILN_ATTR_INTS)
        FAIL(KILN_ERR_TYPE, "attribute 'reps' (a list of integers) "
             "is required");
    int r0 = ty(c, x)->rank, n = ra->n > r0 ? ra->n : r0;
    if (2 * n > KILN_MAX_RANK)
        FAIL(KILN_ERR_SHAPE, "result rank %d needs %d "
             "axes while expanding (more than %d)", n, 2 * n, KILN_MAX_RANK);
    int64_t reps[KILN_MAX_RANK];
    for (int i = 0; i < n; i++) {   /* right-aligned, missing = 1 */
        int j = i - (n - ra->n);
        reps[i] = j >= 0 ? ra->ints[j] : 1;
        if (reps[i] < 0)
            FAIL(KILN_ERR_TYPE, "reps entry %d is %lld; "
                 "expected an integer >= 0", j, (long long)reps[i]);
    }
    if (n > r0) {   /* x gets leading size-1 axes */
        int64_t ax[KILN_MAX_RANK];
        for (int i = 0; i < n - r0; i++)
            ax[i] = i;
        x = with_ints(c, "expand_dims", x, "axis", n - r0, ax);
        if (x < 0)
            return -1;
    }
    const kiln_type t = *ty(c, x);
    int64_t ax[KILN_MAX_RANK], bshape[KILN_MAX_RANK], oshape[KILN_MAX_RANK];
    int nanon = 0;
    int64_t f[2 * KILN_MAX_RANK];
    for (int i = 0; i < n; i++)
        f[2 * i] = t.dims[i], f[2 * i + 1] = reps[i];
    if (fits(c, 2 * n, f))
        return -1;
    for (int i = 0; i < n; i++) {
        ax[i] = 2 * i;
        bshape[2 * i] = reps[i];
        bshape[2 * i + 1] = t.dims[i];
        int64_t d = t.dims[i];
        if (d >= 0)
            oshape[i] = d * reps[i];
        else if (reps[i] == 1 && named(c, d))
            oshape[i] = d;
        else
            oshape[i] = -1, nanon++;
    }
    if (nanon > 1)
        FAIL(KILN_ERR_SHAPE, "more than one symbolic dim is "
             "tiled or unnamed; cannot name the result's shape");
    kiln_value e = with_ints(c, "expand_dims", x, "axis", n, ax);
    e = with_ints(c, "broadcast_to", e, "shape", 2 * n, bshape);
    return reshape(c, e, n, oshape);
}

/* ---- einsum(a, b, spec): two operands, letters only ------------------- */

/* One letter's role: in a, in b, in the output, its dim. */
typedef struct letter {
    int in_a, in_b, in_out;
    int64_t dim;
} letter;

/* The product of the dims of `n` letters into a reshape target: a static
 * product, a named symbol alone, or -1 (one per target, inferred). */
static int64_t group_dim(nn *c, const letter *L, const char *ls, int n,
                         int *n_infer)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        int64_t d = L[(unsigned char)ls[i]].dim;
        if (d < 0) {
            if (n == 1 && named(c, d))
                return d;
            (*n_infer)++;
            return -1;
        }
        p *= d;
    }
    return p;
}

static int spec_err(nn *c, const char *spec, int pos, const char *what)
{
    kiln_seterr(c->err, KILN_ERR_TYPE, "spec \"%.80s\" position %d: %s",
                spec, pos + 1, what);
    return -1;
}

/* Parse "ab,bc->ac" (or "ab,bc": the output is the letters that appear
 * once, sorted): sub[0], sub[1], sub[2] the operands' and the output's
 * letters. */
static int parse_spec(nn *c, const char *spec, char sub[3][KILN_MAX_RANK + 1])
{
    int part = 0, n = 0, has_arrow = 0;
    int cnt[256] = {0};
    for (int i = 0; spec[i]; i++) {
        unsigned char ch = (unsigned char)spec[i];
        if (ch == ' ')
            continue;
        if (ch == ',') {
            if (part != 0 || has_arrow)
                return spec_err(c, spec, i, "einsum takes two operands: "
                                "one ',' before '->'");
            sub[part][n] = '\0';
            part = 1, n = 0;
            continue;
        }
        if (ch == '-' && spec[i + 1] == '>') {
            if (part != 1)
                return spec_err(c, spec, i, "expected ',' and the second "
                                "operand before '->'");
            sub[part][n] = '\0';
            part = 2, n = 0, has_arrow = 1;
            i++;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')))
            return spec_err(c, spec, i, ch == '.' ? "'...' is not supported "
                            "(letters only)" : "expected a letter, ',' or "
                            "'->'");
        if (n == KILN_MAX_RANK)
            return spec_err(c, spec, i, "more than 8 letters in one term");
        for (int k = 0; k < n; k++)
            if ((unsigned char)sub[part][k] == ch)
                return spec_err(c, spec, i, part == 2
                                ? "letter repeated in the output"
                                : "letter repeated in one operand "
                                  "(diagonals are not supported)");
        if (part < 2)
            cnt[ch]++;
        sub[part][n++] = (char)ch;
    }
    if (part == 0)
        return spec_err(c, spec, (int)strlen(spec), "einsum takes two "
                        "operands: expected ','");
    sub[part][n] = '\0';
    if (!has_arrow) {
        n = 0;
        for (int ch = 'A'; ch <= 'z'; ch++)
            if (cnt[ch] == 1)
                sub[2][n++] = (char)ch;
        sub[2][n] = '\0';
    }
    return 0;
}

kiln_value kiln_nn_einsum(nn *c)
{
    const char *spec;
    char sub[3][KILN_MAX_RANK + 1];
    if (get_str(c, "spec", NULL, &spec))
        return -1;
    if (!spec)
        FAIL(KILN_ERR_TYPE, "attribute 'spec' (\"ab,bc->ac\") is required");
    if (parse_spec(c, spec, sub))
        return -1;
    letter L[256];
    memset(L, 0, sizeof L);
    kiln_value op[2] = {c->in[0], c->in[1]};
    for (int k = 0; k < 2; k++) {
        const kiln_type t = *ty(c, op[k]);
        int n = (int)strlen(sub[k]);
        if (n != t.rank) {
            char s1[256];
            FAIL(KILN_ERR_SHAPE, "spec \"%.80s\": operand %d (%s) has %d "
                 "letters but shape %s", spec, k + 1, k ? "b" : "a", n,
                 kiln_ir_shape_str(c->g, t.rank, t.dims, s1, sizeof s1));
        }
        for (int i = 0; i < n; i++) {
            letter *l = &L[(unsigned char)sub[k][i]];
            int64_t d = t.dims[i];
            if ((l->in_a || l->in_b) && l->dim != d && l->dim >= 0 && d >= 0)
                FAIL(KILN_ERR_SHAPE, "spec \"%.80s\": letter '%c' is %lld in "
                     "a but %lld in b", spec, sub[k][i], (long long)l->dim,
                     (long long)d);
            if (!(l->in_a || l->in_b) || l->dim < 0)
                l->dim = d;
            *(k ? &l->in_b : &l->in_a) = 1;
        }
    }
    const char *so = sub[2];
    for (int i = 0; so[i]; i++) {
        letter *l = &L[(unsigned char)so[i]];
        if (!l->in_a && !l->in_b) {
            const char *arrow = strstr(spec, "->");
            return spec_err(c, spec, (int)(arrow - spec) + 2 + i,
                            "output letter is in neither operand");
        }
        l->in_out = 1;
    }
    /* groups: batch (a, b, out), a's kept (a, out), b's kept (b, out),
     * contracted (a, b); a letter in one operand only and not in the
     * output is summed first */
    char bat[9] = "", ak[9] = "", bk[9] = "", con[9] = "";
    int nb = 0, na = 0, nbk = 0, nc = 0;
    for (int k = 0; k < 2; k++) {
        int64_t sax[KILN_MAX_RANK];
        int ns = 0;
        for (int i = 0; sub[k][i]; i++) {
            letter *l = &L[(unsigned char)sub[k][i]];
            int other = k ? l->in_a : l->in_b;
            if (!other && !l->in_out)
                sax[ns++] = i;
        }
        if (ns) {   /* sum the letters only this operand has */
            op[k] = reduce(c, "sum", op[k], ns, sax, 0);
            int w = 0;
            for (int i = 0; sub[k][i]; i++) {
                letter *l = &L[(unsigned char)sub[k][i]];
                int other = k ? l->in_a : l->in_b;
                if (other || l->in_out)
                    sub[k][w++] = sub[k][i];
            }
            sub[k][w] = '\0';
        }
    }
    if (op[0] < 0 || op[1] < 0)
        return -1;
    for (int i = 0; so[i]; i++) {
        letter *l = &L[(unsigned char)so[i]];
        if (l->in_a && l->in_b)
            bat[nb++] = so[i];
        else if (l->in_a)
            ak[na++] = so[i];
        else
            bk[nbk++] = so[i];
    }
    for (int i = 0; sub[0][i]; i++) {
        letter *l = &L[(unsigned char)sub[0][i]];
        if (l->in_b && !l->in_out)
            con[nc++] = sub[0][i];
    }
    /* a -> [bat, ak, con] -> [bat..., M, K]; b -> [bat, con, bk] ->
     * [bat..., K, N]; matmul; [bat..., M, N] -> [bat, ak, bk] -> out */
    const char *order[2][3] = {{bat, ak, con}, {bat, con, bk}};
    kiln_value mm[2];
    for (int k = 0; k < 2; k++) {
        int64_t perm[KILN_MAX_RANK];
        int np = 0, ident = 1;
        for (int g = 0; g < 3; g++)
            for (int i = 0; order[k][g][i]; i++) {
                perm[np] = strchr(sub[k], order[k][g][i]) - sub[k];
                ident &= perm[np] == np;
                np++;
            }
        kiln_value x = op[k];
        if (!ident)
            x = with_ints(c, "transpose", x, "axes", np, perm);
        int64_t shape[KILN_MAX_RANK + 2];
        int ns = 0, n_inf = 0, same = 1;
        for (int i = 0; i < nb; i++)
            shape[ns++] = L[(unsigned char)bat[i]].dim;
        for (int g = 1; g < 3; g++) {
            int len = (int)strlen(order[k][g]);
            same &= len == 1;
            shape[ns++] = group_dim(c, L, order[k][g], len, &n_inf);
        }
        for (int i = 0; i < nb; i++)
            if (shape[i] < 0 && !named(c, shape[i]))
                shape[i] = -1, n_inf++;
        if (n_inf > 1)
            FAIL(KILN_ERR_SHAPE, "spec \"%.80s\": operand %d would need %d "
                 "inferred dims to become a matrix (group its unnamed "
                 "symbolic dims differently)", spec, k + 1, n_inf);
        if (!same)
            x = reshape(c, x, ns, shape);
        mm[k] = x;
    }
    kiln_value y = b2(c, "matmul", mm[0], mm[1]);
    if (y < 0)
        return -1;
    /* [bat..., M, N] -> [bat, ak, bk] */
    if (na != 1 || nbk != 1) {
        int64_t shape[KILN_MAX_RANK];
        int ns = 0, n_inf = 0;
        for (int i = 0; i < nb + na + nbk; i++)
            shape[ns++] = L[(unsigned char)(i < nb        ? bat[i]
                                            : i < nb + na ? ak[i - nb]
                                                          : bk[i - nb - na])]
                              .dim;
        for (int i = 0; i < ns; i++)
            if (shape[i] < 0 && !named(c, shape[i]))
                shape[i] = -1, n_inf++;
        if (n_inf > 1)
            FAIL(KILN_ERR_SHAPE, "spec \"%.80s\": the result has %d unnamed "
                 "symbolic dims to split", spec, n_inf);
        y = reshape(c, y, ns, shape);
    }
    char cur[KILN_MAX_RANK + 1];
    snprintf(cur, sizeof cur, "%s%s%s", bat, ak, bk);
    int64_t perm[KILN_MAX_RANK];
    int ident = 1, n = (int)strlen(so);
    for (int i = 0; i < n; i++) {
        perm[i] = strchr(cur, so[i]) - cur;
        ident &= perm[i] == i;
    }
    return ident ? y : with_ints(c, "transpose", y, "axes", n, perm);
}
