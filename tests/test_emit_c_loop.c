/*
 * test_emit_c_loop.c — LOOP kernels (ABI 1.5) compiled by the tcc backend
 * from core/lower/emit_c.c, against the interpreter (the reference), on
 * hand-built kernels:
 *
 *  1. TAKE from a strided table with negative indices (i64 and i32
 *     indices, f64 and f32 tables); an index out of range gives
 *     KILN_ERR_RUNTIME and the interpreter's message, also when several
 *     indices of one 256-element block are bad (the same one is named);
 *  2. SCATTER-add with repeated and negative indices into a strided
 *     output holding initial values (f64, f32, i64, i32 values), and its
 *     out-of-range error;
 *  3. REDUCE outputs: sum, prod, max, min, mean over every axis and over
 *     one axis of a 2-D space (rows longer than a block, so the block
 *     order matters), reduced axes as extent 1 or as stride 0, f32/f64;
 *  4. several outputs of every role in one kernel, with strided,
 *     negative-stride and broadcast (stride 0) ITER inputs, an empty
 *     iteration space (identities, NaN means) and an in-place ITER
 *     output;
 *  5. every case again through artifact_bytes -> load_bytes;
 *  6. the emitter's checks refuse malformed LOOP kernels, and the
 *     generated source grows linearly with the kernel's width.
 *
 * Every result is compared bit for bit: the generated code folds in the
 * interpreter's order (256-element blocks, f32 sums in double).  Skips
 * when the tcc plugin was not built.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/backend.h>
#include <kiln/kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit_c.h"
#include "open_backend.h"
#include "runtime.h"
#include "tap.h"

static const kiln_backend *T, *I;

static size_t esize(int dt)
{
    return dt == KILN_F64 || dt == KILN_I64 ? 8 : dt == KILN_BOOL ? 1 : 4;
}

/* ---- a kernel under construction ---------------------------------------- */

#define MAXA 8
#define MAXI 48

typedef struct kb {
    kiln_kernel k;
    kiln_arg_desc in[MAXA], out[MAXA];
    uint8_t in_roles[MAXA], out_roles[MAXA];
    int32_t out_refs[MAXA], out_index[MAXA];
    kiln_instr ins[MAXI];
} kb;

static void kb_init(kb *b, const char *label)
{
    memset(b, 0, sizeof *b);
    b->k.struct_size = sizeof b->k;
    b->k.kind = KILN_KERNEL_LOOP;
    b->k.inputs = b->in;
    b->k.outputs = b->out;
    b->k.instrs = b->ins;
    b->k.out_refs = b->out_refs;
    b->k.in_roles = b->in_roles;
    b->k.out_roles = b->out_roles;
    b->k.out_index = b->out_index;
    b->k.label = label;
}

static int32_t kb_input(kb *b, int role, int dt, int rank)
{
    uint32_t i = b->k.n_inputs++;
    b->in[i].dtype = (uint8_t)dt;
    b->in[i].rank = (uint8_t)rank;
    b->in_roles[i] = (uint8_t)role;
    return (int32_t)i;
}

static int32_t kb_op(kb *b, int op, int dt, int32_t a, int32_t x, int32_t c,
                     double imm)
{
    uint32_t i = b->k.n_instrs++;
    b->ins[i] = (kiln_instr){(uint16_t)op, (uint8_t)dt, 0, a, x, c, imm};
    return (int32_t)i;
}

static void kb_output(kb *b, int role, int dt, int rank, int32_t ref,
                      int32_t index)
{
    uint32_t j = b->k.n_outputs++;
    b->out[j].dtype = (uint8_t)dt;
    b->out[j].rank = (uint8_t)rank;
    b->out_roles[j] = (uint8_t)role;
    b->out_refs[j] = ref;
    b->out_index[j] = index;
}

/* ---- views and runs ----------------------------------------------------- */

static kiln_view view(void *data, int dt, int rank, const int64_t *shape,
                      const int64_t *strides)
{
    kiln_view v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.dtype = dt;
    v.rank = rank;
    for (int d = 0; d < rank; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = strides[d];
    }
    return v;
}

/* An output: a buffer of `bytes` holding `init`, the view's [0,...] at
 * element `at` of it. */
typedef struct obuf {
    kiln_view v;
    const void *init;
    size_t bytes;
    int64_t at;
} obuf;

typedef struct result {
    int rc;
    char msg[256];
    unsigned char *buf[MAXA];
} result;

