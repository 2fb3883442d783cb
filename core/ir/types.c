/*
 * types.c — what every part of kiln reports and names values with:
 * errors (kiln_seterr, kiln_err_prefix), dtypes (kiln_dtype_*), shapes
 * (kiln_shape_numel), interned strings (kiln_ir_intern) and type strings
 * (kiln_ir_dim_str, kiln_ir_shape_str, kiln_ir_type_str).  The bottom of
 * core/ir: it uses no other file of libkiln, so the op registry (ops.c)
 * and the graph container (ir.c) both build on it.
 */
#include "ir.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors --------------------------------------------------------- */

int kiln_seterr(kiln_err *err, int code, const char *fmt, ...)
{
    if (err) {
        char buf[sizeof err->message];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        /* format into a local buffer first: an argument may point into
         * err->message itself */
        memcpy(err->message, buf, sizeof buf);
        err->message[sizeof err->message - 1] = '\0';
        err->code = code;
    }
    return code;
}

void kiln_err_prefix(kiln_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char pre[sizeof err->message];
    char old[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof old);
    old[sizeof old - 1] = '\0';
    size_t np = strlen(pre), no = strlen(old), cap = sizeof err->message - 1;
    if (np > cap)
        np = cap;
    if (no > cap - np)
        no = cap - np;
    memcpy(err->message, pre, np);
    memcpy(err->message + np, old, no);
    err->message[np + no] = '\0';
}

/* ---- dtypes --------------------------------------------------------- */

static const char *const dtype_names[KILN_NDTYPES] = {
    "f64", "f32", "i64", "i32", "bool"
};
static const size_t dtype_sizes[KILN_NDTYPES] = { 8, 4, 8, 4, 1 };

const char *kiln_dtype_name(kiln_dtype dt)
{
    if ((unsigned)dt >= KILN_NDTYPES)
        return "?";
    return dtype_names[dt];
}

size_t kiln_dtype_size(kiln_dtype dt)
{
    if ((unsigned)dt >= KILN_NDTYPES)
        return 0;
    return dtype_sizes[dt];
}

int kiln_dtype_parse(const char *name, kiln_dtype *out)
{
    if (!name)
        return -1;
    for (int i = 0; i < KILN_NDTYPES; i++)
        if (strcmp(name, dtype_names[i]) == 0) {
            if (out)
                *out = (kiln_dtype)i;
            return 0;
        }
    return -1;
}

/* Product of the dims; -1 when a dim is negative (symbolic) or the
 * product overflows int64. */
int64_t kiln_shape_numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    int zero = 0;
    if (rank > 0 && !shape)
        return -1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return -1;
        zero |= shape[i] == 0;
    }
    /* a zero dim empties the shape whatever the product of the others
     * (kiln_npy_read accepts (2**62, 2**62, 0)) */
    if (zero)
        return 0;
    for (int i = 0; i < rank; i++) {
        if (n > INT64_MAX / shape[i])
            return -1;
        n *= shape[i];
    }
    return n;
}

/* The interned strings: a linked list, searched linearly (a graph has a
 * handful of distinct check messages), guarded by one lock. */
typedef struct intern_rec {
    struct intern_rec *next;
    char s[];
} intern_rec;

static intern_rec *intern_head;
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

const char *kiln_ir_intern(const char *s)
{
    if (!s)
        return NULL;
    pthread_mutex_lock(&intern_lock);
    intern_rec *r = intern_head;
    while (r && strcmp(r->s, s) != 0)
        r = r->next;
    if (!r) {
        size_t n = strlen(s);
        r = malloc(sizeof *r + n + 1);
        if (r) {
            memcpy(r->s, s, n + 1);
            r->next = intern_head;
            intern_head = r;
        }
    }
    pthread_mutex_unlock(&intern_lock);
    return r ? r->s : NULL;
}

/* 1 when d is a symbol id of g. */
int kiln_ir_is_symbol(const kiln_graph *g, int64_t d)
{
    return KILN_DIM_IS_SYM(d) && d >= -2 - (int64_t)(g->n_symbols - 1) &&
           g->n_symbols > 0;
}

/* ---- type strings --------------------------------------------------- */

const char *kiln_ir_dim_str(const kiln_graph *g, int64_t d, char *buf,
                            size_t size)
{
    if (!buf || !size)
        return "";
    if (d >= 0)
        snprintf(buf, size, "%lld", (long long)d);
    else if (g && kiln_ir_is_symbol(g, d) && g->symbols[KILN_SYM_INDEX(d)])
        snprintf(buf, size, "%s", g->symbols[KILN_SYM_INDEX(d)]);
    else
        snprintf(buf, size, "?");
    return buf;
}

/* Append dims "a, b, c" to buf at *len (truncating safely). */
static void put_dims(const kiln_graph *g, int rank, const int64_t *dims,
                     char *buf, size_t size, size_t *len)
{
    for (int i = 0; i < rank && *len < size; i++) {
        char d[128];
        int n = snprintf(buf + *len, size - *len, "%s%s", i ? ", " : "",
                         kiln_ir_dim_str(g, dims[i], d, sizeof d));
        if (n < 0)
            return;
        *len += (size_t)n;
    }
    if (*len >= size)
        *len = size - 1;
}

const char *kiln_ir_shape_str(const kiln_graph *g, int rank,
                              const int64_t *dims, char *buf, size_t size)
{
    if (!buf || !size)
        return "";
    size_t len = 0;
    buf[0] = '\0';
    if (rank < 0 || rank > KILN_MAX_RANK || (rank > 0 && !dims)) {
        snprintf(buf, size, "(?)");
        return buf;
    }
    len = (size_t)snprintf(buf, size, "(");
    if (len >= size)
        return buf;
    put_dims(g, rank, dims, buf, size, &len);
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

const char *kiln_ir_type_str(const kiln_graph *g, const kiln_type *t,
                             char *buf, size_t size)
{
    if (!buf || !size)
        return "";
    if (!t) {
        snprintf(buf, size, "?");
        return buf;
    }
    size_t len = (size_t)snprintf(buf, size, "%s", kiln_dtype_name(t->dtype));
    if (t->rank <= 0 || t->rank > KILN_MAX_RANK || len >= size)
        return buf;
    len += (size_t)snprintf(buf + len, size - len, "[");
    if (len >= size)
        return buf;
    put_dims(g, t->rank, t->dims, buf, size, &len);
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}
