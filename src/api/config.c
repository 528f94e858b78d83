/* ncclConfig_t handling as NCCL does it: the struct must come from
 * NCCL_CONFIG_INITIALIZER (magic, version), only the first `size` bytes are
 * read (older callers pass a smaller struct), unset fields take defaults. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "api/comm.h"
#include "util/check.h"
#include "util/param.h"

static TUTTI_PARAM(comm_blocking, "NCCL_COMM_BLOCKING", 1,
                   "ncclConfig_t.blocking where a config leaves it unset (0: calls may return "
                   "ncclInProgress)");
static TUTTI_PARAM_INT32(num_rma_ctx, "NCCL_NUM_RMA_CTX", 1, 0, TUTTI_MAX_RMA_CTX,
                         "ncclConfig_t.numRmaCtx where a config leaves it unset: contexts for "
                         "one-sided operations");
static TUTTI_PARAM_INT32(graph_mixing, "NCCL_GRAPH_MIXING_SUPPORT", 1, 0, 1,
                         "ncclConfig_t.graphUsageMode where a config leaves it unset (1: 2, "
                         "several graphs or graphs and eager calls; 0: 0)");
static TUTTI_PARAM_INT32(p2p_max_peers, "NCCL_P2P_MAX_PEERS", 0, 0, INT32_MAX,
                         "ncclConfig_t.maxP2pPeers where a config leaves it unset (0: every rank)");
static TUTTI_PARAM_INT32(graph_stream_ordering, "NCCL_GRAPH_STREAM_ORDERING", 1, 0, 1,
                         "ncclConfig_t.graphStreamOrdering where a config leaves it unset");

/* The release each field came in: a caller built against an older header
 * passes a struct without it (a smaller `size`), or one whose bytes there
 * were never set as a config (its `version`): either way it is unset. */
static void unset_newer(ncclConfig_t* c, unsigned version) {
  if (version < (unsigned)NCCL_VERSION(2, 29, 0)) {
    c->graphUsageMode = NCCL_CONFIG_UNDEF_INT;
    c->numRmaCtx = NCCL_CONFIG_UNDEF_INT;
  }
  if (version < (unsigned)NCCL_VERSION(2, 30, 0)) {
    c->maxP2pPeers = NCCL_CONFIG_UNDEF_INT;
  }
  if (version < (unsigned)NCCL_VERSION(2, 30, 5)) {
    c->graphStreamOrdering = NCCL_CONFIG_UNDEF_INT;
  }
  if (version < (unsigned)NCCL_VERSION(2, 31, 0)) {
    c->launchOrderImplicit = NCCL_CONFIG_UNDEF_INT;
    c->numRmaSig = NCCL_CONFIG_UNDEF_INT;
    c->rmaEagerInit = NCCL_CONFIG_UNDEF_INT;
    c->hostCftMode = NCCL_CONFIG_UNDEF_INT;
  }
  if (version < (unsigned)NCCL_VERSION(2, 32, 0)) {
    c->nvlsHostMode = NCCL_CONFIG_UNDEF_INT;
  }
}

/* 2.31 and 2.32's fields: checked as NCCL checks them, kept in the
 * communicator's config (children inherit them). tutti has no Compute
 * Fabric Transport and no NVLink SHARP, so asking for CFT is refused and
 * the NVLS switches have nothing to switch (docs/design.md). */
