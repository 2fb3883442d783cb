/*
 * json.c — CmdStan JSON data (see <kiln/io.h>, docs/ir.md "Data").
 *
 * json-c parses the text in strict mode (no comments, trailing commas or
 * trailing characters; UTF-8 checked), which still reads the bare NaN,
 * Infinity and -Infinity that CmdStan writes.  A pass over the text json-c
 * accepted then finds what json-c's tree hides: a duplicate key in any object
 * (json-c keeps the last value) and an integer outside the range json-c
 * stores (it saturates such a number).  Every variable is then checked
 * (rectangular, rank, numeric leaves) and copied into a flat C-ordered
 * array of numbers, each with its kind (an integer, an integer above
 * INT64_MAX, a real), and json-c's tree is freed.  kiln_json_data_get only
 * converts: a data set is never written after parsing, so any number of
 * threads may read it.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/io.h>

#include "datafile.h"
#include "excerpt.h"
#include "ir.h"
#include "jsondata.h"
#include "suggest.h"

#include <json-c/json.h>

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* json-c's nesting limit: the top-level object and arrays of any rank kiln
 * reads fit with room to spare (so that "rank 12 exceeds ..." is said in
 * words), and json-c's tree, freed recursively, stays shallow.  Deeper
 * text is json-c's "nesting too deep" at its position. */
#define JSON_DEPTH 64

/* Bytes of the variable list a "no variable" message shows at most. */
#define JSON_KEYS_EXCERPT 64

/* A short escaped excerpt of n bytes at s (excerpt.h). */
#define SHOW(buf, s, n) excerpt(buf, sizeof buf, s, n, EXCERPT_MAX)

enum { JN_INT, JN_UINT, JN_REAL };   /* kinds of number */

typedef union jnum {
    int64_t i;    /* JN_INT */
    uint64_t u;   /* JN_UINT: above INT64_MAX */
    double d;     /* JN_REAL */
} jnum;

typedef struct jvar {
    char *name;
    int rank;
    int64_t shape[KILN_MAX_RANK];
    int64_t numel;
    int is_int;
    jnum *val;             /* numel values, C order */
    unsigned char *kind;   /* numel kinds */
} jvar;

struct kiln_json_data {
    char *file;
    int n;
    jvar *vars;    /* in the file's order */
    jvar **sorted; /* the vars sorted by name, for lookups */
};

/* ---- small helpers ---------------------------------------------------- */

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Line and column (both from 1; the column in bytes) of byte `at`. */
static void line_col(const char *s, size_t at, int *line, int *col)
{
    size_t start = 0;
    int l = 1;
    for (size_t i = 0; i < at; i++)
        if (s[i] == '\n') {
            l++;
            start = i + 1;
        }
    *line = l;
    *col = (int)(at - start + 1);
}

/* "[1][0]" for the index path p[0..n-1]. */
static const char *fmt_path(char *buf, size_t size, const int64_t *p, int n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k < size; i++) {
        int w = snprintf(buf + k, size - k, "[%" PRId64 "]", p[i]);
        if (w < 0)
            break;
        k += (size_t)w;
    }
    return buf;
}

/* A real as short as reads back the same, marked as a real ("2.0"). */
static const char *fmt_real(char *buf, size_t size, double v)
{
    if (isnan(v))
        snprintf(buf, size, "NaN");
    else if (isinf(v))
        snprintf(buf, size, v > 0 ? "Infinity" : "-Infinity");
    else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, size, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
        for (char *c = buf; *c; c++)   /* a locale's decimal comma */
            if (*c == ',')
                *c = '.';
        if (!strpbrk(buf, ".e"))
            strncat(buf, ".0", size - strlen(buf) - 1);
    }
    return buf;
}

static const char *fmt_num(char *buf, size_t size, jnum v, int kind)
{
    if (kind == JN_INT)
        snprintf(buf, size, "%" PRId64, v.i);
    else if (kind == JN_UINT)
        snprintf(buf, size, "%" PRIu64, v.u);
    else
        fmt_real(buf, size, v.d);
    return buf;
}

/* "f64[8, ?]": a negative dim (a symbol) is '?'. */
static const char *fmt_type(char *buf, size_t size, kiln_dtype dt, int rank,
                            const int64_t *dims)
{
    size_t k = (size_t)snprintf(buf, size, "%s", kiln_dtype_name(dt));
    for (int i = 0; i < rank && k < size; i++) {
        int w = dims[i] >= 0
                    ? snprintf(buf + k, size - k, "%s%" PRId64,
                               i ? ", " : "[", dims[i])
                    : snprintf(buf + k, size - k, "%s?", i ? ", " : "[");
        if (w < 0)
            break;
        k += (size_t)w;
    }
    if (rank > 0 && k < size)
        snprintf(buf + k, size - k, "]");
    return buf;
}

