/*
 * llvm.c — the LLVM backend plugin: optimised, vectorised kernels built
 * directly as LLVM IR through the LLVM-C API (LLVM 14).
 *
 * What is compiled.  Every kernel kind becomes machine code: ELEMWISE,
 * REDUCE and LOOP (the ones with a scalar program), GATHER, JOIN, SCATTER
 * and DOT.  For each kernel
 * one LLVM module holds a few *row functions*, each a single loop over one
 * row of the (coalesced) iteration space:
 *
 *     void kiln_ec(int64_t n, void **ptrs, const int64_t *st,
 *                  const kiln_runtime *rt, void *acc)
 *
 *   kiln_ec / kiln_es   ELEMWISE, contiguous / strided: out[j] = prog(j)
 *   kiln_rc / kiln_rs   REDUCE into one scalar: *acc = fold(prog(j)), in
 *                       order, from the identity (the interpreter's block
 *                       accumulator: double for f32)
 *   kiln_uc / kiln_us   REDUCE along a kept axis: o[j] = op(o[j], prog(j))
 *                       (not emitted when reduce_axes covers every axis)
 *   kiln_gk / kiln_gc   GATHER: check a row of indices / copy x[idx[j]]
 *   kiln_jc / kiln_js   JOIN: copy a row into the output's slice,
 *                       contiguous (memcpy) / strided
 *   kiln_sk / kiln_sc   SCATTER: check a row of indices / set or add the
 *                       values at x[..., idx[j], ...] (one element or one
 *                       row of a sub-array per index), in order
 *   kiln_db / kiln_dl   DOT: call rt->dgemm/sgemm with the arguments in
 *                       st / the interpreter's triple loop (strides BLAS
 *                       cannot take)
 *   kiln_lc / kiln_ls   LOOP (ABI 1.5): each output by its role: ITER
 *                       stored, REDUCE folded into acc (8 bytes per
 *                       output), SCATTER added at its index
 *   kiln_luc / kiln_lus LOOP whose REDUCE outputs fold along a kept axis
 *   kiln_lk             LOOP: the index check, *acc = 1 when an index of
 *                       the row (a TAKE's, a SCATTER's) is out of range
 *
 * `ptrs` holds one base pointer per view (inputs, then outputs), `st` the
 * inner strides in elements (strided versions only).  The signature is
 * fixed, whatever the kernel's width (design invariant 1).  The
 * contiguous versions mark input loads and output stores with disjoint
 * alias scopes (`!alias.scope`/`!noalias`), so LLVM vectorises them with
 * no run-time overlap checks and for any number of inputs; the element-
 * for-element aliasing the ABI allows (an in-place update) is safe under
 * that promise because every element is loaded before it is stored and no
 * other index touches it.
 *
 * LOOP kernels: KILN_I_TAKE loads from a TABLE view's base pointer at
 * index * stride; tables and scatter targets are not walked, their
 * element strides and extents follow the inner strides in st (st[nv + v],
 * st[2 nv + v]).  Each 256-element block of the interpreter's loop walk
 * is checked by kiln_lk first; a block that fails is run by the
 * interpreter's own loop body, which reports its exact message.  A
 * SCATTER output runs in a register (kl_emit_scatter_run): while its
 * index repeats the row adds into the target's value held in a
 * register, storing it and loading the next target when the index
 * changes and at the end of the row (each SCATTER output its own run;
 * the same additions in the same order; segmented rows add through
 * memory).  A prepared LOOP over one row of at most one block whose
 * REDUCE outputs are single elements skips the walk (kl_loop1_init,
 * kl_run_loop1): identity, kiln_lk, the row (kiln_ls with stride 0 for a
 * broadcast input), the block's combination, MEAN's division; a failed
 * check falls back to the walk.
 *
 * The walk over the outer dimensions, the view checks, the 256-element
 * reduction blocks, the output initialisation, MEAN's division and the
 * error messages are the interpreter's own code (this file includes
 * backends/interp/interp.c), so the order of every floating-point
 * operation is the interpreter's and results agree bit for bit.  A row
 * whose inputs are contiguous or broadcast (inner stride 0) runs the
 * contiguous function, the broadcast values splatted into small stack
 * buffers; other rows run the strided function.
 *
 * A program of more than KL_SEG instructions is cut into segment
 * functions called per strip of the row (see "Wide programs" below):
 * code generation is superlinear in the size of one loop body.
 *
 * JOIN, SCATTER and DOT: each has a *plan* (kl_jplan, kl_splan,
 * kl_dplan), everything that does not depend on the data — the
 * interpreter's shape checks and coalesced walks, the row functions' st
 * arrays, BLAS's transpose flags and leading dimensions — made once per
 * shape signature by a prepared call (ABI 1.4), or on the stack by an
 * unprepared one; a steady-state call then only swaps pointers and calls
 * rows.  Messages are the interpreter's (its check functions, split out
 * of its runners, are called here); an index out of range is found by
 * the compiled check and reported by the interpreter's.  A SCATTER whose
 * per-index sub-array does not coalesce to one row runs on the embedded
 * interpreter; so does a sub-array GATHER.
 *
 * fast_math (off by default): function attributes for the code generator
 * (unsafe-fp-math, no-signed-zeros, approx-func, less-precise-fpmad) and
 * forced vectorisation of reductions into a scalar, which lets the loop
 * vectoriser reorder the fold (kl_loop_md); results then agree with the
 * interpreter within a tolerance, not bitwise.
 *
 * Math: + - * / sqrt fabs and comparisons are inline (sqrt through
 * llvm.sqrt, which is correctly rounded like libm's); every other
 * function is called through the runtime table (call->rt), so results are
 * the interpreter's digits and the code embeds no addresses.
 *
 * The artifact is an ELF object file in memory, emitted by a target
 * machine for the host CPU, behind a small header and a copy of the
 * kernel description; load and load_bytes are one function that links the
 * object with kiln's own ELF loader (core/objload.c; memcpy, memmove and
 * memset, which LLVM may call, are imported).
 *
 * Thread safety: one LLVMContext, module, target machine and JIT per
 * compile or callable; the process-wide LLVM set-up (targets, the
 * alias-set saturation threshold) runs once under pthread_once before any
 * compile.  The descriptor carries KILN_BACKEND_THREAD_SAFE.
 */
