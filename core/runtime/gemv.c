/*
 * gemv.c — kiln's own matrix-vector loop and the per-shape choice
 * between it and BLAS (core/runtime/blas.c: which BLAS, its threads).
 * Nothing here calls BLAS, so bench/bench_gemv.c compiles this file beside
 * the BLAS libraries it loads.
 *
 * The loop is written for the tall-narrow products of regressions (n x k
 * design matrices, n in 100..100000, k in 2..64), where a BLAS call's
 * fixed cost and the reference BLAS's one-accumulator loops lose to a
 * loop that keeps several independent sums in vector registers:
 *
 *   trans 0 (A x):    four rows at a time, one vector sum per row over the
 *                     contiguous columns, reduced across lanes at the end;
 *   trans 1 (A^T x):  four rows at a time added into a column-sum array
 *                     (contiguous, vectorised over columns), so each
 *                     element of the array is loaded and stored once per
 *                     four rows.
 *
 * The vector types are GCC's vector extensions (GCC and Clang), 32 bytes
 * wide.  On x86-64 with GCC the loop functions are built twice
 * (target_clones): for AVX2 and for the baseline (SSE2, two halves per
 * vector), and the dynamic loader picks by CPU — libkiln itself is built
 * for the baseline CPU.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "gemv.h"

#include <string.h>

/* ---- the loop ------------------------------------------------------- */

typedef double kiln_gemv_v4d __attribute__((vector_size(32)));
typedef float kiln_gemv_v8f __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) \
    && defined(__ELF__) && !defined(__SANITIZE_THREAD__)
#define KILN_GEMV_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KILN_GEMV_CLONES
#endif

/* Unaligned vector load and store (memcpy becomes one move). */
#define KILN_GEMV_LD(V, p) ({ V v_; memcpy(&v_, (p), sizeof v_); v_; })
#define KILN_GEMV_ST(V, p, v) do { V t_ = (v); memcpy((p), &t_, sizeof t_); } while (0)

/* y = alpha * s + beta * y, y not read when beta is 0. */
#define KILN_GEMV_OUT(T, yp, s) \
    (*(yp) = (T)(alpha * (s) + (beta == 0 ? (T)0 : beta * *(yp))))

