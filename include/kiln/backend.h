/*
 * backend.h — the kiln backend plugin ABI, version 1.
 *
 * This header is the whole contract between kiln (the host) and a backend
 * plugin.  docs/plugin-abi.md explains it with an example.  Rules that hold
 * for every struct below:
 *
 *  - every struct that crosses the boundary starts with `struct_size`
 *    (sizeof as compiled by its writer); structs only grow at the end, and
 *    a reader reads only the fields that lie inside struct_size;
 *  - a NULL function pointer means "not provided";
 *  - memory is freed by the side that allocated it: the host never frees a
 *    plugin pointer with free(), and vice versa;
 *  - a plugin keeps no global state shared with other plugins.
 *
 * Versioning: the host passes its ABI major/minor to the bootstrap symbol.
 * A plugin returns NULL (with a message) when it cannot serve that major;
 * the host accepts a descriptor whose abi_major equals KILN_ABI_MAJOR and
 * whose abi_minor is any value (fields added by newer minors are outside an
 * older host's struct_size reading, or ignored).
 */
#ifndef KILN_BACKEND_H
#define KILN_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_MAJOR 1
#define KILN_ABI_MINOR 11

/* The one frozen bootstrap symbol every plugin exports. */
#define KILN_BACKEND_ENTRY "kiln_backend_entry"

/* ------------------------------------------------------------------ */
/* Scalar programs                                                      */
/* ------------------------------------------------------------------ */

/* Opcodes of a scalar program.  Elementwise ops carry NumPy/PyTensor
 * names; each computes in the dtype of the instruction's operands (the
 * lowering inserts KILN_I_CAST so that all operands of one instruction
 * have one dtype) and produces `dtype` (bool for comparisons and logic).
 * Semantics, with references for the special functions, are in
 * docs/ir.md.  Values are stable: they are part of the ABI and of cache
 * keys; new opcodes are only appended. */
typedef enum kiln_opcode {
    KILN_I_LOAD = 0,   /* a = input index: element of input view a */
    KILN_I_CONST,      /* imm converted to dtype */
    KILN_I_CAST,       /* a converted to dtype (bool: x != 0) */
    KILN_I_ADD, KILN_I_SUB, KILN_I_MUL, KILN_I_TRUE_DIV,
    KILN_I_NEG, KILN_I_ABS,
    KILN_I_EXP, KILN_I_EXPM1, KILN_I_LOG, KILN_I_LOG1P, KILN_I_SQRT,
    KILN_I_SQUARE, KILN_I_POW, KILN_I_SIGMOID, KILN_I_SOFTPLUS,
    KILN_I_TANH, KILN_I_SIN, KILN_I_COS, KILN_I_ERF, KILN_I_ERFC,
    KILN_I_GAMMALN, KILN_I_DIGAMMA,
    KILN_I_MAXIMUM, KILN_I_MINIMUM,
    KILN_I_WHERE,      /* a ? b : c, a is bool */
    KILN_I_EQ, KILN_I_NE, KILN_I_LT, KILN_I_LE, KILN_I_GT, KILN_I_GE,
    KILN_I_AND, KILN_I_OR, KILN_I_NOT,   /* on bool */
    KILN_I_TRIGAMMA,   /* psi'(x); ABI 1.1 */
    /* ABI 1.5, LOOP kernels only: element b of input a, a rank-1 view
     * whose role is KILN_ROLE_TABLE; b is an earlier instruction of dtype
     * i64 or i32; a negative b counts from the end (NumPy's take); out of
     * range is an error (KILN_ERR_RUNTIME, "index I is out of range for
     * a table of N elements").  dtype is the table's. */
    KILN_I_TAKE,
    /* ABI 1.7: float-only functions of the runtime table (version 3);
     * docs/ir.md gives their semantics (NumPy / SciPy's) */
    KILN_I_FLOOR, KILN_I_CEIL, KILN_I_TRUNC,
    KILN_I_RINT,       /* round half to even (NumPy's round) */
    KILN_I_ROUND,      /* round half away from zero (C's round) */
    KILN_I_LOG1MEXP,   /* log(1 - exp(x)) */
    KILN_I_ERFCX, KILN_I_ERFINV, KILN_I_ERFCINV,
    KILN_I_MOD,        /* a mod b, the sign of b (NumPy); ints and floats */
    KILN_I_GAMMAINC,   /* P(a, x), regularised lower incomplete gamma */
    KILN_I_GAMMAINCC,  /* Q(a, x) = 1 - P(a, x) */
    KILN_I_BETAINC,    /* I_x(a, b): operands a, b, c = a, b, x */
    KILN_I_GAMMAINC_DA, /* d/da P(a, x) (operands a, x) */
    KILN_I_BETAINC_DA, /* d/da I_x(a, b) (operands a, b, c = a, b, x) */
    KILN_I_BETAINC_DB, /* d/db I_x(a, b) (operands a, b, c = a, b, x) */
    /* ABI 1.8: a lifted literal.  The value is element `a` of the call's
     * constant block (kiln_call.consts, a >= 0 and < n_consts) converted
     * to dtype (f64 or f32) as a C cast would; `imm` holds the value the
     * host will pass, for messages and text renderings only: code must
     * read the block, never bake imm in, because the cache key hashes
     * only (op, dtype, a) and one artifact serves every value
     * (docs/plugin-abi.md, "Constant blocks").  The block does not change
     * between the calls of one call site, so a prepared call (prepare)
     * may read it once. */
    KILN_I_PARAM,
    /* ABI 1.9: float-only functions of the runtime table (version 5):
     * SciPy's i0e(x) = e^{-|x|} I0(x), i1e(x) = e^{-|x|} I1(x) */
    KILN_I_I0E, KILN_I_I1E,
    KILN_I_COUNT
} kiln_opcode;

