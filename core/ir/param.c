/*
 * param.c — model parameters in the graph: `param NAME: TYPE [lower=L]
 * [upper=U]` (kiln_graph_param), and what outputs are to a model
 * (`output tp NAME`, `output gq NAME`).
 *
 * A parameter is an input holding the unconstrained value u and the nodes
 * of Stan's constraint transform from it (Stan Reference Manual,
 * "Constraint transforms"; include/kiln/model.h has the table):
 *
 *   lower L           x = L + exp(u)                  log|J| = sum(u)
 *   upper U           x = U - exp(u)                  log|J| = sum(u)
 *   both              x = L + (U - L) * sigmoid(u)
 *                     log|J| = sum(log(U - L) - softplus(-u) - softplus(u))
 *
 * (log sigmoid(u) + log sigmoid(-u) = -softplus(-u) - softplus(u), which
 * stays finite for large |u|.)  Every node made here is marked with the
 * parameter (kiln_node.param) so the printer writes them back as the one
 * `param` line they came from.
 */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One bound as a node: the named scalar `ref`, or a new literal. */
static kiln_value bound_node(kiln_graph *g, double v, kiln_value ref,
                             kiln_err *err)
{
    if (ref >= 0)
        return ref;
    double ip;
    kiln_literal_kind k = modf(v, &ip) == 0.0 && fabs(v) <= 9007199254740992.0
                              ? KILN_LIT_INT : KILN_LIT_FLOAT;
    return kiln_graph_literal(g, v, k, err);
}

static kiln_value op1(kiln_graph *g, const char *op, kiln_value a,
                      kiln_err *err)
{
    return a < 0 ? -1 : kiln_graph_op(g, op, 1, &a, NULL, 0, err);
}

static kiln_value op2(kiln_graph *g, const char *op, kiln_value a,
                      kiln_value b, kiln_err *err)
{
    kiln_value in[2] = {a, b};
    return a < 0 || b < 0 ? -1 : kiln_graph_op(g, op, 2, in, NULL, 0, err);
}

static int check_ref(kiln_graph *g, const char *name, kiln_value ref,
                     kiln_err *err)
{
    if (ref < 0)
        return 0;
    if (ref >= g->n_nodes)
        return kiln_seterr(err, KILN_ERR_ARG,
                           "param '%s': a bound must be a number or a "
                           "value of the graph", name);
    const kiln_node *n = &g->nodes[ref];
    const char *bn = n->name ? n->name : "(expression)";
    if (n->type.dtype == KILN_BOOL)
        return kiln_seterr(err, KILN_ERR_TYPE,
                           "param '%s': bound '%s' must have a numeric "
                           "dtype, not bool", name, bn);
    if (n->type.rank != 0) {
        char b[128];
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "param '%s': bound '%s' must be a scalar, got "
                           "shape %s", name, bn,
                           kiln_ir_shape_str(g, n->type.rank, n->type.dims,
                                             b, sizeof b));
    }
    return 0;
}

