/*
 * test_threads.c — one compiled function called from several threads at
 * once (include/kiln/kiln.h, kiln_function_call's "Threads"), for every
 * backend this build has (interp; tcc and llvm when built).
 *
 *  1. per-thread contexts: radon (its data, gradients), eight schools,
 *     and corpus graphs (tests/graphs: reductions and special functions
 *     over a symbolic dim, gathers and scatters, dot) are compiled once
 *     and called through kiln_function_call from NT threads at once, many
 *     calls each, every thread with its own inputs (its own seeds; where
 *     the graph has symbolic dims, each thread its own sizes, and the last
 *     thread a different size at every call, so that it re-plans while
 *     the others run prepared calls).  Every call is compared bit for bit
 *     (rc, message, dtypes, shapes, bytes) with a single-threaded
 *     reference computed beforehand on a separately compiled function;
 *  2. the same through explicit contexts (kiln_context_new/call/free),
 *     one per thread;
 *  3. the logp callback (core/runtime/callback.c) of radon and eight schools
 *     called from NT threads at once: logp, gradient and return code bit
 *     for bit against single-threaded values, and each thread's
 *     kiln_logp_callback_message is its own call's (points with a
 *     non-finite logp and calls with a bad dim are mixed in); then a new
 *     thread's second and later calls allocate nothing.
 *
 * Run under ThreadSanitizer by .ci/run (make check-threads in a build
 * configured with --enable-tsan).  $KILN_TEST_THREAD_CALLS sets the calls
 * per thread (default 200).
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "found_backends.h"

#define MAX_OUT 32
/* outs, call_copy: a call's results, copied */
#include "call_outs.h"

/* counting allocations: n_allocs, COUNT_ALLOCS */
#include "count_allocs.h"

#define NT 4         /* threads */
#define NSETS 4      /* input sets per thread, used in turn */

static const char *srcdir = ".";
static int n_calls = 200;

/* ---- random numbers (splitmix64) --------------------------------------- */

static uint64_t rnext(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double runif(uint64_t *s)
{
    return (double)(rnext(s) >> 11) * 0x1p-53;
}

/* ---- inputs and results ------------------------------------------------- */

typedef struct inset {
    int n;
    kiln_tensor *t;   /* data owned */
} inset;

static void inset_free(inset *in)
{
    for (int i = 0; i < in->n; i++)
        free(in->t[i].data);
    free(in->t);
    memset(in, 0, sizeof *in);
}

/* Inputs of f from `seed`: every symbolic dim is `sym` (a static dim
 * stays), floats in [-3, 3), integers in [-5, 5], bools at random. */
static int make_inputs(const kiln_function *f, uint64_t seed, int64_t sym,
                       inset *in)
{
    uint64_t s = seed * 7919 + 17;
    in->n = kiln_function_n_inputs(f);
    in->t = calloc((size_t)(in->n ? in->n : 1), sizeof *in->t);
    if (!in->t)
        return -1;
    for (int i = 0; i < in->n; i++) {
        kiln_tensor *t = &in->t[i];
        int64_t dims[KILN_MAX_RANK];
        const char *syms[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &t->dtype, &t->rank, dims, syms);
        for (int d = 0; d < t->rank; d++)
            t->shape[d] = dims[d] >= 0 ? dims[d] : sym;
        int64_t n = kiln_shape_numel(t->rank, t->shape);
        t->data = calloc((size_t)(n ? n : 1), kiln_dtype_size(t->dtype));
        if (!t->data)
            return -1;
        for (int64_t j = 0; j < n; j++) {
            double u = runif(&s);
            switch (t->dtype) {
            case KILN_F64: ((double *)t->data)[j] = u * 6 - 3; break;
            case KILN_F32: ((float *)t->data)[j] = (float)(u * 6 - 3); break;
            case KILN_I64: ((int64_t *)t->data)[j] = (int64_t)(u * 11) - 5; break;
            case KILN_I32: ((int32_t *)t->data)[j] = (int32_t)(u * 11) - 5; break;
            default: ((uint8_t *)t->data)[j] = u < 0.5; break;
            }
        }
    }
    return 0;
}

/* "" when the outputs `out` of a call that returned rc (err) are the
 * reference's bit for bit, else what differs first. */
static const char *differs(const outs *ref, int rc, const kiln_err *err,
                           const kiln_tensor *out, char *buf, size_t size)
{
    if (rc != ref->rc || (rc && strcmp(err->message, ref->msg) != 0)) {
        snprintf(buf, size, "rc %d '%.150s', want rc %d '%.150s'", rc,
                 rc ? err->message : "", ref->rc, ref->msg);
        return buf;
    }
    for (int i = 0; i < ref->n; i++) {
        const kiln_tensor *a = &out[i], *b = &ref->t[i];
        if (a->dtype != b->dtype || a->rank != b->rank ||
            memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank)) {
            snprintf(buf, size, "output %d: dtype or shape differs", i);
            return buf;
        }
        size_t bytes = outs_bytes(b);
        if (bytes && memcmp(a->data, b->data, bytes)) {
            snprintf(buf, size, "output %d: bytes differ", i);
            return buf;
        }
    }
    return "";
}

