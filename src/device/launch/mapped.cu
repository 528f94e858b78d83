/* The mapped kernel's launch: a call that tune gave it (tutti_tune_device:
 * the sizes it takes, its lines, its blocks and rounds, where each was
 * measured) fitted to this communicator's inboxes and grid. Every choice
 * is a function of the call's arguments and of the plan only, so that
 * every rank launches the same grid. */
#include <stdlib.h>

#include "device/dev_comm.h"
#include "device/kernels/mapped.h"
#include "device/kernels/kernel.h"

extern "C" {
#include "tune/tune.h"
#include "util/check.h"
#include "util/log.h"
#include "util/param.h"
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

extern "C" ncclResult_t td_mapped_run(struct tutti_dev_comm* dc, const struct tutti_dev_op* op,
                                      const struct tutti_dev_plan* plan) {
  const struct tutti_coll_args* a = op->args;
  struct td_mapped w = {};
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
  w.ll = plan->proto == TUTTI_PROTO_LL;
  w.ll128 = plan->proto == TUTTI_PROTO_LL128;
  const uint64_t per = plan->block_bytes;
  if (w.ll) {
    w.round = TD_MAPPED_LL_CHANNEL_BYTES / 2;
    w.slots = 2;
  } else if (w.ll128) {
    const uint64_t chan = dc->lay.ll128_chan_bytes;
    uint64_t sb = (uint64_t)plan->round_bytes / 512 * 512;
    sb = sb < 512 ? 512 : sb > chan / 2 ? chan / 2 / 512 * 512 : sb;
    w.slot_bytes = (uint32_t)sb;
    w.slots = (uint32_t)(chan / sb);
    w.round = (uint32_t)(sb / TD_LL128_LINE * TD_LL128_DATA);
  } else {
    uint64_t rb = (uint64_t)plan->round_bytes / 16 * 16;
    const uint64_t chan = dc->lay.chan_bytes;
    rb = rb < 1024 ? 1024 : rb > chan / 2 ? chan / 2 / 16 * 16 : rb;
    w.round = (uint32_t)rb;
    w.slots = (uint32_t)(chan / rb);
  }
  uint64_t nb = (w.bytes + per - 1) / per;
  uint64_t cap = w.ll ? TD_MAPPED_LL_CHANNELS : TD_MAPPED_CHANNELS;
  cap = (uint64_t)dc->mapped_ctas < cap ? (uint64_t)dc->mapped_ctas : cap;
  w.nb = (uint32_t)(nb < 1 ? 1 : nb > cap ? cap : nb);
  int nt = dc->nthreads / 32 * 32;
  nt = nt < 64 ? 64 : nt;
  if (w.ll) {
    const int lt = plan->threads;
    nt = lt > nt ? nt : lt / 32 * 32;
  }
  if (tutti_log_wants(TUTTI_LOG_TRACE, TUTTI_TUNING) &&
      tutti_tune_first_sight(1 + tutti_tune_shape(a, TUTTI_PATH_MAPPED))) {
    TRACE(TUTTI_TUNING, "%s of %zu bytes on %d ranks: mapped kernel, %s, %u blocks of %d threads",
          tutti_coll_name((enum tutti_coll)a->coll), (size_t)(a->count * a->elem_size), dc->nranks,
          w.ll      ? "LL"
          : w.ll128 ? "LL128"
                    : "Simple",
          w.nb, nt);
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  int e = td_mapped_launch(&w, nt, op->stream);
  td_dev_leave(&g);
  return e == 0 ? ncclSuccess
                : tutti_error(ncclUnhandledCudaError, "launching the mapped kernel failed: %s",
                              cudaGetErrorString((cudaError_t)e));
}
