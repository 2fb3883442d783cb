/*
 * vm.c — a compiled function as the runtime sees it (prefix kiln_vm_;
 * public kiln_function_*): what it holds, how it is freed, what it
 * reports.  The compile driver
 * (core/compile/driver.c) makes one; contexts (context.c) run it;
 * tier.c moves its kernels between tiers.
 *
 * A call validates the inputs against their declared types, binds the
 * symbolic dims, and — only when an input shape differs from the previous
 * call — re-infers the run-time shape of every buffer and grows the
 * storage slots.  A call with the same shapes as the one before it
 * allocates nothing: it sets the input pointers, computes each step's
 * views into preallocated arrays and calls the kernels (context.c).
 */
#define _POSIX_C_SOURCE 200809L  /* strdup */
#include "function.h"
#include "vm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers -------------------------------------------------------- */

const char *kiln_vm_node_label(const kiln_graph *g, int v, char *buf,
                               size_t size)
{
    const kiln_node *n = &g->nodes[v];
    const char *op = kiln_ir_op_info(n->op)->name;
    char at[32] = "";
    if (n->line > 0)    /* the .kg statement that made it (the parser's) */
        snprintf(at, sizeof at, ", .kg line %d", n->line);
    if (n->name) {
        snprintf(buf, size, "node '%s' (%s%s)", n->name, op, at);
        return buf;
    }
    /* unnamed: name the first named value computed from it, which is
     * what the user wrote (`y_hat = add(a[county], ...)`) */
    const char *user = NULL;
    int user_line = 0;
    unsigned char *mark = calloc((size_t)g->n_nodes, 1);
    if (mark) {
        mark[v] = 1;
        for (int i = v + 1; i < g->n_nodes && !user; i++)
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (mark[g->nodes[i].in[k]]) {
                    mark[i] = 1;
                    user = g->nodes[i].name;
                    user_line = g->nodes[i].line;
                    break;
                }
        free(mark);
    }
    if (!at[0] && user_line > 0)
        snprintf(at, sizeof at, ", .kg line %d", user_line);
    if (user)
        snprintf(buf, size, "node %d (%s, in computing '%s'%s)", v, op, user,
                 at);
    else
        snprintf(buf, size, "node %d (%s%s)", v, op, at);
    return buf;
}

size_t kiln_vm_buf_bytes(const kiln_buf *b)
{
    int64_t n = kiln_shape_numel(b->rank, b->shape);
    return (size_t)n * kiln_dtype_size(b->type.dtype);
}

/* A caller's concrete shape as "(3, 4)": every dim as the number it is
 * (kiln_ir_shape_str shows a negative dim as "?", a symbol). */
const char *kiln_vm_shape_str(int rank, const int64_t *shape, char *buf,
                              size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "(");
    for (int k = 0; k < rank && k < KILN_MAX_RANK && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld",
                                k ? ", " : "", (long long)shape[k]);
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

/* 1 when a tensor of this shape and dtype has a byte size that fits in
 * int64 (views address elements with int64 offsets), so that numel and
 * numel * element size can be computed without overflow. */
int kiln_vm_size_fits(int rank, const int64_t *shape, kiln_dtype dt)
{
    int64_t n = kiln_shape_numel(rank, shape);
    size_t es = kiln_dtype_size(dt);
    return n >= 0 && es > 0 && (uint64_t)n <= (uint64_t)INT64_MAX / es &&
           (uint64_t)n <= SIZE_MAX / es;
}

double kiln_vm_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A plugin without KILN_BACKEND_THREAD_SAFE (libtcc 0.9.27 keeps its
 * compiler state in globals) is entered by one thread at a time: one lock,
 * shared by all such plugins, around supports/compile/load/artifact_free
 * and callable_free.  Kernel calls are not serialised: a plugin's kernels
 * must be reentrant (docs/plugin-abi.md, section 11). */
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

void kiln_vm_serial_lock(void)
{
    pthread_mutex_lock(&serial_lock);
}

void kiln_vm_serial_unlock(void)
{
    pthread_mutex_unlock(&serial_lock);
}

/* ---- freeing -------------------------------------------------------- */

void kiln_vm_callable_free(const kiln_backend *be, kiln_callable *c)
{
    int serial = !(be->flags & KILN_BACKEND_THREAD_SAFE);
    if (serial)
        kiln_vm_serial_lock();
    be->callable_free(c);
    if (serial)
        kiln_vm_serial_unlock();
}

void kiln_vm_destroy(kiln_function *f)
{
    kiln_cache_session_end(f->cache);
    f->cache = NULL;
    for (int i = 0; i < f->prog.n_steps; i++) {
        kiln_step *s = &f->prog.steps[i];
        if (s->callable && !s->callable_shared)
            kiln_vm_callable_free(s->backend, s->callable);
        kiln_tier_step *t = f->tiers ? &f->tiers[i] : NULL;
        kiln_callable *c1 = t ? atomic_load(&t->callable1) : NULL;
        if (c1 && t->owns1)
            kiln_vm_callable_free(t->be1, c1);
    }
    for (int i = 0; i < f->n_hoist; i++)
        free(f->hoist[i].label);
    free(f->hoist);
    free(f->prep_in);
    kiln_lower_free(&f->prog);
    kiln_plan_free(f->plan);
    free(f->inputs);
    free(f->shared);
    free(f->symvals_fixed);
    free(f->tiers);
    free(f->tier_order);
    free(f->plugin_path);
    free(f->memo);
    pthread_mutex_destroy(&f->memo_lock);
    pthread_cond_destroy(&f->memo_cond);
    pthread_mutex_destroy(&f->ctx_lock);
    pthread_mutex_destroy(&f->tier_lock);
    pthread_cond_destroy(&f->tier_cond);
    kiln_graph_free(f->g);
    free(f);
}

