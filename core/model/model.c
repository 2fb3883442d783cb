/*
 * model.c — a statistical model as a sampler sees it (include/kiln/model.h):
 * parameters in unconstrained space, data bound by name from CmdStan JSON,
 * the log density with or without the log-Jacobians, its gradient, and the
 * constrained values with transformed parameters and generated quantities.
 *
 * kiln_model_new copies the graph, binds data to its unbound shared values,
 * sizes every symbol, and builds two graphs from the copy:
 *
 *   density    inputs: the parameters' unconstrained values in declaration
 *              order, then `jacobian__` (a 0/1 scalar; only when some
 *              parameter has bounds); outputs: lp + jacobian__ * sum of
 *              log-Jacobians, and its gradient with respect to each
 *              parameter input (kiln_graph_grad, reverse mode);
 *   constrain  inputs: the same parameters; outputs: each constrained value,
 *              then the `output tp` values, then the `output gq` values.
 *
 * Both are compiled by kiln_compile (policy, tiers, disk cache as for any
 * function), and called with kiln_function_call, which runs each calling
 * thread in its own context: the model is reentrant.  The Hessian is
 * central differences of the gradient (model.h states the accuracy).
 */
#include "ir.h"
#include "suggest.h"
#include "excerpt.h"
#include "free.h"

#include <kiln/cache.h>
#include <kiln/model.h>
#include <kiln/policy.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mparam {
    char *name;                 /* constrained name (names are built from it) */
    int rank;                   /* the unconstrained input's */
    int64_t shape[KILN_MAX_RANK];
    int64_t numel, off;         /* offset in the unconstrained vector */
    int crank;                  /* the constrained value's (a transform's
                                   differ: simplex K has K-1 unconstrained) */
    int64_t cshape[KILN_MAX_RANK];
    int64_t cnumel, coff;       /* offset in the constrained vector */
    int transform;              /* kiln_param_transform */
    int has_lo, has_hi;
    double lo, hi;
    int dyn_lo, dyn_hi;         /* bound computed by fb: its output, or -1 */
} mparam;

typedef struct mout {           /* a tp or gq output */
    int rank;
    int64_t shape[KILN_MAX_RANK];
    int64_t numel;
} mout;

/* The user_data of kiln_model_logp_callback: one per jacobian flag,
 * inside the model (freed with it). */
typedef struct model_cb {
    const struct kiln_model *m;
    int jacobian;
} model_cb;

struct kiln_model {
    model_cb cb[2];             /* kiln_model_logp_callback's user_data */
    char *name;
    char *info;
    kiln_function *fd, *fc;
    kiln_function *fb;          /* bounds that are not data (garch11's
                                   upper=(1 - alpha1)): inputs as fc,
                                   outputs the bounds; NULL: none */
    int n_dyn;
    int n_par;
    mparam *par;
    int64_t n_unc, n_con;       /* unconstrained / constrained values */
    int has_jac;                /* fd takes jacobian__ last */
    int n_tp, n_gq;             /* tp / gq outputs of fc, after n_par */
    mout *outs;                 /* n_tp + n_gq */
    int64_t n_tp_vals, n_gq_vals;
    char *names[4];             /* param names, by tp + 2 * gq */
    char *unc_names;
    /* a part (kiln_model_new_partition, issue 30): the axis's name (NULL:
     * a whole model), its symbol, its size in the whole data and the
     * part's rows [part_b, part_e); the first tp / gq output that depends
     * on the axis (refused by constrain), or NULL */
    char *part_axis;
    int part_sym, part_k;       /* ... and the part's number */
    int64_t part_total, part_b, part_e;
    char *dep[2];
    uint64_t data_digest;       /* kiln_model_data_digest */
};

/* ---- small helpers --------------------------------------------------- */

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static double read_scalar(kiln_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case KILN_F64: return ((const double *)p)[i];
    case KILN_F32: return ((const float *)p)[i];
    case KILN_I64: return (double)((const int64_t *)p)[i];
    case KILN_I32: return ((const int32_t *)p)[i];
    case KILN_BOOL: return ((const unsigned char *)p)[i];
    default: break;
    }
    return NAN;
}

/* Drop every output of g (the copies keep only what the model asks). */
static int drop_outputs(kiln_graph *g, kiln_err *err)
{
    for (int k = 0; k < g->n_outputs; k++)
        free(g->outputs[k].name);
    g->n_outputs = 0;
    return kiln_ir_reindex(g, err);
}

/* A fresh name in g: base, base1, base2, ... */
static void fresh_name(const kiln_graph *g, const char *base, char *buf,
                       size_t size)
{
    snprintf(buf, size, "%s", base);
    for (int k = 1; kiln_graph_lookup(g, buf) >= 0; k++)
        snprintf(buf, size, "%s%d", base, k);
}

/* ---- data ------------------------------------------------------------ */

static int sym_set(const kiln_graph *g, int64_t *symsz, int64_t d,
                   int64_t size, const char *what, kiln_err *err)
{
    if (!KILN_DIM_IS_SYM(d))
        return 0;
    int s = KILN_SYM_INDEX(d);
    if (symsz[s] < 0) {
        symsz[s] = size;
        return 0;
    }
    if (symsz[s] == size)
        return 0;
    return kiln_seterr(err, KILN_ERR_SHAPE,
                       "model: %s has size %lld for symbol '%s', which other "
                       "data makes %lld", what, (long long)size,
                       g->symbols[s] ? g->symbols[s] : "?",
                       (long long)symsz[s]);
}

