/*
 * test_rewrite_fuzz.c — differential fuzzing of the rewrite passes
 * (core/rewrite, docs/rewrite.md).
 *
 * Random graphs are built with the C builder API from a seeded PRNG (the
 * seeds are 1..N, so every run builds the same graphs) and compiled with
 * kiln_options.passes = "none" and with each of: "all", each pass alone,
 * "-fuse", "canonicalize,fuse", "all" under a tight policy (fusion caps
 * of 2 inputs / 8 instructions: splits everywhere; every constant
 * promoted) and one random subset of the passes per graph — under every
 * backend this build has (interp; tcc and llvm when kiln_compile with
 * them gives kernels of that backend).  Each compiled function is called
 * at three seeded input sets (the second mostly +-0 and +-1, the
 * identities' corner cases), and its outputs are compared with passes
 * "none" under the same backend: f64 within a relative 1e-9, f32 within
 * 1e-4, with an absolute tolerance of the same size near zero (rounding
 * that reassociation changes); an f64 output computed from an f32 value
 * whose rounding the passes may legitimately change (a reassociable f32
 * add/mul chain, an f32 reduction) within 1e-4; NaN equals NaN;
 * infinities, the sign of an exact zero, integers and bools exactly.
 * For graphs with gradients, kiln_function_check_grad must still find a
 * gradient record for each input differentiated (g->grads survive the
 * passes).  A graph the builder rejects (random combinations can be
 * ill-typed) is skipped and counted.  A crash names the seed and pass
 * set.  Regression cases the fuzzer found run first.
 *
 * The generator draws 2-6 inputs (mostly f64, some f32, i64, i32, bool;
 * NaN and infinities among the values of some float inputs) of shapes
 * (), (3), (2,3), (2,1), (1,3), then 5-40 steps: elementwise ops (add sub
 * mul true_div neg abs exp log1p sqrt tanh sigmoid maximum minimum,
 * where over a comparison, cast), nested add/mul chains and n-ary
 * add/mul (flattening, pairwise), the identity literals 0.0 -0.0 1.0 -1.0
 * 1 (canonicalize), literal-only expressions (fold), repeated steps with
 * commutative operands sometimes swapped and constants with equal data
 * (cse), constants of 160 elements (promote), reductions (sum mean max
 * min prod, with axes and keepdims), joins (nested along the same or the
 * other axis, single- and multi-use), slices (steps, negative bounds,
 * empty results), squeezes of keepdims reductions (the reduced axes, no
 * axis, another size-1 axis; the reduction sometimes used elsewhere),
 * fill(x, expand_dims(literal)) (canonicalize's shape rules),
 * transpose/expand_dims/broadcast_to/reshape; then 1-4
 * outputs (the last value, values nothing uses, values used inside
 * elementwise chains, literals, inputs) and, for about a third of the
 * graphs, the gradient of a scalar f64 cost with respect to the f64
 * inputs (cost and gradients are outputs).  A rough magnitude bound per
 * value (operands are passed through tanh when a sum or product could
 * exceed it) keeps reassociation within the tolerance, values that
 * reassociation may perturb never feed a comparison or a cast to an
 * integer (a flipped comparison is rounding, not a bug), and NaN or
 * infinity is never cast to an integer (undefined in C).
 *
 * $KILN_FUZZ_N sets the number of graphs (default 300) and
 * $KILN_FUZZ_FIRST the first seed (default 1); $KILN_FUZZ_SEED runs only
 * that seed and prints its graph and inputs (as `kiln run -i` arguments),
 * to reproduce a failure; $KILN_FUZZ_BACKENDS (e.g. "interp" or
 * "interp,tcc") limits the backends.
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/kiln.h>
#include <kiln/graph.h>
#include <kiln/policy.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "ir.h"
#include "tap.h"

/* ---- regression cases found by the fuzzer (run first) ------------------- */

/* pairwise leaves weak literals of an f64 n-ary mul/add uncast
 * (core/rewrite/pairwise.c, `lit_ok`: "a weak literal needs no cast in an
 * f64 or i64 sum"), but when the balanced tree puts two weak integer (or
 * bool) literals in one subtree, that subtree computes in i64, not f64:
 * mul(x, a, b) -> mul(x, mul(a, b)) with mul(a, b) a weak i64 product.
 * It wraps (3037000500^2 > 2^63: y and w change sign) and has no -0
 * (mul(0, -1) is 0, so z is +0 instead of -0).  canonicalize makes such
 * n-ary nodes from ordinary binary chains (y, z); w is written n-ary.
 * Found as seeds 7876, 8463 and 17697 (signed zeros). */
static const char REG_PAIRWISE_WEAK_INTS[] =
    "kiln 1\n"
    "graph pairwise_weak_ints\n"
    "  input x: f64\n"
    "  output y = mul(mul(x, 3037000500), 3037000500)\n"
    "  output z = mul(mul(x, 0), -1)\n"
    "  output w = mul(x, 3037000500, 3037000500)\n"
    "end\n";

/* ---- PRNG (splitmix64) -------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int rint_(rng *r, int n)  /* [0, n) */
{
    return (int)(rnext(r) % (uint64_t)n);
}

static double runif(rng *r)  /* [0, 1) */
{
    return (double)(rnext(r) >> 11) * 0x1p-53;
}

static int chance(rng *r, double p)
{
    return runif(r) < p;
}

/* ---- the generator ------------------------------------------------------ */

#define MAX_NODES 4096
#define MAX_POOL 512
#define MAX_IN 6
#define MAX_REC 256

/* a step that can be repeated (for cse) */
typedef struct recipe {
    int sub;                /* 1: subtensor */
    char op[16];
    int n;
    kiln_value in[8];
    int na;
    kiln_attr at[2];
    int64_t ints[2][KILN_MAX_RANK];
    int nidx;
    kiln_index idx[KILN_MAX_RANK];
} recipe;

typedef struct gen {
    kiln_graph *g;
    rng r;
    int bad;               /* the builder refused a call */
    char why[300];
    int n_in;
    kiln_value in[MAX_IN];
    int special[MAX_IN];   /* input gets NaN/inf/zeros among its values */
    kiln_value pool[MAX_POOL];
    int np;
    /* per node: a bound on |value| for finite values; whether it is
     * finite; whether reassociation or fusion may perturb its rounding */
    double mag[MAX_NODES];
    unsigned char fin[MAX_NODES], rea[MAX_NODES];
    recipe rec[MAX_REC];
    int nrec;
    int n_grad_wrt, grad_failed;
} gen;

static const kiln_type *ty(const gen *G, kiln_value v)
{
    return &G->g->nodes[v].type;
}

static int is_float(kiln_dtype d)
{
    return d == KILN_F64 || d == KILN_F32;
}

static int64_t numel(const kiln_type *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

static double cap_of(kiln_dtype d)
{
    return d == KILN_F32 ? 100.0 : 1e4;
}

static int fail(gen *G, const char *what, const kiln_err *e)
{
    if (!G->bad)
        snprintf(G->why, sizeof G->why, "%s", e ? e->message : what);
    G->bad = 1;
    return -1;
}

/* node props from the inputs (default: max magnitude, finite when all
 * are, perturbed when any is) */
static void props(gen *G, kiln_value v, int n, const kiln_value *in)
{
    if (v < 0 || v >= MAX_NODES) {
        fail(G, "generator", NULL);
        return;
    }
    double m = 0;
    int f = 1, re = 0;
    for (int i = 0; i < n; i++) {
        if (G->mag[in[i]] > m)
            m = G->mag[in[i]];
        f &= G->fin[in[i]];
        re |= G->rea[in[i]];
    }
    G->mag[v] = m;
    G->fin[v] = (unsigned char)f;
    G->rea[v] = (unsigned char)re;
}

static void pool_add(gen *G, kiln_value v)
{
    if (v >= 0 && G->np < MAX_POOL)
        G->pool[G->np++] = v;
}

static void record(gen *G, const char *op, int n, const kiln_value *in,
                   const kiln_attr *at, int na)
{
    if (G->nrec >= MAX_REC || n > 8 || na > 2)
        return;
    recipe *R = &G->rec[G->nrec++];
    memset(R, 0, sizeof *R);
    snprintf(R->op, sizeof R->op, "%s", op);
    R->n = n;
    memcpy(R->in, in, sizeof *in * (size_t)n);
    R->na = na;
    for (int i = 0; i < na; i++) {
        R->at[i] = at[i];
        if (at[i].kind == KILN_ATTR_INTS) {
            memcpy(R->ints[i], at[i].ints, sizeof(int64_t) * (size_t)at[i].n);
            R->at[i].ints = R->ints[i];
        }
    }
}

static kiln_value op(gen *G, const char *name, int n, const kiln_value *in,
                     const kiln_attr *at, int na)
{
    if (G->bad)
        return -1;
    kiln_err e = {0, ""};
    kiln_value v = kiln_graph_op(G->g, name, n, in, at, na, &e);
    if (v < 0)
        return fail(G, name, &e);
    props(G, v, n, in);
    if (G->bad)
        return -1;
    record(G, name, n, in, at, na);
    return v;
}

static kiln_value op1(gen *G, const char *name, kiln_value a)
{
    return op(G, name, 1, &a, NULL, 0);
}

static kiln_value op2(gen *G, const char *name, kiln_value a, kiln_value b)
{
    kiln_value in[2] = {a, b};
    return op(G, name, 2, in, NULL, 0);
}

static kiln_value lit(gen *G, double x, int kind)
{
    if (G->bad)
        return -1;
    kiln_err e = {0, ""};
    kiln_value v = kiln_graph_literal(G->g, x, (kiln_literal_kind)kind, &e);
    if (v < 0)
        return fail(G, "literal", &e);
    if (v >= MAX_NODES)
        return fail(G, "generator: too many nodes", NULL);
    G->fin[v] = isfinite(x) != 0;
    G->mag[v] = isfinite(x) ? fabs(x) : 1;
    G->rea[v] = 0;
    return v;
}

/* a random literal: the identities' values most often */
static kiln_value rand_lit(gen *G)
{
    static const double fl[] = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -1.5, 3.0};
    int k = rint_(&G->r, 100);
    if (k < 60)
        return lit(G, fl[rint_(&G->r, 8)], KILN_LIT_FLOAT);
    if (k < 85) {
        static const double il[] = {0, 1, -1, 2, 3};
        return lit(G, il[rint_(&G->r, 5)], KILN_LIT_INT);
    }
    if (k < 95)
        return lit(G, rint_(&G->r, 2), KILN_LIT_BOOL);
    if (k < 97)
        return lit(G, NAN, KILN_LIT_FLOAT);
    return lit(G, chance(&G->r, 0.5) ? INFINITY : -INFINITY, KILN_LIT_FLOAT);
}

