/*
 * test_tiers.c — tiered compilation (core/runtime/tier.c; docs/policy.md,
 * "Tiers"), on radon (examples/radon.kg with its data and gradients):
 *
 *  1. a cold start runs every kernel on tier 0; calls then move hot
 *     kernels to tier 1 (the trigger alone, a low ratio), each call's
 *     outputs bitwise equal to an interpreter-only function's, and
 *     kiln_function_tier_info says when each kernel swapped;
 *  2. a warm start (same cache directory) starts on cached tier-1 code
 *     and queues no background work;
 *  3. kiln_function_tier_forbid: nothing moves afterwards;
 *     KILN_TIERS_BASELINE: nothing ever moves; KILN_TIERS_OFF and an
 *     explicit backend: no tiers at all;
 *  4. kiln_function_tier_up forces every kernel up at once;
 *  5. rules that choose llvm outright queue it at once; freeing the
 *     function while that compile runs returns and leaks nothing (the
 *     valgrind and ASan runs check the leaks);
 *  6. four threads call one function while its kernels tier up, each
 *     call equal to the reference (the ThreadSanitizer build runs this);
 *  7. kiln_function_tier_wait with a timeout, and bad arguments;
 *  8. a process that exits while background compiles run exits cleanly
 *     (a child process of this program: libLLVM's static destructors
 *     must not run under a compile in flight);
 * 10. the tier-up budget (issue 27): with a predicted compile of 1 ns the
 *     trigger queues every kernel at the first call it weighs (the
 *     second), outputs equal the interpreter's before and after the
 *     swaps; with one of 10^9 ms nothing is queued after 300 calls; with
 *     a cost model under which llvm gains nothing, nothing ever is
 *     (kiln_tier_info's queued_call and predictions say so; no timing
 *     is asserted); tiers.preload sets the compiler up in the background
 *     without queueing any kernel;
 *  9. found by an attack: tier_wait with an infinite or huge timeout
 *     (once spun forever holding the pool's lock), a child of fork()
 *     tiers up (it once had no workers), a bad kiln_options.tiers, and
 *     tier0: [llvm] under rules that pick the interpreter (once "tiered
 *     up" from llvm to the interpreter at once).
 *
 * Needs the llvm backend (tier 1); skips without it.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/cache.h>
#include <kiln/graph.h>
#include <kiln/policy.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

static const char *srcdir = ".", *builddir = ".";
static char cache_dir[4096];
static kiln_graph *radon;

#define MAX_IO 16

/* ---- helpers ------------------------------------------------------------ */

static kiln_policy *tier_policy(const char *extra)
{
    char text[1024];
    snprintf(text, sizeof text,
             "kiln_policy: 1\nbackends: [llvm, interp]\ndefault: interp\n"
             "%s", extra);
    kiln_err err;
    kiln_policy *p = kiln_policy_load_string(text, strlen(text), "t.yaml",
                                             &err);
    if (!p)
        diag("policy: %s", err.message);
    return p;
}

static kiln_function *compile_tiered(const kiln_policy *pol, int mode,
                                     const char *cache)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.quiet = 1;
    o.policy = pol;
    o.tiers = mode;
    if (cache)
        o.cache_dir = cache;
    else
        o.cache_mode = KILN_CACHE_MODE_OFF;
    kiln_err err;
    kiln_function *f = kiln_compile(radon, &o, &err);
    if (!f)
        diag("compile: %s", err.message);
    return f;
}

/* Inputs at point `k`: radon's parameters, moved a little per call. */
typedef struct point {
    int n;
    kiln_tensor t[MAX_IO];
    double data[MAX_IO][128];
} point;

static void make_point(const kiln_function *f, int k, point *p)
{
    p->n = kiln_function_n_inputs(f);
    for (int i = 0; i < p->n && i < MAX_IO; i++) {
        kiln_tensor *t = &p->t[i];
        int64_t dims[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &t->dtype, &t->rank, dims, NULL);
        int64_t n = 1;
        for (int d = 0; d < t->rank; d++) {
            t->shape[d] = dims[d];
            n *= dims[d];
        }
        for (int64_t j = 0; j < n && j < 128; j++)
            p->data[i][j] = 0.1 * sin(0.7 * (double)(k + 3 * i) +
                                      0.3 * (double)j);
        t->data = p->data[i];
    }
}

