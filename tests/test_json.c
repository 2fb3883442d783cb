/*
 * test_json.c — TAP tests for CmdStan JSON data (kiln_json_data_*, see
 * <kiln/io.h>) and the json("FILE", "KEY") source of the .kg format.
 *
 * Values are written here as JSON text and compared with the numbers the
 * text says; every error is compared with its whole message.  Files go to
 * a fresh mkdtemp directory.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <kiln/graph.h>
#include <kiln/io.h>
#include "ir.h"

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "guard.h"
#include "tmpfiles.h"

/* ---- helpers ------------------------------------------------------------ */

/* Parse a literal (its bytes, NULs included) expecting success. */
static kiln_json_data *parse_n(const char *text, size_t n)
{
    kiln_err err = {12345, ""};
    kiln_json_data *d = kiln_json_data_parse(text, n, "t.json", &err);
    if (!d)
        diag("unexpected error: %s", err.message);
    else if (err.code != 12345)
        diag("err modified on success");
    return d;
}

#define PARSE(lit) parse_n(lit, sizeof(lit) - 1)

/* Expect kiln_json_data_parse to fail with `code` and exactly `want`. */
static int parse_err_n(const char *text, size_t n, int code,
                       const char *want, const char *desc)
{
    kiln_err err = {0, ""};
    kiln_json_data *d = kiln_json_data_parse(text, n, "t.json", &err);
    int good = !d && err.code == code && strcmp(err.message, want) == 0;
    if (!ok(good, "%s", desc)) {
        diag("got:  %d %s", d ? 0 : err.code, d ? "(parsed)" : err.message);
        diag("want: %d %s", code, want);
    }
    kiln_json_data_free(d);
    return good;
}

#define PARSE_ERR(lit, code, want, desc) \
    parse_err_n(lit, sizeof(lit) - 1, code, want, desc)

/* Get `name` expecting success. */
static kiln_tensor get(const kiln_json_data *d, const char *name,
                       kiln_dtype dt, int rank, const int64_t *dims)
{
    kiln_tensor t;
    kiln_err err = {12345, ""};
    memset(&t, 0, sizeof t);
    if (!d || kiln_json_data_get(d, name, dt, rank, dims, &t, &err) != 0) {
        diag("unexpected error for '%s': %s", name, err.message);
        memset(&t, 0, sizeof t);
    } else if (err.code != 12345) {
        diag("err modified on success");
    }
    return t;
}

/* Expect kiln_json_data_get to fail with `code` and exactly `want`, and
 * leave *out as it was. */
static int get_err(const kiln_json_data *d, const char *name, kiln_dtype dt,
                   int rank, const int64_t *dims, int code, const char *want,
                   const char *desc)
{
    kiln_tensor t;
    kiln_err err = {0, ""};
    int untouched = 1;
    memset(&t, 0xAB, sizeof t);
    int rc = d ? kiln_json_data_get(d, name, dt, rank, dims, &t, &err) : -1;
    for (size_t i = 0; i < sizeof t; i++)
        if (((unsigned char *)&t)[i] != 0xAB)
            untouched = 0;
    int good = rc == code && err.code == code &&
               strcmp(err.message, want) == 0 && untouched;
    if (!ok(good, "%s", desc)) {
        diag("got:  %d %s%s", rc, err.message,
             untouched ? "" : " (out written)");
        diag("want: %d %s", code, want);
    }
    if (rc == 0)
        free(t.data);
    return good;
}

static int eq_f64(const kiln_tensor *t, const double *want, int n)
{
    if (!t->data || t->dtype != KILN_F64)
        return 0;
    for (int i = 0; i < n; i++) {
        double g = ((const double *)t->data)[i];
        if (!(g == want[i] || (isnan(g) && isnan(want[i]))) ||
            (g == 0 && signbit(g) != signbit(want[i])))
            return 0;
    }
    return 1;
}

/* ---- values ------------------------------------------------------------- */

static void test_scalars_and_arrays(void)
{
    kiln_json_data *d = PARSE(
        "{\n"
        "  \"N\": 3,\n"
        "  \"sigma\": 2.5,\n"
        "  \"neg\": -0.0,\n"
        "  \"y\": [1.5, -2, 3e2],\n"
        "  \"m\": [[1, 2, 3], [4, 5, 6]],\n"
        "  \"a\": [[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]]]\n"
        "}\n");
    ok(d != NULL, "a CmdStan data file parses");
    if (!d)
        return;
    ok(kiln_json_data_count(d) == 6 &&
           strcmp(kiln_json_data_key(d, 0), "N") == 0 &&
           strcmp(kiln_json_data_key(d, 3), "y") == 0 &&
           strcmp(kiln_json_data_key(d, 5), "a") == 0 &&
           kiln_json_data_key(d, 6) == NULL &&
           kiln_json_data_key(d, -1) == NULL,
       "count and keys in the file's order");
    ok(kiln_json_data_has(d, "sigma") && !kiln_json_data_has(d, "Sigma") &&
           !kiln_json_data_has(d, NULL) && !kiln_json_data_has(NULL, "N"),
       "has: exact names");

    int rank = -1, is_int = -1;
    int64_t shape[KILN_MAX_RANK] = {0};
    ok(kiln_json_data_shape(d, "a", &rank, shape, &is_int) == 0 &&
           rank == 3 && shape[0] == 3 && shape[1] == 2 && shape[2] == 2 &&
           is_int == 1, "shape of a rank-3 integer array");
    ok(kiln_json_data_shape(d, "y", &rank, shape, &is_int) == 0 &&
           rank == 1 && shape[0] == 3 && is_int == 0,
       "shape of a real vector: is_int 0");
    ok(kiln_json_data_shape(d, "N", &rank, shape, &is_int) == 0 &&
           rank == 0 && is_int == 1, "shape of an integer scalar");
    ok(kiln_json_data_shape(d, "nope", &rank, shape, &is_int) ==
           KILN_ERR_NAME, "shape of a missing variable: KILN_ERR_NAME");

    kiln_tensor t = get(d, "N", KILN_I64, 0, NULL);
    ok(t.data && t.dtype == KILN_I64 && t.rank == 0 &&
           *(int64_t *)t.data == 3, "integer scalar as i64");
    free(t.data);
    t = get(d, "N", KILN_F64, 0, NULL);
    ok(eq_f64(&t, (double[]){3.0}, 1), "integer scalar as f64");
    free(t.data);
    t = get(d, "sigma", KILN_F64, 0, NULL);
    ok(eq_f64(&t, (double[]){2.5}, 1), "real scalar as f64");
    free(t.data);
    t = get(d, "neg", KILN_F64, 0, NULL);
    ok(eq_f64(&t, (double[]){-0.0}, 1), "-0.0 keeps its sign");
    free(t.data);
    t = get(d, "sigma", KILN_F32, 0, NULL);
    ok(t.data && t.dtype == KILN_F32 && *(float *)t.data == 2.5f,
       "real scalar as f32");
    free(t.data);

    int64_t d3[] = {3};
    t = get(d, "y", KILN_F64, 1, d3);
    ok(t.rank == 1 && t.shape[0] == 3 &&
           eq_f64(&t, (double[]){1.5, -2.0, 300.0}, 3),
       "rank 1, mixed integers and reals, as f64");
    free(t.data);

    int64_t d23[] = {2, 3};
    t = get(d, "m", KILN_I32, 2, d23);
    {
        const int32_t *v = t.data;
        ok(v && t.dtype == KILN_I32 && t.rank == 2 && t.shape[0] == 2 &&
               t.shape[1] == 3 && v[0] == 1 && v[2] == 3 && v[3] == 4 &&
               v[5] == 6, "rank 2 integers as i32, C order");
    }
    free(t.data);
    t = get(d, "m", KILN_F32, 2, d23);
    ok(t.data && ((float *)t.data)[4] == 5.0f, "integers as f32");
    free(t.data);

    int64_t d322[] = {3, 2, 2};
    t = get(d, "a", KILN_I64, 3, d322);
    {
        const int64_t *v = t.data;
        int good = v && t.rank == 3 && t.shape[2] == 2;
        for (int i = 0; good && i < 12; i++)
            good = v[i] == i + 1;
        ok(good, "rank 3 integers as i64, C order");
    }
    free(t.data);

    /* negative dims: symbols and unknown dims take the data's size */
    int64_t sym[] = {-2, KILN_DIM_UNKNOWN, 2};
    t = get(d, "a", KILN_F64, 3, sym);
    ok(t.data && t.shape[0] == 3 && t.shape[1] == 2 && t.shape[2] == 2 &&
           ((double *)t.data)[11] == 12.0,
       "negative dims take the data's sizes");
    free(t.data);
    kiln_json_data_free(d);
    kiln_json_data_free(NULL);
    ok(kiln_json_data_count(NULL) == 0 && kiln_json_data_key(NULL, 0) == NULL,
       "NULL data: count 0, no key");
}

