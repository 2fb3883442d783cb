/*
 * tier.c — tiered compilation: hot kernels move from tier 0 (the
 * interpreter or tcc, compiled before the first call) to tier 1 (llvm)
 * on a bounded pool of background threads, and calls take the new code
 * at their next start (public kiln_function_tier_*; docs/policy.md,
 * "Tiers").
 *
 * The trigger (the tier-up budget, as V8's and HotSpot's): calls are
 * timed kernel by kernel on a context's first two calls and then on
 * every `sample_every`-th (core/runtime/context.c); each step keeps the
 * smallest time seen, t.  Identical kernels (one cache key) form one
 * job: the first of them is its owner, the rest its twins.  A job's
 * tier-0 time per call is T = the sum of t over its steps; after n calls
 * of the function it has spent about n x T on tier 0.  At a sampled call
 * a waiting job is queued when
 *
 *   n x T >= budget x compile_ms x r,
 *
 * compile_ms being its predicted tier-1 compile (tiers' compile model:
 * CPU ms once the compiler is loaded, from the kernel's instructions and
 * inputs) and r what the function's finished tier-1 compiles took (CPU)
 * over what the model predicted for them (1 before the first, clamped
 * to [1/16, 16]).  A job whose predicted saving per call,
 * T x frac with frac = 1 - call_ns(tier 1) / call_ns(tier 0) from the
 * cost model, is not above zero or is below min_gain_ns never tiers up.
 * The function is also weighed as a whole: once n x (sum of T over its
 * jobs not found too small) >= budget x (sum of their compile_ms) x r,
 * every waiting job is queued, the best saving per compile ms first.
 * A kernel the rules sent to a backend that is not a tier-0 backend
 * (the default policy's `heavy` rule) is queued at once.  With
 * tiers.preload, a job of step -1 queued by kiln_tier_start loads and
 * sets up the tier-1 backend (preload_job) before any trigger fires.
 *
 * The swap.  A finished job stores the new callable in every step of the
 * job (release), marks them SWAPPED and bumps f->swap_gen; a context
 * compares swap_gen at the start of each call and takes the new callables
 * (preparing their calls again), so a call in flight finishes on the code
 * it started with.  Old callables stay until the function is freed.
 *
 * The pool.  One pool per process, as many threads as the largest
 * `threads` asked for (at most 64), started when the first job is queued,
 * at nice +10, kept until the process exits (a destructor stops and
 * joins them).  A job holds a reference to its function:
 * kiln_function_free drops the queued jobs, marks the function dead and
 * returns at once; the job running, if any, finishes its compile, and
 * the last reference frees the function.
 *
 * Exit.  A process may exit (return from main, exit() on any thread)
 * while a tier-1 compile runs.  The tier-1 backend's compiler (libLLVM)
 * registers its C++ static destructors with __cxa_atexit when it is
 * loaded, and function-local statics when a compile first reaches them;
 * glibc runs exit handlers last-registered-first, handlers registered
 * while exit runs included (they run next), and libkiln's ELF destructor
 * (pool_stop) only after all of them.  So, by construction:
 *
 *  1. A compile (and the loading that may come first) counts itself in
 *     flight under pool.lock, and does not start once the exit gate is
 *     closed (compile_job).
 *  2. The first job of a backend loads it and has it set its compiler up
 *     (compiler_init, ABI 1.6: llvm loads libLLVM, initialises its
 *     target and options and runs one warm-up compile) on the job's
 *     thread, between two registrations of exit_gate (set_up_backend).
 *     The gate closes the pool (no compile starts after it, queued jobs
 *     are dropped) and waits for the compiles in flight.  If exit begins
 *     after the set-up, the second registration is younger than every
 *     handler the set-up registered and runs first.  If exit began just
 *     before, the first registration is younger than the handler exit is
 *     running and runs next: the pool closes before anything loads.  If
 *     exit begins during the set-up, what guards it is the compiler
 *     module's own gate: libLLVM's load-time destructors are registered
 *     inside the dlopen of llvm_codegen.so, whose constructor registers
 *     kl_exit_wait right after them (a library's dependencies are
 *     constructed first), so that gate is younger and runs before them;
 *     it refuses new work (the set-up then fails, touching nothing) or
 *     waits for the set-up in flight (kl_init_guarded counts itself busy).
 *     One window is left: exit's running handler returning in the
 *     microseconds between libLLVM's constructors and llvm_codegen.so's
 *     inside that dlopen.  Closing it would mean loading libLLVM on the
 *     calling thread, +100-140 ms on a cold kiln_compile (measured);
 *     declined.  If atexit fails (exit is past its handlers), the gate is
 *     closed at once and nothing loads.
 *  3. If exit reaches libkiln's destructor first, pool_stop joins the
 *     workers, each after the job it runs.
 *
 * Statics a later compile creates that the warm-up did not are
 * registered after the gate; the llvm compiler module re-registers a gate
 * of its own after its first compiles for those (kl_exit_wait in
 * backends/llvm/llvm.c).  docs/backends.md, "Exit during tier-up".
 *
 * Locks: f->tier_lock (the steps' tier fields) may be held when taking
 * pool.lock (the queue, f->refs, f->tier_jobs), never the reverse.
 */
