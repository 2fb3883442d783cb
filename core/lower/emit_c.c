/*
 * emit_c.c — kernel description -> one self-contained C translation unit
 * (prefix kiln_emit_c_; see emit_c.h for the contract).
 *
 * Every unit splits a call in two (ABI 1.4 prepared calls): kiln_kernel_
 * prep checks the views and fills a plan (struct kplan, fixed size per
 * kernel) with the data-independent work, kiln_kernel_run does the rest
 * from the plan and the views' data; kiln_kernel is the two in a row,
 * with the plan on its stack.  Shape of the generated code, per kind:
 *
 *  ELEMWISE  the output's shape is coalesced (in prep) exactly as the
 *            interpreter does (extent-1 dims dropped, a dim merged into
 *            the one outside it when every view steps through both as
 *            one); an odometer walks the outer dims, and the innermost
 *            (coalesced) dim is a plain loop running the scalar program
 *            once per element: one C statement per live instruction,
 *            values in "registers" (locals reused by liveness, per dtype),
 *            LOADs and finite CONSTs inlined where they are used.  A
 *            rank-0 kernel's run is that program alone, on the views'
 *            data.
 *  REDUCE    the same walk over inputs[0]'s shape; the output's reduced
 *            axes have stride 0.  Rows are cut into blocks of 256
 *            elements; when the row itself is reduced, a block is summed
 *            into a local accumulator (double for f32) and combined into
 *            the output once — the interpreter's order, so results are
 *            bitwise equal.  The output is initialised to the identity
 *            first; MEAN divides at the end.
 *  JOIN      a run-time loop over the input views (no code per input);
 *            prep checks their shapes, run copies.
 *  GATHER/SCATTER  prep checks the shapes; run checks the indices first
 *            (exact interpreter message), then
 *            the positions of x[:axis] + idx in C order, each copying (or
 *            adding) a sub-array.
 *  LOOP      (ABI 1.5) the ELEMWISE/REDUCE walk with each argument's
 *            stride given by its role (kl_role, kl_lst: ITER views step,
 *            REDUCE outputs have stride 0 on reduce_axes, TABLE inputs
 *            and SCATTER outputs are indexed, not walked), coalesced as
 *            the interpreter coalesces; rows in 256-element blocks.  Per
 *            element the program (TAKE: a bounds-checked indexed load),
 *            then each output by role: ITER stored, REDUCE folded as in
 *            REDUCE (identity first, MEAN at the end), SCATTER added at
 *            its index after the same check.  A bad index ends the call
 *            after its block with the interpreter's message, naming the
 *            index the interpreter names (the first check in program
 *            order, then element order, of the first bad block).
 *  RECUR     (ABI 1.10, with a program) the fused scan: prep finds T
 *            and keeps the axis-0 strides; run holds the carries and args
 *            in locals, runs the program once per step (a sequence's
 *            element at t * stride), stores the stacked rows, replaces
 *            every carry at once through temporaries, and stores the
 *            final carries after the loop.
 *  DOT       one rt->dgemm / rt->sgemm call when the views are BLAS
 *            layouts (decided in prep), else a triple loop accumulating in double (as the
 *            interpreter).
 *
 * Integer + - * wrap by computing in unsigned and converting back (the
 * conversion of an out-of-range unsigned value to a signed type is
 * implementation-defined in C; tcc and gcc define it as modulo 2^N).
 * Float -> integer casts go through a range check (NaN and out of range
 * give the type's minimum).  Float constants are written as hexadecimal
 * literals (exact); infinities and NaNs are built from their bits.
 */
#include "emit_c.h"

#include <kiln/kiln.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The generated source declares these layouts itself. */
_Static_assert(sizeof(kiln_view) == 8 + 16 * KILN_MAX_RANK + 8,
               "kiln_view layout");
_Static_assert(KILN_MAX_RANK == 8, "generated code assumes rank <= 8");
_Static_assert(offsetof(kiln_runtime, trigamma) == 152, "runtime layout");
_Static_assert(offsetof(kiln_call, errbuf_size) == 48 &&
               offsetof(kiln_call, n_consts) == 64, "call layout");

/* ------------------------------------------------------------------ */
/* A growing string                                                     */
/* ------------------------------------------------------------------ */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_grow(sbuf *b, size_t add)
{
    if (b->oom)
        return;
    if (b->len + add + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + add + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return;
    }
    b->s = s;
    b->cap = cap;
}

static void sb_put(sbuf *b, const char *s)
{
    size_t n = strlen(s);
    sb_grow(b, n);
    if (b->oom)
        return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    sb_grow(b, (size_t)n);
    if (b->oom)
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* ------------------------------------------------------------------ */
/* Tables                                                               */
/* ------------------------------------------------------------------ */

enum opclass {
    C_LOAD, C_CONST, C_CAST, C_NUMERIC, C_FLOAT, C_ORDER, C_WHERE,
    C_COMPARE, C_LOGIC, C_TAKE, C_PARAM
};

typedef struct opinfo {
    const char *name;
    uint8_t arity, cls;
    const char *rt;     /* runtime table entry, or NULL */
} opinfo;

static const opinfo ops[KILN_I_COUNT] = {
    [KILN_I_LOAD] = {"load", 0, C_LOAD, NULL},
    [KILN_I_CONST] = {"const", 0, C_CONST, NULL},
    [KILN_I_CAST] = {"cast", 1, C_CAST, NULL},
    [KILN_I_ADD] = {"add", 2, C_NUMERIC, NULL},
    [KILN_I_SUB] = {"sub", 2, C_NUMERIC, NULL},
    [KILN_I_MUL] = {"mul", 2, C_NUMERIC, NULL},
    [KILN_I_TRUE_DIV] = {"true_div", 2, C_FLOAT, NULL},
    [KILN_I_NEG] = {"neg", 1, C_NUMERIC, NULL},
    [KILN_I_ABS] = {"abs", 1, C_NUMERIC, NULL},
    [KILN_I_EXP] = {"exp", 1, C_FLOAT, "exp"},
    [KILN_I_EXPM1] = {"expm1", 1, C_FLOAT, "expm1"},
    [KILN_I_LOG] = {"log", 1, C_FLOAT, "log"},
    [KILN_I_LOG1P] = {"log1p", 1, C_FLOAT, "log1p"},
    [KILN_I_SQRT] = {"sqrt", 1, C_FLOAT, "sqrt"},
    [KILN_I_SQUARE] = {"square", 1, C_NUMERIC, NULL},
    [KILN_I_POW] = {"pow", 2, C_FLOAT, "pow"},
    [KILN_I_SIGMOID] = {"sigmoid", 1, C_FLOAT, "sigmoid"},
    [KILN_I_SOFTPLUS] = {"softplus", 1, C_FLOAT, "softplus"},
    [KILN_I_TANH] = {"tanh", 1, C_FLOAT, "tanh"},
    [KILN_I_SIN] = {"sin", 1, C_FLOAT, "sin"},
    [KILN_I_COS] = {"cos", 1, C_FLOAT, "cos"},
    [KILN_I_ERF] = {"erf", 1, C_FLOAT, "erf"},
    [KILN_I_ERFC] = {"erfc", 1, C_FLOAT, "erfc"},
    [KILN_I_GAMMALN] = {"gammaln", 1, C_FLOAT, "gammaln"},
    [KILN_I_DIGAMMA] = {"digamma", 1, C_FLOAT, "digamma"},
    [KILN_I_MAXIMUM] = {"maximum", 2, C_ORDER, NULL},
    [KILN_I_MINIMUM] = {"minimum", 2, C_ORDER, NULL},
    [KILN_I_WHERE] = {"where", 3, C_WHERE, NULL},
    [KILN_I_EQ] = {"eq", 2, C_COMPARE, NULL},
    [KILN_I_NE] = {"ne", 2, C_COMPARE, NULL},
    [KILN_I_LT] = {"lt", 2, C_COMPARE, NULL},
    [KILN_I_LE] = {"le", 2, C_COMPARE, NULL},
    [KILN_I_GT] = {"gt", 2, C_COMPARE, NULL},
    [KILN_I_GE] = {"ge", 2, C_COMPARE, NULL},
    [KILN_I_AND] = {"and", 2, C_LOGIC, NULL},
    [KILN_I_OR] = {"or", 2, C_LOGIC, NULL},
    [KILN_I_NOT] = {"not", 1, C_LOGIC, NULL},
    [KILN_I_TRIGAMMA] = {"trigamma", 1, C_FLOAT, "trigamma"},
    /* LOOP kernels: its one instruction operand is b (a is an input) */
    [KILN_I_TAKE] = {"take", 1, C_TAKE, NULL},
    /* ABI 1.7: runtime table version 3 */
    [KILN_I_FLOOR] = {"floor", 1, C_FLOAT, "floor"},
    [KILN_I_CEIL] = {"ceil", 1, C_FLOAT, "ceil"},
    [KILN_I_TRUNC] = {"trunc", 1, C_FLOAT, "trunc"},
    [KILN_I_RINT] = {"rint", 1, C_FLOAT, "rint"},
    [KILN_I_ROUND] = {"round", 1, C_FLOAT, "round"},
    [KILN_I_LOG1MEXP] = {"log1mexp", 1, C_FLOAT, "log1mexp"},
    [KILN_I_ERFCX] = {"erfcx", 1, C_FLOAT, "erfcx"},
    [KILN_I_ERFINV] = {"erfinv", 1, C_FLOAT, "erfinv"},
    [KILN_I_ERFCINV] = {"erfcinv", 1, C_FLOAT, "erfcinv"},
    [KILN_I_MOD] = {"mod", 2, C_NUMERIC, "mod"},
    [KILN_I_GAMMAINC] = {"gammainc", 2, C_FLOAT, "gammainc"},
    [KILN_I_GAMMAINCC] = {"gammaincc", 2, C_FLOAT, "gammaincc"},
    [KILN_I_BETAINC] = {"betainc", 3, C_FLOAT, "betainc"},
    [KILN_I_GAMMAINC_DA] = {"gammainc_da", 2, C_FLOAT, "gammainc_da"},
    [KILN_I_BETAINC_DA] = {"betainc_da", 3, C_FLOAT, "betainc_da"},
    [KILN_I_BETAINC_DB] = {"betainc_db", 3, C_FLOAT, "betainc_db"},
    [KILN_I_PARAM] = {"param", 0, C_PARAM, NULL},
    [KILN_I_I0E] = {"i0e", 1, C_FLOAT, "i0e"},
    [KILN_I_I1E] = {"i1e", 1, C_FLOAT, "i1e"},
};

static const char *const dt_name[KILN_NDTYPES] = {"f64", "f32", "i64",
                                                  "i32", "bool"};
/* C types in the generated code (typedefs of the preamble). */
static const char *const ctype[KILN_NDTYPES] = {"double", "float", "i64",
                                                "i32", "u8"};
/* Same-size unsigned types for copies (bit-exact, NaN payloads kept). */
static const char *const utype[KILN_NDTYPES] = {"u64", "u32", "u64", "u32",
                                                "u8"};

static int is_float(unsigned dt) { return dt == KILN_F64 || dt == KILN_F32; }
static int is_int(unsigned dt) { return dt == KILN_I64 || dt == KILN_I32; }

static int32_t operand(const kiln_instr *in, unsigned q)
{
    if (in->op == KILN_I_TAKE)
        return in->b;
    return q == 0 ? in->a : q == 1 ? in->b : in->c;
}

static int why_f(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && n)
        vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Checking                                                             */
/* ------------------------------------------------------------------ */

/* A full-size copy of the host's kernel (fields beyond its struct_size
 * read as 0). */
static int read_kernel(const kiln_kernel *src, kiln_kernel *dst, char *why,
                       size_t n)
{
    size_t need = offsetof(kiln_kernel, outputs) + sizeof(src->outputs);
    if (!src)
        return why_f(why, n, "no kernel");
    if (src->struct_size < need)
        return why_f(why, n, "kernel struct_size %zu is too small",
                     src->struct_size);
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, src->struct_size < sizeof *dst ? src->struct_size
                                                    : sizeof *dst);
    dst->struct_size = sizeof *dst;
    return 0;
}

/* KILN_I_TAKE (LOOP kernels): a = a TABLE input of the result's dtype,
 * b = an i64/i32 instruction (checked earlier). */
static int check_take(const kiln_kernel *k, uint32_t i, char *why, size_t n)
{
    const kiln_instr *in = &k->instrs[i];
    if (k->kind != KILN_KERNEL_LOOP)
        return why_f(why, n, "instruction %u (take) outside a loop kernel",
                     i);
    if (in->a < 0 || (uint32_t)in->a >= k->n_inputs ||
        k->in_roles[in->a] != KILN_ROLE_TABLE)
        return why_f(why, n, "instruction %u (take): input %d is not a "
                     "table", i, (int)in->a);
    if (!is_int(k->instrs[in->b].dtype))
        return why_f(why, n, "instruction %u (take): the index is %s, not "
                     "i64/i32", i, dt_name[k->instrs[in->b].dtype]);
    if (k->inputs[in->a].dtype != in->dtype)
        return why_f(why, n, "instruction %u (take): dtype %s but input %d "
                     "is %s", i, dt_name[in->dtype], (int)in->a,
                     dt_name[k->inputs[in->a].dtype]);
    return 0;
}

static int check_instr(const kiln_kernel *k, uint32_t i, char *why, size_t n)
{
    const kiln_instr *in = &k->instrs[i];
    if (in->op >= KILN_I_COUNT)
        return why_f(why, n, "instruction %u: unknown opcode %u", i, in->op);
    const opinfo *info = &ops[in->op];
    unsigned dt = in->dtype;
    if (dt >= KILN_NDTYPES)
        return why_f(why, n, "instruction %u (%s): unknown dtype %u", i,
                     info->name, dt);
    for (unsigned q = 0; q < info->arity; q++) {
        int32_t o = operand(in, q);
        if (o < 0 || (uint32_t)o >= i)
            return why_f(why, n, "instruction %u (%s): operand %u is %d, not "
                         "an earlier instruction", i, info->name, q, (int)o);
    }
    switch (info->cls) {
    case C_LOAD:
        if (in->a < 0 || (uint32_t)in->a >= k->n_inputs)
            return why_f(why, n, "instruction %u (load): input %d does not "
                         "exist", i, (int)in->a);
        if (k->inputs[in->a].dtype != dt)
            return why_f(why, n, "instruction %u (load): dtype %s but input "
                         "%d is %s", i, dt_name[dt], (int)in->a,
                         dt_name[k->inputs[in->a].dtype]);
        if (k->kind == KILN_KERNEL_LOOP &&
            k->in_roles[in->a] != KILN_ROLE_ITER)
            return why_f(why, n, "instruction %u (load): input %d is a "
                         "table", i, (int)in->a);
        return 0;
    case C_TAKE:
        return check_take(k, i, why, n);
    case C_CONST:
    case C_CAST:
        return 0;
    case C_PARAM:
        if (in->a < 0 || !is_float(dt))
            return why_f(why, n, "instruction %u (param): slot %d of dtype "
                         "%s (a slot >= 0, f64 or f32)", i, (int)in->a,
                         dt_name[dt]);
        return 0;
    case C_WHERE:
        if (k->instrs[in->a].dtype != KILN_BOOL ||
            k->instrs[in->b].dtype != dt || k->instrs[in->c].dtype != dt)
            return why_f(why, n, "instruction %u (where): bad operand dtypes",
                         i);
        return 0;
    case C_COMPARE:
        if (dt != KILN_BOOL ||
            k->instrs[in->a].dtype != k->instrs[in->b].dtype)
            return why_f(why, n, "instruction %u (%s): bad dtypes", i,
                         info->name);
        return 0;
    default:
        break;
    }
    for (unsigned q = 0; q < info->arity; q++)
        if (k->instrs[operand(in, q)].dtype != dt)
            return why_f(why, n, "instruction %u (%s): operand %u is %s, "
                         "result is %s", i, info->name, q,
                         dt_name[k->instrs[operand(in, q)].dtype],
                         dt_name[dt]);
    int ok = info->cls == C_ORDER ||
             (info->cls == C_NUMERIC && dt != KILN_BOOL) ||
             (info->cls == C_FLOAT && is_float(dt)) ||
             (info->cls == C_LOGIC && dt == KILN_BOOL);
    if (!ok)
        return why_f(why, n, "instruction %u: %s is not defined for %s", i,
                     info->name, dt_name[dt]);
    return 0;
}

