/* The schedule builders, one per file (allreduce_ring.c, ...), gathered into
 * the algorithm tables by algos.c. */
#ifndef TUTTI_ALGO_BUILDERS_H
#define TUTTI_ALGO_BUILDERS_H

#include "algo/algo.h"

#define TUTTI_BUILDER(name) \
  ncclResult_t tutti_build_##name(const struct tutti_coll_args* a, struct tutti_schedule* s)

TUTTI_BUILDER(allreduce_ring);
TUTTI_BUILDER(allreduce_direct);
TUTTI_BUILDER(allreduce_hier);
TUTTI_BUILDER(allreduce_tree);
TUTTI_BUILDER(broadcast_ring);
TUTTI_BUILDER(broadcast_direct);
TUTTI_BUILDER(reduce_ring);
TUTTI_BUILDER(reduce_direct);
TUTTI_BUILDER(allgather_ring);
TUTTI_BUILDER(allgather_direct);
TUTTI_BUILDER(reducescatter_ring);
TUTTI_BUILDER(reducescatter_direct);
TUTTI_BUILDER(alltoall_direct);
TUTTI_BUILDER(gather_direct);
TUTTI_BUILDER(scatter_direct);
TUTTI_BUILDER(broadcast_pull);
TUTTI_BUILDER(allgather_pull);
TUTTI_BUILDER(reducescatter_pull);
TUTTI_BUILDER(allreduce_pull);
TUTTI_BUILDER(send);
TUTTI_BUILDER(recv);

/* Appends, to the current lane, steps that leave in `dst` the reduction of
 * every rank's block in rank order 0, 1, ..., nranks-1 (the same order on
 * every rank, so that every rank gets the same bits). Peer p's block arrives
 * from p; this rank's own block is read from (own_buf, own_off). */
ncclResult_t tutti_build_accumulate(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                    enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                                    size_t dst_off, size_t bytes);

/* The same in rank order, reading every peer's block where it lies: block
 * p of rank p's buffer `peer_buf` is exposed by p (TUTTI_ALGO_PULL). */
ncclResult_t tutti_build_accumulate_pull(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                         enum tutti_buf own_buf, size_t own_off,
                                         enum tutti_buf peer_buf, enum tutti_buf dst,
                                         size_t dst_off, size_t bytes);

#endif
