/* The host side of NCCL 2.30's device API (NVIDIA's nccl_device.h, which is
 * C++ and needs the CUDA headers): the types its host functions read and
 * write, declared here with the same layout, so that programs compiled
 * against NVIDIA's header call tutti's functions unchanged. tutti has no
 * device-side communicators (kernels written against nccl_device.h): the
 * functions answer as NCCL does on a communicator without symmetric memory
 * (docs/design.md, "The device API"). */
#ifndef TUTTI_API_DEVCOMM_H
#define TUTTI_API_DEVCOMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

typedef struct {
  int nRanks, rank, stride;
} ncclTeam_t;

/* Compute Fabric Transport (NCCL 2.31): logical endpoints and its teams. */
typedef uint32_t ncclCftLeId;
#define TUTTI_LE_ID_INVALID ((ncclCftLeId)-1) /* NCCL_LE_ID_INVALID */
typedef enum {
  NCCL_CFT_TEAM_FLAT,
  NCCL_CFT_TEAM_HIER_MULTIMEM,
  NCCL_CFT_TEAM_HIER_LSA
} ncclCftTeamMode_t;

typedef uint32_t ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

typedef struct ncclDevResourceRequirements {
  struct ncclDevResourceRequirements* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
} ncclDevResourceRequirements_t;

typedef struct {
  void* mcBasePtr;
} ncclMultimemHandle_t;

typedef struct ncclTeamRequirements {
  struct ncclTeamRequirements* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
} ncclTeamRequirements_t;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
  int ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
} ncclDevCommRequirements_t;

typedef enum {
  tutti_gin_none = 0 /* NCCL_GIN_TYPE_NONE: the only kind tutti reports */
} tutti_gin_type_t;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  int ginType;
  int nLsaTeams;
  bool hostRmaSupport; /* written for callers newer than 2.29.3 only, with the two below */
  int railedGinType;
  /* 2.31: written for callers of 2.31 or later only. */
  uint64_t commHash;
  int ginMinStride;
  int ginConnectionType; /* NCCL_GIN_CONNECTION_NONE: 0 */
  bool ginSupport[64];   /* per GIN type: none here */
  size_t devCommRuntimeVersionSize;
} ncclCommProperties_t;

/* The handles the requirement helpers fill. */
typedef struct {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclLsaBarrierHandle_t;
typedef struct {
  ncclGinSignal_t signal0;
  uint32_t unused;
} ncclGinBarrierHandle_t;
typedef struct {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
} ncclLLA2AHandle_t;
typedef struct {
  ncclDevResourceHandle_t bufHandle;
  uint32_t size_log2;
} ncclGinOutboxHandle_t;
typedef struct {
  ncclDevResourceHandle_t bufHandle;
  ncclGinSignal_t signals;
  uint32_t size_log2;
  uint32_t nPeers_rcp32;
} ncclGinInboxA2AHandle_t;

/* ncclDevComm is opaque here: tutti never fills one. */
typedef struct tutti_opaque_dev_comm ncclDevComm_t;

/* The load/store team: the run of consecutive ranks around this one whose
 * GPU memory this rank maps (1 where none is: itself alone). */
struct ncclComm;
int tutti_devcomm_lsa_size(const struct ncclComm* comm);

#endif
