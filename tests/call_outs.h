/*
 * call_outs.h — a call's outputs, copied (a kiln_function reuses its
 * buffers), and two calls' outputs compared bit for bit, for tests that
 * compare calls (include once; define MAX_OUT, the most outputs a
 * function of the test has, before including); and a graph's text
 * compiled with one backend and pass list, for those tests.
 */
#ifndef KILN_TESTS_CALL_OUTS_H
#define KILN_TESTS_CALL_OUTS_H

#include <kiln/kiln.h>

#include "compile_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse "kiln 1 / graph t / HEAD BODY / end" and compile it with
 * `backend` and `passes` (quiet, one job); NULL with the error in msg. */
static inline kiln_function *compile_graph_text(const char *head,
                                                const char *body,
                                                const char *backend,
                                                const char *passes,
                                                char *msg, size_t nmsg)
{
    size_t n = strlen(head) + strlen(body) + 64;
    char *text = malloc(n);
    if (!text)
        return NULL;
    snprintf(text, n, "kiln 1\ngraph t\n%s%send\n", head, body);
    kiln_err err = {0, ""};
    kiln_function *f = compile_kg_text(text, backend, passes, &err);
    free(text);
    if (!f && msg)
        snprintf(msg, nmsg, "%s", err.message);
    return f;
}

typedef struct outs {
    int rc;
    char msg[sizeof ((kiln_err *)0)->message];   /* the whole message */
    int n;
    kiln_tensor t[MAX_OUT];
} outs;

static size_t outs_bytes(const kiln_tensor *t)
{
    size_t b = kiln_dtype_size(t->dtype);
    for (int k = 0; k < t->rank; k++)
        b *= (size_t)t->shape[k];
    return b;
}

static void outs_free(outs *o)
{
    for (int i = 0; i < o->n; i++)
        free(o->t[i].data);
    o->n = 0;
}

/* call f (NULL: rc -1) and keep copies of its outputs, or the error */
static void call_copy(kiln_function *f, const kiln_tensor *in, outs *o)
{
    memset(o, 0, sizeof *o);
    kiln_err err = {0, ""};
    kiln_tensor out[MAX_OUT];
    o->rc = f ? kiln_function_call(f, in, out, &err) : -1;
    if (o->rc) {
        snprintf(o->msg, sizeof o->msg, "%s", f ? err.message : "no function");
        return;
    }
    o->n = kiln_function_n_outputs(f);
    for (int i = 0; i < o->n; i++) {
        o->t[i] = out[i];
        size_t b = outs_bytes(&out[i]);
        o->t[i].data = malloc(b ? b : 1);
        memcpy(o->t[i].data, out[i].data, b);
    }
}

/* a and b are the same, bit for bit (both calls succeeded, the same
 * outputs); else 0 with the first difference in why */
static inline int outs_same_bits(const outs *a, const outs *b, char *why, size_t n)
{
    if (a->rc || b->rc) {
        snprintf(why, n, "rc %d (%.120s) vs %d (%.120s)", a->rc, a->msg,
                 b->rc, b->msg);
        return 0;
    }
    if (a->n != b->n) {
        snprintf(why, n, "%d outputs vs %d", a->n, b->n);
        return 0;
    }
    for (int i = 0; i < a->n; i++) {
        const kiln_tensor *x = &a->t[i], *y = &b->t[i];
        if (x->dtype != y->dtype || x->rank != y->rank ||
            memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank)) {
            snprintf(why, n, "output %d: dtype or shape differs", i);
            return 0;
        }
        if (memcmp(x->data, y->data, outs_bytes(x))) {
            size_t es = kiln_dtype_size(x->dtype), m = outs_bytes(x) / es;
            for (size_t j = 0; j < m; j++)
                if (memcmp((char *)x->data + j * es, (char *)y->data + j * es, es)) {
                    snprintf(why, n, "output %d differs at element %zu", i, j);
                    break;
                }
            return 0;
        }
    }
    return 1;
}

#endif
