/*
 * check.c — reading a host's kernel description into a full-size
 * struct and checking it: arguments, the scalar program's instructions,
 * and each kind's rules (REDUCE, JOIN, SCAN, GATHER/SCATTER, DOT, LOOP).
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

/* Copy the host's kernel into a full-size struct: fields beyond the
 * host's struct_size (an older host) read as 0 / NULL. */
static int kiln_interp_kernel_read(const kiln_kernel *src, kiln_kernel *dst,
                                   char *why, size_t n)
{
    size_t need = offsetof(kiln_kernel, outputs) + sizeof(src->outputs);
    if (!src)
        return kiln_interp_why(why, n, "no kernel");
    if (src->struct_size < need)
        return kiln_interp_why(why, n, "kernel struct_size %zu is below "
                               "the %zu bytes of ABI 1", src->struct_size,
                               need);
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, src->struct_size < sizeof *dst ? src->struct_size
                                                    : sizeof *dst);
    dst->struct_size = sizeof *dst;
    return 0;
}

static int kiln_interp_check_args(const kiln_kernel *k, char *why, size_t n)
{
    if (k->n_outputs == 0 || !k->outputs)
        return kiln_interp_why(why, n, "kernel has no outputs");
    if (k->n_inputs > 0 && !k->inputs)
        return kiln_interp_why(why, n, "kernel has %u inputs but no input "
                               "descriptions", k->n_inputs);
    uint64_t n_args = (uint64_t)k->n_inputs + k->n_outputs;
    for (uint64_t i = 0; i < n_args; i++) {
        int is_in = i < k->n_inputs;
        uint32_t pos = (uint32_t)(is_in ? i : i - k->n_inputs);
        const kiln_arg_desc *d = is_in ? &k->inputs[pos] : &k->outputs[pos];
        if (d->dtype >= KILN_NDTYPES)
            return kiln_interp_why(why, n, "%s %u has unknown dtype %u",
                                   is_in ? "input" : "output", pos,
                                   d->dtype);
        if (d->rank > KILN_MAX_RANK)
            return kiln_interp_why(why, n, "%s %u has rank %u > %d",
                                   is_in ? "input" : "output", pos,
                                   d->rank, KILN_MAX_RANK);
    }
    return 0;
}

