/*
 * loader.c — backend plugins through dlopen/dlsym (prefix kiln_loader_).
 *
 * Plugins are opened with RTLD_NOW | RTLD_LOCAL, so that a missing symbol
 * shows at load time rather than at the first kernel call, and so that
 * two plugins never see each other's symbols.  Handles are never closed:
 * callables made by a plugin may live as long as the process.
 *
 * Trust (docs/plugin-abi.md §13): only the caller names plugin
 * directories (kiln_options.plugin_path, $KILN_PLUGIN_PATH), then the
 * install directory; a build tree only when libkiln itself was loaded
 * from it.  No build-tree path is compiled in.  Every plugin directory is
 * opened and checked with all its ancestors, the file opened in it and
 * checked on its descriptor, and dlopen loads that descriptor (trust.h):
 * nothing is looked up by path between the check and the load.
 */
#define _GNU_SOURCE     /* dladdr */
#include "loader.h"
#include "trust.h"      /* the directory and file checks, load by fd */
#include "install_dirs.h"
#include "ir.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <stdlib.h>
#include <string.h>

const kiln_backend *kiln_interp_builtin_entry(uint32_t major, uint32_t minor,
                                              char *errbuf, size_t size);

#define MAX_BACKENDS 32

static struct {
    char name[64];
    const kiln_backend *backend;
    uint64_t build_hash;
} registry[MAX_BACKENDS];
static int n_registry;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

const kiln_backend *kiln_loader_builtin_interp(void)
{
    char buf[256];
    return kiln_interp_builtin_entry(KILN_ABI_MAJOR, KILN_ABI_MINOR, buf,
                                     sizeof buf);
}

/* Fields a version-1 host needs, up to and including error_free. */
#define REQUIRED_SIZE (offsetof(kiln_backend, error_free) + \
                       sizeof(((kiln_backend *)0)->error_free))

int kiln_loader_check(const kiln_backend *b, char *buf, size_t size)
{
    if (!b) {
        snprintf(buf, size, "entry point returned no descriptor");
        return -1;
    }
    if (b->struct_size < offsetof(kiln_backend, abi_minor) + sizeof(uint32_t)) {
        snprintf(buf, size, "descriptor too small (%zu bytes)", b->struct_size);
        return -1;
    }
    if (b->abi_major != KILN_ABI_MAJOR) {
        snprintf(buf, size, "plugin ABI %u.%u, this kiln speaks %d.x",
                 b->abi_major, b->abi_minor, KILN_ABI_MAJOR);
        return -1;
    }
    if (b->struct_size < REQUIRED_SIZE) {
        snprintf(buf, size, "descriptor of %zu bytes lacks required fields "
                 "(%zu bytes)", b->struct_size, (size_t)REQUIRED_SIZE);
        return -1;
    }
    if (!b->name || !b->name[0] || !b->compile || !b->load ||
        !b->callable_free || !b->error_free || !b->artifact_free) {
        snprintf(buf, size, "descriptor lacks a name or a required entry "
                 "point (compile, load, artifact_free, callable_free, "
                 "error_free)");
        return -1;
    }
    return 0;
}

static void diagf(FILE *diag, int quiet, const char *fmt, const char *a,
                  const char *b)
{
    if (quiet)
        return;
    fprintf(diag ? diag : stderr, fmt, a, b);
}

/* Try NAME.so in `dir`: the directory is opened and checked with every
 * ancestor, the file opened in it by descriptor and checked, and the
 * descriptor is what dlopen loads ("/proc/self/fd/N"; trust.h).  Returns
 * the descriptor or NULL (diagnostic printed when the file exists but is
 * refused or unusable); *kept is the file's descriptor, left open for as
 * long as the process lives (the plugin is never unloaded, and the
 * dynamic loader knows it by that name). */
