/* Device communicator setup: each rank allocates one region (counters and
 * the queues its peers send into), exports it, and maps every peer's
 * (peers.cu): from a file descriptor (cuMem) or a CUDA IPC handle between
 * processes (region.cu), directly (with peer access) between GPUs of one
 * process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "device/dev_comm.h"
#include "device/kernels/mapped.h"
#include "device/peer/host_region.h"
#include "device/kernels/kernel.h"
#include "device/net/devnet.h"
#include "rma/rma_dev.h"

extern "C" {
#include "bootstrap/bootstrap.h"
#include "topo/topo.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/fdpass.h"
#include "util/proc.h"
}

extern "C" int tutti_dev_compiled(void) {
  return 1;
}

extern "C" void tutti_dev_limits(struct tutti_dev_limits* lim) {
  memset(lim, 0, sizeof *lim);
  lim->max_channels = TD_MAX_CHANNELS;
  lim->net_channels = TD_NET_CHANNELS;
  lim->max_threads = TD_MAX_THREADS;
  lim->op_ctas = TD_OP_CTAS;
  lim->loop_channels = TD_LOOP_CHANNELS;
  lim->launch_ctas = (int)(sizeof(((td_work_large*)0)->ctas) / sizeof(struct td_cta));
  lim->mapped_max_ranks = TD_MAPPED_MAX_RANKS;
  lim->mapped_channels = TD_MAPPED_CHANNELS;
  lim->mapped_ll_channels = TD_MAPPED_LL_CHANNELS;
  lim->mapped_ll_round = TD_MAPPED_LL_CHANNEL_BYTES / 2;
  lim->ll128_line = TD_LL128_LINE;
  lim->ll128_data = TD_LL128_DATA;
}

static ncclResult_t cuda_fail(cudaError_t e, const char* what) {
  return tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

#define CUDACHECK(call, what)     \
  do {                            \
    cudaError_t e_ = (call);      \
    if (e_ != cudaSuccess) {      \
      return cuda_fail(e_, what); \
    }                             \
  } while (0)

/* The copy-engine path's events, 0 <= i < TD_CE_SLOTS + 2. */
static cudaEvent_t* ce_event(struct tutti_dev_comm* dc, int i) {
  return i < TD_CE_SLOTS ? &dc->ce_done[i] : i == TD_CE_SLOTS ? &dc->ce_start : &dc->ce_copied;
}

static void release(struct tutti_dev_comm* dc) {
  tutti_dev_rma_stop(dc); /* when the one-sided state has not stopped it */
  td_net_free(dc);
  for (int p = 0; dc->mapped != NULL && p < dc->nranks; p++) {
    td_region_free(&dc->mapped[p]);
  }
  for (int p = 0; dc->hosts != NULL && p < dc->nranks; p++) {
    td_host_region_unmap(&dc->hosts[p]);
  }
  td_region_free(&dc->own);
  td_region_free(&dc->pvt); /* priv and d_comm */
  free(dc->hosts);
  if (dc->shm_name[0] != '\0') {
    shm_unlink(dc->shm_name);
  }
  cudaFree(dc->scratch);
  for (int i = 0; i < dc->nretired; i++) {
    cudaFree(dc->retired[i]);
  }
  free(dc->retired);
  if (dc->scratch_ev != NULL) {
    cudaEventDestroy(dc->scratch_ev);
  }
  if (dc->host_flags != NULL) {
    cudaFreeHost(dc->host_flags);
  }
  for (int i = 0; i < TD_CE_SLOTS + 2; i++) {
    if (*ce_event(dc, i) != NULL) {
      cudaEventDestroy(*ce_event(dc, i));
    }
  }
  if (dc->ce_copy != NULL) {
    cudaStreamDestroy(dc->ce_copy);
  }
  cudaEvent_t* evs[3] = {&dc->ev, &dc->ord_ev, &dc->cap_ev};
  for (int i = 0; i < 3; i++) {
    if (*evs[i] != NULL) {
      cudaEventDestroy(*evs[i]);
    }
  }
  if (dc->side != NULL) {
    cudaStreamDestroy(dc->side);
  }

  free(dc->base);
  free(dc->mapped);
  free(dc->ex);
  free(dc->remote);
  free(dc->launch_bufs);
  free(dc->turns);
  free(dc);
}

