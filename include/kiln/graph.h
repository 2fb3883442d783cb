/*
 * graph.h — building kiln graphs from C, parsing and printing the `.kg`
 * text format.  Both routes produce the same IR (docs/ir.md).
 *
 * A graph is a list of nodes in topological order; every builder call
 * appends one node (or none, on error) and returns its id, a kiln_value.
 * Types are inferred and checked as nodes are added, so a builder error
 * names the op and the offending input at once.  Error conventions are
 * those of <kiln/kiln.h>.
 */
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include <kiln/kiln.h>
#include <kiln/io.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A node of a graph: >= 0; -1 signals an error. */
typedef int32_t kiln_value;

/* Dims in declarations: >= 0 static, KILN_DIM_UNKNOWN for `?` (a size
 * known only at run time, independent of every other dim), or a symbol id
 * from kiln_graph_symbol (<= -2; one symbol is one size at run time). */
#define KILN_DIM_UNKNOWN ((int64_t)-1)

/* Create an empty graph named `name` (copied; NULL means "main").
 * Errors: KILN_ERR_NOMEM.  Free with kiln_graph_free. */
kiln_graph *kiln_graph_new(const char *name, kiln_err *err);

/* Free a graph and every value it owns.  NULL is allowed. */
void kiln_graph_free(kiln_graph *g);

/* The graph's name (owned by g). */
const char *kiln_graph_name(const kiln_graph *g);

/* The id of symbolic dim `name` (created on first use; the name is
 * copied).  Always <= -2.  Returns KILN_DIM_UNKNOWN only on allocation
 * failure. */
int64_t kiln_graph_symbol(kiln_graph *g, const char *name);

/* Declare input `name` (passed at every call, in declaration order).
 * `dims` has `rank` entries (may be NULL for rank 0).
 * Errors: KILN_ERR_NAME (name already defined), KILN_ERR_ARG (bad dtype,
 * rank > KILN_MAX_RANK, a dim < -1 that is not a symbol of g). */
kiln_value kiln_graph_input(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, kiln_err *err);

/* Declare shared value `name`: data bound when the function is created
 * (observed data, weights) and rebindable with kiln_function_bind_shared.
 * `value`, when not NULL, is copied; its dtype must equal `dt` and its
 * shape must fit `dims` (static dims equal; a symbol takes the value's
 * size, consistently across the graph).  When `value` is NULL the shared
 * value must be bound before the first call.
 * Errors: as kiln_graph_input, plus KILN_ERR_TYPE / KILN_ERR_SHAPE when
 * `value` does not fit (message names both). */
kiln_value kiln_graph_shared(kiln_graph *g, const char *name, kiln_dtype dt,
                             int rank, const int64_t *dims,
                             const kiln_tensor *value, kiln_err *err);

/* Declare shared value `name` bound to `value`'s data in place: the
 * bytes are borrowed, never copied, by g, by every graph cloned or
 * appended from it and by every function compiled from them
 * (kiln_compile, kiln_model_new): weights read where they lie.  The
 * checks are kiln_graph_shared's; `value` must not be NULL.
 * Lifetime (the caller's duty): value->data must stay valid, and its
 * bytes should not change, until g and every function compiled from g
 * (or from a graph made from g) are freed, or the function's value is
 * replaced by kiln_function_bind_shared/_ref.  Bytes changed in place
 * are seen by the next call of such a function (there is no copy),
 * except values hoisted from them (kiln_compile: computed once; rebind
 * to recompute them).  kiln never writes the bytes.  A value of zero
 * elements is copied (there is nothing to borrow).
 * Thread-safety: as kiln_graph_shared (one thread per graph).
 * Errors: those of kiln_graph_shared, KILN_ERR_ARG (value NULL). */
kiln_value kiln_graph_shared_ref(kiln_graph *g, const char *name,
                                 kiln_dtype dt, int rank,
                                 const int64_t *dims,
                                 const kiln_tensor *value, kiln_err *err);