static void result_free(result *r, uint32_t n)
{
    for (uint32_t j = 0; j < n; j++)
        free(r->buf[j]);
}

/* Run kernel k on backend B (via load_bytes when `bytes`); input
 * `alias` (when >= 0) reads output 0's buffer (an in-place update); -1
 * when it does not compile or load. */
static int run(const kiln_backend *B, int bytes, const kiln_kernel *k,
               const kiln_view *in0, const obuf *ob, int alias, result *r)
{
    kiln_compile_options opt = {sizeof opt, 2, 0, 0};
    kiln_artifact *a = NULL;
    kiln_callable *c = NULL;
    kiln_plugin_error *err = NULL;
    memset(r, 0, sizeof *r);
    if (B->compile(k, &opt, &a, &err)) {
        diag("%s: compile: %s", B->name, err ? err->message : "?");
        if (err)
            B->error_free(err);
        return -1;
    }
    int rc;
    if (bytes == 1) {
        size_t len = 0;
        const void *p = B->artifact_bytes(a, &len);
        rc = p ? B->load_bytes(p, len, &c, &err) : -1;
    } else {
        rc = B->load(a, &c, &err);
    }
    B->artifact_free(a);
    if (rc) {
        diag("%s: load: %s", B->name, err ? err->message : "?");
        if (err)
            B->error_free(err);
        return -1;
    }
    kiln_view outs[MAXA], in[MAXA];
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        r->buf[j] = malloc(ob[j].bytes ? ob[j].bytes : 1);
        memcpy(r->buf[j], ob[j].init, ob[j].bytes);
        outs[j] = ob[j].v;
        outs[j].data = r->buf[j] + ob[j].at * (int64_t)esize(ob[j].v.dtype);
    }
    memcpy(in, in0, k->n_inputs * sizeof *in);
    if (alias >= 0)
        in[alias].data = outs[0].data;
    kiln_call call = {sizeof call, k->n_inputs, k->n_outputs, in, outs,
                      kiln_runtime_get(), r->msg, sizeof r->msg, NULL, 0};
    if (bytes == 2 && c->prepare && c->run) {
        /* a prepared call: prep on views pointing elsewhere (prep reads
         * no data), run on the real ones; a call prep refuses goes to fn
         * as the host sends it */
        static unsigned char elsewhere[64];
        kiln_view pin[MAXA], pout[MAXA];
        memcpy(pin, in, k->n_inputs * sizeof *in);
        memcpy(pout, outs, k->n_outputs * sizeof *outs);
        for (uint32_t j = 0; j < k->n_inputs; j++)
            pin[j].data = elsewhere;
        for (uint32_t j = 0; j < k->n_outputs; j++)
            pout[j].data = elsewhere;
        kiln_call pc = call;
        pc.inputs = pin;
        pc.outputs = pout;
        pc.errbuf = NULL;
        pc.errbuf_size = 0;
        void *plan = NULL;
        if (c->prepare(c->state, &pc, &plan) == 0) {
            r->rc = c->run(plan, &call);
            c->plan_free(plan);
        } else {
            r->rc = c->fn(c->state, &call);
        }
    } else {
        r->rc = c->fn(c->state, &call);
    }
    B->callable_free(c);
    return 0;
}

/* The kernel under tcc (compiled, and through its bytes) equals the
 * interpreter bit for bit: return code, message and every output byte.
 * Returns the interpreter's rc (for the caller's own checks), its message
 * in msg. */
