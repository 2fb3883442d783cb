/*
 * scipy_cases.h — test cases whose reference values SciPy computes at
 * test time (include once, after tap.h and found_backends.h):
 *
 *   value_tests(script, min_cases, bk, nbk)
 *
 * runs /usr/bin/python3 tests/SCRIPT (under $KILN_SRCDIR), which prints
 * cases in the format tests/lpdf_cases.py documents (arg dtypes f64,
 * f32, i64, i32, bool; an optional "dtype NAME" line before "ref"
 * checks the output's dtype), builds each case's op over its arguments, runs
 * it under every backend in bk[] with the rewrite passes on and on
 * interp with none, and compares every output element (any dtype, read
 * as a double) with the reference.  SKIP without python or scipy; the
 * largest error seen is printed as a diagnostic.
 */
#ifndef KILN_TESTS_SCIPY_CASES_H
#define KILN_TESTS_SCIPY_CASES_H

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXA 4

typedef struct lcase {
    char label[128], op[64], mode[8];
    double rtol;
    int nargs;
    kiln_dtype dt[MAXA];
    int rank[MAXA];
    int64_t n[MAXA];
    double *v[MAXA];
    void *iv[MAXA];      /* the values in dtype dt[k] unless f64 */
    int nref;
    double *ref, *scale;
    char odt[8];         /* the output's dtype name ("" = not checked) */
} lcase;

static double *read_list(FILE *fp, int64_t n)
{
    double *p = calloc((size_t)(n ? n : 1), sizeof *p);
    char buf[64];
    for (int64_t i = 0; i < n; i++) {
        if (fscanf(fp, "%63s", buf) != 1) {
            free(p);
            return NULL;
        }
        p[i] = strtod(buf, NULL);
    }
    return p;
}

static void free_case(lcase *c)
{
    for (int k = 0; k < c->nargs; k++) {
        free(c->v[k]);
        free(c->iv[k]);
    }
    free(c->ref);
    free(c->scale);
    memset(c, 0, sizeof *c);
}

/* Read one case; 1 on success, 0 at the end, -1 on a format error. */
static int read_case(FILE *fp, lcase *c)
{
    char kw[16];
    memset(c, 0, sizeof *c);
    if (fscanf(fp, "%15s", kw) != 1)
        return 0;
    if (strcmp(kw, "case") != 0 ||
        fscanf(fp, "%127s %63s %7s %lf", c->label, c->op, c->mode,
               &c->rtol) != 4)
        return -1;
    for (;;) {
        long pos = ftell(fp);
        if (fscanf(fp, "%15s", kw) != 1)
            return -1;
        if (strcmp(kw, "arg") == 0) {
            char dt[8];
            int k = c->nargs;
            if (k == MAXA ||
                fscanf(fp, "%7s %d %lld", dt, &c->rank[k],
                       (long long *)&c->n[k]) != 3)
                return -1;
            c->dt[k] = strcmp(dt, "i64") == 0   ? KILN_I64
                       : strcmp(dt, "i32") == 0 ? KILN_I32
                       : strcmp(dt, "f32") == 0 ? KILN_F32
                       : strcmp(dt, "bool") == 0 ? KILN_BOOL
                                                 : KILN_F64;
            if (!(c->v[k] = read_list(fp, c->n[k])))
                return -1;
            if (c->dt[k] != KILN_F64) {
                c->iv[k] = calloc((size_t)c->n[k] + 1, sizeof(int64_t));
                if (!c->iv[k])
                    return -1;
                for (int64_t i = 0; i < c->n[k]; i++) {
                    double x = c->v[k][i];
                    switch (c->dt[k]) {
                    case KILN_I64: ((int64_t *)c->iv[k])[i] = (int64_t)x; break;
                    case KILN_I32: ((int32_t *)c->iv[k])[i] = (int32_t)x; break;
                    case KILN_F32: ((float *)c->iv[k])[i] = (float)x; break;
                    default: ((uint8_t *)c->iv[k])[i] = x != 0; break;
                    }
                }
            }
            c->nargs++;
        } else if (strcmp(kw, "dtype") == 0) {
            if (fscanf(fp, "%7s", c->odt) != 1)
                return -1;
        } else if (strcmp(kw, "ref") == 0) {
            if (fscanf(fp, "%d", &c->nref) != 1 ||
                !(c->ref = read_list(fp, c->nref)))
                return -1;
        } else if (strcmp(kw, "scale") == 0) {
            int m;
            if (fscanf(fp, "%d", &m) != 1 || m != c->nref ||
                !(c->scale = read_list(fp, m)))
                return -1;
            return 1;
        } else {
            (void)pos;
            return -1;
        }
    }
}

/* the largest |got - want| / max(|want|, scale) seen, and where */
static double worst_err;
static char worst_where[200];

static int close_to(double got, double want, double rtol, double scale)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    if (got == want)
        return 1;
    double s = fabs(want) > scale ? fabs(want) : scale;
    return fabs(got - want) <= rtol * s;
}

