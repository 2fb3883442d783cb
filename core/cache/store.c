/*
 * store.c — the persistent kernel cache on disk: opening a cache, entry
 * names and headers, reading and writing entries in a session (prefix
 * kiln_cache_; cache_int.h).  Statistics and eviction are evict.c's,
 * what `kiln cache` calls manage.c's.
 *
 * Layout (docs/cache.md):
 *
 *   ROOT/stats                               counters, updated under flock
 *   ROOT/BACKEND-BUILD-TARGET/XX/KEY-OPTS    one artifact per file
 *
 * BUILD is the 16-hex-digit id of the backend's build (kiln_loader_build_
 * hash), TARGET the backend's target string, XX the first hash byte of
 * KEY (34 hex digits, kiln_key_hex), OPTS the compile options that change
 * code ("O2", "O3f" = O3 + fast_math, "O2g" = generic target).
 *
 * An entry is a 128-byte header followed by the backend's artifact bytes:
 *
 *     0  "KILNART\0"             magic
 *     8  u32 format (1)          entry format version
 *    12  u32 header size (128)
 *    16  17 bytes key
 *    33  u8 opt level, u8 fast_math, u8 generic_target, 5 bytes zero
 *    41  (pad to 48)
 *    48  char[24] backend name, NUL-padded
 *    72  u64 backend build id
 *    80  u64 payload length (bytes)
 *    88  u64 compile time (nanoseconds)
 *    96  u64 reserved (0)
 *   104  16 bytes XXH3-128 of the whole file with these 16 bytes zeroed
 *   120  u64 reserved (0)
 *
 * Everything is checked against the path and the caller's expectations
 * before a byte of the payload is handed to a backend.  The root is opened
 * once, when the cache is opened, with kiln_trust_open_dir (trust.h: it
 * and every ancestor up to '/' checked, symlinks on the way included);
 * everything below it -- reads, writes, the statistics file, walks,
 * removals -- goes through openat() from that descriptor with O_NOFOLLOW
 * at every level, so neither a symlink planted below the root nor the
 * root's path renamed or swapped later changes what is read; every
 * directory and file must belong to the user (or root, for a site cache)
 * and must not be writable by group or others.
 *
 * Writes: a temporary file named .tmp.HOST.PID.RANDOM in the entry's own
 * directory, then link() to the final name (the first writer wins; EEXIST
 * is success) or rename() when recaching.  A writer killed half-way leaves
 * only a .tmp file, which no reader ever opens and prune removes after an
 * hour.  No fsync: a torn entry after a power loss fails its checksum and
 * is compiled again.  The only lock is flock() on ROOT/stats, held for
 * microseconds by a session's end (statistics, eviction); the kernel
 * releases it when a process dies.
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

/* ---- small helpers ---------------------------------------------------- */

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* The user cache directory: explicit (`dir`, from kiln_options or the
 * command line), $KILN_CACHE_DIR, the user's or site's configuration
 * (core/policy/userconfig.h), $XDG_CACHE_HOME/kiln, ~/.cache/kiln.  Every one
 * must be absolute (a relative path would depend on the working directory,
 * which can be a downloaded model's folder); XDG_CACHE_HOME and HOME that
 * are not are skipped, as the XDG specification says.  Returns a malloc'd
 * path, or NULL with err set. */
static char *default_dir(const char *dir, const kiln_config *cfg,
                         kiln_err *err)
{
    const char *e, *from = "the cache directory";
    char buf[4096];
    if (dir && *dir)
        e = dir;
    else if ((e = getenv("KILN_CACHE_DIR")) && *e)
        from = "$KILN_CACHE_DIR";
    else if (cfg && cfg->cache_dir)
        e = cfg->cache_dir;
    else
        e = NULL;
    if (e) {
        if (!kiln_trust_absolute(e)) {
            kiln_seterr(err, KILN_ERR_IO, "cache: %s '%.200s' is not an "
                        "absolute path (no '~' or relative paths: they "
                        "would depend on the current directory)", from, e);
            return NULL;
        }
        char *d = strdup(e);
        if (!d)
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return d;
    }
    int w = -1;
    if ((e = getenv("XDG_CACHE_HOME")) && kiln_trust_absolute(e))
        w = snprintf(buf, sizeof buf, "%s/kiln", e);
    else if ((e = getenv("HOME")) && kiln_trust_absolute(e))
        w = snprintf(buf, sizeof buf, "%s/.cache/kiln", e);
    if (w < 0 || (size_t)w >= sizeof buf) {
        kiln_seterr(err, KILN_ERR_IO, "cache: no directory (set "
                    "KILN_CACHE_DIR, or an absolute HOME)");
        return NULL;
    }
    char *d = strdup(buf);
    if (!d)
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return d;
}

static uint64_t env_max_bytes(void)
{
    uint64_t v;
    const char *e = getenv("KILN_CACHE_MAX_SIZE");
    if (e && *e && kiln_cache_parse_size(e, &v) == 0 && v > 0)
        return v;
    return KILN_CACHE_DEFAULT_MAX;
}

/* Open the cache at `d` (malloc'ed, taken over; NULL: the error is
 * already set).  `site`: a read-only site cache, which root may own. */
static kiln_cache *open_cache(char *d, int create, int site,
                              const kiln_config *cfg, kiln_err *err)
{
    if (!d)
        return NULL;
    char why[8400];
    /* made under the trust rule: a mkdir -p by path would follow a
     * symlink planted in an ancestor someone else can write */
    int fd = create ? kiln_trust_make_dir(d, why, sizeof why)
                    : kiln_trust_open_dir(-1, NULL, d, site, why, sizeof why);
    if (fd == -1 && create) {
        kiln_seterr(err, KILN_ERR_IO, "cache: cannot create %s: %s", d, why);
        free(d);
        return NULL;
    }
    if (fd == -1) {
        kiln_seterr(err, KILN_ERR_IO, "cache: %s: %s", d, strerror(ENOENT));
        free(d);
        return NULL;
    }
    if (fd < 0) {
        /* "directory D: reason" about D itself says just the reason */
        const char *w = why;
        size_t dl = strlen(d);
        if (!strncmp(w, "directory ", 10) && !strncmp(w + 10, d, dl) &&
            !strncmp(w + 10 + dl, ": ", 2))
            w += 12 + dl;
        kiln_seterr(err, KILN_ERR_IO, "cache: refusing %s: %s", d, w);
        free(d);
        return NULL;
    }
    kiln_cache *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        free(d);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->dir = d;
    c->fd = fd;
    if (kiln_trust_test_hook)
        kiln_trust_test_hook("cache", d);
    c->max_bytes = env_max_bytes();
    const char *e = getenv("KILN_CACHE_MAX_SIZE");
    if (!(e && *e) && cfg && cfg->cache_max_bytes >= 0)
        c->max_bytes = cfg->cache_max_bytes == 0
                           ? UINT64_MAX : (uint64_t)cfg->cache_max_bytes;
    c->site = site;
    return c;
}

/* The caller's configuration, or NULL (with err set) when out of memory. */
static int load_config(kiln_config *cfg, FILE *diag, int quiet, kiln_err *err)
{
    if (kiln_config_load(cfg, diag, quiet) == 0)
        return 0;
    kiln_config_free(cfg);
    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
}

kiln_cache *kiln_cache_open(const char *dir, int create, kiln_err *err)
{
    kiln_config cfg;
    if (load_config(&cfg, NULL, 0, err))
        return NULL;
    kiln_cache *c = open_cache(default_dir(dir, &cfg, err), create, 0, &cfg,
                               err);
    kiln_config_free(&cfg);
    return c;
}

kiln_cache *kiln_cache_open_read_only(const char *dir, kiln_err *err)
{
    if (!dir || !*dir) {
        kiln_seterr(err, KILN_ERR_ARG, "cache: no read-only cache directory");
        return NULL;
    }
    if (!kiln_trust_absolute(dir)) {
        kiln_seterr(err, KILN_ERR_IO, "cache: read-only cache '%.200s' is "
                    "not an absolute path", dir);
        return NULL;
    }
    char *d = strdup(dir);
    if (!d) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return open_cache(d, 0, 1, NULL, err);
}

int kiln_cache_is_read_only(const kiln_cache *c)
{
    return c ? c->site : 0;
}

/* The read-only caches: the absolute elements of $KILN_CACHE_PATH (a
 * relative one is skipped with one line), then cfg's read_only lists. */
static char **read_only_dirs(const kiln_config *cfg, FILE *diag, int quiet)
{
    const char *e = getenv("KILN_CACHE_PATH");
    size_t n = 0, k = 0;
    for (const char *p = e; p && *p; p++)
        n += *p == ':';
    for (char **r = cfg ? cfg->cache_read_only : NULL; r && *r; r++)
        n++;
    char **v = calloc(n + 2, sizeof *v);
    if (!v)
        return NULL;
    for (const char *p = e; p && *p;) {
        const char *c = strchr(p, ':');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len > 0 && p[0] != '/') {
            if (!quiet)
                fprintf(diag ? diag : stderr, "kiln: cache: $KILN_CACHE_PATH "
                        "entry '%.*s' is not an absolute path; skipped\n",
                        (int)(len > 200 ? 200 : len), p);
        } else if (len > 0) {
            if (!(v[k++] = strndup(p, len))) {
                kiln_cache_free_dirs(v);
                return NULL;
            }
        }
        if (!c)
            break;
        p = c + 1;
    }
    for (char **r = cfg ? cfg->cache_read_only : NULL; r && *r; r++)
        if (!(v[k++] = strdup(*r))) {
            kiln_cache_free_dirs(v);
            return NULL;
        }
    return v;
}

