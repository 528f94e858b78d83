/* When the direct path runs a collective, and its launch parameters. It
 * takes single collectives (not groups) between GPUs that map each other's
 * memory; every choice is a function of the call's arguments and of the
 * environment only, so that every rank launches the same grid.
 *
 * Sizes (measured on 2 x H200, bench/RESULTS.md, 2026-11-30): one handshake
 * instead of a ring's three halves the time of small collectives (LL lines,
 * up to 1 MB), and with every thread pushing and the combine inlined it
 * beats the ring to 16 MB per rank (8 MB allreduce 45.6 against 55.4 us,
 * reduce-scatter and all-gather of 8 MB per rank 47.9 / 47.1 against
 * 58.0 / 53.7); from 32 MB the ring's pipeline, which overlaps the link and
 * the reduction in every block, catches up. A broadcast's ring is a plain
 * chain that already runs at the link: direct is slower from 8 MB. So by
 * default the direct path takes two ranks up to 16 MB per rank (broadcasts
 * 4 MB). With more ranks an allreduce, broadcast or reduce pushes n-1
 * copies of the buffer out of one GPU: up to 1 MB (not measured on more
 * than two GPUs). TUTTI_DEVICE_DIRECT_MAX_BYTES sets the limit. */
#include <stdlib.h>

#include "device/dev_comm.h"
#include "device/direct.h"
#include "device/kernel.h"

extern "C" {
#include "tune/tune.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
}

static TUTTI_PARAM(direct_on, "TUTTI_DEVICE_DIRECT", 1);
/* -1: 16 MB with two ranks (broadcasts 4 MB), 1 MB with more (see above). */
static TUTTI_PARAM(direct_max, "TUTTI_DEVICE_DIRECT_MAX_BYTES", -1);
/* Bytes per block: fewer bytes per block means more blocks for mid sizes. */
static TUTTI_PARAM(block_bytes, "TUTTI_DEVICE_DIRECT_BLOCK_BYTES", 32 * 1024);
/* Up to this many bytes per rank, LL lines (no fence, no flag round trip). */
static TUTTI_PARAM(ll_max, "TUTTI_DEVICE_DIRECT_LL_MAX_BYTES", 1 << 20);
static TUTTI_PARAM(ll_block_bytes, "TUTTI_DEVICE_DIRECT_LL_BLOCK_BYTES", 2 * 1024);
static TUTTI_PARAM(ll_threads, "TUTTI_DEVICE_DIRECT_LL_THREADS", 256);
/* From LL's limit up to this many bytes per rank, LL128 lines (no fence,
 * no flag round trip, 94% of the link's bytes data). 0 by default until
 * measured against the simple rounds on NVLink (bench/RESULTS.md,
 * 2026-12-01): NCCL_PROTO=LL128, or this limit, turns them on. */
static TUTTI_PARAM(ll128_max, "TUTTI_DEVICE_DIRECT_LL128_MAX_BYTES", 0);
static TUTTI_PARAM(ll128_block_bytes, "TUTTI_DEVICE_DIRECT_LL128_BLOCK_BYTES", 32 * 1024);
/* Bytes of lines per LL128 round (a slot of the lane's inbox). */
static TUTTI_PARAM(ll128_round_bytes, "TUTTI_DEVICE_DIRECT_LL128_ROUND_BYTES", 32 * 1024);
/* Bytes per simple round: a block's part moves in rounds this size, each
 * pushed while the previous one is combined. 64 KB: a block of the default
 * 32 KB moves in one round (16 KB rounds took 31.9 against 25.0 us at 2 MB,
 * bench/RESULTS.md). */
static TUTTI_PARAM(round_bytes, "TUTTI_DEVICE_DIRECT_ROUND_BYTES", 64 * 1024);

/* Whether this rank's settings let the direct path choose LL128 for some
 * size: only then are its inboxes worth their memory (16 MB per rank). */
extern "C" int td_direct_wants_ll128(void) {
  const int proto = td_protocols();
  return (proto & 4) && (tutti_param_ll128_max() > 0 || !(proto & 2));
}

extern "C" int td_dcoll(int c) {
  switch (c) {
    case TUTTI_COLL_ALLREDUCE:
      return TD_D_ALLREDUCE;
    case TUTTI_COLL_REDUCESCATTER:
      return TD_D_REDUCESCATTER;
    case TUTTI_COLL_ALLGATHER:
      return TD_D_ALLGATHER;
    case TUTTI_COLL_BROADCAST:
      return TD_D_BROADCAST;
    case TUTTI_COLL_REDUCE:
      return TD_D_REDUCE;
    default:
      return -1;
  }
}

