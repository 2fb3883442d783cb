/*
 * test_bridgestan_dlopen.c — a kiln BridgeStan library used the way
 * nutpie's Stan path uses one (docs/bridgestan.md): dlopen, resolve the
 * bs_* symbols, bs_model_construct with a data file, bs_param_unc_num,
 * bs_log_density_gradient in a loop, errors freed with bs_free_error_msg,
 * bs_model_destruct, dlclose.  Every value is checked against
 * kiln_model_log_density of libkiln itself (the same model made directly
 * from the .kg file).  Runs under ASan/UBSan too (the sanitizer CI step):
 * every error message is freed, a NULL error_msg allocates nothing.
 * The libraries are made with the build tree's `kiln bridgestan`.
 */
#define _GNU_SOURCE   /* mkdtemp */
#define KILN_BS_API_LOADER
#include "bridgestan_api.h"

#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "bs_trailer.h"
#include <kiln/io.h>
#include <sys/stat.h>

static char src[2048], build[2048], tmp[4096];

/* Run `kiln bridgestan MODEL -o OUT`; its output (both streams) into out.
 * Returns the exit status (-1 when it could not run). */
static int make_library(const char *model, const char *lib, char *out,
                        size_t size)
{
    char cmd[12288];
    if (strchr(model, '\'') || strchr(lib, '\'') || strchr(build, '\''))
        return -1;
    snprintf(cmd, sizeof cmd, "'%s/tools/kiln' bridgestan '%s' -o '%s' 2>&1",
             build, model, lib);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return st == -1 ? -1 : WEXITSTATUS(st);
}

/* A deterministic point in [-1.5, 1.5)^n. */
static void point(uint64_t *state, double *x, int n)
{
    for (int i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 3.0 * (double)(*state >> 11) / 9007199254740992.0 - 1.5;
    }
}

static double rel(double a, double b)
{
    double s = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return s > 1 ? fabs(a - b) / s : fabs(a - b);
}

typedef struct model_case {
    const char *kg, *data, *name;
    int n_unc;
    int tau;   /* index of a lower=0 parameter, for the bounds error */
} model_case;

/* One model: the nutpie-style loop and the checks around it.  Returns 0
 * when everything ran, -1 on a failure before the checks could run. */
