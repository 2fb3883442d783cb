/*
 * driver.c — the compile driver: kiln_compile runs the pipeline for one
 * graph, in the order it happens (public kiln_compile; nothing else
 * leaves the file).
 *
 *   1. copy the graph, run the rewrite passes on the copy (core/rewrite;
 *      the configuration from the policy, kiln_rw_config_for);
 *   2. fusion and lowering to kernels and buffers (core/lower);
 *   3. the leaves: literals and shared values into their buffers;
 *   4. the plan: a backend chain per kernel (core/policy);
 *   5. the cache session (core/cache) and the backends (core/plugin);
 *   6. compile every kernel — memo of identical kernels, disk cache,
 *      fallback along the chain with diagnostics, in parallel
 *      (kiln_options.jobs) or, with tiers, each on its tier-0 backend;
 *   7. hand the function to the runtime (core/runtime): tier-up starts
 *      (kiln_tier_start, with this file's compile_into for its jobs).
 *
 * The function it makes is the runtime's (core/runtime/vm.c, function.h);
 * this file never runs one.
 */
#define _POSIX_C_SOURCE 200809L  /* strdup, sysconf */
#include "function.h"
#include "loader.h"
#include "ode.h"
#include "topk.h"
#include "recur.h"
#include "progress.h"
#include "rewrite/rewrite.h"
#include "vm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- leaves -------------------------------------------------------- */

static void write_scalar(void *dst, kiln_dtype dt, double v)
{
    switch (dt) {
    case KILN_F64: *(double *)dst = v; break;
    case KILN_F32: *(float *)dst = (float)v; break;
    case KILN_I64: *(int64_t *)dst = (int64_t)v; break;
    case KILN_I32: *(int32_t *)dst = (int32_t)v; break;
    default: *(uint8_t *)dst = v != 0; break;
    }
}

static int setup_leaves(kiln_function *f, kiln_err *err)
{
    kiln_graph *g = f->g;
    kiln_program *p = &f->prog;
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind != KILN_BUF_CONST)
            continue;
        kiln_node *n = &g->nodes[b->node];
        if (n->op == KILN_OP_LITERAL) {
            b->owned = malloc(8);
            if (!b->owned)
                return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            write_scalar(b->owned, n->type.dtype, n->value);
            b->data = b->owned;
            b->rank = 0;
        } else {
            b->data = n->data;
            b->rank = n->type.rank;
            for (int k = 0; k < b->rank; k++)
                b->shape[k] = n->vshape[k];
            b->is_static = 1;
        }
        b->nbytes = kiln_vm_buf_bytes(b);
        /* a shared value's shape fixes its symbols */
        for (int k = 0; n->op == KILN_OP_SHARED && n->data && k < b->rank;
             k++) {
            int64_t d = n->type.dims[k];
            if (KILN_DIM_IS_SYM(d))
                f->symvals_fixed[KILN_SYM_INDEX(d)] = n->vshape[k];
        }
    }
    return 0;
}

/* CPU seconds spent so far by this thread and by reaped child processes
 * (a backend that runs a compiler); the difference of two readings around
 * a compile is what the compile cost, however loaded the machine. */
