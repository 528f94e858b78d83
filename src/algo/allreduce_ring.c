/* Ring allreduce: a reduce-scatter around the ring (N-1 steps, each rank
 * ending with one fully reduced block), then an all-gather of those blocks
 * (N-1 steps). Each rank sends and receives 2(N-1)/N of the data. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(allreduce_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size;
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
#define OFF(b) (tutti_block_off(a->count, n, (b)) * es)
#define LEN(b) (tutti_block_len(a->count, n, (b)) * es)
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, a->count * es);
  }
  /* Reduce-scatter: at step k rank r sends block r-k; it ends owning block r+1. */
  int b = r;
  NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, OFF(b), LEN(b), next));
  for (int k = 1; k < n - 1; k++) {
    b = tutti_mod(r, -k, n);
    NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_SEND, 0, TUTTI_BUF_SEND, OFF(b), TUTTI_BUF_NONE,
                        0, LEN(b), next, prev));
  }
  b = tutti_mod(r, 1, n);
  NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY_SEND, TUTTI_STEP_FINAL, TUTTI_BUF_SEND,
                      OFF(b), TUTTI_BUF_RECV, OFF(b), LEN(b), next, prev));
  /* All-gather: at step j rank r receives block r-j from prev and forwards it. */
  for (int j = 0; j < n - 2; j++) {
    b = tutti_mod(r, -j, n);
    NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_COPY_SEND, 0, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV,
                        OFF(b), LEN(b), next, prev));
  }
  b = tutti_mod(r, 2, n);
  return ADD_RECV(s, 0, TUTTI_BUF_RECV, OFF(b), LEN(b), prev);
#undef OFF
#undef LEN
}