static int bcast(const kiln_type *a, const kiln_type *b, kiln_type *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    kiln_type t;
    memset(&t, 0, sizeof t);
    t.rank = r;
    for (int i = 0; i < r; i++) {
        int ia = a->rank - r + i, ib = b->rank - r + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        t.dims[i] = da == 1 ? db : da;
    }
    if (out)
        *out = t;
    return 1;
}

/* a pool value, often one of the last few */
static kiln_value pick(gen *G)
{
    if (G->np == 0)
        return G->in[0];
    if (chance(&G->r, 0.55)) {
        int k = G->np < 5 ? G->np : 5;
        return G->pool[G->np - 1 - rint_(&G->r, k)];
    }
    return G->pool[rint_(&G->r, G->np)];
}

/* a pool value that broadcasts with type t (or a literal) */
static kiln_value pick_compat(gen *G, const kiln_type *t, double p_lit)
{
    if (chance(&G->r, p_lit))
        return rand_lit(G);
    if (chance(&G->r, 0.01))
        return pick(G);  /* unchecked: the builder may refuse it */
    for (int tries = 0; tries < 24; tries++) {
        kiln_value v = pick(G);
        if (bcast(t, ty(G, v), NULL))
            return v;
    }
    return rand_lit(G);
}

/* tanh(v): a value bounded by 1 (keeps sums and products small) */
static kiln_value tame(gen *G, kiln_value v)
{
    kiln_value t = op1(G, "tanh", v);
    if (t >= 0)
        G->mag[t] = 1;
    return t;
}

/* operands not reassociation-sensitive, for a comparison or a cast to a
 * discrete dtype */
static kiln_value pick_exact(gen *G, const kiln_type *t)
{
    for (int tries = 0; tries < 24; tries++) {
        kiln_value v = pick(G);
        if (!G->rea[v] && (!t || bcast(t, ty(G, v), NULL)))
            return v;
    }
    if (!t)
        return G->in[rint_(&G->r, G->n_in)];
    for (int i = 0; i < G->n_in; i++) {
        kiln_value v = G->in[rint_(&G->r, G->n_in)];
        if (bcast(t, ty(G, v), NULL))
            return v;
    }
    return rand_lit(G);
}

/* the compute dtype of a binary arithmetic result, roughly */
static kiln_dtype res_dtype(const gen *G, kiln_value a, kiln_value b)
{
    kiln_dtype x = ty(G, a)->dtype, y = ty(G, b)->dtype;
    if (x == KILN_F32 || y == KILN_F32)
        return KILN_F32;
    return KILN_F64;
}

/* add / sub / mul of a and b with the magnitude kept under the cap */
static kiln_value arith(gen *G, const char *name, kiln_value a, kiln_value b)
{
    int mul = strcmp(name, "mul") == 0;
    for (int k = 0; k < 3 && !G->bad; k++) {
        double cap = cap_of(res_dtype(G, a, b));
        double m = mul ? G->mag[a] * G->mag[b] : G->mag[a] + G->mag[b];
        if (m <= cap)
            break;
        if (G->mag[a] >= G->mag[b])
            a = tame(G, a);
        else
            b = tame(G, b);
    }
    kiln_value v = op2(G, name, a, b);
    if (v >= 0) {
        G->mag[v] = mul ? G->mag[a] * G->mag[b] : G->mag[a] + G->mag[b];
        /* flattening reassociates a float add into an add (mul into mul) */
        const kiln_node *na = &G->g->nodes[a], *nb = &G->g->nodes[b];
        if (strcmp(name, "sub") != 0 && is_float(ty(G, v)->dtype) &&
            (na->op == G->g->nodes[v].op || nb->op == G->g->nodes[v].op))
            G->rea[v] = 1;
    }
    return v;
}

static kiln_value step_binary(gen *G)
{
    static const char *ops[] = {"add", "sub", "mul"};
    kiln_value a = pick(G);
    kiln_value b = pick_compat(G, ty(G, a), 0.3);
    if (chance(&G->r, 0.3)) {
        kiln_value t = a;
        a = b;
        b = t;
    }
    return arith(G, ops[rint_(&G->r, 3)], a, b);
}

/* an add/mul chain: ((a op b) op c) ..., with identity literals */
static kiln_value step_chain(gen *G)
{
    int mul = chance(&G->r, 0.4);
    kiln_value v = pick(G);
    int len = 2 + rint_(&G->r, 5);
    for (int i = 0; i < len && !G->bad; i++) {
        int k = rint_(&G->r, 10);
        if (k < 2) {
            /* an identity of canonicalize's rules (or a near miss) */
            switch (rint_(&G->r, 9)) {
            case 0: v = arith(G, "mul", v, lit(G, 1.0, KILN_LIT_FLOAT)); break;
            case 1: v = arith(G, "mul", lit(G, 1, KILN_LIT_INT), v); break;
            case 2: v = arith(G, "mul", v, lit(G, -1.0, KILN_LIT_FLOAT)); break;
            case 3: v = arith(G, "add", v, lit(G, -0.0, KILN_LIT_FLOAT)); break;
            case 4: v = arith(G, "add", lit(G, 0.0, KILN_LIT_FLOAT), v); break;
            case 5: v = arith(G, "sub", v, lit(G, 0.0, KILN_LIT_FLOAT)); break;
            case 6: v = arith(G, "sub", v, lit(G, -0.0, KILN_LIT_FLOAT)); break;
            case 7: v = op2(G, "true_div", v, lit(G, 1.0, KILN_LIT_FLOAT)); break;
            default: v = arith(G, "add", v, lit(G, 0, KILN_LIT_INT)); break;
            }
            continue;
        }
        kiln_value b = pick_compat(G, ty(G, v), 0.15);
        if (chance(&G->r, 0.3))
            v = arith(G, mul ? "mul" : "add", b, v);
        else
            v = arith(G, mul ? "mul" : "add", v, b);
        if (v >= 0 && chance(&G->r, 0.15))
            pool_add(G, v);  /* a multi-use intermediate */
    }
    return v;
}

/* add / mul of 3-5 operands in one node */
static kiln_value step_nary(gen *G)
{
    int mul = chance(&G->r, 0.4);
    int n = 3 + rint_(&G->r, 3);
    kiln_value in[5];
    in[0] = pick(G);
    kiln_type t = *ty(G, in[0]);
    for (int i = 1; i < n; i++) {
        in[i] = pick_compat(G, &t, 0.2);
        bcast(&t, ty(G, in[i]), &t);
    }
    double cap = 1e4;
    for (int i = 0; i < n; i++)
        if (ty(G, in[i])->dtype == KILN_F32)
            cap = 100;
    for (int k = 0; k < n && !G->bad; k++) {
        double m = mul ? 1 : 0;
        int big = 0;
        for (int i = 0; i < n; i++) {
            m = mul ? m * G->mag[in[i]] : m + G->mag[in[i]];
            if (G->mag[in[i]] > G->mag[in[big]])
                big = i;
        }
        if (m <= cap)
            break;
        in[big] = tame(G, in[big]);
    }
    kiln_value v = op(G, mul ? "mul" : "add", n, in, NULL, 0);
    if (v >= 0) {
        double m = mul ? 1 : 0;
        for (int i = 0; i < n; i++)
            m = mul ? m * G->mag[in[i]] : m + G->mag[in[i]];
        G->mag[v] = m;
        if (is_float(ty(G, v)->dtype))
            G->rea[v] = 1;
    }
    return v;
}

