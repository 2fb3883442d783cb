/*
 * rewrite.h — graph rewrite passes (prefix kiln_rw_), internal to libkiln.
 *
 * kiln_compile runs the enabled passes on its own copy of the graph before
 * lowering (core/compile/driver.c); `kiln explain --passes` prints the graph
 * after each one.  The passes, in their fixed order (docs/rewrite.md):
 *
 *   canonicalize  flatten nested add/mul into n-ary nodes, exact algebraic
 *                 identities (x*1, x+(-0), x-0, x/1, neg(neg(x)), cast to
 *                 the same dtype), squeeze(R(x, keepdims=true)) -> R(x),
 *                 fill(m, expand_dims(L)) -> fill(m, L)
 *                                                 core/rewrite/canonicalize.c
 *   reciprocal    true_div(x, s), s one value (rank 0 or broadcast from
 *                 one), x float with more than one element ->
 *                 mul(x, true_div(1, s)): the reciprocal once per call,
 *                 not a division per element (rounding changes by ~1 ulp)
 *                                                 core/rewrite/reciprocal.c
 *   fold          evaluate elementwise ops over literals only
 *                                                 core/rewrite/fold.c
 *   cse           merge identical subexpressions  core/rewrite/cse.c
 *   promote       constants above the threshold become shared values bound
 *                 at function creation            core/rewrite/promote.c
 *   join_slices   nested joins flattened (every join is lowered as one
 *                 output allocation and one kernel looping over its inputs)
 *                                                 core/rewrite/join.c
 *   pairwise      n-ary add/mul as a balanced binary tree
 *                                                 core/rewrite/pairwise.c
 *   fuse          elementwise chains (and a chain feeding a reduction)
 *                 lowered as one kernel, within the width and program-size
 *                 caps          core/lower/lower.c (plan_groups)
 *   hoist         data-only values (no `input` in their cone) computed
 *                 once when the data are bound, by a separate prep
 *                 program; run by the compile driver after the others
 *                                                 core/rewrite/hoist.c
 *
 * Every pass keeps the inputs, shared values, outputs (names, order) and
 * the gradient records (g->grads) of the graph, and ends by dropping the
 * nodes it orphaned (dead-code elimination; inputs and shared values are
 * always kept).  Passes change node ids: only g->outputs and g->grads
 * name values across a pass.
 */
#ifndef KILN_CORE_REWRITE_H
#define KILN_CORE_REWRITE_H

#include "ir.h"
#include <kiln/policy.h>
#include <stdio.h>

enum {
    KILN_PASS_CANONICALIZE = 0,
    KILN_PASS_RECIPROCAL, /* x / scalar -> x * (1 / scalar) */
    KILN_PASS_FOLD,
    KILN_PASS_CSE,
    KILN_PASS_PROMOTE,
    KILN_PASS_JOIN_SLICES,
    KILN_PASS_PAIRWISE,
    KILN_PASS_FUSE,
    KILN_PASS_LOOPS,    /* fusion's loops (core/lower/fuse.c): needs fuse */
    KILN_PASS_LIFT,     /* literals into constant blocks (core/lower/lift.c) */
    KILN_PASS_HOIST,    /* data-only values computed when data are bound
                           (core/rewrite/hoist.c, run by the driver) */
    KILN_PASS_RECUR,    /* scan bodies fused into one RECUR loop kernel
                           (core/lower/recur_prog.c) */
    KILN_PASS_COUNT
};

#define KILN_PASSES_ALL ((1u << KILN_PASS_COUNT) - 1u)

/* Name of pass i ("canonicalize", ...), NULL when out of range. */
const char *kiln_rw_pass_name(int i);

/* What the passes read. */
typedef struct kiln_rw_config {
    unsigned passes;          /* bit i: pass i enabled */
    int64_t promote_bytes;    /* constants larger than this are promoted */
    int fuse_max_width;       /* fusion caps (0: no fusion) */
    int fuse_max_ops;
    int fuse_max_outputs;     /* outputs of one fused scalar region */
    int64_t hoist_max_bytes;  /* hoisting: larger values stay per call */
    /* kiln_rw_run's scratch: the node array a pass emptied, reused as the
     * next pass's array (no fresh allocation and page faults per pass);
     * NULL: every pass allocates its own */
    struct kiln_rw_scratch *scratch;
} kiln_rw_config;

typedef struct kiln_rw_scratch {
    kiln_node *nodes;
    int cap;
} kiln_rw_scratch;

/* Defaults: every pass, promotion above 1024 bytes, fusion caps 64
 * inputs and 256 instructions. */
void kiln_rw_config_default(kiln_rw_config *c);

