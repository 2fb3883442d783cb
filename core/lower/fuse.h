/*
 * fuse.h — the fusion planning pass (prefix kiln_fuse_), run by
 * core/lower/lower.c before it builds kernels (docs/rewrite.md, "fuse").
 *
 * The plan says which live graph nodes one kernel computes together and in
 * which order the lowering visits the nodes:
 *
 *  - regions: all live elementwise nodes of one shape and one stage (the
 *    kernel boundaries above them) are one multi-output kernel of any op
 *    mix; every member read outside the region (or a graph output) is one
 *    of its outputs, the others live only in registers;
 *  - reduction trees: a reduction computes the single-use elementwise
 *    chain of its operand in its own loop;
 *  - sibling reductions: full reductions of one op, operand shape and
 *    depth are one REDUCE kernel of several outputs;
 *  - loops: those kernels over one iteration space, with the gathers
 *    from rank-1 tables and the scatter-adds into rank-1 arrays along it,
 *    are one LOOP kernel (one pass; ABI 1.5).
 *
 * Groups are cut, in node order, where they would pass a cap:
 * instructions, inputs or outputs of one kernel (kiln_lower_opts; the
 * policy's fusion.*).  Linear in the graph but for a heap when sibling
 * sets reorder kernels.
 */
#ifndef KILN_CORE_FUSE_H
#define KILN_CORE_FUSE_H

#include "ir.h"

struct kiln_lower_opts;

/* Why a fused group ended (kiln_fusion.split). */
enum kiln_fuse_split {
    KILN_FUSE_WHOLE = 0,   /* not split: the group is all there is */
    KILN_FUSE_SPLIT_OPS,   /* the next member would pass max_scalar_ops */
    KILN_FUSE_SPLIT_WIDTH, /* ... max_width (distinct inputs) */
    KILN_FUSE_SPLIT_OUTPUTS /* ... max_outputs */
};

typedef struct kiln_fusion {
    int *group;     /* node -> its group's root (the node whose kernel
                       computes it), -1 for a node of no group */
    char *region;   /* node -> 1 when its group is a scalar region */
    char *ext;      /* node -> 1 when a member's value is read outside
                       its group (a scalar region's outputs) */
    char *split;    /* root -> kiln_fuse_split */
    int *order;     /* the live nodes in lowering order (n_order) */
    int n_order;
    int n_regions;  /* regions of two or more members */
    /* sibling reductions: full reductions of one shape, op and depth
     * computed by one REDUCE kernel of several outputs.  sib[r] is the
     * set's first root for every root r of a set of two or more, -1
     * otherwise; sib_next[r] the next root of the set (-1 at the end) */
    int *sib;
    int *sib_next;
    int n_sibling_sets;
    /* loops: loop[q] for every kernel q (the node it is lowered at: a
     * group's root, a sibling set's first root, a gather or scatter node)
     * that is one of a loop of two or more kernels is the loop's anchor,
     * the kernel it is lowered at (-1 otherwise); the members of the
     * loop anchored at a are loop_nodes[loop_start[a] .. loop_start[a +
     * 1]) in node order; loop_ext[m] is 1 when member m is read outside
     * its loop or is a graph output */
    int *loop;
    int *loop_start;    /* n_nodes + 1 */
    int *loop_nodes;
    char *loop_ext;
    int n_loops;
} kiln_fusion;

/* Plan fusion for graph g (validated).  live[v] is 1 for the nodes an
 * output depends on; opts gives the caps (fuse_max_width, fuse_max_ops,
 * fuse_max_outputs).  Fills *f (owned
 * by the caller, freed with kiln_fuse_free).  fuse_max_ops or
 * fuse_max_width 0 plans no regions; fuse_max_outputs 0 gives every region
 * part one output (no multi-output regions).  Errors: KILN_ERR_NOMEM. */
int kiln_fuse_plan(const kiln_graph *g, const char *live,
                   const struct kiln_lower_opts *opts, kiln_fusion *f,
                   kiln_err *err);

/* The kernel that computes node v: the node it is lowered at (its
 * group's root, its sibling set's first root, or v itself); its loop, if
 * any, is loop[] of that. */
int kiln_fuse_kernel_of(const kiln_fusion *f, int v);

/* The iteration space (a node's type) of the loop anchored at kernel
 * `anchor` of plan f. */
const kiln_type *kiln_fuse_loop_space(const kiln_graph *g,
                                      const kiln_fusion *f, int anchor);

/* A short phrase for kiln_fuse_split s ("instruction cap", ...). */
const char *kiln_fuse_split_name(int s);

void kiln_fuse_free(kiln_fusion *f);

/* The node dot node v reads as its operand i: the operand itself, or
 * the value a transpose operand transposes (the dot reads it in place;
 * *perm, when not NULL, gets the view's permutation): a rank-2 transpose,
 * or (issue 29) one of any rank that swaps the last two axes only. */
int kiln_fuse_dot_operand(const kiln_graph *g, int v, int i, int64_t *perm);

/* Whether dot node v is a batched matmul (an operand of rank > 2: one
 * DOT kernel over views of one rank, ABI 1.11). */
int kiln_fuse_dot_batched(const kiln_graph *g, int v);

#endif
