/*
 * npy.c — reading and writing NumPy .npy files (see <kiln/io.h>).
 *
 * Format (numpy/lib/format.py, "NEP 1"): the magic "\x93NUMPY", a major and
 * a minor version byte, a little-endian header length (2 bytes in 1.0,
 * 4 bytes in 2.0 and 3.0), the header (a Python dict literal, padded with
 * spaces, ending in '\n'), then the raw C-ordered data.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/io.h>

#include "datafile.h"
#include "excerpt.h"
#include "../ir/ir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#if !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#define XXH_STATIC_LINKING_ONLY   /* XXH3_state_t on the stack */
#include <xxhash.h>
#endif

#if defined(__GNUC__)
#define NPY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NPY_PRINTF(a, b)
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
/* Headers longer than this are refused before anything is allocated; a
 * valid header for KILN_MAX_RANK dims is a few hundred bytes. */
#define NPY_MAX_HEADER (1u << 20)
/* np.save leaves room for the first dim to grow to this many digits. */
#define NPY_GROWTH_DIGITS 21

static int npy_err(kiln_err *err, int code, const char *fmt, ...)
    NPY_PRINTF(3, 4);

static int npy_err(kiln_err *err, int code, const char *fmt, ...)
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

/* ---- dtypes and byte order ------------------------------------------- */

static size_t npy_itemsize(kiln_dtype dt)
{
    switch (dt) {
    case KILN_F64: case KILN_I64: return 8;
    case KILN_F32: case KILN_I32: return 4;
    case KILN_BOOL: return 1;
    default: return 0;
    }
}

/* The descr np.save writes for each kiln dtype. */
static const char *npy_descr(kiln_dtype dt)
{
    switch (dt) {
    case KILN_F64: return "<f8";
    case KILN_F32: return "<f4";
    case KILN_I64: return "<i8";
    case KILN_I32: return "<i4";
    case KILN_BOOL: return "|b1";
    default: return NULL;
    }
}

/* Map a descr string to a kiln dtype; -1 when unsupported. */
static int npy_parse_descr(const char *s, size_t n, kiln_dtype *out)
{
    if (n != 3)
        return -1;
    if (s[1] == 'b' && s[2] == '1') {
        if (s[0] != '|' && s[0] != '<' && s[0] != '=')
            return -1;
        *out = KILN_BOOL;
        return 0;
    }
    if (s[0] != '<' && s[0] != '=')
        return -1;
    if (s[1] == 'f' && s[2] == '8') *out = KILN_F64;
    else if (s[1] == 'f' && s[2] == '4') *out = KILN_F32;
    else if (s[1] == 'i' && s[2] == '8') *out = KILN_I64;
    else if (s[1] == 'i' && s[2] == '4') *out = KILN_I32;
    else return -1;
    return 0;
}

static int npy_host_is_little(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void npy_byteswap(unsigned char *p, size_t nbytes, size_t itemsize)
{
    if (itemsize < 2)
        return;
    for (size_t i = 0; i + itemsize <= nbytes; i += itemsize)
        for (size_t a = 0, b = itemsize - 1; a < b; a++, b--) {
            unsigned char t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

/* Element count and byte size of a shape; -1 when they overflow int64_t
 * or size_t.  A zero dim makes the array empty whatever the others are. */
static int npy_sizes(int rank, const int64_t *dims, size_t itemsize,
                     int64_t *numel, size_t *nbytes)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (dims[i] == 0) {
            *numel = 0;
            *nbytes = 0;
            return 0;
        }
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || n > INT64_MAX / dims[i])
            return -1;
        n *= dims[i];
    }
    if ((uint64_t)n > SIZE_MAX / itemsize ||
        (uint64_t)n > (uint64_t)INT64_MAX / itemsize)
        return -1;
    *numel = n;
    *nbytes = (size_t)n * itemsize;
    return 0;
}

/* Format a shape as NumPy prints a tuple: (), (3,), (2, 3). */
static void npy_fmt_shape(char *buf, size_t size, int rank,
                          const int64_t *dims)
{
    size_t used = 0;
    int k = snprintf(buf, size, "(");
    if (k < 0)
        return;
    used = (size_t)k;
    for (int i = 0; i < rank && used < size; i++) {
        k = snprintf(buf + used, size - used, "%s%" PRId64,
                     i ? ", " : "", dims[i]);
        if (k < 0)
            return;
        used += (size_t)k;
    }
    if (used < size)
        snprintf(buf + used, size - used, rank == 1 ? ",)" : ")");
}

