/*
 * vm.c — compiled functions: compile every kernel, then run them in order
 * over planned buffers (prefix kiln_vm_; public kiln_compile and
 * kiln_function_*).
 *
 * A call validates the inputs against their declared types, binds the
 * symbolic dims, and — only when an input shape differs from the previous
 * call — re-infers the run-time shape of every buffer and grows the
 * storage slots.  A call with the same shapes as the one before it
 * allocates nothing: it sets the input pointers, computes each step's
 * views into preallocated arrays and calls the kernels.
 */
#define _POSIX_C_SOURCE 200809L  /* strdup, sysconf */
#include "cache.h"
#include "ir.h"
#include "loader.h"
#include "lower.h"
#include "policy_int.h"
#include "rewrite/rewrite.h"
#include "runtime.h"
#include "vm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct kiln_function {
    kiln_graph *g;              /* owned copy of the graph */
    kiln_program prog;
    int n_inputs, n_shared;
    int *inputs;                /* node ids of inputs, declaration order */
    int *shared;                /* node ids of shared values */
    int64_t *symvals;           /* run-time size of each symbol */
    int64_t *symvals_fixed;     /* sizes fixed by shared values (-1 else) */
    int *symsrc;                /* input index that bound each symbol */
    void **slots;
    size_t *slot_cap;           /* bytes */
    int shapes_ready;
    int64_t *last_shapes;       /* n_inputs * KILN_MAX_RANK */
    /* every step's argument views, built once per input-shape signature
     * (views_ready); a later call only re-points the views of input
     * buffers (patches) at the caller's data */
    int views_ready;
    struct view_patch *patches;
    int n_patches, cap_patches;
    const kiln_runtime *rt;
    char errbuf[512];
    kiln_cache_session *cache;  /* during kiln_compile only */
    /* kernel dedupe during kiln_compile: (key, backend, options) -> the
     * step whose callable later identical steps share */
    struct memo_ent *memo;
    size_t memo_mask;
    pthread_mutex_t memo_lock;
    pthread_cond_t memo_cond;   /* a pending compile finished */
    void *callback_ctx;         /* sampler callbacks' state (callback.c) */
    void (*callback_ctx_free)(void *);
    kiln_plan *plan;            /* per-kernel backend decisions (policy.c) */
};

static void free_plan(kiln_step *s);

/* ---- helpers -------------------------------------------------------- */

static const char *node_label(const kiln_graph *g, int v, char *buf,
                              size_t size)
{
    const kiln_node *n = &g->nodes[v];
    const char *op = kiln_ir_op_info(n->op)->name;
    if (n->name)
        snprintf(buf, size, "node '%s' (%s)", n->name, op);
    else
        snprintf(buf, size, "node %d (%s)", v, op);
    return buf;
}

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

static size_t buf_bytes(const kiln_buf *b)
{
    int64_t n = kiln_shape_numel(b->rank, b->shape);
    return (size_t)n * kiln_dtype_size(b->type.dtype);
}

/* A caller's concrete shape as "(3, 4)": every dim as the number it is
 * (kiln_ir_shape_str shows a negative dim as "?", a symbol). */
static const char *given_shape_str(int rank, const int64_t *shape, char *buf,
                                   size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "(");
    for (int k = 0; k < rank && k < KILN_MAX_RANK && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld",
                                k ? ", " : "", (long long)shape[k]);
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

/* 1 when a tensor of this shape and dtype has a byte size that fits in
 * int64 (views address elements with int64 offsets), so that numel and
 * numel * element size can be computed without overflow. */
static int size_fits(int rank, const int64_t *shape, kiln_dtype dt)
{
    int64_t n = kiln_shape_numel(rank, shape);
    size_t es = kiln_dtype_size(dt);
    return n >= 0 && es > 0 && (uint64_t)n <= (uint64_t)INT64_MAX / es &&
           (uint64_t)n <= SIZE_MAX / es;
}

/* ---- compile -------------------------------------------------------- */

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
        b->nbytes = buf_bytes(b);
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

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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

/* Try the disk cache for step s: 1 when its callable came from an entry,
 * 0 when it must be compiled (a miss, or a bad entry now removed). */
