/*
 * safetensors.h — what the .kg parser needs of the safetensors reader
 * (core/front/safetensors.c; the reader itself is public, <kiln/io.h>).
 * Internal to libkiln.
 */
#ifndef KILN_SAFETENSORS_H
#define KILN_SAFETENSORS_H

#include <kiln/io.h>

#include "ir.h"

/* Bind shared value v of g (declared without a value) to tensor `name`
 * of st, in place: v holds a reference to st's mapping, which outlives
 * st while v (or a copy of it) lives.  Errors: kiln_safetensors_get's,
 * kiln_ir_bind_shared_ref's (prefixed "<path>: tensor 'name': "). */
int kiln_safetensors_bind(kiln_graph *g, kiln_value v, kiln_safetensors *st,
                          const char *name, kiln_err *err);

/* kiln_graph_bind_safetensors under read options `opt` (NULL:
 * defaults).  strict 0: an unbound shared value without a tensor is left
 * unbound (kiln run --weights with --data).  *n_bound (when not NULL)
 * counts the values bound.  Returns 0 or an error code. */
int kiln_safetensors_bind_graph(kiln_graph *g, const char *path,
                                const kiln_read_options *opt, int strict,
                                int *n_bound, kiln_err *err);

#endif
