/*
 * test_safetensors.c — TAP tests for the safetensors reader
 * (kiln_safetensors_*, <kiln/io.h>) and the binding of shared values to
 * its tensors (kiln_graph_bind_safetensors, the .kg source
 * `safetensors("FILE", "TENSOR")`), issue 29.
 *
 * The files are written by tests/safetensors_cases.py (numpy, struct,
 * json: not kiln), which prints what reading each must give: values as
 * hexadecimal floats (f16 through numpy's float16, bf16 as float32
 * values whose low half is zero), errors with the kiln code and a part
 * of the message.  A bound model (y = W x + b) runs on every backend
 * against numpy's y.  SKIP without /usr/bin/python3 or numpy.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "found_backends.h"
#include "tmpfiles.h"

static int code_of(const char *s)
{
    return strcmp(s, "PARSE") == 0   ? KILN_ERR_PARSE
           : strcmp(s, "NAME") == 0  ? KILN_ERR_NAME
           : strcmp(s, "IO") == 0    ? KILN_ERR_IO
           : strcmp(s, "TYPE") == 0  ? KILN_ERR_TYPE
           : strcmp(s, "SHAPE") == 0 ? KILN_ERR_SHAPE
                                     : -1;
}

/* The n numbers after the next "|" of *p (hex floats, nan, inf). */
static int read_values(char **p, double *v, int cap)
{
    char *bar = strchr(*p, '|');
    if (!bar)
        return -1;
    char *s = bar + 1, *end;
    int n = 0;
    for (;;) {
        while (*s == ' ')
            s++;
        if (!*s || *s == '|' || *s == '\n')
            break;
        if (n == cap)
            return -1;
        v[n++] = strtod(s, &end);
        if (end == s)
            return -1;
        s = end;
    }
    *p = s;
    return n;
}

static double elem(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_F64: return ((const double *)t->data)[i];
    case KILN_F32: return ((const float *)t->data)[i];
    case KILN_I64: return (double)((const int64_t *)t->data)[i];
    case KILN_I32: return ((const int32_t *)t->data)[i];
    default: return ((const unsigned char *)t->data)[i];
    }
}

/* "tensor FILE NAME DTYPE RANK D.. | V.." */
static void tensor_case(char *line)
{
    char file[64], name[256], dt[16];
    int rank, used;
    if (sscanf(line, "tensor %63s %255s %15s %d%n", file, name, dt, &rank,
               &used) != 4) {
        ok(0, "manifest line: %s", line);
        return;
    }
    int64_t shape[KILN_MAX_RANK] = {0};
    char *p = line + used;
    for (int k = 0; k < rank; k++)
        shape[k] = strtoll(p, &p, 10);
    static double want[4096];
    int n = read_values(&p, want, 4096);
    kiln_err err = {0, ""};
    kiln_safetensors *st = NULL;
    kiln_tensor t;
    int rc = kiln_safetensors_open(tpath(file), NULL, &st, &err);
    if (!rc)
        rc = kiln_safetensors_get(st, name, &t, &err);
    if (!ok(!rc, "%s %s: read", file, name)) {
        diag("%s", err.message);
        kiln_safetensors_close(st);
        return;
    }
    int good = strcmp(kiln_dtype_name(t.dtype), dt) == 0 && t.rank == rank;
    for (int k = 0; good && k < rank; k++)
        good = t.shape[k] == shape[k];
    ok(good, "%s %s: dtype %s, rank %d", file, name, dt, rank);
    int64_t numel = kiln_shape_numel(t.rank, t.shape);
    int exact = good && numel == n && t.data != NULL;
    for (int64_t i = 0; exact && i < numel; i++) {
        double g = elem(&t, i);
        exact = isnan(want[i]) ? isnan(g)
                               : g == want[i] && signbit(g) == signbit(want[i]);
        if (!exact)
            diag("element %lld: %a, numpy %a", (long long)i, g, want[i]);
    }
    ok(exact, "%s %s: %d values exactly numpy's", file, name, n);
    kiln_safetensors_close(st);
}

/* "error FILE CODE TEXT" and "geterror FILE NAME CODE TEXT" */
static void error_case(char *line, int get)
{
    char file[64], name[256] = "", code[16];
    int used;
    int got = get ? sscanf(line, "geterror %63s %255s %15s %n", file, name,
                           code, &used)
                  : sscanf(line, "error %63s %15s %n", file, code, &used);
    if (got != (get ? 3 : 2)) {
        ok(0, "manifest line: %s", line);
        return;
    }
    char *text = line + used;
    text[strcspn(text, "\n")] = '\0';
    kiln_err err = {0, ""};
    kiln_safetensors *st = NULL;
    int rc = kiln_safetensors_open(tpath(file), NULL, &st, &err);
    if (get && !rc) {
        kiln_tensor t;
        rc = kiln_safetensors_get(st, name, &t, &err);
    }
    ok(rc == code_of(code) && (get || !st) && strstr(err.message, text) &&
           strstr(err.message, file),
       "%s%s%s: %s", file, get ? " " : "", name, err.message);
    if (get)
        kiln_safetensors_close(st);
}

