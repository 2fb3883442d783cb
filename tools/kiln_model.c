/*
 * kiln_model.c — `kiln model`: the log density and gradient a sampler
 * sees (<kiln/model.h>), and the CLI's helpers for names the user got
 * wrong: a --backend that is not there, an unknown -i input (did you
 * mean), the sizes --random-inputs takes from the data.  docs/kiln.1.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/model.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_cli.h"
#include "ir.h"        /* a parameter's bounds (kiln_param_rec) */
#include "loader.h"    /* kiln_loader_get, kiln_loader_names */
#include "suggest.h"   /* did you mean */
#include "excerpt.h"   /* names from data files, escaped */
#include "trace.h"     /* --trace-nonfinite */
#include "jsondata.h"  /* kiln_json_data_bind_graph */

/* --check-grad's tolerance: kiln run's (tools/kiln.c, docs/kiln.1) */
#define CHECK_GRAD_TOL 1e-4

/* ---- helpers shared with kiln run --------------------------------------- */

int kiln_cli_require_backend(const char *name, int quiet)
{
    kiln_err err = {0, ""};
    char *diag = NULL;
    size_t dlen = 0;
    FILE *d = open_memstream(&diag, &dlen);
    const kiln_backend *b = kiln_loader_get(name, NULL, d, d == NULL, &err);
    if (d)
        fclose(d);
    if (b) {
        /* found after refusing a file elsewhere: say so, as a compile
         * would have */
        if (diag && diag[0] && !quiet)
            fputs(diag, stderr);
        free(diag);
        return 0;
    }
    char names[512], hint[96];
    kiln_loader_names(NULL, names, sizeof names);
    kiln_suggestion sg;
    kiln_suggest_init(&sg, name, strlen(name));
    /* the list is comma-separated: offer each name (copied) */
    char copy[512];
    snprintf(copy, sizeof copy, "%s", names);
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t;
         t = strtok_r(NULL, ",", &save))
        kiln_suggest_offer(&sg, t);
    kiln_suggest_text(&sg, hint, sizeof hint);
    /* why a file that is there was not loaded: the loader's first line */
    const char *why = "";
    if (diag && diag[0]) {
        char *nl = strchr(diag, '\n');
        if (nl)
            *nl = '\0';
        why = strncmp(diag, "kiln: ", 6) == 0 ? diag + 6 : diag;
    }
    char shown[600];
    size_t k = 0;
    for (const char *c = names; *c && k + 3 < sizeof shown; c++) {
        if (*c == ',')
            shown[k++] = ',', shown[k++] = ' ';
        else
            shown[k++] = *c;
    }
    shown[k] = '\0';
    fprintf(stderr, "kiln: --backend %s: %s%s (available: %s)\n", name,
            why[0] ? why : err.message, hint, shown);
    free(diag);
    return 1;
}

int64_t kiln_cli_data_symbol(const kiln_json_data *d, const char *symbol)
{
    int rank = -1, is_int = 0;
    int64_t shape[KILN_MAX_RANK];
    if (!d || !symbol ||
        kiln_json_data_shape(d, symbol, &rank, shape, &is_int) != 0 ||
        rank != 0 || !is_int)
        return -1;
    kiln_tensor t = {0};
    kiln_err err = {0, ""};
    if (kiln_json_data_get(d, symbol, KILN_I64, 0, NULL, &t, &err) != 0)
        return -1;
    int64_t v = *(const int64_t *)t.data;
    free(t.data);
    return v >= 0 ? v : -1;
}

int kiln_cli_data_missing(const kiln_graph *g, const kiln_json_data *d)
{
    for (int i = 0; g && i < g->n_nodes; i++) {
        const kiln_node *nd = &g->nodes[i];
        if (nd->op != KILN_OP_SHARED || nd->data || nd->promoted ||
            !nd->name)
            continue;
        kiln_tensor t = {0};
        kiln_err err = {0, ""};
        if (kiln_json_data_get(d, nd->name, nd->type.dtype, nd->type.rank,
                               nd->type.dims, &t, &err) == 0) {
            free(t.data);   /* there after all: bound or refused before */
            continue;
        }
        fprintf(stderr, "kiln: --data: shared value '%s': %s\n", nd->name,
                err.message);
        return 1;
    }
    return 0;
}

