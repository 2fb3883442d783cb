/*
 * interp.c — the interpreter backend, kiln's always-available fallback.
 *
 * A plugin like any other (it exports kiln_backend_entry), but it needs
 * nothing beyond libc: "compiling" a kernel deep-copies its description,
 * and loading it prepares the scalar program for block execution.
 *
 * How a scalar program runs (ELEMWISE, REDUCE and LOOP kernels): the iteration
 * space is walked row by row along its innermost (coalesced) dimension,
 * in blocks of up to KILN_INTERP_BLOCK elements.  Each instruction runs
 * once per block as a tight loop over a block register (one slot per
 * element, stored as the instruction's dtype), so the dispatch cost is
 * paid per block, not per element.  At load, dead instructions are
 * dropped, CONST instructions are hoisted (filled once per call) and
 * registers are reused once their last reader has run, so the register
 * file is as large as the program's peak number of live values.
 *
 * This file is the plugin: its table, entry point and the dispatch of a
 * call by kernel kind (kiln_interp_call).  Everything else is in the
 * parts it #includes below, one concept a file (backends/interp/), so
 * that the interpreter stays one translation unit: libkiln's built-in
 * copy (core/plugin/interp_builtin.c), tests/interp_plugin.c and the llvm
 * backend (backends/llvm/llvm.c) include this file and use its static
 * functions.  Prefix: kiln_interp_ throughout.
 *
 * Thread safety: a callable's state is read-only after load; every call
 * uses its own register file, on the stack when it fits in
 * KILN_INTERP_STACK_BYTES and from malloc otherwise.  The descriptor
 * therefore carries KILN_BACKEND_THREAD_SAFE.  (Calls use up to 64 KiB of
 * stack: threads that run kernels need a stack larger than that.)
 */
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KILN_INTERP_BLOCK 256
/* Bytes of one block register: 256 slots of up to 8 bytes. */
#define KILN_INTERP_REG_BYTES (KILN_INTERP_BLOCK * 8)
/* Per-call workspace kept on the stack up to this size (32 registers). */
#define KILN_INTERP_STACK_BYTES 65536
/* Changes whenever the interpreter's results for a kernel may change. */
#define KILN_INTERP_BUILD_ID "interp-1"

/* The parts, in the order a kernel meets them: its description checked
 * and copied, its program prepared, a call walked over its views, then
 * each kind's runner.  One translation unit (every helper static). */
#include "names.c"      /* names, the opcode table, errors */
#include "check.c"      /* reading and checking kernel descriptions */
#include "artifact.c"   /* the artifact: a deep copy of the kernel */
#include "prog.c"       /* the scalar program prepared at load */
#include "call.c"       /* callables, calls and the views' checks */
#include "iter.c"       /* the strided walk in blocks */
#include "scalar.c"     /* every opcode over a block */
#include "block.c"      /* a scalar program over one block */
#include "elemwise.c"   /* ELEMWISE's body */
#include "reduce.c"     /* REDUCE's body, identities, MEAN */
#include "loop.c"       /* LOOP's body: outputs by role */
#include "program.c"    /* the program kinds' strides, plan and run */
#include "copy.c"       /* copy plans between views (JOIN, GATHER, SCATTER) */
#include "join.c"       /* JOIN */
#include "take.c"       /* GATHER and SCATTER */
#include "dot.c"        /* DOT */
#include "scan.c"       /* SCAN */
#include "linalg.c"     /* LINALG (through the runtime's lapack_run) */
#include "recur.c"      /* RECUR with a program: the fused scan loop */

/* ------------------------------------------------------------------ */
/* The plugin interface                                                 */
/* ------------------------------------------------------------------ */

