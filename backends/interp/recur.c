/*
 * recur.c — RECUR kernels with a program (ABI 1.10): the fused scan loop
 * on the interpreter.  The program (a scan body of rank-0 values,
 * core/lower/recur_prog.c) runs once per step t on one element: LOADs
 * read carry a's current value, element t of sequence a or arg a; the
 * stacked outputs get element t of their instructions; then every carry
 * takes its new value at once.  The carries live in two small arrays
 * (current, next) of 8-byte slots; the registers are the prepared
 * program's (prog.c) with one 8-byte slot each (a block of 1).
 *
 * kiln_interp_recur_check is the call check every backend that runs
 * these kernels shares (the llvm backend's front calls it through its
 * embedded copy of the interpreter).
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* The step count of a RECUR call with a program, and its views' rules
 * beyond kiln_interp_check_call's (ranks and dtypes, which the caller
 * checked first): T is the sequences' shape[0], else the stacked
 * outputs', else the kernel's n_steps; every sequence and every stacked
 * output has T elements; no output shares data with an input or
 * another output (the kernel's outputs alias nothing).  Returns 0 with
 * *T set, else a KILN_ERR_* code with the message in the call's errbuf. */
static int kiln_interp_recur_check(const kiln_interp_run *r, int64_t *T)
{
    const kiln_kernel *k = r->k;
    const kiln_call *call = r->call;
    uint32_t nc = k->n_carry, ns = k->n_seq;
    int64_t t = -1;
    const char *from = "n_steps";
    if (ns > 0) {
        t = call->inputs[nc].shape[0];
        from = "sequence 0";
    } else if (k->n_outputs > nc) {
        t = call->outputs[nc].shape[0];
        from = "stacked output 0";
    } else {
        t = k->n_steps;
    }
    if (t < 0)
        return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: no step count (no "
                                "sequence, stacked output or n_steps)",
                                r->label);
    for (uint32_t i = 0; i < ns; i++)
        if (call->inputs[nc + i].shape[0] != t)
            return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: sequence %u has "
                                    "%lld steps, %s has %lld", r->label, i,
                                    (long long)call->inputs[nc + i].shape[0],
                                    from, (long long)t);
    for (uint32_t j = nc; j < k->n_outputs; j++)
        if (call->outputs[j].shape[0] != t)
            return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: stacked output "
                                    "%u has %lld rows, %s has %lld",
                                    r->label, j - nc,
                                    (long long)call->outputs[j].shape[0],
                                    from, (long long)t);
    /* outputs alias nothing: distinct first elements are enough for
     * what a host hands over (rank-0 values and [T] rows) */
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        const void *d = call->outputs[j].data;
        if (!d || (j >= nc && t == 0))
            continue;
        for (uint32_t i = 0; i < k->n_inputs; i++)
            if (call->inputs[i].data == d &&
                !(i >= nc && i < nc + ns && t == 0))
                return kiln_interp_fail(r, KILN_ERR_ARG, "%s: output %u is "
                                        "input %u (a recur kernel's outputs "
                                        "alias nothing)", r->label, j, i);
        for (uint32_t q = 0; q < j; q++)
            if (call->outputs[q].data == d && !(q >= nc && t == 0))
                return kiln_interp_fail(r, KILN_ERR_ARG, "%s: outputs %u and "
                                        "%u share data", r->label, q, j);
    }
    *T = t;
    return 0;
}

/* Run the program T times (kiln_interp_recur_check first).  The
 * workspace (registers, then the current and next carries, 8 bytes a
 * value) is on the stack up to 8 KiB. */
