/*
 * tcc.c — the tcc backend: kernels compiled to machine code with libtcc
 * from the C that core/lower/emit_c.c generates (docs/backends.md).
 *
 * compile  emit C, compile it in memory with libtcc, relocate the code
 *          into pages of our own (mmap) and drop the TCCState at once:
 *          a callable costs its code pages, not a compiler state.  The
 *          artifact keeps the C source.
 * artifact_bytes  a header and an ELF relocatable object (.o) made from
 *          the same source, built on first request.  Never a shared
 *          object: tcc writes .so files without PT_GNU_STACK (glibc 2.36
 *          makes the stack executable when loading one, 2.41 refuses).
 * prepare/run  ABI 1.4 prepared calls: every unit also exports a plan
 *          size, a prep (the checks and the loop nest, once per shape
 *          signature) and a run, which is the callable's run itself
 *          (emit_c.h); prepare is a malloc and the unit's prep.
 * load_bytes  checks the header and loads that object with kiln's own
 *          loader (core/plugin/objload.c, linked into this plugin): no libtcc
 *          call, no temporary file, W^X pages.  The code reaches libm and
 *          BLAS through call->rt, so nothing in the bytes depends on this
 *          process's addresses; memcpy/memmove/memset (which tcc may emit
 *          for struct copies) come from the import table.
 *
 * libtcc 0.9.27 keeps compiler state in globals: the descriptor does not
 * set KILN_BACKEND_THREAD_SAFE and the host serialises supports, compile,
 * load, load_bytes and the free functions (core/runtime/vm.c).  The generated
 * kernels themselves are reentrant (no static data but constant tables)
 * and run concurrently.
 *
 * tcc_error() outside a compile calls exit(1); every state gets an error
 * callback first, and -nostdlib with every external symbol supplied
 * (memcpy, memmove, memset, which tcc may emit for struct copies) keeps
 * linking free of library searches.  The generated code avoids the
 * double <-> uint64 conversions that would need libtcc1.a.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "emit_c.h"
#include "objload.h"

#include <kiln/backend.h>
#include <kiln/kiln.h>
#include <libtcc.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef KILN_LIBTCC_VERSION
#define KILN_LIBTCC_VERSION "unknown"
#endif
/* Changes whenever the code made for a kernel may change. */
#define KILN_TCC_BUILD_ID "tcc-1/" KILN_EMIT_C_VERSION "/libtcc-" \
    KILN_LIBTCC_VERSION
#define KILN_TCC_MAGIC "KILNTCC1"

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

static char kiln_tcc_nomem_message[] = "tcc: out of memory";
static kiln_plugin_error kiln_tcc_nomem = {
    sizeof(kiln_plugin_error), KILN_ERR_NOMEM, kiln_tcc_nomem_message
};

static int kiln_tcc_error(kiln_plugin_error **err, int code, const char *fmt,
                          ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    kiln_plugin_error *e = malloc(sizeof *e);
    char *msg = len >= 0 ? malloc((size_t)len + 6) : NULL;
    if (!e || !msg) {
        free(e);
        free(msg);
        *err = &kiln_tcc_nomem;
        return code;
    }
    memcpy(msg, "tcc: ", 5);
    va_start(ap, fmt);
    vsnprintf(msg + 5, (size_t)len + 1, fmt, ap);
    va_end(ap);
    /* one line */
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    e->struct_size = sizeof *e;
    e->code = code;
    e->message = msg;
    *err = e;
    return code;
}

static void kiln_tcc_error_free(kiln_plugin_error *e)
{
    if (!e || e == &kiln_tcc_nomem)
        return;
    free(e->message);
    free(e);
}

/* What libtcc reported through its error callback (first error kept). */
typedef struct kiln_tcc_msgs {
    char first[512];
    int n_errors;
} kiln_tcc_msgs;

static void kiln_tcc_on_error(void *opaque, const char *msg)
{
    kiln_tcc_msgs *m = opaque;
    if (strstr(msg, "warning:"))
        return;
    if (m->n_errors++ == 0)
        snprintf(m->first, sizeof m->first, "%s", msg);
}

/* The text of line `line` (1-based) of src, for compile errors. */
static void kiln_tcc_line(const char *src, int line, char *out, size_t n)
{
    const char *p = src;
    for (int l = 1; l < line && p; l++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p || !*p) {
        snprintf(out, n, "?");
        return;
    }
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    while (len && (*p == ' '))
        p++, len--;
    snprintf(out, n, "%.*s", (int)(len < 200 ? len : 200), p);
}

