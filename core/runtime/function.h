/*
 * function.h — the inside of a compiled function, shared by the files
 * that make one (core/compile/driver.c), hold one (core/runtime/vm.c:
 * free, introspection), call one
 * (core/runtime/context.c: contexts and kiln_function_call) and move its
 * kernels between tiers (core/runtime/tier.c).
 *
 * A function is two halves.  The compiled half — the graph, the lowered
 * program, every step's callables — is read only once kiln_compile has
 * returned, except for the tier-up of a step, which publishes a new
 * callable through `kiln_tier_step` (atomics) and never frees the old one
 * before the function goes.  The per-call half — buffers, shapes, views,
 * prepared calls, the error text — lives in contexts (struct
 * kiln_context), one per calling thread or per kiln_context_new, so that
 * any number of threads call one function at once.
 */
#ifndef KILN_CORE_FUNCTION_H
#define KILN_CORE_FUNCTION_H

#include "cache.h"
#include "ir.h"
#include "lower.h"
#include "policy_int.h"
#include "runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* A view of an input buffer: its data pointer moves with the caller's
 * tensor; the offset (a slice's start) does not. */
typedef struct view_patch {
    kiln_view *v;
    int buf;
    intptr_t off;   /* bytes from the buffer's data to the view's */
} view_patch;

/* Per-caller state (core/runtime/context.c). */
struct kiln_context {
    kiln_function *f;
    struct kiln_context *next;  /* f's per-thread contexts */
    pthread_t owner;            /* per-thread contexts: the thread */
    int per_thread;
    /* a shallow copy of f->prog whose bufs and steps arrays are the
     * context's own: run-time shapes and data, views, plans and the
     * callable each step runs now */
    kiln_program prog;
    kiln_view *views;           /* every step's vin and vout, one block */
    void **slots;
    size_t *slot_cap;           /* bytes */
    int64_t *symvals;           /* run-time size of each symbol */
    int *symsrc;                /* input index that bound each symbol */
    int shapes_ready;
    int64_t *last_shapes;       /* n_inputs * KILN_MAX_RANK */
    int views_ready;
    view_patch *patches;
    int n_patches, cap_patches;
    unsigned bind_gen;          /* f->bind_gen the leaves were copied at */
    unsigned swap_gen;          /* f->swap_gen the callables were read at */
    uint64_t calls;             /* calls made on this context */
    uint64_t calls_told;        /* of those, added to f->calls */
    double *sample_ns;          /* per step: this call's timing */
    char errbuf[512];
};

/* Where a step stands between tiers (core/runtime/tier.c).  `state` and
 * `callable1` are published with release stores and read with acquire
 * loads; the rest is written under f->tier_lock. */
typedef struct kiln_tier_step {
    _Atomic int state;          /* kiln_tier_state */
    int tier;                   /* the tier the step runs on now */
    const char *name1;          /* the backend it tiers up to, or NULL
                                   (owned by the plan's policy) */
    const kiln_backend *be1;    /* name1, once a job loaded and set it up
                                   (core/runtime/tier.c, "Exit") */
    const kiln_compile_options *co1;
    int immediate;              /* the rules chose be1: compile at once */
    int owner;                  /* the step whose job compiles this key */
    int next_twin;              /* the job's next step, or -1 */
    int last_twin;              /* owner: the job's last step */
    kiln_callable *_Atomic callable1;  /* tier-1 code, once swapped */
    int owns1;                  /* this step frees callable1 */
    const kiln_backend *be0;    /* tier 0's backend (s->backend) */
    double min_ns;              /* the smallest sampled tier-0 time */
    double gain;                /* owner: predicted saving per call, ns */
    double t0_ns;               /* owner: the job's tier-0 time per call
                                   (its steps' min_ns summed), ns */
    int samples;
    double pred_compile_ms;     /* tiers' compile model: tier-1 compile,
                                   CPU ms */
    double pred_frac;           /* cost model: fraction of time tier 1
                                   saves, in [0, 1] */
    int64_t queued_call;        /* -1 until queued */
    double queued_s;
    int64_t swapped_call;
    double swapped_s;
    double compile1_s;
} kiln_tier_step;

/* Compile step s with be into *out (no memo, no change to s), through the
 * disk cache: 0, or -1 with why.  *seconds receives the compile (or load)
 * wall time, *cpu_seconds the compile's CPU time (0 for a cache hit).
 * The compile driver (core/compile/driver.c) sets a function's
 * compile_into before kiln_tier_start: tier-up compiles through it, so the
 * runtime never calls the later stage itself. */
typedef int (*kiln_compile_into_fn)(kiln_function *f, const kiln_step *s,
                                    const kiln_backend *be,
                                    const kiln_compile_options *co,
                                    kiln_callable **out, double *seconds,
                                    double *cpu_seconds, char *why,
                                    size_t size);

/* A value hoisting considered (core/rewrite/hoist.c, driver.c): stored
 * and computed by the prep program, or kept per call (over the cap). */
typedef struct kiln_hoist_ent {
    int node;                   /* the hidden shared value in f->g, or -1
                                   when kept per call */
    int out;                    /* the prep output computing it */
    int64_t bytes;
    char *label;                /* "node 'xc' (sub) f64[5000, 24]" */
} kiln_hoist_ent;

/* A shared value the prep program reads: its node in prep->g, the same
 * data's node in f->g (the prep's points at the function's data). */
typedef struct kiln_prep_in {
    int prep_node, node;
} kiln_prep_in;

struct kiln_function {
    kiln_graph *g;              /* owned copy of the graph */
    /* hoisting: data-only values computed by `prep` (a function of no
     * input, compiled without hoisting) when the data are bound
     * (kiln_compile, kiln_function_bind_shared: kiln_context_prep_run) */
    kiln_function *prep;        /* NULL: nothing hoisted */
    kiln_hoist_ent *hoist;      /* n_hoist entries: hoisted, then kept */
    int n_hoist;
    kiln_prep_in *prep_in;
    int n_prep_in;
    kiln_compile_into_fn compile_into;  /* tier-up's compiles (driver.c) */
    kiln_program prog;          /* compiled half: read only after compile
                                   but for bufs of shared values
                                   (kiln_function_bind_shared) */
    int n_inputs, n_shared;
    int *inputs;                /* node ids of inputs, declaration order */
    int *shared;                /* node ids of shared values */
    int64_t *symvals_fixed;     /* sizes fixed by shared values (-1 else) */
    const kiln_runtime *rt;
    unsigned bind_gen;          /* bumped by kiln_function_bind_shared */
    /* contexts made for threads by kiln_function_call (acquire/release
     * list; added under ctx_lock, freed with f) */
    struct kiln_context *_Atomic threads;
    pthread_mutex_t ctx_lock;
    kiln_cache_session *cache;  /* during kiln_compile; kept while tier-1
                                   compiles may still store artifacts */
    /* kernel dedupe during kiln_compile: (key, backend, options) -> the
     * step whose callable later identical steps share */
    struct memo_ent *memo;
    size_t memo_mask;
    pthread_mutex_t memo_lock;
    pthread_cond_t memo_cond;   /* a pending compile finished */
    void *callback_ctx;         /* sampler callbacks' state (callback.c) */
    void (*callback_ctx_free)(void *);
    kiln_plan *plan;            /* per-kernel backend decisions (policy.c) */
    struct kiln_progress *progress;  /* during kiln_compile (progress.c) */
    /* tiers (core/runtime/tier.c); tiers NULL when the function has none */
    kiln_tier_step *tiers;
    _Atomic unsigned swap_gen;  /* bumped at every swap */
    _Atomic int tier_active;    /* a step may still tier up: sample */
    _Atomic uint64_t calls;     /* calls of every context, as told */
    pthread_mutex_t tier_lock;
    pthread_cond_t tier_cond;   /* a job finished */
    int tier_jobs;              /* queued or running, under the pool lock */
    int *tier_order;            /* scratch: owners by gain per compile ms */
    int refs;                   /* the caller's + running jobs' (pool lock) */
    int dead;                   /* kiln_function_free was called */
    int forbidden;
    int sample_every;
    double budget, min_gain_ns, compile_scale_num, compile_scale_den;
    double compile_model[3];    /* tiers.compile_ms, _per_op, _per_input */
    int preload;                /* tiers.preload */
    int n_threads;              /* tier-1 pool threads asked for (0: auto) */
    double compiled_at;         /* monotonic seconds kiln_compile ended */
    kiln_compile_options co1[4];/* compile options per tier backend */
    const char *co1_name[4];
    char *plugin_path;          /* kiln_options.plugin_path, for jobs */
};

/* ---- core/runtime/vm.c -------------------------------------------------- */

/* Monotonic wall-clock seconds. */
double kiln_vm_seconds(void);

/* The one lock around the plugins without KILN_BACKEND_THREAD_SAFE
 * (compile, load, free): the compile driver and the runtime both take it. */
void kiln_vm_serial_lock(void);
void kiln_vm_serial_unlock(void);

/* Free a callable of backend be under the plugin lock when be needs it. */
void kiln_vm_callable_free(const kiln_backend *be, kiln_callable *c);

/* Free f's compiled half (what kiln_function_free frees once no tier-1
 * job runs). */
void kiln_vm_destroy(kiln_function *f);

/* "node 'y' (add)" or "node 12 (add)". */
const char *kiln_vm_node_label(const kiln_graph *g, int v, char *buf,
                               size_t size);

/* A caller's concrete shape as "(3, 4)". */
const char *kiln_vm_shape_str(int rank, const int64_t *shape, char *buf,
                              size_t size);

/* 1 when a tensor of this shape and dtype has a byte size that fits in
 * int64 and size_t. */
int kiln_vm_size_fits(int rank, const int64_t *shape, kiln_dtype dt);

/* Bytes of buffer b at its run-time shape. */
size_t kiln_vm_buf_bytes(const kiln_buf *b);

/* ---- core/runtime/context.c --------------------------------------------- */

/* Free every per-thread context of f. */
void kiln_context_free_all(kiln_function *f);

/* Hoisting: when every shared value f->prep reads is bound, point the
 * prep's shared values at f's data, run the prep and copy its outputs
 * into f's hidden shared values (allocated the first time), then make
 * contexts copy the leaves again.  0 (also when a value is not bound
 * yet: nothing is run), or the prep call's error. */
int kiln_context_prep_run(kiln_function *f, kiln_err *err);

/* ---- core/runtime/tier.c ------------------------------------------------ */

/* Called by kiln_compile once every step has its tier-0 callable and
 * f->tiers is filled: set up triggers, queue immediate jobs. */
int kiln_tier_start(kiln_function *f, kiln_err *err);

/* A context's call sampled step timings (ctx->sample_ns): fold them into
 * the steps' minima, add the context's calls to f's and fire triggers. */
void kiln_tier_sampled(kiln_context *ctx);

/* kiln_function_free: drop queued jobs, and free f now or when the
 * running job ends. */
void kiln_tier_release(kiln_function *f);

#endif
