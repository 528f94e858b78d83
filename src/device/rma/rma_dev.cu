/* One-sided operations, device side: the per-communicator state, windows
 * (exported to this host's peers and mapped from them), and what the
 * service thread asks (copies into device windows, signals, failures).
 * Puts and waits on streams: rma_put.cu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/dev_comm.h"
#include "device/rma/rma.h"

extern "C" {
#include "util/check.h"
#include "util/cuda.h"
#include "util/log.h"
}

static ncclResult_t rma_fail(cudaError_t e, const char* what) {
  (void)cudaGetLastError();
  return tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

static void rma_free(struct td_rma* r) {
  if (r == NULL) {
    return;
  }
  for (int p = 0; r->peer_sig != NULL && p < r->nranks; p++) {
    if (r->peer_sig_opened[p]) {
      cudaIpcCloseMemHandle(r->peer_sig[p]);
    }
  }
  free(r->peer_sig);
  free(r->peer_sig_opened);
  for (int i = 0; i < r->nstages; i++) {
    cudaFreeHost(r->stages[i].buf);
  }
  free(r->stages);
  td_land_free(&r->land);
  cudaFreeHost(r->stall);
  cudaFree(r->sig_dev);
  cudaFree(r->consumed);
  for (int i = 0; i < r->nkept; i++) {
    free(r->kept[i]);
  }
  free(r->kept);
  pthread_mutex_destroy(&r->lock);
  (void)cudaGetLastError();
  free(r);
}

/* Pinned host memory the GPU maps: *host, and the GPU's view in *dev. */
static cudaError_t mapped_alloc(void** host, void** dev, size_t bytes) {
  cudaError_t e = cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) {
    memset(*host, 0, bytes);
    e = cudaHostGetDevicePointer(dev, *host, 0);
  }
  return e;
}

static cudaError_t rma_alloc(struct tutti_dev_comm* dc, struct td_rma* r, size_t bytes,
                             size_t max_payload, const char** what) {
  (void)dc;
  *what = "cudaHostAlloc of the wait record";
  cudaError_t e = mapped_alloc((void**)&r->stall, (void**)&r->stall_dev, sizeof *r->stall);
  if (e == cudaSuccess) {
    *what = "cudaMalloc of the signal counters";
    e = cudaMalloc((void**)&r->sig_dev, bytes);
  }
  if (e == cudaSuccess) {
    /* The landing's cursor after them: one allocation. */
    *what = "cudaMalloc of the consumed and landed signal counts";
    e = cudaMalloc((void**)&r->consumed, 2 * bytes + sizeof(struct td_land_cursor));
    r->landed = e == cudaSuccess ? r->consumed + bytes / sizeof *r->consumed : NULL;
  }
  cudaStream_t zero = NULL;
  if (e == cudaSuccess) {
    /* On a stream of its own: a device-wide wait could wait for other
     * communicators' kernels. */
    *what = "cudaStreamCreate";
    e = cudaStreamCreateWithFlags(&zero, cudaStreamNonBlocking);
  }
  if (e == cudaSuccess) {
    *what = "zeroing the signal counters";
    e = cudaMemsetAsync(r->consumed, 0, 2 * bytes, zero);
    e = e == cudaSuccess ? cudaMemsetAsync(r->sig_dev, 0, bytes, zero) : e;
    e = e == cudaSuccess ? cudaStreamSynchronize(zero) : e;
  }
  if (zero != NULL) {
    cudaStreamDestroy(zero);
  }
  if (e == cudaSuccess &&
      td_land_init(&r->land, r->land_limit, max_payload,
                   (struct td_land_cursor*)(r->landed + bytes / sizeof *r->landed),
                   &dc->host_flags[TD_FLAG_ABORT], dc->timeout_s, dc->rank, what) != ncclSuccess) {
    return cudaErrorMemoryAllocation; /* *what names the step */
  }
  /* The counters direct puts raise, for this host's other processes. */
  if (e == cudaSuccess && r->direct && !dc->host_mode) {
    r->sig_exported = cudaIpcGetMemHandle(&r->sig_handle, r->sig_dev) == cudaSuccess;
    (void)cudaGetLastError();
  }
  return e;
}

