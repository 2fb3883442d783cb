/*
 * kiln_compile.c — `kiln compile MODEL.kg [--data D.json] [--policy P.yaml]
 * [--quiet]`: the ahead-of-time step (docs/kiln.1; docs/policy.md,
 * "Tiers"; docs/cache.md).
 *
 * Every kernel that the policy's rules send to a compiling backend — the
 * tier-1 backend of a tiered policy (llvm by default), or the backend a
 * rule picks outright — is compiled into the user's disk cache, so that
 * a later `kiln run`, Python or BridgeStan process starts on that code.
 * Tier-1 kernels are compiled with kiln_function_tier_up, one by one on
 * this thread, with the progress line of core/support/progress.c on a
 * terminal. A second compile of the model then checks that every one of them
 * is served from the cache.  Exit status 1 when any compile failed, when the
 * cache is off, read-only or not writable, or when a compiled kernel did
 * not reach the cache; 2 for usage errors.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/cache.h>
#include <kiln/graph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsondata.h"  /* --data (libkiln, internal header) */
#include "progress.h"  /* the progress line (libkiln, internal header) */
#include "kiln_cli.h"

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* What kernel i of f needs: 1 to compile with its tier-1 backend, 2 on a
 * compiling backend from the cache already, 3 compiled by kiln_compile
 * itself (not tiered), 0 nothing (the interpreter).  *be: the backend. */
static int kernel_need(const kiln_function *f, int i, const char **be)
{
    kiln_cli_tier t;
    *be = NULL;
    if (kiln_cli_kernel_tier(f, i, &t))
        return 0;
    const kiln_tier_info *ti = &t.info;
    if (ti->tier1 && ti->state == KILN_TIER_FIXED && ti->tier > 0) {
        *be = ti->backend;
        return 2;
    }
    if (ti->tier1 && ti->state != KILN_TIER_FAILED) {
        *be = ti->tier1;
        return ti->state == KILN_TIER_SWAPPED ? 3 : 1;
    }
    kiln_kernel_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    if (kiln_function_kernel_report(f, i, &r) || !r.backend ||
        !strcmp(r.backend, "interp"))
        return 0;
    *be = r.backend;
    return r.cache == KILN_CACHE_HIT ? 2 : 3;
}

static kiln_function *compile_model(kiln_graph *g, const char *model,
                                    const char *policy, int quiet)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.policy_file = policy;
    o.model_path = model;
    o.cache_mode = KILN_CACHE_MODE_ON;
    o.quiet = quiet;
    kiln_err err = {0, ""};
    kiln_function *f = kiln_compile(g, &o, &err);
    if (!f)
        fprintf(stderr, "kiln: compile: %s\n", err.message);
    return f;
}

/* The cache kiln_compile will write: opened (created) and writable.
 * Returns its directory (malloc'd), or NULL with a message. */
static char *writable_cache(void)
{
    const char *mode = getenv("KILN_CACHE");
    int m = mode ? kiln_cache_parse_mode(mode) : KILN_CACHE_MODE_ON;
    if (m == KILN_CACHE_MODE_OFF || m == KILN_CACHE_MODE_READ_ONLY) {
        fprintf(stderr, "kiln: compile: the disk cache is %s (KILN_CACHE=%s):"
                " there is nowhere to compile into\n",
                m == KILN_CACHE_MODE_OFF ? "off" : "read-only", mode);
        return NULL;
    }
    kiln_err err = {0, ""};
    kiln_cache *c = kiln_cache_open(NULL, 1, &err);
    if (!c) {
        fprintf(stderr, "kiln: compile: the disk cache: %s\n", err.message);
        return NULL;
    }
    char *dir = strdup(kiln_cache_dir(c));
    kiln_cache_close(c);
    if (dir && access(dir, W_OK) != 0) {
        fprintf(stderr, "kiln: compile: the disk cache %s is not writable\n",
                dir);
        free(dir);
        return NULL;
    }
    return dir;
}

