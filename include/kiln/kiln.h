/*
 * kiln.h — the public C API of kiln: dtypes, errors, compiling a graph to a
 * function and calling it.  Graphs are built with <kiln/graph.h> or parsed
 * from the `.kg` text format (docs/ir.md).
 *
 * Conventions used by every function in this header:
 *  - a function that can fail takes a `kiln_err *err` last; on failure it
 *    returns NULL or a non-zero kiln_code and fills err->code and
 *    err->message (a NUL-terminated, one-line English message).  `err` may
 *    be NULL when the caller does not want the message.  On success `err`
 *    is left untouched.
 *  - nothing in the library calls abort() or exit(); every bad input is an
 *    error return.
 *  - tensors are dense and C-ordered (row-major); shapes are in elements,
 *    sizes in bytes.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_STRING "0.1.0"

/* Largest tensor rank kiln handles (shapes are fixed arrays of this size). */
#define KILN_MAX_RANK 8

/* Element types.  Sizes: f64 8, f32 4, i64 8, i32 4, bool 1 byte (0 or 1). */
typedef enum kiln_dtype {
    KILN_F64 = 0,
    KILN_F32 = 1,
    KILN_I64 = 2,
    KILN_I32 = 3,
    KILN_BOOL = 4,
    KILN_NDTYPES = 5
} kiln_dtype;

/* Error codes.  KILN_OK is 0; every other value is an error. */
typedef enum kiln_code {
    KILN_OK = 0,
    KILN_ERR_PARSE,   /* malformed .kg text: message starts "file:line:col: " */
    KILN_ERR_TYPE,    /* dtype mismatch, unknown op, bad arity or attribute */
    KILN_ERR_SHAPE,   /* shapes that do not match: message names both */
    KILN_ERR_NAME,    /* undefined or duplicate name */
    KILN_ERR_IO,      /* a file could not be read or written */
    KILN_ERR_NOMEM,   /* an allocation failed */
    KILN_ERR_BACKEND, /* no backend could compile or load a kernel */
    KILN_ERR_ARG,     /* a bad argument to an API function */
    KILN_ERR_RUNTIME, /* an error while running (e.g. index out of bounds) */
    KILN_ERR_POLICY,  /* a bad backend policy (kiln/policy.h): message
                         starts "file:line:col: " */
    KILN_ERR_CHECK    /* a run-time check (the op `check`, docs/ops.md)
                         found a false condition while running: message
                         "check failed: MSG (NODE)", MSG the check's msg
                         attribute ("check failed (NODE)" when it has
                         none), NODE as in KILN_ERR_RUNTIME messages,
                         e.g. "node 'lp' (check, .kg line 7)"; or a
                         kernel rejected the point as Stan rejects a
                         draw (issue 28: an ODE solver failed,
                         "NODE: ode_bdf 'z': CVODE failed at t=2.5
                         (CV_TOO_MUCH_WORK)") */
} kiln_code;

/* Caller-owned error record; see the conventions above. */
typedef struct kiln_err {
    int code;            /* a kiln_code */
    char message[1024];  /* one line, NUL-terminated */
} kiln_err;

/* A dense C-ordered tensor that the caller owns.  `data` points at
 * shape[0]*...*shape[rank-1] elements of `dtype` (one element for rank 0). */
typedef struct kiln_tensor {
    kiln_dtype dtype;
    int rank;                       /* 0 .. KILN_MAX_RANK */
    int64_t shape[KILN_MAX_RANK];   /* only the first `rank` are read */
    void *data;
} kiln_tensor;

typedef struct kiln_graph kiln_graph;       /* see <kiln/graph.h> */
typedef struct kiln_function kiln_function; /* a compiled graph */
typedef struct kiln_policy kiln_policy;     /* see <kiln/policy.h> */

/* Name of a dtype ("f64", "f32", "i64", "i32", "bool"), or "?" when out of
 * range.  The string is static. */
const char *kiln_dtype_name(kiln_dtype dt);

/* Size of one element of `dt` in bytes (0 when out of range). */
size_t kiln_dtype_size(kiln_dtype dt);

/* Parse a dtype name as printed by kiln_dtype_name.  Returns 0 and sets
 * *out, or -1 when `name` is not a dtype. */
int kiln_dtype_parse(const char *name, kiln_dtype *out);

