/* The layout of a rank's device region (device/work.h, layout.cu), checked
 * on the host (no GPU needed): for rank counts 1-65, channel counts 1-64
 * and budgets (TUTTI_COMM_MEMORY) of none and 8 MiB - 1 GiB, every queue a
 * schedule may use at a rank (its loopback queues on the first loop_nch
 * channels, every peer's on the first all_nch, the ring's previous rank's
 * on every channel) lies in the queue area, none overlaps another, none is
 * left unused, and the area is what the launcher's channel caps need and no
 * more; a fitted region stays within its budget; and the bytes per rank of
 * the default sizes, with the default budget and without one, are those of
 * a table (a change of the layout changes it on purpose). */
#include <stdlib.h>

extern "C" {
#include "algo/pattern.h"
#include "harness.h"
}
#include "device/dev_comm.h"
#include "device/kernels/mapped.h"

/* Tune's default inboxes (mapped.memory, mapped.ll128_memory, ce.memory),
 * a layout, and for TUTTI_LAYOUT_FIT a budget of `budget` bytes. */
static struct tutti_dev_sizes default_sizes(enum tutti_layout layout, uint64_t budget) {
  struct tutti_dev_sizes s = {};
  s.layout = layout;
  s.mapped_memory = (size_t)64 << 20;
  s.mapped_ll128_memory = (size_t)16 << 20;
  s.ce_memory = (size_t)64 << 20;
  s.comm_memory = (size_t)budget;
  return s;
}

#define MIB ((uint64_t)1 << 20)

