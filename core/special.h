/*
 * special.h — scalar special functions used by the runtime table
 * (core/runtime.c) and so by every backend (prefix kiln_).
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

#endif