/* Operand and dtype rules of one instruction (docs/ir.md). */
static int kiln_interp_check_instr(const kiln_kernel *k, uint32_t i,
                                   char *why, size_t n)
{
    const kiln_instr *in = &k->instrs[i];
    if (in->op >= KILN_I_COUNT)
        return kiln_interp_why(why, n, "instruction %u: unknown opcode %u",
                               i, in->op);
    const kiln_interp_opinfo *info = &kiln_interp_ops[in->op];
    unsigned dt = in->dtype;
    if (dt >= KILN_NDTYPES)
        return kiln_interp_why(why, n, "instruction %u (%s): unknown dtype "
                               "%u", i, info->name, dt);
    for (unsigned q = 0; q < info->arity; q++) {
        int32_t o = kiln_interp_operand(in, q);
        if (o < 0 || (uint32_t)o >= i)
            return kiln_interp_why(why, n, "instruction %u (%s): operand %u "
                                   "is %d, not an earlier instruction", i,
                                   info->name, q, (int)o);
    }
    unsigned odt = info->arity > 0
                       ? k->instrs[kiln_interp_operand(in, 0)].dtype : dt;
    switch (info->cls) {
    case KILN_INTERP_C_TAKE:
        if (k->kind != KILN_KERNEL_LOOP)
            return kiln_interp_why(why, n, "instruction %u (take) outside a "
                                   "loop kernel", i);
        if (in->a < 0 || (uint32_t)in->a >= k->n_inputs)
            return kiln_interp_why(why, n, "instruction %u (take): input %d "
                                   "does not exist (%u inputs)", i,
                                   (int)in->a, k->n_inputs);
        if (k->in_roles[in->a] != KILN_ROLE_TABLE)
            return kiln_interp_why(why, n, "instruction %u (take): input %d "
                                   "is not a table", i, (int)in->a);
        if (!kiln_interp_is_int(odt))
            return kiln_interp_why(why, n, "instruction %u (take): the index "
                                   "is %s, not i64/i32", i,
                                   kiln_interp_dtype_name(odt));
        if (k->inputs[in->a].dtype != dt)
            return kiln_interp_why(why, n, "instruction %u (take): dtype %s "
                                   "but input %d is %s", i,
                                   kiln_interp_dtype_name(dt), (int)in->a,
                                   kiln_interp_dtype_name(
                                       k->inputs[in->a].dtype));
        return 0;
    case KILN_INTERP_C_LOAD:
        if (in->a < 0 || (uint32_t)in->a >= k->n_inputs)
            return kiln_interp_why(why, n, "instruction %u (load): input %d "
                                   "does not exist (%u inputs)", i,
                                   (int)in->a, k->n_inputs);
        if (k->kind == KILN_KERNEL_LOOP &&
            k->in_roles[in->a] != KILN_ROLE_ITER)
            return kiln_interp_why(why, n, "instruction %u (load): input %d "
                                   "is a table (take reads it)", i,
                                   (int)in->a);
        if (k->inputs[in->a].dtype != dt)
            return kiln_interp_why(why, n, "instruction %u (load): dtype %s "
                                   "but input %d is %s", i,
                                   kiln_interp_dtype_name(dt), (int)in->a,
                                   kiln_interp_dtype_name(
                                       k->inputs[in->a].dtype));
        return 0;
    case KILN_INTERP_C_CONST:
    case KILN_INTERP_C_CAST:
        return 0;
    case KILN_INTERP_C_PARAM:
        if (in->a < 0 || (dt != KILN_F64 && dt != KILN_F32))
            return kiln_interp_why(why, n, "instruction %u (param): slot %d "
                                   "of dtype %s (a slot >= 0, f64 or f32)",
                                   i, (int)in->a, kiln_interp_dtype_name(dt));
        return 0;
    case KILN_INTERP_C_WHERE:
        if (k->instrs[in->a].dtype != KILN_BOOL)
            return kiln_interp_why(why, n, "instruction %u (where): the "
                                   "condition is %s, not bool", i,
                                   kiln_interp_dtype_name(odt));
        if (k->instrs[in->b].dtype != dt || k->instrs[in->c].dtype != dt)
            return kiln_interp_why(why, n, "instruction %u (where): "
                                   "branches must both be %s", i,
                                   kiln_interp_dtype_name(dt));
        return 0;
    case KILN_INTERP_C_COMPARE:
        if (dt != KILN_BOOL)
            return kiln_interp_why(why, n, "instruction %u (%s): result must "
                                   "be bool, not %s", i, info->name,
                                   kiln_interp_dtype_name(dt));
        if (k->instrs[in->b].dtype != odt)
            return kiln_interp_why(why, n, "instruction %u (%s): operands "
                                   "of different dtypes", i, info->name);
        return 0;
    default:
        break;
    }
    /* Elementwise ops computing in their result dtype. */
    for (unsigned q = 0; q < info->arity; q++)
        if (k->instrs[kiln_interp_operand(in, q)].dtype != dt)
            return kiln_interp_why(why, n, "instruction %u (%s): operand %u "
                                   "is %s, result is %s (cast first)", i,
                                   info->name, q,
                                   kiln_interp_dtype_name(
                                       k->instrs[kiln_interp_operand(in, q)]
                                           .dtype),
                                   kiln_interp_dtype_name(dt));
    int ok = info->cls == KILN_INTERP_C_ORDER
          || (info->cls == KILN_INTERP_C_NUMERIC && dt != KILN_BOOL)
          || (info->cls == KILN_INTERP_C_FLOAT && kiln_interp_is_float(dt))
          || (info->cls == KILN_INTERP_C_LOGIC && dt == KILN_BOOL);
    if (!ok)
        return kiln_interp_why(why, n, "instruction %u: %s is not defined "
                               "for %s", i, info->name,
                               kiln_interp_dtype_name(dt));
    return 0;
}

