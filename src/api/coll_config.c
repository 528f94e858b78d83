/* The collectives with a per-call configuration (NCCL 2.31): the same call
 * as the plain function, within what its ncclCollConfig_t asks for
 * (docs/design.md, "NCCL 2.32"). */
#include <stddef.h>
#include <string.h>

#include "api/api.h"
#include "api/coll.h"
#include "api/group.h"
#include "tune/tune.h"
#include "util/check.h"
#include "util/cuda.h"

ncclResult_t tutti_coll_config_read(const ncclCollConfig_t* config, const char* fn,
                                    struct tutti_coll_cfg* out) {
  ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
  memset(out, 0, sizeof *out);
  /* As NCCL reads it: as many bytes as the caller's `size` says (a 2.31
   * program's struct ends before launchCompletionEvent), its magic checked. */
  size_t n;
  memcpy(&n, config, sizeof n);
  if (n < offsetof(ncclCollConfig_t, ext)) {
    return tutti_error(ncclInvalidArgument,
                       "%s: ncclCollConfig_t size %zu is too small: initialize it with "
                       "NCCL_COLLCONFIG_INITIALIZER",
                       fn, n);
  }
  memcpy(&c, config, n < sizeof c ? n : sizeof c);
  if (c.magic != NCCL_API_MAGIC) {
    return tutti_error(ncclInvalidArgument,
                       "%s: ncclCollConfig_t has magic 0x%x instead of 0x%x: initialize it with "
                       "NCCL_COLLCONFIG_INITIALIZER before setting fields",
                       fn, c.magic, NCCL_API_MAGIC);
  }
  if (c.version < (unsigned)NCCL_VERSION(2, 32, 0)) {
    c.launchCompletionEvent = NULL; /* not in a 2.31 config, whatever its size */
  }
  if (c.forceAlgSelection != 0 && c.forceAlgSelection != 1) {
    return tutti_error(ncclInvalidArgument,
                       "%s: ncclCollConfig_t.forceAlgSelection is %d: it must be 0 or 1", fn,
                       c.forceAlgSelection);
  }
  const int all = NCCL_CTA_POLICY_DEFAULT | NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO;
  if (c.CTAPolicy != NCCL_CONFIG_UNDEF_INT && (c.CTAPolicy < 0 || c.CTAPolicy > all)) {
    return tutti_error(ncclInvalidArgument,
                       "%s: ncclCollConfig_t.CTAPolicy is %d: it must be a combination of the "
                       "NCCL_CTA_POLICY_* flags (0 to %d)",
                       fn, c.CTAPolicy, all);
  }
  const struct {
    const char* name;
    int v;
  } ctas[] = {{"minCTAs", c.minCTAs}, {"maxCTAs", c.maxCTAs}, {"nvlsCTAs", c.nvlsCTAs}};
  for (size_t i = 0; i < sizeof ctas / sizeof ctas[0]; i++) {
    if (ctas[i].v != NCCL_CONFIG_UNDEF_INT && ctas[i].v <= 0) {
      return tutti_error(ncclInvalidArgument,
                         "%s: ncclCollConfig_t.%s is %d: it must be positive (or unset)", fn,
                         ctas[i].name, ctas[i].v);
    }
  }
  if (c.minCTAs != NCCL_CONFIG_UNDEF_INT && c.maxCTAs != NCCL_CONFIG_UNDEF_INT &&
      c.minCTAs > c.maxCTAs) {
    return tutti_error(ncclInvalidArgument,
                       "%s: ncclCollConfig_t.minCTAs (%d) exceeds maxCTAs (%d)", fn, c.minCTAs,
                       c.maxCTAs);
  }
  out->min_channels = c.minCTAs != NCCL_CONFIG_UNDEF_INT ? c.minCTAs : 0;
  out->max_channels = c.maxCTAs != NCCL_CONFIG_UNDEF_INT ? c.maxCTAs : 0;
  out->tag = c.userProfilerTag;
  out->event = c.launchCompletionEvent;
  out->force = c.forceAlgSelection;
  if (out->event != NULL && !tutti_cuda_available()) {
    return tutti_error(ncclInvalidArgument,
                       "%s: ncclCollConfig_t.launchCompletionEvent is set, but no CUDA driver is "
                       "loaded in this process to record it",
                       fn);
  }
  if (c.algSelection != NULL && c.algSelection[0] != '\0') {
    char why[256];
    out->selection = c.algSelection;
    if (tutti_tune_parse_selection(c.algSelection, &out->algos, why, sizeof why) != 0) {
      out->algos = 0;
      if (out->force) {
        return tutti_error(ncclInvalidArgument,
                           "%s: ncclCollConfig_t.algSelection \"%s\" cannot be honoured: %s (set "
                           "forceAlgSelection to 0 to let the call choose)",
                           fn, c.algSelection, why);
      }
      INFO(TUTTI_TUNING, "%s: algSelection \"%s\" ignored: %s", fn, c.algSelection, why);
    }
  }
  return ncclSuccess;
}

