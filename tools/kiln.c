/*
 * kiln.c — the command-line tool: `kiln run`, `kiln check`.
 * See docs/kiln.1 (man kiln) for the manual.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/backend.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ARGS 256

/* --check-grad fails (exit status 1) when a gradient's max error is
 * above this (docs/kiln.1). */
#define CHECK_GRAD_TOL 1e-4

static const char *usage_text =
    "usage: kiln run FILE.kg [-i NAME=VALUE]... [--random-inputs SEED]\n"
    "                [--repeat N] [--backend NAME] [--json] [--check-grad]\n"
    "       kiln check FILE.kg\n"
    "       kiln --version | --help\n"
    "\n"
    "VALUE is a number, a list [..] (nested for rank > 1), @file.npy or\n"
    "@file.csv:column.  A number fills an input of static shape.\n"
    "See man kiln.\n";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- values --------------------------------------------------------- */

static void put_value(void *data, kiln_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case KILN_F64: ((double *)data)[i] = v; break;
    case KILN_F32: ((float *)data)[i] = (float)v; break;
    case KILN_I64: ((int64_t *)data)[i] = (int64_t)v; break;
    case KILN_I32: ((int32_t *)data)[i] = (int32_t)v; break;
    default: ((uint8_t *)data)[i] = v != 0; break;
    }
}

static double get_value(const void *data, kiln_dtype dt, int64_t i)
{
    switch (dt) {
    case KILN_F64: return ((const double *)data)[i];
    case KILN_F32: return ((const float *)data)[i];
    case KILN_I64: return (double)((const int64_t *)data)[i];
    case KILN_I32: return ((const int32_t *)data)[i];
    default: return ((const uint8_t *)data)[i];
    }
}

/* A nested list literal: numbers collected flat, shape from nesting. */
typedef struct list_parse {
    const char *s;
    double *vals;
    int64_t n, cap;
    int rank;
    int64_t shape[KILN_MAX_RANK];
    int shape_set[KILN_MAX_RANK];
    char err[256];
} list_parse;

static void skip_ws(list_parse *lp)
{
    while (*lp->s == ' ' || *lp->s == '\t' || *lp->s == '\n')
        lp->s++;
}

static int parse_number(list_parse *lp, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(lp->s, &end);
    if (end == lp->s) {
        if (strncmp(lp->s, "true", 4) == 0) {
            *out = 1;
            end = (char *)lp->s + 4;
        } else if (strncmp(lp->s, "false", 5) == 0) {
            *out = 0;
            end = (char *)lp->s + 5;
        } else {
            snprintf(lp->err, sizeof lp->err, "bad number at '%.20s'", lp->s);
            return -1;
        }
    }
    lp->s = end;
    return 0;
}

static int parse_list(list_parse *lp, int depth)
{
    skip_ws(lp);
    if (*lp->s != '[') {
        double v;
        if (parse_number(lp, &v))
            return -1;
        if (depth < lp->rank || (lp->rank >= 0 && depth != lp->rank)) {
            snprintf(lp->err, sizeof lp->err, "ragged list");
            return -1;
        }
        lp->rank = depth;
        if (lp->n == lp->cap) {
            int64_t cap = lp->cap ? 2 * lp->cap : 64;
            double *p = realloc(lp->vals, sizeof(double) * (size_t)cap);
            if (!p) {
                snprintf(lp->err, sizeof lp->err, "out of memory");
                return -1;
            }
            lp->vals = p;
            lp->cap = cap;
        }
        lp->vals[lp->n++] = v;
        return 0;
    }
    if (depth >= KILN_MAX_RANK) {
        snprintf(lp->err, sizeof lp->err, "list nested deeper than %d",
                 KILN_MAX_RANK);
        return -1;
    }
    lp->s++;
    int64_t count = 0;
    skip_ws(lp);
    if (*lp->s == ']') {
        lp->s++;
    } else {
        for (;;) {
            if (parse_list(lp, depth + 1))
                return -1;
            count++;
            skip_ws(lp);
            if (*lp->s == ',') {
                lp->s++;
                continue;
            }
            if (*lp->s == ']') {
                lp->s++;
                break;
            }
            snprintf(lp->err, sizeof lp->err, "expected ',' or ']' at '%.20s'",
                     lp->s);
            return -1;
        }
    }
    if (lp->shape_set[depth] && lp->shape[depth] != count) {
        snprintf(lp->err, sizeof lp->err, "ragged list");
        return -1;
    }
    if (count == 0 && lp->rank < 0)
        lp->rank = depth + 1;
    lp->shape[depth] = count;
    lp->shape_set[depth] = 1;
    return 0;
}

