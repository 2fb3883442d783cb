/*
 * test_cache.c — the contract of cache keys (kiln_key_*) and of the disk
 * cache (core/cache/store.c): warm start, sharing between models, modes,
 * corruption, security, eviction, fork, concurrency and crash safety.
 *
 * Disk tests compile with a backend that makes storable artifacts (tcc,
 * else llvm); they are skipped when neither is built.  Every result that
 * came from the cache is compared with the interpreter's.
 */
#define _GNU_SOURCE
#include "tap.h"

#include <kiln/cache.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/policy.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

static char cache_dir[512];
static const char *disk_backend;    /* tcc or llvm, or NULL */

/* ---- helpers ------------------------------------------------------------ */

static int is_str(const char *got, const char *want, const char *what)
{
    int r = ok(strcmp(got, want) == 0, "%s", what);
    if (!r)
        diag("got %s, want %s", got, want);
    return r;
}

static kiln_function *build(const char *src, const char *backend, int mode,
                            const char *dir, FILE *dg)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(src, "<test>", NULL, &err);
    if (!g) {
        diag("parse: %s", err.message);
        return NULL;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.jobs = 1;
    o.diag = dg;
    o.quiet = dg == NULL;
    o.cache_mode = mode;
    o.cache_dir = dir;
    kiln_function *f = kiln_compile(g, &o, &err);
    if (!f)
        diag("compile: %s", err.message);
    kiln_graph_free(g);
    return f;
}

/* Run f on deterministic inputs (every input f64 with static dims);
 * outputs flattened into out.  Returns the count, or -1. */
static int run(kiln_function *f, double *out, int max)
{
    int ni = kiln_function_n_inputs(f), no = kiln_function_n_outputs(f);
    kiln_tensor in[16], res[16];
    double data[16][64];
    if (ni > 16 || no > 16)
        return -1;
    for (int i = 0; i < ni; i++) {
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &dt, &rank, dims, NULL);
        in[i].dtype = dt;
        in[i].rank = rank;
        int64_t n = 1;
        for (int k = 0; k < rank; k++) {
            in[i].shape[k] = dims[k] < 0 ? 4 : dims[k];
            n *= in[i].shape[k];
        }
        if (dt != KILN_F64 || n > 64)
            return -1;
        for (int64_t j = 0; j < n; j++)
            data[i][j] = 0.25 * (i + 1) + 0.125 * (double)j - 0.3;
        in[i].data = data[i];
    }
    kiln_err err = {0, ""};
    if (kiln_function_call(f, in, res, &err)) {
        diag("call: %s", err.message);
        return -1;
    }
    int m = 0;
    for (int o = 0; o < no; o++) {
        int64_t n = 1;
        for (int k = 0; k < res[o].rank; k++)
            n *= res[o].shape[k];
        for (int64_t j = 0; j < n && m < max; j++)
            m += (out[m] = ((double *)res[o].data)[j], 1);
    }
    return m;
}

/* Results of `src` under `backend` through the cache equal interp's. */
static int same_as_interp(kiln_function *f, const char *src)
{
    kiln_function *r = build(src, "interp", KILN_CACHE_MODE_OFF, NULL, NULL);
    double a[256], b[256];
    int na = f ? run(f, a, 256) : -1, nb = r ? run(r, b, 256) : -2;
    kiln_function_free(r);
    if (na != nb || na < 0)
        return 0;
    for (int i = 0; i < na; i++)
        if (!(fabs(a[i] - b[i]) <= 1e-12 * (1 + fabs(b[i]))) &&
            !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

/* Count the kernels of f whose report says `what`. */
static int count_cache(const kiln_function *f, int what)
{
    int n = 0;
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_report r;
        r.struct_size = sizeof r;
        if (kiln_function_kernel_report(f, i, &r) == 0 && r.cache == what)
            n++;
    }
    return n;
}

static int storable_kernels(const kiln_function *f)
{
    int n = 0;
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_report r;
        r.struct_size = sizeof r;
        if (kiln_function_kernel_report(f, i, &r) == 0 &&
            r.cache != KILN_CACHE_NONE)
            n++;
    }
    return n;
}

/* Number of different keys among f's kernels. */
static int distinct_keys(const kiln_function *f)
{
    int distinct = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        kiln_key ki, kj;
        kiln_function_kernel_key(f, i, &ki);
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) {
            kiln_function_kernel_key(f, j, &kj);
            seen = memcmp(ki.b, kj.b, KILN_KEY_BYTES) == 0;
        }
        distinct += !seen;
    }
    return distinct;
}

/* The key of the first kernel labelled `label`, as hex. */
static int key_of(const kiln_function *f, const char *label, char *hex)
{
    for (int i = 0; i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_report r;
        r.struct_size = sizeof r;
        if (kiln_function_kernel_report(f, i, &r) == 0 &&
            strcmp(r.label, label) == 0) {
            kiln_key_hex(&r.key, hex);
            return 1;
        }
    }
    hex[0] = '\0';
    return 0;
}

