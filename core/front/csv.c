/*
 * csv.c — reading one column of an RFC 4180 CSV file (see <kiln/io.h>).
 *
 * The file is streamed through a block buffer; each record is split into
 * fields (quotes and "" escapes resolved) in a reusable record buffer, and
 * only the wanted field is converted.  Positions reported in messages are
 * those of the first byte of a field (its opening quote when quoted).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/io.h>

#include "datafile.h"
#include "excerpt.h"
#include "suggest.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define CSV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CSV_PRINTF(a, b)
#endif

#define CSV_BLOCK 65536

static int csv_err(kiln_err *err, int code, const char *fmt, ...)
    CSV_PRINTF(3, 4);

static int csv_err(kiln_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Bytes of the header row a "no column" message lists at most. */
#define CSV_HEADER_EXCERPT 64

/* A short escaped excerpt of `s` (n bytes) for a message (excerpt.h). */
#define CSV_SHOW(buf, s, n) excerpt(buf, sizeof buf, s, n, EXCERPT_MAX)

static const char *csv_dtype_name(kiln_dtype dt)
{
    switch (dt) {
    case KILN_F64: return "f64";
    case KILN_F32: return "f32";
    case KILN_I64: return "i64";
    case KILN_I32: return "i32";
    case KILN_BOOL: return "bool";
    default: return "?";
    }
}

static size_t csv_itemsize(kiln_dtype dt)
{
    switch (dt) {
    case KILN_F64: case KILN_I64: return 8;
    case KILN_F32: case KILN_I32: return 4;
    case KILN_BOOL: return 1;
    default: return 0;
    }
}

/* ---- reader ------------------------------------------------------------ */

typedef struct csv_reader {
    FILE *f;
    const char *path;
    kiln_err *err;
    unsigned char *buf;
    size_t pos, len;
    int eof;
    long line, col;      /* position of the next byte, 1-based */
    int regular;         /* a regular file (its size was checked) */
    uint64_t total, max; /* bytes read so far; the size limit */
    int after_cr;        /* the previous byte was '\r' */
} csv_reader;

/* One record: fields are stored NUL-terminated one after the other in
 * `text`. */
typedef struct csv_record {
    char *text;
    size_t len, cap;
    size_t *off;         /* start of field i in text */
    size_t *flen;        /* length of field i (without the NUL) */
    long *fline, *fcol;  /* position of field i */
    size_t nfields, fcap;
    long line;           /* line where the record starts */
} csv_record;

/* Fill the buffer; returns 1 when bytes are available, 0 at end of file,
 * -1 after a read error (err set). */
static int csv_fill(csv_reader *r)
{
    if (r->pos < r->len)
        return 1;
    if (r->eof)
        return 0;
    r->pos = 0;
    r->len = fread(r->buf, 1, CSV_BLOCK, r->f);
    r->total += r->len;
    /* every file: a regular one can still read past its stat size
     * (/proc files report 0 and read back gigabytes) */
    if (r->total > r->max) {
        char what[48];
        snprintf(what, sizeof what, "more than %" PRIu64 " bytes", r->max);
        data_too_large(r->path, what, r->max, r->err);
        return -1;
    }
    if (r->len < CSV_BLOCK) {
        if (ferror(r->f)) {
            csv_err(r->err, KILN_ERR_IO, "%s: read error: %s", r->path,
                    strerror(errno));
            return -1;
        }
        r->eof = 1;
    }
    return r->len > 0;
}

/* Next byte without consuming it: 0..255, -1 at EOF, -2 on error. */
static int csv_peek(csv_reader *r)
{
    int k = csv_fill(r);
    if (k < 0)
        return -2;
    if (k == 0)
        return -1;
    return r->buf[r->pos];
}

/* Consume the byte csv_peek returned, tracking line and column: '\r',
 * '\n' and "\r\n" each end one line. */