static int kiln_interp_check_program(const kiln_kernel *k, char *why,
                                     size_t n)
{
    if (k->n_instrs == 0 || !k->instrs)
        return kiln_interp_why(why, n, "%s kernel without a program",
                               kiln_interp_kind_name(k->kind));
    if (!k->out_refs)
        return kiln_interp_why(why, n, "%s kernel without out_refs",
                               kiln_interp_kind_name(k->kind));
    for (uint32_t i = 0; i < k->n_instrs; i++)
        if (kiln_interp_check_instr(k, i, why, n))
            return -1;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        int32_t r = k->out_refs[j];
        if (r < 0 || (uint32_t)r >= k->n_instrs)
            return kiln_interp_why(why, n, "out_refs[%u] = %d is not an "
                                   "instruction", j, (int)r);
        if (k->instrs[r].dtype != k->outputs[j].dtype)
            return kiln_interp_why(why, n, "output %u is %s but instruction "
                                   "%d gives %s", j,
                                   kiln_interp_dtype_name(
                                       k->outputs[j].dtype),
                                   (int)r,
                                   kiln_interp_dtype_name(
                                       k->instrs[r].dtype));
    }
    return 0;
}

/* All inputs (and outputs) of the same rank as `rank`. */
static int kiln_interp_check_ranks(const kiln_kernel *k, unsigned rank,
                                   int outputs_too, char *why, size_t n)
{
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->inputs[i].rank != rank)
            return kiln_interp_why(why, n, "input %u has rank %u, the "
                                   "iteration space has rank %u", i,
                                   k->inputs[i].rank, rank);
    for (uint32_t j = 0; outputs_too && j < k->n_outputs; j++)
        if (k->outputs[j].rank != rank)
            return kiln_interp_why(why, n, "output %u has rank %u, expected "
                                   "%u", j, k->outputs[j].rank, rank);
    return 0;
}

/* The dtype rules of reduce_op for an output of dtype dt. */
static int kiln_interp_check_reduce_dtype(uint32_t op, unsigned dt,
                                          char *why, size_t n)
{
    switch (op) {
    case KILN_REDUCE_SUM:
    case KILN_REDUCE_PROD:
        if (dt == KILN_BOOL)
            return kiln_interp_why(why, n, "sum/prod of bool (cast to an "
                                   "integer first)");
        return 0;
    case KILN_REDUCE_MEAN:
        if (!kiln_interp_is_float(dt))
            return kiln_interp_why(why, n, "mean of %s (cast to a float "
                                   "first)", kiln_interp_dtype_name(dt));
        return 0;
    case KILN_REDUCE_MAX:
    case KILN_REDUCE_MIN:
        return 0;
    default:
        return kiln_interp_why(why, n, "unknown reduce_op %u", op);
    }
}

static int kiln_interp_check_reduce(const kiln_kernel *k, char *why,
                                    size_t n)
{
    if (k->n_outputs < 1 || k->n_inputs < 1)
        return kiln_interp_why(why, n, "reduce needs >= 1 input and >= 1 "
                               "output, got %u and %u", k->n_inputs,
                               k->n_outputs);
    if (kiln_interp_check_ranks(k, k->inputs[0].rank, 1, why, n))
        return -1;
    /* several outputs (ABI 1.4): sibling reductions, one op */
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (kiln_interp_check_reduce_dtype(k->reduce_op,
                                           k->outputs[j].dtype, why, n))
            return -1;
    return kiln_interp_check_program(k, why, n);
}

static int kiln_interp_check_join(const kiln_kernel *k, char *why, size_t n)
{
    const kiln_arg_desc *out = &k->outputs[0];
    if (k->n_outputs != 1 || k->n_inputs < 1)
        return kiln_interp_why(why, n, "join needs >= 1 input and 1 output");
    if (out->rank < 1 || k->axis < 0 || (unsigned)k->axis >= out->rank)
        return kiln_interp_why(why, n, "join axis %d out of range for rank "
                               "%u", (int)k->axis, out->rank);
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->inputs[i].dtype != out->dtype)
            return kiln_interp_why(why, n, "join input %u is %s, output is "
                                   "%s", i,
                                   kiln_interp_dtype_name(k->inputs[i].dtype),
                                   kiln_interp_dtype_name(out->dtype));
    return kiln_interp_check_ranks(k, out->rank, 1, why, n);
}

/* SCAN (ABI 1.7, issue 25): one input, one output of one dtype and
 * rank >= 1, a SUM or PROD along an axis in range. */
