/*
 * mpi.c — libkiln-mpi: a model's log density and gradient summed over
 * MPI ranks (issue 30; <kiln/mpi.h>, docs/mpi.md).
 *
 * Built only by `configure --with-mpi`, as its own libkiln-mpi.la that
 * links libkiln and MPI (libkiln never links MPI).  Uses only libkiln's
 * public API (<kiln/model.h> partitions, kiln_graph_print,
 * kiln_compile_count) and MPI-3's non-blocking collectives, each polled
 * against a deadline so that a dead or stuck rank is a timeout error, not
 * a hang.
 *
 * The protocol of kiln_mpi_log_density / kiln_mpi_serve, on the model's
 * own communicator: rank 0 broadcasts a request of n_unc + 3 doubles
 * [op, jacobian, want_grad, unc...] (op 1: evaluate, 0: stop); every
 * rank evaluates its part and the ranks sum [lp, grad..., failed] with
 * one MPI_Iallreduce; when `failed` is not 0, kiln_mpi_agree tells every
 * rank the lowest failing rank's message.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/mpi.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#define DEFAULT_TIMEOUT 300.0
#define DEFAULT_BUILD_TIMEOUT 3600.0
/* the range a timeout may take, in seconds (docs/mpi.md "Timeouts") */
#define TIMEOUT_MIN 1.0
#define TIMEOUT_MAX 31536000.0

struct kiln_mpi_model {
    MPI_Comm comm;
    int rank, size;
    int n_unc;
    double timeout;
    double build_timeout;  /* waits for another rank's build */
    int broken;            /* a collective timed out: send nothing more */
    int stopped;           /* rank 0 said stop (kiln_mpi_serve returned) */
    int finalized;         /* MPI_Finalize ran: no MPI call any more */
    struct kiln_mpi_model *next;   /* the live models (at_finalize) */
    kiln_model_blocks *part;   /* the rank's part, in cache-sized blocks */
    double *buf;           /* n_unc + 3: requests, then sums */
    long long compiles_rank, compiles_job;
};

static int seterr(kiln_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* $name as a timeout: *seconds = the value, or `fallback` when unset;
 * anything but a decimal number from TIMEOUT_MIN to TIMEOUT_MAX is
 * refused (it was taken as 300 s, or 1e-9 s, without a word). */
static int env_seconds(const char *name, double fallback, double *seconds,
                       kiln_err *err)
{
    const char *e = getenv(name);
    *seconds = fallback;
    if (!e)
        return 0;
    char *end = NULL;
    errno = 0;
    double v = strtod(e, &end);
    if (!((e[0] >= '0' && e[0] <= '9') || e[0] == '.') || errno || !end ||
        *end || !(v >= TIMEOUT_MIN && v <= TIMEOUT_MAX))
        return seterr(err, KILN_ERR_ARG, "mpi: %s='%.64s' is not a number "
                      "of seconds from %.0f to %.0f", name, e, TIMEOUT_MIN,
                      TIMEOUT_MAX);
    *seconds = v;
    return 0;
}

double kiln_mpi_timeout(double seconds)
{
    if (seconds > 0 && isfinite(seconds))
        return seconds;
    double v = DEFAULT_TIMEOUT;
    kiln_err e = {0, ""};
    return env_seconds("KILN_MPI_TIMEOUT", DEFAULT_TIMEOUT, &v, &e)
               ? DEFAULT_TIMEOUT : v;
}

int kiln_mpi_timeouts(double seconds, double *timeout, double *build_timeout,
                      kiln_err *err)
{
    kiln_err local = {0, ""};
    if (!err)
        err = &local;
    double t = DEFAULT_TIMEOUT, b = DEFAULT_BUILD_TIMEOUT;
    if (timeout)
        *timeout = t;
    if (build_timeout)
        *build_timeout = b;
    if (seconds != 0 && !(seconds >= TIMEOUT_MIN && seconds <= TIMEOUT_MAX))
        return seterr(err, KILN_ERR_ARG, "mpi: timeout_seconds must be 0 "
                      "(the default) or from %.0f to %.0f, got %g", TIMEOUT_MIN,
                      TIMEOUT_MAX, seconds);
    if (seconds != 0)
        t = seconds;
    else if (env_seconds("KILN_MPI_TIMEOUT", DEFAULT_TIMEOUT, &t, err))
        return err->code;
    if (env_seconds("KILN_MPI_BUILD_TIMEOUT",
                    t > DEFAULT_BUILD_TIMEOUT ? t : DEFAULT_BUILD_TIMEOUT, &b,
                    err))
        return err->code;
    if (timeout)
        *timeout = t;
    if (build_timeout)
        *build_timeout = b;
    return 0;
}

int kiln_mpi_check_init(kiln_err *err)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    if (!init)
        return seterr(err, KILN_ERR_ARG,
                      "mpi: MPI is not initialised (call MPI_Init first)");
    MPI_Finalized(&fin);
    if (fin)
        return seterr(err, KILN_ERR_ARG, "mpi: MPI is finalised");
    return 0;
}

