/*
 * progress.h — the progress line of a long compile (prefix
 * kiln_progress_): "kiln: compiling kernels 120/211, 1.4 s" on standard
 * error, rewritten in place, when standard error is a terminal, the
 * caller did not ask for quiet, diagnostics go to standard error and
 * the compile has run for half a second; erased when it ends.
 */
#ifndef KILN_CORE_PROGRESS_H
#define KILN_CORE_PROGRESS_H

#include <pthread.h>
#include <stdio.h>

typedef struct kiln_progress {
    int on;              /* a terminal, not quiet */
    int total, done;
    double t0, last;     /* start, last line written (monotonic s) */
    int shown;           /* a line is on the terminal */
    pthread_mutex_t lock;
} kiln_progress;

/* Start counting `total` kernels; diag is where diagnostics go (NULL:
 * standard error). */
void kiln_progress_begin(kiln_progress *p, int total, FILE *diag, int quiet);

/* One kernel is done.  Thread-safe. */
void kiln_progress_step(kiln_progress *p);

/* The compile ended: erase the line. */
void kiln_progress_end(kiln_progress *p);

#endif
