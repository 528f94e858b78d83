/* Error strings: ncclGetErrorString, ncclGetLastError, and a
 * communicator's record of its failure (the per-thread record that
 * tutti_error fills is util/error.c's). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "util/check.h"

void tutti_comm_set_error(struct ncclComm* comm, ncclResult_t res) {
  if (comm == NULL || res == ncclSuccess || res == ncclInProgress) {
    return;
  }
  pthread_mutex_lock(&comm->error_lock);
  if (tutti_last_error()[0] != '\0') {
    snprintf(comm->last_error, sizeof comm->last_error, "%s", tutti_last_error());
  }
  pthread_mutex_unlock(&comm->error_lock);
  ncclResult_t expected = ncclSuccess;
  __atomic_compare_exchange_n(&comm->async_error, &expected, res, 0, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
}

NCCL_API const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the tutti developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "timeout";
    default:
      return "unknown result code";
  }
}

NCCL_API const char* ncclGetLastError(ncclComm_t comm) {
  if (tutti_last_error()[0] != '\0' || comm == NULL || !tutti_comm_is_live(comm)) {
    return tutti_last_error();
  }
  static __thread char copy[1024];
  pthread_mutex_lock(&comm->error_lock);
  snprintf(copy, sizeof copy, "%s", comm->last_error);
  pthread_mutex_unlock(&comm->error_lock);
  return copy;
}
