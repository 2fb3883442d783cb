/* bench/bench_graph.c — a .kg graph's call timed the way the C floors time
 * theirs (make bench-floors, bench/floors.sh; issue 27): kiln_function_call
 * in a C loop at one point, the median over 7 blocks of the mean time of
 * NCALLS calls.  `kiln run --repeat` times every call with its own pair of
 * clock reads instead, which on this kind of VM adds ~30 ns to each call's
 * median (kvm-clock): most of a microsecond model's gap to its floor.
 *
 * usage: bench_graph MODEL.kg INPUTS NCALLS
 *   INPUTS: every input's values flattened in declaration order (f64
 *   inputs only), whitespace-separated — the floors' input file.
 * Compiles with $KILN_BACKEND or the policy (tiers off: what the backend
 * gives before the first call), prints every output "NAME v1 v2 ..." at
 * %.17g and then "us_per_call T".  $KILN_BENCH_CPU_CLOCK=1 times with
 * the thread's CPU clock instead of the wall clock (as the floors do). */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"

#include <time.h>

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double now(int cpu)
{
    struct timespec t;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_graph MODEL.kg INPUTS NCALLS\n");
        return 2;
    }
    long calls = atol(argv[3]);
    if (calls < 1)
        calls = 1;
    kiln_err e = {0, ""};
    kiln_graph *g = kiln_parse_file(argv[1], &e);
    if (!g) {
        fprintf(stderr, "bench_graph: %s\n", e.message);
        return 1;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.quiet = 1;
    o.model_path = argv[1];
    o.tiers = KILN_TIERS_OFF;
    kiln_function *f = kiln_compile(g, &o, &e);
    kiln_graph_free(g);
    if (!f) {
        fprintf(stderr, "bench_graph: %s\n", e.message);
        return 1;
    }
    int ni = kiln_function_n_inputs(f), no = kiln_function_n_outputs(f);
    kiln_tensor *in = calloc((size_t)ni + 1, sizeof *in);
    kiln_tensor *out = calloc((size_t)no + 1, sizeof *out);
    FILE *fp = fopen(argv[2], "r");
    if (!in || !out || !fp) {
        fprintf(stderr, "bench_graph: cannot read %s\n", argv[2]);
        return 1;
    }
    for (int i = 0; i < ni; i++) {
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK], n = 1;
        kiln_function_input_type(f, i, &dt, &rank, dims, NULL);
        for (int d = 0; d < rank; d++) {
            if (dims[d] < 0) {
                fprintf(stderr, "bench_graph: input '%s' has a symbolic dim\n",
                        kiln_function_input_name(f, i));
                return 1;
            }
            in[i].shape[d] = dims[d];
            n *= dims[d];
        }
        if (dt != KILN_F64) {
            fprintf(stderr, "bench_graph: input '%s' is not f64\n",
                    kiln_function_input_name(f, i));
            return 1;
        }
        double *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
        for (int64_t k = 0; k < n; k++)
            if (!v || fscanf(fp, "%lf", &v[k]) != 1) {
                fprintf(stderr, "bench_graph: %s is short\n", argv[2]);
                return 1;
            }
        in[i].dtype = KILN_F64;
        in[i].rank = rank;
        in[i].data = v;
    }
    fclose(fp);
    if (kiln_function_call(f, in, out, &e)) {
        fprintf(stderr, "bench_graph: %s\n", e.message);
        return 1;
    }
    for (int j = 0; j < no; j++) {
        int64_t n = 1;
        for (int d = 0; d < out[j].rank; d++)
            n *= out[j].shape[d];
        printf("%s", kiln_function_output_name(f, j));
        for (int64_t k = 0; k < n; k++)
            printf(" %.17g", out[j].dtype == KILN_F64
                                 ? ((const double *)out[j].data)[k] : 0.0);
        printf("\n");
    }
    const char *ce = getenv("KILN_BENCH_CPU_CLOCK");
    int cpu = ce && *ce == '1';
    double t[7];
    for (int b = 0; b < 7; b++) {
        double t0 = now(cpu);
        for (long c = 0; c < calls; c++)
            kiln_function_call(f, in, out, NULL);
        t[b] = (now(cpu) - t0) / (double)calls * 1e6;
    }
    qsort(t, 7, sizeof t[0], bench_cmp_double);
    printf("us_per_call %.6g\n", t[3]);
    for (int i = 0; i < ni; i++)
        free((void *)in[i].data);
    free(in);
    free(out);
    kiln_function_free(f);
    return 0;
}
