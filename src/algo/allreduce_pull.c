/* Single-copy allreduce on one host: a reduce-scatter in which rank r
 * reduces block r of every rank's input where it lies (in rank order, so
 * every rank gets the same bits), then an all-gather in which every rank
 * copies each reduced block from its owner. Each byte crosses between
 * ranks once per phase and is never staged in a queue. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(allreduce_pull) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size;
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, a->count * es);
  }
  const size_t mo = tutti_block_off(a->count, n, r) * es, ml = tutti_block_len(a->count, n, r) * es;
  /* Lane 0: this rank's block. In place, the output overwrites the own
   * input before it is added in: aside first (scaled). Peers read other
   * blocks of the input, and only until they have reduced theirs, which
   * is before they expose the result this rank then writes over them. */
  enum tutti_buf own = TUTTI_BUF_SEND;
  size_t own_off = mo;
  if (a->in_place) {
    s->scratch_bytes = ml;
    NCCLCHECK(ADD_COPY(s, 0, TUTTI_BUF_SEND, mo, TUTTI_BUF_SCRATCH, 0, ml));
    own = TUTTI_BUF_SCRATCH;
    own_off = 0;
  }
  NCCLCHECK(
      tutti_build_accumulate_pull(s, a, own, own_off, TUTTI_BUF_SEND, TUTTI_BUF_RECV, mo, ml));
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, tutti_block_off(a->count, n, p) * es,
                         tutti_block_len(a->count, n, p) * es, p));
  }
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(tutti_add_wait(s, 0));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_RECV, mo, ml, p));
  }
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_PULL(s, TUTTI_STEP_PULL, 0, TUTTI_BUF_RECV, TUTTI_BUF_RECV,
                       tutti_block_off(a->count, n, p) * es, tutti_block_len(a->count, n, p) * es,
                       p));
  }
  return ncclSuccess;
}

ncclResult_t tutti_build_accumulate_pull(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                         enum tutti_buf own_buf, size_t own_off,
                                         enum tutti_buf peer_buf, enum tutti_buf dst,
                                         size_t dst_off, size_t bytes) {
  const int n = a->nranks, r = a->rank;
  for (int p = 0; p < n; p++) {
    const int fl = (p == n - 1) ? TUTTI_STEP_FINAL : 0;
    if (p == r) {
      NCCLCHECK(tutti_add(s, p == 0 ? TUTTI_STEP_COPY : TUTTI_STEP_REDUCE, fl, own_buf, own_off,
                          dst, dst_off, bytes, -1, -1));
    } else {
      NCCLCHECK(ADD_PULL(s, p == 0 ? TUTTI_STEP_PULL : TUTTI_STEP_PULL_REDUCE, fl, peer_buf, dst,
                         dst_off, bytes, p));
    }
  }
  return ncclSuccess;
}