/* Poll `req` until it completes or `timeout` seconds pass (< 0: no
 * limit).  Spins with sched_yield for the first millisecond (a gradient's
 * allreduce is usually done by then), then sleeps 0.1 ms between tests so
 * that oversubscribed ranks leave the CPU to the ranks still computing. */
static int wait_req(MPI_Request *req, double timeout, kiln_err *err)
{
    double t0 = now_s(), deadline = timeout < 0 ? -1 : t0 + timeout;
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, s, &len);
            return seterr(err, KILN_ERR_RUNTIME, "mpi: %s", s);
        }
        if (done)
            return 0;
        double t = now_s();
        if (deadline >= 0 && t > deadline)
            return seterr(err, KILN_ERR_RUNTIME,
                          "mpi: no answer from every rank within %g s: a "
                          "rank died or is stuck", timeout);
        if (t - t0 < 1e-3) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

int kiln_mpi_sum(MPI_Comm comm, void *buf, int count, MPI_Datatype type,
                 double timeout_seconds, kiln_err *err)
{
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, MPI_SUM, comm,
                            &req);
    if (rc != MPI_SUCCESS)
        return seterr(err, KILN_ERR_RUNTIME, "mpi: MPI_Iallreduce failed "
                      "(error %d)", rc);
    return wait_req(&req, timeout_seconds, err);
}

/* MPI_Iallgather of `bytes` bytes from every rank into all, polled
 * against the timeout. */
static int gather(MPI_Comm comm, const void *mine, int bytes, void *all,
                  double timeout, kiln_err *err)
{
    MPI_Request req;
    int rc = MPI_Iallgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, comm,
                            &req);
    if (rc != MPI_SUCCESS)
        return seterr(err, KILN_ERR_RUNTIME, "mpi: MPI_Iallgather failed "
                      "(error %d)", rc);
    return wait_req(&req, timeout, err);
}

/* One rank's status, as gathered by kiln_mpi_agree. */
typedef struct status_msg {
    int code;
    char message[sizeof ((kiln_err *)0)->message];
} status_msg;

int kiln_mpi_agree(MPI_Comm comm, int rc, const kiln_err *mine,
                   double timeout_seconds, kiln_err *err)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    /* first: does any rank fail?  (one int: cheap when none does) */
    int failed = rc != 0;
    kiln_err e2 = {0, ""};
    if (kiln_mpi_sum(comm, &failed, 1, MPI_INT, timeout_seconds, &e2))
        return seterr(err, e2.code, "%s", e2.message);
    if (!failed)
        return 0;
    status_msg me;
    memset(&me, 0, sizeof me);
    me.code = rc;
    if (rc)
        snprintf(me.message, sizeof me.message, "%s",
                 mine && mine->message[0] ? mine->message : "failed");
    status_msg *all = calloc((size_t)size, sizeof *all);
    if (!all)
        return seterr(err, KILN_ERR_NOMEM, "out of memory");
    if (gather(comm, &me, (int)sizeof me, all, timeout_seconds, &e2)) {
        free(all);
        return seterr(err, e2.code, "%s", e2.message);
    }
    int first = -1;
    for (int r = 0; r < size && first < 0; r++)
        if (all[r].code)
            first = r;
    int code = first >= 0 ? all[first].code : KILN_ERR_RUNTIME;
    if (first == rank)
        seterr(err, code, "%s", me.message);
    else if (first >= 0)
        seterr(err, code, "mpi: rank %d failed: %s", first,
               all[first].message);
    else
        seterr(err, code, "mpi: a rank failed");
    free(all);
    return code;
}

