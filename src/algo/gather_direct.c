/* Gather: every rank sends its block to the root, which receives them all at once. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(gather_direct) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  if (r != a->root) {
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, bb, a->root);
  }
  for (int p = 0; p < n; p++) {
    if (p != r) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, (size_t)p * bb, bb, p));
    }
  }
  NCCLCHECK(tutti_sched_lane(s));
  return a->in_place ? ncclSuccess
                     : ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, (size_t)r * bb, bb);
}