/* A compile error as one line, with the generated line it points at
 * ("<string>:LINE: error: ..."). */
static int kiln_tcc_compile_error(kiln_plugin_error **err,
                                  const kiln_tcc_msgs *m, const char *src,
                                  const char *what)
{
    const char *msg = m->n_errors ? m->first : "unknown error";
    const char *at = strstr(msg, "<string>:");
    char line[256] = "";
    if (at && src) {
        int ln = atoi(at + 9);
        char text[220];
        kiln_tcc_line(src, ln, text, sizeof text);
        snprintf(line, sizeof line, " [generated line %d: %s]", ln, text);
    }
    return kiln_tcc_error(err, KILN_ERR_BACKEND, "%s: %s%s", what, msg, line);
}

/* ------------------------------------------------------------------ */
/* Code pages                                                           */
/* ------------------------------------------------------------------ */

/* Relocated machine code in pages of its own; shared (reference counted)
 * by an artifact and the callables loaded from it.  Either libtcc
 * relocated it into `mem` (compile) or kiln_obj_load loaded it (`obj`,
 * load_bytes). */
typedef struct kiln_tcc_code {
    atomic_int refs;
    void *mem;
    size_t size;
    kiln_obj *obj;
    kiln_kernel_fn fn;
    /* the unit's prepared-call entries (emit_c.h) */
    size_t (*plan_size)(void);
    int (*prep)(const kiln_call *call, void *plan);
    int (*run)(void *plan, const kiln_call *call);
} kiln_tcc_code;

/* The unit's entries through `lookup` (tcc_get_symbol or
 * kiln_obj_symbol): 0, or -1 when one is missing (a unit emit_c did not
 * make). */
static int kiln_tcc_entries(kiln_tcc_code *c, void *(*lookup)(void *, const char *),
                            void *ctx)
{
    void *fn = lookup(ctx, KILN_EMIT_C_SYMBOL);
    void *size = lookup(ctx, KILN_EMIT_C_PLAN_SIZE);
    void *prep = lookup(ctx, KILN_EMIT_C_PREP);
    void *run = lookup(ctx, KILN_EMIT_C_RUN);
    if (!fn || !size || !prep || !run)
        return -1;
    /* object -> function pointers */
    memcpy(&c->fn, &fn, sizeof c->fn);
    memcpy(&c->plan_size, &size, sizeof c->plan_size);
    memcpy(&c->prep, &prep, sizeof c->prep);
    memcpy(&c->run, &run, sizeof c->run);
    return 0;
}

static void *kiln_tcc_lookup_state(void *s, const char *name)
{
    return tcc_get_symbol(s, name);
}

static void *kiln_tcc_lookup_obj(void *o, const char *name)
{
    return kiln_obj_symbol(o, name);
}

static void kiln_tcc_code_unref(kiln_tcc_code *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->obj)
        kiln_obj_free(c->obj);
    else
        munmap(c->mem, c->size);
    free(c);
}

/* A TCCState with our settings: error callback first, no standard
 * library, no system headers. */
static TCCState *kiln_tcc_state(kiln_tcc_msgs *m, int output_type)
{
    TCCState *s = tcc_new();
    if (!s)
        return NULL;
    tcc_set_error_func(s, m, kiln_tcc_on_error);
    tcc_set_options(s, "-nostdlib -nostdinc");
    tcc_set_output_type(s, output_type);
    return s;
}

static void kiln_tcc_symbols(TCCState *s)
{
    tcc_add_symbol(s, "memcpy", (const void *)memcpy);
    tcc_add_symbol(s, "memmove", (const void *)memmove);
    tcc_add_symbol(s, "memset", (const void *)memset);
}

/* Link what `s` holds into fresh pages and look up the kernel.  Returns 0
 * or a kiln_code with *err set. */