/* Bind the shared values of g declared without a value to the tensors
 * of the safetensors file `path` (read with kiln_safetensors_open under
 * the default read options, see <kiln/io.h>: F32, F64, I64, I32 and
 * BOOL tensors are used in place from a read-only mapping of the file;
 * F16 and BF16 are converted to f32 once).  A shared value named N takes
 * the tensor whose name, with every byte outside [A-Za-z0-9_] made '_',
 * equals N (`model.layers.0.mlp.up_proj.weight` binds
 * `model_layers_0_mlp_up_proj_weight`).  The mapping lives while any
 * graph or function holding one of its tensors lives (kiln_ir_clone,
 * kiln_compile and kiln_model_new share it, never copy); nothing else of
 * the file is kept.  Shared values that already have a value, and
 * tensors no shared value names, are left alone.
 * Returns 0, or an error code with err set: the reader's errors
 * (KILN_ERR_IO, KILN_ERR_PARSE: "<path>: ..."), KILN_ERR_NAME
 * ("<path>: tensors 'a.b' and 'a_b' both bind shared value 'a_b'";
 * "shared value 'x' has no tensor in <path>; did you mean 'y'?" when an
 * unbound shared value has none), KILN_ERR_TYPE / KILN_ERR_SHAPE
 * ("<path>: tensor 'w': shared 'w': value has shape (3), declared
 * (4)").
 * On error nothing is bound.  Not thread-safe (one thread per graph). */
int kiln_graph_bind_safetensors(kiln_graph *g, const char *path,
                                kiln_err *err);

/* Declare constant `name` of static shape `dims` with `data` (copied,
 * numel * dtype size bytes).
 * Errors: as kiln_graph_input; symbolic dims are KILN_ERR_ARG. */
kiln_value kiln_graph_const(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, const void *data,
                            kiln_err *err);

/* A scalar literal, weakly typed as in NumPy 2 (NEP 50): in an op with a
 * tensor it takes the tensor's dtype category (an int literal with an f32
 * tensor gives f32; a float literal with an i64 tensor gives f64).
 * `kind` is KILN_LIT_INT (value must be integral), KILN_LIT_FLOAT or
 * KILN_LIT_BOOL (value 0 or 1).  Errors: KILN_ERR_ARG. */
typedef enum kiln_literal_kind {
    KILN_LIT_INT = 0,
    KILN_LIT_FLOAT = 1,
    KILN_LIT_BOOL = 2
} kiln_literal_kind;
kiln_value kiln_graph_literal(kiln_graph *g, double value,
                              kiln_literal_kind kind, kiln_err *err);

/* Op attributes, given as key/value pairs (docs/ir.md lists each op's
 * keys).  Keys and arrays are only read during the call. */
typedef enum kiln_attr_kind {
    KILN_ATTR_INT = 0,   /* i */
    KILN_ATTR_FLOAT,     /* f */
    KILN_ATTR_BOOL,      /* i: 0 or 1 */
    KILN_ATTR_INTS,      /* n, ints: a list; in `shape=` a dim may be a
                            symbol id, and -1 in reshape means "infer" */
    KILN_ATTR_DTYPE,     /* i: a kiln_dtype */
    KILN_ATTR_STRING     /* s: NUL-terminated text (check's msg=); the
                            caller's, copied when the node is made */
} kiln_attr_kind;

typedef struct kiln_attr {
    const char *key;
    kiln_attr_kind kind;
    int64_t i;
    double f;
    int n;
    const int64_t *ints;
    /* KILN_ATTR_STRING only (issue 25: the struct grew by this field, so
     * callers built against the older header must be rebuilt) */
    const char *s;
} kiln_attr;

/* Append op `op` (a name from docs/ir.md: "add", "sum", "join", ...) applied
 * to `n_in` values.  Shapes broadcast as in NumPy; dtypes promote as in
 * NumPy 2.  Returns the new node.
 * Errors: KILN_ERR_TYPE (unknown op "..." / wrong number of inputs /
 * unknown or ill-typed attribute / dtype not accepted), KILN_ERR_SHAPE
 * (message names the op, the inputs and both shapes), KILN_ERR_ARG (an
 * input id not in g). */
kiln_value kiln_graph_op(kiln_graph *g, const char *op, int n_in,
                         const kiln_value *in, const kiln_attr *attrs,
                         int n_attrs, kiln_err *err);

/* One entry of a basic index `x[...]`: an integer (drops the axis) or a
 * slice start:stop:step with NumPy semantics (negative values count from
 * the end; an absent bound takes its default). */
