/*
 * blocks.c — a model (or a part of one) evaluated as B cache-sized blocks
 * of rows (issue 30, part p30block; <kiln/model.h> "Blocks",
 * docs/mpi.md "Blocks").
 *
 * Block b of part p of P is part p*B + b of P*B (kiln_model_new_partition):
 * with the split [ceil(T k / K), ceil(T (k+1) / K)) the B blocks of part p
 * cover exactly part p's rows, and only the first block of part 0 has part0__ true, so the
 * blocks' sum is the part's value.  Each block's intermediates (X @ beta,
 * its residuals, the block of X read again by X^T r) then stay in cache
 * instead of streaming the part's whole data twice per gradient.
 *
 * The blocks are made from one clone of the graph whose data are shared
 * by reference (blobs): each block's build copies only its own rows, not
 * the whole data (kiln_ir_clone copies data a graph owns).  Every block
 * compiles the same kernels (the axis is symbolic, the mask is data): B
 * blocks add no compiles.
 */
#include "ir.h"
#include <kiln/model.h>

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* auto blocks: this many bytes of the part's data rows per block */
#define DEFAULT_BLOCK_BYTES (2u << 20)

struct kiln_model_blocks {
    int n;
    kiln_model **m;
};

/* A positive integer from environment variable `name`, else 0. */
static long long env_count(const char *name)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(e, &end, 10);
    return !errno && end && !*end && v > 0 ? v : 0;
}

/* The most blocks a part may have (and $KILN_BLOCKS may ask; the
 * automatic count stops there too: larger data get larger blocks).  A
 * block is a model with its own copy of the kernels' code (~13 memory
 * mappings): ~5,000 blocks exhausted a process's 65,530 mappings (an
 * attack's find: "out of memory", or minutes of CPU). */
#define MAX_BLOCKS 1024

/* $KILN_BLOCKS and $KILN_BLOCK_BYTES, when set, must be integers in
 * range: 0, or KILN_ERR_ARG naming the variable and its value. */
static int env_check(kiln_err *err)
{
    static const struct { const char *name; long long lo, hi; } v[] = {
        {"KILN_BLOCKS", 1, MAX_BLOCKS},
        {"KILN_BLOCK_BYTES", 1, 1LL << 40},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        const char *e = getenv(v[i].name);
        if (!e)
            continue;
        long long x = env_count(v[i].name);
        if (!x || x < v[i].lo || x > v[i].hi)
            return kiln_seterr(err, KILN_ERR_ARG, "model: %s='%s' is not an "
                               "integer from %lld to %lld", v[i].name, e,
                               v[i].lo, v[i].hi);
    }
    return 0;
}

/* 1 when the model's kernels tier up at run time (tiers by the policy, no
 * explicit backend): then automatic blocks are off.  A block's kernel
 * runs 1/B of the part's time and each block's function has its own
 * tier-up trigger (time spent on tier 0), so B blocks tier up B times
 * later, each on its own: 22 blocks of the 10^6 regression ran 2.5x
 * slower than one (docs/mpi.md "Blocks").  (A policy whose `tiers:` is
 * off is not looked at here: pass blocks explicitly.) */
static int tiers_on(const kiln_options *opt)
{
    const char *be = getenv("KILN_BACKEND");
    if (be && *be)
        return 0;
    if (!opt)
        return 1;
    if (opt->backend && *opt->backend)
        return 0;
    return opt->struct_size < offsetof(kiln_options, tiers) + sizeof(int) ||
           opt->tiers == KILN_TIERS_POLICY;
}

/* The axis's rows in g's bound data and their bytes (every shared value
 * with data sized by the axis).  0 rows when none is bound. */
static void bound_rows(const kiln_graph *g, int sym, int64_t *rows,
                       double *bytes)
{
    *rows = 0;
    *bytes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = &g->nodes[i];
        int k = kiln_ir_part_axis_pos(&n->type, sym);
        if (n->op != KILN_OP_SHARED || !n->data || k < 0)
            continue;
        if (n->read_part) {
            /* read as a part's rows (kiln_read_options.part_*): the whole
             * value's rows, and its bytes in proportion */
            *rows = n->read_total;
            if (n->vshape[k] > 0)
                *bytes += (double)n->nbytes * (double)n->read_total /
                          (double)n->vshape[k];
            continue;
        }
        *rows = n->vshape[k];
        *bytes += (double)n->nbytes;
    }
}

