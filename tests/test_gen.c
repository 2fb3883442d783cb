/*
 * test_gen.c — the stress-model generator `kiln-gen` (tools/kiln_gen.c,
 * docs/models.md), run as a user runs it: the built tools/kiln-gen (found
 * through $KILN_BUILDDIR) writes each model kind at a small size into a
 * mkdtemp directory; each model is parsed, compiled with the interpreter
 * and evaluated at a point.
 *
 *  - logp against an independent evaluation written here from the
 *    model's definition (plain C loops and libm over the .npy data and
 *    reference weights the generator wrote), to 1e-10 relative;
 *  - every gradient output against central finite differences of that
 *    independent evaluation, and with kiln_function_check_grad against
 *    finite differences of kiln's own logp, to 1e-6;
 *  - the inputs and outputs the models declare (every parameter a scalar
 *    input; logp, then d_<input> for each);
 *  - determinism (the same arguments twice: byte-identical files), and
 *    the exit status for bad arguments (2) and a missing -o directory (1).
 */
#define _DEFAULT_SOURCE
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/io.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "slurp.h"

static const double LOG_SQRT_2PI = 0.91893853320467274178;

static double normal_lpdf(double x, double m, double s)
{
    double z = (x - m) / s;
    return -0.5 * z * z - log(s) - LOG_SQRT_2PI;
}

static char gen_path[4096];  /* tools/kiln-gen (a libtool wrapper) */
static char gen_real[4200];  /* tools/.libs/kiln-gen, or "" */
static char lib_dir[4096];   /* where the wrapper finds libkiln */
static char tmp[4096];

/* ---- running the generator ------------------------------------------- */

/* Start kiln-gen with `args` (NULL-terminated, without argv[0]); its
 * stdout and stderr go to TMP/gen<slot>.out and TMP/gen<slot>.err.
 * Returns the process id, or -1.
 *
 * In a libtool build tools/kiln-gen is a shell script that sets
 * LD_LIBRARY_PATH and runs tools/.libs/kiln-gen; with the sanitizers it
 * costs a quarter of a second of CPU per run, most of this test's time.
 * So the binary is run directly, as the wrapper runs it, with
 * `via_wrapper` 0 (the wrapper is still run once, for --help). */
