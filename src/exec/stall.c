/* What a stuck operation of the host executor waits for, and what that
 * peer is doing, for the errors that end a wait (see exec/step.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "call/agree.h"
#include "exec/step.h"
#include "util/check.h"
#include "util/proc.h"
#include "util/socket.h"

/* The first peer of its host whose record of op's call has not come yet. */
static int missing_call(const struct tutti_op* op) {
  return tutti_agree_missing(tutti_exec_bells(op->er), &op->call);
}

/* The step lane i is stuck on, or NULL when the lane is done. */
static const struct tutti_step* stuck_step(const struct tutti_op* op, int i) {
  const struct tutti_lane_state* l = &op->lanes[i];
  return l->finished || l->step >= l->end ? NULL : &op->sched.steps[l->step];
}

/* The peer a stuck step waits for: the one it receives from or sends to, or
 * for a board fold the first whose contribution is missing; -1 if none. */
static int stuck_peer(const struct tutti_op* op, const struct tutti_step* st) {
  if (st == NULL) {
    return -1;
  }
  if (st->kind == TUTTI_STEP_BOARD_FOLD || st->kind == TUTTI_STEP_BOARD_GATHER) {
    return tutti_board_missing(op, st, 0);
  }
  return st->recv_peer >= 0 ? st->recv_peer : st->send_peer;
}

/* Whether every lane of op is done (only the peers' calls are awaited). */
static int all_done(const struct tutti_op* op) {
  for (int i = 0; i < op->sched.nlanes; i++) {
    if (stuck_step(op, i) != NULL) {
      return 0;
    }
  }
  return 1;
}

int tutti_stall_moving(const struct tutti_op* op) {
  return !all_done(op);
}

int tutti_stall_waits_for(const struct tutti_op* op) {
  for (int i = 0; i < op->sched.nlanes; i++) {
    const int p = stuck_peer(op, stuck_step(op, i));
    if (p >= 0) {
      return p;
    }
  }
  return all_done(op) ? missing_call(op) : -1;
}

uint64_t tutti_stall_bytes_moved(const struct tutti_op* op) {
  const struct tutti_schedule* s = &op->sched;
  uint64_t moved = 0;
  for (int i = 0; i < s->nlanes; i++) {
    const struct tutti_lane_state* l = &op->lanes[i];
    const int upto = l->finished ? s->lanes[i].first_step + s->lanes[i].nsteps : l->step;
    for (int k = s->lanes[i].first_step; k < upto; k++) {
      moved += s->steps[k].bytes;
    }
    moved += l->finished ? 0 : l->done;
  }
  return moved;
}

/* Which peer a stuck lane waits for, for the error text. */
void tutti_stall_describe(const struct tutti_op* op, char* buf, size_t len) {
  const struct tutti_schedule* s = &op->sched;
  for (int i = 0; i < s->nlanes; i++) {
    const struct tutti_lane_state* l = &op->lanes[i];
    const struct tutti_step* st = stuck_step(op, i);
    if (st == NULL) {
      continue;
    }
    const int peer = stuck_peer(op, st);
    if (st->kind == TUTTI_STEP_BOARD_POST) {
      snprintf(buf, len, "waiting for this rank's previous board collective of the group");
      return;
    }
    if (st->kind == TUTTI_STEP_BOARD_FOLD || st->kind == TUTTI_STEP_BOARD_GATHER) {
      snprintf(buf, len, "waiting on the board for rank %d's contribution (%zu bytes)", peer,
               st->bytes);
      return;
    }
    snprintf(buf, len, "%s rank %d at step %d of %d (%zu of %zu bytes moved)",
             st->recv_peer >= 0 ? "receiving from" : "sending to", peer,
             l->step - s->lanes[i].first_step + 1, s->lanes[i].nsteps, l->done, st->bytes);
    return;
  }
  const int p = missing_call(op);
  if (p >= 0) {
    snprintf(buf, len, "its part done, waiting to see rank %d make the same call #%llu", p,
             (unsigned long long)op->call.seq);
  } else {
    snprintf(buf, len, "finishing");
  }
}

/* Leaves in this rank's doorbell, for the ranks that see it leave, that it
 * gave up on a peer that made no progress (ETIME), not on a lost one. */
