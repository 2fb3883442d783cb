/*
 * composite.h — composite ops: names such as normal_lpdf that
 * kiln_graph_op expands into ordinary nodes (docs/ops.md, "Composite
 * ops").  The graph never holds a composite node.
 */
#ifndef KILN_COMPOSITE_H
#define KILN_COMPOSITE_H

#include <kiln/graph.h>

/* The composite named `name`, or -1. */
int kiln_composite_lookup(const char *name);

/* How many composites there are, and the name of composite i. */
int kiln_composite_count(void);
const char *kiln_composite_name(int i);

/* Expand composite `c` over `in`.  Returns the final node; on error -1
 * with *err set, and g holds no node of the expansion. */
kiln_value kiln_composite_build(kiln_graph *g, int c, int n_in,
                                const kiln_value *in, const kiln_attr *attrs,
                                int n_attrs, kiln_err *err);

/* ---- the layer composites (composite_nn.c, issue 29) ----------------
 * One call of a layer composite: its graph, inputs and attributes (the
 * keys already checked against the table's list by
 * kiln_composite_build). */
typedef struct kiln_nn_call {
    kiln_graph *g;
    kiln_err *err;
    int n_in;
    const kiln_value *in;
    const kiln_attr *attrs;
    int n_attrs;
    /* the builder by name (kiln_graph_op; a pointer, so that
     * composite_nn.c does not use composite.c back) */
    kiln_value (*op)(kiln_graph *, const char *, int, const kiln_value *,
                     const kiln_attr *, int, kiln_err *);
} kiln_nn_call;

/* Each returns the expansion's last node, or -1 with *err set (the
 * caller prefixes the composite's name and drops the partial nodes).
 * Signatures and formulas: docs/ops.md "Layers (issue 29)". */
kiln_value kiln_nn_softmax(const kiln_nn_call *c);
kiln_value kiln_nn_log_softmax(const kiln_nn_call *c);
kiln_value kiln_nn_layer_norm(const kiln_nn_call *c);
kiln_value kiln_nn_rms_norm(const kiln_nn_call *c);
kiln_value kiln_nn_gelu(const kiln_nn_call *c);
kiln_value kiln_nn_silu(const kiln_nn_call *c);
kiln_value kiln_nn_rsqrt(const kiln_nn_call *c);
kiln_value kiln_nn_var(const kiln_nn_call *c);
kiln_value kiln_nn_arange(const kiln_nn_call *c);
kiln_value kiln_nn_argmax(const kiln_nn_call *c);
kiln_value kiln_nn_argmin(const kiln_nn_call *c);
kiln_value kiln_nn_repeat(const kiln_nn_call *c);
kiln_value kiln_nn_tile(const kiln_nn_call *c);
kiln_value kiln_nn_einsum(const kiln_nn_call *c);

/* tril/triu (op KILN_OP_TRIL/TRIU; c the call's graph, input, attributes
 * and builder) with `k=` or an f32 input: built here
 * as where(j <= i + k, x, 0) (triu: j >= i + k), keeping x's dtype, and
 * *out set (-1 on error, *err set); an f64/integer input with k = 0 is
 * the LINALG op (f64).  Returns 0 (*out untouched) for every other op:
 * kiln_graph_op builds it as usual. */
int kiln_composite_divert(const kiln_nn_call *c, int op, kiln_value *out);

#endif