/* ---- header parsing --------------------------------------------------- */

typedef struct npy_hdr {
    const char *s;     /* the header bytes (not NUL-terminated) */
    size_t n, i;       /* length, read position */
    const char *path;
    kiln_err *err;
    /* results */
    const char *descr;  /* points into s */
    size_t descr_len;
    int descr_is_str;
    int fortran;
    int rank;          /* number of dims in the tuple, may exceed MAX_RANK */
    int64_t dims[KILN_MAX_RANK];
} npy_hdr;

static int hdr_bad(npy_hdr *h, const char *what)
{
    return npy_err(h->err, KILN_ERR_PARSE,
                   "%s: malformed header: %s (at byte %zu of the header)",
                   h->path, what, h->i);
}

static void hdr_ws(npy_hdr *h)
{
    while (h->i < h->n && (h->s[h->i] == ' ' || h->s[h->i] == '\t' ||
                           h->s[h->i] == '\n' || h->s[h->i] == '\r'))
        h->i++;
}

static int hdr_peek(const npy_hdr *h)
{
    return h->i < h->n ? (unsigned char)h->s[h->i] : -1;
}

/* A Python string literal in ' or " quotes, without escapes. */
static int hdr_string(npy_hdr *h, const char **s, size_t *len)
{
    int q = hdr_peek(h);
    if (q != '\'' && q != '"')
        return hdr_bad(h, "expected a quoted string");
    size_t start = ++h->i;
    while (h->i < h->n && h->s[h->i] != q) {
        if (h->s[h->i] == '\\')
            return hdr_bad(h, "escape sequences are not supported");
        if (h->s[h->i] == '\n')
            break;
        h->i++;
    }
    if (h->i >= h->n || h->s[h->i] != q)
        return hdr_bad(h, "unterminated string");
    *s = h->s + start;
    *len = h->i - start;
    h->i++;
    return 0;
}

static int hdr_word(npy_hdr *h, const char *w)
{
    size_t n = strlen(w);
    if (h->n - h->i < n || memcmp(h->s + h->i, w, n) != 0)
        return 0;
    if (h->i + n < h->n) {
        char c = h->s[h->i + n];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '_')
            return 0;
    }
    h->i += n;
    return 1;
}

static int hdr_shape(npy_hdr *h)
{
    int trailing_comma = 0;
    if (hdr_peek(h) != '(')
        return hdr_bad(h, "'shape' is not a tuple");
    h->i++;
    h->rank = 0;
    for (;;) {
        hdr_ws(h);
        if (hdr_peek(h) == ')') {
            h->i++;
            break;
        }
        int neg = 0;
        size_t start = h->i;
        if (hdr_peek(h) == '-') {
            neg = 1;
            h->i++;
        }
        int c = hdr_peek(h);
        if (c < '0' || c > '9')
            return hdr_bad(h, "expected an integer in 'shape'");
        uint64_t v = 0;
        int overflow = 0;
        while ((c = hdr_peek(h)) >= '0' && c <= '9') {
            unsigned d = (unsigned)(c - '0');
            if (v > ((uint64_t)INT64_MAX - d) / 10)
                overflow = 1;
            else
                v = v * 10 + d;
            h->i++;
        }
        size_t numlen = h->i - start;
        if (hdr_peek(h) == 'L' || hdr_peek(h) == 'l') /* Python 2 longs */
            h->i++;
        if (neg && v != 0)
            return npy_err(h->err, KILN_ERR_PARSE,
                           "%s: negative dimension %.*s in shape", h->path,
                           (int)(numlen > 40 ? 40 : numlen), h->s + start);
        if (overflow)
            return npy_err(h->err, KILN_ERR_PARSE,
                           "%s: dimension %.*s%s in shape is too large",
                           h->path, (int)(numlen > 40 ? 40 : numlen),
                           h->s + start, numlen > 40 ? "..." : "");
        if (h->rank < KILN_MAX_RANK)
            h->dims[h->rank] = (int64_t)v;
        if (h->rank == INT32_MAX)
            return hdr_bad(h, "too many dimensions");
        h->rank++;
        hdr_ws(h);
        trailing_comma = 0;
        if (hdr_peek(h) == ',') {
            h->i++;
            trailing_comma = 1;
        } else if (hdr_peek(h) == ')') {
            h->i++;
            break;
        } else {
            return hdr_bad(h, "expected ',' or ')' in 'shape'");
        }
    }
    if (h->rank == 1 && !trailing_comma)
        return hdr_bad(h, "'shape' is not a tuple (a 1-tuple needs a comma)");
    if (h->rank > KILN_MAX_RANK)
        return npy_err(h->err, KILN_ERR_PARSE,
                       "%s: rank %d exceeds KILN_MAX_RANK (%d)", h->path,
                       h->rank, KILN_MAX_RANK);
    return 0;
}