static void csv_advance(csv_reader *r)
{
    unsigned char c = r->buf[r->pos++];
    if (c == '\n') {
        if (!r->after_cr) {
            r->line++;
            r->col = 1;
        }
        r->after_cr = 0;
    } else if (c == '\r') {
        r->line++;
        r->col = 1;
        r->after_cr = 1;
    } else {
        r->col++;
        r->after_cr = 0;
    }
}

static int rec_putc(csv_record *rec, char c)
{
    if (rec->len == rec->cap) {
        size_t ncap = rec->cap ? rec->cap * 2 : 256;
        char *p;
        if (ncap < rec->cap)
            return -1;
        p = realloc(rec->text, ncap);
        if (!p)
            return -1;
        rec->text = p;
        rec->cap = ncap;
    }
    rec->text[rec->len++] = c;
    return 0;
}

static int rec_newfield(csv_record *rec, long line, long col)
{
    if (rec->nfields == rec->fcap) {
        size_t ncap = rec->fcap ? rec->fcap * 2 : 16;
        size_t *o, *l;
        long *fl, *fc;
        if (ncap > SIZE_MAX / sizeof(size_t))
            return -1;
        o = realloc(rec->off, ncap * sizeof *o);
        if (!o)
            return -1;
        rec->off = o;
        l = realloc(rec->flen, ncap * sizeof *l);
        if (!l)
            return -1;
        rec->flen = l;
        fl = realloc(rec->fline, ncap * sizeof *fl);
        if (!fl)
            return -1;
        rec->fline = fl;
        fc = realloc(rec->fcol, ncap * sizeof *fc);
        if (!fc)
            return -1;
        rec->fcol = fc;
        rec->fcap = ncap;
    }
    rec->off[rec->nfields] = rec->len;
    rec->fline[rec->nfields] = line;
    rec->fcol[rec->nfields] = col;
    rec->nfields++;
    return 0;
}

static void rec_free(csv_record *rec)
{
    free(rec->text);
    free(rec->off);
    free(rec->flen);
    free(rec->fline);
    free(rec->fcol);
}

static int csv_nomem(csv_reader *r)
{
    return csv_err(r->err, KILN_ERR_NOMEM, "%s: out of memory", r->path);
}

/* Read the next record.  Returns 1 with `rec` filled, 0 at end of file,
 * or -1 with err set. */
static int csv_record_read(csv_reader *r, csv_record *rec)
{
    int c;

    rec->len = 0;
    rec->nfields = 0;
    /* skip completely empty lines */
    for (;;) {
        c = csv_peek(r);
        if (c == -2)
            return -1;
        if (c == -1)
            return 0;
        if (c != '\r' && c != '\n')
            break;
        csv_advance(r);
    }
    rec->line = r->line;
    for (;;) {
        long fline = r->line, fcol = r->col;
        if (rec_newfield(rec, fline, fcol) != 0)
            return csv_nomem(r), -1;
        c = csv_peek(r);
        if (c == '"') {
            csv_advance(r);
            for (;;) {
                c = csv_peek(r);
                if (c == -2)
                    return -1;
                if (c == -1) {
                    csv_err(r->err, KILN_ERR_PARSE,
                            "%s:%ld:%ld: unterminated quoted field", r->path,
                            fline, fcol);
                    return -1;
                }
                csv_advance(r);
                if (c == '"') {
                    c = csv_peek(r);
                    if (c == -2)
                        return -1;
                    if (c != '"')
                        break; /* closing quote */
                    csv_advance(r);
                }
                if (rec_putc(rec, (char)c) != 0)
                    return csv_nomem(r), -1;
            }
            c = csv_peek(r);
            if (c == -2)
                return -1;
            if (c != ',' && c != '\r' && c != '\n' && c != -1) {
                char shown[EXCERPT_SIZE(1)];
                char ch = (char)c;
                csv_err(r->err, KILN_ERR_PARSE,
                        "%s:%ld:%ld: unexpected character '%s' after a "
                        "closing quote", r->path, r->line, r->col,
                        excerpt(shown, sizeof shown, &ch, 1, 1));
                return -1;
            }
        } else {
            for (;;) {
                c = csv_peek(r);
                if (c == -2)
                    return -1;
                if (c == -1 || c == ',' || c == '\r' || c == '\n')
                    break;
                csv_advance(r);
                if (rec_putc(rec, (char)c) != 0)
                    return csv_nomem(r), -1;
            }
        }
        rec->flen[rec->nfields - 1] = rec->len - rec->off[rec->nfields - 1];
        if (rec_putc(rec, '\0') != 0)
            return csv_nomem(r), -1;
        /* c is the byte after the field: ',', a line break or EOF */
        if (c == ',') {
            csv_advance(r);
            continue;
        }
        if (c == '\r') {
            csv_advance(r);
            c = csv_peek(r);
            if (c == -2)
                return -1;
            if (c == '\n')
                csv_advance(r);
        } else if (c == '\n') {
            csv_advance(r);
        }
        return 1;
    }
}

