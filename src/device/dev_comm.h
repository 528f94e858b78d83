/* The device communicator's host-side state, shared by setup and launch. */
#ifndef TUTTI_DEVICE_DEV_COMM_H
#define TUTTI_DEVICE_DEV_COMM_H

#include <cuda_runtime.h>
#include <pthread.h>

#include "device/device.h"
#include "device/peer/host_region.h"
#include "device/peer/region.h"
#include "device/work.h"
#include "ras/ras.h"

struct tutti_dev_comm {
  int rank;
  int nranks;
  int dev;
  int nch;         /* channels allocated (tune's): the most any operation uses */
  int nthreads;    /* per block (tune's: NCCL_NTHREADS) */
  int max_ctas;    /* blocks that can be resident at once: a launch never exceeds it */
  int mapped_ctas; /* the same for the mapped kernel of nthreads */
  size_t slot_bytes;
  struct td_layout lay;
  struct td_region own;         /* this rank's region on its GPU (not in host mode) */
  struct td_region pvt;         /* its GPU memory of its own: priv, then d_comm */
  char* region;                 /* this rank's shared region, as kernels address it */
  char* priv;                   /* this rank's private counters (in pvt) */
  int host_mode;                /* shared regions in host memory (NCCL_P2P_DISABLE, network) */
  int ll128;                    /* LL128 inboxes: all on NVLink (or one GPU), some rank asks */
  int net;                      /* some peers are reached through the proxy (net/) */
  unsigned char* remote;        /* [nranks]: peers reached over the network */
  struct td_net* netp;          /* the proxy and its connections */
  struct td_host_region* hosts; /* [nranks]: host mappings in host mode */
  char shm_name[TD_HOST_REGION_NAME]; /* this rank's segment in host mode, until unlinked */
  char** base;                        /* [nranks]: every region as mapped here */
  struct td_region* mapped;           /* [nranks]: peer processes' regions mapped here */
  struct td_export* ex;               /* [nranks]: what each rank published of its region */
  struct td_devcomm* d_comm;          /* in pvt: its address is in captured graphs */
  int* host_flags;                    /* pinned, mapped: [TD_FLAG_*] (work.h) */
  int32_t* pids;                      /* [nranks]: peers' processes on this host (0: elsewhere) */
  struct tutti_doorbell* const*
      bells; /* [nranks]: peers' doorbells (stand-ins for network peers) */
  const struct tutti_doorbell* own_bell; /* this rank's calls (call/agree.c) */
  uint64_t scan_checked;                 /* the watchdog's tutti_agree_scan mark */
  char scan_why[512];                    /* the calls that differ, error 7 */
  pthread_t watch;                       /* watchdog: a peer process gone while kernels wait */
  int watch_live;
  volatile int watch_stop;
  cudaEvent_t ev;    /* scratch: joins a group's streams */
  cudaStream_t side; /* setup's and teardown's own copies (never the device-wide stream) */
  /* The launch order (launch/order.cu): the end of the last launch outside any
   * stream capture, and of the last one inside capture `cap_id`. */
  cudaEvent_t ord_ev;
  int ord_set;
  unsigned long long ord_stream_id; /* the stream it was recorded on (cudaStreamGetId) */
  cudaEvent_t cap_ev;
  unsigned long long cap_id;
  /* The copy-engine path (launch/ce.cu): pieces issued so far (the same on every
   * rank), the copies' own stream, and events: a call's start, a piece's
   * copies done, a piece's kernel done (by slot). */
  uint64_t ce_seq;
  cudaStream_t ce_copy;
  cudaEvent_t ce_start, ce_copied, ce_done[TD_CE_SLOTS];
  void* scratch;
  size_t scratch_cap;
  cudaEvent_t scratch_ev; /* recorded after each launch that used the scratch */
  int scratch_in_graph;   /* a captured graph holds the scratch's address */
  void** retired;         /* scratch buffers graphs may still use: freed at destroy */
  int nretired;
  size_t retired_bytes;
  /* ncclCommSuspend (suspend.cu): memory given back, and what the
   * communicator held then (tutti_dev_comm_mem reports it meanwhile). */
  int suspended;
  int keep_malloc;  /* cudaMalloc regions kept by this suspend (a graph holds them) */
  int ce_in_graph;  /* a captured graph holds copy-engine copies into peers' regions */
  size_t dcomm_off; /* d_comm's offset in pvt */
  struct tutti_dev_mem held;
  void* launch_bufs; /* the kernel parameters being filled (struct td_launch_bufs) */
  uint16_t* turns;   /* [TD_MAX_CHANNELS][2 * nranks]: turns handed out while filling */
  double timeout_s;
  int rma_direct;        /* tune's: puts into this host's peers' windows through peer memory */
  uint64_t rma_landing;  /* tune's: pinned bytes one-sided data may wait in (rma/land.h) */
  const char* net_trace; /* tune's: TUTTI_NET_TRACE's prefix, else NULL (net/trace.h) */
  int net_poll;          /* tune's: TUTTI_TUNE net.poll (net/proxy.cu) */
  int net_yield;         /* tune's: TUTTI_TUNE net.yield (net/proxy.cu) */
  struct td_rma* rma;    /* one-sided operations (rma/rma.h), from the first window on */
  struct tutti_ras_dev ras_view;   /* what RAS reads of the kernels (watch.cu keeps its stamp) */
  int seen_started, seen_finished; /* the watchdog's last look at the counts */
};