typedef enum kiln_index_kind {
    KILN_INDEX_INT = 0,
    KILN_INDEX_SLICE = 1
} kiln_index_kind;

typedef struct kiln_index {
    kiln_index_kind kind;
    int64_t start, stop, step;   /* INT uses start only */
    int has_start, has_stop, has_step;
} kiln_index;

/* x[idx[0], ..., idx[n-1]] (basic indexing; missing trailing entries are
 * full slices).  Errors: KILN_ERR_SHAPE (too many indices, an integer out
 * of bounds of a static dim, step 0), KILN_ERR_ARG. */
kiln_value kiln_graph_subtensor(kiln_graph *g, kiln_value x, int n,
                                const kiln_index *idx, kiln_err *err);

/* set_subtensor(x[idx...], v) (inc = 0) or inc_subtensor(x[idx...], v)
 * (inc = 1): a copy of x with the indexed region replaced by / increased
 * by v, which broadcasts to the region's shape and is cast to x's dtype.
 * Errors: as kiln_graph_subtensor, plus KILN_ERR_SHAPE when v does not
 * broadcast to the region. */
kiln_value kiln_graph_set_subtensor(kiln_graph *g, kiln_value x, int n,
                                    const kiln_index *idx, kiln_value v,
                                    int inc, kiln_err *err);

/* set/inc with an integer index tensor along `axis` (advanced indexing,
 * x[:, idx] for axis 1): inc sums repeated indices; set keeps the last
 * write in index order.  Negative indices count from the end.  Errors: as
 * kiln_graph_set_subtensor, plus KILN_ERR_TYPE when idx is not integer. */
kiln_value kiln_graph_advanced_set_subtensor(kiln_graph *g, kiln_value x,
                                             kiln_value idx, int axis,
                                             kiln_value v, int inc,
                                             kiln_err *err);

/* ---- node bodies (issue 28; docs/kg.md, "Bodies") ----------------------
 *
 * Some ops own a *body*: a whole graph run by the op (scan runs it once
 * per step; an ODE solver would run its right-hand side).  A body is an
 * ordinary graph built with these same calls; its inputs, in declaration
 * order, and its outputs, in declaration order, are its signature, and
 * the op says what each position means.  The op takes a reference to the
 * body: the caller still frees its own handle with kiln_graph_free
 * whenever it likes, and must not change the body after passing it (a
 * body is shared, never copied, by every copy of the node: rewrites,
 * clones, compiled functions).  A body may not read shared values (pass
 * data as an argument); it may hold constants, literals and nodes with
 * bodies of their own.  The body's structure (never its names) enters
 * the cache key of the kernel that runs it, so the same body in two
 * models gives the same key.  An op with several outputs has as its own
 * value its output 0; kiln_graph_result selects any of them.
 */

/* Append op `op` (an op with a body: "scan") over `n_in` values with
 * body `body` and key/value attributes.  Prefer the op's own builder
 * (kiln_graph_scan); this one is the general path the parser uses.
 * Errors: KILN_ERR_TYPE (not an op with a body, bad attributes, the body's
 * signature does not fit: kiln_graph_scan), KILN_ERR_SHAPE, KILN_ERR_ARG
 * (NULL, body == g). */
kiln_value kiln_graph_op_body(kiln_graph *g, const char *op, int n_in,
                              const kiln_value *in, kiln_graph *body,
                              const kiln_attr *attrs, int n_attrs,
                              kiln_err *err);

/* scan (PyTensor's Scan, JAX's lax.scan): for t = 0 .. T-1,
 *   (c_1..c_C, y_1..y_K) = body(c_1..c_C, seq_1[t]..seq_S[t], arg_1..arg_A)
 * starting from c = init.  The body's inputs are the C carries (each of
 * its init's type), one step of each sequence (the sequence's type
 * without its leading axis) and the A args, in that order; its outputs
 * are the C new carries (each exactly the type of its carry input:
 * dtype and every dim, else KILN_ERR_SHAPE naming the body, the carry and
 * both types) and K per-step outputs.  T is the sequences' common leading
 * size; with no sequence, `n_steps` (>= 0; pass -1 otherwise; with
 * sequences it must agree).  Outputs: 0..C-1 the carries after the last
 * step (init when T = 0), C..C+K-1 the per-step outputs stacked, shape
 * (T, ...) (empty when T = 0).  The node's own value is output 0; take
 * the others with kiln_graph_result.  Differentiable (reverse mode through
 * the stored trajectory; docs/ops.md, "scan").  Body dims that are
 * symbols are matched to the scan's input dims; a per-step output dim no
 * input fixes is KILN_ERR_SHAPE.  Errors: as kiln_graph_op_body. */
