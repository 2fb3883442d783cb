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

/* ---- issue 25: elementwise ops of PyMC graphs ------------------------ */

#define KILN_SQRT_PI 1.7724538509055160273
#define KILN_SP_EPS 2.220446049250313e-16
#define KILN_SP_TINY 1e-300

/* Mächler (2012), "Accurately computing log(1 - exp(-|a|))", Rmpfr
 * vignette: log(-expm1(x)) above -ln 2, log1p(-exp(x)) below. */
double kiln_log1mexp(double x)
{
    if (isnan(x))
        return x;
    if (x > 0)
        return NAN;
    if (x > -0.6931471805599453)
        return log(-expm1(x));   /* x = 0: log(+-0) = -inf */
    return log1p(-exp(x));
}

/* NumPy's npy_divmod remainder: fmod is exact; a non-zero remainder of
 * the wrong sign moves by one b, a zero one takes b's sign. */
double kiln_mod(double a, double b)
{
    double m = fmod(a, b);
    if (b == 0 || isnan(m))
        return m;
    if (m != 0) {
        if ((b < 0) != (m < 0))
            m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}

double kiln_round_half_even(double x)
{
    if (!(fabs(x) < 0x1p52))   /* NaN, infinities, already integral */
        return x;
    double y = floor(x), r = x - y;   /* exact below 2^52 */
    if (r > 0.5 || (r == 0.5 && fmod(y, 2.0) != 0))
        y += 1.0;
    return y == 0 ? copysign(0.0, x) : y;
}

/* exp(x^2) to a few ulps for every x: x^2 = hi + lo exactly (fma), and
 * exp(hi + lo) = exp(hi) (1 + lo) since |lo| <= ulp(hi)/2. */
static double kiln_expx2(double x)
{
    double hi = x * x, lo = fma(x, x, -hi);
    return exp(hi) * (1.0 + lo);
}

/* erfcx(x) = exp(x^2) erfc(x).  x < 0: 2 exp(x^2) - erfcx(-x) (no
 * cancellation: the first term is >= 2, the second < 1); 0 <= x < 10:
 * the product (libm's erfc keeps its relative accuracy there); x >= 10:
 * the continued fraction of Abramowitz & Stegun 7.1.14,
 *   sqrt(pi) erfcx(x) = 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))),
 * evaluated by the modified Lentz method (Numerical Recipes, 3rd ed.,
 * section 5.2); above 1e8 its first term, 1/(x sqrt(pi)), is exact to
 * double precision. */
double kiln_erfcx(double x)
{
    if (isnan(x))
        return x;
    if (x < -26.7)
        return INFINITY;   /* exp(x^2) overflows (x^2 > 712.9) */
    if (x < 0)
        return 2.0 * kiln_expx2(x) - kiln_erfcx(-x);
    if (x < 10.0)
        return kiln_expx2(x) * erfc(x);
    if (x > 1e8)
        return 1.0 / (KILN_SQRT_PI * x);
    double f = x, c = x, d = 0.0;
    for (int k = 1; k < 1000; k++) {
        double a = 0.5 * k;
        d = x + a * d;
        c = x + a / c;
        d = 1.0 / d;
        double delta = c * d;
        f *= delta;
        if (fabs(delta - 1.0) < KILN_SP_EPS)
            break;
    }
    return 1.0 / (KILN_SQRT_PI * f);
}

/* Winitzki's closed-form approximation of erfinv (relative error below
 * 2e-3 everywhere), from lq = log(1 - x^2): the start of the Halley
 * iterations below. */
static double kiln_erfinv_guess(double lq)
{
    const double a = 0.147;
    double t = 2.0 / (M_PI * a) + 0.5 * lq;
    return sqrt(sqrt(t * t - lq / a) - t);
}

/* Halley's method on f(y) = erf(y) - x or erfc(y) - q: both have
 * f'' = -2 y f', so with dy = f / f' the step is dy / (1 + y dy). */
static double kiln_halley_step(double y, double dy, int *done)
{
    *done = fabs(dy) <= 1e-16 * fabs(y);
    return y - dy / (1.0 + y * dy);
}

/* erfinv for |x| <= 0.5 (Halley on erf, whose relative accuracy carries
 * over to the root). */
static double kiln_erfinv_central(double x)
{
    if (x == 0)
        return x;
    double y = copysign(kiln_erfinv_guess(log1p(-x * x)), x);
    for (int i = 0; i < 10; i++) {
        int done;
        double dy = (erf(y) - x) / (M_2_SQRTPI * exp(-y * y));
        y = kiln_halley_step(y, dy, &done);
        if (done)
            break;
    }
    return y;
}

/* erfcinv(q) for 0 < q < 0.5: Halley on erfc(y) - q written through
 * erfcx, erfc(y) = erfcx(y) e^{-y^2}, so nothing underflows even for
 * denormal q:  dy = (erfcx(y) - q e^{y^2}) / (-2/sqrt(pi)), with
 * q e^{y^2} = exp(y^2 + log q) (y^2 split exactly; the sum of the two
 * large terms is exact by Sterbenz's lemma). */
static double kiln_erfcinv_tail(double q)
{
    double lnq = log(q);
    double y = kiln_erfinv_guess(lnq + log(2.0 - q));
    for (int i = 0; i < 10; i++) {
        int done;
        double hi = y * y, lo = fma(y, y, -hi);
        double r = exp((hi + lnq) + lo);
        double dy = -(kiln_erfcx(y) - r) * (0.5 * KILN_SQRT_PI);
        y = kiln_halley_step(y, dy, &done);
        if (done)
            break;
    }
    return y;
}

double kiln_erfinv(double x)
{
    if (isnan(x) || x < -1 || x > 1)
        return NAN;
    if (fabs(x) == 1)
        return copysign(INFINITY, x);
    if (fabs(x) <= 0.5)
        return kiln_erfinv_central(x);
    return copysign(kiln_erfcinv_tail(1.0 - fabs(x)), x); /* 1-|x| exact */
}

double kiln_erfcinv(double q)
{
    if (isnan(q) || q < 0 || q > 2)
        return NAN;
    if (q == 0)
        return INFINITY;
    if (q == 2)
        return -INFINITY;
    if (q < 0.5)
        return kiln_erfcinv_tail(q);
    if (q <= 1.5)
        return kiln_erfinv_central(1.0 - q);  /* exact: Sterbenz */
    return -kiln_erfcinv_tail(2.0 - q);
}

/* d - log1p(d) >= 0, by its series sum_{k>=2} (-d)^k / k where the
 * difference would cancel. */
static double kiln_d_minus_log1p(double d)
{
    if (fabs(d) >= 0.25)
        return d - log1p(d);
    double s = 0, p = -d;
    for (int k = 2; k < 60; k++) {
        p *= -d;
        double t = p / k;
        s += t;
        if (fabs(t) <= 1e-17 * s)
            break;
    }
    return s;
}

/* lgamma(a) - [(a - 1/2) log a - a + log(2 pi)/2] for a >= 10: the
 * Stirling series B_2k / (2k (2k-1) a^(2k-1)) to k = 7 (Abramowitz &
 * Stegun 6.1.40); the next term is below 3e-17 at a = 10. */
static double kiln_stirling_corr(double a)
{
    double z = 1.0 / (a * a);
    return (1.0 / 12.0
            - z * (1.0 / 360.0
            - z * (1.0 / 1260.0
            - z * (1.0 / 1680.0
            - z * (1.0 / 1188.0
            - z * (691.0 / 360360.0
            - z * (1.0 / 156.0))))))) / a;
}

/* log(x^a e^-x / Gamma(a)).  For a >= 10 as Temme / DiDonato & Morris
 * (1986, eq. 9) write it, -a D(x/a) + log(a/(2 pi))/2 - stirling(a) with
 * D(u) = u - 1 - log u computed without cancellation, so that the large
 * a log x, x and lgamma(a) do not cancel. */
static double kiln_gamma_logpref(double a, double x)
{
    if (a < 10)
        return a * log(x) - x - kiln_gammaln(a);
    return -a * kiln_d_minus_log1p((x - a) / a)
           + 0.5 * log(a / (2 * M_PI)) - kiln_stirling_corr(a);
}

/* The two expansions of Numerical Recipes (3rd ed., 6.2): the series
 * P(a,x) = pref/a sum_n x^n / ((a+1)...(a+n)) and the continued fraction
 * Q(a,x) = pref / (x+1-a - 1(1-a)/(x+3-a - 2(2-a)/(x+5-a - ...))) by the
 * modified Lentz method.  *which gets 0 (P computed) or 1 (Q). */
static double kiln_gamma_pq(double a, double x, int *which)
{
    double lp = kiln_gamma_logpref(a, x);
    if (x < a + 1 && !(a < 1 && x > 0.3)) {
        double t = 1.0 / a, s = t;
        for (int n = 1; n < 1000000; n++) {
            t *= x / (a + n);
            s += t;
            if (t < s * 1e-17)
                break;
        }
        *which = 0;
        return exp(lp) * s;
    }
    double b = x + 1 - a, c = 1.0 / KILN_SP_TINY, d = 1.0 / b, h = d;
    for (int i = 1; i < 1000000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < KILN_SP_TINY)
            d = KILN_SP_TINY;
        c = b + an / c;
        if (fabs(c) < KILN_SP_TINY)
            c = KILN_SP_TINY;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < KILN_SP_EPS)
            break;
    }
    *which = 1;
    return exp(lp) * h;
}