static int npy_parse_header(npy_hdr *h)
{
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    int rc;

    hdr_ws(h);
    if (hdr_peek(h) != '{')
        return hdr_bad(h, "expected '{'");
    h->i++;
    for (;;) {
        const char *key;
        size_t klen;
        hdr_ws(h);
        if (hdr_peek(h) == '}')
            break;
        if ((rc = hdr_string(h, &key, &klen)) != 0)
            return rc;
        hdr_ws(h);
        if (hdr_peek(h) != ':')
            return hdr_bad(h, "expected ':' after a key");
        h->i++;
        hdr_ws(h);
        if (klen == 5 && memcmp(key, "descr", 5) == 0) {
            if (have_descr)
                return hdr_bad(h, "duplicate key 'descr'");
            have_descr = 1;
            int c = hdr_peek(h);
            if (c == '\'' || c == '"') {
                if ((rc = hdr_string(h, &h->descr, &h->descr_len)) != 0)
                    return rc;
                h->descr_is_str = 1;
            } else {
                /* a structured dtype (list of fields) or garbage */
                return npy_err(h->err, KILN_ERR_PARSE,
                               "%s: unsupported dtype (structured arrays are "
                               "not supported; kiln reads little-endian f64, "
                               "f32, i64, i32, bool)", h->path);
            }
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
            if (have_fortran)
                return hdr_bad(h, "duplicate key 'fortran_order'");
            have_fortran = 1;
            if (hdr_word(h, "True"))
                h->fortran = 1;
            else if (hdr_word(h, "False"))
                h->fortran = 0;
            else
                return hdr_bad(h, "'fortran_order' is not True or False");
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
            if (have_shape)
                return hdr_bad(h, "duplicate key 'shape'");
            have_shape = 1;
            if ((rc = hdr_shape(h)) != 0)
                return rc;
        } else {
            char shown[EXCERPT_SIZE(EXCERPT_MAX)];
            return npy_err(h->err, KILN_ERR_PARSE,
                           "%s: malformed header: unexpected key '%s'",
                           h->path,
                           excerpt(shown, sizeof shown, key, klen,
                                   EXCERPT_MAX));
        }
        hdr_ws(h);
        if (hdr_peek(h) == ',') {
            h->i++;
            continue;
        }
        if (hdr_peek(h) == '}')
            break;
        return hdr_bad(h, "expected ',' or '}'");
    }
    h->i++; /* the '}' */
    hdr_ws(h);
    if (h->i != h->n)
        return hdr_bad(h, "unexpected text after '}'");
    if (!have_descr)
        return npy_err(h->err, KILN_ERR_PARSE,
                       "%s: malformed header: missing key 'descr'", h->path);
    if (!have_fortran)
        return npy_err(h->err, KILN_ERR_PARSE,
                       "%s: malformed header: missing key 'fortran_order'",
                       h->path);
    if (!have_shape)
        return npy_err(h->err, KILN_ERR_PARSE,
                       "%s: malformed header: missing key 'shape'", h->path);
    return 0;
}

/* ---- reading ----------------------------------------------------------- */

/* fread that reports a read error; returns the byte count read or
 * (size_t)-1 after setting err. */
static size_t npy_fread(FILE *f, void *buf, size_t n, const char *path,
                        kiln_err *err)
{
    size_t got = n ? fread(buf, 1, n, f) : 0;
    if (got < n && ferror(f)) {
        int e = errno;
        npy_err(err, KILN_ERR_IO, "%s: read error: %s", path,
                e ? strerror(e) : "unknown error");
        return (size_t)-1;
    }
    return got;
}

