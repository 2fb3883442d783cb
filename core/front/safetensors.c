/*
 * safetensors.c — kiln's reader of safetensors files (<kiln/io.h>) and
 * the binding of a graph's shared values to their tensors, in place
 * (<kiln/graph.h> kiln_graph_bind_safetensors; the .kg source
 * `safetensors("FILE", "NAME")`, core/front/grammar.c).
 *
 * The format (the safetensors project's README): an unsigned 64-bit
 * little-endian length N, N bytes of JSON (a UTF-8 object, possibly
 * padded with spaces), then the data region.  Each JSON key but
 * "__metadata__" is a tensor: {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, offsets relative to the data region.
 *
 * Memory: a regular file is mapped PROT_READ, MAP_PRIVATE once; tensors
 * are used where they lie.  The handle (`kiln_safetensors`) is the
 * context of a refcounted kiln_blob (core/ir/ir.h): every shared value
 * bound to one of its tensors holds a reference, kiln_safetensors_close
 * drops the handle's own, and the last one unmaps.  F16/BF16 tensors and
 * misaligned ones get a buffer of their own, made on first use and freed
 * with the mapping.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/graph.h>
#include <kiln/io.h>

#include "datafile.h"
#include "excerpt.h"
#include "ir.h"
#include "jsondata.h"
#include "safetensors.h"
#include "suggest.h"

#include <json-c/json.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* names and dtypes in messages: escaped, cut after SHOWN bytes (HF's
 * tensor names run to ~50) */
#define SHOWN 96
#define SHOW(buf, s, n) excerpt((buf), sizeof(buf), (s), (n), SHOWN)

typedef struct st_tensor {
    char *name;
    char fdtype[8];          /* the file's dtype, "F32", "BF16", ... */
    int dtype;               /* kiln's (F16/BF16: KILN_F32) */
    int fsize;               /* bytes per element in the file */
    int rank;
    int64_t shape[KILN_MAX_RANK];
    uint64_t begin, end;     /* in the data region */
    void *own;               /* converted or aligned copy, or NULL */
    int checked;             /* BOOL bytes checked */
} st_tensor;

struct kiln_safetensors {
    char *path;
    kiln_blob *blob;         /* ctx = this handle */
    unsigned char *base;     /* the whole file */
    size_t size;
    int mapped;              /* base is an mmap, else malloc'd */
    const unsigned char *data;   /* the data region */
    uint64_t data_size;
    st_tensor *t;
    int n;
};

static void st_release(void *ctx)
{
    kiln_safetensors *st = ctx;
    for (int i = 0; i < st->n; i++) {
        free(st->t[i].name);
        free(st->t[i].own);
    }
    free(st->t);
    if (st->mapped)
        munmap(st->base, st->size);
    else
        free(st->base);
    free(st->path);
    free(st);
}

void kiln_safetensors_close(kiln_safetensors *st)
{
    if (st)
        kiln_blob_unref(st->blob);
}

int kiln_safetensors_count(const kiln_safetensors *st)
{
    return st ? st->n : 0;
}

static const struct {
    const char *name;
    int dtype, size;
} dtypes[] = {
    {"F64", KILN_F64, 8}, {"F32", KILN_F32, 4}, {"I64", KILN_I64, 8},
    {"I32", KILN_I32, 4}, {"BOOL", KILN_BOOL, 1}, {"F16", KILN_F32, 2},
    {"BF16", KILN_F32, 2},
};

/* ---- reading the file ------------------------------------------------ */

/* The whole file into st->base: mapped when regular and on disk, else
 * read (a memfile, an allowed FIFO) up to the size limit. */
static int load(kiln_safetensors *st, const char *path,
                const kiln_read_options *opt, kiln_err *err)
{
    data_file df;
    int rc = data_open(path, opt, &df, err);
    if (rc)
        return rc;
    int only;
    int fd = data_memfile(path, opt, &only) ? -1 : fileno(df.f);
    if (df.regular && fd >= 0) {
        st->size = (size_t)df.size;
        if (!st->size && fgetc(df.f) != EOF) {
            /* /proc files: size 0, yet content */
            fclose(df.f);
            return kiln_seterr(err, KILN_ERR_IO, "%s: not a regular file of "
                               "known size (its size is 0, yet it has "
                               "bytes)", path);
        }
        if (st->size) {
            void *m = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m == MAP_FAILED) {
                fclose(df.f);
                return kiln_seterr(err, KILN_ERR_IO, "%s: cannot map: %s",
                                   path, strerror(errno));
            }
            st->base = m;
            st->mapped = 1;
        }
        fclose(df.f);
        return 0;
    }
    char *buf;
    size_t n;
    if ((rc = data_read_all(path, &df, &buf, &n, err)) != 0)
        return rc;
    st->base = (unsigned char *)buf;
    st->size = n;
    return 0;
}

