/*
 * test_objload.c — kiln's ELF relocatable-object loader (core/plugin/objload.c):
 *
 *  a. objects made by the tcc plugin (artifact bytes: header + ELF .o):
 *     elementwise, reductions (to a scalar, along a kept axis), join,
 *     gather — loaded with kiln_obj_load, `kiln_kernel` called on several
 *     view layouts, bitwise equal to the interpreter; every kernel of
 *     radon and eight schools loads;
 *  b. objects made by the llvm plugin (header + kernel description + ELF
 *     .o; LLVM's large-code-model GOTPC64/GOTOFF64/GOT64 relocations):
 *     the row functions kiln_ec/kiln_es (elementwise) and kiln_rc/kiln_rs
 *     (reduction) called directly, bitwise equal to the interpreter; every
 *     radon kernel loads (skipped when llvm is not built);
 *  c. objects compiled now with `cc -c -O2 -fPIC` and `-fno-pic
 *     -mcmodel=small` from a C source with rodata constants, a jump
 *     table, static and bss data, pointer tables, calls to libm (through
 *     the import table) and memcpy, and with -fcommon (a common
 *     symbol): results bitwise equal to the same
 *     source built as a shared object by the system linker (dlopen);
 *     unresolved imports fail with the symbol's name unless dlsym is
 *     allowed (skipped without cc);
 *  d. robustness: every truncation of a tcc, an llvm and a gcc object
 *     fails with a message; a few thousand seeded single-byte and single-
 *     bit corruptions each fail with a message or load.  A corrupted
 *     object that loads runs in a forked child (a corrupted instruction
 *     or constant is not something a loader can see; the disk cache's
 *     checksum is the guard), and the outcomes are reported.  Under the
 *     sanitizer build, ASan checks that no load reads or writes outside
 *     its buffers.
 */
#define _GNU_SOURCE
#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <dlfcn.h>
#include <elf.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lower.h"
#include "objload.h"
#include "open_backend.h"
#include "runtime.h"
#include "tap.h"

static const kiln_backend *T, *L, *I;

static const kiln_obj_import libc_imports[] = {
    {"memcpy", (const void *)memcpy},
    {"memmove", (const void *)memmove},
    {"memset", (const void *)memset},
};
static const kiln_obj_options libc_opt = {libc_imports, 3, 0};

/* ---- artifacts -> objects ----------------------------------------------- */

