/* Why a communicator's device work stopped, as the error its next call
 * returns: the reasons kernels, the watchdog and the network proxy record
 * in host_flags (TD_FLAG_STOP, TD_FLAG_RANK: work.h). */
#include <string.h>

#include "device/dev_comm.h"
#include "device/net/devnet.h"
#include "device/rma/rma.h"

extern "C" {
#include "util/check.h"
}

extern "C" ncclResult_t tutti_dev_comm_error(struct tutti_dev_comm* dc) {
  int e = dc == NULL ? 0 : __atomic_load_n(&dc->host_flags[TD_FLAG_STOP], __ATOMIC_SEQ_CST);
  switch (e) {
    case TD_STOP_NONE:
      return ncclSuccess;
    case TD_STOP_ABORT:
      return tutti_error(ncclInvalidUsage, "a device collective was stopped by ncclCommAbort");
    case TD_STOP_NO_TICKET:
      return tutti_error(ncclInternalError,
                         "a device collective on rank %d found a lane without its queue ticket: "
                         "a tutti bug; please report it with NCCL_DEBUG=INFO output",
                         dc->rank);
    case TD_STOP_PEER_EXITED:
      return tutti_error(ncclRemoteError,
                         "rank %d (pid %d) exited while a device collective of rank %d waited for "
                         "it: the communicator is unusable; destroy it (or shrink it without "
                         "that rank)",
                         dc->host_flags[TD_FLAG_RANK], (int)dc->pids[dc->host_flags[TD_FLAG_RANK]],
                         dc->rank);
    case TD_STOP_NET:
      return td_net_error(dc);
    case TD_STOP_MISMATCH:
      return tutti_error(ncclInvalidUsage, "%s", dc->scan_why);
    case TD_STOP_RMA:
      return tutti_error(ncclRemoteError, "%s",
                         dc->rma != NULL && dc->rma->why[0] != '\0'
                             ? dc->rma->why
                             : "a one-sided operation on a stream failed");
    case TD_STOP_PEER_FAILED: {
      /* A peer's communicator failed first: its cause, word for word. */
      const struct tutti_doorbell* b = dc->bells[dc->host_flags[TD_FLAG_RANK]];
      char why[sizeof b->failed_why + 1];
      memcpy(why, b->failed_why, sizeof b->failed_why);
      why[sizeof b->failed_why] = '\0';
      return tutti_error((ncclResult_t)__atomic_load_n(&b->failed, __ATOMIC_ACQUIRE), "%s", why);
    }
    case TD_STOP_TIMEOUT:
      if (dc->rma != NULL && dc->rma->stall->set == 2) {
        const struct td_rma_stall* w = dc->rma->stall;
        return tutti_error(ncclRemoteError,
                           "ncclWaitSignal on rank %d waited more than %.0f s (TUTTI_TIMEOUT) for "
                           "signal %d (context %d) from rank %d: %llu of the %llu it waits for "
                           "arrived; did rank %d stop, or put with another signal or context?",
                           dc->rank, dc->timeout_s, w->sig, w->ctx, w->origin,
                           (unsigned long long)w->arrived, (unsigned long long)w->needed,
                           w->origin);
      }
      return tutti_error(ncclRemoteError,
                         "a device collective on rank %d waited more than %.0f s (TUTTI_TIMEOUT) "
                         "for a peer: a rank stopped, or the ranks called different collectives",
                         dc->rank, dc->timeout_s);
    default:
      return tutti_error(ncclInternalError, "the device executor reported error %d", e);
  }
}