/* Non-zero when `op` runs on the direct path. */
static int direct_fits(const struct tutti_dev_comm* dc, const struct tutti_dev_op* op) {
  const struct tutti_coll_args* a = op->args;
  const int n = dc->nranks;
  const int c = td_dcoll(a->coll);
  const size_t bytes = a->count * a->elem_size;
  if (!tutti_param_direct_on() || dc->lay.lane_bytes == 0 || c < 0 || bytes == 0 || n < 2 ||
      n > TD_DIRECT_MAX_RANKS) {
    return 0;
  }
  /* When NCCL_ALGO names the algorithms, only calls tune gave Direct. */
  if (tutti_tune_algo_named() && op->sched->algo != TUTTI_ALGO_DIRECT) {
    return 0;
  }
  const int64_t max = tutti_param_direct_max();
  const size_t two = c == TD_D_BROADCAST ? (size_t)4 << 20 : (size_t)16 << 20;
  if (bytes > (max >= 0 ? (size_t)max : n == 2 ? two : (size_t)1 << 20)) {
    return 0;
  }
  return 1;
}

extern "C" int td_direct_try(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops,
                             ncclResult_t* res) {
  if (nops != 1 || !direct_fits(dc, &ops[0])) {
    return 0;
  }
  const struct tutti_dev_op* op = &ops[0];
  const struct tutti_coll_args* a = op->args;
  struct td_direct w = {};
  w.comm = dc->d_comm;
  w.in = (const char*)op->bufs[TUTTI_BUF_SEND];
  w.out = (char*)op->bufs[TUTTI_BUF_RECV];
  w.scalar_dev = op->scalar_dev;
  w.scalar_bits = op->redop.scalar.u64;
  w.divisor = op->redop.divisor ? op->redop.divisor : 1;
  w.bytes = a->count * a->elem_size;
  w.coll = (uint8_t)td_dcoll(a->coll);
  w.type = (uint8_t)op->redop.type;
  w.kind = (uint8_t)op->redop.kind;
  w.elem_size = (uint8_t)a->elem_size;
  w.root = a->root;
  /* The protocol: LL to its limit, then LL128, then simple rounds; one
   * that NCCL_PROTO leaves out passes its sizes to the next one allowed. */
  const int proto = td_protocols();
  const int ll128_ok = (proto & 4) && dc->lay.ll128_lane_bytes > 0; /* NVLink, agreed */
  if ((proto & 1) && w.bytes <= (uint64_t)tutti_param_ll_max()) {
    w.ll = 1;
  } else if (ll128_ok && w.bytes <= (uint64_t)tutti_param_ll128_max()) {
    w.ll128 = 1;
  } else if (!(proto & 2)) {
    w.ll128 = (uint8_t)ll128_ok;
    w.ll = (uint8_t)!ll128_ok;
  }
  int64_t per = w.ll      ? tutti_param_ll_block_bytes()
                : w.ll128 ? tutti_param_ll128_block_bytes()
                          : tutti_param_block_bytes();
  per = per < 1024 ? 1024 : per;
  if (w.ll) {
    w.round = TD_DIRECT_LL_LANE_BYTES / 2;
    w.slots = 2;
  } else if (w.ll128) {
    const uint64_t lane = dc->lay.ll128_lane_bytes;
    uint64_t sb = (uint64_t)tutti_param_ll128_round_bytes() / 512 * 512;
    sb = sb < 512 ? 512 : sb > lane / 2 ? lane / 2 / 512 * 512 : sb;
    w.slot_bytes = (uint32_t)sb;
    w.slots = (uint32_t)(lane / sb);
    w.round = (uint32_t)(sb / TD_LL128_LINE * TD_LL128_DATA);
  } else {
    uint64_t rb = (uint64_t)tutti_param_round_bytes() / 16 * 16;
    const uint64_t lane = dc->lay.lane_bytes;
    rb = rb < 1024 ? 1024 : rb > lane / 2 ? lane / 2 / 16 * 16 : rb;
    w.round = (uint32_t)rb;
    w.slots = (uint32_t)(lane / rb);
  }
  uint64_t nb = (w.bytes + (uint64_t)per - 1) / (uint64_t)per;
  uint64_t cap = w.ll ? TD_DIRECT_LL_LANES : TD_DIRECT_LANES;
  cap = (uint64_t)dc->direct_ctas < cap ? (uint64_t)dc->direct_ctas : cap;
  w.nb = (uint32_t)(nb < 1 ? 1 : nb > cap ? cap : nb);
  int nt = dc->nthreads / 32 * 32;
  nt = nt < 64 ? 64 : nt;
  if (w.ll) {
    int64_t lt = tutti_param_ll_threads();
    nt = lt < 32 ? 32 : lt > nt ? nt : (int)(lt / 32 * 32);
  }
  INFO(TUTTI_TUNING, "%s of %zu bytes on %d ranks: direct path, %s, %u blocks of %d threads",
       tutti_coll_name((enum tutti_coll)a->coll), (size_t)(a->count * a->elem_size), dc->nranks,
       w.ll      ? "LL"
       : w.ll128 ? "LL128"
                 : "Simple",
       w.nb, nt);
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  int e = td_direct_launch(&w, nt, op->stream);
  td_dev_leave(&g);
  *res = e == 0 ? ncclSuccess
                : tutti_error(ncclUnhandledCudaError, "launching the direct kernel failed: %s",
                              cudaGetErrorString((cudaError_t)e));
  return 1;
}
