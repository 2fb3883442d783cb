/*
 * example_backend.c — a minimal third-party kiln backend plugin.
 *
 * It serves one kind of kernel: ELEMWISE kernels whose scalar program uses
 * only LOAD, CONST, ADD and MUL, all in f64.  Every other kernel is refused
 * with a reason, and kiln falls back to the interpreter for it.  The plugin
 * does not generate machine code: "compiling" packs the program into one
 * flat block of bytes, and loading unpacks those bytes into a callable that
 * evaluates the program element by element.  Because the artifact is plain
 * bytes, the plugin also provides artifact_bytes and load_bytes, so that a
 * host with a disk cache can store it and load it in another process.
 *
 * Build against an installed kiln:
 *     cc -shared -fPIC $(pkg-config --cflags kiln) example_backend.c \
 *        -o example.so
 * Use it (the file name, minus ".so", must equal the descriptor's name):
 *     KILN_PLUGIN_PATH=$PWD kiln run model.kg --backend example ...
 *
 * docs/plugin-abi.md walks through this file.
 */
#include <kiln/backend.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Change whenever what this plugin computes for a kernel may change: it
 * selects the cached artifacts a host may reuse. */
#define EX_BUILD_ID "example-1"
#define EX_MAGIC 0x6b4c4558u  /* "XELk": marks our artifact bytes */
#define EX_FORMAT 1u

/* ---- errors ---------------------------------------------------------- */

/* Returned when even an error cannot be allocated; ex_error_free knows it. */
static char ex_nomem_text[] = "example: out of memory";
static kiln_plugin_error ex_nomem = {sizeof(kiln_plugin_error), KILN_ERR_NOMEM,
                                     ex_nomem_text};

/* Make an error object (struct and message in one malloc'd block) and
 * store it in *err.  Returns `code` so callers can `return ex_fail(...)`. */
static int ex_fail(kiln_plugin_error **err, int code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!err)
        return code;
    size_t len = strlen(msg) + 1;
    kiln_plugin_error *e = malloc(sizeof *e + len);
    if (!e) {
        *err = &ex_nomem;
        return code;
    }
    e->struct_size = sizeof *e;
    e->code = code;
    e->message = (char *)(e + 1);
    memcpy(e->message, msg, len);
    *err = e;
    return code;
}

static void ex_error_free(kiln_plugin_error *e)
{
    if (e && e != &ex_nomem)
        free(e);
}

/* ---- checking a program ---------------------------------------------- */

/* The plugin is not linked with libkiln: it calls none of the functions
 * <kiln/kiln.h> declares (kiln_dtype_name, ...), only its own. */
static const char *ex_dtype_name(unsigned dt)
{
    static const char *const names[] = {"f64", "f32", "i64", "i32", "bool"};
    return dt < sizeof names / sizeof names[0] ? names[dt] : "?";
}

/* 0 when every instruction is one we run, else -1 with the reason. */
static int ex_check_program(uint32_t n_inputs, uint32_t n_instrs,
                            const kiln_instr *ins, uint32_t n_outputs,
                            const int32_t *out_refs, char *why, size_t size)
{
    if (n_outputs == 0 || n_instrs == 0 || !ins || !out_refs) {
        snprintf(why, size, "kernel has no outputs or no scalar program");
        return -1;
    }
    for (uint32_t i = 0; i < n_instrs; i++) {
        const kiln_instr *in = &ins[i];
        if (in->dtype != KILN_F64) {
            snprintf(why, size, "instruction %u computes in %s (f64 only)",
                     (unsigned)i, ex_dtype_name(in->dtype));
            return -1;
        }
        switch (in->op) {
        case KILN_I_LOAD:
            if (in->a < 0 || (uint32_t)in->a >= n_inputs) {
                snprintf(why, size, "instruction %u loads input %d of %u",
                         (unsigned)i, (int)in->a, (unsigned)n_inputs);
                return -1;
            }
            break;
        case KILN_I_CONST:
            break;
        case KILN_I_PARAM:   /* ABI 1.8: a literal in the call's block */
            if (in->a < 0) {
                snprintf(why, size, "instruction %u reads slot %d",
                         (unsigned)i, (int)in->a);
                return -1;
            }
            break;
        case KILN_I_ADD:
        case KILN_I_MUL:
            /* operands are earlier instructions */
            if (in->a < 0 || (uint32_t)in->a >= i || in->b < 0 ||
                (uint32_t)in->b >= i) {
                snprintf(why, size, "instruction %u: bad operands %d, %d",
                         (unsigned)i, (int)in->a, (int)in->b);
                return -1;
            }
            break;
        default:
            snprintf(why, size, "instruction %u has opcode %u (this backend "
                     "runs only load, const, param, add, mul)", (unsigned)i,
                     (unsigned)in->op);
            return -1;
        }
    }
    for (uint32_t j = 0; j < n_outputs; j++)
        if (out_refs[j] < 0 || (uint32_t)out_refs[j] >= n_instrs) {
            snprintf(why, size, "out_refs[%u] = %d is not an instruction",
                     (unsigned)j, (int)out_refs[j]);
            return -1;
        }
    return 0;
}

