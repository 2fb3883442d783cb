/*
 * test_npy.c — TAP tests for kiln_npy_read / kiln_npy_write.
 *
 * Every file is made in a fresh mkdtemp directory; the hand-made .npy
 * files are written byte by byte here (no numpy needed).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/io.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "guard.h"
#include "tmpfiles.h"

/* ---- helpers ------------------------------------------------------------ */

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    if (n && fwrite(data, 1, n, f) != n) {
        fclose(f);
        return -1;
    }
    return fclose(f);
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (len == cap) {
            unsigned char *p = realloc(buf, cap ? cap * 2 : 4096);
            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
            cap = cap ? cap * 2 : 4096;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0)
            break;
    }
    fclose(f);
    *n = len;
    return buf;
}

/* Build a .npy image: preamble for `major`, the header text, `pad` spaces
 * and '\n' are added so the total is a multiple of `align`, then data. */
static size_t make_npy(unsigned char *buf, int major, const char *hdr,
                       size_t align, const void *data, size_t ndata)
{
    size_t pre = major == 1 ? 10 : 12, h = strlen(hdr), total;
    size_t hl = h + 1;
    if (align)
        hl += (align - (pre + hl) % align) % align;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    if (major == 1) {
        buf[8] = (unsigned char)(hl & 0xff);
        buf[9] = (unsigned char)(hl >> 8);
    } else {
        buf[8] = (unsigned char)(hl & 0xff);
        buf[9] = (unsigned char)(hl >> 8 & 0xff);
        buf[10] = (unsigned char)(hl >> 16 & 0xff);
        buf[11] = (unsigned char)(hl >> 24 & 0xff);
    }
    memcpy(buf + pre, hdr, h);
    memset(buf + pre + h, ' ', hl - h - 1);
    buf[pre + hl - 1] = '\n';
    total = pre + hl;
    if (ndata)
        memcpy(buf + total, data, ndata);
    return total + ndata;
}

/* Read `path` expecting failure with `code` and exactly `want` (which may
 * contain one %s for the path).  Also checks *out is left alone. */
static int expect_err(const char *path, int code, const char *want_fmt,
                      const char *desc)
{
    kiln_tensor t;
    kiln_err err;
    char want[2048];
    int rc;

    memset(&t, 0xAB, sizeof t);
    memset(&err, 0, sizeof err);
    snprintf(want, sizeof want, want_fmt, path);
    rc = kiln_npy_read(path, &t, &err);
    unsigned char *p = (unsigned char *)&t;
    int untouched = 1;
    for (size_t i = 0; i < sizeof t; i++)
        if (p[i] != 0xAB)
            untouched = 0;
    int good = rc == code && err.code == code &&
               strcmp(err.message, want) == 0 && untouched;
    if (!ok(good, "%s", desc)) {
        diag("rc %d code %d (want %d)", rc, err.code, code);
        diag("got:  %s", err.message);
        diag("want: %s", want);
        if (!untouched)
            diag("*out was modified");
    }
    if (rc == 0)
        free(t.data);
    return good;
}

static int write_npy_bytes(const char *name, int major, const char *hdr,
                           const void *data, size_t ndata)
{
    unsigned char *buf = malloc(strlen(hdr) + ndata + 200);
    size_t n;
    int rc;
    if (!buf)
        return -1;
    n = make_npy(buf, major, hdr, 64, data, ndata);
    rc = write_file(tpath(name), buf, n);
    free(buf);
    return rc;
}

/* Number of leftover temporary files (".kiln-npy-*") in dir. */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, ".kiln-npy-", 10) == 0)
            n++;
    closedir(d);
    return n;
}

static size_t dsize(kiln_dtype dt)
{
    static const size_t s[] = {8, 4, 8, 4, 1};
    return s[dt];
}

static void fill(kiln_dtype dt, void *data, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case KILN_F64: {
            double v = (double)i * 1.5 - 7.25;
            if (i == 1) v = -0.0;
            if (i == 2) v = INFINITY;
            if (i == 3) v = NAN;
            if (i == 4) v = 1e-310;
            ((double *)data)[i] = v;
            break;
        }
        case KILN_F32: {
            float v = (float)i * 0.75f - 3.0f;
            if (i == 2) v = -INFINITY;
            if (i == 3) v = NAN;
            ((float *)data)[i] = v;
            break;
        }
        case KILN_I64:
            ((int64_t *)data)[i] = i % 2 ? INT64_MIN + i : INT64_MAX - i * 977;
            break;
        case KILN_I32:
            ((int32_t *)data)[i] = i % 2 ? INT32_MIN + (int32_t)i
                                         : (int32_t)(i * 123457);
            break;
        default:
            ((unsigned char *)data)[i] = (unsigned char)(i % 3 == 0);
        }
    }
}

/* ---- tests -------------------------------------------------------------- */

static const char *dt_name[] = {"f64", "f32", "i64", "i32", "bool"};

