/*
 * print.c — kiln_graph_print: a graph in canonical `.kg` text.
 *
 * Layout (docs/ir.md, "Canonical form"):
 *   kiln 1
 *   graph NAME
 *     declarations (input, shared, const) in node order
 *     one `NAME = ...` line per other node, in node order
 *     `partition N` when the graph declares an observation axis
 *     `output NAME [= VALUE]` lines in output order
 *   end
 * A literal that is unnamed and used exactly once is written inline in
 * its user's argument list; any other literal gets its own line.  Unnamed
 * nodes get the names t0, t1, ... in node order, skipping names the graph
 * already uses, so the text is deterministic and parses back to the same
 * graph (same ops, types, attributes and structure).
 */
#include "ir.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->s, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->s = q;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3)))
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        sb_putn(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_putn(b, big, (size_t)n);
    free(big);
}

/* ---- numbers -------------------------------------------------------- */

/* printf a double with %.{prec}g, with '.' whatever the locale. */
static void fmt_g(char *buf, size_t size, int prec, double v)
{
    snprintf(buf, size, "%.*g", prec, v);
    const char *dp = localeconv()->decimal_point;
    if (!dp || strcmp(dp, ".") == 0)
        return;
    size_t dl = strlen(dp);
    char *at = strstr(buf, dp);
    if (at) {
        *at = '.';
        memmove(at + 1, at + dl, strlen(at + dl) + 1);
    }
}

/* Parse back what fmt_g wrote (locale-independent). */
static double parse_g(const char *s)
{
    const char *dp = localeconv()->decimal_point;
    if (!dp || strcmp(dp, ".") == 0)
        return strtod(s, NULL);
    char buf[64];
    size_t k = 0, dl = strlen(dp);
    for (const char *p = s; *p && k + dl + 1 < sizeof buf; p++) {
        if (*p == '.') {
            memcpy(buf + k, dp, dl);
            k += dl;
        } else {
            buf[k++] = *p;
        }
    }
    buf[k] = '\0';
    return strtod(buf, NULL);
}

/* The shortest of %.15g .. %.17g that reads back as v. */
static void fmt_double(char *buf, size_t size, double v)
{
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        fmt_g(buf, size, prec, v);
        if (parse_g(buf) == v && (v != 0 || signbit(v) == signbit(parse_g(buf))))
            return;
    }
}

/* A float written so that it reads back as a float: "1.0", "1e+20". */
static void put_float(sbuf *b, double v)
{
    char buf[64];
    fmt_double(buf, sizeof buf - 2, v);
    if (!strpbrk(buf, ".eEni"))
        strcat(buf, ".0");
    sb_puts(b, buf);
}

static void put_literal(sbuf *b, const kiln_node *nd)
{
    double v = nd->value;
    switch (nd->lit_kind) {
    case KILN_LIT_INT:
        sb_printf(b, "%lld", (long long)v);
        break;
    case KILN_LIT_BOOL:
        sb_puts(b, v != 0 ? "true" : "false");
        break;
    default:
        put_float(b, v);
    }
}

/* ---- names ---------------------------------------------------------- */

/* The bodies a graph's nodes hold (issue 28), each once, in the order
 * they print (a body's own bodies before it), with the block name each
 * prints under: its graph name, made unique with _2, _3, ... */
typedef struct body_list {
    const kiln_graph **g;
    char **name;
    int n, cap;
    int oom;
} body_list;

typedef struct printer {
    const kiln_graph *g;
    sbuf b;
    int *gen;          /* generated name number, or -1 */
    unsigned char *inl;  /* 1: literal written inline */
    const body_list *bodies;
} printer;

static const char *body_name(const body_list *bl, const kiln_graph *g)
{
    for (int i = 0; i < bl->n; i++)
        if (bl->g[i] == g)
            return bl->name[i];
    return "?";
}

static void put_name(printer *pr, kiln_value v)
{
    const kiln_node *nd = &pr->g->nodes[v];
    if (nd->name)
        sb_puts(&pr->b, nd->name);
    else
        sb_printf(&pr->b, "t%d", pr->gen[v]);
}