/* f's outputs at point k equal ref's bitwise; 0 when they do. */
static int same_call(kiln_function *f, kiln_function *ref, int k)
{
    point p;
    make_point(ref, k, &p);
    kiln_tensor a[MAX_IO], b[MAX_IO];
    kiln_err err;
    if (kiln_function_call(ref, p.t, a, &err) ||
        kiln_function_call(f, p.t, b, &err)) {
        diag("call %d: %s", k, err.message);
        return -1;
    }
    for (int i = 0; i < kiln_function_n_outputs(f); i++) {
        int64_t n = kiln_shape_numel(a[i].rank, a[i].shape);
        if (a[i].dtype != b[i].dtype || n != kiln_shape_numel(b[i].rank,
                                                              b[i].shape) ||
            memcmp(a[i].data, b[i].data,
                   (size_t)n * kiln_dtype_size(a[i].dtype))) {
            diag("call %d: output %s differs", k,
                 kiln_function_output_name(f, i));
            return -1;
        }
    }
    return 0;
}

/* Kernels in each state; returns how many are on tier 1. */
static int count_states(const kiln_function *f, int counts[8])
{
    memset(counts, 0, sizeof(int) * 8);
    int up = 0;
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        kiln_tier_info ti;
        memset(&ti, 0, sizeof ti);
        ti.struct_size = sizeof ti;
        if (kiln_function_tier_info(f, i, &ti) == 0 && ti.state >= 0 &&
            ti.state < 8) {
            counts[ti.state]++;
            up += ti.tier == 1;
        }
    }
    return up;
}

static int have_llvm(void)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.quiet = 1;
    o.backend = "llvm";
    o.cache_mode = KILN_CACHE_MODE_OFF;
    kiln_err err;
    kiln_graph *g = kiln_parse_string("kiln 1\ngraph t\n  input x: f64\n"
                                      "  output y = exp(x)\nend\n", "t", NULL,
                                      &err);
    kiln_function *f = g ? kiln_compile(g, &o, &err) : NULL;
    int ok_ = f && !strcmp(kiln_function_kernel_backend(f, 0), "llvm");
    kiln_function_free(f);
    kiln_graph_free(g);
    return ok_;
}

/* ---- 1, 2: cold and warm starts ----------------------------------------- */

static void test_cold_warm(kiln_function *ref)
{
    kiln_policy *pol = tier_policy("tiers: {tier0: [interp], tier1: llvm, "
                                   "ratio: 1e-6, min_gain_ns: 0, "
                                   "sample_every: 4}\n");
    kiln_function *f = pol ? compile_tiered(pol, KILN_TIERS_POLICY,
                                            cache_dir) : NULL;
    ok(f != NULL, "cold: radon compiles with a tiered policy");
    if (!f) {
        kiln_policy_free(pol);
        return;
    }
    int st[8] = {0};
    int nk = kiln_function_n_kernels(f);
    int up0 = count_states(f, st);
    ok(up0 == 0, "cold: every kernel starts on tier 0 "
       "(%d kernels: %d waiting, %d fixed)", nk, st[KILN_TIER_WAITING],
       st[KILN_TIER_FIXED]);
    int bad = 0, k = 0, up = 0;
    for (; k < 4000 && !bad; k++) {
        bad = same_call(f, ref, k) != 0;
        if (k % 50 == 49) {
            kiln_function_tier_wait(f, 30);
            up = count_states(f, st);
            if (st[KILN_TIER_WAITING] + st[KILN_TIER_QUEUED] +
                    st[KILN_TIER_COMPILING] == 0)
                break;
        }
    }
    ok(!bad, "cold: %d calls equal the interpreter's bitwise while kernels "
       "move", k + 1);
    ok(up > 0 && st[KILN_TIER_WAITING] + st[KILN_TIER_QUEUED] +
                         st[KILN_TIER_COMPILING] == 0,
       "cold: the trigger moved %d of %d kernels to llvm (%d never, %d "
       "failed)", up, nk, st[KILN_TIER_NEVER], st[KILN_TIER_FAILED]);
    int told = 1;
    for (int i = 0; i < nk; i++) {
        kiln_tier_info ti;
        memset(&ti, 0, sizeof ti);
        ti.struct_size = sizeof ti;
        kiln_function_tier_info(f, i, &ti);
        if (ti.state == KILN_TIER_SWAPPED &&
            (ti.swapped_call < 0 || ti.swapped_seconds < 0 ||
             strcmp(ti.backend, "llvm") || ti.measured_ns <= 0 ||
             strcmp(kiln_function_kernel_backend(f, i), "llvm")))
            told = 0;
    }
    ok(told, "cold: tier_info of swapped kernels gives the call, the time, "
       "the backend and the measured tier-0 time");
    ok(same_call(f, ref, 99999) == 0, "cold: a call after the swaps equals "
       "the interpreter's");
    kiln_function_free(f);

    f = compile_tiered(pol, KILN_TIERS_POLICY, cache_dir);
    ok(f != NULL, "warm: compiles again on the same cache");
    if (f) {
        int up2 = count_states(f, st);
        ok(up2 == up && st[KILN_TIER_QUEUED] + st[KILN_TIER_COMPILING] == 0,
           "warm: the %d kernels that moved start on cached tier-1 code, "
           "nothing queued", up2);
        ok(kiln_function_tier_wait(f, 0) == 0, "warm: no background work");
        ok(same_call(f, ref, 5) == 0, "warm: equals the interpreter");
    }
    kiln_function_free(f);
    kiln_policy_free(pol);
}

