/*
 * test_llvm_loop.c — LOOP kernels (ABI 1.5) compiled by the llvm backend,
 * hand-built, against the interpreter bit for bit (results, return codes
 * and messages):
 *
 *  1. gathers (KILN_I_TAKE) with negative indices, from a strided table,
 *     one index computed from another; scatter-adds with repeated
 *     indices (f64/f32 values, an i64 count); an ITER output, a full
 *     REDUCE and SCATTER outputs in one kernel; a broadcast (stride 0)
 *     input; i64 and i32 indices; f64 and f32;
 *  2. indices out of range: the interpreter's message and code, for the
 *     first gather, the second (computed) one, a scatter, and two bad
 *     indices in one block (the interpreter reports by instruction
 *     order within the block, not by position);
 *  3. reductions SUM, PROD, MAX, MIN, MEAN over axis 0, axis 1 and both
 *     of a (7, 300) space (rows longer than a 256-element block), two
 *     REDUCE outputs and an ITER one, contiguous, transposed and
 *     broadcast inputs, an output along the kept axis with stride 2,
 *     REDUCE outputs that disagree on folding along the row, an empty
 *     space; f64 and f32;
 *  4. a program of more than 512 instructions (segment functions): the
 *     gathers' indices cross segments through the temporaries;
 *  5. every case unprepared, prepared (run twice) and loaded from the
 *     artifact's bytes (prepare declines only REDUCE outputs that
 *     disagree, which the interpreter runs); a steady-state call
 *     allocates nothing;
 *  6. emit_text shows the loop's row and check functions.
 *
 * Skips everything when the plugin was not built.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "count_allocs.h"
#include "open_backend.h"
#include "runtime.h"
#include "tap.h"
#include "compile_load.h"

static const kiln_backend *L, *I;


static size_t dsize(unsigned dt)
{
    return dt == KILN_F64 || dt == KILN_I64 ? 8 : dt == KILN_BOOL ? 1 : 4;
}

/* ---- a case: a kernel and one call's views ----------------------------- */

#define MAXV 8
typedef struct tcase {
    char name[96];
    kiln_kernel k;
    kiln_arg_desc din[MAXV], dout[MAXV];
    uint8_t rin[MAXV], rout[MAXV];
    int32_t oidx[MAXV], orefs[MAXV];
    kiln_instr *prog;
    uint32_t n_prog, cap;
    kiln_view in[MAXV], out[MAXV];
    /* each output's buffer: its initial bytes; the view's data is at
     * byte off[j] of it */
    unsigned char *init[MAXV];
    size_t bytes[MAXV], off[MAXV];
} tcase;

static int32_t emit(tcase *t, uint16_t op, unsigned dt, int32_t a, int32_t b,
                    int32_t c, double imm)
{
    if (t->n_prog == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->prog = realloc(t->prog, sizeof *t->prog * t->cap);
    }
    t->prog[t->n_prog] = (kiln_instr){op, (uint8_t)dt, 0, a, b, c, imm};
    return (int32_t)t->n_prog++;
}

static void finish(tcase *t, uint32_t kind_ni, uint32_t no, const char *label)
{
    kiln_kernel *k = &t->k;
    memset(k, 0, sizeof *k);
    k->struct_size = sizeof *k;
    k->kind = KILN_KERNEL_LOOP;
    k->n_inputs = kind_ni;
    k->n_outputs = no;
    k->inputs = t->din;
    k->outputs = t->dout;
    k->n_instrs = t->n_prog;
    k->instrs = t->prog;
    k->out_refs = t->orefs;
    k->in_roles = t->rin;
    k->out_roles = t->rout;
    k->out_index = t->oidx;
    k->label = label;
}

static kiln_view mkview(void *data, unsigned dt, int rank, const int64_t *shape,
                        const int64_t *strides)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.dtype = (int32_t)dt;
    v.rank = rank;
    for (int d = 0; d < rank; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = strides[d];
    }
    return v;
}

/* Output j: a buffer of `n` elements filled with a pattern (a scatter's
 * initial values), the view at element `at`. */
