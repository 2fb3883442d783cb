/*
 * cache_int.h — what the files of the disk cache share (core/cache/,
 * prefix kiln_cache_): the cache and session structs, the entry header,
 * the statistics file and the walk of the tree.  store.c opens caches and
 * reads and writes entries in sessions; evict.c keeps the statistics and
 * evicts at a session's end; manage.c is what `kiln cache` calls (stats,
 * list, verify, prune, clear).  The layout and entry format are described
 * at the top of store.c and in docs/cache.md.
 */
#ifndef KILN_CACHE_INT_H
#define KILN_CACHE_INT_H

#include "cache.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#define HDR 128
#define MAGIC "KILNART"          /* 8 bytes with the NUL */
#define ENTRY_FORMAT 1u
#define MAX_ENTRY ((size_t)1 << 30)
#define TOUCH_AFTER 60           /* seconds: refresh an entry's LRU time */
#define STALE_TMP 3600           /* seconds: a dead writer's .tmp file */

struct kiln_cache {
    char *dir;
    int fd;                      /* the checked root, opened once */
    uint64_t max_bytes;
    int site;                    /* a read-only cache: never written to */
};

/* A diagnostic said once per cause: the first message, and how many more
 * times the same cause (`group`) came up in this session. */
typedef struct cause {
    char *group;
    char *first;
    int n;
} cause;

struct kiln_cache_session {
    kiln_cache *user;            /* NULL: no writable user cache */
    kiln_cache **site;           /* read-only caches */
    int n_site;
    int mode;
    double min_seconds;          /* compiles cheaper than this: no entry */
    FILE *diag;
    int quiet;
    pthread_mutex_t lock;
    uint64_t hits, misses, writes, bad, bytes_written;
    double saved;
    char **used;                 /* relative paths used: not evicted */
    int n_used, cap_used;
    cause *causes;               /* diagnostics, printed at the end */
    int n_causes;
};

typedef struct entry_meta {
    kiln_key key;
    int opt_level, fast_math, generic;
    char backend[24];
    uint64_t build, payload, compile_ns;
} entry_meta;

typedef struct read_result {
    uint8_t *file;       /* malloc'd */
    size_t len;
    const char *why;     /* refused or corrupt: reason */
    int found;
    int level;           /* where why applies: 0 root, 1 backend dir,
                            2 hex dir, 3 the entry */
    int64_t mtime;
} read_result;

typedef struct counters {
    uint64_t hits, misses, writes, bad, saved_ns, bytes;
    int bytes_known;
} counters;

typedef struct walk_item {
    char *rel;           /* bdir/hex2/file */
    uint64_t bytes;
    int64_t mtime;
    int tmp;             /* a writer's temporary file */
    const char *odd;     /* not a file: what it is ("a FIFO", ...) */
} walk_item;

typedef struct walk_list {
    walk_item *v;
    size_t n, cap;
} walk_list;

/* What a removal pass did not do: how many it could not remove, the
 * first of them and why. */
typedef struct not_done {
    uint64_t n;
    char path[4200];
    const char *why;
} not_done;

/* The backend/build/target directory and the entry's file name. */
void kiln_cache_entry_names(const kiln_backend *be,
                            const kiln_compile_options *co,
                            const kiln_key *key, char *bdir, size_t bsize,
                            char *hex2, char *file, size_t fsize);

/* Parse and check the fixed part of a header (no checksum). */
const char *kiln_cache_parse_header(const uint8_t *h, size_t len,
                                    entry_meta *m);

/* Check a whole entry read into memory against what the caller expects
 * (exp: NULL to check only self-consistency). */
const char *kiln_cache_verify_entry(uint8_t *file, size_t len,
                                    const entry_meta *exp);

/* Read ROOT/bdir/hex2/file completely, checking every level below the
 * root (open at rfd, checked when the cache was opened). */
void kiln_cache_read_entry(int rfd, const char *bdir, const char *hex2,
                           const char *file, int site, int touch,
                           read_result *r);

/* The directory ROOT/bdir/hex2 below the root open at rfd (no symlinks
 * followed), or -1. */
int kiln_cache_open_hex_dir(int rfd, const char *bdir, const char *hex2);

/* Remove the entry ROOT/bdir/hex2/file (no symlinks followed): 0, or -1
 * with the reason in *why. */
int kiln_cache_remove_entry(int rfd, const char *bdir, const char *hex2,
                            const char *file, const char **why);

/* The same for a walk's "bdir/hex2/file". */
int kiln_cache_remove_rel(int rfd, const char *rel, const char **why);

/* Print the recorded diagnostics, one line per cause. */
void kiln_cache_say_all(kiln_cache_session *s);

/* A DIR stream over the directory open at `at` (which stays open), or
 * NULL. */
DIR *kiln_cache_dir_stream(int at, const char *name);

/* ROOT/stats, opened and locked (flock: released if the process dies). */
int kiln_cache_stats_lock(const kiln_cache *c);

/* Returns 1 when the file is ours (empty, or holding our counters). */
int kiln_cache_stats_read(int fd, counters *c);

/* Write the counters over the locked stats file fd. */
void kiln_cache_stats_write(int fd, const counters *c);

/* Free a walk's list. */
void kiln_cache_walk_free(walk_list *w);

/* Every entry and temporary file of kiln's naming two levels below the
 * backend directories, and whatever else (a FIFO, a directory) carries an
 * entry's name there; things of other names are never listed, so clear,
 * prune and verify --remove cannot delete anything kiln did not make even
 * when pointed at the wrong directory. */
int kiln_cache_walk(const kiln_cache *c, walk_list *w, kiln_err *err);

/* Note a path a pass could not remove, and why (the first few kept). */
void kiln_cache_not_done_add(not_done *nd, const char *path, const char *why);

/* The error of a pass that left `nd->n` things in place. */
int kiln_cache_not_done_error(const not_done *nd, const char *what,
                              uint64_t removed, kiln_err *err);

/* Evict down to `target` bytes (oldest first, never `used`); stale temp
 * files go too.  Returns the bytes left; *removed counts entries, *nd
 * (may be NULL) those that could not be removed. */
uint64_t kiln_cache_evict(const kiln_cache *c, uint64_t target, char **used,
                          int n_used, uint64_t *removed, not_done *nd,
                          kiln_err *err);

#endif