static void test_roundtrips(void)
{
    static const int64_t shapes[4][3] = {{0}, {5}, {2, 3}, {2, 3, 4}};
    for (int dt = 0; dt < KILN_NDTYPES; dt++)
        for (int rank = 0; rank <= 3; rank++) {
            kiln_tensor t, r;
            kiln_err err;
            char name[64];
            int64_t n = 1;
            size_t flen = 0;
            int good = 1;

            memset(&t, 0, sizeof t);
            t.dtype = (kiln_dtype)dt;
            t.rank = rank;
            for (int i = 0; i < rank; i++) {
                t.shape[i] = shapes[rank][i];
                n *= t.shape[i];
            }
            t.data = malloc((size_t)n * dsize(t.dtype));
            fill(t.dtype, t.data, n);
            snprintf(name, sizeof name, "rt_%s_%d.npy", dt_name[dt], rank);
            err.code = 12345;
            if (kiln_npy_write(tpath(name), &t, &err) != 0) {
                ok(0, "round trip %s rank %d", dt_name[dt], rank);
                diag("write: %s", err.message);
                free(t.data);
                continue;
            }
            good &= err.code == 12345; /* untouched on success */
            unsigned char *raw = read_file(tpath(name), &flen);
            /* v1.0, data 64-byte aligned, header ends in '\n' */
            size_t hl = raw && flen >= 10 ? (size_t)(raw[8] | raw[9] << 8)
                                          : 0;
            good &= raw && flen >= 10 && raw[6] == 1 && raw[7] == 0 &&
                    (10 + hl) % 64 == 0 && raw[10 + hl - 1] == '\n' &&
                    flen == 10 + hl + (size_t)n * dsize(t.dtype);
            free(raw);
            memset(&r, 0, sizeof r);
            if (kiln_npy_read(tpath(name), &r, &err) != 0) {
                ok(0, "round trip %s rank %d", dt_name[dt], rank);
                diag("read: %s", err.message);
                free(t.data);
                continue;
            }
            good &= r.dtype == t.dtype && r.rank == t.rank && r.data;
            for (int i = 0; i < rank; i++)
                good &= r.shape[i] == t.shape[i];
            for (int i = rank; i < KILN_MAX_RANK; i++)
                good &= r.shape[i] == 0;
            good &= memcmp(r.data, t.data, (size_t)n * dsize(t.dtype)) == 0;
            ok(good, "round trip %s rank %d", dt_name[dt], rank);
            free(r.data);
            free(t.data);
        }
}

static void test_empty_arrays(void)
{
    kiln_tensor t, r;
    kiln_err err;
    int good = 1;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F32;
    t.rank = 2;
    t.shape[0] = 3;
    t.shape[1] = 0;
    t.data = NULL; /* allowed: no elements */
    good &= kiln_npy_write(tpath("empty.npy"), &t, &err) == 0;
    memset(&r, 0, sizeof r);
    good &= kiln_npy_read(tpath("empty.npy"), &r, &err) == 0;
    good &= r.dtype == KILN_F32 && r.rank == 2 && r.shape[0] == 3 &&
            r.shape[1] == 0 && r.data != NULL;
    free(r.data);
    ok(good, "zero-element array (3, 0) round trips, data non-NULL");
}

/* The bytes np.save writes for np.zeros(3) (numpy >= 1.23: 128-byte
 * header with room to grow the first dim). */
static void test_exact_header(void)
{
    static const char want[] =
        "\x93NUMPY\x01\x00\x76\x00"
        "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"
        "                                                            "
        "\n";
    kiln_tensor t;
    kiln_err err;
    double z[3] = {0, 0, 0};
    size_t n = 0;
    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = 1;
    t.shape[0] = 3;
    t.data = z;
    kiln_npy_write(tpath("zeros3.npy"), &t, &err);
    unsigned char *raw = read_file(tpath("zeros3.npy"), &n);
    ok(sizeof want - 1 == 128 && raw && n == 128 + 24 &&
           memcmp(raw, want, 128) == 0,
       "header bytes identical to np.save(np.zeros(3))");
    free(raw);

    /* rank 0 and rank 2 header text */
    int32_t s = 7;
    t.dtype = KILN_I32;
    t.rank = 0;
    t.data = &s;
    kiln_npy_write(tpath("scalar.npy"), &t, &err);
    raw = read_file(tpath("scalar.npy"), &n);
    ok(raw && n == 128 + 4 &&
           memcmp(raw + 10, "{'descr': '<i4', 'fortran_order': False, "
                            "'shape': (), }", 55) == 0 &&
           raw[65] == ' ' && raw[127] == '\n' && raw[128] == 7,
       "scalar header is 'shape': () and data at 128");
    free(raw);
    unsigned char b[6] = {1, 0, 1, 1, 0, 0};
    t.dtype = KILN_BOOL;
    t.rank = 2;
    t.shape[0] = 2;
    t.shape[1] = 3;
    t.data = b;
    kiln_npy_write(tpath("b23.npy"), &t, &err);
    raw = read_file(tpath("b23.npy"), &n);
    ok(raw && n == 128 + 6 &&
           memcmp(raw + 10, "{'descr': '|b1', 'fortran_order': False, "
                            "'shape': (2, 3), }", 57) == 0,
       "bool (2, 3) header text");
    free(raw);
}

