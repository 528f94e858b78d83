/* Device operations at their group's end: per communicator, the calls are
 * agreed on, planned together by tune (what the device communicator offers
 * the launch is known now: one decision per call, made once), given the
 * schedules their plans ask for, and launched as the plans say. */
#include <string.h>

#include "api/api.h"
#include "api/group.h"
#include "call/agree.h"
#include "tune/tune.h"
#include "util/check.h"

/* The plans of `ops` (one launch on `comm`), and the schedules they run:
 * operations come back from their pool with their last schedule, built
 * again only when the call or its algorithm differs. */
static ncclResult_t plan(struct ncclComm* comm, struct tutti_op* const* ops, int n) {
  struct tutti_dev_caps caps;
  tutti_dev_comm_caps(comm->dev, ops[0]->stream, &caps);
  struct tutti_tune_call calls[TUTTI_DEV_MAX_OPS];
  struct tutti_plan plans[TUTTI_DEV_MAX_OPS];
  for (int i = 0; i < n; i++) {
    calls[i].args = &ops[i]->args;
    calls[i].premulsum = ops[i]->redop.kind == TUTTI_RED_PREMULSUM;
  }
  tutti_tune_launch(calls, n, &caps, plans);
  for (int i = 0; i < n; i++) {
    struct tutti_op* op = ops[i];
    op->plan = plans[i];
    if (plans[i].path == TUTTI_PATH_SCHEDULE &&
        (!op->sched_valid || op->sched.algo != plans[i].algo)) {
      op->sched_valid = 0;
      NCCLCHECK(tutti_schedule_build(plans[i].algo, &op->args, &op->sched));
      op->sched_valid = 1;
    }
  }
  return ncclSuccess;
}

/* The device operations of `comm` among q[from..n), agreed on, planned and
 * launched. */
static ncclResult_t launch_comm(struct ncclComm* comm, struct tutti_queued_op* q, int from, int n,
                                int* cause) {
  struct tutti_op* ops[TUTTI_DEV_MAX_OPS];
  int nd = 0;
  for (int j = from; j < n; j++) {
    if (!q[j].op->device || q[j].comm != comm) {
      continue;
    }
    if (nd == TUTTI_DEV_MAX_OPS) {
      return tutti_error(ncclInvalidUsage,
                         "a group holds more than %d device operations of one communicator: "
                         "split it into several groups",
                         TUTTI_DEV_MAX_OPS);
    }
    ops[nd++] = q[j].op;
    ncclResult_t res = tutti_agree_device(tutti_exec_bells(q[j].op->er), &q[j].op->call,
                                          &q[j].op->er->call_checked, cause);
    if (res != ncclSuccess) {
      /* Kernels already queued on this communicator stop too. */
      tutti_dev_comm_abort(comm->dev);
      return res;
    }
  }
  if (nd == 0) {
    return ncclSuccess; /* not reached: `from` is one of them */
  }
  NCCLCHECK(plan(comm, ops, nd));
  struct tutti_dev_op dops[TUTTI_DEV_MAX_OPS];
  struct tutti_ras_slot* slots[TUTTI_DEV_MAX_OPS];
  /* RAS and the flight recorder see a device call when it is launched: the
   * kernels run on after it returns, so it enters and leaves at once; the
   * kernel that runs it shows its number while it runs (tutti_ras_dev). */
  const uint64_t now = tutti_ras_stamp_ns();
  for (int i = 0; i < nd; i++) {
    const struct tutti_op* op = ops[i];
    const int root = op->call.seq != 0 ? op->call.root : op->args.root;
    slots[i] = tutti_ras_enter(comm->ras, op->call.seq, (int)op->args.coll, op->args.count,
                               op->call.type, root, (int)op->plan.algo, now);
    struct tutti_dev_op* d = &dops[i];
    d->plan = &op->plan;
    d->sched = &op->sched;
    d->args = &op->args;
    d->redop = op->redop;
    d->scalar_dev = op->scalar_dev;
    memcpy(d->bufs, op->bufs, sizeof d->bufs);
    d->stream = op->stream;
    d->seq = op->seq;
    d->ras_op = slots[i] != NULL ? slots[i]->op : 0;
  }
  const ncclResult_t res = tutti_dev_launch(comm->dev, dops, nd);
  for (int i = 0; i < nd; i++) {
    tutti_ras_exit(comm->ras, slots[i], res != ncclSuccess, now);
  }
  return res;
}

ncclResult_t tutti_group_launch_device(struct tutti_queued_op* q, int n, int* cause) {
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    if (!q[i].op->device) {
      continue;
    }
    int first = 1; /* the communicator's first device operation in the group */
    for (int j = 0; j < i && first; j++) {
      first = !(q[j].op->device && q[j].comm == q[i].comm);
    }
    if (first) {
      res = launch_comm(q[i].comm, q, i, n, cause);
    }
  }
  return res;
}
