/*
 * test_llvm.c — the llvm backend plugin on its own (the corpus comparison
 * with the interpreter is in test_backends.c):
 *
 *  1. object round trip: compile -> artifact_bytes -> load_bytes in a
 *     fresh JIT gives bitwise the results of the callable loaded from the
 *     artifact, and of the interpreter; contiguous, broadcast (stride 0),
 *     strided, negative-stride and in-place views; REDUCE to a scalar and
 *     along a kept axis;
 *  2. a fresh process (this program re-executed with --child) that only
 *     calls load_bytes on bytes written by this one gets the same results;
 *  3. bad bytes are refused with a message, never a crash;
 *  4. emit_text gives optimised IR whose elementwise loop is vectorised
 *     (a `<N x double>` operation) and the wide kernel (300 inputs, past
 *     the alias-set tracker's default saturation) is vectorised too;
 *  5. long programs, cut into segment functions, equal the interpreter
 *     bitwise; a full reduction carries only its scalar row functions;
 *  6. fast_math: a sum's loop becomes a vector reduction (without it,
 *     not), within a tolerance of the interpreter;
 *  7. GATHER is compiled and equals the interpreter, messages included;
 *  8. JOIN, SCATTER and DOT are compiled and equal the interpreter
 *     bitwise, messages included, called through fn, from the artifact's
 *     bytes and prepared (ABI 1.4); steady-state prepared calls allocate
 *     nothing.
 *
 * Skips everything when the plugin was not built.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NOLOAD */
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "count_allocs.h"
#include "open_backend.h"
#include "runtime.h"
#include "tap.h"
#include "compile_load.h"

static const kiln_backend *L, *I;

/* ---- kernels ----------------------------------------------------------- */

#define N 1000
static kiln_arg_desc d1[8] = {{KILN_F64, 1, {0}}, {KILN_F64, 1, {0}},
                              {KILN_F64, 1, {0}}, {KILN_F64, 1, {0}}};
static kiln_arg_desc d2[4] = {{KILN_F64, 2, {0}}, {KILN_F64, 2, {0}},
                              {KILN_F64, 2, {0}}};

/* out = where(x > 0, exp(x) * y, maximum(x, y)) - 1.5 */
static kiln_instr ew_prog[] = {
    {KILN_I_LOAD, KILN_F64, 0, 0, -1, -1, 0},
    {KILN_I_LOAD, KILN_F64, 0, 1, -1, -1, 0},
    {KILN_I_CONST, KILN_F64, 0, -1, -1, -1, 0},
    {KILN_I_GT, KILN_BOOL, 0, 0, 2, -1, 0},
    {KILN_I_EXP, KILN_F64, 0, 0, -1, -1, 0},
    {KILN_I_MUL, KILN_F64, 0, 4, 1, -1, 0},
    {KILN_I_MAXIMUM, KILN_F64, 0, 0, 1, -1, 0},
    {KILN_I_WHERE, KILN_F64, 0, 3, 5, 6, 0},
    {KILN_I_CONST, KILN_F64, 0, -1, -1, -1, 1.5},
    {KILN_I_SUB, KILN_F64, 0, 7, 8, -1, 0},
};
static int32_t ref9 = 9;

/* sum(x * y) */
static kiln_instr red_prog[] = {
    {KILN_I_LOAD, KILN_F64, 0, 0, -1, -1, 0},
    {KILN_I_LOAD, KILN_F64, 0, 1, -1, -1, 0},
    {KILN_I_MUL, KILN_F64, 0, 0, 1, -1, 0},
};
static int32_t ref2 = 2;

static kiln_kernel make_kernel(uint32_t kind, uint32_t rank)
{
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = kind;
    k.n_inputs = 2;
    k.n_outputs = 1;
    k.inputs = rank == 1 ? d1 : d2;
    k.outputs = rank == 1 ? d1 + 2 : d2 + 2;
    if (kind == KILN_KERNEL_ELEMWISE) {
        k.n_instrs = sizeof ew_prog / sizeof ew_prog[0];
        k.instrs = ew_prog;
        k.out_refs = &ref9;
        k.label = "ew";
    } else {
        k.n_instrs = 3;
        k.instrs = red_prog;
        k.out_refs = &ref2;
        k.reduce_op = KILN_REDUCE_SUM;
        k.label = "sum";
    }
    return k;
}

static double xs[2 * N], ys[2 * N];

static void fill(void)
{
    for (int i = 0; i < 2 * N; i++) {
        xs[i] = sin(0.37 * i) * 3.0;
        ys[i] = cos(0.11 * i) * 2.0 - 0.5;
    }
    xs[7] = NAN;
    ys[11] = INFINITY;
    xs[13] = -0.0;
}

static kiln_view view1(void *p, int64_t n, int64_t s)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = p;
    v.rank = 1;
    v.dtype = KILN_F64;
    v.shape[0] = n;
    v.strides[0] = s;
    return v;
}

static int call(const kiln_callable *c, kiln_view *in, kiln_view *out)
{
    char eb[256] = "";
    kiln_call k = {sizeof k, 2, 1, in, out, kiln_runtime_get(), eb, sizeof eb, NULL, 0};
    int rc = c->fn(c->state, &k);
    if (rc)
        diag("kernel failed: %s", eb);
    return rc;
}

/* Run the elementwise kernel with several view layouts; results into
 * res (5 * N doubles). */
static void run_ew(const kiln_callable *c, double *res)
{
    double tmp[N];
    memset(res, 0, sizeof(double) * 5 * N);
    kiln_view in[2], out[1];
    in[0] = view1(xs, N, 1); in[1] = view1(ys, N, 1);          /* contiguous */
    out[0] = view1(res, N, 1);
    call(c, in, out);
    in[1] = view1(ys + 3, N, 0);                                 /* broadcast */
    out[0] = view1(res + N, N, 1);
    call(c, in, out);
    in[0] = view1(xs, N, 2); in[1] = view1(ys + 2 * N - 1, N, -2); /* strided */
    out[0] = view1(res + 2 * N, N, 1);
    call(c, in, out);
    memcpy(tmp, xs, sizeof tmp);                                 /* in place */
    in[0] = view1(tmp, N, 1); in[1] = view1(ys, N, 1);
    out[0] = view1(tmp, N, 1);
    call(c, in, out);
    memcpy(res + 3 * N, tmp, sizeof tmp);
    in[0] = view1(xs, 0, 1); in[1] = view1(ys, 0, 1);            /* empty */
    out[0] = view1(res + 4 * N, 0, 1);
    call(c, in, out);
}

/* The reduction: to a scalar (1-D), over axis 1 and over axis 0 of a
 * (20, 50) matrix, with the output view's stride-0 axes. */
