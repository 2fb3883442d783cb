/*
 * model_stub.c — TEMPORARY stand-in for core/model.c (<kiln/model.h>),
 * so that the BridgeStan shim and its tests build and link before the
 * real implementation lands.  Every function fails with KILN_ERR_ARG
 * "model: not implemented yet".  Drop this file (and its line in
 * Makefile.am) when core/model.c is merged.
 */
#include <kiln/model.h>

#include "ir.h"   /* kiln_seterr */

#define NOT_YET "model: not implemented yet"

kiln_model *kiln_model_new(const kiln_graph *g, const char *logp_output,
                           const char *data, const kiln_options *opt,
                           const kiln_read_options *ropt, kiln_err *err)
{
    (void)g, (void)logp_output, (void)data, (void)opt, (void)ropt;
    kiln_seterr(err, KILN_ERR_ARG, NOT_YET);
    return NULL;
}

void kiln_model_free(kiln_model *m) { (void)m; }

const char *kiln_model_name(const kiln_model *m) { (void)m; return ""; }

const char *kiln_model_info(const kiln_model *m) { (void)m; return ""; }

int kiln_model_n_unc(const kiln_model *m) { (void)m; return 0; }

int kiln_model_n_params(const kiln_model *m, int include_tp, int include_gq)
{
    (void)m, (void)include_tp, (void)include_gq;
    return 0;
}

const char *kiln_model_param_names(const kiln_model *m, int include_tp,
                                   int include_gq)
{
    (void)m, (void)include_tp, (void)include_gq;
    return "";
}

const char *kiln_model_param_unc_names(const kiln_model *m)
{
    (void)m;
    return "";
}

int kiln_model_constrain(const kiln_model *m, int include_tp, int include_gq,
                         const double *unc, double *out, kiln_err *err)
{
    (void)m, (void)include_tp, (void)include_gq, (void)unc, (void)out;
    return kiln_seterr(err, KILN_ERR_ARG, NOT_YET);
}

int kiln_model_unconstrain(const kiln_model *m, const double *theta,
                           double *unc, kiln_err *err)
{
    (void)m, (void)theta, (void)unc;
    return kiln_seterr(err, KILN_ERR_ARG, NOT_YET);
}

int kiln_model_unconstrain_json(const kiln_model *m, const char *json,
                                double *unc, kiln_err *err)
{
    (void)m, (void)json, (void)unc;
    return kiln_seterr(err, KILN_ERR_ARG, NOT_YET);
}

int kiln_model_log_density(const kiln_model *m, int jacobian,
                           const double *unc, double *lp, double *grad,
                           kiln_err *err)
{
    (void)m, (void)jacobian, (void)unc, (void)lp, (void)grad;
    return kiln_seterr(err, KILN_ERR_ARG, NOT_YET);
}

int kiln_model_log_density_hessian(const kiln_model *m, int jacobian,
                                   const double *unc, double *lp,
                                   double *grad, double *hessian,
                                   kiln_err *err)
{
    (void)m, (void)jacobian, (void)unc, (void)lp, (void)grad, (void)hessian;
    return kiln_seterr(err, KILN_ERR_ARG, NOT_YET);
}

int kiln_model_log_density_hvp(const kiln_model *m, int jacobian,
                               const double *unc, const double *v,
                               double *lp, double *hvp, kiln_err *err)
{
    (void)m, (void)jacobian, (void)unc, (void)v, (void)lp, (void)hvp;
    return kiln_seterr(err, KILN_ERR_ARG, NOT_YET);
}
