/* Direct reduce-scatter: block p of every rank goes straight to rank p,
 * which reduces the N contributions in rank order. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(reducescatter_direct) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  /* The sends' lanes first: an executor's pass walks lanes in order, and
   * a receive tried before this rank sent waits for a peer that waits for
   * this rank's block (across hosts a small call took 1.2-1.3x as long). */
  for (int p = 0; p < n; p++) {
    if (p != r) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, (size_t)p * bb, bb, p));
    }
  }
  /* Own block aside (scaled): in-place, the accumulator overwrites it. */
  s->scratch_bytes = bb;
  NCCLCHECK(tutti_sched_lane(s));
  NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, (size_t)r * bb, TUTTI_BUF_SCRATCH, 0, bb));
  return tutti_build_accumulate(s, a, TUTTI_BUF_SCRATCH, 0, TUTTI_BUF_RECV, 0, bb);
}