static void test_handmade(void)
{
    kiln_tensor t;
    kiln_err err;
    unsigned char buf[512];
    size_t n;

    /* v1.0 as numpy < 1.23 wrote it: 16-byte alignment, no spare room */
    unsigned char i4[24];
    int32_t want_i4[6] = {1, -2, 3, 2147483647, -2147483647 - 1, 0};
    for (int i = 0; i < 6; i++) {
        uint32_t u = (uint32_t)want_i4[i];
        for (int k = 0; k < 4; k++)
            i4[i * 4 + k] = (unsigned char)(u >> (8 * k));
    }
    n = make_npy(buf, 1,
                 "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
                 16, i4, sizeof i4);
    write_file(tpath("v1.npy"), buf, n);
    memset(&t, 0, sizeof t);
    int rc = kiln_npy_read(tpath("v1.npy"), &t, &err);
    ok(rc == 0 && n == 80 + 24 && t.dtype == KILN_I32 && t.rank == 2 &&
           t.shape[0] == 2 && t.shape[1] == 3 &&
           memcmp(t.data, want_i4, sizeof want_i4) == 0,
       "v1.0 header, 16-byte aligned, '<i4' (2, 3)");
    if (rc) diag("%s", err.message);
    if (rc == 0) free(t.data);

    /* v2.0: 4-byte length, double quotes, other key order, no trailing
     * comma */
    static const unsigned char f8[16] = {0, 0, 0, 0, 0, 0, 0xF0, 0x3F,
                                         0, 0, 0, 0, 0, 0, 0x04, 0xC0};
    n = make_npy(buf, 2,
                 "{\"shape\": (2,), \"fortran_order\": False, \"descr\": "
                 "\"<f8\"}", 64, f8, sizeof f8);
    write_file(tpath("v2.npy"), buf, n);
    memset(&t, 0, sizeof t);
    rc = kiln_npy_read(tpath("v2.npy"), &t, &err);
    ok(rc == 0 && t.dtype == KILN_F64 && t.rank == 1 && t.shape[0] == 2 &&
           ((double *)t.data)[0] == 1.0 && ((double *)t.data)[1] == -2.5,
       "v2.0 header, double quotes, keys reordered, '<f8' (2,)");
    if (rc) diag("%s", err.message);
    if (rc == 0) free(t.data);

    /* v3.0, '=f4' scalar */
    static const unsigned char f4[4] = {0, 0, 0, 0x3F};
    n = make_npy(buf, 3,
                 "{'descr': '=f4', 'fortran_order': False, 'shape': ()}",
                 64, f4, sizeof f4);
    write_file(tpath("v3.npy"), buf, n);
    memset(&t, 0, sizeof t);
    rc = kiln_npy_read(tpath("v3.npy"), &t, &err);
    ok(rc == 0 && t.dtype == KILN_F32 && t.rank == 0 &&
           ((float *)t.data)[0] == 0.5f,
       "v3.0 header, '=f4' scalar shape ()");
    if (rc) diag("%s", err.message);
    if (rc == 0) free(t.data);

    /* '|b1' (4,) and '=i8' with a Python 2 long dim */
    static const unsigned char b1[4] = {1, 0, 1, 1};
    n = make_npy(buf, 1,
                 "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }",
                 64, b1, sizeof b1);
    write_file(tpath("b1.npy"), buf, n);
    memset(&t, 0, sizeof t);
    rc = kiln_npy_read(tpath("b1.npy"), &t, &err);
    ok(rc == 0 && t.dtype == KILN_BOOL && t.rank == 1 && t.shape[0] == 4 &&
           memcmp(t.data, b1, 4) == 0,
       "'|b1' (4,)");
    if (rc == 0) free(t.data);

    static const unsigned char i8[8] = {0xFE, 0xFF, 0xFF, 0xFF,
                                        0xFF, 0xFF, 0xFF, 0xFF};
    n = make_npy(buf, 1,
                 "{'descr': '=i8', 'fortran_order': False, 'shape': (1L,), }",
                 64, i8, sizeof i8);
    write_file(tpath("i8.npy"), buf, n);
    memset(&t, 0, sizeof t);
    rc = kiln_npy_read(tpath("i8.npy"), &t, &err);
    ok(rc == 0 && t.dtype == KILN_I64 && t.rank == 1 && t.shape[0] == 1 &&
           ((int64_t *)t.data)[0] == -2,
       "'=i8' with shape (1L,)");
    if (rc) diag("%s", err.message);
    if (rc == 0) free(t.data);
}

