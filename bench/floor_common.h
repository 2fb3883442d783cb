/* bench/floor_common.h — shared by the hand-written C floors
 * (bench/floor_*.c, make bench-calls): read the inputs, print the outputs
 * at full precision, time many calls. */
#ifndef KILN_BENCH_FLOOR_COMMON_H
#define KILN_BENCH_FLOOR_COMMON_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* n doubles from PATH (whitespace-separated, the model's inputs flattened in
 * declaration order); exits with a message on a short or unreadable file */
static void floor_read_inputs(const char *path, double *v, int n)
{
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "floor: cannot open %s\n", path); exit(1); }
    for (int i = 0; i < n; i++)
        if (fscanf(f, "%lf", &v[i]) != 1) {
            fprintf(stderr, "floor: %s: expected %d numbers, found %d\n", path, n, i);
            exit(1);
        }
    fclose(f);
}

static void floor_print(const char *name, const double *v, int n)
{
    printf("%s", name);
    for (int i = 0; i < n; i++) printf(" %.17g", v[i]);
    printf("\n");
}

/* wall time; the calling thread's CPU time with $KILN_BENCH_CPU_CLOCK=1
 * (bench/floors.py on a loaded machine: time spent descheduled is left
 * out; caches and the other hyperthread still interfere) */
static double floor_now(void)
{
    static int cpu = -1;
    if (cpu < 0) {
        const char *e = getenv("KILN_BENCH_CPU_CLOCK");
        cpu = e && *e == '1';
    }
    struct timespec t;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* median over 7 blocks of the mean time of `calls` calls of body(), in µs */
#define FLOOR_TIME(calls, body)                                               \
    do {                                                                      \
        double blk_[7];                                                       \
        for (int b_ = 0; b_ < 7; b_++) {                                      \
            double t0_ = floor_now();                                         \
            for (long c_ = 0; c_ < (calls); c_++) {                           \
                body;                                                         \
                __asm__ volatile("" ::: "memory");                            \
            }                                                                 \
            blk_[b_] = (floor_now() - t0_) / (calls) * 1e6;                   \
        }                                                                     \
        for (int i_ = 1; i_ < 7; i_++)                                        \
            for (int j_ = i_; j_ > 0 && blk_[j_ - 1] > blk_[j_]; j_--) {      \
                double s_ = blk_[j_]; blk_[j_] = blk_[j_ - 1]; blk_[j_ - 1] = s_; \
            }                                                                 \
        printf("us_per_call %.6g\n", blk_[3]);                                \
    } while (0)
#endif
