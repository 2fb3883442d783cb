/*
 * cachekey.c — backend-neutral cache keys (prefix kiln_key_).
 *
 * The canonical serialisation writes, in this order and little-endian:
 *
 *   u8  KILN_KEY_FORMAT
 *   u8  kind
 *   u32 n_inputs, u32 n_outputs
 *   n_inputs  x (u8 dtype, u8 rank)         the arguments as the kernel
 *   n_outputs x (u8 dtype, u8 rank)         sees them
 *   ELEMWISE, REDUCE, LOOP:
 *     u32 n_instrs, then per instruction
 *       u16 op, u8 dtype, i32 a, i32 b, i32 c     (the wiring)
 *       CONST only: the value as the dtype holds it (f64 bits, f32 bits
 *       widened to u64, or the integer after the C conversion)
 *     n_outputs x i32 out_refs
 *   REDUCE: u8 reduce_op, u32 reduce_axes
 *   LOOP: n_inputs x u8 role, n_outputs x (u8 role, i32 out_index),
 *     u8 reduce_op, u32 reduce_axes
 *   JOIN, GATHER: i32 axis
 *   SCATTER: i32 axis, u8 scatter_mode
 *   SCAN (ABI 1.7): i32 axis, u8 reduce_op
 *
 * Nothing else enters: not the label, not the struct_size, not fields a
 * kind does not use (so a stale `axis` left in an elementwise kernel does
 * not split keys).  Broadcasting and layout are properties of the views a
 * kernel is called with (strides, stride 0 for broadcast), which every
 * backend's code handles at run time; so two nodes that differ only in
 * which input broadcasts share one key *and* one artifact, correctly.
 * Where a kind assumes a layout (DOT: C-contiguous operands) the kind says
 * so.  The hash is XXH3-128 from libxxhash (fast, well-kept, and a 128-bit
 * output: a collision among 10^12 kernels has probability ~10^-15).
 */
#include "ir.h"
#include <kiln/cache.h>

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct kbuf {
    uint8_t *p;
    size_t n, cap;   /* written so far (may exceed cap: then only counted) */
} kbuf;

static void put(kbuf *b, const void *src, size_t len)
{
    if (b->n + len <= b->cap)
        memcpy(b->p + b->n, src, len);
    b->n += len;
}

static void put_u8(kbuf *b, unsigned v)
{
    uint8_t x = (uint8_t)v;
    put(b, &x, 1);
}

static void put_u16(kbuf *b, unsigned v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}

static void put_u32(kbuf *b, uint32_t v)
{
    uint8_t x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 4);
}

static void put_u64(kbuf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 8);
}

/* A constant as its dtype holds it: values that give the same code give
 * the same bytes (1.0 and 1 for an i64 constant), values that differ in
 * any bit of the stored number (0.0 and -0.0 as f64) do not. */
static void put_const(kbuf *b, unsigned dt, double v)
{
    switch (dt) {
    case KILN_F64: {
        uint64_t u;
        memcpy(&u, &v, 8);
        put_u64(b, u);
        break;
    }
    case KILN_F32: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        put_u64(b, u);
        break;
    }
    case KILN_BOOL:
        put_u64(b, v != 0);
        break;
    default: {
        /* the C conversion, defined only inside the type's range; the
         * lowering never emits an integer constant outside it, and NaN
         * or out-of-range values hash as a fixed marker instead of
         * invoking undefined behaviour */
        int64_t i;
        if (v != v || v >= 9223372036854775808.0 || v < -9223372036854775808.0)
            i = INT64_MIN;
        else
            i = (int64_t)v;
        if (dt == KILN_I32 && i != INT64_MIN)
            i = (int32_t)(uint32_t)(uint64_t)i;
        put_u64(b, (uint64_t)i);
        break;
    }
    }
}

/* Kernels whose scalar program is part of the key: RECUR with a program
 * (the pass `recur`, ABI 1.10) hashes it beside the body's bytes. */
static int has_program(const kiln_kernel *k)
{
    return k->kind == KILN_KERNEL_ELEMWISE || k->kind == KILN_KERNEL_REDUCE ||
           k->kind == KILN_KERNEL_LOOP ||
           (k->kind == KILN_KERNEL_RECUR && k->n_instrs > 0);
}