static int push_param(kiln_graph *g, const kiln_param_rec *r, kiln_err *err)
{
    if (g->n_params == g->cap_params) {
        int cap = g->cap_params ? 2 * g->cap_params : 4;
        kiln_param_rec *p = realloc(g->params, sizeof *p * (size_t)cap);
        if (!p)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        g->params = p;
        g->cap_params = cap;
    }
    g->params[g->n_params] = *r;
    if (!(g->params[g->n_params].name = malloc(strlen(r->name) + 1)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    strcpy(g->params[g->n_params].name, r->name);
    g->n_params++;
    return 0;
}

/* The input `name`_unc of a constrained parameter. */
static kiln_value unc_input(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, kiln_err *err)
{
    size_t nl = strlen(name);
    char *uname = malloc(nl + 5);
    if (!uname) {
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return -1;
    }
    memcpy(uname, name, nl);
    memcpy(uname + nl, "_unc", 5);
    if (kiln_graph_lookup(g, name) >= 0) {
        kiln_seterr(err, KILN_ERR_NAME, "duplicate name '%s'", name);
        free(uname);
        return -1;
    }
    kiln_value u = kiln_graph_input(g, uname, dt, rank, dims, err);
    free(uname);
    return u;
}

/* The constrained value x (cast to dt, named `name`) and the scalar
 * log-Jacobian lj (-1: none) of record r, whose nodes are first.. */
static kiln_value finish_param(kiln_graph *g, kiln_param_rec *r, kiln_value x,
                               kiln_value lj, kiln_dtype dt, int first,
                               kiln_err *err)
{
    if (x >= 0 && g->nodes[x].type.dtype != dt) {
        kiln_attr a = {.key = "dtype", .kind = KILN_ATTR_DTYPE, .i = dt};
        x = kiln_graph_op(g, "cast", 1, &x, &a, 1, err);
    }
    if (x < 0 || kiln_graph_set_name(g, x, r->name, err))
        return -1;
    r->value = x;
    r->logjac = lj;
    int idx = g->n_params + 1;
    if (push_param(g, r, err))
        return -1;
    for (int i = first; i < g->n_nodes; i++)
        g->nodes[i].param = idx;
    return x;
}

/* ---- Stan's constraining transforms (kiln_graph_param_transform) ----
 *
 * Each builds the constrained value from the unconstrained input u with
 * ops that have gradients, so the density's gradient comes for free; the
 * formulas are StanHeaders 2.21's stan/math/prim/mat/fun/ *_constrain.hpp
 * (the Stan Reference Manual, "Constraint transforms"), vectorised:
 *
 * simplex K (u: K-1)   z_k = sigmoid(u_k - log(K-1-k)), stick before k
 *                      s_k = prod_{m<k} (1 - z_m) (an exclusive cumsum of
 *                      log(1 - z) = -softplus(adj)), x_k = s_k z_k, x_K =
 *                      s_K; log|J| = sum_k log s_k + log z_k + log(1-z_k)
 * ordered K            x = cumsum([u_0, exp(u_1..)]); log|J| = sum u_1..
 * positive_ordered K   x = cumsum(exp(u)); log|J| = sum u
 * unit_vector K        x = u / |u|; log|J| = -u.u / 2
 * sum_to_zero K (K-1)  Stan >= 2.36's isometric map: w_i = u_i /
 *                      sqrt(i (i+1)), x_{i-1} += sum_{m>=i} w_m, x_i -=
 *                      i w_i (i = 1..K-1); no Jacobian term
 * cholesky_factor_corr K x K (K(K-1)/2): z = tanh(u) placed row by row
 *                      in the strict lower triangle; with w_ij = prod_{m<j}
 *                      (1 - z_im^2) (an exclusive cumsum along the row of
 *                      log1p(-z^2)), x_ij = z_ij sqrt(w_ij), x_ii =
 *                      sqrt(w_ii); log|J| = sum log(1 - z^2) + 1/2 sum_{i>j}
 *                      log w_ij
 * corr_matrix K x K    the same factor with z placed column by column
 *                      (read_corr_L), x = L L^T; log|J| = sum_{i>j} (1 +
 *                      (K-j-2)/2) log(1 - z_ij^2)
 * cholesky_factor_cov M x N (N(N+1)/2 + (M-N)N): rows of u fill the lower
 *                      triangle, exp on the diagonal; log|J| = sum of the
 *                      diagonal's u
 * cov_matrix K x K (K(K+1)/2): L as cholesky_factor_cov, x = L L^T;
 *                      log|J| = K log 2 + sum_k (K-k+1) u_kk (k from 0)
 *
 * The vector transforms apply along the last axis of a value of any rank
 * >= 1 (Stan's `array[K] simplex[K] theta` is f64[K, K] simplex), the
 * unconstrained value's last dim a derived dim (`K-1`) when K is a
 * symbol; the matrix transforms place values with `take` of index
 * constants (static dims) or of indices computed from a K x K grid (one
 * named size K: zeros, cumsum, where, cast). */

static const char *const tr_names[] = {
    NULL, "simplex", "ordered", "positive_ordered", "unit_vector",
    "sum_to_zero", "cholesky_factor_corr", "cholesky_factor_cov",
    "cov_matrix", "corr_matrix"};

const char *kiln_param_transform_name(int tr)
{
    return tr > 0 && tr < (int)(sizeof tr_names / sizeof *tr_names)
               ? tr_names[tr] : NULL;
}

int kiln_param_transform_lookup(const char *name, size_t len)
{
    for (int k = 1; k < (int)(sizeof tr_names / sizeof *tr_names); k++)
        if (strlen(tr_names[k]) == len && memcmp(tr_names[k], name, len) == 0)
            return k;
    return -1;
}

static int is_matrix_tr(int tr)
{
    return tr >= KILN_TRANSFORM_CHOLESKY_FACTOR_CORR;
}

/* The derived symbol `pattern` (with "%s" for the name, at most twice)
 * of the named symbol d: "K-1", "K*(K-1)/2"; a name that is itself an
 * expression is put in parentheses. */
static int64_t sym_expr(kiln_graph *g, int64_t d, const char *pattern)
{
    const char *sn = KILN_DIM_IS_SYM(d) && KILN_SYM_INDEX(d) < g->n_symbols
                         ? g->symbols[KILN_SYM_INDEX(d)] : NULL;
    if (!sn)
        return KILN_DIM_UNKNOWN;
    size_t n = 2 * strlen(sn) + strlen(pattern) + 8;
    char *name = malloc(n), *t = malloc(n);
    int64_t r = KILN_DIM_UNKNOWN;
    if (name && t) {
        snprintf(name, n, kiln_ir_dim_is_expr(sn) ? "(%s)" : "%s", sn);
        snprintf(t, n, pattern, name, name);
        r = kiln_graph_symbol(g, t);
    }
    free(name);
    free(t);
    return r;
}

/* The unconstrained size of a vector's last dim d: d - 1 (static), or the
 * derived symbol "S-1" for a named symbol. */
static int64_t dim_minus1(kiln_graph *g, int64_t d)
{
    return d >= 0 ? d - 1 : sym_expr(g, d, "%s-1");
}

/* The unconstrained input's dims for transform tr of a value of dims. */
static int unc_dims(kiln_graph *g, const char *name, int tr, int rank,
                    const int64_t *dims, int64_t *ud, kiln_err *err)
{
    const char *tn = tr_names[tr];
    char b[128];
    if (is_matrix_tr(tr) ? rank != 2 : rank < 1)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "param '%s': a %s is a %s, got shape %s", name, tn,
                           is_matrix_tr(tr) ? "matrix (rank 2)"
                                            : "vector (rank >= 1: vectors "
                                              "along the last axis)",
                           kiln_ir_shape_str(g, rank, dims, b, sizeof b));
    if (!is_matrix_tr(tr)) {
        int64_t K = dims[rank - 1];
        if (K == 0 || (K < 0 && !(KILN_DIM_IS_SYM(K) &&
                                  g->symbols[KILN_SYM_INDEX(K)])))
            return kiln_seterr(err, KILN_ERR_SHAPE,
                               "param '%s': a %s needs a size of at least 1 "
                               "(a number or a named size), got %s", name, tn,
                               kiln_ir_shape_str(g, rank, dims, b, sizeof b));
        memcpy(ud, dims, sizeof *ud * (size_t)rank);
        if (tr == KILN_TRANSFORM_SIMPLEX || tr == KILN_TRANSFORM_SUM_TO_ZERO)
            ud[rank - 1] = dim_minus1(g, K);
        if (ud[rank - 1] == KILN_DIM_UNKNOWN)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return 0;
    }
    int64_t M = dims[0], N = dims[1];
    if (KILN_DIM_IS_SYM(M) && M == N && g->symbols[KILN_SYM_INDEX(M)]) {
        /* a named size K from data: the input's size is a derived dim */
        ud[0] = sym_expr(g, M, tr == KILN_TRANSFORM_CHOLESKY_FACTOR_CORR ||
                                       tr == KILN_TRANSFORM_CORR_MATRIX
                                   ? "%s*(%s-1)/2" : "%s*(%s+1)/2");
        if (ud[0] == KILN_DIM_UNKNOWN)
            return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (M < 1 || N < 1 || (tr != KILN_TRANSFORM_CHOLESKY_FACTOR_COV && M != N)
        || M < N || M > 4096)
        return kiln_seterr(err, KILN_ERR_SHAPE,
                           "param '%s': a %s needs dims%s, static (1 to "
                           "4096) or one named size K x K, got %s", name, tn,
                           tr == KILN_TRANSFORM_CHOLESKY_FACTOR_COV
                               ? " M x N with M >= N" : " K x K",
                           kiln_ir_shape_str(g, rank, dims, b, sizeof b));
    switch (tr) {
    case KILN_TRANSFORM_CHOLESKY_FACTOR_CORR:
    case KILN_TRANSFORM_CORR_MATRIX:
        ud[0] = N * (N - 1) / 2;
        break;
    case KILN_TRANSFORM_COV_MATRIX:
        ud[0] = N * (N + 1) / 2;
        break;
    default:
        ud[0] = N * (N + 1) / 2 + (M - N) * N;
    }
    return 0;
}

static kiln_value lit(kiln_graph *g, double v, kiln_err *err)
{
    return kiln_graph_literal(g, v, KILN_LIT_FLOAT, err);
}

/* op with one int attribute (axis) or an ints attribute (shape). */
static kiln_value op_axis(kiln_graph *g, const char *op, int n,
                          const kiln_value *in, int64_t axis, kiln_err *err)
{
    for (int i = 0; i < n; i++)
        if (in[i] < 0)
            return -1;
    kiln_attr a = {.key = "axis", .kind = KILN_ATTR_INT, .i = axis};
    return kiln_graph_op(g, op, n, in, &a, 1, err);
}

static kiln_value reshape_to(kiln_graph *g, kiln_value x, int rank,
                             const int64_t *dims, kiln_err *err)
{
    if (x < 0)
        return -1;
    kiln_attr a = {.key = "shape", .kind = KILN_ATTR_INTS, .n = rank,
                   .ints = dims};
    return kiln_graph_op(g, "reshape", 1, &x, &a, 1, err);
}

/* A const of the transform's own (f64 or i64), under a fresh name. */
static kiln_value tr_const(kiln_graph *g, const char *pname, const char *what,
                           kiln_dtype dt, int rank, const int64_t *dims,
                           const void *data, kiln_err *err)
{
    char nm[160];
    snprintf(nm, sizeof nm, "_%.100s_%s", pname, what);
    for (int k = 1; kiln_graph_lookup(g, nm) >= 0; k++)
        snprintf(nm, sizeof nm, "_%.100s_%s%d", pname, what, k);
    return kiln_graph_const(g, nm, dt, rank, dims, data, err);
}

/* join along `axis` */
static kiln_value join_at(kiln_graph *g, int64_t axis, kiln_value a,
                          kiln_value b, kiln_err *err)
{
    kiln_value in[2] = {a, b};
    return op_axis(g, "join", 2, in, axis, err);
}

/* sum over `axis`, kept as a dim of 1 */
static kiln_value sum_keep(kiln_graph *g, kiln_value x, int64_t axis,
                           kiln_err *err)
{
    if (x < 0)
        return -1;
    kiln_attr a[2] = {{.key = "axis", .kind = KILN_ATTR_INTS, .n = 1,
                       .ints = &axis},
                      {.key = "keepdims", .kind = KILN_ATTR_BOOL, .i = 1}};
    return kiln_graph_op(g, "sum", 1, &x, a, 2, err);
}

/* take(join(v, pad), idx): idx an i64 matrix of positions in v, and
 * len(v) + k for pad[k]. */
static kiln_value place(kiln_graph *g, kiln_value v, kiln_value pad,
                        kiln_value idx, kiln_err *err)
{
    kiln_value in[2] = {join_at(g, 0, v, pad, err), idx};
    if (in[0] < 0 || idx < 0)
        return -1;
    return op_axis(g, "take", 2, in, 0, err);
}

/* The index or weight matrix `ia` (static dims) as a const, freeing ia. */
static kiln_value grid_const(kiln_graph *g, const char *pname,
                             const char *what, kiln_dtype dt, int rank,
                             const int64_t *dims, void *ia, kiln_err *err)
{
    kiln_value c = ia ? tr_const(g, pname, what, dt, rank, dims, ia, err)
                      : (kiln_seterr(err, KILN_ERR_NOMEM, "out of memory"),
                         -1);
    free(ia);
    return c;
}

/* A K x K grid of a named size K, computed at run time: row and column
 * indices (f64) and K as a K x 1 column. */
typedef struct grid {
    kiln_value I, J, K;
} grid;

static int dyn_grid(kiln_graph *g, const int64_t *dims, grid *gr,
                    kiln_err *err)
{
    kiln_attr a = {.key = "shape", .kind = KILN_ATTR_INTS, .n = 2,
                   .ints = dims};
    kiln_value z = kiln_graph_op(g, "zeros", 0, NULL, &a, 1, err);
    kiln_value ones = op2(g, "fill", z, lit(g, 1, err), err);
    gr->I = op2(g, "sub", op_axis(g, "cumsum", 1, &ones, 0, err),
                lit(g, 1, err), err);
    gr->J = op2(g, "sub", op_axis(g, "cumsum", 1, &ones, 1, err),
                lit(g, 1, err), err);
    gr->K = sum_keep(g, ones, 1, err);
    return gr->I < 0 || gr->J < 0 || gr->K < 0 ? -1 : 0;
}

/* Arithmetic on grid values (f64; exact integers below 2^53). */
#define GA(a, b) op2(g, "add", (a), (b), err)
#define GS(a, b) op2(g, "sub", (a), (b), err)
#define GM(a, b) op2(g, "mul", (a), (b), err)
#define GH(a) op2(g, "mul", (a), lit(g, 0.5, err), err)
#define GL(v) lit(g, (v), err)

static kiln_value where3(kiln_graph *g, kiln_value c, kiln_value a,
                         kiln_value b, kiln_err *err)
{
    kiln_value in[3] = {c, a, b};
    return c < 0 || a < 0 || b < 0 ? -1
                                   : kiln_graph_op(g, "where", 3, in, NULL, 0,
                                                   err);
}

static kiln_value to_i64(kiln_graph *g, kiln_value x, kiln_err *err)
{
    kiln_attr a = {.key = "dtype", .kind = KILN_ATTR_DTYPE, .i = KILN_I64};
    return x < 0 ? -1 : kiln_graph_op(g, "cast", 1, &x, &a, 1, err);
}

/* The strict lower triangle of a K x K CPC matrix from u: *zf (z, 1 on the
 * diagonal, 0 above) and *lm (log(1 - z^2), 0 elsewhere); column-major
 * placement for corr_matrix, row-major for cholesky_factor_corr. */
static int cpc_mats(kiln_graph *g, const char *pname, kiln_value u,
                    const int64_t *dims, const grid *gr, int colmajor,
                    kiln_value *zf, kiln_value *lm, kiln_value *l1,
                    kiln_err *err)
{
    int64_t K = dims[0], two = 2;
    kiln_value idx;
    if (!gr) {
        int64_t n = K * (K - 1) / 2;
        int64_t *ia = malloc(sizeof *ia * (size_t)(K * K));
        for (int64_t i = 0; ia && i < K; i++)
            for (int64_t j = 0; j < K; j++)
                ia[i * K + j] = i == j ? n + 1 : j > i ? n
                                : colmajor ? j * (2 * K - j - 1) / 2 +
                                                 (i - j - 1)
                                           : i * (i - 1) / 2 + j;
        idx = grid_const(g, pname, "cpc", KILN_I64, 2, dims, ia, err);
    } else {
        kiln_value I = gr->I, J = gr->J, Kc = gr->K;
        kiln_value n = GH(GM(Kc, GS(Kc, GL(1))));
        kiln_value pos = colmajor
            ? GA(GH(GM(J, GS(GS(GM(GL(2), Kc), J), GL(1)))),
                 GS(GS(I, J), GL(1)))
            : GA(GH(GM(I, GS(I, GL(1)))), J);
        idx = to_i64(g, where3(g, op2(g, "gt", I, J, err), pos,
                               where3(g, op2(g, "eq", I, J, err),
                                      GA(n, GL(1)), n, err), err), err);
    }
    static const double zpad[2] = {0, 1}, lpad[2] = {0, 0};
    kiln_value z = op1(g, "tanh", u, err);
    *l1 = op1(g, "log1p", op1(g, "neg", op2(g, "mul", z, z, err), err), err);
    *zf = place(g, z, tr_const(g, pname, "zpad", KILN_F64, 1, &two, zpad,
                               err), idx, err);
    *lm = place(g, *l1, tr_const(g, pname, "lpad", KILN_F64, 1, &two, lpad,
                                 err), idx, err);
    return *zf < 0 || *lm < 0 ? -1 : 0;
}

/* L of cholesky_factor_cov / cov_matrix, M x N; *ud gets the diagonal's
 * unconstrained values (N). */
static kiln_value chol_fill(kiln_graph *g, const char *pname, kiln_value u,
                            const int64_t *dims, const grid *gr,
                            kiln_value *ud, kiln_err *err)
{
    int64_t M = dims[0], N = dims[1], one = 1;
    kiln_value idx, dc;
    if (!gr) {
        int64_t P = N * (N + 1) / 2 + (M - N) * N;
        int64_t *ia = malloc(sizeof *ia * (size_t)(M * N));
        int64_t *dp = malloc(sizeof *dp * (size_t)N);
        for (int64_t m = 0; dp && m < N; m++)
            dp[m] = m * (m + 3) / 2;
        for (int64_t m = 0; ia && m < M; m++)
            for (int64_t k = 0; k < N; k++)
                ia[m * N + k] = m >= N ? N * (N + 1) / 2 + (m - N) * N + k
                                : k < m ? m * (m + 1) / 2 + k
                                : k == m ? P + m : P + N;
        idx = grid_const(g, pname, "tri", KILN_I64, 2, dims, ia, err);
        dc = grid_const(g, pname, "diag", KILN_I64, 1, &N, dp, err);
    } else {
        /* square, K a symbol: the strict lower triangle from u and the
         * diagonal from exp(u_kk), placed apart (a join's gradient takes
         * one input of a symbolic size) and added */
        static const double zero = 0;
        kiln_value I = gr->I, J = gr->J, Kc = gr->K;
        kiln_value lower = op2(g, "gt", I, J, err);
        kiln_value diag = op2(g, "eq", I, J, err);
        idx = to_i64(g, where3(g, lower, GA(GH(GM(I, GA(I, GL(1)))), J),
                               GH(GM(Kc, GA(Kc, GL(1)))), err), err);
        kiln_index r0 = {.kind = KILN_INDEX_INT, .start = 0};
        kiln_value m = kiln_graph_subtensor(g, J, 1, &r0, err);
        dc = to_i64(g, GH(GM(m, GA(m, GL(3)))), err);
        kiln_value in[2] = {u, dc};
        *ud = dc < 0 ? -1 : op_axis(g, "take", 2, in, 0, err);
        kiln_value z1 = tr_const(g, pname, "zero", KILN_F64, 1, &one, &zero,
                                 err);
        kiln_value off = place(g, u, z1, idx, err);
        kiln_value dg = place(g, op1(g, "exp", *ud, err), z1,
                              to_i64(g, where3(g, diag, I, Kc, err), err),
                              err);
        return GA(off, dg);
    }
    static const double zero = 0;
    kiln_value in[2] = {u, dc};
    *ud = dc < 0 ? -1 : op_axis(g, "take", 2, in, 0, err);
    kiln_value tail = join_at(g, 0, op1(g, "exp", *ud, err),
                              tr_const(g, pname, "zero", KILN_F64, 1, &one,
                                       &zero, err), err);
    return place(g, u, tail, idx, err);
}

static kiln_value self_outer(kiln_graph *g, kiln_value L, kiln_err *err)
{
    return op2(g, "matmul", L, op1(g, "transpose", L, err), err);
}

/* The transform's constrained value from u, and *lj (-1: none). */
static kiln_value build_transform(kiln_graph *g, const char *pname, int tr,
                                  kiln_value u, int rank, const int64_t *dims,
                                  kiln_value *lj, kiln_err *err)
{
    kiln_value x = -1;
    int64_t ax = rank - 1;      /* the vector transforms' axis */
    *lj = -1;
    switch (tr) {
    case KILN_TRANSFORM_SIMPLEX: {
        /* Stan's stick breaking: z_k = inv_logit(u_k - log(K-1-k)),
         * log z = adj - softplus(adj) = adj + log(1 - z) in the
         * log-Jacobian (one softplus per element, not two: softplus(-a) =
         * softplus(a) - a) */
        int64_t n = dims[ax] - 1;    /* u's length on the axis */
        kiln_value off;
        if (n > 0) {                 /* static K: the offsets as a const */
            double *ov = malloc(sizeof *ov * (size_t)n);
            for (int64_t k = 0; ov && k < n; k++)
                ov[k] = log((double)(n - k));
            off = grid_const(g, pname, "off", KILN_F64, 1, &n, ov, err);
        } else {
            kiln_value ones = op2(g, "fill", u, lit(g, 1, err), err);
            kiln_value cnt = op_axis(g, "cumsum", 1, &ones, ax, err);
            kiln_value tot = sum_keep(g, ones, ax, err);
            off = op1(g, "log", op2(g, "sub", op2(g, "add", tot,
                                                  lit(g, 1, err), err),
                                    cnt, err), err);
        }
        kiln_value adj = op2(g, "sub", u, off, err);
        kiln_value l1z = op1(g, "neg", op1(g, "softplus", adj, err), err);
        kiln_value lz = op2(g, "add", adj, l1z, err);
        kiln_value ls = op2(g, "sub", op_axis(g, "cumsum", 1, &l1z, ax, err),
                            l1z, err);
        /* x_k = exp(ls) z: z from sigmoid, not exp(lz) (lz = adj + l1z
         * cancels when adj is large; sigmoid's exp is the one softplus's
         * gradient needs, so it is shared) */
        kiln_value head = op2(g, "mul", op1(g, "exp", ls, err),
                              op1(g, "sigmoid", adj, err), err);
        kiln_value last = op1(g, "exp", sum_keep(g, l1z, ax, err), err);
        x = reshape_to(g, join_at(g, ax, head, last, err), rank, dims, err);
        *lj = op1(g, "sum", op2(g, "add", ls, op2(g, "add", lz, l1z, err),
                                err), err);
        break;
    }
    case KILN_TRANSFORM_ORDERED: {
        kiln_index i0[KILN_MAX_RANK], rest[KILN_MAX_RANK];
        memset(i0, 0, sizeof i0);
        for (int k = 0; k < rank; k++)
            i0[k].kind = KILN_INDEX_SLICE;
        memcpy(rest, i0, sizeof rest);
        i0[ax].kind = KILN_INDEX_INT;
        rest[ax].start = 1;
        rest[ax].has_start = 1;
        kiln_value first = kiln_graph_subtensor(g, u, rank, i0, err);
        kiln_value v = first < 0 ? -1
                       : kiln_graph_set_subtensor(g, op1(g, "exp", u, err),
                                                  rank, i0, first, 0, err);
        x = op_axis(g, "cumsum", 1, &v, ax, err);
        kiln_value tail = kiln_graph_subtensor(g, u, rank, rest, err);
        *lj = op1(g, "sum", tail, err);
        break;
    }
    case KILN_TRANSFORM_POSITIVE_ORDERED: {
        kiln_value e = op1(g, "exp", u, err);
        x = op_axis(g, "cumsum", 1, &e, ax, err);
        *lj = op1(g, "sum", u, err);
        break;
    }
    case KILN_TRANSFORM_UNIT_VECTOR: {
        kiln_value sn = sum_keep(g, op2(g, "mul", u, u, err), ax, err);
        x = op2(g, "true_div", u, op1(g, "sqrt", sn, err), err);
        *lj = op2(g, "mul", lit(g, -0.5, err), op1(g, "sum", sn, err), err);
        break;
    }
    case KILN_TRANSFORM_SUM_TO_ZERO: {
        /* nn = 1..n on the axis and sqrt(nn (nn + 1)): consts when the
         * size is static (exact integers, correctly rounded sqrt: the
         * values the graph would compute) */
        int64_t n = dims[ax] - 1;
        kiln_value nn, den;
        if (n > 0) {
            double *nv = malloc(sizeof *nv * (size_t)n);
            double *dv = malloc(sizeof *dv * (size_t)n);
            for (int64_t k = 0; nv && dv && k < n; k++) {
                nv[k] = (double)(k + 1);
                dv[k] = sqrt(nv[k] * (nv[k] + 1));
            }
            if (!nv || !dv) {
                free(nv);
                free(dv);
                nv = dv = NULL;
            }
            nn = grid_const(g, pname, "nn", KILN_F64, 1, &n, nv, err);
            den = grid_const(g, pname, "den", KILN_F64, 1, &n, dv, err);
        } else {
            kiln_value ones = op2(g, "fill", u, lit(g, 1, err), err);
            nn = op_axis(g, "cumsum", 1, &ones, ax, err);
            den = op1(g, "sqrt", op2(g, "mul", nn,
                                     op2(g, "add", nn, lit(g, 1, err), err),
                                     err), err);
        }
        kiln_value w = op2(g, "true_div", u, den, err);
        kiln_value cw = op_axis(g, "cumsum", 1, &w, ax, err);
        kiln_value tot = sum_keep(g, w, ax, err);
        kiln_value S = op2(g, "add", op2(g, "sub", tot, cw, err), w, err);
        kiln_value z0 = op2(g, "fill", tot, lit(g, 0, err), err);
        x = reshape_to(g, op2(g, "sub", join_at(g, ax, S, z0, err),
                              join_at(g, ax, z0, op2(g, "mul", nn, w, err),
                                      err), err), rank, dims, err);
        break;
    }
    case KILN_TRANSFORM_CHOLESKY_FACTOR_CORR:
    case KILN_TRANSFORM_CORR_MATRIX: {
        int64_t K = dims[0];
        int cm = tr == KILN_TRANSFORM_CORR_MATRIX;
        kiln_value zf = -1, lm = -1, l1 = -1;
        grid gr;
        if ((K < 0 && dyn_grid(g, dims, &gr, err)) ||
            cpc_mats(g, pname, u, dims, K < 0 ? &gr : NULL, cm, &zf, &lm,
                     &l1, err))
            return -1;
        kiln_value logw = op2(g, "sub", op_axis(g, "cumsum", 1, &lm, 1, err),
                              lm, err);
        x = op2(g, "mul", zf, op1(g, "exp", op2(g, "mul", lit(g, 0.5, err),
                                                 logw, err), err), err);
        kiln_value wc;
        if (K >= 0) {
            double *wt = malloc(sizeof *wt * (size_t)(K * K));
            for (int64_t i = 0; wt && i < K; i++)
                for (int64_t j = 0; j < K; j++)
                    wt[i * K + j] = i <= j ? 0
                                    : cm ? 1 + 0.5 * (double)(K - j - 2)
                                         : 0.5;
            wc = grid_const(g, pname, "jw", KILN_F64, 2, dims, wt, err);
        } else {
            kiln_value w = cm ? GA(GL(1), GH(GS(GS(gr.K, gr.J), GL(2))))
                              : GL(0.5);
            wc = where3(g, op2(g, "gt", gr.I, gr.J, err), w, GL(0), err);
        }
        if (cm) {
            *lj = op1(g, "sum", op2(g, "mul", lm, wc, err), err);
            x = self_outer(g, x, err);
        } else {
            *lj = op2(g, "add", op1(g, "sum", l1, err),
                      op1(g, "sum", op2(g, "mul", logw, wc, err), err), err);
        }
        break;
    }
    case KILN_TRANSFORM_CHOLESKY_FACTOR_COV:
    case KILN_TRANSFORM_COV_MATRIX: {
        kiln_value ud = -1;
        int64_t K = dims[0];
        grid gr;
        if (K < 0 && dyn_grid(g, dims, &gr, err))
            return -1;
        x = chol_fill(g, pname, u, dims, K < 0 ? &gr : NULL, &ud, err);
        if (tr == KILN_TRANSFORM_CHOLESKY_FACTOR_COV) {
            *lj = op1(g, "sum", ud, err);
            break;
        }
        kiln_value cc, kl;
        if (K >= 0) {
            double *cf = malloc(sizeof *cf * (size_t)K);
            for (int64_t k = 0; cf && k < K; k++)
                cf[k] = (double)(K - k + 1);
            cc = grid_const(g, pname, "jw", KILN_F64, 1, &K, cf, err);
            kl = GL((double)K * 0.69314718055994530942);
        } else {    /* K - k + 1 from the diagonal's u: k = 0..K-1 */
            kiln_value ones = op2(g, "fill", ud, GL(1), err);
            kiln_value k0 = GS(op_axis(g, "cumsum", 1, &ones, 0, err), GL(1));
            kiln_value Ks = op1(g, "sum", ones, err);
            cc = GA(GS(Ks, k0), GL(1));
            kl = GM(Ks, GL(0.69314718055994530942));
        }
        *lj = op2(g, "add", kl, op1(g, "sum", op2(g, "mul", ud, cc, err),
                                    err), err);
        x = self_outer(g, x, err);
        break;
    }
    default:
        kiln_seterr(err, KILN_ERR_ARG, "param '%s': unknown transform %d",
                    pname, tr);
        return -1;
    }
    if (x < 0 || (tr != KILN_TRANSFORM_SUM_TO_ZERO && *lj < 0))
        return -1;
    return x;
}

kiln_value kiln_graph_param_transform(kiln_graph *g, const char *name,
                                      kiln_dtype dt, int rank,
                                      const int64_t *dims, int transform,
                                      kiln_err *err)
{
    if (!g || !name || (rank > 0 && !dims)) {
        kiln_seterr(err, KILN_ERR_ARG, "param: NULL argument");
        return -1;
    }
    if (!kiln_param_transform_name(transform)) {
        kiln_seterr(err, KILN_ERR_ARG, "param '%s': unknown transform %d",
                    name, transform);
        return -1;
    }
    if (dt != KILN_F64 && dt != KILN_F32) {
        kiln_seterr(err, KILN_ERR_TYPE,
                    "param '%s': dtype %s: a parameter is f64 or f32", name,
                    kiln_dtype_name(dt));
        return -1;
    }
    int64_t ud[KILN_MAX_RANK];
    if (unc_dims(g, name, transform, rank, dims, ud, err))
        return -1;
    kiln_param_rec r = {(char *)name, -1, -1, -1, -1, -1, -INFINITY,
                        INFINITY, transform};
    int first = g->n_nodes;
    int urank = is_matrix_tr(transform) ? 1 : rank;
    if ((r.unc = unc_input(g, name, dt, urank, ud, err)) < 0)
        return -1;
    kiln_value lj;
    kiln_value x = build_transform(g, name, transform, r.unc, rank, dims, &lj,
                                   err);
    if (x < 0)
        return -1;
    return finish_param(g, &r, x, lj, dt, first, err);
}

kiln_value kiln_graph_param(kiln_graph *g, const char *name, kiln_dtype dt,
                            int rank, const int64_t *dims, double lower,
                            kiln_value lower_ref, double upper,
                            kiln_value upper_ref, kiln_err *err)
{
    if (!g || !name) {
        kiln_seterr(err, KILN_ERR_ARG, "param: NULL argument");
        return -1;
    }
    if (dt != KILN_F64 && dt != KILN_F32) {
        kiln_seterr(err, KILN_ERR_TYPE,
                    "param '%s': dtype %s: a parameter is f64 or f32", name,
                    kiln_dtype_name(dt));
        return -1;
    }
    if (check_ref(g, name, lower_ref, err) ||
        check_ref(g, name, upper_ref, err))
        return -1;
    if ((lower_ref < 0 && isnan(lower)) || (upper_ref < 0 && isnan(upper))) {
        kiln_seterr(err, KILN_ERR_ARG, "param '%s': a bound is NaN", name);
        return -1;
    }
    int has_lo = lower_ref >= 0 || lower > -INFINITY;
    int has_hi = upper_ref >= 0 || upper < INFINITY;
    if (lower_ref < 0 && upper_ref < 0 && has_lo && has_hi &&
        !(lower < upper)) {
        kiln_seterr(err, KILN_ERR_ARG,
                    "param '%s': lower bound %g is not below the upper "
                    "bound %g", name, lower, upper);
        return -1;
    }
    /* the transform divides by (and the Jacobian logs) upper - lower:
     * a width that overflows gives inf and NaN */
    if (lower_ref < 0 && upper_ref < 0 && has_lo && has_hi &&
        !isfinite(upper - lower)) {
        kiln_seterr(err, KILN_ERR_ARG,
                    "param '%s': upper bound %g minus lower bound %g "
                    "overflows (the width must be finite)", name, upper,
                    lower);
        return -1;
    }
    kiln_param_rec r = {(char *)name, -1, -1, -1, has_lo ? lower_ref : -1,
                        has_hi ? upper_ref : -1, has_lo ? lower : -INFINITY,
                        has_hi ? upper : INFINITY, 0};
    int first = g->n_nodes;
    int idx = g->n_params + 1;
    if (!has_lo && !has_hi) {
        r.unc = r.value = kiln_graph_input(g, name, dt, rank, dims, err);
        if (r.unc < 0)
            return -1;
    } else {
        if ((r.unc = unc_input(g, name, dt, rank, dims, err)) < 0)
            return -1;
        kiln_value u = r.unc, x, lj;
        if (has_lo && has_hi) {
            kiln_value lo = bound_node(g, r.lower, r.lower_ref, err);
            kiln_value hi = bound_node(g, r.upper, r.upper_ref, err);
            kiln_value w = op2(g, "sub", hi, lo, err);
            x = op2(g, "add", lo, op2(g, "mul", w, op1(g, "sigmoid", u, err),
                                      err), err);
            kiln_value sp = op2(g, "add", op1(g, "softplus",
                                              op1(g, "neg", u, err), err),
                                op1(g, "softplus", u, err), err);
            lj = op2(g, "sub", op1(g, "log", w, err), sp, err);
        } else if (has_lo) {
            kiln_value lo = bound_node(g, r.lower, r.lower_ref, err);
            x = op2(g, "add", lo, op1(g, "exp", u, err), err);
            lj = u;
        } else {
            kiln_value hi = bound_node(g, r.upper, r.upper_ref, err);
            x = op2(g, "sub", hi, op1(g, "exp", u, err), err);
            lj = u;
        }
        if (lj >= 0 && rank > 0)
            lj = op1(g, "sum", lj, err);
        if (x < 0 || lj < 0)
            return -1;
        return finish_param(g, &r, x, lj, dt, first, err);
    }
    if (push_param(g, &r, err))
        return -1;
    for (int i = first; i < g->n_nodes; i++)
        g->nodes[i].param = idx;
    return r.value;
}

int kiln_graph_n_params(const kiln_graph *g)
{
    return g ? g->n_params : 0;
}

int kiln_graph_param_info(const kiln_graph *g, int i, const char **name,
                          kiln_value *unc_input, kiln_value *value,
                          kiln_value *log_jacobian)
{
    if (!g || i < 0 || i >= g->n_params)
        return KILN_ERR_ARG;
    const kiln_param_rec *r = &g->params[i];
    if (name)
        *name = r->name;
    if (unc_input)
        *unc_input = r->unc;
    if (value)
        *value = r->value;
    if (log_jacobian)
        *log_jacobian = r->logjac;
    return 0;
}

int kiln_graph_set_output_kind(kiln_graph *g, const char *name, int kind,
                               kiln_err *err)
{
    if (!g || !name)
        return kiln_seterr(err, KILN_ERR_ARG, "output kind: NULL argument");
    if (kind < KILN_OUTPUT_PLAIN || kind > KILN_OUTPUT_GQ)
        return kiln_seterr(err, KILN_ERR_ARG, "output '%s': bad kind %d",
                           name, kind);
    for (int k = 0; k < g->n_outputs; k++)
        if (strcmp(g->outputs[k].name, name) == 0) {
            g->outputs[k].kind = kind;
            return 0;
        }
    return kiln_seterr(err, KILN_ERR_NAME, "no output named '%s'", name);
}

int kiln_graph_output_kind(const kiln_graph *g, const char *name)
{
    if (!g || !name)
        return 0;
    for (int k = 0; k < g->n_outputs; k++)
        if (strcmp(g->outputs[k].name, name) == 0)
            return g->outputs[k].kind;
    return 0;
}