/* Sorted keys of f, joined, for set comparisons. */
static char *key_set(const kiln_function *f)
{
    int n = kiln_function_n_kernels(f);
    char *keys = calloc((size_t)n + 1, KILN_KEY_HEX + 1);
    for (int i = 0; i < n; i++) {
        kiln_key k;
        kiln_function_kernel_key(f, i, &k);
        kiln_key_hex(&k, keys + (size_t)i * (KILN_KEY_HEX + 1));
    }
    qsort(keys, (size_t)n, KILN_KEY_HEX + 1,
          (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i + 1 < n; i++)
        keys[(size_t)i * (KILN_KEY_HEX + 1) + KILN_KEY_HEX] = ',';
    return keys;
}

static char *key_set_of(const char *src)
{
    kiln_function *f = build(src, "interp", KILN_CACHE_MODE_OFF, NULL, NULL);
    char *s = f ? key_set(f) : strdup("");
    kiln_function_free(f);
    return s;
}

/* The last kernels of two one-node models have different keys. */
static int differ(const char *a, const char *b)
{
    kiln_function *fa = build(a, "interp", KILN_CACHE_MODE_OFF, NULL, NULL);
    kiln_function *fb = build(b, "interp", KILN_CACHE_MODE_OFF, NULL, NULL);
    kiln_key ka, kb;
    int r = fa && fb &&
            kiln_function_kernel_key(fa, kiln_function_n_kernels(fa) - 1,
                                     &ka) == 0 &&
            kiln_function_kernel_key(fb, kiln_function_n_kernels(fb) - 1,
                                     &kb) == 0 &&
            memcmp(ka.b, kb.b, KILN_KEY_BYTES) != 0;
    kiln_function_free(fa);
    kiln_function_free(fb);
    return r;
}

static int clear_cache(void)
{
    kiln_err err = {0, ""};
    kiln_cache *c = kiln_cache_open(cache_dir, 1, &err);
    if (!c)
        return -1;
    int rc = kiln_cache_clear(c, NULL, &err);
    kiln_cache_close(c);
    return rc;
}

typedef struct entries {
    int n, bad;
    char path[64][600];
} entries;

static int collect(const kiln_cache_entry *e, void *ctx)
{
    entries *x = ctx;
    if (!e->ok) {
        x->bad++;
        diag("entry %s: %s", e->path, e->problem);
    }
    if (x->n < 64)
        snprintf(x->path[x->n], sizeof x->path[0], "%s", e->path);
    x->n++;
    return 0;
}

static entries list_entries(int verify)
{
    entries x;
    memset(&x, 0, sizeof x);
    kiln_err err = {0, ""};
    kiln_cache *c = kiln_cache_open(cache_dir, 1, &err);
    if (c) {
        if (verify)
            kiln_cache_verify(c, 0, collect, &x, &err);
        else
            kiln_cache_list(c, collect, &x, &err);
        kiln_cache_close(c);
    } else {
        diag("%s", err.message);
    }
    return x;
}

/* ---- models ------------------------------------------------------------- */

static const char *M1 =
    "kiln 1\ngraph m1\n"
    "  input x: f64[8]\n  input y: f64[8]\n"
    "  a = exp(x)\n  b = sub(x, y)\n  c = mul(a, b)\n"
    "  output s = sum(c)\n  output t = log1p(square(y))\nend\n";
/* the same computation: other names, statements reordered */
static const char *M1_RENAMED =
    "kiln 1\ngraph other\n"
    "  input p: f64[8]\n  input q: f64[8]\n"
    "  dq = sub(p, q)\n  ep = exp(p)\n  prod_ = mul(ep, dq)\n"
    "  output total = sum(prod_)\n  output w = log1p(square(q))\nend\n";
/* shares exp(x) and log1p(square(y)) with M1, nothing else */
static const char *M2 =
    "kiln 1\ngraph m2\n"
    "  input u: f64[8]\n  input v: f64[8]\n"
    "  e = exp(u)\n  output r = true_div(e, add(v, 10.0))\n"
    "  output t = log1p(square(v))\nend\n";

static const char *RADON_LIKE =
    "kiln 1\ngraph rl\n"
    "  input mu: f64\n  input ls: f64\n  input z: f64[6]\n"
    "  s = exp(ls)\n  a = add(mu, mul(s, z))\n"
    "  lp = sum(mul(-0.5, square(true_div(a, 3.0))))\n"
    "  output out = sub(lp, ls)\n"
    "  d_mu, d_ls, d_z = grad(out, mu, ls, z)\n"
    "  output d_mu\n  output d_ls\n  output d_z\nend\n";

/* ---- key contract ------------------------------------------------------- */

static void test_keys(void)
{
    char *a = key_set_of(M1), *b = key_set_of(M1_RENAMED);
    ok(a[0] && strcmp(a, b) == 0, "renaming every variable and reordering "
       "statements changes no key");
    free(a);
    free(b);
    /* the rest of this file looks at the kernels of single nodes (the key
     * of `exp` in two models, kernels two models share): without fusion,
     * which merges them into groups (docs/rewrite.md); the check above
     * ran with it */
    setenv("KILN_PASSES", "-fuse", 1);

    kiln_function *f1 = build(M1, "interp", KILN_CACHE_MODE_OFF, NULL, NULL);
    kiln_function *f2 = build(M2, "interp", KILN_CACHE_MODE_OFF, NULL, NULL);
    char k1[KILN_KEY_HEX + 1], k2[KILN_KEY_HEX + 1];
    ok(f1 && f2 && key_of(f1, "exp", k1) && key_of(f2, "exp", k2) &&
       strcmp(k1, k2) == 0, "the same node in two models has the same key "
       "(%s)", k1);
    kiln_function_free(f1);
    kiln_function_free(f2);

    /* what must change a key */
    const char *hd = "kiln 1\ngraph g\n";
    char x[600], y[600];
#define VARIANT(A, B, LABEL, WHAT)                                         \
    do {                                                                   \
        snprintf(x, sizeof x, "%s%s\nend\n", hd, A);                       \
        snprintf(y, sizeof y, "%s%s\nend\n", hd, B);                       \
        ok(differ(x, y), "%s changes the key (%s)", WHAT, LABEL);          \
    } while (0)
    VARIANT("  input x: f64[4]\n  output r = exp(x)",
            "  input x: f32[4]\n  output r = exp(x)", "exp", "a dtype");
    VARIANT("  input x: f64[4]\n  output r = exp(x)",
            "  input x: f64[4, 2]\n  output r = exp(x)", "exp", "a rank");
    VARIANT("  input x: f64[4]\n  output r = exp(x)",
            "  input x: f64[4]\n  output r = log(x)", "exp", "an op");
    VARIANT("  input x: f64[4, 3]\n  output r = sum(x, axis=0)",
            "  input x: f64[4, 3]\n  output r = sum(x, axis=1)", "sum",
            "an attribute (reduction axis)");
    VARIANT("  input x: f64[4]\n  output r = add(x, 1.0)",
            "  input x: f64[4]\n  output r = add(x, 2.0)", "add",
            "a small constant's value");
    VARIANT("  input x: f64[4]\n  input y: f64[4]\n  output r = sub(x, y)",
            "  input x: f64[4]\n  input y: f64[4]\n  output r = sub(x, x)",
            "sub", "the wiring (sub(x, y) vs sub(x, x))");
#undef VARIANT
    /* broadcasting is a property of the views, not of the code: shared */
    kiln_function *fb = build("kiln 1\ngraph g\n  input x: f64[4]\n"
                              "  input y: f64[1]\n  output r = add(x, y)\n"
                              "end\n", "interp", KILN_CACHE_MODE_OFF, NULL,
                              NULL);
    kiln_function *fn = build("kiln 1\ngraph g\n  input x: f64[4]\n"
                              "  input y: f64[4]\n  output r = add(x, y)\n"
                              "end\n", "interp", KILN_CACHE_MODE_OFF, NULL,
                              NULL);
    ok(fb && fn && key_of(fb, "add", k1) && key_of(fn, "add", k2) &&
       strcmp(k1, k2) == 0, "a broadcast input shares the key and the "
       "stride-generic code (docs/cache.md)");
    kiln_function_free(fb);
    kiln_function_free(fn);
}

/* The canonical bytes of a hand-made kernel, written here from the
 * format documented in core/cache/cachekey.c, and its hash from libxxhash. */
static void test_golden(void)
{
    kiln_arg_desc in[2] = {{KILN_F64, 1, {0, 0}}, {KILN_F64, 1, {0, 0}}};
    kiln_arg_desc out[1] = {{KILN_F64, 1, {0, 0}}};
    kiln_instr prog[3] = {
        {KILN_I_LOAD, KILN_F64, 0, 0, -1, -1, 0},
        {KILN_I_LOAD, KILN_F64, 0, 1, -1, -1, 0},
        {KILN_I_SUB, KILN_F64, 0, 0, 1, -1, 0},
    };
    int32_t refs[1] = {2};
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = KILN_KERNEL_ELEMWISE;
    k.n_inputs = 2;
    k.n_outputs = 1;
    k.inputs = in;
    k.outputs = out;
    k.n_instrs = 3;
    k.instrs = prog;
    k.out_refs = refs;
    k.label = "sub";
    k.axis = 7;           /* unused by the kind: must not matter */
    static const uint8_t expect[] = {
        1, 1, 2, 0, 0, 0, 1, 0, 0, 0,         /* fmt, kind, n_in, n_out */
        KILN_F64, 1, KILN_F64, 1, KILN_F64, 1,
        3, 0, 0, 0,                           /* n_instrs */
        KILN_I_LOAD, 0, KILN_F64, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,
        KILN_I_LOAD, 0, KILN_F64, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,
        KILN_I_SUB, 0, KILN_F64, 0, 0, 0, 0, 1, 0, 0, 0,
        0xff, 0xff, 0xff, 0xff,
        2, 0, 0, 0,                           /* out_refs */
    };
    uint8_t buf[256];
    size_t n = kiln_key_canonical(&k, buf, sizeof buf);
    ok(n == sizeof expect && memcmp(buf, expect, n) == 0,
       "canonical bytes of sub(x, y) follow the documented format "
       "(%zu bytes)", n);
    kiln_key key;
    kiln_key_of_kernel(&k, &key, NULL);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(expect, sizeof expect));
    ok(key.b[0] == KILN_KEY_FORMAT && memcmp(key.b + 1, c.digest, 16) == 0,
       "the key is the format byte + XXH3-128 of those bytes");
    char hex[KILN_KEY_HEX + 1];
    kiln_key_hex(&key, hex);
    /* Golden: change only together with KILN_KEY_FORMAT. */
    is_str(hex, "016780b540b839e8bf544f17f507a34f88", "golden key of "
           "sub(x, y)");
    kiln_key xy = key;
    prog[2].b = 0;
    prog[2].a = 1;
    kiln_key_of_kernel(&k, &key, NULL);
    ok(memcmp(xy.b, key.b, KILN_KEY_BYTES) != 0, "the same inputs wired as "
       "sub(x, y) and as sub(y, x) do not share a key");
    kiln_key_hex(&key, hex);
    is_str(hex, "013f164282d554b156891a0b22bfcb31b1", "golden key of "
           "sub(y, x)");
    k.kind = KILN_KERNEL_REDUCE;
    k.n_inputs = 1;
    prog[2].op = KILN_I_EXP;
    prog[2].a = 0;
    prog[2].b = -1;
    k.reduce_op = KILN_REDUCE_SUM;
    k.reduce_axes = 1;
    kiln_key_of_kernel(&k, &key, NULL);
    kiln_key_hex(&key, hex);
    is_str(hex, "01654ad6bcfa46658dd74aab3a4a5bc2ef", "golden key of "
           "sum(exp(x))");
    k.label = "renamed";
    kiln_key k2;
    kiln_key_of_kernel(&k, &k2, NULL);
    ok(memcmp(k2.b, key.b, KILN_KEY_BYTES) == 0, "the label is not part of "
       "the key");
    ok(kiln_key_canonical(NULL, NULL, 0) == 0 &&
       kiln_key_of_kernel(NULL, &key, NULL) == KILN_ERR_ARG,
       "a NULL kernel is an error");
}