static int check_program(const kiln_kernel *k, char *why, size_t n)
{
    if (k->n_instrs == 0 || !k->instrs || !k->out_refs)
        return why_f(why, n, "kernel without a program");
    for (uint32_t i = 0; i < k->n_instrs; i++)
        if (check_instr(k, i, why, n))
            return -1;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        int32_t r = k->out_refs[j];
        if (r < 0 || (uint32_t)r >= k->n_instrs)
            return why_f(why, n, "out_refs[%u] = %d is not an instruction", j,
                         (int)r);
        if (k->instrs[r].dtype != k->outputs[j].dtype)
            return why_f(why, n, "output %u is %s but instruction %d gives %s",
                         j, dt_name[k->outputs[j].dtype], (int)r,
                         dt_name[k->instrs[r].dtype]);
    }
    return 0;
}

static int check_ranks(const kiln_kernel *k, unsigned rank, char *why,
                       size_t n)
{
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->inputs[i].rank != rank)
            return why_f(why, n, "input %u has rank %u, expected %u", i,
                         k->inputs[i].rank, rank);
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->outputs[j].rank != rank)
            return why_f(why, n, "output %u has rank %u, expected %u", j,
                         k->outputs[j].rank, rank);
    return 0;
}

/* Whether reduce_op is defined for an output of dtype dt. */
static int check_reduce_dtype(uint32_t op, unsigned dt, char *why, size_t n)
{
    switch (op) {
    case KILN_REDUCE_SUM:
    case KILN_REDUCE_PROD:
        if (dt == KILN_BOOL)
            return why_f(why, n, "sum/prod of bool");
        return 0;
    case KILN_REDUCE_MEAN:
        if (!is_float(dt))
            return why_f(why, n, "mean of %s", dt_name[dt]);
        return 0;
    case KILN_REDUCE_MAX:
    case KILN_REDUCE_MIN:
        return 0;
    default:
        return why_f(why, n, "unknown reduce_op %u", op);
    }
}

/* The argument whose shape is a LOOP's iteration space: the first ITER
 * input, else the first ITER or REDUCE output (index into inputs, or
 * n_inputs + output index); -1 when there is none. */
static int64_t loop_space(const kiln_kernel *k)
{
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->in_roles[i] == KILN_ROLE_ITER)
            return i;
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] == KILN_ROLE_ITER ||
            k->out_roles[j] == KILN_ROLE_REDUCE)
            return (int64_t)k->n_inputs + j;
    return -1;
}

/* LOOP (ABI 1.5): roles, ranks, reductions and scatter indices (the
 * interpreter's rules). */
static int check_loop(const kiln_kernel *k, char *why, size_t n)
{
    if ((k->n_inputs && !k->in_roles) || !k->out_roles || !k->out_index)
        return why_f(why, n, "loop kernel without roles or out_index");
    for (uint32_t i = 0; i < k->n_inputs; i++)
        if (k->in_roles[i] != KILN_ROLE_ITER &&
            k->in_roles[i] != KILN_ROLE_TABLE)
            return why_f(why, n, "input %u has role %u", i, k->in_roles[i]);
    for (uint32_t j = 0; j < k->n_outputs; j++)
        if (k->out_roles[j] != KILN_ROLE_ITER &&
            k->out_roles[j] != KILN_ROLE_REDUCE &&
            k->out_roles[j] != KILN_ROLE_SCATTER)
            return why_f(why, n, "output %u has role %u", j,
                         k->out_roles[j]);
    int64_t sp = loop_space(k);
    if (sp < 0)
        return why_f(why, n, "loop kernel without an iteration input or "
                     "output");
    unsigned rank = sp < k->n_inputs ? k->inputs[sp].rank
                                     : k->outputs[sp - k->n_inputs].rank;
    if (rank < 32 && (k->reduce_axes >> rank) != 0)
        return why_f(why, n, "reduce_axes 0x%x beyond rank %u",
                     k->reduce_axes, rank);
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        unsigned want = k->in_roles[i] == KILN_ROLE_TABLE ? 1u : rank;
        if (k->inputs[i].rank != want)
            return why_f(why, n, "input %u has rank %u, expected %u", i,
                         k->inputs[i].rank, want);
    }
    if (check_program(k, why, n))
        return -1;
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        unsigned role = k->out_roles[j], dt = k->outputs[j].dtype;
        unsigned want = role == KILN_ROLE_SCATTER ? 1u : rank;
        int32_t x = k->out_index[j];
        if (k->outputs[j].rank != want)
            return why_f(why, n, "output %u has rank %u, expected %u", j,
                         k->outputs[j].rank, want);
        if (role == KILN_ROLE_REDUCE &&
            check_reduce_dtype(k->reduce_op, dt, why, n))
            return -1;
        if (role != KILN_ROLE_SCATTER) {
            if (x != -1)
                return why_f(why, n, "out_index[%u] = %d for an output that "
                             "does not scatter", j, (int)x);
            continue;
        }
        if (dt == KILN_BOOL)
            return why_f(why, n, "output %u: a scatter-add of bool", j);
        if (x < 0 || (uint32_t)x >= k->n_instrs ||
            !is_int(k->instrs[x].dtype))
            return why_f(why, n, "out_index[%u] = %d is not an i64/i32 "
                         "instruction", j, (int)x);
    }
    return 0;
}

/* RECUR with a program (ABI 1.10): carries and args rank 0, sequences
 * and stacked outputs rank 1, each final carry of its carry's dtype, a
 * program without TAKE or PARAM.  Without a program the host runs the
 * kernel (refused). */
static int check_recur(const kiln_kernel *k, char *why, size_t n)
{
    uint32_t nc = k->n_carry, ns = k->n_seq;
    if (k->n_instrs == 0)
        return why_f(why, n, "recur kernel without a program (the host "
                     "runs it)");
    if ((uint64_t)nc + ns > k->n_inputs || nc > k->n_outputs)
        return why_f(why, n, "recur: %u carries and %u sequences for %u "
                     "inputs and %u outputs", nc, ns, k->n_inputs,
                     k->n_outputs);
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        unsigned want = i >= nc && i < nc + ns ? 1u : 0u;
        if (k->inputs[i].rank != want)
            return why_f(why, n, "recur: input %u has rank %u, expected %u",
                         i, k->inputs[i].rank, want);
    }
    for (uint32_t j = 0; j < k->n_outputs; j++) {
        unsigned want = j < nc ? 0u : 1u;
        if (k->outputs[j].rank != want)
            return why_f(why, n, "recur: output %u has rank %u, expected %u",
                         j, k->outputs[j].rank, want);
        if (j < nc && k->outputs[j].dtype != k->inputs[j].dtype)
            return why_f(why, n, "recur: carry %u is %s but its output is "
                         "%s", j, dt_name[k->inputs[j].dtype],
                         dt_name[k->outputs[j].dtype]);
    }
    if (ns == 0 && k->n_outputs == nc && k->n_steps < 0)
        return why_f(why, n, "recur: no sequence, no stacked output and no "
                     "step count");
    if (check_program(k, why, n))
        return -1;
    for (uint32_t i = 0; i < k->n_instrs; i++)
        if (k->instrs[i].op == KILN_I_PARAM)
            return why_f(why, n, "instruction %u (param) in a recur kernel",
                         i);
    return 0;
}

static int check_full(const kiln_kernel *k, char *why, size_t n)
{
    if (k->n_outputs == 0 || !k->outputs)
        return why_f(why, n, "kernel has no outputs");
    if (k->n_inputs > 0 && !k->inputs)
        return why_f(why, n, "kernel has inputs but no input descriptions");
    for (uint64_t i = 0; i < (uint64_t)k->n_inputs + k->n_outputs; i++) {
        const kiln_arg_desc *d = i < k->n_inputs
                                     ? &k->inputs[i]
                                     : &k->outputs[i - k->n_inputs];
        if (d->dtype >= KILN_NDTYPES || d->rank > KILN_MAX_RANK)
            return why_f(why, n, "argument %llu has dtype %u and rank %u",
                         (unsigned long long)i, d->dtype, d->rank);
    }
    const kiln_arg_desc *o = &k->outputs[0];
    switch (k->kind) {
    case KILN_KERNEL_ELEMWISE:
        if (check_ranks(k, o->rank, why, n))
            return -1;
        return check_program(k, why, n);
    case KILN_KERNEL_REDUCE:
        if (k->n_outputs < 1 || k->n_inputs < 1)
            return why_f(why, n, "reduce needs >= 1 input and >= 1 output");
        if (check_ranks(k, k->inputs[0].rank, why, n))
            return -1;
        for (uint32_t q = 0; q < k->n_outputs; q++)
            if (check_reduce_dtype(k->reduce_op, k->outputs[q].dtype, why, n))
                return -1;
        return check_program(k, why, n);
    case KILN_KERNEL_JOIN:
        if (k->n_outputs != 1 || k->n_inputs < 1)
            return why_f(why, n, "join needs >= 1 input and 1 output");
        if (o->rank < 1 || k->axis < 0 || (unsigned)k->axis >= o->rank)
            return why_f(why, n, "join axis %d out of range", (int)k->axis);
        for (uint32_t i = 0; i < k->n_inputs; i++)
            if (k->inputs[i].dtype != o->dtype)
                return why_f(why, n, "join input %u has another dtype", i);
        return check_ranks(k, o->rank, why, n);
    case KILN_KERNEL_GATHER:
    case KILN_KERNEL_SCATTER: {
        int gather = k->kind == KILN_KERNEL_GATHER;
        if (k->n_inputs != 2 || k->n_outputs != 1)
            return why_f(why, n, "gather/scatter needs 2 inputs, 1 output");
        const kiln_arg_desc *data = gather ? &k->inputs[0] : o;
        const kiln_arg_desc *idx = gather ? &k->inputs[1] : &k->inputs[0];
        const kiln_arg_desc *side = gather ? o : &k->inputs[1];
        if (!is_int(idx->dtype) || side->dtype != data->dtype)
            return why_f(why, n, "gather/scatter dtypes");
        if (data->rank < 1 || k->axis < 0 || (unsigned)k->axis >= data->rank)
            return why_f(why, n, "gather/scatter axis %d out of range",
                         (int)k->axis);
        if ((unsigned)side->rank != (unsigned)data->rank - 1u + idx->rank)
            return why_f(why, n, "gather/scatter ranks");
        if (!gather && k->scatter_mode != KILN_SCATTER_SET &&
            k->scatter_mode != KILN_SCATTER_INC)
            return why_f(why, n, "unknown scatter_mode %u", k->scatter_mode);
        return 0;
    }
    case KILN_KERNEL_LOOP:
        return check_loop(k, why, n);
    case KILN_KERNEL_SCAN:   /* ABI 1.7, issue 25 */
        if (k->n_inputs != 1 || k->n_outputs != 1)
            return why_f(why, n, "scan needs 1 input and 1 output");
        if (o->rank < 1 || k->axis < 0 || (unsigned)k->axis >= o->rank)
            return why_f(why, n, "scan axis %d out of range", (int)k->axis);
        if (k->inputs[0].dtype != o->dtype || o->dtype == KILN_BOOL)
            return why_f(why, n, "scan dtypes");
        if (k->reduce_op != KILN_REDUCE_SUM &&
            k->reduce_op != KILN_REDUCE_PROD)
            return why_f(why, n, "scan reduce_op %u", k->reduce_op);
        return check_ranks(k, o->rank, why, n);
    case KILN_KERNEL_RECUR:    /* ABI 1.10, with a program */
        return check_recur(k, why, n);
    case KILN_KERNEL_LINALG:   /* ABI 1.9, issue 28 */
        if (k->n_inputs < 1 || k->n_inputs > 2 || k->n_outputs != 1 ||
            k->reduce_op > KILN_LINALG_LAST)
            return why_f(why, n, "linalg: 1 or 2 inputs, 1 output, a known "
                         "op");
        for (uint32_t i = 0; i < k->n_inputs; i++)
            if (k->inputs[i].dtype != KILN_F64)
                return why_f(why, n, "linalg dtypes");
        if (o->dtype != KILN_F64)
            return why_f(why, n, "linalg dtypes");
        return 0;
    case KILN_KERNEL_DOT: {
        if (k->n_inputs != 2 || k->n_outputs != 1)
            return why_f(why, n, "dot needs 2 inputs and 1 output");
        const kiln_arg_desc *a = &k->inputs[0], *b = &k->inputs[1];
        if (!is_float(a->dtype) || b->dtype != a->dtype ||
            o->dtype != a->dtype)
            return why_f(why, n, "dot dtypes");
        /* ABI 1.11: a batched product is three views of one rank >= 3 */
        int batched = o->rank >= 3 && a->rank == o->rank &&
                      b->rank == o->rank && o->rank <= KILN_MAX_RANK;
        if (!batched && (a->rank < 1 || a->rank > 2 || b->rank < 1 ||
                         b->rank > 2 || o->rank != a->rank + b->rank - 2))
            return why_f(why, n, "dot ranks");
        return 0;
    }
    default:
        return why_f(why, n, "unknown kernel kind %u", k->kind);
    }
}

int kiln_emit_c_check(const kiln_kernel *k, char *why, size_t n)
{
    kiln_kernel full;
    if (read_kernel(k, &full, why, n))
        return -1;
    return check_full(&full, why, n);
}

/* ------------------------------------------------------------------ */
/* Emission state                                                       */
/* ------------------------------------------------------------------ */

enum need {
    N_FABS = 1, N_FABSF = 2, N_F2I64 = 4, N_F2I32 = 8, N_BITS = 16,
    N_ITER = 32, N_PUTI = 64, N_COPY = 128, N_LENERR = 256,
    N_IDXERR = 512
};

typedef struct emitter {
    const kiln_kernel *k;
    sbuf body;           /* the kernel function */
    unsigned need;       /* helpers the body uses (enum need) */
    char label[64];      /* sanitised, for messages */
    int scalar;          /* a rank-0 ELEMWISE: no loop, LOADs are *pN */
    int recur;           /* RECUR: LOADs are carries kN, sequence
                            elements pN[t * sN] and args aN */
    /* programs */
    uint8_t *live;
    uint32_t *last;      /* last reader of each instruction */
    int32_t *reg;        /* register of each instruction, -1 none */
    uint32_t n_regs[KILN_NDTYPES];
    uint8_t *used_in;    /* inputs read by a live LOAD */
    char tmp[3][128];    /* operand texts */
} emitter;

