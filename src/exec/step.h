/* Moving the pieces of one step (exec/step.c), for the host executor. */
#ifndef TUTTI_EXEC_STEP_H
#define TUTTI_EXEC_STEP_H

#include "exec/exec.h"

struct tutti_lane_state;

/* Moves as many pieces of `st` as the connections allow; `*done` counts the
 * bytes moved so far; sets *moved when anything moved and *step_done when
 * the whole step is done. */
ncclResult_t tutti_step_progress(struct tutti_op* op, const struct tutti_lane_state* l,
                                 const struct tutti_step* st, size_t* done, int* moved,
                                 int* step_done);

/* The same for the single-copy steps (EXPOSE, PULL, PULL_REDUCE; exec/pull.c). */
ncclResult_t tutti_step_pull(struct tutti_op* op, const struct tutti_lane_state* l,
                             const struct tutti_step* st, size_t* done, int* moved, int* step_done);

/* The same for the board steps (BOARD_POST, BOARD_FOLD, BOARD_GATHER; exec/board.c). */
ncclResult_t tutti_step_board(struct tutti_op* op, const struct tutti_step* st, size_t* done,
                              int* moved, int* step_done);

/* The first rank from `from` on whose contribution a BOARD_FOLD or
 * BOARD_GATHER step still waits, or -1 (none, or not such a step). */
int tutti_board_missing(const struct tutti_op* op, const struct tutti_step* st, int from);

/* Whether lane `l` holds the current ticket of connection `c`. */
int tutti_exec_conn_ready(const struct tutti_lane_state* l, const struct tutti_conn* c);

/* Why a peer can no longer answer ("exited", "destroyed its communicator"),
 * or NULL while it can. */
const char* tutti_exec_peer_gone(const struct tutti_doorbell* bell);

#endif
