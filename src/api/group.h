/* Groups: ncclGroupStart / ncclGroupEnd, per thread. Inside a group,
 * communicator inits and operations are queued; ncclGroupEnd runs the inits
 * concurrently (one thread each, so one thread can create every rank), then
 * all queued operations together as one fused schedule. Outside a group each
 * call is a group of its own. */
#ifndef TUTTI_API_GROUP_H
#define TUTTI_API_GROUP_H

#include "api/comm.h"
#include "exec/exec.h"

/* Queues (or, outside a group, runs) the init of `comm`. */
ncclResult_t tutti_group_add_init(struct ncclComm* comm, ncclComm_t* out, int nranks,
                                  const ncclUniqueId* id, int rank);

/* A blocking job run at ncclGroupEnd on its own thread (ncclCommSplit). */
typedef ncclResult_t (*tutti_group_job_fn)(void* arg);
ncclResult_t tutti_group_add_job(struct ncclComm* comm, tutti_group_job_fn fn, void* arg);

/* A job on `comm` that honours its non-blocking mode (ncclCommSuspend,
 * ncclCommResume): on a non-blocking communicator it runs on a thread of
 * its own, ncclGroupEnd returns ncclInProgress and the communicator's
 * asynchronous error becomes the job's result. `drop` (may be NULL) undoes
 * the job's queuing when its group fails before running it. */
ncclResult_t tutti_group_add_comm_job(struct ncclComm* comm, tutti_group_job_fn fn,
                                      tutti_group_job_fn drop, void* arg);

/* Whether this thread's open group holds operations of `comm`. */
int tutti_group_has_ops(const struct ncclComm* comm);

/* A job that makes the communicator `comm` (ncclCommGrow): run like an
 * init, on its own thread when `comm` is non-blocking (ncclInProgress), and
 * on failure of a blocking one `comm` is freed and *out cleared. `fn` owns
 * `arg` (a flat block from malloc) and frees it; a group that fails before
 * running it frees `arg`, and `comm`, itself. */
ncclResult_t tutti_group_add_create(struct ncclComm* comm, ncclComm_t* out, tutti_group_job_fn fn,
                                    void* arg);

/* Queues (or runs) an operation; the group owns `op` from here on. */
ncclResult_t tutti_group_add_op(struct tutti_op* op, struct ncclComm* comm, cudaStream_t stream);

/* Queues (or runs) a validated one-sided call; the group owns c->descs
 * from here on. At ncclGroupEnd puts and signals run after the device
 * launches and before host operations, waits after them. */
ncclResult_t tutti_group_add_rma(struct ncclComm* comm, const struct tutti_rma_call* c);

/* Records an error that makes the whole group fail at ncclGroupEnd. */
ncclResult_t tutti_group_fail(ncclResult_t res);

int tutti_group_depth(void);

/* Blocks until no call of this thread or another is inside `comm`. */
void tutti_group_wait_idle(struct ncclComm* comm);

/* Between the group's files. group_ops.c: ncclGroupStart's nesting;
 * closing returns the depth left (-1: no group was open) and the open
 * group's first error (tutti_group_fail); this thread's queued operations
 * and one-sided calls run (when `run`) and dropped, or only dropped. */
void tutti_group_open(void);
int tutti_group_close(ncclResult_t* error);
ncclResult_t tutti_group_ops_run(int run);
void tutti_group_ops_drop(void);

/* An operation queued with its communicator. */
struct tutti_queued_op {
  struct tutti_op* op;
  struct ncclComm* comm;
};

/* group_launch.c: enqueues the device operations among `q` on their
 * streams: per communicator one launch of all its operations of the group
 * (they may depend on each other, as a send and a receive between two
 * ranks do), planned together by tune. On failure *cause is the rank it
 * names, or -1. */
ncclResult_t tutti_group_launch_device(struct tutti_queued_op* q, int n, int* cause);

#endif