/* An argument: an inline literal or a name. */
static void put_arg(printer *pr, kiln_value v)
{
    if (pr->inl[v])
        put_literal(&pr->b, &pr->g->nodes[v]);
    else
        put_name(pr, v);
}

static void put_dim(printer *pr, int64_t d)
{
    char buf[32];
    const kiln_graph *g = pr->g;
    if (KILN_DIM_IS_SYM(d) && d >= -2 - (int64_t)(g->n_symbols - 1) &&
        g->symbols[KILN_SYM_INDEX(d)])
        sb_puts(&pr->b, g->symbols[KILN_SYM_INDEX(d)]);
    else if (KILN_DIM_IS_SYM(d))
        sb_puts(&pr->b, "?");
    else {
        snprintf(buf, sizeof buf, "%lld", (long long)d);
        sb_puts(&pr->b, buf);
    }
}

static void put_type(printer *pr, const kiln_type *t)
{
    sb_puts(&pr->b, kiln_dtype_name(t->dtype));
    if (t->rank <= 0)
        return;
    sb_puts(&pr->b, "[");
    for (int i = 0; i < t->rank; i++) {
        if (i)
            sb_puts(&pr->b, ", ");
        put_dim(pr, t->dims[i]);
    }
    sb_puts(&pr->b, "]");
}

/* ---- constants ------------------------------------------------------ */

static void put_element(sbuf *b, kiln_dtype dt, const unsigned char *p)
{
    char buf[64];
    switch (dt) {
    case KILN_F64: {
        double v;
        memcpy(&v, p, 8);
        fmt_double(buf, sizeof buf, v);
        if (v == 0 && signbit(v))
            snprintf(buf, sizeof buf, "-0.0"); /* "-0" would read as 0 */
        sb_puts(b, buf);
        break;
    }
    case KILN_F32: {
        float f;
        memcpy(&f, p, 4);
        if (isnan(f) || isinf(f)) {
            fmt_double(buf, sizeof buf, f);
        } else {
            /* 9 significant digits identify a float */
            for (int prec = 6; prec <= 9; prec++) {
                fmt_g(buf, sizeof buf, prec, f);
                if ((float)parse_g(buf) == f)
                    break;
            }
            if (f == 0 && signbit(f))
                snprintf(buf, sizeof buf, "-0.0");
        }
        sb_puts(b, buf);
        break;
    }
    case KILN_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        sb_printf(b, "%lld", (long long)v);
        break;
    }
    case KILN_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        sb_printf(b, "%d", (int)v);
        break;
    }
    default:
        sb_puts(b, *p ? "true" : "false");
    }
}

/* Nested lists for axes `level`.. of a const; recursion depth <= rank. */
static void put_const_level(sbuf *b, const kiln_node *nd, int level,
                            const unsigned char **p, size_t es)
{
    if (level == nd->type.rank) {
        put_element(b, nd->type.dtype, *p);
        *p += es;
        return;
    }
    sb_puts(b, "[");
    for (int64_t i = 0; i < nd->vshape[level] && !b->oom; i++) {
        if (i)
            sb_puts(b, ", ");
        put_const_level(b, nd, level + 1, p, es);
    }
    sb_puts(b, "]");
}

static void put_const_value(printer *pr, const kiln_node *nd)
{
    size_t es = kiln_dtype_size(nd->type.dtype);
    int64_t numel = kiln_shape_numel(nd->type.rank, nd->vshape);
    if ((!nd->data && numel > 0) || numel < 0 ||
        (size_t)numel > nd->nbytes / (es ? es : 1)) {
        sb_puts(&pr->b, "?"); /* not a valid const: print something visible */
        return;
    }
    const unsigned char *p = nd->data;
    put_const_level(&pr->b, nd, 0, &p, es);
}

/* ---- op statements -------------------------------------------------- */

static void put_int_list(printer *pr, const int64_t *v, int n, int dims)
{
    sb_puts(&pr->b, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            sb_puts(&pr->b, ", ");
        if (dims)
            put_dim(pr, v[i]);
        else
            sb_printf(&pr->b, "%lld", (long long)v[i]);
    }
    sb_puts(&pr->b, "]");
}

