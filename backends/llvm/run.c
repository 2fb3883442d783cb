/*
 * run.c — running the kinds with a scalar program (ELEMWISE, REDUCE,
 * LOOP) on compiled rows under the interpreter's walk: row pointers and
 * splats, the blocks' bodies, the call plan (made per call or once per
 * prepared shape), rank-0 calls; and the head and interpreter's view
 * that the JOIN, SCATTER and DOT plans share.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the plugin only (llvm.so;
 * -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifdef KL_FRONT

typedef struct kl_prun {
    const kiln_interp_run *r;
    const kl_state *ls;
    const struct kl_callplan *pl;   /* LOOP */
    uint32_t n_in, nv;
    void **ptrs;
    int64_t *st;
    size_t *esize;
    int mode;                 /* 0 contiguous, 1 splat, 2 strided */
    int n_splat;
    uint32_t splat_in[KL_MAX_SPLAT];
    const void *splat_src[KL_MAX_SPLAT];
    int64_t splat_n[KL_MAX_SPLAT];   /* elements of splat[q] filled */
    double splat[KL_MAX_SPLAT][KL_SPLAT];
} kl_prun;

/* Base pointers of the block's views; in splat mode, broadcast inputs
 * read a buffer filled with their (row-constant) value. */
static void kl_ptrs(kl_prun *p, const kiln_interp_iter *it, int64_t j0,
                    int64_t n, uint32_t nviews)
{
    const kiln_call *call = p->r->call;
    for (uint32_t v = 0; v < nviews; v++) {
        const kiln_view *view = v < p->n_in ? &call->inputs[v]
                                            : &call->outputs[v - p->n_in];
        p->ptrs[v] = kiln_interp_elem(view, kiln_interp_at(it, v, j0),
                                      p->esize[v]);
    }
    if (p->mode != 1)
        return;
    for (int q = 0; q < p->n_splat; q++) {
        uint32_t v = p->splat_in[q];
        const void *src = p->ptrs[v];
        /* fill only the block's n elements (a small kernel's block is a
         * few elements: filling all KL_SPLAT with one memcpy each was
         * most of eight schools' call time): the first element, then
         * copies that double what is filled (a store per element was
         * 8% of radon's call: 3 splats of 256 every call, issue 27) */
        int64_t from = src == p->splat_src[q] ? p->splat_n[q] : 0;
        if (from < n) {
            size_t es = p->esize[v];
            unsigned char *d = (unsigned char *)p->splat[q];
            if (from == 0) {
                memcpy(d, src, es);
                from = 1;
            }
            while (from < n) {
                int64_t c = from < n - from ? from : n - from;
                memcpy(d + (size_t)from * es, d, (size_t)c * es);
                from += c;
            }
            p->splat_src[q] = src;
            p->splat_n[q] = n;
        }
        p->ptrs[v] = p->splat[q];
    }
}

static int kl_elemwise_body(void *ctx, const kiln_interp_iter *it,
                            int64_t j0, int64_t n)
{
    kl_prun *p = ctx;
    kl_ptrs(p, it, j0, n, p->nv);
    if (p->mode == 2)
        p->ls->s(n, p->ptrs, p->st, p->r->rt, NULL);
    else
        p->ls->c(n, p->ptrs, NULL, p->r->rt, NULL);
    return 0;
}

