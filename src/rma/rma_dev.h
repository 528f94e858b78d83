/* What one-sided operations ask of the device layer: the hooks src/rma/
 * calls, implemented by the device executor (src/device/rma/) or, without
 * nvcc, by src/device/none.c, which refuses device memory with a sentence.
 * The device layer never calls into src/rma/: what it needs of it (the host
 * sender) comes as a function pointer, so the two stay one-way. */
#ifndef TUTTI_RMA_RMA_DEV_H
#define TUTTI_RMA_RMA_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tutti_dev_comm;
struct tutti_rma;
struct tutti_rma_dev_win; /* the device layer's state of one window */

/* Bytes the device layer may fill, per rank and window, with what peers need
 * to map that rank's device buffer (a cuMem export, an IPC handle). */
#define TUTTI_RMA_DEV_EXPORT 192

/* One rank's part of a window as every rank learns it from the all-gather
 * at registration: peers[r] of every window is rank r's. */
struct tutti_rma_peer_win {
  uint64_t addr;                           /* the registered buffer, in the owner's process */
  uint64_t size;                           /* bytes: puts into it must end at or before this */
  uint32_t kind;                           /* enum tutti_mem of the buffer (util/cuda.h) */
  int32_t pid;                             /* the owner's process */
  uint32_t win_id;                         /* the window's number: the same on every rank */
  uint32_t status;                         /* ncclSuccess, or why this rank's registration failed */
  unsigned char dev[TUTTI_RMA_DEV_EXPORT]; /* tutti_dev_rma_win_export's, for device buffers */
};

/* The host sender for host functions (src/rma/outbox.c, tutti_rma_post_put):
 * hands a put's (or a signal's: src NULL, bytes 0) data to the service
 * thread, which sends it to `peer`. Callable from any thread (CUDA host
 * functions included), makes no CUDA call and never waits for the peer: it
 * copies the data and returns. A host function must not wait for anything
 * that may need a CUDA call (CUDA holds a lock of its own while one runs,
 * which every allocation of pinned memory in the process waits for).
 * with_signal 0: the data only (the signal follows later). */
typedef ncclResult_t (*tutti_rma_send_fn)(struct tutti_rma* rma, int peer, uint32_t win_id,
                                          uint64_t offset, const void* src, size_t bytes, int sig,
                                          int ctx, int with_signal);

/* Called once per communicator, on every rank, when its one-sided state is
 * made (the first window registration): `num_ctx` contexts of `nsignals`
 * signals from each of `nranks` origins. *on_device 1 (alike on every rank,
 * as the device communicator is): signals are counted in device memory,
 * raised by tutti_dev_rma_signal and awaited by tutti_dev_rma_wait on a
 * stream; 0: src/rma counts them in host memory and waits block the caller.
 * `max_payload`: the most data bytes one record of the service communicator
 * carries (what tutti_dev_rma_deliver may be handed at once). */
ncclResult_t tutti_dev_rma_start(struct tutti_dev_comm* dc, int nranks, int num_ctx, int nsignals,
                                 size_t max_payload, int* on_device);
/* Frees what tutti_dev_rma_start made (when the communicator goes). */
void tutti_dev_rma_stop(struct tutti_dev_comm* dc);

/* Registration of a window on a rank with a device communicator. Export:
 * fill `out`, which every rank then receives in peers[me].dev: what this
 * host's peers need to map this rank's signal counters and, when `device`
 * (the buffer is device memory), its part of the window. */
ncclResult_t tutti_dev_rma_win_export(struct tutti_dev_comm* dc, void* buff, size_t size,
                                      int device, unsigned char out[TUTTI_RMA_DEV_EXPORT]);
/* Collective: every rank calls it after the all-gather, in the same order,
 * with the same `peers` (of `nranks`); maps the peers' device buffers where
 * it can. *out may stay NULL when this rank keeps nothing. A rank that fails
 * here fails its own registration only: peers must not wait for it forever
 * (bounded by TUTTI_TIMEOUT). */
ncclResult_t tutti_dev_rma_win_register(struct tutti_dev_comm* dc, uint32_t win_id, void* buff,
                                        size_t size, const struct tutti_rma_peer_win* peers,
                                        int nranks, struct tutti_rma_dev_win** out);
/* Local and immediate: drops this rank's mappings of the window. */
void tutti_dev_rma_win_deregister(struct tutti_dev_comm* dc, struct tutti_rma_dev_win* w);

/* A put or a signal the host path cannot carry: the local buffer or the
 * target's part of the window is device memory, or signals live on the
 * device (on_device). Enqueued on `stream`; returns without waiting for it.
 * Copies into mapped peers itself; for other peers, stages the data and
 * calls `send(rma, ...)` from a host function once it is staged. */
struct tutti_rma_dev_put {
  int peer;                                /* the target (may be this rank) */
  uint32_t win_id;                         /* 0 for ncclSignal */
  struct tutti_rma_dev_win* win;           /* this rank's device state of the window, or NULL */
  const struct tutti_rma_peer_win* target; /* the peer's part of the window (NULL: signal) */
  uint64_t offset;                         /* into the target's part */
  const void* src;                         /* NULL for ncclSignal */
  size_t bytes;
  uint32_t src_kind; /* enum tutti_mem of src */
  int sig;
  int ctx;
  cudaStream_t stream;
  struct tutti_rma* rma; /* for `send` */
  tutti_rma_send_fn send;
};
ncclResult_t tutti_dev_rma_put(struct tutti_dev_comm* dc, const struct tutti_rma_dev_put* p);

/* Service thread: a piece of a put from `origin` arrived for this rank's
 * device-memory part of a window: take `bytes` at `src` (host memory, valid
 * only during the call) for `offset` of it and, when `sig` >= 0, raise
 * signal (sig, ctx) from `origin` by one once they are in place. Never
 * waits: ncclSuccess when taken, ncclInProgress when there is no room now
 * (nothing taken: offer it again later, after sending what waits to be
 * sent), else an error. */
ncclResult_t tutti_dev_rma_deliver(struct tutti_dev_comm* dc, struct tutti_rma_dev_win* w,
                                   int origin, uint64_t offset, const void* src, size_t bytes,
                                   int sig, int ctx);
/* Service thread, when on_device: raise signal (sig, ctx) from `origin` by
 * one, after whatever it delivered before. Returns as tutti_dev_rma_deliver. */
ncclResult_t tutti_dev_rma_signal(struct tutti_dev_comm* dc, int origin, int sig, int ctx);
/* Service thread: the receiving side failed (`why`, naming `origin`):
 * waits on streams end with it instead of at TUTTI_TIMEOUT. */
void tutti_dev_rma_fail(struct tutti_dev_comm* dc, int origin, const char* why);
/* ncclWaitSignal when on_device: enqueue on `stream` a wait until each
 * desc's signal has risen by opCnt past what earlier waits consumed, then
 * consume it. Descs are validated (peer, sigIdx, ctx in range, opCnt > 0). */
ncclResult_t tutti_dev_rma_wait(struct tutti_dev_comm* dc, const ncclWaitSignalDesc_t* descs,
                                int ndesc, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
