/* Single-copy broadcast on one host. Out of place the root copies its own
 * output while every peer copies the root's buffer into its own. In place
 * the root has no copy of its own, so it shares the peers' work: of n equal
 * parts, it writes part p straight into peer p's output while p reads the
 * others from the root; each rank moves (n-1)/n of the data. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(broadcast_pull) {
  const int n = a->nranks, r = a->rank, root = a->root;
  const size_t es = a->elem_size, bytes = a->count * es;
  if (n == 1) {
    NCCLCHECK(tutti_sched_lane(s));
    return a->in_place ? ncclSuccess : ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bytes);
  }
  if (!a->in_place) {
    if (r != root) {
      NCCLCHECK(tutti_sched_lane(s));
      return ADD_PULL(s, 0, 1, TUTTI_BUF_RECV, 0, bytes, root);
    }
    /* Offers first; the root's own copy while the peers read. */
    for (int k = 1; k < n; k++) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, 0, bytes, (root + k) % n));
    }
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bytes);
  }
  if (r != root) {
    const size_t po = tutti_block_off(a->count, n, r) * es,
                 pl = tutti_block_len(a->count, n, r) * es;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_RECV, po, pl, root)); /* written by the root */
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_PULL(s, 0, 1, TUTTI_BUF_RECV, 0, po, root));
    return ADD_PULL(s, 0, 1, TUTTI_BUF_RECV, po + pl, bytes - po - pl, root);
  }
  for (int k = 1; k < n; k++) {
    const int p = (root + k) % n;
    const size_t po = tutti_block_off(a->count, n, p) * es,
                 pl = tutti_block_len(a->count, n, p) * es;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, 0, po, p));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, po + pl, bytes - po - pl, p));
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_PUSH(s, TUTTI_BUF_SEND, po, pl, p));
  }
  return ncclSuccess;
}
