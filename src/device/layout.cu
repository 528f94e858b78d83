/* Where everything lies in a rank's shared region and in its private
 * counters (the offsets of struct td_layout, work.h): the ring's counters,
 * queues and LL slots, the mapped kernel's flags and inboxes (mapped.h), the
 * copy-engine path's flags and inboxes (ce.h). Where every peer is on this
 * host and the region is GPU memory, tune's layout (TUTTI_COMM_MEMORY) says
 * how large the parts are: lean (the default: measured at most a few
 * percent slower than wide, bench/RESULTS.md "GPU: memory per
 * communicator"), wide (tune's sizes as they are), or fitted to a budget
 * per rank. */
#include <stddef.h>

#include "device/launch/ce.h"
#include "device/dev_comm.h"
#include "device/kernels/mapped.h"
#include "util/hash.h"

extern "C" {
#include "util/check.h"
}

#define TD_MAX_DONE 256 /* lanes one launch may have */

/* The mapped kernel's inboxes (mapped.h): tune's budget per rank for the
 * simple rounds (mapped.memory), split over every peer's channels; none where
 * regions are host memory. */
static uint64_t mapped_chan_bytes(int n, int gpu_regions, uint64_t budget) {
  if (!gpu_regions || n < 2 || n > TD_MAPPED_MAX_RANKS || budget == 0) {
    return 0;
  }
  uint64_t chan = (uint64_t)budget / ((uint64_t)(n - 1) * TD_MAPPED_CHANNELS) / 4096 * 4096;
  return chan < 8192 ? 0 : chan;
}

/* Its LL128 inboxes: tune's budget per rank (mapped.ll128_memory), split
 * over every peer's channels (whole 4 KB); none without the simple inboxes,
 * or where some pair of GPUs is not on NVLink. */
static uint64_t ll128_chan_bytes(int n, uint64_t simple_chan, uint64_t budget) {
  if (simple_chan == 0 || budget == 0) {
    return 0;
  }
  const uint64_t chan = (uint64_t)budget / ((uint64_t)(n - 1) * TD_MAPPED_CHANNELS) / 4096 * 4096;
  return chan < 4096 ? 0 : chan;
}

/* The copy-engine path's inboxes (ce.h): tune's budget per rank
 * (ce.memory), TD_CE_SLOTS slots per peer; none where regions are host
 * memory. */
static uint64_t ce_slot_bytes(int n, int gpu_regions, uint64_t budget) {
  if (!gpu_regions || n < 2 || n > TD_MAPPED_MAX_RANKS || budget == 0) {
    return 0;
  }
  const uint64_t slot = (uint64_t)budget / (TD_CE_SLOTS * (uint64_t)(n - 1)) / 4096 * 4096;
  return slot < (64 << 10) ? 0 : slot;
}

/* How large each part is: the sizes the offsets are laid out from. */
struct td_shape {
  int nch, all, loop, mapped_nch, ll_nch;
  uint64_t queue, chan, ll128_chan, ce_slot;
};

/* The sizes as tune gives them (no budget, or regions that are not GPU
 * memory of this host's peers). */
static struct td_shape shape_wide(int nch, int n, size_t queue_bytes, int gpu_regions, int ll128,
                                  const struct tutti_dev_sizes* mem) {
  struct td_shape h = {};
  h.nch = nch;
  h.all = td_all_peer_channels(n) < nch ? td_all_peer_channels(n) : nch;
  h.loop = nch < TD_LOOP_CHANNELS ? nch : TD_LOOP_CHANNELS;
  h.mapped_nch = TD_MAPPED_CHANNELS;
  h.ll_nch = TD_MAPPED_LL_CHANNELS;
  h.queue = queue_bytes;
  h.chan = mapped_chan_bytes(n, gpu_regions, mem->mapped_memory);
  h.ll128_chan = ll128 ? ll128_chan_bytes(n, h.chan, mem->mapped_ll128_memory) : 0;
  h.ce_slot = ce_slot_bytes(n, gpu_regions, mem->ce_memory);
  return h;
}

