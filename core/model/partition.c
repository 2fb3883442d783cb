/*
 * partition.c — data partitions of graphs and models (issue 30;
 * <kiln/graph.h>, <kiln/model.h>, docs/mpi.md).
 *
 * STEP 0: the contract only.  Every function refuses until the partition
 * pass lands.
 */
#include "ir.h"
#include <kiln/model.h>

const char *kiln_graph_partition_axis(const kiln_graph *g)
{
    (void)g;
    return NULL;
}

int kiln_graph_set_partition_axis(kiln_graph *g, const char *axis,
                                  kiln_err *err)
{
    (void)g, (void)axis;
    return kiln_seterr(err, KILN_ERR_ARG, "partition: not implemented yet");
}

int kiln_graph_partition(kiln_graph *g, const kiln_partition *p,
                         kiln_err *err)
{
    (void)g, (void)p;
    return kiln_seterr(err, KILN_ERR_ARG, "partition: not implemented yet");
}

kiln_model *kiln_model_new_partition(const kiln_graph *g,
                                     const char *logp_output,
                                     const char *data,
                                     const kiln_partition *p,
                                     const kiln_options *opt,
                                     const kiln_read_options *ropt,
                                     kiln_err *err)
{
    if (!p || (p->nparts == 1 && p->part == 0))
        return kiln_model_new(g, logp_output, data, opt, ropt, err);
    kiln_seterr(err, KILN_ERR_ARG, "partition: not implemented yet");
    return NULL;
}

const char *kiln_model_partition_range(const kiln_model *m, int64_t *total,
                                       int64_t *begin, int64_t *end)
{
    (void)m;
    if (total)
        *total = 0;
    if (begin)
        *begin = 0;
    if (end)
        *end = 0;
    return NULL;
}