static void test_integers(void)
{
    kiln_json_data *d = PARSE(
        "{\"i32max\": 2147483647, \"i32min\": -2147483648,\n"
        " \"over32\": 2147483648, \"under32\": -2147483649,\n"
        " \"i64max\": 9223372036854775807,\n"
        " \"i64min\": -9223372036854775808,\n"
        " \"u64\": 9223372036854775808,\n"
        " \"u64max\": 18446744073709551615,\n"
        " \"big53\": 9007199254740993,\n"
        " \"bools\": [0, 1, 1, 0], \"two\": [0, 2], \"halfbool\": [0.0, 1],\n"
        " \"lead\": -0}");
    if (!ok(d != NULL, "integers up to json-c's range parse"))
        return;
    kiln_tensor t = get(d, "i32max", KILN_I32, 0, NULL);
    ok(t.data && *(int32_t *)t.data == INT32_MAX, "INT32_MAX as i32");
    free(t.data);
    t = get(d, "i32min", KILN_I32, 0, NULL);
    ok(t.data && *(int32_t *)t.data == INT32_MIN, "INT32_MIN as i32");
    free(t.data);
    get_err(d, "over32", KILN_I32, 0, NULL, KILN_ERR_TYPE,
            "t.json: variable 'over32': expected i32, found a value out of "
            "range (2147483648)", "2^31 does not fit i32");
    get_err(d, "under32", KILN_I32, 0, NULL, KILN_ERR_TYPE,
            "t.json: variable 'under32': expected i32, found a value out of "
            "range (-2147483649)", "-2^31 - 1 does not fit i32");
    t = get(d, "over32", KILN_I64, 0, NULL);
    ok(t.data && *(int64_t *)t.data == 2147483648LL, "2^31 as i64");
    free(t.data);
    t = get(d, "i64max", KILN_I64, 0, NULL);
    ok(t.data && *(int64_t *)t.data == INT64_MAX, "INT64_MAX as i64, exact");
    free(t.data);
    t = get(d, "i64min", KILN_I64, 0, NULL);
    ok(t.data && *(int64_t *)t.data == INT64_MIN, "INT64_MIN as i64, exact");
    free(t.data);
    get_err(d, "u64", KILN_I64, 0, NULL, KILN_ERR_TYPE,
            "t.json: variable 'u64': expected i64, found a value out of "
            "range (9223372036854775808)", "2^63 does not fit i64");
    t = get(d, "u64", KILN_F64, 0, NULL);
    ok(eq_f64(&t, (double[]){9223372036854775808.0}, 1), "2^63 as f64");
    free(t.data);
    t = get(d, "u64max", KILN_F64, 0, NULL);
    ok(eq_f64(&t, (double[]){18446744073709551616.0}, 1),
       "2^64 - 1 as f64 (rounded to 2^64)");
    free(t.data);
    t = get(d, "big53", KILN_I64, 0, NULL);
    ok(t.data && *(int64_t *)t.data == 9007199254740993LL,
       "2^53 + 1 as i64: exact");
    free(t.data);
    t = get(d, "big53", KILN_F64, 0, NULL);
    ok(eq_f64(&t, (double[]){9007199254740992.0}, 1),
       "2^53 + 1 as f64: rounded, no error");
    free(t.data);
    int64_t d4[] = {4}, d2[] = {2};
    t = get(d, "bools", KILN_BOOL, 1, d4);
    {
        const uint8_t *b = t.data;
        ok(b && t.dtype == KILN_BOOL && b[0] == 0 && b[1] == 1 && b[2] == 1 &&
               b[3] == 0, "0 and 1 as bool");
    }
    free(t.data);
    get_err(d, "two", KILN_BOOL, 1, d2, KILN_ERR_TYPE,
            "t.json: variable 'two': expected bool[2], found a value other "
            "than 0 and 1 (element [1] is 2)", "2 is not a bool");
    get_err(d, "halfbool", KILN_BOOL, 1, d2, KILN_ERR_TYPE,
            "t.json: variable 'halfbool': expected bool[2], found real "
            "values (element [0] is 0.0)", "0.0 is a real, not a bool");
    t = get(d, "lead", KILN_I64, 0, NULL);
    ok(t.data && *(int64_t *)t.data == 0, "-0 as i64 is 0");
    free(t.data);
    kiln_json_data_free(d);

    /* integers json-c cannot store are refused where they are written */
    PARSE_ERR("{\"x\": [1,\n 18446744073709551616]}", KILN_ERR_PARSE,
              "t.json:2:2: integer 18446744073709551616 is out of range "
              "(integers must lie within -2^63 .. 2^64 - 1; write a larger "
              "number as a real, e.g. 1e30)", "2^64 is refused, at line:col");
    PARSE_ERR("{\"x\": -9223372036854775809}", KILN_ERR_PARSE,
              "t.json:1:7: integer -9223372036854775809 is out of range "
              "(integers must lie within -2^63 .. 2^64 - 1; write a larger "
              "number as a real, e.g. 1e30)", "-2^63 - 1 is refused");
    PARSE_ERR("{\"x\": 123456789012345678901234567890123456789012}",
              KILN_ERR_PARSE,
              "t.json:1:7: integer 12345678901234567890123456789012... is "
              "out of range (integers must lie within -2^63 .. 2^64 - 1; "
              "write a larger number as a real, e.g. 1e30)",
              "a long integer is quoted as an excerpt");
    d = PARSE("{\"x\": 1.8446744073709552e19}");
    ok(d != NULL, "the same magnitude written as a real is fine");
    kiln_json_data_free(d);
}