kiln_value kiln_graph_scan(kiln_graph *g, kiln_graph *body, int n_carry,
                           const kiln_value *init, int n_seq,
                           const kiln_value *seqs, int n_args,
                           const kiln_value *args, int64_t n_steps,
                           kiln_err *err);

/* Output `index` of a node with several outputs (a scan, or an ODE node
 * with sens=2: index 1 is its sensitivities); like XLA's
 * get-tuple-element.  Errors: KILN_ERR_TYPE (v has one output, index out
 * of range), KILN_ERR_ARG. */
kiln_value kiln_graph_result(kiln_graph *g, kiln_value v, int index,
                             kiln_err *err);

/* Flags of kiln_graph_grad. */
#define KILN_GRAD_DISCONNECTED_ZERO 1u  /* a wrt the cost does not depend on
                                           gets a zero gradient, not an
                                           error */

/* Reverse-mode gradients: append to g the nodes that compute
 * d cost / d wrt[i] for each i, and store them in out[i] (n_wrt entries;
 * out[i] has wrt[i]'s type).  `cost` must be a float scalar (rank 0);
 * each wrt must be an input or a shared value of float dtype.  The result
 * is an ordinary graph: it prints, compiles and caches like any other.
 * The rule for each op, with its source, is in docs/ops.md.
 * Errors: KILN_ERR_SHAPE ("grad: the cost must be a scalar, got shape
 * (3)"); KILN_ERR_TYPE ("grad: cannot differentiate with respect to 'k':
 * it has integer dtype i64", "grad: 'a' is not an input or shared
 * value", "grad: the cost does not depend on 'x'" unless
 * KILN_GRAD_DISCONNECTED_ZERO is set, "grad: no gradient through join of
 * symbolic sizes" for the few rules that need static shapes);
 * KILN_ERR_ARG (ids not in g).  On error nothing of g is lost: nodes
 * appended before the error
 * stay, unnamed and unused.
 * kiln_graph_grad may add outputs to a scan or ODE node it
 * differentiates, so that the forward pass runs once: a scan's body
 * gains its incoming carries as trailing per-step outputs (the
 * trajectory; the node's existing outputs keep their indices and
 * values), an ODE node becomes sens=2 (output 0 still the states,
 * output 1 the sensitivities).  The node's own value and type do not
 * change, but an RK45 solve's states now come from the coupled
 * state + sensitivity system and may differ from the state-only solve
 * within the tolerances.  Not thread-safe with other uses of g. */
int kiln_graph_grad(kiln_graph *g, kiln_value cost, int n_wrt,
                    const kiln_value *wrt, unsigned flags, kiln_value *out,
                    kiln_err *err);

/* Give value `v` the name `name` (`NAME = EXPR`).  A value may have one
 * name; names are unique in a graph.  Errors: KILN_ERR_NAME. */
int kiln_graph_set_name(kiln_graph *g, kiln_value v, const char *name,
                        kiln_err *err);

/* Declare output `name` with value `v`.  Output names are unique.
 * Errors: KILN_ERR_NAME, KILN_ERR_ARG. */
int kiln_graph_output(kiln_graph *g, const char *name, kiln_value v,
                      kiln_err *err);

