/* Moving the pieces of one step (exec/step.c), for the host executor. */
#ifndef TUTTI_EXEC_STEP_H
#define TUTTI_EXEC_STEP_H

#include "exec/exec.h"

/* A lane's progress through its steps (the host executor's). */
struct tutti_lane_state {
  int step; /* index into sched.steps */
  int end;
  size_t done; /* bytes of the current step already moved */
  int finished;
  int nheld;
  struct tutti_conn** held; /* connections this lane holds a ticket on */
  uint64_t* tickets;
  /* The claim word of the buffer piece this lane offers and a peer has not
   * yet released (an EXPOSE step in flight), or NULL (exec/pull.c). */
  uint32_t* offer;
  int offer_peer;
};

/* Moves as many pieces of `st` as the connections allow; `*done` counts the
 * bytes moved so far; sets *moved when anything moved and *step_done when
 * the whole step is done. */
ncclResult_t tutti_step_progress(struct tutti_op* op, struct tutti_lane_state* l,
                                 const struct tutti_step* st, size_t* done, int* moved,
                                 int* step_done);

/* The same for the single-copy steps (EXPOSE, PULL, PULL_REDUCE, PUSH; exec/pull.c). */
ncclResult_t tutti_step_pull(struct tutti_op* op, struct tutti_lane_state* l,
                             const struct tutti_step* st, size_t* done, int* moved, int* step_done);

/* Takes back every piece of buffer the operation's lanes still offer: after
 * it, no peer reads or writes them. For an operation that failed, before it
 * returns to the user (exec/pull.c). */
void tutti_step_withdraw(struct tutti_op* op);

/* The same for the board steps (BOARD_POST, BOARD_FOLD, BOARD_GATHER; exec/board.c). */
ncclResult_t tutti_step_board(struct tutti_op* op, const struct tutti_step* st, size_t* done,
                              int* moved, int* step_done);

/* The first rank from `from` on whose contribution a BOARD_FOLD or
 * BOARD_GATHER step still waits, or -1 (none, or not such a step). */
int tutti_board_missing(const struct tutti_op* op, const struct tutti_step* st, int from);

/* Whether lane `l` holds the current ticket of connection `c`. */
static inline int tutti_exec_conn_ready(const struct tutti_lane_state* l,
                                        const struct tutti_conn* c) {
  for (int i = 0; i < l->nheld; i++) {
    if (l->held[i] == c) {
      return c->ticket_serving == l->tickets[i];
    }
  }
  return 0;
}

/* What a stuck operation waits for (exec/stall.c), for error texts: which
 * peer and step (or, all its steps done, which peer's call it has not seen
 * yet); what that peer is doing when its doorbell shows it; a note in this
 * rank's doorbell that it gave up on that peer; and a peer it waits for
 * that can no longer answer (non-zero, the error recorded). */
void tutti_stall_describe(const struct tutti_op* op, char* buf, size_t len);
/* Whether some lane of op still has a step to move (else only peers' calls,
 * or the lanes' hand-over, are awaited). */
int tutti_stall_moving(const struct tutti_op* op);
/* The rank a stuck operation waits for first (-1: none known), for RAS. */
int tutti_stall_waits_for(const struct tutti_op* op);
/* The bytes op's steps have moved so far (every lane), for RAS. */
uint64_t tutti_stall_bytes_moved(const struct tutti_op* op);
void tutti_stall_describe_peer(const struct tutti_op* op, char* buf, size_t len);
void tutti_stall_record(const struct tutti_op* op);
int tutti_stall_gone_peer(struct tutti_op* op);

#endif
