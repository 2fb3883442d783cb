/*
 * recur.c — running RECUR kernels (a scan with a body, issue 28) in the
 * host (prefix kiln_recur_).
 *
 * The compile driver compiles a scan's body as a function of its own
 * (every kernel of it through the policy, the cache and the backends like
 * any other) and gives the RECUR step a callable made here: each call
 * steps t = 0 .. T-1, calling the body's function with the carries, step
 * t of each sequence and the args, copying the new carries aside and the
 * per-step outputs into row t of the stacked outputs.  That is one body
 * call per step (the body's own kernels, not one fused loop kernel): the
 * fallback every backend shares.  The callable belongs to the pseudo
 * backend `kiln_recur_backend` ("host"), which frees it with the body's
 * function.
 */
#include "function.h"
#include "recur.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct recur_state {
    kiln_function *body;      /* owned */
    int n_carry, n_seq, n_args, n_out;
    int64_t n_steps;          /* the step count without a sequence */
} recur_state;

static int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

/* Copy the strided view (rank, shape, strides in elements) at src into
 * contiguous dst, or (to_view) contiguous src into the view at dst. */
static void copy_view(char *dst, const char *src, int rank,
                      const int64_t *shape, const int64_t *strides,
                      size_t es, int to_view)
{
    int64_t n = numel(rank, shape);
    int64_t idx[KILN_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++)
            off += idx[d] * strides[d];
        if (to_view)
            memcpy(dst + off * (int64_t)es, src + k * (int64_t)es, es);
        else
            memcpy(dst + k * (int64_t)es, src + off * (int64_t)es, es);
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < shape[d])
                break;
            idx[d] = 0;
        }
    }
}

static int is_contiguous(int rank, const int64_t *shape,
                         const int64_t *strides)
{
    int64_t want = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (shape[d] != 1 && strides[d] != want)
            return 0;
        want *= shape[d];
    }
    return 1;
}

static const char *shape_text(int rank, const int64_t *s, char *buf,
                              size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "(");
    for (int i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "",
                              (long long)s[i]);
    if (k < n)
        snprintf(buf + k, n - k, ")");
    return buf;
}

