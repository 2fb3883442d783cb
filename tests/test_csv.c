/*
 * test_csv.c — TAP tests for kiln_csv_read_column.
 *
 * Small CSV files are written into a fresh mkdtemp directory; the real
 * radon data is found under the source tree root: $KILN_SRCDIR, else
 * $srcdir, else "." (examples/data/radon.csv under it, or under its
 * parent when srcdir is the tests directory).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/io.h>

#include <dirent.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stddef.h>

#include "tap.h"
#include "guard.h"
#include "tmpfiles.h"

/* ---- helpers ------------------------------------------------------------ */

/* Read a column expecting success; returns the tensor (data NULL on
 * failure, with a diagnostic). */
static kiln_tensor get(const char *path, const char *col, kiln_dtype dt)
{
    kiln_tensor t;
    kiln_err err;
    memset(&t, 0, sizeof t);
    err.code = 12345;
    if (kiln_csv_read_column(path, col, dt, &t, &err) != 0) {
        diag("unexpected error: %s", err.message);
        memset(&t, 0, sizeof t);
    } else if (err.code != 12345) {
        diag("err modified on success");
        free(t.data);
        memset(&t, 0, sizeof t);
    }
    return t;
}

/* Expect failure with `code` and exactly the message `want_fmt` (one %s
 * for the path); checks *out is left alone. */
static int expect_err(const char *path, const char *col, kiln_dtype dt,
                      int code, const char *want_fmt, const char *desc)
{
    kiln_tensor t;
    kiln_err err;
    char want[2048];
    int rc, untouched = 1;

    memset(&t, 0xAB, sizeof t);
    memset(&err, 0, sizeof err);
    snprintf(want, sizeof want, want_fmt, path);
    rc = kiln_csv_read_column(path, col, dt, &t, &err);
    for (size_t i = 0; i < sizeof t; i++)
        if (((unsigned char *)&t)[i] != 0xAB)
            untouched = 0;
    int good = rc == code && err.code == code &&
               strcmp(err.message, want) == 0 && untouched;
    if (!ok(good, "%s", desc)) {
        diag("rc %d code %d (want %d)", rc, err.code, code);
        diag("got:  %s", err.message);
        diag("want: %s", want);
    }
    if (rc == 0)
        free(t.data);
    return good;
}

/* ---- tests -------------------------------------------------------------- */

