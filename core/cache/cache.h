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
 * diagnostic went to `diag` unless quiet): compiling goes on without it;
 * NULL with err->code set (KILN_ERR_ARG) when $KILN_CACHE or
 * $KILN_CACHE_MIN_COMPILE_MS holds a value that means nothing: the caller
 * fails.  Diagnostics during the session are collected and printed at its
 * end, one line per cause with a count. */
struct kiln_policy_knobs;
kiln_cache_session *kiln_cache_session_begin(
    int mode, const char *dir, const struct kiln_policy_knobs *knobs,
    FILE *diag, int quiet, kiln_err *err);

/* Look `key` up for backend `be` with options `co`.  Returns 1 and a
 * malloc'd copy of the verified payload in *bytes and *len (the caller frees
 * it) with the compile CPU seconds it recorded in *saved; 0 on a miss; -1
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

/* Add `seconds` to the session's saved compile time: a fetched entry was
 * loaded and spared a compile of (recorded cost - loading time).
 * Thread-safe. */
void kiln_cache_note_saved(kiln_cache_session *s, double seconds);

/* Store an artifact whose compile cost `seconds` of CPU time.  Returns 1
 * when written, 0 when not (read-only mode, below
 * $KILN_CACHE_MIN_COMPILE_MS, or another writer was first), -1 on an I/O
 * error (reported once per cause).  When it returns other than 1,
 * *why_not (may be NULL) is set to static text saying why, or NULL.
 * Thread-safe. */
int kiln_cache_store(kiln_cache_session *s, const kiln_backend *be,
                     const kiln_compile_options *co, const kiln_key *key,
                     const void *bytes, size_t len, double seconds,
                     const char **why_not);

/* 0 when no cache of the session (user or read-only) has an entry
 * directory for backend `name` ("NAME-BUILD-TARGET-OPTIONS"), so that a
 * lookup would miss: the caller need not load the backend to look.  1
 * when one may (or the directories cannot be read).  One readdir per
 * cache; thread-safe. */
int kiln_cache_may_have(kiln_cache_session *s, const char *name);

/* 1 when the session compiles everything again (KILN_CACHE=recache). */
int kiln_cache_recaching(const kiln_cache_session *s);

/* End the session: update the statistics, evict over the cap (never the
 * entries this session used), free it.  NULL is allowed. */
void kiln_cache_session_end(kiln_cache_session *s);

#endif