/* One instruction.  Operands a, b, c are indices of earlier instructions
 * of the same program (for KILN_I_LOAD, `a` is an input index); unused
 * operands are -1. */
typedef struct kiln_instr {
    uint16_t op;      /* a kiln_opcode */
    uint8_t dtype;    /* result kiln_dtype */
    uint8_t reserved; /* 0 */
    int32_t a, b, c;
    double imm;       /* KILN_I_CONST only (0 elsewhere); converted to the
                         dtype as a C cast would, so integer constants are
                         exact up to 2^53 */
} kiln_instr;

/* ------------------------------------------------------------------ */
/* Kernels                                                              */
/* ------------------------------------------------------------------ */

typedef enum kiln_kernel_kind {
    /* out_k[i] = program(inputs[i]) for every index i of the output
     * shape; inputs arrive as views of the output's rank (broadcast dims
     * have stride 0, and extent equal to the output's).  An output may
     * alias an input element for element (an in-place update: the same
     * data, shape and strides), never a broadcast (stride-0) input. */
    KILN_KERNEL_ELEMWISE = 1,
    /* Iterate over the shape of inputs[0]'s view (all inputs are views of
     * that rank), compute program output 0, and combine it with
     * `reduce_op` into outputs[0], a view of the same rank whose reduced
     * axes have stride 0 and extent equal to the input's.  The kernel
     * initialises the output itself.  ABI 1.4: several outputs (sibling
     * reductions in one pass): program output j (out_refs[j]) combines
     * into outputs[j]; every output reduces the same axes with the same
     * reduce_op (their dtypes may differ).  A plugin that takes one
     * output only refuses the others in `supports`. */
    KILN_KERNEL_REDUCE = 2,
    /* outputs[0] = concatenation of the n_inputs views along `axis`. */
    KILN_KERNEL_JOIN = 3,
    /* outputs[0] = take(inputs[0], inputs[1], axis): inputs[1] is an
     * i64/i32 index tensor; out shape = x[:axis] + idx + x[axis+1:].
     * Negative indices count from the end; out of range is an error. */
    KILN_KERNEL_GATHER = 4,
    /* In place on outputs[0] (already holding x): for every position p of
     * inputs[0] (indices, i64/i32) write (SET) or add (INC) inputs[1]
     * (values, a view broadcast to x[:axis] + idx + x[axis+1:]) at index
     * idx[p] along `axis`.  INC sums repeated indices; SET keeps the last
     * write.  Out of range is an error. */
    KILN_KERNEL_SCATTER = 5,
    /* outputs[0] = inputs[0] @ inputs[1] for 1-D/2-D f32/f64 operands,
     * C-contiguous or (2-D) the transpose of a C-contiguous buffer
     * (strides (1, rows)), through the runtime's CBLAS gemm with its
     * transpose flags.
     * ABI 1.11 (batched matmul): the three views may instead all have
     * one rank r >= 3 (the host promotes a 1-D operand to a [1, k] row
     * or a [k, 1] column, prepends size-1 axes, and hands the output a
     * view with the promoted unit axis): inputs[0] [B..., m, k],
     * inputs[1] [B..., k, n], outputs[0] [B..., m, n], the r - 2 batch
     * axes with the output's extents in all three (stride 0 where an
     * operand is broadcast), each operand's 2-D core with any strides.
     * outputs[0] is written, never read, and does not overlap an input.
     * A plugin runs such a kernel with one call of the runtime table's
     * gemm_batched (version 6: check struct_size), which does per batch
     * index one gemm (k = 0 writes zeros); a plugin that cannot refuses
     * ranks above 2 in `supports`. */
    KILN_KERNEL_DOT = 6,
    /* ABI 1.5: a fused loop.  One pass over an iteration space of rank
     * r; the program runs once per index i and each argument plays the
     * role given in in_roles / out_roles (kiln_role):
     *   input  ITER    a view of rank r, extents the iteration shape's
     *                  (stride 0 where it broadcasts), read by LOAD;
     *   input  TABLE   a rank-1 view of its own extent, read only by
     *                  KILN_I_TAKE (a gather inside the loop);
     *   output ITER    a view of rank r, extents the iteration shape's:
     *                  out[i] = program output j (out_refs[j]);
     *   output REDUCE  a view of rank r, extents the iteration shape's,
     *                  stride 0 on the axes in reduce_axes: initialised
     *                  by the kernel to reduce_op's identity, then
     *                  combined with program output j as a REDUCE kernel
     *                  does (every REDUCE output: one op, one set of
     *                  axes; MEAN divides at the end);
     *   output SCATTER a rank-1 view of its own extent, updated in place
     *                  (it holds its initial values when the call
     *                  starts): out[idx] += program output j, idx the
     *                  value of instruction out_index[j] (i64/i32,
     *                  negative counts from the end, out of range is an
     *                  error); repeated indices sum.
     * The iteration shape is the shape of the first ITER or REDUCE
     * argument, inputs first (there is at least one).  ITER inputs and
     * outputs may alias element for element as in ELEMWISE; a SCATTER or
     * REDUCE output aliases nothing else.  An error (an index out of
     * range) may leave outputs partly written.  Older plugins refuse the
     * kind (an unknown kind), so the host falls back. */
    KILN_KERNEL_LOOP = 7,
    /* ABI 1.7: a scan (cumsum, cumprod).  outputs[0][..., i, ...] =
     * inputs[0][..., 0, ...] OP ... OP inputs[0][..., i, ...] along
     * `axis`, OP the reduce_op (SUM or PROD), in order from index 0; one
     * input and one output view of one shape and one dtype (f64, f32,
     * i64 or i32), no program.  The output aliases nothing.  Older
     * plugins refuse the kind, so the host falls back. */
    KILN_KERNEL_SCAN = 8,
    /* ABI 1.9 (issue 28): a recurrence (scan with a body).  Inputs: the
     * n_carry initial carries, the n_seq sequences (stepped along axis
     * 0), the args; outputs: the final carries, then the per-step
     * outputs stacked along a new axis 0.  The body is the graph whose
     * canonical bytes are body_bytes (core/ir/recur.c,
     * kiln_ir_graph_canon): the key's share of it, not code.
     * Without a program (n_instrs == 0) the host runs the kernel itself,
     * calling the body's compiled function once per step
     * (core/runtime/recur.c); a plugin refuses such a kernel.
     * ABI 1.10, with a program (n_instrs > 0; the pass `recur`,
     * core/lower/recur_prog.c, fuses a body of rank-0 elementwise values
     * into it): carries and args are rank 0, sequences rank 1 [T] (any
     * stride); the outputs are the n_carry rank-0 final carries, then
     * rank-1 [T] stacked outputs.  KILN_I_LOAD a reads carry a's current
     * value (a < n_carry), element t of sequence a (n_carry <= a <
     * n_carry + n_seq) or arg a.  Each step evaluates every out_refs[k]
     * from that step's inputs, then replaces all carries at once
     * (out_refs[0..n_carry)); output k >= n_carry gets element t of
     * out_refs[k].  T = the sequences' shape[0], else the stacked
     * outputs', else n_steps; T = 0 writes the initial carries.  Outputs
     * alias nothing; no TAKE and no PARAM in the program.  The body
     * bytes stay in the key beside the program. */
    KILN_KERNEL_RECUR = 9,
    /* ABI 1.9: dense linear algebra (issue 28).  `reduce_op` holds the
     * kiln_linalg_op; the inputs and outputs are f64 views whose last
     * one or two axes are the vector or matrix (row-major, any strides)
     * and whose leading axes are a batch, the same in every argument.
     * The kernel calls the runtime table's lapack_run (version 5) with
     * its views, which does the work (LAPACK / BLAS) and reports a
     * singular or non-positive-definite matrix as an error.  Older
     * plugins refuse the kind, so the host falls back. */
    KILN_KERNEL_LINALG = 10,
    /* ABI 1.9: an ODE solve (the ops ode_rk45, ode_bdf; docs/ops.md
     * "ODEs"; run by the host's callable, core/runtime/ode.c).  One
     * output: Y (sens=0), or S alone (sens=1, graphs printed before the
     * gradient made sens=2); two (sens=2, the gradient's): Y and S.
     * Inputs y0 [N], t0 (rank 0), ts [T], theta [P], all f64; outputs
     * Y [T, N] = y(ts[i]) for y' = f(t, y, theta), y(t0) = y0, and
     * optionally (two outputs) the sensitivities S [T, N, N+P],
     * S[i, j, k] = d Y[i, j] / d (y0, theta)[k].  f is the node's body:
     * the host compiles it (and its Jacobian) as functions of their own,
     * through the policy and the backends like any graph, and runs the
     * kernel itself (core/runtime/ode.c, through kiln_runtime.ode_solve);
     * `reduce_op` carries the kiln_ode_method, body_bytes the body's
     * canonical bytes then rtol, atol, max_num_steps and sens (the key).
     * Plugins refuse the kind. */
    KILN_KERNEL_ODE = 11,
    /* ABI 1.11 (issue 29): top_k, run by the host (core/runtime/topk.c);
     * plugins refuse the kind.  Input x (f32 or f64, any strides); outputs
     * the k largest along `axis` sorted descending (x's dtype) and their
     * indices (i64), both x's shape with k along the axis; k is
     * `n_steps`.  Ties go to the lower index, NaN is largest (torch.topk's
     * order). */
    KILN_KERNEL_TOPK = 12
} kiln_kernel_kind;