/* Parse a pass list into *mask: items separated by commas or spaces,
 * applied left to right.  "all" and "none" set every pass or none; a
 * name adds that pass; "-name" removes it, "+name" adds it.  A list
 * whose first item starts with '-' or '+' edits the passes *mask holds
 * on entry (kiln_rw_config_for: the policy's, or all): "-fuse" is the
 * policy's passes without fusion; any other list builds from nothing:
 * "canonicalize,cse" is just those two, "none,+fold" is fold.  "fusion"
 * is accepted for "fuse".  *mask is unchanged on error.
 * Errors: KILN_ERR_ARG "unknown pass 'x' (expected ...)" (long names cut
 * at 64 bytes), "passes: empty list ...", "passes: '-' without a pass
 * name after it", "passes: '-all' (all and none stand alone: ...)". */
int kiln_rw_parse_passes(const char *spec, unsigned *mask, kiln_err *err);

/* The configuration from the policy's knobs `k` (fusion caps,
 * constants.promote_bytes, passes:; NULL: the defaults), then
 * $KILN_PASSES, then opt->passes (opt may be NULL), each overriding the
 * one before.  Errors: a bad pass list (KILN_ERR_ARG). */
int kiln_rw_config_apply(kiln_rw_config *c, const kiln_policy_knobs *k,
                         const kiln_options *opt, kiln_err *err);

/* The configuration kiln_compile uses for `opt` (may be NULL):
 * kiln_rw_config_apply over the knobs of the policy `opt` selects.
 * Defined by the policy stage (core/policy/policy.c), which reads the
 * policy; the passes never do.  Errors: a policy that cannot be read
 * (even with a forced backend: it still chooses the passes and the
 * fusion caps), a bad pass list (KILN_ERR_ARG). */
int kiln_rw_config_for(const kiln_options *opt, kiln_rw_config *c,
                       kiln_err *err);

/* Called after each pass that ran, with the graph it left. */
typedef void (*kiln_rw_trace_fn)(void *ctx, const char *pass,
                                 const kiln_graph *g);

/* Run the enabled passes on *g in the fixed order.  *g may be replaced
 * by a new graph (the old one is freed).  Returns 0 or an error code; on
 * error *g is still a valid graph (the state before the failed pass). */
int kiln_rw_run(kiln_graph **g, const kiln_rw_config *c,
                kiln_rw_trace_fn trace, void *ctx, kiln_err *err);

/* `kiln explain --passes`: print, after parsing and after each pass of
 * configuration c (kiln_rw_config_for), the pass name, the node count
 * and the canonical text of the graph to out. */
int kiln_rw_explain(const kiln_graph *g, const kiln_rw_config *c, FILE *out,
                    kiln_err *err);

/* ---- for the passes (core/rewrite/rw.c) ------------------------------ */

/* Rebuilding a graph: nodes of `old` are moved (or replaced) into a new
 * graph in topological order; map[v] is the new id of old node v (-1:
 * none yet). */
typedef struct kiln_rw {
    kiln_graph *old;
    kiln_graph *g;
    kiln_value *map;
    int *uses;        /* uses of each old node (inputs of other nodes,
                         outputs, gradient records) */
    kiln_value *owner; /* new node -> the old node it was made for, or -1 */
    int owner_cap;
    kiln_err *err;
    kiln_rw_scratch *scratch;
    char *absorbed;   /* kiln_rw_absorbed: old node -> 1 when its one user
                         flattens it (NULL until first asked) */
} kiln_rw;

/* Start rebuilding `old`; the new graph's node array comes from
 * c->scratch when it holds one large enough (c may be NULL). */
int kiln_rw_begin(kiln_rw *rw, kiln_graph *old, const kiln_rw_config *c,
                  kiln_err *err);

/* Move old node v (its inputs remapped through map) into the new graph;
 * returns its new id, -1 on error. */
kiln_value kiln_rw_move(kiln_rw *rw, kiln_value v);

/* A new node `op` over new-graph values `in`, type inferred; attrs may be
 * NULL (defaults).  `for_old` is the old node it stands for (-1: none).
 * Returns its id or -1. */
kiln_value kiln_rw_op(kiln_rw *rw, int op, const kiln_attrs *attrs,
                      int n_in, const kiln_value *in, kiln_value for_old);

/* Flattening single-use nests: `absorbs(u, x)` says whether old node u
 * takes the inputs of its input x in place of x when x has no other use
 * (canonicalize: add into add, mul into mul; join_slices: join into
 * join).  kiln_rw_map decides it for every node on the old graph before
 * the walk, copies each absorbed node unchanged (it is dead once its
 * root is built; kiln_rw_end drops it) and leaves the old node intact,
 * so that the root gathers the terms from the old graph: a chain
 * a1 = add(a0, t1), a2 = add(a1, t2), ... costs time linear in its
 * length.  Deciding on the already-flattened new nodes copied every term
 * at every step (quadratic: 20,000 steps took 9 s and 1.2 GB). */