/* ---- disk --------------------------------------------------------------- */

static void test_warm(void)
{
    clear_cache();
    kiln_function *f = build(RADON_LIKE, disk_backend, KILN_CACHE_MODE_ON,
                             cache_dir, NULL);
    int n = f ? storable_kernels(f) : 0;
    int distinct = distinct_keys(f);
    ok(f && n > 0 && count_cache(f, KILN_CACHE_MISS) == distinct &&
       count_cache(f, KILN_CACHE_SHARED) == n - distinct,
       "cold: %d distinct kernels compiled, %d repeats share their code",
       distinct, n - distinct);
    entries e = list_entries(1);
    ok(e.n == distinct && e.bad == 0, "%d entries written, all verify", e.n);
    kiln_function *g = build(RADON_LIKE, disk_backend, KILN_CACHE_MODE_ON,
                             cache_dir, NULL);
    ok(g && count_cache(g, KILN_CACHE_HIT) == distinct &&
       count_cache(g, KILN_CACHE_MISS) == 0,
       "warm: every distinct kernel is a hit (%d), nothing compiled",
       distinct);
    ok(same_as_interp(g, RADON_LIKE), "kernels loaded from the cache give "
       "the interpreter's results");
    kiln_function_free(f);
    kiln_function_free(g);

    /* another process compiling the same model compiles nothing */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        kiln_function *h = build(RADON_LIKE, disk_backend,
                                 KILN_CACHE_MODE_ON, cache_dir, NULL);
        int hits = h ? count_cache(h, KILN_CACHE_HIT) : -1;
        int good = h && same_as_interp(h, RADON_LIKE);
        _exit(good && hits == distinct ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a second process: all hits, "
       "same results");

    /* models sharing nodes hit for exactly those */
    clear_cache();
    kiln_function *a = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    kiln_function *b = build(M2, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    int shared = 0;
    for (int i = 0; b && i < kiln_function_n_kernels(b); i++) {
        kiln_key kb;
        kiln_function_kernel_key(b, i, &kb);
        for (int j = 0; a && j < kiln_function_n_kernels(a); j++) {
            kiln_key ka;
            kiln_function_kernel_key(a, j, &ka);
            if (memcmp(ka.b, kb.b, KILN_KEY_BYTES) == 0) {
                shared++;
                break;
            }
        }
    }
    ok(a && b && shared >= 2 && count_cache(b, KILN_CACHE_HIT) == shared,
       "a second model hits for exactly its %d shared kernels", shared);
    ok(same_as_interp(b, M2), "... with the interpreter's results");
    kiln_function_free(a);
    kiln_function_free(b);
}

static void test_modes(void)
{
    clear_cache();
    kiln_function *f = build(M1, disk_backend, KILN_CACHE_MODE_OFF,
                             cache_dir, NULL);
    ok(f && count_cache(f, KILN_CACHE_NONE) +
                    count_cache(f, KILN_CACHE_SHARED) ==
                kiln_function_n_kernels(f) &&
       list_entries(0).n == 0, "off: nothing consulted, nothing written");
    kiln_function_free(f);
    f = build(M1, disk_backend, KILN_CACHE_MODE_READ_ONLY, cache_dir, NULL);
    ok(f && list_entries(0).n == 0, "read-only: nothing written");
    kiln_function_free(f);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, NULL);
    int n = list_entries(0).n;
    kiln_function_free(f);
    f = build(M1, disk_backend, KILN_CACHE_MODE_READ_ONLY, cache_dir, NULL);
    ok(f && n > 0 && count_cache(f, KILN_CACHE_HIT) == n,
       "read-only: reads (%d hits)", n);
    kiln_function_free(f);
    f = build(M1, disk_backend, KILN_CACHE_MODE_RECACHE, cache_dir, NULL);
    int written = 0;
    for (int i = 0; f && i < kiln_function_n_kernels(f); i++) {
        kiln_kernel_report r;
        r.struct_size = sizeof r;
        kiln_function_kernel_report(f, i, &r);
        written += r.written;
    }
    ok(f && count_cache(f, KILN_CACHE_HIT) == 0 && written == n &&
       list_entries(1).bad == 0, "recache: compiles all, overwrites %d",
       written);
    ok(same_as_interp(f, M1), "recache: same results");
    kiln_function_free(f);

    /* options that change code select another artifact */
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(M1, "<t>", NULL, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = disk_backend;
    o.quiet = 1;
    o.jobs = 1;
    o.cache_dir = cache_dir;
    o.cache_mode = KILN_CACHE_MODE_ON;
    o.opt_level = 3;
    kiln_function *f3 = kiln_compile(g, &o, &err);
    o.opt_level = 2;
    o.fast_math = 1;
    kiln_function *ff = kiln_compile(g, &o, &err);
    ok(f3 && ff && count_cache(f3, KILN_CACHE_HIT) == 0 &&
       count_cache(ff, KILN_CACHE_HIT) == 0 && list_entries(0).n == 3 * n,
       "opt level 3 and fast_math each get their own artifacts (%d "
       "entries)", list_entries(0).n);
    kiln_function_free(f3);
    kiln_function_free(ff);
    kiln_graph_free(g);
}

/* Change the first entry on disk with `how`, recompile, check that the
 * damage is reported, the entry replaced, and results right. */
static int damage(int how, const char *what)
{
    clear_cache();
    kiln_function *f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    kiln_function_free(f);
    entries e = list_entries(0);
    if (e.n < 2)
        return 0;
    const char *p = e.path[0];
    int fd;
    switch (how) {
    case 0:
        truncate(p, 100);
        break;
    case 1:
        truncate(p, 0);
        break;
    case 2: {                                  /* flip a payload bit */
        fd = open(p, O_RDWR);
        unsigned char c;
        pread(fd, &c, 1, 140);
        c ^= 0x10;
        pwrite(fd, &c, 1, 140);
        close(fd);
        break;
    }
    case 3: {                                  /* another key's entry */
        char tmp[700];
        snprintf(tmp, sizeof tmp, "%s.x", p);
        rename(e.path[1], tmp);
        unlink(p);
        rename(tmp, p);
        /* entry[1]'s own name is now missing: a plain miss */
        break;
    }
    case 4: {             /* header says another backend (checksum kept) */
        fd = open(p, O_RDWR);
        pwrite(fd, "zzz", 3, 48);
        close(fd);
        break;
    }
    }
    char *msg = NULL;
    size_t len = 0;
    FILE *d = open_memstream(&msg, &len);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    fclose(d);
    int bad = f ? count_cache(f, KILN_CACHE_BAD) : -1;
    int right = same_as_interp(f, M1);
    kiln_function_free(f);
    entries after = list_entries(1);
    int r = bad == 1 && msg && strstr(msg, "kiln: cache:") &&
            strstr(msg, p) && right && after.bad == 0 && after.n == e.n;
    if (!r)
        diag("%s: bad=%d right=%d entries %d->%d (bad %d) msg: %s", what, bad,
             right, e.n, after.n, after.bad, msg ? msg : "");
    free(msg);
    return r;
}

static void test_corruption(void)
{
    static const char *what[] = {"a truncated", "a zero-length",
                                 "a bit-flipped", "a wrong-key",
                                 "a wrong-backend"};
    for (int i = 0; i < 5; i++)
        ok(damage(i, what[i]), "%s entry is detected, reported (with its "
           "path) and replaced", what[i]);
}

static void test_security(void)
{
    clear_cache();
    kiln_function *f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    kiln_function_free(f);
    entries e = list_entries(0);
    chmod(e.path[0], 0664);
    char *msg = NULL;
    size_t len = 0;
    FILE *d = open_memstream(&msg, &len);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    fclose(d);
    ok(f && count_cache(f, KILN_CACHE_BAD) == 1 && msg &&
       strstr(msg, "writable by group or others") && strstr(msg, e.path[0]),
       "a group-writable entry is refused, naming it");
    ok(same_as_interp(f, M1), "... and the kernel compiled again");
    kiln_function_free(f);
    free(msg);

    /* a symlink planted in place of an entry */
    e = list_entries(0);
    char target[700];
    snprintf(target, sizeof target, "%s/planted", cache_dir);
    rename(e.path[0], target);
    symlink(target, e.path[0]);
    msg = NULL;
    d = open_memstream(&msg, &len);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    fclose(d);
    ok(f && count_cache(f, KILN_CACHE_BAD) == 1 && msg &&
       strstr(msg, "symlink"), "a symlink in place of an entry is refused");
    struct stat st;
    ok(lstat(e.path[0], &st) == 0 && S_ISREG(st.st_mode),
       "... and replaced by a real entry");
    kiln_function_free(f);
    free(msg);
    unlink(target);

    /* a directory writable by others */
    e = list_entries(0);
    char dir[700];
    snprintf(dir, sizeof dir, "%s", e.path[0]);
    *strrchr(dir, '/') = '\0';
    chmod(dir, 0777);
    msg = NULL;
    d = open_memstream(&msg, &len);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    fclose(d);
    ok(f && count_cache(f, KILN_CACHE_HIT) < storable_kernels(f) && msg &&
       strstr(msg, "writable by group or others"),
       "a world-writable cache directory is not trusted");
    ok(same_as_interp(f, M1), "... results still right");
    kiln_function_free(f);
    free(msg);
    chmod(dir, 0700);

    if (geteuid() == 0) {
        e = list_entries(0);
        int rc = chown(e.path[0], 65534, 65534);
        msg = NULL;
        d = open_memstream(&msg, &len);
        f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
        fclose(d);
        ok(rc == 0 && f && count_cache(f, KILN_CACHE_BAD) >= 1 && msg &&
           strstr(msg, "owned by another user"), "an entry owned by another "
           "user is refused (chown as root)");
        kiln_function_free(f);
        free(msg);
        unlink(e.path[0]);
    } else {
        ok(1, "# SKIP entry of another user: needs root for chown");
    }
}

static void test_eviction(void)
{
    clear_cache();
    kiln_function *a = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    kiln_function_free(a);
    kiln_err err = {0, ""};
    kiln_cache *c = kiln_cache_open(cache_dir, 1, &err);
    kiln_cache_stats st;
    kiln_cache_get_stats(c, &st, &err);
    uint64_t m1 = st.bytes;
    /* age M1's entries, then compile M2 with a cap that cannot hold both */
    entries e = list_entries(0);
    struct timeval old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    for (int i = 0; i < e.n && i < 64; i++)
        utimes(e.path[i], old);
    char cap[32];
    snprintf(cap, sizeof cap, "%llu", (unsigned long long)(m1 + m1 / 2));
    setenv("KILN_CACHE_MAX_SIZE", cap, 1);
    kiln_function *b = build(RADON_LIKE, disk_backend, KILN_CACHE_MODE_ON,
                             cache_dir, NULL);
    kiln_cache_close(c);
    c = kiln_cache_open(cache_dir, 1, &err);
    kiln_cache_get_stats(c, &st, &err);
    int nb = distinct_keys(b);
    entries after = list_entries(0);
    ok(after.n == nb,
       "over the cap, eviction removed everything but the %d entries the "
       "compile in progress used (%d left)", nb, after.n);
    ok(st.bytes > st.max_bytes, "(those alone exceed the cap: %llu > %llu "
       "bytes)", (unsigned long long)st.bytes,
       (unsigned long long)st.max_bytes);
    kiln_function *b2 = build(RADON_LIKE, disk_backend,
                              KILN_CACHE_MODE_READ_ONLY, cache_dir, NULL);
    ok(b2 && count_cache(b2, KILN_CACHE_HIT) == distinct_keys(b2),
       "the entries in use were not evicted: a new compile hits for all");
    /* with room for them, eviction brings the cache under its cap */
    char cap2[32];
    snprintf(cap2, sizeof cap2, "%llu",
             (unsigned long long)(st.bytes + st.bytes / 4));
    setenv("KILN_CACHE_MAX_SIZE", cap2, 1);
    kiln_function *a2 = build(M1, disk_backend, KILN_CACHE_MODE_ON,
                              cache_dir, NULL);
    kiln_function_free(a2);
    kiln_cache_close(c);
    c = kiln_cache_open(cache_dir, 1, &err);
    kiln_cache_get_stats(c, &st, &err);
    ok(st.bytes <= st.max_bytes, "after eviction the cache holds %llu of "
       "%llu bytes", (unsigned long long)st.bytes,
       (unsigned long long)st.max_bytes);
    kiln_function_free(b);
    kiln_function_free(b2);
    /* explicit prune to zero empties it; a stale temp file goes too */
    char tmpf[700];
    snprintf(tmpf, sizeof tmpf, "%s", after.path[0]);
    strcpy(strrchr(tmpf, '/') + 1, ".tmp.host.1.0123456789abcdef");
    int fd = open(tmpf, O_CREAT | O_WRONLY, 0600);
    write(fd, "KILNART", 7);
    close(fd);
    utimes(tmpf, old);
    uint64_t removed = 0;
    ok(kiln_cache_prune(c, 1, &removed, &err) == 0 && removed > 0 &&
       list_entries(0).n == 0 && access(tmpf, F_OK) != 0,
       "prune --max-size 1 removes all %llu entries and stale temp files",
       (unsigned long long)removed);
    unsetenv("KILN_CACHE_MAX_SIZE");
    kiln_cache_close(c);
}

static void test_fork(void)
{
    clear_cache();
    kiln_function *f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        kiln_function *g = build(M2, disk_backend, KILN_CACHE_MODE_ON,
                                 cache_dir, NULL);
        _exit(g && same_as_interp(g, M2) && same_as_interp(f, M1) ? 0 : 1);
    }
    kiln_function *h = build(RADON_LIKE, disk_backend, KILN_CACHE_MODE_ON,
                             cache_dir, NULL);
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && same_as_interp(h, RADON_LIKE)
       && same_as_interp(f, M1), "parent and forked child compile different "
       "models into one cache: each runs its own kernels");
    entries e = list_entries(1);
    ok(e.n > 0 && e.bad == 0, "all %d entries verify afterwards", e.n);
    kiln_function_free(f);
    kiln_function_free(h);
}