/* SciPy's (cephes igam/igamc) values at the ends: NaN for a < 0, x < 0
 * or NaN; a = 0: P = 1, Q = 0 for x > 0 (NaN at x = 0); x = 0: P = 0;
 * a = inf: P = 0 (NaN at x = inf); x = inf: P = 1.  Returns 1 with *p
 * set when it is one of those. */
static int kiln_gamma_edge(double a, double x, double *p)
{
    if (isnan(a) || isnan(x) || a < 0 || x < 0)
        *p = NAN;
    else if (a == 0)
        *p = x > 0 ? 1.0 : NAN;
    else if (x == 0)
        *p = 0.0;
    else if (isinf(a))
        *p = isinf(x) ? NAN : 0.0;
    else if (isinf(x))
        *p = 1.0;
    else
        return 0;
    return 1;
}

double kiln_gammainc(double a, double x)
{
    double p;
    int which;
    if (kiln_gamma_edge(a, x, &p))
        return p;
    double v = kiln_gamma_pq(a, x, &which);
    return which == 0 ? v : 1.0 - v;
}

/* Q(a, x) for a < 1, x <= 1, where 1 - P would cancel: with
 * u = a log x - lgamma(1 + a),
 *   Q = -expm1(u) - e^u a sum_{n>=1} (-x)^n / (n! (a + n))
 * (the series of P = x^a/Gamma(a+1) [1 + a sum ...], A&S 6.5.29, moved
 * to Q's side; both terms are positive).  lgamma(1 + a) is taken at the
 * rounded b = 1 + a and corrected by its derivative times the rounding
 * error, since glibc's lgamma is accurate relative to its small value
 * near 1 but a is not representable in 1 + a. */
