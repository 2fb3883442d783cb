/*
 * callback.c — a compiled function as a sampler's log-density callback
 * (kiln_function_logp_callback; docs/sampler.md).
 *
 * What does not change between calls is worked out when the callback is
 * made: each input's offset in x, its element count, the output index of
 * its gradient, and a template of the input tensors.  Calls are
 * reentrant: nutpie calls one callback from every chain's thread at once,
 * and kiln_function_call gives each thread its own context of f.  What a
 * call writes lives in a *slot* of the calling thread, made at its first
 * call through this callback: the input tensors (f64 inputs are pointed
 * straight into x at each call, f32 inputs converted into the slot's
 * buffer), the output array and the last failure's message.  A thread's
 * later calls find their slot, set pointers, run kiln_function_call and
 * copy the gradients out, allocating nothing.
 *
 * Slots are found by thread id in a list that only grows (a new slot is
 * pushed with a compare-and-swap; readers walk it without a lock).  A
 * thread that has exited leaves its slot, which a later thread with the
 * same id reuses; the slots live until kiln_function_free, like f's
 * contexts.
 *
 * The state lives with f (kiln_vm_set_callback_ctx): one registry per
 * function, holding the list of callback states, all freed by
 * kiln_function_free.  Making a callback takes a process-wide lock, so
 * two threads may make callbacks of one f at once.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ir.h"
#include "vm.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct cb_input {
    int64_t off, n;      /* offset in x and element count */
    int grad_out;        /* output index of d logp / d input */
    int64_t f32_off;     /* f32 input: offset in a slot's f32, else -1 */
} cb_input;

/* What one thread's calls write. */
typedef struct cb_slot {
    struct cb_slot *next;
    pthread_t thread;    /* the thread whose slot this is */
    kiln_tensor *in, *out;
    float *f32;          /* every f32 input, converted from x */
    kiln_err err;        /* the last call's failure, or code 0 and "" */
} cb_slot;

/* A callback: read-only once made, but for the slot list. */
typedef struct logp_ctx {
    struct logp_ctx *next;
    kiln_function *f;
    uint64_t dim;
    int n_in, n_out, logp_out;
    cb_input *inp;
    kiln_tensor *in;     /* template of a slot's inputs (data NULL) */
    int64_t n_f32;       /* elements of a slot's f32 buffer */
    _Atomic(cb_slot *) slots;
} logp_ctx;

typedef struct cb_registry {
    logp_ctx *head;
} cb_registry;

/* Taken while a callback is made: the registry of f is made and grown
 * by one thread at a time. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* The callback whose first call on this thread could not make a slot
 * (kiln_logp_callback_message says so), or NULL. */
static _Thread_local const logp_ctx *slot_failed;

static void slot_free(cb_slot *s)
{
    if (!s)
        return;
    free(s->in);
    free(s->out);
    free(s->f32);
    free(s);
}

static void ctx_free(logp_ctx *c)
{
    if (!c)
        return;
    cb_slot *s = atomic_load_explicit(&c->slots, memory_order_acquire);
    while (s) {
        cb_slot *next = s->next;
        slot_free(s);
        s = next;
    }
    free(c->inp);
    free(c->in);
    free(c);
}

static void registry_free(void *p)
{
    cb_registry *r = p;
    if (!r)
        return;
    for (logp_ctx *c = r->head, *next; c; c = next) {
        next = c->next;
        ctx_free(c);
    }
    free(r);
}

/* The calling thread's slot of c, or NULL before its first call. */
static cb_slot *slot_find(logp_ctx *c)
{
    pthread_t me = pthread_self();
    cb_slot *s = atomic_load_explicit(&c->slots, memory_order_acquire);
    for (; s; s = s->next)
        if (pthread_equal(s->thread, me))
            return s;
    return NULL;
}

/* A slot for the calling thread, pushed on c's list; NULL when out of
 * memory. */
static cb_slot *slot_new(logp_ctx *c)
{
    size_t ni = (size_t)(c->n_in ? c->n_in : 1);
    size_t no = (size_t)(c->n_out ? c->n_out : 1);
    cb_slot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->thread = pthread_self();
    s->in = malloc(ni * sizeof *s->in);
    s->out = calloc(no, sizeof *s->out);
    s->f32 = c->n_f32 > 0 ? malloc(sizeof(float) * (size_t)c->n_f32) : NULL;
    if (!s->in || !s->out || (c->n_f32 > 0 && !s->f32)) {
        slot_free(s);
        return NULL;
    }
    memcpy(s->in, c->in, (size_t)c->n_in * sizeof *s->in);
    for (int k = 0; k < c->n_in; k++)
        if (c->inp[k].f32_off >= 0)
            s->in[k].data = s->f32 + c->inp[k].f32_off;
    s->next = atomic_load_explicit(&c->slots, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&c->slots, &s->next, s,
                                                  memory_order_release,
                                                  memory_order_relaxed))
        ;
    return s;
}

