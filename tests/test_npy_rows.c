/*
 * test_npy_rows.c — reading a part's rows of .npy data (issue 30;
 * <kiln/io.h> kiln_read_options.part_*, docs/mpi.md "Reading a part's
 * rows").
 *
 * The .kg parser asked for part p of P along N reads only the part's rows
 * of each npy() value sized by N; the test checks, for P = 1..5 and
 * P > N (7 rows over 9 parts), each part's bytes against the whole value
 * read whole and sliced here (rows r with floor(r P / n) = p, independently of
 * kiln's arithmetic), for f64 [N, 3] (the axis at dim 0), f64 [2, N] (at
 * dim 1), f32 [N] and i64 [N]; the data digest of every part equals the
 * whole graph's (the stream's digest is the whole value's); a Fortran
 * order file and a truncated file are refused naming the file; a part
 * read for one partition is refused for another; and on every backend
 * the sum of the parts' log densities and gradients, each part built
 * from its own rows (kiln_model_new_partition), equals the whole model's.
 */
#define _GNU_SOURCE   /* memmem, mkdtemp */
#include "tap.h"
#include "found_backends.h"
#include "../core/ir/ir.h"
#include <kiln/kiln.h>
#include <kiln/model.h>
#include <kiln/io.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <pthread.h>
#include <sys/inotify.h>
#endif

#define NROWS 7

static char dir[256];

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static int write_npy(const char *name, kiln_dtype dt, int rank,
                     const int64_t *shape, const void *data)
{
    char p[512];
    kiln_err e;
    kiln_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    path_of(p, sizeof p, name);
    return kiln_npy_write(p, &t, &e);
}

/* a copy of file `from` as `to`, with `cut` bytes fewer, or with the
 * first "False" made "True " */
static int copy_file(const char *from, const char *to, long cut, int fortran)
{
    char a[512], b[512];
    path_of(a, sizeof a, from);
    path_of(b, sizeof b, to);
    FILE *f = fopen(a, "rb");
    if (!f)
        return -1;
    char *buf = malloc(1 << 16);
    size_t n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    if (fortran) {
        char *s = memmem(buf, n, "False", 5);
        if (s)
            memcpy(s, "True ", 5);
    }
    f = fopen(b, "wb");
    fwrite(buf, 1, n - (size_t)cut, f);
    fclose(f);
    free(buf);
    return 0;
}

static const char *READ_KG =
    "kiln 1\n"
    "graph rows\n"
    "  shared X: f64[N, 3] = npy(\"X.npy\")\n"
    "  shared Zt: f64[2, N] = npy(\"Zt.npy\")\n"
    "  shared w: f32[N] = npy(\"w.npy\")\n"
    "  shared c: i64[N] = npy(\"c.npy\")\n"
    "  input q: f64\n"
    "  output o = mul(q, 2)\n"
    "end\n";

static const char *MODEL_KG =
    "kiln 1\n"
    "graph rowsmodel\n"
    "  shared X: f64[N, 3] = npy(\"X.npy\")\n"
    "  shared Zt: f64[2, N] = npy(\"Zt.npy\")\n"
    "  shared c: i64[N] = npy(\"c.npy\")\n"
    "  shared y: f64[N] = npy(\"y.npy\")\n"
    "  param beta: f64[3]\n"
    "  param g: f64[2]\n"
    "  param a: f64[3]\n"
    "  param sigma: f64 lower=0\n"
    "  mu = add(add(matmul(X, beta), matmul(g, Zt)), a[c])\n"
    "  output logp = add(normal_lpdf(y, mu, sigma), add(normal_lpdf(beta, "
    "0, 2), add(normal_lpdf(a, 0, 1), normal_lpdf(sigma, 0, 1))))\n"
    "end\n";

