/*
 * mpi_allreduce.c — the latency of MPI_Allreduce(MPI_SUM) of k doubles and
 * of MPI_Bcast of k doubles, for the scaling model of docs/hpc.md
 * ("Scaling on paper"): what libkiln-mpi pays per gradient besides the
 * compute (one broadcast of the point, one allreduce of [lp, grad]).
 * On one machine this is shared memory / loopback: a lower bound for any
 * interconnect.  make bench-mpi runs it with 2 ranks (bench/mpi.py).
 *
 * usage: mpirun -np R mpi_allreduce [SECONDS_PER_SIZE]
 * Prints, on rank 0, one line per size:
 *   k=K bytes=B allreduce_us=A allreduce_min_us=A0 bcast_us=C bcast_min_us=C0 reps=N
 * A and C: the median over 5 batches of the mean time per call in a batch,
 * rank 0's clock, after a barrier and 50 warm-up calls; A0 and C0 the
 * fastest batch (on a busy machine the median carries the other
 * processes' time slices: MPI ranks spin while they wait).
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

#define BATCHES 5

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median over BATCHES of the mean seconds per call of op on k doubles;
 * *fastest: the fastest batch's */
static double time_op(int op, double *in, double *out, int k, long reps,
                      double *fastest)
{
    double t[BATCHES];
    for (int w = 0; w < 50; w++) {
        if (op == 0)
            MPI_Allreduce(in, out, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Bcast(in, k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    for (int b = 0; b < BATCHES; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double a = MPI_Wtime();
        for (long i = 0; i < reps; i++) {
            if (op == 0)
                MPI_Allreduce(in, out, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            else
                MPI_Bcast(in, k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        }
        t[b] = (MPI_Wtime() - a) / (double)reps;
    }
    qsort(t, BATCHES, sizeof t[0], cmp);
    *fastest = t[0];
    return t[BATCHES / 2];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double budget = argc > 1 ? atof(argv[1]) : 0.5;
    static const int sizes[] = {2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000,
                                5000, 10000};
    int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    double *in = malloc(sizeof *in * 10000), *out = malloc(sizeof *out * 10000);
    if (!in || !out)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < 10000; i++)
        in[i] = 1.0 / (1.0 + i);
    for (int s = 0; s < nsizes; s++) {
        int k = sizes[s];
        /* size the batches on short probes (the fastest of 5, so that a
         * time slice lost in a probe does not shrink the batches); rank 0
         * decides for all */
        double per = 1e9;
        for (int p = 0; p < 5; p++) {
            double a = MPI_Wtime();
            for (int i = 0; i < 20; i++)
                MPI_Allreduce(in, out, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            double q = (MPI_Wtime() - a) / 20;
            per = q < per ? q : per;
        }
        long reps = (long)(budget / 2 / BATCHES / (per > 1e-8 ? per : 1e-8));
        if (reps < 20)
            reps = 20;
        MPI_Bcast(&reps, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        double ar0, bc0;
        double ar = time_op(0, in, out, k, reps, &ar0);
        double bc = time_op(1, in, out, k, reps, &bc0);
        if (rank == 0)
            printf("k=%d bytes=%d allreduce_us=%.3f allreduce_min_us=%.3f "
                   "bcast_us=%.3f bcast_min_us=%.3f reps=%ld\n", k, k * 8,
                   ar * 1e6, ar0 * 1e6, bc * 1e6, bc0 * 1e6, reps);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