static kiln_value step_unary(gen *G)
{
    kiln_value a = pick(G), v = -1;
    switch (rint_(&G->r, 9)) {
    case 0: v = op1(G, "neg", a); break;
    case 1: v = op1(G, "abs", a); break;
    case 2: {  /* exp of a bounded argument */
        kiln_value m = op2(G, "minimum", a, lit(G, 3.0, KILN_LIT_FLOAT));
        v = op1(G, "exp", m);
        if (v >= 0) {
            G->mag[m] = G->mag[a];
            G->mag[v] = 20.1;
        }
        break;
    }
    case 3: {
        kiln_value s = chance(&G->r, 0.5) ? op1(G, "abs", a)
                                          : op1(G, "square", a);
        if (s >= 0 && G->g->nodes[s].op == KILN_OP_SQUARE)
            G->mag[s] = G->mag[a] * G->mag[a];
        v = op1(G, "log1p", s);
        if (v >= 0)
            G->mag[v] = log1p(G->mag[s]) + 1;
        break;
    }
    case 4: v = tame(G, a); break;
    case 5:
        v = op1(G, "sigmoid", a);
        if (v >= 0)
            G->mag[v] = 1;
        break;
    case 6: {
        kiln_value s = op1(G, "abs", a);
        v = op1(G, "sqrt", s);
        if (v >= 0)
            G->mag[v] = sqrt(G->mag[a]) + 1;
        break;
    }
    case 7: v = op1(G, "neg", op1(G, "neg", a)); break;
    default: {
        /* true_div: by a literal (1, -1, 2, 0.5, rarely 0) or by
         * |b| + 0.5 */
        if (chance(&G->r, 0.5)) {
            static const double d[] = {1.0, -1.0, 2.0, 0.5, 1, -0.0};
            int k = rint_(&G->r, 6);
            if (k == 5 && chance(&G->r, 0.6))
                k = 0;
            if (G->mag[a] * 2 > cap_of(ty(G, a)->dtype))
                a = tame(G, a);
            v = op2(G, "true_div", a,
                    lit(G, d[k], k == 4 ? KILN_LIT_INT : KILN_LIT_FLOAT));
            if (v >= 0) {
                G->mag[v] = d[k] == 0 ? 1 : G->mag[a] / fabs(d[k]);
                if (d[k] == 0)
                    G->fin[v] = 0;
            }
        } else {
            kiln_value b = pick_compat(G, ty(G, a), 0);
            if (G->mag[a] * 2 > cap_of(ty(G, a)->dtype))
                a = tame(G, a);
            kiln_value den =
                op2(G, "add", op1(G, "abs", b), lit(G, 0.5, KILN_LIT_FLOAT));
            v = op2(G, "true_div", a, den);
            if (v >= 0)
                G->mag[v] = G->mag[a] * 2;
        }
        break;
    }
    }
    return v;
}

static kiln_value step_minmax(gen *G)
{
    kiln_value a = pick(G);
    kiln_value b = pick_compat(G, ty(G, a), 0.25);
    return op2(G, chance(&G->r, 0.5) ? "maximum" : "minimum", a, b);
}

static kiln_value step_where(gen *G)
{
    static const char *cmp[] = {"lt", "le", "gt", "ge", "eq", "ne"};
    kiln_value a = pick_exact(G, NULL);
    kiln_value b = chance(&G->r, 0.4) ? rand_lit(G) : pick_exact(G, ty(G, a));
    kiln_value c = op2(G, cmp[rint_(&G->r, 6)], a, b);
    if (c < 0)
        return -1;
    G->mag[c] = 1;
    kiln_type t = *ty(G, c);
    kiln_value x = pick_compat(G, &t, 0.2);
    bcast(&t, ty(G, x), &t);
    kiln_value y = pick_compat(G, &t, 0.3);
    kiln_value in[3] = {c, x, y};
    if (chance(&G->r, 0.1)) {  /* a bool operand as the condition */
        kiln_value nc = op1(G, "not", c);
        in[0] = nc;
    }
    return op(G, "where", 3, in, NULL, 0);
}

static kiln_value step_cast(gen *G)
{
    static const kiln_dtype to[] = {KILN_F64, KILN_F32, KILN_I64, KILN_BOOL,
                                    KILN_I32};
    kiln_dtype d = to[rint_(&G->r, 5)];
    kiln_value a = pick(G);
    if (!is_float(d) && is_float(ty(G, a)->dtype) &&
        (G->rea[a] || !G->fin[a]))
        a = pick_exact(G, NULL);
    if (!is_float(d) && is_float(ty(G, a)->dtype) && !G->fin[a])
        return -2;  /* a cast of NaN or inf to an integer is undefined */
    if (d == KILN_F32 && G->mag[a] > 100)
        a = tame(G, a);
    kiln_attr at = {"dtype", KILN_ATTR_DTYPE, d, 0, 0, NULL, NULL};
    kiln_value v = op(G, "cast", 1, &a, &at, 1);
    if (v >= 0 && !is_float(d))
        G->rea[v] = 0;
    if (v >= 0 && d == KILN_BOOL)
        G->mag[v] = 1;
    return v;
}

/* a literal-only computation (weak; fold evaluates it) */
static kiln_value step_weak(gen *G)
{
    static const char *ops[] = {"add", "sub", "mul", "true_div", "lt",
                                "eq", "maximum"};
    int k = rint_(&G->r, 9);
    kiln_value v;
    if (k < 7) {
        kiln_value a = rand_lit(G), b = rand_lit(G);
        v = op2(G, ops[k], a, b);
        if (v >= 0) {
            G->fin[v] = 0;  /* 1/0 and the like */
            G->mag[v] = 10;
        }
    } else if (k == 7) {
        if (chance(&G->r, 0.5)) {
            kiln_value in[3] = {rand_lit(G), rand_lit(G), rand_lit(G)};
            v = op(G, chance(&G->r, 0.5) ? "add" : "mul", 3, in, NULL, 0);
            if (v >= 0) {
                G->fin[v] = 0;
                G->mag[v] = 30;
            }
        } else {
            v = op1(G, chance(&G->r, 0.5) ? "neg" : "abs", rand_lit(G));
        }
    } else {
        kiln_value c = op2(G, "lt", rand_lit(G), rand_lit(G));
        kiln_value in[3] = {c, rand_lit(G), rand_lit(G)};
        v = op(G, "where", 3, in, NULL, 0);
    }
    return v;
}

static kiln_value step_reduce(gen *G)
{
    static const char *ops[] = {"sum", "max", "mean", "min", "sum", "mean",
                                "prod"};
    const char *name = ops[rint_(&G->r, 7)];
    kiln_value a = pick(G);
    const kiln_type *t = ty(G, a);
    if (t->rank == 0 && chance(&G->r, 0.7)) {
        for (int i = 0; i < 10 && t->rank == 0; i++) {
            a = pick(G);
            t = ty(G, a);
        }
    }
    int is_max = name[1] == 'a' || name[1] == 'i';
    if (is_max && (t->dtype == KILN_BOOL || numel(t) == 0))
        return -2;
    int prod = name[0] == 'p';
    int64_t n = numel(t);
    if (prod && G->mag[a] > 1.5)
        a = tame(G, a);
    else if (!prod && name[1] == 'u' && G->mag[a] * (double)n >
                                            cap_of(t->dtype == KILN_F32
                                                       ? KILN_F32
                                                       : KILN_F64))
        a = tame(G, a);
    if (G->bad)
        return -1;
    t = ty(G, a);
    kiln_attr at[2];
    int na = 0;
    int64_t axes[2];
    if (t->rank > 0 && chance(&G->r, 0.7)) {
        if (t->rank == 2 && chance(&G->r, 0.25)) {
            axes[0] = 0;
            axes[1] = -1;
            at[na++] = (kiln_attr){"axis", KILN_ATTR_INTS, 0, 0, 2, axes, NULL};
        } else {
            int64_t ax = rint_(&G->r, t->rank);
            if (chance(&G->r, 0.3))
                ax -= t->rank;
            at[na++] = (kiln_attr){"axis", KILN_ATTR_INT, ax, 0, 0, NULL, NULL};
        }
    }
    int keep = chance(&G->r, 0.25);
    if (keep)
        at[na++] = (kiln_attr){"keepdims", KILN_ATTR_BOOL, 1, 0, 0, NULL, NULL};
    kiln_value v = op(G, name, 1, &a, at, na);
    if (v >= 0) {
        if (name[1] == 'u')
            G->mag[v] = G->mag[a] * (double)(n ? n : 1);
        if (prod)
            G->mag[v] = 1.5;
        if (!is_max && is_float(ty(G, v)->dtype) && n > 2)
            G->rea[v] = 1;
    }
    if (v >= 0 && keep && ty(G, v)->rank > 0 && chance(&G->r, 0.6)) {
        /* squeeze(R(x, keepdims=true)) (canonicalize): the reduced axes,
         * an axis-less squeeze, or one size-1 axis; the reduction
         * sometimes has other uses */
        const kiln_type *vt = ty(G, v);
        int k = rint_(&G->r, 3);
        kiln_attr sa = {"axis", KILN_ATTR_INT, 0, 0, 0, NULL, NULL};
        int nsa = 0;
        if (k == 0 && na == 2) {
            sa = at[0];
            nsa = 1;
        } else if (k == 2) {
            int64_t ax = rint_(&G->r, vt->rank);
            while (vt->dims[ax] != 1)  /* a reduced axis is one */
                ax = (ax + 1) % vt->rank;
            sa = (kiln_attr){"axis", KILN_ATTR_INT, ax, 0, 0, NULL, NULL};
            nsa = 1;
        }
        if (chance(&G->r, 0.3))
            pool_add(G, v);
        v = op(G, "squeeze", 1, &v, &sa, nsa);
    }
    return v;
}

