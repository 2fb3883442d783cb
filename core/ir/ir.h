/*
 * ir.h — kiln's graph IR, internal to libkiln (prefix kiln_ir_).
 *
 * A graph is an array of nodes in topological order: a node's inputs are
 * always earlier nodes.  Every node has a type: dtype, rank and dims, where
 * a dim is >= 0 when static and <= -2 when symbolic (symbol k is -2-k; an
 * unknown `?` dim is an anonymous symbol with its own id).
 */
#ifndef KILN_CORE_IR_H
#define KILN_CORE_IR_H

#include <kiln/graph.h>
#include <kiln/backend.h>
#include <kiln/io.h>
#include <stdarg.h>

/* Graph-level ops.  The elementwise block maps one-to-one to a scalar
 * opcode (kiln_ir_op_opcode). */
typedef enum kiln_op {
    KILN_OP_INPUT = 0, KILN_OP_SHARED, KILN_OP_CONST, KILN_OP_LITERAL,
    /* elementwise */
    KILN_OP_ADD, KILN_OP_SUB, KILN_OP_MUL, KILN_OP_TRUE_DIV, KILN_OP_NEG,
    KILN_OP_ABS, KILN_OP_EXP, KILN_OP_EXPM1, KILN_OP_LOG, KILN_OP_LOG1P,
    KILN_OP_SQRT, KILN_OP_SQUARE, KILN_OP_POW, KILN_OP_SIGMOID,
    KILN_OP_SOFTPLUS, KILN_OP_TANH, KILN_OP_SIN, KILN_OP_COS, KILN_OP_ERF,
    KILN_OP_ERFC, KILN_OP_GAMMALN, KILN_OP_DIGAMMA, KILN_OP_MAXIMUM,
    KILN_OP_MINIMUM, KILN_OP_WHERE, KILN_OP_EQ, KILN_OP_NE, KILN_OP_LT,
    KILN_OP_LE, KILN_OP_GT, KILN_OP_GE, KILN_OP_AND, KILN_OP_OR,
    KILN_OP_NOT, KILN_OP_CAST,
    /* reductions */
    KILN_OP_SUM, KILN_OP_PROD, KILN_OP_MAX, KILN_OP_MIN, KILN_OP_MEAN,
    KILN_OP_LOGSUMEXP,
    /* shape */
    KILN_OP_RESHAPE, KILN_OP_TRANSPOSE, KILN_OP_EXPAND_DIMS,
    KILN_OP_SQUEEZE, KILN_OP_BROADCAST_TO, KILN_OP_ALLOC, KILN_OP_ZEROS,
    KILN_OP_ONES, KILN_OP_JOIN, KILN_OP_STACK,
    /* indexing */
    KILN_OP_SUBTENSOR, KILN_OP_TAKE, KILN_OP_SET_SUBTENSOR,
    KILN_OP_INC_SUBTENSOR, KILN_OP_ADVANCED_SET_SUBTENSOR,
    KILN_OP_ADVANCED_INC_SUBTENSOR,
    /* linear algebra */
    KILN_OP_DOT, KILN_OP_MATMUL,
    /* added with gradients: fill(model, value) broadcasts value to the
     * shape of model (PyTensor's fill/second); trigamma is psi' */
    KILN_OP_FILL, KILN_OP_TRIGAMMA,
    /* issue 25, opscheck: bool reductions (NumPy all/any: nonzero is
     * true), scans along one axis, and the run-time check
     * check(x, c1, ..., msg="...") that returns x and fails the call
     * when an element of a condition is false */
    KILN_OP_ALL, KILN_OP_ANY, KILN_OP_CUMSUM, KILN_OP_CUMPROD,
    KILN_OP_CHECK,
    /* issue 25, elementwise (NumPy / PyTensor / SciPy names; docs/ir.md).
     * isnan, isinf, sign and clip lower to existing opcodes; `round` is
     * round_half_to_even, PyTensor's default. */
    KILN_OP_LOG1MEXP, KILN_OP_ISNAN, KILN_OP_ISINF, KILN_OP_FLOOR,
    KILN_OP_CEIL, KILN_OP_TRUNC, KILN_OP_ROUND_HALF_TO_EVEN,
    KILN_OP_ROUND_HALF_AWAY_FROM_ZERO, KILN_OP_ROUND, KILN_OP_SIGN,
    KILN_OP_MOD, KILN_OP_CLIP, KILN_OP_ERFCX, KILN_OP_ERFINV,
    KILN_OP_ERFCINV, KILN_OP_GAMMAINC, KILN_OP_GAMMAINCC, KILN_OP_BETAINC,
    KILN_OP_GAMMAINC_DA, KILN_OP_BETAINC_DA, KILN_OP_BETAINC_DB,
    /* issue 28, linear algebra (KILN_CAT_LINALG; docs/ops.md "Linear
     * algebra"): matrices are the last two axes, leading axes a batch.
     * cholesky_grad(L, Lbar) is cholesky's reverse rule. */
    KILN_OP_CHOLESKY, KILN_OP_CHOLESKY_GRAD, KILN_OP_SOLVE_TRIANGULAR,
    KILN_OP_SOLVE, KILN_OP_INVERSE, KILN_OP_LOG_DET, KILN_OP_TRIL,
    KILN_OP_TRIU, KILN_OP_DIAG, KILN_OP_DIAGONAL,
    /* issue 28: SciPy's exponentially scaled Bessel I0, I1 */
    KILN_OP_I0E, KILN_OP_I1E,
    /* issue 28: node bodies.  scan(init..., seqs..., args..., body=G,
     * carries=C, seqs=S) runs body graph G once per step; its value is
     * output 0, result(s, index=i) selects output i (docs/ops.md,
     * "scan") */
    KILN_OP_SCAN, KILN_OP_RESULT,
    /* issue 28: ODE solves, body = the right-hand side (docs/ops.md,
     * "ODEs"): ode_rk45(y0, t0, ts, theta, body=f, ...) */
    KILN_OP_ODE_RK45, KILN_OP_ODE_BDF,
    /* issue 28 (second half), linear algebra: det(a) and its sign
     * (NumPy's slogdet(a)[0]: -1, 0 or +1), f64 of rank the batch */
    KILN_OP_DET, KILN_OP_SIGN_DET,
    /* issue 29: top_k(x, k=K, axis=-1): the K largest along the axis,
     * sorted descending (ties to the lower index, NaN largest), as output
     * 0; their indices (i64) as output 1, result(v, index=1).  A host-run
     * kernel (KILN_KERNEL_TOPK, core/runtime/topk.c) */
    KILN_OP_TOP_K,
    KILN_OP_COUNT
} kiln_op;