/* ---- values ------------------------------------------------------------ */

static int csv_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Trim spaces and tabs in place (the field is NUL-terminated). */
static char *csv_trim(char *s, size_t *n)
{
    size_t a = 0, b = *n;
    while (a < b && csv_is_blank(s[a]))
        a++;
    while (b > a && csv_is_blank(s[b - 1]))
        b--;
    s[b] = '\0';
    *n = b - a;
    return s + a;
}

/* Parse an integer: [+-]?[0-9]+ within [lo, hi].  Returns 0, 1 when not
 * an integer, 2 when out of range. */
static int csv_parse_int(const char *s, size_t n, int64_t lo, int64_t hi,
                         int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0, limit;
    int overflow = 0;

    if (i < n && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (i == n)
        return 1;
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (limit - d) / 10)
            overflow = 1;
        else
            v = v * 10 + d;
    }
    if (overflow)
        return 2;
    if (neg) {
        int64_t x = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
        if (x < lo)
            return 2;
        *out = x;
    } else {
        if (v > (uint64_t)hi)
            return 2;
        *out = (int64_t)v;
    }
    return 0;
}

/* Does s spell an infinity ("inf", "infinity", any case, optional sign)? */
static int csv_is_inf_literal(const char *s)
{
    const char *w = "infinity";
    size_t i = 0;
    if (*s == '+' || *s == '-')
        s++;
    while (s[i] && w[i] && (s[i] | 0x20) == w[i])
        i++;
    return s[i] == '\0' && (i == 3 || i == 8);
}

/* Parse field `s` (trimmed, NUL-terminated, n bytes) as dtype into dst.
 * Returns 0, 1 for a bad value, 2 for out of range. */
static int csv_parse_value(kiln_dtype dt, const char *s, size_t n, void *dst)
{
    char *end;
    int64_t iv;
    int rc;

    switch (dt) {
    case KILN_F64: {
        double d;
        if (n == 0 || strlen(s) != n || s[0] == '\n' || s[0] == '\r' ||
            s[0] == '\v' || s[0] == '\f')
            return 1;
        errno = 0;
        d = strtod(s, &end);
        if (end != s + n)
            return 1;
        if (isinf(d) && !csv_is_inf_literal(s))
            return 2;
        memcpy(dst, &d, sizeof d);
        return 0;
    }
    case KILN_F32: {
        float f;
        if (n == 0 || strlen(s) != n || s[0] == '\n' || s[0] == '\r' ||
            s[0] == '\v' || s[0] == '\f')
            return 1;
        errno = 0;
        f = strtof(s, &end);
        if (end != s + n)
            return 1;
        if (isinf(f) && !csv_is_inf_literal(s))
            return 2;
        memcpy(dst, &f, sizeof f);
        return 0;
    }
    case KILN_I64:
        rc = csv_parse_int(s, n, INT64_MIN, INT64_MAX, &iv);
        if (rc == 0)
            memcpy(dst, &iv, sizeof iv);
        return rc;
    case KILN_I32:
        rc = csv_parse_int(s, n, INT32_MIN, INT32_MAX, &iv);
        if (rc == 0) {
            int32_t x = (int32_t)iv;
            memcpy(dst, &x, sizeof x);
        }
        return rc;
    case KILN_BOOL: {
        unsigned char b;
        if (strcmp(s, "1") == 0 || strcmp(s, "true") == 0 ||
            strcmp(s, "True") == 0)
            b = 1;
        else if (strcmp(s, "0") == 0 || strcmp(s, "false") == 0 ||
                 strcmp(s, "False") == 0)
            b = 0;
        else
            return 1;
        if (strlen(s) != n)
            return 1;
        memcpy(dst, &b, 1);
        return 0;
    }
    default:
        return 1;
    }
}