/* ---- 10: the tier-up budget --------------------------------------------- */

/* Calls k0..k1-1 of f, each equal to ref's; 0 when they all are. */
static int same_calls(kiln_function *f, kiln_function *ref, int k0, int k1)
{
    for (int k = k0; k < k1; k++)
        if (same_call(f, ref, k))
            return -1;
    return 0;
}

/* Kernels queued (queued_call >= 0) and the largest queued_call; the
 * states in counts.  Returns how many have a tier above. */
static int budget_states(const kiln_function *f, int counts[8], int *queued,
                         int64_t *last_queued, int *gain0)
{
    memset(counts, 0, sizeof(int) * 8);
    int with1 = 0;
    *queued = *gain0 = 0;
    *last_queued = -1;
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        kiln_tier_info ti;
        memset(&ti, 0, sizeof ti);
        ti.struct_size = sizeof ti;
        if (kiln_function_tier_info(f, i, &ti) || ti.state < 0 ||
            ti.state >= 8)
            continue;
        counts[ti.state]++;
        with1 += ti.tier1 != NULL;
        *gain0 += ti.tier1 && ti.predicted_gain_ns == 0;
        if (ti.queued_call >= 0) {
            (*queued)++;
            if (ti.queued_call > *last_queued)
                *last_queued = ti.queued_call;
        }
    }
    return with1;
}

/* What test_budget looks at after `calls` calls of a tiered radon. */
typedef struct budget_run {
    kiln_policy *pol;
    kiln_function *f;
    int bad;            /* a call differed from ref's */
    int st[8], queued, gain0, with1;
    int64_t last;
} budget_run;

/* Compile radon with `tiers` (a policy line, cache off), make `calls`
 * calls checked against ref, and count the kernels' states.  r->f is
 * NULL when it does not compile (said with diag). */
static void budget_start(budget_run *r, const char *tiers,
                         kiln_function *ref, int calls)
{
    memset(r, 0, sizeof *r);
    r->pol = tier_policy(tiers);
    r->f = r->pol ? compile_tiered(r->pol, KILN_TIERS_POLICY, NULL) : NULL;
    r->bad = !r->f || same_calls(r->f, ref, 0, calls) != 0;
    if (r->f)
        r->with1 = budget_states(r->f, r->st, &r->queued, &r->last,
                                 &r->gain0);
}

static void budget_end(budget_run *r)
{
    kiln_function_free(r->f);
    kiln_policy_free(r->pol);
}

