/*
 * test_posteriordb.c — the posteriordb corpus (examples/posteriordb/):
 * for each posterior named in examples/posteriordb/CORPUS ("DATA-MODEL"),
 * the model MODEL.kg with the data DATA.json, made into a kiln_model under
 * every backend found and under the default policy (backend NULL).
 *
 * Always: the model is made, its log density is finite at a fixed
 * point, its gradient agrees with central finite differences on a few
 * coordinates, and every backend agrees with the interpreter.
 *
 * Against Stan, when examples/posteriordb/references/NAME.json exists
 * (tools/stan-references.R, rstan: {"points": [{"unc": [...], "lp": x, "grad":
 * [...], "constrained": {"sigma": x, "alpha[1]": x, ...}}, ...], ...}):
 * at each point the gradient (Jacobian on) agrees to 1e-8 relative,
 * elementwise against max(1, |g|); the log density's differences between
 * points agree to 1e-9 of the scale max(1, |lp|) (Stan's log_prob drops
 * the constants of `~` statements, so only differences compare); the
 * constrained values kiln computes (parameters and transformed
 * parameters, named as posteriordb's draws) agree with Stan's to 1e-10
 * relative.  A reference with "propto": 0 at its top level keeps every
 * constant, and its lp is compared as it is (1e-11).  Without a
 * reference file the comparison is a SKIP line saying so.
 *
 * ODE posteriors: Stan's solution is exact only to the Stan program's
 * solver tolerances, and kiln's solver is another one.  NAME.tol.json
 * beside the reference (tests/posteriordb_ref.py --tolerances: {"points":
 * [{"tol_grad": [P], "tol_lp": x, "tol_con": {"z[1,1]": x, ...}}, ...]})
 * bounds what one solve at those tolerances may change at each point
 * (derived in posteriordb_ref.py, ode_bounds); two solves (kiln's and the
 * reference's) are allowed twice that on top of the tolerances above.
 * Errors are reported as a fraction of what is allowed.
 *
 * $KILN_POSTERIORDB_REFDIR, when set, names another directory of files
 * in that form (tests/test_posteriordb_py.sh: tests/posteriordb_ref.py's
 * independent NumPy densities).
 *
 * Data files are looked for in examples/posteriordb/data/, then
 * examples/data/posteriordb/, then ../shared/posteriordb/data/ next to the
 * source tree (diamonds.json, 2.3 MB, is not copied); a posterior whose
 * data is in none of them is a SKIP.
 *
 * The reference files are read with kiln_json_data_parse, which takes an
 * object of numeric variables: each point object is cut out of the
 * "points" array, its "constrained" object parsed on its own, and its
 * other members that are not numbers (strings, objects, bools) ignored.
 */
#include "tap.h"
#include "found_backends.h"
#include "slurp.h"

#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/kiln.h>
#include <kiln/model.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_POINTS 16

static const char *srcdir;

static int exists(const char *path)
{
    return access(path, R_OK) == 0;
}

/* ---- reference files ---------------------------------------------------- */

/* The closing quote of the JSON string opening at s[i] (or n). */
static size_t string_end(const char *s, size_t n, size_t i)
{
    for (i++; i < n && s[i] != '"'; i++)
        if (s[i] == '\\')
            i++;
    return i;
}

/* The end (one past) of the JSON value starting at s[i] when it is an
 * object or array (strings inside skipped), or 0 when unbalanced. */
static size_t value_end(const char *s, size_t n, size_t i)
{
    int depth = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            i = string_end(s, n, i);
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0)
                return i + 1;
        }
    }
    return 0;
}

