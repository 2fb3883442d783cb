/*
 * test_backends.c — every backend agrees with the interpreter (design
 * invariant 7), for the backends this build has (tcc when configured).
 *
 *  1. corpus: every .kg under tests/graphs/ and the examples (radon with
 *     its real data, eight schools, both with gradients) compiled with
 *     each backend, called with seeded random inputs (special values
 *     included: NaN, +-inf, -0, huge and tiny values, integer extremes,
 *     zero-size symbolic dims), outputs compared with the interpreter's;
 *  2. random graphs: seeded, reproducible elementwise / reduction /
 *     indexing graphs, same comparison;
 *  3. artifact round trip: the test plugin "tccrt" (tests/plugins/tccrt.c)
 *     runs kernels from the tcc backend's artifact bytes through
 *     load_bytes, in this process and in a fresh process that never
 *     compiles C (child processes of this program);
 *  4. threads: two threads compile and run radon with tcc at once;
 *  5. tiers: every graph of 1 and random graphs under a tiered policy
 *     (tier 1 tcc, then llvm), with tier-up forced at random calls,
 *     equal the interpreter at every call.
 *
 * Tolerance: none.  Outputs must be bitwise equal (NaN matching any NaN):
 * the generated C performs the interpreter's operations in the
 * interpreter's order, in the same precision, and calls the same runtime
 * functions (docs/backends.md).  Integer and bool outputs are compared
 * byte for byte, float outputs bit for bit.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/policy.h>
#include <kiln/cache.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static const char *srcdir = ".", *builddir = ".";
static char plugin_dir[4096];

/* ---- random numbers (splitmix64) --------------------------------------- */

static _Thread_local uint64_t rng;   /* per thread: test_threads() runs two */
static uint64_t rnext(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double runif(void) { return (double)(rnext() >> 11) * 0x1p-53; }
static int rint_(int n) { return (int)(rnext() % (uint64_t)n); }

/* ---- results ------------------------------------------------------------ */

#define MAX_OUT 64

typedef struct result {
    int rc;
    char msg[1024];
    int n_out;
    kiln_tensor t[MAX_OUT];   /* data owned (copied) */
    size_t bytes[MAX_OUT];
} result;

static void result_free(result *r)
{
    for (int i = 0; i < r->n_out; i++)
        free(r->t[i].data);
    r->n_out = 0;
}

typedef struct inputs {
    int n;
    kiln_tensor *t;
} inputs;

static void inputs_free(inputs *in)
{
    for (int i = 0; i < in->n; i++)
        free(in->t[i].data);
    free(in->t);
    in->n = 0;
    in->t = NULL;
}

static double special_double(void)
{
    static const double s[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1e300,
                               -1e300, 4.9e-324, 0.5, -2.5, 1e-8, 700.0};
    return s[rint_((int)(sizeof s / sizeof s[0]))];
}

/* Seeded inputs for f: symbolic dims get sizes 0..6 (one per symbol). */
static int make_inputs(const kiln_function *f, uint64_t seed, inputs *in)
{
    rng = seed * 7919 + 17;
    in->n = kiln_function_n_inputs(f);
    in->t = calloc((size_t)(in->n ? in->n : 1), sizeof *in->t);
    const char *sym_names[64];
    int64_t sym_sizes[64];
    int n_sym = 0;
    int zero_ok = seed % 5 == 4;  /* some runs exercise empty tensors */
    for (int i = 0; i < in->n; i++) {
        kiln_tensor *t = &in->t[i];
        int64_t dims[KILN_MAX_RANK];
        const char *syms[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &t->dtype, &t->rank, dims, syms);
        for (int d = 0; d < t->rank; d++) {
            if (dims[d] >= 0) {
                t->shape[d] = dims[d];
                continue;
            }
            int k = 0;
            while (k < n_sym && !(syms[d] && sym_names[k] &&
                                  strcmp(sym_names[k], syms[d]) == 0))
                k++;
            if (k == n_sym && n_sym < 64) {
                sym_names[n_sym] = syms[d];
                sym_sizes[n_sym++] = zero_ok ? 0 : 1 + rint_(6);
            }
            t->shape[d] = k < 64 ? sym_sizes[k] : 3;
        }
        int64_t n = kiln_shape_numel(t->rank, t->shape);
        size_t es = kiln_dtype_size(t->dtype);
        t->data = calloc((size_t)(n ? n : 1), es);
        for (int64_t j = 0; j < n; j++) {
            int sp = runif() < 0.12;
            switch (t->dtype) {
            case KILN_F64:
                ((double *)t->data)[j] = sp ? special_double()
                                            : runif() * 6 - 3;
                break;
            case KILN_F32:
                ((float *)t->data)[j] = (float)(sp ? special_double()
                                                   : runif() * 6 - 3);
                break;
            case KILN_I64: {
                static const int64_t ex[] = {INT64_MAX, INT64_MIN,
                                             (int64_t)1 << 62, -1, 0};
                ((int64_t *)t->data)[j] = sp ? ex[rint_(5)]
                                             : (int64_t)rint_(101) - 50;
                break;
            }
            case KILN_I32: {
                static const int32_t ex[] = {INT32_MAX, INT32_MIN, 1 << 30,
                                             -1, 0};
                ((int32_t *)t->data)[j] = sp ? ex[rint_(5)]
                                             : (int32_t)rint_(101) - 50;
                break;
            }
            default:
                ((uint8_t *)t->data)[j] = (uint8_t)rint_(2);
                break;
            }
        }
    }
    return 0;
}

static void run(kiln_function *f, const inputs *in, result *r)
{
    kiln_tensor out[MAX_OUT];
    kiln_err err = {0, ""};
    memset(r, 0, sizeof *r);
    int no = kiln_function_n_outputs(f);
    if (no > MAX_OUT) {
        r->rc = -1;
        snprintf(r->msg, sizeof r->msg, "too many outputs");
        return;
    }
    r->rc = kiln_function_call(f, in->t, out, &err);
    if (r->rc) {
        snprintf(r->msg, sizeof r->msg, "%s", err.message);
        return;
    }
    r->n_out = no;
    for (int i = 0; i < no; i++) {
        r->t[i] = out[i];
        r->bytes[i] = (size_t)kiln_shape_numel(out[i].rank, out[i].shape) *
                      kiln_dtype_size(out[i].dtype);
        r->t[i].data = malloc(r->bytes[i] ? r->bytes[i] : 1);
        if (r->bytes[i])
            memcpy(r->t[i].data, out[i].data, r->bytes[i]);
    }
}

/* "" when equal, else a description of the first difference. */
static const char *compare(const result *a, const result *b, char *buf,
                           size_t n)
{
    if (a->rc != b->rc || (a->rc && strcmp(a->msg, b->msg) != 0)) {
        snprintf(buf, n, "rc %d '%.500s' vs rc %d '%.500s'", a->rc, a->msg,
                 b->rc, b->msg);
        return buf;
    }
    for (int i = 0; i < a->n_out; i++) {
        const kiln_tensor *x = &a->t[i], *y = &b->t[i];
        if (x->dtype != y->dtype || x->rank != y->rank ||
            memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank)) {
            snprintf(buf, n, "output %d: dtype/shape differ", i);
            return buf;
        }
        int64_t ne = kiln_shape_numel(x->rank, x->shape);
        for (int64_t j = 0; j < ne; j++) {
            int same;
            double vx = 0, vy = 0;
            if (x->dtype == KILN_F64) {
                vx = ((double *)x->data)[j];
                vy = ((double *)y->data)[j];
                same = memcmp(&vx, &vy, 8) == 0 || (isnan(vx) && isnan(vy));
            } else if (x->dtype == KILN_F32) {
                float fx = ((float *)x->data)[j], fy = ((float *)y->data)[j];
                vx = fx;
                vy = fy;
                same = memcmp(&fx, &fy, 4) == 0 || (isnan(fx) && isnan(fy));
            } else {
                size_t es = kiln_dtype_size(x->dtype);
                same = memcmp((char *)x->data + j * (int64_t)es,
                              (char *)y->data + j * (int64_t)es, es) == 0;
            }
            if (!same) {
                snprintf(buf, n, "output %d element %lld: %.17g vs %.17g", i,
                         (long long)j, vx, vy);
                return buf;
            }
        }
    }
    return "";
}

