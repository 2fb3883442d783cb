/*
 * front.c — the llvm plugin as the host loads it (included at the end of
 * llvm.c when built with -DKL_FRONT).
 *
 * The plugin itself never links libLLVM.  It checks kernels, loads
 * artifacts (ELF objects) with kiln's own loader (core/plugin/objload.c), runs
 * them, and reports its target; compiling and printing IR are forwarded
 * to the compiler module llvm_codegen.so next to this file, dlopened the
 * first time a kernel must be compiled.  A process whose kernels all come
 * from the disk cache therefore pays neither libLLVM's ~29 ms of loading
 * nor its ~49 MB.
 *
 * The compiler module is code like a plugin, and is trusted the same way
 * (core/support/trust.h, linked into this plugin as its own copy of libkiln's
 * code): this plugin's directory (the real path of the file it was loaded
 * from) is opened and checked with every ancestor, llvm_codegen.so is
 * opened in it by descriptor and checked, and that one descriptor is both
 * hashed for build_id and, later, dlopen'ed ("/proc/self/fd/N").  When
 * the module is there but refused, the entry fails with one line saying
 * which file and why, and the host falls back as for any plugin that
 * cannot be used.
 *
 * build_id: "llvm-N/cg-HASH" where HASH is XXH3-64 of the compiler
 * module's file, so that a rebuilt code generator gets a new cache
 * directory even though this file did not change (the host hashes this
 * file's own bytes too: kiln_loader_build_hash).
 */
#include "codegen.h"
#include "objload.h"
#include "trust.h"
#include "target.c"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

__attribute__((visibility("default")))
const kiln_backend *kiln_backend_entry(uint32_t host_abi_major,
                                       uint32_t host_abi_minor, char *errbuf,
                                       size_t errbuf_size);

static pthread_once_t kl_cg_once = PTHREAD_ONCE_INIT;
static pthread_once_t kl_id_once = PTHREAD_ONCE_INIT;
static const kl_codegen_table *kl_cg;
static char kl_cg_why[PATH_MAX + 8600];
static char kl_cg_path[PATH_MAX + 32];
static char kl_build_id[64];
static int kl_cg_fd = -1;       /* the checked module; open for good */
static int kl_cg_refused;       /* there, but refused: the entry fails */

/* Open llvm_codegen.so in the directory this plugin's file lies in (the
 * real path: the host loads plugins through /proc/self/fd/N) under
 * trust.h's rule, into kl_cg_fd; or say why not in kl_cg_why. */
static void kl_cg_locate(void)
{
    Dl_info info;
    void *self;
    char real[PATH_MAX], why[8400];
    kiln_backend_entry_fn e = kiln_backend_entry;
    memcpy(&self, &e, sizeof self);
    if (!dladdr(self, &info) || !info.dli_fname ||
        !realpath(info.dli_fname, real) || !strrchr(real, '/')) {
        kl_cg_path[0] = '\0';
        snprintf(kl_cg_why, sizeof kl_cg_why, "llvm: cannot locate the "
                 "compiler module llvm_codegen.so");
        return;
    }
    char *slash = strrchr(real, '/');
    if (slash == real)
        slash[1] = '\0';
    else
        *slash = '\0';
    snprintf(kl_cg_path, sizeof kl_cg_path, "%s/llvm_codegen.so",
             slash == real ? "" : real);
    int dfd = kiln_trust_open_dir(-1, NULL, real, 1, why, sizeof why);
    int fd = dfd < 0 ? dfd : kiln_trust_open_file(dfd, real,
                                                  "llvm_codegen.so", 1, 1,
                                                  why, sizeof why);
    if (dfd >= 0)
        close(dfd);
    if (fd >= 0) {
        kl_cg_fd = fd;
        return;
    }
    /* a missing module is no refusal: kernels may all come from caches */
    kl_cg_refused = fd == -2 || (dfd == -2 && access(kl_cg_path, F_OK) == 0);
    if (kl_cg_refused)
        snprintf(kl_cg_why, sizeof kl_cg_why, "llvm: refusing the compiler "
                 "module %s: %s", kl_cg_path, why);
    else
        snprintf(kl_cg_why, sizeof kl_cg_why, "llvm: cannot load the "
                 "compiler module %s: %s", kl_cg_path, strerror(ENOENT));
}

static void kl_id_init(void)
{
    kl_cg_locate();
    uint64_t h = 0;
    XXH3_state_t *st = kl_cg_fd >= 0 ? XXH3_createState() : NULL;
    if (st) {
        XXH3_64bits_reset(st);
        char buf[65536];
        ssize_t n;
        off_t off = 0;
        while ((n = pread(kl_cg_fd, buf, sizeof buf, off)) > 0) {
            XXH3_64bits_update(st, buf, (size_t)n);
            off += n;
        }
        h = XXH3_64bits_digest(st);
        XXH3_freeState(st);
    }
    if (h)
        snprintf(kl_build_id, sizeof kl_build_id, "%s/cg-%016llx",
                 KL_BUILD_ID, (unsigned long long)h);
    else
        snprintf(kl_build_id, sizeof kl_build_id, "%s/cg-missing",
                 KL_BUILD_ID);
}

static kiln_backend kl_backend;

/* Once, before the entry hands out the descriptor: writing it at every
 * entry call raced with threads reading it (two loaders, or a host
 * reading build_id while another thread called the entry). */
static void kl_id_once_init(void)
{
    kl_id_init();
    kl_backend.build_id = kl_build_id;
}

