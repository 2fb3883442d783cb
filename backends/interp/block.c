/*
 * block.c — a scalar program over one block of a row: LOADs from the
 * views, TAKEs from tables (indices normalised and checked), every other
 * instruction through scalar.c.  The kinds' bodies (elemwise.c, reduce.c,
 * loop.c) run it and then store their outputs.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

typedef struct kiln_interp_prun {
    const kiln_interp_run *r;
    unsigned char *regs;
    size_t reg_bytes;   /* bytes per register: a block's worth, or less
                           when the whole iteration space is smaller */
    uint32_t n_in;
} kiln_interp_prun;

static void *kiln_interp_reg(const kiln_interp_prun *p, uint32_t i)
{
    return p->regs + (size_t)p->r->s->prog.reg[i] * p->reg_bytes;
}

static int64_t kiln_interp_read_index(const void *p, unsigned dt)
{
    if (dt == KILN_I64) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Read a block of n indices (register of dtype dt) and normalise them
 * to [0, size): negative ones count from the end.  Returns the first
 * index out of range through *bad and -1, else 0. */
static int kiln_interp_norm_index(unsigned dt, const void *reg, size_t n,
                                  int64_t size, int64_t *out, int64_t *bad)
{
    int fail = 0;
    if (dt == KILN_I64) {
        const int64_t *ix = reg;
        for (size_t j = 0; j < n; j++) {
            int64_t k = ix[j];
            fail |= k < -size || k >= size;
            out[j] = k < 0 ? k + size : k;
        }
    } else {
        const int32_t *ix = reg;
        for (size_t j = 0; j < n; j++) {
            int64_t k = ix[j];
            fail |= k < -size || k >= size;
            out[j] = k < 0 ? k + size : k;
        }
    }
    if (!fail)
        return 0;
    for (size_t j = 0; j < n; j++) {
        int64_t k = kiln_interp_read_index((const char *)reg +
                                               j * kiln_interp_dtype_size(dt),
                                           dt);
        if (k < -size || k >= size) {
            *bad = k;
            break;
        }
    }
    return -1;
}

/* d[j] = table[idx[j]] for a block (TAKE; indices normalised). */
static void kiln_interp_take_block(unsigned dt, void *d, const kiln_view *t,
                                   const int64_t *idx, size_t n)
{
    int64_t st = t->strides[0];
#define KILN_INTERP_TAKE_BLOCK(T)                                            \
    do {                                                                      \
        T *o = d;                                                             \
        const T *x = t->data;                                                 \
        for (size_t j = 0; j < n; j++)                                        \
            o[j] = x[idx[j] * st];                                            \
    } while (0)
    switch (dt) {
    case KILN_F64: KILN_INTERP_TAKE_BLOCK(double); break;
    case KILN_F32: KILN_INTERP_TAKE_BLOCK(float); break;
    case KILN_I64: KILN_INTERP_TAKE_BLOCK(int64_t); break;
    case KILN_I32: KILN_INTERP_TAKE_BLOCK(int32_t); break;
    default: KILN_INTERP_TAKE_BLOCK(uint8_t); break;
    }
#undef KILN_INTERP_TAKE_BLOCK
}

/* Run the program over elements j0 .. j0+n-1 of the current row.
 * Returns 0, or KILN_ERR_RUNTIME (a TAKE index out of range). */
static int kiln_interp_run_block(const kiln_interp_prun *p,
                                 const kiln_interp_iter *it, int64_t j0,
                                 size_t n)
{
    const kiln_interp_prog *prog = &p->r->s->prog;
    const kiln_instr *instrs = p->r->k->instrs;
    for (uint32_t e = 0; e < prog->n_exec; e++) {
        uint32_t i = prog->exec[e];
        const kiln_instr *in = &instrs[i];
        void *d = kiln_interp_reg(p, i);
        if (in->op == KILN_I_LOAD) {
            size_t v = (size_t)in->a, es = kiln_interp_dtype_size(in->dtype);
            const void *src = kiln_interp_elem(&p->r->call->inputs[v],
                                               kiln_interp_at(it, v, j0), es);
            kiln_interp_move(d, 1, src, kiln_interp_inner(it, v), (int64_t)n,
                             es);
            continue;
        }
        if (in->op == KILN_I_TAKE) {
            const kiln_view *t = &p->r->call->inputs[in->a];
            int64_t idx[KILN_INTERP_BLOCK], bad = 0;
            if (kiln_interp_norm_index(instrs[in->b].dtype,
                                       kiln_interp_reg(p, (uint32_t)in->b), n,
                                       t->shape[0], idx, &bad))
                return kiln_interp_fail(p->r, KILN_ERR_RUNTIME, "index %lld "
                                        "is out of bounds for axis 0 with "
                                        "size %lld", (long long)bad,
                                        (long long)t->shape[0]);
            kiln_interp_take_block(in->dtype, d, t, idx, n);
            continue;
        }
        unsigned arity = kiln_interp_ops[in->op].arity;
        const void *a = arity > 0 ? kiln_interp_reg(p, (uint32_t)in->a) : NULL;
        const void *b = arity > 1 ? kiln_interp_reg(p, (uint32_t)in->b) : NULL;
        const void *c = arity > 2 ? kiln_interp_reg(p, (uint32_t)in->c) : NULL;
        unsigned odt = arity > 0 ? instrs[in->a].dtype : in->dtype;
        if (in->op == KILN_I_WHERE)
            odt = instrs[in->b].dtype;
        kiln_interp_exec(p->r->rt, in, odt, d, a, b, c, n);
    }
    return 0;
}
