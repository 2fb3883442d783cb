/*
 * param.c — model parameters in the graph: `param NAME: TYPE [lower=L]
 * [upper=U]` (kiln_graph_param), and what outputs are to a model
 * (`output tp NAME`, `output gq NAME`).
 *
 * A parameter is an input holding the unconstrained value u and the nodes
 * of Stan's constraint transform from it (Stan Reference Manual,
 * "Constraint transforms"; include/kiln/model.h has the table):
 *
 *   lower L           x = L + exp(u)                  log|J| = sum(u)
 *   upper U           x = U - exp(u)                  log|J| = sum(u)
 *   both              x = L + (U - L) * sigmoid(u)
 *                     log|J| = sum(log(U - L) - softplus(-u) - softplus(u))
 *
 * (log sigmoid(u) + log sigmoid(-u) = -softplus(-u) - softplus(u), which
 * stays finite for large |u|.)  Every node made here is marked with the
 * parameter (kiln_node.param) so the printer writes them back as the one
 * `param` line they came from.
 */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One bound as a node: the named scalar `ref`, or a new literal. */
static kiln_value bound_node(kiln_graph *g, double v, kiln_value ref,
                             kiln_err *err)
{
    if (ref >= 0)
        return ref;
    double ip;
    kiln_literal_kind k = modf(v, &ip) == 0.0 && fabs(v) <= 9007199254740992.0
                              ? KILN_LIT_INT : KILN_LIT_FLOAT;
    return kiln_graph_literal(g, v, k, err);
}

static kiln_value op1(kiln_graph *g, const char *op, kiln_value a,
                      kiln_err *err)
{
    return a < 0 ? -1 : kiln_graph_op(g, op, 1, &a, NULL, 0, err);
}

static kiln_value op2(kiln_graph *g, const char *op, kiln_value a,
                      kiln_value b, kiln_err *err)
{
    kiln_value in[2] = {a, b};
    return a < 0 || b < 0 ? -1 : kiln_graph_op(g, op, 2, in, NULL, 0, err);
}

static int check_ref(kiln_graph *g, const char *name, kiln_value ref,
                     kiln_err *err)
{
    if (ref < 0)
        return 0;
    if (ref >= g->n_nodes || !g->nodes[ref].name ||
        (g->nodes[ref].op != KILN_OP_CONST &&
         g->nodes[ref].op != KILN_OP_SHARED))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "param '%s': a bound must be a number or the "
                           "name of a const or shared value", name);
    const kiln_node *n = &g->nodes[ref];
    if (n->type.dtype == KILN_BOOL)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "param '%s': bound '%s' must have a numeric "
                           "dtype, not bool", name, n->name);
    if (n->type.rank != 0) {
        char b[128];
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "param '%s': bound '%s' must be a scalar, got "
                           "shape %s", name, n->name,
                           kiln_ir_shape_str(g, n->type.rank, n->type.dims,
                                             b, sizeof b));
    }
    return 0;
}