static double cpu_now(void)
{
    struct timespec t;
    double s = 0;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0)
        s = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
        s += (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
             (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    return s;
}

static void plugin_why(const kiln_backend *be, kiln_plugin_error *pe,
                       const char *what, const char *dflt, char *why,
                       size_t size)
{
    snprintf(why, size, "%s%s", what,
             pe && pe->message ? pe->message : dflt);
    if (pe)
        be->error_free(pe);
}

/* kiln_compile_count: compiles by backends whose code the cache holds */
static atomic_uint_fast64_t compiles;

uint64_t kiln_compile_count(void)
{
    return (uint64_t)atomic_load_explicit(&compiles, memory_order_relaxed);
}

/* What compiling one kernel gave (compile_kernel). */
typedef struct compile_out {
    kiln_callable *c;
    int cache_result;     /* kiln_cache_result */
    int written;
    const char *note;
    double compile_s, saved_s;
    double cpu_s;         /* a compile's CPU seconds; 0 for a cache hit */
} compile_out;

/* Try the disk cache for kernel s: 1 when o->c came from an entry, 0 when
 * it must be compiled (a miss, or a bad entry now removed). */
static int load_cached(kiln_cache_session *cache, const kiln_step *s,
                       const kiln_backend *be, const kiln_compile_options *co,
                       compile_out *o)
{
    void *bytes = NULL;
    size_t len = 0;
    double saved = 0, t0 = kiln_vm_seconds();
    int r = kiln_cache_fetch(cache, be, co, &s->key, &bytes, &len, &saved);
    o->cache_result = r > 0 ? KILN_CACHE_HIT : r < 0 ? KILN_CACHE_BAD
                                                      : KILN_CACHE_MISS;
    if (r <= 0)
        return 0;
    kiln_plugin_error *pe = NULL;
    kiln_callable *c = NULL;
    int rc = be->load_bytes(bytes, len, &c, &pe);
    free(bytes);
    if (rc || !c || !c->fn) {
        char why[600];
        plugin_why(be, pe, "", "unknown error", why, sizeof why);
        if (c)
            be->callable_free(c);
        kiln_cache_reject(cache, be, co, &s->key, why);
        o->cache_result = KILN_CACHE_BAD;
        return 0;
    }
    if (pe)
        be->error_free(pe);
    o->c = c;
    o->compile_s = kiln_vm_seconds() - t0;
    /* what the hit spared: the compile's recorded cost less loading */
    o->saved_s = saved > o->compile_s ? saved - o->compile_s : 0;
    kiln_cache_note_saved(cache, o->saved_s);
    return 1;
}

/* Compile kernel s with backend be into o, through the disk cache when
 * there is one and the backend makes storable artifacts (the caller has
 * checked `supports`); 0, or -1 with the reason in why. */
static int compile_kernel(kiln_cache_session *cache, const kiln_step *s,
                          const kiln_backend *be,
                          const kiln_compile_options *co, compile_out *o,
                          char *why, size_t size)
{
    memset(o, 0, sizeof *o);
    int storable = cache && be->artifact_bytes && be->load_bytes;
    o->cache_result = KILN_CACHE_NONE;
    o->note = !cache ? "the cache is off (or unusable: see the "
                       "diagnostics)"
              : !storable ? "the backend makes no storable artifacts"
                          : NULL;
    if (storable && !kiln_cache_recaching(cache) &&
        load_cached(cache, s, be, co, o))
        return 0;
    if (storable && o->cache_result == KILN_CACHE_NONE)
        o->cache_result = KILN_CACHE_MISS;     /* recache */
    double t0 = kiln_vm_seconds(), c0 = cpu_now();
    kiln_plugin_error *pe = NULL;
    kiln_artifact *art = NULL;
    if (be->compile(&s->kernel, co, &art, &pe)) {
        plugin_why(be, pe, "compile failed: ", "unknown error", why, size);
        return -1;
    }
    if (be->artifact_bytes && be->load_bytes)
        atomic_fetch_add_explicit(&compiles, 1, memory_order_relaxed);
    kiln_callable *c = NULL;
    int rc = be->load(art, &c, &pe);
    if (rc || !c || !c->fn) {
        plugin_why(be, pe, "load failed: ", "unknown error", why, size);
        if (c)
            be->callable_free(c);
        be->artifact_free(art);
        return -1;
    }
    o->compile_s = kiln_vm_seconds() - t0;
    double cpu = cpu_now() - c0;
    o->cpu_s = cpu;
    if (storable) {
        size_t len = 0;
        const void *bytes = be->artifact_bytes(art, &len);
        if (bytes && len)
            o->written = kiln_cache_store(cache, be, co, &s->key, bytes, len,
                                          cpu, &o->note) == 1;
        else
            o->note = "the backend gave no artifact bytes for it";
    }
    be->artifact_free(art);
    o->c = c;
    return 0;
}

/* ---- kernel dedupe -------------------------------------------------- */

/* Identical kernels (same key) compiled with the same backend and options
 * make interchangeable code: a model's gradient repeats the same scalar
 * kernels many times (eight schools: 65 kernels, 32 different).  The
 * first compiled step owns the callable; the others share it
 * (callable_shared) and report KILN_CACHE_SHARED.  Kernels are reentrant
 * and a function runs one call at a time, so sharing is safe. */
struct memo_ent {
    int used;           /* MEMO_EMPTY, _DONE, _PENDING, _FAILED */
    kiln_key key;
    const kiln_backend *be;
    int opts;
    int step;
};

enum { MEMO_EMPTY, MEMO_DONE, MEMO_PENDING, MEMO_FAILED };

static int memo_opts(const kiln_compile_options *co)
{
    return co->opt_level * 4 + (co->fast_math ? 2 : 0) +
           (co->generic_target ? 1 : 0);
}

static size_t memo_slot(const kiln_function *f, const kiln_key *k,
                        const kiln_backend *be, int opts)
{
    uint64_t h = 0;
    memcpy(&h, k->b + 1, sizeof h);
    h ^= (uint64_t)(uintptr_t)be * 0x9e3779b97f4a7c15ull + (uint64_t)opts;
    size_t i = (size_t)h & f->memo_mask;
    while (f->memo[i].used &&
           !(f->memo[i].be == be && f->memo[i].opts == opts &&
             memcmp(f->memo[i].key.b, k->b, KILN_KEY_BYTES) == 0))
        i = (i + 1) & f->memo_mask;
    return i;
}

/* Share an earlier identical step's callable; 1 when done.  0: this
 * step is now the one compiling the kernel (memo_done must follow).  A
 * step whose twin is being compiled by another thread waits for it, so
 * the dedupe does not depend on the number of threads; when the twin
 * failed, this step tries itself. */
static int memo_share(kiln_function *f, kiln_step *s, const kiln_backend *be,
                      const kiln_compile_options *co)
{
    if (!f->memo)
        return 0;
    int opts = memo_opts(co), owner = -1;
    pthread_mutex_lock(&f->memo_lock);
    for (;;) {
        size_t i = memo_slot(f, &s->key, be, opts);
        struct memo_ent *m = &f->memo[i];
        if (m->used == MEMO_DONE) {
            owner = m->step;
            break;
        }
        if (m->used == MEMO_PENDING) {
            pthread_cond_wait(&f->memo_cond, &f->memo_lock);
            continue;
        }
        *m = (struct memo_ent){MEMO_PENDING, s->key, be, opts,
                               (int)(s - f->prog.steps)};
        break;
    }
    pthread_mutex_unlock(&f->memo_lock);
    if (owner < 0)
        return 0;
    const kiln_step *o = &f->prog.steps[owner];
    s->backend = be;
    s->callable = o->callable;
    s->callable_shared = 1;
    s->cache_result = KILN_CACHE_SHARED;
    s->cache_written = 0;
    s->cache_note = NULL;
    s->compile_s = 0;
    s->saved_s = 0;
    return 1;
}

/* The step that memo_share let compile is done: `ok` 1 when it has a
 * callable for its twins, 0 when it failed (a twin may try again). */
static void memo_done(kiln_function *f, kiln_step *s, const kiln_backend *be,
                      const kiln_compile_options *co, int ok)
{
    if (!f->memo)
        return;
    pthread_mutex_lock(&f->memo_lock);
    size_t i = memo_slot(f, &s->key, be, memo_opts(co));
    f->memo[i] = (struct memo_ent){ok ? MEMO_DONE : MEMO_FAILED, s->key, be,
                                   memo_opts(co), (int)(s - f->prog.steps)};
    pthread_cond_broadcast(&f->memo_cond);
    pthread_mutex_unlock(&f->memo_lock);
}

/* Compile one step with backend `be` (compile_kernel), sharing an
 * identical step's callable when there is one; 0 on success, else the
 * reason in why. */
static int compile_step_unlocked(kiln_function *f, kiln_step *s,
                                 const kiln_backend *be,
                                 const kiln_compile_options *co, char *why,
                                 size_t size)
{
    if (memo_share(f, s, be, co))
        return 0;
    kiln_plugin_error *pe = NULL;
    if (be->supports && !be->supports(&s->kernel, &pe)) {
        plugin_why(be, pe, "refused: ", "unsupported", why, size);
        memo_done(f, s, be, co, 0);
        return -1;
    }
    if (pe)
        be->error_free(pe);
    compile_out o;
    int rc = compile_kernel(f->cache, s, be, co, &o, why, size);
    s->cache_result = o.cache_result;
    s->cache_written = o.written;
    s->cache_note = o.note;
    s->compile_s = o.compile_s;
    s->saved_s = o.saved_s;
    if (rc == 0) {
        s->backend = be;
        s->callable = o.c;
    }
    memo_done(f, s, be, co, rc == 0);
    return rc;
}

static int compile_step(kiln_function *f, kiln_step *s,
                        const kiln_backend *be,
                        const kiln_compile_options *co, char *why,
                        size_t size)
{
    int serial = !(be->flags & KILN_BACKEND_THREAD_SAFE);
    if (serial)
        kiln_vm_serial_lock();
    int rc = compile_step_unlocked(f, s, be, co, why, size);
    if (serial)
        kiln_vm_serial_unlock();
    if (rc == 0)
        kiln_progress_step(f->progress);
    return rc;
}

/* kiln_compile_into_fn (function.h): tier-up's compile of one kernel. */
static int compile_into(kiln_function *f, const kiln_step *s,
                        const kiln_backend *be,
                        const kiln_compile_options *co, kiln_callable **out,
                        double *seconds, double *cpu_seconds, char *why,
                        size_t size)
{
    int serial = !(be->flags & KILN_BACKEND_THREAD_SAFE);
    if (serial)
        kiln_vm_serial_lock();
    kiln_plugin_error *pe = NULL;
    int rc = -1;
    compile_out o = {0};
    if (be->supports && !be->supports(&s->kernel, &pe))
        plugin_why(be, pe, "refused: ", "unsupported", why, size);
    else {
        if (pe)
            be->error_free(pe);
        rc = compile_kernel(f->cache, s, be, co, &o, why, size);
    }
    if (serial)
        kiln_vm_serial_unlock();
    *out = rc == 0 ? o.c : NULL;
    *seconds = o.compile_s;
    *cpu_seconds = o.cpu_s;
    return rc;
}

/* Parallel compilation (kiln_options.jobs): a small pool of threads takes
 * steps in order from a shared counter and compiles each with the backend
 * the plan gave it, keeping the reason of a failure; the fallbacks, their
 * diagnostics and the final error are then handled in step order by the
 * calling thread, exactly as a serial compile would. */
typedef struct compile_pool {
    kiln_function *f;
    const kiln_backend **be;    /* per step: backend to try, NULL: skip */
    const kiln_compile_options **co;  /* per step */
    char **why;                 /* per step: NULL, or the failure reason */
    int *failed;
    int next;
    pthread_mutex_t lock;
} compile_pool;

static void *compile_worker(void *arg)
{
    compile_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->f->prog.n_steps)
            return NULL;
        if (!p->be[i])
            continue;
        char why[600];
        if (compile_step(p->f, &p->f->prog.steps[i], p->be[i], p->co[i],
                         why, sizeof why)) {
            p->failed[i] = 1;
            p->why[i] = strdup(why);  /* NULL: reported as "unknown" */
        }
    }
}

