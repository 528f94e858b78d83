/* tutti: the NCCL 2.32 C API. Types, values and layouts match NVIDIA's nccl.h
 * of NCCL 2.32.6, so programs built against either header run on libtutti;
 * programs built against 2.28's, 2.30's or 2.31's header keep working (their
 * smaller ncclConfig_t and ncclCollConfig_t are read up to their `size`).
 * Unlike NVIDIA's header this one needs no CUDA headers: cudaStream_t and
 * cudaEvent_t are declared as the same opaque pointer types the CUDA runtime
 * uses. Every function also exists as pnccl<Name>, the profiling alias
 * NVIDIA's library exports. */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 6
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 23206
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

#define TUTTI_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* Same type as the CUDA runtime's; repeating an identical typedef is legal. */
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8, /* an operation gave up waiting (NCCL 2.30) */
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
#define NCCL_API_MAGIC 0xcafebeef

/* ncclCommWindowRegister's flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01  /* every rank registers the same size, collectively */
#define NCCL_WIN_STRICT_ORDERING 0x02 /* puts into the window land in issue order */
#define NCCL_WIN_GIN_ONLY 0x04        /* 2.32: for GPU-initiated networking only */
#define NCCL_WIN_CFT_COUNTED 0x08     /* 2.32: CFT counted logical endpoints only */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

#define NCCL_REVOKE_DEFAULT 0x00

/* ncclConfig_t.hostCftMode and .nvlsHostMode (NCCL 2.31, 2.32). */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;
typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* The layout of NCCL 2.31 and 2.32 (ncclConfig_v23100). `size`, `magic`
 * and `version` come from NCCL_CONFIG_INITIALIZER; a program built against an
 * older header passes its own smaller size and the fields it lacks take their
 * defaults. */
typedef struct ncclConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;      /* 2.30 */
  int numRmaCtx;           /* 2.30: contexts of one-sided operations */
  int maxP2pPeers;         /* 2.30 */
  int graphStreamOrdering; /* 2.30 */
  int launchOrderImplicit; /* 2.31 */
  int numRmaSig;           /* 2.31: signals per context of one-sided operations */
  int rmaEagerInit;        /* 2.31 */
  int hostCftMode;         /* 2.31: ncclHostCftMode_t */
  int nvlsHostMode;        /* 2.32: ncclNvlsHostMode_t */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                    \
  {                                                                                                \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                       \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                       \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                       \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                       \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                       \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                       \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT \
  }

/* A vendor's option for one collective call (NCCL 2.31): options chain
 * through `next` and hang from ncclCollConfig_t.ext. NVIDIA's library and
 * tutti ignore every one. */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* The configuration of one collective call, for the nccl<Coll>Config
 * functions (NCCL 2.31; launchCompletionEvent 2.32). Set it with
 * NCCL_COLLCONFIG_INITIALIZER, the same on every rank; a NULL config is the
 * plain call. Read up to its `size`, as ncclConfig_t is. */
typedef struct ncclCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  int minCTAs;                       /* the fewest channels the call is cut into */
  int maxCTAs;                       /* the most */
  int nvlsCTAs;                      /* NVLink SHARP's channels (none on tutti) */
  int cgaClusterSize;                /* thread block clusters (not used by tutti's kernels) */
  const char* algSelection;          /* algorithms the call may use; NULL or "": any */
  int forceAlgSelection;             /* 1 (default): a selection that cannot run is an error */
  int CTAPolicy;                     /* NCCL_CTA_POLICY_*; unset: the communicator's */
  uint64_t userProfilerTag;          /* shown with the call by tutti's logs and call records */
  cudaEvent_t launchCompletionEvent; /* 2.32: recorded once the call is launched */
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                     \
  {                                                                                     \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_PTR, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, 1, NCCL_CONFIG_UNDEF_INT, 0,      \
        NCCL_CONFIG_UNDEF_PTR                                                           \
  }

/* ncclSetEncryption's configuration (NCCL 2.32): the library's own TCP
 * sockets encrypted with a pre-shared key of at least 32 bytes. */
#define NCCL_ENCRYPTION_MODE_NONE 0
#define NCCL_ENCRYPTION_MODE_PSK 1
typedef struct ncclEncryptionConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int mode;        /* NCCL_ENCRYPTION_MODE_* */
  const char* psk; /* NUL-terminated */
} ncclEncryptionConfig_t;

#define NCCL_ENCRYPTION_CONFIG_INITIALIZER                                                        \
  {                                                                                               \
    sizeof(ncclEncryptionConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_ENCRYPTION_MODE_NONE, \
        NCCL_CONFIG_UNDEF_PTR                                                                     \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
/* Process-wide encryption of the library's TCP connections made from then
 * on (NCCL 2.32); tutti loads OpenSSL 3 for it and answers ncclSystemError
 * where OpenSSL is absent (docs/design.md). */
ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t* config);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
/* Growing a communicator (NCCL 2.29): one rank of `comm` makes the id, every
 * rank of `comm` and every new rank call ncclCommGrow with it. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
void ncclResetDebugInit(void);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);

/* Giving a communicator's memory back while it is idle (NCCL 2.29.7). */
#define NCCL_SUSPEND_MEM 0x01 /* release the device and pinned host memory it holds */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes of GPU memory a suspend gives back */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes of GPU memory kept while suspended */
  ncclStatGpuMemTotal = 3      /* all GPU memory the communicator holds */
} ncclCommMemStat_t;
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
/* tutti's own stat, not NVIDIA's (the enum above is unchanged): bytes of the
 * peers' GPU memory this rank maps through the registration cache
 * (NCCL_LOCAL_REGISTER=1). The peers allocated it: ncclStatGpuMemTotal
 * does not count it. */
#define TUTTI_STAT_GPU_MEM_PEER_MAPPED ((ncclCommMemStat_t)0x100)

/* Windows: memory every rank registers so that peers may write into it. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
/* The collectives with a per-call configuration (NCCL 2.31): config NULL is
 * the plain call. */
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config);
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t* config);
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);

/* One-sided operations (NCCL 2.29): a put writes `count` elements of
 * `localbuff` at byte `peerWinOffset` of `peer`'s part of window `peerWin`
 * and then raises `peer`'s signal (`sigIdx`, context `ctx`); the peer's
 * ncclWaitSignal waits for that many signals from each rank it names. */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
typedef struct {
  int opCnt;  /* signals to wait for */
  int peer;   /* from this rank */
  int sigIdx; /* on this signal */
  int ctx;    /* of this context */
} ncclWaitSignalDesc_t;
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream);

ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* Parameters (NCCL 2.30): every NCCL_* and TUTTI_* variable the library
 * reads, by name, with its type, default and current value. */
typedef struct ncclParamHandle* ncclParamHandle_t;
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
/* The value as text: valid until this thread's next ncclParamGetStr. */
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
/* The value's bytes (an integer's in host order, a string's with its NUL),
 * at most maxLen of them copied; *len: how many the value has. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
/* By key, as text: valid until this thread's next ncclParamGetParameter. */
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
/* Every key: valid until this thread's next call of it. */
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
/* Every parameter, its value and where the value came from, to the log. */
void ncclParamDumpAll(void);

#ifdef __cplusplus
}
#endif

#endif