static int load_cached(kiln_cache_session *cache, kiln_step *s,
                       const kiln_backend *be, const kiln_compile_options *co)
{
    void *bytes = NULL;
    size_t len = 0;
    double saved = 0, t0 = seconds_now();
    int r = kiln_cache_fetch(cache, be, co, &s->key, &bytes, &len, &saved);
    s->cache_result = r > 0 ? KILN_CACHE_HIT : r < 0 ? KILN_CACHE_BAD
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
        s->cache_result = KILN_CACHE_BAD;
        return 0;
    }
    if (pe)
        be->error_free(pe);
    s->backend = be;
    s->callable = c;
    s->compile_s = seconds_now() - t0;
    /* what the hit spared: the compile's recorded cost less loading */
    s->saved_s = saved > s->compile_s ? saved - s->compile_s : 0;
    kiln_cache_note_saved(cache, s->saved_s);
    return 1;
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

/* Compile one step with backend `be`, through the disk cache when there
 * is one and the backend makes storable artifacts; 0 on success, else the
 * reason in why. */
static int compile_step_unlocked(kiln_function *f, kiln_step *s,
                                 const kiln_backend *be,
                                 const kiln_compile_options *co, char *why,
                                 size_t size)
{
    kiln_cache_session *cache = f->cache;
    if (memo_share(f, s, be, co))
        return 0;
    kiln_plugin_error *pe = NULL;
    if (be->supports && !be->supports(&s->kernel, &pe)) {
        plugin_why(be, pe, "refused: ", "unsupported", why, size);
        memo_done(f, s, be, co, 0);
        return -1;
    }
    if (pe) {
        be->error_free(pe);
        pe = NULL;
    }
    int storable = cache && be->artifact_bytes && be->load_bytes;
    s->cache_result = KILN_CACHE_NONE;
    s->cache_written = 0;
    s->cache_note = !cache ? "the cache is off (or unusable: see the "
                             "diagnostics)"
                    : !storable ? "the backend makes no storable artifacts"
                                : NULL;
    if (storable && !kiln_cache_recaching(cache) &&
        load_cached(cache, s, be, co)) {
        memo_done(f, s, be, co, 1);
        return 0;
    }
    if (storable && s->cache_result == KILN_CACHE_NONE)
        s->cache_result = KILN_CACHE_MISS;     /* recache */
    double t0 = seconds_now(), c0 = cpu_now();
    kiln_artifact *art = NULL;
    if (be->compile(&s->kernel, co, &art, &pe)) {
        plugin_why(be, pe, "compile failed: ", "unknown error", why, size);
        memo_done(f, s, be, co, 0);
        return -1;
    }
    kiln_callable *c = NULL;
    int rc = be->load(art, &c, &pe);
    if (rc || !c || !c->fn) {
        plugin_why(be, pe, "load failed: ", "unknown error", why, size);
        if (c)
            be->callable_free(c);
        be->artifact_free(art);
        memo_done(f, s, be, co, 0);
        return -1;
    }
    s->compile_s = seconds_now() - t0;
    double cpu = cpu_now() - c0;
    if (storable) {
        size_t len = 0;
        const void *bytes = be->artifact_bytes(art, &len);
        if (bytes && len)
            s->cache_written = kiln_cache_store(cache, be, co, &s->key, bytes,
                                                len, cpu, &s->cache_note) == 1;
        else
            s->cache_note = "the backend gave no artifact bytes for it";
    }
    be->artifact_free(art);
    s->backend = be;
    s->callable = c;
    memo_done(f, s, be, co, 1);
    return 0;
}

/* A plugin without KILN_BACKEND_THREAD_SAFE (libtcc 0.9.27 keeps its
 * compiler state in globals) is entered by one thread at a time: one lock,
 * shared by all such plugins, around supports/compile/load/artifact_free
 * and callable_free.  Kernel calls are not serialised: a plugin's kernels
 * must be reentrant (docs/plugin-abi.md, section 11). */
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

