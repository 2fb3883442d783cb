/*
 * bench_tcc.c — tcc backend benchmarks on kernels built directly as
 * descriptions (fusion does not exist yet, so wide kernels are made here).
 *
 *   bench_tcc width N        one ELEMWISE kernel: N f64 inputs summed as a
 *                            chain (N loads, N-1 adds); prints
 *                            "N compile_ms source_bytes peak_rss_kb"
 *   bench_tcc stmts N        a 1-input kernel of N arithmetic statements;
 *                            prints "N compile_ms"
 *   bench_tcc runtime N CC   the same 20-statement kernel over N elements
 *                            with tcc and with CC -O2 of the emitted C;
 *                            prints "N tcc_ns_per_elem cc_ns_per_elem ratio"
 *
 * Compile times are medians over repeats of supports + compile + load +
 * artifact_free (what kiln_compile does per kernel).  bench/tcc.sh runs
 * the sweeps and fits the exponent; docs/performance.md has the figures.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include "emit_c.h"
#include "loader.h"
#include "runtime.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

typedef struct kbuild {
    kiln_kernel k;
    kiln_arg_desc *in, out;
    kiln_instr *ins;
    int32_t ref;
    uint32_t n;
} kbuild;

static kiln_instr I(int op, int a, int b)
{
    kiln_instr x = {(uint16_t)op, KILN_F64, 0, a, b, -1, 0.0};
    return x;
}

static void kb_finish(kbuild *b, uint32_t n_in, const char *label)
{
    b->out.dtype = KILN_F64;
    b->out.rank = 1;
    b->ref = (int32_t)b->n - 1;
    memset(&b->k, 0, sizeof b->k);
    b->k.struct_size = sizeof b->k;
    b->k.kind = KILN_KERNEL_ELEMWISE;
    b->k.n_inputs = n_in;
    b->k.n_outputs = 1;
    b->k.inputs = b->in;
    b->k.outputs = &b->out;
    b->k.n_instrs = b->n;
    b->k.instrs = b->ins;
    b->k.out_refs = &b->ref;
    b->k.label = label;
}

/* sum of n inputs as a chain */
static void kb_width(kbuild *b, uint32_t n)
{
    b->in = calloc(n, sizeof *b->in);
    b->ins = calloc(2 * n, sizeof *b->ins);
    b->n = 0;
    for (uint32_t i = 0; i < n; i++) {
        b->in[i].dtype = KILN_F64;
        b->in[i].rank = 1;
        b->ins[b->n++] = I(KILN_I_LOAD, (int)i, -1);
        if (i > 0) {
            b->ins[b->n] = I(KILN_I_ADD, (int)b->n - 2, (int)b->n - 1);
            b->n++;
        }
    }
    kb_finish(b, n, "sum_chain");
}

/* n statements over one input: x*c+d, exp, log, sqrt, ... */
static void kb_stmts(kbuild *b, uint32_t n)
{
    b->in = calloc(1, sizeof *b->in);
    b->ins = calloc(n + 4, sizeof *b->ins);
    b->in[0].dtype = KILN_F64;
    b->in[0].rank = 1;
    b->n = 0;
    b->ins[b->n++] = I(KILN_I_LOAD, 0, -1);      /* 0 */
    kiln_instr c = I(KILN_I_CONST, -1, -1);
    c.imm = 0.5;
    b->ins[b->n++] = c;                          /* 1 */
    c.imm = 1.25;
    b->ins[b->n++] = c;                          /* 2 */
    static const int cycle[] = {KILN_I_MUL, KILN_I_ADD, KILN_I_SIGMOID,
                                KILN_I_SUB, KILN_I_LOG1P, KILN_I_MUL,
                                KILN_I_SQUARE, KILN_I_ADD};
    for (uint32_t s = 0; s < n; s++) {
        int op = cycle[s % 8];
        int prev = (int)b->n - 1;
        if (op == KILN_I_SIGMOID || op == KILN_I_LOG1P || op == KILN_I_SQUARE)
            b->ins[b->n++] = I(op, prev, -1);
        else
            b->ins[b->n++] = I(op, prev, (s % 2) ? 1 : 2);
    }
    kb_finish(b, 1, "stmts");
}

static void kb_free(kbuild *b)
{
    free(b->in);
    free(b->ins);
}

static const kiln_backend *tcc_backend(void)
{
    kiln_err err = {0, ""};
    const kiln_backend *be = kiln_loader_get("tcc", NULL, stderr, 0, &err);
    if (!be) {
        fprintf(stderr, "bench_tcc: %s\n", err.message);
        exit(77);
    }
    return be;
}