#define _GNU_SOURCE     /* syscall(SYS_gettid) */
#include "function.h"
#include "loader.h"
#include "vm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct tier_job {
    kiln_function *f;
    int step;               /* the owner */
    struct tier_job *next;
} tier_job;

#define POOL_MAX 64

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;    /* a job was queued, or shutdown */
    pthread_cond_t done;    /* a job ended (kiln_function_tier_wait) */
    tier_job *head, *tail;
    int n_threads;
    pthread_t th[POOL_MAX];
    tier_job running[POOL_MAX];   /* each worker's job, f NULL when idle */
    int shutdown;
    int exiting;            /* the exit gate is closed: no compile starts */
    int forking;            /* fork_prepare waits for the compiles in flight */
    int in_flight;          /* compiles running (pool and kiln_function_tier_up) */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, NULL, NULL, 0, {0}, {{0}}, 0, 0, 0, 0};

static int state_of(const kiln_tier_step *t)
{
    return atomic_load_explicit(&t->state, memory_order_acquire);
}

static void set_state(kiln_tier_step *t, int st)
{
    atomic_store_explicit(&t->state, st, memory_order_release);
}

/* Every step of job `owner` (the owner and its twins) gets state st. */
static void set_job_state(kiln_function *f, int owner, int st)
{
    for (int j = owner; j >= 0; j = f->tiers[j].next_twin)
        set_state(&f->tiers[j], st);
}

/* 1 when some step may still move up: contexts keep sampling. */
static void update_active(kiln_function *f)
{
    int active = 0;
    for (int i = 0; i < f->prog.n_steps && !active; i++) {
        int st = state_of(&f->tiers[i]);
        active = st == KILN_TIER_WAITING || st == KILN_TIER_QUEUED ||
                 st == KILN_TIER_COMPILING;
    }
    atomic_store_explicit(&f->tier_active, active, memory_order_relaxed);
}

/* ---- the pool ---------------------------------------------------------- */

static void run_job(kiln_function *f, int owner);

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    /* below the threads that call the function (per thread on Linux) */
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && prio < 10)
        (void)setpriority(PRIO_PROCESS, 0, 10);
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.head && !pool.shutdown)
            pthread_cond_wait(&pool.work, &pool.lock);
        if (!pool.head)
            break;
        tier_job *j = pool.head;
        pool.head = j->next;
        if (!pool.head)
            pool.tail = NULL;
        kiln_function *f = j->f;
        int step = j->step;
        free(j);
        pool.running[me] = (tier_job){f, step, NULL};
        pthread_mutex_unlock(&pool.lock);
        run_job(f, step);
        pthread_mutex_lock(&pool.lock);
        pool.running[me].f = NULL;
        f->tier_jobs--;
        int last = --f->refs == 0;
        pthread_cond_broadcast(&pool.done);
        if (last) {
            pthread_mutex_unlock(&pool.lock);
            kiln_vm_destroy(f);
            pthread_mutex_lock(&pool.lock);
        }
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* At exit: let the workers finish the job they run and join them, so that
 * nothing they hold is left behind. */
/* Drop every queued job (caller holds pool.lock): at exit, the jobs of
 * functions never freed go with them. */
static void drop_queue(void)
{
    while (pool.head) {
        tier_job *j = pool.head;
        pool.head = j->next;
        j->f->tier_jobs--;
        j->f->refs--;
        free(j);
    }
    pool.tail = NULL;
    pthread_cond_broadcast(&pool.done);
}

/* The exit gate (see "Exit" above): registered with atexit after a
 * tier-1 backend set its compiler up, so it runs before that compiler's
 * static destructors. */