/* A non-negative JSON integer: 0 with *v set, else -1. */
static int json_u64(json_object *o, uint64_t *v)
{
    if (!json_object_is_type(o, json_type_int))
        return -1;
    int64_t i = json_object_get_int64(o);
    if (i < 0)
        return -1;
    if (i == INT64_MAX) {
        *v = json_object_get_uint64(o);
        return 0;
    }
    *v = (uint64_t)i;
    return 0;
}

/* Tensor `name`'s entry into *t; 0 or KILN_ERR_PARSE. */
static int parse_entry(const kiln_safetensors *st, const char *name,
                       json_object *o, st_tensor *t, kiln_err *err)
{
    char nm[EXCERPT_SIZE(SHOWN)], sh[EXCERPT_SIZE(SHOWN)];
    SHOW(nm, name, strlen(name));
    const char *p = st->path;
    if (!json_object_is_type(o, json_type_object))
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': not an "
                           "object with dtype, shape and data_offsets", p,
                           nm);
    json_object *jd = NULL, *js = NULL, *jo = NULL;
    json_object_object_foreach(o, key, val) {
        if (strcmp(key, "dtype") == 0)
            jd = val;
        else if (strcmp(key, "shape") == 0)
            js = val;
        else if (strcmp(key, "data_offsets") == 0)
            jo = val;
        else
            return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': "
                               "unexpected key '%s' (a tensor has dtype, "
                               "shape and data_offsets)", p, nm,
                               SHOW(sh, key, strlen(key)));
    }
    if (!jd || !js || !jo)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': no %s", p,
                           nm, !jd ? "dtype" : !js ? "shape"
                                                   : "data_offsets");
    if (!json_object_is_type(jd, json_type_string))
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': dtype is "
                           "not a string", p, nm);
    const char *ds = json_object_get_string(jd);
    if (strlen(ds) != (size_t)json_object_get_string_len(jd))
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': dtype "
                           "has a NUL character (\\u0000)", p, nm);
    int k = -1;
    for (int i = 0; i < (int)(sizeof dtypes / sizeof *dtypes); i++)
        if (strcmp(ds, dtypes[i].name) == 0)
            k = i;
    if (k < 0)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': "
                           "unsupported dtype '%s' (kiln reads F64, F32, "
                           "I64, I32, BOOL, and F16/BF16 converted to f32; "
                           "convert the file, e.g. with torch: "
                           "t.to(torch.float32))", p, nm,
                           SHOW(sh, ds, strlen(ds)));
    snprintf(t->fdtype, sizeof t->fdtype, "%s", dtypes[k].name);
    t->dtype = dtypes[k].dtype;
    t->fsize = dtypes[k].size;
    if (!json_object_is_type(js, json_type_array))
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': shape is "
                           "not an array", p, nm);
    size_t rank = json_object_array_length(js);
    if (rank > KILN_MAX_RANK)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': rank %zu "
                           "exceeds KILN_MAX_RANK (%d)", p, nm, rank,
                           KILN_MAX_RANK);
    t->rank = (int)rank;
    uint64_t numel = 1, big = 0;
    for (size_t i = 0; i < rank; i++) {
        uint64_t d;
        if (json_u64(json_object_array_get_idx(js, i), &d))
            return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': shape "
                               "entry %zu is not a non-negative integer", p,
                               nm, i);
        if (d > (uint64_t)INT64_MAX)
            big = 1;
        t->shape[i] = (int64_t)d;
        if (d && numel > UINT64_MAX / d)
            big = 1;
        else
            numel *= d;
    }
    if (!json_object_is_type(jo, json_type_array) ||
        json_object_array_length(jo) != 2 ||
        json_u64(json_object_array_get_idx(jo, 0), &t->begin) ||
        json_u64(json_object_array_get_idx(jo, 1), &t->end) ||
        t->begin > t->end)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': "
                           "data_offsets must be [begin, end], integers "
                           "with 0 <= begin <= end", p, nm);
    if (t->end > st->data_size)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': "
                           "data_offsets [%" PRIu64 ", %" PRIu64 "] lie "
                           "outside the %" PRIu64 " bytes of data", p, nm,
                           t->begin, t->end, st->data_size);
    if (big || numel > UINT64_MAX / (uint64_t)t->fsize ||
        numel * (uint64_t)t->fsize != t->end - t->begin) {
        char shape[256];
        kiln_ir_shape_str(NULL, t->rank, t->shape, shape, sizeof shape);
        if (big || numel > UINT64_MAX / (uint64_t)t->fsize)
            return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': shape "
                               "%s is too large", p, nm, shape);
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': "
                           "data_offsets [%" PRIu64 ", %" PRIu64 "] give %"
                           PRIu64 " bytes, but %s %s needs %" PRIu64, p, nm,
                           t->begin, t->end, t->end - t->begin, t->fdtype,
                           shape, numel * (uint64_t)t->fsize);
    }
    if (t->dtype == KILN_F32 && t->fsize == 2 &&
        numel > SIZE_MAX / 4)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': too large "
                           "to convert to f32", p, nm);
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a;
    const st_tensor *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* No two tensors of non-zero size share a byte. */
