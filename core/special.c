/*
 * special.c — scalar special functions for the runtime table.
 *
 * Written for kiln from the cited formulas; nothing here is copied from
 * another library.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* lgamma_r: the reentrant lgamma (glibc, BSD, macOS) */
#endif

#include "special.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Below this the recurrence psi(x) = psi(x + 1) - 1/x moves the argument
 * up before the asymptotic series is used.  At x >= 10 the first omitted
 * term of the series (B_16 / (16 x^16) = 0.443 x^-16) is below 5e-17, so
 * the series alone is accurate to double precision; a lower threshold
 * such as 6 would leave an error near 1e-13. */
#define KILN_DIGAMMA_ASYMPTOTIC_MIN 10.0

/* Asymptotic expansion for large x (Abramowitz & Stegun 6.3.18; the same
 * scheme as Bernardo 1976, Applied Statistics algorithm AS 103):
 *   psi(x) ~ ln x - 1/(2x) - sum_{k>=1} B_2k / (2k x^2k)
 *          = ln x - 1/(2x) - 1/(12x^2) + 1/(120x^4) - 1/(252x^6)
 *            + 1/(240x^8) - 1/(132x^10) + 691/(32760x^12) - 1/(12x^14). */
static double kiln_digamma_asymptotic(double x)
{
    double z = 1.0 / (x * x);
    double tail = z * (1.0 / 12.0
                  - z * (1.0 / 120.0
                  - z * (1.0 / 252.0
                  - z * (1.0 / 240.0
                  - z * (1.0 / 132.0
                  - z * (691.0 / 32760.0
                  - z * (1.0 / 12.0)))))));
    return log(x) - 0.5 / x - tail;
}

/* psi for x > 0: recurrence up to the asymptotic range (A&S 6.3.5). */
static double kiln_digamma_positive(double x)
{
    double shift = 0.0;
    while (x < KILN_DIGAMMA_ASYMPTOTIC_MIN) {
        shift += 1.0 / x;
        x += 1.0;
    }
    return kiln_digamma_asymptotic(x) - shift;
}

double kiln_digamma(double x)
{
    if (isnan(x))
        return x;
    if (isinf(x))
        return x > 0 ? x : NAN;
    if (x == 0.0)
        /* SciPy: digamma(+0) = -inf, digamma(-0) = +inf (the limits from
         * the side of the sign). */
        return copysign(INFINITY, -x);
    if (x > 0.0)
        return kiln_digamma_positive(x);

    /* Reflection (A&S 6.3.7): psi(1 - x) - psi(x) = pi / tan(pi x).
     * tan(pi x) has period 1, so it is evaluated on the fractional part,
     * folded into [-0.5, 0.5] where pi*r loses no relative accuracy;
     * this keeps large |x| accurate.  Negative integers are poles: NaN,
     * as in SciPy. */
    double ipart;
    double r = modf(x, &ipart);
    if (r == 0.0)
        return NAN;
    if (r < -0.5)
        r += 1.0; /* exact: Sterbenz */
    return kiln_digamma_positive(1.0 - x) - M_PI / tan(M_PI * r);
}

/* Below this the recurrence psi1(x) = psi1(x + 1) + 1/x^2 moves the
 * argument up before the asymptotic series is used.  At x >= 10 the first
 * omitted term of the series, B_18 / x^19 = 55.0 x^-19, is below 5.5e-17
 * of the leading 1/x, so the series alone is accurate to double
 * precision (the same threshold as digamma's, for the same reason). */
#define KILN_TRIGAMMA_ASYMPTOTIC_MIN 10.0

/* Asymptotic expansion for large x (Abramowitz & Stegun 6.4.11 with n = 1,
 * written out as 6.4.12):
 *   psi1(x) ~ 1/x + 1/(2x^2) + sum_{k>=1} B_2k / x^(2k+1)
 *           = 1/x + 1/(2x^2) + 1/(6x^3) - 1/(30x^5) + 1/(42x^7)
 *             - 1/(30x^9) + 5/(66x^11) - 691/(2730x^13) + 7/(6x^15)
 *             - 3617/(510x^17). */
