/* The board steps (TUTTI_ALGO_BOARD; struct tutti_board). Generation g of
 * the board's collectives uses slot set g & 1; an operation uses one
 * generation per round (op->board_gen + the step's board_round). POST
 * writes this rank's piece and then, with a release store, the generation
 * number into its slot's header; FOLD waits until every slot's header
 * holds g and reduces the slots in rank order into the output; GATHER
 * waits the same way and copies slot p into block p of the output (a
 * broadcast: the root's slot into the output; the others post nothing).
 *
 * Why two slot sets suffice, with no acknowledgement: a rank posts
 * generation g + 2 only after finishing its fold (or gather) of g + 1, which
 * needed every peer's post of g + 1, which every peer made only after
 * finishing its own read of g. So no slot is rewritten while anyone still
 * reads it. Inside one group a rank may hold several board operations, and
 * an operation several rounds: POST of g waits (without blocking the
 * executor) until this rank has finished g - 1. */
#include <string.h>

#include "call/agree.h"
#include "exec/step.h"
#include "reduce/reduce.h"
#include "util/check.h"
#include "util/param.h"

static inline struct tutti_board_header* slot_of(const struct tutti_exec_rank* er, uint64_t gen,
                                                 int rank) {
  return tutti_board_slot(&er->board, gen, rank);
}

static inline uint64_t gen_of(const struct tutti_op* op, const struct tutti_step* st) {
  return op->board_gen + (uint64_t)st->board_round;
}

int tutti_board_missing(const struct tutti_op* op, const struct tutti_step* st, int from) {
  const struct tutti_exec_rank* er = op->er;
  if ((st->kind != TUTTI_STEP_BOARD_FOLD && st->kind != TUTTI_STEP_BOARD_GATHER) ||
      er->board.base == NULL) {
    return -1;
  }
  const uint64_t gen = gen_of(op, st);
  for (int p = from < 0 ? 0 : from; p < er->nranks; p++) {
    if (tutti_board_posted(slot_of(er, gen, p)) != gen) {
      return p;
    }
  }
  return -1;
}

static ncclResult_t post(struct tutti_op* op, const struct tutti_step* st, int* moved,
                         int* step_done) {
  struct tutti_exec_rank* er = op->er;
  if (er->board_failed) {
    return tutti_error(ncclInvalidUsage,
                       "%s #%llu on rank %d: an earlier collective on this communicator failed, "
                       "so the ranks' board generations no longer match: abort or destroy the "
                       "communicator (ncclCommAbort) and create a new one",
                       tutti_coll_name(op->args.coll), (unsigned long long)op->seq, er->rank);
  }
  const uint64_t gen = gen_of(op, st);
  if (er->board_finished + 1 < gen) {
    return ncclSuccess; /* an earlier round or operation of this group still reads set g & 1 */
  }
  struct tutti_board_header* h = slot_of(er, gen, er->rank);
  if (st->bytes > 0) { /* a broadcast's other ranks post empty pieces */
    const char* src = (const char*)op->bufs[st->src_buf] + st->src_off;
    tutti_copy(tutti_board_data(h), src, st->bytes / op->args.elem_size, &op->redop,
               st->src_buf == TUTTI_BUF_SEND ? TUTTI_RED_SCALE_B : 0);
  }
  h->bytes = st->bytes;
  h->call = op->call;
  tutti_board_post(h, gen); /* then the doorbells: a peer about to sleep sees it or is woken */
  for (int p = 0; p < er->nranks; p++) {
    if (p != er->rank && er->peer_bells != NULL) {
      tutti_doorbell_ring(er->peer_bells[p]);
    }
  }
  *moved = 1;
  *step_done = 1;
  return ncclSuccess;
}

/* The one rank whose slot a GATHER reads (a broadcast's root), or -1:
 * every rank's. */
static inline int board_root(const struct tutti_op* op, const struct tutti_step* st) {
  return st->kind == TUTTI_STEP_BOARD_GATHER && op->args.coll == TUTTI_COLL_BROADCAST
             ? op->args.root
             : -1;
}

/* Whether every slot holds this step's generation, with the size it
 * expects (a broadcast's: the root's piece, nothing from the others): 1
 * yes, 0 not yet (*done: the peers before it have been seen posted), or an
 * error. */