/* Bind every unbound shared value of g from `d` and size the symbols. */
static int bind_data(kiln_graph *g, const kiln_json_data *d, int64_t *symsz,
                     kiln_err *err)
{
    char tb[160], what[200];
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_node *n = &g->nodes[i];
        if (n->op != KILN_OP_SHARED || !n->data)
            continue;
        for (int k = 0; k < n->type.rank; k++)
            if (KILN_DIM_IS_SYM(n->type.dims[k]) &&
                symsz[KILN_SYM_INDEX(n->type.dims[k])] < 0)
                /* a part's rows read by the parser: the whole's size */
                symsz[KILN_SYM_INDEX(n->type.dims[k])] =
                    n->read_part &&
                            KILN_SYM_INDEX(n->type.dims[k]) == g->read_sym
                        ? n->read_total : n->vshape[k];
    }
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_node *n = &g->nodes[i];
        if (n->op != KILN_OP_SHARED || n->data || n->promoted)
            continue;
        kiln_ir_type_str(g, &n->type, tb, sizeof tb);
        if (!d || !kiln_json_data_has(d, n->name)) {
            char has[256] = "";
            size_t k = 0;
            for (int j = 0; d && j < kiln_json_data_count(d) &&
                            k < sizeof has - 8; j++)
            {
                /* keys come from the data file: escaped (excerpt.h) */
                const char *key = kiln_json_data_key(d, j);
                char shown[EXCERPT_SIZE(EXCERPT_MAX)];
                excerpt(shown, sizeof shown, key, strlen(key), EXCERPT_MAX);
                k += (size_t)snprintf(has + k, sizeof has - k, "%s%s",
                                      j ? ", " : " (it has: ", shown);
            }
            if (k >= sizeof has - 8)
                snprintf(has + sizeof has - 8, 8, ", ...");
            if (k)
                strcat(has, ")");
            kiln_suggestion sg;
            char hint[96];
            kiln_suggest_init(&sg, n->name, strlen(n->name));
            for (int j = 0; d && j < kiln_json_data_count(d); j++)
                kiln_suggest_offer(&sg, kiln_json_data_key(d, j));
            return kiln_seterr(err, KILN_ERR_NAME,
                               "model: %s no variable '%s' for shared value "
                               "'%s' (declared %s)%s%s",
                               d ? "the data has" : "no data given, so",
                               n->name, n->name, tb,
                               kiln_suggest_text(&sg, hint, sizeof hint), has);
        }
        int64_t dims[KILN_MAX_RANK];
        for (int k = 0; k < n->type.rank; k++) {
            int64_t dd = n->type.dims[k];
            dims[k] = KILN_DIM_IS_SYM(dd) && symsz[KILN_SYM_INDEX(dd)] >= 0
                          ? symsz[KILN_SYM_INDEX(dd)] : dd;
        }
        kiln_tensor t;
        if (kiln_json_data_get(d, n->name, n->type.dtype, n->type.rank, dims,
                               &t, err)) {
            /* the reader sees sizes only: say which shared value, with
             * its symbols' names, the data was for */
            char msg[sizeof err->message];
            snprintf(msg, sizeof msg, "%s", err->message);
            return kiln_seterr(err, err->code,
                               "model: shared value '%s' (declared %s): %s",
                               n->name, tb, msg);
        }
        snprintf(what, sizeof what, "data '%s'", n->name);
        for (int k = 0; k < n->type.rank; k++)
            if (sym_set(g, symsz, n->type.dims[k], t.shape[k], what, err)) {
                free(t.data);
                return err->code;
            }
        n->data = t.data;
        n->nbytes = (size_t)kiln_shape_numel(t.rank, t.shape) *
                    kiln_dtype_size(t.dtype);
        for (int k = 0; k < t.rank; k++)
            n->vshape[k] = t.shape[k];
    }
    /* Stan's `int N`: an integer scalar named as a symbol sizes it */
    for (int s = 0; d && s < g->n_symbols; s++) {
        int rank, is_int;
        int64_t shape[KILN_MAX_RANK];
        if (!g->symbols[s] || !kiln_json_data_has(d, g->symbols[s]) ||
            kiln_json_data_shape(d, g->symbols[s], &rank, shape, &is_int) ||
            rank != 0)
            continue;
        if (!is_int) {
            /* a number that is no integer cannot be a size: ignoring it
             * sized the symbol from the arrays alone (J = 8.5 ran as 1) */
            kiln_tensor t;
            if (kiln_json_data_get(d, g->symbols[s], KILN_F64, 0, NULL, &t,
                                   err))
                return err ? err->code : KILN_ERR_ARG;
            double x = *(double *)t.data;
            free(t.data);
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "model: data '%s' is %.17g, but '%s' is not "
                               "an integer scalar: it names a size (symbol "
                               "'%s'), so write a whole number (8, not 8.0 "
                               "or 8.5)", g->symbols[s], x, g->symbols[s],
                               g->symbols[s]);
        }
        kiln_tensor t;
        if (kiln_json_data_get(d, g->symbols[s], KILN_I64, 0, NULL, &t, err))
            return err ? err->code : KILN_ERR_ARG;
        int64_t v = *(int64_t *)t.data;
        free(t.data);
        if (v < 0)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "model: data '%s' is %lld: a size must not be "
                               "negative", g->symbols[s], (long long)v);
        snprintf(what, sizeof what, "data '%s'", g->symbols[s]);
        if (symsz[s] >= 0 && symsz[s] != v)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "model: data '%s' is %lld but the data sized "
                               "by symbol '%s' has size %lld", g->symbols[s],
                               (long long)v, g->symbols[s],
                               (long long)symsz[s]);
        symsz[s] = v;
    }
    return 0;
}

/* A part (issue 30): the axis sizes data only; slice w's data sized by
 * it to the part's rows, and size the symbol as the part's count. */
static int part_data(kiln_model *m, kiln_graph *w, const kiln_partition *p,
                     int64_t *symsz, kiln_err *err)
{
    int s = m->part_sym;
    for (int i = 0; i < w->n_nodes; i++) {
        const kiln_node *n = &w->nodes[i];
        if (n->op != KILN_OP_INPUT)
            continue;
        for (int k = 0; k < n->type.rank; k++)
            if (n->type.dims[k] == KILN_SYM_ID(s)) {
                const char *pn = n->name;
                for (int r = 0; r < w->n_params; r++)
                    if (w->params[r].unc == i)
                        pn = w->params[r].name;
                return kiln_seterr(err, KILN_ERR_NAME,
                                   "partition: symbol '%s' sizes parameter "
                                   "'%s', not only data", w->symbols[s],
                                   pn ? pn : "?");
            }
    }
    if (symsz[s] < 0)
        return kiln_seterr(err, KILN_ERR_NAME,
                           "partition: symbol '%s' sizes no data",
                           w->symbols[s]);
    m->part_total = symsz[s];
    kiln_ir_part_rows(symsz[s], p->part, p->nparts, &m->part_b, &m->part_e);
    if (kiln_ir_part_slice(w, s, p->part, p->nparts, symsz[s], err))
        return err->code;
    symsz[s] = m->part_e - m->part_b;
    return 0;
}

/* ---- parameters ------------------------------------------------------ */

/* For each node of g, the index of the parameter record whose
 * unconstrained input it is (the first such record), or -1: one pass, so
 * that a model of 100k parameters is not quadratic to lay out.  malloc'd;
 * NULL (err set) when out of memory. */
static int *param_index(const kiln_graph *g, kiln_err *err)
{
    int *ix = malloc(sizeof *ix * (size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
    if (!ix) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++)
        ix[i] = -1;
    for (int k = g->n_params - 1; k >= 0; k--)
        if (g->params[k].unc >= 0 && g->params[k].unc < g->n_nodes)
            ix[g->params[k].unc] = k;
    return ix;
}

static const kiln_param_rec *param_of(const kiln_graph *g, const int *ix,
                                      kiln_value v)
{
    return ix[v] >= 0 ? &g->params[ix[v]] : NULL;
}

/* 1 when bound `ref` is a value the model computes (not data). */
static int bound_is_dynamic(const kiln_graph *g, kiln_value ref)
{
    return ref >= 0 && !((g->nodes[ref].op == KILN_OP_CONST ||
                          g->nodes[ref].op == KILN_OP_SHARED) &&
                         g->nodes[ref].data);
}

static int bound_value(const kiln_graph *g, const char *pname, kiln_value ref,
                       double num, double *out, kiln_err *err)
{
    if (ref < 0) {
        *out = num;
        return 0;
    }
    const kiln_node *n = &g->nodes[ref];
    if (!n->data)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "model: bound '%s' of parameter '%s' has no value",
                           n->name, pname);
    *out = read_scalar(n->type.dtype, n->data, 0);
    /* the transform (L + exp(u), ...) is in the graph already: a
     * non-finite L would make every value NaN or infinite */
    if (!isfinite(*out))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "model: bound '%s' of parameter '%s' is %g; a "
                           "bound given by name must be finite (write no "
                           "bound for none)", n->name, pname, *out);
    return 0;
}