/* ---- the column reader -------------------------------------------------- */

/* The column is not in the header.  The header is the file's content
 * (the file may be no CSV at all: csv("/etc/passwd", ...)), so it is not
 * quoted: the message says how many fields it has and names one only when
 * it is nearly the column asked for (a typo). */
static int csv_no_column(csv_reader *r, const char *column,
                         const csv_record *hdr)
{
    char name[EXCERPT_SIZE(EXCERPT_MAX)], near[EXCERPT_SIZE(EXCERPT_MAX)];
    for (size_t i = 0; i < hdr->nfields; i++)
        if (name_is_close(column, hdr->text + hdr->off[i], hdr->flen[i]))
            return csv_err(r->err, KILN_ERR_NAME, "%s: no column '%s' "
                           "(did you mean '%s'?)", r->path,
                           CSV_SHOW(name, column, strlen(column)),
                           CSV_SHOW(near, hdr->text + hdr->off[i],
                                    hdr->flen[i]));
    return csv_err(r->err, KILN_ERR_NAME, "%s: no column '%s' among the %zu "
                   "field%s of its first line", r->path,
                   CSV_SHOW(name, column, strlen(column)), hdr->nfields,
                   hdr->nfields == 1 ? "" : "s");
}

static int csv_read(csv_reader *r, const char *column, kiln_dtype dtype,
                    kiln_tensor *out)
{
    csv_record rec;
    size_t ncols, col = 0, found = 0, itemsize = csv_itemsize(dtype);
    size_t count = 0, cap = 0;
    unsigned char *data = NULL;
    int k, rc;

    memset(&rec, 0, sizeof rec);

    /* skip a UTF-8 byte-order mark */
    if (csv_peek(r) == 0xEF && r->len - r->pos >= 3 &&
        r->buf[r->pos + 1] == 0xBB && r->buf[r->pos + 2] == 0xBF)
        r->pos += 3;
    k = csv_record_read(r, &rec);
    if (k < 0) {
        rc = -1;
        goto fail_keep;
    }
    if (k == 0) {
        rc = csv_err(r->err, KILN_ERR_PARSE,
                     "%s: empty file (no header row)", r->path);
        goto fail_keep;
    }
    ncols = rec.nfields;
    for (size_t i = 0; i < ncols; i++) {
        if (rec.flen[i] == strlen(column) &&
            memcmp(rec.text + rec.off[i], column, rec.flen[i]) == 0) {
            if (found) {
                char name[EXCERPT_SIZE(EXCERPT_MAX)];
                rc = csv_err(r->err, KILN_ERR_NAME,
                             "%s: column '%s' appears more than once "
                             "(columns %zu and %zu)", r->path,
                             CSV_SHOW(name, column, strlen(column)), col + 1,
                             i + 1);
                goto fail_keep;
            }
            found = 1;
            col = i;
        }
    }
    if (!found) {
        rc = csv_no_column(r, column, &rec);
        goto fail_keep;
    }

    for (;;) {
        k = csv_record_read(r, &rec);
        if (k < 0) {
            rc = -1;
            goto fail_keep;
        }
        if (k == 0)
            break;
        if (rec.nfields != ncols) {
            rc = csv_err(r->err, KILN_ERR_PARSE,
                         "%s:%ld: expected %zu fields, found %zu", r->path,
                         rec.line, ncols, rec.nfields);
            goto fail_keep;
        }
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            unsigned char *p;
            if (ncap < cap || ncap > SIZE_MAX / itemsize ||
                ncap > (size_t)INT64_MAX) {
                rc = csv_nomem(r);
                goto fail_keep;
            }
            p = realloc(data, ncap * itemsize);
            if (!p) {
                rc = csv_nomem(r);
                goto fail_keep;
            }
            data = p;
            cap = ncap;
        }
        {
            size_t n = rec.flen[col];
            char *v = csv_trim(rec.text + rec.off[col], &n);
            int bad = csv_parse_value(dtype, v, n, data + count * itemsize);
            if (bad) {
                char shown[EXCERPT_SIZE(EXCERPT_MAX)];
                char name[EXCERPT_SIZE(EXCERPT_MAX)];
                CSV_SHOW(shown, v, n);
                rc = csv_err(r->err, KILN_ERR_PARSE,
                             "%s:%ld:%ld: bad %s value '%s' in column '%s'%s",
                             r->path, rec.fline[col], rec.fcol[col],
                             csv_dtype_name(dtype), shown,
                             CSV_SHOW(name, column, strlen(column)),
                             bad == 2 ? " (out of range)" : "");
                goto fail_keep;
            }
        }
        count++;
    }
    if (!data) {
        data = malloc(1);
        if (!data) {
            rc = csv_nomem(r);
            goto fail_keep;
        }
    }
    memset(out, 0, sizeof *out);
    out->dtype = dtype;
    out->rank = 1;
    out->shape[0] = (int64_t)count;
    out->data = data;
    rec_free(&rec);
    return KILN_OK;