/* *o = (T)OP((ACC)*o, acc): the interpreter's combination of a block. */
static void kl_combine(unsigned dt, uint32_t op, void *o, const void *accp)
{
    switch (dt) {
    case KILN_F64: case KILN_F32: {
        double acc, x;
        memcpy(&acc, accp, 8);
        if (dt == KILN_F64) memcpy(&x, o, 8);
        else { float f; memcpy(&f, o, 4); x = (double)f; }
        switch (op) {
        case KILN_REDUCE_PROD: x = x * acc; break;
        case KILN_REDUCE_MAX: x = KILN_INTERP_FMAX(x, acc); break;
        case KILN_REDUCE_MIN: x = KILN_INTERP_FMIN(x, acc); break;
        default: x = x + acc; break;
        }
        if (dt == KILN_F64) memcpy(o, &x, 8);
        else { float f = (float)x; memcpy(o, &f, 4); }
        break;
    }
    case KILN_I64: {
        int64_t acc, x;
        memcpy(&acc, accp, 8);
        memcpy(&x, o, 8);
        switch (op) {
        case KILN_REDUCE_PROD: x = KILN_INTERP_MUL64(x, acc); break;
        case KILN_REDUCE_MAX: x = KILN_INTERP_MAX(x, acc); break;
        case KILN_REDUCE_MIN: x = KILN_INTERP_MIN(x, acc); break;
        default: x = KILN_INTERP_ADD64(x, acc); break;
        }
        memcpy(o, &x, 8);
        break;
    }
    case KILN_I32: {
        int32_t acc, x;
        memcpy(&acc, accp, 4);
        memcpy(&x, o, 4);
        switch (op) {
        case KILN_REDUCE_PROD: x = KILN_INTERP_MUL32(x, acc); break;
        case KILN_REDUCE_MAX: x = KILN_INTERP_MAX(x, acc); break;
        case KILN_REDUCE_MIN: x = KILN_INTERP_MIN(x, acc); break;
        default: x = KILN_INTERP_ADD32(x, acc); break;
        }
        memcpy(o, &x, 4);
        break;
    }
    default: {
        uint8_t acc = *(const uint8_t *)accp, x = *(uint8_t *)o;
        x = (op == KILN_REDUCE_MIN || op == KILN_REDUCE_PROD)
                ? KILN_INTERP_AND(x, acc) : KILN_INTERP_OR(x, acc);
        *(uint8_t *)o = x;
        break;
    }
    }
}

static int kl_reduce_body(void *ctx, const kiln_interp_iter *it,
                          int64_t j0, int64_t n)
{
    kl_prun *p = ctx;
    const kiln_kernel *k = p->r->k;
    kl_ptrs(p, it, j0, n, p->nv);
    /* sibling outputs reduce the same axes: output 0's stride decides */
    int64_t os = kiln_interp_inner(it, p->n_in);
    if (os == 0) {
        /* one 8-byte accumulator per output (the row functions' layout) */
        union { double d; int64_t i; unsigned char b[8]; } acc[KL_MAX_ACC];
        if (p->mode == 2)
            p->ls->s(n, p->ptrs, p->st, p->r->rt, acc);
        else
            p->ls->c(n, p->ptrs, NULL, p->r->rt, acc);
        for (uint32_t j = 0; j < k->n_outputs; j++)
            kl_combine(k->outputs[j].dtype, k->reduce_op, p->ptrs[p->n_in + j],
                       &acc[j]);
    } else if (p->mode != 2 && os == 1) {
        p->ls->uc(n, p->ptrs, NULL, p->r->rt, NULL);
    } else {
        p->ls->us(n, p->ptrs, p->st, p->r->rt, NULL);
    }
    return 0;
}

/* After coalescing: pick contiguous, splat or strided rows. */
static void kl_pick_mode(kl_prun *p, const kiln_interp_iter *it,
                         const kiln_kernel *k)
{
    int contig = 1, splat_ok = 1;
    p->n_splat = 0;
    for (uint32_t v = 0; v < p->nv; v++) {
        int64_t s = kiln_interp_inner(it, v);
        p->st[v] = s;
        if (kl_role(k, v) != KILN_ROLE_ITER)
            continue;  /* reductions: handled per block; indexed views */
        if (s == 1)
            continue;
        contig = 0;
        if (v < p->n_in && s == 0 && p->n_splat < KL_MAX_SPLAT)
            p->splat_in[p->n_splat++] = v;
        else
            splat_ok = 0;
    }
    p->mode = contig ? 0 : splat_ok ? 1 : 2;
    for (int q = 0; q < KL_MAX_SPLAT; q++) {
        p->splat_src[q] = NULL;
        p->splat_n[q] = 0;
    }
}

/* The data-independent part of running an ELEMWISE or REDUCE program
 * on a call's views: the coalesced walk, the row mode, the strides; for a
 * reduction the output's reduced axes.  Built per call (kl_program_kind)
 * or once per shape signature (a prepared call, kl_prepare).  The arrays
 * live in `mem` (kl_callplan_bytes(nv) bytes). */
