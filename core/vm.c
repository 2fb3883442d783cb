/*
 * vm.c — compiled functions: compile every kernel, then run them in order
 * over planned buffers (prefix kiln_vm_; public kiln_compile and
 * kiln_function_*).
 *
 * A call validates the inputs against their declared types, binds the
 * symbolic dims, and — only when an input shape differs from the previous
 * call — re-infers the run-time shape of every buffer and grows the
 * storage slots.  A call with the same shapes as the one before it
 * allocates nothing: it sets the input pointers, computes each step's
 * views into preallocated arrays and calls the kernels.
 */
#define _POSIX_C_SOURCE 200809L  /* strdup, sysconf */
#include "ir.h"
#include "loader.h"
#include "lower.h"
#include "runtime.h"
#include "vm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct kiln_function {
    kiln_graph *g;              /* owned copy of the graph */
    kiln_program prog;
    int n_inputs, n_shared;
    int *inputs;                /* node ids of inputs, declaration order */
    int *shared;                /* node ids of shared values */
    int64_t *symvals;           /* run-time size of each symbol */
    int64_t *symvals_fixed;     /* sizes fixed by shared values (-1 else) */
    int *symsrc;                /* input index that bound each symbol */
    void **slots;
    size_t *slot_cap;           /* bytes */
    int shapes_ready;
    int64_t *last_shapes;       /* n_inputs * KILN_MAX_RANK */
    const kiln_runtime *rt;
    char errbuf[512];
    void *callback_ctx;         /* sampler callbacks' state (callback.c) */
    void (*callback_ctx_free)(void *);
};

/* ---- helpers -------------------------------------------------------- */

static const char *node_label(const kiln_graph *g, int v, char *buf,
                              size_t size)
{
    const kiln_node *n = &g->nodes[v];
    const char *op = kiln_ir_op_info(n->op)->name;
    if (n->name)
        snprintf(buf, size, "node '%s' (%s)", n->name, op);
    else
        snprintf(buf, size, "node %d (%s)", v, op);
    return buf;
}

static void write_scalar(void *dst, kiln_dtype dt, double v)
{
    switch (dt) {
    case KILN_F64: *(double *)dst = v; break;
    case KILN_F32: *(float *)dst = (float)v; break;
    case KILN_I64: *(int64_t *)dst = (int64_t)v; break;
    case KILN_I32: *(int32_t *)dst = (int32_t)v; break;
    default: *(uint8_t *)dst = v != 0; break;
    }
}

static size_t buf_bytes(const kiln_buf *b)
{
    int64_t n = kiln_shape_numel(b->rank, b->shape);
    return (size_t)n * kiln_dtype_size(b->type.dtype);
}

/* A caller's concrete shape as "(3, 4)": every dim as the number it is
 * (kiln_ir_shape_str shows a negative dim as "?", a symbol). */
static const char *given_shape_str(int rank, const int64_t *shape, char *buf,
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
static int size_fits(int rank, const int64_t *shape, kiln_dtype dt)
{
    int64_t n = kiln_shape_numel(rank, shape);
    size_t es = kiln_dtype_size(dt);
    return n >= 0 && es > 0 && (uint64_t)n <= (uint64_t)INT64_MAX / es &&
           (uint64_t)n <= SIZE_MAX / es;
}

/* ---- compile -------------------------------------------------------- */

static int setup_leaves(kiln_function *f, kiln_err *err)
{
    kiln_graph *g = f->g;
    kiln_program *p = &f->prog;
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind != KILN_BUF_CONST)
            continue;
        kiln_node *n = &g->nodes[b->node];
        if (n->op == KILN_OP_LITERAL) {
            b->owned = malloc(8);
            if (!b->owned)
                return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            write_scalar(b->owned, n->type.dtype, n->attrs.value);
            b->data = b->owned;
            b->rank = 0;
        } else {
            b->data = n->data;
            b->rank = n->type.rank;
            for (int k = 0; k < b->rank; k++)
                b->shape[k] = n->vshape[k];
            b->is_static = 1;
        }
        b->nbytes = buf_bytes(b);
        /* a shared value's shape fixes its symbols */
        for (int k = 0; n->op == KILN_OP_SHARED && n->data && k < b->rank;
             k++) {
            int64_t d = n->type.dims[k];
            if (KILN_DIM_IS_SYM(d))
                f->symvals_fixed[KILN_SYM_INDEX(d)] = n->vshape[k];
        }
    }
    return 0;
}

