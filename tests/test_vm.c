/*
 * test_vm.c — compiled functions: run-time input checks (each error names
 * the input and both shapes), symbolic dims, shape changes between calls,
 * shared-value rebinding, outputs of every kind, and no allocation in a
 * steady-state call.
 */
#define _GNU_SOURCE
#include <kiln/kiln.h>
#include <kiln/graph.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* counting allocations: n_allocs, COUNT_ALLOCS */
#include "count_allocs.h"

static kiln_function *compile_text(const char *text, kiln_err *err)
{
    kiln_graph *g = kiln_parse_string(text, "t.kg", NULL, err);
    if (!g)
        return NULL;
    kiln_function *f = kiln_compile(g, NULL, err);
    kiln_graph_free(g);
    return f;
}

static void test_input_errors(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(
        "kiln 1\ngraph g\n  input x: f64[n, 3]\n  input y: f64[n]\n"
        "  input s: f32\n  output z = add(sum(x, axis=1), y)\nend\n", &err);
    ok(f != NULL, "compile %s", f ? "" : err.message);
    if (!f)
        return;
    double x[12], y[4] = {1, 2, 3, 4};
    float s = 1;
    for (int i = 0; i < 12; i++)
        x[i] = i;
    kiln_tensor in[3] = {{KILN_F64, 2, {4, 3}, x},
                         {KILN_F64, 1, {4}, y},
                         {KILN_F32, 0, {0}, &s}};
    kiln_tensor out[1];
    ok(kiln_function_call(f, in, out, &err) == 0, "good call %s", err.message);
    double *z = out[0].data;
    ok(out[0].rank == 1 && out[0].shape[0] == 4 && z[0] == 0 + 1 + 2 + 1 &&
       z[3] == 9 + 10 + 11 + 4, "values of add(sum(x, axis=1), y)");

    kiln_tensor bad[3];
    memcpy(bad, in, sizeof bad);
    bad[0].dtype = KILN_F32;
    ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_TYPE &&
       strcmp(err.message, "input 'x': expected dtype f64, got f32") == 0,
       "dtype error: %s", err.message);
    memcpy(bad, in, sizeof bad);
    bad[0].shape[1] = 2;
    ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "input 'x': expected shape (n, 3), got (4, 2)") ==
           0,
       "static dim error: %s", err.message);
    memcpy(bad, in, sizeof bad);
    bad[1].rank = 2;
    bad[1].shape[1] = 1;
    ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "input 'y': expected shape (n), got (4, 1)") == 0,
       "rank error: %s", err.message);
    memcpy(bad, in, sizeof bad);
    bad[1].shape[0] = 3;
    ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "input 'y': got shape (3), but dim 0 is 'n', "
                           "which is 4 from input 'x'") == 0,
       "symbolic dim error: %s", err.message);
    /* a good call still works after errors, with a new n */
    double x2[6] = {1, 1, 1, 2, 2, 2}, y2[2] = {10, 20};
    kiln_tensor in2[3] = {{KILN_F64, 2, {2, 3}, x2},
                          {KILN_F64, 1, {2}, y2},
                          {KILN_F32, 0, {0}, &s}};
    ok(kiln_function_call(f, in2, out, &err) == 0 && out[0].shape[0] == 2 &&
       ((double *)out[0].data)[1] == 26, "n changes from 4 to 2");
    ok(kiln_function_call(f, in, out, &err) == 0 && out[0].shape[0] == 4 &&
       ((double *)out[0].data)[3] == 34, "and back to 4");
    kiln_function_free(f);
}

static void test_runtime_broadcast_error(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(
        "kiln 1\ngraph g\n  input x: f64[n]\n  const c: f64[3] = [1, 2, 3]\n"
        "  y = add(x, c)\n  output y\nend\n", &err);
    ok(f != NULL, "compile broadcast graph %s", f ? "" : err.message);
    if (!f)
        return;
    double x[4] = {0};
    kiln_tensor in[1] = {{KILN_F64, 1, {4}, x}};
    kiln_tensor out[1];
    int rc = kiln_function_call(f, in, out, &err);
    ok(rc == KILN_ERR_SHAPE &&
       strcmp(err.message, "node 'y' (add, .kg line 5): add: cannot "
                           "broadcast shapes (4) and (3)") == 0,
       "run-time broadcast error names the node and shapes: %s", err.message);
    in[0].shape[0] = 1;
    ok(kiln_function_call(f, in, out, &err) == 0 && out[0].shape[0] == 3 &&
       ((double *)out[0].data)[2] == 3, "n = 1 broadcasts");
    in[0].shape[0] = 3;
    ok(kiln_function_call(f, in, out, &err) == 0, "n = 3 matches");
    kiln_function_free(f);
}