static void run_red(const kiln_callable *c1, const kiln_callable *c2,
                    double *res)
{
    kiln_view in[2], out[1];
    in[0] = view1(xs, N, 1); in[1] = view1(ys, N, 1);
    out[0] = view1(res, N, 0);
    call(c1, in, out);
    in[1] = view1(ys, N, 0);
    out[0] = view1(res + 1, N, 0);
    call(c1, in, out);
    for (int axis = 0; axis < 2; axis++) {
        kiln_view a = view1(xs + 10, 0, 0), b = view1(ys, 0, 0),
                  o = view1(res + 2 + axis * 50, 0, 0);
        a.rank = b.rank = o.rank = 2;
        a.shape[0] = b.shape[0] = o.shape[0] = 20;
        a.shape[1] = b.shape[1] = o.shape[1] = 50;
        a.strides[0] = 50; a.strides[1] = 1;
        b.strides[0] = 1; b.strides[1] = 20;        /* transposed */
        o.strides[0] = axis == 0 ? 0 : 1;
        o.strides[1] = axis == 0 ? 1 : 0;
        in[0] = a; in[1] = b; out[0] = o;
        call(c2, in, out);
    }
}

static int same(const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        if (memcmp(&a[i], &b[i], sizeof(double)) != 0) {
            diag("element %zu: %.17g vs %.17g", i, a[i], b[i]);
            return 0;
        }
    }
    return 1;
}

static kiln_callable *from_bytes(const unsigned char *b, size_t len)
{
    kiln_callable *c = NULL;
    kiln_plugin_error *e = NULL;
    if (L->load_bytes(b, len, &c, &e)) {
        diag("load_bytes: %s", e ? e->message : "?");
        L->error_free(e);
        return NULL;
    }
    return c;
}

/* Child: load the three kernels from files and write results. */
static int child_main(const char *dir)
{
    L = open_backend(getenv("KILN_BUILDDIR"), "llvm");
    if (!L)
        return 3;
    fill();
    const char *names[3] = {"ew", "r1", "r2"};
    kiln_callable *c[3];
    for (int i = 0; i < 3; i++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/%s.bin", dir, names[i]);
        FILE *f = fopen(path, "rb");
        if (!f)
            return 4;
        unsigned char buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        c[i] = from_bytes(buf, len);
        if (!c[i])
            return 5;
    }
    static double r[5 * N + 200];
    run_ew(c[0], r);
    run_red(c[1], c[2], r + 5 * N);
    char path[4300];
    snprintf(path, sizeof path, "%s/child.out", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(r, sizeof r, 1, f) != 1)
        return 6;
    fclose(f);
    for (int i = 0; i < 3; i++)
        L->callable_free(c[i]);
    return 0;
}

/* A long program (more than the 512-instruction segments a row function
 * is cut into): values computed in the first segment and read in the
 * last (a bool, an f32, an i64) go through the stack temporaries, the
 * tanh chain crosses every segment boundary.  Elementwise (every view
 * layout of run_ew, in place included) and reductions (scalar and along
 * either axis) against the interpreter, bitwise; a full reduction
 * (reduce_axes = all) carries no kept-axis row functions. */
enum { REPS = 200 };
static kiln_instr wide_prog[12 + 4 * REPS];
static int32_t wide_ref;

static uint32_t make_wide(void)
{
    kiln_instr *p = wide_prog;
    int n = 0;
    p[n++] = (kiln_instr){KILN_I_LOAD, KILN_F64, 0, 0, -1, -1, 0};   /* 0 x */
    p[n++] = (kiln_instr){KILN_I_LOAD, KILN_F64, 0, 1, -1, -1, 0};   /* 1 y */
    p[n++] = (kiln_instr){KILN_I_CONST, KILN_F64, 0, -1, -1, -1, 0.25};
    p[n++] = (kiln_instr){KILN_I_GT, KILN_BOOL, 0, 0, 2, -1, 0};     /* 3 */
    p[n++] = (kiln_instr){KILN_I_CAST, KILN_F32, 0, 1, -1, -1, 0};   /* 4 */
    p[n++] = (kiln_instr){KILN_I_CAST, KILN_I64, 0, 0, -1, -1, 0};   /* 5 */
    int v = 0;
    for (int r = 0; r < REPS; r++) {
        int c = n;
        p[n++] = (kiln_instr){KILN_I_CONST, KILN_F64, 0, -1, -1, -1, 1.0 + 0.01 * r};
        p[n] = (kiln_instr){KILN_I_MUL, KILN_F64, 0, v, c, -1, 0};
        p[n + 1] = (kiln_instr){KILN_I_ADD, KILN_F64, 0, n, 1, -1, 0};
        p[n + 2] = (kiln_instr){KILN_I_TANH, KILN_F64, 0, n + 1, -1, -1, 0};
        v = n + 2;
        n += 3;
    }
    p[n] = (kiln_instr){KILN_I_CAST, KILN_F64, 0, 4, -1, -1, 0};
    p[n + 1] = (kiln_instr){KILN_I_CAST, KILN_F64, 0, 5, -1, -1, 0};
    p[n + 2] = (kiln_instr){KILN_I_ADD, KILN_F64, 0, n, n + 1, -1, 0};
    p[n + 3] = (kiln_instr){KILN_I_WHERE, KILN_F64, 0, 3, v, n + 2, 0};
    wide_ref = n + 3;
    return (uint32_t)n + 4;
}