static int check_overlaps(const kiln_safetensors *st, kiln_err *err)
{
    if (st->n < 2)
        return 0;
    const st_tensor **by = malloc(sizeof *by * (size_t)st->n);
    if (!by)
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory",
                           st->path);
    int m = 0, rc = 0;
    for (int i = 0; i < st->n; i++)
        if (st->t[i].end > st->t[i].begin)
            by[m++] = &st->t[i];
    qsort(by, (size_t)m, sizeof *by, cmp_begin);
    for (int i = 1; i < m && !rc; i++)
        if (by[i]->begin < by[i - 1]->end) {
            char a[EXCERPT_SIZE(SHOWN)], b[EXCERPT_SIZE(SHOWN)];
            rc = kiln_seterr(err, KILN_ERR_PARSE, "%s: tensors '%s' and '%s' "
                             "overlap (bytes [%" PRIu64 ", %" PRIu64 ") and "
                             "[%" PRIu64 ", %" PRIu64 "))", st->path,
                             SHOW(a, by[i - 1]->name,
                                  strlen(by[i - 1]->name)),
                             SHOW(b, by[i]->name, strlen(by[i]->name)),
                             by[i - 1]->begin, by[i - 1]->end, by[i]->begin,
                             by[i]->end);
        }
    free(by);
    return rc;
}

static int parse_header(kiln_safetensors *st, kiln_err *err)
{
    const char *p = st->path;
    if (st->size < 8)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: truncated: %zu bytes "
                           "(a safetensors file starts with an 8-byte "
                           "header length)", p, st->size);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--)
        hn = hn << 8 | st->base[i];
    if (hn > KILN_SAFETENSORS_HEADER_MAX)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: header length %" PRIu64
                           " is over the format's limit of %" PRIu64
                           " bytes (not a safetensors file?)", p, hn,
                           KILN_SAFETENSORS_HEADER_MAX);
    if (hn > st->size - 8)
        return kiln_seterr(err, KILN_ERR_PARSE, "%s: truncated: header "
                           "length %" PRIu64 " but only %zu bytes follow", p,
                           hn, st->size - 8);
    st->data = st->base + 8 + hn;
    st->data_size = st->size - 8 - hn;
    json_object *root = NULL;
    int rc = kiln_json_strict_object((const char *)st->base + 8, (size_t)hn,
                                     p, &root, err);
    if (rc)
        return rc;
    int n = json_object_object_length(root);
    st->t = calloc((size_t)(n ? n : 1), sizeof *st->t);
    if (!st->t) {
        json_object_put(root);
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", p);
    }
    json_object_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        st_tensor *t = &st->t[st->n];
        if (!(t->name = strdup(key))) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", p);
            break;
        }
        st->n++;
        if ((rc = parse_entry(st, key, val, t, err)) != 0)
            break;
    }
    json_object_put(root);
    return rc ? rc : check_overlaps(st, err);
}

int kiln_safetensors_open(const char *path, const kiln_read_options *opt,
                          kiln_safetensors **out, kiln_err *err)
{
    if (!path || !out)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_safetensors_open: NULL "
                           "argument");
    kiln_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path)) ||
        !(st->blob = kiln_blob_new(st_release, st))) {
        if (st)
            free(st->path);
        free(st);
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    int rc = load(st, path, opt, err);
    if (!rc)
        rc = parse_header(st, err);
    if (rc) {
        kiln_safetensors_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

const char *kiln_safetensors_info(const kiln_safetensors *st, int i,
                                  kiln_tensor *t, const char **file_dtype)
{
    if (!st || i < 0 || i >= st->n)
        return NULL;
    const st_tensor *e = &st->t[i];
    if (t) {
        memset(t, 0, sizeof *t);
        t->dtype = (kiln_dtype)e->dtype;
        t->rank = e->rank;
        memcpy(t->shape, e->shape, sizeof t->shape);
    }
    if (file_dtype)
        *file_dtype = e->fdtype;
    return e->name;
}

/* ---- tensors --------------------------------------------------------- */

/* IEEE binary16 -> binary32, exactly (every half is a float). */
static uint32_t half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0x1f)                      /* inf, NaN (payload kept) */
        return sign | 0x7f800000u | m << 13;
    if (e == 0) {
        if (!m)
            return sign;                /* +-0 */
        /* subnormal: m * 2^-24; normalise */
        int sh = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            sh++;
        }
        return sign | (uint32_t)(127 - 15 + 1 - sh) << 23 |
               (m & 0x3ffu) << 13;
    }
    return sign | (e + 127 - 15) << 23 | m << 13;
}

