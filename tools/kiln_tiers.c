/*
 * kiln_tiers.c — where each kernel runs between tiers, for the kiln CLI:
 * the tier report of `kiln run` (text and the JSON "tiers" array) and the
 * tier columns of `kiln explain` (docs/kiln.1; docs/policy.md, "Tiers").
 * Part of the kiln CLI (tools/kiln.c, tools/kiln_policy.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/policy.h>
#include <kiln/cache.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln_cli.h"

/* Above this many kernels to report, `kiln run` prints one summary line
 * instead of a line each (--tier-report prints them all). */
#define TIER_REPORT_LINES 20

void kiln_cli_json_str(FILE *o, const char *s)
{
    if (!s) {
        fputs("null", o);
        return;
    }
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c < 0x20)
            fprintf(o, "\\u%04x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
}

const char *kiln_cli_tier_state_name(int state)
{
    static const char *const names[] = {"fixed", "waiting", "queued",
                                        "compiling", "swapped", "failed",
                                        "never"};
    return state >= 0 && state <= KILN_TIER_NEVER ? names[state] : "?";
}

int kiln_cli_kernel_tier(const kiln_function *f, int i, kiln_cli_tier *t)
{
    memset(t, 0, sizeof *t);
    t->info.struct_size = sizeof t->info;
    if (kiln_function_tier_info(f, i, &t->info))
        return -1;
    kiln_kernel_report rep;
    memset(&rep, 0, sizeof rep);
    rep.struct_size = sizeof rep;
    /* the step's own backend: the one it was compiled with before any
     * swap (kiln_function_kernel_backend follows the swap) */
    t->start = kiln_function_kernel_report(f, i, &rep) == 0 && rep.backend
                   ? rep.backend : t->info.backend;
    kiln_kernel_info k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    if (kiln_function_kernel_info(f, i, &k, NULL) == 0) {
        t->label = k.facts.label;
        t->fused_nodes = k.fused_nodes;
    }
    if (!t->label)
        t->label = rep.label ? rep.label : "?";
    /* on a tier above 0, or may move to one */
    t->listed = t->info.tier1 != NULL || t->info.tier > 0 ||
                t->info.state == KILN_TIER_SWAPPED;
    return 0;
}

/* "812 ns", "41.2 us", "3.1 ms" */
static const char *ns_text(double ns, char *buf, size_t n)
{
    if (ns < 1e4)
        snprintf(buf, n, "%.0f ns", ns);
    else if (ns < 1e7)
        snprintf(buf, n, "%.1f us", ns / 1e3);
    else
        snprintf(buf, n, "%.1f ms", ns / 1e6);
    return buf;
}

/* One line of the text report for kernel i. */
static void report_line(FILE *o, int i, const kiln_cli_tier *t, int baseline)
{
    const kiln_tier_info *ti = &t->info;
    const char *t1 = ti->tier1 ? ti->tier1 : "tier 1";
    char ns[32], measured[64];
    if (ti->measured_ns > 0)
        snprintf(measured, sizeof measured, " (measured %s per call)",
                 ns_text(ti->measured_ns, ns, sizeof ns));
    else
        snprintf(measured, sizeof measured, " (not measured yet)");
    fprintf(o, "kernel %d (%s", i, t->label);
    if (t->fused_nodes > 1)
        fprintf(o, ", %d nodes", t->fused_nodes);
    fprintf(o, "): ");
    switch (ti->state) {
    case KILN_TIER_SWAPPED:
        fprintf(o, "%s -> %s at call %lld (%.3g s after compile, compiled "
                "in %.3g s)\n", t->start, ti->backend,
                (long long)ti->swapped_call, ti->swapped_seconds,
                ti->compile_seconds);
        break;
    case KILN_TIER_WAITING:
        fprintf(o, "%s, waiting for %s%s\n", t->start, t1, measured);
        break;
    case KILN_TIER_QUEUED:
        fprintf(o, "%s, %s compile queued%s\n", t->start, t1, measured);
        break;
    case KILN_TIER_COMPILING:
        fprintf(o, "%s, %s compiling%s\n", t->start, t1, measured);
        break;
    case KILN_TIER_FAILED:
        fprintf(o, "%s, %s failed to compile it: stays on %s\n", t->start,
                t1, t->start);
        break;
    case KILN_TIER_NEVER:
        if (baseline)
            fprintf(o, "%s, never %s: --tiers baseline\n", t->start, t1);
        else
            fprintf(o, "%s, never %s: too small to gain%s\n", t->start, t1,
                    measured);
        break;
    default:    /* FIXED on tier 1: its tier-1 code was in the disk cache */
        fprintf(o, "%s from the start (tier %d: its code was in the disk "
                "cache)\n", ti->backend, ti->tier);
        break;
    }
}