size_t kiln_key_canonical(const kiln_kernel *k, uint8_t *buf, size_t size)
{
    if (!k || k->struct_size < offsetof(kiln_kernel, label))
        return 0;
    if ((k->kind < KILN_KERNEL_ELEMWISE || k->kind > KILN_KERNEL_RECUR) &&
        k->kind != KILN_KERNEL_LINALG && k->kind != KILN_KERNEL_ODE &&
        k->kind != KILN_KERNEL_TOPK)
        return 0;
    if ((k->kind == KILN_KERNEL_RECUR || k->kind == KILN_KERNEL_ODE) &&
        (k->struct_size < offsetof(kiln_kernel, n_body_bytes) +
                              sizeof k->n_body_bytes ||
         !k->body_bytes || !k->n_body_bytes))
        return 0;
    if (k->kind == KILN_KERNEL_LOOP &&
        (k->struct_size < offsetof(kiln_kernel, out_index) +
                              sizeof k->out_index ||
         (k->n_inputs && !k->in_roles) || !k->out_roles || !k->out_index))
        return 0;
    if ((k->n_inputs && !k->inputs) || (k->n_outputs && !k->outputs))
        return 0;
    if (has_program(k) &&
        ((k->n_instrs && !k->instrs) || (k->n_outputs && !k->out_refs)))
        return 0;
    kbuf b = {buf, 0, buf ? size : 0};
    put_u8(&b, KILN_KEY_FORMAT);
    put_u8(&b, k->kind);
    put_u32(&b, k->n_inputs);
    put_u32(&b, k->n_outputs);
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        put_u8(&b, k->inputs[i].dtype);
        put_u8(&b, k->inputs[i].rank);
    }
    for (uint32_t i = 0; i < k->n_outputs; i++) {
        put_u8(&b, k->outputs[i].dtype);
        put_u8(&b, k->outputs[i].rank);
    }
    if (has_program(k)) {
        put_u32(&b, k->n_instrs);
        for (uint32_t i = 0; i < k->n_instrs; i++) {
            const kiln_instr *in = &k->instrs[i];
            put_u16(&b, in->op);
            put_u8(&b, in->dtype);
            put_u32(&b, (uint32_t)in->a);
            put_u32(&b, (uint32_t)in->b);
            put_u32(&b, (uint32_t)in->c);
            if (in->op == KILN_I_CONST)
                put_const(&b, in->dtype, in->imm);
        }
        for (uint32_t i = 0; i < k->n_outputs; i++)
            put_u32(&b, (uint32_t)k->out_refs[i]);
    }
    switch (k->kind) {
    case KILN_KERNEL_REDUCE:
        put_u8(&b, k->reduce_op);
        put_u32(&b, k->struct_size >= offsetof(kiln_kernel, reduce_axes) +
                        sizeof k->reduce_axes ? k->reduce_axes : 0);
        break;
    case KILN_KERNEL_JOIN:
    case KILN_KERNEL_GATHER:
        put_u32(&b, (uint32_t)k->axis);
        break;
    case KILN_KERNEL_SCATTER:
        put_u32(&b, (uint32_t)k->axis);
        put_u8(&b, k->scatter_mode);
        break;
    case KILN_KERNEL_SCAN:
        put_u32(&b, (uint32_t)k->axis);
        put_u8(&b, k->reduce_op);
        break;
    case KILN_KERNEL_LINALG:   /* issue 28: the kiln_linalg_op */
        put_u8(&b, k->reduce_op);
        break;
    case KILN_KERNEL_TOPK:     /* issue 29: the axis and k */
        put_u32(&b, (uint32_t)k->axis);
        put_u64(&b, (uint64_t)k->n_steps);
        break;
    case KILN_KERNEL_LOOP:
        for (uint32_t i = 0; i < k->n_inputs; i++)
            put_u8(&b, k->in_roles[i]);
        for (uint32_t i = 0; i < k->n_outputs; i++) {
            put_u8(&b, k->out_roles[i]);
            put_u32(&b, (uint32_t)k->out_index[i]);
        }
        put_u8(&b, k->reduce_op);
        put_u32(&b, k->reduce_axes);
        break;
    case KILN_KERNEL_ODE:
        /* the method, the body by structure, tolerances and steps */
        put_u8(&b, k->reduce_op);
        put_u64(&b, (uint64_t)k->n_body_bytes);
        for (size_t i = 0; i < k->n_body_bytes; i++)
            put_u8(&b, k->body_bytes[i]);
        break;
    case KILN_KERNEL_RECUR:
        /* the body by structure (no names), so the same body keys alike
         * in any model */
        put_u32(&b, k->n_carry);
        put_u32(&b, k->n_seq);
        put_u64(&b, (uint64_t)k->n_steps);
        put_u64(&b, (uint64_t)k->n_body_bytes);
        for (size_t i = 0; i < k->n_body_bytes; i++)
            put_u8(&b, k->body_bytes[i]);
        break;
    default:
        break;
    }
    return b.n;
}

int kiln_key_of_kernel(const kiln_kernel *k, kiln_key *key, kiln_err *err)
{
    if (!key)
        return kiln_seterr(err, KILN_ERR_ARG, "kiln_key_of_kernel: no key");
    size_t n = kiln_key_canonical(k, NULL, 0);
    if (n == 0)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "kiln_key_of_kernel: NULL or malformed kernel");
    uint8_t small[512];
    uint8_t *buf = n <= sizeof small ? small : malloc(n);
    if (!buf)
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    kiln_key_canonical(k, buf, n);
    XXH128_hash_t h = XXH3_128bits(buf, n);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    key->b[0] = KILN_KEY_FORMAT;
    memcpy(key->b + 1, c.digest, 16);
    if (buf != small)
        free(buf);
    return 0;
}

void kiln_key_hex(const kiln_key *key, char hex[KILN_KEY_HEX + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < KILN_KEY_BYTES; i++) {
        hex[2 * i] = digits[key->b[i] >> 4];
        hex[2 * i + 1] = digits[key->b[i] & 15];
    }
    hex[KILN_KEY_HEX] = '\0';
}