static void put_axis_attr(printer *pr, const char *key, const kiln_attrs *a,
                          int always_list)
{
    sb_printf(&pr->b, ", %s=", key);
    if (a->naxes == 1 && !always_list)
        sb_printf(&pr->b, "%lld", (long long)a->axes[0]);
    else
        put_int_list(pr, a->axes, a->naxes, 0);
}

static void put_index(printer *pr, const kiln_attrs *a)
{
    sbuf *b = &pr->b;
    sb_puts(b, "[");
    for (int i = 0; i < a->nidx; i++) {
        const kiln_index *e = &a->idx[i];
        if (i)
            sb_puts(b, ", ");
        if (e->kind == KILN_INDEX_INT) {
            sb_printf(b, "%lld", (long long)e->start);
            continue;
        }
        if (e->has_start)
            sb_printf(b, "%lld", (long long)e->start);
        sb_puts(b, ":");
        if (e->has_stop)
            sb_printf(b, "%lld", (long long)e->stop);
        if (e->has_step)
            sb_printf(b, ":%lld", (long long)e->step);
    }
    sb_puts(b, "]");
}

/* x[:, :, idx] for an index tensor on `axis`. */
static void put_tensor_index(printer *pr, kiln_value x, kiln_value idx,
                             int64_t axis)
{
    put_name(pr, x);
    sb_puts(&pr->b, "[");
    for (int64_t i = 0; i < axis; i++)
        sb_puts(&pr->b, ":, ");
    put_name(pr, idx);
    sb_puts(&pr->b, "]");
}

static void put_args(printer *pr, const kiln_node *nd, int from)
{
    for (int i = from; i < nd->n_in; i++) {
        if (i > from)
            sb_puts(&pr->b, ", ");
        put_arg(pr, nd->in[i]);
    }
}