/* Parse VALUE for input `name` of the declared type into *t (data
 * malloc'd).  Returns 0 or -1 with a message printed. */
static int load_value(const kiln_function *f, int idx, const char *value,
                      kiln_tensor *t)
{
    const char *name = kiln_function_input_name(f, idx);
    kiln_dtype dt;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    kiln_function_input_type(f, idx, &dt, &rank, dims, NULL);
    kiln_err err = {0, ""};
    if (value[0] == '@') {
        const char *path = value + 1;
        const char *colon = strrchr(path, ':');
        size_t plen = strlen(path);
        if (plen > 4 && strcmp(path + plen - 4, ".npy") == 0) {
            if (kiln_npy_read(path, t, &err)) {
                fprintf(stderr, "kiln: input '%s': %s\n", name, err.message);
                return -1;
            }
            return 0;
        }
        if (!colon) {
            fprintf(stderr, "kiln: input '%s': expected @file.npy or "
                    "@file.csv:column, got '%s'\n", name, value);
            return -1;
        }
        char *p = strndup(path, (size_t)(colon - path));
        if (!p)
            return -1;
        int rc = kiln_csv_read_column(p, colon + 1, dt, t, &err);
        free(p);
        if (rc) {
            fprintf(stderr, "kiln: input '%s': %s\n", name, err.message);
            return -1;
        }
        return 0;
    }
    list_parse lp;
    memset(&lp, 0, sizeof lp);
    lp.s = value;
    lp.rank = -1;
    if (parse_list(&lp, 0)) {
        fprintf(stderr, "kiln: input '%s': %s in '%s'\n", name, lp.err, value);
        free(lp.vals);
        return -1;
    }
    skip_ws(&lp);
    if (*lp.s) {
        fprintf(stderr, "kiln: input '%s': unexpected '%s' after the value\n",
                name, lp.s);
        free(lp.vals);
        return -1;
    }
    t->dtype = dt;
    if (lp.rank == 0) {
        /* a scalar fills a static shape */
        t->rank = rank;
        for (int k = 0; k < rank; k++) {
            if (dims[k] < 0) {
                fprintf(stderr, "kiln: input '%s' has a symbolic shape; give "
                        "a list or a file, not a number\n", name);
                free(lp.vals);
                return -1;
            }
            t->shape[k] = dims[k];
        }
    } else {
        t->rank = lp.rank;
        for (int k = 0; k < lp.rank; k++)
            t->shape[k] = lp.shape[k];
    }
    int64_t n = kiln_shape_numel(t->rank, t->shape);
    t->data = malloc((size_t)(n ? n : 1) * kiln_dtype_size(dt));
    if (!t->data) {
        free(lp.vals);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        put_value(t->data, dt, i, lp.rank == 0 ? lp.vals[0] : lp.vals[i]);
    free(lp.vals);
    return 0;
}

/* splitmix64 → a uniform double in [0, 1): a tiny seeded generator so
 * that --random-inputs gives the same values on every machine. */
static uint64_t rng_state;
static double rng_uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static int random_value(const kiln_function *f, int idx, kiln_tensor *t)
{
    kiln_dtype dt;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    kiln_function_input_type(f, idx, &dt, &rank, dims, NULL);
    t->dtype = dt;
    t->rank = rank;
    for (int k = 0; k < rank; k++)
        t->shape[k] = dims[k] >= 0 ? dims[k] : 4;
    int64_t n = kiln_shape_numel(rank, t->shape);
    t->data = malloc((size_t)(n ? n : 1) * kiln_dtype_size(dt));
    if (!t->data)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        double u = rng_uniform();
        double v = dt == KILN_F64 || dt == KILN_F32 ? 2 * u - 1
                   : dt == KILN_BOOL                ? (u < 0.5)
                                                    : floor(u * 4);
        put_value(t->data, dt, i, v);
    }
    return 0;
}

