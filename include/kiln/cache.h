/*
 * cache.h — backend-neutral cache keys and the persistent kernel cache.
 *
 * Every kernel kiln compiles has a *key*: a 128-bit hash of a canonical
 * byte serialisation of its backend-neutral description (kiln_kernel in
 * kiln/backend.h), preceded by a key-format version byte.  The key
 * depends on the kernel's structure only — kind, dtypes and ranks of its
 * arguments, the scalar program with its wiring and the values of its
 * small constants, reduction op and axes, the axis and mode of data
 * movement kernels — never on names, addresses, counters, timestamps or
 * the process.  The same node in two models, or in two runs, has the same
 * key; the backend, its build, the target CPU and the compile options
 * select the artifact *under* a key (docs/cache.md).
 *
 * The disk cache stores one artifact per (backend, backend build, target,
 * key, options) in one file, written atomically and verified before use.
 * Its location is $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
 * ~/.cache/kiln; $KILN_CACHE_PATH lists read-only site caches searched
 * after it; $KILN_CACHE=on|off|read-only|recache (also 1/0, yes/no,
 * true/false, any case) sets the mode.
 */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <kiln/kiln.h>
#include <kiln/backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- keys (core/cache/cachekey.c) ------------------------------------------ */

/* Version of the canonical serialisation; the first byte of every key.
 * Bumped on purpose whenever the serialisation changes. */
#define KILN_KEY_FORMAT 1
#define KILN_KEY_BYTES 17          /* format byte + XXH3-128, big-endian */
#define KILN_KEY_HEX 34            /* characters of kiln_key_hex */

typedef struct kiln_key {
    uint8_t b[KILN_KEY_BYTES];
} kiln_key;

/* The canonical bytes of kernel `k` (docs/cache.md lists the fields and
 * their order; all integers little-endian).  Writes at most `size` bytes
 * into `buf` (may be NULL when size is 0) and returns the full length in
 * bytes, or 0 when `k` is NULL or malformed (struct_size too small, NULL
 * arrays for nonzero counts, an unknown kind). */
size_t kiln_key_canonical(const kiln_kernel *k, uint8_t *buf, size_t size);

/* The key of kernel `k`: KILN_KEY_FORMAT followed by the XXH3-128 hash
 * (xxHash 0.8, Y. Collet; canonical big-endian form) of its canonical
 * bytes.  Returns 0, or KILN_ERR_ARG (NULL or malformed kernel) /
 * KILN_ERR_NOMEM with err set. */
int kiln_key_of_kernel(const kiln_kernel *k, kiln_key *key, kiln_err *err);

/* The key as KILN_KEY_HEX lower-case hex digits plus a NUL in `hex`. */
void kiln_key_hex(const kiln_key *key, char hex[KILN_KEY_HEX + 1]);

/* The key of kernel `i` of a compiled function (0-based, run order).
 * Returns 0, or -1 when f is NULL or i is out of range. */
int kiln_function_kernel_key(const kiln_function *f, int i, kiln_key *key);

/* ---- per-kernel compile report (kiln run --cache-report) -------------- */

typedef enum kiln_cache_result {
    KILN_CACHE_NONE = 0,   /* the cache was not consulted (off, or the
                              backend makes no storable artifacts) */
    KILN_CACHE_HIT,        /* loaded from an entry */
    KILN_CACHE_MISS,       /* compiled; written unless the report's note
                              says why not */
    KILN_CACHE_BAD,        /* an entry failed verification: reported,
                              removed when ours, compiled again */
    KILN_CACHE_SHARED      /* an identical kernel earlier in the same
                              function was compiled: its code is shared */
} kiln_cache_result;

typedef struct kiln_kernel_report {
    size_t struct_size;
    const char *backend;       /* owned by f */
    const char *label;         /* "add", "fused", ...; owned by f */
    kiln_key key;
    int cache;                 /* kiln_cache_result */
    int written;               /* 1 when this compile wrote an entry */
    double compile_seconds;    /* compiling (MISS) or loading (HIT); 0 for
                                  SHARED; wall-clock seconds */
    double saved_seconds;      /* HIT: CPU seconds compiling would have
                                  cost (the compile CPU time the entry
                                  recorded) minus the loading time, at
                                  least 0; 0 otherwise */
    /* why this kernel was not stored (MISS with written 0) or the cache
     * was not consulted (NONE): "KILN_CACHE=read-only", "the cache is
     * off", "the backend makes no storable artifacts", ...; NULL when
     * there is nothing to say.  Static text; only filled when
     * struct_size covers it. */
    const char *note;
} kiln_kernel_report;

