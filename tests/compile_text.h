/*
 * compile_text.h — a whole .kg text (one or several graph blocks) parsed
 * as "t.kg" and compiled with one backend and pass list (quiet, one
 * job), for tests that compile many small graphs; and the count of a
 * compiled function's kernels of one kind.
 */
#ifndef KILN_TESTS_COMPILE_TEXT_H
#define KILN_TESTS_COMPILE_TEXT_H

#include <kiln/kiln.h>
#include <kiln/policy.h>

#include <string.h>

/* Options for backend and passes (NULL: the defaults), quiet, one job. */
static inline void kg_test_options(kiln_options *o, const char *backend,
                                   const char *passes)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->backend = backend;
    o->passes = passes;
    o->quiet = 1;
    o->jobs = 1;
}

/* g compiled with those options; NULL with the error in *err. */
static inline kiln_function *compile_kg_graph(const kiln_graph *g,
                                              const char *backend,
                                              const char *passes,
                                              kiln_err *err)
{
    kiln_options o;
    kg_test_options(&o, backend, passes);
    return kiln_compile(g, &o, err);
}

/* NULL with the parse or compile error in *err. */
static inline kiln_function *compile_kg_text(const char *text,
                                             const char *backend,
                                             const char *passes,
                                             kiln_err *err)
{
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, err);
    if (!g)
        return NULL;
    kiln_function *f = compile_kg_graph(g, backend, passes, err);
    kiln_graph_free(g);
    return f;
}

/* How many of f's kernels have kind `kind` (KILN_KERNEL_*); 0 for NULL. */
static inline int count_kernels_of_kind(kiln_function *f, int kind)
{
    int n = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_info ki;
        memset(&ki, 0, sizeof ki);
        ki.struct_size = sizeof ki;
        if (kiln_function_kernel_info(f, i, &ki, NULL) == 0 &&
            (int)ki.facts.kind == kind)
            n++;
    }
    return n;
}

#endif