/* The fields of kiln_kernel this plugin reads, all inside ABI 1.0. */
#define EX_KERNEL_NEED (offsetof(kiln_kernel, out_refs) + sizeof(void *))

static int ex_check_kernel(const kiln_kernel *k, char *why, size_t size)
{
    if (!k || k->struct_size < EX_KERNEL_NEED) {
        snprintf(why, size, "kernel description too small");
        return -1;
    }
    if (k->kind != KILN_KERNEL_ELEMWISE) {
        snprintf(why, size, "kernel kind %u (this backend runs only "
                 "ELEMWISE kernels)", (unsigned)k->kind);
        return -1;
    }
    if (k->n_outputs == 0 || !k->outputs || (k->n_inputs && !k->inputs)) {
        snprintf(why, size, "kernel without argument descriptions");
        return -1;
    }
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->inputs[i].dtype != KILN_F64) {
            snprintf(why, size, "input %u is %s (f64 only)", (unsigned)i,
                     ex_dtype_name(k->inputs[i].dtype));
            return -1;
        }
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->outputs[j].dtype != KILN_F64) {
            snprintf(why, size, "output %u is %s (f64 only)", (unsigned)j,
                     ex_dtype_name(k->outputs[j].dtype));
            return -1;
        }
    return ex_check_program(k->n_inputs, k->n_instrs, k->instrs,
                            k->n_outputs, k->out_refs, why, size);
}

static int ex_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    char why[200];
    if (ex_check_kernel(k, why, sizeof why)) {
        ex_fail(err, KILN_ERR_BACKEND, "example: %s", why);
        return 0;
    }
    return 1;
}

/* ---- artifacts: the program packed into one block of bytes ------------ */

/* Layout: ex_header, then n_instrs kiln_instr, then n_outputs int32_t.
 * Native byte order: a host keeps cached artifacts per target CPU. */
typedef struct ex_header {
    uint32_t magic, format;
    uint32_t n_inputs, n_outputs, n_instrs, reserved;
} ex_header;

struct kiln_artifact {
    size_t len;       /* bytes that follow */
    unsigned char bytes[];
};

static int ex_compile(const kiln_kernel *k, const kiln_compile_options *opt,
                      kiln_artifact **out, kiln_plugin_error **err)
{
    (void)opt; /* nothing to optimise */
    char why[200];
    *out = NULL;
    if (ex_check_kernel(k, why, sizeof why))
        return ex_fail(err, KILN_ERR_BACKEND, "example: %s", why);
    /* The description is only valid during this call: copy what we keep.
     * The size is linear in the program and the argument count. */
    size_t len = sizeof(ex_header) + sizeof(kiln_instr) * k->n_instrs +
                 sizeof(int32_t) * k->n_outputs;
    kiln_artifact *a = malloc(sizeof *a + len);
    if (!a)
        return ex_fail(err, KILN_ERR_NOMEM, "example: out of memory");
    a->len = len;
    ex_header h = {EX_MAGIC, EX_FORMAT, k->n_inputs, k->n_outputs,
                   k->n_instrs, 0};
    unsigned char *p = a->bytes;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    memcpy(p, k->instrs, sizeof(kiln_instr) * k->n_instrs);
    p += sizeof(kiln_instr) * k->n_instrs;
    memcpy(p, k->out_refs, sizeof(int32_t) * k->n_outputs);
    *out = a;
    return KILN_OK;
}

static const void *ex_artifact_bytes(const kiln_artifact *a, size_t *len)
{
    *len = a->len;
    return a->bytes;
}

static void ex_artifact_free(kiln_artifact *a)
{
    free(a);
}

/* ---- callables ---------------------------------------------------------- */

/* One block: the callable the host sees, then the unpacked program. */
typedef struct ex_state {
    kiln_callable callable;
    uint32_t n_inputs, n_outputs, n_instrs;
    const kiln_instr *instrs;   /* point into `data` below */
    const int32_t *out_refs;
    _Alignas(8) unsigned char data[];
} ex_state;