int kiln_model_blocks_auto(const kiln_graph *g, const char *data,
                           const kiln_partition *p)
{
    long long forced = env_count("KILN_BLOCKS");
    if (forced)
        return forced > INT_MAX ? INT_MAX : (int)forced;
    if (!g || (data && *data))
        return 1;   /* data not bound yet (JSON): not sized here */
    kiln_partition whole = {NULL, 0, 1};
    int sym;
    kiln_err e = {0, ""};
    if (kiln_ir_part_axis(g, p ? p : &whole, &sym, &e))
        return 1;   /* no axis: the model's build says what is wrong */
    int64_t rows;
    double bytes;
    bound_rows(g, sym, &rows, &bytes);
    int nparts = p && p->nparts > 0 ? p->nparts : 1;
    long long target = env_count("KILN_BLOCK_BYTES");
    if (!target)
        target = DEFAULT_BLOCK_BYTES;
    double b = bytes / nparts / (double)target;
    int64_t share = rows / nparts;
    if (b < 2 || share < 2)
        return 1;
    if (b > (double)share)
        b = (double)share;
    if (b > MAX_BLOCKS)
        b = MAX_BLOCKS;
    if (b > (double)(INT_MAX / nparts))
        b = (double)(INT_MAX / nparts);
    return (int)b;
}

/* A clone of g whose data are shared by reference: what g owns is
 * copied once here, then every block's kiln_ir_clone shares it. */
static kiln_graph *shared_clone(const kiln_graph *g, kiln_err *err)
{
    kiln_graph *w = kiln_ir_clone(g, err);
    if (!w)
        return NULL;
    for (int i = 0; i < w->n_nodes; i++) {
        kiln_node *n = &w->nodes[i];
        if (n->op != KILN_OP_SHARED || !n->data || n->blob)
            continue;
        if (!(n->blob = kiln_blob_new(free, n->data))) {
            kiln_graph_free(w);
            kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
            return NULL;
        }
    }
    return w;
}