static void test_read_errors(void)
{
    unsigned char buf[2048];
    unsigned char zeros[1024];
    size_t n;

    memset(zeros, 0, sizeof zeros);
    expect_err(tpath("nope.npy"), KILN_ERR_IO,
               "%s: cannot open: No such file or directory",
               "missing file: KILN_ERR_IO with strerror");
    expect_err(tmpdir, KILN_ERR_IO, "%s: is a directory",
               "a directory: KILN_ERR_IO read error");

    write_file(tpath("magic.npy"), "PK\x03\x04 this is a zip", 18);
    expect_err(tpath("magic.npy"), KILN_ERR_PARSE,
               "%s: not a .npy file (bad magic)", "bad magic");
    write_file(tpath("empty0.npy"), "", 0);
    expect_err(tpath("empty0.npy"), KILN_ERR_PARSE,
               "%s: not a .npy file (empty file)", "empty file");

    n = make_npy(buf, 4, "{'descr': '<f8', 'fortran_order': False, "
                 "'shape': (1,), }", 64, zeros, 8);
    write_file(tpath("v4.npy"), buf, n);
    expect_err(tpath("v4.npy"), KILN_ERR_PARSE,
               "%s: unsupported .npy format version 4.0 (kiln reads 1.0, "
               "2.0 and 3.0)", "format version 4.0 refused");

    write_npy_bytes("be.npy", 1, "{'descr': '>f8', 'fortran_order': False, "
                    "'shape': (1,), }", zeros, 8);
    expect_err(tpath("be.npy"), KILN_ERR_PARSE,
               "%s: unsupported dtype '>f8' (kiln reads little-endian f64, "
               "f32, i64, i32, bool); save x.astype(np.float64) (or "
               "np.float32, np.int64, np.int32, np.bool_) instead", "big-endian '>f8' refused");
    write_npy_bytes("u1.npy", 1, "{'descr': '|u1', 'fortran_order': False, "
                    "'shape': (1,), }", zeros, 1);
    expect_err(tpath("u1.npy"), KILN_ERR_PARSE,
               "%s: unsupported dtype '|u1' (kiln reads little-endian f64, "
               "f32, i64, i32, bool); save x.astype(np.float64) (or "
               "np.float32, np.int64, np.int32, np.bool_) instead", "'|u1' refused");
    write_npy_bytes("f2.npy", 1, "{'descr': '<f2', 'fortran_order': False, "
                    "'shape': (1,), }", zeros, 2);
    expect_err(tpath("f2.npy"), KILN_ERR_PARSE,
               "%s: unsupported dtype '<f2' (kiln reads little-endian f64, "
               "f32, i64, i32, bool); save x.astype(np.float64) (or "
               "np.float32, np.int64, np.int32, np.bool_) instead", "'<f2' refused");
    write_npy_bytes("rec.npy", 1, "{'descr': [('a', '<f8')], "
                    "'fortran_order': False, 'shape': (1,), }", zeros, 8);
    expect_err(tpath("rec.npy"), KILN_ERR_PARSE,
               "%s: unsupported dtype (structured arrays are not supported; "
               "kiln reads little-endian f64, f32, i64, i32, bool)",
               "structured dtype refused");

    write_npy_bytes("fortran.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "True, 'shape': (2, 2), }", zeros, 32);
    expect_err(tpath("fortran.npy"), KILN_ERR_PARSE,
               "%s: fortran_order is True (a column-major array); kiln "
               "reads C-ordered arrays only: save np.ascontiguousarray(x) "
               "instead",
               "fortran_order True refused");

    write_npy_bytes("trunc.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (100,), }", zeros, 640);
    expect_err(tpath("trunc.npy"), KILN_ERR_PARSE,
               "%s: truncated: header says 100 elements (800 bytes), file "
               "has 640", "truncated data");
    write_npy_bytes("trail.npy", 1, "{'descr': '<i4', 'fortran_order': "
                    "False, 'shape': (3,), }", zeros, 13);
    expect_err(tpath("trail.npy"), KILN_ERR_PARSE,
               "%s: trailing data after the 3 elements (12 bytes) the "
               "header describes", "trailing data");

    write_npy_bytes("rank9.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
                    zeros, 8);
    expect_err(tpath("rank9.npy"), KILN_ERR_PARSE,
               "%s: rank 9 exceeds KILN_MAX_RANK (8)", "rank 9 refused");
    write_npy_bytes("rank8.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (1, 1, 1, 1, 1, 1, 1, 2), }", zeros, 16);
    {
        kiln_tensor t;
        kiln_err err;
        int rc = kiln_npy_read(tpath("rank8.npy"), &t, &err);
        ok(rc == 0 && t.rank == 8 && t.shape[7] == 2, "rank 8 accepted");
        if (rc == 0) free(t.data);
    }
    write_npy_bytes("neg.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (2, -3), }", zeros, 0);
    expect_err(tpath("neg.npy"), KILN_ERR_PARSE,
               "%s: negative dimension -3 in shape", "negative dim refused");
    write_npy_bytes("ovf.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (4611686018427387904, 4), }", zeros, 0);
    expect_err(tpath("ovf.npy"), KILN_ERR_PARSE,
               "%s: shape (4611686018427387904, 4) is too large (byte size "
               "overflows)", "overflowing element count refused");
    write_npy_bytes("ovf2.npy", 1, "{'descr': '<i4', 'fortran_order': "
                    "False, 'shape': (2305843009213693952,), }", zeros, 0);
    expect_err(tpath("ovf2.npy"), KILN_ERR_PARSE,
               "%s: shape (2305843009213693952,) is too large (byte size "
               "overflows)", "overflowing byte size refused");
    write_npy_bytes("ovf3.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (99999999999999999999,), }", zeros, 0);
    expect_err(tpath("ovf3.npy"), KILN_ERR_PARSE,
               "%s: dimension 99999999999999999999 in shape is too large",
               "dim beyond int64 refused");
    write_npy_bytes("big.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (1000000000000,), }", zeros, 8);
    expect_err(tpath("big.npy"), KILN_ERR_PARSE,
               "%s: truncated: header says 1000000000000 elements "
               "(8000000000000 bytes), file has 8",
               "huge shape with tiny file: truncated, nothing allocated");

    static const unsigned char bb[4] = {1, 0, 2, 1};
    write_npy_bytes("bool2.npy", 1, "{'descr': '|b1', 'fortran_order': "
                    "False, 'shape': (4,), }", bb, 4);
    expect_err(tpath("bool2.npy"), KILN_ERR_PARSE,
               "%s: bool element 2 has byte value 2 (must be 0 or 1)",
               "bool byte 2 refused");

    write_npy_bytes("nokey.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, }", zeros, 8);
    expect_err(tpath("nokey.npy"), KILN_ERR_PARSE,
               "%s: malformed header: missing key 'shape'", "missing key");
    write_npy_bytes("xkey.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (1,), 'extra': 1}", zeros, 8);
    expect_err(tpath("xkey.npy"), KILN_ERR_PARSE,
               "%s: malformed header: unexpected key 'extra'",
               "unexpected key");
    write_npy_bytes("tuple.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (3), }", zeros, 24);
    expect_err(tpath("tuple.npy"), KILN_ERR_PARSE,
               "%s: malformed header: 'shape' is not a tuple (a 1-tuple "
               "needs a comma) (at byte 53 of the header)",
               "(3) is not a tuple");
    write_npy_bytes("dup.npy", 1, "{'descr': '<f8', 'descr': '<f8', "
                    "'fortran_order': False, 'shape': (1,), }", zeros, 8);
    expect_err(tpath("dup.npy"), KILN_ERR_PARSE,
               "%s: malformed header: duplicate key 'descr' (at byte 26 of "
               "the header)", "duplicate key");

    /* header length larger than the file */
    n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, "
                 "'shape': (1,), }", 64, NULL, 0);
    write_file(tpath("hshort.npy"), buf, 40);
    expect_err(tpath("hshort.npy"), KILN_ERR_PARSE,
               "%s: truncated: header length is 118 bytes, file has 30 "
               "after the preamble", "truncated header");
    (void)n;
    write_file(tpath("pre.npy"), "\x93NUMPY\x01", 7);
    expect_err(tpath("pre.npy"), KILN_ERR_PARSE,
               "%s: truncated: file ends inside the .npy preamble (7 "
               "bytes)", "truncated preamble");

    /* NULL arguments; err may be NULL */
    {
        kiln_tensor t;
        kiln_err err;
        ok(kiln_npy_read(NULL, &t, &err) == KILN_ERR_ARG &&
               err.code == KILN_ERR_ARG &&
               strcmp(err.message, "kiln_npy_read: path is NULL") == 0,
           "NULL path: KILN_ERR_ARG");
        ok(kiln_npy_read(tpath("be.npy"), &t, NULL) == KILN_ERR_PARSE,
           "err may be NULL");
    }
}