char **kiln_cache_read_only_dirs(void)
{
    kiln_config cfg;
    kiln_err err = {0, ""};
    if (load_config(&cfg, NULL, 0, &err))
        return NULL;
    char **v = read_only_dirs(&cfg, NULL, 0);
    kiln_config_free(&cfg);
    return v;
}

void kiln_cache_free_dirs(char **dirs)
{
    for (size_t i = 0; dirs && dirs[i]; i++)
        free(dirs[i]);
    free(dirs);
}

void kiln_cache_close(kiln_cache *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c->dir);
    free(c);
}

const char *kiln_cache_dir(const kiln_cache *c)
{
    return c ? c->dir : NULL;
}

/* ---- entry names ------------------------------------------------------ */

static char arch_name[64];
static pthread_once_t arch_once = PTHREAD_ONCE_INIT;

static void arch_init(void)
{
    struct utsname u;
    snprintf(arch_name, sizeof arch_name, "%.60s",
             uname(&u) == 0 ? u.machine : "unknown");
}

static const char *host_arch(void)
{
    pthread_once(&arch_once, arch_init);
    return arch_name;
}

/* The backend/build/target directory and the entry's file name. */
void kiln_cache_entry_names(const kiln_backend *be, const kiln_compile_options *co,
                        const kiln_key *key, char *bdir, size_t bsize,
                        char *hex2, char *file, size_t fsize)
{
    char target[160] = "";
    if (be->struct_size >= offsetof(kiln_backend, target) +
                               sizeof be->target && be->target &&
        be->target(co, target, sizeof target) != 0)
        target[0] = '\0';
    if (!target[0])
        snprintf(target, sizeof target, "%s", host_arch());
    for (char *t = target; *t; t++)
        if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') ||
              (*t >= '0' && *t <= '9') || *t == '_' || *t == '.' ||
              *t == '+' || *t == '-'))
            *t = '_';
    snprintf(bdir, bsize, "%s-%016llx-%.100s", be->name,
             (unsigned long long)kiln_loader_build_hash(be), target);
    char hex[KILN_KEY_HEX + 1];
    kiln_key_hex(key, hex);
    hex2[0] = hex[2];
    hex2[1] = hex[3];
    hex2[2] = '\0';
    snprintf(file, fsize, "%s-O%d%s%s", hex, co ? co->opt_level : 2,
             co && co->fast_math ? "f" : "",
             co && co->struct_size >= offsetof(kiln_compile_options,
                                               generic_target) + sizeof(int) &&
                     co->generic_target ? "g" : "");
}