/* Compile one step with backend `be`; 0 on success, else the reason in
 * why. */
static int compile_step_unlocked(kiln_step *s, const kiln_backend *be,
                                 const kiln_compile_options *co, char *why,
                                 size_t size)
{
    kiln_plugin_error *pe = NULL;
    if (be->supports && !be->supports(&s->kernel, &pe)) {
        snprintf(why, size, "refused: %s",
                 pe && pe->message ? pe->message : "unsupported");
        if (pe)
            be->error_free(pe);
        return -1;
    }
    if (pe) {
        be->error_free(pe);
        pe = NULL;
    }
    kiln_artifact *art = NULL;
    if (be->compile(&s->kernel, co, &art, &pe)) {
        snprintf(why, size, "compile failed: %s",
                 pe && pe->message ? pe->message : "unknown error");
        if (pe)
            be->error_free(pe);
        return -1;
    }
    kiln_callable *c = NULL;
    int rc = be->load(art, &c, &pe);
    be->artifact_free(art);
    if (rc || !c || !c->fn) {
        snprintf(why, size, "load failed: %s",
                 pe && pe->message ? pe->message : "unknown error");
        if (pe)
            be->error_free(pe);
        if (c)
            be->callable_free(c);
        return -1;
    }
    s->backend = be;
    s->callable = c;
    return 0;
}

/* A plugin without KILN_BACKEND_THREAD_SAFE (libtcc 0.9.27 keeps its
 * compiler state in globals) is entered by one thread at a time: one lock,
 * shared by all such plugins, around supports/compile/load/artifact_free
 * and callable_free.  Kernel calls are not serialised: a plugin's kernels
 * must be reentrant (docs/plugin-abi.md, section 11). */
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

static int compile_step(kiln_step *s, const kiln_backend *be,
                        const kiln_compile_options *co, char *why,
                        size_t size)
{
    int serial = !(be->flags & KILN_BACKEND_THREAD_SAFE);
    if (serial)
        pthread_mutex_lock(&serial_lock);
    int rc = compile_step_unlocked(s, be, co, why, size);
    if (serial)
        pthread_mutex_unlock(&serial_lock);
    return rc;
}

/* Parallel compilation (kiln_options.jobs): a small pool of threads takes
 * steps in order from a shared counter and compiles each with the chosen
 * backend, keeping the reason of a failure; the fallbacks, their
 * diagnostics and the final error are then handled in step order by the
 * calling thread, exactly as a serial compile would. */
typedef struct compile_pool {
    kiln_function *f;
    const kiln_backend *be;
    const kiln_compile_options *co;
    char **why;                 /* per step: NULL, or the failure reason */
    int *failed;
    int next;
    pthread_mutex_t lock;
} compile_pool;

static void *compile_worker(void *arg)
{
    compile_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->f->prog.n_steps)
            return NULL;
        char why[600];
        if (compile_step(&p->f->prog.steps[i], p->be, p->co, why,
                         sizeof why)) {
            p->failed[i] = 1;
            p->why[i] = strdup(why);  /* NULL: reported as "unknown" */
        }
    }
}

static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* Compile every step with `be` on `jobs` threads; *failed[i] and why[i]
 * record failures.  Returns -1 when the pool cannot be set up (the caller
 * then compiles serially). */