/* The operation of a LINALG kernel (ABI 1.9), in kiln_kernel.reduce_op.
 * Shapes are per batch element: A is [n, n], B and X [n, k], v [n].
 * Values are part of the ABI and of cache keys. */
typedef enum kiln_linalg_op {
    KILN_LINALG_POTRF = 0,     /* L = cholesky(A) (A's lower triangle
                                  read; L's upper triangle zero) */
    KILN_LINALG_POTRF_BWD = 1, /* (L, Lbar) -> Abar, lower triangular
                                  (Murray 2016) */
    KILN_LINALG_TRSM_LN = 2,   /* X = L^-1 B, L lower triangular */
    KILN_LINALG_TRSM_LT = 3,   /* X = L^-T B */
    KILN_LINALG_TRSM_UN = 4,   /* X = U^-1 B, U upper triangular */
    KILN_LINALG_TRSM_UT = 5,   /* X = U^-T B */
    KILN_LINALG_GESV = 6,      /* X = A^-1 B (LU, partial pivoting) */
    KILN_LINALG_GETRI = 7,     /* A^-1 */
    KILN_LINALG_LOGDET = 8,    /* log|det A| (output rank: batch) */
    KILN_LINALG_TRIL = 9,      /* A with the upper triangle zeroed */
    KILN_LINALG_TRIU = 10,     /* A with the lower triangle zeroed */
    KILN_LINALG_DIAG = 11,     /* v[n] -> [n, n], v on the diagonal */
    KILN_LINALG_DIAGONAL = 12, /* A[m, n] -> [min(m, n)] */
    KILN_LINALG_POTRF_NAN = 13 /* POTRF, but a matrix that is not positive
                                  definite gives NaNs, not an error
                                  (PyTensor's on_error="nan") */,
    KILN_LINALG_SIGNDET = 14,  /* ABI 1.10: sign of det A: -1, 0 or +1
                                  (output rank: batch) */
    KILN_LINALG_DET = 15       /* ABI 1.10: det A (output rank: batch) */
} kiln_linalg_op;
#define KILN_LINALG_LAST KILN_LINALG_DET