/* The transform of bounded parameter p, "sigma = 0 + exp(sigma_unc)". */
static void transform_text(const kiln_graph *g, const kiln_param_rec *p,
                           char *buf, size_t size)
{
    char lo[80], hi[80];
    if (p->lower_ref >= 0)
        snprintf(lo, sizeof lo, "%s", g->nodes[p->lower_ref].name);
    else
        snprintf(lo, sizeof lo, "%g", p->lower);
    if (p->upper_ref >= 0)
        snprintf(hi, sizeof hi, "%s", g->nodes[p->upper_ref].name);
    else
        snprintf(hi, sizeof hi, "%g", p->upper);
    int has_lo = p->lower_ref >= 0 || isfinite(p->lower);
    int has_hi = p->upper_ref >= 0 || isfinite(p->upper);
    if (has_lo && has_hi)
        snprintf(buf, size, "%s = %s + (%s - %s) * inv_logit(%s_unc)",
                 p->name, lo, hi, lo, p->name);
    else if (has_lo)
        snprintf(buf, size, "%s = %s + exp(%s_unc)", p->name, lo, p->name);
    else
        snprintf(buf, size, "%s = %s - exp(%s_unc)", p->name, hi, p->name);
}

/* The bounded parameter of g named name (len bytes), or NULL. */
static const kiln_param_rec *bounded_param(const kiln_graph *g,
                                           const char *name, size_t len)
{
    for (int i = 0; g && i < g->n_params; i++) {
        const kiln_param_rec *p = &g->params[i];
        if (p->logjac >= 0 && strlen(p->name) == len &&
            strncmp(p->name, name, len) == 0)
            return p;
    }
    return NULL;
}

void kiln_cli_no_input(const kiln_function *f, const kiln_graph *g,
                       const char *name, size_t len)
{
    const kiln_param_rec *p = bounded_param(g, name, len);
    if (p) {
        char tr[300];
        transform_text(g, p, tr, sizeof tr);
        fprintf(stderr, "kiln: -i %.*s: '%s' is a bounded parameter; its "
                "input is the unconstrained '%s_unc' (%s); give -i "
                "%s_unc=VALUE, or use kiln model, which takes either\n",
                (int)len, name, p->name, p->name, tr, p->name);
        return;
    }
    for (int i = 0; g && i < g->n_nodes; i++) {
        const kiln_node *n = &g->nodes[i];
        if (n->op == KILN_OP_SHARED && n->name && strlen(n->name) == len &&
            strncmp(n->name, name, len) == 0) {
            fprintf(stderr, "kiln: -i %.*s: '%s' is shared data, not an "
                    "input: give it with --data DATA.json (CmdStan JSON) "
                    "or bind it in the model (csv(), npy(), json())\n",
                    (int)len, name, n->name);
            return;
        }
    }
    kiln_suggestion sg;
    char hint[96];
    kiln_suggest_init(&sg, name, len);
    int ni = kiln_function_n_inputs(f);
    for (int k = 0; k < ni; k++)
        kiln_suggest_offer(&sg, kiln_function_input_name(f, k));
    char list[512] = "";
    size_t used = 0;
    for (int k = 0; k < ni && used < sizeof list - 64; k++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                 k ? ", " : "",
                                 kiln_function_input_name(f, k));
    fprintf(stderr, "kiln: -i %.*s: the model has no input of that name%s "
            "(its inputs: %s)\n", len > 64 ? 64 : (int)len, name,
            kiln_suggest_text(&sg, hint, sizeof hint), ni ? list : "none");
}

/* ---- kiln model ---------------------------------------------------------- */

static const char *model_usage =
    "usage: kiln model FILE.kg [--data DATA.json] [-i NAME=VALUE]...\n"
    "                  [--inputs POINT.json] [--random-inputs SEED]\n"
    "                  [--no-jacobian] [--check-grad] [--trace-nonfinite]\n"
    "                  [--backend NAME] [--policy POLICY.yaml] [--json]\n"
    "                  [--quiet]\n"
    "-i NAME=VALUE gives parameter NAME's constrained value (what the\n"
    "model computes with), -i NAME_unc=VALUE its unconstrained value.\n";

