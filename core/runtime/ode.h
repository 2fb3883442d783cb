/*
 * ode.h — the runtime's ODE solvers (prefix kiln_ode_), behind
 * kiln_runtime.ode_solve (include/kiln/backend.h, runtime table version 5).
 *
 * Two methods, both from SUNDIALS 6 (Debian libsundials-dev; configure
 * --with-sundials):
 *   KILN_ODE_BDF   CVODES: variable-order BDF, Newton iteration with a
 *                  dense direct solver (SUNLinSol_Dense) whose matrix is
 *                  built from the problem's Jacobian, forward
 *                  sensitivities staggered (CVodeSensInit1, CV_STAGGERED)
 *                  with their errors in the step control
 *                  (CVodeSensEEtolerances, CVodeSetSensErrCon).  Hindmarsh
 *                  et al., "SUNDIALS: Suite of nonlinear and
 *                  differential/algebraic equation solvers", ACM TOMS 31(3),
 *                  2005; the CVODES guide, "Forward sensitivity analysis".
 *   KILN_ODE_RK45  ARKODE ERKStep with the Dormand-Prince 5(4) table
 *                  (ARKODE_DORMAND_PRINCE_7_4_5), on the state alone or on
 *                  the coupled system z = (y, dy/dz0_1, ..., dy/dz0_m)
 *                  with z' = (f, J_y s_k + df/dz0_k), all components under
 *                  one error control: what Stan's ode_rk45 does with Boost
 *                  odeint's runge_kutta_dopri5.  Output times are reached
 *                  by the solver's dense output (ARK_NORMAL), as odeint's
 *                  integrate_times does.
 *
 * Thread safety: every call makes its own SUNContext and solver memory
 * and frees them before returning, so any number of threads may solve at
 * once (SUNDIALS 6 keeps no other global state).  A solve allocates (the
 * ODE kernels are the exception to "no allocation in steady state").
 */
#ifndef KILN_CORE_ODE_H
#define KILN_CORE_ODE_H

#include <kiln/backend.h>

/* kiln_runtime.ode_solve; the contract is in include/kiln/backend.h. */
int kiln_ode_solve(const kiln_ode_problem *pb, double t0, const double *y0,
                   const double *theta, int64_t nts, const double *ts,
                   double *y_out, double *sens_out, char *errbuf,
                   size_t errbuf_size);

/* A callable running an ODE kernel (KILN_KERNEL_ODE: the ops ode_rk45 and
 * ode_bdf) in the host: `rhs` is the node's body compiled as a function
 * of its own, (t: f64, y: f64[N], theta: f64[P]) -> dy: f64[N]; `jac`
 * its Jacobian's graph (kiln_ir_ode_jacobian) compiled likewise, -> f64[N,
 * N+P]; `rhs_jac` the graph of both (kiln_ir_ode_rhs_jacobian) -> (dy,
 * jac).  jac or rhs_jac may be NULL, not both; with rhs_jac the RK45
 * sensitivity system gets f and J from one call per stage, and BDF's
 * Jacobian comes from it when jac is NULL (kiln_ode_problem.rhs_jac).
 * All three are taken (freed with the callable, or by the caller on
 * failure).  The kernel's inputs are the views y0 [N], t0 (scalar), ts
 * [T], theta [P], all f64; its outputs Y [T, N] and, when it has two,
 * the sensitivities S [T, N, N+P] (S[i, j, k] = d Y[i, j] / d (y0,
 * theta)[k]).  With sens_only the kernel has one output, S (the node
 * the gradient makes).  `label` starts its messages ("ode_bdf 'z'"; copied).
 * Each call solves with kiln_ode_solve on the calling thread; reentrant.
 * Returns 0 or KILN_ERR_NOMEM.  It belongs to kiln_ode_backend. */
int kiln_ode_callable(kiln_function *rhs, kiln_function *jac,
                      kiln_function *rhs_jac, int method,
                      double rtol, double atol, int64_t max_num_steps,
                      const char *label, int sens_only, kiln_callable **out);

/* The pseudo backend "host_ode" owning those callables (supports ODE
 * kernels only; never compiles: the driver attaches callables). */
extern const kiln_backend kiln_ode_backend;

/* 1 when kiln was built with SUNDIALS (the ODE ops can run), else 0. */
int kiln_ode_available(void);

/* Stan's defaults (Stan Functions Reference, "Ordinary differential
 * equation (ODE) solvers"): ode_rk45 rtol 1e-6, atol 1e-6, 1e6 steps;
 * ode_bdf rtol 1e-10, atol 1e-10, 1e8 steps. */
#define KILN_ODE_RK45_RTOL 1e-6
#define KILN_ODE_RK45_ATOL 1e-6
#define KILN_ODE_RK45_MAX_STEPS 1000000
#define KILN_ODE_BDF_RTOL 1e-10
#define KILN_ODE_BDF_ATOL 1e-10
#define KILN_ODE_BDF_MAX_STEPS 100000000

#endif
