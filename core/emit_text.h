/*
 * emit_text.h — `kiln emit-llvm`: a backend's own rendering of the code it
 * makes for every kernel of a graph (prefix kiln_emit_text_).
 */
#ifndef KILN_CORE_EMIT_TEXT_H
#define KILN_CORE_EMIT_TEXT_H

#include <stdio.h>
#include <kiln/kiln.h>

/* Lower `graph` and print, for each kernel, a header line and the text the
 * backend named in opt->backend returns from its emit_text entry point
 * (plugin ABI 1.2; the llvm backend prints optimised LLVM IR), compiled
 * with opt's opt_level and fast_math.  Errors: KILN_ERR_BACKEND when the
 * backend is missing, has no emit_text, or fails on a kernel. */
int kiln_emit_text_graph(const kiln_graph *graph, const kiln_options *opt,
                         FILE *out, kiln_err *err);

#endif
