/*
 * lower.c — graph → kernels (prefix kiln_lower_).
 *
 * Each node becomes one kernel, or a short fixed sequence (logsumexp:
 * max, shifted sum of exp, log; set_subtensor: copy, then an update in
 * place).  Elementwise nodes become a scalar program over their inputs;
 * literals become immediates (KILN_I_CONST), so they never take a buffer
 * and their values are part of the kernel description.  Shape ops become
 * copies whose input view does the work (see lower.h) or, with fusion on
 * and only readers that read them as views, no kernel at all: the
 * readers read the source through the chain of views (plan_views).
 *
 * After lowering, buffers get storage slots by liveness: a temporary
 * takes a free slot at the step that first writes it and gives it back
 * after the last step that touches it; graph outputs are never given
 * back.  Slots grow to the largest buffer they hold at call time, so a
 * steady-state call allocates nothing.
 */
#include "lower.h"
#include "fuse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lower_all(kiln_graph *g, kiln_program *p, kiln_err *err);
static int result_buf(kiln_program *p, const kiln_graph *g, int v, int k,
                      const kiln_type *t, kiln_err *err);

/* ---- buffers ------------------------------------------------------- */

static int type_static(const kiln_type *t)
{
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return 0;
    return 1;
}

static int add_buf(kiln_program *p, int kind, int node, const kiln_type *t,
                   kiln_err *err)
{
    if (p->n_bufs == p->cap_bufs) {
        int cap = p->cap_bufs ? 2 * p->cap_bufs : 64;
        kiln_buf *b = realloc(p->bufs, sizeof *b * (size_t)cap);
        if (!b)
            return -kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        p->bufs = b;
        p->cap_bufs = cap;
    }
    kiln_buf *b = &p->bufs[p->n_bufs];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->node = node;
    b->type = *t;
    b->is_static = type_static(t);
    b->op = -1;
    b->attrs = &kiln_ir_no_attrs;
    b->slot = -1;
    b->def_step = -1;
    b->last_step = -1;
    b->rank = t->rank;
    for (int i = 0; i < t->rank; i++)
        b->shape[i] = t->dims[i];
    return p->n_bufs++;
}

/* A temporary whose run-time shape is `op` with `attrs` over `ins`. */
static int add_temp(kiln_program *p, int node, const kiln_type *t, int op,
                    const kiln_attrs *attrs, int n_in, const int *ins,
                    kiln_err *err)
{
    int id = add_buf(p, KILN_BUF_TEMP, node, t, err);
    if (id < 0)
        return id;
    kiln_buf *b = &p->bufs[id];
    b->op = op;
    b->attrs = &kiln_ir_no_attrs;
    if (attrs) {
        b->attrs_owned = malloc(sizeof *b->attrs_owned);
        if (!b->attrs_owned)
            return -kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        *b->attrs_owned = *attrs;
        b->attrs = b->attrs_owned;
    }
    b->n_in = n_in;
    if (n_in > 0) {
        b->in_bufs = malloc(sizeof(int) * (size_t)n_in);
        if (!b->in_bufs)
            return -kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        memcpy(b->in_bufs, ins, sizeof(int) * (size_t)n_in);
    }
    return id;
}

/* ---- steps ---------------------------------------------------------- */

static int emit(prog_builder *pb, int op, kiln_dtype dt, int a, int b, int c,
                double imm)
{
    if (pb->n == pb->cap) {
        int cap = pb->cap ? 2 * pb->cap : 16;
        kiln_instr *p = realloc(pb->ins, sizeof *p * (size_t)cap);
        if (!p)
            return -1;
        pb->ins = p;
        pb->cap = cap;
    }
    kiln_instr *i = &pb->ins[pb->n];
    memset(i, 0, sizeof *i);
    i->op = (uint16_t)op;
    i->dtype = (uint8_t)dt;
    i->a = a;
    i->b = b;
    i->c = c;
    i->imm = imm;
    return pb->n++;
}

/* Cast instruction `r` (of dtype `have`) to `want` when they differ. */
int kiln_lower_emit(prog_builder *pb, int op, kiln_dtype dt, int a, int b,
                    int c, double imm)
{
    return emit(pb, op, dt, a, b, c, imm);
}

static int emit_cast(prog_builder *pb, int r, kiln_dtype have, kiln_dtype want)
{
    if (r < 0 || have == want)
        return r;
    return emit(pb, KILN_I_CAST, want, r, -1, -1, 0);
}

/* An n-ary add/mul over operands ops[lo..hi) as a balanced tree (the
 * order core/rewrite/pairwise.c gives the graph): depth ceil(log2 n),
 * pairwise summation's error bound. */
static int emit_pairwise(prog_builder *pb, int opcode, kiln_dtype dt,
                         const int *ops, int lo, int hi)
{
    if (hi - lo == 1)
        return ops[lo];
    int mid = lo + (hi - lo) / 2;
    int a = emit_pairwise(pb, opcode, dt, ops, lo, mid);
    int b = a >= 0 ? emit_pairwise(pb, opcode, dt, ops, mid, hi) : -1;
    return b >= 0 ? emit(pb, opcode, dt, a, b, -1, 0) : -1;
}

static kiln_step *new_step(kiln_program *p, int kind, int node, int n_in,
                           int n_out, const char *label, kiln_err *err)
{
    if (p->n_steps == p->cap_steps) {
        int cap = p->cap_steps ? 2 * p->cap_steps : 64;
        kiln_step *s = realloc(p->steps, sizeof *s * (size_t)cap);
        if (!s) {
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            return NULL;
        }
        p->steps = s;
        p->cap_steps = cap;
    }
    kiln_step *s = &p->steps[p->n_steps];
    memset(s, 0, sizeof *s);
    s->node = node;
    p->n_steps++;
    if (kiln_lower_step_args(s, n_in, n_out)) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    snprintf(s->label, sizeof s->label, "%s", label);
    s->kernel.struct_size = sizeof(kiln_kernel);
    s->kernel.kind = (uint32_t)kind;
    s->kernel.label = s->label;
    return s;
}

int kiln_lower_step_args(kiln_step *s, int n_in, int n_out)
{
    /* the six per-argument arrays are one allocation (s->in owns it): a
     * 10,000-input join lowers to 10,000 steps, and six small callocs
     * each were a fifth of the lowering */
    size_t ni = (size_t)(n_in ? n_in : 1), no = (size_t)(n_out ? n_out : 1);
    size_t sz[6] = {ni * sizeof *s->in, no * sizeof *s->out,
                    ni * sizeof *s->in_desc, no * sizeof *s->out_desc,
                    ni * sizeof *s->vin, no * sizeof *s->vout};
    size_t off[6], total = 0;
    for (int i = 0; i < 6; i++) {
        off[i] = total;
        total += (sz[i] + 15) & ~(size_t)15;
    }
    char *block = calloc(1, total);
    if (!block)
        return -1;
    s->in = (kiln_arg *)(void *)(block + off[0]);
    s->out = (kiln_arg *)(void *)(block + off[1]);
    s->in_desc = (kiln_arg_desc *)(void *)(block + off[2]);
    s->out_desc = (kiln_arg_desc *)(void *)(block + off[3]);
    s->vin = (kiln_view *)(void *)(block + off[4]);
    s->vout = (kiln_view *)(void *)(block + off[5]);
    s->n_in = n_in;
    s->n_out = n_out;
    s->kernel.n_inputs = (uint32_t)n_in;
    s->kernel.n_outputs = (uint32_t)n_out;
    s->kernel.inputs = s->in_desc;
    s->kernel.outputs = s->out_desc;
    return 0;
}

static int buf_chain(const kiln_program *p, int buf);

static void set_arg(kiln_program *p, kiln_step *s, int is_out, int k,
                    int buf, int recipe, int view_rank)
{
    kiln_arg *a = is_out ? &s->out[k] : &s->in[k];
    kiln_arg_desc *d = is_out ? &s->out_desc[k] : &s->in_desc[k];
    /* a shape op read in place: its source buffer through the chain of
     * views (the description is the shape op's: same dtype, the rank of
     * the view) */
    a->chain = is_out ? 0 : buf_chain(p, buf);
    if (a->chain)
        buf = p->vsteps[a->chain - 1].root;
    a->buf = buf;
    a->recipe = recipe;
    a->aux[0] = a->aux[1] = -1;
    d->dtype = (uint8_t)p->bufs[buf].type.dtype;
    d->rank = (uint8_t)view_rank;
    int step = (int)(s - p->steps);
    kiln_buf *b = &p->bufs[buf];
    if (is_out && b->def_step < 0)
        b->def_step = step;
    if (b->last_step < step)
        b->last_step = step;
}

static int attach_program(kiln_step *s, prog_builder *pb, const int *outs,
                          kiln_err *err)
{
    s->instrs = pb->ins;
    pb->ins = NULL;
    s->out_refs = malloc(sizeof(int32_t) * (size_t)(s->n_out ? s->n_out : 1));
    if (!s->out_refs)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->n_out; i++)
        s->out_refs[i] = outs[i];
    s->kernel.n_instrs = (uint32_t)pb->n;
    s->kernel.instrs = s->instrs;
    s->kernel.out_refs = s->out_refs;
    return 0;
}

/* s->members: the names of the graph nodes step s computes (nodes[0..n)
 * and `extra` when >= 0), for kiln explain: unnamed nodes by the tN that
 * kiln_graph_print gives them (tnames; `kiln explain --passes` prints the
 * graph), else %N (N: the node's index).  All of them: linear in the
 * kernel's size (kiln explain's table shows the first 64). */
static void set_members(kiln_step *s, const kiln_graph *g, const int *nodes,
                        int n, int extra, const int *tnames)
{
    int total = n + (extra >= 0);
    s->n_members = total;
    free(s->members);
    s->members = NULL;
    if (total < 2)
        return;
    size_t cap = 64, len = 0;
    char *t = malloc(cap);
    for (int k = 0; t && k < total; k++) {
        int v = k < n ? nodes[k] : extra;
        char one[96];
        const char *nm = g->nodes[v].name;
        int m = nm ? snprintf(one, sizeof one, "%s%.80s", k ? ", " : "", nm)
                : tnames && tnames[v] >= 0
                    ? snprintf(one, sizeof one, "%st%d", k ? ", " : "",
                               tnames[v])
                    : snprintf(one, sizeof one, "%s%%%d", k ? ", " : "", v);
        if (m < 0)
            m = 0;
        if (len + (size_t)m + 32 > cap) {
            while (len + (size_t)m + 32 > cap)
                cap *= 2;
            char *u = realloc(t, cap);
            if (!u) {
                free(t);
                t = NULL;
                break;
            }
            t = u;
        }
        memcpy(t + len, one, (size_t)m + 1);
        len += (size_t)m;
    }
    s->members = t;   /* NULL when out of memory: explain shows none */
}

/* ---- elementwise ---------------------------------------------------- */

/* Lowering state shared by every kernel of one kiln_lower_ex call, so that
 * per-kernel work stays linear in the kernel's size (design invariant 1):
 * a buffer -> argument-slot map, and the fusion groups. */
typedef struct fuse_frame {
    int node, next;
} fuse_frame;

typedef struct kiln_lower_scratch {
    int *buf_slot;     /* buffer -> slot in the kernel being built, -1 */
    int buf_slot_cap;
    /* fusion (kiln_lower_opts.fuse; core/lower/fuse.c) */
    kiln_fusion fu;    /* the plan */
    int *uses;         /* live readers of each node (lower_all) */
    int *tnames;       /* kiln_graph_temp_names, for explain's members */
    int *buf_alias;    /* buffer -> the buffer that replaced it, or -1
                          (an update in place); n_alias entries (the
                          graph nodes' buffers) */
    int n_alias;
    char *isout;       /* graph outputs */
    int *group;        /* fu.group, or NULL when fusion is off */
    int *instr;        /* node -> its instruction in the program being
                          built, -1 */
    int *done;         /* members emitted into the current program */
    int n_done, cap_done;
    char *inloop;      /* node -> 1 while its loop is being lowered */
    int *where;        /* node -> its position in the lowering order */
    /* shape ops read in place (plan_views): node -> 1, and buffer -> 1 +
     * its view step in prog->vsteps (0: a buffer of its own) */
    char *asview;
    int *vstep_of;
    int n_vof;
    fuse_frame *stk;
    int cap_stk;
} kiln_lower_scratch;

/* Operand of an elementwise program: an immediate for a literal node,
 * else a LOAD of the argument slot given to that buffer (each distinct
 * buffer is loaded once, so mul(x, x) has one input), or, for a member of
 * the fused group being built, the member's instruction. */
typedef struct ew_ctx {
    kiln_program *p;
    kiln_graph *g;
    prog_builder pb;
    int bufs[KILN_MAX_RANK * 4];
    int *dyn;          /* when more inputs than the small array holds */
    int n, cap;
    int *load_of;      /* per arg slot: its LOAD instruction */
    int load_literals; /* literals with a buffer are loaded, not inlined */
    int root;          /* fused group being built (its root node), -1 */
    int loop;          /* a loop is being built: members are inloop[] */
    char *table;       /* per arg slot: 1 for a TABLE (LOOP) */
    const int *fixed;  /* kiln_lower_emit_scalar_node: node -> its
                          instruction (every operand has one) */
} ew_ctx;

static int nomem(kiln_err *err)
{
    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
}

/* A new argument slot for buffer `buf` (its LOAD is the caller's). */
static int ew_new_slot(ew_ctx *c, int buf, kiln_err *err)
{
    kiln_lower_scratch *sc = c->p->scr;
    if (buf >= sc->buf_slot_cap) {
        int cap = sc->buf_slot_cap ? sc->buf_slot_cap : 64;
        while (cap <= buf)
            cap *= 2;
        int *m = realloc(sc->buf_slot, sizeof(int) * (size_t)cap);
        if (!m)
            return -nomem(err);
        for (int i = sc->buf_slot_cap; i < cap; i++)
            m[i] = -1;
        sc->buf_slot = m;
        sc->buf_slot_cap = cap;
    }
    if (c->n == c->cap) {
        int cap = c->cap * 2;
        int *d = malloc(sizeof(int) * (size_t)cap);
        int *l = realloc(c->load_of, sizeof(int) * (size_t)cap);
        if (l)
            c->load_of = l;
        char *t = realloc(c->table, (size_t)cap);
        if (t)
            c->table = t;
        if (!d || !l || !t) {
            free(d);
            return -nomem(err);
        }
        memcpy(d, c->dyn ? c->dyn : c->bufs, sizeof(int) * (size_t)c->n);
        free(c->dyn);
        c->dyn = d;
        c->cap = cap;
    }
    int slot = c->n++;
    (c->dyn ? c->dyn : c->bufs)[slot] = buf;
    c->load_of[slot] = -1;
    c->table[slot] = 0;
    /* the first slot of a buffer is the one operands find */
    if (sc->buf_slot[buf] < 0)
        sc->buf_slot[buf] = slot;
    return slot;
}

