/*
 * kiln.c — the command-line tool: `kiln run`, `kiln check`, and the
 * commands of kiln_cli.h (explain, policy, cache, bridgestan).
 * See docs/kiln.1 (man kiln) for the manual.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/backend.h>
#include <kiln/cache.h>
#ifdef KILN_WITH_MPI
#include <kiln/mpi.h>   /* kiln run --mpi-axis (tools/kiln_mpi.c) */
#endif

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emit_c.h"   /* kiln emit-c (libkiln, internal header) */
#include "emit_text.h" /* kiln emit-llvm (libkiln, internal header) */
#include "kiln_cli.h"  /* kiln explain, kiln policy (kiln_policy.c) */
#include "excerpt.h"   /* short escaped quotes of -i values (core/) */
#include "jsondata.h"  /* kiln run --data (libkiln, internal header) */
#include "safetensors.h" /* kiln run --weights (libkiln, internal) */
#include "trace.h"     /* kiln run --trace-nonfinite (libkiln, internal) */
#include "suggest.h"   /* did you mean (libkiln, internal) */
#include "gemv.h"      /* kiln --version's BLAS (libkiln, internal) */

/* --check-grad fails (exit status 1) when a gradient's max error is
 * above this (docs/kiln.1). */
#define CHECK_GRAD_TOL 1e-4

/* the largest --tier-threads (the library's pool has at most 64) and
 * --tier-wait (seconds) */
#define TIER_THREADS_MAX 64
#define TIER_WAIT_MAX 1000000

static const char *usage_text =
    "usage: kiln run FILE.kg [-i NAME=VALUE]... [--inputs POINT.json]\n"
    "                [--data DATA.json] [--weights FILE.safetensors]\n"
    "                [--random-inputs SEED]\n"
    "                [--repeat N] [--backend NAME] [--json] [--check-grad]\n"
    "                [--jobs N] [--opt 1|2|3] [--fast-math]\n"
    "                [--policy POLICY.yaml] [--no-cache] [--cache-report]\n"
    "                [--generic-target] [--data-max-size SIZE]\n"
    "                [--data-allow-special]\n"
    "                [--passes all|none|-fuse,...]\n"
    "                [--tiers policy|off|baseline] [--tier-threads N]\n"
    "                [--tier-wait SECONDS] [--tier-report] [--quiet]\n"
    "                [--trace-nonfinite] [--mpi-axis AXIS | --mpi]\n"
    "                [--mpi-report]\n"
    "       kiln model FILE.kg [--data DATA.json] [-i NAME=VALUE]...\n"
    "                [--inputs POINT.json] [--random-inputs SEED]\n"
    "                [--no-jacobian] [--check-grad] [--trace-nonfinite]\n"
    "                [--backend NAME] [--policy POLICY.yaml] [--json]\n"
    "       kiln compile FILE.kg [--data DATA.json] [--policy POLICY.yaml]\n"
    "                [--quiet]\n"
    "       kiln cache stats | list | verify [--remove] |\n"
    "                  prune [--max-size SIZE] | clear\n"
    "       kiln explain FILE.kg [--policy POLICY.yaml] [--json] [--passes]\n"
    "       kiln policy check [POLICY.yaml]\n"
    "       kiln check FILE.kg\n"
    "       kiln bridgestan FILE.kg -o LIB.so [--logp NAME]\n"
    "       kiln generate MODEL.kg --weights W.safetensors --prompt IDS\n"
    "                --max-new N [--top-k K] [--temperature X] [--seed S]\n"
    "                [--backend NAME] [--tiers policy|off|baseline]\n"
    "       kiln emit-c FILE.kg [--passes LIST] [--policy POLICY.yaml]\n"
    "       kiln emit-llvm FILE.kg [--opt 1|2|3] [--fast-math]\n"
    "                [--passes LIST] [--policy POLICY.yaml]\n"
    "       kiln --version | --help\n"
    "\n"
    "VALUE is a number, a list [..] (nested for rank > 1), @file.npy or\n"
    "@file.csv:column.  A number fills an input of static shape (or one\n"
    "whose dims --data sizes).\n"
    "See man kiln.\n";

/* A short, escaped excerpt of a command-line value for a message: a -i
 * value may be 120 kB (or hold control bytes), and is quoted so. */
typedef struct shown_text {
    char s[EXCERPT_SIZE(EXCERPT_MAX)];
} shown_text;

static const char *show(shown_text *b, const char *s, size_t n)
{
    return excerpt(b->s, sizeof b->s, s, n, EXCERPT_MAX);
}

#define SHOW(s) show(&(shown_text){{0}}, (s), strlen(s))
#define SHOWN(s, n) show(&(shown_text){{0}}, (s), (n))

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

/* One element of a -i value, already in the input's dtype: integers and
 * bools exactly (i), floats as doubles (d). */
typedef union lval {
    double d;
    int64_t i;
} lval;

static void put_value(void *data, kiln_dtype dt, int64_t i, lval v)
{
    switch (dt) {
    case KILN_F64: ((double *)data)[i] = v.d; break;
    case KILN_F32: ((float *)data)[i] = (float)v.d; break;
    case KILN_I64: ((int64_t *)data)[i] = v.i; break;
    case KILN_I32: ((int32_t *)data)[i] = (int32_t)v.i; break;
    default: ((uint8_t *)data)[i] = v.i != 0; break;
    }
}

/* The decimal text of the product of n factors (each < 2^63), exact
 * whatever its size, for "cannot allocate N bytes". */
static const char *product_text(const uint64_t *f, int n, char *buf,
                                size_t size)
{
    enum { B = 1000000000, MAXL = 32 };
    uint64_t r[MAXL] = {1}, t[MAXL]; /* base 1e9, least significant first */
    int nr = 1;
    for (int k = 0; k < n && k < 9; k++) {
        uint64_t d[3] = {f[k] % B, f[k] / B % B, f[k] / B / B};
        int nd = d[2] ? 3 : d[1] ? 2 : 1;
        memset(t, 0, sizeof t);
        for (int i = 0; i < nr; i++) {
            uint64_t carry = 0;
            int j = 0;
            for (; j < nd; j++) {
                uint64_t v = t[i + j] + r[i] * d[j] + carry;
                t[i + j] = v % B;
                carry = v / B;
            }
            for (j += i; carry && j < MAXL; j++) {
                uint64_t v = t[j] + carry;
                t[j] = v % B;
                carry = v / B;
            }
        }
        nr = nr + nd < MAXL ? nr + nd : MAXL;
        while (nr > 1 && t[nr - 1] == 0)
            nr--;
        memcpy(r, t, sizeof r);
    }
    size_t len = (size_t)snprintf(buf, size, "%llu",
                                  (unsigned long long)r[nr - 1]);
    for (int i = nr - 2; i >= 0 && len < size; i--)
        len += (size_t)snprintf(buf + len, size - len, "%09llu",
                                (unsigned long long)r[i]);
    return buf;
}

