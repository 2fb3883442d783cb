/*
 * test_recur_kernel.c — hand-built RECUR kernels with a program (ABI
 * 1.10: the fused scan loop) on every backend through its plugin entry
 * points, as the host calls them (compile, load, fn; prepare / run).
 *
 * Kernels: arma11's forward step (1 carry, 2 sequences, 3 args, the
 * carry and the errors stacked), a GARCH(1,1) step (2 carries, one a
 * running log density through the runtime's log, a stacked sqrt),
 * arma's VJP step (3 carries, 4 sequences), a kernel of i64, bool and f32
 * carries with no sequence (T from its stacked f64 and bool outputs), a
 * carries-only kernel (T = n_steps), carries that read each other (a
 * swap: all replaced at once; a LOAD as a stacked output) and a
 * 600-instruction chain.  Each
 * runs at T = 0 (empty sequences and stacked outputs without data), 1, 2
 * and 1000 with sequences and stacked outputs of stride 1, 2 and -1, called unprepared and prepared, and must equal a
 * C loop written here (the same operations in the same order, the
 * runtime table's functions) bit for bit, and so every backend equals
 * every other.  llvm refuses the 600-instruction program (more than its
 * 512-instruction segment) and tcc runs it; a sequence whose length
 * differs from the others' is refused with a message, and so is an
 * output that is an input (outputs alias nothing).  A backend that
 * refuses the kind (the interpreter before its RECUR support) is
 * skipped with a note.  The interpreter may refuse to prepare (it runs
 * RECUR in fn), tcc and llvm must prepare.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "tap.h"
#include "open_backend.h"
#include "compile_load.h"

static const kiln_runtime *RT;

/* ---- kernels ----------------------------------------------------------- */

#define I_(op, dt, a, b, c) {KILN_I_##op, KILN_##dt, 0, a, b, c, 0}
#define C_(dt, v) {KILN_I_CONST, KILN_##dt, 0, -1, -1, -1, v}

/* arma11: err' = e, e_t = e, e = y - ((mu + phi * yprev) + theta * err) */
static const kiln_instr arma_prog[] = {
    I_(LOAD, F64, 0, -1, -1), I_(LOAD, F64, 1, -1, -1),
    I_(LOAD, F64, 2, -1, -1), I_(LOAD, F64, 3, -1, -1),
    I_(LOAD, F64, 4, -1, -1), I_(LOAD, F64, 5, -1, -1),
    I_(MUL, F64, 4, 2, -1),   /* 6: phi * yprev */
    I_(ADD, F64, 3, 6, -1),   /* 7: mu + 6 */
    I_(MUL, F64, 5, 0, -1),   /* 8: theta * err */
    I_(ADD, F64, 7, 8, -1),   /* 9: nu */
    I_(SUB, F64, 1, 9, -1),   /* 10: e */
};
static const int32_t arma_refs[] = {10, 10};
static const kiln_arg_desc arma_in[] = {
    {KILN_F64, 0, {0}}, {KILN_F64, 1, {0}}, {KILN_F64, 1, {0}},
    {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}};
static const kiln_arg_desc arma_out[] = {{KILN_F64, 0, {0}},
                                         {KILN_F64, 1, {0}}};

#define F(v, t) (((const double *)(v).data)[(t) * (v).strides[0]])
#define S(v) (*(const double *)(v).data)
#define OUT(v, t) (((double *)(v).data)[(t) * (v).strides[0]])

static void arma_ref(int64_t T, const kiln_view *in, const kiln_view *out)
{
    double err = S(in[0]), mu = S(in[3]), phi = S(in[4]), th = S(in[5]);
    for (int64_t t = 0; t < T; t++) {
        double nu = (mu + phi * F(in[2], t)) + th * err;
        double e = F(in[1], t) - nu;
        OUT(out[1], t) = e;
        err = e;
    }
    *(double *)out[0].data = err;
}