static void test_reals(void)
{
    kiln_json_data *d = PARSE(
        "{\"bare\": [NaN, Infinity, -Infinity, 1],\n"
        " \"str\": [\"NaN\", \"Inf\", \"-Inf\", \"Infinity\", \"-Infinity\"],\n"
        " \"cases\": [\"nan\", \"INF\", \"-inf\", \"iNfInItY\", \"-INFINITY\"],\n"
        " \"big\": [1e39, -1e39], \"f32max\": 3.4028234663852886e38,\n"
        " \"round\": 3.4028235e38, \"tiny\": 1e-50,\n"
        " \"ninf\": -Infinity, \"k\": [1, 2.5, 3]}");
    if (!ok(d != NULL, "bare NaN/Infinity/-Infinity and their strings parse"))
        return;
    int64_t d4[] = {4}, d5[] = {5}, d2[] = {2}, d3[] = {3};
    kiln_tensor t = get(d, "bare", KILN_F64, 1, d4);
    ok(eq_f64(&t, (double[]){NAN, INFINITY, -INFINITY, 1.0}, 4),
       "bare NaN, Infinity, -Infinity");
    free(t.data);
    t = get(d, "str", KILN_F64, 1, d5);
    ok(eq_f64(&t, (double[]){NAN, INFINITY, -INFINITY, INFINITY, -INFINITY},
              5), "strings NaN, Inf, -Inf, Infinity, -Infinity");
    free(t.data);
    t = get(d, "cases", KILN_F64, 1, d5);
    ok(eq_f64(&t, (double[]){NAN, INFINITY, -INFINITY, INFINITY, -INFINITY},
              5), "the strings in any case");
    free(t.data);
    t = get(d, "str", KILN_F32, 1, d5);
    {
        const float *f = t.data;
        ok(f && isnan(f[0]) && isinf(f[1]) && f[1] > 0 && isinf(f[2]) &&
               f[2] < 0, "special values as f32");
    }
    free(t.data);
    int is_int = -1;
    ok(kiln_json_data_shape(d, "str", NULL, NULL, &is_int) == 0 &&
           is_int == 0, "special strings are reals");
    get_err(d, "big", KILN_F32, 1, d2, KILN_ERR_TYPE,
            "t.json: variable 'big': expected f32[2], found a value out of "
            "range (element [0] is 1e+39)", "an f32 overflow is an error");
    t = get(d, "big", KILN_F64, 1, d2);
    ok(eq_f64(&t, (double[]){1e39, -1e39}, 2), "the same values as f64");
    free(t.data);
    t = get(d, "f32max", KILN_F32, 0, NULL);
    ok(t.data && *(float *)t.data == FLT_MAX, "FLT_MAX as f32");
    free(t.data);
    t = get(d, "round", KILN_F32, 0, NULL);
    ok(t.data && *(float *)t.data == FLT_MAX,
       "a value just above FLT_MAX that rounds to it");
    free(t.data);
    t = get(d, "tiny", KILN_F32, 0, NULL);
    ok(t.data && *(float *)t.data == 0.0f, "a tiny value rounds to 0 in f32");
    free(t.data);
    t = get(d, "ninf", KILN_F32, 0, NULL);
    ok(t.data && isinf(*(float *)t.data), "-Infinity as f32 is no overflow");
    free(t.data);
    get_err(d, "k", KILN_I64, 1, d3, KILN_ERR_TYPE,
            "t.json: variable 'k': expected i64[3], found real values "
            "(element [1] is 2.5)", "a real into i64 names the element");
    get_err(d, "k", KILN_I32, 1, d3, KILN_ERR_TYPE,
            "t.json: variable 'k': expected i32[3], found real values "
            "(element [1] is 2.5)", "a real into i32");
    get_err(d, "ninf", KILN_I64, 0, NULL, KILN_ERR_TYPE,
            "t.json: variable 'ninf': expected i64, found a real value "
            "(-Infinity)", "-Infinity into i64");
    get_err(d, "str", KILN_BOOL, 1, d5, KILN_ERR_TYPE,
            "t.json: variable 'str': expected bool[5], found real values "
            "(element [0] is NaN)", "a NaN string into bool");
    kiln_json_data_free(d);

    d = PARSE("{\"r\": [[1, 2], [3, 4.0]]}");
    int64_t d22[] = {2, 2};
    get_err(d, "r", KILN_I64, 2, d22, KILN_ERR_TYPE,
            "t.json: variable 'r': expected i64[2, 2], found real values "
            "(element [1][1] is 4.0)", "4.0 is a real: an index path");
    kiln_json_data_free(d);
}