/* Text of a finite constant of dtype dt (the value converted as the
 * interpreter converts an imm), or NULL when it needs a local. */
static const char *const_text(double imm, unsigned dt, char *buf, size_t n)
{
    switch (dt) {
    case KILN_F64:
        if (!isfinite(imm))
            return NULL;
        snprintf(buf, n, "(%a)", imm);
        return buf;
    case KILN_F32: {
        float f = (float)imm;
        if (!isfinite(f))
            return NULL;
        snprintf(buf, n, "((float)(%a))", (double)f);
        return buf;
    }
    case KILN_I64: {
        int64_t v = imm >= -0x1p63 && imm < 0x1p63 ? (int64_t)imm : INT64_MIN;
        if (v == INT64_MIN)
            snprintf(buf, n, "(-9223372036854775807LL - 1)");
        else
            snprintf(buf, n, "((i64)%lldLL)", (long long)v);
        return buf;
    }
    case KILN_I32: {
        int32_t v = imm > -2147483649.0 && imm < 2147483648.0 ? (int32_t)imm
                                                               : INT32_MIN;
        if (v == INT32_MIN)
            snprintf(buf, n, "(-2147483647 - 1)");
        else
            snprintf(buf, n, "((i32)%d)", (int)v);
        return buf;
    }
    default:
        snprintf(buf, n, "((u8)%d)", imm != 0);
        return buf;
    }
}

/* LOAD, CONST and PARAM: values with no statement of their own. */
static int is_leaf(unsigned op)
{
    return op == KILN_I_LOAD || op == KILN_I_CONST || op == KILN_I_PARAM;
}

/* The text naming instruction i's value inside the element loop. */
static const char *ref(emitter *e, int32_t i, char *buf, size_t n)
{
    const kiln_instr *in = &e->k->instrs[i];
    if (in->op == KILN_I_LOAD) {
        uint32_t nc = e->k->n_carry, ns = e->k->n_seq;
        if (e->recur)
            snprintf(buf, n, (uint32_t)in->a < nc ? "k%d"
                             : (uint32_t)in->a < nc + ns ? "p%d[t * s%d]"
                             : "a%d", (int)in->a, (int)in->a);
        else if (e->scalar)
            snprintf(buf, n, "(*p%d)", (int)in->a);
        else
            snprintf(buf, n, "p%d[j * s%d]", (int)in->a, (int)in->a);
        return buf;
    }
    if (in->op == KILN_I_CONST || in->op == KILN_I_PARAM) {
        if (in->op == KILN_I_CONST && const_text(in->imm, in->dtype, buf, n))
            return buf;
        snprintf(buf, n, "c%d", (int)i);
        return buf;
    }
    snprintf(buf, n, "r%s_%d", dt_name[in->dtype], (int)e->reg[i]);
    return buf;
}

/* A LOOP's scatter indices are read after the program, with its outputs:
 * live (mark) and never freed (!mark). */
static void loop_index_live(emitter *e, int mark)
{
    const kiln_kernel *k = e->k;
    for (uint32_t j = 0; k->kind == KILN_KERNEL_LOOP && j < k->n_outputs; j++)
        if (k->out_index[j] >= 0) {
            if (mark)
                e->live[k->out_index[j]] = 1;
            else
                e->last[k->out_index[j]] = UINT32_MAX;
        }
}

/* Liveness and register assignment (per dtype, reused after last use). */
static int plan_program(emitter *e)
{
    const kiln_kernel *k = e->k;
    uint32_t n = k->n_instrs;
    e->live = calloc(n, 1);
    e->last = calloc(n, sizeof *e->last);
    e->reg = malloc(n * sizeof *e->reg);
    e->used_in = calloc(k->n_inputs ? k->n_inputs : 1, 1);
    uint32_t *fl = malloc(n * sizeof *fl * KILN_NDTYPES);
    uint32_t nfree[KILN_NDTYPES] = {0};
    if (!e->live || !e->last || !e->reg || !e->used_in || !fl) {
        free(fl);
        return -1;
    }
    for (uint32_t j = 0; j < k->n_outputs; j++)
        e->live[k->out_refs[j]] = 1;
    loop_index_live(e, 1);
    for (uint32_t i = n; i-- > 0;) {
        if (!e->live[i])
            continue;
        const kiln_instr *in = &k->instrs[i];
        for (unsigned q = 0; q < ops[in->op].arity; q++) {
            int32_t o = operand(in, q);
            e->live[o] = 1;
            if (e->last[o] < i)
                e->last[o] = i;
        }
        if (in->op == KILN_I_LOAD)
            e->used_in[in->a] = 1;
    }
    for (uint32_t j = 0; j < k->n_outputs; j++)
        e->last[k->out_refs[j]] = UINT32_MAX;
    loop_index_live(e, 0);
    for (uint32_t i = 0; i < n; i++) {
        const kiln_instr *in = &k->instrs[i];
        e->reg[i] = -1;
        if (!e->live[i] || is_leaf(in->op))
            continue;
        /* operands dying here free their registers first: the statement
         * reads them before it assigns */
        for (unsigned q = 0; q < ops[in->op].arity; q++) {
            int32_t o = operand(in, q);
            int seen = 0;
            for (unsigned r = 0; r < q; r++)
                seen |= operand(in, r) == o;
            if (!seen && e->last[o] == i && e->reg[o] >= 0) {
                unsigned d = k->instrs[o].dtype;
                fl[d * n + nfree[d]++] = (uint32_t)e->reg[o];
            }
        }
        unsigned d = in->dtype;
        e->reg[i] = nfree[d] ? (int32_t)fl[d * n + --nfree[d]]
                             : (int32_t)e->n_regs[d]++;
    }
    free(fl);
    return 0;
}

/* Wrapping integer arithmetic and the other binary/unary forms. */
static void bin_int(sbuf *b, unsigned dt, const char *op, const char *x,
                    const char *y)
{
    if (dt == KILN_I64)
        sb_printf(b, "(i64)((u64)%s %s (u64)%s)", x, op, y);
    else
        sb_printf(b, "(i32)((u32)%s %s (u32)%s)", x, op, y);
}

static void emit_cast(emitter *e, unsigned from, unsigned to, const char *x)
{
    sbuf *b = &e->body;
    if (from == to) {
        sb_put(b, x);
        return;
    }
    switch (to) {
    case KILN_F64:
        sb_printf(b, "(double)%s", x);
        break;
    case KILN_F32:
        sb_printf(b, "(float)%s", x);
        break;
    case KILN_I64:
        if (is_float(from)) {
            e->need |= N_F2I64;
            sb_printf(b, "kl_f2i64((double)%s)", x);
        } else {
            sb_printf(b, "(i64)%s", x);
        }
        break;
    case KILN_I32:
        if (is_float(from)) {
            e->need |= N_F2I32;
            sb_printf(b, "kl_f2i32((double)%s)", x);
        } else if (from == KILN_I64) {
            sb_printf(b, "(i32)(u32)%s", x);
        } else {
            sb_printf(b, "(i32)%s", x);
        }
        break;
    default:
        sb_printf(b, "(u8)(%s != 0)", x);
        break;
    }
}

static void emit_instr(emitter *e, uint32_t i)
{
    const kiln_kernel *k = e->k;
    const kiln_instr *in = &k->instrs[i];
    sbuf *b = &e->body;
    unsigned dt = in->dtype;
    const opinfo *info = &ops[in->op];
    const char *x = info->arity > 0 ? ref(e, in->a, e->tmp[0], 128) : "";
    const char *y = info->arity > 1 ? ref(e, in->b, e->tmp[1], 128) : "";
    const char *z = info->arity > 2 ? ref(e, in->c, e->tmp[2], 128) : "";
    unsigned odt = info->arity > 0 ? k->instrs[in->a].dtype : dt;
    int f32 = dt == KILN_F32;
    sb_printf(b, "      r%s_%d = ", dt_name[dt], (int)e->reg[i]);
    switch (in->op) {
    case KILN_I_CAST:
        emit_cast(e, odt, dt, x);
        break;
    case KILN_I_ADD:
    case KILN_I_SUB:
    case KILN_I_MUL: {
        const char *op = in->op == KILN_I_ADD ? "+"
                         : in->op == KILN_I_SUB ? "-" : "*";
        if (is_float(dt))
            sb_printf(b, "%s %s %s", x, op, y);
        else
            bin_int(b, dt, op, x, y);
        break;
    }
    case KILN_I_TRUE_DIV:
        sb_printf(b, "%s / %s", x, y);
        break;
    case KILN_I_NEG:
        if (is_float(dt))
            sb_printf(b, "-%s", x);
        else
            bin_int(b, dt, "-", "0", x);
        break;
    case KILN_I_ABS:
        if (is_float(dt)) {
            e->need |= f32 ? N_FABSF : N_FABS;
            sb_printf(b, "%s(%s)", f32 ? "kl_fabsf" : "kl_fabs", x);
        } else {
            sb_printf(b, "%s < 0 ? ", x);
            bin_int(b, dt, "-", "0", x);
            sb_printf(b, " : %s", x);
        }
        break;
    case KILN_I_SQUARE:
        if (is_float(dt))
            sb_printf(b, "%s * %s", x, x);
        else
            bin_int(b, dt, "*", x, x);
        break;
    case KILN_I_MOD:
        if (!is_float(dt)) {  /* NumPy: the sign of y; 0 for y = 0, -1 */
            sb_printf(b, "%s == 0 || %s == -1 ? 0 : %s %% %s != 0 && "
                      "(%s %% %s < 0) != (%s < 0) ? %s %% %s + %s : %s %% %s",
                      y, y, x, y, x, y, y, x, y, y, x, y);
            break;
        }
        /* fall through */
    case KILN_I_POW: case KILN_I_GAMMAINC: case KILN_I_GAMMAINCC:
    case KILN_I_GAMMAINC_DA:
        if (f32)
            sb_printf(b, "(float)rt->%s((double)%s, (double)%s)", info->rt,
                      x, y);
        else
            sb_printf(b, "rt->%s(%s, %s)", info->rt, x, y);
        break;
    case KILN_I_BETAINC: case KILN_I_BETAINC_DA: case KILN_I_BETAINC_DB:
        if (f32)
            sb_printf(b, "(float)rt->%s((double)%s, (double)%s, "
                      "(double)%s)", info->rt, x, y, z);
        else
            sb_printf(b, "rt->%s(%s, %s, %s)", info->rt, x, y, z);
        break;
    case KILN_I_MAXIMUM:
    case KILN_I_MINIMUM: {
        const char *cmp = in->op == KILN_I_MAXIMUM ? ">" : "<";
        if (is_float(dt))
            sb_printf(b, "%s %s %s || %s != %s ? %s : %s", x, cmp, y, x, x, x,
                      y);
        else if (dt == KILN_BOOL)
            sb_printf(b, "(u8)(%s %s %s)", x,
                      in->op == KILN_I_MAXIMUM ? "|" : "&", y);
        else
            sb_printf(b, "%s %s %s ? %s : %s", x, cmp, y, x, y);
        break;
    }
    case KILN_I_WHERE:
        sb_printf(b, "%s ? %s : %s", x, y, z);
        break;
    case KILN_I_EQ: sb_printf(b, "(u8)(%s == %s)", x, y); break;
    case KILN_I_NE: sb_printf(b, "(u8)(%s != %s)", x, y); break;
    case KILN_I_LT: sb_printf(b, "(u8)(%s < %s)", x, y); break;
    case KILN_I_LE: sb_printf(b, "(u8)(%s <= %s)", x, y); break;
    case KILN_I_GT: sb_printf(b, "(u8)(%s > %s)", x, y); break;
    case KILN_I_GE: sb_printf(b, "(u8)(%s >= %s)", x, y); break;
    case KILN_I_AND: sb_printf(b, "(u8)(%s != 0 && %s != 0)", x, y); break;
    case KILN_I_OR: sb_printf(b, "(u8)(%s != 0 || %s != 0)", x, y); break;
    case KILN_I_NOT: sb_printf(b, "(u8)(%s == 0)", x); break;
    default: /* unary runtime functions */
        if (f32)
            sb_printf(b, "(float)rt->%s((double)%s)", info->rt, x);
        else
            sb_printf(b, "rt->%s(%s)", info->rt, x);
        break;
    }
    sb_printf(b, ";  /* %u %s */\n", i, info->name);
}

/* The program's statements, one per live non-LOAD, non-CONST instr. */
static void emit_program(emitter *e)
{
    for (uint32_t i = 0; i < e->k->n_instrs; i++) {
        const kiln_instr *in = &e->k->instrs[i];
        if (e->live[i] && !is_leaf(in->op))
            emit_instr(e, i);
    }
}

/* Declarations of registers, hoisted non-finite constants and the
 * pointers of the inputs the program reads. */
/* Declarations of registers, hoisted non-finite constants and the
 * pointers (and, in a loop, strides) of the inputs the program reads. */
static void emit_program_decls(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    for (unsigned d = 0; d < KILN_NDTYPES; d++)
        for (uint32_t r = 0; r < e->n_regs[d]; r++)
            sb_printf(b, "  %s r%s_%u;\n", ctype[d], dt_name[d], r);
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        char buf[128];
        if (e->live[i] && in->op == KILN_I_PARAM) {
            /* a lifted literal: read once per call from the block */
            sb_printf(b, "  const %s c%u = (%s)call->consts[%d];\n",
                      ctype[in->dtype], i, ctype[in->dtype], (int)in->a);
            continue;
        }
        if (!e->live[i] || in->op != KILN_I_CONST ||
            const_text(in->imm, in->dtype, buf, sizeof buf))
            continue;
        uint64_t bits;
        memcpy(&bits, &in->imm, sizeof bits);
        e->need |= N_BITS;
        sb_printf(b, "  const %s c%u = (%s)kl_bits(0x%016llxULL);\n",
                  ctype[in->dtype], i, ctype[in->dtype],
                  (unsigned long long)bits);
    }
    for (uint32_t a = 0; !e->recur && a < k->n_inputs; a++)
        if (e->used_in[a])
            sb_printf(b, e->scalar ? "  const %s *p%u;\n"
                                   : "  const %s *p%u; i64 s%u;\n",
                      ctype[k->inputs[a].dtype], a, a);
}

/* Set the row pointers of every used input (and outputs) for the row at
 * idx (outer dims 0 .. w-2; one row: the views' data). */
static void emit_row_ptrs(emitter *e, int n_out_ptrs)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    for (uint32_t a = 0; a < k->n_inputs; a++)
        if (e->used_in[a])
            sb_printf(b, "    p%u = (const %s *)I[%u].data + (w > 1 ? "
                      "kl_off(&I[%u], idx, map, w - 1) : 0);\n", a,
                      ctype[k->inputs[a].dtype], a, a);
    for (int o = 0; o < n_out_ptrs; o++)
        sb_printf(b, "    q%d = (%s *)O[%d].data + (w > 1 ? "
                  "kl_off(&O[%d], idx, map, w - 1) : 0);\n", o,
                  ctype[k->outputs[o].dtype], o, o);
}

/* The inner (coalesced) dim's stride of every used view; m is its
 * original dim (-1: one element), extent 1 reads as stride 0 (kl_st). */