static kiln_graph *parse(const char *kgname, const char *text, int part,
                         int nparts, const char *axis, kiln_err *e)
{
    char p[512];
    path_of(p, sizeof p, kgname);
    FILE *f = fopen(p, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    kiln_read_options ro;
    memset(&ro, 0, sizeof ro);
    ro.struct_size = sizeof ro;
    if (nparts) {
        ro.part_axis = axis;
        ro.part_index = part;
        ro.part_nparts = nparts;
    }
    return kiln_parse_file_opts(p, &ro, e);
}

static const kiln_node *node(const kiln_graph *g, const char *name)
{
    kiln_value v = kiln_graph_lookup(g, name);
    return v >= 0 ? &g->nodes[v] : NULL;
}

/* rows of part p of P of n rows: the rows r with floor(r P / n) = p,
 * in order (kiln's arithmetic is [ceil(n p / P), ceil(n (p+1) / P))) */
static void rows_of(int64_t n, int p, int P, int64_t *b, int64_t *e)
{
    *b = 0;
    while (*b < n && *b * P / n < p)
        (*b)++;
    *e = *b;
    while (*e < n && *e * P / n == p)
        (*e)++;
}

/* node `name` of part graph gp equals rows [b, e) along dim k of the
 * whole graph gw's value */
static int same_slice(const kiln_graph *gw, const kiln_graph *gp,
                      const char *name, int k, int64_t b, int64_t e)
{
    const kiln_node *w = node(gw, name), *p = node(gp, name);
    if (!w || !p || !w->data || !p->data || p->vshape[k] != e - b)
        return 0;
    size_t es = kiln_dtype_size(w->type.dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < k; i++)
        outer *= w->vshape[i];
    for (int i = k + 1; i < w->type.rank; i++)
        inner *= w->vshape[i];
    size_t row = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t r = b; r < e; r++)
            if (memcmp((const char *)p->data +
                           ((size_t)o * (size_t)(e - b) + (size_t)(r - b)) *
                               row,
                       (const char *)w->data +
                           ((size_t)o * (size_t)w->vshape[k] + (size_t)r) *
                               row,
                       row))
                return 0;
    return 1;
}

static void test_reader(void)
{
    kiln_err e;
    kiln_graph *gw = parse("read.kg", READ_KG, 0, 0, NULL, &e);
    if (!ok(gw != NULL, "the whole graph parses (%s)", gw ? "" : e.message))
        return;
    uint64_t dw = 0, dp = 0;
    kiln_graph_data_digest(gw, &dw, &e);
    int Ps[] = {1, 2, 3, 4, 5, 9};
    for (size_t i = 0; i < sizeof Ps / sizeof *Ps; i++) {
        int P = Ps[i], good[4] = {1, 1, 1, 1}, dig = 1, parsed = 1;
        for (int p = 0; p < P; p++) {
            kiln_graph *gp = parse("read.kg", READ_KG, p, P, "N", &e);
            if (!gp) {
                diag("part %d of %d: %s", p, P, e.message);
                parsed = 0;
                continue;
            }
            int64_t b, en;
            rows_of(NROWS, p, P, &b, &en);
            good[0] &= same_slice(gw, gp, "X", 0, b, en);
            good[1] &= same_slice(gw, gp, "Zt", 1, b, en);
            good[2] &= same_slice(gw, gp, "w", 0, b, en);
            good[3] &= same_slice(gw, gp, "c", 0, b, en);
            dig &= kiln_graph_data_digest(gp, &dp, &e) == 0 && dp == dw;
            kiln_graph_free(gp);
        }
        ok(parsed && good[0], "P = %d: each part's X f64[N, 3] (axis at dim "
           "0) is the whole's rows", P);
        ok(parsed && good[1], "P = %d: each part's Zt f64[2, N] (axis at "
           "dim 1) is the whole's columns", P);
        ok(parsed && good[2], "P = %d: each part's w f32[N] is the whole's "
           "rows", P);
        ok(parsed && good[3], "P = %d: each part's c i64[N] is the whole's "
           "rows", P);
        ok(parsed && dig, "P = %d: every part's data digest is the whole "
           "graph's", P);
    }
    /* a part read for 3 parts, made part 1 of 2 or along another axis */
    kiln_graph *gp = parse("read.kg", READ_KG, 1, 3, "N", &e);
    kiln_partition pt = {"N", 1, 2};
    int rc = gp ? kiln_graph_partition(gp, &pt, &e) : -1;
    ok(rc == KILN_ERR_ARG && strstr(e.message, "read as part 1 of 3"),
       "a part read as 1 of 3, made 1 of 2: refused (%s)", e.message);
    kiln_graph_free(gp);
    gp = parse("read.kg", READ_KG, 1, 3, "N", &e);
    pt.nparts = 3;
    rc = gp ? kiln_graph_partition(gp, &pt, &e) : -1;
    ok(rc == 0, "a part read as 1 of 3, made 1 of 3: accepted (%s)",
       rc ? e.message : "ok");
    kiln_graph_free(gp);
    kiln_graph_free(gw);
}

