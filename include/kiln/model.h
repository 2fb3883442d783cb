/*
 * model.h — a statistical model: a graph with parameters, data and a
 * log density, as a sampler sees it (BridgeStan's view; docs/bridgestan.md).
 *
 * A kiln_model is made from a graph that declares its parameters with
 * `param` (kiln_graph_param): each parameter has a constrained value (what
 * the graph computes with) and an unconstrained value (what a sampler
 * moves), related by Stan's constraint transforms (Stan Reference Manual,
 * "Constraint transforms"):
 *
 *   no bounds           x = u                        log|J| = 0
 *   lower L             x = L + exp(u)               log|J| = u
 *   upper U             x = U - exp(u)               log|J| = u
 *   lower L, upper U    x = L + (U - L) inv_logit(u)
 *                       log|J| = log(U - L) - softplus(-u) - softplus(u)
 *
 * applied elementwise, the bounds numbers, data or values computed from
 * earlier parameters (then evaluated at each point); or one of Stan's
 * vector and matrix transforms (kiln_graph_param_transform: simplex,
 * ordered, positive_ordered, unit_vector, sum_to_zero,
 * cholesky_factor_corr, cholesky_factor_cov, cov_matrix, corr_matrix),
 * whose unconstrained value is a vector of another size (a simplex of K
 * values has K-1).  The unconstrained vector is the concatenation of
 * the parameters' unconstrained values in declaration order, each
 * flattened in C (row-major) order; the constrained vector is the
 * parameters' constrained values laid out the same way (a matrix in C
 * order), followed (on request) by the outputs the graph marks as
 * transformed parameters (`output tp NAME`) and then as generated
 * quantities (`output gq NAME`), each flattened in C order.  Names follow
 * Stan's dotted, 1-based form: `theta.1`, `m.2.3` (m[1][2] in C order).
 *
 * The log density is the graph's scalar float output named at creation,
 * plus the sum of the log-Jacobians when `jacobian` is non-zero; kiln
 * builds its gradient with respect to the unconstrained values (reverse
 * mode) and compiles both with kiln_compile, so the policy, the tiers and
 * the disk cache apply as for any function.  kiln keeps every constant of
 * the density: `propto` is accepted and ignored (BridgeStan allows this).
 *
 * Threads: every function here that takes a const kiln_model * may be
 * called from any number of threads at once on one model (each thread
 * runs in its own context of the compiled functions).  kiln_model_free
 * must not run while another call is in flight.
 *
 * Errors follow <kiln/kiln.h>: a non-zero kiln_code and a one-line
 * err->message.  Nothing here calls abort() or exit().
 */
#ifndef KILN_MODEL_H
#define KILN_MODEL_H

#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/io.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_model kiln_model;

/* Make a model from `g` (only read; may be freed after).
 * `logp_output`: the name of the log-density output (a float scalar);
 * NULL means the output named "logp", else the graph's first output
 * that is neither `output tp` / `output gq` nor a gradient (`grad`).
 * `data`: NULL or "" for none; a path ending in ".json" (read with
 * kiln_json_data_read under `ropt`); otherwise JSON text, which must be
 * an object (other text is refused as "neither JSON text nor the path of
 * a file ending in .json").  Each shared
 * value of g that has no value yet is bound from the data variable of the
 * same name (kiln_json_data_get with its declared type); a symbolic dim
 * takes its size from the data that binds it, or else from an integer
 * scalar data variable of the symbol's name (Stan's `int<lower=0> N`).
 * Data variables that no shared value uses are ignored.
 * Errors: KILN_ERR_ARG (g NULL; no parameter; no logp_output and every
 * output is a gradient, a tp or a gq), KILN_ERR_NAME ("model: no output
 * named 'lp'"; "model: data has no variable 'y' for shared value 'y'
 * (declared f64[J])"),
 * KILN_ERR_SHAPE / KILN_ERR_TYPE (data does not fit: the message names the
 * variable, the declared type and what the data holds; "model: the size
 * of symbol 'J' of parameter 'theta' is not known: no data binds it"),
 * KILN_ERR_PARSE / KILN_ERR_IO (bad JSON, unreadable file), and the
 * errors of kiln_compile.  The caller frees the model. */