static int compile_step(kiln_function *f, kiln_step *s,
                        const kiln_backend *be,
                        const kiln_compile_options *co, char *why,
                        size_t size)
{
    int serial = !(be->flags & KILN_BACKEND_THREAD_SAFE);
    if (serial)
        pthread_mutex_lock(&serial_lock);
    int rc = compile_step_unlocked(f, s, be, co, why, size);
    if (serial)
        pthread_mutex_unlock(&serial_lock);
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
    char missing[MAX_CHAIN][600];
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

/* Compile every step with the backend the plan (core/policy.c: the
 * policy, or an explicit backend) chose for it, walking down the plan's
 * chain when that backend is missing, refuses the kernel or fails to
 * compile it: one diagnostic line per missing backend and per kernel
 * passed on, and the reason kept for kiln explain. */
static int compile_steps(kiln_function *f, const kiln_options *opt,
                         kiln_err *err)
{
    int jobs = 0;
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
    }
    if (jobs <= 0)
        jobs = default_jobs();
    FILE *out = diag ? diag : stderr;
    f->plan = kiln_plan_make(opt, name, f->g, &f->prog, err);
    if (!f->plan)
        return err ? err->code : KILN_ERR_POLICY;
    kiln_plan *pl = f->plan;
    if (begin_cache(f, opt, err))
        return err ? err->code : KILN_ERR_ARG;
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
            char r[700];
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
        if (done)
            continue;
        char lbl[160];
        rc = kiln_seterr(err, KILN_ERR_BACKEND,
                         "no backend could compile kernel %d (%s) of %s: "
                         "%s", i, s->label,
                         node_label(f->g, s->node, lbl, sizeof lbl), why);
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
    f->cache = kiln_cache_session_begin(
        mode, dir, pol && kiln_policy_get_knobs(pol, &knobs) == 0 ? &knobs
                                                                 : NULL,
        diag, quiet, &cerr);
    if (cerr.code)
        return kiln_seterr(err, cerr.code, "%s", cerr.message);
    size_t cap = 16;
    while (cap < 2 * (size_t)f->prog.n_steps)
        cap *= 2;
    f->memo = calloc(cap, sizeof *f->memo);   /* NULL: no dedupe */
    f->memo_mask = cap - 1;
    return 0;
}

kiln_function *kiln_compile(const kiln_graph *graph, const kiln_options *opt,
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
    f->g = kiln_ir_clone(graph, err);
    if (!f->g)
        goto fail;
    /* the rewrite passes, on the function's own copy (core/rewrite) */
    kiln_rw_config rwc;
    if (kiln_rw_config_for(opt, &rwc, err) ||
        kiln_rw_run(&f->g, &rwc, NULL, NULL, err))
        goto fail;
    kiln_lower_opts lopt = {
        .fuse = (rwc.passes >> KILN_PASS_FUSE) & 1,
        .fuse_max_width = rwc.fuse_max_width,
        .fuse_max_ops = rwc.fuse_max_ops,
        .fuse_max_outputs = rwc.fuse_max_outputs,
        .fuse_loops = (rwc.passes >> KILN_PASS_LOOPS) & 1};
    kiln_graph *g = f->g;
    int nn = g->n_nodes ? g->n_nodes : 1;
    int ns = g->n_symbols ? g->n_symbols : 1;
    f->inputs = malloc(sizeof(int) * (size_t)nn);
    f->shared = malloc(sizeof(int) * (size_t)nn);
    f->symvals = malloc(sizeof(int64_t) * (size_t)ns);
    f->symvals_fixed = malloc(sizeof(int64_t) * (size_t)ns);
    f->symsrc = malloc(sizeof(int) * (size_t)ns);
    if (!f->inputs || !f->shared || !f->symvals || !f->symvals_fixed ||
        !f->symsrc) {
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
    f->last_shapes = calloc((size_t)(f->n_inputs ? f->n_inputs : 1),
                            sizeof(int64_t) * KILN_MAX_RANK);
    if (!f->last_shapes) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (kiln_lower_ex(g, &f->prog, &lopt, err))
        goto fail;
    if (setup_leaves(f, err))
        goto fail;
    int nsl = f->prog.n_slots ? f->prog.n_slots : 1;
    f->slots = calloc((size_t)nsl, sizeof(void *));
    f->slot_cap = calloc((size_t)nsl, sizeof(size_t));
    if (!f->slots || !f->slot_cap) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&f->memo_lock, NULL);
    pthread_cond_init(&f->memo_cond, NULL);
    int crc = compile_steps(f, opt, err);
    kiln_cache_session_end(f->cache);
    f->cache = NULL;
    free(f->memo);
    f->memo = NULL;
    pthread_cond_destroy(&f->memo_cond);
    pthread_mutex_destroy(&f->memo_lock);
    if (crc)
        goto fail;
    return f;
fail:
    kiln_function_free(f);
    return NULL;
}

