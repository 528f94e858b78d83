/* Device calls: which protocol each path uses and how it cuts a call
 * (knobs.c) within what the device communicator offers (struct
 * tutti_dev_caps); the table (table.c) says which path runs a call and
 * why. Every choice is a function of the call's arguments, those
 * capabilities and the environment only, so every rank launches the same
 * way. */
#include <stdint.h>
#include <string.h>

#include "tune/internal.h"
#include "util/log.h"
#include "util/param.h"

static TUTTI_PARAM(min_nchannels, "NCCL_MIN_NCHANNELS", 1,
                   "device calls: the fewest channels the schedules' kernel cuts a call into");

/* The mapped kernel's lines: LL to its limit, then LL128, then simple
 * rounds; a protocol NCCL_PROTO leaves out passes its sizes to the next
 * one allowed. */
static int mapped_proto(const struct tutti_coll_args* a, const struct tutti_dev_caps* c) {
  const size_t bytes = a->count * a->elem_size;
  const int proto = tutti_tune_protocols();
  const int ll128_ok = (proto & TUTTI_PROTO_LL128) && c->ll128_chan_bytes > 0;
  if ((proto & TUTTI_PROTO_LL) && bytes <= (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL)) {
    return TUTTI_PROTO_LL;
  }
  if (ll128_ok && bytes <= (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128)) {
    return TUTTI_PROTO_LL128;
  }
  if (!(proto & TUTTI_PROTO_SIMPLE)) {
    return ll128_ok ? TUTTI_PROTO_LL128 : TUTTI_PROTO_LL;
  }
  return TUTTI_PROTO_SIMPLE;
}

int tutti_tune_device_ll(const struct tutti_coll_args* a, int net) {
  int m = tutti_tune_protocols();
  /* The ring's LL stands in for LL128. */
  m = (m & TUTTI_PROTO_SIMPLE) | ((m & (TUTTI_PROTO_LL | TUTTI_PROTO_LL128)) != 0);
  /* A proxy forwards whole slots after their tail: across hosts, simple only. */
  return !net && (m & TUTTI_PROTO_LL) &&
         (!(m & TUTTI_PROTO_SIMPLE) ||
          a->count * a->elem_size <= (size_t)tutti_tune_knob(TUTTI_KNOB_LL));
}

size_t tutti_tune_device_channels(const struct tutti_coll_args* a) {
  const size_t per = (size_t)tutti_tune_knob(TUTTI_KNOB_CHANNEL);
  size_t ch = (a->count * a->elem_size + per - 1) / per;
  const int64_t lo = tutti_param_min_nchannels();
  return ch < (size_t)lo ? (size_t)lo : ch;
}

/* Blocks one launch may have: what the GPU holds at once, and what the
 * launch's parameters describe. */
static size_t launch_budget(const struct tutti_dev_caps* c) {
  return (size_t)(c->ctas < c->lim.launch_ctas ? c->ctas : c->lim.launch_ctas);
}

/* Channels of the schedules' kernel: a function of the call's arguments
 * only (never of this rank's schedule, whose lanes differ between ranks),
 * so that both ends of every connection cut the same steps the same way.
 * The cap keeps a group within the blocks one launch holds: a ring's lanes
 * are few, a Direct algorithm has up to two per peer, and point-to-point
 * calls come in groups of a send and a receive per peer. Beyond the
 * channels every peer has queues on, a rank's queues hear only from the
 * ring's previous rank (device/work.h). Ranks must run the same GPU model. */
static int schedule_channels(const struct tutti_coll_args* a, enum tutti_algo_id algo,
                             const struct tutti_dev_caps* c) {
  size_t ch = tutti_tune_device_channels(a);
  /* The call's own bounds (ncclCollConfig_t minCTAs, maxCTAs), before the
   * caps below: those keep the launch whole. */
  ch = a->min_channels > 0 && ch < (size_t)a->min_channels ? (size_t)a->min_channels : ch;
  ch = a->max_channels > 0 && ch > (size_t)a->max_channels ? (size_t)a->max_channels : ch;
  ch = ch > (size_t)c->channels ? (size_t)c->channels : ch;
  size_t cap = (size_t)c->lim.op_ctas / 2; /* ring lanes: at most two on any rank */
  int every = c->lim.op_ctas / (2 * a->nranks);
  every = c->all_channels > 0 && c->all_channels < every ? c->all_channels : every;
  const size_t all = (size_t)(every < 1 ? 1 : every);
  if (a->coll == TUTTI_COLL_SEND || a->coll == TUTTI_COLL_RECV) {
    cap = launch_budget(c) / (2 * (size_t)a->nranks);
    cap = cap > all ? all : cap;
    /* A rank's sends to itself go through its loopback queues. */
    cap = a->root == a->rank && cap > (size_t)c->lim.loop_channels ? (size_t)c->lim.loop_channels
                                                                   : cap;
  } else if (algo != TUTTI_ALGO_RING || tutti_algo_ordered(a, algo)) {
    cap = all; /* deterministic mode's "Ring" talks to every peer (algo/ordered.c) */
  }
  ch = ch > cap ? cap : ch;
  return ch < 1 ? 1 : (int)ch;
}