static void test_empty(void)
{
    kiln_json_data *d = PARSE(
        "{\"e\": [], \"ee\": [[], []], \"one\": [[]], \"obj\": {}}");
    ok(d == NULL, "an object as a variable is refused");
    kiln_json_data_free(d);
    d = PARSE("{\"e\": [], \"ee\": [[], []], \"one\": [[]]}");
    if (!ok(d != NULL, "empty arrays parse"))
        return;
    int rank = -1, is_int = -1;
    int64_t shape[KILN_MAX_RANK] = {0};
    ok(kiln_json_data_shape(d, "e", &rank, shape, &is_int) == 0 && rank == 1 &&
           shape[0] == 0 && is_int == 1, "[] has shape (0), counts as integer");
    ok(kiln_json_data_shape(d, "ee", &rank, shape, NULL) == 0 && rank == 2 &&
           shape[0] == 2 && shape[1] == 0, "[[], []] has shape (2, 0)");
    kiln_dtype dts[] = {KILN_F64, KILN_F32, KILN_I64, KILN_I32, KILN_BOOL};
    int64_t z[] = {0};
    int good = 1;
    for (int i = 0; i < 5; i++) {
        kiln_tensor t = get(d, "e", dts[i], 1, z);
        good = good && t.data && t.dtype == dts[i] && t.rank == 1 &&
               t.shape[0] == 0;
        free(t.data);
    }
    ok(good, "[] as every dtype, data not NULL");
    int64_t sym[] = {-2};
    kiln_tensor t = get(d, "e", KILN_F64, 1, sym);
    ok(t.data && t.shape[0] == 0, "[] into a symbolic dim: 0");
    free(t.data);
    int64_t z5[] = {0, 5}, zs[] = {-3, -4}, z57[] = {0, 5, 7};
    t = get(d, "e", KILN_F64, 2, z5);
    ok(t.data && t.rank == 2 && t.shape[0] == 0 && t.shape[1] == 5,
       "[] into f64[0, 5]: the dims after the 0 are free");
    free(t.data);
    t = get(d, "e", KILN_I32, 2, zs);
    ok(t.data && t.rank == 2 && t.shape[0] == 0 && t.shape[1] == 0,
       "[] into two symbols: (0, 0)");
    free(t.data);
    t = get(d, "e", KILN_F64, 3, z57);
    ok(t.data && t.rank == 3 && t.shape[2] == 7, "[] into rank 3");
    free(t.data);
    int64_t d25[] = {2, 0, 5};
    t = get(d, "ee", KILN_F64, 3, d25);
    ok(t.data && t.rank == 3 && t.shape[0] == 2 && t.shape[1] == 0 &&
           t.shape[2] == 5, "[[], []] into f64[2, 0, 5]");
    free(t.data);
    int64_t d35[] = {3, 5};
    get_err(d, "e", KILN_F64, 2, d35, KILN_ERR_SHAPE,
            "t.json: variable 'e': expected f64[3, 5], found an array of "
            "shape (0)", "[] does not fill a non-zero leading dim");
    get_err(d, "e", KILN_F64, 0, NULL, KILN_ERR_SHAPE,
            "t.json: variable 'e': expected f64, found an array of shape (0)",
            "[] is not a scalar");
    int64_t d10[] = {1};
    get_err(d, "one", KILN_F64, 1, d10, KILN_ERR_SHAPE,
            "t.json: variable 'one': expected f64[1], found an array of "
            "shape (1, 0)", "[[]] is rank 2");
    kiln_json_data_free(d);
    d = PARSE("{}");
    ok(d && kiln_json_data_count(d) == 0, "an empty object is an empty data "
       "set");
    get_err(d, "x", KILN_F64, 0, NULL, KILN_ERR_NAME,
            "no variable 'x' in t.json (it has no variables)",
            "missing variable in an empty data set");
    kiln_json_data_free(d);
}

/* ---- errors ------------------------------------------------------------- */

static void test_shape_errors(void)
{
    kiln_json_data *d = PARSE("{\"y\": [1, 2, 3, 4, 5, 6, 7], \"s\": 1.5,"
                              " \"m\": [[1, 2], [3, 4], [5, 6]], "
                              "\"alpha\": 1, \"beta\": 2}");
    int64_t d8[] = {8}, d32[] = {3, 2}, d23[] = {2, 3}, sym[] = {-2, 3};
    get_err(d, "y", KILN_F64, 1, d8, KILN_ERR_SHAPE,
            "t.json: variable 'y': expected f64[8], found an array of shape "
            "(7)", "wrong length names both shapes");
    get_err(d, "s", KILN_F64, 1, d8, KILN_ERR_SHAPE,
            "t.json: variable 's': expected f64[8], found a scalar",
            "a scalar does not fill a vector");
    get_err(d, "y", KILN_F64, 0, NULL, KILN_ERR_SHAPE,
            "t.json: variable 'y': expected f64, found an array of shape (7)",
            "a vector is not a scalar");
    get_err(d, "m", KILN_I64, 2, d23, KILN_ERR_SHAPE,
            "t.json: variable 'm': expected i64[2, 3], found an array of "
            "shape (3, 2)", "transposed matrix");
    get_err(d, "m", KILN_I64, 2, sym, KILN_ERR_SHAPE,
            "t.json: variable 'm': expected i64[?, 3], found an array of "
            "shape (3, 2)", "a symbol prints as ?");
    get_err(d, "m", KILN_I64, 1, d32, KILN_ERR_SHAPE,
            "t.json: variable 'm': expected i64[3], found an array of shape "
            "(3, 2)", "rank differs");
    kiln_tensor t = get(d, "m", KILN_I64, 2, d32);
    ok(t.data && ((int64_t *)t.data)[5] == 6, "the right shape reads");
    free(t.data);
    get_err(d, "gamma", KILN_F64, 0, NULL, KILN_ERR_NAME,
            "no variable 'gamma' in t.json (it has: y, s, m, alpha, beta)",
            "missing variable lists the file's variables");
    kiln_err err = {0, ""};
    ok(kiln_json_data_get(d, NULL, KILN_F64, 0, NULL, &t, &err) ==
           KILN_ERR_ARG && err.code == KILN_ERR_ARG, "NULL name: ARG");
    ok(kiln_json_data_get(d, "y", KILN_F64, 1, NULL, &t, &err) ==
           KILN_ERR_ARG, "NULL dims with rank 1: ARG");
    ok(kiln_json_data_get(d, "y", (kiln_dtype)99, 1, d8, &t, &err) ==
           KILN_ERR_ARG, "bad dtype: ARG");
    ok(kiln_json_data_get(d, "y", KILN_F64, 9, d8, &t, &err) == KILN_ERR_ARG,
       "rank 9: ARG");
    kiln_json_data_free(d);

    /* a long list of names is cut short, escaped */
    d = PARSE("{\"a_rather_long_variable_name_number_one\": 1, "
              "\"a_rather_long_variable_name_number_two\": 2, "
              "\"it's\": 3}");
    get_err(d, "x", KILN_F64, 0, NULL, KILN_ERR_NAME,
            "no variable 'x' in t.json (it has: a_rather_long_variable_name_"
            "number_one, a_rather_long_variable_n...)",
            "the list of names is an excerpt");
    kiln_json_data_free(d);
}