/* Fills `l` for `n` ranks, `nch` channels and queues of `queue_bytes`; the
 * mapped and copy-engine paths get inboxes of tune's sizes (`mem`) only
 * when `gpu_regions` (layout.cu). */
void td_layout_make(struct td_layout* l, int nch, int n, size_t queue_bytes, int gpu_regions,
                    int ll128, const struct tutti_dev_sizes* mem);
/* A hash of the part of the layout peers address (not the private counters). */
uint64_t td_layout_shape(const struct td_layout* l);
struct td_export;
/* ncclInvalidUsage, the same sentence on every rank, unless every rank set
 * up lays out its region alike (layout.cu). */
ncclResult_t td_layout_agree(const struct td_export* ex, int n);
/* Collective: turns host_mode on for every rank when some pair of local GPUs
 * cannot reach each other's memory (peer/peers.cu). */
ncclResult_t td_agree_host_mode(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s);
/* What each rank publishes of its region for the others to map (peer/peers.cu). */
struct td_export {
  cudaIpcMemHandle_t handle; /* kind TD_REGION_MALLOC */
  char* ptr;
  uint64_t size;
  int32_t pid;
  int32_t dev;
  int32_t ok;   /* set up, its box open */
  int32_t kind; /* of its region (peer/region.h) */
  /* Its region's shape (td_layout_shape): ranks that lay out their queues
   * differently would read each other's counters at the wrong offsets. */
  uint64_t shape;
  uint64_t nch, queue_bytes, total;
};
/* Maps every peer's region into dc->base (peer/peers.cu); a peer that cannot be
 * mapped leaves a reason in `why` and ncclSuccess. */
ncclResult_t td_map_peers(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                          const struct td_export* ex, int* fds, char* why, size_t why_len);
/* Passes cuMem regions' file descriptors between this host's processes
 * (peer/peers.cu): fds[p] (all -1 on entry) becomes p's where one arrives. */
struct tutti_fdbox;
ncclResult_t td_swap_fds(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                         struct tutti_fdbox* box, const struct td_export* ex, int* fds);
/* Where a launch stands in the communicator's order (launch/order.cu). */
struct td_order_at {
  cudaStream_t stream;          /* the launch's stream: the group's first */
  unsigned long long capture;   /* the stream capture it is part of, 0 none */
  unsigned long long stream_id; /* cudaStreamGetId of `stream`, 0 unknown */
};
/* Before a launch of `ops` (one group): the other streams of the group and
 * the communicator's previous launch come first, on ops[0].stream. */
ncclResult_t td_order_begin(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops,
                            struct td_order_at* at);
/* After it: the next launch waits for this one, and so does every stream
 * of the group. */
ncclResult_t td_order_end(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops,
                          const struct td_order_at* at);
/* Waits up to `limit` seconds (also after an abort) until no launch of
 * `dc` is pending or running; 1 when none is. */
int td_order_quiesce(struct tutti_dev_comm* dc, double limit);
/* The watchdog thread's body (watch.cu). */
void* td_watch_main(void* arg);
/* Waits (bounded) until every slot this rank sent was freed by its receiver. */
void td_drain(struct tutti_dev_comm* dc);
/* Writes the device communicator (d_comm) from the host's view: every
 * region's address, the private counters, the flags (dev_comm.cu). */
ncclResult_t td_publish(struct tutti_dev_comm* dc);
/* Logs every allocation the communicator holds (NCCL_DEBUG_SUBSYS=ALLOC; mem.cu). */
void td_mem_log(struct tutti_dev_comm* dc);

/* Kernel parameters of both sizes, filled on the host before each launch. */
struct td_launch_bufs {
  td_work_large large;
  td_work_small small;
};

/* Stops the communicator's device work for `why` (enum td_stop), naming
 * rank `rank` (-1: none): every kernel wait ends at the abort flag, and the
 * next call returns the reason (stop.cu). The watchdog and the network
 * proxy raise their stops here. */
static inline void td_raise_stop(struct tutti_dev_comm* dc, int why, int rank) {
  if (rank >= 0) {
    ((volatile int*)dc->host_flags)[TD_FLAG_RANK] = rank;
  }
  __atomic_store_n(&dc->host_flags[TD_FLAG_STOP], why, __ATOMIC_SEQ_CST);
  __atomic_store_n(&dc->host_flags[TD_FLAG_ABORT], 1, __ATOMIC_SEQ_CST);
}

/* Non-zero when a captured graph holds this rank's view of cudaMalloc
 * regions (NCCL_CUMEM_ENABLE=0), whose addresses a suspend would change:
 * copy-engine copies into peers' regions, or d_comm itself outside cuMem. */
static inline int td_graphs_hold_regions(const struct tutti_dev_comm* dc) {
  return (dc->own.kind == TD_REGION_MALLOC && dc->ce_in_graph) ||
         (dc->pvt.kind == TD_REGION_MALLOC && dc->cap_id != 0);
}

struct td_dev_guard {
  int prev;
  int changed;
};
static inline void td_dev_enter(struct td_dev_guard* g, int dev) {
  g->changed = 0;
  if (cudaGetDevice(&g->prev) != cudaSuccess || g->prev != dev) {
    g->changed = cudaSetDevice(dev) == cudaSuccess;
  }
}
static inline void td_dev_leave(struct td_dev_guard* g) {
  if (g->changed) {
    cudaSetDevice(g->prev);
  }
}

#endif
