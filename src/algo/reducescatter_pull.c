/* Single-copy reduce-scatter on one host: rank r reduces block r of every
 * rank's input, in rank order, reading each where it lies. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(reducescatter_pull) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  enum tutti_buf own = TUTTI_BUF_SEND;
  size_t own_off = (size_t)r * bb;
  NCCLCHECK(tutti_sched_lane(s));
  if (a->in_place) {
    /* The output overwrites the own block before it is added in: aside first (scaled). */
    s->scratch_bytes = bb;
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, own_off, TUTTI_BUF_SCRATCH, 0, bb));
    own = TUTTI_BUF_SCRATCH;
    own_off = 0;
  }
  NCCLCHECK(tutti_build_accumulate_pull(s, a, own, own_off, TUTTI_BUF_SEND, TUTTI_BUF_RECV, 0, bb));
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, (size_t)p * bb, bb, p));
  }
  return ncclSuccess;
}