typedef struct kl_callplan {
    const kl_state *ls;
    kl_row_fn row;            /* scalar, row1: the row function to call */
    int row1;                 /* ELEMWISE over one row (coalesced rank 1,
                                 contiguous or strided): one call of row */
    int64_t row_n;            /* row1, loop1: the row's length */
    int loop1;                /* LOOP over one row of at most one block
                                 whose REDUCE outputs are scalars: row
                                 called straight (kl_run_loop1) */
    int scalar;               /* rank-0 ELEMWISE: the views' data are the rows */
    int empty;                /* an empty space: nothing to run */
    kiln_interp_iter it;      /* coalesced */
    uint32_t n_in, nv;
    int mode, n_splat;        /* kl_pick_mode */
    uint32_t splat_in[KL_MAX_SPLAT];
    int64_t *st;              /* inner strides; LOOP: then each indexed
                                 view's element stride and extent */
    size_t *esize;
    void **ptrs;              /* per-call row pointers (scratch) */
    int64_t distinct[KILN_MAX_RANK];  /* REDUCE: output extents */
    double count;             /* REDUCE: elements per output */
    /* LOOP */
    int interp;               /* a layout the rows do not cover (REDUCE
                                 outputs that disagree on folding along
                                 the row): the interpreter runs the call */
    int rows;                 /* REDUCE outputs fold along the row */
    int rows_unit;            /* ... all with inner stride 1 */
    unsigned char *acc;       /* 8 bytes per output: the accumulators */
    kl_row_fn nest;           /* the loop nest this call runs (nest.c), or
                                 NULL */
    int fold;                 /* nest.c's fold along rows of one block (row:
                                 the row function); nest NULL, fold 0:
                                 the walk */
} kl_callplan;

/* strides, offs, st (4 per view and the row length), acc, ptrs (and the
 * constant block's after them: ptrs[nv], ABI 1.8), esize */
#define KL_CALLPLAN_BYTES(nv)                                                 \
    ((sizeof(int64_t) * (KILN_MAX_RANK + 6) + sizeof(void *) +               \
      sizeof(size_t)) * (size_t)(nv) + sizeof(int64_t) + sizeof(void *))
static size_t kl_callplan_bytes(uint32_t nv)
{
    return KL_CALLPLAN_BYTES(nv);
}

/* nest.c: the nest a call runs, and running it */
static void kl_nest_init(kl_callplan *pl, const kiln_interp_run *r);
static void kl_nest_exec(kl_callplan *pl, const kiln_interp_run *r);
static void kl_walked(void);

/* LOOP: each indexed view's element stride and extent after the inner
 * strides (the row functions' st), and how the REDUCE outputs fold: all
 * into accumulators (inner stride 0) or all along the row. */
static void kl_loop_layout(kl_callplan *pl, const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;
    uint32_t nv = pl->nv;
    int zero = 0, step = 0, unit = 1;
    for (uint32_t v = 0; v < nv; v++) {
        const kiln_view *w = v < k->n_inputs ? &r->call->inputs[v]
                                             : &r->call->outputs[v - k->n_inputs];
        unsigned role = kl_role(k, v);
        pl->st[nv + v] = kl_indexed(k, v) ? w->strides[0] : 0;
        pl->st[2 * (size_t)nv + v] = kl_indexed(k, v) ? w->shape[0] : 0;
        if (role != KILN_ROLE_REDUCE)
            continue;
        int64_t os = pl->st[v];
        zero |= os == 0;
        step |= os != 0;
        unit &= os == 1;
    }
    pl->rows = step;
    pl->rows_unit = unit;
    pl->interp = (zero && step) || (step && !pl->ls->uc);
}

/* Check the call's shapes against the kernel and build the plan in *pl
 * (arrays in mem).  Returns 0 or a kiln_code with r's message set. */