int kiln_mpi_same(MPI_Comm comm, const char *name, const void *bytes,
                  size_t len, double timeout_seconds, kiln_err *err)
{
    kiln_err local = {0, ""};
    if (!err)
        err = &local;
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    unsigned long long mine = (unsigned long long)XXH3_64bits(bytes, len);
    unsigned long long *all = calloc((size_t)size, sizeof *all);
    if (!all)
        return seterr(err, KILN_ERR_NOMEM, "out of memory");
    if (gather(comm, &mine, (int)sizeof mine, all, timeout_seconds, err)) {
        free(all);
        return err->code;
    }
    char list[512] = "";
    size_t l = 0;
    int n = 0;
    for (int r = 1; r < size; r++) {
        if (all[r] == all[0])
            continue;
        if (l < sizeof list - 32)
            l += (size_t)snprintf(list + l, sizeof list - l, "%s%d",
                                  n ? ", " : "", r);
        else if (l < sizeof list - 4)
            l += (size_t)snprintf(list + l, sizeof list - l, ", ...");
        n++;
    }
    free(all);
    if (!n)
        return 0;
    return seterr(err, KILN_ERR_ARG, "mpi: ranks disagree on %s: rank%s %s "
                  "differ%s from rank 0", name, n > 1 ? "s" : "", list,
                  n > 1 ? "" : "s");
}

/* The graph's digest text: its canonical print, the log density's name
 * and the axis (NULL: the error, with *err set). */
static char *graph_text(const kiln_graph *g, const char *logp,
                        const char *axis, kiln_err *err)
{
    char *p = kiln_graph_print(g, err);
    if (!p)
        return NULL;
    size_t n = strlen(p);
    size_t extra = strlen(logp ? logp : "") + strlen(axis ? axis : "") + 8;
    char *t = realloc(p, n + extra);
    if (!t) {
        free(p);
        seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    snprintf(t + n, extra, "\n%s\n%s\n", logp ? logp : "",
             axis ? axis : "");
    return t;
}

/* Build this rank's part (step 3 of kiln_mpi_model_new) as `blocks`
 * cache-sized blocks of rows (kiln_model_blocks_new; 0: automatic, the
 * same count on every rank). */
static int build_part(kiln_mpi_model *mm, const kiln_graph *g,
                      const char *logp, const char *data, const char *axis,
                      int blocks, const kiln_options *opt,
                      const kiln_read_options *ropt, kiln_err *err)
{
    kiln_partition p = {axis, mm->rank, mm->size};
    uint64_t c0 = kiln_compile_count();
    mm->part = kiln_model_blocks_new(g, logp, data, &p, blocks, opt, ropt,
                                     err);
    if (!mm->part)
        return err->code ? err->code : KILN_ERR_RUNTIME;
    /* rank 0 publishes its tier-1 code before the others start (they
     * wait for it under the build timeout) */
    if (mm->rank == 0 &&
        kiln_model_blocks_tier_wait(mm->part, mm->build_timeout) == 1) {
        return seterr(err, KILN_ERR_RUNTIME, "mpi: rank 0's tier-1 compiles "
                      "did not finish within %g s (KILN_MPI_BUILD_TIMEOUT)",
                      mm->build_timeout);
    }
    mm->compiles_rank = (long long)(kiln_compile_count() - c0);
    mm->n_unc = kiln_model_n_unc(kiln_model_blocks_model(mm->part, 0));
    mm->buf = calloc((size_t)mm->n_unc + 3, sizeof *mm->buf);
    if (!mm->buf)
        return seterr(err, KILN_ERR_NOMEM, "out of memory");
    return 0;
}

/* The models not freed yet, oldest first: MPI_Finalize stops them
 * (at_finalize) so that serving ranks are not left waiting forever when
 * rank 0 finalises without kiln_mpi_model_free. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln_mpi_model *live;
static int self_keyval = MPI_KEYVAL_INVALID;

static int bcast_request(kiln_mpi_model *mm, double timeout, kiln_err *err);

/* Rank 0 says stop (a zero request); the others receive it. */
static void send_stop(kiln_mpi_model *mm)
{
    if (mm->broken || mm->stopped || mm->finalized)
        return;
    if (mm->rank == 0)
        memset(mm->buf, 0, ((size_t)mm->n_unc + 3) * sizeof *mm->buf);
    kiln_err e = {0, ""};
    (void)bcast_request(mm, mm->timeout, &e);
    mm->stopped = 1;
}

/* The delete callback of an attribute on MPI_COMM_SELF: MPI_Finalize
 * calls it first, while MPI still works (MPI-3.1 section 8.7.1).  Every
 * live model gets its stop, as kiln_mpi_model_free would send it: a
 * serving rank returns from kiln_mpi_serve, a rank finalising without
 * free receives it here.  The models stay allocated (the caller may still
 * free them) but make no MPI call any more. */
static int at_finalize(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)value;
    (void)extra;
    pthread_mutex_lock(&live_lock);
    for (kiln_mpi_model *m = live; m; m = m->next) {
        send_stop(m);
        m->finalized = 1;
    }
    pthread_mutex_unlock(&live_lock);
    return MPI_SUCCESS;
}