void kiln_function_free(kiln_function *f)
{
    if (!f)
        return;
    if (f->callback_ctx_free)
        f->callback_ctx_free(f->callback_ctx);
    for (int i = 0; i < f->prog.n_steps; i++)
        free_plan(&f->prog.steps[i]);   /* before any callable goes */
    for (int i = 0; i < f->prog.n_steps; i++) {
        kiln_step *s = &f->prog.steps[i];
        if (s->callable && !s->callable_shared) {
            int serial = !(s->backend->flags & KILN_BACKEND_THREAD_SAFE);
            if (serial)
                pthread_mutex_lock(&serial_lock);
            s->backend->callable_free(s->callable);
            if (serial)
                pthread_mutex_unlock(&serial_lock);
        }
    }
    /* before kiln_lower_free, which zeroes prog.n_slots */
    for (int i = 0; f->slots && i < (f->prog.n_slots ? f->prog.n_slots : 1);
         i++)
        free(f->slots[i]);
    kiln_lower_free(&f->prog);
    kiln_plan_free(f->plan);
    free(f->slots);
    free(f->slot_cap);
    free(f->inputs);
    free(f->shared);
    free(f->symvals);
    free(f->symvals_fixed);
    free(f->symsrc);
    free(f->last_shapes);
    free(f->patches);
    kiln_graph_free(f->g);
    free(f);
}

/* ---- calling -------------------------------------------------------- */

static int check_inputs(kiln_function *f, const kiln_tensor *in,
                        kiln_err *err)
{
    kiln_graph *g = f->g;
    memcpy(f->symvals, f->symvals_fixed,
           sizeof(int64_t) * (size_t)g->n_symbols);
    for (int s = 0; s < g->n_symbols; s++)
        f->symsrc[s] = -1;
    char s1[256], s2[256];
    for (int i = 0; i < f->n_inputs; i++) {
        const kiln_node *n = &g->nodes[f->inputs[i]];
        const kiln_tensor *t = &in[i];
        if ((unsigned)t->dtype >= KILN_NDTYPES)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "input '%s': expected dtype %s, got a bad "
                               "dtype %d", n->name,
                               kiln_dtype_name(n->type.dtype), (int)t->dtype);
        if (t->dtype != n->type.dtype)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "input '%s': expected dtype %s, got %s",
                               n->name, kiln_dtype_name(n->type.dtype),
                               kiln_dtype_name(t->dtype));
        if (t->rank < 0 || t->rank > KILN_MAX_RANK) {
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "input '%s': rank %d is out of range", n->name,
                               t->rank);
        }
        int bad = t->rank != n->type.rank;
        for (int k = 0; k < t->rank && !bad; k++)
            if (t->shape[k] < 0 ||
                (n->type.dims[k] >= 0 && t->shape[k] != n->type.dims[k]))
                bad = 1;
        if (bad)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "input '%s': expected shape %s, got %s",
                               n->name,
                               kiln_ir_shape_str(g, n->type.rank,
                                                 n->type.dims, s1, sizeof s1),
                               given_shape_str(t->rank, t->shape, s2,
                                               sizeof s2));
        if (!size_fits(t->rank, t->shape, t->dtype))
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "input '%s': shape %s is too large", n->name,
                               given_shape_str(t->rank, t->shape, s2,
                                               sizeof s2));
        if (t->data == NULL && kiln_shape_numel(t->rank, t->shape) > 0)
            return kiln_seterr(err, KILN_ERR_ARG, "input '%s': data is NULL",
                               n->name);
        for (int k = 0; k < t->rank; k++) {
            int64_t d = n->type.dims[k];
            if (!KILN_DIM_IS_SYM(d))
                continue;
            int si = KILN_SYM_INDEX(d);
            if (f->symvals[si] < 0) {
                f->symvals[si] = t->shape[k];
                f->symsrc[si] = i;
            } else if (f->symvals[si] != t->shape[k]) {
                char from[300];
                if (f->symsrc[si] >= 0)
                    snprintf(from, sizeof from, "input '%s'",
                             g->nodes[f->inputs[f->symsrc[si]]].name);
                else
                    snprintf(from, sizeof from, "a shared value");
                const char *sn = g->symbols[si] ? g->symbols[si] : "?";
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "input '%s': got shape %s, but dim %d is "
                                   "'%s', which is %lld from %s", n->name,
                                   given_shape_str(t->rank, t->shape, s2,
                                                   sizeof s2),
                                   k, sn, (long long)f->symvals[si], from);
            }
        }
    }
    for (int i = 0; i < f->n_shared; i++) {
        const kiln_node *n = &g->nodes[f->shared[i]];
        if (!n->data)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "shared value '%s' has no value; bind one with "
                               "kiln_function_bind_shared", n->name);
    }
    return 0;
}