static void test_concurrency(void)
{
    clear_cache();
    enum { N = 16 };
    pid_t pids[N];
    fflush(stdout);
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            kiln_function *g = build(RADON_LIKE, disk_backend,
                                     KILN_CACHE_MODE_ON, cache_dir, NULL);
            _exit(g && same_as_interp(g, RADON_LIKE) ? 0 : 1);
        }
    }
    int good = 0;
    for (int i = 0; i < N; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        good += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    ok(good == N, "%d processes compiling one model into an empty cache at "
       "once: %d succeed with right results", N, good);
    entries e = list_entries(1);
    ok(e.n > 0 && e.bad == 0, "every entry verifies afterwards (%d)", e.n);
}

static void test_crash(void)
{
    clear_cache();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* compile forever; the parent kills us mid-write */
        for (;;) {
            kiln_function *g = build(RADON_LIKE, disk_backend,
                                     KILN_CACHE_MODE_RECACHE, cache_dir,
                                     NULL);
            kiln_function_free(g);
        }
    }
    struct timespec t = {0, 150 * 1000 * 1000};
    nanosleep(&t, NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    entries e = list_entries(1);
    ok(e.bad == 0, "a writer killed mid-compile leaves no bad entry "
       "(%d entries verify)", e.n);
    kiln_function *f = build(RADON_LIKE, disk_backend, KILN_CACHE_MODE_ON,
                             cache_dir, NULL);
    ok(f && count_cache(f, KILN_CACHE_BAD) == 0 &&
       same_as_interp(f, RADON_LIKE), "... and the next process loads or "
       "compiles correctly");
    kiln_function_free(f);
}

