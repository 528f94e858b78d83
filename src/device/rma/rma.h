/* The device side of one-sided operations (rma/rma_dev.h): what a device
 * communicator keeps for them.
 *
 * Two paths carry a put (docs/design.md, "One-sided operations on device
 * buffers"):
 * - direct, to a peer of this host whose window part and signal counters
 *   this rank maps (CUDA IPC; the same process and GPU: the pointers): the
 *   origin's stream copies the data into the peer's window and a one-thread
 *   kernel raises the peer's counter in its GPU memory. No host thread and
 *   no CUDA call of the target is in the chain its wait depends on.
 * - through the service communicator, to peers of other hosts and where
 *   nothing is mapped: device data is staged in pinned memory of the
 *   stream's own and handed to the host sender from a host function; the
 *   target's service thread leaves what arrives in its landing (land.h),
 *   which the target's wait kernels apply: data into the window, then the
 *   signal's count in GPU memory.
 * A wait kernel on the waiting stream waits for the sum of both counters,
 * so a wait is ordered on its stream and can be captured in a graph. */
#ifndef TUTTI_DEVICE_RMA_RMA_H
#define TUTTI_DEVICE_RMA_RMA_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

#include "device/rma/land.h"
#include "rma/rma_dev.h"

/* Device-memory data to other hosts is staged in pieces of this size. */
#define TD_RMA_STAGE_BYTES (4u << 20)
/* Descriptors one wait kernel takes (more: several kernels in a row). */
#define TD_RMA_WAIT_DESCS 32
/* Threads of the wait kernel's block: it copies landed data. */
#define TD_RMA_WAIT_THREADS 512

struct td_rma_call; /* a host function's argument (rma_put.cu) */

/* What this rank exports of a window and of its counters, inside
 * tutti_rma_peer_win.dev (TUTTI_RMA_DEV_EXPORT bytes). */
struct td_rma_export {
  cudaIpcMemHandle_t win; /* the allocation holding the window (has_win) */
  cudaIpcMemHandle_t sig; /* the device signal counters (has_sig) */
  uint64_t win_off;       /* the window's offset in that allocation */
  uint64_t win_ptr;       /* the window, for peers of this process */
  uint64_t sig_ptr;       /* the counters, for peers of this process */
  int32_t has_win, has_sig;
  int32_t dev; /* this rank's GPU */
  int32_t pad;
};

/* Where a wait kernel gave up (pinned, mapped): written by the kernel
 * before it stops the communicator, read by the error that follows. */
struct td_rma_stall {
  volatile int32_t set;
  int32_t origin, sig, ctx;
  uint64_t arrived, needed;
};

/* A pinned staging buffer of one stream's (or one captured put's). */
struct td_rma_stage {
  unsigned long long stream_id; /* 0: a captured put's own */
  char* buf;
};

struct td_rma {
  int nranks, nctx, nsig;
  /* [ctx][sig][origin]: signals raised by direct puts (GPU memory, exported
   * to this host's peers); the part waits consumed, then signals applied
   * from the landing (one GPU allocation: only this rank's kernels touch
   * them, in the communicator's order). */
  uint64_t* sig_dev;
  uint64_t* consumed;
  uint64_t* landed; /* consumed + nctx * nsig * nranks */
  cudaIpcMemHandle_t sig_handle;
  int sig_exported;
  uint64_t** peer_sig;  /* [nranks]: each peer's sig_dev as mapped here, or NULL */
  int* peer_sig_opened; /* [nranks]: peer_sig[p] came from cudaIpcOpenMemHandle */
  int direct;           /* TUTTI_RMA_DIRECT (tune's): 0 keeps every put on the service path */
  uint64_t land_limit;  /* TUTTI_TUNE rma.landing (tune's): the landing's most pinned bytes */
  struct td_rma_stall* stall;
  struct td_rma_stall* stall_dev;
  /* Pinned staging, one per stream that put device data to a peer of the
   * service path, and one per captured such put (its graph may replay it
   * beside the stream's own work). */
  struct td_rma_stage* stages;
  int nstages, cap_stages;
  /* What the service thread received for this rank's device windows and
   * signals, until a wait kernel applies it (land.h). */
  struct td_land land;
  pthread_mutex_t lock;
  /* Host functions' arguments a captured graph may replay: freed at stop. */
  struct td_rma_call** kept;
  int nkept, cap_kept;
  char why[512]; /* the first failure of a host function or a delivery (TD_STOP_RMA) */
};

/* The window as this rank keeps it: its own device buffer, and each peer's
 * part where this rank maps it (direct puts). */
struct tutti_rma_dev_win {
  char* buff;
  size_t size;
  int nranks;
  char** peer;   /* [nranks]: the peer's part as mapped here, or NULL */
  char** opened; /* [nranks]: what cudaIpcOpenMemHandle gave (closed at deregistration) */
};

/* Index of signal (ctx, sig) from `origin`. */
static inline size_t td_rma_index(const struct td_rma* r, int ctx, int sig, int origin) {
  return ((size_t)ctx * (size_t)r->nsig + (size_t)sig) * (size_t)r->nranks + (size_t)origin;
}

/* The staging buffer of `stream_id` (0: a new one of its own), made at its
 * first use (rma_dev.cu). */
ncclResult_t td_rma_stage_get(struct td_rma* r, unsigned long long stream_id, char** out);

#endif
