/*
 * kiln_cli.h — commands of the kiln CLI that live in their own files.
 * Each takes the arguments after the command word and returns the exit
 * status (0 ok, 1 error, 2 usage).
 */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

/* kiln explain FILE.kg [--policy P] [--json] (tools/kiln_policy.c) */
int kiln_cli_explain(int argc, char **argv);

/* kiln policy check [FILE] (tools/kiln_policy.c) */
int kiln_cli_policy(int argc, char **argv);

/* kiln bridgestan MODEL.kg -o LIB.so [--logp NAME]
 * (tools/kiln_bridgestan.c, docs/bridgestan.md) */
int kiln_cli_bridgestan(int argc, char **argv);

/* kiln generate MODEL.kg --weights W --prompt IDS --max-new N ...
 * (tools/kiln_generate.c, docs/decoder.md) */
int kiln_cli_generate(int argc, char **argv);

/* kiln cache stats|list|verify|prune|clear (tools/kiln_cache.c) */
int kiln_cli_cache(int argc, char **argv);

/* The per-kernel table of kiln run --cache-report (tools/kiln_cache.c):
 * key prefix, backend, hit/miss, compile or load ms. */
#include <stdio.h>
#include <kiln/kiln.h>
void kiln_cli_cache_report(const kiln_function *f, FILE *out);

/* ---- tiers (tools/kiln_tiers.c) ---------------------------------------- */

/* s as a JSON string, or null when s is NULL. */
void kiln_cli_json_str(FILE *o, const char *s);

/* "fixed", "waiting", "queued", "compiling", "swapped", "failed", "never"
 * (a kiln_tier_state), or "?". */
const char *kiln_cli_tier_state_name(int state);

/* Where kernel i of f runs between tiers: kiln_function_tier_info, the
 * backend it started on, its label and fused node count; listed is 1
 * when it runs on a tier above 0 or may move to one.  0, or -1 when i is
 * out of range. */
typedef struct kiln_cli_tier {
    kiln_tier_info info;
    const char *start;
    const char *label;
    int fused_nodes;
    int listed;
} kiln_cli_tier;
int kiln_cli_kernel_tier(const kiln_function *f, int i, kiln_cli_tier *t);

/* kiln run's tier report: a line per listed kernel, or one summary line
 * when there are more than 20 of them and `all` is 0; with `all`, a line
 * also when no kernel is listed.  `baseline`: the function was compiled
 * with KILN_TIERS_BASELINE (why kernels never move).  0, or -1. */
int kiln_cli_tier_report(const kiln_function *f, FILE *out, int all,
                         int baseline);

/* kiln_function_free(f), and when a tier-1 compile of f was queued or
 * running, exit the process at once with `status` (stdio flushed) instead
 * of returning: see tools/kiln_tiers.c. */
void kiln_cli_function_free(kiln_function *f, int status);

/* The default tier line of kiln run, on `out`: "kiln: tier-up: 12
 * kernels to llvm in 0.4 s (3 from cache)", with what is still on tier 0
 * or failed; nothing when no kernel has a tier above 0. */
void kiln_cli_tier_summary(const kiln_function *f, FILE *out);

/* kiln run --tier-wait SECONDS: every kernel with a tier-1 backend is
 * compiled (kiln_function_tier_up on a thread of its own, which writes
 * the disk cache) and waited for, up to `seconds`.  0 when all are done
 * (a failed compile is reported unless quiet), 1 when time ran out (the
 * kernels still pending are listed unless quiet; compiling goes on),
 * -1 when no thread could be started. */
int kiln_cli_tier_wait(kiln_function *f, double seconds, int quiet);

/* kiln compile MODEL.kg [--data D.json] [--policy P.yaml] [--quiet]
 * (tools/kiln_compile.c): every kernel the policy sends to a compiling
 * backend compiled into the disk cache. */
int kiln_cli_compile(int argc, char **argv);

/* kiln run --json: the "tiers" array, one object per kernel.  0, or -1. */
int kiln_cli_tier_json(const kiln_function *f, FILE *out);

/* ---- kiln model and helpers for names (tools/kiln_model.c) ------------ */

#include <kiln/graph.h>
#include <kiln/io.h>

/* kiln model FILE.kg [--data D.json] [-i NAME=V]... ...: the log density
 * and gradient over the unconstrained parameters (docs/kiln.1). */
int kiln_cli_model(int argc, char **argv);

