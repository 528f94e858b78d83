/* One-sided operations on a stream: puts (direct: a copy into the
 * target's mapped window and a kernel raising its counter; through the
 * service communicator: a host function handing the data to the host
 * sender, after staging device data in the stream's pinned memory) and the
 * wait kernel. Each is ordered among the communicator's launches
 * (launch/order.cu) and may be captured into a graph: nothing here waits
 * for the stream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/dev_comm.h"
#include "device/kernels/sync.cuh"
#include "device/rma/land.cuh"
#include "device/rma/rma.h"

extern "C" {
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"
}

/* A host function's work: hand a put (or a piece) to the host sender. */
struct td_rma_call {
  struct tutti_dev_comm* dc;
  struct tutti_rma* rma;
  tutti_rma_send_fn send;
  int peer;
  uint32_t win_id;
  uint64_t offset;
  const void* src;
  size_t bytes;
  int sig, ctx, with_signal;
  int kept; /* a captured graph may run it again: freed at stop, not after running */
};

static ncclResult_t put_fail(cudaError_t e, const char* what) {
  return tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

/* Runs on CUDA's host-function thread: no CUDA calls. A failure stops the
 * communicator's device work with its sentence, which its next call
 * returns (stop.cu). */
static void CUDART_CB run_call(void* arg) {
  struct td_rma_call* c = (struct td_rma_call*)arg;
  struct tutti_dev_comm* dc = c->dc;
  ncclResult_t res = ncclSuccess;
  if (__atomic_load_n(&dc->host_flags[TD_FLAG_ABORT], __ATOMIC_ACQUIRE)) {
    res = ncclInvalidUsage; /* the stop that aborted names the cause */
  } else {
    res = c->send(c->rma, c->peer, c->win_id, c->offset, c->src, c->bytes, c->sig, c->ctx,
                  c->with_signal);
  }
  if (res != ncclSuccess && !__atomic_load_n(&dc->host_flags[TD_FLAG_ABORT], __ATOMIC_ACQUIRE)) {
    struct td_rma* r = dc->rma;
    pthread_mutex_lock(&r->lock);
    if (r->why[0] == '\0') {
      snprintf(r->why, sizeof r->why, "%s", tutti_last_error());
    }
    pthread_mutex_unlock(&r->lock);
    td_raise_stop(dc, TD_STOP_RMA, c->peer);
  }
  if (!c->kept) {
    free(c);
  }
}

/* Enqueues `c` (copied) as a host function on `stream`. */
static ncclResult_t enqueue_call(struct tutti_dev_comm* dc, cudaStream_t stream, int captured,
                                 const struct td_rma_call* c) {
  struct td_rma* r = dc->rma;
  struct td_rma_call* h = (struct td_rma_call*)malloc(sizeof *h);
  if (h == NULL) {
    return tutti_error(ncclSystemError, "out of host memory enqueueing a one-sided operation");
  }
  *h = *c;
  h->kept = captured;
  if (captured) {
    pthread_mutex_lock(&r->lock);
    if (r->nkept == r->cap_kept) {
      int cap = r->cap_kept ? 2 * r->cap_kept : 16;
      struct td_rma_call** k = (struct td_rma_call**)realloc(r->kept, (size_t)cap * sizeof *k);
      if (k == NULL) {
        pthread_mutex_unlock(&r->lock);
        free(h);
        return tutti_error(ncclSystemError, "out of host memory enqueueing a one-sided operation");
      }
      r->kept = k;
      r->cap_kept = cap;
    }
    r->kept[r->nkept++] = h;
    pthread_mutex_unlock(&r->lock);
  }
  cudaError_t e = cudaLaunchHostFunc(stream, run_call, h);
  if (e != cudaSuccess) {
    if (!captured) {
      free(h);
    }
    return put_fail(e, "cudaLaunchHostFunc of a one-sided operation");
  }
  return ncclSuccess;
}

/* Raises a counter by one, after everything the stream did before (the
 * put's copy): system scope, as the reader may be another process. */
__global__ void td_rma_raise_kernel(unsigned long long* ctr) {
  __threadfence_system();
  atomicAdd_system(ctr, 1ull);
}

static ncclResult_t raise_on(cudaStream_t stream, uint64_t* ctr) {
  td_rma_raise_kernel<<<1, 1, 0, stream>>>((unsigned long long*)ctr);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? ncclSuccess : put_fail(e, "launching the one-sided signal kernel");
}

/* A put this rank carries itself: into its own window, or into a peer's it
 * maps, then the target's counter for (sig, ctx) from this rank. */
static ncclResult_t put_direct(struct tutti_dev_comm* dc, const struct tutti_rma_dev_put* p,
                               char* dst, uint64_t* sig) {
  if (p->bytes > 0) {
    cudaError_t e =
        cudaMemcpyAsync(dst + p->offset, p->src, p->bytes, cudaMemcpyDefault, p->stream);
    if (e != cudaSuccess) {
      return put_fail(e, "cudaMemcpyAsync of a put");
    }
  }
  return raise_on(p->stream, sig + td_rma_index(dc->rma, p->ctx, p->sig, dc->rank));
}

static ncclResult_t put_body(struct tutti_dev_comm* dc, const struct tutti_rma_dev_put* p,
                             int captured) {
  struct td_rma_call c;
  memset(&c, 0, sizeof c);
  c.dc = dc;
  c.rma = p->rma;
  c.send = p->send;
  c.peer = p->peer;
  c.win_id = p->win_id;
  c.sig = p->sig;
  c.ctx = p->ctx;
  /* To this rank, or to a peer whose counters (and, for data, window part)
   * this rank maps: no host thread on the way. */
  struct td_rma* r = dc->rma;
  char* dst = p->win != NULL ? p->win->peer[p->peer] : NULL;
  uint64_t* sig = r->peer_sig[p->peer];
  if (p->peer == dc->rank && p->bytes > 0 && dst == NULL) {
    dst = (char*)(uintptr_t)p->target->addr; /* host memory of its own */
  }
  if (sig != NULL && (p->bytes == 0 || dst != NULL)) {
    return put_direct(dc, p, dst, sig);
  }
  if (p->bytes == 0 || p->src_kind != TUTTI_MEM_DEVICE) {
    /* A signal, or host data the host function can read where it is. */
    c.offset = p->offset;
    c.src = p->src;
    c.bytes = p->bytes;
    c.with_signal = 1;
    return enqueue_call(dc, p->stream, captured, &c);
  }
  /* Device data leaves in pieces through pinned staging of the stream's
   * own (a captured put's own: its graph may replay beside the stream):
   * each piece's copy waits (stream order) for the host function that sent
   * the last. */
  unsigned long long sid = 0;
  if (!captured && cudaStreamGetId(p->stream, &sid) != cudaSuccess) {
    return put_fail(cudaGetLastError(), "cudaStreamGetId");
  }
  char* stage = NULL;
  NCCLCHECK(td_rma_stage_get(r, sid, &stage));
  for (size_t off = 0; off < p->bytes; off += TD_RMA_STAGE_BYTES) {
    const size_t n = p->bytes - off < TD_RMA_STAGE_BYTES ? p->bytes - off : TD_RMA_STAGE_BYTES;
    cudaError_t e =
        cudaMemcpyAsync(stage, (const char*)p->src + off, n, cudaMemcpyDeviceToHost, p->stream);
    if (e != cudaSuccess) {
      return put_fail(e, "cudaMemcpyAsync staging a put");
    }
    c.offset = p->offset + off;
    c.src = stage;
    c.bytes = n;
    c.with_signal = off + n == p->bytes;
    NCCLCHECK(enqueue_call(dc, p->stream, captured, &c));
  }
  return ncclSuccess;
}

/* The launch's place in the communicator's order around `body`. */
template <class F>
static ncclResult_t ordered(struct tutti_dev_comm* dc, cudaStream_t stream, F body) {
  NCCLCHECK(tutti_dev_comm_error(dc));
  if (dc->rma == NULL) {
    return tutti_error(ncclInternalError, "one-sided operation before its state was made");
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  struct tutti_dev_op op;
  memset(&op, 0, sizeof op);
  op.stream = stream;
  struct td_order_at at;
  ncclResult_t res = td_order_begin(dc, &op, 1, &at);
  if (res == ncclSuccess) {
    res = body(at.capture != 0);
    ncclResult_t end = td_order_end(dc, &op, 1, &at);
    res = res != ncclSuccess ? res : end;
  }
  td_dev_leave(&g);
  return res;
}

extern "C" ncclResult_t tutti_dev_rma_put(struct tutti_dev_comm* dc,
                                          const struct tutti_rma_dev_put* p) {
  return ordered(dc, p->stream, [&](int captured) { return put_body(dc, p, captured); });
}

struct td_rma_wait_args {
  td_devcomm* comm;
  const uint64_t* sig; /* GPU memory: direct puts' raises */
  uint64_t* consumed;
  uint64_t* landed; /* GPU memory: signals applied from the landing */
  td_land_ctl* land_ctl;
  td_land_cursor* land_cur;
  struct td_rma_stall* stall; /* mapped host memory */
  int nranks, nsig;
  int n;
  uint32_t index[TD_RMA_WAIT_DESCS];
  uint32_t count[TD_RMA_WAIT_DESCS];
};

enum { TD_WAIT_IDLE, TD_WAIT_APPLY, TD_WAIT_DONE, TD_WAIT_STOP };

/* Thread 0: leaves what the wait waited for in the stall record (the
 * error that follows reads it). */
__device__ static void wait_stalled(const td_rma_wait_args& a, int i, uint64_t seen) {
  const uint32_t k = a.index[i];
  if (atomicCAS((int*)&a.stall->set, 0, 1) == 0) {
    a.stall->origin = (int)(k % (uint32_t)a.nranks);
    a.stall->sig = (int)(k / (uint32_t)a.nranks % (uint32_t)a.nsig);
    a.stall->ctx = (int)(k / (uint32_t)a.nranks / (uint32_t)a.nsig);
    a.stall->arrived = seen - a.consumed[k];
    a.stall->needed = a.count[i];
    __threadfence_system();
    a.stall->set = 2;
  }
}

/* Thread 0 waits for each descriptor in turn (two may name the same
 * signal) and consumes it; meanwhile the block applies what landed, in
 * order, since the signals it waits for may be behind other records. A
 * wait that outlasts TUTTI_TIMEOUT leaves what it waited for in the stall
 * record and stops the communicator (td_wait_ok); an abort (a failed
 * delivery included) ends it. */
__global__ void __launch_bounds__(TD_RMA_WAIT_THREADS) td_rma_wait_kernel(td_rma_wait_args a) {
  __shared__ int state;
  __shared__ td_land_next rec;
  __shared__ td_land_cursor cur;
  const int t0 = threadIdx.x == 0;
  if (t0) {
    td_kernel_started(a.comm, 0);
    cur = *a.land_cur;
  }
  int i = 0;
  td_spin sp = {0, 0};
  for (;;) {
    if (t0) {
      state = TD_WAIT_IDLE;
      uint64_t seen = 0;
      while (i < a.n) {
        const uint32_t k = a.index[i];
        const uint64_t want = a.consumed[k] + a.count[i];
        seen = a.landed[k] + td_ld_acquire(a.sig + k);
        if (seen < want) {
          break;
        }
        a.consumed[k] = want;
        i++;
      }
      if (i == a.n) {
        state = TD_WAIT_DONE;
      } else {
        const int got = td_land_peek(a.land_ctl, &cur, &rec);
        sp.start = got ? 0 : sp.start; /* progress: the timeout counts from here */
        if (!td_spin_ok<TD_SPIN_COUNTER>(a.comm, &sp)) {
          if (sp.start != 0 && td_now_ns() - sp.start > a.comm->timeout_ns) {
            wait_stalled(a, i, seen);
          }
          state = TD_WAIT_STOP;
        } else if (got) {
          state = TD_WAIT_APPLY;
        }
      }
    }
    __syncthreads();
    const int s = state;
    if (s == TD_WAIT_DONE || s == TD_WAIT_STOP) {
      break;
    }
    if (s == TD_WAIT_APPLY) {
      if (rec.kind == TD_LAND_DATA) {
        td_land_copy(&rec);
      }
      __syncthreads();
      if (t0) {
        td_land_done(a.land_ctl, &cur, &rec, a.landed);
      }
    }
    __syncthreads();
  }
  if (t0) {
    *a.land_cur = cur;
    __threadfence_system();
    td_kernel_finished(a.comm);
  }
}

extern "C" ncclResult_t tutti_dev_rma_wait(struct tutti_dev_comm* dc,
                                           const ncclWaitSignalDesc_t* descs, int ndesc,
                                           cudaStream_t stream) {
  return ordered(dc, stream, [&](int captured) {
    (void)captured;
    struct td_rma* r = dc->rma;
    for (int d0 = 0; d0 < ndesc; d0 += TD_RMA_WAIT_DESCS) {
      td_rma_wait_args a;
      memset(&a, 0, sizeof a);
      a.comm = dc->d_comm;
      a.sig = r->sig_dev;
      a.consumed = r->consumed;
      a.landed = r->landed;
      a.land_ctl = r->land.ctl_dev;
      a.land_cur = r->land.cursor;
      a.stall = r->stall_dev;
      a.nranks = r->nranks;
      a.nsig = r->nsig;
      a.n = ndesc - d0 < TD_RMA_WAIT_DESCS ? ndesc - d0 : TD_RMA_WAIT_DESCS;
      for (int i = 0; i < a.n; i++) {
        const ncclWaitSignalDesc_t* d = &descs[d0 + i];
        a.index[i] = (uint32_t)td_rma_index(r, d->ctx, d->sigIdx, d->peer);
        a.count[i] = (uint32_t)d->opCnt;
      }
      td_rma_wait_kernel<<<1, TD_RMA_WAIT_THREADS, 0, stream>>>(a);
      cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) {
        return put_fail(e, "launching the one-sided wait kernel");
      }
    }
    return ncclSuccess;
  });
}