static void test_budget(kiln_function *ref)
{
    budget_run r;
    /* a predicted compile of 1 ns: the budget is reached at once */
    budget_start(&r, "tiers: {tier0: [interp], tier1: llvm, budget: 1, "
                 "compile_ms: 1e-6, compile_ms_per_op: 0, "
                 "compile_ms_per_input: 0, min_gain_ns: 0, "
                 "sample_every: 1000000}\n", ref, 2);
    kiln_tier_info ti;
    memset(&ti, 0, sizeof ti);
    ti.struct_size = sizeof ti;
    if (r.f)
        kiln_function_tier_info(r.f, 0, &ti);
    ok(!r.bad && r.queued > 0 &&
           r.queued + r.st[KILN_TIER_NEVER] == r.with1 && r.last >= 0 &&
           r.last <= 2 && ti.predicted_compile_ms == 1e-6,
       "budget: after the 2nd call (the first weighed) every kernel is "
       "queued (%d) or gains nothing (%d) of %d; queued at call %lld",
       r.queued, r.st[KILN_TIER_NEVER], r.with1, (long long)r.last);
    ok(r.f && kiln_function_tier_wait(r.f, 120) == 0,
       "budget: the queued compiles end");
    int up = r.f ? count_states(r.f, r.st) : 0;
    ok(up > 0 && same_calls(r.f, ref, 2, 40) == 0,
       "budget: %d kernels swapped; calls after the swaps equal the "
       "interpreter's bitwise", up);
    budget_end(&r);

    /* a predicted compile of 10^9 ms: 300 calls never reach it */
    budget_start(&r, "tiers: {tier0: [interp], tier1: llvm, compile_ms: "
                 "1e9, min_gain_ns: 0, sample_every: 1}\n", ref, 300);
    ok(!r.bad && r.with1 > 0 && r.queued == 0 &&
           r.st[KILN_TIER_WAITING] + r.st[KILN_TIER_NEVER] == r.with1 &&
           r.st[KILN_TIER_WAITING] > 0,
       "budget: not reached in 300 calls, nothing queued (%d waiting)",
       r.st[KILN_TIER_WAITING]);
    budget_end(&r);

    /* llvm predicted no faster than the interpreter: never, whatever the
     * budget */
    budget_start(&r, "cost_model: {backends: {llvm: {call_ns: 1e9}}}\n"
                 "tiers: {tier0: [interp], tier1: llvm, budget: 1, "
                 "compile_ms: 1e-6, compile_ms_per_op: 0, "
                 "compile_ms_per_input: 0, min_gain_ns: 0, "
                 "sample_every: 1}\n", ref, 300);
    ok(!r.bad && r.with1 > 0 && r.queued == 0 &&
           r.st[KILN_TIER_NEVER] == r.with1 && r.gain0 == r.with1 &&
           kiln_function_tier_wait(r.f, 0) == 0,
       "budget: a kernel predicted to gain nothing never tiers up "
       "(%d of %d never, none queued)", r.st[KILN_TIER_NEVER], r.with1);
    budget_end(&r);

    /* preload: the set-up runs in the background, no kernel is queued */
    budget_start(&r, "tiers: {tier0: [interp], tier1: llvm, compile_ms: "
                 "1e9, preload: true}\n", ref, 3);
    ok(!r.bad && kiln_function_tier_wait(r.f, 120) == 0,
       "preload: the background set-up ends; calls equal the "
       "interpreter's");
    if (r.f)
        r.with1 = budget_states(r.f, r.st, &r.queued, &r.last, &r.gain0);
    ok(r.with1 > 0 && r.queued == 0 &&
           r.st[KILN_TIER_QUEUED] + r.st[KILN_TIER_COMPILING] +
                   r.st[KILN_TIER_SWAPPED] == 0,
       "preload: no kernel queued or moved (%d waiting)",
       r.st[KILN_TIER_WAITING]);
    budget_end(&r);
    /* freed while the set-up may still run: returns, leaks nothing */
    budget_start(&r, "tiers: {tier0: [interp], tier1: llvm, preload: "
                 "true}\n", ref, 0);
    ok(r.f != NULL, "preload: a function freed at once");
    budget_end(&r);
}

/* ---- 3, 4: forbid, baseline, off, forced -------------------------------- */