static int is_member(const ew_ctx *c, kiln_value v)
{
    if (c->loop)
        return c->p->scr->inloop[v];
    return c->root >= 0 && c->p->scr->group &&
           c->p->scr->group[v] == c->root;
}

static int emit_tree(ew_ctx *c, kiln_value top, kiln_err *err);

static int ew_operand(ew_ctx *c, kiln_value v, kiln_dtype want, kiln_err *err)
{
    kiln_node *n = &c->g->nodes[v];
    if (is_member(c, v)) {
        int r = c->p->scr->instr[v];
        if (r < 0)
            r = emit_tree(c, v, err);
        return r < 0 ? -1 : emit_cast(&c->pb, r, n->type.dtype, want);
    }
    if (n->op == KILN_OP_LITERAL &&
        !(c->load_literals && c->p->node_buf[v] >= 0))
        return emit(&c->pb, KILN_I_CONST, want, -1, -1, -1, n->value);
    if (c->fixed)
        return emit_cast(&c->pb, c->fixed[v], n->type.dtype, want);
    int buf = c->p->node_buf[v];
    kiln_lower_scratch *sc = c->p->scr;
    int slot = buf < sc->buf_slot_cap ? sc->buf_slot[buf] : -1;
    if (slot < 0) {
        slot = ew_new_slot(c, buf, err);
        if (slot < 0)
            return -1;
        c->load_of[slot] = emit(&c->pb, KILN_I_LOAD, n->type.dtype, slot, -1,
                                -1, 0);
        if (c->load_of[slot] < 0)
            return -1;
    }
    return emit_cast(&c->pb, c->load_of[slot], n->type.dtype, want);
}

static int ew_init(ew_ctx *c, kiln_program *p, kiln_graph *g, kiln_err *err)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->g = g;
    c->root = -1;
    c->cap = (int)(sizeof c->bufs / sizeof c->bufs[0]);
    c->load_of = malloc(sizeof(int) * (size_t)c->cap);
    c->table = malloc((size_t)c->cap);
    p->scr->n_done = 0;
    if (!c->load_of || !c->table)
        return nomem(err);
    return 0;
}

/* Forget the slots and the members' instructions (the scratch maps are
 * shared by every kernel: reset only what this one set). */
static void ew_reset(ew_ctx *c)
{
    kiln_lower_scratch *sc = c->p->scr;
    int *arr = c->dyn ? c->dyn : c->bufs;
    for (int i = 0; i < c->n; i++)
        if (arr[i] >= 0 && arr[i] < sc->buf_slot_cap)
            sc->buf_slot[arr[i]] = -1;
    for (int i = 0; i < sc->n_done; i++)
        sc->instr[sc->done[i]] = -1;
    sc->n_done = 0;
}

static void ew_free(ew_ctx *c)
{
    ew_reset(c);
    free(c->pb.ins);
    free(c->dyn);
    free(c->load_of);
    free(c->table);
}

/* Emit a step for program c with output buffer `out` (recipe `orec`) and
 * the collected inputs broadcast to the iteration shape. */