/* Declare parameter `name` of a model (`param NAME: TYPE [lower=L]
 * [upper=U]`; docs/ir.md, "Parameters"; <kiln/model.h>).
 *
 * Without bounds this is kiln_graph_input(g, name, ...) marked as a
 * parameter.  With bounds it appends an input named `name` + "_unc"
 * holding the unconstrained value u, the nodes of Stan's transform of u
 * (model.h lists them), the last of which is the constrained value and is
 * named `name` (what the model computes with), and a scalar node holding
 * the sum of the transform's log-Jacobian over the elements (see
 * kiln_graph_param_info).
 *
 * A bound is a number (`lower`, `upper`; -INFINITY and INFINITY mean
 * none) unless its `*_ref` is >= 0: then it is that scalar value of g, of
 * float or integer dtype: a const or a shared value (read when the model
 * is made), or any value computed before the parameter, such as an
 * expression of earlier parameters and data (garch11's `upper=(1 -
 * alpha1)`; the model evaluates it at each point).  When both are given,
 * the lower bound must be below the upper (checked now for numbers).
 * The constrained value has dtype `dt`: f64 or f32.
 * Errors: those of kiln_graph_input; KILN_ERR_TYPE ("param 'x': dtype i64:
 * a parameter is f64 or f32"; "param 'x': bound 'k' must have a numeric
 * dtype"); KILN_ERR_SHAPE ("param 'x': bound 'v' must be a scalar, got
 * shape (3)"); KILN_ERR_ARG ("param 'x': lower bound 2 is not below the
 * upper bound 1"; a NaN bound; a ref that is not a named const or shared
 * value); KILN_ERR_NAME (name or name_unc already defined).  On error g
 * is as before but for unnamed nodes that nothing uses.
 * Returns the constrained value, or -1. */
kiln_value kiln_graph_param(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, double lower,
                            kiln_value lower_ref, double upper,
                            kiln_value upper_ref, kiln_err *err);

/* Stan's constraining transforms of a vector or matrix parameter (Stan
 * Reference Manual, "Constraint transforms"; values and log-Jacobians as
 * StanHeaders 2.21's *_constrain.hpp; sum_to_zero as Stan 2.36's
 * isometric one).  The unconstrained sizes: */
typedef enum kiln_param_transform {
    KILN_TRANSFORM_NONE = 0,
    KILN_TRANSFORM_SIMPLEX,              /* f64[K]: K-1 */
    KILN_TRANSFORM_ORDERED,              /* f64[K]: K */
    KILN_TRANSFORM_POSITIVE_ORDERED,     /* f64[K]: K */
    KILN_TRANSFORM_UNIT_VECTOR,          /* f64[K]: K */
    KILN_TRANSFORM_SUM_TO_ZERO,          /* f64[K]: K-1 */
    KILN_TRANSFORM_CHOLESKY_FACTOR_CORR, /* f64[K,K]: K(K-1)/2 */
    KILN_TRANSFORM_CHOLESKY_FACTOR_COV,  /* f64[M,N], M >= N:
                                            N(N+1)/2 + (M-N)N */
    KILN_TRANSFORM_COV_MATRIX,           /* f64[K,K]: K(K+1)/2 */
    KILN_TRANSFORM_CORR_MATRIX           /* f64[K,K]: K(K-1)/2 */
} kiln_param_transform;

/* Declare parameter `name` of dims `dims` constrained by `transform`
 * (`param NAME: TYPE TRANSFORM`): an input `name`_unc holding the
 * unconstrained values (the sizes above; a derived dim `K-1` when K is a
 * symbol), the transform's nodes, the constrained value named
 * `name` and its log-Jacobian (kiln_graph_param_info; none for
 * sum_to_zero).  The vector transforms apply along the last axis of a
 * value of any rank >= 1 (Stan's `array[K] simplex[K]` is f64[K, K]
 * simplex, its input f64[K, K-1]), whose last dim is a static or named
 * size >= 1; the matrix ones take a rank-1 input and static dims (1 to
 * 4096) or one named size K x K (the triangle's indices then computed at
 * run time, the input f64[K*(K-1)/2] or f64[K*(K+1)/2]).  Every node is made from
 * ops with gradients.  Edges: unit_vector at u = 0 is NaN (Stan rejects
 * it); a simplex of size 1 is [1].
 * Errors: KILN_ERR_SHAPE ("param 'theta': a simplex is a vector (rank
 * >= 1: vectors along the last axis), got shape ()"; "param 'L': a cholesky_factor_corr needs dims
 * K x K, static (1 to 4096) or one named size K x K, got (K, J)"), KILN_ERR_TYPE (dtype), KILN_ERR_NAME (name or
 * name_unc defined), KILN_ERR_ARG (an unknown transform).
 * Returns the constrained value, or -1. */