static void test_stats(void)
{
    clear_cache();
    kiln_function *f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    kiln_function *g = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    int n = storable_kernels(f), d = distinct_keys(f);
    kiln_function_free(f);
    kiln_function_free(g);
    kiln_err err = {0, ""};
    kiln_cache *c = kiln_cache_open(cache_dir, 1, &err);
    kiln_cache_stats st;
    memset(&st, 0, sizeof st);
    int src = c ? kiln_cache_get_stats(c, &st, &err) : -1;
    if (src)
        diag("stats: %s", err.message);
    ok(c && src == 0 && st.hits == (uint64_t)d && n >= d &&
       st.misses == (uint64_t)d && st.writes == (uint64_t)d &&
       st.entries == (uint64_t)d && st.saved_seconds > 0, "stats: %llu entries, %llu hits, %llu misses, "
       "%.3f s saved", (unsigned long long)st.entries,
       (unsigned long long)st.hits, (unsigned long long)st.misses,
       st.saved_seconds);
    uint64_t v;
    ok(kiln_cache_parse_size("1G", &v) == 0 && v == 1073741824ull &&
       kiln_cache_parse_size("512MiB", &v) == 0 && v == 536870912ull &&
       kiln_cache_parse_size("4096", &v) == 0 && v == 4096 &&
       kiln_cache_parse_size("lots", &v) == -1 &&
       kiln_cache_parse_size("-1M", &v) == -1, "sizes parse");
    kiln_cache_close(c);
    /* a cache directory others can write is refused outright */
    char bad[600];
    snprintf(bad, sizeof bad, "%s-open", cache_dir);
    mkdir(bad, 0700);
    chmod(bad, 0777);
    kiln_cache *o = kiln_cache_open(bad, 1, &err);
    ok(!o && strstr(err.message, bad) &&
       strstr(err.message, "writable by group or others"),
       "a world-writable cache root is refused: %s", err.message);
    rmdir(bad);
}

/* The policy's cache knobs: directory, enabled; the environment and the
 * options win over them. */
/* Write `text` to DIR/kiln/config.yaml with `mode`; returns DIR. */
static void write_config(const char *dir, const char *text, mode_t mode)
{
    char path[700];
    snprintf(path, sizeof path, "%s/kiln", dir);
    mkdir(dir, 0700);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/kiln/config.yaml", dir);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
    chmod(path, mode);
}

/* Cache directories come from the caller: the options, the environment,
 * the user's configuration -- never from a policy (issue 13). */