static double kiln_gammaincc_small_a(double a, double x)
{
    double b = 1.0 + a, da = a - (b - 1.0);
    double u = a * log(x) - (kiln_gammaln(b) + da * kiln_digamma(b));
    double s = 0, t = 1;
    for (int n = 1; n < 100; n++) {
        t *= -x / n;
        double term = t / (a + n);
        s += term;
        if (fabs(term) <= 1e-17 * fabs(s))
            break;
    }
    return -expm1(u) - exp(u) * a * s;
}

double kiln_gammaincc(double a, double x)
{
    double p;
    int which;
    if (kiln_gamma_edge(a, x, &p))
        return 1.0 - p;   /* NaN stays NaN */
    if (a < 1 && x <= 1.0)
        return kiln_gammaincc_small_a(a, x);
    double v = kiln_gamma_pq(a, x, &which);
    return which == 1 ? v : 1.0 - v;
}

/* The continued fraction of I_x(a, b) (Numerical Recipes 3rd ed. 6.4,
 * after Abramowitz & Stegun 26.5.8), by the modified Lentz method. */
static double kiln_betacf(double a, double b, double x)
{
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < KILN_SP_TINY)
        d = KILN_SP_TINY;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m < 1000000; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < KILN_SP_TINY)
            d = KILN_SP_TINY;
        c = 1.0 + aa / c;
        if (fabs(c) < KILN_SP_TINY)
            c = KILN_SP_TINY;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < KILN_SP_TINY)
            d = KILN_SP_TINY;
        c = 1.0 + aa / c;
        if (fabs(c) < KILN_SP_TINY)
            c = KILN_SP_TINY;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < KILN_SP_EPS)
            break;
    }
    return h;
}

