/*
 * program.c — running the kinds with a scalar program (ELEMWISE,
 * REDUCE, LOOP): the views' strides in the walk, the plan of one call
 * (walk, register file, constants; made per call or once per prepared
 * shape) and its run, the dispatch among the three kinds' bodies.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* Input strides for a program kind; checks the broadcast rule. */
static int kiln_interp_input_strides(const kiln_interp_run *r,
                                     kiln_interp_iter *it)
{
    for (uint32_t i = 0; i < r->call->n_inputs; i++) {
        const kiln_view *v = &r->call->inputs[i];
        int64_t *s = kiln_interp_strides(it, i);
        for (int d = 0; d < it->rank; d++) {
            char b1[160], b2[160];
            if (v->shape[d] != it->shape[d] && v->shape[d] != 1)
                return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: input %u has "
                                        "shape %s, which does not broadcast "
                                        "to %s", r->label, i,
                                        kiln_interp_shape_str(
                                            b1, sizeof b1, v->rank, v->shape),
                                        kiln_interp_shape_str(
                                            b2, sizeof b2, it->rank,
                                            it->shape));
            s[d] = v->shape[d] == 1 ? 0 : v->strides[d];
        }
    }
    return 0;
}

/* Whether the runtime table has every function the program calls. */
/* The value a CONST or PARAM instruction gives (a PARAM's slot checked
 * by kiln_interp_check_runtime). */
static double kiln_interp_const_value(const kiln_interp_run *r,
                                      const kiln_instr *in)
{
    return in->op == KILN_I_PARAM ? r->call->consts[in->a] : in->imm;
}

/* The call's constant block, NULL when the call predates ABI 1.8. */
static const double *kiln_interp_block(const kiln_call *call)
{
    return call->struct_size >= offsetof(kiln_call, n_consts) +
                                    sizeof call->n_consts ? call->consts : NULL;
}

/* Every PARAM's slot is inside the call's constant block. */
static int kiln_interp_check_block(const kiln_interp_run *r)
{
    const kiln_interp_prog *cp = &r->s->prog;
    for (uint32_t c = 0; c < cp->n_consts; c++) {
        const kiln_instr *in = &r->k->instrs[cp->consts[c]];
        const kiln_call *call = r->call;
        if (in->op == KILN_I_PARAM &&
            (!kiln_interp_block(call) || (uint32_t)in->a >= call->n_consts))
            return kiln_interp_fail(r, KILN_ERR_ARG, "%s: the call's constant "
                                    "block has no element %d", r->label,
                                    (int)in->a);
    }
    return 0;
}

static int kiln_interp_check_runtime(const kiln_interp_run *r)
{
    const kiln_runtime *rt = r->rt;
    int rc = kiln_interp_check_block(r);
    if (rc)
        return rc;
    if (!r->s->prog.uses_runtime)
        return 0;
    if (!rt || rt->struct_size < offsetof(kiln_runtime, softplus)
                                     + sizeof(rt->softplus))
        return kiln_interp_fail(r, KILN_ERR_ARG, "%s: the call has no "
                                "runtime table", r->label);
    const kiln_interp_prog *prog = &r->s->prog;
    for (uint32_t e = 0; e < prog->n_exec; e++) {
        unsigned op = r->k->instrs[prog->exec[e]].op;
        if (!kiln_interp_ops[op].runtime)
            continue;
        int have = kiln_interp_ops[op].arity == 1
                       ? kiln_interp_rt_unary(rt, op) != NULL
                   : kiln_interp_ops[op].arity == 3
                       ? kiln_interp_rt_ternary(rt, op) != NULL
                   : kiln_interp_rt_binary(rt, op) != NULL;
        if (!have)
            return kiln_interp_fail(r, KILN_ERR_ARG, "%s: the runtime table "
                                    "has no %s", r->label,
                                    kiln_interp_ops[op].name);
    }
    return 0;
}

/* ELEMWISE and REDUCE: set up the per-call workspace (register file and
 * iterator state), fill the hoisted constants, and run. */
/* The outputs' strides in walk `it` (shape set, inputs' strides done).
 * REDUCE: a reduced axis is one the output does not step along (stride
 * 0; extent 1 or the input's); every output must reduce the axes output 0
 * does (sibling reductions), distinct[] gets the output extents and
 * *count the elements per output.  ELEMWISE: every output has output 0's
 * shape.  Shared with the llvm backend's plans. */
