/* The device side of one-sided operations (rma/rma_dev.h): what a device
 * communicator keeps for them. Signals are counted in pinned host memory
 * that the GPU maps: the host side raises them (the service thread once a
 * put's data is in place, a host function for puts to this rank) and a
 * one-thread kernel on the waiting stream waits for them, so a wait is
 * ordered on its stream and can be captured in a graph. Data to other ranks
 * leaves through the host sender (staged through pinned memory when it is
 * device memory); data that arrives is copied into device windows by the
 * service thread (docs/design.md, "One-sided operations on device buffers"). */
#ifndef TUTTI_DEVICE_RMA_RMA_H
#define TUTTI_DEVICE_RMA_RMA_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

#include "rma/rma_dev.h"

/* Device-memory data to other ranks is staged in pieces of this size. */
#define TD_RMA_STAGE_BYTES (4u << 20)
/* Descriptors one wait kernel takes (more: several kernels in a row). */
#define TD_RMA_WAIT_DESCS 32

struct td_rma_call; /* a host function's argument (rma_put.cu) */

struct td_rma {
  int nranks, nctx, nsig;
  /* [ctx][sig][origin]: signals raised (pinned host memory, mapped), and
   * the same seen by the GPU; the part waits consumed (device memory, only
   * wait kernels touch it, in the communicator's order). */
  uint64_t* arrived;
  uint64_t* arrived_dev;
  uint64_t* consumed;
  char* stage;       /* pinned: device data on its way out, made at the first such put */
  cudaStream_t copy; /* the service thread's copies into device windows */
  pthread_mutex_t lock;
  /* Host functions' arguments a captured graph may replay: freed at stop. */
  struct td_rma_call** kept;
  int nkept, cap_kept;
  char why[512]; /* the first failure of a host function (TD_STOP_RMA) */
};

/* The window as this rank keeps it: its own device buffer. */
struct tutti_rma_dev_win {
  char* buff;
  size_t size;
};

/* Index of signal (ctx, sig) from `origin`. */
static inline size_t td_rma_index(const struct td_rma* r, int ctx, int sig, int origin) {
  return ((size_t)ctx * (size_t)r->nsig + (size_t)sig) * (size_t)r->nranks + (size_t)origin;
}

#endif