/* join along an axis of several values whose other dims agree */
static kiln_value join_of(gen *G, kiln_value base, int ax, int k)
{
    const kiln_type *t = ty(G, base);
    kiln_value in[8];
    int n = 0;
    in[n++] = base;
    for (int i = 0; i < k && n < 8; i++) {
        kiln_value c = -1;
        for (int tries = 0; tries < 30 && c < 0; tries++) {
            kiln_value v = pick(G);
            const kiln_type *u = ty(G, v);
            if (u->rank != t->rank)
                continue;
            int okd = 1;
            for (int d = 0; d < t->rank; d++)
                if (d != ax && u->dims[d] != t->dims[d])
                    okd = 0;
            if (okd && (u->dtype == t->dtype || chance(&G->r, 0.3)))
                c = v;
        }
        in[n++] = c >= 0 ? c : base;
    }
    if (chance(&G->r, 0.3)) {  /* shuffle */
        for (int i = n - 1; i > 0; i--) {
            int j = rint_(&G->r, i + 1);
            kiln_value x = in[i];
            in[i] = in[j];
            in[j] = x;
        }
    }
    kiln_attr at = {"axis", KILN_ATTR_INT, ax, 0, 0, NULL, NULL};
    if (t->rank > 1 && chance(&G->r, 0.2))
        at.i = ax - t->rank;
    return op(G, "join", n, in, &at, 1);
}

static kiln_value step_join(gen *G)
{
    kiln_value base = -1;
    for (int tries = 0; tries < 30 && base < 0; tries++) {
        kiln_value v = pick(G);
        if (ty(G, v)->rank >= 1)
            base = v;
    }
    if (base < 0)
        return -2;
    int ax = ty(G, base)->rank == 2 && chance(&G->r, 0.25) ? 1 : 0;
    if (ty(G, base)->dims[ax] > 12)
        return -2;
    if (chance(&G->r, 0.4)) {
        /* nested: an inner join used once (or also elsewhere), along the
         * same axis or (rank 2) sometimes the other one */
        int iax = ty(G, base)->rank == 2 && chance(&G->r, 0.3) ? 1 - ax : ax;
        kiln_value inner = join_of(G, base, iax, rint_(&G->r, 3));
        if (inner < 0)
            return -1;
        if (chance(&G->r, 0.25))
            pool_add(G, inner);
        return join_of(G, inner, ax, 1 + rint_(&G->r, 3));
    }
    return join_of(G, base, ax, 1 + rint_(&G->r, 3));
}

static kiln_value step_slice(gen *G)
{
    kiln_value a = -1;
    for (int tries = 0; tries < 30 && a < 0; tries++) {
        kiln_value v = pick(G);
        if (ty(G, v)->rank >= 1 && numel(ty(G, v)) > 0)
            a = v;
    }
    if (a < 0)
        return -2;
    const kiln_type *t = ty(G, a);
    int n = 1 + rint_(&G->r, t->rank);
    kiln_index idx[KILN_MAX_RANK];
    memset(idx, 0, sizeof idx);
    for (int i = 0; i < n; i++) {
        int64_t d = t->dims[i];
        if (chance(&G->r, 0.3)) {
            idx[i].kind = KILN_INDEX_INT;
            idx[i].start = rint_(&G->r, (int)d);
            if (chance(&G->r, 0.4))
                idx[i].start -= d;
            continue;
        }
        idx[i].kind = KILN_INDEX_SLICE;
        static const int64_t steps[] = {1, 1, 2, -1, -2, 3};
        idx[i].step = steps[rint_(&G->r, 6)];
        idx[i].has_step = chance(&G->r, 0.7) || idx[i].step != 1;
        if (chance(&G->r, 0.6)) {
            idx[i].has_start = 1;
            idx[i].start = rint_(&G->r, (int)d + 1) - (chance(&G->r, 0.3) ? d : 0);
        }
        if (chance(&G->r, 0.5)) {
            idx[i].has_stop = 1;
            idx[i].stop = rint_(&G->r, (int)d + 2) - (chance(&G->r, 0.3) ? d : 0);
        }
    }
    kiln_err e = {0, ""};
    kiln_value v = kiln_graph_subtensor(G->g, a, n, idx, &e);
    if (v < 0)
        return fail(G, "subtensor", &e);
    props(G, v, 1, &a);
    if (G->nrec < MAX_REC) {
        recipe *R = &G->rec[G->nrec++];
        memset(R, 0, sizeof *R);
        R->sub = 1;
        R->n = 1;
        R->in[0] = a;
        R->nidx = n;
        memcpy(R->idx, idx, sizeof idx);
    }
    return v;
}

/* repeat an earlier step (cse), commutative operands sometimes swapped */
static kiln_value step_dup(gen *G)
{
    if (G->nrec == 0)
        return -2;
    recipe R = G->rec[rint_(&G->r, G->nrec)];
    if (R.sub) {
        kiln_err e = {0, ""};
        kiln_value v = kiln_graph_subtensor(G->g, R.in[0], R.nidx, R.idx, &e);
        if (v < 0)
            return fail(G, "subtensor (dup)", &e);
        props(G, v, 1, R.in);
        return v;
    }
    for (int i = 0; i < R.na; i++)
        if (R.at[i].kind == KILN_ATTR_INTS)
            R.at[i].ints = R.ints[i];
    if (R.n == 2 && chance(&G->r, 0.5) &&
        (!strcmp(R.op, "add") || !strcmp(R.op, "mul") || !strcmp(R.op, "eq") ||
         !strcmp(R.op, "ne") || !strcmp(R.op, "maximum"))) {
        kiln_value x = R.in[0];
        R.in[0] = R.in[1];
        R.in[1] = x;
    }
    kiln_value v = op(G, R.op, R.n, R.in, R.at, R.na);
    if (v >= 0) {
        /* the same bound as the original (props() takes the max) */
        double m = 0;
        int mul = !strcmp(R.op, "mul"), add = !strcmp(R.op, "add") ||
                                                 !strcmp(R.op, "sub");
        if (mul || add) {
            m = mul ? 1 : 0;
            for (int i = 0; i < R.n; i++)
                m = mul ? m * G->mag[R.in[i]] : m + G->mag[R.in[i]];
            G->mag[v] = m;
            if (is_float(ty(G, v)->dtype))
                G->rea[v] = 1;
        } else if (!strcmp(R.op, "true_div")) {
            G->mag[v] = 1e300;  /* unknown: keep it out of arithmetic */
            G->fin[v] = 0;
        } else if (!strcmp(R.op, "sum") || !strcmp(R.op, "mean") ||
                   !strcmp(R.op, "prod") || !strcmp(R.op, "exp")) {
            G->mag[v] = 1e300;
        }
        if (G->mag[v] > 1e4)
            v = tame(G, v);
    }
    return v;
}

/* a constant: small, or large (promoted) and then sliced or reduced;
 * sometimes a second constant with the same data (cse merges them) */