/* Number of elements of a shape: 1 for rank 0, 0 when any dim is 0
 * (whatever the other dims are), else the product of the dims.  Returns
 * -1 when a dim is negative, when rank > 0 and `shape` is NULL, or when
 * the product overflows int64_t.  Thread-safe. */
int64_t kiln_shape_numel(int rank, const int64_t *shape);

/* Options for kiln_compile.  Zero-initialise, then set struct_size to
 * sizeof(kiln_options); fields beyond struct_size are treated as unset, so
 * that a program built against an older kiln keeps working. */
typedef struct kiln_options {
    size_t struct_size;
    /* Backend to compile every kernel with ("interp", or the name of a
     * plugin found on the plugin path), overriding the policy; NULL means
     * $KILN_BACKEND when set, else the policy chooses per kernel (see
     * `policy` below).  A backend that is missing or refuses a kernel
     * falls back to "interp" with a one-line diagnostic. */
    const char *backend;
    /* Extra plugin directories, ':'-separated, searched before
     * $KILN_PLUGIN_PATH and the install directory.  NULL for none. */
    const char *plugin_path;
    /* Where one-line diagnostics (fallbacks, skipped plugins) go: a
     * FILE* cast to void*, or NULL for stderr. */
    void *diag;
    /* 1 to silence diagnostics. */
    int quiet;
    /* Threads compiling kernels at once when the backend is thread-safe
     * (KILN_BACKEND_THREAD_SAFE): 0 means the number of online CPUs, 1
     * compiles in the calling thread only.  Results do not depend on it. */
    int jobs;
    /* Optimisation level handed to the backend (kiln_compile_options):
     * 1..3, 0 meaning the default, 2.  Backends may ignore it. */
    int opt_level;
    /* 1 lets backends that honour it relax IEEE semantics (docs/backends.md);
     * 0 (the default) keeps results within the interpreter's tolerance. */
    int fast_math;
    /* The disk cache (kiln/cache.h, docs/cache.md): a kiln_cache_mode
     * (0: $KILN_CACHE, else on) and the user cache directory, an
     * absolute path (NULL: $KILN_CACHE_DIR, cache.dir of the user's or
     * site's configuration file, $XDG_CACHE_HOME/kiln, ~/.cache/kiln).
     * A relative directory is refused with one diagnostic line and the
     * compile goes on without the user cache. */
    int cache_mode;
    const char *cache_dir;
    /* The backend policy (kiln/policy.h, docs/policy.md), used when no
     * backend is named (`backend` NULL and $KILN_BACKEND unset: an
     * explicit backend overrides every policy).  The first of these that
     * is set wins: `policy` (a loaded policy; the function keeps its own
     * reference), `policy_file` (a YAML file), $KILN_POLICY,
     * FILE.policy.yaml next to `model_path` (the .kg file the graph came
     * from, NULL when none), the installed default policy.  A policy that
     * cannot be read fails the compile (KILN_ERR_POLICY or KILN_ERR_IO). */
    const struct kiln_policy *policy;
    const char *policy_file;
    const char *model_path;
    /* The rewrite passes (docs/rewrite.md): "all", "none", a list of
     * names ("canonicalize,cse") or edits of the full set ("-fuse,
     * -pairwise").  NULL: $KILN_PASSES, else the policy's `passes:`, else
     * all.  Results agree within rounding whichever passes run. */
    const char *passes;
    /* 1 compiles for the architecture's baseline CPU instead of the
     * host's (kiln_compile_options.generic_target): slower code that runs
     * on every node of a mixed cluster, for a shared disk cache. */
    int generic_target;
    /* Tiered compilation (docs/policy.md, "Tiers"), for a policy with
     * `tiers:` on: a kiln_tiers_mode.  KILN_TIERS_POLICY (0) does what
     * the policy says: every kernel starts on tier 0 and hot kernels are
     * compiled with tier 1 on background threads and swapped in at the
     * next call.  KILN_TIERS_OFF compiles every kernel with the backend
     * the rules choose before kiln_compile returns (no background work);
     * KILN_TIERS_BASELINE starts on tier 0 and never tiers up.  An
     * explicit backend (`backend`, $KILN_BACKEND) always means OFF.
     * Another value fails the compile with KILN_ERR_ARG.
     * Added in kiln 0.3: check struct_size. */
    int tiers;
    /* Background compile threads for tier 1, shared by every function of
     * the process: 0 means the policy's tiers.threads, else one fewer
     * than the online CPUs, at least 1.  Added in kiln 0.3. */
    int tier_threads;
} kiln_options;