static void test_write_errors(void)
{
    kiln_tensor t;
    kiln_err err;
    double d[4] = {1, 2, 3, 4};
    unsigned char b[3] = {0, 1, 5};

    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = 1;
    t.shape[0] = 4;
    t.data = d;

    {
        kiln_tensor bad = t;
        int good = 1;
        bad.dtype = (kiln_dtype)7;
        good &= kiln_npy_write(tpath("w.npy"), &bad, &err) == KILN_ERR_ARG;
        bad = t;
        bad.rank = 9;
        good &= kiln_npy_write(tpath("w.npy"), &bad, &err) == KILN_ERR_ARG;
        bad = t;
        bad.shape[0] = -1;
        good &= kiln_npy_write(tpath("w.npy"), &bad, &err) == KILN_ERR_ARG;
        bad = t;
        bad.data = NULL;
        good &= kiln_npy_write(tpath("w.npy"), &bad, &err) == KILN_ERR_ARG;
        good &= kiln_npy_write(tpath("w.npy"), NULL, &err) == KILN_ERR_ARG;
        good &= kiln_npy_write(NULL, &t, &err) == KILN_ERR_ARG;
        good &= access(tpath("w.npy"), F_OK) != 0;
        ok(good, "invalid tensors: KILN_ERR_ARG, no file created");
    }
    {
        kiln_tensor bt = t;
        char want[4300];
        bt.dtype = KILN_BOOL;
        bt.shape[0] = 3;
        bt.data = b;
        snprintf(want, sizeof want, "kiln_npy_write: %s: bool element 2 has "
                 "byte value 5 (must be 0 or 1)", tpath("wb.npy"));
        int rc = kiln_npy_write(tpath("wb.npy"), &bt, &err);
        ok(rc == KILN_ERR_ARG && strcmp(err.message, want) == 0,
           "bool byte 5 refused on write");
    }
    {
        char want[4300];
        const char *p = tpath("no/such/dir/x.npy");
        int rc = kiln_npy_write(p, &t, &err);
        snprintf(want, sizeof want, "%s: cannot create temporary file '%s/"
                 "no/such/dir/.kiln-npy-", p, tmpdir);
        ok(rc == KILN_ERR_IO && err.code == KILN_ERR_IO &&
               strncmp(err.message, want, strlen(want)) == 0 &&
               strstr(err.message, ".tmp': No such file or directory"),
           "missing directory: KILN_ERR_IO with path and strerror");
        if (rc != KILN_ERR_IO) diag("%s", err.message);
    }
    {
        char want[4300];
        mkdir(tpath("adir"), 0700);
        int rc = kiln_npy_write(tpath("adir"), &t, &err);
        snprintf(want, sizeof want, "%s: cannot write: not a regular file",
                 tpath("adir"));
        ok(rc == KILN_ERR_IO && strcmp(err.message, want) == 0,
           "path is a directory: KILN_ERR_IO, directory kept");
    }
    {
        /* overwrite keeps atomicity: the new content replaces the old */
        double e[2] = {9, 8};
        kiln_tensor t2 = t, r;
        int good = kiln_npy_write(tpath("over.npy"), &t, &err) == 0;
        t2.shape[0] = 2;
        t2.data = e;
        good &= kiln_npy_write(tpath("over.npy"), &t2, &err) == 0;
        good &= kiln_npy_read(tpath("over.npy"), &r, &err) == 0;
        good &= r.shape[0] == 2 && ((double *)r.data)[1] == 8;
        if (good)
            free(r.data);
        ok(good, "overwriting an existing file");
    }
    if (geteuid() == 0) {
        ok(1, "# SKIP running as root: a read-only directory is "
              "writable");
    } else {
        /* a failed write leaves the existing file as it was */
        size_t n0 = 0, n1 = 0;
        double e[1] = {42};
        kiln_tensor t2 = t;
        mkdir(tpath("ro"), 0700);
        kiln_npy_write(tpath("ro/keep.npy"), &t, &err);
        unsigned char *before = read_file(tpath("ro/keep.npy"), &n0);
        chmod(tpath("ro"), 0500);
        t2.shape[0] = 1;
        t2.data = e;
        int rc = kiln_npy_write(tpath("ro/keep.npy"), &t2, &err);
        chmod(tpath("ro"), 0700);
        unsigned char *after = read_file(tpath("ro/keep.npy"), &n1);
        ok(rc == KILN_ERR_IO && before && after && n0 == n1 &&
               memcmp(before, after, n0) == 0 && count_tmp(tpath("ro")) == 0,
           "failed write leaves the existing file untouched");
        free(before);
        free(after);
    }
    {
        /* a write that fails half-way (file size limit, works as root
         * too) leaves the existing file as it was */
        struct rlimit old, lim;
        struct sigaction sa, oldsa;
        size_t n0 = 0, n1 = 0;
        static double big[1000];
        kiln_tensor t2 = t;
        char want[4300];
        kiln_npy_write(tpath("keep2.npy"), &t, &err);
        unsigned char *before = read_file(tpath("keep2.npy"), &n0);
        t2.shape[0] = 1000;
        t2.data = big;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGXFSZ, &sa, &oldsa);
        getrlimit(RLIMIT_FSIZE, &old);
        lim = old;
        lim.rlim_cur = 4096;
        setrlimit(RLIMIT_FSIZE, &lim);
        int rc = kiln_npy_write(tpath("keep2.npy"), &t2, &err);
        setrlimit(RLIMIT_FSIZE, &old);
        sigaction(SIGXFSZ, &oldsa, NULL);
        unsigned char *after = read_file(tpath("keep2.npy"), &n1);
        snprintf(want, sizeof want, "%s: write error on temporary file '%s/"
                 ".kiln-npy-", tpath("keep2.npy"), tmpdir);
        ok(rc == KILN_ERR_IO &&
               strncmp(err.message, want, strlen(want)) == 0 &&
               strstr(err.message, ".tmp': File too large") && before &&
               after && n0 == n1 && memcmp(before, after, n0) == 0,
           "write failing half-way: KILN_ERR_IO, existing file untouched");
        if (rc != KILN_ERR_IO || !strstr(err.message, "File too large"))
            diag("%s", err.message);
        free(before);
        free(after);
    }
    ok(count_tmp(tmpdir) == 0, "no temporary files left behind");
}