/* ---- compiling ---------------------------------------------------------- */

static kiln_graph *load_graph(const char *rel)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", srcdir, rel);
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(path, &err);
    if (!g)
        diag("%s: %s", rel, err.message);
    return g;
}

/* f compiled with `backend` only (NULL with a diagnostic when it fails
 * or a kernel fell back to another backend). */
static kiln_function *compile_on(const kiln_graph *g, const char *backend)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.quiet = 1;
    kiln_err err = {0, ""};
    kiln_function *f = kiln_compile(g, &o, &err);
    if (!f) {
        diag("compile with %s: %s", backend, err.message);
        return NULL;
    }
    for (int i = 0; i < kiln_function_n_kernels(f); i++)
        if (strcmp(kiln_function_kernel_backend(f, i), backend) != 0) {
            diag("kernel %d ran on %s, not %s", i,
                 kiln_function_kernel_backend(f, i), backend);
            kiln_function_free(f);
            return NULL;
        }
    return f;
}

static int has_symbolic_input(const kiln_function *f)
{
    for (int i = 0; i < kiln_function_n_inputs(f); i++) {
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK];
        const char *syms[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &dt, &rank, dims, syms);
        for (int d = 0; d < rank; d++)
            if (dims[d] < 0)
                return 1;
    }
    return 0;
}

/* ---- threads ------------------------------------------------------------ */

/* What one thread saw; the first member of every thread's argument. */
typedef struct tally {
    int calls, wrong;
    char first[600];   /* the first difference */
} tally;

static void tally_note(tally *y, int c, int k, const char *d)
{
    y->calls++;
    if (*d && y->wrong++ == 0)
        snprintf(y->first, sizeof y->first, "call %d (input %d): %s", c, k,
                 d);
}

/* The threads of one run wait here, so that they call at once. */
static pthread_barrier_t start_line;

/* Run body(args + t * size) on NT threads started together, join them
 * and add up their tallies (diagnostics name `what`): the wrong calls,
 * and *calls the calls made. */
static int run_threads(void *(*body)(void *), void *args, size_t size,
                       const char *what, int *calls)
{
    pthread_t th[NT];
    pthread_barrier_init(&start_line, NULL, NT);
    for (int t = 0; t < NT; t++)
        if (pthread_create(&th[t], NULL, body, (char *)args + (size_t)t * size)) {
            /* the others would wait for it at the barrier: stop here */
            ok(0, "%s: thread %d of %d started", what, t, NT);
            exit(1);
        }
    int wrong = 0;
    *calls = 0;
    for (int t = 0; t < NT; t++) {
        pthread_join(th[t], NULL);
        const tally *y = (const tally *)(void *)((char *)args + (size_t)t * size);
        *calls += y->calls;
        wrong += y->wrong;
        if (y->wrong)
            diag("%s, thread %d: %s", what, t, y->first);
    }
    pthread_barrier_destroy(&start_line);
    return wrong;
}

/* ---- 1 and 2: kiln_function_call and kiln_context_call ------------------ */

/* The symbolic size of thread t's input set k: threads before the last
 * keep one size each (one of them over several interpreter blocks), the
 * last changes it at every call. */