static int ew_finish(ew_ctx *c, int kind, int node, const char *label,
                     int out_buf, int orec, const kiln_attrs *oattrs,
                     int result, int iter_rank, kiln_step **sp, kiln_err *err)
{
    kiln_step *s = new_step(c->p, kind, node, c->n, 1, label, err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    int *arr = c->dyn ? c->dyn : c->bufs;
    for (int i = 0; i < c->n; i++) {
        int rec = kind == KILN_KERNEL_REDUCE && i == 0 ? KILN_VIEW_FULL
                                                        : KILN_VIEW_BCAST;
        set_arg(c->p, s, 0, i, arr[i], rec, iter_rank);
    }
    /* the output view's rank: the iteration rank for a reduction and for
     * a slice of the output (set_subtensor), else the buffer's */
    set_arg(c->p, s, 1, 0, out_buf, orec,
            kind == KILN_KERNEL_REDUCE || orec == KILN_VIEW_SUBTENSOR
                ? iter_rank
                : c->p->bufs[out_buf].type.rank);
    s->out[0].attrs = oattrs;
    if (kind == KILN_KERNEL_REDUCE)
        s->iter_input = 1;
    if (attach_program(s, &c->pb, &result, err))
        return err ? err->code : KILN_ERR_NOMEM;
    if (sp)
        *sp = s;
    return 0;
}

/* A gather inside a loop (rank-1 table, axis 0): a TAKE of the table's
 * TABLE slot (one per table buffer, apart from any ITER slot of the same
 * buffer) at the index operand. */
static int emit_table_take(ew_ctx *c, int v, kiln_err *err)
{
    kiln_node *n = &c->g->nodes[v];
    int tb = c->p->node_buf[n->in[0]];
    int *arr = c->dyn ? c->dyn : c->bufs;
    int slot = -1;
    for (int i = 0; i < c->n && slot < 0; i++)
        if (c->table[i] && arr[i] == tb)
            slot = i;
    if (slot < 0) {
        /* a TABLE slot is not the one ew_operand finds for the buffer */
        kiln_lower_scratch *sc = c->p->scr;
        int had = tb < sc->buf_slot_cap ? sc->buf_slot[tb] : -1;
        slot = ew_new_slot(c, tb, err);
        if (slot < 0)
            return -1;
        c->table[slot] = 1;
        if (had < 0)
            sc->buf_slot[tb] = -1;
    }
    kiln_dtype it = c->g->nodes[n->in[1]].type.dtype;
    int idx = ew_operand(c, n->in[1], it, err);
    return idx < 0 ? -1 : emit(&c->pb, KILN_I_TAKE, n->type.dtype, slot, idx,
                               -1, 0);
}

/* The instructions of elementwise node v (its operands through
 * ew_operand); returns the result instruction or -1. */
static int emit_lowered(prog_builder *pb, int op, kiln_dtype cd,
                        const int *ops);

static int emit_node(ew_ctx *c, int v, kiln_err *err)
{
    kiln_graph *g = c->g;
    kiln_node *n = &g->nodes[v];
    const kiln_op_info *info = kiln_ir_op_info(n->op);
    int r = -1;
    kiln_dtype od = n->type.dtype;
    if (n->op == KILN_OP_TAKE)
        return emit_table_take(c, v, err);
    if (n->op == KILN_OP_CAST) {
        kiln_dtype in_dt = g->nodes[n->in[0]].type.dtype;
        r = ew_operand(c, n->in[0], in_dt, err);
        r = emit_cast(&c->pb, r, in_dt, od);  /* identity: a plain copy */
    } else if (n->op == KILN_OP_FILL) {
        /* the model only gives the shape: load nothing of it */
        r = ew_operand(c, n->in[1], od, err);
    } else if (n->op == KILN_OP_WHERE) {
        int a = ew_operand(c, n->in[0], KILN_BOOL, err);
        int b = a >= 0 ? ew_operand(c, n->in[1], od, err) : -1;
        int d = b >= 0 ? ew_operand(c, n->in[2], od, err) : -1;
        if (d >= 0)
            r = emit(&c->pb, KILN_I_WHERE, od, a, b, d, 0);
    } else {
        /* the dtype the op computes in */
        kiln_dtype cd;
        if (n->op == KILN_OP_AND || n->op == KILN_OP_OR ||
            n->op == KILN_OP_NOT) {
            cd = KILN_BOOL;
        } else {
            kiln_dtype pd = g->nodes[n->in[0]].type.dtype;
            int pw = g->nodes[n->in[0]].weak;
            for (int i = 1; i < n->n_in; i++) {
                kiln_node *m = &g->nodes[n->in[i]];
                pd = kiln_ir_promote(pd, pw, m->type.dtype, m->weak);
                pw = pw && m->weak;
            }
            cd = kiln_ir_compute_dtype(n->op, pd);
        }
        int small[3] = {-1, -1, -1};
        int *ops = small;
        if (n->n_in > 3 && !(ops = malloc(sizeof(int) * (size_t)n->n_in))) {
            nomem(err);
            return -1;
        }
        int ok = 1;
        for (int i = 0; i < n->n_in && ok; i++) {
            ops[i] = ew_operand(c, n->in[i], cd, err);
            ok = ops[i] >= 0;
        }
        if (ok && info->opcode < 0)   /* lowered to other opcodes */
            r = emit_lowered(&c->pb, n->op, cd, ops);
        else if (ok && n->n_in > 2 &&
                 (n->op == KILN_OP_ADD || n->op == KILN_OP_MUL))
            /* n-ary add/mul (core/rewrite) */
            r = emit_pairwise(&c->pb, info->opcode, od, ops, 0, n->n_in);
        else if (ok)
            r = emit(&c->pb, info->opcode, od, ops[0], ops[1], ops[2], 0);
        if (ops != small)
            free(ops);
    }
    if (r < 0 && !(err && err->code))
        nomem(err);
    return r;
}

int kiln_lower_emit_scalar_node(prog_builder *pb, kiln_graph *g, int v,
                                const int *instr_of, kiln_err *err)
{
    ew_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.root = -1;
    c.pb = *pb;
    c.fixed = instr_of;
    int r = g->nodes[v].op == KILN_OP_TAKE ? -1 : emit_node(&c, v, err);
    *pb = c.pb;
    if (r < 0 && g->nodes[v].op == KILN_OP_TAKE)
        kiln_seterr(err, KILN_ERR_TYPE, "take in a scalar program");
    return r;
}

/* issue 25's ops without an opcode, from operands ops[] of dtype cd:
 *   isnan(x)  = x != x                       (false for ints, bool)
 *   isinf(x)  = |x| == inf                   (false for ints, bool)
 *   sign(x)   = x > 0 ? 1 : x < 0 ? -1 : x   (NaN and +-0 stay)
 *   clip(x, lo, hi) = x < lo ? lo : x > hi ? hi : x   (PyTensor's Clip)
 */
static int emit_lowered(prog_builder *pb, int op, kiln_dtype cd,
                        const int *ops)
{
    int fl = cd == KILN_F64 || cd == KILN_F32;
    switch (op) {
    case KILN_OP_ISNAN:
        return fl ? emit(pb, KILN_I_NE, KILN_BOOL, ops[0], ops[0], -1, 0)
                  : emit(pb, KILN_I_CONST, KILN_BOOL, -1, -1, -1, 0);
    case KILN_OP_ISINF: {
        if (!fl)
            return emit(pb, KILN_I_CONST, KILN_BOOL, -1, -1, -1, 0);
        int a = emit(pb, KILN_I_ABS, cd, ops[0], -1, -1, 0);
        int inf = a >= 0 ? emit(pb, KILN_I_CONST, cd, -1, -1, -1, INFINITY)
                         : -1;
        return inf >= 0 ? emit(pb, KILN_I_EQ, KILN_BOOL, a, inf, -1, 0) : -1;
    }
    case KILN_OP_SIGN: {
        int zero = emit(pb, KILN_I_CONST, cd, -1, -1, -1, 0);
        int one = zero >= 0 ? emit(pb, KILN_I_CONST, cd, -1, -1, -1, 1) : -1;
        int m1 = one >= 0 ? emit(pb, KILN_I_CONST, cd, -1, -1, -1, -1) : -1;
        int gt = m1 >= 0 ? emit(pb, KILN_I_GT, KILN_BOOL, ops[0], zero, -1, 0)
                         : -1;
        int lt = gt >= 0 ? emit(pb, KILN_I_LT, KILN_BOOL, ops[0], zero, -1, 0)
                         : -1;
        int w = lt >= 0 ? emit(pb, KILN_I_WHERE, cd, lt, m1, ops[0], 0) : -1;
        return w >= 0 ? emit(pb, KILN_I_WHERE, cd, gt, one, w, 0) : -1;
    }
    case KILN_OP_CLIP: {
        int lt = emit(pb, KILN_I_LT, KILN_BOOL, ops[0], ops[1], -1, 0);
        int gt = lt >= 0 ? emit(pb, KILN_I_GT, KILN_BOOL, ops[0], ops[2], -1, 0)
                         : -1;
        int w = gt >= 0 ? emit(pb, KILN_I_WHERE, cd, gt, ops[2], ops[0], 0)
                        : -1;
        return w >= 0 ? emit(pb, KILN_I_WHERE, cd, lt, ops[1], w, 0) : -1;
    }
    default:
        return -1;
    }
}

/* Emit member `top` of the group being built after the members it reads
 * (post-order, iteratively: a group may be deep), recording each one's
 * instruction.  Inputs are numbered by first use in this walk, which
 * depends only on the group's expression DAG: keys stay canonical. */
static int emit_tree(ew_ctx *c, kiln_value top, kiln_err *err)
{
    kiln_lower_scratch *sc = c->p->scr;
    int sp = 0;
    if (sc->cap_stk < 16) {
        fuse_frame *f = realloc(sc->stk, sizeof *f * 16);
        if (!f) {
            nomem(err);
            return -1;
        }
        sc->stk = f;
        sc->cap_stk = 16;
    }
    sc->stk[sp++] = (fuse_frame){top, 0};
    while (sp > 0) {
        fuse_frame *fr = &sc->stk[sp - 1];
        kiln_node *n = &c->g->nodes[fr->node];
        if (n->op == KILN_OP_FILL && fr->next == 0)
            fr->next = 1;  /* the model is not read */
        if (fr->next < n->n_in) {
            kiln_value w = n->in[fr->next++];
            if (is_member(c, w) && sc->instr[w] < 0) {
                if (sp == sc->cap_stk) {
                    fuse_frame *f = realloc(sc->stk, sizeof *f *
                                                         (size_t)(2 * sp));
                    if (!f) {
                        nomem(err);
                        return -1;
                    }
                    sc->stk = f;
                    sc->cap_stk = 2 * sp;
                }
                sc->stk[sp++] = (fuse_frame){w, 0};
            }
            continue;
        }
        int v = fr->node;
        int r = emit_node(c, v, err);
        if (r < 0)
            return -1;
        if (sc->n_done == sc->cap_done) {
            int cap = sc->cap_done ? 2 * sc->cap_done : 64;
            int *d = realloc(sc->done, sizeof(int) * (size_t)cap);
            if (!d) {
                nomem(err);
                return -1;
            }
            sc->done = d;
            sc->cap_done = cap;
        }
        sc->done[sc->n_done++] = v;
        sc->instr[v] = r;
        sp--;
    }
    return sc->instr[top];
}

static int lower_elemwise(kiln_program *p, kiln_graph *g, int v,
                          kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    const kiln_op_info *info = kiln_ir_op_info(n->op);
    ew_ctx c;
    if (ew_init(&c, p, g, err))
        return err ? err->code : KILN_ERR_NOMEM;
    int r;
    if (p->scr->group) {
        /* the root of a fused group (perhaps of itself alone) */
        c.root = v;
        r = emit_tree(&c, v, err);
    } else {
        r = emit_node(&c, v, err);
    }
    int rc;
    if (r < 0) {
        rc = err && err->code ? err->code : nomem(err);
    } else {
        int fused = c.root >= 0 && p->scr->n_done > 1;
        kiln_step *s = NULL;
        rc = ew_finish(&c, KILN_KERNEL_ELEMWISE, v,
                       fused ? "fused" : info->name, p->node_buf[v],
                       KILN_VIEW_FULL, NULL, r, n->type.rank, &s, err);
        if (!rc && fused) {
            set_members(s, g, p->scr->done, p->scr->n_done, -1, p->scr->tnames);
            s->split = p->scr->fu.split[v];
        }
    }
    ew_free(&c);
    return rc;
}

/* A region (core/lower/fuse.c): one ELEMWISE kernel over the members' common
 * shape whose outputs are the members read outside it, in node order;
 * members feed each other as instructions.  Inputs are numbered by first use,
 * outputs by node order: both depend only on the region's expression DAG, so
 * two models with the same region share its key. */
static int lower_region(kiln_program *p, kiln_graph *g, int root, int last,
                        kiln_err *err)
{
    kiln_lower_scratch *sc = p->scr;
    const kiln_fusion *fu = &sc->fu;
    /* the members: the region's nodes are contiguous in the plan's order
     * and the root, at `last`, is the last */
    int first = last;
    while (first > 0 && fu->group[fu->order[first - 1]] == root)
        first--;
    int n_out = 0;
    for (int k = first; k <= last; k++)
        n_out += fu->ext[fu->order[k]] != 0;
    int *outs = malloc(sizeof(int) * 2 * (size_t)n_out);
    ew_ctx c;
    if (!outs || ew_init(&c, p, g, err)) {
        free(outs);
        return nomem(err);
    }
    int *obuf = outs + n_out;
    c.root = root;
    int rc = 0, j = 0;
    for (int k = first; k <= last && !rc; k++) {
        int m = fu->order[k];
        if (!fu->ext[m])
            continue;
        int r = sc->instr[m] >= 0 ? sc->instr[m] : emit_tree(&c, m, err);
        if (r < 0)
            rc = err && err->code ? err->code : nomem(err);
        outs[j] = r;
        obuf[j++] = p->node_buf[m];
    }
    int rank = g->nodes[root].type.rank;   /* every member's */
    kiln_step *s = rc ? NULL : new_step(p, KILN_KERNEL_ELEMWISE, root, c.n,
                                        n_out, rank ? "fused" : "fused_scalars",
                                        err);
    if (!rc && !s)
        rc = err ? err->code : KILN_ERR_NOMEM;
    if (!rc) {
        int *arr = c.dyn ? c.dyn : c.bufs;
        for (int i = 0; i < c.n; i++)
            set_arg(p, s, 0, i, arr[i], KILN_VIEW_BCAST, rank);
        for (int i = 0; i < n_out; i++)
            set_arg(p, s, 1, i, obuf[i], KILN_VIEW_FULL, rank);
        set_members(s, g, fu->order + first, last - first + 1, -1, sc->tnames);
        s->split = fu->split[root];
        rc = attach_program(s, &c.pb, outs, err);
    }
    ew_free(&c);
    free(outs);
    return rc;
}

/* A copy of node `src` into buffer `dst` through view recipe `rec` of the
 * source (and `orec` of the destination), casting to dst's dtype.  Used
 * by every shape op and by set_subtensor. */
static int lower_copy(kiln_program *p, kiln_graph *g, int node, int src,
                      int rec, int dst, int orec, const kiln_attrs *attrs,
                      const char *label, kiln_err *err)
{
    ew_ctx c;
    if (ew_init(&c, p, g, err))
        return err ? err->code : KILN_ERR_NOMEM;
    kiln_dtype od = p->bufs[dst].type.dtype;
    int r = ew_operand(&c, src, od, err);
    int rc;
    if (r < 0) {
        rc = err && err->code ? err->code : KILN_ERR_NOMEM;
        ew_free(&c);
        return rc;
    }
    kiln_step *s;
    int iter_rank = p->bufs[dst].type.rank;
    if (orec == KILN_VIEW_SUBTENSOR) {
        /* region rank: the rank of the index result */
        iter_rank = 0;
        for (int i = 0; i < p->bufs[dst].type.rank; i++)
            if (i >= attrs->nidx || attrs->idx[i].kind == KILN_INDEX_SLICE)
                iter_rank++;
    }
    rc = ew_finish(&c, KILN_KERNEL_ELEMWISE, node, label, dst, orec, attrs, r,
                   iter_rank, &s, err);
    if (!rc && c.n == 1)
        s->in[0].recipe = rec == KILN_VIEW_RESHAPE && s->in[0].chain
                              ? KILN_VIEW_UNITS  /* expand_dims, squeeze */
                              : rec;
    if (!rc && c.n == 1 && rec == KILN_VIEW_TRANSPOSE) {
        kiln_node *n = &g->nodes[node];
        int rk = g->nodes[src].type.rank;
        for (int i = 0; i < rk; i++) {
            int64_t ax = n->attrs->has_axes ? n->attrs->axes[i] : rk - 1 - i;
            s->in[0].perm[i] = ax < 0 ? ax + rk : ax;
        }
    }
    if (!rc && c.n == 1 && rec == KILN_VIEW_SUBTENSOR)
        s->in[0].attrs = g->nodes[node].attrs;
    ew_free(&c);
    return rc;
}

/* ---- reductions ----------------------------------------------------- */

static void reduce_mask(const kiln_attrs *at, int rank, int64_t *mask)
{
    for (int i = 0; i < KILN_MAX_RANK; i++)
        mask[i] = at->has_axes ? 0 : 1;
    for (int i = 0; at->has_axes && i < at->naxes; i++) {
        int64_t a = at->axes[i] < 0 ? at->axes[i] + rank : at->axes[i];
        mask[a] = 1;
    }
}

/* A REDUCE kernel's iteration space is its input 0's view: move the
 * first loaded buffer of exactly type t (in slot order: deterministic, so
 * keys stay canonical) to slot 0 and renumber the LOADs.  Returns 0, or
 * -1 when no loaded buffer has type t. */
static int slot0_of_type(ew_ctx *c, const kiln_type *t)
{
    int *arr = c->dyn ? c->dyn : c->bufs;
    int k = -1;
    for (int i = 0; i < c->n && k < 0; i++) {
        const kiln_type *u = &c->p->bufs[arr[i]].type;
        if (buf_chain(c->p, arr[i]) || c->table[i])
            continue;   /* a shape op read in place (input 0 stays a
                           buffer as it is), or a LOOP's table */
        if (u->rank == t->rank &&
            !memcmp(u->dims, t->dims, sizeof(int64_t) * (size_t)t->rank))
            k = i;
    }
    if (k < 0)
        return -1;
    int b0 = arr[k], l0 = c->load_of[k];
    char t0 = c->table[k];
    for (int i = k; i > 0; i--) {
        arr[i] = arr[i - 1];
        c->load_of[i] = c->load_of[i - 1];
        c->table[i] = c->table[i - 1];
    }
    arr[0] = b0;
    c->load_of[0] = l0;
    c->table[0] = t0;
    /* the slots before k move up one, k becomes 0 (LOADs and TAKEs name
     * slots) */
    for (int i = 0; k > 0 && i < c->pb.n; i++) {
        kiln_instr *in = &c->pb.ins[i];
        if (in->op == KILN_I_LOAD || in->op == KILN_I_TAKE)
            in->a = in->a < k ? in->a + 1 : in->a == k ? 0 : in->a;
    }
    return 0;
}

static int reduce_step(kiln_program *p, kiln_graph *g, int node, int xnode,
                       int extra_buf, int rop, int out_buf,
                       const kiln_attrs *at, int keepdims, kiln_dtype od,
                       int shifted, kiln_err *err)
{
    ew_ctx c;
    if (ew_init(&c, p, g, err))
        return err ? err->code : KILN_ERR_NOMEM;
    kiln_node *x = &g->nodes[xnode];
    c.load_literals = 1;  /* the reduced operand defines the iteration */
    /* an elementwise chain fused into the reduction (core/lower/fuse.c) */
    int fused = p->scr->group && !shifted && p->scr->group[xnode] == node;
    if (fused)
        c.root = node;
    int r = ew_operand(&c, xnode, od, err);
    if (r >= 0 && fused) {
        /* input 0 defines the iteration shape: a loaded buffer of
         * exactly x's type */
        if (slot0_of_type(&c, &x->type)) {
            /* none (x broadcasts smaller inputs only): compute x as its
             * own fused elementwise kernel, then reduce it */
            kiln_lower_scratch *sc = p->scr;
            for (int i = 0; i < sc->n_done; i++)
                sc->group[sc->done[i]] = xnode;
            sc->group[xnode] = xnode;
            ew_free(&c);
            int rc = lower_elemwise(p, g, xnode, err);
            if (rc)
                return rc;
            return reduce_step(p, g, node, xnode, extra_buf, rop, out_buf, at,
                               keepdims, od, shifted, err);
        }
    }
    if (r >= 0 && shifted) {
        /* exp(x - m'), m' = m where m is finite, else 0, so that all -inf
         * (or an inf) input gives log(0) + 0 = -inf (or inf) */
        int slot = ew_new_slot(&c, extra_buf, err);
        int m = slot < 0 ? -1 : emit(&c.pb, KILN_I_LOAD, od, slot, -1, -1, 0);
        int am = emit(&c.pb, KILN_I_ABS, od, m, -1, -1, 0);
        int inf = emit(&c.pb, KILN_I_CONST, od, -1, -1, -1, INFINITY);
        int isinf = emit(&c.pb, KILN_I_EQ, KILN_BOOL, am, inf, -1, 0);
        int zero = emit(&c.pb, KILN_I_CONST, od, -1, -1, -1, 0);
        int mm = emit(&c.pb, KILN_I_WHERE, od, isinf, zero, m, 0);
        int d = emit(&c.pb, KILN_I_SUB, od, r, mm, -1, 0);
        r = m < 0 ? -1 : emit(&c.pb, KILN_I_EXP, od, d, -1, -1, 0);
    }
    int rc;
    if (r < 0) {
        rc = err && err->code ? err->code : KILN_ERR_NOMEM;
        ew_free(&c);
        return rc;
    }
    kiln_step *s;
    char label[48];
    snprintf(label, sizeof label, "%s%s", fused ? "fused_" : "",
             kiln_ir_op_info(g->nodes[node].op)->name);
    rc = ew_finish(&c, KILN_KERNEL_REDUCE, node, label, out_buf,
                   KILN_VIEW_REDUCE_OUT, NULL, r, x->type.rank, &s, err);
    if (!rc && fused)
        set_members(s, g, p->scr->done, p->scr->n_done, node, p->scr->tnames);
    if (!rc) {
        s->kernel.reduce_op = (uint32_t)rop;
        reduce_mask(at, x->type.rank, s->out[0].perm);
        for (int i = 0; i < x->type.rank; i++)
            if (s->out[0].perm[i])
                s->kernel.reduce_axes |= 1u << i;
        s->out[0].keepdims = keepdims;
    }
    ew_free(&c);
    return rc;
}

static int reduce_opcode(int op)
{
    switch (op) {
    case KILN_OP_SUM: return KILN_REDUCE_SUM;
    case KILN_OP_PROD: return KILN_REDUCE_PROD;
    case KILN_OP_MAX: return KILN_REDUCE_MAX;
    case KILN_OP_MIN: return KILN_REDUCE_MIN;
    case KILN_OP_MEAN: return KILN_REDUCE_MEAN;
    /* issue 25: over the operand cast to bool (x != 0), whose MIN is
     * "all" (identity true) and MAX "any" (identity false) */
    case KILN_OP_ALL: return KILN_REDUCE_MIN;
    case KILN_OP_ANY: return KILN_REDUCE_MAX;
    default: return -1;
    }
}

static int lower_reduce(kiln_program *p, kiln_graph *g, int v, kiln_err *err);

/* Sibling reductions (core/lower/fuse.c): the full reductions of the set that
 * starts at root `first` as one REDUCE kernel of several outputs, each
 * reduction's elementwise tree inside it.  Input 0 must be a loaded
 * buffer of the operands' shape (it gives the iteration space); when no
 * tree loads one, each reduction is lowered alone. */
static int lower_siblings(kiln_program *p, kiln_graph *g, int first,
                          kiln_err *err)
{
    kiln_lower_scratch *sc = p->scr;
    const kiln_fusion *fu = &sc->fu;
    int n_out = 0;
    for (int r = first; r >= 0; r = fu->sib_next[r])
        n_out++;
    int *outs = malloc(sizeof(int) * (size_t)n_out);
    ew_ctx c;
    if (!outs || ew_init(&c, p, g, err)) {
        free(outs);
        return nomem(err);
    }
    c.load_literals = 1;   /* the operands define the iteration */
    const kiln_type *xt = &g->nodes[g->nodes[first].in[0]].type;
    int rc = 0, j = 0, members = 0;
    for (int r = first; r >= 0 && !rc; r = fu->sib_next[r]) {
        c.root = r;
        int x = outs[j++] = ew_operand(&c, g->nodes[r].in[0],
                                       g->nodes[r].type.dtype, err);
        if (x < 0)
            rc = err && err->code ? err->code : nomem(err);
    }
    members = sc->n_done + n_out;
    /* input 0: a loaded buffer of exactly the operands' type */
    if (!rc && slot0_of_type(&c, xt)) {
        /* every operand broadcasts smaller inputs: one kernel each */
        ew_free(&c);
        free(outs);
        for (int r = first; r >= 0 && !rc; r = fu->sib_next[r])
            rc = lower_reduce(p, g, r, err);
        return rc;
    }
    int *arr = c.dyn ? c.dyn : c.bufs;
    char label[48];
    snprintf(label, sizeof label, "fused_%ss",
             kiln_ir_op_info(g->nodes[first].op)->name);
    kiln_step *s = rc ? NULL : new_step(p, KILN_KERNEL_REDUCE, first, c.n,
                                        n_out, label, err);
    if (!rc && !s)
        rc = err ? err->code : KILN_ERR_NOMEM;
    if (!rc) {
        for (int i = 0; i < c.n; i++)
            set_arg(p, s, 0, i, arr[i], i == 0 ? KILN_VIEW_FULL
                                               : KILN_VIEW_BCAST, xt->rank);
        j = 0;
        for (int r = first; r >= 0; r = fu->sib_next[r], j++) {
            const kiln_node *rn = &g->nodes[r];
            set_arg(p, s, 1, j, p->node_buf[r], KILN_VIEW_REDUCE_OUT, xt->rank);
            reduce_mask(rn->attrs, xt->rank, s->out[j].perm);
            s->out[j].keepdims = rn->attrs->keepdims;
        }
        s->iter_input = 1;
        s->kernel.reduce_op = (uint32_t)reduce_opcode(g->nodes[first].op);
        for (int i = 0; i < xt->rank; i++)
            if (s->out[0].perm[i])
                s->kernel.reduce_axes |= 1u << i;
        (void)members;
        /* the roots, then their trees' members */
        int *all = malloc(sizeof(int) * (size_t)(n_out + sc->n_done));
        if (all) {
            int m = 0;
            for (int r = first; r >= 0; r = fu->sib_next[r])
                all[m++] = r;
            if (sc->n_done)   /* done is NULL until a tree is emitted */
                memcpy(all + m, sc->done, sizeof(int) * (size_t)sc->n_done);
            set_members(s, g, all, m + sc->n_done, -1, sc->tnames);
            free(all);
        }
        rc = attach_program(s, &c.pb, outs, err);
    }
    ew_free(&c);
    free(outs);
    return rc;
}

static int lower_reduce(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    int ob = p->node_buf[v];
    kiln_dtype od = n->type.dtype;
    int rop = reduce_opcode(n->op);   /* -1: logsumexp */
    if (rop >= 0)
        return reduce_step(p, g, v, n->in[0], -1, rop, ob, n->attrs,
                           n->attrs->keepdims, od, 0, err);
    /* logsumexp: m = max(x, keepdims); s = sum(exp(x - m')); out = log(s)
     * + m', with temporaries m and s of the keepdims shape. */
    kiln_attrs kat = *n->attrs;
    kat.keepdims = 1;
    kiln_type kt;
    kiln_shape_ctx ctx = {g, NULL};
    kiln_type xt = g->nodes[n->in[0]].type;
    xt.dtype = od;
    if (kiln_ir_infer(&ctx, KILN_OP_MAX, &kat, 1, &xt, NULL, &kt, NULL, err))
        return err ? err->code : KILN_ERR_SHAPE;
    int xb = p->node_buf[n->in[0]];
    /* m and s have the shape of sum(x, keepdims) at run time: `sum`, not
     * `max`, which refuses a bool x (only the shape is used) */
    int mb = add_temp(p, -1, &kt, KILN_OP_SUM, &kat, 1, &xb, err);
    if (mb < 0)
        return -mb;
    int sb = add_temp(p, -1, &kt, KILN_OP_SUM, &kat, 1, &xb, err);
    if (sb < 0)
        return -sb;
    int rc = reduce_step(p, g, v, n->in[0], -1, KILN_REDUCE_MAX, mb, n->attrs,
                         1, od, 0, err);
    if (!rc)
        rc = reduce_step(p, g, v, n->in[0], mb, KILN_REDUCE_SUM, sb,
                         n->attrs, 1, od, 1, err);
    if (rc)
        return rc;
    /* out = log(s) + m' */
    kiln_step *s = new_step(p, KILN_KERNEL_ELEMWISE, v, 2, 1, "logsumexp",
                            err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    prog_builder pb = {0};
    int ls = emit(&pb, KILN_I_LOAD, od, 0, -1, -1, 0);
    int m = emit(&pb, KILN_I_LOAD, od, 1, -1, -1, 0);
    int lg = emit(&pb, KILN_I_LOG, od, ls, -1, -1, 0);
    int am = emit(&pb, KILN_I_ABS, od, m, -1, -1, 0);
    int inf = emit(&pb, KILN_I_CONST, od, -1, -1, -1, INFINITY);
    int isinf = emit(&pb, KILN_I_EQ, KILN_BOOL, am, inf, -1, 0);
    int zero = emit(&pb, KILN_I_CONST, od, -1, -1, -1, 0);
    int mm = emit(&pb, KILN_I_WHERE, od, isinf, zero, m, 0);
    int out = emit(&pb, KILN_I_ADD, od, lg, mm, -1, 0);
    if (out < 0) {
        free(pb.ins);
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    }
    set_arg(p, s, 0, 0, sb, KILN_VIEW_RESHAPE, n->type.rank);
    set_arg(p, s, 0, 1, mb, KILN_VIEW_RESHAPE, n->type.rank);
    set_arg(p, s, 1, 0, ob, KILN_VIEW_FULL, n->type.rank);
    return attach_program(s, &pb, &out, err);
}

/* ---- issue 25: check, cumsum, cumprod ------------------------------- */

/* check(x, c1, ..., msg=): x copied into the node's buffer, then per
 * condition a REDUCE kernel (MIN over the condition cast to bool: all of
 * it) into a bool scalar temporary, a step marked `check` that the VM
 * tests right after it runs (core/runtime/context.c).  The check is no member
 * of any fused kernel (fuse.c fuses elementwise ops and reductions only), so
 * its conditions are stored and every one of them is tested whenever the
 * check's value is needed; a check no output depends on is dead code and
 * is not lowered (PyTensor's Assert acts through its output, too). */
static int lower_check(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    int rc = lower_copy(p, g, v, n->in[0], KILN_VIEW_BCAST, p->node_buf[v],
                        KILN_VIEW_FULL, NULL, "check", err);
    kiln_type bt;
    memset(&bt, 0, sizeof bt);
    bt.dtype = KILN_BOOL;
    for (int i = 1; !rc && i < n->n_in; i++) {
        int cb = p->node_buf[n->in[i]];
        int tb = add_temp(p, -1, &bt, KILN_OP_ALL, NULL, 1, &cb, err);
        if (tb < 0)
            return -tb;
        rc = reduce_step(p, g, v, n->in[i], -1, KILN_REDUCE_MIN, tb,
                         &kiln_ir_no_attrs, 0, KILN_BOOL, 0, err);
        if (!rc) {
            kiln_step *s = &p->steps[p->n_steps - 1];
            s->check = v + 1;
            snprintf(s->label, sizeof s->label, "check_all");
        }
    }
    return rc;
}

/* cumsum/cumprod(x, axis): x cast to the result's dtype when it differs
 * (an elementwise kernel into a temporary), then a SCAN kernel (ABI 1.7)
 * from it into the node's buffer. */
static int lower_scan(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    int xb = p->node_buf[n->in[0]];
    int rank = n->type.rank;
    if (g->nodes[n->in[0]].type.dtype != n->type.dtype) {
        kiln_type ct = g->nodes[n->in[0]].type;
        ct.dtype = n->type.dtype;
        kiln_attrs cat = kiln_ir_no_attrs;
        cat.dtype = (int)n->type.dtype;
        int tb = add_temp(p, -1, &ct, KILN_OP_CAST, &cat, 1, &xb, err);
        if (tb < 0)
            return -tb;
        int rc = lower_copy(p, g, v, n->in[0], KILN_VIEW_BCAST, tb,
                            KILN_VIEW_FULL, NULL, "cast", err);
        if (rc)
            return rc;
        xb = tb;
    }
    kiln_step *s = new_step(p, KILN_KERNEL_SCAN, v, 1, 1,
                            kiln_ir_op_info(n->op)->name, err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    set_arg(p, s, 0, 0, xb, KILN_VIEW_FULL, rank);
    set_arg(p, s, 1, 0, p->node_buf[v], KILN_VIEW_FULL, rank);
    int64_t ax = n->attrs->axes[0];
    s->kernel.axis = (int32_t)(ax < 0 ? ax + rank : ax);
    s->kernel.reduce_op = n->op == KILN_OP_CUMSUM ? KILN_REDUCE_SUM
                                                  : KILN_REDUCE_PROD;
    return 0;
}

/* ---- scan (issue 28) ------------------------------------------------- */

/* The result node that receives output k of scan v: the first
 * result(v, index=k) after v, or -1. */
static int result_of(const kiln_graph *g, int v, int k)
{
    for (int u = v + 1; u < g->n_nodes; u++) {
        const kiln_node *r = &g->nodes[u];
        if (r->op == KILN_OP_RESULT && r->in[0] == v && r->attrs->index == k)
            return u;
    }
    return -1;
}

/* A buffer for output k of scan v: its run-time shape is inferred from
 * the scan's inputs with the scan's attributes (ops.c, result); of a
 * top_k, from the type stored in its attributes. */
static int result_buf(kiln_program *p, const kiln_graph *g, int v, int k,
                      const kiln_type *t, kiln_err *err)
{
    const kiln_node *n = &g->nodes[v];
    kiln_attrs ra = *n->attrs;
    if (n->op == KILN_OP_TOP_K) {
        /* the stored type, as kiln_graph_result's (issue 29) */
        memset(&ra, 0, sizeof ra);
        ra.dtype = t->dtype;
        ra.nshape = t->rank;
        memcpy(ra.shape, t->dims, sizeof *ra.shape * (size_t)t->rank);
        ra.n_steps = -1;
    }
    ra.index = k;
    int small[16] = {0}, *ins = small;
    if (n->n_in > 16 && !(ins = malloc(sizeof *ins * (size_t)n->n_in)))
        return -kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n->n_in; i++)
        ins[i] = p->node_buf[n->in[i]];
    int ob = add_temp(p, -1, t, KILN_OP_RESULT, &ra, n->n_in, ins, err);
    if (ins != small)
        free(ins);
    return ob;
}

/* A scan is one RECUR step: its inputs as they are, output 0 into the
 * scan's own buffer, output k into its first result node's buffer (or a
 * temporary nothing reads).  The body runs whole at each step
 * (core/runtime/recur.c). */
/* An ODE solve is one ODE step (issue 28): inputs y0, t0, ts, theta as
 * they are; one output (sens 0: the states, 1: the sensitivities), or
 * with sens 2 two (the states into the node's buffer, the sensitivities
 * into its result(index=1) node's, or a temporary nothing reads); the
 * kernel carries the body's canonical bytes for its key and the method
 * in reduce_op.  The driver attaches the host's callable. */
static int lower_ode(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    const kiln_attrs *a = n->attrs;
    int n_out = kiln_ir_n_out(n->op, a);
    int sb = -1;
    if (n_out == 2) {
        int r = result_of(g, v, 1);
        if (r >= 0) {
            sb = p->node_buf[r];
        } else {
            kiln_type small[4], *types = small;
            for (int i = 0; i < n->n_in && i < 4; i++)
                types[i] = g->nodes[n->in[i]].type;
            kiln_shape_ctx ctx = {g, NULL};
            kiln_type t;
            if (kiln_ir_ode_types(&ctx, n->op, a, n->n_in, types, 1, &t,
                                  err))
                return err ? err->code : KILN_ERR_TYPE;
            sb = result_buf(p, g, v, 1, &t, err);
            if (sb < 0)
                return -sb;
        }
    }
    kiln_step *s = new_step(p, KILN_KERNEL_ODE, v, n->n_in, n_out,
                            kiln_ir_op_info(n->op)->name, err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    for (int i = 0; i < n->n_in; i++) {
        int b = p->node_buf[n->in[i]];
        set_arg(p, s, 0, i, b, KILN_VIEW_FULL, p->bufs[b].type.rank);
    }
    int ob = p->node_buf[v];
    set_arg(p, s, 1, 0, ob, KILN_VIEW_FULL, p->bufs[ob].type.rank);
    if (n_out == 2)
        set_arg(p, s, 1, 1, sb, KILN_VIEW_FULL, p->bufs[sb].type.rank);
    s->kernel.reduce_op = n->op == KILN_OP_ODE_BDF ? 1u : 0u;
    size_t len = 0, cap = 0;
    /* the body, then the attributes that change the result (its nodes'
     * canon holds theirs, not the ODE node's own) */
    if (kiln_ir_graph_canon(a->body, &s->body_bytes, &len, &cap))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    double tol[2] = {a->rtol, a->atol};
    int64_t extra[2] = {a->max_steps, a->sens};
    size_t need = len + sizeof tol + sizeof extra;
    unsigned char *q = need > cap ? realloc(s->body_bytes, need)
                                  : s->body_bytes;
    if (!q)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    memcpy(q + len, tol, sizeof tol);
    memcpy(q + len + sizeof tol, extra, sizeof extra);
    s->body_bytes = q;
    s->kernel.body_bytes = q;
    s->kernel.n_body_bytes = need;
    return 0;
}

/* top_k (issue 29) is one TOPK step run by the host (core/runtime/topk.c):
 * x as it is; the values into the node's buffer, the indices into its
 * result(index=1) node's buffer, or a temporary nothing reads (typed as
 * kiln_graph_result types it).  The kernel carries the axis
 * (normalised) and k (n_steps) for its key. */
static int lower_topk(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    const kiln_type *xt = &g->nodes[n->in[0]].type;
    int r = result_of(g, v, 1), ib;
    if (r >= 0) {
        ib = p->node_buf[r];
    } else {
        kiln_shape_ctx ctx = {g, NULL};
        kiln_type t;
        if (kiln_ir_topk_type(&ctx, n->attrs, xt, 1, &t, err))
            return err ? err->code : KILN_ERR_TYPE;
        ib = result_buf(p, g, v, 1, &t, err);
        if (ib < 0)
            return -ib;
    }
    kiln_step *s = new_step(p, KILN_KERNEL_TOPK, v, 1, 2, "top_k", err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    int xb = p->node_buf[n->in[0]], ob = p->node_buf[v];
    set_arg(p, s, 0, 0, xb, KILN_VIEW_FULL, p->bufs[xb].type.rank);
    set_arg(p, s, 1, 0, ob, KILN_VIEW_FULL, p->bufs[ob].type.rank);
    set_arg(p, s, 1, 1, ib, KILN_VIEW_FULL, p->bufs[ib].type.rank);
    int64_t ax = n->attrs->has_axes ? n->attrs->axes[0] : -1;
    s->kernel.axis = (int32_t)(ax < 0 ? ax + xt->rank : ax);
    s->kernel.n_steps = n->attrs->index;
    return 0;
}

static int lower_recur(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    if (n->op == KILN_OP_RESULT) {
        int sv = n->in[0], k = n->attrs->index;
        int first = k == 0 ? sv : result_of(g, sv, k);
        if (first == v)
            return 0;   /* the scan's step writes it */
        return lower_copy(p, g, v, first, KILN_VIEW_FULL, p->node_buf[v],
                          KILN_VIEW_FULL, NULL, "result", err);
    }
    const kiln_attrs *a = n->attrs;
    int n_out = kiln_ir_scan_n_out(a);
    kiln_step *s = new_step(p, KILN_KERNEL_RECUR, v, n->n_in, n_out, "scan",
                            err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    for (int i = 0; i < n->n_in; i++) {
        int b = p->node_buf[n->in[i]];
        set_arg(p, s, 0, i, b, KILN_VIEW_FULL, p->bufs[b].type.rank);
    }
    kiln_type small[8], *types = small;
    if (n->n_in > 8 && !(types = malloc(sizeof *types * (size_t)n->n_in)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n->n_in; i++)
        types[i] = g->nodes[n->in[i]].type;
    int rc = 0;
    for (int k = 0; k < n_out && !rc; k++) {
        int ob;
        if (k == 0) {
            ob = p->node_buf[v];
        } else if (result_of(g, v, k) >= 0) {
            ob = p->node_buf[result_of(g, v, k)];
        } else {
            kiln_shape_ctx ctx = {g, NULL};
            kiln_type t;
            if ((rc = kiln_ir_scan_types(&ctx, a, n->n_in, types, k, &t,
                                         err)))
                break;
            ob = result_buf(p, g, v, k, &t, err);
            if (ob < 0) {
                rc = -ob;
                break;
            }
            s = &p->steps[p->n_steps - 1];   /* add_temp may not move it */
        }
        set_arg(p, s, 1, k, ob, KILN_VIEW_FULL, p->bufs[ob].type.rank);
    }
    if (types != small)
        free(types);
    if (rc)
        return rc;
    s->kernel.n_carry = (uint32_t)a->n_carry;
    s->kernel.n_seq = (uint32_t)a->n_seq;
    s->kernel.n_steps = a->n_steps;
    size_t len = 0, cap = 0;
    if (kiln_ir_graph_canon(a->body, &s->body_bytes, &len, &cap))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    s->kernel.body_bytes = s->body_bytes;
    s->kernel.n_body_bytes = len;
    return 0;
}

/* ---- loops ---------------------------------------------------------- */

static int lower_node(kiln_program *p, kiln_graph *g, int v, int k,
                      kiln_err *err);

/* Whether loop member m reads its operand i whole (a gather's table, the
 * array a scatter adds into) or not at all (fill's model): then the
 * operand is no ITER input of the loop. */
static int loop_reads_element(const kiln_graph *g, int m, int i)
{
    int op = g->nodes[m].op;
    return !(i == 0 && (op == KILN_OP_TAKE || op == KILN_OP_FILL ||
                        op == KILN_OP_ADVANCED_INC_SUBTENSOR));
}

static int is_reduction(int op)
{
    return op == KILN_OP_SUM || op == KILN_OP_PROD || op == KILN_OP_MAX ||
           op == KILN_OP_MIN || op == KILN_OP_MEAN ||
           op == KILN_OP_ALL || op == KILN_OP_ANY;   /* issue 25 */
}

/* What kind of output loop member m is: 0 none (computed in registers
 * only), KILN_ROLE_ITER + 1, KILN_ROLE_REDUCE + 1, KILN_ROLE_SCATTER + 1. */
static int loop_output(const kiln_graph *g, const kiln_fusion *fu, int m)
{
    int op = g->nodes[m].op;
    if (is_reduction(op))
        return KILN_ROLE_REDUCE + 1;
    if (op == KILN_OP_ADVANCED_INC_SUBTENSOR)
        return KILN_ROLE_SCATTER + 1;
    return fu->loop_ext[m] ? KILN_ROLE_ITER + 1 : 0;
}

static int same_dims(const kiln_type *a, const kiln_type *b)
{
    return a->rank == b->rank &&
           !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}

/* The member kernels of a loop one after another, in lowering order:
 * for a loop whose iteration space no argument has (every input
 * broadcasts and every output reduces or scatters). */
static int lower_loop_apart(kiln_program *p, kiln_graph *g, const int *mem,
                            int n_mem, int anchor, kiln_err *err)
{
    const kiln_fusion *fu = &p->scr->fu;
    int *ks = malloc(sizeof(int) * (size_t)(n_mem > 0 ? n_mem : 1));
    if (!ks)
        return nomem(err);
    int nk = 0;
    for (int i = 0; i < n_mem; i++)
        if (fu->loop[mem[i]] == anchor)   /* a kernel of the loop */
            ks[nk++] = mem[i];
    /* by position: insertion sort (lowering order of the kernels) */
    const int *where = p->scr->where;
    for (int i = 1; i < nk; i++) {
        int x = ks[i], j = i;
        for (; j > 0 && where[ks[j - 1]] > where[x]; j--)
            ks[j] = ks[j - 1];
        ks[j] = x;
    }
    int rc = 0;
    for (int i = 0; i < nk && !rc; i++)
        rc = lower_node(p, g, ks[i], where[ks[i]], err);
    free(ks);
    return rc;
}

/* A loop (core/lower/fuse.c, ABI 1.5): one LOOP kernel over the loop's space.
 * Outputs, in node order: members read outside the loop (ITER), the
 * reductions (REDUCE) and the scatter-adds (SCATTER, in place on their
 * array, or on a copy of it); inputs by first use, the first ITER input
 * of exactly the space's type moved to slot 0 (it gives the iteration
 * space), else an ITER output of that type first.  Both orders depend
 * only on the loop's expression DAG: keys stay canonical. */
static int lower_loop(kiln_program *p, kiln_graph *g, int anchor,
                      kiln_err *err)
{
    kiln_lower_scratch *sc = p->scr;
    const kiln_fusion *fu = &sc->fu;
    const int *mem = fu->loop_nodes + fu->loop_start[anchor];
    int n_mem = fu->loop_start[anchor + 1] - fu->loop_start[anchor];
    const kiln_type *space = kiln_fuse_loop_space(g, fu, anchor);
    int rank = space->rank;
    /* can the space come from an argument? */
    for (int i = 0; i < n_mem; i++)
        sc->inloop[mem[i]] = 1;
    int defined = 0;
    for (int i = 0; i < n_mem && !defined; i++) {
        int m = mem[i];
        const kiln_node *mn = &g->nodes[m];
        if (loop_output(g, fu, m) == KILN_ROLE_ITER + 1 &&
            same_dims(&mn->type, space))
            defined = 1;
        for (int j = 0; j < mn->n_in && !defined; j++) {
            int w = mn->in[j];
            defined = !sc->inloop[w] && loop_reads_element(g, m, j) &&
                      p->node_buf[w] >= 0 && !buf_chain(p, p->node_buf[w]) &&
                      same_dims(&g->nodes[w].type, space);
        }
    }
    if (!defined) {
        for (int i = 0; i < n_mem; i++)
            sc->inloop[mem[i]] = 0;
        return lower_loop_apart(p, g, mem, n_mem, anchor, err);
    }
    int rc = 0, n_out = 0;
    /* the arrays the scatters add into: in place when nothing else reads
     * them (as lower_set_subtensor), else a copy first */
    for (int i = 0; i < n_mem && !rc; i++) {
        int m = mem[i];
        int kind = loop_output(g, fu, m);
        n_out += kind != 0;
        if (kind != KILN_ROLE_SCATTER + 1)
            continue;
        kiln_node *n = &g->nodes[m];
        int ob = p->node_buf[m], xb = p->node_buf[n->in[0]];
        if (sc->uses[n->in[0]] == 1 && xb >= 0 && ob < sc->n_alias &&
            p->bufs[xb].kind == KILN_BUF_TEMP && !sc->isout[n->in[0]] &&
            !p->bufs[xb].fused) {
            sc->buf_alias[ob] = xb;
            p->node_buf[m] = xb;
        } else {
            rc = lower_copy(p, g, m, n->in[0], KILN_VIEW_FULL, ob,
                            KILN_VIEW_FULL, NULL, "copy", err);
        }
    }
    int *outs = malloc(sizeof(int) * 4 * (size_t)(n_out > 0 ? n_out : 1));
    ew_ctx c;
    if (rc || !outs || ew_init(&c, p, g, err)) {
        free(outs);
        for (int i = 0; i < n_mem; i++)
            sc->inloop[mem[i]] = 0;
        return rc ? rc : nomem(err);
    }
    int *onode = outs + n_out, *orole = outs + 2 * n_out,
        *oidx = outs + 3 * n_out;
    c.loop = 1;
    int j = 0;
    for (int i = 0; i < n_mem && !rc; i++) {
        int m = mem[i];
        int kind = loop_output(g, fu, m);
        if (!kind)
            continue;
        kiln_node *n = &g->nodes[m];
        int r, x = -1;
        if (kind == KILN_ROLE_REDUCE + 1) {
            r = ew_operand(&c, n->in[0], n->type.dtype, err);
        } else if (kind == KILN_ROLE_SCATTER + 1) {
            r = ew_operand(&c, n->in[2], n->type.dtype, err);
            x = r < 0 ? -1 : ew_operand(&c, n->in[1],
                                        g->nodes[n->in[1]].type.dtype, err);
            if (x < 0)
                r = -1;
        } else {
            r = sc->instr[m] >= 0 ? sc->instr[m] : emit_tree(&c, m, err);
        }
        if (r < 0)
            rc = err && err->code ? err->code : nomem(err);
        outs[j] = r;
        onode[j] = m;
        orole[j] = kind - 1;
        oidx[j++] = x;
    }
    /* the argument that gives the iteration space goes first */
    int *arr = c.dyn ? c.dyn : c.bufs;
    int first_in = -1, first_out = -1;
    if (!rc && slot0_of_type(&c, space) == 0)
        first_in = 0;
    for (int i = 0; !rc && first_in < 0 && i < n_out && first_out < 0; i++)
        if (orole[i] == KILN_ROLE_ITER &&
            same_dims(&g->nodes[onode[i]].type, space))
            first_out = i;
    if (!rc && first_in < 0 && first_out < 0)
        rc = kiln_seterr(err, KILN_ERR_TYPE, "loop at node %d: no argument "
                         "has its iteration space", anchor);
    if (!rc && first_out > 0) {
        /* rotate output first_out to 0 */
        int t[4] = {outs[first_out], onode[first_out], orole[first_out],
                    oidx[first_out]};
        for (int i = first_out; i > 0; i--) {
            outs[i] = outs[i - 1];
            onode[i] = onode[i - 1];
            orole[i] = orole[i - 1];
            oidx[i] = oidx[i - 1];
        }
        outs[0] = t[0];
        onode[0] = t[1];
        orole[0] = t[2];
        oidx[0] = t[3];
        first_out = 0;
    }
    /* the node a run-time error names: the first gather or scatter (an
     * index out of range is the only error a loop's call can have) */
    int node = anchor;
    for (int i = 0; i < n_mem; i++) {
        int op = g->nodes[mem[i]].op;
        if (op == KILN_OP_TAKE || op == KILN_OP_ADVANCED_INC_SUBTENSOR) {
            node = mem[i];
            break;
        }
    }
    kiln_step *s = rc ? NULL : new_step(p, KILN_KERNEL_LOOP, node, c.n,
                                        n_out, "fused_loop", err);
    if (!rc && !s)
        rc = err ? err->code : KILN_ERR_NOMEM;
    if (!rc) {
        s->roles = malloc((size_t)(c.n + n_out > 0 ? c.n + n_out : 1));
        s->out_index = malloc(sizeof(int32_t) * (size_t)(n_out > 0 ? n_out : 1));
        if (!s->roles || !s->out_index)
            rc = nomem(err);
    }
    if (!rc) {
        for (int i = 0; i < c.n; i++) {
            s->roles[i] = c.table[i] ? KILN_ROLE_TABLE : KILN_ROLE_ITER;
            set_arg(p, s, 0, i, arr[i],
                    c.table[i] || (i == 0 && first_in == 0) ? KILN_VIEW_FULL
                                                            : KILN_VIEW_BCAST,
                    c.table[i] ? 1 : rank);
        }
        uint32_t mask = 0;
        for (int i = 0; i < n_out; i++) {
            const kiln_node *on = &g->nodes[onode[i]];
            s->roles[c.n + i] = (uint8_t)orole[i];
            s->out_index[i] = orole[i] == KILN_ROLE_SCATTER ? oidx[i] : -1;
            int ob = p->node_buf[onode[i]];
            if (orole[i] == KILN_ROLE_REDUCE) {
                set_arg(p, s, 1, i, ob, KILN_VIEW_REDUCE_OUT, rank);
                reduce_mask(on->attrs, rank, s->out[i].perm);
                s->out[i].keepdims = on->attrs->keepdims;
                mask = 0;
                for (int d = 0; d < rank; d++)
                    if (s->out[i].perm[d])
                        mask |= 1u << d;
                s->kernel.reduce_op = (uint32_t)reduce_opcode(on->op);
            } else {
                set_arg(p, s, 1, i, ob, KILN_VIEW_FULL,
                        orole[i] == KILN_ROLE_SCATTER ? 1 : rank);
            }
        }
        s->kernel.reduce_axes = mask;
        s->kernel.in_roles = s->roles;
        s->kernel.out_roles = s->roles + c.n;
        s->kernel.out_index = s->out_index;
        s->iter_input = first_in == 0;
        set_members(s, g, mem, n_mem, -1, sc->tnames);
        rc = attach_program(s, &c.pb, outs, err);
    }
    /* members that are no output are never stored */
    for (int i = 0; i < n_mem; i++) {
        int m = mem[i];
        sc->inloop[m] = 0;
        if (!rc && !loop_output(g, fu, m) && p->node_buf[m] >= 0 &&
            p->bufs[p->node_buf[m]].kind == KILN_BUF_TEMP)
            p->bufs[p->node_buf[m]].fused = 1;
    }
    ew_free(&c);
    free(outs);
    return rc;
}

/* ---- casts to a temporary (join, dot, scatter operands) ------------- */

static int cast_buf(kiln_program *p, int node, int buf,
                    kiln_dtype want, kiln_err *err)
{
    if (p->bufs[buf].type.dtype == want)
        return buf;
    kiln_type t = p->bufs[buf].type;
    t.dtype = want;
    kiln_attrs at;
    memset(&at, 0, sizeof at);
    at.dtype = want;
    int tb = add_temp(p, -1, &t, KILN_OP_CAST, &at, 1, &buf, err);
    if (tb < 0)
        return tb;
    kiln_step *s = new_step(p, KILN_KERNEL_ELEMWISE, node, 1, 1, "cast", err);
    if (!s)
        return -(err ? err->code : KILN_ERR_NOMEM);
    prog_builder pb = {0};
    int l = emit(&pb, KILN_I_LOAD, p->bufs[buf].type.dtype, 0, -1, -1, 0);
    int c = l >= 0 ? emit(&pb, KILN_I_CAST, want, l, -1, -1, 0) : -1;
    if (c < 0) {
        free(pb.ins);
        return -kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    }
    set_arg(p, s, 0, 0, buf, KILN_VIEW_FULL, t.rank);
    set_arg(p, s, 1, 0, tb, KILN_VIEW_FULL, t.rank);
    if (attach_program(s, &pb, &c, err))
        return -(err ? err->code : KILN_ERR_NOMEM);
    return tb;
}

/* ---- shape, index and dot ops -------------------------------------- */

/* A join or stack is one JOIN step: one output allocation and one kernel
 * that loops over the array of its inputs, writing each into its slice
 * (interp.c kiln_interp_join), whatever their number — never a kernel
 * with a parameter or generated code per input (DESIGN.md invariant 1). */
static int lower_join(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    int stack = n->op == KILN_OP_STACK;
    int *bufs = malloc(sizeof(int) * (size_t)n->n_in);
    if (!bufs)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n->n_in; i++) {
        bufs[i] = cast_buf(p, v, p->node_buf[n->in[i]], n->type.dtype, err);
        if (bufs[i] < 0) {
            int rc = -bufs[i];
            free(bufs);
            return rc;
        }
    }
    kiln_step *s = new_step(p, KILN_KERNEL_JOIN, v, n->n_in, 1,
                            kiln_ir_op_info(n->op)->name, err);
    if (!s) {
        free(bufs);
        return err ? err->code : KILN_ERR_NOMEM;
    }
    int r = n->type.rank;
    int64_t ax = n->attrs->has_axes ? n->attrs->axes[0] : 0;
    if (ax < 0)
        ax += r;
    for (int i = 0; i < n->n_in; i++) {
        set_arg(p, s, 0, i, bufs[i], stack ? KILN_VIEW_EXPAND : KILN_VIEW_FULL,
                r);
        s->in[i].axis = (int)ax;
    }
    set_arg(p, s, 1, 0, p->node_buf[v], KILN_VIEW_FULL, r);
    s->kernel.axis = (int32_t)ax;
    free(bufs);
    return 0;
}

static int lower_take(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    kiln_step *s = new_step(p, KILN_KERNEL_GATHER, v, 2, 1, "take", err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    int xr = g->nodes[n->in[0]].type.rank;
    int64_t ax = n->attrs->has_axes ? n->attrs->axes[0] : 0;
    if (ax < 0)
        ax += xr;
    set_arg(p, s, 0, 0, p->node_buf[n->in[0]], KILN_VIEW_FULL, xr);
    set_arg(p, s, 0, 1, p->node_buf[n->in[1]], KILN_VIEW_FULL,
            g->nodes[n->in[1]].type.rank);
    set_arg(p, s, 1, 0, p->node_buf[v], KILN_VIEW_FULL, n->type.rank);
    s->kernel.axis = (int32_t)ax;
    return 0;
}

static int lower_set_subtensor(kiln_program *p, kiln_graph *g, int v,
                               kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    int ob = p->node_buf[v];
    int xb = p->node_buf[n->in[0]];
    int rc = 0;
    if (p->scr->uses && p->scr->uses[n->in[0]] == 1 && xb >= 0 &&
        ob < p->scr->n_alias &&
        p->bufs[xb].kind == KILN_BUF_TEMP && !p->scr->isout[n->in[0]] &&
        !p->bufs[xb].fused) {
        /* x is a temporary nothing else reads (the zeros a gradient
         * scatters into): update it in place, no copy.  v's own buffer
         * goes unused; the buffers whose run-time shape is inferred from
         * it are pointed at x's (lower_all, buf_alias) */
        p->scr->buf_alias[ob] = xb;
        p->node_buf[v] = ob = xb;
    } else {
        rc = lower_copy(p, g, v, n->in[0], KILN_VIEW_FULL, ob, KILN_VIEW_FULL,
                        NULL, "copy", err);
    }
    if (rc)
        return rc;
    int inc = n->op == KILN_OP_INC_SUBTENSOR;
    if (n->op == KILN_OP_SET_SUBTENSOR || inc) {
        ew_ctx c;
        if (ew_init(&c, p, g, err))
            return err ? err->code : KILN_ERR_NOMEM;
        kiln_dtype od = n->type.dtype;
        int r;
        if (inc) {
            /* input 0 is the region of the output itself */
            int slot = ew_new_slot(&c, ob, err);
            int cur = slot < 0 ? -1
                               : emit(&c.pb, KILN_I_LOAD, od, slot, -1, -1, 0);
            int val = cur >= 0 ? ew_operand(&c, n->in[1], od, err) : -1;
            r = val >= 0 ? emit(&c.pb, KILN_I_ADD, od, cur, val, -1, 0) : -1;
        } else {
            r = ew_operand(&c, n->in[1], od, err);
        }
        if (r < 0) {
            ew_free(&c);
            return err && err->code ? err->code : KILN_ERR_NOMEM;
        }
        int iter_rank = 0;
        for (int i = 0; i < n->type.rank; i++)
            if (i >= n->attrs->nidx || n->attrs->idx[i].kind == KILN_INDEX_SLICE)
                iter_rank++;
        kiln_step *s;
        rc = ew_finish(&c, KILN_KERNEL_ELEMWISE, v,
                       kiln_ir_op_info(n->op)->name, ob, KILN_VIEW_SUBTENSOR,
                       n->attrs, r, iter_rank, &s, err);
        if (!rc && inc) {
            s->in[0].recipe = KILN_VIEW_SUBTENSOR;
            s->in[0].attrs = n->attrs;
        }
        ew_free(&c);
        return rc;
    }
    /* advanced: scatter(idx, v) into the copy */
    kiln_dtype od = n->type.dtype;
    int vb = cast_buf(p, v, p->node_buf[n->in[2]], od, err);
    if (vb < 0)
        return -vb;
    kiln_step *s = new_step(p, KILN_KERNEL_SCATTER, v, 2, 1,
                            kiln_ir_op_info(n->op)->name, err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    int xr = n->type.rank;
    int64_t ax = n->attrs->has_axes ? n->attrs->axes[0] : 0;
    if (ax < 0)
        ax += xr;
    int ib = p->node_buf[n->in[1]];
    int ir = g->nodes[n->in[1]].type.rank;
    set_arg(p, s, 0, 0, ib, KILN_VIEW_FULL, ir);
    set_arg(p, s, 0, 1, vb, KILN_VIEW_BCAST_TAKE, xr - 1 + ir);
    s->in[1].axis = (int)ax;
    s->in[1].aux[0] = ob;
    s->in[1].aux[1] = ib;
    set_arg(p, s, 1, 0, ob, KILN_VIEW_FULL, xr);
    s->kernel.axis = (int32_t)ax;
    s->kernel.scatter_mode = n->op == KILN_OP_ADVANCED_INC_SUBTENSOR
                                 ? KILN_SCATTER_INC
                                 : KILN_SCATTER_SET;
    return 0;
}

/* The node a dot reads as its operand i.  A rank-2 transpose of a value
 * of the dot's dtype is not computed: the dot reads that value through a
 * transposed view, which the DOT kernels hand to BLAS with its transpose
 * flag (gradients are full of dot(transpose(A), g): an 8 MB copy per call
 * for a 1000 x 1000 A).  *perm gets the view's permutation when the
 * transpose is skipped.  Used by the liveness walk, by the fusion plan's
 * use counts (core/lower/fuse.c) and by lower_dot, so the three agree on what
 * the dot reads. */
static int lower_dot(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    int64_t perm[2][KILN_MAX_RANK] = {{0}};
    int src[2], buf[2];
    for (int i = 0; i < 2; i++) {
        src[i] = kiln_fuse_dot_operand(g, v, i, perm[i]);
        buf[i] = cast_buf(p, v, p->node_buf[src[i]], n->type.dtype, err);
        if (buf[i] < 0)
            return -buf[i];
    }
    kiln_step *s = new_step(p, KILN_KERNEL_DOT, v, 2, 1,
                            kiln_ir_op_info(n->op)->name, err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    if (kiln_fuse_dot_batched(g, v)) {
        /* issue 29 (ABI 1.11): three views of one rank R >= 3, the
         * output's with the unit axis a 1-D operand drops put back, the
         * operands' through KILN_VIEW_MATMUL (the transpose of the last
         * two axes, a promoted 1-D operand, a broadcast batch: no copy) */
        int ra = g->nodes[n->in[0]].type.rank;
        int rb = g->nodes[n->in[1]].type.rank;
        int R = n->type.rank + (ra == 1) + (rb == 1);
        for (int i = 0; i < 2; i++) {
            set_arg(p, s, 0, i, buf[i], KILN_VIEW_MATMUL, R);
            s->in[i].axis = i;
            s->in[i].keepdims = src[i] != n->in[i];
        }
        if (ra == 1 || rb == 1) {
            set_arg(p, s, 1, 0, p->node_buf[v], KILN_VIEW_EXPAND, R);
            s->out[0].axis = ra == 1 ? R - 2 : R - 1;
        } else {
            set_arg(p, s, 1, 0, p->node_buf[v], KILN_VIEW_FULL, R);
        }
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        int tr = src[i] != n->in[i];
        set_arg(p, s, 0, i, buf[i], tr ? KILN_VIEW_TRANSPOSE : KILN_VIEW_FULL,
                p->bufs[buf[i]].type.rank);
        if (tr)
            memcpy(s->in[i].perm, perm[i], sizeof perm[i]);
    }
    set_arg(p, s, 1, 0, p->node_buf[v], KILN_VIEW_FULL, n->type.rank);
    return 0;
}

/* issue 28: a linear-algebra op is one LINALG kernel (ABI 1.9) whose
 * reduce_op is the kiln_linalg_op; its inputs converted to f64 first. */
static int lower_linalg(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    uint32_t op;
    switch (n->op) {
    case KILN_OP_CHOLESKY:
        op = n->attrs->linalg & 4 ? KILN_LINALG_POTRF_NAN : KILN_LINALG_POTRF;
        break;
    case KILN_OP_CHOLESKY_GRAD: op = KILN_LINALG_POTRF_BWD; break;
    case KILN_OP_SOLVE_TRIANGULAR: {
        static const uint32_t tri[4] = {KILN_LINALG_TRSM_UN,
                                        KILN_LINALG_TRSM_LN,
                                        KILN_LINALG_TRSM_UT,
                                        KILN_LINALG_TRSM_LT};
        op = tri[n->attrs->linalg & 3];
        break;
    }
    case KILN_OP_SOLVE: op = KILN_LINALG_GESV; break;
    case KILN_OP_INVERSE: op = KILN_LINALG_GETRI; break;
    case KILN_OP_LOG_DET: op = KILN_LINALG_LOGDET; break;
    case KILN_OP_DET: op = KILN_LINALG_DET; break;
    case KILN_OP_SIGN_DET: op = KILN_LINALG_SIGNDET; break;
    case KILN_OP_TRIL: op = KILN_LINALG_TRIL; break;
    case KILN_OP_TRIU: op = KILN_LINALG_TRIU; break;
    case KILN_OP_DIAG: op = KILN_LINALG_DIAG; break;
    default: op = KILN_LINALG_DIAGONAL; break;
    }
    int buf[2];
    for (int i = 0; i < n->n_in; i++) {
        buf[i] = cast_buf(p, v, p->node_buf[n->in[i]], KILN_F64, err);
        if (buf[i] < 0)
            return -buf[i];
    }
    kiln_step *s = new_step(p, KILN_KERNEL_LINALG, v, n->n_in, 1,
                            kiln_ir_op_info(n->op)->name, err);
    if (!s)
        return err ? err->code : KILN_ERR_NOMEM;
    for (int i = 0; i < n->n_in; i++)
        set_arg(p, s, 0, i, buf[i], KILN_VIEW_FULL,
                p->bufs[buf[i]].type.rank);
    set_arg(p, s, 1, 0, p->node_buf[v], KILN_VIEW_FULL, n->type.rank);
    s->kernel.reduce_op = op;
    return 0;
}

static int lower_shape(kiln_program *p, kiln_graph *g, int v, kiln_err *err)
{
    kiln_node *n = &g->nodes[v];
    int ob = p->node_buf[v];
    const char *name = kiln_ir_op_info(n->op)->name;
    switch (n->op) {
    case KILN_OP_RESHAPE:
    case KILN_OP_EXPAND_DIMS:
    case KILN_OP_SQUEEZE:
        return lower_copy(p, g, v, n->in[0], KILN_VIEW_RESHAPE, ob,
                          KILN_VIEW_FULL, NULL, name, err);
    case KILN_OP_TRANSPOSE:
        return lower_copy(p, g, v, n->in[0], KILN_VIEW_TRANSPOSE, ob,
                          KILN_VIEW_FULL, NULL, name, err);
    case KILN_OP_BROADCAST_TO:
    case KILN_OP_ALLOC:
        return lower_copy(p, g, v, n->in[0], KILN_VIEW_BCAST, ob,
                          KILN_VIEW_FULL, NULL, name, err);
    case KILN_OP_ZEROS:
    case KILN_OP_ONES: {
        kiln_step *s = new_step(p, KILN_KERNEL_ELEMWISE, v, 0, 1, name, err);
        if (!s)
            return err ? err->code : KILN_ERR_NOMEM;
        prog_builder pb = {0};
        int r = emit(&pb, KILN_I_CONST, n->type.dtype, -1, -1, -1,
                     n->op == KILN_OP_ONES ? 1.0 : 0.0);
        if (r < 0)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        set_arg(p, s, 1, 0, ob, KILN_VIEW_FULL, n->type.rank);
        return attach_program(s, &pb, &r, err);
    }
    case KILN_OP_JOIN:
    case KILN_OP_STACK:
        return lower_join(p, g, v, err);
    case KILN_OP_SUBTENSOR:
        return lower_copy(p, g, v, n->in[0], KILN_VIEW_SUBTENSOR, ob,
                          KILN_VIEW_FULL, NULL, "subtensor", err);
    }
    return kiln_seterr(err, KILN_ERR_TYPE, "cannot lower op '%s'", name);
}

/* ---- shape ops read in place -------------------------------------- */

/* The recipe shape op `op` is as a view step, or -1. */
static int view_recipe(int op)
{
    switch (op) {
    case KILN_OP_TRANSPOSE: return KILN_VIEW_TRANSPOSE;
    case KILN_OP_SUBTENSOR: return KILN_VIEW_SUBTENSOR;
    case KILN_OP_EXPAND_DIMS:
    case KILN_OP_SQUEEZE: return KILN_VIEW_UNITS;
    case KILN_OP_RESHAPE: return KILN_VIEW_RESHAPE;
    case KILN_OP_BROADCAST_TO:
    case KILN_OP_ALLOC: return KILN_VIEW_BCAST;
    default: return -1;
    }
}

/* 1 + the view step buffer `buf` is read through, 0 when it is a buffer
 * of its own. */
static int buf_chain(const kiln_program *p, int buf)
{
    const kiln_lower_scratch *sc = p->scr;
    return sc && buf >= 0 && buf < sc->n_vof ? sc->vstep_of[buf] : 0;
}

/* Whether live node r reads its operand through a view it builds at
 * call time, so that the operand may itself be a view of its source: an
 * elementwise node (a LOAD of a broadcast argument, in an ELEMWISE,
 * REDUCE or LOOP kernel: slot 0 of a REDUCE or LOOP kernel, which gives
 * the iteration space, is never a view — iter_spaces keeps the copy of
 * an operand that could be it; slot0_of_type and lower_loop check), or
 * a shape op other than reshape (its copy's input view, or its own view
 * step).  A reshape needs its source contiguous; reductions, dots,
 * joins, gathers (a loop's TABLE arguments), scatters and set_subtensor
 * read buffers as they are. */
static int reads_as_view(const kiln_graph *g, int r)
{
    const kiln_node *n = &g->nodes[r];
    if (kiln_ir_op_info(n->op)->category == KILN_CAT_ELEMWISE ||
        kiln_fuse_dot_batched(g, r))   /* a batched DOT: any strides */
        return 1;
    return view_recipe(n->op) >= 0 && n->op != KILN_OP_RESHAPE;
}

/* The iteration spaces that slot 0 of the kernels computing elementwise
 * node r may have to give (NULL: none): its reduction tree's operand,
 * its loop's space (the loop may also be lowered apart) — none when r is
 * in a loop that an output of its space defines (out_space, by anchor;
 * lower_loop). */
static void iter_spaces(const kiln_graph *g, const kiln_fusion *fu,
                        const char *out_space, int r, const kiln_type **sp)
{
    sp[0] = sp[1] = NULL;
    int a = fu->n_loops ? fu->loop[kiln_fuse_kernel_of(fu, r)] : -1;
    if (a >= 0 && out_space[a])
        return;
    int q = fu->group[r];
    if (q >= 0 && kiln_ir_op_info(g->nodes[q].op)->category == KILN_CAT_REDUCE)
        sp[0] = &g->nodes[g->nodes[q].in[0]].type;
    if (a >= 0)
        sp[1] = kiln_fuse_loop_space(g, fu, a);
}

/* Which shape ops need no kernel (docs/rewrite.md, "fuse"): a transpose,
 * basic slice, expand_dims, squeeze, reshape or broadcast_to that is no
 * graph output, keeps its operand's dtype, and whose every live reader
 * reads it as a view (reads_as_view) is read in place — its readers take
 * its source buffer through the chain of view steps up to it (at most
 * KILN_VIEW_MAX_CHAIN; a deeper one is copied and its readers start a
 * new chain).  Its buffer is never stored, but its shape is still
 * inferred and checked at call time (kiln_buf.fused).  Linear. */
static int plan_views(kiln_program *p, const kiln_graph *g, const char *live,
                      kiln_err *err)
{
    kiln_lower_scratch *sc = p->scr;
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    char *bad = calloc(2 * nn, 1), *out_space = bad + nn;
    int *depth = calloc(nn, sizeof(int));
    sc->asview = calloc(nn, 1);
    sc->vstep_of = calloc((size_t)(p->n_bufs ? p->n_bufs : 1), sizeof(int));
    if (!bad || !depth || !sc->asview || !sc->vstep_of) {
        free(bad);
        free(depth);
        return nomem(err);
    }
    sc->n_vof = p->n_bufs;
    /* loops whose space an ITER output of that space gives */
    for (int v = 0; sc->fu.n_loops && v < g->n_nodes; v++) {
        int a = live[v] ? sc->fu.loop[kiln_fuse_kernel_of(&sc->fu, v)] : -1;
        if (a >= 0 && loop_output(g, &sc->fu, v) == KILN_ROLE_ITER + 1 &&
            same_dims(&g->nodes[v].type, kiln_fuse_loop_space(g, &sc->fu, a)))
            out_space[a] = 1;
    }
    for (int r = 0; r < g->n_nodes; r++) {
        if (!live[r])
            continue;
        if (reads_as_view(g, r)) {
            /* an operand that could give a REDUCE or LOOP kernel its
             * iteration space (slot 0) stays a buffer: read in place it
             * could not be slot 0, and the kernel would be split */
            const kiln_type *sp[2];
            iter_spaces(g, &sc->fu, out_space, r, sp);
            for (int i = 0; i < g->nodes[r].n_in; i++)
                for (int k = 0; k < 2; k++)
                    if (sp[k] && same_dims(&g->nodes[g->nodes[r].in[i]].type,
                                           sp[k]))
                        bad[g->nodes[r].in[i]] = 1;
            continue;
        }
        int dot = kiln_ir_op_info(g->nodes[r].op)->category == KILN_CAT_DOT;
        for (int i = 0; i < g->nodes[r].n_in; i++)
            bad[dot ? kiln_fuse_dot_operand(g, r, i, NULL)
                    : g->nodes[r].in[i]] = 1;
    }
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *n = &g->nodes[v];
        if (!live[v] || bad[v] || sc->isout[v] || view_recipe(n->op) < 0)
            continue;
        int src = n->in[0], vb = p->node_buf[v];
        int d = (sc->asview[src] ? depth[src] : 0) + 1;
        if (d > KILN_VIEW_MAX_CHAIN || p->node_buf[src] < 0 || vb < 0 ||
            p->bufs[vb].kind != KILN_BUF_TEMP ||
            g->nodes[src].type.dtype != n->type.dtype)
            continue;
        sc->asview[v] = 1;
        depth[v] = d;
    }
    free(bad);
    free(depth);
    return 0;
}

/* Shape op v, read in place: its view step, after its source's. */
static int lower_view(kiln_program *p, const kiln_graph *g, int v,
                      kiln_err *err)
{
    const kiln_node *n = &g->nodes[v];
    if (p->n_vsteps == p->cap_vsteps) {
        int cap = p->cap_vsteps ? 2 * p->cap_vsteps : 16;
        kiln_vstep *m = realloc(p->vsteps, sizeof *m * (size_t)cap);
        if (!m)
            return nomem(err);
        p->vsteps = m;
        p->cap_vsteps = cap;
    }
    kiln_vstep *st = &p->vsteps[p->n_vsteps];
    memset(st, 0, sizeof *st);
    int sb = p->node_buf[n->in[0]], vb = p->node_buf[v];
    st->prev = buf_chain(p, sb);
    st->root = st->prev ? p->vsteps[st->prev - 1].root : sb;
    st->depth = st->prev ? p->vsteps[st->prev - 1].depth + 1 : 1;
    st->a.buf = vb;
    st->a.recipe = view_recipe(n->op);
    st->a.aux[0] = st->a.aux[1] = -1;
    if (n->op == KILN_OP_TRANSPOSE) {
        int rk = g->nodes[n->in[0]].type.rank;
        for (int i = 0; i < rk; i++) {
            int64_t ax = n->attrs->has_axes ? n->attrs->axes[i] : rk - 1 - i;
            st->a.perm[i] = ax < 0 ? ax + rk : ax;
        }
    }
    if (n->op == KILN_OP_SUBTENSOR)
        st->a.attrs = n->attrs;
    p->scr->vstep_of[vb] = ++p->n_vsteps;
    p->bufs[vb].fused = 1;
    return 0;
}

/* ---- the driver ----------------------------------------------------- */

static int make_buffers(kiln_program *p, kiln_graph *g, kiln_err *err)
{
    p->node_buf = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    if (!p->node_buf)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    /* which literals need a buffer: those read by a non-elementwise op or
     * that are outputs */
    char *need = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!need)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    for (int v = 0; v < g->n_nodes; v++) {
        kiln_node *n = &g->nodes[v];
        int cat = kiln_ir_op_info(n->op)->category;
        int ew = cat == KILN_CAT_ELEMWISE ||
                 n->op == KILN_OP_BROADCAST_TO || n->op == KILN_OP_ALLOC ||
                 n->op == KILN_OP_SET_SUBTENSOR ||
                 n->op == KILN_OP_INC_SUBTENSOR;
        for (int i = 0; i < n->n_in; i++) {
            int setv = (n->op == KILN_OP_SET_SUBTENSOR ||
                        n->op == KILN_OP_INC_SUBTENSOR) && i == 0;
            if (!ew || setv)
                need[n->in[i]] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        need[g->outputs[i].value] = 1;
    for (int v = 0; v < g->n_nodes; v++) {
        kiln_node *n = &g->nodes[v];
        int id;
        switch (n->op) {
        case KILN_OP_INPUT:
            id = add_buf(p, KILN_BUF_INPUT, v, &n->type, err);
            break;
        case KILN_OP_CONST:
        case KILN_OP_SHARED:
        case KILN_OP_LITERAL:
            if (n->op == KILN_OP_LITERAL && !need[v]) {
                p->node_buf[v] = -1;
                continue;
            }
            id = add_buf(p, KILN_BUF_CONST, v, &n->type, err);
            break;
        default: {
            if (n->op == KILN_OP_RESULT) {   /* issue 28 */
                id = result_buf(p, g, n->in[0], n->attrs->index, &n->type,
                                err);
                if (id >= 0)
                    p->bufs[id].node = v;
                break;
            }
            id = add_buf(p, KILN_BUF_TEMP, v, &n->type, err);
            if (id >= 0) {
                kiln_buf *b = &p->bufs[id];
                b->op = n->op;
                b->attrs = n->attrs;
                b->n_in = n->n_in;
                b->in_bufs = malloc(sizeof(int) * (size_t)(n->n_in ? n->n_in
                                                                    : 1));
                if (!b->in_bufs) {
                    free(need);
                    return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
                }
                /* literal inputs have no buffer: -1; shape inference
                 * treats them as rank-0 */
                for (int i = 0; i < n->n_in; i++)
                    b->in_bufs[i] = p->node_buf[n->in[i]];
            }
        }
        }
        if (id < 0) {
            free(need);
            return -id;
        }
        p->node_buf[v] = id;
    }
    free(need);
    return 0;
}

static int plan_slots(kiln_program *p, kiln_graph *g, kiln_err *err)
{
    /* outputs live to the end */
    for (int i = 0; i < g->n_outputs; i++) {
        int b = p->node_buf[g->outputs[i].value];
        if (b >= 0 && p->bufs[b].kind == KILN_BUF_TEMP)
            p->bufs[b].last_step = p->n_steps;
    }
    /* bufs defined at each step, and bufs dying at each step */
    int ns = p->n_steps + 1;
    int *def_head = malloc(sizeof(int) * (size_t)ns);
    int *die_head = malloc(sizeof(int) * (size_t)ns);
    int *def_next = malloc(sizeof(int) * (size_t)(p->n_bufs + 1));
    int *die_next = malloc(sizeof(int) * (size_t)(p->n_bufs + 1));
    int *free_slots = malloc(sizeof(int) * (size_t)(p->n_bufs + 1));
    if (!def_head || !die_head || !def_next || !die_next || !free_slots) {
        free(def_head); free(die_head); free(def_next); free(die_next);
        free(free_slots);
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    }
    for (int s = 0; s < ns; s++)
        def_head[s] = die_head[s] = -1;
    for (int b = 0; b < p->n_bufs; b++) {
        kiln_buf *bb = &p->bufs[b];
        if (bb->kind != KILN_BUF_TEMP || bb->def_step < 0)
            continue;
        def_next[b] = def_head[bb->def_step];
        def_head[bb->def_step] = b;
        die_next[b] = die_head[bb->last_step];
        die_head[bb->last_step] = b;
    }
    int n_free = 0, n_slots = 0;
    for (int s = 0; s < ns; s++) {
        for (int b = def_head[s]; b >= 0; b = def_next[b])
            p->bufs[b].slot = n_free > 0 ? free_slots[--n_free] : n_slots++;
        if (s == p->n_steps)
            break;
        for (int b = die_head[s]; b >= 0; b = die_next[b])
            free_slots[n_free++] = p->bufs[b].slot;
    }
    p->n_slots = n_slots;
    free(def_head); free(die_head); free(def_next); free(die_next);
    free(free_slots);
    return 0;
}

int kiln_lower(kiln_graph *g, kiln_program *p, kiln_err *err)
{
    return kiln_lower_ex(g, p, NULL, err);
}

int kiln_lower_ex(kiln_graph *g, kiln_program *p, const kiln_lower_opts *opts,
                  kiln_err *err)
{
    memset(p, 0, sizeof *p);
    kiln_lower_opts o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    p->opts = &o;
    kiln_lower_scratch sc;
    memset(&sc, 0, sizeof sc);
    p->scr = &sc;
    int rc = lower_all(g, p, err);
    free(sc.buf_slot);
    kiln_fuse_free(&sc.fu);
    free(sc.instr);
    free(sc.uses);
    free(sc.isout);
    free(sc.tnames);
    free(sc.buf_alias);
    free(sc.done);
    free(sc.stk);
    free(sc.inloop);
    free(sc.where);
    free(sc.asview);
    free(sc.vstep_of);
    p->scr = NULL;
    p->opts = NULL;
    return rc;
}

/* Lower live node v at position k of the lowering order: its kernel when
 * v is where its kernel is made (unfused, or a group's root), else
 * nothing (its group's kernel computes it). */
static int lower_node(kiln_program *p, kiln_graph *g, int v, int k,
                      kiln_err *err)
{
    kiln_lower_scratch *sc = p->scr;
    int *group = sc->group;
    kiln_node *n = &g->nodes[v];
    if (sc->asview && sc->asview[v])
        return lower_view(p, g, v, err);
    switch (kiln_ir_op_info(n->op)->category) {
    case KILN_CAT_LEAF: return 0;
    case KILN_CAT_ELEMWISE:
        /* a member of a fused group is computed by its root's kernel */
        if (group && group[v] == v && sc->fu.region[v])
            return lower_region(p, g, v, k, err);
        if (!group || group[v] == v)
            return lower_elemwise(p, g, v, err);
        return 0;
    case KILN_CAT_REDUCE:
        /* a sibling set is one kernel, made at its first root */
        if (group && sc->fu.sib[v] == v)
            return lower_siblings(p, g, v, err);
        if (!group || sc->fu.sib[v] < 0)
            return lower_reduce(p, g, v, err);
        return 0;
    case KILN_CAT_SHAPE: return lower_shape(p, g, v, err);
    case KILN_CAT_INDEX:
        if (n->op == KILN_OP_TAKE)
            return lower_take(p, g, v, err);
        if (n->op == KILN_OP_SUBTENSOR)
            return lower_shape(p, g, v, err);
        return lower_set_subtensor(p, g, v, err);
    case KILN_CAT_DOT: return lower_dot(p, g, v, err);
    case KILN_CAT_SCAN: return lower_scan(p, g, v, err);
    case KILN_CAT_CHECK: return lower_check(p, g, v, err);
    case KILN_CAT_LINALG: return lower_linalg(p, g, v, err);
    case KILN_CAT_RECUR: return lower_recur(p, g, v, err);
    case KILN_CAT_ODE: return lower_ode(p, g, v, err);
    case KILN_CAT_TOPK: return lower_topk(p, g, v, err);   /* issue 29 */
    }
    return 0;
}

static int lower_all(kiln_graph *g, kiln_program *p, kiln_err *err)
{
    int rc = make_buffers(p, g, err);
    if (rc)
        return rc;
    /* Only nodes that an output depends on are lowered. */
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    char *live = calloc(2 * nn, 1);
    if (!live)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    char *viewed = live + nn;   /* a transpose a live dot reads in place */
    for (int i = 0; i < g->n_outputs; i++)
        live[g->outputs[i].value] = 1;
    for (int v = g->n_nodes - 1; v >= 0; v--) {
        if (!live[v])
            continue;
        int dot = kiln_ir_op_info(g->nodes[v].op)->category == KILN_CAT_DOT;
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int u = dot ? kiln_fuse_dot_operand(g, v, i, NULL) : g->nodes[v].in[i];
            live[u] = 1;
            if (u != g->nodes[v].in[i])
                viewed[g->nodes[v].in[i]] = 1;
        }
    }
    kiln_lower_scratch *sc = p->scr;
    if (p->opts->fuse && p->opts->fuse_max_width > 0 &&
        p->opts->fuse_max_ops > 0) {
        rc = kiln_fuse_plan(g, live, p->opts, &sc->fu, err);
        sc->group = sc->fu.group;
        sc->tnames = rc ? NULL : kiln_graph_temp_names(g);  /* NULL: %N */
        if (!rc && !(sc->instr = malloc(sizeof(int) * nn)))
            rc = nomem(err);
        for (int v = 0; !rc && v < g->n_nodes; v++)
            sc->instr[v] = -1;
    }
    if (!rc) {
        sc->uses = calloc(nn, sizeof(int));
        sc->isout = calloc(nn, 1);
        sc->buf_alias = malloc(sizeof(int) * (size_t)(p->n_bufs + 1));
        if (!sc->uses || !sc->isout || !sc->buf_alias)
            rc = nomem(err);
        for (int b = 0; !rc && b < p->n_bufs; b++)
            sc->buf_alias[b] = -1;
        sc->n_alias = rc ? 0 : p->n_bufs;
    }
    for (int v = 0; !rc && v < g->n_nodes; v++)
        for (int i = 0; live[v] && i < g->nodes[v].n_in; i++)
            sc->uses[kiln_ir_op_info(g->nodes[v].op)->category == KILN_CAT_DOT
                         ? kiln_fuse_dot_operand(g, v, i, NULL)
                         : g->nodes[v].in[i]]++;
    for (int i = 0; !rc && i < g->n_outputs; i++)
        sc->isout[g->outputs[i].value] = 1;
    if (!rc && sc->group)
        rc = plan_views(p, g, live, err);
    int *group = sc->group;
    /* the fusion plan's order (topological, each scalar region's members
     * together), else node order */
    int n_visit = group ? sc->fu.n_order : g->n_nodes;
    if (!rc && group && sc->fu.n_loops) {
        sc->inloop = calloc(nn, 1);
        sc->where = malloc(sizeof(int) * nn);
        if (!sc->inloop || !sc->where)
            rc = nomem(err);
        for (int k = 0; !rc && k < n_visit; k++)
            sc->where[sc->fu.order[k]] = k;
    }
    for (int k = 0; k < n_visit && !rc; k++) {
        int v = group ? sc->fu.order[k] : k;
        if (!live[v])
            continue;
        if (group && sc->fu.n_loops) {
            /* a loop is lowered at its anchor; its other kernels with it */
            int a = sc->fu.loop[kiln_fuse_kernel_of(&sc->fu, v)];
            if (a >= 0) {
                if (v == a)
                    rc = lower_loop(p, g, v, err);
                continue;
            }
        }
        rc = lower_node(p, g, v, k, err);
    }
    /* updates in place: a buffer whose shape is inferred from a replaced
     * buffer infers it from the replacement (the replaced one is never
     * computed, so its shape is never set).  Aliases are made in node
     * order, so following one step suffices but chains are followed. */
    for (int i = 0; !rc && sc->buf_alias && i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        for (int k = 0; k < b->n_in; k++) {
            int ib = b->in_bufs ? b->in_bufs[k] : -1;
            while (ib >= 0 && ib < sc->n_alias && sc->buf_alias[ib] >= 0)
                ib = sc->buf_alias[ib];
            if (b->in_bufs)
                b->in_bufs[k] = ib;
        }
    }
    /* fused members are never stored, but their shapes are still checked
     * at call time (vm.c prepare_shapes): add(x: f64[n], c: f64[3]) must
     * still verify that n is 3 or 1 */
    for (int v = 0; group && v < g->n_nodes; v++)
        if (group[v] >= 0 && group[v] != v && p->node_buf[v] >= 0 &&
            !(p->scr->fu.region[v] && p->scr->fu.ext[v]))
            p->bufs[p->node_buf[v]].fused = 1;
    /* a transpose a dot reads in place: its shape, too, is inferred and
     * checked at call time (the dot's shape is inferred from it) */
    for (int v = 0; v < g->n_nodes; v++)
        if (p->node_buf[v] >= 0 && viewed[v] && !live[v])
            p->bufs[p->node_buf[v]].fused = 1;
    free(live);
    /* A buffer of static type still needs its shape checked at run time
     * when an input's type is symbolic: add(x: f64[n], c: f64[3]) has type
     * (3), and a call must verify that n is 3 or 1. */
    for (int i = 0; i < p->n_bufs; i++) {
        kiln_buf *b = &p->bufs[i];
        for (int k = 0; b->kind == KILN_BUF_TEMP && k < b->n_in; k++)
            if (b->in_bufs[k] >= 0 && !type_static(&p->bufs[b->in_bufs[k]].type))
                b->is_static = 0;
    }
    /* the steps array moved while it grew: point each kernel's label at
     * its step's final place */
    for (int i = 0; i < p->n_steps; i++)
        p->steps[i].kernel.label = p->steps[i].label;
    if (!rc)
        rc = plan_slots(p, g, err);
    if (!rc && p->opts->lift && kiln_lower_lift(p))
        rc = nomem(err);
    return rc;
}

void kiln_lower_free(kiln_program *p)
{
    for (int i = 0; i < p->n_bufs; i++) {
        free(p->bufs[i].in_bufs);
        free(p->bufs[i].attrs_owned);
        free(p->bufs[i].owned);
    }
    for (int i = 0; i < p->n_steps; i++) {
        kiln_step *s = &p->steps[i];
        free(s->in);  /* with out, in_desc, out_desc, vin, vout */
        free(s->instrs);
        free(s->out_refs);
        free(s->members);
        free(s->roles);
        free(s->out_index);
        free(s->consts);
        free(s->body_bytes);
        free(s->view_attrs);
    }
    free(p->bufs);
    free(p->steps);
    free(p->node_buf);
    free(p->vsteps);
    memset(p, 0, sizeof *p);
}

/* ---- views at call time -------------------------------------------- */

static void contiguous(kiln_view *v)
{
    /* the product only overflows for a tensor with no elements (a
     * buffer's byte size fits in int64, vm.c), whose strides are never
     * used: saturate to 0 instead of overflowing */
    int64_t st = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        v->strides[i] = st;
        if (v->shape[i] != 0 && st > INT64_MAX / v->shape[i])
            st = 0;
        else
            st *= v->shape[i];
    }
}

/* Apply recipe a->recipe to view *v (the buffer as it is, or the view
 * earlier steps of a chain made of it) for iteration shape iter. */
static void apply_recipe(const kiln_program *p, const kiln_arg *a,
                         int iter_rank, const int64_t *iter_shape,
                         kiln_view *v)
{
    size_t esz = kiln_dtype_size((kiln_dtype)v->dtype);
    switch (a->recipe) {
    case KILN_VIEW_FULL:
        return;
    case KILN_VIEW_BCAST: {
        kiln_view src = *v;
        v->rank = iter_rank;
        for (int i = 0; i < iter_rank; i++) {
            int j = i - (iter_rank - src.rank);
            v->shape[i] = iter_shape[i];
            v->strides[i] = j < 0 || src.shape[j] == 1 ? 0 : src.strides[j];
        }
        return;
    }
    case KILN_VIEW_RESHAPE:
        v->rank = iter_rank;
        for (int i = 0; i < iter_rank; i++)
            v->shape[i] = iter_shape[i];
        contiguous(v);
        return;
    case KILN_VIEW_TRANSPOSE: {
        kiln_view src = *v;
        for (int i = 0; i < src.rank; i++) {
            v->shape[i] = src.shape[a->perm[i]];
            v->strides[i] = src.strides[a->perm[i]];
        }
        return;
    }
    case KILN_VIEW_SUBTENSOR: {
        kiln_view src = *v;
        const kiln_attrs *at = a->attrs;
        int64_t off = 0;
        int r = 0;
        for (int i = 0; i < src.rank; i++) {
            if (i >= at->nidx) {
                v->shape[r] = src.shape[i];
                v->strides[r++] = src.strides[i];
                continue;
            }
            const kiln_index *ix = &at->idx[i];
            if (ix->kind == KILN_INDEX_INT) {
                int64_t k = ix->start < 0 ? ix->start + src.shape[i]
                                          : ix->start;
                off += k * src.strides[i];
                continue;
            }
            int64_t len;
            int64_t st = kiln_ir_slice_start(src.shape[i], ix, &len);
            int64_t step = ix->has_step ? ix->step : 1;
            if (len > 0)
                off += st * src.strides[i];
            v->shape[r] = len;
            /* with len > 1 the slice stays inside the axis, so
             * |step * stride| is bounded by the buffer; with len <= 1
             * the step (perhaps near INT64_MAX) is never applied */
            v->strides[r++] = len > 1 ? src.strides[i] * step
                                      : src.strides[i];
        }
        v->rank = r;
        v->data = (char *)v->data + off * (int64_t)esz;
        return;
    }
    case KILN_VIEW_REDUCE_OUT: {
        /* iteration rank, buffer strides on kept axes, 0 on reduced */
        kiln_view src = *v;
        v->rank = iter_rank;
        int j = 0;
        for (int i = 0; i < iter_rank; i++) {
            v->shape[i] = iter_shape[i];
            if (a->perm[i]) {
                v->strides[i] = 0;
                if (a->keepdims)
                    j++;
            } else {
                v->strides[i] = src.strides[j++];
            }
        }
        return;
    }
    case KILN_VIEW_EXPAND: {
        kiln_view src = *v;
        v->rank = src.rank + 1;
        for (int i = 0, j = 0; i < v->rank; i++) {
            if (i == a->axis) {
                v->shape[i] = 1;
                v->strides[i] = 0;
            } else {
                v->shape[i] = src.shape[j];
                v->strides[i] = src.strides[j++];
            }
        }
        return;
    }
    case KILN_VIEW_BCAST_TAKE: {
        const kiln_buf *x = &p->bufs[a->aux[0]];
        const kiln_buf *ix = &p->bufs[a->aux[1]];
        int64_t tshape[KILN_MAX_RANK];
        int tr = 0;
        for (int i = 0; i < a->axis; i++)
            tshape[tr++] = x->shape[i];
        for (int i = 0; i < ix->rank; i++)
            tshape[tr++] = ix->shape[i];
        for (int i = a->axis + 1; i < x->rank; i++)
            tshape[tr++] = x->shape[i];
        kiln_arg bc = *a;
        bc.recipe = KILN_VIEW_BCAST;
        apply_recipe(p, &bc, tr, tshape, v);
        return;
    }
    case KILN_VIEW_MATMUL: {
        kiln_view src = *v;
        int r = src.rank;
        if (a->keepdims && r >= 2) {
            v->shape[r - 2] = src.shape[r - 1];
            v->strides[r - 2] = src.strides[r - 1];
            v->shape[r - 1] = src.shape[r - 2];
            v->strides[r - 1] = src.strides[r - 2];
        }
        if (r == 1) {   /* a row [1, k] or a column [k, 1] */
            int u = a->axis == 0 ? 0 : 1;
            v->shape[1 - u] = src.shape[0];
            v->strides[1 - u] = src.strides[0];
            v->shape[u] = 1;
            v->strides[u] = 0;
            r = 2;
        }
        kiln_view core = *v;
        v->rank = iter_rank;
        for (int i = iter_rank - 1, j = r - 1; i >= 0; i--, j--) {
            int64_t ext = j >= 0 ? core.shape[j] : 1;
            int64_t st = j >= 0 ? core.strides[j] : 0;
            if (i < iter_rank - 2 && ext == 1 && iter_shape[i] != 1) {
                ext = iter_shape[i];
                st = 0;
            }
            v->shape[i] = ext;
            v->strides[i] = st;
        }
        return;
    }
    case KILN_VIEW_UNITS: {
        /* the view's dims other than 1, in order, are the iteration
         * shape's: size-1 axes come and go.  A size-1 axis gets the
         * stride a contiguous layout would give it (any stride is
         * right; this one keeps contiguous views contiguous) */
        kiln_view src = *v;
        v->rank = iter_rank;
        for (int i = 0, j = 0; i < iter_rank; i++) {
            v->shape[i] = iter_shape[i];
            if (iter_shape[i] == 1)
                continue;
            while (j < src.rank && src.shape[j] == 1)
                j++;
            v->strides[i] = j < src.rank ? src.strides[j++] : 0;
        }
        int64_t next = 1;
        for (int i = iter_rank - 1; i >= 0; i--) {
            if (v->shape[i] == 1)
                v->strides[i] = next;
            else
                next = v->strides[i] * v->shape[i];
        }
        return;
    }
    }
}

void kiln_lower_view(const kiln_program *p, const kiln_arg *a, int iter_rank,
                     const int64_t *iter_shape, kiln_view *v)
{
    const kiln_buf *b = &p->bufs[a->buf];
    v->data = b->data;
    v->dtype = b->type.dtype;
    v->rank = b->rank;
    for (int i = 0; i < b->rank; i++)
        v->shape[i] = b->shape[i];
    contiguous(v);
    if (a->chain > 0) {
        /* the shape ops read in place, from the source outwards (a
         * chain is at most KILN_VIEW_MAX_CHAIN steps: lower.c) */
        int idx[KILN_VIEW_MAX_CHAIN], n = 0;
        for (int k = a->chain; k > 0 && n < KILN_VIEW_MAX_CHAIN;
             k = p->vsteps[k - 1].prev)
            idx[n++] = k - 1;
        while (n > 0) {
            const kiln_vstep *st = &p->vsteps[idx[--n]];
            const kiln_buf *t = &p->bufs[st->a.buf];
            apply_recipe(p, &st->a, t->rank, t->shape, v);
        }
    }
    apply_recipe(p, a, iter_rank, iter_shape, v);
}
