/* Communicator life and queries: finalize, destroy, abort, count, rank,
 * device, asynchronous error. */
#include <pthread.h>
#include <stdlib.h>

#include "api/api.h"
#include "api/comm.h"
#include "call/agree.h"
#include "api/group.h"
#include "util/check.h"

static void join_init(struct ncclComm* comm) {
  if (comm->init_thread_live) {
    pthread_join(comm->init_thread, NULL);
    comm->init_thread_live = 0;
  }
}

NCCL_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommFinalize"));
  if (comm->finalized) {
    return tutti_error(ncclInvalidUsage, "ncclCommFinalize: comm %p is already finalized",
                       (void*)comm);
  }
  join_init(comm);
  /* Host operations complete before their call returns: nothing is in flight. */
  comm->finalized = 1;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == NULL) {
    return ncclSuccess; /* as NCCL: destroying NULL is a no-op */
  }
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommDestroy"));
  join_init(comm);
  INFO(TUTTI_INIT, "comm %p rank %d nranks %d - Destroy COMPLETE", (void*)comm, comm->rank,
       comm->nranks);
  tutti_comm_free(comm);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == NULL) {
    return ncclSuccess;
  }
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommAbort"));
  /* Every wait polls this flag at least every 100 ms; then nobody is inside.
   * Kernels watch their own copy in mapped host memory. */
  __atomic_store_n(&comm->abort_flag, 1, __ATOMIC_SEQ_CST);
  join_init(comm);
  tutti_dev_comm_abort(comm->dev);
  tutti_group_wait_idle(comm);
  INFO(TUTTI_INIT, "comm %p rank %d nranks %d - Abort COMPLETE", (void*)comm, comm->rank,
       comm->nranks);
  tutti_comm_free(comm);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    return tutti_error(ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be 0");
  }
  __atomic_store_n(&comm->abort_flag, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&comm->async_error, __ATOMIC_SEQ_CST) != ncclInProgress) {
    tutti_dev_comm_abort(comm->dev);
  }
  tutti_group_wait_idle(comm);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommCount"));
  if (count == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommCount: count is NULL");
  }
  *count = comm->nranks;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommUserRank"));
  if (rank == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  }
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommCuDevice"));
  if (device == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  }
  *device = comm->cuda_dev;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommGetAsyncError"));
  if (asyncError == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  }
  ncclResult_t state = __atomic_load_n(&comm->async_error, __ATOMIC_SEQ_CST);
  if (state == ncclSuccess && comm->dev != NULL) {
    /* A kernel that gave up (a peer stopped answering) reports through mapped memory. */
    state = tutti_dev_comm_error(comm->dev);
    if (state != ncclSuccess) {
      tutti_comm_set_error(comm, state);
      /* Peers learn the cause too; a kernel's timeout is its own view. */
      tutti_agree_fail(tutti_exec_bells(&comm->er), state, -1, comm->er.call_seq,
                       state == ncclRemoteError);
    }
  }
  *asyncError = state;
  return ncclSuccess;
}