static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* Compile the steps with a backend in be[] on `jobs` threads; failed[i]
 * and why[i] record failures.  Returns -1 when the pool cannot be set up
 * (the caller then compiles serially). */
static int compile_parallel(kiln_function *f, const kiln_backend **be,
                            const kiln_compile_options **co, int jobs,
                            int *failed, char **why)
{
    compile_pool p = {f, be, co, why, failed, 0, PTHREAD_MUTEX_INITIALIZER};
    if (jobs > f->prog.n_steps)
        jobs = f->prog.n_steps;
    pthread_t *th = malloc(sizeof *th * (size_t)jobs);
    if (!th)
        return -1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* optimisers recurse: more than the smallest default stacks */
    pthread_attr_setstacksize(&attr, (size_t)16 << 20);
    int started = 0;
    for (int t = 1; t < jobs; t++) {
        if (pthread_create(&th[t], &attr, compile_worker, &p) != 0)
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    compile_worker(&p);         /* the calling thread works too */
    for (int t = 1; t <= started; t++)
        pthread_join(th[t], NULL);
    free(th);
    pthread_mutex_destroy(&p.lock);
    return 0;
}

static int begin_cache(kiln_function *f, const kiln_options *opt,
                       kiln_err *err);

#define MAX_CHAIN 16

/* The backends of a plan's chain, loaded on first use. */
typedef struct chain_state {
    int n;
    const kiln_plan *pl;
    const kiln_backend *interp;
    const char *path;
    FILE *diag;
    int quiet;
    const kiln_backend *be[MAX_CHAIN];
    int state[MAX_CHAIN];       /* 0 not tried, 1 loaded, -1 missing */
    int told[MAX_CHAIN];        /* the missing diagnostic was printed */
    char missing[MAX_CHAIN][sizeof ((kiln_err *)0)->message];
    kiln_compile_options co[MAX_CHAIN];
} chain_state;

/* The first backend of the chain at index c or after that is installed
 * (loading it), or ch->n when none is. */
static int chain_next(chain_state *ch, int c)
{
    for (; c < ch->n; c++) {
        if (ch->state[c] == 0) {
            const char *bn = kiln_plan_chain(ch->pl, c);
            kiln_err lerr = {0, ""};
            ch->be[c] = strcmp(bn, "interp") == 0
                            ? ch->interp
                            : kiln_loader_get(bn, ch->path, ch->diag,
                                              ch->quiet, &lerr);
            ch->state[c] = ch->be[c] ? 1 : -1;
            snprintf(ch->missing[c], sizeof ch->missing[c], "%s",
                     lerr.message);
        }
        if (ch->state[c] > 0)
            return c;
    }
    return ch->n;
}

/* Kernels passed on to the next backend, said once per cause (backend,
 * reason, next backend) with a count: a policy that sends every kernel to
 * a backend that refuses them gives one line, not one per kernel. */
typedef struct pass_cause {
    char *text;          /* "BACKEND\nWHY\nNEXT", the group */
    int n, kernel;
    char label[48];
} pass_cause;

typedef struct pass_on {
    pass_cause *v;
    int n;
} pass_on;

static void pass_on_note(pass_on *po, const char *be, int kernel,
                         const char *label, const char *why,
                         const char *next)
{
    char text[1400];
    snprintf(text, sizeof text, "%s\n%s\n%s", be, why, next);
    for (int i = 0; i < po->n; i++)
        if (!strcmp(po->v[i].text, text)) {
            po->v[i].n++;
            return;
        }
    pass_cause *v = realloc(po->v, sizeof *v * (size_t)(po->n + 1));
    if (!v)
        return;
    po->v = v;
    v[po->n].text = strdup(text);
    if (!v[po->n].text)
        return;
    v[po->n].n = 1;
    v[po->n].kernel = kernel;
    snprintf(v[po->n].label, sizeof v[po->n].label, "%s", label);
    po->n++;
}

static void pass_on_print(pass_on *po, FILE *out)
{
    for (int i = 0; i < po->n; i++) {
        pass_cause *c = &po->v[i];
        char *why = strchr(c->text, '\n');
        *why++ = '\0';
        char *next = strchr(why, '\n');
        *next++ = '\0';
        if (c->n == 1)
            fprintf(out, "kiln: backend '%s' on kernel %d (%s): %s; using "
                    "%s\n", c->text, c->kernel, c->label, why, next);
        else
            fprintf(out, "kiln: backend '%s' on %d kernels (the first: "
                    "kernel %d, %s): %s; using %s\n", c->text, c->n,
                    c->kernel, c->label, why, next);
        free(c->text);
    }
    free(po->v);
    po->v = NULL;
    po->n = 0;
}

/* ---- tiered compile (docs/policy.md, "Tiers") ------------------------ */

#define MAX_TIER_BE 8

/* The backends of one tiered compile, each loaded once. */
typedef struct tier_bes {
    int n;
    const char *name[MAX_TIER_BE];
    const kiln_backend *be[MAX_TIER_BE];   /* NULL: missing */
} tier_bes;

static const kiln_backend *tier_backend(tier_bes *tb, chain_state *ch,
                                        const char *name, FILE *out)
{
    for (int i = 0; i < tb->n; i++)
        if (!strcmp(tb->name[i], name))
            return tb->be[i];
    kiln_err lerr = {0, ""};
    const kiln_backend *be = !strcmp(name, "interp")
                                 ? ch->interp
                                 : kiln_loader_get(name, ch->path, ch->diag,
                                                   ch->quiet, &lerr);
    if (!be && !ch->quiet)
        fprintf(out, "kiln: tiers: %s; kernels that would use it stay "
                "where they start\n", lerr.message);
    if (tb->n < MAX_TIER_BE) {
        tb->name[tb->n] = name;
        tb->be[tb->n++] = be;
    }
    return be;
}

static int in_list(const char *const *v, const char *name)
{
    for (; v && *v; v++)
        if (!strcmp(*v, name))
            return 1;
    return 0;
}

/* The compile options for tier backend `name`, kept in f for the jobs. */
static const kiln_compile_options *tier_options(kiln_function *f,
                                                const char *name,
                                                const kiln_compile_options *b)
{
    int k = 0;
    for (; k < 4 && f->co1_name[k]; k++)
        if (!strcmp(f->co1_name[k], name))
            return &f->co1[k];
    if (k == 4)
        k = 3;
    f->co1_name[k] = name;
    kiln_plan_compile_options(f->plan, name, b, &f->co1[k]);
    return &f->co1[k];
}

static int kernel_supported(const kiln_backend *be, const kiln_step *s)
{
    kiln_plugin_error *pe = NULL;
    int ok = !be->supports || be->supports(&s->kernel, &pe);
    if (pe)
        be->error_free(pe);
    return ok;
}

static int storable_in(const kiln_function *f, const kiln_backend *be)
{
    return f->cache && be->artifact_bytes && be->load_bytes &&
           !kiln_cache_recaching(f->cache);
}

/* Load step s's code for be from the disk cache when it is there: 1 when
 * s now runs it. */
static int start_cached(kiln_function *f, kiln_step *s,
                        const kiln_backend *be, const kiln_compile_options *co)
{
    if (!storable_in(f, be) || !kernel_supported(be, s))
        return 0;
    compile_out o = {0};
    int serial = !(be->flags & KILN_BACKEND_THREAD_SAFE);
    if (serial)
        kiln_vm_serial_lock();
    int hit = load_cached(f->cache, s, be, co, &o);
    if (serial)
        kiln_vm_serial_unlock();
    if (!hit)
        return 0;
    s->backend = be;
    s->callable = o.c;
    s->cache_result = KILN_CACHE_HIT;
    s->cache_written = 0;
    s->cache_note = NULL;
    s->compile_s = o.compile_s;
    s->saved_s = o.saved_s;
    kiln_progress_step(f->progress);
    return 1;
}

/* kiln_cache_may_have, asked once per backend name per compile. */
static int may_have(kiln_function *f, const char *name, int *may,
                    const char **names, int *n)
{
    if (!f->cache || kiln_cache_recaching(f->cache))
        return 0;
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], name))
            return may[i];
    int m = kiln_cache_may_have(f->cache, name);
    if (*n < MAX_TIER_BE + 1) {
        names[*n] = name;
        may[(*n)++] = m;
    }
    return m;
}