/* "(2, 3)" */
static const char *fmt_shape(char *buf, size_t size, int rank,
                             const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < rank && k < size; i++) {
        int w = snprintf(buf + k, size - k, "%s%" PRId64, i ? ", " : "",
                         shape[i]);
        if (w < 0)
            break;
        k += (size_t)w;
    }
    if (k < size)
        snprintf(buf + k, size - k, ")");
    return buf;
}

static void data_free(kiln_json_data *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n; i++) {
        free(d->vars[i].name);
        free(d->vars[i].val);
        free(d->vars[i].kind);
    }
    free(d->vars);
    free(d->sorted);
    free(d->file);
    free(d);
}

void kiln_json_data_free(kiln_json_data *d)
{
    data_free(d);
}

/* ---- the pass over the text json-c accepted ----------------------------- */

/* A key: its bytes, quotes included, and where its object's '{' is (0
 * for the top level's, which may follow a byte order mark). */
typedef struct jkey {
    size_t at, len, owner;
} jkey;

/* Is the integer literal s[0..n-1] outside -2^63 .. 2^64 - 1, the numbers
 * json-c stores (it saturates the others)?  A run with '.', 'e' or 'E' is
 * a real. */
static int int_out_of_range(const char *s, size_t n)
{
    if (memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n))
        return 0;
    int neg = n > 0 && s[0] == '-';
    const char *dg = s + neg;
    size_t nd = n - (size_t)neg;
    while (nd > 1 && dg[0] == '0') {
        dg++;
        nd--;
    }
    const char *lim = neg ? "9223372036854775808" : "18446744073709551615";
    size_t ll = strlen(lim);
    if (nd == 0)
        return 0;
    if (nd != ll)
        return nd > ll;
    return memcmp(dg, lim, ll) > 0;
}

/* Walk the text from byte `start` (after a byte order mark): collect the
 * keys of every object (refusing a NUL in one, and single quotes) and refuse
 * integers json-c could not store.  The text is JSON json-c accepted. */
static int scan_text(const char *s, size_t start, size_t n, const char *file,
                     jkey **keys_out, int *nkeys_out, kiln_err *err)
{
    char stack[JSON_DEPTH + 8];
    size_t own[JSON_DEPTH + 8];
    int depth = 0, want_key = 0, nkeys = 0, cap = 0;
    jkey *keys = NULL;
    char shown[EXCERPT_SIZE(EXCERPT_MAX)];
    int line, col, rc = 0;

    for (size_t i = start; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') {
            size_t j = i + 1;
            int nul = 0;
            while (j < n && s[j] != '"') {
                if (s[j] == '\\') {
                    if (j + 5 < n && s[j + 1] == 'u' &&
                        memcmp(s + j + 2, "0000", 4) == 0)
                        nul = 1;
                    j += 2;
                } else {
                    j++;
                }
            }
            if (want_key && depth >= 1) {
                if (nul) {
                    line_col(s, i, &line, &col);
                    rc = kiln_seterr(err, KILN_ERR_PARSE,
                                     "%s:%d:%d: key %s has a NUL character "
                                     "(\\u0000)", file, line, col,
                                     SHOW(shown, s + i, j + 1 - i));
                    goto fail;
                }
                if (nkeys == cap) {
                    int nc = cap ? 2 * cap : 16;
                    jkey *nk = realloc(keys, (size_t)nc * sizeof *nk);
                    if (!nk) {
                        rc = kiln_seterr(err, KILN_ERR_NOMEM,
                                         "%s: out of memory", file);
                        goto fail;
                    }
                    keys = nk;
                    cap = nc;
                }
                keys[nkeys].at = i;
                keys[nkeys].len = j + 1 - i;
                keys[nkeys].owner = depth == 1 ? 0
                    : depth <= (int)sizeof stack ? own[depth - 1] : 1;
                nkeys++;
            }
            want_key = 0;
            i = j + 1;
            continue;
        }
        if (c == '\'' && want_key) {
            /* json-c takes 'x' as a key even in strict mode */
            line_col(s, i, &line, &col);
            rc = kiln_seterr(err, KILN_ERR_PARSE, "%s:%d:%d: a key in single "
                             "quotes (JSON strings are in double quotes)",
                             file, line, col);
            goto fail;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < n && (strchr("0123456789+-.eE", s[j]) && s[j]))
                j++;
            if (int_out_of_range(s + i, j - i)) {
                line_col(s, i, &line, &col);
                rc = kiln_seterr(err, KILN_ERR_PARSE,
                                 "%s:%d:%d: integer %s is out of range "
                                 "(integers must lie within -2^63 .. 2^64 - "
                                 "1; write a larger number as a real, e.g. "
                                 "1e30)", file, line, col,
                                 SHOW(shown, s + i, j - i));
                goto fail;
            }
            i = j;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth < (int)sizeof stack) {
                stack[depth] = (char)c;
                own[depth] = i;
            }
            depth++;
            want_key = c == '{';
        } else if (c == '}' || c == ']') {
            depth--;
            want_key = 0;
        } else if (c == ',') {
            want_key = depth > 0 && depth <= (int)sizeof stack &&
                       stack[depth - 1] == '{';
        }
        i++;
    }
    *keys_out = keys;
    *nkeys_out = nkeys;
    return 0;