static void set_out(tcase *t, uint32_t j, unsigned dt, size_t n, size_t at,
                    int rank, const int64_t *shape, const int64_t *strides)
{
    size_t es = dsize(dt);
    t->bytes[j] = n * es + 1;
    t->off[j] = at * es;
    t->init[j] = calloc(t->bytes[j], 1);
    for (size_t i = 0; i < n; i++) {
        double x = 0.25 * (double)(i % 7) - 0.5;
        if (dt == KILN_F64)
            memcpy(t->init[j] + i * es, &x, 8);
        else if (dt == KILN_F32) {
            float f = (float)x;
            memcpy(t->init[j] + i * es, &f, 4);
        } else if (dt == KILN_I64) {
            int64_t v = (int64_t)i % 5;
            memcpy(t->init[j] + i * es, &v, 8);
        } else {
            int32_t v = (int32_t)(i % 5);
            memcpy(t->init[j] + i * es, &v, 4);
        }
    }
    t->out[j] = mkview(NULL, dt, rank, shape, strides);
}

static void free_case(tcase *t)
{
    for (int j = 0; j < MAXV; j++)
        free(t->init[j]);
    free(t->prog);
}

/* ---- running ------------------------------------------------------------ */

typedef struct result {
    int rc;
    char msg[256];
    unsigned char *buf[MAXV];
} result;

static void result_free(result *r, uint32_t no)
{
    for (uint32_t j = 0; j < no; j++)
        free(r->buf[j]);
}

enum { RUN_PLAIN, RUN_PREPARED };
static int n_declined;   /* prepare calls that declined */

/* Fresh output buffers from the initial bytes, the call's views on them. */
static void fresh(const tcase *t, result *r, kiln_view *out)
{
    for (uint32_t j = 0; j < t->k.n_outputs; j++) {
        if (!r->buf[j])
            r->buf[j] = malloc(t->bytes[j]);
        memcpy(r->buf[j], t->init[j], t->bytes[j]);
        out[j] = t->out[j];
        out[j].data = r->buf[j] + t->off[j];
    }
}

static void run(const kiln_callable *c, const tcase *t, int how, result *r)
{
    kiln_view out[MAXV];
    memset(r, 0, sizeof *r);
    fresh(t, r, out);
    kiln_call call = {sizeof call, t->k.n_inputs, t->k.n_outputs, t->in, out,
                      kiln_runtime_get(), r->msg, sizeof r->msg, NULL, 0};
    void *plan = NULL;
    if (how == RUN_PREPARED && c->struct_size >= sizeof(kiln_callable) &&
        c->prepare && c->prepare(c->state, &call, &plan) == 0) {
        /* twice: the second run on fresh buffers is the result */
        (void)c->run(plan, &call);
        fresh(t, r, out);
        r->msg[0] = '\0';
        r->rc = c->run(plan, &call);
        c->plan_free(plan);
        return;
    }
    if (how == RUN_PREPARED)
        n_declined++;   /* as the host does: fn */
    r->rc = c->fn(c->state, &call);
}

static int same_result(const tcase *t, const result *a, const result *b,
                       const char *what)
{
    if (a->rc != b->rc) {
        diag("%s: %s: rc %d vs %d (%s | %s)", t->name, what, a->rc, b->rc,
             a->msg, b->msg);
        return 0;
    }
    if (a->rc) {
        if (strcmp(a->msg, b->msg) != 0) {
            diag("%s: %s: '%s' vs '%s'", t->name, what, a->msg, b->msg);
            return 0;
        }
        return 1;   /* outputs may be partly written */
    }
    for (uint32_t j = 0; j < t->k.n_outputs; j++)
        if (memcmp(a->buf[j], b->buf[j], t->bytes[j]) != 0) {
            diag("%s: %s: output %u differs", t->name, what, j);
            return 0;
        }
    return 1;
}

/* The case under the interpreter and under llvm (unprepared, prepared,
 * from the artifact's bytes): one test.  `want_rc` is checked against
 * the interpreter's return code. */