static unsigned char *artifact(const kiln_backend *be, const kiln_kernel *k,
                               size_t *len)
{
    kiln_artifact *a = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    if (be->compile(k, &co, &a, &e)) {
        diag("%s compile: %s", be->name, e ? e->message : "?");
        be->error_free(e);
        return NULL;
    }
    const void *p = be->artifact_bytes(a, len);
    unsigned char *b = p ? malloc(*len) : NULL;
    if (b)
        memcpy(b, p, *len);
    be->artifact_free(a);
    return b;
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The ELF object inside artifact bytes, or NULL.  tcc: "KILNTCC1", u64
 * build-id length, build id, u64 object length, object.  llvm: a 56-byte
 * header whose last field (offset 48) is the object's length; the object
 * ends the bytes (backends/llvm/llvm.c kl_pack). */
static const unsigned char *object_in(const kiln_backend *be,
                                      const unsigned char *b, size_t len,
                                      size_t *olen)
{
    const unsigned char *o = NULL;
    if (be == T && len >= 24 && memcmp(b, "KILNTCC1", 8) == 0) {
        uint64_t il = rd64(b + 8);
        if (il < len && 24 + il <= len && rd64(b + 16 + il) == len - 24 - il) {
            o = b + 24 + il;
            *olen = len - 24 - il;
        }
    } else if (be == L && len >= 56) {
        uint64_t ol = rd64(b + 48);
        if (ol && ol <= len - 56) {
            o = b + len - ol;
            *olen = (size_t)ol;
        }
    }
    if (o && (*olen < 4 || memcmp(o, "\177ELF", 4) != 0))
        o = NULL;
    return o;
}

/* ---- kernels ------------------------------------------------------------ */

#define N 600
static double xs[2 * N], ys[2 * N];
static int64_t idx[40];

static void fill(void)
{
    for (int i = 0; i < 2 * N; i++) {
        xs[i] = sin(0.37 * i) * 3.0;
        ys[i] = cos(0.11 * i) * 2.0 - 0.5;
    }
    xs[7] = NAN;
    ys[11] = INFINITY;
    xs[13] = -0.0;
    for (int i = 0; i < 40; i++)
        idx[i] = (i * 7) % 25 - 5;     /* negative indices count from the end */
}

static kiln_arg_desc f64r1 = {KILN_F64, 1, {0}}, f64r2 = {KILN_F64, 2, {0}},
                     i64r1 = {KILN_I64, 1, {0}};

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

enum { K_EW, K_RED1, K_RED2, K_JOIN, K_GATHER, N_KERNELS };
static const char *const kname[N_KERNELS] = {"elemwise", "sum to scalar",
                                             "sum along an axis", "join",
                                             "gather"};

static kiln_kernel make_kernel(int which)
{
    static kiln_arg_desc in2r1[2], in2r2[2], gin[2];
    in2r1[0] = in2r1[1] = f64r1;
    in2r2[0] = in2r2[1] = f64r2;
    gin[0] = f64r1;
    gin[1] = i64r1;
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.n_inputs = 2;
    k.n_outputs = 1;
    switch (which) {
    case K_EW:
    case K_RED1:
    case K_RED2:
        k.kind = which == K_EW ? KILN_KERNEL_ELEMWISE : KILN_KERNEL_REDUCE;
        k.inputs = which == K_RED2 ? in2r2 : in2r1;
        k.outputs = which == K_RED2 ? &f64r2 : &f64r1;
        k.n_instrs = which == K_EW ? 10 : 3;
        k.instrs = which == K_EW ? ew_prog : red_prog;
        k.out_refs = which == K_EW ? &ref9 : &ref2;
        k.reduce_axes = which == K_RED1 ? 1u : which == K_RED2 ? 1u : 0u;
        k.label = which == K_EW ? "ew" : "sum";
        break;
    case K_JOIN:
        k.kind = KILN_KERNEL_JOIN;
        k.inputs = in2r1;
        k.outputs = &f64r1;
        k.label = "join";
        break;
    default:
        k.kind = KILN_KERNEL_GATHER;
        k.inputs = gin;
        k.outputs = &f64r1;
        k.label = "take";
        break;
    }
    return k;
}

static kiln_view view1(void *p, int64_t n, int64_t s, int dtype)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = p;
    v.rank = 1;
    v.dtype = dtype;
    v.shape[0] = n;
    v.strides[0] = s;
    return v;
}

static int call_fn(kiln_kernel_fn fn, void *state, const kiln_view *in,
                   const kiln_view *out)
{
    char eb[256] = "";
    kiln_call k = {sizeof k, 2, 1, in, out, kiln_runtime_get(), eb, sizeof eb, NULL, 0};
    int rc = fn(state, &k);
    if (rc)
        diag("kernel failed: %s", eb);
    return rc;
}

#define RES (6 * N)

/* Run kernel `which` on a few view layouts; results into res (RES
 * doubles).  Returns the number of failed calls. */