static int one_model(const bs_api *bs, const model_case *mc)
{
    char data[4096], model[4096], *err = NULL;
    snprintf(data, sizeof data, "%s/%s", src, mc->data);
    snprintf(model, sizeof model, "%s/%s", src, mc->kg);

    bs_model *m = bs->model_construct(data, 1234, &err);
    if (!m) {
        ok(0, "%s: bs_model_construct: %s", mc->name, err ? err : "?");
        bs->free_error_msg(err);
        return -1;
    }
    ok(err == NULL, "%s: constructed from a .json path; error_msg untouched",
       mc->name);

    /* the same model straight from libkiln */
    kiln_err kerr = {0, ""};
    kiln_graph *g = kiln_parse_file(model, &kerr);
    kiln_model *km = g ? kiln_model_new(g, NULL, data, NULL, NULL, &kerr)
                       : NULL;
    kiln_graph_free(g);
    if (!ok(km != NULL, "%s: kiln_model_new of the .kg: %s", mc->name,
            km ? "ok" : kerr.message)) {
        bs->model_destruct(m);
        return -1;
    }

    int n = bs->param_unc_num(m);
    ok(n == mc->n_unc && n == kiln_model_n_unc(km),
       "%s: bs_param_unc_num %d (kiln %d)", mc->name, n, kiln_model_n_unc(km));
    ok(strcmp(bs->name(m), mc->name) == 0, "%s: bs_name", mc->name);
    ok(strcmp(bs->param_names(m, true, false),
              kiln_model_param_names(km, 1, 0)) == 0 &&
       strcmp(bs->param_unc_names(m), kiln_model_param_unc_names(km)) == 0,
       "%s: names are kiln_model's", mc->name);
    ok(strstr(bs->model_info(m), kiln_model_info(km)) != NULL,
       "%s: bs_model_info holds kiln_model_info", mc->name);

    /* nutpie's loop: one gradient per leapfrog step */
    /* th holds the constrained values with tp and gq */
    int n_all = bs->param_num(m, true, true);
    ok(n_all == kiln_model_n_params(km, 1, 1) && n_all >= n,
       "%s: bs_param_num with tp and gq: %d", mc->name, n_all);
    double *x = calloc((size_t)n, sizeof *x), *gr = calloc((size_t)n, 8),
           *gk = calloc((size_t)n, 8), *th = calloc((size_t)n_all, 8);
    uint64_t s = 42;
    int calls = 5000, bad_rc = 0, bad_err = 0;
    double worst = 0;
    for (int k = 0; k < calls; k++) {
        double lp = 0, lk = 0;
        point(&s, x, n);
        int jac = k % 2;
        int rc = bs->log_density_gradient(m, true, jac, x, &lp, gr, &err);
        bad_rc += rc != 0;
        bad_err += err != NULL;
        if (err) {
            diag("call %d: %s", k, err);
            bs->free_error_msg(err);
            err = NULL;
        }
        if (kiln_model_log_density(km, jac, x, &lk, gk, &kerr) != 0) {
            bad_rc++;
            continue;
        }
        double d = rel(lp, lk);
        for (int i = 0; i < n; i++)
            d = fmax(d, rel(gr[i], gk[i]));
        worst = fmax(worst, d);
    }
    ok(bad_rc == 0 && bad_err == 0, "%s: %d bs_log_density_gradient calls "
       "return 0 (%d failed)", mc->name, calls, bad_rc);
    ok(worst <= 1e-13, "%s: values and gradients equal kiln_model_log_density"
       "'s (largest relative difference %.3g)", mc->name, worst);

    /* an error: a bound broken in unconstrain; message freed */
    double lp = 0;
    int rc = bs->param_constrain(m, false, false, x, th, NULL, &err);
    ok(rc == 0 && err == NULL, "%s: bs_param_constrain", mc->name);
    th[mc->tau] = -1;
    rc = bs->param_unconstrain(m, th, gr, &err);
    ok(rc == -1 && err && strstr(err, "bs_param_unconstrain: "),
       "%s: unconstrain below a lower bound: -1, '%s'", mc->name,
       err ? err : "(no message)");
    bs->free_error_msg(err);
    err = NULL;
    rc = bs->param_unconstrain(m, th, gr, NULL);
    ok(rc == -1, "%s: ... and with error_msg NULL (nothing to free)",
       mc->name);
    rc = bs->log_density(m, false, true, x, &lp, NULL);
    ok(rc == 0, "%s: bs_log_density with error_msg NULL", mc->name);
    rc = bs->log_density_gradient(m, false, true, x, &lp, NULL, &err);
    ok(rc == -1 && err && strstr(err, "bs_log_density_gradient: grad is NULL"),
       "%s: bs_log_density_gradient with grad NULL is an error", mc->name);
    if (err) {
        bs->free_error_msg(err);
        err = NULL;
    }

    bs_rng *rng = bs->rng_construct(7, &err);
    rc = rng ? bs->param_constrain(m, true, true, x, th, rng, &err) : -1;
    ok(rng && rc == 0 && !err, "%s: bs_rng_construct, constrain with gq",
       mc->name);
    bs->rng_destruct(rng);
    if (err) {
        bs->free_error_msg(err);
        err = NULL;
    }
    free(x);
    free(gr);
    free(gk);
    free(th);
    kiln_model_free(km);
    bs->model_destruct(m);
    return 0;
}


/* The whole file at path (malloc'd), its size in *n; NULL on failure. */
static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = sz > 0 ? malloc((size_t)sz) : NULL;
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = b ? (size_t)sz : 0;
    return b;
}