/* The role of an argument of a LOOP kernel (ABI 1.5). */
typedef enum kiln_role {
    KILN_ROLE_ITER = 0,     /* input or output over the iteration space */
    KILN_ROLE_TABLE = 1,    /* input: rank-1, read by KILN_I_TAKE */
    KILN_ROLE_REDUCE = 2,   /* output: a reduction over reduce_axes */
    KILN_ROLE_SCATTER = 3   /* output: rank-1, out[index] += value */
} kiln_role;

typedef enum kiln_reduce_op {
    KILN_REDUCE_SUM = 0,
    KILN_REDUCE_PROD = 1,
    KILN_REDUCE_MAX = 2,
    KILN_REDUCE_MIN = 3,
    KILN_REDUCE_MEAN = 4   /* sum / (elements reduced into each output) */
} kiln_reduce_op;

typedef enum kiln_scatter_mode {
    KILN_SCATTER_SET = 0,
    KILN_SCATTER_INC = 1
} kiln_scatter_mode;

/* dtype and rank of one argument as the kernel sees it. */
typedef struct kiln_arg_desc {
    uint8_t dtype;   /* kiln_dtype */
    uint8_t rank;    /* 0 .. KILN_MAX_RANK */
    uint8_t reserved[2];
} kiln_arg_desc;

/* A backend-neutral kernel description (host-owned, valid during the
 * call that receives it; a plugin copies what it keeps).  Its size and
 * the size of any code made from it grow linearly with n_inputs: inputs
 * arrive as arrays, never as separate parameters. */
typedef struct kiln_kernel {
    size_t struct_size;
    uint32_t kind;                 /* kiln_kernel_kind */
    uint32_t n_inputs, n_outputs;
    const kiln_arg_desc *inputs;   /* n_inputs entries */
    const kiln_arg_desc *outputs;  /* n_outputs entries */
    /* ELEMWISE, REDUCE: the scalar program and which instruction gives
     * each output (REDUCE: one output). */
    uint32_t n_instrs;
    const kiln_instr *instrs;
    const int32_t *out_refs;       /* n_outputs entries */
    /* REDUCE */
    uint32_t reduce_op;            /* kiln_reduce_op */
    /* JOIN, GATHER, SCATTER: the axis (>= 0) */
    int32_t axis;
    /* SCATTER */
    uint32_t scatter_mode;         /* kiln_scatter_mode */
    /* A short human-readable label ("add", "sum", "join"); for messages. */
    const char *label;
    /* REDUCE: bit i set when axis i of the iteration space is reduced
     * (the output view has stride 0 there).  Part of the description so
     * that a compiler can specialise its loops and a cache key can tell
     * reductions apart. */
    uint32_t reduce_axes;
    /* ABI 1.5, LOOP kernels (NULL elsewhere; a host or plugin reads
     * them only inside struct_size): each argument's kiln_role, and per
     * output the instruction whose value is its scatter index (-1 for
     * outputs that are not SCATTER). */
    const uint8_t *in_roles;       /* n_inputs entries */
    const uint8_t *out_roles;      /* n_outputs entries */
    const int32_t *out_index;      /* n_outputs entries */
    /* ABI 1.9, RECUR kernels (0/NULL elsewhere; read only inside
     * struct_size): carried values and sequences among the inputs, and
     * the body's canonical bytes (host-owned, n_body_bytes long); the
     * step count when there is no sequence (n_steps, else -1) */
    uint32_t n_carry, n_seq;
    int64_t n_steps;
    const uint8_t *body_bytes;
    size_t n_body_bytes;
} kiln_kernel;

