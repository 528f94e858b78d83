/* NCCL 2.30's device API on the host (nccl_device.h): communicator
 * properties, teams, the requirement helpers, and ncclDevCommCreate, which
 * tutti answers as NCCL does where symmetric memory is unavailable. */
#include "api/devcomm.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/comm.h"
#include "topo/topo.h"
#include "util/check.h"
#include "util/cuda.h"

/* The first release whose properties have hostRmaSupport, ginType,
 * nLsaTeams and railedGinType. */
#define PROPS_V2 22904u
/* The first with commHash, ginMinStride, ginConnectionType, ginSupport and
 * devCommRuntimeVersionSize. */
#define PROPS_V3 23100u

/* NCCL's load/store team is the run of consecutive ranks of one NVLink
 * domain, the same size everywhere (the gcd of the runs). tutti's ranks reach
 * each other's GPU memory when they share a host and the device executor
 * maps peers: runs of consecutive ranks on one host. */
int tutti_devcomm_lsa_size(const struct ncclComm* comm) {
  if (!tutti_dev_comm_maps_gpus(comm->dev) || comm->host_of == NULL) {
    return 1;
  }
  return tutti_topo_host_run(comm->host_of, comm->nranks);
}

/* The NVML index of this process's GPU: NVML counts GPUs in PCI order, as
 * the driver lists them in /proc/driver/nvidia/gpus; -1 when unknown. */
static int nvml_index(int cuda_dev) {
  char bus[32];
  if (tutti_cuda_device_pci(cuda_dev, bus, sizeof bus) != 0) {
    return -1;
  }
  DIR* d = opendir("/proc/driver/nvidia/gpus");
  if (d == NULL) {
    return -1;
  }
  int below = 0, found = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') {
      continue;
    }
    int c = strcasecmp(e->d_name, bus);
    below += c < 0;
    found |= c == 0;
  }
  closedir(d);
  return found ? below : -1;
}

NCCL_API ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  NCCLCHECK(tutti_comm_check(comm, "ncclCommQueryProperties"));
  if (props == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommQueryProperties: props is NULL");
  }
  if (props->magic != NCCL_API_MAGIC || props->version < (unsigned)NCCL_VERSION(2, 29, 0)) {
    return tutti_error(ncclInvalidUsage,
                       "ncclCommQueryProperties: props (magic 0x%x, version %u) was not set with "
                       "NCCL_COMM_PROPERTIES_INITIALIZER of NCCL 2.29 or later",
                       props->magic, props->version);
  }
  if (props->version > (unsigned)NCCL_VERSION_CODE) {
    return tutti_error(ncclInvalidUsage,
                       "ncclCommQueryProperties: props comes from NCCL %u, newer than this "
                       "library's %d: its layout is unknown here",
                       props->version, NCCL_VERSION_CODE);
  }
  props->rank = comm->rank;
  props->nRanks = comm->nranks;
  props->cudaDev = comm->cuda_dev;
  props->nvmlDev = comm->cuda_dev >= 0 ? nvml_index(comm->cuda_dev) : -1;
  /* No kernels of the user's run on tutti's device communicators, and there
   * is no NVLink multicast. */
  props->deviceApiSupport = false;
  props->multimemSupport = false;
  if (props->version >= PROPS_V2) {
    props->ginType = tutti_gin_none;
    props->railedGinType = tutti_gin_none;
    props->nLsaTeams = comm->nranks / tutti_devcomm_lsa_size(comm);
    /* One-sided operations run on every path tutti has. */
    props->hostRmaSupport = comm->num_rma_ctx > 0;
  }
  if (props->version >= PROPS_V3 && props->size >= sizeof *props) {
    /* No GIN and no device communicators: nothing to support or size. */
    props->commHash = comm->comm_hash;
    props->ginMinStride = 0;
    props->ginConnectionType = 0;
    memset(props->ginSupport, 0, sizeof props->ginSupport);
    props->devCommRuntimeVersionSize = 0;
  }
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                                        ncclDevComm_t* outDevComm) {
  NCCLCHECK(tutti_comm_check(comm, "ncclDevCommCreate"));
  if (reqs == NULL || outDevComm == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclDevCommCreate: %s is NULL",
                       reqs == NULL ? "reqs" : "outDevComm");
  }
  if (reqs->magic != NCCL_API_MAGIC || reqs->version > (unsigned)NCCL_VERSION_CODE) {
    return tutti_error(ncclInvalidUsage,
                       "ncclDevCommCreate: reqs (magic 0x%x, version %u) was not set with "
                       "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER of this release or an older one",
                       reqs->magic, reqs->version);
  }
  return tutti_error(ncclInvalidUsage,
                     "ncclDevCommCreate: communicator %p does not support symmetric memory: tutti "
                     "runs no user kernels written against nccl_device.h "
                     "(ncclCommQueryProperties reports deviceApiSupport 0); use collectives, "
                     "ncclSend/ncclRecv or the one-sided calls (ncclPutSignal, ncclWaitSignal)",
                     (void*)comm);
}