static ncclResult_t all_posted(struct tutti_op* op, const struct tutti_step* st, size_t* done,
                               int* ready) {
  struct tutti_exec_rank* er = op->er;
  *ready = 0;
  int p = tutti_board_missing(op, st, (int)*done);
  if (p >= 0) {
    *done = (size_t)p;
    return ncclSuccess;
  }
  const int root = board_root(op, st);
  for (int q = 0; q < er->nranks; q++) {
    const struct tutti_board_header* h = slot_of(er, gen_of(op, st), q);
    if (op->call.seq != 0 && !tutti_call_same(&h->call, &op->call)) {
      return tutti_call_mismatch(er->rank, &op->call, q, &h->call);
    }
    const uint64_t got = h->bytes;
    const size_t want = root < 0 || q == root ? st->bytes : 0;
    if (got != want) {
      return tutti_error(ncclInvalidUsage,
                         "%s #%llu on rank %d: rank %d contributed %llu bytes where %zu were "
                         "expected: the ranks called different collectives, counts, datatypes "
                         "or roots",
                         tutti_coll_name(op->args.coll), (unsigned long long)op->seq, er->rank, q,
                         (unsigned long long)got, want);
    }
  }
  *ready = 1;
  return ncclSuccess;
}

/* dst = slot 0 OP slot 1 OP ... in rank order. */
static void fold(struct tutti_op* op, const struct tutti_step* st, uint64_t gen) {
  const struct tutti_exec_rank* er = op->er;
  const int n = er->nranks;
  char* dst = (char*)op->bufs[st->dst_buf] + st->dst_off;
  const size_t count = st->bytes / op->args.elem_size;
  const int final = (st->flags & TUTTI_STEP_FINAL) ? TUTTI_RED_FINAL : 0;
  if (n == 1) {
    tutti_copy(dst, tutti_board_data(slot_of(er, gen, 0)), count, &op->redop, final);
    return;
  }
  const void* acc = tutti_board_data(slot_of(er, gen, 0));
  for (int q = 1; q < n; q++) {
    tutti_reduce(dst, acc, tutti_board_data(slot_of(er, gen, q)), count, &op->redop,
                 q == n - 1 ? final : 0);
    acc = dst;
  }
}

/* Block q of dst = slot q (an all-gather), or dst = the root's slot (a
 * broadcast). */
static void gather(struct tutti_op* op, const struct tutti_step* st, uint64_t gen) {
  const struct tutti_exec_rank* er = op->er;
  const int n = er->nranks, root = board_root(op, st);
  const size_t bb = op->args.count * op->args.elem_size;
  const size_t out = root >= 0 ? bb : bb * (size_t)n;
  /* Large outputs: streaming stores (tune's `board.stream`). */
  const int stream = out >= er->board_stream_min_bytes;
  char* dst = (char*)op->bufs[st->dst_buf] + st->dst_off;
  /* Peer r + 1 first: the ranks do not all read one slot at once. */
  for (int k = 0; k < n; k++) {
    const int q = (er->rank + k) % n;
    if ((root >= 0 && q != root) || (q == er->rank && !(st->flags & TUTTI_STEP_OWN))) {
      continue;
    }
    const void* src = tutti_board_data(slot_of(er, gen, q));
    char* to = root >= 0 ? dst : dst + (size_t)q * bb;
    if (stream) {
      tutti_copy_stream(to, src, st->bytes);
    } else {
      memcpy(to, src, st->bytes);
    }
  }
}

/* FOLD and GATHER: once every slot holds this round, read them. */
static ncclResult_t read_slots(struct tutti_op* op, const struct tutti_step* st, size_t* done,
                               int* moved, int* step_done) {
  int ready;
  NCCLCHECK(all_posted(op, st, done, &ready));
  if (!ready) {
    return ncclSuccess;
  }
  const uint64_t gen = gen_of(op, st);
  if (st->kind == TUTTI_STEP_BOARD_FOLD) {
    fold(op, st, gen);
  } else {
    gather(op, st, gen);
  }
  op->er->board_finished = gen;
  *moved = 1;
  *step_done = 1;
  return ncclSuccess;
}

ncclResult_t tutti_step_board(struct tutti_op* op, const struct tutti_step* st, size_t* done,
                              int* moved, int* step_done) {
  if (op->er->board.base == NULL || st->bytes > op->er->board.slot_bytes) {
    return tutti_error(ncclInternalError, "%s #%llu on rank %d: no board of %zu bytes to run on",
                       tutti_coll_name(op->args.coll), (unsigned long long)op->seq, op->er->rank,
                       st->bytes);
  }
  return st->kind == TUTTI_STEP_BOARD_POST ? post(op, st, moved, step_done)
                                           : read_slots(op, st, done, moved, step_done);
}