typedef int (*kiln_rw_absorbs_fn)(const kiln_node *u, const kiln_node *x);

/* The inputs of old node v with absorbed inputs replaced by their own
 * inputs, recursively, left to right, as new-graph values: *terms (owned
 * by the caller) gets *n of them.  Returns 1 when something was absorbed,
 * 0 when not, -1 when out of memory (err set). */
int kiln_rw_terms(kiln_rw *rw, kiln_value v, kiln_value **terms, int *n);

/* map[v] = r; a node made for v (owner v) takes v's name. */
void kiln_rw_bind(kiln_rw *rw, kiln_value v, kiln_value r);

/* A new weak literal. */
kiln_value kiln_rw_literal(kiln_rw *rw, double v, int kind);

/* Finish: remap outputs and gradient records, drop dead nodes, free the
 * old graph and return the new one in *out.  On error everything is
 * freed and *out is NULL. */
int kiln_rw_end(kiln_rw *rw, kiln_graph **out);

/* Abandon a rebuild (the old graph is left as it was only if no node was
 * moved yet; callers treat it as consumed). */
void kiln_rw_abort(kiln_rw *rw);

/* The common driver of a node-by-node pass: rebuild *gp, asking `visit`
 * for every old node v (leaves too unless skip_leaves) — it returns the
 * new value standing for v, -2 to keep v as it is (moved), or -1 on an
 * error set in rw->err — and bind the result.  *gp is consumed and
 * replaced by the new graph (NULL on error).  `absorbs` (or NULL): the
 * pass flattens single-use nests (kiln_rw_terms); absorbed nodes are not
 * visited.  Returns 0 or the error. */
int kiln_rw_map(kiln_graph **gp, const kiln_rw_config *c, kiln_err *err,
                kiln_value (*visit)(kiln_rw *rw, kiln_value v),
                int skip_leaves, kiln_rw_absorbs_fn absorbs);

/* 1 when two types are equal (dtype, rank, dims). */
int kiln_rw_same_type(const kiln_type *a, const kiln_type *b);

/* Attributes with their defaults (dtype -1). */
void kiln_rw_attrs_default(kiln_attrs *a);

/* The passes. Each takes the graph and returns the rewritten one in *g. */
int kiln_rw_canonicalize(kiln_graph **g, const kiln_rw_config *c,
                         kiln_err *err);
int kiln_rw_reciprocal(kiln_graph **g, const kiln_rw_config *c,
                       kiln_err *err);
int kiln_rw_fold(kiln_graph **g, const kiln_rw_config *c, kiln_err *err);
int kiln_rw_cse(kiln_graph **g, const kiln_rw_config *c, kiln_err *err);
int kiln_rw_promote(kiln_graph **g, const kiln_rw_config *c, kiln_err *err);
int kiln_rw_join_slices(kiln_graph **g, const kiln_rw_config *c,
                        kiln_err *err);
int kiln_rw_pairwise(kiln_graph **g, const kiln_rw_config *c, kiln_err *err);

/* ---- hoisting (core/rewrite/hoist.c) --------------------------------- */

/* The boundary of g's data-only part: the nodes whose cone has no
 * `input` (nor `check`), that compute something from a shared value or
 * a constant (not a leaf, not a view, not from literals only) and that a
 * per-call node or an output reads (through views).  *nodes (malloc'ed,
 * NULL when none; the caller frees it) gets their ids in increasing
 * order, *n their count.  Errors: KILN_ERR_NOMEM. */
int kiln_rw_hoist_find(const kiln_graph *g, kiln_value **nodes, int *n,
                       kiln_err *err);

/* The prep graph of nodes[0..n-1] of g: their cone (same ops, types,
 * attributes and symbols), output k named "_hoist<k>" being nodes[k].
 * Shared values of the cone are unbound shared values named as in g
 * ("_hoist_in<id>" for a promoted or unnamed one; id is its node id in
 * g); constants and literals keep their values.  Returns a new graph or
 * NULL (err set: KILN_ERR_NOMEM). */
kiln_graph *kiln_rw_hoist_prep(const kiln_graph *g, const kiln_value *nodes,
                               int n, kiln_err *err);

/* Turn nodes[k] of *gp into hidden unbound shared values (promoted,
 * hoisted = 1 + k) and drop the nodes nothing reads any more.  *gp is
 * replaced (node ids change; find them again by `hoisted`).  Errors:
 * KILN_ERR_NOMEM (*gp NULL then). */
int kiln_rw_hoist_apply(kiln_graph **gp, const kiln_value *nodes, int n,
                        kiln_err *err);

#endif