static int shapes_changed(kiln_function *f, const kiln_tensor *in)
{
    int changed = !f->shapes_ready;
    for (int i = 0; i < f->n_inputs; i++) {
        int64_t *last = &f->last_shapes[(size_t)i * KILN_MAX_RANK];
        for (int k = 0; k < in[i].rank; k++) {
            if (last[k] != in[i].shape[k]) {
                last[k] = in[i].shape[k];
                changed = 1;
            }
        }
    }
    return changed;
}

/* Re-infer every buffer's shape from the inputs and grow the slots. */
static int prepare_shapes(kiln_function *f, const kiln_tensor *in,
                          kiln_err *err)
{
    kiln_program *p = &f->prog;
    kiln_graph *g = f->g;
    kiln_shape_ctx ctx = {NULL, f->symvals};
    for (int i = 0; i < f->n_inputs; i++) {
        kiln_buf *b = &p->bufs[p->node_buf[f->inputs[i]]];
        b->rank = in[i].rank;
        for (int k = 0; k < b->rank; k++)
            b->shape[k] = in[i].shape[k];
    }
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind != KILN_BUF_TEMP || (b->def_step < 0 && !b->fused))
            continue;  /* dead nodes are never computed; fused ones are
                          computed inside their group's kernel, and their
                          shapes checked here */
        if (!b->is_static) {
            kiln_type tin[3], *tins = tin, tout;
            if (b->n_in > 3) {
                tins = malloc(sizeof *tins * (size_t)b->n_in);
                if (!tins)
                    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            }
            for (int k = 0; k < b->n_in; k++) {
                int ib = b->in_bufs[k];
                if (ib < 0) {
                    tins[k] = g->nodes[g->nodes[b->node].in[k]].type;
                    continue;
                }
                tins[k].dtype = p->bufs[ib].type.dtype;
                tins[k].rank = p->bufs[ib].rank;
                memcpy(tins[k].dims, p->bufs[ib].shape,
                       sizeof(int64_t) * KILN_MAX_RANK);
            }
            int rc = kiln_ir_infer(&ctx, b->op, b->attrs, b->n_in, tins,
                                   NULL, &tout, NULL, err);
            if (tins != tin)
                free(tins);
            if (rc) {
                char lbl[160];
                if (b->node >= 0)
                    kiln_err_prefix(err, "%s: ",
                                    node_label(g, b->node, lbl, sizeof lbl));
                return rc;
            }
            b->rank = tout.rank;
            memcpy(b->shape, tout.dims, sizeof(int64_t) * KILN_MAX_RANK);
        }
        if (!size_fits(b->rank, b->shape, b->type.dtype)) {
            char lbl[160], s1[256];
            if (b->node >= 0)
                node_label(g, b->node, lbl, sizeof lbl);
            else
                snprintf(lbl, sizeof lbl, "a temporary");
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "%s: shape %s is too large", lbl,
                               given_shape_str(b->rank, b->shape, s1,
                                               sizeof s1));
        }
        b->nbytes = buf_bytes(b);
        if (b->slot >= 0) {
            size_t need = b->nbytes ? b->nbytes : 8;
            if (f->slot_cap[b->slot] < need) {
                void *m = realloc(f->slots[b->slot], need);
                if (!m) {
                    char lbl[160];
                    if (b->node >= 0)
                        node_label(g, b->node, lbl, sizeof lbl);
                    else
                        snprintf(lbl, sizeof lbl, "a temporary");
                    return kiln_seterr(err, KILN_ERR_NOMEM,
                                       "%s: out of memory (%zu bytes)", lbl,
                                       need);
                }
                f->slots[b->slot] = m;
                f->slot_cap[b->slot] = need;
            }
        }
    }
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind == KILN_BUF_TEMP && b->slot >= 0)
            b->data = f->slots[b->slot];
    }
    f->shapes_ready = 1;
    return 0;
}