int kiln_cli_compile(int argc, char **argv)
{
    const char *file = NULL, *data_json = NULL, *policy = NULL;
    int quiet = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--data") && i + 1 < argc)
            data_json = argv[++i];
        else if (!strcmp(a, "--policy") && i + 1 < argc)
            policy = argv[++i];
        else if (!strcmp(a, "--quiet"))
            quiet = 1;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kiln: compile: unknown or incomplete option "
                    "'%s'\nusage: kiln compile FILE.kg [--data DATA.json] "
                    "[--policy POLICY.yaml] [--quiet]\n", a);
            return 2;
        } else if (!file)
            file = a;
        else {
            fprintf(stderr, "kiln: compile: more than one model file ('%s', "
                    "'%s')\n", file, a);
            return 2;
        }
    }
    if (!file) {
        fputs("usage: kiln compile FILE.kg [--data DATA.json] "
              "[--policy POLICY.yaml] [--quiet]\n", stderr);
        return 2;
    }
    char *dir = writable_cache();
    if (!dir)
        return 1;
    double t0 = seconds_now();
    kiln_err err = {0, ""};
    kiln_read_options ro;
    memset(&ro, 0, sizeof ro);
    ro.struct_size = sizeof ro;
    int status = 1;
    kiln_function *f = NULL;
    kiln_graph *g = kiln_parse_file_opts(file, &ro, &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        goto out;
    }
    if (data_json) {
        kiln_json_data *d = kiln_json_data_read(data_json, &ro, &err);
        int bad = !d || kiln_json_data_bind_graph(g, d, NULL, &err);
        kiln_json_data_free(d);
        if (bad) {
            kiln_cli_data_error(data_json, err.message);
            goto out;
        }
    }
    f = compile_model(g, file, policy, quiet);
    if (!f)
        goto out;
    int n = kiln_function_n_kernels(f), todo = 0, cached = 0, done = 0;
    int failed = 0;
    const char *be = NULL;
    char used[64] = "";     /* the backend's name outlives f */
    for (int i = 0; i < n; i++) {
        int need = kernel_need(f, i, &be);
        todo += need == 1;
        cached += need == 2;
        done += need == 3;
        if (need && !used[0] && be)
            snprintf(used, sizeof used, "%s", be);
    }
    kiln_progress p;
    kiln_progress_begin(&p, todo, stderr, quiet);
    for (int i = 0; i < n; i++) {
        if (kernel_need(f, i, &be) != 1)
            continue;
        if (kiln_function_tier_up(f, i, &err)) {
            fprintf(stderr, "%skiln: compile: %s\n", p.shown ? "\n" : "",
                    err.message);
            failed++;
        } else {
            done++;
        }
        kiln_progress_step(&p);
    }
    kiln_progress_end(&p);
    kiln_function_free(f);
    f = NULL;
    if (failed) {
        fprintf(stderr, "kiln: compile: %d kernel%s failed to compile\n",
                failed, failed == 1 ? "" : "s");
        goto out;
    }
    /* every compiled kernel must now come from the cache */
    int missing = 0;
    if (done) {
        f = compile_model(g, file, policy, 1);
        if (!f)
            goto out;
        for (int i = 0; i < n; i++)
            missing += kernel_need(f, i, &be) == 1 ||
                       kernel_need(f, i, &be) == 3;
    }
    if (missing) {
        fprintf(stderr, "kiln: compile: %d kernel%s compiled but not found in "
                "the cache %s afterwards (kiln run --cache-report says why)\n",
                missing, missing == 1 ? "" : "s", dir);
        goto out;
    }
    if (!quiet) {
        if (!used[0])
            fprintf(stderr, "kiln: nothing to compile: every kernel of %s runs"
                    " on the interpreter under this policy\n", file);
        else
            fprintf(stderr, "kiln: compiled %d kernel%s with %s into %s (%d "
                    "already cached) in %.2f s\n", done, done == 1 ? "" : "s",
                    used, dir, cached, seconds_now() - t0);
    }
    status = 0;
out:
    kiln_function_free(f);
    kiln_graph_free(g);
    free(dir);
    return status;
}
