/* Whether GPUs can write each other's memory, agreed by every rank before
 * any queue is allocated: when some pair of local GPUs has no peer access
 * (no NVLink or PCIe peer path, or a peer's GPU hidden from this process by
 * CUDA_VISIBLE_DEVICES), every region goes to host memory, as NCCL falls
 * back from P2P to SHM. Also agreed: whether the mapped kernel's LL128 lines
 * get inboxes: every pair on NVLink (or one GPU), which they need, and some
 * rank's settings asking for them (the layout must be the same on all).
 * Then each rank maps every peer's region (td_map_peers), the cuMem ones
 * from file descriptors passed between the processes (td_swap_fds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/dev_comm.h"
#include "device/kernels/mapped.h"
#include "device/peer/host_region.h"

extern "C" {
#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/fdpass.h"
}

struct td_bus_rec {
  char bus[32]; /* PCI bus id of the rank's GPU, "" when unknown */
};

ncclResult_t td_agree_host_mode(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s) {
  const int n = s->nranks, me = s->rank;
  struct td_bus_rec* recs = (struct td_bus_rec*)calloc((size_t)n, sizeof *recs);
  int32_t* need = (int32_t*)calloc((size_t)n, sizeof *need);
  if (recs == NULL || need == NULL) {
    free(recs);
    free(need);
    return tutti_error(ncclSystemError, "out of host memory");
  }
  if (cudaDeviceGetPCIBusId(recs[me].bus, sizeof recs[me].bus, dc->dev) != cudaSuccess) {
    (void)cudaGetLastError();
    recs[me].bus[0] = '\0';
  }
  ncclResult_t res = tutti_bootstrap_allgather(s->boot, recs, sizeof *recs);
  char why[200] = "";
  int no_nvlink = 0;
  for (int p = 0; p < n && res == ncclSuccess && why[0] == '\0'; p++) {
    if (p == me || dc->remote[p] ||
        (recs[p].bus[0] != '\0' && strcmp(recs[p].bus, recs[me].bus) == 0)) {
      continue; /* itself, reached over the network, or the same GPU */
    }
    int other = -1, can = 0;
    if (recs[p].bus[0] != '\0' && cudaDeviceGetByPCIBusId(&other, recs[p].bus) == cudaSuccess) {
      cudaDeviceCanAccessPeer(&can, dc->dev, other);
    }
    (void)cudaGetLastError();
    if (!can) {
      snprintf(why, sizeof why, "GPU %s of rank %d %s GPU %s of rank %d", recs[me].bus, me,
               other < 0 ? "does not see (CUDA_VISIBLE_DEVICES)" : "has no peer access to",
               recs[p].bus, p);
    }
    /* LL128 lines need NVLink: PCIe may split a 128-byte store. Native
     * atomics between two GPUs are an NVLink property. */
    int atomics = 0;
    if (can && cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, dc->dev,
                                         other) != cudaSuccess) {
      (void)cudaGetLastError();
      atomics = 0;
    }
    no_nvlink |= !atomics;
  }
  need[me] = (why[0] != '\0') | (no_nvlink << 1) | (s->sizes.wants_ll128 << 2);
  if (res == ncclSuccess) {
    res = tutti_bootstrap_allgather(s->boot, need, sizeof *need);
  }
  int nvlink = res == ncclSuccess, wanted = 0;
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    nvlink &= !(need[p] & 2);
    wanted |= (need[p] & 4) != 0;
    if ((need[p] & 1) && !dc->host_mode) {
      dc->host_mode = 1;
      INFO(TUTTI_INIT | TUTTI_P2P, "rank %d: %s: device queues in host memory", p == me ? me : p,
           why[0] != '\0' ? why : "a peer's GPU cannot reach another's directly");
    }
  }
  dc->ll128 = nvlink && wanted;
  free(recs);
  free(need);
  return res;
}

/* Maps every peer's region: a host region, this process's own pointer (with
 * peer access), or another process's export. */