/* The parameters: every input of g in node order (a plain input is a
 * parameter without bounds), with concrete shapes. */
static int layout_params_at(kiln_model *m, const kiln_graph *g,
                         const int64_t *symsz, const kiln_json_data *data,
                         const int *ix, kiln_err *err)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == KILN_OP_INPUT;
    if (n == 0)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "model: the graph has no parameter (declare them "
                           "with param NAME: TYPE)");
    if (!(m->par = calloc((size_t)n, sizeof *m->par)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *nd = &g->nodes[i];
        if (nd->op != KILN_OP_INPUT)
            continue;
        const kiln_param_rec *r = param_of(g, ix, i);
        mparam *p = &m->par[m->n_par++];
        if (!(p->name = dupstr(r ? r->name : nd->name)))
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        if (nd->type.dtype != KILN_F64)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "model: parameter '%s' is %s; a model's "
                               "parameters are f64", p->name,
                               kiln_dtype_name(nd->type.dtype));
        p->rank = nd->type.rank;
        p->numel = 1;
        for (int k = 0; k < p->rank; k++) {
            int64_t d = nd->type.dims[k];
            if (KILN_DIM_IS_SYM(d))
                d = symsz[KILN_SYM_INDEX(d)];
            if (d < 0) {
                const char *sn = g->symbols[KILN_SYM_INDEX(nd->type.dims[k])];
                if (sn && data && kiln_json_data_has(data, sn))
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "model: the size of symbol '%s' of "
                                       "parameter '%s' is not known: data "
                                       "'%s' is not an integer scalar", sn,
                                       p->name, sn);
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "model: the size of %s%s%s of parameter "
                                   "'%s' is not known: no data binds it",
                                   sn ? "symbol '" : "an unknown dim",
                                   sn ? sn : "", sn ? "'" : "", p->name);
            }
            p->shape[k] = d;
            /* checked before multiplying: N * N * N may overflow int64 */
            if (d > 0 && p->numel > (INT32_MAX / 2) / d)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "model: too many parameter values "
                                   "(parameter '%s')", p->name);
            p->numel *= d;
        }
        p->off = m->n_unc;
        m->n_unc += p->numel;
        if (m->n_unc > INT32_MAX / 2)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "model: too many parameter values");
        p->dyn_lo = p->dyn_hi = -1;
        p->crank = p->rank;
        memcpy(p->cshape, p->shape, sizeof p->cshape);
        p->cnumel = p->numel;
        if (r && r->transform) {
            /* the constrained value's dims: its symbols are sized (a
             * derived `K-1` of the input was solved for K) */
            const kiln_type *ct = &g->nodes[r->value].type;
            p->transform = r->transform;
            p->crank = ct->rank;
            p->cnumel = 1;
            for (int k = 0; k < ct->rank; k++) {
                int64_t d = ct->dims[k];
                if (KILN_DIM_IS_SYM(d))
                    d = symsz[KILN_SYM_INDEX(d)];
                if (d < 0 || d > INT32_MAX / 2)
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "model: the size of parameter '%s' "
                                       "is not known", p->name);
                p->cshape[k] = d;
                p->cnumel *= d;
            }
        }
        p->coff = m->n_con;
        m->n_con += p->cnumel;
        if (m->n_con > INT32_MAX / 2)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "model: too many parameter values");
        if (r) {
            p->has_lo = r->lower_ref >= 0 || r->lower > -INFINITY;
            p->has_hi = r->upper_ref >= 0 || r->upper < INFINITY;
            if (bound_is_dynamic(g, r->lower_ref))
                p->dyn_lo = m->n_dyn++;
            else if (bound_value(g, p->name, r->lower_ref, r->lower, &p->lo,
                                 err))
                return err->code;
            if (bound_is_dynamic(g, r->upper_ref))
                p->dyn_hi = m->n_dyn++;
            else if (bound_value(g, p->name, r->upper_ref, r->upper, &p->hi,
                                 err))
                return err->code;
            if (p->dyn_lo >= 0 || p->dyn_hi >= 0)
                continue;
            if (p->has_lo && p->has_hi && !(p->lo < p->hi))
                return kiln_seterr(err, KILN_ERR_ARG,
                                   "model: parameter '%s': lower bound %g is "
                                   "not below the upper bound %g", p->name,
                                   p->lo, p->hi);
            if (p->has_lo && p->has_hi && !isfinite(p->hi - p->lo))
                return kiln_seterr(err, KILN_ERR_ARG,
                                   "model: parameter '%s': upper bound %g "
                                   "minus lower bound %g overflows (the "
                                   "width must be finite)", p->name, p->hi,
                                   p->lo);
        }
    }
    return 0;
}

static int layout_params(kiln_model *m, const kiln_graph *g,
                         const int64_t *symsz, const kiln_json_data *data,
                         kiln_err *err)
{
    int *ix = param_index(g, err);
    if (!ix)
        return err ? err->code : KILN_ERR_NOMEM;
    int rc = layout_params_at(m, g, symsz, data, ix, err);
    free(ix);
    return rc;
}

/* ---- the two graphs -------------------------------------------------- */

static kiln_function *build_density(kiln_model *m, const kiln_graph *w,
                                    kiln_value lp, const kiln_partition *p,
                                    const kiln_options *opt, kiln_err *err)
{
    kiln_function *f = NULL;
    kiln_value *wrt = NULL, *gr = NULL;
    kiln_graph *d = kiln_ir_clone(w, err);
    if (!d || drop_outputs(d, err))
        goto out;
    kiln_value J = -1;
    for (int k = 0; k < d->n_params; k++) {
        kiln_value lj = d->params[k].logjac;
        if (lj < 0)
            continue;
        kiln_value in[2] = {J, lj};
        J = J < 0 ? lj : kiln_graph_op(d, "add", 2, in, NULL, 0, err);
        if (J < 0)
            goto out;
    }
    kiln_value total = lp;
    if (J >= 0) {
        char jn[64];
        fresh_name(d, "jacobian__", jn, sizeof jn);
        kiln_value jac = kiln_graph_input(d, jn, KILN_F64, 0, NULL, err);
        kiln_value in[2] = {jac, J};
        kiln_value t = jac < 0 ? -1 : kiln_graph_op(d, "mul", 2, in, NULL, 0,
                                                    err);
        kiln_value in2[2] = {lp, t};
        total = t < 0 ? -1 : kiln_graph_op(d, "add", 2, in2, NULL, 0, err);
        if (total < 0)
            goto out;
        m->has_jac = 1;
    }
    wrt = malloc(sizeof *wrt * (size_t)m->n_par);
    gr = malloc(sizeof *gr * (size_t)m->n_par);
    if (!wrt || !gr) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    int k = 0;
    for (int i = 0; i < d->n_nodes && k < m->n_par; i++)
        if (d->nodes[i].op == KILN_OP_INPUT)
            wrt[k++] = i;
    if (kiln_graph_grad(d, total, m->n_par, wrt, KILN_GRAD_DISCONNECTED_ZERO,
                        gr, err) ||
        kiln_graph_output(d, "lp__", total, err))
        goto out;
    for (k = 0; k < m->n_par; k++) {
        char on[32];
        snprintf(on, sizeof on, "grad%d__", k);
        if (kiln_graph_output(d, on, gr[k], err))
            goto out;
    }
    /* a part: the density and its gradient as sums over the axis, data
     * sliced already (kiln_ir_part_slice on w) */
    if (p && kiln_ir_part_rewrite(d, m->part_sym, p->part, p->nparts, 0,
                                  err)) {
        /* name the model's outputs as the model's user knows them */
        static const char *const pre = "partition: output '";
        size_t np = strlen(pre);
        if (!strncmp(err->message, pre, np)) {
            const char *q = strchr(err->message + np, '\'');
            char rest[sizeof err->message];
            int lp = !strncmp(err->message + np, "lp__'", 5);
            snprintf(rest, sizeof rest, "%s", q ? q + 1 : "");
            kiln_seterr(err, err->code, "partition: the log density%s%s",
                        lp ? "" : "'s gradient", rest);
        }
        goto out;
    }
    f = kiln_compile(d, opt, err);
out:
    free(wrt);
    free(gr);
    kiln_graph_free(d);
    return f;
}

