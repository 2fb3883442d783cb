/*
 * graph_cases.h — test cases of whole .kg graphs whose reference values
 * NumPy / SciPy compute at test time (include once, after tap.h and
 * compile_text.h):
 *
 *   graph_value_tests(script, min_cases, bk, nbk, none_everywhere)
 *
 * runs /usr/bin/python3 tests/SCRIPT (under $KILN_SRCDIR), which prints
 *
 *   case LABEL RTOL
 *   graph                    then the lines of a .kg graph body, then
 *   end
 *   in NAME [DTYPE] RANK d1 .. dR v1 .. vN   inputs in declaration order
 *                                            (DTYPE f64 (default), f32,
 *                                            i64)
 *   out N v1 .. vN                           the outputs, in C order
 *
 * and runs each graph under every backend in bk[] with the rewrite
 * passes on, and with none (on every backend when none_everywhere, else
 * on interp).  A value passes when |kiln - ref| <= RTOL * max(1,
 * max|ref|) over the output; NaN matches NaN, an infinity itself.  When
 * an input is f32, an f64 output fails (f32 must stay f32).  "SKIP
 * reason" alone from the script skips; the largest error is printed.
 */
#ifndef KILN_TESTS_GRAPH_CASES_H
#define KILN_TESTS_GRAPH_CASES_H

#include <kiln/graph.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GC_MAX_IO 16

typedef struct vcase {
    char label[96];
    double rtol;
    char *text;
    int n_in, n_out, has_f32;
    kiln_tensor in[GC_MAX_IO];
    double *ref[GC_MAX_IO];
    int64_t nref[GC_MAX_IO];
} vcase;

static void vcase_free(vcase *c)
{
    free(c->text);
    for (int i = 0; i < c->n_in; i++)
        free(c->in[i].data);
    for (int i = 0; i < c->n_out; i++)
        free(c->ref[i]);
    memset(c, 0, sizeof *c);
}

static double *read_doubles(FILE *fp, int64_t n)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; v && i < n; i++)
        if (fscanf(fp, "%lf", &v[i]) != 1) {
            free(v);
            return NULL;
        }
    return v;
}

/* n doubles as dtype dt (f64, f32, i64) in a new buffer */
static void *as_dtype(const double *v, int64_t n, kiln_dtype dt)
{
    size_t w = dt == KILN_F32 ? 4 : 8;
    void *p = malloc(w * (size_t)(n ? n : 1));
    for (int64_t i = 0; p && i < n; i++) {
        if (dt == KILN_F32)
            ((float *)p)[i] = (float)v[i];
        else if (dt == KILN_I64)
            ((int64_t *)p)[i] = (int64_t)v[i];
        else
            ((double *)p)[i] = v[i];
    }
    return p;
}

static double elem(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_F32: return ((const float *)t->data)[i];
    case KILN_I64: return (double)((const int64_t *)t->data)[i];
    case KILN_I32: return ((const int32_t *)t->data)[i];
    case KILN_BOOL: return ((const unsigned char *)t->data)[i];
    default: return ((const double *)t->data)[i];
    }
}

static int read_in(FILE *fp, vcase *c)
{
    char nm[64], dts[8];
    int rank;
    kiln_tensor *t = &c->in[c->n_in];
    if (c->n_in >= GC_MAX_IO || fscanf(fp, "%63s %7s", nm, dts) != 2)
        return -1;
    /* the dtype is optional (f64) */
    kiln_dtype dt = !strcmp(dts, "f32")   ? KILN_F32
                    : !strcmp(dts, "i64") ? KILN_I64
                                          : KILN_F64;
    if ((dts[0] == 'f' || dts[0] == 'i') ? fscanf(fp, "%d", &rank) != 1
                                         : sscanf(dts, "%d", &rank) != 1)
        return -1;
    if (rank < 0 || rank > KILN_MAX_RANK)
        return -1;
    c->has_f32 |= dt == KILN_F32;
    int64_t n = 1;
    t->dtype = dt;
    t->rank = rank;
    for (int d = 0; d < rank; d++) {
        long long x;
        if (fscanf(fp, "%lld", &x) != 1)
            return -1;
        t->shape[d] = x;
        n *= x;
    }
    double *v = read_doubles(fp, n);
    if (!v)
        return -1;
    t->data = as_dtype(v, n, dt);
    free(v);
    c->n_in++;
    return 0;
}