/* A view of an input buffer: its data pointer moves with the caller's
 * tensor; the offset (a slice's start) does not. */
typedef struct view_patch {
    kiln_view *v;
    int buf;
    intptr_t off;   /* bytes from the buffer's data to the view's */
} view_patch;

static int note_patch(kiln_function *f, const kiln_arg *a, kiln_view *v)
{
    const kiln_buf *b = &f->prog.bufs[a->buf];
    if (b->kind != KILN_BUF_INPUT)
        return 0;
    if (f->n_patches == f->cap_patches) {
        int cap = f->cap_patches ? 2 * f->cap_patches : 16;
        view_patch *m = realloc(f->patches, sizeof *m * (size_t)cap);
        if (!m)
            return -1;
        f->patches = m;
        f->cap_patches = cap;
    }
    f->patches[f->n_patches++] =
        (view_patch){v, a->buf, (intptr_t)v->data - (intptr_t)b->data};
    return 0;
}

/* Build every view of step s from the buffers' shapes and data. */
static int build_views(kiln_function *f, kiln_step *s)
{
    kiln_program *p = &f->prog;
    int iter_rank = 0, rc = 0;
    const int64_t *iter = NULL;
    if (s->iter_input) {
        kiln_lower_view(p, &s->in[0], 0, NULL, &s->vin[0]);
        iter_rank = s->vin[0].rank;
        iter = s->vin[0].shape;
    } else if (s->n_out > 0) {
        /* output 0 (its buffer as it is) gives the iteration space: a LOOP
         * kernel's reduction outputs after it need it */
        kiln_lower_view(p, &s->out[0], 0, NULL, &s->vout[0]);
        iter_rank = s->vout[0].rank;
        iter = s->vout[0].shape;
    }
    for (int k = 0; k < s->n_out; k++) {
        kiln_lower_view(p, &s->out[k], iter_rank, iter, &s->vout[k]);
        rc |= note_patch(f, &s->out[k], &s->vout[k]);
    }
    if (!s->iter_input && s->n_out > 0) {
        iter_rank = s->vout[0].rank;
        iter = s->vout[0].shape;
    }
    for (int k = s->iter_input ? 1 : 0; k < s->n_in; k++)
        kiln_lower_view(p, &s->in[k], iter_rank, iter, &s->vin[k]);
    for (int k = 0; k < s->n_in; k++)
        rc |= note_patch(f, &s->in[k], &s->vin[k]);
    return rc;
}

static int has_prepare(const kiln_callable *c)
{
    return c->struct_size >= offsetof(kiln_callable, plan_free) +
                                 sizeof c->plan_free &&
           c->prepare && c->run && c->plan_free;
}

static void free_plan(kiln_step *s)
{
    if (s->plan && s->callable && has_prepare(s->callable))
        s->callable->plan_free(s->plan);
    s->plan = NULL;
}

/* Prepare step s's call (ABI 1.4) for its views as they are now; a
 * callable that cannot prepare it is called through fn. */
static void prepare_step(kiln_function *f, kiln_step *s)
{
    free_plan(s);
    if (!s->callable || !has_prepare(s->callable))
        return;
    kiln_call call = {sizeof call, (uint32_t)s->n_in, (uint32_t)s->n_out,
                      s->vin, s->vout, f->rt, f->errbuf, sizeof f->errbuf};
    void *plan = NULL;
    if (s->callable->prepare(s->callable->state, &call, &plan) == 0)
        s->plan = plan;
}

/* Make the views right for this call's data: all of them after a shape
 * change (and every step's plan with them), else only those of input
 * buffers. */
static int ready_views(kiln_function *f, kiln_err *err)
{
    kiln_program *p = &f->prog;
    if (!f->views_ready) {
        f->n_patches = 0;
        for (int i = 0; i < p->n_steps; i++) {
            if (build_views(f, &p->steps[i]))
                return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            prepare_step(f, &p->steps[i]);
        }
        f->views_ready = 1;
        return 0;
    }
    for (int i = 0; i < f->n_patches; i++) {
        const view_patch *q = &f->patches[i];
        q->v->data = (void *)((intptr_t)p->bufs[q->buf].data + q->off);
    }
    return 0;
}