static int kiln_interp_check_scan(const kiln_kernel *k, char *why, size_t n)
{
    if (k->n_inputs != 1 || k->n_outputs != 1)
        return kiln_interp_why(why, n, "scan needs 1 input and 1 output");
    const kiln_arg_desc *out = &k->outputs[0];
    if (out->rank < 1 || k->axis < 0 || (unsigned)k->axis >= out->rank)
        return kiln_interp_why(why, n, "scan axis %d out of range for rank "
                               "%u", (int)k->axis, out->rank);
    if (k->inputs[0].dtype != out->dtype || out->dtype == KILN_BOOL)
        return kiln_interp_why(why, n, "scan of %s into %s",
                               kiln_interp_dtype_name(k->inputs[0].dtype),
                               kiln_interp_dtype_name(out->dtype));
    if (k->reduce_op != KILN_REDUCE_SUM && k->reduce_op != KILN_REDUCE_PROD)
        return kiln_interp_why(why, n, "scan reduce_op %u (SUM or PROD "
                               "only)", k->reduce_op);
    return kiln_interp_check_ranks(k, out->rank, 1, why, n);
}

/* issue 28, ABI 1.9 */
/* LINALG: one or two f64 inputs, one f64 output, a known operation. */
static int kiln_interp_check_linalg(const kiln_kernel *k, char *why,
                                    size_t n)
{
    if (k->n_inputs < 1 || k->n_inputs > 2 || k->n_outputs != 1)
        return kiln_interp_why(why, n, "linalg needs 1 or 2 inputs and 1 "
                               "output");
    if (k->reduce_op > KILN_LINALG_LAST)
        return kiln_interp_why(why, n, "unknown linalg op %u", k->reduce_op);
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->inputs[i].dtype != KILN_F64)
            return kiln_interp_why(why, n, "linalg input %u is %s (f64 "
                                   "only)", i,
                                   kiln_interp_dtype_name(k->inputs[i].dtype));
    if (k->outputs[0].dtype != KILN_F64)
        return kiln_interp_why(why, n, "linalg output is %s (f64 only)",
                               kiln_interp_dtype_name(k->outputs[0].dtype));
    return 0;
}

/* GATHER (x, idx) -> out and SCATTER (idx, values) into out: the index
 * tensor, the data rank and the rank of the indexed side. */
static int kiln_interp_check_indexing(const kiln_kernel *k, char *why,
                                      size_t n)
{
    int gather = k->kind == KILN_KERNEL_GATHER;
    const char *what = gather ? "gather" : "scatter";
    if (k->n_inputs != 2 || k->n_outputs != 1)
        return kiln_interp_why(why, n, "%s needs 2 inputs and 1 output, got "
                               "%u and %u", what, k->n_inputs, k->n_outputs);
    const kiln_arg_desc *data = gather ? &k->inputs[0] : &k->outputs[0];
    const kiln_arg_desc *idx = gather ? &k->inputs[1] : &k->inputs[0];
    const kiln_arg_desc *side = gather ? &k->outputs[0] : &k->inputs[1];
    if (!kiln_interp_is_int(idx->dtype))
        return kiln_interp_why(why, n, "%s indices are %s, not i64/i32",
                               what, kiln_interp_dtype_name(idx->dtype));
    if (side->dtype != data->dtype)
        return kiln_interp_why(why, n, "%s: %s and %s data", what,
                               kiln_interp_dtype_name(side->dtype),
                               kiln_interp_dtype_name(data->dtype));
    if (data->rank < 1 || k->axis < 0 || (unsigned)k->axis >= data->rank)
        return kiln_interp_why(why, n, "%s axis %d out of range for rank %u",
                               what, (int)k->axis, data->rank);
    if ((unsigned)side->rank != (unsigned)data->rank - 1u + idx->rank)
        return kiln_interp_why(why, n, "%s: rank %u, expected %u - 1 + %u",
                               what, side->rank, data->rank, idx->rank);
    if (!gather && k->scatter_mode != KILN_SCATTER_SET
        && k->scatter_mode != KILN_SCATTER_INC)
        return kiln_interp_why(why, n, "unknown scatter_mode %u",
                               k->scatter_mode);
    return 0;
}

