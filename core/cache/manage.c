/*
 * manage.c — what `kiln cache` (tools/kiln_cache.c) calls (prefix
 * kiln_cache_; cache_int.h): statistics, list, verify, prune and clear
 * of a cache directory.
 */
#define _GNU_SOURCE   /* getrandom, O_DIRECTORY etc. under -std=c11 */
#include "cache_int.h"
#include "userconfig.h"
#include "trust.h"
#include "ir.h"
#include "loader.h"
#include <kiln/policy.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- management --------------------------------------------------------- */

int kiln_cache_get_stats(kiln_cache *c, kiln_cache_stats *st, kiln_err *err)
{
    if (!c || !st)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_cache_get_stats: NULL");
    memset(st, 0, sizeof *st);
    walk_list w = {0};
    if (kiln_cache_walk(c, &w, err)) {
        kiln_cache_walk_free(&w);
        return err ? err->code : KILN_ERR_IO;
    }
    for (size_t i = 0; i < w.n; i++) {
        if (w.v[i].tmp)
            continue;
        st->entries++;
        st->bytes += w.v[i].bytes;
    }
    kiln_cache_walk_free(&w);
    st->max_bytes = c->max_bytes;
    int fd = openat(c->fd, "stats", O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                                        O_NONBLOCK);
    struct stat sst;
    if (fd >= 0 && (fstat(fd, &sst) != 0 || !S_ISREG(sst.st_mode))) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) {
        counters k;
        kiln_cache_stats_read(fd, &k);
        close(fd);
        st->hits = k.hits;
        st->misses = k.misses;
        st->writes = k.writes;
        st->bad = k.bad;
        st->saved_seconds = 1e-9 * (double)k.saved_ns;
    }
    return 0;
}

/* Split "bdir/hex2/file" and fill the parts of an entry description. */
static void describe(const char *root, const walk_item *it,
                     kiln_cache_entry *e, char *path, size_t psize,
                     char *bdir, size_t bsize)
{
    memset(e, 0, sizeof *e);
    snprintf(path, psize, "%s/%s", root, it->rel);
    const char *slash = strchr(it->rel, '/');
    size_t bl = slash ? (size_t)(slash - it->rel) : strlen(it->rel);
    snprintf(bdir, bsize, "%.*s", (int)bl, it->rel);
    const char *file = strrchr(it->rel, '/');
    file = file ? file + 1 : it->rel;
    snprintf(e->key, sizeof e->key, "%.*s", KILN_KEY_HEX, file);
    e->path = path;
    e->dir = bdir;
    e->bytes = it->bytes;
    e->mtime = it->mtime;
}

/* Is the entry consistent with the path it lies at? */
static const char *check_against_path(const entry_meta *m, const char *bdir,
                                      const char *file)
{
    char hex[KILN_KEY_HEX + 1];
    kiln_key_hex(&m->key, hex);
    if (strncmp(file, hex, KILN_KEY_HEX) != 0)
        return "entry holds another key than its name";
    size_t bl = strlen(m->backend);
    if (strncmp(bdir, m->backend, bl) != 0 || bdir[bl] != '-')
        return "entry made by another backend than its directory";
    char bh[20];
    snprintf(bh, sizeof bh, "%016llx", (unsigned long long)m->build);
    if (strncmp(bdir + bl + 1, bh, 16) != 0)
        return "entry made by another build than its directory";
    return NULL;
}