static int run_step(kiln_function *f, kiln_step *s, kiln_err *err)
{
    kiln_call call = {sizeof call, (uint32_t)s->n_in, (uint32_t)s->n_out,
                      s->vin, s->vout, f->rt, f->errbuf, sizeof f->errbuf};
    if (s->plan ? s->callable->run(s->plan, &call)
                : s->callable->fn(s->callable->state, &call)) {
        char lbl[160];
        return kiln_seterr(err, KILN_ERR_RUNTIME, "%s: %s",
                           node_label(f->g, s->node, lbl, sizeof lbl),
                           f->errbuf[0] ? f->errbuf : "kernel failed");
    }
    return 0;
}

int kiln_function_call(kiln_function *f, const kiln_tensor *inputs,
                       kiln_tensor *outputs, kiln_err *err)
{
    if (!f || !outputs || (!inputs && f->n_inputs > 0))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_call: NULL argument");
    int rc = check_inputs(f, inputs, err);
    if (rc)
        return rc;
    kiln_program *p = &f->prog;
    if (shapes_changed(f, inputs)) {
        f->views_ready = 0;
        if ((rc = prepare_shapes(f, inputs, err))) {
            f->shapes_ready = 0;
            return rc;
        }
    }
    for (int i = 0; i < f->n_inputs; i++)
        p->bufs[p->node_buf[f->inputs[i]]].data = inputs[i].data;
    if ((rc = ready_views(f, err)))
        return rc;
    f->errbuf[0] = 0;
    for (int i = 0; i < p->n_steps; i++)
        if ((rc = run_step(f, &p->steps[i], err)))
            return rc;
    kiln_graph *g = f->g;
    for (int i = 0; i < g->n_outputs; i++) {
        const kiln_buf *b = &p->bufs[p->node_buf[g->outputs[i].value]];
        outputs[i].dtype = b->type.dtype;
        outputs[i].rank = b->rank;
        memcpy(outputs[i].shape, b->shape, sizeof(int64_t) * KILN_MAX_RANK);
        outputs[i].data = b->data;
    }
    return 0;
}

/* ---- introspection -------------------------------------------------- */

int kiln_function_n_inputs(const kiln_function *f) { return f ? f->n_inputs : 0; }
int kiln_function_n_shared(const kiln_function *f) { return f ? f->n_shared : 0; }
int kiln_function_n_outputs(const kiln_function *f)
{
    return f ? f->g->n_outputs : 0;
}

const char *kiln_function_input_name(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->n_inputs)
        return NULL;
    return f->g->nodes[f->inputs[i]].name;
}

const char *kiln_function_shared_name(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->n_shared)
        return NULL;
    return f->g->nodes[f->shared[i]].name;
}

const char *kiln_function_output_name(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->g->n_outputs)
        return NULL;
    return f->g->outputs[i].name;
}

int kiln_function_input_type(const kiln_function *f, int i, kiln_dtype *dtype,
                             int *rank, int64_t dims[KILN_MAX_RANK],
                             const char *symbols[KILN_MAX_RANK])
{
    if (!f || i < 0 || i >= f->n_inputs)
        return -1;
    const kiln_node *n = &f->g->nodes[f->inputs[i]];
    if (dtype)
        *dtype = n->type.dtype;
    if (rank)
        *rank = n->type.rank;
    for (int k = 0; k < n->type.rank; k++) {
        int64_t d = n->type.dims[k];
        if (dims)
            dims[k] = d >= 0 ? d : -1;
        if (symbols)
            symbols[k] = KILN_DIM_IS_SYM(d) ? f->g->symbols[KILN_SYM_INDEX(d)]
                                            : NULL;
    }
    return 0;
}