static int kiln_interp_check_dot(const kiln_kernel *k, char *why, size_t n)
{
    if (k->n_inputs != 2 || k->n_outputs != 1)
        return kiln_interp_why(why, n, "dot needs 2 inputs and 1 output");
    const kiln_arg_desc *a = &k->inputs[0], *b = &k->inputs[1];
    const kiln_arg_desc *c = &k->outputs[0];
    if (!kiln_interp_is_float(a->dtype) || b->dtype != a->dtype
        || c->dtype != a->dtype)
        return kiln_interp_why(why, n, "dot of %s and %s into %s (f32 or "
                               "f64 only, all alike)",
                               kiln_interp_dtype_name(a->dtype),
                               kiln_interp_dtype_name(b->dtype),
                               kiln_interp_dtype_name(c->dtype));
    /* ABI 1.11: a batched product is three views of one rank >= 3 */
    int batched = c->rank >= 3 && a->rank == c->rank && b->rank == c->rank
                  && c->rank <= KILN_MAX_RANK;
    if (!batched && (a->rank < 1 || a->rank > 2 || b->rank < 1 || b->rank > 2
                     || c->rank != a->rank + b->rank - 2))
        return kiln_interp_why(why, n, "dot of ranks %u and %u into rank "
                               "%u", a->rank, b->rank, c->rank);
    return 0;
}

/* The rank of a LOOP kernel's iteration space: the rank of its first
 * ITER or REDUCE argument, inputs first; -1 when it has none. */
static int kiln_interp_loop_rank(const kiln_kernel *k)
{
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->in_roles[i] == KILN_ROLE_ITER)
            return k->inputs[i].rank;
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_ITER ||
            k->out_roles[j] == KILN_ROLE_REDUCE)
            return k->outputs[j].rank;
    return -1;
}

/* LOOP (ABI 1.5): roles, ranks, reductions and scatter indices. */
static int kiln_interp_check_loop(const kiln_kernel *k, char *why, size_t n)
{
    if ((k->n_inputs && !k->in_roles) || !k->out_roles || !k->out_index)
        return kiln_interp_why(why, n, "loop kernel without roles or "
                               "out_index");
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->in_roles[i] != KILN_ROLE_ITER &&
            k->in_roles[i] != KILN_ROLE_TABLE)
            return kiln_interp_why(why, n, "input %u has role %u (iter or "
                                   "table only)", i, k->in_roles[i]);
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] != KILN_ROLE_ITER &&
            k->out_roles[j] != KILN_ROLE_REDUCE &&
            k->out_roles[j] != KILN_ROLE_SCATTER)
            return kiln_interp_why(why, n, "output %u has role %u (iter, "
                                   "reduce or scatter only)", j,
                                   k->out_roles[j]);
    int rank = kiln_interp_loop_rank(k);
    if (rank < 0)
        return kiln_interp_why(why, n, "loop kernel without an iteration "
                               "input or output");
    if (rank < 32 && (k->reduce_axes >> rank) != 0)
        return kiln_interp_why(why, n, "reduce_axes 0x%x beyond rank %d",
                               k->reduce_axes, rank);
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        unsigned want = k->in_roles[i] == KILN_ROLE_TABLE ? 1u
                                                          : (unsigned)rank;
        if (k->inputs[i].rank != want)
            return kiln_interp_why(why, n, "input %u has rank %u, expected "
                                   "%u", i, k->inputs[i].rank, want);
    }
    if (kiln_interp_check_program(k, why, n))
        return -1;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        unsigned role = k->out_roles[j], dt = k->outputs[j].dtype;
        unsigned want = role == KILN_ROLE_SCATTER ? 1u : (unsigned)rank;
        int32_t x = k->out_index[j];
        if (k->outputs[j].rank != want)
            return kiln_interp_why(why, n, "output %u has rank %u, expected "
                                   "%u", j, k->outputs[j].rank, want);
        if (role == KILN_ROLE_REDUCE &&
            kiln_interp_check_reduce_dtype(k->reduce_op, dt, why, n))
            return -1;
        if (role != KILN_ROLE_SCATTER) {
            if (x != -1)
                return kiln_interp_why(why, n, "out_index[%u] = %d for an "
                                       "output that does not scatter", j,
                                       (int)x);
            continue;
        }
        if (dt == KILN_BOOL)
            return kiln_interp_why(why, n, "output %u: a scatter-add of "
                                   "bool", j);
        if (x < 0 || (uint32_t)x >= k->n_instrs ||
            !kiln_interp_is_int(k->instrs[x].dtype))
            return kiln_interp_why(why, n, "out_index[%u] = %d is not an "
                                   "i64/i32 instruction", j, (int)x);
    }
    return 0;
}