static int compile_parallel(kiln_function *f, const kiln_backend *be,
                            const kiln_compile_options *co, int jobs,
                            int *failed, char **why)
{
    compile_pool p = {f, be, co, why, failed, 0, PTHREAD_MUTEX_INITIALIZER};
    if (jobs > f->prog.n_steps)
        jobs = f->prog.n_steps;
    pthread_t *th = malloc(sizeof *th * (size_t)jobs);
    if (!th)
        return -1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* optimisers recurse: more than the smallest default stacks */
    pthread_attr_setstacksize(&attr, (size_t)16 << 20);
    int started = 0;
    for (int t = 1; t < jobs; t++) {
        if (pthread_create(&th[t], &attr, compile_worker, &p) != 0)
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    compile_worker(&p);         /* the calling thread works too */
    for (int t = 1; t <= started; t++)
        pthread_join(th[t], NULL);
    free(th);
    pthread_mutex_destroy(&p.lock);
    return 0;
}

static int compile_steps(kiln_function *f, const kiln_options *opt,
                         kiln_err *err)
{
    int jobs = 0;
    kiln_compile_options co = {sizeof co, 2, 0};
    /* $KILN_BACKEND names the backend when the options do not */
    const char *name = getenv("KILN_BACKEND");
    if (!name || !*name)
        name = "interp";
    const char *path = NULL;
    FILE *diag = NULL;
    int quiet = 0;
    if (opt) {
        size_t sz = opt->struct_size;
        if (sz >= offsetof(kiln_options, backend) + sizeof(char *) &&
            opt->backend)
            name = opt->backend;
        if (sz >= offsetof(kiln_options, plugin_path) + sizeof(char *))
            path = opt->plugin_path;
        if (sz >= offsetof(kiln_options, diag) + sizeof(void *))
            diag = opt->diag;
        if (sz >= offsetof(kiln_options, quiet) + sizeof(int))
            quiet = opt->quiet;
        if (sz >= offsetof(kiln_options, jobs) + sizeof(int))
            jobs = opt->jobs;
        if (sz >= offsetof(kiln_options, opt_level) + sizeof(int) &&
            opt->opt_level >= 1 && opt->opt_level <= 3)
            co.opt_level = opt->opt_level;
        if (sz >= offsetof(kiln_options, fast_math) + sizeof(int))
            co.fast_math = opt->fast_math != 0;
    }
    if (jobs <= 0)
        jobs = default_jobs();
    kiln_err lerr = {0, ""};
    const kiln_backend *be = kiln_loader_get(name, path, diag, quiet, &lerr);
    const kiln_backend *interp = kiln_loader_get("interp", path, diag, quiet,
                                                 NULL);
    if (!interp)
        interp = kiln_loader_builtin_interp();
    if (!be) {
        if (!quiet)
            fprintf(diag ? diag : stderr, "kiln: %s; using interp\n",
                    lerr.message);
        be = interp;
    }
    /* Thread-safe plugins other than the interpreter (whose "compile" is a
     * copy) compile on the pool; the rest in this thread. */
    int n = f->prog.n_steps;
    int *failed = NULL;
    char **whys = NULL;
    if (jobs > 1 && n > 1 && be != interp &&
        (be->flags & KILN_BACKEND_THREAD_SAFE)) {
        failed = calloc((size_t)n, sizeof *failed);
        whys = calloc((size_t)n, sizeof *whys);
        if (!failed || !whys ||
            compile_parallel(f, be, &co, jobs, failed, whys)) {
            free(failed);  /* steps already compiled are kept */
            free(whys);
            failed = NULL;
            whys = NULL;
        }
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        kiln_step *s = &f->prog.steps[i];
        char why[600];
        if (failed) {
            if (!failed[i])
                continue;
            snprintf(why, sizeof why, "%s", whys[i] ? whys[i]
                                                     : "unknown error");
        } else if (s->callable ||
                   compile_step(s, be, &co, why, sizeof why) == 0) {
            continue;
        }
        if (be != interp) {
            if (!quiet)
                fprintf(diag ? diag : stderr,
                        "kiln: backend '%s' on kernel %d (%s): %s; using "
                        "interp\n", be->name, i, s->label, why);
            char why2[600];
            if (compile_step(s, interp, &co, why2, sizeof why2) == 0)
                continue;
            snprintf(why, sizeof why, "%s", why2);
        }
        char lbl[160];
        rc = kiln_seterr(err, KILN_ERR_BACKEND,
                         "no backend could compile kernel %d (%s) of %s: "
                         "%s", i, s->label,
                         node_label(f->g, s->node, lbl, sizeof lbl), why);
        break;
    }
    for (int i = 0; whys && i < n; i++)
        free(whys[i]);
    free(whys);
    free(failed);
    return rc;
}

kiln_function *kiln_compile(const kiln_graph *graph, const kiln_options *opt,
                            kiln_err *err)
{
    if (!graph) {
        kiln_seterr(err, KILN_ERR_ARG, "kiln_compile: graph is NULL");
        return NULL;
    }
    if (graph->n_outputs == 0) {
        kiln_seterr(err, KILN_ERR_ARG, "graph '%s' has no output",
                    graph->name ? graph->name : "");
        return NULL;
    }
    kiln_function *f = calloc(1, sizeof *f);
    if (!f) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    f->rt = kiln_runtime_get();
    f->g = kiln_ir_clone(graph, err);
    if (!f->g)
        goto fail;
    kiln_graph *g = f->g;
    int nn = g->n_nodes ? g->n_nodes : 1;
    int ns = g->n_symbols ? g->n_symbols : 1;
    f->inputs = malloc(sizeof(int) * (size_t)nn);
    f->shared = malloc(sizeof(int) * (size_t)nn);
    f->symvals = malloc(sizeof(int64_t) * (size_t)ns);
    f->symvals_fixed = malloc(sizeof(int64_t) * (size_t)ns);
    f->symsrc = malloc(sizeof(int) * (size_t)ns);
    if (!f->inputs || !f->shared || !f->symvals || !f->symvals_fixed ||
        !f->symsrc) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < ns; i++)
        f->symvals_fixed[i] = -1;
    for (int v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op == KILN_OP_INPUT)
            f->inputs[f->n_inputs++] = v;
        else if (g->nodes[v].op == KILN_OP_SHARED)
            f->shared[f->n_shared++] = v;
    }
    f->last_shapes = calloc((size_t)(f->n_inputs ? f->n_inputs : 1),
                            sizeof(int64_t) * KILN_MAX_RANK);
    if (!f->last_shapes) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (kiln_lower(g, &f->prog, err))
        goto fail;
    if (setup_leaves(f, err))
        goto fail;
    int nsl = f->prog.n_slots ? f->prog.n_slots : 1;
    f->slots = calloc((size_t)nsl, sizeof(void *));
    f->slot_cap = calloc((size_t)nsl, sizeof(size_t));
    if (!f->slots || !f->slot_cap) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (compile_steps(f, opt, err))
        goto fail;
    return f;
