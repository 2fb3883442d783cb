/*
 * trace.c — the first value that stops being finite (trace.h).
 */
#include "trace.h"
#include "ir.h"
#include <kiln/cache.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Element i of a float tensor as a double. */
static double elem(const kiln_tensor *t, int64_t i)
{
    return t->dtype == KILN_F32 ? (double)((const float *)t->data)[i]
                                : ((const double *)t->data)[i];
}

/* v as %.6g, NaN always "nan" (printf may write "-nan"). */
static const char *num(char *buf, size_t size, double v)
{
    if (isnan(v))
        snprintf(buf, size, "nan");
    else
        snprintf(buf, size, "%.6g", v);
    return buf;
}

static int is_float(kiln_dtype dt)
{
    return dt == KILN_F64 || dt == KILN_F32;
}

/* Element i of any tensor as a double (integers may round). */
static double any_elem(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_F64: case KILN_F32: return elem(t, i);
    case KILN_I64: return (double)((const int64_t *)t->data)[i];
    case KILN_I32: return (double)((const int32_t *)t->data)[i];
    default: return (double)((const uint8_t *)t->data)[i];
    }
}

static void print_shape(FILE *o, const kiln_tensor *t)
{
    fprintf(o, "%s[", kiln_dtype_name(t->dtype));
    for (int k = 0; k < t->rank; k++)
        fprintf(o, "%s%lld", k ? "," : "", (long long)t->shape[k]);
    fputc(']', o);
}

/* "f64[3] = [1, 2, inf] (min 1, max 2 over the finite; 1 not finite)" */
static void describe(FILE *o, const kiln_tensor *t)
{
    int64_t n = kiln_shape_numel(t->rank, t->shape), bad = 0, good = 0;
    char b[40];
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = any_elem(t, i);
        if (!isfinite(v)) {
            bad++;
            continue;
        }
        good++;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    print_shape(o, t);
    fputs(" = ", o);
    if (t->rank)
        fputc('[', o);
    for (int64_t i = 0; i < n && i < 4; i++)
        fprintf(o, "%s%s", i ? ", " : "", num(b, sizeof b, any_elem(t, i)));
    if (n > 4)
        fputs(", ...", o);
    if (t->rank)
        fputc(']', o);
    if (n > 1 && good)
        fprintf(o, " (min %.6g, max %.6g over the finite elements)", lo, hi);
    if (bad)
        fprintf(o, " (%lld of %lld not finite)", (long long)bad,
                (long long)n);
}

static const char *value_name(const kiln_graph *g, const int *tmp, int v,
                              char *buf, size_t size)
{
    if (g->nodes[v].name)
        return g->nodes[v].name;
    if (g->nodes[v].op == KILN_OP_LITERAL)
        snprintf(buf, size, "%.17g", g->nodes[v].value);
    else
        snprintf(buf, size, "t%d", tmp ? tmp[v] : v);
    return buf;
}

