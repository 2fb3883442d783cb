/*
 * topk.c — the host's top_k kernel (issue 29): the k largest elements of
 * every row along an axis, sorted, with their indices.  Contract: topk.h.
 * Runs once per generated token over a vocabulary (49,152 logits at
 * SmolLM2's shapes), so it is plain C in the host, not a kernel every
 * backend generates.
 */
#include "config.h"

#include "topk.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct topk_state {
    int axis;
    char label[128];
} topk_state;

static int fail(const kiln_call *call, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(const kiln_call *call, int code, const char *fmt, ...)
{
    if (call->errbuf && call->errbuf_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(call->errbuf, call->errbuf_size, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* One row: n elements at base, stride s (elements), of dtype dt. */
typedef struct row {
    const char *base;
    int64_t s;
    int f32;
} row;

static double at(const row *r, int64_t i)
{
    return r->f32 ? (double)((const float *)(const void *)r->base)[i * r->s]
                  : ((const double *)(const void *)r->base)[i * r->s];
}

/* 1 when element i ranks before element j: NaN first, then larger
 * values, then (equal, or both NaN) the lower index. */
static int before(const row *r, int64_t i, int64_t j)
{
    double a = at(r, i), b = at(r, j);
    int na = isnan(a), nb = isnan(b);
    if (na != nb)
        return na;
    if (na || a == b)
        return i < j;
    return a > b;
}

/* Restore the heap below position p: h[0] is the element ranking last
 * among the kept (each parent ranks after its children). */
static void sift_down(const row *r, int64_t *h, int64_t m, int64_t p)
{
    for (;;) {
        int64_t c = 2 * p + 1, w = p;
        if (c < m && before(r, h[w], h[c]))
            w = c;
        if (c + 1 < m && before(r, h[w], h[c + 1]))
            w = c + 1;
        if (w == p)
            return;
        int64_t t = h[p];
        h[p] = h[w];
        h[w] = t;
        p = w;
    }
}

/* The k first of n in rank order into h[0..k) (h has room for k). */
static void select_row(const row *r, int64_t n, int64_t k, int64_t *h)
{
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (m < k) {
            /* sift up: i ranks after everything kept? it goes to the top */
            int64_t c = m++;
            h[c] = i;
            while (c > 0) {
                int64_t p = (c - 1) / 2;
                if (!before(r, h[p], h[c]))
                    break;
                int64_t t = h[p];
                h[p] = h[c];
                h[c] = t;
                c = p;
            }
        } else if (k > 0 && before(r, i, h[0])) {
            h[0] = i;
            sift_down(r, h, m, 0);
        }
    }
    /* pop the last-ranked to the end: h sorted in rank order */
    for (int64_t e = m - 1; e > 0; e--) {
        int64_t t = h[0];
        h[0] = h[e];
        h[e] = t;
        sift_down(r, h, e, 0);
    }
}

static int topk_run(void *state, const kiln_call *call)
{
    const topk_state *st = state;
    if (call->n_inputs != 1 || call->n_outputs != 2)
        return fail(call, KILN_ERR_ARG, "%s: %u inputs and %u outputs, "
                    "expected 1 and 2", st->label, call->n_inputs,
                    call->n_outputs);
    const kiln_view *x = &call->inputs[0], *val = &call->outputs[0],
                    *idx = &call->outputs[1];
    int ax = st->axis, rk = x->rank;
    if ((x->dtype != KILN_F32 && x->dtype != KILN_F64) ||
        val->dtype != x->dtype || idx->dtype != KILN_I64 || ax < 0 ||
        ax >= rk || val->rank != rk || idx->rank != rk)
        return fail(call, KILN_ERR_ARG, "%s: views of the wrong dtype or "
                    "rank", st->label);
    int64_t n = x->shape[ax], k = val->shape[ax];
    if (k > n)
        return fail(call, KILN_ERR_SHAPE, "%s: k=%lld exceeds the length "
                    "%lld of axis %d", st->label, (long long)k,
                    (long long)n, ax);
    int64_t rows = 1;
    for (int d = 0; d < rk; d++)
        if (d != ax)
            rows *= x->shape[d];
    if (rows == 0 || k == 0)
        return 0;
    int64_t small[256], *h = small;
    if (k > 256 && !(h = malloc(sizeof *h * (size_t)k)))
        return fail(call, KILN_ERR_NOMEM, "%s: out of memory", st->label);
    size_t esz = x->dtype == KILN_F32 ? 4 : 8;
    int64_t ix[KILN_MAX_RANK] = {0};
    for (int64_t q = 0; q < rows; q++) {
        int64_t ox = 0, ov = 0, oi = 0;
        for (int d = 0; d < rk; d++) {
            ox += ix[d] * x->strides[d];
            ov += ix[d] * val->strides[d];
            oi += ix[d] * idx->strides[d];
        }
        row r = {(const char *)x->data + ox * (int64_t)esz,
                 x->strides[ax], x->dtype == KILN_F32};
        select_row(&r, n, k, h);
        for (int64_t j = 0; j < k; j++) {
            int64_t src = h[j];
            if (r.f32)
                ((float *)val->data)[ov + j * val->strides[ax]] =
                    ((const float *)(const void *)r.base)[src * r.s];
            else
                ((double *)val->data)[ov + j * val->strides[ax]] =
                    ((const double *)(const void *)r.base)[src * r.s];
            ((int64_t *)idx->data)[oi + j * idx->strides[ax]] = src;
        }
        /* the next row: the other axes in C order */
        for (int d = rk - 1; d >= 0; d--) {
            if (d == ax)
                continue;
            if (++ix[d] < x->shape[d])
                break;
            ix[d] = 0;
        }
    }
    if (h != small)
        free(h);
    return 0;
}

int kiln_topk_callable(int axis, const char *label, kiln_callable **out)
{
    topk_state *st = calloc(1, sizeof *st);
    kiln_callable *c = calloc(1, sizeof *c);
    if (!st || !c) {
        free(st);
        free(c);
        return KILN_ERR_NOMEM;
    }
    st->axis = axis;
    snprintf(st->label, sizeof st->label, "%s", label ? label : "top_k");
    c->struct_size = sizeof *c;
    c->fn = topk_run;
    c->state = st;
    *out = c;
    return 0;
}

static int topk_supports(const kiln_kernel *k, kiln_plugin_error **err)
{
    (void)err;
    return k && k->kind == KILN_KERNEL_TOPK;
}

static void topk_callable_free(kiln_callable *c)
{
    if (!c)
        return;
    free(c->state);
    free(c);
}

static void topk_error_free(kiln_plugin_error *e)
{
    (void)e;
}

const kiln_backend kiln_topk_backend = {
    .struct_size = sizeof(kiln_backend),
    .abi_major = KILN_ABI_MAJOR,
    .abi_minor = KILN_ABI_MINOR,
    .name = "host_topk",
    .version = "1",
    .build_id = "host-topk-1",
    .flags = KILN_BACKEND_THREAD_SAFE,
    .supports = topk_supports,
    .callable_free = topk_callable_free,
    .error_free = topk_error_free,
};
