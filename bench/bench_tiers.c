/* bench/bench_tiers.c — tiered compilation and reentrant calls (make
 * bench-tiers, make bench-parallel; issue 15, docs/performance.md "Tiers").
 *
 * Usage: bench_tiers MODE MODEL.kg CACHEDIR [OPTION...]
 *
 * Time to the N-th call (MODE tiered, interp, llvm):
 *   From before parsing MODEL.kg (cold start when CACHEDIR is empty; a
 *   second run on the same CACHEDIR is the warm start) to the end of the
 *   N-th kiln_function_call, N = 1, 10^2, 10^3, 10^4, 10^5, 10^6, and
 *   the median time of one call over the first 10^5 calls (each timed;
 *   med_us=, issue 27's goal: tiered within 1.25x llvm's).  tiered compiles
 *   with the default policy and KILN_TIERS_POLICY; interp and llvm name
 *   the backend (no tiers).  Inputs: every input element k, j starts at
 *   0.4 sin(1.3 k + 0.7 j + 0.5) (the values bench/calls.py and numba use)
 *   and call i adds 1e-7 ((i + j) mod 8) to it, so that no two
 *   consecutive calls see the same point, as in a sampler.  The loop runs
 *   until at least 10^5 calls, no tier-up queued or compiling (polled with
 *   kiln_function_tier_info, without stopping the calls), and then
 *   --tail seconds more (restarted if a tier-up starts meanwhile); it
 *   stops early at 10^6 calls.  When it stopped before 10^6, t(10^6) =
 *   t(N_last) + (10^6 - N_last) x the time per call over the tail
 *   (x@1000000=1 says so).  --max bounds the whole loop (pending=K then
 *   says how many tier-ups were still unfinished).  first_queued_call=,
 *   last_queued_call=: when the trigger queued the first and the last
 *   tier-1 compile (kiln_tier_info.queued_call).
 *
 * Parallel throughput (MODE par-llvm, par-tiered):
 *   after the loop above (par-tiered: then kiln_function_tier_wait), one
 *   thread calls f for --par-seconds, then two threads call the same f
 *   (kiln_function_call, each with its own inputs) for --par-seconds;
 *   --par-rounds rounds, interleaved; calls per second, median of the
 *   rounds, and their ratio.  Also calls per CPU second of the calling
 *   threads (equal for one and two threads when the calls do not slow
 *   each other down) and the share of a core each thread got (below 1
 *   when other processes use the machine).
 *
 * Options: --tail S (3), --max S (300), --par-seconds S (1),
 *   --par-rounds R (3), --label NAME (the model's name in the output).
 * Output: one line of key=value pairs (bench/tiers.sh reads it); times in
 * seconds.  check= is output 0's first element at the starting point,
 * evaluated after the loop (on whatever tiers then run).  Exit status 1 on
 * any error.  Not a test: nothing here asserts a timing.  Public API only. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <kiln/kiln.h>
#include <kiln/cache.h>
#include <kiln/graph.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_common.h"

static void die(const char *what, const kiln_err *err)
{
    fprintf(stderr, "bench_tiers: %s%s%s\n", what, err ? ": " : "",
            err ? err->message : "");
    exit(1);
}

/* ---- inputs: one private set per calling thread ---------------------- */

typedef struct inputs {
    int n;
    kiln_tensor *t;      /* n tensors pointing into data */
    double *base;        /* the starting point, flattened */
    void *data;          /* the current point, in the inputs' dtypes */
    int64_t *off, total; /* element offset of each input, total elements */
    kiln_tensor *out;
} inputs;

