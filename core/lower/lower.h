/*
 * lower.h — lowering a graph to kernels and a VM program (prefix
 * kiln_lower_), shared by core/lower/lower.c (builds it),
 * core/compile/driver.c (compiles it) and core/runtime/ (runs it).
 *
 * The lowered program is a list of buffers and a list of steps.  A buffer
 * is a tensor the VM holds: an input, a constant or shared value, a
 * literal, or a temporary (a node's result or a lowering temporary).  A
 * step is one kernel call; each of its arguments is a *view* of a buffer,
 * computed at call time from the buffer's run-time shape by a recipe
 * (broadcast, transpose, slice, ...), so that shape ops cost no copy of
 * their own beyond the kernel that consumes them; a shape op read in
 * place is not even that (kiln_vstep).
 */
#ifndef KILN_CORE_LOWER_H
#define KILN_CORE_LOWER_H

#include "ir.h"
#include <kiln/cache.h>

enum kiln_buf_kind {
    KILN_BUF_INPUT = 0,   /* the caller's tensor, set at each call */
    KILN_BUF_CONST,       /* const, shared or literal data owned by the fn */
    KILN_BUF_TEMP         /* computed; lives in a planned slot */
};

typedef struct kiln_buf {
    int kind;             /* kiln_buf_kind */
    int node;             /* graph node it holds, or -1 for a temporary */
    kiln_type type;       /* compile-time type (dims may be symbols) */
    int is_static;        /* every dim of `type` and of its inputs' types
                             is concrete: no run-time inference needed */
    /* How to infer the run-time shape of a TEMP: op over in_bufs. */
    int op;
    const kiln_attrs *attrs;  /* the node's (the graph outlives the
                                 program), or attrs_owned */
    kiln_attrs *attrs_owned;  /* a lowering temporary's own, or NULL */
    int n_in;
    int *in_bufs;         /* owned */
    /* run time */
    int rank;
    int64_t shape[KILN_MAX_RANK];
    size_t nbytes;
    void *data;
    /* planning */
    int slot;             /* TEMP: storage slot; -1 otherwise */
    int fused;            /* TEMP computed inside a fused kernel: never
                             stored, but its shape is still inferred and
                             checked at run time */
    int def_step, last_step;
    void *owned;          /* CONST: owned data */
} kiln_buf;

enum kiln_recipe {
    KILN_VIEW_FULL = 0,   /* the buffer as it is */
    KILN_VIEW_BCAST,      /* broadcast to the step's iteration shape */
    KILN_VIEW_RESHAPE,    /* contiguous, with the iteration shape */
    KILN_VIEW_TRANSPOSE,  /* permuted by perm[] */
    KILN_VIEW_SUBTENSOR,  /* basic index attrs->idx */
    KILN_VIEW_REDUCE_OUT, /* reduce output: iteration rank, stride 0 on
                             reduced axes (mask[]) */
    KILN_VIEW_EXPAND,     /* a size-1 axis inserted at `axis` */
    KILN_VIEW_BCAST_TAKE, /* broadcast to take(aux[0], aux[1], axis)'s
                             shape (scatter values) */
    KILN_VIEW_UNITS,      /* size-1 axes inserted or removed (expand_dims,
                             squeeze of any strided view): the iteration
                             shape, whose other dims are the view's in
                             order */
    KILN_VIEW_MATMUL      /* an operand of a batched DOT (issue 29): the
                             view with its last two axes swapped when
                             `keepdims` (a transpose read in place), a 1-D
                             view made a row [1, k] (axis 0: operand a) or
                             a column [k, 1] (axis 1), size-1 axes
                             prepended up to the iteration rank, and every
                             batch axis the iteration shape's extent
                             (stride 0 where the view's is 1) */
};

/* The longest chain of view steps one argument reads through (deeper
 * chains of shape ops are copied at that depth). */
#define KILN_VIEW_MAX_CHAIN 8

typedef struct kiln_arg {
    int buf;
    int recipe;           /* kiln_recipe */
    int axis;
    int keepdims;         /* REDUCE_OUT: the buffer kept reduced axes */
    int64_t perm[KILN_MAX_RANK];   /* TRANSPOSE: perm; REDUCE_OUT: mask */
    const kiln_attrs *attrs;       /* SUBTENSOR (points into the fn's graph) */
    int aux[2];                    /* BCAST_TAKE */
    int chain;            /* 0, or 1 + the index in prog->vsteps of the
                             last view step `buf` goes through before
                             `recipe` applies (a shape op that is no
                             kernel: docs/rewrite.md, "fuse") */
} kiln_arg;