static int check_alias(const char *name, const kiln_kernel *k,
                       const kiln_view *in, const obuf *ob, int alias,
                       char *msg, size_t msgn)
{
    char why[256];
    ok(kiln_emit_c_check(k, why, sizeof why) == 0, "%s: the emitter takes "
       "it%s%s", name, kiln_emit_c_check(k, why, sizeof why) ? ": " : "",
       kiln_emit_c_check(k, why, sizeof why) ? why : "");
    result ref, got;
    if (run(I, 0, k, in, ob, alias, &ref)) {
        ok(0, "%s: the interpreter runs it", name);
        return -1;
    }
    for (int bytes = 0; bytes < 3; bytes++) {
        const char *how = bytes == 2 ? "tcc prepared"
                          : bytes ? "tcc bytes -> load_bytes" : "tcc";
        if (run(T, bytes, k, in, ob, alias, &got)) {
            ok(0, "%s (%s): compiles and loads", name, how);
            continue;
        }
        int same = got.rc == ref.rc && strcmp(got.msg, ref.msg) == 0;
        uint32_t bad = k->n_outputs;
        for (uint32_t j = 0; same && !ref.rc && j < k->n_outputs; j++)
            if (memcmp(got.buf[j], ref.buf[j], ob[j].bytes)) {
                same = 0;
                bad = j;
            }
        ok(same, "%s (%s) equals the interpreter bitwise (rc %d%s%s)", name,
           how, got.rc, got.rc ? ", " : "", got.rc ? got.msg : "");
        if (!same)
            diag("interp rc %d '%s', tcc rc %d '%s', first differing output "
                 "%u", ref.rc, ref.msg, got.rc, got.msg, bad);
        result_free(&got, k->n_outputs);
    }
    if (msg)
        snprintf(msg, msgn, "%s", ref.msg);
    int rc = ref.rc;
    result_free(&ref, k->n_outputs);
    return rc;
}

static int check(const char *name, const kiln_kernel *k, const kiln_view *in,
                 const obuf *ob, char *msg, size_t msgn)
{
    return check_alias(name, k, in, ob, -1, msg, msgn);
}

/* ---- data --------------------------------------------------------------- */

#define N 700
static double xf64[3 * N], yf64[3 * N], tab64[40];
static float xf32[3 * N], tab32[40];
static int64_t ix64[N];
static int32_t ix32[N];
static double init64[3 * N];
static float init32[3 * N];
static int64_t initi64[64];
static int32_t initi32[64];

static void fill(void)
{
    for (int i = 0; i < 3 * N; i++) {
        xf64[i] = sin(0.37 * i) * 3.0 + 0.25;
        yf64[i] = cos(0.11 * i) * 1.5 + 1.0;
        xf32[i] = (float)(sin(0.23 * i) * 2.0 + 1.1);
        init64[i] = -777.0 - i;
        init32[i] = (float)(-555.0 - i);
    }
    xf64[29] = NAN;  /* max/min and sums carry it */
    for (int i = 0; i < 40; i++) {
        tab64[i] = 0.5 * i - 3.25;
        tab32[i] = (float)(0.25 * i + 1.0);
    }
    for (int i = 0; i < N; i++) {
        /* 20 table elements (stride 2 over tab64): -20 .. 19, repeated */
        ix64[i] = (int64_t)((i * 7) % 40) - 20;
        ix32[i] = (int32_t)((i * 11) % 40) - 20;
    }
    for (int i = 0; i < 64; i++) {
        initi64[i] = 1000 * i - 5;
        initi32[i] = 100 * i + 3;
    }
}

/* ---- 1. TAKE ------------------------------------------------------------ */

/* out[i] = take(table, idx[i]) * x[i] + 1 (f64 table of 20 elements,
 * stride 2; or f32 of 40, contiguous). */
static void take_kernel(kb *b, int idt, int tdt)
{
    kb_init(b, "take");
    int32_t ix = kb_input(b, KILN_ROLE_ITER, idt, 1);
    int32_t tb = kb_input(b, KILN_ROLE_TABLE, tdt, 1);
    int32_t x = kb_input(b, KILN_ROLE_ITER, tdt, 1);
    int32_t li = kb_op(b, KILN_I_LOAD, idt, ix, -1, -1, 0);
    int32_t g = kb_op(b, KILN_I_TAKE, tdt, tb, li, -1, 0);
    int32_t lx = kb_op(b, KILN_I_LOAD, tdt, x, -1, -1, 0);
    int32_t m = kb_op(b, KILN_I_MUL, tdt, g, lx, -1, 0);
    int32_t one = kb_op(b, KILN_I_CONST, tdt, -1, -1, -1, 1.0);
    int32_t s = kb_op(b, KILN_I_ADD, tdt, m, one, -1, 0);
    kb_output(b, KILN_ROLE_ITER, tdt, 1, s, -1);
}