static void test_outputs_and_shared(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_graph_new("g", &err);
    int64_t n = kiln_graph_symbol(g, "n");
    kiln_value x = kiln_graph_input(g, "x", KILN_F64, 1, &n, &err);
    double w0[3] = {1, 2, 3};
    kiln_tensor wt = {KILN_F64, 1, {3}, w0};
    int64_t three = 3;
    kiln_value w = kiln_graph_shared(g, "w", KILN_F64, 1, &three, &wt, &err);
    kiln_value lit = kiln_graph_literal(g, 2.5, KILN_LIT_FLOAT, &err);
    kiln_value in2[2] = {w, lit};
    kiln_value m = kiln_graph_op(g, "mul", 2, in2, NULL, 0, &err);
    kiln_value sx = kiln_graph_op(g, "sum", 1, &x, NULL, 0, &err);
    ok(x >= 0 && w >= 0 && lit >= 0 && m >= 0 && sx >= 0, "builder %s",
       err.message);
    kiln_graph_output(g, "wm", m, &err);
    kiln_graph_output(g, "x_again", x, &err);
    kiln_graph_output(g, "lit", lit, &err);
    kiln_graph_output(g, "sx", sx, &err);
    kiln_function *f = kiln_compile(g, NULL, &err);
    kiln_graph_free(g);
    ok(f != NULL, "compile %s", f ? "" : err.message);
    if (!f)
        return;
    ok(kiln_function_n_outputs(f) == 4 && kiln_function_n_shared(f) == 1 &&
       strcmp(kiln_function_output_name(f, 1), "x_again") == 0,
       "introspection");
    double xv[2] = {4, 5};
    kiln_tensor in[1] = {{KILN_F64, 1, {2}, xv}};
    kiln_tensor out[4];
    ok(kiln_function_call(f, in, out, &err) == 0, "call %s", err.message);
    ok(((double *)out[0].data)[2] == 7.5, "shared * literal");
    ok(out[1].shape[0] == 2 && ((double *)out[1].data)[1] == 5,
       "an input as output");
    ok(out[2].rank == 0 && *(double *)out[2].data == 2.5 &&
       out[2].dtype == KILN_F64, "a literal as output");
    ok(*(double *)out[3].data == 9, "sum");
    double w1[3] = {10, 20, 30};
    kiln_tensor nw = {KILN_F64, 1, {3}, w1};
    ok(kiln_function_bind_shared(f, "w", &nw, &err) == 0, "rebind w");
    ok(kiln_function_call(f, in, out, &err) == 0 &&
       ((double *)out[0].data)[2] == 75, "rebinding changes the result");
    kiln_tensor badw = {KILN_F64, 1, {4}, w1};
    ok(kiln_function_bind_shared(f, "w", &badw, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message,
              "shared value 'w': expected shape (3), got (4)") == 0,
       "rebind with a wrong shape: %s", err.message);
    ok(kiln_function_bind_shared(f, "v", &nw, &err) == KILN_ERR_NAME,
       "rebind an unknown name: %s", err.message);
    ok(kiln_function_call(f, in, out, &err) == 0 &&
       ((double *)out[0].data)[2] == 75, "value kept after a failed rebind");
    kiln_function_free(f);
}