static int kiln_interp_recur(const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;
    const kiln_call *call = r->call;
    const kiln_interp_prog *prog = &r->s->prog;
    const kiln_instr *instrs = k->instrs;
    uint32_t nc = k->n_carry, ns = k->n_seq;
    int64_t T = 0;
    int rc = kiln_interp_recur_check(r, &T);
    if (rc || (rc = kiln_interp_check_runtime(r)))
        return rc;
    size_t bytes = ((size_t)prog->n_regs + 2u * nc) * 8u;
    double stack[1024];   /* 8-byte aligned slots */
    unsigned char *m = bytes <= sizeof stack ? (unsigned char *)stack
                                             : malloc(bytes);
    if (!m)
        return kiln_interp_fail(r, KILN_ERR_NOMEM, "%s: out of memory",
                                r->label);
    kiln_interp_prun p = {.r = r, .regs = m, .reg_bytes = 8,
                          .n_in = k->n_inputs};
    unsigned char *cur = m + (size_t)prog->n_regs * 8u, *next = cur + 8u * nc;
    for (uint32_t c = 0; c < prog->n_consts; c++) {
        const kiln_instr *in = &instrs[prog->consts[c]];
        kiln_interp_fill_const(in->dtype, kiln_interp_const_value(r, in),
                               kiln_interp_reg(&p, prog->consts[c]), 1);
    }
    for (uint32_t c = 0; c < nc; c++)
        memcpy(cur + 8u * c, call->inputs[c].data,
               kiln_interp_dtype_size(k->inputs[c].dtype));
    for (int64_t t = 0; t < T; t++) {
        for (uint32_t e = 0; e < prog->n_exec; e++) {
            uint32_t i = prog->exec[e];
            const kiln_instr *in = &instrs[i];
            void *d = kiln_interp_reg(&p, i);
            if (in->op == KILN_I_LOAD) {
                uint32_t a = (uint32_t)in->a;
                size_t es = kiln_interp_dtype_size(in->dtype);
                const kiln_view *v = &call->inputs[a];
                const void *src = a < nc ? (const void *)(cur + 8u * a)
                                  : a < nc + ns
                                      ? kiln_interp_elem(v, t * v->strides[0],
                                                         es)
                                      : (const void *)v->data;
                memcpy(d, src, es);
                continue;
            }
            if (in->dtype == KILN_F64 && in->op >= KILN_I_ADD &&
                in->op <= KILN_I_NEG) {
                /* the recurrences' arithmetic, without the block
                 * dispatch (the same IEEE operations as scalar.c's) */
                double x, y = 0, z;
                memcpy(&x, kiln_interp_reg(&p, (uint32_t)in->a), sizeof x);
                if (in->op != KILN_I_NEG)
                    memcpy(&y, kiln_interp_reg(&p, (uint32_t)in->b),
                           sizeof y);
                switch (in->op) {
                case KILN_I_ADD: z = x + y; break;
                case KILN_I_SUB: z = x - y; break;
                case KILN_I_MUL: z = x * y; break;
                case KILN_I_TRUE_DIV: z = x / y; break;
                default: z = -x; break;
                }
                memcpy(d, &z, sizeof z);
                continue;
            }
            unsigned arity = kiln_interp_ops[in->op].arity;
            const void *a = arity > 0 ? kiln_interp_reg(&p, (uint32_t)in->a)
                                      : NULL;
            const void *b = arity > 1 ? kiln_interp_reg(&p, (uint32_t)in->b)
                                      : NULL;
            const void *c = arity > 2 ? kiln_interp_reg(&p, (uint32_t)in->c)
                                      : NULL;
            unsigned odt = arity > 0 ? instrs[in->a].dtype : in->dtype;
            if (in->op == KILN_I_WHERE)
                odt = instrs[in->b].dtype;
            kiln_interp_exec(r->rt, in, odt, d, a, b, c, 1);
        }
        for (uint32_t j = nc; j < k->n_outputs; j++) {
            const kiln_view *o = &call->outputs[j];
            size_t es = kiln_interp_dtype_size(k->outputs[j].dtype);
            memcpy(kiln_interp_elem(o, t * o->strides[0], es),
                   kiln_interp_reg(&p, (uint32_t)k->out_refs[j]), es);
        }
        /* all carries at once: out_refs may read each other's LOADs */
        for (uint32_t c = 0; c < nc; c++)
            memcpy(next + 8u * c,
                   kiln_interp_reg(&p, (uint32_t)k->out_refs[c]), 8u);
        unsigned char *sw = cur;
        cur = next;
        next = sw;
    }
    for (uint32_t c = 0; c < nc; c++)
        memcpy(call->outputs[c].data, cur + 8u * c,
               kiln_interp_dtype_size(k->outputs[c].dtype));
    if (m != (unsigned char *)stack)
        free(m);
    return 0;
}