kiln_model *kiln_model_new(const kiln_graph *g, const char *logp_output,
                           const char *data, const kiln_options *opt,
                           const kiln_read_options *ropt, kiln_err *err);

/* What kiln_model_new can check without data: that the log density
 * (chosen as there) is an output and a float scalar, and that g has a
 * parameter.  *chosen (when not NULL) is set to the log density's output
 * name (owned by g).  Errors: as kiln_model_new's for these. */
int kiln_model_check_graph(const kiln_graph *g, const char *logp_output,
                           const char **chosen, kiln_err *err);

/* Free a model.  NULL is allowed. */
void kiln_model_free(kiln_model *m);

/* The graph's name. */
const char *kiln_model_name(const kiln_model *m);

/* A one-line description: kiln's version, the backends of the compiled
 * kernels, the policy and the cache directory.  Owned by m. */
const char *kiln_model_info(const kiln_model *m);

/* Number of unconstrained values; number of constrained values with
 * (non-zero) the transformed parameters and/or generated quantities. */
int kiln_model_n_unc(const kiln_model *m);
int kiln_model_n_params(const kiln_model *m, int include_tp, int include_gq);

/* Comma-separated names (no spaces), owned by m: constrained (with tp/gq
 * as asked) and unconstrained. */
const char *kiln_model_param_names(const kiln_model *m, int include_tp,
                                   int include_gq);
const char *kiln_model_param_unc_names(const kiln_model *m);

/* Write the constrained values for unconstrained `unc`
 * (kiln_model_n_unc values) to `out` (kiln_model_n_params(m, tp, gq)).
 * Errors: KILN_ERR_ARG (NULL pointers), KILN_ERR_RUNTIME (the tp/gq
 * function failed), and kiln_function_call's errors. */
int kiln_model_constrain(const kiln_model *m, int include_tp, int include_gq,
                         const double *unc, double *out, kiln_err *err);

/* The inverse: constrained parameter values `theta` (the first
 * kiln_model_n_params(m, 0, 0) of a constrained vector) to unconstrained.
 * Errors: KILN_ERR_ARG ("unconstrain: parameter 'tau.1' is -1, below its
 * lower bound 0"; a value above its upper bound; NaN; a transform's value
 * off its constraint by more than 1e-8: "unconstrain: parameter 'theta'
 * is not a simplex: its values sum to (1.5)", "... is not positive
 * definite"; a bound computed from earlier parameters that is not below
 * the other at this point), and the errors of kiln_function_call for
 * such a bound. */
int kiln_model_unconstrain(const kiln_model *m, const double *theta,
                           double *unc, kiln_err *err);

/* As kiln_model_unconstrain with the constrained values given as a JSON
 * object of CmdStan JSON form ({"mu": 1.5, "theta": [..]}), every
 * parameter by name.  Errors: those of kiln_json_data_parse and
 * kiln_json_data_get (a missing parameter, a wrong shape), and bounds. */
int kiln_model_unconstrain_json(const kiln_model *m, const char *json,
                                double *unc, kiln_err *err);

/* The log density at `unc` into *lp and, when grad is not NULL, its
 * gradient with respect to the unconstrained values into grad
 * (kiln_model_n_unc values).  `jacobian` non-zero adds the
 * log-Jacobians.  A non-finite density is not an error (*lp holds it).
 * A part with no rows other than part 0 (kiln_model_new_partition, more
 * parts than rows) is not evaluated: *lp is 0 and the gradient 0, its
 * exact contribution to the sum over parts.
 * Errors: KILN_ERR_ARG (NULL unc or lp) and kiln_function_call's
 * (KILN_ERR_CHECK when a `check` of the model fails: PyMC's
 * ParameterValueError). */
int kiln_model_log_density(const kiln_model *m, int jacobian,
                           const double *unc, double *lp, double *grad,
                           kiln_err *err);

/* The log density, gradient and Hessian (n*n, row-major, symmetric) at
 * `unc`.  The Hessian is central differences of the reverse-mode
 * gradient, h_j = 6.06e-6 * max(1, |u_j|) (cbrt of machine epsilon),
 * symmetrised: error O(h^2 * |g'''|) + O(eps * |g| / h), about 1e-9
 * relative for smooth densities.  2n gradient evaluations. */
int kiln_model_log_density_hessian(const kiln_model *m, int jacobian,
                                   const double *unc, double *lp,
                                   double *grad, double *hessian,
                                   kiln_err *err);

