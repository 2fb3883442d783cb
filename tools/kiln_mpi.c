/*
 * kiln_mpi.c — `kiln run --mpi-axis N` under mpirun (issue 30; docs/mpi.md,
 * docs/kiln.1).  Compiled only by `configure --with-mpi` (-DKILN_WITH_MPI);
 * tools/kiln.c calls these at the points where the ranks must agree.
 *
 * Every rank runs `kiln run` on its part of the data (kiln_graph_partition
 * before --data is bound); the outputs are summed over the ranks and rank
 * 0 prints them.  Ranks other than 0 print nothing: their stdout goes to
 * /dev/null and their stderr to a temporary file whose last line is the
 * message rank 0 prints when that rank fails ("kiln: mpi: rank 2 failed:
 * ...").  The ranks meet at checkpoints (kiln_mpi_agree): a rank that
 * fails goes straight to the next checkpoint, so that every rank learns of
 * the failure there and the job ends with one line and exit status 1.  A
 * rank that does not answer within $KILN_MPI_TIMEOUT seconds (default 300;
 * $KILN_MPI_BUILD_TIMEOUT, default 3600, while a rank builds) makes rank 0
 * print the timeout and MPI_Abort the job; when rank 0 is the one that
 * does not answer, another rank prints it on the real stderr (kept as
 * err_fd) before its MPI_Abort.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln_cli.h"

static struct {
    int active;       /* MPI_Init done by kiln_cli_mpi_start */
    int rank, size;
    int agreed;       /* a checkpoint reported a failure to every rank */
    int ended;
    double timeout, build_timeout;
    MPI_Comm comm;
    FILE *err_copy;   /* ranks != 0: where their stderr went */
    int err_fd;       /* ranks != 0: the real stderr (-1: none) */
} M = {0, 0, 1, 0, 0, 300, 3600, MPI_COMM_NULL, NULL, -1};

int kiln_cli_mpi_active(void)
{
    return M.active;
}

int kiln_cli_mpi_rank(void)
{
    return M.rank;
}

int kiln_cli_mpi_size(void)
{
    return M.size;
}

double kiln_cli_mpi_build_timeout(void)
{
    return M.build_timeout;
}

int kiln_cli_mpi_start(void)
{
    if (M.active)
        return 0;
    int init = 0;
    MPI_Initialized(&init);
    if (!init && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "kiln: --mpi-axis / --mpi: MPI_Init failed\n");
        return 1;
    }
    M.active = 1;
    MPI_Comm_dup(MPI_COMM_WORLD, &M.comm);
    MPI_Comm_rank(M.comm, &M.rank);
    MPI_Comm_size(M.comm, &M.size);
    if (M.rank != 0) {
        fflush(stdout);
        fflush(stderr);
        if (!freopen("/dev/null", "w", stdout))
            return 1;
        FILE *t = tmpfile();
        if (t) {
            M.err_fd = dup(2);
            dup2(fileno(t), 2);
            M.err_copy = t;
        }
    }
    /* $KILN_MPI_TIMEOUT and $KILN_MPI_BUILD_TIMEOUT: garbage is refused on
     * every rank (the defaults serve for this one agreement) */
    kiln_err bad = {0, ""};
    int rc = kiln_mpi_timeouts(0, &M.timeout, &M.build_timeout, &bad);
    if (rc)
        fprintf(stderr, "kiln: %s\n", bad.message);
    if (kiln_cli_mpi_checkpoint(rc))
        return 1;
    return 0;
}

/* The last line this rank wrote to stderr, without a "kiln: " prefix. */
static void last_line(kiln_err *e)
{
    snprintf(e->message, sizeof e->message, "failed");
    if (!M.err_copy)
        return;
    fflush(stderr);
    long end = lseek(2, 0, SEEK_END);
    if (end <= 0)
        return;
    long from = end > 4096 ? end - 4096 : 0;
    char buf[4097];
    ssize_t n = pread(2, buf, (size_t)(end - from), from);
    if (n <= 0)
        return;
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = 0;
    char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    if (strncmp(line, "kiln: ", 6) == 0)
        line += 6;
    size_t len = strlen(line);
    if (len >= sizeof e->message)
        len = sizeof e->message - 1;
    if (len) {
        memcpy(e->message, line, len);
        e->message[len] = 0;
    }
}

/* A timeout: rank 0 says so and ends the job (a rank may never answer).
 * Another rank says it on the real stderr when rank 0 has not ended the
 * job first: rank r waits 2 r s (at most 20 s), so that a live rank 0,
 * whose deadline falls at about the same time, aborts the job before
 * and the lowest live rank speaks when rank 0 is the one stuck: one
 * line either way. */