/* kiln_options.tiers */
typedef enum kiln_tiers_mode {
    KILN_TIERS_POLICY = 0,
    KILN_TIERS_OFF = 1,
    KILN_TIERS_BASELINE = 2
} kiln_tiers_mode;

/* Compile `g` to a function.  The graph is validated and lowered to kernels;
 * each kernel is compiled with the backend the policy (or an explicit
 * backend) chooses for it, falling back down the policy's chain when that
 * backend is missing, refuses the kernel or fails to compile it (one
 * diagnostic line each); buffers for intermediates are planned once.
 * `g` is only read: the function keeps
 * its own copy of every constant and shared value (a borrowed one,
 * kiln_graph_shared_ref or a safetensors tensor, is shared instead: no
 * copy, its owner kept alive), so `g` may be freed right after.  `opt` may be NULL for defaults.
 * Values computed from shared values and constants only (never from an
 * input) are computed once, here when their data are bound (else at the
 * kiln_function_bind_shared that binds the last of them), by a separate
 * program, and stored for every call to read (the `hoist` pass; the
 * policy's hoist.max_size caps one value's size, a larger one stays per
 * call with a diagnostic line; kiln_function_n_hoisted).  The results
 * are those of computing them at every call, bit for bit.  An error
 * while computing them (an index out of bounds in the data) fails the
 * compile.
 * Errors: KILN_ERR_ARG (g NULL or has no output), KILN_ERR_TYPE or
 * KILN_ERR_SHAPE (invalid graph), KILN_ERR_POLICY or KILN_ERR_IO (the
 * policy selected cannot be read), KILN_ERR_BACKEND (no backend could
 * compile a kernel, interp included), KILN_ERR_NOMEM.
 * Returns a function the caller frees with kiln_function_free. */
kiln_function *kiln_compile(const kiln_graph *g, const kiln_options *opt,
                            kiln_err *err);

/* Free a function and everything it owns (output buffers included).
 * NULL is allowed. */
void kiln_function_free(kiln_function *f);

/* Run the function once.
 * `inputs` has kiln_function_n_inputs(f) tensors in declaration order
 * (`input` statements of the graph); each must have the declared dtype and
 * rank, the declared static dims, and the same size for every use of one
 * symbolic dim.  `outputs` has kiln_function_n_outputs(f) slots that are
 * overwritten: dtype, rank and shape are set and `data` points at memory
 * owned by f's context for the calling thread (below), valid until the
 * next call of f from the same thread or kiln_function_free.
 * A steady-state call (same input shapes as the previous call from this
 * thread) allocates nothing.
 *
 * Threads: any number of threads may call kiln_function_call on one f at
 * once.  Each thread gets its own context (buffers for intermediates and
 * outputs, views, prepared calls) the first time it calls f; contexts
 * live until kiln_function_free, so a program that calls f from many
 * short-lived threads should use kiln_context_new instead.  Compiled
 * code is shared; a kernel swapped to a higher tier is used from each
 * context's next call on (a call in flight finishes on the code it
 * started with).  kiln_function_bind_shared and kiln_function_free must
 * not run while a call of f is in flight.
 * Errors: KILN_ERR_ARG (NULL arguments), KILN_ERR_TYPE (a dtype differs;
 * message names the input and both dtypes), KILN_ERR_SHAPE (a rank or dim
 * differs, or shapes cannot broadcast; message names the input or node and
 * both shapes), KILN_ERR_RUNTIME (e.g. an index out of bounds),
 * KILN_ERR_CHECK (a `check` op found a false condition: "check failed:
 * MSG (NODE)"), KILN_ERR_NOMEM.  On error the outputs are unspecified. */
int kiln_function_call(kiln_function *f, const kiln_tensor *inputs,
                       kiln_tensor *outputs, kiln_err *err);

/* ---- contexts: explicit per-caller state ----------------------------- */

typedef struct kiln_context kiln_context;

/* A context for calling f: its own buffers for intermediates and
 * outputs, argument views and prepared calls.  One context is used by
 * one thread at a time; several contexts of one f may run at once from
 * different threads (a sampler's chains).  The context must be freed
 * before f.  Errors: KILN_ERR_ARG (f NULL), KILN_ERR_NOMEM. */