static void test_steady_state(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(
        "kiln 1\ngraph g\n  input x: f64[n]\n  a = exp(x)\n  b = mul(a, x)\n"
        "  c = sub(b, 1)\n  d = log1p(square(c))\n  output s = sum(d)\n"
        "  output m = max(c)\nend\n", &err);
    ok(f != NULL, "compile chain %s", f ? "" : err.message);
    if (!f)
        return;
    double x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = i * 1e-3;
    kiln_tensor in[1] = {{KILN_F64, 1, {1000}, x}};
    kiln_tensor out[2];
    ok(kiln_function_call(f, in, out, &err) == 0, "first call");
    double s1 = *(double *)out[0].data;
#if COUNT_ALLOCS
    long before = n_allocs;
    for (int r = 0; r < 10; r++)
        kiln_function_call(f, in, out, &err);
    ok(n_allocs == before, "no allocation in 10 steady-state calls (%ld)",
       n_allocs - before);
#else
    ok(1, "# SKIP allocation counting under ASan");
#endif
    ok(*(double *)out[0].data == s1, "repeat calls give the same value");
    kiln_function_free(f);
}

static void test_compile_errors(void)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_graph_new("empty", &err);
    ok(kiln_compile(g, NULL, &err) == NULL && err.code == KILN_ERR_ARG &&
       strcmp(err.message, "graph 'empty' has no output") == 0,
       "no output: %s", err.message);
    kiln_graph_free(g);
    ok(kiln_compile(NULL, NULL, &err) == NULL && err.code == KILN_ERR_ARG,
       "NULL graph");
    /* an unknown backend falls back to interp with a diagnostic */
    kiln_graph *g2 = kiln_parse_string(
        "kiln 1\ngraph g\n  input x: f64\n  output y = exp(x)\nend\n", "t.kg",
        NULL, &err);
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = "nosuchbackend";
    FILE *diag = tmpfile();
    opt.diag = diag;
    kiln_function *f = g2 ? kiln_compile(g2, &opt, &err) : NULL;
    ok(f != NULL && strcmp(kiln_function_kernel_backend(f, 0), "interp") == 0,
       "unknown backend falls back to interp");
    char line[512] = "";
    if (diag) {
        rewind(diag);
        if (!fgets(line, sizeof line, diag))
            line[0] = 0;
        fclose(diag);
    }
    ok(strstr(line, "backend 'nosuchbackend' not found") != NULL &&
       strstr(line, "using interp") != NULL, "one-line diagnostic: %s", line);
    kiln_function_free(f);
    kiln_graph_free(g2);
}

/* More steps than the lowering's first allocation (64): kernels must not
 * keep pointers into the step array while it grows (a crash found by
 * bench/run.sh's 1000-kernel chain). */
static void test_long_chain(void)
{
    enum { N = 300 };
    static char text[N * 64 + 256];
    size_t len = (size_t)snprintf(text, sizeof text,
                                  "kiln 1\ngraph chain\n  input x0: f64\n");
    for (int i = 1; i <= N; i++)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "  x%d = add(mul(x%d, 0.999), 0.001)\n", i,
                                i - 1);
    snprintf(text + len, sizeof text - len, "  output y = x%d\nend\n", N);
    kiln_err err = {0, ""};
    /* one kernel per node: fusion (docs/rewrite.md) would make the chain a
     * handful of kernels */
    setenv("KILN_PASSES", "-fuse", 1);
    kiln_function *f = compile_text(text, &err);
    unsetenv("KILN_PASSES");
    ok(f != NULL && kiln_function_n_kernels(f) == 2 * N,
       "a chain of %d kernels compiles %s", 2 * N, f ? "" : err.message);
    if (!f)
        return;
    double x = 0.5, want = 0.5;
    for (int i = 1; i <= N; i++)
        want = want * 0.999 + 0.001;
    kiln_tensor in[1] = {{KILN_F64, 0, {0}, &x}};
    kiln_tensor out[1];
    ok(kiln_function_call(f, in, out, &err) == 0 &&
       *(double *)out[0].data == want, "and computes x*0.999 + 0.001 %d times",
       N);
    kiln_function_free(f);
}

/* set_subtensor through an integer index: the update kernel's output is a
 * rank-1 view of a rank-2 buffer (a compile failure found by the plugin
 * ABI example's author). */