/* ---- introspection -------------------------------------------------- */

int kiln_function_n_inputs(const kiln_function *f) { return f ? f->n_inputs : 0; }
int kiln_function_n_shared(const kiln_function *f) { return f ? f->n_shared : 0; }
int kiln_function_n_outputs(const kiln_function *f)
{
    return f ? f->g->n_outputs : 0;
}

const char *kiln_function_input_name(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->n_inputs)
        return NULL;
    return f->g->nodes[f->inputs[i]].name;
}

const char *kiln_function_shared_name(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->n_shared)
        return NULL;
    return f->g->nodes[f->shared[i]].name;
}

const char *kiln_function_output_name(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->g->n_outputs)
        return NULL;
    return f->g->outputs[i].name;
}

int kiln_function_input_type(const kiln_function *f, int i, kiln_dtype *dtype,
                             int *rank, int64_t dims[KILN_MAX_RANK],
                             const char *symbols[KILN_MAX_RANK])
{
    if (!f || i < 0 || i >= f->n_inputs)
        return -1;
    const kiln_node *n = &f->g->nodes[f->inputs[i]];
    if (dtype)
        *dtype = n->type.dtype;
    if (rank)
        *rank = n->type.rank;
    for (int k = 0; k < n->type.rank; k++) {
        int64_t d = n->type.dims[k];
        if (dims)
            dims[k] = d >= 0 ? d : -1;
        if (symbols)
            symbols[k] = KILN_DIM_IS_SYM(d) ? f->g->symbols[KILN_SYM_INDEX(d)]
                                            : NULL;
    }
    return 0;
}

int64_t kiln_function_symbol_size(const kiln_function *f, const char *symbol)
{
    if (!f || !symbol)
        return -1;
    for (int s = 0; s < f->g->n_symbols; s++)
        if (f->g->symbols[s] && strcmp(f->g->symbols[s], symbol) == 0)
            return f->symvals_fixed[s] >= 0 ? f->symvals_fixed[s] : -1;
    return -1;
}

int kiln_function_n_hoisted(const kiln_function *f)
{
    return f ? f->n_hoist : 0;
}

const char *kiln_function_hoisted_info(const kiln_function *f, int i,
                                       int64_t *bytes, int *per_call)
{
    if (!f || i < 0 || i >= f->n_hoist)
        return NULL;
    if (bytes)
        *bytes = f->hoist[i].bytes;
    if (per_call)
        *per_call = f->hoist[i].node < 0;
    return f->hoist[i].label;
}

int kiln_function_n_kernels(const kiln_function *f)
{
    return f ? f->prog.n_steps : 0;
}

const char *kiln_function_kernel_backend(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->prog.n_steps || !f->prog.steps[i].backend)
        return NULL;
    if (f->tiers && atomic_load_explicit(&f->tiers[i].state,
                                         memory_order_acquire) ==
                        KILN_TIER_SWAPPED)
        return f->tiers[i].name1;
    return f->prog.steps[i].backend->name;
}

int kiln_function_kernel_key(const kiln_function *f, int i, kiln_key *key)
{
    if (!f || !key || i < 0 || i >= f->prog.n_steps)
        return -1;
    *key = f->prog.steps[i].key;
    return 0;
}

int kiln_function_kernel_report(const kiln_function *f, int i,
                                kiln_kernel_report *rep)
{
    if (!f || !rep || i < 0 || i >= f->prog.n_steps ||
        rep->struct_size < offsetof(kiln_kernel_report, saved_seconds) +
                               sizeof(double))
        return -1;
    const kiln_step *s = &f->prog.steps[i];
    rep->backend = s->backend ? s->backend->name : NULL;
    rep->label = s->label;
    rep->key = s->key;
    rep->cache = s->cache_result;
    rep->written = s->cache_written;
    rep->compile_seconds = s->compile_s;
    rep->saved_seconds = s->saved_s;
    if (rep->struct_size >= offsetof(kiln_kernel_report, note) +
                                sizeof(const char *))
        rep->note = s->cache_note;
    return 0;
}

const kiln_graph *kiln_vm_graph(const kiln_function *f)
{
    return f ? f->g : NULL;
}

const kiln_plan *kiln_vm_plan(const kiln_function *f)
{
    return f ? f->plan : NULL;
}

void *kiln_vm_callback_ctx(const kiln_function *f)
{
    return f ? f->callback_ctx : NULL;
}

void kiln_vm_set_callback_ctx(kiln_function *f, void *ctx,
                              void (*free_fn)(void *))
{
    f->callback_ctx = ctx;
    f->callback_ctx_free = free_fn;
}

/* ---- the policy's account of a kernel (core/policy) ---------------- */

int kiln_function_kernel_info(const kiln_function *f, int i,
                              kiln_kernel_info *out, kiln_err *err)
{
    const kiln_plan *pl = f ? f->plan : NULL;
    return kiln_plan_kernel_info(pl, i, kiln_function_kernel_backend(f, i),
                                 out, err);
}

const char *kiln_function_policy_source(const kiln_function *f)
{
    return kiln_plan_policy_source(f ? f->plan : NULL);
}