kiln_context *kiln_context_new(kiln_function *f, kiln_err *err);

/* kiln_function_call on context ctx: the same checks and errors; output
 * data is owned by ctx, valid until the next call on ctx or
 * kiln_context_free. */
int kiln_context_call(kiln_context *ctx, const kiln_tensor *inputs,
                      kiln_tensor *outputs, kiln_err *err);

/* Free a context and its buffers.  NULL is allowed. */
void kiln_context_free(kiln_context *ctx);

/* ---- tiers (docs/policy.md, "Tiers") --------------------------------- */

/* Wait until f has no tier-up queued or compiling (in the pool or forced
 * by kiln_function_tier_up in another thread), for at most
 * `timeout_seconds` (< 0, NaN or more than a year: no limit).  Returns 0 when none is left, 1 on
 * timeout, KILN_ERR_ARG when f is NULL.  A kernel whose trigger has not
 * fired yet is not waited for: this waits for work already started.
 * Thread-safe. */
int kiln_function_tier_wait(kiln_function *f, double timeout_seconds);

/* How many kernels this process has compiled, since it started, with a
 * backend whose code the disk cache can hold (tcc, llvm: not the
 * interpreter, which translates a kernel at every load): every compile,
 * at kiln_compile or in the tier-up pool, counted when the backend's
 * compile succeeded; a kernel loaded from the cache is not counted.
 * libkiln-mpi reports it per rank (one compile per job: docs/mpi.md).
 * Thread-safe. */
uint64_t kiln_compile_count(void);

/* Forbid f to tier up from now on: queued tier-ups are dropped, a
 * compile in flight is finished and thrown away, kernels already swapped
 * stay.  Thread-safe; returns promptly. */
void kiln_function_tier_forbid(kiln_function *f);

/* Tier kernel `kernel` up now, in the calling thread (-1: every kernel
 * that has a tier above the one it runs on; each is tried, the first
 * failure is the one reported), whatever the trigger says:
 * for tests and tools (the differential harness forces tier-up at random
 * calls).  A kernel already on its top tier, or already compiling in the
 * background (waited for), is left as it is.  Safe while other threads
 * call f.  Errors: KILN_ERR_ARG (f NULL, kernel out of range),
 * KILN_ERR_BACKEND (the tier-1 backend failed: the kernel stays on tier
 * 0 and the message says why). */
int kiln_function_tier_up(kiln_function *f, int kernel, kiln_err *err);

/* Where one kernel runs now (kiln_function_tier_info). */
typedef struct kiln_tier_info {
    size_t struct_size;        /* set by the caller: sizeof(kiln_tier_info) */
    int tier;                  /* 0 or 1: tier 1 when it runs tier-1 code,
                                  swapped or loaded from the cache */
    const char *backend;       /* the backend it runs on now (owned by f) */
    const char *tier1;         /* the backend it may move to, or NULL */
    int state;                 /* kiln_tier_state */
    int64_t swapped_call;      /* calls of f (every thread's, as counted
                                  at sampled calls) before the swap; -1
                                  when it has not swapped */
    double swapped_seconds;    /* seconds after kiln_compile ended; -1
                                  when it has not swapped */
    double measured_ns;        /* tier-0 run time of one call, as sampled
                                  (the minimum), 0 before any sample */
    double compile_seconds;    /* the tier-1 compile (or cache load), 0 */
    /* the trigger (docs/policy.md, "The trigger"); added in kiln 0.4,
     * filled when struct_size covers them */
    int64_t queued_call;       /* calls of f when its tier-1 compile was
                                  queued (by the trigger, at once for a
                                  rule's backend, or by
                                  kiln_function_tier_up); -1 when never */
    double queued_seconds;     /* seconds after kiln_compile ended; -1 */
    double predicted_compile_ms; /* the tier-1 compile the trigger weighs
                                  it against (CPU ms, tiers' compile
                                  model), 0 without a tier above */
    double predicted_gain_ns;  /* predicted saving per call of its job (0
                                  before two samples) */
} kiln_tier_info;

typedef enum kiln_tier_state {
    KILN_TIER_FIXED = 0,      /* no tier above: stays where it is */
    KILN_TIER_WAITING,        /* on tier 0, trigger not fired */
    KILN_TIER_QUEUED,         /* tier-1 compile queued */
    KILN_TIER_COMPILING,      /* tier-1 compile running */
    KILN_TIER_SWAPPED,        /* runs tier-1 code */
    KILN_TIER_FAILED,         /* the tier-1 backend failed: stays */
    KILN_TIER_NEVER           /* too small to gain, or forbidden */
} kiln_tier_state;