static int run_kernel(int which, kiln_kernel_fn fn, void *state, double *res)
{
    for (int i = 0; i < RES; i++)
        res[i] = -7.25;
    kiln_view in[2], out[1];
    int bad = 0;
    switch (which) {
    case K_EW:
        in[0] = view1(xs, N, 1, KILN_F64);                  /* contiguous */
        in[1] = view1(ys, N, 1, KILN_F64);
        out[0] = view1(res, N, 1, KILN_F64);
        bad += call_fn(fn, state, in, out) != 0;
        in[1] = view1(ys + 3, N, 0, KILN_F64);              /* broadcast */
        out[0] = view1(res + N, N, 1, KILN_F64);
        bad += call_fn(fn, state, in, out) != 0;
        in[0] = view1(xs, N, 2, KILN_F64);                  /* strided */
        in[1] = view1(ys + 2 * N - 1, N, -2, KILN_F64);
        out[0] = view1(res + 2 * N, N, 1, KILN_F64);
        bad += call_fn(fn, state, in, out) != 0;
        break;
    case K_RED1:
        in[0] = view1(xs, N, 1, KILN_F64);
        in[1] = view1(ys, N, 1, KILN_F64);
        out[0] = view1(res, N, 0, KILN_F64);
        bad += call_fn(fn, state, in, out) != 0;
        in[0] = view1(xs + 1, N, 2, KILN_F64);
        out[0] = view1(res + 1, N, 0, KILN_F64);
        bad += call_fn(fn, state, in, out) != 0;
        break;
    case K_RED2:
        for (int axis = 0; axis < 1; axis++) {  /* reduce_axes = 1 */
            kiln_view a = view1(xs + 10, 0, 0, KILN_F64),
                      b = view1(ys, 0, 0, KILN_F64),
                      o = view1(res + 2 + axis * 50, 0, 0, KILN_F64);
            a.rank = b.rank = o.rank = 2;
            a.shape[0] = b.shape[0] = o.shape[0] = 20;
            a.shape[1] = b.shape[1] = o.shape[1] = 50;
            a.strides[0] = 50; a.strides[1] = 1;
            b.strides[0] = 1; b.strides[1] = 20;
            o.strides[0] = axis == 0 ? 0 : 1;
            o.strides[1] = axis == 0 ? 1 : 0;
            in[0] = a; in[1] = b; out[0] = o;
            bad += call_fn(fn, state, in, out) != 0;
        }
        break;
    case K_JOIN:
        in[0] = view1(xs, N, 1, KILN_F64);
        in[1] = view1(ys + N, N, -1, KILN_F64);
        out[0] = view1(res, 2 * N, 1, KILN_F64);
        bad += call_fn(fn, state, in, out) != 0;
        break;
    default:
        in[0] = view1(xs, 25, 3, KILN_F64);
        in[1] = view1(idx, 40, 1, KILN_I64);
        out[0] = view1(res, 40, 1, KILN_F64);
        bad += call_fn(fn, state, in, out) != 0;
        break;
    }
    return bad;
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

static double want[N_KERNELS][RES];

static void interp_reference(void)
{
    for (int w = 0; w < N_KERNELS; w++) {
        kiln_kernel k = make_kernel(w);
        kiln_artifact *a = NULL;
        kiln_callable *c = NULL;
        kiln_plugin_error *e = NULL;
        kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
        int rc = I->compile(&k, &co, &a, &e) || I->load(a, &c, &e);
        ok(rc == 0 && run_kernel(w, c->fn, c->state, want[w]) == 0,
           "interp runs the %s kernel", kname[w]);
        if (c)
            I->callable_free(c);
        I->artifact_free(a);
    }
}

/* Every kernel of a model through `be`: artifact bytes -> object ->
 * kiln_obj_load -> the entry symbol(s). */
static void load_model(const kiln_backend *be, const char *file)
{
    kiln_err err;
    kiln_graph *g = kiln_parse_file(file, &err);
    kiln_program p;
    if (!g || kiln_lower(g, &p, &err)) {
        ok(0, "%s: parse and lower: %s", file, err.message);
        kiln_graph_free(g);
        return;
    }
    int n = 0, loaded = 0, programs = 0;
    for (int i = 0; i < p.n_steps; i++) {
        size_t len = 0, olen = 0;
        unsigned char *b = artifact(be, &p.steps[i].kernel, &len);
        const unsigned char *o = b ? object_in(be, b, len, &olen) : NULL;
        n++;
        if (!o) {   /* llvm: data-movement kinds carry no object */
            if (be == L && b)
                n--;
            free(b);
            continue;
        }
        programs++;
        kiln_obj *ob = NULL;
        char why[256];
        /* LLVM may emit memset/memcpy calls: from the process */
        const kiln_obj_options dl = {NULL, 0, 1};
        if (kiln_obj_load(o, olen, be == T ? &libc_opt : &dl, &ob, why,
                          sizeof why) == 0) {
            /* llvm: the row functions of the kernel's kind (elementwise
             * kiln_ec/es, reductions kiln_rc/rs, gathers kiln_gc/gk,
             * joins kiln_jc, scatters kiln_sc, dots kiln_db) */
            static const char *const rows[] = {"kiln_ec", "kiln_rc",
                                               "kiln_gc", "kiln_gk",
                                               "kiln_jc", "kiln_sc",
                                               "kiln_db"};
            int found = be == T ? kiln_obj_symbol(ob, "kiln_kernel") != NULL
                                : 0;
            for (int r = 0; be == L && r < 7; r++)
                found |= kiln_obj_symbol(ob, rows[r]) != NULL;
            if (found)
                loaded++;
            else
                diag("kernel %d: no entry symbol", i);
        } else {
            diag("kernel %d (%s): %s", i, p.steps[i].label, why);
        }
        kiln_obj_free(ob);
        free(b);
    }
    ok(n > 0 && loaded == n, "%s: %s objects of all %d kernels load (%d "
       "loaded)", strrchr(file, '/') + 1, be->name, n, loaded);
    (void)programs;
    kiln_lower_free(&p);
    kiln_graph_free(g);
}

/* ---- a: tcc objects ----------------------------------------------------- */

static unsigned char *tcc_obj[N_KERNELS];
static size_t tcc_obj_len[N_KERNELS];

static void test_tcc(const char *src)
{
    for (int w = 0; w < N_KERNELS; w++) {
        kiln_kernel k = make_kernel(w);
        size_t len = 0, olen = 0;
        unsigned char *b = artifact(T, &k, &len);
        const unsigned char *o = b ? object_in(T, b, len, &olen) : NULL;
        if (!ok(o != NULL, "tcc %s: artifact holds an ELF object", kname[w])) {
            free(b);
            continue;
        }
        /* an unaligned copy: the loader must not assume alignment */
        unsigned char *copy = malloc(olen + 1);
        memcpy(copy + 1, o, olen);
        tcc_obj[w] = malloc(olen);
        memcpy(tcc_obj[w], o, olen);
        tcc_obj_len[w] = olen;
        kiln_obj *ob = NULL;
        char why[256] = "";
        int rc = kiln_obj_load(copy + 1, olen, &libc_opt, &ob, why, sizeof why);
        free(copy);
        free(b);
        if (!ok(rc == 0, "tcc %s: kiln_obj_load (%s)", kname[w], why))
            continue;
        void *sym = kiln_obj_symbol(ob, "kiln_kernel");
        ok(sym != NULL && kiln_obj_symbol(ob, "kl_check") == NULL,
           "tcc %s: global kiln_kernel found, static helpers not exported",
           kname[w]);
        if (sym) {
            kiln_kernel_fn fn;
            memcpy(&fn, &sym, sizeof fn);
            static double got[RES];
            ok(run_kernel(w, fn, NULL, got) == 0 && same(got, want[w], RES),
               "tcc %s: loaded kernel bitwise equal to interp", kname[w]);
        }
        kiln_obj_free(ob);
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/examples/radon.kg", src);
    load_model(T, path);
    snprintf(path, sizeof path, "%s/examples/eight_schools.kg", src);
    load_model(T, path);
}

/* ---- b: llvm objects ---------------------------------------------------- */

typedef void (*row_fn)(int64_t n, void **ptrs, const int64_t *st,
                       const kiln_runtime *rt, void *acc);

static unsigned char *llvm_obj;
static size_t llvm_obj_len;

static row_fn row(kiln_obj *ob, const char *name)
{
    void *p = kiln_obj_symbol(ob, name);
    row_fn f = NULL;
    if (p)
        memcpy(&f, &p, sizeof f);
    return f;
}

static void test_llvm(const char *src)
{
    const kiln_obj_options dl = {NULL, 0, 1};   /* memset & co from libc */
    const kiln_runtime *rt = kiln_runtime_get();
    for (int w = K_EW; w <= K_RED1; w++) {
        kiln_kernel k = make_kernel(w);
        size_t len = 0, olen = 0;
        unsigned char *b = artifact(L, &k, &len);
        const unsigned char *o = b ? object_in(L, b, len, &olen) : NULL;
        if (!ok(o != NULL, "llvm %s: artifact holds an ELF object",
                kname[w])) {
            free(b);
            continue;
        }
        if (w == K_EW) {
            llvm_obj = malloc(olen);
            memcpy(llvm_obj, o, olen);
            llvm_obj_len = olen;
        }
        kiln_obj *ob = NULL;
        char why[256] = "";
        int rc = kiln_obj_load(o, olen, &dl, &ob, why, sizeof why);
        free(b);
        if (!ok(rc == 0, "llvm %s: kiln_obj_load (%s)", kname[w], why))
            continue;
        row_fn c = row(ob, w == K_EW ? "kiln_ec" : "kiln_rc");
        row_fn s = row(ob, w == K_EW ? "kiln_es" : "kiln_rs");
        if (!ok(c && s, "llvm %s: row functions found", kname[w])) {
            kiln_obj_free(ob);
            continue;
        }
        static double got[2 * N];
        if (w == K_EW) {
            /* contiguous, then x strided by 2 and y reversed */
            void *ptrs[3] = {xs, ys, got};
            c(N, ptrs, NULL, rt, NULL);
            int64_t st[3] = {2, -2, 1};
            void *ptrs2[3] = {xs, ys + 2 * N - 1, got + N};
            s(N, ptrs2, st, rt, NULL);
            ok(same(got, want[K_EW], N) &&
               same(got + N, want[K_EW] + 2 * N, N),
               "llvm elemwise: kiln_ec and kiln_es bitwise equal to interp");
        } else {
            /* the interpreter sums 256-element blocks into the output
             * (0 + block + block ...): the same blocks here */
            double out = 0.0, out2 = 0.0;
            for (int j = 0; j < N; j += 256) {
                int64_t m = N - j < 256 ? N - j : 256;
                double acc = 0, acc2 = 0;
                void *ptrs[3] = {xs + j, ys + j, NULL};
                c(m, ptrs, NULL, rt, &acc);
                out = out + acc;
                int64_t st[3] = {2, 1, 0};
                void *ptrs2[3] = {xs + 1 + 2 * j, ys + j, NULL};
                s(m, ptrs2, st, rt, &acc2);
                out2 = out2 + acc2;
            }
            ok(same(&out, want[K_RED1], 1) && same(&out2, want[K_RED1] + 1, 1),
               "llvm sum: kiln_rc and kiln_rs bitwise equal to interp "
               "(%.17g)", out);
        }
        kiln_obj_free(ob);
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/examples/radon.kg", src);
    load_model(L, path);
}

/* ---- c: objects from the system compiler -------------------------------- */

static const char csrc[] =
    "#include <math.h>\n"
    "#include <string.h>\n"
    "static const double coef[8] = {0.5, -1.25, 3.0, 0.125, -2.5, 1e-3,\n"
    "                               7.0, -0.0625};\n"
    "static double state[4] = {1, 2, 3, 4};\n"
    "static int counter;\n"
    "double (*const fns[3])(double) = {sin, exp, log1p};\n"
    "const char *const words[3] = {\"alpha\", \"beta\", \"gamma\"};\n"
    "int tentative[16];\n"
    "double poly(double x)\n"
    "{ double s = 0; for (int i = 0; i < 8; i++) s = s * x + coef[i];\n"
    "  return s; }\n"
    "double mathy(double x)\n"
    "{ return sin(x) * exp(-x * x) + log1p(fabs(x)) + fns[(int)fabs(x) % 3](x); }\n"
    "int sw(int k)\n"
    "{ switch (k) { case 0: return 17; case 1: return -4; case 2: return 99;\n"
    "  case 3: return 5; case 4: return 1234; case 5: return -77;\n"
    "  case 6: return 8; case 7: return 31; default: return -1; } }\n"
    "void copy(double *d, const double *s, long n)\n"
    "{ memcpy(d, s, (size_t)n * sizeof *d); }\n"
    "int bump(void) { tentative[counter & 15] += 3; return ++counter; }\n"
    "double st(int i) { state[i & 3] += 0.5; return state[i & 3]; }\n"
    "long wlen(int i) { return (long)strlen(words[i % 3]); }\n";

typedef struct cfuncs {
    double (*poly)(double), (*mathy)(double), (*st)(int);
    int (*sw)(int), (*bump)(void);
    void (*copy)(double *, const double *, long);
    long (*wlen)(int);
} cfuncs;

#define GETF(dst, p) do { void *q_ = (p); memcpy(&(dst), &q_, sizeof(dst)); } \
    while (0)

static int get_funcs(void *(*sym)(void *, const char *), void *h, cfuncs *f)
{
    GETF(f->poly, sym(h, "poly"));
    GETF(f->mathy, sym(h, "mathy"));
    GETF(f->st, sym(h, "st"));
    GETF(f->sw, sym(h, "sw"));
    GETF(f->bump, sym(h, "bump"));
    GETF(f->copy, sym(h, "copy"));
    GETF(f->wlen, sym(h, "wlen"));
    return f->poly && f->mathy && f->st && f->sw && f->bump && f->copy &&
           f->wlen;
}

static void *objsym(void *h, const char *n) { return kiln_obj_symbol(h, n); }

/* A fingerprint of everything the functions compute, in `out` (64). */
static void exercise(const cfuncs *f, double *out)
{
    int j = 0;
    for (int i = 0; i < 8; i++) {
        double x = -2.0 + 0.61 * i;
        out[j++] = f->poly(x);
        out[j++] = f->mathy(x);
        out[j++] = f->sw(i * 3 % 10);
        out[j++] = f->st(i);
        out[j++] = f->bump();
        out[j++] = (double)f->wlen(i);
    }
    double a[9], b[9];
    for (int i = 0; i < 9; i++)
        a[i] = i * 1.5, b[i] = 0;
    f->copy(b, a, 9);
    for (int i = 0; i < 9; i++)
        out[j++] = b[i];
    while (j < 64)
        out[j++] = 0;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    rewind(fp);
    unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(fp);
    *len = b ? (size_t)n : 0;
    return b;
}

static unsigned char *gcc_obj;
static size_t gcc_obj_len;
static double ref_poly, ref_mathy;

static const kiln_obj_import c_imports[] = {
    {"sin", (const void *)sin}, {"exp", (const void *)exp},
    {"log1p", (const void *)log1p}, {"memcpy", (const void *)memcpy},
    {"strlen", (const void *)strlen},
};
static const kiln_obj_options c_opt = {c_imports, 5, 0};

static void test_cc(void)
{
    if (system("cc --version >/dev/null 2>&1") != 0) {
        ok(1, "# SKIP no cc");
        return;
    }
    char dir[] = "/tmp/kiln-objload-XXXXXX";
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp");
        return;
    }
    char cmd[1024], path[256];
    snprintf(path, sizeof path, "%s/k.c", dir);
    FILE *fp = fopen(path, "w");
    fputs(csrc, fp);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "cd %s && cc -std=c11 -O2 -fPIC -shared -o "
             "ref.so k.c -lm && cc -std=c11 -O2 -fPIC -c -o pic.o k.c && "
             "cc -std=c11 -O2 -fno-pic -mcmodel=small -c -o nopic.o k.c && "
             "cc -std=c11 -O2 -fPIC -fcommon -c -o common.o k.c",
             dir);
    if (!ok(system(cmd) == 0, "cc builds the reference .so and two objects"))
        return;
    snprintf(path, sizeof path, "%s/ref.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cfuncs rf;
    double ref[64];
    if (!ok(h && get_funcs(dlsym, h, &rf), "reference .so loads")) {
        return;
    }
    ref_poly = rf.poly(0.3);
    ref_mathy = rf.mathy(0.7);
    exercise(&rf, ref);
    /* common.o: `tentative` is a common symbol (SHN_COMMON) */
    const char *objs[3] = {"pic.o", "nopic.o", "common.o"};
    for (int i = 0; i < 3; i++) {
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", dir, objs[i]);
        unsigned char *b = read_file(path, &len);
        if (!ok(b != NULL, "%s read", objs[i]))
            continue;
        kiln_obj *o = NULL;
        char why[256] = "";
        /* without the import table: the first unresolved name */
        int rc = kiln_obj_load(b, len, NULL, &o, why, sizeof why);
        ok(rc == KILN_ERR_BACKEND && strstr(why, "undefined symbol '"),
           "%s without imports: %s", objs[i], why);
        rc = kiln_obj_load(b, len, &c_opt, &o, why, sizeof why);
        cfuncs f;
        if (ok(rc == 0 && get_funcs(objsym, o, &f), "%s loads with the "
               "import table (%s)", objs[i], why)) {
            double got[64];
            exercise(&f, got);
            ok(same(got, ref, 64), "%s: results bitwise equal to the "
               "linked .so", objs[i]);
            void *t = kiln_obj_symbol(o, "tentative");
            ok(t && ((int *)t)[0] == 3 && kiln_obj_symbol(o, "fns") &&
               !kiln_obj_symbol(o, "coef") && !kiln_obj_symbol(o, "counter"),
               "%s: data symbols exported, statics not", objs[i]);
        }
        kiln_obj_free(o);
        const kiln_obj_options dl = {NULL, 0, 1};
        rc = kiln_obj_load(b, len, &dl, &o, why, sizeof why);
        ok(rc == 0, "%s loads with dlsym(RTLD_DEFAULT) (%s)", objs[i], why);
        kiln_obj_free(o);
        if (i == 0) {
            gcc_obj = b;
            gcc_obj_len = len;
        } else {
            free(b);
        }
    }
    dlclose(h);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
}

/* ---- d: robustness ------------------------------------------------------ */

typedef struct subject {
    const char *name;
    const unsigned char *obj;
    size_t len;
    const kiln_obj_options *opt;
    int which;    /* 0 tcc elemwise, 1 llvm elemwise, 2 gcc -fPIC */
} subject;

/* Run a loaded object; 0 when it computes the right results. */
static int run_subject(const subject *s, kiln_obj *o)
{
    static double got[RES];
    if (s->which == 0) {
        void *p = kiln_obj_symbol(o, "kiln_kernel");
        kiln_kernel_fn fn;
        if (!p)
            return 1;
        memcpy(&fn, &p, sizeof fn);
        return run_kernel(K_EW, fn, NULL, got) || !same(got, want[K_EW], RES);
    }
    if (s->which == 1) {
        row_fn c = row(o, "kiln_ec");
        if (!c)
            return 1;
        void *ptrs[3] = {xs, ys, got};
        c(N, ptrs, NULL, kiln_runtime_get(), NULL);
        return !same(got, want[K_EW], N);
    }
    cfuncs f;
    if (!get_funcs(objsym, o, &f))
        return 1;
    double a = f.poly(0.3), b = f.mathy(0.7);
    int c = f.sw(4);
    return !(same(&a, &ref_poly, 1) && same(&b, &ref_mathy, 1) && c == 1234);
}

/* Load (never crashes: this process runs it); when it loads, run it in a
 * child.  Returns 0 refused with a message, 1 refused without one (a
 * failure), 2 loaded and right, 3 loaded and wrong, 4 loaded and the
 * child crashed or hung. */
static int try_image(const subject *s, const unsigned char *img, size_t len)
{
    kiln_obj *o = NULL;
    char why[256] = "";
    int rc = kiln_obj_load(img, len, s->opt, &o, why, sizeof why);
    if (rc)
        return strncmp(why, "object: ", 8) == 0 && why[8] ? 0 : 1;
    /* a corrupted name: the caller's symbol lookup fails cleanly */
    static const char *const entry[3] = {"kiln_kernel", "kiln_ec", "poly"};
    cfuncs f;
    if (!kiln_obj_symbol(o, entry[s->which]) ||
        (s->which == 2 && !get_funcs(objsym, o, &f))) {
        kiln_obj_free(o);
        return 0;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        if (!freopen("/dev/null", "w", stderr))
            _exit(4);
        struct itimerval t = {{0, 0}, {0, 300000}};   /* 0.3 s */
        setitimer(ITIMER_REAL, &t, NULL);
        _exit(run_subject(s, o) ? 3 : 2);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    kiln_obj_free(o);
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 2 || WEXITSTATUS(st) == 3))
        return WEXITSTATUS(st);
    return 4;
}

/* Which part of the file offset `off` is in. */
static const char *region_of(const unsigned char *obj, size_t len, size_t off)
{
    uint64_t shoff = rd64(obj + 40);
    unsigned shnum = obj[60] | obj[61] << 8;
    if (off < 64)
        return "ELF header";
    if (off >= shoff && off < shoff + (uint64_t)shnum * 64)
        return "section headers";
    for (unsigned i = 0; i < shnum && shoff + (i + 1) * 64ull <= len; i++) {
        const unsigned char *h = obj + shoff + i * 64;
        uint32_t type = h[4] | h[5] << 8 | h[6] << 16 | (uint32_t)h[7] << 24;
        uint64_t o = rd64(h + 24), sz = rd64(h + 32);
        if (type != SHT_NOBITS && off >= o && off < o + sz)
            return type == SHT_SYMTAB ? "symbol table"
                   : type == SHT_RELA ? "relocations"
                   : type == SHT_STRTAB ? "string tables"
                                        : "section contents";
    }
    return "padding";
}

static unsigned rng_state = 12345;
static unsigned rnd(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) & 0xffffff;
}