static int push_param(kiln_graph *g, const kiln_param_rec *r, kiln_err *err)
{
    if (g->n_params == g->cap_params) {
        int cap = g->cap_params ? 2 * g->cap_params : 4;
        kiln_param_rec *p = realloc(g->params, sizeof *p * (size_t)cap);
        if (!p)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        g->params = p;
        g->cap_params = cap;
    }
    g->params[g->n_params] = *r;
    if (!(g->params[g->n_params].name = malloc(strlen(r->name) + 1)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    strcpy(g->params[g->n_params].name, r->name);
    g->n_params++;
    return 0;
}

kiln_value kiln_graph_param(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, double lower,
                            kiln_value lower_ref, double upper,
                            kiln_value upper_ref, kiln_err *err)
{
    if (!g || !name) {
        kiln_seterr(err, KILN_ERR_ARG, "param: NULL argument");
        return -1;
    }
    if (dt != KILN_F64 && dt != KILN_F32) {
        kiln_seterr(err, KILN_ERR_TYPE,
                    "param '%s': dtype %s: a parameter is f64 or f32", name,
                    kiln_dtype_name(dt));
        return -1;
    }
    if (check_ref(g, name, lower_ref, err) ||
        check_ref(g, name, upper_ref, err))
        return -1;
    if ((lower_ref < 0 && isnan(lower)) || (upper_ref < 0 && isnan(upper))) {
        kiln_seterr(err, KILN_ERR_ARG, "param '%s': a bound is NaN", name);
        return -1;
    }
    int has_lo = lower_ref >= 0 || lower > -INFINITY;
    int has_hi = upper_ref >= 0 || upper < INFINITY;
    if (lower_ref < 0 && upper_ref < 0 && has_lo && has_hi &&
        !(lower < upper)) {
        kiln_seterr(err, KILN_ERR_ARG,
                    "param '%s': lower bound %g is not below the upper "
                    "bound %g", name, lower, upper);
        return -1;
    }
    /* the transform divides by (and the Jacobian logs) upper - lower:
     * a width that overflows gives inf and NaN */
    if (lower_ref < 0 && upper_ref < 0 && has_lo && has_hi &&
        !isfinite(upper - lower)) {
        kiln_seterr(err, KILN_ERR_ARG,
                    "param '%s': upper bound %g minus lower bound %g "
                    "overflows (the width must be finite)", name, upper,
                    lower);
        return -1;
    }
    kiln_param_rec r = {(char *)name, -1, -1, -1, has_lo ? lower_ref : -1,
                        has_hi ? upper_ref : -1, has_lo ? lower : -INFINITY,
                        has_hi ? upper : INFINITY};
    int first = g->n_nodes;
    int idx = g->n_params + 1;
    if (!has_lo && !has_hi) {
        r.unc = r.value = kiln_graph_input(g, name, dt, rank, dims, err);
        if (r.unc < 0)
            return -1;
    } else {
        size_t nl = strlen(name);
        char *uname = malloc(nl + 5);
        if (!uname) {
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            return -1;
        }
        memcpy(uname, name, nl);
        memcpy(uname + nl, "_unc", 5);
        if (kiln_graph_lookup(g, name) >= 0) {
            kiln_seterr(err, KILN_ERR_NAME, "duplicate name '%s'", name);
            free(uname);
            return -1;
        }
        r.unc = kiln_graph_input(g, uname, dt, rank, dims, err);
        free(uname);
        if (r.unc < 0)
            return -1;
        kiln_value u = r.unc, x, lj;
        if (has_lo && has_hi) {
            kiln_value lo = bound_node(g, r.lower, r.lower_ref, err);
            kiln_value hi = bound_node(g, r.upper, r.upper_ref, err);
            kiln_value w = op2(g, "sub", hi, lo, err);
            x = op2(g, "add", lo, op2(g, "mul", w, op1(g, "sigmoid", u, err),
                                      err), err);
            kiln_value sp = op2(g, "add", op1(g, "softplus",
                                              op1(g, "neg", u, err), err),
                                op1(g, "softplus", u, err), err);
            lj = op2(g, "sub", op1(g, "log", w, err), sp, err);
        } else if (has_lo) {
            kiln_value lo = bound_node(g, r.lower, r.lower_ref, err);
            x = op2(g, "add", lo, op1(g, "exp", u, err), err);
            lj = u;
        } else {
            kiln_value hi = bound_node(g, r.upper, r.upper_ref, err);
            x = op2(g, "sub", hi, op1(g, "exp", u, err), err);
            lj = u;
        }
        if (x >= 0 && g->nodes[x].type.dtype != dt) {
            kiln_attr a = {.key = "dtype", .kind = KILN_ATTR_DTYPE, .i = dt};
            x = kiln_graph_op(g, "cast", 1, &x, &a, 1, err);
        }
        if (lj >= 0 && rank > 0)
            lj = op1(g, "sum", lj, err);
        if (x < 0 || lj < 0)
            return -1;
        if (kiln_graph_set_name(g, x, name, err))
            return -1;
        r.value = x;
        r.logjac = lj;
    }
    if (push_param(g, &r, err))
        return -1;
    for (int i = first; i < g->n_nodes; i++)
        g->nodes[i].param = idx;
    return r.value;
}

int kiln_graph_n_params(const kiln_graph *g)
{
    return g ? g->n_params : 0;
}

int kiln_graph_param_info(const kiln_graph *g, int i, const char **name,
                          kiln_value *unc_input, kiln_value *value,
                          kiln_value *log_jacobian)
{
    if (!g || i < 0 || i >= g->n_params)
        return KILN_ERR_ARG;
    const kiln_param_rec *r = &g->params[i];
    if (name)
        *name = r->name;
    if (unc_input)
        *unc_input = r->unc;
    if (value)
        *value = r->value;
    if (log_jacobian)
        *log_jacobian = r->logjac;
    return 0;
}

int kiln_graph_set_output_kind(kiln_graph *g, const char *name, int kind,
                               kiln_err *err)
{
    if (!g || !name)
        return kiln_seterr(err, KILN_ERR_ARG, "output kind: NULL argument");
    if (kind < KILN_OUTPUT_PLAIN || kind > KILN_OUTPUT_GQ)
        return kiln_seterr(err, KILN_ERR_ARG, "output '%s': bad kind %d",
                           name, kind);
    for (int k = 0; k < g->n_outputs; k++)
        if (strcmp(g->outputs[k].name, name) == 0) {
            g->outputs[k].kind = kind;
            return 0;
        }
    return kiln_seterr(err, KILN_ERR_NAME, "no output named '%s'", name);
}

int kiln_graph_output_kind(const kiln_graph *g, const char *name)
{
    if (!g || !name)
        return 0;
    for (int k = 0; k < g->n_outputs; k++)
        if (strcmp(g->outputs[k].name, name) == 0)
            return g->outputs[k].kind;
    return 0;
}