static void test_set_subtensor_int_index(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(
        "kiln 1\ngraph g\n  input m: f64[3, 4]\n  input v: f64[4]\n"
        "  output y = set_subtensor(m[0], v)\n"
        "  output z = inc_subtensor(m[1:, 2], 10)\nend\n", &err);
    ok(f != NULL, "set/inc_subtensor with an integer index compile %s",
       f ? "" : err.message);
    if (!f)
        return;
    double m[12], v[4] = {5, 6, 7, 8};
    for (int i = 0; i < 12; i++)
        m[i] = i;
    kiln_tensor in[2] = {{KILN_F64, 2, {3, 4}, m}, {KILN_F64, 1, {4}, v}};
    kiln_tensor out[2];
    ok(kiln_function_call(f, in, out, &err) == 0, "call %s", err.message);
    const double *y = out[0].data, *z = out[1].data;
    int good = 1;
    for (int i = 0; i < 12; i++) {
        double wy = i < 4 ? v[i] : m[i];
        double wz = m[i] + ((i / 4 >= 1 && i % 4 == 2) ? 10 : 0);
        good = good && y[i] == wy && z[i] == wz;
    }
    ok(good, "values of m[0] = v and m[1:, 2] += 10");
    ok(m[0] == 0 && m[6] == 6, "the input is not modified");
    kiln_function_free(f);
}

/* Bad shapes and dtypes from the caller, and run-time shapes whose size
 * overflows: one clear error each, never a wrapped size. */
static void test_hostile_calls(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(
        "kiln 1\ngraph g\n  input x: f64[n]\n  input k: i64[m, 0]\n"
        "  shared w: f64[p]\n  output s = sum(x)\n"
        "  output z = zeros(shape=[m, m])\nend\n", &err);
    ok(f != NULL, "compile %s", f ? "" : err.message);
    if (!f)
        return;
    double x[3] = {1, 2, 4}, w[1] = {0};
    kiln_tensor wt = {KILN_F64, 1, {1}, w};
    ok(kiln_function_bind_shared(f, "w", &wt, &err) == 0, "bind w %s",
       err.message);
    kiln_tensor in[2] = {{KILN_F64, 1, {3}, x}, {KILN_I64, 2, {2, 0}, NULL}};
    kiln_tensor out[2];
    ok(kiln_function_call(f, in, out, &err) == 0 &&
       ((double *)out[0].data)[0] == 7 && out[1].shape[0] == 2,
       "good call %s", err.message);

    kiln_tensor bad[2];
    memcpy(bad, in, sizeof bad);
    bad[0].shape[0] = -3;
    ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "input 'x': expected shape (n), got (-3)") == 0,
       "a negative dim is shown as given: %s", err.message);
    memcpy(bad, in, sizeof bad);
    bad[0].dtype = (kiln_dtype)77;
    ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_TYPE &&
       strcmp(err.message, "input 'x': expected dtype f64, got a bad dtype "
                           "77") == 0, "a bad dtype: %s", err.message);
    static const struct { int rank; int64_t d0, d1; const char *msg; }
    BIG[] = {
        {1, INT64_MAX, 0,
         "input 'x': shape (9223372036854775807) is too large"},
        {1, (int64_t)1 << 61, 0,
         "input 'x': shape (2305843009213693952) is too large"},
    };
    for (int i = 0; i < 2; i++) {
        memcpy(bad, in, sizeof bad);
        bad[0].rank = BIG[i].rank;
        bad[0].shape[0] = BIG[i].d0;
        ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_SHAPE &&
           strcmp(err.message, BIG[i].msg) == 0,
           "an input whose byte size overflows: %s", err.message);
    }
    /* k has no elements, so m can be anything: zeros(shape=[m, m]) is
     * too large for 2^31 (2^62 elements of 8 bytes) and 2^32 (2^64) */
    for (int i = 31; i <= 32; i++) {
        memcpy(bad, in, sizeof bad);
        bad[1].shape[0] = (int64_t)1 << i;
        char want[160];
        snprintf(want, sizeof want, "node 'z' (zeros, .kg line 7): shape (%lld, %lld) "
                 "is too large", (long long)bad[1].shape[0],
                 (long long)bad[1].shape[0]);
        ok(kiln_function_call(f, bad, out, &err) == KILN_ERR_SHAPE &&
           strcmp(err.message, want) == 0, "a run-time shape whose size "
           "overflows (m = 2^%d): %s", i, err.message);
    }
    ok(kiln_function_call(f, in, out, &err) == 0 &&
       ((double *)out[0].data)[0] == 7 && out[1].shape[1] == 2,
       "a good call after the errors %s", err.message);
    /* shared values too */
    kiln_tensor wb = {KILN_F64, 1, {INT64_MAX}, w};
    ok(kiln_function_bind_shared(f, "w", &wb, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "shared value 'w': expected shape (1), got "
                           "(9223372036854775807)") == 0,
       "rebinding w with a huge shape: %s", err.message);
    kiln_function_free(f);
    f = compile_text("kiln 1\ngraph g\n  shared w: f64[p]\n"
                     "  output s = sum(w)\nend\n", &err);
    ok(f != NULL, "compile %s", f ? "" : err.message);
    if (!f)
        return;
    ok(kiln_function_bind_shared(f, "w", &wb, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "shared value 'w': shape (9223372036854775807) "
                           "is too large") == 0,
       "binding w with a huge shape: %s", err.message);
    kiln_tensor wn = {KILN_F64, 1, {2}, NULL};
    ok(kiln_function_bind_shared(f, "w", &wn, &err) == KILN_ERR_ARG &&
       strcmp(err.message, "shared value 'w': data is NULL") == 0,
       "binding w with NULL data: %s", err.message);
    kiln_function_free(f);
}

