/*
 * context.c — calling a compiled function (public kiln_function_call and
 * kiln_context_*): the per-caller half of a function (core/runtime/function.h).
 *
 * A call validates the inputs against their declared types, binds the
 * symbolic dims (both skipped when the dtypes, ranks and shapes are those
 * of the last good call: same_as_last), and — only when an input shape
 * differs from the previous call on the same context — re-infers the
 * run-time shape of every buffer and grows the context's storage slots.
 * A call with the
 * same shapes as the one before it allocates nothing: it sets the input
 * pointers, re-points the views of input buffers and calls the kernels.
 *
 * Everything a call writes is the context's: buffers, shapes, views,
 * prepared calls, the error text.  The compiled half is only read, so
 * contexts of one function run at once on different threads;
 * kiln_function_call finds the calling thread's context in a list that
 * grows by one release store per new thread and is read with one
 * acquire load.  A step swapped to tier 1 (core/runtime/tier.c) is taken by a
 * context at the start of its next call (f->swap_gen), never during one.
 *
 * Also here: binding shared values (kiln_function_bind_shared), which
 * runs the function's prep program — the hoisted data-only values — again
 * when the data it reads change (kiln_context_prep_run; a call, so in
 * this file).
 */
#define _POSIX_C_SOURCE 200809L
#include "function.h"
#include "vm.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- calling -------------------------------------------------------- */

static int check_inputs(kiln_context *ctx, const kiln_tensor *in,
                        kiln_err *err)
{
    kiln_function *f = ctx->f;
    kiln_graph *g = f->g;
    memcpy(ctx->symvals, f->symvals_fixed,
           sizeof(int64_t) * (size_t)g->n_symbols);
    for (int s = 0; s < g->n_symbols; s++)
        ctx->symsrc[s] = -1;
    char s1[256], s2[256];
    for (int i = 0; i < f->n_inputs; i++) {
        const kiln_node *n = &g->nodes[f->inputs[i]];
        const kiln_tensor *t = &in[i];
        if ((unsigned)t->dtype >= KILN_NDTYPES)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "input '%s': expected dtype %s, got a bad "
                               "dtype %d", n->name,
                               kiln_dtype_name(n->type.dtype), (int)t->dtype);
        if (t->dtype != n->type.dtype)
            return kiln_seterr(err, KILN_ERR_TYPE,
                               "input '%s': expected dtype %s, got %s",
                               n->name, kiln_dtype_name(n->type.dtype),
                               kiln_dtype_name(t->dtype));
        if (t->rank < 0 || t->rank > KILN_MAX_RANK) {
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "input '%s': rank %d is out of range", n->name,
                               t->rank);
        }
        int bad = t->rank != n->type.rank;
        for (int k = 0; k < t->rank && !bad; k++)
            if (t->shape[k] < 0 ||
                (n->type.dims[k] >= 0 && t->shape[k] != n->type.dims[k]))
                bad = 1;
        if (bad)
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "input '%s': expected shape %s, got %s",
                               n->name,
                               kiln_ir_shape_str(g, n->type.rank,
                                                 n->type.dims, s1, sizeof s1),
                               kiln_vm_shape_str(t->rank, t->shape, s2,
                                               sizeof s2));
        if (!kiln_vm_size_fits(t->rank, t->shape, t->dtype))
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "input '%s': shape %s is too large", n->name,
                               kiln_vm_shape_str(t->rank, t->shape, s2,
                                               sizeof s2));
        if (t->data == NULL && kiln_shape_numel(t->rank, t->shape) > 0)
            return kiln_seterr(err, KILN_ERR_ARG, "input '%s': data is NULL",
                               n->name);
        for (int k = 0; k < t->rank; k++) {
            int64_t d = n->type.dims[k];
            if (!KILN_DIM_IS_SYM(d))
                continue;
            int si = KILN_SYM_INDEX(d);
            if (ctx->symvals[si] < 0) {
                ctx->symvals[si] = t->shape[k];
                ctx->symsrc[si] = i;
            } else if (ctx->symvals[si] != t->shape[k]) {
                char from[300];
                if (ctx->symsrc[si] >= 0)
                    snprintf(from, sizeof from, "input '%s'",
                             g->nodes[f->inputs[ctx->symsrc[si]]].name);
                else
                    snprintf(from, sizeof from, "a shared value");
                const char *sn = g->symbols[si] ? g->symbols[si] : "?";
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "input '%s': got shape %s, but dim %d is "
                                   "'%s', which is %lld from %s", n->name,
                                   kiln_vm_shape_str(t->rank, t->shape, s2,
                                                   sizeof s2),
                                   k, sn, (long long)ctx->symvals[si], from);
            }
        }
    }
    /* derived dims (`K-1`) from their names' sizes, and back */
    int ds = -1;
    if (kiln_ir_symbols_derive(g, ctx->symvals, &ds, err)) {
        if (ds >= 0 && ctx->symsrc[ds] >= 0)
            kiln_err_prefix(err, "input '%s': ",
                            g->nodes[f->inputs[ctx->symsrc[ds]]].name);
        return err ? err->code : KILN_ERR_SHAPE;
    }
    for (int i = 0; i < f->n_shared; i++) {
        const kiln_node *n = &g->nodes[f->shared[i]];
        if (!n->data)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "shared value '%s' has no value; give it as "
                               "data (kiln run --data FILE.json) or bind it "
                               "with kiln_function_bind_shared", n->name);
    }
    return 0;
}

