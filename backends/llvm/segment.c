/*
 * segment.c — wide programs: a program of more than KL_SEG instructions
 * cut into segment functions called per strip of the row, values crossing
 * segments in stack temporaries.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

/* A loop body of thousands of instructions costs the code generator more
 * than linearly: instruction selection works on one basic block at a
 * time and, in LLVM 14, clusters the loads hanging off one chain and
 * checks load folding with searches that grow with the block (measured:
 * 2x inputs -> 3.8x selection time at 1024 -> 2048 inputs), and every
 * base pointer kept live across one loop is a spill.  So a program of
 * more than KL_SEG instructions is cut, in program order, into segments
 * of about KL_SEG; the row is walked in strips of `strip` elements, and
 * each strip calls one function per segment (kl_emit_seg says why a
 * function and not a loop).  KL_SEG = 512: below ~1000 instructions a
 * block's selection cost is still about linear, and segments have their
 * own overhead (a strip loop, temporaries, a function each: 1.6x the
 * compile time of one loop at 512 inputs with segments of 256); measured
 * at 8..2048 inputs, 512 gave the lowest times and a linear sweep (64:
 * exponent 1.04 but 1.6x slower at 2048; 1024: exponent 1.25 above 256
 * inputs).  A value computed in one segment
 * and used in a later one goes through a stack temporary (`strip`
 * elements, a slot reused once its last reader is done); LOADs and
 * CONSTs are not carried but re-emitted where used.  Outputs are stored
 * (and reductions folded) in the last segment only, after every input
 * element of the strip was read, so the element-for-element aliasing
 * the ABI allows stays safe.  Each element still sees the same
 * operations in the same order: results do not change. */
/* KL_SEG: see the top of the file */
#define KL_TEMP_BYTES 32768   /* temporaries per strip, all slots */

typedef struct kl_plan {
    uint32_t nseg;       /* 1: one plain loop */
    uint32_t *seg;       /* per instruction: its segment (computed ones) */
    uint32_t *end;       /* per segment: one past its last instruction */
    int32_t *slot;       /* per instruction: its temporary, or -1 */
    uint8_t *slot_dt;    /* per temporary: the dtype */
    uint32_t nslots;
    int64_t strip;
} kl_plan;

static void kl_plan_free(kl_plan *p)
{
    free(p->seg);
    free(p->end);
    free(p->slot);
    free(p->slot_dt);
    memset(p, 0, sizeof *p);
}

static int kl_carried(unsigned op)
{
    return op != KILN_I_LOAD && op != KILN_I_CONST && op != KILN_I_PARAM;
}

