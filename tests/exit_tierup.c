/*
 * exit_tierup.c — a program that exits at a random moment of tier-up
 * (issue 24, section 2; run by tests/test_exit_tierup.sh).
 *
 *   exit_tierup MODEL.kg SEED MODE
 *
 * compiles MODEL with the default tiered policy (the cache off, so every
 * tier-up compiles), starts eight threads calling it in a loop, waits a
 * delay of 10 to 600 ms drawn from SEED (in microseconds), then exits while
 * the tier pool runs (the callers stop at that moment too, as a program
 * whose work is done): MODE "fork" forks then and the child exits (it
 * must, within 30 s), "main" calls on the main thread alone and
 * returns from main, "return" returns from main,
 * "thread" calls exit(0) from another thread.  The exit status must be
 * 0: an abort ("pure virtual method called"), a signal or a status from
 * a failed call is a failure of the test.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/cache.h>
#include <kiln/graph.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N_CALLERS 8
#define MAX_IO 16

static kiln_function *fn;
static atomic_int failed;
static long delay_us;
static struct timespec deadline;

static int past_deadline(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline.tv_sec ||
           (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
}


static void *caller(void *arg)
{
    int k = (int)(intptr_t)arg;
    kiln_tensor in[MAX_IO], out[MAX_IO];
    enum { MAX_ELEMS = 256 };   /* radon's a_t has 85 */
    static _Thread_local double data[MAX_IO][MAX_ELEMS];
    int n = kiln_function_n_inputs(fn);
    for (int i = 0; i < n && i < MAX_IO; i++) {
        int64_t dims[KILN_MAX_RANK], numel = 1;
        kiln_function_input_type(fn, i, &in[i].dtype, &in[i].rank, dims,
                                 NULL);
        for (int d = 0; d < in[i].rank; d++)
            numel *= in[i].shape[d] = dims[d];
        if (in[i].dtype != KILN_F64 || numel < 0 || numel > MAX_ELEMS) {
            fprintf(stderr, "exit_tierup: input %d is not f64 of at most "
                    "%d elements\n", i, MAX_ELEMS);
            atomic_store(&failed, 1);
            return NULL;
        }
        for (int j = 0; j < MAX_ELEMS; j++)
            data[i][j] = 0.1 * (double)((k + i + j) % 7) - 0.3;
        in[i].data = data[i];
    }
    while (!past_deadline()) {
        kiln_err err;
        if (kiln_function_call(fn, in, out, &err)) {
            fprintf(stderr, "exit_tierup: call: %s\n", err.message);
            atomic_store(&failed, 1);
            return NULL;
        }
    }
    return NULL;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *exiter(void *arg)
{
    (void)arg;
    sleep_us(delay_us);
    exit(atomic_load(&failed) ? 3 : 0);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: exit_tierup MODEL.kg SEED return|thread|main|fork\n");
        return 2;
    }
    unsigned long seed = strtoul(argv[2], NULL, 10);
    /* an LCG step or two: seeds 1, 2, 3 ... spread over the range */
    seed = seed * 6364136223846793005UL + 1442695040888963407UL;
    seed ^= seed >> 29;
    /* 10 to 600 ms: the llvm set-up takes 150 ms or more, and the exits
     * that matter most come during the compiles after it */
    delay_us = 10000 + (long)(seed % 590000);
    int by_thread = !strcmp(argv[3], "thread");
    kiln_err err;
    kiln_graph *g = kiln_parse_file(argv[1], &err);
    if (!g) {
        fprintf(stderr, "exit_tierup: %s\n", err.message);
        return 2;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.quiet = 1;
    o.cache_mode = KILN_CACHE_MODE_OFF;
    fn = kiln_compile(g, &o, &err);
    if (!fn) {
        fprintf(stderr, "exit_tierup: %s\n", err.message);
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += delay_us / 1000000;
    deadline.tv_nsec += (delay_us % 1000000) * 1000;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    if (!strcmp(argv[3], "main")) {
        /* the main thread alone calls, then returns: a short program's
         * shape (test_callback aborted so, 4 times in 120 runs, before the
         * main thread's gate) */
        caller((void *)(intptr_t)0);
        return atomic_load(&failed) ? 3 : 0;
    }
    pthread_t th;
    for (int i = 0; i < N_CALLERS; i++)
        if (pthread_create(&th, NULL, caller, (void *)(intptr_t)i) == 0)
            pthread_detach(th);
    if (!strcmp(argv[3], "fork")) {
        /* fork during tier-up, the child exits at once: it must not wait
         * for the parent's compiles in flight, which it does not have
         * (it hung so, 15 of 40 runs, before the atfork handlers) */
        sleep_us(delay_us);
        pid_t pid = fork();
        if (pid == 0)
            exit(0);
        if (pid < 0)
            return 3;
        int st = 0;
        for (int ms = 0; ms < 30000; ms += 10) {
            pid_t w = waitpid(pid, &st, WNOHANG);
            if (w == pid)
                return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 5;
            sleep_us(10000);
        }
        kill(pid, SIGKILL);
        (void)waitpid(pid, &st, 0);
        fprintf(stderr, "exit_tierup: the child forked during tier-up did "
                "not exit within 30 s\n");
        return 4;
    }
    if (by_thread) {
        if (pthread_create(&th, NULL, exiter, NULL) == 0)
            pthread_detach(th);
        for (;;)
            sleep_us(1000000);
    }
    sleep_us(delay_us);
    return atomic_load(&failed) ? 3 : 0;
}