static void test_take(void)
{
    static const int64_t n[1] = {N}, s1[1] = {1}, s2[1] = {2};
    static const int64_t t20[1] = {20}, t40[1] = {40};
    for (int v = 0; v < 4; v++) {
        int idt = v & 1 ? KILN_I32 : KILN_I64;
        int tdt = v & 2 ? KILN_F32 : KILN_F64;
        kb b;
        take_kernel(&b, idt, tdt);
        kiln_view in[3] = {
            view(idt == KILN_I64 ? (void *)ix64 : (void *)ix32, idt, 1, n, s1),
            tdt == KILN_F64 ? view(tab64 + 1, tdt, 1, t20, s2)
                            : view(tab32, tdt, 1, t40, s1),
            view(tdt == KILN_F64 ? (void *)xf64 : (void *)xf32, tdt, 1, n, s1),
        };
        obuf ob[1] = {{view(NULL, tdt, 1, n, s1),
                       tdt == KILN_F64 ? (void *)init64 : (void *)init32,
                       N * esize(tdt), 0}};
        char name[64];
        snprintf(name, sizeof name, "take %s table, %s indices (negative)",
                 tdt == KILN_F64 ? "f64" : "f32",
                 idt == KILN_I64 ? "i64" : "i32");
        check(name, &b.k, in, ob, NULL, 0);
    }

    /* out of range: one bad index, then several in one block (the first
     * take of the program is named, at its first bad element), then a bad
     * one past the first block only */
    kb b;
    take_kernel(&b, KILN_I64, KILN_F64);
    static int64_t bad[N];
    kiln_view in[3] = {view(bad, KILN_I64, 1, n, s1),
                       view(tab64 + 1, KILN_F64, 1, t20, s2),
                       view(xf64, KILN_F64, 1, n, s1)};
    obuf ob[1] = {{view(NULL, KILN_F64, 1, n, s1), init64, N * 8, 0}};
    char msg[256];
    memcpy(bad, ix64, sizeof bad);
    bad[100] = 20;
    int rc = check("take, index 20 of 20", &b.k, in, ob, msg, sizeof msg);
    ok(rc == KILN_ERR_RUNTIME &&
       !strcmp(msg, "index 20 is out of bounds for axis 0 with size 20"),
       "take out of range: KILN_ERR_RUNTIME, '%s'", msg);
    bad[100] = ix64[100];
    bad[5] = -21;
    rc = check("take, index -21 of 20", &b.k, in, ob, msg, sizeof msg);
    ok(rc == KILN_ERR_RUNTIME &&
       !strcmp(msg, "index -21 is out of bounds for axis 0 with size 20"),
       "take negative out of range: '%s'", msg);
    bad[5] = ix64[5];
    bad[300] = 99;
    bad[600] = -99;
    rc = check("take, bad indices in the second and third blocks", &b.k, in,
               ob, msg, sizeof msg);
    ok(rc == KILN_ERR_RUNTIME && strstr(msg, "index 99 "),
       "the first bad block is reported: '%s'", msg);

    /* two takes: the second take's index is bad at element 3, the first's
     * at element 9 of the same block: the interpreter names the first */
    kb_init(&b, "take2");
    int32_t i0 = kb_input(&b, KILN_ROLE_ITER, KILN_I64, 1);
    int32_t i1 = kb_input(&b, KILN_ROLE_ITER, KILN_I32, 1);
    int32_t tb = kb_input(&b, KILN_ROLE_TABLE, KILN_F64, 1);
    int32_t tc = kb_input(&b, KILN_ROLE_TABLE, KILN_F32, 1);
    int32_t l0 = kb_op(&b, KILN_I_LOAD, KILN_I64, i0, -1, -1, 0);
    int32_t l1 = kb_op(&b, KILN_I_LOAD, KILN_I32, i1, -1, -1, 0);
    int32_t g0 = kb_op(&b, KILN_I_TAKE, KILN_F64, tb, l0, -1, 0);
    int32_t g1 = kb_op(&b, KILN_I_TAKE, KILN_F32, tc, l1, -1, 0);
    int32_t c1 = kb_op(&b, KILN_I_CAST, KILN_F64, g1, -1, -1, 0);
    int32_t s = kb_op(&b, KILN_I_SUB, KILN_F64, g0, c1, -1, 0);
    kb_output(&b, KILN_ROLE_ITER, KILN_F64, 1, s, -1);
    static int32_t bad32[N];
    memcpy(bad, ix64, sizeof bad);
    memcpy(bad32, ix32, sizeof bad32);
    bad32[3] = 40;
    bad[9] = 20;
    kiln_view in2[4] = {view(bad, KILN_I64, 1, n, s1),
                        view(bad32, KILN_I32, 1, n, s1),
                        view(tab64 + 1, KILN_F64, 1, t20, s2),
                        view(tab32, KILN_F32, 1, t40, s1)};
    rc = check("two takes, both bad in one block", &b.k, in2, ob, msg,
               sizeof msg);
    ok(rc == KILN_ERR_RUNTIME &&
       !strcmp(msg, "index 20 is out of bounds for axis 0 with size 20"),
       "two bad takes: the first take is named: '%s'", msg);
    bad[9] = ix64[9];
    rc = check("two takes, the second bad", &b.k, in2, ob, msg, sizeof msg);
    ok(rc == KILN_ERR_RUNTIME &&
       !strcmp(msg, "index 40 is out of bounds for axis 0 with size 40"),
       "the second take's bad index: '%s'", msg);
}

