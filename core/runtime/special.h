/*
 * special.h — scalar special functions used by the runtime table
 * (core/runtime/runtime.c) and so by every backend (prefix kiln_).
 *
 * All are pure, thread-safe functions of one double.  Behaviour at poles
 * and non-finite arguments follows SciPy (scipy.special), so that kiln
 * agrees with the PyTensor graphs it compiles.
 */
#ifndef KILN_CORE_SPECIAL_H
#define KILN_CORE_SPECIAL_H

/* psi(x), the logarithmic derivative of Gamma.  Poles: psi(+0) = -inf,
 * psi(-0) = +inf, psi(negative integer) = NaN, psi(-inf) = NaN,
 * psi(+inf) = +inf (SciPy's digamma does the same). */
double kiln_digamma(double x);

/* psi1(x) = psi'(x), the trigamma function (PyTensor's tri_gamma,
 * SciPy's polygamma(1, x)).  Poles: +inf at 0 (either sign) and at every
 * negative integer; psi1(-inf) = +inf and psi1(+inf) = 0, as SciPy's
 * polygamma(1, x) = zeta(2, x) gives; NaN gives NaN.  Negative
 * non-integers by reflection (finite, positive). */
double kiln_trigamma(double x);

/* log|Gamma(x)|; +inf at the poles (non-positive integers).  Uses
 * lgamma_r, so it does not touch the global `signgam`. */
double kiln_gammaln(double x);

/* 1 / (1 + exp(-x)) without overflow for any x. */
double kiln_sigmoid(double x);

/* log(1 + exp(x)) without overflow or loss of the small tail. */
double kiln_softplus(double x);

/* ---- issue 25: elementwise ops of PyMC graphs ----------------------
 * Each follows SciPy / NumPy (scipy.special 1.10) at nan, infinities
 * and the ends of its domain; tests/test_special_ops.c compares them
 * with SciPy. */

/* log(1 - exp(x)) (PyTensor's log1mexp): NaN for x > 0, -inf at 0. */
double kiln_log1mexp(double x);

/* NumPy's float remainder: a - b*floor(a/b) computed exactly through
 * fmod; the result has the sign of b (+-0 when exact); NaN for b = 0. */
double kiln_mod(double a, double b);

/* Round half to even (NumPy's round / rint), independent of the FP
 * environment's rounding mode. */
double kiln_round_half_even(double x);

/* exp(x^2) erfc(x), scaled complementary error function; +inf below
 * about -26.6 (overflow), ~1/(x sqrt(pi)) for large x. */
double kiln_erfcx(double x);

/* Inverse error functions: erfinv on [-1, 1] (+-inf at +-1, NaN
 * outside), erfcinv on [0, 2] (+inf at 0, -inf at 2, NaN outside). */
double kiln_erfinv(double x);
double kiln_erfcinv(double q);

/* Regularised incomplete gamma functions P(a, x) (gammainc) and
 * Q(a, x) = 1 - P (gammaincc), SciPy's argument order; a >= 0, x >= 0
 * (NaN otherwise), SciPy's values at a = 0, x = 0 and infinities. */
double kiln_gammainc(double a, double x);
double kiln_gammaincc(double a, double x);

/* Regularised incomplete beta function I_x(a, b) (SciPy's betainc);
 * a, b > 0, 0 <= x <= 1, NaN otherwise. */
double kiln_betainc(double a, double b, double x);

/* d/da P(a, x) (= -d/da Q(a, x)), for the gradient of gammainc and
 * gammaincc with respect to a; NaN where P is, 0 at x = 0 and x = inf. */
double kiln_gammainc_da(double a, double x);

/* d/da I_x(a, b) and d/db I_x(a, b), for the gradient of betainc with
 * respect to a and b; NaN where I_x(a, b) is, 0 at x = 0 and x = 1. */
double kiln_betainc_da(double a, double b, double x);
double kiln_betainc_db(double a, double b, double x);

/* Exponentially scaled modified Bessel functions of the first kind,
 * SciPy's i0e(x) = e^{-|x|} I0(x) and i1e(x) = e^{-|x|} I1(x) (odd);
 * 0 at +-inf, NaN at NaN.  Series and asymptotic expansion (special.c,
 * A&S 9.6.10 and 9.7.1).  log I0(x) = log(i0e(x)) + |x| never
 * overflows. */
double kiln_i0e(double x);
double kiln_i1e(double x);

#endif
