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
TUTTI_BUILDER(allreduce_board);
TUTTI_BUILDER(allgather_board);
TUTTI_BUILDER(broadcast_board);
TUTTI_BUILDER(allreduce_ordered);
TUTTI_BUILDER(reduce_ordered);
TUTTI_BUILDER(reducescatter_ordered);
TUTTI_BUILDER(send);
TUTTI_BUILDER(recv);

/* Appends, to the current lane, steps that leave in `dst` the reduction of
 * every rank's block in rank order, ((x0 OP x1) OP x2) OP ..., the
 * accumulator always the left operand (the same bits on every rank, max and
 * min's signed zeros and NaNs included). Peer p's block arrives from p; this
 * rank's own block is read from (own_buf, own_off), which is not dst. */
ncclResult_t tutti_build_accumulate(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                    enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                                    size_t dst_off, size_t bytes);
/* The same in rounds of `round_bytes` (0: one round): each round folds every
 * contribution to its part before the next, so the partial result stays in
 * the cache; the order per element is the same. */
ncclResult_t tutti_build_fold(struct tutti_schedule* s, const struct tutti_coll_args* a,
                              enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                              size_t dst_off, size_t bytes, size_t round_bytes);
/* One round of that fold, over `len` bytes; `keep` (TUTTI_STEP_KEEP or 0)
 * marks the steps whose output is read again; send_peer >= 0: the result
 * also goes to that peer, from the last step. */
ncclResult_t tutti_build_fold_round(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                    enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                                    size_t dst_off, size_t len, int keep, int send_peer);

/* Appends, to the current lane, steps that leave in (dst, dst_off) this
 * rank's block of the reduction, reading every peer's block of its input
 * where it lies (peer p exposes it) and this rank's own at (own_buf,
 * own_off): own OP peer r+1, then OP peer r+2, ... around the ring. Only
 * this rank computes this block, so every rank ends with the same bits
 * without a common order; starting at r+1 spreads the reads over the peers.
 * dst may be the own block exactly (in place): it is read once, first. */
ncclResult_t tutti_build_accumulate_pull(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                         enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                                         size_t dst_off, size_t bytes);

#endif