/* ---- 2. SCATTER --------------------------------------------------------- */

static void test_scatter(void)
{
    static const int64_t n[1] = {N}, s1[1] = {1};
    static const int64_t z[1] = {20}, zs[1] = {-2};
    const int dts[4] = {KILN_F64, KILN_F32, KILN_I64, KILN_I32};
    for (int v = 0; v < 8; v++) {
        int dt = dts[v % 4], idt = v < 4 ? KILN_I64 : KILN_I32;
        kb b;
        kb_init(&b, "scatter");
        int32_t ix = kb_input(&b, KILN_ROLE_ITER, idt, 1);
        int32_t x = kb_input(&b, KILN_ROLE_ITER, KILN_F64, 1);
        int32_t li = kb_op(&b, KILN_I_LOAD, idt, ix, -1, -1, 0);
        int32_t lx = kb_op(&b, KILN_I_LOAD, KILN_F64, x, -1, -1, 0);
        int32_t k3 = kb_op(&b, KILN_I_CONST, KILN_F64, -1, -1, -1, 3.0);
        int32_t m = kb_op(&b, KILN_I_MUL, KILN_F64, lx, k3, -1, 0);
        int32_t val = dt == KILN_F64 ? m
                                     : kb_op(&b, KILN_I_CAST, dt, m, -1, -1, 0);
        kb_output(&b, KILN_ROLE_SCATTER, dt, 1, val, li);
        kiln_view in[2] = {
            view(idt == KILN_I64 ? (void *)ix64 : (void *)ix32, idt, 1, n, s1),
            view(xf64, KILN_F64, 1, n, s1)};
        /* 20 elements at stride -2 from the end of a 40-element buffer */
        const void *init = dt == KILN_F64   ? (const void *)init64
                           : dt == KILN_F32 ? (const void *)init32
                           : dt == KILN_I64 ? (const void *)initi64
                                            : (const void *)initi32;
        obuf ob[1] = {{view(NULL, dt, 1, z, zs), init, 40 * esize(dt), 39}};
        char name[80];
        snprintf(name, sizeof name, "scatter-add of %s by %s indices "
                 "(repeated, negative, stride -2)",
                 dt == KILN_F64 ? "f64" : dt == KILN_F32 ? "f32"
                 : dt == KILN_I64 ? "i64" : "i32",
                 idt == KILN_I64 ? "i64" : "i32");
        check(name, &b.k, in, ob, NULL, 0);
        if (v == 0) {
            static int64_t bad[N];
            char msg[256];
            memcpy(bad, ix64, sizeof bad);
            bad[400] = 20;
            in[0].data = bad;
            int rc = check("scatter-add, index 20 of 20", &b.k, in, ob, msg,
                           sizeof msg);
            ok(rc == KILN_ERR_RUNTIME &&
               !strcmp(msg, "index 20 is out of bounds for axis 0 with "
                       "size 20"), "scatter out of range: '%s'", msg);
        }
    }
}

/* ---- 3. REDUCE outputs ------------------------------------------------- */

static const char *const op_name[] = {"sum", "prod", "max", "min", "mean"};

