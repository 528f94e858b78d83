/* The mapped kernel's launch: a call that tune gave it, run as its plan
 * says (tune/device.c: its lines, its blocks, rounds and threads, fitted
 * to this communicator's inboxes and grid). */
#include <stdlib.h>

#include "device/dev_comm.h"
#include "device/kernels/mapped.h"
#include "device/kernels/kernel.h"

extern "C" {
#include "util/check.h"
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

extern "C" ncclResult_t td_mapped_run(struct tutti_dev_comm* dc, const struct tutti_dev_op* op) {
  const struct tutti_coll_args* a = op->args;
  const struct tutti_plan* plan = op->plan;
  struct td_mapped w = {};
  w.comm = dc->d_comm;
  w.tag = op->ras_op;
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
  w.round = (uint32_t)plan->round_bytes;
  w.slots = (uint32_t)plan->slots;
  w.slot_bytes = (uint32_t)plan->slot_bytes;
  w.nb = (uint32_t)plan->blocks;
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  int e = td_mapped_launch(&w, plan->threads, op->stream);
  td_dev_leave(&g);
  return e == 0 ? ncclSuccess
                : tutti_error(ncclUnhandledCudaError, "launching the mapped kernel failed: %s",
                              cudaGetErrorString((cudaError_t)e));
}