/* Op categories, for lowering and printing. */
enum {
    KILN_CAT_LEAF = 0,   /* input, shared, const, literal */
    KILN_CAT_ELEMWISE,
    KILN_CAT_REDUCE,
    KILN_CAT_SHAPE,
    KILN_CAT_INDEX,
    KILN_CAT_DOT,
    KILN_CAT_SCAN,       /* cumsum, cumprod (issue 25) */
    KILN_CAT_CHECK,      /* check: x, then its conditions (issue 25) */
    KILN_CAT_LINALG,     /* cholesky, solve, ... (issue 28): LINALG kernels */
    KILN_CAT_RECUR,      /* scan with a body, and result (issue 28) */
    KILN_CAT_ODE,        /* ode_rk45, ode_bdf (issue 28) */
    KILN_CAT_TOPK        /* top_k (issue 29): two outputs, host-run */
};

typedef struct kiln_type {
    kiln_dtype dtype;
    int rank;
    int64_t dims[KILN_MAX_RANK];
} kiln_type;

/* Attributes of a node; which fields an op reads is in ops.c. */
typedef struct kiln_attrs {
    int has_axes;                 /* axis=/axes= given */
    int naxes;
    int64_t axes[KILN_MAX_RANK];  /* reduce axes, transpose perm,
                                     expand_dims/squeeze axes; join, stack
                                     and take keep their axis in axes[0] */
    int keepdims;
    int nshape;                   /* reshape, broadcast_to, alloc, zeros,
                                     ones: dims (>= 0, symbol ids, -1 in
                                     reshape = infer) */
    int64_t shape[KILN_MAX_RANK];
    int dtype;                    /* cast, zeros, ones: kiln_dtype; -1 unset */
    int nidx;                     /* subtensor, set/inc_subtensor */
    kiln_index idx[KILN_MAX_RANK];
    int linalg;                   /* solve_triangular: bit 0 lower=true,
                                     bit 1 trans=true; cholesky: bit 2
                                     nan_on_error=true (issue 28) */
    const char *msg;              /* check: its message, interned
                                     (kiln_ir_intern: equal texts are one
                                     pointer, never freed); NULL unset */
    /* issue 28, node bodies.  `body` is the node's subgraph (scan, and
     * later ops with bodies such as an ODE's right-hand side): an
     * immutable graph shared by reference count between every copy of
     * these attributes (kiln_ir_node_set_attrs takes a reference,
     * kiln_ir_node_drop_attrs drops it), so a node owns its body and the
     * body goes with the last node holding it.  NULL: none. */
    kiln_graph *body;
    int n_carry, n_seq;           /* scan: carried values, sequences (the
                                     remaining inputs are args) */
    int64_t n_steps;              /* scan: steps when there is no sequence
                                     (attribute n_steps=), else -1 */
    int index;                    /* result: which output (>= 0); top_k:
                                     k (attribute k=, >= 0) */
    /* ode_rk45, ode_bdf: tolerances and steps (Stan's defaults unless
     * given), and sens: 0 the states Y [T, N]; 1 (graphs printed before
     * issue 28's second half) the sensitivities S [T, N, N+P] instead;
     * 2 (what the gradient sets on the node it differentiates) Y as
     * output 0 and S as output 1, result(z, index=1), from one solve */
    double rtol, atol;
    int64_t max_steps;
    int sens;
} kiln_attrs;