static int kl_callplan_init(kl_callplan *pl, const kiln_interp_run *r,
                        const kl_state *ls, unsigned char *mem)
{
    const kiln_kernel *k = r->k;
    int loop = k->kind == KILN_KERNEL_LOOP;
    const kiln_view *space = kiln_interp_space(r);
    uint32_t nv = k->n_inputs + k->n_outputs;
    int rc = kiln_interp_check_runtime(r);
    if (rc)
        return rc;
    memset(pl, 0, sizeof *pl);
    pl->ls = ls;
    pl->n_in = k->n_inputs;
    pl->nv = nv;
    kiln_interp_iter *it = &pl->it;
    it->rank = space->rank;
    it->n_views = nv;
    it->strides = (int64_t *)(void *)mem;
    it->offs = it->strides + (size_t)nv * KILN_MAX_RANK;
    pl->st = it->offs + nv;
    pl->acc = (unsigned char *)(void *)(pl->st + 4 * (size_t)nv + 1);
    pl->ptrs = (void **)(void *)(pl->acc + 8 * (size_t)nv);
    pl->ptrs[nv] = (void *)(uintptr_t)kiln_interp_block(r->call);
    pl->esize = (size_t *)(void *)(pl->ptrs + nv + 1);
    for (uint32_t v = 0; v < nv; v++)
        pl->esize[v] = kiln_interp_dtype_size(v < k->n_inputs ? k->inputs[v].dtype
                                              : k->outputs[v - k->n_inputs].dtype);
    for (int d = 0; d < space->rank; d++)
        it->shape[d] = space->shape[d];
    if (loop) {
        rc = kiln_interp_loop_strides(r, it, pl->distinct, &pl->count);
    } else {
        rc = kiln_interp_input_strides(r, it);
        if (!rc)
            rc = kiln_interp_output_strides(r, it, pl->distinct, &pl->count);
    }
    if (rc)
        return rc;
    /* the distinct output extents above read the walk before coalescing */
    pl->empty = !kiln_interp_iter_coalesce(it);
    if (!pl->empty) {
        kl_prun p = {.nv = nv, .n_in = pl->n_in, .st = pl->st};
        kl_pick_mode(&p, it, k);
        pl->mode = p.mode;
        pl->n_splat = p.n_splat;
        memcpy(pl->splat_in, p.splat_in, sizeof pl->splat_in);
        if (loop)
            kl_loop_layout(pl, r);
        kl_nest_init(pl, r);
    }
    return 0;
}

/* A block of a LOOP kernel whose index check failed: the interpreter
 * runs it (its registers on the heap: an error path), reporting exactly
 * its own message, or, had the check been wrong, the block's results. */
static int kl_loop_fail(kl_prun *p, const kiln_interp_iter *it, int64_t j0,
                        int64_t n)
{
    const kiln_interp_prog *prog = &p->r->s->prog;
    unsigned char *regs = malloc((size_t)prog->n_regs * KILN_INTERP_REG_BYTES + 1);
    if (!regs)
        return kiln_interp_fail(p->r, KILN_ERR_NOMEM, "%s: out of memory",
                                p->r->label);
    kiln_interp_prun ip = {.r = p->r, .regs = regs,
                           .reg_bytes = KILN_INTERP_REG_BYTES, .n_in = p->n_in};
    for (uint32_t c = 0; c < prog->n_consts; c++) {
        const kiln_instr *in = &p->r->k->instrs[prog->consts[c]];
        kiln_interp_fill_const(in->dtype, kiln_interp_const_value(p->r, in),
                               kiln_interp_reg(&ip, prog->consts[c]),
                               KILN_INTERP_BLOCK);
    }
    int rc = kiln_interp_loop_body(&ip, it, j0, n);
    free(regs);
    return rc;
}

/* A block of a LOOP kernel: check its indices, then run the row (the
 * REDUCE outputs into accumulators, combined as the interpreter
 * combines a block, or along the row). */
static int kl_loop_body(void *ctx, const kiln_interp_iter *it, int64_t j0,
                        int64_t n)
{
    kl_prun *p = ctx;
    const kl_callplan *pl = p->pl;
    const kiln_kernel *k = p->r->k;
    kl_ptrs(p, it, j0, n, p->nv);
    if (p->ls->lk) {
        unsigned char bad = 0;
        p->ls->lk(n, p->ptrs, p->st, p->r->rt, &bad);
        if (bad)
            return kl_loop_fail(p, it, j0, n);
    }
    if (pl->rows) {
        kl_row_fn f = p->mode != 2 && pl->rows_unit ? p->ls->uc : p->ls->us;
        f(n, p->ptrs, p->st, p->r->rt, NULL);
        return 0;
    }
    kl_row_fn f = p->mode == 2 ? p->ls->s : p->ls->c;
    f(n, p->ptrs, p->st, p->r->rt, pl->acc);
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_REDUCE)
            kl_combine(k->outputs[j].dtype, k->reduce_op, p->ptrs[p->n_in + j],
                       pl->acc + 8 * (size_t)j);
    return 0;
}