/* A parameter as kiln model sees it: its slice of the unconstrained
 * vector and its shape (from the model's names), its record in g. */
typedef struct mparam {
    const char *name;
    const kiln_param_rec *rec;
    int off, numel, rank;
    int64_t shape[KILN_MAX_RANK];
    int given;          /* 0, 1 unconstrained, 2 constrained */
} mparam;

double kiln_cli_uniform(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* v as %.17g into b (32 bytes), NaN always "nan". */
static const char *text_num(char *b, double v)
{
    if (isnan(v))
        return strcpy(b, "nan");
    snprintf(b, 32, "%.17g", v);
    return b;
}

static void json_num(FILE *o, double v)
{
    if (isnan(v))
        fputs("\"nan\"", o);
    else if (isinf(v))
        fputs(v > 0 ? "\"inf\"" : "\"-inf\"", o);
    else
        fprintf(o, "%.17g", v);
}

/* The parameters of g with their slices: names[] are the model's
 * unconstrained names ("alpha.3", "m.2.1", "mu"). */
static int model_params(const kiln_graph *g, char **names, int n,
                        mparam *ps, int np)
{
    int at = 0;
    for (int i = 0; i < np; i++) {
        mparam *p = &ps[i];
        memset(p, 0, sizeof *p);
        p->rec = &g->params[i];
        p->name = p->rec->name;
        p->off = at;
        size_t len = strlen(p->name);
        while (at < n && strncmp(names[at], p->name, len) == 0 &&
               (names[at][len] == '\0' || names[at][len] == '.'))
            at++;
        p->numel = at - p->off;
        /* the shape: the indices of its last name ("m.2.3": 2 x 3) */
        const char *s = p->numel ? names[at - 1] + len : "";
        while (*s == '.' && p->rank < KILN_MAX_RANK) {
            p->shape[p->rank++] = strtoll(s + 1, NULL, 10);
            s = strchr(s + 1, '.');
            if (!s)
                break;
        }
        if (p->numel == 0 && p->rank == 0) {
            /* no elements: the declared rank, every dim unknown as 0 */
            kiln_type ty = g->nodes[p->rec->unc].type;
            p->rank = ty.rank;
        }
    }
    return at == n ? 0 : -1;
}

/* The parameter a -i or --inputs NAME (len bytes) gives, and whether
 * constrained (*constrained 1) or unconstrained: NAME or NAME_unc (the
 * same for a parameter without bounds).  NULL with a message naming the
 * closest name. */
static mparam *model_find(mparam *ps, int np, const char *name, size_t len,
                          const char *where, int *constrained)
{
    for (int i = 0; i < np; i++) {
        size_t l = strlen(ps[i].name);
        if (len == l && strncmp(name, ps[i].name, l) == 0) {
            *constrained = ps[i].rec->logjac >= 0;
            return &ps[i];
        }
        if (len == l + 4 && strncmp(name, ps[i].name, l) == 0 &&
            strncmp(name + l, "_unc", 4) == 0) {
            *constrained = 0;
            return &ps[i];
        }
    }
    kiln_suggestion sg;
    char hint[96], un[4][80];
    int u = 0;
    kiln_suggest_init(&sg, name, len);
    for (int i = 0; i < np; i++) {
        kiln_suggest_offer(&sg, ps[i].name);
        if (ps[i].rec->logjac >= 0 && u < 4) {
            snprintf(un[u], sizeof un[u], "%s_unc", ps[i].name);
            kiln_suggest_offer(&sg, un[u++]);
        }
    }
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < np && used < sizeof list - 64; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                 i ? ", " : "", ps[i].name);
    /* the name may be a key of an --inputs file: escaped (excerpt.h) */
    char shown[EXCERPT_SIZE(EXCERPT_MAX)];
    excerpt(shown, sizeof shown, name, len, EXCERPT_MAX);
    fprintf(stderr, "kiln: %s %s: the model has no parameter of that "
            "name%s (its parameters: %s)\n", where, shown,
            kiln_suggest_text(&sg, hint, sizeof hint), list);
    return NULL;
}

