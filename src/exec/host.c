/* The host executor (see exec.h). Each pass walks every lane of every
 * operation and moves as many pieces as the connections allow, never
 * blocking; when a whole pass moves nothing it waits (exec/wait.c). A lane
 * uses a connection only when its ticket on that connection comes up, so
 * operations share a connection in issue order, as their peers do. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call/agree.h"
#include "exec/exec.h"
#include "exec/step.h"
#include "util/check.h"
#include "util/proc.h"
#include "util/socket.h"

static ncclResult_t lane_ticket(struct tutti_lane_state* l, struct tutti_conn* c) {
  for (int i = 0; i < l->nheld; i++) {
    if (l->held[i] == c) {
      return ncclSuccess;
    }
  }
  l->held[l->nheld] = c;
  l->tickets[l->nheld] = c->ticket_next++;
  l->nheld++;
  return ncclSuccess;
}

/* The connection a step needs, and whether this lane's turn on it has come. */

static ncclResult_t op_prepare(struct tutti_op* op) {
  struct tutti_schedule* s = &op->sched;
  struct tutti_exec_rank* er = op->er;
  /* One block: lane states, then held-connection and ticket arrays; kept
   * with the operation for the next call. */
  size_t slots = 2 * (size_t)s->nsteps + 1;
  size_t bytes = (size_t)s->nlanes * sizeof(struct tutti_lane_state) +
                 slots * (sizeof(struct tutti_conn*) + sizeof(uint64_t));
  if (bytes > op->lanes_cap) {
    free(op->lanes);
    op->lanes = malloc(bytes);
    op->lanes_cap = op->lanes != NULL ? bytes : 0;
    if (op->lanes == NULL) {
      return tutti_error(ncclSystemError, "out of host memory starting %s",
                         tutti_coll_name(op->args.coll));
    }
  }
  char* mem = (char*)op->lanes;
  memset(mem, 0, (size_t)s->nlanes * sizeof(struct tutti_lane_state));
  struct tutti_conn** held = (struct tutti_conn**)(mem + (size_t)s->nlanes * sizeof *op->lanes);
  uint64_t* tickets = (uint64_t*)(held + slots);
  for (int i = 0; i < s->nlanes; i++) {
    struct tutti_lane_state* l = &op->lanes[i];
    l->step = s->lanes[i].first_step;
    l->end = l->step + s->lanes[i].nsteps;
    l->held = held + 2 * (size_t)l->step;
    l->tickets = tickets + 2 * (size_t)l->step;
    for (int k = l->step; k < l->end; k++) {
      const struct tutti_step* st = &s->steps[k];
      int peers[2] = {st->send_peer, st->recv_peer};
      for (int d = 0; d < 2; d++) {
        if (peers[d] < 0) {
          continue;
        }
        struct tutti_conn* c = d == 0 ? er->send[peers[d]] : er->recv[peers[d]];
        if (c == NULL) {
          return tutti_error(ncclInternalError,
                             "%s on rank %d: no connection %s rank %d (host %s); no transport "
                             "joins these ranks",
                             tutti_coll_name(op->args.coll), er->rank, d == 0 ? "to" : "from",
                             peers[d], er->peers ? er->peers[peers[d]].hostname : "?");
        }
        NCCLCHECK(lane_ticket(l, c));
      }
    }
  }
  return ncclSuccess;
}

/* Passes the lane's turns on; each must have come (else its schedule named
 * a peer it never used, and passing it on would skip a waiting lane). */
static ncclResult_t lane_release(const struct tutti_op* op, struct tutti_lane_state* l) {
  for (int i = 0; i < l->nheld; i++) {
    if (l->held[i]->ticket_serving != l->tickets[i]) {
      return tutti_error(ncclInternalError,
                         "%s #%llu on rank %d: a lane finished before its turn on a connection "
                         "came (its schedule names a peer it does not use)",
                         tutti_coll_name(op->args.coll), (unsigned long long)op->seq, op->er->rank);
    }
  }
  for (int i = 0; i < l->nheld; i++) {
    l->held[i]->ticket_serving++;
  }
  l->finished = 1;
  return ncclSuccess;
}

