/* One-shot allreduce: every rank sends its whole buffer to every other rank
 * and reduces everything it receives, in rank order. One round of latency,
 * N-1 times the data: the choice for small messages. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(allreduce_direct) {
  const int n = a->nranks, r = a->rank;
  const size_t bytes = a->count * a->elem_size;
  /* Lane 0 takes a (scaled) copy of the input first, so that in-place calls
   * can overwrite the buffer while peers are still being sent the input. */
  s->scratch_bytes = bytes;
  NCCLCHECK(tutti_sched_lane(s));
  NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_SCRATCH, 0, bytes));
  for (int p = 0; p < n; p++) {
    if (p != r) {
      NCCLCHECK(tutti_sched_lane(s));
      NCCLCHECK(tutti_add_wait(s, 0));
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SCRATCH, 0, bytes, p));
    }
  }
  NCCLCHECK(tutti_sched_lane(s));
  NCCLCHECK(tutti_add_wait(s, 0));
  return tutti_build_accumulate(s, a, TUTTI_BUF_SCRATCH, 0, TUTTI_BUF_RECV, 0, bytes);
}

ncclResult_t tutti_build_accumulate(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                    enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                                    size_t dst_off, size_t bytes) {
  const int n = a->nranks, r = a->rank;
  for (int p = 0; p < n; p++) {
    int fl = (p == n - 1) ? TUTTI_STEP_FINAL : 0;
    if (p == 0 && p == r) {
      NCCLCHECK(ADD_COPY(s, fl, own_buf, own_off, dst, dst_off, bytes));
    } else if (p == 0) {
      NCCLCHECK(ADD_RECV(s, fl, dst, dst_off, bytes, p));
    } else if (p == r) {
      NCCLCHECK(tutti_add(s, TUTTI_STEP_REDUCE, fl, own_buf, own_off, dst, dst_off, bytes, -1, -1));
    } else {
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY, fl | TUTTI_STEP_ACC_LEFT, dst, dst_off,
                          dst, dst_off, bytes, -1, p));
    }
  }
  return ncclSuccess;
}
