/*
 * module.c — the compiler module llvm_codegen.so: compile, artifacts and
 * IR text as the plugin's table calls them, the warm-up compile, the
 * exit gate that waits for compiles in flight, and the table.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

struct kl_artifact {
    struct kiln_artifact base; /* unused; kiln_artifact is interp's type */
    size_t len;
    unsigned char *bytes;
};

static int kl_compile(const kiln_kernel *k, const kiln_compile_options *opt,
                      kiln_artifact **out, kiln_plugin_error **err)
{
    kiln_kernel full;
    if (!out)
        return kl_fail(err, KILN_ERR_ARG, "compile: no out");
    *out = NULL;
    if (kl_check(k, &full, err))
        return KILN_ERR_BACKEND;
    LLVMMemoryBufferRef obj = NULL;
    if (kl_native(full.kind)) {
        if (kl_ready(err))
            return KILN_ERR_BACKEND;
        int rc = kl_codegen(&full, opt, &obj, NULL, err);
        if (rc)
            return rc;
    }
    struct kl_artifact *a = calloc(1, sizeof *a);
    if (a)
        a->bytes = kl_pack(&full, obj ? LLVMGetBufferStart(obj) : NULL,
                           obj ? LLVMGetBufferSize(obj) : 0, &a->len);
    if (obj)
        LLVMDisposeMemoryBuffer(obj);
    if (!a || !a->bytes) {
        free(a);
        return kl_fail(err, KILN_ERR_NOMEM, "out of memory");
    }
    *out = &a->base;
    return KILN_OK;
}

static const void *kl_artifact_bytes(const kiln_artifact *a, size_t *len)
{
    const struct kl_artifact *k = (const struct kl_artifact *)(const void *)a;
    *len = k->len;
    return k->bytes;
}

static void kl_artifact_free(kiln_artifact *a)
{
    struct kl_artifact *k = (struct kl_artifact *)(void *)a;
    if (!k)
        return;
    free(k->bytes);
    free(k);
}

static int kl_emit_text(const kiln_kernel *k, const kiln_compile_options *opt,
                        char **text, kiln_plugin_error **err)
{
    kiln_kernel full;
    if (!text)
        return kl_fail(err, KILN_ERR_ARG, "emit_text: no text");
    *text = NULL;
    if (kl_check(k, &full, err))
        return KILN_ERR_BACKEND;
    if (!kl_native(full.kind)) {
        const char *msg = "; runs on the embedded interpreter (no code)\n";
        *text = malloc(strlen(msg) + 1);
        if (!*text)
            return kl_fail(err, KILN_ERR_NOMEM, "out of memory");
        memcpy(*text, msg, strlen(msg) + 1);
        return KILN_OK;
    }
    if (kl_ready(err))
        return KILN_ERR_BACKEND;
    char *llvm_text = NULL;
    int rc = kl_codegen(&full, opt, NULL, &llvm_text, err);
    if (rc)
        return rc;
    size_t n = strlen(llvm_text);
    *text = malloc(n + 1);
    if (*text)
        memcpy(*text, llvm_text, n + 1);
    LLVMDisposeMessage(llvm_text);
    return *text ? KILN_OK : kl_fail(err, KILN_ERR_NOMEM, "out of memory");
}

static void kl_text_free(char *text)
{
    free(text);
}

/* One compile and one JIT load of a trivial kernel inside pthread_once:
 * libLLVM creates some process-wide objects lazily (timer groups, the
 * dynamic-library lock); creating them here, before any thread can race
 * to create them, publishes them to every later compile (and keeps
 * ThreadSanitizer, which cannot see libLLVM's own atomics, quiet). */

static void kl_warm_up(void)
{
    static const kiln_arg_desc d = {KILN_F64, 1, {0}};
    static const kiln_instr p = {KILN_I_CONST, KILN_F64, 0, -1, -1, -1, 1.0};
    static const int32_t ref = 0;
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = KILN_KERNEL_ELEMWISE;
    k.n_outputs = 1;
    k.outputs = &d;
    k.n_instrs = 1;
    k.instrs = &p;
    k.out_refs = &ref;
    LLVMMemoryBufferRef obj = NULL;
    if (kl_codegen(&k, NULL, &obj, NULL, NULL) || !obj)
        return;
    LLVMOrcLLJITRef jit = NULL;
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&jit, NULL);
    if (e) {
        LLVMConsumeError(e);
        LLVMDisposeMemoryBuffer(obj);
        return;
    }
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(jit);
    LLVMOrcDefinitionGeneratorRef gen = NULL;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL);
    if (!e) {
        LLVMOrcJITDylibAddGenerator(jd, gen);
        e = LLVMOrcLLJITAddObjectFile(jit, jd, obj);  /* takes obj */
        LLVMOrcExecutorAddress addr = 0;
        if (!e)
            e = LLVMOrcLLJITLookup(jit, &addr, "kiln_ec");
    } else {
        LLVMDisposeMemoryBuffer(obj);
    }
    if (e)
        LLVMConsumeError(e);
    e = LLVMOrcDisposeLLJIT(jit);
    if (e)
        LLVMConsumeError(e);
}

