/* Point-to-point: one lane, one step. A rank may send to itself inside a
 * group; the matching receive then comes through its own loopback queue. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(send) {
  NCCLCHECK(tutti_sched_lane(s));
  return ADD_SEND(s, 0, TUTTI_BUF_SEND, 0, a->count * a->elem_size, a->root);
}

TUTTI_BUILDER(recv) {
  NCCLCHECK(tutti_sched_lane(s));
  return ADD_RECV(s, 0, TUTTI_BUF_RECV, 0, a->count * a->elem_size, a->root);
}
