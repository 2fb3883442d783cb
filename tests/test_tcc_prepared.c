/*
 * test_tcc_prepared.c — the tcc backend's prepared calls (ABI 1.4,
 * docs/plugin-abi.md §9; core/lower/emit_c.c's kiln_kernel_prep/_run).
 *
 *  1. plugin level, every kernel kind (ELEMWISE of rank 0, 2 and 3 with
 *     transposed, negative-stride, broadcast and extent-1 views, REDUCE
 *     along an axis, to a scalar over more than one 256-element block,
 *     MEAN, MAX of i64, two sibling outputs of two dtypes, JOIN, GATHER,
 *     SCATTER INC with repeated indices and broadcast values, DOT with a
 *     transposed operand): tcc's prepare succeeds, and its run on the
 *     prepared views, then on views of the same layout over other memory
 *     with other values, gives exactly what tcc's fn and the
 *     interpreter's fn give (every byte of the output buffers, so nothing
 *     outside a strided output is written);
 *  2. a GATHER index out of range on a prepared call fails with the
 *     interpreter's message; prepare refuses calls fn would refuse (a
 *     wrong dtype, rank, count or shape) without writing errbuf;
 *  3. steady-state prepared runs allocate nothing (not under ASan);
 *  4. the VM: a graph of every kind with a symbolic dim, called under
 *     tcc with new data of the same shapes, new shapes (the VM prepares
 *     again), an empty dim and the first shapes again, equals the
 *     interpreter bit for bit at every call.
 * Skipped when this build has no tcc backend.
 */
#define _GNU_SOURCE
#include <kiln/backend.h>
#include <kiln/graph.h>
#include <kiln/kiln.h>
#include <kiln/policy.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "open_backend.h"
#include "runtime.h"
#include "tap.h"

/* counting allocations: n_allocs, COUNT_ALLOCS */
#include "count_allocs.h"

static const kiln_backend *open_plugin(const char *name)
{
    return open_backend(getenv("KILN_BUILDDIR"), name);
}

static const kiln_backend *TB, *IB;

static kiln_callable *load(const kiln_backend *be, const kiln_kernel *k)
{
    kiln_artifact *a = NULL;
    kiln_plugin_error *e = NULL;
    kiln_callable *c = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    if (be->compile(k, &co, &a, &e) || be->load(a, &c, &e)) {
        diag("%s: %s: %s", be->name, k->label, e ? e->message : "?");
        be->error_free(e);
        c = NULL;
    }
    if (a)
        be->artifact_free(a);
    return c;
}

/* ---- 1. every kind, plugin level ---------------------------------------- */

#define ARENA 2048       /* bytes per argument and data set */
#define MAXV 4

static size_t esize(int dt)
{
    return dt == KILN_F32 || dt == KILN_I32 ? 4 : dt == KILN_BOOL ? 1 : 8;
}

/* One case: a kernel and its views, whose data are element offsets into
 * per-argument arenas (`off`); `imod` > 0 makes input `iarg` an index
 * argument with values in [-imod, imod). */
typedef struct tcase {
    const char *name;
    kiln_kernel k;
    kiln_view in[MAXV], out[MAXV];
    int64_t in_off[MAXV], out_off[MAXV];
    int iarg;
    int64_t imod;
} tcase;

typedef struct arenas {
    unsigned char in[MAXV][ARENA], out[MAXV][ARENA];
} arenas;