static int host_le(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* Tensor e's data as kiln reads it: in place, or a buffer made once. */
static int tensor_data(kiln_safetensors *st, st_tensor *e, void **data,
                       kiln_err *err)
{
    const unsigned char *src = st->data + e->begin;
    uint64_t nb = e->end - e->begin, numel = nb / (uint64_t)e->fsize;
    int wide = e->fsize == 2;            /* F16, BF16 -> F32 */
    int aligned = ((uintptr_t)src % (uintptr_t)e->fsize) == 0;
    if (!nb) {                 /* no elements; never NULL (= unbound) */
        *data = (void *)(uintptr_t)st->base;
        return 0;
    }
    if (e->own || (!wide && aligned && host_le())) {
        *data = e->own ? e->own : (void *)(uintptr_t)src;
        return 0;
    }
    size_t out = (size_t)(wide ? numel * 4 : nb);
    unsigned char *b = malloc(out);
    if (!b)
        return kiln_seterr(err, KILN_ERR_NOMEM, "%s: out of memory",
                           st->path);
    for (uint64_t i = 0; i < numel; i++) {
        const unsigned char *s = src + i * (uint64_t)e->fsize;
        if (wide) {
            uint16_t h = (uint16_t)(s[0] | s[1] << 8);
            uint32_t f = e->fdtype[0] == 'B' ? (uint32_t)h << 16
                                             : half_to_float(h);
            memcpy(b + 4 * i, &f, 4);
        } else {
            /* little-endian in the file: assemble, then store natively */
            unsigned char *d = b + i * (uint64_t)e->fsize;
            for (int k = 0; k < e->fsize; k++)
                d[k] = s[host_le() ? k : e->fsize - 1 - k];
        }
    }
    e->own = b;
    *data = b;
    return 0;
}

static st_tensor *find(kiln_safetensors *st, const char *name)
{
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0)
            return &st->t[i];
    return NULL;
}

static int missing(kiln_safetensors *st, const char *name, kiln_err *err)
{
    kiln_suggestion sg;
    char hint[160], nm[EXCERPT_SIZE(SHOWN)];
    kiln_suggest_init(&sg, name, strlen(name));
    for (int i = 0; i < st->n; i++)
        kiln_suggest_offer(&sg, st->t[i].name);
    return kiln_seterr(err, KILN_ERR_NAME, "%s: no tensor '%s'%s", st->path,
                       SHOW(nm, name, strlen(name)),
                       kiln_suggest_text(&sg, hint, sizeof hint));
}

int kiln_safetensors_get(kiln_safetensors *st, const char *name,
                         kiln_tensor *out, kiln_err *err)
{
    if (!st || !name || !out)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_safetensors_get: NULL "
                           "argument");
    st_tensor *e = find(st, name);
    if (!e)
        return missing(st, name, err);
    void *data = NULL;
    int rc = tensor_data(st, e, &data, err);
    if (rc)
        return rc;
    if (e->dtype == KILN_BOOL && !e->checked) {
        const unsigned char *b = data;
        for (uint64_t i = 0; i < e->end - e->begin; i++)
            if (b[i] > 1) {
                char nm[EXCERPT_SIZE(SHOWN)];
                return kiln_seterr(err, KILN_ERR_PARSE, "%s: tensor '%s': "
                                   "bool element %" PRIu64 " has byte value "
                                   "%u (must be 0 or 1)", st->path,
                                   SHOW(nm, name, strlen(name)), i, b[i]);
            }
        e->checked = 1;
    }
    memset(out, 0, sizeof *out);
    out->dtype = (kiln_dtype)e->dtype;
    out->rank = e->rank;
    memcpy(out->shape, e->shape, sizeof out->shape);
    out->data = data;
    return 0;
}

/* ---- binding a graph's shared values --------------------------------- */

