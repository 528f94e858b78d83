/* The host executor: runs the schedules of one or more operations (a group)
 * on the calling thread, moving pieces between the user's buffers and the
 * connections until every lane is done. Operations of different
 * communicators (several ranks driven by one thread) run together. */
#ifndef TUTTI_EXEC_EXEC_H
#define TUTTI_EXEC_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"
#include "ras/ras.h"
#include "reduce/reduce.h"
#include "transport/transport.h"
#include "tune/plan.h"

/* One rank's view, owned by the communicator. */
struct tutti_exec_rank {
  int rank;
  int nranks;
  struct tutti_conn** send; /* [nranks] */
  struct tutti_conn** recv; /* [nranks] */
  struct tutti_doorbell* bell;
  struct tutti_ras_comm* ras;         /* the flight recorder and what RAS reads (NULL: none) */
  struct tutti_doorbell** peer_bells; /* [nranks], NULL where not shared */
  size_t piece_bytes;                 /* the same on every rank of the communicator */
  size_t queue_bytes;                 /* the smallest queue of any connection, likewise */
  size_t stream_min_bytes;            /* outputs this large take streaming stores (0: none) */
  size_t board_stream_min_bytes;      /* the board's gathers, likewise */
  const struct tutti_peer_info* peers;
  volatile int* abort_flag;
  double timeout_s;
  uint64_t op_count;     /* operations issued, for error texts */
  uint64_t call_seq;     /* collectives run (struct tutti_call.seq; call/agree.c) */
  uint64_t call_checked; /* device calls every peer was seen agreeing on, up to this one */
  struct tutti_op* pool; /* finished operations kept with their buffers for reuse */
  int spin_passes;       /* idle passes spent spinning (adapted as calls go), */
  int spin_max;          /* up to this many, */
  int yield_passes;      /* then yielding, before sleeping (tune's: tutti_tune_wait) */
  void* pull_bounce;     /* single-copy steps: peers' bytes to reduce land here (exec/pull.c) */
  /* Board collectives (exec/board.c): the host's board, when every rank of
   * the communicator is on it, and generations numbered from 1 in issue
   * order: issued so far, and the last whose contributions this rank has
   * finished reading (its slot of generation g + 2 may be written then). */
  struct tutti_board board;
  uint64_t board_issued;
  uint64_t board_finished;
  /* A run of this rank failed: generations may never be read again, so a
   * later board operation fails at once instead of waiting for them. */
  int board_failed;
};

/* The rank's doorbell and its peers', as call agreement sees them. */
static inline struct tutti_bells tutti_exec_bells(const struct tutti_exec_rank* er) {
  struct tutti_bells b = {er->bell, er->peer_bells, er->rank, er->nranks};
  return b;
}

/* One operation ready to run. */
struct tutti_op {
  struct tutti_exec_rank* er;
  struct tutti_plan plan; /* tune's (a host call's when issued, a device call's at launch) */
  struct tutti_schedule sched;
  struct tutti_coll_args args;
  int sched_valid; /* sched was built from args (kept across reuse from the pool) */
  struct tutti_redop redop;
  void* bufs[4];                   /* indexed by enum tutti_buf */
  uint64_t seq;                    /* 1-based number of this operation on its communicator */
  struct tutti_call call;          /* what every rank must have called (seq 0: a send or receive) */
  int agreed;                      /* every visible peer was seen making the same call */
  struct tutti_ras_slot* ras_slot; /* its place in the flight recorder (NULL: none) */
  uint64_t board_gen; /* board collectives: this operation's first generation (round 0) */
  int device;         /* device buffers: the device executor runs it on `stream` */
  cudaStream_t stream;
  cudaEvent_t launch_event; /* ncclCollConfig_t.launchCompletionEvent: recorded at launch */
  const void* scalar_dev;   /* device: a PreMulSum scalar the kernel reads */
  void* scratch;            /* owned: at least sched.scratch_bytes */
  size_t scratch_cap;
  /* Progress, private to the executor. */
  struct tutti_lane_state* lanes;
  size_t lanes_cap; /* bytes */
  struct tutti_op* next_free;
};

/* An operation of `er`, from its pool when one is there: schedules, lane
 * states and scratch keep their memory from one call to the next, so a
 * steady stream of calls allocates nothing. */
struct tutti_op* tutti_op_get(struct tutti_exec_rank* er);
/* Makes sure op->scratch holds sched.scratch_bytes. */
ncclResult_t tutti_op_scratch(struct tutti_op* op);
/* Returns an operation to its rank's pool. */
void tutti_op_put(struct tutti_op* op);
/* Frees an operation, its schedule and its scratch. */
void tutti_op_free(struct tutti_op* op);
/* Frees the pool (when the communicator goes). */
void tutti_exec_rank_free_pool(struct tutti_exec_rank* er);

/* Runs `ops` to completion. Returns the first failure, after recording a
 * sentence that names the operation, the step and the peer. */
ncclResult_t tutti_exec_run(struct tutti_op** ops, int nops);

/* TUTTI_DUMP_ON_SIGNAL (exec/dump.c): installs the handler once when the
 * variable's value (read by the API) asks for it; the count of dump
 * requests received so far. */
void tutti_dump_install(const char* signal_name);
unsigned tutti_dump_requests(void);

/* Waiting when a whole pass moved nothing (exec/wait.c): spin briefly, then
 * yield, then sleep on the rank's doorbell until a peer posts or frees a slot.
 * Before sleeping the waiter announces itself and asks for one more pass, so
 * a post that raced with the announcement is never missed. */
struct tutti_waiter {
  struct tutti_doorbell* bell; /* NULL: several ranks on this thread, poll with short sleeps */
  int spin;                    /* adapted: grows while waits end during or just after spinning, */
  int spin_max;                /* shrinks while they end only after yielding for long or sleeping */
  int yield;
  uint32_t seen;
  int armed;
  int idle_passes;
};
void tutti_wait_prepare(struct tutti_waiter* w);
/* Returns non-zero once the waiter is past spinning (slow checks are due). */
int tutti_wait_idle(struct tutti_waiter* w);
void tutti_wait_reset(struct tutti_waiter* w);

#endif