static void put_op(printer *pr, const kiln_node *nd)
{
    sbuf *b = &pr->b;
    const kiln_attrs *a = nd->attrs;
    const kiln_op_info *info = kiln_ir_op_info(nd->op);
    const char *opn = info ? info->name : "?";
    int64_t axis = a->has_axes ? a->axes[0] : 0;
    switch (nd->op) {
    case KILN_OP_SUBTENSOR:
        put_arg(pr, nd->in[0]);
        put_index(pr, a);
        return;
    case KILN_OP_SET_SUBTENSOR:
    case KILN_OP_INC_SUBTENSOR:
        sb_printf(b, "%s(", nd->op == KILN_OP_SET_SUBTENSOR
                                ? "set_subtensor" : "inc_subtensor");
        put_name(pr, nd->in[0]);
        put_index(pr, a);
        sb_puts(b, ", ");
        put_arg(pr, nd->in[1]);
        sb_puts(b, ")");
        return;
    case KILN_OP_TAKE:
        /* x[idx] only when idx is a name: x[2] would be basic indexing */
        if (axis == 0 && !pr->inl[nd->in[1]] && !pr->inl[nd->in[0]]) {
            put_tensor_index(pr, nd->in[0], nd->in[1], 0);
            return;
        }
        break;
    case KILN_OP_ADVANCED_SET_SUBTENSOR:
    case KILN_OP_ADVANCED_INC_SUBTENSOR:
        if (axis >= 0 && !pr->inl[nd->in[1]] && !pr->inl[nd->in[0]]) {
            sb_printf(b, "%s(", nd->op == KILN_OP_ADVANCED_SET_SUBTENSOR
                                    ? "set_subtensor" : "inc_subtensor");
            put_tensor_index(pr, nd->in[0], nd->in[1], axis);
            sb_puts(b, ", ");
            put_arg(pr, nd->in[2]);
            sb_puts(b, ")");
            return;
        }
        break;
    case KILN_OP_JOIN:
        sb_printf(b, "join(%lld", (long long)axis);
        if (nd->n_in)
            sb_puts(b, ", ");
        put_args(pr, nd, 0);
        sb_puts(b, ")");
        return;
    default:
        break;
    }
    sb_printf(b, "%s(", opn);
    put_args(pr, nd, 0);
    int sep = nd->n_in > 0;
    /* attributes: the keys ops.c reads for this op */
    size_t mark = b->n;
    switch (nd->op) {
    case KILN_OP_SUM: case KILN_OP_PROD: case KILN_OP_MAX: case KILN_OP_MIN:
    case KILN_OP_MEAN: case KILN_OP_LOGSUMEXP:
        if (a->has_axes)
            put_axis_attr(pr, "axis", a, 0);
        if (a->keepdims)
            sb_puts(b, ", keepdims=true");
        break;
    case KILN_OP_EXPAND_DIMS: case KILN_OP_SQUEEZE:
        if (a->has_axes)
            put_axis_attr(pr, "axis", a, 0);
        break;
    case KILN_OP_TRANSPOSE:
        if (a->has_axes)
            put_axis_attr(pr, "axes", a, 1);
        break;
    case KILN_OP_RESHAPE: case KILN_OP_BROADCAST_TO: case KILN_OP_ALLOC:
    case KILN_OP_ZEROS: case KILN_OP_ONES:
        sb_puts(b, ", shape=");
        put_int_list(pr, a->shape, a->nshape, 1);
        if (a->dtype >= 0)
            sb_printf(b, ", dtype=%s", kiln_dtype_name((kiln_dtype)a->dtype));
        break;
    case KILN_OP_CAST:
        sb_printf(b, ", dtype=%s", kiln_dtype_name((kiln_dtype)a->dtype));
        break;
    case KILN_OP_STACK: case KILN_OP_TAKE:
    case KILN_OP_ADVANCED_SET_SUBTENSOR: case KILN_OP_ADVANCED_INC_SUBTENSOR:
        if (a->has_axes)
            sb_printf(b, ", axis=%lld", (long long)axis);
        break;
    /* issue 25, opscheck */
    case KILN_OP_ALL: case KILN_OP_ANY:
        if (a->has_axes)
            put_axis_attr(pr, "axis", a, 0);
        if (a->keepdims)
            sb_puts(b, ", keepdims=true");
        break;
    case KILN_OP_CUMSUM: case KILN_OP_CUMPROD:
        sb_printf(b, ", axis=%lld", (long long)a->axes[0]);
        break;
    case KILN_OP_SCAN:
        sb_printf(b, ", body=%s, carries=%d, seqs=%d",
                  body_name(pr->bodies, a->body), a->n_carry, a->n_seq);
        if (a->n_steps >= 0)
            sb_printf(b, ", n_steps=%lld", (long long)a->n_steps);
        break;
    case KILN_OP_RESULT:
        sb_printf(b, ", index=%d", a->index);
        break;
    case KILN_OP_TOP_K:   /* issue 29 */
        sb_printf(b, ", k=%d", a->index);
        if (a->has_axes)
            sb_printf(b, ", axis=%lld", (long long)a->axes[0]);
        break;
    case KILN_OP_ODE_RK45: case KILN_OP_ODE_BDF:
        sb_printf(b, ", body=%s, rtol=%.17g, atol=%.17g, max_num_steps=%lld",
                  body_name(pr->bodies, a->body), a->rtol, a->atol,
                  (long long)a->max_steps);
        if (a->sens)
            sb_printf(b, ", sens=%d", a->sens);
        break;
    case KILN_OP_CHECK:
        if (a->msg) {
            /* the parser's escapes: only \\ and \" */
            sb_puts(b, ", msg=\"");
            for (const char *q = a->msg; *q; q++)
                sb_printf(b, "%s%c", *q == '"' || *q == '\\' ? "\\" : "",
                          *q);
            sb_puts(b, "\"");
        }
        break;
    case KILN_OP_CHOLESKY:   /* issue 28 */
        if (a->linalg & 4)
            sb_puts(b, ", nan_on_error=true");
        break;
    case KILN_OP_SOLVE_TRIANGULAR:   /* issue 28 */
        if (a->linalg & 1)
            sb_puts(b, ", lower=true");
        if (a->linalg & 2)
            sb_puts(b, ", trans=true");
        break;
    default:
        break;
    }
    /* with no positional argument the first attribute has no ", " */
    if (!sep && b->n > mark && !b->oom) {
        memmove(b->s + mark, b->s + mark + 2, b->n - mark - 2 + 1);
        b->n -= 2;
    }
    sb_puts(b, ")");
}