static ncclResult_t check_231(const ncclConfig_t* c) {
  const struct {
    const char* name;
    int v;
  } flags[] = {{"launchOrderImplicit", c->launchOrderImplicit}, {"rmaEagerInit", c->rmaEagerInit}};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    if (flags[i].v != NCCL_CONFIG_UNDEF_INT && flags[i].v != 0 && flags[i].v != 1) {
      return tutti_error(ncclInvalidArgument, "ncclConfig_t.%s is %d: it must be 0 or 1",
                         flags[i].name, flags[i].v);
    }
  }
  if (c->numRmaSig != NCCL_CONFIG_UNDEF_INT && c->numRmaSig <= 0) {
    return tutti_error(ncclInvalidArgument,
                       "ncclConfig_t.numRmaSig is %d: it must be positive (or unset)",
                       c->numRmaSig);
  }
  if (c->hostCftMode == ncclHostCftEnable) {
    return tutti_error(ncclInvalidUsage,
                       "ncclConfig_t.hostCftMode is ncclHostCftEnable, but tutti has no Compute "
                       "Fabric Transport: use ncclHostCftFallback or leave it unset");
  }
  if (c->hostCftMode != NCCL_CONFIG_UNDEF_INT && c->hostCftMode != ncclHostCftDisable &&
      c->hostCftMode != ncclHostCftFallback) {
    return tutti_error(ncclInvalidArgument,
                       "ncclConfig_t.hostCftMode is %d: it must be one of ncclHostCftDefault, "
                       "ncclHostCftEnable (1), ncclHostCftDisable (2), ncclHostCftFallback (3)",
                       c->hostCftMode);
  }
  if (c->nvlsHostMode != NCCL_CONFIG_UNDEF_INT && c->nvlsHostMode < 0) {
    return tutti_error(ncclInvalidArgument,
                       "ncclConfig_t.nvlsHostMode is %d: it must be ncclNvlsHostModeEnable (0), "
                       "a combination of the ncclNvlsHostModeDisable* flags, or unset",
                       c->nvlsHostMode);
  }
  return ncclSuccess;
}

ncclResult_t tutti_config_read(const ncclConfig_t* config, ncclConfig_t* out) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (config != NULL) {
    if (config->magic != NCCL_API_MAGIC) {
      return tutti_error(ncclInvalidArgument,
                         "ncclConfig_t has magic 0x%x instead of 0x%x: initialize it with "
                         "NCCL_CONFIG_INITIALIZER before setting fields",
                         config->magic, NCCL_API_MAGIC);
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
    c.size = sizeof c;
    unset_newer(&c, config->version);
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
  if (c.graphUsageMode == NCCL_CONFIG_UNDEF_INT) {
    c.graphUsageMode = tutti_param_graph_mixing() ? 2 : 0;
  }
  if (c.graphUsageMode < 0 || c.graphUsageMode > 2) {
    return tutti_error(ncclInvalidArgument,
                       "ncclConfig_t.graphUsageMode is %d: it must be 0 (no graphs), 1 (one "
                       "graph) or 2 (several graphs, or graphs and eager calls)",
                       c.graphUsageMode);
  }
  if (c.numRmaCtx == NCCL_CONFIG_UNDEF_INT) {
    c.numRmaCtx = (int)tutti_param_num_rma_ctx();
  }
  if (c.numRmaCtx < 0 || c.numRmaCtx > TUTTI_MAX_RMA_CTX) {
    return tutti_error(ncclInvalidArgument,
                       "ncclConfig_t.numRmaCtx is %d: it must be 0 (no one-sided operations) to "
                       "%d",
                       c.numRmaCtx, TUTTI_MAX_RMA_CTX);
  }
  if (c.maxP2pPeers == NCCL_CONFIG_UNDEF_INT && tutti_param_p2p_max_peers() > 0) {
    c.maxP2pPeers = (int)tutti_param_p2p_max_peers();
  }
  if (c.maxP2pPeers != NCCL_CONFIG_UNDEF_INT && c.maxP2pPeers <= 0) {
    return tutti_error(ncclInvalidArgument,
                       "ncclConfig_t.maxP2pPeers is %d: it must be positive (or unset: every rank)",
                       c.maxP2pPeers);
  }
  if (c.graphStreamOrdering == NCCL_CONFIG_UNDEF_INT) {
    c.graphStreamOrdering = (int)tutti_param_graph_stream_ordering();
  }
  if (c.graphStreamOrdering != 0 && c.graphStreamOrdering != 1) {
    return tutti_error(ncclInvalidArgument,
                       "ncclConfig_t.graphStreamOrdering is %d: it must be 0 or 1",
                       c.graphStreamOrdering);
  }
  NCCLCHECK(check_231(&c));
  *out = c;
  return ncclSuccess;
}

ncclResult_t tutti_config_apply(struct ncclComm* comm, const ncclConfig_t* config) {
  ncclConfig_t c;
  NCCLCHECK(tutti_config_read(config, &c));
  comm->blocking = c.blocking;
  comm->num_rma_ctx = c.numRmaCtx;
  comm->config = c;
  comm->config.netName = NULL; /* the caller's strings need not outlive the call */
  comm->config.commName = NULL;
  if (c.commName != NULL) {
    snprintf(comm->name, sizeof comm->name, "%s", c.commName);
  }
  return ncclSuccess;
}