/* Whether the inputs have the declared dtypes and ranks, non-NULL data and
 * the shapes of the last call that passed check_inputs and shaped the
 * context (last_shapes, while shapes_ready: a rebinding of shared values
 * clears it).  Such a call passes every check of check_inputs again and
 * binds the symbols to the same sizes, which only prepare_shapes reads, so
 * the steady-state call skips both (issue 27: a fifth of a microsecond
 * model's fixed cost). */
static int same_as_last(const kiln_context *ctx, const kiln_tensor *in)
{
    const kiln_function *f = ctx->f;
    if (!ctx->shapes_ready)
        return 0;
    for (int i = 0; i < f->n_inputs; i++) {
        const kiln_node *n = &f->g->nodes[f->inputs[i]];
        const kiln_tensor *t = &in[i];
        if (t->dtype != n->type.dtype || t->rank != n->type.rank ||
            t->data == NULL)
            return 0;
        const int64_t *last = &ctx->last_shapes[(size_t)i * KILN_MAX_RANK];
        for (int k = 0; k < t->rank; k++)
            if (t->shape[k] != last[k])
                return 0;
    }
    return 1;
}

static int shapes_changed(kiln_context *ctx, const kiln_tensor *in)
{
    kiln_function *f = ctx->f;
    int changed = !ctx->shapes_ready;
    for (int i = 0; i < f->n_inputs; i++) {
        int64_t *last = &ctx->last_shapes[(size_t)i * KILN_MAX_RANK];
        for (int k = 0; k < in[i].rank; k++) {
            if (last[k] != in[i].shape[k]) {
                last[k] = in[i].shape[k];
                changed = 1;
            }
        }
    }
    return changed;
}

/* "node 'y' (add)" for a buffer of a node, else "a temporary". */
static void buf_label(const kiln_graph *g, const kiln_buf *b, char *lbl,
                      size_t size)
{
    if (b->node >= 0)
        kiln_vm_node_label(g, b->node, lbl, size);
    else
        snprintf(lbl, size, "a temporary");
}

/* An anonymous symbol of b's node type (a `?`, a slice of a symbolic
 * dim, a join along one, a reshape's -1) not sized yet takes b's size:
 * a later node may name it (reshape's gradient reshapes back to its
 * input's shape, symbols and all; docs/ops.md "Shape ops"). */
static void bind_anonymous(const kiln_graph *g, const kiln_buf *b,
                           int64_t *symvals)
{
    if (b->node < 0 || g->nodes[b->node].type.rank != b->rank)
        return;
    const kiln_type *t = &g->nodes[b->node].type;
    for (int k = 0; k < b->rank; k++)
        if (KILN_DIM_IS_SYM(t->dims[k]) &&
            KILN_SYM_INDEX(t->dims[k]) < g->n_symbols &&
            symvals[KILN_SYM_INDEX(t->dims[k])] < 0)
            symvals[KILN_SYM_INDEX(t->dims[k])] = b->shape[k];
}