/* Every kernel gets its tier-0 code now: tier-1 code from the disk cache
 * when it is there (no background work for it), else the tier-0 backend
 * that starts sooner (a cached artifact, else the smaller cost-model
 * compile time).  Its tier-1 backend is the rules' choice when that is
 * not a tier-0 backend (compiled in the background at once), else the
 * policy's tiers.tier1 (compiled when the trigger fires: core/runtime/tier.c).
 * A backend is loaded only when a kernel starts on it or the cache may
 * hold its code (kiln_cache_may_have): a cold start loads neither tcc
 * nor llvm; the jobs load tier 1 when they run. */
static int compile_tiered(kiln_function *f, const kiln_policy_knobs *kn,
                          int mode, int threads, chain_state *ch,
                          const kiln_compile_options *co, FILE *out,
                          kiln_err *err)
{
    kiln_plan *pl = f->plan;
    const kiln_policy *pol = kiln_plan_policy(pl);
    int n = f->prog.n_steps;
    f->tiers = calloc((size_t)(n ? n : 1), sizeof *f->tiers);
    if (!f->tiers)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    if (ch->path && !(f->plugin_path = strdup(ch->path)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    f->sample_every = kn->tier_sample_every > 0 ? kn->tier_sample_every : 64;
    f->budget = kn->tier_budget > 0 ? kn->tier_budget : 0.1;
    f->compile_model[0] = kn->tier_compile_ms;
    f->compile_model[1] = kn->tier_compile_ms_per_op;
    f->compile_model[2] = kn->tier_compile_ms_per_input;
    f->preload = kn->tier_preload;
    f->min_gain_ns = kn->tier_min_gain_ns >= 0 ? kn->tier_min_gain_ns : 20;
    f->n_threads = threads > 0 ? threads : kn->tier_threads;
    f->forbidden = mode == KILN_TIERS_BASELINE;
    tier_bes tb = {0};
    static const char *const dflt0[] = {"interp", "tcc", NULL};
    const char *const *t0 = kn->tier0 ? kn->tier0 : dflt0;
    const char *t1 = kn->tier1 ? kn->tier1 : "llvm";
    /* which backends the cache may hold code of: asked once each */
    int may[MAX_TIER_BE + 1];
    const char *may_name[MAX_TIER_BE + 1];
    int n_may = 0;
#define MAY_HAVE(nm)                                                       \
    may_have(f, (nm), may, may_name, &n_may)
    for (int i = 0; i < n; i++) {
        kiln_step *s = &f->prog.steps[i];
        kiln_tier_step *t = &f->tiers[i];
        const char *target = kiln_plan_chain(pl, kiln_plan_start(pl, i));
        int in0 = in_list(t0, target);
        const char *name1 = in0 ? t1 : target;
        const kiln_compile_options *c1 = tier_options(f, name1, co);
        t->owner = i;
        t->swapped_call = -1;
        t->swapped_s = -1;
        t->queued_call = -1;
        t->queued_s = -1;
        if (s->callable) {   /* a scan, run by the host (attach_recur) */
            t->tier = 0;
            t->be0 = s->backend;
            atomic_init(&t->state, KILN_TIER_FIXED);
            continue;
        }
        if (mode == KILN_TIERS_POLICY && MAY_HAVE(name1)) {
            const kiln_backend *b1 = tier_backend(&tb, ch, name1, out);
            if (b1 && start_cached(f, s, b1, c1)) {
                t->tier = 1;
                t->be0 = b1;
                atomic_init(&t->state, KILN_TIER_FIXED);
                continue;
            }
        }
        /* tier 0: a cached artifact starts at once; else the cheapest
         * compile */
        const char *best = NULL;
        double best_ms = 0;
        int cached = 0;
        for (const char *const *nm = t0; *nm && !cached; nm++) {
            if (!strcmp(*nm, name1))
                continue;
            if (strcmp(*nm, "interp") && MAY_HAVE(*nm)) {
                const kiln_backend *be = tier_backend(&tb, ch, *nm, out);
                if (be && start_cached(f, s, be, tier_options(f, *nm, co))) {
                    cached = 1;
                    break;
                }
            }
            double ms = kiln_policy_compile_ms(pol, *nm,
                                               (int)s->kernel.n_instrs,
                                               (int)s->kernel.n_inputs);
            if (!best || ms < best_ms) {
                best = *nm;
                best_ms = ms;
            }
        }
        char why[600] = "no tier-0 backend is available";
        const kiln_backend *b0 = best ? tier_backend(&tb, ch, best, out)
                                      : NULL;
        if (!cached &&
            (!b0 || compile_step(f, s, b0,
                                         tier_options(f, best, co), why,
                                         sizeof why)) &&
            (b0 == ch->interp ||
             compile_step(f, s, ch->interp,
                                  tier_options(f, "interp", co), why,
                                  sizeof why))) {
            char lbl[160];
            return kiln_seterr(err, KILN_ERR_BACKEND,
                               "no backend could compile kernel %d (%s) of "
                               "%s: %s", i, s->label,
                               kiln_vm_node_label(f->g, s->node, lbl,
                                                  sizeof lbl), why);
        }
        t->be0 = s->backend;
        t->tier = 0;
        /* a target the model expects to run no faster than the code the
         * kernel starts on (the interpreter, from tier0: [tcc]) is no
         * tier above it: the kernel moves to tiers.tier1 instead */
        if (!in0 && strcmp(t1, s->backend->name)) {
            kiln_kernel_info ki;
            memset(&ki, 0, sizeof ki);
            ki.struct_size = sizeof ki;
            double cost = kiln_function_kernel_info(f, i, &ki, NULL) == 0
                              ? ki.facts.cost : 0;
            if (kiln_policy_call_ns(pol, target, cost) >=
                kiln_policy_call_ns(pol, s->backend->name, cost)) {
                name1 = t1;
                c1 = tier_options(f, name1, co);
                in0 = 1;
            }
        }
        int none = !strcmp(name1, s->backend->name);
        t->name1 = none ? NULL : name1;
        t->co1 = c1;
        t->immediate = !in0;
        atomic_init(&t->state, none ? KILN_TIER_FIXED
                               : mode == KILN_TIERS_BASELINE ? KILN_TIER_NEVER
                                                             : KILN_TIER_WAITING);
    }
#undef MAY_HAVE
    return 0;
}

static int compile_all(kiln_function *f, kiln_plan *pl, const char *name,
                       const char *path, FILE *diag, int quiet, int jobs,
                       int tiers, int tier_threads,
                       const kiln_compile_options *cop, FILE *out,
                       kiln_err *err);
static kiln_function *compile_graph(const kiln_graph *graph,
                                    const kiln_options *opt, int allow_hoist,
                                    kiln_err *err);

/* Scans (RECUR steps, issue 28): compile each body as a function of its
 * own, with the caller's options (its kernels go through the policy, the
 * cache and the backends as any), and give the step the host's callable
 * that calls it once per step (core/runtime/recur.c). */
/* The options a body is compiled with: the caller's, quiet (the model's
 * compile said what the backends do). */
static void body_options(kiln_options *po, const kiln_options *opt)
{
    memset(po, 0, sizeof *po);
    if (opt)
        memcpy(po, opt, opt->struct_size < sizeof *po ? opt->struct_size
                                                      : sizeof *po);
    po->struct_size = sizeof *po;
    po->quiet = 1;
}

/* ODE steps (issue 28): the body (the right-hand side) and the graph of
 * the body with its Jacobian (kiln_ir_ode_rhs_jacobian: dy and jac from
 * one call) compiled as functions of their own with the caller's options,
 * run by the host's ODE callable (core/runtime/ode.c).  The body alone
 * serves the steps that need f only (RK45 states, BDF's Newton). */
static int attach_ode(kiln_function *f, kiln_step *s,
                      const kiln_options *opt, kiln_err *err)
{
    const kiln_node *n = &f->g->nodes[s->node];
    const kiln_attrs *a = n->attrs;
    char lbl[160];
    kiln_vm_node_label(f->g, s->node, lbl, sizeof lbl);
    kiln_options po;
    body_options(&po, opt);
    kiln_graph *jg = kiln_ir_ode_rhs_jacobian(a->body, err);
    kiln_function *rf = jg ? compile_graph(a->body, &po, 0, err) : NULL;
    kiln_function *rjf = rf ? compile_graph(jg, &po, 0, err) : NULL;
    kiln_graph_free(jg);
    if (!rjf) {
        kiln_function_free(rf);
        kiln_err_prefix(err, "%s: body '%s': ", lbl,
                        a->body->name ? a->body->name : "?");
        return err ? err->code : KILN_ERR_BACKEND;
    }
    const char *op = kiln_ir_op_info(n->op)->name;
    char label[200];
    if (n->name)
        snprintf(label, sizeof label, "%s '%s'", op, n->name);
    else
        snprintf(label, sizeof label, "%s", op);
    if (kiln_ode_callable(rf, NULL, rjf, n->op == KILN_OP_ODE_BDF
                                            ? KILN_ODE_BDF : KILN_ODE_RK45,
                          a->rtol, a->atol, a->max_steps, label, a->sens == 1,
                          &s->callable)) {
        kiln_function_free(rf);
        kiln_function_free(rjf);
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    }
    s->backend = &kiln_ode_backend;
    kiln_key_of_kernel(&s->kernel, &s->key, NULL);
    return 0;
}

/* top_k steps (issue 29): run by the host (core/runtime/topk.c). */
static int attach_topk(kiln_function *f, kiln_step *s, kiln_err *err)
{
    const kiln_node *n = &f->g->nodes[s->node];
    char label[160];
    if (n->name)
        snprintf(label, sizeof label, "top_k '%s'", n->name);
    else
        snprintf(label, sizeof label, "top_k");
    if (kiln_topk_callable(s->kernel.axis, label, &s->callable))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    s->backend = &kiln_topk_backend;
    kiln_key_of_kernel(&s->kernel, &s->key, NULL);
    return 0;
}

static int attach_recur(kiln_function *f, const kiln_options *opt,
                        kiln_err *err)
{
    for (int i = 0; i < f->prog.n_steps; i++) {
        kiln_step *s = &f->prog.steps[i];
        if (s->kernel.kind == KILN_KERNEL_ODE) {
            if (attach_ode(f, s, opt, err))
                return err ? err->code : KILN_ERR_BACKEND;
            continue;
        }
        if (s->kernel.kind == KILN_KERNEL_TOPK) {   /* issue 29 */
            if (attach_topk(f, s, err))
                return err ? err->code : KILN_ERR_NOMEM;
            continue;
        }
        /* a RECUR kernel with a program (the pass `recur`) is compiled
         * by a backend as any kernel: no body function */
        if (s->kernel.kind != KILN_KERNEL_RECUR || s->kernel.n_instrs)
            continue;
        const kiln_node *n = &f->g->nodes[s->node];
        kiln_options po;
        body_options(&po, opt);
        kiln_function *bf = compile_graph(n->attrs->body, &po, 0, err);
        if (!bf) {
            char lbl[160];
            kiln_err_prefix(err, "%s: body '%s': ",
                            kiln_vm_node_label(f->g, s->node, lbl,
                                               sizeof lbl),
                            n->attrs->body->name);
            return err ? err->code : KILN_ERR_BACKEND;
        }
        int nc = n->attrs->n_carry, ns = n->attrs->n_seq;
        if (kiln_recur_callable(bf, nc, ns, n->n_in - nc - ns,
                                (int)s->n_out, n->attrs->n_steps,
                                &s->callable)) {
            kiln_function_free(bf);
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        }
        s->backend = &kiln_recur_backend;
        kiln_key_of_kernel(&s->kernel, &s->key, NULL);
    }
    return 0;
}

/* Compile every step with the backend the plan (core/policy/policy.c: the
 * policy, or an explicit backend) chose for it, walking down the plan's
 * chain when that backend is missing, refuses the kernel or fails to
 * compile it: one diagnostic line per missing backend and per kernel
 * passed on, and the reason kept for kiln explain. */
static int compile_steps(kiln_function *f, const kiln_options *opt,
                         kiln_err *err)
{
    int jobs = 0, tiers = KILN_TIERS_POLICY, tier_threads = 0;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    /* $KILN_BACKEND names the backend when the options do not; an
     * explicit backend overrides the policy */
    const char *name = getenv("KILN_BACKEND");
    if (name && !*name)
        name = NULL;
    const char *path = NULL;
    FILE *diag = NULL;
    int quiet = 0;
    if (opt) {
        size_t sz = opt->struct_size;
        if (sz >= offsetof(kiln_options, backend) + sizeof(char *) &&
            opt->backend)
            name = opt->backend;
        if (sz >= offsetof(kiln_options, plugin_path) + sizeof(char *))
            path = opt->plugin_path;
        if (sz >= offsetof(kiln_options, diag) + sizeof(void *))
            diag = opt->diag;
        if (sz >= offsetof(kiln_options, quiet) + sizeof(int))
            quiet = opt->quiet;
        if (sz >= offsetof(kiln_options, jobs) + sizeof(int))
            jobs = opt->jobs;
        if (sz >= offsetof(kiln_options, opt_level) + sizeof(int) &&
            opt->opt_level >= 1 && opt->opt_level <= 3)
            co.opt_level = opt->opt_level;
        if (sz >= offsetof(kiln_options, fast_math) + sizeof(int))
            co.fast_math = opt->fast_math != 0;
        if (sz >= offsetof(kiln_options, generic_target) + sizeof(int))
            co.generic_target = opt->generic_target != 0;
        if (sz >= offsetof(kiln_options, tiers) + sizeof(int))
            tiers = opt->tiers;
        if (sz >= offsetof(kiln_options, tier_threads) + sizeof(int))
            tier_threads = opt->tier_threads;
    }
    if (tiers < KILN_TIERS_POLICY || tiers > KILN_TIERS_BASELINE)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_options.tiers: %d is "
                           "not a kiln_tiers_mode (0 policy, 1 off, 2 "
                           "baseline)", tiers);
    if (tier_threads < 0)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_options.tier_threads: "
                           "%d is negative", tier_threads);
    if (jobs <= 0)
        jobs = default_jobs();
    FILE *out = diag ? diag : stderr;
    f->plan = kiln_plan_make(opt, name, f->g, &f->prog, err);
    if (!f->plan)
        return err ? err->code : KILN_ERR_POLICY;
    kiln_plan *pl = f->plan;
    if (begin_cache(f, opt, err))
        return err ? err->code : KILN_ERR_ARG;
    if (attach_recur(f, opt, err))
        return err ? err->code : KILN_ERR_NOMEM;
    kiln_progress prog;
    kiln_progress_begin(&prog, f->prog.n_steps, diag, quiet);
    f->progress = &prog;
    int rc = compile_all(f, pl, name, path, diag, quiet, jobs, tiers,
                         tier_threads, &co, out, err);
    f->progress = NULL;
    kiln_progress_end(&prog);
    return rc;
}