/* The log density and the Hessian-vector product H v at `unc`: central
 * differences of the gradient along w = v / |v|_inf, |v|_inf (g(u + h w) -
 * g(u - h w)) / 2h with h = 6.06e-6 * max(1, |u|_inf), so a direction of
 * any magnitude (subnormal included) is fine; two gradient evaluations
 * (one more for lp).  v = 0 gives 0; a NaN or infinite entry of v gives
 * NaN in every entry of hvp (not an error). */
int kiln_model_log_density_hvp(const kiln_model *m, int jacobian,
                               const double *unc, const double *v,
                               double *lp, double *hvp, kiln_err *err);

/* The same two central differences over any log density and gradient of
 * n unconstrained values: `fn(ctx, jacobian, unc, lp, grad, err)` fills
 * *lp and, grad not NULL, grad (n values), returning 0 or a kiln_code
 * with err set.  kiln_model_log_density_hessian and _hvp are these over
 * kiln_model_log_density; the BridgeStan library under MPI uses them over
 * the gradient summed across ranks (docs/bridgestan.md, "Under MPI").
 * Thread-safe when fn is.  Errors: fn's; KILN_ERR_ARG ("hessian: NULL
 * argument" / "hvp: NULL argument": fn, lp, hessian, or unc, v, hvp when
 * n > 0), KILN_ERR_NOMEM. */
typedef int (*kiln_density_fn)(const void *ctx, int jacobian,
                               const double *unc, double *lp, double *grad,
                               kiln_err *err);
int kiln_fd_hessian(kiln_density_fn fn, const void *ctx, int64_t n,
                    int jacobian, const double *unc, double *lp,
                    double *grad, double *hessian, kiln_err *err);
int kiln_fd_hvp(kiln_density_fn fn, const void *ctx, int64_t n,
                int jacobian, const double *unc, const double *v, double *lp,
                double *hvp, kiln_err *err);

/* The model's log density and gradient as kiln's sampler callback
 * (kiln_logp_fn, <kiln/kiln.h>; nutpie's RawLogpFunc ABI; docs/sampler.md):
 * x and grad are the unconstrained vector (kiln_model_n_unc values, the
 * layout above) and *logp the log density, with the log-Jacobians when
 * `jacobian` is non-zero — kiln_model_log_density as a plain C function.
 * Sets *dim to kiln_model_n_unc(m) and *user_data to the pointer to pass
 * back at every call (owned by m, valid until kiln_model_free; one per
 * jacobian flag, so making it allocates nothing and cannot fail but for
 * NULL arguments: KILN_ERR_ARG).  Return codes as kiln_function_logp_
 * callback's: KILN_LOGP_OK, KILN_LOGP_NONFINITE (*logp holds the value;
 * -inf when the density rejected the point: KILN_ERR_CHECK),
 * KILN_LOGP_BAD_DIM (dim is not n_unc, or x / logp NULL; nothing
 * written), KILN_LOGP_ERROR (the call failed).  grad may be NULL.
 * Threads: reentrant, as every call on a const model: any number of
 * threads may call it at once (parallel chains through one pointer);
 * a call allocates nothing once the thread has made its first call. */
kiln_logp_fn kiln_model_logp_callback(kiln_model *m, int jacobian,
                                      uint64_t *dim, void **user_data,
                                      kiln_err *err);

/* Why the calling thread's last model callback call failed, when that
 * call went through `user_data` (one line, thread-local, valid until the
 * thread's next model callback call); "" after a success, or when the
 * thread's last call was through another model callback or none. */
const char *kiln_model_logp_callback_message(const void *user_data);

/* Tiers (docs/policy.md, "Tiers") of the model's compiled density:
 * wait until no tier-1 compile is queued or running for it, at most
 * `timeout_seconds` (kiln_function_tier_wait: 0 when none is left, 1 on
 * timeout, KILN_ERR_ARG for m NULL); and count its kernels and those
 * running tier-1 code now (*tiered, *kernels; either may be NULL).
 * Thread-safe. */
int kiln_model_tier_wait(const kiln_model *m, double timeout_seconds);
void kiln_model_tier_count(const kiln_model *m, int *tiered, int *kernels);

