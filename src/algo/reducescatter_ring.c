/* Ring reduce-scatter: at step j rank r passes on block r-j-1 with its own
 * contribution added; after N-1 steps it holds block r fully reduced. Large
 * blocks go around in rounds of chunk_bytes. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(reducescatter_ring) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size, bb = a->count * es;
  const int next = tutti_ring_next(r, n), prev = tutti_ring_prev(r, n);
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, bb);
  }
  const size_t chunk = tutti_chunk_elems(a->chunk_bytes, es);
  const size_t rounds = tutti_rounds(a->count, chunk);
  for (size_t k = 0; k < rounds; k++) {
    size_t o, l;
    tutti_round_slice(0, a->count, k, chunk, &o, &l);
    o *= es;
    l *= es;
    NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, (size_t)tutti_mod(r, -1, n) * bb + o, l, next));
    for (int j = 1; j < n - 1; j++) {
      size_t off = (size_t)tutti_mod(r, -j - 1, n) * bb + o;
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_SEND, 0, TUTTI_BUF_SEND, off, TUTTI_BUF_NONE, 0,
                          l, next, prev));
    }
    NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY, TUTTI_STEP_FINAL, TUTTI_BUF_SEND,
                        (size_t)r * bb + o, TUTTI_BUF_RECV, o, l, -1, prev));
  }
  return ncclSuccess;
}