/* compile_steps once the plan and the cache are set up. */
static int compile_all(kiln_function *f, kiln_plan *pl, const char *name,
                       const char *path, FILE *diag, int quiet, int jobs,
                       int tiers, int tier_threads,
                       const kiln_compile_options *cop, FILE *out,
                       kiln_err *err)
{
    kiln_compile_options co = *cop;
    const kiln_backend *interp = kiln_loader_get("interp", path, diag, quiet,
                                                 NULL);
    if (!interp)
        interp = kiln_loader_builtin_interp();
    /* the chain's backends, each loaded when a kernel first needs it (a
     * process that never uses llvm never loads libLLVM); a missing one
     * stays NULL */
    chain_state ch;
    ch.n = kiln_plan_n_chain(pl);
    ch.pl = pl;
    ch.interp = interp;
    ch.path = path;
    ch.diag = diag;
    ch.quiet = quiet;
    for (int c = 0; c < ch.n && c < MAX_CHAIN; c++) {
        ch.be[c] = NULL;
        ch.state[c] = 0;
        ch.told[c] = 0;
        ch.missing[c][0] = 0;
        kiln_plan_compile_options(pl, kiln_plan_chain(pl, c), &co,
                                  &ch.co[c]);
    }
    if (name)
        tiers = KILN_TIERS_OFF;     /* an explicit backend: one tier */
    kiln_policy_knobs knobs;
    memset(&knobs, 0, sizeof knobs);
    knobs.struct_size = sizeof knobs;
    if (tiers != KILN_TIERS_OFF && kiln_plan_policy(pl) &&
        kiln_policy_get_knobs(kiln_plan_policy(pl), &knobs) == 0 &&
        knobs.tiers_enabled)
        return compile_tiered(f, &knobs, tiers, tier_threads, &ch, &co, out,
                              err);
    int nc = ch.n;
    const kiln_backend **bes = ch.be;
    kiln_compile_options *cos = ch.co;
    /* the first backend each step tries (a missing one passes on) */
    int n = f->prog.n_steps;
    int *first = calloc((size_t)(n ? n : 1), sizeof *first);
    if (!first)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    int n_pool = 0;
    for (int i = 0; i < n; i++) {
        int c = chain_next(&ch, kiln_plan_start(pl, i));
        first[i] = c;
        if (c < nc && bes[c] != interp &&
            (bes[c]->flags & KILN_BACKEND_THREAD_SAFE))
            n_pool++;
    }
    /* Thread-safe plugins other than the interpreter (whose "compile" is a
     * copy) compile on the pool; the rest in this thread. */
    int *failed = NULL;
    char **whys = NULL;
    const kiln_backend **pbe = NULL;
    const kiln_compile_options **pco = NULL;
    if (jobs > 1 && n_pool > 1) {
        failed = calloc((size_t)n, sizeof *failed);
        whys = calloc((size_t)n, sizeof *whys);
        pbe = calloc((size_t)n, sizeof *pbe);
        pco = calloc((size_t)n, sizeof *pco);
        int okay = failed && whys && pbe && pco;
        for (int i = 0; okay && i < n; i++) {
            int c = first[i];
            if (c < nc && bes[c] != interp &&
                (bes[c]->flags & KILN_BACKEND_THREAD_SAFE)) {
                pbe[i] = bes[c];
                pco[i] = &cos[c];
            }
        }
        if (!okay || compile_parallel(f, pbe, pco, jobs, failed, whys)) {
            free(failed);  /* steps already compiled are kept */
            free(whys);
            failed = NULL;
            whys = NULL;
        }
    }
    int rc = 0;
    pass_on po = {0};
    for (int i = 0; i < n; i++) {
        kiln_step *s = &f->prog.steps[i];
        if (s->callable)
            continue;
        char why[600] = "no backend in the chain is available";
        int done = 0;
        /* backends the plan chose that are missing: say so once each */
        for (int c = kiln_plan_start(pl, i); c < first[i]; c++) {
            char r[sizeof ch.missing[c]];
            snprintf(r, sizeof r, "%s", ch.missing[c]);
            kiln_plan_set_fallback(pl, i, r);
            if (!ch.told[c] && !quiet && first[i] < nc)
                fprintf(out, "kiln: %s; using %s\n", ch.missing[c],
                        kiln_plan_chain(pl, first[i]));
            ch.told[c] = 1;
        }
        for (int c = first[i]; c < nc && !done; c = chain_next(&ch, c + 1)) {
            if (c == first[i] && failed && pbe[i]) {
                snprintf(why, sizeof why, "%s",
                         whys[i] ? whys[i] : "unknown error");
            } else if (compile_step(f, s, bes[c], &cos[c], why,
                                    sizeof why) == 0) {
                done = 1;
                break;
            }
            /* pass the kernel on to the next backend there is */
            int next = chain_next(&ch, c + 1);
            char r[700];
            snprintf(r, sizeof r, "backend '%s': %s", bes[c]->name, why);
            kiln_plan_set_fallback(pl, i, r);
            if (next < nc && !quiet)
                pass_on_note(&po, bes[c]->name, i, s->label, why,
                             kiln_plan_chain(pl, next));
        }
        /* a fused scan loop (the pass `recur`) that no backend of the
         * chain compiles: the interpreter runs every one */
        if (!done && s->kernel.kind == KILN_KERNEL_RECUR &&
            s->kernel.n_instrs && interp &&
            compile_step(f, s, interp, &co, why, sizeof why) == 0)
            done = 1;
        if (done)
            continue;
        char lbl[160];
        rc = kiln_seterr(err, KILN_ERR_BACKEND,
                         "no backend could compile kernel %d (%s) of %s: "
                         "%s", i, s->label,
                         kiln_vm_node_label(f->g, s->node, lbl, sizeof lbl), why);
        break;
    }
    pass_on_print(&po, out);
    for (int i = 0; whys && i < n; i++)
        free(whys[i]);
    free(whys);
    free(failed);
    free(pbe);
    free(pco);
    free(first);
    return rc;
}

