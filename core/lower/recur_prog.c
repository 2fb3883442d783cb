/*
 * recur_prog.c — the pass `recur`: a scan whose body computes rank-0
 * elementwise values only becomes one RECUR loop kernel with the body
 * fused in as its scalar program (include/kiln/backend.h,
 * KILN_KERNEL_RECUR, ABI 1.10).  Other bodies keep the host path
 * (core/runtime/recur.c: one call of the body's compiled function per
 * step).
 *
 * The body is cloned and rewritten with the caller's passes first, as
 * the host path's compile of the body rewrites it (core/compile/driver.c
 * attach_recur), so both paths compute the same graph.  Its live nodes
 * then become instructions in order: an INPUT is a LOAD of the kernel's
 * input of the same index (carries, sequence elements, args: the
 * kernel's inputs are the scan's), a rank-0 CONST a CONST, and every
 * elementwise node the instructions lower.c gives it
 * (kiln_lower_emit_scalar_node), so promotion, compute dtypes and the
 * lowered ops (isnan, sign, clip, n-ary add/mul) stay in one place.
 * Literals are inlined by that emission as everywhere.
 */
#include "lower.h"
#include "rewrite/rewrite.h"

#include <stdlib.h>
#include <string.h>

/* More instructions than this: the host path (a program this long is no
 * scalar recurrence, and llvm segments programs above 512). */
#define RECUR_MAX_INSTRS 4096

/* The step's arguments fit the fused kernel: rank-0 carries and args,
 * rank-1 sequences, rank-0 final carries, rank-1 stacked outputs, and no
 * output sharing a buffer (or a storage slot) with an input. */
static int step_fits(const kiln_program *p, const kiln_step *s)
{
    uint32_t nc = s->kernel.n_carry, ns = s->kernel.n_seq;
    if ((uint64_t)nc + ns > (uint64_t)s->n_in || (int)nc > s->n_out)
        return 0;
    for (int i = 0; i < s->n_in; i++) {
        unsigned want = (uint32_t)i >= nc && (uint32_t)i < nc + ns;
        if (s->in_desc[i].rank != want)
            return 0;
    }
    for (int k = 0; k < s->n_out; k++) {
        if (s->out_desc[k].rank != ((uint32_t)k >= nc))
            return 0;
        const kiln_buf *ob = &p->bufs[s->out[k].buf];
        for (int i = 0; i < s->n_in; i++) {
            const kiln_buf *ib = &p->bufs[s->in[i].buf];
            if (s->in[i].buf == s->out[k].buf ||
                (ob->kind == KILN_BUF_TEMP && ib->kind == KILN_BUF_TEMP &&
                 ob->slot >= 0 && ob->slot == ib->slot))
                return 0;
        }
    }
    return 1;
}

static int oom(kiln_err *err)
{
    kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    return -1;
}

/* The value of a rank-0 CONST node as an instruction immediate; 0 when
 * it has no exact double (an i64 beyond 2^53). */
static int const_imm(const kiln_node *n, double *out)
{
    if (!n->data || n->nbytes < kiln_dtype_size(n->type.dtype))
        return 0;
    switch (n->type.dtype) {
    case KILN_F64: { double x; memcpy(&x, n->data, sizeof x); *out = x;
                     return 1; }
    case KILN_F32: { float x; memcpy(&x, n->data, sizeof x); *out = x;
                     return 1; }
    case KILN_I32: { int32_t x; memcpy(&x, n->data, sizeof x); *out = x;
                     return 1; }
    case KILN_I64: {
        int64_t x;
        memcpy(&x, n->data, sizeof x);
        *out = (double)x;
        return x >= -(INT64_C(1) << 53) && x <= (INT64_C(1) << 53);
    }
    case KILN_BOOL: { uint8_t x; memcpy(&x, n->data, 1); *out = x != 0;
                      return 1; }
    default:
        return 0;
    }
}

/* Build the program of body b (rewritten) for step s into pb and outs;
 * 1 when it fits, 0 when the host path keeps it, -1 on an error. */
