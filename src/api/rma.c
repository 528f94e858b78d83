/* One-sided entry points: ncclPutSignal, ncclSignal, ncclWaitSignal.
 * Arguments are checked here, as NCCL checks them and more (ranges of
 * sigIdx and ctx, the put against the target's part of the window); the
 * calls then run, or wait in the caller's group, through src/rma/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/group.h"
#include "reduce/reduce.h"
#include "util/check.h"

/* What every one-sided call checks first. */
static ncclResult_t check_comm(struct ncclComm* comm, const char* fn) {
  NCCLCHECK(tutti_comm_check_active(comm, fn));
  if (comm->num_rma_ctx == 0) {
    return tutti_error(ncclInvalidArgument,
                       "%s: numRmaCtx is 0 on this communicator: create it with numRmaCtx >= 1 "
                       "(ncclConfig_t, or NCCL_NUM_RMA_CTX) for one-sided operations",
                       fn);
  }
  return ncclSuccess;
}

static ncclResult_t check_peer(const struct ncclComm* comm, const char* fn, const char* what,
                               int peer) {
  if (peer < 0 || peer >= comm->nranks) {
    return tutti_error(ncclInvalidArgument, "%s: %s %d is out of range [0, %d)", fn, what, peer,
                       comm->nranks);
  }
  return ncclSuccess;
}

static ncclResult_t check_sig(const struct ncclComm* comm, const char* fn, const char* where,
                              int sig, int ctx) {
  if (ctx < 0 || ctx >= comm->num_rma_ctx) {
    return tutti_error(ncclInvalidArgument,
                       "%s: %sctx %d is out of range [0, %d) (ncclConfig_t.numRmaCtx)", fn, where,
                       ctx, comm->num_rma_ctx);
  }
  if (sig < 0 || sig >= TUTTI_RMA_SIGNALS) {
    return tutti_error(ncclInvalidArgument, "%s: %ssigIdx %d is out of range [0, %d)", fn, where,
                       sig, TUTTI_RMA_SIGNALS);
  }
  return ncclSuccess;
}

static ncclResult_t check_flags(const char* fn, unsigned int flags) {
  if (flags != 0) {
    return tutti_error(ncclInvalidArgument, "%s: flags is 0x%x: it must be 0", fn, flags);
  }
  return ncclSuccess;
}

/* The one-sided state exists once a window was registered (collectively). */
static ncclResult_t check_started(const struct ncclComm* comm, const char* fn) {
  if (comm->rma == NULL) {
    return tutti_error(ncclInvalidUsage,
                       "%s: no window was ever registered on this communicator: one-sided "
                       "operations start with the first ncclCommWindowRegister (on every rank)",
                       fn);
  }
  return ncclSuccess;
}

static ncclResult_t put_checks(struct tutti_rma_call* c, struct ncclComm* comm, size_t count,
                               ncclDataType_t type, unsigned int flags) {
  NCCLCHECK(check_comm(comm, c->fn));
  NCCLCHECK(check_peer(comm, c->fn, "peer", c->peer));
  if ((int)type < 0 || type >= ncclNumTypes) {
    return tutti_error(ncclInvalidArgument, "%s: invalid datatype %d (valid: 0..%d)", c->fn,
                       (int)type, ncclNumTypes - 1);
  }
  NCCLCHECK(check_sig(comm, c->fn, "", c->sig, c->ctx));
  NCCLCHECK(check_flags(c->fn, flags));
  if (c->win == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: peerWin is NULL", c->fn);
  }
  if (c->src == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: localbuff is NULL (count %zu)", c->fn, count);
  }
  const size_t es = tutti_type_size(type);
  if (count > SIZE_MAX / es) {
    return tutti_error(ncclInvalidArgument, "%s: count %zu of %s overflows the address space",
                       c->fn, count, tutti_type_name(type));
  }
  c->bytes = count * es;
  if (comm->rma == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "%s: peerWin %p is not a window registered on this communicator (none is)",
                       c->fn, (void*)c->win);
  }
  return tutti_rma_check(comm->rma, c);
}

NCCL_API ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
                                    int peer, ncclWindow_t peerWin, size_t peerWinOffset,
                                    int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                    cudaStream_t stream) {
  struct tutti_rma_call c = {TUTTI_RMA_PUT,
                             "ncclPutSignal",
                             peer,
                             (struct tutti_win*)(void*)peerWin,
                             peerWinOffset,
                             localbuff,
                             0,
                             sigIdx,
                             ctx,
                             NULL,
                             0,
                             stream};
  ncclResult_t res = put_checks(&c, comm, count, datatype, flags);
  if (res != ncclSuccess) {
    return tutti_group_fail(res);
  }
  return tutti_group_add_rma(comm, &c);
}

NCCL_API ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                 cudaStream_t stream) {
  struct tutti_rma_call c = {TUTTI_RMA_SIGNAL, "ncclSignal", peer, NULL, 0,     NULL, 0,
                             sigIdx,           ctx,          NULL, 0,    stream};
  ncclResult_t res = check_comm(comm, c.fn);
  res = res == ncclSuccess ? check_peer(comm, c.fn, "peer", peer) : res;
  res = res == ncclSuccess ? check_sig(comm, c.fn, "", sigIdx, ctx) : res;
  res = res == ncclSuccess ? check_flags(c.fn, flags) : res;
  res = res == ncclSuccess ? check_started(comm, c.fn) : res;
  if (res != ncclSuccess) {
    return tutti_group_fail(res);
  }
  return tutti_group_add_rma(comm, &c);
}

static ncclResult_t wait_checks(struct ncclComm* comm, int n, const ncclWaitSignalDesc_t* d) {
  const char* fn = "ncclWaitSignal";
  NCCLCHECK(check_comm(comm, fn));
  if (d == NULL || n <= 0) {
    return tutti_error(ncclInvalidArgument, "ncclWaitSignal: %s",
                       d == NULL ? "signalDescs is NULL" : "nDesc must be at least 1");
  }
  for (int i = 0; i < n; i++) {
    char where[48], what[48];
    snprintf(where, sizeof where, "signalDescs[%d].", i);
    snprintf(what, sizeof what, "signalDescs[%d].peer", i);
    if (d[i].opCnt <= 0) {
      return tutti_error(ncclInvalidArgument,
                         "ncclWaitSignal: signalDescs[%d].opCnt is %d: it must be at least 1", i,
                         d[i].opCnt);
    }
    NCCLCHECK(check_peer(comm, fn, what, d[i].peer));
    NCCLCHECK(check_sig(comm, fn, where, d[i].sigIdx, d[i].ctx));
  }
  return check_started(comm, fn);
}

NCCL_API ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                                     cudaStream_t stream) {
  ncclResult_t res = wait_checks(comm, nDesc, signalDescs);
  if (res != ncclSuccess) {
    return tutti_group_fail(res);
  }
  /* A group runs it later: the caller may reuse its array at once. */
  ncclWaitSignalDesc_t* copy = malloc((size_t)nDesc * sizeof *copy);
  if (copy == NULL) {
    return tutti_group_fail(tutti_error(ncclSystemError, "ncclWaitSignal: out of host memory"));
  }
  memcpy(copy, signalDescs, (size_t)nDesc * sizeof *copy);
  struct tutti_rma_call c = {
      TUTTI_RMA_WAIT, "ncclWaitSignal", -1, NULL, 0, NULL, 0, 0, 0, copy, nDesc, stream};
  return tutti_group_add_rma(comm, &c);
}