static void test_wide(void)
{
    uint32_t ni = make_wide();
    kiln_kernel ke = make_kernel(KILN_KERNEL_ELEMWISE, 1);
    ke.n_instrs = ni;
    ke.instrs = wide_prog;
    ke.out_refs = &wide_ref;
    kiln_kernel kr1 = make_kernel(KILN_KERNEL_REDUCE, 1);
    kiln_kernel kr2 = make_kernel(KILN_KERNEL_REDUCE, 2);
    kr1.n_instrs = kr2.n_instrs = ni;
    kr1.instrs = kr2.instrs = wide_prog;
    kr1.out_refs = kr2.out_refs = &wide_ref;
    kiln_callable *ce = compile_load(L, &ke, NULL, NULL),
                  *cr1 = compile_load(L, &kr1, NULL, NULL),
                  *cr2 = compile_load(L, &kr2, NULL, NULL),
                  *ie = compile_load(I, &ke, NULL, NULL),
                  *ir1 = compile_load(I, &kr1, NULL, NULL),
                  *ir2 = compile_load(I, &kr2, NULL, NULL);
    if (!(ce && cr1 && cr2 && ie && ir1 && ir2)) {
        ok(0, "a %u-instruction program compiles", ni);
    } else {
        static double rl[5 * N + 200], ri[5 * N + 200];
        run_ew(ce, rl);
        run_red(cr1, cr2, rl + 5 * N);
        run_ew(ie, ri);
        run_red(ir1, ir2, ri + 5 * N);
        ok(same(rl, ri, 5 * N + 200), "a %u-instruction program (segments, "
           "carried bool/f32/i64 values): elementwise and reductions equal "
           "interp bitwise", ni);
    }
    kiln_callable *all[] = {ce, cr1, cr2};
    for (int i = 0; i < 3; i++)
        if (all[i])
            L->callable_free(all[i]);
    kiln_callable *alli[] = {ie, ir1, ir2};
    for (int i = 0; i < 3; i++)
        if (alli[i])
            I->callable_free(alli[i]);

    /* IR: segment functions; a full reduction has no kept-axis rows */
    char *text = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    int rc = L->emit_text(&ke, &co, &text, &e);
    ok(rc == 0 && text && strstr(text, "@kiln_ec.1(") && strstr(text, "@kiln_es.1("),
       "the long program is cut into segment functions");
    if (text)
        L->text_free(text);
    kiln_kernel kf = make_kernel(KILN_KERNEL_REDUCE, 1);
    kf.reduce_axes = 1;
    text = NULL;
    rc = L->emit_text(&kf, &co, &text, &e);
    ok(rc == 0 && text && strstr(text, "@kiln_rc(") && !strstr(text, "@kiln_uc("),
       "a full reduction emits kiln_rc/kiln_rs only");
    if (text)
        L->text_free(text);
    kiln_callable *cf = compile_load(L, &kf, NULL, NULL);
    kiln_callable *ci = compile_load(I, &kf, NULL, NULL);
    double a[2] = {0, 0}, bb[2] = {0, 0};
    if (cf && ci) {
        kiln_view in[2] = {view1(xs, N, 1), view1(ys, N, 1)};
        kiln_view out = view1(a, N, 0);
        call(cf, in, &out);
        out = view1(bb, N, 0);
        call(ci, in, &out);
    }
    ok(cf && ci && same(a, bb, 1), "the full reduction equals interp bitwise");
    /* the same kernel called with a kept axis (a description that lies
     * about reduce_axes) runs on the interpreter, not on code that does
     * not exist */
    static double ka[N], kb[N];
    if (cf && ci) {
        kiln_view in[2] = {view1(xs, N, 1), view1(ys, N, 1)};
        kiln_view out = view1(ka, N, 1);
        call(cf, in, &out);
        out = view1(kb, N, 1);
        call(ci, in, &out);
    }
    ok(cf && ci && same(ka, kb, N), "called with a kept axis, it runs the "
       "interpreter's code");
    if (cf)
        L->callable_free(cf);
    if (ci)
        I->callable_free(ci);
}

/* fast_math: the sum's loop becomes a vector reduction (reordered
 * additions), and stays within a tolerance of the interpreter; without
 * it the fold stays scalar and in order. */
static void test_fast(void)
{
    kiln_kernel kf = make_kernel(KILN_KERNEL_REDUCE, 1);
    kf.reduce_axes = 1;
    char *t0 = NULL, *t1 = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    int rc0 = L->emit_text(&kf, &co, &t0, &e);
    co.fast_math = 1;
    int rc1 = L->emit_text(&kf, &co, &t1, &e);
    ok(rc0 == 0 && t0 && !strstr(t0, "fadd <") && !strstr(t0, "vector.reduce.fadd"),
       "without fast_math the sum stays a scalar, in-order fold");
    ok(rc1 == 0 && t1 && (strstr(t1, "fadd <") || strstr(t1, "vector.reduce.fadd"))
       && strstr(t1, "\"unsafe-fp-math\"=\"true\""),
       "with fast_math it is a vector reduction (and unsafe-fp-math)");
    if (t0)
        L->text_free(t0);
    if (t1)
        L->text_free(t1);
    kiln_artifact *a = NULL;
    kiln_callable *c = NULL, *ci = compile_load(I, &kf, NULL, NULL);
    double r[3] = {0, 0, 0}, ri[3] = {0, 0, 0};
    double x2[N], y2[N];
    for (int i = 0; i < N; i++) {   /* finite: no NaN/inf in this sum */
        x2[i] = sin(0.37 * i) * 3.0;
        y2[i] = cos(0.11 * i) * 2.0 - 0.5;
    }
    if (L->compile(&kf, &co, &a, &e) == 0 && L->load(a, &c, &e) == 0 && ci) {
        int64_t ns[3] = {N, 7, 256};
        for (int q = 0; q < 3; q++) {
            kiln_view in[2] = {view1(x2, ns[q], 1), view1(y2, ns[q], 1)};
            kiln_view out = view1(&r[q], ns[q], 0);
            call(c, in, &out);
            out = view1(&ri[q], ns[q], 0);
            call(ci, in, &out);
        }
    }
    int close = c && ci;
    for (int q = 0; q < 3 && close; q++)
        if (!(fabs(r[q] - ri[q]) <= 1e-12 * (1.0 + fabs(ri[q])))) {
            diag("n=%d: %.17g vs %.17g", q, r[q], ri[q]);
            close = 0;
        }
    ok(close, "fast_math sums agree with interp within 1e-12 (%.17g vs %.17g)",
       r[0], ri[0]);
    if (a)
        L->artifact_free(a);
    if (c)
        L->callable_free(c);
    if (ci)
        I->callable_free(ci);
    L->error_free(e);
}

/* GATHER compiled: take(x, idx) along the last axis (one element per
 * index), i64 and i32 indices, negative ones, strided views, against the
 * interpreter bitwise; an index out of range gets the interpreter's
 * message; a sub-array gather (x[idx] of a matrix) is the interpreter's. */
