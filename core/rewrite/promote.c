/*
 * promote.c — the `promote` pass: constant promotion (docs/rewrite.md).
 *
 * A constant whose data is larger than the threshold (the policy's
 * constants.promote_bytes; 1024 bytes by default) becomes a shared value
 * bound when the function is created (kiln_node.promoted): the VM reads it
 * from a buffer like any shared value, and no later pass may read its
 * values — not constant folding, not fusion — so they never reach a kernel
 * description, generated code or a cache key (design invariant 2).  Two
 * models that differ only in a large constant's value therefore have the
 * same kernels and the same keys.  A promoted value is not one of the
 * function's shared values: it cannot be rebound (kiln_function_n_shared
 * and kiln_function_bind_shared do not see it), and the name, type and
 * node id stay, so the pass edits nodes in place.  In the printed graph
 * it shows as `shared NAME: TYPE` without a source.
 */
#include "rewrite/rewrite.h"

int kiln_rw_promote(kiln_graph **gp, const kiln_rw_config *c, kiln_err *err)
{
    (void)err;
    kiln_graph *g = *gp;
    for (int v = 0; v < g->n_nodes; v++) {
        kiln_node *n = &g->nodes[v];
        if (n->op == KILN_OP_CONST && (int64_t)n->nbytes > c->promote_bytes) {
            n->op = KILN_OP_SHARED;
            n->promoted = 1;
        }
    }
    return 0;
}