/* Cut the live program of k into segments; 0, or -1 out of memory. */
static int kl_plan_make(const kiln_kernel *k, const uint8_t *live,
                        kl_plan *p)
{
    uint32_t n = k->n_instrs;
    memset(p, 0, sizeof *p);
    p->nseg = 1;
    if (n <= KL_SEG)
        return 0;
    p->seg = calloc(n, sizeof *p->seg);
    p->end = calloc(n + 1, sizeof *p->end);
    p->slot = malloc(sizeof *p->slot * n);
    p->slot_dt = calloc(n, 1);
    int32_t *last = malloc(sizeof *last * n);
    uint32_t *head = NULL, *next = malloc(sizeof *next * n);
    int32_t *freel = malloc(sizeof *freel * (size_t)n * 5);
    uint32_t nfree[5] = {0};
    if (!p->seg || !p->end || !p->slot || !p->slot_dt || !last || !next || !freel)
        goto nomem;
    uint32_t q = 0, cost = 0, computed = 0;
    for (uint32_t i = 0; i < n; i++) {
        unsigned op = k->instrs[i].op;
        p->slot[i] = -1;
        last[i] = -1;
        if (!live[i] || op == KILN_I_CONST || op == KILN_I_PARAM)
            continue;
        if (op == KILN_I_LOAD) {
            cost++;
            continue;
        }
        if (cost >= KL_SEG && computed) {
            p->end[q++] = i;
            cost = computed = 0;
        }
        p->seg[i] = q;
        cost++;
        computed++;
    }
    p->nseg = q + 1;
    p->end[q] = n;
    if (p->nseg == 1)
        goto done;
    /* the last segment that reads each carried value */
    for (uint32_t i = 0; i < n; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!live[i] || !kl_carried(in->op))
            continue;
        for (unsigned a = 0; a < kiln_interp_ops[in->op].arity; a++) {
            int32_t o = kiln_interp_operand(in, a);
            if (kl_carried(k->instrs[o].op) && p->seg[o] < p->seg[i]
                && last[o] < (int32_t)p->seg[i])
                last[o] = (int32_t)p->seg[i];
        }
    }
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        /* an output's value and (LOOP SCATTER) its index */
        for (int q = 0; q < 2; q++) {
            int32_t o = q ? (k->out_index ? k->out_index[j] : -1) : k->out_refs[j];
            if (o >= 0 && kl_carried(k->instrs[o].op) && p->seg[o] + 1 < p->nseg)
                last[o] = (int32_t)p->nseg - 1;
        }
    }
    /* temporaries: a slot is free again after its value's last reader */
    head = malloc(sizeof *head * (p->nseg + 1));
    if (!head)
        goto nomem;
    for (uint32_t s = 0; s <= p->nseg; s++)
        head[s] = UINT32_MAX;
    uint32_t i = 0;
    int64_t bytes = 0;
    for (uint32_t s = 0; s < p->nseg; s++) {
        for (uint32_t v = head[s]; v != UINT32_MAX; v = next[v]) {
            unsigned dt = k->instrs[v].dtype;
            freel[(size_t)dt * n + nfree[dt]++] = p->slot[v];
        }
        for (; i < p->end[s]; i++) {
            if (last[i] < 0)
                continue;
            unsigned dt = k->instrs[i].dtype;
            if (nfree[dt]) {
                p->slot[i] = freel[(size_t)dt * n + --nfree[dt]];
            } else {
                p->slot[i] = (int32_t)p->nslots;
                p->slot_dt[p->nslots++] = (uint8_t)dt;
                bytes += (int64_t)kiln_interp_dtype_size(dt);
            }
            next[i] = head[last[i] + 1];
            head[last[i] + 1] = i;
        }
    }
    /* strips: as long as the temporaries fit KL_TEMP_BYTES, 16..256 */
    p->strip = bytes ? KL_TEMP_BYTES / bytes : 256;
    if (p->strip > 256)
        p->strip = 256;
    p->strip &= ~(int64_t)15;
    if (p->strip < 16)
        p->strip = 16;
done:
    free(last);
    free(head);
    free(next);
    free(freel);
    return 0;
nomem:
    free(last);
    free(head);
    free(next);
    free(freel);
    kl_plan_free(p);
    return -1;
}

/* Make instruction o's value available in segment q (stamp q + 1):
 * re-emit a LOAD or CONST, read a carried value from its temporary. */
static void kl_avail(kl_cg *g, kl_loopctx *lc, uint32_t *stamp,
                     LLVMValueRef *tmp, int32_t o, uint32_t q)
{
    const kiln_instr *in = &g->k->instrs[o];
    if (stamp[o] == q + 1)
        return;
    if (!kl_carried(in->op)) {
        lc->val[o] = kl_emit_instr(g, lc, (uint32_t)o);
    } else {
        unsigned dt = in->dtype;
        LLVMValueRef t = tmp[g->plan->slot[o]];
        LLVMValueRef pt = LLVMBuildGEP2(g->b, kl_type(g, dt), t, &lc->j, 1, "");
        LLVMValueRef v = LLVMBuildLoad2(g->b, kl_type(g, dt), pt, "");
        if (dt == KILN_BOOL)
            v = LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstNull(g->t_i8), "");
        lc->val[o] = v;
    }
    stamp[o] = q + 1;
}