/* A refcounted owner of borrowed data (issue 29, "weights are
 * borrowed"): a node whose `blob` is not NULL does not own its `data`,
 * the blob does.  kiln_ir_clone and kiln_ir_append copy the data pointer
 * and take a reference; freeing the node drops one; the last reference
 * calls release(ctx) (NULL: a caller's buffer the caller keeps alive,
 * kiln_graph_shared_ref) and frees the blob.  Thread-safe (atomic). */
typedef struct kiln_blob {
    int refs;
    void (*release)(void *ctx);
    void *ctx;
} kiln_blob;

/* A new blob holding one reference; NULL when out of memory (release is
 * not called then). */
kiln_blob *kiln_blob_new(void (*release)(void *ctx), void *ctx);
/* Take a reference (b may be NULL); returns b. */
kiln_blob *kiln_blob_ref(kiln_blob *b);
/* Drop a reference (b may be NULL); the last one releases. */
void kiln_blob_unref(kiln_blob *b);

/* Bind shared value v (declared without a value) to `value`'s data in
 * place, owned by blob b (a reference is taken; b NULL: the caller's
 * buffer, see kiln_graph_shared_ref).  Checks and errors as
 * kiln_ir_bind_shared. */
int kiln_ir_bind_shared_ref(kiln_graph *g, kiln_value v,
                            const kiln_tensor *value, kiln_blob *b,
                            kiln_err *err);

typedef struct kiln_node {
    int op;                       /* kiln_op */
    kiln_type type;
    int weak;                     /* weakly typed (a literal, or computed
                                     from literals only) */
    int n_in;
    kiln_value *in;               /* n_in earlier nodes (owned) */
    /* Never NULL: &kiln_ir_no_attrs (shared, not owned) when the op has
     * none set, as most nodes, else an owned copy.  Out of line because
     * kiln_attrs is ~0.5 KB and a gradient graph has 10^5 nodes, most
     * elementwise (kiln_ir_node_set_attrs, kiln_ir_node_drop_attrs). */
    const kiln_attrs *attrs;
    double value;                 /* LITERAL: its value */
    int lit_kind;                 /* LITERAL: kiln_literal_kind */
    char *name;                   /* owned; NULL when unnamed */
    /* CONST and SHARED: the value (owned, C order) and its concrete
     * shape; data is NULL for a shared value not bound yet.  With
     * `blob` set, data is borrowed (read only: never written, freed by
     * the blob's release) instead of owned. */
    void *data;
    kiln_blob *blob;
    size_t nbytes;
    int64_t vshape[KILN_MAX_RANK];
    char *source;                 /* SHARED: source as written
                                     (`csv("f.csv", "c")`), or NULL */
    int promoted;                 /* SHARED made from a large constant by
                                     constant promotion (core/rewrite):
                                     bound at creation, not a shared value
                                     the caller sees or binds */
    int hoisted;                  /* SHARED made by hoisting (core/rewrite/
                                     hoist.c): 1 + the index of the prep
                                     program's output computing it, else 0;
                                     also `promoted` (hidden) */
    int param;                    /* 1 + the index of the parameter whose
                                     declaration made this node (its
                                     input, transform and log-Jacobian:
                                     printed as one `param` line), else 0 */
    int line;                     /* the .kg line of the statement that
                                     made it (set by the parser), 0 for
                                     nodes made otherwise (the builder
                                     API, rewrites, gradients) */
    /* SHARED bound to part of a whole value (issue 30: a part's rows):
     * has_wdigest 1 and wdigest the whole value's digest, taken before
     * slicing (kiln_ir_part_value_digest), for kiln_graph_data_digest */
    int has_wdigest;
    uint64_t wdigest;
    /* SHARED read as a part's rows by the .kg parser (kiln_read_options'
     * part fields; docs/mpi.md "Reading a part's rows"): read_part 1 and
     * read_total the whole's size along the axis (g->read_sym) */
    int read_part;
    int64_t read_total;
} kiln_node;

typedef struct kiln_output {
    char *name;
    kiln_value value;
    int kind;                     /* kiln_output_kind */
} kiln_output;

