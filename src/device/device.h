/* The device executor as the rest of the library sees it: collectives on
 * CUDA device buffers, enqueued on the caller's stream. Built from the same
 * schedules as the host executor; the kernels and the peer-memory transport
 * live in this folder (CUDA C++); a build without nvcc gets stubs that say so. */
#ifndef TUTTI_DEVICE_DEVICE_H
#define TUTTI_DEVICE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "algo/algo.h"
#include "nccl.h"
#include "reduce/reduce.h"
#include "transport/transport.h"
#include "tune/plan.h"

struct tutti_bootstrap;
struct tutti_dev_comm;

/* What device setup needs of the communicator. */
struct tutti_dev_setup {
  int rank;
  int nranks;
  int cuda_dev;
  const struct tutti_peer_info* peers;
  const int32_t* host_of;
  struct tutti_bootstrap* boot;
  double timeout_s;
  const unsigned char* secret; /* 16 bytes: names host-memory segments */
  uint64_t comm_hash;
  /* [nranks]: peers' doorbells where visible (call/agree.c): a peer whose
   * communicator failed stops this rank's kernels with its cause. */
  struct tutti_doorbell* const* bells;
  const struct tutti_doorbell* own_bell; /* this rank's: its calls, for the watchdog to compare */
  struct tutti_dev_sizes sizes;          /* tune's: channels, threads, queues, inboxes */
};

/* What the device executor holds at most (for tune: tutti_tune_device_setup
 * and the plans of launches); zeros in a build without it. */
void tutti_dev_limits(struct tutti_dev_limits* lim);

/* Non-zero when this build has the device executor (nvcc was found). */
int tutti_dev_compiled(void);

/* The device launches of this process so far, by the path the plan chose
 * (tune/plan.h's TUTTI_PATH_*: schedules, mapped kernel, copy engines) and
 * its protocol (0 LL, 1 Simple, 2 LL128): what a test reads to show that a
 * path it forced is the one that ran. */
#define TUTTI_DEV_PATHS 3
#define TUTTI_DEV_PROTOS 3
void tutti_dev_launch_counts(uint64_t counts[TUTTI_DEV_PATHS][TUTTI_DEV_PROTOS]);

/* Collective over all ranks (every rank calls it, in the same order as other
 * bootstrap exchanges): when every rank has a CUDA device, allocates this
 * rank's queues, maps the memory of every peer on its host (peers on other
 * hosts are reached through the network proxy) and returns the device
 * communicator in *out.
 * Otherwise *out is NULL and `why` says what is missing (device buffers
 * then fail with that sentence). */
ncclResult_t tutti_dev_comm_create(const struct tutti_dev_setup* s, struct tutti_dev_comm** out,
                                   char* why, size_t why_len);
/* Non-zero when this rank maps the GPU memory of the other ranks of its host
 * (peer memory), 0 where they are reached through host memory
 * (NCCL_P2P_DISABLE, GPUs that cannot reach each other) or there is no
 * device communicator. */
int tutti_dev_comm_maps_gpus(const struct tutti_dev_comm* dc);
/* Sets the abort flag the kernels watch (ncclCommAbort). */
void tutti_dev_comm_abort(struct tutti_dev_comm* dc);
/* Waits for the communicator's kernels, unmaps peers, frees everything. */
void tutti_dev_comm_destroy(struct tutti_dev_comm* dc);
/* ncclSuccess, or the error a kernel of this communicator reported (aborted,
 * a peer that stopped answering), with a sentence. */
ncclResult_t tutti_dev_comm_error(struct tutti_dev_comm* dc);

/* Waits, bounded by TUTTI_TIMEOUT, until the communicator's device
 * collectives issued so far have finished: a host collective issued after
 * them runs after them, as the issue order says. ncclSuccess, or why not. */
ncclResult_t tutti_dev_comm_wait(struct tutti_dev_comm* dc);