/* Compile with `backend`; *n_other = kernels that did not end up on it
 * (fallbacks), diagnostics silenced. */
static kiln_function *compile_with(const kiln_graph *g, const char *backend,
                                   int *n_other, kiln_err *err)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.plugin_path = plugin_dir;
    o.quiet = 1;
    kiln_function *f = kiln_compile(g, &o, err);
    *n_other = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        const char *b = kiln_function_kernel_backend(f, i);
        /* a scan's RECUR kernel is run by the host (its body's kernels
         * are compiled by `backend`, as the options ask: issue 28) */
        if (!b || (strcmp(b, backend) != 0 && strcmp(b, "host") != 0))
            (*n_other)++;
    }
    return f;
}

static int have_backend(const char *name)
{
    kiln_err err;
    kiln_graph *g = kiln_parse_string("kiln 1\ngraph t\n  input x: f64\n"
                                      "  output y = exp(x)\nend\n", "t", NULL,
                                      &err);
    int other = 1;
    kiln_function *f = g ? compile_with(g, name, &other, &err) : NULL;
    kiln_function_free(f);
    kiln_graph_free(g);
    return f && other == 0;
}

/* Compare `backend` with interp on graph g over `seeds` input sets.
 * Returns 0 when all agree (diagnostics printed otherwise). */