static int kiln_interp_output_strides(const kiln_interp_run *r,
                                      kiln_interp_iter *it, int64_t *distinct,
                                      double *count)
{
    const kiln_kernel *k = r->k;
    const kiln_call *call = r->call;
    int reduce = k->kind == KILN_KERNEL_REDUCE;
    *count = 1.0;
    for (uint32_t j = 0; j < call->n_outputs; j++) {
        const kiln_view *o = &call->outputs[j];
        int64_t *st = kiln_interp_strides(it, k->n_inputs + j);
        for (int d = 0; d < it->rank; d++) {
            char b1[160], b2[160];
            if (o->shape[d] != it->shape[d] && (!reduce || o->shape[d] != 1)) {
                if (reduce)
                    return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: output "
                                            "shape %s does not fit input "
                                            "shape %s", r->label,
                                            kiln_interp_shape_str(b1, sizeof b1,
                                                                  o->rank,
                                                                  o->shape),
                                            kiln_interp_shape_str(b2, sizeof b2,
                                                                  it->rank,
                                                                  it->shape));
                return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: output %u has "
                                        "shape %s, output 0 has %s", r->label,
                                        j, kiln_interp_shape_str(
                                            b1, sizeof b1, o->rank, o->shape),
                                        kiln_interp_shape_str(
                                            b2, sizeof b2, it->rank,
                                            it->shape));
            }
            if (!reduce) {
                st[d] = o->strides[d];
                continue;
            }
            st[d] = o->shape[d] == 1 ? 0 : o->strides[d];
            int64_t dist = st[d] == 0 ? 1 : it->shape[d];
            if (j == 0) {
                distinct[d] = dist;
                if (st[d] == 0)
                    *count *= (double)it->shape[d];
            } else if (dist != distinct[d]) {
                return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: output %u "
                                        "reduces other axes than output 0",
                                        r->label, j);
            }
        }
    }
    return 0;
}

/* The view whose shape is the iteration space: REDUCE's input 0,
 * ELEMWISE's output 0, a LOOP's first ITER or REDUCE argument (inputs
 * first; kiln_interp_check_loop made sure there is one). */
static const kiln_view *kiln_interp_space(const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;
    if (k->kind == KILN_KERNEL_REDUCE)
        return &r->call->inputs[0];
    if (k->kind == KILN_KERNEL_LOOP) {
        for (uint32_t i = 0; i < k->n_inputs; i++)
            if (k->in_roles[i] == KILN_ROLE_ITER)
                return &r->call->inputs[i];
        for (uint32_t j = 0; j < k->n_outputs; j++)
            if (k->out_roles[j] != KILN_ROLE_SCATTER)
                return &r->call->outputs[j];
    }
    return &r->call->outputs[0];
}

/* A LOOP's strides in walk `it` (shape set): ITER inputs broadcast to the
 * space; ITER outputs have its shape; REDUCE outputs too, or extent 1,
 * with stride 0 on reduce_axes (distinct[] gets their extents and
 * *count the elements folded into each); tables and SCATTER outputs are
 * not walked (stride 0: they are indexed). */
static int kiln_interp_loop_strides(const kiln_interp_run *r,
                                    kiln_interp_iter *it, int64_t *distinct,
                                    double *count)
{
    const kiln_kernel *k = r->k;
    const kiln_call *call = r->call;
    char b1[160], b2[160];
    *count = 1.0;
    for (int d = 0; d < it->rank; d++) {
        int red = (k->reduce_axes >> d) & 1u;
        distinct[d] = red ? 1 : it->shape[d];
        if (red)
            *count *= (double)it->shape[d];
    }
    for (uint32_t v = 0; v < k->n_inputs + k->n_outputs; v++) {
        int is_in = v < k->n_inputs;
        uint32_t q = is_in ? v : v - k->n_inputs;
        const kiln_view *w = is_in ? &call->inputs[q] : &call->outputs[q];
        unsigned role = is_in ? k->in_roles[q] : k->out_roles[q];
        int64_t *st = kiln_interp_strides(it, v);
        for (int d = 0; d < it->rank; d++) {
            if (role == KILN_ROLE_TABLE || role == KILN_ROLE_SCATTER) {
                st[d] = 0;
                continue;
            }
            int red = role == KILN_ROLE_REDUCE && ((k->reduce_axes >> d) & 1u);
            int ok = w->shape[d] == it->shape[d] ||
                     (w->shape[d] == 1 && (is_in || red));
            if (!ok)
                return kiln_interp_fail(r, KILN_ERR_SHAPE, "%s: %s %u has "
                                        "shape %s, the loop runs over %s",
                                        r->label, is_in ? "input" : "output",
                                        q, kiln_interp_shape_str(
                                            b1, sizeof b1, w->rank, w->shape),
                                        kiln_interp_shape_str(
                                            b2, sizeof b2, it->rank,
                                            it->shape));
            st[d] = red || w->shape[d] == 1 ? 0 : w->strides[d];
        }
    }
    return 0;
}

