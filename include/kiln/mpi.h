/*
 * mpi.h — libkiln-mpi: a model's log density and gradient summed over MPI
 * ranks, each rank holding one part of the data (issue 30; docs/mpi.md).
 *
 * Built and installed only by `configure --with-mpi`; link with
 * `pkg-config --libs kiln-mpi` (libkiln-mpi, libkiln and the MPI library).
 * libkiln itself never needs MPI: this library runs kiln_model_new_partition
 * (<kiln/model.h>) on every rank, one part per rank in rank order, and
 * combines the parts with MPI_Allreduce.
 *
 * Every function taking a kiln_mpi_model is collective over the model's
 * communicator unless said otherwise: every rank calls it, in the same
 * order.  The caller initialises MPI (MPI_Init or MPI_Init_thread) and
 * finalises it after the last kiln_mpi_model_free.  No function here
 * calls MPI_Abort, abort() or exit(): a failure is a kiln_code and a
 * one-line message on every rank that sees it.
 *
 * Refined by part p30mpi: kiln_mpi_model_compiles, the model's
 * communicator/rank/size and the building blocks at the end (used by
 * `kiln run --mpi-axis`, which partitions a graph, not a model).
 *
 * Timeouts: a collective that has not completed after the model's timeout
 * (kiln_mpi_options.timeout_seconds; $KILN_MPI_TIMEOUT; default 300 s)
 * fails with KILN_ERR_RUNTIME ("mpi: no answer from every rank within
 * 300 s: a rank died or is stuck"); the caller should then MPI_Abort
 * (the CLI does).  Waits for another rank's build (compiles) have their
 * own, longer limit: $KILN_MPI_BUILD_TIMEOUT, default the larger of 3600 s
 * and the timeout.  Every timeout is from 1 to 31536000 s (a year); a
 * variable set to anything else (empty, "abc", "-5", "inf", "1e-9") is
 * KILN_ERR_ARG naming it and its value.  Collectives are non-blocking
 * (MPI_Comm_idup, MPI_Ibcast, MPI_Iallreduce) polled against that
 * deadline.
 */
#ifndef KILN_MPI_H
#define KILN_MPI_H

#include <mpi.h>

#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/io.h>
#include <kiln/model.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_mpi_model kiln_mpi_model;

typedef struct kiln_mpi_options {
    size_t struct_size;      /* sizeof(kiln_mpi_options) */
    /* the observation axis (NULL: the graph's declared axis) */
    const char *axis;
    /* seconds a collective may wait before failing, 0 or from 1 to
     * 31536000 (0: $KILN_MPI_TIMEOUT, else 300) */
    double timeout_seconds;
    /* blocks of rows per rank (docs/mpi.md "Blocks"): 0 automatic
     * (kiln_model_blocks_auto: $KILN_BLOCKS, else ~2 MiB of data rows a
     * block when the data are bound in the graph), B from 1 to 1024:
     * exactly B.
     * Added by part p30block: a struct_size without it (the offset of
     * this field) is accepted and means 0. */
    int blocks;
} kiln_mpi_options;

/* Collective over `comm` (duplicated: the model keeps its own).  Every
 * rank passes the same graph and data (checked: a digest of the graph's
 * canonical text is compared across ranks at start, and once the parts
 * are built the digest of every data value bound, whole, in the graph
 * and from `data` as parsed (kiln_model_data_digest); ranks that
 * disagree all fail with KILN_ERR_ARG naming the ranks and what
 * differs).  Rank r of R builds part r of R (kiln_model_new_partition)
 * as B blocks of rows (kiln_model_blocks_new; B from
 * kiln_mpi_options.blocks, the same on every rank).  Compiles once per
 * job: rank 0 compiles
 * first and publishes every kernel (docs/mpi.md says how), the other
 * ranks then load them and compile nothing that rank 0 compiled.
 * Errors: KILN_ERR_ARG (MPI not initialised: "mpi: MPI is not initialised
 * (call MPI_Init first)"; disagreeing ranks; bad arguments: out NULL, a
 * wrong struct_size, a timeout out of range, a bad $KILN_MPI_TIMEOUT or
 * $KILN_MPI_BUILD_TIMEOUT), the errors of kiln_model_new_partition, all
 * on the rank that had them, the others failing with "mpi: rank 2 failed:
 * <its message>"; and timeouts.  A rank passing comm MPI_COMM_NULL fails
 * at once (KILN_ERR_ARG) and cannot tell the others: they fail with the
 * timeout.  Rank 0 waits for its build, the others wait for rank 0's and
 * then build, under the build timeout (above).
 * Every model not freed when MPI_Finalize is called is stopped there, as
 * kiln_mpi_model_free would stop it (an attribute of MPI_COMM_SELF whose
 * delete callback MPI_Finalize runs first): rank 0 finalising without
 * kiln_mpi_model_free ends the other ranks' kiln_mpi_serve (returning 0);
 * the models then only refuse calls until freed. */
int kiln_mpi_model_new(MPI_Comm comm, const kiln_graph *g,
                       const char *logp_output, const char *data,
                       const kiln_mpi_options *mopt,
                       const kiln_options *opt,
                       const kiln_read_options *ropt,
                       kiln_mpi_model **out, kiln_err *err);

/* The part's model (rank-local; not collective).  Owned by mm.  When the
 * part is evaluated in blocks (kiln_mpi_options.blocks), this is its first
 * block: its parameters, constrain and unconstrain are the model's, its
 * log density and partition range the first block's only (the rank's:
 * kiln_mpi_model_blocks). */
kiln_model *kiln_mpi_model_part(const kiln_mpi_model *mm);