/* The plain call when `config` is NULL, else the call within it. */
static ncclResult_t run_config(ncclComm_t comm, struct tutti_coll_call c, cudaStream_t stream,
                               const ncclCollConfig_t* config) {
  if (config == NULL) {
    return tutti_coll_run(comm, c, stream, NULL);
  }
  struct tutti_coll_cfg cfg;
  ncclResult_t res = tutti_coll_config_read(config, c.fn, &cfg);
  /* An invalid call inside a group fails the whole group, as in NCCL. */
  return res == ncclSuccess ? tutti_coll_run(comm, c, stream, &cfg) : tutti_group_fail(res);
}

NCCL_API ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream, const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {
      TUTTI_COLL_ALLREDUCE, "ncclAllReduceConfig", sendbuff, recvbuff, count, datatype, op, 0, 1};
  return run_config(comm, c, stream, config);
}

NCCL_API ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, int root, ncclComm_t comm,
                                          cudaStream_t stream, const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {TUTTI_COLL_BROADCAST,
                              "ncclBroadcastConfig",
                              sendbuff,
                              recvbuff,
                              count,
                              datatype,
                              ncclSum,
                              root,
                              0};
  return run_config(comm, c, stream, config);
}

NCCL_API ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclRedOp_t op, int root,
                                       ncclComm_t comm, cudaStream_t stream,
                                       const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {
      TUTTI_COLL_REDUCE, "ncclReduceConfig", sendbuff, recvbuff, count, datatype, op, root, 1};
  return run_config(comm, c, stream, config);
}

NCCL_API ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          ncclDataType_t datatype, ncclComm_t comm,
                                          cudaStream_t stream, const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {TUTTI_COLL_ALLGATHER,
                              "ncclAllGatherConfig",
                              sendbuff,
                              recvbuff,
                              sendcount,
                              datatype,
                              ncclSum,
                              0,
                              0};
  return run_config(comm, c, stream, config);
}

NCCL_API ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, ncclDataType_t datatype,
                                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                              const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {TUTTI_COLL_REDUCESCATTER,
                              "ncclReduceScatterConfig",
                              sendbuff,
                              recvbuff,
                              recvcount,
                              datatype,
                              op,
                              0,
                              1};
  return run_config(comm, c, stream, config);
}

NCCL_API ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclComm_t comm,
                                         cudaStream_t stream, const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {TUTTI_COLL_ALLTOALL,
                              "ncclAlltoAllConfig",
                              sendbuff,
                              recvbuff,
                              count,
                              datatype,
                              ncclSum,
                              0,
                              0};
  return run_config(comm, c, stream, config);
}

NCCL_API ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm,
                                       cudaStream_t stream, const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {
      TUTTI_COLL_GATHER, "ncclGatherConfig", sendbuff, recvbuff, count, datatype, ncclSum, root, 0};
  return run_config(comm, c, stream, config);
}

NCCL_API ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream, const ncclCollConfig_t* config) {
  struct tutti_coll_call c = {TUTTI_COLL_SCATTER,
                              "ncclScatterConfig",
                              sendbuff,
                              recvbuff,
                              count,
                              datatype,
                              ncclSum,
                              root,
                              0};
  return run_config(comm, c, stream, config);
}
