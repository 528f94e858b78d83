/* Whether GPUs can write each other's memory, agreed by every rank before
 * any queue is allocated: when some pair of local GPUs has no peer access
 * (no NVLink or PCIe peer path, or a peer's GPU hidden from this process by
 * CUDA_VISIBLE_DEVICES), every region goes to host memory, as NCCL falls
 * back from P2P to SHM. Also agreed: whether the direct path's LL128 lines
 * get inboxes: every pair on NVLink (or one GPU), which they need, and some
 * rank's settings asking for them (the layout must be the same on all). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/dev_comm.h"
#include "device/direct.h"

extern "C" {
#include "bootstrap/bootstrap.h"
#include "util/check.h"
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
  need[me] = (why[0] != '\0') | (no_nvlink << 1) | (td_direct_wants_ll128() << 2);
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