static int ex_run(void *state, const kiln_call *call);

/* Shared by load and load_bytes: validate the bytes (they may come from a
 * file) and build a callable that owns a copy of them. */
static int ex_load_bytes(const void *bytes, size_t len, kiln_callable **out,
                         kiln_plugin_error **err)
{
    *out = NULL;
    ex_header h;
    if (!bytes || len < sizeof h)
        return ex_fail(err, KILN_ERR_BACKEND, "example: artifact too short");
    memcpy(&h, bytes, sizeof h);
    if (h.magic != EX_MAGIC || h.format != EX_FORMAT)
        return ex_fail(err, KILN_ERR_BACKEND,
                       "example: not an artifact of format %u", EX_FORMAT);
    size_t body = len - sizeof h;
    if (h.n_instrs > body / sizeof(kiln_instr) ||
        h.n_outputs > body / sizeof(int32_t) ||
        body != sizeof(kiln_instr) * h.n_instrs +
                    sizeof(int32_t) * (size_t)h.n_outputs)
        return ex_fail(err, KILN_ERR_BACKEND,
                       "example: artifact of %zu bytes does not match its "
                       "header", len);
    ex_state *s = malloc(sizeof *s + body);
    if (s)
        memset(s, 0, sizeof *s);   /* every kiln_callable field: NULL (ABI 1.4 prepare &c. not provided) */
    if (!s)
        return ex_fail(err, KILN_ERR_NOMEM, "example: out of memory");
    memcpy(s->data, (const unsigned char *)bytes + sizeof h, body);
    s->n_inputs = h.n_inputs;
    s->n_outputs = h.n_outputs;
    s->n_instrs = h.n_instrs;
    s->instrs = (const kiln_instr *)(const void *)s->data;
    s->out_refs = (const int32_t *)(const void *)(s->data +
                  sizeof(kiln_instr) * h.n_instrs);
    char why[200];
    if (ex_check_program(s->n_inputs, s->n_instrs, s->instrs, s->n_outputs,
                         s->out_refs, why, sizeof why)) {
        free(s);
        return ex_fail(err, KILN_ERR_BACKEND, "example: %s", why);
    }
    s->callable.struct_size = sizeof s->callable;
    s->callable.fn = ex_run;
    s->callable.state = s;
    *out = &s->callable;
    return KILN_OK;
}

static int ex_load(const kiln_artifact *a, kiln_callable **out,
                   kiln_plugin_error **err)
{
    /* The host frees the artifact right after load: copy, don't point. */
    return ex_load_bytes(a->bytes, a->len, out, err);
}

static void ex_callable_free(kiln_callable *c)
{
    free(c); /* c is the first member of its ex_state block */
}

/* ---- running a kernel ----------------------------------------------- */

static int ex_error(const kiln_call *call, const char *fmt, ...)
{
    if (call->struct_size >= offsetof(kiln_call, errbuf_size) +
                                 sizeof(size_t) &&
        call->errbuf && call->errbuf_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(call->errbuf, call->errbuf_size, fmt, ap);
        va_end(ap);
    }
    return KILN_ERR_RUNTIME;
}

/* Offset in elements of index `idx` in view `v`: strides are in elements;
 * an extent-1 dim of an input broadcasts (the host gives it stride 0). */
static int64_t ex_offset(const kiln_view *v, const int64_t *idx)
{
    int64_t off = 0;
    for (int32_t d = 0; d < v->rank; d++)
        if (v->shape[d] != 1)
            off += idx[d] * v->strides[d];
    return off;
}

/* Check the views against the program and the output shape. */
static int ex_check_views(const ex_state *s, const kiln_call *call)
{
    if (call->n_inputs != s->n_inputs || call->n_outputs != s->n_outputs)
        return ex_error(call, "example: called with %u inputs and %u "
                        "outputs, compiled for %u and %u",
                        (unsigned)call->n_inputs, (unsigned)call->n_outputs,
                        (unsigned)s->n_inputs, (unsigned)s->n_outputs);
    const kiln_view *o = &call->outputs[0];
    uint32_t n_views = call->n_inputs + call->n_outputs;
    for (uint32_t i = 0; i < n_views; i++) {
        int is_in = i < call->n_inputs;
        const kiln_view *v = is_in ? &call->inputs[i]
                                   : &call->outputs[i - call->n_inputs];
        if (v->dtype != KILN_F64 || v->rank != o->rank)
            return ex_error(call, "example: view %u is not f64 of rank %d",
                            (unsigned)i, (int)o->rank);
        for (int32_t d = 0; d < v->rank; d++)
            if (v->shape[d] != o->shape[d] && !(is_in && v->shape[d] == 1))
                return ex_error(call, "example: view %u has extent %lld on "
                                "dim %d, the output has %lld", (unsigned)i,
                                (long long)v->shape[d], (int)d,
                                (long long)o->shape[d]);
    }
    return 0;
}