kiln_model_blocks *kiln_model_blocks_new(const kiln_graph *g,
                                         const char *logp_output,
                                         const char *data,
                                         const kiln_partition *p,
                                         int blocks,
                                         const kiln_options *opt,
                                         const kiln_read_options *ropt,
                                         kiln_err *err)
{
    kiln_err local;
    if (!err)
        err = &local;
    if (blocks < 0 || blocks > MAX_BLOCKS) {
        kiln_seterr(err, KILN_ERR_ARG, "model: blocks must be 0 (automatic) "
                    "or from 1 to %d, got %d", MAX_BLOCKS, blocks);
        return NULL;
    }
    if (!blocks && env_check(err))
        return NULL;
    int B = blocks ? blocks
                   : tiers_on(opt) && !env_count("KILN_BLOCKS")
                   ? 1 : kiln_model_blocks_auto(g, data, p);
    int nparts = p ? p->nparts : 1, part = p ? p->part : 0;
    if (B > 1 && (nparts < 1 || part < 0 || part >= nparts))
        B = 1;   /* kiln_model_new_partition's error, below */
    if (B > 1 && nparts > INT_MAX / B) {
        kiln_seterr(err, KILN_ERR_ARG, "model: %d blocks of %d parts is "
                    "more than %d parts", B, nparts, INT_MAX);
        return NULL;
    }
    kiln_model_blocks *mb = calloc(1, sizeof *mb);
    if (mb)
        mb->m = calloc((size_t)B, sizeof *mb->m);
    if (!mb || !mb->m) {
        free(mb);
        kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (B == 1) {
        mb->m[0] = p ? kiln_model_new_partition(g, logp_output, data, p, opt,
                                                ropt, err)
                     : kiln_model_new(g, logp_output, data, opt, ropt, err);
        if (!mb->m[0]) {
            kiln_model_blocks_free(mb);
            return NULL;
        }
        mb->n = 1;
        return mb;
    }
    /* data bound in g: shared once; JSON data: parsed by every block */
    kiln_graph *w = NULL;
    if (g && !(data && *data) && !(w = shared_clone(g, err))) {
        kiln_model_blocks_free(mb);
        return NULL;
    }
    for (int b = 0; b < B; b++) {
        kiln_partition q = {p ? p->axis : NULL, part * B + b, nparts * B};
        mb->m[b] = kiln_model_new_partition(w ? w : g, logp_output, data, &q,
                                            opt, ropt, err);
        if (!mb->m[b])
            break;
        mb->n = b + 1;
    }
    kiln_graph_free(w);
    if (mb->n < B) {
        kiln_model_blocks_free(mb);
        return NULL;
    }
    /* every block was built from the same data: a JSON file is read by
     * every block's build, and one that changed between two reads would
     * give a sum of two data sets (an attack's find) */
    uint64_t d0 = kiln_model_data_digest(mb->m[0]);
    for (int b = 1; b < B; b++)
        if (kiln_model_data_digest(mb->m[b]) != d0) {
            kiln_seterr(err, KILN_ERR_IO, "model: the data changed while "
                        "its %d blocks were read (block %d read other data "
                        "than block 0): '%s'", B, b, data ? data : "");
            kiln_model_blocks_free(mb);
            return NULL;
        }
    return mb;
}

int kiln_model_blocks_count(const kiln_model_blocks *mb)
{
    return mb ? mb->n : 0;
}

kiln_model *kiln_model_blocks_model(const kiln_model_blocks *mb, int i)
{
    return mb && i >= 0 && i < mb->n ? mb->m[i] : NULL;
}

const char *kiln_model_blocks_range(const kiln_model_blocks *mb,
                                    int64_t *total, int64_t *begin,
                                    int64_t *end)
{
    int64_t t = 0, b = 0, e = 0, t2, b2, e2;
    const char *axis = NULL;
    if (mb && mb->n) {
        axis = kiln_model_partition_range(mb->m[0], &t, &b, &e);
        kiln_model_partition_range(mb->m[mb->n - 1], &t2, &b2, &e2);
        e = e2;
    }
    if (total)
        *total = t;
    if (begin)
        *begin = b;
    if (end)
        *end = e;
    return axis;
}

int kiln_model_blocks_log_density(const kiln_model_blocks *mb, int jacobian,
                                  const double *unc, double *lp,
                                  double *grad, kiln_err *err)
{
    if (!mb || !lp)
        return kiln_seterr(err, KILN_ERR_ARG, "model: %s is NULL",
                           !mb ? "the blocks" : "lp");
    if (mb->n == 1)
        return kiln_model_log_density(mb->m[0], jacobian, unc, lp, grad,
                                      err);
    int n = kiln_model_n_unc(mb->m[0]);
    double *g = NULL;   /* [one block's gradient | the sum] */
    if (grad && !(g = calloc(2 * (size_t)(n > 0 ? n : 1), sizeof *g)))
        return kiln_seterr(err, KILN_ERR_NOMEM, "out of memory");
    double sum = 0;
    for (int b = 0; b < mb->n; b++) {
        double l = 0;
        int rc = kiln_model_log_density(mb->m[b], jacobian, unc, &l, g, err);
        if (rc) {
            free(g);
            return rc;
        }
        sum += l;
        for (int i = 0; grad && i < n; i++)
            g[n + i] += g[i];
    }
    if (grad)
        memcpy(grad, g + n, sizeof *grad * (size_t)n);
    free(g);
    *lp = sum;
    return 0;
}

int kiln_model_blocks_tier_wait(const kiln_model_blocks *mb,
                                double timeout_seconds)
{
    if (!mb)
        return KILN_ERR_ARG;
    int rc = 0;
    for (int b = 0; b < mb->n && !rc; b++)
        rc = kiln_model_tier_wait(mb->m[b], timeout_seconds);
    return rc;
}

void kiln_model_blocks_free(kiln_model_blocks *mb)
{
    if (!mb)
        return;
    for (int b = 0; b < mb->n; b++)
        kiln_model_free(mb->m[b]);
    free(mb->m);
    free(mb);
}