static void test_gather(void)
{
    static kiln_arg_desc gd[2][3] = {
        {{KILN_F64, 1, {0}}, {KILN_I64, 1, {0}}, {KILN_F64, 1, {0}}},
        {{KILN_F64, 1, {0}}, {KILN_I32, 1, {0}}, {KILN_F64, 1, {0}}}};
    int good = 1, compiled = 1;
    for (int w = 0; w < 2; w++) {
        kiln_kernel k;
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        k.kind = KILN_KERNEL_GATHER;
        k.n_inputs = 2;
        k.n_outputs = 1;
        k.inputs = gd[w];
        k.outputs = gd[w] + 2;
        k.label = "take";
        kiln_callable *cl = compile_load(L, &k, NULL, NULL),
                      *ci = compile_load(I, &k, NULL, NULL);
        if (!cl || !ci) {
            compiled = 0;
        } else {
            static int64_t i64[N];
            static int32_t i32[N];
            static double ol[2 * N], oi[2 * N];
            for (int i = 0; i < N; i++) {
                i64[i] = (int64_t)((i * 7919) % 1999) - 999;  /* -999..999 */
                i32[i] = (int32_t)i64[i];
            }
            for (int lay = 0; lay < 2; lay++) {
                kiln_view in[2], out;
                in[0] = view1(xs + (lay ? 1998 : 0), 1000, lay ? -2 : 2);
                in[1] = view1(w ? (void *)i32 : (void *)i64, lay ? N / 2 : N, lay ? 2 : 1);
                in[1].dtype = w ? KILN_I32 : KILN_I64;
                for (int b = 0; b < 2; b++) {
                    double *o = b ? oi : ol;
                    memset(o, 0, sizeof ol);
                    out = view1(o, in[1].shape[0], lay ? 2 : 1);
                    call(b ? ci : cl, in, &out);
                }
                good = good && same(ol, oi, 2 * N);
            }
            /* out of range: the interpreter's message, from llvm */
            int64_t badidx[3] = {0, 5, -7};
            int32_t badidx32[3] = {0, 5, -7};
            kiln_view in[2] = {view1(xs, 4, 1),
                               view1(w ? (void *)badidx32 : (void *)badidx, 3, 1)};
            in[1].dtype = w ? KILN_I32 : KILN_I64;
            double o[3];
            kiln_view out = view1(o, 3, 1);
            char e1[256] = "", e2[256] = "";
            kiln_call c1 = {sizeof c1, 2, 1, in, &out, kiln_runtime_get(), e1, sizeof e1, NULL, 0};
            kiln_call c2 = {sizeof c2, 2, 1, in, &out, kiln_runtime_get(), e2, sizeof e2, NULL, 0};
            int r1 = cl->fn(cl->state, &c1), r2 = ci->fn(ci->state, &c2);
            if (!(r1 != 0 && r1 == r2 && strcmp(e1, e2) == 0 && e1[0])) {
                diag("out of range: %d '%s' vs %d '%s'", r1, e1, r2, e2);
                good = 0;
            }
            /* a long gather (several of the iteration's blocks), and
             * one with a bad index near its end */
            enum { LONG = 3 * 2048 + 5 };
            static int64_t li64[LONG];
            static int32_t li32[LONG];
            static double lo[2][LONG];
            for (int i = 0; i < LONG; i++) {
                li64[i] = (i * 31) % 4 - 2;          /* -2..1, in range */
                li32[i] = (int32_t)li64[i];
            }
            kiln_view lin[2] = {view1(xs, 4, 1),
                                view1(w ? (void *)li32 : (void *)li64, LONG, 1)};
            lin[1].dtype = w ? KILN_I32 : KILN_I64;
            kiln_view lout[2] = {view1(lo[0], LONG, 1), view1(lo[1], LONG, 1)};
            call(cl, lin, &lout[0]);
            call(ci, lin, &lout[1]);
            if (!same(lo[0], lo[1], LONG)) {
                diag("a %d-index gather differs from the interpreter", LONG);
                good = 0;
            }
            li64[LONG - 3] = 4;
            li32[LONG - 3] = 4;
            kiln_call c3 = {sizeof c3, 2, 1, lin, &lout[0], kiln_runtime_get(), e1, sizeof e1, NULL, 0};
            kiln_call c4 = {sizeof c4, 2, 1, lin, &lout[1], kiln_runtime_get(), e2, sizeof e2, NULL, 0};
            e1[0] = e2[0] = 0;
            r1 = cl->fn(cl->state, &c3);
            r2 = ci->fn(ci->state, &c4);
            if (!(r1 != 0 && r1 == r2 && strcmp(e1, e2) == 0 && e1[0])) {
                diag("out of range in a late block: %d '%s' vs %d '%s'", r1,
                     e1, r2, e2);
                good = 0;
            }
        }
        if (cl)
            L->callable_free(cl);
        if (ci)
            I->callable_free(ci);
        if (w == 0) {
            char *text = NULL;
            kiln_plugin_error *e = NULL;
            kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
            ok(L->emit_text(&k, &co, &text, &e) == 0 && text && strstr(text, "@kiln_gc("),
               "GATHER is compiled (kiln_gc/kiln_gk)");
            if (text)
                L->text_free(text);
        }
    }
    ok(compiled && good, "compiled gathers (i64/i32, negative indices, strided, "
       "reversed) equal interp bitwise; out of range gives its message");
}

/* ---- JOIN, SCATTER, DOT compiled (8.) ---------------------------------- */

static kiln_view viewn(void *p, int dt, int rank, const int64_t *shape,
                       const int64_t *strides)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = p;
    v.rank = rank;
    v.dtype = dt;
    for (int d = 0; d < rank; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = strides[d];
    }
    return v;
}

static kiln_kernel mkmove(uint32_t kind, uint32_t nin, const kiln_arg_desc *in,
                          const kiln_arg_desc *out, int axis, uint32_t mode,
                          const char *label)
{
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = kind;
    k.n_inputs = nin;
    k.n_outputs = 1;
    k.inputs = in;
    k.outputs = out;
    k.axis = axis;
    k.scatter_mode = mode;
    k.label = label;
    return k;
}

#define OB (1 << 15)
static unsigned char obuf[OB], opat[OB], ores[5][OB];
static float fs[4 * N];
static long move_allocs;      /* allocations of steady-state prepared calls */
static long move_blas;        /* ... made inside the BLAS library, not counted */

/* Kernel k on interp and on llvm — fn, fn of a callable loaded from the
 * artifact bytes, a prepared call and a second run of the same plan —
 * with the output view inside obuf (nb bytes, reset from opat before each
 * run): 1 when every llvm run gives the interpreter's bytes, return code
 * and message.  `prep`: whether prepare should accept the call. */