/* This rank's share of the blocks the GPU holds at once (`per_sm` per
 * multiprocessor), with `sharers` ranks on it. Their kernels can run at
 * once (threads of one process always; processes under MPS), and a block
 * waiting for a peer's kernel holds its SM: all of them must fit on the GPU
 * together, or a launch that fills it waits forever for a peer that cannot
 * start. The sharers are counted alike on every rank (from the peers'
 * table, tutti_topo_gpu_sharers), since the blocks a launch may have decide
 * its channels. */
static int block_share(int nsm, int per_sm, int sharers) {
  const int b = nsm * (per_sm > 0 ? per_sm : 1) / sharers;
  return b < 1 ? 1 : b;
}

/* This rank's own resources: regions, flags, event, occupancy. */
static ncclResult_t alloc_local(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s) {
  const int n = s->nranks;
  int nsm = 0, per_sm = 0;
  CUDACHECK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dc->dev),
            "cudaDeviceGetAttribute");
  CUDACHECK(cudaStreamCreateWithFlags(&dc->side, cudaStreamNonBlocking), "cudaStreamCreate");
  /* Tune's sizes (tutti_tune_device_setup): across hosts fewer channels,
   * their queues in pinned host memory. */
  dc->nthreads = s->sizes.threads;
  dc->nch = dc->net ? s->sizes.net_channels : s->sizes.channels;
  const size_t qb = dc->net ? s->sizes.net_queue_bytes : s->sizes.queue_bytes;
  dc->slot_bytes = qb / TD_SLOTS / 16 * 16;
  const int gpu_regions = !dc->host_mode && !dc->net;
  td_layout_make(&dc->lay, dc->nch, n, dc->slot_bytes * TD_SLOTS, gpu_regions, dc->ll128,
                 &s->sizes);
  /* Within its budget the layout may set up fewer channels and queues. */
  dc->nch = (int)dc->lay.nch;
  dc->slot_bytes = dc->lay.queue_bytes / TD_SLOTS;
  if (dc->host_mode) {
    td_host_region_name(dc->shm_name, sizeof dc->shm_name, s->secret, s->comm_hash, s->rank);
    NCCLCHECK(td_host_region_map(dc->shm_name, dc->lay.total, 1, &dc->hosts[s->rank]));
    dc->region = dc->hosts[s->rank].dev;
  } else {
    NCCLCHECK(td_region_alloc(&dc->own, dc->dev, dc->lay.total, dc->side, s->sizes.cumem));
    dc->region = dc->own.ptr;
  }
  /* The counters and the device communicator in one allocation of their
   * own (zeroed), cuMem, so that a suspend can give it
   * back and keep d_comm's address, which captured graphs hold. Whole 2 MiB
   * pages, which cuMem's granularity and cudaMalloc's pages take anyway:
   * cudaMalloc then shares them with nothing, and the count (mem.cu) is
   * what cudaMemGetInfo sees. */
  const size_t dcomm_off = (dc->lay.priv_total + 255) / 256 * 256;
  const size_t pvt_bytes = dcomm_off + sizeof(struct td_devcomm) + (size_t)n * sizeof(char*);
  /* cuMem wherever the driver has it, NCCL_CUMEM_ENABLE=0 too: nothing
   * exports it, and graphs keep d_comm's address across a suspend. */
  NCCLCHECK(td_region_alloc(&dc->pvt, dc->dev, (pvt_bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20),
                            dc->side, 1));
  dc->priv = dc->pvt.ptr;
  dc->d_comm = (struct td_devcomm*)(dc->pvt.ptr + dcomm_off);
  dc->dcomm_off = dcomm_off;
  CUDACHECK(cudaHostAlloc((void**)&dc->host_flags, 64, cudaHostAllocMapped | cudaHostAllocPortable),
            "cudaHostAlloc");
  memset(dc->host_flags, 0, 64);
  dc->ras_view.started = &dc->host_flags[TD_FLAG_STARTED];
  dc->ras_view.finished = &dc->host_flags[TD_FLAG_FINISHED];
  dc->ras_view.running = (const volatile uint64_t*)&dc->host_flags[TD_FLAG_RUNNING];
  CUDACHECK(cudaEventCreateWithFlags(&dc->ev, cudaEventDisableTiming), "cudaEventCreate");
  CUDACHECK(cudaEventCreateWithFlags(&dc->ord_ev, cudaEventDisableTiming), "cudaEventCreate");
  CUDACHECK(cudaEventCreateWithFlags(&dc->cap_ev, cudaEventDisableTiming), "cudaEventCreate");
  if (dc->lay.ce_slot_bytes > 0) {
    CUDACHECK(cudaStreamCreateWithFlags(&dc->ce_copy, cudaStreamNonBlocking), "cudaStreamCreate");
    for (int i = 0; i < TD_CE_SLOTS + 2; i++) {
      CUDACHECK(cudaEventCreateWithFlags(ce_event(dc, i), cudaEventDisableTiming),
                "cudaEventCreate");
    }
  }
  const int sharers = tutti_topo_gpu_sharers(s->peers, s->host_of, s->nranks);
  CUDACHECK(td_occupancy(dc->nthreads, &per_sm), "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  dc->max_ctas = block_share(nsm, per_sm, sharers);
  CUDACHECK((cudaError_t)td_mapped_occupancy(dc->nthreads, &per_sm),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  dc->mapped_ctas = block_share(nsm, per_sm, sharers);
  /* Only this setup's own work: a device-wide wait would also wait for
   * kernels of other communicators, which may wait for a peer that is
   * itself in this init. */
  CUDACHECK(cudaStreamSynchronize(dc->side), "cudaStreamSynchronize");
  return ncclSuccess;
}

static ncclResult_t setup(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s, char* why,
                          size_t why_len, int* mapped) {
  const int n = s->nranks;
  NCCLCHECK(td_agree_host_mode(dc, s));
  /* A rank that cannot set itself up still takes part in the exchanges, so
   * that every rank learns it and all turn the device path off together. */
  ncclResult_t lres = alloc_local(dc, s);
  if (lres != ncclSuccess) {
    snprintf(why, why_len, "rank %d could not set up GPU %d: %s", s->rank, dc->dev,
             tutti_last_error());
  }
  struct td_export* ex = (struct td_export*)calloc((size_t)n, sizeof *ex);
  if (ex == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  ncclResult_t res = ncclSuccess;
  struct tutti_fdbox box = {-1};
  if (lres == ncclSuccess && dc->own.kind == TD_REGION_MALLOC &&
      cudaIpcGetMemHandle(&ex[s->rank].handle, dc->region) != cudaSuccess) {
    (void)cudaGetLastError(); /* e.g. in-process only: peers in this process need no handle */
  }
  if (lres == ncclSuccess && !dc->host_mode) {
    char name[104];
    td_region_box_name(name, sizeof name, s, s->rank);
    int err = tutti_fdbox_open(&box, name);
    if (err != 0) {
      lres = tutti_error(ncclSystemError, "rank %d could not bind a unix socket: %s", s->rank,
                         strerror(err));
      snprintf(why, why_len, "%s", tutti_last_error());
    }
  }
  ex[s->rank].ptr = dc->region;
  ex[s->rank].size = dc->own.size;
  ex[s->rank].kind = dc->own.kind;
  ex[s->rank].pid = (int32_t)getpid();
  ex[s->rank].dev = dc->dev;
  ex[s->rank].ok = lres == ncclSuccess;
  if (lres == ncclSuccess) {
    ex[s->rank].shape = td_layout_shape(&dc->lay);
    ex[s->rank].nch = dc->lay.nch;
    ex[s->rank].queue_bytes = dc->lay.queue_bytes;
    ex[s->rank].total = dc->lay.total;
  }
  res = tutti_bootstrap_allgather(s->boot, ex, sizeof *ex);
  if (res == ncclSuccess) {
    res = td_layout_agree(ex, n);
  }
  int all_ok = 1;
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (!ex[p].ok && all_ok) {
      all_ok = 0;
      if (why[0] == '\0') {
        snprintf(why, why_len, "rank %d could not set up its GPU (its log says why)", p);
      }
    }
  }
  int* fds = (int*)calloc((size_t)n, sizeof *fds);
  if (res == ncclSuccess && fds == NULL) {
    res = tutti_error(ncclSystemError, "out of host memory");
  }
  for (int p = 0; fds != NULL && p < n; p++) {
    fds[p] = -1;
  }
  if (res == ncclSuccess && all_ok && !dc->host_mode) {
    if (td_swap_fds(dc, s, &box, ex, fds) != ncclSuccess) {
      snprintf(why, why_len, "%s", tutti_last_error());
    }
  }
  tutti_fdbox_close(&box);
  if (res == ncclSuccess && all_ok && why[0] == '\0') {
    res = td_map_peers(dc, s, ex, fds, why, why_len);
  }
  for (int p = 0; fds != NULL && p < n; p++) {
    if (fds[p] >= 0) {
      close(fds[p]); /* the mapping holds the memory */
    }
  }
  free(fds);
  if (res == ncclSuccess) {
    res = td_net_connect(dc, s, why, why_len);
  }
  /* Every rank must agree: one that could not map a peer turns the device path off for all. */
  int32_t* oks = (int32_t*)calloc((size_t)n, sizeof *oks);
  if (res == ncclSuccess && oks == NULL) {
    res = tutti_error(ncclSystemError, "out of host memory");
  }
  if (res == ncclSuccess) {
    oks[s->rank] = why[0] == '\0';
    res = tutti_bootstrap_allgather(s->boot, oks, sizeof *oks);
  }
  *mapped = res == ncclSuccess;
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (!oks[p]) {
      *mapped = 0;
      if (why[0] == '\0') {
        snprintf(why, why_len, "rank %d could not map the GPU memory of its peers", p);
      }
    }
  }
  if (dc->host_mode) {
    shm_unlink(dc->shm_name); /* every rank has mapped it (or given up): nothing stays behind */
    dc->shm_name[0] = '\0';
  }
  free(oks);
  dc->ex = ex; /* a resume maps the peers again from it */
  return res;
}

