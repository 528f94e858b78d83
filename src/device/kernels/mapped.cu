/* The mapped kernel (see mapped.h): block b moves its part of the buffer in
 * rounds through inbox chan b of every peer it sends to. A round s: wait
 * until the peer finished round s - slots (the last user of the same slot),
 * push the data into the peer's inbox, publish it (simple: one system fence
 * and a flag; LL: every 16-byte line carries the round), wait for what the
 * peers pushed, combine it with this rank's own data into the output, and
 * acknowledge. In simple rounds every thread pushes round r, then combines
 * round r - 1 while those stores drain, then one fence publishes round r.
 * Reductions fold every rank's contribution in rank order, so every rank
 * computes the same bits. */
#include <stdint.h>

#include "device/kernels/mapped.h"
#include "device/kernels/kernel.h"
#include "device/kernels/mapped_fold.cuh"
#include "device/kernels/mapped_ll128.cuh"
#include "device/kernels/pass.cuh"
#include "device/kernels/sync.cuh"

/* Who sends to whom (a receiver hears from its senders). */
__device__ __forceinline__ int td_pushes_to(const td_mapped& w, int me, int q) {
  return td_dsends(w.coll, w.root, me, q);
}

__device__ __forceinline__ int td_hears_from(const td_mapped& w, int me, int q) {
  return td_pushes_to(w, q, me);
}

/* The protocol of a loop, known when it is compiled: the simple rounds'
 * code holds none of the LL and LL128 branches (fewer registers live, a
 * smaller kernel). */
enum { TD_P_SIMPLE, TD_P_LL, TD_P_LL128 };

/* Channel `chan`'s inbox slot in rank `at`'s region for data from rank `from`. */
template <int P>
__device__ __forceinline__ char* td_inbox(const td_mapped& w, td_devcomm* dc, int at, int from,
                                          uint64_t slot, int chan) {
  const td_layout& L = dc->lay;
  const uint64_t peer = (uint64_t)td_peer_slot(from, at);
  if (P == TD_P_LL128) {
    return dc->base[at] + L.ll128_inbox_off + (peer * L.mapped_nch + chan) * L.ll128_chan_bytes +
           slot * w.slot_bytes;
  }
  if (P == TD_P_LL) {
    return dc->base[at] + L.ll_inbox_off +
           ((peer * 2 + slot) * L.ll_nch + chan) * (uint64_t)TD_MAPPED_LL_CHANNEL_BYTES;
  }
  return dc->base[at] + L.inbox_off + (peer * L.mapped_nch + chan) * L.chan_bytes + slot * w.round;
}

/* A counter of chan `chan` at `off` in rank `at`'s region, kept for rank `who`. */
__device__ __forceinline__ uint64_t* td_chan_ctr(td_devcomm* dc, int at, uint64_t off, int who,
                                                 int chan) {
  const uint64_t i = (uint64_t)td_peer_slot(who, at) * TD_MAPPED_CHANNELS + chan;
  return (uint64_t*)(dc->base[at] + off + i * TD_LINE);
}

/* Combines what arrived in round `s` (inbox slot `slot`) into the output,
 * as thread `tid` of `nth`, for protocol P. Returns 0 when an LL128 wait
 * ended in an abort or a timeout. Inlined into each protocol's kernel (a
 * call per round cost 4-5% at 2-16 MB on 2 x H200). What a kernel calls
 * costs it stack: each call saves the caller's registers in every thread's
 * frame, and the driver reserves the largest frame beyond 1 KB for every
 * thread the GPU can hold (264 MiB per KB on an H200, bench/RESULTS.md, "Device memory").
 * One kernel for all three protocols, with calls for the rare paths, had a
 * 3064-byte frame (7864 with the protocol a run-time test); one kernel per
 * protocol, with the simple and LL paths inlined, 184 and 328 bytes. */