static void exit_gate(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.exiting = 1;
    drop_queue();
    while (pool.in_flight > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

/* The main thread's gate.  glibc's exit() runs the exiting thread's
 * thread_local destructors (those registered with
 * __cxa_thread_atexit_impl) before any atexit handler, so a gate
 * registered that way on the main thread runs first when the process
 * ends by returning from main or by exit() on the main thread — the way
 * nearly every program, Python included, ends — whatever the compiles
 * in flight registered since: no handler of libLLVM runs before it, with
 * no window.  It is registered by the main thread's first tiered
 * kiln_compile (kiln_tier_start) or first enqueue.  If
 * the main thread ends by pthread_exit instead, the pool closes and
 * kernels stay on tier 0 for the rest of the process (correct, slower).
 * exit() on another thread is covered by the atexit gates alone. */
extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj,
                                    void *dso) __attribute__((weak));
extern void *__dso_handle;

static void main_thread_gate(void *unused)
{
    (void)unused;
    exit_gate();
}

static void register_main_gate(void)
{
    static atomic_int done;
    if (atomic_load_explicit(&done, memory_order_relaxed) ||
        !__cxa_thread_atexit_impl ||
        (pid_t)syscall(SYS_gettid) != getpid() ||
        atomic_exchange(&done, 1))
        return;
    (void)__cxa_thread_atexit_impl(main_thread_gate, NULL, &__dso_handle);
}

__attribute__((destructor)) static void pool_stop(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.shutdown = 1;
    pool.exiting = 1;
    drop_queue();
    int n = pool.n_threads;
    pool.n_threads = 0;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < n; i++)
        pthread_join(pool.th[i], NULL);
}

/* fork(): the child has none of the pool's threads.  Its lock is held
 * across the fork (so the queue is consistent in the child), made anew in
 * the child, whose jobs that were running go back to the queue's front;
 * the next enqueue or kiln_function_tier_wait starts workers again.  A
 * function whose tier lock a worker held at the fork is left locked in
 * the child (docs/policy.md, "Tiers": fork). */
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork() waits for the compiles in flight (a set-up included) and holds
 * new ones back, so that no compile runs across it: the child never
 * holds half of a set-up or a compiler lock of a thread it does not
 * have.  A child forked during tier-up hung at exit so, on the count of
 * compiles in flight (its exit gate waited for them) or on libLLVM's
 * locks.  The fork may so take up to one compile longer. */
