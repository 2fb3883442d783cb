/*
 * policy.h — backend policies: which backend compiles which kernel
 * (docs/policy.md).
 *
 * A policy is a YAML file (read with libyaml) holding a fallback chain of
 * backends, an ordered list of rules — the first rule whose `when` holds
 * for a kernel picks its backend — a default, the cost model's
 * parameters, and knobs read by other parts of kiln (fusion caps, constant
 * promotion, LLVM options, the disk cache, the rewrite passes).
 *
 * kiln_compile picks a policy in this order (first found wins):
 *   kiln_options.policy  >  kiln_options.policy_file  >  $KILN_POLICY  >
 *   FILE.policy.yaml next to kiln_options.model_path (FILE.kg)  >
 *   the installed default ($(pkgdatadir)/policy/default.yaml).
 * An explicit backend (kiln_options.backend or $KILN_BACKEND) overrides
 * every policy: all kernels go to that backend, then to interp.
 *
 * Conventions are those of <kiln/kiln.h>: functions that can fail take a
 * kiln_err * last (may be NULL) and return NULL or a non-zero kiln_code.
 * Policy errors have code KILN_ERR_POLICY and a message that starts with
 * "FILE:LINE:COLUMN: " (1-based, from libyaml's marks).
 */
#ifndef KILN_POLICY_H
#define KILN_POLICY_H

#include <kiln/kiln.h>
#include <kiln/backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The schema version this kiln reads (`kiln_policy: 1`). */
#define KILN_POLICY_SCHEMA 1

/* Caps on a policy's text, checked before the YAML parser sees it (a
 * policy found next to a model is untrusted, and libyaml takes time
 * quadratic in the nesting of flow collections): at most
 * KILN_POLICY_MAX_SIZE bytes, '[' and '{' nested at most
 * KILN_POLICY_MAX_DEPTH deep (not counting those in comments and quoted
 * scalars), and at most KILN_POLICY_MAX_COLLECTIONS '[' and '{' bytes in
 * all.  A policy over a cap is a KILN_ERR_POLICY error at the
 * FILE:LINE:COLUMN where the cap was exceeded. */
#define KILN_POLICY_MAX_SIZE (1u << 20)
#define KILN_POLICY_MAX_DEPTH 32
#define KILN_POLICY_MAX_COLLECTIONS 4096

/* Load a policy from a YAML file.  Returns a policy the caller frees with
 * kiln_policy_free.
 * Errors: KILN_ERR_ARG (path NULL), KILN_ERR_IO (cannot open or read:
 * "FILE: No such file or directory"), KILN_ERR_POLICY (YAML syntax, an
 * unknown key, a value of the wrong type, an unknown backend, a bad
 * comparison, a missing or unsupported schema version, a text over one of
 * the caps above; the message starts with "FILE:LINE:COLUMN: "),
 * KILN_ERR_NOMEM.  At most KILN_POLICY_MAX_SIZE + 1 bytes of the file are
 * read. */
kiln_policy *kiln_policy_load_file(const char *path, kiln_err *err);

/* Load a policy from `len` bytes of YAML text; `name` (may be NULL:
 * "<string>") stands for the file name in messages.  `text` is only read.
 * Returns and fails as kiln_policy_load_file (no KILN_ERR_IO). */
kiln_policy *kiln_policy_load_string(const char *text, size_t len,
                                     const char *name, kiln_err *err);

/* Free a policy.  NULL is allowed.  A function compiled with the policy
 * keeps its own reference: the policy may be freed right after
 * kiln_compile. */
void kiln_policy_free(kiln_policy *p);

/* The file the policy was read from (the `name` of
 * kiln_policy_load_string), owned by p. */
const char *kiln_policy_source(const kiln_policy *p);

/* The fallback chain: number of backends (interp always last), and the
 * name of backend i (owned by p; NULL when i is out of range). */