/* ---- Data partitions (issue 30; docs/mpi.md) ----------------------------
 *
 * A model whose log density is a sum over observations can be evaluated in
 * parts: the observation axis is a symbol (`N`) that sizes data; part p of
 * P binds only rows [b, b + n) of every data value sized by that symbol
 * (along the dim it sizes; b = ceil(N p / P), b + n = ceil(N (p+1) / P):
 * row i is in part floor(i P / N); part 0 has rows whenever N >= 1, parts
 * nest (parts p B .. p B + B - 1 of P B are part p of P: blocks,
 * kiln_model_blocks_new), and an empty part other than part 0 (P > N)
 * contributes exactly 0: its log density and gradient are 0,
 * not evaluated: `sum(y) * log(p)` at p = 0 gives no NaN from a part
 * without rows; a part with rows whose sum(y) is 0 still does, as
 * 0 * -inf: docs/mpi.md), and computes its
 * partial log density and gradient; terms that do not depend on the axis
 * (priors, log-Jacobians) are counted by part 0 only.  The sum over the P
 * parts of the partial results equals the unpartitioned model's (to
 * rounding), for any P >= 1, including parts with no observations.
 * libkiln-mpi (<kiln/mpi.h>) runs one part per MPI rank and sums with
 * MPI_Allreduce; nothing here needs MPI. */
/* kiln_partition: <kiln/graph.h> */

/* As kiln_model_new, for part `p` of the model (above).  The returned
 * model's kiln_model_log_density (and its gradient, Hessian, hvp and
 * callback) give the part's share; constrain/unconstrain of parameters
 * are those of the whole model (a transformed parameter or generated
 * quantity that depends on the axis is refused by kiln_model_constrain
 * with KILN_ERR_ARG naming it).  p NULL gives kiln_model_new's model;
 * p->nparts == 1 gives its values too, but the axis is checked and the
 * density rewritten as for any P (so that a model one rank refuses, every
 * number of ranks refuses; kiln_model_partition_range names the axis).
 * Terms that do not depend on the axis are masked by a bool shared scalar
 * `part0__` (true in part 0 only): every part compiles the same kernels
 * (same cache keys, whatever its part number and row count). 
 * Errors: those of kiln_model_new; KILN_ERR_ARG (part out of range,
 * nparts < 1, no axis named or declared); KILN_ERR_NAME ("partition: the
 * model has no symbol 'M'"; "partition: symbol 'K' sizes parameter
 * 'beta', not only data"; "partition: symbol 'M' sizes no data"); 
 * KILN_ERR_TYPE ("partition: the log density is not a sum over axis 'N':
 * node 'x' (op max) reduces over it"), naming the first node whose value
 * mixes observations other than by a sum. */
kiln_model *kiln_model_new_partition(const kiln_graph *g,
                                     const char *logp_output,
                                     const char *data,
                                     const kiln_partition *p,
                                     const kiln_options *opt,
                                     const kiln_read_options *ropt,
                                     kiln_err *err);

/* The part of a model made by kiln_model_new_partition: the axis's name
 * (owned by m; NULL for a whole model, or m NULL: then 0s), the axis's
 * size in the whole data (*total) and this part's rows [*begin, *end).
 * Any pointer may be NULL.  Thread-safe. */
const char *kiln_model_partition_range(const kiln_model *m, int64_t *total,
                                       int64_t *begin, int64_t *end);

/* The digest of the data m was built with (kiln_graph_data_digest of the
 * model's graph once every shared value is bound, before a part's rows
 * are sliced out: the whole data's digest, the same for every part of a
 * model built from the same graph and data; a model of other data has
 * another).  Values read from a JSON data file count as the numbers read:
 * two files differing only in whitespace or key order give the same
 * digest.  0 when m is NULL.  Thread-safe. */
uint64_t kiln_model_data_digest(const kiln_model *m);

/* ---- Blocks (issue 30, part p30block; docs/mpi.md "Blocks") ------------
 *
 * A model, or part p of P, evaluated as B blocks of rows: block b is part
 * p*B + b of P*B (kiln_model_new_partition), so the blocks cover exactly
 * the part's rows and their sum is the part's value (to rounding: ~1e-15
 * relative).  Each block's data and intermediates then fit in cache: a
 * regression's X @ beta and X^T r read a block of X twice from cache
 * instead of streaming the part's whole X from memory twice.  Every block
 * compiles the same kernels (B blocks add no compiles); the blocks hold
 * the part's rows once between them (each its own rows).  libkiln-mpi
 * evaluates each rank's part this way (<kiln/mpi.h>). */