static int agree(const kiln_graph *g, const char *what, const char *backend,
                 int seeds, int *fallbacks)
{
    kiln_err err;
    int other = 0, other2 = 0;
    kiln_function *fi = compile_with(g, "interp", &other, &err);
    kiln_function *fb = fi ? compile_with(g, backend, &other2, &err) : NULL;
    *fallbacks = other2;
    if (!fi || !fb) {
        diag("%s: compile failed: %s", what, err.message);
        kiln_function_free(fi);
        kiln_function_free(fb);
        return -1;
    }
    int bad = 0;
    for (int s = 0; s < seeds && !bad; s++) {
        inputs in = {0, NULL};
        make_inputs(fi, (uint64_t)s, &in);
        result ri, rb;
        run(fi, &in, &ri);
        run(fb, &in, &rb);
        char buf[1200];
        const char *d = compare(&ri, &rb, buf, sizeof buf);
        if (*d) {
            diag("%s, %s, seed %d: %s", what, backend, s, d);
            bad = 1;
        }
        result_free(&ri);
        result_free(&rb);
        inputs_free(&in);
    }
    kiln_function_free(fi);
    kiln_function_free(fb);
    return bad ? -1 : 0;
}

/* ---- the corpus ------------------------------------------------------------ */

#define MAX_FILES 256
static char *files[MAX_FILES];
static int n_files;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void collect_corpus(void)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tests/graphs", srcdir);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) && n_files < MAX_FILES - 2) {
        size_t l = strlen(e->d_name);
        if (l > 3 && strcmp(e->d_name + l - 3, ".kg") == 0) {
            char *p = malloc(strlen(dir) + l + 2);
            sprintf(p, "%s/%s", dir, e->d_name);
            files[n_files++] = p;
        }
    }
    if (d)
        closedir(d);
    qsort(files, (size_t)n_files, sizeof *files, cmp_str);
    static const char *ex[] = {"examples/radon.kg", "examples/eight_schools.kg"};
    for (int i = 0; i < 2; i++) {
        char *p = malloc(strlen(srcdir) + strlen(ex[i]) + 2);
        sprintf(p, "%s/%s", srcdir, ex[i]);
        files[n_files++] = p;
    }
}

static void test_corpus(const char *backend)
{
    for (int i = 0; i < n_files; i++) {
        kiln_err err;
        kiln_graph *g = kiln_parse_file(files[i], &err);
        if (!g) {
            ok(0, "%s parses: %s", files[i], err.message);
            continue;
        }
        const char *base = strrchr(files[i], '/') ? strrchr(files[i], '/') + 1
                                                  : files[i];
        int fb = 0;
        ok(agree(g, base, backend, 6, &fb) == 0,
           "%s: %s equals interp on 6 input sets", base, backend);
        ok(fb == 0, "%s: every kernel compiled by %s (%d fell back)", base,
           backend, fb);
        kiln_graph_free(g);
    }
}

/* ---- random graphs ----------------------------------------------------- */

typedef struct val {
    int kind;     /* 0 scalar, 1 [n], 2 [3, n], 3 [3, 1] */
    int is_bool;
} val;

static int kind_bcast(int a, int b)
{
    if (a == b)
        return a;
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return 2;
}