ncclResult_t td_publish(struct tutti_dev_comm* dc) {
  size_t bytes = sizeof(struct td_devcomm) + (size_t)dc->nranks * sizeof(char*);
  struct td_devcomm* h = (struct td_devcomm*)calloc(1, bytes);
  if (h == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  h->rank = dc->rank;
  h->nranks = dc->nranks;
  h->nch = dc->nch;
  h->net = dc->net;
  h->timeout_ns = (uint64_t)(dc->timeout_s * 1e9);
  h->lay = dc->lay;
  h->priv = dc->priv;
  int* dflags = NULL;
  cudaError_t e = cudaHostGetDevicePointer((void**)&dflags, dc->host_flags, 0);
  h->abort_flag = dflags + TD_FLAG_ABORT;
  h->error = dflags + TD_FLAG_STOP;
  h->kstate = dflags + TD_FLAG_STARTED;
  memcpy(h->base, dc->base, (size_t)dc->nranks * sizeof(char*));
  if (e == cudaSuccess) {
    e = cudaMemcpyAsync(dc->d_comm, h, bytes, cudaMemcpyHostToDevice, dc->side);
  }
  if (e == cudaSuccess) {
    e = cudaStreamSynchronize(dc->side);
  }
  free(h);
  return e == cudaSuccess ? ncclSuccess : cuda_fail(e, "publishing the device communicator");
}

extern "C" ncclResult_t tutti_dev_comm_create(const struct tutti_dev_setup* s,
                                              struct tutti_dev_comm** out, char* why,
                                              size_t why_len) {
  *out = NULL;
  why[0] = '\0';
  if (!tutti_cuda_available()) {
    snprintf(why, why_len, "no CUDA driver on this host");
    return ncclSuccess;
  }
  for (int p = 0; p < s->nranks; p++) {
    if (s->peers[p].cuda_dev < 0) {
      snprintf(why, why_len,
               "rank %d has no CUDA device: call cudaSetDevice before creating the communicator "
               "on every rank",
               p);
      return ncclSuccess;
    }
  }
  struct tutti_dev_comm* dc = (struct tutti_dev_comm*)calloc(1, sizeof *dc);
  if (dc == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  dc->rank = s->rank;
  dc->nranks = s->nranks;
  dc->dev = s->cuda_dev;
  dc->timeout_s = s->timeout_s;
  dc->rma_direct = s->sizes.rma_direct;
  dc->rma_landing = s->sizes.rma_landing;
  dc->net_trace = s->sizes.net_trace;
  dc->net_poll = s->sizes.net_poll;
  dc->net_yield = s->sizes.net_yield;
  dc->remote = (unsigned char*)calloc((size_t)s->nranks, 1);
  if (dc->remote == NULL) {
    free(dc);
    return tutti_error(ncclSystemError, "out of host memory");
  }
  dc->net = td_net_remote(s, dc->remote) > 0;
  /* Queues in host memory when GPUs must not (or cannot) write each other's,
   * and when some peers are remote (their proxy writes the queues). */
  dc->host_mode = s->sizes.host_queues || dc->net;
  dc->hosts = (struct td_host_region*)calloc((size_t)s->nranks, sizeof *dc->hosts);
  dc->base = (char**)calloc((size_t)s->nranks, sizeof(char*));
  dc->mapped = (struct td_region*)calloc((size_t)s->nranks, sizeof *dc->mapped);
  dc->launch_bufs = malloc(sizeof(struct td_launch_bufs));
  dc->turns = (uint16_t*)malloc((size_t)TD_MAX_CHANNELS * 2 * (size_t)s->nranks * sizeof(uint16_t));
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  int mapped = 0;
  ncclResult_t res = dc->base == NULL || dc->mapped == NULL || dc->launch_bufs == NULL ||
                             dc->turns == NULL || dc->hosts == NULL
                         ? tutti_error(ncclSystemError, "out of host memory")
                         : setup(dc, s, why, why_len, &mapped);
  if (res == ncclSuccess && mapped) {
    res = td_publish(dc);
  }
  if (res == ncclSuccess && mapped) {
    res = td_net_start(dc);
  }
  if (res != ncclSuccess || !mapped) {
    release(dc);
    td_dev_leave(&g);
    return res;
  }
  for (int p = 0; p < s->nranks; p++) {
    if (p != s->rank) {
      INFO(TUTTI_INIT | TUTTI_P2P, "Channel 00-%02d : %d[%d] -> %d[%d] via %s", dc->nch - 1,
           s->rank, dc->dev, p, s->peers[p].cuda_dev,
           dc->host_mode                           ? "SHM/host memory"
           : dc->mapped[p].kind == TD_REGION_CUMEM ? "P2P/cuMem"
           : dc->mapped[p].kind == TD_REGION_IPC   ? "P2P/IPC"
                                                   : "P2P/direct pointer");
    }
  }
  dc->bells = s->bells;
  dc->own_bell = s->own_bell;
  dc->pids = (int32_t*)calloc((unsigned)s->nranks, sizeof *dc->pids);
  for (int p = 0; dc->pids != NULL && p < s->nranks; p++) {
    /* Remote peers (also those made remote by NCCL_SHM_DISABLE with
     * NCCL_P2P_DISABLE) are watched through their connections instead. */
    dc->pids[p] = s->host_of[p] == s->host_of[s->rank] && !dc->remote[p] ? s->peers[p].pid : 0;
  }
  dc->watch_live = dc->pids != NULL && pthread_create(&dc->watch, NULL, td_watch_main, dc) == 0;
  const struct td_layout& L = dc->lay;
  INFO(TUTTI_INIT,
       "device executor: %d channels, %d threads, queues of %zu KB per peer and channel "
       "(every peer's on %d channels, loopback on %d), mapped inboxes %d x %zu KB per peer "
       "(LL on %d), copy-engine slots of %zu KB: %.2f MiB on GPU %d%s",
       dc->nch, dc->nthreads, (size_t)(L.queue_bytes >> 10), (int)L.all_nch, (int)L.loop_nch,
       (int)L.mapped_nch, (size_t)(L.chan_bytes >> 10), (int)L.ll_nch,
       (size_t)(L.ce_slot_bytes >> 10), (double)L.total / (1 << 20), dc->dev,
       s->sizes.comm_memory > 0 && !dc->host_mode && !dc->net ? " (fitted to TUTTI_COMM_MEMORY)"
                                                              : "");
  td_mem_log(dc);
  td_dev_leave(&g);
  *out = dc;
  return ncclSuccess;
}

extern "C" int tutti_dev_comm_maps_gpus(const struct tutti_dev_comm* dc) {
  return dc != NULL && !dc->host_mode;
}

extern "C" void tutti_dev_comm_abort(struct tutti_dev_comm* dc) {
  if (dc != NULL) {
    __atomic_store_n(&dc->host_flags[TD_FLAG_ABORT], 1, __ATOMIC_SEQ_CST);
  }
}

extern "C" void tutti_dev_comm_destroy(struct tutti_dev_comm* dc) {
  if (dc == NULL) {
    return;
  }
  if (dc->watch_live) {
    dc->watch_stop = 1;
    pthread_join(dc->watch, NULL);
  }
  free(dc->pids);
  dc->pids = NULL;
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  /* Only this communicator's launches, bounded: a device-wide wait would
   * also wait for other work of the GPU, which may never finish. */
  const int aborted = __atomic_load_n(&dc->host_flags[TD_FLAG_ABORT], __ATOMIC_SEQ_CST);
  int quiet = td_order_quiesce(dc, dc->timeout_s + 5);
  if (!quiet) {
    __atomic_store_n(&dc->host_flags[TD_FLAG_ABORT], 1, __ATOMIC_SEQ_CST);
    quiet = td_order_quiesce(dc, 5);
  }
  if (quiet && !aborted && !dc->suspended) {
    td_drain(dc); /* a suspended communicator has drained, and its region is gone */
  }
  td_net_free(dc); /* forwards what peers are still owed, then closes */
  (void)cudaGetLastError();
  if (!quiet) {
    /* A launch still waits on its stream and will run some day: it must
     * find its memory and the abort flag, so nothing is freed. */
    WARN(
        "rank %d: a device collective of this communicator had not run %.0f s after "
        "ncclCommDestroy (its stream waits for other work): its device memory stays allocated "
        "so that it stops harmlessly when it runs",
        dc->rank, dc->timeout_s + 10);
    td_dev_leave(&g);
    return;
  }
  release(dc);
  td_dev_leave(&g);
}

extern "C" ncclResult_t tutti_dev_mem_alloc(void** ptr, size_t size) {
  cudaError_t e = cudaMalloc(ptr, size);
  if (e != cudaSuccess) {
    *ptr = NULL;
    return tutti_error(ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc of %zu bytes failed: %s",
                       size, cudaGetErrorString(e));
  }
  return ncclSuccess;
}

extern "C" ncclResult_t tutti_dev_mem_free(void* ptr) {
  cudaError_t e = cudaFree(ptr);
  return e == cudaSuccess ? ncclSuccess
                          : tutti_error(ncclUnhandledCudaError, "ncclMemFree: cudaFree failed: %s",
                                        cudaGetErrorString(e));
}