/* I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * cf(a, b, x) where x is below
 * the mean-ish point (a+1)/(a+b+2), else 1 - I_{1-x}(b, a) (NR 6.4). */
double kiln_betainc(double a, double b, double x)
{
    if (isnan(a) || isnan(b) || isnan(x) || a <= 0 || b <= 0 || x < 0 ||
        x > 1)
        return NAN;
    if (x == 0)
        return 0.0;
    if (x == 1)
        return 1.0;
    if (isinf(a) || isinf(b))
        return NAN;
    double lp = a * log(x) + b * log1p(-x)
                - (kiln_gammaln(a) + kiln_gammaln(b) - kiln_gammaln(a + b));
    if (x < (a + 1) / (a + b + 2))
        return exp(lp) * kiln_betacf(a, b, x) / a;
    return 1.0 - exp(lp) * kiln_betacf(b, a, 1.0 - x) / b;
}

/* d/da P(a, x).  Where the series of P is used (x < a + 1, or a < 1 and
 * x <= 1), its term-by-term derivative:
 *   P = sum_n t_n,  t_n = x^(a+n) e^-x / Gamma(a+n+1),
 *   dP/da = sum_n t_n (log x - psi(a+n+1))
 * (psi by its recurrence).  Elsewhere Q = pref * h, h the continued
 * fraction of kiln_gamma_pq, and dQ/da = Q (log x - psi(a)) + pref h'
 * with h' carried through the modified Lentz recurrences (forward-mode
 * differentiation of the fraction; both terms are positive, so nothing
 * cancels where Q is small); dP/da = -dQ/da. */