fail:
    free(keys);
    return rc;
}

/* The first key that repeats an earlier one of its object: its error, or
 * 0 when there is none (an error when `must`: json-c's top-level object
 * has fewer members than the text has keys).  Each key is decoded by
 * json-c, so "a" and "\u0061" are the same key. */
static int find_duplicate(const char *s, const jkey *keys, int nkeys,
                          int must, const char *file, kiln_err *err)
{
    json_tokener *tok = json_tokener_new();
    json_object *seen = json_object_new_object();
    int rc = 0;
    char shown[EXCERPT_SIZE(EXCERPT_MAX)];

    if (!tok || !seen) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", file);
        goto done;
    }
    for (int i = 0; i < nkeys && !rc; i++) {
        json_tokener_reset(tok);
        json_object *k = json_tokener_parse_ex(tok, s + keys[i].at,
                                               (int)keys[i].len);
        json_object *prev = NULL;
        const char *ks = k ? json_object_get_string(k) : NULL;
        /* the key within its object: "<owner>:<key>" */
        char *ok = ks ? malloc(strlen(ks) + 24) : NULL;
        if (ok)
            sprintf(ok, "%zu:%s", keys[i].owner, ks);
        if (!ks || !ok) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", file);
        } else if (json_object_object_get_ex(seen, ok, &prev)) {
            int line, col, pline, pcol;
            line_col(s, keys[i].at, &line, &col);
            line_col(s, keys[json_object_get_int(prev)].at, &pline, &pcol);
            rc = kiln_seterr(err, KILN_ERR_PARSE,
                             "%s:%d:%d: duplicate key '%s' (first at line "
                             "%d)", file, line, col,
                             SHOW(shown, ks, strlen(ks)), pline);
        } else {
            json_object *iv = json_object_new_int(i);
            if (!iv || json_object_object_add(seen, ok, iv) != 0) {
                json_object_put(iv);
                rc = kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory",
                                 file);
            }
        }
        free(ok);
        json_object_put(k);
    }
    if (!rc && must)   /* cannot happen: json-c merged keys the pass sees apart */
        rc = kiln_seterr(err, KILN_ERR_PARSE, "%s: the top-level keys do "
                         "not match the object json-c read", file);
done:
    json_object_put(seen);
    if (tok)
        json_tokener_free(tok);
    return rc;
}

/* ---- variables ---------------------------------------------------------- */

/* One leaf as a number: 0, or -1 when it is not one. */
static int leaf_number(json_object *o, jnum *v, unsigned char *kind)
{
    switch (json_object_get_type(o)) {
    case json_type_int: {
        int64_t i = json_object_get_int64(o);
        if (i == INT64_MAX) {
            uint64_t u = json_object_get_uint64(o);
            if (u > (uint64_t)INT64_MAX) {
                v->u = u;
                *kind = JN_UINT;
                return 0;
            }
        }
        v->i = i;
        *kind = JN_INT;
        return 0;
    }
    case json_type_double:
        v->d = json_object_get_double(o);
        *kind = JN_REAL;
        return 0;
    case json_type_string: {
        static const char *const names[] = {"nan", "inf", "-inf", "infinity",
                                            "-infinity"};
        static const double vals[] = {NAN, INFINITY, -INFINITY, INFINITY,
                                      -INFINITY};
        const char *s = json_object_get_string(o);
        size_t n = (size_t)json_object_get_string_len(o);
        for (size_t k = 0; s && k < sizeof names / sizeof names[0]; k++)
            if (n == strlen(names[k]) && strcasecmp(s, names[k]) == 0) {
                v->d = vals[k];
                *kind = JN_REAL;
                return 0;
            }
        return -1;
    }
    default:
        return -1;
    }
}

