/*
 * join.c — the `join_slices` pass: join -> slice writes (docs/rewrite.md).
 *
 * In the graph: join(axis, join(axis, a, b), c) -> join(axis, a, b, c)
 * when the inner join has no other use and the same dtype (a
 * concatenation of concatenations is one concatenation; the values are
 * copied, never computed, so the rewrite is exact).
 *
 * In the lowering (core/lower/lower.c lower_join) every join or stack is one
 * output allocation and one JOIN kernel that loops over the array of its
 * inputs and writes each into its slice (backends/interp: kiln_interp_join)
 * — the kernel takes its inputs as an array, so neither its code nor its
 * compile grows with n; its key and description are linear in n.  Before,
 * with this pass on, each input had its own narrow copy kernel: 1.4x the
 * compile time and 1.5x the call time of the one loop at n = 10,000
 * (docs/performance.md), so that lowering is gone.  The gradient of a
 * join is n slice reads (core/ir/grad.c: a subtensor of the output adjoint
 * per input).
 */
#include "rewrite/rewrite.h"

#include <stdlib.h>
#include <string.h>

/* a join absorbs an inner join along the same axis with its dtype (and no
 * other use: kiln_rw_absorbed) */
static int absorbs(const kiln_node *u, const kiln_node *x)
{
    return u->op == KILN_OP_JOIN && x->op == KILN_OP_JOIN &&
           x->attrs->axes[0] == u->attrs->axes[0] &&
           x->type.dtype == u->type.dtype;
}

static kiln_value flatten(kiln_rw *rw, kiln_value v)
{
    const kiln_node *o = &rw->old->nodes[v];
    if (o->op != KILN_OP_JOIN)
        return -2;
    kiln_value *t;
    int n;
    int changed = kiln_rw_terms(rw, v, &t, &n);
    if (changed <= 0) {
        free(t);
        return changed < 0 ? -1 : -2;
    }
    kiln_value r = kiln_rw_op(rw, KILN_OP_JOIN, o->attrs, n, t, v);
    free(t);
    if (r >= 0 && !kiln_rw_same_type(&rw->g->nodes[r].type, &o->type))
        return -2;
    return r;
}

int kiln_rw_join_slices(kiln_graph **gp, const kiln_rw_config *c,
                        kiln_err *err)
{
    return kiln_rw_map(gp, c, err, flatten, 0, absorbs);
}