static void emit_inner_strides(emitter *e, int n_out)
{
    const kiln_kernel *k = e->k;
    for (uint32_t a = 0; a < k->n_inputs; a++)
        if (e->used_in[a])
            sb_printf(&e->body, "  s%u = m < 0 || I[%u].shape[m] == 1 ? 0 : "
                      "I[%u].strides[m];\n", a, a, a);
    for (int o = 0; o < n_out; o++)
        sb_printf(&e->body, "  t%d = m < 0 || O[%d].shape[m] == 1 ? 0 : "
                  "O[%d].strides[m];\n", o, o, o);
}

static const char odometer[] =
    "    for (k = w - 2; k >= 0; k--) {\n"
    "      if (++idx[k] < sh[k]) break;\n"
    "      idx[k] = 0;\n"
    "    }\n"
    "    if (k < 0) break;\n";

/* Start of every unit's kernel code: the argument table, the plan type
 * (fields: its members) and the head of kiln_kernel_prep, whose checks
 * (emit_checks) follow the kind's declarations. */
static void emit_head(emitter *e, const char *fields)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    uint32_t nv = k->n_inputs + k->n_outputs;
    sb_printf(b, "static const u8 kl_desc[%u] = {", 2 * nv);
    for (uint32_t i = 0; i < nv; i++) {
        const kiln_arg_desc *d = i < k->n_inputs ? &k->inputs[i]
                                                 : &k->outputs[i - k->n_inputs];
        sb_printf(b, "%s%s%u, %u", i ? "," : "", i % 8 ? " " : "\n  ",
                  d->dtype, d->rank);
    }
    sb_put(b, "\n};\n\n");
    sb_printf(b, "/* what kiln_kernel_prep computes once per shape signature */\n"
              "typedef struct kplan {\n%s} kplan;\n\n", fields);
    sb_put(b, "/* check a call and fill a plan (no data read) */\n"
              "int kiln_kernel_prep(const kcall *call, void *plan)\n{\n"
              "  kplan *P = plan;\n  const kv *I, *O;\n  const krt *rt;\n");
}

/* The runtime table size that has entry `name` (versions 1, 2, 3). */
static size_t rt_need_size(const char *name)
{
    if (strcmp(name, "trigamma") == 0)
        return offsetof(kiln_runtime, trigamma) + sizeof(void (*)(void));
    for (unsigned op = KILN_I_FLOOR; op < KILN_I_COUNT; op++)
        if (ops[op].rt && strcmp(ops[op].rt, name) == 0)
            return offsetof(kiln_runtime, betainc_db) + sizeof(void (*)(void));
    return offsetof(kiln_runtime, softplus) + sizeof(void (*)(void));
}

static void emit_checks(emitter *e, const char *rt_need)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    sb_printf(b, "  if (!call || call->struct_size < %zu) return %d;\n"
              "  if (kl_check(call, %u, %u, kl_desc)) return kl_fail(call, "
              "%d, \"%s: called with views that do not match the kernel\");\n"
              "  I = call->inputs; O = call->outputs; rt = call->rt;\n"
              "  (void)P; (void)I; (void)O; (void)rt;\n",
              offsetof(kiln_call, errbuf_size) + sizeof(size_t), KILN_ERR_ARG,
              k->n_inputs, k->n_outputs, KILN_ERR_ARG, e->label);
    int32_t slots = 0;   /* the constant block the program reads */
    for (uint32_t i = 0; k->instrs && i < k->n_instrs; i++)
        if (k->instrs[i].op == KILN_I_PARAM && k->instrs[i].a >= slots)
            slots = k->instrs[i].a + 1;
    if (slots)
        sb_printf(b, "  if (call->struct_size < %zu || !call->consts || "
                  "call->n_consts < %d) return kl_fail(call, %d, \"%s: the "
                  "call has no constant block of %d values\");\n",
                  offsetof(kiln_call, n_consts) + sizeof(uint32_t),
                  (int)slots, KILN_ERR_ARG, e->label, (int)slots);
    if (rt_need)
        sb_printf(b, "  if (!rt || rt->struct_size < %zu) return kl_fail(call, "
                  "%d, \"%s: the runtime table has no %s\");\n",
                  rt_need_size(rt_need), KILN_ERR_ARG, e->label, rt_need);
}

/* The head of kiln_kernel_run: the kind's declarations follow, then
 * emit_run_body. */
static void emit_run_head(emitter *e)
{
    sb_put(&e->body,
           "/* run a prepared call: views as prepared, data anywhere */\n"
           "int kiln_kernel_run(void *plan, const kcall *call)\n{\n"
           "  const kplan *P = plan;\n"
           "  const kv *I = call->inputs, *O = call->outputs;\n"
           "  const krt *rt = call->rt;\n");
}

static void emit_run_body(emitter *e)
{
    sb_put(&e->body, "  (void)P; (void)I; (void)O; (void)rt;\n");
}

/* The end of every unit: the plan's size and kiln_kernel (prep into a
 * plan on the stack, then run). */
static void emit_tail(emitter *e)
{
    sb_put(&e->body,
           "\nusize kiln_kernel_plan_size(void)\n{\n"
           "  return sizeof(kplan);\n}\n\n"
           "/* an unprepared call: check, plan and run */\n"
           "int kiln_kernel(void *state, const kcall *call)\n{\n"
           "  kplan P;\n  int rc;\n  (void)state;\n"
           "  rc = kiln_kernel_prep(call, &P);\n"
           "  return rc ? rc : kiln_kernel_run(&P, call);\n}\n");
}

/* The runtime entry the program needs with the largest offset (trigamma
 * is version 2, the ABI 1.7 opcodes version 3), for the struct_size
 * check; NULL when none. */
static const char *program_rt_need(emitter *e)
{
    const char *need = NULL;
    int level = 0;
    for (uint32_t i = 0; i < e->k->n_instrs; i++) {
        const kiln_instr *in = &e->k->instrs[i];
        if (!e->live[i] || !ops[in->op].rt)
            continue;
        int l = in->op >= KILN_I_FLOOR ? 3 : in->op == KILN_I_TRIGAMMA ? 2 : 1;
        if (l > level) {
            level = l;
            need = ops[in->op].rt;
        }
    }
    return need;
}

/* ---- ELEMWISE --------------------------------------------------------- */

/* The plan: the output's shape coalesced (sh, map: the original dim of
 * each coalesced one, w of them; -1 when empty).  A rank-0 kernel's run
 * is straight-line code on the views' data. */
static void emit_elemwise(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    e->need |= N_ITER;
    e->scalar = k->outputs[0].rank == 0;
    emit_head(e, "  i64 sh[8];\n  int map[8];\n  int w;\n");
    emit_checks(e, program_rt_need(e));
    sb_printf(b, "  if (kl_shapes(call, &O[0], 1)) return kl_fail(call, %d, "
              "\"%s: input or output shapes do not match\");\n"
              "  P->w = kl_coalesce(call, &O[0], P->sh, P->map);\n"
              "  if (P->w == 0) { P->w = 1; P->sh[0] = 1; P->map[0] = -1; }\n"
              "  return 0;\n}\n\n", KILN_ERR_SHAPE, e->label);
    emit_run_head(e);
    if (!e->scalar)
        sb_put(b, "  const i64 *sh = P->sh;\n  const int *map = P->map;\n"
                  "  i64 idx[8], n, j;\n  int w = P->w, m, k;\n");
    for (uint32_t o = 0; o < k->n_outputs; o++)
        sb_printf(b, e->scalar ? "  %s *q%u;\n" : "  %s *q%u; i64 t%u;\n",
                  ctype[k->outputs[o].dtype], o, o);
    emit_program_decls(e);
    emit_run_body(e);
    if (e->scalar) {
        for (uint32_t a = 0; a < k->n_inputs; a++)
            if (e->used_in[a])
                sb_printf(b, "  p%u = (const %s *)I[%u].data;\n", a,
                          ctype[k->inputs[a].dtype], a);
        for (uint32_t o = 0; o < k->n_outputs; o++)
            sb_printf(b, "  q%u = (%s *)O[%u].data;\n", o,
                      ctype[k->outputs[o].dtype], o);
        sb_put(b, "  {\n");
        emit_program(e);
        for (uint32_t o = 0; o < k->n_outputs; o++) {
            char buf[128];
            sb_printf(b, "      *q%u = %s;\n", o,
                      ref(e, k->out_refs[o], buf, sizeof buf));
        }
        sb_put(b, "  }\n  return 0;\n}\n");
        emit_tail(e);
        return;
    }
    sb_put(b, "  if (w < 0) return 0;\n"
              "  n = sh[w - 1]; m = map[w - 1];\n");
    emit_inner_strides(e, (int)k->n_outputs);
    sb_put(b, "  for (k = 0; k < w; k++) idx[k] = 0;\n  for (;;) {\n");
    emit_row_ptrs(e, (int)k->n_outputs);
    sb_put(b, "    for (j = 0; j < n; j++) {\n");
    emit_program(e);
    for (uint32_t o = 0; o < k->n_outputs; o++) {
        char buf[128];
        sb_printf(b, "      q%u[j * t%u] = %s;\n", o, o,
                  ref(e, k->out_refs[o], buf, sizeof buf));
    }
    sb_put(b, "    }\n");
    sb_put(b, odometer);
    sb_put(b, "  }\n  return 0;\n}\n");
    emit_tail(e);
}

/* ---- REDUCE ----------------------------------------------------------- */

/* combine(x, y) of reduce_op in dtype dt (acc: f32 accumulates in double) */
static void emit_combine(sbuf *b, uint32_t op, unsigned dt, const char *x,
                         const char *y)
{
    int fl = is_float(dt);
    switch (op) {
    case KILN_REDUCE_PROD:
        if (fl)
            sb_printf(b, "%s * %s", x, y);
        else
            bin_int(b, dt, "*", x, y);
        break;
    case KILN_REDUCE_MAX:
    case KILN_REDUCE_MIN: {
        const char *cmp = op == KILN_REDUCE_MAX ? ">" : "<";
        if (fl)
            sb_printf(b, "%s %s %s || %s != %s ? %s : %s", x, cmp, y, x, x,
                      x, y);
        else if (dt == KILN_BOOL)
            sb_printf(b, "(u8)(%s %s %s)", x,
                      op == KILN_REDUCE_MAX ? "|" : "&", y);
        else
            sb_printf(b, "%s %s %s ? %s : %s", x, cmp, y, x, y);
        break;
    }
    default:
        if (fl)
            sb_printf(b, "%s + %s", x, y);
        else
            bin_int(b, dt, "+", x, y);
        break;
    }
}

/* The identity of reduce_op as an expression of dtype dt. */
static const char *identity_text(uint32_t op, unsigned dt)
{
    switch (dt) {
    case KILN_F64:
    case KILN_F32:
        return op == KILN_REDUCE_PROD ? "1.0"
               : op == KILN_REDUCE_MAX ? "-kl_inf"
               : op == KILN_REDUCE_MIN ? "kl_inf" : "0.0";
    case KILN_I64:
        return op == KILN_REDUCE_PROD ? "1"
               : op == KILN_REDUCE_MAX ? "(-9223372036854775807LL - 1)"
               : op == KILN_REDUCE_MIN ? "9223372036854775807LL" : "0";
    case KILN_I32:
        return op == KILN_REDUCE_PROD ? "1"
               : op == KILN_REDUCE_MAX ? "(-2147483647 - 1)"
               : op == KILN_REDUCE_MIN ? "2147483647" : "0";
    default:
        return op == KILN_REDUCE_MIN || op == KILN_REDUCE_PROD ? "1" : "0";
    }
}

/* Fold program output o (its value: the text val) into reduction output
 * o (REDUCE, and a LOOP's REDUCE outputs) for element j: into the block's
 * accumulator acc<o> when the output does not step along the row (t<o> == 0),
 * else into the output element. */
static void emit_fold(emitter *e, uint32_t o, const char *val)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    uint32_t op = k->reduce_op;
    unsigned dt = k->outputs[o].dtype;
    const char *T = ctype[dt], *ACC = dt == KILN_F32 ? "double" : T;
    char cv[160], accn[16], on[32];
    snprintf(cv, sizeof cv, "(%s)%s", ACC, val);
    snprintf(accn, sizeof accn, "acc%u", o);
    snprintf(on, sizeof on, "*oj%u", o);
    sb_printf(b, "      if (t%u == 0) acc%u = ", o, o);
    emit_combine(b, op, dt == KILN_F32 ? KILN_F64 : dt, accn, cv);
    sb_printf(b, ";\n      else { %s *oj%u = q%u + j * t%u; *oj%u = (%s)(",
              T, o, o, o, o, T);
    emit_combine(b, op, dt, on, val);
    sb_put(b, "); }\n");
}

/* After a block: combine accumulator o into its output element. */
static void emit_flush(emitter *e, uint32_t o)
{
    unsigned dt = e->k->outputs[o].dtype;
    const char *T = ctype[dt], *ACC = dt == KILN_F32 ? "double" : T;
    char cv[160], accn[16];
    snprintf(cv, sizeof cv, "(%s)*q%u", ACC, o);
    snprintf(accn, sizeof accn, "acc%u", o);
    sb_printf(&e->body, "     if (t%u == 0) *q%u = (%s)(", o, o, T);
    emit_combine(&e->body, e->k->reduce_op, dt == KILN_F32 ? KILN_F64 : dt,
                 cv, accn);
    sb_put(&e->body, ");\n");
}

/* REDUCE: one accumulator per output (sibling reductions, ABI 1.4: every
 * output reduces the same axes with reduce_op; output 0's stride tells
 * whether a row folds into one element).  The plan: the input's shape
 * coalesced (as ELEMWISE), the extents of the distinct output elements
 * (dsh) and the number of elements reduced into each (cnt). */