static void inputs_init(inputs *in, const kiln_function *f)
{
    in->n = kiln_function_n_inputs(f);
    in->t = calloc((size_t)in->n + 1, sizeof *in->t);
    in->off = calloc((size_t)in->n + 1, sizeof *in->off);
    in->out = calloc((size_t)kiln_function_n_outputs(f) + 1, sizeof *in->out);
    in->total = 0;
    for (int k = 0; k < in->n; k++) {
        kiln_tensor *t = &in->t[k];
        int64_t dims[KILN_MAX_RANK];
        if (kiln_function_input_type(f, k, &t->dtype, &t->rank, dims, NULL))
            die("input type", NULL);
        if (t->dtype != KILN_F64 && t->dtype != KILN_F32) {
            fprintf(stderr, "bench_tiers: input '%s' is %s; only f64 and "
                    "f32 inputs are supported\n",
                    kiln_function_input_name(f, k), kiln_dtype_name(t->dtype));
            exit(1);
        }
        for (int d = 0; d < t->rank; d++) {
            if (dims[d] < 0) {
                fprintf(stderr, "bench_tiers: input '%s' has a symbolic "
                        "dim\n", kiln_function_input_name(f, k));
                exit(1);
            }
            t->shape[d] = dims[d];
        }
        in->off[k] = in->total;
        in->total += kiln_shape_numel(t->rank, t->shape);
    }
    in->base = malloc(((size_t)in->total + 1) * sizeof *in->base);
    in->data = malloc(((size_t)in->total + 1) * sizeof(double));
    for (int k = 0; k < in->n; k++) {
        kiln_tensor *t = &in->t[k];
        int64_t n = kiln_shape_numel(t->rank, t->shape);
        /* room for doubles whatever the dtype: f32 inputs use half */
        t->data = (char *)in->data + (size_t)in->off[k] * sizeof(double);
        for (int64_t j = 0; j < n; j++)
            in->base[in->off[k] + j] =
                0.4 * sin(1.3 * k + 0.7 * (double)j + 0.5);
    }
}

/* the point of call i (i < 0: the starting point itself) */
static void inputs_set(inputs *in, long i)
{
    for (int k = 0; k < in->n; k++) {
        kiln_tensor *t = &in->t[k];
        int64_t n = kiln_shape_numel(t->rank, t->shape);
        const double *b = in->base + in->off[k];
        if (t->dtype == KILN_F64) {
            double *x = t->data;
            for (int64_t j = 0; j < n; j++)
                x[j] = i < 0 ? b[j] : b[j] + 1e-7 * (double)((i + j) & 7);
        } else {
            float *x = t->data;
            for (int64_t j = 0; j < n; j++)
                x[j] = (float)(i < 0 ? b[j]
                                     : b[j] + 1e-7 * (double)((i + j) & 7));
        }
    }
}

static void inputs_free(inputs *in)
{
    free(in->t);
    free(in->base);
    free(in->data);
    free(in->off);
    free(in->out);
}

static void call(kiln_function *f, inputs *in, long i)
{
    kiln_err err = {0, ""};
    inputs_set(in, i);
    if (kiln_function_call(f, in->t, in->out, &err))
        die("call", &err);
}

/* ---- tiers ----------------------------------------------------------- */

typedef struct tiers {
    int on1, pending, swapped, failed, waiting, never;
    int64_t first_swap_call, last_swap_call;
    double last_swap_s;
    int64_t first_queued_call, last_queued_call;
    double last_queued_s;
} tiers;

static tiers tier_count(const kiln_function *f)
{
    tiers s = {0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1};
    for (int i = 0, n = kiln_function_n_kernels(f); i < n; i++) {
        kiln_tier_info ti;
        memset(&ti, 0, sizeof ti);
        ti.struct_size = sizeof ti;
        if (kiln_function_tier_info(f, i, &ti))
            continue;
        s.on1 += ti.tier == 1;
        s.pending += ti.state == KILN_TIER_QUEUED ||
                     ti.state == KILN_TIER_COMPILING;
        s.failed += ti.state == KILN_TIER_FAILED;
        s.waiting += ti.state == KILN_TIER_WAITING;
        s.never += ti.state == KILN_TIER_NEVER;
        if (ti.queued_call >= 0) {
            if (s.first_queued_call < 0 ||
                ti.queued_call < s.first_queued_call)
                s.first_queued_call = ti.queued_call;
            if (ti.queued_call > s.last_queued_call)
                s.last_queued_call = ti.queued_call;
            if (ti.queued_seconds > s.last_queued_s)
                s.last_queued_s = ti.queued_seconds;
        }
        if (ti.swapped_call >= 0) {
            s.swapped++;
            if (s.first_swap_call < 0 || ti.swapped_call < s.first_swap_call)
                s.first_swap_call = ti.swapped_call;
            if (ti.swapped_call > s.last_swap_call)
                s.last_swap_call = ti.swapped_call;
            if (ti.swapped_seconds > s.last_swap_s)
                s.last_swap_s = ti.swapped_seconds;
        }
    }
    return s;
}