static int agree(const char *what, const kiln_kernel *k, const kiln_view *in,
                 const kiln_view *out, size_t nb, int prep)
{
    unsigned char *bytes = NULL;
    size_t len = 0;
    kiln_callable *ci = compile_load(I, k, NULL, NULL);
    kiln_callable *cl = compile_load(L, k, &bytes, &len);
    kiln_callable *cb = bytes ? from_bytes(bytes, len) : NULL;
    free(bytes);
    int good = ci && cl && cb, rcs[5] = {0};
    char msg[5][256];
    void *plan = NULL;
    for (int v = 0; good && v < 5; v++) {
        memcpy(obuf, opat, nb);
        msg[v][0] = 0;
        kiln_call call = {sizeof call, k->n_inputs, 1, in, out, kiln_runtime_get(),
                          msg[v], sizeof msg[v], NULL, 0};
        if (v == 3) {
            int pr = cl->prepare(cl->state, &call, &plan);
            if (pr != 0)
                plan = NULL;
            if ((pr == 0) != prep) {
                diag("%s: prepare returned %d", what, pr);
                good = 0;
            }
        }
#if COUNT_ALLOCS
        long a0 = n_allocs, s0 = n_skipped;
#endif
        rcs[v] = v == 0 ? ci->fn(ci->state, &call)
               : v == 1 ? cl->fn(cl->state, &call)
               : v == 2 ? cb->fn(cb->state, &call)
               : plan ? cl->run(plan, &call) : cl->fn(cl->state, &call);
#if COUNT_ALLOCS
        if (v == 4 && plan) {
            move_allocs += n_allocs - a0;
            move_blas += n_skipped - s0;
        }
#endif
        memcpy(ores[v], obuf, nb);
    }
    if (plan)
        cl->plan_free(plan);
    for (int v = 1; good && v < 5; v++)
        if (rcs[v] != rcs[0] || strcmp(msg[v], msg[0]) != 0 ||
            memcmp(ores[v], ores[0], nb) != 0) {
            size_t at = 0;
            while (at < nb && ores[v][at] == ores[0][at])
                at++;
            diag("%s: run %d gives %d '%s', interp %d '%s' (data differ from "
                 "byte %zu)", what, v, rcs[v], msg[v], rcs[0], msg[0], at);
            good = 0;
        }
    if (ci)
        I->callable_free(ci);
    if (cl)
        L->callable_free(cl);
    if (cb)
        L->callable_free(cb);
    if (!good)
        diag("%s: differs", what);
    return good;
}

static int text_has(const kiln_kernel *k, const char *needle)
{
    char *text = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    int r = L->emit_text(k, &co, &text, &e) == 0 && text && strstr(text, needle);
    if (text)
        L->text_free(text);
    L->error_free(e);
    return r;
}

static void test_join(void)
{
    int good = 1;
    double *o = (double *)(void *)obuf;
    /* 1-D f64: contiguous, empty, reversed, strided inputs */
    {
        static const kiln_arg_desc d[5] = {{KILN_F64, 1, {0}}, {KILN_F64, 1, {0}},
                                           {KILN_F64, 1, {0}}, {KILN_F64, 1, {0}},
                                           {KILN_F64, 1, {0}}};
        kiln_kernel k = mkmove(KILN_KERNEL_JOIN, 4, d, d + 4, 0, 0, "join");
        int64_t sh[4] = {300, 0, 250, 77}, st[4] = {1, 1, -1, 3};
        void *p[4] = {xs, xs, xs + 400, ys + 5};
        kiln_view in[4], out;
        for (int i = 0; i < 4; i++)
            in[i] = viewn(p[i], KILN_F64, 1, &sh[i], &st[i]);
        int64_t on = 627, os = 1, ors = -1;
        out = viewn(o, KILN_F64, 1, &on, &os);
        good &= agree("join 1-D f64", &k, in, &out, 627 * 8, 1);
        out = viewn(o + 626, KILN_F64, 1, &on, &ors);       /* reversed output */
        good &= agree("join 1-D f64 into a reversed output", &k, in, &out, 627 * 8, 1);
        int64_t bad = 600;                                  /* shape mismatch */
        out = viewn(o, KILN_F64, 1, &bad, &os);
        good &= agree("join 1-D f64, wrong output length", &k, in, &out, 627 * 8, 0);
        ok(text_has(&k, "@kiln_jc(") && text_has(&k, "@kiln_js("),
           "JOIN is compiled (kiln_jc/kiln_js)");
    }
    /* 2-D f32 along axis 1 and axis 0: C-ordered, transposed inputs */
    {
        static const kiln_arg_desc d[3] = {{KILN_F32, 2, {0}}, {KILN_F32, 2, {0}},
                                           {KILN_F32, 2, {0}}};
        for (int axis = 0; axis < 2; axis++) {
            kiln_kernel k = mkmove(KILN_KERNEL_JOIN, 2, d, d + 2, axis, 0, "join");
            int64_t s0[2] = {axis ? 40 : 30, axis ? 30 : 50}, c0[2] = {s0[1], 1};
            int64_t s1[2] = {axis ? 40 : 20, axis ? 20 : 50}, t1[2] = {1, s1[0]};
            int64_t so[2] = {axis ? 40 : 50, 50}, co[2] = {50, 1};
            kiln_view in[2] = {viewn(fs, KILN_F32, 2, s0, c0),
                               viewn(fs + 1500, KILN_F32, 2, s1, t1)  /* fs: 4N */};
            kiln_view out = viewn(obuf, KILN_F32, 2, so, co);
            char what[64];
            snprintf(what, sizeof what, "join 2-D f32 along axis %d", axis);
            good &= agree(what, &k, in, &out, 2500 * 4, 1);
        }
    }
    ok(good, "compiled joins (1-D/2-D, f64/f32, empty, reversed, strided, "
       "transposed inputs; reversed output; a wrong shape's message) equal "
       "interp bitwise, prepared and not");
}