/* Build, compile with backend `bk` and passes `passes`, call, compare. */
static void run_case(const lcase *c, const char *bk, const char *passes)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_graph_new("lpdf", &err);
    kiln_value in[MAXA];
    kiln_tensor t[MAXA];
    for (int k = 0; k < c->nargs; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "a%d", k);
        in[k] = kiln_graph_input(g, nm, c->dt[k], c->rank[k], &c->n[k],
                                 &err);
        t[k].dtype = c->dt[k];
        t[k].rank = c->rank[k];
        t[k].shape[0] = c->n[k];
        t[k].data = c->dt[k] != KILN_F64 ? c->iv[k] : (void *)c->v[k];
    }
    kiln_value v = kiln_graph_op(g, c->op, c->nargs, in, NULL, 0, &err);
    if (v < 0 || kiln_graph_output(g, "v", v, &err)) {
        ok(0, "%s [%s]: build: %s", c->label, bk, err.message);
        kiln_graph_free(g);
        return;
    }
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = bk;
    o.passes = passes;
    o.quiet = 1;
    o.jobs = 1;
    kiln_function *f = kiln_compile(g, &o, &err);
    kiln_graph_free(g);
    if (!f) {
        ok(0, "%s [%s]: compile: %s", c->label, bk, err.message);
        return;
    }
    kiln_tensor out[1];
    if (kiln_function_call(f, t, out, &err)) {
        ok(0, "%s [%s]: call: %s", c->label, bk, err.message);
        kiln_function_free(f);
        return;
    }
    int64_t m = 1;
    for (int i = 0; i < out[0].rank; i++)
        m *= out[0].shape[i];
    double *r = malloc(sizeof *r * (size_t)(m ? m : 1));
    if (!r) {
        ok(0, "%s [%s]: out of memory", c->label, bk);
        kiln_function_free(f);
        return;
    }
    for (int64_t i = 0; i < m; i++)
        switch (out[0].dtype) {
        case KILN_F64: r[i] = ((const double *)out[0].data)[i]; break;
        case KILN_F32: r[i] = ((const float *)out[0].data)[i]; break;
        case KILN_I64: r[i] = (double)((const int64_t *)out[0].data)[i]; break;
        case KILN_I32: r[i] = ((const int32_t *)out[0].data)[i]; break;
        default: r[i] = ((const uint8_t *)out[0].data)[i]; break;
        }
    int good = m == c->nref;
    if (c->odt[0] && strcmp(kiln_dtype_name(out[0].dtype), c->odt) != 0) {
        diag("%s [%s]: output dtype %s, want %s", c->label, bk,
             kiln_dtype_name(out[0].dtype), c->odt);
        good = 0;
    }
    int worst = -1;
    for (int64_t i = 0; good && i < m; i++) {
        double s = fabs(c->ref[i]) > c->scale[i] ? fabs(c->ref[i])
                                                  : c->scale[i];
        double e = fabs(r[i] - c->ref[i]) / s;
        if (isfinite(e) && e > worst_err) {
            worst_err = e;
            snprintf(worst_where, sizeof worst_where, "%s [%s] element %d",
                     c->label, bk, (int)i);
        }
    }
    for (int64_t i = 0; good && i < m; i++)
        if (!close_to(r[i], c->ref[i], c->rtol, c->scale[i])) {
            good = 0;
            worst = (int)i;
        }
    ok(good, "%s [%s%s%s]", c->label, bk, passes ? ", passes " : "",
       passes ? passes : "");
    if (m != c->nref)
        diag("got %lld values, want %d", (long long)m, c->nref);
    else if (worst >= 0)
        diag("element %d: got %.17g, want %.17g (rtol %g, scale %g)", worst,
             r[worst], c->ref[worst], c->rtol, c->scale[worst]);
    free(r);
    kiln_function_free(f);
}

static void value_tests(const char *script, int min_cases, const char **bk,
                        int nbk)
{
    const char *top = getenv("KILN_SRCDIR");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/%s'",
             top ? top : "..", script);
    FILE *fp = access("/usr/bin/python3", X_OK) == 0 ? popen(cmd, "r")
                                                     : NULL;
    if (!fp) {
        ok(1, "values against scipy # SKIP no /usr/bin/python3");
        return;
    }
    int c0 = fgetc(fp);
    if (c0 == 'S') {
        char why[256] = "";
        if (!fgets(why, sizeof why, fp))
            why[0] = '\0';
        why[strcspn(why, "\n")] = '\0';
        ok(1, "values against scipy # S%s", why);
        pclose(fp);
        return;
    }
    if (c0 != EOF)
        ungetc(c0, fp);
    lcase c;
    int n = 0, rc;
    while ((rc = read_case(fp, &c)) == 1) {
        for (int b = 0; b < nbk; b++)
            run_case(&c, bk[b], NULL);
        run_case(&c, "interp", "none");
        free_case(&c);
        n++;
    }
    free_case(&c);
    int st = pclose(fp);
    diag("largest error relative to max(|ref|, scale): %.3g at %s",
         worst_err, worst_where);
    ok(rc == 0 && st == 0 && n > min_cases, "read %d cases from %s "
       "(exit status %d)", n, script, st);
}

#endif
