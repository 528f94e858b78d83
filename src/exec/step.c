/* The data movement of each step kind, one piece at a time. A piece is at
 * most one slot; both ends cut a step into the same pieces because they
 * share the piece size and the step sizes. */
#include <string.h>

#include "call/agree.h"
#include "exec/step.h"
#include "util/check.h"
#include "util/param.h"

/* Local copies and reductions are cut too, so other lanes keep moving. */
#define TUTTI_LOCAL_PIECE (1u << 20)

static inline char* buf_at(const struct tutti_op* op, int buf, size_t off) {
  return (char*)op->bufs[buf] + off;
}

static inline int src_flags(const struct tutti_step* st) {
  return (st->src_buf == TUTTI_BUF_SEND ? TUTTI_RED_SCALE_B : 0) |
         ((st->flags & TUTTI_STEP_FINAL) ? TUTTI_RED_FINAL : 0);
}

static ncclResult_t size_mismatch(const struct tutti_op* op, const struct tutti_step* st,
                                  size_t got, size_t want) {
  NCCLCHECK(tutti_agree_explain(tutti_exec_bells(op->er), &op->call,
                                st->recv_peer)); /* both calls, when the peer's is known */
  return tutti_error(ncclInvalidUsage,
                     "%s #%llu on rank %d: rank %d sent a piece of %zu bytes where %zu were "
                     "expected: the ranks called different collectives, counts or datatypes",
                     tutti_coll_name(op->args.coll), (unsigned long long)op->seq, op->er->rank,
                     st->recv_peer, got, want);
}

static void local_piece(const struct tutti_op* op, const struct tutti_step* st, size_t off,
                        size_t len) {
  const size_t es = op->args.elem_size;
  char* dst = buf_at(op, st->dst_buf, st->dst_off + off);
  const char* src = buf_at(op, st->src_buf, st->src_off + off);
  if (st->kind == TUTTI_STEP_COPY) {
    tutti_copy(dst, src, len / es, &op->redop, src_flags(st));
  } else {
    tutti_reduce(dst, dst, src, len / es, &op->redop, src_flags(st));
  }
}

/* Out-of-place outputs of er->stream_min_bytes (tune's `stream`) and more
 * are written with streaming stores: no step of the operation read those
 * lines, and a plain store would first read each one. */

static int stream_output(const struct tutti_op* op, const struct tutti_step* st) {
  const struct tutti_coll_args* a = &op->args;
  size_t out = a->count * a->elem_size;
  if (a->coll == TUTTI_COLL_ALLGATHER) {
    out *= (size_t)a->nranks;
  }
  const size_t min = op->er->stream_min_bytes;
  return st->dst_buf == TUTTI_BUF_RECV && op->bufs[TUTTI_BUF_RECV] != op->bufs[TUTTI_BUF_SEND] &&
         min > 0 && out >= min && !(st->flags & TUTTI_STEP_KEEP);
}

/* RECV_REDUCE_COPY(_SEND) with the accumulator (src) on the left, unless src
 * is user input scaled as read: a PreMulSum sum, whose operands commute. */
static inline int acc_left(const struct tutti_step* st, const struct tutti_redop* ro) {
  return (st->flags & TUTTI_STEP_ACC_LEFT) &&
         !(ro->kind == TUTTI_RED_PREMULSUM && st->src_buf == TUTTI_BUF_SEND);
}

/* Its flags: the received operand (now on the right) is never scaled. */
static inline int rrc_flags(const struct tutti_step* st, const struct tutti_redop* ro) {
  return acc_left(st, ro) ? src_flags(st) & ~TUTTI_RED_SCALE_B : src_flags(st);
}