static void test_basic(void)
{
    kiln_tensor t;
    const char *lf = PUT("lf.csv", "a,b,c\n1,2.5,x\n-3,4e2,y\n");
    const char *crlf = PUT("crlf.csv", "a,b,c\r\n1,2.5,x\r\n-3,4e2,y\r\n");
    const char *nonl = PUT("nonl.csv", "a,b,c\n1,2.5,x\n-3,4e2,y");
    const char *cr = PUT("cr.csv", "a,b,c\r1,2.5,x\r-3,4e2,y\r");

    const char *files[] = {lf, crlf, nonl, cr};
    const char *names[] = {"LF", "CRLF", "no trailing newline", "lone CR"};
    for (int i = 0; i < 4; i++) {
        kiln_tensor a = get(files[i], "a", KILN_I64);
        kiln_tensor b = get(files[i], "b", KILN_F64);
        ok(a.data && b.data && a.dtype == KILN_I64 && a.rank == 1 &&
               a.shape[0] == 2 && ((int64_t *)a.data)[0] == 1 &&
               ((int64_t *)a.data)[1] == -3 && b.dtype == KILN_F64 &&
               b.shape[0] == 2 && ((double *)b.data)[0] == 2.5 &&
               ((double *)b.data)[1] == 400.0 && b.shape[1] == 0,
           "%s line endings", names[i]);
        free(a.data);
        free(b.data);
    }

    /* quoted fields: separators, "" escapes and line breaks inside */
    const char *q = PUT("quoted.csv",
                        "name,\"the \"\"value\"\"\",note\r\n"
                        "\"Smith, J.\",\"1.5\",\"said \"\"hi\"\"\"\r\n"
                        "plain,  -2 ,\"two\r\nlines\"\r\n"
                        "\"\",\"3\",\"\"\r\n");
    t = get(q, "the \"value\"", KILN_F64);
    ok(t.data && t.shape[0] == 3 && ((double *)t.data)[0] == 1.5 &&
           ((double *)t.data)[1] == -2.0 && ((double *)t.data)[2] == 3.0,
       "quoted fields, \"\" escapes, quoted header name, embedded CRLF");
    free(t.data);
    /* the quoted line break counts as a line: the error is on line 5 */
    const char *q2 = PUT("quoted2.csv",
                         "a,b\n1,\"x\ny\"\n2,\"z\"\nbad,w\n");
    expect_err(q2, "a", KILN_I32, KILN_ERR_PARSE,
               "%s:5:1: bad i32 value 'bad' in column 'a'",
               "line numbers count line breaks inside quoted fields");

    /* header only: zero rows, data still allocated */
    t = get(PUT("hdr.csv", "x,y\n"), "y", KILN_F32);
    ok(t.data && t.rank == 1 && t.shape[0] == 0 && t.dtype == KILN_F32,
       "header-only file gives shape (0,), non-NULL data");
    free(t.data);

    /* blank lines are skipped, a UTF-8 BOM is ignored */
    t = get(PUT("blank.csv", "\xEF\xBB\xBFx,y\n\n1,2\n\r\n3,4\n\n"), "x",
            KILN_I32);
    ok(t.data && t.shape[0] == 2 && ((int32_t *)t.data)[0] == 1 &&
           ((int32_t *)t.data)[1] == 3,
       "BOM skipped, blank lines skipped");
    free(t.data);

    /* trailing empty field and single column */
    t = get(PUT("trail.csv", "a,b,\n1,2,\n"), "b", KILN_I64);
    ok(t.data && t.shape[0] == 1 && ((int64_t *)t.data)[0] == 2,
       "trailing comma makes an empty last column");
    free(t.data);
    t = get(PUT("one.csv", "v\n7\n8\n9"), "v", KILN_I32);
    ok(t.data && t.shape[0] == 3 && ((int32_t *)t.data)[2] == 9,
       "single column");
    free(t.data);
}