static void emit_reduce(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    uint32_t op = k->reduce_op, no = k->n_outputs;
    e->need |= N_ITER | N_BITS;
    emit_head(e, "  i64 sh[8], dsh[8];\n  int map[8];\n  int w;\n"
                 "  double cnt;\n");
    sb_put(b, "  int d;\n");
    emit_checks(e, program_rt_need(e));
    sb_printf(b, "  if (kl_shapes(call, &I[0], 0)) return kl_fail(call, %d, "
              "\"%s: input or output shapes do not match\");\n", KILN_ERR_SHAPE,
              e->label);
    sb_put(b, "  P->cnt = 1.0;\n"
              "  for (d = 0; d < I[0].rank; d++) {\n"
              "    i64 st = kl_st(&O[0], d);\n"
              "    P->dsh[d] = st == 0 ? 1 : I[0].shape[d];\n"
              "    if (st == 0) P->cnt *= (double)I[0].shape[d];\n  }\n"
              "  P->w = kl_coalesce(call, &I[0], P->sh, P->map);\n"
              "  if (P->w == 0) { P->w = 1; P->sh[0] = 1; P->map[0] = -1; }\n"
              "  return 0;\n}\n\n");
    emit_run_head(e);
    sb_put(b, "  const i64 *sh = P->sh;\n  const int *map = P->map;\n"
              "  i64 idx[8], n, j, j0, j1;\n  int w = P->w, m, k;\n"
              "  const double kl_inf = kl_bits(0x7ff0000000000000ULL);\n");
    for (uint32_t o = 0; o < no; o++) {
        unsigned dt = k->outputs[o].dtype;
        sb_printf(b, "  %s *q%u;\n  %s acc%u;\n  i64 t%u;\n", ctype[dt], o,
                  dt == KILN_F32 ? "double" : ctype[dt], o, o);
    }
    emit_program_decls(e);
    emit_run_body(e);
    /* identity over the distinct output elements */
    for (uint32_t o = 0; o < no; o++) {
        unsigned dt = k->outputs[o].dtype;
        sb_printf(b, "  {\n    %s idv = (%s)%s;\n"
                  "    kl_walk%u(&O[%u], P->dsh, &idv, 0, 0.0);\n  }\n",
                  ctype[dt], ctype[dt], identity_text(op, dt), dt, o);
    }
    sb_put(b, "  (void)kl_inf;\n"
              "  if (w >= 0) {\n"
              "  n = sh[w - 1]; m = map[w - 1];\n");
    emit_inner_strides(e, (int)no);
    sb_put(b, "  for (k = 0; k < w; k++) idx[k] = 0;\n  for (;;) {\n");
    emit_row_ptrs(e, (int)no);
    sb_put(b, "    for (j0 = 0; j0 < n; j0 += 256) {\n"
              "     j1 = n - j0 < 256 ? n : j0 + 256;\n");
    for (uint32_t o = 0; o < no; o++) {
        unsigned dt = k->outputs[o].dtype;
        sb_printf(b, "     acc%u = (%s)%s;\n", o,
                  dt == KILN_F32 ? "double" : ctype[dt], identity_text(op, dt));
    }
    sb_put(b, "     for (j = j0; j < j1; j++) {\n");
    emit_program(e);
    for (uint32_t o = 0; o < no; o++) {
        char val[128];
        emit_fold(e, o, ref(e, k->out_refs[o], val, sizeof val));
    }
    sb_put(b, "     }\n");
    for (uint32_t o = 0; o < no; o++)
        emit_flush(e, o);
    sb_put(b, "    }\n");
    sb_put(b, odometer);
    sb_put(b, "  }\n  }\n");
    for (uint32_t o = 0; op == KILN_REDUCE_MEAN && o < no; o++)
        sb_printf(b, "  kl_walk%u(&O[%u], P->dsh, 0, 1, P->cnt);\n",
                  k->outputs[o].dtype, o);
    sb_put(b, "  return 0;\n}\n");
    emit_tail(e);
}

/* ---- JOIN ------------------------------------------------------------- */

/* Prepared, a join only copies (its checks are per input). */
static void emit_join(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    unsigned dt = k->outputs[0].dtype;
    int ax = k->axis;
    e->need |= N_COPY;
    emit_head(e, "  i64 tot;  /* the output's extent along the axis */\n");
    sb_put(b, "  u32 i;\n  int d;\n");
    emit_checks(e, NULL);
    sb_printf(b,
              "  P->tot = 0;\n"
              "  for (i = 0; i < call->n_inputs; i++) {\n"
              "    const kv *v = &I[i];\n"
              "    for (d = 0; d < O[0].rank; d++)\n"
              "      if (d != %d && v->shape[d] != O[0].shape[d])\n"
              "        return kl_fail(call, %d, \"%s: an input's shape does not "
              "fit the output\");\n"
              "    P->tot += v->shape[%d];\n  }\n"
              "  if (P->tot != O[0].shape[%d]) return kl_fail(call, %d, \"%s: "
              "inputs do not add up to the output along axis %d\");\n"
              "  return 0;\n}\n\n",
              ax, KILN_ERR_SHAPE, e->label, ax, ax, KILN_ERR_SHAPE, e->label,
              ax);
    emit_run_head(e);
    sb_put(b, "  i64 at = 0;\n  u32 i;\n");
    emit_run_body(e);
    sb_printf(b,
              "  for (i = 0; i < call->n_inputs; i++) {\n"
              "    const kv *v = &I[i];\n"
              "    kl_copy((%s *)O[0].data + at * O[0].strides[%d], "
              "O[0].strides, (const %s *)v->data, v->strides, v->shape, "
              "%d, 0);\n"
              "    at += v->shape[%d];\n  }\n  return 0;\n}\n",
              utype[dt], ax, utype[dt], (int)k->outputs[0].rank, ax);
    emit_tail(e);
}

/* ---- LINALG (ABI 1.9, issue 28) ---------------------------------------- */

/* One call of the runtime's lapack_run with the kernel's operation and
 * the call's views (the work, batches and errors are the runtime's:
 * core/runtime/linalg.c), as the interpreter makes it. */
static void emit_linalg(emitter *e)
{
    sbuf *b = &e->body;
    emit_head(e, "  int none;\n");
    emit_checks(e, NULL);
    sb_printf(b, "  if (!rt || rt->struct_size < %zu || !rt->lapack_run) "
              "return kl_fail(call, %d, \"%s: the runtime table has no "
              "lapack_run (version < 5)\");\n  return 0;\n}\n\n",
              offsetof(kiln_runtime, lapack_run) + sizeof(void (*)(void)),
              KILN_ERR_RUNTIME, e->label);
    emit_run_head(e);
    emit_run_body(e);
    sb_printf(b, "  return rt->lapack_run(rt, %uu, call->n_inputs, I, "
              "call->n_outputs, O, call->errbuf, call->errbuf_size);\n}\n",
              e->k->reduce_op);
    emit_tail(e);
}

/* ---- SCAN (ABI 1.7, issue 25) ------------------------------------------ */

/* cumsum/cumprod along the axis: every line (the other indices in
 * odometer order), accumulated in order from index 0 in the dtype
 * itself; integers wrap (unsigned arithmetic, as bin_int). */
static void emit_scan(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    unsigned dt = k->outputs[0].dtype;
    int ax = k->axis, r = (int)k->outputs[0].rank;
    int prod = k->reduce_op == KILN_REDUCE_PROD;
    const char *T = ctype[dt];
    emit_head(e, "  int none;\n");
    sb_put(b, "  int d;\n");
    emit_checks(e, NULL);
    sb_printf(b, "  for (d = 0; d < %d; d++)\n"
              "    if (I[0].shape[d] != O[0].shape[d]) return kl_fail(call, "
              "%d, \"%s: input and output shapes differ\");\n"
              "  return 0;\n}\n\n", r, KILN_ERR_SHAPE, e->label);
    emit_run_head(e);
    sb_printf(b, "  i64 idx[8], ox, oy, i, len, sx, sy;\n  int d;\n"
              "  %s acc;\n  const %s *xs;\n  %s *ys;\n", T, T, T);
    emit_run_body(e);
    sb_printf(b, "  for (d = 0; d < %d; d++) {\n    idx[d] = 0;\n"
              "    if (O[0].shape[d] == 0) return 0;\n  }\n"
              "  len = O[0].shape[%d]; sx = I[0].strides[%d]; "
              "sy = O[0].strides[%d];\n"
              "  for (;;) {\n    ox = 0; oy = 0;\n"
              "    for (d = 0; d < %d; d++) {\n"
              "      ox += idx[d] * I[0].strides[d];\n"
              "      oy += idx[d] * O[0].strides[d];\n    }\n"
              "    xs = (const %s *)I[0].data + ox;\n"
              "    ys = (%s *)O[0].data + oy;\n"
              "    acc = %s;\n"
              "    for (i = 0; i < len; i++) {\n      acc = ",
              r, ax, ax, ax, r, T, T, prod ? "1" : "0");
    if (is_float(dt))
        sb_printf(b, "acc %s xs[i * sx]", prod ? "*" : "+");
    else
        bin_int(b, dt, prod ? "*" : "+", "acc", "xs[i * sx]");
    sb_printf(b, ";\n      ys[i * sy] = acc;\n    }\n"
              "    for (d = %d; d >= 0; d--) {\n"
              "      if (d == %d) continue;\n"
              "      if (++idx[d] < O[0].shape[d]) break;\n"
              "      idx[d] = 0;\n    }\n"
              "    if (d < 0) return 0;\n  }\n}\n", r - 1, ax);
    emit_tail(e);
}

/* ---- RECUR (ABI 1.10, with a program) ------------------------------- */

/* The fused scan loop: prep finds T (the sequences' extent, else the
 * stacked outputs', else n_steps), checks that every sequence and
 * stacked output has T elements and that no output shares data with an
 * input or another output, and keeps T and the axis-0 strides.
 * run holds each carry in a local kN and each arg in a local aN (read
 * once), then per step t runs the program (a sequence's element is
 * pN[t * sN]), stores the stacked rows qJ[t * tJ], computes the new
 * carries into temporaries nJ before replacing any (all carries change
 * at once), and after the loop stores the final carries. */
static void emit_recur(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    uint32_t nc = k->n_carry, ns = k->n_seq, ni = k->n_inputs,
             no = k->n_outputs, nv = ni + no;
    char fields[96];
    snprintf(fields, sizeof fields, "  i64 T;\n  i64 st[%u];\n", nv);
    e->recur = 1;
    emit_head(e, fields);
    sb_put(b, "  i64 T;\n  u32 v;\n");
    emit_checks(e, program_rt_need(e));
    if (ns > 0)
        sb_printf(b, "  T = I[%u].shape[0];\n", nc);
    else if (no > nc)
        sb_printf(b, "  T = O[%u].shape[0];\n", nc);
    else
        sb_printf(b, "  T = %lldLL;\n", (long long)k->n_steps);
    /* a length that differs: "LABEL: sequence i has n steps, the scan
     * has T" (stacked output: rows), as the interpreter words it */
    e->need |= N_PUTI | N_LENERR;
    sb_printf(b, "  for (v = 0; v < %u; v++) P->st[v] = 0;\n"
              "  for (v = %u; v < %u; v++) {\n"
              "    if (I[v].shape[0] != T)\n"
              "      return kl_len_error(call, \"%s: sequence \", v - %u, "
              "\" steps\", I[v].shape[0], T);\n"
              "    P->st[v] = I[v].strides[0];\n  }\n"
              "  for (v = %u; v < %u; v++) {\n"
              "    if (O[v].shape[0] != T)\n"
              "      return kl_len_error(call, \"%s: stacked output \", "
              "v - %u, \" rows\", O[v].shape[0], T);\n"
              "    P->st[%u + v] = O[v].strides[0];\n  }\n"
              "  P->T = T;\n",
              nv, nc, nc + ns, e->label, nc, nc, no, e->label, nc, ni);
    /* outputs alias nothing (the interpreter's rule: distinct first
     * elements; an empty sequence or stacked output is no data) */
    sb_printf(b, "  for (v = 0; v < %u; v++) {\n"
              "    const void *d = O[v].data;\n    u32 u;\n"
              "    if (!d || (v >= %u && T == 0)) continue;\n"
              "    for (u = 0; u < %u; u++)\n"
              "      if (I[u].data == d && !(u >= %u && u < %u && T == 0)) "
              "return kl_fail(call, %d, \"%s: an output is an input (a recur "
              "kernel's outputs alias nothing)\");\n"
              "    for (u = 0; u < v; u++)\n"
              "      if (O[u].data == d && !(u >= %u && T == 0)) "
              "return kl_fail(call, %d, \"%s: two outputs share data\");\n"
              "  }\n  return 0;\n}\n\n", no, nc, ni, nc, nc + ns,
              KILN_ERR_ARG, e->label, nc, KILN_ERR_ARG, e->label);
    emit_run_head(e);
    sb_put(b, "  i64 t, T = P->T;\n");
    for (uint32_t a = 0; a < ni; a++) {
        const char *T = ctype[k->inputs[a].dtype];
        if (a < nc)
            sb_printf(b, "  %s k%u = *(const %s *)I[%u].data;\n", T, a, T, a);
        else if (a < nc + ns && e->used_in[a])
            sb_printf(b, "  const %s *p%u = (const %s *)I[%u].data;\n"
                      "  i64 s%u = P->st[%u];\n", T, a, T, a, a, a);
        else if (a >= nc + ns && e->used_in[a])
            sb_printf(b, "  const %s a%u = *(const %s *)I[%u].data;\n", T,
                      a, T, a);
    }
    for (uint32_t o = 0; o < nc; o++)
        sb_printf(b, "  %s n%u;\n", ctype[k->outputs[o].dtype], o);
    for (uint32_t o = nc; o < no; o++)
        sb_printf(b, "  %s *q%u = (%s *)O[%u].data;\n  i64 t%u = P->st[%u];\n",
                  ctype[k->outputs[o].dtype], o, ctype[k->outputs[o].dtype],
                  o, o, ni + o);
    emit_program_decls(e);
    emit_run_body(e);
    sb_put(b, "  for (t = 0; t < T; t++) {\n");
    emit_program(e);
    for (uint32_t o = nc; o < no; o++) {
        char buf[128];
        sb_printf(b, "      q%u[t * t%u] = %s;\n", o, o,
                  ref(e, k->out_refs[o], buf, sizeof buf));
    }
    for (uint32_t o = 0; o < nc; o++) {
        char buf[128];
        sb_printf(b, "      n%u = %s;\n", o,
                  ref(e, k->out_refs[o], buf, sizeof buf));
    }
    for (uint32_t o = 0; o < nc; o++)
        sb_printf(b, "      k%u = n%u;\n", o, o);
    sb_put(b, "  }\n");
    for (uint32_t o = 0; o < nc; o++)
        sb_printf(b, "  *(%s *)O[%u].data = k%u;\n",
                  ctype[k->outputs[o].dtype], o, o);
    sb_put(b, "  (void)t;\n  return 0;\n}\n");
    emit_tail(e);
}

/* ---- GATHER / SCATTER ------------------------------------------------- */

/* The plan: the shape of x[:axis] + idx + x[axis+1:] (want) and the
 * strides of the side view (the output of a gather, the values of a
 * scatter; 0 where broadcast).  The indices are data: run checks them
 * on every call, before anything is written. */