static kiln_value step_const(gen *G)
{
    int big = chance(&G->r, 0.5);
    int64_t dims[2] = {big ? 160 : 3, 3};
    int rank = big ? 1 : 1 + rint_(&G->r, 2);
    if (rank == 2)
        dims[0] = 2;
    int64_t n = rank == 1 ? dims[0] : dims[0] * dims[1];
    int k = rint_(&G->r, 10);
    kiln_dtype dt = k < 6 ? KILN_F64 : k < 8 ? KILN_F32 : k < 9 ? KILN_I64
                                                                : KILN_BOOL;
    unsigned char *d = calloc((size_t)n, 8);
    for (int64_t i = 0; i < n; i++) {
        int x = rint_(&G->r, 41) - 20;
        switch (dt) {
        case KILN_F64: ((double *)d)[i] = x / 8.0; break;
        case KILN_F32: ((float *)d)[i] = (float)(x / 8.0); break;
        case KILN_I64: ((int64_t *)d)[i] = x / 8; break;
        default: d[i] = x > 0; break;
        }
    }
    kiln_value c = -1;
    for (int rep = 0; rep < (chance(&G->r, 0.25) ? 2 : 1); rep++) {
        kiln_err e = {0, ""};
        char name[32];
        snprintf(name, sizeof name, "c%d", kiln_graph_n_nodes(G->g));
        c = kiln_graph_const(G->g, name, dt, rank, dims, d, &e);
        if (c < 0) {
            free(d);
            return fail(G, "const", &e);
        }
        if (c >= MAX_NODES) {
            free(d);
            return fail(G, "generator: too many nodes", NULL);
        }
        G->mag[c] = 2.5;
        G->fin[c] = 1;
        G->rea[c] = 0;
        if (rep == 0 && big)
            pool_add(G, c);
    }
    free(d);
    if (!big)
        return c;
    kiln_err e = {0, ""};
    if (chance(&G->r, 0.5)) {
        kiln_index ix = {KILN_INDEX_SLICE, 0, 0, 1, 1, 1, 0};
        ix.start = rint_(&G->r, 150);
        ix.stop = ix.start + 3;
        kiln_value v = kiln_graph_subtensor(G->g, c, 1, &ix, &e);
        if (v < 0)
            return fail(G, "subtensor", &e);
        props(G, v, 1, &c);
        return v;
    }
    kiln_value s = op1(G, dt != KILN_BOOL && chance(&G->r, 0.5) ? "max" : "sum",
                       c);
    if (s >= 0 && G->g->nodes[s].op == KILN_OP_SUM) {
        G->mag[s] = 400;
        G->rea[s] = 1;
    }
    return s;
}

/* a gather from a rank-1 value by a constant index array (repeated and
 * negative indices), or a scatter-add of a value along one (the loops
 * of core/lower/fuse.c take both into their pass; gradients of a gather are
 * scatter-adds) */
static kiln_value step_gather(gen *G)
{
    kiln_value x = -1;
    for (int tries = 0; tries < 24 && x < 0; tries++) {
        kiln_value v = pick(G);
        if (ty(G, v)->rank == 1 && ty(G, v)->dims[0] > 0)
            x = v;
    }
    if (x < 0)
        return -2;
    int64_t len = ty(G, x)->dims[0], n = chance(&G->r, 0.5) ? 160 : 3;
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)n);
    if (!ix)
        return fail(G, "generator: out of memory", NULL);
    for (int64_t i = 0; i < n; i++)
        ix[i] = rint_(&G->r, (int)(2 * len)) - len;   /* [-len, len) */
    kiln_err e = {0, ""};
    char name[32];
    snprintf(name, sizeof name, "i%d", kiln_graph_n_nodes(G->g));
    kiln_value idx = kiln_graph_const(G->g, name, KILN_I64, 1, &n, ix, &e);
    free(ix);
    if (idx < 0 || idx >= MAX_NODES)
        return fail(G, "const", &e);
    G->mag[idx] = (double)len;
    G->fin[idx] = 1;
    G->rea[idx] = 0;
    kiln_attr at = {"axis", KILN_ATTR_INT, 0, 0, 0, NULL, NULL};
    if (chance(&G->r, 0.6) || ty(G, x)->dtype == KILN_BOOL) {
        kiln_value in[2] = {x, idx};
        return op(G, "take", 2, in, &at, 1);
    }
    /* x + scatter of values of the index's shape (a pool value or x's
     * gather) */
    kiln_value v = -1;
    for (int tries = 0; tries < 24 && v < 0; tries++) {
        kiln_value w = pick(G);
        if (ty(G, w)->rank == 1 && ty(G, w)->dims[0] == n &&
            ty(G, w)->dtype != KILN_BOOL)
            v = w;
    }
    if (v < 0) {
        kiln_value in[2] = {x, idx};
        v = op(G, "take", 2, in, &at, 1);
    }
    kiln_value in[3] = {x, idx, v};
    kiln_value s = v < 0 ? -1 : op(G, "advanced_inc_subtensor", 3, in, &at, 1);
    if (s >= 0) {
        G->mag[s] = G->mag[x] + (double)n * G->mag[v];
        G->rea[s] = 1;
    }
    return s;
}

/* shape ops between elementwise ones (fusion boundaries) */
static kiln_value step_shape(gen *G)
{
    kiln_value a = pick(G);
    const kiln_type *t = ty(G, a);
    switch (rint_(&G->r, 4)) {
    case 0:
        if (t->rank == 2)
            return op1(G, "transpose", a);
        /* fall through */
    case 1: {
        if (t->rank >= 2)
            return -2;
        kiln_attr at = {"axis", KILN_ATTR_INT, rint_(&G->r, t->rank + 1), 0, 0,
                        NULL, NULL};
        if (chance(&G->r, 0.3)) {
            /* fill(a, expand_dims(L)), the gradient seed (canonicalize) */
            kiln_value l = rand_lit(G);
            at.i = 0;
            kiln_value in[2] = {a, op(G, "expand_dims", 1, &l, &at, 1)};
            return in[1] < 0 ? -1 : op(G, "fill", 2, in, NULL, 0);
        }
        return op(G, "expand_dims", 1, &a, &at, 1);
    }
    case 2: {
        if (t->rank > 1 || (t->rank == 1 && t->dims[0] != 3 && t->dims[0] != 1))
            return -2;
        int64_t sh[2] = {2, 3};
        kiln_attr at = {"shape", KILN_ATTR_INTS, 0, 0, 2, sh, NULL};
        return op(G, "broadcast_to", 1, &a, &at, 1);
    }
    default: {
        if (t->rank == 0)
            return -2;
        int64_t sh[1] = {-1};
        kiln_attr at = {"shape", KILN_ATTR_INTS, 0, 0, 1, sh, NULL};
        return op(G, "reshape", 1, &a, &at, 1);
    }
    }
}

