/* Pipelined chain broadcast: the root streams into rank root+1, each rank
 * keeps and forwards each piece as it arrives, the last one only keeps it. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(broadcast_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t bytes = a->count * a->elem_size;
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  const int d = tutti_mod(r, -a->root, n); /* position along the chain */
  NCCLCHECK(tutti_sched_lane(s));
  if (d == 0) {
    if (n > 1) {
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, bytes, next));
    }
    if (a->in_place) {
      return ncclSuccess;
    }
    /* Its own lane: the copy fills the root's waits for queue room. */
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bytes);
  }
  if (d == n - 1) {
    return ADD_RECV(s, 0, TUTTI_BUF_RECV, 0, bytes, prev);
  }
  return tutti_add(s, TUTTI_STEP_RECV_COPY_SEND, 0, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV, 0, bytes,
                   next, prev);
}
