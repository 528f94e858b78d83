/* Single-copy all-gather on one host: each rank exposes its block to every
 * peer and copies every peer's block straight into its output. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(allgather_pull) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  /* Peer r+1 first, as in a ring: the ranks do not all read one rank at
   * once. Offers first, so that peers can start reading at once; the own
   * block last, copied while peers read. */
  for (int k = 1; k < n; k++) {
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, 0, bb, (r + k) % n));
  }
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_PULL(s, 0, 1, TUTTI_BUF_RECV, (size_t)p * bb, bb, p));
  }
  if (!a->in_place) {
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, (size_t)r * bb, bb));
  }
  return ncclSuccess;
}
