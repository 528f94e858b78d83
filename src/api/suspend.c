/* ncclCommSuspend, ncclCommResume and ncclCommMemStats: a communicator
 * gives back the GPU and pinned host memory it holds, and takes it again
 * (device/suspend.cu); one without a device part keeps only the state.
 * Both are collective and run at their group's end; a non-blocking
 * communicator gets ncclInProgress. */
#include <stdint.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/group.h"
#include "api/register.h"
#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/param.h"

/* NCCL's switch for its memory manager: without it nothing is suspended. */
static TUTTI_PARAM_RANGE(disable_mem_manager, "NCCL_DISABLE_MEM_MANAGER", 0, 0, 1,
                         "1: no communicator gives its memory back (ncclCommSuspend refused)");

static const char* fn_name(int resume) {
  return resume ? "ncclCommResume" : "ncclCommSuspend";
}

/* A queued suspend or resume that will not run. */
static ncclResult_t clear_queued(void* arg) {
  struct ncclComm* comm = arg;
  __atomic_store_n(&comm->suspend_queued, 0, __ATOMIC_RELEASE);
  return ncclSuccess;
}

/* At the group's end, on every rank. A failure leaves the communicator
 * unusable: the ranks no longer agree on where its memory is. */
static ncclResult_t change(struct ncclComm* comm, int resume) {
  ncclResult_t res;
  if (__atomic_load_n(&comm->suspended, __ATOMIC_ACQUIRE) != resume) {
    res = tutti_error(ncclInvalidUsage, "%s: comm %p is %s", fn_name(resume), (void*)comm,
                      resume ? "not suspended" : "already suspended: call ncclCommResume first");
    clear_queued(comm);
    return res;
  }
  /* ncclCommAbort from another thread ends the waits below, then waits
   * for this call to leave before it frees the communicator. */
  __atomic_fetch_add(&comm->active_calls, 1, __ATOMIC_SEQ_CST);
  if (comm->dev != NULL) {
    struct tutti_dev_setup ds;
    tutti_comm_dev_setup(comm, &ds);
    if (!resume) {
      tutti_reg_suspend(comm); /* mappings are given back too; entries come back at use */
    }
    res = resume ? tutti_dev_comm_resume(comm->dev, &ds) : tutti_dev_comm_suspend(comm->dev, &ds);
  } else {
    /* Nothing to give back, but collective all the same, as NCCL's. */
    res = tutti_bootstrap_barrier(comm->boot);
  }
  if (res == ncclSuccess) {
    __atomic_store_n(&comm->suspended, !resume, __ATOMIC_RELEASE);
    INFO(TUTTI_INIT, "comm %p rank %d nranks %d - %s COMPLETE", (void*)comm, comm->rank,
         comm->nranks, resume ? "Resume" : "Suspend");
  } else if (comm->blocking) {
    tutti_comm_set_error(comm, res); /* a non-blocking one's job stores its result itself */
  }
  clear_queued(comm);
  __atomic_fetch_sub(&comm->active_calls, 1, __ATOMIC_SEQ_CST);
  return res;
}

static ncclResult_t suspend_run(void* arg) {
  return change(arg, 0);
}

static ncclResult_t resume_run(void* arg) {
  return change(arg, 1);
}

/* What both check when called: a ready communicator that has not failed. */
static ncclResult_t check_ready(struct ncclComm* comm, const char* fn) {
  NCCLCHECK(tutti_comm_check(comm, fn));
  if (tutti_param_disable_mem_manager()) {
    return tutti_error(ncclInvalidUsage,
                       "%s: NCCL_DISABLE_MEM_MANAGER is set, which turns suspending "
                       "communicators off: unset it",
                       fn);
  }
  ncclResult_t state = __atomic_load_n(&comm->async_error, __ATOMIC_SEQ_CST);
  if (state != ncclSuccess) {
    return tutti_error(state, "%s: comm %p failed earlier (%s): destroy it", fn, (void*)comm,
                       ncclGetErrorString(state));
  }
  return ncclSuccess;
}

static ncclResult_t queue(struct ncclComm* comm, int resume) {
  const char* fn = fn_name(resume);
  if (__atomic_load_n(&comm->suspend_queued, __ATOMIC_ACQUIRE)) {
    return tutti_error(ncclInvalidUsage,
                       "%s: a ncclCommSuspend or ncclCommResume of comm %p is already queued in "
                       "this group: end the group first",
                       fn, (void*)comm);
  }
  if (tutti_group_has_ops(comm)) {
    return tutti_error(ncclInvalidUsage,
                       "%s: this group holds operations of comm %p: suspend or resume it in a "
                       "group of its own",
                       fn, (void*)comm);
  }
  if (__atomic_load_n(&comm->suspended, __ATOMIC_ACQUIRE) != resume) {
    return tutti_error(ncclInvalidUsage, "%s: comm %p is %s", fn, (void*)comm,
                       resume ? "not suspended" : "already suspended: call ncclCommResume first");
  }
  __atomic_store_n(&comm->suspend_queued, 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  ncclResult_t res = check_ready(comm, "ncclCommSuspend");
  if (res != ncclSuccess) {
    return tutti_group_fail(res);
  }
  if ((flags & NCCL_SUSPEND_MEM) == 0) {
    return ncclSuccess; /* as NCCL: only that bit does anything; others are ignored */
  }
  res = queue(comm, 0);
  if (res != ncclSuccess) {
    return tutti_group_fail(res);
  }
  return tutti_group_add_comm_job(comm, suspend_run, clear_queued, comm);
}

NCCL_API ncclResult_t ncclCommResume(ncclComm_t comm) {
  ncclResult_t res = check_ready(comm, "ncclCommResume");
  if (res == ncclSuccess) {
    res = queue(comm, 1);
  }
  if (res != ncclSuccess) {
    return tutti_group_fail(res);
  }
  return tutti_group_add_comm_job(comm, resume_run, clear_queued, comm);
}

NCCL_API ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  NCCLCHECK(tutti_comm_check(comm, "ncclCommMemStats"));
  if (value == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  }
  if (tutti_param_disable_mem_manager()) {
    return tutti_error(ncclInvalidUsage,
                       "ncclCommMemStats: NCCL_DISABLE_MEM_MANAGER is set, which turns memory "
                       "statistics off: unset it");
  }
  if ((int)stat == (int)TUTTI_STAT_GPU_MEM_PEER_MAPPED) {
    *value = tutti_reg_peer_mapped(comm);
    return ncclSuccess;
  }
  /* Local: what this rank's communicator holds (counted when suspended). */
  struct tutti_dev_mem m;
  tutti_dev_comm_mem(comm->dev, &m);
  switch (stat) {
    case ncclStatGpuMemSuspend:
      *value = m.dev_suspend;
      return ncclSuccess;
    case ncclStatGpuMemSuspended:
      *value = (uint64_t)__atomic_load_n(&comm->suspended, __ATOMIC_ACQUIRE);
      return ncclSuccess;
    case ncclStatGpuMemPersist:
      *value = m.dev_persist;
      return ncclSuccess;
    case ncclStatGpuMemTotal:
      *value = m.dev_suspend + m.dev_persist;
      return ncclSuccess;
    default:
      return tutti_error(ncclInvalidArgument,
                         "ncclCommMemStats: stat %d is not one of ncclStatGpuMemSuspend, "
                         "ncclStatGpuMemSuspended, ncclStatGpuMemPersist, ncclStatGpuMemTotal, "
                         "TUTTI_STAT_GPU_MEM_PEER_MAPPED",
                         (int)stat);
  }
}