static uint64_t rng;
static uint64_t rnext(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fill_arena(unsigned char *a, int dt, uint64_t seed, int64_t imod)
{
    rng = seed;
    size_t n = ARENA / esize(dt);
    for (size_t i = 0; i < n; i++) {
        double u = (double)(rnext() >> 11) * 0x1p-53 * 4.0 - 2.0;
        int64_t iv = imod > 0 ? (int64_t)(rnext() % (uint64_t)(2 * imod)) - imod
                              : (int64_t)(rnext() % 2001) - 1000;
        switch (dt) {
        case KILN_F64: ((double *)a)[i] = u; break;
        case KILN_F32: ((float *)a)[i] = (float)u; break;
        case KILN_I64: ((int64_t *)a)[i] = iv; break;
        case KILN_I32: ((int32_t *)a)[i] = (int32_t)iv; break;
        default: a[i] = (unsigned char)(rnext() & 1); break;
        }
    }
}

/* Data set `set` of case c in *A (inputs and outputs: a scatter's output
 * holds x), and views pointing into it. */
static void make_set(const tcase *c, int set, arenas *A, kiln_view *in,
                     kiln_view *out)
{
    for (uint32_t i = 0; i < c->k.n_inputs; i++) {
        fill_arena(A->in[i], c->in[i].dtype, 1000u * (unsigned)set + i,
                   (int)i == c->iarg ? c->imod : 0);
        in[i] = c->in[i];
        in[i].data = A->in[i] + c->in_off[i] * (int64_t)esize(in[i].dtype);
    }
    for (uint32_t j = 0; j < c->k.n_outputs; j++) {
        fill_arena(A->out[j], c->out[j].dtype, 1000u * (unsigned)set + 500 + j,
                   0);
        out[j] = c->out[j];
        out[j].data = A->out[j] + c->out_off[j] * (int64_t)esize(out[j].dtype);
    }
}

static int same_outputs(const tcase *c, const arenas *a, const arenas *b)
{
    for (uint32_t j = 0; j < c->k.n_outputs; j++)
        if (memcmp(a->out[j], b->out[j], ARENA) != 0)
            return 0;
    return 1;
}

static int call_fn(const kiln_callable *cl, const tcase *c, const kiln_view *in,
                   const kiln_view *out, char *eb, size_t n)
{
    eb[0] = 0;
    kiln_call k = {sizeof k, c->k.n_inputs, c->k.n_outputs, in, out,
                   kiln_runtime_get(), eb, n, NULL, 0};
    return cl->fn(cl->state, &k);
}

static int call_run(const kiln_callable *cl, void *plan, const tcase *c,
                    const kiln_view *in, const kiln_view *out, char *eb,
                    size_t n)
{
    eb[0] = 0;
    kiln_call k = {sizeof k, c->k.n_inputs, c->k.n_outputs, in, out,
                   kiln_runtime_get(), eb, n, NULL, 0};
    return cl->run(plan, &k);
}

static arenas A_int, A_tcc, A_run;

static void run_case(const tcase *c)
{
    kiln_callable *ci = load(IB, &c->k), *ct = load(TB, &c->k);
    if (!ok(ci && ct, "%s: compiled by interp and tcc", c->name))
        goto out;
    int has = ct->struct_size >= sizeof *ct && ct->prepare && ct->run &&
              ct->plan_free;
    ok(has, "%s: the tcc callable offers prepare/run/plan_free", c->name);
    if (!has)
        goto out;
    kiln_view vi[MAXV], vo[MAXV], ti[MAXV], to[MAXV], ri[MAXV], ro[MAXV];
    char e1[256], e2[256], e3[256];
    make_set(c, 0, &A_int, vi, vo);
    make_set(c, 0, &A_tcc, ti, to);
    make_set(c, 0, &A_run, ri, ro);
    int r1 = call_fn(ci, c, vi, vo, e1, sizeof e1);
    int r2 = call_fn(ct, c, ti, to, e2, sizeof e2);
    ok(r1 == 0 && r2 == 0 && same_outputs(c, &A_int, &A_tcc),
       "%s: tcc's fn equals the interpreter (%s%s)", c->name, e1, e2);
    void *plan = NULL;
    char pb[8] = "x";
    kiln_call pc = {sizeof pc, c->k.n_inputs, c->k.n_outputs, ri, ro,
                    kiln_runtime_get(), pb, sizeof pb, NULL, 0};
    int pr = ct->prepare(ct->state, &pc, &plan);
    if (!ok(pr == 0 && plan && strcmp(pb, "x") == 0, "%s: prepared",
            c->name))
        goto out;
    int r3 = call_run(ct, plan, c, ri, ro, e3, sizeof e3);
    ok(r3 == 0 && same_outputs(c, &A_int, &A_run),
       "%s: the prepared run equals the interpreter %s", c->name, e3);
    /* the same layout over other memory (other arenas) with other data */
    static arenas B_int, B_run;
    make_set(c, 1, &B_int, vi, vo);
    make_set(c, 1, &B_run, ri, ro);
    r1 = call_fn(ci, c, vi, vo, e1, sizeof e1);
    r3 = call_run(ct, plan, c, ri, ro, e3, sizeof e3);
    ok(r1 == 0 && r3 == 0 && same_outputs(c, &B_int, &B_run),
       "%s: run on other data at other addresses equals the interpreter %s%s",
       c->name, e1, e3);
    /* and again on the first memory (a plan keeps no pointer) */
    make_set(c, 0, &A_run, ri, ro);
    r3 = call_run(ct, plan, c, ri, ro, e3, sizeof e3);
    ok(r3 == 0 && same_outputs(c, &A_int, &A_run),
       "%s: run on the first data again %s", c->name, e3);
#if COUNT_ALLOCS
    long before = n_allocs;
    for (int r = 0; r < 50; r++)
        call_run(ct, plan, c, ri, ro, e3, sizeof e3);
    ok(n_allocs == before, "%s: 50 prepared runs allocate nothing (%ld)",
       c->name, n_allocs - before);
#else
    ok(1, "# SKIP allocation counting under ASan");
#endif
    ct->plan_free(plan);
out:
    if (ci)
        IB->callable_free(ci);
    if (ct)
        TB->callable_free(ct);
}

static kiln_view view(int dt, int rank, const int64_t *shape,
                      const int64_t *strides)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.dtype = dt;
    v.rank = rank;
    for (int d = 0; d < rank; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = strides[d];
    }
    return v;
}

