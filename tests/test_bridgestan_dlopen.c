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
#include <unistd.h>

#include "tap.h"

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
    rmdir(tmp);
    return done_testing();
}
