/*
 * linalg.c — LINALG (ABI 1.9, issue 28): dense linear algebra through
 * the runtime table's lapack_run (version 5), which does the work
 * (core/runtime/linalg.c: LAPACK, batches, strides, errors).
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin,
 * libkiln's built-in interpreter, test_interp, and the llvm backend's
 * embedded copy).  Prefix: kiln_interp_.
 */

static int kiln_interp_linalg(const kiln_interp_run *r)
{
    const kiln_runtime *rt = r->rt;
    if (!rt || rt->struct_size < offsetof(kiln_runtime, lapack_run) +
                                     sizeof rt->lapack_run ||
        !rt->lapack_run)
        return kiln_interp_fail(r, KILN_ERR_RUNTIME, "%s: the runtime table "
                                "has no lapack_run (version < 5)", r->label);
    const kiln_call *c = r->call;
    return rt->lapack_run(rt, r->k->reduce_op, c->n_inputs, c->inputs,
                          c->n_outputs, c->outputs, c->errbuf,
                          c->errbuf_size);
}
