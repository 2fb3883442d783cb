/*
 * emit_c.h — C code generation from kernel descriptions (prefix
 * kiln_emit_c_).
 *
 * kiln_emit_c turns one backend-neutral kernel (include/kiln/backend.h)
 * into a self-contained C translation unit defining
 *
 *     int kiln_kernel(void *state, const kcall *call);
 *
 * with the fixed-arity kernel signature (kiln_kernel_fn), whatever the
 * kernel's width: inputs are read from the call's array of views, so the
 * source grows linearly with n_inputs.  It also defines the pieces of an
 * ABI 1.4 prepared call (docs/plugin-abi.md §9), which kiln_kernel is
 * made of:
 *
 *     usize kiln_kernel_plan_size(void);
 *     int kiln_kernel_prep(const kcall *call, void *plan);
 *     int kiln_kernel_run(void *plan, const kcall *call);
 *
 * prep checks the call as kiln_kernel does (the same messages, written
 * only when call->errbuf is set) and fills `plan` (plan_size() bytes, a
 * fixed size per kernel) with everything that does not read data: the
 * coalesced loop nest (a LOOP's over its role strides), a reduction's
 * output extents and count, a take's shapes, a dot's BLAS layout.  run
 * runs the kernel on a call whose views equal the prepared call's in
 * everything but data, without checking anything but data (a take's
 * indices, a LOOP's TAKE and SCATTER indices).  kiln_kernel is prep into a
 * plan on its stack followed by run.  The unit includes no header and
 * names no libm or libc symbol: it declares the layouts of kiln_view,
 * kiln_runtime and kiln_call itself and calls math, special functions
 * and gemm through call->rt.  Its results match the interpreter
 * (backends/interp/interp.c) bit for bit: same operations, same order
 * (the same coalescing of the iteration space and the same 256-element
 * blocks for reductions), same integer wrap, NaN and cast rules.
 *
 * The output depends on the kernel description only (no addresses, no
 * counters shared between kernels): the same kernel gives the same bytes
 * in every process.
 *
 * This file (with emit_c.c) depends on nothing but <kiln/backend.h> and
 * libc, so backends that compile C link their own copy of emit_c.c
 * (backends/tcc does; see docs/backends.md).
 */
#ifndef KILN_CORE_EMIT_C_H
#define KILN_CORE_EMIT_C_H

#include <stddef.h>
#include <stdio.h>
#include <kiln/backend.h>

/* The names of the functions every generated unit defines. */
#define KILN_EMIT_C_SYMBOL "kiln_kernel"
#define KILN_EMIT_C_PLAN_SIZE "kiln_kernel_plan_size"
#define KILN_EMIT_C_PREP "kiln_kernel_prep"
#define KILN_EMIT_C_RUN "kiln_kernel_run"

/* Changes whenever the generated code for some kernel may change; goes
 * into the build_id of backends that use the emitter. */
#define KILN_EMIT_C_VERSION "emit_c-4"

/* 0 when the emitter can generate code for `k`; otherwise -1 with a
 * one-line reason in why[n]. */
int kiln_emit_c_check(const kiln_kernel *k, char *why, size_t n);

/* Generate the C source of kernel `k`: *src (malloc'ed, NUL-terminated,
 * freed by the caller with free()) and its length in *len.  Returns 0, or
 * -1 with the reason in why[n] (an unsupported kernel, or out of memory). */
int kiln_emit_c(const kiln_kernel *k, char **src, size_t *len, char *why,
                size_t n);

/* Write the C of every kernel of graph `g` to `out`, each unit after a
 * comment naming the kernel (its index, which is `kiln explain`'s row, and
 * its label) and its node (libkiln only: `kiln emit-c`).  The kernels are
 * those kiln_compile makes for `opt` (may be NULL): the rewrite passes
 * and fusion chosen by opt->passes, $KILN_PASSES and the policy's
 * `passes:` / `fusion:` (kiln_emit_lower, emit_text.h).  Returns 0 or a
 * kiln_code with err set (KILN_ERR_ARG for a bad pass list). */
int kiln_emit_c_graph(const kiln_graph *g, const kiln_options *opt,
                      FILE *out, kiln_err *err);

#endif