/* Allocate the data of tensor t (shape set) for input `name`: NULL with a
 * message when the size does not fit or malloc fails. */
static void *alloc_input(const char *name, const kiln_tensor *t)
{
    size_t es = kiln_dtype_size(t->dtype);
    int64_t n = kiln_shape_numel(t->rank, t->shape);
    if (n < 0 || (uint64_t)n > (uint64_t)INT64_MAX / es ||
        (uint64_t)n > SIZE_MAX / es) {
        uint64_t f[KILN_MAX_RANK + 1];
        char num[320];
        for (int k = 0; k < t->rank; k++)
            f[k] = (uint64_t)t->shape[k];
        f[t->rank] = es;
        fprintf(stderr, "kiln: input '%s': cannot allocate %s bytes\n", name,
                product_text(f, t->rank + 1, num, sizeof num));
        return NULL;
    }
    size_t bytes = (size_t)n * es;
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        fprintf(stderr, "kiln: input '%s': cannot allocate %zu bytes\n", name,
                bytes);
    return p;
}

/* A nested list literal: numbers collected flat, shape from nesting. */
typedef struct list_parse {
    const char *s;
    kiln_dtype dt;     /* the input's dtype: numbers are checked against it */
    lval *vals;
    int64_t n, cap;
    int rank;
    int64_t shape[KILN_MAX_RANK];
    int shape_set[KILN_MAX_RANK];
    int bad_value;     /* err is about a value, not the syntax */
    char err[256];
} list_parse;

static void skip_ws(list_parse *lp)
{
    while (*lp->s == ' ' || *lp->s == '\t' || *lp->s == '\n')
        lp->s++;
}

/* One number of a -i value, converted to lp->dt without changing it:
 * integer dtypes take integers in range (exactly, up to the full i64
 * range), bool takes true, false, 0 or 1, floats take what strtod reads
 * if it is within range (inf and nan written as such are fine). */
static int parse_number(list_parse *lp, lval *out)
{
    size_t n = strcspn(lp->s, ",] \t\n");
    char tok[64];
    if (n == 0) {
        snprintf(lp->err, sizeof lp->err, "bad number at '%s'",
                 SHOW(lp->s));
        return -1;
    }
    if (n >= sizeof tok) {
        snprintf(lp->err, sizeof lp->err, "bad number '%s'",
                 SHOWN(lp->s, n));
        return -1;
    }
    memcpy(tok, lp->s, n);
    tok[n] = '\0';
    const char *dtn = kiln_dtype_name(lp->dt);
    int is_bool_word = strcmp(tok, "true") == 0 || strcmp(tok, "false") == 0;
    lp->bad_value = 1;
    if (is_bool_word) {
        if (lp->dt != KILN_BOOL) {
            snprintf(lp->err, sizeof lp->err, "%s is not a number (the "
                     "input is %s)", SHOW(tok), dtn);
            return -1;
        }
        out->i = tok[0] == 't';
        lp->s += n;
        lp->bad_value = 0;
        return 0;
    }
    char *end;
    if (lp->dt == KILN_I64 || lp->dt == KILN_I32 || lp->dt == KILN_BOOL) {
        errno = 0;
        long long v = strtoll(tok, &end, 10);
        int range = errno == ERANGE;
        if (end == tok || *end) {
            /* not plain decimal: a number with a point or exponent is
             * fine when it is an integer (3e9, 2.0) */
            errno = 0;
            double d = strtod(tok, &end);
            if (end == tok || *end) {
                lp->bad_value = 0;
                snprintf(lp->err, sizeof lp->err, "bad number '%s'",
                         SHOW(tok));
                return -1;
            }
            if (!isfinite(d) || d != floor(d)) {
                snprintf(lp->err, sizeof lp->err, "%s is not %s (the input "
                         "is %s)", tok, lp->dt == KILN_BOOL
                         ? "true, false, 0 or 1" : "an integer", dtn);
                return -1;
            }
            range = !(d >= -9223372036854775808.0 &&
                      d < 9223372036854775808.0);
            v = range ? 0 : (long long)d;
        }
        if (!range && lp->dt == KILN_I32 && (v < INT32_MIN || v > INT32_MAX))
            range = 1;
        if (!range && lp->dt == KILN_BOOL && v != 0 && v != 1) {
            snprintf(lp->err, sizeof lp->err, "%s is not true, false, 0 or 1 "
                     "(the input is bool)", SHOW(tok));
            return -1;
        }
        if (range) {
            snprintf(lp->err, sizeof lp->err, "%s is out of range for %s",
                     SHOW(tok), dtn);
            return -1;
        }
        out->i = (int64_t)v;
    } else {
        errno = 0;
        double d = strtod(tok, &end);
        if (end == tok || *end) {
            lp->bad_value = 0;
            snprintf(lp->err, sizeof lp->err, "bad number '%s'",
                         SHOW(tok));
            return -1;
        }
        /* a finite number that becomes inf (f64: strtod's ERANGE; f32:
         * beyond the largest float after rounding) is refused; so is
         * nothing else: underflow to 0 or a subnormal is rounding */
        int over = errno == ERANGE && isinf(d);
        if (lp->dt == KILN_F32 && isfinite(d) && fabs(d) > FLT_MAX) {
            if (fabs(d) >= (double)FLT_MAX + 0x1p103)
                over = 1;
            else
                d = d > 0 ? FLT_MAX : -FLT_MAX; /* rounds to FLT_MAX */
        }
        if (over) {
            snprintf(lp->err, sizeof lp->err, "%s is out of range for %s",
                     SHOW(tok), dtn);
            return -1;
        }
        out->d = d;
    }
    lp->s += n;
    lp->bad_value = 0;
    return 0;
}