/* A random graph's text (malloc'ed). */
static char *random_graph(uint64_t seed)
{
    rng = seed * 104729 + 3;
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
#define EMIT(...) (len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__))
    EMIT("kiln 1\ngraph rand%llu\n", (unsigned long long)seed);
    val v[64];
    int nv = 0;
    static const char *in_types[] = {"f64[n]", "f64[3, n]", "f32[n]",
                                     "i64[n]", "i32[3, n]", "bool[n]", "f64",
                                     "f32[3, n]"};
    static const int in_kind[] = {1, 2, 1, 1, 2, 1, 0, 2};
    for (int i = 0; i < 8; i++) {
        EMIT("  input v%d: %s\n", nv, in_types[i]);
        v[nv].kind = in_kind[i];
        v[nv].is_bool = i == 5;
        nv++;
    }
    static const char *un[] = {"exp", "log", "sqrt", "sigmoid", "softplus",
                               "tanh", "sin", "cos", "erf", "erfc",
                               "gammaln", "digamma", "expm1", "log1p", "neg",
                               "abs", "square", "trigamma"};
    static const char *bin[] = {"add", "sub", "mul", "true_div", "maximum",
                                "minimum", "pow"};
    static const char *cmp[] = {"lt", "le", "gt", "ge", "eq", "ne"};
    static const char *lits[] = {"0.5", "2", "-1.5", "3", "0.001", "-0.0",
                                 "7", "1e10"};
    static const char *dts[] = {"f64", "f32", "i64", "i32", "bool"};
    int n_stmt = 6 + rint_(18);
    for (int k = 0; k < n_stmt && nv < 60; k++) {
        int a = rint_(nv), b = rint_(nv);
        int c = rint_(10);
        val r = {v[a].kind, 0};
        char buf[256];
        if (c <= 1) {
            snprintf(buf, sizeof buf, "%s(v%d)", un[rint_(18)], a);
        } else if (c <= 3) {
            r.kind = kind_bcast(v[a].kind, v[b].kind);
            if (rint_(3) == 0)
                snprintf(buf, sizeof buf, "%s(v%d, %s)", bin[rint_(7)], a,
                         lits[rint_(8)]);
            else
                snprintf(buf, sizeof buf, "%s(v%d, v%d)", bin[rint_(7)], a, b);
            r.is_bool = 0;
        } else if (c == 4) {
            r.kind = kind_bcast(v[a].kind, v[b].kind);
            r.is_bool = 1;
            snprintf(buf, sizeof buf, "%s(v%d, v%d)", cmp[rint_(6)], a, b);
        } else if (c == 5) {
            int dt = rint_(5);
            r.is_bool = dt == 4;
            snprintf(buf, sizeof buf, "cast(v%d, dtype=%s)", a, dts[dt]);
        } else if (c == 6) {
            /* where / logic on bools */
            int cb = -1, cb2 = -1;
            for (int t = 0; t < nv; t++)
                if (v[(a + t) % nv].is_bool) {
                    cb = (a + t) % nv;
                    break;
                }
            for (int t = 0; t < nv; t++)
                if (v[(b + t) % nv].is_bool) {
                    cb2 = (b + t) % nv;
                    break;
                }
            if (cb < 0)
                continue;
            if (rint_(2)) {
                r.kind = kind_bcast(v[cb].kind,
                                    kind_bcast(v[a].kind, v[b].kind));
                r.is_bool = v[a].is_bool && v[b].is_bool;
                snprintf(buf, sizeof buf, "where(v%d, v%d, v%d)", cb, a, b);
            } else {
                r.kind = kind_bcast(v[cb].kind, v[cb2].kind);
                r.is_bool = 1;
                snprintf(buf, sizeof buf, "%s(v%d, v%d)",
                         rint_(2) ? "and" : "or", cb, cb2);
            }
        } else if (c <= 8) {
            /* reductions */
            static const char *red[] = {"sum", "prod", "max", "min", "mean",
                                        "logsumexp"};
            int op = rint_(6);
            if (v[a].is_bool && (op == 2 || op == 3))
                op = 0;
            if (v[a].kind == 0) {
                snprintf(buf, sizeof buf, "%s(v%d)", red[op], a);
                r.kind = 0;
            } else if (v[a].kind == 2 && rint_(3) == 0) {
                snprintf(buf, sizeof buf, "%s(v%d, axis=0)", red[op], a);
                r.kind = 1;
            } else if (v[a].kind == 2 && rint_(2) == 0) {
                snprintf(buf, sizeof buf, "%s(v%d, axis=1, keepdims=true)",
                         red[op], a);
                r.kind = 3;
            } else {
                snprintf(buf, sizeof buf, "%s(v%d)", red[op], a);
                r.kind = 0;
            }
            r.is_bool = 0;
        } else {
            /* views: reversed, sliced through a set_subtensor */
            if (v[a].kind == 1) {
                snprintf(buf, sizeof buf, "v%d[::-1]", a);
            } else if (v[a].kind == 2) {
                snprintf(buf, sizeof buf, rint_(2) ? "v%d[:, ::-1]"
                                                   : "v%d[::-2]", a);
                if (strstr(buf, "::-2"))
                    r.kind = 2; /* rows 2 and 0: [2, n] would not fit */
                if (strstr(buf, "::-2"))
                    snprintf(buf, sizeof buf, "v%d[:, ::-1]", a);
            } else {
                snprintf(buf, sizeof buf, "square(v%d)", a);
            }
            r.is_bool = v[a].is_bool && strstr(buf, "square") == NULL;
        }
        EMIT("  v%d = %s\n", nv, buf);
        v[nv++] = r;
    }
    for (int i = 8; i < nv; i++)
        if (i >= nv - 3 || rint_(3) == 0)
            EMIT("  output o%d = v%d\n", i, i);
    EMIT("end\n");
#undef EMIT
    return s;
}

static void test_random(const char *backend, int n_graphs)
{
    int agreed = 0, parsed = 0, fallbacks = 0;
    char first_bad[200] = "";
    for (int i = 0; i < n_graphs; i++) {
        char *text = random_graph((uint64_t)i);
        kiln_err err;
        kiln_graph *g = kiln_parse_string(text, "random", NULL, &err);
        if (!g) {
            if (!first_bad[0])
                snprintf(first_bad, sizeof first_bad, "%.150s", err.message);
            free(text);
            continue;
        }
        parsed++;
        char what[64];
        snprintf(what, sizeof what, "random graph %d", i);
        int fb = 0;
        if (agree(g, what, backend, 3, &fb) == 0)
            agreed++;
        else
            diag("%s", text);
        fallbacks += fb;
        kiln_graph_free(g);
        free(text);
    }
    if (first_bad[0])
        diag("a random graph did not parse: %s", first_bad);
    ok(parsed >= n_graphs * 9 / 10, "random graphs: %d of %d are valid",
       parsed, n_graphs);
    ok(agreed == parsed, "random graphs: %s equals interp on %d of %d "
       "(3 input sets each)", backend, agreed, parsed);
    ok(fallbacks == 0, "random graphs: no kernel fell back (%d)", fallbacks);
}

/* ---- mixed policies: random per-kernel backend assignments --------------- */