int kiln_trace_nonfinite(const kiln_graph *g, const char *file,
                         const kiln_tensor *inputs, const kiln_value *roots,
                         int n_roots, FILE *out, int *found, kiln_err *err)
{
    if (!g || !out || !found)
        return kiln_seterr(err, KILN_ERR_ARG, "trace: NULL argument");
    *found = 0;
    int n = g->n_nodes, rc = KILN_ERR_NOMEM;
    char *reach = calloc((size_t)(n ? n : 1), 1);
    int *slot = malloc(sizeof *slot * (size_t)(n ? n : 1));
    int *tmp = kiln_graph_temp_names(g);
    kiln_graph *c = NULL;
    kiln_function *f = NULL;
    kiln_tensor *res = NULL;
    if (!reach || !slot || !tmp) {
        kiln_seterr(err, KILN_ERR_NOMEM, "trace: out of memory");
        goto done;
    }
    for (int k = 0; k < g->n_outputs; k++)
        reach[g->outputs[k].value] = 1;
    for (int k = 0; k < n_roots; k++)
        if (roots[k] >= 0 && roots[k] < n)
            reach[roots[k]] = 1;
    for (int i = n - 1; i >= 0; i--)
        for (int k = 0; reach[i] && k < g->nodes[i].n_in; k++)
            reach[g->nodes[i].in[k]] = 1;
    if (!(c = kiln_ir_clone(g, err)))
        goto done;
    int n_out = g->n_outputs;
    for (int i = 0; i < n; i++) {
        slot[i] = -1;
        if (!reach[i] || g->nodes[i].op == KILN_OP_LITERAL)
            continue;
        char nm[40];
        snprintf(nm, sizeof nm, "trace__%d", i);
        if (kiln_graph_output(c, nm, i, err)) {
            rc = err ? err->code : KILN_ERR_ARG;
            goto done;
        }
        slot[i] = n_out++;
    }
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = "interp";
    opt.passes = "none";
    opt.cache_mode = KILN_CACHE_MODE_OFF;
    opt.tiers = KILN_TIERS_OFF;
    opt.quiet = 1;
    opt.jobs = 1;
    if (!(f = kiln_compile(c, &opt, err))) {
        rc = err ? err->code : KILN_ERR_BACKEND;
        goto done;
    }
    if (!(res = calloc((size_t)(n_out ? n_out : 1), sizeof *res))) {
        kiln_seterr(err, KILN_ERR_NOMEM, "trace: out of memory");
        goto done;
    }
    if ((rc = kiln_function_call(f, inputs, res, err)) != 0)
        goto done;
    rc = 0;
    for (int i = 0; i < n; i++) {
        if (slot[i] < 0 || !is_float(res[slot[i]].dtype))
            continue;
        const kiln_tensor *t = &res[slot[i]];
        int64_t m = kiln_shape_numel(t->rank, t->shape), at = -1;
        for (int64_t e = 0; e < m && at < 0; e++)
            if (!isfinite(elem(t, e)))
                at = e;
        if (at < 0)
            continue;
        const kiln_node *nd = &g->nodes[i];
        const kiln_op_info *info = kiln_ir_op_info(nd->op);
        char b[64], vb[40];
        *found = 1;
        fputs("trace-nonfinite: ", out);
        if (nd->line > 0)
            fprintf(out, "%s:%d: ", file ? file : "<graph>", nd->line);
        else
            fputs("(a node made by kiln, no .kg line): ", out);
        const char *what = nd->op == KILN_OP_INPUT ? "input"
                           : nd->op == KILN_OP_SHARED ? "shared value"
                           : nd->op == KILN_OP_CONST ? "const" : NULL;
        if (what) {
            fprintf(out, "%s '%s' holds %s at [%lld]: ", what,
                    value_name(g, tmp, i, b, sizeof b),
                    num(vb, sizeof vb, elem(t, at)), (long long)at);
            describe(out, t);
            fputc('\n', out);
            break;
        }
        fprintf(out, "'%s' = %s(", value_name(g, tmp, i, b, sizeof b),
                info ? info->name : "?");
        for (int k = 0; k < nd->n_in; k++)
            fprintf(out, "%s%s", k ? ", " : "",
                    value_name(g, tmp, nd->in[k], b, sizeof b));
        fprintf(out, ") is %s at [%lld]: ", num(vb, sizeof vb, elem(t, at)),
                (long long)at);
        describe(out, t);
        fputc('\n', out);
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->in[k];
            fprintf(out, "trace-nonfinite:   operand %d '%s': ", k + 1,
                    value_name(g, tmp, v, b, sizeof b));
            if (slot[v] >= 0)
                describe(out, &res[slot[v]]);
            else
                fprintf(out, "literal %.17g", g->nodes[v].value);
            fputc('\n', out);
        }
        break;
    }
    if (!*found)
        fputs("trace-nonfinite: every value is finite\n", out);
done:
    kiln_function_free(f);   /* owns the outputs' data */
    free(res);
    kiln_graph_free(c);
    free(tmp);
    free(slot);
    free(reach);
    return rc;
}