/* ---- time to the N-th call ------------------------------------------ */

enum { NMARKS = 6, NMED = 100000 };
static const long marks[NMARKS] = {1, 100, 1000, 10000, 100000, 1000000};

typedef struct run {
    double compile;           /* parse + kiln_compile */
    double t[NMARKS];         /* since before parsing, at marks[i] */
    int extrapolated;         /* t[NMARKS - 1] extrapolated */
    long n_last;
    double tail_per_call;     /* seconds per call over the tail */
    int timed_out;
    double *each;             /* the first NMED calls' times, seconds */
} run;

static void run_calls(kiln_function *f, inputs *in, double t0, double tail,
                      double max_s, run *r)
{
    long i = 0, batch = 1, tail_i = -1;
    int mi = 0;
    double t_prev = bench_now(), t_poll = t_prev, tail_t = -1;
    double t_end = t_prev;
    for (;;) {
        long stop = i + batch;
        if (mi < NMARKS && stop > marks[mi])
            stop = marks[mi];
        long start = i;
        if (i < NMED) {     /* each call timed, for the median */
            if (stop > NMED)
                stop = NMED;
            double a = bench_now();
            for (; i < stop; i++) {
                call(f, in, i);
                double b = bench_now();
                r->each[i] = b - a;
                a = b;
            }
        }
        for (; i < stop; i++)
            call(f, in, i);
        double t = t_end = bench_now();
        if (mi < NMARKS && i == marks[mi])
            r->t[mi++] = t - t0;
        if (mi == NMARKS)
            break;
        /* about 1 ms between clock reads */
        double per = (t - t_prev) / (double)(i - start);
        t_prev = t;
        batch = per > 0 ? (long)(1e-3 / per) : 4096;
        batch = batch < 1 ? 1 : batch > 4096 ? 4096 : batch;
        if (t - t_poll >= 0.01 || i == NMED) {
            t_poll = t;
            if (tier_count(f).pending)
                tail_t = -1;
            else if (i >= NMED && tail_t < 0)
                tail_t = t, tail_i = i;
        }
        if (tail_t >= 0 && t - tail_t >= tail) {
            r->tail_per_call = (t - tail_t) / (double)(i - tail_i);
            break;
        }
        if (t - t0 >= max_s) {
            r->timed_out = 1;
            r->tail_per_call = per;
            if (tail_t >= 0 && i > tail_i)
                r->tail_per_call = (t - tail_t) / (double)(i - tail_i);
            break;
        }
    }
    r->n_last = i;
    if (mi < NMARKS) {   /* only the last mark can be missing */
        r->extrapolated = 1;
        r->t[NMARKS - 1] = t_end - t0 +
            (double)(marks[NMARKS - 1] - i) * r->tail_per_call;
    }
}

/* ---- parallel throughput --------------------------------------------- */

typedef struct worker {
    pthread_t th;
    kiln_function *f;
    inputs in;
    long calls;
    double seconds, cpu;  /* wall and this thread's CPU time */
    long vcsw, ivcsw;     /* its voluntary and involuntary switches */
    int active;           /* runs in this phase */
} worker;

static pthread_barrier_t bar;
static atomic_int stop_flag, quit_flag;

static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    call(w->f, &w->in, 0);   /* this thread's context, once */
    for (;;) {
        pthread_barrier_wait(&bar);          /* phase starts */
        if (atomic_load(&quit_flag))
            return NULL;
        long n = 0;
        struct rusage u0, u1;
        getrusage(RUSAGE_THREAD, &u0);
        double t0 = bench_now(), c0 = thread_cpu();
        if (w->active)
            while (!atomic_load_explicit(&stop_flag, memory_order_relaxed))
                call(w->f, &w->in, n++);
        w->calls = n;
        w->seconds = bench_now() - t0;
        w->cpu = thread_cpu() - c0;
        getrusage(RUSAGE_THREAD, &u1);
        w->vcsw = u1.ru_nvcsw - u0.ru_nvcsw;
        w->ivcsw = u1.ru_nivcsw - u0.ru_nivcsw;
        pthread_barrier_wait(&bar);          /* phase done */
    }
}

