/*
 * policy_int.h — what the compile driver and the runtime need from
 * core/policy/policy.c (prefix kiln_plan_): the per-kernel decisions of one
 * compile.
 *
 * A plan holds, for every step of a lowered program, the facts the policy
 * looked at, the rule that matched and where in the plan's backend chain
 * the step starts; the compile walks the chain from there (a missing
 * backend, a refusal or a compile failure passes the kernel on) and
 * records why it left the chosen backend.  The plan keeps a reference to
 * its policy, so names it hands out live as long as the function.
 */
#ifndef KILN_CORE_POLICY_INT_H
#define KILN_CORE_POLICY_INT_H

#include <kiln/policy.h>
#include "lower.h"

typedef struct kiln_plan kiln_plan;

/* The plan for `prog` (lowered from g).  When `backend` is not NULL it is
 * an explicit backend: the chain is [backend, interp] for every step and
 * no policy is read.  Otherwise the policy is `policy` (a new reference
 * is taken) or, when NULL, kiln_policy_select(opt).
 * Errors: those of kiln_policy_select (KILN_ERR_POLICY, KILN_ERR_IO),
 * KILN_ERR_NOMEM. */
kiln_plan *kiln_plan_make(const kiln_options *opt, const char *backend,
                          const kiln_graph *g, const kiln_program *prog,
                          kiln_err *err);
void kiln_plan_free(kiln_plan *pl);

/* The policy the plan follows, or NULL for an explicit backend (owned by
 * the plan). */
const kiln_policy *kiln_plan_policy(const kiln_plan *pl);

/* The chain: its length and backend i's name (owned by the plan). */
int kiln_plan_n_chain(const kiln_plan *pl);
const char *kiln_plan_chain(const kiln_plan *pl, int i);

/* Where step i starts in the chain. */
int kiln_plan_start(const kiln_plan *pl, int step);

/* Record why step i left the backend it was given (copied; the first
 * reason recorded is kept).  Out of memory is ignored (explain then shows
 * no reason). */
void kiln_plan_set_fallback(kiln_plan *pl, int step, const char *why);

/* The compile options for a kernel compiled with backend `name`: the
 * policy's llvm knobs for llvm unless the caller's options set them
 * (opt_level 1..3, fast_math 1). */
void kiln_plan_compile_options(const kiln_plan *pl, const char *name,
                               const kiln_compile_options *base,
                               kiln_compile_options *out);

/* What kiln_function_kernel_info reports for step i of the plan, the
 * step now running on `backend` (NULL: not compiled): the facts, the rule
 * and the chain the policy chose, the compile-time estimate, the fused
 * nodes.  The policy reads the plan and the kernel descriptions it was
 * made from, never the compiled function.  Errors: KILN_ERR_ARG. */
int kiln_plan_kernel_info(const kiln_plan *pl, int i, const char *backend,
                          kiln_kernel_info *out, kiln_err *err);

/* The source (file or built-in name) of the policy the plan follows, or
 * NULL (an explicit backend). */
const char *kiln_plan_policy_source(const kiln_plan *pl);

#endif
