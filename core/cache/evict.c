/*
 * evict.c — the cache's statistics file and eviction (prefix kiln_cache_;
 * cache_int.h): counters updated under flock on ROOT/stats, the walk of
 * the tree, least-recently-used eviction down to the size limit, and the
 * end of a session, which does both.
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

/* ---- statistics --------------------------------------------------------- */


/* ROOT/stats, opened and locked (flock: released if the process dies). */
int kiln_cache_stats_lock(const kiln_cache *c)
{
    int fd = openat(c->fd, "stats", O_RDWR | O_CREAT | O_NOFOLLOW |
                                        O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || kiln_trust_stat(&st, 0, 0) ||
        flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Returns 1 when the file is ours (empty, or holding our counters). */
int kiln_cache_stats_read(int fd, counters *c)
{
    memset(c, 0, sizeof *c);
    char buf[1024];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return n == 0;
    int known = 0;
    buf[n] = '\0';
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char name[32];
        unsigned long long v;
        if (sscanf(line, "%31s %llu", name, &v) != 2)
            continue;
        known++;
        if (!strcmp(name, "hits")) c->hits = v;
        else if (!strcmp(name, "misses")) c->misses = v;
        else if (!strcmp(name, "writes")) c->writes = v;
        else if (!strcmp(name, "bad")) c->bad = v;
        else if (!strcmp(name, "saved_ns")) c->saved_ns = v;
        else if (!strcmp(name, "bytes")) { c->bytes = v; c->bytes_known = 1; }
        else known--;
    }
    /* a count no cache reaches (a hand-edited or damaged file): measure */
    if (c->bytes_known && c->bytes > (uint64_t)1 << 50)
        c->bytes_known = 0;
    return known > 0;
}

void kiln_cache_stats_write(int fd, const counters *c)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "hits %llu\nmisses %llu\nwrites %llu\nbad %llu\n"
                     "saved_ns %llu\n",
                     (unsigned long long)c->hits,
                     (unsigned long long)c->misses,
                     (unsigned long long)c->writes,
                     (unsigned long long)c->bad,
                     (unsigned long long)c->saved_ns);
    if (c->bytes_known && n > 0 && (size_t)n < sizeof buf)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "bytes %llu\n",
                      (unsigned long long)c->bytes);
    if (n > 0 && ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)n, 0) < 0)
        return;
}

/* ---- walking the tree --------------------------------------------------- */



void kiln_cache_walk_free(walk_list *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].rel);
    free(w->v);
    w->v = NULL;
    w->n = w->cap = 0;
}

static int walk_add(walk_list *w, const char *rel, const struct stat *st,
                    int tmp, const char *odd)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 256;
        walk_item *v = realloc(w->v, sizeof *v * cap);
        if (!v)
            return -1;
        w->v = v;
        w->cap = cap;
    }
    char *r = strdup(rel);
    if (!r)
        return -1;
    w->v[w->n++] = (walk_item){r, odd ? 0 : (uint64_t)st->st_size,
                               (int64_t)st->st_mtime, tmp, odd};
    return 0;
}

static int is_hex(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return 1;
}