/* What happened to kernel `i` when f was compiled.  rep->struct_size must
 * be set by the caller (at least up to saved_seconds; `note` is filled
 * when it is covered).  Returns 0, or -1 when an argument is NULL or i is
 * out of range.  Thread-safe with other readers of f. */
int kiln_function_kernel_report(const kiln_function *f, int i,
                                kiln_kernel_report *rep);

/* ---- the disk cache (core/cache/store.c) ------------------------------------- */

typedef enum kiln_cache_mode {
    KILN_CACHE_MODE_DEFAULT = 0,  /* $KILN_CACHE, else on */
    KILN_CACHE_MODE_ON,           /* read and write */
    KILN_CACHE_MODE_OFF,          /* neither */
    KILN_CACHE_MODE_READ_ONLY,    /* read, never write */
    KILN_CACHE_MODE_RECACHE       /* compile everything, overwrite */
} kiln_cache_mode;

/* Default size cap: 1 GiB ($KILN_CACHE_MAX_SIZE overrides, e.g. "512M"). */
#define KILN_CACHE_DEFAULT_MAX ((uint64_t)1 << 30)

typedef struct kiln_cache kiln_cache;

/* Open the user cache at `dir` (NULL: $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln
 * or ~/.cache/kiln), creating it with mode 0700 when `create` is 1.  The
 * directory must be owned by the user and not writable by group or others,
 * and every directory above it (and any symlink's directory on the way)
 * owned by root or the user and not writable by group or others unless
 * sticky (docs/cache.md, "Who is trusted for what").  The directory is
 * opened once, here; the handle keeps its descriptor and every later
 * operation works below it, whatever happens to the path.
 * Errors: KILN_ERR_IO (cannot create, no home directory, not a directory),
 * wrong owner or permissions of it or of an ancestor (KILN_ERR_IO too; the
 * message names the path and the directory at fault), KILN_ERR_NOMEM.
 * Holds one file descriptor until kiln_cache_close.  Free with
 * kiln_cache_close. */
kiln_cache *kiln_cache_open(const char *dir, int create, kiln_err *err);

/* Open a read-only (site) cache at `dir`, an absolute path, which must
 * exist, be a directory owned by the user or root and not writable by
 * group or others, below directories that pass the same ancestor check as
 * kiln_cache_open's.  Entries are checked with the same rules (user or
 * root).
 * kiln_cache_list and kiln_cache_verify work on it (verify never removes
 * anything from it); kiln_cache_prune and kiln_cache_clear refuse it with
 * KILN_ERR_IO.  Errors: KILN_ERR_ARG (dir NULL or ""), KILN_ERR_IO (a
 * relative path; the message names the path and why), KILN_ERR_NOMEM.
 * Free with kiln_cache_close. */
kiln_cache *kiln_cache_open_read_only(const char *dir, kiln_err *err);

/* 1 when c was opened with kiln_cache_open_read_only, else 0. */
int kiln_cache_is_read_only(const kiln_cache *c);

/* The read-only caches configured for this process, in search order: the
 * absolute elements of $KILN_CACHE_PATH (colon-separated; a relative one
 * is skipped with one line on stderr), then cache.read_only of the user's
 * and the site's configuration files (docs/cache.md; a refused file is
 * reported on stderr).  Returns a malloc'd NULL-terminated array of
 * malloc'd strings (empty when none are configured), or NULL when out of
 * memory; free with kiln_cache_free_dirs.  The compiler searches exactly
 * these and `kiln cache verify` checks them; a policy never adds any. */
char **kiln_cache_read_only_dirs(void);
void kiln_cache_free_dirs(char **dirs);

/* The mode a $KILN_CACHE value names: "on", "1", "yes", "true" (or empty:
 * KILN_CACHE_MODE_ON); "off", "0", "no", "false"; "read-only" (or
 * "readonly"); "recache" — in any case.  Returns the kiln_cache_mode, or
 * -1 for anything else (kiln_compile then fails with KILN_ERR_ARG). */
