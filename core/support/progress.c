/*
 * progress.c — the progress line of a long compile (core/support/progress.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <time.h>
#include <unistd.h>

/* Compiles shorter than this show nothing; the line is rewritten at most
 * this often. */
#define PROGRESS_AFTER_S 0.5
#define PROGRESS_EVERY_S 0.1

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void kiln_progress_begin(kiln_progress *p, int total, FILE *diag, int quiet)
{
    p->on = !quiet && (!diag || diag == stderr) && isatty(STDERR_FILENO);
    p->total = total;
    p->done = 0;
    p->t0 = p->last = now_s();
    p->shown = 0;
    pthread_mutex_init(&p->lock, NULL);
}

void kiln_progress_step(kiln_progress *p)
{
    if (!p || !p->on)
        return;
    pthread_mutex_lock(&p->lock);
    p->done++;
    double t = now_s();
    if (t - p->t0 >= PROGRESS_AFTER_S && t - p->last >= PROGRESS_EVERY_S) {
        fprintf(stderr, "\rkiln: compiling kernels %d/%d, %.1f s\033[K",
                p->done, p->total, t - p->t0);
        fflush(stderr);
        p->last = t;
        p->shown = 1;
    }
    pthread_mutex_unlock(&p->lock);
}

void kiln_progress_end(kiln_progress *p)
{
    if (p->on && p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pthread_mutex_destroy(&p->lock);
}