static void test_bad_files(void)
{
    static const char *T =
        "kiln 1\ngraph bad\n  shared X: f64[N, 3] = npy(\"%s\")\n"
        "  input q: f64\n  output o = mul(q, 2)\nend\n";
    char text[512];
    kiln_err e;
    snprintf(text, sizeof text, T, "Xf.npy");
    kiln_graph *g = parse("bad.kg", text, 1, 2, "N", &e);
    ok(!g && e.code == KILN_ERR_PARSE && strstr(e.message, "Xf.npy") &&
       strstr(e.message, "fortran_order"),
       "a Fortran order file read by rows: refused naming it (%s)",
       e.message);
    kiln_graph_free(g);
    snprintf(text, sizeof text, T, "Xcut.npy");
    for (int P = 1; P <= 3; P += 2) {
        g = parse("bad.kg", text, P - 1, P, "N", &e);
        ok(!g && e.code == KILN_ERR_PARSE && strstr(e.message, "Xcut.npy") &&
           strstr(e.message, "truncated"),
           "a truncated file read as part %d of %d: an error naming it (%s)",
           P - 1, P, e.message);
        kiln_graph_free(g);
    }
}

static kiln_options opts(const char *be)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = be;
    o.quiet = 1;
    o.jobs = 1;
    return o;
}