/* BACKEND-BUILD-TARGET as entry_names makes it. */
static int kiln_bdir(const char *n)
{
    const char *d = strchr(n, '-');
    if (!d || d == n || strlen(d) < 19 || !is_hex(d + 1, 16) || d[17] != '-'
        || !d[18])
        return 0;
    for (const char *c = n; c < d; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return 0;
    return 1;
}

/* KEY-O<level>[f][g], or a writer's .tmp.HOST.PID.RANDOM: 1 for an
 * entry, 2 for a temporary file, 0 for anything else (never touched). */
static int kiln_file(const char *n)
{
    if (!strncmp(n, ".tmp.", 5)) {
        size_t l = strlen(n);
        return l > 22 && n[l - 17] == '.' && is_hex(n + l - 16, 16) ? 2 : 0;
    }
    if (strlen(n) < KILN_KEY_HEX + 3 || !is_hex(n, KILN_KEY_HEX) ||
        n[KILN_KEY_HEX] != '-' || n[KILN_KEY_HEX + 1] != 'O' ||
        n[KILN_KEY_HEX + 2] < '0' || n[KILN_KEY_HEX + 2] > '9')
        return 0;
    const char *t = n + KILN_KEY_HEX + 3;
    if (*t == 'f')
        t++;
    if (*t == 'g')
        t++;
    return *t ? 0 : 1;
}

/* What a thing of an entry's name that is no file is, or NULL. */
static const char *odd_kind(const struct stat *st)
{
    if (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode))
        return NULL;
    return S_ISDIR(st->st_mode)    ? "a directory in place of an entry"
           : S_ISFIFO(st->st_mode) ? "a FIFO in place of an entry"
           : S_ISSOCK(st->st_mode) ? "a socket in place of an entry"
                                   : "a device in place of an entry";
}

/* Every entry and temporary file of kiln's naming two levels below the
 * backend directories, and whatever else (a FIFO, a directory) carries an
 * entry's name there; things of other names are never listed, so clear,
 * prune and verify --remove cannot delete anything kiln did not make even
 * when pointed at the wrong directory. */
int kiln_cache_walk(const kiln_cache *c, walk_list *w, kiln_err *err)
{
    /* every level through openat from the checked root, no symlinks */
    DIR *d = kiln_cache_dir_stream(c->fd, ".");
    if (!d)
        return kiln_seterr(err, KILN_ERR_IO, "cache: %s: %s", c->dir,
                           strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!kiln_bdir(e->d_name))
            continue;
        struct stat st;
        DIR *d1 = kiln_cache_dir_stream(dirfd(d), e->d_name);
        if (!d1)
            continue;
        struct dirent *e1;
        while ((e1 = readdir(d1))) {
            if (strlen(e1->d_name) != 2 || !isxdigit((unsigned char)
                                                        e1->d_name[0]) ||
                !isxdigit((unsigned char)e1->d_name[1]))
                continue;
            DIR *d2 = kiln_cache_dir_stream(dirfd(d1), e1->d_name);
            if (!d2)
                continue;
            struct dirent *e2;
            while ((e2 = readdir(d2))) {
                int kind = kiln_file(e2->d_name);
                if (!kind)
                    continue;
                char rel[900];
                if (fstatat(dirfd(d2), e2->d_name, &st,
                            AT_SYMLINK_NOFOLLOW) != 0)
                    continue;
                const char *odd = odd_kind(&st);
                if (odd && kind == 2)
                    continue;       /* only writers' own files are temps */
                snprintf(rel, sizeof rel, "%s/%s/%s", e->d_name, e1->d_name,
                         e2->d_name);
                if (walk_add(w, rel, &st, kind == 2, odd)) {
                    closedir(d2);
                    closedir(d1);
                    closedir(d);
                    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
                }
            }
            closedir(d2);
        }
        closedir(d1);
    }
    closedir(d);
    return 0;
}

static int by_mtime(const void *a, const void *b)
{
    const walk_item *x = a, *y = b;
    if (x->mtime != y->mtime)
        return x->mtime < y->mtime ? -1 : 1;
    return strcmp(x->rel, y->rel);
}

static int is_used(char **used, int n, const char *rel)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(used[i], rel))
            return 1;
    return 0;
}


void kiln_cache_not_done_add(not_done *nd, const char *path, const char *why)
{
    if (nd->n++ == 0) {
        snprintf(nd->path, sizeof nd->path, "%s", path);
        nd->why = why;
    }
}

