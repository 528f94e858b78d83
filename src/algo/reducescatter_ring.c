/* Ring reduce-scatter: at step k rank r passes on block r-k-1 with its own
 * contribution added; after N-1 steps it holds block r fully reduced. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(reducescatter_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bb);
  }
  NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, (size_t)tutti_mod(r, -1, n) * bb, bb, next));
  for (int k = 1; k < n - 1; k++) {
    size_t off = (size_t)tutti_mod(r, -k - 1, n) * bb;
    NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_SEND, 0, TUTTI_BUF_SEND, off, TUTTI_BUF_NONE, 0,
                        bb, next, prev));
  }
  return tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY, TUTTI_STEP_FINAL, TUTTI_BUF_SEND,
                   (size_t)r * bb, TUTTI_BUF_RECV, 0, bb, -1, prev);
}
