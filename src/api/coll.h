/* Between the collective entry points (coll.c) and their per-call
 * configuration (coll_config.c): a call as the API took it, and what its
 * ncclCollConfig_t asks for. */
#ifndef TUTTI_API_COLL_H
#define TUTTI_API_COLL_H

#include <stdint.h>

#include "algo/algo.h"
#include "nccl.h"

struct tutti_coll_call {
  enum tutti_coll coll;
  const char* fn; /* the API function, for error texts */
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root; /* or peer */
  int reduces;
  int needs_send; /* this rank reads sendbuff */
  int needs_recv; /* this rank writes recvbuff */
  int device;     /* the buffers are device memory: the device executor runs the call */
};

/* A call's ncclCollConfig_t as read (coll_config.c). */
struct tutti_coll_cfg {
  const char* selection; /* algSelection as given (NULL: none) */
  unsigned algos;        /* what it names, a bit per enum tutti_algo_id (0: any) */
  int force;             /* forceAlgSelection */
  int min_channels;      /* minCTAs, maxCTAs (0: unset) */
  int max_channels;
  uint64_t tag;      /* userProfilerTag */
  cudaEvent_t event; /* launchCompletionEvent */
};

/* Reads `config` (any release's, by its size) for a call of `coll` made
 * through `fn`: ncclInvalidArgument with a sentence where NCCL refuses it. */
ncclResult_t tutti_coll_config_read(const ncclCollConfig_t* config, const char* fn,
                                    struct tutti_coll_cfg* out);

/* Checks the call, plans it within `cfg` (NULL: the plain call) and queues
 * it in the caller's group (coll.c). */
ncclResult_t tutti_coll_run(struct ncclComm* comm, struct tutti_coll_call c, cudaStream_t stream,
                            const struct tutti_coll_cfg* cfg);

#endif