static void test_controls(kiln_function *ref)
{
    kiln_policy *pol = tier_policy("tiers: {tier0: [interp], tier1: llvm, "
                                   "ratio: 1e-6, min_gain_ns: 0, "
                                   "sample_every: 1}\n");
    int st[8] = {0};
    kiln_function *f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL)
                           : NULL;
    if (f) {
        kiln_function_tier_forbid(f);
        int bad = 0;
        for (int k = 0; k < 200 && !bad; k++)
            bad = same_call(f, ref, k) != 0;
        kiln_function_tier_wait(f, 30);
        int up = count_states(f, st);
        ok(!bad && up == 0 && st[KILN_TIER_WAITING] == 0,
           "forbid: 200 calls later nothing moved (%d never)",
           st[KILN_TIER_NEVER]);
    } else
        ok(0, "forbid: compile");
    kiln_function_free(f);

    f = pol ? compile_tiered(pol, KILN_TIERS_BASELINE, NULL) : NULL;
    if (f) {
        int bad = 0;
        for (int k = 0; k < 200 && !bad; k++)
            bad = same_call(f, ref, k) != 0;
        kiln_function_tier_wait(f, 30);
        ok(!bad && count_states(f, st) == 0 && st[KILN_TIER_WAITING] == 0,
           "baseline: 200 calls later nothing moved");
        ok(kiln_function_tier_up(f, -1, NULL) == 0 &&
               count_states(f, st) == 0,
           "baseline: tier_up is refused quietly");
    } else
        ok(0, "baseline: compile");
    kiln_function_free(f);

    f = pol ? compile_tiered(pol, KILN_TIERS_OFF, NULL) : NULL;
    if (f) {
        count_states(f, st);
        ok(st[KILN_TIER_FIXED] == kiln_function_n_kernels(f),
           "off: no kernel has a tier to move to");
    } else
        ok(0, "off: compile");
    kiln_function_free(f);

    f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL) : NULL;
    if (f) {
        ok(same_call(f, ref, 1) == 0, "forced: a call on tier 0");
        kiln_err err;
        int rc = kiln_function_tier_up(f, -1, &err);
        int up = count_states(f, st);
        ok(rc == 0 && up == kiln_function_n_kernels(f),
           "forced: tier_up(-1) moves every kernel (%d of %d)", up,
           kiln_function_n_kernels(f));
        ok(same_call(f, ref, 2) == 0, "forced: the next call equals the "
           "interpreter");
        ok(kiln_function_tier_up(f, kiln_function_n_kernels(f), &err) ==
               KILN_ERR_ARG && strstr(err.message, "no kernel"),
           "forced: a kernel out of range is KILN_ERR_ARG (%s)", err.message);
    } else
        ok(0, "forced: compile");
    kiln_function_free(f);
    kiln_policy_free(pol);
}

/* ---- 5: immediate jobs, free while compiling ---------------------------- */

static void test_free_while_compiling(kiln_function *ref)
{
    /* every kernel's rule says llvm: queued at once */
    kiln_policy *pol = tier_policy("rules:\n  - use: llvm\n"
                                   "tiers: {tier0: [interp], tier1: llvm}\n");
    kiln_function *f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL)
                           : NULL;
    int st[8] = {0};
    if (f) {
        int up = count_states(f, st);
        ok(up + st[KILN_TIER_QUEUED] + st[KILN_TIER_COMPILING] ==
               kiln_function_n_kernels(f),
           "immediate: kernels the rules send to llvm are queued at once "
           "(%d queued, %d compiling, %d done)", st[KILN_TIER_QUEUED],
           st[KILN_TIER_COMPILING], up);
        ok(same_call(f, ref, 3) == 0, "immediate: the first call runs at "
           "once, on tier 0 or 1, and is right");
    } else
        ok(0, "immediate: compile");
    kiln_function_free(f);   /* jobs are still queued or running */
    ok(1, "free while background compiles run returns");
    f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL) : NULL;
    ok(f && kiln_function_tier_wait(f, 120) == 0 &&
           count_states(f, st) == kiln_function_n_kernels(f),
       "immediate: tier_wait sees every kernel on llvm");
    kiln_function_free(f);
    kiln_policy_free(pol);
}

/* ---- 6: threads while tiering up ---------------------------------------- */

typedef struct thr {
    kiln_function *f, *ref;
    int id, bad;
    pthread_mutex_t *ref_lock;
} thr;

static void *thr_main(void *arg)
{
    thr *t = arg;
    for (int k = 0; k < 300 && !t->bad; k++) {
        /* the reference is one more function called from every thread;
         * calls through one function are reentrant, so no lock is needed,
         * but its outputs are per thread: compare right away */
        t->bad = same_call(t->f, t->ref, t->id * 1000 + k) != 0;
    }
    return NULL;
}