/* GARCH(1,1): s2' = (a0 + a1 * (yprev - mu)^2) + b1 * s2,
 * lp' = lp + (-0.5 * log(s2') - 0.5 * (y - mu)^2 / s2'),
 * sigma_t = sqrt(s2') */
static const kiln_instr garch_prog[] = {
    I_(LOAD, F64, 0, -1, -1),  /* 0 s2 */
    I_(LOAD, F64, 1, -1, -1),  /* 1 lp */
    I_(LOAD, F64, 2, -1, -1),  /* 2 y */
    I_(LOAD, F64, 3, -1, -1),  /* 3 yprev */
    I_(LOAD, F64, 4, -1, -1),  /* 4 mu */
    I_(LOAD, F64, 5, -1, -1),  /* 5 a0 */
    I_(LOAD, F64, 6, -1, -1),  /* 6 a1 */
    I_(LOAD, F64, 7, -1, -1),  /* 7 b1 */
    I_(SUB, F64, 3, 4, -1),    /* 8 yprev - mu */
    I_(SQUARE, F64, 8, -1, -1),/* 9 */
    I_(MUL, F64, 6, 9, -1),    /* 10 a1 * 9 */
    I_(ADD, F64, 5, 10, -1),   /* 11 a0 + 10 */
    I_(MUL, F64, 7, 0, -1),    /* 12 b1 * s2 */
    I_(ADD, F64, 11, 12, -1),  /* 13 s2' */
    I_(LOG, F64, 13, -1, -1),  /* 14 */
    C_(F64, -0.5),             /* 15 */
    I_(MUL, F64, 15, 14, -1),  /* 16 */
    I_(SUB, F64, 2, 4, -1),    /* 17 y - mu */
    I_(SQUARE, F64, 17, -1, -1), /* 18 */
    I_(MUL, F64, 15, 18, -1),  /* 19 -0.5 * 18 */
    I_(TRUE_DIV, F64, 19, 13, -1), /* 20 */
    I_(ADD, F64, 16, 20, -1),  /* 21 */
    I_(ADD, F64, 1, 21, -1),   /* 22 lp' */
    I_(SQRT, F64, 13, -1, -1), /* 23 sigma */
};
static const int32_t garch_refs[] = {13, 22, 23};
static const kiln_arg_desc garch_in[] = {
    {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 1, {0}},
    {KILN_F64, 1, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}},
    {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}};
static const kiln_arg_desc garch_out[] = {
    {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 1, {0}}};

static void garch_ref(int64_t T, const kiln_view *in, const kiln_view *out)
{
    double s2 = S(in[0]), lp = S(in[1]), mu = S(in[4]), a0 = S(in[5]),
           a1 = S(in[6]), b1 = S(in[7]);
    for (int64_t t = 0; t < T; t++) {
        double d = F(in[3], t) - mu;
        double s2n = (a0 + a1 * (d * d)) + b1 * s2;
        double r = F(in[2], t) - mu;
        double lpn = lp + (-0.5 * RT->log(s2n) + (-0.5 * (r * r)) / s2n);
        OUT(out[2], t) = sqrt(s2n);
        s2 = s2n;
        lp = lpn;
    }
    *(double *)out[0].data = s2;
    *(double *)out[1].data = lp;
}

/* arma's VJP step: tot = gc + ge * w; gc' = -(theta * tot);
 * gphi' = gphi - yprev * tot; gth' = gth - err * tot; gy_t = tot */
