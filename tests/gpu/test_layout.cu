/* The layout of a rank's device region (device/work.h, layout.cu), checked
 * on the host (no GPU needed): for rank counts 1-65 and channel counts
 * 1-64, every queue a schedule may use at a rank (its loopback queues on
 * the first TD_LOOP_CHANNELS channels, every peer's on the first
 * td_all_peer_channels(n), the ring's previous rank's on every channel)
 * lies in the queue area, none overlaps another, none is left unused, and
 * the area is what the launcher's channel caps need and no more. */
#include <stdlib.h>

extern "C" {
#include "algo/pattern.h"
#include "harness.h"
}
#include "device/dev_comm.h"

/* Tune's default inboxes (mapped.memory, mapped.ll128_memory, ce.memory). */
static struct tutti_dev_sizes default_sizes(void) {
  struct tutti_dev_sizes s = {};
  s.mapped_memory = (size_t)64 << 20;
  s.mapped_ll128_memory = (size_t)16 << 20;
  s.ce_memory = (size_t)64 << 20;
  return s;
}

static int cmp_u64(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* The queues rank `at` of `n` may be sent into, on `nch` channels. */
static size_t used_queues(const td_layout* l, int nch, int n, int at, uint64_t* offs) {
  size_t k = 0;
  const int prev = tutti_ring_prev(at, n);
  for (int ch = 0; ch < nch; ch++) {
    if (ch < TD_LOOP_CHANNELS) {
      offs[k++] = td_queue_off(l, ch, at, at, n);
    }
    for (int from = 0; from < n; from++) {
      if (from != at && ((uint64_t)ch < l->all_nch || from == prev)) {
        offs[k++] = td_queue_off(l, ch, from, at, n);
      }
    }
  }
  return k;
}

static void check_layout(int n, int nch) {
  const size_t qb = (size_t)4 << 20;
  td_layout l;
  const struct tutti_dev_sizes sz = default_sizes();
  td_layout_make(&l, nch, n, qb, 1, 1, &sz);
  const uint64_t all = (uint64_t)(td_all_peer_channels(n) < nch ? td_all_peer_channels(n) : nch);
  const uint64_t loops = nch < TD_LOOP_CHANNELS ? nch : TD_LOOP_CHANNELS;
  const uint64_t expect = all * (uint64_t)(n - 1) + (n > 1 ? (uint64_t)nch - all : 0) + loops;
  CHECK(l.all_nch == all, "n %d nch %d: all_nch %llu, expected %llu", n, nch,
        (unsigned long long)l.all_nch, (unsigned long long)all);
  CHECK(l.ll_off - l.queue_off == expect * qb, "n %d nch %d: %llu bytes of queues, expected %llu",
        n, nch, (unsigned long long)(l.ll_off - l.queue_off), (unsigned long long)(expect * qb));
  CHECK(td_all_peer_channels(n) == 1 || 2 * n * td_all_peer_channels(n) <= TD_OP_CTAS,
        "n %d: %d channels with every peer exceed what an operation may use", n,
        td_all_peer_channels(n));
  uint64_t* offs = (uint64_t*)malloc((size_t)nch * ((size_t)n + 1) * sizeof *offs);
  if (offs == NULL) {
    CHECK(0, "out of memory");
    return;
  }
  const int ats[] = {0, n / 2, n - 1};
  for (int i = 0; i < 3; i++) {
    const size_t k = used_queues(&l, nch, n, ats[i], offs);
    qsort(offs, k, sizeof *offs, cmp_u64);
    int inside = 1, apart = 1;
    for (size_t j = 0; j < k; j++) {
      inside &= offs[j] >= l.queue_off && offs[j] + qb <= l.ll_off && offs[j] % 4096 == 0;
      apart &= j == 0 || offs[j] >= offs[j - 1] + qb;
    }
    CHECK(inside, "n %d nch %d rank %d: a queue outside the queue area", n, nch, ats[i]);
    CHECK(apart, "n %d nch %d rank %d: two queues overlap", n, nch, ats[i]);
    CHECK(k == expect, "n %d nch %d rank %d: %zu queues used of %llu laid out", n, nch, ats[i], k,
          (unsigned long long)expect);
  }
  free(offs);
}

int main(void) {
  const int ns[] = {1, 2, 3, 4, 5, 8, 16, 63, 64, 65};
  const int chs[] = {1, 2, 7, 8, 9, 16, 33, 64};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    for (size_t j = 0; j < sizeof chs / sizeof chs[0]; j++) {
      check_layout(ns[i], chs[j]);
    }
  }
  /* What the default 64 channels of 4 MB hold per rank, loopback included. */
  const int show[] = {2, 4, 8};
  for (int i = 0; i < 3; i++) {
    td_layout l;
    const struct tutti_dev_sizes sz = default_sizes();
    td_layout_make(&l, 64, show[i], (size_t)4 << 20, 1, 1, &sz);
    printf("%d ranks: %llu MB of queues per rank\n", show[i],
           (unsigned long long)((l.ll_off - l.queue_off) >> 20));
  }
  return test_summary("dev_layout");
}