static void test_threads(kiln_function *ref)
{
    kiln_policy *pol = tier_policy("tiers: {tier0: [interp], tier1: llvm, "
                                   "ratio: 1e-6, min_gain_ns: 0, "
                                   "sample_every: 2}\n");
    kiln_function *f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL)
                           : NULL;
    if (!f) {
        ok(0, "threads: compile");
        kiln_policy_free(pol);
        return;
    }
    thr t[4];
    pthread_t th[4];
    int started = 0;
    for (int i = 0; i < 4; i++) {
        t[i] = (thr){f, ref, i, 0, NULL};
        if (pthread_create(&th[i], NULL, thr_main, &t[i]) == 0)
            started++;
    }
    int bad = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        bad += t[i].bad;
    }
    kiln_function_tier_wait(f, 60);
    int st[8] = {0};
    int up = count_states(f, st);
    ok(started == 4 && bad == 0, "threads: 4 threads x 300 calls on one "
       "function while it tiers up equal the interpreter (%d kernels up)",
       up);
    kiln_function_free(f);
    kiln_policy_free(pol);
}

/* ---- 8: exit while compiling -------------------------------------------- */

/* The child: compile radon with every kernel queued for llvm at once,
 * call it once and exit while the pool compiles. */
static int child_exit_while_compiling(void)
{
    kiln_policy *pol = tier_policy("rules:\n  - use: llvm\n"
                                   "tiers: {tier0: [interp], tier1: llvm}\n");
    kiln_function *f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL)
                           : NULL;
    if (!f)
        return 3;
    point p;
    make_point(f, 1, &p);
    kiln_tensor out[MAX_IO];
    kiln_err err;
    if (kiln_function_call(f, p.t, out, &err))
        return 4;
    /* exit once a compile is surely inside LLVM: after the first swap,
     * the next job is compiling */
    int st[8] = {0};
    for (int i = 0; i < 2000 && count_states(f, st) == 0; i++)
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    nanosleep(&(struct timespec){0, 20000000}, NULL);
    exit(0);   /* f, its jobs and the pool still running */
}

static void test_exit_while_compiling(const char *self)
{
    int clean = 0, runs = 4;
    for (int r = 0; r < runs; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            execl(self, self, "--exit-while-compiling", (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
            WEXITSTATUS(st) == 0)
            clean++;
        else
            diag("run %d: %s %d", r, WIFSIGNALED(st) ? "signal" : "status",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    ok(clean == runs, "exit while background compiles run: %d of %d "
       "processes exit with status 0", clean, runs);
}

/* ---- 9: found by an attack ---------------------------------------------- */

static void test_attack_inputs(kiln_function *ref)
{
    kiln_policy *pol = tier_policy("rules:\n  - use: llvm\n"
                                   "tiers: {tier0: [interp], tier1: llvm}\n");
    int st[8] = {0};
    kiln_function *f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL)
                           : NULL;
    ok(f && kiln_function_tier_wait(f, INFINITY) == 0 &&
           count_states(f, st) == kiln_function_n_kernels(f),
       "tier_wait(INFINITY) waits for every queued compile and returns 0");
    kiln_function_free(f);
    f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL) : NULL;
    ok(f && kiln_function_tier_wait(f, 1e300) == 0,
       "tier_wait(1e300) is no limit, not an overflow");
    kiln_function_free(f);

    /* fork after the pool has run: the child starts its own workers (not
     * under valgrind, whose forked child runs the compiles too slowly) */
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer does not follow a multithreaded process into a
     * forked child that starts threads again */
    ok(1, "fork # SKIP under ThreadSanitizer");
    goto after_fork;
#endif
    if (getenv("KILN_TEST_UNDER_VALGRIND")) {
        ok(1, "fork # SKIP under valgrind");
        goto after_fork;
    }
    pid_t pid = fork();
    if (pid == 0) {
        kiln_function *g = compile_tiered(pol, KILN_TIERS_POLICY, NULL);
        int cst[8] = {0};
        int good = g && kiln_function_tier_wait(g, 120) == 0 &&
                   count_states(g, cst) == kiln_function_n_kernels(g) &&
                   same_call(g, ref, 7) == 0;
        _exit(good ? 0 : 1);
    }
    int ws = 0;
    ok(pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
           WEXITSTATUS(ws) == 0,
       "a child of fork() tiers every kernel up and computes right");
after_fork:
    kiln_policy_free(pol);

    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.quiet = 1;
    o.tiers = 7;
    kiln_err err;
    f = kiln_compile(radon, &o, &err);
    ok(!f && err.code == KILN_ERR_ARG && strstr(err.message, "tiers"),
       "kiln_options.tiers = 7 is KILN_ERR_ARG (%s)", err.message);
    kiln_function_free(f);

    /* llvm first, rules that pick the interpreter: the model says the
     * interpreter is slower, so no kernel is queued to move down to it */
    pol = tier_policy("tiers: {tier0: [llvm], tier1: tcc}\n");
    f = pol ? compile_tiered(pol, KILN_TIERS_POLICY, NULL) : NULL;
    int down = 0, on_llvm = 0, moving = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        kiln_tier_info ti;
        memset(&ti, 0, sizeof ti);
        ti.struct_size = sizeof ti;
        kiln_function_tier_info(f, i, &ti);
        on_llvm += ti.backend && !strcmp(ti.backend, "llvm");
        down += ti.tier1 && !strcmp(ti.tier1, "interp");
        moving += ti.state == KILN_TIER_QUEUED ||
                  ti.state == KILN_TIER_COMPILING;
    }
    ok(f && on_llvm > 0 && down == 0 && moving == 0,
       "tier0: [llvm] with rules that pick interp: no kernel is queued to "
       "move down to the interpreter (%d of %d on llvm, %d moving)", on_llvm,
       f ? kiln_function_n_kernels(f) : 0, moving);
    kiln_function_free(f);
    kiln_policy_free(pol);
}

