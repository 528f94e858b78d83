/* Suspending a device communicator (ncclCommSuspend, ncclCommResume): once
 * every rank's device work is done, the network proxy says goodbye and
 * closes, and the memory goes back to the system while the addresses that
 * kernels and captured graphs hold stay reserved; resuming puts memory
 * behind them again, maps the peers' anew and starts from zeroed counters
 * on every rank, as a fresh setup does (docs/design.md, "Suspending a
 * communicator"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/dev_comm.h"
#include "device/net/devnet.h"
#include "device/peer/host_region.h"
#include "device/peer/region.h"

extern "C" {
#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/fdpass.h"
}

static ncclResult_t cuda_fail(cudaError_t e, const char* what) {
  (void)cudaGetLastError();
  return tutti_error(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

/* Every rank says whether its part (`mine`) went well; all go on together
 * or fail together, naming the first rank that could not `doing`. Also the
 * barrier between the steps. */
static ncclResult_t agree(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                          ncclResult_t mine, const char* doing) {
  char why[1024];
  snprintf(why, sizeof why, "%s", tutti_last_error());
  int32_t* oks = (int32_t*)calloc((size_t)dc->nranks, sizeof *oks);
  if (oks == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  oks[dc->rank] = mine == ncclSuccess;
  ncclResult_t res = tutti_bootstrap_allgather(s->boot, oks, sizeof *oks);
  if (res == ncclSuccess && mine != ncclSuccess) {
    tutti_set_last_error(why);
    res = mine;
  }
  for (int p = 0; p < dc->nranks && res == ncclSuccess; p++) {
    if (!oks[p]) {
      res = tutti_error(ncclRemoteError,
                        "rank %d: rank %d could not %s (its log says why): the communicator is "
                        "unusable; destroy it",
                        dc->rank, p, doing);
    }
  }
  free(oks);
  return res;
}

/* The scratch goes unless a captured graph holds its address. */
static void free_scratch(struct tutti_dev_comm* dc) {
  if (dc->scratch == NULL || dc->scratch_in_graph) {
    return;
  }
  cudaError_t e = cudaFreeAsync(dc->scratch, dc->side);
  if (e == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    cudaFree(dc->scratch); /* no memory pools on this device */
  }
  dc->scratch = NULL;
  dc->scratch_cap = 0;
}

extern "C" ncclResult_t tutti_dev_comm_suspend(struct tutti_dev_comm* dc,
                                               const struct tutti_dev_setup* s) {
  if (dc->suspended) {
    return tutti_error(ncclInvalidUsage, "rank %d: the communicator is already suspended",
                       dc->rank);
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  /* Only this communicator's launches (and graph replays), bounded: a
   * device-wide wait would wait for kernels of other communicators. */
  ncclResult_t mine = td_order_quiesce(dc, dc->timeout_s + 5)
                          ? tutti_dev_comm_error(dc)
                          : tutti_error(ncclSystemError,
                                        "rank %d: the communicator's device work did not finish "
                                        "within %.0f s (TUTTI_TIMEOUT), so it cannot be suspended",
                                        dc->rank, dc->timeout_s + 5);
  /* After this no kernel of any rank runs: nobody writes a region any more. */
  ncclResult_t res = agree(dc, s, mine, "finish its device work before the suspend");
  if (res != ncclSuccess) {
    td_dev_leave(&g);
    return res;
  }
  /* cudaMalloc regions (NCCL_CUMEM_ENABLE=0) lose their addresses with
   * their memory: given back unless a graph captured on some rank holds
   * them (copy-engine copies name peers' regions; kernels find every
   * region through d_comm, whose address stays), which every rank must
   * know. */
  int32_t* held = (int32_t*)calloc((size_t)dc->nranks, sizeof *held);
  if (held == NULL) {
    td_dev_leave(&g);
    return tutti_error(ncclSystemError, "out of host memory");
  }
  held[dc->rank] = td_graphs_hold_regions(dc);
  res = tutti_bootstrap_allgather(s->boot, held, sizeof *held);
  int keep = 0;
  for (int p = 0; p < dc->nranks; p++) {
    keep |= held[p];
  }
  free(held);
  if (res != ncclSuccess) {
    td_dev_leave(&g);
    return res;
  }
  dc->keep_malloc = keep;
  if (keep) {
    INFO(TUTTI_INIT | TUTTI_ALLOC,
         "rank %d: NCCL_CUMEM_ENABLE=0 and a captured CUDA graph holds the addresses of the "
         "queues: the suspend keeps them (NCCL_CUMEM_ENABLE=1 gives them back)",
         dc->rank);
  }
  tutti_dev_comm_mem(dc, &dc->held);
  dc->suspended = 1;
  td_net_free(dc); /* goodbyes both ways, then the network's comms and the shadows go */
  for (int p = 0; p < dc->nranks; p++) {
    if (!keep || dc->mapped[p].kind == TD_REGION_CUMEM) {
      td_region_release(&dc->mapped[p]);
    }
  }
  if (!keep && dc->own.kind == TD_REGION_MALLOC) {
    /* Every peer has closed its handle to this rank's memory first. */
    res = agree(dc, s, ncclSuccess, "close its peers' memory before the suspend");
    if (res != ncclSuccess) {
      td_dev_leave(&g);
      return res;
    }
  }
  if (!keep || dc->own.kind == TD_REGION_CUMEM) {
    td_region_release(&dc->own);
  }
  if (!keep || dc->pvt.kind == TD_REGION_CUMEM) {
    td_region_release(&dc->pvt);
  }
  free_scratch(dc);
  for (int p = 0; dc->host_mode && p < dc->nranks; p++) {
    td_host_region_unpin(&dc->hosts[p]);
  }
  cudaError_t e = cudaStreamSynchronize(dc->side); /* the pool gives the scratch back here */
  res = e == cudaSuccess ? ncclSuccess : cuda_fail(e, "cudaStreamSynchronize");
  if (dc->host_mode) {
    /* Every rank has unpinned its mapping of every segment: each owner
     * gives its pages back. */
    ncclResult_t bres = tutti_bootstrap_barrier(s->boot);
    res = res != ncclSuccess ? res : bres;
    if (res == ncclSuccess) {
      res = td_host_region_punch(&dc->hosts[dc->rank]);
    }
  }
  td_dev_leave(&g);
  if (res == ncclSuccess) {
    INFO(TUTTI_INIT | TUTTI_ALLOC,
         "rank %d: suspended, %.2f MiB of GPU %d memory and %.2f MiB of pinned host memory given "
         "back",
         dc->rank, (double)dc->held.dev_suspend / (1 << 20), dc->dev,
         (double)dc->held.host_suspend / (1 << 20));
  }
  return res;
}

/* This rank's own memory back, zeroed: its counters, its region (on the GPU
 * or host memory pinned again, as are its mappings of local peers'). */
static ncclResult_t restore_own(struct tutti_dev_comm* dc) {
  NCCLCHECK(td_region_restore(&dc->pvt, dc->dev));
  /* cudaMalloc's come back at new addresses (nothing captured holds them). */
  dc->priv = dc->pvt.ptr;
  dc->d_comm = (struct td_devcomm*)(dc->pvt.ptr + dc->dcomm_off);
  cudaError_t e = cudaMemsetAsync(dc->priv, 0, dc->lay.priv_total, dc->side);
  if (!dc->host_mode) {
    NCCLCHECK(td_region_restore(&dc->own, dc->dev));
    dc->region = dc->own.ptr;
    dc->base[dc->rank] = dc->region;
    dc->ex[dc->rank].ptr = dc->region;
    if (dc->own.kind == TD_REGION_MALLOC &&
        cudaIpcGetMemHandle(&dc->ex[dc->rank].handle, dc->region) != cudaSuccess) {
      (void)cudaGetLastError(); /* in-process peers need none */
    }
    e = e == cudaSuccess ? cudaMemsetAsync(dc->region, 0, dc->lay.total, dc->side) : e;
  }
  for (int p = 0; dc->host_mode && p < dc->nranks; p++) {
    struct td_host_region* h = &dc->hosts[p];
    if (h->host == NULL) {
      continue; /* a network peer's: its shadow comes with the proxy */
    }
    if (p == dc->rank) {
      memset(h->host, 0, h->bytes); /* given back, so zero already; pages of its own now */
    }
    NCCLCHECK(td_host_region_repin(h));
    dc->base[p] = h->dev; /* where kernels find it now: published below */
    if (p == dc->rank) {
      dc->region = h->dev;
    }
  }
  e = e == cudaSuccess ? cudaStreamSynchronize(dc->side) : e;
  return e == cudaSuccess ? ncclSuccess : cuda_fail(e, "zeroing the resumed memory");
}

/* The peers' GPU memory mapped again at the old addresses: other
 * processes' from descriptors passed over the boxes (open on every rank),
 * this process's other GPUs' by access granted again. */
static ncclResult_t remap_peers(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                                struct tutti_fdbox* box) {
  const int n = dc->nranks;
  int* fds = (int*)malloc((size_t)n * sizeof *fds);
  if (fds == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  for (int p = 0; p < n; p++) {
    fds[p] = -1;
  }
  /* Where cudaMalloc regions moved: every rank's new address and handle. */
  ncclResult_t res = tutti_bootstrap_allgather(s->boot, dc->ex, sizeof *dc->ex);
  res = res == ncclSuccess ? td_swap_fds(dc, s, box, dc->ex, fds) : res;
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    const struct td_export* x = &dc->ex[p];
    if (dc->mapped[p].kind == TD_REGION_CUMEM) {
      res = td_region_reimport(&dc->mapped[p], dc->dev, fds[p]);
    } else if (dc->mapped[p].kind == TD_REGION_IPC && dc->mapped[p].released) {
      res = td_region_reopen_ipc(&dc->mapped[p], &x->handle);
      dc->base[p] = dc->mapped[p].ptr;
    } else if (p != dc->rank && !dc->remote[p] && x->pid == (int32_t)getpid() &&
               x->kind == TD_REGION_MALLOC) {
      dc->base[p] = x->ptr; /* a region of this process: its new address */
    } else if (p != dc->rank && !dc->remote[p] && x->pid == (int32_t)getpid() &&
               x->dev != dc->dev && x->kind == TD_REGION_CUMEM) {
      res = td_region_grant(x->ptr, x->size, dc->dev);
    }
  }
  for (int p = 0; p < n; p++) {
    if (fds[p] >= 0) {
      close(fds[p]); /* the mapping holds the memory */
    }
  }
  free(fds);
  return res;
}

/* Steps 2 and 3 of a resume: the peers' memory, then the network proxy's
 * connections (collective on every rank, as at setup). */
static ncclResult_t reconnect(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                              ncclResult_t mine) {
  struct tutti_fdbox box = {-1};
  if (mine == ncclSuccess && !dc->host_mode) {
    char name[104];
    td_region_box_name(name, sizeof name, s, dc->rank);
    int err = tutti_fdbox_open(&box, name);
    if (err != 0) {
      mine = tutti_error(ncclSystemError, "rank %d could not bind a unix socket: %s", dc->rank,
                         strerror(err));
    }
  }
  /* Every rank's memory is back and its box open. */
  ncclResult_t res = agree(dc, s, mine, "take its memory back");
  if (res == ncclSuccess && !dc->host_mode) {
    res = agree(dc, s, remap_peers(dc, s, &box), "map its peers' memory again");
  }
  tutti_fdbox_close(&box);
  if (res != ncclSuccess) {
    return res;
  }
  char why[512] = "";
  res = td_net_connect(dc, s, why, sizeof why);
  if (res == ncclSuccess && why[0] != '\0') {
    res = tutti_error(ncclSystemError, "rank %d could not connect its device proxy again: %s",
                      dc->rank, why);
  }
  return res;
}

extern "C" ncclResult_t tutti_dev_comm_resume(struct tutti_dev_comm* dc,
                                              const struct tutti_dev_setup* s) {
  if (!dc->suspended) {
    return tutti_error(ncclInvalidUsage, "rank %d: the communicator is not suspended", dc->rank);
  }
  struct td_dev_guard g;
  td_dev_enter(&g, dc->dev);
  ncclResult_t res = reconnect(dc, s, restore_own(dc));
  if (res == ncclSuccess) {
    res = td_publish(dc);
  }
  /* Counters start again from zero on every rank, as after setup. */
  dc->ce_seq = 0;
  res = agree(dc, s, res, "resume its device communicator");
  if (res == ncclSuccess) {
    res = td_net_start(dc);
  }
  if (res == ncclSuccess) {
    dc->suspended = 0;
    INFO(TUTTI_INIT | TUTTI_ALLOC, "rank %d: resumed on GPU %d", dc->rank, dc->dev);
  }
  td_dev_leave(&g);
  return res;
}