static void test_policy_knobs(void)
{
    char dir[600], text[1400], conf[700];
    snprintf(dir, sizeof dir, "%s-config", cache_dir);
    snprintf(conf, sizeof conf, "%s-xdg", cache_dir);
    snprintf(text, sizeof text, "kiln_config: 1\ncache: {dir: \"%s\"}\n",
             dir);
    write_config(conf, text, 0600);
    char *saved_xdg = getenv("XDG_CONFIG_HOME")
                          ? strdup(getenv("XDG_CONFIG_HOME")) : NULL;
    setenv("XDG_CONFIG_HOME", conf, 1);
    snprintf(text, sizeof text,
             "kiln_policy: 1\nbackends: [%s, interp]\ndefault: %s\n"
             "cache: {enabled: true, max_size: 1G}\n",
             disk_backend, disk_backend);
    kiln_err err = {0, ""};
    kiln_policy *pol = kiln_policy_load_string(text, strlen(text), "<p>",
                                               &err);
    if (!pol)
        diag("policy: %s", err.message);
    kiln_graph *g = kiln_parse_string(M1, "<t>", NULL, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.policy = pol;
    o.quiet = 1;
    o.jobs = 1;
    char *saved = getenv("KILN_CACHE_DIR") ? strdup(getenv("KILN_CACHE_DIR"))
                                           : NULL;
    unsetenv("KILN_CACHE_DIR");
    kiln_function *f = kiln_compile(g, &o, &err);
    struct stat st;
    ok(pol && f && count_cache(f, KILN_CACHE_MISS) > 0 &&
       stat(dir, &st) == 0, "the user configuration's cache.dir is used "
       "when neither the options nor $KILN_CACHE_DIR name one");
    kiln_function_free(f);
    setenv("KILN_CACHE_DIR", cache_dir, 1);
    f = kiln_compile(g, &o, &err);
    ok(f && count_cache(f, KILN_CACHE_MISS) + count_cache(f, KILN_CACHE_HIT)
                > 0 && list_entries(0).n > 0,
       "$KILN_CACHE_DIR wins over the configuration's directory");
    kiln_function_free(f);

    /* a configuration others can write is ignored, with one line */
    unsetenv("KILN_CACHE_DIR");
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    if (system(text) != 0)
        diag("could not remove %s", dir);
    snprintf(text, sizeof text, "kiln_config: 1\ncache: {dir: \"%s\"}\n",
             dir);
    write_config(conf, text, 0666);
    char *msg = NULL;
    size_t msg_len = 0;
    FILE *d = open_memstream(&msg, &msg_len);
    o.quiet = 0;
    o.diag = d;
    f = kiln_compile(g, &o, &err);
    fclose(d);
    ok(f && stat(dir, &st) != 0 && msg && strstr(msg, "config.yaml") &&
       strstr(msg, "writable by group or others"),
       "a group/world-writable configuration is refused, naming it: %s",
       msg ? msg : "");
    kiln_function_free(f);
    free(msg);
    /* a relative directory in the configuration is an error at its line */
    write_config(conf, "kiln_config: 1\ncache:\n  dir: kc\n", 0600);
    msg = NULL;
    d = open_memstream(&msg, &msg_len);
    o.diag = d;
    f = kiln_compile(g, &o, &err);
    fclose(d);
    ok(f && msg && strstr(msg, "config.yaml:3:8: cache.dir: 'kc' is not an "
                          "absolute path"),
       "a relative cache.dir in the configuration is refused: %s",
       msg ? msg : "");
    kiln_function_free(f);
    free(msg);
    /* a relative $KILN_CACHE_DIR is refused, not resolved against '.' */
    setenv("KILN_CACHE_DIR", "rel-cache", 1);
    msg = NULL;
    d = open_memstream(&msg, &msg_len);
    o.diag = d;
    f = kiln_compile(g, &o, &err);
    fclose(d);
    ok(f && stat("rel-cache", &st) != 0 && msg &&
       strstr(msg, "$KILN_CACHE_DIR 'rel-cache' is not an absolute path"),
       "a relative $KILN_CACHE_DIR is refused: %s", msg ? msg : "");
    kiln_function_free(f);
    free(msg);
    o.quiet = 1;
    o.diag = NULL;
    setenv("KILN_CACHE_DIR", cache_dir, 1);
    kiln_policy_free(pol);

    snprintf(text, sizeof text,
             "kiln_policy: 1\nbackends: [%s, interp]\ndefault: %s\n"
             "cache: {enabled: false}\n", disk_backend, disk_backend);
    pol = kiln_policy_load_string(text, strlen(text), "<p>", &err);
    o.policy = pol;
    f = kiln_compile(g, &o, &err);
    ok(pol && f && count_cache(f, KILN_CACHE_MISS) == 0 &&
       count_cache(f, KILN_CACHE_HIT) == 0, "cache: {enabled: false} turns "
       "the cache off");
    kiln_function_free(f);
    o.cache_mode = KILN_CACHE_MODE_ON;
    f = kiln_compile(g, &o, &err);
    ok(f && count_cache(f, KILN_CACHE_HIT) > 0, "... unless the options "
       "turn it on");
    kiln_function_free(f);
    kiln_policy_free(pol);
    kiln_graph_free(g);
    if (saved) {
        setenv("KILN_CACHE_DIR", saved, 1);
        free(saved);
    }
    if (saved_xdg) {
        setenv("XDG_CONFIG_HOME", saved_xdg, 1);
        free(saved_xdg);
    } else {
        unsetenv("XDG_CONFIG_HOME");
    }
    snprintf(text, sizeof text, "rm -rf '%s' '%s'", dir, conf);
    if (system(text) != 0)
        diag("could not remove %s", dir);
}

/* Regressions from an attack on the cache (each input showed a defect). */
static void test_attack(void)
{
    char path[900], cmd[4200];
    kiln_err err = {0, ""};
    /* 1. clear/prune/verify --remove only touch files of kiln's naming:
     *    pointed at a git directory they used to delete its objects */
    char foreign[600];
    snprintf(foreign, sizeof foreign, "%s-foreign", cache_dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/objects/ab' '%s/work/cd' && "
             "echo data > '%s/objects/ab/0123456789abcdef0123456789abcdef01"
             "2345' && echo data > '%s/work/cd/file.txt' && "
             "echo 'my notes' > '%s/stats' && chmod -R go-w '%s'", foreign,
             foreign, foreign, foreign, foreign, foreign);
    int sh = system(cmd);
    kiln_cache *c = kiln_cache_open(foreign, 0, &err);
    uint64_t removed = 0;
    int rc1 = c ? kiln_cache_clear(c, NULL, &err) : -1;
    int rc2 = c ? kiln_cache_prune(c, 1, &removed, &err) : -1;
    int rc3 = c ? kiln_cache_verify(c, 1, NULL, NULL, &err) : -1;
    kiln_cache_close(c);
    snprintf(path, sizeof path, "%s/objects/ab/0123456789abcdef0123456789"
             "abcdef012345", foreign);
    int kept1 = access(path, F_OK) == 0;
    snprintf(path, sizeof path, "%s/work/cd/file.txt", foreign);
    int kept2 = access(path, F_OK) == 0;
    snprintf(path, sizeof path, "%s/stats", foreign);
    FILE *sf = fopen(path, "r");
    char line[64] = "";
    if (sf) {
        if (!fgets(line, sizeof line, sf))
            line[0] = '\0';
        fclose(sf);
    }
    ok(sh == 0 && rc1 == 0 && rc2 == 0 && rc3 == 0 && removed == 0 &&
       kept1 && kept2 && !strcmp(line, "my notes\n"),
       "clear, prune and verify --remove leave files kiln did not make "
       "(and a foreign stats file) alone");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", foreign);
    if (system(cmd) != 0)
        diag("could not remove %s", foreign);

    /* 2. a FIFO in place of an entry is refused, not waited on */
    clear_cache();
    kiln_function *f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    kiln_function_free(f);
    entries e = list_entries(0);
    unlink(e.path[0]);
    mkfifo(e.path[0], 0600);
    char *msg = NULL;
    size_t len = 0;
    FILE *d = open_memstream(&msg, &len);
    alarm(60);                          /* a hang fails the test */
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    alarm(0);
    fclose(d);
    ok(f && count_cache(f, KILN_CACHE_BAD) == 1 && msg &&
       strstr(msg, "not a regular file"), "a FIFO in place of an entry is "
       "refused as not a regular file (no hang)");
    kiln_function_free(f);
    free(msg);
    unlink(e.path[0]);

    /* 3. a directory (not empty) in place of an entry: reported as not
     * removed, once, and the kernel is compiled; an empty one is removed
     * and the entry stored again */
    mkdir(e.path[0], 0700);
    char inner[4200];
    snprintf(inner, sizeof inner, "%s/x", e.path[0]);
    FILE *inf = fopen(inner, "w");
    if (inf)
        fclose(inf);
    msg = NULL;
    d = open_memstream(&msg, &len);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    fclose(d);
    ok(f && msg && strstr(msg, "not removed") && !strstr(msg, "; removed"),
       "an entry kiln cannot remove is not reported as removed");
    int lines = 0;
    for (const char *q = msg; q && *q; q++)
        lines += *q == '\n';
    ok(lines == 2 && strstr(msg, "is a directory, not an entry"),
       "... one line for the bad entry, one saying it cannot be stored "
       "(got %d)", lines);
    kiln_function_free(f);
    free(msg);
    unlink(inner);
    msg = NULL;
    d = open_memstream(&msg, &len);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    fclose(d);
    kiln_function_free(f);
    struct stat dst;
    ok(f && lstat(e.path[0], &dst) == 0 && S_ISREG(dst.st_mode) && msg &&
       strstr(msg, "removed, recompiling"), "an empty directory in place of "
       "an entry is removed and the entry stored again");
    free(msg);
    unlink(e.path[0]);
    rmdir(e.path[0]);

    /* 4. ROOT/stats a directory: the cap still holds */
    clear_cache();
    snprintf(path, sizeof path, "%s/stats", cache_dir);
    unlink(path);
    mkdir(path, 0700);
    setenv("KILN_CACHE_MAX_SIZE", "1", 1);
    msg = NULL;
    d = open_memstream(&msg, &len);
    f = build(M1, disk_backend, KILN_CACHE_MODE_ON, cache_dir, d);
    fclose(d);
    kiln_function_free(f);
    kiln_function *g = build(M2, disk_backend, KILN_CACHE_MODE_ON, cache_dir,
                             NULL);
    int n2 = distinct_keys(g);
    kiln_function_free(g);
    unsetenv("KILN_CACHE_MAX_SIZE");
    ok(msg && strstr(msg, "is not a kiln counter file") &&
       list_entries(0).n <= n2, "with ROOT/stats a directory the cache is "
       "measured and kept under its cap (%d entries)", list_entries(0).n);
    free(msg);
    rmdir(path);

    /* 5. sizes: no hex, exponents or signs */
    uint64_t v;
    ok(kiln_cache_parse_size("0x10", &v) == -1 &&
       kiln_cache_parse_size("1e30", &v) == -1 &&
       kiln_cache_parse_size("+5", &v) == -1 &&
       kiln_cache_parse_size("1.5M", &v) == 0 && v == 1572864,
       "sizes: 0x10, 1e30 and +5 are refused; 1.5M is 1.5 MiB");

    /* 6. a policy never names a cache directory ('~/kc' included) */
    const char *pt = "kiln_policy: 1\ncache: {dir: ~/kc}\n";
    kiln_policy *pol = kiln_policy_load_string(pt, strlen(pt), "p.yaml",
                                               &err);
    ok(!pol && strstr(err.message, "p.yaml:2:") &&
       strstr(err.message, "may not name a directory"),
       "policy cache.dir '~/kc' is refused: %s", err.message);
    kiln_policy_free(pol);
}

/* ---- directories someone else controls (issue 24) ----------------------- */

/* The test hook of core/support/trust.h (exported by libkiln, not in a public
 * header): called between the check of a cache root and its use. */
extern void (*kiln_trust_test_hook)(const char *what, const char *path);

static const char *EXP1 =
    "kiln 1\ngraph t\n  input x: f64[4]\n  output y = exp(x)\nend\n";
static const char *SIN1 =
    "kiln 1\ngraph t\n  input x: f64[4]\n  output y = sin(x)\nend\n";

/* The path of the one entry below `dir` (a fresh cache) into buf. */
static int only_entry(const char *dir, char *buf, size_t size)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "find '%s' -mindepth 3 -type f -name '*-O*' "
             "! -name '.tmp*'", dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    char line[1200];
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(buf, size, "%s", line);
        n++;
    }
    if (p)
        pclose(p);
    return n == 1 ? 0 : -1;
}

