/* A thread's open group (see group.h): how deep its ncclGroupStart calls
 * nest, its first error, and its operations, queued until the group ends,
 * then run: device launches first (group_launch.c), one-sided puts, host
 * operations, one-sided waits. Outside a group each call runs at once. One
 * thread-local record: the calls look it up once. */
#include <stdlib.h>

#include "api/api.h"
#include "api/group.h"
#include "call/agree.h"
#include "util/check.h"
#include "util/cuda.h"

struct queued_rma {
  struct tutti_rma_call call;
  struct ncclComm* comm;
};

static __thread struct {
  int depth;
  ncclResult_t error;
  struct tutti_queued_op* ops;
  int nops, cap_ops;
  struct queued_rma* rmas;
  int nrmas, cap_rmas;
} grp;

int tutti_group_depth(void) {
  return grp.depth;
}

ncclResult_t tutti_group_fail(ncclResult_t res) {
  if (grp.depth > 0 && grp.error == ncclSuccess) {
    grp.error = res;
  }
  return res;
}

void tutti_group_open(void) {
  if (grp.depth == 0) {
    grp.error = ncclSuccess;
  }
  grp.depth++;
}

int tutti_group_close(ncclResult_t* error) {
  *error = grp.error;
  return grp.depth == 0 ? -1 : --grp.depth;
}

void tutti_group_ops_drop(void) {
  for (int i = 0; i < grp.nops; i++) {
    tutti_op_put(grp.ops[i].op); /* NULL once run_ops returned it */
  }
  free(grp.ops);
  grp.ops = NULL;
  grp.nops = grp.cap_ops = 0;
  for (int i = 0; i < grp.nrmas; i++) {
    free(grp.rmas[i].call.descs);
  }
  free(grp.rmas);
  grp.rmas = NULL;
  grp.nrmas = grp.cap_rmas = 0;
  grp.error = ncclSuccess;
}

int tutti_group_has_ops(const struct ncclComm* comm) {
  for (int i = 0; i < grp.nops; i++) {
    if (grp.ops[i].comm == comm) {
      return 1;
    }
  }
  return 0;
}

/* Runs the one-sided calls among rq that are (waits) or are not (puts and
 * signals) waits, in issue order, while res is ncclSuccess. */
static ncclResult_t run_rmas(struct queued_rma* rq, int nr, int waits, ncclResult_t res) {
  for (int i = 0; i < nr && res == ncclSuccess; i++) {
    if ((rq[i].call.kind == TUTTI_RMA_WAIT) == waits) {
      res = tutti_rma_run(rq[i].comm->rma, &rq[i].call);
      /* A lost or silent peer, an abort: the communicator says so too. */
      if (res == ncclRemoteError || res == ncclSystemError || res == ncclInternalError) {
        tutti_comm_set_error(rq[i].comm, res);
      }
    }
  }
  return res;
}

/* ncclCollConfig_t.launchCompletionEvent: recorded on each call's stream as
 * its launch is issued, ahead of its kernel, so it completes when the kernel
 * may start (NVIDIA's library does the same where CUDA lacks launch
 * completion events); a host call has waited for its stream already and
 * starts now. */
static ncclResult_t record_launch_events(struct tutti_queued_op* q, int n) {
  for (int i = 0; i < n; i++) {
    if (q[i].op->launch_event != NULL) {
      NCCLCHECK(tutti_cuda_event_record(q[i].op->launch_event, q[i].op->stream));
    }
  }
  return ncclSuccess;
}

/* Runs the operations, then returns them to their pools. Each
 * communicator counts as busy (ncclCommAbort waits for that) until nothing
 * of it is touched any more. Device operations are enqueued on their
 * streams first; host operations then run to completion. */