/* ------------------------------------------------------------------ */
/* Calling a kernel                                                     */
/* ------------------------------------------------------------------ */

/* A strided view of a buffer.  `data` points at element [0,...,0];
 * strides are in elements and may be 0 (broadcast) or negative. */
typedef struct kiln_view {
    void *data;
    int64_t shape[KILN_MAX_RANK];
    int64_t strides[KILN_MAX_RANK];
    int32_t rank;
    int32_t dtype;
} kiln_view;

/* ABI 1.9 (runtime table version 5): an initial-value problem for the
 * runtime's ODE solvers (kiln_runtime.ode_solve), as the ops ode_rk45 and
 * ode_bdf (docs/ops.md "ODEs") pose it: y' = f(t, y, theta), y(t0) = y0,
 * y an n-vector, theta a p-vector.  A backend compiles the right-hand
 * side (and its Jacobian) of an ode_* node's body and passes them as C
 * functions; the runtime drives SUNDIALS with them.  Host- or
 * caller-owned, read during the ode_solve call only. */
typedef enum kiln_ode_method {
    KILN_ODE_RK45 = 0,   /* explicit Dormand-Prince 5(4) (ARKODE ERKStep) on
                            the state and, when sensitivities are asked
                            for, on the coupled state + sensitivity system
                            under one error control (Stan's ode_rk45) */
    KILN_ODE_BDF = 1     /* variable-order BDF (CVODES) with a dense Newton
                            solver using `jac`, sensitivities staggered
                            (CVodeSensInit1, CV_STAGGERED) (Stan's ode_bdf) */
} kiln_ode_method;

/* f(ctx, t, y, theta, out): writes out[0..m) from y[0..n) and
 * theta[0..p).  For `rhs` m = n: out = f(t, y, theta).  For `jac`
 * m = n*(n+p), row-major: out[i*(n+p) + k] = d f_i / d y_k for k < n and
 * d f_i / d theta_{k-n} for k >= n.  Returns 0, a positive value when
 * the point cannot be evaluated (the solver retries with a smaller step;
 * a non-finite output counts as this), or a negative value for a failure
 * that ends the solve.  Called on the thread that called ode_solve, any
 * number of times, never concurrently for one solve. */
typedef int (*kiln_ode_fn)(void *ctx, double t, const double *y,
                           const double *theta, double *out);

typedef struct kiln_ode_problem {
    size_t struct_size;      /* sizeof(kiln_ode_problem) */
    uint32_t method;         /* kiln_ode_method */
    uint32_t reserved;       /* 0 */
    int64_t n;               /* states, >= 1 */
    int64_t p;               /* parameters, >= 0 */
    double rtol, atol;       /* > 0: the solver's relative and absolute
                                tolerances (also on the sensitivities) */
    int64_t max_num_steps;   /* > 0: steps allowed between two output
                                times (Stan's max_num_steps) */
    const char *label;       /* starts every message, e.g.
                                "ode_bdf 'z'"; NULL: the method's name */
    kiln_ode_fn rhs;         /* required */
    kiln_ode_fn jac;         /* required for sensitivities and for BDF
                                (its Newton matrix); may be NULL for RK45
                                without sensitivities */
    void *ctx;               /* passed to rhs and jac */
    /* ABI 1.10, read only inside struct_size: optional; f and its
     * Jacobian at one (t, y) in one call, dy[0..n) as `rhs` writes it
     * and jac[0..n*(n+p)) as `jac` does; same returns.  NULL: rhs and
     * jac are called separately. */
    int (*rhs_jac)(void *ctx, double t, const double *y,
                   const double *theta, double *dy, double *jac);
} kiln_ode_problem;

/* Functions kernels call instead of resolving symbols themselves, so that
 * the same code works in memory and when loaded from a cache.  The table
 * is host-owned and outlives every call.  Append-only; `version` counts
 * additions. */
