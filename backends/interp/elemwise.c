/*
 * elemwise.c — ELEMWISE: the walk's body that runs the program over a
 * block and stores every output.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

static int kiln_interp_elemwise_body(void *ctx, const kiln_interp_iter *it,
                                     int64_t j0, int64_t n)
{
    const kiln_interp_prun *p = ctx;
    const kiln_kernel *k = p->r->k;
    (void)kiln_interp_run_block(p, it, j0, (size_t)n);  /* no TAKE */
    /* Stores come after every load of the block, so an output that
     * aliases an input element for element is read before written. */
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        size_t v = p->n_in + j;
        size_t es = kiln_interp_dtype_size(k->outputs[j].dtype);
        void *dst = kiln_interp_elem(&p->r->call->outputs[j],
                                     kiln_interp_at(it, v, j0), es);
        kiln_interp_move(dst, kiln_interp_inner(it, v),
                         kiln_interp_reg(p, (uint32_t)k->out_refs[j]), 1, n,
                         es);
    }
    return 0;
}