static void test_values(void)
{
    kiln_tensor t;
    const char *f = PUT("f.csv",
                        "x\n0.1\n-1e-3\nnan\ninf\n-inf\nInfinity\n-NaN\n"
                        "0x1p-2\n 7 \n1e-400\n");
    t = get(f, "x", KILN_F64);
    {
        double *d = t.data;
        ok(d && t.shape[0] == 10 && d[0] == 0.1 && d[1] == -1e-3 &&
               isnan(d[2]) && d[3] == INFINITY && d[4] == -INFINITY &&
               d[5] == INFINITY && isnan(d[6]) && d[7] == 0.25 &&
               d[8] == 7.0 && d[9] == 0.0,
           "f64: decimal, nan, inf, Infinity, hex, blanks, underflow");
    }
    free(t.data);
    t = get(f, "x", KILN_F32);
    {
        float *d = t.data;
        ok(d && t.shape[0] == 10 && d[0] == 0.1f && d[1] == -1e-3f &&
               isnan(d[2]) && d[3] == INFINITY && d[7] == 0.25f,
           "f32 values (correctly rounded via strtof)");
    }
    free(t.data);
    expect_err(PUT("f64big.csv", "x\n1\n1e999\n"), "x", KILN_F64,
               KILN_ERR_PARSE,
               "%s:3:1: bad f64 value '1e999' in column 'x' (out of range)",
               "f64 overflow refused");
    expect_err(PUT("f32big.csv", "x\n1e39\n"), "x", KILN_F32,
               KILN_ERR_PARSE,
               "%s:2:1: bad f32 value '1e39' in column 'x' (out of range)",
               "f32 overflow refused");

    t = get(PUT("i.csv", "k\n9223372036854775807\n-9223372036854775808\n"
                         "+5\n007\n"),
            "k", KILN_I64);
    ok(t.data && t.shape[0] == 4 &&
           ((int64_t *)t.data)[0] == INT64_MAX &&
           ((int64_t *)t.data)[1] == INT64_MIN &&
           ((int64_t *)t.data)[2] == 5 && ((int64_t *)t.data)[3] == 7,
       "i64 extremes and signs");
    free(t.data);
    t = get(PUT("i32.csv", "k\n2147483647\n-2147483648\n"), "k", KILN_I32);
    ok(t.data && ((int32_t *)t.data)[0] == INT32_MAX &&
           ((int32_t *)t.data)[1] == INT32_MIN,
       "i32 extremes");
    free(t.data);
    expect_err(PUT("i32big.csv", "k\n2147483648\n"), "k", KILN_I32,
               KILN_ERR_PARSE,
               "%s:2:1: bad i32 value '2147483648' in column 'k' (out of "
               "range)", "i32 out of range");
    expect_err(PUT("i64big.csv", "k\n9223372036854775808\n"), "k", KILN_I64,
               KILN_ERR_PARSE,
               "%s:2:1: bad i64 value '9223372036854775808' in column 'k' "
               "(out of range)", "i64 out of range");
    expect_err(PUT("ifloat.csv", "k\n1.0\n"), "k", KILN_I64, KILN_ERR_PARSE,
               "%s:2:1: bad i64 value '1.0' in column 'k'",
               "'1.0' is not an integer");
    expect_err(PUT("iexp.csv", "j,k\n0,1e3\n"), "k", KILN_I32,
               KILN_ERR_PARSE, "%s:2:3: bad i32 value '1e3' in column 'k'",
               "'1e3' is not an integer");

    t = get(PUT("b.csv", "b\n0\n1\ntrue\nfalse\nTrue\nFalse\n\" 1 \"\n"),
            "b", KILN_BOOL);
    {
        static const unsigned char want[] = {0, 1, 1, 0, 1, 0, 1};
        ok(t.data && t.dtype == KILN_BOOL && t.shape[0] == 7 &&
               memcmp(t.data, want, 7) == 0,
           "bool: 0 1 true false True False");
    }
    free(t.data);
    expect_err(PUT("byes.csv", "b\n1\nyes\n"), "b", KILN_BOOL,
               KILN_ERR_PARSE, "%s:3:1: bad bool value 'yes' in column 'b'",
               "bool 'yes' refused");
    expect_err(PUT("b2.csv", "b\nTRUE\n"), "b", KILN_BOOL, KILN_ERR_PARSE,
               "%s:2:1: bad bool value 'TRUE' in column 'b'",
               "bool 'TRUE' refused");
    expect_err(PUT("empty.csv", "a,b\n1,\n"), "b", KILN_F64, KILN_ERR_PARSE,
               "%s:2:3: bad f64 value '' in column 'b'",
               "empty field is a bad value");
}

