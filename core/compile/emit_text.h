/*
 * emit_text.h — `kiln emit-llvm`: a backend's own rendering of the code it
 * makes for every kernel of a graph (prefix kiln_emit_text_).
 */
#ifndef KILN_CORE_EMIT_TEXT_H
#define KILN_CORE_EMIT_TEXT_H

#include <stdio.h>
#include <kiln/kiln.h>

/* Lower `graph` as kiln_compile does for `opt` (kiln_emit_lower) and
 * print, for each kernel, a header line (index, label, node) and the text
 * the backend named in opt->backend returns from its emit_text entry point
 * (plugin ABI 1.2; the llvm backend prints optimised LLVM IR), compiled
 * with opt's opt_level and fast_math (a named backend: the policy's llvm:
 * knobs do not apply, as for `kiln run --backend llvm`).  Errors:
 * KILN_ERR_BACKEND when the backend is missing, has no emit_text, or fails
 * on a kernel; KILN_ERR_ARG for a bad pass list. */
int kiln_emit_text_graph(const kiln_graph *graph, const kiln_options *opt,
                         FILE *out, kiln_err *err);

struct kiln_program;

/* The lowering `kiln emit-c` and `kiln emit-llvm` show: a copy of `graph`
 * (*gout, freed by the caller with kiln_graph_free, after the program)
 * rewritten and lowered into *prog (freed with kiln_lower_free) exactly as
 * kiln_compile does for `opt` (may be NULL): kiln_rw_config_for (the
 * policy's `passes:`, `fusion:` and `constants:`, then $KILN_PASSES, then
 * opt->passes), kiln_rw_run, kiln_lower_ex with the fusion caps.  So the
 * kernels, their order and labels are those `kiln run` compiles and
 * `kiln explain` lists.  Returns 0, or an error code with err set (a bad
 * pass list: KILN_ERR_ARG; an unreadable policy: KILN_ERR_POLICY or
 * KILN_ERR_IO) and nothing to free. */
int kiln_emit_lower(const kiln_graph *graph, const kiln_options *opt,
                    kiln_graph **gout, struct kiln_program *prog,
                    kiln_err *err);

#endif