static int kiln_tcc_relocate(TCCState *s, kiln_tcc_msgs *m, const char *src,
                             kiln_tcc_code **out, kiln_plugin_error **err)
{
    kiln_tcc_symbols(s);
    int size = tcc_relocate(s, NULL);
    if (size < 0)
        return kiln_tcc_compile_error(err, m, src, "link failed");
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = ((size_t)size + (size_t)pg - 1) & ~((size_t)pg - 1);
    if (len == 0)
        len = (size_t)pg;
    void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return kiln_tcc_error(err, KILN_ERR_NOMEM, "mmap of %zu bytes: %s",
                              len, strerror(errno));
    if (tcc_relocate(s, mem) < 0) {
        munmap(mem, len);
        return kiln_tcc_compile_error(err, m, src, "link failed");
    }
    kiln_tcc_code *c = malloc(sizeof *c);
    if (!c) {
        munmap(mem, len);
        return kiln_tcc_error(err, KILN_ERR_NOMEM, "out of memory");
    }
    int found = kiln_tcc_entries(c, kiln_tcc_lookup_state, s) == 0;
    /* W^X: the code writes no static data */
    if (!found || mprotect(mem, len, PROT_READ | PROT_EXEC) != 0) {
        munmap(mem, len);
        free(c);
        return kiln_tcc_error(err, KILN_ERR_BACKEND, "%s",
                              found ? "mprotect failed"
                                    : "no symbol " KILN_EMIT_C_SYMBOL
                                      " (or its prepared-call entries)");
    }
    atomic_init(&c->refs, 1);
    c->mem = mem;
    c->size = len;
    c->obj = NULL;
    *out = c;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Artifacts                                                            */
/* ------------------------------------------------------------------ */

struct kiln_artifact {
    char *src;               /* the generated C */
    kiln_tcc_code *code;     /* compiled in memory */
    unsigned char *bytes;    /* header + object, made on request */
    size_t n_bytes;
};

static void kiln_tcc_artifact_free(kiln_artifact *a)
{
    if (!a)
        return;
    free(a->src);
    kiln_tcc_code_unref(a->code);
    free(a->bytes);
    free(a);
}

static int kiln_tcc_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    char why[256];
    if (kiln_emit_c_check(k, why, sizeof why)) {
        kiln_tcc_error(err, KILN_ERR_BACKEND, "%s", why);
        return 0;
    }
    return 1;
}