/* What a leaf that is not a number is: "a string of 3 bytes", "null", ... */
static const char *not_number_desc(json_object *o, char *buf, size_t size)
{
    switch (json_object_get_type(o)) {
    case json_type_string:
        /* its content is not shown (a value of the file) */
        snprintf(buf, size, "a string of %zu bytes",
                 (size_t)json_object_get_string_len(o));
        break;
    case json_type_boolean:
        snprintf(buf, size, "a boolean (%s)",
                 json_object_get_boolean(o) ? "true" : "false");
        break;
    case json_type_null: snprintf(buf, size, "null"); break;
    case json_type_object: snprintf(buf, size, "an object"); break;
    case json_type_array: snprintf(buf, size, "an array"); break;
    default: snprintf(buf, size, "a number"); break;
    }
    return buf;
}

typedef struct walk_ctx {
    jvar *v;
    const char *file;
    const char *shown_name;   /* the variable's name as an excerpt */
    int64_t path[KILN_MAX_RANK];
    int64_t pos;
    kiln_err *err;
} walk_ctx;

/* "element 2 of axis 0" / "element [1][2] of axis 1" (the element at
 * path[0..depth-1]), and the element the shape was read from. */
static void ragged_names(const walk_ctx *c, int depth, char *el, size_t esz,
                         char *first, size_t fsz)
{
    int64_t zeros[KILN_MAX_RANK] = {0};
    if (depth == 1) {
        snprintf(el, esz, "element %" PRId64 " of axis 0", c->path[0]);
        snprintf(first, fsz, "element 0");
    } else {
        char p[KILN_MAX_RANK * 24], z[KILN_MAX_RANK * 24];
        snprintf(el, esz, "element %s of axis %d",
                 fmt_path(p, sizeof p, c->path, depth), depth - 1);
        snprintf(first, fsz, "element %s",
                 fmt_path(z, sizeof z, zeros, depth));
    }
}

static int walk(walk_ctx *c, json_object *o, int depth)
{
    jvar *v = c->v;
    char el[KILN_MAX_RANK * 24 + 32], first[KILN_MAX_RANK * 24 + 16];
    char what[EXCERPT_SIZE(EXCERPT_MAX) + 32];
    int is_array = json_object_is_type(o, json_type_array);

    if (depth == v->rank) {
        if (is_array) {
            ragged_names(c, depth, el, sizeof el, first, sizeof first);
            return kiln_seterr(c->err, KILN_ERR_PARSE,
                               "%s: variable '%s': ragged array: %s is an "
                               "array, %s is a number", c->file,
                               c->shown_name, el, first);
        }
        if (leaf_number(o, &v->val[c->pos], &v->kind[c->pos])) {
            char p[KILN_MAX_RANK * 24];
            fmt_path(p, sizeof p, c->path, depth);
            return kiln_seterr(c->err, KILN_ERR_PARSE,
                               "%s: variable '%s': %s%s is %s, not a number",
                               c->file, c->shown_name,
                               depth ? "element " : "the value",
                               depth ? p : "",
                               not_number_desc(o, what, sizeof what));
        }
        if (v->kind[c->pos] == JN_REAL)
            v->is_int = 0;
        c->pos++;
        return 0;
    }
    if (!is_array) {
        jnum dummy;
        unsigned char k;
        if (leaf_number(o, &dummy, &k) == 0) {
            ragged_names(c, depth, el, sizeof el, first, sizeof first);
            return kiln_seterr(c->err, KILN_ERR_PARSE,
                               "%s: variable '%s': ragged array: %s is a "
                               "number, %s has %" PRId64 " entries", c->file,
                               c->shown_name, el, first, v->shape[depth]);
        }
        char p[KILN_MAX_RANK * 24];
        return kiln_seterr(c->err, KILN_ERR_PARSE,
                           "%s: variable '%s': element %s is %s, not a "
                           "number", c->file, c->shown_name,
                           fmt_path(p, sizeof p, c->path, depth),
                           not_number_desc(o, what, sizeof what));
    }
    size_t len = json_object_array_length(o);
    if ((int64_t)len != v->shape[depth]) {
        ragged_names(c, depth, el, sizeof el, first, sizeof first);
        return kiln_seterr(c->err, KILN_ERR_PARSE,
                           "%s: variable '%s': ragged array: %s has %zu "
                           "entries, %s has %" PRId64, c->file,
                           c->shown_name, el, len, first, v->shape[depth]);
    }
    for (size_t i = 0; i < len; i++) {
        c->path[depth] = (int64_t)i;
        int rc = walk(c, json_object_array_get_idx(o, i), depth + 1);
        if (rc)
            return rc;
    }
    return 0;
}