static ncclResult_t run_ops(struct tutti_queued_op* q, int n, struct queued_rma* rq, int nr) {
  struct tutti_op* stack_ops[16];
  struct tutti_op** ops = n <= 16 ? stack_ops : malloc((size_t)n * sizeof *ops);
  ncclResult_t res;
  for (int i = 0; i < n; i++) {
    __atomic_fetch_add(&q[i].comm->active_calls, 1, __ATOMIC_SEQ_CST);
  }
  for (int i = 0; i < nr; i++) {
    __atomic_fetch_add(&rq[i].comm->active_calls, 1, __ATOMIC_SEQ_CST);
  }
  /* The group's collectives get their numbers in issue order, per
   * communicator: the same on every rank that makes the same calls. */
  for (int i = 0; i < n; i++) {
    struct tutti_op* op = q[i].op;
    if (op->args.coll != TUTTI_COLL_SEND && op->args.coll != TUTTI_COLL_RECV) {
      op->call.seq = ++q[i].comm->er.call_seq;
    }
    /* Board generations follow the same order; an operation takes one per
     * round. Given here, not when queued: a group dropped at its end (an
     * invalid call in it) must not leave generations nobody posts. */
    if (!op->device && op->sched.algo == TUTTI_ALGO_BOARD) {
      op->board_gen = q[i].comm->er.board_issued + 1;
      q[i].comm->er.board_issued += (uint64_t)op->sched.board_gens;
    }
  }
  int first = -1;
  if (ops == NULL) {
    res = tutti_error(ncclSystemError, "out of host memory");
  } else {
    res = record_launch_events(q, n);
    if (res == ncclSuccess) {
      res = tutti_group_launch_device(q, n, &first);
    }
    /* Puts before host operations and waits after them: a rank's waits
     * never hold up the puts its peers wait for. */
    res = run_rmas(rq, nr, 0, res);
    int nh = 0;
    for (int i = 0; i < n; i++) {
      if (!q[i].op->device) {
        ops[nh++] = q[i].op;
      }
    }
    if (res == ncclSuccess && nh > 0) {
      res = tutti_exec_run(ops, nh);
    }
    res = run_rmas(rq, nr, 1, res);
  }
  for (int i = 0; i < n; i++) {
    if (res != ncclSuccess) {
      tutti_comm_set_error(q[i].comm, res);
      /* Every later call fails with this cause, here and on the peers. */
      tutti_agree_fail(tutti_exec_bells(&q[i].comm->er), res, first, q[i].op->call.seq, 0);
    }
    tutti_op_put(q[i].op);
    q[i].op = NULL;
  }
  for (int i = 0; i < n; i++) {
    __atomic_fetch_sub(&q[i].comm->active_calls, 1, __ATOMIC_SEQ_CST);
  }
  for (int i = 0; i < nr; i++) {
    __atomic_fetch_sub(&rq[i].comm->active_calls, 1, __ATOMIC_SEQ_CST);
  }
  if (ops != stack_ops) {
    free(ops);
  }
  return res;
}

ncclResult_t tutti_group_ops_run(int run) {
  ncclResult_t res = ncclSuccess;
  if (run && grp.nops + grp.nrmas > 0) {
    res = run_ops(grp.ops, grp.nops, grp.rmas, grp.nrmas);
  }
  tutti_group_ops_drop();
  return res;
}

/* A host operation runs when it is called (or at its group's end): first
 * whatever its stream still has to do to its buffers, and then the
 * communicator's device collectives issued before it, which its peers run
 * before theirs too (the issue order). Both waits are bounded. */
static ncclResult_t host_ready(struct ncclComm* comm, cudaStream_t stream) {
  NCCLCHECK(tutti_cuda_stream_wait(stream, comm->er.timeout_s + 5, &comm->abort_flag));
  return comm->dev != NULL ? tutti_dev_comm_wait(comm->dev) : ncclSuccess;
}

ncclResult_t tutti_group_add_op(struct tutti_op* op, struct ncclComm* comm, cudaStream_t stream) {
  /* Device buffers: the kernel goes on the stream; nothing waits. */
  ncclResult_t res = op->device ? ncclSuccess : host_ready(comm, stream);
  if (res == ncclSuccess && grp.depth == 0) {
    struct tutti_queued_op q = {op, comm};
    return run_ops(&q, 1, NULL, 0); /* op is back in its pool */
  } else if (res == ncclSuccess && grp.nops == grp.cap_ops) {
    int cap = grp.cap_ops ? 2 * grp.cap_ops : 16;
    struct tutti_queued_op* n = realloc(grp.ops, (size_t)cap * sizeof *n);
    if (n == NULL) {
      res = tutti_error(ncclSystemError, "out of host memory");
    } else {
      grp.ops = n;
      grp.cap_ops = cap;
    }
  }
  if (res == ncclSuccess && grp.depth > 0) {
    grp.ops[grp.nops].op = op;
    grp.ops[grp.nops].comm = comm;
    grp.nops++;
    return ncclSuccess;
  }
  tutti_op_put(op);
  return tutti_group_fail(res);
}

ncclResult_t tutti_group_add_rma(struct ncclComm* comm, const struct tutti_rma_call* c) {
  if (grp.depth == 0) {
    struct queued_rma q = {*c, comm};
    ncclResult_t res = run_ops(NULL, 0, &q, 1);
    free(q.call.descs);
    return res;
  }
  if (grp.nrmas == grp.cap_rmas) {
    int cap = grp.cap_rmas ? 2 * grp.cap_rmas : 16;
    struct queued_rma* n = realloc(grp.rmas, (size_t)cap * sizeof *n);
    if (n == NULL) {
      free(c->descs);
      return tutti_group_fail(tutti_error(ncclSystemError, "out of host memory"));
    }
    grp.rmas = n;
    grp.cap_rmas = cap;
  }
  grp.rmas[grp.nrmas].call = *c;
  grp.rmas[grp.nrmas].comm = comm;
  grp.nrmas++;
  return ncclSuccess;
}