static void live_add(kiln_mpi_model *mm)
{
    pthread_mutex_lock(&live_lock);
    if (self_keyval == MPI_KEYVAL_INVALID &&
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize,
                               &self_keyval, NULL) == MPI_SUCCESS &&
        MPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL) != MPI_SUCCESS)
        self_keyval = MPI_KEYVAL_INVALID;
    kiln_mpi_model **pp = &live;
    while (*pp)
        pp = &(*pp)->next;
    *pp = mm;
    mm->next = NULL;
    pthread_mutex_unlock(&live_lock);
}

static void live_remove(kiln_mpi_model *mm)
{
    pthread_mutex_lock(&live_lock);
    for (kiln_mpi_model **pp = &live; *pp; pp = &(*pp)->next)
        if (*pp == mm) {
            *pp = mm->next;
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

static void model_release(kiln_mpi_model *mm)
{
    if (!mm)
        return;
    kiln_model_blocks_free(mm->part);
    free(mm->buf);
    if (!mm->broken && !mm->finalized && mm->comm != MPI_COMM_NULL)
        MPI_Comm_free(&mm->comm);
    free(mm);
}

int kiln_mpi_model_new(MPI_Comm comm, const kiln_graph *g,
                       const char *logp_output, const char *data,
                       const kiln_mpi_options *mopt,
                       const kiln_options *opt,
                       const kiln_read_options *ropt,
                       kiln_mpi_model **out, kiln_err *err)
{
    kiln_err local = {0, ""};
    if (!err)
        err = &local;
    if (out)
        *out = NULL;
    if (kiln_mpi_check_init(err))
        return err->code;
    /* with no communicator this rank cannot tell the others: they time
     * out in the first collective below */
    if (comm == MPI_COMM_NULL)
        return seterr(err, KILN_ERR_ARG, "mpi: the communicator is "
                      "MPI_COMM_NULL");
    /* any other bad argument is told to every rank at the first
     * collective, so that no rank is left waiting for this one */
    kiln_err bad = {0, ""};
    int blocks = mopt && mopt->struct_size == sizeof *mopt ? mopt->blocks : 0;
    double timeout = DEFAULT_TIMEOUT, build_timeout = DEFAULT_BUILD_TIMEOUT;
    if (!out)
        seterr(&bad, KILN_ERR_ARG, "mpi: out is NULL");
    else if (mopt && mopt->struct_size != sizeof *mopt &&
             mopt->struct_size != offsetof(kiln_mpi_options, blocks))
        /* (the size before `blocks` was added is accepted too) */
        seterr(&bad, KILN_ERR_ARG, "mpi: kiln_mpi_options.struct_size is "
               "%zu, expected %zu", mopt->struct_size, sizeof *mopt);
    else if (blocks < 0)
        seterr(&bad, KILN_ERR_ARG, "mpi: kiln_mpi_options.blocks must be 0 "
               "(automatic) or positive, got %d", blocks);
    else
        (void)kiln_mpi_timeouts(mopt ? mopt->timeout_seconds : 0, &timeout,
                                &build_timeout, &bad);
    kiln_mpi_model *mm = calloc(1, sizeof *mm);
    if (!mm && !bad.code)
        seterr(&bad, KILN_ERR_NOMEM, "out of memory");
    if (!mm) {
        /* still meet the others: a duplicate of comm that is freed at
         * once, then the agreement on this rank's failure */
        MPI_Comm c = MPI_COMM_NULL;
        MPI_Request req;
        if (MPI_Comm_idup(comm, &c, &req) != MPI_SUCCESS ||
            wait_req(&req, timeout, err))
            return seterr(err, bad.code, "%s", bad.message);
        (void)kiln_mpi_agree(c, bad.code, &bad, timeout, err);
        MPI_Comm_free(&c);
        return seterr(err, bad.code, "%s", bad.message);
    }
    mm->comm = MPI_COMM_NULL;
    mm->timeout = timeout;
    mm->build_timeout = build_timeout;
    MPI_Request dreq;
    if (MPI_Comm_idup(comm, &mm->comm, &dreq) != MPI_SUCCESS) {
        free(mm);
        return seterr(err, KILN_ERR_RUNTIME, "mpi: MPI_Comm_idup failed");
    }
    if (wait_req(&dreq, timeout, err)) {
        /* the duplicate may still complete into mm->comm: mm is left
         * allocated (the caller should MPI_Abort) */
        if (bad.code)
            seterr(err, bad.code, "%s", bad.message);
        return err->code;
    }
    MPI_Comm_rank(mm->comm, &mm->rank);
    MPI_Comm_size(mm->comm, &mm->size);
    const char *axis = mopt && !bad.code ? mopt->axis : NULL;
    int rc;
    if ((rc = kiln_mpi_agree(mm->comm, bad.code, &bad, timeout, err)))
        goto fail;

    /* 1. every rank has the same graph and data (digests) */
    kiln_err mine = {0, ""};
    char *text = g ? graph_text(g, logp_output, axis, &mine)
                   : (seterr(&mine, KILN_ERR_ARG, "mpi: the graph is NULL"),
                      NULL);
    rc = kiln_mpi_agree(mm->comm, text ? 0 : mine.code, &mine, mm->timeout,
                        err);
    if (!rc) {
        rc = kiln_mpi_same(mm->comm, "the model", text, strlen(text),
                           mm->timeout, err);
    }
    free(text);
    if (rc)
        goto fail;
    /* (the data: every value bound, as read, once the parts are built:
     *  step 2's end; reading it here would parse it twice) */

    /* 2. rank 0 builds first (compiles, fills the cache, waits for its
     *    tier-1 compiles), then the others (cache hits) */
    int r0 = 0;
    if (mm->rank == 0)
        r0 = build_part(mm, g, logp_output, data, axis, blocks, opt, ropt,
                        &mine);
    rc = kiln_mpi_agree(mm->comm, r0, &mine, mm->build_timeout, err);
    if (rc)
        goto fail;
    int rk = 0;
    if (mm->rank != 0)
        rk = build_part(mm, g, logp_output, data, axis, blocks, opt, ropt,
                        &mine);
    rc = kiln_mpi_agree(mm->comm, rk, &mine, mm->build_timeout, err);
    if (rc)
        goto fail;
    /* every part was built from the same data: the digest of every value
     * bound (the graph's and the data file's as parsed), whole, taken
     * before its rows were sliced out (kiln_model_data_digest) */
    uint64_t dd = kiln_model_data_digest(kiln_model_blocks_model(mm->part, 0));
    if ((rc = kiln_mpi_same(mm->comm, "the data", &dd, sizeof dd,
                            mm->timeout, err)))
        goto fail;
    /* every part has the same parameters */
    int nu[2] = {mm->n_unc, -mm->n_unc};
    long long job = mm->compiles_rank;
    if ((rc = kiln_mpi_sum(mm->comm, &job, 1, MPI_LONG_LONG, mm->timeout,
                           err)))
        goto fail;
    mm->compiles_job = job;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, nu, 2, MPI_INT, MPI_MAX, mm->comm,
                       &req) != MPI_SUCCESS) {
        rc = seterr(err, KILN_ERR_RUNTIME, "mpi: MPI_Iallreduce failed");
        goto fail;
    }
    if ((rc = wait_req(&req, mm->timeout, err)))
        goto fail;
    if (nu[0] != -nu[1]) {
        rc = seterr(err, KILN_ERR_ARG, "mpi: the parts do not have the same "
                    "parameters (%d to %d unconstrained values)", -nu[1],
                    nu[0]);
        goto fail;
    }
    live_add(mm);
    *out = mm;
    return 0;
fail:
    /* a timeout leaves the communicator in use: do not free it */
    if (err->code == KILN_ERR_RUNTIME &&
        strstr(err->message, "no answer from every rank"))
        mm->broken = 1;
    model_release(mm);
    return rc ? rc : err->code;
}