static int64_t sym_size(int t, int k)
{
    static const int64_t fixed[NT - 1] = {3, 17, 300};
    static const int64_t moving[NSETS] = {1, 260, 0, 9};
    return t < NT - 1 ? fixed[t] : moving[k];
}

typedef struct job {
    tally y;
    kiln_function *f;
    int use_ctx;                  /* kiln_context_new/call/free */
    const inset *in;              /* NSETS sets */
    const outs *ref;              /* their results */
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    kiln_err err = {0, ""};
    kiln_context *ctx = NULL;
    if (j->use_ctx && !(ctx = kiln_context_new(j->f, &err))) {
        snprintf(j->y.first, sizeof j->y.first, "kiln_context_new: %.500s",
                 err.message);
        j->y.wrong = 1;
    }
    pthread_barrier_wait(&start_line);
    for (int c = 0; c < n_calls && (!j->use_ctx || ctx); c++) {
        int k = c % NSETS;
        kiln_tensor out[MAX_OUT];
        memset(&err, 0, sizeof err);
        int rc = ctx ? kiln_context_call(ctx, j->in[k].t, out, &err)
                     : kiln_function_call(j->f, j->in[k].t, out, &err);
        char buf[400];
        tally_note(&j->y, c, k,
                   differs(&j->ref[k], rc, &err, out, buf, sizeof buf));
    }
    kiln_context_free(ctx);
    return NULL;
}

/* NT threads call one function of `rel` compiled with `backend` at once;
 * each compares every call with its reference. */
static void test_model(const char *rel, const char *backend, int use_ctx)
{
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    const char *how = use_ctx ? "kiln_context_call" : "kiln_function_call";
    kiln_graph *g = load_graph(rel);
    kiln_function *ref = g ? compile_on(g, backend) : NULL;
    kiln_function *f = ref ? compile_on(g, backend) : NULL;
    kiln_graph_free(g);
    if (!f) {
        ok(0, "%s, %s: compiled twice", base, backend);
        kiln_function_free(ref);
        return;
    }
    int n_out = kiln_function_n_outputs(f), sym = has_symbolic_input(f);
    if (n_out > MAX_OUT) {
        ok(0, "%s: %d outputs, at most %d here", base, n_out, MAX_OUT);
        kiln_function_free(ref);
        kiln_function_free(f);
        return;
    }
    /* the references, single-threaded, on the other function */
    static inset in[NT][NSETS];
    static outs want[NT][NSETS];
    int setup = 0, ref_errors = 0;
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < NSETS; k++) {
            setup |= make_inputs(f, (uint64_t)(100 * t + k + 1),
                                 sym_size(t, k), &in[t][k]);
            call_copy(ref, in[t][k].t, &want[t][k]);
            ref_errors += want[t][k].rc != 0;
        }
    job jobs[NT];
    for (int t = 0; t < NT; t++)
        jobs[t] = (job){.f = f, .use_ctx = use_ctx, .in = in[t],
                        .ref = want[t]};
    char what[200];
    snprintf(what, sizeof what, "%s, %s, %s", base, backend, how);
    int calls, wrong = run_threads(job_main, jobs, sizeof *jobs, what, &calls);
    ok(!setup && calls == NT * n_calls && wrong == 0,
       "%s: %d threads x %d calls at once%s equal the single-threaded "
       "reference bit for bit (%d wrong; %d of the %d reference calls "
       "fail, compared too)", what, NT, n_calls,
       sym ? " (one thread changing shapes)" : "", wrong, ref_errors,
       NT * NSETS);
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < NSETS; k++) {
            inset_free(&in[t][k]);
            outs_free(&want[t][k]);
        }
    kiln_function_free(ref);
    kiln_function_free(f);
}

/* ---- 3: the logp callback ----------------------------------------------- */

/* One point of a callback's sequence and its single-threaded result. */
typedef struct cb_point {
    uint64_t dim;     /* the dim passed (the callback's, or one more) */
    double *x;
    int rc;
    double logp;
    double *grad;
    char msg[sizeof ((kiln_err *)0)->message];
} cb_point;

typedef struct cb_job {
    tally y;
    kiln_logp_fn fn;
    void *ud;
    uint64_t dim;
    const cb_point *pts;   /* NSETS */
} cb_job;