int kiln_policy_n_backends(const kiln_policy *p);
const char *kiln_policy_backend(const kiln_policy *p, int i);

/* Number of rules, and the name of rule i (its `name:`, or "rule N" with
 * N 1-based; owned by p; NULL when out of range). */
int kiln_policy_n_rules(const kiln_policy *p);
const char *kiln_policy_rule_name(const kiln_policy *p, int i);

/* Find the policy kiln_compile would use for `opt` (may be NULL) by the
 * selection order above, and load it.  *source_kind, when not NULL,
 * receives how it was found: "option", "policy_file", "KILN_POLICY",
 * "model", "default", or "none" (no default installed: then the result
 * is a built-in policy sending every kernel to interp).  Returns a policy
 * the caller frees (a new reference when opt->policy was set).
 * Errors: those of kiln_policy_load_file for the file selected. */
kiln_policy *kiln_policy_select(const kiln_options *opt,
                                const char **source_kind, kiln_err *err);

/* Path of the installed default policy that kiln_policy_select would read,
 * or NULL when none is found.  Static storage. */
const char *kiln_policy_default_path(void);

/* ---- knobs for other parts of kiln ---------------------------------- */

/* Knobs the policy carries for the rewrite passes, the LLVM backend and
 * the disk cache.  The caller sets struct_size = sizeof(kiln_policy_knobs);
 * kiln_policy_knobs fills the fields that fit.  Strings are owned by the
 * policy and live as long as it.  A value the file does not set has the
 * default given here. */