double kiln_gammainc_da(double a, double x)
{
    double p;
    if (kiln_gamma_edge(a, x, &p))
        return isnan(p) ? p : 0.0;
    double lp = kiln_gamma_logpref(a, x);
    double lx = log(x);
    if (x < a + 1 || (a < 1 && x <= 1.0)) {
        double t = exp(lp) / a, psi = kiln_digamma(a + 1);
        double s = t * (lx - psi);
        for (int n = 1; n < 1000000; n++) {
            t *= x / (a + n);
            psi += 1.0 / (a + n);
            double term = t * (lx - psi);
            s += term;
            if (fabs(term) <= 1e-17 * fabs(s) && t <= 1e-17 * fabs(s))
                break;
        }
        return s;
    }
    /* the continued fraction and its derivative in a (suffix d) */
    double b = x + 1 - a, bd = -1.0;
    double c = 1.0 / KILN_SP_TINY, cd = 0.0;
    double d = 1.0 / b, dd = 1.0 / (b * b);
    double h = d, hd = dd;
    for (int i = 1; i < 1000000; i++) {
        double an = -i * (i - a), and_ = i;
        b += 2;
        double dn = an * d + b, dnd = and_ * d + an * dd + bd;
        if (fabs(dn) < KILN_SP_TINY)
            dn = KILN_SP_TINY;
        double cn = b + an / c, cnd = bd + (and_ * c - an * cd) / (c * c);
        if (fabs(cn) < KILN_SP_TINY)
            cn = KILN_SP_TINY;
        d = 1.0 / dn;
        dd = -dnd / (dn * dn);
        c = cn;
        cd = cnd;
        double del = d * c, deld = dd * c + d * cd;
        double hn = h * del;
        hd = hd * del + h * deld;
        h = hn;
        if (fabs(del - 1.0) < KILN_SP_EPS &&
            fabs(h * deld) <= KILN_SP_EPS * fabs(hd))
            break;
    }
    double pref = exp(lp);
    return -(pref * h * (lx - kiln_digamma(a)) + pref * hd);
}

/* ---- d/da and d/db of I_x(a, b) ---------------------------------------
 * Where kiln_betainc uses the continued fraction directly (x below
 * (a+1)/(a+b+2)),
 *   I = F h,  F = x^a (1-x)^b / (a B(a, b)),  h = kiln_betacf(a, b, x),
 * so with the log-derivatives of the prefactor
 *   d/da log F = log x - 1/a - psi(a) + psi(a+b)
 *              = log x - psi(a+1) + psi(a+b)   (no cancellation at small a)
 *   d/db log F = log(1-x) - psi(b) + psi(a+b)
 * dI/da = F (h d/da log F + dh/da), likewise for b.  dh/da and dh/db are
 * carried through the modified Lentz recurrences of the fraction (Press
 * et al., Numerical Recipes 2nd ed. sec. 6.4 and 5.2: forward-mode
 * differentiation with two tangents, each coefficient's derivative in
 * closed form); Boik & Robison-Cox (1998), "Derivatives of the
 * incomplete beta function", J. Stat. Software 3(1), differentiate the
 * same fraction through its convergents A_n / B_n instead.  Elsewhere
 * I_x(a, b) = 1 - I_{1-x}(b, a): the roles of a and b swap and both
 * derivatives change sign.  log x and log(1-x) come from the caller's x
 * (log1p), not from 1 - (1 - x). */

/* psi(v + dv) - psi(v) for v > 0, v + dv > 0, without the cancellation
 * of the plain difference where dv is small next to v (d/da log F at
 * large a, small b: psi(a+b) - psi(a) ~ b/a is then the size of log x).
 * Both arguments are shifted up to KILN_DIGAMMA_ASYMPTOTIC_MIN by the
 * recurrence (A&S 6.3.5), whose terms differ by
 *   1/(v+k) - 1/(v+dv+k) = dv / ((v+k)(v+dv+k)),
 * and there the asymptotic series (A&S 6.3.18) is differenced term by
 * term: log(z2/z1) = log1p(dv/z1), and for each power
 *   z1^-n - z2^-n = (1/z1 - 1/z2) sum_{j<n} z1^-j z2^-(n-1-j),
 *   1/z1 - 1/z2 = dv / (z1 z2),
 * so every term keeps the factor dv exactly. */