int main(int argc, char **argv)
{
    if (getenv("KILN_SRCDIR"))
        srcdir = getenv("KILN_SRCDIR");
    if (getenv("KILN_BUILDDIR"))
        builddir = getenv("KILN_BUILDDIR");
    unsetenv("KILN_BACKEND");
    unsetenv("KILN_POLICY");
    unsetenv("KILN_CACHE");
    if (argc == 2 && !strcmp(argv[1], "--exit-while-compiling")) {
        char p[4096];
        snprintf(p, sizeof p, "%s/examples/radon.kg", srcdir);
        kiln_err e;
        radon = kiln_parse_file(p, &e);
        return radon ? child_exit_while_compiling() : 2;
    }
    if (!have_llvm()) {
        ok(1, "tiers # SKIP the llvm backend is not built");
        return done_testing();
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/radon.kg", srcdir);
    kiln_err err;
    radon = kiln_parse_file(path, &err);
    ok(radon != NULL, "radon parses (%s)", radon ? "" : err.message);
    snprintf(cache_dir, sizeof cache_dir, "/tmp/kiln-test-tiers-XXXXXX");
    if (!radon || !mkdtemp(cache_dir))
        return done_testing();
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.quiet = 1;
    o.backend = "interp";
    o.cache_mode = KILN_CACHE_MODE_OFF;
    kiln_function *ref = kiln_compile(radon, &o, &err);
    ok(ref != NULL, "the interpreter-only reference compiles");
    if (ref) {
        test_cold_warm(ref);
        test_controls(ref);
        test_budget(ref);
        test_free_while_compiling(ref);
        test_threads(ref);
        test_exit_while_compiling(argv[0]);
        test_attack_inputs(ref);
        ok(kiln_function_tier_wait(NULL, 0) == KILN_ERR_ARG,
           "tier_wait(NULL) is KILN_ERR_ARG");
        kiln_tier_info ti = {0};
        ok(kiln_function_tier_info(ref, 0, &ti) == -1,
           "tier_info without struct_size is refused");
        ti.struct_size = sizeof ti;
        ok(kiln_function_tier_info(ref, 0, &ti) == 0 &&
               ti.state == KILN_TIER_FIXED && ti.tier == 0 && !ti.tier1,
           "an explicit backend has no tiers");
    }
    kiln_function_free(ref);
    kiln_graph_free(radon);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        diag("could not remove %s", cache_dir);
    return done_testing();
}