/* A random policy over the backends in pool[]: 2..6 rules, each with one
 * to three random matchers (op names and kinds, width, elements,
 * scalar_ops), a random `use` and a random default, so that the kernels
 * of one graph land on different backends — including the example plugin,
 * which refuses most kernels (a refusal falls back down the chain). */
static char *random_policy(uint64_t seed, const char *const *pool, int n_pool)
{
    static const char *const ops[] = {
        "add", "mul", "sub", "exp", "log", "sum", "take", "join",
        "true_div", "square", "elemwise", "reduce", "gather", "scatter",
        "neg", "maximum", "where", "cast"};
    rng = seed * 7919 + 17;
    size_t cap = 4096, len = 0;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    len += (size_t)snprintf(t + len, cap - len, "kiln_policy: 1\nbackends: [");
    for (int i = 0; i < n_pool; i++)
        len += (size_t)snprintf(t + len, cap - len, "%s%s", i ? ", " : "",
                                pool[i]);
    len += (size_t)snprintf(t + len, cap - len, "]\ndefault: %s\nrules:\n",
                            pool[rint_(n_pool)]);
    int nr = 2 + rint_(5);
    for (int r = 0; r < nr && len < cap - 300; r++) {
        len += (size_t)snprintf(t + len, cap - len, "  - use: %s\n    when:\n",
                                pool[rint_(n_pool)]);
        int m = rint_(4), any = 0;
        if (m == 0 || rint_(2)) {
            len += (size_t)snprintf(t + len, cap - len, "      op: [%s, %s]\n",
                                    ops[rint_(18)], ops[rint_(18)]);
            any = 1;
        }
        if (m == 1 || rint_(3) == 0) {
            len += (size_t)snprintf(t + len, cap - len,
                                    "      width: {%s: %d}\n",
                                    rint_(2) ? "gt" : "le", rint_(3));
            any = 1;
        }
        if (m == 2 || rint_(3) == 0) {
            len += (size_t)snprintf(t + len, cap - len,
                                    "      elements: {ge: %d}\n",
                                    1 + rint_(50));
            any = 1;
        }
        if (m == 3 || !any)
            len += (size_t)snprintf(t + len, cap - len,
                                    "      scalar_ops: {le: %d}\n",
                                    1 + rint_(5));
    }
    return t;
}