/* ---- the header --------------------------------------------------------- */


static void checksum(uint8_t *file, size_t len, uint8_t out[16])
{
    uint8_t saved[16];
    memcpy(saved, file + 104, 16);
    memset(file + 104, 0, 16);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(file, len));
    memcpy(file + 104, saved, 16);
    memcpy(out, c.digest, 16);
}

/* Parse and check the fixed part of a header (no checksum). */
const char *kiln_cache_parse_header(const uint8_t *h, size_t len, entry_meta *m)
{
    if (len < HDR)
        return len == 0 ? "empty file" : "truncated header";
    if (memcmp(h, MAGIC, 8) != 0)
        return "not a kiln cache entry (bad magic)";
    if (get32(h + 8) != ENTRY_FORMAT || get32(h + 12) != HDR)
        return "entry format version not supported";
    memcpy(m->key.b, h + 16, KILN_KEY_BYTES);
    m->opt_level = h[33];
    m->fast_math = h[34];
    m->generic = h[35];
    memcpy(m->backend, h + 48, 24);
    m->backend[23] = '\0';
    m->build = get64(h + 72);
    m->payload = get64(h + 80);
    m->compile_ns = get64(h + 88);
    return NULL;
}

/* Check a whole entry read into memory against what the caller expects
 * (exp: NULL to check only self-consistency). */
const char *kiln_cache_verify_entry(uint8_t *file, size_t len,
                                const entry_meta *exp)
{
    entry_meta m;
    const char *why = kiln_cache_parse_header(file, len, &m);
    if (why)
        return why;
    if (m.payload != len - HDR)
        return m.payload > len - HDR ? "truncated payload"
                                     : "trailing bytes after the payload";
    uint8_t sum[16];
    checksum(file, len, sum);
    if (memcmp(sum, file + 104, 16) != 0)
        return "checksum mismatch (corrupted)";
    if (!exp)
        return NULL;
    if (memcmp(m.key.b, exp->key.b, KILN_KEY_BYTES) != 0)
        return "entry holds another key";
    if (strcmp(m.backend, exp->backend) != 0)
        return "entry made by another backend";
    if (m.build != exp->build)
        return "entry made by another build of the backend";
    if (m.opt_level != exp->opt_level || m.fast_math != exp->fast_math ||
        m.generic != exp->generic)
        return "entry compiled with other options";
    return NULL;
}

static void expected_meta(const kiln_backend *be,
                          const kiln_compile_options *co,
                          const kiln_key *key, entry_meta *m)
{
    memset(m, 0, sizeof *m);
    m->key = *key;
    m->opt_level = co ? co->opt_level : 2;
    m->fast_math = co && co->fast_math;
    m->generic = co && co->struct_size >= offsetof(kiln_compile_options,
                                                   generic_target) +
                                            sizeof(int) &&
                 co->generic_target;
    snprintf(m->backend, sizeof m->backend, "%s", be->name);
    m->build = kiln_loader_build_hash(be);
}

/* ---- reading ------------------------------------------------------------ */

/* Open a directory below `at` without following symlinks, and check it. */
static int open_dir(int at, const char *name, int site, const char **why)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                  O_CLOEXEC);
    if (fd < 0) {
        *why = errno == ELOOP || errno == ENOTDIR ? "a symlink or not a "
                                                    "directory" : NULL;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (*why = kiln_trust_stat(&st, 1, site)) != NULL) {
        close(fd);
        return -1;
    }
    return fd;
}