#include "codegen.h"

/* Exit while a compile runs.  libLLVM's C++ static destructors are
 * registered with __cxa_atexit when it is loaded, and at exit they run
 * before anything registered earlier — libkiln's own destructors
 * included — so a compile on another thread (kiln's background tier-1
 * pool: core/runtime/tier.c) would run in a half-destroyed LLVM and crash.  This
 * module is loaded after libLLVM, so the handler its constructor
 * registers runs before those destructors: it waits for the compiles in
 * flight and refuses new ones.  LLVM also makes function-local statics
 * on first use, during compiles, whose destructors are registered then
 * and so run before a handler registered earlier ("pure virtual method
 * called" at exit, seen in CI): the handler is registered again after
 * each of the first KL_EXIT_REREGISTER compiles, by when the statics a
 * compile needs exist (a bounded number of entries in the exit list). */
#define KL_EXIT_REREGISTER 4096
static pthread_mutex_t kl_busy_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kl_busy_cond = PTHREAD_COND_INITIALIZER;
static int kl_busy, kl_exiting;

static void kl_exit_wait(void)
{
    pthread_mutex_lock(&kl_busy_lock);
    kl_exiting = 1;
    while (kl_busy > 0)
        pthread_cond_wait(&kl_busy_cond, &kl_busy_lock);
    pthread_mutex_unlock(&kl_busy_lock);
}

/* fork(): the compiles in flight are the parent's; the child's count
 * starts at 0, or its kl_exit_wait would wait for them forever.  There
 * is no prepare handler that takes kl_busy_lock: this module is loaded
 * after libkiln's tier pool registered its own handlers, so ours would
 * run first, and the pool's, waiting for its compiles in flight, would
 * then wait for a kl_leave blocked on the lock (a deadlock).  The pool
 * waits for its compiles before a fork (core/runtime/tier.c); a compile on some
 * other thread of the caller's across fork() is the caller's to avoid,
 * as LLVM's own rule is. */
static void kl_fork_child(void)
{
    pthread_mutex_init(&kl_busy_lock, NULL);
    pthread_cond_init(&kl_busy_cond, NULL);
    kl_busy = 0;
}

__attribute__((constructor)) static void kl_register_exit_wait(void)
{
    atexit(kl_exit_wait);
    (void)pthread_atfork(NULL, NULL, kl_fork_child);
}

static int kl_enter(kiln_plugin_error **err)
{
    pthread_mutex_lock(&kl_busy_lock);
    int ok = !kl_exiting;
    kl_busy += ok;
    pthread_mutex_unlock(&kl_busy_lock);
    return ok ? 0 : kl_fail(err, KILN_ERR_BACKEND, "llvm: the process is "
                            "exiting");
}

static void kl_leave(void)
{
    static int compiles;
    pthread_mutex_lock(&kl_busy_lock);
    if (--kl_busy == 0)
        pthread_cond_broadcast(&kl_busy_cond);
    int again = !kl_exiting && compiles < KL_EXIT_REREGISTER;
    compiles += again;
    pthread_mutex_unlock(&kl_busy_lock);
    if (again)
        atexit(kl_exit_wait);
}

static int kl_compile_guarded(const kiln_kernel *k,
                              const kiln_compile_options *opt,
                              kiln_artifact **out, kiln_plugin_error **err)
{
    if (kl_enter(err))
        return KILN_ERR_BACKEND;
    int rc = kl_compile(k, opt, out, err);
    kl_leave();
    return rc;
}

static int kl_emit_text_guarded(const kiln_kernel *k,
                                const kiln_compile_options *opt, char **text,
                                kiln_plugin_error **err)
{
    if (kl_enter(err))
        return KILN_ERR_BACKEND;
    int rc = kl_emit_text(k, opt, text, err);
    kl_leave();
    return rc;
}

/* Everything a compile sets up once — targets, command-line options,
 * the function-local statics of a whole compile and JIT (kl_warm_up) —
 * now, on this thread: the host calls it (compiler_init) between two
 * registrations of its exit gate (core/runtime/tier.c, "Exit"), so that the
 * destructors of all that run after a gate that waits for compiles. */
static int kl_init_guarded(kiln_plugin_error **err)
{
    if (kl_enter(err))
        return KILN_ERR_BACKEND;
    int rc = kl_ready(err);
    kl_leave();
    return rc;
}

static const kl_codegen_table kl_table = {
    .struct_size = sizeof(kl_codegen_table),
    .compile = kl_compile_guarded,
    .artifact_bytes = kl_artifact_bytes,
    .artifact_free = kl_artifact_free,
    .emit_text = kl_emit_text_guarded,
    .text_free = kl_text_free,
    .error_free = kiln_interp_error_free,
    .init = kl_init_guarded,
};

__attribute__((visibility("default")))
const kl_codegen_table *kiln_llvm_codegen_entry(void);

const kl_codegen_table *kiln_llvm_codegen_entry(void)
{
    return &kl_table;
}