/* Fill *info for kernel i (0 <= i < kiln_function_n_kernels(f);
 * info->struct_size set by the caller).  A function compiled without
 * tiers has every kernel KILN_TIER_FIXED on tier 0.  Returns 0, or -1
 * when f or info is NULL, struct_size is too small or i is out of
 * range.  Thread-safe. */
int kiln_function_tier_info(const kiln_function *f, int i,
                            kiln_tier_info *info);

/* Number of inputs / shared values / outputs of a compiled function. */
int kiln_function_n_inputs(const kiln_function *f);
int kiln_function_n_shared(const kiln_function *f);
int kiln_function_n_outputs(const kiln_function *f);

/* Name of input, shared value or output `i` (0-based, declaration order).
 * The string is owned by `f`.  NULL when `i` is out of range. */
const char *kiln_function_input_name(const kiln_function *f, int i);
const char *kiln_function_shared_name(const kiln_function *f, int i);
const char *kiln_function_output_name(const kiln_function *f, int i);

/* Declared type of input `i`: dtype, rank and dims, where a dim is >= 0
 * when static and -1 when symbolic or unknown; `symbols`, when not NULL,
 * receives for each dim the symbol's name (owned by f) or NULL.
 * Returns 0, or -1 when `i` is out of range. */
int kiln_function_input_type(const kiln_function *f, int i, kiln_dtype *dtype,
                             int *rank, int64_t dims[KILN_MAX_RANK],
                             const char *symbols[KILN_MAX_RANK]);

/* The size a bound shared value fixes for symbol `symbol` (a dim name of
 * the graph), or -1 when no shared value fixes it (or f, symbol NULL,
 * no such symbol).  Thread-safe. */
int64_t kiln_function_symbol_size(const kiln_function *f, const char *symbol);

/* Replace the value of shared value `name` with a copy of `value`, which
 * must have the same dtype and shape as the current value (no recompile).
 * When values computed from data only were hoisted (kiln_compile) and
 * this shared value feeds them, they are computed again here, once every
 * shared value they read is bound: the call costs one run of that
 * data-only part (the "prep" program), and its errors (an index out of
 * bounds in the data, ...) are returned here, prefixed "computing the
 * data-only values: ", with the new value kept.  Not thread-safe: no
 * call of f may be in flight.
 * Errors: KILN_ERR_NAME (no shared value of that name), KILN_ERR_TYPE,
 * KILN_ERR_SHAPE (message names both shapes), the prep's errors,
 * KILN_ERR_NOMEM.  The old value is kept on a type or shape error. */
int kiln_function_bind_shared(kiln_function *f, const char *name,
                              const kiln_tensor *value, kiln_err *err);

/* kiln_function_bind_shared without the copy: f reads `value`'s data in
 * place from now on (its dtype and shape checked as there).  The caller
 * keeps value->data valid until f is freed or this shared value is bound
 * again; bytes changed in place are seen by f's next call (values
 * hoisted from it excepted: bind again to recompute them).  f never
 * writes the bytes.  A later kiln_function_bind_shared (the copying one)
 * gives f an owned buffer again.  Not thread-safe: no call of f may be
 * in flight.  Errors: those of kiln_function_bind_shared. */
int kiln_function_bind_shared_ref(kiln_function *f, const char *name,
                                  const kiln_tensor *value, kiln_err *err);

/* Hoisting (docs/architecture.md, "Data-only values"): the values of f
 * computed from shared values and constants only that kiln_compile
 * considered storing.  kiln_function_n_hoisted gives their number (0 for
 * f NULL); kiln_function_hoisted_info describes value i: returns its
 * label ("node 'xc' (sub) f64[5000, 24]", owned by f; NULL when i is out
 * of range), *bytes its size (-1 when not known), *per_call 1 when it
 * was not stored (over the policy's hoist.max_size) and is computed at
 * every call, 0 when it is computed when the data are bound.  bytes and
 * per_call may be NULL.  Thread-safe. */
int kiln_function_n_hoisted(const kiln_function *f);
const char *kiln_function_hoisted_info(const kiln_function *f, int i,
                                       int64_t *bytes, int *per_call);