static void fork_prepare(void)
{
    /* setup_lock is not taken: a set-up runs only in flight (its thread
     * takes setup_lock, then pool.lock), so once none is in flight and
     * new ones wait, nobody holds it.  Taking it here, before waiting,
     * deadlocked with a set-up in flight (a tier-up's first fork under
     * ASan, every time: CI timed out on it) */
    pthread_mutex_lock(&pool.lock);
    /* no compile runs across the fork: a compile holds the backend's own
     * locks (libLLVM's), which the child would find held by a thread it
     * does not have, and hang on at exit; new ones wait (compile_job) */
    pool.forking = 1;
    while (pool.in_flight > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
}

static void fork_parent(void)
{
    pool.forking = 0;
    pthread_cond_broadcast(&pool.done);
    pthread_mutex_unlock(&pool.lock);
}

static void fork_child(void)
{
    pthread_mutex_init(&setup_lock, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.in_flight = 0;
    pool.forking = 0;
    for (int i = 0; i < pool.n_threads; i++) {
        tier_job *r = &pool.running[i];
        if (r->f && (r->step < 0 || state_of(&r->f->tiers[r->step]) !=
                                        KILN_TIER_COMPILING)) {
            r->f->tier_jobs--;  /* it ended; its worker had not said so */
            r->f->refs--;
            r->f = NULL;
            continue;
        }
        tier_job *j = r->f ? malloc(sizeof *j) : NULL;
        if (j) {
            *j = (tier_job){r->f, r->step, pool.head};
            pool.head = j;
            if (!pool.tail)
                pool.tail = j;
            set_job_state(r->f, r->step, KILN_TIER_QUEUED);
        } else if (r->f) {      /* out of memory: the job is dropped */
            r->f->tier_jobs--;
            r->f->refs--;
            set_job_state(r->f, r->step, KILN_TIER_WAITING);
        }
        r->f = NULL;
    }
    pool.n_threads = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void)
{
    (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n <= 2 ? 1 : n > POOL_MAX ? POOL_MAX : (int)n - 1;
}

/* Start pool threads up to `want` (caller holds pool.lock). */
static void grow_pool(int want)
{
    if (want <= 0)
        want = default_threads();
    if (want > POOL_MAX)
        want = POOL_MAX;
    pthread_once(&atfork_once, register_atfork);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)16 << 20);  /* optimisers */
    while (pool.n_threads < want && !pool.shutdown &&
           pthread_create(&pool.th[pool.n_threads], &attr, worker,
                          (void *)(intptr_t)pool.n_threads) == 0)
        pool.n_threads++;
    pthread_attr_destroy(&attr);
}

/* ---- setting a tier-1 backend up (see "Exit") ------------------------- */

#define SET_UP_MAX 16
static const kiln_backend *set_up[SET_UP_MAX];
static int n_set_up;

/* The gate, registered now: the newest exit handler.  0, or -1 when exit
 * is already past its handlers (the gate is then closed at once). */
static int register_gate(void)
{
    if (atexit(exit_gate) == 0)
        return 0;
    pthread_mutex_lock(&pool.lock);
    pool.exiting = 1;
    pthread_mutex_unlock(&pool.lock);
    return -1;
}

/* compiler_init of be on this thread, once per backend (past SET_UP_MAX
 * backends, once per call: still correct), between two registrations of
 * the exit gate.  The caller counts itself in flight (compile_job), so a
 * gate that runs — the first one, if exit began before or during the
 * set-up; the second, if after — waits for the set-up to end before any
 * handler it registered runs.  0, or -1 with the reason in why. */
static int set_up_backend(const kiln_backend *be, char *why, size_t size)
{
    pthread_mutex_lock(&setup_lock);
    for (int i = 0; i < n_set_up; i++)
        if (set_up[i] == be) {
            pthread_mutex_unlock(&setup_lock);
            return 0;
        }
    int rc = 0;
    if (register_gate()) {
        snprintf(why, size, "the process is exiting");
        rc = -1;
    } else if (be->struct_size >= offsetof(kiln_backend, compiler_init) +
                                      sizeof be->compiler_init &&
               be->compiler_init) {
        kiln_plugin_error *pe = NULL;
        if (be->compiler_init(&pe)) {
            snprintf(why, size, "%s", pe && pe->message ? pe->message
                                                         : "compiler_init "
                                                           "failed");
            if (pe)
                be->error_free(pe);
            rc = -1;
        }
    }
    if (rc == 0 && register_gate()) {
        snprintf(why, size, "the process is exiting");
        rc = -1;
    }
    if (rc == 0 && n_set_up < SET_UP_MAX)
        set_up[n_set_up++] = be;
    pthread_mutex_unlock(&setup_lock);
    return rc;
}

/* The tier-1 backend of job `owner`, loaded and set up on this thread
 * (a pool thread or the caller of kiln_function_tier_up, counted in
 * flight) unless done: the backend, or NULL with the reason in why (the
 * job then fails without compiling).  Takes f->tier_lock to publish. */
static const kiln_backend *ready_job(kiln_function *f, int owner, char *why,
                                     size_t size)
{
    pthread_mutex_lock(&f->tier_lock);
    const kiln_backend *be = f->tiers[owner].be1;
    pthread_mutex_unlock(&f->tier_lock);
    if (be)
        return be;
    kiln_err lerr = {0, ""};
    be = kiln_loader_get(f->tiers[owner].name1, f->plugin_path, NULL, 1,
                         &lerr);
    if (!be) {
        snprintf(why, size, "%s", lerr.message);
        return NULL;
    }
    if (set_up_backend(be, why, size))
        return NULL;
    pthread_mutex_lock(&f->tier_lock);
    for (int j = owner; j >= 0; j = f->tiers[j].next_twin)
        f->tiers[j].be1 = be;
    pthread_mutex_unlock(&f->tier_lock);
    return be;
}

/* Record when job `owner` was queued (caller holds f->tier_lock). */
static void note_queued(kiln_function *f, int owner)
{
    int64_t calls = (int64_t)atomic_load_explicit(&f->calls,
                                                  memory_order_relaxed);
    double s = f->compiled_at > 0 ? kiln_vm_seconds() - f->compiled_at : 0;
    for (int j = owner; j >= 0; j = f->tiers[j].next_twin)
        if (f->tiers[j].queued_call < 0) {
            f->tiers[j].queued_call = calls;
            f->tiers[j].queued_s = s;
        }
}

/* Queue job `owner` of f (caller holds f->tier_lock).  0, or -1 when no
 * worker could be started or memory ran out (the job stays waiting). */
static int enqueue(kiln_function *f, int owner)
{
    tier_job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    *j = (tier_job){f, owner, NULL};
    register_main_gate();
    pthread_mutex_lock(&pool.lock);
    if (!pool.exiting)
        grow_pool(f->n_threads);
    if (pool.n_threads == 0 || pool.exiting) {
        pthread_mutex_unlock(&pool.lock);
        free(j);
        return -1;
    }
    if (pool.tail)
        pool.tail->next = j;
    else
        pool.head = j;
    pool.tail = j;
    f->refs++;
    f->tier_jobs++;
    pthread_cond_signal(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    set_job_state(f, owner, KILN_TIER_QUEUED);
    note_queued(f, owner);
    return 0;
}

/* Take f's queued jobs out of the queue (caller holds pool.lock); with
 * owner >= 0 only that one.  Returns how many. */
static int unqueue(kiln_function *f, int owner)
{
    int n = 0;
    tier_job **pp = &pool.head, *last = NULL;
    while (*pp) {
        tier_job *j = *pp;
        if (j->f == f && (owner < 0 || j->step == owner)) {
            *pp = j->next;
            free(j);
            f->tier_jobs--;
            f->refs--;
            n++;
        } else {
            last = j;
            pp = &j->next;
        }
    }
    pool.tail = last;
    pthread_cond_broadcast(&pool.done);
    return n;
}

/* ---- one job ------------------------------------------------------------ */

/* The job of `owner` compiled c in `seconds`: every step of it runs c from
 * each context's next call (caller holds f->tier_lock). */
static void publish(kiln_function *f, int owner, const kiln_backend *be,
                    kiln_callable *c, double seconds, double cpu)
{
    int64_t calls = (int64_t)atomic_load_explicit(&f->calls,
                                                  memory_order_relaxed);
    double now = kiln_vm_seconds();
    for (int j = owner; j >= 0; j = f->tiers[j].next_twin) {
        kiln_tier_step *t = &f->tiers[j];
        t->be1 = be;
        atomic_store_explicit(&t->callable1, c, memory_order_release);
        t->owns1 = j == owner;
        t->tier = 1;
        t->swapped_call = calls;
        t->swapped_s = f->compiled_at > 0 ? now - f->compiled_at : 0;
        t->compile1_s = seconds;
        set_state(t, KILN_TIER_SWAPPED);
    }
    /* the model predicts CPU time: a compile starved by other work (the
     * pool runs at nice +10) must not make later triggers wait longer;
     * a cache hit (cpu 0) says nothing about compiles */
    if (cpu > 0) {
        f->compile_scale_num += cpu;
        f->compile_scale_den += f->tiers[owner].pred_compile_ms * 1e-3;
    }
    atomic_fetch_add_explicit(&f->swap_gen, 1, memory_order_release);
    update_active(f);
}

/* Count this thread in flight before anything is loaded or compiled
 * ("Exit"): 1, or 0 when the exit gate is closed (nothing may start). */
static int begin_flight(void)
{
    pthread_mutex_lock(&pool.lock);
    while (pool.forking && !pool.exiting)
        pthread_cond_wait(&pool.done, &pool.lock);
    int go = !pool.exiting;
    pool.in_flight += go;
    pthread_mutex_unlock(&pool.lock);
    return go;
}

static void end_flight(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.in_flight--;
    pthread_cond_broadcast(&pool.done);
    pthread_mutex_unlock(&pool.lock);
}

/* The preload job (tiers.preload; step -1 in the queue): load and set up
 * the tier-1 backend of f's first waiting job, as that job's compile
 * would, so that its compile starts at once when the trigger fires. */
static void preload_job(kiln_function *f)
{
    int owner = -1;
    pthread_mutex_lock(&f->tier_lock);
    for (int i = 0; i < f->prog.n_steps && owner < 0 && !f->dead; i++)
        if (f->tiers[i].owner == i && f->tiers[i].name1 &&
            state_of(&f->tiers[i]) == KILN_TIER_WAITING && !f->tiers[i].be1)
            owner = i;
    pthread_mutex_unlock(&f->tier_lock);
    if (owner < 0 || !begin_flight())
        return;
    char why[600];
    (void)ready_job(f, owner, why, sizeof why);  /* a failure: the job's
                                                    compile reports it */
    end_flight();
}

/* Compile job `owner` of f in this thread: state COMPILING was set by the
 * caller; the outcome is published, or the job marked FAILED. */
static int compile_job(kiln_function *f, int owner, char *why, size_t size)
{
    kiln_tier_step *t = &f->tiers[owner];
    kiln_callable *c = NULL;
    const kiln_backend *be = NULL;
    double secs = 0, cpu = 0;
    int rc = -1;
    if (!begin_flight()) {
        snprintf(why, size, "the process is exiting");
    } else {
        be = ready_job(f, owner, why, size);
        if (be)
            rc = f->compile_into(f, &f->prog.steps[owner], be, t->co1,
                                 &c, &secs, &cpu, why, size);
        end_flight();
    }
    pthread_mutex_lock(&f->tier_lock);
    if (rc == 0 && !f->forbidden)
        publish(f, owner, be, c, secs, cpu);
    else {
        if (rc == 0)
            kiln_vm_callable_free(be, c);
        set_job_state(f, owner, rc ? KILN_TIER_FAILED : KILN_TIER_NEVER);
        update_active(f);
    }
    pthread_cond_broadcast(&f->tier_cond);
    pthread_mutex_unlock(&f->tier_lock);
    return rc;
}

static void run_job(kiln_function *f, int owner)
{
    if (owner < 0) {
        preload_job(f);
        return;
    }
    pthread_mutex_lock(&f->tier_lock);
    int go = !f->dead && !f->forbidden &&
             state_of(&f->tiers[owner]) == KILN_TIER_QUEUED;
    if (go)
        set_job_state(f, owner, KILN_TIER_COMPILING);
    pthread_mutex_unlock(&f->tier_lock);
    if (!go)
        return;
    char why[600];
    compile_job(f, owner, why, sizeof why);
}

/* ---- from kiln_compile and the calls ------------------------------------ */

int kiln_tier_start(kiln_function *f, kiln_err *err)
{
    /* the main thread's gate, also when only other threads will call (and
     * enqueue): a program that compiles on its main thread, calls on
     * workers and returns from main had only the atexit gates (one
     * "pure virtual method called" abort in 40 runs of
     * test_exit_tierup.sh's return mode under load) */
    register_main_gate();
    int n = f->prog.n_steps;
    const kiln_policy *pol = kiln_plan_policy(f->plan);
    /* twins: steps with one key and one tier-1 backend form one job */
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    int *map = malloc(sizeof *map * cap);
    if (!map)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < cap; k++)
        map[k] = -1;
    for (int i = 0; i < n; i++) {
        kiln_tier_step *t = &f->tiers[i];
        t->owner = i;
        t->next_twin = -1;
        int st = state_of(t);
        if (!t->name1 ||
            (st != KILN_TIER_WAITING && st != KILN_TIER_NEVER))
            continue;
        const kiln_key *key = &f->prog.steps[i].key;
        uint64_t h;
        memcpy(&h, key->b, sizeof h);
        size_t k = (size_t)h & (cap - 1);
        for (; map[k] >= 0; k = (k + 1) & (cap - 1)) {
            const kiln_tier_step *o = &f->tiers[map[k]];
            if (!strcmp(o->name1, t->name1) &&
                !memcmp(f->prog.steps[map[k]].key.b, key->b, KILN_KEY_BYTES))
                break;
        }
        if (map[k] < 0) {
            map[k] = i;
            t->last_twin = i;
        } else {
            kiln_tier_step *o = &f->tiers[map[k]];
            t->owner = map[k];
            f->tiers[o->last_twin].next_twin = i;
            o->last_twin = i;
            o->immediate |= t->immediate;
        }
    }
    free(map);
    f->tier_order = calloc(n > 0 ? (size_t)n : 1, sizeof *f->tier_order);
    if (!f->tier_order)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    kiln_kernel_info info;
    for (int i = 0; i < n; i++) {
        kiln_tier_step *t = &f->tiers[i];
        if (!t->name1)
            continue;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        double cost = kiln_function_kernel_info(f, i, &info, NULL) == 0
                          ? info.facts.cost : 0;
        const kiln_kernel *k = &f->prog.steps[i].kernel;
        t->pred_compile_ms = f->compile_model[0] +
                             f->compile_model[1] * (double)k->n_instrs +
                             f->compile_model[2] * (double)k->n_inputs;
        double c0 = kiln_policy_call_ns(pol, t->be0->name, cost);
        double c1 = kiln_policy_call_ns(pol, t->name1, cost);
        t->pred_frac = c0 > 0 && c1 < c0 ? 1 - c1 / c0 : 0;
    }
    pthread_mutex_lock(&f->tier_lock);
    for (int i = 0; i < n; i++)
        if (f->tiers[i].owner == i && f->tiers[i].immediate &&
            state_of(&f->tiers[i]) == KILN_TIER_WAITING)
            (void)enqueue(f, i);
    /* tiers.preload: the tier-1 compiler is set up now, in the
     * background, when some kernel waits for it */
    int waits = 0;
    for (int i = 0; i < n && f->preload && !f->forbidden && !waits; i++)
        waits = f->tiers[i].name1 &&
                state_of(&f->tiers[i]) == KILN_TIER_WAITING;
    if (waits)
        (void)enqueue(f, -1);
    update_active(f);
    pthread_mutex_unlock(&f->tier_lock);
    return 0;
}

/* qsort's comparison of owners by saving per predicted compile ms, the
 * largest first (sort_f is set under f->tier_lock, which serialises
 * the sorts of one function; functions sort under their own locks, so
 * the pointer is per thread). */
static _Thread_local const kiln_function *sort_f;

static int by_gain_per_ms(const void *a, const void *b)
{
    const kiln_tier_step *x = &sort_f->tiers[*(const int *)a];
    const kiln_tier_step *y = &sort_f->tiers[*(const int *)b];
    double rx = x->gain / (x->pred_compile_ms > 0 ? x->pred_compile_ms : 1);
    double ry = y->gain / (y->pred_compile_ms > 0 ? y->pred_compile_ms : 1);
    return rx > ry ? -1 : rx < ry ? 1 : *(const int *)a - *(const int *)b;
}

void kiln_tier_sampled(kiln_context *ctx)
{
    kiln_function *f = ctx->f;
    pthread_mutex_lock(&f->tier_lock);
    uint64_t n = atomic_fetch_add_explicit(&f->calls,
                                           ctx->calls - ctx->calls_told,
                                           memory_order_relaxed) +
                 (ctx->calls - ctx->calls_told);
    ctx->calls_told = ctx->calls;
    for (int i = 0; i < f->prog.n_steps; i++) {
        kiln_tier_step *t = &f->tiers[i];
        if (t->tier != 0)
            continue;
        double ns = ctx->sample_ns[i];
        if (!t->samples || ns < t->min_ns)
            t->min_ns = ns;
        t->samples++;
    }
    double r = f->compile_scale_den > 0
                   ? f->compile_scale_num / f->compile_scale_den : 1;
    r = r < 1.0 / 16 ? 1.0 / 16 : r > 16 ? 16 : r;
    /* each job by itself; and the function as a whole: once the time
     * all its jobs have spent on tier 0 reaches `budget` x compiling them
     * all, the function has shown a long run and every waiting job is
     * queued, the best saving per compile millisecond first (a model's
     * ~1 us kernels would otherwise each wait for their own budget, and
     * the last of them long after the others) */
    double spent_all = 0, compile_all = 0;
    int n_wait = 0;
    for (int i = 0; i < f->prog.n_steps && !f->forbidden; i++) {
        kiln_tier_step *t = &f->tiers[i];
        int st = state_of(t);
        if (t->owner != i || !t->name1 || t->samples < 2)
            continue;
        if (t->tier == 0) {     /* swapped jobs keep their tier-0 time */
            double t0 = 0;
            for (int j = i; j >= 0; j = f->tiers[j].next_twin)
                t0 += f->tiers[j].min_ns;
            t->t0_ns = t0;
            t->gain = t0 * t->pred_frac;
        }
        if (st == KILN_TIER_WAITING) {
            double t0 = t->t0_ns;
            if (!(t->gain > 0) || t->gain < f->min_gain_ns) {
                set_job_state(f, i, KILN_TIER_NEVER);
                continue;
            }
            if ((double)n * t0 >= f->budget * t->pred_compile_ms * 1e6 * r)
                (void)enqueue(f, i);
            else
                f->tier_order[n_wait++] = i;
        } else if (st != KILN_TIER_QUEUED && st != KILN_TIER_COMPILING &&
                   st != KILN_TIER_SWAPPED)
            continue;       /* never, failed, fixed: no part of the run */
        spent_all += t->t0_ns;
        compile_all += t->pred_compile_ms;
    }
    if (n_wait > 0 &&
        (double)n * spent_all >= f->budget * compile_all * 1e6 * r) {
        sort_f = f;
        qsort(f->tier_order, (size_t)n_wait, sizeof *f->tier_order,
              by_gain_per_ms);
        for (int k = 0; k < n_wait; k++)
            (void)enqueue(f, f->tier_order[k]);
    }
    update_active(f);
    pthread_mutex_unlock(&f->tier_lock);
}

void kiln_tier_release(kiln_function *f)
{
    if (!f->tiers) {
        kiln_vm_destroy(f);
        return;
    }
    pthread_mutex_lock(&f->tier_lock);
    f->dead = 1;
    f->forbidden = 1;       /* a compile in flight is thrown away */
    pthread_mutex_lock(&pool.lock);
    unqueue(f, -1);
    int last = --f->refs == 0;
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&f->tier_lock);
    if (last)
        kiln_vm_destroy(f);
}