/* 1 read, 0 at the end, -1 on a format error */
static int read_vcase(FILE *fp, vcase *c)
{
    char kw[16], line[512];
    memset(c, 0, sizeof *c);
    if (fscanf(fp, "%15s", kw) != 1)
        return 0;
    if (strcmp(kw, "case") || fscanf(fp, "%95s %lf ", c->label, &c->rtol) != 2
        || !fgets(line, sizeof line, fp) || strcmp(line, "graph\n"))
        return -1;
    size_t cap = 4096, len;
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
            if (read_in(fp, c))
                return -1;
        } else if (!strcmp(kw, "out")) {
            long long n;
            if (c->n_out >= GC_MAX_IO || fscanf(fp, "%lld", &n) != 1 ||
                !(c->ref[c->n_out] = read_doubles(fp, n)))
                return -1;
            c->nref[c->n_out++] = n;
        } else {
            return -1;
        }
    }
}

static double gcase_worst = 0;
static char gcase_worst_at[200] = "";

/* why[] gets the first mismatch of output j; 1 when it matches */
static int compare(const vcase *c, int j, const kiln_tensor *o,
                   const char *backend, char *why, size_t nwhy)
{
    int64_t n = 1;
    for (int d = 0; d < o->rank; d++)
        n *= o->shape[d];
    if (n != c->nref[j]) {
        snprintf(why, nwhy, "output %d has %lld elements, NumPy %lld", j,
                 (long long)n, (long long)c->nref[j]);
        return 0;
    }
    if (c->has_f32 && o->dtype == KILN_F64) {
        snprintf(why, nwhy, "output %d is f64 for f32 inputs", j);
        return 0;
    }
    double scale = 1;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(c->ref[j][i]))
            scale = fmax(scale, fabs(c->ref[j][i]));
    for (int64_t i = 0; i < n; i++) {
        double v = elem(o, i), r = c->ref[j][i];
        double e = isnan(r)   ? (isnan(v) ? 0 : INFINITY)
                   : isinf(r) ? (v == r ? 0 : INFINITY)
                              : fabs(v - r) / scale;
        if (!(e <= c->rtol)) {
            snprintf(why, nwhy, "output %d [%lld]: %.9g, NumPy %.9g", j,
                     (long long)i, v, r);
            return 0;
        }
        if (e > gcase_worst) {
            gcase_worst = e;
            snprintf(gcase_worst_at, sizeof gcase_worst_at, "%s output %d on %s",
                     c->label, j, backend);
        }
    }
    return 1;
}

static void run_vcase(const vcase *c, const char *backend, const char *passes)
{
    kiln_err err = {0, ""};
    kiln_function *f = compile_kg_text(c->text, backend, passes, &err);
    if (!f) {
        ok(0, "%s on %s: compile: %s", c->label, backend, err.message);
        return;
    }
    kiln_tensor out[GC_MAX_IO];
    if (kiln_function_call(f, c->in, out, &err)) {
        ok(0, "%s on %s: call: %s", c->label, backend, err.message);
        kiln_function_free(f);
        return;
    }
    int good = kiln_function_n_outputs(f) == c->n_out;
    char why[240] = "";
    for (int j = 0; good && j < c->n_out; j++)
        good = compare(c, j, &out[j], backend, why, sizeof why);
    ok(good, "%s on %s passes=%s: values against NumPy/SciPy%s%s", c->label,
       backend, passes ? passes : "default", good ? "" : ": ", why);
    kiln_function_free(f);
}

static void graph_value_tests(const char *script, int min_cases,
                              const char **bk, int nbk, int none_everywhere)
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
    vcase c;
    int n = 0, rc;
    while ((rc = read_vcase(fp, &c)) == 1) {
        for (int b = 0; b < nbk; b++) {
            run_vcase(&c, bk[b], NULL);
            if (none_everywhere)
                run_vcase(&c, bk[b], "none");
        }
        if (!none_everywhere)
            run_vcase(&c, "interp", "none");
        vcase_free(&c);
        n++;
    }
    vcase_free(&c);
    int st = pclose(fp);
    diag("largest error relative to max(1, max|ref|): %.3g at %s",
         gcase_worst, gcase_worst_at);
    ok(rc == 0 && st == 0 && n >= min_cases, "read %d cases from %s (exit "
       "status %d)", n, script, st);
}

#endif