/* Build graph number `seed` into G; 0 when the builder accepted it. */
static int generate(gen *G, unsigned seed)
{
    memset(G, 0, sizeof *G);
    G->r.s = 0x5eed0000ULL + seed * 0x100000001b3ULL;
    rnext(&G->r);
    kiln_err e = {0, ""};
    char gname[32];
    snprintf(gname, sizeof gname, "fuzz%u", seed);
    G->g = kiln_graph_new(gname, &e);
    if (!G->g)
        return fail(G, "graph_new", &e);
    /* inputs */
    G->n_in = 2 + rint_(&G->r, 5);
    static const int64_t shapes[5][2] = {{0, 0}, {3, 0}, {2, 3}, {2, 1}, {1, 3}};
    static const int ranks[5] = {0, 1, 2, 2, 2};
    for (int i = 0; i < G->n_in; i++) {
        int k = rint_(&G->r, 100);
        kiln_dtype dt = k < 63 ? KILN_F64 : k < 78 ? KILN_F32
                        : k < 89 ? KILN_I64 : k < 92 ? KILN_I32 : KILN_BOOL;
        if (i == 0)
            dt = KILN_F64;
        int s = rint_(&G->r, 100);
        s = s < 28 ? 0 : s < 55 ? 1 : s < 80 ? 2 : s < 90 ? 3 : 4;
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        G->in[i] = kiln_graph_input(G->g, name, dt, ranks[s], shapes[s], &e);
        if (G->in[i] < 0)
            return fail(G, "input", &e);
        G->special[i] = is_float(dt) && chance(&G->r, 0.12);
        G->mag[G->in[i]] = dt == KILN_F64 || dt == KILN_F32 ? 2 : 3;
        G->fin[G->in[i]] = !G->special[i];
        G->rea[G->in[i]] = 0;
        pool_add(G, G->in[i]);
    }
    /* steps */
    int steps = 5 + rint_(&G->r, 36);
    for (int i = 0; i < steps && !G->bad; i++) {
        int k = rint_(&G->r, 100);
        kiln_value v;
        if (k < 18) v = step_binary(G);
        else if (k < 28) v = step_chain(G);
        else if (k < 33) v = step_nary(G);
        else if (k < 45) v = step_unary(G);
        else if (k < 50) v = step_minmax(G);
        else if (k < 56) v = step_where(G);
        else if (k < 61) v = step_cast(G);
        else if (k < 66) v = step_weak(G);
        else if (k < 74) v = step_reduce(G);
        else if (k < 82) v = step_join(G);
        else if (k < 88) v = step_slice(G);
        else if (k < 92) v = step_dup(G);
        else if (k < 94) v = step_gather(G);
        else if (k < 97) v = step_const(G);
        else v = step_shape(G);
        if (v >= 0)
            pool_add(G, v);
    }
    if (G->bad)
        return -1;
    /* outputs: the last value, then values nothing uses (so that most
     * of the graph is live), values other nodes use (an output inside an
     * elementwise chain), sometimes a literal or an input */
    int n_out = 1 + rint_(&G->r, 4);
    int nn = kiln_graph_n_nodes(G->g);
    unsigned char *used = calloc((size_t)nn, 1);
    for (int v = 0; v < nn; v++)
        for (int i = 0; i < G->g->nodes[v].n_in; i++)
            used[G->g->nodes[v].in[i]] = 1;
    kiln_value sinks[MAX_POOL], inner[MAX_POOL];
    int ns = 0, ni = 0;
    for (int i = G->np - 2; i >= 0; i--) {
        int leaf = G->g->nodes[G->pool[i]].op == KILN_OP_INPUT;
        if (!used[G->pool[i]] && !leaf)
            sinks[ns++] = G->pool[i];
        else if (!leaf)
            inner[ni++] = G->pool[i];
    }
    free(used);
    for (int i = 0; i < n_out; i++) {
        kiln_value v = i == 0 ? G->pool[G->np - 1] : pick(G);
        int k = rint_(&G->r, 100);
        if (i == 0)
            ;
        else if (k < 45 && ns > 0)
            v = sinks[rint_(&G->r, ns)];
        else if (k < 85 && ni > 0)
            v = inner[rint_(&G->r, ni)];
        else if (k < 93)
            v = rand_lit(G);
        else if (k < 97)
            v = G->in[rint_(&G->r, G->n_in)];
        char name[16];
        snprintf(name, sizeof name, "o%d", i);
        if (v < 0 || kiln_graph_output(G->g, name, v, &e))
            return fail(G, "output", &e);
    }
    /* the gradient of a scalar f64 cost */
    if (chance(&G->r, 0.35)) {
        kiln_value wrt[MAX_IN];
        int nw = 0;
        for (int i = 0; i < G->n_in; i++)
            if (ty(G, G->in[i])->dtype == KILN_F64)
                wrt[nw++] = G->in[i];
        kiln_value src = -1;
        for (int i = G->np - 1; i >= 0 && src < 0; i--) {
            kiln_value v = G->pool[i];
            if (ty(G, v)->dtype == KILN_F64 && !G->g->nodes[v].weak &&
                G->g->nodes[v].op != KILN_OP_INPUT && chance(&G->r, 0.6))
                src = v;
        }
        if (src < 0)
            src = G->in[0];
        kiln_value cost = ty(G, src)->rank == 0 ? src : op1(G, "sum", src);
        if (G->bad)
            return -1;
        kiln_value res[MAX_IN];
        kiln_err ge = {0, ""};
        if (kiln_graph_grad(G->g, cost, nw, wrt, KILN_GRAD_DISCONNECTED_ZERO,
                            res, &ge) == 0) {
            G->n_grad_wrt = nw;
            if (kiln_graph_output(G->g, "cost", cost, &e))
                return fail(G, "output", &e);
            for (int i = 0; i < nw; i++) {
                char name[16];
                snprintf(name, sizeof name, "d%d", i);
                if (kiln_graph_output(G->g, name, res[i], &e))
                    return fail(G, "output", &e);
            }
        } else {
            G->grad_failed = 1;
            snprintf(G->why, sizeof G->why, "grad: %s", ge.message);
        }
    }
    return 0;
}

/* ---- running ------------------------------------------------------------ */

#define MAX_OUT 16
#define N_INSETS 3  /* input sets each compiled function is called at */

typedef struct result {
    int rc;
    char msg[300];
    int n_out;                      /* per input set */
    kiln_tensor t[N_INSETS][MAX_OUT];
    char grads[200];  /* the inputs with a gradient record that
                         kiln_function_check_grad finds: "x0 x2 " */
} result;

static void result_free(result *r)
{
    for (int k = 0; k < N_INSETS; k++)
        for (int i = 0; i < r->n_out; i++)
            free(r->t[k][i].data);
    r->n_out = 0;
}

static kiln_policy *tight;  /* fusion caps 2 inputs / 8 instructions,
                              every constant promoted */

static kiln_function *compile(const kiln_graph *g, const char *backend,
                              const char *passes, kiln_err *err)
{
    kiln_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = backend;
    if (strncmp(passes, "tight:", 6) == 0) {
        o.policy = tight;
        passes += 6;
    }
    o.passes = passes;
    o.quiet = 1;
    o.jobs = 1;
    return kiln_compile(g, &o, err);
}

/* seeded inputs for the graph's inputs: floats mostly in [-2, 2), with
 * 0, -0, 1, -1 among them; NaN and infinities in "special" inputs;
 * integers in [-3, 3]; bools.  Set 1 is mostly zeros of both signs and
 * +-1 (the identities' corner cases). */
static kiln_tensor *make_inputs(const gen *G, unsigned seed, int set)
{
    kiln_tensor *in = calloc(MAX_IN, sizeof *in);
    rng r = {0xabcdef12345ULL * (seed + 7) + 0x1234567ULL * (uint64_t)set};
    for (int i = 0; i < G->n_in; i++) {
        const kiln_type *t = ty(G, G->in[i]);
        in[i].dtype = t->dtype;
        in[i].rank = t->rank;
        memcpy(in[i].shape, t->dims, sizeof(int64_t) * (size_t)t->rank);
        int64_t n = numel(t);
        in[i].data = calloc((size_t)(n ? n : 1), 8);
        for (int64_t k = 0; k < n; k++) {
            double u = runif(&r) * 4 - 2;
            int c = rint_(&r, 100);
            if (set == 1 && c < 70) {
                static const double sp[] = {0.0, -0.0, -0.0, 1.0, -1.0};
                u = sp[c % 5];
            } else if (c < 12) {
                static const double sp[] = {0.0, -0.0, 1.0, -1.0};
                u = sp[c % 4];
            } else if (G->special[i] && c < 30) {
                static const double sp[] = {NAN, INFINITY, -INFINITY};
                u = sp[c % 3];
            }
            switch (t->dtype) {
            case KILN_F64: ((double *)in[i].data)[k] = u; break;
            case KILN_F32: ((float *)in[i].data)[k] = (float)u; break;
            case KILN_I64:
                ((int64_t *)in[i].data)[k] = rint_(&r, set == 1 ? 3 : 7) -
                                             (set == 1 ? 1 : 3);
                break;
            case KILN_I32:
                ((int32_t *)in[i].data)[k] = rint_(&r, 7) - 3;
                break;
            default: ((uint8_t *)in[i].data)[k] = (uint8_t)rint_(&r, 2); break;
            }
        }
    }
    return in;
}

static void free_inputs(kiln_tensor *in)
{
    for (int i = 0; i < MAX_IN; i++)
        free(in[i].data);
    free(in);
}

static void run(const kiln_graph *g, const char *backend, const char *passes,
                kiln_tensor *const *ins, int grads, result *r)
{
    memset(r, 0, sizeof *r);
    kiln_err err = {0, ""};
    kiln_function *f = compile(g, backend, passes, &err);
    if (!f) {
        r->rc = err.code ? err.code : -1;
        snprintf(r->msg, sizeof r->msg, "compile: %s", err.message);
        return;
    }
    int n = kiln_function_n_outputs(f);
    kiln_tensor out[MAX_OUT];
    if (n > MAX_OUT) {
        r->rc = -1;
        snprintf(r->msg, sizeof r->msg, "%d outputs", n);
        kiln_function_free(f);
        return;
    }
    for (int set = 0; set < N_INSETS; set++) {
        r->rc = kiln_function_call(f, ins[set], out, &err);
        if (r->rc) {
            snprintf(r->msg, sizeof r->msg, "call (input set %d): %s", set,
                     err.message);
            result_free(r);
            kiln_function_free(f);
            return;
        }
        r->n_out = n;
        for (int i = 0; i < n; i++) {
            kiln_tensor *t = &r->t[set][i];
            *t = out[i];
            size_t bytes = kiln_dtype_size(out[i].dtype);
            for (int k = 0; k < out[i].rank; k++)
                bytes *= (size_t)out[i].shape[k];
            t->data = malloc(bytes ? bytes : 1);
            memcpy(t->data, out[i].data, bytes);
        }
    }
    const kiln_tensor *in = ins[0];
    if (grads) {
        /* the records survive the passes: every input differentiated
         * still has a checked gradient (which outputs name the cost and
         * the gradient may change: cse can merge another output into
         * either, so only the inputs are compared) */
        kiln_grad_check rows[64];
        int nr = 0;
        unsigned seen = 0;
        if (kiln_function_check_grad(f, in, rows, 64, &nr, &err) != 0)
            snprintf(r->grads, sizeof r->grads, "check-grad failed: %.150s",
                     err.message);
        for (int i = 0; i < nr && i < 64; i++)
            if (rows[i].input[0] == 'x')
                seen |= 1u << (atoi(rows[i].input + 1) & 31);
        for (int i = 0; i < 32; i++)
            if (seen & (1u << i))
                snprintf(r->grads + strlen(r->grads),
                         sizeof r->grads - strlen(r->grads), "x%d ", i);
    }
    kiln_function_free(f);
}