/* Check variable `name` = o and copy it into *v. */
static int make_var(jvar *v, const char *name, json_object *o,
                    const char *file, kiln_err *err)
{
    char shown[EXCERPT_SIZE(EXCERPT_MAX)];
    int rank = 0;
    json_object *cur = o;

    memset(v, 0, sizeof *v);
    SHOW(shown, name, strlen(name));
    /* the shape, along the first elements; an empty array ends it */
    while (json_object_is_type(cur, json_type_array)) {
        size_t len = json_object_array_length(cur);
        if (rank < KILN_MAX_RANK)
            v->shape[rank] = (int64_t)len;
        rank++;
        if (len == 0)
            break;
        cur = json_object_array_get_idx(cur, 0);
    }
    if (rank > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: variable '%s': rank %d "
                           "exceeds KILN_MAX_RANK (%d)", file, shown, rank,
                           KILN_MAX_RANK);
    v->rank = rank;
    /* each dim counts elements of the text: the product cannot overflow
     * unless one is 0 */
    v->numel = 1;
    for (int i = 0; i < rank; i++)
        v->numel *= v->shape[i];
    v->is_int = 1;
    v->name = strdup(name);
    v->val = malloc(v->numel ? (size_t)v->numel * sizeof *v->val : 1);
    v->kind = malloc(v->numel ? (size_t)v->numel : 1);
    if (!v->name || !v->val || !v->kind)
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", file);
    walk_ctx c;
    memset(&c, 0, sizeof c);
    c.v = v;
    c.file = file;
    c.shown_name = shown;
    c.err = err;
    return walk(&c, o, 0);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp((*(jvar *const *)a)->name, (*(jvar *const *)b)->name);
}

static const char *type_word(json_object *o)
{
    switch (json_object_get_type(o)) {
    case json_type_array: return "an array";
    case json_type_string: return "a string";
    case json_type_boolean: return "a boolean";
    case json_type_null: return "null";
    case json_type_object: return "an object";
    default: return "a number";
    }
}

/* ---- parsing ------------------------------------------------------------ */

/* json-c's error at byte `at` (len: at the end of the text). */
static int json_c_error(const char *text, size_t len, size_t at,
                        const char *reason, const char *file, kiln_err *err)
{
    int line, col;
    if (at > len)
        at = len;
    line_col(text, at, &line, &col);
    if (at < len && text[at] == '\0')
        return kiln_seterr(err, KILN_ERR_PARSE, "%s:%d:%d: NUL byte in the "
                           "text", file, line, col);
    if (at >= len)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s:%d:%d: %s", file, line,
                           col, reason);
    /* the text is not quoted: the file may be no JSON at all (a model
     * may name any file) and its content stays out of messages */
    return kiln_seterr(err, KILN_ERR_PARSE, "%s:%d:%d: %s", file, line, col,
                       reason);
}

int kiln_json_strict_object(const char *text, size_t len, const char *file,
                            struct json_object **out, kiln_err *err)
{
    json_tokener *tok = NULL;
    json_object *root = NULL;
    jkey *keys = NULL;
    int nkeys = 0, rc = 0;
    /* a UTF-8 byte order mark, which RFC 8259 lets a parser ignore;
     * positions still count it */
    size_t i, bom = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;

    for (i = bom; i < len && is_ws((unsigned char)text[i]); i++)
        ;
    if (i == len)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: no JSON value (the text "
                           "is empty)", file);
    if (len > (size_t)INT_MAX)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: %zu bytes of JSON text "
                           "is more than json-c reads (%d)", file, len,
                           INT_MAX);
    tok = json_tokener_new_ex(JSON_DEPTH);
    if (!tok)
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", file);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
                                    JSON_TOKENER_VALIDATE_UTF8);
    root = json_tokener_parse_ex(tok, text + bom, (int)(len - bom));
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = bom + json_tokener_get_parse_end(tok);
    if (!root && jerr == json_tokener_continue) {
        /* the text ended inside a value, or a top-level number waits for
         * a character that ends it: a NUL ends the text */
        root = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
        end = len;
        if (!root && jerr != json_tokener_success) {
            rc = json_c_error(text, len, len, "unexpected end of the text "
                              "(an object, array or string is not closed)",
                              file, err);
            goto done;
        }
    } else if (!root || jerr != json_tokener_success) {
        if (jerr == json_tokener_success)   /* the text was "null" */
            rc = kiln_seterr(err, KILN_ERR_PARSE, "%s: the top level must "
                             "be an object, found null", file);
        else
            rc = json_c_error(text, len, end, json_tokener_error_desc(jerr),
                              file, err);
        goto done;
    }
    if (!root) {
        rc = kiln_seterr(err, KILN_ERR_PARSE, "%s: the top level must be an "
                         "object, found null", file);
        goto done;
    }
    for (i = end; i < len; i++)
        if (!is_ws((unsigned char)text[i])) {
            rc = text[i] ? json_c_error(text, len, i, "unexpected text after "
                                        "the top-level object", file, err)
                         : json_c_error(text, len, i, "", file, err);
            goto done;
        }
    if (!json_object_is_type(root, json_type_object)) {
        rc = kiln_seterr(err, KILN_ERR_PARSE, "%s: the top level must be an "
                         "object, found %s", file, type_word(root));
        goto done;
    }
    if ((rc = scan_text(text, bom, len, file, &keys, &nkeys, err)) != 0)
        goto done;
    int ntop = 0;
    for (int k = 0; k < nkeys; k++)
        ntop += keys[k].owner == 0;
    if (nkeys != json_object_object_length(root)) {   /* or nested keys */
        rc = find_duplicate(text, keys, nkeys,
                            ntop != json_object_object_length(root), file,
                            err);
        if (rc)
            goto done;
    }
    *out = root;
    root = NULL;