/* Read ROOT/bdir/hex2/file completely, checking every level below the
 * root (open at rfd, checked when the cache was opened). */
void kiln_cache_read_entry(int rfd, const char *bdir, const char *hex2,
                       const char *file, int site, int touch, read_result *r)
{
    memset(r, 0, sizeof *r);
    r->level = 1;
    int bfd = open_dir(rfd, bdir, site, &r->why);
    if (bfd < 0)
        return;
    r->level = 2;
    int hfd = open_dir(bfd, hex2, site, &r->why);
    close(bfd);
    if (hfd < 0)
        return;
    r->level = 3;
    /* O_NONBLOCK: a FIFO planted in place of an entry must not hang us
     * (fstat below then refuses it as not a regular file) */
    int fd = openat(hfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ELOOP) {
            r->found = 1;
            r->why = "a symlink in place of an entry";
        }
        close(hfd);
        return;
    }
    close(hfd);
    r->found = 1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        r->why = "cannot stat";
        close(fd);
        return;
    }
    if ((r->why = kiln_trust_stat(&st, 0, site)) != NULL) {
        close(fd);
        return;
    }
    if ((uint64_t)st.st_size > MAX_ENTRY) {
        r->why = "larger than any entry";
        close(fd);
        return;
    }
    r->mtime = (int64_t)st.st_mtime;
    size_t n = (size_t)st.st_size;
    r->file = malloc(n ? n : 1);
    if (!r->file) {
        r->why = "out of memory";
        close(fd);
        return;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, r->file + got, n - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    r->len = got;
    if (touch && time(NULL) - st.st_mtime > TOUCH_AFTER)
        futimens(fd, NULL);   /* LRU time; failure is harmless */
    close(fd);
}

/* Remove `path`, something of an entry's name in a cache we own: a file
 * (regular, symlink, FIFO, socket) we own is unlinked, an empty directory
 * removed.  Returns 1 when it is gone, else 0 with the reason in *why
 * (static text or strerror). */
static int remove_at(int dfd, const char *name, const char **why)
{
    struct stat st;
    const char *dummy;
    if (!why)
        why = &dummy;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        *why = strerror(errno);
        return errno == ENOENT;      /* already gone */
    }
    if (st.st_uid != geteuid()) {
        *why = "owned by another user";
        return 0;
    }
    if (S_ISDIR(st.st_mode)) {
        if (unlinkat(dfd, name, AT_REMOVEDIR) == 0)
            return 1;
        *why = errno == ENOTEMPTY || errno == EEXIST
                   ? "a directory that is not empty in place of an entry"
                   : strerror(errno);
        return 0;
    }
    if (unlinkat(dfd, name, 0) == 0)
        return 1;
    *why = strerror(errno);
    return 0;
}

/* The directory ROOT/bdir/hex2 below the root open at rfd (no symlinks
 * followed), or -1. */
int kiln_cache_open_hex_dir(int rfd, const char *bdir, const char *hex2)
{
    int bfd = openat(rfd, bdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                    O_CLOEXEC);
    if (bfd < 0)
        return -1;
    int hfd = openat(bfd, hex2, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                    O_CLOEXEC);
    close(bfd);
    return hfd;
}

int kiln_cache_remove_entry(int rfd, const char *bdir, const char *hex2,
                        const char *file, const char **why)
{
    int hfd = kiln_cache_open_hex_dir(rfd, bdir, hex2);
    if (hfd < 0) {
        if (why)
            *why = strerror(errno);
        return errno == ENOENT;
    }
    int gone = remove_at(hfd, file, why);
    close(hfd);
    return gone;
}

/* The same for a walk's "bdir/hex2/file". */
int kiln_cache_remove_rel(int rfd, const char *rel, const char **why)
{
    char b[300], h[3];
    const char *s1 = strchr(rel, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    if (!s1 || !s2 || (size_t)(s1 - rel) >= sizeof b || s2 - s1 != 3) {
        if (why)
            *why = "not an entry's path";
        return 0;
    }
    snprintf(b, sizeof b, "%.*s", (int)(s1 - rel), rel);
    memcpy(h, s1 + 1, 2);
    h[2] = '\0';
    return kiln_cache_remove_entry(rfd, b, h, s2 + 1, why);
}

/* Record a diagnostic; every cause is said once, at the session's end,
 * with a count.  `group` names the cause; `more` (with one %d) is
 * appended when it came up more than once. */
static void say(kiln_cache_session *s, const char *group, const char *more,
                const char *fmt, const char *a, const char *b)
{
    if (s->quiet)
        return;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n_causes; i++)
        if (!strcmp(s->causes[i].group, group)) {
            s->causes[i].n++;
            pthread_mutex_unlock(&s->lock);
            return;
        }
    char msg[8600], suffix[200];
    snprintf(msg, sizeof msg, fmt, a, b);
    snprintf(suffix, sizeof suffix, "%s", more);
    cause *v = realloc(s->causes, sizeof *v * (size_t)(s->n_causes + 1));
    if (v) {
        s->causes = v;
        size_t gl = strlen(group) + 1, ml = strlen(msg) + 1;
        size_t sl = strlen(suffix) + 1;
        char *block = malloc(gl + ml + sl);
        if (block) {
            memcpy(block, group, gl);
            memcpy(block + gl, msg, ml);
            memcpy(block + gl + ml, suffix, sl);
            v[s->n_causes++] = (cause){block, block + gl, 1};
        }
    }
    pthread_mutex_unlock(&s->lock);
}