static const kiln_backend *try_file(const char *dir, const char *path,
                                    const char *name, FILE *diag, int quiet,
                                    int *kept)
{
    char why[PATH_MAX + 4096], file[80];
    struct stat st;
    snprintf(file, sizeof file, "%s.so", name);
    int dfd = kiln_trust_open_dir(-1, NULL, dir, 1, why, sizeof why);
    if (dfd == -1)
        return NULL;    /* no such directory */
    if (dfd < 0) {
        /* say so only when there is something to refuse */
        if (lstat(path, &st) == 0)
            diagf(diag, quiet, "kiln: refusing plugin %s: %s\n", path, why);
        return NULL;
    }
    int fd = kiln_trust_open_file(dfd, dir, file, 1, 1, why, sizeof why);
    close(dfd);
    if (fd == -1) {
        if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
            return NULL;    /* nothing there (a dangling symlink is refused) */
        snprintf(why, sizeof why, "symlink to a missing file");
    }
    if (fd < 0) {
        diagf(diag, quiet, "kiln: refusing plugin %s: %s\n", path, why);
        return NULL;
    }
    if (kiln_trust_test_hook)
        kiln_trust_test_hook("plugin", path);
    char self[64];
    kiln_trust_fd_path(fd, self, sizeof self);
    void *h = dlopen(self, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        diagf(diag, quiet, "kiln: skipping plugin %s: %s\n", path,
              e ? e : "dlopen failed");
        close(fd);
        return NULL;
    }
    /* from here on fd stays open, even for a plugin skipped below: the
     * dynamic loader may keep the object under this name, and a later
     * dlopen of the same name (a reused descriptor number) must not find
     * it again */
    void *sym = dlsym(h, KILN_BACKEND_ENTRY);
    if (!sym) {
        diagf(diag, quiet, "kiln: skipping plugin %s: %s\n", path,
              "no symbol " KILN_BACKEND_ENTRY);
        dlclose(h);
        return NULL;
    }
    kiln_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);  /* object -> function pointer */
    char buf[4600] = "";
    const kiln_backend *b = entry(KILN_ABI_MAJOR, KILN_ABI_MINOR, buf,
                                  sizeof buf);
    if (!b) {
        diagf(diag, quiet, "kiln: skipping plugin %s: %s\n", path,
              buf[0] ? buf : "entry point failed");
        dlclose(h);
        return NULL;
    }
    if (kiln_loader_check(b, why, sizeof why)) {
        diagf(diag, quiet, "kiln: skipping plugin %s: %s\n", path, why);
        dlclose(h);
        return NULL;
    }
    if (strcmp(b->name, name) != 0) {
        snprintf(why, sizeof why, "it calls itself '%s', not '%s'", b->name,
                 name);
        diagf(diag, quiet, "kiln: skipping plugin %s: %s\n", path, why);
        dlclose(h);
        return NULL;
    }
    *kept = fd;
    return b;
}

/* The id of a backend's build: XXH3-64 of its build_id string, then of
 * the bytes of the file it was loaded from (read from the descriptor `fd`
 * it was loaded by; -1 for code built into libkiln).  A rebuilt plugin
 * gets a new id even when nobody changed its build_id, so the disk cache
 * never feeds it artifacts of an older code generator. */
static uint64_t build_hash_of(const kiln_backend *b, int fd)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, b->name, strlen(b->name) + 1);
    if (b->build_id)
        XXH3_64bits_update(st, b->build_id, strlen(b->build_id) + 1);
    if (fd >= 0) {
        char buf[65536];
        ssize_t n;
        off_t off = 0;
        while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
            XXH3_64bits_update(st, buf, (size_t)n);
            off += n;
        }
    }
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