done:
    free(keys);
    json_object_put(root);
    json_tokener_free(tok);
    return rc;
}

/* Parse into d (its file set); returns 0 or an error code. */
static int parse_into(kiln_json_data *d, const char *text, size_t len,
                      kiln_err *err)
{
    const char *file = d->file;
    json_object *root = NULL;
    int rc = kiln_json_strict_object(text, len, file, &root, err);
    if (rc)
        return rc;
    int n = json_object_object_length(root);
    d->vars = calloc((size_t)(n ? n : 1), sizeof *d->vars);
    d->sorted = malloc((size_t)(n ? n : 1) * sizeof *d->sorted);
    if (!d->vars || !d->sorted) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", file);
        goto done;
    }
    struct json_object_iterator it = json_object_iter_begin(root);
    struct json_object_iterator stop = json_object_iter_end(root);
    while (!json_object_iter_equal(&it, &stop)) {
        rc = make_var(&d->vars[d->n], json_object_iter_peek_name(&it),
                      json_object_iter_peek_value(&it), file, err);
        d->n++;   /* freed with d, also when make_var failed */
        if (rc)
            goto done;
        json_object_iter_next(&it);
    }
    for (int k = 0; k < d->n; k++)
        d->sorted[k] = &d->vars[k];
    qsort(d->sorted, (size_t)d->n, sizeof *d->sorted, cmp_names);
done:
    json_object_put(root);
    return rc;
}

kiln_json_data *kiln_json_data_parse(const char *text, size_t len,
                                     const char *filename, kiln_err *err)
{
    if (!text) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_json_data_parse: text is NULL");
        return NULL;
    }
    kiln_json_data *d = calloc(1, sizeof *d);
    if (d)
        d->file = strdup(filename ? filename : "<json>");
    if (!d || !d->file) {
        free(d);
        kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory",
                    filename ? filename : "<json>");
        return NULL;
    }
    if (parse_into(d, text, len, err) != 0) {
        data_free(d);
        return NULL;
    }
    return d;
}

kiln_json_data *kiln_json_data_read(const char *path,
                                    const kiln_read_options *opt,
                                    kiln_err *err)
{
    data_file df;
    char *buf = NULL;
    size_t n = 0;

    if (!path) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_json_data_read: path is NULL");
        return NULL;
    }
    if (data_open(path, opt, &df, err) != 0 ||
        data_read_all(path, &df, &buf, &n, err) != 0)
        return NULL;
    kiln_json_data *d = kiln_json_data_parse(buf, n, path, err);
    free(buf);
    return d;
}

/* ---- queries ------------------------------------------------------------ */

int kiln_json_data_count(const kiln_json_data *d)
{
    return d ? d->n : 0;
}

const char *kiln_json_data_key(const kiln_json_data *d, int i)
{
    return d && i >= 0 && i < d->n ? d->vars[i].name : NULL;
}