static void test_models(const char *be)
{
    kiln_err e;
    kiln_options o = opts(be);
    kiln_graph *gw = parse("model.kg", MODEL_KG, 0, 0, NULL, &e);
    kiln_model *mw = gw ? kiln_model_new(gw, NULL, NULL, &o, NULL, &e) : NULL;
    if (!ok(mw != NULL, "[%s] the whole model (%s)", be,
            mw ? "ok" : e.message)) {
        kiln_graph_free(gw);
        return;
    }
    int n = (int)kiln_model_n_unc(mw);
    double u[16], gwv[16], gs[16], gp[16], lpw = 0;
    for (int i = 0; i < n; i++)
        u[i] = 0.1 * (i + 1) * (i % 2 ? -1 : 1);
    kiln_model_log_density(mw, 1, u, &lpw, gwv, &e);
    int Ps[] = {1, 3, 9};
    for (size_t k = 0; k < sizeof Ps / sizeof *Ps; k++) {
        int P = Ps[k], good = 1;
        double lps = 0;
        memset(gs, 0, sizeof gs);
        for (int p = 0; p < P && good; p++) {
            kiln_graph *g = parse("model.kg", MODEL_KG, p, P, "N", &e);
            kiln_partition pt = {"N", p, P};
            kiln_model *m = g ? kiln_model_new_partition(g, NULL, NULL, &pt,
                                                         &o, NULL, &e)
                              : NULL;
            double lp = 0;
            if (!m || kiln_model_log_density(m, 1, u, &lp, gp, &e)) {
                diag("[%s] part %d of %d: %s", be, p, P, e.message);
                good = 0;
            } else {
                lps += lp;
                for (int i = 0; i < n; i++)
                    gs[i] += gp[i];
            }
            kiln_model_free(m);
            kiln_graph_free(g);
        }
        double err = fabs(lps - lpw) / fmax(1, fabs(lpw));
        for (int i = 0; i < n; i++)
            err = fmax(err, fabs(gs[i] - gwv[i]) / fmax(1, fabs(gwv[i])));
        ok(good && err <= 1e-12, "[%s] %d parts, each read by rows: lp and "
           "gradient sum to the whole model's (rel. error %.2g)", be, P,
           err);
    }
    /* blocks of a part read by rows (libkiln-mpi's rank in B blocks):
     * block b of part p of P is part p B + b of P B, sliced out of the
     * rows read; the blocks of every part sum to the whole model (this
     * gave B times the part's value when the blocks were not sliced) */
    int Bs[] = {2, 5, 40};
    for (size_t k = 0; k < sizeof Bs / sizeof *Bs; k++) {
        int P = 3, B = Bs[k], good = 1;
        double lps = 0;
        memset(gs, 0, sizeof gs);
        for (int p = 0; p < P && good; p++) {
            kiln_graph *g = parse("model.kg", MODEL_KG, p, P, "N", &e);
            kiln_partition pt = {"N", p, P};
            kiln_model_blocks *mb = g ? kiln_model_blocks_new(g, NULL, NULL,
                                                              &pt, B, &o,
                                                              NULL, &e)
                                      : NULL;
            int64_t t = -1, rb = -1, re = -1, wb, we;
            kiln_model_blocks_range(mb, &t, &rb, &re);
            rows_of(NROWS, p, P, &wb, &we);
            double lp = 0;
            if (!mb || kiln_model_blocks_count(mb) != B || rb != wb ||
                re != we ||
                kiln_model_blocks_log_density(mb, 1, u, &lp, gp, &e)) {
                diag("[%s] part %d of %d in %d blocks: %s", be, p, P, B,
                     mb ? "rows or count" : e.message);
                good = 0;
            } else {
                lps += lp;
                for (int i = 0; i < n; i++)
                    gs[i] += gp[i];
            }
            kiln_model_blocks_free(mb);
            kiln_graph_free(g);
        }
        double err = fabs(lps - lpw) / fmax(1, fabs(lpw));
        for (int i = 0; i < n; i++)
            err = fmax(err, fabs(gs[i] - gwv[i]) / fmax(1, fabs(gwv[i])));
        ok(good && err <= 1e-12, "[%s] 3 parts read by rows, each in %d "
           "blocks: lp and gradient sum to the whole model's (rel. error "
           "%.2g)", be, B, err);
    }
    /* $KILN_BLOCKS / $KILN_BLOCK_BYTES that are not integers in range:
     * refused naming the variable (they were ignored: an attack's and a
     * new user's find) */
    {
        static const char *bad[][2] = {
            {"KILN_BLOCKS", "abc"}, {"KILN_BLOCKS", "0"},
            {"KILN_BLOCKS", "-1"}, {"KILN_BLOCKS", "1025"},
            {"KILN_BLOCKS", ""}, {"KILN_BLOCK_BYTES", "2M"},
            {"KILN_BLOCK_BYTES", "0"},
        };
        kiln_graph *g = parse("model.kg", MODEL_KG, 0, 0, NULL, &e);
        kiln_partition pt = {"N", 0, 2};
        for (size_t i = 0; g && i < sizeof bad / sizeof *bad; i++) {
            setenv(bad[i][0], bad[i][1], 1);
            kiln_model_blocks *mb = kiln_model_blocks_new(g, NULL, NULL, &pt,
                                                          0, &o, NULL, &e);
            ok(!mb && e.code == KILN_ERR_ARG && strstr(e.message,
                                                       bad[i][0]),
               "[%s] %s='%s': refused (%s)", be, bad[i][0], bad[i][1],
               mb ? "built" : e.message);
            kiln_model_blocks_free(mb);
            unsetenv(bad[i][0]);
        }
        setenv("KILN_BLOCKS", "3", 1);
        kiln_model_blocks *mb = g ? kiln_model_blocks_new(g, NULL, NULL, &pt,
                                                          0, &o, NULL, &e)
                                  : NULL;
        ok(mb && kiln_model_blocks_count(mb) == 3, "[%s] KILN_BLOCKS=3: 3 "
           "blocks (%s)", be, mb ? "ok" : e.message);
        kiln_model_blocks_free(mb);
        unsetenv("KILN_BLOCKS");
        kiln_graph_free(g);
    }
    /* a part not nested in the part read: refused */
    {
        kiln_graph *g = parse("model.kg", MODEL_KG, 1, 3, "N", &e);
        kiln_partition pt = {"N", 0, 6};
        kiln_model *m = g ? kiln_model_new_partition(g, NULL, NULL, &pt, &o,
                                                     NULL, &e)
                          : NULL;
        ok(!m && strstr(e.message, "nested"), "[%s] part 0 of 6 of a graph "
           "read as part 1 of 3: refused (%s)", be, m ? "made" : e.message);
        kiln_model_free(m);
        kiln_graph_free(g);
    }
    /* a whole model of a graph read as a part: refused */
    kiln_graph *g = parse("model.kg", MODEL_KG, 0, 2, "N", &e);
    kiln_model *m = g ? kiln_model_new(g, NULL, NULL, &o, NULL, &e) : NULL;
    ok(!m && strstr(e.message, "read as part 0 of 2"),
       "[%s] kiln_model_new of a graph read as part 0 of 2: refused (%s)",
       be, e.message);
    kiln_model_free(m);
    kiln_graph_free(g);
    kiln_model_free(mw);
    kiln_graph_free(gw);
}

#ifdef __linux__
/* ---- blocks over a JSON file that changes between two blocks' reads ----
 * (an attack's find: each block's build parses the file again, and only
 * block 0's data were compared: a sum of two data sets, exit 0).  A
 * thread renames NEW over PATH after the first close-after-read of PATH
 * (inotify), i.e. between block 0's read and block 1's. */
typedef struct swapper {
    char path[512], repl[512];
    int fd, swapped;
} swapper;