static void test_errors(void)
{
    expect_err(tpath("missing.csv"), "x", KILN_F64, KILN_ERR_IO,
               "%s: cannot open: No such file or directory",
               "missing file: KILN_ERR_IO with strerror");
    expect_err(tmpdir, "x", KILN_F64, KILN_ERR_IO,
               "%s: is a directory",
               "a directory: KILN_ERR_IO read error");
    expect_err(PUT("bad.csv", "x,y\r\n1,2\r\n3,4\r\nabc,5\r\n"), "x",
               KILN_F64, KILN_ERR_PARSE,
               "%s:4:1: bad f64 value 'abc' in column 'x'",
               "bad f64 value with line:col");
    expect_err(PUT("bad2.csv", "x,yy\n1,2\n3,  4.5.6\n"), "yy", KILN_F64,
               KILN_ERR_PARSE,
               "%s:3:3: bad f64 value '4.5.6' in column 'yy'",
               "column is that of the field start");
    expect_err(PUT("count.csv", "a,b,c\n1,2,3\n4,5\n"), "a", KILN_I64,
               KILN_ERR_PARSE, "%s:3: expected 3 fields, found 2",
               "too few fields on a row");
    expect_err(PUT("count2.csv", "a,b\n1,2\n\"x,y\",2,3\n"), "a", KILN_I64,
               KILN_ERR_PARSE, "%s:3: expected 2 fields, found 3",
               "too many fields on a row");
    expect_err(PUT("noname.csv", "county,floor\nA,1\n"), "flor", KILN_I64,
               KILN_ERR_NAME,
               "%s: no column 'flor' (did you mean 'floor'?)",
               "missing column: the near name, not the header");
    expect_err(PUT("noname2.csv", "county,floor\nA,1\n"), "radon", KILN_I64,
               KILN_ERR_NAME,
               "%s: no column 'radon' among the 2 fields of its first line",
               "missing column, no near name: the header is not quoted");
    expect_err(PUT("dupcol.csv", "x,y,x\n1,2,3\n"), "x", KILN_I64,
               KILN_ERR_NAME,
               "%s: column 'x' appears more than once (columns 1 and 3)",
               "duplicate column name");
    expect_err(PUT("zero.csv", ""), "x", KILN_I64, KILN_ERR_PARSE,
               "%s: empty file (no header row)", "empty file");
    expect_err(PUT("unterm.csv", "a,b\n1,\"abc\n"), "a", KILN_I64,
               KILN_ERR_PARSE, "%s:2:3: unterminated quoted field",
               "unterminated quoted field");
    expect_err(PUT("afterq.csv", "a,b\n1,\"abc\"d\n"), "a", KILN_I64,
               KILN_ERR_PARSE,
               "%s:2:8: unexpected character 'd' after a closing quote",
               "text after a closing quote");
    {
        kiln_tensor t;
        kiln_err err;
        int good = kiln_csv_read_column(NULL, "x", KILN_F64, &t, &err) ==
                       KILN_ERR_ARG &&
                   err.code == KILN_ERR_ARG;
        good &= kiln_csv_read_column(tpath("bad.csv"), NULL, KILN_F64, &t,
                                     &err) == KILN_ERR_ARG;
        good &= kiln_csv_read_column(tpath("bad.csv"), "x", KILN_F64, NULL,
                                     &err) == KILN_ERR_ARG;
        good &= kiln_csv_read_column(tpath("bad.csv"), "x", (kiln_dtype)9,
                                     &t, &err) == KILN_ERR_ARG &&
                strcmp(err.message, "kiln_csv_read_column: bad dtype 9") == 0;
        good &= kiln_csv_read_column(tpath("bad.csv"), "x", KILN_F64, &t,
                                     NULL) == KILN_ERR_PARSE;
        ok(good, "NULL arguments and bad dtype: KILN_ERR_ARG; err may be "
                 "NULL");
    }
}

/* A locale with ',' as decimal point must not change how numbers read. */
static void test_locale(void)
{
    const char *got = comma_locale();
    if (!got) {
        ok(1, "# SKIP no locale with a ',' decimal point installed");
        return;
    }
    kiln_tensor t = get(PUT("loc.csv", "x\n1.5\n"), "x", KILN_F64);
    ok(t.data && ((double *)t.data)[0] == 1.5,
       "numbers read the same under %s", got);
    free(t.data);
    setlocale(LC_NUMERIC, "C");
}

/* Cut a CSV at every length: never a crash; either a clean error or a
 * result with no more rows than the full file. */
static void test_truncation_fuzz(void)
{
    static const char full[] =
        "a,\"b\"\"q\",c\r\n1,\"2,5\",x\r\n\"3\",4,\"y\r\nz\"\r\n5,6,\"\"";
    int good = 1, n = (int)sizeof full - 1, oks = 0;
    for (int len = 0; len <= n; len++) {
        kiln_tensor t;
        kiln_err err;
        memset(&t, 0, sizeof t);
        err.code = KILN_OK;
        int rc = kiln_csv_read_column(put("cut.csv", full, (size_t)len), "a",
                                      KILN_I64, &t, &err);
        if (rc == 0) {
            oks++;
            good &= t.data != NULL && t.shape[0] >= 0 && t.shape[0] <= 3;
            free(t.data);
        } else {
            good &= (rc == KILN_ERR_PARSE || rc == KILN_ERR_NAME) &&
                    err.code == rc && err.message[0] != '\0';
        }
    }
    ok(good, "CSV truncation fuzz: %d prefixes, %d read, rest refused",
       n + 1, oks);
}

