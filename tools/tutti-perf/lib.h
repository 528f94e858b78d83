/* The NCCL API reached through dlopen/dlsym, so that one binary measures any
 * library that implements it (tutti, NVIDIA's NCCL, ...). */
#ifndef TUTTI_PERF_LIB_H
#define TUTTI_PERF_LIB_H

#include <limits.h>

#include "nccl.h"

struct perf_nccl_api {
  char path[PATH_MAX]; /* the file the loader actually mapped */
  int version;
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*CommInitAll)(ncclComm_t*, int, const int*); /* optional */
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t); /* optional (NCCL >= 2.13) */
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t);
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  /* Optional: NCCL before 2.28 has none of these; the tool then builds
   * them from grouped send/recv, as nccl-tests does. */
  ncclResult_t (*AlltoAll)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Gather)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Scatter)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                          cudaStream_t);
  ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t,
                                       ncclComm_t); /* optional (NCCL >= 2.11) */
  ncclResult_t (*RedOpDestroy)(ncclRedOp_t, ncclComm_t);
  /* Optional (NCCL >= 2.29): windows and one-sided operations (putsignal). */
  ncclResult_t (*CommWindowRegister)(ncclComm_t, void*, size_t, ncclWindow_t*, int);
  ncclResult_t (*CommWindowDeregister)(ncclComm_t, ncclWindow_t);
  ncclResult_t (*PutSignal)(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int,
                            int, unsigned int, ncclComm_t, cudaStream_t);
  ncclResult_t (*WaitSignal)(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t);
  /* Optional (NCCL >= 2.32.3): TUTTI_PERF_PSK sets a pre-shared key. */
  ncclResult_t (*SetEncryption)(const ncclEncryptionConfig_t*);
};

extern struct perf_nccl_api perf_nccl;

/* Loads `path` (NULL: libtutti.so.0 next to the executable, in the build
 * tree, then wherever the loader finds it). On failure writes why and
 * returns -1. */
int perf_lib_load(const char* path, char* why, size_t why_len);

/* "tutti", "nccl", ...: the file name without "lib" and ".so*". */
void perf_lib_label(const char* path, char* out, size_t len);

/* "2.28.9" from an ncclGetVersion code. */
void perf_lib_version_string(int code, char* out, size_t len);

#endif