static void check_case(tcase *t, int want_rc)
{
    unsigned char *bytes = NULL;
    size_t len = 0;
    kiln_callable *ci = compile_load(I, &t->k, NULL, NULL);
    kiln_callable *cl = compile_load(L, &t->k, &bytes, &len);
    kiln_callable *cb = NULL;
    kiln_plugin_error *e = NULL;
    if (bytes && L->load_bytes(bytes, len, &cb, &e)) {
        diag("load_bytes: %s", e ? e->message : "?");
        L->error_free(e);
        cb = NULL;
    }
    int good = ci && cl && cb;
    uint32_t no = t->k.n_outputs;
    if (good) {
        result ref, got;
        run(ci, t, RUN_PLAIN, &ref);
        if (ref.rc != want_rc) {
            diag("%s: the interpreter returned %d (%s), expected %d", t->name,
                 ref.rc, ref.msg, want_rc);
            good = 0;
        }
        run(cl, t, RUN_PLAIN, &got);
        good &= same_result(t, &ref, &got, "unprepared");
        result_free(&got, no);
        run(cl, t, RUN_PREPARED, &got);
        good &= same_result(t, &ref, &got, "prepared");
        result_free(&got, no);
        run(cb, t, RUN_PLAIN, &got);
        good &= same_result(t, &ref, &got, "from bytes");
        result_free(&got, no);
        result_free(&ref, no);
    }
    ok(good, "%s", t->name);
    if (ci)
        I->callable_free(ci);
    if (cl)
        L->callable_free(cl);
    if (cb)
        L->callable_free(cb);
    free(bytes);
}

/* ---- 1, 2, 4: gathers and scatters -------------------------------------- */

#define NOBS 1000
#define NTAB 37   /* the table */
#define NSC 30    /* the scatter targets */

static double xd[NOBS], tabd[2 * NTAB], sd[1] = {0.75};
static float xf[NOBS], tabf[2 * NTAB], sf[1] = {0.75f};
static int64_t idx64[NOBS];
static int32_t idx32[NOBS];

/* Indices in [-29, 29] in runs (repeats), the bad ones where asked. */
static void fill_idx(int64_t bad_at, int64_t bad, int64_t bad_at2, int64_t bad2)
{
    for (int i = 0; i < NOBS; i++) {
        int64_t v = (int64_t)((i / 7) * 13 % 59) - 29;
        if (i == bad_at)
            v = bad;
        if (i == bad_at2)
            v = bad2;
        idx64[i] = v;
        idx32[i] = (int32_t)v;
    }
}

/* inputs: idx (ITER), x (ITER), tab (TABLE, stride 2), s (ITER,
 * broadcast); outputs: y (ITER), sum (REDUCE over everything), d
 * (SCATTER, NSC targets), count (SCATTER, i64); tab2 = tab[idx - 1].
 * `wide`: a tanh chain of 3 * reps instructions between the index and
 * the second gather. */