/* A part's rows (kiln_ir_part_npy_read): NULL reads the whole array. */
typedef struct npy_rows {
    int dim, part, nparts;
    int64_t total;              /* out: the whole's size along dim */
    uint64_t digest;            /* out: the whole value's digest */
} npy_rows;

/* Stream the nbytes of data from f through the whole value's digest
 * (kiln_ir_part_value_digest), keeping in `dst` only the bytes of rows
 * [b, e) along a dim of `n` rows whose one row is `row` bytes.  0, or an
 * error naming `path` (a truncated file, a bad bool, a read error). */
static int npy_stream_rows(FILE *f, const char *path, size_t nbytes,
                           size_t itemsize, kiln_dtype dtype, size_t row,
                           int64_t n, int64_t b, int64_t e,
                           unsigned char *dst, uint64_t seed,
                           uint64_t *digest, kiln_err *err)
{
    enum { CHUNK = 1 << 20 };   /* a multiple of every item size */
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return npy_err(err, KILN_ERR_NOMEM, "%s: out of memory", path);
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset_withSeed(&st, seed);
    size_t done = 0, kept = 0;
    int rc = 0;
    while (done < nbytes) {
        size_t want = nbytes - done < CHUNK ? nbytes - done : CHUNK;
        size_t got = npy_fread(f, buf, want, path, err);
        if (got == (size_t)-1) {
            rc = KILN_ERR_IO;
            break;
        }
        if (got < want) {
            rc = npy_err(err, KILN_ERR_PARSE, "%s: truncated: the header "
                         "describes %zu bytes of data, file has %zu", path,
                         nbytes, done + got);
            break;
        }
        if (!npy_host_is_little())
            npy_byteswap(buf, got, itemsize);
        for (size_t i = 0; dtype == KILN_BOOL && i < got; i++)
            if (buf[i] > 1) {
                rc = npy_err(err, KILN_ERR_PARSE, "%s: bool element %zu has "
                             "byte value %u (must be 0 or 1)", path,
                             done + i, (unsigned)buf[i]);
                break;
            }
        if (rc)
            break;
        XXH3_64bits_update(&st, buf, got);
        /* the chunk's bytes in runs of one row each: kept when the row's
         * index along the dim is in [b, e) */
        for (size_t s = 0; s < got && row;) {
            size_t x = done + s, u = x / row;
            size_t end = (u + 1) * row - done;
            if (end > got)
                end = got;
            int64_t r = (int64_t)(u % (size_t)n);
            if (r >= b && r < e) {
                memcpy(dst + kept, buf + s, end - s);
                kept += end - s;
            }
            s = end;
        }
        done += got;
    }
    free(buf);
    *digest = (uint64_t)XXH3_64bits_digest(&st);
    return rc;
}