/* Re-infer every buffer's shape from the inputs and grow the slots. */
static int prepare_shapes(kiln_context *cx, const kiln_tensor *in,
                          kiln_err *err)
{
    kiln_function *f = cx->f;
    kiln_program *p = &cx->prog;
    kiln_graph *g = f->g;
    kiln_shape_ctx ctx = {NULL, cx->symvals};
    for (int i = 0; i < f->n_inputs; i++) {
        kiln_buf *b = &p->bufs[p->node_buf[f->inputs[i]]];
        b->rank = in[i].rank;
        for (int k = 0; k < b->rank; k++)
            b->shape[k] = in[i].shape[k];
    }
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind != KILN_BUF_TEMP || (b->def_step < 0 && !b->fused))
            continue;  /* dead nodes are never computed; fused ones are
                          computed inside their group's kernel, and their
                          shapes checked here */
        if (!b->is_static) {
            kiln_type tin[3], *tins = tin, tout;
            if (b->n_in > 3) {
                tins = malloc(sizeof *tins * (size_t)b->n_in);
                if (!tins)
                    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            }
            for (int k = 0; k < b->n_in; k++) {
                int ib = b->in_bufs[k];
                if (ib < 0) {
                    tins[k] = g->nodes[g->nodes[b->node].in[k]].type;
                    continue;
                }
                tins[k].dtype = p->bufs[ib].type.dtype;
                tins[k].rank = p->bufs[ib].rank;
                memcpy(tins[k].dims, p->bufs[ib].shape,
                       sizeof(int64_t) * KILN_MAX_RANK);
            }
            int rc = kiln_ir_infer(&ctx, b->op, b->attrs, b->n_in, tins,
                                   NULL, &tout, NULL, err);
            if (tins != tin)
                free(tins);
            if (rc) {
                char lbl[160];
                if (b->node >= 0)
                    kiln_err_prefix(err, "%s: ",
                                    kiln_vm_node_label(g, b->node, lbl, sizeof lbl));
                return rc;
            }
            b->rank = tout.rank;
            memcpy(b->shape, tout.dims, sizeof(int64_t) * KILN_MAX_RANK);
        }
        bind_anonymous(g, b, cx->symvals);
        if (!kiln_vm_size_fits(b->rank, b->shape, b->type.dtype)) {
            char lbl[160], s1[256];
            buf_label(g, b, lbl, sizeof lbl);
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "%s: shape %s is too large", lbl,
                               kiln_vm_shape_str(b->rank, b->shape, s1,
                                               sizeof s1));
        }
        b->nbytes = kiln_vm_buf_bytes(b);
        if (b->slot >= 0) {
            size_t need = b->nbytes ? b->nbytes : 8;
            if (cx->slot_cap[b->slot] < need) {
                void *m = realloc(cx->slots[b->slot], need);
                if (!m) {
                    char lbl[160];
                    buf_label(g, b, lbl, sizeof lbl);
                    return kiln_seterr(err, KILN_ERR_NOMEM,
                                       "%s: out of memory (%zu bytes)", lbl,
                                       need);
                }
                cx->slots[b->slot] = m;
                cx->slot_cap[b->slot] = need;
            }
        }
    }
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind == KILN_BUF_TEMP && b->slot >= 0)
            b->data = cx->slots[b->slot];
    }
    cx->shapes_ready = 1;
    return 0;
}

static int note_patch(kiln_context *ctx, const kiln_arg *a, kiln_view *v)
{
    const kiln_buf *b = &ctx->prog.bufs[a->buf];
    if (b->kind != KILN_BUF_INPUT)
        return 0;
    if (ctx->n_patches == ctx->cap_patches) {
        int cap = ctx->cap_patches ? 2 * ctx->cap_patches : 16;
        view_patch *m = realloc(ctx->patches, sizeof *m * (size_t)cap);
        if (!m)
            return -1;
        ctx->patches = m;
        ctx->cap_patches = cap;
    }
    ctx->patches[ctx->n_patches++] =
        (view_patch){v, a->buf, (intptr_t)v->data - (intptr_t)b->data};
    return 0;
}

/* Build every view of step s from the buffers' shapes and data. */
static int build_views(kiln_context *ctx, kiln_step *s)
{
    kiln_program *p = &ctx->prog;
    int iter_rank = 0, rc = 0;
    const int64_t *iter = NULL;
    if (s->iter_input) {
        kiln_lower_view(p, &s->in[0], 0, NULL, &s->vin[0]);
        iter_rank = s->vin[0].rank;
        iter = s->vin[0].shape;
    } else if (s->n_out > 0) {
        /* output 0 (its buffer as it is) gives the iteration space: a LOOP
         * kernel's reduction outputs after it need it */
        kiln_lower_view(p, &s->out[0], 0, NULL, &s->vout[0]);
        iter_rank = s->vout[0].rank;
        iter = s->vout[0].shape;
    }
    for (int k = 0; k < s->n_out; k++) {
        kiln_lower_view(p, &s->out[k], iter_rank, iter, &s->vout[k]);
        rc |= note_patch(ctx, &s->out[k], &s->vout[k]);
    }
    if (!s->iter_input && s->n_out > 0) {
        iter_rank = s->vout[0].rank;
        iter = s->vout[0].shape;
    }
    for (int k = s->iter_input ? 1 : 0; k < s->n_in; k++)
        kiln_lower_view(p, &s->in[k], iter_rank, iter, &s->vin[k]);
    for (int k = 0; k < s->n_in; k++)
        rc |= note_patch(ctx, &s->in[k], &s->vin[k]);
    return rc;
}

