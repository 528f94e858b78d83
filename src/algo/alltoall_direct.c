/* All-to-all: block p of every rank goes to rank p; all sends and receives
 * run at once, each in its own lane, so no pair waits on another. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(alltoall_direct) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  enum tutti_buf src = TUTTI_BUF_SEND;
  if (a->in_place) {
    /* Incoming blocks overwrite outgoing ones: send from a copy, and let
     * receives start only once the copy is taken. */
    s->scratch_bytes = bb * (size_t)n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_SCRATCH, 0, bb * (size_t)n));
    src = TUTTI_BUF_SCRATCH;
  }
  for (int k = 1; k < n; k++) {
    /* Staggered peer order spreads the load instead of all ranks hitting rank 0 first. */
    int to = (r + k) % n, from = (r + n - k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    if (a->in_place) {
      NCCLCHECK(tutti_add_wait(s, 0));
    }
    NCCLCHECK(ADD_SEND(s, 0, src, (size_t)to * bb, bb, to));
    NCCLCHECK(tutti_sched_lane(s));
    if (a->in_place) {
      NCCLCHECK(tutti_add_wait(s, 0));
    }
    NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, (size_t)from * bb, bb, from));
  }
  if (!a->in_place) {
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, (size_t)r * bb, TUTTI_BUF_RECV, (size_t)r * bb, bb));
  }
  return ncclSuccess;
}