/* Run a plan on call r (views as when the plan was made, data anywhere). */
static int kl_callplan_exec(kl_callplan *pl, const kiln_interp_run *r)
{
    const kiln_kernel *k = r->k;   /* (scalar and one-row plans: kl_run_prepared) */
    kl_prun prun, *p = &prun;  /* ~33 KiB of stack, splat buffers included */
    p->r = r;
    p->ls = pl->ls;
    p->pl = pl;
    p->n_in = pl->n_in;
    p->nv = pl->nv;
    p->ptrs = pl->ptrs;
    p->st = pl->st;
    p->esize = pl->esize;
    p->mode = pl->mode;
    p->n_splat = pl->n_splat;
    memcpy(p->splat_in, pl->splat_in, sizeof p->splat_in);
    for (int q = 0; q < KL_MAX_SPLAT; q++) {
        p->splat_src[q] = NULL;
        p->splat_n[q] = 0;
    }
    if (pl->nest || pl->fold) {
        /* our own nest (nest.c): the REDUCE outputs from the identity,
         * the rows, MEAN's division, as the walk does them */
        for (uint32_t j = 0; j < k->n_outputs; j++) {
            if (kl_role(k, k->n_inputs + j) != KILN_ROLE_REDUCE)
                continue;
            const kiln_view *o = &r->call->outputs[j];
            kiln_interp_fill f = {.view = o, .esize = kiln_interp_dtype_size(o->dtype)};
            kiln_interp_identity(o->dtype, k->reduce_op, f.value);
            kiln_interp_over_output(o, pl->distinct, kiln_interp_fill_body, &f);
        }
        kl_nest_exec(pl, r);
        for (uint32_t j = 0; k->reduce_op == KILN_REDUCE_MEAN && j < k->n_outputs;
             j++) {
            if (kl_role(k, k->n_inputs + j) != KILN_ROLE_REDUCE)
                continue;
            const kiln_view *o = &r->call->outputs[j];
            kiln_interp_fill f = {.view = o, .esize = kiln_interp_dtype_size(o->dtype),
                                  .divisor = pl->count};
            kiln_interp_over_output(o, pl->distinct, kiln_interp_mean_body, &f);
        }
        return 0;
    }
    if (!pl->empty)
        kl_walked();
    if (k->kind == KILN_KERNEL_LOOP) {
        /* the interpreter's walk and blocks (the same order of
         * floating-point operations), our rows */
        return kiln_interp_loop_walk(r, &pl->it, pl->empty, pl->distinct,
                                     pl->count, kl_loop_body, p);
    }
    if (k->kind == KILN_KERNEL_REDUCE) {
        /* the interpreter's kiln_interp_reduce, with our body */
        for (uint32_t j = 0; j < k->n_outputs; j++) {
            const kiln_view *o = &r->call->outputs[j];
            kiln_interp_fill f = {.view = o, .esize = kiln_interp_dtype_size(o->dtype)};
            kiln_interp_identity(o->dtype, k->reduce_op, f.value);
            kiln_interp_over_output(o, pl->distinct, kiln_interp_fill_body, &f);
        }
        if (!pl->empty)
            /* the interpreter's 256-element blocks: the same order of
             * floating-point operations, the same bits */
            kiln_interp_iter_run(&pl->it, KILN_INTERP_BLOCK, kl_reduce_body, p);
        for (uint32_t j = 0; k->reduce_op == KILN_REDUCE_MEAN && j < k->n_outputs;
             j++) {
            const kiln_view *o = &r->call->outputs[j];
            kiln_interp_fill f = {.view = o, .esize = kiln_interp_dtype_size(o->dtype),
                                  .divisor = pl->count};
            kiln_interp_over_output(o, pl->distinct, kiln_interp_mean_body, &f);
        }
    } else if (!pl->empty) {
        kiln_interp_iter_run(&pl->it, p->mode == 1 ? KL_SPLAT : INT64_MAX,
                             kl_elemwise_body, p);
    }
    return 0;
}