/* Compute every kernel's key (whatever backend compiles it: kiln explain
 * and --cache-report show it) and open the disk cache for this compile. */
static int begin_cache(kiln_function *f, const kiln_options *opt,
                       kiln_err *err)
{
    int mode = KILN_CACHE_MODE_DEFAULT, quiet = 0;
    const char *dir = NULL;
    FILE *diag = NULL;
    if (opt) {
        size_t sz = opt->struct_size;
        if (sz >= offsetof(kiln_options, diag) + sizeof(void *))
            diag = opt->diag;
        if (sz >= offsetof(kiln_options, quiet) + sizeof(int))
            quiet = opt->quiet;
        if (sz >= offsetof(kiln_options, cache_mode) + sizeof(int))
            mode = opt->cache_mode;
        if (sz >= offsetof(kiln_options, cache_dir) + sizeof(char *))
            dir = opt->cache_dir;
    }
    for (int i = 0; i < f->prog.n_steps; i++)
        kiln_key_of_kernel(&f->prog.steps[i].kernel, &f->prog.steps[i].key,
                           NULL);
    kiln_policy_knobs knobs;
    memset(&knobs, 0, sizeof knobs);
    knobs.struct_size = sizeof knobs;
    const kiln_policy *pol = kiln_plan_policy(f->plan);
    kiln_err cerr = {0, ""};
    int have_knobs = pol && kiln_policy_get_knobs(pol, &knobs) == 0;
    f->cache = kiln_cache_session_begin(mode, dir, have_knobs ? &knobs : NULL,
                                        diag, quiet, &cerr);
    if (cerr.code)
        return kiln_seterr(err, cerr.code, "%s", cerr.message);
    if (have_knobs) {
        /* the policy's choice between BLAS and kiln's matrix-vector loop
         * (`blas:`), read by kernels through the runtime table */
        kiln_gemv_conf gc = { knobs.blas_gemv, { knobs.blas_loop_max_cols[0],
                                                 knobs.blas_loop_max_cols[1] } };
        f->rt = kiln_runtime_for(&gc);
        if (!f->rt)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    }
    size_t cap = 16;
    while (cap < 2 * (size_t)f->prog.n_steps)
        cap *= 2;
    f->memo = calloc(cap, sizeof *f->memo);   /* NULL: no dedupe */
    f->memo_mask = cap - 1;
    return 0;
}