static void make_take(tcase *t, unsigned T, unsigned IT, int reps)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "take/scatter %s values, %s indices%s",
             T == KILN_F64 ? "f64" : "f32", IT == KILN_I64 ? "i64" : "i32",
             reps ? ", wide (segments)" : "");
    t->din[0] = (kiln_arg_desc){(uint8_t)IT, 1, {0}};
    t->din[1] = t->din[2] = t->din[3] = (kiln_arg_desc){(uint8_t)T, 1, {0}};
    t->rin[2] = KILN_ROLE_TABLE;
    int32_t li = emit(t, KILN_I_LOAD, IT, 0, -1, -1, 0);
    int32_t lx = emit(t, KILN_I_LOAD, T, 1, -1, -1, 0);
    int32_t one = emit(t, KILN_I_CONST, IT, -1, -1, -1, 1);
    int32_t li2 = emit(t, KILN_I_SUB, IT, li, one, -1, 0);
    int32_t g1 = emit(t, KILN_I_TAKE, T, 2, li, -1, 0);
    int32_t ls = emit(t, KILN_I_LOAD, T, 3, -1, -1, 0);
    int32_t v = emit(t, KILN_I_ADD, T, emit(t, KILN_I_MUL, T, g1, lx, -1, 0),
                     ls, -1, 0);
    for (int r = 0; r < reps; r++) {
        int32_t c = emit(t, KILN_I_CONST, T, -1, -1, -1, 0.5 + 0.001 * r);
        int32_t m = emit(t, KILN_I_MUL, T, v, c, -1, 0);
        v = emit(t, KILN_I_TANH, T, emit(t, KILN_I_ADD, T, m, lx, -1, 0), -1,
                 -1, 0);
    }
    int32_t g2 = emit(t, KILN_I_TAKE, T, 2, li2, -1, 0);
    int32_t y = emit(t, KILN_I_ADD, T, v, emit(t, KILN_I_EXP, T, g2, -1, -1, 0),
                     -1, 0);
    int32_t sv = emit(t, KILN_I_MUL, T, lx, g2, -1, 0);
    int32_t cnt = emit(t, KILN_I_CONST, KILN_I64, -1, -1, -1, 1);
    for (int j = 0; j < 3; j++)
        t->dout[j] = (kiln_arg_desc){(uint8_t)T, 1, {0}};
    t->dout[3] = (kiln_arg_desc){KILN_I64, 1, {0}};
    t->rout[0] = KILN_ROLE_ITER;
    t->rout[1] = KILN_ROLE_REDUCE;
    t->rout[2] = t->rout[3] = KILN_ROLE_SCATTER;
    t->orefs[0] = y;
    t->orefs[1] = sv;
    t->orefs[2] = sv;
    t->orefs[3] = cnt;
    t->oidx[0] = t->oidx[1] = -1;
    t->oidx[2] = t->oidx[3] = li;
    finish(t, 4, 4, "take");
    t->k.reduce_op = KILN_REDUCE_SUM;
    t->k.reduce_axes = 1;
    int64_t n = NOBS, nt = NTAB, ns = NSC, one1 = 1, two = 2, zero = 0;
    t->in[0] = mkview(IT == KILN_I64 ? (void *)idx64 : (void *)idx32, IT, 1, &n,
                      &one1);
    t->in[1] = mkview(T == KILN_F64 ? (void *)xd : (void *)xf, T, 1, &n, &one1);
    t->in[2] = mkview(T == KILN_F64 ? (void *)tabd : (void *)tabf, T, 1, &nt, &two);
    t->in[3] = mkview(T == KILN_F64 ? (void *)sd : (void *)sf, T, 1, &n, &zero);
    set_out(t, 0, T, NOBS, 0, 1, &n, &one1);
    set_out(t, 1, T, 1, 0, 1, &n, &zero);
    set_out(t, 2, T, NSC, 0, 1, &ns, &one1);
    /* the count: every other element of a buffer, backwards */
    int64_t back = -2;
    set_out(t, 3, KILN_I64, 2 * NSC, 2 * NSC - 2, 1, &ns, &back);
}

static void test_take(void)
{
    for (int i = 0; i < NOBS; i++) {
        xd[i] = sin(0.37 * i) * 1.5;
        xf[i] = (float)xd[i];
    }
    for (int i = 0; i < 2 * NTAB; i++) {
        tabd[i] = cos(0.71 * i) - 0.25;
        tabf[i] = (float)tabd[i];
    }
    static const unsigned Ts[2] = {KILN_F64, KILN_F32}, ITs[2] = {KILN_I64, KILN_I32};
    for (int wide = 0; wide < 2; wide++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                if (wide && a + b == 1)
                    continue;   /* wide: f64/i64 and f32/i32 */
                tcase t;
                make_take(&t, Ts[a], ITs[b], wide ? 200 : 0);
                ok(!wide || t.k.n_instrs > 512, "%s: %u instructions", t.name,
                   t.k.n_instrs);
                fill_idx(-1, 0, -1, 0);
                check_case(&t, 0);
                static const struct {
                    int64_t at, v, at2, v2;
                    const char *what;
                } bad[] = {
                    {700, NTAB, -1, 0, "the first gather (index 37)"},
                    {300, -NTAB, -1, 0, "the second gather (-37 - 1)"},
                    {10, NSC + 3, -1, 0, "a scatter (33 of 30)"},
                    {650, 40, 600, -NTAB, "two in one block: instruction order"},
                    {999, -NTAB - 5, -1, 0, "the last element"},
                };
                for (size_t q = 0; q < sizeof bad / sizeof bad[0]; q++) {
                    fill_idx(bad[q].at, bad[q].v, bad[q].at2, bad[q].v2);
                    char name[96];
                    memcpy(name, t.name, sizeof name);
                    snprintf(t.name, sizeof t.name, "%.50s: out of range, %s",
                             name, bad[q].what);
                    check_case(&t, KILN_ERR_RUNTIME);
                    memcpy(t.name, name, sizeof name);
                }
                fill_idx(-1, 0, -1, 0);
                free_case(&t);
            }
}