static void kl_cg_open(void)
{
    pthread_once(&kl_id_once, kl_id_once_init);
    if (kl_cg_fd < 0)
        return;             /* kl_cg_why says why */
    /* the descriptor that was checked and hashed is what is loaded; it
     * stays open (the dynamic loader knows the module by its name) */
    char self[64];
    kiln_trust_fd_path(kl_cg_fd, self, sizeof self);
    void *h = dlopen(self, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(kl_cg_why, sizeof kl_cg_why, "llvm: cannot load the "
                 "compiler module: %s", e ? e : kl_cg_path);
        return;
    }
    void *sym = dlsym(h, KL_CODEGEN_ENTRY);
    kl_codegen_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const kl_codegen_table *t = sym ? entry() : NULL;
    if (!t || t->struct_size < sizeof(kl_codegen_table)) {
        snprintf(kl_cg_why, sizeof kl_cg_why, "llvm: %s is not this "
                 "plugin's compiler module", kl_cg_path);
        dlclose(h);
        return;
    }
    kl_cg = t;   /* the module stays loaded: its artifacts may live on */
}

static int kl_cg_get(kiln_plugin_error **err)
{
    pthread_once(&kl_cg_once, kl_cg_open);
    if (!kl_cg)
        return kl_fail(err, KILN_ERR_BACKEND, "%s", kl_cg_why + 6);
    return 0;
}

/* A compiler-module error, copied into one of ours. */
static int kl_cg_error(kiln_plugin_error **err, int rc,
                       kiln_plugin_error *ce)
{
    if (err)
        *err = kiln_interp_error_new(ce ? ce->code : rc, "%s",
                                     ce && ce->message ? ce->message
                                                       : "llvm: failed");
    if (ce)
        kl_cg->error_free(ce);
    return rc ? rc : KILN_ERR_BACKEND;
}

static int kl_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    kiln_kernel full;
    return kl_check(k, &full, err) == 0;
}

static int kl_compile(const kiln_kernel *k, const kiln_compile_options *opt,
                      kiln_artifact **out, kiln_plugin_error **err)
{
    if (kl_cg_get(err))
        return KILN_ERR_BACKEND;
    kiln_plugin_error *ce = NULL;
    int rc = kl_cg->compile(k, opt, out, &ce);
    return rc ? kl_cg_error(err, rc, ce) : KILN_OK;
}

static const void *kl_artifact_bytes(const kiln_artifact *a, size_t *len)
{
    if (len)
        *len = 0;
    return a && kl_cg ? kl_cg->artifact_bytes(a, len) : NULL;
}

static void kl_artifact_free(kiln_artifact *a)
{
    if (a && kl_cg)
        kl_cg->artifact_free(a);
}

/* A fresh artifact loads like a cached one: through its bytes. */
static int kl_load(const kiln_artifact *a, kiln_callable **out,
                   kiln_plugin_error **err)
{
    size_t len = 0;
    const void *bytes = kl_artifact_bytes(a, &len);
    if (!bytes)
        return kl_fail(err, KILN_ERR_ARG, "load: no artifact");
    return kl_load_bytes(bytes, len, out, err);
}

static int kl_emit_text(const kiln_kernel *k, const kiln_compile_options *opt,
                        char **text, kiln_plugin_error **err)
{
    if (kl_cg_get(err))
        return KILN_ERR_BACKEND;
    kiln_plugin_error *ce = NULL;
    int rc = kl_cg->emit_text(k, opt, text, &ce);
    return rc ? kl_cg_error(err, rc, ce) : KILN_OK;
}

static void kl_text_free(char *text)
{
    if (text && kl_cg)
        kl_cg->text_free(text);
}

/* compiler_init (ABI 1.6): load the compiler module and libLLVM and set
 * LLVM up on the calling thread, all at once, between the host's two
 * registrations of its exit gate (docs/backends.md, "Exit during
 * tier-up"). */
static int kl_compiler_init(kiln_plugin_error **err)
{
    if (kl_cg_get(err))
        return KILN_ERR_BACKEND;
    kiln_plugin_error *ce = NULL;
    int rc = kl_cg->init(&ce);
    return rc ? kl_cg_error(err, rc, ce) : KILN_OK;
}

static int kl_target(const kiln_compile_options *opt, char *buf, size_t size)
{
    int generic = opt && opt->struct_size >=
                             offsetof(kiln_compile_options, generic_target) +
                                 sizeof(int) && opt->generic_target;
    return kl_host_target(generic, buf, size);
}

static kiln_backend kl_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "llvm",
    .version = KILN_VERSION_STRING "+llvm" KILN_LLVM_VERSION,
    .build_id = KL_BUILD_ID,
    .flags = KILN_BACKEND_THREAD_SAFE,
    .supports = kl_supports,
    .compile = kl_compile,
    .load = kl_load,
    .artifact_bytes = kl_artifact_bytes,
    .load_bytes = kl_load_bytes,
    .artifact_free = kl_artifact_free,
    .callable_free = kl_callable_free,
    .error_free = kiln_interp_error_free,
    .emit_text = kl_emit_text,
    .text_free = kl_text_free,
    .target = kl_target,
    .compiler_init = kl_compiler_init,
};

const kiln_backend *kiln_backend_entry(uint32_t host_abi_major,
                                       uint32_t host_abi_minor, char *errbuf,
                                       size_t errbuf_size)
{
    (void)host_abi_minor;
    if (host_abi_major != KILN_ABI_MAJOR) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "llvm: built for plugin ABI %d, the "
                     "host speaks ABI %u", KILN_ABI_MAJOR,
                     (unsigned)host_abi_major);
        return NULL;
    }
    pthread_once(&kl_id_once, kl_id_once_init);
    if (kl_cg_refused) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "%s", kl_cg_why);
        return NULL;
    }
    return &kl_backend;
}