static void test_reduce(void)
{
    /* space 3 x N; x (3, N) C-contiguous, y its transpose's view */
    static const int64_t sh[2] = {3, N}, cs[2] = {N, 1}, ts[2] = {1, 3};
    for (int dt = KILN_F64; dt <= KILN_F32; dt++)
        for (uint32_t op = 0; op <= KILN_REDUCE_MEAN; op++)
            for (uint32_t axes = 1; axes <= 3; axes++)
                for (int form = 0; form < 2; form++) {
                    kb b;
                    kb_init(&b, op_name[op]);
                    b.k.reduce_op = op;
                    b.k.reduce_axes = axes;
                    int32_t x = kb_input(&b, KILN_ROLE_ITER, dt, 2);
                    int32_t y = kb_input(&b, KILN_ROLE_ITER, KILN_F64, 2);
                    int32_t lx = kb_op(&b, KILN_I_LOAD, dt, x, -1, -1, 0);
                    int32_t ly = kb_op(&b, KILN_I_LOAD, KILN_F64, y, -1, -1, 0);
                    int32_t cy = dt == KILN_F64
                                     ? ly
                                     : kb_op(&b, KILN_I_CAST, dt, ly, -1, -1, 0);
                    /* prod of values near 1 stays finite */
                    int32_t k = kb_op(&b, KILN_I_CONST, dt, -1, -1, -1,
                                      op == KILN_REDUCE_PROD ? 0.001 : 1.0);
                    int32_t m = kb_op(&b, KILN_I_MUL, dt, lx, k, -1, 0);
                    int32_t v = kb_op(&b, op == KILN_REDUCE_PROD ? KILN_I_ADD
                                                                 : KILN_I_MUL,
                                      dt, m, cy, -1, 0);
                    kb_output(&b, KILN_ROLE_REDUCE, dt, 2, v, -1);
                    /* the iteration shape also as an ITER output */
                    kb_output(&b, KILN_ROLE_ITER, dt, 2, m, -1);
                    kiln_view in[2] = {
                        view(dt == KILN_F64 ? (void *)xf64 : (void *)xf32, dt,
                             2, sh, cs),
                        view(yf64, KILN_F64, 2, sh, ts)};
                    /* the reduce output: extent 1 on reduced axes (form
                     * 0), or the space's extent with stride 0 (form 1) */
                    int64_t osh[2], ost[2];
                    for (int d = 0; d < 2; d++) {
                        int red = (axes >> d) & 1u;
                        osh[d] = red && form == 0 ? 1 : sh[d];
                        ost[d] = red ? 0 : d == 0 ? (axes & 2u ? 1 : N) : 1;
                    }
                    const void *init = dt == KILN_F64 ? (const void *)init64
                                                      : (const void *)init32;
                    obuf ob[2] = {
                        {view(NULL, dt, 2, osh, ost), init, 3 * N * esize(dt),
                         0},
                        {view(NULL, dt, 2, sh, cs), init, 3 * N * esize(dt),
                         0}};
                    char name[96];
                    snprintf(name, sizeof name, "%s over axes %s (%s), %s",
                             op_name[op],
                             axes == 3 ? "0,1" : axes == 1 ? "0" : "1",
                             form ? "stride 0" : "extent 1",
                             dt == KILN_F64 ? "f64" : "f32");
                    check(name, &b.k, in, ob, NULL, 0);
                }
}

/* ---- 4. mixed roles ----------------------------------------------------- */

/* a (N) strided by 3, b broadcast from one element (stride 0), c walked
 * backwards, idx, table: out0 = a * b + take(t, idx) (ITER, in place over
 * a copy of c when `inplace`), out1 = sum(out0) (REDUCE), out2 =
 * scatter-add of c at idx (SCATTER), out3 = max(c) (REDUCE). */