/* Call the callback at p; "" when rc, logp, gradient and the thread's
 * message are p's, bit for bit, else what differs. */
static const char *cb_check(kiln_logp_fn fn, void *ud, uint64_t dim,
                            const cb_point *p, char *buf, size_t size)
{
    double *grad = malloc(sizeof(double) * (size_t)dim);
    double logp = 0;
    const char *d = "";
    if (!grad) {
        snprintf(buf, size, "out of memory");
        return buf;
    }
    int rc = fn(p->dim, p->x, grad, &logp, ud);
    const char *msg = kiln_logp_callback_message(ud);
    if (rc != p->rc) {
        snprintf(buf, size, "rc %d, want %d", rc, p->rc);
        d = buf;
    } else if (strcmp(msg, p->msg) != 0) {
        snprintf(buf, size, "message '%.200s', want '%.200s'", msg, p->msg);
        d = buf;
    } else if (rc == KILN_LOGP_OK &&
               (memcmp(&logp, &p->logp, sizeof logp) ||
                memcmp(grad, p->grad, sizeof(double) * (size_t)dim))) {
        snprintf(buf, size, "logp %.17g (want %.17g) or gradient differs",
                 logp, p->logp);
        d = buf;
    }
    free(grad);
    return d;
}

static void *cb_main(void *arg)
{
    cb_job *j = arg;
    pthread_barrier_wait(&start_line);
    for (int c = 0; c < n_calls; c++) {
        int k = c % NSETS;
        char buf[400];
        tally_note(&j->y, c, k, cb_check(j->fn, j->ud, j->dim, &j->pts[k],
                                         buf, sizeof buf));
    }
    return NULL;
}

/* A thread's first call makes its scratch; its later calls allocate
 * nothing (counted while no other thread runs). */
typedef struct alloc_job {
    kiln_logp_fn fn;
    void *ud;
    const cb_point *p;
    uint64_t dim;
    int ok;
    long allocs;
} alloc_job;

static void *alloc_main(void *arg)
{
    alloc_job *a = arg;
    char buf[600];
    a->ok = !*cb_check(a->fn, a->ud, a->dim, a->p, buf, sizeof buf);
#if COUNT_ALLOCS
    double *grad = malloc(sizeof(double) * (size_t)a->dim);
    long before = n_allocs;
    for (int r = 0; r < 500 && grad; r++) {
        double lp;
        a->ok &= a->fn(a->dim, a->p->x, grad, &lp, a->ud) == KILN_LOGP_OK;
    }
    a->allocs = n_allocs - before;
    free(grad);
#endif
    return NULL;
}

static void cb_points_free(cb_point (*pts)[NSETS])
{
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < NSETS; k++) {
            free(pts[t][k].x);
            free(pts[t][k].grad);
        }
}

/* Point k of thread t: parameters in [-1, 1); thread 1's point 2 has a
 * huge log scale (a non-finite logp), thread 2's point 3 a bad dim. */
static int cb_make_point(kiln_logp_fn fn, void *ud, uint64_t dim, int t,
                         int k, cb_point *p)
{
    uint64_t s = (uint64_t)(1000 * t + k + 7);
    memset(p, 0, sizeof *p);
    p->x = malloc(sizeof(double) * (size_t)(dim + 1));
    p->grad = malloc(sizeof(double) * (size_t)(dim + 1));
    if (!p->x || !p->grad)
        return -1;
    for (uint64_t i = 0; i <= dim; i++)
        p->x[i] = runif(&s) * 2 - 1;
    if (t == 1 && k == 2)
        p->x[1] = 800.0;   /* radon's log_sigma_a, eight schools' log_tau */
    p->dim = t == 2 && k == 3 ? dim + 1 : dim;
    p->rc = fn(p->dim, p->x, p->grad, &p->logp, ud);
    snprintf(p->msg, sizeof p->msg, "%s", kiln_logp_callback_message(ud));
    return 0;
}