/* Moves what can be moved on one lane; *moved is set when anything moved. */
static ncclResult_t lane_progress(struct tutti_op* op, struct tutti_lane_state* l, int* moved) {
  const struct tutti_schedule* s = &op->sched;
  while (l->step < l->end) {
    const struct tutti_step* st = &s->steps[l->step];
    if (st->kind == TUTTI_STEP_WAIT_LANE) {
      if (!op->lanes[st->wait_lane].finished) {
        return ncclSuccess;
      }
    } else {
      int step_done = 0;
      NCCLCHECK(tutti_step_progress(op, l, st, &l->done, moved, &step_done));
      if (!step_done) {
        return ncclSuccess;
      }
    }
    l->step++;
    l->done = 0;
    *moved = 1;
  }
  NCCLCHECK(lane_release(op, l));
  *moved = 1;
  return ncclSuccess;
}

/* Done but for a peer's call record: where that peer's records come
 * through a thread (another host), read them from here instead of waiting
 * for its wake-up. */
static void drive_missing(struct tutti_op* op) {
  const int p = tutti_agree_missing(tutti_exec_bells(op->er), &op->call);
  struct tutti_conn* c = p >= 0 ? op->er->recv[p] : NULL;
  if (c != NULL && c->ops->drive != NULL) {
    c->ops->drive(c);
  }
}

/* What this rank is in, in its doorbell, for peers that wait on it to say,
 * and its calls, for peers to compare (call/agree.c). */
static void publish(struct tutti_op** ops, int nops, int active, int failed) {
  const uint64_t now = tutti_ras_stamp_ns();
  for (int i = 0; i < nops; i++) {
    struct tutti_op* op = ops[i];
    if (active) {
      /* A collective's root as agreed (-1: none); a send's or receive's peer. */
      const int root = op->call.seq != 0 ? op->call.root : op->args.root;
      op->ras_slot = tutti_ras_enter(op->er->ras, op->call.seq, (int)op->args.coll, op->args.count,
                                     op->call.type, root, (int)op->sched.algo, now);
    } else {
      tutti_ras_exit(op->er->ras, op->ras_slot, failed, now);
      op->ras_slot = NULL;
    }
    struct tutti_doorbell* bell = ops[i]->er->bell;
    if (bell != NULL && active && ops[i]->call.seq != 0) {
      tutti_doorbell_put_call(bell, &ops[i]->call);
    }
    if (bell != NULL && active) {
      __atomic_store_n(&bell->status.seq, ops[i]->seq, __ATOMIC_RELAXED);
      __atomic_store_n(&bell->status.coll, (uint32_t)ops[i]->args.coll, __ATOMIC_RELAXED);
    }
    if (bell != NULL) {
      __atomic_store_n(&bell->status.active, (uint32_t)active, __ATOMIC_RELEASE);
    }
  }
}

void tutti_op_free(struct tutti_op* op) {
  if (op == NULL) {
    return;
  }
  tutti_schedule_free(&op->sched);
  free(op->lanes);
  free(op->scratch);
  free(op);
}

struct tutti_op* tutti_op_get(struct tutti_exec_rank* er) {
  struct tutti_op* op = er->pool;
  if (op != NULL) {
    er->pool = op->next_free;
    op->next_free = NULL;
  } else {
    op = calloc(1, sizeof *op);
    if (op == NULL) {
      return NULL;
    }
  }
  op->er = er;
  memset(&op->redop, 0, sizeof op->redop);
  memset(op->bufs, 0, sizeof op->bufs);
  return op;
}

ncclResult_t tutti_op_scratch(struct tutti_op* op) {
  if (op->sched.scratch_bytes > op->scratch_cap) {
    free(op->scratch);
    op->scratch = malloc(op->sched.scratch_bytes);
    op->scratch_cap = op->scratch != NULL ? op->sched.scratch_bytes : 0;
    if (op->scratch == NULL) {
      return tutti_error(ncclSystemError, "out of host memory for %zu bytes of scratch",
                         op->sched.scratch_bytes);
    }
  }
  return ncclSuccess;
}