/* The most lanes any rank's schedule of `a` has. */
static size_t lanes_bound(const struct tutti_coll_args* a, enum tutti_algo_id algo) {
  if (a->coll == TUTTI_COLL_SEND || a->coll == TUTTI_COLL_RECV) {
    return 1;
  }
  return algo == TUTTI_ALGO_RING && !tutti_algo_ordered(a, algo) ? 2 : 2 * (size_t)a->nranks;
}

/* Blocks of a copy-engine piece of `len` bytes. */
static int ce_blocks(uint64_t len, uint64_t block_bytes, const struct tutti_dev_caps* c) {
  const uint64_t nb = len / block_bytes;
  return nb < 1 ? 1 : nb > (uint64_t)c->ctas ? c->ctas : (int)nb;
}

/* The copy engines: pieces of ce.piece (16-byte aligned, at most an inbox
 * slot), blocks of ce.block bytes each of the combining kernel, on every
 * block the GPU holds at most. */
static void cut_ce(const struct tutti_coll_args* a, const struct tutti_dev_caps* c,
                   struct tutti_plan* p) {
  const uint64_t part = a->count * a->elem_size;
  const uint64_t block = (uint64_t)tutti_tune_knob(TUTTI_KNOB_CE_BLOCK);
  uint64_t piece = (uint64_t)tutti_tune_knob(TUTTI_KNOB_CE_PIECE) / 16 * 16;
  const uint64_t slot = c->ce_slot_bytes / 16 * 16;
  piece = piece < 4096 ? 4096 : piece > slot ? slot : piece;
  const uint64_t last = part - (part - 1) / piece * piece;
  p->proto = TUTTI_PROTO_SIMPLE;
  p->piece_bytes = (size_t)piece;
  p->blocks = ce_blocks(piece, block, c);
  p->last_blocks = ce_blocks(last, block, c);
  p->threads = c->threads;
  if (tutti_log_wants(TUTTI_LOG_TRACE, TUTTI_TUNING) &&
      tutti_tune_first_sight(1 + tutti_tune_shape(a, TUTTI_PATH_COPY_ENGINES))) {
    TRACE(TUTTI_TUNING, "%s of %zu bytes per rank on %d ranks: copy engines, pieces of %zu bytes",
          tutti_coll_name(a->coll), (size_t)part, a->nranks, (size_t)piece);
  }
}

/* The mapped kernel: blocks of its protocol's bytes, at most its inbox
 * channels and what the GPU holds at once; rounds that fit half an inbox
 * channel (a block pushes one while its peer combines the other). */