/* The interpreter's message itself, once. */
static void test_message(void)
{
    tcase t;
    make_take(&t, KILN_F64, KILN_I64, 0);
    fill_idx(700, NTAB, -1, 0);
    kiln_callable *cl = compile_load(L, &t.k, NULL, NULL);
    result r;
    if (cl)
        run(cl, &t, RUN_PLAIN, &r);
    ok(cl && r.rc == KILN_ERR_RUNTIME &&
       strcmp(r.msg, "index 37 is out of bounds for axis 0 with size 37") == 0,
       "out of range: '%s'", cl ? r.msg : "?");
    if (cl) {
        result_free(&r, t.k.n_outputs);
        L->callable_free(cl);
    }
    fill_idx(-1, 0, -1, 0);
    free_case(&t);
}

/* A steady-state call (prepared, and not) allocates nothing. */
static void test_allocs(void)
{
    tcase t;
    make_take(&t, KILN_F64, KILN_I64, 0);
    fill_idx(-1, 0, -1, 0);
    kiln_callable *cl = compile_load(L, &t.k, NULL, NULL);
    if (!cl || !COUNT_ALLOCS) {
        ok(1, "allocations # SKIP %s", cl ? "counting off" : "no callable");
        if (cl)
            L->callable_free(cl);
        free_case(&t);
        return;
    }
    result r;
    memset(&r, 0, sizeof r);
    kiln_view out[MAXV];
    fresh(&t, &r, out);
    kiln_call call = {sizeof call, t.k.n_inputs, t.k.n_outputs, t.in, out,
                      kiln_runtime_get(), r.msg, sizeof r.msg, NULL, 0};
    void *plan = NULL;
    int prep = cl->prepare(cl->state, &call, &plan) == 0;
    int rc = 0;
    (void)cl->fn(cl->state, &call);
#if COUNT_ALLOCS
    long before = n_allocs;
#endif
    for (int i = 0; i < 10; i++) {
        rc |= cl->fn(cl->state, &call);
        if (prep)
            rc |= cl->run(plan, &call);
    }
    long used = 0;
#if COUNT_ALLOCS
    used = n_allocs - before;
#endif
    ok(prep && rc == 0 && used == 0, "a steady-state loop call allocates "
       "nothing (prepared %d, %ld allocations)", prep, used);
    if (plan)
        cl->plan_free(plan);
    result_free(&r, t.k.n_outputs);
    L->callable_free(cl);
    free_case(&t);
}

/* ---- 3: reductions ------------------------------------------------------ */

#define RR 7
#define RC 300
static double xr[RR * RC], yr[RC];
static float xrf[RR * RC], yrf[RC];

enum { LAY_CONTIG, LAY_TRANSPOSED, LAY_STRIDE2, LAY_MIXED, LAY_EMPTY };

/* inputs x (7, 300) and y (broadcast along axis 0); outputs: two
 * reductions of `axes` (v = x * y + x and w = x - y, or for PROD
 * values near 1) and v itself. */