/* An ELEMWISE, REDUCE or LOOP program on one call's views, minus the data:
 * the coalesced walk with every view's strides, the reduced axes, and the
 * register file's layout (constants filled).  Made per call on the stack
 * (kiln_interp_program_kind) or once per shape signature (ABI 1.4
 * prepared calls, kiln_interp_prepare), then run (kiln_interp_pk_exec). */
typedef struct kiln_interp_pk {
    const kiln_interp_state *s;
    kiln_interp_iter it;      /* coalesced */
    int empty;                /* nothing to iterate */
    int64_t distinct[KILN_MAX_RANK];  /* REDUCE: output extents */
    double count;             /* REDUCE: elements per output */
    size_t one_reg;           /* bytes per register */
    unsigned char *regs;      /* the register file, constants filled */
} kiln_interp_pk;

/* Bytes of the register file and of the walk's arrays for call r. */
static void kiln_interp_pk_sizes(const kiln_interp_run *r, size_t *one_reg,
                                 size_t *reg_bytes, size_t *iter_bytes)
{
    const kiln_kernel *k = r->k;
    const kiln_view *space = kiln_interp_space(r);
    /* no block is longer than the iteration space: a small space (a
     * scalar region: one element) needs small registers, so that a
     * program with many live values still runs on the stack */
    int64_t numel = 1;
    for (int d = 0; d < space->rank && numel < KILN_INTERP_BLOCK; d++)
        numel *= space->shape[d];
    size_t fill = numel < KILN_INTERP_BLOCK ? (numel > 0 ? (size_t)numel : 1)
                                            : KILN_INTERP_BLOCK;
    *one_reg = (fill * 8 + 15) & ~(size_t)15;
    *reg_bytes = (size_t)r->s->prog.n_regs * *one_reg;
    *iter_bytes = ((size_t)k->n_inputs + k->n_outputs) * (KILN_MAX_RANK + 1) *
                  sizeof(int64_t);
}

/* Build the plan for call r in *pk: registers at regs (reg_bytes), the
 * walk's arrays at iter (iter_bytes; kiln_interp_pk_sizes). */
static int kiln_interp_pk_init(kiln_interp_pk *pk, const kiln_interp_run *r,
                               unsigned char *regs, unsigned char *iter,
                               size_t one_reg)
{
    const kiln_kernel *k = r->k;
    const kiln_interp_prog *prog = &r->s->prog;
    const kiln_view *space = kiln_interp_space(r);
    size_t n_views = (size_t)k->n_inputs + k->n_outputs;
    int rc = kiln_interp_check_runtime(r);
    if (rc)
        return rc;
    memset(pk, 0, sizeof *pk);
    pk->s = r->s;
    pk->one_reg = one_reg;
    pk->regs = regs;
    kiln_interp_iter *it = &pk->it;
    it->rank = space->rank;
    it->n_views = n_views;
    it->strides = (int64_t *)(void *)iter;
    it->offs = it->strides + n_views * KILN_MAX_RANK;
    for (int d = 0; d < space->rank; d++)
        it->shape[d] = space->shape[d];
    size_t fill = one_reg / 8;
    kiln_interp_prun p = { .r = r, .regs = regs, .reg_bytes = one_reg,
                           .n_in = k->n_inputs };
    for (uint32_t c = 0; c < prog->n_consts; c++) {
        const kiln_instr *in = &k->instrs[prog->consts[c]];
        kiln_interp_fill_const(in->dtype, kiln_interp_const_value(r, in),
                               kiln_interp_reg(&p, prog->consts[c]), fill);
    }
    if (k->kind == KILN_KERNEL_LOOP)
        rc = kiln_interp_loop_strides(r, it, pk->distinct, &pk->count);
    else if (!(rc = kiln_interp_input_strides(r, it)))
        rc = kiln_interp_output_strides(r, it, pk->distinct, &pk->count);
    if (rc)
        return rc;
    pk->empty = !kiln_interp_iter_coalesce(it);
    return 0;
}

/* LOOP: initialise the REDUCE outputs, walk `it` (coalesced; nothing
 * when empty) with `body` in blocks, divide for MEAN.  SCATTER outputs
 * are updated where they stand.  Shared with the llvm backend, whose
 * body runs compiled rows. */
