/*
 * compile_text.h — a whole .kg text (one or several graph blocks) parsed
 * as "t.kg" and compiled with one backend and pass list (quiet, one
 * job), for tests that compile many small graphs.
 */
#ifndef KILN_TESTS_COMPILE_TEXT_H
#define KILN_TESTS_COMPILE_TEXT_H

#include <kiln/kiln.h>

#include <string.h>

/* NULL with the parse or compile error in *err. */
static inline kiln_function *compile_kg_text(const char *text,
                                             const char *backend,
                                             const char *passes,
                                             kiln_err *err)
{
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, err);
    if (!g)
        return NULL;
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.passes = passes;
    o.quiet = 1;
    o.jobs = 1;
    kiln_function *f = kiln_compile(g, &o, err);
    kiln_graph_free(g);
    return f;
}

#endif
