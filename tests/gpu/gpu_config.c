/* The GPU suite through the nccl<Coll>Config calls (mode "config"): every
 * case of the matrix is issued with a config that cycles through the plain
 * call (NULL), NCCL_COLLCONFIG_INITIALIZER, an algorithm that is only a hint
 * (forceAlgSelection 0), bounded channels (min/maxCTAs), a profiler tag and
 * a launch-completion event, which must have been recorded on the call's
 * stream ahead of its kernel. The same cycle on every rank: each issues the
 * same cases in the same order. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_case.h"

#define VARIANTS 6

static unsigned issued;

int gcase_config_on(void) {
  const char* v = getenv("TUTTI_GPU_CONFIG");
  return v != NULL && strcmp(v, "1") == 0;
}

static ncclResult_t issue(const struct gcase* c, struct grank* g, ncclCollConfig_t* cfg) {
  cudaStream_t s = g->stream;
  switch (c->coll) {
    case G_ALLREDUCE:
      return ncclAllReduceConfig(g->send, g->recv, c->count, c->type, g->rop, g->comm, s, cfg);
    case G_REDUCE:
      return ncclReduceConfig(g->send, g->recv, c->count, c->type, g->rop, c->root, g->comm, s,
                              cfg);
    case G_REDUCESCATTER:
      return ncclReduceScatterConfig(g->send, g->recv, c->count, c->type, g->rop, g->comm, s, cfg);
    case G_BROADCAST:
      return ncclBroadcastConfig(g->send, g->recv, c->count, c->type, c->root, g->comm, s, cfg);
    case G_ALLGATHER:
      return ncclAllGatherConfig(g->send, g->recv, c->count, c->type, g->comm, s, cfg);
    case G_ALLTOALL:
      return ncclAlltoAllConfig(g->send, g->recv, c->count, c->type, g->comm, s, cfg);
    case G_GATHER:
      return ncclGatherConfig(g->send, g->recv, c->count, c->type, c->root, g->comm, s, cfg);
    case G_SCATTER:
      return ncclScatterConfig(g->send, g->recv, c->count, c->type, c->root, g->comm, s, cfg);
    default:
      return ncclInvalidArgument;
  }
}

ncclResult_t gcase_issue_config(const struct gcase* c, struct grank* g) {
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  const unsigned v = issued++ % VARIANTS;
  cudaEvent_t start = NULL, launched = NULL;
  switch (v) {
    case 0:
      return issue(c, g, NULL);
    case 2:
      cfg.algSelection = "ring";
      cfg.forceAlgSelection = 0; /* a hint: another path where the ring cannot run */
      break;
    case 3:
      cfg.minCTAs = 1;
      cfg.maxCTAs = 2;
      break;
    case 4:
      cfg.userProfilerTag = 0x7475747469ull + issued;
      break;
    case 5:
      if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&launched) != cudaSuccess ||
          cudaEventRecord(start, g->stream) != cudaSuccess) {
        fprintf(stderr, "config: creating the events failed\n");
        return ncclUnhandledCudaError;
      }
      cfg.launchCompletionEvent = launched;
      break;
    default:
      break;
  }
  ncclResult_t res = issue(c, g, &cfg);
  if (v == 5) {
    /* Recorded by the call: the time from `start` to it exists (an event
     * never recorded has none). */
    float ms = -1;
    cudaError_t e = cudaEventSynchronize(launched);
    if (e == cudaSuccess) {
      e = cudaEventElapsedTime(&ms, start, launched);
    }
    if (res == ncclSuccess && (e != cudaSuccess || ms < 0)) {
      fprintf(stderr, "config: launchCompletionEvent was not recorded (%s)\n",
              cudaGetErrorString(e));
      res = ncclInternalError;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(launched);
  }
  return res;
}