static double kiln_digamma_diff(double v, double dv)
{
    double s = 0.0;
    while (v < KILN_DIGAMMA_ASYMPTOTIC_MIN ||
           v + dv < KILN_DIGAMMA_ASYMPTOTIC_MIN) {
        s += dv / (v * (v + dv));
        v += 1.0;
    }
    double z1 = v, z2 = v + dv, r1 = 1.0 / z1, r2 = 1.0 / z2;
    double q = dv * r1 * r2; /* 1/z1 - 1/z2 */
    /* B_2k / (2k), k = 1 .. 7: the coefficients of kiln_digamma_asymptotic */
    static const double c[7] = {1.0 / 12.0, -1.0 / 120.0, 1.0 / 252.0,
                                -1.0 / 240.0, 1.0 / 132.0,
                                -691.0 / 32760.0, 1.0 / 12.0};
    /* p1 = z1^-n, sum_j ... accumulated for n = 1 .. 14 */
    double pw1 = 1.0, sum = 0.0, t = 0.0;
    for (int n = 1; n <= 14; n++) {
        /* sum_{j<n} r1^j r2^(n-1-j) = r2 * previous + r1^(n-1) */
        sum = sum * r2 + pw1;
        pw1 *= r1;
        if (n % 2 == 0)
            t += c[n / 2 - 1] * q * sum;  /* c_k (z1^-2k - z2^-2k) */
    }
    /* psi(z2) - psi(z1) = log(z2/z1) - (1/(2 z2) - 1/(2 z1))
     *                     - sum_k c_k (z2^-2k - z1^-2k) */
    return s + log1p(dv * r1) + 0.5 * q + t;
}

/* A value and its derivatives in a and b. */
typedef struct kiln_dual2 {
    double v, a, b;
} kiln_dual2;

/* One modified-Lentz step f <- f * del for the fraction's coefficient
 * aa: d <- 1 / (1 + aa d), c <- 1 + aa / c, del = d c, all with their
 * tangents.  Returns del; *dt gets |del_a| + |del_b|. */
static double kiln_betacf_step(kiln_dual2 aa, kiln_dual2 *d, kiln_dual2 *c,
                               kiln_dual2 *h, double *dt)
{
    double dn = 1.0 + aa.v * d->v;
    double dna = aa.a * d->v + aa.v * d->a, dnb = aa.b * d->v + aa.v * d->b;
    if (fabs(dn) < KILN_SP_TINY)
        dn = KILN_SP_TINY;
    double c2 = c->v * c->v;
    double cn = 1.0 + aa.v / c->v;
    double cna = (aa.a * c->v - aa.v * c->a) / c2;
    double cnb = (aa.b * c->v - aa.v * c->b) / c2;
    if (fabs(cn) < KILN_SP_TINY)
        cn = KILN_SP_TINY;
    *d = (kiln_dual2){1.0 / dn, -dna / (dn * dn), -dnb / (dn * dn)};
    *c = (kiln_dual2){cn, cna, cnb};
    double del = d->v * c->v;
    double dela = d->a * c->v + d->v * c->a;
    double delb = d->b * c->v + d->v * c->b;
    *h = (kiln_dual2){h->v * del, h->a * del + h->v * dela,
                      h->b * del + h->v * delb};
    *dt = fabs(dela) + fabs(delb);
    return del;
}

/* log(y^p (1-y)^q / B(p, q)), omy = 1 - y, ly = log y, l1my = log(1-y)
 * (all from the caller's x, without rounding 1 - x).  gammaln(q) and
 * gammaln(p+q) are ~q log q each; their plain difference loses
 * eps q log q (9e-13 at q ~ 700).  With Stirling's series
 * (A&S 6.1.40, kiln_stirling_corr), for p, q >= 10 as DiDonato & Morris
 * (1992, ACM TOMS 18, BRCOMP) write it:
 *   -(p D(l/p) + q D(-l/q)) + log(p q / (p+q)) / 2 - log(2 pi) / 2
 *   + corr(p+q) - corr(p) - corr(q),
 *   l = (p+q) y - p = q - (p+q)(1-y),  D(u) = u - log1p(u) (its series
 *   where |u| < 1/4, kiln_d_minus_log1p);
 * for q >= 10 > p only the large pair by Stirling:
 *   gammaln(q) - gammaln(p+q) = -(q - 1/2) log1p(p/q) - p log(p+q) + p
 *                               + corr(q) - corr(p+q). */