static kiln_function *build_constrain(kiln_model *m, const kiln_graph *w,
                                      const kiln_options *opt, kiln_err *err)
{
    kiln_function *f = NULL;
    kiln_graph *c = kiln_ir_clone(w, err);
    int *ix = NULL;
    if (!c || drop_outputs(c, err) || !(ix = param_index(c, err)))
        goto out;
    int k = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        if (c->nodes[i].op != KILN_OP_INPUT)
            continue;
        const kiln_param_rec *r = param_of(c, ix, i);
        char on[32];
        snprintf(on, sizeof on, "param%d__", k++);
        if (kiln_graph_output(c, on, r ? r->value : i, err))
            goto out;
    }
    for (int kind = KILN_OUTPUT_TP; kind <= KILN_OUTPUT_GQ; kind++)
        for (int j = 0; j < w->n_outputs; j++) {
            if (w->outputs[j].kind != kind)
                continue;
            if (kiln_graph_output(c, w->outputs[j].name, w->outputs[j].value,
                                  err))
                goto out;
            if (kind == KILN_OUTPUT_TP)
                m->n_tp++;
            else
                m->n_gq++;
            int dep = m->part_axis && !m->dep[kind == KILN_OUTPUT_GQ]
                          ? kiln_ir_part_depends(c, m->part_sym,
                                                 w->outputs[j].value, err)
                          : 0;
            if (dep < 0)
                goto out;
            if (dep && !(m->dep[kind == KILN_OUTPUT_GQ] =
                             dupstr(w->outputs[j].name))) {
                kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
                goto out;
            }
        }
    f = kiln_compile(c, opt, err);
out:
    free(ix);
    kiln_graph_free(c);
    return f;
}

/* The function of the bounds that are not data (m->n_dyn of them, in
 * parameter order, lower before upper), or NULL when there are none. */
static int build_bounds(kiln_model *m, const kiln_graph *w,
                        const kiln_options *opt, kiln_err *err)
{
    if (!m->n_dyn)
        return 0;
    int rc = -1;
    kiln_graph *c = kiln_ir_clone(w, err);
    int *ix = NULL;
    if (!c || drop_outputs(c, err) || !(ix = param_index(c, err)))
        goto out;
    int k = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        const kiln_param_rec *r = c->nodes[i].op == KILN_OP_INPUT
                                      ? param_of(c, ix, i) : NULL;
        kiln_value refs[2] = {r ? r->lower_ref : -1, r ? r->upper_ref : -1};
        for (int b = 0; b < 2; b++) {
            if (!bound_is_dynamic(c, refs[b]))
                continue;
            char on[32];
            snprintf(on, sizeof on, "bound%d__", k++);
            if (kiln_graph_output(c, on, refs[b], err))
                goto out;
        }
    }
    m->fb = kiln_compile(c, opt, err);
    rc = m->fb ? 0 : -1;
out:
    free(ix);
    kiln_graph_free(c);
    return rc;
}

/* ---- calls ----------------------------------------------------------- */

/* Input tensors for the parameters at unc (plus jacobian__). */
static kiln_tensor *param_tensors(const kiln_model *m, const double *unc,
                                  const double *jac, kiln_tensor *small,
                                  int nsmall)
{
    int n = m->n_par + (jac != NULL);
    kiln_tensor *t = n <= nsmall ? small : malloc(sizeof *t * (size_t)n);
    if (!t)
        return NULL;
    for (int i = 0; i < m->n_par; i++) {
        const mparam *p = &m->par[i];
        t[i].dtype = KILN_F64;
        t[i].rank = p->rank;
        memcpy(t[i].shape, p->shape, sizeof t[i].shape);
        t[i].data = (void *)(unc + p->off);
    }
    if (jac) {
        memset(&t[m->n_par], 0, sizeof t[m->n_par]);
        t[m->n_par].dtype = KILN_F64;
        t[m->n_par].data = (void *)jac;
    }
    return t;
}

#define NSMALL 16

int kiln_model_log_density(const kiln_model *m, int jacobian,
                           const double *unc, double *lp, double *grad,
                           kiln_err *err)
{
    if (!m || (!unc && m->n_unc) || !lp)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "log_density: NULL argument");
    if (m->part_axis && m->part_b == m->part_e && m->part_k != 0) {
        /* an empty part but part 0 adds nothing: exactly 0 (evaluating
         * it could give 0 * -inf = NaN; docs/mpi.md "What is split") */
        *lp = 0;
        if (grad && m->n_unc)
            memset(grad, 0, sizeof *grad * (size_t)m->n_unc);
        return 0;
    }
    kiln_tensor sin[NSMALL], sout[NSMALL];
    double jac = jacobian ? 1.0 : 0.0;
    kiln_tensor *in = param_tensors(m, unc, m->has_jac ? &jac : NULL, sin,
                                    NSMALL);
    int nout = 1 + m->n_par;
    kiln_tensor *out = nout <= NSMALL ? sout
                                      : malloc(sizeof *out * (size_t)nout);
    int rc;
    if (!in || !out) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    rc = kiln_function_call(m->fd, in, out, err);
    if (rc)
        goto done;
    *lp = read_scalar(out[0].dtype, out[0].data, 0);
    for (int i = 0; grad && i < m->n_par; i++)
        memcpy(grad + m->par[i].off, out[1 + i].data,
               sizeof(double) * (size_t)m->par[i].numel);
done:
    if (in != sin)
        free(in);
    if (out != sout)
        free(out);
    return rc;
}