static int parse_list(list_parse *lp, int depth)
{
    skip_ws(lp);
    if (*lp->s != '[') {
        lval v;
        if (parse_number(lp, &v))
            return -1;
        if (depth < lp->rank || (lp->rank >= 0 && depth != lp->rank)) {
            snprintf(lp->err, sizeof lp->err, "ragged list");
            return -1;
        }
        lp->rank = depth;
        if (lp->n == lp->cap) {
            int64_t cap = lp->cap ? 2 * lp->cap : 64;
            lval *p = realloc(lp->vals, sizeof(lval) * (size_t)cap);
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
            snprintf(lp->err, sizeof lp->err, "expected ',' or ']' at '%s'",
                     SHOW(lp->s));
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

int kiln_cli_parse_value(const char *name, kiln_dtype dt, int rank,
                         const int64_t *dims, const char *value,
                         const kiln_read_options *data, kiln_tensor *t)
{
    kiln_err err = {0, ""};
    if (!value[0]) {
        fprintf(stderr, "kiln: input '%s': the value is empty (give a "
                "number, a list [..], @file.npy or @file.csv:column)\n",
                name);
        return -1;
    }
    if (value[0] == '@') {
        const char *path = value + 1;
        const char *colon = strrchr(path, ':');
        size_t plen = strlen(path);
        if (plen > 4 && strcmp(path + plen - 4, ".npy") == 0) {
            if (kiln_npy_read_opts(path, data, t, &err)) {
                fprintf(stderr, "kiln: input '%s': %s\n", name, err.message);
                return -1;
            }
            return 0;
        }
        if (!colon) {
            fprintf(stderr, "kiln: input '%s': expected @file.npy or "
                    "@file.csv:column, got '%s'\n", name, SHOW(value));
            return -1;
        }
        char *p = strndup(path, (size_t)(colon - path));
        if (!p)
            return -1;
        int rc = kiln_csv_read_column_opts(p, colon + 1, dt, data, t, &err);
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
    lp.dt = dt;
    lp.rank = -1;
    if (parse_list(&lp, 0)) {
        if (lp.bad_value)
            fprintf(stderr, "kiln: input '%s': %s\n", name, lp.err);
        else
            fprintf(stderr, "kiln: input '%s': %s in '%s'\n", name, lp.err,
                    SHOW(value));
        free(lp.vals);
        return -1;
    }
    skip_ws(&lp);
    if (*lp.s) {
        fprintf(stderr, "kiln: input '%s': unexpected '%s' after the value\n",
                name, SHOW(lp.s));
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
    t->data = alloc_input(name, t);
    if (!t->data) {
        free(lp.vals);
        return -1;
    }
    int64_t n = kiln_shape_numel(t->rank, t->shape);
    for (int64_t i = 0; i < n; i++)
        put_value(t->data, dt, i, lp.rank == 0 ? lp.vals[0] : lp.vals[i]);
    free(lp.vals);
    return 0;
}

/* Parse VALUE for input idx of f (kiln_cli_parse_value with its declared
 * type).  Returns 0 or -1 with a message printed. */
static int load_value(const kiln_function *f, int idx, const char *value,
                      const kiln_read_options *data, const kiln_json_data *d,
                      kiln_tensor *t)
{
    kiln_dtype dt;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    const char *syms[KILN_MAX_RANK];
    const char *from[KILN_MAX_RANK];
    kiln_function_input_type(f, idx, &dt, &rank, dims, syms);
    /* a symbol the data sizes (a bound shared value, or an integer scalar
     * of the symbol's name in --data, as kiln model reads it) is that
     * size: a number fills it, and a list must have it */
    for (int k = 0; k < rank; k++) {
        from[k] = NULL;
        if (dims[k] >= 0 || !syms[k])
            continue;
        int64_t size = kiln_function_symbol_size(f, syms[k]);
        from[k] = "a shared value";
        if (size < 0) {
            size = kiln_cli_data_symbol(d, syms[k]);
            from[k] = "--data's integer of that name";
        }
        if (size >= 0)
            dims[k] = size;
        else
            from[k] = NULL;
    }
    const char *name = kiln_function_input_name(f, idx);
    if (kiln_cli_parse_value(name, dt, rank, dims, value, data, t))
        return -1;
    for (int k = 0; k < rank && k < t->rank; k++)
        if (from[k] && t->rank == rank && t->shape[k] != dims[k]) {
            fprintf(stderr, "kiln: input '%s': got %lld values along dim "
                    "%d, but dim %d is '%s', which is %lld from %s\n", name,
                    (long long)t->shape[k], k, k, syms[k],
                    (long long)dims[k], from[k]);
            return -1;
        }
    return 0;
}

/* splitmix64 → a uniform double in [0, 1): a tiny seeded generator so
 * that --random-inputs gives the same values on every machine. */
static uint64_t rng_state;
static double rng_uniform(void)
{
    return kiln_cli_uniform(&rng_state);
}

static int random_value(const kiln_function *f, int idx,
                        const kiln_json_data *d, kiln_tensor *t)
{
    kiln_dtype dt;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    const char *syms[KILN_MAX_RANK];
    kiln_function_input_type(f, idx, &dt, &rank, dims, syms);
    t->dtype = dt;
    t->rank = rank;
    for (int k = 0; k < rank; k++) {
        /* a symbol the data sizes keeps that size (a shared value the
         * data bound, or an integer scalar of the symbol's name, as
         * kiln_model_new reads it), else 4 */
        int64_t fixed = kiln_function_symbol_size(f, syms[k]);
        if (fixed < 0 && dims[k] < 0)
            fixed = kiln_cli_data_symbol(d, syms[k]);
        t->shape[k] = dims[k] >= 0 ? dims[k] : fixed >= 0 ? fixed : 4;
    }
    t->data = alloc_input(kiln_function_input_name(f, idx), t);
    if (!t->data)
        return -1;
    int64_t n = kiln_shape_numel(rank, t->shape);
    for (int64_t i = 0; i < n; i++) {
        double u = rng_uniform();
        lval v;
        if (dt == KILN_F64 || dt == KILN_F32)
            v.d = 2 * u - 1;
        else
            v.i = dt == KILN_BOOL ? (u < 0.5) : (int64_t)floor(u * 4);
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

/* Element i of t, integers exactly (an i64 beyond 2^53 too). */
static void print_elem(FILE *o, const kiln_tensor *t, int64_t i, int json)
{
    switch (t->dtype) {
    case KILN_F64:
        print_number(o, ((const double *)t->data)[i], t->dtype, json);
        break;
    case KILN_F32:
        print_number(o, ((const float *)t->data)[i], t->dtype, json);
        break;
    case KILN_I64:
        fprintf(o, "%lld", (long long)((const int64_t *)t->data)[i]);
        break;
    case KILN_I32:
        fprintf(o, "%ld", (long)((const int32_t *)t->data)[i]);
        break;
    default:
        print_number(o, ((const uint8_t *)t->data)[i], t->dtype, json);
        break;
    }
}

static void print_nested(FILE *o, const kiln_tensor *t, int dim, int64_t *pos,
                         int json)
{
    if (dim == 0 && kiln_shape_numel(t->rank, t->shape) == 0) {
        /* no elements: one [] whatever the shape (the shape is in the
         * JSON; walking (2^63 - 1, 0) would never end) */
        fputs("[]", o);
        return;
    }
    if (dim == t->rank) {
        print_elem(o, t, *pos, json);
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

/* ---- commands ------------------------------------------------------- */

/* kiln emit-c / emit-llvm FILE.kg [--passes LIST] [--policy POLICY.yaml]
 * (emit-llvm also [--opt N] [--fast-math]): the code of every kernel
 * `kiln run` compiles — the graph after the rewrite passes and fusion
 * chosen by --passes, $KILN_PASSES and the policy, as kiln_compile
 * chooses them (docs/kiln.1). */
static int cmd_emit(int argc, char **argv, int llvm)
{
    const char *file = NULL;
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    if (llvm)
        opt.backend = "llvm";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (llvm && strcmp(a, "--opt") == 0 && i + 1 < argc &&
            argv[i + 1][0] >= '1' && argv[i + 1][0] <= '3' && !argv[i + 1][1])
            opt.opt_level = argv[++i][0] - '0';
        else if (llvm && strcmp(a, "--fast-math") == 0)
            opt.fast_math = 1;
        else if (strcmp(a, "--passes") == 0 && i + 1 < argc)
            opt.passes = argv[++i];   /* as kiln run --passes */
        else if (strcmp(a, "--policy") == 0 && i + 1 < argc)
            opt.policy_file = argv[++i];
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kiln: unknown or incomplete option '%s'\n%s", a,
                    usage_text);
            return 2;
        } else if (!file)
            file = a;
        else {
            fprintf(stderr, "kiln: more than one model file ('%s', '%s')\n",
                    file, a);
            return 2;
        }
    }
    if (!file) {
        fputs(usage_text, stderr);
        return 2;
    }
    opt.model_path = file;   /* FILE.policy.yaml next to it, as kiln run */
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_file(file, &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    int rc = llvm ? kiln_emit_text_graph(g, &opt, stdout, &err)
                  : kiln_emit_c_graph(g, &opt, stdout, &err);
    kiln_graph_free(g);
    if (rc) {
        fflush(stdout);
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

/* kiln emit-c FILE.kg: the C generated for every kernel (docs/kiln.1) */
static int cmd_emit_c(int argc, char **argv)
{
    return cmd_emit(argc, argv, 0);
}

/* kiln emit-llvm FILE.kg: the llvm backend's IR of every kernel */
static int cmd_emit_llvm(int argc, char **argv)
{
    return cmd_emit(argc, argv, 1);
}

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

void kiln_cli_data_error(const char *path, const char *message)
{
    size_t n = path ? strlen(path) : 0;
    const char *ext = n > 4 ? path + n - 4 : "";
    int file = strcmp(ext, ".csv") == 0 || strcmp(ext, ".CSV") == 0 ||
               strcmp(ext, ".npy") == 0;
    fprintf(stderr, "kiln: --data: %s%s\n", message,
            file ? " (--data takes CmdStan JSON; a CSV column or .npy "
                   "file is read in the model: shared y: f64[N] = "
                   "csv(\"FILE.csv\", \"y\"), npy(\"FILE.npy\"))" : "");
}

/* --data FILE.json: every shared value of g without a value that the file
 * has is bound from it (core/front/json.c).  The data (kept for the sizes of
 * --random-inputs; the caller frees it), or NULL with a message. */
static kiln_json_data *bind_data(kiln_graph *g, const char *path,
                                 const kiln_read_options *opt)
{
    kiln_err err = {0, ""};
    kiln_json_data *d = kiln_json_data_read(path, opt, &err);
    if (!d || kiln_json_data_bind_graph(g, d, NULL, &err)) {
        kiln_cli_data_error(path, err.message);
        kiln_json_data_free(d);
        return NULL;
    }
    /* a shared value still without a value: the file lacks it (say what
     * the file has, and the closest name) */
    if (kiln_cli_data_missing(g, d)) {
        kiln_json_data_free(d);
        return NULL;
    }
    return d;
}

/* --inputs POINT.json: the inputs the file names, by name, into in[]
 * (those not already given with -i).  A name that is no input of f is an
 * error naming it.  0, or 1 with a message. */
static int load_inputs_json(const kiln_function *f, const char *path,
                            const kiln_read_options *opt, kiln_tensor *in)
{
    kiln_err err = {0, ""};
    kiln_json_data *d = kiln_json_data_read(path, opt, &err);
    int ni = kiln_function_n_inputs(f), rc = 1;
    if (!d) {
        fprintf(stderr, "kiln: --inputs: %s\n", err.message);
        return 1;
    }
    /* names the model does not have, all of them in one message */
    char unknown[512] = "", inputs[512] = "";
    size_t ul = 0, il = 0;
    int n_unknown = 0;
    const char *first_unknown = "";
    for (int i = 0; i < kiln_json_data_count(d); i++) {
        const char *key = kiln_json_data_key(d, i);
        int found = 0;
        for (int k = 0; k < ni && !found; k++)
            found = strcmp(kiln_function_input_name(f, k), key) == 0;
        if (found)
            continue;
        if (ul < sizeof unknown - 64)
            ul += (size_t)snprintf(unknown + ul, sizeof unknown - ul,
                                   "%s'%s'", n_unknown ? ", " : "",
                                   SHOW(key));
        if (!n_unknown++)
            first_unknown = key;
    }
    if (n_unknown) {
        kiln_suggestion sg;
        char hint[96];
        kiln_suggest_init(&sg, first_unknown, strlen(first_unknown));
        for (int k = 0; k < ni && il < sizeof inputs - 64; k++) {
            il += (size_t)snprintf(inputs + il, sizeof inputs - il, "%s%s",
                                   k ? ", " : "",
                                   kiln_function_input_name(f, k));
            kiln_suggest_offer(&sg, kiln_function_input_name(f, k));
        }
        fprintf(stderr, "kiln: --inputs: %s: the model has no input%s "
                "named %s%s (its inputs: %s)\n", path,
                n_unknown > 1 ? "s" : "", unknown,
                kiln_suggest_text(&sg, hint, sizeof hint),
                ni ? inputs : "none");
        goto done;
    }
    for (int k = 0; k < ni; k++) {
        const char *nm = kiln_function_input_name(f, k);
        if (!kiln_json_data_has(d, nm))
            continue;
        if (in[k].data) {
            fprintf(stderr, "kiln: input '%s' given twice (with -i and in "
                    "--inputs %s)\n", nm, path);
            goto done;
        }
        kiln_dtype dt;
        int rank;
        int64_t dims[KILN_MAX_RANK];
        kiln_function_input_type(f, k, &dt, &rank, dims, NULL);
        if (kiln_json_data_get(d, nm, dt, rank, dims, &in[k], &err)) {
            fprintf(stderr, "kiln: --inputs: %s\n", err.message);
            goto done;
        }
    }
    rc = 0;
done:
    kiln_json_data_free(d);
    return rc;
}

static int run_with(int argc, char **argv, const char **assign);

/* kiln run: the -i values are kept in an array as long as argv (no limit
 * on their number). */
static int cmd_run(int argc, char **argv)
{
    const char **assign = calloc((size_t)argc + 1, sizeof *assign);
    if (!assign) {
        fputs("kiln: out of memory\n", stderr);
        return 1;
    }
#ifdef KILN_WITH_MPI
    /* --mpi-axis / --mpi: MPI_Init before anything prints, so that only
     * rank 0 speaks (tools/kiln_mpi.c) */
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--mpi-axis") == 0 || strcmp(argv[i], "--mpi") == 0) {
            if (kiln_cli_mpi_start()) {
                free(assign);
                return kiln_cli_mpi_end(1);
            }
            break;
        }
#endif
    int rc = run_with(argc, argv, assign);
    free(assign);
#ifdef KILN_WITH_MPI
    rc = kiln_cli_mpi_end(rc);   /* no-op when done: ran it, or no MPI */
#endif
    return rc;
}

static int run_with(int argc, char **argv, const char **assign)
{
    const char *file = NULL, *backend = NULL, *policy_file = NULL;
    const char *data_json = NULL, *inputs_json = NULL, *weights = NULL;
    int n_assign = 0, json = 0, random = 0, repeat = 1, check_grad = 0;
    int jobs = 0, opt_level = 0, fast_math = 0, no_cache = 0;
    const char *passes = NULL;   /* --passes (docs/rewrite.md) */
    int cache_report = 0, generic_target = 0;
    /* tiers (docs/policy.md, "Tiers"); tier_wait < 0: no --tier-wait */
    int tiers = KILN_TIERS_POLICY, tier_threads = 0, tier_report = 0;
    int quiet = 0, trace = 0;
    /* --mpi-axis AXIS / --mpi (the model's declared axis): docs/mpi.md */
    int mpi = 0, mpi_report = 0;
    const char *mpi_axis = NULL, *mpi_opt = NULL;   /* the option given */
#ifndef KILN_WITH_MPI
    (void)mpi_axis;   /* --mpi-axis is refused when built without MPI */
    (void)mpi_opt;
#endif
    double tier_wait = -1;
    unsigned long long seed = 0;
    /* limits on the data files the model and -i @FILE name: the caller's
     * (these flags, $KILN_DATA_MAX_SIZE), never the model's */
    kiln_read_options data;
    memset(&data, 0, sizeof data);
    data.struct_size = sizeof data;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-i") == 0 || strcmp(a, "--input") == 0) &&
            i + 1 < argc) {
            assign[n_assign++] = argv[++i];
        } else if (strcmp(a, "--data") == 0 && i + 1 < argc) {
            if (data_json) {
                fprintf(stderr, "kiln: --data given twice\n");
                return 2;
            }
            data_json = argv[++i];
        } else if (strcmp(a, "--weights") == 0 && i + 1 < argc) {
            if (weights) {
                fprintf(stderr, "kiln: --weights given twice\n");
                return 2;
            }
            weights = argv[++i];
        } else if (strcmp(a, "--inputs") == 0 && i + 1 < argc) {
            if (inputs_json) {
                fprintf(stderr, "kiln: --inputs given twice\n");
                return 2;
            }
            inputs_json = argv[++i];
        } else if (strcmp(a, "--random-inputs") == 0 && i + 1 < argc) {
            char *end;
            const char *sa = argv[++i];
            /* digits only: strtoull would take '', ' 1', '+1' and '-1'
             * (as 2^64 - 1), and saturate on overflow */
            errno = 0;
            seed = strtoull(sa, &end, 10);
            if (sa[0] < '0' || sa[0] > '9' || *end || errno == ERANGE) {
                fprintf(stderr, "kiln: --random-inputs takes a decimal "
                        "unsigned integer seed below 2^64, got '%s'\n", sa);
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
        } else if (strcmp(a, "--policy") == 0 && i + 1 < argc) {
            policy_file = argv[++i];
        } else if ((strcmp(a, "--jobs") == 0 || strcmp(a, "--opt") == 0) &&
                   i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            int is_jobs = a[2] == 'j';
            if (*end || argv[i][0] == 0 || v < (is_jobs ? 1 : 1) ||
                v > (is_jobs ? 1024 : 3)) {
                fprintf(stderr, "kiln: %s takes %s, got '%s'\n", a,
                        is_jobs ? "a thread count >= 1" : "1, 2 or 3",
                        argv[i]);
                return 2;
            }
            if (is_jobs)
                jobs = (int)v;
            else
                opt_level = (int)v;
        } else if (strcmp(a, "--fast-math") == 0) {
            fast_math = 1;
        } else if (strcmp(a, "--tiers") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "policy") == 0)
                tiers = KILN_TIERS_POLICY;
            else if (strcmp(v, "off") == 0)
                tiers = KILN_TIERS_OFF;
            else if (strcmp(v, "baseline") == 0)
                tiers = KILN_TIERS_BASELINE;
            else {
                fprintf(stderr, "kiln: --tiers takes policy, off or baseline, "
                        "got '%s'\n", SHOW(v));
                return 2;
            }
        } else if (strcmp(a, "--tier-threads") == 0 && i + 1 < argc) {
            /* digits only, like --random-inputs: strtol takes ' 4', '+4' */
            char *end;
            const char *v = argv[++i];
            long t = strtol(v, &end, 10);
            if (v[0] < '0' || v[0] > '9' || *end || t < 1 ||
                t > TIER_THREADS_MAX) {
                fprintf(stderr, "kiln: --tier-threads takes a thread count "
                        "from 1 to %d, got '%s'\n", TIER_THREADS_MAX,
                        SHOW(v));
                return 2;
            }
            tier_threads = (int)t;
        } else if (strcmp(a, "--tier-wait") == 0 && i + 1 < argc) {
            char *end;
            const char *v = argv[++i];
            double w = strtod(v, &end);
            if (!((v[0] >= '0' && v[0] <= '9') || v[0] == '.') || *end ||
                !(w >= 0 && w <= TIER_WAIT_MAX)) {
                fprintf(stderr, "kiln: --tier-wait takes a number of seconds "
                        "from 0 to %d, got '%s'\n", TIER_WAIT_MAX, SHOW(v));
                return 2;
            }
            tier_wait = w;
        } else if (strcmp(a, "--tier-report") == 0) {
            tier_report = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--passes") == 0 && i + 1 < argc) {
            passes = argv[++i];   /* docs/rewrite.md */
        } else if (strcmp(a, "--generic-target") == 0) {
            generic_target = 1;
        } else if (strcmp(a, "--data-max-size") == 0 && i + 1 < argc) {
            if (kiln_cache_parse_size(argv[++i], &data.max_size) != 0 ||
                data.max_size == 0) {
                fprintf(stderr, "kiln: --data-max-size takes a positive size "
                        "(bytes with an optional K, M, G or T suffix, e.g. "
                        "4G), got '%s'\n", SHOW(argv[i]));
                return 2;
            }
        } else if (strcmp(a, "--data-allow-special") == 0) {
            data.allow_special = 1;
        } else if (strcmp(a, "--no-cache") == 0) {
            no_cache = 1;
        } else if (strcmp(a, "--cache-report") == 0) {
            cache_report = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--check-grad") == 0) {
            check_grad = 1;
        } else if (strcmp(a, "--trace-nonfinite") == 0) {
            trace = 1;
        } else if ((strcmp(a, "--mpi-axis") == 0 && i + 1 < argc) ||
                   strcmp(a, "--mpi") == 0 ||
                   strcmp(a, "--mpi-report") == 0) {
#ifndef KILN_WITH_MPI
            fprintf(stderr, "kiln: %s: kiln was built without MPI "
                    "(configure --with-mpi)\n", a);
            return 2;
#else
            if (strcmp(a, "--mpi-report") == 0) {
                mpi_report = 1;
                continue;
            }
            /* one of --mpi-axis AXIS / --mpi, once (the last one won) */
            if (mpi_opt) {
                if (strcmp(mpi_opt, a) == 0)
                    fprintf(stderr, "kiln: %s given twice\n", a);
                else
                    fprintf(stderr, "kiln: --mpi-axis AXIS and --mpi both "
                            "given (--mpi takes the axis the model "
                            "declares): give one\n");
                return 2;
            }
            mpi_opt = a;
            if (strcmp(a, "--mpi-axis") == 0)
                mpi_axis = argv[++i];
            mpi = 1;
#endif
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
    if (mpi_report && !mpi) {
        fprintf(stderr, "kiln: --mpi-report needs --mpi-axis AXIS or --mpi\n");
        return 2;
    }
    if (mpi && (check_grad || trace)) {
        fprintf(stderr, "kiln: %s is not available with %s (run it "
                "without MPI)\n", check_grad ? "--check-grad"
                                              : "--trace-nonfinite",
                mpi_opt);
        return 2;
    }
    rng_state = seed;
    kiln_err err = {0, ""};
    int status = 1;
#ifdef KILN_WITH_MPI
    /* --mpi-axis N: npy() data sized by N read as this rank's rows only
     * (docs/mpi.md "Reading a part's rows"; --mpi's declared axis is
     * known after the parse: read whole) */
    if (mpi && mpi_axis) {
        data.part_axis = mpi_axis;
        data.part_index = kiln_cli_mpi_rank();
        data.part_nparts = kiln_cli_mpi_size();
    }
#endif
    kiln_graph *g = kiln_parse_file_opts(file, &data, &err);
    if (!g) {
        fprintf(stderr, "kiln: %s\n", err.message);
        return 1;
    }
#ifdef KILN_WITH_MPI
    /* every rank reads the same model (digest of its canonical text) and
     * takes its part of the data (docs/mpi.md) */
    char *mpi_text = NULL;
    if (mpi) {
        kiln_partition part = {mpi_axis, kiln_cli_mpi_rank(),
                               kiln_cli_mpi_size()};
        if (!(mpi_text = kiln_graph_print(g, &err)) ||
            kiln_graph_partition(g, &part, &err)) {
            fprintf(stderr, "kiln: %s: %s\n", mpi_opt, err.message);
            free(mpi_text);
            kiln_graph_free(g);
            return 1;
        }
    }
#endif
    /* --weights FILE.safetensors: shared values bound by name, in place
     * (every one must be there unless --data binds the rest) */
    if (weights && kiln_safetensors_bind_graph(g, weights, &data, !data_json,
                                               NULL, &err)) {
        fprintf(stderr, "kiln: --weights: %s\n", err.message);
        kiln_graph_free(g);
        return 1;
    }
    kiln_json_data *bound = NULL;
    if (data_json && !(bound = bind_data(g, data_json, &data))) {
        kiln_graph_free(g);
        return 1;
    }
    /* a backend named with --backend must be there: no fallback */
    if (backend && kiln_cli_require_backend(backend, quiet)) {
        kiln_graph_free(g);
        kiln_json_data_free(bound);
#ifdef KILN_WITH_MPI
        free(mpi_text);
#endif
        return 1;
    }
#ifdef KILN_WITH_MPI
    /* checkpoint 1: every rank parsed, partitioned and bound its data;
     * then the model and the data are the same on every rank */
    if (mpi) {
        /* the data: every value bound (in the .kg, --weights, --data as
         * parsed), whole, digested before its rows were sliced out */
        uint64_t dd = 0;
        kiln_graph_data_digest(g, &dd, NULL);   /* g is not NULL */
        int bad = kiln_cli_mpi_checkpoint(0) ||
                  kiln_cli_mpi_same("the model", mpi_text,
                                    strlen(mpi_text)) ||
                  kiln_cli_mpi_same("the data", &dd, sizeof dd);
        free(mpi_text);
        if (bad) {
            kiln_graph_free(g);
            kiln_json_data_free(bound);
            return 1;
        }
    }
#endif
    kiln_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.backend = backend;
    opt.policy_file = policy_file;
    opt.model_path = file;   /* FILE.policy.yaml next to it */
    opt.jobs = jobs;
    opt.opt_level = opt_level;
    opt.fast_math = fast_math;
    opt.passes = passes;
    if (no_cache)
        opt.cache_mode = KILN_CACHE_MODE_OFF;
    opt.generic_target = generic_target;
    opt.tiers = tiers;
    opt.tier_threads = tier_threads;
    opt.quiet = quiet;
    double t0 = now_ms();
    double tier_wait_ms = 0;   /* --tier-wait's time (under MPI: in the build) */
    kiln_function *f = NULL;
    uint64_t compiles0 = kiln_compile_count();
#ifdef KILN_WITH_MPI
    /* compile once per job: rank 0 compiles first (into the disk cache,
     * its tier-1 compiles waited for), then the others load the cache
     * (checkpoints 2 and 3) */
    if (mpi) {
        /* --tier-wait: rank 0 tiers every kernel up (into the cache)
         * before the others build, so they find the tier-1 code there
         * and tier up from the cache: one compile per job (it ran after
         * the ranks met: every rank compiled) */
        int r0 = kiln_cli_mpi_rank() == 0;
        kiln_cli_mpi_fault_build();
        double w0 = now_ms();
        if (r0 && (f = kiln_compile(g, &opt, &err))) {
            w0 = now_ms();
            if (tier_wait >= 0) {
                (void)kiln_cli_tier_wait(f, tier_wait, quiet);
                tier_wait_ms = now_ms() - w0;
            } else {
                (void)kiln_function_tier_wait(f, kiln_cli_mpi_build_timeout());
            }
        }
        if (r0 && !f)
            fprintf(stderr, "kiln: %s\n", err.message);
        if (kiln_cli_mpi_build_checkpoint(r0 && !f)) {
            kiln_cli_function_free(f, 1);
            kiln_graph_free(g);
            kiln_json_data_free(bound);
            return 1;
        }
        if (!r0 && !(f = kiln_compile(g, &opt, &err)))
            fprintf(stderr, "kiln: %s\n", err.message);
        if (!r0 && f && tier_wait >= 0) {
            w0 = now_ms();
            (void)kiln_cli_tier_wait(f, tier_wait, quiet);
            tier_wait_ms = now_ms() - w0;
        }
        if (kiln_cli_mpi_build_checkpoint(!f)) {
            kiln_cli_function_free(f, 1);
            kiln_graph_free(g);
            kiln_json_data_free(bound);
            return 1;
        }
    } else
#endif
        f = kiln_compile(g, &opt, &err);
    double compile_ms = now_ms() - t0 - tier_wait_ms;
    if (!f) {
        fprintf(stderr, "kiln: %s\n", err.message);
        kiln_graph_free(g);
        kiln_json_data_free(bound);
        return 1;
    }
#ifdef KILN_WITH_MPI
    if (mpi) {
        long long mine = (long long)(kiln_compile_count() - compiles0);
        long long job = kiln_cli_mpi_job_total(mine);
        if (mpi_report && kiln_cli_mpi_rank() == 0)
            fprintf(stderr, "kiln: mpi: %d rank%s; compiles: %lld in the "
                    "job, %lld on rank 0\n", kiln_cli_mpi_size(),
                    kiln_cli_mpi_size() == 1 ? "" : "s", job, mine);
    }
#else
    (void)compiles0;
#endif
    if (cache_report)
        kiln_cli_cache_report(f, stderr);
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
                    SHOW(assign[a]));
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
            kiln_cli_no_input(f, g, assign[a], (size_t)(eq - assign[a]));
            goto done;
        }
        if (in[idx].data) {
            fprintf(stderr, "kiln: input '%s' given twice\n",
                    kiln_function_input_name(f, idx));
            goto done;
        }
        if (load_value(f, idx, eq + 1, &data, bound, &in[idx]))
            goto done;
    }
    /* --inputs POINT.json */
    if (inputs_json && load_inputs_json(f, inputs_json, &data, in))
        goto done;
    /* missing inputs */
    {
        char missing[2048] = "";
        size_t len = 0;
        int n_missing = 0;
        for (int k = 0; k < ni; k++) {
            if (in[k].data)
                continue;
            if (random) {
                if (random_value(f, k, bound, &in[k]))
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
            fprintf(stderr, "kiln: missing input%s: %s (give -i NAME=VALUE, "
                    "--inputs POINT.json or --random-inputs SEED)\n",
                    n_missing > 1 ? "s" : "", missing);
            goto done;
        }
    }
    /* --tier-wait: every kernel with a tier-1 backend is compiled (into
     * the disk cache) before the timed calls, or the time is up */
#ifdef KILN_WITH_MPI
    /* checkpoint 4: every rank has its inputs, and the same ones (they
     * are not sized by the axis: inputs that differ per rank, a -i or an
     * --inputs file of its own, would be summed over the ranks into a
     * wrong number; found by an attack) */
    if (mpi) {
        kiln_cli_mpi_fault();
        if (kiln_cli_mpi_checkpoint(0))
            goto done;
        size_t ib = 0, at = 0;
        for (int k = 0; k < ni; k++)
            ib += sizeof in[k].dtype + sizeof in[k].rank +
                  sizeof in[k].shape[0] * (size_t)in[k].rank +
                  (size_t)kiln_shape_numel(in[k].rank, in[k].shape) *
                      kiln_dtype_size(in[k].dtype);
        unsigned char *ibuf = malloc(ib ? ib : 1);
        for (int k = 0; ibuf && k < ni; k++) {
            size_t nb = (size_t)kiln_shape_numel(in[k].rank, in[k].shape) *
                        kiln_dtype_size(in[k].dtype);
            memcpy(ibuf + at, &in[k].dtype, sizeof in[k].dtype);
            at += sizeof in[k].dtype;
            memcpy(ibuf + at, &in[k].rank, sizeof in[k].rank);
            at += sizeof in[k].rank;
            memcpy(ibuf + at, in[k].shape,
                   sizeof in[k].shape[0] * (size_t)in[k].rank);
            at += sizeof in[k].shape[0] * (size_t)in[k].rank;
            if (nb)
                memcpy(ibuf + at, in[k].data, nb);
            at += nb;
        }
        int bad = kiln_cli_mpi_same("the inputs", ibuf ? (void *)ibuf : "",
                                    ibuf ? at : 0);
        free(ibuf);
        if (bad)
            goto done;
    }
#endif
    if (tier_wait >= 0 && !mpi) {
        double w0 = now_ms();
        (void)kiln_cli_tier_wait(f, tier_wait, quiet);
        tier_wait_ms = now_ms() - w0;
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
#ifdef KILN_WITH_MPI
    /* an empty part but part 0 adds exactly 0 (its evaluation could give
     * 0 * -inf = NaN: docs/mpi.md "What is split") */
    int64_t pb = 0, pe = 0;
    if (mpi && kiln_cli_mpi_rank() != 0 &&
        kiln_graph_partition_rows(g, NULL, &pb, &pe) && pb == pe)
        for (int k = 0; k < no; k++)
            memset(out[k].data, 0,
                   (size_t)kiln_shape_numel(out[k].rank, out[k].shape) *
                       kiln_dtype_size(out[k].dtype));
    /* checkpoint 5: every rank's calls succeeded; the outputs summed */
    if (mpi && (kiln_cli_mpi_checkpoint(0) ||
                kiln_cli_mpi_sum_outputs(out, no)))
        goto done;
#endif
    double first = times[0];
    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
    double median = repeat % 2 ? times[repeat / 2]
                               : 0.5 * (times[repeat / 2 - 1] +
                                        times[repeat / 2]);
    if (json) {
        printf("{\"outputs\": {");
        for (int k = 0; k < no; k++) {
            printf("%s", k ? ", " : "");
            kiln_cli_json_str(stdout, kiln_function_output_name(f, k));
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
               "%.6f, \"call_ms_median\": %.6f, \"repeat\": %d",
               compile_ms, first, median, repeat);
        if (tier_wait >= 0)
            printf(", \"tier_wait_ms\": %.6f", tier_wait_ms);
        printf("}");
        if (check_grad) {
            printf(", \"check_grad\": [");
            for (int r = 0; r < n_rows; r++) {
                printf("%s{\"input\": ", r ? ", " : "");
                kiln_cli_json_str(stdout, rows[r].input);
                printf(", \"output\": ");
                kiln_cli_json_str(stdout, rows[r].output);
                printf(", \"gradient\": ");
                kiln_cli_json_str(stdout, rows[r].gradient);
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
        printf(", \"tiers\": ");
        if (kiln_cli_tier_json(f, stdout)) {
            fprintf(stderr, "kiln: no tier information for the kernels\n");
            goto done;
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
        if (!tier_report && !quiet)     /* one line; --tier-report: each */
            kiln_cli_tier_summary(f, stderr);
        if (tier_report && kiln_cli_tier_report(f, stdout, 1,
                                                tiers == KILN_TIERS_BASELINE)) {
            fprintf(stderr, "kiln: no tier information for the kernels\n");
            goto done;
        }
    }
    /* --trace-nonfinite: g evaluated node by node on the interpreter */
    if (trace) {
        int found = 0;
        fflush(stdout);
        /* with --json the report goes to stderr: stdout stays JSON */
        if (kiln_trace_nonfinite(g, file, in, NULL, 0,
                                 json ? stderr : stdout, &found, &err)) {
            fprintf(stderr, "kiln: --trace-nonfinite: %s\n", err.message);
            goto done;
        }
    }
    if (n_bad) {
        fprintf(stderr, "kiln: check-grad: %d gradient%s differ%s from "
                "finite differences by more than %g\n", n_bad,
                n_bad == 1 ? "" : "s", n_bad == 1 ? "s" : "", CHECK_GRAD_TOL);
        goto done;
    }
    status = 0;
done:
#ifdef KILN_WITH_MPI
    /* the last checkpoint before kiln_cli_function_free may _exit */
    if (mpi)
        status = kiln_cli_mpi_end(status);
#endif
    for (int k = 0; in && k < ni; k++)
        free(in[k].data);
    free(in);
    free(out);
    free(times);
    free(rows);
    kiln_graph_free(g);
    kiln_json_data_free(bound);
    kiln_cli_function_free(f, status);
    return status;
}

/* `--name=value` is `--name value`, for every command: a copy of argv
 * with such arguments (after the command) split at the first '='.  One
 * allocation holds the vector and the copied names (free it); the values
 * point into argv.  NULL when out of memory. */
static char **split_long_options(int argc, char **argv, int *out_argc)
{
    size_t names = 0;
    for (int i = 2; i < argc; i++) {
        const char *eq = strncmp(argv[i], "--", 2) == 0
                             ? strchr(argv[i], '=') : NULL;
        if (eq && eq > argv[i] + 2)
            names += (size_t)(eq - argv[i]) + 1;
    }
    size_t vec = sizeof(char *) * (2 * (size_t)argc + 1);
    char **v = malloc(vec + names);
    if (!v)
        return NULL;
    char *pool = (char *)v + vec;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *eq = i >= 2 && strncmp(argv[i], "--", 2) == 0
                             ? strchr(argv[i], '=') : NULL;
        if (eq && eq > argv[i] + 2) {
            size_t k = (size_t)(eq - argv[i]);
            memcpy(pool, argv[i], k);
            pool[k] = 0;
            v[n++] = pool;
            pool += k + 1;
            v[n++] = (char *)eq + 1;
        } else {
            v[n++] = argv[i];
        }
    }
    v[n] = NULL;
    *out_argc = n;
    return v;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    int n = 0;
    char **split = split_long_options(argc, argv, &n);
    if (!split) {
        fputs("kiln: out of memory\n", stderr);
        return 1;
    }
    int rc = dispatch(n, split);
    free(split);
    return rc;
}

/* The BLAS this process runs (the library behind cblas_dgemm, OpenBLAS's
 * configuration and threads) and the matrix-vector products kiln's own
 * loop takes instead (docs/backends.md "BLAS"). */
static void print_blas(void)
{
    const kiln_blas_info *b = kiln_blas_get();
    if (b->openblas)
        printf("BLAS: %s (OpenBLAS: %s; %d thread%s%s)\n", b->library,
               b->config, b->threads, b->threads == 1 ? "" : "s",
               b->threads_set ? ", set by kiln" : "");
    else
        printf("BLAS: %s (not OpenBLAS)\n", b->library);
    printf("matrix-vector loop: A x of %lld to %lld columns, A^T y of "
           "%lld to %lld (the built-in table for this BLAS; a policy's blas: "
           "overrides it)\n",
           (long long)kiln_gemv_default_min_cols(b->openblas),
           (long long)kiln_gemv_default_max_cols(b->openblas, 0),
           (long long)kiln_gemv_default_min_cols(b->openblas),
           (long long)kiln_gemv_default_max_cols(b->openblas, 1));
}

static int dispatch(int argc, char **argv)
{
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("kiln %s (plugin ABI %d.%d)\n", KILN_VERSION_STRING,
               KILN_ABI_MAJOR, KILN_ABI_MINOR);
        print_blas();
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    /* `kiln run --help` and the like: the manual's summary, not an error */
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "emit-c") == 0)
        return cmd_emit_c(argc - 2, argv + 2);
    if (strcmp(cmd, "emit-llvm") == 0)
        return cmd_emit_llvm(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 2, argv + 2);
    if (strcmp(cmd, "explain") == 0)
        return kiln_cli_explain(argc - 2, argv + 2);
    if (strcmp(cmd, "cache") == 0)
        return kiln_cli_cache(argc - 2, argv + 2);
    if (strcmp(cmd, "compile") == 0)
        return kiln_cli_compile(argc - 2, argv + 2);
    if (strcmp(cmd, "policy") == 0)
        return kiln_cli_policy(argc - 2, argv + 2);
    if (strcmp(cmd, "bridgestan") == 0)
        return kiln_cli_bridgestan(argc - 2, argv + 2);
    if (strcmp(cmd, "model") == 0)
        return kiln_cli_model(argc - 2, argv + 2);
    if (strcmp(cmd, "generate") == 0)   /* issue 29 */
        return kiln_cli_generate(argc - 2, argv + 2);
    static const char *const commands[] = {
        "run", "model", "compile", "check", "explain", "cache", "policy",
        "bridgestan", "emit-c", "emit-llvm", "generate", "help", "version"};
    const char *near = kiln_suggest(cmd, commands,
                                    (int)(sizeof commands / sizeof *commands));
    char quoted[EXCERPT_SIZE(EXCERPT_MAX)];
    excerpt(quoted, sizeof quoted, cmd, strlen(cmd), EXCERPT_MAX);
    if (near)
        fprintf(stderr, "kiln: unknown command '%s'; did you mean '%s'?\n%s",
                quoted, near, usage_text);
    else
        fprintf(stderr, "kiln: unknown command '%s'\n%s", quoted, usage_text);
    return 2;
}