static void emit_take(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    int gather = k->kind == KILN_KERNEL_GATHER;
    unsigned dt = k->outputs[0].dtype;
    const kiln_arg_desc *id = gather ? &k->inputs[1] : &k->inputs[0];
    int ax = k->axis, q = id->rank;
    int post = (gather ? k->inputs[0].rank : k->outputs[0].rank) - ax - 1;
    int add = !gather && k->scatter_mode == KILN_SCATTER_INC;
    const char *IT = ctype[id->dtype];
    const char *views = gather ? "  data = &I[0]; ix = &I[1]; side = &O[0];\n"
                               : "  data = &O[0]; ix = &I[0]; side = &I[1];\n";
    e->need |= N_COPY | N_PUTI | N_IDXERR;
    emit_head(e, "  i64 want[8], sst[8];\n");
    sb_put(b, "  const kv *data, *ix, *side;\n  int d;\n");
    emit_checks(e, NULL);
    sb_put(b, views);
    sb_printf(b, "  for (d = 0; d < %d; d++) P->want[d] = data->shape[d];\n"
              "  for (d = 0; d < %d; d++) P->want[%d + d] = ix->shape[d];\n"
              "  for (d = 0; d < %d; d++) P->want[%d + d] = "
              "data->shape[%d + d];\n",
              ax, q, ax, post, ax + q, ax + 1);
    sb_printf(b, "  for (d = 0; d < %d; d++) {\n"
              "    int bc = %d && side->shape[d] == 1;\n"
              "    if (side->shape[d] != P->want[d] && !bc) return kl_fail(call, "
              "%d, \"%s: %s shape does not match\");\n"
              "    P->sst[d] = bc ? 0 : side->strides[d];\n  }\n"
              "  return 0;\n}\n\n",
              ax + q + post, !gather, KILN_ERR_SHAPE, e->label,
              gather ? "output" : "values");
    emit_run_head(e);
    sb_put(b, "  const kv *data, *ix, *side;\n"
              "  const i64 *want = P->want, *sst = P->sst;\n"
              "  i64 pos[8], size, kk, od, oi, os;\n  int d, m;\n");
    emit_run_body(e);
    sb_put(b, views);
    /* every index checked before anything is written */
    sb_printf(b, "  size = data->shape[%d];\n"
              "  {\n    i64 n = 1;\n"
              "    for (d = 0; d < %d; d++) { n *= ix->shape[d]; pos[d] = 0; }\n"
              "    while (n > 0) {\n"
              "      i64 o = 0;\n"
              "      for (d = 0; d < %d; d++) o += pos[d] * ix->strides[d];\n"
              "      kk = ((const %s *)ix->data)[o];\n"
              "      if (kk < -size || kk >= size) return kl_index_error(call, "
              "kk, %d, size);\n"
              "      for (d = %d - 1; d >= 0; d--) {\n"
              "        if (++pos[d] < ix->shape[d]) break;\n"
              "        pos[d] = 0;\n      }\n"
              "      if (d < 0) break;\n    }\n  }\n",
              ax, q, q, IT, ax, q);
    /* positions of x[:axis] + idx in C order */
    sb_printf(b, "  for (d = 0; d < %d; d++) { if (want[d] == 0) return 0; "
              "pos[d] = 0; }\n"
              "  for (d = 0; d < %d; d++) if (want[%d + d] == 0) return 0;\n"
              "  for (;;) {\n"
              "    od = 0; oi = 0; os = 0;\n"
              "    for (d = 0; d < %d; d++) { od += pos[d] * data->strides[d]; "
              "os += pos[d] * sst[d]; }\n"
              "    for (d = 0; d < %d; d++) { oi += pos[%d + d] * "
              "ix->strides[d]; os += pos[%d + d] * sst[%d + d]; }\n"
              "    kk = ((const %s *)ix->data)[oi];\n"
              "    if (kk < 0) kk += size;\n"
              "    od += kk * data->strides[%d];\n",
              ax + q, post, ax + q, ax, q, ax, ax, ax, IT, ax);
    if (gather)
        sb_printf(b, "    kl_copy((%s *)side->data + os, sst + %d, "
                  "(const %s *)data->data + od, data->strides + %d, "
                  "want + %d, %d, 0);\n", utype[dt], ax + q, utype[dt],
                  ax + 1, ax + q, post);
    else
        sb_printf(b, "    kl_copy((%s *)data->data + od, data->strides + %d, "
                  "(const %s *)side->data + os, sst + %d, want + %d, %d, "
                  "%d);\n", add ? ctype[dt] : utype[dt], ax + 1,
                  add ? ctype[dt] : utype[dt], ax + q, ax + q, post, add);
    sb_printf(b, "    for (m = %d - 1; m >= 0; m--) {\n"
              "      if (++pos[m] < want[m]) break;\n"
              "      pos[m] = 0;\n    }\n"
              "    if (m < 0) break;\n  }\n  return 0;\n}\n", ax + q);
    emit_tail(e);
}

/* ---- LOOP ------------------------------------------------------------- */

/* A LOOP unit's walk helpers (after its kl_role table: the roles of the
 * inputs, then of the outputs).  kl_lst: a view's stride along dim d of
 * the iteration space as the interpreter walks it (tables and SCATTER
 * outputs are indexed, not walked: 0; a REDUCE output: 0 on the reduced
 * axes; extent 1: 0).  kl_lshapes: ITER and REDUCE views fit the space
 * (inputs broadcast, REDUCE outputs may have extent 1 on reduced axes).
 * kl_lcoal: the interpreter's coalescing over those strides. */
static const char helper_loop[] =
    "static const kv *kl_lview(const kcall *c, u32 v)\n"
    "{\n  return v < c->n_inputs ? &c->inputs[v] : "
    "&c->outputs[v - c->n_inputs];\n}\n"
    "static i64 kl_lst(const kcall *c, u32 v, int d)\n"
    "{\n  const kv *x = kl_lview(c, v);\n  u8 r = kl_role[v];\n"
    "  if (d < 0 || r == 1 || r == 3 || x->shape[d] == 1) return 0;\n"
    "  if (r == 2 && ((%uU >> d) & 1U)) return 0;\n"
    "  return x->strides[d];\n}\n"
    "static int kl_lshapes(const kcall *c, const kv *sp)\n"
    "{\n  u32 v;\n  int d;\n"
    "  for (v = 0; v < c->n_inputs + c->n_outputs; v++) {\n"
    "    const kv *x = kl_lview(c, v);\n    u8 r = kl_role[v];\n"
    "    if (r == 1 || r == 3) continue;\n"
    "    for (d = 0; d < sp->rank; d++)\n"
    "      if (x->shape[d] != sp->shape[d] && (x->shape[d] != 1 ||\n"
    "          (v >= c->n_inputs && !(r == 2 && ((%uU >> d) & 1U)))))\n"
    "        return 1;\n  }\n  return 0;\n}\n"
    "static int kl_lcoal(const kcall *c, const kv *sp, i64 *sh, int *map)\n"
    "{\n  int w = 0, d;\n  u32 v, nv = c->n_inputs + c->n_outputs;\n"
    "  for (d = 0; d < sp->rank; d++) {\n"
    "    i64 e = sp->shape[d];\n"
    "    if (e == 0) return -1;\n"
    "    if (e == 1) continue;\n"
    "    v = 0;\n"
    "    while (w > 0 && v < nv && kl_lst(c, v, map[w - 1]) == "
    "kl_lst(c, v, d) * e) v++;\n"
    "    if (w > 0 && v == nv) { sh[w - 1] *= e; map[w - 1] = d; }\n"
    "    else { sh[w] = e; map[w] = d; w++; }\n  }\n  return w;\n}\n"
    "static i64 kl_loff(const kcall *c, u32 v, const i64 *idx, const int *map,"
    " int m)\n"
    "{\n  i64 o = 0;\n  int k;\n"
    "  for (k = 0; k < m; k++) o += idx[k] * kl_lst(c, v, map[k]);\n"
    "  return o;\n}\n";

/* An index out of range for a table or a scatter output of size N, found
 * by the check of rank R (a TAKE's instruction index; n_instrs + j for
 * scatter output j): the interpreter reports, in the first block with a
 * bad index, the first check in its order (TAKEs in program order, then
 * the scatter outputs) and that check's first bad element, so the block
 * runs to its end remembering the check of lowest rank; a bad TAKE reads
 * 0 and a bad scatter writes nothing (outputs are undefined after an
 * error). */
static void emit_bad_index(emitter *e, uint32_t rank, const char *size)
{
    sb_printf(&e->body, "if (%uU < er) { er = %uU; ev = kr; en = %s; }",
              rank, rank, size);
}

/* A LOOP's program: one statement per live instruction, TAKE as an
 * indexed, bounds-checked load from its table (g<a>, gn<a> elements,
 * stride gs<a>). */
static void emit_loop_program(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    for (uint32_t i = 0; i < k->n_instrs; i++) {
        const kiln_instr *in = &k->instrs[i];
        if (!e->live[i] || is_leaf(in->op))
            continue;
        if (in->op != KILN_I_TAKE) {
            emit_instr(e, i);
            continue;
        }
        char size[32], r[32];
        snprintf(size, sizeof size, "gn%d", (int)in->a);
        snprintf(r, sizeof r, "r%s_%d", dt_name[in->dtype], (int)e->reg[i]);
        sb_printf(b, "      kr = (i64)%s; kx = kr < 0 ? kr + %s : kr;\n"
                  "      if ((u64)kx >= (u64)%s) { ",
                  ref(e, in->b, e->tmp[0], 128), size, size);
        emit_bad_index(e, i, size);
        sb_printf(b, " %s = (%s)0; }\n      else %s = g%d[kx * gs%d];  "
                  "/* %u take */\n", r, ctype[in->dtype], r, (int)in->a,
                  (int)in->a, i);
    }
}

/* LOOP (ABI 1.5): the walk of ELEMWISE/REDUCE over the iteration space
 * with per-view strides by role (kl_lst), rows cut into the
 * interpreter's 256-element blocks; per element the program, then each
 * output by its role: ITER stored, REDUCE folded as REDUCE kernels fold
 * (identity first, MEAN divided at the end), SCATTER added at its index
 * (z<j>, zn<j> elements, stride zs<j>). */
static void emit_loop(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    uint32_t ni = k->n_inputs, no = k->n_outputs, op = k->reduce_op;
    int64_t sp = loop_space(k);
    char space[32];
    snprintf(space, sizeof space, "%s[%u]", sp < ni ? "I" : "O",
             (unsigned)(sp < ni ? sp : sp - ni));
    uint8_t *table = calloc(ni ? ni : 1, 1);
    if (!table) {
        b->oom = 1;
        return;
    }
    int has_red = 0, checks = 0;
    for (uint32_t i = 0; i < k->n_instrs; i++)
        if (e->live[i] && k->instrs[i].op == KILN_I_TAKE)
            table[k->instrs[i].a] = checks = 1;
    for (uint32_t o = 0; o < no; o++) {
        has_red |= k->out_roles[o] == KILN_ROLE_REDUCE;
        checks |= k->out_roles[o] == KILN_ROLE_SCATTER;
    }
    e->need |= checks ? N_PUTI | N_IDXERR : 0;
    e->need |= has_red ? N_BITS : 0;
    sb_printf(b, "static const u8 kl_role[%u] = {", ni + no);
    for (uint32_t v = 0; v < ni + no; v++)
        sb_printf(b, "%s%s%u", v ? "," : "", v % 16 ? " " : "\n  ",
                  v < ni ? k->in_roles[v] : k->out_roles[v - ni]);
    sb_put(b, "\n};\n");
    sb_printf(b, helper_loop, k->reduce_axes, k->reduce_axes);
    sb_put(b, "\n");
    /* prep: the checks, the coalesced space (sh, map, w; -1 when
     * empty), a reduction's output extents (dsh) and count (cnt); all of
     * fixed size.  Per-view strides (kl_lst) are read from the views in
     * run, so the plan does not grow with the kernel's width. */
    emit_head(e, "  i64 sh[8], dsh[8];\n  int map[8];\n  int w;\n"
                 "  double cnt;\n");
    sb_put(b, "  int d;\n");
    emit_checks(e, program_rt_need(e));
    sb_printf(b, "  if (kl_lshapes(call, &%s)) return kl_fail(call, %d, "
              "\"%s: an argument's shape does not fit the loop\");\n", space,
              KILN_ERR_SHAPE, e->label);
    sb_printf(b, "  P->cnt = 1.0;\n"
              "  for (d = 0; d < 8; d++) P->dsh[d] = 1;\n"
              "  for (d = 0; d < %s.rank; d++) {\n"
              "    if ((%uU >> d) & 1U) { P->dsh[d] = 1; "
              "P->cnt *= (double)%s.shape[d]; }\n"
              "    else P->dsh[d] = %s.shape[d];\n  }\n"
              "  P->w = kl_lcoal(call, &%s, P->sh, P->map);\n"
              "  if (P->w == 0) { P->w = 1; P->sh[0] = 1; P->map[0] = -1; }\n"
              "  return 0;\n}\n\n",
              space, k->reduce_axes, space, space, space);
    /* run: data pointers, identity, strides by role, the walk and the
     * index checks (data) */
    emit_run_head(e);
    sb_put(b, "  const i64 *sh = P->sh;\n  const int *map = P->map;\n"
              "  i64 idx[8], n, j, j0, j1;\n  int w = P->w, k;\n");
    if (has_red)
        sb_put(b, "  const double kl_inf = kl_bits(0x7ff0000000000000ULL);\n");
    if (checks)
        sb_put(b, "  i64 kr, kx, ev = 0, en = 0;\n  u32 er = 0xffffffffU;\n");
    for (uint32_t o = 0; o < no; o++) {
        unsigned dt = k->outputs[o].dtype;
        const char *T = ctype[dt];
        if (k->out_roles[o] == KILN_ROLE_SCATTER)
            sb_printf(b, "  %s *z%u; i64 zn%u, zs%u;\n", T, o, o, o);
        else
            sb_printf(b, "  %s *q%u; i64 t%u;\n", T, o, o);
        if (k->out_roles[o] == KILN_ROLE_REDUCE)
            sb_printf(b, "  %s acc%u;\n", dt == KILN_F32 ? "double" : T, o);
    }
    for (uint32_t a = 0; a < ni; a++)
        if (table[a])
            sb_printf(b, "  const %s *g%u; i64 gn%u, gs%u;\n",
                      ctype[k->inputs[a].dtype], a, a, a);
    emit_program_decls(e);
    emit_run_body(e);
    for (uint32_t a = 0; a < ni; a++)
        if (table[a])
            sb_printf(b, "  g%u = (const %s *)I[%u].data; gn%u = "
                      "I[%u].shape[0]; gs%u = I[%u].strides[0];\n", a,
                      ctype[k->inputs[a].dtype], a, a, a, a, a);
    for (uint32_t o = 0; o < no; o++)
        if (k->out_roles[o] == KILN_ROLE_SCATTER)
            sb_printf(b, "  z%u = (%s *)O[%u].data; zn%u = O[%u].shape[0]; "
                      "zs%u = O[%u].strides[0];\n", o,
                      ctype[k->outputs[o].dtype], o, o, o, o, o);
    if (has_red) {
        /* identity over the distinct output elements */
        sb_put(b, "  (void)kl_inf;\n");
        for (uint32_t o = 0; o < no; o++) {
            unsigned dt = k->outputs[o].dtype;
            if (k->out_roles[o] == KILN_ROLE_REDUCE)
                sb_printf(b, "  {\n    %s idv = (%s)%s;\n"
                          "    kl_walk%u(&O[%u], P->dsh, &idv, 0, 0.0);\n  }\n",
                          ctype[dt], ctype[dt], identity_text(op, dt), dt, o);
        }
    }
    sb_put(b, "  if (w >= 0) {\n  n = sh[w - 1];\n");
    for (uint32_t a = 0; a < ni; a++)
        if (e->used_in[a])
            sb_printf(b, "  s%u = kl_lst(call, %u, map[w - 1]);\n", a, a);
    for (uint32_t o = 0; o < no; o++)
        if (k->out_roles[o] != KILN_ROLE_SCATTER)
            sb_printf(b, "  t%u = kl_lst(call, %u, map[w - 1]);\n", o, ni + o);
    sb_put(b, "  for (k = 0; k < w; k++) idx[k] = 0;\n  for (;;) {\n");
    for (uint32_t a = 0; a < ni; a++)
        if (e->used_in[a])
            sb_printf(b, "    p%u = (const %s *)I[%u].data + "
                      "kl_loff(call, %u, idx, map, w - 1);\n", a,
                      ctype[k->inputs[a].dtype], a, a);
    for (uint32_t o = 0; o < no; o++)
        if (k->out_roles[o] != KILN_ROLE_SCATTER)
            sb_printf(b, "    q%u = (%s *)O[%u].data + "
                      "kl_loff(call, %u, idx, map, w - 1);\n", o,
                      ctype[k->outputs[o].dtype], o, ni + o);
    sb_put(b, "    for (j0 = 0; j0 < n; j0 += 256) {\n"
              "     j1 = n - j0 < 256 ? n : j0 + 256;\n");
    for (uint32_t o = 0; o < no; o++) {
        unsigned dt = k->outputs[o].dtype;
        if (k->out_roles[o] == KILN_ROLE_REDUCE)
            sb_printf(b, "     acc%u = (%s)%s;\n", o,
                      dt == KILN_F32 ? "double" : ctype[dt],
                      identity_text(op, dt));
    }
    sb_put(b, "     for (j = j0; j < j1; j++) {\n");
    emit_loop_program(e);
    /* an ITER output may be an ITER input (in place): values the outputs
     * read straight from an input are read before the first store */
    int iter_out = 0;
    for (uint32_t o = 0; o < no; o++)
        iter_out |= k->out_roles[o] == KILN_ROLE_ITER;
    for (uint32_t o = 0; iter_out && o < no; o++) {
        int32_t v = k->out_refs[o], x = k->out_index[o];
        if (k->instrs[v].op == KILN_I_LOAD)
            sb_printf(b, "      %s ov%u = %s;\n", ctype[k->instrs[v].dtype],
                      o, ref(e, v, e->tmp[0], 128));
        if (x >= 0 && k->instrs[x].op == KILN_I_LOAD)
            sb_printf(b, "      %s ox%u = %s;\n", ctype[k->instrs[x].dtype],
                      o, ref(e, x, e->tmp[0], 128));
    }
    for (uint32_t o = 0; o < no; o++) {
        unsigned dt = k->outputs[o].dtype;
        char val[128], size[32], on[32], ix[128];
        int32_t x = k->out_index[o];
        if (iter_out && k->instrs[k->out_refs[o]].op == KILN_I_LOAD)
            snprintf(val, sizeof val, "ov%u", o);
        else
            ref(e, k->out_refs[o], val, sizeof val);
        if (iter_out && x >= 0 && k->instrs[x].op == KILN_I_LOAD)
            snprintf(ix, sizeof ix, "ox%u", o);
        else if (x >= 0)
            ref(e, x, ix, sizeof ix);
        switch (k->out_roles[o]) {
        case KILN_ROLE_REDUCE:
            emit_fold(e, o, val);
            break;
        case KILN_ROLE_SCATTER:
            snprintf(size, sizeof size, "zn%u", o);
            snprintf(on, sizeof on, "*zp%u", o);
            sb_printf(b, "      kr = (i64)%s; kx = kr < 0 ? kr + %s : kr;\n"
                      "      if ((u64)kx >= (u64)%s) { ", ix, size, size);
            emit_bad_index(e, k->n_instrs + o, size);
            sb_printf(b, " }\n      else { %s *zp%u = z%u + kx * zs%u; "
                      "*zp%u = ", ctype[dt], o, o, o, o);
            emit_combine(b, KILN_REDUCE_SUM, dt, on, val);
            sb_put(b, "; }\n");
            break;
        default:
            sb_printf(b, "      q%u[j * t%u] = %s;\n", o, o, val);
            break;
        }
    }
    sb_put(b, "     }\n");
    if (checks)
        sb_put(b, "     if (er != 0xffffffffU) "
                  "return kl_index_error(call, ev, 0, en);\n");
    for (uint32_t o = 0; o < no; o++)
        if (k->out_roles[o] == KILN_ROLE_REDUCE)
            emit_flush(e, o);
    sb_put(b, "    }\n");
    sb_put(b, odometer);
    sb_put(b, "  }\n  }\n");
    for (uint32_t o = 0; op == KILN_REDUCE_MEAN && o < no; o++)
        if (k->out_roles[o] == KILN_ROLE_REDUCE)
            sb_printf(b, "  kl_walk%u(&O[%u], P->dsh, 0, 1, P->cnt);\n",
                      k->outputs[o].dtype, o);
    sb_put(b, "  return 0;\n}\n");
    emit_tail(e);
    free(table);
}