typedef struct kiln_policy_knobs {
    size_t struct_size;
    /* fusion: the widest fused group (inputs) and the largest fused scalar
     * program (instructions); 0 means no fusion.  Defaults 256 and 1024. */
    int fusion_max_width;
    int fusion_max_scalar_ops;
    /* constants larger than this many bytes become inputs (never baked
     * into code or keys).  Default 1024. */
    int64_t promote_const_bytes;
    /* LLVM: optimisation level 1..3 (default 2) and fast_math 0/1
     * (default 0); kiln_options.opt_level / fast_math override them. */
    int llvm_opt_level;
    int llvm_fast_math;
    /* the disk cache: enabled (default 1) and the size cap in bytes
     * (default 1 GiB; 0 = no cap).  cache_dir is always NULL and
     * cache_read_only always an empty list: a policy may come with a
     * model, so it never names a directory (a policy with cache.dir or
     * cache.read_only fails to load, KILN_ERR_POLICY); directories come
     * from the caller (docs/cache.md, "Who is trusted for what").  The
     * fields stay for programs built against kiln 0.1. */
    int cache_enabled;
    const char *cache_dir;
    int64_t cache_max_bytes;
    const char *const *cache_read_only;
    /* the rewrite passes to run, in order (NULL-terminated list of names,
     * owned by p; docs/policy.md lists the names); passes_set is 0 when
     * the file has no `passes:` (run the default pipeline). */
    const char *const *passes;
    int passes_set;
    /* LLVM: 1 compiles for the architecture's baseline CPU instead of the
     * host's (llvm.generic_target; default 0), for a disk cache shared by
     * nodes with different CPUs (docs/cache.md). */
    int llvm_generic_target;
    /* fusion: the most outputs of one fused kernel (a scalar region's
     * values read outside it; fusion.max_outputs, default 256, 0: no
     * multi-output regions).  Added in kiln 0.2: check struct_size. */
    int fusion_max_outputs;
    /* tiered compilation (`tiers:`, docs/policy.md "Tiers").  Added in
     * kiln 0.3: check struct_size.
     *  tiers_enabled      tiers.enabled: 1 when the policy has a `tiers:`
     *                     section that does not say `enabled: false`;
     *                     0 without one (every kernel compiled with its
     *                     rule's backend before kiln_compile returns).
     *  tier0              tiers.tier0: the backends a kernel may start
     *                     on, NULL-terminated, owned by the policy;
     *                     default {"interp", "tcc"}.  Per kernel, the one
     *                     that starts sooner (a cached artifact at once,
     *                     else the cost model's compile_ms).
     *  tier1              tiers.tier1: the backend hot kernels move to;
     *                     default "llvm".
     *  tier_threads       tiers.threads: background compile threads, 0
     *                     (default) for one fewer than the online CPUs,
     *                     at least 1.
     *  tier_ratio         the same value as tier_budget (its kiln 0.3
     *                     name; the file's key `ratio` is read as
     *                     `budget`).
     *  tier_min_gain_ns   tiers.min_gain_ns: a kernel whose predicted
     *                     saving per call is below this never tiers up;
     *                     default 20.
     *  tier_sample_every  tiers.sample_every: kernels are timed on the
     *                     first calls and then every this many calls;
     *                     default 64. */
    int tiers_enabled;
    const char *const *tier0;
    const char *tier1;
    int tier_threads;
    double tier_ratio;
    double tier_min_gain_ns;
    int tier_sample_every;
    /* tiers: the tier-up budget (docs/policy.md, "The trigger").  Added
     * in kiln 0.4: check struct_size.
     *  tier_budget        tiers.budget: a kernel tiers up once the time
     *                     it has spent on tier 0 reaches budget x its
     *                     predicted tier-1 compile time; default 0.1.
     *  tier_compile_ms, tier_compile_ms_per_op, tier_compile_ms_per_input
     *                     tiers.compile_ms*: the predicted tier-1 compile
     *                     (CPU ms, compiler already loaded) of a kernel:
     *                     compile_ms + per_op x instructions + per_input x
     *                     inputs; defaults 10, 0.25, 0.15 (llvm, fitted on
     *                     the development machine).
     *  tier_preload       tiers.preload: 1 loads and sets the tier-1
     *                     compiler up on the background pool as soon as
     *                     a kernel of a function waits for it, before
     *                     any trigger fires; default 0. */
    double tier_budget;
    double tier_compile_ms;
    double tier_compile_ms_per_op;
    double tier_compile_ms_per_input;
    int tier_preload;
    /* matrix-vector products (`blas:`, docs/policy.md "BLAS and kiln's
     * matrix-vector loop").  Added in kiln 0.4: check struct_size.
     *  blas_gemv           blas.gemv: 0 auto (default: per shape, by the
     *                      measured table of the BLAS in use), 1 blas
     *                      (always BLAS), 2 loop (kiln's loop wherever it
     *                      applies: at most 512 columns).
     *  blas_loop_max_cols  blas.loop_max_cols / loop_max_cols_t: under
     *                      auto, the widest matrix (columns of the
     *                      row-major operand) whose A x / A^T y goes to
     *                      kiln's loop; -1 (default): the built-in table. */
    int blas_gemv;
    int64_t blas_loop_max_cols[2];
    /* hoisting (`hoist:`, docs/policy.md "Hoisting"): a data-only value
     * (computed from shared values and constants only) larger than this
     * many bytes is not stored but computed at every call
     * (hoist.max_size; default 256 MiB, 0: nothing is hoisted).  Added in
     * kiln 0.4: check struct_size. */
    int64_t hoist_max_bytes;
} kiln_policy_knobs;

/* Fill *out (out->struct_size set by the caller).  Returns 0, or
 * KILN_ERR_ARG when p or out is NULL or out->struct_size is too small to
 * hold the first field. */
int kiln_policy_get_knobs(const kiln_policy *p, kiln_policy_knobs *out);

/* ---- the cost model and matching -------------------------------------- */

/* What a policy looks at in a kernel.  kiln_function_kernel_info fills
 * it for a compiled kernel; tests and tools may fill it by hand. */
