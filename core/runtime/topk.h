/*
 * topk.h — the host's top_k kernel (issue 29; prefix kiln_topk_): the
 * op top_k (docs/ops.md "top_k") is a KILN_KERNEL_TOPK step that no
 * plugin compiles; the driver attaches this callable to it.
 */
#ifndef KILN_CORE_TOPK_H
#define KILN_CORE_TOPK_H

#include <kiln/backend.h>

/* A callable running a TOPK kernel along axis `axis` (>= 0) of its one
 * input x (f32 or f64 view, any strides): output 0 the k largest
 * elements of every row along the axis sorted descending, output 1 their
 * indices (i64), both x's shape with k along the axis (k is read from
 * output 0's shape).  Order: NaN first (largest), then by value, equal
 * values (and NaNs) by lower index first: torch.topk(sorted=True)'s
 * order, stable.  A binary heap of k per row: O(n log k) per row.  Each
 * call reads its views only (no state written): reentrant.  `label`
 * starts its messages ("top_k 'v'"; copied).  Returns 0 or
 * KILN_ERR_NOMEM.  It belongs to kiln_topk_backend. */
int kiln_topk_callable(int axis, const char *label, kiln_callable **out);

/* The pseudo backend "host_topk" owning those callables (supports TOPK
 * kernels only; never compiles: the driver attaches callables). */
extern const kiln_backend kiln_topk_backend;

#endif