#define F64 KILN_F64
#define INS(op, dt, a, b) {op, dt, 0, a, b, -1, 0}
#define CONST(dt, v) {KILN_I_CONST, dt, 0, -1, -1, -1, v}

static void base(tcase *c, const char *name, uint32_t kind, uint32_t ni,
                 uint32_t no, const kiln_arg_desc *din,
                 const kiln_arg_desc *dout)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->iarg = -1;
    c->k.struct_size = sizeof c->k;
    c->k.kind = kind;
    c->k.n_inputs = ni;
    c->k.n_outputs = no;
    c->k.inputs = din;
    c->k.outputs = dout;
    c->k.label = name;
}

static void program(tcase *c, uint32_t n, const kiln_instr *ins,
                    const int32_t *refs)
{
    c->k.n_instrs = n;
    c->k.instrs = ins;
    c->k.out_refs = refs;
}

static void test_kinds(void)
{
    tcase c;
    /* ELEMWISE rank 2: o = x * y + exp(x); x the transpose of a 5x4
     * buffer, y broadcast along dim 0 and reversed along dim 1, the
     * output's rows reversed */
    static const kiln_arg_desc d2[3] = {{F64, 2, {0}}, {F64, 2, {0}},
                                        {F64, 2, {0}}};
    static const kiln_instr p_ew[] = {
        INS(KILN_I_LOAD, F64, 0, -1), INS(KILN_I_LOAD, F64, 1, -1),
        INS(KILN_I_MUL, F64, 0, 1), INS(KILN_I_EXP, F64, 0, -1),
        INS(KILN_I_ADD, F64, 2, 3)};
    static const int32_t r_ew[1] = {4};
    base(&c, "elemwise 2-D strided", KILN_KERNEL_ELEMWISE, 2, 1, d2, d2 + 2);
    program(&c, 5, p_ew, r_ew);
    c.in[0] = view(F64, 2, (int64_t[]){4, 5}, (int64_t[]){1, 4});
    c.in[1] = view(F64, 2, (int64_t[]){4, 5}, (int64_t[]){0, -1});
    c.in_off[1] = 7;
    c.out[0] = view(F64, 2, (int64_t[]){4, 5}, (int64_t[]){-6, 1});
    c.out_off[0] = 30;
    run_case(&c);

    /* the same kernel, contiguous (one coalesced row) with an extent-1
     * dim, and empty */
    c.name = "elemwise 2-D contiguous";
    c.in[0] = view(F64, 2, (int64_t[]){1, 40}, (int64_t[]){40, 1});
    c.in[1] = view(F64, 2, (int64_t[]){1, 40}, (int64_t[]){0, 1});
    c.in_off[1] = 0;
    c.out[0] = view(F64, 2, (int64_t[]){1, 40}, (int64_t[]){40, 1});
    c.out_off[0] = 0;
    run_case(&c);
    c.name = "elemwise 2-D empty";
    c.in[0].shape[0] = c.in[1].shape[0] = c.out[0].shape[0] = 0;
    run_case(&c);

    /* rank 3, permuted strides: three coalesced dims (the odometer) */
    static const kiln_arg_desc d3[3] = {{F64, 3, {0}}, {F64, 3, {0}},
                                        {F64, 3, {0}}};
    base(&c, "elemwise 3-D permuted", KILN_KERNEL_ELEMWISE, 2, 1, d3, d3 + 2);
    program(&c, 5, p_ew, r_ew);
    c.in[0] = view(F64, 3, (int64_t[]){2, 3, 4}, (int64_t[]){12, 1, 3});
    c.in[1] = view(F64, 3, (int64_t[]){2, 3, 4}, (int64_t[]){-1, 0, 2});
    c.in_off[1] = 1;
    c.out[0] = view(F64, 3, (int64_t[]){2, 3, 4}, (int64_t[]){1, 8, 2});
    run_case(&c);

    /* rank 0, two outputs (a fused scalar region) */
    static const kiln_arg_desc d0[4] = {{F64, 0, {0}}, {F64, 0, {0}},
                                        {F64, 0, {0}}, {F64, 0, {0}}};
    static const kiln_instr p0[] = {
        INS(KILN_I_LOAD, F64, 0, -1), INS(KILN_I_LOAD, F64, 1, -1),
        INS(KILN_I_MUL, F64, 0, 1), CONST(F64, 1.5), INS(KILN_I_ADD, F64, 2, 3),
        INS(KILN_I_EXP, F64, 0, -1), INS(KILN_I_SUB, F64, 5, 1)};
    static const int32_t r0[2] = {4, 6};
    base(&c, "elemwise rank 0", KILN_KERNEL_ELEMWISE, 2, 2, d0, d0 + 2);
    program(&c, 7, p0, r0);
    for (int v = 0; v < 2; v++) {
        c.in[v] = view(F64, 0, NULL, NULL);
        c.out[v] = view(F64, 0, NULL, NULL);
        c.in_off[v] = 3 + v;
        c.out_off[v] = 5 + v;
    }
    run_case(&c);

    /* REDUCE sum along axis 1 of a (3, 7) input read with negative
     * strides; the output (3) strided */
    static const kiln_arg_desc dr[2] = {{F64, 2, {0}}, {F64, 2, {0}}};
    static const kiln_instr p_sq[] = {INS(KILN_I_LOAD, F64, 0, -1),
                                      INS(KILN_I_SQUARE, F64, 0, -1)};
    static const int32_t r_sq[1] = {1};
    base(&c, "reduce sum axis 1", KILN_KERNEL_REDUCE, 1, 1, dr, dr + 1);
    program(&c, 2, p_sq, r_sq);
    c.k.reduce_op = KILN_REDUCE_SUM;
    c.k.reduce_axes = 2;
    c.in[0] = view(F64, 2, (int64_t[]){3, 7}, (int64_t[]){-7, -1});
    c.in_off[0] = 20;
    c.out[0] = view(F64, 2, (int64_t[]){3, 7}, (int64_t[]){3, 0});
    c.out_off[0] = 2;
    run_case(&c);
    c.name = "reduce mean axis 0";
    c.k.reduce_op = KILN_REDUCE_MEAN;
    c.k.reduce_axes = 1;
    c.out[0] = view(F64, 2, (int64_t[]){3, 7}, (int64_t[]){0, -1});
    c.out_off[0] = 6;
    run_case(&c);

    /* to a scalar over 600 elements (three 256-element blocks), two
     * sibling outputs: sum(x) in f64 and sum(f32(x) * f32(x)) in f32 */
    static const kiln_arg_desc ds_in[1] = {{F64, 1, {0}}};
    static const kiln_arg_desc ds_out[2] = {{F64, 1, {0}},
                                            {KILN_F32, 1, {0}}};
    static const kiln_instr p_sib[] = {
        INS(KILN_I_LOAD, F64, 0, -1), INS(KILN_I_CAST, KILN_F32, 0, -1),
        INS(KILN_I_MUL, KILN_F32, 1, 1)};
    static const int32_t r_sib[2] = {0, 2};
    base(&c, "reduce siblings to a scalar", KILN_KERNEL_REDUCE, 1, 2, ds_in,
         ds_out);
    program(&c, 3, p_sib, r_sib);
    c.k.reduce_op = KILN_REDUCE_SUM;
    c.k.reduce_axes = 1;
    c.in[0] = view(F64, 1, (int64_t[]){600}, (int64_t[]){-1});
    c.in_off[0] = 700;
    c.out[0] = view(F64, 1, (int64_t[]){600}, (int64_t[]){0});
    c.out[1] = view(KILN_F32, 1, (int64_t[]){600}, (int64_t[]){0});
    c.out_off[1] = 9;
    run_case(&c);

    /* MAX of i64 along axis 0, input broadcast along axis 1 */
    static const kiln_arg_desc di[2] = {{KILN_I64, 2, {0}}, {KILN_I64, 2, {0}}};
    static const kiln_instr p_ld[] = {INS(KILN_I_LOAD, KILN_I64, 0, -1)};
    static const int32_t r_ld[1] = {0};
    base(&c, "reduce max i64", KILN_KERNEL_REDUCE, 1, 1, di, di + 1);
    program(&c, 1, p_ld, r_ld);
    c.k.reduce_op = KILN_REDUCE_MAX;
    c.k.reduce_axes = 1;
    c.in[0] = view(KILN_I64, 2, (int64_t[]){9, 4}, (int64_t[]){2, 0});
    c.out[0] = view(KILN_I64, 2, (int64_t[]){9, 4}, (int64_t[]){0, 1});
    run_case(&c);

    /* JOIN of three (2, k) views along axis 1, one reversed */
    static const kiln_arg_desc dj[4] = {{F64, 2, {0}}, {F64, 2, {0}},
                                        {F64, 2, {0}}, {F64, 2, {0}}};
    base(&c, "join", KILN_KERNEL_JOIN, 3, 1, dj, dj + 3);
    c.k.axis = 1;
    c.in[0] = view(F64, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1});
    c.in[1] = view(F64, 2, (int64_t[]){2, 1}, (int64_t[]){1, 0});
    c.in[2] = view(F64, 2, (int64_t[]){2, 4}, (int64_t[]){-4, -1});
    c.in_off[2] = 15;
    c.out[0] = view(F64, 2, (int64_t[]){2, 8}, (int64_t[]){9, 1});
    run_case(&c);

    /* GATHER rows of a (5, 3) x by 4 indices (negative ones too) */
    static const kiln_arg_desc dg[3] = {{F64, 2, {0}}, {KILN_I64, 1, {0}},
                                        {F64, 2, {0}}};
    base(&c, "gather", KILN_KERNEL_GATHER, 2, 1, dg, dg + 2);
    c.in[0] = view(F64, 2, (int64_t[]){5, 3}, (int64_t[]){-3, 1});
    c.in_off[0] = 12;
    c.in[1] = view(KILN_I64, 1, (int64_t[]){4}, (int64_t[]){2});
    c.iarg = 1;
    c.imod = 5;
    c.out[0] = view(F64, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4});
    run_case(&c);
    tcase g = c;

    /* SCATTER INC: repeated indices, values broadcast along dim 1 */
    static const kiln_arg_desc dsc[3] = {{KILN_I64, 1, {0}}, {F64, 2, {0}},
                                         {F64, 2, {0}}};
    base(&c, "scatter inc", KILN_KERNEL_SCATTER, 2, 1, dsc, dsc + 2);
    c.k.scatter_mode = KILN_SCATTER_INC;
    c.in[0] = view(KILN_I64, 1, (int64_t[]){6}, (int64_t[]){1});
    c.iarg = 0;
    c.imod = 2;   /* [-2, 2) of 5 rows: repeats */
    c.in[1] = view(F64, 2, (int64_t[]){6, 3}, (int64_t[]){1, 0});
    c.out[0] = view(F64, 2, (int64_t[]){5, 3}, (int64_t[]){3, 1});
    run_case(&c);

    /* DOT (3, 4) @ transpose of a (2, 4) buffer */
    static const kiln_arg_desc dd[3] = {{F64, 2, {0}}, {F64, 2, {0}},
                                        {F64, 2, {0}}};
    base(&c, "dot", KILN_KERNEL_DOT, 2, 1, dd, dd + 2);
    c.in[0] = view(F64, 2, (int64_t[]){3, 4}, (int64_t[]){4, 1});
    c.in[1] = view(F64, 2, (int64_t[]){4, 2}, (int64_t[]){1, 4});
    c.out[0] = view(F64, 2, (int64_t[]){3, 2}, (int64_t[]){2, 1});
    run_case(&c);

    /* ---- 2. errors ---- */
    kiln_callable *ct = load(TB, &g.k), *ci = load(IB, &g.k);
    if (!ok(ct && ci, "gather: compiled again"))
        return;
    kiln_view in[MAXV], out[MAXV];
    make_set(&g, 0, &A_run, in, out);
    char eb[256] = "x", ei[256];
    kiln_call pc = {sizeof pc, 2, 1, in, out, kiln_runtime_get(), eb,
                    sizeof eb, NULL, 0};
    void *plan = NULL;
    int pr = ct->prepare(ct->state, &pc, &plan);
    ok(pr == 0, "gather: prepared for the error test");
    ((int64_t *)in[1].data)[2] = 7;
    int rc = pr ? -1 : call_run(ct, plan, &g, in, out, eb, sizeof eb);
    int rci = call_fn(ci, &g, in, out, ei, sizeof ei);
    ok(rc != 0 && rci != 0 && strcmp(eb, ei) == 0 &&
           strcmp(eb, "index 7 is out of bounds for axis 0 with size 5") == 0,
       "gather: an index out of range on a prepared call: '%s' (interp '%s')",
       eb, ei);
    if (!pr)
        ct->plan_free(plan);
    /* calls fn refuses are not prepared, and prepare writes no message */
    struct { const char *what; int field; } bad[] = {
        {"a wrong dtype", 0}, {"a wrong rank", 1}, {"a wrong count", 2},
        {"a shape that does not fit", 3}, {"NULL data", 4}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        kiln_view bi[MAXV], bo[MAXV];
        make_set(&g, 0, &A_run, bi, bo);
        uint32_t ni = 2;
        switch (bad[b].field) {
        case 0: bi[0].dtype = KILN_F32; break;
        case 1: bi[1].rank = 2; bi[1].shape[1] = 1; break;
        case 2: ni = 1; break;
        case 3: bo[0].shape[1] = 2; break;
        default: bi[0].data = NULL; break;
        }
        strcpy(eb, "untouched");
        kiln_call k = {sizeof k, ni, 1, bi, bo, kiln_runtime_get(), eb,
                       sizeof eb, NULL, 0};
        plan = NULL;
        pr = ct->prepare(ct->state, &k, &plan);
        int quiet = strcmp(eb, "untouched") == 0;
        int frc = ct->fn(ct->state, &k);
        ok(pr != 0 && plan == NULL && quiet && frc != 0,
           "prepare refuses %s without a message; fn reports it: %s",
           bad[b].what, eb);
        if (pr == 0)
            ct->plan_free(plan);
    }
    TB->callable_free(ct);
    IB->callable_free(ci);
}

