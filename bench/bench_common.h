/* bench/bench_common.h — what the bench_*.c programs share: a monotonic
 * clock in seconds and the qsort comparison of doubles their medians use.
 * Include after defining _POSIX_C_SOURCE (clock_gettime). */
#ifndef KILN_BENCH_COMMON_H
#define KILN_BENCH_COMMON_H
#include <time.h>

static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