/* The position of `"key"` at depth 1 of the object s[a..b), or 0. */
static size_t find_key(const char *s, size_t a, size_t b, const char *key)
{
    size_t kl = strlen(key);
    int depth = 0;
    for (size_t i = a; i < b; i++) {
        char c = s[i];
        if (c == '"') {
            if (depth == 1 && i + kl + 1 < b &&
                strncmp(s + i + 1, key, kl) == 0 && s[i + kl + 1] == '"')
                return i;
            i = string_end(s, b, i);
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return 0;
}

typedef struct {
    int n;                       /* points */
    int all_constants;           /* "propto": 0 at the top: lp is absolute */
    kiln_json_data *pt[MAX_POINTS];   /* unc, lp, grad */
    kiln_json_data *con[MAX_POINTS];  /* constrained, or NULL */
} reference;

static void ref_free(reference *r)
{
    for (int i = 0; i < r->n; i++) {
        kiln_json_data_free(r->pt[i]);
        kiln_json_data_free(r->con[i]);
    }
    r->n = 0;
}

/* The value start after `"key"` at k: past the colon and blanks. */
static size_t after_colon(const char *s, size_t b, size_t k)
{
    size_t i = string_end(s, b, k) + 1;
    while (i < b && (s[i] == ' ' || s[i] == ':' || s[i] == '\n' ||
                     s[i] == '\t' || s[i] == '\r'))
        i++;
    return i;
}

/* In the object text pt[0..len), replace each member value that is an
 * object, a string, true, false or null by 0, so that
 * kiln_json_data_parse takes the rest; returns the new length. */
static size_t zero_non_numeric(char *pt, size_t len)
{
    size_t i = 1;
    while (i < len) {
        while (i < len && pt[i] != '"' && pt[i] != '}')
            i++;
        if (i >= len || pt[i] == '}')
            break;
        size_t v = after_colon(pt, len, i), ve = v;
        if (pt[v] == '{' || pt[v] == '[')
            ve = value_end(pt, len, v);
        else if (pt[v] == '"')
            ve = string_end(pt, len, v) + 1;
        else
            while (ve < len && pt[ve] != ',' && pt[ve] != '}')
                ve++;
        if (!ve || ve > len)
            break;
        if (pt[v] == '{' || pt[v] == '"' || pt[v] == 't' || pt[v] == 'f' ||
            pt[v] == 'n') {
            pt[v] = '0';
            memmove(pt + v + 1, pt + ve, len - ve + 1);
            len -= ve - v - 1;
            ve = v + 1;
        }
        i = ve;
    }
    return len;
}

static int ref_read(const char *path, reference *r, char *why, size_t wsz)
{
    size_t n;
    char *s = slurp(path, &n);
    kiln_err e = {0, ""};
    memset(r, 0, sizeof *r);
    if (!s) {
        snprintf(why, wsz, "%.900s: cannot read", path);
        return -1;
    }
    size_t pk = find_key(s, 0, n, "propto");
    if (pk)
        r->all_constants = strtod(s + after_colon(s, n, pk), NULL) == 0;
    size_t k = find_key(s, 0, n, "points");
    size_t i = k ? after_colon(s, n, k) : 0;
    size_t end = (k && s[i] == '[') ? value_end(s, n, i) : 0;
    if (!end) {
        snprintf(why, wsz, "%.900s: no \"points\" array", path);
        free(s);
        return -1;
    }
    for (i++; i < end && r->n < MAX_POINTS; i++) {
        if (s[i] != '{')
            continue;
        size_t oe = value_end(s, end, i);
        if (!oe)
            break;
        /* the point's text with every member that is not a number or
         * an array (the "constrained" object, a string, a bool) made 0 */
        size_t len = oe - i;
        char *pt = malloc(len + 2);
        memcpy(pt, s + i, len);
        pt[len] = '\0';
        size_t ck = find_key(pt, 0, len, "constrained");
        if (!ck)                 /* a NAME.tol.json point */
            ck = find_key(pt, 0, len, "tol_con");
        if (ck) {
            size_t cv = after_colon(pt, len, ck);
            size_t ce = pt[cv] == '{' ? value_end(pt, len, cv) : 0;
            if (ce) {
                r->con[r->n] = kiln_json_data_parse(pt + cv, ce - cv,
                                                    path, &e);
                if (!r->con[r->n])
                    diag("%s: constrained of point %d: %s", path, r->n,
                         e.message);
            }
        }
        len = zero_non_numeric(pt, len);
        r->pt[r->n] = kiln_json_data_parse(pt, len, path, &e);
        free(pt);
        if (!r->pt[r->n]) {
            snprintf(why, wsz, "point %d: %s", r->n, e.message);
            kiln_json_data_free(r->con[r->n]);
            r->con[r->n] = NULL;
            free(s);
            ref_free(r);
            return -1;
        }
        r->n++;
        i = oe - 1;
    }
    free(s);
    return 0;
}

/* A rank-1 f64 variable of a point with exactly n entries. */
static int get_vec(const kiln_json_data *d, const char *name, int n,
                   double *out, kiln_err *e)
{
    int64_t dim = n;
    kiln_tensor t;
    if (n == 0)
        return 0;
    int rc = kiln_json_data_get(d, name, KILN_F64, 1, &dim, &t, e);
    if (rc)
        return rc;
    memcpy(out, t.data, (size_t)n * sizeof *out);
    free(t.data);
    return 0;
}

static int get_scalar(const kiln_json_data *d, const char *name, double *out,
                      kiln_err *e)
{
    kiln_tensor t;
    int rc = kiln_json_data_get(d, name, KILN_F64, 0, NULL, &t, e);
    if (rc)
        return rc;
    *out = ((double *)t.data)[0];
    free(t.data);
    return 0;
}

/* ---- the checks ------------------------------------------------------- */

static kiln_model *make(const char *kg, const char *data, const char *be,
                        kiln_err *e)
{
    kiln_graph *g = kiln_parse_file(kg, e);
    if (!g)
        return NULL;
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = be;
    o.quiet = 1;
    kiln_model *m = kiln_model_new(g, NULL, data, &o, NULL, e);
    kiln_graph_free(g);
    return m;
}

/* Compare kiln's constrained values (parameters and tps) at unc with the
 * reference's "constrained" object, whose members are single values
 * named as posteriordb's draws: "sigma", "alpha[3]", "z[2,1]" (kiln's
 * "alpha.3", "z.2.1"); returns the largest error as a fraction of the
 * allowed, 1e-10 max(1, |value|) plus twice tcon's bound for that name
 * (an ODE solution's, NAME.tol.json; tcon may be NULL), and counts the
 * values compared in *nc (names the reference lacks are not compared). */
static double check_constrained(const kiln_model *m, const double *unc,
                                const kiln_json_data *con,
                                const kiln_json_data *tcon, int *nc)
{
    int np = kiln_model_n_params(m, 1, 0);
    double *th = malloc((size_t)(np ? np : 1) * sizeof *th);
    kiln_err e;
    double worst = 0;
    *nc = 0;
    if (kiln_model_constrain(m, 1, 0, unc, th, &e) != 0) {
        diag("constrain: %s", e.message);
        free(th);
        return INFINITY;
    }
    const char *p = kiln_model_param_names(m, 1, 0);
    for (int i = 0; i < np && p && *p; i++) {
        size_t len = strcspn(p, ","), k = 0;
        char key[256];
        int open = 0;
        for (size_t j = 0; j < len && k + 2 < sizeof key; j++) {
            if (p[j] == '.') {
                key[k++] = open ? ',' : '[';
                open = 1;
            } else {
                key[k++] = p[j];
            }
        }
        if (open)
            key[k++] = ']';
        key[k] = '\0';
        double s;
        if (kiln_json_data_has(con, key) &&
            get_scalar(con, key, &s, &e) == 0) {
            double b = 0;
            if (tcon && kiln_json_data_has(tcon, key))
                get_scalar(tcon, key, &b, &e);
            double d = fabs(th[i] - s) / (1e-10 * fmax(1, fabs(s)) + 2 * b);
            if (!(d <= worst))
                worst = d;
            (*nc)++;
        }
        p += len + (p[len] == ',');
    }
    free(th);
    return worst;
}

static double unc_point(int i)
{
    return 0.3 * sin(1.7 * i + 0.5);
}

/* lp and gradient at u; returns 0 on success */
static int eval(const kiln_model *m, const double *u, double *lp,
                double *g)
{
    kiln_err e;
    if (kiln_model_log_density(m, 1, u, lp, g, &e) != 0) {
        diag("log_density: %s", e.message);
        return -1;
    }
    return 0;
}

static void check_posterior(const char *name, const char **bk, int nb)
{
    char model[256], dname[256], kg[4096], data[4096], refp[4096];
    const char *dash = strchr(name, '-');
    if (!dash || (size_t)(dash - name) >= sizeof dname ||
        strlen(dash + 1) >= sizeof model) {
        ok(0, "%s: a CORPUS line is DATA-MODEL", name);
        return;
    }
    memcpy(dname, name, (size_t)(dash - name));
    dname[dash - name] = '\0';
    snprintf(model, sizeof model, "%s", dash + 1);
    snprintf(kg, sizeof kg, "%s/examples/posteriordb/%s.kg", srcdir, model);
    static const char *dirs[] = {"examples/posteriordb/data",
                                 "examples/data/posteriordb",
                                 "../shared/posteriordb/data"};
    data[0] = '\0';
    for (int k = 0; k < 3 && !data[0]; k++) {
        snprintf(data, sizeof data, "%s/%s/%s.json", srcdir, dirs[k], dname);
        if (!exists(data))
            data[0] = '\0';
    }
    if (!data[0]) {
        ok(1, "%s # SKIP data %s.json not found (not copied into the "
           "project: see examples/posteriordb/README.md)", name, dname);
        return;
    }
    const char *refdir = getenv("KILN_POSTERIORDB_REFDIR");
    const char *who = refdir && *refdir ? "the reference" : "Stan";
    if (refdir && *refdir)
        snprintf(refp, sizeof refp, "%s/%s.json", refdir, name);
    else
        snprintf(refp, sizeof refp,
                 "%s/examples/posteriordb/references/%s.json", srcdir, name);
    reference ref, tol;
    char why[1024] = "", tolp[4200];
    int have_ref = exists(refp), have_tol = 0;
    if (have_ref && ref_read(refp, &ref, why, sizeof why) != 0) {
        ok(0, "%s: reference %s read", name, refp);
        diag("%s", why);
        have_ref = 0;
    }
    /* an ODE posterior's bounds (NAME.tol.json beside NAME.json) */
    snprintf(tolp, sizeof tolp, "%.*s.tol.json", (int)(strlen(refp) - 5),
             refp);
    if (have_ref && exists(tolp)) {
        have_tol = ref_read(tolp, &tol, why, sizeof why) == 0;
        if (!ok(have_tol && tol.n == ref.n, "%s: bounds %s read, %d points",
                name, tolp, ref.n)) {
            diag("%s", why);
            if (have_tol)
                ref_free(&tol);
            have_tol = 0;
        }
    }

    int n = -1;
    double *u = NULL, *g = NULL, *g0 = NULL, *gp = NULL;
    double lp0 = 0;
    double ref_lp0 = 0, kiln_lp0 = 0, tlp0 = 0;
    for (int b = 0; b <= nb; b++) {
        const char *be = b < nb ? bk[b] : NULL;
        const char *bn = be ? be : "default policy";
        kiln_err e;
        kiln_model *m = make(kg, data, be, &e);
        if (!ok(m != NULL, "%s [%s]: model made", name, bn)) {
            diag("%s", e.message);
            continue;
        }
        if (n < 0) {
            n = kiln_model_n_unc(m);
            size_t sz = (size_t)(n ? n : 1) * sizeof(double);
            u = malloc(sz);
            g = malloc(sz);
            g0 = malloc(sz);
            gp = malloc(sz);
            for (int i = 0; i < n; i++)
                u[i] = unc_point(i);
        } else if (!ok(kiln_model_n_unc(m) == n, "%s [%s]: %d unconstrained",
                       name, bn, n)) {
            kiln_model_free(m);
            continue;
        }
        double lp;
        if (eval(m, u, &lp, g) != 0 || !ok(isfinite(lp),
                                           "%s [%s]: log density finite "
                                           "(%.17g)", name, bn, lp)) {
            kiln_model_free(m);
            continue;
        }
        /* An ODE posterior solved at loose tolerances (lotka_volterra's
         * rtol 1e-5): each solve may move the log density by up to its
         * NAME.tol.json tol_lp, so central differences over h = 1e-5 carry
         * noise of tol_lp / h and say nothing; the gradient is checked
         * against Stan's within those bounds below, and the ODE op's own
         * gradient against differences at tight tolerances in
         * tests/test_ode_op.c. */
        double ode_lp_noise = 0;
        if (have_tol) {
            kiln_err te;
            if (get_scalar(tol.pt[0], "tol_lp", &ode_lp_noise, &te) != 0)
                ode_lp_noise = 0;
        }
        if (b == 0 && ode_lp_noise > 1e-8) {
            lp0 = lp;
            memcpy(g0, g, (size_t)n * sizeof *g);
            ok(1, "%s [%s] # SKIP central differences: one ODE solve may "
               "move the log density by %.2g (NAME.tol.json), so their noise "
               "is that over the step", name, bn, ode_lp_noise);
        } else if (b == 0) {
            lp0 = lp;
            memcpy(g0, g, (size_t)n * sizeof *g);
            /* finite differences on a few coordinates */
            int idx[6] = {0, n - 1, n / 2, n / 3, 1, n - 2};
            double worst = 0;
            int bad = 0;
            for (int k = 0; k < 6; k++) {
                int j = idx[k];
                if (j < 0 || j >= n)
                    continue;
                double h = 1e-5 * fmax(1, fabs(u[j])), lpp, lpm, keep = u[j];
                u[j] = keep + h;
                eval(m, u, &lpp, NULL);
                u[j] = keep - h;
                eval(m, u, &lpm, NULL);
                u[j] = keep;
                double fd = (lpp - lpm) / (2 * h);
                double tol = 1e-6 * fmax(1, fabs(g[j])) +
                             1e-12 * fmax(1, fabs(lp)) / h;
                double d = fabs(fd - g[j]);
                if (!(d <= tol))
                    bad = 1, diag("coordinate %d: fd %.17g, grad %.17g", j,
                                  fd, g[j]);
                if (d / fmax(1, fabs(g[j])) > worst)
                    worst = d / fmax(1, fabs(g[j]));
            }
            ok(!bad, "%s [%s]: gradient agrees with central differences "
               "(largest error %.2g relative)", name, bn, worst);
        } else {
            double worst = fabs(lp - lp0) / fmax(1, fabs(lp0));
            for (int i = 0; i < n; i++) {
                double d = fabs(g[i] - g0[i]) / fmax(1, fabs(g0[i]));
                if (!(d <= worst))
                    worst = d;
            }
            ok(worst <= 1e-11, "%s [%s]: log density and gradient agree with "
               "interp (%.2g)", name, bn, worst);
        }

        if (!have_ref) {
            kiln_model_free(m);
            continue;
        }
        /* against Stan */
        double wg = 0, wlp = 0, wc = 0, wabs = 0;
        int fail = 0, ncon = 0;
        for (int p = 0; p < ref.n; p++) {
            double slp;
            double *su = gp;   /* the point, then Stan's gradient into g */
            if (get_vec(ref.pt[p], "unc", n, su, &e) != 0 ||
                get_scalar(ref.pt[p], "lp", &slp, &e) != 0) {
                diag("point %d: %s", p, e.message);
                fail = 1;
                break;
            }
            double klp, tlp = 0;
            double *kg_ = malloc((size_t)(n ? n : 1) * sizeof *kg_);
            double *tg = calloc((size_t)(n ? n : 1), sizeof *tg);
            if (eval(m, su, &klp, kg_) != 0 ||
                get_vec(ref.pt[p], "grad", n, g, &e) != 0 ||
                (have_tol && (get_vec(tol.pt[p], "tol_grad", n, tg, &e) != 0 ||
                              get_scalar(tol.pt[p], "tol_lp", &tlp, &e) != 0))) {
                diag("point %d: %s", p, e.message);
                free(kg_);
                free(tg);
                fail = 1;
                break;
            }
            for (int i = 0; i < n; i++) {
                double d = fabs(kg_[i] - g[i]) /
                           (1e-8 * fmax(1, fabs(g[i])) + 2 * tg[i]);
                if (!(d <= wg))
                    wg = d;
            }
            if (ref.all_constants) {
                double d = fabs(klp - slp) /
                           (1e-11 * fmax(1, fabs(slp)) + 2 * tlp);
                if (!(d <= wabs))
                    wabs = d;
            }
            if (p == 0) {
                ref_lp0 = slp;
                kiln_lp0 = klp;
                tlp0 = tlp;
            } else {
                double scale = fmax(1, fmax(fabs(ref_lp0), fabs(slp)));
                double d = fabs((klp - kiln_lp0) - (slp - ref_lp0)) /
                           (1e-9 * scale + 2 * (tlp0 + tlp));
                if (!(d <= wlp))
                    wlp = d;
            }
            if (ref.con[p]) {
                int nc;
                double d = check_constrained(m, su, ref.con[p],
                                             have_tol ? tol.con[p] : NULL,
                                             &nc);
                if (!(d <= wc))
                    wc = d;
                ncon += nc;
            }
            free(kg_);
            free(tg);
        }
        const char *how = have_tol ? " (with NAME.tol.json's bounds)" : "";
        ok(!fail && wg <= 1, "%s [%s]: gradient agrees with %s at %d "
           "points (largest error %.2g of the allowed)%s", name, bn, who,
           ref.n, wg, how);
        if (ref.n > 1)
            ok(!fail && wlp <= 1, "%s [%s]: log density differences agree "
               "with %s (largest error %.2g of the allowed)", name, bn, who,
               wlp);
        else
            ok(1, "%s [%s]: log density differences # SKIP one point", name,
               bn);
        if (ncon)
            ok(wc <= 1, "%s [%s]: %d constrained values agree with "
               "%s (largest error %.2g of the allowed)", name, bn, ncon,
               who, wc);
        if (ref.all_constants)
            ok(!fail && wabs <= 1, "%s [%s]: log density with every "
               "constant agrees with %s (largest error %.2g of the "
               "allowed)", name, bn, who, wabs);
        kiln_model_free(m);
    }
    if (!have_ref && !why[0])
        ok(1, "%s: against the reference # SKIP no %s", name, refp);
    if (have_ref)
        ref_free(&ref);
    if (have_tol)
        ref_free(&tol);
    free(u);
    free(g);
    free(g0);
    free(gp);
}

int main(int argc, char **argv)
{
    const char *bk[3];
    int nb = found_backends(bk);
    char path[4096], line[512];
    srcdir = getenv("KILN_SRCDIR");
    if (!srcdir || !*srcdir)
        srcdir = ".";
    snprintf(path, sizeof path, "%s/examples/posteriordb/CORPUS", srcdir);
    FILE *f = fopen(path, "r");
    if (!ok(f != NULL, "read %s", path))
        return done_testing();
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        /* optional filter: posterior names on the command line */
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], line) == 0;
        if (want)
            check_posterior(line, bk, nb);
    }
    fclose(f);
    return done_testing();
}