/* ---- public ------------------------------------------------------------- */

int kiln_function_tier_wait(kiln_function *f, double timeout_seconds)
{
    if (!f)
        return KILN_ERR_ARG;
    /* NaN and anything past a year wait without a limit (a time_t
     * conversion of a larger deadline would overflow) */
    int forever = timeout_seconds < 0 || timeout_seconds != timeout_seconds ||
                  timeout_seconds > 365.0 * 86400;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (!forever) {
        double s = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec +
                   timeout_seconds;
        until.tv_sec = (time_t)s;
        until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
        if (until.tv_nsec < 0 || until.tv_nsec >= 1000000000L)
            until.tv_nsec = 0;
    }
    int rc = 0;
    pthread_mutex_lock(&pool.lock);
    if (pool.head && pool.n_threads == 0)
        grow_pool(f->n_threads);    /* a child of fork(): no workers yet */
    while (f->tier_jobs > 0) {
        if (forever) {
            pthread_cond_wait(&pool.done, &pool.lock);
            continue;
        }
        int e = pthread_cond_timedwait(&pool.done, &pool.lock, &until);
        if (e != 0 && e != EINTR) {     /* ETIMEDOUT, or a bad deadline */
            rc = f->tier_jobs > 0;
            break;
        }
    }
    pthread_mutex_unlock(&pool.lock);
    return rc;
}