static int kl_program_kind(const kiln_interp_run *r, const kl_state *ls)
{
    uint32_t nv = r->k->n_inputs + r->k->n_outputs;
    /* on the stack for up to 64 views */
    enum { KL_STACK_VIEWS = 64 };
    union {
        int64_t i[KL_STACK_VIEWS * (KILN_MAX_RANK + 2)];
        void *p[KL_STACK_VIEWS];
        size_t z[KL_STACK_VIEWS];
    } stack[2];
    _Static_assert(sizeof stack >= KL_CALLPLAN_BYTES(KL_STACK_VIEWS),
                   "stack plan storage");
    unsigned char *mem = (unsigned char *)stack, *heap = NULL;
    if (nv > KL_STACK_VIEWS) {
        mem = heap = malloc(kl_callplan_bytes(nv));
        if (!heap)
            return kiln_interp_fail(r, KILN_ERR_NOMEM, "%s: out of memory", r->label);
    }
    kl_callplan pl;
    int rc = kl_callplan_init(&pl, r, ls, mem);
    if (!rc && pl.interp)
        kl_walked();
    if (!rc)
        rc = pl.interp ? ls->interp->fn(ls->interp->state, r->call)
                       : kl_callplan_exec(&pl, r);
    free(heap);
    return rc;
}

/* A rank-0 elementwise kernel (a fused scalar region): one iteration,
 * the views' data pointers are the row pointers.  Returns 0 after running
 * it, or 1 when the call is not exactly what the kernel expects (the
 * general path then checks it and reports what is wrong). */
static int kl_scalar_call(const kl_state *ls, const kiln_kernel *k,
                          const kiln_call *call)
{
    uint32_t nv = k->n_inputs + k->n_outputs;
    enum { KL_SCALAR_VIEWS = 256 };
    void *ptrs[KL_SCALAR_VIEWS + 1];   /* the views', the constant block's */
    if (nv > KL_SCALAR_VIEWS || call->n_inputs != k->n_inputs ||
        call->n_outputs != k->n_outputs || !call->outputs ||
        (k->n_inputs && !call->inputs) || !call->rt ||
        call->rt->struct_size < sizeof(kiln_runtime))
        return 1;
    for (uint32_t v = 0; v < nv; v++) {
        const kiln_view *view = v < k->n_inputs ? &call->inputs[v]
                                                : &call->outputs[v - k->n_inputs];
        const kiln_arg_desc *d = v < k->n_inputs ? &k->inputs[v]
                                                 : &k->outputs[v - k->n_inputs];
        if (view->rank != 0 || view->dtype != (int32_t)d->dtype || !view->data)
            return 1;
        ptrs[v] = view->data;
    }
    ptrs[nv] = (void *)(uintptr_t)kiln_interp_block(call);
    ls->c(1, ptrs, NULL, call->rt, NULL);
    return 0;
}

/* Whether a reduction's output view is one element: every axis has
 * extent 1 or stride 0 (the host's views give reduced axes the input's
 * extent and stride 0). */
static int kl_one_output(const kiln_view *o)
{
    for (int d = 0; d < o->rank; d++)
        if (o->shape[d] != 1 && o->strides[d] != 0)
            return 0;
    return 1;
}

/* ---- JOIN, SCATTER, DOT: compiled rows behind plans ----
 *
 * Each kind has a plan: what its rows need that does not depend on the
 * data (the coalesced walks, the strides of kiln_js/kiln_sc, the BLAS
 * arguments of kiln_db), made from one call's views.  A prepared call
 * (ABI 1.4) makes it once per shape signature; an unprepared call makes
 * it on the stack.  Every plan starts with a kl_planhead whose `run`
 * kl_run_prepared calls; ELEMWISE and REDUCE plans (kl_prepared) have
 * none. */

typedef struct kl_planhead {
    int (*run)(void *plan, const kiln_call *call);
} kl_planhead;

/* The interpreter's view of one call of ls's kernel (its checks and
 * messages). */
static kiln_interp_run kl_run_of(const kl_state *ls, const kiln_call *call)
{
    const kiln_interp_state *is = ls->interp->state;
    const kiln_kernel *k = &is->art->k;
    kiln_interp_run r = {.s = is, .k = k, .call = call, .rt = call->rt,
                         .label = k->label ? k->label : kiln_interp_kind_name(k->kind)};
    return r;
}

#endif /* KL_FRONT */
