/*
 * numpy_cases.h — value cases computed by a *_cases.py script at test time
 * (NumPy / SciPy references), run under each backend (header-only;
 * include after tap.h and compile_text.h).  The script prints, one item a
 * line:
 *
 *   case LABEL RTOL
 *   graph                  then a .kg graph body, then
 *   end
 *   in NAME [DTYPE] RANK d1 .. dR v1 .. vN   inputs in declaration order
 *                                            (DTYPE f64, the default, or
 *                                            f32: values exactly f32)
 *   out N v1 .. vN                           outputs in order (C order)
 *
 * or "SKIP reason" alone.  A value passes when |kiln - ref| <= RTOL *
 * max(1, max|ref|) over its output; a case whose inputs are all f32 must
 * give f32 outputs.
 *
 *   nc_value_tests(script, ref, min_cases, bk, nbk)
 *
 * runs every case of tests/SCRIPT on each backend of bk and on the
 * interpreter without passes, one TAP point each ("values against REF"),
 * then one for the count read (>= min_cases).
 */
#ifndef KILN_TESTS_NUMPY_CASES_H
#define KILN_TESTS_NUMPY_CASES_H

#include <kiln/kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NC_MAX_IO 16

typedef struct nc_case {
    char label[64];
    double rtol;
    char *text;
    int n_in, n_out;
    kiln_tensor in[NC_MAX_IO];
    double *ref[NC_MAX_IO];
    int64_t nref[NC_MAX_IO];
} nc_case;

static void nc_free(nc_case *c)
{
    free(c->text);
    for (int i = 0; i < c->n_in; i++)
        free(c->in[i].data);
    for (int i = 0; i < c->n_out; i++)
        free(c->ref[i]);
    memset(c, 0, sizeof *c);
}

static double *nc_doubles(FILE *fp, int64_t n)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; v && i < n; i++)
        if (fscanf(fp, "%lf", &v[i]) != 1) {
            free(v);
            return NULL;
        }
    return v;
}

/* An input line after "in": NAME [DTYPE] RANK dims values. */
static int nc_input(FILE *fp, kiln_tensor *t)
{
    char nm[64], dt[8];
    int rank;
    if (fscanf(fp, "%63s %7s", nm, dt) != 2)
        return -1;
    t->dtype = strcmp(dt, "f32") ? KILN_F64 : KILN_F32;
    if (strcmp(dt, "f32") && strcmp(dt, "f64"))
        rank = atoi(dt);   /* no dtype: f64 */
    else if (fscanf(fp, "%d", &rank) != 1)
        return -1;
    if (rank < 0 || rank > KILN_MAX_RANK)
        return -1;
    int64_t n = 1;
    t->rank = rank;
    for (int d = 0; d < rank; d++) {
        long long x;
        if (fscanf(fp, "%lld", &x) != 1)
            return -1;
        t->shape[d] = x;
        n *= x;
    }
    double *v = nc_doubles(fp, n);
    if (!v)
        return -1;
    if (t->dtype == KILN_F32) {
        float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
        for (int64_t i = 0; f && i < n; i++)
            f[i] = (float)v[i];
        free(v);
        t->data = f;
        return f ? 0 : -1;
    }
    t->data = v;
    return 0;
}

/* 1 read, 0 at the end, -1 on a format error */
static int nc_read(FILE *fp, nc_case *c)
{
    char kw[16], line[512];
    memset(c, 0, sizeof *c);
    if (fscanf(fp, "%15s", kw) != 1)
        return 0;
    if (strcmp(kw, "case") || fscanf(fp, "%63s %lf ", c->label, &c->rtol) != 2
        || !fgets(line, sizeof line, fp) || strcmp(line, "graph\n"))
        return -1;
    size_t cap = 4096, len = 0;
    c->text = malloc(cap);
    len = (size_t)snprintf(c->text, cap, "kiln 1\ngraph t\n");
    for (;;) {
        if (!fgets(line, sizeof line, fp))
            return -1;
        size_t l = strlen(line);
        if (len + l + 1 > cap)
            c->text = realloc(c->text, cap *= 2);
        memcpy(c->text + len, line, l + 1);
        len += l;
        if (!strcmp(line, "end\n"))
            break;
    }
    for (;;) {
        int ch = fgetc(fp);
        while (ch == '\n' || ch == ' ')
            ch = fgetc(fp);
        if (ch == EOF)
            return 1;
        ungetc(ch, fp);
        if (ch == 'c')   /* the next case */
            return 1;
        if (fscanf(fp, "%15s", kw) != 1)
            return -1;
        if (!strcmp(kw, "in")) {
            if (c->n_in >= NC_MAX_IO || nc_input(fp, &c->in[c->n_in]))
                return -1;
            c->n_in++;
        } else if (!strcmp(kw, "out")) {
            long long n;
            if (c->n_out >= NC_MAX_IO || fscanf(fp, "%lld", &n) != 1 ||
                !(c->ref[c->n_out] = nc_doubles(fp, n)))
                return -1;
            c->nref[c->n_out++] = n;
        } else {
            return -1;
        }
    }
}

