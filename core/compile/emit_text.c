/*
 * emit_text.c — `kiln emit-llvm` (see emit_text.h).
 */
#include "emit_text.h"
#include "ir.h"
#include "loader.h"
#include "lower.h"

#include <stdlib.h>

int kiln_emit_text_graph(const kiln_graph *graph, const kiln_options *opt,
                         FILE *out, kiln_err *err)
{
    const char *name = "llvm";
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    if (opt) {
        size_t sz = opt->struct_size;
        if (sz >= offsetof(kiln_options, backend) + sizeof(char *) &&
            opt->backend)
            name = opt->backend;
        if (sz >= offsetof(kiln_options, opt_level) + sizeof(int) &&
            opt->opt_level >= 1 && opt->opt_level <= 3)
            co.opt_level = opt->opt_level;
        if (sz >= offsetof(kiln_options, fast_math) + sizeof(int))
            co.fast_math = opt->fast_math != 0;
    }
    /* the kernels kiln_compile makes (a bad pass list is reported before
     * the backend is looked for, as kiln_compile reports it) */
    kiln_graph *g;
    kiln_program prog;
    int rc = kiln_emit_lower(graph, opt, &g, &prog, err);
    if (rc)
        return rc;
    const kiln_backend *be = kiln_loader_get(name, NULL, NULL, 0, err);
    if (!be)
        rc = KILN_ERR_BACKEND;
    else if (be->struct_size < offsetof(kiln_backend, text_free) +
                                   sizeof(be->text_free) ||
             !be->emit_text || !be->text_free)
        rc = kiln_seterr(err, KILN_ERR_BACKEND, "backend '%s' cannot print "
                         "its code (no emit_text)", be->name);
    for (int i = 0; i < prog.n_steps && rc == 0; i++) {
        const kiln_step *s = &prog.steps[i];
        const char *nn = s->node >= 0 ? g->nodes[s->node].name : NULL;
        fprintf(out, "; ==== kernel %d of %d: %s, node %s%s%s ====\n", i,
                prog.n_steps, s->label, nn ? "'" : "", nn ? nn : "-",
                nn ? "'" : "");
        char *text = NULL;
        kiln_plugin_error *pe = NULL;
        if (s->kernel.kind == KILN_KERNEL_RECUR && s->kernel.n_instrs &&
            be->supports && !be->supports(&s->kernel, &pe)) {
            /* a fused scan loop this backend does not compile: the host
             * passes it on to the interpreter */
            fprintf(out, "; kiln recur kernel with a fused program of %u "
                         "instructions: %s does not compile it (%s)\n\n",
                    s->kernel.n_instrs, be->name,
                    pe && pe->message ? pe->message : "refused");
            if (pe)
                be->error_free(pe);
            continue;
        }
        if (pe)
            be->error_free(pe);
        pe = NULL;
        if (s->kernel.kind == KILN_KERNEL_RECUR && !s->kernel.n_instrs) {
            /* run by the host */
            fprintf(out, "; kiln recur kernel: the host calls body '%s' "
                         "once per step\n\n",
                    g->nodes[s->node].attrs->body->name);
            continue;
        }
        if (s->kernel.kind == KILN_KERNEL_TOPK) {   /* issue 29 */
            fprintf(out, "; kiln top_k kernel: run by the host "
                         "(core/runtime/topk.c)\n\n");
            continue;
        }
        if (be->emit_text(&s->kernel, &co, &text, &pe)) {
            rc = kiln_seterr(err, KILN_ERR_BACKEND, "kernel %d (%s): %s", i,
                             s->label, pe && pe->message ? pe->message
                                                         : "unknown error");
            if (pe)
                be->error_free(pe);
            break;
        }
        if (pe)
            be->error_free(pe);
        fputs(text ? text : "", out);
        fputc('\n', out);
        be->text_free(text);
    }
    kiln_lower_free(&prog);
    kiln_graph_free(g);
    return rc;
}