static void test_mixed(void)
{
    static const int64_t n[1] = {N}, s1[1] = {1}, s3[1] = {3}, s0[1] = {0};
    static const int64_t sm[1] = {-1}, one[1] = {1}, t20[1] = {20};
    static const int64_t s2[1] = {2}, e0[1] = {0};
    for (int variant = 0; variant < 3; variant++) {
        int inplace = variant == 1, empty = variant == 2;
        kb b;
        kb_init(&b, "mixed");
        b.k.reduce_op = KILN_REDUCE_SUM;
        b.k.reduce_axes = 1;
        int32_t a = kb_input(&b, KILN_ROLE_ITER, KILN_F64, 1);
        int32_t bb = kb_input(&b, KILN_ROLE_ITER, KILN_F64, 1);
        int32_t tb = kb_input(&b, KILN_ROLE_TABLE, KILN_F64, 1);
        int32_t c = kb_input(&b, KILN_ROLE_ITER, KILN_F64, 1);
        int32_t ix = kb_input(&b, KILN_ROLE_ITER, KILN_I32, 1);
        int32_t la = kb_op(&b, KILN_I_LOAD, KILN_F64, a, -1, -1, 0);
        int32_t lb = kb_op(&b, KILN_I_LOAD, KILN_F64, bb, -1, -1, 0);
        int32_t li = kb_op(&b, KILN_I_LOAD, KILN_I32, ix, -1, -1, 0);
        int32_t g = kb_op(&b, KILN_I_TAKE, KILN_F64, tb, li, -1, 0);
        int32_t m = kb_op(&b, KILN_I_MUL, KILN_F64, la, lb, -1, 0);
        int32_t lc = kb_op(&b, KILN_I_LOAD, KILN_F64, c, -1, -1, 0);
        int32_t s = kb_op(&b, KILN_I_ADD, KILN_F64, m, g, -1, 0);
        int32_t s_c = kb_op(&b, KILN_I_ADD, KILN_F64, s, lc, -1, 0);
        kb_output(&b, KILN_ROLE_ITER, KILN_F64, 1, s_c, -1);
        kb_output(&b, KILN_ROLE_REDUCE, KILN_F64, 1, s, -1);
        kb_output(&b, KILN_ROLE_SCATTER, KILN_F64, 1, lc, li);
        kb_output(&b, KILN_ROLE_REDUCE, KILN_F64, 1, lc, -1);
        static double cbuf[N];
        for (int i = 0; i < N; i++)
            cbuf[i] = yf64[i] - 0.5 * i;
        const int64_t *len = empty ? e0 : n;
        kiln_view in[5] = {view(xf64, KILN_F64, 1, len, s3),
                           view(yf64 + 5, KILN_F64, 1, len, s0),
                           view(tab64 + 1, KILN_F64, 1, t20, s2),
                           view(cbuf + N - 1, KILN_F64, 1, len, sm),
                           view(ix32, KILN_I32, 1, len, s1)};
        obuf ob[4] = {{view(NULL, KILN_F64, 1, len, s1), init64, N * 8, 0},
                      {view(NULL, KILN_F64, 1, one, s1), init64, 8, 0},
                      {view(NULL, KILN_F64, 1, t20, s1), init64, 20 * 8, 0},
                      {view(NULL, KILN_F64, 1, one, s1), init64, 8, 0}};
        const char *name = empty     ? "mixed roles, empty iteration space"
                           : inplace ? "mixed roles, ITER output in place of c"
                                     : "mixed roles, strided/broadcast/"
                                       "negative-stride inputs";
        if (!inplace) {
            check(name, &b.k, in, ob, NULL, 0);
            if (empty) {
                /* a mean of nothing: NaN, as the interpreter */
                b.k.reduce_op = KILN_REDUCE_MEAN;
                check("mixed roles, empty space, mean", &b.k, in, ob, NULL, 0);
                b.k.reduce_op = KILN_REDUCE_MAX;
                check("mixed roles, empty space, max", &b.k, in, ob, NULL, 0);
            }
            continue;
        }
        /* in place: output 0 is (a copy of) c itself, read as input 3 */
        obuf ip[4] = {ob[0], ob[1], ob[2], ob[3]};
        ip[0].v = view(NULL, KILN_F64, 1, n, sm);
        ip[0].init = cbuf;
        ip[0].at = N - 1;
        check_alias(name, &b.k, in, ip, 3, NULL, 0);
    }
}

/* ---- 6. checks and width ------------------------------------------------ */

