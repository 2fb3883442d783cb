/*
 * loader.c — backend plugins through dlopen/dlsym (prefix kiln_loader_).
 *
 * Plugins are opened with RTLD_NOW | RTLD_LOCAL, so that a missing symbol
 * shows at load time rather than at the first kernel call, and so that
 * two plugins never see each other's symbols.  Handles are never closed:
 * callables made by a plugin may live as long as the process.
 */
#define _POSIX_C_SOURCE 200809L
#include "loader.h"
#include "ir.h"

#include <dlfcn.h>
#include <fcntl.h>
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

/* Try one file; returns the descriptor or NULL (diagnostic printed when
 * the file exists but is unusable). */
static const kiln_backend *try_file(const char *path, const char *name,
                                    FILE *diag, int quiet)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fclose(f);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        diagf(diag, quiet, "kiln: skipping plugin %s: %s\n", path,
              e ? e : "dlopen failed");
        return NULL;
    }
    void *sym = dlsym(h, KILN_BACKEND_ENTRY);
    if (!sym) {
        diagf(diag, quiet, "kiln: skipping plugin %s: %s\n", path,
              "no symbol " KILN_BACKEND_ENTRY);
        dlclose(h);
        return NULL;
    }
    kiln_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);  /* object -> function pointer */
    char buf[512] = "";
    const kiln_backend *b = entry(KILN_ABI_MAJOR, KILN_ABI_MINOR, buf,
                                  sizeof buf);
    char why[512];
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
    return b;
}

/* The id of a backend's build: XXH3-64 of its build_id string, then of
 * the bytes of the file it was loaded from (`path`, may be NULL for code
 * built into libkiln).  A rebuilt plugin gets a new id even when nobody
 * changed its build_id, so the disk cache never feeds it artifacts of an
 * older code generator. */
static uint64_t build_hash_of(const kiln_backend *b, const char *path)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, b->name, strlen(b->name) + 1);
    if (b->build_id)
        XXH3_64bits_update(st, b->build_id, strlen(b->build_id) + 1);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        char buf[65536];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0)
            XXH3_64bits_update(st, buf, (size_t)n);
        close(fd);
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
    return build_hash_of(be, NULL);
}

static const kiln_backend *search_dirs(const char *dirs, const char *name,
                                       FILE *diag, int quiet, char *found,
                                       size_t found_size)
{
    if (!dirs || !*dirs)
        return NULL;
    const char *p = dirs;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len < 3500) {
            char path[4096];
            snprintf(path, sizeof path, "%.*s/%s.so", (int)len, p, name);
            const kiln_backend *b = try_file(path, name, diag, quiet);
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
    char found[4096] = "";
    const kiln_backend *b = search_dirs(extra_path, name, diag, quiet, found,
                                        sizeof found);
    if (!b)
        b = search_dirs(getenv("KILN_PLUGIN_PATH"), name, diag, quiet, found,
                        sizeof found);
    if (!b)
        b = search_dirs(KILN_PLUGIN_DIR, name, diag, quiet, found,
                        sizeof found);
#ifdef KILN_BUILD_TOP
    if (!b) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/backends/%s/.libs:%s/plugins/%s/.libs",
                 KILN_BUILD_TOP, name, KILN_BUILD_TOP, name);
        b = search_dirs(dir, name, diag, quiet, found, sizeof found);
    }
#endif
    if (!b && strcmp(name, "interp") == 0)
        b = kiln_loader_builtin_interp();
    if (b && n_registry < MAX_BACKENDS) {
        snprintf(registry[n_registry].name, sizeof registry[0].name, "%s",
                 name);
        registry[n_registry].backend = b;
        registry[n_registry++].build_hash = build_hash_of(b, found[0] ? found
                                                                   : NULL);
    }
    pthread_mutex_unlock(&registry_lock);
    if (!b)
        kiln_seterr(err, KILN_ERR_BACKEND,
                    "backend '%s' not found (searched the plugin path, "
                    "$KILN_PLUGIN_PATH and %s)", name, KILN_PLUGIN_DIR);
    return b;
}
