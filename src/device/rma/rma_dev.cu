/* One-sided operations, device side: the per-communicator state, windows,
 * and what the service thread asks (copies into device windows, signals).
 * Puts and waits on streams: rma_put.cu. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/dev_comm.h"
#include "device/rma/rma.h"

extern "C" {
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"
}

static ncclResult_t rma_fail(cudaError_t e, const char* what) {
  return tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

static void rma_free(struct td_rma* r) {
  if (r == NULL) {
    return;
  }
  if (r->copy != NULL) {
    cudaStreamDestroy(r->copy);
  }
  cudaFreeHost(r->arrived);
  cudaFreeHost(r->stage);
  cudaFree(r->consumed);
  for (int i = 0; i < r->nkept; i++) {
    free(r->kept[i]);
  }
  free(r->kept);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

extern "C" ncclResult_t tutti_dev_rma_start(struct tutti_dev_comm* dc, int nranks, int num_ctx,
                                            int nsignals, int* on_device) {
  *on_device = 0;
  if (dc == NULL) {
    return ncclSuccess;
  }
  struct td_rma* r = (struct td_rma*)calloc(1, sizeof *r);
  if (r == NULL) {
    return tutti_error(ncclSystemError, "out of host memory for one-sided operations");
  }
  pthread_mutex_init(&r->lock, NULL);
  r->nranks = nranks;
  r->nctx = num_ctx;
  r->nsig = nsignals;
  const size_t bytes = (size_t)num_ctx * (size_t)nsignals * (size_t)nranks * sizeof(uint64_t);
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  cudaError_t e =
      cudaHostAlloc((void**)&r->arrived, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  const char* what = "cudaHostAlloc of the signal counters";
  if (e == cudaSuccess) {
    memset(r->arrived, 0, bytes);
    e = cudaHostGetDevicePointer((void**)&r->arrived_dev, r->arrived, 0);
    what = "cudaHostGetDevicePointer of the signal counters";
  }
  if (e == cudaSuccess) {
    e = cudaMalloc((void**)&r->consumed, bytes);
    what = "cudaMalloc of the consumed signal counts";
  }
  if (e == cudaSuccess) {
    e = cudaStreamCreateWithFlags(&r->copy, cudaStreamNonBlocking);
    what = "cudaStreamCreate";
  }
  if (e == cudaSuccess) {
    /* On the communicator's own stream: a device-wide wait could wait for
     * other communicators' kernels. */
    e = cudaMemsetAsync(r->consumed, 0, bytes, r->copy);
    what = "cudaMemsetAsync";
  }
  if (e == cudaSuccess) {
    e = cudaStreamSynchronize(r->copy);
    what = "cudaStreamSynchronize";
  }
  td_dev_leave(&g);
  if (e != cudaSuccess) {
    rma_free(r);
    return rma_fail(e, what);
  }
  dc->rma = r;
  *on_device = 1;
  INFO(TUTTI_INIT,
       "one-sided operations on device %d: %d contexts x %d signals x %d ranks counted "
       "in mapped host memory",
       dc->dev, num_ctx, nsignals, nranks);
  return ncclSuccess;
}

extern "C" void tutti_dev_rma_stop(struct tutti_dev_comm* dc) {
  if (dc == NULL || dc->rma == NULL) {
    return;
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  rma_free(dc->rma);
  dc->rma = NULL;
  td_dev_leave(&g);
}

extern "C" ncclResult_t tutti_dev_rma_win_export(struct tutti_dev_comm* dc, void* buff, size_t size,
                                                 unsigned char out[TUTTI_RMA_DEV_EXPORT]) {
  (void)size;
  memset(out, 0, TUTTI_RMA_DEV_EXPORT);
  cudaPointerAttributes a;
  cudaError_t e = cudaPointerGetAttributes(&a, buff);
  if (e != cudaSuccess) {
    return rma_fail(e, "cudaPointerGetAttributes of the window");
  }
  if (a.type == cudaMemoryTypeDevice && a.device != dc->dev) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommWindowRegister: the buffer %p is memory of GPU %d but the "
                       "communicator's rank %d works on GPU %d: register memory of its own GPU",
                       buff, a.device, dc->rank, dc->dev);
  }
  /* Peers reach this rank's window through its service thread: nothing to
   * export (mapping peers' windows for copy-engine puts is not built). */
  return ncclSuccess;
}

extern "C" ncclResult_t tutti_dev_rma_win_register(struct tutti_dev_comm* dc, uint32_t win_id,
                                                   void* buff, size_t size,
                                                   const struct tutti_rma_peer_win* peers,
                                                   int nranks, struct tutti_rma_dev_win** out) {
  (void)win_id;
  (void)nranks;
  *out = NULL;
  if (peers[dc->rank].kind != TUTTI_MEM_DEVICE) {
    return ncclSuccess; /* this rank's part is host memory: the host path writes it */
  }
  struct tutti_rma_dev_win* w = (struct tutti_rma_dev_win*)calloc(1, sizeof *w);
  if (w == NULL) {
    return tutti_error(ncclSystemError, "out of host memory registering a window");
  }
  w->buff = (char*)buff;
  w->size = size;
  *out = w;
  return ncclSuccess;
}

extern "C" void tutti_dev_rma_win_deregister(struct tutti_dev_comm* dc,
                                             struct tutti_rma_dev_win* w) {
  (void)dc;
  free(w);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

extern "C" ncclResult_t tutti_dev_rma_deliver(struct tutti_dev_comm* dc,
                                              struct tutti_rma_dev_win* w, int origin,
                                              uint64_t offset, const void* src, size_t bytes) {
  struct td_rma* r = dc->rma;
  if (w == NULL || r == NULL || offset > w->size || bytes > w->size - offset) {
    return tutti_error(ncclInternalError,
                       "rank %d: a put from rank %d for %zu bytes at %llu does not fit this "
                       "rank's device window",
                       dc->rank, origin, bytes, (unsigned long long)offset);
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  cudaError_t e = cudaMemcpyAsync(w->buff + offset, src, bytes, cudaMemcpyHostToDevice, r->copy);
  /* The data must be in the window before its signal rises: wait for the
   * copy, bounded, and let an abort end the wait. */
  const double t0 = now_s();
  while (e == cudaSuccess && (e = cudaStreamQuery(r->copy)) == cudaErrorNotReady) {
    if (__atomic_load_n(&dc->host_flags[TD_FLAG_ABORT], __ATOMIC_ACQUIRE) ||
        now_s() - t0 > dc->timeout_s) {
      td_dev_leave(&g);
      return tutti_error(ncclSystemError,
                         "rank %d: copying a put from rank %d into its device window did not "
                         "finish within %.0f s (TUTTI_TIMEOUT), or the communicator was aborted",
                         dc->rank, origin, dc->timeout_s);
    }
    struct timespec ts = {0, 2000};
    nanosleep(&ts, NULL);
  }
  td_dev_leave(&g);
  return e == cudaSuccess ? ncclSuccess : rma_fail(e, "copying a put into a device window");
}

extern "C" ncclResult_t tutti_dev_rma_signal(struct tutti_dev_comm* dc, int origin, int sig,
                                             int ctx) {
  struct td_rma* r = dc->rma;
  if (r == NULL) {
    return tutti_error(ncclInternalError, "rank %d: a signal arrived before one-sided state",
                       dc->rank);
  }
  /* Release: a wait kernel that sees the count sees the data before it. */
  __atomic_fetch_add(&r->arrived[td_rma_index(r, ctx, sig, origin)], 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}