typedef struct kiln_runtime {
    size_t struct_size;
    uint32_t version;              /* 6 (1: up to sgemm, 2: trigamma,
                                      3: floor..betainc_db, 4: dgemm_rt,
                                      sgemm_rt, 5: lapack_run, i0e,
                                      i1e, ode_solve, 6: gemm_batched) */
    double (*exp)(double);
    double (*expm1)(double);
    double (*log)(double);
    double (*log1p)(double);
    double (*sqrt)(double);
    double (*pow)(double, double);
    double (*tanh)(double);
    double (*sin)(double);
    double (*cos)(double);
    double (*erf)(double);
    double (*erfc)(double);
    double (*gammaln)(double);     /* log|Gamma(x)|, thread-safe (lgamma_r) */
    double (*digamma)(double);     /* psi(x); see core/runtime/special.c */
    double (*sigmoid)(double);     /* 1/(1+exp(-x)), stable for |x| large */
    double (*softplus)(double);    /* log(1+exp(x)), stable */
    /* CBLAS gemm, row-major: C = alpha*op(A)*op(B) + beta*C.  trans* are
     * 0 (no transpose) or 1 (transpose).  The host's entries call gemv
     * when m or n is 1 (and k > 0), gemm otherwise. */
    void (*dgemm)(int transa, int transb, int64_t m, int64_t n, int64_t k,
                  double alpha, const double *a, int64_t lda,
                  const double *b, int64_t ldb, double beta, double *c,
                  int64_t ldc);
    void (*sgemm)(int transa, int transb, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float beta, float *c, int64_t ldc);
    /* version 2 (ABI 1.1); check struct_size before use */
    double (*trigamma)(double);    /* psi'(x); see core/runtime/special.c */
    /* version 3 (ABI 1.7); check struct_size before use.  Semantics
     * (NumPy / SciPy's, nan and edge cases included) in core/runtime/special.h */
    double (*floor)(double);
    double (*ceil)(double);
    double (*trunc)(double);
    double (*rint)(double);        /* round half to even */
    double (*round)(double);       /* round half away from zero */
    double (*log1mexp)(double);
    double (*erfcx)(double);
    double (*erfinv)(double);
    double (*erfcinv)(double);
    double (*mod)(double, double); /* NumPy's float remainder */
    double (*gammainc)(double a, double x);
    double (*gammaincc)(double a, double x);
    double (*betainc)(double a, double b, double x);
    double (*gammainc_da)(double a, double x);   /* d/da P(a, x) */
    double (*betainc_da)(double a, double b, double x); /* d/da I_x(a,b) */
    double (*betainc_db)(double a, double b, double x); /* d/db I_x(a,b) */
    /* version 4 (ABI 1.8); check struct_size before use.  dgemm / sgemm
     * with the table they were read from passed first (rt: that table,
     * never another): a matrix-vector product (m or n 1) goes to BLAS or
     * to the host's own loop, per shape, as the compiled function's
     * policy says (`blas:` in docs/policy.md; the tables of two functions
     * may differ); other products as dgemm / sgemm.  Call these when
     * present. */
    void (*dgemm_rt)(const struct kiln_runtime *rt, int transa, int transb,
                     int64_t m, int64_t n, int64_t k, double alpha,
                     const double *a, int64_t lda, const double *b,
                     int64_t ldb, double beta, double *c, int64_t ldc);
    void (*sgemm_rt)(const struct kiln_runtime *rt, int transa, int transb,
                     int64_t m, int64_t n, int64_t k, float alpha,
                     const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *c, int64_t ldc);
    /* version 5 (ABI 1.9); check struct_size before use.  Runs a LINALG
     * kernel's operation `op` (kiln_linalg_op) over the call's views
     * (f64, batch axes first; core/runtime/linalg.c, docs/ops.md "Linear
     * algebra"): LAPACK's dpotrf/dtrtrs/dgetrf/dgetrs/dgetri and BLAS.
     * Returns 0, or a kiln_code after writing one line naming the
     * problem (e.g. "not positive definite (leading minor 3 of 5)",
     * "singular matrix (U[2,2] is zero)", "built without LAPACK") into
     * errbuf.  Thread-safe; scratch is on the stack (n <= 22) or a
     * per-thread buffer that only grows (freed at thread exit), so no
     * malloc per call; ABI 1.10 adds SIGNDET and DET. */
    int (*lapack_run)(const struct kiln_runtime *rt, uint32_t op,
                      uint32_t n_inputs, const kiln_view *inputs,
                      uint32_t n_outputs, const kiln_view *outputs,
                      char *errbuf, size_t errbuf_size);
    /* version 5 (ABI 1.9), too: SciPy's exponentially scaled Bessel
     * functions behind the I0E / I1E opcodes */
    double (*i0e)(double);         /* e^{-|x|} I0(x) */
    double (*i1e)(double);         /* e^{-|x|} I1(x) */
    /* version 5 (ABI 1.9), too: ode_solve: solves pb from t0 and writes the state at each of the
     * nts output times ts (t0 < ts[0] <= ts[1] <= ...; equal times
     * repeat the row) into y_out[nts*n] (row-major [nts, n]).  When
     * sens_out is not NULL it also writes the forward sensitivities of
     * those states to z = (y0, theta) into sens_out[nts*n*(n+p)]:
     * sens_out[(i*n + j)*(n+p) + k] = d y_j(ts[i]) / d z_k.  Returns 0,
     * or a kiln_code after writing one line into errbuf (errbuf_size
     * bytes): KILN_ERR_ARG for a bad problem (bad sizes, tolerances,
     * times, a NULL function), KILN_ERR_RUNTIME when the solver fails
     * ("ode_bdf 'z': CVODE failed at t=2.5 (CV_TOO_MUCH_WORK)"), a
     * non-finite y0 or theta, or kiln was built without SUNDIALS,
     * KILN_ERR_NOMEM.  Outputs are unspecified after a failure.
     * Thread-safe: each call has its own SUNDIALS context and memory
     * (allocated and freed within the call). */
    int (*ode_solve)(const kiln_ode_problem *pb, double t0, const double *y0,
                     const double *theta, int64_t nts, const double *ts,
                     double *y_out, double *sens_out, char *errbuf,
                     size_t errbuf_size);
    /* version 6 (ABI 1.11); check struct_size before use.  A batched DOT
     * kernel's whole product (core/runtime/gemm_batched.c): c = a @ b
     * over views of one rank r >= 3 and one dtype (f32 or f64):
     * a [B..., m, k], b [B..., k, n], c [B..., m, n], the batch extents
     * c's in all three (stride 0 broadcasts an operand), every 2-D core
     * with any strides; c does not overlap a or b and is only written.
     * Per batch index one product through this table's dgemm_rt /
     * sgemm_rt (so m = 1 or n = 1 keeps the matrix-vector policy); a
     * core BLAS cannot read in place (no unit stride, or a leading
     * dimension below its extent) is packed into a per-thread scratch
     * buffer that only grows (freed at thread exit: no malloc per call
     * once grown); with m > 1, consecutive batch rows that share b are
     * folded into one taller product; k = 0 writes zeros.  rt is the table the entry
     * was read from.  Returns 0, or a kiln_code after writing one line
     * into errbuf (KILN_ERR_SHAPE: ranks, dtypes or extents that do not
     * fit, both shapes named; KILN_ERR_NOMEM).  Thread-safe. */
    int (*gemm_batched)(const struct kiln_runtime *rt, const kiln_view *a,
                        const kiln_view *b, const kiln_view *c,
                        char *errbuf, size_t errbuf_size);
} kiln_runtime;