/* The memory a device communicator holds, as cudaMemGetInfo and the
 * system count it (cuMem allocations at their granularity, cudaMalloc's in
 * whole 2 MiB pages, host memory in pages): on its GPU and pinned on the
 * host, what ncclCommSuspend gives back and what stays (persist). Imported
 * peer memory is its owner's. */
struct tutti_dev_mem {
  uint64_t dev_suspend;
  uint64_t dev_persist;
  uint64_t host_suspend;
  uint64_t host_persist;
};
/* What RAS reads of `dc`'s kernels (ras/ras.h), or NULL. */
struct tutti_ras_dev;
const struct tutti_ras_dev* tutti_dev_ras_view(struct tutti_dev_comm* dc);
/* What `dc` holds; while suspended, what it held when suspended. */
void tutti_dev_comm_mem(struct tutti_dev_comm* dc, struct tutti_dev_mem* m);

/* Collective (ncclCommSuspend at its group's end): waits, bounded by
 * TUTTI_TIMEOUT, until the communicator's device work is done on every
 * rank, stops the network proxy, and gives back the device and pinned host
 * memory it can while keeping the addresses kernels and captured graphs
 * use. On failure the communicator is unusable (destroy it). */
ncclResult_t tutti_dev_comm_suspend(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s);
/* Collective (ncclCommResume): the memory back at the same addresses, peers'
 * memory mapped again, the proxy connected again: the device executor as
 * freshly set up, every counter at zero on every rank. */
ncclResult_t tutti_dev_comm_resume(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s);

/* The most device operations of one communicator a group may hold: they
 * run as one launch (the large kernel parameters, work.h, hold as many). */
#define TUTTI_DEV_MAX_OPS 32

/* What `dc` offers a launch on `stream` (for tune: tutti_tune_launch). */
void tutti_dev_comm_caps(struct tutti_dev_comm* dc, cudaStream_t stream, struct tutti_dev_caps* c);

/* One operation for the device executor, run as its plan says. */
struct tutti_dev_op {
  const struct tutti_plan* plan;
  const struct tutti_schedule* sched; /* the plan's schedule (TUTTI_PATH_SCHEDULE) */
  const struct tutti_coll_args* args;
  struct tutti_redop redop;
  const void* scalar_dev; /* PreMulSum scalar residing on the device, or NULL */
  void* bufs[4];          /* enum tutti_buf; the scratch entry is filled by the launcher */
  cudaStream_t stream;
  uint64_t seq;
  uint64_t ras_op; /* its number in RAS's record of the communicator (0: none), which
                      the kernel running it shows the host (tutti_dev_ras_view) */
};

/* Enqueues `ops` (all of `dc`, one group, planned together by
 * tutti_tune_launch) as one launch on the first op's stream, ordered after
 * the other ops' streams and after the previous launch of `dc` whatever its
 * stream; the group's streams then wait for it. Returns at once; nothing
 * waits for the device. */
ncclResult_t tutti_dev_launch(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops);

/* The per-thread stack frame (local memory) of every kernel of the device
 * executor, which the driver reserves beyond the context's 1 KB for every
 * thread the GPU can hold (docs/design.md): names[i] and bytes[i] for up to
 * `max` kernels; returns how many (0 without CUDA), or -1 on a CUDA error. */
#define TUTTI_DEV_NKERNELS 6
int tutti_dev_kernel_frames(const char** names, size_t* bytes, int max);

/* The CUDA driver behind a registration cache (device/peer/regcache.h)
 * for `dc`'s GPU, in *drv: 1, or 0 where there is none (no device
 * executor in this build, no device communicator). */
struct tutti_regcache_driver;
int tutti_dev_regcache_driver(struct tutti_dev_comm* dc, struct tutti_regcache_driver* drv);

/* ncclMemAlloc / ncclMemFree on the current GPU. */
ncclResult_t tutti_dev_mem_alloc(void** ptr, size_t size);
ncclResult_t tutti_dev_mem_free(void* ptr);

#ifdef __cplusplus
}
#endif

#endif