kiln_model *kiln_mpi_model_part(const kiln_mpi_model *mm)
{
    return mm ? kiln_model_blocks_model(mm->part, 0) : NULL;
}

const kiln_model_blocks *kiln_mpi_model_blocks(const kiln_mpi_model *mm)
{
    return mm ? mm->part : NULL;
}

MPI_Comm kiln_mpi_model_comm(const kiln_mpi_model *mm)
{
    return mm ? mm->comm : MPI_COMM_NULL;
}

int kiln_mpi_model_rank(const kiln_mpi_model *mm)
{
    return mm ? mm->rank : -1;
}

int kiln_mpi_model_size(const kiln_mpi_model *mm)
{
    return mm ? mm->size : 0;
}

void kiln_mpi_model_compiles(const kiln_mpi_model *mm, long long *rank,
                             long long *job)
{
    if (rank)
        *rank = mm ? mm->compiles_rank : 0;
    if (job)
        *job = mm ? mm->compiles_job : 0;
}

/* Mark the model broken after a timeout (its communicator may have a
 * collective that never completes). */
static int broken(kiln_mpi_model *mm, int rc, const kiln_err *err)
{
    if (rc == KILN_ERR_RUNTIME && err &&
        strstr(err->message, "no answer from every rank"))
        mm->broken = 1;
    return rc;
}

