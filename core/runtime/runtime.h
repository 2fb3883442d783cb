/*
 * runtime.h — the host's runtime function table (prefix kiln_runtime_).
 *
 * Kernels call libm, the special functions and BLAS through a
 * kiln_runtime (include/kiln/backend.h) instead of resolving symbols
 * themselves, so one piece of generated code works in memory, loaded from
 * the cache, and in any process.
 */
#ifndef KILN_CORE_RUNTIME_H
#define KILN_CORE_RUNTIME_H

#include <kiln/backend.h>

#include "gemv.h"

/* The table: static, fully filled (version 6), valid for the life of the
 * process, safe to use from several threads at once.
 *
 * The gemm entries take row-major CBLAS arguments.  Unlike raw CBLAS they
 * never reach BLAS's error handler (the reference cblas_xerbla exits the
 * process): arguments BLAS would reject but that still describe a valid
 * product (a leading dimension smaller than BLAS wants for a matrix with
 * one row, dimensions above INT_MAX) are computed by a plain loop instead,
 * and negative dimensions do nothing.  A product with m = 1 or n = 1 (and
 * k > 0) is one matrix-vector product: kiln's own loop (core/runtime/
 * gemv.c) when the table's choice picks it for the shape, else one
 * cblas_dgemv / cblas_sgemv call (BLAS's gemm with n = 1 is several times
 * slower than its gemv).  This table's choice is the built-in one
 * (KILN_GEMV_AUTO with the table of the BLAS in use). */
const kiln_runtime *kiln_runtime_get(void);

/* A table like kiln_runtime_get's whose dgemm_rt / sgemm_rt choose
 * between BLAS and the loop by *conf (NULL or the built-in choice: the
 * static table itself).  Tables are interned: one per distinct conf,
 * kept for the life of the process (a process sees a handful of
 * policies), so the result may be kept as long as the static one.
 * Returns NULL only when out of memory.  Thread-safe. */
/* The table's lapack_run (core/runtime/linalg.c): one LINALG kernel's
 * operation over f64 views with leading batch axes; see the entry in
 * include/kiln/backend.h.  Thread-safe; mallocs its scratch per call. */
int kiln_runtime_lapack_run(const kiln_runtime *rt, uint32_t op,
                            uint32_t n_in, const kiln_view *in,
                            uint32_t n_out, const kiln_view *out,
                            char *errbuf, size_t errbuf_size);

const kiln_runtime *kiln_runtime_for(const kiln_gemv_conf *conf);

/* This thread's scratch buffer (core/runtime/linalg.c), grown to at least
 * n_doubles doubles (8-byte aligned words), or NULL when out of memory.
 * It only grows and is freed when the thread exits; lapack_run and
 * gemm_batched share it, so it is valid until this thread's next call
 * of either.  Not reentrant across those two. */
void *kiln_runtime_scratch(size_t n_doubles);

/* The table's gemm_batched (core/runtime/gemm_batched.c): a batched DOT
 * kernel's product; see the entry in include/kiln/backend.h. */
int kiln_runtime_gemm_batched(const kiln_runtime *rt, const kiln_view *a,
                              const kiln_view *b, const kiln_view *c,
                              char *errbuf, size_t errbuf_size);

#endif
