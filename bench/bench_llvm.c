/*
 * bench_llvm.c — the llvm backend against gcc -O3 -march=native compiling
 * the C emitter's source of the same kernel, and against the interpreter
 * (docs/performance.md, "llvm backend").  Never run by make check.
 *
 *   bench_llvm run                 runtime table (ns per element)
 *   bench_llvm width W O           compile one W-input elementwise kernel
 *                                  at -O (1..3): wall ms, CPU ms and peak
 *                                  RSS (KB)
 *   bench_llvm tradeoff            compile (+ load) time per kernel and
 *                                  runtime per element for interp, tcc
 *                                  (when built) and llvm O1/O2/O3
 *
 * Needs KILN_BUILDDIR (plugins in backends/NAME/.libs) and gcc on PATH.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "emit_c.h"
#include "runtime.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const kiln_backend *try_backend(const char *name)
{
    char path[4200];
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    snprintf(path, sizeof path, "%s/backends/%s/.libs/%s.so", bd, name, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, KILN_BACKEND_ENTRY) : NULL;
    if (!sym)
        return NULL;
    kiln_backend_entry_fn e;
    memcpy(&e, &sym, sizeof e);
    return e(KILN_ABI_MAJOR, KILN_ABI_MINOR, NULL, 0);
}

static const kiln_backend *open_backend(const char *name)
{
    char path[4200];
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    snprintf(path, sizeof path, "%s/backends/%s/.libs/%s.so", bd, name, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, KILN_BACKEND_ENTRY) : NULL;
    if (!sym) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    kiln_backend_entry_fn e;
    memcpy(&e, &sym, sizeof e);
    return e(KILN_ABI_MAJOR, KILN_ABI_MINOR, NULL, 0);
}

static kiln_callable *compile_fm(const kiln_backend *be, const kiln_kernel *k,
                                 int opt, int fast)
{
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = opt,
                               .fast_math = fast};
    kiln_artifact *a = NULL;
    kiln_plugin_error *e = NULL;
    kiln_callable *c = NULL;
    if (be->compile(k, &co, &a, &e) || be->load(a, &c, &e)) {
        fprintf(stderr, "%s: %s\n", be->name, e ? e->message : "?");
        exit(1);
    }
    be->artifact_free(a);
    return c;
}

static kiln_callable *compile(const kiln_backend *be, const kiln_kernel *k,
                              int opt)
{
    return compile_fm(be, k, opt, 0);
}

/* gcc -O3 -march=native on the C emitter's source */
static kiln_kernel_fn gcc_compile(const kiln_kernel *k, int id)
{
    char *src = NULL, why[256], cpath[128], sopath[128], cmd[512];
    size_t len;
    if (kiln_emit_c(k, &src, &len, why, sizeof why)) {
        fprintf(stderr, "emit_c: %s\n", why);
        exit(1);
    }
    snprintf(cpath, sizeof cpath, "/tmp/kiln_bench_%d_%d.c", (int)getpid(), id);
    snprintf(sopath, sizeof sopath, "/tmp/kiln_bench_%d_%d.so", (int)getpid(), id);
    FILE *f = fopen(cpath, "w");
    fwrite(src, 1, len, f);
    fclose(f);
    free(src);
    snprintf(cmd, sizeof cmd, "gcc -O3 -march=native -shared -fPIC %s -o %s",
             cpath, sopath);
    if (system(cmd) != 0)
        exit(1);
    void *h = dlopen(sopath, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, KILN_EMIT_C_SYMBOL) : NULL;
    remove(cpath);
    remove(sopath);
    if (!sym)
        exit(1);
    kiln_kernel_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn;
}

static kiln_view v1(void *p, int64_t n, int64_t s, int dt)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = p;
    v.rank = 1;
    v.dtype = dt;
    v.shape[0] = n;
    v.strides[0] = s;
    return v;
}

