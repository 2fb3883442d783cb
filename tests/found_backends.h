/*
 * found_backends.h — the backends this build has, for tests that run a
 * model under each (include once, after tap.h): interp always, then tcc
 * and llvm when a kernel compiled with them really ran on them (no
 * silent fallback); a missing one is a SKIP line.
 */
#ifndef KILN_TESTS_FOUND_BACKENDS_H
#define KILN_TESTS_FOUND_BACKENDS_H

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <string.h>

static int found_backend(const char *name)
{
    static const char text[] =
        "kiln 1\ngraph t\n  input x: f64[2]\n  output y = exp(x)\nend\n";
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = name;
    o.passes = "none";
    o.quiet = 1;
    o.jobs = 1;
    kiln_function *f = g ? kiln_compile(g, &o, &err) : NULL;
    int r = f && kiln_function_n_kernels(f) > 0 &&
            strcmp(kiln_function_kernel_backend(f, 0), name) == 0;
    kiln_function_free(f);
    kiln_graph_free(g);
    return r;
}

/* Fill bk[0..3) with the backends found; returns how many. */
static int found_backends(const char **bk)
{
    int n = 0;
    bk[n++] = "interp";
    if (found_backend("tcc"))
        bk[n++] = "tcc";
    else
        ok(1, "tcc # SKIP not built");
    if (found_backend("llvm"))
        bk[n++] = "llvm";
    else
        ok(1, "llvm # SKIP not built");
    return n;
}

#endif