/* `  param NAME: TYPE [lower=L] [upper=U]` or `  param NAME: TYPE
 * TRANSFORM` */
static void put_bound(printer *pr, const char *kw, kiln_value ref, double v)
{
    sb_puts(&pr->b, kw);
    if (ref >= 0) {
        put_arg(pr, ref);
        return;
    }
    /* -0.0 as a float: "-0" would parse back as the integer 0 */
    if (v == floor(v) && fabs(v) <= 9007199254740992.0 &&
        !(v == 0 && signbit(v)))
        sb_printf(&pr->b, "%.0f", v);
    else
        put_float(&pr->b, v);
}

static void put_param(printer *pr, const kiln_param_rec *r)
{
    sb_puts(&pr->b, "  param ");
    sb_puts(&pr->b, r->name);
    sb_puts(&pr->b, ": ");
    /* a transform's input has the unconstrained shape: print the
     * constrained value's (`param theta: f64[K] simplex`) */
    put_type(pr, &pr->g->nodes[r->transform ? r->value : r->unc].type);
    if (r->transform) {
        sb_puts(&pr->b, " ");
        sb_puts(&pr->b, kiln_param_transform_name(r->transform));
    }
    if (r->lower_ref >= 0 || r->lower > -INFINITY)
        put_bound(pr, " lower=", r->lower_ref, r->lower);
    if (r->upper_ref >= 0 || r->upper < INFINITY)
        put_bound(pr, " upper=", r->upper_ref, r->upper);
    sb_puts(&pr->b, "\n");
}

/* ---- the graph ------------------------------------------------------ */

static int is_decl(int op)
{
    return op == KILN_OP_INPUT || op == KILN_OP_SHARED || op == KILN_OP_CONST;
}

/* 1 when a bound of r is a computed value (garch11's upper=(1 - alpha1)):
 * its line goes among the computations, after the bound's. */
static int late_param(const kiln_graph *g, const kiln_param_rec *r)
{
    kiln_value refs[2] = {r->lower_ref, r->upper_ref};
    for (int b = 0; b < 2; b++)
        if (refs[b] >= 0 && !is_decl(g->nodes[refs[b]].op))
            return 1;
    return 0;
}

/* The nodes a `param` line stands for (kiln_node.param): hidden[v] = 1
 * for each but the parameter's input (the line itself), unless it is
 * unnamed and something printed uses it (a gradient through the
 * transform, an output): those, and the unnamed nodes they need, are
 * printed as ordinary lines, which parse back to the same values.
 * `need` is scratch of n_nodes entries, zeroed here. */
static void mark_hidden(const kiln_graph *g, const unsigned char *is_out,
                        unsigned char *need, unsigned char *hidden)
{
    memset(need, 0, (size_t)g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++)
        need[i] = is_out[i];
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const kiln_node *nd = &g->nodes[i];
        int p = nd->param;
        hidden[i] = 0;
        if (p > 0 && p <= g->n_params && i != g->params[p - 1].unc)
            hidden[i] = nd->name ? 1 : !need[i];
        for (int k = 0; !hidden[i] && k < nd->n_in; k++)
            need[nd->in[k]] = 1;
    }
}

/* The names a printed graph gives its nodes: gen[v] = N for an unnamed
 * node printed as tN (-1 for a named one), inl[v] = 1 for a literal
 * printed inline (one use, unnamed, not an output).  uses and is_out are
 * scratch of n_nodes entries. */
