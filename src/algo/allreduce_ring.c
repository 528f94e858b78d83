/* Ring allreduce: a reduce-scatter around the ring (N-1 steps, each rank
 * ending with one fully reduced block), then an all-gather of those blocks
 * (N-1 steps). Each rank sends and receives 2(N-1)/N of the data. Large
 * blocks go around in rounds of chunk_bytes, so the pipeline never needs
 * more queue than it has. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(allreduce_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size;
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, a->count * es);
  }
  const size_t chunk = tutti_chunk_elems(a->chunk_bytes, es);
  const size_t rounds = tutti_rounds(tutti_block_len(a->count, n, 0), chunk);
  for (size_t k = 0; k < rounds; k++) {
    /* Block b of this round: [o, o + l) elements. */
#define SLICE(b, o, l)                                                                       \
  tutti_round_slice(tutti_block_off(a->count, n, (b)), tutti_block_len(a->count, n, (b)), k, \
                    chunk, &(o), &(l))
    size_t o, l;
    /* Reduce-scatter: at step j rank r sends block r-j; it ends owning block r+1. */
    SLICE(r, o, l);
    NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, o * es, l * es, next));
    for (int j = 1; j < n - 1; j++) {
      SLICE(tutti_mod(r, -j, n), o, l);
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_SEND, 0, TUTTI_BUF_SEND, o * es, TUTTI_BUF_NONE,
                          0, l * es, next, prev));
    }
    SLICE(tutti_mod(r, 1, n), o, l);
    NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY_SEND, TUTTI_STEP_FINAL, TUTTI_BUF_SEND,
                        o * es, TUTTI_BUF_RECV, o * es, l * es, next, prev));
    /* All-gather: at step j rank r receives block r-j from prev and forwards it. */
    for (int j = 0; j < n - 2; j++) {
      SLICE(tutti_mod(r, -j, n), o, l);
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_COPY_SEND, 0, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV,
                          o * es, l * es, next, prev));
    }
    SLICE(tutti_mod(r, 2, n), o, l);
    NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, o * es, l * es, prev));
#undef SLICE
  }
  return ncclSuccess;
}