int kiln_cli_tier_report(const kiln_function *f, FILE *o, int all,
                         int baseline)
{
    /* one snapshot: background compiles go on while this prints */
    int n = kiln_function_n_kernels(f), listed = 0;
    int count[KILN_TIER_NEVER + 1] = {0}, on_tier1 = 0;
    kiln_cli_tier *t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t)
        return -1;
    for (int i = 0; i < n; i++) {
        if (kiln_cli_kernel_tier(f, i, &t[i])) {
            free(t);
            return -1;
        }
        if (!t[i].listed)
            continue;
        listed++;
        if (t[i].info.state >= 0 && t[i].info.state <= KILN_TIER_NEVER)
            count[t[i].info.state]++;
        on_tier1 += t[i].info.state == KILN_TIER_FIXED;
    }
    if (listed == 0 && all)
        fprintf(o, "tiers: no kernel runs on or may move to a higher tier\n");
    if (listed > TIER_REPORT_LINES) {
        static const struct { int state; const char *what; } order[] = {
            {KILN_TIER_SWAPPED, "swapped to tier 1"},
            {KILN_TIER_COMPILING, "compiling"}, {KILN_TIER_QUEUED, "queued"},
            {KILN_TIER_WAITING, "waiting"}, {KILN_TIER_FAILED, "failed"},
            {KILN_TIER_NEVER, "never"}};
        fprintf(o, "tiers: %d of %d kernels have a tier above 0", listed, n);
        const char *sep = ": ";
        if (on_tier1) {
            fprintf(o, "%s%d started on tier 1", sep, on_tier1);
            sep = ", ";
        }
        for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
            if (count[order[k].state]) {
                fprintf(o, "%s%d %s", sep, count[order[k].state],
                        order[k].what);
                sep = ", ";
            }
        fprintf(o, "%s\n", all ? "" : " (--tier-report lists each)");
    }
    for (int i = 0; i < n && (all || listed <= TIER_REPORT_LINES); i++)
        if (t[i].listed)
            report_line(o, i, &t[i], baseline);
    free(t);
    return 0;
}

/* A number, or null when it does not apply (< 0, or <= 0 when zero_null). */
static void json_num(FILE *o, double v, int zero_null)
{
    if (v < 0 || (zero_null && v == 0))
        fputs("null", o);
    else
        fprintf(o, "%.6g", v);
}

int kiln_cli_tier_json(const kiln_function *f, FILE *o)
{
    int n = kiln_function_n_kernels(f);
    fputs("[", o);
    for (int i = 0; i < n; i++) {
        kiln_cli_tier t;
        if (kiln_cli_kernel_tier(f, i, &t))
            return -1;
        const kiln_tier_info *ti = &t.info;
        fprintf(o, "%s{\"index\": %d, \"label\": ", i ? ", " : "", i);
        kiln_cli_json_str(o, t.label);
        fputs(", \"start\": ", o);
        kiln_cli_json_str(o, t.start);
        fputs(", \"backend\": ", o);
        kiln_cli_json_str(o, ti->backend);
        fprintf(o, ", \"tier\": %d, \"tier1\": ", ti->tier);
        kiln_cli_json_str(o, ti->tier1);
        fprintf(o, ", \"state\": \"%s\", \"swapped_call\": ",
                kiln_cli_tier_state_name(ti->state));
        if (ti->swapped_call >= 0)
            fprintf(o, "%lld", (long long)ti->swapped_call);
        else
            fputs("null", o);
        fputs(", \"swapped_seconds\": ", o);
        json_num(o, ti->swapped_seconds, 0);
        fputs(", \"measured_ns\": ", o);
        json_num(o, ti->measured_ns, 1);
        fputs(", \"compile_seconds\": ", o);
        json_num(o, ti->state == KILN_TIER_SWAPPED ? ti->compile_seconds : -1,
                 0);
        fputs("}", o);
    }
    fputs("]", o);
    return 0;
}

/* --tier-wait's thread: one per process (kiln run waits once); it
 * outlives a timeout, compiling on, and then holds f */
typedef struct tier_waiter {
    kiln_function *f;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, rc;
    kiln_err err;
} tier_waiter;

static tier_waiter waiter = {NULL, PTHREAD_MUTEX_INITIALIZER,
                             PTHREAD_COND_INITIALIZER, 0, 0, {0, ""}};

void kiln_cli_function_free(kiln_function *f, int status)
{
    /* a tier-1 compile queued or running (timeout 0: do not wait), or
     * --tier-wait's thread still at work on f (freeing f under it would
     * be a use after free) */
    pthread_mutex_lock(&waiter.lock);
    int busy = f && waiter.f == f && !waiter.done;
    pthread_mutex_unlock(&waiter.lock);
    if (!busy) {
        busy = f && kiln_function_tier_wait(f, 0) == 1;
        kiln_function_free(f);  /* drops queued compiles, returns at once */
    }
    if (!busy)
        return;
    /* a normal exit would wait for the compile still running (the llvm
     * plugin's atexit handler and libkiln's pool both wait for it, lest
     * libLLVM's static destructors run under it): end the process now;
     * the compile's result was for this process only, and the disk cache
     * never sees a half-written entry */
    fflush(NULL);
    _exit(status);
}

