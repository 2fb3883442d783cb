/*
 * tap.h — a minimal TAP producer for kiln's C tests.
 *
 *   ok(cond, "what %d", x);             one test: "ok N - what 3"
 *   is_close(got, want, rtol, "what");  a float comparison (NaN == NaN)
 *   diag("got %g", v);                  a "# ..." comment line
 *   return done_testing();              prints the plan "1..N", returns
 *                                       the exit status (0 when all passed)
 *
 * The plan comes last (TAP allows it), so a test needs no count up front.
 * Header-only: every function is static inline, so a test includes it
 * once and pays nothing for what it does not use.
 */
#ifndef KILN_TESTS_TAP_H
#define KILN_TESTS_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#if defined(__GNUC__)
#define TAP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TAP_PRINTF(f, a)
#endif

typedef struct tap_counts {
    int run;
    int failed;
} tap_counts;

static inline tap_counts *tap_counts_get(void)
{
    static tap_counts counts;
    return &counts;
}

static inline int tap_vok(int cond, const char *fmt, va_list ap)
{
    tap_counts *c = tap_counts_get();
    c->run++;
    if (!cond)
        c->failed++;
    printf("%sok %d - ", cond ? "" : "not ", c->run);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    return cond;
}

/* One test; returns cond. */
static inline TAP_PRINTF(2, 3) int ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = tap_vok(cond, fmt, ap);
    va_end(ap);
    return r;
}

/* A diagnostic line. */
static inline TAP_PRINTF(1, 2) void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* Whether got is within rtol of want (relative to the larger magnitude);
 * NaN matches NaN, and infinities match themselves. */
static inline int tap_close(double got, double want, double rtol)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    if (got == want)
        return 1;
    double scale = fabs(got) > fabs(want) ? fabs(got) : fabs(want);
    return fabs(got - want) <= rtol * scale;
}

/* One test comparing two doubles; prints both on failure. */
static inline TAP_PRINTF(4, 5) int is_close(double got, double want,
                                            double rtol, const char *fmt,
                                            ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = tap_vok(tap_close(got, want, rtol), fmt, ap);
    va_end(ap);
    if (!r)
        diag("got %.17g, want %.17g (rtol %g)", got, want, rtol);
    return r;
}

/* Print the plan; the process exit status. */
static inline int done_testing(void)
{
    tap_counts *c = tap_counts_get();
    printf("1..%d\n", c->run);
    if (c->failed)
        diag("%d of %d tests failed", c->failed, c->run);
    return c->failed ? 1 : 0;
}

#endif
