/*
 * loop.c — LOOP: the walk's body that runs the program over a block and
 * treats each output by its role (stored, folded into its reduction, or
 * added at its index).
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* out[idx[j]] += v[j] for a block (a LOOP's SCATTER output; indices
 * normalised). */
static void kiln_interp_scatter_block(unsigned dt, const kiln_view *o,
                                      const int64_t *idx, const void *v,
                                      size_t n)
{
    int64_t st = o->strides[0];
#define KILN_INTERP_SCATTER_ADD(T, ADD)                                      \
    do {                                                                      \
        T *x = o->data;                                                       \
        const T *w = v;                                                       \
        for (size_t j = 0; j < n; j++)                                        \
            x[idx[j] * st] = ADD(x[idx[j] * st], w[j]);                       \
    } while (0)
    switch (dt) {
    case KILN_F64: KILN_INTERP_SCATTER_ADD(double, KILN_INTERP_FADD); break;
    case KILN_F32: KILN_INTERP_SCATTER_ADD(float, KILN_INTERP_FADD); break;
    case KILN_I64: KILN_INTERP_SCATTER_ADD(int64_t, KILN_INTERP_ADD64); break;
    default: KILN_INTERP_SCATTER_ADD(int32_t, KILN_INTERP_ADD32); break;
    }
#undef KILN_INTERP_SCATTER_ADD
}

/* LOOP: the program, then each output by its role: stored, folded into
 * its reduction, or added at its index. */
static int kiln_interp_loop_body(void *ctx, const kiln_interp_iter *it,
                                 int64_t j0, int64_t n)
{
    const kiln_interp_prun *p = ctx;
    const kiln_kernel *k = p->r->k;
    int rc = kiln_interp_run_block(p, it, j0, (size_t)n);
    if (rc)
        return rc;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        size_t v = p->n_in + j;
        unsigned dt = k->outputs[j].dtype;
        size_t es = kiln_interp_dtype_size(dt);
        const kiln_view *ov = &p->r->call->outputs[j];
        const void *val = kiln_interp_reg(p, (uint32_t)k->out_refs[j]);
        switch (k->out_roles[j]) {
        case KILN_ROLE_REDUCE:
            kiln_interp_reduce_block(dt, k->reduce_op,
                                     kiln_interp_elem(ov,
                                                      kiln_interp_at(it, v, j0),
                                                      es),
                                     kiln_interp_inner(it, v), val, (size_t)n);
            break;
        case KILN_ROLE_SCATTER: {
            int64_t idx[KILN_INTERP_BLOCK], bad = 0;
            uint32_t xi = (uint32_t)k->out_index[j];
            if (kiln_interp_norm_index(k->instrs[xi].dtype,
                                       kiln_interp_reg(p, xi), (size_t)n,
                                       ov->shape[0], idx, &bad))
                return kiln_interp_fail(p->r, KILN_ERR_RUNTIME, "index %lld "
                                        "is out of bounds for axis 0 with "
                                        "size %lld", (long long)bad,
                                        (long long)ov->shape[0]);
            kiln_interp_scatter_block(dt, ov, idx, val, (size_t)n);
            break;
        }
        default:
            kiln_interp_move(kiln_interp_elem(ov, kiln_interp_at(it, v, j0),
                                              es),
                             kiln_interp_inner(it, v), val, 1, n, es);
            break;
        }
    }
    return 0;
}