int kiln_safetensors_bind(kiln_graph *g, kiln_value v, kiln_safetensors *st,
                          const char *name, kiln_err *err)
{
    kiln_tensor t;
    int rc = kiln_safetensors_get(st, name, &t, err);
    if (rc)
        return rc;
    rc = kiln_ir_bind_shared_ref(g, v, &t, st->blob, err);
    if (rc) {
        char nm[EXCERPT_SIZE(SHOWN)];
        kiln_err_prefix(err, "%s: tensor '%s': ", st->path,
                        SHOW(nm, name, strlen(name)));
    }
    return rc;
}

/* A tensor name as a .kg name: every byte outside [A-Za-z0-9_] is '_'. */
static void kg_name(const char *s, char *d)
{
    for (; *s; s++, d++)
        *d = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
             (*s >= '0' && *s <= '9') ? *s : '_';
    *d = '\0';
}

/* Shared values of g waiting for a value (not hidden promoted ones). */
static int unbound(const kiln_graph *g, int v)
{
    const kiln_node *n = &g->nodes[v];
    return n->op == KILN_OP_SHARED && !n->data && !n->promoted && n->name;
}

int kiln_safetensors_bind_graph(kiln_graph *g, const char *path,
                                const kiln_read_options *opt, int strict,
                                int *n_bound, kiln_err *err)
{
    if (n_bound)
        *n_bound = 0;
    if (!g || !path)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_graph_bind_safetensors: "
                           "NULL argument");
    kiln_safetensors *st;
    int rc = kiln_safetensors_open(path, opt, &st, err);
    if (rc)
        return rc;
    /* each unbound shared value's tensor, by the kg form of its name */
    int nb = 0;
    int *pick = malloc(sizeof *pick * (size_t)(g->n_nodes + 1));
    char **kn = calloc((size_t)(st->n + 1), sizeof *kn);
    if (!pick || !kn) {
        rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < st->n; i++) {
        if (!(kn[i] = malloc(strlen(st->t[i].name) + 1))) {
            rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            goto done;
        }
        kg_name(st->t[i].name, kn[i]);
    }
    for (int v = 0; v < g->n_nodes && !rc; v++) {
        pick[v] = -1;
        if (!unbound(g, v))
            continue;
        const char *nm = g->nodes[v].name;
        for (int i = 0; i < st->n && !rc; i++) {
            if (strcmp(kn[i], nm) != 0)
                continue;
            if (pick[v] >= 0) {
                char a[EXCERPT_SIZE(SHOWN)];
                char b[EXCERPT_SIZE(SHOWN)];
                const char *x = st->t[pick[v]].name, *y = st->t[i].name;
                rc = kiln_seterr(err, KILN_ERR_NAME, "%s: tensors '%s' and "
                                 "'%s' both bind shared value '%s'", path,
                                 SHOW(a, x, strlen(x)), SHOW(b, y, strlen(y)),
                                 nm);
            }
            pick[v] = i;
        }
        if (!rc && pick[v] < 0 && strict) {
            kiln_suggestion sg;
            char hint[160];
            kiln_suggest_init(&sg, nm, strlen(nm));
            for (int i = 0; i < st->n; i++)
                kiln_suggest_offer(&sg, kn[i]);
            rc = kiln_seterr(err, KILN_ERR_NAME, "shared value '%s' has no "
                             "tensor in %s%s", nm, path,
                             kiln_suggest_text(&sg, hint, sizeof hint));
        }
    }
    for (int v = 0; v < g->n_nodes && !rc; v++) {
        if (pick[v] < 0)
            continue;
        if ((rc = kiln_safetensors_bind(g, v, st, st->t[pick[v]].name, err)))
            break;
        nb++;
    }
    if (rc) {   /* nothing bound on error: undo this call's bindings */
        for (int v = 0; v < g->n_nodes && nb > 0; v++)
            if (pick[v] >= 0 && g->nodes[v].blob == st->blob) {
                kiln_node *n = &g->nodes[v];
                kiln_blob_unref(n->blob);
                n->blob = NULL;
                n->data = NULL;
                n->nbytes = 0;
                for (int k = 0; k < n->type.rank; k++)
                    n->vshape[k] = n->type.dims[k] >= 0 ? n->type.dims[k]
                                                        : -1;
                nb--;
            }
    } else if (n_bound) {
        *n_bound = nb;
    }
done:
    for (int i = 0; kn && i < st->n; i++)
        free(kn[i]);
    free(kn);
    free(pick);
    kiln_safetensors_close(st);
    return rc;
}

int kiln_graph_bind_safetensors(kiln_graph *g, const char *path,
                                kiln_err *err)
{
    return kiln_safetensors_bind_graph(g, path, NULL, 1, NULL, err);
}