fail:
    kiln_function_free(f);
    return NULL;
}

void kiln_function_free(kiln_function *f)
{
    if (!f)
        return;
    if (f->callback_ctx_free)
        f->callback_ctx_free(f->callback_ctx);
    for (int i = 0; i < f->prog.n_steps; i++) {
        kiln_step *s = &f->prog.steps[i];
        if (s->callable) {
            int serial = !(s->backend->flags & KILN_BACKEND_THREAD_SAFE);
            if (serial)
                pthread_mutex_lock(&serial_lock);
            s->backend->callable_free(s->callable);
            if (serial)
                pthread_mutex_unlock(&serial_lock);
        }
    }
    /* before kiln_lower_free, which zeroes prog.n_slots */
    for (int i = 0; f->slots && i < (f->prog.n_slots ? f->prog.n_slots : 1);
         i++)
        free(f->slots[i]);
    kiln_lower_free(&f->prog);
    free(f->slots);
    free(f->slot_cap);
    free(f->inputs);
    free(f->shared);
    free(f->symvals);
    free(f->symvals_fixed);
    free(f->symsrc);
    free(f->last_shapes);
    kiln_graph_free(f->g);
    free(f);
}

/* ---- calling -------------------------------------------------------- */

static int check_inputs(kiln_function *f, const kiln_tensor *in,
                        kiln_err *err)
{
    kiln_graph *g = f->g;
    memcpy(f->symvals, f->symvals_fixed,
           sizeof(int64_t) * (size_t)g->n_symbols);
    for (int s = 0; s < g->n_symbols; s++)
        f->symsrc[s] = -1;
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
                               given_shape_str(t->rank, t->shape, s2,
                                               sizeof s2));
        if (!size_fits(t->rank, t->shape, t->dtype))
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "input '%s': shape %s is too large", n->name,
                               given_shape_str(t->rank, t->shape, s2,
                                               sizeof s2));
        if (t->data == NULL && kiln_shape_numel(t->rank, t->shape) > 0)
            return kiln_seterr(err, KILN_ERR_ARG, "input '%s': data is NULL",
                               n->name);
        for (int k = 0; k < t->rank; k++) {
            int64_t d = n->type.dims[k];
            if (!KILN_DIM_IS_SYM(d))
                continue;
            int si = KILN_SYM_INDEX(d);
            if (f->symvals[si] < 0) {
                f->symvals[si] = t->shape[k];
                f->symsrc[si] = i;
            } else if (f->symvals[si] != t->shape[k]) {
                char from[300];
                if (f->symsrc[si] >= 0)
                    snprintf(from, sizeof from, "input '%s'",
                             g->nodes[f->inputs[f->symsrc[si]]].name);
                else
                    snprintf(from, sizeof from, "a shared value");
                const char *sn = g->symbols[si] ? g->symbols[si] : "?";
                return kiln_seterr(err, KILN_ERR_SHAPE,
                                   "input '%s': got shape %s, but dim %d is "
                                   "'%s', which is %lld from %s", n->name,
                                   given_shape_str(t->rank, t->shape, s2,
                                                   sizeof s2),
                                   k, sn, (long long)f->symvals[si], from);
            }
        }
    }
    for (int i = 0; i < f->n_shared; i++) {
        const kiln_node *n = &g->nodes[f->shared[i]];
        if (!n->data)
            return kiln_seterr(err, KILN_ERR_ARG,
                               "shared value '%s' has no value; bind one with "
                               "kiln_function_bind_shared", n->name);
    }
    return 0;
}

