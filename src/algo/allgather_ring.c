/* Ring all-gather: each rank's block travels N-1 hops around the ring, every
 * rank keeping and forwarding it. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(allgather_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size; /* one block */
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  NCCLCHECK(tutti_sched_lane(s));
  if (n > 1) {
    NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, bb, next));
    for (int j = 0; j < n - 2; j++) {
      size_t off = (size_t)tutti_mod(r, -1 - j, n) * bb;
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_COPY_SEND, 0, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV, off,
                          bb, next, prev));
    }
    NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, (size_t)next * bb, bb, prev));
  }
  if (!a->in_place) {
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, (size_t)r * bb, bb));
  }
  return ncclSuccess;
}