static int has_prepare(const kiln_callable *c)
{
    return c->struct_size >= offsetof(kiln_callable, plan_free) +
                                 sizeof c->plan_free &&
           c->prepare && c->run && c->plan_free;
}

static void free_plan(kiln_step *s)
{
    if (s->plan && s->callable && has_prepare(s->callable))
        s->callable->plan_free(s->plan);
    s->plan = NULL;
}

/* Prepare step s's call (ABI 1.4) for its views as they are now; a
 * callable that cannot prepare it is called through fn. */
static void prepare_step(kiln_context *ctx, kiln_step *s)
{
    free_plan(s);
    if (!s->callable || !has_prepare(s->callable))
        return;
    kiln_call call = {sizeof call, (uint32_t)s->n_in, (uint32_t)s->n_out,
                      s->vin, s->vout, ctx->f->rt, ctx->errbuf,
                      sizeof ctx->errbuf, s->consts, s->n_consts};
    void *plan = NULL;
    if (s->callable->prepare(s->callable->state, &call, &plan) == 0)
        s->plan = plan;
}

/* Make the views right for this call's data: all of them after a shape
 * change (and every step's plan with them), else only those of input
 * buffers. */
static int ready_views(kiln_context *ctx, kiln_err *err)
{
    kiln_program *p = &ctx->prog;
    if (!ctx->views_ready) {
        ctx->n_patches = 0;
        for (int i = 0; i < p->n_steps; i++) {
            if (build_views(ctx, &p->steps[i]))
                return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            prepare_step(ctx, &p->steps[i]);
        }
        ctx->views_ready = 1;
        return 0;
    }
    for (int i = 0; i < ctx->n_patches; i++) {
        const view_patch *q = &ctx->patches[i];
        q->v->data = (void *)((intptr_t)p->bufs[q->buf].data + q->off);
    }
    return 0;
}

static int run_step(kiln_context *ctx, kiln_step *s, kiln_err *err)
{
    kiln_call call = {sizeof call, (uint32_t)s->n_in, (uint32_t)s->n_out,
                      s->vin, s->vout, ctx->f->rt, ctx->errbuf,
                      sizeof ctx->errbuf, s->consts, s->n_consts};
    int krc = s->plan ? s->callable->run(s->plan, &call)
                      : s->callable->fn(s->callable->state, &call);
    if (krc) {
        char lbl[160];
        /* an index one past the end is what 1-based indices (Stan's,
         * R's) give: say that kiln's are 0-based */
        long long idx, len;
        int axis;
        const char *hint = "";
        if (sscanf(ctx->errbuf, "index %lld is out of bounds for axis %d "
                   "with size %lld", &idx, &axis, &len) == 3 && idx == len)
            hint = " (kiln's indices are 0-based, 0 to size-1: for 1-based "
                   "data, index with sub(i, 1))";
        /* a kernel that rejects the point (an ODE solver's failure, as
         * Stan rejects a draw) says so with KILN_ERR_CHECK */
        return kiln_seterr(err, krc == KILN_ERR_CHECK ? KILN_ERR_CHECK
                                                      : KILN_ERR_RUNTIME,
                           "%s: %s%s",
                           kiln_vm_node_label(ctx->f->g, s->node, lbl,
                                              sizeof lbl),
                           ctx->errbuf[0] ? ctx->errbuf : "kernel failed",
                           hint);
    }
    /* issue 25: a check's condition reduced to one bool (lower.c,
     * lower_check): false fails the call */
    if (s->check && !*(const unsigned char *)s->vout[0].data) {
        char lbl[160];
        const kiln_graph *g = ctx->f->g;
        const char *msg = g->nodes[s->check - 1].attrs->msg;
        kiln_vm_node_label(g, s->check - 1, lbl, sizeof lbl);
        if (msg && msg[0])
            return kiln_seterr(err, KILN_ERR_CHECK, "check failed: %s (%s)",
                               msg, lbl);
        return kiln_seterr(err, KILN_ERR_CHECK, "check failed (%s)", lbl);
    }
    return 0;
}