/* A shape op read in place (no kernel, no buffer of its own): one step of
 * the chain of views an argument reads its source buffer through.  `a`
 * is the step as a recipe (TRANSPOSE, SUBTENSOR, RESHAPE, UNITS, BCAST);
 * the recipes that need a target shape take the run-time shape of
 * buffer `a.buf` (the shape op's own buffer, never stored, its shape
 * inferred at each call with new shapes).  Steps apply from the source
 * outwards: prev first. */
typedef struct kiln_vstep {
    kiln_arg a;
    int prev;             /* 1 + index of the step before, 0: none */
    int root;             /* the source buffer of the whole chain */
    int depth;            /* steps up to and including this one */
} kiln_vstep;

typedef struct kiln_step {
    kiln_kernel kernel;   /* description; arrays owned by the step */
    kiln_arg_desc *in_desc, *out_desc;
    kiln_instr *instrs;
    int32_t *out_refs;
    char label[48];
    int n_in, n_out;
    kiln_arg *in, *out;   /* in owns one block holding in, out, in_desc,
                             out_desc, vin and vout (new_step) */
    int iter_input;       /* 1: iteration shape is in[0]'s view (REDUCE) */
    int node;             /* graph node, for messages */
    /* fusion (core/lower/fuse.c), for kiln explain: the graph nodes the kernel
     * computes (0: one, unfused) and why its group ended
     * (kiln_fuse_split) */
    int n_members;
    int split;
    char *members;        /* owned: the members' names, "a, b, t12, ..."
                             (all of them; NULL when unfused) */
    /* LOOP (ABI 1.5): the arguments' roles (inputs, then outputs) and
     * the outputs' scatter indices, owned; NULL for other kinds */
    uint8_t *roles;
    int32_t *out_index;
    /* compiled */
    const kiln_backend *backend;
    kiln_callable *callable;
    /* the cache (core/cache/store.c): key of `kernel`, what happened */
    kiln_key key;
    int cache_result;     /* kiln_cache_result */
    int cache_written;
    int callable_shared;  /* callable owned by an identical earlier step */
    double compile_s, saved_s;
    const char *cache_note;  /* why not stored / not cached (static) */
    /* per-call views (preallocated), and the callable's plan for them
     * (ABI 1.4 prepared calls; NULL: call fn) made by core/runtime/context.c
     * whenever the views are rebuilt */
    kiln_view *vin, *vout;
    void *plan;
    /* issue 25: 1 + the check node whose condition this step reduces
     * (its output 0 is a bool scalar: all of the condition); the VM
     * fails the call with KILN_ERR_CHECK when it is false.  0: none */
    int check;
    /* ABI 1.8: the kernel's constant block (core/lower/lift.c), owned:
     * the values of its KILN_I_PARAM instructions, passed with every call
     * (kiln_call.consts); NULL and 0 when nothing was lifted */
    double *consts;
    uint32_t n_consts;
    /* ABI 1.9, RECUR: the body's canonical bytes (kernel.body_bytes),
     * owned */
    unsigned char *body_bytes;
    /* RECUR with a program over tensor carries (recur_prog.c): the
     * indices of the element views (kiln_arg.attrs of SUBTENSOR
     * arguments), owned; NULL otherwise */
    kiln_attrs *view_attrs;
} kiln_step;

typedef struct kiln_program {
    kiln_buf *bufs;
    int n_bufs, cap_bufs;
    kiln_step *steps;
    int n_steps, cap_steps;
    int *node_buf;        /* graph node -> buffer (-1 when none) */
    int n_slots;
    kiln_vstep *vsteps;   /* shape ops read in place (kiln_arg.chain) */
    int n_vsteps, cap_vsteps;
    struct kiln_lower_opts *opts; /* during kiln_lower_ex only */
    struct kiln_lower_scratch *scr; /* during kiln_lower_ex only (lower.c) */
} kiln_program;

/* Lower graph `g` (validated, owned by the caller, must outlive prog) into
 * *prog: buffers, steps with kernel descriptions, and a slot plan.
 * Errors: KILN_ERR_NOMEM, KILN_ERR_TYPE for an op it cannot lower. */
int kiln_lower(kiln_graph *g, kiln_program *prog, kiln_err *err);

