/*
 * desc.c — the kernel description serialised inside the artifact's bytes
 * (header, argument descriptors, roles, instructions, label, then the
 * object): packed by the compiler module, unpacked by the plugin.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into both modules (the plugin llvm.so,
 * -DKL_FRONT, and the compiler module llvm_codegen.so).  Prefix: kl_ (the
 * backend's).
 */

typedef struct kl_header {  /* 56 bytes */
    uint32_t magic, format;
    uint32_t kind, n_inputs, n_outputs, n_instrs;
    uint32_t reduce_op, scatter_mode, reduce_axes, label_len;
    int32_t axis;
    uint32_t reserved;
    uint64_t obj_len;
} kl_header;

/* The argument descriptors, padded to 8 bytes so that the instructions
 * after them are aligned (the header is 56 bytes). */
static size_t kl_descs_len(const kiln_kernel *k)
{
    size_t n = sizeof(kiln_arg_desc) * ((size_t)k->n_inputs + k->n_outputs);
    return (n + 7u) & ~(size_t)7u;
}

/* LOOP: out_index, in_roles and out_roles after out_refs. */
static size_t kl_roles_len(const kiln_kernel *k)
{
    if (k->kind != KILN_KERNEL_LOOP)
        return 0;
    return sizeof(int32_t) * k->n_outputs + k->n_inputs + k->n_outputs;
}

/* RECUR (format 3): n_carry, n_seq (u32 each) and n_steps (i64). */
static size_t kl_recur_len(const kiln_kernel *k)
{
    return k->kind == KILN_KERNEL_RECUR ? 16u : 0u;
}

static size_t kl_desc_len(const kiln_kernel *k, size_t label_len)
{
    return sizeof(kl_header) + kl_descs_len(k) +
           sizeof(kiln_instr) * k->n_instrs +
           sizeof(int32_t) * (k->n_instrs ? k->n_outputs : 0) +
           kl_roles_len(k) + kl_recur_len(k) + label_len;
}

_Static_assert(sizeof(kl_header) == 56, "artifact header layout");

/* header, descs (padded to 8), instrs, out_refs, (LOOP) out_index,
 * in_roles, out_roles, (RECUR) n_carry, n_seq, n_steps, label, then the
 * object (obj_len). */
#ifndef KL_FRONT
static unsigned char *kl_pack(const kiln_kernel *k, const void *obj,
                              size_t obj_len, size_t *len)
{
    size_t label_len = k->label ? strlen(k->label) : 0;
    size_t dl = kl_desc_len(k, label_len);
    unsigned char *b = malloc(dl + obj_len + 1);
    if (!b)
        return NULL;
    kl_header h = {KL_MAGIC, KL_FORMAT, k->kind, k->n_inputs, k->n_outputs,
                   k->n_instrs, k->reduce_op, k->scatter_mode,
                   k->reduce_axes, (uint32_t)label_len, k->axis, 0,
                   obj_len};
    unsigned char *p = b;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    if (k->n_inputs)
        memcpy(p, k->inputs, sizeof(kiln_arg_desc) * k->n_inputs);
    p += sizeof(kiln_arg_desc) * k->n_inputs;
    memcpy(p, k->outputs, sizeof(kiln_arg_desc) * k->n_outputs);
    p += sizeof(kiln_arg_desc) * k->n_outputs;
    while ((size_t)(p - b) % 8u)
        *p++ = 0;
    if (k->n_instrs) {
        memcpy(p, k->instrs, sizeof(kiln_instr) * k->n_instrs);
        p += sizeof(kiln_instr) * k->n_instrs;
        memcpy(p, k->out_refs, sizeof(int32_t) * k->n_outputs);
        p += sizeof(int32_t) * k->n_outputs;
    }
    if (k->kind == KILN_KERNEL_LOOP) {
        memcpy(p, k->out_index, sizeof(int32_t) * k->n_outputs);
        p += sizeof(int32_t) * k->n_outputs;
        if (k->n_inputs)
            memcpy(p, k->in_roles, k->n_inputs);
        p += k->n_inputs;
        memcpy(p, k->out_roles, k->n_outputs);
        p += k->n_outputs;
    }
    if (k->kind == KILN_KERNEL_RECUR) {
        memcpy(p, &k->n_carry, 4);
        memcpy(p + 4, &k->n_seq, 4);
        memcpy(p + 8, &k->n_steps, 8);
        p += 16;
    }
    if (label_len)
        memcpy(p, k->label, label_len);
    p += label_len;
    if (obj_len)
        memcpy(p, obj, obj_len);
    *len = dl + obj_len;
    return b;
}

/* Parse bytes into a kernel whose arrays point into `bytes`; -1 when the
 * bytes are not ours or do not add up. */
#endif /* !KL_FRONT */

#ifdef KL_FRONT
static int kl_unpack(const unsigned char *bytes, size_t len, kiln_kernel *k,
                     char *label, size_t label_size, const void **obj,
                     size_t *obj_len)
{
    kl_header h;
    if (!bytes || len < sizeof h)
        return -1;
    memcpy(&h, bytes, sizeof h);
    if (h.magic != KL_MAGIC || h.format != KL_FORMAT || h.n_inputs > (1u << 24)
        || h.n_outputs > (1u << 16) || h.n_instrs > (1u << 24)
        || h.label_len > (1u << 16) || h.obj_len > len)
        return -1;
    kiln_kernel kk = {0};
    kk.struct_size = sizeof kk;
    kk.kind = h.kind;
    kk.n_inputs = h.n_inputs;
    kk.n_outputs = h.n_outputs;
    kk.n_instrs = h.n_instrs;
    kk.reduce_op = h.reduce_op;
    kk.scatter_mode = h.scatter_mode;
    kk.reduce_axes = h.reduce_axes;
    kk.axis = h.axis;
    if (kl_desc_len(&kk, h.label_len) + h.obj_len != len)
        return -1;
    const unsigned char *p = bytes + sizeof h;
    kk.inputs = (const kiln_arg_desc *)(const void *)p;
    p += sizeof(kiln_arg_desc) * kk.n_inputs;
    kk.outputs = (const kiln_arg_desc *)(const void *)p;
    p = bytes + sizeof h + kl_descs_len(&kk);
    if (kk.n_instrs) {
        kk.instrs = (const kiln_instr *)(const void *)p;  /* 8-aligned in the copy */
        p += sizeof(kiln_instr) * kk.n_instrs;
        kk.out_refs = (const int32_t *)(const void *)p;
        p += sizeof(int32_t) * kk.n_outputs;
    }
    if (kk.kind == KILN_KERNEL_LOOP) {
        kk.out_index = (const int32_t *)(const void *)p;
        p += sizeof(int32_t) * kk.n_outputs;
        kk.in_roles = p;
        p += kk.n_inputs;
        kk.out_roles = p;
        p += kk.n_outputs;
    }
    if (kk.kind == KILN_KERNEL_RECUR) {
        memcpy(&kk.n_carry, p, 4);
        memcpy(&kk.n_seq, p + 4, 4);
        memcpy(&kk.n_steps, p + 8, 8);
        p += 16;
    }
    snprintf(label, label_size, "%.*s", (int)h.label_len, (const char *)p);
    kk.label = label;
    p += h.label_len;
    *obj = p;
    *obj_len = h.obj_len;
    *k = kk;
    return 0;
}
#endif /* KL_FRONT */