/* Store tensor t (f64, from -i or --inputs) as p's values into dst. */
static int model_store(const mparam *p, const char *shown,
                       const kiln_tensor *t, double *dst)
{
    int64_t n = kiln_shape_numel(t->rank, t->shape);
    int same = t->rank == p->rank;
    for (int k = 0; same && k < p->rank; k++)
        same = t->shape[k] == p->shape[k];
    if (!same || n != p->numel) {
        fprintf(stderr, "kiln: %s: expected %d value%s (shape (", shown,
                p->numel, p->numel == 1 ? "" : "s");
        for (int k = 0; k < p->rank; k++)
            fprintf(stderr, "%s%lld", k ? ", " : "", (long long)p->shape[k]);
        fprintf(stderr, ")), got shape (");
        for (int k = 0; k < t->rank; k++)
            fprintf(stderr, "%s%lld", k ? ", " : "", (long long)t->shape[k]);
        fprintf(stderr, ")\n");
        return -1;
    }
    memcpy(dst, t->data, sizeof *dst * (size_t)n);
    return 0;
}

/* Give parameter p from value text or a data file variable. */
static int model_give(mparam *p, int constrained, const char *shown,
                      const kiln_tensor *t, double *unc, double *theta)
{
    if (p->given) {
        fprintf(stderr, "kiln: parameter '%s' given twice\n", p->name);
        return -1;
    }
    p->given = constrained ? 2 : 1;
    return model_store(p, shown, t, (constrained ? theta : unc) + p->off);
}

/* --trace-nonfinite for kiln model: g (data bound from data_json) at the
 * unconstrained point, the log-Jacobians included when jacobian; the
 * report to out. */
static int model_trace(kiln_graph *g, const char *file, const char *data_json,
                       const kiln_read_options *ropt, const mparam *ps,
                       int np, const double *unc, int jacobian, FILE *out)
{
    kiln_err err = {0, ""};
    int rc = 1, found = 0, n_in = 0, n_roots = 0;
    kiln_json_data *d = NULL;
    if (data_json && *data_json) {
        d = kiln_json_data_read(data_json, ropt, &err);
        if (!d || kiln_json_data_bind_graph(g, d, NULL, &err)) {
            kiln_cli_data_error(data_json, err.message);
            kiln_json_data_free(d);
            return 1;
        }
    }
    kiln_tensor *in = calloc((size_t)g->n_nodes + 1, sizeof *in);
    kiln_value *roots = calloc((size_t)np + 1, sizeof *roots);
    if (!in || !roots)
        goto done;
    for (int v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op != KILN_OP_INPUT)
            continue;
        const mparam *p = NULL;
        for (int i = 0; i < np && !p; i++)
            if (ps[i].rec->unc == v)
                p = &ps[i];
        if (!p) {
            fprintf(stderr, "kiln: --trace-nonfinite: input '%s' is no "
                    "parameter\n", g->nodes[v].name);
            goto done;
        }
        kiln_tensor *t = &in[n_in++];
        t->dtype = g->nodes[v].type.dtype;
        t->rank = p->rank;
        memcpy(t->shape, p->shape, sizeof t->shape);
        if (!(t->data = malloc(sizeof(double) * (size_t)(p->numel + 1))))
            goto done;
        for (int e = 0; e < p->numel; e++) {
            if (t->dtype == KILN_F32)
                ((float *)t->data)[e] = (float)unc[p->off + e];
            else
                ((double *)t->data)[e] = unc[p->off + e];
        }
    }
    for (int i = 0; jacobian && i < np; i++)
        if (ps[i].rec->logjac >= 0)
            roots[n_roots++] = ps[i].rec->logjac;
    if (kiln_trace_nonfinite(g, file, in, roots, n_roots, out, &found,
                             &err)) {
        fprintf(stderr, "kiln: --trace-nonfinite: %s\n", err.message);
        goto done;
    }
    rc = 0;
done:
    for (int k = 0; in && k < n_in; k++)
        free(in[k].data);
    free(in);
    free(roots);
    kiln_json_data_free(d);
    return rc;
}