extern "C" ncclResult_t tutti_dev_rma_start(struct tutti_dev_comm* dc, int nranks, int num_ctx,
                                            int nsignals, size_t max_payload, int* on_device) {
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
  r->direct = dc->rma_direct;
  r->land_limit = dc->rma_landing;
  r->peer_sig = (uint64_t**)calloc((size_t)nranks, sizeof *r->peer_sig);
  r->peer_sig_opened = (int*)calloc((size_t)nranks, sizeof *r->peer_sig_opened);
  if (r->peer_sig == NULL || r->peer_sig_opened == NULL) {
    rma_free(r);
    return tutti_error(ncclSystemError, "out of host memory for one-sided operations");
  }
  const size_t bytes = (size_t)num_ctx * (size_t)nsignals * (size_t)nranks * sizeof(uint64_t);
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  const char* what = "";
  cudaError_t e = rma_alloc(dc, r, bytes, max_payload, &what);
  td_dev_leave(&g);
  if (e != cudaSuccess) {
    rma_free(r);
    return rma_fail(e, what);
  }
  r->peer_sig[dc->rank] = r->sig_dev;
  dc->rma = r;
  *on_device = 1;
  INFO(TUTTI_INIT,
       "one-sided operations on device %d: %d contexts x %d signals x %d ranks, counted in GPU "
       "memory (direct puts%s) and in mapped host memory (the service thread's)",
       dc->dev, num_ctx, nsignals, nranks,
       !r->direct        ? ": off, TUTTI_RMA_DIRECT=0"
       : dc->host_mode   ? ": off, peers share host memory"
       : r->sig_exported ? ""
                         : ": this process's peers only");
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

ncclResult_t td_rma_stage_get(struct td_rma* r, unsigned long long stream_id, char** out) {
  *out = NULL;
  pthread_mutex_lock(&r->lock);
  for (int i = 0; stream_id != 0 && i < r->nstages && *out == NULL; i++) {
    *out = r->stages[i].stream_id == stream_id ? r->stages[i].buf : NULL;
  }
  ncclResult_t res = ncclSuccess;
  if (*out == NULL && r->nstages == r->cap_stages) {
    const int cap = r->cap_stages ? 2 * r->cap_stages : 4;
    struct td_rma_stage* s = (struct td_rma_stage*)realloc(r->stages, (size_t)cap * sizeof *s);
    if (s == NULL) {
      res = tutti_error(ncclSystemError, "out of host memory for one-sided staging");
    } else {
      r->stages = s;
      r->cap_stages = cap;
    }
  }
  if (*out == NULL && res == ncclSuccess) {
    char* buf = NULL;
    /* Also while the caller's stream captures (as a first put may). */
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaHostAlloc((void**)&buf, TD_RMA_STAGE_BYTES, cudaHostAllocPortable);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) {
      res = rma_fail(e, "cudaHostAlloc of one-sided staging");
    } else {
      r->stages[r->nstages++] = {stream_id, buf};
      *out = buf;
      INFO(TUTTI_ALLOC, "one-sided staging %d: %u bytes of pinned host memory (%s)", r->nstages,
           TD_RMA_STAGE_BYTES, stream_id != 0 ? "a stream's" : "a captured put's");
    }
  }
  pthread_mutex_unlock(&r->lock);
  return res;
}

extern "C" ncclResult_t tutti_dev_rma_win_export(struct tutti_dev_comm* dc, void* buff, size_t size,
                                                 int device,
                                                 unsigned char out[TUTTI_RMA_DEV_EXPORT]) {
  (void)size;
  static_assert(sizeof(struct td_rma_export) <= TUTTI_RMA_DEV_EXPORT, "export too large");
  memset(out, 0, TUTTI_RMA_DEV_EXPORT);
  struct td_rma_export x;
  memset(&x, 0, sizeof x);
  x.dev = dc->dev;
  const struct td_rma* r = dc->rma;
  if (r != NULL) {
    x.sig = r->sig_handle;
    x.has_sig = r->sig_exported;
    x.sig_ptr = (uint64_t)(uintptr_t)r->sig_dev;
  }
  if (device) {
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
    x.win_ptr = (uint64_t)(uintptr_t)buff;
    /* Peers of other processes map the allocation that holds it; memory
     * CUDA IPC cannot share (cuMem's) reaches them through the service
     * thread instead. */
    char* base = NULL;
    if (r != NULL && r->sig_exported && td_region_base(buff, &base) &&
        cudaIpcGetMemHandle(&x.win, base) == cudaSuccess) {
      x.win_off = (uint64_t)((char*)buff - base);
      x.has_win = 1;
    }
    (void)cudaGetLastError();
  }
  memcpy(out, &x, sizeof x);
  return ncclSuccess;
}

/* Maps peer p's part of `w` and its counters, where p is a process of this
 * host (or this process on this GPU) that exported them: 1 when mapped. */