/* The views whose LOADs segment q emits (marks in vmark). */
static void kl_seg_views(kl_cg *g, uint32_t q, uint32_t from, uint32_t *vmark,
                         int last_seg)
{
    const kiln_kernel *k = g->k;
    const kl_plan *p = g->plan;
    for (uint32_t i = from; i < p->end[q]; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!g->live[i] || !kl_carried(in->op))
            continue;
        if (in->op == KILN_I_TAKE)
            vmark[in->a] = q + 1;   /* the table */
        for (unsigned a = 0; a < kiln_interp_ops[in->op].arity; a++) {
            const kiln_instr *o = &k->instrs[kiln_interp_operand(in, a)];
            if (o->op == KILN_I_LOAD)
                vmark[o->a] = q + 1;
        }
    }
    if (last_seg)
        for (uint32_t j = 0; j < k->n_outputs; j++)
            for (int r = 0; r < 2; r++) {
                int32_t x = r ? (k->out_index ? k->out_index[j] : -1)
                              : k->out_refs[j];
                if (x >= 0 && k->instrs[x].op == KILN_I_LOAD)
                    vmark[k->instrs[x].a] = q + 1;
            }
}

/* Segment q of a segmented row function, as a function of its own:
 * void seg(int64_t m, void **ptrs, const int64_t *st, const kiln_runtime
 * *rt, void *tmp, int64_t s, void *acc) runs elements s .. s+m-1 (m > 0)
 * of the row.  A function per segment, not a loop per segment inside
 * the row function: the register allocator then never sees a live range
 * spanning every segment (measured: 2.2x the allocation time per
 * doubling of the width in one function, linear as separate ones). */
