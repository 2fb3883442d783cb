/*
 * bridgestan_api.h — the BridgeStan 2.x C API as kiln's model libraries
 * export it (tools/bridgestan_shim.c; docs/bridgestan.md).  The functions
 * and their contracts are BridgeStan's (github.com/roualdes/bridgestan,
 * src/bridgestan.h, BSD-3-Clause); these are kiln's own declarations of
 * that interface, for the shim (which defines them) and for the test and
 * benchmark that load a model library with dlopen (bs_api_load below).
 *
 * Conventions (BridgeStan's): functions returning int return 0 on success
 * and -1 on error; on error, when error_msg is not NULL, *error_msg is set
 * to a malloc'd message the caller frees with bs_free_error_msg.  Strings
 * returned by bs_name, bs_model_info and the *_names functions belong to
 * the model and live until bs_model_destruct.
 */
#ifndef KILN_TOOLS_BRIDGESTAN_API_H
#define KILN_TOOLS_BRIDGESTAN_API_H

#include <stdbool.h>
#include <stddef.h>

#define BS_PUBLIC __attribute__((visibility("default")))

typedef struct bs_model bs_model;
typedef struct bs_rng bs_rng;
typedef void (*STREAM_CALLBACK)(const char *data, size_t size);

/* The BridgeStan version whose API this is (not kiln's version). */
BS_PUBLIC extern const int bs_major_version;
BS_PUBLIC extern const int bs_minor_version;
BS_PUBLIC extern const int bs_patch_version;

BS_PUBLIC bs_model *bs_model_construct(const char *data, unsigned int seed,
                                       char **error_msg);
BS_PUBLIC void bs_model_destruct(bs_model *m);
BS_PUBLIC void bs_free_error_msg(char *error_msg);
BS_PUBLIC const char *bs_name(const bs_model *m);
BS_PUBLIC const char *bs_model_info(const bs_model *m);
BS_PUBLIC const char *bs_param_names(const bs_model *m, bool include_tp,
                                     bool include_gq);
BS_PUBLIC const char *bs_param_unc_names(const bs_model *m);
BS_PUBLIC int bs_param_num(const bs_model *m, bool include_tp,
                           bool include_gq);
BS_PUBLIC int bs_param_unc_num(const bs_model *m);
BS_PUBLIC int bs_param_constrain(const bs_model *m, bool include_tp,
                                 bool include_gq, const double *theta_unc,
                                 double *theta, bs_rng *rng,
                                 char **error_msg);
BS_PUBLIC int bs_param_unconstrain(const bs_model *m, const double *theta,
                                   double *theta_unc, char **error_msg);
BS_PUBLIC int bs_param_unconstrain_json(const bs_model *m, const char *json,
                                        double *theta_unc, char **error_msg);
BS_PUBLIC int bs_log_density(const bs_model *m, bool propto, bool jacobian,
                             const double *theta_unc, double *lp,
                             char **error_msg);
BS_PUBLIC int bs_log_density_gradient(const bs_model *m, bool propto,
                                      bool jacobian, const double *theta_unc,
                                      double *val, double *grad,
                                      char **error_msg);
BS_PUBLIC int bs_log_density_hessian(const bs_model *m, bool propto,
                                     bool jacobian, const double *theta_unc,
                                     double *val, double *grad,
                                     double *hessian, char **error_msg);
BS_PUBLIC int bs_log_density_hessian_vector_product(
    const bs_model *m, bool propto, bool jacobian, const double *theta_unc,
    const double *vector, double *val, double *hvp, char **error_msg);
BS_PUBLIC bs_rng *bs_rng_construct(unsigned int seed, char **error_msg);
BS_PUBLIC void bs_rng_destruct(bs_rng *rng);
BS_PUBLIC int bs_set_print_callback(STREAM_CALLBACK callback,
                                    char **error_msg);

/* ---- a model library opened with dlopen (tests, bench) ----------------
 * The functions a caller such as nutpie's Stan path resolves with dlsym,
 * and the version constants.  Needs <dlfcn.h>. */
#ifdef KILN_BS_API_LOADER
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct bs_api {
    const int *major, *minor, *patch;
    bs_model *(*model_construct)(const char *, unsigned int, char **);
    void (*model_destruct)(bs_model *);
    void (*free_error_msg)(char *);
    const char *(*name)(const bs_model *);
    const char *(*model_info)(const bs_model *);
    const char *(*param_names)(const bs_model *, bool, bool);
    const char *(*param_unc_names)(const bs_model *);
    int (*param_num)(const bs_model *, bool, bool);
    int (*param_unc_num)(const bs_model *);
    int (*param_constrain)(const bs_model *, bool, bool, const double *,
                           double *, bs_rng *, char **);
    int (*param_unconstrain)(const bs_model *, const double *, double *,
                             char **);
    int (*param_unconstrain_json)(const bs_model *, const char *, double *,
                                  char **);
    int (*log_density)(const bs_model *, bool, bool, const double *,
                       double *, char **);
    int (*log_density_gradient)(const bs_model *, bool, bool, const double *,
                                double *, double *, char **);
    int (*log_density_hessian)(const bs_model *, bool, bool, const double *,
                               double *, double *, double *, char **);
    int (*log_density_hvp)(const bs_model *, bool, bool, const double *,
                           const double *, double *, double *, char **);
    bs_rng *(*rng_construct)(unsigned int, char **);
    void (*rng_destruct)(bs_rng *);
    int (*set_print_callback)(STREAM_CALLBACK, char **);
} bs_api;

/* Resolve every symbol of the API in `handle` into *api.  0, or -1 with
 * the missing symbol's name in why. */
static inline int bs_api_load(void *handle, bs_api *api, char *why,
                              size_t why_size)
{
    static const char *const names[] = {
        "bs_major_version", "bs_minor_version", "bs_patch_version",
        "bs_model_construct", "bs_model_destruct", "bs_free_error_msg",
        "bs_name", "bs_model_info", "bs_param_names", "bs_param_unc_names",
        "bs_param_num", "bs_param_unc_num", "bs_param_constrain",
        "bs_param_unconstrain", "bs_param_unconstrain_json",
        "bs_log_density", "bs_log_density_gradient",
        "bs_log_density_hessian", "bs_log_density_hessian_vector_product",
        "bs_rng_construct", "bs_rng_destruct", "bs_set_print_callback"};
    void *sym[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        sym[i] = dlsym(handle, names[i]);
        if (!sym[i]) {
            snprintf(why, why_size, "no symbol %s", names[i]);
            return -1;
        }
    }
    /* object pointers to function pointers (POSIX dlsym): by memcpy, in
     * the struct's declaration order, which follows names[] */
    _Static_assert(sizeof(bs_api) == sizeof sym, "bs_api and names agree");
    memcpy(api, sym, sizeof sym);
    return 0;
}
#endif

#endif