static void test_parse_errors(void)
{
    ok(kiln_json_data_parse(NULL, 0, "x", NULL) == NULL, "NULL text");
    kiln_err err = {0, ""};
    kiln_json_data_parse(NULL, 0, "x", &err);
    ok(err.code == KILN_ERR_ARG, "NULL text: KILN_ERR_ARG");
    err.code = 0;
    kiln_json_data *d = kiln_json_data_parse("[", 1, NULL, &err);
    ok(!d && strncmp(err.message, "<json>:1:2: ", 12) == 0,
       "no filename: <json>");

    PARSE_ERR("{\"x\": 1,\n  \"y\": [1, 2,]\n}", KILN_ERR_PARSE,
              "t.json:2:14: unexpected character",
              "trailing comma: line and column");
    PARSE_ERR("{\"a\": 1,\r\n\"b\" 2}", KILN_ERR_PARSE,
              "t.json:2:5: object property name separator ':' expected", "missing colon, CRLF lines");
    PARSE_ERR("{\"x\": [1, 2]", KILN_ERR_PARSE,
              "t.json:1:13: unexpected end of the text (an object, array or "
              "string is not closed)", "unclosed object");
    PARSE_ERR("{\"x\": \"abc", KILN_ERR_PARSE,
              "t.json:1:11: unexpected end of the text (an object, array or "
              "string is not closed)", "unclosed string");
    PARSE_ERR("{\"x\": 1} {}", KILN_ERR_PARSE,
              "t.json:1:10: unexpected character",
              "trailing text after the object");
    PARSE_ERR("{\"x\": 1}\n\0", KILN_ERR_PARSE,
              "t.json:2:1: NUL byte in the text", "a NUL after the object");
    PARSE_ERR("{\"x\": 1\0}", KILN_ERR_PARSE,
              "t.json:1:8: NUL byte in the text", "a NUL inside the object");
    PARSE_ERR("{\"x\": 1} // note", KILN_ERR_PARSE,
              "t.json:1:10: unexpected character",
              "comments are refused");
    PARSE_ERR("{'x': 1}", KILN_ERR_PARSE,
              "t.json:1:2: a key in single quotes (JSON strings are in double "
              "quotes)", "a key in single quotes is refused");
    PARSE_ERR("{\"a\": {\"b\": 1, 'c\"': 2}}", KILN_ERR_PARSE,
              "t.json:1:16: a key in single quotes (JSON strings are in double "
              "quotes)", "a nested key in single quotes is refused");
    PARSE_ERR("{\"x\": 'a'}", KILN_ERR_PARSE,
              "t.json:1:7: unexpected character",
              "a value in single quotes is refused");
    PARSE_ERR("{\"x\": nan}", KILN_ERR_PARSE,
              "t.json:1:8: null expected",
              "lower-case bare nan is refused (CmdStan writes NaN)");
    PARSE_ERR("{\"x\": 01}", KILN_ERR_PARSE,
              "t.json:1:9: number expected",
              "a leading zero is refused");
    PARSE_ERR("{\"x\": \"\xff\"}", KILN_ERR_PARSE,
              "t.json:1:8: invalid utf-8 string",
              "invalid UTF-8 is refused");
    PARSE_ERR("", KILN_ERR_PARSE, "t.json: no JSON value (the text is empty)",
              "empty text");
    PARSE_ERR(" \n\t ", KILN_ERR_PARSE,
              "t.json: no JSON value (the text is empty)", "blank text");

    PARSE_ERR("[1, 2]", KILN_ERR_PARSE,
              "t.json: the top level must be an object, found an array",
              "top level: an array");
    PARSE_ERR("\"x\"", KILN_ERR_PARSE,
              "t.json: the top level must be an object, found a string",
              "top level: a string");
    PARSE_ERR("42", KILN_ERR_PARSE,
              "t.json: the top level must be an object, found a number",
              "top level: a number");
    PARSE_ERR("null", KILN_ERR_PARSE,
              "t.json: the top level must be an object, found null",
              "top level: null");

    PARSE_ERR("{\"x\": [[1, 2], [3, 4], [5, 6, 7]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': ragged array: element 2 of axis 0 has 3 "
              "entries, element 0 has 2", "ragged array (axis 0)");
    PARSE_ERR("{\"x\": [[[1], [2]], [[3], [4, 5]]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': ragged array: element [1][1] of axis 1 "
              "has 2 entries, element [0][0] has 1", "ragged array (axis 1)");
    PARSE_ERR("{\"x\": [[1, 2], 3]}", KILN_ERR_PARSE,
              "t.json: variable 'x': ragged array: element 1 of axis 0 is a "
              "number, element 0 has 2 entries", "a number among arrays");
    PARSE_ERR("{\"x\": [1, [2]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': ragged array: element 1 of axis 0 is an "
              "array, element 0 is a number", "an array among numbers");
    PARSE_ERR("{\"x\": [[], [1]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': ragged array: element 1 of axis 0 has 1 "
              "entries, element 0 has 0", "an empty array among others");
    PARSE_ERR("{\"x\": [[1, 2], [3, \"abc\"]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': element [1][1] is a string of 3 bytes, "
              "not a number", "a string leaf");
    PARSE_ERR("{\"x\": \"1.5\"}", KILN_ERR_PARSE,
              "t.json: variable 'x': the value is a string of 3 bytes, not a "
              "number", "a number in a string is a string");
    PARSE_ERR("{\"x\": [true]}", KILN_ERR_PARSE,
              "t.json: variable 'x': element [0] is a boolean (true), not a "
              "number", "a boolean leaf");
    PARSE_ERR("{\"x\": [1, null]}", KILN_ERR_PARSE,
              "t.json: variable 'x': element [1] is null, not a number",
              "a null leaf");
    PARSE_ERR("{\"x\": {\"a\": 1}}", KILN_ERR_PARSE,
              "t.json: variable 'x': the value is an object, not a number",
              "an object as a value");
    PARSE_ERR("{\"x\": [[1], [\"\\u0001\\\\'quote'\"]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': element [1][0] is a string of 9 bytes, "
              "not a number",
              "a string's content is not shown (issue 24)");
    PARSE_ERR("{\"x\": [[1], \"abc\"]}", KILN_ERR_PARSE,
              "t.json: variable 'x': element [1] is a string of 3 bytes, not a "
              "number", "a string where an array belongs");
    PARSE_ERR("{\"x\": [[[[[[[[[1]]]]]]]]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': rank 9 exceeds KILN_MAX_RANK (8)",
              "rank 9");
    PARSE_ERR("{\"x\": [[[[[[[[[[[[]]]]]]]]]]]]}", KILN_ERR_PARSE,
              "t.json: variable 'x': rank 12 exceeds KILN_MAX_RANK (8)",
              "rank 12 (an empty innermost array)");
    d = PARSE("{\"x\": [[[[[[[[1]]]]]]]]}");
    ok(d != NULL, "rank 8 is fine");
    kiln_json_data_free(d);

    PARSE_ERR("{\"x\": 1,\n \"y\": 2,\n \"x\": 3}", KILN_ERR_PARSE,
              "t.json:3:2: duplicate key 'x' (first at line 1)",
              "duplicate key");
    PARSE_ERR("{\"ab\": 1,\n \"a\\u0062\": 3}", KILN_ERR_PARSE,
              "t.json:2:2: duplicate key 'ab' (first at line 1)",
              "duplicate key written with an escape");
    d = PARSE("{\"o\": [1], \"p\": [2], \"q\\\"\": 3}");
    ok(d && kiln_json_data_has(d, "q\""), "keys with escapes are decoded");
    kiln_json_data_free(d);
    PARSE_ERR("{\"a\\u0000b\": 1}", KILN_ERR_PARSE,
              "t.json:1:2: key \"a\\\\u0000b\" has a NUL character (\\u0000)",
              "a key with a NUL character");

    /* deeply nested text: json-c's depth limit, never a stack overflow */
    {
        size_t n = 200000;
        char *deep = malloc(n + 16);
        if (deep) {
            memcpy(deep, "{\"x\": ", 6);
            memset(deep + 6, '[', n);
            d = kiln_json_data_parse(deep, n + 6, "t.json", &err);
            ok(!d && err.code == KILN_ERR_PARSE &&
                   strcmp(err.message, "t.json:1:70: nesting too deep") == 0,
               "200000 nested '[': an error, no crash");
            diag("%s", err.message);
            memset(deep + 6, '{', n);
            d = kiln_json_data_parse(deep, n + 6, "t.json", &err);
            ok(!d && err.code == KILN_ERR_PARSE,
               "200000 nested '{': an error, no crash");
            free(deep);
        }
    }
}