static int npy_read_file(const data_file *df, const char *path,
                         npy_rows *rows, kiln_tensor *out, kiln_err *err)
{
    FILE *f = df->f;
    unsigned char pre[12];
    size_t got, lenbytes, hlen, nbytes, itemsize;
    long long fsize = -1;          /* total size when a regular file */
    char *header = NULL;
    unsigned char *data = NULL;
    npy_hdr h;
    kiln_dtype dtype;
    int64_t numel;
    int rc;

    if (df->regular)
        fsize = (long long)df->size;

    errno = 0;
    got = npy_fread(f, pre, 8, path, err);
    if (got == (size_t)-1)
        return KILN_ERR_IO;
    if (memcmp(pre, NPY_MAGIC, got < NPY_MAGIC_LEN ? got : NPY_MAGIC_LEN))
        return npy_err(err, KILN_ERR_PARSE,
                       "%s: not a .npy file (bad magic)", path);
    if (got == 0)
        return npy_err(err, KILN_ERR_PARSE,
                       "%s: not a .npy file (empty file)", path);
    if (got < 8)
        return npy_err(err, KILN_ERR_PARSE,
                       "%s: truncated: file ends inside the .npy preamble "
                       "(%zu bytes)", path, got);
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0)
        return npy_err(err, KILN_ERR_PARSE,
                       "%s: unsupported .npy format version %u.%u (kiln "
                       "reads 1.0, 2.0 and 3.0)", path, (unsigned)pre[6],
                       (unsigned)pre[7]);
    lenbytes = pre[6] == 1 ? 2 : 4;
    got = npy_fread(f, pre + 8, lenbytes, path, err);
    if (got == (size_t)-1)
        return KILN_ERR_IO;
    if (got < lenbytes)
        return npy_err(err, KILN_ERR_PARSE,
                       "%s: truncated: file ends inside the .npy preamble "
                       "(%zu bytes)", path, 8 + got);
    if (lenbytes == 2)
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    else
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 |
               (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen > NPY_MAX_HEADER)
        return npy_err(err, KILN_ERR_PARSE,
                       "%s: header length %zu exceeds kiln's limit of %u "
                       "bytes", path, hlen, NPY_MAX_HEADER);
    if (fsize < 0 && 8 + lenbytes + hlen > df->max) {
        char what[64];
        snprintf(what, sizeof what, "a header of %zu bytes", hlen);
        return data_too_large(path, what, df->max, err);
    }
    if (fsize >= 0 && (unsigned long long)fsize < 8 + lenbytes + hlen)
        return npy_err(err, KILN_ERR_PARSE,
                       "%s: truncated: header length is %zu bytes, file has "
                       "%lld after the preamble", path, hlen,
                       fsize - (long long)(8 + lenbytes));
    header = malloc(hlen ? hlen : 1);
    if (!header)
        return npy_err(err, KILN_ERR_NOMEM,
                       "%s: out of memory reading the header", path);
    got = npy_fread(f, header, hlen, path, err);
    if (got == (size_t)-1) {
        rc = KILN_ERR_IO;
        goto done;
    }
    if (got < hlen) {
        rc = npy_err(err, KILN_ERR_PARSE,
                     "%s: truncated: header length is %zu bytes, file has "
                     "%zu after the preamble", path, hlen, got);
        goto done;
    }

    memset(&h, 0, sizeof h);
    h.s = header;
    h.n = hlen;
    h.path = path;
    h.err = err;
    if ((rc = npy_parse_header(&h)) != 0)
        goto done;
    if (npy_parse_descr(h.descr, h.descr_len, &dtype) != 0) {
        char shown[EXCERPT_SIZE(EXCERPT_MAX)];
        rc = npy_err(err, KILN_ERR_PARSE,
                     "%s: unsupported dtype '%s' (kiln reads "
                     "little-endian f64, f32, i64, i32, bool); save "
                     "x.astype(np.float64) (or np.float32, np.int64, "
                     "np.int32, np.bool_) instead", path,
                     excerpt(shown, sizeof shown, h.descr, h.descr_len,
                             EXCERPT_MAX));
        goto done;
    }
    if (h.fortran) {
        rc = npy_err(err, KILN_ERR_PARSE,
                     "%s: fortran_order is True (a column-major array); "
                     "kiln reads C-ordered arrays only: save "
                     "np.ascontiguousarray(x) instead", path);
        goto done;
    }
    itemsize = npy_itemsize(dtype);
    if (npy_sizes(h.rank, h.dims, itemsize, &numel, &nbytes) != 0) {
        char sh[KILN_MAX_RANK * 24 + 8];
        npy_fmt_shape(sh, sizeof sh, h.rank, h.dims);
        rc = npy_err(err, KILN_ERR_PARSE,
                     "%s: shape %s is too large (byte size overflows)",
                     path, sh);
        goto done;
    }
    if (fsize < 0 && nbytes > df->max - (8 + lenbytes + hlen)) {
        char what[96];
        snprintf(what, sizeof what, "data of %zu bytes after a header of "
                 "%zu", nbytes, hlen);
        rc = data_too_large(path, what, df->max, err);
        goto done;
    }
    if (fsize >= 0) {
        unsigned long long avail =
            (unsigned long long)fsize - (8 + lenbytes + hlen);
        if (avail < nbytes) {
            rc = npy_err(err, KILN_ERR_PARSE,
                         "%s: truncated: header says %" PRId64 " elements "
                         "(%zu bytes), file has %llu", path, numel, nbytes,
                         avail);
            goto done;
        }
        if (avail > nbytes) {
            rc = npy_err(err, KILN_ERR_PARSE,
                         "%s: trailing data after the %" PRId64 " elements "
                         "(%zu bytes) the header describes", path, numel,
                         nbytes);
            goto done;
        }
    }
    int64_t pb = 0, pe = 0;
    if (rows) {
        /* a part's rows: the whole streamed through its digest, the
         * part's bytes kept (docs/mpi.md "Reading a part's rows") */
        if (rows->dim < 0 || rows->dim >= h.rank) {
            rc = npy_err(err, KILN_ERR_SHAPE, "%s: rank %d, no dim %d to "
                         "split", path, h.rank, rows->dim);
            goto done;
        }
        int64_t n = h.dims[rows->dim];
        size_t row = itemsize;
        for (int i = rows->dim + 1; i < h.rank; i++)
            row *= (size_t)h.dims[i];
        kiln_ir_part_rows(n, rows->part, rows->nparts, &pb, &pe);
        size_t keep = n ? nbytes / (size_t)n * (size_t)(pe - pb) : 0;
        data = malloc(keep ? keep : 1);
        if (!data) {
            rc = npy_err(err, KILN_ERR_NOMEM, "%s: out of memory for %zu "
                         "bytes of data", path, keep);
            goto done;
        }
        kiln_tensor whole = {.dtype = dtype, .rank = h.rank};
        for (int i = 0; i < h.rank; i++)
            whole.shape[i] = h.dims[i];
        if ((rc = npy_stream_rows(f, path, nbytes, itemsize, dtype, row, n,
                                  pb, pe, data,
                                  kiln_ir_part_head_digest(&whole),
                                  &rows->digest, err)))
            goto done;
        rows->total = n;
    } else {
        data = malloc(nbytes ? nbytes : 1);
        if (!data) {
            rc = npy_err(err, KILN_ERR_NOMEM, "%s: out of memory for %zu "
                         "bytes of data", path, nbytes);
            goto done;
        }
        got = npy_fread(f, data, nbytes, path, err);
        if (got == (size_t)-1) {
            rc = KILN_ERR_IO;
            goto done;
        }
        if (got < nbytes) {
            rc = npy_err(err, KILN_ERR_PARSE,
                         "%s: truncated: header says %" PRId64 " elements "
                         "(%zu bytes), file has %zu", path, numel, nbytes,
                         got);
            goto done;
        }
    }
    if (getc(f) != EOF) {
        rc = npy_err(err, KILN_ERR_PARSE,
                     "%s: trailing data after the %" PRId64 " elements "
                     "(%zu bytes) the header describes", path, numel,
                     nbytes);
        goto done;
    }
    if (ferror(f)) {
        rc = npy_err(err, KILN_ERR_IO, "%s: read error: %s", path,
                     strerror(errno));
        goto done;
    }
    if (dtype == KILN_BOOL && !rows) {      /* (rows: checked as read) */
        for (size_t i = 0; i < nbytes; i++)
            if (data[i] > 1) {
                rc = npy_err(err, KILN_ERR_PARSE,
                             "%s: bool element %zu has byte value %u (must "
                             "be 0 or 1)", path, i, (unsigned)data[i]);
                goto done;
            }
    }
    if (!npy_host_is_little() && !rows)
        npy_byteswap(data, nbytes, itemsize);

    memset(out, 0, sizeof *out);
    out->dtype = dtype;
    out->rank = h.rank;
    for (int i = 0; i < h.rank; i++)
        out->shape[i] = h.dims[i];
    if (rows)
        out->shape[rows->dim] = pe - pb;
    out->data = data;
    data = NULL;
    rc = KILN_OK;
