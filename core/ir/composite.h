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
                                const kiln_value *in, int n_attrs,
                                kiln_err *err);

#endif