/* ---- contexts --------------------------------------------------------- */

/* Copy f's leaves (constants, shared values: data and shapes set at
 * compile or by kiln_function_bind_shared) into the context's buffers. */
static void copy_leaves(kiln_context *ctx)
{
    const kiln_program *fp = &ctx->f->prog;
    for (int i = 0; i < fp->n_bufs; i++)
        if (fp->bufs[i].kind == KILN_BUF_CONST)
            ctx->prog.bufs[i] = fp->bufs[i];
    ctx->bind_gen = ctx->f->bind_gen;
    ctx->shapes_ready = 0;
}

/* Point step i of the context at the callable f runs it with now; its
 * plan (made for the old callable) is freed and made again when the
 * views are ready. */
static void take_callable(kiln_context *ctx, int i)
{
    kiln_function *f = ctx->f;
    kiln_step *s = &ctx->prog.steps[i];
    const kiln_step *m = &f->prog.steps[i];
    kiln_callable *c = m->callable;
    const kiln_backend *be = m->backend;
    if (f->tiers && atomic_load_explicit(&f->tiers[i].state,
                                         memory_order_acquire) ==
                        KILN_TIER_SWAPPED) {
        c = atomic_load_explicit(&f->tiers[i].callable1,
                                 memory_order_acquire);
        be = f->tiers[i].be1;
    }
    if (c == s->callable)
        return;
    free_plan(s);
    s->callable = c;
    s->backend = be;
    if (ctx->views_ready)
        prepare_step(ctx, s);
}

static void refresh_callables(kiln_context *ctx, unsigned gen)
{
    for (int i = 0; i < ctx->prog.n_steps; i++)
        take_callable(ctx, i);
    ctx->swap_gen = gen;
}

kiln_context *kiln_context_new(kiln_function *f, kiln_err *err)
{
    if (!f) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_context_new: f is NULL");
        return NULL;
    }
    kiln_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        goto nomem;
    ctx->f = f;
    const kiln_program *fp = &f->prog;
    ctx->prog = *fp;
    ctx->prog.bufs = NULL;
    ctx->prog.steps = NULL;
    int nb = fp->n_bufs ? fp->n_bufs : 1, ns = fp->n_steps ? fp->n_steps : 1;
    int nsl = fp->n_slots ? fp->n_slots : 1;
    int nsym = f->g->n_symbols ? f->g->n_symbols : 1;
    size_t nviews = 0;
    for (int i = 0; i < fp->n_steps; i++)
        nviews += (size_t)fp->steps[i].n_in + (size_t)fp->steps[i].n_out;
    ctx->prog.bufs = malloc(sizeof *ctx->prog.bufs * (size_t)nb);
    ctx->prog.steps = malloc(sizeof *ctx->prog.steps * (size_t)ns);
    ctx->views = calloc(nviews ? nviews : 1, sizeof *ctx->views);
    ctx->slots = calloc((size_t)nsl, sizeof *ctx->slots);
    ctx->slot_cap = calloc((size_t)nsl, sizeof *ctx->slot_cap);
    ctx->symvals = malloc(sizeof *ctx->symvals * (size_t)nsym);
    ctx->symsrc = malloc(sizeof *ctx->symsrc * (size_t)nsym);
    ctx->last_shapes = calloc((size_t)(f->n_inputs ? f->n_inputs : 1),
                              sizeof(int64_t) * KILN_MAX_RANK);
    ctx->sample_ns = calloc((size_t)ns, sizeof *ctx->sample_ns);
    if (!ctx->prog.bufs || !ctx->prog.steps || !ctx->views || !ctx->slots ||
        !ctx->slot_cap || !ctx->symvals || !ctx->symsrc ||
        !ctx->last_shapes || !ctx->sample_ns)
        goto nomem;
    if (fp->n_bufs)
        memcpy(ctx->prog.bufs, fp->bufs, sizeof *fp->bufs * (size_t)fp->n_bufs);
    kiln_view *v = ctx->views;
    for (int i = 0; i < fp->n_steps; i++) {
        kiln_step *s = &ctx->prog.steps[i];
        *s = fp->steps[i];
        s->vin = v;
        v += s->n_in;
        s->vout = v;
        v += s->n_out;
        s->plan = NULL;
    }
    copy_leaves(ctx);
    refresh_callables(ctx, atomic_load_explicit(&f->swap_gen,
                                                memory_order_acquire));
    return ctx;