NCCL_API ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm) {
  NCCLCHECK(tutti_comm_check(comm, "ncclDevCommDestroy"));
  if (devComm == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclDevCommDestroy: devComm is NULL");
  }
  return tutti_error(ncclInvalidArgument,
                     "ncclDevCommDestroy: %p was not made by ncclDevCommCreate on communicator %p "
                     "(which makes none on tutti)",
                     (const void*)devComm, (void*)comm);
}

/* Teams. Like NCCL's, these check no ranges. */
NCCL_API ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  ncclTeam_t t = {comm->nranks, comm->rank, 1};
  return t;
}

NCCL_API ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  const int lsa = tutti_devcomm_lsa_size(comm);
  ncclTeam_t t = {lsa, comm->rank % lsa, 1};
  return t;
}

NCCL_API ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  const int lsa = tutti_devcomm_lsa_size(comm);
  ncclTeam_t t = {comm->nranks / lsa, comm->rank / lsa, lsa};
  return t;
}

NCCL_API int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  return comm->rank + (rank - team.rank) * team.stride;
}

NCCL_API int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  return comm->rank % tutti_devcomm_lsa_size(comm) + (rank - team.rank) * team.stride;
}

/* Compute Fabric Transport's teams (NCCL 2.31). tutti has no CFT: the
 * unicast and the multicast group are this rank alone, as NCCL's are on a
 * GPU without CFT; an unknown mode is NCCL's empty team. */
NCCL_API ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode) {
  (void)comm;
  ncclTeam_t t = {0, 0, 0};
  if (mode == NCCL_CFT_TEAM_FLAT || mode == NCCL_CFT_TEAM_HIER_MULTIMEM ||
      mode == NCCL_CFT_TEAM_HIER_LSA) {
    t.nRanks = 1;
    t.stride = 1;
  }
  return t;
}

NCCL_API ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm) {
  (void)comm;
  ncclTeam_t t = {1, 0, 1};
  return t;
}

/* The requirement helpers: what a device communicator would need for each
 * kind of resource, in NCCL's units (pure functions of their arguments). */
static void req_reset(ncclDevResourceRequirements_t* r) {
  memset(r, 0, sizeof *r);
}

NCCL_API ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                      ncclLsaBarrierHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq) {
  req_reset(outReq);
  outHandle->nBarriers = nBarriers;
  /* Per barrier: three words of its own and one per team member. */
  outReq->bufferSize = (size_t)(3 * nBarriers + nBarriers * team.nRanks) * sizeof(uint32_t);
  outReq->bufferAlign = sizeof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                      int nBarriers,
                                                      ncclGinBarrierHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq) {
  (void)comm;
  req_reset(outReq);
  /* A signal per member and barrier; a one-rank team gets two (NCCL 2.32). */
  outReq->ginSignalCount = nBarriers * (team.nRanks < 2 ? 2 : team.nRanks);
  outReq->outGinSignalStart = &outHandle->signal0;
  return ncclSuccess;
}

NCCL_API int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  /* A slot carries 8 bytes of data beside its flags. */
  return maxElts * ((maxEltSize + 7) / 8);
}

NCCL_API ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                                 ncclLLA2AHandle_t* outHandle,
                                                 ncclDevResourceRequirements_t* outReq) {
  req_reset(outReq);
  outHandle->nSlots = (uint32_t)nSlots;
  outReq->bufferSize = (size_t)nBlocks * (1 + 2 * (size_t)nSlots) * 16;
  outReq->bufferAlign = 16;
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}

static size_t round_up(size_t x, size_t a) {
  return (x + a - 1) / a * a;
}

NCCL_API ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                                     ncclGinOutboxHandle_t* outHandle,
                                                     ncclDevResourceRequirements_t* outReq) {
  req_reset(outReq);
  if (size_log2 < 7) {
    size_log2 = 7;
  }
  outHandle->size_log2 = (uint32_t)size_log2;
  /* Per block: a header line, 512 request slots of 16 bytes, the outbox. */
  outReq->bufferSize = (size_t)nBlocks * (128 + 512 * 16 + round_up((size_t)1 << size_log2, 128));
  outReq->bufferAlign = 128;
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                                       ncclGinInboxA2AHandle_t* outHandle,
                                                       ncclDevResourceRequirements_t* outReq) {
  req_reset(outReq);
  const uint32_t npeers = peers.nRanks > 1 ? (uint32_t)(peers.nRanks - 1) : 1;
  outHandle->size_log2 = (uint32_t)size_log2;
  /* A reciprocal for dividing by the peer count on the device. */
  outHandle->nPeers_rcp32 = UINT32_MAX / npeers + ((npeers & (npeers - 1)) == 0 ? 1u : 0u);
  outReq->bufferSize = (size_t)nBlocks * (128 + round_up((size_t)1 << size_log2, 128));
  outReq->bufferAlign = 128;
  outReq->ginSignalCount = nBlocks * 4 * ((int)npeers + 512);
  outReq->outGinSignalStart = &outHandle->signals;
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}
