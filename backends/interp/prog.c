/*
 * prog.c — a scalar program prepared at load: dead instructions
 * dropped, CONST hoisted, registers reused once their last reader ran.
 *
 * Part of the interpreter backend: #included by interp.c, in the order
 * its list gives, and so compiled wherever interp.c is (the plugin, libkiln's
 * built-in interpreter, test_interp, and the llvm backend's embedded copy).
 * Prefix: kiln_interp_ (the whole interpreter is one translation unit, so its
 * helpers stay static and share the backend's prefix).
 */

typedef struct kiln_interp_prog {
    uint32_t n_exec;   /* instructions run per block, in order */
    uint32_t *exec;
    uint32_t n_consts; /* CONST instructions filled once per call */
    uint32_t *consts;
    uint32_t *reg;     /* register of each instruction (dead: unused) */
    uint32_t n_regs;
    int uses_runtime;  /* calls kiln_runtime functions */
} kiln_interp_prog;

static void kiln_interp_prog_free(kiln_interp_prog *p)
{
    free(p->exec);
    free(p->consts);
    free(p->reg);
}

/* Mark the instructions the outputs depend on (liveness, backwards). */
static void kiln_interp_mark_live(const kiln_kernel *k, uint8_t *live)
{
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        live[k->out_refs[j]] = 1;
        if (k->out_index && k->out_index[j] >= 0)
            live[k->out_index[j]] = 1;
    }
    for (uint32_t i = k->n_instrs; i-- > 0;) {
        const kiln_instr *in = &k->instrs[i];
        if (!live[i])
            continue;
        for (unsigned q = 0; q < kiln_interp_ops[in->op].arity; q++)
            live[kiln_interp_operand(in, q)] = 1;
    }
}

/* Register allocation by last use: a register returns to the free list
 * after the last instruction that reads it has been given its own
 * register, so an instruction never writes the register it reads (a cast
 * from f32 to f64 in place would overwrite slots not yet read).  CONSTs
 * and outputs keep their registers for the whole call. */
static void kiln_interp_assign_regs(const kiln_kernel *k,
                                    const uint8_t *live, uint32_t *last,
                                    uint32_t *freelist, kiln_interp_prog *p)
{
    uint32_t n = k->n_instrs, n_free = 0;
    for (uint32_t i = 0; i < n; i++) {
        last[i] = 0;
        if (!live[i])
            continue;
        const kiln_instr *in = &k->instrs[i];
        for (unsigned q = 0; q < kiln_interp_ops[in->op].arity; q++)
            last[kiln_interp_operand(in, q)] = i;
    }
    /* Pinned after the pass: a later reader of a CONST would otherwise
     * overwrite its UINT32_MAX and free its register. */
    for (uint32_t i = 0; i < n; i++)
        if (live[i] && (k->instrs[i].op == KILN_I_CONST ||
                        k->instrs[i].op == KILN_I_PARAM))
            last[i] = UINT32_MAX;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        last[k->out_refs[j]] = UINT32_MAX;
        if (k->out_index && k->out_index[j] >= 0)
            last[k->out_index[j]] = UINT32_MAX;
    }

    for (uint32_t i = 0; i < n; i++) {
        p->reg[i] = UINT32_MAX;
        if (!live[i])
            continue;
        const kiln_instr *in = &k->instrs[i];
        /* A CONST is filled once per call, before the blocks run: it
         * must not take a register freed by an instruction that runs
         * per block (that instruction would overwrite it each block). */
        int fixed = in->op == KILN_I_CONST || in->op == KILN_I_PARAM;
        p->reg[i] = n_free && !fixed ? freelist[--n_free] : p->n_regs++;
        if (fixed)
            p->consts[p->n_consts++] = i;
        else
            p->exec[p->n_exec++] = i;
        if (kiln_interp_ops[in->op].runtime)
            p->uses_runtime = 1;
        unsigned arity = kiln_interp_ops[in->op].arity;
        for (unsigned q = 0; q < arity; q++) {
            int32_t o = kiln_interp_operand(in, q);
            int seen = 0; /* free a register read twice (x * x) once */
            for (unsigned r = 0; r < q; r++)
                seen |= kiln_interp_operand(in, r) == o;
            if (!seen && last[o] == i)
                freelist[n_free++] = p->reg[o];
        }
    }
}

static int kiln_interp_prog_prepare(kiln_interp_prog *p, const kiln_kernel *k)
{
    uint32_t n = k->n_instrs;
    memset(p, 0, sizeof *p);
    uint8_t *live = calloc(n, 1);
    uint32_t *last = malloc(n * sizeof *last);
    uint32_t *freelist = malloc(n * sizeof *freelist);
    p->reg = malloc(n * sizeof *p->reg);
    p->exec = malloc(n * sizeof *p->exec);
    p->consts = malloc(n * sizeof *p->consts);
    int ok = live && last && freelist && p->reg && p->exec && p->consts;
    if (ok) {
        kiln_interp_mark_live(k, live);
        kiln_interp_assign_regs(k, live, last, freelist, p);
    } else {
        kiln_interp_prog_free(p);
        memset(p, 0, sizeof *p);
    }
    free(live);
    free(last);
    free(freelist);
    return ok ? 0 : -1;
}