nomem:
    kiln_context_free(ctx);
    kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return NULL;
}

void kiln_context_free(kiln_context *ctx)
{
    if (!ctx)
        return;
    for (int i = 0; ctx->prog.steps && i < ctx->prog.n_steps; i++)
        free_plan(&ctx->prog.steps[i]);
    for (int i = 0; ctx->slots && i < (ctx->prog.n_slots ? ctx->prog.n_slots
                                                         : 1); i++)
        free(ctx->slots[i]);
    free(ctx->slots);
    free(ctx->slot_cap);
    free(ctx->prog.bufs);
    free(ctx->prog.steps);
    free(ctx->views);
    free(ctx->symvals);
    free(ctx->symsrc);
    free(ctx->last_shapes);
    free(ctx->patches);
    free(ctx->sample_ns);
    free(ctx);
}

void kiln_context_free_all(kiln_function *f)
{
    kiln_context *c = atomic_load_explicit(&f->threads, memory_order_acquire);
    while (c) {
        kiln_context *next = c->next;
        kiln_context_free(c);
        c = next;
    }
    atomic_store_explicit(&f->threads, NULL, memory_order_relaxed);
}

/* The calling thread's context of f, made on its first call. */
static kiln_context *thread_context(kiln_function *f, kiln_err *err)
{
    pthread_t me = pthread_self();
    for (kiln_context *c = atomic_load_explicit(&f->threads,
                                                memory_order_acquire);
         c; c = c->next)
        if (pthread_equal(c->owner, me))
            return c;
    kiln_context *c = kiln_context_new(f, err);
    if (!c)
        return NULL;
    c->owner = me;
    c->per_thread = 1;
    pthread_mutex_lock(&f->ctx_lock);
    c->next = atomic_load_explicit(&f->threads, memory_order_relaxed);
    atomic_store_explicit(&f->threads, c, memory_order_release);
    pthread_mutex_unlock(&f->ctx_lock);
    return c;
}

/* Run the steps; on a sampled call (tiers: a kernel may still move up),
 * time each of them for the trigger. */
static int run_steps(kiln_context *ctx, kiln_err *err)
{
    kiln_program *p = &ctx->prog;
    kiln_function *f = ctx->f;
    ctx->calls++;
    int sample = 0;
    if (f->tiers && atomic_load_explicit(&f->tier_active,
                                         memory_order_relaxed)) {
        uint64_t n = ctx->calls;
        sample = n <= 2 || n % (uint64_t)f->sample_every == 0;
    }
    if (!sample) {
        for (int i = 0; i < p->n_steps; i++) {
            int rc = run_step(ctx, &p->steps[i], err);
            if (rc)
                return rc;
        }
        return 0;
    }
    double t = kiln_vm_seconds();
    for (int i = 0; i < p->n_steps; i++) {
        int rc = run_step(ctx, &p->steps[i], err);
        if (rc)
            return rc;
        double t1 = kiln_vm_seconds();
        ctx->sample_ns[i] = (t1 - t) * 1e9;
        t = t1;
    }
    kiln_tier_sampled(ctx);
    return 0;
}

int kiln_context_call(kiln_context *ctx, const kiln_tensor *inputs,
                      kiln_tensor *outputs, kiln_err *err)
{
    kiln_function *f = ctx ? ctx->f : NULL;
    if (!f || !outputs || (!inputs && f->n_inputs > 0))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_context_call: NULL argument");
    if (ctx->bind_gen != f->bind_gen)
        copy_leaves(ctx);
    int rc;
    kiln_program *p = &ctx->prog;
    if (same_as_last(ctx, inputs)) {
        /* checked and shaped by an earlier call */
    } else if ((rc = check_inputs(ctx, inputs, err))) {
        return rc;
    } else if (shapes_changed(ctx, inputs)) {
        ctx->views_ready = 0;
        if ((rc = prepare_shapes(ctx, inputs, err))) {
            ctx->shapes_ready = 0;
            return rc;
        }
    }
    for (int i = 0; i < f->n_inputs; i++)
        p->bufs[p->node_buf[f->inputs[i]]].data = inputs[i].data;
    if (f->tiers) {
        unsigned gen = atomic_load_explicit(&f->swap_gen,
                                            memory_order_acquire);
        if (gen != ctx->swap_gen)
            refresh_callables(ctx, gen);
    }
    if ((rc = ready_views(ctx, err)))
        return rc;
    ctx->errbuf[0] = 0;
    if ((rc = run_steps(ctx, err)))
        return rc;
    kiln_graph *g = f->g;
    for (int i = 0; i < g->n_outputs; i++) {
        const kiln_buf *b = &p->bufs[p->node_buf[g->outputs[i].value]];
        outputs[i].dtype = b->type.dtype;
        outputs[i].rank = b->rank;
        memcpy(outputs[i].shape, b->shape, sizeof(int64_t) * KILN_MAX_RANK);
        outputs[i].data = b->data;
    }
    return 0;
}