static const kiln_instr vjp_prog[] = {
    I_(LOAD, F64, 0, -1, -1),  /* 0 gc */
    I_(LOAD, F64, 1, -1, -1),  /* 1 gphi */
    I_(LOAD, F64, 2, -1, -1),  /* 2 gth */
    I_(LOAD, F64, 3, -1, -1),  /* 3 ge */
    I_(LOAD, F64, 4, -1, -1),  /* 4 err */
    I_(LOAD, F64, 5, -1, -1),  /* 5 yprev */
    I_(LOAD, F64, 6, -1, -1),  /* 6 w */
    I_(LOAD, F64, 8, -1, -1),  /* 7 theta (input 7, phi, is unused) */
    I_(MUL, F64, 3, 6, -1),    /* 8 */
    I_(ADD, F64, 0, 8, -1),    /* 9 tot */
    I_(MUL, F64, 7, 9, -1),    /* 10 */
    I_(NEG, F64, 10, -1, -1),  /* 11 gc' */
    I_(MUL, F64, 5, 9, -1),    /* 12 */
    I_(SUB, F64, 1, 12, -1),   /* 13 gphi' */
    I_(MUL, F64, 4, 9, -1),    /* 14 */
    I_(SUB, F64, 2, 14, -1),   /* 15 gth' */
};
static const int32_t vjp_refs[] = {11, 13, 15, 9};
static const kiln_arg_desc vjp_in[] = {
    {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}},
    {KILN_F64, 1, {0}}, {KILN_F64, 1, {0}}, {KILN_F64, 1, {0}},
    {KILN_F64, 1, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}};
static const kiln_arg_desc vjp_out[] = {
    {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}},
    {KILN_F64, 1, {0}}};

static void vjp_ref(int64_t T, const kiln_view *in, const kiln_view *out)
{
    double gc = S(in[0]), gphi = S(in[1]), gth = S(in[2]), th = S(in[8]);
    for (int64_t t = 0; t < T; t++) {
        double tot = gc + F(in[3], t) * F(in[6], t);
        double gcn = -(th * tot);
        double gphin = gphi - F(in[5], t) * tot;
        double gthn = gth - F(in[4], t) * tot;
        OUT(out[3], t) = tot;
        gc = gcn;
        gphi = gphin;
        gth = gthn;
    }
    *(double *)out[0].data = gc;
    *(double *)out[1].data = gphi;
    *(double *)out[2].data = gth;
}

/* i64, bool and f32 carries, no sequence: cnt' = cnt + step, flag' =
 * !flag, x' = flag ? x * scale + (f32)cnt : x; stacked (f64)cnt' * 0.5
 * and flag' */
static const kiln_instr mixed_prog[] = {
    I_(LOAD, I64, 0, -1, -1),  /* 0 cnt */
    I_(LOAD, BOOL, 1, -1, -1), /* 1 flag */
    I_(LOAD, F32, 2, -1, -1),  /* 2 x */
    I_(LOAD, I64, 3, -1, -1),  /* 3 step */
    I_(LOAD, F32, 4, -1, -1),  /* 4 scale */
    I_(ADD, I64, 0, 3, -1),    /* 5 cnt' */
    I_(NOT, BOOL, 1, -1, -1),  /* 6 flag' */
    I_(MUL, F32, 2, 4, -1),    /* 7 */
    I_(CAST, F32, 0, -1, -1),  /* 8 */
    I_(ADD, F32, 7, 8, -1),    /* 9 */
    I_(WHERE, F32, 1, 9, 2),   /* 10 x' */
    I_(CAST, F64, 5, -1, -1),  /* 11 */
    C_(F64, 0.5),              /* 12 */
    I_(MUL, F64, 11, 12, -1),  /* 13 */
};
static const int32_t mixed_refs[] = {5, 6, 10, 13, 6};
static const kiln_arg_desc mixed_in[] = {
    {KILN_I64, 0, {0}}, {KILN_BOOL, 0, {0}}, {KILN_F32, 0, {0}},
    {KILN_I64, 0, {0}}, {KILN_F32, 0, {0}}};
static const kiln_arg_desc mixed_out[] = {
    {KILN_I64, 0, {0}}, {KILN_BOOL, 0, {0}}, {KILN_F32, 0, {0}},
    {KILN_F64, 1, {0}}, {KILN_BOOL, 1, {0}}};