/* ---- DOT ---------------------------------------------------------------- */

/* The plan: the three operands as matrices and whether BLAS can take
 * them (run still checks the runtime table's gemm entry). */
static void emit_dot(emitter *e)
{
    const kiln_kernel *k = e->k;
    sbuf *b = &e->body;
    unsigned dt = k->outputs[0].dtype;
    if (k->outputs[0].rank > 2) {
        /* ABI 1.11: one call of the runtime's gemm_batched (its BLAS
         * decisions and checks: core/runtime/gemm_batched.c), as the
         * interpreter makes it */
        emit_head(e, "  int none;\n");
        emit_checks(e, NULL);
        sb_printf(b, "  if (!rt || rt->struct_size < %zu || "
                  "!rt->gemm_batched) return kl_fail(call, %d, \"%s: the "
                  "runtime table has no gemm_batched (version < 6)\");\n"
                  "  return 0;\n}\n\n",
                  offsetof(kiln_runtime, gemm_batched) +
                      sizeof(void (*)(void)),
                  KILN_ERR_BACKEND, e->label);
        emit_run_head(e);
        emit_run_body(e);
        sb_printf(b, "  {\n    char why[400];\n    int rc;\n"
                  "    why[0] = 0;\n"
                  "    rc = rt->gemm_batched(rt, &I[0], &I[1], &O[0], why, "
                  "sizeof why);\n"
                  "    if (rc && call->errbuf && call->errbuf_size) {\n"
                  "      usize at = kl_puts(call->errbuf, 0, "
                  "call->errbuf_size, \"%s: \");\n"
                  "      call->errbuf[kl_puts(call->errbuf, at, "
                  "call->errbuf_size, why)] = 0;\n    }\n"
                  "    return rc;\n  }\n}\n", e->label);
        emit_tail(e);
        return;
    }
    const char *T = ctype[dt];
    int f64 = dt == KILN_F64;
    emit_head(e, "  kl_mat A, B, C;\n  int blas, empty;\n");
    sb_put(b, "  const kv *va, *vb, *vc;\n  kl_mat A, B, C;\n  int ok;\n");
    emit_checks(e, NULL);
    sb_printf(b,
        "  va = &I[0]; vb = &I[1]; vc = &O[0];\n"
        "  A.rows = 1; A.cols = va->shape[0]; A.s0 = 0; A.s1 = va->strides[0];\n"
        "  B.rows = vb->shape[0]; B.cols = 1; B.s0 = vb->strides[0]; B.s1 = 0;\n"
        "  C.rows = 1; C.cols = 1; C.s0 = 0; C.s1 = 0;\n"
        "  A.trans = B.trans = C.trans = 0; A.ld = B.ld = C.ld = 0;\n"
        "  if (va->rank == 2) {\n"
        "    A.rows = va->shape[0]; A.cols = va->shape[1];\n"
        "    A.s0 = va->strides[0]; A.s1 = va->strides[1];\n"
        "    C.rows = A.rows; C.s0 = vc->strides[0];\n  }\n"
        "  if (vb->rank == 2) {\n"
        "    B.rows = vb->shape[0]; B.cols = vb->shape[1];\n"
        "    B.s0 = vb->strides[0]; B.s1 = vb->strides[1];\n"
        "    C.cols = B.cols; C.s1 = vc->strides[vc->rank - 1];\n  }\n"
        "  ok = A.cols == B.rows;\n"
        "  if (vc->rank == 2) ok = ok && vc->shape[0] == C.rows && "
        "vc->shape[1] == C.cols;\n"
        "  else if (vc->rank == 1) ok = ok && vc->shape[0] == (va->rank == 2 "
        "? C.rows : C.cols);\n"
        "  if (!ok) return kl_fail(call, %d, \"%s: operand shapes do not "
        "match\");\n"
        "  P->empty = C.rows == 0 || C.cols == 0;\n"
        "  P->blas = kl_mat_blas(&A, 1) && kl_mat_blas(&B, 1) && "
        "kl_mat_blas(&C, 0);\n"
        "  P->A = A; P->B = B; P->C = C;\n"
        "  return 0;\n}\n\n",
        KILN_ERR_SHAPE, e->label);
    emit_run_head(e);
    sb_put(b, "  const kl_mat *A = &P->A, *B = &P->B, *C = &P->C;\n");
    emit_run_body(e);
    /* the runtime's gemm_rt when the table has it (ABI 1.8: the
     * function's choice between BLAS and kiln's matrix-vector loop) */
    sb_printf(b,
        "  if (P->empty) return 0;\n"
        "  if (P->blas && rt && rt->struct_size >= %zu && rt->%s_rt) {\n"
        "    rt->%s_rt(rt, A->trans, B->trans, C->rows, C->cols, A->cols, %s, "
        "(const %s *)I[0].data, A->ld, (const %s *)I[1].data, B->ld, %s, "
        "(%s *)O[0].data, C->ld);\n"
        "    return 0;\n  }\n",
        offsetof(kiln_runtime, sgemm_rt) + sizeof(void (*)(void)),
        f64 ? "dgemm" : "sgemm", f64 ? "dgemm" : "sgemm",
        f64 ? "1.0" : "1.0f", T, T, f64 ? "0.0" : "0.0f", T);
    sb_printf(b,
        "  if (P->blas && rt && rt->struct_size >= 152 && rt->%s) {\n"
        "    rt->%s(A->trans, B->trans, C->rows, C->cols, A->cols, %s, "
        "(const %s *)I[0].data, A->ld, (const %s *)I[1].data, B->ld, %s, "
        "(%s *)O[0].data, C->ld);\n"
        "    return 0;\n  }\n"
        "  {\n"
        "    const %s *pa = I[0].data, *pb = I[1].data;\n"
        "    %s *pc = O[0].data;\n"
        "    i64 i, j, p;\n"
        "    for (i = 0; i < A->rows; i++)\n"
        "      for (j = 0; j < B->cols; j++) {\n"
        "        double acc = 0.0;\n"
        "        for (p = 0; p < A->cols; p++)\n"
        "          acc += (double)pa[i * A->s0 + p * A->s1] * "
        "(double)pb[p * B->s0 + j * B->s1];\n"
        "        pc[i * C->s0 + j * C->s1] = (%s)acc;\n"
        "      }\n  }\n  return 0;\n}\n",
        f64 ? "dgemm" : "sgemm", f64 ? "dgemm" : "sgemm",
        f64 ? "1.0" : "1.0f", T, T, f64 ? "0.0" : "0.0f", T, T, T, T);
    emit_tail(e);
}


/* ------------------------------------------------------------------ */
/* Preamble and helpers                                                 */
/* ------------------------------------------------------------------ */

static const char preamble[] =
    "typedef long long i64;\n"
    "typedef unsigned long long u64;\n"
    "typedef int i32;\n"
    "typedef unsigned int u32;\n"
    "typedef unsigned char u8;\n"
    "typedef unsigned long usize;\n"
    "typedef struct kv { void *data; i64 shape[8]; i64 strides[8]; "
    "i32 rank; i32 dtype; } kv;\n"
    "typedef struct krt {\n"
    "  usize struct_size; u32 version;\n"
    "  double (*exp)(double); double (*expm1)(double); double (*log)(double);\n"
    "  double (*log1p)(double); double (*sqrt)(double);\n"
    "  double (*pow)(double, double); double (*tanh)(double);\n"
    "  double (*sin)(double); double (*cos)(double); double (*erf)(double);\n"
    "  double (*erfc)(double); double (*gammaln)(double);\n"
    "  double (*digamma)(double); double (*sigmoid)(double);\n"
    "  double (*softplus)(double);\n"
    "  void (*dgemm)(int, int, i64, i64, i64, double, const double *, i64,\n"
    "                const double *, i64, double, double *, i64);\n"
    "  void (*sgemm)(int, int, i64, i64, i64, float, const float *, i64,\n"
    "                const float *, i64, float, float *, i64);\n"
    "  double (*trigamma)(double);\n"
    "  double (*floor)(double); double (*ceil)(double);\n"
    "  double (*trunc)(double); double (*rint)(double);\n"
    "  double (*round)(double); double (*log1mexp)(double);\n"
    "  double (*erfcx)(double); double (*erfinv)(double);\n"
    "  double (*erfcinv)(double); double (*mod)(double, double);\n"
    "  double (*gammainc)(double, double);\n"
    "  double (*gammaincc)(double, double);\n"
    "  double (*betainc)(double, double, double);\n"
    "  double (*gammainc_da)(double, double);\n"
    "  double (*betainc_da)(double, double, double);\n"
    "  double (*betainc_db)(double, double, double);\n"
    "  void (*dgemm_rt)(const struct krt *, int, int, i64, i64, i64, double,\n"
    "                   const double *, i64, const double *, i64, double,\n"
    "                   double *, i64);\n"
    "  void (*sgemm_rt)(const struct krt *, int, int, i64, i64, i64, float,\n"
    "                   const float *, i64, const float *, i64, float,\n"
    "                   float *, i64);\n"
    "  int (*lapack_run)(const struct krt *, u32, u32, const kv *, u32,\n"
    "                    const kv *, char *, usize);\n"
    "  double (*i0e)(double); double (*i1e)(double);\n"
    "  void *ode_solve;\n"
    "  int (*gemm_batched)(const struct krt *, const kv *, const kv *,\n"
    "                      const kv *, char *, usize);\n"
    "} krt;\n"
    "typedef struct kcall { usize struct_size; u32 n_inputs, n_outputs;\n"
    "  const kv *inputs; const kv *outputs; const krt *rt;\n"
    "  char *errbuf; usize errbuf_size;\n"
    "  const double *consts; u32 n_consts; } kcall;\n"
    "\n"
    "static usize kl_puts(char *b, usize at, usize n, const char *s)\n"
    "{\n  while (*s && at + 1 < n) b[at++] = *s++;\n  return at;\n}\n"
    "static int kl_fail(const kcall *c, int code, const char *m)\n"
    "{\n  if (c->errbuf && c->errbuf_size)\n"
    "    c->errbuf[kl_puts(c->errbuf, 0, c->errbuf_size, m)] = 0;\n"
    "  return code;\n}\n"
    "static int kl_check(const kcall *c, u32 ni, u32 no, const u8 *desc)\n"
    "{\n  u32 i;\n  int d, empty;\n"
    "  if (c->n_inputs != ni || c->n_outputs != no || (ni && !c->inputs) ||\n"
    "      !c->outputs) return 1;\n"
    "  for (i = 0; i < ni + no; i++) {\n"
    "    const kv *v = i < ni ? &c->inputs[i] : &c->outputs[i - ni];\n"
    "    if (v->dtype != desc[2 * i] || v->rank != desc[2 * i + 1]) return 1;\n"
    "    empty = 0;\n"
    "    for (d = 0; d < v->rank; d++) {\n"
    "      if (v->shape[d] < 0) return 1;\n"
    "      if (v->shape[d] == 0) empty = 1;\n    }\n"
    "    if (!v->data && !empty) return 1;\n  }\n  return 0;\n}\n";