kiln_value kiln_graph_param_transform(kiln_graph *g, const char *name,
                                      kiln_dtype dt, int rank,
                                      const int64_t *dims, int transform,
                                      kiln_err *err);

/* A transform's `.kg` word ("simplex", ...; NULL for none or out of
 * range), and the transform named by name[0..len) (-1: none). */
const char *kiln_param_transform_name(int transform);
int kiln_param_transform_lookup(const char *name, size_t len);

/* Number of parameters of g, and parameter i (0 <= i < n): its name,
 * the unconstrained input, the constrained value, the log-Jacobian node
 * (-1 without bounds).  Any pointer may be NULL.  Returns 0, or
 * KILN_ERR_ARG for i out of range. */
int kiln_graph_n_params(const kiln_graph *g);
int kiln_graph_param_info(const kiln_graph *g, int i, const char **name,
                          kiln_value *unc_input, kiln_value *value,
                          kiln_value *log_jacobian);

/* What an output is to a model (`output tp NAME`, `output gq NAME`). */
typedef enum kiln_output_kind {
    KILN_OUTPUT_PLAIN = 0,        /* an ordinary output */
    KILN_OUTPUT_TP = 1,           /* a transformed parameter */
    KILN_OUTPUT_GQ = 2            /* a generated quantity */
} kiln_output_kind;

/* Mark output `name` as kind `kind`; and read an output's kind (0 for a
 * name that is not an output).  Errors: KILN_ERR_NAME (no such output),
 * KILN_ERR_ARG (bad kind). */
int kiln_graph_set_output_kind(kiln_graph *g, const char *name, int kind,
                               kiln_err *err);
int kiln_graph_output_kind(const kiln_graph *g, const char *name);

/* The value named `name`, or -1. */
kiln_value kiln_graph_lookup(const kiln_graph *g, const char *name);

/* Number of nodes (including inputs, constants and literals). */
int kiln_graph_n_nodes(const kiln_graph *g);

/* Parse `.kg` text.  `filename` is used in messages ("<string>" when
 * NULL) and `base_dir` resolves relative data paths in npy()/csv()
 * sources (the current directory when NULL).
 * Errors: KILN_ERR_PARSE with "file:line:col: message" for syntax errors,
 * and the same prefix on KILN_ERR_TYPE / KILN_ERR_SHAPE / KILN_ERR_NAME /
 * KILN_ERR_IO errors found while building the graph. */
kiln_graph *kiln_parse_string(const char *text, const char *filename,
                              const char *base_dir, kiln_err *err);

/* Parse the file at `path`; data paths are relative to its directory.
 * Errors: KILN_ERR_IO when the file cannot be read, then as
 * kiln_parse_string. */
kiln_graph *kiln_parse_file(const char *path, kiln_err *err);

/* kiln_parse_string and kiln_parse_file with the caller's limits on the
 * data files a model's npy()/csv() sources name: `data` is handed to
 * kiln_npy_read_opts / kiln_csv_read_column_opts (<kiln/io.h>: the size
 * limit, and whether non-regular files such as FIFOs are read).  NULL
 * means the defaults, which kiln_parse_string and kiln_parse_file use.
 * `data` is only read, during the call.  A model cannot change these: it
 * is data, and they are the caller's.  Errors: as kiln_parse_string, the
 * reader's errors (a FIFO refused, a file over the limit) prefixed with
 * "file:line:col: " of the npy/csv word. */
kiln_graph *kiln_parse_string_opts(const char *text, const char *filename,
                                   const char *base_dir,
                                   const kiln_read_options *data,
                                   kiln_err *err);
kiln_graph *kiln_parse_file_opts(const char *path,
                                 const kiln_read_options *data,
                                 kiln_err *err);

/* Print `g` in canonical `.kg` form.  Returns a malloc'd NUL-terminated
 * string the caller frees with free(), or NULL (KILN_ERR_NOMEM).
 * kiln_parse_string(kiln_graph_print(g)) gives the same graph: shared
 * values print with the source they were parsed from (`= csv(...)`,
 * resolved against the same base directory), or without one when they
 * were built with the C API. */
char *kiln_graph_print(const kiln_graph *g, kiln_err *err);

/* ---- Data partitions (issue 30; docs/mpi.md) ----------------------------
 * A part of a graph whose outputs are sums over an observation axis: see
 * kiln_model_new_partition (<kiln/model.h>) for the model's view. */