static int kiln_interp_call(void *state, const kiln_call *call)
{
    const kiln_interp_state *s = state;
    if (!s || !call
        || call->struct_size < offsetof(kiln_call, rt) + sizeof(call->rt))
        return KILN_ERR_ARG;
    const kiln_kernel *k = &s->art->k;
    kiln_interp_run r = { .s = s, .k = k, .call = call, .rt = call->rt,
                          .label = k->label ? k->label
                                            : kiln_interp_kind_name(k->kind) };
    int rc = kiln_interp_check_call(&r);
    if (rc)
        return rc;
    switch (k->kind) {
    case KILN_KERNEL_ELEMWISE:
    case KILN_KERNEL_REDUCE:
    case KILN_KERNEL_LOOP:
        return kiln_interp_program_kind(&r);
    case KILN_KERNEL_JOIN:
        return kiln_interp_join(&r);
    case KILN_KERNEL_GATHER:
    case KILN_KERNEL_SCATTER:
        return kiln_interp_take(&r);
    case KILN_KERNEL_SCAN:
        return kiln_interp_scan(&r);
    case KILN_KERNEL_LINALG:
        return kiln_interp_linalg(&r);
    case KILN_KERNEL_RECUR:
        return kiln_interp_recur(&r);
    default:
        return kiln_interp_dot(&r);
    }
}

static int kiln_interp_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    char why[256];
    kiln_kernel full;
    if (kiln_interp_kernel_read(k, &full, why, sizeof why)
        || kiln_interp_check(&full, why, sizeof why)) {
        kiln_interp_report(err, KILN_ERR_BACKEND, why);
        return 0;
    }
    return 1;
}

static int kiln_interp_compile(const kiln_kernel *k,
                               const kiln_compile_options *opt,
                               kiln_artifact **out, kiln_plugin_error **err)
{
    char why[256];
    kiln_kernel full;
    (void)opt; /* nothing to tune: the interpreter has no code to make */
    if (!out)
        return kiln_interp_report(err, KILN_ERR_ARG, "compile: no out");
    *out = NULL;
    if (kiln_interp_kernel_read(k, &full, why, sizeof why)
        || kiln_interp_check(&full, why, sizeof why))
        return kiln_interp_report(err, KILN_ERR_BACKEND, why);
    *out = kiln_interp_copy(&full);
    if (!*out)
        return kiln_interp_report(err, KILN_ERR_NOMEM, "out of memory "
                                  "copying the kernel");
    return KILN_OK;
}

static void kiln_interp_callable_free(kiln_callable *c)
{
    if (!c)
        return;
    kiln_interp_state *s = c->state;
    kiln_interp_prog_free(&s->prog);
    free(s->art);
    free(s);
}

/* ABI 1.4 prepared calls: ELEMWISE and REDUCE keep their walk and a
 * register file of their own (constants filled once); the other kinds
 * are not prepared (fn runs them). */
typedef struct kiln_interp_prepared {
    kiln_interp_pk pk;
    /* the register file, then the walk's arrays */
} kiln_interp_prepared;

static int kiln_interp_prepare(void *state, const kiln_call *call, void **out)
{
    const kiln_interp_state *s = state;
    if (!s || !call || !out
        || call->struct_size < offsetof(kiln_call, rt) + sizeof(call->rt))
        return 1;
    const kiln_kernel *k = &s->art->k;
    if (!kiln_interp_has_program(k->kind) || k->kind == KILN_KERNEL_RECUR)
        return 1;   /* RECUR: fn runs it (its plan is the call's T) */
    char msg[256];   /* the checks' messages: not the caller's errbuf */
    kiln_call c = *call;
    c.errbuf = msg;
    c.errbuf_size = sizeof msg;
    kiln_interp_run r = { .s = s, .k = k, .call = &c, .rt = c.rt,
                          .label = k->label ? k->label
                                            : kiln_interp_kind_name(k->kind) };
    if (kiln_interp_check_call(&r))
        return 1;
    size_t one_reg, reg_bytes, iter_bytes;
    kiln_interp_pk_sizes(&r, &one_reg, &reg_bytes, &iter_bytes);
    size_t head = (sizeof(kiln_interp_prepared) + 15) & ~(size_t)15;
    unsigned char *m = malloc(head + reg_bytes + iter_bytes);
    if (!m)
        return 1;
    kiln_interp_prepared *pp = (kiln_interp_prepared *)(void *)m;
    if (kiln_interp_pk_init(&pp->pk, &r, m + head, m + head + reg_bytes,
                            one_reg)) {
        free(m);
        return 1;
    }
    *out = pp;
    return 0;
}

