/* Direct broadcast: the root sends the whole buffer to every rank at once. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(broadcast_direct) {
  const size_t bytes = a->count * a->elem_size;
  if (a->rank != a->root) {
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_RECV(s, 0, TUTTI_BUF_RECV, 0, bytes, a->root);
  }
  for (int p = 0; p < a->nranks; p++) {
    if (p != a->rank) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, bytes, p));
    }
  }
  NCCLCHECK(tutti_sched_lane(s));
  return a->in_place ? ncclSuccess : ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bytes);
}