static void cut_mapped(const struct tutti_coll_args* a, const struct tutti_dev_caps* c,
                       struct tutti_plan* p) {
  p->proto = mapped_proto(a, c);
  const int ll = p->proto == TUTTI_PROTO_LL, ll128 = p->proto == TUTTI_PROTO_LL128;
  const uint64_t per = (uint64_t)tutti_tune_knob(ll      ? TUTTI_KNOB_MAPPED_LL_BLOCK
                                                 : ll128 ? TUTTI_KNOB_MAPPED_LL128_BLOCK
                                                         : TUTTI_KNOB_MAPPED_BLOCK);
  if (ll) {
    p->round_bytes = (size_t)c->lim.mapped_ll_round;
    p->slots = 2;
  } else if (ll128) {
    const uint64_t chan = c->ll128_chan_bytes;
    uint64_t sb = (uint64_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128_ROUND) / 512 * 512;
    sb = sb < 512 ? 512 : sb > chan / 2 ? chan / 2 / 512 * 512 : sb;
    p->slot_bytes = (size_t)sb;
    p->slots = (int)(chan / sb);
    p->round_bytes = (size_t)(sb / (uint64_t)c->lim.ll128_line * (uint64_t)c->lim.ll128_data);
  } else {
    const uint64_t chan = c->mapped_chan_bytes;
    uint64_t rb = (uint64_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_ROUND) / 16 * 16;
    rb = rb < 1024 ? 1024 : rb > chan / 2 ? chan / 2 / 16 * 16 : rb;
    p->round_bytes = (size_t)rb;
    p->slots = (int)(chan / rb);
  }
  const uint64_t bytes = a->count * a->elem_size;
  const uint64_t nb = (bytes + per - 1) / per;
  uint64_t cap = (uint64_t)(ll ? c->lim.mapped_ll_channels : c->lim.mapped_channels);
  cap = (uint64_t)c->mapped_ctas < cap ? (uint64_t)c->mapped_ctas : cap;
  p->blocks = (int)(nb < 1 ? 1 : nb > cap ? cap : nb);
  int nt = c->threads / 32 * 32;
  nt = nt < 64 ? 64 : nt;
  if (ll) {
    /* LL pieces are a few KB: fewer threads start sooner (mapped.ll_threads). */
    const int lt = (int)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL_THREADS);
    nt = lt > nt ? nt : lt / 32 * 32;
  }
  p->threads = nt;
  if (tutti_log_wants(TUTTI_LOG_TRACE, TUTTI_TUNING) &&
      tutti_tune_first_sight(1 + tutti_tune_shape(a, TUTTI_PATH_MAPPED))) {
    TRACE(TUTTI_TUNING, "%s of %zu bytes on %d ranks: mapped kernel, %s, %d blocks of %d threads",
          tutti_coll_name(a->coll), (size_t)bytes, a->nranks,
          ll      ? "LL"
          : ll128 ? "LL128"
                  : "Simple",
          p->blocks, nt);
  }
}

void tutti_tune_device_cut(const struct tutti_coll_args* a, const struct tutti_dev_caps* c,
                           enum tutti_algo_id pick, enum tutti_algo_id sched,
                           struct tutti_plan* p) {
  if (pick == TUTTI_ALGO_CE) {
    p->path = TUTTI_PATH_COPY_ENGINES;
    p->algo = TUTTI_ALGO_CE;
    cut_ce(a, c, p);
  } else if (pick == TUTTI_ALGO_MAPPED) {
    p->path = TUTTI_PATH_MAPPED;
    p->algo = TUTTI_ALGO_MAPPED;
    cut_mapped(a, c, p);
  } else {
    p->path = TUTTI_PATH_SCHEDULE;
    p->algo = sched;
    p->proto = tutti_tune_device_ll(a, c->net) ? TUTTI_PROTO_LL : TUTTI_PROTO_SIMPLE;
    p->channels = schedule_channels(a, sched, c);
  }
}

void tutti_tune_device_share(const struct tutti_tune_call* calls, int n,
                             const struct tutti_dev_caps* c, struct tutti_plan* plans) {
  /* A group larger than one launch holds runs every call on fewer
   * channels, scaled from a bound of lanes that every rank computes alike. */
  const size_t budget = launch_budget(c);
  size_t est = 0;
  int all_ll = 1;
  for (int i = 0; i < n; i++) {
    est += (size_t)plans[i].channels * lanes_bound(calls[i].args, plans[i].algo);
    all_ll &= plans[i].proto == TUTTI_PROTO_LL;
  }
  /* Low-latency pieces are at most a few KB: half the threads start sooner
   * and finish the same lines (measured: ~1.5 us less at 8 B). */
  const int nt = all_ll && c->threads > 256 ? 256 : c->threads;
  for (int i = 0; i < n; i++) {
    if (est > budget) {
      const size_t scaled = (size_t)plans[i].channels * budget / est;
      plans[i].channels = scaled < 1 ? 1 : (int)scaled;
    }
    plans[i].threads = nt;
  }
  for (int i = 0; i < n && tutti_log_wants(TUTTI_LOG_TRACE, TUTTI_TUNING); i++) {
    const struct tutti_coll_args* a = calls[i].args;
    if (!tutti_tune_first_sight(tutti_tune_shape(a, TUTTI_TUNE_SHAPE_LAUNCH) + (uint64_t)n)) {
      continue;
    }
    TRACE(TUTTI_TUNING,
          "%s of %zu bytes on %d ranks: %s on the schedules' kernel, %s, %d channels%s",
          tutti_coll_name(a->coll), a->count * a->elem_size, a->nranks,
          tutti_algo_get(plans[i].algo)->name, plans[i].proto == TUTTI_PROTO_LL ? "LL" : "Simple",
          plans[i].channels, n > 1 ? " (in a group)" : "");
  }
}