/* Graph g under a random policy equals interp on `seeds` input sets. */
static int agree_policy(const kiln_graph *g, const char *what,
                        const char *policy_text, int seeds, int *n_mixed)
{
    kiln_err err;
    int other = 0;
    kiln_policy *pol = kiln_policy_load_string(policy_text,
                                               strlen(policy_text),
                                               "random.yaml", &err);
    if (!pol) {
        diag("%s: random policy rejected: %s\n%s", what, err.message,
             policy_text);
        return -1;
    }
    kiln_function *fi = compile_with(g, "interp", &other, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.plugin_path = plugin_dir;
    o.quiet = 1;
    o.policy = pol;
    kiln_function *fb = fi ? kiln_compile(g, &o, &err) : NULL;
    kiln_policy_free(pol);   /* fb keeps its own reference */
    if (!fi || !fb) {
        diag("%s: compile failed: %s", what, err.message);
        kiln_function_free(fi);
        kiln_function_free(fb);
        return -1;
    }
    *n_mixed = 0;
    for (int i = 0; i < kiln_function_n_kernels(fb); i++)
        *n_mixed += strcmp(kiln_function_kernel_backend(fb, i), "interp") != 0;
    int bad = 0;
    for (int s = 0; s < seeds && !bad; s++) {
        inputs in = {0, NULL};
        make_inputs(fi, (uint64_t)s + 100, &in);
        result ri, rb;
        run(fi, &in, &ri);
        run(fb, &in, &rb);
        char buf[1200];
        const char *d = compare(&ri, &rb, buf, sizeof buf);
        if (*d) {
            diag("%s, random policy, seed %d: %s\n%s", what, s, d,
                 policy_text);
            bad = 1;
        }
        result_free(&ri);
        result_free(&rb);
        inputs_free(&in);
    }
    kiln_function_free(fi);
    kiln_function_free(fb);
    return bad ? -1 : 0;
}

/* Corpus graph i, parsed (NULL when it does not parse), and its file's
 * base name in *base. */
static kiln_graph *corpus_graph(int i, const char **base)
{
    kiln_err err;
    const char *slash = strrchr(files[i], '/');
    *base = slash ? slash + 1 : files[i];
    return kiln_parse_file(files[i], &err);
}

static void test_mixed(int n_random)
{
    const char *pool[4] = {"interp", "example"};
    int n_pool = 2;
    if (have_backend("tcc"))
        pool[n_pool++] = "tcc";
    int total = 0, on_plugins = 0;
    for (int i = 0; i < n_files; i++) {
        const char *base;
        kiln_graph *g = corpus_graph(i, &base);
        if (!g)
            continue;
        for (int k = 0; k < 2; k++) {
            char *pt = random_policy((uint64_t)(i * 2 + k), pool, n_pool);
            int mixed = 0;
            int same = pt && agree_policy(g, base, pt, 3, &mixed) == 0;
            ok(same, "%s: random policy %d (%d kernels off interp) equals "
               "interp", base, k, mixed);
            on_plugins += mixed;
            total++;
            free(pt);
        }
        kiln_graph_free(g);
    }
    int bad = 0;
    for (int i = 0; i < n_random; i++) {
        char *src = random_graph((uint64_t)i + 5000);
        kiln_err err;
        kiln_graph *g = src ? kiln_parse_string(src, "r.kg", NULL, &err)
                            : NULL;
        char *pt = random_policy((uint64_t)i + 900, pool, n_pool);
        int mixed = 0;
        if (g && pt && agree_policy(g, "random graph", pt, 2, &mixed))
            bad++;
        on_plugins += mixed;
        kiln_graph_free(g);
        free(pt);
        free(src);
    }
    ok(bad == 0, "%d random graphs under random policies equal interp (%d "
       "failed)", n_random, bad);
    ok(on_plugins > 0, "random policies put %d kernels on plugins",
       on_plugins);
}

/* ---- tiers: tier-up forced at random calls ------------------------------ */

/* Graph g compiled with a tiered policy whose tier 1 is `tier1` (tier 0
 * the interpreter, the disk cache off so that every kernel starts on tier
 * 0) equals the interpreter at every call, while kernels are forced up
 * (kiln_function_tier_up) at random calls — one kernel, or all of them —
 * on top of what the trigger does by itself.  *n_up receives the kernels
 * that ran tier-1 code at the end. */
static int agree_tiered(const kiln_graph *g, const char *what,
                        const char *tier1, uint64_t seed, int calls,
                        int *n_up)
{
    char text[512];
    snprintf(text, sizeof text,
             "kiln_policy: 1\nbackends: [%s, interp]\ndefault: interp\n"
             "tiers: {tier0: [interp], tier1: %s, ratio: %s, "
             "sample_every: 2}\n", tier1, tier1,
             seed % 2 ? "1e-9" : "1000");
    kiln_err err;
    kiln_policy *pol = kiln_policy_load_string(text, strlen(text),
                                               "tiers.yaml", &err);
    if (!pol) {
        diag("%s: tiered policy rejected: %s", what, err.message);
        return -1;
    }
    int other = 0;
    kiln_function *fi = compile_with(g, "interp", &other, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.plugin_path = plugin_dir;
    o.quiet = 1;
    o.policy = pol;
    o.cache_mode = KILN_CACHE_MODE_OFF;
    kiln_function *ft = fi ? kiln_compile(g, &o, &err) : NULL;
    kiln_policy_free(pol);
    if (!fi || !ft) {
        diag("%s: compile failed: %s", what, err.message);
        kiln_function_free(fi);
        kiln_function_free(ft);
        return -1;
    }
    rng = seed * 31 + 7;
    int nk = kiln_function_n_kernels(ft), bad = 0;
    uint64_t pick = rnext();
    for (int c = 0; c < calls && !bad; c++) {
        if (pick % 3 == 0) {
            int k = (int)(pick / 3 % (uint64_t)(nk + 1)) - 1;
            if (kiln_function_tier_up(ft, k, &err)) {
                diag("%s: tier-up of kernel %d: %s", what, k, err.message);
                bad = 1;
                break;
            }
        }
        inputs in = {0, NULL};
        make_inputs(fi, seed * 100 + (uint64_t)c, &in);
        pick = rnext();   /* make_inputs reseeds; keep our own stream */
        result ri, rt;
        run(fi, &in, &ri);
        run(ft, &in, &rt);
        char buf[1200];
        const char *d = compare(&ri, &rt, buf, sizeof buf);
        if (*d) {
            diag("%s, tier 1 %s, seed %llu, call %d: %s", what, tier1,
                 (unsigned long long)seed, c, d);
            bad = 1;
        }
        result_free(&ri);
        result_free(&rt);
        inputs_free(&in);
        rng = pick;
    }
    kiln_function_tier_wait(ft, -1);
    *n_up = 0;
    for (int i = 0; i < nk; i++) {
        kiln_tier_info ti;
        memset(&ti, 0, sizeof ti);
        ti.struct_size = sizeof ti;
        if (kiln_function_tier_info(ft, i, &ti) == 0 &&
            ti.state == KILN_TIER_SWAPPED)
            (*n_up)++;
    }
    kiln_function_free(fi);
    kiln_function_free(ft);
    return bad ? -1 : 0;
}

static void test_tiers(const char *tier1, int n_random)
{
    int up = 0;
    for (int i = 0; i < n_files; i++) {
        const char *base;
        kiln_graph *g = corpus_graph(i, &base);
        if (!g)
            continue;
        for (uint64_t k = 0; k < 2; k++) {
            int n_up = 0;
            ok(agree_tiered(g, base, tier1, (uint64_t)i * 2 + k, 8, &n_up) ==
                   0,
               "%s: tier-up to %s at random calls equals interp at every "
               "call (%d kernels up)", base, tier1, n_up);
            up += n_up;
        }
        kiln_graph_free(g);
    }
    int bad = 0;
    for (int i = 0; i < n_random; i++) {
        char *src = random_graph((uint64_t)i + 7000);
        kiln_err err;
        kiln_graph *g = src ? kiln_parse_string(src, "r.kg", NULL, &err)
                            : NULL;
        int n_up = 0;
        if (g && agree_tiered(g, "random graph", tier1, (uint64_t)i + 300, 4,
                              &n_up))
            bad++;
        up += n_up;
        kiln_graph_free(g);
        free(src);
    }
    ok(bad == 0, "%d random graphs: tier-up to %s at random calls equals "
       "interp (%d failed)", n_random, tier1, bad);
    ok(up > 0, "%d kernels ran %s code by the end", up, tier1);
}

/* ---- artifacts across processes ------------------------------------------ */

static int write_result(const char *path, const result *r)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(&r->rc, sizeof r->rc, 1, f);
    fwrite(r->msg, 1, sizeof r->msg, f);
    fwrite(&r->n_out, sizeof r->n_out, 1, f);
    for (int i = 0; i < r->n_out; i++) {
        fwrite(&r->t[i], sizeof r->t[i], 1, f);
        fwrite(&r->bytes[i], sizeof r->bytes[i], 1, f);
        fwrite(r->t[i].data, 1, r->bytes[i], f);
    }
    return fclose(f);
}

static int read_result(const char *path, result *r)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    int okr = fread(&r->rc, sizeof r->rc, 1, f) == 1 &&
              fread(r->msg, 1, sizeof r->msg, f) == sizeof r->msg &&
              fread(&r->n_out, sizeof r->n_out, 1, f) == 1 &&
              r->n_out >= 0 && r->n_out <= MAX_OUT;
    for (int i = 0; okr && i < r->n_out; i++) {
        okr = fread(&r->t[i], sizeof r->t[i], 1, f) == 1 &&
              fread(&r->bytes[i], sizeof r->bytes[i], 1, f) == 1;
        r->t[i].data = okr ? malloc(r->bytes[i] ? r->bytes[i] : 1) : NULL;
        okr = okr && fread(r->t[i].data, 1, r->bytes[i], f) == r->bytes[i];
        if (!okr)
            r->n_out = i + (r->t[i].data != NULL);
    }
    fclose(f);
    return okr ? 0 : -1;
}

