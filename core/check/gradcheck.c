/*
 * gradcheck.c — compare the gradients a function computes with central
 * finite differences (kiln_function_check_grad; `kiln run --check-grad`).
 *
 * The rows are the gradients recorded in the function's graph (g->grads)
 * whose cost and result are outputs and whose wrt is an input.  One call
 * at the caller's point gives every analytic gradient; then each element
 * of each checked input is moved by +h and -h in a private copy of the
 * inputs, and every cost that has a row for that input is read, so one
 * pair of calls serves all the costs of an input.
 */
#include "ir.h"
#include "vm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct gc_row {
    int in_idx;          /* input index (declaration order) */
    int cost_out, grad_out;
    double *analytic;    /* the gradient at the caller's point */
    double *cp, *cm;     /* scratch: cost at +h and -h, per element */
} gc_row;

static double get_elem(const kiln_tensor *t, int64_t i)
{
    return t->dtype == KILN_F32 ? (double)((const float *)t->data)[i]
                                : ((const double *)t->data)[i];
}

/* Store v at element i in t's dtype; returns the value as stored. */
static double put_elem(kiln_tensor *t, int64_t i, double v)
{
    if (t->dtype == KILN_F32) {
        float *p = t->data;
        p[i] = (float)v;
        return p[i];
    }
    double *p = t->data;
    p[i] = v;
    return p[i];
}

static int output_of(const kiln_graph *g, kiln_value v)
{
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k].value == v)
            return k;
    return -1;
}

/* The rows, deduplicated, in record order (malloc'd; *n set). */
static gc_row *collect_rows(const kiln_graph *g, int *n, kiln_err *err)
{
    *n = 0;
    gc_row *rows = calloc((size_t)(g->n_grads ? g->n_grads : 1),
                          sizeof *rows);
    if (!rows) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int r = 0; r < g->n_grads; r++) {
        const kiln_grad_rec *rec = &g->grads[r];
        if (rec->wrt < 0 || rec->wrt >= g->n_nodes ||
            g->nodes[rec->wrt].op != KILN_OP_INPUT)
            continue;
        int co = output_of(g, rec->cost), go = output_of(g, rec->result);
        if (co < 0 || go < 0)
            continue;
        int ii = 0;
        for (int v = 0; v < rec->wrt; v++)
            ii += g->nodes[v].op == KILN_OP_INPUT;
        int dup = 0;
        for (int k = 0; k < *n && !dup; k++)
            dup = rows[k].in_idx == ii && rows[k].cost_out == co &&
                  rows[k].grad_out == go;
        if (dup)
            continue;
        rows[*n].in_idx = ii;
        rows[*n].cost_out = co;
        rows[*n].grad_out = go;
        (*n)++;
    }
    return rows;
}

static void free_rows(gc_row *rows, int n)
{
    for (int k = 0; rows && k < n; k++) {
        free(rows[k].analytic);
        free(rows[k].cp);
        free(rows[k].cm);
    }
    free(rows);
}

static int is_float(kiln_dtype dt)
{
    return dt == KILN_F64 || dt == KILN_F32;
}