/* one phase of `seconds` with 1 or 2 threads calling: calls per second
 * (each thread's calls over its own wall time, summed), calls per CPU
 * second of the calling threads, the share of a core each got, and the
 * context switches per second of a thread: voluntary (it blocked, on a
 * lock for instance) and involuntary (preempted by another thread or
 * process) */
typedef struct rate {
    double cps, per_cpu, share, vcsw, ivcsw;
} rate;

static rate phase(worker *w, int nthreads, double seconds)
{
    w[0].active = 1;
    w[1].active = nthreads > 1;
    atomic_store(&stop_flag, 0);
    pthread_barrier_wait(&bar);
    struct timespec ts = {(time_t)seconds,
                          (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&stop_flag, 1);
    pthread_barrier_wait(&bar);
    rate r = {0, 0, 0, 0, 0};
    double calls = 0, cpu = 0, wall = 0;
    for (int k = 0; k < nthreads; k++) {
        r.cps += (double)w[k].calls / w[k].seconds;
        calls += (double)w[k].calls;
        cpu += w[k].cpu;
        wall += w[k].seconds;
        r.vcsw += (double)w[k].vcsw / w[k].seconds / nthreads;
        r.ivcsw += (double)w[k].ivcsw / w[k].seconds / nthreads;
    }
    r.per_cpu = calls / cpu;
    r.share = cpu / wall;
    return r;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(n - 1) / 2];
}

/* rounds of (1 thread, 2 threads); out[0..4]: one thread's cps,
 * per_cpu, share, vcsw, ivcsw; out[5..9]: two threads'; each the median
 * of the rounds */
enum { NRATE = 5 };
static void parallel(kiln_function *f, double seconds, int rounds,
                     double out[2 * NRATE])
{
    worker w[2];
    double *v = malloc(sizeof(double) * (size_t)rounds * 2 * NRATE);
    pthread_barrier_init(&bar, NULL, 3);
    for (int k = 0; k < 2; k++) {
        memset(&w[k], 0, sizeof w[k]);
        w[k].f = f;
        inputs_init(&w[k].in, f);
        if (pthread_create(&w[k].th, NULL, worker_main, &w[k]))
            die("pthread_create", NULL);
    }
    for (int r = 0; r < rounds; r++) {
        for (int t = 0; t < 2; t++) {
            rate x = phase(w, t + 1, seconds);
            double *o = v + NRATE * t * rounds + r;
            o[0 * rounds] = x.cps;
            o[1 * rounds] = x.per_cpu;
            o[2 * rounds] = x.share;
            o[3 * rounds] = x.vcsw;
            o[4 * rounds] = x.ivcsw;
        }
    }
    atomic_store(&quit_flag, 1);
    pthread_barrier_wait(&bar);
    for (int k = 0; k < 2; k++) {
        pthread_join(w[k].th, NULL);
        inputs_free(&w[k].in);
    }
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < 2 * NRATE; i++)
        out[i] = median(v + i * rounds, rounds);
    free(v);
}