/* Number of kernels the function runs per call, and the backend kernel
 * `i` runs on now ("interp", "tcc", ...: the tier-1 backend once the
 * kernel has swapped; owned by f, NULL when out of range).  For tools and
 * tests; thread-safe. */
int kiln_function_n_kernels(const kiln_function *f);
const char *kiln_function_kernel_backend(const kiln_function *f, int i);

/* ---- the sampler callback (core/runtime/callback.c; docs/sampler.md) -------- */

/* A log-density and its gradient as a plain C function: the ABI that
 * nutpie (`RawLogpFunc`) and PyMC-style samplers take for a compiled
 * model,
 *
 *   int fn(uint64_t dim, const double *x, double *grad, double *logp,
 *          void *user_data);
 *
 * `x` is the point, `dim` doubles, read only.  `grad`, when not NULL,
 * receives `dim` doubles: d logp / d x.  `*logp` receives the
 * log-density.  `user_data` is the pointer kiln_function_logp_callback
 * returned with the function.
 *
 * Packing (x and grad alike): the concatenation of ALL inputs of the
 * function in declaration order (kiln_function_input_name(f, 0), 1, ...),
 * each flattened in C (row-major) order.  An input of shape (2, 3)
 * starting at offset k holds element [i][j] at x[k + 3*i + j]; a scalar
 * takes one slot.  `dim` is the sum of the inputs' element counts.  f32
 * inputs are rounded to f32 before the call and their gradients widened
 * to f64.
 *
 * Returns 0 on success and otherwise (following nutpie, where a positive
 * code is a recoverable failure that rejects the point and a negative one
 * stops sampling):
 *   KILN_LOGP_NONFINITE  logp is NaN or +-inf; *logp holds it, the
 *                        contents of grad are unspecified; also when the
 *                        function rejected the point (KILN_ERR_CHECK: a
 *                        check's false condition, an ODE solver's
 *                        failure): *logp is -inf, the message says why;
 *   KILN_LOGP_BAD_DIM    `dim` is not the function's total, or x (with
 *                        dim > 0) or logp is NULL; nothing is written;
 *   KILN_LOGP_ERROR      the function failed to run (kiln_function_call
 *                        returned an error); *logp and grad unspecified.
 * kiln_logp_callback_message tells why the last call failed. */
typedef int (*kiln_logp_fn)(uint64_t dim, const double *x, double *grad,
                            double *logp, void *user_data);

enum {
    KILN_LOGP_OK = 0,
    KILN_LOGP_NONFINITE = 1,
    KILN_LOGP_BAD_DIM = -1,
    KILN_LOGP_ERROR = -2
};

/* The callback for output `logp_output` of `f` and the gradients g->grads
 * records for it (built with kiln_graph_grad or `grad(...)` in a .kg
 * file).  Sets *dim to the number of doubles in x and *user_data to the
 * pointer to pass back at every call; returns the function pointer, or
 * NULL on error.
 *
 * Requirements, checked here (the message names the output or input):
 *  - `logp_output` names an output of f
 *      KILN_ERR_NAME  "logp callback: no output named 'lp'"
 *  - that output is a float scalar (f64 or f32, rank 0)
 *      KILN_ERR_TYPE  "logp callback: output 'n' must be a float scalar,
 *                      got i64"
 *      KILN_ERR_SHAPE "logp callback: output 'v' must be a float scalar,
 *                      got f64[3]"
 *  - every input has static dims
 *      KILN_ERR_SHAPE "logp callback: input 'x' has a symbolic or unknown
 *                      dim, f64[n]; the callback needs static shapes"
 *  - every input is f64 or f32
 *      KILN_ERR_TYPE  "logp callback: input 'k' has dtype i64; every input
 *                      must be f64 or f32"
 *  - for every input, an output of f is recorded as the gradient of the
 *    logp output's node with respect to that input, with the input's
 *    shape and a float dtype
 *      KILN_ERR_ARG   "logp callback: no output is the gradient of 'logp'
 *                      with respect to input 'y'"
 *      KILN_ERR_SHAPE "logp callback: gradient output 'd_x' is f64[2], but
 *                      input 'x' is f64[3]"
 *  - f, logp_output, dim and user_data are not NULL (KILN_ERR_ARG).
 *
 * user_data is owned by f and stays valid until kiln_function_free(f);
 * the caller never frees it.  Several callbacks may be made from one f
 * (each its own user_data).
 *
 * Threads: the callback is reentrant.  Any number of threads may call
 * it (and other callbacks of f) at once and run in parallel, as nutpie's
 * chains do through one pointer: each call runs kiln_function_call on
 * f, in the calling thread's context of f, with the thread's own input
 * and output tensors, f32 buffer and last message.  Your own
 * kiln_function_call(f, ...) from another thread may run at the same
 * time; from the same thread, it overwrites the outputs a callback call
 * read, which is harmless once that call has returned.  Making a
 * callback is thread-safe too (it may run while other callbacks of f are
 * being called).
 *
 * Allocation: a thread's first call through a callback allocates its
 * scratch (and, on its first call of f, its context of f, as the first
 * kiln_function_call does); every later call from that thread allocates
 * nothing (f64 inputs point straight into x).  The scratch of every
 * thread lives until kiln_function_free(f).  A thread's first call that
 * cannot allocate returns KILN_LOGP_ERROR. */
