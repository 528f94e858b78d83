/* Direct all-gather: each rank sends its block to every rank and receives
 * every rank's block, all at once. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(allgather_direct) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  for (int p = 0; p < n; p++) {
    if (p == r) {
      continue;
    }
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, bb, p));
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, (size_t)p * bb, bb, p));
  }
  NCCLCHECK(tutti_sched_lane(s));
  return a->in_place ? ncclSuccess
                     : ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, (size_t)r * bb, bb);
}
