/* Deterministic reductions (TUTTI_DETERMINISTIC=1): what Ring, Tree and Hier
 * build for allreduce and reduce in that mode (algos.c), so that every
 * element is folded in rank order whichever algorithm runs. Block p of the
 * data (the ring's split) goes straight to rank p, which folds the N
 * contributions in rank order (tutti_build_accumulate): each rank sends and
 * receives (N-1)/N of the data, as in a ring's reduce-scatter. Then the
 * reduced blocks go around the ring (allreduce) or to the root (reduce); a
 * reduce-scatter stops at the fold. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

/* Block p of the input, in bytes: a reduce-scatter's shard p, else the
 * ring's split of the vector. */
static size_t block_off(const struct tutti_coll_args* a, int p) {
  return a->coll == TUTTI_COLL_REDUCESCATTER
             ? (size_t)p * a->count * a->elem_size
             : tutti_block_off(a->count, a->nranks, p) * a->elem_size;
}

static size_t block_len(const struct tutti_coll_args* a, int p) {
  return a->coll == TUTTI_COLL_REDUCESCATTER
             ? a->count * a->elem_size
             : tutti_block_len(a->count, a->nranks, p) * a->elem_size;
}

/* Lanes sending block p of the input to every peer p, then the lane that
 * folds this rank's block into (dst, dst_off), left current. In place the
 * own block is copied aside (scaled) first: the fold overwrites it before
 * its turn comes. */
static ncclResult_t scatter_fold(const struct tutti_coll_args* a, struct tutti_schedule* s,
                                 enum tutti_buf dst, size_t dst_off) {
  const int n = a->nranks, r = a->rank;
  for (int p = 0; p < n; p++) {
    if (p != r) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, block_off(a, p), block_len(a, p), p));
    }
  }
  const size_t mo = block_off(a, r), ml = block_len(a, r);
  NCCLCHECK(tutti_sched_lane(s));
  enum tutti_buf own = TUTTI_BUF_SEND;
  size_t own_off = mo;
  if (a->in_place && dst != TUTTI_BUF_SCRATCH) {
    s->scratch_bytes = ml;
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, mo, TUTTI_BUF_SCRATCH, 0, ml));
    own = TUTTI_BUF_SCRATCH;
    own_off = 0;
  }
  return tutti_build_fold(s, a, own, own_off, dst, dst_off, ml, a->chunk_bytes);
}

TUTTI_BUILDER(reducescatter_ordered) {
  if (a->nranks == 1) {
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0,
                    a->count * a->elem_size);
  }
  return scatter_fold(a, s, TUTTI_BUF_RECV, 0);
}

/* Allreduce in one lane, round by round as the ring: each round sends this
 * round's slice of block p to every peer p, folds the own block's slice
 * (the last step also sends it on to `next`), then forwards the other
 * blocks' slices around the ring. A round's sends to one peer are at most
 * two half-queue slices (the input slice, and the all-gather's to `next`),
 * each sent only after the peer read the previous round's: sends lead
 * receives by at most one step, as in the ring (docs/design.md, "Rounds"). */
TUTTI_BUILDER(allreduce_ordered) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size;
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, a->count * es);
  }
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  const size_t chunk = tutti_chunk_elems(a->chunk_bytes, es);
  const size_t rounds = tutti_rounds(tutti_block_len(a->count, n, 0), chunk);
  /* In place, ranks from 2 on receive rank 0's slice over their own before
   * its turn: the own slice is copied aside (scaled) first. */
  const int aside = a->in_place && r >= 2;
  if (aside) {
    s->scratch_bytes = (chunk ? chunk : tutti_block_len(a->count, n, 0)) * es;
  }
  for (size_t k = 0; k < rounds; k++) {
#define SLICE(b, o, l)                                                                       \
  tutti_round_slice(tutti_block_off(a->count, n, (b)), tutti_block_len(a->count, n, (b)), k, \
                    chunk, &(o), &(l))
    size_t o, l;
    for (int j = 1; j < n; j++) {
      const int p = tutti_mod(r, j, n);
      SLICE(p, o, l);
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, o * es, l * es, p));
    }
    SLICE(r, o, l);
    if (aside) {
      NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, o * es, TUTTI_BUF_SCRATCH, 0, l * es));
    }
    NCCLCHECK(tutti_build_fold_round(s, a, aside ? TUTTI_BUF_SCRATCH : TUTTI_BUF_SEND,
                                     aside ? 0 : o * es, TUTTI_BUF_RECV, o * es, l * es,
                                     TUTTI_STEP_KEEP, next));
    for (int j = 1; j < n - 1; j++) {
      SLICE(tutti_mod(r, -j, n), o, l);
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_COPY_SEND, 0, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV,
                          o * es, l * es, next, prev));
    }
    SLICE(tutti_mod(r, 1, n), o, l);
    NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, o * es, l * es, prev));
#undef SLICE
  }
  return ncclSuccess;
}

TUTTI_BUILDER(reduce_ordered) {
  const int n = a->nranks, r = a->rank, root = a->root;
  const size_t es = a->elem_size;
  if (n == 1) {
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, a->count * es);
  }
  if (r != root) {
    /* The folded block waits in scratch, then goes to the root. */
    const size_t ml = block_len(a, r);
    NCCLCHECK(scatter_fold(a, s, TUTTI_BUF_SCRATCH, 0));
    s->scratch_bytes = ml;
    return ADD_SEND(s, 0, TUTTI_BUF_SCRATCH, 0, ml, root);
  }
  NCCLCHECK(scatter_fold(a, s, TUTTI_BUF_RECV, block_off(a, r)));
  /* Each peer's folded block, after that peer's input block went out. */
  for (int p = 0; p < n; p++) {
    if (p != r) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, block_off(a, p), block_len(a, p), p));
    }
  }
  return ncclSuccess;
}