void kiln_function_tier_forbid(kiln_function *f)
{
    if (!f || !f->tiers)
        return;
    pthread_mutex_lock(&f->tier_lock);
    f->forbidden = 1;
    pthread_mutex_lock(&pool.lock);
    unqueue(f, -1);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < f->prog.n_steps; i++) {
        int st = state_of(&f->tiers[i]);
        if (st == KILN_TIER_WAITING || st == KILN_TIER_QUEUED)
            set_state(&f->tiers[i], KILN_TIER_NEVER);
    }
    update_active(f);
    pthread_mutex_unlock(&f->tier_lock);
}

/* Tier job `owner` up in this thread (caller holds f->tier_lock, which
 * is held again on return). */
static int force_job(kiln_function *f, int owner, kiln_err *err)
{
    for (;;) {
        int st = state_of(&f->tiers[owner]);
        if (st == KILN_TIER_COMPILING) {
            pthread_cond_wait(&f->tier_cond, &f->tier_lock);
            continue;
        }
        if (st == KILN_TIER_SWAPPED || st == KILN_TIER_FIXED ||
            st == KILN_TIER_FAILED || f->forbidden)
            return 0;
        break;
    }
    if (state_of(&f->tiers[owner]) == KILN_TIER_QUEUED) {
        pthread_mutex_lock(&pool.lock);
        unqueue(f, owner);
        pthread_mutex_unlock(&pool.lock);
    }
    set_job_state(f, owner, KILN_TIER_COMPILING);
    note_queued(f, owner);
    pthread_mutex_lock(&pool.lock);
    f->tier_jobs++;                 /* kiln_function_tier_wait sees it */
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&f->tier_lock);
    char why[600];
    int rc = compile_job(f, owner, why, sizeof why);
    pthread_mutex_lock(&pool.lock);
    f->tier_jobs--;
    pthread_cond_broadcast(&pool.done);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_lock(&f->tier_lock);
    if (rc) {
        char lbl[160];
        return kiln_seterr(err, KILN_ERR_BACKEND,
                           "tier-up of kernel %d (%s) with '%s': %s", owner,
                           kiln_vm_node_label(f->g,
                                              f->prog.steps[owner].node,
                                              lbl, sizeof lbl),
                           f->tiers[owner].name1, why);
    }
    return 0;
}

