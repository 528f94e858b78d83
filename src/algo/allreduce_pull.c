/* Single-copy allreduce on one host: a reduce-scatter in which rank r
 * reduces block r of every rank's input where it lies, then an all-gather
 * in which every rank copies each reduced block from its owner. Nothing is
 * staged in a queue; only addresses travel through it. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(allreduce_pull) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size;
  if (n == 1) {
    NCCLCHECK(tutti_sched_lane(s));
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, a->count * es);
  }
  const size_t mo = tutti_block_off(a->count, n, r) * es, ml = tutti_block_len(a->count, n, r) * es;
  /* Offers of the input first, so that peers can start reading at once. */
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_SEND, tutti_block_off(a->count, n, p) * es,
                         tutti_block_len(a->count, n, p) * es, p));
  }
  /* Lane n-1: this rank's block. In place it overwrites the own input
   * block, which only this rank reads (first). The other blocks it later
   * overwrites with peers' results are read by those peers, and only until
   * they have reduced theirs, which is before they offer the result. */
  const int acc = n - 1;
  NCCLCHECK(tutti_sched_lane(s));
  NCCLCHECK(tutti_build_accumulate_pull(s, a, TUTTI_BUF_SEND, mo, TUTTI_BUF_RECV, mo, ml));
  for (int k = 1; k < n; k++) {
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(tutti_add_wait(s, acc));
    NCCLCHECK(ADD_EXPOSE(s, TUTTI_BUF_RECV, mo, ml, (r + k) % n));
  }
  for (int k = 1; k < n; k++) {
    const int p = (r + k) % n;
    NCCLCHECK(tutti_sched_lane(s));
    NCCLCHECK(ADD_PULL(s, 0, 0, TUTTI_BUF_RECV, tutti_block_off(a->count, n, p) * es,
                       tutti_block_len(a->count, n, p) * es, p));
  }
  return ncclSuccess;
}

/* Deterministic mode: rank order, ((x0 OP x1) OP x2) ..., the accumulator
 * on the left (PULL_REDUCE: dst = src OP peer). In place the own block is
 * copied aside (scaled) first: x0's copy would overwrite it. */
static ncclResult_t accumulate_pull_ordered(struct tutti_schedule* s,
                                            const struct tutti_coll_args* a, enum tutti_buf own_buf,
                                            size_t own_off, enum tutti_buf dst, size_t dst_off,
                                            size_t bytes) {
  const int n = a->nranks, r = a->rank;
  if (a->in_place && r > 0) {
    s->scratch_bytes = bytes > s->scratch_bytes ? bytes : s->scratch_bytes;
    NCCLCHECK(ADD_COPY(s, 0, own_buf, own_off, TUTTI_BUF_SCRATCH, 0, bytes));
    own_buf = TUTTI_BUF_SCRATCH;
    own_off = 0;
  }
  for (int p = 0; p < n; p++) {
    const int fl = p == n - 1 ? TUTTI_STEP_FINAL : 0;
    if (p == 0 && r == 0) {
      continue; /* the accumulator starts as the own block, read by the next step */
    } else if (p == 0) {
      NCCLCHECK(ADD_PULL(s, fl, 1, dst, dst_off, bytes, 0));
    } else if (p == r) {
      NCCLCHECK(tutti_add(s, TUTTI_STEP_REDUCE, fl, own_buf, own_off, dst, dst_off, bytes, -1, -1));
    } else {
      const int first = p == 1 && r == 0;
      NCCLCHECK(ADD_PULL_REDUCE(s, fl, first ? own_buf : dst, first ? own_off : dst_off, dst,
                                dst_off, bytes, p));
    }
  }
  return ncclSuccess;
}

ncclResult_t tutti_build_accumulate_pull(struct tutti_schedule* s, const struct tutti_coll_args* a,
                                         enum tutti_buf own_buf, size_t own_off, enum tutti_buf dst,
                                         size_t dst_off, size_t bytes) {
  const int n = a->nranks, r = a->rank;
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, own_buf, own_off, dst, dst_off, bytes);
  }
  if (a->deterministic) {
    return accumulate_pull_ordered(s, a, own_buf, own_off, dst, dst_off, bytes);
  }
  for (int k = 1; k < n; k++) {
    const int fl = k == n - 1 ? TUTTI_STEP_FINAL : 0;
    const enum tutti_buf sb = k == 1 ? own_buf : dst;
    const size_t so = k == 1 ? own_off : dst_off;
    NCCLCHECK(ADD_PULL_REDUCE(s, fl, sb, so, dst, dst_off, bytes, (r + k) % n));
  }
  return ncclSuccess;
}