/* ---- printing ------------------------------------------------------- */

static void print_number(FILE *o, double v, kiln_dtype dt, int json)
{
    if (isnan(v))
        fputs(json ? "\"nan\"" : "nan", o);
    else if (isinf(v))
        fputs(v > 0 ? (json ? "\"inf\"" : "inf") : (json ? "\"-inf\"" : "-inf"),
              o);
    else if (dt == KILN_BOOL)
        fputs(v != 0 ? "true" : "false", o);
    else if (dt == KILN_I64 || dt == KILN_I32)
        fprintf(o, "%lld", (long long)v);
    else
        fprintf(o, "%.17g", v);
}

static void print_nested(FILE *o, const kiln_tensor *t, int dim, int64_t *pos,
                         int json)
{
    if (dim == t->rank) {
        print_number(o, get_value(t->data, t->dtype, *pos), t->dtype, json);
        (*pos)++;
        return;
    }
    fputc('[', o);
    for (int64_t i = 0; i < t->shape[dim]; i++) {
        if (i)
            fputs(", ", o);
        print_nested(o, t, dim + 1, pos, json);
    }
    fputc(']', o);
}

static void print_json_string(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(o, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(o, "\\u%04x", *s);
        else
            fputc(*s, o);
    }
    fputc('"', o);
}

/* ---- commands ------------------------------------------------------- */