/* The rank's part as blocks (<kiln/model.h> "Blocks"; owned by mm):
 * kiln_model_blocks_count, kiln_model_blocks_range give the rank's block
 * count and rows.  Not collective. */
const kiln_model_blocks *kiln_mpi_model_blocks(const kiln_mpi_model *mm);

/* Collective: the whole model's log density (and, grad not NULL, its
 * gradient; kiln_model_n_unc values) at rank 0's `unc` (broadcast; the
 * other ranks' unc is ignored and may be NULL), returned on every rank.
 * Errors: kiln_model_log_density's on any rank (every rank fails with its
 * message), timeouts. */
int kiln_mpi_log_density(kiln_mpi_model *mm, int jacobian, const double *unc,
                         double *lp, double *grad, kiln_err *err);

/* Ranks other than 0: serve rank 0's kiln_mpi_log_density calls until
 * rank 0 calls kiln_mpi_model_free (then returns 0) or a collective
 * fails.  This lets a sampler run on rank 0 alone (the BridgeStan
 * library does this).  Rank 0: KILN_ERR_ARG.  No timeout while waiting
 * for the next request. */
int kiln_mpi_serve(kiln_mpi_model *mm, kiln_err *err);

/* Collective, or on rank 0 alone when the other ranks are in
 * kiln_mpi_serve (it tells them to stop).  NULL allowed.  After a
 * timeout the model is broken: free sends nothing and does not free the
 * communicator (a rank may never answer); the caller should MPI_Abort. */
void kiln_mpi_model_free(kiln_mpi_model *mm);

/* The compiles of kiln_mpi_model_new (kiln_compile_count, <kiln/kiln.h>:
 * kernels compiled with a backend whose code the disk cache can hold,
 * rank 0's tier-1 compiles it waited for included): this rank's in
 * *rank (may be NULL) and the job's, summed over the ranks at the end of
 * kiln_mpi_model_new, in *job (may be NULL).  Not collective.  With a
 * shared cache the job's count equals one process's (docs/mpi.md). */
void kiln_mpi_model_compiles(const kiln_mpi_model *mm, long long *rank,
                             long long *job);

/* The model's communicator (its own duplicate), rank and size. */
MPI_Comm kiln_mpi_model_comm(const kiln_mpi_model *mm);
int kiln_mpi_model_rank(const kiln_mpi_model *mm);
int kiln_mpi_model_size(const kiln_mpi_model *mm);

/* ---- Building blocks (kiln run --mpi-axis, the BridgeStan library) ----
 *
 * The pieces kiln_mpi_model_new is made of, for callers that partition a
 * graph themselves (kiln_graph_partition) rather than a model.  Each
 * collective one takes a timeout in seconds (kiln_mpi_timeout) and fails
 * with the timeout's KILN_ERR_RUNTIME above. */

/* `seconds` when > 0, else $KILN_MPI_TIMEOUT when it is a number from 1
 * to 31536000, else 300 (callers that must refuse a bad variable use
 * kiln_mpi_timeouts).  Not collective. */
double kiln_mpi_timeout(double seconds);

/* The timeouts a model uses: *timeout is `seconds` (0, or from 1 to
 * 31536000), or when it is 0 $KILN_MPI_TIMEOUT (unset: 300);
 * *build_timeout is $KILN_MPI_BUILD_TIMEOUT (unset: the larger of 3600
 * and *timeout).  Either pointer may be NULL.  Errors: KILN_ERR_ARG for a
 * `seconds` out of range ("mpi: timeout_seconds must be 0 (the default)
 * or from 1 to 31536000, got -1") or a variable that is not a decimal
 * number of seconds in that range ("mpi: KILN_MPI_TIMEOUT='abc' is not a
 * number of seconds from 1 to 31536000"); the outputs are then the
 * defaults.  Not collective; reads the environment. */
int kiln_mpi_timeouts(double seconds, double *timeout, double *build_timeout,
                      kiln_err *err);

/* 0 when MPI is initialised and not finalised; else KILN_ERR_ARG ("mpi:
 * MPI is not initialised (call MPI_Init first)" or "... is finalised").
 * Not collective; needs no MPI call but MPI_Initialized/MPI_Finalized. */
int kiln_mpi_check_init(kiln_err *err);

/* Collective: every rank passes its status (0, or a kiln_code with the
 * message in *mine); returns 0 on every rank when every rank passed 0.
 * Otherwise every rank returns the lowest failing rank's code with *err
 * set: that rank keeps its own message; the others get "mpi: rank R
 * failed: MESSAGE" (R the lowest failing rank).  mine may equal err. */
int kiln_mpi_agree(MPI_Comm comm, int rc, const kiln_err *mine,
                   double timeout_seconds, kiln_err *err);

/* Collective: compare `what` (bytes, len) across ranks by digest (XXH3,
 * 64 bits).  0 when every rank's equals rank 0's; else every rank fails
 * with KILN_ERR_ARG: "mpi: ranks disagree on the data: ranks 1, 3 differ
 * from rank 0" (`name` is "the data" there). */
int kiln_mpi_same(MPI_Comm comm, const char *name, const void *bytes,
                  size_t len, double timeout_seconds, kiln_err *err);

/* Collective: MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, MPI_SUM)
 * polled against the timeout.  Errors: the timeout; KILN_ERR_RUNTIME for
 * an MPI error code. */
int kiln_mpi_sum(MPI_Comm comm, void *buf, int count, MPI_Datatype type,
                 double timeout_seconds, kiln_err *err);

#ifdef __cplusplus
}
#endif

#endif