/* median ns per element of `reps` timed calls */
static double time_fn(kiln_kernel_fn fn, void *state, kiln_call *c, int64_t n)
{
    int reps = n >= 10000000 ? 5 : n >= 100000 ? 50 : 2000;
    double best[64];
    int rounds = 7;
    char eb[200];
    c->errbuf = eb;
    c->errbuf_size = sizeof eb;
    fn(state, c);
    for (int r = 0; r < rounds; r++) {
        double t0 = bench_now();
        for (int i = 0; i < reps; i++)
            fn(state, c);
        best[r] = (bench_now() - t0) / reps / (double)n * 1e9;
    }
    double m = best[0];
    for (int r = 1; r < rounds; r++)
        if (best[r] < m)
            m = best[r];
    return m;
}

static kiln_arg_desc D[8] = {{KILN_F64, 1, {0}}, {KILN_F64, 1, {0}},
                             {KILN_F64, 1, {0}}, {KILN_F64, 1, {0}},
                             {KILN_I64, 1, {0}}};

static void bench_run(void)
{
    const kiln_backend *L = open_backend("llvm"), *I = open_backend("interp");
    /* elementwise: x * 1.5 + y * y - z */
    static kiln_instr ew[] = {
        {KILN_I_LOAD, 0, 0, 0, -1, -1, 0}, {KILN_I_LOAD, 0, 0, 1, -1, -1, 0},
        {KILN_I_LOAD, 0, 0, 2, -1, -1, 0}, {KILN_I_CONST, 0, 0, -1, -1, -1, 1.5},
        {KILN_I_MUL, 0, 0, 0, 3, -1, 0}, {KILN_I_MUL, 0, 0, 1, 1, -1, 0},
        {KILN_I_ADD, 0, 0, 4, 5, -1, 0}, {KILN_I_SUB, 0, 0, 6, 2, -1, 0}};
    static int32_t r7 = 7, r2 = 2, r14 = 14, r3 = 3;
    /* reduction: sum(x * y) */
    static kiln_instr red[] = {
        {KILN_I_LOAD, 0, 0, 0, -1, -1, 0}, {KILN_I_LOAD, 0, 0, 1, -1, -1, 0},
        {KILN_I_MUL, 0, 0, 0, 1, -1, 0}};
    /* composite: where(x > 0, x * y + z, sqrt(abs(x)) * 0.5) - maximum(y, z) */
    static kiln_instr comp[] = {
        {KILN_I_LOAD, 0, 0, 0, -1, -1, 0}, {KILN_I_LOAD, 0, 0, 1, -1, -1, 0},
        {KILN_I_LOAD, 0, 0, 2, -1, -1, 0}, {KILN_I_CONST, 0, 0, -1, -1, -1, 0},
        {KILN_I_GT, KILN_BOOL, 0, 0, 3, -1, 0}, {KILN_I_MUL, 0, 0, 0, 1, -1, 0},
        {KILN_I_ADD, 0, 0, 5, 2, -1, 0}, {KILN_I_ABS, 0, 0, 0, -1, -1, 0},
        {KILN_I_SQRT, 0, 0, 7, -1, -1, 0}, {KILN_I_CONST, 0, 0, -1, -1, -1, 0.5},
        {KILN_I_MUL, 0, 0, 8, 9, -1, 0}, {KILN_I_WHERE, 0, 0, 4, 6, 10, 0},
        {KILN_I_MAXIMUM, 0, 0, 1, 2, -1, 0}, {KILN_I_SUB, 0, 0, 11, 12, -1, 0},
        {KILN_I_SUB, 0, 0, 13, 3, -1, 0}};
    /* triad: b + 3 * c (STREAM) */
    static kiln_instr triad[] = {
        {KILN_I_LOAD, 0, 0, 0, -1, -1, 0}, {KILN_I_LOAD, 0, 0, 1, -1, -1, 0},
        {KILN_I_CONST, 0, 0, -1, -1, -1, 3.0}, {KILN_I_MUL, 0, 0, 1, 2, -1, 0},
        {KILN_I_ADD, 0, 0, 0, 3, -1, 0}};
    (void)r3;
    struct { const char *name; kiln_kernel k; } ks[5];
    memset(ks, 0, sizeof ks);
    for (int i = 0; i < 5; i++) {
        ks[i].k.struct_size = sizeof(kiln_kernel);
        ks[i].k.n_outputs = 1;
        ks[i].k.inputs = D;
        ks[i].k.outputs = D + 3;
        ks[i].k.kind = KILN_KERNEL_ELEMWISE;
    }
    ks[0].name = "elementwise x*1.5+y*y-z";
    ks[0].k.n_inputs = 3; ks[0].k.n_instrs = 8; ks[0].k.instrs = ew; ks[0].k.out_refs = &r7;
    ks[1].name = "reduction sum(x*y)";
    ks[1].k.kind = KILN_KERNEL_REDUCE;
    ks[1].k.n_inputs = 2; ks[1].k.n_instrs = 3; ks[1].k.instrs = red; ks[1].k.out_refs = &r2;
    ks[2].name = "fused composite (14 ops)";
    ks[2].k.n_inputs = 3; ks[2].k.n_instrs = 15; ks[2].k.instrs = comp; ks[2].k.out_refs = &r14;
    ks[3].name = "gather take(x, idx)";
    ks[3].k.kind = KILN_KERNEL_GATHER;
    ks[3].k.n_inputs = 2;
    static kiln_arg_desc gd[3] = {{KILN_F64, 1, {0}}, {KILN_I64, 1, {0}}, {KILN_F64, 1, {0}}};
    ks[3].k.inputs = gd; ks[3].k.outputs = gd + 2;
    ks[4].name = "STREAM triad b+3*c";
    ks[4].k.n_inputs = 2; ks[4].k.n_instrs = 5; ks[4].k.instrs = triad; ks[4].k.out_refs = &r3;
    r3 = 4;

    int64_t NMAX = 10000000;
    double *x = malloc(sizeof(double) * NMAX), *y = malloc(sizeof(double) * NMAX),
           *z = malloc(sizeof(double) * NMAX), *o = malloc(sizeof(double) * NMAX);
    int64_t *idx = malloc(sizeof(int64_t) * NMAX);
    for (int64_t i = 0; i < NMAX; i++) {
        x[i] = sin((double)i) * 2;
        y[i] = cos((double)i);
        z[i] = 0.25 * (double)(i % 7);
        o[i] = 0;
        idx[i] = (int64_t)((uint64_t)i * 2654435761u % (uint64_t)NMAX);
    }
    printf("%-26s %9s %9s %9s %9s %7s\n", "kernel", "n", "interp", "gcc-O3",
           "llvm", "llvm/gcc");
    for (int qq = 0; qq < 6; qq++) {
        /* row 5: the reduction again, llvm with fast_math */
        int q = qq == 5 ? 1 : qq;
        kiln_callable *cl = compile_fm(L, &ks[q].k, 2, qq == 5),
                      *ci = compile(I, &ks[q].k, 2);
        kiln_kernel_fn g = gcc_compile(&ks[q].k, qq);
        for (int64_t n = 1000; n <= NMAX; n *= 100) {
            kiln_view in[3], out[1];
            if (q == 3) {
                for (int64_t i = 0; i < n; i++)
                    idx[i] = (int64_t)((uint64_t)i * 2654435761u % (uint64_t)n);
                in[0] = v1(x, n, 1, KILN_F64);
                in[1] = v1(idx, n, 1, KILN_I64);
            } else {
                in[0] = v1(x, n, 1, KILN_F64);
                in[1] = v1(y, n, 1, KILN_F64);
                in[2] = v1(z, n, 1, KILN_F64);
            }
            out[0] = v1(o, n, ks[q].k.kind == KILN_KERNEL_REDUCE ? 0 : 1, KILN_F64);
            kiln_call c = {sizeof c, ks[q].k.n_inputs, 1, in, out,
                           kiln_runtime_get(), NULL, 0, NULL, 0};
            double ti = time_fn(ci->fn, ci->state, &c, n);
            double tg = time_fn(g, NULL, &c, n);
            double tl = time_fn(cl->fn, cl->state, &c, n);
            printf("%-26s %9lld %9.3f %9.3f %9.3f %7.2f\n",
                   qq == 5 ? "reduction, llvm fast_math" : ks[q].name,
                   (long long)n, ti, tg, tl, tl / tg);
            if (q == 4 && n == NMAX)
                printf("  triad bandwidth at 1e7: llvm %.1f GB/s, gcc %.1f GB/s "
                       "(24 bytes per element)\n", 24.0 / tl, 24.0 / tg);
        }
        L->callable_free(cl);
        I->callable_free(ci);
    }
}