static void mixed_ref(int64_t T, const kiln_view *in, const kiln_view *out)
{
    int64_t cnt = *(const int64_t *)in[0].data;
    uint8_t flag = *(const uint8_t *)in[1].data;
    float x = *(const float *)in[2].data;
    int64_t step = *(const int64_t *)in[3].data;
    float scale = *(const float *)in[4].data;
    for (int64_t t = 0; t < T; t++) {
        int64_t cn = (int64_t)((uint64_t)cnt + (uint64_t)step);
        uint8_t fn = flag == 0;
        float xn = flag ? x * scale + (float)cnt : x;
        OUT(out[3], t) = (double)cn * 0.5;
        ((uint8_t *)out[4].data)[t * out[4].strides[0]] = fn;
        cnt = cn;
        flag = fn;
        x = xn;
    }
    *(int64_t *)out[0].data = cnt;
    *(uint8_t *)out[1].data = flag;
    *(float *)out[2].data = x;
}

/* carries only, T = n_steps = 5: cnt' = cnt + 1, acc' = acc * 1.5 +
 * (f64)cnt */
static const kiln_instr count_prog[] = {
    I_(LOAD, I64, 0, -1, -1), I_(LOAD, F64, 1, -1, -1),
    {KILN_I_CONST, KILN_I64, 0, -1, -1, -1, 1},
    I_(ADD, I64, 0, 2, -1),   /* 3 */
    C_(F64, 1.5),             /* 4 */
    I_(MUL, F64, 1, 4, -1),   /* 5 */
    I_(CAST, F64, 0, -1, -1), /* 6 */
    I_(ADD, F64, 5, 6, -1),   /* 7 */
};
static const int32_t count_refs[] = {3, 7};
static const kiln_arg_desc count_in[] = {{KILN_I64, 0, {0}},
                                         {KILN_F64, 0, {0}}};
static const kiln_arg_desc count_out[] = {{KILN_I64, 0, {0}},
                                          {KILN_F64, 0, {0}}};

static void count_ref(int64_t T, const kiln_view *in, const kiln_view *out)
{
    int64_t cnt = *(const int64_t *)in[0].data;
    double acc = S(in[1]);
    for (int64_t t = 0; t < T; t++) {
        double an = acc * 1.5 + (double)cnt;
        cnt = cnt + 1;
        acc = an;
    }
    *(int64_t *)out[0].data = cnt;
    *(double *)out[1].data = acc;
}

/* carries that read each other: a' = b, b' = (a + b) * 0.5 (every
 * carry replaced at once); stacked: a itself (a LOAD as an output, the
 * trajectory's case) and a' */
static const kiln_instr swap_prog[] = {
    I_(LOAD, F64, 0, -1, -1), I_(LOAD, F64, 1, -1, -1),
    I_(ADD, F64, 0, 1, -1),   /* 2 */
    C_(F64, 0.5),             /* 3 */
    I_(MUL, F64, 2, 3, -1),   /* 4 b' */
};
static const int32_t swap_refs[] = {1, 4, 0, 1};
static const kiln_arg_desc swap_in[] = {{KILN_F64, 0, {0}},
                                        {KILN_F64, 0, {0}}};
static const kiln_arg_desc swap_out[] = {
    {KILN_F64, 0, {0}}, {KILN_F64, 0, {0}}, {KILN_F64, 1, {0}},
    {KILN_F64, 1, {0}}};

static void swap_ref(int64_t T, const kiln_view *in, const kiln_view *out)
{
    double a = S(in[0]), b = S(in[1]);
    for (int64_t t = 0; t < T; t++) {
        double an = b, bn = (a + b) * 0.5;
        OUT(out[2], t) = a;
        OUT(out[3], t) = an;
        a = an;
        b = bn;
    }
    *(double *)out[0].data = a;
    *(double *)out[1].data = b;
}

/* 600 instructions: x' = (((x * a) + 0.25) * a + 0.25) ..., y_t = x' */
#define WIDE 600
static kiln_instr wide_prog[WIDE];
static const int32_t wide_refs[] = {WIDE - 1, WIDE - 1};
static const kiln_arg_desc wide_in[] = {{KILN_F64, 0, {0}},
                                        {KILN_F64, 0, {0}}};