static void make_red(tcase *t, unsigned T, uint32_t op, uint32_t axes, int lay)
{
    static const char *ops[] = {"sum", "prod", "max", "min", "mean"};
    static const char *lays[] = {"contiguous", "transposed", "output stride 2",
                                 "outputs disagree", "empty"};
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s over axes 0x%x, %s, %s", ops[op], axes,
             T == KILN_F64 ? "f64" : "f32", lays[lay]);
    t->din[0] = t->din[1] = (kiln_arg_desc){(uint8_t)T, 2, {0}};
    int32_t x = emit(t, KILN_I_LOAD, T, 0, -1, -1, 0);
    int32_t y = emit(t, KILN_I_LOAD, T, 1, -1, -1, 0);
    int32_t v, w;
    if (op == KILN_REDUCE_PROD) {
        int32_t c = emit(t, KILN_I_CONST, T, -1, -1, -1, 0.01);
        int32_t one = emit(t, KILN_I_CONST, T, -1, -1, -1, 1.0);
        v = emit(t, KILN_I_ADD, T, one, emit(t, KILN_I_MUL, T, c, x, -1, 0), -1, 0);
        w = emit(t, KILN_I_SUB, T, one, emit(t, KILN_I_MUL, T, c, y, -1, 0), -1, 0);
    } else {
        v = emit(t, KILN_I_ADD, T, emit(t, KILN_I_MUL, T, x, y, -1, 0), x, -1, 0);
        w = emit(t, KILN_I_SUB, T, x, y, -1, 0);
    }
    for (int j = 0; j < 3; j++)
        t->dout[j] = (kiln_arg_desc){(uint8_t)T, 2, {0}};
    t->rout[0] = t->rout[1] = KILN_ROLE_REDUCE;
    t->rout[2] = KILN_ROLE_ITER;
    t->orefs[0] = v;
    t->orefs[1] = w;
    t->orefs[2] = v;
    t->oidx[0] = t->oidx[1] = t->oidx[2] = -1;
    finish(t, 2, 3, ops[op]);
    t->k.reduce_op = op;
    t->k.reduce_axes = axes;
    int64_t shape[2] = {RR, lay == LAY_EMPTY ? 0 : RC};
    int64_t xs[2] = {RC, 1}, ys[2] = {0, 1}, vs[2] = {RC, 1};
    if (lay == LAY_TRANSPOSED) {
        xs[0] = 1;
        xs[1] = RR;
    }
    t->in[0] = mkview(T == KILN_F64 ? (void *)xr : (void *)xrf, T, 2, shape, xs);
    t->in[1] = mkview(T == KILN_F64 ? (void *)yr : (void *)yrf, T, 2, shape, ys);
    int step = lay == LAY_STRIDE2 ? 2 : 1;
    for (int j = 0; j < 2; j++) {
        int64_t os[2] = {(axes & 1) ? 0 : step * ((axes & 2) ? 1 : RC),
                         (axes & 2) ? 0 : step};
        if (lay == LAY_MIXED && j == 1) {
            os[0] = 0;   /* folds the kept axis too: into one element */
            os[1] = 0;
        }
        set_out(t, (uint32_t)j, T, (size_t)(step * RR * RC), 0, 2, shape, os);
    }
    set_out(t, 2, T, RR * RC, 0, 2, shape, vs);
}

static void test_reduce(void)
{
    for (int i = 0; i < RR * RC; i++) {
        xr[i] = sin(0.13 * i) * 2.0 + 0.1;
        xrf[i] = (float)xr[i];
    }
    for (int i = 0; i < RC; i++) {
        yr[i] = cos(0.29 * i) - 0.3;
        yrf[i] = (float)yr[i];
    }
    xr[17] = NAN;   /* max/min: NaN wins */
    xrf[17] = NAN;
    static const unsigned Ts[2] = {KILN_F64, KILN_F32};
    for (int a = 0; a < 2; a++)
        for (uint32_t op = 0; op <= KILN_REDUCE_MEAN; op++)
            for (uint32_t axes = 1; axes <= 3; axes++)
                for (int lay = 0; lay < 2; lay++) {
                    tcase t;
                    make_red(&t, Ts[a], op, axes, lay);
                    check_case(&t, 0);
                    free_case(&t);
                }
    static const struct { uint32_t op, axes; int lay; } more[] = {
        {KILN_REDUCE_SUM, 1, LAY_STRIDE2}, {KILN_REDUCE_MAX, 2, LAY_STRIDE2},
        {KILN_REDUCE_SUM, 1, LAY_MIXED}, {KILN_REDUCE_MEAN, 3, LAY_EMPTY},
        {KILN_REDUCE_MEAN, 1, LAY_EMPTY}};
    for (size_t q = 0; q < sizeof more / sizeof more[0]; q++)
        for (int a = 0; a < 2; a++) {
            tcase t;
            make_red(&t, Ts[a], more[q].op, more[q].axes, more[q].lay);
            check_case(&t, 0);
            free_case(&t);
        }
    /* only the outputs that disagree (the interpreter's: fn) */
    ok(n_declined == 2, "prepare declined %d calls (2 expected)", n_declined);
}

/* ---- 6: emit_text ------------------------------------------------------- */