static void test_checks(void)
{
    char why[256];
    kb b;
    take_kernel(&b, KILN_I64, KILN_F64);
    b.in_roles[1] = KILN_ROLE_ITER;
    ok(kiln_emit_c_check(&b.k, why, sizeof why) != 0,
       "take from an ITER input is refused: %s", why);
    take_kernel(&b, KILN_I64, KILN_F64);
    b.ins[2].a = 1;  /* load of the table */
    ok(kiln_emit_c_check(&b.k, why, sizeof why) != 0,
       "load of a table is refused: %s", why);
    take_kernel(&b, KILN_I64, KILN_F64);
    b.k.kind = KILN_KERNEL_ELEMWISE;
    ok(kiln_emit_c_check(&b.k, why, sizeof why) != 0,
       "take outside a loop is refused: %s", why);
    take_kernel(&b, KILN_I64, KILN_F64);
    b.ins[1].b = 2;  /* index from a later instruction */
    ok(kiln_emit_c_check(&b.k, why, sizeof why) != 0,
       "take of a later instruction is refused: %s", why);
    take_kernel(&b, KILN_I64, KILN_F64);
    b.out_roles[0] = KILN_ROLE_SCATTER;
    b.out_index[0] = 2;  /* an f64 index */
    ok(kiln_emit_c_check(&b.k, why, sizeof why) != 0,
       "a scatter index of f64 is refused: %s", why);
    take_kernel(&b, KILN_I64, KILN_F64);
    b.out_roles[0] = KILN_ROLE_REDUCE;
    b.k.reduce_op = KILN_REDUCE_MEAN;
    b.k.reduce_axes = 2;
    ok(kiln_emit_c_check(&b.k, why, sizeof why) != 0,
       "reduce_axes beyond the rank is refused: %s", why);
    take_kernel(&b, KILN_I64, KILN_F64);
    b.k.struct_size = offsetof(kiln_kernel, in_roles);
    ok(kiln_emit_c_check(&b.k, why, sizeof why) != 0,
       "a LOOP without roles (an older struct) is refused: %s", why);

    /* width: W ITER inputs and W table takes summed into one output */
    size_t len[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        uint32_t w = t ? 200 : 100;
        kiln_arg_desc *in = calloc(2 * w + 1, sizeof *in);
        uint8_t *roles = calloc(2 * w + 1, 1);
        kiln_instr *ins = calloc(4 * w + 1, sizeof *ins);
        kiln_arg_desc out = {KILN_F64, 1, {0}};
        uint8_t orole = KILN_ROLE_REDUCE;
        int32_t ref = 0, oix = -1;
        uint32_t ni = 0;
        in[0] = (kiln_arg_desc){KILN_I64, 1, {0}};
        ins[ni++] = (kiln_instr){KILN_I_LOAD, KILN_I64, 0, 0, -1, -1, 0};
        int32_t acc = -1;
        for (uint32_t i = 0; i < w; i++) {
            in[1 + 2 * i] = (kiln_arg_desc){KILN_F64, 1, {0}};
            in[2 + 2 * i] = (kiln_arg_desc){KILN_F64, 1, {0}};
            roles[2 + 2 * i] = KILN_ROLE_TABLE;
            int32_t l = (int32_t)ni;
            ins[ni++] = (kiln_instr){KILN_I_LOAD, KILN_F64, 0,
                                     (int32_t)(1 + 2 * i), -1, -1, 0};
            int32_t g = (int32_t)ni;
            ins[ni++] = (kiln_instr){KILN_I_TAKE, KILN_F64, 0,
                                     (int32_t)(2 + 2 * i), 0, -1, 0};
            int32_t m = (int32_t)ni;
            ins[ni++] = (kiln_instr){KILN_I_MUL, KILN_F64, 0, l, g, -1, 0};
            if (acc >= 0) {
                ins[ni] = (kiln_instr){KILN_I_ADD, KILN_F64, 0, acc, m, -1, 0};
                acc = (int32_t)ni++;
            } else {
                acc = m;
            }
        }
        ref = acc;
        kiln_kernel k;
        memset(&k, 0, sizeof k);
        k.struct_size = sizeof k;
        k.kind = KILN_KERNEL_LOOP;
        k.n_inputs = 2 * w + 1;
        k.n_outputs = 1;
        k.inputs = in;
        k.outputs = &out;
        k.n_instrs = ni;
        k.instrs = ins;
        k.out_refs = &ref;
        k.reduce_op = KILN_REDUCE_SUM;
        k.reduce_axes = 1;
        k.in_roles = roles;
        k.out_roles = &orole;
        k.out_index = &oix;
        k.label = "wide";
        char *src = NULL;
        if (kiln_emit_c(&k, &src, &len[t], why, sizeof why))
            diag("emit: %s", why);
        free(src);
        free(in);
        free(roles);
        free(ins);
    }
    ok(len[0] > 0 && len[1] < 2 * len[0] + 8192 && len[1] > len[0],
       "generated source grows linearly with the width: %zu bytes for 100 "
       "tables, %zu for 200", len[0], len[1]);
}

int main(void)
{
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    T = open_backend(bd, "tcc");
    I = open_backend(bd, "interp");
    if (!T || !I) {
        printf("1..0 # SKIP the tcc or interp plugin was not built\n");
        return 0;
    }
    fill();
    test_take();
    test_scatter();
    test_reduce();
    test_mixed();
    test_checks();
    return done_testing();
}