int kiln_function_call(kiln_function *f, const kiln_tensor *inputs,
                       kiln_tensor *outputs, kiln_err *err)
{
    if (!f || !outputs || (!inputs && f->n_inputs > 0))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_call: NULL argument");
    kiln_context *ctx = thread_context(f, err);
    if (!ctx)
        return err ? err->code : KILN_ERR_NOMEM;
    return kiln_context_call(ctx, inputs, outputs, err);
}

/* ---- the end of a function ------------------------------------------ */

/* Here rather than in vm.c: a function goes after its contexts (their
 * plans go before any callable) and through tier.c (kiln_vm_destroy, now
 * or after a tier-1 job), and this file is the one that uses both. */
/* ---- shared values and hoisting ---------------------------------------- */

/* Give leaf buffer b of node n (f's) the shape `shape` and data n->data,
 * fixing the symbols of n's dims. */
static void set_leaf(kiln_function *f, kiln_node *n, const int64_t *shape)
{
    kiln_buf *b = &f->prog.bufs[f->prog.node_buf[n - f->g->nodes]];
    b->data = n->data;
    b->rank = n->type.rank;
    for (int k = 0; k < n->type.rank; k++) {
        n->vshape[k] = shape[k];
        b->shape[k] = shape[k];
        int64_t d = n->type.dims[k];
        if (KILN_DIM_IS_SYM(d))
            f->symvals_fixed[KILN_SYM_INDEX(d)] = shape[k];
    }
    b->nbytes = n->nbytes;
}

int kiln_context_prep_run(kiln_function *f, kiln_err *err)
{
    kiln_function *p = f->prep;
    if (!p)
        return 0;
    for (int i = 0; i < f->n_prep_in; i++)
        if (!f->g->nodes[f->prep_in[i].node].data)
            return 0;                   /* run once all are bound */
    for (int i = 0; i < f->n_prep_in; i++) {
        kiln_node *n = &f->g->nodes[f->prep_in[i].node];
        kiln_node *pn = &p->g->nodes[f->prep_in[i].prep_node];
        if (pn->data == n->data)
            continue;
        pn->data = n->data;
        pn->nbytes = n->nbytes;
        set_leaf(p, pn, n->vshape);
    }
    p->bind_gen++;
    int no = p->g->n_outputs;
    kiln_tensor *out = calloc((size_t)no, sizeof *out);
    if (!out)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    /* a context of its own, freed after the copy: the prep's buffers
     * (its outputs, the intermediates) do not outlive the run */
    kiln_context *c = kiln_context_new(p, err);
    int rc = c ? kiln_context_call(c, NULL, out, err)
               : err ? err->code : KILN_ERR_NOMEM;
    for (int i = 0; !rc && i < f->n_hoist; i++) {
        const kiln_hoist_ent *h = &f->hoist[i];
        if (h->node < 0)
            continue;
        kiln_node *n = &f->g->nodes[h->node];
        const kiln_tensor *t = &out[h->out];
        size_t bytes = (size_t)kiln_shape_numel(t->rank, t->shape) *
                       kiln_dtype_size(t->dtype);
        if (!n->data) {
            n->data = malloc(bytes ? bytes : 1);
            if (!n->data) {
                rc = kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
                break;
            }
            n->nbytes = bytes;
            set_leaf(f, n, t->shape);
        }
        if (bytes)
            memcpy(n->data, t->data, bytes);
    }
    free(out);
    kiln_context_free(c);
    if (rc)
        kiln_err_prefix(err, "computing the data-only values: ");
    f->bind_gen++;  /* contexts copy the leaves again at their next call */
    return rc;
}