template <int P>
__device__ __forceinline__ int td_combine(const td_mapped& w, const td_op& op, uint64_t scalar,
                                          td_devcomm* dc, uint64_t s, uint64_t slot, uint64_t off,
                                          uint64_t len, int tid, int nth) {
  const int n = dc->nranks, me = dc->rank, chan = blockIdx.x;
  const int reduce = w.coll == TD_D_ALLREDUCE || w.coll == TD_D_REDUCESCATTER ||
                     (w.coll == TD_D_REDUCE && me == w.root);
  if (reduce) {
    const char* self = w.in + off + (w.coll == TD_D_REDUCESCATTER ? (uint64_t)me * w.bytes : 0);
    const int e_mid = td_binary_eop(op, 0, 0), e_last = td_binary_eop(op, 0, 1);
    const int premul = op.kind == TUTTI_RED_PREMULSUM;
    if (P == TD_P_LL128) {
      td_ll128fold f;
      for (int q = 0; q < n; q++) {
        f.lines[q] = q == me ? NULL : (const uint64_t*)td_inbox<P>(w, dc, me, q, slot, chan);
      }
      f.self = self;
      f.self_idx = me;
      f.scaled = premul;
      f.nsrc = n;
      f.e_mid = e_mid;
      f.e_last = e_last;
      f.flag = s;
      f.dst = w.out + off;
      f.len = len;
      f.dc = dc;
      return td_ll128fold_typed(&op, scalar, &f);
    }
    if (P == TD_P_LL) {
      td_llfold f;
      for (int q = 0; q < n; q++) {
        f.lines[q] = q == me ? NULL : (const uint4*)td_inbox<P>(w, dc, me, q, slot, chan);
      }
      f.self = self;
      f.self_idx = me;
      f.scaled = premul;
      f.nsrc = n;
      f.flag = (uint32_t)s;
      f.e_mid = e_mid;
      f.e_last = e_last;
      f.dst = w.out + off;
      f.len = len;
      f.dc = dc;
      td_llfold_typed(&op, scalar, &f);
    } else {
      td_fold f;
      for (int q = 0; q < n; q++) {
        f.src[q] = q == me ? self : td_inbox<P>(w, dc, me, q, slot, chan);
      }
      f.nsrc = n;
      f.scaled = premul ? me : -1;
      f.e_mid = e_mid;
      f.e_last = e_last;
      f.dst = w.out + off;
      f.len = len;
      f.tid = tid;
      f.nth = nth;
      td_fold_typed(&op, scalar, &f);
    }
    return 1;
  }
  if (w.coll == TD_D_REDUCE) {
    return 1; /* not the root: nothing arrives here */
  }
  /* Allgather and broadcast: copies, each from its inbox (or this rank's input). */
  for (int q = 0; q < n; q++) {
    if (!td_hears_from(w, me, q) && q != me) {
      continue;
    }
    char* dst = w.out + off + (w.coll == TD_D_ALLGATHER ? (uint64_t)q * w.bytes : 0);
    if (q == me) {
      if (w.in + off != dst && (w.coll == TD_D_ALLGATHER || me == w.root)) {
        td_pass p = {w.in + off, NULL, dst, NULL, len, tid, nth};
        td_copy_pass(&op, &p);
      }
      continue;
    }
    const char* box = td_inbox<P>(w, dc, me, q, slot, chan);
    if (P == TD_P_LL128) {
      if (!td_ll128_copy((const uint64_t*)box, s, dst, len, dc)) {
        return 0;
      }
    } else if (P == TD_P_LL) {
      td_llpass lp = {(const uint4*)box, (uint32_t)s, 0, NULL, dst, NULL, len, dc, 0};
      td_ll_typed(&op, scalar, TD_COPY, &lp);
    } else {
      td_pass p = {box, NULL, dst, NULL, len, tid, nth};
      td_copy_pass(&op, &p);
    }
  }
  return 1;
}

/* A PreMulSum contribution scaled on its way out: only this loop per type,
 * not the generic pass's every loop. */
static __device__ __forceinline__ void td_scale_typed(const td_op* op, uint64_t scalar,
                                                      const td_pass* p) {
  td_by_type(op->type, [&](auto tag) {
    td_run_pass<typename decltype(tag)::type, TD_SCALE>(op, scalar, TD_SCALE, p);
  });
}

/* Pushes round s's data (inbox slot `slot`) to every peer this rank sends to. */
template <int P>
__device__ __forceinline__ void td_push(const td_mapped& w, const td_op& op, uint64_t scalar,
                                        td_devcomm* dc, uint64_t s, uint64_t slot, uint64_t off,
                                        uint64_t len, int tid, int nth) {
  const int n = dc->nranks, me = dc->rank;
  const int eop = op.kind == TUTTI_RED_PREMULSUM ? TD_SCALE : TD_COPY;
  for (int q = 0; q < n; q++) {
    if (q == me || !td_pushes_to(w, me, q)) {
      continue;
    }
    const char* src = w.in + off + (w.coll == TD_D_REDUCESCATTER ? (uint64_t)q * w.bytes : 0);
    char* box = td_inbox<P>(w, dc, q, me, slot, blockIdx.x);
    if (P == TD_P_LL128) {
      td_ll128_push_typed(&op, scalar, eop == TD_SCALE, src, (uint64_t*)box, len, s);
    } else if (P == TD_P_LL) {
      td_llpass lp = {NULL, 0, (uint32_t)s, src, NULL, (uint4*)box, len, dc, 0};
      td_ll_typed(&op, scalar, eop, &lp);
    } else {
      td_pass p = {src, NULL, box, NULL, len, tid, nth};
      if (eop == TD_COPY) {
        td_copy_pass(&op, &p);
      } else {
        td_scale_typed(&op, scalar, &p);
      }
    }
  }
}