static const kiln_arg_desc wide_out[] = {{KILN_F64, 0, {0}},
                                         {KILN_F64, 1, {0}}};

static void wide_init(void)
{
    kiln_instr l0 = I_(LOAD, F64, 0, -1, -1), l1 = I_(LOAD, F64, 1, -1, -1),
               c = C_(F64, 0.25);
    wide_prog[0] = l0;
    wide_prog[1] = l1;
    wide_prog[2] = c;
    wide_prog[3] = (kiln_instr)I_(MUL, F64, 0, 1, -1);
    for (int i = 4; i < WIDE; i++)
        wide_prog[i] = i % 2 ? (kiln_instr)I_(MUL, F64, i - 1, 1, -1)
                             : (kiln_instr)I_(ADD, F64, i - 1, 2, -1);
}

static void wide_ref(int64_t T, const kiln_view *in, const kiln_view *out)
{
    double x = S(in[0]), a = S(in[1]);
    for (int64_t t = 0; t < T; t++) {
        x = x * a;
        for (int i = 4; i < WIDE; i++)
            x = i % 2 ? x * a : x + 0.25;
        OUT(out[1], t) = x;
    }
    *(double *)out[0].data = x;
}

typedef struct kdef {
    const char *name;
    const kiln_instr *prog;
    uint32_t n_instrs, n_in, n_out, nc, ns;
    const kiln_arg_desc *in, *out;
    const int32_t *refs;
    int64_t n_steps;
    void (*ref)(int64_t, const kiln_view *, const kiln_view *);
    double init[9];   /* the rank-0 inputs' values (by input index) */
} kdef;

#define N_(a) (uint32_t)(sizeof a / sizeof a[0])
static const kdef KERNELS[] = {
    {"arma", arma_prog, N_(arma_prog), 6, 2, 1, 2, arma_in, arma_out,
     arma_refs, -1, arma_ref, {0.3, 0, 0, 0.1, 0.5, 0.2}},
    {"garch", garch_prog, N_(garch_prog), 8, 3, 2, 2, garch_in, garch_out,
     garch_refs, -1, garch_ref, {0.04, -1.0, 0, 0, 0.05, 0.01, 0.2, 0.7}},
    {"vjp", vjp_prog, N_(vjp_prog), 9, 4, 3, 4, vjp_in, vjp_out, vjp_refs,
     -1, vjp_ref, {0.125, 0.0, 0.0, 0, 0, 0, 0, 0.5, 0.2}},
    {"mixed", mixed_prog, N_(mixed_prog), 5, 5, 3, 0, mixed_in, mixed_out,
     mixed_refs, -1, mixed_ref, {7, 1, 0.75, 3, 0.5}},
    {"count", count_prog, N_(count_prog), 2, 2, 2, 0, count_in, count_out,
     count_refs, 5, count_ref, {-2, 0.5}},
    {"swap", swap_prog, N_(swap_prog), 2, 4, 2, 0, swap_in, swap_out,
     swap_refs, -1, swap_ref, {1.0, -3.0}},
    {"wide", wide_prog, WIDE, 2, 2, 1, 0, wide_in, wide_out, wide_refs, -1,
     wide_ref, {0.1, 0.5}},
};
#define N_KERNELS (int)(sizeof KERNELS / sizeof KERNELS[0])

static kiln_kernel kernel_of(const kdef *d)
{
    kiln_kernel k;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.kind = KILN_KERNEL_RECUR;
    k.n_inputs = d->n_in;
    k.n_outputs = d->n_out;
    k.inputs = d->in;
    k.outputs = d->out;
    k.n_instrs = d->n_instrs;
    k.instrs = d->prog;
    k.out_refs = d->refs;
    k.label = d->name;
    k.n_carry = d->nc;
    k.n_seq = d->ns;
    k.n_steps = d->n_steps;
    /* the body's bytes are the key's share, not code: any bytes do */
    static const uint8_t body[4] = {1, 2, 3, 4};
    k.body_bytes = body;
    k.n_body_bytes = sizeof body;
    return k;
}