/* RECUR with a program (ABI 1.10, include/kiln/backend.h): rank-0
 * carries and args, rank-1 sequences; the final carries (rank 0, the
 * carries' dtypes) then rank-1 stacked outputs; a program without TAKE
 * or PARAM whose LOADs read inputs.  A RECUR kernel without a program
 * is the host's (core/runtime/recur.c): refused. */
static int kiln_interp_check_recur(const kiln_kernel *k, char *why, size_t n)
{
    uint32_t nc = k->n_carry, ns = k->n_seq;
    if (k->n_instrs == 0)
        return kiln_interp_why(why, n, "recur kernel without a program (the "
                               "host runs its body)");
    if ((uint64_t)nc + ns > k->n_inputs || nc > k->n_outputs)
        return kiln_interp_why(why, n, "recur kernel with %u carries and %u "
                               "sequences but %u inputs and %u outputs", nc,
                               ns, k->n_inputs, k->n_outputs);
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        unsigned want = i >= nc && i < nc + ns ? 1u : 0u;
        if (k->inputs[i].rank != want)
            return kiln_interp_why(why, n, "recur input %u (%s) has rank %u, "
                                   "expected %u", i,
                                   i < nc ? "a carry"
                                   : i < nc + ns ? "a sequence" : "an arg",
                                   k->inputs[i].rank, want);
    }
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        unsigned want = j < nc ? 0u : 1u;
        if (k->outputs[j].rank != want)
            return kiln_interp_why(why, n, "recur output %u has rank %u, "
                                   "expected %u", j, k->outputs[j].rank,
                                   want);
        if (j < nc && k->outputs[j].dtype != k->inputs[j].dtype)
            return kiln_interp_why(why, n, "recur carry %u is %s in and %s "
                                   "out", j,
                                   kiln_interp_dtype_name(
                                       k->inputs[j].dtype),
                                   kiln_interp_dtype_name(
                                       k->outputs[j].dtype));
    }
    if (ns == 0 && k->n_outputs == nc && k->n_steps < 0)
        return kiln_interp_why(why, n, "recur kernel without sequences, "
                               "stacked outputs or n_steps");
    for (uint32_t i = 0; i < k->n_instrs; i++)
        if (k->instrs && k->instrs[i].op == KILN_I_PARAM)
            return kiln_interp_why(why, n, "instruction %u (param) in a "
                                   "recur kernel", i);
    return kiln_interp_check_program(k, why, n);
}

/* 0 when the interpreter can run `k` (a full-size copy); otherwise -1
 * with the reason in `why`. */
static int kiln_interp_check(const kiln_kernel *k, char *why, size_t n)
{
    if (kiln_interp_check_args(k, why, n))
        return -1;
    switch (k->kind) {
    case KILN_KERNEL_ELEMWISE:
        if (kiln_interp_check_ranks(k, k->outputs[0].rank, 1, why, n))
            return -1;
        return kiln_interp_check_program(k, why, n);
    case KILN_KERNEL_REDUCE:
        return kiln_interp_check_reduce(k, why, n);
    case KILN_KERNEL_JOIN:
        return kiln_interp_check_join(k, why, n);
    case KILN_KERNEL_GATHER:
    case KILN_KERNEL_SCATTER:
        return kiln_interp_check_indexing(k, why, n);
    case KILN_KERNEL_DOT:
        return kiln_interp_check_dot(k, why, n);
    case KILN_KERNEL_LOOP:
        return kiln_interp_check_loop(k, why, n);
    case KILN_KERNEL_SCAN:
        return kiln_interp_check_scan(k, why, n);
    case KILN_KERNEL_LINALG:
        return kiln_interp_check_linalg(k, why, n);
    case KILN_KERNEL_RECUR:
        return kiln_interp_check_recur(k, why, n);
    default:
        return kiln_interp_why(why, n, "unknown kernel kind %u", k->kind);
    }
}

static int kiln_interp_has_program(uint32_t kind)
{
    return kind == KILN_KERNEL_ELEMWISE || kind == KILN_KERNEL_REDUCE ||
           kind == KILN_KERNEL_LOOP || kind == KILN_KERNEL_RECUR;
}