/* ---- 4. the VM ---------------------------------------------------------- */

static const char *GRAPH =
    "kiln 1\n"
    "graph prep\n"
    "  input x: f64[n, 3]\n"
    "  input y: f64[3]\n"
    "  input idx: i64[m]\n"
    "  input s: f64\n"
    "  z = add(mul(x[::-1], y), s)\n"
    "  output e = exp(transpose(z))\n"
    "  output r = sum(mul(z, z), axis=0)\n"
    "  output t = sum(x)\n"
    "  output mx = max(x, axis=1)\n"
    "  output g = take(x, idx)\n"
    "  output sc = advanced_inc_subtensor(x, idx, 1.5)\n"
    "  output j = join(0, x, z)\n"
    "  output d = dot(transpose(x), x)\n"
    "  output q = mul(exp(s), 2.0)\n"
    "end\n";

static kiln_function *compile_graph(const char *backend)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(GRAPH, "prep.kg", NULL, &err);
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    o.quiet = 1;
    kiln_function *f = g ? kiln_compile(g, &o, &err) : NULL;
    if (!f)
        diag("%s: %s", backend, err.message);
    kiln_graph_free(g);
    return f;
}

/* Call f, copy its outputs' bytes into buf (at most cap), return the
 * number of bytes or -1. */