static void find_radon(char *buf, size_t size)
{
    const char *root = getenv("KILN_SRCDIR");
    struct stat st;
    if (!root || !*root)
        root = getenv("srcdir");
    if (!root || !*root)
        root = ".";
    snprintf(buf, size, "%s/examples/data/radon.csv", root);
    if (stat(buf, &st) == 0)
        return;
    snprintf(buf, size, "%s/../examples/data/radon.csv", root);
    if (stat(buf, &st) == 0)
        return;
    snprintf(buf, size, "%s/examples/data/radon.csv", root);
    diag("radon.csv not found under '%s': set KILN_SRCDIR to the top of "
         "the source tree", root);
}

static void test_radon(void)
{
    char path[4096];
    kiln_tensor cc, fl, lr, up, fb;
    find_radon(path, sizeof path);
    diag("radon data: %s", path);

    cc = get(path, "county_code", KILN_I64);
    {
        int64_t max = -1, min = 1000;
        int monotone = 1;
        for (int64_t i = 0; cc.data && i < cc.shape[0]; i++) {
            int64_t v = ((int64_t *)cc.data)[i];
            if (v > max) max = v;
            if (v < min) min = v;
            if (i && v < ((int64_t *)cc.data)[i - 1]) monotone = 0;
        }
        ok(cc.data && cc.shape[0] == 919, "radon: 919 rows");
        ok(cc.data && min == 0 && max == 84 && monotone,
           "radon: county_code in 0..84 (85 counties), sorted");
    }
    fl = get(path, "floor", KILN_I32);
    {
        int good = fl.data && fl.shape[0] == 919;
        int64_t ones = 0;
        for (int64_t i = 0; good && i < fl.shape[0]; i++) {
            int32_t v = ((int32_t *)fl.data)[i];
            good &= v == 0 || v == 1;
            ones += v;
        }
        ok(good && ones == 153, "radon: floor values in {0, 1} (153 ones)");
    }
    fb = get(path, "floor", KILN_BOOL);
    ok(fb.data && fb.shape[0] == 919, "radon: floor reads as bool");
    lr = get(path, "log_radon", KILN_F64);
    {
        double s = 0;
        for (int64_t i = 0; lr.data && i < lr.shape[0]; i++)
            s += ((double *)lr.data)[i];
        ok(lr.data && lr.shape[0] == 919 &&
               ((double *)lr.data)[0] == 0.8329091229351041 &&
               fabs(s - 1162.3321189326348) < 1e-9,
           "radon: log_radon values (first, sum)");
    }
    up = get(path, "uppm", KILN_F32);
    ok(up.data && up.shape[0] == 919 && ((float *)up.data)[0] == 0.502054f &&
           ((float *)up.data)[918] == 1.42659f,
       "radon: uppm as f32");
    free(cc.data);
    free(fl.data);
    free(fb.data);
    free(lr.data);
    free(up.data);

    {
        char want[8192];
        snprintf(want, sizeof want, "%%s: no column 'flor' (did you mean "
                 "'floor'?)");
        expect_err(path, "flor", KILN_I64, KILN_ERR_NAME, want,
                   "radon: missing column message");
        expect_err(path, "county", KILN_F64, KILN_ERR_PARSE,
                   "%s:2:1: bad f64 value 'AITKIN' in column 'county'",
                   "radon: text column as f64 refused at 2:1");
        expect_err(path, "log_radon", KILN_I64, KILN_ERR_PARSE,
                   "%s:2:12: bad i64 value '0.8329091229351041' in column "
                   "'log_radon'", "radon: float column as i64 refused");
    }
}

