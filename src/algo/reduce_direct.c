/* Direct reduce: every rank sends its buffer to the root, which reduces the
 * contributions in rank order. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(reduce_direct) {
  const size_t bytes = a->count * a->elem_size;
  NCCLCHECK(tutti_sched_lane(s));
  if (a->rank != a->root) {
    return ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, bytes, a->root);
  }
  /* The root's own input is copied (scaled) aside first: with in-place calls
   * the accumulator overwrites it before its turn in rank order comes. */
  s->scratch_bytes = bytes;
  NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_SCRATCH, 0, bytes));
  return tutti_build_accumulate(s, a, TUTTI_BUF_SCRATCH, 0, TUTTI_BUF_RECV, 0, bytes);
}
