/* Direct reduce-scatter: block p of every rank goes straight to rank p,
 * which reduces the N contributions in rank order. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(reducescatter_direct) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  /* Own block aside first (scaled): in-place, the accumulator overwrites it. */
  s->scratch_bytes = bb;
  NCCLCHECK(tutti_sched_lane(s));
  NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, (size_t)r * bb, TUTTI_BUF_SCRATCH, 0, bb));
  NCCLCHECK(tutti_build_accumulate(s, a, TUTTI_BUF_SCRATCH, 0, TUTTI_BUF_RECV, 0, bb));
  for (int p = 0; p < n; p++) {
    if (p != r) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, (size_t)p * bb, bb, p));
    }
  }
  return ncclSuccess;
}