/* A parameter (kiln_graph_param): the unconstrained input, the
 * constrained value, the sum of the log-Jacobian (-1: none, no bounds)
 * and the bounds: a named scalar node (lower_ref/upper_ref >= 0) or a
 * number (lower/upper; -inf / +inf when absent). */
typedef struct kiln_param_rec {
    char *name;
    kiln_value unc, value, logjac;
    kiln_value lower_ref, upper_ref;
    double lower, upper;
    int transform;              /* kiln_param_transform; 0: bounds only */
} kiln_param_rec;

/* What kiln_graph_grad made: result = d cost / d wrt.  Kept so that tools
 * (kiln run --check-grad, the sampler callback) know which output is the
 * gradient of which input.  Not printed: a printed graph keeps the
 * gradient nodes but not this record. */
typedef struct kiln_grad_rec {
    kiln_value cost, wrt, result;
} kiln_grad_rec;

struct kiln_graph {
    char *name;
    kiln_node *nodes;
    int n_nodes, cap_nodes;
    kiln_output *outputs;
    int n_outputs, cap_outputs;
    char **symbols;               /* symbol k's name; NULL = anonymous `?` */
    int n_symbols, cap_symbols;
    kiln_grad_rec *grads;         /* gradients made by kiln_graph_grad */
    int n_grads, cap_grads;
    kiln_param_rec *params;       /* parameters, in declaration order */
    int n_params, cap_params;
    /* name -> node map (open addressing; see ir.c) */
    int32_t *map;
    int map_cap;
    /* a body (issue 28): references held besides the first owner's;
     * kiln_graph_free drops one while it is > 0 (atomic) */
    int body_refs;
    /* issue 30, data partitions (core/model/partition.c): the declared
     * observation axis (a symbol's name, owned; NULL: none), and once
     * kiln_graph_partition ran, the part: the axis symbol's index, part
     * part_k of part_n (part_n 0: not a part) and the whole data's rows
     * along the axis (-1 until data sized by it is bound) */
    char *part_axis;
    int part_sym, part_k, part_n;
    int64_t part_total;
    /* data read as a part's rows by the parser: part read_k of read_n
     * (read_n 0: none) along symbol read_sym */
    int read_k, read_n, read_sym;
};

/* Take a reference to body b (NULL allowed); returns b.  A body is
 * immutable once a node holds it.  Thread-safe. */
kiln_graph *kiln_ir_body_ref(kiln_graph *b);

/* The attributes of a node with none set (all defaults: dtype -1, no
 * axes, shape or indices).  Shared by every such node, never freed. */
extern const kiln_attrs kiln_ir_no_attrs;

/* 1 when *a sets nothing (equal to kiln_ir_no_attrs in every field an op
 * reads). */
int kiln_ir_attrs_empty(const kiln_attrs *a);

/* Give node n a copy of *a (NULL or empty: &kiln_ir_no_attrs), dropping
 * what it had.  Returns 0, or KILN_ERR_NOMEM with n unchanged. */
int kiln_ir_node_set_attrs(kiln_node *n, const kiln_attrs *a);

/* The one copy of text s (a NUL-terminated string) that lives until the
 * process ends: equal texts give the same pointer, so attributes that
 * hold one copy by value and compare by pointer.  Thread-safe; NULL when
 * out of memory. */
const char *kiln_ir_intern(const char *s);

/* Free n's attributes when owned; n->attrs becomes &kiln_ir_no_attrs. */
void kiln_ir_node_drop_attrs(kiln_node *n);

/* Symbol id <-> index. */
#define KILN_SYM_ID(k) ((int64_t)(-2 - (int64_t)(k)))
#define KILN_SYM_INDEX(d) ((int)(-2 - (d)))
#define KILN_DIM_IS_SYM(d) ((d) <= -2)

/* ---- errors ------------------------------------------------------- */

/* Give shared value v, declared without a value, the value `value` (a
 * copy), with the checks kiln_graph_shared makes: the dtype, the declared
 * dims, and every symbol the same size as in the shared values already
 * bound.  Returns 0, or KILN_ERR_ARG (v is not an unbound shared value),
 * KILN_ERR_TYPE / KILN_ERR_SHAPE (message as kiln_graph_shared's),
 * KILN_ERR_NOMEM.  (kiln run --data, core/front/json.c) */
int kiln_ir_bind_shared(kiln_graph *g, kiln_value v, const kiln_tensor *value,
                        kiln_err *err);

/* Set the source line of nodes from..n_nodes-1 that have none (the
 * parser, after each statement). */
void kiln_ir_stamp_lines(kiln_graph *g, int from, int line);

/* The tN numbering kiln_graph_print gives g's unnamed nodes: a new array
 * of n_nodes entries, N or -1 (named, or a literal printed inline);
 * NULL when out of memory.  The caller frees it (core/front/print.c). */