/* Child: compile FILE with tccrt (mode from the environment), run it on
 * the inputs of SEED, write the result to OUT. */
static int child_main(const char *file, const char *seed, const char *out)
{
    kiln_err err;
    kiln_graph *g = kiln_parse_file(file, &err);
    int other = 0;
    kiln_function *f = g ? compile_with(g, "tccrt", &other, &err) : NULL;
    kiln_graph_free(g);
    if (!f || other) {
        fprintf(stderr, "child: %s (%d kernels not on tccrt)\n",
                f ? "fallback" : err.message, other);
        kiln_function_free(f);
        return 1;
    }
    inputs in = {0, NULL};
    make_inputs(f, strtoull(seed, NULL, 10), &in);
    result r;
    run(f, &in, &r);
    int rc = write_result(out, &r);
    result_free(&r);
    inputs_free(&in);
    kiln_function_free(f);
    return rc ? 1 : 0;
}

static void test_artifacts(const char *self)
{
    char tcc_so[4200], tmpl[] = "/tmp/kiln-tccrt-XXXXXX";
    snprintf(tcc_so, sizeof tcc_so, "%s/backends/tcc/.libs/tcc.so", builddir);
    setenv("KILN_TCCRT_TCC", tcc_so, 1);
    if (!have_backend("tccrt")) {
        ok(0, "the tccrt test plugin loads (%s)", tcc_so);
        return;
    }
    /* in this process: every corpus graph through bytes + load_bytes */
    unsetenv("KILN_TCCRT_MODE");
    for (int i = 0; i < n_files; i++) {
        kiln_err err;
        kiln_graph *g = kiln_parse_file(files[i], &err);
        const char *base = strrchr(files[i], '/') + 1;
        int fb = 0;
        ok(g && agree(g, base, "tccrt", 2, &fb) == 0 && fb == 0,
           "%s: tcc artifact bytes -> load_bytes equal interp", base);
        kiln_graph_free(g);
    }
    /* across processes: one saves the bytes, a fresh one only loads */
    char *dir = mkdtemp(tmpl);
    if (!ok(dir != NULL, "temporary directory"))
        return;
    setenv("KILN_TCCRT_DIR", dir, 1);
    for (int i = n_files - 2; i < n_files; i++) {
        const char *base = strrchr(files[i], '/') + 1;
        char cmd[9000], out_save[4300], out_load[4300];
        snprintf(out_save, sizeof out_save, "%s/save.out", dir);
        snprintf(out_load, sizeof out_load, "%s/load.out", dir);
        snprintf(cmd, sizeof cmd, "KILN_TCCRT_MODE=save '%s' --child '%s' 1 "
                 "'%s'", self, files[i], out_save);
        int rc1 = system(cmd);
        snprintf(cmd, sizeof cmd, "KILN_TCCRT_MODE=load '%s' --child '%s' 1 "
                 "'%s'", self, files[i], out_load);
        int rc2 = system(cmd);
        ok(rc1 == 0 && rc2 == 0, "%s: child processes save and load the "
           "artifacts", base);
        result rs, rl, ri;
        kiln_err err;
        kiln_graph *g = kiln_parse_file(files[i], &err);
        int other = 0;
        kiln_function *fi = g ? compile_with(g, "interp", &other, &err) : NULL;
        inputs in = {0, NULL};
        make_inputs(fi, 1, &in);
        run(fi, &in, &ri);
        char b1[1200], b2[1200];
        int got = read_result(out_save, &rs) == 0 &&
                  read_result(out_load, &rl) == 0;
        ok(got && !*compare(&ri, &rs, b1, sizeof b1) &&
               !*compare(&ri, &rl, b2, sizeof b2),
           "%s: a fresh process running only loaded artifacts equals interp",
           base);
        if (got)
            diag("%s", *compare(&ri, &rl, b2, sizeof b2) ? b2 : "(equal)");
        result_free(&rs);
        result_free(&rl);
        result_free(&ri);
        inputs_free(&in);
        kiln_function_free(fi);
        kiln_graph_free(g);
        /* clean up the artifacts of this model */
        for (int k = 0; k < 100000; k++) {
            char p[4300];
            snprintf(p, sizeof p, "%s/%d.bin", dir, k);
            if (unlink(p) != 0)
                break;
        }
        unlink(out_save);
        unlink(out_load);
    }
    rmdir(dir);
    unsetenv("KILN_TCCRT_DIR");
}