/* Every rank: evaluate the part at buf's request, sum over the ranks
 * into lp (and grad, when asked), agree on errors. */
static int evaluate(kiln_mpi_model *mm, double *lp, double *grad,
                    kiln_err *err)
{
    int n = mm->n_unc;
    int jac = mm->buf[1] != 0, want_grad = mm->buf[2] != 0;
    double *sums = calloc((size_t)n + 2, sizeof *sums);
    if (!sums)
        return seterr(err, KILN_ERR_NOMEM, "out of memory");
    kiln_err mine = {0, ""};
    int rc = kiln_model_blocks_log_density(mm->part, jac, mm->buf + 3,
                                           &sums[0],
                                           want_grad ? sums + 1 : NULL,
                                           &mine);
    if (rc) {
        memset(sums, 0, ((size_t)n + 2) * sizeof *sums);
        sums[n + 1] = 1;
    }
    kiln_err e2 = {0, ""};
    int src = kiln_mpi_sum(mm->comm, sums, n + 2, MPI_DOUBLE, mm->timeout,
                           &e2);
    if (src) {
        free(sums);
        seterr(err, e2.code, "%s", e2.message);
        return broken(mm, src, err);
    }
    if (sums[n + 1] != 0) {
        free(sums);
        rc = kiln_mpi_agree(mm->comm, rc, &mine, mm->timeout, err);
        return broken(mm, rc ? rc : KILN_ERR_RUNTIME, err);
    }
    if (lp)
        *lp = sums[0];
    if (grad && want_grad)
        memcpy(grad, sums + 1, (size_t)n * sizeof *grad);
    free(sums);
    return 0;
}