static int pow2_floor(uint64_t v, int lo, int hi) {
  int k = 1;
  while ((uint64_t)k * 2 <= v && k * 2 <= hi) {
    k *= 2;
  }
  return k < lo ? lo : k;
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

#define TD_LEAN_CHANNELS 32       /* the most channels (unless NCCL_MAX_NCHANNELS says) */
#define TD_LEAN_QUEUE (2u << 20)  /* a queue (unless NCCL_BUFFSIZE says) */
#define TD_LEAN_LOOP 2            /* channels with loopback queues */
#define TD_LEAN_CHAN (128u << 10) /* the most of a mapped inbox channel */
#define TD_FIT_ALL 4              /* fitted, from 3 ranks: channels with every peer's queues */
#define TD_FIT_CHAN (32u << 10)   /* fitted: a mapped inbox channel, at least (else fewer) */
#define TD_FIT_QUEUE (1u << 20)   /* fitted: a queue, at least (else fewer channels) */
#define TD_MIN_QUEUE (64u << 10)  /* the smallest queue tune makes */

/* Lean: 32 channels of 2 MB queues, loopback queues on 2, mapped inboxes
 * of at most 128 KB per channel, no copy-engine inboxes (the ring carries
 * what the copy engines would: within 5 % at 32-128 MB); what the user set
 * stays. 2 ranks: 92 MiB, where wide takes 428. */
static struct td_shape shape_lean(int nch, int n, size_t queue_bytes, int ll128,
                                  const struct tutti_dev_sizes* mem) {
  struct td_shape h = shape_wide(nch, n, queue_bytes, 1, ll128, mem);
  h.nch = !mem->channels_set && nch > TD_LEAN_CHANNELS ? TD_LEAN_CHANNELS : nch;
  h.all = td_all_peer_channels(n) < h.nch ? td_all_peer_channels(n) : h.nch;
  h.loop = h.nch < TD_LEAN_LOOP ? h.nch : TD_LEAN_LOOP;
  h.queue = mem->queue_set ? queue_bytes : TD_LEAN_QUEUE;
  h.chan = mem->mapped_set ? h.chan : min_u64(h.chan, TD_LEAN_CHAN);
  h.ce_slot = mem->ce_set ? h.ce_slot : 0;
  return h;
}

/* Fitted to `comm_memory` bytes: no copy-engine inboxes, a quarter for the
 * mapped kernel's inboxes (on fewer channels below 32 KB each), an eighth
 * for its LL inboxes, the rest for queues and LL slots on at most the lean
 * channels, halved while a queue would be under 1 MB; each part never
 * larger than lean's. */
static struct td_shape shape_fit(int nch, int n, size_t queue_bytes, int ll128,
                                 const struct tutti_dev_sizes* mem) {
  const struct td_shape w = shape_lean(nch, n, queue_bytes, ll128, mem);
  const uint64_t budget = mem->comm_memory, p = (uint64_t)(n - 1);
  struct td_shape h = w;
  h.ce_slot = 0;
  for (h.mapped_nch = TD_MAPPED_CHANNELS;; h.mapped_nch /= 2) {
    h.chan = min_u64(budget / 4 / (p * (uint64_t)h.mapped_nch) / 4096 * 4096, w.chan);
    if (h.chan >= TD_FIT_CHAN || h.mapped_nch <= 8) {
      break;
    }
  }
  h.chan = h.chan < 8192 ? 0 : h.chan;
  h.ll_nch =
      pow2_floor(budget / 8 / (p * 2 * TD_MAPPED_LL_CHANNEL_BYTES), 4, TD_MAPPED_LL_CHANNELS);
  h.ll128_chan = 0;
  if (w.ll128_chan > 0 && h.chan > 0) {
    const uint64_t c = budget / 8 / (p * (uint64_t)h.mapped_nch) / 4096 * 4096;
    h.ll128_chan = c < 4096 ? 0 : min_u64(c, w.ll128_chan);
  }
  const uint64_t inboxes =
      p * (uint64_t)h.mapped_nch * h.chan +
      (h.chan > 0 ? p * 2 * (uint64_t)h.ll_nch * TD_MAPPED_LL_CHANNEL_BYTES : 0) +
      p * (uint64_t)h.mapped_nch * h.ll128_chan +
      /* their flags and acks, the copy engines' flags, alignment */
      2 * p * TD_MAPPED_CHANNELS * TD_LINE + p * TD_LINE + 4 * 4096;
  const uint64_t rest = budget > inboxes ? budget - inboxes : 0;
  for (h.nch = w.nch;; h.nch /= 2) {
    h.all = td_all_peer_channels(n) < h.nch ? td_all_peer_channels(n) : h.nch;
    h.all = n > 2 && h.all > TD_FIT_ALL ? TD_FIT_ALL : h.all;
    h.loop = h.nch < TD_LEAN_LOOP ? h.nch : TD_LEAN_LOOP;
    const uint64_t lines = (uint64_t)h.nch * (uint64_t)n;
    const uint64_t fixed = lines * (3 * TD_LINE + (uint64_t)TD_SLOTS * TD_LL_LINES * 16);
    const uint64_t queues = (uint64_t)h.all * p + (uint64_t)(h.nch - h.all) + (uint64_t)h.loop;
    const uint64_t q = rest > fixed ? (rest - fixed) / queues / (64 << 10) * (64 << 10) : 0;
    h.queue = min_u64(q, w.queue);
    if (h.queue >= TD_FIT_QUEUE || h.queue == w.queue || h.nch == 1) {
      break;
    }
  }
  /* Too small a budget for its ranks: one channel of the smallest queues. */
  h.queue = h.queue < TD_MIN_QUEUE ? min_u64(TD_MIN_QUEUE, w.queue) : h.queue;
  return h;
}

void td_layout_make(struct td_layout* l, int nch, int n, size_t queue_bytes, int gpu_regions,
                    int ll128, const struct tutti_dev_sizes* mem) {
  const int own = gpu_regions && n > 1; /* GPU memory, every peer on this host */
  const struct td_shape h = own && mem->layout == TUTTI_LAYOUT_LEAN
                                ? shape_lean(nch, n, queue_bytes, ll128, mem)
                            : own && mem->layout == TUTTI_LAYOUT_FIT
                                ? shape_fit(nch, n, queue_bytes, ll128, mem)
                                : shape_wide(nch, n, queue_bytes, gpu_regions, ll128, mem);
  nch = h.nch;
  const uint64_t chan_bytes = h.chan, ll128_chan = h.ll128_chan, ce_slot = h.ce_slot;
  const uint64_t lines = (uint64_t)nch * (uint64_t)n;
  l->nch = (uint64_t)nch;
  l->loop_nch = (uint64_t)h.loop;
  l->mapped_nch = (uint64_t)h.mapped_nch;
  l->ll_nch = (uint64_t)h.ll_nch;
  uint64_t o = 0; /* the shared region */
  l->tail_off = o;
  o += lines * TD_LINE;
  l->head_off = o;
  o += lines * TD_LINE;
  l->len_off = o;
  o += lines * TD_LINE;
  o = (o + 4095) & ~(uint64_t)4095;
  l->queue_off = o;
  l->queue_bytes = h.queue;
  l->all_nch = (uint64_t)h.all;
  o += (uint64_t)h.all * (uint64_t)(n - 1) * h.queue;
  l->ring_off = o;
  o += n > 1 ? (uint64_t)(nch - h.all) * h.queue : 0;
  l->loop_off = o;
  o += (uint64_t)h.loop * h.queue;
  l->ll_off = o;
  o += lines * (uint64_t)TD_SLOTS * TD_LL_LINES * 16;
  /* Flags and acks on every inbox channel a launch may name (TD_MAPPED_CHANNELS). */
  const uint64_t dchans = chan_bytes > 0 ? (uint64_t)(n - 1) * TD_MAPPED_CHANNELS : 0;
  const uint64_t ichans = chan_bytes > 0 ? (uint64_t)(n - 1) * (uint64_t)h.mapped_nch : 0;
  l->dflag_off = o;
  o += dchans * TD_LINE;
  l->dack_off = o;
  o += dchans * TD_LINE;
  o = (o + 4095) & ~(uint64_t)4095;
  l->inbox_off = o;
  l->chan_bytes = chan_bytes;
  o += ichans * chan_bytes;
  l->ll_inbox_off = o;
  o += chan_bytes > 0 ? (uint64_t)(n - 1) * 2 * (uint64_t)h.ll_nch * TD_MAPPED_LL_CHANNEL_BYTES : 0;
  o = (o + 4095) & ~(uint64_t)4095;
  l->ll128_inbox_off = o;
  l->ll128_chan_bytes = ll128_chan;
  o += ichans * ll128_chan;
  l->ce_flag_off = o;
  o += ce_slot > 0 ? (uint64_t)(n - 1) * TD_LINE : 0;
  o = (o + 4095) & ~(uint64_t)4095;
  l->ce_inbox_off = o;
  l->ce_slot_bytes = ce_slot;
  o += (uint64_t)(n - 1) * TD_CE_SLOTS * ce_slot;
  l->total = o;
  o = 0; /* the private region */
  l->sent_off = o;
  o += lines * TD_LINE;
  l->recvd_off = o;
  o += lines * TD_LINE;
  l->served_off = o;
  o += 2 * lines * TD_LINE;
  l->done_off = o;
  o += TD_MAX_DONE * TD_LINE;
  l->finished_off = o;
  o += TD_LINE;
  l->dseq_off = o;
  l->priv_total = o + TD_MAPPED_CHANNELS * TD_LINE;
}

uint64_t td_layout_shape(const struct td_layout* l) {
  /* The shared region's fields come first: every one up to the private counters. */
  return tutti_hash(l, offsetof(struct td_layout, sent_off), TUTTI_HASH_INIT);
}

/* Every rank set up must lay out its region as the others do (the same
 * sizes from the same environment): offsets that differ would make ranks
 * read each other's counters and data in the wrong places. Each rank
 * compares the same pair (the first set-up rank and the first that
 * differs from it), so all of them fail with the same sentence. */
ncclResult_t td_layout_agree(const struct td_export* ex, int n) {
  int ref = -1;
  for (int p = 0; p < n; p++) {
    if (!ex[p].ok) {
      continue;
    }
    if (ref < 0) {
      ref = p;
    } else if (ex[p].shape != ex[ref].shape) {
      return tutti_error(
          ncclInvalidUsage,
          "rank %d and rank %d lay out their device queues differently (%llu channels of "
          "%llu-byte queues, %llu bytes in all, against %llu of %llu, %llu): every rank of a "
          "communicator must be started with the same NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS, "
          "TUTTI_COMM_MEMORY and TUTTI_TUNE sizes",
          ref, p, (unsigned long long)ex[ref].nch, (unsigned long long)ex[ref].queue_bytes,
          (unsigned long long)ex[ref].total, (unsigned long long)ex[p].nch,
          (unsigned long long)ex[p].queue_bytes, (unsigned long long)ex[p].total);
    }
  }
  return ncclSuccess;
}