/* ---- calls ------------------------------------------------------------- */

static size_t esize(unsigned dt)
{
    return dt == KILN_F64 || dt == KILN_I64 ? 8 : dt == KILN_BOOL ? 1 : 4;
}

static void put(void *p, unsigned dt, double v)
{
    switch (dt) {
    case KILN_F64: *(double *)p = v; break;
    case KILN_F32: *(float *)p = (float)v; break;
    case KILN_I64: *(int64_t *)p = (int64_t)v; break;
    case KILN_I32: *(int32_t *)p = (int32_t)v; break;
    default: *(uint8_t *)p = v != 0; break;
    }
}

/* A rank-1 view of T elements at stride s over a fresh buffer (s < 0:
 * data at the buffer's last used element). */
static kiln_view vec(unsigned dt, int64_t T, int64_t s, void **buf)
{
    int64_t as = s < 0 ? -s : s;
    size_t n = (size_t)(T > 0 ? (T - 1) * as + 1 : 1);
    *buf = calloc(n, 8);
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.rank = 1;
    v.dtype = (int32_t)dt;
    v.shape[0] = T;
    v.strides[0] = s;
    v.data = (char *)*buf + (s < 0 && T > 0 ? (size_t)((T - 1) * as) * esize(dt) : 0);
    return v;
}

static kiln_view scalar(unsigned dt, void **buf)
{
    *buf = calloc(1, 8);
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.dtype = (int32_t)dt;
    v.data = *buf;
    return v;
}

typedef struct setup {
    kiln_view in[16], out[16], want[16];
    void *bin[16], *bout[16], *bwant[16];
    int64_t T;
} setup;

/* Inputs of kernel d at T steps, sequences and stacked outputs of
 * stride s; the reference's outputs (contiguous) in want. */
static void setup_make(setup *st, const kdef *d, int64_t T, int64_t s)
{
    memset(st, 0, sizeof *st);
    st->T = T;
    for (uint32_t i = 0; i < d->n_in; i++) {
        unsigned dt = d->in[i].dtype;
        if (d->in[i].rank == 0) {
            st->in[i] = scalar(dt, &st->bin[i]);
            put(st->in[i].data, dt, d->init[i]);
            continue;
        }
        st->in[i] = vec(dt, T, s, &st->bin[i]);
        for (int64_t t = 0; t < T; t++)
            ((double *)st->in[i].data)[t * s] =
                sin(0.37 * (double)t + (double)i) * 2.0 + 0.1 * (double)i;
    }
    for (uint32_t j = 0; j < d->n_out; j++) {
        unsigned dt = d->out[j].dtype;
        if (d->out[j].rank == 0) {
            st->out[j] = scalar(dt, &st->bout[j]);
            st->want[j] = scalar(dt, &st->bwant[j]);
        } else {
            st->out[j] = vec(dt, T, s, &st->bout[j]);
            st->want[j] = vec(dt, T, 1, &st->bwant[j]);
        }
        if (d->out[j].rank == 0 || T > 0)
            put(st->out[j].data, dt, -777.0);   /* overwritten by the call */
    }
    d->ref(d->n_steps >= 0 && d->ns == 0 && d->n_out == d->nc ? d->n_steps : T,
           st->in, st->want);
    /* T = 0: empty sequences and stacked outputs may have no data */
    for (uint32_t i = 0; T == 0 && i < d->n_in; i++)
        if (d->in[i].rank)
            st->in[i].data = NULL;
    for (uint32_t j = 0; T == 0 && j < d->n_out; j++)
        if (d->out[j].rank)
            st->out[j].data = NULL;
}

static void setup_free(setup *st)
{
    for (int i = 0; i < 16; i++) {
        free(st->bin[i]);
        free(st->bout[i]);
        free(st->bwant[i]);
    }
}