/* Lowering choices made by the rewrite passes (core/rewrite). */
typedef struct kiln_lower_opts {
    int fuse;             /* fuse elementwise chains (plan_groups) */
    int fuse_max_width;   /* inputs of one fused kernel */
    int fuse_max_ops;     /* instructions of one fused scalar program */
    int fuse_max_outputs; /* outputs of one fused scalar region (0: one) */
    int fuse_loops;       /* plan LOOP kernels (core/lower/fuse.c, ABI 1.5) */
    int lift;             /* lift literals into constant blocks (lift.c) */
    int recur;            /* fuse rank-0 scan bodies into RECUR programs
                             (recur_prog.c) */
} kiln_lower_opts;

/* kiln_lower with options (NULL: none of them, kiln_lower's behaviour). */
int kiln_lower_ex(kiln_graph *g, kiln_program *prog,
                  const kiln_lower_opts *opts, kiln_err *err);

/* Give step s new argument arrays for n_in inputs and n_out outputs (in,
 * out, in_desc, out_desc, vin, vout: one zeroed block owned by s->in;
 * the caller frees the old one), and set n_in, n_out and the kernel's
 * counts and description pointers.  Returns 0, or -1 when out of memory
 * (s unchanged). */
int kiln_lower_step_args(kiln_step *s, int n_in, int n_out);

/* A scalar program being built (ELEMWISE/REDUCE/LOOP kernels, and the
 * RECUR programs of recur_prog.c): instructions in order, owned. */
typedef struct prog_builder {
    kiln_instr *ins;
    int n, cap;
} prog_builder;

/* Append one instruction; returns its index, -1 when out of memory. */
int kiln_lower_emit(prog_builder *pb, int op, kiln_dtype dt, int a, int b,
                    int c, double imm);

/* The instructions of rank-0 elementwise node v of g (an op of
 * KILN_CAT_ELEMWISE: arithmetic with the lowering's dtype promotion and
 * compute dtypes, n-ary add/mul as a pairwise tree, cast, where, fill,
 * isnan/isinf/sign/clip) appended to pb, as kernels' programs get them:
 * literal operands become CONSTs, every other operand u is instruction
 * instr_of[u] (cast to the dtype the op computes in).  Returns the
 * result instruction, or -1 with *err set (out of memory; take). */
int kiln_lower_emit_scalar_node(prog_builder *pb, kiln_graph *g, int v,
                                const int *instr_of, kiln_err *err);

/* The pass `recur` (core/lower/recur_prog.c): give every RECUR step of
 * prog (lowered from g) whose scan body computes small static values
 * only a scalar program (ABI 1.10, include/kiln/backend.h
 * KILN_KERNEL_RECUR): the body is cloned and rewritten with rwc's passes
 * (as the host path compiles it), then each value of static shape with
 * at most 64 elements becomes one instruction per element (inputs LOADs,
 * elementwise nodes kiln_lower_emit_scalar_node per element with
 * broadcasting, reductions sum/prod/max/min/mean/logsumexp, dot and
 * matmul of vectors and matrices, reshape,
 * expand_dims, squeeze, transpose, broadcast_to, join, stack, static
 * subtensor); out_refs are the new carries' elements, then the per-step
 * outputs'.  A step with tensor arguments gets one argument per element
 * (a rank-0 view of a carry or arg element, a strided rank-1 view of a
 * sequence or stacked output element: kiln_step.view_attrs), n_carry and
 * n_seq counting those.  Other steps keep n_instrs 0 (the host runs
 * their body once per step): a symbolic shape or more than 64 elements,
 * take, check, alloc, a nested scan or ODE, linalg, more than 4096
 * instructions, or an output that shares a buffer with an input.
 * Errors: out of memory, or a rewrite pass failing on a body. */
struct kiln_rw_config;
int kiln_recur_attach_programs(kiln_program *prog, const kiln_graph *g,
                               const struct kiln_rw_config *rwc,
                               kiln_err *err);


/* Literal lifting (core/lower/lift.c): in every ELEMWISE, REDUCE and
 * LOOP step of `prog`, the finite f64/f32 literals other than 0, +-0.5,
 * +-1, +-2 and pow's exponents become KILN_I_PARAM instructions reading
 * the step's constant block (kiln_step.consts), one slot per literal in
 * instruction order.  Returns 0, or -1 when out of memory (steps lifted
 * so far stay lifted and correct). */
int kiln_lower_lift(kiln_program *prog);

/* Free what kiln_lower allocated (not the callables: see vm.c). */
void kiln_lower_free(kiln_program *prog);

/* Compute the view of argument `a` given the step's iteration shape
 * (rank, dims; ignored by recipes that do not use it). */
void kiln_lower_view(const kiln_program *prog, const kiln_arg *a,
                     int iter_rank, const int64_t *iter_shape,
                     kiln_view *v);

#endif