static LLVMValueRef kl_emit_seg(kl_cg *g, const char *name, uint32_t q,
                                uint32_t from, const int64_t *slot_off,
                                int mode, int strided)
{
    const kiln_kernel *k = g->k;
    const kl_plan *p = g->plan;
    LLVMBuilderRef b = g->b;
    int last_seg = q + 1 == p->nseg;
    char fname[96];
    snprintf(fname, sizeof fname, "%s.%u", name, q);
    LLVMValueRef fn = LLVMAddFunction(g->mod, fname, g->t_seg);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    static const char *const fa[] = {"nounwind", "noinline"};
    for (size_t a = 0; a < 2; a++)
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName(
                                                            fa[a], strlen(fa[a])), 0));
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    LLVMAddAttributeAtIndex(fn, 5, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
    LLVMAddAttributeAtIndex(fn, 7, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
    if (g->fast_math) {
        static const char *const ff[] = {
            "unsafe-fp-math", "no-signed-zeros-fp-math", "approx-func-fp-math",
            "less-precise-fpmad"};
        for (size_t a = 0; a < sizeof ff / sizeof ff[0]; a++)
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMCreateStringAttribute(
                                        g->ctx, ff[a], (unsigned)strlen(ff[a]), "true", 4));
    }
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "exit");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef m = LLVMGetParam(fn, 0), ptrs = LLVMGetParam(fn, 1),
                 st = LLVMGetParam(fn, 2), rt = LLVMGetParam(fn, 3),
                 tmpp = LLVMGetParam(fn, 4), s0 = LLVMGetParam(fn, 5),
                 accio = LLVMGetParam(fn, 6);
    uint32_t nv = k->n_inputs + k->n_outputs;
    kl_loopctx lc = {0};
    lc.fn = fn;
    lc.strided = strided;
    lc.base = g->seg_base;
    lc.stride = g->seg_stride;
    lc.tst = g->seg_tst;
    lc.tsize = g->seg_tsize;
    lc.val = g->seg_val;
    uint32_t *stamp = g->seg_stamp, *vmark = g->seg_vmark;
    LLVMValueRef rtfn[KILN_I_COUNT] = {0};
    lc.rtfn = rtfn;
    /* runtime functions, base pointers and strides of this segment */
    for (uint32_t i = from; i < p->end[q]; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!g->live[i] || !kl_carried(in->op))
            continue;
        size_t off = kl_rt_offset(in->op);
        if (off && !rtfn[in->op])
            rtfn[in->op] = kl_rt_fn(g, rt, off, kl_rt_type(g, in->op));
    }
    kl_seg_views(g, q, from, vmark, last_seg);
    for (uint32_t v = 0; v < nv; v++) {
        int out = v >= k->n_inputs;
        if (out ? !(last_seg && kl_out_used(k, mode, v - k->n_inputs))
                : vmark[v] != q + 1)
            continue;
        kl_view_base(g, &lc, ptrs, st, v, s0);
    }
    /* the temporaries this segment reads or writes */
    LLVMValueRef *tmp = g->seg_tmp;
    for (uint32_t t = 0; t < p->nslots; t++) {
        LLVMValueRef o = LLVMConstInt(g->t_i64, (unsigned long long)slot_off[t], 0);
        tmp[t] = LLVMBuildBitCast(b, LLVMBuildGEP2(b, g->t_i8, tmpp, &o, 1, ""),
                                  LLVMPointerType(kl_type(g, p->slot_dt[t]), 0), "");
    }
    /* the accumulators, at byte 8 j of accio (the last segment) */
    uint32_t no = k->n_outputs;
    LLVMValueRef *acc0 = calloc(no + 1, sizeof *acc0),
                 *accm = calloc(no + 1, sizeof *accm),
                 *acc = calloc(no + 1, sizeof *acc),
                 *acc2 = calloc(no + 1, sizeof *acc2);
    for (uint32_t j = 0; last_seg && j < no; j++) {
        unsigned odt = k->outputs[j].dtype;
        unsigned accdt = odt == KILN_F32 ? KILN_F64 : odt;
        if (!kl_has_acc(k, mode, j))
            continue;
        LLVMValueRef off = LLVMConstInt(g->t_i64, 8ull * j, 0);
        accm[j] = LLVMBuildBitCast(b, LLVMBuildGEP2(b, g->t_i8, accio, &off, 1, ""),
                                   LLVMPointerType(kl_type(g, accdt), 0), "");
        acc0[j] = LLVMBuildLoad2(b, kl_type(g, accdt), accm[j], "");
        if (accdt == KILN_BOOL)
            acc0[j] = LLVMBuildICmp(b, LLVMIntNE, acc0[j], LLVMConstNull(g->t_i8), "");
    }
    LLVMValueRef zero = LLVMConstInt(g->t_i64, 0, 0);
    LLVMBuildBr(b, loop);

    LLVMPositionBuilderAtEnd(b, loop);
    lc.j = LLVMBuildPhi(b, g->t_i64, "j");
    for (uint32_t j = 0; j < no; j++) {
        unsigned odt = k->outputs[j].dtype;
        if (acc0[j])
            acc[j] = LLVMBuildPhi(b, kl_rtype(g, odt == KILN_F32 ? KILN_F64 : odt),
                                  "acc");
    }
    for (uint32_t i = from; i < p->end[q]; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!g->live[i] || !kl_carried(in->op))
            continue;
        for (unsigned a = 0; a < kiln_interp_ops[in->op].arity; a++)
            kl_avail(g, &lc, stamp, tmp, kiln_interp_operand(in, a), q);
        lc.val[i] = kl_emit_instr(g, &lc, i);
        stamp[i] = q + 1;
    }
    for (uint32_t i = from; i < p->end[q]; i++) {
        if (!g->live[i] || p->slot[i] < 0)
            continue;
        LLVMValueRef x = lc.val[i];
        unsigned dt = k->instrs[i].dtype;
        if (dt == KILN_BOOL)
            x = LLVMBuildZExt(b, x, g->t_i8, "");
        LLVMBuildStore(b, x, LLVMBuildGEP2(b, kl_type(g, dt), tmp[p->slot[i]],
                                           &lc.j, 1, ""));
    }
    if (last_seg) {
        for (uint32_t j = 0; j < k->n_outputs; j++) {
            kl_avail(g, &lc, stamp, tmp, k->out_refs[j], q);
            if (k->out_index && k->out_index[j] >= 0)
                kl_avail(g, &lc, stamp, tmp, k->out_index[j], q);
        }
        kl_emit_outputs(g, &lc, mode, strided, acc, acc2);
    }
    LLVMValueRef j1 = LLVMBuildAdd(b, lc.j, LLVMConstInt(g->t_i64, 1, 0), "");
    LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(b);
    LLVMValueRef latch = LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j1, m, ""),
                                         loop, exit);
    kl_loop_md(g, latch, strided, last_seg ? mode : KL_EW);
    LLVMValueRef in_j[2] = {zero, j1};
    LLVMBasicBlockRef in_b[2] = {entry, loop_end};
    LLVMAddIncoming(lc.j, in_j, in_b, 2);
    for (uint32_t j = 0; j < no; j++) {
        if (!acc[j])
            continue;
        LLVMValueRef in_a[2] = {acc0[j], acc2[j]};
        LLVMAddIncoming(acc[j], in_a, in_b, 2);
    }
    LLVMPositionBuilderAtEnd(b, exit);
    for (uint32_t j = 0; j < no; j++) {
        if (!acc[j])
            continue;
        LLVMValueRef r = acc2[j];
        if (k->outputs[j].dtype == KILN_BOOL)
            r = LLVMBuildZExt(b, r, g->t_i8, "");
        LLVMBuildStore(b, r, accm[j]);
    }
    LLVMBuildRetVoid(b);
    free(acc0);
    free(accm);
    free(acc);
    free(acc2);
    return fn;
}