/* Arguments of one kernel call (host-owned, valid during the call). */
typedef struct kiln_call {
    size_t struct_size;
    uint32_t n_inputs, n_outputs;
    const kiln_view *inputs;
    const kiln_view *outputs;
    const kiln_runtime *rt;
    char *errbuf;                  /* a message on failure, NUL-terminated */
    size_t errbuf_size;            /* bytes */
    /* ABI 1.8: the kernel's constant block, read by KILN_I_PARAM
     * (host-owned, valid during the call, the same values at every call
     * of one call site).  A plugin reads these fields only inside
     * struct_size; a kernel with PARAM instructions called without them
     * (or with n_consts too small) fails with KILN_ERR_ARG. */
    const double *consts;          /* n_consts entries */
    uint32_t n_consts;
} kiln_call;

/* A loaded kernel: returns 0 (KILN_OK), or a kiln_code after writing a
 * one-line message into call->errbuf (e.g. KILN_ERR_RUNTIME for an index
 * out of bounds).  Called with the kernel's own shapes; a backend may use
 * up to 64 KiB of stack per call.  Reentrant, with or without
 * KILN_BACKEND_THREAD_SAFE: threads calling one function call one
 * callable at once (each with its own views and errbuf), so `state` is
 * read only once loaded (docs/plugin-abi.md section 11). */
typedef int (*kiln_kernel_fn)(void *state, const kiln_call *call);

/* ------------------------------------------------------------------ */
/* The plugin's objects                                                 */
/* ------------------------------------------------------------------ */

/* An error made by the plugin; freed with the plugin's error_free. */
typedef struct kiln_plugin_error {
    size_t struct_size;
    int code;                      /* a kiln_code */
    char *message;                 /* plugin-owned, NUL-terminated */
} kiln_plugin_error;

/* An artifact: what compile produced.  Opaque; the plugin owns it.  When
 * the plugin provides artifact_bytes, the bytes can be stored (the disk
 * cache) and turned back into a callable with load_bytes in another
 * process. */
typedef struct kiln_artifact kiln_artifact;

/* A callable kernel; plugin-owned, freed with callable_free. */
typedef struct kiln_callable {
    size_t struct_size;
    kiln_kernel_fn fn;
    void *state;                   /* passed to fn */
    /* ABI 1.4, optional (the host checks struct_size; NULL = not
     * provided): prepared calls.  A host that calls a kernel many times
     * with views of unchanging shapes, strides, ranks and dtypes (only
     * the data pointers move) prepares it once:
     *   prepare(state, call, &plan) checks `call` as fn would and does
     *     every piece of work that does not read data (the loop nest,
     *     strides, code paths); returns 0 and sets *plan (plugin-owned),
     *     or non-zero when it cannot prepare this call (the host then
     *     calls fn, which reports what is wrong).  Never writes errbuf.
     *   run(plan, call) runs the kernel on `call`, whose views must equal
     *     the prepared call's in everything but data (the host's
     *     promise; run does not check it); returns as fn does.
     *   plan_free(plan) frees it (the host frees every plan before
     *     callable_free).
     * A plan is used by one call at a time (run may write it); distinct
     * plans of one callable run concurrently, and prepare may run on
     * several threads at once, each making its own plan, with or
     * without KILN_BACKEND_THREAD_SAFE. */
    int (*prepare)(void *state, const kiln_call *call, void **plan);
    int (*run)(void *plan, const kiln_call *call);
    void (*plan_free)(void *plan);
} kiln_callable;