static double kiln_trigamma_asymptotic(double x)
{
    double z = 1.0 / (x * x);
    double tail = z * (1.0 / 6.0
                  - z * (1.0 / 30.0
                  - z * (1.0 / 42.0
                  - z * (1.0 / 30.0
                  - z * (5.0 / 66.0
                  - z * (691.0 / 2730.0
                  - z * (7.0 / 6.0
                  - z * (3617.0 / 510.0))))))));
    return (1.0 + 0.5 / x + tail) / x;
}

/* psi1 for x > 0: recurrence up to the asymptotic range (A&S 6.4.6:
 * psi1(x + 1) = psi1(x) - 1/x^2).  The shift's terms are positive, so
 * the sum loses nothing to cancellation. */
static double kiln_trigamma_positive(double x)
{
    double shift = 0.0;
    while (x < KILN_TRIGAMMA_ASYMPTOTIC_MIN) {
        shift += 1.0 / (x * x);
        x += 1.0;
    }
    return shift + kiln_trigamma_asymptotic(x);
}

/* Checked against mpmath's polygamma(1, x) (30 digits) at 3300 random
 * points of (0, 20], 10^[-10, 10], [-50, 0) and -10^[-10, 6]: largest
 * relative error 5.7e-16 (about 3 ulp). */
double kiln_trigamma(double x)
{
    if (isnan(x))
        return x;
    if (x == INFINITY)
        return 0.0;
    /* Poles: SciPy's polygamma(1, x) is zeta(2, x), which returns +inf
     * for every q <= 0 with q == floor(q): the non-positive integers,
     * -0.0 and -inf.  (psi1 -> +inf from both sides of each pole, so
     * the sign of zero does not matter, unlike digamma.)  Every double
     * of magnitude >= 2^52 is an integer, hence a pole. */
    if (x <= 0.0 && x == floor(x))
        return INFINITY;
    if (x > 0.0)
        return kiln_trigamma_positive(x);

    /* Reflection (A&S 6.4.7 with n = 1):
     *   psi1(1 - x) + psi1(x) = pi^2 / sin^2(pi x).
     * sin^2(pi x) has period 1, so it is evaluated on the fractional
     * part folded into [-0.5, 0.5], where pi*r loses no relative
     * accuracy.  pi^2/sin^2 >= pi^2 and psi1(1 - x) < pi^2/6 for x < 0,
     * so the difference does not cancel. */
    double ipart;
    double r = modf(x, &ipart);
    if (r < -0.5)
        r += 1.0; /* exact: Sterbenz */
    double s = sin(M_PI * r);
    return M_PI * M_PI / (s * s) - kiln_trigamma_positive(1.0 - x);
}

double kiln_gammaln(double x)
{
    /* lgamma() writes the global signgam; lgamma_r returns the sign
     * through its argument instead, so concurrent kernels do not race. */
    int sign;
    return lgamma_r(x, &sign);
}

double kiln_sigmoid(double x)
{
    /* exp of a non-positive argument never overflows: use exp(-|x|). */
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* Thresholds, checked against long-double log1pl(expl(x)):
 *  - above 33.3, exp(-x) < 3.4e-15 is under half an ulp of x (ulp(x) =
 *    2^-47 on [32, 64)), so log(1 + e^x) = x + log1p(e^-x) rounds to x;
 *  - below -37, e^x < 8.6e-17 and log1p(e^x) = e^x (1 - e^x/2 + ...)
 *    differs from e^x by less than half an ulp, so exp(x) is the rounded
 *    result (and exp(x) underflows gracefully to 0).
 * In between log1p(exp(x)) neither overflows nor loses the tail. */
#define KILN_SOFTPLUS_HIGH 33.3
#define KILN_SOFTPLUS_LOW (-37.0)

double kiln_softplus(double x)
{
    if (x > KILN_SOFTPLUS_HIGH)
        return x;
    if (x < KILN_SOFTPLUS_LOW)
        return exp(x);
    return log1p(exp(x));
}
