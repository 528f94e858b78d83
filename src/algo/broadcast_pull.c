/* Single-copy broadcast on one host: the root exposes its buffer to every
 * rank, and each copies it straight into its own output. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(broadcast_pull) {
  const size_t bytes = a->count * a->elem_size;
  if (a->rank != a->root) {
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_PULL(s, 0, 1, TUTTI_BUF_RECV, 0, bytes, a->root);
  }
  /* Offers first; the root's own copy while the peers read. */
  for (int p = 0; p < a->nranks; p++) {
    if (p != a->rank) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, 0, bytes, p));
    }
  }
  if (!a->in_place) {
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bytes));
  }
  return ncclSuccess;
}