fail_keep:
    free(data);
    rec_free(&rec);
    return rc;
}

int kiln_csv_read_column(const char *path, const char *column,
                         kiln_dtype dtype, kiln_tensor *out, kiln_err *err)
{
    return kiln_csv_read_column_opts(path, column, dtype, NULL, out, err);
}

int kiln_csv_read_column_opts(const char *path, const char *column,
                              kiln_dtype dtype, const kiln_read_options *opt,
                              kiln_tensor *out, kiln_err *err)
{
    data_file df;
    csv_reader r;
    locale_t cloc, old = (locale_t)0;
    kiln_err local;
    int rc;

    if (!path || !column || !out)
        return csv_err(err, KILN_ERR_ARG, "kiln_csv_read_column: %s is NULL",
                       !path ? "path" : !column ? "column" : "out");
    if ((int)dtype < 0 || dtype >= KILN_NDTYPES)
        return csv_err(err, KILN_ERR_ARG,
                       "kiln_csv_read_column: bad dtype %d", (int)dtype);

    memset(&r, 0, sizeof r);
    r.path = path;
    r.err = &local; /* internal: always collect the code */
    r.line = 1;
    r.col = 1;
    if ((rc = data_open(path, opt, &df, err)) != 0)
        return rc;
    r.f = df.f;
    r.regular = df.regular;
    r.max = df.max;
    r.buf = malloc(CSV_BLOCK);
    if (!r.buf) {
        fclose(r.f);
        return csv_err(err, KILN_ERR_NOMEM, "%s: out of memory", path);
    }

    /* Numbers are read in the "C" locale whatever the program's locale. */
    cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (cloc != (locale_t)0)
        old = uselocale(cloc);

    local.code = KILN_OK;
    local.message[0] = '\0';
    rc = csv_read(&r, column, dtype, out);
    if (rc != KILN_OK) {
        rc = local.code != KILN_OK ? local.code : KILN_ERR_PARSE;
        if (err)
            *err = local;
        if (err && local.code == KILN_OK) {
            err->code = rc;
            snprintf(err->message, sizeof err->message, "%s: parse error",
                     path);
        }
    }

    if (cloc != (locale_t)0) {
        uselocale(old);
        freelocale(cloc);
    }
    free(r.buf);
    fclose(r.f);
    return rc;
}
