/*
 * recur_prog.c — the pass `recur`: a scan whose body computes rank-0
 * elementwise values only becomes one RECUR loop kernel with the body
 * fused in as its scalar program (include/kiln/backend.h,
 * KILN_KERNEL_RECUR, ABI 1.10).  Other bodies keep the host path
 * (core/runtime/recur.c: one call of the body's compiled function per
 * step).
 *
 * Stub at step 0 of issue 28's second half; filled in by the scan
 * engineer.
 */
#include "lower.h"