struct td_chan_run {
  uint64_t seq0; /* the chan's rounds before this launch */
  uint64_t b0;   /* this block's part: offset and length */
  uint64_t blen;
  uint64_t rounds;
};

/* LL rounds: every thread pushes its lines, then reads its peers' lines. */
__device__ void td_run_ll(const td_mapped& w, const td_op& op, uint64_t scalar, td_devcomm* dc,
                          const td_chan_run& lr, int* stop) {
  const int n = dc->nranks, me = dc->rank, chan = blockIdx.x, tid = threadIdx.x;
  for (uint64_t r = 0; r < lr.rounds; r++) {
    const uint64_t s = lr.seq0 + r + 1, off = lr.b0 + r * w.round;
    const uint64_t len = lr.blen - r * w.round < w.round ? lr.blen - r * w.round : w.round;
    if (tid < n && tid != me && td_pushes_to(w, me, tid) && s > 2 &&
        !td_wait_ge(td_chan_ctr(dc, me, dc->lay.dack_off, tid, chan), s - 2, dc)) {
      *stop = 1;
    }
    __syncthreads();
    if (*stop) {
      return;
    }
    td_push<TD_P_LL>(w, op, scalar, dc, s, s & 1, off, len, tid, blockDim.x);
    td_combine<TD_P_LL>(w, op, scalar, dc, s, s & 1, off, len, tid, blockDim.x);
    /* Acknowledging needs no fence: the barrier waited for every load of the
     * inbox. Every peer hears that this rank finished the round, whether it
     * sent anything or not: the next sender into this slot (of any
     * collective) waits for that. */
    __syncthreads();
    if (tid < n && tid != me) {
      *(volatile uint64_t*)td_chan_ctr(dc, tid, dc->lay.dack_off, me, chan) = s;
    }
  }
}

/* Simple rounds, every thread pushing: round r goes out, then (while its
 * stores drain) round r - 1 is waited for and combined, then one fence
 * publishes round r. The combine of round r - 1 writes (in place) only
 * bytes pushed in an earlier round. */
__device__ void td_run_simple(const td_mapped& w, const td_op& op, uint64_t scalar, td_devcomm* dc,
                              const td_chan_run& lr, int* stop) {
  const int n = dc->nranks, me = dc->rank, chan = blockIdx.x, tid = threadIdx.x;
  const td_layout& L = dc->lay;
  for (uint64_t r = 0; r <= lr.rounds; r++) {
    const uint64_t s = lr.seq0 + r + 1, off = lr.b0 + r * w.round;
    const int push = r < lr.rounds;
    if (tid < n && tid != me) {
      int ok = 1;
      if (push && td_pushes_to(w, me, tid) && s > w.slots) {
        ok = td_wait_ge(td_chan_ctr(dc, me, L.dack_off, tid, chan), s - w.slots, dc);
      }
      if (ok && r > 0 && td_hears_from(w, me, tid)) {
        ok = td_wait_ge(td_chan_ctr(dc, me, L.dflag_off, tid, chan), s - 1, dc);
      }
      if (!ok) {
        *stop = 1;
      }
    }
    __syncthreads();
    if (*stop) {
      return;
    }
    if (push) {
      const uint64_t len = lr.blen - off + lr.b0 < w.round ? lr.blen - off + lr.b0 : w.round;
      td_push<TD_P_SIMPLE>(w, op, scalar, dc, s, s % w.slots, off, len, tid, blockDim.x);
    }
    if (r > 0) {
      const uint64_t po = off - w.round;
      const uint64_t plen = lr.blen - po + lr.b0 < w.round ? lr.blen - po + lr.b0 : w.round;
      td_combine<TD_P_SIMPLE>(w, op, scalar, dc, s - 1, (s - 1) % w.slots, po, plen, tid,
                              blockDim.x);
    }
    __syncthreads();
    if (tid == 0 && push) {
      __threadfence_system();
      for (int q = 0; q < n; q++) {
        if (q != me && td_pushes_to(w, me, q)) {
          td_st_release(td_chan_ctr(dc, q, L.dflag_off, me, chan), s);
        }
      }
    }
    if (r > 0 && tid < n && tid != me) {
      *(volatile uint64_t*)td_chan_ctr(dc, tid, L.dack_off, me, chan) = s - 1;
    }
  }
}

/* LL128 rounds: round r goes out, then round r - 1 is read as its lines
 * arrive and combined while round r's stores drain; no fence, no flag. */