static int fail(const kiln_call *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(const kiln_call *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (c->errbuf && c->errbuf_size)
        vsnprintf(c->errbuf, c->errbuf_size, fmt, ap);
    va_end(ap);
    return code;
}

static int recur_run(void *state, const kiln_call *call)
{
    const recur_state *st = state;
    int nc = st->n_carry, ns = st->n_seq, na = st->n_args;
    int n_in = nc + ns + na;
    if ((int)call->n_inputs != n_in || (int)call->n_outputs != st->n_out)
        return fail(call, KILN_ERR_ARG, "scan: %u inputs and %u outputs, "
                    "expected %d and %d", call->n_inputs, call->n_outputs,
                    n_in, st->n_out);
    const kiln_view *in = call->inputs, *out = call->outputs;
    int64_t T = ns ? in[nc].shape[0] : st->n_steps;
    /* one contiguous block: carries (two copies: this step's and the
     * next's), sequence steps and args that are not contiguous */
    size_t total = 0;
    size_t *off = calloc((size_t)(2 * n_in + 1), sizeof *off);
    kiln_tensor *bin = calloc((size_t)(n_in + 1), sizeof *bin);
    kiln_tensor *bout = calloc((size_t)(st->n_out + 1), sizeof *bout);
    if (!off || !bin || !bout) {
        free(off);
        free(bin);
        free(bout);
        return fail(call, KILN_ERR_NOMEM, "scan: out of memory");
    }
    for (int i = 0; i < n_in; i++) {
        const kiln_view *v = &in[i];
        int sq = i >= nc && i < nc + ns;
        int rank = sq ? v->rank - 1 : v->rank;
        const int64_t *shape = sq ? v->shape + 1 : v->shape;
        size_t bytes = (size_t)numel(rank, shape) *
                       kiln_dtype_size((kiln_dtype)v->dtype);
        off[i] = total;
        total += (bytes + 15) & ~(size_t)15;
    }
    for (int i = 0; i < nc; i++) {   /* next step's carries */
        off[n_in + i] = total;
        total += (off[i + 1] - off[i]);
    }
    char *blk = malloc(total ? total : 1);
    if (!blk) {
        free(off);
        free(bin);
        free(bout);
        return fail(call, KILN_ERR_NOMEM, "scan: out of memory");
    }
    int rc = 0;
    for (int i = 0; i < n_in; i++) {
        const kiln_view *v = &in[i];
        int sq = i >= nc && i < nc + ns;
        bin[i].dtype = (kiln_dtype)v->dtype;
        bin[i].rank = sq ? v->rank - 1 : v->rank;
        memcpy(bin[i].shape, sq ? v->shape + 1 : v->shape,
               sizeof(int64_t) * (size_t)bin[i].rank);
        bin[i].data = blk + off[i];
        if (!sq)
            copy_view(blk + off[i], v->data, v->rank, v->shape, v->strides,
                      kiln_dtype_size((kiln_dtype)v->dtype), 0);
    }
    kiln_err e = {0};
    for (int64_t t = 0; t < T && !rc; t++) {
        for (int j = 0; j < ns; j++) {
            const kiln_view *v = &in[nc + j];
            size_t es = kiln_dtype_size((kiln_dtype)v->dtype);
            const char *row = (const char *)v->data +
                              t * v->strides[0] * (int64_t)es;
            if (is_contiguous(v->rank - 1, v->shape + 1, v->strides + 1))
                bin[nc + j].data = (void *)row;
            else
                copy_view(blk + off[nc + j], row, v->rank - 1, v->shape + 1,
                          v->strides + 1, es, 0);
        }
        if ((rc = kiln_function_call(st->body, bin, bout, &e))) {
            fail(call, rc, "step %lld: %s", (long long)t, e.message);
            break;
        }
        for (int k = 0; k < st->n_out && !rc; k++) {
            const kiln_tensor *o = &bout[k];
            const kiln_view *ov = &out[k];
            int want_rank = k < nc ? ov->rank : ov->rank - 1;
            const int64_t *want = k < nc ? ov->shape : ov->shape + 1;
            int same = o->rank == want_rank && (int)o->dtype == ov->dtype;
            for (int d = 0; same && d < o->rank; d++)
                same = o->shape[d] == want[d];
            if (!same) {
                char x[96], y[96];
                rc = fail(call, KILN_ERR_SHAPE, "step %lld: body output %d "
                          "has shape %s, expected %s%s", (long long)t, k,
                          shape_text(o->rank, o->shape, x, sizeof x),
                          shape_text(want_rank, want, y, sizeof y),
                          k < nc ? " (a carry keeps its shape)" : "");
                break;
            }
            size_t es = kiln_dtype_size(o->dtype);
            size_t bytes = (size_t)numel(o->rank, o->shape) * es;
            if (k < nc) {
                memcpy(blk + off[n_in + k], o->data, bytes);
            } else {
                char *row = (char *)ov->data + t * ov->strides[0] *
                                                   (int64_t)es;
                copy_view(row, o->data, ov->rank - 1, ov->shape + 1,
                          ov->strides + 1, es, 1);
            }
        }
        /* the new carries become the next step's */
        for (int k = 0; k < nc && !rc; k++)
            memcpy(blk + off[k], blk + off[n_in + k],
                   off[k + 1] - off[k]);
    }
    /* the final carries (the initial ones when T = 0) */
    for (int k = 0; k < nc && !rc; k++)
        copy_view(out[k].data, blk + off[k], out[k].rank, out[k].shape,
                  out[k].strides, kiln_dtype_size((kiln_dtype)out[k].dtype),
                  1);
    free(blk);
    free(off);
    free(bin);
    free(bout);
    return rc;
}

int kiln_recur_callable(kiln_function *body, int n_carry, int n_seq,
                        int n_args, int n_out, int64_t n_steps,
                        kiln_callable **out)
{
    recur_state *st = calloc(1, sizeof *st);
    kiln_callable *c = calloc(1, sizeof *c);
    if (!st || !c) {
        free(st);
        free(c);
        return KILN_ERR_NOMEM;
    }
    st->body = body;
    st->n_carry = n_carry;
    st->n_seq = n_seq;
    st->n_args = n_args;
    st->n_out = n_out;
    st->n_steps = n_steps;
    c->struct_size = sizeof *c;
    c->fn = recur_run;
    c->state = st;
    *out = c;
    return 0;
}

static int host_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    (void)err;
    return k && k->kind == KILN_KERNEL_RECUR;
}

static void host_callable_free(kiln_callable *c)
{
    if (!c)
        return;
    recur_state *st = c->state;
    if (st)
        kiln_function_free(st->body);
    free(st);
    free(c);
}

static void host_error_free(kiln_plugin_error *e)
{
    (void)e;
}

const kiln_backend kiln_recur_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "host",
    .version = "1",
    .build_id = "host-recur-1",
    .flags = KILN_BACKEND_THREAD_SAFE,
    .supports = host_supports,
    .callable_free = host_callable_free,
    .error_free = host_error_free,
};