static int mapped(const char *file)
{
    FILE *m = fopen("/proc/self/maps", "r");
    char buf[8192];
    int found = 0;
    while (m && fgets(buf, sizeof buf, m))
        if (strstr(buf, file))
            found = 1;
    if (m)
        fclose(m);
    return found;
}

static int check_y(kiln_function *f, const double *x, const double *y)
{
    float xf[6], *yo;
    for (int i = 0; i < 6; i++)
        xf[i] = (float)x[i];
    kiln_tensor in = {KILN_F32, 1, {6}, xf}, out[1];
    kiln_err err = {0, ""};
    if (kiln_function_call(f, &in, out, &err)) {
        diag("%s", err.message);
        return 0;
    }
    yo = out[0].data;
    for (int i = 0; i < 4; i++)
        if (!tap_close(yo[i], y[i], 1e-5))
            return 0;
    return 1;
}

static kiln_function *compile(const kiln_graph *g, const char *bk,
                              kiln_err *err)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = bk;
    o.quiet = 1;
    o.jobs = 1;
    return kiln_compile(g, &o, err);
}

static const char by_name[] =
    "kiln 1\ngraph m\n  shared model_w_proj: f32[4, 6]\n"
    "  shared model_bias: f32[4]\n  input x: f32[6]\n"
    "  output y = add(matmul(model_w_proj, x), model_bias)\nend\n";

/* "bind FILE | X.. | Y..": the .kg source and kiln_graph_bind_safetensors
 * on every backend */
static void bind_case(char *line, const char **bk, int nbk)
{
    char file[64];
    double x[6], y[4];
    char *p = line;
    if (sscanf(line, "bind %63s", file) != 1 ||
        read_values(&p, x, 6) != 6 || read_values(&p, y, 4) != 4) {
        ok(0, "manifest line: %s", line);
        return;
    }
    char text[1024];
    snprintf(text, sizeof text,
             "kiln 1\ngraph m\n"
             "  shared W: f32[4, 6] = safetensors(\"%s\", \"model.w.proj\")\n"
             "  shared b: f32[4] = safetensors(\"%s\", \"model.bias\")\n"
             "  input x: f32[6]\n  output y = add(matmul(W, x), b)\nend\n",
             file, file);
    for (int i = 0; i < nbk; i++) {
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_parse_string(text, "m.kg", tmpdir, &err);
        kiln_function *f = g ? compile(g, bk[i], &err) : NULL;
        kiln_graph_free(g);
        if (!ok(f != NULL, "%s: .kg safetensors() source compiles", bk[i]))
            diag("%s", err.message);
        ok(f && check_y(f, x, y), "%s: y = W x + b from the .kg source, "
           "numpy's y", bk[i]);
        kiln_function_free(f);

        g = kiln_parse_string(by_name, "m.kg", NULL, &err);
        int rc = g ? kiln_graph_bind_safetensors(g, tpath(file), &err) : -1;
        f = !rc ? compile(g, bk[i], &err) : NULL;
        ok(!rc && f, "%s: kiln_graph_bind_safetensors binds by name%s%s",
           bk[i], rc ? ": " : "", rc ? err.message : "");
        kiln_graph_free(g);
        ok(f && check_y(f, x, y) && mapped(file), "%s: y after the graph is "
           "freed; the file stays mapped while the function lives", bk[i]);
        kiln_function_free(f);
        ok(!mapped(file), "%s: the mapping goes with the function", bk[i]);
    }
}