static double nc_at(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_F32: return (double)((const float *)t->data)[i];
    case KILN_I64: return (double)((const int64_t *)t->data)[i];
    case KILN_I32: return (double)((const int32_t *)t->data)[i];
    case KILN_BOOL: return (double)((const uint8_t *)t->data)[i];
    default: return ((const double *)t->data)[i];
    }
}

static double nc_worst = 0;
static char nc_worst_at[160] = "";

/* Case c on backend with passes (NULL: the defaults); ref names the
 * reference in the TAP line ("numpy.matmul"). */
static void nc_run(const nc_case *c, const char *backend, const char *passes,
                   const char *ref)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_kg_text(c->text, backend, passes, &err);
    if (!f) {
        ok(0, "%s on %s: compile: %s", c->label, backend, err.message);
        return;
    }
    kiln_tensor out[NC_MAX_IO];
    if (kiln_function_call(f, c->in, out, &err)) {
        ok(0, "%s on %s: call: %s", c->label, backend, err.message);
        kiln_function_free(f);
        return;
    }
    int good = kiln_function_n_outputs(f) == c->n_out;
    int all_f32 = c->n_in > 0;   /* f32 in, f32 out */
    for (int i = 0; i < c->n_in; i++)
        all_f32 = all_f32 && c->in[i].dtype == KILN_F32;
    char why[200] = "";
    for (int j = 0; good && j < c->n_out; j++) {
        int64_t n = 1;
        for (int d = 0; d < out[j].rank; d++)
            n *= out[j].shape[d];
        if (n != c->nref[j] || (all_f32 && out[j].dtype != KILN_F32)) {
            good = 0;
            snprintf(why, sizeof why, "output %d has %lld elements of "
                     "dtype %d, NumPy %lld", j, (long long)n,
                     (int)out[j].dtype, (long long)c->nref[j]);
            break;
        }
        double scale = 1;
        for (int64_t i = 0; i < n; i++)
            scale = fmax(scale, fabs(c->ref[j][i]));
        for (int64_t i = 0; i < n; i++) {
            double e = fabs(nc_at(&out[j], i) - c->ref[j][i]) / scale;
            if (!(e <= c->rtol)) {
                good = 0;
                snprintf(why, sizeof why, "output %d [%lld]: %.17g, NumPy "
                         "%.17g", j, (long long)i, nc_at(&out[j], i),
                         c->ref[j][i]);
                break;
            }
            if (e > nc_worst) {
                nc_worst = e;
                snprintf(nc_worst_at, sizeof nc_worst_at, "%s output %d on "
                         "%s", c->label, j, backend);
            }
        }
    }
    ok(good, "%s on %s%s%s: values against %s%s%s", c->label, backend,
       passes ? " passes=" : "", passes ? passes : "", ref,
       good ? "" : ": ", why);
    kiln_function_free(f);
}

static void nc_value_tests(const char *script, const char *ref,
                           int min_cases, const char **bk, int nbk)
{
    const char *top = getenv("KILN_SRCDIR");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/%s'",
             top ? top : "..", script);
    FILE *fp = access("/usr/bin/python3", X_OK) == 0 ? popen(cmd, "r") : NULL;
    if (!fp) {
        ok(1, "values against NumPy # SKIP no /usr/bin/python3");
        return;
    }
    int c0 = fgetc(fp);
    if (c0 == 'S') {
        char why[256] = "";
        if (!fgets(why, sizeof why, fp))
            why[0] = 0;
        why[strcspn(why, "\n")] = 0;
        ok(1, "values against NumPy # S%s", why);
        pclose(fp);
        return;
    }
    if (c0 != EOF)
        ungetc(c0, fp);
    nc_case c;
    int n = 0, rc;
    while ((rc = nc_read(fp, &c)) == 1) {
        for (int b = 0; b < nbk; b++)
            nc_run(&c, bk[b], NULL, ref);
        nc_run(&c, "interp", "none", ref);
        nc_free(&c);
        n++;
    }
    nc_free(&c);
    int st = pclose(fp);
    diag("largest error relative to max(1, max|ref|): %.3g at %s", nc_worst,
         nc_worst_at);
    ok(rc == 0 && st == 0 && n >= min_cases, "read %d cases from %s (exit "
       "status %d)", n, script, st);
}

#endif