/* The error of a pass that left `nd->n` things in place. */
int kiln_cache_not_done_error(const not_done *nd, const char *what,
                          uint64_t removed, kiln_err *err)
{
    return kiln_seterr(err, KILN_ERR_IO, "cache: %s: removed %llu, could "
                       "not remove %llu: %s: %s", what,
                       (unsigned long long)removed,
                       (unsigned long long)nd->n, nd->path,
                       nd->why ? nd->why : "unknown error");
}

/* Evict down to `target` bytes (oldest first, never `used`); stale temp
 * files go too.  Returns the bytes left; *removed counts entries, *nd
 * (may be NULL) those that could not be removed. */
uint64_t kiln_cache_evict(const kiln_cache *c, uint64_t target, char **used,
                      int n_used, uint64_t *removed, not_done *nd,
                      kiln_err *err)
{
    walk_list w = {0};
    if (removed)
        *removed = 0;
    if (kiln_cache_walk(c, &w, err)) {
        kiln_cache_walk_free(&w);
        return UINT64_MAX;
    }
    if (w.n > 1)
        qsort(w.v, w.n, sizeof *w.v, by_mtime);
    uint64_t total = 0;
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; i < w.n; i++)
        total += w.v[i].bytes;
    for (size_t i = 0; i < w.n; i++) {
        walk_item *it = &w.v[i];
        int stale_tmp = it->tmp && now - it->mtime > STALE_TMP;
        if (it->odd || (!stale_tmp && (it->tmp || total <= target ||
                                       is_used(used, n_used, it->rel))))
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", c->dir, it->rel);
        const char *why = NULL;
        if (kiln_cache_remove_rel(c->fd, it->rel, &why)) {
            total -= it->bytes;
            if (removed && !it->tmp)
                (*removed)++;
        } else if (nd) {
            kiln_cache_not_done_add(nd, path, why);
        }
    }
    kiln_cache_walk_free(&w);
    return total;
}

void kiln_cache_session_end(kiln_cache_session *s)
{
    if (!s)
        return;
    if (s->user && s->mode != KILN_CACHE_MODE_READ_ONLY) {
        int fd = kiln_cache_stats_lock(s->user);
        counters c;
        if (fd >= 0 && !kiln_cache_stats_read(fd, &c)) {
            close(fd);          /* not our counter file: leave it alone */
            fd = -1;
        }
        if (fd < 0 && s->writes > 0) {
            /* no usable ROOT/stats (a directory, a symlink, someone
             * else's file): keep the cap by measuring instead */
            if (!s->quiet)
                fprintf(s->diag ? s->diag : stderr, "kiln: cache: %s/stats "
                        "is not a kiln counter file; the cache is measured "
                        "instead and its counters are not kept\n",
                        s->user->dir);
            kiln_cache_evict(s->user, s->user->max_bytes, s->used, s->n_used, NULL,
                  NULL, NULL);
        }
        if (fd >= 0) {
            c.hits += s->hits;
            c.misses += s->misses;
            c.writes += s->writes;
            c.bad += s->bad;
            c.saved_ns += (uint64_t)(s->saved * 1e9);
            c.bytes += s->bytes_written;
            if (!c.bytes_known || c.bytes > s->user->max_bytes) {
                /* unknown or over the cap: measure, evict to 90 % */
                uint64_t cap = s->user->max_bytes;
                uint64_t target = c.bytes_known ? cap - cap / 10 : cap;
                uint64_t left = kiln_cache_evict(s->user, target, s->used, s->n_used,
                                      NULL, NULL, NULL);
                if (left != UINT64_MAX)
                    c.bytes = left;
                c.bytes_known = left != UINT64_MAX;
            }
            kiln_cache_stats_write(fd, &c);
            close(fd);
        }
    }
    kiln_cache_say_all(s);
    for (int i = 0; i < s->n_used; i++)
        free(s->used[i]);
    free(s->used);
    for (int i = 0; i < s->n_site; i++)
        kiln_cache_close(s->site[i]);
    free(s->site);
    kiln_cache_close(s->user);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