int kiln_cli_model(int argc, char **argv)
{
    const char *file = NULL, *data_json = NULL, *inputs_json = NULL;
    const char *backend = NULL, *policy_file = NULL;
    int jacobian = 1, check_grad = 0, json = 0, quiet = 0, trace = 0;
    int random = 0, n_assign = 0, status = 1;
    uint64_t seed = 0;
    const char **assign = calloc((size_t)argc + 1, sizeof *assign);
    kiln_read_options ropt;
    memset(&ropt, 0, sizeof ropt);
    ropt.struct_size = sizeof ropt;
    if (!assign) {
        fputs("kiln: out of memory\n", stderr);
        return 1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if ((!strcmp(a, "-i") || !strcmp(a, "--input")) && more)
            assign[n_assign++] = argv[++i];
        else if (!strcmp(a, "--data") && more && !data_json)
            data_json = argv[++i];
        else if (!strcmp(a, "--inputs") && more && !inputs_json)
            inputs_json = argv[++i];
        else if (!strcmp(a, "--random-inputs") && more) {
            const char *sa = argv[++i];
            char *end;
            errno = 0;
            seed = strtoull(sa, &end, 10);
            if (sa[0] < '0' || sa[0] > '9' || *end || errno == ERANGE) {
                fprintf(stderr, "kiln: --random-inputs takes a decimal "
                        "unsigned integer seed below 2^64, got '%.64s'\n", sa);
                free(assign);
                return 2;
            }
            random = 1;
        } else if (!strcmp(a, "--backend") && more)
            backend = argv[++i];
        else if (!strcmp(a, "--policy") && more)
            policy_file = argv[++i];
        else if (!strcmp(a, "--no-jacobian"))
            jacobian = 0;
        else if (!strcmp(a, "--check-grad"))
            check_grad = 1;
        else if (!strcmp(a, "--trace-nonfinite"))
            trace = 1;
        else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--quiet"))
            quiet = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(model_usage, stdout);
            free(assign);
            return 0;
        } else if ((a[0] == '-' && a[1]) || file) {
            fprintf(stderr, "kiln: model: %s '%.64s'\n%s",
                    file && a[0] != '-' ? "more than one model file:"
                                        : "unknown, repeated or incomplete "
                                          "option", a, model_usage);
            free(assign);
            return 2;
        } else
            file = a;
    }
    if (!file) {
        fputs(model_usage, stderr);
        free(assign);
        return 2;
    }
    kiln_err err = {0, ""};
    kiln_model *m = NULL;
    char *names_copy = NULL;
    char **names = NULL;
    mparam *ps = NULL;
    double *unc = NULL, *theta = NULL, *grad = NULL, *cons = NULL;
    kiln_json_data *point = NULL;
    kiln_graph *g = kiln_parse_file_opts(file, &ropt, &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        goto done;
    }
    if (backend && kiln_cli_require_backend(backend, quiet))
        goto done;
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = backend;
    opt.policy_file = policy_file;
    opt.model_path = file;
    opt.quiet = quiet;
    opt.tiers = KILN_TIERS_OFF;   /* one evaluation: no background work */
    if (!(m = kiln_model_new(g, NULL, data_json, &opt, &ropt, &err))) {
        fprintf(stderr, "kiln: %s\n", err.message);
        goto done;
    }
    int n = kiln_model_n_unc(m), np = kiln_graph_n_params(g);
    names_copy = strdup(kiln_model_param_unc_names(m));
    names = calloc((size_t)n + 1, sizeof *names);
    ps = calloc((size_t)np + 1, sizeof *ps);
    unc = calloc((size_t)n + 1, sizeof *unc);
    theta = calloc((size_t)n + 1, sizeof *theta);
    grad = calloc((size_t)n + 1, sizeof *grad);
    cons = calloc((size_t)n + 1, sizeof *cons);
    if (!names_copy || !names || !ps || !unc || !theta || !grad || !cons) {
        fputs("kiln: out of memory\n", stderr);
        goto done;
    }
    {
        int k = 0;
        for (char *save = NULL, *t = strtok_r(names_copy, ",", &save);
             t && k < n; t = strtok_r(NULL, ",", &save))
            names[k++] = t;
        if (k != n || model_params(g, names, n, ps, np)) {
            fprintf(stderr, "kiln: model: the parameter names do not match "
                    "the parameters\n");
            goto done;
        }
    }
    /* -i NAME=VALUE (constrained) and -i NAME_unc=VALUE */
    for (int a = 0; a < n_assign; a++) {
        const char *eq = strchr(assign[a], '=');
        int constrained = 0;
        if (!eq) {
            fprintf(stderr, "kiln: -i expects NAME=VALUE, got '%.64s'\n",
                    assign[a]);
            goto done;
        }
        size_t len = (size_t)(eq - assign[a]);
        mparam *p = model_find(ps, np, assign[a], len, "-i", &constrained);
        if (!p)
            goto done;
        char shown[96], pname[72];
        snprintf(pname, sizeof pname, "%.*s", len > 64 ? 64 : (int)len,
                 assign[a]);
        snprintf(shown, sizeof shown, "input '%s'", pname);
        kiln_tensor t = {0};
        if (kiln_cli_parse_value(pname, KILN_F64, p->rank, p->shape, eq + 1,
                                 &ropt, &t))
            goto done;
        int rc = model_give(p, constrained, shown, &t, unc, theta);
        free(t.data);
        if (rc)
            goto done;
    }
    /* --inputs POINT.json: the same names */
    if (inputs_json) {
        if (!(point = kiln_json_data_read(inputs_json, &ropt, &err))) {
            fprintf(stderr, "kiln: --inputs: %s\n", err.message);
            goto done;
        }
        for (int i = 0; i < kiln_json_data_count(point); i++) {
            const char *key = kiln_json_data_key(point, i);
            int constrained = 0;
            mparam *p = model_find(ps, np, key, strlen(key), "--inputs",
                                   &constrained);
            if (!p)
                goto done;
            kiln_tensor t = {0};
            char shown[96];
            char kshown[EXCERPT_SIZE(EXCERPT_MAX)];
            snprintf(shown, sizeof shown, "--inputs %s",
                     excerpt(kshown, sizeof kshown, key, strlen(key), 40));
            if (kiln_json_data_get(point, key, KILN_F64, p->rank, p->shape,
                                   &t, &err)) {
                fprintf(stderr, "kiln: --inputs: %s\n", err.message);
                goto done;
            }
            int rc = model_give(p, constrained, shown, &t, unc, theta);
            free(t.data);
            if (rc)
                goto done;
        }
    }
    /* the rest: uniform(-2, 2) unconstrained (Stan's default inits) */
    {
        char missing[1024] = "";
        size_t used = 0;
        int n_missing = 0, any_constrained = 0;
        for (int i = 0; i < np; i++) {
            any_constrained |= ps[i].given == 2;
            if (ps[i].given)
                continue;
            if (random) {
                for (int e = 0; e < ps[i].numel; e++)
                    unc[ps[i].off + e] = 4 * kiln_cli_uniform(&seed) - 2;
                continue;
            }
            if (used < sizeof missing - 64)
                used += (size_t)snprintf(missing + used, sizeof missing - used,
                                         "%s%s", n_missing ? ", " : "",
                                         ps[i].name);
            n_missing++;
        }
        if (n_missing) {
            fprintf(stderr, "kiln: missing parameter value%s: %s (give -i "
                    "NAME=VALUE (constrained), -i NAME_unc=VALUE, --inputs "
                    "POINT.json or --random-inputs SEED)\n",
                    n_missing > 1 ? "s" : "", missing);
            goto done;
        }
        if (any_constrained) {
            /* the constrained values given, unconstrained by the model's
             * transforms; the others as they are */
            if (kiln_model_constrain(m, 0, 0, unc, cons, &err)) {
                fprintf(stderr, "kiln: %s\n", err.message);
                goto done;
            }
            for (int i = 0; i < np; i++)
                if (ps[i].given == 2)
                    memcpy(cons + ps[i].off, theta + ps[i].off,
                           sizeof *cons * (size_t)ps[i].numel);
            if (kiln_model_unconstrain(m, cons, unc, &err)) {
                fprintf(stderr, "kiln: %s\n", err.message);
                goto done;
            }
        }
    }
    double lp = 0;
    if (kiln_model_log_density(m, jacobian, unc, &lp, grad, &err) ||
        kiln_model_constrain(m, 0, 0, unc, cons, &err)) {
        fprintf(stderr, "kiln: %s\n", err.message);
        goto done;
    }
    /* --check-grad: central differences of the log density, as kiln
     * run --check-grad (kiln_function_check_grad) measures them */
    double worst = 0, w_an = 0, w_num = 0;
    int w_at = -1;
    for (int i = 0; check_grad && i < n; i++) {
        double u = unc[i], h = 1e-6 * (fabs(u) > 1 ? fabs(u) : 1);
        double up = u + h, dn = u - h, lp_up, lp_dn;
        unc[i] = up;
        int rc = kiln_model_log_density(m, jacobian, unc, &lp_up, NULL, &err);
        unc[i] = dn;
        rc = rc ? rc : kiln_model_log_density(m, jacobian, unc, &lp_dn, NULL,
                                              &err);
        unc[i] = u;
        if (rc) {
            fprintf(stderr, "kiln: --check-grad: %s\n", err.message);
            goto done;
        }
        double num = (lp_up - lp_dn) / (up - dn);
        double e = fabs(grad[i] - num) / (fabs(num) > 1 ? fabs(num) : 1);
        if (!isfinite(grad[i]) || !isfinite(num))
            e = INFINITY;
        if (w_at < 0 || e > worst) {
            worst = e;
            w_at = i;
            w_an = grad[i];
            w_num = num;
        }
    }
    int bad = check_grad && n > 0 && !(worst <= CHECK_GRAD_TOL);
    if (json) {
        printf("{\"log_density\": ");
        json_num(stdout, lp);
        printf(", \"jacobian\": %s, \"parameters\": [",
               jacobian ? "true" : "false");
        for (int i = 0; i < n; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            kiln_cli_json_str(stdout, names[i]);
            printf(", \"unconstrained\": ");
            json_num(stdout, unc[i]);
            printf(", \"gradient\": ");
            json_num(stdout, grad[i]);
            printf(", \"constrained\": ");
            json_num(stdout, cons[i]);
            printf("}");
        }
        printf("]");
        if (check_grad && n > 0) {
            printf(", \"check_grad\": {\"max_error\": ");
            json_num(stdout, worst);
            printf(", \"worst\": ");
            kiln_cli_json_str(stdout, names[w_at]);
            printf(", \"analytic\": ");
            json_num(stdout, w_an);
            printf(", \"numeric\": ");
            json_num(stdout, w_num);
            printf(", \"ok\": %s}", bad ? "false" : "true");
        }
        printf("}\n");
    } else {
        char b1[32], b2[32], b3[32];
        printf("log density: %s (%s the log-Jacobian of the constraint "
               "transforms)\n", text_num(b1, lp), jacobian ? "with"
                                                            : "without");
        printf("%-20s %24s %24s %24s\n", "unconstrained", "value",
               "gradient", "constrained value");
        for (int i = 0; i < n; i++)
            printf("%-20s %24s %24s %24s\n", names[i], text_num(b1, unc[i]),
                   text_num(b2, grad[i]), text_num(b3, cons[i]));
        if (check_grad && n > 0)
            printf("check-grad: max error %.2g at %s (analytic %.17g, "
                   "numeric %.17g)\n", worst, names[w_at], w_an, w_num);
    }
    if (trace && model_trace(g, file, data_json, &ropt, ps, np, unc,
                             jacobian, json ? stderr : stdout))
        goto done;
    if (bad) {
        fprintf(stderr, "kiln: check-grad: the gradient differs from finite "
                "differences by %.2g (more than %g) at %s\n", worst,
                CHECK_GRAD_TOL, names[w_at]);
        goto done;
    }
    status = 0;
done:
    fflush(stdout);
    kiln_json_data_free(point);
    free(cons);
    free(grad);
    free(theta);
    free(unc);
    free(ps);
    free(names);
    free(names_copy);
    kiln_model_free(m);
    kiln_graph_free(g);
    free(assign);
    return status;
}