static void bench_width(int w, int opt)
{
    const kiln_backend *L = open_backend("llvm");
    kiln_arg_desc *d = malloc(sizeof *d * (size_t)(w + 1));
    kiln_instr *p = malloc(sizeof *p * (size_t)(2 * w));
    for (int i = 0; i <= w; i++)
        d[i] = (kiln_arg_desc){KILN_F64, 1, {0}};
    int n = 0, acc = -1;
    for (int i = 0; i < w; i++) {
        p[n] = (kiln_instr){KILN_I_LOAD, 0, 0, i, -1, -1, 0};
        int ld = n++;
        if (acc < 0) {
            acc = ld;
        } else {
            p[n] = (kiln_instr){KILN_I_ADD, 0, 0, acc, ld, -1, 0};
            acc = n++;
        }
    }
    int32_t ref = acc;
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = KILN_KERNEL_ELEMWISE;
    k.n_inputs = (uint32_t)w;
    k.n_outputs = 1;
    k.inputs = d;
    k.outputs = d + w;
    k.n_instrs = (uint32_t)n;
    k.instrs = p;
    k.out_refs = &ref;
    /* warm-up (LLVM's one-time set-up), then the median of 3 */
    kiln_callable *c = compile(L, &k, opt);
    L->callable_free(c);
    double t[3], u[3];
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now(), u0 = cpu_now();
        c = compile(L, &k, opt);
        t[r] = (bench_now() - t0) * 1e3;
        u[r] = (cpu_now() - u0) * 1e3;
        L->callable_free(c);
    }
    double m = t[0] < t[1] ? (t[1] < t[2] ? t[1] : (t[0] < t[2] ? t[2] : t[0]))
                           : (t[0] < t[2] ? t[0] : (t[1] < t[2] ? t[2] : t[1]));
    double mu = u[0] < u[1] ? (u[1] < u[2] ? u[1] : (u[0] < u[2] ? u[2] : u[0]))
                            : (u[0] < u[2] ? u[0] : (u[1] < u[2] ? u[2] : u[1]));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%d %d %.2f %.2f %ld\n", w, opt, m, mu, ru.ru_maxrss);
    free(d);
    free(p);
}