static const jvar *find_var(const kiln_json_data *d, const char *name)
{
    int lo = 0, hi = d->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const jvar *v = d->sorted[mid];
        int c = strcmp(name, v->name);
        if (c == 0)
            return v;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

int kiln_json_data_has(const kiln_json_data *d, const char *name)
{
    return d && name && find_var(d, name) != NULL;
}

/* "no variable 'x' in FILE (it has: a, b, c)" */
static int no_variable(const kiln_json_data *d, const char *name,
                       kiln_err *err)
{
    char list[EXCERPT_SIZE(JSON_KEYS_EXCERPT)];
    char joined[JSON_KEYS_EXCERPT + 8];
    size_t used = 0;
    int full = 0;
    if (!err)
        return KILN_ERR_NAME;
    for (int i = 0; i < d->n && !full; i++) {
        const char *k = d->vars[i].name;
        for (const char *s = i ? ", " : ""; *s && !full; s++)
            full = used == sizeof joined ? 1 : (joined[used++] = *s, 0);
        for (; *k && !full; k++)
            full = used == sizeof joined ? 1 : (joined[used++] = *k, 0);
    }
    excerpt(list, sizeof list, joined, used, JSON_KEYS_EXCERPT);
    if (d->n == 0)
        return kiln_seterr(err, KILN_ERR_NAME, "no variable '%s' in %s (it "
                           "has no variables)", name, d->file);
    kiln_suggestion sg;
    char hint[96];
    kiln_suggest_init(&sg, name, strlen(name));
    for (int i = 0; i < d->n; i++)
        kiln_suggest_offer(&sg, d->vars[i].name);
    return kiln_seterr(err, KILN_ERR_NAME, "no variable '%s' in %s%s (it "
                       "has: %s)", name, d->file,
                       kiln_suggest_text(&sg, hint, sizeof hint), list);
}

int kiln_json_data_shape(const kiln_json_data *d, const char *name,
                         int *rank, int64_t *shape, int *is_int)
{
    if (!d || !name)
        return KILN_ERR_ARG;
    const jvar *v = find_var(d, name);
    if (!v)
        return KILN_ERR_NAME;
    if (rank)
        *rank = v->rank;
    if (shape)
        for (int i = 0; i < v->rank; i++)
            shape[i] = v->shape[i];
    if (is_int)
        *is_int = v->is_int;
    return 0;
}

/* ---- conversion --------------------------------------------------------- */

/* An f32 overflows from here on: FLT_MAX and half its ulp (ties go to the
 * even 2^128, which is infinite). */
#define F32_OVERFLOW 0x1.ffffffp+127

int kiln_json_data_get(const kiln_json_data *d, const char *name,
                       kiln_dtype dt, int rank, const int64_t *dims,
                       kiln_tensor *out, kiln_err *err)
{
    char ts[KILN_MAX_RANK * 24 + 16], ss[KILN_MAX_RANK * 24 + 8];
    int64_t shape[KILN_MAX_RANK] = {0};

    if (!d || !name || !out || (rank > 0 && !dims))
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_json_data_get: NULL "
                           "argument");
    if (kiln_dtype_size(dt) == 0 || rank < 0 || rank > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_json_data_get: bad dtype "
                           "%d or rank %d", (int)dt, rank);
    const jvar *v = find_var(d, name);
    if (!v)
        return no_variable(d, name, err);
    /* the shape: the data's dims, checked against the declared ones; after
     * an empty array's 0 the declared dims are free (a symbol is 0) */
    int empty_tail = v->rank > 0 && v->shape[v->rank - 1] == 0;
    int fits = rank == v->rank || (empty_tail && rank > v->rank);
    for (int i = 0; fits && i < rank; i++) {
        if (i < v->rank) {
            fits = dims[i] < 0 || dims[i] == v->shape[i];
            shape[i] = v->shape[i];
        } else {
            shape[i] = dims[i] >= 0 ? dims[i] : 0;
        }
    }
    fmt_type(ts, sizeof ts, dt, rank, dims);
    if (!fits) {
        if (v->rank == 0)
            return kiln_seterr(err, KILN_ERR_SHAPE, "%s: variable '%s': "
                               "expected %s, found a scalar", d->file, name,
                               ts);
        return kiln_seterr(err, KILN_ERR_SHAPE, "%s: variable '%s': expected "
                           "%s, found an array of shape %s", d->file, name, ts,
                           fmt_shape(ss, sizeof ss, v->rank, v->shape));
    }
    size_t es = kiln_dtype_size(dt);
    void *data = malloc(v->numel ? (size_t)v->numel * es : 1);
    if (!data)
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: variable '%s': out of "
                           "memory", d->file, name);
    for (int64_t i = 0; i < v->numel; i++) {
        jnum x = v->val[i];
        int k = v->kind[i];
        const char *bad = NULL;
        switch (dt) {
        case KILN_F64:
            ((double *)data)[i] = k == JN_INT ? (double)x.i
                                  : k == JN_UINT ? (double)x.u : x.d;
            break;
        case KILN_F32:
            if (k == JN_REAL && isfinite(x.d) && fabs(x.d) >= F32_OVERFLOW)
                bad = "a value out of range";
            else
                ((float *)data)[i] = k == JN_INT ? (float)x.i
                                     : k == JN_UINT ? (float)x.u
                                                    : (float)x.d;
            break;
        case KILN_I64:
            if (k == JN_REAL)
                bad = "real";
            else if (k == JN_UINT)
                bad = "a value out of range";
            else
                ((int64_t *)data)[i] = x.i;
            break;
        case KILN_I32:
            if (k == JN_REAL)
                bad = "real";
            else if (k == JN_UINT || x.i < INT32_MIN || x.i > INT32_MAX)
                bad = "a value out of range";
            else
                ((int32_t *)data)[i] = (int32_t)x.i;
            break;
        default:
            if (k == JN_REAL)
                bad = "real";
            else if (k == JN_UINT || (x.i != 0 && x.i != 1))
                bad = "a value other than 0 and 1";
            else
                ((uint8_t *)data)[i] = (uint8_t)x.i;
            break;
        }
        if (bad) {
            char num[48], p[KILN_MAX_RANK * 24];
            int64_t idx[KILN_MAX_RANK], rest = i;
            for (int a = v->rank - 1; a >= 0; a--) {
                idx[a] = rest % v->shape[a];
                rest /= v->shape[a];
            }
            fmt_num(num, sizeof num, x, k);
            free(data);
            int real = strcmp(bad, "real") == 0;
            if (v->rank == 0)
                return kiln_seterr(err, KILN_ERR_TYPE, "%s: variable '%s': "
                                   "expected %s, found %s (%s)", d->file,
                                   name, ts,
                                   real ? "a real value" : bad, num);
            return kiln_seterr(err, KILN_ERR_TYPE, "%s: variable '%s': "
                               "expected %s, found %s (element %s is %s)",
                               d->file, name, ts,
                               real ? "real values" : bad,
                               fmt_path(p, sizeof p, idx, v->rank), num);
        }
    }
    memset(out, 0, sizeof *out);
    out->dtype = dt;
    out->rank = rank;
    for (int i = 0; i < rank; i++)
        out->shape[i] = shape[i];
    out->data = data;
    return 0;
}

