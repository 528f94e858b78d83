/* One-sided operations (windows, puts, signals) over a communicator's
 * private service communicator: the api layer makes that communicator at
 * the first window registration and hands its connections here; a service
 * thread per rank receives every put and applies it, so that a put never
 * waits for the target's user thread (docs/design.md, "One-sided
 * operations"). */
#ifndef TUTTI_RMA_RMA_H
#define TUTTI_RMA_RMA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "rma/rma_dev.h"
#include "transport/transport.h"

#define TUTTI_RMA_SIGNALS 8                   /* sigIdx in [0, TUTTI_RMA_SIGNALS) */
#define TUTTI_WIN_MAGIC 0x74757474776e646fULL /* "tuttiwndo" */

struct tutti_bootstrap;
struct tutti_dev_comm;

/* What the api layer gives: the service communicator's connections and the
 * user communicator's abort flag and device communicator. */
struct tutti_rma_setup {
  int rank;
  int nranks;
  int num_ctx;                 /* ncclConfig_t.numRmaCtx (> 0) */
  struct tutti_conn** send;    /* [nranks]: the service communicator's */
  struct tutti_conn** recv;    /* [nranks] */
  struct tutti_doorbell* bell; /* this rank's doorbell there: puts and the thread sleep on it */
  struct tutti_doorbell** peer_bells; /* [nranks]: peers' (liveness), NULL where not visible */
  const struct tutti_peer_info* peers;
  struct tutti_bootstrap* boot; /* the service communicator's: window all-gathers */
  volatile int* abort_flag;     /* the user communicator's (ncclCommAbort) */
  struct tutti_dev_comm* dev;   /* the user communicator's device communicator, or NULL */
  double timeout_s;
  int spin; /* idle passes spinning, then yielding, before sleeping (tutti_tune_wait's) */
  int spin_max;
  int yield;
};

/* A window: ncclWindow_t is a pointer to this (cast from struct
 * ncclWindow_vidmem*). Valid from registration until deregistration. */
struct tutti_win {
  uint64_t magic; /* TUTTI_WIN_MAGIC while registered */
  struct tutti_rma* rma;
  uint32_t id;
  int flags;
  void* buff;
  size_t size;
  uint32_t kind;                    /* enum tutti_mem of buff */
  struct tutti_rma_peer_win* peers; /* [nranks] */
  struct tutti_rma_dev_win* dev;    /* the device layer's, or NULL */
};

/* Makes the one-sided state of a communicator and starts its service
 * thread. Local: the service communicator is already joined. */
ncclResult_t tutti_rma_create(const struct tutti_rma_setup* s, struct tutti_rma** out);
/* Stops the service thread, frees every window and the state; safe on NULL. */
void tutti_rma_destroy(struct tutti_rma* r);

/* Windows (window.c). Register is collective over the service
 * communicator: every rank, in the same order. */
ncclResult_t tutti_rma_win_register(struct tutti_rma* r, void* buff, size_t size, int flags,
                                    struct tutti_win** out);
/* Local and immediate; puts that arrive later for it are dropped with a
 * warning and fail this rank's later waits. */
ncclResult_t tutti_rma_win_deregister(struct tutti_rma* r, struct tutti_win* w);
/* `w` when it is a window of `r` that is still registered, else NULL
 * (never dereferences an unknown pointer). */
struct tutti_win* tutti_rma_win_find(struct tutti_rma* r, const void* w);

/* One one-sided call, validated, as a group queues it. */
enum tutti_rma_kind { TUTTI_RMA_PUT, TUTTI_RMA_SIGNAL, TUTTI_RMA_WAIT };
struct tutti_rma_call {
  enum tutti_rma_kind kind;
  const char* fn; /* the API function, for error texts */
  int peer;
  struct tutti_win* win; /* PUT */
  uint64_t offset;
  const void* src;
  size_t bytes;
  int sig;
  int ctx;
  ncclWaitSignalDesc_t* descs; /* WAIT: owned (malloc'd) */
  int ndesc;
  cudaStream_t stream;
};

/* Checks what only the one-sided state knows: the window is registered
 * here, the put fits the target's part of it. */
ncclResult_t tutti_rma_check(struct tutti_rma* r, struct tutti_rma_call* c);
/* Runs a call: puts and signals return once every record is queued (the
 * local buffer may be reused), waits once every signal arrived. */
ncclResult_t tutti_rma_run(struct tutti_rma* r, const struct tutti_rma_call* c);
/* Whether running `c` blocks the calling thread on host work (so the
 * caller's stream is waited for first), rather than enqueueing on it. */
int tutti_rma_on_host(const struct tutti_rma* r, const struct tutti_rma_call* c);

/* The host sender (send.c): writes the records itself, waiting for slots;
 * for puts of host buffers from the calling thread. */
ncclResult_t tutti_rma_send_put(struct tutti_rma* r, int peer, uint32_t win_id, uint64_t offset,
                                const void* src, size_t bytes, int sig, int ctx, int with_signal);
/* The same for CUDA host functions (outbox.c): copies the data into the
 * peer's outbox and returns at once; the service thread sends it. See
 * tutti_rma_send_fn in rma_dev.h. */
ncclResult_t tutti_rma_post_put(struct tutti_rma* r, int peer, uint32_t win_id, uint64_t offset,
                                const void* src, size_t bytes, int sig, int ctx, int with_signal);

#endif
