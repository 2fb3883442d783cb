/*
 * tccrt.c — a test-only backend "tccrt" that runs every kernel through the
 * tcc backend's artifact bytes: compile = tcc compile + artifact_bytes,
 * load = tcc load_bytes (a fresh TCCState that links the object; no C is
 * parsed).  It is how tests/test_backends.c checks the round trip
 * compile -> bytes -> load_bytes, in one process and across processes:
 *
 *   KILN_TCCRT_DIR unset   bytes kept in memory;
 *   KILN_TCCRT_MODE=save   also written to $KILN_TCCRT_DIR/<n>.bin, n the
 *                          kernel's compile order in this process;
 *   KILN_TCCRT_MODE=load   compile does not run tcc at all: it reads
 *                          $KILN_TCCRT_DIR/<n>.bin (a process that loads
 *                          artifacts made by another one, as a disk cache
 *                          would).
 *
 * It finds tcc.so in $KILN_TCCRT_TCC (a path).  A counter and environment
 * variables are global state, acceptable for a test shim only.
 */
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kiln_backend *tcc_be;
static unsigned counter;

static char nomem_msg[] = "tccrt: error";
static kiln_plugin_error static_err = {sizeof(kiln_plugin_error),
                                       KILN_ERR_BACKEND, nomem_msg};

struct kiln_artifact {
    unsigned char *bytes;
    size_t len;
};

static int fail(kiln_plugin_error **err, const char *msg)
{
    (void)msg;
    if (err)
        *err = &static_err;
    return KILN_ERR_BACKEND;
}

static int rt_compile(const kiln_kernel *k, const kiln_compile_options *opt,
                      kiln_artifact **out, kiln_plugin_error **err)
{
    *out = NULL;
    const char *mode = getenv("KILN_TCCRT_MODE");
    const char *dir = getenv("KILN_TCCRT_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%u.bin", dir ? dir : ".", counter++);
    kiln_artifact *a = calloc(1, sizeof *a);
    if (!a)
        return fail(err, "nomem");
    if (mode && strcmp(mode, "load") == 0) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            free(a);
            return fail(err, "no file");
        }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        a->bytes = malloc(n > 0 ? (size_t)n : 1);
        a->len = a->bytes && n > 0 ? fread(a->bytes, 1, (size_t)n, f) : 0;
        fclose(f);
        *out = a;
        return 0;
    }
    kiln_artifact *t = NULL;
    int rc = tcc_be->compile(k, opt, &t, err);
    if (rc) {
        free(a);
        return rc;
    }
    size_t len = 0;
    const void *b = tcc_be->artifact_bytes(t, &len);
    if (b && len) {
        a->bytes = malloc(len);
        if (a->bytes) {
            memcpy(a->bytes, b, len);
            a->len = len;
        }
    }
    tcc_be->artifact_free(t);
    if (!a->bytes) {
        free(a);
        return fail(err, "no bytes");
    }
    if (mode && strcmp(mode, "save") == 0) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(a->bytes, 1, a->len, f) != a->len) {
            if (f)
                fclose(f);
            free(a->bytes);
            free(a);
            return fail(err, "write");
        }
        fclose(f);
    }
    *out = a;
    return 0;
}

static int rt_load(const kiln_artifact *a, kiln_callable **out,
                   kiln_plugin_error **err)
{
    return tcc_be->load_bytes(a->bytes, a->len, out, err);
}

static void rt_artifact_free(kiln_artifact *a)
{
    if (a) {
        free(a->bytes);
        free(a);
    }
}

static void rt_callable_free(kiln_callable *c) { tcc_be->callable_free(c); }

static void rt_error_free(kiln_plugin_error *e)
{
    if (e && e != &static_err)
        tcc_be->error_free(e);
}

static kiln_backend rt_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "tccrt",
    .version = "test",
    .build_id = "tccrt",
    .flags = 0,
    .compile = rt_compile,
    .load = rt_load,
    .artifact_free = rt_artifact_free,
    .callable_free = rt_callable_free,
    .error_free = rt_error_free,
};

__attribute__((visibility("default"))) const kiln_backend *
kiln_backend_entry(uint32_t major, uint32_t minor, char *errbuf, size_t n);

__attribute__((visibility("default"))) const kiln_backend *
kiln_backend_entry(uint32_t major, uint32_t minor, char *errbuf, size_t n)
{
    (void)minor;
    const char *path = getenv("KILN_TCCRT_TCC");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    void *sym = h ? dlsym(h, KILN_BACKEND_ENTRY) : NULL;
    if (!sym) {
        snprintf(errbuf, n, "tccrt: cannot open the tcc backend (%s)",
                 path ? path : "$KILN_TCCRT_TCC unset");
        return NULL;
    }
    kiln_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    tcc_be = entry(major, minor, errbuf, n);
    if (!tcc_be)
        return NULL;
    rt_backend.supports = tcc_be->supports;
    return &rt_backend;
}