typedef struct kiln_model_blocks kiln_model_blocks;

/* The automatic number of blocks for part p (NULL: the whole model, split
 * along the graph's declared axis) of g with `data`: $KILN_BLOCKS when it
 * is a positive integer; else 1 when data is not NULL or "" (JSON data is
 * not sized before it is parsed; pass blocks explicitly), when there is
 * no axis, or when the part's data rows bound in g (every shared value
 * sized by the axis: .kg npy()/csv(), the C API) are under 2 blocks of
 * $KILN_BLOCK_BYTES bytes (default 2 MiB); else their bytes over that
 * size, at most the part's rows.  The same on every part of the same
 * graph.  Not an error when g is NULL (1).  Thread-safe. */
int kiln_model_blocks_auto(const kiln_graph *g, const char *data,
                           const kiln_partition *p);

/* Build part p of g (p NULL: the whole model) as `blocks` blocks (0:
 * kiln_model_blocks_auto).  With 1 block this is kiln_model_new_partition
 * (p NULL: kiln_model_new) exactly.  With B > 1, data bound in g is
 * shared between the blocks' builds (each copies its own rows), while a
 * JSON `data` is read by every block's build (B reads).  blocks 0 gives
 * 1 block when kernels tier up at run time (opt NULL or its tiers
 * KILN_TIERS_POLICY, and no backend in opt or $KILN_BACKEND) and
 * $KILN_BLOCKS is not set: each block's function has its own tier-up
 * trigger, so B blocks would tier up B times later (docs/mpi.md
 * "Blocks").  Blocks may have
 * no rows (B larger than the part's rows).  The caller frees the result
 * with kiln_model_blocks_free.  Errors: KILN_ERR_ARG (blocks < 0 or
 * over 1024; with blocks 0, $KILN_BLOCKS set to anything but an integer
 * from 1 to 1024, or $KILN_BLOCK_BYTES to anything but one from 1 to
 * 2^40: "model: KILN_BLOCKS='abc' is not an integer from 1 to 1024";
 * P * B over INT_MAX parts), KILN_ERR_NOMEM, and those of
 * kiln_model_new_partition (with B > 1 and p NULL: "no axis named or
 * declared" when the graph declares none). */
kiln_model_blocks *kiln_model_blocks_new(const kiln_graph *g,
                                         const char *logp_output,
                                         const char *data,
                                         const kiln_partition *p,
                                         int blocks,
                                         const kiln_options *opt,
                                         const kiln_read_options *ropt,
                                         kiln_err *err);

/* The number of blocks (0 for NULL) and block i's model (NULL when i is
 * out of range; owned by mb: its log density is that block's share).
 * Not collective, thread-safe. */
int kiln_model_blocks_count(const kiln_model_blocks *mb);
kiln_model *kiln_model_blocks_model(const kiln_model_blocks *mb, int i);

/* As kiln_model_partition_range for the blocks together: the axis (NULL
 * for a whole model built as one block), its whole size and the rows
 * [*begin, *end) of the part.  Thread-safe. */
const char *kiln_model_blocks_range(const kiln_model_blocks *mb,
                                    int64_t *total, int64_t *begin,
                                    int64_t *end);

/* The sum over the blocks of kiln_model_log_density (grad: NULL, or
 * kiln_model_n_unc values, written only on success).  Thread-safe as
 * kiln_model_log_density is.  Errors: KILN_ERR_ARG (mb or lp NULL),
 * KILN_ERR_NOMEM, the first failing block's error. */
int kiln_model_blocks_log_density(const kiln_model_blocks *mb, int jacobian,
                                  const double *unc, double *lp,
                                  double *grad, kiln_err *err);

/* kiln_model_tier_wait on every block in turn: 0, 1 on a timeout (of one
 * block's wait), KILN_ERR_ARG for mb NULL. */
int kiln_model_blocks_tier_wait(const kiln_model_blocks *mb,
                                double timeout_seconds);

/* NULL allowed. */
void kiln_model_blocks_free(kiln_model_blocks *mb);

#ifdef __cplusplus
}
#endif
#endif