/* A call with the shapes of the previous good call skips the input checks
 * (core/runtime/context.c, same_as_last): what it must still catch, and
 * what a rebinding of shared values changes. */
static void test_repeat_call_checks(void)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_text(
        "kiln 1\ngraph g\n  input x: f64[n]\n  shared w: f64[n]\n"
        "  output s = sum(mul(x, w))\nend\n", &err);
    ok(f != NULL, "compile %s", f ? "" : err.message);
    if (!f)
        return;
    double w3[3] = {1, 10, 100};
    double xa[3] = {1, 2, 3}, xb[3] = {4, 5, 6}, x2[2] = {7, 8};
    kiln_tensor wt = {KILN_F64, 1, {3}, w3};
    ok(kiln_function_bind_shared(f, "w", &wt, &err) == 0, "bind w (3) %s",
       err.message);
    kiln_tensor in = {KILN_F64, 1, {3}, xa}, out[1];
    ok(kiln_function_call(f, &in, out, &err) == 0 &&
       *(double *)out[0].data == 321, "first call %s", err.message);
    in.data = xb;    /* same shape, other data: the new values are read */
    ok(kiln_function_call(f, &in, out, &err) == 0 &&
       *(double *)out[0].data == 654, "same shape, new data %s",
       err.message);
    in.data = NULL;
    ok(kiln_function_call(f, &in, out, &err) == KILN_ERR_ARG &&
       strcmp(err.message, "input 'x': data is NULL") == 0,
       "same shape, NULL data: %s", err.message);
    in.data = xa;
    in.dtype = KILN_F32;
    ok(kiln_function_call(f, &in, out, &err) == KILN_ERR_TYPE,
       "same shape, another dtype: %s", err.message);
    in.dtype = KILN_F64;
    ok(kiln_function_call(f, &in, out, &err) == 0 &&
       *(double *)out[0].data == 321, "good again %s", err.message);
    /* w rebound (same shape, a shared value's shape is fixed): the next
     * call reads the new values; a shape that disagrees still fails */
    double w3b[3] = {2, 20, 200};
    wt.data = w3b;
    ok(kiln_function_bind_shared(f, "w", &wt, &err) == 0, "rebind w %s",
       err.message);
    ok(kiln_function_call(f, &in, out, &err) == 0 &&
       *(double *)out[0].data == 642, "the rebound w is read %s",
       err.message);
    kiln_tensor in2 = {KILN_F64, 1, {2}, x2};
    ok(kiln_function_call(f, &in2, out, &err) == KILN_ERR_SHAPE &&
       strcmp(err.message, "input 'x': got shape (2), but dim 0 is 'n', "
                           "which is 3 from a shared value") == 0,
       "x of 2 against w of 3: %s", err.message);
    ok(kiln_function_call(f, &in, out, &err) == 0 &&
       *(double *)out[0].data == 642, "and x of 3 again %s", err.message);
    kiln_function_free(f);
}

int main(void)
{
    test_set_subtensor_int_index();
    test_long_chain();
    test_input_errors();
    test_runtime_broadcast_error();
    test_outputs_and_shared();
    test_steady_state();
    test_compile_errors();
    test_hostile_calls();
    test_repeat_call_checks();
    return done_testing();
}