static void *swap_after_read(void *arg)
{
    swapper *w = arg;
    char buf[4096];
    ssize_t n = read(w->fd, buf, sizeof buf);   /* blocks: the first event */
    if (n > 0 && rename(w->repl, w->path) == 0)
        w->swapped = 1;
    return NULL;
}

static void test_changing_json(const char *be)
{
    static const char *kg =
        "kiln 1\n"
        "graph jsonblocks\n"
        "  shared y: f64[N]\n"
        "  param mu: f64\n"
        "  output logp = add(normal_lpdf(y, mu, 1), normal_lpdf(mu, 0, 5))\n"
        "  partition N\n"
        "end\n";
    kiln_err e;
    kiln_options o = opts(be);
    kiln_graph *g = parse("jb.kg", kg, 0, 0, NULL, &e);
    if (!ok(g != NULL, "[%s] the JSON-bound model parses (%s)", be,
            g ? "ok" : e.message))
        return;
    int refused = 0, raced = 0;
    for (int attempt = 0; attempt < 3 && !refused; attempt++) {
        swapper w;
        path_of(w.path, sizeof w.path, "jb.json");
        path_of(w.repl, sizeof w.repl, "jb-new.json");
        FILE *f = fopen(w.path, "w"), *f2 = fopen(w.repl, "w");
        if (!f || !f2) {
            if (f)
                fclose(f);
            if (f2)
                fclose(f2);
            break;
        }
        fputs("{\"y\": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}\n", f);
        fputs("{\"y\": [100.1, 100.2, 100.3, 100.4, 100.5, 100.6]}\n", f2);
        fclose(f);
        fclose(f2);
        w.swapped = 0;
        w.fd = inotify_init();
        pthread_t t;
        if (w.fd < 0 || inotify_add_watch(w.fd, w.path, IN_CLOSE_NOWRITE) < 0 ||
            pthread_create(&t, NULL, swap_after_read, &w) != 0) {
            if (w.fd >= 0)
                close(w.fd);
            break;
        }
        kiln_partition pt = {NULL, 0, 1};
        kiln_model_blocks *mb = kiln_model_blocks_new(g, NULL, w.path, &pt, 2,
                                                      &o, NULL, &e);
        close(w.fd);             /* ends the thread's read if no event came */
        pthread_join(t, NULL);
        if (!mb && strstr(e.message, "changed while"))
            refused = 1;
        else if (mb && w.swapped)
            raced = 1;           /* the rename came after block 1's read */
        kiln_model_blocks_free(mb);
    }
    if (!refused && !raced)
        ok(0, "[%s] blocks over a JSON file renamed between two blocks' "
           "reads: refused (%s)", be, e.message);
    else
        ok(refused, "[%s] blocks over a JSON file renamed between two "
           "blocks' reads: refused, 'the data changed while its 2 blocks "
           "were read'%s", be, refused ? "" : " (the rename came too late "
           "in 3 attempts)");
    kiln_graph_free(g);
}
#endif

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/kiln_npy_rows.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    double X[NROWS * 3], Zt[2 * NROWS], y[NROWS];
    float w[NROWS];
    int64_t c[NROWS];
    unsigned long long st = 99;
    for (int i = 0; i < NROWS * 3; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        X[i] = (double)(st >> 11) / 9007199254740992.0 - 0.5;
    }
    for (int i = 0; i < NROWS; i++) {
        Zt[i] = 0.25 * i - 0.5;
        Zt[NROWS + i] = 1.0 / (i + 1);
        w[i] = (float)(i * 1.5 - 2);
        c[i] = i % 3;
        y[i] = X[3 * i] - 0.5 * X[3 * i + 1] + 0.1 * i;
    }
    int64_t sx[2] = {NROWS, 3}, sz[2] = {2, NROWS}, s1[1] = {NROWS};
    if (write_npy("X.npy", KILN_F64, 2, sx, X) ||
        write_npy("Zt.npy", KILN_F64, 2, sz, Zt) ||
        write_npy("w.npy", KILN_F32, 1, s1, w) ||
        write_npy("c.npy", KILN_I64, 1, s1, c) ||
        write_npy("y.npy", KILN_F64, 1, s1, y) ||
        copy_file("X.npy", "Xf.npy", 0, 1) ||
        copy_file("X.npy", "Xcut.npy", 8, 0)) {
        fprintf(stderr, "cannot write the test files in %s\n", dir);
        return 1;
    }
    test_reader();
    test_bad_files();
    const char *bk[3];
    int nb = found_backends(bk);
    for (int b = 0; b < nb; b++)
        test_models(bk[b]);
#ifdef __linux__
    test_changing_json(bk[0]);
#endif
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
