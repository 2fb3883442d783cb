/*
 * mpi_stream.c — the memory read bandwidth each rank gets when R ranks
 * stream at once (make bench-mpi; docs/performance.md "MPI (issue 30)").
 * A gradient of a large regression reads its design matrix from memory
 * (X @ beta, then X^T r), so two ranks on two cores cannot be faster than
 * twice one rank *and* than the machine's two-core bandwidth over its
 * one-core bandwidth: this program measures that ceiling on the machine
 * the gradients ran on.
 *
 * usage: mpirun -np R mpi_stream [MEGABYTES_PER_RANK] [REPEATS]
 * Each rank fills its own array (first touch: its own memory), then all
 * ranks, after a barrier, sum their arrays REPEATS times; a rank's
 * bandwidth is bytes / its fastest pass.  Prints on rank 0:
 *   ranks=R mb=M gbs_rank_min=A gbs_rank_max=B gbs_total=C
 * where C is the sum over ranks of each rank's fastest-pass bandwidth.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

typedef double v4d __attribute__((vector_size(32)));

/* The sum of a[0..n): four independent vector sums (as kiln's gemv loop
 * keeps), built for AVX2 and the baseline as core/runtime/gemv.c is. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) \
    && defined(__ELF__)
__attribute__((target_clones("avx2", "default")))
#endif
static double sum(const v4d *a, size_t n)
{
    v4d s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i];
        s1 += a[i + 1];
        s2 += a[i + 2];
        s3 += a[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i];
    v4d s = (s0 + s1) + (s2 + s3);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long mb = argc > 1 ? atol(argv[1]) : 400;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (mb < 1 || reps < 1) {
        if (rank == 0)
            fprintf(stderr, "mpi_stream: MEGABYTES and REPEATS must be "
                    "positive\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t n = (size_t)mb * 1000000 / sizeof(v4d);
    v4d *a = malloc(n * sizeof *a);
    if (!a)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < n; i++)
        a[i] = (v4d){1e-9 * (double)i, 1.0, 2.0, 3.0};
    double best = 1e30;
    double keep = 0;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        keep += sum(a, n);
        t = MPI_Wtime() - t;
        best = t < best ? t : best;
    }
    double gbs = (double)(n * sizeof(v4d)) / best / 1e9;
    double mn = gbs, mx = gbs, tot = gbs;
    MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &tot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ranks=%d mb=%ld gbs_rank_min=%.2f gbs_rank_max=%.2f "
               "gbs_total=%.2f check=%g\n", size, mb, mn, mx, tot,
               keep);
    free(a);
    MPI_Finalize();
    return 0;
}