/* Print the recorded diagnostics, one line per cause. */
void kiln_cache_say_all(kiln_cache_session *s)
{
    FILE *out = s->diag ? s->diag : stderr;
    for (int i = 0; i < s->n_causes; i++) {
        cause *c = &s->causes[i];
        const char *more = c->first + strlen(c->first) + 1;
        fputs(c->first, out);
        if (c->n > 1 && *more)
            fprintf(out, more, c->n);
        fputc('\n', out);
        free(c->group);
    }
    free(s->causes);
    s->causes = NULL;
    s->n_causes = 0;
}

static void note_used(kiln_cache_session *s, const char *bdir,
                      const char *hex2, const char *file)
{
    char rel[600];
    snprintf(rel, sizeof rel, "%s/%s/%s", bdir, hex2, file);
    pthread_mutex_lock(&s->lock);
    if (s->n_used == s->cap_used) {
        int cap = s->cap_used ? 2 * s->cap_used : 64;
        char **u = realloc(s->used, sizeof *u * (size_t)cap);
        if (!u) {
            pthread_mutex_unlock(&s->lock);
            return;
        }
        s->used = u;
        s->cap_used = cap;
    }
    char *d = strdup(rel);
    if (d)
        s->used[s->n_used++] = d;
    pthread_mutex_unlock(&s->lock);
}

int kiln_cache_fetch(kiln_cache_session *s, const kiln_backend *be,
                     const kiln_compile_options *co, const kiln_key *key,
                     void **bytes, size_t *len, double *saved)
{
    if (!s || !be || !key || !bytes || !len)
        return 0;
    *bytes = NULL;
    *len = 0;
    char bdir[300], hex2[3], file[64];
    kiln_cache_entry_names(be, co, key, bdir, sizeof bdir, hex2, file, sizeof file);
    entry_meta exp;
    expected_meta(be, co, key, &exp);
    int bad = 0;
    for (int i = -1; i < s->n_site; i++) {
        const kiln_cache *cc = i < 0 ? s->user : s->site[i];
        if (!cc)
            continue;
        const char *root = cc->dir;
        read_result r;
        kiln_cache_read_entry(cc->fd, bdir, hex2, file, i >= 0, i < 0, &r);
        if (!r.found && !r.why) {
            free(r.file);
            continue;
        }
        const char *why = r.why;
        if (!why)
            why = kiln_cache_verify_entry(r.file, r.len, &exp);
        if (!why) {
            uint64_t ns = get64(r.file + 88);
            size_t n = r.len - HDR;
            memmove(r.file, r.file + HDR, n);
            *bytes = r.file;
            *len = n;
            if (saved)
                *saved = 1e-9 * (double)ns;
            pthread_mutex_lock(&s->lock);
            s->hits++;
            pthread_mutex_unlock(&s->lock);
            if (i < 0)
                note_used(s, bdir, hex2, file);
            return 1;
        }
        free(r.file);
        char path[4200], group[4400];
        if (r.why && r.level < 3) {
            /* a directory on the way is refused: every kernel below it
             * would say the same, so this is one cause */
            const char *parts[3] = {root, bdir, hex2};
            int n = snprintf(path, sizeof path, "%s", root);
            for (int l = 1; l <= r.level && n > 0 &&
                            (size_t)n < sizeof path; l++)
                n += snprintf(path + n, sizeof path - (size_t)n, "/%s",
                              parts[l]);
            snprintf(group, sizeof group, "dir\n%s\n%s", path, r.why);
            say(s, group, " (%d kernels)", "kiln: cache: refusing %s: %s",
                path, r.why);
            continue;           /* nothing was found below it */
        }
        snprintf(path, sizeof path, "%s/%s/%s/%s", root, bdir, hex2, file);
        int ours = i < 0 && s->mode != KILN_CACHE_MODE_READ_ONLY;
        const char *not_gone = NULL;
        int gone = ours && kiln_cache_remove_entry(cc->fd, bdir, hex2, file,
                                        &not_gone);
        char how[600];
        if (gone)
            snprintf(how, sizeof how, "%s; removed, recompiling", why);
        else if (ours)
            snprintf(how, sizeof how, "%s; not removed (%s), recompiling",
                     why, not_gone ? not_gone : "?");
        else
            snprintf(how, sizeof how, "%s; read-only cache, recompiling",
                     why);
        snprintf(group, sizeof group, "entry\n%s\n%s", root, how);
        say(s, group, " (%d entries like this one)",
            "kiln: cache: bad entry %s: %s", path, how);
        bad = 1;
    }
    pthread_mutex_lock(&s->lock);
    if (bad)
        s->bad++;
    s->misses++;
    pthread_mutex_unlock(&s->lock);
    return bad ? -1 : 0;
}