__device__ void td_run_ll128(const td_mapped& w, const td_op& op, uint64_t scalar, td_devcomm* dc,
                             const td_chan_run& lr, int* stop) {
  const int n = dc->nranks, me = dc->rank, chan = blockIdx.x, tid = threadIdx.x;
  for (uint64_t r = 0; r <= lr.rounds; r++) {
    const uint64_t s = lr.seq0 + r + 1, off = lr.b0 + r * w.round;
    const int push = r < lr.rounds;
    if (push && tid < n && tid != me && td_pushes_to(w, me, tid) && s > w.slots &&
        !td_wait_ge(td_chan_ctr(dc, me, dc->lay.dack_off, tid, chan), s - w.slots, dc)) {
      *stop = 1;
    }
    __syncthreads();
    if (*stop) {
      return;
    }
    if (push) {
      const uint64_t len = lr.blen - off + lr.b0 < w.round ? lr.blen - off + lr.b0 : w.round;
      td_push<TD_P_LL128>(w, op, scalar, dc, s, s % w.slots, off, len, tid, blockDim.x);
    }
    if (r > 0) {
      const uint64_t po = off - w.round;
      const uint64_t plen = lr.blen - po + lr.b0 < w.round ? lr.blen - po + lr.b0 : w.round;
      if (!td_combine<TD_P_LL128>(w, op, scalar, dc, s - 1, (s - 1) % w.slots, po, plen, tid,
                                  blockDim.x)) {
        *stop = 1;
      }
    }
    /* As in LL: the barrier waited for every load of the inbox. */
    __syncthreads();
    if (*stop) {
      return;
    }
    if (r > 0 && tid < n && tid != me) {
      *(volatile uint64_t*)td_chan_ctr(dc, tid, dc->lay.dack_off, me, chan) = s - 1;
    }
  }
}

template <int P>
__global__ void __launch_bounds__(TD_MAX_THREADS, 1)
    td_mapped_kernel(const __grid_constant__ td_mapped w) {
  td_devcomm* dc = w.comm;
  const td_layout& L = dc->lay;
  const int chan = blockIdx.x, tid = threadIdx.x;
  __shared__ uint64_t s_seq, s_scalar;
  __shared__ int s_stop;
  uint64_t* seqp = (uint64_t*)(dc->priv + L.dseq_off + (uint64_t)chan * TD_LINE);
  if (tid == 0) {
    if (chan == 0) {
      td_kernel_started(dc, w.tag);
    }
    s_seq = *(volatile uint64_t*)seqp;
    s_scalar = td_scalar(w.scalar_dev, w.elem_size, w.scalar_bits);
    s_stop = 0;
  }
  __syncthreads();
  td_op op = {};
  op.type = w.type;
  op.kind = w.kind;
  op.elem_size = w.elem_size;
  op.divisor = w.divisor;
  op.ll = w.ll;
  td_chan_run lr;
  lr.seq0 = s_seq;
  td_chan_slice(w.bytes, (int)w.nb, chan, &lr.b0, &lr.blen);
  lr.rounds = (lr.blen + w.round - 1) / w.round;
  if (P == TD_P_LL128) {
    td_run_ll128(w, op, s_scalar, dc, lr, &s_stop);
  } else if (P == TD_P_LL) {
    td_run_ll(w, op, s_scalar, dc, lr, &s_stop);
  } else {
    td_run_simple(w, op, s_scalar, dc, lr, &s_stop);
  }
  __syncthreads();
  if (tid == 0) {
    *(volatile uint64_t*)seqp = lr.seq0 + lr.rounds;
    td_block_done(dc);
  }
}

/* The kernel of protocol p (enum above). */
typedef void (*td_mapped_fn)(struct td_mapped);
static td_mapped_fn td_mapped_kernel_of(int p) {
  return p == TD_P_LL128 ? td_mapped_kernel<TD_P_LL128>
         : p == TD_P_LL  ? td_mapped_kernel<TD_P_LL>
                         : td_mapped_kernel<TD_P_SIMPLE>;
}

extern "C" int td_mapped_launch(const struct td_mapped* w, int nthreads, cudaStream_t stream) {
  const int p = w->ll128 ? TD_P_LL128 : w->ll ? TD_P_LL : TD_P_SIMPLE;
  void* args[] = {(void*)w};
  return (int)cudaLaunchKernel((const void*)td_mapped_kernel_of(p), dim3(w->nb), dim3(nthreads),
                               args, 0, stream);
}

extern "C" int td_mapped_attributes(int p, struct cudaFuncAttributes* a) {
  return (int)cudaFuncGetAttributes(a, (const void*)td_mapped_kernel_of(p));
}

extern "C" int td_mapped_occupancy(int nthreads, int* per_sm) {
  return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, td_mapped_kernel<TD_P_SIMPLE>,
                                                            nthreads, 0);
}