static int shapes_changed(kiln_function *f, const kiln_tensor *in)
{
    int changed = !f->shapes_ready;
    for (int i = 0; i < f->n_inputs; i++) {
        int64_t *last = &f->last_shapes[(size_t)i * KILN_MAX_RANK];
        for (int k = 0; k < in[i].rank; k++) {
            if (last[k] != in[i].shape[k]) {
                last[k] = in[i].shape[k];
                changed = 1;
            }
        }
    }
    return changed;
}

/* Re-infer every buffer's shape from the inputs and grow the slots. */
static int prepare_shapes(kiln_function *f, const kiln_tensor *in,
                          kiln_err *err)
{
    kiln_program *p = &f->prog;
    kiln_graph *g = f->g;
    kiln_shape_ctx ctx = {NULL, f->symvals};
    for (int i = 0; i < f->n_inputs; i++) {
        kiln_buf *b = &p->bufs[p->node_buf[f->inputs[i]]];
        b->rank = in[i].rank;
        for (int k = 0; k < b->rank; k++)
            b->shape[k] = in[i].shape[k];
    }
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind != KILN_BUF_TEMP || b->def_step < 0)
            continue;  /* dead nodes are never computed */
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
            int rc = kiln_ir_infer(&ctx, b->op, &b->attrs, b->n_in, tins,
                                   NULL, &tout, NULL, err);
            if (tins != tin)
                free(tins);
            if (rc) {
                char lbl[160];
                if (b->node >= 0)
                    kiln_err_prefix(err, "%s: ",
                                    node_label(g, b->node, lbl, sizeof lbl));
                return rc;
            }
            b->rank = tout.rank;
            memcpy(b->shape, tout.dims, sizeof(int64_t) * KILN_MAX_RANK);
        }
        if (!size_fits(b->rank, b->shape, b->type.dtype)) {
            char lbl[160], s1[256];
            if (b->node >= 0)
                node_label(g, b->node, lbl, sizeof lbl);
            else
                snprintf(lbl, sizeof lbl, "a temporary");
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "%s: shape %s is too large", lbl,
                               given_shape_str(b->rank, b->shape, s1,
                                               sizeof s1));
        }
        b->nbytes = buf_bytes(b);
        if (b->slot >= 0) {
            size_t need = b->nbytes ? b->nbytes : 8;
            if (f->slot_cap[b->slot] < need) {
                void *m = realloc(f->slots[b->slot], need);
                if (!m)
                    return kiln_seterr(err, KILN_ERR_NOMEM,
                                       "out of memory (%zu bytes)", need);
                f->slots[b->slot] = m;
                f->slot_cap[b->slot] = need;
            }
        }
    }
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        if (b->kind == KILN_BUF_TEMP && b->slot >= 0)
            b->data = f->slots[b->slot];
    }
    f->shapes_ready = 1;
    return 0;
}