static long call_bytes(kiln_function *f, kiln_tensor *in, unsigned char *buf,
                       size_t cap, char *msg, size_t mn)
{
    kiln_tensor out[16];
    kiln_err err = {0, ""};
    if (kiln_function_call(f, in, out, &err)) {
        snprintf(msg, mn, "%s", err.message);
        return -1;
    }
    size_t at = 0;
    for (int i = 0; i < kiln_function_n_outputs(f); i++) {
        size_t n = esize(out[i].dtype);
        for (int d = 0; d < out[i].rank; d++)
            n *= (size_t)out[i].shape[d];
        if (at + n + 16 > cap)
            return -1;
        memcpy(buf + at, out[i].shape, 16);   /* two dims: shapes differ */
        memcpy(buf + at + 16, out[i].data, n);
        at += n + 16;
    }
    return (long)at;
}

static void test_vm(void)
{
    kiln_function *ft = compile_graph("tcc"), *fi = compile_graph("interp");
    if (!ok(ft && fi, "vm: the graph compiles under tcc and interp"))
        goto out;
    int nk = kiln_function_n_kernels(ft), by_tcc = 0;
    for (int i = 0; i < nk; i++) {
        kiln_kernel_info ki = {.struct_size = sizeof ki};
        by_tcc += kiln_function_kernel_info(ft, i, &ki, NULL) == 0 &&
                  ki.backend && strcmp(ki.backend, "tcc") == 0;
    }
    ok(nk > 5 && by_tcc == nk, "vm: tcc compiled every kernel (%d of %d)",
       by_tcc, nk);
    /* the shapes of each call: n rows, m indices (and back) */
    static const int shapes[][2] = {{4, 3}, {4, 3}, {6, 5}, {6, 5}, {0, 0},
                                    {2, 0}, {4, 3}, {4, 3}};
    static double x[2][64];
    static int64_t idx[2][16];
    static unsigned char bt[16384], bi[16384];
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int n = shapes[c][0], m = shapes[c][1], h = (int)(c & 1);
        rng = 77 + c;
        for (int i = 0; i < 64; i++)
            x[h][i] = (double)(rnext() >> 11) * 0x1p-53 * 2.0 - 1.0;
        for (int i = 0; i < m; i++)
            idx[h][i] = n ? (int64_t)(rnext() % (uint64_t)(2 * n)) - n : 0;
        double y[3] = {0.5, -1.25, 2.0 + 0.1 * (double)c}, s = 0.3 * (double)c;
        /* the data alternate between two buffers: new pointers, same
         * shapes */
        kiln_tensor in[4] = {{KILN_F64, 2, {n, 3}, x[h]},
                             {KILN_F64, 1, {3}, y},
                             {KILN_I64, 1, {m}, idx[h]},
                             {KILN_F64, 0, {0}, &s}};
        char mt[512] = "", mi[512] = "";
        long lt = call_bytes(ft, in, bt, sizeof bt, mt, sizeof mt);
        long li = call_bytes(fi, in, bi, sizeof bi, mi, sizeof mi);
        ok(lt > 0 && lt == li && memcmp(bt, bi, (size_t)lt) == 0,
           "vm: call %zu (n = %d, m = %d): tcc equals the interpreter "
           "bitwise (%ld bytes) %s%s", c + 1, n, m, lt, mt, mi);
    }
    {
        /* an index out of range on a prepared step: the message */
        double xs[12] = {0}, y[3] = {1, 2, 3}, s = 0;
        int64_t bad[2] = {1, 9};
        kiln_tensor in[4] = {{KILN_F64, 2, {4, 3}, xs},
                             {KILN_F64, 1, {3}, y},
                             {KILN_I64, 1, {2}, bad},
                             {KILN_F64, 0, {0}, &s}};
        char mt[512] = "", mi[512] = "";
        long lt = call_bytes(ft, in, bt, sizeof bt, mt, sizeof mt);
        long li = call_bytes(fi, in, bi, sizeof bi, mi, sizeof mi);
        ok(lt < 0 && li < 0 && strstr(mt, "index 9 is out of bounds") &&
               strcmp(mt, mi) == 0,
           "vm: an index out of range fails as under the interpreter: '%s'",
           mt);
    }