int kiln_function_tier_up(kiln_function *f, int kernel, kiln_err *err)
{
    if (!f)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_tier_up: f is NULL");
    if (kernel < -1 || kernel >= f->prog.n_steps)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_tier_up: no kernel %d", kernel);
    if (!f->tiers)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&f->tier_lock);
    for (int i = kernel < 0 ? 0 : kernel;
         i < (kernel < 0 ? f->prog.n_steps : kernel + 1); i++) {
        if (!f->tiers[i].name1)
            continue;
        /* every kernel is tried; the first failure is the one reported */
        int r = force_job(f, f->tiers[i].owner, rc ? NULL : err);
        if (!rc)
            rc = r;
    }
    pthread_mutex_unlock(&f->tier_lock);
    return rc;
}

int kiln_function_tier_info(const kiln_function *f, int i,
                            kiln_tier_info *info)
{
    if (!f || !info || i < 0 || i >= f->prog.n_steps ||
        info->struct_size < offsetof(kiln_tier_info, compile_seconds) +
                                sizeof(double))
        return -1;
    const kiln_step *s = &f->prog.steps[i];
    kiln_tier_info o;
    memset(&o, 0, sizeof o);
    o.struct_size = info->struct_size;
    o.swapped_call = -1;
    o.swapped_seconds = -1;
    o.queued_call = -1;
    o.queued_seconds = -1;
    o.backend = s->backend ? s->backend->name : NULL;
    if (f->tiers) {
        kiln_function *mf = (kiln_function *)f;   /* the lock only */
        pthread_mutex_lock(&mf->tier_lock);
        const kiln_tier_step *t = &f->tiers[i];
        o.state = state_of(t);
        o.tier = t->tier;
        o.tier1 = t->name1;
        if (o.state == KILN_TIER_SWAPPED) {
            o.backend = t->be1->name;
            o.swapped_call = t->swapped_call;
            o.swapped_seconds = t->swapped_s;
            o.compile_seconds = t->compile1_s;
        }
        o.measured_ns = t->min_ns;
        const kiln_tier_step *ow = &f->tiers[t->owner];
        o.queued_call = t->queued_call;
        o.queued_seconds = t->queued_s;
        o.predicted_compile_ms = t->name1 ? ow->pred_compile_ms : 0;
        o.predicted_gain_ns = ow->gain;
        pthread_mutex_unlock(&mf->tier_lock);
    }
    /* a caller built against an older kiln.h has a shorter struct */
    memcpy(info, &o, info->struct_size < sizeof o ? info->struct_size
                                                   : sizeof o);
    return 0;
}
