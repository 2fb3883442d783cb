/*
 * test_loader.c — finding plugins, skipping bad ones with a one-line
 * diagnostic, falling back to the interpreter, and a third-party plugin
 * (plugins/example) that serves some kernels and refuses others, checked
 * against the interpreter (differential).
 *
 * The plugins are libtool modules built for `make check` into
 * $KILN_BUILDDIR/tests/plugins/.libs and plugins/example/.libs.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static char plugin_dirs[8192];

static const char *model =
    "kiln 1\ngraph g\n  input x: f64[n]\n  input y: f64[n]\n"
    "  a = add(mul(x, 2.5), y)\n  b = exp(a)\n  c = mul(b, x)\n"
    "  output s = sum(c)\n  output a\nend\n";

/* Compile `model` with `backend`; diagnostics go to a temporary file whose
 * text is returned in diag (at most size bytes). */
static kiln_function *compile_with(const char *backend, char *diag,
                                   size_t size, kiln_err *err)
{
    kiln_graph *g = kiln_parse_string(model, "m.kg", NULL, err);
    if (!g)
        return NULL;
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = backend;
    opt.plugin_path = plugin_dirs;
    FILE *d = tmpfile();
    opt.diag = d;
    kiln_function *f = kiln_compile(g, &opt, err);
    kiln_graph_free(g);
    diag[0] = 0;
    if (d) {
        rewind(d);
        size_t n = fread(diag, 1, size - 1, d);
        diag[n] = 0;
        fclose(d);
    }
    return f;
}

static int run(kiln_function *f, double *s, double *a)
{
    double x[5] = {0.1, -0.2, 0.3, 0.4, -0.5}, y[5] = {1, 2, 3, 4, 5};
    kiln_tensor in[2] = {{KILN_F64, 1, {5}, x}, {KILN_F64, 1, {5}, y}};
    kiln_tensor out[2];
    kiln_err err = {0, ""};
    if (kiln_function_call(f, in, out, &err))
        return -1;
    *s = *(double *)out[0].data;
    memcpy(a, out[1].data, sizeof(double) * 5);
    return 0;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_skipped(const char *name, const char *why)
{
    char diag[4096];
    kiln_err err = {0, ""};
    kiln_function *f = compile_with(name, diag, sizeof diag, &err);
    ok(f != NULL, "%s: still compiles (with interp) %s", name,
       f ? "" : err.message);
    char want[256];
    snprintf(want, sizeof want, "/%s.so: %s\n", name, why);
    ok(strncmp(diag, "kiln: skipping plugin ", 22) == 0 &&
       strstr(diag, want) != NULL, "%s: skipped with '%s'", name, why);
    ok(strstr(diag, "using interp") != NULL && count_lines(diag) == 2,
       "%s: then one fallback line: %s", name, diag);
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++)
        if (strcmp(kiln_function_kernel_backend(f, i), "interp") != 0)
            ok(0, "%s: kernel %d not on interp", name, i);
    kiln_function_free(f);
}

int main(void)
{
    const char *b = getenv("KILN_BUILDDIR");
    /* the kernel counts below are per node: no fusion */
    setenv("KILN_PASSES", "-fuse", 1);
    if (!b)
        b = ".";
    snprintf(plugin_dirs, sizeof plugin_dirs,
             "%s/tests/plugins/.libs:%s/plugins/example/.libs", b, b);

    test_skipped("badabi", "plugin ABI 2.0, this kiln speaks 1.x");
    test_skipped("noentry", "no symbol kiln_backend_entry");
    test_skipped("failinit", "failinit: no device found");

    /* a bad name never reaches the file system */
    char diag[4096];
    kiln_err err = {0, ""};
    kiln_function *f = compile_with("../etc/x", diag, sizeof diag, &err);
    ok(f != NULL && strstr(diag, "bad backend name '../etc/x'") != NULL,
       "a backend name with '/' is refused: %s", diag);
    kiln_function_free(f);

    /* the interpreter: the reference */
    kiln_function *ref = compile_with("interp", diag, sizeof diag, &err);
    ok(ref != NULL && diag[0] == 0, "interp compiles silently %s", diag);
    double s_ref = 0, a_ref[5] = {0};
    ok(ref && run(ref, &s_ref, a_ref) == 0, "interp runs");

    /* the example plugin serves add/mul kernels, refuses exp and sum */
    kiln_function *ex = compile_with("example", diag, sizeof diag, &err);
    ok(ex != NULL, "example compiles %s", ex ? "" : err.message);
    if (ex) {
        int n_ex = 0, n_interp = 0;
        for (int i = 0; i < kiln_function_n_kernels(ex); i++) {
            const char *be = kiln_function_kernel_backend(ex, i);
            n_ex += strcmp(be, "example") == 0;
            n_interp += strcmp(be, "interp") == 0;
        }
        ok(n_ex == 3 && n_interp == 2,
           "add/mul kernels on example (%d), exp and sum on interp (%d)",
           n_ex, n_interp);
        ok(count_lines(diag) == 2 && strstr(diag, "backend 'example' on "
                                                  "kernel") != NULL &&
               strstr(diag, "refused") != NULL,
           "one line per refused kernel: %s", diag);
        double s = 0, a[5] = {0};
        ok(run(ex, &s, a) == 0, "example runs");
        ok(s == s_ref && memcmp(a, a_ref, sizeof a) == 0,
           "example and interp agree exactly (%.17g vs %.17g)", s, s_ref);
    }
    kiln_function_free(ex);
    kiln_function_free(ref);
    return done_testing();
}