static int cmd_check(int argc, char **argv)
{
    if (argc != 1) {
        fputs(usage_text, stderr);
        return 2;
    }
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(argv[0], &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    char *text = kiln_graph_print(g, &err);
    kiln_graph_free(g);
    if (!text) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    fputs(text, stdout);
    free(text);
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    const char *file = NULL, *backend = NULL;
    const char *assign[MAX_ARGS];
    int n_assign = 0, json = 0, random = 0, repeat = 1, check_grad = 0;
    unsigned long long seed = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-i") == 0 || strcmp(a, "--input") == 0) &&
            i + 1 < argc) {
            if (n_assign == MAX_ARGS) {
                fprintf(stderr, "kiln: too many -i options (at most %d)\n",
                        MAX_ARGS);
                return 2;
            }
            assign[n_assign++] = argv[++i];
        } else if (strcmp(a, "--random-inputs") == 0 && i + 1 < argc) {
            char *end;
            seed = strtoull(argv[++i], &end, 10);
            if (*end) {
                fprintf(stderr, "kiln: --random-inputs takes an integer "
                        "seed, got '%s'\n", argv[i]);
                return 2;
            }
            random = 1;
        } else if (strcmp(a, "--repeat") == 0 && i + 1 < argc) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            if (*end || r < 1 || r > 100000000) {
                fprintf(stderr, "kiln: --repeat takes a count >= 1, got "
                        "'%s'\n", argv[i]);
                return 2;
            }
            repeat = (int)r;
        } else if (strcmp(a, "--backend") == 0 && i + 1 < argc) {
            backend = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--check-grad") == 0) {
            check_grad = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kiln: unknown or incomplete option '%s'\n%s", a,
                    usage_text);
            return 2;
        } else if (!file) {
            file = a;
        } else {
            fprintf(stderr, "kiln: more than one model file ('%s', '%s')\n",
                    file, a);
            return 2;
        }
    }
    if (!file) {
        fputs(usage_text, stderr);
        return 2;
    }
    rng_state = seed;
    kiln_err err = {0, ""};
    int status = 1;
    kiln_graph *g = kiln_parse_file(file, &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = backend;
    double t0 = now_ms();
    kiln_function *f = kiln_compile(g, &opt, &err);
    double compile_ms = now_ms() - t0;
    kiln_graph_free(g);
    if (!f) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    int ni = kiln_function_n_inputs(f), no = kiln_function_n_outputs(f);
    kiln_tensor *in = calloc((size_t)(ni ? ni : 1), sizeof *in);
    kiln_tensor *out = calloc((size_t)(no ? no : 1), sizeof *out);
    double *times = calloc((size_t)repeat, sizeof *times);
    kiln_grad_check *rows = NULL;
    int n_rows = 0, n_bad = 0;
    if (!in || !out || !times) {
        fprintf(stderr, "kiln: out of memory\n");
        goto done;
    }
    /* -i NAME=VALUE */
    for (int a = 0; a < n_assign; a++) {
        const char *eq = strchr(assign[a], '=');
        if (!eq) {
            fprintf(stderr, "kiln: -i expects NAME=VALUE, got '%s'\n",
                    assign[a]);
            goto done;
        }
        int idx = -1;
        for (int k = 0; k < ni; k++) {
            const char *nm = kiln_function_input_name(f, k);
            if (strlen(nm) == (size_t)(eq - assign[a]) &&
                strncmp(nm, assign[a], (size_t)(eq - assign[a])) == 0)
                idx = k;
        }
        if (idx < 0) {
            fprintf(stderr, "kiln: -i %.*s: the model has no input of that "
                    "name\n", (int)(eq - assign[a]), assign[a]);
            goto done;
        }
        if (in[idx].data) {
            fprintf(stderr, "kiln: input '%s' given twice\n",
                    kiln_function_input_name(f, idx));
            goto done;
        }
        if (load_value(f, idx, eq + 1, &in[idx]))
            goto done;
    }
    /* missing inputs */
    {
        char missing[2048] = "";
        size_t len = 0;
        int n_missing = 0;
        for (int k = 0; k < ni; k++) {
            if (in[k].data)
                continue;
            if (random) {
                if (random_value(f, k, &in[k]))
                    goto done;
                continue;
            }
            n_missing++;
            if (len < sizeof missing - 64)
                len += (size_t)snprintf(missing + len, sizeof missing - len,
                                        "%s%s", n_missing > 1 ? ", " : "",
                                        kiln_function_input_name(f, k));
        }
        if (n_missing) {
            fprintf(stderr, "kiln: missing input%s: %s (give -i NAME=VALUE "
                    "or --random-inputs SEED)\n", n_missing > 1 ? "s" : "",
                    missing);
            goto done;
        }
    }
    for (int r = 0; r < repeat; r++) {
        double s = now_ms();
        if (kiln_function_call(f, in, out, &err)) {
            fprintf(stderr, "kiln: %s\n", err.message);
            goto done;
        }
        times[r] = now_ms() - s;
    }
    /* after the timed calls; the check leaves the outputs as they were */
    if (check_grad) {
        if (kiln_function_check_grad(f, in, NULL, 0, &n_rows, &err)) {
            fprintf(stderr, "kiln: %s\n", err.message);
            goto done;
        }
        if (n_rows == 0) {
            fprintf(stderr, "kiln: --check-grad: no gradient to check (no "
                    "output of the model is grad(COST, INPUT) of an output "
                    "COST)\n");
            goto done;
        }
        rows = calloc((size_t)n_rows, sizeof *rows);
        if (!rows) {
            fprintf(stderr, "kiln: out of memory\n");
            goto done;
        }
        if (kiln_function_check_grad(f, in, rows, n_rows, &n_rows, &err)) {
            fprintf(stderr, "kiln: %s\n", err.message);
            goto done;
        }
        for (int r = 0; r < n_rows; r++)
            n_bad += !(rows[r].max_error <= CHECK_GRAD_TOL);
    }
    double first = times[0];
    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
    double median = repeat % 2 ? times[repeat / 2]
                               : 0.5 * (times[repeat / 2 - 1] +
                                        times[repeat / 2]);
    if (json) {
        printf("{\"outputs\": {");
        for (int k = 0; k < no; k++) {
            printf("%s", k ? ", " : "");
            print_json_string(stdout, kiln_function_output_name(f, k));
            printf(": {\"dtype\": \"%s\", \"shape\": [",
                   kiln_dtype_name(out[k].dtype));
            for (int d = 0; d < out[k].rank; d++)
                printf("%s%lld", d ? ", " : "", (long long)out[k].shape[d]);
            printf("], \"value\": ");
            int64_t pos = 0;
            print_nested(stdout, &out[k], 0, &pos, 1);
            printf("}");
        }
        printf("}, \"timing\": {\"compile_ms\": %.6f, \"first_call_ms\": "
               "%.6f, \"call_ms_median\": %.6f, \"repeat\": %d}",
               compile_ms, first, median, repeat);
        if (check_grad) {
            printf(", \"check_grad\": [");
            for (int r = 0; r < n_rows; r++) {
                printf("%s{\"input\": ", r ? ", " : "");
                print_json_string(stdout, rows[r].input);
                printf(", \"output\": ");
                print_json_string(stdout, rows[r].output);
                printf(", \"gradient\": ");
                print_json_string(stdout, rows[r].gradient);
                printf(", \"max_error\": ");
                print_number(stdout, rows[r].max_error, KILN_F64, 1);
                printf(", \"worst_index\": %lld, \"analytic\": ",
                       (long long)rows[r].worst_index);
                print_number(stdout, rows[r].analytic, KILN_F64, 1);
                printf(", \"numeric\": ");
                print_number(stdout, rows[r].numeric, KILN_F64, 1);
                printf(", \"ok\": %s}",
                       rows[r].max_error <= CHECK_GRAD_TOL ? "true" : "false");
            }
            printf("]");
        }
        printf("}\n");
    } else {
        for (int k = 0; k < no; k++) {
            printf("%s = ", kiln_function_output_name(f, k));
            int64_t pos = 0;
            print_nested(stdout, &out[k], 0, &pos, 0);
            printf("\n");
        }
        for (int r = 0; r < n_rows; r++) {
            printf("check-grad: d(%s)/d(%s): max error %.2g at [%lld] "
                   "(analytic ", rows[r].output, rows[r].input,
                   rows[r].max_error, (long long)rows[r].worst_index);
            print_number(stdout, rows[r].analytic, KILN_F64, 0);
            printf(", numeric ");
            print_number(stdout, rows[r].numeric, KILN_F64, 0);
            printf(")\n");
        }
        printf("compile: %.3f ms, first call: %.3f ms, median call: %.3f ms "
               "(%d call%s, %d kernel%s)\n", compile_ms, first, median, repeat,
               repeat == 1 ? "" : "s", kiln_function_n_kernels(f),
               kiln_function_n_kernels(f) == 1 ? "" : "s");
    }
    if (n_bad) {
        fprintf(stderr, "kiln: check-grad: %d gradient%s differ%s from "
                "finite differences by more than %g\n", n_bad,
                n_bad == 1 ? "" : "s", n_bad == 1 ? "s" : "", CHECK_GRAD_TOL);
        goto done;
    }
    status = 0;
done:
    for (int k = 0; in && k < ni; k++)
        free(in[k].data);
    free(in);
    free(out);
    free(times);
    free(rows);
    kiln_function_free(f);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("kiln %s (plugin ABI %d.%d)\n", KILN_VERSION_STRING,
               KILN_ABI_MAJOR, KILN_ABI_MINOR);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 2, argv + 2);
    fprintf(stderr, "kiln: unknown command '%s'\n%s", cmd, usage_text);
    return 2;
}
