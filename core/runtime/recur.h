/*
 * recur.h — RECUR kernels run by the host (core/runtime/recur.c, issue
 * 28; prefix kiln_recur_).
 */
#ifndef KILN_CORE_RECUR_H
#define KILN_CORE_RECUR_H

#include <kiln/backend.h>
#include <kiln/kiln.h>

/* A callable running a scan whose body is the compiled function `body`
 * (taken: freed with the callable, or by the caller on failure) with
 * n_carry carries, n_seq sequences, n_args args and n_out outputs (the
 * kernel's; docs/plugin-abi.md, RECUR), n_steps steps when n_seq is 0.  It belongs to
 * kiln_recur_backend.  Returns 0 or KILN_ERR_NOMEM.  The callable is
 * reentrant: the body's function keeps a context per thread. */
int kiln_recur_callable(kiln_function *body, int n_carry, int n_seq,
                        int n_args, int n_out, int64_t n_steps,
                        kiln_callable **out);

/* The pseudo backend "host" that owns those callables (supports RECUR
 * only; never compiles: the driver attaches callables itself). */
extern const kiln_backend kiln_recur_backend;

#endif