static int run_step(kiln_function *f, kiln_step *s, kiln_err *err)
{
    kiln_program *p = &f->prog;
    int iter_rank = 0;
    const int64_t *iter = NULL;
    if (s->iter_input) {
        kiln_lower_view(p, &s->in[0], 0, NULL, &s->vin[0]);
        iter_rank = s->vin[0].rank;
        iter = s->vin[0].shape;
    }
    for (int k = 0; k < s->n_out; k++)
        kiln_lower_view(p, &s->out[k], iter_rank, iter, &s->vout[k]);
    if (!s->iter_input && s->n_out > 0) {
        iter_rank = s->vout[0].rank;
        iter = s->vout[0].shape;
    }
    for (int k = s->iter_input ? 1 : 0; k < s->n_in; k++)
        kiln_lower_view(p, &s->in[k], iter_rank, iter, &s->vin[k]);
    kiln_call call = {sizeof call, (uint32_t)s->n_in, (uint32_t)s->n_out,
                      s->vin, s->vout, f->rt, f->errbuf, sizeof f->errbuf};
    f->errbuf[0] = 0;
    if (s->callable->fn(s->callable->state, &call)) {
        char lbl[160];
        return kiln_seterr(err, KILN_ERR_RUNTIME, "%s: %s",
                           node_label(f->g, s->node, lbl, sizeof lbl),
                           f->errbuf[0] ? f->errbuf : "kernel failed");
    }
    return 0;
}

int kiln_function_call(kiln_function *f, const kiln_tensor *inputs,
                       kiln_tensor *outputs, kiln_err *err)
{
    if (!f || !outputs || (!inputs && f->n_inputs > 0))
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_call: NULL argument");
    int rc = check_inputs(f, inputs, err);
    if (rc)
        return rc;
    kiln_program *p = &f->prog;
    if (shapes_changed(f, inputs) && (rc = prepare_shapes(f, inputs, err))) {
        f->shapes_ready = 0;
        return rc;
    }
    for (int i = 0; i < f->n_inputs; i++)
        p->bufs[p->node_buf[f->inputs[i]]].data = inputs[i].data;
    for (int i = 0; i < p->n_steps; i++)
        if ((rc = run_step(f, &p->steps[i], err)))
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

int kiln_function_bind_shared(kiln_function *f, const char *name,
                              const kiln_tensor *value, kiln_err *err)
{
    if (!f || !name || !value)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_function_bind_shared: NULL argument");
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
                           given_shape_str(value->rank, value->shape, s2,
                                           sizeof s2));
    if (!size_fits(value->rank, value->shape, value->dtype))
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "shared value '%s': shape %s is too large", name,
                           given_shape_str(value->rank, value->shape, s2,
                                           sizeof s2));
    size_t bytes = (size_t)kiln_shape_numel(value->rank, value->shape) *
                   kiln_dtype_size(value->dtype);
    if (bytes && !value->data)
        return kiln_seterr(err, KILN_ERR_ARG, "shared value '%s': data is "
                           "NULL", name);
    if (!n->data) {
        n->data = malloc(bytes ? bytes : 1);
        if (!n->data)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
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
        f->shapes_ready = 0;
    }
    if (bytes)
        memcpy(n->data, value->data, bytes);
    return 0;
}

int kiln_function_n_kernels(const kiln_function *f)
{
    return f ? f->prog.n_steps : 0;
}

const char *kiln_function_kernel_backend(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->prog.n_steps || !f->prog.steps[i].backend)
        return NULL;
    return f->prog.steps[i].backend->name;
}

const kiln_graph *kiln_vm_graph(const kiln_function *f)
{
    return f ? f->g : NULL;
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