static void test_emit(void)
{
    tcase t;
    make_take(&t, KILN_F64, KILN_I64, 0);
    char *text = NULL;
    kiln_plugin_error *e = NULL;
    kiln_compile_options co = {.struct_size = sizeof co, .opt_level = 2};
    int rc = L->emit_text(&t.k, &co, &text, &e);
    ok(rc == 0 && text && strstr(text, "@kiln_lc(") && strstr(text, "@kiln_ls(")
       && strstr(text, "@kiln_lk("), "emit_text shows kiln_lc, kiln_ls and "
       "kiln_lk");
    if (e)
        L->error_free(e);
    if (text)
        L->text_free(text);
    free_case(&t);
    tcase r;
    make_red(&r, KILN_F64, KILN_REDUCE_SUM, 1, LAY_CONTIG);
    text = NULL;
    rc = L->emit_text(&r.k, &co, &text, &e);
    ok(rc == 0 && text && strstr(text, "@kiln_luc(") && !strstr(text, "@kiln_lk("),
       "a reduction that keeps an axis has kiln_luc and no check");
    if (text)
        L->text_free(text);
    free_case(&r);
}

/* ---- 7: scatter runs in registers, small spaces without the walk ------ */

#define NRUN 600
static int64_t ridx[NRUN];
static int32_t ridx2[NRUN];
static double rxd[NRUN], rsd[1] = {1.25};
static float rxf[NRUN], rsf[1] = {1.25f};

/* Stream 1: runs of 1, 2, 3, 5, 8, 13 repeats, returning to earlier
 * targets, negative ones too; stream 2 (i32): a new target every
 * element.  `bad_at` >= 0: stream 1 is `bad` there. */
static void fill_runs(int64_t bad_at, int64_t bad)
{
    static const int len[6] = {1, 2, 3, 5, 8, 13};
    int r = 0, left = len[0];
    for (int i = 0; i < NRUN; i++) {
        if (left == 0)
            left = len[++r % 6];
        left--;
        ridx[i] = i == bad_at ? bad : (int64_t)(r * 11 % 23) - 11;
        ridx2[i] = (int32_t)(i * 3 % 17);
    }
}

/* inputs: idx (i64), idx2 (i32), x, s (broadcast when `bcast`, else a
 * row); v = x * s + x; outputs: y = v (ITER), r1 = v and r2 = x (REDUCE
 * over everything, `op`), d1[idx] += v and d2[idx2] += x (SCATTER). */
static void make_runs(tcase *t, unsigned T, uint32_t op, int64_t n, int bcast)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "runs %s, %s, n = %lld%s",
             T == KILN_F64 ? "f64" : "f32", op == KILN_REDUCE_MEAN ? "mean" : "sum",
             (long long)n, bcast ? ", broadcast" : "");
    t->din[0] = (kiln_arg_desc){KILN_I64, 1, {0}};
    t->din[1] = (kiln_arg_desc){KILN_I32, 1, {0}};
    t->din[2] = t->din[3] = (kiln_arg_desc){(uint8_t)T, 1, {0}};
    int32_t li = emit(t, KILN_I_LOAD, KILN_I64, 0, -1, -1, 0);
    int32_t li2 = emit(t, KILN_I_LOAD, KILN_I32, 1, -1, -1, 0);
    int32_t lx = emit(t, KILN_I_LOAD, T, 2, -1, -1, 0);
    int32_t ls = emit(t, KILN_I_LOAD, T, 3, -1, -1, 0);
    int32_t v = emit(t, KILN_I_ADD, T, emit(t, KILN_I_MUL, T, lx, ls, -1, 0), lx,
                     -1, 0);
    for (int j = 0; j < 5; j++)
        t->dout[j] = (kiln_arg_desc){(uint8_t)T, 1, {0}};
    t->rout[0] = KILN_ROLE_ITER;
    t->rout[1] = t->rout[2] = KILN_ROLE_REDUCE;
    t->rout[3] = t->rout[4] = KILN_ROLE_SCATTER;
    t->orefs[0] = v;
    t->orefs[1] = v;
    t->orefs[2] = lx;
    t->orefs[3] = v;
    t->orefs[4] = lx;
    t->oidx[0] = t->oidx[1] = t->oidx[2] = -1;
    t->oidx[3] = li;
    t->oidx[4] = li2;
    finish(t, 4, 5, "runs");
    t->k.reduce_op = op;
    t->k.reduce_axes = 1;
    int64_t one1 = 1, zero = 0, ns = NSC, back = -1;
    t->in[0] = mkview(ridx, KILN_I64, 1, &n, &one1);
    t->in[1] = mkview(ridx2, KILN_I32, 1, &n, &one1);
    t->in[2] = mkview(T == KILN_F64 ? (void *)rxd : (void *)rxf, T, 1, &n, &one1);
    t->in[3] = bcast ? mkview(T == KILN_F64 ? (void *)rsd : (void *)rsf, T, 1, &n,
                              &zero)
                     : mkview(T == KILN_F64 ? (void *)rxd : (void *)rxf, T, 1, &n,
                              &one1);
    set_out(t, 0, T, (size_t)n, 0, 1, &n, &one1);
    set_out(t, 1, T, 1, 0, 1, &n, &zero);
    int64_t e1 = 1;   /* r2: extent 1 */
    set_out(t, 2, T, 1, 0, 1, &e1, &one1);
    set_out(t, 3, T, NSC, 0, 1, &ns, &one1);
    /* d2 backwards */
    set_out(t, 4, T, NSC, NSC - 1, 1, &ns, &back);
}