static void test_scatter(void)
{
    static int64_t i64[N];
    static int32_t i32[N];
    for (int i = 0; i < N; i++) {
        i64[i] = (int64_t)((i * 7) % 19) - 9;   /* -9..9: repeats, negatives */
        i32[i] = (int32_t)i64[i];
    }
    memcpy(opat, ys, sizeof ys);                 /* x, updated in place */
    int good = 1;
    for (int mode = 0; mode < 2; mode++)
        for (int w = 0; w < 2; w++) {
            unsigned it = w ? KILN_I32 : KILN_I64;
            void *ix = w ? (void *)i32 : (void *)i64;
            const char *mn = mode ? "inc" : "set";
            char what[128];
            /* 1-D f64: x[idx] op= v, contiguous, reversed and broadcast values */
            {
                kiln_arg_desc d[3] = {{(uint8_t)it, 1, {0}}, {KILN_F64, 1, {0}},
                                      {KILN_F64, 1, {0}}};
                kiln_kernel k = mkmove(KILN_KERNEL_SCATTER, 2, d, d + 2, 0, (uint32_t)mode,
                                       "advanced_inc_subtensor");
                int64_t n = 500, one = 1, size = 10, s1 = 1, sm = -1, s0 = 0;
                kiln_view in[2] = {viewn(ix, (int)it, 1, &n, &s1),
                                   viewn(xs + 20, KILN_F64, 1, &n, &s1)};
                kiln_view out = viewn(obuf, KILN_F64, 1, &size, &s1);
                snprintf(what, sizeof what, "scatter %s f64 %s", mn, w ? "i32" : "i64");
                good &= agree(what, &k, in, &out, 10 * 8, 1);
                in[0] = viewn((char *)ix + (w ? 4 : 8) * 499, (int)it, 1, &n, &sm);
                in[1] = viewn(xs + 600, KILN_F64, 1, &n, &sm);
                out = viewn(obuf + 9 * 8, KILN_F64, 1, &size, &sm);
                good &= agree("... reversed idx, values and x", &k, in, &out, 10 * 8, 1);
                in[1] = viewn(xs + 3, KILN_F64, 1, &one, &s0);   /* broadcast */
                good &= agree("... broadcast values", &k, in, &out, 10 * 8, 1);
                int64_t small = 9;          /* idx 9 is out of range for 9 */
                out = viewn(obuf, KILN_F64, 1, &small, &s1);
                good &= agree("... out of range", &k, in, &out, 10 * 8, 1);
                int64_t four = 4;           /* wrong values shape */
                in[1] = viewn(xs, KILN_F64, 1, &four, &s1);
                good &= agree("... values of a wrong shape", &k, in, &out, 10 * 8, 0);
                if (mode && !w)
                    ok(text_has(&k, "@kiln_sc(") && text_has(&k, "@kiln_sk("),
                       "SCATTER is compiled (kiln_sk/kiln_sc)");
            }
            /* f32 2-D data along axis 0 (a row per index) and axis 1 */
            {
                kiln_arg_desc d[3] = {{(uint8_t)it, 1, {0}}, {KILN_F32, 2, {0}},
                                      {KILN_F32, 2, {0}}};
                for (int axis = 0; axis < 2; axis++) {
                    kiln_kernel k = mkmove(KILN_KERNEL_SCATTER, 2, d, d + 2, axis,
                                           (uint32_t)mode, "advanced_inc_subtensor");
                    int64_t n = 60, s1 = 1;
                    int64_t xsh[2] = {10, 10}, xst[2] = {10, 1};
                    int64_t vsh[2] = {axis ? 10 : 60, axis ? 60 : 10};
                    int64_t vst[2] = {1, vsh[0]};                 /* transposed */
                    int64_t bsh[2] = {axis ? 1 : 60, axis ? 60 : 1},
                            bst[2] = {axis ? 0 : 1, axis ? 1 : 0}; /* broadcast */
                    kiln_view in[2] = {viewn(ix, (int)it, 1, &n, &s1),
                                       viewn(fs + 7, KILN_F32, 2, vsh, vst)};
                    kiln_view out = viewn(obuf, KILN_F32, 2, xsh, xst);
                    snprintf(what, sizeof what, "scatter %s f32 %s along axis %d", mn,
                             w ? "i32" : "i64", axis);
                    good &= agree(what, &k, in, &out, 100 * 4, 1);
                    in[1] = viewn(fs + 7, KILN_F32, 2, bsh, bst);
                    good &= agree("... broadcast values along a dim", &k, in, &out,
                                  100 * 4, 1);
                }
            }
            /* a sub-array that is no single row (x (6, 3, 4) with its
             * last two axes transposed): the interpreter runs it */
            {
                kiln_arg_desc d[3] = {{(uint8_t)it, 1, {0}}, {KILN_F64, 3, {0}},
                                      {KILN_F64, 3, {0}}};
                kiln_kernel k = mkmove(KILN_KERNEL_SCATTER, 2, d, d + 2, 0,
                                       (uint32_t)mode, "advanced_inc_subtensor");
                int64_t n = 20, s1 = 1;
                for (int i = 0; i < 20; i++) {
                    i64[N - 20 + i] = (i * 5) % 6 - 3;
                    i32[N - 20 + i] = (int32_t)i64[N - 20 + i];
                }
                int64_t xsh[3] = {6, 3, 4}, xst[3] = {12, 1, 3};
                int64_t vsh[3] = {20, 3, 4}, vst[3] = {12, 4, 1};
                kiln_view in[2] = {viewn((char *)ix + (w ? 4 : 8) * (N - 20), (int)it, 1,
                                         &n, &s1),
                                   viewn(xs, KILN_F64, 3, vsh, vst)};
                kiln_view out = viewn(obuf, KILN_F64, 3, xsh, xst);
                good &= agree("scatter of non-row sub-arrays (interp)", &k, in, &out,
                              72 * 8, 0);
            }
        }
    ok(good, "compiled scatters (set/inc, i64/i32, repeated and negative "
       "indices, reversed, strided, broadcast values, rows per index, "
       "out of range and shape messages) equal interp bitwise, prepared and not");
}