uint64_t kiln_loader_build_hash(const kiln_backend *be)
{
    if (!be)
        return 0;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_registry; i++) {
        if (registry[i].backend == be) {
            uint64_t h = registry[i].build_hash;
            pthread_mutex_unlock(&registry_lock);
            return h;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return build_hash_of(be, -1);
}

/* Append `dir` (len bytes) to the list of searched directories. */
static void note_dir(char *list, size_t size, const char *dir, size_t len)
{
    size_t used = strlen(list);
    if (used + 1 >= size)
        return;
    snprintf(list + used, size - used, "%s%.*s", used ? ", " : "", (int)len,
             dir);
}

static const kiln_backend *search_dirs(const char *dirs, const char *name,
                                       FILE *diag, int quiet, char *found,
                                       size_t found_size, char *searched,
                                       size_t searched_size, int *kept)
{
    if (!dirs || !*dirs)
        return NULL;
    const char *p = dirs;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && p[0] != '/') {
            /* a relative directory would be resolved against the working
             * directory, which can be a downloaded model's folder */
            if (!quiet)
                fprintf(diag ? diag : stderr, "kiln: plugin directory "
                        "'%.*s' is not an absolute path; skipped\n",
                        (int)(len > 200 ? 200 : len), p);
        } else if (len > 0 && len < 3500) {
            char dir[3500], path[4096];
            snprintf(dir, sizeof dir, "%.*s", (int)len, p);
            snprintf(path, sizeof path, "%s/%s.so", dir, name);
            note_dir(searched, searched_size, p, len);
            const kiln_backend *b = try_file(dir, path, name, diag, quiet,
                                             kept);
            if (b) {
                snprintf(found, found_size, "%s", path);
                return b;
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    return NULL;
}

int kiln_loader_build_top(char *buf, size_t size)
{
    Dl_info info;
    int (*self)(char *, size_t) = kiln_loader_build_top;
    void *addr;
    memcpy(&addr, &self, sizeof addr);   /* function -> object pointer */
    char real[PATH_MAX];
    if (!dladdr(addr, &info) || !info.dli_fname ||
        !realpath(info.dli_fname, real))
        return -1;
    char *slash = strrchr(real, '/');
    if (!slash)
        return -1;
    *slash = '\0';                      /* DIR/.libs */
    size_t n = strlen(real);
    if (n < 7 || strcmp(real + n - 6, "/.libs") != 0)
        return -1;
    real[n - 6] = '\0';                 /* DIR */
    /* libtool's uninstalled library file: DIR/libkiln.la, installed=no
     * (an installed .la lies next to the library and says installed=yes) */
    char la[PATH_MAX + 16], text[8192];
    snprintf(la, sizeof la, "%s/libkiln.la", real);
    int fd = open(la, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0)
        return -1;
    text[got] = '\0';
    if (!strstr(text, "\ninstalled=no\n"))
        return -1;
    if ((size_t)snprintf(buf, size, "%s", real) >= size)
        return -1;
    return 0;
}

static int valid_name(const char *name)
{
    if (!name || !*name || strlen(name) >= 64)
        return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return 0;
    return 1;
}

const kiln_backend *kiln_loader_get(const char *name, const char *extra_path,
                                    FILE *diag, int quiet, kiln_err *err)
{
    if (!valid_name(name)) {
        kiln_seterr(err, KILN_ERR_BACKEND,
                    "bad backend name '%s' (expected [a-z0-9_]+)",
                    name ? name : "(null)");
        return NULL;
    }
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_registry; i++) {
        if (strcmp(registry[i].name, name) == 0) {
            const kiln_backend *b = registry[i].backend;
            pthread_mutex_unlock(&registry_lock);
            return b;
        }
    }
    char found[4096] = "", searched[768] = "";
    int fd = -1;
    const kiln_backend *b = search_dirs(extra_path, name, diag, quiet, found,
                                        sizeof found, searched,
                                        sizeof searched, &fd);
    if (!b)
        b = search_dirs(getenv("KILN_PLUGIN_PATH"), name, diag, quiet, found,
                        sizeof found, searched, sizeof searched, &fd);
    if (!b)
        b = search_dirs(KILN_PLUGIN_DIR, name, diag, quiet, found,
                        sizeof found, searched, sizeof searched, &fd);
    char top[3000];
    if (!b && kiln_loader_build_top(top, sizeof top) == 0) {
        char dir[8192];
        snprintf(dir, sizeof dir, "%s/backends/%s/.libs:%s/plugins/%s/.libs",
                 top, name, top, name);
        b = search_dirs(dir, name, diag, quiet, found, sizeof found,
                        searched, sizeof searched, &fd);
    }
    if (!b && strcmp(name, "interp") == 0)
        b = kiln_loader_builtin_interp();
    if (b && n_registry < MAX_BACKENDS) {
        snprintf(registry[n_registry].name, sizeof registry[0].name, "%s",
                 name);
        registry[n_registry].backend = b;
        registry[n_registry++].build_hash = build_hash_of(b, fd);
    }
    pthread_mutex_unlock(&registry_lock);
    if (!b)
        kiln_seterr(err, KILN_ERR_BACKEND,
                    "backend '%s' not found (searched %s%s)", name, searched,
                    strlen(searched) + 1 >= sizeof searched ? " ..." : "");
    return b;
}

/* ---- the names of the installed backends (kiln_loader_names) ---------- */

/* 1 when the file at `path` mentions the backend entry symbol (its
 * dynamic symbol table names it): a backend plugin, not a helper module
 * such as llvm_codegen.so.  Read, never loaded. */
static int mentions_entry(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    static const char sym[] = KILN_BACKEND_ENTRY;
    const size_t n = sizeof sym - 1;
    char buf[65536 + sizeof sym];
    size_t keep = 0;
    int found = 0;
    for (;;) {
        ssize_t got = read(fd, buf + keep, sizeof buf - keep);
        if (got <= 0)
            break;
        size_t len = keep + (size_t)got;
        if (len >= n && memmem(buf, len, sym, n)) {
            found = 1;
            break;
        }
        keep = len < n - 1 ? len : n - 1;   /* a match across reads */
        memmove(buf, buf + len - keep, keep);
    }
    close(fd);
    return found;
}

/* Add `name` to the comma-separated list unless it is there. */
static void add_name(char *list, size_t size, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == nl && strncmp(p, name, nl) == 0)
            return;
        p = e ? e + 1 : p + l;
    }
    size_t used = strlen(list);
    if (used + nl + 2 <= size)
        snprintf(list + used, size - used, "%s%s", used ? "," : "", name);
}