static void test_runs(void)
{
    for (int i = 0; i < NRUN; i++) {
        rxd[i] = sin(0.53 * i) * 2.5 + 0.1;
        rxf[i] = (float)rxd[i];
    }
    static const int64_t ns[] = {1, 8, 255, 256, 257, NRUN};
    static const unsigned Ts[2] = {KILN_F64, KILN_F32};
    int declined = n_declined;
    for (int a = 0; a < 2; a++)
        for (uint32_t op = KILN_REDUCE_SUM; op <= KILN_REDUCE_MEAN;
             op += KILN_REDUCE_MEAN - KILN_REDUCE_SUM)
            for (size_t q = 0; q < sizeof ns / sizeof ns[0]; q++)
                for (int bc = 0; bc < 2; bc++) {
                    tcase t;
                    make_runs(&t, Ts[a], op, ns[q], bc);
                    fill_runs(-1, 0);
                    check_case(&t, 0);
                    if (ns[q] >= 8 && bc) {
                        /* an index out of range on the one-block path */
                        char name[96];
                        memcpy(name, t.name, sizeof name);
                        fill_runs(ns[q] - 3, NSC + 4);
                        snprintf(t.name, sizeof t.name, "%.60s: index %d of %d",
                                 name, NSC + 4, NSC);
                        check_case(&t, KILN_ERR_RUNTIME);
                        fill_runs(5, -NSC - 1);
                        snprintf(t.name, sizeof t.name, "%.60s: index %d of %d",
                                 name, -NSC - 1, NSC);
                        check_case(&t, KILN_ERR_RUNTIME);
                        memcpy(t.name, name, sizeof name);
                    }
                    fill_runs(-1, 0);
                    free_case(&t);
                }
    ok(n_declined == declined, "every runs case was prepared (%d declined)",
       n_declined - declined);
    /* the message itself, prepared, on an 8-element space */
    tcase t;
    make_runs(&t, KILN_F64, KILN_REDUCE_SUM, 8, 1);
    fill_runs(6, NSC);
    kiln_callable *cl = compile_load(L, &t.k, NULL, NULL);
    result r;
    memset(&r, 0, sizeof r);
    if (cl)
        run(cl, &t, RUN_PREPARED, &r);
    ok(cl && r.rc == KILN_ERR_RUNTIME &&
       strcmp(r.msg, "index 30 is out of bounds for axis 0 with size 30") == 0,
       "one-block path, out of range, prepared: '%s'", cl ? r.msg : "?");
    if (cl) {
        result_free(&r, t.k.n_outputs);
        L->callable_free(cl);
    }
    fill_runs(-1, 0);
    free_case(&t);
}

int main(void)
{
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    L = open_backend(bd, "llvm");
    I = open_backend(bd, "interp");
    if (!L || !I) {
        ok(1, "llvm backend # SKIP not built (configure --with-llvm)");
        return done_testing();
    }
    test_take();
    test_message();
    test_allocs();
    test_reduce();
    test_emit();
    test_runs();
    return done_testing();
}
