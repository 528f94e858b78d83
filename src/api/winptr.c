/* nccl_device.h's window pointers on the host: where a peer's part of a
 * window lies in this process's address space, for kernels of the user's to
 * load and store. tutti maps no peer's window into this process (puts reach
 * peers through the one-sided service, docs/design.md), so for another rank
 * the answer is NCCL's "not reachable by load and store": success and NULL;
 * for this rank its own device buffer. There is no NVLink multicast. */
#include <stdint.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/devcomm.h"
#include "rma/rma.h"
#include "util/check.h"
#include "util/cuda.h"

/* The window `win` of a live communicator, or an error naming `fn`. */
static ncclResult_t find(const char* fn, ncclWindow_t win, void** out, struct ncclComm** comm,
                         struct tutti_win** w) {
  if (win == NULL || out == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: %s is NULL", fn,
                       win == NULL ? "window" : "outPtr");
  }
  *out = NULL;
  *w = tutti_comm_find_window(win, comm);
  if (*w == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "%s: window %p belongs to no live communicator (deregistered, or never "
                       "registered)",
                       fn, (void*)win);
  }
  return ncclSuccess;
}

/* Rank `peer`'s part of `w` at `offset`, as this process may address it. */
static ncclResult_t peer_pointer(const char* fn, struct ncclComm* comm, struct tutti_win* w,
                                 size_t offset, int peer, void** out) {
  if (peer < 0 || peer >= comm->nranks) {
    return tutti_error(ncclInvalidArgument, "%s: rank %d is not in [0, %d)", fn, peer,
                       comm->nranks);
  }
  if (offset >= w->peers[peer].size) {
    return tutti_error(ncclInvalidArgument,
                       "%s: offset %zu is beyond rank %d's part of the window (%llu bytes)", fn,
                       offset, peer, (unsigned long long)w->peers[peer].size);
  }
  if (peer == comm->rank && w->kind != TUTTI_MEM_HOST) {
    *out = (char*)w->buff + offset;
  }
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                               void** outPtr) {
  struct ncclComm* comm;
  struct tutti_win* w;
  NCCLCHECK(find("ncclGetPeerDevicePointer", window, outPtr, &comm, &w));
  return peer_pointer("ncclGetPeerDevicePointer", comm, w, offset, peer, outPtr);
}

NCCL_API ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                              void** outPtr) {
  struct ncclComm* comm;
  struct tutti_win* w;
  NCCLCHECK(find("ncclGetLsaDevicePointer", window, outPtr, &comm, &w));
  const int lsa = tutti_devcomm_lsa_size(comm);
  if (lsaRank < 0 || lsaRank >= lsa) {
    return tutti_error(ncclInvalidArgument,
                       "ncclGetLsaDevicePointer: lsaRank %d is not in this rank's load/store "
                       "team [0, %d)",
                       lsaRank, lsa);
  }
  return peer_pointer("ncclGetLsaDevicePointer", comm, w, offset, comm->rank / lsa * lsa + lsaRank,
                      outPtr);
}

NCCL_API ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                      void** outPtr) {
  (void)offset;
  struct ncclComm* comm;
  struct tutti_win* w;
  return find("ncclGetLsaMultimemDevicePointer", window, outPtr, &comm, &w);
}

NCCL_API ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                   ncclMultimemHandle_t multimem, void** outPtr) {
  (void)offset;
  struct ncclComm* comm;
  struct tutti_win* w;
  NCCLCHECK(find("ncclGetMultimemDevicePointer", window, outPtr, &comm, &w));
  if (multimem.mcBasePtr == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "ncclGetMultimemDevicePointer: the multimem handle is empty");
  }
  return ncclSuccess;
}

/* Compute Fabric Transport's logical endpoints (NCCL 2.31): tutti registers
 * no window with CFT, so every question is answered with the invalid
 * endpoint and ncclInvalidUsage naming why. */
static ncclResult_t no_le(const char* fn, ncclWindow_t window, ncclCftLeId* leId,
                          size_t* leOffset) {
  if (leId == NULL || leOffset == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: %s is NULL", fn,
                       leId == NULL ? "leId" : "leOffset");
  }
  *leId = TUTTI_LE_ID_INVALID;
  *leOffset = 0;
  void* unused;
  struct ncclComm* comm;
  struct tutti_win* w;
  NCCLCHECK(find(fn, window, &unused, &comm, &w));
  return tutti_error(ncclInvalidUsage,
                     "%s: window %p has no Compute Fabric Transport logical endpoints: tutti "
                     "has no CFT (ncclCommQueryProperties reports no device API support)",
                     fn, (void*)window);
}

NCCL_API ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset,
                                                  ncclCftLeId* leId, size_t* leOffset) {
  (void)offset;
  return no_le("ncclGetMultimemDeviceLeInfo", window, leId, leOffset);
}

NCCL_API ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                             ncclTeam_t cftTeam, ncclCftLeId* leId,
                                             size_t* leOffset) {
  (void)offset;
  (void)peerCft;
  (void)cftTeam;
  return no_le("ncclGetCftDeviceLeInfo", window, leId, leOffset);
}

NCCL_API ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                              ncclCftLeId* leId, size_t* leOffset) {
  (void)offset;
  (void)peerWorld;
  return no_le("ncclGetPeerDeviceLeInfo", window, leId, leOffset);
}