static const char helper_iter[] =
    "static i64 kl_st(const kv *v, int d)\n"
    "{\n  return v->shape[d] == 1 ? 0 : v->strides[d];\n}\n"
    /* inputs broadcast to space (extent equal or 1); outputs: equal
     * (exact) or equal-or-1 (reduce) */
    "static int kl_shapes(const kcall *c, const kv *space, int exact)\n"
    "{\n  u32 v;\n  int d;\n"
    "  for (v = 0; v < c->n_inputs; v++)\n"
    "    for (d = 0; d < space->rank; d++)\n"
    "      if (c->inputs[v].shape[d] != space->shape[d] &&\n"
    "          c->inputs[v].shape[d] != 1) return 1;\n"
    "  for (v = 0; v < c->n_outputs; v++)\n"
    "    for (d = 0; d < space->rank; d++)\n"
    "      if (c->outputs[v].shape[d] != space->shape[d] &&\n"
    "          (exact || c->outputs[v].shape[d] != 1)) return 1;\n"
    "  return 0;\n}\n"
    "static int kl_merge(const kcall *c, int a, int d, i64 e)\n"
    "{\n  u32 v;\n"
    "  for (v = 0; v < c->n_inputs; v++)\n"
    "    if (kl_st(&c->inputs[v], a) != kl_st(&c->inputs[v], d) * e) "
    "return 0;\n"
    "  for (v = 0; v < c->n_outputs; v++)\n"
    "    if (kl_st(&c->outputs[v], a) != kl_st(&c->outputs[v], d) * e) "
    "return 0;\n"
    "  return 1;\n}\n"
    /* the interpreter's coalescing: -1 when empty, else the rank w */
    "static int kl_coalesce(const kcall *c, const kv *space, i64 *sh, "
    "int *map)\n"
    "{\n  int w = 0, d;\n"
    "  for (d = 0; d < space->rank; d++) {\n"
    "    i64 e = space->shape[d];\n"
    "    if (e == 0) return -1;\n"
    "    if (e == 1) continue;\n"
    "    if (w > 0 && kl_merge(c, map[w - 1], d, e)) {\n"
    "      sh[w - 1] *= e; map[w - 1] = d;\n"
    "    } else {\n      sh[w] = e; map[w] = d; w++;\n    }\n  }\n"
    "  return w;\n}\n"
    "static i64 kl_off(const kv *v, const i64 *idx, const int *map, int m)\n"
    "{\n  i64 o = 0;\n  int k;\n"
    "  for (k = 0; k < m; k++) o += idx[k] * kl_st(v, map[k]);\n"
    "  return o;\n}\n";

static const char helper_bits[] =
    "static double kl_bits(u64 b)\n"
    "{\n  union { u64 u; double d; } x;\n  x.u = b;\n  return x.d;\n}\n";

static const char helper_puti[] =
    "static usize kl_puti(char *b, usize at, usize n, i64 v)\n"
    "{\n  char t[24];\n  int k = 0;\n"
    "  u64 u = v < 0 ? 0ULL - (u64)v : (u64)v;\n"
    "  do { t[k++] = (char)('0' + (int)(u % 10)); u /= 10; } while (u);\n"
    "  if (v < 0 && at + 1 < n) b[at++] = '-';\n"
    "  while (k && at + 1 < n) b[at++] = t[--k];\n"
    "  return at;\n}\n";

/* an index out of bounds (kl_puts and kl_puti before it) */
static const char helper_idxerr[] =
    "static int kl_index_error(const kcall *c, i64 k, int axis, i64 size)\n"
    "{\n  usize at = 0, n = c->errbuf_size;\n"
    "  if (!c->errbuf || !n) return %d;\n"
    "  at = kl_puts(c->errbuf, at, n, \"index \");\n"
    "  at = kl_puti(c->errbuf, at, n, k);\n"
    "  at = kl_puts(c->errbuf, at, n, \" is out of bounds for axis \");\n"
    "  at = kl_puti(c->errbuf, at, n, axis);\n"
    "  at = kl_puts(c->errbuf, at, n, \" with size \");\n"
    "  at = kl_puti(c->errbuf, at, n, size);\n"
    "  c->errbuf[at] = 0;\n  return %d;\n}\n";

/* RECUR's length check (kl_puts and kl_puti before it) */
static const char helper_lenerr[] =
    "static int kl_len_error(const kcall *c, const char *what, i64 i,\n"
    "                        const char *unit, i64 len, i64 T)\n"
    "{\n  usize at = 0, n = c->errbuf_size;\n"
    "  if (!c->errbuf || !n) return %d;\n"
    "  at = kl_puts(c->errbuf, at, n, what);\n"
    "  at = kl_puti(c->errbuf, at, n, i);\n"
    "  at = kl_puts(c->errbuf, at, n, \" has \");\n"
    "  at = kl_puti(c->errbuf, at, n, len);\n"
    "  at = kl_puts(c->errbuf, at, n, unit);\n"
    "  at = kl_puts(c->errbuf, at, n, \", the scan has \");\n"
    "  at = kl_puti(c->errbuf, at, n, T);\n"
    "  c->errbuf[at] = 0;\n  return %d;\n}\n";

/* kl_walkDT(view, shape, value, mean, count) over the distinct elements of
 * a reduce output of dtype DT: fill with *value, or (mean) divide by
 * count.  One per output dtype (sibling reductions may mix them). */
static void emit_walk(sbuf *b, unsigned dt)
{
    const char *T = ctype[dt];
    sb_printf(b,
              "static void kl_walk%u(const kv *o, const i64 *sh, const %s *val, "
              "int mean, double cnt)\n"
              "{\n  i64 idx[8], off;\n  int d;\n"
              "  for (d = 0; d < o->rank; d++) { if (sh[d] == 0) return; "
              "idx[d] = 0; }\n"
              "  for (;;) {\n    %s *p;\n    off = 0;\n"
              "    for (d = 0; d < o->rank; d++) off += idx[d] * o->strides[d];\n"
              "    p = (%s *)o->data + off;\n", dt, T, T, T);
    if (dt == KILN_F64)
        sb_put(b, "    if (mean) *p /= cnt; else *p = *val;\n");
    else if (dt == KILN_F32)
        sb_put(b, "    if (mean) *p = (float)((double)*p / cnt); "
                  "else *p = *val;\n");
    else
        sb_put(b, "    (void)mean; (void)cnt;\n    *p = *val;\n");
    sb_put(b, "    for (d = o->rank - 1; d >= 0; d--) {\n"
              "      if (++idx[d] < sh[d]) break;\n      idx[d] = 0;\n    }\n"
              "    if (d < 0) break;\n  }\n}\n");
}

/* kl_copy(dst, dst strides, src, src strides, shape, rank, add): copy (or
 * add, scatter INC) a strided sub-array; rank 0 is one element. */
static void emit_copy(sbuf *b, const char *T, int add, unsigned dt)
{
    sb_printf(b,
              "static void kl_copy(%s *d, const i64 *ds, const %s *s, "
              "const i64 *ss, const i64 *sh, int r, int add)\n"
              "{\n  i64 idx[8], od, os, n, j;\n  int k;\n"
              "  (void)add;\n"
              "  for (k = 0; k < r; k++) { if (sh[k] == 0) return; "
              "idx[k] = 0; }\n"
              "  n = r > 0 ? sh[r - 1] : 1;\n"
              "  for (;;) {\n    i64 dj, sj;\n    od = 0; os = 0;\n"
              "    for (k = 0; k < r - 1; k++) { od += idx[k] * ds[k]; "
              "os += idx[k] * ss[k]; }\n"
              "    dj = r > 0 ? ds[r - 1] : 0; sj = r > 0 ? ss[r - 1] : 0;\n"
              "    for (j = 0; j < n; j++) {\n", T, T);
    if (!add)
        sb_put(b, "      d[od + j * dj] = s[os + j * sj];\n");
    else if (is_float(dt))
        sb_put(b, "      d[od + j * dj] = d[od + j * dj] + s[os + j * sj];\n");
    else if (dt == KILN_BOOL)
        sb_put(b, "      d[od + j * dj] = (u8)(d[od + j * dj] | "
                  "s[os + j * sj]);\n");
    else if (dt == KILN_I64)
        sb_put(b, "      d[od + j * dj] = (i64)((u64)d[od + j * dj] + "
                  "(u64)s[os + j * sj]);\n");
    else
        sb_put(b, "      d[od + j * dj] = (i32)((u32)d[od + j * dj] + "
                  "(u32)s[os + j * sj]);\n");
    sb_put(b, "    }\n    if (r <= 1) break;\n"
              "    for (k = r - 2; k >= 0; k--) {\n"
              "      if (++idx[k] < sh[k]) break;\n      idx[k] = 0;\n    }\n"
              "    if (k < 0) break;\n  }\n}\n");
}

static const char helper_mat[] =
    "typedef struct kl_mat { i64 rows, cols, s0, s1; int trans; i64 ld; } "
    "kl_mat;\n"
    "static int kl_mat_blas(kl_mat *m, int allow_trans)\n"
    "{\n  i64 c1 = m->cols > 1 ? m->cols : 1, r1 = m->rows > 1 ? m->rows : 1;\n"
    "  if ((m->cols <= 1 || m->s1 == 1) && (m->rows <= 1 || m->s0 >= c1)) {\n"
    "    m->trans = 0; m->ld = m->rows <= 1 ? c1 : m->s0;\n    return 1;\n  }\n"
    "  if (allow_trans && (m->rows <= 1 || m->s0 == 1) &&\n"
    "      (m->cols <= 1 || m->s1 >= r1)) {\n"
    "    m->trans = 1; m->ld = m->cols <= 1 ? r1 : m->s1;\n    return 1;\n  }\n"
    "  return 0;\n}\n";

static const char *kind_name(uint32_t kind)
{
    switch (kind) {
    case KILN_KERNEL_ELEMWISE: return "elemwise";
    case KILN_KERNEL_REDUCE: return "reduce";
    case KILN_KERNEL_JOIN: return "join";
    case KILN_KERNEL_GATHER: return "gather";
    case KILN_KERNEL_SCATTER: return "scatter";
    case KILN_KERNEL_LOOP: return "loop";
    case KILN_KERNEL_SCAN: return "scan";
    case KILN_KERNEL_LINALG: return "linalg";
    case KILN_KERNEL_RECUR: return "recur";
    case KILN_KERNEL_ODE: return "ode";
    case KILN_KERNEL_TOPK: return "topk";
    default: return "dot";
    }
}

/* Whether output o is a reduction's (its kl_walk<dtype> fills and
 * divides it). */
static int walks(const kiln_kernel *k, uint32_t o)
{
    return k->kind == KILN_KERNEL_REDUCE ||
           (k->kind == KILN_KERNEL_LOOP && k->out_roles[o] == KILN_ROLE_REDUCE);
}

int kiln_emit_c(const kiln_kernel *k0, char **src, size_t *len, char *why,
                size_t n)
{
    kiln_kernel full;
    if (!src)
        return why_f(why, n, "no output pointer");
    *src = NULL;
    if (read_kernel(k0, &full, why, n) || check_full(&full, why, n))
        return -1;
    emitter e;
    memset(&e, 0, sizeof e);
    e.k = &full;
    /* label: [A-Za-z0-9_ .-] only (it lands in comments and strings) */
    const char *lab = full.label ? full.label : kind_name(full.kind);
    size_t li = 0;
    for (; *lab && li + 1 < sizeof e.label; lab++) {
        char c = *lab;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '_' || c == ' ' ||
                 c == '.' || c == '-';
        e.label[li++] = ok ? c : '_';
    }
    e.label[li] = 0;
    int rc = 0;
    if (full.kind == KILN_KERNEL_ELEMWISE || full.kind == KILN_KERNEL_REDUCE ||
        full.kind == KILN_KERNEL_LOOP || full.kind == KILN_KERNEL_RECUR)
        rc = plan_program(&e);
    if (rc == 0) {
        switch (full.kind) {
        case KILN_KERNEL_ELEMWISE: emit_elemwise(&e); break;
        case KILN_KERNEL_REDUCE: emit_reduce(&e); break;
        case KILN_KERNEL_JOIN: emit_join(&e); break;
        case KILN_KERNEL_GATHER:
        case KILN_KERNEL_SCATTER: emit_take(&e); break;
        case KILN_KERNEL_LOOP: emit_loop(&e); break;
        case KILN_KERNEL_SCAN: emit_scan(&e); break;
        case KILN_KERNEL_LINALG: emit_linalg(&e); break;
        case KILN_KERNEL_RECUR: emit_recur(&e); break;
        default: emit_dot(&e); break;
        }
    }
    sbuf out = {0};
    if (rc == 0 && !e.body.oom) {
        sb_printf(&out, "/* kiln %s kernel \"%s\": %u inputs, %u outputs "
                  "(generated by %s) */\n", kind_name(full.kind), e.label,
                  full.n_inputs, full.n_outputs, KILN_EMIT_C_VERSION);
        sb_put(&out, preamble);
        if (e.need & N_ITER)
            sb_put(&out, helper_iter);
        if (e.need & N_BITS)
            sb_put(&out, helper_bits);
        if (e.need & N_FABS)
            sb_put(&out, "static double kl_fabs(double x)\n{\n"
                         "  union { double d; u64 u; } v;\n  v.d = x;\n"
                         "  v.u &= 0x7fffffffffffffffULL;\n  return v.d;\n}\n");
        if (e.need & N_FABSF)
            sb_put(&out, "static float kl_fabsf(float x)\n{\n"
                         "  union { float f; u32 u; } v;\n  v.f = x;\n"
                         "  v.u &= 0x7fffffffU;\n  return v.f;\n}\n");
        if (e.need & N_F2I64)
            sb_put(&out, "static i64 kl_f2i64(double x)\n{\n"
                         "  return x >= -0x1p63 && x < 0x1p63 ? (i64)x : "
                         "(-9223372036854775807LL - 1);\n}\n");
        if (e.need & N_F2I32)
            sb_put(&out, "static i32 kl_f2i32(double x)\n{\n"
                         "  return x > -0x1.00000002p31 && x < 0x1p31 ? "
                         "(i32)x : (-2147483647 - 1);\n}\n");
        if (e.need & N_PUTI)
            sb_put(&out, helper_puti);
        if (e.need & N_IDXERR)
            sb_printf(&out, helper_idxerr, KILN_ERR_RUNTIME, KILN_ERR_RUNTIME);
        if (e.need & N_LENERR)
            sb_printf(&out, helper_lenerr, KILN_ERR_SHAPE, KILN_ERR_SHAPE);
        for (uint32_t o = 0; o < full.n_outputs; o++) {
            int seen = 0;
            for (uint32_t q = 0; q < o; q++)
                seen |= full.outputs[q].dtype == full.outputs[o].dtype &&
                        walks(&full, q);
            if (walks(&full, o) && !seen)
                emit_walk(&out, full.outputs[o].dtype);
        }
        if (full.kind == KILN_KERNEL_JOIN ||
            full.kind == KILN_KERNEL_GATHER)
            emit_copy(&out, utype[full.outputs[0].dtype], 0, 0);
        if (full.kind == KILN_KERNEL_SCATTER) {
            int add = full.scatter_mode == KILN_SCATTER_INC;
            unsigned dt = full.outputs[0].dtype;
            emit_copy(&out, add ? ctype[dt] : utype[dt], add, dt);
        }
        if (full.kind == KILN_KERNEL_DOT && full.outputs[0].rank <= 2)
            sb_put(&out, helper_mat);
        sb_put(&out, "\n");
        if (!e.body.oom && e.body.s)
            sb_put(&out, e.body.s);
    }
    int oom = rc != 0 || e.body.oom || out.oom;
    free(e.body.s);
    free(e.live);
    free(e.last);
    free(e.reg);
    free(e.used_in);
    if (oom) {
        free(out.s);
        return why_f(why, n, "out of memory generating C");
    }
    *src = out.s;
    if (len)
        *len = out.len;
    return 0;
}