static double kiln_beta_logpref(double p, double q, double y, double omy,
                                double ly, double l1my)
{
    double pq = p + q;
    if (p >= 10 && q >= 10) {
        double l = y <= omy ? pq * y - p : q - pq * omy;
        double u = l / p, v = -l / q;
        /* p D(u) = l - p log(1+u), 1 + u = (p+q) y / p, formed from
         * log y where u is near -1 (likewise q D(v), 1 + v = (p+q)(1-y)/q) */
        double tp = fabs(u) < 0.25 ? p * kiln_d_minus_log1p(u)
                                   : l - p * (ly + log1p(q / p));
        double tq = fabs(v) < 0.25 ? q * kiln_d_minus_log1p(v)
                                   : -l - q * (l1my + log1p(p / q));
        return -(tp + tq)
               + 0.5 * log(p / pq * q) - 0.5 * log(2 * M_PI)
               + kiln_stirling_corr(pq) - kiln_stirling_corr(p)
               - kiln_stirling_corr(q);
    }
    if (p >= 10 || q >= 10) {
        double big = p >= 10 ? p : q, small = p >= 10 ? q : p;
        double d = -(big - 0.5) * log1p(small / big) - small * log(pq) + small
                   + kiln_stirling_corr(big) - kiln_stirling_corr(pq);
        return p * ly + q * l1my - kiln_gammaln(small) - d;
    }
    return p * ly + q * l1my
           - (kiln_gammaln(p) + kiln_gammaln(q) - kiln_gammaln(pq));
}

/* d/dp and d/dq of I_y(p, q) by the continued fraction (the caller
 * chose y < (p+1)/(p+q+2)); omy = 1 - y, ly = log y, l1my = log(1-y). */
static void kiln_betainc_dpq(double p, double q, double y, double omy,
                             double ly, double l1my, double *dp, double *dq)
{
    double pq = p + q;
    double lf_p = ly + kiln_digamma_diff(p + 1, q - 1);
    double lf_q = l1my + kiln_digamma_diff(q, p);
    /* the first coefficient, -(p+q) y / (p+1) (NR's betacf: d = 1/(1 +
     * it), c = 1, h = d) */
    double a0 = -pq * y / (p + 1);
    double d0 = 1.0 + a0;
    if (fabs(d0) < KILN_SP_TINY)
        d0 = KILN_SP_TINY;
    double a0p = -y * (1.0 - q) / ((p + 1) * (p + 1)), a0q = -y / (p + 1);
    kiln_dual2 d = {1.0 / d0, -a0p / (d0 * d0), -a0q / (d0 * d0)};
    kiln_dual2 c = {1.0, 0.0, 0.0};
    kiln_dual2 h = d;
    for (int m = 1; m < 1000000; m++) {
        double m2 = 2.0 * m;
        /* even coefficient m (q - m) y / ((p+2m-1)(p+2m)) */
        double r1 = 1.0 / (p + m2 - 1), r2 = 1.0 / (p + m2);
        double ae = m * (q - m) * y * r1 * r2;
        kiln_dual2 aa = {ae, -ae * (r1 + r2), m * y * r1 * r2};
        double t1, t2;
        kiln_betacf_step(aa, &d, &c, &h, &t1);
        /* odd coefficient -(p+m)(p+q+m) y / ((p+2m)(p+2m+1)) */
        double r3 = 1.0 / (p + m2 + 1), s1 = 1.0 / (p + m), s2 = 1.0 / (pq + m);
        double ao = -(p + m) * (pq + m) * y * r2 * r3;
        aa = (kiln_dual2){ao, ao * (s1 + s2 - r2 - r3), ao * s2};
        double del = kiln_betacf_step(aa, &d, &c, &h, &t2);
        if (fabs(del - 1.0) < KILN_SP_EPS &&
            fabs(h.v) * (t1 + t2) <=
                KILN_SP_EPS * fmin(fabs(h.a) + fabs(h.v * lf_p),
                                   fabs(h.b) + fabs(h.v * lf_q)))
            break;
    }
    double f = exp(kiln_beta_logpref(p, q, y, omy, ly, l1my)) / p;
    *dp = f * (h.v * lf_p + h.a);
    *dq = f * (h.v * lf_q + h.b);
}