void kiln_cache_note_saved(kiln_cache_session *s, double seconds)
{
    if (!s || !(seconds > 0))
        return;
    pthread_mutex_lock(&s->lock);
    s->saved += seconds;
    pthread_mutex_unlock(&s->lock);
}

void kiln_cache_reject(kiln_cache_session *s, const kiln_backend *be,
                       const kiln_compile_options *co, const kiln_key *key,
                       const char *why)
{
    if (!s || !s->user || !be || !key)
        return;
    char bdir[300], hex2[3], file[64], path[4200];
    kiln_cache_entry_names(be, co, key, bdir, sizeof bdir, hex2, file, sizeof file);
    snprintf(path, sizeof path, "%s/%s/%s/%s", s->user->dir, bdir, hex2,
             file);
    char group[4400];
    snprintf(group, sizeof group, "load\n%s\n%s", be->name,
             why ? why : "unknown error");
    say(s, group, " (%d entries)",
        "kiln: cache: entry %s does not load: %s; recompiling", path,
        why ? why : "unknown error");
    if (s->mode != KILN_CACHE_MODE_READ_ONLY)
        kiln_cache_remove_entry(s->user->fd, bdir, hex2, file, NULL);
    pthread_mutex_lock(&s->lock);
    s->bad++;
    s->hits--;
    s->misses++;
    pthread_mutex_unlock(&s->lock);
}

/* ---- writing ------------------------------------------------------------ */

/* Open (creating with 0700) ROOT/bdir/hex2 and return its descriptor. */
static int open_entry_dir(int rfd, const char *bdir, const char *hex2,
                          const char **why)
{
    if (mkdirat(rfd, bdir, 0700) != 0 && errno != EEXIST) {
        *why = "cannot create a directory";
        return -1;
    }
    int bfd = open_dir(rfd, bdir, 0, why);
    if (bfd < 0)
        return -1;
    if (mkdirat(bfd, hex2, 0700) != 0 && errno != EEXIST) {
        *why = "cannot create a directory";
        close(bfd);
        return -1;
    }
    int hfd = open_dir(bfd, hex2, 0, why);
    close(bfd);
    return hfd;
}