/* Whether every output equals the reference bit for bit. */
static int same(const setup *st, const kdef *d, char *where, size_t n)
{
    for (uint32_t j = 0; j < d->n_out; j++) {
        size_t es = esize(d->out[j].dtype);
        int64_t len = d->out[j].rank ? st->T : 1;
        for (int64_t t = 0; t < len; t++) {
            const char *g = (const char *)st->out[j].data +
                            (d->out[j].rank ? t * st->out[j].strides[0] : 0) *
                                (int64_t)es;
            const char *w = (const char *)st->want[j].data + t * (int64_t)es;
            if (memcmp(g, w, es)) {
                double gv = 0, wv = 0;
                if (es == 8 && d->out[j].dtype == KILN_F64) {
                    memcpy(&gv, g, 8);
                    memcpy(&wv, w, 8);
                }
                snprintf(where, n, "output %u element %lld (%.17g, want "
                         "%.17g)", j, (long long)t, gv, wv);
                return 0;
            }
        }
    }
    return 1;
}

static int do_call(kiln_callable *c, setup *st, const kdef *d, int prepared,
                   char *eb, size_t ebn)
{
    kiln_call k = {sizeof k, d->n_in, d->n_out, st->in, st->out, RT, eb, ebn,
                   NULL, 0};
    eb[0] = 0;
    if (!prepared)
        return c->fn(c->state, &k);
    void *plan = NULL;
    if (!c->prepare || c->prepare(c->state, &k, &plan)) {
        if (prepared == 2)   /* the host would call fn (the interpreter) */
            return c->fn(c->state, &k);
        snprintf(eb, ebn, "prepare refused");
        return -1;
    }
    int rc = c->run(plan, &k);
    if (rc == 0) {   /* a second run of the plan: new data, same views */
        for (uint32_t j = 0; j < d->n_out; j++)
            if (st->out[j].data)
                put(st->out[j].data, d->out[j].dtype, -777.0);
        rc = c->run(plan, &k);
    }
    c->plan_free(plan);
    return rc;
}

/* ---- the tests --------------------------------------------------------- */