static double elem(const kiln_tensor *t, int64_t k)
{
    switch (t->dtype) {
    case KILN_F64: return ((double *)t->data)[k];
    case KILN_F32: return ((float *)t->data)[k];
    case KILN_I64: return (double)((int64_t *)t->data)[k];
    case KILN_I32: return ((int32_t *)t->data)[k];
    default: return ((uint8_t *)t->data)[k];
    }
}

static int64_t ielem(const kiln_tensor *t, int64_t k)
{
    switch (t->dtype) {
    case KILN_I64: return ((int64_t *)t->data)[k];
    case KILN_I32: return ((int32_t *)t->data)[k];
    default: return ((uint8_t *)t->data)[k];
    }
}

/* b agrees with the reference a (see the header for the tolerances) */
static int same_results(const result *a, const result *b,
                        const unsigned char *via_f32, char *why, size_t n)
{
    if (a->rc != b->rc) {
        snprintf(why, n, "rc %d (%.280s) vs %d (%.280s)", a->rc, a->msg, b->rc,
                 b->msg);
        return 0;
    }
    if (a->n_out != b->n_out) {
        snprintf(why, n, "%d outputs vs %d", a->n_out, b->n_out);
        return 0;
    }
    if (strcmp(a->grads, b->grads) != 0) {
        snprintf(why, n, "gradient records '%s' vs '%s'", a->grads, b->grads);
        return 0;
    }
    for (int j = 0; j < N_INSETS * a->n_out; j++) {
        int i = j % a->n_out, set = j / a->n_out;
        const kiln_tensor *x = &a->t[set][i], *y = &b->t[set][i];
        if (x->dtype != y->dtype || x->rank != y->rank) {
            snprintf(why, n, "output %d: type %s rank %d vs %s rank %d", i,
                     kiln_dtype_name(x->dtype), x->rank,
                     kiln_dtype_name(y->dtype), y->rank);
            return 0;
        }
        int64_t ne = 1;
        for (int k = 0; k < x->rank; k++) {
            if (x->shape[k] != y->shape[k]) {
                snprintf(why, n, "output %d: shape differs at dim %d (%lld "
                         "vs %lld)", i, k, (long long)x->shape[k],
                         (long long)y->shape[k]);
                return 0;
            }
            ne *= x->shape[k];
        }
        int fl = is_float(x->dtype);
        /* an f64 output computed through f32 values has their rounding */
        double tol = x->dtype == KILN_F64 && !(via_f32 && via_f32[i]) ? 1e-9
                                                                     : 1e-4;
        for (int64_t k = 0; k < ne; k++) {
            if (!fl) {
                if (ielem(x, k) == ielem(y, k))
                    continue;
                snprintf(why, n, "input set %d, output %d [%lld]: %lld vs %lld",
                         set, i,
                         (long long)k, (long long)ielem(x, k),
                         (long long)ielem(y, k));
                return 0;
            }
            double u = elem(x, k), v = elem(y, k);
            if (isnan(u) && isnan(v))
                continue;
            if (u == v && (u != 0 || signbit(u) == signbit(v)))
                continue;
            if (u != 0 && v != 0 && isfinite(u) && isfinite(v) &&
                fabs(u - v) <= tol * (1 + fabs(u) + fabs(v)))
                continue;
            if ((u == 0) != (v == 0) && isfinite(u) && isfinite(v) &&
                fabs(u - v) <= tol)
                continue;  /* rounding near zero */
            snprintf(why, n, "input set %d, output %d [%lld]: %.17g vs %.17g",
                     set, i,
                     (long long)k, u, v);
            return 0;
        }
    }
    return 1;
}

/* via[i]: output i depends on an f32 add or mul that reassociation may
 * change (an n-ary one, or one with an operand of the same op in f32), or
 * on an f32 sum, mean or prod (f32 reductions round per block of the
 * iteration, and fusion changes the blocks): its f32 rounding then
 * legitimately differs with the passes, also in an f64 output computed
 * from it */
static void f32_outputs(const kiln_graph *g, unsigned char *via)
{
    unsigned char *f = calloc((size_t)g->n_nodes + 1, 1);
    for (int v = 0; v < g->n_nodes; v++) {
        const kiln_node *nd = &g->nodes[v];
        int nary = nd->op == KILN_OP_ADD || nd->op == KILN_OP_MUL;
        if (nary && nd->type.dtype == KILN_F32) {
            f[v] |= nd->n_in > 2;
            for (int i = 0; i < nd->n_in; i++)
                f[v] |= g->nodes[nd->in[i]].op == nd->op &&
                        g->nodes[nd->in[i]].type.dtype == KILN_F32;
        }
        if ((nd->op == KILN_OP_SUM || nd->op == KILN_OP_MEAN ||
             nd->op == KILN_OP_PROD) &&
            (nd->type.dtype == KILN_F32 ||
             g->nodes[nd->in[0]].type.dtype == KILN_F32))
            f[v] = 1;
        for (int i = 0; i < nd->n_in; i++)
            f[v] |= f[nd->in[i]];
    }
    for (int k = 0; k < g->n_outputs && k < MAX_OUT; k++)
        via[k] = f[g->outputs[k].value];
    free(f);
}

static int have_backend(const char *name)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_graph_new("probe", &err);
    int64_t d = 2;
    kiln_value x = kiln_graph_input(g, "x", KILN_F64, 1, &d, &err);
    kiln_value y = kiln_graph_op(g, "exp", 1, &x, NULL, 0, &err);
    kiln_graph_output(g, "y", y, &err);
    kiln_function *f = compile(g, name, "none", &err);
    int ok_ = f && kiln_function_n_kernels(f) > 0 &&
              strcmp(kiln_function_kernel_backend(f, 0), name) == 0;
    kiln_function_free(f);
    kiln_graph_free(g);
    return ok_;
}

static void print_graph(const kiln_graph *g)
{
    char *s = kiln_graph_print(g, NULL);
    if (!s)
        return;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        diag("  %s", line);
    free(s);
}

/* the regression cases: x = 1, 2.5, 0.75; each pass set that applies
 * against passes none, under every backend */
static void test_regressions(const char **backends, int nb)
{
    kiln_err err = {0, ""};
    kiln_graph *g = kiln_parse_string(REG_PAIRWISE_WEAK_INTS, "regression.kg",
                                      NULL, &err);
    if (!ok(g != NULL, "regression graph parses %s", err.message))
        return;
    static const double xs[N_INSETS] = {1.0, 2.5, 0.75};
    kiln_tensor *ins[N_INSETS];
    for (int k = 0; k < N_INSETS; k++) {
        ins[k] = calloc(MAX_IN, sizeof *ins[k]);
        ins[k][0].dtype = KILN_F64;
        ins[k][0].rank = 0;
        ins[k][0].data = malloc(sizeof(double));
        *(double *)ins[k][0].data = xs[k];
    }
    static const char *sets[] = {"all", "canonicalize,pairwise", "pairwise"};
    for (int b = 0; b < nb; b++) {
        result ref, r;
        run(g, backends[b], "none", ins, 0, &ref);
        for (int p = 0; p < 3; p++) {
            char why[600] = "";
            run(g, backends[b], sets[p], ins, 0, &r);
            ok(ref.rc == 0 && same_results(&ref, &r, NULL, why, sizeof why),
               "regression: pairwise computes weak integer literals of an "
               "f64 mul in f64 (%s, passes %s) %s", backends[b], sets[p],
               ref.rc ? ref.msg : why);
            result_free(&r);
        }
        result_free(&ref);
    }
    for (int k = 0; k < N_INSETS; k++)
        free_inputs(ins[k]);
    kiln_graph_free(g);
}