done:
    free(header);
    free(data);
    return rc;
}

int kiln_npy_read(const char *path, kiln_tensor *out, kiln_err *err)
{
    return kiln_npy_read_opts(path, NULL, out, err);
}

/* Open `path` under `opt` and read it (whole, or rows' part). */
static int npy_read_path(const char *path, const kiln_read_options *opt,
                         npy_rows *rows, kiln_tensor *out, kiln_err *err)
{
    data_file df;
    int rc;
    if (!path || !out)
        return npy_err(err, KILN_ERR_ARG, "kiln_npy_read: %s is NULL",
                       !path ? "path" : "out");
    if ((rc = data_open(path, opt, &df, err)) != 0)
        return rc;
    rc = npy_read_file(&df, path, rows, out, err);
    fclose(df.f);
    return rc;
}

int kiln_npy_read_opts(const char *path, const kiln_read_options *opt,
                       kiln_tensor *out, kiln_err *err)
{
    return npy_read_path(path, opt, NULL, out, err);
}

int kiln_ir_part_npy_read(const char *path, const kiln_read_options *opt,
                          int dim, int part, int nparts, kiln_tensor *out,
                          int64_t *total, uint64_t *digest, kiln_err *err)
{
    if (nparts < 1 || part < 0 || part >= nparts)
        return npy_err(err, KILN_ERR_ARG, "kiln_ir_part_npy_read: part %d "
                       "of %d", part, nparts);
    npy_rows rows = {dim, part, nparts, 0, 0};
    int rc = npy_read_path(path, opt, &rows, out, err);
    if (!rc) {
        *total = rows.total;
        *digest = rows.digest;
    }
    return rc;
}