static void test_callback(const char *rel, const char *backend)
{
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    kiln_graph *g = load_graph(rel);
    kiln_function *fr = g ? compile_on(g, backend) : NULL;
    kiln_function *f = fr ? compile_on(g, backend) : NULL;
    kiln_graph_free(g);
    kiln_err err = {0, ""};
    uint64_t dim = 0, dim2 = 0;
    void *ud_ref = NULL, *ud = NULL;
    kiln_logp_fn fn_ref = f ? kiln_function_logp_callback(fr, "logp", &dim,
                                                          &ud_ref, &err)
                            : NULL;
    kiln_logp_fn fn = fn_ref ? kiln_function_logp_callback(f, "logp", &dim2,
                                                           &ud, &err)
                             : NULL;
    if (!fn || dim != dim2) {
        ok(0, "%s, %s: callbacks made: %s", base, backend, err.message);
        kiln_function_free(fr);
        kiln_function_free(f);
        return;
    }
    static cb_point pts[NT][NSETS];
    int setup = 0, fails = 0;
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < NSETS; k++) {
            setup |= cb_make_point(fn_ref, ud_ref, dim, t, k, &pts[t][k]);
            fails += pts[t][k].rc != 0;
        }
    ok(!setup && fails == 2 && pts[1][2].rc == KILN_LOGP_NONFINITE &&
       pts[2][3].rc == KILN_LOGP_BAD_DIM &&
       strstr(pts[2][3].msg, "called with dim") &&
       strstr(pts[1][2].msg, "logp is") && pts[0][0].msg[0] == '\0',
       "%s, %s: single-threaded reference: %d points, a non-finite one "
       "('%s') and a bad dim", base, backend, NT * NSETS, pts[1][2].msg);
    cb_job jobs[NT];
    for (int t = 0; t < NT; t++)
        jobs[t] = (cb_job){.fn = fn, .ud = ud, .dim = dim, .pts = pts[t]};
    char what[200];
    snprintf(what, sizeof what, "%s, %s, logp callback", base, backend);
    int calls, wrong = run_threads(cb_main, jobs, sizeof *jobs, what, &calls);
    ok(calls == NT * n_calls && wrong == 0,
       "%s from %d threads x %d calls at once: logp, gradient, return code "
       "and each thread's own message equal the single-threaded values (%d "
       "wrong)", what, NT, n_calls, wrong);
    /* the main thread never called fn: it has no message */
    ok(strcmp(kiln_logp_callback_message(ud), "") == 0,
       "%s, %s: a thread that never called the callback has no message",
       base, backend);
    alloc_job a = {fn, ud, &pts[0][1], dim, 0, -1};
    pthread_t at;
    int joined = pthread_create(&at, NULL, alloc_main, &a) == 0 &&
                 pthread_join(at, NULL) == 0;
#if COUNT_ALLOCS
    ok(joined && a.ok && a.allocs == 0,
       "%s, %s: a new thread's 500 calls after its first allocate nothing "
       "(%ld)", base, backend, a.allocs);
#else
    ok(joined && a.ok, "%s, %s: a new thread's calls # SKIP allocation "
       "counting under a sanitizer", base, backend);
#endif
    cb_points_free(pts);
    kiln_function_free(fr);
    kiln_function_free(f);
}

int main(void)
{
    if (getenv("KILN_SRCDIR"))
        srcdir = getenv("KILN_SRCDIR");
    if (getenv("KILN_TEST_THREAD_CALLS"))
        n_calls = atoi(getenv("KILN_TEST_THREAD_CALLS"));
    if (n_calls < NSETS)
        n_calls = NSETS;
    unsetenv("KILN_BACKEND");
    static const char *models[] = {
        "examples/radon.kg", "examples/eight_schools.kg",
        "tests/graphs/reduce.kg", "tests/graphs/specials.kg",
        "tests/graphs/index.kg", "tests/graphs/dot.kg"};
    const char *bk[3];
    int nb = found_backends(bk);
    for (int b = 0; b < nb; b++) {
        for (size_t m = 0; m < sizeof models / sizeof *models; m++)
            test_model(models[m], bk[b], 0);
        for (size_t m = 0; m < sizeof models / sizeof *models; m++)
            test_model(models[m], bk[b], 1);
        test_callback("examples/radon.kg", bk[b]);
        test_callback("examples/eight_schools.kg", bk[b]);
    }
    return done_testing();
}