static int write_all(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = fwrite(b, 1, n, f) == n ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

/* Construct the model of library `lib` (no data) and its log density at
 * u with the Jacobian into *lp; the construct error (or "") into why. */
static int lib_log_density(const char *lib, const double *u, double *lp,
                           char *why, size_t why_size)
{
    snprintf(why, why_size, "%s", "");
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    bs_api bs;
    if (!h || bs_api_load(h, &bs, why, why_size) != 0) {
        if (!h)
            snprintf(why, why_size, "%s", dlerror());
        if (h)
            dlclose(h);
        return -1;
    }
    char *err = NULL;
    bs_model *m = bs.model_construct("", 1, &err);
    int rc = -1;
    if (m)
        rc = bs.log_density(m, false, true, u, lp, &err);
    if (err) {
        snprintf(why, why_size, "%s", err);
        bs.free_error_msg(err);
    }
    bs.model_destruct(m);
    dlclose(h);
    return rc;
}

/* issue 24: a library made from a model that reads csv() and npy() data
 * holds that data: moved elsewhere with the data files deleted, it gives
 * the same log density; a trailer with a relative base_dir is refused. */
static void bound_data(void)
{
    char dir[4200], path[4400], lib[4400], moved[4400], out[4096];
    snprintf(dir, sizeof dir, "%s/bound", tmp);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/d.csv", dir);
    static const char csv[] = "x,y\n1,2.5\n2,-1\n3,0.25\n";
    write_all(path, csv, sizeof csv - 1);
    double sv[2] = { 0.5, 2.0 };
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = 1;
    t.shape[0] = 2;
    t.data = sv;
    snprintf(path, sizeof path, "%s/s.npy", dir);
    kiln_err e;
    kiln_npy_write(path, &t, &e);
    snprintf(path, sizeof path, "%s/m.kg", dir);
    static const char kg[] =
        "kiln 1\ngraph bound\n"
        "  shared y: f64[N] = csv(\"d.csv\", \"y\")\n"
        "  shared s: f64[2] = npy(\"s.npy\")\n"
        "  param mu: f64\n"
        "  param sigma: f64 lower=0\n"
        "  output logp = sub(mul(neg(sum(square(sub(y, mu)))), s[0]), "
        "mul(s[1], square(sigma)))\n"
        "end\n";
    write_all(path, kg, sizeof kg - 1);
    snprintf(lib, sizeof lib, "%s/m.so", dir);
    int rc = make_library(path, lib, out, sizeof out);
    if (!ok(rc == 0 && strstr(out, "2 data files bound into it"),
            "kiln bridgestan of a csv()/npy() model binds its 2 data files")) {
        diag("%s", out);
        return;
    }
    /* the value, computed here: mu = u0, sigma = exp(u1), log|J| = u1 */
    double u[2] = { 0.3, -0.2 }, y[3] = { 2.5, -1, 0.25 }, ss = 0;
    for (int i = 0; i < 3; i++)
        ss += (y[i] - u[0]) * (y[i] - u[0]);
    double want = -ss * sv[0] - sv[1] * exp(2 * u[1]) + u[1];
    double lp0 = NAN, lp1 = NAN;
    char why[1024];
    rc = lib_log_density(lib, u, &lp0, why, sizeof why);
    ok(rc == 0 && fabs(lp0 - want) <= 1e-14 * fabs(want),
       "its log density: %.17g (want %.17g) %s", lp0, want, why);
    /* move it away (a new file elsewhere) and delete the model and data */
    size_t n = 0;
    unsigned char *bytes = read_all(lib, &n);
    snprintf(moved, sizeof moved, "%s/moved.so", tmp);
    ok(bytes && write_all(moved, bytes, n) == 0 && chmod(moved, 0700) == 0,
       "library copied to another directory");
    unlink(lib);
    snprintf(path, sizeof path, "%s/d.csv", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/s.npy", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/m.kg", dir);
    unlink(path);
    rmdir(dir);
    rc = lib_log_density(moved, u, &lp1, why, sizeof why);
    ok(rc == 0 && lp1 == lp0, "moved, data and model deleted: the same log "
       "density %.17g %s", lp1, why);

    /* the same library with base_dir made relative: refused */
    bst_footer f;
    const char *field[BST_NFIELDS];
    if (bytes && n > BST_FOOTER &&
        bst_footer_decode(bytes + n - BST_FOOTER, &f) &&
        f.meta_len <= n - BST_FOOTER &&
        bst_meta_split((const char *)bytes + n - BST_FOOTER - f.meta_len,
                       f.meta_len, field) == 0) {
        size_t head = n - BST_FOOTER - f.meta_len; /* up to the metadata */
        char meta[8192];
        size_t ml = 0;
        const char *nf[BST_NFIELDS];
        memcpy(nf, field, sizeof nf);
        nf[BST_BASE_DIR] = "bound";
        for (int i = 0; i < BST_NFIELDS; i++) {
            size_t k = strlen(nf[i]) + 1;
            memcpy(meta + ml, nf[i], k);
            ml += k;
        }
        unsigned char *lib2 = malloc(head + ml + BST_FOOTER);
        memcpy(lib2, bytes, head);
        memcpy(lib2 + head, meta, ml);
        size_t body = head - f.text_len - f.data_len; /* the template */
        f.meta_len = ml;
        f.checksum = bst_fnv1a(BST_FNV_INIT, lib2 + body,
                               f.text_len + f.data_len);
        f.checksum = bst_fnv1a(f.checksum, meta, ml);
        bst_footer_encode(lib2 + head + ml, &f);
        snprintf(path, sizeof path, "%s/relative.so", tmp);
        write_all(path, lib2, head + ml + BST_FOOTER);
        chmod(path, 0700);
        free(lib2);
        rc = lib_log_density(path, u, &lp1, why, sizeof why);
        ok(rc != 0 && strstr(why, "bs_model_construct: ") &&
               strstr(why, "directory 'bound' is not absolute"),
           "a trailer whose base_dir is relative is refused: %s", why);
        unlink(path);
    } else {
        ok(0, "a trailer whose base_dir is relative is refused: cannot "
           "read the library's trailer");
    }
    free(bytes);
    unlink(moved);
}

/* A data region of 200k empty files (a crafted trailer): read in time
 * linear in the entries (grown one entry at a time it was quadratic
 * wherever realloc moves the block, as under ASan: over 120 s; found by
 * an attack on issue 24), every entry where it is. */
static void many_data_entries(void)
{
    enum { N = 200000 };
    unsigned char *d = malloc((size_t)N * 24);
    size_t len = 0;
    for (int i = 0; i < N; i++) {
        len += (size_t)sprintf((char *)d + len, "/d/%d", i) + 1;
        memset(d + len, 0, 8);
        len += 8;
    }
    kiln_memfile *mf = NULL;
    size_t n = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = bst_data_memfiles(d, len, &mf, &n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ok(rc == 0 && n == N && mf && !strcmp(mf[0].path, "/d/0") &&
       !strcmp(mf[N - 1].path, "/d/199999") && mf[N - 1].size == 0,
       "a data region of %d empty files: %zu entries, in %.3f s", N, n, s);
    ok(s < 10, "... read in under 10 s (linear)");
    free(mf);
    free(d);
}

int main(void)
{
    snprintf(src, sizeof src, "%s",
             getenv("KILN_SRCDIR") ? getenv("KILN_SRCDIR") : ".");
    snprintf(build, sizeof build, "%s",
             getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".");
    snprintf(tmp, sizeof tmp, "%s/kiln_bs_dlopen.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) {
        printf("1..0 # SKIP cannot make a temporary directory\n");
        return 0;
    }
    static const model_case cases[] = {
        {"examples/eight_schools_noncentered.kg",
         "examples/data/posteriordb/eight_schools.json",
         "eight_schools_noncentered", 10, 9},
        {"examples/radon_variable_intercept_noncentered.kg",
         "examples/data/posteriordb/radon_mn.json",
         "radon_variable_intercept_noncentered", 89, 87},
    };
    char out[4096], lib[4200], model[4096];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(model, sizeof model, "%s/%s", src, cases[c].kg);
        snprintf(lib, sizeof lib, "%s/m%zu.so", tmp, c);
        int rc = make_library(model, lib, out, sizeof out);
        if (!ok(rc == 0, "kiln bridgestan %s", cases[c].kg)) {
            diag("%s", out);
            continue;
        }
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        bs_api bs;
        char why[256] = "";
        if (!ok(h && bs_api_load(h, &bs, why, sizeof why) == 0,
                "dlopen and every bs_ symbol: %s", h ? why : dlerror())) {
            if (h)
                dlclose(h);
            continue;
        }
        ok(*bs.major == 2 && *bs.minor == 7 && *bs.patch == 0,
           "bs_*_version: %d.%d.%d", *bs.major, *bs.minor, *bs.patch);
        ok(bs.set_print_callback(NULL, NULL) == 0, "bs_set_print_callback");
        char *err = NULL;
        bs_model *none = bs.model_construct("{\"J\": 8, \"y\": [1,", 1, &err);
        ok(!none && err && strstr(err, "bs_model_construct: "),
           "bad JSON: NULL and a message ('%s')", err ? err : "");
        bs.free_error_msg(err);
        ok(!bs.model_construct("{\"J\": 8", 1, NULL),
           "bad JSON with error_msg NULL: NULL");
        none = bs.model_construct(NULL, 1, &err);
        ok(!none && err && strstr(err, "bs_model_construct: ") &&
               strstr(err, "no variable"),
           "no data (NULL) for a model that needs some: '%s'",
           err ? err : "");
        bs.free_error_msg(err);
        one_model(&bs, &cases[c]);
        dlclose(h);
        unlink(lib);
    }

    /* the library file replaced after it was loaded (a rename over its
     * path): the model is read from the file that was loaded, or refused
     * -- never taken from whatever the path names now */
    char lib2[4200];
    snprintf(model, sizeof model, "%s/%s", src, cases[0].kg);
    snprintf(lib, sizeof lib, "%s/r.so", tmp);
    snprintf(lib2, sizeof lib2, "%s/r2.so", tmp);
    int rc1 = make_library(model, lib, out, sizeof out);
    snprintf(model, sizeof model, "%s/%s", src, cases[1].kg);
    int rc2 = make_library(model, lib2, out, sizeof out);
    void *hr = rc1 == 0 && rc2 == 0 ? dlopen(lib, RTLD_NOW | RTLD_LOCAL)
                                    : NULL;
    bs_api bsr;
    char whyr[256] = "";
    if (hr && bs_api_load(hr, &bsr, whyr, sizeof whyr) == 0 &&
        rename(lib2, lib) == 0) {
        char *err = NULL, data[4200];
        snprintf(data, sizeof data, "%s/%s", src, cases[0].data);
        bs_model *m = bsr.model_construct(data, 1, &err);
        ok(m && bsr.param_unc_num(m) == cases[0].n_unc,
           "a library whose file was replaced (renamed over) after loading "
           "still builds its own model, %s, not the new file's: %s",
           cases[0].name, err ? err : "");
        bsr.free_error_msg(err);
        if (m)
            bsr.model_destruct(m);
    } else {
        ok(0, "setup of the replaced-library case: %s", out);
    }
    if (hr)
        dlclose(hr);
    unlink(lib);
    unlink(lib2);

    /* the template itself, loaded beside the model libraries */
    snprintf(lib, sizeof lib, "%s/tools/.libs/bridgestan.so", build);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    bs_api bs;
    char why[256] = "";
    if (h && bs_api_load(h, &bs, why, sizeof why) == 0) {
        char *err = NULL;
        bs_model *none = bs.model_construct("", 1, &err);
        ok(!none && err && strstr(err, "this is kiln's BridgeStan template; "
                                       "make a model library with kiln "
                                       "bridgestan MODEL.kg -o LIB.so"),
           "the template refuses to construct: %s", err ? err : "");
        bs.free_error_msg(err);
        dlclose(h);
    } else {
        ok(1, "# SKIP no template at %s", lib);
        if (h)
            dlclose(h);
    }
    bound_data();
    many_data_entries();
    rmdir(tmp);
    return done_testing();
}
