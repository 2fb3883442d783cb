/*
 * blas.c — the BLAS libkiln runs: which library (for configure's and
 * `kiln --version`'s report) and OpenBLAS's threads (docs/backends.md
 * "BLAS").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "gemv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

/* ---- the BLAS in use ------------------------------------------------ */

static kiln_blas_info kiln_blas_state = { 0, "?", "", 0, 0, -1 };
static pthread_once_t kiln_blas_once = PTHREAD_ONCE_INIT;

typedef void (*kiln_blas_set_fn)(int);
typedef int (*kiln_blas_get_fn)(void);

static void *kiln_blas_sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* $KILN_GEMV: auto, blas or loop for every matrix-vector product of the
 * process, over the policies' choices (benchmarks compare the paths with
 * it); anything else is ignored with one line on stderr. */
static void kiln_blas_env(void)
{
    static const char *const modes[] = {"auto", "blas", "loop"};
    const char *e = getenv("KILN_GEMV");
    if (!e || !*e)
        return;
    for (int i = 0; i < 3; i++)
        if (!strcmp(e, modes[i])) {
            kiln_blas_state.gemv_env = i;
            return;
        }
    fprintf(stderr, "kiln: KILN_GEMV: expected auto, blas or loop, got "
            "'%.40s'; ignored\n", e);
}

static void kiln_blas_init(void)
{
    Dl_info di;
    kiln_blas_env();
    void *gemm = (void *)cblas_dgemm;
    if (dladdr(gemm, &di) && di.dli_fname && di.dli_fname[0]) {
        /* the file behind the symlinks (libblas.so.3 -> the alternative);
         * kept for the life of the process */
        char *real = realpath(di.dli_fname, NULL);
        kiln_blas_state.library = real ? real : di.dli_fname;
    }
    /* OpenBLAS's own entries, looked up at run time: libkiln links only
     * CBLAS, so the same build runs on the reference BLAS, OpenBLAS or any
     * other library behind libblas.so.3 (Debian's BLAS alternatives). */
    const char *(*cfg)(void) = (const char *(*)(void))kiln_blas_sym(
        "openblas_get_config");
    if (!cfg)
        return;
    kiln_blas_state.openblas = 1;
    const char *c = cfg();
    kiln_blas_state.config = c ? c : "";
    if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("GOTO_NUM_THREADS")
        && !getenv("OMP_NUM_THREADS")) {
        kiln_blas_set_fn set = (kiln_blas_set_fn)kiln_blas_sym(
            "openblas_set_num_threads");
        if (set) {
            set(1);
            kiln_blas_state.threads_set = 1;
        }
    }
    kiln_blas_get_fn get = (kiln_blas_get_fn)kiln_blas_sym(
        "openblas_get_num_threads");
    kiln_blas_state.threads = get ? get() : 0;
}

const kiln_blas_info *kiln_blas_get(void)
{
    pthread_once(&kiln_blas_once, kiln_blas_init);
    return &kiln_blas_state;
}

int kiln_blas_set_threads(int n)
{
    if (n < 1 || !kiln_blas_get()->openblas)
        return 0;
    kiln_blas_set_fn set = (kiln_blas_set_fn)kiln_blas_sym(
        "openblas_set_num_threads");
    if (!set)
        return 0;
    set(n);
    return 1;
}