int kiln_function_bind_shared(kiln_function *f, const char *name,
                              const kiln_tensor *value, kiln_err *err)
{
    if (!f || !name || !value)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_bind_shared: NULL argument");
    kiln_node *n = NULL;
    for (int i = 0; i < f->n_shared; i++)
        if (strcmp(f->g->nodes[f->shared[i]].name, name) == 0)
            n = &f->g->nodes[f->shared[i]];
    if (!n)
        return kiln_seterr(err, KILN_ERR_NAME, "no shared value '%s'", name);
    if (value->dtype != n->type.dtype)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "shared value '%s': expected dtype %s, got %s",
                           name, kiln_dtype_name(n->type.dtype),
                           kiln_dtype_name(value->dtype));
    char s1[256], s2[256];
    int bad = value->rank != n->type.rank;
    for (int k = 0; !bad && k < value->rank; k++) {
        int64_t want = n->data ? n->vshape[k] : n->type.dims[k];
        if (want >= 0 ? value->shape[k] != want : value->shape[k] < 0)
            bad = 1;
    }
    if (bad)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "shared value '%s': expected shape %s, got %s",
                           name,
                           n->data ? kiln_ir_shape_str(NULL, n->type.rank,
                                                       n->vshape, s1,
                                                       sizeof s1)
                                   : kiln_ir_shape_str(f->g, n->type.rank,
                                                       n->type.dims, s1,
                                                       sizeof s1),
                           given_shape_str(value->rank, value->shape, s2,
                                           sizeof s2));
    if (!size_fits(value->rank, value->shape, value->dtype))
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "shared value '%s': shape %s is too large", name,
                           given_shape_str(value->rank, value->shape, s2,
                                           sizeof s2));
    size_t bytes = (size_t)kiln_shape_numel(value->rank, value->shape) *
                   kiln_dtype_size(value->dtype);
    if (bytes && !value->data)
        return kiln_seterr(err, KILN_ERR_ARG, "shared value '%s': data is "
                           "NULL", name);
    if (!n->data) {
        n->data = malloc(bytes ? bytes : 1);
        if (!n->data)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        n->nbytes = bytes;
        for (int k = 0; k < value->rank; k++)
            n->vshape[k] = value->shape[k];
        kiln_buf *b = &f->prog.bufs[f->prog.node_buf[n - f->g->nodes]];
        b->data = n->data;
        b->rank = value->rank;
        for (int k = 0; k < value->rank; k++) {
            b->shape[k] = value->shape[k];
            int64_t d = n->type.dims[k];
            if (KILN_DIM_IS_SYM(d))
                f->symvals_fixed[KILN_SYM_INDEX(d)] = value->shape[k];
        }
        b->nbytes = bytes;
        f->shapes_ready = 0;
    }
    if (bytes)
        memcpy(n->data, value->data, bytes);
    return 0;
}

int kiln_function_n_kernels(const kiln_function *f)
{
    return f ? f->prog.n_steps : 0;
}

const char *kiln_function_kernel_backend(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->prog.n_steps || !f->prog.steps[i].backend)
        return NULL;
    return f->prog.steps[i].backend->name;
}

int kiln_function_kernel_key(const kiln_function *f, int i, kiln_key *key)
{
    if (!f || !key || i < 0 || i >= f->prog.n_steps)
        return -1;
    *key = f->prog.steps[i].key;
    return 0;
}

int kiln_function_kernel_report(const kiln_function *f, int i,
                                kiln_kernel_report *rep)
{
    if (!f || !rep || i < 0 || i >= f->prog.n_steps ||
        rep->struct_size < offsetof(kiln_kernel_report, saved_seconds) +
                               sizeof(double))
        return -1;
    const kiln_step *s = &f->prog.steps[i];
    rep->backend = s->backend ? s->backend->name : NULL;
    rep->label = s->label;
    rep->key = s->key;
    rep->cache = s->cache_result;
    rep->written = s->cache_written;
    rep->compile_seconds = s->compile_s;
    rep->saved_seconds = s->saved_s;
    if (rep->struct_size >= offsetof(kiln_kernel_report, note) +
                                sizeof(const char *))
        rep->note = s->cache_note;
    return 0;
}

const kiln_graph *kiln_vm_graph(const kiln_function *f)
{
    return f ? f->g : NULL;
}

const kiln_plan *kiln_vm_plan(const kiln_function *f)
{
    return f ? f->plan : NULL;
}

void *kiln_vm_callback_ctx(const kiln_function *f)
{
    return f ? f->callback_ctx : NULL;
}

void kiln_vm_set_callback_ctx(kiln_function *f, void *ctx,
                              void (*free_fn)(void *))
{
    f->callback_ctx = ctx;
    f->callback_ctx_free = free_fn;
}
