/* Where everything lies in a rank's shared region and in its private
 * counters (the offsets of struct td_layout, work.h): the ring's counters,
 * queues and LL slots, the mapped kernel's flags and inboxes (mapped.h), the
 * copy-engine path's flags and inboxes (ce.h). */
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

void td_layout_make(struct td_layout* l, int nch, int n, size_t queue_bytes, int gpu_regions,
                    int ll128, const struct tutti_dev_sizes* mem) {
  const uint64_t chan_bytes = mapped_chan_bytes(n, gpu_regions, mem->mapped_memory);
  const uint64_t ll128_chan = ll128 ? ll128_chan_bytes(n, chan_bytes, mem->mapped_ll128_memory) : 0;
  const uint64_t ce_slot = ce_slot_bytes(n, gpu_regions, mem->ce_memory);
  const uint64_t lines = (uint64_t)nch * (uint64_t)n;
  uint64_t o = 0; /* the shared region */
  l->tail_off = o;
  o += lines * TD_LINE;
  l->head_off = o;
  o += lines * TD_LINE;
  l->len_off = o;
  o += lines * TD_LINE;
  o = (o + 4095) & ~(uint64_t)4095;
  const int all = td_all_peer_channels(n) < nch ? td_all_peer_channels(n) : nch;
  l->queue_off = o;
  l->queue_bytes = queue_bytes;
  l->all_nch = (uint64_t)all;
  o += (uint64_t)all * (uint64_t)(n - 1) * queue_bytes;
  l->ring_off = o;
  o += n > 1 ? (uint64_t)(nch - all) * queue_bytes : 0;
  l->loop_off = o;
  o += (uint64_t)(nch < TD_LOOP_CHANNELS ? nch : TD_LOOP_CHANNELS) * queue_bytes;
  l->ll_off = o;
  o += lines * (uint64_t)TD_SLOTS * TD_LL_LINES * 16;
  const uint64_t dchans = chan_bytes > 0 ? (uint64_t)(n - 1) * TD_MAPPED_CHANNELS : 0;
  l->dflag_off = o;
  o += dchans * TD_LINE;
  l->dack_off = o;
  o += dchans * TD_LINE;
  o = (o + 4095) & ~(uint64_t)4095;
  l->inbox_off = o;
  l->chan_bytes = chan_bytes;
  o += dchans * chan_bytes;
  l->ll_inbox_off = o;
  o += chan_bytes > 0 ? (uint64_t)(n - 1) * 2 * TD_MAPPED_LL_CHANNELS * TD_MAPPED_LL_CHANNEL_BYTES
                      : 0;
  o = (o + 4095) & ~(uint64_t)4095;
  l->ll128_inbox_off = o;
  l->ll128_chan_bytes = ll128_chan;
  o += dchans * ll128_chan;
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