/* Broadcast buf (a request) from rank 0; timeout < 0: wait forever. */
static int bcast_request(kiln_mpi_model *mm, double timeout, kiln_err *err)
{
    MPI_Request req;
    if (MPI_Ibcast(mm->buf, mm->n_unc + 3, MPI_DOUBLE, 0, mm->comm, &req) !=
        MPI_SUCCESS)
        return seterr(err, KILN_ERR_RUNTIME, "mpi: MPI_Ibcast failed");
    int rc = wait_req(&req, timeout, err);
    return rc ? broken(mm, rc, err) : 0;
}

int kiln_mpi_log_density(kiln_mpi_model *mm, int jacobian, const double *unc,
                         double *lp, double *grad, kiln_err *err)
{
    kiln_err local = {0, ""};
    if (!err)
        err = &local;
    if (!mm || !lp)
        return seterr(err, KILN_ERR_ARG, "mpi: %s is NULL",
                      !mm ? "the model" : "lp");
    if (mm->broken)
        return seterr(err, KILN_ERR_RUNTIME, "mpi: the model is unusable "
                      "after an earlier timeout");
    if (mm->finalized)
        return seterr(err, KILN_ERR_ARG, "mpi: MPI is finalised");
    if (mm->stopped)
        return seterr(err, KILN_ERR_ARG, "mpi: rank 0 freed the model");
    if (mm->rank == 0) {
        if (!unc && mm->n_unc > 0)
            return seterr(err, KILN_ERR_ARG, "mpi: unc is NULL");
        mm->buf[0] = 1;
        mm->buf[1] = jacobian != 0;
        mm->buf[2] = grad != NULL;
        if (mm->n_unc > 0)
            memcpy(mm->buf + 3, unc, (size_t)mm->n_unc * sizeof *unc);
    }
    int rc = bcast_request(mm, mm->timeout, err);
    if (rc)
        return rc;
    if (mm->buf[0] != 1) {
        mm->stopped = 1;
        return seterr(err, KILN_ERR_ARG, "mpi: rank 0 is not calling "
                      "kiln_mpi_log_density (it freed the model)");
    }
    /* every rank computes what rank 0 asked for (its jacobian and grad) */
    return evaluate(mm, lp, grad, err);
}

int kiln_mpi_serve(kiln_mpi_model *mm, kiln_err *err)
{
    kiln_err local = {0, ""};
    if (!err)
        err = &local;
    if (!mm)
        return seterr(err, KILN_ERR_ARG, "mpi: the model is NULL");
    if (mm->rank == 0)
        return seterr(err, KILN_ERR_ARG, "mpi: kiln_mpi_serve is for ranks "
                      "other than 0 (rank 0 calls kiln_mpi_log_density)");
    if (mm->broken)
        return seterr(err, KILN_ERR_RUNTIME, "mpi: the model is unusable "
                      "after an earlier timeout");
    if (mm->finalized || mm->stopped)
        return seterr(err, KILN_ERR_ARG, "mpi: %s", mm->finalized
                      ? "MPI is finalised" : "rank 0 freed the model");
    double *g = calloc((size_t)mm->n_unc + 1, sizeof *g);
    if (!g)
        return seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (;;) {
        /* no timeout while waiting for rank 0's next request */
        int rc = bcast_request(mm, -1, err);
        if (rc) {
            free(g);
            return rc;
        }
        if (mm->buf[0] != 1) {
            free(g);
            mm->stopped = 1;
            return 0;
        }
        double lp = 0;
        rc = evaluate(mm, &lp, g, err);
        /* a density error is rank 0's to report; the server goes on */
        if (rc && mm->broken) {
            free(g);
            return rc;
        }
    }
}

void kiln_mpi_model_free(kiln_mpi_model *mm)
{
    if (!mm)
        return;
    live_remove(mm);
    /* rank 0 says stop: a serving rank returns from kiln_mpi_serve; a
     * rank in kiln_mpi_model_free receives it here */
    send_stop(mm);
    model_release(mm);
}