/* Both derivatives; 0 at x = 0 and x = 1, NaN where I_x(a, b) is. */
static void kiln_betainc_dab(double a, double b, double x, double *da,
                             double *db)
{
    if (isnan(a) || isnan(b) || isnan(x) || a <= 0 || b <= 0 || x < 0 ||
        x > 1 || isinf(a) || isinf(b)) {
        *da = *db = NAN;
        return;
    }
    if (x == 0 || x == 1) {
        *da = *db = 0.0;
        return;
    }
    double lx = log(x), l1mx = log1p(-x);
    if (x < (a + 1) / (a + b + 2)) {
        kiln_betainc_dpq(a, b, x, 1.0 - x, lx, l1mx, da, db);
        return;
    }
    double dp, dq;
    kiln_betainc_dpq(b, a, 1.0 - x, x, l1mx, lx, &dp, &dq);
    *da = -dq;
    *db = -dp;
}

double kiln_betainc_da(double a, double b, double x)
{
    double da, db;
    kiln_betainc_dab(a, b, x, &da, &db);
    return da;
}

double kiln_betainc_db(double a, double b, double x)
{
    double da, db;
    kiln_betainc_dab(a, b, x, &da, &db);
    return db;
}

/* ---- exponentially scaled modified Bessel functions I0, I1 (issue 28) ---
 *
 * Below KILN_BESSEL_SERIES_MAX the power series (Abramowitz & Stegun
 * 9.6.10; DLMF 10.25.2)
 *   I_nu(x) = (x/2)^nu sum_k (x^2/4)^k / (k! (k + nu)!)
 * whose terms are all positive (no cancellation: a few ulps), times
 * e^{-|x|}.  Above it the asymptotic expansion (A&S 9.7.1; DLMF 10.40.1)
 *   e^{-x} I_nu(x) ~ (2 pi x)^{-1/2} sum_k (-1)^k a_k(nu) / x^k,
 *   a_k / a_{k-1} = (4 nu^2 - (2k - 1)^2) / (8k),
 * summed until a term falls below 1e-17 of the sum (at x >= 20 the
 * smallest term is about e^{-2x} < 1e-17, reached near k = 2x). */
#define KILN_BESSEL_SERIES_MAX 20.0

static double kiln_bessel_ie(int nu, double x)
{
    if (isnan(x))
        return x;
    if (isinf(x))
        return 0.0;
    double ax = fabs(x), s;
    if (ax <= KILN_BESSEL_SERIES_MAX) {
        double q = 0.25 * ax * ax, t = nu ? 0.5 * ax : 1.0;
        s = t;
        for (int k = 1; k < 200 && t > 1e-17 * s; k++) {
            t *= q / ((double)k * (double)(k + nu));
            s += t;
        }
        s *= exp(-ax);
    } else {
        double mu = 4.0 * nu * nu, t = 1.0;
        s = 1.0;
        for (int k = 1; k < 200; k++) {
            double r = -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * ax);
            if (fabs(r) >= 1.0)
                break;   /* the terms grow: past the smallest */
            t *= r;
            s += t;
            if (fabs(t) < 1e-17 * fabs(s))
                break;
        }
        s /= sqrt(2.0 * M_PI * ax);
    }
    return nu && x < 0 ? -s : s;
}

double kiln_i0e(double x) { return kiln_bessel_ie(0, x); }
double kiln_i1e(double x) { return kiln_bessel_ie(1, x); }