int kiln_model_constrain(const kiln_model *m, int include_tp, int include_gq,
                         const double *unc, double *out, kiln_err *err)
{
    if (!m || (!unc && m->n_unc) || !out)
        return kiln_seterr(err, KILN_ERR_ARG, "constrain: NULL argument");
    for (int k = 0; k < 2; k++)
        if (m->dep[k] && (k ? include_gq : include_tp))
            return kiln_seterr(err, KILN_ERR_ARG,
                               "constrain: %s '%s' depends on the partition "
                               "axis '%s': a part of the model cannot "
                               "compute it (ask for the parameters only, or "
                               "use the whole model)",
                               k ? "generated quantity" : "transformed "
                               "parameter", m->dep[k], m->part_axis);
    kiln_tensor sin[NSMALL], sout[NSMALL];
    kiln_tensor *in = param_tensors(m, unc, NULL, sin, NSMALL);
    int nout = m->n_par + m->n_tp + m->n_gq;
    kiln_tensor *res = nout <= NSMALL ? sout
                                      : malloc(sizeof *res * (size_t)nout);
    int rc;
    if (!in || !res) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    rc = kiln_function_call(m->fc, in, res, err);
    if (rc)
        goto done;
    int64_t o = 0;
    for (int i = 0; i < nout; i++) {
        int is_tp = i >= m->n_par && i < m->n_par + m->n_tp;
        int is_gq = i >= m->n_par + m->n_tp;
        if ((is_tp && !include_tp) || (is_gq && !include_gq))
            continue;
        int64_t ne = kiln_shape_numel(res[i].rank, res[i].shape);
        int64_t want = i < m->n_par ? m->par[i].cnumel
                                    : m->outs[i - m->n_par].numel;
        if (ne != want) {
            rc = kiln_seterr(err, KILN_ERR_SHAPE,
                             "constrain: output '%s' has %lld values at this "
                             "point but %lld when the model was made",
                             kiln_function_output_name(m->fc, i),
                             (long long)ne, (long long)want);
            goto done;
        }
        for (int64_t e = 0; e < ne; e++)
            out[o++] = read_scalar(res[i].dtype, res[i].data, e);
    }
done:
    if (in != sin)
        free(in);
    if (res != sout)
        free(res);
    return rc;
}

/* The Stan name of element e of a value of `rank`/`shape` (C order). */
static void elem_name(char *buf, size_t size, const char *name, int rank,
                      const int64_t *shape, int64_t e)
{
    size_t k = (size_t)snprintf(buf, size, "%s", name);
    int64_t idx[KILN_MAX_RANK];
    for (int a = rank - 1; a >= 0; a--) {
        idx[a] = shape[a] ? e % shape[a] : 0;
        e = shape[a] ? e / shape[a] : 0;
    }
    for (int a = 0; a < rank && k < size; a++)
        k += (size_t)snprintf(buf + k, size - k, ".%lld",
                              (long long)idx[a] + 1);
}

/* The bounds fb computes, at unc (parameters not yet unconstrained are
 * 0 there: a bound depends only on earlier ones). */
static int dyn_bounds(const kiln_model *m, const double *unc, double *out,
                      kiln_err *err)
{
    kiln_tensor *in = param_tensors(m, unc, NULL, NULL, 0);
    kiln_tensor *res = malloc(sizeof *res * (size_t)m->n_dyn);
    int rc = !in || !res ? kiln_seterr(err, KILN_ERR_NOMEM, "out of memory")
                         : kiln_function_call(m->fb, in, res, err);
    for (int k = 0; !rc && k < m->n_dyn; k++)
        out[k] = read_scalar(res[k].dtype, res[k].data, 0);
    free(in);
    free(res);
    return rc;
}

int kiln_model_unconstrain(const kiln_model *m, const double *theta,
                           double *unc, kiln_err *err)
{
    if (!m || (!theta && m->n_unc) || (!unc && m->n_unc))
        return kiln_seterr(err, KILN_ERR_ARG, "unconstrain: NULL argument");
    double dsmall[16], *dyn = dsmall;
    if (m->n_dyn > 16 && !(dyn = malloc(sizeof *dyn * (size_t)m->n_dyn)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    if (m->n_dyn)
        memset(unc, 0, sizeof *unc * (size_t)m->n_unc);
    int rc = 0;
    for (int i = 0; !rc && i < m->n_par; i++) {
        const mparam *p = &m->par[i];
        const double *x = theta + p->coff;
        if (p->transform) {
            rc = kiln_model_free_transform(p->transform, p->name, p->crank,
                                           p->cshape, x, unc + p->off, err);
            continue;
        }
        double lo = p->lo, hi = p->hi;
        if (p->dyn_lo >= 0 || p->dyn_hi >= 0) {
            if ((rc = dyn_bounds(m, unc, dyn, err)))
                break;
            lo = p->dyn_lo >= 0 ? dyn[p->dyn_lo] : lo;
            hi = p->dyn_hi >= 0 ? dyn[p->dyn_hi] : hi;
            if ((p->has_lo && isnan(lo)) || (p->has_hi && isnan(hi)) ||
                (p->has_lo && p->has_hi && !(lo < hi))) {
                rc = kiln_seterr(err, KILN_ERR_ARG,
                                 "unconstrain: parameter '%s': its bounds "
                                 "are %.17g and %.17g at this point", p->name,
                                 p->has_lo ? lo : -INFINITY,
                                 p->has_hi ? hi : INFINITY);
                break;
            }
        }
        for (int64_t e = 0; e < p->numel; e++) {
            double v = x[e], u;
            const char *why = NULL;
            double b = 0;
            if (isnan(v))
                why = "NaN";
            else if (p->has_lo && v < lo)
                why = "below its lower bound", b = lo;
            else if (p->has_hi && v > hi)
                why = "above its upper bound", b = hi;
            if (why) {
                char nm[256];
                elem_name(nm, sizeof nm, p->name, p->rank, p->shape, e);
                rc = isnan(v) ? kiln_seterr(err, KILN_ERR_ARG,
                                            "unconstrain: parameter '%s' is "
                                            "NaN", nm)
                              : kiln_seterr(err, KILN_ERR_ARG,
                                            "unconstrain: parameter '%s' is "
                                            "%.17g, %s %.17g", nm, v, why, b);
                break;
            }
            if (p->has_lo && p->has_hi) {
                double y = (v - lo) / (hi - lo);
                u = log(y) - log1p(-y);
            } else if (p->has_lo)
                u = log(v - lo);
            else if (p->has_hi)
                u = log(hi - v);
            else
                u = v;
            unc[p->off + e] = u;
        }
    }
    if (dyn != dsmall)
        free(dyn);
    return rc;
}

int kiln_model_unconstrain_json(const kiln_model *m, const char *json,
                                double *unc, kiln_err *err)
{
    if (!m || !json || (!unc && m->n_unc))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "unconstrain_json: NULL argument");
    kiln_json_data *d = kiln_json_data_parse(json, strlen(json), "<json>",
                                             err);
    if (!d)
        return err ? err->code : KILN_ERR_PARSE;
    double *theta = malloc(sizeof *theta * (size_t)(m->n_con ? m->n_con : 1));
    int rc = 0;
    if (!theta)
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < m->n_par; i++) {
        const mparam *p = &m->par[i];
        kiln_tensor t;
        rc = kiln_json_data_get(d, p->name, KILN_F64, p->crank, p->cshape,
                                &t, err);
        if (rc)
            break;
        memcpy(theta + p->coff, t.data, sizeof(double) * (size_t)p->cnumel);
        free(t.data);
    }
    if (!rc)
        rc = kiln_model_unconstrain(m, theta, unc, err);
    free(theta);
    kiln_json_data_free(d);
    return rc;
}