static int cmp_u64(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* The queues rank `at` of `n` may be sent into, on `nch` channels. */
static size_t used_queues(const td_layout* l, int nch, int n, int at, uint64_t* offs) {
  size_t k = 0;
  const int prev = tutti_ring_prev(at, n);
  for (int ch = 0; ch < nch; ch++) {
    if ((uint64_t)ch < l->loop_nch) {
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

static void check_layout(int n, int want_nch, enum tutti_layout layout, uint64_t budget) {
  const size_t want_qb = (size_t)4 << 20;
  td_layout l;
  const struct tutti_dev_sizes sz = default_sizes(layout, budget);
  td_layout_make(&l, want_nch, n, want_qb, 1, 1, &sz);
  const int nch = (int)l.nch;
  const uint64_t qb = l.queue_bytes;
  CHECK(nch >= 1 && nch <= want_nch && qb <= want_qb && qb % (TD_SLOTS * 16) == 0,
        "n %d nch %d budget %llu: %d channels of %llu-byte queues", n, want_nch,
        (unsigned long long)budget, nch, (unsigned long long)qb);
  const uint64_t peers_all = td_all_peer_channels(n) < nch ? td_all_peer_channels(n) : nch;
  const uint64_t all = l.all_nch;
  const uint64_t loops = l.loop_nch;
  CHECK(all >= 1 && all <= peers_all && loops >= 1 && loops <= (uint64_t)nch &&
            loops <= TD_LOOP_CHANNELS,
        "n %d nch %d: queues from every peer on %llu channels, loopback on %llu", n, nch,
        (unsigned long long)all, (unsigned long long)loops);
  if (layout == TUTTI_LAYOUT_WIDE) {
    CHECK(all == peers_all && loops == (nch < TD_LOOP_CHANNELS ? (uint64_t)nch : TD_LOOP_CHANNELS),
          "n %d nch %d: the layout without a budget moved", n, nch);
  } else if (layout == TUTTI_LAYOUT_FIT && n > 1) {
    /* Over it only at the floor: one channel of 64 KB queues. */
    CHECK(l.total <= budget || (nch == 1 && qb == 64 << 10),
          "n %d nch %d: %llu bytes over a budget of %llu", n, want_nch, (unsigned long long)l.total,
          (unsigned long long)budget);
  }
  const uint64_t expect = all * (uint64_t)(n - 1) + (n > 1 ? (uint64_t)nch - all : 0) + loops;
  CHECK(l.ll_off - l.queue_off == expect * qb, "n %d nch %d: %llu bytes of queues, expected %llu",
        n, nch, (unsigned long long)(l.ll_off - l.queue_off), (unsigned long long)(expect * qb));
  CHECK(td_all_peer_channels(n) == 1 || 2 * n * td_all_peer_channels(n) <= TD_OP_CTAS,
        "n %d: %d channels with every peer exceed what an operation may use", n,
        td_all_peer_channels(n));
  /* The inboxes: in order, inside the region, each on its channels. */
  const uint64_t p = (uint64_t)(n > 1 ? n - 1 : 0);
  CHECK(l.inbox_off + p * l.mapped_nch * l.chan_bytes <= l.ll_inbox_off &&
            l.ll128_inbox_off + p * l.mapped_nch * l.ll128_chan_bytes <= l.ce_flag_off &&
            l.ce_inbox_off + p * TD_CE_SLOTS * l.ce_slot_bytes == l.total && l.mapped_nch >= 1 &&
            l.mapped_nch <= TD_MAPPED_CHANNELS && l.ll_nch >= 1 &&
            l.ll_nch <= TD_MAPPED_LL_CHANNELS,
        "n %d nch %d budget %llu: the inboxes overlap or leave the region", n, want_nch,
        (unsigned long long)budget);
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

/* Bytes per rank of the default sizes (64 channels of 4 MB), by rank count:
 * lean (the default), fitted to 28 MiB, wide (TUTTI_COMM_MEMORY=0). */
struct golden {
  int n;
  uint64_t lean, fitted, wide;
};
static const struct golden table[] = {
    {2, 96526336, 28876800, 448876544},
    {3, 163680256, 28520448, 545402880},
    {4, 209862656, 28811264, 598921216},
    {8, 284491776, 29073408, 699813888},
};

static void show(const char* what, const td_layout& l) {
  printf(
      "  %s %7.2f MiB: %llu channels, queues of %llu KB (every peer's on %llu), mapped "
      "inboxes %llu x %llu KB, LL on %llu, copy-engine slots %llu KB\n",
      what, (double)l.total / MIB, (unsigned long long)l.nch,
      (unsigned long long)(l.queue_bytes >> 10), (unsigned long long)l.all_nch,
      (unsigned long long)l.mapped_nch, (unsigned long long)(l.chan_bytes >> 10),
      (unsigned long long)l.ll_nch, (unsigned long long)(l.ce_slot_bytes >> 10));
}

int main(void) {
  const int ns[] = {1, 2, 3, 4, 5, 8, 16, 63, 64, 65};
  const int chs[] = {1, 2, 7, 8, 9, 16, 33, 64};
  const uint64_t budgets[] = {8 * MIB, 28 * MIB, 64 * MIB, 1024 * MIB};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    for (size_t j = 0; j < sizeof chs / sizeof chs[0]; j++) {
      check_layout(ns[i], chs[j], TUTTI_LAYOUT_WIDE, 0);
      check_layout(ns[i], chs[j], TUTTI_LAYOUT_LEAN, 0);
      for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        check_layout(ns[i], chs[j], TUTTI_LAYOUT_FIT, budgets[b]);
      }
    }
  }
  /* Lean keeps what the user set: the copy engines (a TUTTI_TUNE row naming
   * them, or ce.memory) and mapped.memory, as wide has them. */
  for (int n = 2; n <= 8; n++) {
    td_layout wide, ce, mapped;
    struct tutti_dev_sizes ws = default_sizes(TUTTI_LAYOUT_WIDE, 0);
    struct tutti_dev_sizes cs = default_sizes(TUTTI_LAYOUT_LEAN, 0), ms = cs;
    cs.ce_set = 1;
    ms.mapped_set = 1;
    td_layout_make(&wide, 64, n, (size_t)4 << 20, 1, 0, &ws);
    td_layout_make(&ce, 64, n, (size_t)4 << 20, 1, 0, &cs);
    td_layout_make(&mapped, 64, n, (size_t)4 << 20, 1, 0, &ms);
    CHECK(
        ce.ce_slot_bytes == wide.ce_slot_bytes && ce.ce_slot_bytes > 0 && mapped.ce_slot_bytes == 0,
        "%d ranks: lean with the copy engines asked for has slots of %llu bytes (wide %llu)", n,
        (unsigned long long)ce.ce_slot_bytes, (unsigned long long)wide.ce_slot_bytes);
    CHECK(mapped.chan_bytes == wide.chan_bytes && (n > 2 || ce.chan_bytes < wide.chan_bytes),
          "%d ranks: lean with mapped.memory given has inbox channels of %llu bytes (wide %llu)", n,
          (unsigned long long)mapped.chan_bytes, (unsigned long long)wide.chan_bytes);
  }
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    td_layout lean, fit, wide;
    const struct tutti_dev_sizes ls = default_sizes(TUTTI_LAYOUT_LEAN, 0),
                                 fs = default_sizes(TUTTI_LAYOUT_FIT, 28 * MIB),
                                 ws = default_sizes(TUTTI_LAYOUT_WIDE, 0);
    td_layout_make(&lean, 64, table[i].n, (size_t)4 << 20, 1, 0, &ls);
    td_layout_make(&fit, 64, table[i].n, (size_t)4 << 20, 1, 0, &fs);
    td_layout_make(&wide, 64, table[i].n, (size_t)4 << 20, 1, 0, &ws);
    printf("%d ranks, per rank:\n", table[i].n);
    show("lean  ", lean);
    show("28 MiB", fit);
    show("wide  ", wide);
    CHECK(
        lean.total == table[i].lean && fit.total == table[i].fitted && wide.total == table[i].wide,
        "%d ranks: %llu / %llu / %llu bytes, the table says %llu / %llu / %llu", table[i].n,
        (unsigned long long)lean.total, (unsigned long long)fit.total,
        (unsigned long long)wide.total, (unsigned long long)table[i].lean,
        (unsigned long long)table[i].fitted, (unsigned long long)table[i].wide);
  }
  return test_summary("dev_layout");
}
