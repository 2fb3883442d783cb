/*
 * emit_graph.c — `kiln emit-c`: the C that core/emit_c.c generates for
 * every kernel of a graph (prefix kiln_emit_c_).  Lives in libkiln only;
 * emit_c.c itself is also linked into backends.
 */
#include "emit_c.h"
#include "ir.h"
#include "lower.h"

#include <stdlib.h>

int kiln_emit_c_graph(const kiln_graph *graph, FILE *out, kiln_err *err)
{
    kiln_graph *g = kiln_ir_clone(graph, err);
    if (!g)
        return err ? err->code : KILN_ERR_ARG;
    kiln_program prog;
    int rc = kiln_lower(g, &prog, err);
    if (rc) {
        kiln_graph_free(g);
        return rc;
    }
    for (int i = 0; i < prog.n_steps && rc == 0; i++) {
        const kiln_step *s = &prog.steps[i];
        char *src = NULL, why[256];
        size_t len = 0;
        const char *name = s->node >= 0 ? g->nodes[s->node].name : NULL;
        fprintf(out, "/* ==== kernel %d of %d: %s, node %s%s%s ==== */\n", i,
                prog.n_steps, s->label, name ? "'" : "", name ? name : "-",
                name ? "'" : "");
        if (kiln_emit_c(&s->kernel, &src, &len, why, sizeof why)) {
            rc = kiln_seterr(err, KILN_ERR_BACKEND, "kernel %d (%s): %s", i,
                             s->label, why);
            break;
        }
        fwrite(src, 1, len, out);
        fputc('\n', out);
        free(src);
    }
    kiln_lower_free(&prog);
    kiln_graph_free(g);
    return rc;
}
