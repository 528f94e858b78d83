/* Group semantics (see group.h): ncclGroupStart / ncclGroupEnd and the
 * group's jobs (inits, splits, suspends: run together at its end); its
 * depth, error and operations are group_ops.c's. */
#include "api/group.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "util/check.h"

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

static __thread struct {
  struct job* jobs;
  int njobs, cap_jobs;
} grp;

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
  tutti_group_ops_drop();
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
  if (tutti_group_depth() == 0) {
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
  if (tutti_group_depth() == 0) {
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
  if (tutti_group_depth() == 0) {
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

NCCL_API ncclResult_t ncclGroupStart(void) {
  tutti_group_open();
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclGroupEnd(void) {
  ncclResult_t res;
  const int depth = tutti_group_close(&res);
  if (depth < 0) {
    return tutti_error(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  }
  if (depth > 0) {
    return ncclSuccess;
  }
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
  ncclResult_t ores = tutti_group_ops_run(res == ncclSuccess || res == ncclInProgress);
  return ores != ncclSuccess ? ores : res;
}

NCCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (simInfo != NULL && (simInfo->magic != 0x74685283 || simInfo->size < sizeof *simInfo)) {
    return tutti_error(ncclInvalidArgument,
                       "ncclGroupSimulateEnd: simInfo was not set with NCCL_SIM_INFO_INITIALIZER");
  }
  if (tutti_group_depth() == 0) {
    return tutti_error(ncclInvalidUsage, "ncclGroupSimulateEnd called outside a group");
  }
  /* Nothing runs: the queued work is dropped, as NCCL does. The estimate is
   * not modelled; -1 tells the caller so. */
  if (simInfo != NULL) {
    simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  }
  ncclResult_t ignored;
  if (tutti_group_close(&ignored) == 0) {
    drop_queued();
  }
  return ncclSuccess;
}

void tutti_group_wait_idle(struct ncclComm* comm) {
  while (__atomic_load_n(&comm->active_calls, __ATOMIC_SEQ_CST) > 0) {
    sched_yield();
  }
}