/* Truncating a valid file at every length must give an error, never a
 * crash, and leave *out alone. */
static void test_truncation_fuzz(void)
{
    static const struct { kiln_dtype dt; int rank; int64_t s0, s1; } cases[] = {
        {KILN_F64, 2, 2, 3}, {KILN_BOOL, 1, 5, 0}, {KILN_I32, 0, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kiln_tensor t;
        kiln_err err;
        unsigned char data[64];
        size_t n = 0;
        int good = 1, checked = 0;
        memset(&t, 0, sizeof t);
        t.dtype = cases[c].dt;
        t.rank = cases[c].rank;
        t.shape[0] = cases[c].s0;
        t.shape[1] = cases[c].s1;
        t.data = data;
        fill(t.dtype, data, 6);
        kiln_npy_write(tpath("full.npy"), &t, &err);
        unsigned char *raw = read_file(tpath("full.npy"), &n);
        if (!raw) {
            ok(0, "truncation fuzz %s rank %d", dt_name[t.dtype], t.rank);
            continue;
        }
        for (size_t len = 0; len < n; len++) {
            kiln_tensor r;
            memset(&r, 0x5A, sizeof r);
            write_file(tpath("cut.npy"), raw, len);
            err.code = 0;
            int rc = kiln_npy_read(tpath("cut.npy"), &r, &err);
            unsigned char *p = (unsigned char *)&r;
            for (size_t i = 0; i < sizeof r; i++)
                if (p[i] != 0x5A)
                    good = 0;
            if (rc != KILN_ERR_PARSE || err.code != KILN_ERR_PARSE) {
                if (good)
                    diag("length %zu: rc %d: %s", len, rc, err.message);
                good = 0;
                if (rc == 0)
                    free(r.data);
            }
            checked++;
        }
        ok(good && checked == (int)n,
           "truncation fuzz %s rank %d: all %zu prefixes refused",
           dt_name[t.dtype], t.rank, n);
        free(raw);
    }
}

/* Overwrite each header byte with interesting values: reading must either
 * succeed with a consistent tensor or fail cleanly. */
static void test_mutation_fuzz(void)
{
    static const unsigned char vals[] = {0, 0xff, '(', ')', ',', '\'', '"',
                                         '-', '9', ' ', '}', '{', ':', 'L',
                                         '\n', '0', '1', 'T', 'i', 'b'};
    kiln_tensor t;
    kiln_err err;
    unsigned char data[48];
    size_t n = 0;
    int good = 1, runs = 0, successes = 0;

    memset(&t, 0, sizeof t);
    t.dtype = KILN_F64;
    t.rank = 2;
    t.shape[0] = 2;
    t.shape[1] = 3;
    t.data = data;
    fill(KILN_F64, data, 6);
    kiln_npy_write(tpath("m.npy"), &t, &err);
    unsigned char *raw = read_file(tpath("m.npy"), &n);
    for (size_t i = 0; raw && i < 128; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            unsigned char save = raw[i];
            kiln_tensor r;
            raw[i] = vals[v];
            write_file(tpath("mut.npy"), raw, n);
            raw[i] = save;
            memset(&r, 0, sizeof r);
            err.code = KILN_OK;
            int rc = kiln_npy_read(tpath("mut.npy"), &r, &err);
            runs++;
            if (rc == 0) {
                successes++;
                int64_t numel = 1;
                for (int k = 0; k < r.rank; k++)
                    numel *= r.shape[k];
                good &= r.data != NULL && r.rank >= 0 &&
                        r.rank <= KILN_MAX_RANK && numel * 8 <= 48;
                free(r.data);
            } else {
                good &= (rc == KILN_ERR_PARSE || rc == KILN_ERR_IO) &&
                        err.code == rc && err.message[0] != '\0' &&
                        strlen(err.message) < sizeof err.message;
            }
        }
    ok(raw && good && runs == 128 * (int)sizeof vals,
       "header mutation fuzz: %d files, %d read, rest refused cleanly", runs,
       successes);
    free(raw);
}

/* ---- trust (issue 13) ------------------------------------------------ */

static int npy_in_child(void *arg, char *msg, size_t size)
{
    const kiln_read_options *o = ((const void **)arg)[1];
    kiln_tensor t;
    kiln_err err = {0, ""};
    int rc = kiln_npy_read_opts(((const char **)arg)[0], o, &t, &err);
    if (rc == 0)
        free(t.data);
    snprintf(msg, size, "%s", err.message);
    return rc;
}

static void test_trust(void)
{
    unsigned char zeros[64] = {0};
    kiln_tensor t;
    kiln_err err;
    char msg[1100], want[1200];
    int rc;

    /* a zero-element shape whose other dims overflow when multiplied:
     * accepted by the reader, and kiln_shape_numel agrees it is empty */
    write_npy_bytes("zero_big.npy", 1, "{'descr': '<f8', 'fortran_order': "
                    "False, 'shape': (4611686018427387904, "
                    "4611686018427387904, 0), }", zeros, 0);
    memset(&err, 0, sizeof err);
    rc = kiln_npy_read(tpath("zero_big.npy"), &t, &err);
    ok(rc == 0 && t.rank == 3 && kiln_shape_numel(t.rank, t.shape) == 0,
       "(2^62, 2^62, 0): read, and kiln_shape_numel says 0 elements");
    if (rc == 0)
        free(t.data);
    else
        diag("%s", err.message);
    {
        int64_t a[3] = {0, INT64_MAX, INT64_MAX}, b[2] = {INT64_MAX, 2};
        int64_t c[2] = {3, -1};
        ok(kiln_shape_numel(3, a) == 0 && kiln_shape_numel(2, b) == -1 &&
               kiln_shape_numel(2, c) == -1 && kiln_shape_numel(0, NULL) == 1,
           "kiln_shape_numel: 0 for any zero dim, -1 on overflow or a "
           "negative dim, 1 for rank 0");
    }

    /* a dtype with control bytes is quoted escaped */
    write_npy_bytes("esc.npy", 1, "{'descr': '\x1b[2J<f8', 'fortran_order': "
                    "False, 'shape': (1,), }", zeros, 8);
    memset(&err, 0, sizeof err);
    rc = kiln_npy_read(tpath("esc.npy"), &t, &err);
    snprintf(want, sizeof want, "%s: unsupported dtype '\\x1b[2J<f8' (kiln "
             "reads little-endian f64, f32, i64, i32, bool); save "
             "x.astype(np.float64) (or np.float32, np.int64, np.int32, "
             "np.bool_) instead", tpath("esc.npy"));
    ok(rc == KILN_ERR_PARSE && strcmp(err.message, want) == 0,
       "a dtype with an escape sequence is quoted escaped");
    diag("%s", err.message);

    /* a FIFO is refused without blocking */
    {
        const char *fifo = tpath("data.fifo");
        unlink(fifo);
        if (mkfifo(fifo, 0600) != 0) {
            ok(1, "# SKIP mkfifo: %s", strerror(errno));
        } else {
            const void *arg[2] = {fifo, NULL};
            rc = guarded(npy_in_child, arg, 10, msg, sizeof msg);
            ok(rc == KILN_ERR_IO && strstr(msg, ": is a FIFO; "),
               "a FIFO is refused at once");
            diag("rc %d: %s", rc, msg);
            unlink(fifo);
        }
    }
    /* /dev/zero is refused; allowed, it is read only as far as the limit
     * (its header length is 0, so the header itself is malformed) */
    {
        const void *arg[2] = {"/dev/zero", NULL};
        rc = guarded(npy_in_child, arg, 20, msg, sizeof msg);
        ok(rc == KILN_ERR_IO &&
               strncmp(msg, "/dev/zero: is a character device; ", 34) == 0,
           "/dev/zero is refused");
        diag("rc %d: %s", rc, msg);
    }
    /* the size limit: a regular file over it is refused before reading */
    {
        kiln_read_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.max_size = 100;
        write_npy_bytes("big.npy", 1, "{'descr': '<f8', 'fortran_order': "
                        "False, 'shape': (8,), }", zeros, 64);
        struct stat st;
        long long fsz = stat(tpath("big.npy"), &st) == 0 ? st.st_size : -1;
        memset(&err, 0, sizeof err);
        rc = kiln_npy_read_opts(tpath("big.npy"), &o, &t, &err);
        snprintf(want, sizeof want, "%s: %lld bytes is over the data size "
                 "limit of 100 bytes (raise it with KILN_DATA_MAX_SIZE=SIZE, "
                 "kiln run --data-max-size SIZE or "
                 "kiln_read_options.max_size)", tpath("big.npy"), fsz);
        ok(rc == KILN_ERR_PARSE && strcmp(err.message, want) == 0,
           "max_size 100: a %lld-byte .npy is refused", fsz);
        diag("%s", err.message);
        o.max_size = (uint64_t)fsz;
        rc = kiln_npy_read_opts(tpath("big.npy"), &o, &t, &err);
        ok(rc == 0 && t.shape[0] == 8, "... and read at max_size = its "
           "size");
        if (rc == 0)
            free(t.data);
    }
    /* a FIFO the caller allows: the header's data size is checked against
     * the limit before the data buffer is allocated */
    {
        const char *fifo = tpath("data2.fifo");
        unlink(fifo);
        if (mkfifo(fifo, 0600) != 0) {
            ok(1, "# SKIP mkfifo: %s", strerror(errno));
        } else {
            unsigned char buf[256];
            size_t n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': "
                                "False, 'shape': (1000000000,), }", 64,
                                NULL, 0);
            fflush(stdout);
            pid_t w = fork();
            if (w == 0) {
                alarm(20);
                int fd = open(fifo, O_WRONLY);
                if (fd >= 0 && write(fd, buf, n) < 0)
                    _exit(1);
                _exit(0);
            }
            kiln_read_options o;
            memset(&o, 0, sizeof o);
            o.struct_size = sizeof o;
            o.allow_special = 1;
            o.max_size = 1 << 20;
            const void *arg[2] = {fifo, &o};
            rc = guarded(npy_in_child, arg, 20, msg, sizeof msg);
            ok(rc == KILN_ERR_PARSE &&
                   strstr(msg, ": data of 8000000000 bytes after a header "
                          "of 118 is over the data size limit of 1048576 "
                          "bytes"),
               "an allowed FIFO: a huge header shape is refused by the "
               "limit before allocation");
            diag("rc %d: %s", rc, msg);
            if (w > 0)
                waitpid(w, NULL, 0);
            unlink(fifo);
        }
    }
}

int main(void)
{
    if (!tmp_make("kiln-npy")) {
        printf("1..0 # SKIP cannot create a temporary directory: %s\n",
               strerror(errno));
        return 0;
    }
    test_roundtrips();
    test_empty_arrays();
    test_exact_header();
    test_handmade();
    test_read_errors();
    test_write_errors();
    test_truncation_fuzz();
    test_mutation_fuzz();
    test_trust();
    rm_tree(tmpdir);
    return done_testing();
}
