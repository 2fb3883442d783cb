/*
 * lift.c — literal lifting (prefix kiln_lower_): the literal numbers of a
 * kernel's scalar program become its *constant block*, values the call
 * passes (kiln_call.consts) and the code reads through KILN_I_PARAM,
 * instead of immediates baked into the code and hashed into its key.
 *
 * Why: two related models (the same likelihood with another prior scale,
 * the pooled model's inline weights, a model whose data-derived literals
 * moved) make kernels of one structure that differ only in numbers.  With
 * the numbers in the key each pays its whole compile (seconds on llvm);
 * lifted, they share one key and one artifact (docs/cache.md, "Literal
 * lifting").
 *
 * Which literals stay inline (KILN_I_CONST), and why:
 *  - integers and bools: indices, sizes, masks, `where` selectors and
 *    modular arithmetic — they select code paths or address memory, and
 *    their values are part of what the code does;
 *  - 0, +-0.5, +-1, +-2 and non-finite values: identities and exact
 *    scalings that compilers fold (x*1, x+0, x*2 = x+x, x/2 = x*0.5,
 *    0*x for integers) and the identities the lowering makes for
 *    reductions and masks (inf, -inf); they are the same in every model,
 *    so lifting them buys no sharing and could cost a folded operation;
 *  - the exponent of pow: it names the function computed (x^2 or x^3),
 *    not a parameter of it.
 * Every other finite f64/f32 literal of an ELEMWISE, REDUCE or LOOP
 * kernel is lifted: one slot per instruction, in instruction order, so
 * the slot numbers (which the key hashes) depend only on the program's
 * shape.  The values reach the code as a C cast of the double, exactly
 * what a CONST's imm gives, so results do not change by one bit.
 */
#include "lower.h"

#include <math.h>
#include <stdlib.h>

static int keep_inline(const kiln_instr *in)
{
    if (in->op != KILN_I_CONST ||
        (in->dtype != KILN_F64 && in->dtype != KILN_F32))
        return 1;
    double v = in->dtype == KILN_F32 ? (double)(float)in->imm : in->imm;
    if (!isfinite(v))
        return 1;
    double a = fabs(v);
    return a == 0 || a == 0.5 || a == 1 || a == 2;
}

/* Lift the literals of step s; 0, or -1 when out of memory (then s is
 * unchanged). */
static int lift_step(kiln_step *s)
{
    uint32_t k = s->kernel.kind;
    if ((k != KILN_KERNEL_ELEMWISE && k != KILN_KERNEL_REDUCE &&
         k != KILN_KERNEL_LOOP) || !s->instrs)
        return 0;
    uint32_t n = s->kernel.n_instrs;
    uint8_t *keep = calloc(n ? n : 1, 1);
    if (!keep)
        return -1;
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
        const kiln_instr *in = &s->instrs[i];
        if (in->op == KILN_I_POW && in->b >= 0 && (uint32_t)in->b < i)
            keep[in->b] = 1;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!keep[i] && !keep_inline(&s->instrs[i]))
            count++;
    if (count == 0) {
        free(keep);
        return 0;
    }
    double *block = malloc(sizeof *block * count);
    if (!block) {
        free(keep);
        return -1;
    }
    uint32_t slot = 0;
    for (uint32_t i = 0; i < n; i++) {
        kiln_instr *in = &s->instrs[i];
        if (keep[i] || keep_inline(in))
            continue;
        double v = in->dtype == KILN_F32 ? (double)(float)in->imm : in->imm;
        block[slot] = v;
        in->op = KILN_I_PARAM;
        in->a = (int32_t)slot++;
        in->imm = v;   /* for messages and text: never read by code */
    }
    free(keep);
    free(s->consts);
    s->consts = block;
    s->n_consts = count;
    return 0;
}

int kiln_lower_lift(kiln_program *p)
{
    for (int i = 0; i < p->n_steps; i++)
        if (lift_step(&p->steps[i]))
            return -1;
    return 0;
}