/* ---- trust: excerpts, special files, the size limit (issue 13) ------ */

typedef struct read_job {
    const char *path;
    const kiln_read_options *opt;
} read_job;

static int read_in_child(void *arg, char *msg, size_t size)
{
    read_job *j = arg;
    kiln_tensor t;
    kiln_err err = {0, ""};
    int rc = kiln_csv_read_column_opts(j->path, "x", KILN_F64, j->opt, &t,
                                       &err);
    if (rc == 0)
        free(t.data);
    snprintf(msg, size, "%s", err.message);
    return rc;
}

static int has_control_byte(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return 1;
    return 0;
}

static void test_trust(void)
{
    char msg[1100];
    kiln_tensor t;
    kiln_err err;
    int rc;

    /* A file that is not the CSV the model claims (a secret, a binary):
     * the "no column" message quotes nothing of it (issue 24: it quoted
     * the first line of csv("/etc/passwd", ...)). */
    {
        char line[400];
        memset(line, 'S', sizeof line);
        memcpy(line, "root:$6$SECRET\x1b[2J", 18);
        memcpy(line + 300, "TAIL", 4);
        line[sizeof line - 1] = '\n';
        const char *path = tpath("shadow.csv");
        FILE *f = fopen(path, "wb");
        fwrite(line, 1, sizeof line, f);
        fclose(f);
        memset(&err, 0, sizeof err);
        rc = kiln_csv_read_column(path, "x", KILN_F64, &t, &err);
        char want[600];
        snprintf(want, sizeof want, "%s: no column 'x' among the 1 field of "
                 "its first line", path);
        ok(rc == KILN_ERR_NAME && strcmp(err.message, want) == 0 &&
               !strstr(err.message, "root") && !strstr(err.message, "SECRET"),
           "no column: nothing of the file is quoted");
        diag("%s", err.message);
    }
    /* a bad value is quoted short and escaped */
    {
        char text[300] = "x\n";
        memset(text + 2, '7', 200);
        memcpy(text + 2, "1\x07", 2);
        text[202] = '\n';
        text[203] = '\0';
        const char *path = put("longval.csv", text, strlen(text));
        memset(&err, 0, sizeof err);
        rc = kiln_csv_read_column(path, "x", KILN_F64, &t, &err);
        ok(rc == KILN_ERR_PARSE && strstr(err.message, "'1\\x07777") &&
               strstr(err.message, "...'") && strlen(err.message) < 200 +
               strlen(path) - 100 && !has_control_byte(err.message),
           "bad value: a 200-byte field is quoted as a short escaped "
           "excerpt");
        diag("%s", err.message);
    }

    /* A FIFO is refused before anything is read, and never blocks (the
     * old reader waited in fopen for a writer forever). */
    {
        const char *fifo = tpath("data.fifo");
        unlink(fifo);
        if (mkfifo(fifo, 0600) != 0) {
            ok(1, "# SKIP mkfifo: %s", strerror(errno));
        } else {
            read_job j = {fifo, NULL};
            rc = guarded(read_in_child, &j, 10, msg, sizeof msg);
            char want[1200];
            snprintf(want, sizeof want, "%s: is a FIFO; data is read only "
                     "from regular files unless the caller allows others "
                     "(kiln run --data-allow-special, "
                     "kiln_read_options.allow_special)", fifo);
            ok(rc == KILN_ERR_IO && strcmp(msg, want) == 0,
               "a FIFO is refused at once, with the way to allow it");
            diag("rc %d: %s", rc, msg);
            unlink(fifo);
        }
    }
    /* /dev/zero: refused by default (the old reader read it until memory
     * ran out); read up to the limit when the caller allows it */
    {
        read_job j = {"/dev/zero", NULL};
        rc = guarded(read_in_child, &j, 20, msg, sizeof msg);
        ok(rc == KILN_ERR_IO &&
               strncmp(msg, "/dev/zero: is a character device; ", 34) == 0,
           "/dev/zero is refused");
        diag("rc %d: %s", rc, msg);
        kiln_read_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.allow_special = 1;
        o.max_size = 1 << 20;
        j.opt = &o;
        rc = guarded(read_in_child, &j, 20, msg, sizeof msg);
        ok(rc == KILN_ERR_PARSE &&
               strcmp(msg, "/dev/zero: more than 1048576 bytes is over the "
                      "data size limit of 1048576 bytes (raise it with "
                      "KILN_DATA_MAX_SIZE=SIZE, kiln run --data-max-size "
                      "SIZE or kiln_read_options.max_size)") == 0,
           "/dev/zero allowed: stops at the caller's limit");
        diag("rc %d: %s", rc, msg);
    }

    /* the size limit of a regular file: the caller's option, then
     * $KILN_DATA_MAX_SIZE, checked before reading */
    {
        const char *path = PUT("sized.csv", "x\n1\n2\n3\n4\n5\n6\n7\n8\n");
        kiln_read_options o;
        char want[1200];
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.max_size = 10;
        memset(&err, 0, sizeof err);
        rc = kiln_csv_read_column_opts(path, "x", KILN_F64, &o, &t, &err);
        snprintf(want, sizeof want, "%s: 18 bytes is over the data size "
                 "limit of 10 bytes (raise it with KILN_DATA_MAX_SIZE=SIZE, "
                 "kiln run --data-max-size SIZE or "
                 "kiln_read_options.max_size)", path);
        ok(rc == KILN_ERR_PARSE && strcmp(err.message, want) == 0,
           "max_size 10: an 18-byte file is refused, saying how to raise "
           "the limit");
        diag("%s", err.message);
        setenv("KILN_DATA_MAX_SIZE", "17", 1);
        memset(&err, 0, sizeof err);
        rc = kiln_csv_read_column(path, "x", KILN_F64, &t, &err);
        ok(rc == KILN_ERR_PARSE && strstr(err.message, "limit of 17 bytes"),
           "KILN_DATA_MAX_SIZE=17 is the default limit");
        o.max_size = 18;
        rc = kiln_csv_read_column_opts(path, "x", KILN_F64, &o, &t, &err);
        ok(rc == 0 && t.shape[0] == 8, "the caller's max_size beats the "
           "environment; a file of exactly the limit is read");
        if (rc == 0)
            free(t.data);
        setenv("KILN_DATA_MAX_SIZE", "lots", 1);
        memset(&err, 0, sizeof err);
        rc = kiln_csv_read_column(path, "x", KILN_F64, &t, &err);
        ok(rc == KILN_ERR_ARG &&
               strcmp(err.message, "KILN_DATA_MAX_SIZE: bad size 'lots' (a "
                      "positive number of bytes with an optional K, M, G "
                      "or T suffix, e.g. 4G)") == 0,
           "a bad KILN_DATA_MAX_SIZE is an error, not ignored");
        diag("%s", err.message);
        setenv("KILN_DATA_MAX_SIZE", "0", 1);
        rc = kiln_csv_read_column(path, "x", KILN_F64, &t, &err);
        ok(rc == KILN_ERR_ARG, "KILN_DATA_MAX_SIZE=0 is an error");
        unsetenv("KILN_DATA_MAX_SIZE");
        o.struct_size = offsetof(kiln_read_options, max_size);
        rc = kiln_csv_read_column_opts(path, "x", KILN_F64, &o, &t, &err);
        ok(rc == 0, "fields beyond struct_size are unset (1 GiB default)");
        if (rc == 0)
            free(t.data);
    }
}

int main(void)
{
    if (!tmp_make("kiln-csv")) {
        printf("1..0 # SKIP cannot create a temporary directory: %s\n",
               strerror(errno));
        return 0;
    }
    test_basic();
    test_values();
    test_errors();
    test_locale();
    test_truncation_fuzz();
    test_radon();
    test_trust();
    rm_tree(tmpdir);
    return done_testing();
}