static void tmp_name(char *buf, size_t size)
{
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; h++)
        if (*h == '/' || *h == '.')
            *h = '_';
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        rnd ^= (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15ull ^
               (uint64_t)t.tv_sec ^ ((uint64_t)getpid() << 32);
    }
    snprintf(buf, size, ".tmp.%s.%ld.%016llx", host, (long)getpid(),
             (unsigned long long)rnd);
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int kiln_cache_store(kiln_cache_session *s, const kiln_backend *be,
                     const kiln_compile_options *co, const kiln_key *key,
                     const void *bytes, size_t len, double seconds,
                     const char **why_not)
{
    const char *dummy;
    if (!why_not)
        why_not = &dummy;
    *why_not = NULL;
    if (!s || !be || !key || !bytes || len == 0)
        return 0;
    if (!s->user) {
        *why_not = "no usable user cache (only read-only caches)";
        return 0;
    }
    if (len > MAX_ENTRY - HDR) {
        *why_not = "larger than any entry";
        return 0;
    }
    if (s->mode == KILN_CACHE_MODE_READ_ONLY) {
        *why_not = "KILN_CACHE=read-only";
        return 0;
    }
    if (seconds < s->min_seconds) {
        *why_not = "compiled faster than KILN_CACHE_MIN_COMPILE_MS";
        return 0;
    }
    char bdir[300], hex2[3], file[64];
    kiln_cache_entry_names(be, co, key, bdir, sizeof bdir, hex2, file, sizeof file);
    entry_meta m;
    expected_meta(be, co, key, &m);
    uint8_t *buf = malloc(HDR + len);
    if (!buf)
        return -1;
    memset(buf, 0, HDR);
    memcpy(buf, MAGIC, 8);
    put32(buf + 8, ENTRY_FORMAT);
    put32(buf + 12, HDR);
    memcpy(buf + 16, key->b, KILN_KEY_BYTES);
    buf[33] = (uint8_t)m.opt_level;
    buf[34] = (uint8_t)m.fast_math;
    buf[35] = (uint8_t)m.generic;
    memcpy(buf + 48, m.backend, strlen(m.backend));
    put64(buf + 72, m.build);
    put64(buf + 80, len);
    put64(buf + 88, seconds > 0 ? (uint64_t)(seconds * 1e9) : 0);
    memcpy(buf + HDR, bytes, len);
    uint8_t sum[16];
    checksum(buf, HDR + len, sum);
    memcpy(buf + 104, sum, 16);

    const char *why = NULL;
    int rc = -1;
    int hfd = open_entry_dir(s->user->fd, bdir, hex2, &why);
    if (hfd >= 0) {
        char tmp[160];
        tmp_name(tmp, sizeof tmp);
        int fd = openat(hfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                      O_CLOEXEC, 0600);
        if (fd < 0) {
            why = strerror(errno);
        } else {
            int w = write_all(fd, buf, HDR + len);
            if (close(fd) != 0)
                w = -1;
            if (w != 0) {
                why = "write failed (disk full?)";
            } else if (s->mode == KILN_CACHE_MODE_RECACHE) {
                rc = renameat(hfd, tmp, hfd, file) == 0 ? 1 : -1;
                if (rc < 0)
                    why = strerror(errno);
            } else if (linkat(hfd, tmp, hfd, file, 0) == 0) {
                rc = 1;
            } else if (errno == EEXIST) {
                /* another writer was first, or something that is no
                 * entry (a FIFO, a directory) is in the way: replace it,
                 * or say why not */
                struct stat st;
                if (fstatat(hfd, file, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISREG(st.st_mode)) {
                    rc = 0;
                    *why_not = "another process stored it first";
                } else if (renameat(hfd, tmp, hfd, file) == 0) {
                    rc = 1;
                } else {
                    why = errno == EISDIR || errno == ENOTEMPTY ||
                                  errno == EEXIST
                              ? "a directory is in place of the entry"
                              : strerror(errno);
                }
            } else if (errno == ENOENT || errno == ESTALE || errno == EBUSY) {
                rc = 0;             /* another writer was first */
                *why_not = "another process stored it first";
            } else if (errno == EPERM || errno == ENOTSUP ||
                       errno == EMLINK || errno == EXDEV) {
                /* no hard links here: rename, unless someone was first */
                struct stat st;
                if (fstatat(hfd, file, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                    rc = 0;
                    *why_not = "another process stored it first";
                } else {
                    rc = renameat(hfd, tmp, hfd, file) == 0 ? 1 : 0;
                }
            } else {
                why = strerror(errno);
            }
            unlinkat(hfd, tmp, 0);   /* ENOENT after a rename: fine */
        }
        close(hfd);
    }
    free(buf);
    if (rc < 0) {
        char path[4200], group[4400];
        snprintf(path, sizeof path, "%s/%s/%s", s->user->dir, bdir, hex2);
        if (why && !strcmp(why, "a directory is in place of the entry")) {
            snprintf(path, sizeof path, "%s/%s/%s/%s", s->user->dir, bdir,
                     hex2, file);
            *why_not = "a directory is in place of its entry";
            snprintf(group, sizeof group, "dir-entry\n%s", s->user->dir);
            say(s, group, " (%d entries like it)", "kiln: cache: %s is a "
                "directory, not an entry (%s); kernel not stored, remove it "
                "with kiln cache clear", path, "not empty");
        } else {
            *why_not = "the user cache cannot be written (see the "
                       "diagnostic)";
            snprintf(group, sizeof group, "write\n%s\n%s", s->user->dir,
                     why ? why : "error");
            say(s, group, " (%d kernels not stored)", "kiln: cache: cannot "
                "write in %s: %s; going on without storing", path,
                why ? why : "error");
        }
        return -1;
    }
    note_used(s, bdir, hex2, file);
    if (rc == 1) {
        pthread_mutex_lock(&s->lock);
        s->writes++;
        s->bytes_written += HDR + len;
        pthread_mutex_unlock(&s->lock);
    }
    return rc;
}

/* A DIR stream over the directory open at `at` (which stays open), or
 * NULL. */
DIR *kiln_cache_dir_stream(int at, const char *name)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                  O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    return d;
}

/* 1 when the cache root `c` has an entry "NAME-..." (or cannot be read). */
static int dir_has_backend(const kiln_cache *c, const char *name)
{
    DIR *d = kiln_cache_dir_stream(c->fd, ".");
    if (!d)
        return 1;
    size_t n = strlen(name);
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)))
        found = strncmp(e->d_name, name, n) == 0 && e->d_name[n] == '-';
    closedir(d);
    return found;
}

int kiln_cache_may_have(kiln_cache_session *s, const char *name)
{
    if (!s || !name)
        return 0;
    if (s->user && dir_has_backend(s->user, name))
        return 1;
    for (int i = 0; i < s->n_site; i++)
        if (dir_has_backend(s->site[i], name))
            return 1;
    return 0;
}

int kiln_cache_recaching(const kiln_cache_session *s)
{
    return s && s->mode == KILN_CACHE_MODE_RECACHE;
}

/* ---- sessions ----------------------------------------------------------- */

int kiln_cache_parse_mode(const char *v)
{
    static const struct { const char *name; int mode; } modes[] = {
        {"on", KILN_CACHE_MODE_ON},     {"1", KILN_CACHE_MODE_ON},
        {"yes", KILN_CACHE_MODE_ON},    {"true", KILN_CACHE_MODE_ON},
        {"off", KILN_CACHE_MODE_OFF},   {"0", KILN_CACHE_MODE_OFF},
        {"no", KILN_CACHE_MODE_OFF},    {"false", KILN_CACHE_MODE_OFF},
        {"read-only", KILN_CACHE_MODE_READ_ONLY},
        {"readonly", KILN_CACHE_MODE_READ_ONLY},
        {"recache", KILN_CACHE_MODE_RECACHE},
    };
    if (!v || !*v)
        return KILN_CACHE_MODE_ON;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        if (strcasecmp(v, modes[i].name) == 0)
            return modes[i].mode;
    return -1;
}

/* A duration in milliseconds: digits with at most one '.', nothing else
 * (no sign, exponent, hex, unit or trailing text).  0, or -1. */