static int kiln_tcc_compile(const kiln_kernel *k,
                            const kiln_compile_options *opt,
                            kiln_artifact **out, kiln_plugin_error **err)
{
    (void)opt; /* tcc does not optimise */
    if (!out)
        return kiln_tcc_error(err, KILN_ERR_ARG, "compile: no out");
    *out = NULL;
    char why[256];
    char *src = NULL;
    size_t len = 0;
    if (kiln_emit_c(k, &src, &len, why, sizeof why))
        return kiln_tcc_error(err, KILN_ERR_BACKEND, "%s", why);
    kiln_artifact *a = calloc(1, sizeof *a);
    if (!a) {
        free(src);
        return kiln_tcc_error(err, KILN_ERR_NOMEM, "out of memory");
    }
    a->src = src;
    kiln_tcc_msgs m = {"", 0};
    TCCState *s = kiln_tcc_state(&m, TCC_OUTPUT_MEMORY);
    if (!s) {
        kiln_tcc_artifact_free(a);
        return kiln_tcc_error(err, KILN_ERR_NOMEM, "tcc_new failed");
    }
    int rc = 0;
    if (tcc_compile_string(s, src) < 0)
        rc = kiln_tcc_compile_error(err, &m, src, "compile failed");
    else
        rc = kiln_tcc_relocate(s, &m, src, &a->code, err);
    tcc_delete(s);
    if (rc) {
        kiln_tcc_artifact_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

/* A callable holds a reference to its code. */
typedef struct kiln_tcc_callable {
    kiln_callable c;
    kiln_tcc_code *code;
} kiln_tcc_callable;

/* ABI 1.4 prepared calls: the unit's prep checks the call and fills a
 * plan of plan_size() bytes; the unit's run is the callable's run, so a
 * prepared call goes from the host straight into generated code. */
static int kiln_tcc_prepare(void *state, const kiln_call *call, void **out)
{
    const kiln_tcc_code *code = state;
    if (!code || !call || !out || call->struct_size < sizeof *call)
        return 1;
    /* the checks write no message here (errbuf NULL): fn reports them */
    kiln_call c = *call;
    c.struct_size = sizeof c;
    c.errbuf = NULL;
    c.errbuf_size = 0;
    size_t n = code->plan_size();
    void *plan = malloc(n ? n : 1);
    if (!plan)
        return 1;
    if (code->prep(&c, plan)) {
        free(plan);
        return 1;
    }
    *out = plan;
    return 0;
}

static void kiln_tcc_plan_free(void *plan)
{
    free(plan);
}

static int kiln_tcc_make_callable(kiln_tcc_code *code, kiln_callable **out,
                                  kiln_plugin_error **err)
{
    kiln_tcc_callable *c = calloc(1, sizeof *c);
    if (!c)
        return kiln_tcc_error(err, KILN_ERR_NOMEM, "out of memory");
    c->c.struct_size = sizeof c->c;
    c->c.fn = code->fn;
    c->c.state = code;   /* the unit's fn ignores it; prepare reads it */
    c->c.prepare = kiln_tcc_prepare;
    c->c.run = code->run;
    c->c.plan_free = kiln_tcc_plan_free;
    c->code = code;
    *out = &c->c;
    return 0;
}

static int kiln_tcc_load(const kiln_artifact *a, kiln_callable **out,
                         kiln_plugin_error **err)
{
    if (!a || !out || !a->code)
        return kiln_tcc_error(err, KILN_ERR_ARG, "load: no artifact");
    *out = NULL;
    int rc = kiln_tcc_make_callable(a->code, out, err);
    if (rc == 0)
        atomic_fetch_add(&a->code->refs, 1);
    return rc;
}

static void kiln_tcc_callable_free(kiln_callable *c)
{
    if (!c)
        return;
    kiln_tcc_callable *t = (kiln_tcc_callable *)(void *)c;
    kiln_tcc_code_unref(t->code);
    free(t);
}

/* ---- relocatable objects through an in-memory file -------------------- */

/* A file descriptor for an anonymous file, and a path tcc can open it by
 * (memfd; a temporary file when memfd is unavailable). */
static int kiln_tcc_tmpfile(char *path, size_t n)
{
    int fd = memfd_create("kiln-tcc", MFD_CLOEXEC);
    if (fd >= 0) {
        snprintf(path, n, "/proc/self/fd/%d", fd);
        if (access(path, F_OK) == 0)
            return fd;
        close(fd);
    }
    const char *dir = getenv("TMPDIR");
    snprintf(path, n, "%s/kiln-tcc-XXXXXX.o", dir && *dir ? dir : "/tmp");
    fd = mkstemps(path, 2);
    return fd;
}

static void kiln_tcc_tmpclose(int fd, const char *path)
{
    if (strncmp(path, "/proc/self/fd/", 14) != 0)
        unlink(path);
    close(fd);
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Bytes: "KILNTCC1", u64 length of the build id, the build id, u64
 * length of the object, the ELF relocatable object. */
static int kiln_tcc_make_bytes(kiln_artifact *a)
{
    kiln_tcc_msgs m = {"", 0};
    char path[4200];
    int fd = kiln_tcc_tmpfile(path, sizeof path);
    if (fd < 0)
        return -1;
    TCCState *s = kiln_tcc_state(&m, TCC_OUTPUT_OBJ);
    int rc = -1;
    if (s && tcc_compile_string(s, a->src) == 0 &&
        tcc_output_file(s, path) == 0) {
        off_t size = lseek(fd, 0, SEEK_END);
        size_t idlen = strlen(KILN_TCC_BUILD_ID);
        size_t total = 8 + 8 + idlen + 8 + (size_t)(size > 0 ? size : 0);
        unsigned char *b = size > 0 ? malloc(total) : NULL;
        if (b) {
            memcpy(b, KILN_TCC_MAGIC, 8);
            put_u64(b + 8, idlen);
            memcpy(b + 16, KILN_TCC_BUILD_ID, idlen);
            put_u64(b + 16 + idlen, (uint64_t)size);
            unsigned char *obj = b + 24 + idlen;
            size_t got = 0;
            while (got < (size_t)size) {
                ssize_t r = pread(fd, obj + got, (size_t)size - got,
                                  (off_t)got);
                if (r <= 0)
                    break;
                got += (size_t)r;
            }
            if (got == (size_t)size) {
                a->bytes = b;
                a->n_bytes = total;
                rc = 0;
            } else {
                free(b);
            }
        }
    }
    if (s)
        tcc_delete(s);
    kiln_tcc_tmpclose(fd, path);
    return rc;
}

static const void *kiln_tcc_artifact_bytes(const kiln_artifact *ca,
                                           size_t *len)
{
    kiln_artifact *a = (kiln_artifact *)ca;  /* made on first request */
    if (len)
        *len = 0;
    if (!a)
        return NULL;
    if (!a->bytes && kiln_tcc_make_bytes(a))
        return NULL;
    if (len)
        *len = a->n_bytes;
    return a->bytes;
}

static int kiln_tcc_load_bytes(const void *bytes, size_t len,
                               kiln_callable **out, kiln_plugin_error **err)
{
    const unsigned char *b = bytes;
    if (!out)
        return kiln_tcc_error(err, KILN_ERR_ARG, "load_bytes: no out");
    *out = NULL;
    size_t idlen = strlen(KILN_TCC_BUILD_ID);
    if (!b || len < 24 || memcmp(b, KILN_TCC_MAGIC, 8) != 0)
        return kiln_tcc_error(err, KILN_ERR_BACKEND, "load_bytes: not a tcc "
                              "artifact");
    uint64_t il = get_u64(b + 8);
    if (il != idlen || len < 24 + idlen ||
        memcmp(b + 16, KILN_TCC_BUILD_ID, idlen) != 0)
        return kiln_tcc_error(err, KILN_ERR_BACKEND, "load_bytes: artifact "
                              "made by another build (want %s)",
                              KILN_TCC_BUILD_ID);
    uint64_t ol = get_u64(b + 16 + idlen);
    if (ol != len - 24 - idlen)
        return kiln_tcc_error(err, KILN_ERR_BACKEND, "load_bytes: truncated "
                              "artifact (%zu bytes)", len);
    const unsigned char *obj = b + 24 + idlen;
    /* the only symbols tcc's code may name on its own (struct copies) */
    const kiln_obj_import imports[] = {
        {"memcpy", (const void *)memcpy},
        {"memmove", (const void *)memmove},
        {"memset", (const void *)memset},
    };
    const kiln_obj_options opt = {imports, sizeof imports / sizeof *imports,
                                  0};
    char why[256];
    kiln_obj *o = NULL;
    int rc = kiln_obj_load(obj, (size_t)ol, &opt, &o, why, sizeof why);
    if (rc)
        return kiln_tcc_error(err, rc, "load_bytes: %s", why);
    kiln_tcc_code *code = malloc(sizeof *code);
    if (!code) {
        kiln_obj_free(o);
        return kiln_tcc_error(err, KILN_ERR_NOMEM, "out of memory");
    }
    if (kiln_tcc_entries(code, kiln_tcc_lookup_obj, o)) {
        kiln_obj_free(o);
        free(code);
        return kiln_tcc_error(err, KILN_ERR_BACKEND, "load_bytes: no symbol "
                              KILN_EMIT_C_SYMBOL " (or its prepared-call "
                              "entries)");
    }
    atomic_init(&code->refs, 1);
    code->mem = NULL;
    code->size = kiln_obj_size(o);
    code->obj = o;
    rc = kiln_tcc_make_callable(code, out, err);
    if (rc)
        kiln_tcc_code_unref(code);
    return rc;
}

static const kiln_backend kiln_tcc_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "tcc",
    .version = KILN_VERSION_STRING,
    .build_id = KILN_TCC_BUILD_ID,
    .flags = 0, /* libtcc 0.9.27 is not thread-safe: the host serialises */
    .supports = kiln_tcc_supports,
    .compile = kiln_tcc_compile,
    .load = kiln_tcc_load,
    .artifact_bytes = kiln_tcc_artifact_bytes,
    .load_bytes = kiln_tcc_load_bytes,
    .artifact_free = kiln_tcc_artifact_free,
    .callable_free = kiln_tcc_callable_free,
    .error_free = kiln_tcc_error_free,
};

__attribute__((visibility("default"))) const kiln_backend *
kiln_backend_entry(uint32_t host_abi_major, uint32_t host_abi_minor,
                   char *errbuf, size_t errbuf_size);

__attribute__((visibility("default"))) const kiln_backend *
kiln_backend_entry(uint32_t host_abi_major, uint32_t host_abi_minor,
                   char *errbuf, size_t errbuf_size)
{
    (void)host_abi_minor;
    if (host_abi_major != KILN_ABI_MAJOR) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "tcc: built for plugin ABI %d, the "
                     "host speaks ABI %u", KILN_ABI_MAJOR,
                     (unsigned)host_abi_major);
        return NULL;
    }
    return &kiln_tcc_backend;
}