static void print_names(const kiln_graph *g, int *uses, unsigned char *is_out,
                        int *gen, unsigned char *inl, unsigned char *hidden)
{
    for (int k = 0; k < g->n_outputs; k++)
        is_out[g->outputs[k].value] = 1;
    mark_hidden(g, is_out, (unsigned char *)gen, hidden);
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !hidden[i] && k < g->nodes[i].n_in; k++)
            uses[g->nodes[i].in[k]]++;
    int counter = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *nd = &g->nodes[i];
        gen[i] = -1;
        if (hidden[i])
            continue;   /* written by its `param` line */
        if (nd->op == KILN_OP_LITERAL && !nd->name && uses[i] == 1 &&
            !is_out[i]) {
            inl[i] = 1;
            continue;
        }
        if (nd->name)
            continue;
        char buf[32];
        do
            snprintf(buf, sizeof buf, "t%d", counter++);
        while (kiln_graph_lookup(g, buf) >= 0);
        gen[i] = counter - 1;
    }
}

int *kiln_graph_temp_names(const kiln_graph *g)
{
    size_t nn = (size_t)(g && g->n_nodes ? g->n_nodes : 1);
    int *uses = calloc(nn, sizeof *uses), *gen = malloc(nn * sizeof *gen);
    unsigned char *is_out = calloc(nn, 1), *inl = calloc(nn, 1);
    unsigned char *hidden = calloc(nn, 1);
    if (g && uses && gen && is_out && inl && hidden)
        print_names(g, uses, is_out, gen, inl, hidden);
    else {
        free(gen);
        gen = NULL;
    }
    free(uses);
    free(is_out);
    free(inl);
    free(hidden);
    return gen;
}

static int name_taken(const body_list *bl, const char *s, const char *main)
{
    if (strcmp(s, main) == 0)
        return 1;
    for (int i = 0; i < bl->n; i++)
        if (strcmp(bl->name[i], s) == 0)
            return 1;
    return 0;
}

/* Add g's bodies (theirs first) to bl; depth bounds a cycle. */
static void collect_bodies(body_list *bl, const kiln_graph *g,
                           const char *main, int depth)
{
    for (int v = 0; v < g->n_nodes && !bl->oom; v++) {
        const kiln_graph *c = g->nodes[v].attrs->body;
        if (!c || depth > 64)
            continue;
        int seen = 0;
        for (int i = 0; i < bl->n; i++)
            seen |= bl->g[i] == c;
        if (seen)
            continue;
        collect_bodies(bl, c, main, depth + 1);
        if (bl->n == bl->cap) {
            int cap = bl->cap ? 2 * bl->cap : 4;
            const kiln_graph **q = realloc(bl->g, sizeof *q * (size_t)cap);
            char **r = q ? realloc(bl->name, sizeof *r * (size_t)cap) : NULL;
            if (q)
                bl->g = q;
            if (!q || !r) {
                bl->oom = 1;
                return;
            }
            bl->name = r;
            bl->cap = cap;
        }
        const char *base = c->name ? c->name : "body";
        size_t n = strlen(base) + 16;
        char *nm = malloc(n);
        if (!nm) {
            bl->oom = 1;
            return;
        }
        snprintf(nm, n, "%s", base);
        for (int k = 2; name_taken(bl, nm, main); k++)
            snprintf(nm, n, "%s_%d", base, k);
        bl->g[bl->n] = c;
        bl->name[bl->n++] = nm;
    }
}

static char *print_block(const kiln_graph *g, const char *name,
                         const body_list *bl, kiln_err *err);

char *kiln_graph_print(const kiln_graph *g, kiln_err *err)
{
    if (!g) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_graph_print: NULL graph");
        return NULL;
    }
    const char *main = g->name ? g->name : "main";
    body_list bl;
    memset(&bl, 0, sizeof bl);
    collect_bodies(&bl, g, main, 0);
    sbuf all;
    memset(&all, 0, sizeof all);
    sb_puts(&all, "kiln 1\n");
    for (int i = 0; i <= bl.n && !bl.oom && !all.oom; i++) {
        char *t = print_block(i < bl.n ? bl.g[i] : g,
                              i < bl.n ? bl.name[i] : main, &bl, err);
        if (!t) {
            free(all.s);
            all.s = NULL;
            break;
        }
        if (i)
            sb_puts(&all, "\n");
        sb_puts(&all, t);
        free(t);
    }
    for (int i = 0; i < bl.n; i++)
        free(bl.name[i]);
    free(bl.name);
    free(bl.g);
    if (bl.oom || all.oom) {
        free(all.s);
        kiln_seterr(err, KILN_ERR_NOMEM, "kiln_graph_print: out of memory");
        return NULL;
    }
    return all.s;
}