/* A byte order mark is skipped; positions still count its bytes. */
static void test_bom(void)
{
    kiln_json_data *d = PARSE("\xEF\xBB\xBF{\"x\": 1}");
    ok(d && kiln_json_data_has(d, "x"), "a UTF-8 byte order mark is skipped");
    kiln_json_data_free(d);
    PARSE_ERR("\xEF\xBB\xBF{\"x\": [1,]}", KILN_ERR_PARSE,
              "t.json:1:13: unexpected character",
              "after a byte order mark, columns count its 3 bytes");
    PARSE_ERR("\xEF\xBB\xBF{\"x\": 1, \"x\": 2}", KILN_ERR_PARSE,
              "t.json:1:13: duplicate key 'x' (first at line 1)",
              "a duplicate after a byte order mark");
}

/* A locale with ',' as decimal point changes neither the reading of
 * numbers nor how messages write them. */
static void test_locale(void)
{
    const char *got = comma_locale();
    if (!got) {
        ok(1, "# SKIP no locale with a ',' decimal point installed");
        ok(1, "# SKIP no locale with a ',' decimal point installed");
        return;
    }
    kiln_json_data *d = PARSE("{\"x\": [1.5, 2.25]}");
    int64_t d2[] = {2};
    kiln_tensor t = get(d, "x", KILN_F64, 1, d2);
    ok(eq_f64(&t, (double[]){1.5, 2.25}, 2), "numbers read the same under "
       "%s", got);
    free(t.data);
    get_err(d, "x", KILN_I64, 1, d2, KILN_ERR_TYPE,
            "t.json: variable 'x': expected i64[2], found real values "
            "(element [0] is 1.5)", "and messages write them with '.'");
    kiln_json_data_free(d);
    setlocale(LC_NUMERIC, "C");
}

/* ---- files -------------------------------------------------------------- */

typedef struct read_job {
    const char *path;
    const kiln_read_options *opt;
} read_job;

static int read_in_child(void *arg, char *msg, size_t size)
{
    read_job *j = arg;
    kiln_err err = {0, ""};
    kiln_json_data *d = kiln_json_data_read(j->path, j->opt, &err);
    int rc = d ? 0 : err.code;
    snprintf(msg, size, "%s", d ? "" : err.message);
    kiln_json_data_free(d);
    return rc;
}

static void test_files(void)
{
    kiln_err err = {0, ""};
    const char *p = PUT("good.json", "{\"N\": 2,\n \"y\": [0.5, 1.5]}\n");
    kiln_json_data *d = kiln_json_data_read(p, NULL, &err);
    int64_t d2[] = {2};
    kiln_tensor t = get(d, "y", KILN_F64, 1, d2);
    ok(eq_f64(&t, (double[]){0.5, 1.5}, 2), "read a file");
    free(t.data);
    int64_t d3[] = {3};
    char want[8400];
    snprintf(want, sizeof want, "%s: variable 'y': expected f64[3], found an "
             "array of shape (2)", p);
    get_err(d, "y", KILN_F64, 1, d3, KILN_ERR_SHAPE, want,
            "a file's messages name its path");
    kiln_json_data_free(d);

    p = PUT("bad.json", "{\"N\": 2,\n \"y\": [0.5 1.5]}\n");
    d = kiln_json_data_read(p, NULL, &err);
    snprintf(want, sizeof want, "%s:2:12: array value separator ',' expected",
             p);
    ok(!d && err.code == KILN_ERR_PARSE && strcmp(err.message, want) == 0,
       "a file's parse error is PATH:LINE:COL");
    diag("%s", err.message);

    d = kiln_json_data_read(tpath("missing.json"), NULL, &err);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory",
             tpath("missing.json"));
    ok(!d && err.code == KILN_ERR_IO && strcmp(err.message, want) == 0,
       "a missing file");
    d = kiln_json_data_read(tmpdir, NULL, &err);
    ok(!d && err.code == KILN_ERR_IO && strstr(err.message, "is a directory"),
       "a directory is refused");
    ok(kiln_json_data_read(NULL, NULL, &err) == NULL &&
           err.code == KILN_ERR_ARG, "NULL path: ARG");

    /* the size limit: the caller's, checked before reading */
    p = PUT("sized.json", "{\"x\": [1, 2, 3]}");
    kiln_read_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_size = 10;
    d = kiln_json_data_read(p, &o, &err);
    snprintf(want, sizeof want, "%s: 16 bytes is over the data size limit "
             "of 10 bytes (raise it with KILN_DATA_MAX_SIZE=SIZE, kiln run "
             "--data-max-size SIZE or kiln_read_options.max_size)", p);
    ok(!d && err.code == KILN_ERR_PARSE && strcmp(err.message, want) == 0,
       "max_size 10 refuses a 16-byte file");
    o.max_size = 16;
    d = kiln_json_data_read(p, &o, &err);
    ok(d && kiln_json_data_has(d, "x"), "max_size 16 reads it");
    kiln_json_data_free(d);
    setenv("KILN_DATA_MAX_SIZE", "12", 1);
    d = kiln_json_data_read(p, NULL, &err);
    ok(!d && err.code == KILN_ERR_PARSE && strstr(err.message, "16 bytes is "
       "over the data size limit of 12 bytes"), "$KILN_DATA_MAX_SIZE");
    unsetenv("KILN_DATA_MAX_SIZE");

    /* a FIFO is refused without blocking; allowed, it is read */
    const char *fifo = tpath("data.fifo");
    unlink(fifo);
    if (mkfifo(fifo, 0600) != 0) {
        ok(1, "# SKIP mkfifo: %s", strerror(errno));
        ok(1, "# SKIP mkfifo");
    } else {
        char msg[1100];
        read_job j = {fifo, NULL};
        int rc = guarded(read_in_child, &j, 10, msg, sizeof msg);
        snprintf(want, sizeof want, "%s: is a FIFO; data is read only from "
                 "regular files unless the caller allows others (kiln run "
                 "--data-allow-special, kiln_read_options.allow_special)",
                 fifo);
        ok(rc == KILN_ERR_IO && strcmp(msg, want) == 0,
           "a FIFO is refused at once");
        diag("rc %d: %s", rc, msg);
        /* allowed: a writer feeds it */
        o.max_size = 0;
        o.allow_special = 1;
        j.opt = &o;
        fflush(stdout);
        pid_t w = fork();
        if (w == 0) {
            FILE *f = fopen(fifo, "w");
            if (f) {
                fputs("{\"z\": [1, 2]}", f);
                fclose(f);
            }
            _exit(0);
        }
        rc = guarded(read_in_child, &j, 10, msg, sizeof msg);
        ok(rc == 0, "an allowed FIFO is read");
        diag("rc %d: %s", rc, msg);
        if (w > 0) {
            int st;
            waitpid(w, &st, 0);
        }
        unlink(fifo);
    }
    /* /dev/zero, allowed: stops at the limit */
    {
        char msg[1100];
        o.allow_special = 1;
        o.max_size = 1 << 16;
        read_job j = {"/dev/zero", &o};
        int rc = guarded(read_in_child, &j, 20, msg, sizeof msg);
        ok(rc == KILN_ERR_PARSE &&
               strcmp(msg, "/dev/zero: more than 65536 bytes is over the data "
                      "size limit of 65536 bytes (raise it with "
                      "KILN_DATA_MAX_SIZE=SIZE, kiln run --data-max-size "
                      "SIZE or kiln_read_options.max_size)") == 0,
           "/dev/zero allowed: stops at the caller's limit");
        diag("rc %d: %s", rc, msg);
    }
}

