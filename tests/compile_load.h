/*
 * compile_load.h — compile a hand-built kernel with a plugin's entry
 * points and load the artifact into a callable, for tests that call a
 * plugin themselves (include after tap.h: failures are diag lines).
 * When `bytes` is not NULL it gets a malloc'ed copy of the artifact's
 * bytes (NULL when the plugin stores none) and *len their length.
 * Returns the callable (freed with be->callable_free), or NULL.
 */
#ifndef KILN_TESTS_COMPILE_LOAD_H
#define KILN_TESTS_COMPILE_LOAD_H

#include <kiln/backend.h>

#include <stdlib.h>
#include <string.h>

static kiln_callable *compile_load(const kiln_backend *be, const kiln_kernel *k,
                                   unsigned char **bytes, size_t *len)
{
    kiln_artifact *a = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    if (be->compile(k, &co, &a, &e)) {
        diag("compile: %s", e ? e->message : "?");
        be->error_free(e);
        return NULL;
    }
    if (bytes) {
        const void *p = be->artifact_bytes ? be->artifact_bytes(a, len) : NULL;
        *bytes = p ? malloc(*len) : NULL;
        if (*bytes)
            memcpy(*bytes, p, *len);
    }
    kiln_callable *c = NULL;
    if (be->load(a, &c, &e)) {
        diag("load: %s", e ? e->message : "?");
        be->error_free(e);
        c = NULL;
    }
    be->artifact_free(a);
    return c;
}

#endif