static uint8_t *slurp_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *b = malloc(1 << 20);
    *len = b ? fread(b, 1, 1 << 20, f) : 0;
    fclose(f);
    return b;
}

/* Which function EXP1 computed, compiled with the cache at `dir` (its
 * diagnostics into *msg): 'e' for exp, 's' for sin, '?' otherwise; *hits
 * its cache hits. */
static int exp_or_sin(const char *dir, char **msg, int *hits)
{
    size_t len = 0;
    FILE *d = open_memstream(msg, &len);
    kiln_function *f = build(EXP1, disk_backend, KILN_CACHE_MODE_READ_ONLY,
                             dir, d);
    fclose(d);
    double out[8];
    int n = f ? run(f, out, 8) : -1;
    *hits = f ? count_cache(f, KILN_CACHE_HIT) : -1;
    kiln_function_free(f);
    int e = n == 4, si = n == 4;
    for (int j = 0; j < 4 && n == 4; j++) {
        double x = 0.25 - 0.3 + 0.125 * j;     /* run()'s inputs */
        e = e && fabs(out[j] - exp(x)) <= 1e-12 * exp(x);
        si = si && fabs(out[j] - sin(x)) <= 1e-12;
    }
    return e ? 'e' : si ? 's' : '?';
}

static char hook_from[900], hook_to[900];
static int hook_calls;

/* Between the check of the cache root and its use: move the root away
 * and put a symlink to the forged cache in its place. */
static void swap_root(const char *what, const char *path)
{
    if (strcmp(what, "cache") || strcmp(path, hook_from))
        return;
    char moved[1000];
    snprintf(moved, sizeof moved, "%s.moved", hook_from);
    if (rename(hook_from, moved) == 0 && symlink(hook_to, hook_from) == 0)
        hook_calls++;
}

static int opens_of_root;

static void count_opens(const char *what, const char *path)
{
    opens_of_root += !strcmp(what, "cache") && !strcmp(path, hook_from);
}