static double read_scalar(const kiln_tensor *t)
{
    return t->dtype == KILN_F32 ? (double)*(const float *)t->data
                                : *(const double *)t->data;
}

static void set_message(cb_slot *s, int code, const char *text)
{
    /* no printf: this runs on every rejected point of a sampler */
    size_t n = strlen(text);
    if (n >= sizeof s->err.message)
        n = sizeof s->err.message - 1;
    memcpy(s->err.message, text, n);
    s->err.message[n] = '\0';
    s->err.code = code;
}

static int logp_call(const logp_ctx *c, cb_slot *s, uint64_t dim,
                     const double *x, double *grad, double *logp)
{
    if (dim != c->dim || (!x && dim > 0) || !logp) {
        kiln_seterr(&s->err, KILN_ERR_ARG,
                    "logp callback: called with dim %llu%s, but the "
                    "function's inputs have %llu elements",
                    (unsigned long long)dim,
                    !logp ? " and logp NULL" : !x && dim ? " and x NULL" : "",
                    (unsigned long long)c->dim);
        return KILN_LOGP_BAD_DIM;
    }
    for (int i = 0; i < c->n_in; i++) {
        const cb_input *ci = &c->inp[i];
        const double *src = x ? x + ci->off : NULL;
        if (ci->f32_off >= 0) {
            float *dst = s->f32 + ci->f32_off;
            for (int64_t k = 0; k < ci->n; k++)
                dst[k] = (float)src[k];
        } else {
            /* kiln never writes an input, so dropping const is safe */
            s->in[i].data = (void *)(uintptr_t)src;
        }
    }
    int rc = kiln_function_call(c->f, s->in, s->out, &s->err);
    if (rc == KILN_ERR_CHECK) {   /* a rejected point (a check, an ODE) */
        *logp = -INFINITY;
        return KILN_LOGP_NONFINITE;
    }
    if (rc)
        return KILN_LOGP_ERROR;
    double lp = read_scalar(&s->out[c->logp_out]);
    *logp = lp;
    if (!isfinite(lp)) {
        set_message(s, KILN_ERR_RUNTIME,
                    isnan(lp) ? "logp callback: logp is nan"
                    : lp > 0  ? "logp callback: logp is inf"
                              : "logp callback: logp is -inf");
        return KILN_LOGP_NONFINITE;
    }
    if (grad) {
        for (int i = 0; i < c->n_in; i++) {
            const cb_input *ci = &c->inp[i];
            const kiln_tensor *g = &s->out[ci->grad_out];
            double *dst = grad + ci->off;
            if (g->dtype == KILN_F32) {
                const float *gf = g->data;
                for (int64_t k = 0; k < ci->n; k++)
                    dst[k] = gf[k];
            } else if (ci->n > 0) {
                memcpy(dst, g->data, sizeof(double) * (size_t)ci->n);
            }
        }
    }
    s->err.code = 0;
    s->err.message[0] = '\0';
    return KILN_LOGP_OK;
}

static int logp_callback(uint64_t dim, const double *x, double *grad,
                         double *logp, void *user_data)
{
    logp_ctx *c = user_data;
    if (!c)
        return KILN_LOGP_BAD_DIM;
    cb_slot *s = slot_find(c);
    if (!s) {
        s = slot_new(c);
        slot_failed = s ? NULL : c;
        if (!s)
            return KILN_LOGP_ERROR;
    }
    return logp_call(c, s, dim, x, grad, logp);
}

const char *kiln_logp_callback_message(const void *user_data)
{
    /* slot_find writes nothing: dropping const is safe */
    logp_ctx *c = (logp_ctx *)(uintptr_t)user_data;
    if (!c)
        return "";
    const cb_slot *s = slot_find(c);
    if (s)
        return s->err.message;
    return slot_failed == c ? "logp callback: out of memory (this thread's "
                              "scratch)" : "";
}

static int is_float(kiln_dtype dt)
{
    return dt == KILN_F64 || dt == KILN_F32;
}

static int same_dims(const kiln_type *a, const kiln_type *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int k = 0; k < a->rank; k++)
        if (a->dims[k] != b->dims[k])
            return 0;
    return 1;
}

/* The output index whose node is v, or -1. */
static int output_of(const kiln_graph *g, kiln_value v)
{
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k].value == v)
            return k;
    return -1;
}

/* Check every requirement and fill the per-input table; returns 0 or an
 * error code. */