/* ---- the one summary line, and --tier-wait ------------------------------ */

void kiln_cli_tier_summary(const kiln_function *f, FILE *o)
{
    int n = kiln_function_n_kernels(f), listed = 0, swapped = 0, cached = 0;
    int pending = 0, failed = 0;
    double secs = 0;
    const char *to = NULL;
    int mixed = 0;
    for (int i = 0; i < n; i++) {
        kiln_cli_tier t;
        if (kiln_cli_kernel_tier(f, i, &t) || !t.listed)
            continue;
        listed++;
        const kiln_tier_info *ti = &t.info;
        const char *b = ti->tier1 ? ti->tier1 : ti->backend;
        if (b && to && strcmp(b, to))
            mixed = 1;
        if (b && !to)
            to = b;
        switch (ti->state) {
        case KILN_TIER_SWAPPED:
            swapped++;
            secs += ti->compile_seconds;
            break;
        case KILN_TIER_FIXED:
            cached += ti->tier > 0;
            break;
        case KILN_TIER_WAITING: case KILN_TIER_QUEUED:
        case KILN_TIER_COMPILING:
            pending++;
            break;
        case KILN_TIER_FAILED:
            failed++;
            break;
        default:
            break;
        }
    }
    if (!listed)
        return;
    fprintf(o, "kiln: tier-up: %d kernel%s to %s in %.2g s (%d from cache",
            swapped + cached, swapped + cached == 1 ? "" : "s",
            mixed || !to ? "tier 1" : to, secs, cached);
    if (pending)
        fprintf(o, ", %d still on tier 0: `kiln compile` or --tier-wait "
                "puts them in the cache", pending);
    if (failed)
        fprintf(o, ", %d failed to compile", failed);
    fprintf(o, ")\n");
}

static void *tier_up_all(void *arg)
{
    tier_waiter *w = arg;
    kiln_err err = {0, ""};
    int rc = kiln_function_tier_up(w->f, -1, &err);
    pthread_mutex_lock(&w->lock);
    w->rc = rc;
    w->err = err;
    w->done = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int kiln_cli_tier_wait(kiln_function *f, double seconds, int quiet)
{
    pthread_mutex_lock(&waiter.lock);
    waiter.f = f;
    waiter.done = 0;
    pthread_mutex_unlock(&waiter.lock);
    pthread_t th;
    if (pthread_create(&th, NULL, tier_up_all, &waiter) != 0) {
        pthread_mutex_lock(&waiter.lock);
        waiter.done = 1;
        pthread_mutex_unlock(&waiter.lock);
        fprintf(stderr, "kiln: --tier-wait: cannot start a thread\n");
        return -1;
    }
    pthread_detach(th);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double s = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + seconds;
    until.tv_sec = (time_t)s;
    until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
    if (until.tv_nsec < 0 || until.tv_nsec >= 1000000000L)
        until.tv_nsec = 0;
    pthread_mutex_lock(&waiter.lock);
    while (!waiter.done)
        if (pthread_cond_timedwait(&waiter.cond, &waiter.lock,
                                   &until) == ETIMEDOUT)
            break;
    int done = waiter.done, rc = waiter.rc;
    kiln_err err = waiter.err;
    pthread_mutex_unlock(&waiter.lock);
    if (done) {
        /* the queued ones too (tier_up took them over or waited for them) */
        if (kiln_function_tier_wait(f, seconds) == 1)
            done = 0;
    }
    if (done && rc && !quiet)
        fprintf(stderr, "kiln: --tier-wait: %s\n", err.message);
    if (done)
        return 0;
    if (!quiet) {
        int n = kiln_function_n_kernels(f), pending = 0;
        char list[400] = "";
        size_t len = 0;
        for (int i = 0; i < n; i++) {
            kiln_tier_info ti;
            memset(&ti, 0, sizeof ti);
            ti.struct_size = sizeof ti;
            if (kiln_function_tier_info(f, i, &ti) || !ti.tier1 ||
                (ti.state != KILN_TIER_WAITING &&
                 ti.state != KILN_TIER_QUEUED &&
                 ti.state != KILN_TIER_COMPILING))
                continue;
            if (len < sizeof list - 32)
                len += (size_t)snprintf(list + len, sizeof list - len,
                                        "%s%d", pending ? ", " : "", i);
            else if (len < sizeof list - 4)
                len += (size_t)snprintf(list + len, sizeof list - len, ", ...");
            pending++;
        }
        fprintf(stderr, "kiln: --tier-wait: %d kernel%s still waiting for "
                "tier 1 after %g s (kernel%s %s); the calls are timed "
                "anyway\n", pending, pending == 1 ? "" : "s", seconds,
                pending == 1 ? "" : "s", list);
    }
    return 1;
}
