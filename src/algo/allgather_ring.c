/* Ring all-gather: each rank's block travels N-1 hops around the ring, every
 * rank keeping and forwarding it; large blocks go in rounds of chunk_bytes. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(allgather_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size, bb = a->count * es; /* one block */
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  const size_t chunk = tutti_chunk_elems(a->chunk_bytes, es);
  const size_t rounds = n > 1 ? tutti_rounds(a->count, chunk) : 0;
  NCCLCHECK(tutti_sched_lane(s));
  for (size_t k = 0; k < rounds; k++) {
    size_t o, l;
    tutti_round_slice(0, a->count, k, chunk, &o, &l);
    NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, o * es, l * es, next));
    for (int j = 0; j < n - 2; j++) {
      size_t off = (size_t)tutti_mod(r, -1 - j, n) * bb + o * es;
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_COPY_SEND, 0, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV, off,
                          l * es, next, prev));
    }
    NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, (size_t)next * bb + o * es, l * es, prev));
  }
  if (!a->in_place) {
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, (size_t)r * bb, bb));
  }
  return ncclSuccess;
}