static void test_ancestors(void)
{
    /* the root and its ancestors are checked once per session, not per
     * kernel: a model of many kernels opens the root once */
    clear_cache();
    snprintf(hook_from, sizeof hook_from, "%s", cache_dir);
    kiln_trust_test_hook = count_opens;
    kiln_function *many = build(M1, disk_backend, KILN_CACHE_MODE_ON,
                                cache_dir, NULL);
    kiln_trust_test_hook = NULL;
    int nk = many ? kiln_function_n_kernels(many) : 0;
    kiln_function_free(many);
    ok(nk > 5 && opens_of_root == 1, "the cache root is opened and checked "
       "once for a compile of %d kernels (%d)", nk, opens_of_root);

    char forged[600], sinc[600], par[600], root[700], cmd[8000];
    char epath[1300], spath[1300];
    snprintf(forged, sizeof forged, "%s-forged", cache_dir);
    snprintf(sinc, sizeof sinc, "%s-sin", cache_dir);
    snprintf(par, sizeof par, "%s-par", cache_dir);
    snprintf(root, sizeof root, "%s/kc", par);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", forged, sinc, par);
    if (system(cmd) != 0)
        diag("could not clean up");

    /* the forgery: exp's entry holding sin's code, key and checksum
     * rewritten (XXH3 is no MAC), in a directory the victim owns -- the
     * entries of a model bundle after `tar x` */
    kiln_function_free(build(EXP1, disk_backend, KILN_CACHE_MODE_ON, forged,
                             NULL));
    kiln_function_free(build(SIN1, disk_backend, KILN_CACHE_MODE_ON, sinc,
                             NULL));
    size_t el = 0, sl = 0;
    uint8_t *eb = NULL, *sb = NULL;
    int forged_ok = only_entry(forged, epath, sizeof epath) == 0 &&
                    only_entry(sinc, spath, sizeof spath) == 0 &&
                    (eb = slurp_file(epath, &el)) && el > 128 &&
                    (sb = slurp_file(spath, &sl)) && sl > 128;
    if (forged_ok) {
        memcpy(sb + 16, eb + 16, 17);          /* exp's key */
        memset(sb + 104, 0, 16);
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits(sb, sl));
        memcpy(sb + 104, c.digest, 16);
        FILE *w = fopen(epath, "wb");
        forged_ok = w && fwrite(sb, 1, sl, w) == sl;
        if (w)
            fclose(w);
    }
    free(eb);
    free(sb);
    char *msg = NULL;
    int hits = 0;
    int got = exp_or_sin(forged, &msg, &hits);
    ok(forged_ok && got == 's' && hits == 1, "setup: the forged entry, "
       "read from a trusted root, passes every entry check and runs sin "
       "(got %c)", got);
    free(msg);
    if (!forged_ok)
        return;

    /* a root whose parent anyone may write, and a symlink there to the
     * victim's own forged directory: the symlink's directory is checked */
    mkdir(par, 0700);
    chmod(par, 0777);
    if (symlink(forged, root) != 0)
        diag("symlink: %s", strerror(errno));
    got = exp_or_sin(root, &msg, &hits);
    ok(got == 'e' && hits == 0 && msg && strstr(msg, "refusing") &&
       strstr(msg, par) && strstr(msg, "mode 0777, not sticky"),
       "a symlink to a forged cache in a world-writable parent is refused, "
       "naming the parent; exp(x) is exp's: %s", msg ? msg : "");
    int lines = 0;
    for (const char *q = msg; q && *q; q++)
        lines += *q == '\n';
    ok(lines == 1, "... in one line (%d)", lines);
    free(msg);

    /* the same parent with the real (genuine) cache in it */
    unlink(root);
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", sinc, root);
    if (system(cmd) != 0)
        diag("cp failed");
    got = exp_or_sin(root, &msg, &hits);
    ok(got == 'e' && msg && strstr(msg, "ancestor") && strstr(msg, par),
       "a cache root whose parent is writable by others is refused: %s",
       msg ? msg : "");
    free(msg);

    if (geteuid() == 0) {
        chmod(par, 0755);
        int rc = chown(par, 65534, 65534);
        got = exp_or_sin(root, &msg, &hits);
        ok(rc == 0 && got == 'e' && msg && strstr(msg, "owned by another "
           "user") && strstr(msg, par), "a cache root whose parent belongs "
           "to another user (chown nobody) is refused: %s", msg ? msg : "");
        free(msg);
        if (chown(par, 0, 0) != 0)
            diag("chown back failed");
    } else {
        ok(1, "# SKIP parent of another user: needs root for chown");
    }

    /* sticky and root's (like /tmp): accepted; a symlink in it is taken
     * only from root or the user */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", root, forged,
             root);
    if (system(cmd) != 0)
        diag("cp failed");
    int mine = geteuid() == 0;      /* a sticky dir of root's needs root */
    if (mine) {
        chmod(par, 01777);
        got = exp_or_sin(root, &msg, &hits);
        ok(got == 's' && hits == 1 && msg && !strstr(msg, "refusing"),
           "a sticky root-owned parent (like /tmp) is accepted: the cache "
           "there is used (its entry, forged here, is run)");
        free(msg);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && ln -s '%s' '%s' && "
                 "chown -h 65534 '%s'", root, forged, root, root);
        int rc = system(cmd);
        got = exp_or_sin(root, &msg, &hits);
        ok(rc == 0 && got == 'e' && msg && strstr(msg, "symlink") &&
           strstr(msg, "owned by another user"), "in a sticky parent, "
           "another user's symlink is refused: %s", msg ? msg : "");
        free(msg);
    } else {
        ok(1, "# SKIP sticky root-owned parent: needs root");
        ok(1, "# SKIP another user's symlink: needs root");
    }

    /* the rename race: the root is swapped for a symlink to the forged
     * cache after it was checked (the hook); the session reads through
     * the descriptor it checked, so it gets the genuine entry */
    chmod(par, 0700);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.moved'; cp -a '%s' '%s' && "
             "cp -a '%s/.' '%s/'", root, root, sinc, root, forged, root);
    int rc = system(cmd);
    /* root now holds sin's genuine entry plus exp's forged one: use a
     * genuine exp cache instead */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    rc |= system(cmd);
    kiln_function_free(build(EXP1, disk_backend, KILN_CACHE_MODE_ON, root,
                             NULL));
    snprintf(hook_from, sizeof hook_from, "%s", root);
    snprintf(hook_to, sizeof hook_to, "%s", forged);
    hook_calls = 0;
    kiln_trust_test_hook = swap_root;
    got = exp_or_sin(root, &msg, &hits);
    kiln_trust_test_hook = NULL;
    struct stat lst;
    ok(rc == 0 && hook_calls == 1 && lstat(root, &lst) == 0 &&
       S_ISLNK(lst.st_mode) && got == 'e' && hits == 1,
       "the root swapped for a symlink to a forged cache after its check: "
       "the genuine entry is read through the checked descriptor (exp, %d "
       "hit)", hits);
    free(msg);
    /* and with the symlink in place from the start, the parent being
     * ours, it is the user's own link: followed (the forged entry runs:
     * the victim pointed there) -- this shows the race test swapped to a
     * cache that would have been used */
    got = exp_or_sin(root, &msg, &hits);
    ok(got == 's', "(control: the symlink itself, made by the user, leads "
       "to the forged cache)");
    free(msg);

    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", forged, sinc, par);
    if (system(cmd) != 0)
        diag("could not remove %s", par);
}

int main(void)
{
    const char *b = getenv("KILN_BUILDDIR");
    snprintf(cache_dir, sizeof cache_dir, "%s/tests/cache-test.%ld",
             b ? b : ".", (long)getpid());
    setenv("KILN_CACHE_MIN_COMPILE_MS", "0", 1);   /* store every kernel */
    test_keys();
    test_golden();
    /* a backend with storable artifacts */
    static const char *cands[] = {"tcc", "llvm"};
    for (int i = 0; i < 2 && !disk_backend; i++) {
        kiln_function *f = build(M1, cands[i], KILN_CACHE_MODE_OFF, NULL,
                                 NULL);
        if (f && strcmp(kiln_function_kernel_backend(f, 0), cands[i]) == 0)
            disk_backend = cands[i];
        kiln_function_free(f);
    }
    if (!disk_backend) {
        ok(1, "# SKIP disk cache tests: no tcc or llvm backend built");
        return done_testing();
    }
    diag("disk tests with the %s backend in %s", disk_backend, cache_dir);
    test_warm();
    test_modes();
    test_corruption();
    test_security();
    test_eviction();
    test_fork();
    test_concurrency();
    test_crash();
    test_stats();
    test_policy_knobs();
    test_attack();
    test_ancestors();
    clear_cache();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        diag("could not remove %s", cache_dir);
    return done_testing();
}