#define _GNU_SOURCE     /* dladdr (front.c) */
#ifdef HAVE_CONFIG_H
#include "config.h"     /* KILN_LLVM_VERSION */
#endif
#define KILN_INTERP_BUILTIN 1   /* the embedded interpreter's entry is not ours */
#include "../interp/interp.c"

#ifndef KL_FRONT
#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#endif

#include <pthread.h>
#ifdef KL_FRONT
#include "objload.h"   /* core/objload.h: kiln's ELF object loader */
#endif

#define KL_BUILD_ID "llvm-3"
#define KL_MAGIC 0x564c4c4bu  /* "KLLV" */
#define KL_FORMAT 2u   /* 2: LOOP kernels carry their roles */
#define KL_SPLAT 256          /* elements of one broadcast splat buffer */
#define KL_MAX_SPLAT 16       /* broadcast inputs splatted per row */
#define KL_MAX_ACC 64         /* outputs of one reduction (accumulators) */
#define KL_SEG 512            /* instructions of one segment ("Wide programs") */

#ifndef KILN_LLVM_VERSION
#define KILN_LLVM_VERSION "14"
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                               */
/* ------------------------------------------------------------------ */

static int kl_fail(kiln_plugin_error **err, int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err)
        *err = kiln_interp_error_new(code, "llvm: %s", msg);
    return code;
}

#include "setup.c"

#include "desc.c"

#include "kernel.c"

#include "cg.c"

#include "instr.c"

#include "rows.c"

#include "segment.c"

#include "rowfn.c"

#include "load.c"

#include "run.c"

#include "gather.c"

#include "join.c"

#include "scatter.c"

#include "dot.c"

#include "build.c"

/* ------------------------------------------------------------------ */
/* Plugin entry points: supports, compile, artifacts                     */
/* ------------------------------------------------------------------ */

#ifndef KL_FRONT
struct kl_artifact {
    struct kiln_artifact base; /* unused; kiln_artifact is interp's type */
    size_t len;
    unsigned char *bytes;
};

#endif /* !KL_FRONT */

#ifdef KL_FRONT
static int kl_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    kiln_kernel full;
    return kl_check(k, &full, err) == 0;
}
#else

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
#endif /* !KL_FRONT */

#include "call.c"

/* One compile and one JIT load of a trivial kernel inside pthread_once:
 * libLLVM creates some process-wide objects lazily (timer groups, the
 * dynamic-library lock); creating them here, before any thread can race
 * to create them, publishes them to every later compile (and keeps
 * ThreadSanitizer, which cannot see libLLVM's own atomics, quiet). */

#ifndef KL_FRONT
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

/* ------------------------------------------------------------------ */
/* The compiler module's table, or the plugin's descriptor              */
/* ------------------------------------------------------------------ */

#include "codegen.h"

/* Exit while a compile runs.  libLLVM's C++ static destructors are
 * registered with __cxa_atexit when it is loaded, and at exit they run
 * before anything registered earlier — libkiln's own destructors
 * included — so a compile on another thread (kiln's background tier-1
 * pool: core/tier.c) would run in a half-destroyed LLVM and crash.  This
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
 * waits for its compiles before a fork (core/tier.c); a compile on some
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
 * registrations of its exit gate (core/tier.c, "Exit"), so that the
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
#else
#include "front.c"
#endif
