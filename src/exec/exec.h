/* The host executor: runs the schedules of one or more operations (a group)
 * on the calling thread, moving pieces between the user's buffers and the
 * connections until every lane is done. Operations of different
 * communicators (several ranks driven by one thread) run together. */
#ifndef TUTTI_EXEC_EXEC_H
#define TUTTI_EXEC_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"
#include "reduce/reduce.h"
#include "transport/transport.h"

/* One rank's view, owned by the communicator. */
struct tutti_exec_rank {
  int rank;
  int nranks;
  struct tutti_conn** send; /* [nranks] */
  struct tutti_conn** recv; /* [nranks] */
  struct tutti_doorbell* bell;
  struct tutti_doorbell** peer_bells; /* [nranks], NULL where not shared */
  size_t piece_bytes;                 /* the same on every rank of the communicator */
  size_t queue_bytes;                 /* the smallest queue of any connection, likewise */
  const struct tutti_peer_info* peers;
  volatile int* abort_flag;
  double timeout_s;
  uint64_t op_count; /* operations issued, for error texts */
};

/* One operation ready to run. */
struct tutti_op {
  struct tutti_exec_rank* er;
  struct tutti_schedule sched;
  struct tutti_coll_args args;
  struct tutti_redop redop;
  void* bufs[4]; /* indexed by enum tutti_buf */
  uint64_t seq;  /* 1-based number of this operation on its communicator */
  void* scratch; /* owned: sched.scratch_bytes */
  /* Progress, private to the executor. */
  struct tutti_lane_state* lanes;
};

/* Frees an operation, its schedule and its scratch. */
void tutti_op_free(struct tutti_op* op);

/* Runs `ops` to completion. Returns the first failure, after recording a
 * sentence that names the operation, the step and the peer. */
ncclResult_t tutti_exec_run(struct tutti_op** ops, int nops);

/* Waiting when a whole pass moved nothing (exec/wait.c): spin briefly, then
 * yield, then sleep on the rank's doorbell until a peer posts or frees a slot.
 * Before sleeping the waiter announces itself and asks for one more pass, so
 * a post that raced with the announcement is never missed. */
struct tutti_waiter {
  struct tutti_doorbell* bell; /* NULL: several ranks on this thread, poll with short sleeps */
  uint32_t seen;
  int armed;
  int idle_rounds;
};
void tutti_wait_prepare(struct tutti_waiter* w);
/* Returns non-zero once the waiter is past spinning (slow checks are due). */
int tutti_wait_idle(struct tutti_waiter* w);
void tutti_wait_reset(struct tutti_waiter* w);

#endif