int *kiln_graph_temp_names(const kiln_graph *g);

/* Fill err (if not NULL) with code and a printf-style message; returns
 * code.  Used everywhere in the core. */
int kiln_seterr(kiln_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix err->message with a printf-style prefix (e.g. "file:3:5: "). */
void kiln_err_prefix(kiln_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the op registry (ops.c) -------------------------------------- */

typedef struct kiln_op_info {
    const char *name;
    int category;            /* KILN_CAT_* */
    int min_in, max_in;      /* max_in -1: variadic */
    int opcode;              /* elementwise: kiln_opcode; else -1 */
} kiln_op_info;

/* Info for op `op`; NULL when out of range. */
const kiln_op_info *kiln_ir_op_info(int op);

/* The op named `name`, or -1. */
int kiln_ir_op_lookup(const char *name);

/* "; did you mean 'exp'?" naming the op or composite (normal_lpdf, ...)
 * closest to the unknown op `name` (len bytes; core/support/suggest.h), or ""
 * when none is close.  The text is in thread-local storage, valid until
 * the thread's next call.  For the unknown-op errors of the parser and
 * kiln_graph_op.  Defined in composite.c, which knows both lists. */
const char *kiln_ir_op_hint(const char *name, size_t len);

/* Add a node of primitive op o (kiln_ir_op_lookup(op) >= 0; op is the
 * name the caller wrote, for messages) over in with the key/value
 * attributes: kiln_graph_op once it has found no composite named op
 * (composite.c).  Returns the node, or -1 with *err set. */
kiln_value kiln_ir_graph_op(kiln_graph *g, int o, const char *op, int n_in,
                           const kiln_value *in, const kiln_attr *attrs,
                           int n_attrs, kiln_err *err);

/* Validate the key/value attributes of op `op` into *out (unset fields
 * take their defaults: dtype -1, no axes, keepdims 0).  Errors:
 * KILN_ERR_TYPE ("sum: unknown attribute 'axs'", "cast: attribute 'dtype'
 * must be a dtype"). */
int kiln_ir_parse_attrs(int op, const kiln_attr *attrs, int n_attrs,
                        kiln_attrs *out, kiln_err *err);

/* Shape context: at build time `g` is set (fresh symbols may be created)
 * and symvals is NULL; at run time `g` is NULL and symvals gives each
 * symbol's size, so every dim is concrete. */
typedef struct kiln_shape_ctx {
    kiln_graph *g;
    const int64_t *symvals;
} kiln_shape_ctx;

/* Infer the type of op `op` with `attrs` over inputs of types `in` (n_in
 * of them; `in_weak` may be NULL).  Checks arity, dtypes, attributes and
 * shapes.  Returns 0 and fills *out (and *out_weak when not NULL), or an
 * error code.  Messages name the op and shapes ("add: cannot broadcast
 * shapes (3) and (4)"); callers prefix node or source context. */
int kiln_ir_infer(const kiln_shape_ctx *ctx, int op, const kiln_attrs *attrs,
                  int n_in, const kiln_type *in, const int *in_weak,
                  kiln_type *out, int *out_weak, kiln_err *err);

/* ---- node bodies (recur.c, issue 28) ------------------------------- */

/* The type of output `which` of a scan with attributes *a over inputs of
 * types in[0..n_in-1] (carries, then sequences, then args), checked
 * against a->body: body inputs in declaration order are the carries, one
 * step of each sequence (its leading axis dropped) and the args, with
 * equal dtypes and ranks and consistent dims; body outputs are the new
 * carries (each exactly its input's type) then the per-step outputs,
 * stacked along a new leading axis of the step count T (the sequences'
 * common leading size, or a->n_steps).  Outputs 0..C-1 are the final
 * carries, C.. the stacked ones.  `which` = -1 checks only.  Errors
 * (KILN_ERR_TYPE, KILN_ERR_SHAPE) name the body, its value and both
 * types ("scan: body 'step' changes carry 'h' from f64[3] to f64[4]"). */
int kiln_ir_scan_types(const kiln_shape_ctx *ctx, const kiln_attrs *a,
                       int n_in, const kiln_type *in, int which,
                       kiln_type *out, kiln_err *err);

/* Append a node of op `op` with attributes *attrs (a body in it gets a
 * reference) over `in`, its type inferred: the builders' common path.
 * Returns the node or -1 with *err set. */
kiln_value kiln_ir_build(kiln_graph *g, int op, int n_in,
                         const kiln_value *in, kiln_attrs *attrs,
                         kiln_err *err);

/* The type of output `which` of top_k(x, k=, axis=) with attributes *a
 * over x's type: 0 the values (x's dtype, x's shape with k along the
 * axis), 1 the indices (i64, the same shape).  Errors: x not f32/f64,
 * rank 0, axis out of range, k > the axis's (static) length, naming
 * both (KILN_ERR_TYPE / KILN_ERR_SHAPE).  (ops.c) */
int kiln_ir_topk_type(const kiln_shape_ctx *ctx, const kiln_attrs *a,
                      const kiln_type *x, int which, kiln_type *out,
                      kiln_err *err);

/* The number of outputs of a scan (its body's output count). */
int kiln_ir_scan_n_out(const kiln_attrs *a);

/* The number of outputs of a node of op `op` with attributes *a: a
 * scan's body's output count, 2 for an ODE with sens = 2 (Y, then S)
 * and for top_k (values, then indices), else 1. */
int kiln_ir_n_out(int op, const kiln_attrs *a);

/* Replace the body of node v of g (a scan or an ODE): its attributes are
 * copied with `body` (which gets a reference; the caller keeps its own),
 * the old body loses the node's reference.  The node's type is not
 * re-inferred: the caller keeps output 0's type (the gradient adds
 * outputs after the old ones, core/ir/grad.c).  Returns 0, or
 * KILN_ERR_NOMEM / KILN_ERR_ARG (no such node) with *err set. */
int kiln_ir_node_set_body(kiln_graph *g, kiln_value v, kiln_graph *body,
                          kiln_err *err);

/* The inputs of body b in declaration order (INPUT nodes): fills ids
 * (when not NULL, room for max) and returns their count. */
int kiln_ir_body_inputs(const kiln_graph *b, kiln_value *ids, int max);

/* Canonical bytes of graph g's structure for cache keys (docs/cache.md):
 * ops, types (symbols by index), attributes, inputs, literal and constant
 * values, outputs by position; no names.  Appended to *buf (realloc'd,
 * the length and capacity updated).  Same body, same bytes, in any model.  Returns 0 or
 * KILN_ERR_NOMEM. */
int kiln_ir_graph_canon(const kiln_graph *g, unsigned char **buf,
                        size_t *len, size_t *cap);

/* NumPy 2 promotion of two dtypes, with weak (literal) flags. */
kiln_dtype kiln_ir_promote(kiln_dtype a, int a_weak, kiln_dtype b,
                           int b_weak);

/* The dtype an elementwise op computes in, given its (promoted) input
 * dtype: float ops send ints and bool to f64; arithmetic sends bool to
 * i64; logic works on bool. */
kiln_dtype kiln_ir_compute_dtype(int op, kiln_dtype promoted);

/* Start of a slice on an axis of size n (NumPy semantics); *len gets the
 * number of elements it selects. */
int64_t kiln_ir_slice_start(int64_t n, const kiln_index *ix, int64_t *len);

/* A new anonymous symbol (an unknown dim) of g; KILN_DIM_UNKNOWN when
 * out of memory.  (ops.c) */
int64_t kiln_ir_fresh_symbol(kiln_graph *g);

/* ---- graph helpers (ir.c) ----------------------------------------- */

/* Append a node; takes ownership of nothing (copies `in`, the name, data,
 * source and attrs; proto->attrs NULL means none).  Returns its id or -1
 * (KILN_ERR_NOMEM; KILN_ERR_ARG for a bad op or input; KILN_ERR_NAME for
 * a duplicate name). */
/* Drop the unnamed nodes at the end of g down to n nodes (undoing a
 * composite op's partial expansion; composite.c). */
void kiln_ir_truncate(kiln_graph *g, int n);

kiln_value kiln_ir_append(kiln_graph *g, const kiln_node *proto,
                          kiln_err *err);

/* Format a type's shape as "(3, n, ?)" into buf. */
const char *kiln_ir_shape_str(const kiln_graph *g, int rank,
                              const int64_t *dims, char *buf, size_t size);

/* Format a type as "f64[3, n]" (or "f64" for rank 0) into buf. */
const char *kiln_ir_type_str(const kiln_graph *g, const kiln_type *t,
                             char *buf, size_t size);

/* ---- derived dims (dimexpr.c) ------------------------------------- */

/* 1 when symbol name `name` is an expression (has + - * / or parens). */
int kiln_ir_dim_is_expr(const char *name);

/* Check the dim expression text[0..n) (integers, names, + - * /, parens)
 * and write its canonical form (spaces dropped) into canon (cap bytes,
 * NUL-terminated when it fits; canon may be NULL).  Returns the canonical
 * length, or 0 for a syntax error. */
size_t kiln_ir_dimexpr_canon(const char *text, size_t n, char *canon,
                             size_t cap);

/* Call each(name, len, arg) for every name in canonical expression
 * `expr`, in order; stops at and returns the first non-zero result. */
int kiln_ir_dimexpr_names(const char *expr,
                          int (*each)(const char *name, size_t len,
                                      void *arg),
                          void *arg);

/* Size g's derived symbols in vals (n_symbols entries, -1 = unknown):
 * from their names' sizes, or a name's size from the derived one's when
 * it is the expression's only unknown.  Errors: KILN_ERR_SHAPE ("dim
 * 'K-1' is 4, but the sizes of its names make it 2"; "dim 'K*(K-1)/2'
 * is 4, which no size of 'K' gives"; a negative or inexact value).
 * *which (when not NULL) gets the derived symbol the error is about. */
int kiln_ir_symbols_derive(const kiln_graph *g, int64_t *vals, int *which,
                           kiln_err *err);

/* 1 when d is a symbol id of g. */
int kiln_ir_is_symbol(const kiln_graph *g, int64_t d);

/* A dim as text: "3", the symbol's name, or "?". */
const char *kiln_ir_dim_str(const kiln_graph *g, int64_t d, char *buf,
                            size_t size);

/* Give c (a new graph with no symbols) copies of g's symbols, same ids.
 * 0, or KILN_ERR_NOMEM (c keeps what was copied, freed with it). */
int kiln_ir_copy_symbols(kiln_graph *c, const kiln_graph *g);

/* Deep-copy a graph (for kiln_compile, which keeps its own). */
kiln_graph *kiln_ir_clone(const kiln_graph *g, kiln_err *err);

/* The Jacobian graph of an ODE right-hand side (core/ir/ode.c, issue
 * 28).  `body` has the inputs (t: f64 scalar, y: f64[N], theta: f64[P]),
 * in that order, and one output dy: f64[N]; N >= 1 and P >= 0 static.
 * Returns a new graph (caller frees) with the same inputs and one output
 * `jac`: f64[N, N+P], row i = [d dy_i / d y, d dy_i / d theta], built by
 * N reverse passes of kiln_graph_grad over a copy of the body (a value the
 * body does not use gets zeros); when the body reads y and theta only as
 * y[k], theta[k], with respect to those scalar reads (no scatter of their
 * adjoints into vectors; same values).  Errors: KILN_ERR_TYPE (the signature),
 * KILN_ERR_SHAPE (sizes not static), those of kiln_graph_grad (an op
 * without a gradient), KILN_ERR_NOMEM. */
kiln_graph *kiln_ir_ode_jacobian(const kiln_graph *body, kiln_err *err);

/* kiln_ir_ode_jacobian's graph with the body's output dy: f64[N] kept as
 * output 0 and `jac` as output 1, so one evaluation gives f and its
 * Jacobian at one (t, y, theta) (the reverse passes reuse the forward
 * nodes).  Same arguments, ownership and errors. */
kiln_graph *kiln_ir_ode_rhs_jacobian(const kiln_graph *body, kiln_err *err);

/* The type of an ode_rk45 / ode_bdf node (op) with attributes *a over
 * inputs y0 [N], t0 (scalar), ts [T], theta [P] (all f64), checked
 * against a->body (t: f64, y: f64[N], theta: f64[P]) -> dy: f64[N]:
 * f64[T, N], or with a->sens f64[T, N, N+P].  Errors (KILN_ERR_TYPE,
 * KILN_ERR_SHAPE) name the op, the value and both types. */
int kiln_ir_ode_type(const kiln_shape_ctx *ctx, int op, const kiln_attrs *a,
                     int n_in, const kiln_type *in, kiln_type *out,
                     kiln_err *err);

/* The type of output `which` of that node: 0 as kiln_ir_ode_type; with
 * a->sens == 2 the node has two outputs, Y f64[T, N] (0) and S f64[T, N,
 * N+P] (1, read as result(z, index=1)).  A `which` the node does not have
 * is KILN_ERR_TYPE. */
int kiln_ir_ode_types(const kiln_shape_ctx *ctx, int op, const kiln_attrs *a,
                      int n_in, const kiln_type *in, int which,
                      kiln_type *out, kiln_err *err);

/* Rebuild g's name map from its nodes and outputs, after a caller (the
 * rewrite passes, core/rewrite) filled the arrays directly.  Names must be
 * unique.  Errors: KILN_ERR_NOMEM. */
int kiln_ir_reindex(kiln_graph *g, kiln_err *err);

/* ---- data partitions (issue 30): core/ir/part.c, and the rewrite in
 * core/model/partition.c ------------------------------------------------ */

/* The first dim of t that is symbol sym, or -1. */
int kiln_ir_part_axis_pos(const kiln_type *t, int sym);

/* 1 when node n of g is the axis's size read as a value: a shared
 * integer scalar (i64, i32) named like symbol sym (Stan's `int N`). */
int kiln_ir_part_is_count(const kiln_graph *g, const kiln_node *n, int sym);

/* Rows [b, e) along dim k of `value` (a whole value of shared n) into
 * *out, a copy with out->data malloc'd.  0 or KILN_ERR_NOMEM. */
int kiln_ir_part_slice_value(const kiln_graph *g, const kiln_node *n, int k,
                             const kiln_tensor *value, int64_t b, int64_t e,
                             kiln_tensor *out, kiln_err *err);

/* Rows [*begin, *end) of part `part` of `nparts` of `total` rows: with
 * q = floor(total / nparts) and r = total mod nparts, part p has q rows,
 * plus one when p < r, from q p + min(p, r): part 0 has rows whenever
 * total >= 1, and the empty parts (nparts > total) are the last ones. */
void kiln_ir_part_rows(int64_t total, int part, int nparts, int64_t *begin,
                       int64_t *end);

/* The index of the axis symbol p names (p->axis, else g's declared
 * axis) in *sym.  Errors: KILN_ERR_ARG (NULL, part out of range, no
 * axis), KILN_ERR_NAME (no such symbol). */
int kiln_ir_part_axis(const kiln_graph *g, const kiln_partition *p,
                      int *sym, kiln_err *err);

/* XXH3-64 of a value: its bytes (C order) seeded with the head digest
 * (dtype, rank, shape).  The digest kiln_graph_data_digest keeps of a
 * whole value a part holds rows of; a reader streaming the bytes
 * (kiln_ir_part_npy_read) computes the same. */
uint64_t kiln_ir_part_value_digest(const kiln_tensor *value);
uint64_t kiln_ir_part_head_digest(const kiln_tensor *value);

/* 0 when g's data was read whole, or as part `part` of `nparts` along
 * symbol sym (the .kg parser's kiln_read_options.part_*); else
 * KILN_ERR_ARG saying which part it was read as. */
int kiln_ir_part_read_check(const kiln_graph *g, int sym, int part,
                            int nparts, kiln_err *err);

/* Read part `part` of `nparts` of the .npy file `path` (read options
 * `opt`): the rows [b, e) kiln_ir_part_rows gives along dim `dim` into
 * *out (out->data malloc'd), the whole's size along it into *total and
 * the whole value's digest (kiln_ir_part_value_digest) into *digest.
 * The whole file is read in 1 MiB chunks, each digested, and only the
 * part's bytes kept: memory is the part's (npy.c).  Errors: those of
 * kiln_npy_read_opts (each naming the file; a truncated file is
 * KILN_ERR_PARSE "<path>: truncated: ..."), KILN_ERR_SHAPE (no dim
 * `dim`). */
int kiln_ir_part_npy_read(const char *path, const kiln_read_options *opt,
                          int dim, int part, int nparts, kiln_tensor *out,
                          int64_t *total, uint64_t *digest, kiln_err *err);

/* When g is a part (kiln_graph_partition ran) and shared n is sized by
 * its axis (or is the axis's size as an integer scalar), the part's rows
 * of the whole `value` into *out (out->data malloc'd, the caller frees);
 * else out->data = NULL.  Records the whole's row count in g.  Errors:
 * KILN_ERR_SHAPE (rows differ from the data bound before),
 * KILN_ERR_NOMEM.  (ir.c's bind_shared, for data bound after the
 * partition) */
int kiln_ir_part_bind_slice(kiln_graph *g, const kiln_node *n,
                            const kiln_tensor *value, kiln_tensor *out,
                            kiln_err *err);

/* Rewrite g into part `part` of `nparts` over axis symbol `sym`
 * (kiln_graph_partition's contract); slice = 0 leaves bound data as it
 * is (already sliced: the model's density graph).  On error g is
 * unchanged. */
int kiln_ir_part_rewrite(kiln_graph *g, int sym, int part, int nparts,
                         int slice, kiln_err *err);

/* Slice every bound shared value of g sized by axis `sym` (and the
 * axis's size as an integer scalar) to part `part` of `nparts` of
 * `total` rows in place, and mark g a part (core/model/partition.c, for
 * the model's copy of the graph).  Errors: KILN_ERR_SHAPE (a
 * value without `total` rows), KILN_ERR_NOMEM (g partly sliced: the
 * model discards it). */
int kiln_ir_part_slice(kiln_graph *g, int sym, int part, int nparts,
                       int64_t total, kiln_err *err);

/* 1 when value v of g depends on axis `sym` (not the same in every part:
 * per-row, a sum over it, or refused), 0 when not, -1 on error. */
int kiln_ir_part_depends(const kiln_graph *g, int sym, kiln_value v,
                         kiln_err *err);

#endif