static int list_or_verify(kiln_cache *c, int full, int remove_bad,
                          int (*fn)(const kiln_cache_entry *, void *),
                          void *ctx, kiln_err *err)
{
    if (!c)
        return kiln_seterr(err, KILN_ERR_ARG, "cache: NULL");
    walk_list w = {0};
    if (kiln_cache_walk(c, &w, err)) {
        kiln_cache_walk_free(&w);
        return err ? err->code : KILN_ERR_IO;
    }
    int rc = 0;
    for (size_t i = 0; i < w.n && rc == 0; i++) {
        if (w.v[i].tmp)
            continue;
        kiln_cache_entry e;
        char path[4200], bdir[300];
        describe(c->dir, &w.v[i], &e, path, sizeof path, bdir, sizeof bdir);
        e.cache_dir = c->dir;
        const char *file = strrchr(w.v[i].rel, '/') + 1;
        char hex2[3];
        memcpy(hex2, strchr(w.v[i].rel, '/') + 1, 2);
        hex2[2] = '\0';
        read_result r;
        memset(&r, 0, sizeof r);
        if (w.v[i].odd) {
            r.why = w.v[i].odd;     /* never opened: a FIFO could block */
        } else if (full) {
            kiln_cache_read_entry(c->fd, bdir, hex2, file, c->site, 0, &r);
            if (!r.found && !r.why)
                r.why = "gone while verifying";
        } else {
            /* the header only */
            int hfd = kiln_cache_open_hex_dir(c->fd, bdir, hex2);
            int fd = hfd < 0 ? -1 : openat(hfd, file, O_RDONLY | O_NOFOLLOW |
                                                          O_CLOEXEC |
                                                          O_NONBLOCK);
            if (hfd >= 0) {
                int en = errno;
                close(hfd);
                errno = en;
            }
            struct stat st;
            if (fd < 0) {
                r.why = errno == ELOOP ? "a symlink in place of an entry"
                                       : "cannot open";
            } else if (fstat(fd, &st) != 0 ||
                       (r.why = kiln_trust_stat(&st, 0, c->site)) != NULL) {
                if (!r.why)
                    r.why = "cannot stat";
            } else if ((r.file = malloc(HDR)) != NULL) {
                ssize_t n = pread(fd, r.file, HDR, 0);
                r.len = n > 0 ? (size_t)n : 0;
            }
            if (fd >= 0)
                close(fd);
        }
        const char *why = r.why;
        entry_meta m;
        if (!why && !r.file)
            why = "out of memory";
        if (!why)
            why = full ? kiln_cache_verify_entry(r.file, r.len, NULL)
                       : kiln_cache_parse_header(r.file, r.len, &m);
        if (!why && full)
            kiln_cache_parse_header(r.file, r.len, &m);
        if (!why)
            why = check_against_path(&m, bdir, file);
        if (!why) {
            snprintf(e.backend, sizeof e.backend, "%s", m.backend);
            e.compile_seconds = 1e-9 * (double)m.compile_ns;
        }
        free(r.file);
        e.ok = why == NULL;
        e.problem = why;
        if (why && remove_bad) {
            if (c->site)
                e.not_removed = "a read-only cache: kiln never removes "
                                "from it";
            else if (kiln_cache_remove_entry(c->fd, bdir, hex2, file, &e.not_removed))
                e.removed = 1;
        }
        if (fn)
            rc = fn(&e, ctx);
    }
    kiln_cache_walk_free(&w);
    return rc;
}

int kiln_cache_list(kiln_cache *c,
                    int (*fn)(const kiln_cache_entry *e, void *ctx),
                    void *ctx, kiln_err *err)
{
    return list_or_verify(c, 0, 0, fn, ctx, err);
}

int kiln_cache_verify(kiln_cache *c, int remove_bad,
                      int (*fn)(const kiln_cache_entry *e, void *ctx),
                      void *ctx, kiln_err *err)
{
    return list_or_verify(c, 1, remove_bad, fn, ctx, err);
}

static int refuse_site(const kiln_cache *c, const char *what, kiln_err *err)
{
    return kiln_seterr(err, KILN_ERR_IO, "cache: %s: %s is a read-only "
                       "cache; kiln never removes from it", what, c->dir);
}

int kiln_cache_prune(kiln_cache *c, uint64_t max_bytes, uint64_t *removed,
                     kiln_err *err)
{
    if (removed)
        *removed = 0;
    if (!c)
        return kiln_seterr(err, KILN_ERR_ARG, "cache: NULL");
    if (c->site)
        return refuse_site(c, "prune", err);
    int fd = kiln_cache_stats_lock(c);
    uint64_t n = 0;
    not_done nd = {0};
    uint64_t left = kiln_cache_evict(c, max_bytes ? max_bytes : c->max_bytes, NULL, 0,
                          &n, &nd, err);
    if (removed)
        *removed = n;
    if (fd >= 0) {
        counters k;
        if (left != UINT64_MAX && kiln_cache_stats_read(fd, &k)) {
            k.bytes = left;
            k.bytes_known = 1;
            kiln_cache_stats_write(fd, &k);
        }
        close(fd);
    }
    if (left == UINT64_MAX)
        return err ? err->code : KILN_ERR_IO;
    return nd.n ? kiln_cache_not_done_error(&nd, "prune", n, err) : 0;
}

int kiln_cache_clear(kiln_cache *c, uint64_t *removed, kiln_err *err)
{
    if (removed)
        *removed = 0;
    if (!c)
        return kiln_seterr(err, KILN_ERR_ARG, "cache: NULL");
    if (c->site)
        return refuse_site(c, "clear", err);
    int fd = kiln_cache_stats_lock(c);
    walk_list w = {0};
    not_done nd = {0};
    uint64_t n = 0;
    int rc = kiln_cache_walk(c, &w, err);
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", c->dir, w.v[i].rel);
        const char *why = NULL;
        if (kiln_cache_remove_rel(c->fd, w.v[i].rel, &why))
            n += !w.v[i].tmp;
        else
            kiln_cache_not_done_add(&nd, path, why);
    }
    kiln_cache_walk_free(&w);
    if (removed)
        *removed = n;
    if (fd >= 0) {
        counters k;
        if (rc == 0 && kiln_cache_stats_read(fd, &k)) {
            memset(&k, 0, sizeof k);
            k.bytes_known = nd.n == 0;
            kiln_cache_stats_write(fd, &k);
        }
        close(fd);
    }
    if (rc)
        return rc;
    return nd.n ? kiln_cache_not_done_error(&nd, "clear", n, err) : 0;
}