/* Accumulator j at byte 8 j of dst, for every output with one: from
 * src (the same layout), or its identity when src is NULL. */
static void kl_acc_copy(kl_cg *g, LLVMValueRef dst, LLVMValueRef src)
{
    const kiln_kernel *k = g->k;
    LLVMBuilderRef b = g->b;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        unsigned odt = k->outputs[j].dtype;
        unsigned accdt = odt == KILN_F32 ? KILN_F64 : odt;
        if (!kl_has_acc(k, KL_RSCALAR, j))
            continue;
        LLVMTypeRef pt = LLVMPointerType(kl_type(g, accdt), 0);
        LLVMValueRef off = LLVMConstInt(g->t_i64, 8ull * j, 0);
        LLVMValueRef x;
        if (src) {
            x = LLVMBuildLoad2(b, kl_type(g, accdt), LLVMBuildBitCast(
                                   b, LLVMBuildGEP2(b, g->t_i8, src, &off, 1, ""),
                                   pt, ""), "");
        } else {
            x = kl_identity(g, accdt, k->reduce_op);
            if (accdt == KILN_BOOL)
                x = LLVMBuildZExt(b, x, g->t_i8, "");
        }
        LLVMBuildStore(b, x, LLVMBuildBitCast(
                           b, LLVMBuildGEP2(b, g->t_i8, dst, &off, 1, ""), pt, ""));
    }
}

/* A segmented row function: strips of plan->strip elements, each run
 * by one call per segment. */
