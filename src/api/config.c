/* ncclConfig_t handling as NCCL does it: the struct must come from
 * NCCL_CONFIG_INITIALIZER (magic, version), only the first `size` bytes are
 * read (older callers pass a smaller struct), unset fields take defaults. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "api/comm.h"
#include "util/check.h"
#include "util/param.h"

static TUTTI_PARAM(comm_blocking, "NCCL_COMM_BLOCKING", 1);

#define CONFIG_MAGIC 0xcafebeef

ncclResult_t tutti_config_apply(struct ncclComm* comm, const ncclConfig_t* config) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (config != NULL) {
    if (config->magic != CONFIG_MAGIC) {
      return tutti_error(ncclInvalidArgument,
                         "ncclConfig_t has magic 0x%x instead of 0x%x: initialize it with "
                         "NCCL_CONFIG_INITIALIZER before setting fields",
                         config->magic, CONFIG_MAGIC);
    }
    if (config->version < (unsigned)NCCL_VERSION(2, 14, 0)) {
      return tutti_error(ncclInvalidArgument,
                         "ncclConfig_t version %u is older than any NCCL with configs (21400): "
                         "initialize it with NCCL_CONFIG_INITIALIZER",
                         config->version);
    }
    size_t n = config->size < sizeof c ? config->size : sizeof c;
    if (n < offsetof(ncclConfig_t, blocking)) {
      return tutti_error(ncclInvalidArgument, "ncclConfig_t size %zu is too small", config->size);
    }
    memcpy(&c, config, n);
  }
  if (c.blocking == NCCL_CONFIG_UNDEF_INT) {
    c.blocking = (int)tutti_param_comm_blocking();
  }
  if (c.blocking != 0 && c.blocking != 1) {
    return tutti_error(ncclInvalidArgument, "ncclConfig_t.blocking is %d: it must be 0 or 1",
                       c.blocking);
  }
  if (c.minCTAs != NCCL_CONFIG_UNDEF_INT && c.minCTAs <= 0) {
    return tutti_error(ncclInvalidArgument, "ncclConfig_t.minCTAs is %d: it must be positive",
                       c.minCTAs);
  }
  if (c.maxCTAs != NCCL_CONFIG_UNDEF_INT && c.maxCTAs <= 0) {
    return tutti_error(ncclInvalidArgument, "ncclConfig_t.maxCTAs is %d: it must be positive",
                       c.maxCTAs);
  }
  if (c.minCTAs != NCCL_CONFIG_UNDEF_INT && c.maxCTAs != NCCL_CONFIG_UNDEF_INT &&
      c.minCTAs > c.maxCTAs) {
    return tutti_error(ncclInvalidArgument, "ncclConfig_t.minCTAs (%d) exceeds maxCTAs (%d)",
                       c.minCTAs, c.maxCTAs);
  }
  if (c.splitShare != NCCL_CONFIG_UNDEF_INT && c.splitShare != 0 && c.splitShare != 1) {
    return tutti_error(ncclInvalidArgument, "ncclConfig_t.splitShare is %d: it must be 0 or 1",
                       c.splitShare);
  }
  comm->blocking = c.blocking;
  if (c.commName != NULL) {
    snprintf(comm->name, sizeof comm->name, "%s", c.commName);
  }
  return ncclSuccess;
}
