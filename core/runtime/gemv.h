/*
 * gemv.h — kiln's own matrix-vector loop and the per-shape choice between
 * it and BLAS (gemv.c, prefix kiln_gemv_); the BLAS in use and its threads
 * (blas.c, prefix kiln_blas_).
 *
 * A matrix-vector product in gemv form: A is a row-major rows x cols
 * matrix with leading dimension lda (>= cols), and
 *   trans 0:  y[i] = alpha * sum_j A[i,j] x[j*incx] + beta * y[i*incy],  i < rows
 *   trans 1:  y[j] = alpha * sum_i A[i,j] x[i*incx] + beta * y[j*incy],  j < cols
 * (beta 0: y is not read).  A regression's design matrix X (n x k) gives
 * X b as trans 0 and the gradient's X^T g as trans 1, both with cols = k,
 * the narrow side: that is the side the choice looks at.
 */
#ifndef KILN_CORE_GEMV_H
#define KILN_CORE_GEMV_H

#include <stdint.h>

/* The widest matrix (cols) the loop takes: its sums for trans 1 live in a
 * stack array of this many elements. */
#define KILN_GEMV_LOOP_COLS 512

/* Which path matrix-vector products take (policy `blas.gemv`). */
enum {
    KILN_GEMV_AUTO = 0, /* the measured table below, per shape */
    KILN_GEMV_BLAS = 1, /* always BLAS */
    KILN_GEMV_LOOP = 2  /* kiln's loop whenever it can (cols <= KILN_GEMV_LOOP_COLS) */
};

/* The choice for one function: mode and, for KILN_GEMV_AUTO, the widest
 * cols the loop takes for trans 0 and trans 1 (-1: the built-in table of
 * the BLAS in use, kiln_gemv_default_max_cols). */
typedef struct kiln_gemv_conf {
    int mode;
    int64_t max_cols[2];
} kiln_gemv_conf;

/* The BLAS kiln runs, found once per process (thread-safe). */
typedef struct kiln_blas_info {
    int openblas;          /* 1: OpenBLAS (openblas_get_config is there) */
    const char *library;   /* the file cblas_dgemm comes from, or "?" */
    const char *config;    /* openblas_get_config(), or "" */
    int threads;           /* openblas_get_num_threads() after kiln's
                              setting, or 0 when not OpenBLAS */
    int threads_set;       /* 1 when kiln set the thread count */
    int gemv_env;          /* $KILN_GEMV: KILN_GEMV_AUTO/BLAS/LOOP, which
                              overrides every function's choice (for
                              benchmarks), or -1 when unset */
} kiln_blas_info;

/* The BLAS in use.  The first call (any thread) also applies kiln's thread
 * default: with OpenBLAS and none of OPENBLAS_NUM_THREADS,
 * GOTO_NUM_THREADS, OMP_NUM_THREADS in the environment, BLAS calls run on
 * the calling thread (openblas_set_num_threads(1)); docs/backends.md
 * "BLAS".  Never NULL; the strings live as long as the process. */
const kiln_blas_info *kiln_blas_get(void);

/* Set OpenBLAS's thread count (n >= 1) when OpenBLAS is in use; returns 1
 * when it was set, 0 otherwise.  Process-wide: OpenBLAS has one count. */
int kiln_blas_set_threads(int n);

/* The built-in table: the widest cols for which kiln's loop beats the BLAS
 * (openblas: 1 for OpenBLAS on one thread, 0 for the reference BLAS or
 * another) for trans 0 and 1, measured with bench/bench_gemv.c (make
 * bench-dot; docs/backends.md "BLAS"). */
int64_t kiln_gemv_default_max_cols(int openblas, int trans);

/* ... and the narrowest (below it the BLAS wins: OpenBLAS at 2 and 3
 * columns).  A policy threshold (kiln_gemv_conf.max_cols) replaces both. */
int64_t kiln_gemv_default_min_cols(int openblas);

/* 1 when the product (gemv form above) goes to kiln's loop under conf
 * (NULL: KILN_GEMV_AUTO with the built-in table of that BLAS). */
int kiln_gemv_use_loop(const kiln_gemv_conf *conf, int openblas, int trans,
                       int64_t rows, int64_t cols);

/* kiln's loop (no BLAS involved), for cols <= KILN_GEMV_LOOP_COLS, any
 * rows >= 0, lda >= cols, any non-zero incx/incy.  Sums in a different
 * order from BLAS and from the interpreter's triple loop (several
 * accumulators), so results agree within rounding. */
void kiln_gemv_loop_d(int trans, int64_t rows, int64_t cols, double alpha,
                      const double *a, int64_t lda, const double *x,
                      int64_t incx, double beta, double *y, int64_t incy);
void kiln_gemv_loop_s(int trans, int64_t rows, int64_t cols, float alpha,
                      const float *a, int64_t lda, const float *x,
                      int64_t incx, float beta, float *y, int64_t incy);

#endif