static int kiln_interp_loop_walk(const kiln_interp_run *r, kiln_interp_iter *it,
                                 int empty, const int64_t *distinct,
                                 double count, kiln_interp_body body, void *ctx)
{
    const kiln_kernel *k = r->k;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        if (k->out_roles[j] != KILN_ROLE_REDUCE)
            continue;
        const kiln_view *out = &r->call->outputs[j];
        kiln_interp_fill f = { .view = out,
                               .esize = kiln_interp_dtype_size(out->dtype) };
        kiln_interp_identity(out->dtype, k->reduce_op, f.value);
        kiln_interp_over_output(out, distinct, kiln_interp_fill_body, &f);
    }
    int rc = 0;
    if (!empty)
        rc = kiln_interp_iter_run(it, KILN_INTERP_BLOCK, body, ctx);
    for (uint32_t j = 0; !rc && k->reduce_op == KILN_REDUCE_MEAN &&
                         j < k->n_outputs; j++) {
        const kiln_view *out = &r->call->outputs[j];
        if (k->out_roles[j] != KILN_ROLE_REDUCE)
            continue;
        kiln_interp_fill f = { .view = out,
                               .esize = kiln_interp_dtype_size(out->dtype),
                               .divisor = count };
        kiln_interp_over_output(out, distinct, kiln_interp_mean_body, &f);
    }
    return rc;
}

static int kiln_interp_loop_exec(kiln_interp_pk *pk, const kiln_interp_run *r,
                                 kiln_interp_prun *p)
{
    return kiln_interp_loop_walk(r, &pk->it, pk->empty, pk->distinct,
                                 pk->count, kiln_interp_loop_body, p);
}

/* Run plan pk on call r (views as when it was made; data anywhere).
 * REDUCE initialises the output, accumulates, and divides for MEAN. */
static int kiln_interp_pk_exec(kiln_interp_pk *pk, const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;
    kiln_interp_prun p = { .r = r, .regs = pk->regs, .reg_bytes = pk->one_reg,
                           .n_in = k->n_inputs };
    if (k->kind == KILN_KERNEL_LOOP)
        return kiln_interp_loop_exec(pk, r, &p);
    if (k->kind != KILN_KERNEL_REDUCE) {
        if (!pk->empty)
            kiln_interp_iter_run(&pk->it, KILN_INTERP_BLOCK,
                                 kiln_interp_elemwise_body, &p);
        return 0;
    }
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        const kiln_view *out = &r->call->outputs[j];
        kiln_interp_fill f = { .view = out,
                               .esize = kiln_interp_dtype_size(out->dtype) };
        kiln_interp_identity(out->dtype, k->reduce_op, f.value);
        kiln_interp_over_output(out, pk->distinct, kiln_interp_fill_body, &f);
    }
    if (!pk->empty)
        kiln_interp_iter_run(&pk->it, KILN_INTERP_BLOCK, kiln_interp_reduce_body,
                             &p);
    for (uint32_t j = 0; k->reduce_op == KILN_REDUCE_MEAN && j < k->n_outputs;
         j++) {
        /* An empty reduction divides 0 by 0: NaN, as NumPy's mean. */
        const kiln_view *out = &r->call->outputs[j];
        kiln_interp_fill f = { .view = out,
                               .esize = kiln_interp_dtype_size(out->dtype),
                               .divisor = pk->count };
        kiln_interp_over_output(out, pk->distinct, kiln_interp_mean_body, &f);
    }
    return 0;
}

static int kiln_interp_program_kind(const kiln_interp_run *r)
{
    union {
        max_align_t align;
        double f64[KILN_INTERP_STACK_BYTES / sizeof(double)];
        float f32[KILN_INTERP_STACK_BYTES / sizeof(float)];
        int64_t i64[KILN_INTERP_STACK_BYTES / sizeof(int64_t)];
        int32_t i32[KILN_INTERP_STACK_BYTES / sizeof(int32_t)];
        unsigned char bytes[KILN_INTERP_STACK_BYTES];
    } stack;
    size_t one_reg, reg_bytes, iter_bytes;
    kiln_interp_pk_sizes(r, &one_reg, &reg_bytes, &iter_bytes);
    unsigned char *ws = stack.bytes, *heap = NULL;
    if (reg_bytes + iter_bytes > sizeof stack) {
        ws = heap = malloc(reg_bytes + iter_bytes);
        if (!heap)
            return kiln_interp_fail(r, KILN_ERR_NOMEM, "%s: out of memory "
                                    "for %zu bytes of registers", r->label,
                                    reg_bytes + iter_bytes);
    }
    kiln_interp_pk pk;
    int rc = kiln_interp_pk_init(&pk, r, ws, ws + reg_bytes, one_reg);
    if (!rc)
        rc = kiln_interp_pk_exec(&pk, r);
    free(heap);
    return rc;
}