static void test_dotk(void)
{
    int good = 1;
    for (int f = 0; f < 2; f++) {
        int dt = f ? KILN_F32 : KILN_F64;
        size_t es = f ? 4 : 8;
        void *A = f ? (void *)fs : (void *)xs, *B = f ? (void *)(fs + 700)
                                                      : (void *)(ys + 100);
        kiln_arg_desc d[6] = {{(uint8_t)dt, 2, {0}}, {(uint8_t)dt, 2, {0}},
                              {(uint8_t)dt, 2, {0}}, {(uint8_t)dt, 1, {0}},
                              {(uint8_t)dt, 1, {0}}, {(uint8_t)dt, 0, {0}}};
        /* (m,k) @ (k,n), A and B plain or transposed */
        kiln_arg_desc mm[3] = {d[0], d[1], d[2]};
        kiln_kernel k = mkmove(KILN_KERNEL_DOT, 2, mm, mm + 2, 0, 0, "dot");
        for (int t = 0; t < 4; t++) {
            int64_t as[2] = {13, 17}, ast[2] = {t & 1 ? 1 : 17, t & 1 ? 13 : 1};
            int64_t bs[2] = {17, 11}, bst[2] = {t & 2 ? 1 : 11, t & 2 ? 17 : 1};
            int64_t cs[2] = {13, 11}, cst[2] = {11, 1};
            kiln_view in[2] = {viewn(A, dt, 2, as, ast), viewn(B, dt, 2, bs, bst)};
            kiln_view out = viewn(obuf, dt, 2, cs, cst);
            char what[64];
            snprintf(what, sizeof what, "dot %s (13,17)@(17,11) transposes %d",
                     f ? "f32" : "f64", t);
            good &= agree(what, &k, in, &out, 143 * es, 1);
        }
        {   /* a reversed operand (the loop), an empty product, a bad shape */
            int64_t as[2] = {13, 17}, ast[2] = {-17, 1};
            int64_t bs[2] = {17, 11}, bst[2] = {11, 1};
            int64_t cs[2] = {13, 11}, cst[2] = {11, 1};
            kiln_view in[2] = {viewn((char *)A + es * 12 * 17, dt, 2, as, ast),
                               viewn(B, dt, 2, bs, bst)};
            kiln_view out = viewn(obuf, dt, 2, cs, cst);
            good &= agree("dot with reversed rows (loop)", &k, in, &out, 143 * es, 1);
            as[0] = cs[0] = 0;
            in[0] = viewn(A, dt, 2, as, ast);
            out = viewn(obuf, dt, 2, cs, cst);
            good &= agree("empty dot", &k, in, &out, 143 * es, 1);
            as[0] = cs[0] = 13;
            bs[0] = 16;
            in[0] = viewn(A, dt, 2, as, ast);
            in[1] = viewn(B, dt, 2, bs, bst);
            out = viewn(obuf, dt, 2, cs, cst);
            good &= agree("dot of mismatched shapes", &k, in, &out, 143 * es, 0);
        }
        if (!f)
            ok(text_has(&k, "@kiln_db(") && text_has(&k, "@kiln_dl("),
               "DOT is compiled (kiln_db/kiln_dl)");
        /* 1-D: (m,k)@(k), (k)@(k,n), (k)@(k) */
        int64_t m2[2] = {13, 17}, m2s[2] = {17, 1}, m2t[2] = {1, 13};
        int64_t k1 = 17, s1 = 1, sneg = -2, n13 = 13, n11 = 11;
        int64_t kn[2] = {17, 11}, kns[2] = {11, 1};
        kiln_arg_desc mv[3] = {d[0], d[3], d[4]}, vm[3] = {d[3], d[0], d[4]},
                      vv[3] = {d[3], d[4], d[5]};
        kiln_kernel kmv = mkmove(KILN_KERNEL_DOT, 2, mv, mv + 2, 0, 0, "dot");
        kiln_kernel kvm = mkmove(KILN_KERNEL_DOT, 2, vm, vm + 2, 0, 0, "dot");
        kiln_kernel kvv = mkmove(KILN_KERNEL_DOT, 2, vv, vv + 2, 0, 0, "dot");
        kiln_view in[2] = {viewn(A, dt, 2, m2, m2s), viewn(B, dt, 1, &k1, &s1)};
        kiln_view out = viewn(obuf, dt, 1, &n13, &s1);
        good &= agree("dot matrix-vector", &kmv, in, &out, 13 * es, 1);
        in[0] = viewn(A, dt, 2, m2, m2t);
        good &= agree("dot transpose(A)-vector", &kmv, in, &out, 13 * es, 1);
        in[1] = viewn((char *)B + es * 40, dt, 1, &k1, &sneg);
        good &= agree("dot matrix-reversed vector (loop)", &kmv, in, &out, 13 * es, 1);
        in[0] = viewn(B, dt, 1, &k1, &s1);
        in[1] = viewn(A, dt, 2, kn, kns);
        out = viewn(obuf, dt, 1, &n11, &s1);
        good &= agree("dot vector-matrix", &kvm, in, &out, 11 * es, 1);
        in[0] = viewn(A, dt, 1, &k1, &s1);
        in[1] = viewn(B, dt, 1, &k1, &s1);
        out = viewn(obuf, dt, 0, NULL, NULL);
        good &= agree("dot vector-vector", &kvv, in, &out, es, 1);
    }
    ok(good, "compiled dots (f64/f32, 1-D and 2-D, transposed operands through "
       "BLAS, reversed ones through the loop, empty, mismatched shapes) equal "
       "interp bitwise, prepared and not");
}

#if COUNT_ALLOCS
static void *blas_sym;   /* cblas_dgemm as the loaded plugins see it */

/* dl_iterate_phdr callback: find a loaded object exporting cblas_dgemm
 * (searching each object's dependencies), then the object whose loaded
 * segments hold that address; set [skip_lo, skip_hi) to them. */
static int find_blas(struct dl_phdr_info *info, size_t size, void *pass)
{
    (void)size;
    if (*(int *)pass == 0) {
        void *h = dlopen(info->dlpi_name[0] ? info->dlpi_name : NULL,
                         RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            blas_sym = dlsym(h, "cblas_dgemm");
            dlclose(h);
        }
        return blas_sym != NULL;
    }
    uintptr_t lo = UINTPTR_MAX, hi = 0, at = (uintptr_t)blas_sym;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            uintptr_t a = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            lo = a < lo ? a : lo;
            hi = a + info->dlpi_phdr[i].p_memsz > hi ? a + info->dlpi_phdr[i].p_memsz
                                                     : hi;
        }
    if (at < lo || at >= hi)
        return 0;
    skip_lo = lo;
    skip_hi = hi;
    return 1;
}
#endif

static void test_moves(void)
{
#if COUNT_ALLOCS
    /* OpenBLAS 0.3.21's small-matrix dgemm kernels (e.g.
     * dgemm_small_kernel_b0_nn_COOPERLAKE, under cblas_dgemm) malloc a
     * buffer on every call, so no warm-up avoids it and kiln cannot
     * prevent it: allocations called directly from the BLAS library are
     * not counted here.  Every allocation kiln's code makes still is. */
    int pass = 0;
    dl_iterate_phdr(find_blas, &pass);
    pass = 1;
    if (blas_sym)
        dl_iterate_phdr(find_blas, &pass);
#endif
    for (int i = 0; i < 4 * N; i++)
        fs[i] = (float)(sin(0.23 * i) * 4.0);
    memset(opat, 0x5a, sizeof opat);
    test_join();
    test_dotk();
    test_scatter();
    if (COUNT_ALLOCS)
        ok(move_allocs == 0, "steady-state prepared JOIN/SCATTER/DOT calls "
           "allocate nothing (%ld allocations; %ld more from inside the BLAS "
           "library, not counted)", move_allocs, move_blas);
    else
        ok(1, "allocation count # SKIP under a sanitizer");
}