static int kiln_interp_run_prepared(void *plan, const kiln_call *call)
{
    kiln_interp_prepared *pp = plan;
    const kiln_interp_state *s = pp->pk.s;
    const kiln_kernel *k = &s->art->k;
    kiln_interp_run r = { .s = s, .k = k, .call = call, .rt = call->rt,
                          .label = k->label ? k->label
                                            : kiln_interp_kind_name(k->kind) };
    return kiln_interp_pk_exec(&pp->pk, &r);
}

static void kiln_interp_plan_free(void *plan)
{
    free(plan);
}

static int kiln_interp_load(const kiln_artifact *a, kiln_callable **out,
                            kiln_plugin_error **err)
{
    if (!a || !out)
        return kiln_interp_report(err, KILN_ERR_ARG, "load: no artifact");
    *out = NULL;
    kiln_interp_state *s = calloc(1, sizeof *s);
    if (!s)
        return kiln_interp_report(err, KILN_ERR_NOMEM, "out of memory");
    s->callable.struct_size = sizeof s->callable;
    s->callable.fn = kiln_interp_call;
    s->callable.state = s;
    s->callable.prepare = kiln_interp_prepare;
    s->callable.run = kiln_interp_run_prepared;
    s->callable.plan_free = kiln_interp_plan_free;
    /* The artifact may be freed after load: keep a copy. */
    s->art = kiln_interp_copy(&a->k);
    if (!s->art || (kiln_interp_has_program(a->k.kind)
                    && kiln_interp_prog_prepare(&s->prog, &s->art->k))) {
        kiln_interp_callable_free(&s->callable);
        return kiln_interp_report(err, KILN_ERR_NOMEM, "out of memory");
    }
    *out = &s->callable;
    return KILN_OK;
}

/* The interpreter's artifacts are not worth caching (compiling is a
 * copy), so there are no bytes to store. */
static const void *kiln_interp_artifact_bytes(const kiln_artifact *a,
                                              size_t *len)
{
    (void)a;
    if (len)
        *len = 0;
    return NULL;
}

static void kiln_interp_artifact_free(kiln_artifact *a)
{
    free(a);
}

static const kiln_backend kiln_interp_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "interp",
    .version = KILN_VERSION_STRING,
    .build_id = KILN_INTERP_BUILD_ID,
    .flags = KILN_BACKEND_THREAD_SAFE,
    .supports = kiln_interp_supports,
    .compile = kiln_interp_compile,
    .load = kiln_interp_load,
    .artifact_bytes = kiln_interp_artifact_bytes,
    .load_bytes = NULL,
    .artifact_free = kiln_interp_artifact_free,
    .callable_free = kiln_interp_callable_free,
    .error_free = kiln_interp_error_free,
};

/* libkiln compiles this file a second time as its built-in interpreter
 * (core/plugin/interp_builtin.c) under another entry name. */
#ifdef KILN_INTERP_BUILTIN
#define KILN_INTERP_ENTRY kiln_interp_builtin_entry
#else
#define KILN_INTERP_ENTRY kiln_backend_entry
#endif

#if defined(__GNUC__)
#define KILN_INTERP_EXPORT __attribute__((visibility("default")))
#else
#define KILN_INTERP_EXPORT
#endif

KILN_INTERP_EXPORT const kiln_backend *
KILN_INTERP_ENTRY(uint32_t host_abi_major, uint32_t host_abi_minor,
                   char *errbuf, size_t errbuf_size);

KILN_INTERP_EXPORT const kiln_backend *
KILN_INTERP_ENTRY(uint32_t host_abi_major, uint32_t host_abi_minor,
                   char *errbuf, size_t errbuf_size)
{
    (void)host_abi_minor; /* any minor of our major is served */
    if (host_abi_major != KILN_ABI_MAJOR) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "interp: built for plugin ABI %d, "
                     "the host speaks ABI %u", KILN_ABI_MAJOR,
                     (unsigned)host_abi_major);
        return NULL;
    }
    return &kiln_interp_backend;
}