int kiln_cache_parse_mode(const char *value);

void kiln_cache_close(kiln_cache *c);

/* The directory (owned by c). */
const char *kiln_cache_dir(const kiln_cache *c);

typedef struct kiln_cache_stats {
    uint64_t entries;          /* artifact files */
    uint64_t bytes;            /* their total size on disk, bytes */
    uint64_t max_bytes;        /* the size cap in force */
    uint64_t hits, misses;     /* counted by every process since clear */
    uint64_t writes;           /* entries written */
    uint64_t bad;              /* entries that failed verification */
    double saved_seconds;      /* CPU seconds of compiling the hits
                                  avoided, net of loading (see
                                  kiln_kernel_report.saved_seconds),
                                  summed over every process */
} kiln_cache_stats;

/* Scan the cache and read its counters.  Errors: KILN_ERR_IO. */
int kiln_cache_get_stats(kiln_cache *c, kiln_cache_stats *st, kiln_err *err);

typedef struct kiln_cache_entry {
    const char *path;          /* the file */
    const char *dir;           /* its backend-build-target directory name */
    char key[KILN_KEY_HEX + 1];
    char backend[24];
    uint64_t bytes;            /* file size */
    double compile_seconds;    /* as recorded when it was written */
    int64_t mtime;             /* last use, seconds since the epoch */
    int ok;                    /* 1 when it verifies (kiln_cache_verify) */
    const char *problem;       /* why not, or NULL */
    const char *cache_dir;     /* the cache directory holding it */
    int removed;               /* verify with remove_bad: 1 when removed */
    const char *not_removed;   /* verify with remove_bad, bad and still
                                  there: why (read-only cache, owned by
                                  another user, EACCES, a directory that
                                  is not empty) */
} kiln_cache_entry;

/* Call `fn` for every entry (order unspecified); a nonzero return stops
 * the walk and is returned.  Something else carrying an entry's name (a
 * FIFO, a directory, a socket) is listed too, as not ok, and is never
 * opened.  kiln_cache_list does not read payloads (ok is 1 when the
 * header is valid); kiln_cache_verify checks every entry completely and,
 * when `remove_bad` is 1, tries to remove those that fail (never in a
 * read-only cache): e->removed and e->not_removed say what happened.
 * The strings of `e` live until fn returns.  Errors: KILN_ERR_IO.
 * Returns 0, fn's nonzero value, or the error. */
int kiln_cache_list(kiln_cache *c,
                    int (*fn)(const kiln_cache_entry *e, void *ctx),
                    void *ctx, kiln_err *err);
int kiln_cache_verify(kiln_cache *c, int remove_bad,
                      int (*fn)(const kiln_cache_entry *e, void *ctx),
                      void *ctx, kiln_err *err);

/* Remove least-recently-used entries until the cache holds at most
 * `max_bytes` (0: the configured cap), plus temporary files of writers
 * that died more than an hour ago.  *removed (may be NULL) receives the
 * number of entries removed.  An entry in use by a running process stays
 * valid for it: kernels are loaded from a copy in memory, never mapped
 * from the file.  Errors: KILN_ERR_IO when the cache cannot be read, is
 * read-only (kiln_cache_open_read_only), or an entry it meant to remove
 * could not be removed (the message gives the counts, the first such path
 * and why; *removed still counts what was removed). */
int kiln_cache_prune(kiln_cache *c, uint64_t max_bytes, uint64_t *removed,
                     kiln_err *err);

/* Remove every entry (and anything else carrying an entry's name: a FIFO,
 * an empty directory) and reset the counters.  *removed (may be NULL)
 * receives the number removed.  Errors: KILN_ERR_IO as for
 * kiln_cache_prune (a directory that is not empty is never removed: it is
 * reported). */
int kiln_cache_clear(kiln_cache *c, uint64_t *removed, kiln_err *err);

/* Parse a size such as "1G", "512M", "4096", "1.5GiB" into bytes.
 * Returns 0, or -1 when it is not a size. */
int kiln_cache_parse_size(const char *s, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
