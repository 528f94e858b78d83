/* Single-copy reduce-scatter on one host: rank r reduces block r of every
 * rank's input, reading each where it lies. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(reducescatter_pull) {
  const int n = a->nranks, r = a->rank;
  const size_t bb = a->count * a->elem_size;
  /* Offers first, so that peers can start reading at once. */
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, (size_t)p * bb, bb, p));
  }
  /* In place the output is the own input block exactly, read first. */
  NCCLCHECK(tutti_sched_lane(s));
  return tutti_build_accumulate_pull(s, a, TUTTI_BUF_SEND, (size_t)r * bb, TUTTI_BUF_RECV, 0, bb);
}
