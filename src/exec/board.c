/* The board steps (TUTTI_ALGO_BOARD; struct tutti_board). Generation g of
 * the board's collectives uses slot set g & 1. POST writes this rank's
 * contribution and then, with a release store, the generation number into
 * its slot's header; FOLD waits until every slot's header holds g and
 * reduces the slots in rank order into the output.
 *
 * Why two slot sets suffice, with no acknowledgement: a rank posts
 * generation g + 2 only after finishing its fold of g + 1, which needed
 * every peer's post of g + 1, which every peer made only after finishing
 * its own fold of g. So no slot is rewritten while anyone still reads it.
 * Inside one group a rank may hold several board operations: POST of g
 * waits (without blocking the executor) until this rank has finished g - 1. */
#include <string.h>

#include "exec/step.h"
#include "util/check.h"

struct board_header {
  uint64_t gen;   /* the generation the slot holds (0: none yet) */
  uint64_t bytes; /* its size, to catch ranks that called different counts */
};
_Static_assert(sizeof(struct board_header) <= TUTTI_BOARD_HEADER, "the header fits");

static inline struct board_header* slot_of(const struct tutti_exec_rank* er, uint64_t gen,
                                           int rank) {
  const size_t stride = TUTTI_BOARD_HEADER + er->board.slot_bytes;
  return (struct board_header*)(er->board.base +
                                ((size_t)(gen & 1) * (size_t)er->nranks + (size_t)rank) * stride);
}

static inline void* data_of(struct board_header* h) {
  return (char*)h + TUTTI_BOARD_HEADER;
}

int tutti_board_missing(const struct tutti_op* op, const struct tutti_step* st, int from) {
  const struct tutti_exec_rank* er = op->er;
  if (st->kind != TUTTI_STEP_BOARD_FOLD || er->board.base == NULL) {
    return -1;
  }
  for (int p = from < 0 ? 0 : from; p < er->nranks; p++) {
    if (__atomic_load_n(&slot_of(er, op->board_gen, p)->gen, __ATOMIC_ACQUIRE) != op->board_gen) {
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
  if (er->board_finished + 1 < op->board_gen) {
    return ncclSuccess; /* an earlier board operation of this group still reads set g & 1 */
  }
  struct board_header* h = slot_of(er, op->board_gen, er->rank);
  const char* src = (const char*)op->bufs[st->src_buf] + st->src_off;
  tutti_copy(data_of(h), src, st->bytes / op->args.elem_size, &op->redop,
             st->src_buf == TUTTI_BUF_SEND ? TUTTI_RED_SCALE_B : 0);
  h->bytes = st->bytes;
  /* Sequentially consistent, then the doorbells' loads of `sleeping`: a
   * peer about to sleep either sees this generation or is woken. */
  __atomic_store_n(&h->gen, op->board_gen, __ATOMIC_SEQ_CST);
  for (int p = 0; p < er->nranks; p++) {
    if (p != er->rank && er->peer_bells != NULL) {
      tutti_doorbell_ring(er->peer_bells[p]);
    }
  }
  *moved = 1;
  *step_done = 1;
  return ncclSuccess;
}

static ncclResult_t fold(struct tutti_op* op, const struct tutti_step* st, size_t* done, int* moved,
                         int* step_done) {
  struct tutti_exec_rank* er = op->er;
  const int n = er->nranks;
  /* *done: the peers before it have been seen posted. */
  int p = tutti_board_missing(op, st, (int)*done);
  if (p >= 0) {
    *done = (size_t)p;
    return ncclSuccess;
  }
  for (int q = 0; q < n; q++) {
    const uint64_t got = slot_of(er, op->board_gen, q)->bytes;
    if (got != st->bytes) {
      return tutti_error(ncclInvalidUsage,
                         "%s #%llu on rank %d: rank %d contributed %llu bytes where %zu were "
                         "expected: the ranks called different collectives, counts or datatypes",
                         tutti_coll_name(op->args.coll), (unsigned long long)op->seq, er->rank, q,
                         (unsigned long long)got, st->bytes);
    }
  }
  char* dst = (char*)op->bufs[st->dst_buf] + st->dst_off;
  const size_t count = st->bytes / op->args.elem_size;
  const int final = (st->flags & TUTTI_STEP_FINAL) ? TUTTI_RED_FINAL : 0;
  if (n == 1) {
    tutti_copy(dst, data_of(slot_of(er, op->board_gen, 0)), count, &op->redop, final);
  } else {
    const void* acc = data_of(slot_of(er, op->board_gen, 0));
    for (int q = 1; q < n; q++) {
      tutti_reduce(dst, acc, data_of(slot_of(er, op->board_gen, q)), count, &op->redop,
                   q == n - 1 ? final : 0);
      acc = dst;
    }
  }
  er->board_finished = op->board_gen;
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
                                           : fold(op, st, done, moved, step_done);
}