/* ---- second derivatives ---------------------------------------------- */

#define FD_STEP 6.0554544523933395e-06   /* cbrt(DBL_EPSILON) */

/* kiln_model_log_density as a kiln_density_fn */
static int model_density(const void *ctx, int jacobian, const double *unc,
                         double *lp, double *grad, kiln_err *err)
{
    return kiln_model_log_density(ctx, jacobian, unc, lp, grad, err);
}

int kiln_model_log_density_hessian(const kiln_model *m, int jacobian,
                                   const double *unc, double *lp,
                                   double *grad, double *hessian,
                                   kiln_err *err)
{
    if (!m)
        return kiln_seterr(err, KILN_ERR_ARG, "hessian: NULL argument");
    return kiln_fd_hessian(model_density, m, m->n_unc, jacobian, unc, lp,
                           grad, hessian, err);
}

int kiln_model_log_density_hvp(const kiln_model *m, int jacobian,
                               const double *unc, const double *v,
                               double *lp, double *hvp, kiln_err *err)
{
    if (!m)
        return kiln_seterr(err, KILN_ERR_ARG, "hvp: NULL argument");
    return kiln_fd_hvp(model_density, m, m->n_unc, jacobian, unc, v, lp, hvp,
                       err);
}

int kiln_fd_hessian(kiln_density_fn fn, const void *ctx, int64_t n,
                    int jacobian, const double *unc, double *lp,
                    double *grad, double *hessian, kiln_err *err)
{
    if (!fn || (!unc && n) || !lp || !hessian)
        return kiln_seterr(err, KILN_ERR_ARG, "hessian: NULL argument");
    double *buf = malloc(sizeof(double) * (size_t)(3 * n + 1));
    if (!buf)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    double *u = buf, *gp = buf + n, *gm = buf + 2 * n, dummy;
    int rc = fn(ctx, jacobian, unc, lp, grad ? grad : gp, err);
    if (n)
        memcpy(u, unc, sizeof(double) * (size_t)n);
    for (int64_t j = 0; !rc && j < n; j++) {
        double h = FD_STEP * fmax(1.0, fabs(unc[j]));
        u[j] = unc[j] + h;
        rc = fn(ctx, jacobian, u, &dummy, gp, err);
        u[j] = unc[j] - h;
        if (!rc)
            rc = fn(ctx, jacobian, u, &dummy, gm, err);
        u[j] = unc[j];
        for (int64_t i = 0; !rc && i < n; i++)
            hessian[i * n + j] = (gp[i] - gm[i]) / (2 * h);
    }
    for (int64_t i = 0; !rc && i < n; i++)
        for (int64_t j = i + 1; j < n; j++) {
            double a = 0.5 * (hessian[i * n + j] + hessian[j * n + i]);
            hessian[i * n + j] = hessian[j * n + i] = a;
        }
    free(buf);
    return rc;
}

int kiln_fd_hvp(kiln_density_fn fn, const void *ctx, int64_t n,
                int jacobian, const double *unc, const double *v, double *lp,
                double *hvp, kiln_err *err)
{
    if (!fn || (!unc && n) || (!v && n) || !lp || (!hvp && n))
        return kiln_seterr(err, KILN_ERR_ARG, "hvp: NULL argument");
    double *buf = malloc(sizeof(double) * (size_t)(3 * n + 1));
    if (!buf)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    double *u = buf, *gp = buf + n, *gm = buf + 2 * n, dummy;
    int rc = fn(ctx, jacobian, unc, lp, NULL, err);
    /* H v is linear in v: differentiate along w = v / max|v| (max|w| = 1,
     * so the step is well-defined however small or large v is) and scale
     * back.  A NaN or infinite entry of v makes every entry NaN (fmax
     * would skip a NaN). */
    double un = 0, vn = 0;
    int bad_v = 0;
    for (int64_t i = 0; i < n; i++) {
        un = fmax(un, fabs(unc[i]));
        if (!isfinite(v[i]))
            bad_v = 1;
        vn = fmax(vn, fabs(v[i]));
    }
    if (!rc && (vn == 0 || bad_v)) {
        for (int64_t i = 0; i < n; i++) /* hvp may be NULL when n = 0 */
            hvp[i] = bad_v ? NAN : 0.0;
    } else if (!rc) {
        double h = FD_STEP * fmax(1.0, un);
        for (int64_t i = 0; i < n; i++)
            u[i] = unc[i] + h * (v[i] / vn);
        rc = fn(ctx, jacobian, u, &dummy, gp, err);
        for (int64_t i = 0; i < n; i++)
            u[i] = unc[i] - h * (v[i] / vn);
        if (!rc)
            rc = fn(ctx, jacobian, u, &dummy, gm, err);
        for (int64_t i = 0; !rc && i < n; i++)
            hvp[i] = (gp[i] - gm[i]) / (2 * h) * vn;
    }
    free(buf);
    return rc;
}

/* ---- names and info -------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *t)
{
    size_t l = strlen(t);
    if (b->oom)
        return;
    if (b->n + l + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + l + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, t, l + 1);
    b->n += l;
}

static void sb_names(sbuf *b, const char *name, int rank,
                     const int64_t *shape, int64_t numel)
{
    char nm[512];
    for (int64_t e = 0; e < numel; e++) {
        elem_name(nm, sizeof nm, name, rank, shape, e);
        if (b->n)
            sb_add(b, ",");
        sb_add(b, nm);
    }
}

static char *make_names(const kiln_model *m, int tp, int gq)
{
    sbuf b = {0};
    sb_add(&b, "");
    for (int i = 0; i < m->n_par; i++)
        sb_names(&b, m->par[i].name, m->par[i].crank, m->par[i].cshape,
                 m->par[i].cnumel);
    for (int j = 0; j < m->n_tp + m->n_gq; j++) {
        if ((j < m->n_tp && !tp) || (j >= m->n_tp && !gq))
            continue;
        sb_names(&b, kiln_function_output_name(m->fc, m->n_par + j),
                 m->outs[j].rank, m->outs[j].shape, m->outs[j].numel);
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static char *make_info(const kiln_model *m)
{
    sbuf b = {0};
    char t[512];
    snprintf(t, sizeof t, "kiln %s; model %s; %lld unconstrained values; "
             "kernels:", KILN_VERSION_STRING, m->name,
             (long long)m->n_unc);
    sb_add(&b, t);
    const char *seen[16];
    int cnt[16], ns = 0;
    const kiln_function *fs[2] = {m->fd, m->fc};
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < kiln_function_n_kernels(fs[w]); i++) {
            const char *be = kiln_function_kernel_backend(fs[w], i);
            int k = 0;
            while (k < ns && strcmp(seen[k], be))
                k++;
            if (k == ns && ns < 16) {
                seen[ns] = be;
                cnt[ns++] = 0;
            }
            if (k < ns)
                cnt[k]++;
        }
    for (int k = 0; k < ns; k++) {
        snprintf(t, sizeof t, " %s x%d", seen[k], cnt[k]);
        sb_add(&b, t);
    }
    const char *pol = kiln_function_policy_source(m->fd);
    snprintf(t, sizeof t, "; policy: %s", pol ? pol : "(explicit backend)");
    sb_add(&b, t);
    kiln_cache *c = kiln_cache_open(NULL, 0, NULL);
    snprintf(t, sizeof t, "; cache: %s", c ? kiln_cache_dir(c) : "(none)");
    sb_add(&b, t);
    kiln_cache_close(c);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- the sampler callback -------------------------------------------- */

