/*
 * guard.h — run a piece of a test in a child process with a time limit
 * and (outside AddressSanitizer builds) an address-space limit, so that a
 * reader that blocks on a FIFO or reads /dev/zero until memory runs out
 * fails the test instead of hanging it or exhausting the machine.
 *
 *   char msg[1024];
 *   int rc = guarded(fn, arg, 10, msg, sizeof msg);
 *
 * fn(arg, msg, size) runs in the child and returns 0..125 (e.g. a
 * kiln_code) and may fill msg; guarded returns that value with msg copied
 * back, or -1 when the child was killed (the time limit, the memory limit)
 * or could not be started (msg then says so).  Header-only.
 */
#ifndef KILN_TESTS_GUARD_H
#define KILN_TESTS_GUARD_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define GUARD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_ASAN 1
#endif
#endif

typedef int (*guard_fn)(void *arg, char *msg, size_t size);

static inline int guarded(guard_fn fn, void *arg, unsigned seconds,
                          char *msg, size_t size)
{
    int fds[2], status;
    pid_t pid;
    size_t got = 0;

    msg[0] = '\0';
    fflush(stdout);
    if (pipe(fds) != 0) {
        snprintf(msg, size, "pipe failed");
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(msg, size, "fork failed");
        return -1;
    }
    if (pid == 0) {
        int rc;
        close(fds[0]);
        alarm(seconds);
#ifndef GUARD_ASAN
        {
            struct rlimit rl = {(rlim_t)2 << 30, (rlim_t)2 << 30};
            setrlimit(RLIMIT_AS, &rl);
        }
#endif
        rc = fn(arg, msg, size);
        if (write(fds[1], msg, strlen(msg)) < 0)
            rc = 126;
        _exit(rc & 0x7f);
    }
    close(fds[1]);
    for (;;) {
        ssize_t k = read(fds[0], msg + got, size - 1 - got);
        if (k <= 0)
            break;
        got += (size_t)k;
        if (got == size - 1)
            break;
    }
    msg[got] = '\0';
    close(fds[0]);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        if (WIFSIGNALED(status))
            snprintf(msg + got, size - got, " [killed by signal %d]",
                     WTERMSIG(status));
        return -1;
    }
    return WEXITSTATUS(status);
}

#endif