/* One `graph NAME ... end` block. */
static char *print_block(const kiln_graph *g, const char *name,
                         const body_list *bl, kiln_err *err)
{
    printer pr;
    memset(&pr, 0, sizeof pr);
    pr.g = g;
    pr.bodies = bl;
    size_t nn = (size_t)g->n_nodes;
    int *uses = calloc(nn + 1, sizeof *uses);
    pr.gen = malloc((nn + 1) * sizeof *pr.gen);
    pr.inl = calloc(nn + 1, 1);
    unsigned char *is_out = calloc(nn + 1, 1);
    unsigned char *hidden = calloc(nn + 1, 1);
    if (!uses || !pr.gen || !pr.inl || !is_out || !hidden)
        goto nomem;

    print_names(g, uses, is_out, pr.gen, pr.inl, hidden);

    sbuf *b = &pr.b;
    sb_puts(b, "graph ");
    sb_puts(b, name);
    sb_puts(b, "\n");
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *nd = &g->nodes[i];
        if (!is_decl(nd->op))
            continue;
        if (nd->op == KILN_OP_INPUT && nd->param > 0 &&
            nd->param <= g->n_params) {
            if (!late_param(g, &g->params[nd->param - 1]))
                put_param(&pr, &g->params[nd->param - 1]);
            continue;
        }
        sb_puts(b, nd->op == KILN_OP_INPUT    ? "  input "
                   : nd->op == KILN_OP_SHARED ? "  shared "
                                              : "  const ");
        put_name(&pr, i);
        sb_puts(b, ": ");
        put_type(&pr, &nd->type);
        if (nd->op == KILN_OP_SHARED && nd->source) {
            sb_puts(b, " = ");
            sb_puts(b, nd->source);
        } else if (nd->op == KILN_OP_CONST) {
            sb_puts(b, " = ");
            put_const_value(&pr, nd);
        }
        sb_puts(b, "\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *nd = &g->nodes[i];
        if (nd->op == KILN_OP_INPUT && nd->param > 0 &&
            nd->param <= g->n_params &&
            late_param(g, &g->params[nd->param - 1]))
            put_param(&pr, &g->params[nd->param - 1]);
        if (is_decl(nd->op) || pr.inl[i] || hidden[i])
            continue;
        sb_puts(b, "  ");
        put_name(&pr, i);
        sb_puts(b, " = ");
        if (nd->op == KILN_OP_LITERAL)
            put_literal(b, nd);
        else
            put_op(&pr, nd);
        sb_puts(b, "\n");
    }
    if (g->part_axis) {     /* issue 30: the observation axis */
        sb_puts(b, "  partition ");
        sb_puts(b, g->part_axis);
        sb_puts(b, "\n");
    }
    for (int k = 0; k < g->n_outputs; k++) {
        kiln_value v = g->outputs[k].value;
        sb_puts(b, "  output ");
        if (g->outputs[k].kind == KILN_OUTPUT_TP)
            sb_puts(b, "tp ");
        else if (g->outputs[k].kind == KILN_OUTPUT_GQ)
            sb_puts(b, "gq ");
        sb_puts(b, g->outputs[k].name);
        if (!g->nodes[v].name || strcmp(g->nodes[v].name, g->outputs[k].name)) {
            sb_puts(b, " = ");
            put_name(&pr, v);
        }
        sb_puts(b, "\n");
    }
    sb_puts(b, "end\n");
    if (b->oom)
        goto nomem;
    free(uses);
    free(pr.gen);
    free(pr.inl);
    free(is_out);
    free(hidden);
    return b->s;
nomem:
    free(uses);
    free(pr.gen);
    free(pr.inl);
    free(is_out);
    free(hidden);
    free(pr.b.s);
    kiln_seterr(err, KILN_ERR_NOMEM, "kiln_graph_print: out of memory");
    return NULL;
}
