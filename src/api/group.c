/* Group semantics (see group.h). */
#include "api/group.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "call/agree.h"
#include "util/check.h"
#include "util/cuda.h"

struct job {
  struct ncclComm* comm;
  ncclComm_t* out;         /* cleared when a blocking init fails */
  tutti_group_job_fn fn;   /* NULL: communicator init */
  tutti_group_job_fn drop; /* undoes a job that will not run */
  void* arg;
  int async;   /* fn honours a non-blocking communicator (tutti_group_add_comm_job) */
  int creates; /* the job makes `comm` (an init, or tutti_group_add_create's) */
  int nranks;
  int rank;
  ncclUniqueId id;
  ncclResult_t res;
  char err[1024];
  pthread_t thread;
  int threaded; /* runs on `thread`, joined before res is read */
  /* Jobs on one communicator (windows, splits) use its bootstrap ring, so
   * they run one after the other, in issue order, on the first one's thread. */
  struct job* then;
  int chained; /* run by an earlier job of its communicator */
};

struct queued_op {
  struct tutti_op* op;
  struct ncclComm* comm;
};

struct queued_rma {
  struct tutti_rma_call call;
  struct ncclComm* comm;
};

static __thread struct {
  int depth;
  ncclResult_t error;
  struct job* jobs;
  int njobs, cap_jobs;
  struct queued_op* ops;
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

static void* job_main(void* p) {
  for (struct job* j = p; j != NULL; j = j->then) {
    tutti_clear_error();
    j->res = j->fn ? j->fn(j->arg) : tutti_comm_init(j->comm, j->nranks, &j->id, j->rank);
    snprintf(j->err, sizeof j->err, "%s", tutti_last_error());
  }
  return NULL;
}

/* A job that runs on the group's threads (not one that makes its
 * communicator, nor one honouring a non-blocking communicator). */
static int plain(const struct job* j) {
  return j->fn != NULL && !j->creates && !j->async;
}

/* Chains each plain job after the last earlier one of its communicator. */
static void chain_jobs(struct job* jobs, int n) {
  for (int i = 0; i < n; i++) {
    jobs[i].then = NULL;
    jobs[i].chained = 0;
    for (int k = i - 1; k >= 0 && plain(&jobs[i]); k--) {
      if (plain(&jobs[k]) && jobs[k].comm == jobs[i].comm) {
        jobs[k].then = &jobs[i];
        jobs[i].chained = 1;
        break;
      }
    }
  }
}

static void* nonblocking_init_main(void* p) {
  job_main(p);
  free(p);
  return NULL;
}

/* A non-blocking communicator's job: its result becomes the communicator's
 * asynchronous error (ncclInProgress until then). */
static void* nonblocking_job_main(void* p) {
  struct job* j = p;
  job_main(j);
  if (j->res != ncclSuccess) {
    pthread_mutex_lock(&j->comm->error_lock);
    snprintf(j->comm->last_error, sizeof j->comm->last_error, "%s", j->err);
    pthread_mutex_unlock(&j->comm->error_lock);
  }
  __atomic_store_n(&j->comm->async_error, j->res, __ATOMIC_SEQ_CST);
  free(j);
  return NULL;
}

/* Starts a non-blocking communicator's init or job on its own thread. */
static ncclResult_t start_nonblocking(struct job* j) {
  struct ncclComm* comm = j->comm;
  if (comm->init_thread_live) {
    /* The previous one has finished: its communicator was ready. */
    pthread_join(comm->init_thread, NULL);
    comm->init_thread_live = 0;
  }
  struct job* copy = malloc(sizeof *copy);
  if (copy == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  *copy = *j;
  if (j->async) {
    __atomic_store_n(&comm->async_error, ncclInProgress, __ATOMIC_SEQ_CST);
  }
  if (pthread_create(&comm->init_thread, NULL,
                     j->creates ? nonblocking_init_main : nonblocking_job_main, copy) != 0) {
    free(copy);
    if (j->async) {
      __atomic_store_n(&comm->async_error, ncclSuccess, __ATOMIC_SEQ_CST);
    }
    return tutti_error(ncclSystemError, "could not start a thread for a non-blocking call");
  }
  comm->init_thread_live = 1;
  return ncclInProgress;
}

static void free_ops(void) {
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
}

/* A failed or simulated group runs nothing: queued inits are undone. */
static void drop_queued(void) {
  for (int i = 0; i < grp.njobs; i++) {
    if (grp.jobs[i].drop != NULL) {
      grp.jobs[i].drop(grp.jobs[i].arg);
    }
    if (grp.jobs[i].creates) {
      tutti_comm_free(grp.jobs[i].comm);
      if (grp.jobs[i].out != NULL) {
        *grp.jobs[i].out = NULL;
      }
    }
  }
  free(grp.jobs);
  grp.jobs = NULL;
  grp.njobs = grp.cap_jobs = 0;
  free_ops();
  grp.error = ncclSuccess;
}

/* Runs blocking jobs concurrently; a non-blocking communicator's init (or
 * suspend, resume) goes on in the background and reports through
 * ncclCommGetAsyncError. */
static ncclResult_t run_jobs(struct job* jobs, int n) {
  ncclResult_t res = ncclSuccess;
  int in_progress = 0;
  chain_jobs(jobs, n);
  for (int i = 0; i < n; i++) {
    struct job* j = &jobs[i];
    if (j->chained) {
      continue;
    }
    if ((j->creates || j->async) && !j->comm->blocking) {
      j->res = start_nonblocking(j);
      if (j->res == ncclInProgress) {
        in_progress = 1;
      } else {
        snprintf(j->err, sizeof j->err, "%s", tutti_last_error());
        if (j->drop != NULL) {
          j->drop(j->arg);
        }
      }
    } else if (n == 1) {
      job_main(j);
    } else if (pthread_create(&j->thread, NULL, job_main, j) != 0) {
      j->res = tutti_error(ncclSystemError, "could not start an init thread");
      for (struct job* c = j->then; c != NULL; c = c->then) {
        c->res = j->res; /* its chain never runs either */
        snprintf(c->err, sizeof c->err, "%s", tutti_last_error());
      }
      snprintf(j->err, sizeof j->err, "%s", tutti_last_error());
      if (j->drop != NULL) {
        j->drop(j->arg);
      }
    } else {
      j->threaded = 1;
    }
  }
  for (int i = 0; i < n; i++) {
    if (jobs[i].threaded) {
      pthread_join(jobs[i].thread, NULL);
    }
  }
  for (int i = 0; i < n; i++) {
    struct job* j = &jobs[i];
    if (j->res == ncclSuccess || j->res == ncclInProgress) {
      continue;
    }
    if (res == ncclSuccess) {
      res = j->res;
      tutti_set_last_error(j->err);
    }
    if (j->creates && j->out != NULL) {
      tutti_comm_free(j->comm); /* a failed blocking init leaves nothing behind */
      *j->out = NULL;
    }
  }
  return res != ncclSuccess ? res : (in_progress ? ncclInProgress : ncclSuccess);
}

static ncclResult_t push_job(const struct job* j) {
  if (grp.njobs == grp.cap_jobs) {
    int cap = grp.cap_jobs ? 2 * grp.cap_jobs : 8;
    struct job* n = realloc(grp.jobs, (size_t)cap * sizeof *n);
    if (n == NULL) {
      return tutti_group_fail(tutti_error(ncclSystemError, "out of host memory"));
    }
    grp.jobs = n;
    grp.cap_jobs = cap;
  }
  grp.jobs[grp.njobs++] = *j;
  return ncclSuccess;
}

ncclResult_t tutti_group_add_init(struct ncclComm* comm, ncclComm_t* out, int nranks,
                                  const ncclUniqueId* id, int rank) {
  struct job j;
  memset(&j, 0, sizeof j);
  j.comm = comm;
  j.out = out;
  j.creates = 1;
  j.nranks = nranks;
  j.rank = rank;
  j.id = *id;
  if (grp.depth == 0) {
    return run_jobs(&j, 1);
  }
  return push_job(&j);
}

/* A create job's argument, when its function never runs to free it. */
static ncclResult_t free_arg(void* arg) {
  free(arg);
  return ncclSuccess;
}

ncclResult_t tutti_group_add_create(struct ncclComm* comm, ncclComm_t* out, tutti_group_job_fn fn,
                                    void* arg) {
  struct job j;
  memset(&j, 0, sizeof j);
  j.comm = comm;
  j.out = out;
  j.creates = 1;
  j.fn = fn;
  j.drop = free_arg;
  j.arg = arg;
  if (grp.depth == 0) {
    return run_jobs(&j, 1);
  }
  ncclResult_t res = push_job(&j);
  if (res != ncclSuccess) {
    tutti_comm_free(comm);
    *out = NULL;
    free(arg);
  }
  return res;
}

static ncclResult_t add_job(struct ncclComm* comm, tutti_group_job_fn fn, tutti_group_job_fn drop,
                            void* arg, int async) {
  struct job j;
  memset(&j, 0, sizeof j);
  j.comm = comm;
  j.fn = fn;
  j.drop = drop;
  j.arg = arg;
  j.async = async;
  if (grp.depth == 0) {
    return run_jobs(&j, 1);
  }
  ncclResult_t res = push_job(&j);
  if (res != ncclSuccess && drop != NULL) {
    drop(arg);
  }
  return res;
}

ncclResult_t tutti_group_add_job(struct ncclComm* comm, tutti_group_job_fn fn, void* arg) {
  return add_job(comm, fn, NULL, arg, 0);
}

ncclResult_t tutti_group_add_comm_job(struct ncclComm* comm, tutti_group_job_fn fn,
                                      tutti_group_job_fn drop, void* arg) {
  return add_job(comm, fn, drop, arg, 1);
}

int tutti_group_has_ops(const struct ncclComm* comm) {
  for (int i = 0; i < grp.nops; i++) {
    if (grp.ops[i].comm == comm) {
      return 1;
    }
  }
  return 0;
}

/* Enqueues the device operations among `q`: one launch per communicator,
 * holding all of its operations of the group (they may depend on each other,
 * as a send and a receive between two ranks do). */
static ncclResult_t launch_device(struct queued_op* q, int n, int* cause) {
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    if (!q[i].op->device) {
      continue;
    }
    struct ncclComm* comm = q[i].comm;
    int first = 1;
    for (int j = 0; j < i && first; j++) {
      first = !(q[j].op->device && q[j].comm == comm);
    }
    if (!first) {
      continue;
    }
    struct tutti_dev_op dops[TUTTI_DEV_MAX_OPS];
    int nd = 0;
    for (int j = i; j < n; j++) {
      if (!q[j].op->device || q[j].comm != comm) {
        continue;
      }
      if (nd == TUTTI_DEV_MAX_OPS) {
        return tutti_error(ncclInvalidUsage,
                           "a group holds more than %d device operations of one communicator: "
                           "split it into several groups",
                           TUTTI_DEV_MAX_OPS);
      }
      struct tutti_op* op = q[j].op;
      struct tutti_dev_op* d = &dops[nd++];
      d->sched = &op->sched;
      d->args = &op->args;
      d->redop = op->redop;
      d->scalar_dev = op->scalar_dev;
      memcpy(d->bufs, op->bufs, sizeof d->bufs);
      d->stream = op->stream;
      d->seq = op->seq;
      res = tutti_agree_device(tutti_exec_bells(op->er), &op->call, &op->er->call_checked, cause);
      if (res != ncclSuccess) {
        /* Kernels already queued on this communicator stop too. */
        tutti_dev_comm_abort(comm->dev);
        return res;
      }
    }
    res = tutti_dev_launch(comm->dev, dops, nd);
  }
  return res;
}

/* Runs the operations, then returns them to their pools. Each
 * communicator counts as busy (ncclCommAbort waits for that) until nothing
 * of it is touched any more. Device operations are enqueued on their
 * streams first; host operations then run to completion. */
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

static ncclResult_t run_ops(struct queued_op* q, int n, struct queued_rma* rq, int nr) {
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
    res = launch_device(q, n, &first);
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
    struct queued_op q = {op, comm};
    return run_ops(&q, 1, NULL, 0); /* op is back in its pool */
  } else if (res == ncclSuccess && grp.nops == grp.cap_ops) {
    int cap = grp.cap_ops ? 2 * grp.cap_ops : 16;
    struct queued_op* n = realloc(grp.ops, (size_t)cap * sizeof *n);
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

NCCL_API ncclResult_t ncclGroupStart(void) {
  if (grp.depth == 0) {
    grp.error = ncclSuccess;
  }
  grp.depth++;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclGroupEnd(void) {
  if (grp.depth == 0) {
    return tutti_error(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  }
  if (--grp.depth > 0) {
    return ncclSuccess;
  }
  ncclResult_t res = grp.error;
  if (res != ncclSuccess) {
    drop_queued();
    return res;
  }
  if (grp.njobs > 0) {
    res = run_jobs(grp.jobs, grp.njobs);
  }
  free(grp.jobs);
  grp.jobs = NULL;
  grp.njobs = grp.cap_jobs = 0;
  if ((res == ncclSuccess || res == ncclInProgress) && grp.nops + grp.nrmas > 0) {
    ncclResult_t ores = run_ops(grp.ops, grp.nops, grp.rmas, grp.nrmas);
    res = ores != ncclSuccess ? ores : res;
  }
  free_ops();
  return res;
}

NCCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (simInfo != NULL && (simInfo->magic != 0x74685283 || simInfo->size < sizeof *simInfo)) {
    return tutti_error(ncclInvalidArgument,
                       "ncclGroupSimulateEnd: simInfo was not set with NCCL_SIM_INFO_INITIALIZER");
  }
  if (grp.depth == 0) {
    return tutti_error(ncclInvalidUsage, "ncclGroupSimulateEnd called outside a group");
  }
  /* Nothing runs: the queued work is dropped, as NCCL does. The estimate is
   * not modelled; -1 tells the caller so. */
  if (simInfo != NULL) {
    simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  }
  if (--grp.depth == 0) {
    drop_queued();
  }
  return ncclSuccess;
}

void tutti_group_wait_idle(struct ncclComm* comm) {
  while (__atomic_load_n(&comm->active_calls, __ATOMIC_SEQ_CST) > 0) {
    sched_yield();
  }
}