/* ---- the json() source of the .kg format ---------------------------------- */

static kiln_graph *kg_ok(const char *text, const char *what)
{
    kiln_err e = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "m.kg", tmpdir, &e);
    if (!ok(g != NULL, "parses: %s", what))
        diag("%s", e.message);
    return g;
}

static void kg_err(const char *text, int code, const char *want,
                   const char *what)
{
    kiln_err e = {0, ""};
    kiln_graph *g = kiln_parse_string(text, "m.kg", tmpdir, &e);
    int good = !g && e.code == code && strcmp(e.message, want) == 0;
    if (!ok(good, "error: %s", what)) {
        diag("got:  %d %s", e.code, g ? "(parsed)" : e.message);
        diag("want: %d %s", code, want);
    }
    kiln_graph_free(g);
}

static void test_kg_source(void)
{
    PUT("d.json", "{\"N\": 3, \"y\": [1.5, -2, 4],\n"
                  " \"k\": [[1, 2], [3, 4], [5, 6]], \"z\": [7, 8],\n"
                  " \"e\": []}");
    PUT("e.json", "{\"w\": [0.25, 0.75, 1]}");
    PUT("bad.json", "{\"y\": [1,\n 2,]}");
    static const char model[] =
        "kiln 1\n"
        "graph m\n"
        "  shared y: f64[n] = json(\"d.json\", \"y\")\n"
        "  shared k: i32[n, 2] = json(\"d.json\", \"k\")\n"
        "  shared N: i64 = json(\"d.json\", \"N\")\n"
        "  shared w: f32[n] = json(\"e.json\", \"w\")\n"
        "  shared e: f64[?] = json(\"d.json\", \"e\")\n"
        "  output s = sum(y)\n"
        "end\n";
    kiln_graph *g = kg_ok(model, "json() sources");
    if (g) {
        kiln_value y = kiln_graph_lookup(g, "y"), k = kiln_graph_lookup(g, "k");
        kiln_value N = kiln_graph_lookup(g, "N"), w = kiln_graph_lookup(g, "w");
        kiln_value e = kiln_graph_lookup(g, "e");
        const double *yd = g->nodes[y].data;
        const int32_t *kd = g->nodes[k].data;
        const float *wd = g->nodes[w].data;
        ok(yd && g->nodes[y].vshape[0] == 3 && yd[0] == 1.5 && yd[1] == -2.0 &&
               yd[2] == 4.0, "y read as f64[3]");
        ok(kd && g->nodes[k].type.dtype == KILN_I32 &&
               g->nodes[k].vshape[0] == 3 && kd[5] == 6, "k read as i32[3, 2]");
        ok(g->nodes[N].data && *(int64_t *)g->nodes[N].data == 3,
           "N read as an i64 scalar");
        ok(wd && wd[0] == 0.25f && wd[2] == 1.0f, "w from a second file");
        ok(g->nodes[e].data && g->nodes[e].vshape[0] == 0, "[] as f64[?]");
        ok(strcmp(g->nodes[y].source, "json(\"d.json\", \"y\")") == 0,
           "the source is kept as written");
        kiln_err err = {0, ""};
        char *s1 = kiln_graph_print(g, &err);
        ok(s1 && strstr(s1, "  shared y: f64[n] = json(\"d.json\", \"y\")\n") &&
               strstr(s1, "  shared k: i32[n, 2] = json(\"d.json\", \"k\")\n"),
           "printed back as json(\"FILE\", \"KEY\")");
        kiln_graph *g2 = s1 ? kiln_parse_string(s1, "p.kg", tmpdir, &err)
                            : NULL;
        char *s2 = g2 ? kiln_graph_print(g2, &err) : NULL;
        ok(s1 && s2 && strcmp(s1, s2) == 0, "print, parse, print: the same");
        free(s1);
        free(s2);
        kiln_graph_free(g2);
        kiln_graph_free(g);
    }
    /* a key with a quote and a backslash survives the round trip */
    PUT("q.json", "{\"a\\\"b\\\\c\": [1]}");
    g = kg_ok("kiln 1\ngraph m\n  shared q: f64[1] = json(\"q.json\", "
              "\"a\\\"b\\\\c\")\n  output q\nend\n", "an escaped key");
    if (g) {
        kiln_err err = {0, ""};
        char *s1 = kiln_graph_print(g, &err);
        ok(s1 && strstr(s1, "= json(\"q.json\", \"a\\\"b\\\\c\")\n"),
           "the key printed with its escapes");
        kiln_graph *g2 = s1 ? kiln_parse_string(s1, "p.kg", tmpdir, &err)
                            : NULL;
        ok(g2 != NULL, "and parsed back");
        kiln_graph_free(g2);
        free(s1);
        kiln_graph_free(g);
    }

    char want[8400];
    snprintf(want, sizeof want, "m.kg:3:22: no variable 'q' in %s/d.json (it "
             "has: N, y, k, z, e)", tmpdir);
    kg_err("kiln 1\ngraph m\n  shared x: f64[3] = json(\"d.json\", \"q\")\nend\n",
           KILN_ERR_NAME, want, "a missing variable, at json");
    snprintf(want, sizeof want, "m.kg:3:22: %s/d.json: variable 'y': "
             "expected f64[4], found an array of shape (3)", tmpdir);
    kg_err("kiln 1\ngraph m\n  shared y: f64[4] = json(\"d.json\", \"y\")\nend\n",
           KILN_ERR_SHAPE, want, "a wrong shape names both");
    snprintf(want, sizeof want, "m.kg:4:22: shared 'z': value has shape (2) "
             "but symbol 'n' is 3 in shared 'y'");
    kg_err("kiln 1\ngraph m\n  shared y: f64[n] = json(\"d.json\", \"y\")\n"
           "  shared z: f64[n] = json(\"d.json\", \"z\")\nend\n",
           KILN_ERR_SHAPE, want, "a symbol bound twice with two sizes");
    snprintf(want, sizeof want, "m.kg:3:23: %s/d.json: variable 'y': "
             "expected i64[3], found real values (element [0] is 1.5)",
             tmpdir);
    kg_err("kiln 1\ngraph m\n  shared yy: i64[3] = json(\"d.json\", \"y\")\nend\n",
           KILN_ERR_TYPE, want, "reals into i64");
    snprintf(want, sizeof want, "m.kg:3:22: %s/bad.json:2:4: unexpected "
             "character", tmpdir);
    kg_err("kiln 1\ngraph m\n  shared y: f64[2] = json(\"bad.json\", \"y\")\nend\n",
           KILN_ERR_PARSE, want, "bad JSON: both positions");
    kg_err("kiln 1\ngraph m\n  shared y: f64[2] = json(\"missing.json\", \"y\")\n"
           "end\n", KILN_ERR_IO, "m.kg:3:27: cannot read data file "
           "'missing.json': No such file or directory", "a missing file");
    kg_err("kiln 1\ngraph m\n  shared y: f64[2] = json(\"d.json\")\nend\n",
           KILN_ERR_PARSE, "m.kg:3:35: expected ',' and a variable name, "
           "found ')'", "json() without a key");
    kg_err("kiln 1\ngraph m\n  shared y: f64[2] = json(\"d.json\", y)\nend\n",
           KILN_ERR_PARSE, "m.kg:3:37: expected a variable name in double "
           "quotes, found 'y'", "a key not in quotes");

    /* the caller's size limit applies to json() files */
    {
        kiln_read_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.max_size = 20;
        kiln_err e = {0, ""};
        g = kiln_parse_string_opts("kiln 1\ngraph m\n  shared y: f64[3] = "
                                   "json(\"d.json\", \"y\")\nend\n", "m.kg",
                                   tmpdir, &o, &e);
        ok(!g && e.code == KILN_ERR_PARSE &&
               strstr(e.message, "m.kg:3:22: ") == e.message &&
               strstr(e.message, "/d.json: 82 bytes is over the data size "
                      "limit of 20 bytes"),
           "kiln_read_options.max_size limits json() files");
        diag("%s", e.message);
        kiln_graph_free(g);
    }
}