#if COUNT_ALLOCS
    {
        double y[3] = {1, 2, 3}, s = 0.5;
        kiln_tensor in[4] = {{KILN_F64, 2, {4, 3}, x[0]},
                             {KILN_F64, 1, {3}, y},
                             {KILN_I64, 1, {3}, idx[0]},
                             {KILN_F64, 0, {0}, &s}};
        kiln_tensor out[16];
        int rc = kiln_function_call(ft, in, out, NULL);
        long before = n_allocs;
        for (int r = 0; r < 20 && rc == 0; r++) {
            in[0].data = x[r & 1];
            in[2].data = idx[r & 1];
            rc = kiln_function_call(ft, in, out, NULL);
        }
        ok(rc == 0 && n_allocs == before,
           "vm: 20 steady-state tcc calls allocate nothing (%ld)",
           n_allocs - before);
    }
#else
    ok(1, "# SKIP allocation counting under ASan");
#endif
out:
    kiln_function_free(ft);
    kiln_function_free(fi);
}

int main(void)
{
    TB = open_plugin("tcc");
    IB = open_plugin("interp");
    if (!TB || !IB) {
        printf("1..0 # SKIP the tcc backend is not built\n");
        return 0;
    }
    test_kinds();
    test_vm();
    return done_testing();
}
