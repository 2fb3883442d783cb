/*
 * cache.h (core) — the disk cache as the compiler uses it (prefix
 * kiln_cache_).  The public half (keys, management) is in kiln/cache.h.
 *
 * One *session* per kiln_compile: it resolves the mode and directories
 * once, serves lookups and stores from any compile thread, and at the end
 * adds its counts to the cache's statistics (under a stale-safe flock)
 * and evicts when the cache is over its cap.
 */
#ifndef KILN_CORE_CACHE_H
#define KILN_CORE_CACHE_H

#include <stdio.h>
#include <kiln/backend.h>
#include <kiln/cache.h>

typedef struct kiln_cache_session kiln_cache_session;

/* Begin a session for one compile.  `mode` and `dir` as in kiln_options
 * (0 / NULL: not set); `knobs` the policy's cache knobs (may be NULL).
 * Precedence, highest first: the options, the environment ($KILN_CACHE,
 * $KILN_CACHE_DIR, $KILN_CACHE_MAX_SIZE; $KILN_CACHE_PATH is searched
 * before the policy's read-only caches), the policy, the defaults.
 * Returns NULL when the cache is off or unusable (then a one-line
 * diagnostic went to `diag` unless quiet): compiling goes on without it. */
struct kiln_policy_knobs;
kiln_cache_session *kiln_cache_session_begin(
    int mode, const char *dir, const struct kiln_policy_knobs *knobs,
    FILE *diag, int quiet);

/* Look `key` up for backend `be` with options `co`.  Returns 1 and a
 * malloc'd copy of the verified payload in *bytes and *len (the caller frees
 * it) with the compile seconds it recorded in *saved; 0 on a miss; -1
 * when an entry was found but failed verification (reported, removed
 * when it is ours; the caller compiles).  Thread-safe. */
int kiln_cache_fetch(kiln_cache_session *s, const kiln_backend *be,
                     const kiln_compile_options *co, const kiln_key *key,
                     void **bytes, size_t *len, double *saved);

/* Report that an entry fetched from the cache could not be loaded by its
 * backend (load_bytes failed): it is removed like a bad entry. */
void kiln_cache_reject(kiln_cache_session *s, const kiln_backend *be,
                       const kiln_compile_options *co, const kiln_key *key,
                       const char *why);

/* Store an artifact compiled in `seconds`.  Returns 1 when written, 0 when
 * not (read-only mode, too cheap to be worth an entry, or another writer
 * was first), -1 on an I/O error (reported once per session).
 * Thread-safe. */
int kiln_cache_store(kiln_cache_session *s, const kiln_backend *be,
                     const kiln_compile_options *co, const kiln_key *key,
                     const void *bytes, size_t len, double seconds);

/* The owner and mode check of anything kiln is about to trust (cache
 * directories and entries, plugin files and their directories): NULL when
 * `st` (from stat/fstat) is a directory (want_dir) or a regular file
 * (!want_dir), owned by the effective user — or by root when `root_ok`
 * (site caches, installed plugins) — and not writable by group or others;
 * else a static reason ("not a directory", "not a regular file", "owned by
 * another user", "writable by group or others").  Thread-safe. */
struct stat;
const char *kiln_cache_bad_owner(const struct stat *st, int want_dir,
                                 int root_ok);

/* 1 when the session compiles everything again (KILN_CACHE=recache). */
int kiln_cache_recaching(const kiln_cache_session *s);

/* End the session: update the statistics, evict over the cap (never the
 * entries this session used), free it.  NULL is allowed. */
void kiln_cache_session_end(kiln_cache_session *s);

#endif
