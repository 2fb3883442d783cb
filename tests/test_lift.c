/*
 * test_lift.c — KILN_I_PARAM and the call's constant block (ABI 1.8,
 * issue 27) at the plugin boundary (TAP): the key hashes a PARAM's slot
 * and not its value (a CONST's value it does hash); one compiled callable
 * of each backend (interp, tcc, llvm) computes with whatever block each
 * call passes, through fn and through a prepared call, f64 and f32, in a
 * loop of many elements and in a rank-0 kernel; a call without a block,
 * or with a block too short, fails with KILN_ERR_ARG and a message.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/backend.h>
#include <kiln/cache.h>
#include <kiln/kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "open_backend.h"
#include "runtime.h"
#include "tap.h"

enum { N = 1000 };

/* out = x * p0 + p1, in dtype dt; rank 1 (n elements) or rank 0 */
typedef struct kdesc {
    kiln_arg_desc in[1], out[1];
    kiln_instr ins[5];
    int32_t refs[1];
    kiln_kernel k;
} kdesc;

static void make(kdesc *d, unsigned dt, int rank, int op, double v0,
                 double v1)
{
    memset(d, 0, sizeof *d);
    d->in[0] = (kiln_arg_desc){(uint8_t)dt, (uint8_t)rank, {0, 0}};
    d->out[0] = d->in[0];
    d->ins[0] = (kiln_instr){KILN_I_LOAD, (uint8_t)dt, 0, 0, -1, -1, 0};
    d->ins[1] = (kiln_instr){(uint16_t)op, (uint8_t)dt, 0,
                             op == KILN_I_PARAM ? 0 : -1, -1, -1, v0};
    d->ins[2] = (kiln_instr){KILN_I_MUL, (uint8_t)dt, 0, 0, 1, -1, 0};
    d->ins[3] = (kiln_instr){(uint16_t)op, (uint8_t)dt, 0,
                             op == KILN_I_PARAM ? 1 : -1, -1, -1, v1};
    d->ins[4] = (kiln_instr){KILN_I_ADD, (uint8_t)dt, 0, 2, 3, -1, 0};
    d->refs[0] = 4;
    d->k.struct_size = sizeof d->k;
    d->k.kind = KILN_KERNEL_ELEMWISE;
    d->k.n_inputs = d->k.n_outputs = 1;
    d->k.inputs = d->in;
    d->k.outputs = d->out;
    d->k.n_instrs = 5;
    d->k.instrs = d->ins;
    d->k.out_refs = d->refs;
    d->k.label = "lifted";
}

static void test_keys(void)
{
    kdesc a, b, c, e;
    kiln_key ka, kb, kc, ke;
    kiln_err err = {0, ""};
    make(&a, KILN_F64, 1, KILN_I_PARAM, 0.3, 1.5);
    make(&b, KILN_F64, 1, KILN_I_PARAM, 0.7, -4.25);
    make(&c, KILN_F64, 1, KILN_I_CONST, 0.3, 1.5);
    make(&e, KILN_F64, 1, KILN_I_CONST, 0.7, -4.25);
    ok(kiln_key_of_kernel(&a.k, &ka, &err) == 0 &&
       kiln_key_of_kernel(&b.k, &kb, &err) == 0 &&
       memcmp(&ka, &kb, sizeof ka) == 0,
       "PARAM: kernels differing in the values only share a key");
    ok(kiln_key_of_kernel(&c.k, &kc, &err) == 0 &&
       kiln_key_of_kernel(&e.k, &ke, &err) == 0 &&
       memcmp(&kc, &ke, sizeof kc) != 0 && memcmp(&ka, &kc, sizeof ka) != 0,
       "CONST: the values are in the key (and PARAM != CONST)");
    b.ins[3].a = 0;   /* both PARAMs read slot 0 */
    ok(kiln_key_of_kernel(&b.k, &kb, &err) == 0 &&
       memcmp(&ka, &kb, sizeof ka) != 0, "the slot is in the key");
}

/* One call of callable c on x (n elements, dtype dt) with `block`
 * (n_consts m; size: the call's struct_size); *rc the status. */
static void call_once(const kiln_callable *c, unsigned dt, int rank,
                      const void *x, void *y, const double *block,
                      uint32_t m, size_t size, int prepared, int *rc,
                      char *msg, size_t msz)
{
    kiln_view in = {0}, out = {0};
    in.data = (void *)(uintptr_t)x;
    out.data = y;
    in.rank = out.rank = rank;
    in.dtype = out.dtype = (int32_t)dt;
    if (rank) {
        in.shape[0] = out.shape[0] = N;
        in.strides[0] = out.strides[0] = 1;
    }
    kiln_call call = {sizeof call, 1, 1, &in, &out, kiln_runtime_get(),
                      msg, msz, block, m};
    call.struct_size = size;
    msg[0] = 0;
    void *plan = NULL;
    if (prepared && c->prepare && c->prepare(c->state, &call, &plan) == 0) {
        *rc = c->run(plan, &call);
        c->plan_free(plan);
        return;
    }
    *rc = c->fn(c->state, &call);
}

