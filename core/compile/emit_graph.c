/*
 * emit_graph.c — `kiln emit-c`: the C that core/lower/emit_c.c generates for
 * every kernel of a graph (prefix kiln_emit_c_), and the lowering that
 * `kiln emit-c` and `kiln emit-llvm` share (kiln_emit_lower, emit_text.h).
 * Lives in libkiln only; emit_c.c itself is also linked into backends.
 */
#include "emit_c.h"
#include "emit_text.h"
#include "ir.h"
#include "lower.h"
#include "rewrite/rewrite.h"

#include <stdlib.h>
#include <string.h>

int kiln_emit_lower(const kiln_graph *graph, const kiln_options *opt,
                    kiln_graph **gout, kiln_program *prog, kiln_err *err)
{
    *gout = NULL;
    memset(prog, 0, sizeof *prog);
    /* the pass configuration first: a bad pass list or policy is reported
     * before any work, as kiln_compile reports it */
    kiln_rw_config rwc;
    if (kiln_rw_config_for(opt, &rwc, err))
        return err && err->code ? err->code : KILN_ERR_ARG;
    kiln_graph *g = kiln_ir_clone(graph, err);
    if (!g)
        return err && err->code ? err->code : KILN_ERR_NOMEM;
    /* the rewrite passes and fusion, on the copy, as kiln_compile runs
     * them (core/compile/driver.c) */
    int rc = kiln_rw_run(&g, &rwc, NULL, NULL, err);
    if (rc) {
        kiln_graph_free(g);
        return rc;
    }
    kiln_lower_opts lopt = {
        .fuse = (rwc.passes >> KILN_PASS_FUSE) & 1,
        .fuse_max_width = rwc.fuse_max_width,
        .fuse_max_ops = rwc.fuse_max_ops,
        .fuse_max_outputs = rwc.fuse_max_outputs,
        .fuse_loops = (rwc.passes >> KILN_PASS_LOOPS) & 1,
        .lift = (rwc.passes >> KILN_PASS_LIFT) & 1,
        .recur = (rwc.passes >> KILN_PASS_RECUR) & 1};
    rc = kiln_lower_ex(g, prog, &lopt, err);
    if (!rc && lopt.recur)
        rc = kiln_recur_attach_programs(prog, g, &rwc, err);
    if (rc) {
        kiln_lower_free(prog);   /* what it built before failing */
        kiln_graph_free(g);
        return rc;
    }
    *gout = g;
    return 0;
}

int kiln_emit_c_graph(const kiln_graph *graph, const kiln_options *opt,
                      FILE *out, kiln_err *err)
{
    kiln_graph *g;
    kiln_program prog;
    int rc = kiln_emit_lower(graph, opt, &g, &prog, err);
    if (rc)
        return rc;
    for (int i = 0; i < prog.n_steps && rc == 0; i++) {
        const kiln_step *s = &prog.steps[i];
        char *src = NULL, why[256];
        size_t len = 0;
        const char *name = s->node >= 0 ? g->nodes[s->node].name : NULL;
        fprintf(out, "/* ==== kernel %d of %d: %s, node %s%s%s ==== */\n", i,
                prog.n_steps, s->label, name ? "'" : "", name ? name : "-",
                name ? "'" : "");
        if (s->kernel.kind == KILN_KERNEL_RECUR && s->kernel.n_instrs &&
            kiln_emit_c_check(&s->kernel, why, sizeof why)) {
            /* a fused scan loop the C emitter does not take: tcc passes
             * it on to the interpreter */
            fprintf(out, "/* kiln recur kernel with a fused program of %u "
                         "instructions: no C (%s) */\n\n",
                    s->kernel.n_instrs, why);
            continue;
        }
        if (s->kernel.kind == KILN_KERNEL_RECUR && !s->kernel.n_instrs) {
            /* issue 28: no C of its own; the host steps the body, which is
             * compiled as a function of its own */
            fprintf(out, "/* kiln recur kernel: run by the host, calling "
                         "body '%s' once per step (its kernels: kiln "
                         "emit-c on that graph) */\n\n",
                    g->nodes[s->node].attrs->body->name);
            continue;
        }
        if (s->kernel.kind == KILN_KERNEL_TOPK) {   /* issue 29 */
            fprintf(out, "/* kiln top_k kernel: run by the host "
                         "(core/runtime/topk.c), no C */\n\n");
            continue;
        }
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