static pid_t start_gen_how(const char *const *args, int slot, int via_wrapper)
{
    const char *argv[64];
    int n = 0;
    int direct = !via_wrapper && gen_real[0];
    argv[n++] = direct ? gen_real : gen_path;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char out[4200], errp[4200];
    snprintf(out, sizeof out, "%s/gen%d.out", tmp, slot);
    snprintf(errp, sizeof errp, "%s/gen%d.err", tmp, slot);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(127);
        dup2(fo, 1);
        dup2(fe, 2);
        if (direct) {
            char ld[8400];
            const char *old = getenv("LD_LIBRARY_PATH");
            snprintf(ld, sizeof ld, "%s%s%s", lib_dir, old && *old ? ":" : "",
                     old && *old ? old : "");
            setenv("LD_LIBRARY_PATH", ld, 1);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static pid_t start_gen(const char *const *args, int slot)
{
    return start_gen_how(args, slot, 0);
}

/* The exit status of a started kiln-gen, or -1 when it did not exit
 * normally. */
static int wait_gen(pid_t pid)
{
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run kiln-gen (output in TMP/gen0.out, TMP/gen0.err); the exit status.
 * Each run costs a process start under the sanitizers and the libtool
 * wrapper script, so the tests start independent runs together. */
static int run_gen(const char *const *args)
{
    return wait_gen(start_gen(args, 0));
}

static int file_contains(const char *path, const char *needle)
{
    char *s = slurp(path, NULL);
    int r = s && strstr(s, needle) != NULL;
    free(s);
    return r;
}

static void path_in(char *out, size_t size, const char *dir, const char *file)
{
    snprintf(out, size, "%s/%s", dir, file);
}

/* remove a directory of plain files */
static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[8400];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        path_in(p, sizeof p, dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_dir(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* ---- loading a model ------------------------------------------------- */

/* Parse DIR/NAME.kg (its grad statement included). */
static kiln_graph *load_model(const char *dir, const char *name,
                              kiln_err *err)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s.kg", dir, name);
    return kiln_parse_file(path, err);
}

/* ---- a model under test ---------------------------------------------- */

typedef double (*ref_fn)(const double *x, const void *ctx);

typedef struct model {
    const char *label;
    const char *name;     /* file name without .kg */
    int n_in;             /* inputs */
    char **inputs;        /* their names */
    int64_t *size;        /* elements of each input */
    int64_t dim;          /* total elements */
    double *x;            /* the point, inputs concatenated */
    ref_fn ref;
    const void *ctx;
} model;

static char **make_names(int n, const char *prefix, int n1,
                         const char *prefix2, const char *last)
{
    char **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; v && i < n; i++) {
        char b[64];
        if (last && i == n - 1)
            snprintf(b, sizeof b, "%s", last);
        else if (prefix2 && i >= n1)
            snprintf(b, sizeof b, "%s%d", prefix2, i - n1 + 1);
        else
            snprintf(b, sizeof b, "%s%d", prefix, i + 1);
        v[i] = strdup(b);
    }
    return v;
}

static void free_names(int n, char **v)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Parse, compile, check declarations, logp and gradients. */
static void check_model(const char *dir, const model *m)
{
    kiln_err err = {0, ""};
    kiln_graph *g = load_model(dir, m->name, &err);
    ok(g != NULL, "%s: %s.kg parses %s", m->label, m->name,
       g ? "" : err.message);
    if (!g)
        return;
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = "interp";
    kiln_function *f = kiln_compile(g, &opt, &err);
    kiln_graph_free(g);
    ok(f != NULL, "%s: compiles with interp %s", m->label,
       f ? "" : err.message);
    if (!f)
        return;

    /* declarations */
    int decl_ok = kiln_function_n_inputs(f) == m->n_in &&
                  kiln_function_n_outputs(f) == m->n_in + 1 &&
                  strcmp(kiln_function_output_name(f, 0), "logp") == 0;
    for (int i = 0; decl_ok && i < m->n_in; i++) {
        char dn[300];
        snprintf(dn, sizeof dn, "d_%s", m->inputs[i]);
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK];
        kiln_function_input_type(f, i, &dt, &rank, dims, NULL);
        decl_ok = strcmp(kiln_function_input_name(f, i), m->inputs[i]) == 0 &&
                  strcmp(kiln_function_output_name(f, i + 1), dn) == 0 &&
                  dt == KILN_F64 &&
                  kiln_shape_numel(rank, dims) == m->size[i] &&
                  (m->size[i] > 1 || rank == 0);
    }
    ok(decl_ok, "%s: %d inputs in order, outputs logp and d_<input> for each",
       m->label, m->n_in);

    /* inputs at the point */
    kiln_tensor *in = calloc((size_t)m->n_in, sizeof *in);
    kiln_tensor *out = calloc((size_t)m->n_in + 1, sizeof *out);
    int64_t off = 0;
    for (int i = 0; i < m->n_in; i++) {
        in[i].dtype = KILN_F64;
        in[i].rank = m->size[i] > 1;
        in[i].shape[0] = m->size[i];
        in[i].data = m->x + off;
        off += m->size[i];
    }
    int rc = kiln_function_call(f, in, out, &err);
    ok(rc == 0, "%s: call %s", m->label, rc ? err.message : "");
    if (rc)
        goto done;
    double logp = *(double *)out[0].data;
    double want = m->ref(m->x, m->ctx);
    is_close(logp, want, 1e-10, "%s: logp %.10g matches the independent "
             "evaluation", m->label, logp);

    /* gradients against central differences of the independent
     * evaluation */
    double worst = 0;
    int64_t worst_at = -1;
    double worst_g = 0, worst_fd = 0;
    double *xp = malloc(sizeof *xp * (size_t)m->dim);
    memcpy(xp, m->x, sizeof *xp * (size_t)m->dim);
    off = 0;
    int shapes_ok = 1;
    for (int i = 0; i < m->n_in; i++) {
        shapes_ok &= out[i + 1].dtype == KILN_F64 &&
                     kiln_shape_numel(out[i + 1].rank, out[i + 1].shape) ==
                         m->size[i];
        if (!shapes_ok)
            break;
        const double *gi = out[i + 1].data;
        for (int64_t j = 0; j < m->size[i]; j++) {
            int64_t k = off + j;
            double h = 1e-5 * fmax(1.0, fabs(m->x[k]));
            xp[k] = m->x[k] + h;
            double fp = m->ref(xp, m->ctx);
            xp[k] = m->x[k] - h;
            double fm = m->ref(xp, m->ctx);
            xp[k] = m->x[k];
            double fd = (fp - fm) / (2 * h);
            double e = fabs(gi[j] - fd) / fmax(1.0, fabs(fd));
            if (!(e <= worst)) {
                worst = e;
                worst_at = k;
                worst_g = gi[j];
                worst_fd = fd;
            }
        }
        off += m->size[i];
    }
    free(xp);
    ok(shapes_ok, "%s: each gradient has its input's shape", m->label);
    ok(shapes_ok && worst <= 1e-6,
       "%s: %lld gradient elements match central differences of the "
       "independent logp (worst error %.2g)", m->label, (long long)m->dim,
       worst);
    if (!(worst <= 1e-6))
        diag("worst at element %lld: kiln %.17g, finite difference %.17g",
             (long long)worst_at, worst_g, worst_fd);

    /* and kiln's own check against its logp */
    kiln_grad_check *rows = calloc((size_t)m->n_in + 1, sizeof *rows);
    int n_rows = 0;
    rc = kiln_function_check_grad(f, in, rows, m->n_in + 1, &n_rows, &err);
    ok(rc == 0 && n_rows == m->n_in,
       "%s: kiln_function_check_grad checks %d gradients (%d rows) %s",
       m->label, m->n_in, n_rows, rc ? err.message : "");
    double cg_worst = 0;
    int cg_at = -1;
    for (int i = 0; rc == 0 && i < n_rows && i <= m->n_in; i++)
        if (!(rows[i].max_error <= cg_worst)) {
            cg_worst = rows[i].max_error;
            cg_at = i;
        }
    ok(rc == 0 && cg_worst <= 1e-6,
       "%s: kiln_function_check_grad worst error %.2g", m->label, cg_worst);
    if (cg_at >= 0 && !(cg_worst <= 1e-6))
        diag("worst: %s [%lld]: analytic %.17g, numeric %.17g",
             rows[cg_at].gradient, (long long)rows[cg_at].worst_index,
             rows[cg_at].analytic, rows[cg_at].numeric);
    free(rows);
done:
    free(in);
    free(out);
    kiln_function_free(f);
}

static int read_npy(const char *dir, const char *file, kiln_tensor *t)
{
    char p[8400];
    path_in(p, sizeof p, dir, file);
    kiln_err err = {0, ""};
    int rc = kiln_npy_read(p, t, &err);
    if (rc)
        diag("%s", err.message);
    return rc == 0 && t->dtype == KILN_F64 ? 0 : -1;
}

/* ---- model 1: pooled ----------------------------------------------- */

typedef struct pooled_data {
    int G, P, gamma;
    int64_t nobs;
    const double *w;     /* G x P */
    double **y;          /* G vectors of nobs */
} pooled_data;

static double pooled_ref(const double *x, const void *ctx)
{
    const pooled_data *d = ctx;
    const double *s = x, *lcv = x + d->P;
    double lp = 0;
    for (int k = 0; k < d->P; k++)
        lp += normal_lpdf(s[k], 0, 1);
    for (int g = 0; g < d->G; g++)
        lp += normal_lpdf(lcv[g], -1, 0.5);
    for (int g = 0; g < d->G; g++) {
        double eta = 0;
        for (int k = 0; k < d->P; k++)
            eta += d->w[g * d->P + k] * s[k];
        double mu = exp(eta), cv = exp(lcv[g]);
        for (int64_t i = 0; i < d->nobs; i++) {
            double y = d->y[g][i];
            if (d->gamma) {
                double a = 1 / (cv * cv), b = a / mu;
                lp += a * log(b) - lgamma(a) + (a - 1) * log(y) - b * y;
            } else {
                double sl = sqrt(log(1 + cv * cv));
                double mm = log(mu) - sl * sl / 2;
                double r = log(y) - mm;
                lp += -log(y) - log(sl) - 0.5 * log(2 * M_PI) -
                      r * r / (2 * sl * sl);
            }
        }
    }
    return lp;
}

static void test_pooled(const char *dir, int G, int P, const char *lik)
{
    char sg[16], sp[16], name[128], label[128];
    snprintf(sg, sizeof sg, "%d", G);
    snprintf(sp, sizeof sp, "%d", P);
    snprintf(name, sizeof name, "pooled_g%d_p%d_%s", G, P, lik);
    snprintf(label, sizeof label, "pooled %d/%d %s", G, P, lik);
    const char *args[] = {"pooled", "--groups", sg, "--shared", sp,
                          "--likelihood", lik, "-o", dir, NULL};
    int st = run_gen(args);
    char kg[8400], outp[4200];
    snprintf(kg, sizeof kg, "%s/%s.kg", dir, name);
    snprintf(outp, sizeof outp, "%s/gen0.out", tmp);
    ok(st == 0, "%s: kiln-gen exits 0 (got %d)", label, st);
    ok(file_contains(outp, kg), "%s: kiln-gen prints %s", label, kg);

    pooled_data d = {G, P, strcmp(lik, "gamma") == 0, 0, NULL, NULL};
    kiln_tensor w, *y = calloc((size_t)G, sizeof *y);
    d.y = calloc((size_t)G, sizeof *d.y);
    char file[200];
    snprintf(file, sizeof file, "%s_ref_w.npy", name);
    int rc = read_npy(dir, file, &w);
    rc = rc || w.rank != 2 || w.shape[0] != G || w.shape[1] != P;
    d.w = rc ? NULL : w.data;
    int nread = 0;
    for (int g = 0; g < G && !rc; g++, nread++) {
        snprintf(file, sizeof file, "%s_y%d.npy", name, g + 1);
        rc = read_npy(dir, file, &y[g]);
        if (rc)
            break;
        rc = y[g].rank != 1 || (g > 0 && y[g].shape[0] != d.nobs);
        d.nobs = y[g].shape[0];
        d.y[g] = y[g].data;
        for (int64_t i = 0; i < d.nobs && !rc; i++)
            rc = !(d.y[g][i] > 0);
    }
    ok(rc == 0 && d.nobs == 20, "%s: reference weights %dx%d and %d positive "
       "data vectors of 20", label, G, P, G);
    if (rc == 0) {
        model m = {label, name, G + P, make_names(G + P, "s_", P, "log_cv_",
                                                  NULL),
                   NULL, G + P, NULL, pooled_ref, &d};
        m.size = malloc(sizeof *m.size * (size_t)m.n_in);
        m.x = malloc(sizeof *m.x * (size_t)m.dim);
        for (int i = 0; i < m.n_in; i++)
            m.size[i] = 1;
        for (int k = 0; k < P; k++)
            m.x[k] = 0.8 * sin(1.7 * k + 0.3);
        for (int g = 0; g < G; g++)
            m.x[P + g] = -1 + 0.4 * cos(2.3 * g);
        check_model(dir, &m);
        free_names(m.n_in, m.inputs);
        free(m.size);
        free(m.x);
    }
    if (d.w)
        free(w.data);
    for (int g = 0; g < nread; g++)
        free(y[g].data);
    free(y);
    free(d.y);
}

/* ---- model 2: additive ------------------------------------------------ */

typedef struct additive_data {
    int K;
    int64_t n;
    const double *x, *y;
} additive_data;

static double additive_ref(const double *p, const void *ctx)
{
    const additive_data *d = ctx;
    const double *beta = p;
    double ls = p[d->K], sigma = exp(ls);
    double lp = 0;
    for (int k = 0; k < d->K; k++)
        lp += normal_lpdf(beta[k], 0, 1);
    lp += log(2.0) + normal_lpdf(sigma, 0, 5) + ls;
    for (int64_t i = 0; i < d->n; i++) {
        double mu = 0;
        for (int k = 0; k < d->K; k++)
            mu += beta[k] * sin((k + 1) * d->x[i]);
        lp += normal_lpdf(d->y[i], mu, sigma);
    }
    return lp;
}

static void test_additive(const char *dir, int K)
{
    char sk[16], name[128], label[128];
    snprintf(sk, sizeof sk, "%d", K);
    snprintf(name, sizeof name, "additive_c%d", K);
    snprintf(label, sizeof label, "additive %d", K);
    const char *args[] = {"additive", "--components", sk, "-o", dir, NULL};
    int st = run_gen(args);
    ok(st == 0, "%s: kiln-gen exits 0 (got %d)", label, st);
    kiln_tensor x, y;
    char fx[200], fy[200];
    snprintf(fx, sizeof fx, "%s_x.npy", name);
    snprintf(fy, sizeof fy, "%s_y.npy", name);
    int rx = read_npy(dir, fx, &x), ry = read_npy(dir, fy, &y);
    int rc = rx || ry || x.rank != 1 || y.rank != 1 ||
             x.shape[0] != y.shape[0] || x.shape[0] != 200;
    ok(rc == 0, "%s: data x, y of 200 observations", label);
    if (rc == 0) {
        additive_data d = {K, x.shape[0], x.data, y.data};
        model m = {label, name, K + 1, make_names(K + 1, "beta_", 0, NULL,
                                                  "log_sigma"),
                   NULL, K + 1, NULL, additive_ref, &d};
        m.size = malloc(sizeof *m.size * (size_t)m.n_in);
        m.x = malloc(sizeof *m.x * (size_t)m.dim);
        for (int i = 0; i < m.n_in; i++)
            m.size[i] = 1;
        for (int k = 0; k < K; k++)
            m.x[k] = 0.6 * sin(1.3 * k + 0.2) / sqrt(k + 1.0);
        m.x[K] = -0.9;
        check_model(dir, &m);
        free_names(m.n_in, m.inputs);
        free(m.size);
        free(m.x);
    }
    if (!rx)
        free(x.data);
    if (!ry)
        free(y.data);
}

/* ---- model 3: join --------------------------------------------------- */

typedef struct join_data {
    int64_t n;
    const double *loc, *scale;
} join_data;

static double join_ref(const double *x, const void *ctx)
{
    const join_data *d = ctx;
    double lp = 0;
    for (int64_t i = 0; i < d->n; i++)
        lp += normal_lpdf(x[i], d->loc[i], d->scale[i]);
    return lp;
}

static void test_join(const char *dir, int n)
{
    char sn[16], name[128], label[128];
    snprintf(sn, sizeof sn, "%d", n);
    snprintf(name, sizeof name, "join_n%d", n);
    snprintf(label, sizeof label, "join %d", n);
    const char *args[] = {"join", "--n", sn, "-o", dir, NULL};
    int st = run_gen(args);
    ok(st == 0, "%s: kiln-gen exits 0 (got %d)", label, st);
    kiln_tensor loc, scale;
    char fl[200], fs[200];
    snprintf(fl, sizeof fl, "%s_ref_loc.npy", name);
    snprintf(fs, sizeof fs, "%s_ref_scale.npy", name);
    int rl = read_npy(dir, fl, &loc), rs = read_npy(dir, fs, &scale);
    int rc = rl || rs || loc.rank != 1 || scale.rank != 1 ||
             loc.shape[0] != n || scale.shape[0] != n;
    for (int i = 0; i < n && !rc; i++)
        rc = !(((double *)scale.data)[i] > 0);
    ok(rc == 0, "%s: reference loc and positive scale of %d", label, n);
    if (rc == 0) {
        join_data d = {n, loc.data, scale.data};
        model m = {label, name, n, make_names(n, "x_", 0, NULL, NULL), NULL,
                   n, NULL, join_ref, &d};
        m.size = malloc(sizeof *m.size * (size_t)m.n_in);
        m.x = malloc(sizeof *m.x * (size_t)m.dim);
        for (int i = 0; i < n; i++) {
            m.size[i] = 1;
            m.x[i] = 1.5 * sin(0.9 * i + 0.1);
        }
        check_model(dir, &m);
        free_names(m.n_in, m.inputs);
        free(m.size);
        free(m.x);
    }
    if (!rl)
        free(loc.data);
    if (!rs)
        free(scale.data);
}

/* ---- model 4: dense --------------------------------------------------- */

typedef struct dense_data {
    int64_t n;
    const double *W;
} dense_data;

static double dense_ref(const double *x, const void *ctx)
{
    const dense_data *d = ctx;
    double lp = 0;
    for (int64_t i = 0; i < d->n; i++) {
        double a = 0;
        for (int64_t j = 0; j < d->n; j++)
            a += d->W[i * d->n + j] * x[j];
        double h = tanh(a);
        lp += -0.5 * h * h - 0.5 * x[i] * x[i];
    }
    return lp;
}

static void test_dense(const char *dir, int n)
{
    char sn[16], name[128], label[128];
    snprintf(sn, sizeof sn, "%d", n);
    snprintf(name, sizeof name, "dense_n%d", n);
    snprintf(label, sizeof label, "dense %d", n);
    const char *args[] = {"dense", "--size", sn, "-o", dir, NULL};
    int st = run_gen(args);
    ok(st == 0, "%s: kiln-gen exits 0 (got %d)", label, st);
    kiln_tensor W;
    char fw[200];
    snprintf(fw, sizeof fw, "%s_ref_W.npy", name);
    int rc = read_npy(dir, fw, &W);
    int have = rc == 0;
    rc = rc || W.rank != 2 || W.shape[0] != n || W.shape[1] != n;
    ok(rc == 0, "%s: reference W of %dx%d", label, n, n);
    if (rc == 0) {
        dense_data d = {n, W.data};
        char xn[] = "x", *xname = xn;
        int64_t size = n;
        model m = {label, name, 1, &xname, &size, n, NULL, dense_ref, &d};
        m.x = malloc(sizeof *m.x * (size_t)n);
        for (int i = 0; i < n; i++)
            m.x[i] = 1.2 * sin(0.7 * i + 0.5);
        check_model(dir, &m);
        free(m.x);
    }
    if (have)
        free(W.data);
}

/* ---- determinism ------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the sorted names of a directory's files */
static int list_dir(const char *dir, char **names, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    return n;
}

/* `models` holds the models the tests above generated; generate them
 * again (options of one in another order) and compare every file */
static void test_determinism(const char *models)
{
    char d2[4200], var[4200];
    path_in(d2, sizeof d2, tmp, "again");
    path_in(var, sizeof var, tmp, "variants");
    mkdir(d2, 0755);
    mkdir(var, 0755);
    const char *a1[] = {"pooled", "-o", d2, "--likelihood", "gamma",
                        "--shared", "8", "--groups", "6", NULL};
    const char *a2[] = {"pooled", "--groups", "6", "--shared", "8",
                        "--likelihood", "lognormal", "-o", d2, NULL};
    const char *a3[] = {"additive", "--components", "20", "-o", d2, NULL};
    const char *a4[] = {"join", "--n", "50", "-o", d2, NULL};
    const char *a5[] = {"dense", "--size", "64", "-o", d2, NULL};
    /* non-default --obs and --seed; another seed */
    const char *a6[] = {"pooled", "--groups", "3", "--shared", "20",
                        "--likelihood", "lognormal", "--obs", "7",
                        "--seed", "42", "-o", var, NULL};
    const char *a7[] = {"dense", "--size", "64", "--seed", "2", "-o", var,
                        NULL};
    const char *const *all[] = {a1, a2, a3, a4, a5, a6, a7};
    enum { NRUN = sizeof all / sizeof *all };
    pid_t pid[NRUN];
    for (int i = 0; i < NRUN; i++)
        pid[i] = start_gen(all[i], 10 + i);
    int rc = 0;
    for (int i = 0; i < NRUN; i++)
        rc |= wait_gen(pid[i]) != 0;
    ok(rc == 0, "determinism: the models generated again, and variants");

    char *n1[64], *n2[64];
    int c1 = list_dir(models, n1, 64), c2 = list_dir(d2, n2, 64);
    /* pooled 6/8: .kg, _ref_w, 6 data files, twice; additive 3; join 3;
     * dense 2 */
    ok(c1 == 24 && c1 == c2, "determinism: the same 24 files (%d, %d)", c1,
       c2);
    int same = c1 == c2 && c1 > 0, ndiff = 0;
    for (int i = 0; same && i < c1; i++) {
        char p1[8400], p2[8400];
        path_in(p1, sizeof p1, models, n1[i]);
        path_in(p2, sizeof p2, d2, n2[i]);
        size_t l1, l2;
        char *s1 = slurp(p1, &l1), *s2 = slurp(p2, &l2);
        int eq = strcmp(n1[i], n2[i]) == 0 && s1 && s2 && l1 == l2 &&
                 memcmp(s1, s2, l1) == 0;
        if (!eq) {
            diag("differs: %s", n1[i]);
            ndiff++;
        }
        free(s1);
        free(s2);
    }
    ok(same && ndiff == 0, "determinism: files byte-identical");
    for (int i = 0; i < c1; i++)
        free(n1[i]);
    for (int i = 0; i < c2; i++)
        free(n2[i]);

    /* the canonical header and the name's suffixes */
    char p[8400];
    path_in(p, sizeof p, var, "pooled_g3_p20_lognormal_o7_s42.kg");
    ok(file_contains(p, "# generated by kiln-gen (model format 1): kiln-gen "
                        "pooled --groups 3 --shared 20 --likelihood "
                        "lognormal --obs 7 --seed 42\n"),
       "the header records the canonical arguments; the name --obs and "
       "--seed");
    path_in(p, sizeof p, d2, "pooled_g6_p8_gamma.kg");
    ok(file_contains(p, "kiln-gen pooled --groups 6 --shared 8 --likelihood "
                        "gamma --obs 20 --seed 1\n"),
       "options in any order; defaults in the header");
    /* a long sum is split: 20 coefficients, 16 terms per statement */
    path_in(p, sizeof p, var, "pooled_g3_p20_lognormal_o7_s42.kg");
    ok(file_contains(p, "  eta_1 = add(eta_1_p1, "),
       "long sums are split into statements");
    /* another seed: other weights */
    char a[8400], b[8400];
    path_in(a, sizeof a, models, "dense_n64_ref_W.npy");
    path_in(b, sizeof b, var, "dense_n64_s2_ref_W.npy");
    size_t la, lb;
    char *sa = slurp(a, &la), *sb = slurp(b, &lb);
    ok(sa && sb && la == lb && memcmp(sa, sb, la) != 0,
       "another seed gives other weights");
    free(sa);
    free(sb);
}

/* ---- arguments --------------------------------------------------------- */

static void test_args(const char *dir)
{
    static const char *bad[][12] = {
        {NULL},
        {"weibull", "-o", "D", NULL},
        {"pooled", "--groups", "6", "--shared", "8", "-o", "D", NULL},
        {"pooled", "--groups", "6", "--shared", "8", "--likelihood",
         "weibull", "-o", "D", NULL},
        {"pooled", "--groups", "0", "--shared", "8", "--likelihood",
         "gamma", "-o", "D", NULL},
        {"pooled", "--groups", "6x", "--shared", "8", "--likelihood",
         "gamma", "-o", "D", NULL},
        {"additive", "--components", "20", NULL},
        {"additive", "--components", "20", "--n", "3", "-o", "D", NULL},
        {"additive", "--components", "20", "--bogus", "3", "-o", "D", NULL},
        {"join", "--n", "5", "-o", NULL},
        {"join", "--n", "5", "--seed", "-1", "-o", "D", NULL},
        {"dense", "--size", "100000", "-o", "D", NULL},
    };
    enum { NBAD = sizeof bad / sizeof *bad };
    const char *args[NBAD][12];
    pid_t pid[NBAD + 4];
    for (int i = 0; i < NBAD; i++) {
        int k;
        for (k = 0; bad[i][k]; k++)
            args[i][k] = strcmp(bad[i][k], "D") == 0 ? dir : bad[i][k];
        args[i][k] = NULL;
        pid[i] = start_gen(args[i], 20 + i);
    }
    /* and, at the same time, a missing directory, a file, help, version */
    char missing[4200], file[8400];
    path_in(missing, sizeof missing, tmp, "no/such/dir");
    path_in(file, sizeof file, tmp, "gen0.out");
    const char *m1[] = {"join", "--n", "5", "-o", missing, NULL};
    const char *m2[] = {"join", "--n", "5", "-o", file, NULL};
    const char *h[] = {"--help", NULL};
    const char *v[] = {"--version", NULL};
    pid[NBAD] = start_gen(m1, 20 + NBAD);
    pid[NBAD + 1] = start_gen(m2, 21 + NBAD);
    pid[NBAD + 2] = start_gen_how(h, 22 + NBAD, 1);
    pid[NBAD + 3] = start_gen(v, 23 + NBAD);

    int all2 = 1, usage = 1;
    char errp[4200], outp[4200];
    for (int i = 0; i < NBAD; i++) {
        int st = wait_gen(pid[i]);
        if (st != 2) {
            diag("case %d (%s %s ...) exits %d", i,
                 bad[i][0] ? bad[i][0] : "",
                 bad[i][0] && bad[i][1] ? bad[i][1] : "", st);
            all2 = 0;
        }
        snprintf(errp, sizeof errp, "%s/gen%d.err", tmp, 20 + i);
        if (!file_contains(errp, "usage: kiln-gen"))
            usage = 0;
    }
    ok(all2, "%d kinds of bad arguments exit 2", NBAD);
    ok(usage, "... each with the usage on stderr");

    int st = wait_gen(pid[NBAD]);
    snprintf(errp, sizeof errp, "%s/gen%d.err", tmp, 20 + NBAD);
    ok(st == 1, "a missing -o directory exits 1 (got %d)", st);
    ok(file_contains(errp, missing) &&
           file_contains(errp, "No such file or directory"),
       "... naming the directory");
    st = wait_gen(pid[NBAD + 1]);
    snprintf(errp, sizeof errp, "%s/gen%d.err", tmp, 21 + NBAD);
    ok(st == 1 && file_contains(errp, "not a directory"),
       "-o naming a file exits 1 (got %d)", st);
    st = wait_gen(pid[NBAD + 2]);
    snprintf(outp, sizeof outp, "%s/gen%d.out", tmp, 22 + NBAD);
    ok(st == 0 && file_contains(outp, "SYNOPSIS") &&
           file_contains(outp, "kiln-gen pooled --groups G --shared P") &&
           file_contains(outp, "EXIT STATUS"),
       "--help prints the manual and exits 0 (through tools/kiln-gen "
       "itself)");
    st = wait_gen(pid[NBAD + 3]);
    snprintf(outp, sizeof outp, "%s/gen%d.out", tmp, 23 + NBAD);
    ok(st == 0 && file_contains(outp, "kiln-gen " KILN_VERSION_STRING),
       "--version");
}

int main(void)
{
    const char *b = getenv("KILN_BUILDDIR");
    snprintf(gen_path, sizeof gen_path, "%s/tools/kiln-gen", b ? b : ".");
    if (access(gen_path, X_OK) != 0) {
        ok(0, "%s is executable (set KILN_BUILDDIR)", gen_path);
        return done_testing();
    }
    /* the binary a libtool wrapper runs, when tools/kiln-gen is one */
    char real[4200];
    snprintf(real, sizeof real, "%s/tools/.libs/kiln-gen", b ? b : ".");
    FILE *w = fopen(gen_path, "rb");
    char head[2] = {0, 0};
    if (w) {
        if (fread(head, 1, 2, w) != 2)
            head[0] = 0;
        fclose(w);
    }
    if (head[0] == '#' && head[1] == '!' && access(real, X_OK) == 0) {
        snprintf(gen_real, sizeof gen_real, "%s", real);
        snprintf(lib_dir, sizeof lib_dir, "%s/.libs", b ? b : ".");
    }
    const char *base = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/kiln-gen-test-XXXXXX",
             base && *base ? base : "/tmp");
    if (!mkdtemp(tmp)) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return done_testing();
    }
    char dir[4200];
    path_in(dir, sizeof dir, tmp, "models");
    mkdir(dir, 0755);

    test_pooled(dir, 6, 8, "gamma");
    test_pooled(dir, 6, 8, "lognormal");
    test_additive(dir, 20);
    test_join(dir, 50);
    test_dense(dir, 64);
    test_determinism(dir);
    test_args(dir);

    rm_dir(tmp);
    return done_testing();
}