static int map_peer(struct tutti_dev_comm* dc, struct tutti_rma_dev_win* w, int p,
                    const struct tutti_rma_peer_win* pw) {
  struct td_rma* r = dc->rma;
  struct td_rma_export x;
  memcpy(&x, pw->dev, sizeof x);
  if (pw->pid == (int32_t)getpid()) {
    if (x.dev != dc->dev) {
      return 0; /* another GPU of this process: the service thread carries it */
    }
    r->peer_sig[p] = (uint64_t*)(uintptr_t)x.sig_ptr;
    w->peer[p] = pw->kind == TUTTI_MEM_DEVICE ? (char*)(uintptr_t)pw->addr : NULL;
    return 1;
  }
  if (r->peer_sig[p] == NULL && x.has_sig) {
    void* ptr = NULL;
    if (cudaIpcOpenMemHandle(&ptr, x.sig, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
      r->peer_sig[p] = (uint64_t*)ptr;
      r->peer_sig_opened[p] = 1;
    }
    (void)cudaGetLastError();
  }
  if (pw->kind == TUTTI_MEM_DEVICE && x.has_win && r->peer_sig[p] != NULL) {
    void* ptr = NULL;
    if (cudaIpcOpenMemHandle(&ptr, x.win, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
      w->opened[p] = (char*)ptr;
      w->peer[p] = (char*)ptr + x.win_off;
    }
    (void)cudaGetLastError();
  }
  return r->peer_sig[p] != NULL;
}

extern "C" ncclResult_t tutti_dev_rma_win_register(struct tutti_dev_comm* dc, uint32_t win_id,
                                                   void* buff, size_t size,
                                                   const struct tutti_rma_peer_win* peers,
                                                   int nranks, struct tutti_rma_dev_win** out) {
  *out = NULL;
  struct tutti_rma_dev_win* w = (struct tutti_rma_dev_win*)calloc(1, sizeof *w);
  if (w != NULL) {
    w->peer = (char**)calloc((size_t)nranks, sizeof *w->peer);
    w->opened = (char**)calloc((size_t)nranks, sizeof *w->opened);
  }
  if (w == NULL || w->peer == NULL || w->opened == NULL) {
    tutti_dev_rma_win_deregister(dc, w);
    return tutti_error(ncclSystemError, "out of host memory registering a window");
  }
  w->nranks = nranks;
  if (peers[dc->rank].kind == TUTTI_MEM_DEVICE) {
    w->buff = (char*)buff;
    w->size = size;
    w->peer[dc->rank] = (char*)buff;
  }
  int direct = 0;
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  for (int p = 0; dc->rma != NULL && dc->rma->direct && !dc->host_mode && p < nranks; p++) {
    if (p != dc->rank && !dc->remote[p] && dc->pids[p] != 0) {
      direct += map_peer(dc, w, p, &peers[p]);
    }
  }
  td_dev_leave(&g);
  INFO(TUTTI_INIT, "rank %d: window #%u reaches %d of its %d peers directly (peer memory)",
       dc->rank, win_id, direct, nranks - 1);
  *out = w;
  return ncclSuccess;
}

extern "C" void tutti_dev_rma_win_deregister(struct tutti_dev_comm* dc,
                                             struct tutti_rma_dev_win* w) {
  if (w == NULL) {
    return;
  }
  if (dc->rma != NULL && w->buff != NULL) {
    const int n = td_land_drop(&dc->rma->land, w->buff, w->buff + w->size);
    if (n > 0) {
      WARN(
          "rank %d: %d puts into a device window not yet waited for were dropped as it was "
          "deregistered: deregister a window only once the signals of every put into it were "
          "waited for",
          dc->rank, n);
    }
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  for (int p = 0; w->opened != NULL && p < w->nranks; p++) {
    if (w->opened[p] != NULL) {
      cudaIpcCloseMemHandle(w->opened[p]);
    }
  }
  (void)cudaGetLastError();
  td_dev_leave(&g);
  free(w->peer);
  free(w->opened);
  free(w);
}

/* What td_land_offer said, as the service thread reads it. */
static ncclResult_t offered(int r) {
  return r > 0 ? ncclSuccess : r == 0 ? ncclInProgress : ncclRemoteError;
}

extern "C" ncclResult_t tutti_dev_rma_deliver(struct tutti_dev_comm* dc,
                                              struct tutti_rma_dev_win* w, int origin,
                                              uint64_t offset, const void* src, size_t bytes,
                                              int sig, int ctx) {
  struct td_rma* r = dc->rma;
  if (w == NULL || r == NULL || w->buff == NULL || offset > w->size || bytes > w->size - offset) {
    return tutti_error(ncclInternalError,
                       "rank %d: a put from rank %d for %zu bytes at %llu does not fit this "
                       "rank's device window",
                       dc->rank, origin, bytes, (unsigned long long)offset);
  }
  /* Left for this rank's next wait kernel to copy (land.h says why no copy
   * is issued here). */
  const int64_t index = sig >= 0 ? (int64_t)td_rma_index(r, ctx, sig, origin) : -1;
  return offered(td_land_offer(&r->land, origin, w->buff + offset, src, bytes, index));
}

extern "C" ncclResult_t tutti_dev_rma_signal(struct tutti_dev_comm* dc, int origin, int sig,
                                             int ctx) {
  struct td_rma* r = dc->rma;
  if (r == NULL) {
    return tutti_error(ncclInternalError, "rank %d: a signal arrived before one-sided state",
                       dc->rank);
  }
  /* After the data of its put in the landing: the wait kernel that counts
   * it has applied that data. */
  return offered(
      td_land_offer(&r->land, origin, NULL, NULL, 0, (int64_t)td_rma_index(r, ctx, sig, origin)));
}

extern "C" void tutti_dev_rma_fail(struct tutti_dev_comm* dc, int origin, const char* why) {
  struct td_rma* r = dc == NULL ? NULL : dc->rma;
  if (r == NULL) {
    return;
  }
  pthread_mutex_lock(&r->lock);
  if (r->why[0] == '\0') {
    snprintf(r->why, sizeof r->why, "%s", why);
  }
  pthread_mutex_unlock(&r->lock);
  td_raise_stop(dc, TD_STOP_RMA, origin);
}