/* The body for element type T, vector type V of W lanes. */
#define KILN_GEMV_BODY(T, V, W)                                               \
    if (rows < 0 || cols <= 0 || cols > KILN_GEMV_LOOP_COLS)                  \
        return;                                                               \
    if (trans == 0) {                                                         \
        T xbuf[KILN_GEMV_LOOP_COLS];                                          \
        if (incx != 1) {                                                      \
            for (int64_t j = 0; j < cols; j++)                                \
                xbuf[j] = x[j * incx];                                        \
            x = xbuf;                                                         \
        }                                                                     \
        int64_t i = 0;                                                        \
        if (cols < W) { /* narrower than a vector: plain sums, no lanes */    \
            for (; i < rows; i++) {                                           \
                const T *a0 = a + i * lda;                                    \
                T t0 = a0[0] * x[0];                                          \
                for (int64_t j = 1; j < cols; j++)                            \
                    t0 += a0[j] * x[j];                                       \
                KILN_GEMV_OUT(T, y + i * incy, t0);                           \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        for (; i + 4 <= rows; i += 4) {                                       \
            const T *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda,        \
                    *a3 = a2 + lda;                                           \
            V s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};                         \
            int64_t j = 0;                                                    \
            for (; j + W <= cols; j += W) {                                   \
                V xv = KILN_GEMV_LD(V, x + j);                                \
                s0 += KILN_GEMV_LD(V, a0 + j) * xv;                           \
                s1 += KILN_GEMV_LD(V, a1 + j) * xv;                           \
                s2 += KILN_GEMV_LD(V, a2 + j) * xv;                           \
                s3 += KILN_GEMV_LD(V, a3 + j) * xv;                           \
            }                                                                 \
            T t0 = 0, t1 = 0, t2 = 0, t3 = 0;                                 \
            for (int l = 0; l < W; l++) {                                     \
                t0 += s0[l]; t1 += s1[l]; t2 += s2[l]; t3 += s3[l];           \
            }                                                                 \
            for (; j < cols; j++) {                                           \
                t0 += a0[j] * x[j]; t1 += a1[j] * x[j];                       \
                t2 += a2[j] * x[j]; t3 += a3[j] * x[j];                       \
            }                                                                 \
            KILN_GEMV_OUT(T, y + i * incy, t0);                                  \
            KILN_GEMV_OUT(T, y + (i + 1) * incy, t1);                            \
            KILN_GEMV_OUT(T, y + (i + 2) * incy, t2);                            \
            KILN_GEMV_OUT(T, y + (i + 3) * incy, t3);                            \
        }                                                                     \
        for (; i < rows; i++) {                                               \
            const T *a0 = a + i * lda;                                        \
            V s0 = {0};                                                       \
            int64_t j = 0;                                                    \
            for (; j + W <= cols; j += W)                                     \
                s0 += KILN_GEMV_LD(V, a0 + j) * KILN_GEMV_LD(V, x + j);       \
            T t0 = 0;                                                         \
            for (int l = 0; l < W; l++)                                       \
                t0 += s0[l];                                                  \
            for (; j < cols; j++)                                             \
                t0 += a0[j] * x[j];                                           \
            KILN_GEMV_OUT(T, y + i * incy, t0);                                  \
        }                                                                     \
        return;                                                               \
    }                                                                         \
    T acc[KILN_GEMV_LOOP_COLS];                                               \
    memset(acc, 0, (size_t)cols * sizeof acc[0]);                             \
    int64_t i = 0;                                                            \
    for (; i + 4 <= rows; i += 4) {                                           \
        const T *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda,            \
                *a3 = a2 + lda;                                               \
        T x0 = x[i * incx], x1 = x[(i + 1) * incx], x2 = x[(i + 2) * incx],   \
          x3 = x[(i + 3) * incx];                                             \
        V v0 = x0 - (V){0}, v1 = x1 - (V){0}, v2 = x2 - (V){0},               \
          v3 = x3 - (V){0};                                                   \
        int64_t j = 0;                                                        \
        for (; j + W <= cols; j += W) {                                       \
            V s = KILN_GEMV_LD(V, acc + j);                                   \
            s += (KILN_GEMV_LD(V, a0 + j) * v0 + KILN_GEMV_LD(V, a1 + j) * v1) \
               + (KILN_GEMV_LD(V, a2 + j) * v2 + KILN_GEMV_LD(V, a3 + j) * v3); \
            KILN_GEMV_ST(V, acc + j, s);                                      \
        }                                                                     \
        for (; j < cols; j++)                                                 \
            acc[j] += (a0[j] * x0 + a1[j] * x1) + (a2[j] * x2 + a3[j] * x3);  \
    }                                                                         \
    for (; i < rows; i++) {                                                   \
        const T *a0 = a + i * lda;                                            \
        T x0 = x[i * incx];                                                   \
        for (int64_t j = 0; j < cols; j++)                                    \
            acc[j] += a0[j] * x0;                                             \
    }                                                                         \
    for (int64_t j = 0; j < cols; j++)                                        \
        KILN_GEMV_OUT(T, y + j * incy, acc[j]);

KILN_GEMV_CLONES
void kiln_gemv_loop_d(int trans, int64_t rows, int64_t cols, double alpha,
                      const double *a, int64_t lda, const double *x,
                      int64_t incx, double beta, double *y, int64_t incy)
{
    KILN_GEMV_BODY(double, kiln_gemv_v4d, 4)
}

KILN_GEMV_CLONES
void kiln_gemv_loop_s(int trans, int64_t rows, int64_t cols, float alpha,
                      const float *a, int64_t lda, const float *x,
                      int64_t incx, float beta, float *y, int64_t incy)
{
    KILN_GEMV_BODY(float, kiln_gemv_v8f, 8)
}

/* ---- the choice ----------------------------------------------------- */

int64_t kiln_gemv_default_max_cols(int openblas, int trans)
{
    /* measured on this project's 2-core AMD EPYC VM with bench_gemv (make
     * bench-dot; docs/backends.md "BLAS"): the reference BLAS loses to the
     * loop at every shape measured (its gemv keeps one sum and is not
     * vectorised), so the loop takes every product it can; OpenBLAS on one
     * thread loses to it from 4 up to 64 columns for both products and is
     * level with it or ahead from 128 on, and ahead below 4 columns */
    (void)trans;
    return openblas ? 64 : KILN_GEMV_LOOP_COLS;
}

int64_t kiln_gemv_default_min_cols(int openblas)
{
    return openblas ? 4 : 1;
}

int kiln_gemv_use_loop(const kiln_gemv_conf *conf, int openblas, int trans,
                       int64_t rows, int64_t cols)
{
    (void)rows;  /* the crossovers measured depend on the columns alone */
    if (cols <= 0 || cols > KILN_GEMV_LOOP_COLS)
        return 0;
    int mode = conf ? conf->mode : KILN_GEMV_AUTO;
    if (mode == KILN_GEMV_BLAS)
        return 0;
    if (mode == KILN_GEMV_LOOP)
        return 1;
    int t = trans != 0;
    if (conf && conf->max_cols[t] >= 0)   /* the policy's threshold */
        return cols <= conf->max_cols[t];
    return cols >= kiln_gemv_default_min_cols(openblas)
        && cols <= kiln_gemv_default_max_cols(openblas, t);
}
