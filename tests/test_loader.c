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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* core/support/trust.h's test hook (exported by libkiln, not in a public
 * header): called after a plugin's directory and file were checked and opened,
 * before dlopen. */
extern void (*kiln_trust_test_hook)(const char *what, const char *path);

static char race_dir[900], race_evil[900];
static int race_swapped;

/* The rename race, made deterministic: once kiln has checked
 * race_dir/example.so, move race_dir away and put a symlink to a
 * directory holding something else named example.so in its place. */
static void swap_plugin_dir(const char *what, const char *path)
{
    char moved[1100];
    if (strcmp(what, "plugin") || strncmp(path, race_dir, strlen(race_dir)))
        return;
    snprintf(moved, sizeof moved, "%s.moved", race_dir);
    if (rename(race_dir, moved) == 0 && symlink(race_evil, race_dir) == 0)
        race_swapped = 1;
}

/* In a child (a fresh registry): the example plugin from race_dir, with
 * the directory swapped between the check and the load.  Loading goes
 * through the checked descriptor, so the checked file is what runs. */
static void test_race(const char *build)
{
    char cmd[8192];
    if (strlen(build) > 800)
        build = ".";
    snprintf(race_dir, sizeof race_dir, "%s/tests/loader-race.%ld/plug",
             build, (long)getpid());
    snprintf(race_evil, sizeof race_evil, "%s/tests/loader-race.%ld/evil",
             build, (long)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' '%s' && cp '%s/plugins/example/"
             ".libs/example.so' '%s/' && echo 'not a plugin' > "
             "'%s/example.so' && chmod -R go-w '%s/..'", race_dir, race_evil,
             build, race_dir, race_evil, race_dir);
    int setup = system(cmd);
    pid_t pid = fork();
    if (pid == 0) {
        snprintf(plugin_dirs, sizeof plugin_dirs, "%s", race_dir);
        kiln_trust_test_hook = swap_plugin_dir;
        char d[4096];
        kiln_err err = {0, ""};
        kiln_function *f = compile_with("example", d, sizeof d, &err);
        int on_example = 0;
        for (int i = 0; f && i < kiln_function_n_kernels(f); i++)
            on_example += !strcmp(kiln_function_kernel_backend(f, i),
                                  "example");
        kiln_function_free(f);
        struct stat st;
        int is_link = lstat(race_dir, &st) == 0 && S_ISLNK(st.st_mode);
        /* the evil file would say "skipping plugin ...: invalid ELF
         * header" (and the build tree's example.so would be used) */
        _exit(!race_swapped ? 3 : !is_link ? 4 : on_example != 3 ? 5
              : strstr(d, "plugin") ? 6 : 0);
    }
    int status = -1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    ok(setup == 0 && code == 0, "a plugin directory swapped for a symlink "
       "to another example.so between check and load: the checked file is "
       "loaded, through its descriptor (child status %d)", code);
    char *slash = strrchr(race_dir, '/');
    *slash = '\0';
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", race_dir);
    if (system(cmd) != 0)
        diag("could not remove %s", race_dir);
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

    test_race(b);
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
