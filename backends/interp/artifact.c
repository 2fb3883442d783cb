/*
 * artifact.c — the interpreter's artifact: a deep copy of the kernel
 * description in one allocation (compile's result, load's input).
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

struct kiln_artifact {
    kiln_kernel k; /* its arrays and label follow in the same block */
};

/* Reserve `count` items of `size` bytes at *total (8-aligned); 0 on
 * overflow. */
static int kiln_interp_reserve(size_t *total, size_t *at, size_t count,
                               size_t size)
{
    size_t start = (*total + 7u) & ~(size_t)7u;
    if (start < *total || (size && count > (SIZE_MAX - start) / size))
        return 0;
    *at = start;
    *total = start + count * size;
    return 1;
}

/* Copy a checked, full-size kernel; NULL when out of memory. */
static kiln_artifact *kiln_interp_copy(const kiln_kernel *k)
{
    int prog = kiln_interp_has_program(k->kind);
    int loop = k->kind == KILN_KERNEL_LOOP;
    size_t total = sizeof(kiln_artifact), at_in, at_out, at_ins = 0,
           at_refs = 0, at_label = 0, at_inr = 0, at_outr = 0, at_oidx = 0;
    size_t label_len = k->label ? strlen(k->label) : 0;
    int ok = kiln_interp_reserve(&total, &at_in, k->n_inputs,
                                 sizeof(kiln_arg_desc))
          && kiln_interp_reserve(&total, &at_out, k->n_outputs,
                                 sizeof(kiln_arg_desc))
          && (!prog || (kiln_interp_reserve(&total, &at_ins, k->n_instrs,
                                            sizeof(kiln_instr))
                        && kiln_interp_reserve(&total, &at_refs,
                                               k->n_outputs,
                                               sizeof(int32_t))))
          && (!loop || (kiln_interp_reserve(&total, &at_inr, k->n_inputs, 1)
                        && kiln_interp_reserve(&total, &at_outr, k->n_outputs,
                                               1)
                        && kiln_interp_reserve(&total, &at_oidx,
                                               k->n_outputs,
                                               sizeof(int32_t))))
          && (!k->label || kiln_interp_reserve(&total, &at_label,
                                               label_len + 1, 1));
    if (!ok)
        return NULL;
    unsigned char *block = malloc(total);
    if (!block)
        return NULL;
    kiln_artifact *a = (kiln_artifact *)(void *)block;
    a->k = *k;
    kiln_arg_desc *in = (kiln_arg_desc *)(void *)(block + at_in);
    kiln_arg_desc *out = (kiln_arg_desc *)(void *)(block + at_out);
    if (k->n_inputs)
        memcpy(in, k->inputs, k->n_inputs * sizeof *in);
    memcpy(out, k->outputs, k->n_outputs * sizeof *out);
    a->k.inputs = in;
    a->k.outputs = out;
    a->k.instrs = NULL;
    a->k.out_refs = NULL;
    if (prog) {
        kiln_instr *ins = (kiln_instr *)(void *)(block + at_ins);
        int32_t *refs = (int32_t *)(void *)(block + at_refs);
        memcpy(ins, k->instrs, k->n_instrs * sizeof *ins);
        memcpy(refs, k->out_refs, k->n_outputs * sizeof *refs);
        a->k.instrs = ins;
        a->k.out_refs = refs;
    } else {
        a->k.n_instrs = 0;
    }
    a->k.in_roles = a->k.out_roles = NULL;
    a->k.out_index = NULL;
    /* RECUR: n_carry, n_seq and n_steps came with *k; the body's bytes
     * are the host's (its key's share, not code): not kept */
    a->k.body_bytes = NULL;
    a->k.n_body_bytes = 0;
    if (loop) {
        uint8_t *inr = block + at_inr, *outr = block + at_outr;
        int32_t *oidx = (int32_t *)(void *)(block + at_oidx);
        if (k->n_inputs)
            memcpy(inr, k->in_roles, k->n_inputs);
        memcpy(outr, k->out_roles, k->n_outputs);
        memcpy(oidx, k->out_index, k->n_outputs * sizeof *oidx);
        a->k.in_roles = inr;
        a->k.out_roles = outr;
        a->k.out_index = oidx;
    }
    if (k->label) {
        char *label = (char *)(block + at_label);
        memcpy(label, k->label, label_len + 1);
        a->k.label = label;
    }
    return a;
}