/* The backends NAME.so in directory dir (len bytes) into list. */
static void names_in(const char *dir, size_t len, const char *sub,
                     char *list, size_t size)
{
    char d[3500];
    if (len == 0 || len >= sizeof d - 64 || dir[0] != '/')
        return;
    snprintf(d, sizeof d, "%.*s", (int)len, dir);
    DIR *h = opendir(d);
    if (!h)
        return;
    struct dirent *e;
    while ((e = readdir(h)) != NULL) {
        char name[80], path[4096];
        size_t l = strlen(e->d_name);
        if (sub) {
            /* build tree: DIR/NAME/.libs/NAME.so */
            if (l >= 64 || e->d_name[0] == '.')
                continue;
            snprintf(name, sizeof name, "%s", e->d_name);
            snprintf(path, sizeof path, "%s/%s/%s/%s.so", d, name, sub, name);
        } else {
            if (l < 4 || l >= 64 || strcmp(e->d_name + l - 3, ".so") != 0)
                continue;
            snprintf(name, sizeof name, "%.*s", (int)(l - 3), e->d_name);
            snprintf(path, sizeof path, "%s/%s", d, e->d_name);
        }
        if (valid_name(name) && mentions_entry(path))
            add_name(list, size, name);
    }
    closedir(h);
}

static void names_in_path(const char *dirs, char *list, size_t size)
{
    for (const char *p = dirs; p && *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        names_in(p, len, NULL, list, size);
        if (!e)
            break;
        p = e + 1;
    }
}

const char *kiln_loader_names(const char *extra_path, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    buf[0] = '\0';
    add_name(buf, size, "interp");
    names_in_path(extra_path, buf, size);
    names_in_path(getenv("KILN_PLUGIN_PATH"), buf, size);
    names_in_path(KILN_PLUGIN_DIR, buf, size);
    char top[3000], dir[3100];
    if (kiln_loader_build_top(top, sizeof top) == 0) {
        snprintf(dir, sizeof dir, "%s/backends", top);
        names_in(dir, strlen(dir), ".libs", buf, size);
        snprintf(dir, sizeof dir, "%s/plugins", top);
        names_in(dir, strlen(dir), ".libs", buf, size);
    }
    return buf;
}