static int parse_ms(const char *v, double *ms)
{
    int digits = 0, dots = 0;
    const char *q = v;
    for (; (*q >= '0' && *q <= '9') || *q == '.'; q++) {
        digits += *q != '.';
        dots += *q == '.';
    }
    if (!digits || dots > 1 || *q)
        return -1;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end != q || errno || !(d >= 0) || d > 1e9)
        return -1;
    *ms = d;
    return 0;
}

/* Open the read-only cache `p` (its root and ancestors checked once,
 * here) and add it; one line when it is refused, nothing when it does
 * not exist. */
static int add_site(kiln_cache_session *s, const char *p, FILE *out)
{
    kiln_cache **ns = realloc(s->site, sizeof *ns * (size_t)(s->n_site + 1));
    if (!ns)
        return -1;
    s->site = ns;
    kiln_err err = {0, ""};
    char *d = strdup(p);
    if (!d)
        return -1;
    kiln_cache *c = open_cache(d, 0, 1, NULL, &err);
    if (c)
        s->site[s->n_site++] = c;
    else if (!s->quiet && err.code != KILN_ERR_NOMEM &&
             !strstr(err.message, strerror(ENOENT)))
        fprintf(out, "kiln: %s; going on without it\n", err.message);
    return 0;
}

kiln_cache_session *kiln_cache_session_begin(
    int mode, const char *dir, const struct kiln_policy_knobs *knobs,
    FILE *diag, int quiet, kiln_err *err_out)
{
    const char *e = getenv("KILN_CACHE");
    if (mode == KILN_CACHE_MODE_DEFAULT && e && *e &&
        kiln_cache_parse_mode(e) < 0) {
        kiln_seterr(err_out, KILN_ERR_ARG, "KILN_CACHE='%.40s%s' is not one "
                    "of on, off, read-only, recache (or 1, 0, yes, no, true, "
                    "false; any case)", e, strlen(e) > 40 ? "..." : "");
        return NULL;
    }
    if (mode == KILN_CACHE_MODE_DEFAULT && (!e || !*e) && knobs)
        mode = knobs->cache_enabled ? KILN_CACHE_MODE_ON : KILN_CACHE_MODE_OFF;
    if (mode == KILN_CACHE_MODE_DEFAULT)
        mode = kiln_cache_parse_mode(e);
    if (mode == KILN_CACHE_MODE_OFF || mode < 0 ||
        mode > KILN_CACHE_MODE_RECACHE)
        return NULL;
    double min_ms = 0;
    const char *me = getenv("KILN_CACHE_MIN_COMPILE_MS");
    if (me && *me && parse_ms(me, &min_ms) != 0) {
        kiln_seterr(err_out, KILN_ERR_ARG, "KILN_CACHE_MIN_COMPILE_MS='%.40s%s'"
                    " is not a number of milliseconds such as 0 or 2.5",
                    me, strlen(me) > 40 ? "..." : "");
        return NULL;
    }
    kiln_cache_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->mode = mode;
    s->diag = diag;
    s->quiet = quiet;
    pthread_mutex_init(&s->lock, NULL);
    e = getenv("KILN_CACHE_MAX_SIZE");
    uint64_t ignored;
    if (e && *e && (kiln_cache_parse_size(e, &ignored) != 0 || ignored == 0) &&
        !quiet)
        fprintf(diag ? diag : stderr, "kiln: cache: KILN_CACHE_MAX_SIZE='%s' "
                "is not a size such as 512M or 2G; using the default\n", e);
    s->min_seconds = min_ms * 1e-3;
    kiln_err err = {0, ""};
    FILE *out = diag ? diag : stderr;
    /* directories come from the caller only: `dir`, the environment and
     * the user's or site's configuration -- never from a policy, which
     * may have come with a model (knobs->cache_dir and cache_read_only
     * are always empty) */
    kiln_config cfg;
    if (load_config(&cfg, out, quiet, &err)) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    s->user = open_cache(default_dir(dir, &cfg, &err),
                         mode != KILN_CACHE_MODE_READ_ONLY, 0, &cfg, &err);
    if (s->user && knobs && !((e = getenv("KILN_CACHE_MAX_SIZE")) && *e) &&
        cfg.cache_max_bytes < 0 && knobs->cache_max_bytes >= 0 &&
        knobs->cache_max_bytes != (int64_t)KILN_CACHE_DEFAULT_MAX)
        s->user->max_bytes = knobs->cache_max_bytes == 0
                                 ? UINT64_MAX
                                 : (uint64_t)knobs->cache_max_bytes;
    if (!s->user && !quiet && !(mode == KILN_CACHE_MODE_READ_ONLY &&
                                err.code == KILN_ERR_IO &&
                                strstr(err.message, "No such file")))
        fprintf(out, "kiln: %s; going on without the user cache\n",
                err.message);
    char **ro = read_only_dirs(&cfg, out, quiet);
    for (int i = 0; ro && ro[i]; i++)
        add_site(s, ro[i], out);
    kiln_cache_free_dirs(ro);
    kiln_config_free(&cfg);
    if (!s->user && s->n_site == 0) {
        pthread_mutex_destroy(&s->lock);
        free(s->site);
        free(s);
        return NULL;
    }
    return s;
}
