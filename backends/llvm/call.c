/*
 * call.c — the plugin's calls: prepared calls (ABI 1.4) and unprepared
 * ones, dispatched by kind to the runners (run.c, gather.c, join.c,
 * scatter.c, dot.c) or the embedded interpreter.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the plugin only (llvm.so;
 * -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifdef KL_FRONT

/* A prepared call of JOIN, SCATTER or DOT (r's call was checked, with a
 * message buffer of prepare's own); 1 when it is not prepared. */
static int kl_prepare_move(const kiln_interp_run *r, const kl_state *ls, void **out)
{
    uint32_t kind = r->k->kind;
    if (kind == KILN_KERNEL_JOIN)
        return kl_jplan_make(r, ls, out);
    if (kind == KILN_KERNEL_SCATTER || kind == KILN_KERNEL_DOT) {
        union { kl_planhead h; kl_splan s; kl_dplan d; } *mp = malloc(sizeof *mp);
        int scatter = kind == KILN_KERNEL_SCATTER;
        if (!mp || (scatter ? kl_splan_init(&mp->s, r, ls) : kl_dplan_init(&mp->d, r, ls))) {
            free(mp);
            return 1;
        }
        mp->h.run = scatter ? kl_splan_run : kl_dplan_run;
        *out = mp;
        return 0;
    }
    return 1;   /* GATHER checks its indices per call: fn */
}

/* ---- prepared calls (ABI 1.4) ---- */

typedef struct kl_prepared {
    kl_planhead h;            /* run: NULL */
    kl_callplan pl;
    /* the plan's arrays follow (kl_callplan_bytes(nv)) */
} kl_prepared;

/* A LOOP whose coalesced space is one row of at most one block
 * (KILN_INTERP_BLOCK) and whose REDUCE outputs each fold the whole row
 * into one element: the interpreter's walk would make exactly one
 * block call, so a prepared call makes it itself (kl_run_loop1).  A row
 * with a broadcast input runs the strided row (stride 0) rather than
 * filling splat buffers. */
static void kl_loop1_init(kl_callplan *pl, const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;
    if (pl->empty || pl->interp || pl->rows || pl->it.rank != 1 ||
        pl->it.shape[0] > KILN_INTERP_BLOCK || !pl->ls->c || !pl->ls->s)
        return;
    const kiln_view *space = kiln_interp_space(r);
    for (int d = 0; d < space->rank; d++)
        if (pl->distinct[d] != 1 && kl_loop_reduces(k))
            return;   /* a REDUCE output of more than one element */
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_REDUCE &&
            k->reduce_op == KILN_REDUCE_MEAN &&
            k->outputs[j].dtype != KILN_F64 && k->outputs[j].dtype != KILN_F32)
            return;   /* the interpreter's MEAN division: floats only */
    pl->loop1 = 1;
    pl->row_n = pl->it.shape[0];
    pl->row = pl->mode == 0 ? pl->ls->c : pl->ls->s;
}

/* A prepared LOOP call of one block (kl_loop1_init): the REDUCE outputs
 * set to the identity, the index check, the row, each accumulator
 * combined into its output as the interpreter combines a block, MEAN's
 * division; the walk as before when the check fails (the interpreter
 * reports the error).  Returns 1 for "walk", else 0. */
static int kl_run_loop1(kl_callplan *pl, const kiln_call *call)
{
    const kiln_kernel *k = &((const kiln_interp_state *)pl->ls->interp->state)->art->k;
    for (uint32_t v = 0; v < pl->n_in; v++)
        pl->ptrs[v] = call->inputs[v].data;
    for (uint32_t v = pl->n_in; v < pl->nv; v++)
        pl->ptrs[v] = call->outputs[v - pl->n_in].data;
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_REDUCE)
            kiln_interp_identity(k->outputs[j].dtype, k->reduce_op,
                                 call->outputs[j].data);
    if (pl->ls->lk) {
        unsigned char bad = 0;
        pl->ls->lk(pl->row_n, pl->ptrs, pl->st, call->rt, &bad);
        if (bad)
            return 1;
    }
    pl->row(pl->row_n, pl->ptrs, pl->st, call->rt, pl->acc);
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        if (k->out_roles[j] != KILN_ROLE_REDUCE)
            continue;
        unsigned dt = k->outputs[j].dtype;
        void *o = call->outputs[j].data;
        kl_combine(dt, k->reduce_op, o, pl->acc + 8 * (size_t)j);
        if (k->reduce_op != KILN_REDUCE_MEAN)
            continue;
        if (dt == KILN_F64) {   /* kiln_interp_mean_body's division */
            double x;
            memcpy(&x, o, 8);
            x /= pl->count;
            memcpy(o, &x, 8);
        } else {
            float x;
            memcpy(&x, o, 4);
            x = (float)((double)x / pl->count);
            memcpy(o, &x, 4);
        }
    }
    return 0;
}