/* kiln_function_bind_shared (ref 0: copy) and _ref (ref 1: borrow). */
static int bind_shared(kiln_function *f, const char *name,
                       const kiln_tensor *value, int ref, kiln_err *err)
{
    if (!f || !name || !value)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_bind_shared%s: NULL argument",
                           ref ? "_ref" : "");
    kiln_node *n = NULL;
    for (int i = 0; i < f->n_shared; i++)
        if (strcmp(f->g->nodes[f->shared[i]].name, name) == 0)
            n = &f->g->nodes[f->shared[i]];
    if (!n)
        return kiln_seterr(err, KILN_ERR_NAME, "no shared value '%s'", name);
    if (value->dtype != n->type.dtype)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "shared value '%s': expected dtype %s, got %s",
                           name, kiln_dtype_name(n->type.dtype),
                           kiln_dtype_name(value->dtype));
    char s1[256], s2[256];
    int bad = value->rank != n->type.rank;
    for (int k = 0; !bad && k < value->rank; k++) {
        int64_t want = n->data ? n->vshape[k] : n->type.dims[k];
        if (want >= 0 ? value->shape[k] != want : value->shape[k] < 0)
            bad = 1;
    }
    if (bad)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "shared value '%s': expected shape %s, got %s",
                           name,
                           n->data ? kiln_ir_shape_str(NULL, n->type.rank,
                                                       n->vshape, s1,
                                                       sizeof s1)
                                   : kiln_ir_shape_str(f->g, n->type.rank,
                                                       n->type.dims, s1,
                                                       sizeof s1),
                           kiln_vm_shape_str(value->rank, value->shape, s2,
                                           sizeof s2));
    if (!kiln_vm_size_fits(value->rank, value->shape, value->dtype))
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "shared value '%s': shape %s is too large", name,
                           kiln_vm_shape_str(value->rank, value->shape, s2,
                                           sizeof s2));
    size_t bytes = (size_t)kiln_shape_numel(value->rank, value->shape) *
                   kiln_dtype_size(value->dtype);
    if (bytes && !value->data)
        return kiln_seterr(err, KILN_ERR_ARG, "shared value '%s': data is "
                           "NULL", name);
    kiln_blob *own = NULL;
    if (ref && bytes && !(own = kiln_blob_new(NULL, NULL)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    if (n->data && (own || n->blob)) {
        /* borrowed before or now: never write the old bytes (a caller's
         * buffer, a read-only mapping); let go of them instead */
        if (n->blob)
            kiln_blob_unref(n->blob);
        else
            free(n->data);
        n->data = NULL;
        n->blob = NULL;
    }
    if (!n->data) {
        n->data = own ? value->data : malloc(bytes ? bytes : 1);
        if (!n->data)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        n->blob = own;
        n->nbytes = bytes;
        for (int k = 0; k < value->rank; k++)
            n->vshape[k] = value->shape[k];
        kiln_buf *b = &f->prog.bufs[f->prog.node_buf[n - f->g->nodes]];
        b->data = n->data;
        b->rank = value->rank;
        for (int k = 0; k < value->rank; k++) {
            b->shape[k] = value->shape[k];
            int64_t d = n->type.dims[k];
            if (KILN_DIM_IS_SYM(d))
                f->symvals_fixed[KILN_SYM_INDEX(d)] = value->shape[k];
        }
        b->nbytes = bytes;
    }
    f->bind_gen++;  /* contexts copy the leaves again at their next call */
    if (bytes && !n->blob)
        memcpy(n->data, value->data, bytes);
    for (int i = 0; i < f->n_prep_in; i++)
        if (&f->g->nodes[f->prep_in[i].node] == n)
            return kiln_context_prep_run(f, err);   /* data-only values again */
    return 0;
}

int kiln_function_bind_shared(kiln_function *f, const char *name,
                              const kiln_tensor *value, kiln_err *err)
{
    return bind_shared(f, name, value, 0, err);
}

int kiln_function_bind_shared_ref(kiln_function *f, const char *name,
                                  const kiln_tensor *value, kiln_err *err)
{
    return bind_shared(f, name, value, 1, err);
}

void kiln_function_free(kiln_function *f)
{
    if (!f)
        return;
    if (f->prep) {
        /* the prep's shared values point at f's data: not its to free */
        for (int i = 0; i < f->n_prep_in; i++) {
            kiln_node *pn = &f->prep->g->nodes[f->prep_in[i].prep_node];
            if (pn->data == f->g->nodes[f->prep_in[i].node].data)
                pn->data = NULL;
        }
        kiln_function_free(f->prep);
        f->prep = NULL;
    }
    if (f->callback_ctx_free)
        f->callback_ctx_free(f->callback_ctx);
    f->callback_ctx_free = NULL;
    kiln_context_free_all(f);   /* their plans go before any callable */
    kiln_tier_release(f);       /* kiln_vm_destroy, now or after a job */
}