typedef struct kiln_kernel_facts {
    size_t struct_size;
    const char *op;        /* graph op of the node ("add", "sum", "take"),
                              or for a fused kernel its label ("fused...") */
    const char *label;     /* the kernel's label */
    int kind;              /* kiln_kernel_kind */
    int width;             /* inputs (kiln_kernel.n_inputs) */
    int scalar_ops;        /* instructions of the scalar program
                              (kiln_kernel.n_instrs; 0 for JOIN, ...) */
    int64_t elements;      /* elements of output 0 when static, else -1 */
    int64_t work_elements; /* elements the kernel iterates over (REDUCE:
                              its input's; DOT: m*n*k), -1 when symbolic */
    double cost;           /* estimated work of one call
                              (kiln_policy_cost) */
} kiln_kernel_facts;

/* The estimated work of one call of kernel `k` that iterates over
 * `work_elements` elements (-1 when not static: the policy's
 * cost_model.symbolic_elements, default 1024, is used): per-op weights
 * (cost_model.weights) summed over the scalar program, times the
 * elements; JOIN, GATHER, SCATTER, DOT use their own weights
 * (docs/policy.md).  p may be NULL for the built-in weights. */
double kiln_policy_cost(const kiln_policy *p, const kiln_kernel *k,
                        int64_t work_elements);

/* The cost model's estimates for backend `backend` (a name in the chain or
 * one of interp/tcc/llvm; others use tcc's figures): compile time in ms of
 * a kernel with `scalar_ops` instructions and `width` inputs, and run time
 * in ns of one call of cost `cost`.  p may be NULL for the built-in
 * figures. */
double kiln_policy_compile_ms(const kiln_policy *p, const char *backend,
                              int scalar_ops, int width);
double kiln_policy_call_ns(const kiln_policy *p, const char *backend,
                           double cost);

/* Which backend p picks for a kernel.  Returns the index of the rule that
 * matched (0-based), or -1 when none did (the default).  *backend, when
 * not NULL, receives the backend's name (owned by p).  A rule whose
 * matchers all hold matches; a rule with no matcher always matches. */
int kiln_policy_choose(const kiln_policy *p, const kiln_kernel_facts *k,
                       const char **backend);

/* ---- per-kernel decisions of a compiled function (kiln explain) ------- */

typedef struct kiln_kernel_info {
    size_t struct_size;
    kiln_kernel_facts facts;
    const char *rule;      /* the rule that matched, "default" when none,
                              or "backend option" when an explicit backend
                              overrode the policy */
    const char *chosen;    /* the backend the policy (or option) chose */
    const char *backend;   /* the backend that compiled the kernel */
    const char *fallback;  /* why `chosen` did not compile it (one line),
                              or NULL */
    double compile_ms_estimate; /* the cost model's compile time for
                                   `backend` */
    /* kiln 0.2 (check struct_size): fusion (core/lower/fuse.c).  The number of
     * graph nodes the kernel computes (1: unfused), their names ("a, b,
     * t12": all of them, comma-separated; unnamed nodes by the tN that
     * `kiln explain --passes` prints them as, else %N with N the node's
     * index; NULL when unfused), and why the
     * fused group ended where it did ("instruction cap
     * (fusion.max_scalar_ops)", "input cap (fusion.max_width)", "output
     * cap (fusion.max_outputs)"; NULL when no cap split it).  Strings
     * owned by f. */
    int fused_nodes;
    const char *fused;
    const char *split;
} kiln_kernel_info;

/* Describe kernel i of f (0 .. kiln_function_n_kernels(f) - 1): its facts,
 * the rule and backend chosen, the backend used and the reason for a
 * fallback.  Strings are owned by f.  out->struct_size must be set.
 * Returns 0, or KILN_ERR_ARG (f or out NULL, i out of range). */
int kiln_function_kernel_info(const kiln_function *f, int i,
                              kiln_kernel_info *out, kiln_err *err);

/* The policy f was compiled with (its source file name), or NULL when an
 * explicit backend overrode the policy.  Owned by f. */
const char *kiln_function_policy_source(const kiln_function *f);

#ifdef __cplusplus
}
#endif
#endif
