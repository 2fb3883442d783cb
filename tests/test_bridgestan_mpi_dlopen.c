/*
 * test_bridgestan_mpi_dlopen.c — the C API of an MPI model library
 * (bridgestan-mpi.so; docs/bridgestan.md, "Under MPI") loaded with dlopen
 * RTLD_LOCAL as nutpie does, run under mpirun by
 * tests/test_bridgestan_mpi.sh:
 *
 *   mpirun -np R test_bridgestan_mpi_dlopen MPI.so SERIAL.so DATA.json
 *
 * The program does not link MPI: the library initialises it.  Every rank
 * constructs the model; rank 0 compares log densities and gradients at a
 * few points with the serial library's (the whole data in one process,
 * also dlopened) to 1e-12 relative, then destroys the model; the other
 * ranks' construct returns then, and a density call on their served model
 * fails with a message.  Prints unnumbered TAP lines ("ok - rank R: ...");
 * exits 1 when one fails.
 */
#define KILN_BS_API_LOADER
#include "bridgestan_api.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, failed;

static void ok(int cond, const char *what, double detail)
{
    failed += !cond;
    printf("%sok - rank %d: %s (%.3g)\n", cond ? "" : "not ", rank, what,
           detail);
    fflush(stdout);
}

static int load(const char *path, bs_api *api)
{
    char why[256];
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("not ok - rank %d: dlopen %s: %s\n", rank, path, dlerror());
        return -1;
    }
    if (bs_api_load(h, api, why, sizeof why) != 0) {
        printf("not ok - rank %d: %s: %s\n", rank, path, why);
        return -1;
    }
    return 0;
}

/* The file's bytes, NUL-terminated (the JSON text), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMIX_RANK");
    rank = r ? atoi(r) : 0;
    if (argc != 4) {
        fprintf(stderr, "usage: %s MPI.so SERIAL.so DATA.json\n", argv[0]);
        return 2;
    }
    bs_api mp, se;
    char *data = slurp(argv[3]), *err = NULL;
    if (!data || load(argv[1], &mp) != 0 ||
        (rank == 0 && load(argv[2], &se) != 0))
        return 1;
    bs_model *m = mp.model_construct(data, 0, &err);
    ok(m != NULL, "bs_model_construct", 0);
    if (!m) {
        printf("# rank %d: %s\n", rank, err ? err : "(no message)");
        mp.free_error_msg(err);
        return 1;
    }
    int n = mp.param_unc_num(m);
    if (rank != 0) {
        double x[64] = {0}, g[64], lp;
        int rc = n <= 64 ? mp.log_density_gradient(m, false, true, x, &lp, g,
                                                   &err)
                         : 0;
        ok(rc == -1 && err && strstr(err, "only rank 0 evaluates"),
           "the served model refuses to evaluate", 0);
        mp.free_error_msg(err);
        mp.model_destruct(m);
        free(data);
        return failed != 0;
    }
    bs_model *s = se.model_construct(data, 0, &err);
    ok(s != NULL && se.param_unc_num(s) == n, "the serial model", n);
    if (!s)
        return 1;
    double *u = calloc((size_t)n, sizeof *u), *g = calloc((size_t)n, sizeof *g),
           *gs = calloc((size_t)n, sizeof *gs);
    for (int p = 0; p < 3 && u && g && gs; p++) {
        for (int i = 0; i < n; i++)
            u[i] = p == 0 ? 0.0 : 0.4 * sin(1.0 + p * i);
        double lp = 0, lps = 0, worst = 0;
        int rc = mp.log_density_gradient(m, false, true, u, &lp, g, &err);
        int rcs = se.log_density_gradient(s, false, true, u, &lps, gs, &err);
        worst = fabs(lp - lps) / fabs(lps);
        for (int i = 0; i < n; i++)
            worst = fmax(worst, fabs(g[i] - gs[i]) /
                                    fmax(fabs(gs[i]), 1e-300));
        char what[96];
        snprintf(what, sizeof what, "point %d: log density and gradient "
                 "equal serial to 1e-12 relative", p);
        ok(rc == 0 && rcs == 0 && worst <= 1e-12, what, worst);
    }
    mp.model_destruct(m);   /* the other ranks' construct returns */
    se.model_destruct(s);
    free(u);
    free(g);
    free(gs);
    free(data);
    return failed != 0;
}