static void test_backend(const char *name, const kiln_backend *b)
{
    for (int f32 = 0; f32 < 2; f32++)
        for (int rank = 0; rank < 2; rank++) {
            unsigned dt = f32 ? KILN_F32 : KILN_F64;
            kdesc d;
            make(&d, dt, rank, KILN_I_PARAM, 0.3, 1.5);
            kiln_compile_options o = {sizeof o, 2, 0, 0};
            kiln_artifact *a = NULL;
            kiln_callable *c = NULL;
            kiln_plugin_error *e = NULL;
            int rc = b->compile(&d.k, &o, &a, &e);
            if (!rc)
                rc = b->load(a, &c, &e);
            ok(rc == 0, "%s %s rank %d: compiles and loads", name,
               f32 ? "f32" : "f64", rank);
            if (rc) {
                if (e)
                    b->error_free(e);
                if (a)
                    b->artifact_free(a);
                continue;
            }
            static double xd[N], yd[N];
            static float xf[N], yf[N];
            for (int i = 0; i < N; i++) {
                xd[i] = 0.25 * i - 7;
                xf[i] = (float)xd[i];
            }
            const double blocks[2][2] = {{0.3, 1.5}, {-2.75, 1e-3}};
            char msg[256];
            for (int prep = 0; prep < 2; prep++)
                for (int q = 0; q < 2; q++) {
                    call_once(c, dt, rank, f32 ? (void *)xf : (void *)xd,
                              f32 ? (void *)yf : (void *)yd, blocks[q], 2,
                              sizeof(kiln_call), prep, &rc, msg, sizeof msg);
                    int good = rc == 0;
                    int n = rank ? N : 1;
                    for (int i = 0; good && i < n; i++) {
                        if (f32) {
                            float p0 = (float)blocks[q][0], p1 = (float)blocks[q][1];
                            float want = xf[i] * p0 + p1;
                            good = memcmp(&want, &yf[i], 4) == 0;
                        } else {
                            double want = xd[i] * blocks[q][0] + blocks[q][1];
                            good = memcmp(&want, &yd[i], 8) == 0;
                        }
                    }
                    ok(good, "%s %s rank %d%s: block %d's values, bit for bit "
                       "(rc %d %s)", name, f32 ? "f32" : "f64", rank,
                       prep ? " prepared" : "", q, rc, msg);
                }
            call_once(c, dt, rank, f32 ? (void *)xf : (void *)xd,
                      f32 ? (void *)yf : (void *)yd, blocks[0], 1,
                      sizeof(kiln_call), 0, &rc, msg, sizeof msg);
            ok(rc == KILN_ERR_ARG && strstr(msg, "constant block"),
               "%s %s rank %d: a block too short is an error: %s", name,
               f32 ? "f32" : "f64", rank, msg);
            call_once(c, dt, rank, f32 ? (void *)xf : (void *)xd,
                      f32 ? (void *)yf : (void *)yd, NULL, 0,
                      offsetof(kiln_call, consts), 0, &rc, msg, sizeof msg);
            ok(rc == KILN_ERR_ARG && strstr(msg, "constant block"),
               "%s %s rank %d: a call of ABI 1.7 (no block) is an error: %s",
               name, f32 ? "f32" : "f64", rank, msg);
            b->callable_free(c);
            b->artifact_free(a);
        }
}

int main(void)
{
    const char *bd = getenv("KILN_BUILDDIR") ? getenv("KILN_BUILDDIR") : ".";
    test_keys();
    static const char *const names[] = {"interp", "tcc", "llvm"};
    for (int i = 0; i < 3; i++) {
        const kiln_backend *b = open_backend(bd, names[i]);
        if (!b) {
            ok(1, "%s # SKIP not built", names[i]);
            continue;
        }
        kiln_plugin_error *e = NULL;
        kdesc d;
        make(&d, KILN_F64, 1, KILN_I_PARAM, 0.3, 1.5);
        int s = b->supports(&d.k, &e);
        if (e)
            b->error_free(e);
        ok(s == 1, "%s supports PARAM", names[i]);
        if (s == 1)
            test_backend(names[i], b);
    }
    return done_testing();
}