static void test_robust(const subject *subs, int n_subs, int n_corrupt)
{
    for (int si = 0; si < n_subs; si++) {
        const subject *s = &subs[si];
        if (!s->obj)
            continue;
        /* the intact object */
        ok(try_image(s, s->obj, s->len) == 2, "%s: intact object loads and "
           "runs", s->name);
        /* every truncation */
        int refused = 0;
        for (size_t n = 0; n < s->len; n++) {
            unsigned char *b = malloc(n ? n : 1);   /* exact size for ASan */
            memcpy(b, s->obj, n);
            int r = try_image(s, b, n);
            free(b);
            refused += r == 0;
        }
        ok(refused == (int)s->len, "%s: all %zu truncations refused with a "
           "message (%d)", s->name, s->len, refused);
        /* corruptions */
        int count[5] = {0, 0, 0, 0, 0};
        int by_region_bad[8] = {0};
        const char *regions[8] = {"ELF header", "section headers",
                                  "symbol table", "relocations",
                                  "string tables", "section contents",
                                  "padding", NULL};
        unsigned char *b = malloc(s->len);
        for (int c = 0; c < n_corrupt; c++) {
            memcpy(b, s->obj, s->len);
            size_t off = rnd() % s->len;
            if (c & 1)
                b[off] ^= (unsigned char)(1u << (rnd() % 8));
            else
                b[off] = (unsigned char)(rnd() & 0xff);
            int r = try_image(s, b, s->len);
            count[r]++;
            if (r >= 3) {
                const char *reg = region_of(s->obj, s->len, off);
                for (int k = 0; regions[k]; k++)
                    if (!strcmp(regions[k], reg))
                        by_region_bad[k]++;
            }
        }
        free(b);
        ok(count[1] == 0, "%s: %d corruptions: %d refused with a message, "
           "%d loaded and ran right, %d loaded and computed wrong, %d "
           "loaded and crashed in the child; 0 loader crashes, %d refusals "
           "without a message", s->name, n_corrupt, count[0], count[2],
           count[3], count[4], count[1]);
        for (int k = 0; regions[k]; k++)
            if (by_region_bad[k])
                diag("%s: wrong or crashing after a corruption in %s: %d",
                     s->name, regions[k], by_region_bad[k]);
    }
}