/* ---- hoisting (core/rewrite/hoist.c) -------------------------------- */

static kiln_function *compile_graph(const kiln_graph *graph,
                                    const kiln_options *opt, int hoist,
                                    kiln_err *err);

/* The concrete type of every node of g whose value's shape is known at
 * compile time (computed from bound shared values, constants and
 * literals: run-time shape inference, kiln_ir_infer with the sizes the
 * shared values fix), into t[v]; known[v] 1 for those. */
static void known_types(const kiln_graph *g, const int64_t *symvals,
                        kiln_type *t, char *known)
{
    kiln_shape_ctx sc = {NULL, symvals};
    int w = 1;
    for (int v = 0; v < g->n_nodes; v++)
        w = g->nodes[v].n_in > w ? g->nodes[v].n_in : w;
    kiln_type *in = malloc(sizeof *in * (size_t)w);  /* NULL: none known */
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        known[v] = 0;
        t[v] = n->type;
        if (n->op == KILN_OP_INPUT || n->op == KILN_OP_CHECK)
            continue;
        if (n->op == KILN_OP_SHARED || n->op == KILN_OP_CONST) {
            if (!n->data)
                continue;
            for (int k = 0; k < n->type.rank; k++)
                t[v].dims[k] = n->vshape[k];
            known[v] = 1;
            continue;
        }
        if (n->op == KILN_OP_LITERAL || !in) {
            known[v] = n->op == KILN_OP_LITERAL;
            continue;
        }
        int ok = 1;
        for (int i = 0; i < n->n_in && ok; i++) {
            ok = known[n->in[i]];
            in[i] = t[n->in[i]];
        }
        kiln_err e = {0, ""};
        if (ok && kiln_ir_infer(&sc, n->op, n->attrs, n->n_in, in, NULL,
                                &t[v], NULL, &e) == 0)
            known[v] = 1;
        else
            t[v] = n->type;
    }
    free(in);
}

static int64_t type_bytes(const kiln_type *t)
{
    int64_t e = 1;
    for (int k = 0; k < t->rank; k++) {
        int64_t d = t->dims[k];
        if (d < 0 || (d && e > INT64_MAX / 16 / d))
            return -1;
        e *= d;
    }
    return e * (int64_t)kiln_dtype_size(t->dtype);
}

/* The hoist pass on f->g (after the rewrites, before lowering): find the
 * data-only boundary, keep per call what is over the cap or of unknown
 * size, compile the prep program for the rest (no hoisting, tier 0 only:
 * it runs once per binding) and turn the hoisted nodes into hidden shared
 * values.  The prep runs after setup_leaves (kiln_context_prep_run). */