/* compile (+ load) per kernel and runtime per element, per backend, on
 * the elementwise kernel x*1.5 + y*y - z and a 10-input sum */
static void bench_tradeoff(void)
{
    static kiln_arg_desc d[11];
    for (int i = 0; i < 11; i++)
        d[i] = (kiln_arg_desc){KILN_F64, 1, {0}};
    static kiln_instr ew[] = {
        {KILN_I_LOAD, 0, 0, 0, -1, -1, 0}, {KILN_I_LOAD, 0, 0, 1, -1, -1, 0},
        {KILN_I_LOAD, 0, 0, 2, -1, -1, 0}, {KILN_I_CONST, 0, 0, -1, -1, -1, 1.5},
        {KILN_I_MUL, 0, 0, 0, 3, -1, 0}, {KILN_I_MUL, 0, 0, 1, 1, -1, 0},
        {KILN_I_ADD, 0, 0, 4, 5, -1, 0}, {KILN_I_SUB, 0, 0, 6, 2, -1, 0}};
    static kiln_instr s10[19];
    int n = 0, acc = -1;
    for (int i = 0; i < 10; i++) {
        s10[n] = (kiln_instr){KILN_I_LOAD, 0, 0, i, -1, -1, 0};
        int ld = n++;
        if (acc < 0) {
            acc = ld;
        } else {
            s10[n] = (kiln_instr){KILN_I_ADD, 0, 0, acc, ld, -1, 0};
            acc = n++;
        }
    }
    static int32_t r7 = 7, r10;
    r10 = acc;
    kiln_kernel ks[2];
    memset(ks, 0, sizeof ks);
    for (int i = 0; i < 2; i++) {
        ks[i].struct_size = sizeof(kiln_kernel);
        ks[i].kind = KILN_KERNEL_ELEMWISE;
        ks[i].n_outputs = 1;
        ks[i].inputs = d;
    }
    ks[0].n_inputs = 3; ks[0].outputs = d + 3; ks[0].n_instrs = 8;
    ks[0].instrs = ew; ks[0].out_refs = &r7;
    ks[1].n_inputs = 10; ks[1].outputs = d + 10; ks[1].n_instrs = (uint32_t)n;
    ks[1].instrs = s10; ks[1].out_refs = &r10;
    const char *names[5] = {"interp", "tcc", "llvm O1", "llvm O2", "llvm O3"};
    const kiln_backend *be[5] = {open_backend("interp"), try_backend("tcc"),
                                 NULL, NULL, NULL};
    be[2] = be[3] = be[4] = open_backend("llvm");
    int opt[5] = {2, 2, 1, 2, 3};
    int64_t NN = 100000;
    double *buf = malloc(sizeof(double) * (size_t)NN * 11);
    for (int64_t i = 0; i < NN * 11; i++)
        buf[i] = sin((double)i);
    printf("%-8s %-10s %12s %12s %12s\n", "kernel", "backend", "compile_ms",
           "ns/el 1e3", "ns/el 1e5");
    for (int q = 0; q < 2; q++) {
        for (int b = 0; b < 5; b++) {
            if (!be[b])
                continue;
            kiln_callable *c = compile(be[b], &ks[q], opt[b]);  /* warm */
            be[b]->callable_free(c);
            double t[5];
            for (int r = 0; r < 5; r++) {
                double t0 = bench_now();
                c = compile(be[b], &ks[q], opt[b]);
                t[r] = (bench_now() - t0) * 1e3;
                if (r < 4)
                    be[b]->callable_free(c);
            }
            for (int i = 0; i < 5; i++)          /* median of 5 */
                for (int j = i + 1; j < 5; j++)
                    if (t[j] < t[i]) {
                        double x = t[i];
                        t[i] = t[j];
                        t[j] = x;
                    }
            double ns[2];
            for (int e = 0; e < 2; e++) {
                int64_t m = e ? NN : 1000;
                kiln_view in[10], out[1];
                for (uint32_t i = 0; i < ks[q].n_inputs; i++)
                    in[i] = v1(buf + (size_t)i * (size_t)NN, m, 1, KILN_F64);
                out[0] = v1(buf + (size_t)10 * (size_t)NN, m, 1, KILN_F64);
                kiln_call call = {sizeof call, ks[q].n_inputs, 1, in, out,
                                  kiln_runtime_get(), NULL, 0, NULL, 0};
                ns[e] = time_fn(c->fn, c->state, &call, m);
            }
            printf("%-8s %-10s %12.4f %12.3f %12.3f\n", q ? "sum10" : "ew3",
                   names[b], t[2], ns[0], ns[1]);
            be[b]->callable_free(c);
        }
    }
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "tradeoff") == 0) {
        bench_tradeoff();
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "run") == 0) {
        bench_run();
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "width") == 0) {
        bench_width(atoi(argv[2]), atoi(argv[3]));
        return 0;
    }
    fprintf(stderr, "usage: bench_llvm run | width W OPT | tradeoff\n");
    return 2;
}