/* ---- threads ------------------------------------------------------------ */

typedef struct thread_job {
    const char *file;
    result r;
    int failed;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    for (int rep = 0; rep < 3; rep++) {
        kiln_err err;
        kiln_graph *g = kiln_parse_file(j->file, &err);
        int other = 0;
        kiln_function *f = g ? compile_with(g, "tcc", &other, &err) : NULL;
        kiln_graph_free(g);
        if (!f || other) {
            j->failed = 1;
            kiln_function_free(f);
            return NULL;
        }
        inputs in = {0, NULL};
        make_inputs(f, 2, &in);
        if (rep)
            result_free(&j->r);
        run(f, &in, &j->r);
        inputs_free(&in);
        kiln_function_free(f);
    }
    return NULL;
}

static void test_threads(void)
{
    const char *radon = files[n_files - 2];
    thread_job jobs[2];
    pthread_t th[2];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < 2; i++) {
        jobs[i].file = radon;
        pthread_create(&th[i], NULL, thread_main, &jobs[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    kiln_err err;
    kiln_graph *g = kiln_parse_file(radon, &err);
    int other = 0;
    kiln_function *fi = compile_with(g, "interp", &other, &err);
    inputs in = {0, NULL};
    make_inputs(fi, 2, &in);
    result ri;
    run(fi, &in, &ri);
    char b[1200];
    for (int i = 0; i < 2; i++) {
        ok(!jobs[i].failed && !*compare(&ri, &jobs[i].r, b, sizeof b),
           "thread %d: radon compiled with tcc while another thread "
           "compiles equals interp", i);
        result_free(&jobs[i].r);
    }
    result_free(&ri);
    inputs_free(&in);
    kiln_function_free(fi);
    kiln_graph_free(g);
}

int main(int argc, char **argv)
{
    if (getenv("KILN_SRCDIR"))
        srcdir = getenv("KILN_SRCDIR");
    if (getenv("KILN_BUILDDIR"))
        builddir = getenv("KILN_BUILDDIR");
    snprintf(plugin_dir, sizeof plugin_dir, "%s/tests/plugins/.libs",
             builddir);
    unsetenv("KILN_BACKEND");
    if (argc == 5 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], argv[4]);
    collect_corpus();
    ok(n_files >= 10, "corpus: %d graphs", n_files);
    test_corpus("interp"); /* the harness itself: interp equals interp */
    test_mixed(60);        /* random per-kernel assignments by policy */
    if (!have_backend("tcc")) {
        ok(1, "tcc backend # SKIP not built (configure --with-tcc)");
    } else {
        test_corpus("tcc");
        test_random("tcc", 150);
        test_artifacts(argv[0]);
        test_threads();
        test_tiers("tcc", 30);
    }
    /* the llvm backend (tests/test_llvm.c has its own round trip and
     * thread tests) */
    if (!have_backend("llvm")) {
        ok(1, "llvm backend # SKIP not built (configure --with-llvm)");
    } else {
        test_corpus("llvm");
        test_random("llvm", 150);
        test_tiers("llvm", 30);
    }
    for (int i = 0; i < n_files; i++)
        free(files[i]);
    return done_testing();
}