static int hoist(kiln_function *f, const kiln_options *opt,
                 const kiln_rw_config *rwc, kiln_err *err)
{
    kiln_graph *g = f->g;
    kiln_value *cand = NULL;
    int nc = 0;
    if (kiln_rw_hoist_find(g, &cand, &nc, err))
        return err ? err->code : KILN_ERR_NOMEM;
    if (!nc)
        return 0;
    FILE *diag = NULL;
    int quiet = 0;
    if (opt && opt->struct_size >= offsetof(kiln_options, diag) +
                                       sizeof(void *))
        diag = opt->diag;
    if (opt && opt->struct_size >= offsetof(kiln_options, quiet) +
                                       sizeof(int))
        quiet = opt->quiet;
    int rc = KILN_ERR_NOMEM;
    int ns = g->n_symbols ? g->n_symbols : 1;
    int64_t *sym = malloc(sizeof *sym * (size_t)ns);
    int64_t *bytes = malloc(sizeof *bytes * (size_t)nc);
    int nn = g->n_nodes ? g->n_nodes : 1;
    kiln_type *ty = malloc(sizeof *ty * (size_t)nn);
    char *known = malloc((size_t)nn);
    kiln_value *keep = malloc(sizeof *keep * (size_t)nc);
    f->hoist = calloc((size_t)nc, sizeof *f->hoist);
    f->n_hoist = f->hoist ? nc : 0;   /* every candidate: stored or kept */
    kiln_graph *pg = NULL;
    if (!sym || !bytes || !keep || !f->hoist || !ty || !known) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int s = 0; s < ns; s++)
        sym[s] = -1;
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        for (int k = 0; n->op == KILN_OP_SHARED && n->data &&
                        k < n->type.rank; k++)
            if (KILN_DIM_IS_SYM(n->type.dims[k]))
                sym[KILN_SYM_INDEX(n->type.dims[k])] = n->vshape[k];
    }
    known_types(g, sym, ty, known);
    /* hoisted first (prep output k = keep[k]), then those kept per call */
    int nh = 0, nk = 0;
    for (int i = 0; i < nc; i++) {
        int64_t b = known[cand[i]] ? type_bytes(&ty[cand[i]]) : -1;
        if (b >= 0 && b <= rwc->hoist_max_bytes) {
            bytes[nh] = b;
            keep[nh++] = cand[i];
        }
    }
    for (int i = 0; i < nc; i++) {
        int64_t b = known[cand[i]] ? type_bytes(&ty[cand[i]]) : -1;
        if (b >= 0 && b <= rwc->hoist_max_bytes)
            continue;
        char lbl[160], ts[160];
        kiln_vm_node_label(g, cand[i], lbl, sizeof lbl);
        kiln_ir_type_str(g, &ty[cand[i]], ts, sizeof ts);
        kiln_hoist_ent *h = &f->hoist[nh + nk++];
        h->node = -1;
        h->out = -1;
        h->bytes = b;
        if (!(h->label = malloc(strlen(lbl) + strlen(ts) + 2))) {
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto out;
        }
        sprintf(h->label, "%s %s", lbl, ts);
        if (b >= 0 && !quiet)
            fprintf(diag ? diag : stderr, "kiln: hoist: %s is %lld bytes, "
                    "over hoist.max_size (%lld): computed at every call\n",
                    h->label, (long long)b,
                    (long long)rwc->hoist_max_bytes);
    }
    if (!nh) {
        rc = 0;
        goto out;
    }
    for (int k = 0; k < nh; k++) {
        char lbl[160], ts[160];
        kiln_vm_node_label(g, keep[k], lbl, sizeof lbl);
        kiln_ir_type_str(g, &ty[keep[k]], ts, sizeof ts);
        kiln_hoist_ent *h = &f->hoist[k];
        h->out = k;
        h->bytes = bytes[k];
        if (!(h->label = malloc(strlen(lbl) + strlen(ts) + 2))) {
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto out;
        }
        sprintf(h->label, "%s %s", lbl, ts);
    }
    pg = kiln_rw_hoist_prep(g, keep, nh, err);
    if (!pg) {
        rc = err ? err->code : KILN_ERR_NOMEM;
        goto out;
    }
    /* the prep's shared values: the same data as f's (by name, or by
     * data for a promoted constant, which keeps its data pointer through
     * the pass below) */
    int np = 0;
    for (int v = 0; v < pg->n_nodes; v++)
        np += pg->nodes[v].op == KILN_OP_SHARED;
    f->prep_in = calloc((size_t)(np ? np : 1), sizeof *f->prep_in);
    const void **pdata = calloc((size_t)(np ? np : 1), sizeof *pdata);
    char **pname = calloc((size_t)(np ? np : 1), sizeof *pname);
    if (!f->prep_in || !pdata || !pname) {
        free(pdata);
        free(pname);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto out;
    }
    np = 0;
    for (int v = 0; v < pg->n_nodes; v++) {
        if (pg->nodes[v].op != KILN_OP_SHARED)
            continue;
        const char *nm = pg->nodes[v].name;
        kiln_value m = kiln_graph_lookup(g, nm);
        pname[np] = (char *)nm;
        if (m < 0 || g->nodes[m].op != KILN_OP_SHARED ||
            g->nodes[m].promoted)   /* "_hoist_in<id>": id in g */
            pdata[np] = g->nodes[atoi(nm + strlen("_hoist_in"))].data;
        np++;
    }
    kiln_options po;
    memset(&po, 0, sizeof po);
    if (opt)
        memcpy(&po, opt, opt->struct_size < sizeof po ? opt->struct_size
                                                      : sizeof po);
    po.struct_size = sizeof po;
    if (po.tiers == KILN_TIERS_POLICY)
        po.tiers = KILN_TIERS_BASELINE;   /* run once: no tier-up */
    /* the per-call compile already said what the policy's backends do
     * (a missing plugin, fallbacks); the prep saying it again would only
     * repeat it */
    po.quiet = 1;
    f->prep = compile_graph(pg, &po, 0, err);
    if (!f->prep || kiln_rw_hoist_apply(&f->g, keep, nh, err)) {
        free(pdata);
        free(pname);
        rc = err ? err->code : KILN_ERR_NOMEM;
        goto out;
    }
    g = f->g;
    for (int i = 0; i < np; i++) {
        kiln_value pv = kiln_graph_lookup(f->prep->g, pname[i]);
        kiln_value m = -1;
        if (!pdata[i])
            m = kiln_graph_lookup(g, pname[i]);
        else
            for (int v = 0; v < g->n_nodes && m < 0; v++)
                if (g->nodes[v].op == KILN_OP_SHARED &&
                    g->nodes[v].data == pdata[i])
                    m = v;
        if (pv < 0 || m < 0)
            continue;   /* cannot be: both keep their shared values */
        f->prep_in[f->n_prep_in++] = (kiln_prep_in){pv, m};
    }
    free(pdata);
    free(pname);
    for (int v = 0; v < g->n_nodes; v++)
        if (g->nodes[v].hoisted)
            f->hoist[g->nodes[v].hoisted - 1].node = v;
    rc = 0;
out:
    kiln_graph_free(pg);
    free(cand);
    free(sym);
    free(bytes);
    free(keep);
    free(ty);
    free(known);
    return rc;
}

kiln_function *kiln_compile(const kiln_graph *graph, const kiln_options *opt,
                            kiln_err *err)
{
    return compile_graph(graph, opt, 1, err);
}

static kiln_function *compile_graph(const kiln_graph *graph,
                                    const kiln_options *opt, int allow_hoist,
                                    kiln_err *err)
{
    if (!graph) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_compile: graph is NULL");
        return NULL;
    }
    if (graph->n_outputs == 0) {
        kiln_seterr(err, KILN_ERR_ARG, "graph '%s' has no output",
                    graph->name ? graph->name : "");
        return NULL;
    }
    kiln_function *f = calloc(1, sizeof *f);
    if (!f) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    f->rt = kiln_runtime_get();
    f->refs = 1;
    pthread_mutex_init(&f->memo_lock, NULL);
    pthread_cond_init(&f->memo_cond, NULL);
    pthread_mutex_init(&f->ctx_lock, NULL);
    pthread_mutex_init(&f->tier_lock, NULL);
    pthread_cond_init(&f->tier_cond, NULL);
    f->g = kiln_ir_clone(graph, err);
    if (!f->g)
        goto fail;
    /* the rewrite passes, on the function's own copy (core/rewrite) */
    kiln_rw_config rwc;
    if (kiln_rw_config_for(opt, &rwc, err) ||
        kiln_rw_run(&f->g, &rwc, NULL, NULL, err))
        goto fail;
    if (allow_hoist && ((rwc.passes >> KILN_PASS_HOIST) & 1) &&
        hoist(f, opt, &rwc, err))
        goto fail;
    kiln_lower_opts lopt = {
        .fuse = (rwc.passes >> KILN_PASS_FUSE) & 1,
        .fuse_max_width = rwc.fuse_max_width,
        .fuse_max_ops = rwc.fuse_max_ops,
        .fuse_max_outputs = rwc.fuse_max_outputs,
        .fuse_loops = (rwc.passes >> KILN_PASS_LOOPS) & 1,
        .lift = (rwc.passes >> KILN_PASS_LIFT) & 1,
        .recur = (rwc.passes >> KILN_PASS_RECUR) & 1};
    kiln_graph *g = f->g;
    int nn = g->n_nodes ? g->n_nodes : 1;
    int ns = g->n_symbols ? g->n_symbols : 1;
    f->inputs = malloc(sizeof(int) * (size_t)nn);
    f->shared = malloc(sizeof(int) * (size_t)nn);
    f->symvals_fixed = malloc(sizeof(int64_t) * (size_t)ns);
    if (!f->inputs || !f->shared || !f->symvals_fixed) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < ns; i++)
        f->symvals_fixed[i] = -1;
    for (int v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op == KILN_OP_INPUT)
            f->inputs[f->n_inputs++] = v;
        else if (g->nodes[v].op == KILN_OP_SHARED && !g->nodes[v].promoted)
            f->shared[f->n_shared++] = v;
    }
    if (kiln_lower_ex(g, &f->prog, &lopt, err))
        goto fail;
    /* the pass `recur`: scan bodies of rank-0 values fused into their
     * RECUR kernels, before the plan so that the policy sees them */
    if (lopt.recur && kiln_recur_attach_programs(&f->prog, g, &rwc, err))
        goto fail;
    if (setup_leaves(f, err) || kiln_context_prep_run(f, err))
        goto fail;
    int crc = compile_steps(f, opt, err);
    free(f->memo);
    f->memo = NULL;
    f->compiled_at = kiln_vm_seconds();
    f->compile_into = compile_into;   /* tier-up's compiles */
    if (crc || (f->tiers && kiln_tier_start(f, err)))
        goto fail;
    if (!f->tiers || !atomic_load(&f->tier_active)) {
        kiln_cache_session_end(f->cache);   /* no tier-1 compile to come */
        f->cache = NULL;
    }
    return f;
fail:
    kiln_function_free(f);
    return NULL;
}

