/* The copy-engine path (see ce.h): the combining kernel, and when and how a
 * call is split into pieces of copies and kernels. */
#include <stdint.h>

#include "device/launch/ce.h"
#include "device/dev_comm.h"
#include "device/kernels/mapped.h"
#include "device/kernels/mapped_fold.cuh"
#include "device/kernels/kernel.h"
#include "device/kernels/pass.cuh"
#include "device/kernels/sync.cuh"

extern "C" {
#include "util/check.h"
}

/* Rank `at`'s flag for the pieces of rank `from`. */
__host__ __device__ static inline uint64_t* td_ce_flag(char* const* base, const td_layout& L,
                                                       int at, int from) {
  return (uint64_t*)(base[at] + L.ce_flag_off + (uint64_t)td_peer_slot(from, at) * TD_LINE);
}

/* Rank `at`'s inbox slot for data from rank `from`. */
__host__ __device__ static inline char* td_ce_inbox(char* const* base, const td_layout& L, int at,
                                                    int from, uint64_t slot) {
  const uint64_t i = (uint64_t)td_peer_slot(from, at) * TD_CE_SLOTS + slot;
  return base[at] + L.ce_inbox_off + i * L.ce_slot_bytes;
}

/* This rank's share of the piece: block `b`'s slice of it. */
__device__ void td_ce_work(const td_ce& w, const td_op& op, td_devcomm* dc, uint64_t b0,
                           uint64_t blen) {
  const int n = dc->nranks, me = dc->rank;
  const td_layout& L = dc->lay;
  const uint64_t at = w.off + b0;
  if (w.coll == TD_D_ALLREDUCE || w.coll == TD_D_REDUCESCATTER ||
      (w.coll == TD_D_REDUCE && me == w.root)) {
    td_fold f;
    for (int q = 0; q < n; q++) {
      f.src[q] = q == me ? w.in + (w.coll == TD_D_REDUCESCATTER ? (uint64_t)me * w.part : 0) + at
                         : td_ce_inbox(dc->base, L, me, q, w.slot) + b0;
    }
    f.nsrc = n;
    f.scaled = -1;
    f.e_mid = td_binary_eop(op, 0, 0);
    f.e_last = td_binary_eop(op, 0, 1);
    f.dst = w.out + at;
    f.len = blen;
    f.tid = threadIdx.x;
    f.nth = blockDim.x;
    td_fold_typed(&op, 0, &f);
    return;
  }
  for (int q = 0; q < n; q++) {
    const int here = w.coll == TD_D_ALLGATHER || (w.coll == TD_D_BROADCAST && q == w.root);
    if (!here) {
      continue;
    }
    const char* src = q == me ? w.in + at : td_ce_inbox(dc->base, L, me, q, w.slot) + b0;
    char* dst = w.out + (w.coll == TD_D_ALLGATHER ? (uint64_t)q * w.part : 0) + at;
    if (src != dst) {
      td_pass p = {src, NULL, dst, NULL, blen, (int)threadIdx.x, (int)blockDim.x};
      td_copy_pass(&op, &p);
    }
  }
}

__global__ void __launch_bounds__(TD_MAX_THREADS, 1) td_ce_kernel(const __grid_constant__ td_ce w) {
  td_devcomm* dc = w.comm;
  const td_layout& L = dc->lay;
  const int n = dc->nranks, me = dc->rank, tid = threadIdx.x;
  __shared__ int s_stop;
  if (tid == 0) {
    s_stop = 0;
  }
  /* This rank's copies of the piece landed before the kernel started (stream
   * order); block 0 says so to every peer, which also tells each that this
   * rank is past its previous piece. */
  if (blockIdx.x == 0 && tid < n && tid != me) {
    if (tid == (me == 0 ? 1 : 0)) {
      td_kernel_started(dc, w.tag);
    }
    __threadfence_system();
    td_st_release(td_ce_flag(dc->base, L, tid, me), w.seq);
  }
  __syncthreads();
  if (tid < n && tid != me && !td_wait_ge(td_ce_flag(dc->base, L, me, tid), w.seq, dc)) {
    s_stop = 1;
  }
  __syncthreads();
  if (!s_stop) {
    td_op op = {};
    op.type = w.type;
    op.kind = w.kind;
    op.elem_size = w.elem_size;
    op.divisor = w.divisor;
    uint64_t b0, blen;
    td_chan_slice(w.len, (int)gridDim.x, (int)blockIdx.x, &b0, &blen);
    td_ce_work(w, op, dc, b0, blen);
  }
  __syncthreads();
  if (tid == 0) {
    td_block_done(dc);
  }
}

extern "C" int td_ce_attributes(struct cudaFuncAttributes* a) {
  return (int)cudaFuncGetAttributes(a, td_ce_kernel);
}

