/* Shorthands the algorithm files use to append steps. */
#ifndef TUTTI_ALGO_STEPS_H
#define TUTTI_ALGO_STEPS_H

#include "algo/algo.h"
#include "util/check.h"

static inline ncclResult_t tutti_add(struct tutti_schedule* s, enum tutti_step_kind kind, int flags,
                                     enum tutti_buf src_buf, size_t src_off, enum tutti_buf dst_buf,
                                     size_t dst_off, size_t bytes, int send_peer, int recv_peer) {
  struct tutti_step st = {.kind = (uint8_t)kind,
                          .flags = (uint8_t)flags,
                          .src_buf = (uint8_t)src_buf,
                          .dst_buf = (uint8_t)dst_buf,
                          .send_peer = send_peer,
                          .recv_peer = recv_peer,
                          .wait_lane = -1,
                          .src_off = src_off,
                          .dst_off = dst_off,
                          .bytes = bytes};
  return tutti_sched_step(s, &st);
}

static inline ncclResult_t tutti_add_wait(struct tutti_schedule* s, int lane) {
  struct tutti_step st = {
      .kind = TUTTI_STEP_WAIT_LANE, .send_peer = -1, .recv_peer = -1, .wait_lane = lane};
  return tutti_sched_step(s, &st);
}

#define ADD_SEND(s, fl, sb, so, bytes, peer) \
  tutti_add((s), TUTTI_STEP_SEND, (fl), (sb), (so), TUTTI_BUF_NONE, 0, (bytes), (peer), -1)
#define ADD_RECV(s, fl, db, dof, bytes, peer) \
  tutti_add((s), TUTTI_STEP_RECV, (fl), TUTTI_BUF_NONE, 0, (db), (dof), (bytes), -1, (peer))
#define ADD_COPY(s, fl, sb, so, db, dof, bytes) \
  tutti_add((s), TUTTI_STEP_COPY, (fl), (sb), (so), (db), (dof), (bytes), -1, -1)
/* Lets `peer` read `bytes` of (sb, so); the step ends once it has. */
#define ADD_EXPOSE(s, sb, so, bytes, peer) \
  tutti_add((s), TUTTI_STEP_EXPOSE, 0, (sb), (so), TUTTI_BUF_NONE, 0, (bytes), (peer), -1)
/* dst = what `peer` exposes; `input`: that is its user input (scaled as read). */
#define ADD_PULL(s, fl, input, db, dof, bytes, peer)                                               \
  tutti_add((s), TUTTI_STEP_PULL, (fl) | ((input) ? TUTTI_STEP_PEER_INPUT : 0), TUTTI_BUF_NONE, 0, \
            (db), (dof), (bytes), -1, (peer))
/* dst = (sb, so) OP what `peer` exposes (its user input). */
#define ADD_PULL_REDUCE(s, fl, sb, so, db, dof, bytes, peer)                                    \
  tutti_add((s), TUTTI_STEP_PULL_REDUCE, (fl) | TUTTI_STEP_PEER_INPUT, (sb), (so), (db), (dof), \
            (bytes), -1, (peer))
/* Writes (sb, so) into what `peer` exposes (a part of its output). */
#define ADD_PUSH(s, sb, so, bytes, peer) \
  tutti_add((s), TUTTI_STEP_PUSH, 0, (sb), (so), TUTTI_BUF_NONE, 0, (bytes), -1, (peer))

/* A board step of round `round` (generation board_gen + round of the
 * operation); the schedule counts the generations it uses. Board steps name
 * no peer: the executor takes a connection's turn for every peer a step
 * names, and the board uses no connection (a broadcast's root comes from
 * the operation's arguments). */
static inline ncclResult_t tutti_add_board(struct tutti_schedule* s, enum tutti_step_kind kind,
                                           int flags, enum tutti_buf src_buf, size_t src_off,
                                           enum tutti_buf dst_buf, size_t dst_off, size_t bytes,
                                           int round) {
  struct tutti_step st = {.kind = (uint8_t)kind,
                          .flags = (uint8_t)flags,
                          .src_buf = (uint8_t)src_buf,
                          .dst_buf = (uint8_t)dst_buf,
                          .send_peer = -1,
                          .recv_peer = -1,
                          .board_round = round,
                          .src_off = src_off,
                          .dst_off = dst_off,
                          .bytes = bytes};
  s->board_gens = round + 1 > s->board_gens ? round + 1 : s->board_gens;
  return tutti_sched_step(s, &st);
}

#endif