static void run_backend(const kiln_backend *be, const char *bn)
{
    for (int q = 0; q < N_KERNELS; q++) {
        const kdef *d = &KERNELS[q];
        kiln_kernel k = kernel_of(d);
        kiln_plugin_error *e = NULL;
        int sup = be->supports(&k, &e);
        if (strcmp(d->name, "wide") == 0 && strcmp(bn, "llvm") == 0) {
            ok(!sup && e && strstr(e->message, "512"),
               "%s refuses the %d-instruction program: %s", bn, WIDE,
               e ? e->message : "(accepted)");
            be->error_free(e);
            continue;
        }
        if (!sup) {
            ok(1, "%s %s # SKIP %s refuses it: %s", bn, d->name, bn,
               e ? e->message : "?");
            be->error_free(e);
            continue;
        }
        unsigned char *bytes = NULL;
        size_t len = 0;
        kiln_callable *c = compile_load(be, &k, &bytes, &len);
        if (!ok(c != NULL, "%s compiles and loads %s", bn, d->name)) {
            free(bytes);
            continue;
        }
        kiln_callable *cb = NULL;
        if (bytes && be->load_bytes) {
            kiln_plugin_error *le = NULL;
            if (be->load_bytes(bytes, len, &cb, &le)) {
                ok(0, "%s loads %s from its bytes: %s", bn, d->name,
                   le ? le->message : "?");
                be->error_free(le);
                cb = NULL;
            }
        }
        int64_t Ts[4] = {0, 1, 2, 1000}, ss[3] = {1, 2, -1};
        int nT = d->n_steps >= 0 && d->ns == 0 && d->n_out == d->nc ? 1 : 4;
        int bad = 0, runs = 0;
        char msg[400] = "";
        for (int ti = 0; ti < nT && !bad; ti++)
            for (int si = 0; si < 3 && !bad; si++)
                for (int mode = 0; mode < 3 && !bad; mode++) {
                    kiln_callable *cc = mode == 2 ? cb : c;
                    if (!cc)
                        continue;
                    setup st;
                    setup_make(&st, d, Ts[ti], ss[si]);
                    char eb[256], where[200];
                    /* the interpreter runs RECUR in fn: its prepare
                     * may refuse; the compiled backends prepare */
                    int pm = mode != 1 ? 0 : strcmp(bn, "interp") ? 1 : 2;
                    int rc = do_call(cc, &st, d, pm, eb, sizeof eb);
                    if (rc) {
                        snprintf(msg, sizeof msg, "T=%lld stride %lld %s: "
                                 "rc %d: %s", (long long)Ts[ti],
                                 (long long)ss[si],
                                 mode == 1 ? "prepared" : "fn", rc, eb);
                        bad = 1;
                    } else if (!same(&st, d, where, sizeof where)) {
                        snprintf(msg, sizeof msg, "T=%lld stride %lld %s: %s",
                                 (long long)Ts[ti], (long long)ss[si],
                                 mode == 1 ? "prepared" : mode == 2
                                     ? "from bytes" : "fn", where);
                        bad = 1;
                    }
                    runs++;
                    setup_free(&st);
                }
        ok(!bad, "%s %s equals the C loop bitwise (%d calls: T = 0, 1, 2, "
           "1000; strides 1, 2, -1; fn, prepared, from bytes)%s%s", bn,
           d->name, runs, bad ? ": " : "", msg);

        /* a sequence (or stacked output) of another length */
        if (d->ns + (d->n_out - d->nc) >= 2) {
            setup st;
            setup_make(&st, d, 5, 1);
            if (d->n_out > d->nc)
                st.out[d->n_out - 1].shape[0] = 4;
            else
                st.in[d->nc + d->ns - 1].shape[0] = 4;
            char eb[256];
            int rc = do_call(c, &st, d, 0, eb, sizeof eb);
            ok(rc != 0 && strstr(eb, " has 4 ") && strstr(eb, " 5"),
               "%s %s: lengths 5 and 4 refused, the message names both: "
               "%s", bn, d->name, eb);
            setup_free(&st);
        }
        /* outputs alias nothing: the first final carry written over the
         * first carry's input is refused */
        {
            setup st;
            setup_make(&st, d, 3, 1);
            st.out[0].data = st.in[0].data;
            char eb[256];
            int rc = do_call(c, &st, d, 0, eb, sizeof eb);
            ok(rc == KILN_ERR_ARG && eb[0], "%s %s: an output that is an "
               "input is refused: %s", bn, d->name, eb);
            setup_free(&st);
        }
        be->callable_free(c);
        if (cb)
            be->callable_free(cb);
        free(bytes);
    }
}

/* llvm's IR for arma: one function kiln_rr whose loop carries err in a
 * phi and calls nothing (no call per step). */
static void llvm_ir(const kiln_backend *be)
{
    kiln_kernel k = kernel_of(&KERNELS[0]);
    kiln_compile_options co = {sizeof co, 2, 0, 0};
    char *text = NULL;
    kiln_plugin_error *e = NULL;
    if (!be->emit_text || be->emit_text(&k, &co, &text, &e)) {
        ok(0, "llvm emit_text of arma: %s", e ? e->message : "none");
        be->error_free(e);
        return;
    }
    ok(strstr(text, "define void @kiln_rr(") && strstr(text, "phi double")
       && !strstr(text, "call "), "llvm: arma is one function kiln_rr, the "
       "carry a phi, no call in the loop");
    be->text_free(text);
}

int main(void)
{
    ok(KILN_ABI_MINOR >= 10, "ABI 1.10 has RECUR kernels with programs");
    RT = kiln_runtime_get();
    wide_init();
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    const char *names[3] = {"interp", "tcc", "llvm"};
    for (int b = 0; b < 3; b++) {
        const kiln_backend *be = open_backend(bd, names[b]);
        if (!be) {
            ok(1, "%s # SKIP not built", names[b]);
            continue;
        }
        run_backend(be, names[b]);
        if (b == 2)
            llvm_ir(be);
    }
    return done_testing();
}