extern "C" int td_ce_launch(const struct td_ce* w, int nblocks, int nthreads, cudaStream_t stream) {
  td_ce_kernel<<<nblocks, nthreads, 0, stream>>>(*w);
  return (int)cudaGetLastError();
}

/* Host side: which calls, and their pieces. */

static ncclResult_t ce_cuda(cudaError_t e, const char* what) {
  return tutti_error(ncclUnhandledCudaError, "%s failed on the copy-engine path: %s", what,
                     cudaGetErrorString(e));
}

/* The copies and the kernel of one piece. Copies run on the path's own
 * stream, a piece ahead of the kernels: piece k's copies into a peer's slot
 * k % TD_CE_SLOTS wait for this rank's kernel of piece k - TD_CE_SLOTS + 1,
 * which heard that the peer started that piece, so finished the slot's last
 * reader, piece k - TD_CE_SLOTS. Piece k's kernel waits for its copies. */
static ncclResult_t ce_piece(struct tutti_dev_comm* dc, struct td_ce* w, int nb, int threads,
                             cudaStream_t stream) {
  const int n = dc->nranks, me = dc->rank;
  w->seq = ++dc->ce_seq;
  w->slot = w->seq % TD_CE_SLOTS;
  cudaError_t e = cudaSuccess;
  if (w->seq >= TD_CE_SLOTS) {
    e = cudaStreamWaitEvent(dc->ce_copy, dc->ce_done[(w->seq + 1) % TD_CE_SLOTS], 0);
  }
  for (int q = 0; q < n && e == cudaSuccess; q++) {
    if (q == me || !td_dsends(w->coll, w->root, me, q)) {
      continue;
    }
    const char* src = w->in + (w->coll == TD_D_REDUCESCATTER ? (uint64_t)q * w->part : 0) + w->off;
    char* dst = td_ce_inbox(dc->base, dc->lay, q, me, w->slot);
    e = cudaMemcpyAsync(dst, src, w->len, cudaMemcpyDefault,
                        dc->ce_copy); /* src may be host memory */
  }
  if (e == cudaSuccess) {
    /* A graph keeps these addresses (a suspend then keeps cudaMalloc regions). */
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    e = cudaStreamIsCapturing(stream, &cs);
    dc->ce_in_graph |= cs == cudaStreamCaptureStatusActive;
  }
  if (e == cudaSuccess) {
    e = cudaEventRecord(dc->ce_copied, dc->ce_copy);
  }
  if (e == cudaSuccess) {
    e = cudaStreamWaitEvent(stream, dc->ce_copied, 0);
  }
  if (e != cudaSuccess) {
    return ce_cuda(e, "issuing the copies to the peers");
  }
  e = (cudaError_t)td_ce_launch(w, nb, threads, stream);
  if (e == cudaSuccess) {
    e = cudaEventRecord(dc->ce_done[w->seq % TD_CE_SLOTS], stream);
  }
  return e == cudaSuccess ? ncclSuccess : ce_cuda(e, "launching the combining kernel");
}

extern "C" ncclResult_t td_ce_run(struct tutti_dev_comm* dc, const struct tutti_dev_op* op) {
  const struct tutti_coll_args* a = op->args;
  const struct tutti_plan* plan = op->plan;
  struct td_ce w = {};
  w.comm = dc->d_comm;
  w.tag = op->ras_op;
  w.in = (const char*)op->bufs[TUTTI_BUF_SEND];
  w.out = (char*)op->bufs[TUTTI_BUF_RECV];
  w.part = a->count * a->elem_size;
  w.divisor = op->redop.divisor ? op->redop.divisor : 1;
  w.coll = (uint8_t)td_dcoll(a->coll);
  w.type = (uint8_t)op->redop.type;
  w.kind = (uint8_t)op->redop.kind;
  w.elem_size = (uint8_t)a->elem_size;
  w.root = a->root;
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  /* The copies start once the stream reached the call, which the launch
   * order (order.cu) put after the communicator's previous launch: pieces
   * are numbered in one order on every rank. */
  cudaError_t e = cudaEventRecord(dc->ce_start, op->stream);
  if (e == cudaSuccess) {
    e = cudaStreamWaitEvent(dc->ce_copy, dc->ce_start, 0);
  }
  ncclResult_t res = e == cudaSuccess ? ncclSuccess : ce_cuda(e, "ordering the call's streams");
  const uint64_t piece = plan->piece_bytes;
  for (uint64_t off = 0; off < w.part && res == ncclSuccess; off += piece) {
    w.off = off;
    w.len = w.part - off < piece ? w.part - off : piece;
    const int last = off + piece >= w.part;
    res = ce_piece(dc, &w, last ? plan->last_blocks : plan->blocks, plan->threads, op->stream);
  }
  td_dev_leave(&g);
  return res;
}
