/*
 * join.c — JOIN: the shape check and the copy of each input into its
 * slice of the output.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* JOIN's shapes: every input matches the output except along the axis,
 * where they add up to it; 0 or a kiln_code with the message. */
static int kiln_interp_join_check(const kiln_interp_run *r)
{
    const kiln_call *call = r->call;
    const kiln_view *out = &call->outputs[0];
    int axis = r->k->axis;
    int64_t total = 0;
    for (uint32_t i = 0; i < call->n_inputs; i++) {
        const kiln_view *v = &call->inputs[i];
        for (int d = 0; d < out->rank; d++) {
            char b1[160], b2[160];
            if (d != axis && v->shape[d] != out->shape[d])
                return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: input %u has "
                                        "shape %s, output has %s (they may "
                                        "differ only on axis %d)", r->label,
                                        i, kiln_interp_shape_str(
                                            b1, sizeof b1, v->rank, v->shape),
                                        kiln_interp_shape_str(
                                            b2, sizeof b2, out->rank,
                                            out->shape), axis);
        }
        total += v->shape[axis];
    }
    if (total != out->shape[axis])
        return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: inputs add up to "
                                "%lld along axis %d, output has %lld",
                                r->label, (long long)total, axis,
                                (long long)out->shape[axis]);
    return 0;
}

/* JOIN: check every input against the output, then copy each into its
 * slice.  Linear in the number of inputs. */
static int kiln_interp_join(const kiln_interp_run *r)
{
    const kiln_call *call = r->call;
    const kiln_view *out = &call->outputs[0];
    int axis = r->k->axis;
    int rc = kiln_interp_join_check(r);
    if (rc)
        return rc;
    size_t es = kiln_interp_dtype_size(out->dtype);
    int64_t at = 0;
    for (uint32_t i = 0; i < call->n_inputs; i++) {
        const kiln_view *v = &call->inputs[i];
        kiln_interp_plan pl;
        kiln_interp_plan_init(&pl, v->rank, v->shape, out->strides,
                              v->strides, (unsigned)out->dtype, 0);
        kiln_interp_plan_run(&pl, kiln_interp_elem(out, at * out->strides[axis],
                                                    es), v->data);
        at += v->shape[axis];
    }
    return 0;
}