static void timed_out(const kiln_err *e)
{
    if (M.rank == 0) {
        fprintf(stderr, "kiln: %s\n", e->message);
    } else if (M.err_fd >= 0) {
        struct timespec ts = {2 * (M.rank < 10 ? M.rank : 10), 0};
        nanosleep(&ts, NULL);
        char line[sizeof e->message + 64];
        int n = snprintf(line, sizeof line, "kiln: %s (rank %d; rank 0 "
                         "did not end the job)\n", e->message, M.rank);
        if (n > 0)
            (void)!write(M.err_fd, line, (size_t)n < sizeof line
                                             ? (size_t)n : sizeof line - 1);
    }
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

static int checkpoint(int status, int build);

int kiln_cli_mpi_checkpoint(int status)
{
    return checkpoint(status, 0);
}

int kiln_cli_mpi_build_checkpoint(int status)
{
    return checkpoint(status, 1);
}

static int checkpoint(int status, int build)
{
    double timeout = build ? M.build_timeout : M.timeout;
    if (!M.active || M.agreed)
        return status ? 1 : 0;
    kiln_err mine = {0, ""}, e = {0, ""};
    if (status) {
        last_line(&mine);
        mine.code = KILN_ERR_RUNTIME;
    }
    int rc = kiln_mpi_agree(M.comm, status ? KILN_ERR_RUNTIME : 0, &mine,
                            timeout, &e);
    if (!rc)
        return 0;
    if (strstr(e.message, "no answer from every rank")) {
        if (build) {
            size_t l = strlen(e.message);
            snprintf(e.message + l, sizeof e.message - l, " (waiting for "
                     "a build: KILN_MPI_BUILD_TIMEOUT)");
        }
        timed_out(&e);
    }
    M.agreed = 1;
    /* rank 0 prints another rank's failure (its own is printed) */
    if (M.rank == 0 && !status)
        fprintf(stderr, "kiln: %s\n", e.message);
    return 1;
}

int kiln_cli_mpi_same(const char *name, const void *bytes, size_t len)
{
    kiln_err e = {0, ""};
    if (!kiln_mpi_same(M.comm, name, bytes, len, M.timeout, &e))
        return 0;
    if (strstr(e.message, "no answer from every rank"))
        timed_out(&e);
    M.agreed = 1;
    if (M.rank == 0)
        fprintf(stderr, "kiln: %s\n", e.message);
    return 1;
}

/* Every output summed over the ranks.  Outputs may share their bytes
 * (two outputs of one value, `grad` asked twice): each output's bytes are
 * copied out before any is summed, each copy summed, then written back,
 * so a shared buffer is summed once per output from its own value, never
 * from an already summed one (it was: R^(k-1) times too large). */
int kiln_cli_mpi_sum_outputs(kiln_tensor *out, int n)
{
    void **copy = calloc((size_t)(n ? n : 1), sizeof *copy);
    size_t *bytes = calloc((size_t)(n ? n : 1), sizeof *bytes);
    int rc = !copy || !bytes;
    if (rc)
        fprintf(stderr, "kiln: mpi: out of memory summing the outputs\n");
    for (int k = 0; !rc && k < n; k++) {
        int64_t numel = kiln_shape_numel(out[k].rank, out[k].shape);
        if (numel > 0x7fffffff) {
            fprintf(stderr, "kiln: mpi: output '%d' has more than 2^31 - 1 "
                    "elements\n", k);
            rc = 1;
            break;
        }
        bytes[k] = (size_t)numel * kiln_dtype_size(out[k].dtype);
        if (bytes[k] && !(copy[k] = malloc(bytes[k]))) {
            fprintf(stderr, "kiln: mpi: out of memory summing the outputs\n");
            rc = 1;
        } else if (bytes[k]) {
            memcpy(copy[k], out[k].data, bytes[k]);
        }
    }
    for (int k = 0; !rc && k < n; k++) {
        MPI_Datatype t;
        switch (out[k].dtype) {
        case KILN_F64: t = MPI_DOUBLE; break;
        case KILN_F32: t = MPI_FLOAT; break;
        case KILN_I64: t = MPI_INT64_T; break;
        case KILN_I32: t = MPI_INT32_T; break;
        default: t = MPI_UINT8_T; break;
        }
        kiln_err e = {0, ""};
        if (!bytes[k])
            continue;
        if (kiln_mpi_sum(M.comm, copy[k],
                         (int)(bytes[k] / kiln_dtype_size(out[k].dtype)), t,
                         M.timeout, &e))
            timed_out(&e);
    }
    for (int k = 0; !rc && k < n; k++)
        if (bytes[k])
            memcpy(out[k].data, copy[k], bytes[k]);
    for (int k = 0; copy && k < n; k++)
        free(copy[k]);
    free(copy);
    free(bytes);
    return rc;
}

long long kiln_cli_mpi_job_total(long long mine)
{
    kiln_err e = {0, ""};
    long long v = mine;
    if (kiln_mpi_sum(M.comm, &v, 1, MPI_LONG_LONG, M.timeout, &e))
        timed_out(&e);
    return v;
}

void kiln_cli_mpi_fault(void)
{
    /* test-only (tests/test_mpi.sh): KILN_MPI_TEST_FAULT=hang:R makes
     * rank R stop answering before the calls, die:R makes it exit */
    const char *f = getenv("KILN_MPI_TEST_FAULT");
    if (!f || !M.active)
        return;
    int hang = strncmp(f, "hang:", 5) == 0, die = strncmp(f, "die:", 4) == 0;
    if (!hang && !die)
        return;
    if (atoi(f + (hang ? 5 : 4)) != M.rank)
        return;
    if (die)
        _exit(3);
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

void kiln_cli_mpi_fault_build(void)
{
    /* test-only: KILN_MPI_TEST_FAULT=slow-build:R:S makes rank R sleep S
     * seconds before it compiles (a first compile longer than the
     * timeout) */
    const char *f = getenv("KILN_MPI_TEST_FAULT");
    int r = -1, secs = 0;
    if (!f || !M.active || sscanf(f, "slow-build:%d:%d", &r, &secs) != 2 ||
        r != M.rank || secs <= 0)
        return;
    struct timespec ts = {secs, 0};
    nanosleep(&ts, NULL);
}

int kiln_cli_mpi_end(int status)
{
    if (!M.active || M.ended)
        return status;
    M.ended = 1;
    /* the last checkpoint: a rank that failed after the others' last one
     * (or before it: it meets them there) */
    if (kiln_cli_mpi_checkpoint(status))
        status = status ? status : 1;
    fflush(NULL);
    MPI_Comm_free(&M.comm);
    MPI_Finalize();
    return status;
}
