/*
 * kernel.c — what both modules ask of a kernel: each view's role, the
 * row-function modes, the reductions' shape (full, kept axis), whether a
 * LOOP checks indices, which kinds compile to code, and the check of a
 * description (the interpreter's, plus llvm's own limits).
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into both modules (the plugin llvm.so,
 * -DKL_FRONT, and the compiler module llvm_codegen.so).  Prefix: kl_ (the
 * backend's).
 */

/* LOOP kernels (ABI 1.5): the role of view v (inputs, then outputs); the
 * other kinds as LOOP would say it (REDUCE's outputs reduce, everything
 * else is walked). */
static unsigned kl_role(const kiln_kernel *k, uint32_t v)
{
    int out = v >= k->n_inputs;
    if (k->kind == KILN_KERNEL_LOOP)
        return out ? k->out_roles[v - k->n_inputs] : k->in_roles[v];
    return out && k->kind == KILN_KERNEL_REDUCE ? KILN_ROLE_REDUCE
                                                : KILN_ROLE_ITER;
}

/* A view read or written at an index, not walked (TABLE, SCATTER). */
static int kl_indexed(const kiln_kernel *k, uint32_t v)
{
    unsigned r = kl_role(k, v);
    return r == KILN_ROLE_TABLE || r == KILN_ROLE_SCATTER;
}

/* Row functions: elementwise stores, folds into scalar accumulators,
 * folds along a kept axis; KL_CHECK: a LOOP kernel's index check (an OR
 * of every TAKE's and SCATTER's range test over the row). */
enum kl_mode { KL_EW = 0, KL_RSCALAR, KL_RROW, KL_CHECK };

/* REDUCE over every axis of the iteration space (the kernel says so in
 * reduce_axes): a scalar result, no kept axis. */
static int kl_full_reduce(const kiln_kernel *k)
{
    unsigned r = k->inputs[0].rank;
    return k->kind == KILN_KERNEL_REDUCE && k->n_inputs > 0 && r > 0
           && r < 32 && k->reduce_axes == (1u << r) - 1u;
}

/* A LOOP kernel with a REDUCE output. */
static int kl_loop_reduces(const kiln_kernel *k)
{
    for (uint32_t j = 0; k->kind == KILN_KERNEL_LOOP && j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_REDUCE)
            return 1;
    return 0;
}

/* Whether the kernel has row functions that fold along a kept axis
 * (kiln_uc/us, kiln_luc/lus): a reduction that does not reduce every
 * axis of its (non-scalar) iteration space. */
static int kl_keeps_axis(const kiln_kernel *k)
{
    if (k->kind == KILN_KERNEL_REDUCE)
        return !kl_full_reduce(k);
    if (!kl_loop_reduces(k))
        return 0;
    int r = kiln_interp_loop_rank(k);
    return r > 0 && (r >= 32 || k->reduce_axes != (1u << r) - 1u);
}

/* A LOOP kernel whose indices need checking (kiln_lk): a TAKE or a
 * SCATTER output. */
static int kl_loop_checks(const kiln_kernel *k)
{
    if (k->kind != KILN_KERNEL_LOOP)
        return 0;
    for (uint32_t i = 0; i < k->n_instrs; i++)
        if (k->instrs[i].op == KILN_I_TAKE)
            return 1;
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_SCATTER)
            return 1;
    return 0;
}

/* Kinds compiled to code: the ones with a scalar program, and the data
 * movement kinds (kl_build's `move` emitters). */
static int kl_native(uint32_t kind)
{
    return kiln_interp_has_program(kind) || kind == KILN_KERNEL_GATHER ||
           kind == KILN_KERNEL_JOIN || kind == KILN_KERNEL_SCATTER ||
           kind == KILN_KERNEL_DOT;
}

static int kl_check(const kiln_kernel *src, kiln_kernel *full,
                    kiln_plugin_error **err)
{
    char why[256];
    if (kiln_interp_kernel_read(src, full, why, sizeof why)
        || kiln_interp_check(full, why, sizeof why))
        return kl_fail(err, KILN_ERR_BACKEND, "%s", why);
    /* ABI 1.10: RECUR's loop is one function, never cut into segments */
    if (full->kind == KILN_KERNEL_RECUR && full->n_instrs > KL_SEG)
        return kl_fail(err, KILN_ERR_BACKEND, "a recur program of %u "
                       "instructions (llvm compiles up to %d in one loop)",
                       full->n_instrs, KL_SEG);
    /* sibling reductions: one accumulator each in one unsegmented loop
     * (the segmented row functions fold one output) */
    if (full->kind == KILN_KERNEL_REDUCE && full->n_outputs > 1 &&
        (full->n_outputs > KL_MAX_ACC || full->n_instrs > KL_SEG))
        return kl_fail(err, KILN_ERR_BACKEND, "a reduction of %u outputs "
                       "and %u instructions (llvm folds up to %d outputs of "
                       "programs up to %d instructions)", full->n_outputs,
                       full->n_instrs, KL_MAX_ACC, KL_SEG);
    return 0;
}
