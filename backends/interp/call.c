/*
 * call.c — a loaded callable and one call on it: the state, the run
 * record every runner takes, failures with the kernel's label, and the
 * checks of the call's views against the kernel.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

typedef struct kiln_interp_state {
    kiln_callable callable; /* handed out; callable.state points here */
    kiln_artifact *art;     /* own copy of the kernel */
    kiln_interp_prog prog;  /* ELEMWISE, REDUCE */
} kiln_interp_state;

/* What one call needs, passed to the per-kind runners. */
typedef struct kiln_interp_run {
    const kiln_interp_state *s;
    const kiln_kernel *k;
    const kiln_call *call;
    const kiln_runtime *rt; /* NULL when the host gave none */
    const char *label;
} kiln_interp_run;

/* Write a message into the caller's errbuf (when it has one); returns
 * `code` so that runners can `return kiln_interp_fail(...)`. */
static int kiln_interp_fail(const kiln_interp_run *r, int code,
                            const char *fmt, ...)
{
    const kiln_call *call = r->call;
    size_t need = offsetof(kiln_call, errbuf_size) + sizeof(size_t);
    if (call->struct_size >= need && call->errbuf && call->errbuf_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(call->errbuf, call->errbuf_size, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Whether a shape has no elements (no product: it could overflow). */
static int kiln_interp_is_empty(int rank, const int64_t *shape)
{
    for (int d = 0; d < rank; d++)
        if (shape[d] == 0)
            return 1;
    return 0;
}

static int kiln_interp_check_view(const kiln_interp_run *r, const char *role,
                                  uint32_t i, const kiln_view *v,
                                  const kiln_arg_desc *d)
{
    if (v->rank != (int32_t)d->rank)
        return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: %s %u has rank %d, "
                                "the kernel expects %u", r->label, role, i,
                                (int)v->rank, d->rank);
    if (v->dtype != (int32_t)d->dtype)
        return kiln_interp_fail(r, KILN_ERR_TYPE, "%s: %s %u is %s, the "
                                "kernel expects %s", r->label, role, i,
                                kiln_interp_dtype_name((unsigned)v->dtype),
                                kiln_interp_dtype_name(d->dtype));
    for (int dd = 0; dd < v->rank; dd++)
        if (v->shape[dd] < 0)
            return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: %s %u has "
                                    "negative dim %lld", r->label, role, i,
                                    (long long)v->shape[dd]);
    if (!v->data && !kiln_interp_is_empty(v->rank, v->shape))
        return kiln_interp_fail(r, KILN_ERR_ARG, "%s: %s %u has no data",
                                r->label, role, i);
    return 0;
}

static int kiln_interp_check_call(const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;
    const kiln_call *call = r->call;
    if (call->n_inputs != k->n_inputs || call->n_outputs != k->n_outputs)
        return kiln_interp_fail(r, KILN_ERR_ARG, "%s: called with %u inputs "
                                "and %u outputs, the kernel has %u and %u",
                                r->label, call->n_inputs, call->n_outputs,
                                k->n_inputs, k->n_outputs);
    if ((k->n_inputs && !call->inputs) || !call->outputs)
        return kiln_interp_fail(r, KILN_ERR_ARG, "%s: no views", r->label);
    int rc = 0;
    for (uint32_t i = 0; !rc && i < k->n_inputs; i++)
        rc = kiln_interp_check_view(r, "input", i, &call->inputs[i],
                                    &k->inputs[i]);
    for (uint32_t j = 0; !rc && j < k->n_outputs; j++)
        rc = kiln_interp_check_view(r, "output", j, &call->outputs[j],
                                    &k->outputs[j]);
    return rc;
}

/* Address of element `off` (in elements, may be negative) of a view. */
static void *kiln_interp_elem(const kiln_view *v, int64_t off, size_t esize)
{
    return (char *)v->data + (ptrdiff_t)(off * (int64_t)esize);
}
