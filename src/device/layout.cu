/* Where everything lies in a rank's shared region and in its private
 * counters (the offsets of struct td_layout, work.h): the ring's counters,
 * queues and LL slots, the mapped kernel's flags and inboxes (mapped.h), the
 * copy-engine path's flags and inboxes (ce.h). Where every peer is on this
 * host and the region is GPU memory, the sizes are fitted to a budget per
 * rank (tune's comm_memory, TUTTI_COMM_MEMORY): a quarter for the copy
 * engines' inboxes, a quarter for the mapped kernel's, a thirty-second for
 * its LL inboxes, the rest for queues and LL slots on at most 16 channels. */
#include "device/launch/ce.h"
#include "device/dev_comm.h"
#include "device/kernels/mapped.h"

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

#define TD_FIT_CHANNELS 16         /* the most channels a fitted layout sets up */
#define TD_FIT_LOOP 2              /* of them, with loopback queues */
#define TD_FIT_ALL 4               /* with queues from every peer, from 3 ranks */
#define TD_FIT_CHAN (128 << 10)    /* the mapped kernel's inbox channels: at least this */
#define TD_FIT_CE_SLOT (256 << 10) /* a copy-engine slot: at least this, or none */
#define TD_FIT_QUEUE (128 << 10)   /* a queue: at least this, else fewer channels */

/* The parts of a fitted layout (see the top of this file), each never
 * larger than tune's own size for it. */
static struct td_shape shape_fit(int nch, int n, size_t queue_bytes, int ll128,
                                 const struct tutti_dev_sizes* mem) {
  const struct td_shape w = shape_wide(nch, n, queue_bytes, 1, ll128, mem);
  const uint64_t budget = mem->comm_memory, p = (uint64_t)(n - 1);
  struct td_shape h = w;
  uint64_t ce = budget / 4 / (TD_CE_SLOTS * p) / (64 << 10) * (64 << 10);
  h.ce_slot = w.ce_slot == 0 || ce < TD_FIT_CE_SLOT ? 0 : min_u64(ce, w.ce_slot);
  h.mapped_nch = pow2_floor(budget / 4 / (p * TD_FIT_CHAN), 8, TD_MAPPED_CHANNELS);
  h.chan =
      w.chan == 0 ? 0 : min_u64(budget / 4 / (p * (uint64_t)h.mapped_nch) / 4096 * 4096, w.chan);
  h.chan = h.chan < 8192 ? 0 : h.chan;
  h.ll_nch =
      pow2_floor(budget / 32 / (p * 2 * TD_MAPPED_LL_CHANNEL_BYTES), 4, TD_MAPPED_LL_CHANNELS);
  h.ll128_chan = 0;
  if (w.ll128_chan > 0 && h.chan > 0) {
    const uint64_t c = budget / 8 / (p * (uint64_t)h.mapped_nch) / 4096 * 4096;
    h.ll128_chan = c < 4096 ? 0 : min_u64(c, w.ll128_chan);
  }
  const uint64_t inboxes =
      TD_CE_SLOTS * p * h.ce_slot + p * (uint64_t)h.mapped_nch * h.chan +
      (h.chan > 0 ? p * 2 * (uint64_t)h.ll_nch * TD_MAPPED_LL_CHANNEL_BYTES : 0) +
      p * (uint64_t)h.mapped_nch * h.ll128_chan +
      /* their flags and acks, the copy engines' flags, alignment */
      2 * p * TD_MAPPED_CHANNELS * TD_LINE + p * TD_LINE + 4 * 4096;
  const uint64_t rest = budget > inboxes ? budget - inboxes : 0;
  for (h.nch = nch < TD_FIT_CHANNELS ? nch : TD_FIT_CHANNELS;; h.nch /= 2) {
    h.all = td_all_peer_channels(n) < h.nch ? td_all_peer_channels(n) : h.nch;
    h.all = n > 2 && h.all > TD_FIT_ALL ? TD_FIT_ALL : h.all;
    h.loop = h.nch < TD_FIT_LOOP ? h.nch : TD_FIT_LOOP;
    const uint64_t lines = (uint64_t)h.nch * (uint64_t)n;
    const uint64_t fixed = lines * (3 * TD_LINE + (uint64_t)TD_SLOTS * TD_LL_LINES * 16);
    const uint64_t queues = (uint64_t)h.all * p + (uint64_t)(h.nch - h.all) + (uint64_t)h.loop;
    const uint64_t q = rest > fixed ? (rest - fixed) / queues / (64 << 10) * (64 << 10) : 0;
    h.queue = min_u64(q, w.queue);
    if (h.queue >= TD_FIT_QUEUE || h.nch == 1) {
      break;
    }
  }
  /* Too small a budget for its ranks: one channel of the smallest queues tune makes. */
  h.queue = h.queue < (64 << 10) ? min_u64(64 << 10, w.queue) : h.queue;
  return h;
}

void td_layout_make(struct td_layout* l, int nch, int n, size_t queue_bytes, int gpu_regions,
                    int ll128, const struct tutti_dev_sizes* mem) {
  const struct td_shape h = gpu_regions && n > 1 && mem->comm_memory > 0
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