typedef struct kiln_partition {
    /* the observation axis: a symbol of the graph that sizes data (a
     * shared value), never a parameter; NULL means the axis the graph
     * declares (kiln_graph_partition_axis), an error when it has none */
    const char *axis;
    int part;    /* 0 <= part < nparts */
    int nparts;  /* >= 1 */
} kiln_partition;

/* The observation axis `g` declares (`.kg`: the statement `partition N`
 * in the graph's body; kiln_graph_set_partition_axis), or NULL.  Owned
 * by g. */
const char *kiln_graph_partition_axis(const kiln_graph *g);

/* Declare `axis` (a symbol of g) as g's observation axis (NULL clears);
 * the name is copied.  Errors: KILN_ERR_ARG (g NULL), KILN_ERR_NAME (g
 * has no such symbol), KILN_ERR_NOMEM. */
int kiln_graph_set_partition_axis(kiln_graph *g, const char *axis,
                                  kiln_err *err);

/* A 64-bit digest (XXH3) of the data bound to g's shared values: for each
 * shared value in declaration order, its name, whether it is bound, and
 * the digest of its whole value (dtype, shape, bytes in C order).  A
 * part's values (kiln_graph_partition, data bound after it) count as the
 * whole values they were sliced from (their digest is taken before
 * slicing), and its mask `part0__` as the same value in every part, so
 * every part of a graph bound to the same data gives the same digest,
 * whichever rows it holds; a graph bound to other data (any value, shape
 * or dtype) gives another one (but for XXH3's 2^-64 collisions).  Values
 * bound from text (JSON, csv) count as the numbers read, not the text:
 * whitespace and key order do not matter.  The MPI layer (<kiln/mpi.h>)
 * compares it across ranks.  No copy of the data is made (one pass over
 * the bytes bound; a part's are already digested).  Thread-safe on a g no
 * thread changes.  Errors: KILN_ERR_ARG (g or digest NULL). */
int kiln_graph_data_digest(const kiln_graph *g, uint64_t *digest,
                           kiln_err *err);

/* When g is a part (kiln_graph_partition ran): the axis's name (owned by
 * g), the whole data's size of the axis (*total; -1 until data sized by
 * it is bound) and the part's rows [*begin, *end) of it (0, 0 until
 * then; kiln_model_new_partition says how rows are split).  Else (or g
 * NULL) NULL and 0s.  Any pointer may be NULL.  Thread-safe on a g no
 * thread changes. */
const char *kiln_graph_partition_rows(const kiln_graph *g, int64_t *total,
                                      int64_t *begin, int64_t *end);

/* Rewrite `g` in place into part `p` of itself: afterwards, the sum over
 * the nparts parts of each output (each part run on its own rows of the
 * data) equals the whole graph's output (to rounding).  Terms that do not
 * depend on the axis are kept by part 0 and are zero in the others; an
 * output that does not depend on the axis at all is part 0's value and
 * zero elsewhere (the mask is a bool shared scalar `part0__`, a fresh
 * name, true in part 0 only: every part compiles the same kernels).  The
 * rules (which ops keep rows apart, which add up over parts, what is
 * refused) are docs/mpi.md's "Partitions".  A graph declared with
 * `partition N` keeps it; the part itself is not printed by
 * kiln_graph_print (print the graph before partitioning it).  A function
 * compiled from a part does not slice: kiln_function_bind_shared binds
 * the rows it is given (pass the part's own rows).   Shared values sized by the axis that are already bound
 * are sliced to the part's rows now; those bound later
 * (kiln_json_data_bind_graph, `kiln run --data`) are sliced as they are
 * bound.  Outputs and inputs (non-shared) must not be sized by the axis.
 * Errors: KILN_ERR_ARG (p or g NULL, part out of range, no axis named or
 * declared, called twice), KILN_ERR_NAME (no such symbol; the symbol
 * sizes an input or output), KILN_ERR_TYPE (an output is not a sum over
 * the axis: the message names the first node that mixes observations
 * other than by a sum, and its op).  On error g is unchanged. */
int kiln_graph_partition(kiln_graph *g, const kiln_partition *p,
                         kiln_err *err);

#ifdef __cplusplus
}
#endif
#endif