ncclResult_t td_map_peers(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                          const struct td_export* ex, int* fds, char* why, size_t why_len) {
  for (int p = 0; p < dc->nranks; p++) {
    if (p == dc->rank) {
      dc->base[p] = dc->region;
      continue;
    }
    if (dc->remote[p]) {
      continue; /* its shadow, made by td_net_connect */
    }
    if (dc->host_mode) {
      char name[TD_HOST_REGION_NAME];
      td_host_region_name(name, sizeof name, s->secret, s->comm_hash, p);
      if (td_host_region_map(name, dc->lay.total, 0, &dc->hosts[p]) != ncclSuccess) {
        snprintf(why, why_len, "rank %d could not map rank %d's queues: %s", dc->rank, p,
                 tutti_last_error());
        return ncclSuccess;
      }
      dc->base[p] = dc->hosts[p].dev;
      continue;
    }
    if (ex[p].dev != dc->dev) {
      int can = 0;
      cudaDeviceCanAccessPeer(&can, dc->dev, ex[p].dev);
      if (!can) {
        snprintf(why, why_len,
                 "GPU %d (rank %d) cannot access GPU %d (rank %d) directly (no NVLink or PCIe "
                 "peer access)",
                 dc->dev, dc->rank, ex[p].dev, p);
        return ncclSuccess;
      }
    }
    if (ex[p].pid == (int32_t)getpid()) {
      if (ex[p].dev != dc->dev) {
        /* Also for the callers' buffers, which one-process kernels read. */
        cudaError_t e = cudaDeviceEnablePeerAccess(ex[p].dev, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
          (void)cudaGetLastError();
        } else if (e != cudaSuccess) {
          return tutti_error(ncclUnhandledCudaError, "cudaDeviceEnablePeerAccess failed: %s (%s)",
                             cudaGetErrorString(e), cudaGetErrorName(e));
        }
        if (ex[p].kind == TD_REGION_CUMEM) {
          NCCLCHECK(td_region_grant(ex[p].ptr, ex[p].size, dc->dev));
        }
      }
      dc->base[p] = ex[p].ptr;
      continue;
    }
    ncclResult_t r = ex[p].kind == TD_REGION_CUMEM
                         ? td_region_import(&dc->mapped[p], dc->dev, fds[p], ex[p].size)
                         : td_region_open_ipc(&dc->mapped[p], &ex[p].handle);
    if (r != ncclSuccess) {
      snprintf(why, why_len, "rank %d could not map rank %d's GPU memory: %s", dc->rank, p,
               tutti_last_error());
      return ncclSuccess;
    }
    dc->base[p] = dc->mapped[p].ptr;
  }
  return ncclSuccess;
}

/* Between processes of this host, cuMem regions travel as file descriptors
 * (region.h): this rank's to every peer process that maps it, theirs here.
 * fds[p] (all -1 on entry) becomes p's descriptor where one arrives. */
ncclResult_t td_swap_fds(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s,
                         struct tutti_fdbox* box, const struct td_export* ex, int* fds) {
  const int n = s->nranks;
  unsigned char* sends = (unsigned char*)calloc((unsigned)n, 2);
  if (sends == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  unsigned char* gets = sends + n;
  int any = 0;
  for (int p = 0; p < n; p++) {
    const int other = p != s->rank && !dc->remote[p] && ex[p].pid != (int32_t)getpid();
    sends[p] = other && dc->own.kind == TD_REGION_CUMEM;
    gets[p] = other && ex[p].kind == TD_REGION_CUMEM;
    any |= sends[p] | gets[p];
  }
  int myfd = -1;
  ncclResult_t res = ncclSuccess;
  if (any && dc->own.kind == TD_REGION_CUMEM) {
    res = td_region_export(&dc->own, &myfd);
  }
  if (res == ncclSuccess && any) {
    res = td_region_swap(box, s, sends, gets, myfd, fds);
  }
  if (myfd >= 0) {
    close(myfd);
  }
  free(sends);
  return res;
}