/* supports + compile + load + artifact_free; the callable in *out. */
static double compile_once(const kiln_backend *be, const kiln_kernel *k,
                           kiln_callable **out)
{
    kiln_plugin_error *pe = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    kiln_artifact *a = NULL;
    double t0 = 1e3 * bench_now();
    if (!be->supports(k, &pe) || be->compile(k, &co, &a, &pe) ||
        be->load(a, out, &pe)) {
        fprintf(stderr, "bench_tcc: %s\n", pe ? pe->message : "failed");
        exit(1);
    }
    be->artifact_free(a);
    return 1e3 * bench_now() - t0;
}

static double median_compile(const kiln_backend *be, const kiln_kernel *k,
                             int reps)
{
    double *t = calloc((size_t)reps, sizeof *t);
    for (int r = 0; r < reps; r++) {
        kiln_callable *c = NULL;
        t[r] = compile_once(be, k, &c);
        be->callable_free(c);
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    double m = t[reps / 2];
    free(t);
    return m;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Run a 1-input/1-output f64 rank-1 kernel over x; ns per element. */
static double run_ns(kiln_kernel_fn fn, void *state, double *x, double *y,
                     int64_t n)
{
    kiln_view vi, vo;
    memset(&vi, 0, sizeof vi);
    memset(&vo, 0, sizeof vo);
    vi.data = x;
    vi.rank = vo.rank = 1;
    vi.shape[0] = vo.shape[0] = n;
    vi.strides[0] = vo.strides[0] = 1;
    vo.data = y;
    char eb[256];
    kiln_call call = {sizeof call, 1, 1, &vi, &vo, kiln_runtime_get(), eb,
                      sizeof eb, NULL, 0};
    int reps = n >= 1000000 ? 5 : 2000;
    double best = 1e300;
    for (int r = 0; r < reps; r++) {
        double t0 = 1e3 * bench_now();
        if (fn(state, &call)) {
            fprintf(stderr, "kernel failed: %s\n", eb);
            exit(1);
        }
        double t = 1e3 * bench_now() - t0;
        if (t < best)
            best = t;
    }
    return best * 1e6 / (double)n;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tcc width N | stmts N | runtime N CC\n");
        return 2;
    }
    uint32_t n = (uint32_t)strtoul(argv[2], NULL, 10);
    const kiln_backend *be = tcc_backend();
    kbuild b;
    if (strcmp(argv[1], "width") == 0) {
        kb_width(&b, n);
        long rss0 = peak_rss_kb();
        double ms = median_compile(be, &b.k, 5);
        char *src = NULL, why[256];
        size_t len = 0;
        kiln_emit_c(&b.k, &src, &len, why, sizeof why);
        free(src);
        printf("%u %.4f %zu %ld\n", n, ms, len, peak_rss_kb() - rss0);
    } else if (strcmp(argv[1], "stmts") == 0) {
        kb_stmts(&b, n);
        printf("%u %.4f\n", n, median_compile(be, &b.k, 21));
    } else if (strcmp(argv[1], "runtime") == 0 && argc >= 4) {
        kb_stmts(&b, 20);
        kiln_callable *c = NULL;
        compile_once(be, &b.k, &c);
        double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n);
        for (uint32_t i = 0; i < n; i++)
            x[i] = (double)(i % 1000) / 1000.0;
        double t_tcc = run_ns(c->fn, c->state, x, y, n);
        /* the same C through the system compiler */
        char *src = NULL, why[256], cmd[1024];
        size_t len = 0;
        kiln_emit_c(&b.k, &src, &len, why, sizeof why);
        char cpath[] = "/tmp/bench_tcc_XXXXXX";
        int fd = mkstemp(cpath);
        if (fd < 0)
            return 1;
        FILE *f = fdopen(fd, "w");
        fwrite(src, 1, len, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s -O2 -x c -shared -fPIC -o %s.so %s",
                 argv[3], cpath, cpath);
        if (system(cmd) != 0)
            return 1;
        char so[64];
        snprintf(so, sizeof so, "%s.so", cpath);
        void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        void *sym = h ? dlsym(h, KILN_EMIT_C_SYMBOL) : NULL;
        if (!sym)
            return 1;
        kiln_kernel_fn fn;
        memcpy(&fn, &sym, sizeof fn);
        double t_cc = run_ns(fn, NULL, x, y, n);
        unlink(cpath);
        unlink(so);
        printf("%u %.3f %.3f %.2f\n", n, t_tcc, t_cc, t_tcc / t_cc);
        free(src);
        free(x);
        free(y);
        be->callable_free(c);
    } else {
        fprintf(stderr, "bench_tcc: unknown mode %s\n", argv[1]);
        return 2;
    }
    if (strcmp(argv[1], "runtime") != 0)
        kb_free(&b);
    return 0;
}