/* ---- main ------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr, "usage: bench_tiers tiered|interp|llvm|par-tiered|par-llvm "
            "MODEL.kg CACHEDIR [--tail S] [--max S] [--par-seconds S] "
            "[--par-rounds R] [--label NAME]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 4)
        usage();
    const char *mode = argv[1], *path = argv[2], *cache = argv[3];
    const char *label = path;
    double tail = 3, max_s = 300, par_s = 1;
    int par_rounds = 3;
    for (int a = 4; a < argc; a++) {
        if (a + 1 >= argc)
            usage();
        if (strcmp(argv[a], "--tail") == 0)
            tail = atof(argv[++a]);
        else if (strcmp(argv[a], "--max") == 0)
            max_s = atof(argv[++a]);
        else if (strcmp(argv[a], "--par-seconds") == 0)
            par_s = atof(argv[++a]);
        else if (strcmp(argv[a], "--par-rounds") == 0)
            par_rounds = atoi(argv[++a]);
        else if (strcmp(argv[a], "--label") == 0)
            label = argv[++a];
        else
            usage();
    }
    int par = strncmp(mode, "par-", 4) == 0;
    const char *tier = par ? mode + 4 : mode;
    if (strcmp(tier, "tiered") && strcmp(tier, "interp") &&
        strcmp(tier, "llvm"))
        usage();
    if (par_rounds < 1)
        par_rounds = 1;

    kiln_err err = {0, ""};
    run r;
    memset(&r, 0, sizeof r);
    double t0 = bench_now();
    kiln_graph *g = kiln_parse_file(path, &err);
    if (!g)
        die(path, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = strcmp(tier, "tiered") ? tier : NULL;
    o.tiers = KILN_TIERS_POLICY;
    o.model_path = path;
    o.cache_mode = KILN_CACHE_MODE_ON;
    o.cache_dir = cache;
    o.quiet = 1;
    kiln_function *f = kiln_compile(g, &o, &err);
    kiln_graph_free(g);
    if (!f)
        die("compile", &err);
    r.compile = bench_now() - t0;
    tiers at_start = tier_count(f);

    inputs in;
    inputs_init(&in, f);
    if (!(r.each = malloc(sizeof *r.each * NMED)))
        die("out of memory", NULL);
    run_calls(f, &in, t0, tail, max_s, &r);
    tiers at_end = tier_count(f);
    long n_each = r.n_last < NMED ? r.n_last : NMED;
    double med_us = n_each > 0 ? 1e6 * median(r.each, (int)n_each) : 0;
    free(r.each);

    printf("model=%s mode=%s kernels=%d compile=%.6g", label, mode,
           kiln_function_n_kernels(f), r.compile);
    for (int m = 0; m < NMARKS; m++)
        printf(" t@%ld=%.6g", marks[m], r.t[m]);
    printf(" x@%ld=%d n_last=%ld tail_s=%g tail_us=%.6g tier1_start=%d "
           "tier1_end=%d swapped=%d failed=%d waiting=%d never=%d "
           "first_swap_call=%lld last_swap_call=%lld last_swap_s=%.4g "
           "first_queued_call=%lld last_queued_call=%lld "
           "last_queued_s=%.4g med_us=%.6g n_med=%ld pending=%d",
           marks[NMARKS - 1], r.extrapolated, r.n_last, tail,
           r.tail_per_call * 1e6, at_start.on1, at_end.on1, at_end.swapped,
           at_end.failed, at_end.waiting, at_end.never,
           (long long)at_end.first_swap_call,
           (long long)at_end.last_swap_call, at_end.last_swap_s,
           (long long)at_end.first_queued_call,
           (long long)at_end.last_queued_call, at_end.last_queued_s, med_us,
           n_each, r.timed_out ? at_end.pending : 0);
    if (par) {
        double p[2 * NRATE];
        if (strcmp(tier, "tiered") == 0 &&
            kiln_function_tier_wait(f, max_s) != 0)
            fprintf(stderr, "bench_tiers: tier-ups still running after "
                    "%g s\n", max_s);
        parallel(f, par_s, par_rounds, p);
        printf(" tier1_par=%d cps1=%.6g cps2=%.6g par_ratio=%.4g "
               "per_cpu1=%.6g per_cpu2=%.6g share1=%.3g share2=%.3g "
               "vcsw1=%.3g vcsw2=%.3g ivcsw1=%.3g ivcsw2=%.3g",
               tier_count(f).on1, p[0], p[5], p[5] / p[0], p[1], p[6], p[2],
               p[7], p[3], p[8], p[4], p[9]);
    }
    call(f, &in, -1);
    {
        const kiln_tensor *o0 = &in.out[0];
        double v = o0->dtype == KILN_F64   ? *(const double *)o0->data
                   : o0->dtype == KILN_F32 ? (double)*(const float *)o0->data
                                           : NAN;
        printf(" check=%.17g\n", v);
    }
    inputs_free(&in);
    kiln_function_free(f);
    return 0;
}