static void bind_errors(void)
{
    static const struct {
        const char *file;
        int code;
        const char *text;
    } c[] = {
        {"clash.safetensors", KILN_ERR_NAME, "tensors 'model.w.proj' and "
         "'model_w.proj' both bind shared value 'model_w_proj'"},
        {"wrongtype.safetensors", KILN_ERR_TYPE, "tensor 'model.w.proj': "
         "shared 'model_w_proj': value has dtype f64, declared f32"},
        {"wrongshape.safetensors", KILN_ERR_SHAPE, "value has shape (6, 4), "
         "declared (4, 6)"},
        {"typo.safetensors", KILN_ERR_NAME, "shared value 'model_bias' has "
         "no tensor in"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        kiln_err err = {0, ""};
        kiln_graph *g = kiln_parse_string(by_name, "m.kg", NULL, &err);
        int rc = kiln_graph_bind_safetensors(g, tpath(c[i].file), &err);
        ok(rc == c[i].code && strstr(err.message, c[i].text),
           "bind %s: %s", c[i].file, err.message);
        /* nothing was bound: the good file binds both afterwards */
        kiln_err e2 = {0, ""};
        ok(kiln_graph_bind_safetensors(g, tpath("bind.safetensors"), &e2) ==
               0, "after the error nothing was bound%s%s", e2.code ? ": " : "",
           e2.message);
        kiln_graph_free(g);
    }
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(by_name, "m.kg", NULL, &err);
    ok(kiln_graph_bind_safetensors(g, tpath("typo.safetensors"), &err) ==
           KILN_ERR_NAME && strstr(err.message, "did you mean 'model_bais'"),
       "a missing tensor suggests the closest: %s", err.message);
    kiln_graph_free(g);
    /* a .kg source naming a tensor the file lacks */
    g = kiln_parse_string("kiln 1\ngraph m\n  shared w: f32[2] = "
                          "safetensors(\"one.safetensors\", \"W\")\n"
                          "  output y = w\nend\n", "m.kg", tmpdir, &err);
    ok(!g && err.code == KILN_ERR_NAME && strstr(err.message, "m.kg:3:") &&
           strstr(err.message, "no tensor 'W'"),
       ".kg source, no such tensor: %s", err.message);
    kiln_graph_free(g);
}

/* the caps of the data readers: FIFO, size limit; memfiles */
static void caps(void)
{
    kiln_err err = {0, ""};
    kiln_safetensors *st = NULL;
    const char *fifo = tpath("fifo.safetensors");
    if (mkfifo(fifo, 0600) == 0) {
        ok(kiln_safetensors_open(fifo, NULL, &st, &err) == KILN_ERR_IO &&
               strstr(err.message, "is a FIFO"), "a FIFO is refused without "
           "blocking: %s", err.message);
    } else {
        ok(1, "FIFO # SKIP mkfifo failed");
    }
    /* a /proc file: regular, size 0, yet bytes (was "truncated: 0
     * bytes") */
    if (access("/proc/self/maps", R_OK) == 0) {
        ok(kiln_safetensors_open("/proc/self/maps", NULL, &st, &err) ==
               KILN_ERR_IO &&
               strstr(err.message, "not a regular file of known size"),
           "/proc/self/maps is named, not 'truncated': %s", err.message);
    } else {
        ok(1, "/proc/self/maps # SKIP not readable");
    }
    kiln_read_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_size = 64;
    ok(kiln_safetensors_open(tpath("good.safetensors"), &o, &st, &err) ==
           KILN_ERR_PARSE && strstr(err.message, "over the data size limit"),
       "the size limit: %s", err.message);
    /* a memfile: read from memory, same tensors */
    FILE *f = fopen(tpath("bind.safetensors"), "rb");
    static char buf[65536];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    kiln_memfile mf = {"mem/bind.safetensors", buf, n};
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.memfiles = &mf;
    o.n_memfiles = 1;
    o.memfiles_only = 1;
    int rc = kiln_safetensors_open("mem/bind.safetensors", &o, &st, &err);
    kiln_tensor t;
    ok(!rc && kiln_safetensors_count(st) == 3 &&
           !kiln_safetensors_get(st, "model.w.proj", &t, &err) &&
           t.rank == 2 && t.shape[0] == 4 && t.shape[1] == 6,
       "a memfile is read from memory%s%s", rc ? ": " : "",
       rc ? err.message : "");
    const char *fd = NULL;
    kiln_tensor ti;
    ok(st && kiln_safetensors_info(st, 1, &ti, &fd) &&
           strcmp(kiln_safetensors_info(st, 1, NULL, NULL), "model.bias") ==
               0 && strcmp(fd, "BF16") == 0 && ti.dtype == KILN_F32 &&
           !kiln_safetensors_info(st, 3, NULL, NULL),
       "kiln_safetensors_info: header order, file dtype BF16 read as f32");
    kiln_safetensors_close(st);
}

int main(void)
{
    if (!tmp_make("kiln-st")) {
        ok(0, "temporary directory");
        return done_testing();
    }
    const char *top = getenv("KILN_SRCDIR");
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/safetensors_cases.py' "
             "'%s'", top ? top : "..", tmpdir);
    FILE *fp = access("/usr/bin/python3", X_OK) == 0 ? popen(cmd, "r")
                                                     : NULL;
    if (!fp) {
        ok(1, "safetensors cases # SKIP no /usr/bin/python3");
        rm_tree(tmpdir);
        return done_testing();
    }
    const char *bk[3];
    int nbk = found_backends(bk);
    static char line[1 << 16];
    int n = 0, skipped = 0;
    while (fgets(line, sizeof line, fp)) {
        n++;
        if (strncmp(line, "SKIP", 4) == 0) {
            ok(1, "safetensors cases # %s", line);
            skipped = 1;
        } else if (strncmp(line, "tensor ", 7) == 0) {
            tensor_case(line);
        } else if (strncmp(line, "error ", 6) == 0) {
            error_case(line, 0);
        } else if (strncmp(line, "geterror ", 9) == 0) {
            error_case(line, 1);
        } else if (strncmp(line, "bind ", 5) == 0) {
            bind_case(line, bk, nbk);
        }
    }
    ok(pclose(fp) == 0 && (skipped || n >= 30), "safetensors_cases.py ran "
       "(%d lines)", n);
    if (!skipped) {
        bind_errors();
        caps();
    }
    rm_tree(tmpdir);
    return done_testing();
}