void tutti_op_put(struct tutti_op* op) {
  if (op == NULL) {
    return;
  }
  /* Large scratch is not worth keeping around. */
  if (op->scratch_cap > (1u << 20)) {
    free(op->scratch);
    op->scratch = NULL;
    op->scratch_cap = 0;
  }
  op->next_free = op->er->pool;
  op->er->pool = op;
}

void tutti_exec_rank_free_pool(struct tutti_exec_rank* er) {
  while (er->pool != NULL) {
    struct tutti_op* op = er->pool;
    er->pool = op->next_free;
    tutti_op_free(op);
  }
  free(er->pull_bounce);
  er->pull_bounce = NULL;
}

ncclResult_t tutti_exec_run(struct tutti_op** ops, int nops) {
  ncclResult_t res = ncclSuccess;
  struct tutti_waiter w;
  memset(&w, 0, sizeof w);
  w.spin = ops[0]->er->spin_passes;
  int first = -1; /* the rank that found a failure's cause, -1: this one */
  int timed_out = 0;
  for (int i = 0; i < nops; i++) {
    NCCLCHECK(tutti_agree_sticky(ops[i]->er->bell));
  }
  publish(ops, nops, 1, 0);
  int prepared = 0; /* ops whose lane states are this call's */
  for (int i = 0; i < nops; i++) {
    NCCLCHECKGOTO(op_prepare(ops[i]), res, out);
    prepared = i + 1;
    /* Board steps compare every rank's call in the board's headers. */
    ops[i]->agreed = ops[i]->call.seq == 0 || ops[i]->sched.algo == TUTTI_ALGO_BOARD;
  }
  w.bell = ops[0]->er->bell;
  w.spin_max = ops[0]->er->spin_max;
  w.yield = ops[0]->er->yield_passes;
  for (int i = 1; i < nops; i++) {
    if (ops[i]->er != ops[0]->er) {
      w.bell = NULL; /* several ranks on this thread: no single doorbell */
    }
  }
  tutti_wait_prepare(&w);
  /* When the last move happened is read lazily (the clock read after every
   * move showed in small collectives' time): the first slow check after
   * moves stands for them, late by the spin and yield rounds (milliseconds). */
  double last_move = 0, last_check = 0;
  int moved_since_check = 1;
  /* A peer seen gone twice with a full idle pass in between: its last data,
   * posted just before it left, has had its chance to be read. */
  int gone_strikes = 0;
  unsigned dumped = tutti_dump_requests();
  for (;;) {
    int moved = 0, pending = 0;
    for (int i = 0; i < nops; i++) {
      struct tutti_op* op = ops[i];
      int left = 0;
      for (int k = 0; k < op->sched.nlanes; k++) {
        struct tutti_lane_state* l = &op->lanes[k];
        if (!l->finished) {
          NCCLCHECKGOTO(lane_progress(op, l, &moved), res, out);
          left += !l->finished;
        }
      }
      /* Done only once every peer was seen making the same call. */
      if (left == 0 && !op->agreed) {
        NCCLCHECKGOTO(tutti_agree_check(tutti_exec_bells(op->er), &op->call, &left), res, out);
        op->agreed = left == 0;
        if (!op->agreed) {
          drive_missing(op);
        }
      }
      pending += left;
    }
    if (pending == 0) {
      break;
    }
    if (moved) {
      for (int i = 0; i < nops && !moved_since_check; i++) {
        tutti_ras_wait(ops[i]->er->ras, 0, -1, 0); /* moving again, for RAS */
      }
      tutti_wait_reset(&w);
      moved_since_check = 1;
      gone_strikes = 0;
      continue;
    }
    /* Spins, then yields, then sleeps until a peer rings the doorbell. */
    if (!tutti_wait_idle(&w)) {
      continue;
    }
    /* Long idle: look at aborts, dead peers and the timeout a few times a second. */
    double t = tutti_socket_now();
    if (moved_since_check) {
      last_move = t;
      moved_since_check = 0;
    }
    if (t - last_check < 0.05) {
      continue;
    }
    last_check = t;
    for (int i = 0; i < nops; i++) {
      if (ops[i]->er->ras != NULL) {
        const uint64_t since = tutti_ras_now_ns() - (uint64_t)((t - last_move) * 1e9);
        tutti_ras_wait(ops[i]->er->ras, since, tutti_stall_waits_for(ops[i]),
                       tutti_stall_bytes_moved(ops[i]));
      }
    }
    if (tutti_dump_requests() != dumped) {
      dumped = tutti_dump_requests();
      for (int i = 0; i < nops; i++) {
        char what[160];
        tutti_stall_describe(ops[i], what, sizeof what);
        WARN("dump: rank %d of %d in %s #%llu (count %zu), waiting %.1f s: %s", ops[i]->er->rank,
             ops[i]->er->nranks, tutti_coll_name(ops[i]->args.coll),
             (unsigned long long)ops[i]->seq, ops[i]->args.count, t - last_move, what);
      }
    }
    /* A timeout names the first operation that still has data to move:
     * in a group the others may only wait for it. */
    int stuck = 0;
    while (stuck + 1 < nops && !tutti_stall_moving(ops[stuck])) {
      stuck++;
    }
    if (!tutti_stall_moving(ops[stuck])) {
      stuck = 0;
    }
    for (int k = 0; k < nops; k++) {
      const int i = (stuck + k) % nops;
      struct tutti_op* op = ops[i];
      struct tutti_exec_rank* er = op->er;
      /* A peer that failed, or made another call: its cause, at once. */
      int waiting = 0;
      if (tutti_agree_peer_failed(tutti_exec_bells(er), op->call.seq, &res, &first) >= 0) {
        goto out;
      }
      NCCLCHECKGOTO(tutti_agree_check(tutti_exec_bells(er), &op->call, &waiting), res, out);
      if (er->abort_flag != NULL && __atomic_load_n(er->abort_flag, __ATOMIC_ACQUIRE)) {
        res = tutti_error(ncclRemoteError,
                          "%s #%llu on rank %d stopped: the communicator was aborted",
                          tutti_coll_name(op->args.coll), (unsigned long long)op->seq, er->rank);
        goto out;
      }
      if (tutti_stall_gone_peer(op)) {
        if (++gone_strikes >= 2) {
          res = ncclRemoteError;
          tutti_ras_dump_error(er->ras);
          goto out;
        }
        break;
      }
      if (t - last_move > er->timeout_s) {
        char what[160], peer[320];
        tutti_stall_describe(op, what, sizeof what);
        tutti_stall_describe_peer(op, peer, sizeof peer);
        tutti_stall_record(op);
        timed_out = 1;
        res = tutti_error(ncclRemoteError,
                          "%s #%llu on rank %d made no progress for %.0f s (TUTTI_TIMEOUT), "
                          "%s%s",
                          tutti_coll_name(op->args.coll), (unsigned long long)op->seq, er->rank,
                          er->timeout_s, what, peer);
        tutti_ras_dump_error(er->ras);
        goto out;
      }
    }
  }
out:
  for (int i = 0; i < nops && res != ncclSuccess; i++) {
    ops[i]->er->board_failed = 1;
    /* The first cause stays; a timeout is this rank's view of a stall. */
    tutti_agree_fail(tutti_exec_bells(ops[i]->er), res, first, ops[i]->call.seq, timed_out);
  }
  /* The cause told first, then what peers may still read taken back: the
   * user may free the buffers once this returns. */
  for (int i = 0; i < prepared && res != ncclSuccess; i++) {
    tutti_step_withdraw(ops[i]);
  }
  publish(ops, nops, 0, res != ncclSuccess);
  tutti_wait_reset(&w);
  ops[0]->er->spin_passes = w.spin; /* what was learnt carries to the next call */
  return res;
}