static void test_text(void)
{
    kiln_kernel k = make_kernel(KILN_KERNEL_ELEMWISE, 1);
    /* a plain f64 elementwise kernel: out = x * 2.5 + y * y */
    static kiln_instr p[] = {
        {KILN_I_LOAD, KILN_F64, 0, 0, -1, -1, 0},
        {KILN_I_LOAD, KILN_F64, 0, 1, -1, -1, 0},
        {KILN_I_CONST, KILN_F64, 0, -1, -1, -1, 2.5},
        {KILN_I_MUL, KILN_F64, 0, 0, 2, -1, 0},
        {KILN_I_MUL, KILN_F64, 0, 1, 1, -1, 0},
        {KILN_I_ADD, KILN_F64, 0, 3, 4, -1, 0},
    };
    static int32_t r5 = 5;
    k.instrs = p;
    k.n_instrs = 6;
    k.out_refs = &r5;
    char *text = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    ok(L->struct_size >= offsetof(kiln_backend, text_free) + sizeof(void *) &&
       L->emit_text && L->emit_text(&k, &co, &text, &e) == 0 && text,
       "emit_text gives optimised IR");
    ok(text && strstr(text, " x double>") && strstr(text, "fmul <"),
       "the f64 elementwise loop is vectorised (<N x double> fmul)");
    if (text)
        L->text_free(text);

    /* 300 inputs summed: past the default alias-set saturation (250) */
    enum { W = 300 };
    kiln_arg_desc *d = malloc(sizeof *d * (W + 1));
    kiln_instr *q = malloc(sizeof *q * (2 * W));
    for (int i = 0; i <= W; i++)
        d[i] = (kiln_arg_desc){KILN_F64, 1, {0}};
    /* acc_i = acc_{i-1} + load_i */
    int n = 0;
    int acc = -1;
    for (int i = 0; i < W; i++) {
        q[n] = (kiln_instr){KILN_I_LOAD, KILN_F64, 0, i, -1, -1, 0};
        int ld = n++;
        if (acc < 0) {
            acc = ld;
        } else {
            q[n] = (kiln_instr){KILN_I_ADD, KILN_F64, 0, acc, ld, -1, 0};
            acc = n++;
        }
    }
    int32_t ref = acc;
    kiln_kernel w;
    memset(&w, 0, sizeof w);
    w.struct_size = sizeof w;
    w.kind = KILN_KERNEL_ELEMWISE;
    w.n_inputs = W;
    w.n_outputs = 1;
    w.inputs = d;
    w.outputs = d + W;
    w.n_instrs = (uint32_t)n;
    w.instrs = q;
    w.out_refs = &ref;
    text = NULL;
    int rc = L->emit_text(&w, &co, &text, &e);
    ok(rc == 0 && text && strstr(text, "fadd <") && strstr(text, "@kiln_ec.1("),
       "a %d-input elementwise kernel is vectorised too (in segments)", W);
    if (text)
        L->text_free(text);
    free(d);
    free(q);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    L = open_backend(bd, "llvm");
    I = open_backend(bd, "interp");
    if (!L || !I) {
        ok(1, "llvm backend # SKIP not built (configure --with-llvm)");
        return done_testing();
    }
    ok(L->flags & KILN_BACKEND_THREAD_SAFE, "llvm declares itself thread-safe");
    fill();
    kiln_kernel ke = make_kernel(KILN_KERNEL_ELEMWISE, 1);
    kiln_kernel kr1 = make_kernel(KILN_KERNEL_REDUCE, 1);
    kiln_kernel kr2 = make_kernel(KILN_KERNEL_REDUCE, 2);
    unsigned char *b[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    kiln_callable *ce = compile_load(L, &ke, &b[0], &len[0]);
    kiln_callable *cr1 = compile_load(L, &kr1, &b[1], &len[1]);
    kiln_callable *cr2 = compile_load(L, &kr2, &b[2], &len[2]);
    kiln_callable *ie = compile_load(I, &ke, NULL, NULL);
    kiln_callable *ir1 = compile_load(I, &kr1, NULL, NULL);
    kiln_callable *ir2 = compile_load(I, &kr2, NULL, NULL);
    ok(ce && cr1 && cr2 && ie && ir1 && ir2, "kernels compile and load");
    ok(b[0] && b[1] && b[2] && len[0] > 64,
       "artifact bytes (%zu, %zu, %zu bytes) hold an object file", len[0],
       len[1], len[2]);
    int elf = 0;
    for (size_t i = 0; b[0] && i + 4 <= len[0]; i++)
        if (memcmp(b[0] + i, "\177ELF", 4) == 0)
            elf = 1;
    ok(elf, "the artifact embeds an ELF object");
    if (!(ce && cr1 && cr2 && ie && ir1 && ir2 && b[0] && b[1] && b[2]))
        return done_testing();

    static double rl[5 * N + 200], ri[5 * N + 200], rb[5 * N + 200];
    run_ew(ce, rl);
    run_red(cr1, cr2, rl + 5 * N);
    run_ew(ie, ri);
    run_red(ir1, ir2, ri + 5 * N);
    ok(same(rl, ri, 5 * N), "elementwise (contiguous, broadcast, strided, "
       "in place, empty) equals interp bitwise");
    ok(same(rl + 5 * N, ri + 5 * N, 200), "reductions (scalar, axis 0, "
       "axis 1) equal interp bitwise");

    kiln_callable *be = from_bytes(b[0], len[0]);
    kiln_callable *br1 = from_bytes(b[1], len[1]);
    kiln_callable *br2 = from_bytes(b[2], len[2]);
    ok(be && br1 && br2, "load_bytes: the objects link into fresh JITs");
    if (be && br1 && br2) {
        run_ew(be, rb);
        run_red(br1, br2, rb + 5 * N);
        ok(same(rl, rb, 5 * N + 200), "kernels loaded from object bytes give "
           "the fresh compile's results");
    }

    /* a fresh process that never compiles */
    char dir[] = "/tmp/kiln_llvm_XXXXXX";
    int child_ok = 0;
    if (mkdtemp(dir)) {
        const char *names[3] = {"ew", "r1", "r2"};
        for (int i = 0; i < 3; i++) {
            char path[4300];
            snprintf(path, sizeof path, "%s/%s.bin", dir, names[i]);
            FILE *f = fopen(path, "wb");
            fwrite(b[i], 1, len[i], f);
            fclose(f);
        }
        pid_t pid = fork();
        if (pid == 0) {
            execl(argv[0], argv[0], "--child", dir, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        char path[4300];
        snprintf(path, sizeof path, "%s/child.out", dir);
        FILE *f = fopen(path, "rb");
        static double rc[5 * N + 200];
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && f &&
            fread(rc, sizeof rc, 1, f) == 1)
            child_ok = same(rl, rc, 5 * N + 200);
        else
            diag("child: status %d", st);
        if (f)
            fclose(f);
        remove(path);
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof path, "%s/%s.bin", dir, names[i]);
            remove(path);
        }
        rmdir(dir);
    }
    ok(child_ok, "a fresh process loading only the object bytes gets the same "
       "results");

    /* bad bytes */
    kiln_callable *c = NULL;
    kiln_plugin_error *e = NULL;
    unsigned char junk[100] = "not an artifact";
    int rc = L->load_bytes(junk, sizeof junk, &c, &e);
    ok(rc != 0 && !c && e && strncmp(e->message, "llvm: ", 6) == 0,
       "junk bytes are refused: %s", e ? e->message : "(no message)");
    L->error_free(e);
    e = NULL;
    rc = L->load_bytes(b[0], len[0] - 10, &c, &e);
    ok(rc != 0 && !c, "truncated bytes are refused");
    L->error_free(e);

    test_text();
    test_wide();
    test_fast();
    test_gather();
    test_moves();

    kiln_callable *all[] = {ce, cr1, cr2, be, br1, br2};
    for (int i = 0; i < 6; i++)
        if (all[i])
            L->callable_free(all[i]);
    I->callable_free(ie);
    I->callable_free(ir1);
    I->callable_free(ir2);
    for (int i = 0; i < 3; i++)
        free(b[i]);
    return done_testing();
}