/* The calling thread's last call of any model callback: its user_data and
 * (when it failed) why. */
static _Thread_local const model_cb *cb_last;
static _Thread_local char cb_msg[sizeof ((kiln_err *)0)->message];

static int model_logp(uint64_t dim, const double *x, double *grad,
                      double *logp, void *user_data)
{
    const model_cb *c = user_data;
    cb_last = c;
    cb_msg[0] = '\0';
    if (!c || !c->m)
        return KILN_LOGP_ERROR;
    const kiln_model *m = c->m;
    if (dim != (uint64_t)m->n_unc || (!x && dim > 0) || !logp) {
        snprintf(cb_msg, sizeof cb_msg,
                 "model logp callback: called with dim %llu%s, but the "
                 "model has %lld unconstrained values",
                 (unsigned long long)dim,
                 !logp ? " and logp NULL" : !x && dim ? " and x NULL" : "",
                 (long long)m->n_unc);
        return KILN_LOGP_BAD_DIM;
    }
    kiln_err e;
    double unused = 0;
    int rc = kiln_model_log_density(m, c->jacobian, x ? x : &unused, logp,
                                    grad, &e);
    if (rc) {
        snprintf(cb_msg, sizeof cb_msg, "%s", e.message);
        if (rc == KILN_ERR_CHECK) {   /* rejected (Stan: reject the draw) */
            *logp = -INFINITY;
            return KILN_LOGP_NONFINITE;
        }
        return KILN_LOGP_ERROR;
    }
    if (!isfinite(*logp)) {
        snprintf(cb_msg, sizeof cb_msg, "model logp callback: logp is %s",
                 isnan(*logp) ? "nan" : *logp > 0 ? "inf" : "-inf");
        return KILN_LOGP_NONFINITE;
    }
    return KILN_LOGP_OK;
}

kiln_logp_fn kiln_model_logp_callback(kiln_model *m, int jacobian,
                                      uint64_t *dim, void **user_data,
                                      kiln_err *err)
{
    if (!m || !dim || !user_data) {
        kiln_seterr(err, KILN_ERR_ARG, "model logp callback: NULL argument");
        return NULL;
    }
    *dim = (uint64_t)m->n_unc;
    *user_data = &m->cb[jacobian != 0];
    return model_logp;
}

const char *kiln_model_logp_callback_message(const void *user_data)
{
    return user_data && cb_last == user_data ? cb_msg : "";
}

/* ---- make and free --------------------------------------------------- */

void kiln_model_free(kiln_model *m)
{
    if (!m)
        return;
    kiln_function_free(m->fd);
    kiln_function_free(m->fc);
    kiln_function_free(m->fb);
    for (int i = 0; i < m->n_par; i++)
        free(m->par[i].name);
    free(m->par);
    free(m->outs);
    for (int k = 0; k < 4; k++)
        free(m->names[k]);
    free(m->unc_names);
    free(m->part_axis);
    free(m->dep[0]);
    free(m->dep[1]);
    free(m->info);
    free(m->name);
    free(m);
}

static int find_logp(const kiln_graph *g, const char *name, kiln_value *out,
                     kiln_err *err)
{
    int k = -1;
    for (int j = 0; j < g->n_outputs; j++)
        if (strcmp(g->outputs[j].name, name ? name : "logp") == 0)
            k = j;
    if (k < 0 && name)
        return kiln_seterr(err, KILN_ERR_NAME, "model: no output named '%s'",
                           name);
    if (k < 0 && g->n_outputs == 0)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "model: the graph has no output to use as the "
                           "log density");
    /* else the first output that is not a tp / gq nor a gradient */
    for (int j = 0; k < 0 && j < g->n_outputs; j++) {
        int is_grad = 0;
        for (int r = 0; r < g->n_grads; r++)
            is_grad |= g->grads[r].result == g->outputs[j].value;
        if (!is_grad && g->outputs[j].kind == KILN_OUTPUT_PLAIN)
            k = j;
    }
    if (k < 0)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "model: no output to use as the log density: "
                           "every output is a gradient, a tp or a gq (name "
                           "one, or name the log density 'logp')");
    const kiln_node *n = &g->nodes[g->outputs[k].value];
    if (n->type.rank != 0 ||
        (n->type.dtype != KILN_F64 && n->type.dtype != KILN_F32)) {
        char tb[160];
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "model: the log density '%s' must be a float "
                           "scalar, got %s", g->outputs[k].name,
                           kiln_ir_type_str(g, &n->type, tb, sizeof tb));
    }
    *out = g->outputs[k].value;
    return 0;
}

int kiln_model_check_graph(const kiln_graph *g, const char *logp_output,
                           const char **chosen, kiln_err *err)
{
    kiln_value lp;
    if (!g)
        return kiln_seterr(err, KILN_ERR_ARG, "model: NULL graph");
    if (find_logp(g, logp_output, &lp, err))
        return err ? err->code : KILN_ERR_ARG;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == KILN_OP_INPUT;
    if (n == 0)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "model: the graph has no parameter (declare them "
                           "with param NAME: TYPE)");
    for (int j = 0; chosen && j < g->n_outputs; j++)
        if (g->outputs[j].value == lp &&
            (!logp_output || !strcmp(g->outputs[j].name, logp_output))) {
            *chosen = g->outputs[j].name;
            break;
        }
    return 0;
}

static int is_json_path(const char *s)
{
    size_t n = strlen(s);
    return n > 5 && strcmp(s + n - 5, ".json") == 0 && !strchr(s, '{');
}

