/*
 * trace.h — where a value first stops being finite (kiln run / kiln
 * model --trace-nonfinite; docs/kiln.1).
 *
 * Internal to kiln: compiled into libkiln (the kiln_ prefix exports it)
 * for the kiln tool.
 */
#ifndef KILN_TRACE_H
#define KILN_TRACE_H

#include <stdio.h>
#include <kiln/kiln.h>
#include <kiln/graph.h>

/* Evaluate g at `inputs` (one tensor per input of g, in declaration
 * order, as kiln_function_call takes them) node by node on the
 * interpreter — a copy of g compiled with backend "interp", no rewrite
 * passes, no cache and no tiers, in which every value that an output of g
 * or one of the `n_roots` values `roots` depends on is an output — and
 * find the first of those values, in execution (node) order, with a
 * float dtype and a NaN or infinite element.
 *
 * When there is one, *found is 1 and `out` gets a report: a line
 * "trace-nonfinite: FILE:LINE: NAME = OP(...) is not finite: ..." (the
 * .kg line of the statement that made it when the parser made it, else
 * no line; NAME is the value's name or the tN of kiln check; `file` may
 * be NULL), then a line per operand: its name, dtype and shape, its first
 * values, min and max over the finite elements and how many are not
 * finite.  An input, shared value or constant that holds a non-finite
 * value is reported as such.  With none, *found is 0 and `out` gets one
 * line saying every value was finite.
 *
 * Returns 0, or an error of kiln_compile / kiln_function_call (on the
 * copy) or KILN_ERR_NOMEM with err set.  Not for large graphs: the copy
 * keeps every value.  Thread-safe for distinct graphs. */
int kiln_trace_nonfinite(const kiln_graph *g, const char *file,
                         const kiln_tensor *inputs, const kiln_value *roots,
                         int n_roots, FILE *out, int *found, kiln_err *err);

#endif