/* Options for one compile (host-owned, valid during the call). */
typedef struct kiln_compile_options {
    size_t struct_size;
    int opt_level;                 /* 0..3; backends may ignore */
    int fast_math;                 /* 0 or 1; backends may ignore */
    /* ABI 1.3: 1 asks for code that runs on any CPU of the target
     * architecture (a cache shared across a cluster with mixed node
     * types) instead of code for the host CPU.  Backends that always make
     * portable code ignore it. */
    int generic_target;
} kiln_compile_options;

#define KILN_BACKEND_THREAD_SAFE 1u  /* calls may come from several threads */

/* The descriptor a plugin returns.  Static storage in the plugin; valid
 * until dlclose. */
typedef struct kiln_backend {
    size_t struct_size;
    uint32_t abi_major, abi_minor;
    const char *name;              /* "interp", "tcc", ...: [a-z0-9_]+ */
    const char *version;           /* release, e.g. "0.1.0" */
    const char *build_id;          /* changes whenever generated code may */
    uint32_t flags;                /* KILN_BACKEND_* */

    /* 1 when the plugin can compile `k`; 0 otherwise, with the reason in
     * *err (the host frees it with error_free). */
    int (*supports)(const kiln_kernel *k, kiln_plugin_error **err);

    /* Compile `k` to an artifact.  Returns 0 and sets *out, or a
     * kiln_code with *err set. */
    int (*compile)(const kiln_kernel *k, const kiln_compile_options *opt,
                   kiln_artifact **out, kiln_plugin_error **err);

    /* Turn an artifact into a callable.  The artifact may be freed after. */
    int (*load)(const kiln_artifact *a, kiln_callable **out,
                kiln_plugin_error **err);

    /* Serialised artifact bytes (plugin-owned, valid while `a` lives), or
     * NULL when the artifact cannot be stored.  *len in bytes. */
    const void *(*artifact_bytes)(const kiln_artifact *a, size_t *len);

    /* Load a callable from bytes made by artifact_bytes (possibly in
     * another process).  NULL when not provided. */
    int (*load_bytes)(const void *bytes, size_t len, kiln_callable **out,
                      kiln_plugin_error **err);

    void (*artifact_free)(kiln_artifact *a);
    void (*callable_free)(kiln_callable *c);
    void (*error_free)(kiln_plugin_error *e);

    /* ABI 1.2, optional (check struct_size, NULL = not provided).  A
     * human-readable rendering of the code the plugin makes for `k` with
     * `opt` (the llvm backend: the optimised LLVM IR), for `kiln
     * emit-llvm` and debugging.  Returns 0 and sets *text (NUL-terminated,
     * freed with text_free), or a kiln_code with *err set. */
    int (*emit_text)(const kiln_kernel *k, const kiln_compile_options *opt,
                     char **text, kiln_plugin_error **err);
    void (*text_free)(char *text);

    /* ABI 1.3, optional.  The machine the code made with `opt` runs on,
     * as a short string of [A-Za-z0-9_.+-] (e.g. "x86_64-pc-linux-gnu-
     * skylake-3f2a9c1e": triple, CPU name and a hash of the explicit
     * feature set; never "native"), written into buf (size bytes).  The
     * disk cache files artifacts under it, so that code for one CPU is
     * never loaded on another.  Returns 0, or -1 when buf is too small.
     * When NULL the host uses the architecture name (uname -m), right for
     * backends whose code does not depend on the CPU model. */
    int (*target)(const kiln_compile_options *opt, char *buf, size_t size);

    /* ABI 1.6, optional.  Set up, on the calling thread, everything
     * compile needs once per process (the llvm backend: load its compiler
     * module and libLLVM, initialise the target and LLVM's options, run
     * one warm-up compile), so that a later compile on any thread creates
     * no process-wide state with destructors that run at exit.  The host
     * calls it once, before the backend's first tier-1 compile, between
     * two registrations of the exit gate that waits for compiles
     * (core/runtime/tier.c; docs/backends.md, "Exit during tier-up").
     * Idempotent and thread-safe; returns 0,
     * or a kiln_code with *err set (compiles would then fail too). */
    int (*compiler_init)(kiln_plugin_error **err);
} kiln_backend;

/* The bootstrap symbol's type.  Returns the descriptor, or NULL after
 * writing a one-line reason into errbuf (e.g. an unsupported host ABI
 * major). */
typedef const kiln_backend *(*kiln_backend_entry_fn)(uint32_t host_abi_major,
                                                     uint32_t host_abi_minor,
                                                     char *errbuf,
                                                     size_t errbuf_size);

#ifdef __cplusplus
}
#endif
#endif