void tutti_stall_record(const struct tutti_op* op) {
  for (int i = 0; i <= op->sched.nlanes && op->er->bell != NULL; i++) {
    const int p = i < op->sched.nlanes ? stuck_peer(op, stuck_step(op, i))
                  : all_done(op)       ? missing_call(op)
                                       : -1;
    if (p >= 0) {
      uint32_t none = 0;
      __atomic_compare_exchange_n(&op->er->bell->lost, &none, tutti_lost_make(ETIME, p), 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
      return;
    }
  }
}

/* What peer p, which the operation waits for, is doing: 1 when said. */
static int describe_one(const struct tutti_op* op, int p, char* buf, size_t len) {
  const struct tutti_exec_rank* er = op->er;
  if (p < 0 || er->peer_bells == NULL || er->peer_bells[p] == NULL) {
    return 0;
  }
  if (er->peers[p].host_hash != er->peers[er->rank].host_hash) {
    /* A network peer's doorbell here is a local stand-in: it says only
     * whether the connection lives, which the heartbeat keeps true. */
    if (tutti_socket_heartbeat_s() > 0 &&
        __atomic_load_n(&er->peer_bells[p]->lost, __ATOMIC_ACQUIRE) == 0) {
      snprintf(buf, len,
               ": rank %d (pid %d on host %s) is stalled, not lost: its host still answers "
               "(TCP heartbeat), so the process is stopped, stuck in its own code, or in "
               "another collective",
               p, (int)er->peers[p].pid, er->peers[p].hostname);
      return 1;
    }
    return 0;
  }
  const struct tutti_doorbell* b = er->peer_bells[p];
  int active = (int)__atomic_load_n(&b->status.active, __ATOMIC_ACQUIRE);
  unsigned long long seq = (unsigned long long)__atomic_load_n(&b->status.seq, __ATOMIC_RELAXED);
  const char* coll =
      tutti_coll_name((enum tutti_coll)__atomic_load_n(&b->status.coll, __ATOMIC_RELAXED));
  int pid = (int)er->peers[p].pid;
  char doing[96];
  if (active) {
    snprintf(doing, sizeof doing, "in %s #%llu", coll, seq);
  } else if (seq > 0) {
    snprintf(doing, sizeof doing, "in no collective (its last: %s #%llu)", coll, seq);
  } else {
    snprintf(doing, sizeof doing, "in no collective yet");
  }
  if (tutti_process_stopped(pid)) {
    snprintf(buf, len, ": rank %d (pid %d) is alive but stopped (SIGSTOP or a debugger), %s", p,
             pid, doing);
  } else if (active && seq == op->seq && strcmp(coll, tutti_coll_name(op->args.coll)) == 0) {
    snprintf(buf, len,
             ": rank %d (pid %d) is alive and in the same %s #%llu, itself waiting: a stall "
             "elsewhere in the job",
             p, pid, coll, seq);
  } else if (active) {
    snprintf(buf, len,
             ": rank %d (pid %d) is alive but %s: the ranks called different collectives or in "
             "a different order",
             p, pid, doing);
  } else {
    snprintf(buf, len, ": rank %d (pid %d) is alive but %s: is it stuck in its own code?", p, pid,
             doing);
  }
  return 1;
}

/* What the peer a stuck lane waits for is doing, when its doorbell is
 * visible (same host): stopped, in another collective, or in none. */
void tutti_stall_describe_peer(const struct tutti_op* op, char* buf, size_t len) {
  snprintf(buf, len, ": is that rank alive and calling the same collectives in the same order?");
  for (int i = 0; i < op->sched.nlanes; i++) {
    if (describe_one(op, stuck_peer(op, stuck_step(op, i)), buf, len)) {
      return;
    }
  }
  if (all_done(op)) {
    describe_one(op, missing_call(op), buf, len);
  }
}

/* A peer that can no longer answer, among those a stuck lane waits for:
 * records the error text and returns non-zero. */
int tutti_stall_gone_peer(struct tutti_op* op) {
  struct tutti_exec_rank* er = op->er;
  const struct tutti_schedule* s = &op->sched;
  const int missing = all_done(op) ? missing_call(op) : -1;
  for (int i = 0; i < s->nlanes || (i == s->nlanes && missing >= 0); i++) {
    const struct tutti_step* st = i < s->nlanes ? stuck_step(op, i) : NULL;
    if (st == NULL && i < s->nlanes) {
      continue;
    }
    /* The step's two peers; for a board read, every rank it still misses;
     * all steps done, the peer whose call is awaited. */
    for (int p = 0; p < er->nranks; p++) {
      const int waits = st == NULL ? p == missing
                        : st->kind == TUTTI_STEP_BOARD_FOLD || st->kind == TUTTI_STEP_BOARD_GATHER
                            ? tutti_board_missing(op, st, p) == p
                            : p == st->recv_peer || p == st->send_peer;
      if (!waits || er->peer_bells == NULL || er->peer_bells[p] == NULL) {
        continue;
      }
      const char* why = tutti_doorbell_gone(er->peer_bells[p]);
      if (why != NULL) {
        /* Leave the first cause where the other ranks will look when this
         * one leaves in turn: the rank that was lost first, not this one. */
        uint32_t theirs = __atomic_load_n(&er->peer_bells[p]->lost, __ATOMIC_ACQUIRE);
        uint32_t cause = tutti_lost_rank(theirs) >= 0 ? theirs : tutti_lost_make(0, p);
        uint32_t none = 0;
        if (er->bell != NULL) {
          __atomic_compare_exchange_n(&er->bell->lost, &none, cause, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE);
        }
        tutti_error(ncclRemoteError,
                    "rank %d (pid %d on host %s) %s while rank %d waits for it in %s #%llu", p,
                    (int)er->peers[p].pid, er->peers[p].hostname, why, er->rank,
                    tutti_coll_name(op->args.coll), (unsigned long long)op->seq);
        return 1;
      }
    }
  }
  return 0;
}