/* input set `in` as `kiln run` arguments (-i x0=[...]) */
static void print_inputs(const gen *G, const kiln_tensor *in, int set)
{
    char buf[4096];
    int len = snprintf(buf, sizeof buf, "input set %d:", set);
    for (int i = 0; i < G->n_in && len < (int)sizeof buf - 64; i++) {
        const kiln_tensor *t = &in[i];
        int64_t n = 1;
        for (int k = 0; k < t->rank; k++)
            n *= t->shape[k];
        len += snprintf(buf + len, sizeof buf - (size_t)len, " -i x%d=", i);
        /* nested lists for rank 2 */
        int64_t inner = t->rank == 2 ? t->shape[1] : n;
        if (t->rank > 0)
            len += snprintf(buf + len, sizeof buf - (size_t)len, "[");
        for (int64_t k = 0; k < n && len < (int)sizeof buf - 64; k++) {
            if (t->rank == 2 && k % inner == 0)
                len += snprintf(buf + len, sizeof buf - (size_t)len, "%s[",
                                k ? "," : "");
            else if (k)
                len += snprintf(buf + len, sizeof buf - (size_t)len, ",");
            if (is_float(t->dtype))
                len += snprintf(buf + len, sizeof buf - (size_t)len, "%.*g",
                                t->dtype == KILN_F32 ? 9 : 17, elem(t, k));
            else
                len += snprintf(buf + len, sizeof buf - (size_t)len, "%lld",
                                (long long)ielem(t, k));
            if (t->rank == 2 && k % inner == inner - 1)
                len += snprintf(buf + len, sizeof buf - (size_t)len, "]");
        }
        if (t->rank > 0)
            len += snprintf(buf + len, sizeof buf - (size_t)len, "]");
    }
    diag("%s", buf);
}

/* ---- the fuzz loop ------------------------------------------------------ */

/* "tight:" compiles with the tight policy; "random" is a random subset
 * of the passes, drawn per graph */
static const char *pass_sets[] = {
    "all",          "canonicalize", "fold",          "cse",
    "promote",      "join_slices",  "pairwise",      "fuse",
    "-fuse",        "canonicalize,fuse",             "tight:all",
    "random"};
#define N_SETS ((int)(sizeof pass_sets / sizeof pass_sets[0]))
static const char *pass_names[] = {"canonicalize", "fold", "cse", "promote",
                                   "join_slices", "pairwise", "fuse"};

static void random_passes(unsigned seed, char *out, size_t n)
{
    rng r = {0x7a55e5ULL + seed * 0x9e3779b97f4a7c15ULL};
    snprintf(out, n, "%s", chance(&r, 0.3) ? "tight:none" : "none");
    for (int i = 0; i < 7; i++)
        if (chance(&r, 0.5))
            snprintf(out + strlen(out), n - strlen(out), ",+%s",
                     pass_names[i]);
}

typedef struct tally {
    int compared, differ;
} tally;

/* a crash names the graph and the pass set being run */
static char crash_note[200];

static void on_crash(int sig)
{
    static const char head[] = "# CRASH (signal) while running ";
    if (write(1, head, sizeof head - 1) < 0 ||
        write(1, crash_note, strlen(crash_note)) < 0 || write(1, "\n", 1) < 0)
        _exit(128 + sig);
    _exit(128 + sig);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fuzz(const char **backends, int nb, unsigned first, unsigned n,
                 int verbose)
{
    tally tl[3][N_SETS];
    memset(tl, 0, sizeof tl);
    int built = 0, rejected = 0, ran = 0, with_grad = 0, grad_refused = 0;
    int ref_failed[3] = {0, 0, 0};
    int shown = 0;
    char rej_example[3][320];
    int n_rej_ex = 0;
    double t0 = now(), t_backend[3] = {0, 0, 0};
    for (unsigned s = first; s < first + n; s++) {
        gen *G = malloc(sizeof *G);
        int rc = generate(G, s);
        if (rc) {
            rejected++;
            if (n_rej_ex < 3)
                snprintf(rej_example[n_rej_ex++], sizeof rej_example[0],
                         "seed %u: %.290s", s, G->why);
            kiln_graph_free(G->g);
            free(G);
            continue;
        }
        built++;
        with_grad += G->n_grad_wrt > 0;
        grad_refused += G->grad_failed;
        if (verbose)
            print_graph(G->g);
        kiln_tensor *in[N_INSETS];
        for (int k = 0; k < N_INSETS; k++) {
            in[k] = make_inputs(G, s, k);
            if (verbose)
                print_inputs(G, in[k], k);
        }
        unsigned char via_f32[MAX_OUT];
        f32_outputs(G->g, via_f32);
        for (int b = 0; b < nb; b++) {
            double tb = now();
            result ref;
            snprintf(crash_note, sizeof crash_note,
                     "seed %u, backend %s, passes none", s, backends[b]);
            run(G->g, backends[b], "none", in, G->n_grad_wrt > 0, &ref);
            if (ref.rc) {
                ref_failed[b]++;
                if (verbose || ref_failed[b] <= 3)
                    diag("seed %u: %s, passes none fails: %s", s, backends[b],
                         ref.msg);
            } else if (b == 0) {
                ran++;
            }
            char rnd[160];
            random_passes(s, rnd, sizeof rnd);
            for (int p = 0; p < N_SETS; p++) {
                result r;
                char why[600] = "";
                const char *ps = strcmp(pass_sets[p], "random") ? pass_sets[p]
                                                                : rnd;
                snprintf(crash_note, sizeof crash_note,
                         "seed %u, backend %s, passes %s", s, backends[b], ps);
                run(G->g, backends[b], ps, in, G->n_grad_wrt > 0, &r);
                int same = same_results(&ref, &r, via_f32, why, sizeof why);
                if (ref.rc == 0)
                    tl[b][p].compared++;
                if (!same) {
                    tl[b][p].differ++;
                    if (shown < 4 || verbose) {
                        diag("MISMATCH seed %u, backend %s, passes %s vs none:"
                             " %s", s, backends[b], ps, why);
                        if (shown < 2 && !verbose)
                            print_graph(G->g);
                    } else if (shown < 40) {
                        diag("mismatch seed %u, backend %s, passes %s: %s", s,
                             backends[b], ps, why);
                    }
                    shown++;
                }
                result_free(&r);
            }
            result_free(&ref);
            t_backend[b] += now() - tb;
        }
        for (int k = 0; k < N_INSETS; k++)
            free_inputs(in[k]);
        kiln_graph_free(G->g);
        free(G);
    }
    for (int i = 0; i < n_rej_ex; i++)
        diag("rejected by the builder, e.g. %s", rej_example[i]);
    ok(n == 0 || (built > 0 && ran * 10 >= (int)n * 7),
       "%u graphs generated (seeds %u..%u): %d built, %d rejected by the "
       "builder, %d compiled and ran (passes none, interp); %d with "
       "gradients (%d gradients refused)",
       n, first, first + n - 1, built, rejected, ran, with_grad,
       grad_refused);
    for (int b = 0; b < nb; b++) {
        ok(ref_failed[b] * 20 <= built,
           "%s: %d graphs failed to compile or run with passes none "
           "(%.1f s for the backend)", backends[b], ref_failed[b],
           t_backend[b]);
        for (int p = 0; p < N_SETS; p++)
            ok(tl[b][p].differ == 0,
               "%s, passes %s vs none: %d graphs compared, %d differ",
               backends[b], pass_sets[p], tl[b][p].compared, tl[b][p].differ);
    }
    diag("fuzz time %.1f s", now() - t0);
}

int main(void)
{
    const char *backends[3];
    int nb = 0;
    const char *only = getenv("KILN_FUZZ_BACKENDS");  /* e.g. "interp" */
    backends[nb++] = "interp";
    if (only && *only && !strstr(only, "tcc"))
        ok(1, "tcc # SKIP not in $KILN_FUZZ_BACKENDS");
    else if (have_backend("tcc"))
        backends[nb++] = "tcc";
    else
        ok(1, "tcc # SKIP not built");
    if (only && *only && !strstr(only, "llvm"))
        ok(1, "llvm # SKIP not in $KILN_FUZZ_BACKENDS");
    else if (have_backend("llvm"))
        backends[nb++] = "llvm";
    else
        ok(1, "llvm # SKIP not built");
    static const char tight_text[] =
        "kiln_policy: 1\nfusion:\n  max_width: 2\n  max_scalar_ops: 8\n"
        "constants:\n  promote_bytes: 0\n";
    kiln_err perr = {0, ""};
    tight = kiln_policy_load_string(tight_text, strlen(tight_text), NULL,
                                    &perr);
    if (!ok(tight != NULL, "the tight policy loads %s", perr.message))
        return done_testing();
    const char *e = getenv("KILN_FUZZ_N"), *es = getenv("KILN_FUZZ_SEED");
    unsigned n = 300, first = 1;
    if (e && *e)
        n = (unsigned)strtoul(e, NULL, 10);
    if (getenv("KILN_FUZZ_FIRST") && *getenv("KILN_FUZZ_FIRST"))
        first = (unsigned)strtoul(getenv("KILN_FUZZ_FIRST"), NULL, 10);
    if (es && *es) {
        first = (unsigned)strtoul(es, NULL, 10);
        n = 1;
    }
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGFPE, on_crash);
    signal(SIGABRT, on_crash);
    snprintf(crash_note, sizeof crash_note, "the regression cases");
    if (!(es && *es))
        test_regressions(backends, nb);
    fuzz(backends, nb, first, n, es && *es);
    kiln_policy_free(tight);
    return done_testing();
}
