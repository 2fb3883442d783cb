/*
 * free.h — the inverses of Stan's constraining transforms (kiln_model_
 * unconstrain; core/model/free.c).  Internal to core/model.
 */
#ifndef KILN_MODEL_FREE_H
#define KILN_MODEL_FREE_H

#include <kiln/kiln.h>

#include <stdint.h>

/* Write to y the unconstrained values of transform `tr`
 * (kiln_param_transform, <kiln/graph.h>) of parameter `name`, whose
 * constrained value x has rank crank and dims cshape (row-major), after
 * checking that x satisfies the constraint within 1e-8 (StanHeaders'
 * CONSTRAINT_TOLERANCE).  Errors: KILN_ERR_ARG naming the parameter and
 * what is wrong ("unconstrain: parameter 'theta' is not a simplex: its
 * values sum to 1.5"), KILN_ERR_NOMEM. */
int kiln_model_free_transform(int tr, const char *name, int crank,
                              const int64_t *cshape, const double *x,
                              double *y, kiln_err *err);

#endif
