/* Pipelined chain reduce: data flows root+1 -> root+2 -> ... -> root, each
 * rank adding its own contribution to every piece as it passes. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(reduce_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t bytes = a->count * a->elem_size;
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  const int d = tutti_mod(r, -a->root, n);
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bytes);
  }
  if (d == 1) {
    return ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, bytes, next);
  }
  if (d == 0) {
    return tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0,
                     TUTTI_BUF_RECV, 0, bytes, -1, prev);
  }
  return tutti_add(s, TUTTI_STEP_RECV_REDUCE_SEND, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_NONE, 0, bytes,
                   next, prev);
}
