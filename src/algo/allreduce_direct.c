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
  return tutti_build_fold(s, a, own_buf, own_off, dst, dst_off, bytes, 0);
}

ncclResult_t tutti_build_fold_round(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                    enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                                    size_t dst_off, size_t len, int keep, int send_peer) {
  const int n = a->nranks, r = a->rank;
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, own_buf, own_off, dst, dst_off, len);
  }
  /* x0 OP x1 in one step where this rank holds one of them: rank 0 folds
   * rank 1's block into its own (the accumulator, on the left), rank 1 its
   * own into rank 0's (the received block, on the left). */
  const int fl1 = (n == 2 ? TUTTI_STEP_FINAL : 0) | (n == 2 ? 0 : keep);
  /* The last step also sends the result to send_peer, where one is given. */
  const int k1 =
      n == 2 && send_peer >= 0 ? TUTTI_STEP_RECV_REDUCE_COPY_SEND : TUTTI_STEP_RECV_REDUCE_COPY;
  const int sp1 = n == 2 ? send_peer : -1;
  if (r == 0) {
    NCCLCHECK(
        tutti_add(s, k1, fl1 | TUTTI_STEP_ACC_LEFT, own_buf, own_off, dst, dst_off, len, sp1, 1));
  } else if (r == 1) {
    NCCLCHECK(tutti_add(s, k1, fl1, own_buf, own_off, dst, dst_off, len, sp1, 0));
  } else {
    NCCLCHECK(ADD_RECV(s, keep, dst, dst_off, len, 0));
    NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY, fl1 | TUTTI_STEP_ACC_LEFT, dst, dst_off,
                        dst, dst_off, len, -1, 1));
  }
  for (int p = 2; p < n; p++) {
    const int last = p == n - 1;
    const int fl = last ? TUTTI_STEP_FINAL : keep;
    if (p == r) {
      NCCLCHECK(tutti_add(s, TUTTI_STEP_REDUCE, fl, own_buf, own_off, dst, dst_off, len, -1, -1));
      if (last && send_peer >= 0) {
        NCCLCHECK(ADD_SEND(s, 0, dst, dst_off, len, send_peer));
      }
    } else {
      const int sp = last ? send_peer : -1;
      NCCLCHECK(tutti_add(s,
                          sp >= 0 ? TUTTI_STEP_RECV_REDUCE_COPY_SEND : TUTTI_STEP_RECV_REDUCE_COPY,
                          fl | TUTTI_STEP_ACC_LEFT, dst, dst_off, dst, dst_off, len, sp, p));
    }
  }
  return ncclSuccess;
}

ncclResult_t tutti_build_fold(struct tutti_schedule* s, const struct tutti_coll_args* a,
                              enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                              size_t dst_off, size_t bytes, size_t round_bytes) {
  if (round_bytes == 0 || round_bytes >= bytes) {
    return tutti_build_fold_round(s, a, own_buf, own_off, dst, dst_off, bytes, 0, -1);
  }
  /* Rounds whose partial result stays in the cache from step to step. */
  round_bytes -= round_bytes % a->elem_size;
  for (size_t o = 0; o < bytes; o += round_bytes) {
    const size_t len = bytes - o < round_bytes ? bytes - o : round_bytes;
    NCCLCHECK(tutti_build_fold_round(s, a, own_buf, own_off + o, dst, dst_off + o, len,
                                     TUTTI_STEP_KEEP, -1));
  }
  return ncclSuccess;
}