/* One piece of a step that touches connections; `in` / `out` are the slots. */
static void conn_piece(const struct tutti_op* op, const struct tutti_step* st, size_t off,
                       size_t len, const void* in, void* out) {
  const size_t n = len / op->args.elem_size;
  const struct tutti_redop* ro = &op->redop;
  char* dst = st->dst_buf ? buf_at(op, st->dst_buf, st->dst_off + off) : NULL;
  const char* src = st->src_buf ? buf_at(op, st->src_buf, st->src_off + off) : NULL;
  const int final = (st->flags & TUTTI_STEP_FINAL) ? TUTTI_RED_FINAL : 0;
  const int to_output = stream_output(op, st);
  /* A final division changes the values: only plain copies stream. */
  const int stream = to_output && !(final && ro->kind == TUTTI_RED_SUMPOSTDIV);
  switch (st->kind) {
    case TUTTI_STEP_SEND:
      tutti_copy(out, src, n, ro, src_flags(st) & ~TUTTI_RED_FINAL);
      break;
    case TUTTI_STEP_RECV:
      if (stream) {
        tutti_copy_stream(dst, in, len);
      } else {
        tutti_copy(dst, in, n, ro, final);
      }
      break;
    case TUTTI_STEP_RECV_REDUCE_SEND:
      tutti_reduce(out, in, src, n, ro, src_flags(st) & ~TUTTI_RED_FINAL);
      break;
    case TUTTI_STEP_RECV_REDUCE_COPY:
      if (acc_left(st, ro)) {
        tutti_reduce(dst, src, in, n, ro, rrc_flags(st, ro));
      } else {
        tutti_reduce(dst, in, src, n, ro, src_flags(st));
      }
      break;
    case TUTTI_STEP_RECV_REDUCE_COPY_SEND:
      if (acc_left(st, ro)) {
        const void* t = in;
        in = src;
        src = t;
      }
      if (to_output) {
        tutti_reduce(out, in, src, n, ro, rrc_flags(st, ro));
        tutti_copy_stream(dst, out, len);
      } else {
        tutti_reduce(dst, in, src, n, ro, rrc_flags(st, ro));
        memcpy(out, dst, len);
      }
      break;
    case TUTTI_STEP_RECV_COPY_SEND:
      if (stream) {
        tutti_copy_stream(dst, in, len);
      } else {
        memcpy(dst, in, len);
      }
      memcpy(out, in, len);
      break;
    default:
      break;
  }
}

ncclResult_t tutti_step_progress(struct tutti_op* op, struct tutti_lane_state* l,
                                 const struct tutti_step* st, size_t* done, int* moved,
                                 int* step_done) {
  struct tutti_exec_rank* er = op->er;
  if (st->kind == TUTTI_STEP_EXPOSE || st->kind == TUTTI_STEP_PULL ||
      st->kind == TUTTI_STEP_PULL_REDUCE || st->kind == TUTTI_STEP_PUSH) {
    return tutti_step_pull(op, l, st, done, moved, step_done);
  }
  if (st->kind == TUTTI_STEP_BOARD_POST || st->kind == TUTTI_STEP_BOARD_FOLD ||
      st->kind == TUTTI_STEP_BOARD_GATHER) {
    return tutti_step_board(op, st, done, moved, step_done);
  }
  if (st->kind == TUTTI_STEP_COPY || st->kind == TUTTI_STEP_REDUCE) {
    /* One bounded piece per call keeps a huge local copy from starving other lanes. */
    if (*done < st->bytes) {
      size_t len = st->bytes - *done;
      len = len > TUTTI_LOCAL_PIECE ? TUTTI_LOCAL_PIECE : len;
      local_piece(op, st, *done, len);
      *done += len;
      *moved = 1;
    }
    *step_done = *done == st->bytes;
    return ncclSuccess;
  }
  struct tutti_conn* sc = st->send_peer >= 0 ? er->send[st->send_peer] : NULL;
  struct tutti_conn* rc = st->recv_peer >= 0 ? er->recv[st->recv_peer] : NULL;
  /* Even an empty step waits for its turn on the connections: finishing the
   * lane early would hand a connection on past a lane that still holds it. */
  if ((sc != NULL && !tutti_exec_conn_ready(l, sc)) ||
      (rc != NULL && !tutti_exec_conn_ready(l, rc))) {
    return ncclSuccess;
  }
  if (st->bytes == 0) {
    *step_done = 1;
    return ncclSuccess;
  }
  while (*done < st->bytes) {
    size_t len = st->bytes - *done;
    if (len > er->piece_bytes) {
      len = er->piece_bytes;
    }
    const void* in = NULL;
    void* out = NULL;
    if (rc != NULL) {
      size_t got = 0;
      in = rc->ops->recv_begin(rc, &got);
      if (in == NULL) {
        break;
      }
      if (got != len) {
        return size_mismatch(op, st, got, len);
      }
    }
    if (sc != NULL) {
      out = sc->ops->send_begin(sc);
      if (out == NULL) {
        break;
      }
    }
    conn_piece(op, st, *done, len, in, out);
    if (sc != NULL) {
      sc->ops->send_end(sc, len);
    }
    if (rc != NULL) {
      rc->ops->recv_end(rc);
    }
    *done += len;
    *moved = 1;
  }
  *step_done = *done == st->bytes;
  return ncclSuccess;
}