/* A few hand-made bad images. */
static void test_bad_images(void)
{
    char why[256];
    kiln_obj *o = (kiln_obj *)(uintptr_t)1;
    ok(kiln_obj_load(NULL, 0, NULL, &o, why, sizeof why) == KILN_ERR_ARG &&
       o == NULL, "NULL image: %s", why);
    ok(kiln_obj_load("junk", 4, NULL, &o, why, sizeof why) != 0,
       "4 bytes: %s", why);
    unsigned char e[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    ok(kiln_obj_load(e, sizeof e, NULL, &o, why, sizeof why) != 0,
       "ELF header only, not x86-64 ET_REL: %s", why);
    ok(kiln_obj_load(e, sizeof e, NULL, &o, NULL, 0) != 0,
       "no error buffer is fine");
    ok(kiln_obj_symbol(NULL, "x") == NULL && kiln_obj_size(NULL) == 0,
       "NULL object");
    kiln_obj_free(NULL);
    if (gcc_obj) {
        /* a TLS section and an unknown relocation type, patched in */
        unsigned char *b = malloc(gcc_obj_len);
        memcpy(b, gcc_obj, gcc_obj_len);
        uint64_t shoff = rd64(b + 40);
        unsigned shnum = b[60] | b[61] << 8;
        int done_tls = 0, done_rel = 0;
        for (unsigned i = 1; i < shnum; i++) {
            unsigned char *h = b + shoff + i * 64;
            uint64_t flags = rd64(h + 8);
            if (!done_tls && (flags & SHF_ALLOC) && (flags & SHF_WRITE)) {
                h[8] |= SHF_TLS & 0xff;
                h[9] |= (SHF_TLS >> 8) & 0xff;
                done_tls = 1;
            }
        }
        ok(done_tls && kiln_obj_load(b, gcc_obj_len, &c_opt, &o, why,
                                     sizeof why) != 0 &&
           strstr(why, "thread-local"), "TLS section refused: %s", why);
        memcpy(b, gcc_obj, gcc_obj_len);
        for (unsigned i = 1; i < shnum && !done_rel; i++) {
            unsigned char *h = b + shoff + i * 64;
            uint32_t type = h[4] | h[5] << 8;
            if (type == SHT_RELA && rd64(h + 32) >= 24) {
                unsigned char *r = b + rd64(h + 24);
                r[8] = 19;    /* R_X86_64_TLSGD */
                done_rel = 1;
            }
        }
        ok(done_rel && kiln_obj_load(b, gcc_obj_len, &c_opt, &o, why,
                                     sizeof why) != 0 &&
           strstr(why, "type 19"), "TLS relocation refused: %s", why);
        free(b);
    }
}

int main(void)
{
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    const char *src = getenv("KILN_SRCDIR") ? getenv("KILN_SRCDIR") : ".";
    int n_corrupt = getenv("KILN_OBJLOAD_CORRUPTIONS")
                        ? atoi(getenv("KILN_OBJLOAD_CORRUPTIONS")) : 200;
    fill();
    I = open_backend(bd, "interp");
    T = open_backend(bd, "tcc");
    L = open_backend(bd, "llvm");
    if (!ok(I != NULL, "interp plugin opens"))
        return done_testing();
    interp_reference();
    if (T)
        test_tcc(src);
    else
        ok(1, "# SKIP tcc backend not built");
    if (L)
        test_llvm(src);
    else
        ok(1, "# SKIP llvm backend not built");
    test_cc();
    test_bad_images();
    subject subs[3] = {
        {"tcc object", tcc_obj[K_EW], tcc_obj_len[K_EW], &libc_opt, 0},
        {"llvm object", llvm_obj, llvm_obj_len, &(kiln_obj_options){NULL, 0, 1},
         1},
        {"gcc -fPIC object", gcc_obj, gcc_obj_len, &c_opt, 2},
    };
    test_robust(subs, 3, n_corrupt);
    for (int w = 0; w < N_KERNELS; w++)
        free(tcc_obj[w]);
    free(llvm_obj);
    free(gcc_obj);
    return done_testing();
}