static void kl_emit_fn_seg(kl_cg *g, const char *name, int mode, int strided)
{
    const kiln_kernel *k = g->k;
    const kl_plan *p = g->plan;
    LLVMBuilderRef b = g->b;
    uint32_t nv = k->n_inputs + k->n_outputs;
    int64_t *slot_off = calloc(p->nslots + 1, sizeof *slot_off);
    LLVMValueRef *segfn = calloc(p->nseg, sizeof *segfn);
    g->seg_base = calloc(nv, sizeof *g->seg_base);
    g->seg_stride = calloc(nv, sizeof *g->seg_stride);
    g->seg_val = calloc(k->n_instrs, sizeof *g->seg_val);
    g->seg_stamp = calloc(k->n_instrs, sizeof *g->seg_stamp);
    g->seg_vmark = calloc(nv, sizeof *g->seg_vmark);
    g->seg_tmp = calloc(p->nslots + 1, sizeof *g->seg_tmp);
    g->seg_tst = calloc(nv, sizeof *g->seg_tst);
    g->seg_tsize = calloc(nv, sizeof *g->seg_tsize);
    int64_t bytes = 0;
    for (uint32_t t = 0; t < p->nslots; t++) {
        slot_off[t] = bytes;
        bytes += (p->strip * (int64_t)kiln_interp_dtype_size(p->slot_dt[t]) + 63) & ~(int64_t)63;
    }
    uint32_t from = 0;
    for (uint32_t q = 0; q < p->nseg; q++) {
        segfn[q] = kl_emit_seg(g, name, q, from, slot_off, mode, strided);
        from = p->end[q];
    }
    free(g->seg_base);
    free(g->seg_stride);
    free(g->seg_val);
    free(g->seg_stamp);
    free(g->seg_vmark);
    free(g->seg_tmp);
    free(g->seg_tst);
    free(g->seg_tsize);

    LLVMValueRef fn = kl_add_fn(g, name);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
    LLVMBasicBlockRef strip = LLVMAppendBasicBlockInContext(g->ctx, fn, "strip");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "exit");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef n = LLVMGetParam(fn, 0), ptrs = LLVMGetParam(fn, 1),
                 st = LLVMGetParam(fn, 2), rt = LLVMGetParam(fn, 3),
                 accp = LLVMGetParam(fn, 4);
    LLVMValueRef tmpa = LLVMBuildArrayAlloca(b, g->t_i8, LLVMConstInt(
                                                 g->t_i64, (unsigned long long)(bytes ? bytes : 1), 0), "");
    LLVMSetAlignment(tmpa, 64);
    /* the accumulators: 8 bytes per output, from their identities */
    LLVMValueRef accs8 = LLVMConstNull(g->t_p8);
    if (mode == KL_RSCALAR) {
        accs8 = LLVMBuildArrayAlloca(b, g->t_i64, LLVMConstInt(
                                         g->t_i64, k->n_outputs, 0), "");
        accs8 = LLVMBuildBitCast(b, accs8, g->t_p8, "");
        kl_acc_copy(g, accs8, NULL);
    }
    LLVMValueRef zero = LLVMConstInt(g->t_i64, 0, 0);
    LLVMValueRef S = LLVMConstInt(g->t_i64, (unsigned long long)p->strip, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, ""), strip, exit);
    LLVMPositionBuilderAtEnd(b, strip);
    LLVMValueRef s0 = LLVMBuildPhi(b, g->t_i64, "s");
    LLVMValueRef rem = LLVMBuildSub(b, n, s0, "");
    LLVMValueRef m = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, rem, S, ""),
                                     rem, S, "");
    for (uint32_t q = 0; q < p->nseg; q++) {
        LLVMValueRef args[7] = {m, ptrs, st, rt, tmpa, s0, accs8};
        LLVMBuildCall2(b, g->t_seg, segfn[q], args, 7, "");
    }
    LLVMValueRef s1 = LLVMBuildAdd(b, s0, m, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, s1, n, ""), strip, exit);
    LLVMValueRef in_s[2] = {zero, s1};
    LLVMBasicBlockRef in_sb[2] = {entry, strip};
    LLVMAddIncoming(s0, in_s, in_sb, 2);
    LLVMPositionBuilderAtEnd(b, exit);
    if (mode == KL_RSCALAR)
        kl_acc_copy(g, accp, accs8);
    LLVMBuildRetVoid(b);
    free(slot_off);
    free(segfn);
}

#endif /* !KL_FRONT */