int kiln_function_check_grad(kiln_function *f, const kiln_tensor *inputs,
                             kiln_grad_check *out_rows, int max_rows,
                             int *n_rows, kiln_err *err)
{
    if (!f || !n_rows || max_rows < 0 || (!out_rows && max_rows > 0))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_check_grad: bad argument");
    const kiln_graph *g = kiln_vm_graph(f);
    int total = 0;
    gc_row *rows = collect_rows(g, &total, err);
    if (!rows)
        return KILN_ERR_NOMEM;
    *n_rows = total;
    int nr = total < max_rows ? total : max_rows;
    if (nr == 0) {
        free(rows);
        return 0;
    }
    int ni = kiln_function_n_inputs(f), no = kiln_function_n_outputs(f);
    int rc = 0;
    kiln_tensor *x = calloc((size_t)(ni ? ni : 1), sizeof *x);
    kiln_tensor *out = calloc((size_t)no, sizeof *out);
    if (!x || !out) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* the caller's point: validates the inputs, gives the analytic
     * gradients */
    if ((rc = kiln_function_call(f, inputs, out, err)))
        goto done;
    for (int r = 0; r < nr; r++) {
        gc_row *row = &rows[r];
        const kiln_tensor *it = &inputs[row->in_idx];
        const kiln_tensor *ct = &out[row->cost_out], *gt = &out[row->grad_out];
        int64_t n = kiln_shape_numel(it->rank, it->shape);
        int64_t gn = kiln_shape_numel(gt->rank, gt->shape);
        if (kiln_shape_numel(ct->rank, ct->shape) != 1 ||
            !is_float(ct->dtype)) {
            rc = kiln_seterr(err, KILN_ERR_SHAPE,
                             "check-grad: cost output '%s' is not a float "
                             "scalar", g->outputs[row->cost_out].name);
            goto done;
        }
        if (gn != n || !is_float(gt->dtype)) {
            rc = kiln_seterr(err, KILN_ERR_SHAPE,
                             "check-grad: gradient output '%s' has %lld %s "
                             "elements, input '%s' has %lld",
                             g->outputs[row->grad_out].name, (long long)gn,
                             kiln_dtype_name(gt->dtype),
                             kiln_function_input_name(f, row->in_idx),
                             (long long)n);
            goto done;
        }
        size_t sz = sizeof(double) * (size_t)(n ? n : 1);
        row->analytic = malloc(sz);
        row->cp = malloc(sz);
        row->cm = malloc(sz);
        if (!row->analytic || !row->cp || !row->cm) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int64_t k = 0; k < n; k++)
            row->analytic[k] = get_elem(gt, k);
    }
    /* a private copy of the inputs (the call above checked them) */
    for (int i = 0; i < ni; i++) {
        x[i] = inputs[i];
        size_t bytes = (size_t)kiln_shape_numel(x[i].rank, x[i].shape) *
                       kiln_dtype_size(x[i].dtype);
        x[i].data = malloc(bytes ? bytes : 1);
        if (!x[i].data) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (bytes)
            memcpy(x[i].data, inputs[i].data, bytes);
    }
    /* central differences, one input at a time */
    for (int i = 0; i < ni; i++) {
        int used = 0;
        for (int r = 0; r < nr && !used; r++)
            used = rows[r].in_idx == i;
        if (!used)
            continue;
        kiln_tensor *t = &x[i];
        int64_t n = kiln_shape_numel(t->rank, t->shape);
        double rel = t->dtype == KILN_F32 ? 1e-3 : 1e-6;
        for (int64_t k = 0; k < n; k++) {
            double x0 = get_elem(t, k);
            double h = rel * fmax(1.0, fabs(x0));
            double xs[2];
            for (int side = 0; side < 2; side++) {
                xs[side] = put_elem(t, k, side == 0 ? x0 + h : x0 - h);
                if ((rc = kiln_function_call(f, x, out, err))) {
                    kiln_err_prefix(err, "check-grad: at input '%s'[%lld] "
                                    "%s h: ", kiln_function_input_name(f, i),
                                    (long long)k, side == 0 ? "+" : "-");
                    goto done;
                }
                for (int r = 0; r < nr; r++) {
                    if (rows[r].in_idx != i)
                        continue;
                    double c = get_elem(&out[rows[r].cost_out], 0);
                    if (side == 0)
                        rows[r].cp[k] = c;
                    else
                        rows[r].cm[k] = c;
                }
            }
            /* the step actually taken, in the input's dtype */
            double step = xs[0] - xs[1];
            put_elem(t, k, x0);
            for (int r = 0; r < nr; r++) {
                if (rows[r].in_idx != i)
                    continue;
                /* cp now holds the numeric derivative */
                rows[r].cp[k] = (rows[r].cp[k] - rows[r].cm[k]) / step;
            }
        }
    }
    /* the worst error of each row */
    for (int r = 0; r < nr; r++) {
        const gc_row *row = &rows[r];
        kiln_grad_check *o = &out_rows[r];
        int64_t n = kiln_shape_numel(inputs[row->in_idx].rank,
                                     inputs[row->in_idx].shape);
        o->input = kiln_function_input_name(f, row->in_idx);
        o->output = kiln_function_output_name(f, row->cost_out);
        o->gradient = kiln_function_output_name(f, row->grad_out);
        o->max_error = 0;
        o->worst_index = -1;
        o->analytic = o->numeric = 0;
        for (int64_t k = 0; k < n; k++) {
            double a = row->analytic[k], d = row->cp[k];
            double e = fabs(a - d) / fmax(1.0, fabs(d));
            if (isnan(e) || !isfinite(a) || !isfinite(d))
                e = INFINITY;
            if (o->worst_index < 0 || e > o->max_error) {
                o->max_error = e;
                o->worst_index = k;
                o->analytic = a;
                o->numeric = d;
            }
        }
    }
    /* leave f's outputs as they are at the caller's point */
    rc = kiln_function_call(f, inputs, out, err);
done:
    for (int i = 0; x && i < ni; i++)
        free(x[i].data);
    free(x);
    free(out);
    free_rows(rows, total);
    return rc;
}