/* ---- binding a graph (jsondata.h) --------------------------------------- */

/* An integer scalar of the data named like a symbol (J in f64[J]) must
 * be the size the bound arrays give that symbol: a file with J = 8 and
 * arrays of 3 is wrong data, not a model of 3 (kiln_model_new says the
 * same).  0, or an error naming both. */
static int check_symbol_sizes(const kiln_graph *g, const kiln_json_data *d,
                              kiln_err *err)
{
    for (int s = 0; s < g->n_symbols; s++) {
        const char *sn = g->symbols[s];
        const jvar *v = sn ? find_var(d, sn) : NULL;
        if (!v || v->rank != 0 || !v->is_int)
            continue;
        kiln_tensor t;
        if (kiln_json_data_get(d, sn, KILN_I64, 0, NULL, &t, err))
            return err ? err->code : KILN_ERR_TYPE;
        int64_t want = *(const int64_t *)t.data;
        free(t.data);
        if (g->part_n && s == g->part_sym) {
            /* a part (issue 30): N is the whole's rows; the values
             * bound hold the part's */
            if (g->part_total >= 0 && g->part_total != want)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "%s: data '%s' is %lld but the data "
                                   "partitioned along it has %lld rows",
                                   d->file, sn, (long long)want,
                                   (long long)g->part_total);
            int64_t b, e;
            kiln_ir_part_rows(want, g->part_k, g->part_n, &b, &e);
            want = e - b;
        }
        for (int i = 0; i < g->n_nodes; i++) {
            const kiln_node *n = &g->nodes[i];
            if (n->op != KILN_OP_SHARED || !n->data)
                continue;
            for (int k = 0; k < n->type.rank; k++)
                if (KILN_DIM_IS_SYM(n->type.dims[k]) &&
                    KILN_SYM_INDEX(n->type.dims[k]) == s &&
                    n->vshape[k] != want)
                    return kiln_seterr(err, KILN_ERR_SHAPE,
                                       "%s: data '%s' is %lld but shared "
                                       "'%s' has %lld elements along it",
                                       d->file, sn, (long long)want,
                                       n->name ? n->name : "?",
                                       (long long)n->vshape[k]);
        }
    }
    return 0;
}

int kiln_json_data_bind_graph(kiln_graph *g, const kiln_json_data *d,
                              int *n_bound, kiln_err *err)
{
    int bound = 0, rc = 0;
    if (n_bound)
        *n_bound = 0;
    if (!g || !d)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_json_data_bind_graph: "
                           "NULL argument");
    for (int v = 0; v < g->n_nodes && !rc; v++) {
        kiln_node *n = &g->nodes[v];
        if (n->op != KILN_OP_SHARED || n->data || n->promoted || !n->name ||
            !find_var(d, n->name))
            continue;
        kiln_tensor t;
        rc = kiln_json_data_get(d, n->name, n->type.dtype, n->type.rank,
                                n->type.dims, &t, err);
        if (rc)
            break;
        rc = kiln_ir_bind_shared(g, v, &t, err);
        free(t.data);
        if (rc)
            kiln_err_prefix(err, "%s: ", d->file);
        else
            bound++;
    }
    if (!rc)
        rc = check_symbol_sizes(g, d, err);
    if (n_bound)
        *n_bound = bound;
    return rc;
}