/* ---- writing ----------------------------------------------------------- */

/* Build the complete preamble + header np.save would write; returns its
 * length (a multiple of NPY_ALIGN) or 0 if it does not fit `size`. */
static size_t npy_build_header(char *buf, size_t size, const kiln_tensor *t)
{
    char dict[512], shape[KILN_MAX_RANK * 24 + 8];
    int dlen, first_len;
    size_t hlen, pre, pad, total;

    npy_fmt_shape(shape, sizeof shape, t->rank, t->shape);
    dlen = snprintf(dict, sizeof dict,
                    "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                    npy_descr(t->dtype), shape);
    if (dlen < 0 || (size_t)dlen >= sizeof dict)
        return 0;
    /* np.save's spare room so the first dim can grow in place */
    if (t->rank > 0) {
        char num[24];
        first_len = snprintf(num, sizeof num, "%" PRId64, t->shape[0]);
        if (first_len < NPY_GROWTH_DIGITS) {
            int extra = NPY_GROWTH_DIGITS - first_len;
            if ((size_t)dlen + (size_t)extra >= sizeof dict)
                return 0;
            memset(dict + dlen, ' ', (size_t)extra);
            dlen += extra;
        }
    }
    /* +1 for the final '\n'; like numpy, pad by a full NPY_ALIGN when the
     * header is already aligned. */
    hlen = (size_t)dlen + 1;
    pre = NPY_MAGIC_LEN + 2 + 2;
    pad = NPY_ALIGN - (pre + hlen) % NPY_ALIGN;
    if (hlen + pad > 0xffff) {
        pre = NPY_MAGIC_LEN + 2 + 4;
        pad = NPY_ALIGN - (pre + hlen) % NPY_ALIGN;
    }
    total = pre + hlen + pad;
    if (total > size)
        return 0;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    {
        size_t body = hlen + pad;
        unsigned char *p = (unsigned char *)buf + NPY_MAGIC_LEN;
        if (pre == NPY_MAGIC_LEN + 2 + 2) {
            p[0] = 1; p[1] = 0;
            p[2] = (unsigned char)(body & 0xff);
            p[3] = (unsigned char)(body >> 8);
        } else {
            p[0] = 2; p[1] = 0;
            p[2] = (unsigned char)(body & 0xff);
            p[3] = (unsigned char)(body >> 8 & 0xff);
            p[4] = (unsigned char)(body >> 16 & 0xff);
            p[5] = (unsigned char)(body >> 24 & 0xff);
        }
    }
    memcpy(buf + pre, dict, (size_t)dlen);
    memset(buf + pre + (size_t)dlen, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

static int npy_write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t k = write(fd, p, chunk);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Write the data little-endian: directly on a little-endian host, through
 * a swapped bounce buffer otherwise. */
static int npy_write_data(int fd, const kiln_tensor *t, size_t nbytes)
{
    size_t itemsize = npy_itemsize(t->dtype);
    if (nbytes == 0)
        return 0;
    if (npy_host_is_little() || itemsize == 1)
        return npy_write_all(fd, t->data, nbytes);
    {
        unsigned char tmp[8192];
        const unsigned char *p = t->data;
        while (nbytes > 0) {
            size_t chunk = nbytes < sizeof tmp ? nbytes : sizeof tmp;
            memcpy(tmp, p, chunk);
            npy_byteswap(tmp, chunk, itemsize);
            if (npy_write_all(fd, tmp, chunk) != 0)
                return -1;
            p += chunk;
            nbytes -= chunk;
        }
    }
    return 0;
}

#if !defined(__STDC_NO_ATOMICS__)
static atomic_uint npy_tmp_counter;
#define NPY_NEXT_TMP() atomic_fetch_add(&npy_tmp_counter, 1u)
#else
static unsigned npy_tmp_counter;
#define NPY_NEXT_TMP() (npy_tmp_counter++)
#endif

int kiln_npy_write(const char *path, const kiln_tensor *t, kiln_err *err)
{
    char head[1024];
    size_t headlen, nbytes, dirlen, tmpsize;
    int64_t numel;
    const char *slash;
    char *tmp = NULL;
    int fd = -1, rc, e;
    struct stat st;

    if (!path || !t)
        return npy_err(err, KILN_ERR_ARG, "kiln_npy_write: %s is NULL",
                       !path ? "path" : "t");
    if ((int)t->dtype < 0 || t->dtype >= KILN_NDTYPES)
        return npy_err(err, KILN_ERR_ARG,
                       "kiln_npy_write: %s: bad dtype %d", path,
                       (int)t->dtype);
    if (t->rank < 0 || t->rank > KILN_MAX_RANK)
        return npy_err(err, KILN_ERR_ARG,
                       "kiln_npy_write: %s: rank %d is outside 0..%d", path,
                       t->rank, KILN_MAX_RANK);
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 0)
            return npy_err(err, KILN_ERR_ARG,
                           "kiln_npy_write: %s: negative dimension %" PRId64
                           " (dim %d)", path, t->shape[i], i);
    if (npy_sizes(t->rank, t->shape, npy_itemsize(t->dtype), &numel,
                  &nbytes) != 0) {
        char sh[KILN_MAX_RANK * 24 + 8];
        npy_fmt_shape(sh, sizeof sh, t->rank, t->shape);
        return npy_err(err, KILN_ERR_ARG,
                       "kiln_npy_write: %s: shape %s is too large (byte "
                       "size overflows)", path, sh);
    }
    if (nbytes > 0 && !t->data)
        return npy_err(err, KILN_ERR_ARG,
                       "kiln_npy_write: %s: data is NULL", path);
    if (t->dtype == KILN_BOOL) {
        const unsigned char *b = t->data;
        for (size_t i = 0; i < nbytes; i++)
            if (b[i] > 1)
                return npy_err(err, KILN_ERR_ARG,
                               "kiln_npy_write: %s: bool element %zu has "
                               "byte value %u (must be 0 or 1)", path, i,
                               (unsigned)b[i]);
    }
    headlen = npy_build_header(head, sizeof head, t);
    if (headlen == 0) /* cannot happen with KILN_MAX_RANK dims */
        return npy_err(err, KILN_ERR_ARG,
                       "kiln_npy_write: %s: header too long", path);

    /* Never replace a directory, device, fifo... with a file. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return npy_err(err, KILN_ERR_IO,
                       "%s: cannot write: not a regular file", path);

    slash = strrchr(path, '/');
    dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    tmpsize = dirlen + 64;
    tmp = malloc(tmpsize);
    if (!tmp)
        return npy_err(err, KILN_ERR_NOMEM,
                       "%s: out of memory for a temporary file name", path);
    memcpy(tmp, path, dirlen);
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp + dirlen, tmpsize - dirlen, ".kiln-npy-%ld-%u.tmp",
                 (long)getpid(), (unsigned)NPY_NEXT_TMP());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            break;
    }
    if (fd < 0) {
        rc = npy_err(err, KILN_ERR_IO,
                     "%s: cannot create temporary file '%s': %s", path, tmp,
                     strerror(errno));
        free(tmp);
        return rc;
    }
    if (npy_write_all(fd, head, headlen) != 0 ||
        npy_write_data(fd, t, nbytes) != 0) {
        e = errno;
        rc = npy_err(err, KILN_ERR_IO,
                     "%s: write error on temporary file '%s': %s", path, tmp,
                     strerror(e));
        goto fail;
    }
    if (fsync(fd) != 0 && errno != EINVAL) {
        e = errno;
        rc = npy_err(err, KILN_ERR_IO,
                     "%s: cannot flush temporary file '%s': %s", path, tmp,
                     strerror(e));
        goto fail;
    }
    e = close(fd);
    fd = -1;
    if (e != 0) {
        e = errno;
        rc = npy_err(err, KILN_ERR_IO,
                     "%s: write error on temporary file '%s': %s", path, tmp,
                     strerror(e));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        rc = npy_err(err, KILN_ERR_IO,
                     "%s: cannot replace it with temporary file '%s': %s",
                     path, tmp, strerror(e));
        goto fail;
    }
    free(tmp);
    return KILN_OK;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    return rc;
}