/* kiln_model_new, and with p a part of it (kiln_model_new_partition) */
static kiln_model *model_new(const kiln_graph *g, const char *logp_output,
                             const char *data, const kiln_partition *p,
                             const kiln_options *opt,
                             const kiln_read_options *ropt, kiln_err *err)
{
    if (!g) {
        kiln_seterr(err, KILN_ERR_ARG, "model: NULL graph");
        return NULL;
    }
    kiln_err local;
    if (!err)
        err = &local;
    kiln_model *m = calloc(1, sizeof *m);
    kiln_graph *w = NULL;
    kiln_json_data *d = NULL;
    int64_t *symsz = NULL;
    kiln_value lp = -1;
    if (!m) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int k = 0; k < 2; k++) {
        m->cb[k].m = m;
        m->cb[k].jacobian = k;
    }
    if (!(m->name = dupstr(g->name ? g->name : "model"))) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (find_logp(g, logp_output, &lp, err))
        goto fail;
    if (p) {
        if (kiln_ir_part_axis(g, p, &m->part_sym, err))
            goto fail;
        m->part_k = p->part;
        if (!(m->part_axis = dupstr(g->symbols[m->part_sym]))) {
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    if (data && *data) {
        const char *t = data;
        while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')
            t++;
        if (!is_json_path(data) && *t && *t != '{') {
            /* a path, most likely: say what was expected */
            kiln_seterr(err, KILN_ERR_PARSE,
                        "model: data '%.60s%s' is neither JSON text (an "
                        "object, {...}) nor the path of a file ending in "
                        ".json", data, strlen(data) > 60 ? "..." : "");
            goto fail;
        }
        d = is_json_path(data) ? kiln_json_data_read(data, ropt, err)
                               : kiln_json_data_parse(data, strlen(data),
                                                      "<data>", err);
        if (!d)
            goto fail;
    }
    if (!(w = kiln_ir_clone(g, err)))
        goto fail;
    /* data read as a part's rows (kiln_read_options.part_*): only that
     * part can be made of it */
    if (g->read_n && !p) {
        kiln_seterr(err, KILN_ERR_ARG, "model: the graph's data was read as "
                    "part %d of %d (kiln_read_options.part_*): make that "
                    "part (kiln_model_new_partition)", g->read_k, g->read_n);
        goto fail;
    }
    if (p && kiln_ir_part_read_check(g, m->part_sym, p->part, p->nparts,
                                     err))
        goto fail;
    symsz = malloc(sizeof *symsz * (size_t)(w->n_symbols + 1));
    if (!symsz) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int s = 0; s < w->n_symbols; s++)
        symsz[s] = -1;
    if (bind_data(w, d, symsz, err) ||
        (p && part_data(m, w, p, symsz, err)) ||
        kiln_graph_data_digest(w, &m->data_digest, err) ||
        kiln_ir_symbols_derive(w, symsz, NULL, err) ||
        layout_params(m, w, symsz, d, err))
        goto fail;
    if (!(m->fd = build_density(m, w, lp, p, opt, err)) ||
        !(m->fc = build_constrain(m, w, opt, err)) ||
        build_bounds(m, w, opt, err))
        goto fail;
    /* the sizes of tp and gq: one call at u = 0 */
    int nout = m->n_tp + m->n_gq;
    if (nout) {
        double *z = calloc((size_t)(m->n_unc + 1), sizeof *z);
        kiln_tensor *in = z ? param_tensors(m, z, NULL, NULL, 0) : NULL;
        kiln_tensor *res = malloc(sizeof *res * (size_t)(m->n_par + nout));
        m->outs = calloc((size_t)nout, sizeof *m->outs);
        int rc = !z || !in || !res || !m->outs
                     ? kiln_seterr(err, KILN_ERR_NOMEM, "out of memory")
                     : kiln_function_call(m->fc, in, res, err);
        for (int j = 0; !rc && j < nout; j++) {
            const kiln_tensor *t = &res[m->n_par + j];
            m->outs[j].rank = t->rank;
            memcpy(m->outs[j].shape, t->shape, sizeof t->shape);
            m->outs[j].numel = kiln_shape_numel(t->rank, t->shape);
            if (j < m->n_tp)
                m->n_tp_vals += m->outs[j].numel;
            else
                m->n_gq_vals += m->outs[j].numel;
        }
        free(z);
        free(in);
        free(res);
        if (rc)
            goto fail;
    }
    for (int k = 0; k < 4; k++)
        if (!(m->names[k] = make_names(m, k & 1, k >> 1)))
            goto nomem;
    {
        sbuf b = {0};
        sb_add(&b, "");
        for (int i = 0; i < m->n_par; i++)
            sb_names(&b, m->par[i].name, m->par[i].rank, m->par[i].shape,
                     m->par[i].numel);
        if (b.oom) {
            free(b.s);
            goto nomem;
        }
        m->unc_names = b.s;
    }
    if (!(m->info = make_info(m)))
        goto nomem;
    free(symsz);
    kiln_graph_free(w);
    kiln_json_data_free(d);
    return m;
nomem:
    kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
fail:
    free(symsz);
    kiln_graph_free(w);
    kiln_json_data_free(d);
    kiln_model_free(m);
    return NULL;
}

kiln_model *kiln_model_new(const kiln_graph *g, const char *logp_output,
                           const char *data, const kiln_options *opt,
                           const kiln_read_options *ropt, kiln_err *err)
{
    return model_new(g, logp_output, data, NULL, opt, ropt, err);
}

kiln_model *kiln_model_new_partition(const kiln_graph *g,
                                     const char *logp_output,
                                     const char *data,
                                     const kiln_partition *p,
                                     const kiln_options *opt,
                                     const kiln_read_options *ropt,
                                     kiln_err *err)
{
    return model_new(g, logp_output, data, p, opt, ropt, err);
}

uint64_t kiln_model_data_digest(const kiln_model *m)
{
    return m ? m->data_digest : 0;
}

const char *kiln_model_partition_range(const kiln_model *m, int64_t *total,
                                       int64_t *begin, int64_t *end)
{
    int part = m && m->part_axis;
    if (total)
        *total = part ? m->part_total : 0;
    if (begin)
        *begin = part ? m->part_b : 0;
    if (end)
        *end = part ? m->part_e : 0;
    return part ? m->part_axis : NULL;
}

/* ---- accessors ------------------------------------------------------- */

const char *kiln_model_name(const kiln_model *m)
{
    return m ? m->name : NULL;
}

const char *kiln_model_info(const kiln_model *m)
{
    return m ? m->info : NULL;
}

int kiln_model_n_unc(const kiln_model *m)
{
    return m ? (int)m->n_unc : 0;
}

int kiln_model_n_params(const kiln_model *m, int include_tp, int include_gq)
{
    if (!m)
        return 0;
    return (int)(m->n_con + (include_tp ? m->n_tp_vals : 0) +
                 (include_gq ? m->n_gq_vals : 0));
}

const char *kiln_model_param_names(const kiln_model *m, int include_tp,
                                   int include_gq)
{
    return m ? m->names[(include_tp != 0) + 2 * (include_gq != 0)] : NULL;
}

const char *kiln_model_param_unc_names(const kiln_model *m)
{
    return m ? m->unc_names : NULL;
}

int kiln_model_tier_wait(const kiln_model *m, double timeout_seconds)
{
    if (!m)
        return KILN_ERR_ARG;
    return kiln_function_tier_wait(m->fd, timeout_seconds);
}

void kiln_model_tier_count(const kiln_model *m, int *tiered, int *kernels)
{
    int t = 0, n = m ? kiln_function_n_kernels(m->fd) : 0;
    for (int i = 0; i < n; i++) {
        kiln_tier_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (kiln_function_tier_info(m->fd, i, &info) == 0 && info.tier == 1)
            t++;
    }
    if (tiered)
        *tiered = t;
    if (kernels)
        *kernels = n;
}