/* ---- binding a graph (kiln run --data) ------------------------------------ */

#include "jsondata.h"

static void test_bind_graph(void)
{
    kiln_err err = {0, ""};
    kiln_json_data *d = PARSE("{\"y\": [1, 2, 3], \"x\": [[1, 2], [3, 4], "
                              "[5, 6]], \"z\": [1, 2], \"extra\": 5}");
    kiln_graph *g = kg_ok("kiln 1\ngraph m\n  shared y: f64[n]\n"
                          "  shared x: f32[n, 2]\n  shared u: f64[3]\n"
                          "  output s = sum(y)\nend\n", "unbound shared");
    int n = -1;
    ok(g && d && kiln_json_data_bind_graph(g, d, &n, &err) == 0 && n == 2,
       "binds the shared values the data has");
    if (g) {
        kiln_value y = kiln_graph_lookup(g, "y"), x = kiln_graph_lookup(g, "x");
        kiln_value u = kiln_graph_lookup(g, "u");
        ok(g->nodes[y].data && ((double *)g->nodes[y].data)[2] == 3.0 &&
               g->nodes[x].data && ((float *)g->nodes[x].data)[5] == 6.0f &&
               g->nodes[x].vshape[0] == 3 && !g->nodes[u].data,
           "values bound; one the data does not have stays unbound");
    }
    kiln_graph_free(g);
    g = kg_ok("kiln 1\ngraph m\n  shared y: f64[n]\n  shared z: f64[n]\n"
              "  output s = sum(y)\nend\n", "two values of one symbol");
    ok(g && kiln_json_data_bind_graph(g, d, &n, &err) == KILN_ERR_SHAPE &&
           strcmp(err.message, "t.json: shared 'z': value has shape (2) but "
                  "symbol 'n' is 3 in shared 'y'") == 0 && n == 1,
       "a symbol with two sizes is refused");
    diag("%s", err.message);
    kiln_graph_free(g);
    g = kg_ok("kiln 1\ngraph m\n  shared y: i64[3]\n  output y\nend\n",
              "integer shared");
    ok(g && kiln_json_data_bind_graph(g, d, NULL, &err) == 0 &&
           ((int64_t *)g->nodes[kiln_graph_lookup(g, "y")].data)[1] == 2,
       "bound with the declared dtype");
    kiln_graph_free(g);
    kiln_json_data_free(d);
}

int main(void)
{
    if (!tmp_make("kiln-json")) {
        printf("Bail out! cannot create a temporary directory\n");
        return 1;
    }
    unsetenv("KILN_DATA_MAX_SIZE");
    test_scalars_and_arrays();
    test_integers();
    test_reals();
    test_empty();
    test_shape_errors();
    test_parse_errors();
    test_bom();
    test_locale();
    test_files();
    test_kg_source();
    test_bind_graph();
    rm_tree(tmpdir);
    return done_testing();
}