kiln_logp_fn kiln_function_logp_callback(kiln_function *f,
                                         const char *logp_output,
                                         uint64_t *dim, void **user_data,
                                         kiln_err *err);

/* Why the calling thread's last call of the callback with this user_data
 * did not return 0 (one line, owned by user_data), or "" when it
 * succeeded or this thread never called it.  Each thread sees its own
 * calls only; the text stays valid until that thread's next call of the
 * callback, or kiln_function_free.  Thread-safe. */
const char *kiln_logp_callback_message(const void *user_data);

/* ---- gradient check (core/check/gradcheck.c) ------------------------------ */

/* One checked gradient: output `gradient` of f, recorded as
 * d output / d input, against central finite differences of output
 * `output`.  Names are owned by f. */
typedef struct kiln_grad_check {
    const char *input;     /* the input differentiated against (wrt) */
    const char *output;    /* the cost output */
    const char *gradient;  /* the output holding d output / d input */
    double max_error;      /* the worst per-element error (below); +inf
                              when either value there is not finite; 0
                              for an input with no elements */
    int64_t worst_index;   /* its flat C-order index in the input (the
                              first one on ties); -1 for no elements */
    double analytic;       /* the gradient output there */
    double numeric;        /* the central finite difference there */
} kiln_grad_check;

/* Compare every gradient recorded in f's graph (g->grads, in record
 * order) whose cost and result are both outputs of f and whose wrt is an
 * input of f, with central finite differences of the cost output at
 * `inputs` (as for kiln_function_call).  For each element i of the
 * input, with x_i its value:
 *
 *   h_i     = 1e-6 * max(1, |x_i|)   (f32 inputs: 1e-3 * max(1, |x_i|))
 *   numeric = (cost(x_i + h_i) - cost(x_i - h_i)) / (x_i+ - x_i-)
 *   error   = |analytic - numeric| / max(1, |numeric|)
 *
 * in f64, where x_i+ and x_i- are the perturbed values as stored in the
 * input's dtype (so the divisor is the step actually taken).  One row
 * per (gradient output, input, cost output) triple gives the largest
 * error over the input's elements, where it occurs, and both values.
 * f32 models are checked in their own precision: expect errors around
 * 1e-3 rather than 1e-8.
 *
 * `inputs` is not modified (the check perturbs a private copy).  f is
 * called 1 + 2 * (elements of the checked inputs) + 1 times; on success
 * its outputs are those at `inputs` again.
 *
 * *n_rows receives the number of rows there are; the first
 * min(*n_rows, max_rows) are filled.  With max_rows 0 (rows may then be
 * NULL) nothing is evaluated: only the count is returned.
 * Returns 0, or: KILN_ERR_ARG (f or n_rows NULL, max_rows < 0, rows NULL
 * with max_rows > 0); an error of kiln_function_call (at `inputs`, or
 * prefixed "check-grad: at input 'x'[3] + h: " at a perturbed point);
 * KILN_ERR_SHAPE when a gradient output's element count differs from its
 * input's or the cost output is not a scalar; KILN_ERR_NOMEM. */
int kiln_function_check_grad(kiln_function *f, const kiln_tensor *inputs,
                             kiln_grad_check *rows, int max_rows,
                             int *n_rows, kiln_err *err);

#ifdef __cplusplus
}
#endif
#endif