static int ex_run(void *state, const kiln_call *call)
{
    const ex_state *s = state;
    if (!call || call->struct_size < offsetof(kiln_call, outputs) +
                                         sizeof(call->outputs))
        return KILN_ERR_ARG;
    int rc = ex_check_views(s, call);
    if (rc)
        return rc;
    /* lifted literals (PARAM) read the call's constant block, which an
     * older host does not pass */
    for (uint32_t i = 0; i < s->n_instrs; i++)
        if (s->instrs[i].op == KILN_I_PARAM &&
            (call->struct_size < offsetof(kiln_call, n_consts) +
                                     sizeof(call->n_consts) ||
             !call->consts || (uint32_t)s->instrs[i].a >= call->n_consts)) {
            ex_error(call, "example: the call has no constant block");
            return KILN_ERR_ARG;
        }
    const kiln_view *o = &call->outputs[0];
    int64_t n = 1;
    for (int32_t d = 0; d < o->rank; d++)
        n *= o->shape[d];
    if (n == 0)
        return 0;
    /* One register per instruction: on the stack for short programs, else
     * one allocation per call (never per element).  The state is only
     * read, so calls from several threads are safe. */
    double small[64], *reg = small;
    if (s->n_instrs > 64) {
        reg = malloc(sizeof(double) * s->n_instrs);
        if (!reg)
            return ex_error(call, "example: out of memory");
    }
    int64_t idx[KILN_MAX_RANK] = {0};
    for (int64_t e = 0; e < n; e++) {
        /* Evaluate the whole program for this element first, then write
         * the outputs: an output may alias an input element for element. */
        for (uint32_t i = 0; i < s->n_instrs; i++) {
            const kiln_instr *in = &s->instrs[i];
            switch (in->op) {
            case KILN_I_LOAD: {
                const kiln_view *v = &call->inputs[in->a];
                reg[i] = ((const double *)v->data)[ex_offset(v, idx)];
                break;
            }
            case KILN_I_CONST: reg[i] = in->imm; break;
            case KILN_I_PARAM: reg[i] = call->consts[in->a]; break;
            case KILN_I_ADD: reg[i] = reg[in->a] + reg[in->b]; break;
            default: reg[i] = reg[in->a] * reg[in->b]; break; /* MUL */
            }
        }
        for (uint32_t j = 0; j < s->n_outputs; j++) {
            const kiln_view *v = &call->outputs[j];
            ((double *)v->data)[ex_offset(v, idx)] = reg[s->out_refs[j]];
        }
        /* next index, last dim fastest (C order) */
        for (int32_t d = o->rank - 1; d >= 0; d--) {
            if (++idx[d] < o->shape[d])
                break;
            idx[d] = 0;
        }
    }
    if (reg != small)
        free(reg);
    return 0;
}

/* ---- the descriptor and the bootstrap symbol ------------------------- */

static const kiln_backend ex_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "example",
    .version = "0.1.0",
    .build_id = EX_BUILD_ID,
    .flags = KILN_BACKEND_THREAD_SAFE,
    .supports = ex_supports,
    .compile = ex_compile,
    .load = ex_load,
    .artifact_bytes = ex_artifact_bytes,
    .load_bytes = ex_load_bytes,
    .artifact_free = ex_artifact_free,
    .callable_free = ex_callable_free,
    .error_free = ex_error_free,
};

#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const kiln_backend *kiln_backend_entry(uint32_t host_abi_major,
                                       uint32_t host_abi_minor, char *errbuf,
                                       size_t errbuf_size);

const kiln_backend *kiln_backend_entry(uint32_t host_abi_major,
                                       uint32_t host_abi_minor, char *errbuf,
                                       size_t errbuf_size)
{
    (void)host_abi_minor; /* any minor of our major will do */
    if (host_abi_major != KILN_ABI_MAJOR) {
        if (errbuf && errbuf_size)
            snprintf(errbuf, errbuf_size, "example: built for plugin ABI "
                     "%d, the host speaks %u", KILN_ABI_MAJOR,
                     (unsigned)host_abi_major);
        return NULL;
    }
    return &ex_backend;
}