static int kl_prepare(void *state, const kiln_call *call, void **out)
{
    const kl_state *ls = state;
    if (!ls || !call || !out || !ls->obj ||
        call->struct_size < offsetof(kiln_call, rt) + sizeof(call->rt))
        return 1;
    /* the checks may write a message: into a buffer of our own */
    char msg[256];
    kiln_call c = *call;
    c.errbuf = msg;
    c.errbuf_size = sizeof msg;
    kiln_interp_run r = kl_run_of(ls, &c);
    const kiln_kernel *k = r.k;
    if (kiln_interp_check_call(&r) || kiln_interp_check_runtime(&r))
        return 1;
    if (k->kind == KILN_KERNEL_RECUR)
        return kl_rplan_make(&r, ls, out);
    if (!kiln_interp_has_program(k->kind))
        return kl_prepare_move(&r, ls, out);
    if (k->kind == KILN_KERNEL_REDUCE && !ls->uc && !kl_one_output(&c.outputs[0]))
        return 1;   /* the interpreter's: fn */
    uint32_t nv = k->n_inputs + k->n_outputs;
    kl_prepared *pp = malloc(sizeof *pp + kl_callplan_bytes(nv));
    if (!pp)
        return 1;
    unsigned char *mem = (unsigned char *)(pp + 1);
    pp->h.run = NULL;
    if (k->kind == KILN_KERNEL_ELEMWISE && k->n_outputs > 0 &&
        k->outputs[0].rank == 0) {
        memset(&pp->pl, 0, sizeof pp->pl);
        pp->pl.ls = ls;
        pp->pl.scalar = 1;
        pp->pl.row = ls->c;
        pp->pl.n_in = k->n_inputs;
        pp->pl.nv = nv;
        pp->pl.ptrs = (void **)(void *)mem;
        pp->pl.ptrs[nv] = (void *)(uintptr_t)kiln_interp_block(&c);
    } else if (kl_callplan_init(&pp->pl, &r, ls, mem) || pp->pl.interp) {
        free(pp);
        return 1;
    } else if (k->kind == KILN_KERNEL_ELEMWISE && !pp->pl.empty &&
               pp->pl.it.rank == 1 && pp->pl.mode != 1) {
        /* the walk is one row from every view's first element: the
         * interpreter's iterator would make exactly one call */
        pp->pl.row1 = 1;
        pp->pl.row_n = pp->pl.it.shape[0];
        pp->pl.row = pp->pl.mode == 2 ? ls->s : ls->c;
    } else if (k->kind == KILN_KERNEL_LOOP) {
        kl_loop1_init(&pp->pl, &r);
    }
    *out = pp;
    return 0;
}

static int kl_run_prepared(void *plan, const kiln_call *call)
{
    kl_prepared *pp = plan;
    if (pp->h.run)   /* JOIN, SCATTER, DOT, RECUR */
        return pp->h.run(plan, call);
    kl_callplan *pl = &pp->pl;
    if (pl->scalar) {
        /* the common case, straight: a rank-0 kernel's rows are its
         * views' data */
        for (uint32_t v = 0; v < pl->n_in; v++)
            pl->ptrs[v] = call->inputs[v].data;
        for (uint32_t v = pl->n_in; v < pl->nv; v++)
            pl->ptrs[v] = call->outputs[v - pl->n_in].data;
        pl->row(1, pl->ptrs, NULL, call->rt, NULL);
        return 0;
    }
    if (pl->row1) {
        for (uint32_t v = 0; v < pl->n_in; v++)
            pl->ptrs[v] = call->inputs[v].data;
        for (uint32_t v = pl->n_in; v < pl->nv; v++)
            pl->ptrs[v] = call->outputs[v - pl->n_in].data;
        pl->row(pl->row_n, pl->ptrs, pl->mode == 2 ? pl->st : NULL, call->rt,
                NULL);
        return 0;
    }
    if (pl->loop1 && kl_run_loop1(pl, call) == 0)
        return 0;
    kiln_interp_run r = kl_run_of(pp->pl.ls, call);
    return kl_callplan_exec(&pp->pl, &r);
}

static void kl_prepared_free(void *plan)
{
    free(plan);
}

static int kl_run(void *state, const kiln_call *call)
{
    const kl_state *ls = state;
    if (!ls || !call)
        return KILN_ERR_ARG;
    if (call->struct_size < offsetof(kiln_call, rt) + sizeof(call->rt))
        return KILN_ERR_ARG;
    kiln_interp_run r = kl_run_of(ls, call);
    const kiln_kernel *k = r.k;
    if (k->kind == KILN_KERNEL_ELEMWISE && k->n_outputs > 0 &&
        k->outputs[0].rank == 0 && kiln_interp_check_block(&r) == 0 &&
        kl_scalar_call(ls, k, call) == 0)
        return 0;
    int rc = kiln_interp_check_call(&r);
    if (rc)
        return rc;
    switch (k->kind) {
    case KILN_KERNEL_GATHER: return kl_take(&r, ls);
    case KILN_KERNEL_JOIN: return kl_join(&r, ls);
    case KILN_KERNEL_SCATTER: return kl_scatter(&r, ls);
    case KILN_KERNEL_DOT: return kl_dot(&r, ls);
    case KILN_KERNEL_RECUR: return kl_run_recur(&r, ls);
    /* issue 25: a scan has no code of its own yet (kl_native): the
     * embedded interpreter runs it */
    case KILN_KERNEL_SCAN: return ls->interp->fn(ls->interp->state, call);
    /* issue 28: LINALG's work is the runtime's lapack_run whichever
     * backend calls it, so the embedded interpreter's call is the code */
    case KILN_KERNEL_LINALG:
        return ls->interp->fn(ls->interp->state, call);
    default: break;
    }
    if (k->kind == KILN_KERNEL_REDUCE && !ls->uc) {
        /* compiled as a full reduction: only a call whose output is one
         * element can use the code (anything else gets the interpreter,
         * with its messages) */
        if (!kl_one_output(&call->outputs[0])) {
            kl_walked();
            return ls->interp->fn(ls->interp->state, call);
        }
    }
    return kl_program_kind(&r, ls);
}

#endif /* KL_FRONT */