/* 0 when the backend `name` can be loaded (the loader's lines about
 * files refused on the way on stderr unless quiet); else 1 after one
 * line on stderr, quiet or not: why (not found, with the directories
 * searched, or why a file that is there was refused), the closest
 * installed name and the installed names.  For a backend the user named
 * (--backend): never a fallback. */
int kiln_cli_require_backend(const char *name, int quiet);

/* The size an integer scalar data variable named `symbol` gives that
 * symbol (Stan's `int<lower=0> J`), or -1 (d NULL, no such variable, not
 * a non-negative integer scalar). */
int64_t kiln_cli_data_symbol(const kiln_json_data *d, const char *symbol);

/* 1 after one line on stderr when a shared value of g has no value and
 * the data d has no variable for it (naming the closest variable and
 * what d has), else 0. */
int kiln_cli_data_missing(const kiln_graph *g, const kiln_json_data *d);

/* The message for -i NAME (len bytes) that is no input of f: for a
 * bounded parameter of g (may be NULL), that its input is NAME_unc and
 * the transform; else the closest input name and the inputs. */
void kiln_cli_no_input(const kiln_function *f, const kiln_graph *g,
                       const char *name, size_t len);

/* splitmix64: the next uniform double in [0, 1) of the generator whose
 * state is *state (--random-inputs SEED: the same values on every
 * machine). */
double kiln_cli_uniform(uint64_t *state);

/* Parse a -i VALUE (a number, a list [..], @file.npy, @file.csv:column)
 * for input `name` of dtype dt, rank and dims (-1 or a symbol id for a
 * symbolic dim) into *t (data malloc'd; the caller frees it).  Files are
 * read under `data`.  0, or -1 with one line on stderr (tools/kiln.c). */
int kiln_cli_parse_value(const char *name, kiln_dtype dt, int rank,
                         const int64_t *dims, const char *value,
                         const kiln_read_options *data, kiln_tensor *t);

/* Print "kiln: --data: MESSAGE" for a --data PATH that could not be read
 * or bound, with a hint when PATH names a CSV or .npy file (--data takes
 * CmdStan JSON; such files are read by the model's csv()/npy()). */
void kiln_cli_data_error(const char *path, const char *message);

/* ---- kiln run --mpi-axis (tools/kiln_mpi.c; built with --with-mpi) ------
 * start: MPI_Init (once), ranks != 0 silenced (stdout to /dev/null,
 * stderr to a temporary file); 0 or 1 with a message.  checkpoint: every
 * rank passes its status and learns whether any failed (0 all right, 1 a
 * failure; rank 0 prints another rank's message); a rank that failed
 * meets the others at their next checkpoint.  same: the
 * bytes (a file's) are the same on every rank (1 with rank 0 printing
 * which ranks differ).  sum_outputs: every output summed over the ranks in
 * place.  job_total: a number summed over the ranks.  fault: the test-only
 * $KILN_MPI_TEST_FAULT (hang:R, die:R; fault_build: slow-build:R:S, rank
 * R sleeps S seconds before it compiles).  build_checkpoint: a checkpoint
 * that waits for a rank's build, under $KILN_MPI_BUILD_TIMEOUT.  end: the
 * last checkpoint and MPI_Finalize; returns the exit status.  A timeout
 * (no answer within $KILN_MPI_TIMEOUT s) ends the job: rank 0 prints it
 * and MPI_Aborts; when rank 0 is the one that does not answer, the
 * lowest rank that timed out prints it on the real stderr (ranks r > 0
 * wait 2 r s first, time for rank 0's own abort).  start refuses a bad
 * $KILN_MPI_TIMEOUT / $KILN_MPI_BUILD_TIMEOUT (rank 0 prints why; then
 * call end). */
int kiln_cli_mpi_active(void);
int kiln_cli_mpi_rank(void);
int kiln_cli_mpi_size(void);
double kiln_cli_mpi_build_timeout(void);
int kiln_cli_mpi_start(void);
int kiln_cli_mpi_checkpoint(int status);
int kiln_cli_mpi_build_checkpoint(int status);
int kiln_cli_mpi_same(const char *name, const void *bytes, size_t len);
int kiln_cli_mpi_sum_outputs(kiln_tensor *out, int n);
long long kiln_cli_mpi_job_total(long long mine);
void kiln_cli_mpi_fault(void);
void kiln_cli_mpi_fault_build(void);
int kiln_cli_mpi_end(int status);

#endif