static int build(prog_builder *pb, kiln_graph *b, const kiln_step *s,
                 int *outs, kiln_err *err)
{
    int nn = b->n_nodes;
    char *live = calloc((size_t)(nn ? nn : 1), 1);
    int *instr_of = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    int rc = 1, n_inputs = 0;
    if (!live || !instr_of) {
        rc = oom(err);
        goto done;
    }
    for (int k = 0; k < b->n_outputs; k++)
        live[b->outputs[k].value] = 1;
    for (int v = nn; v-- > 0;)
        if (live[v])
            for (int i = 0; i < b->nodes[v].n_in; i++)
                live[b->nodes[v].in[i]] = 1;
    for (int v = 0; v < nn && rc == 1; v++) {
        kiln_node *n = &b->nodes[v];
        instr_of[v] = -1;
        if (n->op == KILN_OP_INPUT) {
            int i = n_inputs++;
            if (!live[v])
                continue;
            if (n->type.rank != 0 || i >= s->n_in ||
                s->in_desc[i].dtype != (uint8_t)n->type.dtype) {
                rc = 0;
                break;
            }
            instr_of[v] = kiln_lower_emit(pb, KILN_I_LOAD, n->type.dtype, i,
                                          -1, -1, 0);
        } else if (!live[v] || n->op == KILN_OP_LITERAL) {
            continue;   /* literals: inlined where they are read */
        } else if (n->type.rank != 0) {
            rc = 0;
        } else if (n->op == KILN_OP_CONST) {
            double imm;
            if (!const_imm(n, &imm)) {
                rc = 0;
                break;
            }
            instr_of[v] = kiln_lower_emit(pb, KILN_I_CONST, n->type.dtype, -1,
                                          -1, -1, imm);
        } else if (kiln_ir_op_info(n->op)->category != KILN_CAT_ELEMWISE) {
            rc = 0;   /* take, check, reductions, shapes, nested scans */
        } else {
            instr_of[v] = kiln_lower_emit_scalar_node(pb, b, v, instr_of,
                                                      err);
            if (instr_of[v] < 0)
                rc = -1;
        }
        if (rc == 1 && instr_of[v] < 0)
            rc = oom(err);
        if (rc == 1 && pb->n > RECUR_MAX_INSTRS)
            rc = 0;
    }
    if (rc == 1 && (n_inputs != s->n_in || b->n_outputs != s->n_out))
        rc = 0;
    for (int k = 0; k < b->n_outputs && rc == 1; k++) {
        kiln_node *n = &b->nodes[b->outputs[k].value];
        if ((uint8_t)n->type.dtype != s->out_desc[k].dtype || n->type.rank) {
            rc = 0;
            break;
        }
        int r = n->op == KILN_OP_LITERAL
                    ? kiln_lower_emit(pb, KILN_I_CONST, n->type.dtype, -1, -1,
                                      -1, n->value)
                    : instr_of[b->outputs[k].value];
        if (r < 0)
            rc = oom(err);
        outs[k] = r;
    }
done:
    free(live);
    free(instr_of);
    return rc;
}

/* Step s's program, when its body fits: 0 (with or without one), or an
 * error code. */
static int attach_one(kiln_program *p, const kiln_graph *g, kiln_step *s,
                      const kiln_rw_config *rwc, kiln_err *err)
{
    const kiln_node *n = &g->nodes[s->node];
    if (!n->attrs || !n->attrs->body || !step_fits(p, s))
        return 0;
    kiln_graph *b = kiln_ir_clone(n->attrs->body, err);
    if (!b)
        return err ? err->code : KILN_ERR_NOMEM;
    if (rwc && kiln_rw_run(&b, rwc, NULL, NULL, err)) {
        /* the host path compiles the body with the same passes and says
         * what failed */
        int code = err ? err->code : 0;
        kiln_graph_free(b);
        if (code == KILN_ERR_NOMEM)
            return code;
        if (err) {
            err->code = 0;
            err->message[0] = 0;
        }
        return 0;
    }
    prog_builder pb = {0};
    int *outs = malloc(sizeof(int) * (size_t)(s->n_out ? s->n_out : 1));
    int rc = outs ? build(&pb, b, s, outs, err) : oom(err);
    kiln_graph_free(b);
    if (rc == 1 && pb.n > 0) {
        s->out_refs = malloc(sizeof(int32_t) * (size_t)s->n_out);
        if (!s->out_refs) {
            rc = oom(err);
        } else {
            for (int k = 0; k < s->n_out; k++)
                s->out_refs[k] = outs[k];
            s->instrs = pb.ins;
            pb.ins = NULL;
            s->kernel.n_instrs = (uint32_t)pb.n;
            s->kernel.instrs = s->instrs;
            s->kernel.out_refs = s->out_refs;
        }
    }
    free(pb.ins);
    free(outs);
    return rc < 0 ? (err && err->code ? err->code : KILN_ERR_NOMEM) : 0;
}

int kiln_recur_attach_programs(kiln_program *prog, const kiln_graph *g,
                               const struct kiln_rw_config *rwc,
                               kiln_err *err)
{
    if (!rwc || !((rwc->passes >> KILN_PASS_RECUR) & 1))
        return 0;
    for (int i = 0; i < prog->n_steps; i++) {
        kiln_step *s = &prog->steps[i];
        if (s->kernel.kind != KILN_KERNEL_RECUR || s->kernel.n_instrs)
            continue;
        int rc = attach_one(prog, g, s, rwc, err);
        if (rc)
            return rc;
    }
    return 0;
}
