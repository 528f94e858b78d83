/* Scatter: the root sends block p to rank p, to all ranks at once. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(scatter_direct) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  if (r != a->root) {
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_RECV(s, 0, TUTTI_BUF_RECV, 0, bb, a->root);
  }
  for (int p = 0; p < n; p++) {
    if (p != r) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, (size_t)p * bb, bb, p));
    }
  }
  NCCLCHECK(tutti_sched_lane(s));
  return a->in_place ? ncclSuccess
                     : ADD_COPY(s, 0, TUTTI_BUF_SEND, (size_t)r * bb, TUTTI_BUF_RECV, 0, bb);
}
