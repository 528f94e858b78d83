/* A deliberately wrong NCCL-API library for tutti-perf's own test: libtutti
 * (its dependency) with an ncclAllReduce that damages one byte of every
 * result, so a run against it must report wrong values and exit 1. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>

#include "nccl.h"

typedef ncclResult_t (*allreduce_fn)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);

__attribute__((visibility("default"))) ncclResult_t ncclAllReduce(const void* sendbuff,
                                                                  void* recvbuff, size_t count,
                                                                  ncclDataType_t datatype,
                                                                  ncclRedOp_t op, ncclComm_t comm,
                                                                  cudaStream_t stream) {
  allreduce_fn real = (allreduce_fn)dlsym(RTLD_NEXT, "ncclAllReduce");
  if (real == NULL) {
    return ncclInternalError;
  }
  ncclResult_t res = real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  if (res == ncclSuccess && count > 0) {
    ((unsigned char*)recvbuff)[0] ^= 1;
  }
  return res;
}
