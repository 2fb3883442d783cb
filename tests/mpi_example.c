/* mpi_example.c: the log density and gradient of a model whose data are
 * split over the MPI ranks (docs/mpi.md, "The C API").
 *   cc mpi_example.c $(pkg-config --cflags --libs kiln-mpi) -o mpi_example
 *   mpirun -np 4 ./mpi_example MODEL.kg DATA.json AXIS
 * (DATA.json: "" when MODEL.kg binds its own data, e.g. with npy()) */
#include <kiln/mpi.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_example MODEL.kg DATA.json AXIS\n");
        MPI_Finalize();
        return 2;
    }
    /* every rank reads the same model and data (kiln_mpi_model_new checks
     * it) and builds its part: rows [T r / R, T (r+1) / R) of the data */
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(argv[1], &err);
    kiln_mpi_options mo = {sizeof mo, argv[3], 0, 0};   /* axis; 0s: defaults */
    kiln_mpi_model *mm = NULL;
    int rc = g ? kiln_mpi_model_new(MPI_COMM_WORLD, g, NULL, argv[2], &mo,
                                    NULL, NULL, &mm, &err)
               : err.code;
    if (rc) {
        /* a parse error is this rank's; kiln_mpi_model_new fails on every
         * rank with the same error */
        fprintf(stderr, "mpi_example: rank %d: %s\n", rank, err.message);
        kiln_graph_free(g);
        MPI_Finalize();
        return 1;
    }
    /* the number of unconstrained parameters: the same on every rank */
    int n = kiln_model_n_unc(kiln_mpi_model_part(mm));
    if (rank == 0) {
        double *unc = calloc((size_t)n + 1, sizeof *unc);
        double *grad = calloc((size_t)n + 1, sizeof *grad);
        double lp = 0;
        rc = !unc || !grad;
        for (int i = 0; !rc && i < n; i++)
            unc[i] = 0.1;
        /* the sum over every rank's part, on rank 0 (the others serve) */
        if (!rc)
            rc = kiln_mpi_log_density(mm, 1, unc, &lp, grad, &err);
        if (rc) {
            fprintf(stderr, "mpi_example: %s\n", err.message);
        } else {
            printf("lp = %.17g\ngrad =", lp);
            for (int i = 0; i < n; i++)
                printf(" %.17g", grad[i]);
            printf("\n");
        }
        free(unc);
        free(grad);
        kiln_mpi_model_free(mm);   /* tells the serving ranks to stop */
    } else {
        /* answer rank 0's calls until it frees the model */
        rc = kiln_mpi_serve(mm, &err);
        if (rc)
            fprintf(stderr, "mpi_example: rank %d: %s\n", rank, err.message);
        kiln_mpi_model_free(mm);
    }
    kiln_graph_free(g);
    MPI_Finalize();
    return rc ? 1 : 0;
}