static int plan(logp_ctx *c, const kiln_graph *g, const char *logp_output,
                kiln_err *err)
{
    char t1[256], t2[256];
    int lo = -1;
    for (int k = 0; k < g->n_outputs && lo < 0; k++)
        if (strcmp(g->outputs[k].name, logp_output) == 0)
            lo = k;
    if (lo < 0)
        return kiln_seterr(err, KILN_ERR_NAME,
                           "logp callback: no output named '%s'",
                           logp_output);
    kiln_value cost = g->outputs[lo].value;
    const kiln_type *ct = &g->nodes[cost].type;
    if (!is_float(ct->dtype) || ct->rank != 0)
        return kiln_seterr(err,
                           is_float(ct->dtype) ? KILN_ERR_SHAPE
                                               : KILN_ERR_TYPE,
                           "logp callback: output '%s' must be a float "
                           "scalar, got %s", logp_output,
                           kiln_ir_type_str(g, ct, t1, sizeof t1));
    c->logp_out = lo;
    c->n_out = g->n_outputs;
    int64_t total = 0, n_f32 = 0;
    int i = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        if (n->op != KILN_OP_INPUT)
            continue;
        for (int k = 0; k < n->type.rank; k++)
            if (n->type.dims[k] < 0)
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "logp callback: input '%s' has a "
                                   "symbolic or unknown dim, %s; the "
                                   "callback needs static shapes", n->name,
                                   kiln_ir_type_str(g, &n->type, t1,
                                                    sizeof t1));
        if (!is_float(n->type.dtype))
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "logp callback: input '%s' has dtype %s; "
                               "every input must be f64 or f32", n->name,
                               kiln_dtype_name(n->type.dtype));
        int go = -1;
        for (int r = 0; r < g->n_grads && go < 0; r++)
            if (g->grads[r].cost == cost && g->grads[r].wrt == v)
                go = output_of(g, g->grads[r].result);
        if (go < 0)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "logp callback: no output is the gradient of "
                               "'%s' with respect to input '%s'",
                               logp_output, n->name);
        const kiln_type *gt = &g->nodes[g->outputs[go].value].type;
        if (!is_float(gt->dtype) || !same_dims(gt, &n->type))
            return kiln_seterr(err,
                               is_float(gt->dtype) ? KILN_ERR_SHAPE
                                                   : KILN_ERR_TYPE,
                               "logp callback: gradient output '%s' is %s, "
                               "but input '%s' is %s", g->outputs[go].name,
                               kiln_ir_type_str(g, gt, t1, sizeof t1),
                               n->name,
                               kiln_ir_type_str(g, &n->type, t2, sizeof t2));
        cb_input *ci = &c->inp[i];
        kiln_tensor *t = &c->in[i];
        ci->off = total;
        ci->n = kiln_shape_numel(n->type.rank, n->type.dims);
        ci->grad_out = go;
        t->dtype = n->type.dtype;
        t->rank = n->type.rank;
        for (int k = 0; k < t->rank; k++)
            t->shape[k] = n->type.dims[k];
        ci->f32_off = -1;
        if (t->dtype == KILN_F32) {
            ci->f32_off = n_f32;
            n_f32 += ci->n;
        }
        total += ci->n;
        i++;
    }
    c->n_f32 = n_f32;
    c->dim = (uint64_t)total;
    return 0;
}

kiln_logp_fn kiln_function_logp_callback(kiln_function *f,
                                         const char *logp_output,
                                         uint64_t *dim, void **user_data,
                                         kiln_err *err)
{
    if (!f || !logp_output || !dim || !user_data) {
        kiln_seterr(err, KILN_ERR_ARG,
                    "kiln_function_logp_callback: NULL argument");
        return NULL;
    }
    const kiln_graph *g = kiln_vm_graph(f);
    int ni = kiln_function_n_inputs(f);
    logp_ctx *c = calloc(1, sizeof *c);
    if (c) {
        c->f = f;
        c->n_in = ni;
        c->inp = calloc((size_t)(ni ? ni : 1), sizeof *c->inp);
        c->in = calloc((size_t)(ni ? ni : 1), sizeof *c->in);
        atomic_init(&c->slots, NULL);
    }
    if (!c || !c->inp || !c->in) {
        ctx_free(c);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (plan(c, g, logp_output, err)) {
        ctx_free(c);
        return NULL;
    }
    pthread_mutex_lock(&registry_lock);
    cb_registry *reg = kiln_vm_callback_ctx(f);
    if (!reg) {
        reg = calloc(1, sizeof *reg);
        if (!reg) {
            pthread_mutex_unlock(&registry_lock);
            ctx_free(c);
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            return NULL;
        }
        kiln_vm_set_callback_ctx(f, reg, registry_free);
    }
    c->next = reg->head;
    reg->head = c;
    pthread_mutex_unlock(&registry_lock);
    *dim = c->dim;
    *user_data = c;
    return logp_callback;
}
