/* The single-copy steps (TUTTI_ALGO_PULL): EXPOSE posts, in one queue slot,
 * where a piece of this rank's buffer lies, and ends once the peer has freed
 * that slot; PULL and PULL_REDUCE read the slot, copy or reduce straight
 * from the peer's buffer (the connection's `mem`), then free it; PUSH
 * writes into it instead. The slot held until the copy is done is what
 * keeps the exposing rank from returning, and reusing its buffer, while it
 * is still being read. A rank that fails instead returns early: it first
 * withdraws what it offered (the slot's claim word), and a reader claims
 * the offer for every piece it moves, so that a late peer finds the offer
 * withdrawn instead of reading (or writing) memory the user has freed. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call/agree.h"
#include "exec/step.h"
#include "util/check.h"
#include "util/socket.h"

/* Threads of one process read each other's buffers after a handshake
 * through the shared segment, which each rank maps at its own address:
 * ThreadSanitizer cannot see that synchronization, so it is restated at
 * the one address both sides use, the exposed buffer's. */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
#define TSAN_ACQUIRE(p) __tsan_acquire((void*)(p))
#define TSAN_RELEASE(p) __tsan_release((void*)(p))
#else
#define TSAN_ACQUIRE(p) ((void)(p))
#define TSAN_RELEASE(p) ((void)(p))
#endif

/* Bytes copied per call, so that other lanes keep moving during a long copy. */
#define PULL_COPY_BYTES (1u << 20)
/* Another process's bytes that must be transformed on the way (reduced,
 * scaled) are read into a cache-sized buffer first. */
#define PULL_BOUNCE (256u << 10)

static inline char* buf_at(const struct tutti_op* op, int buf, size_t off) {
  return (char*)op->bufs[buf] + off;
}

static inline uint32_t* claim_word(const void* slot) {
  return (uint32_t*)((char*)(uintptr_t)slot + offsetof(struct tutti_peer_buf, claim));
}

static ncclResult_t expose(struct tutti_op* op, struct tutti_lane_state* l,
                           const struct tutti_step* st, size_t* done, int* moved, int* step_done) {
  struct tutti_conn* sc = op->er->send[st->send_peer];
  if (!tutti_exec_conn_ready(l, sc)) {
    return ncclSuccess;
  }
  if (st->bytes == 0) {
    *step_done = 1;
    return ncclSuccess;
  }
  if (*done == 0) {
    void* slot = sc->ops->send_begin(sc);
    if (slot == NULL) {
      return ncclSuccess;
    }
    struct tutti_peer_buf d = {.addr = (uint64_t)(uintptr_t)buf_at(op, st->src_buf, st->src_off),
                               .bytes = st->bytes,
                               .pid = (int32_t)getpid(),
                               .magic = TUTTI_PEER_BUF_MAGIC,
                               .claim = TUTTI_PEER_BUF_OFFERED};
    memcpy(slot, &d, sizeof d);
    TSAN_RELEASE(d.addr);
    l->offer = claim_word(slot);
    l->offer_peer = st->send_peer;
    sc->ops->send_end(sc, sizeof d);
    *done = 1; /* posted; the peer reads at its pace */
    *moved = 1;
  }
  if (sc->ops->send_idle(sc)) {
    TSAN_ACQUIRE(buf_at(op, st->src_buf, st->src_off));
    l->offer = NULL;
    *done = st->bytes;
    *step_done = 1;
    *moved = 1;
  }
  return ncclSuccess;
}

static ncclResult_t bad_desc(const struct tutti_op* op, const struct tutti_step* st, size_t got,
                             const struct tutti_peer_buf* d) {
  NCCLCHECK(tutti_agree_explain(tutti_exec_bells(op->er), &op->call,
                                st->recv_peer)); /* both calls, when the peer's is known */
  return tutti_error(
      ncclInvalidUsage,
      "%s #%llu on rank %d: rank %d offered %s where %zu bytes of its buffer were "
      "expected: the ranks called different collectives, counts or datatypes",
      tutti_coll_name(op->args.coll), (unsigned long long)op->seq, op->er->rank, st->recv_peer,
      got == sizeof *d && d->magic == TUTTI_PEER_BUF_MAGIC ? "another size" : "data", st->bytes);
}

static ncclResult_t read_failed(const struct tutti_op* op, const struct tutti_step* st,
                                const struct tutti_peer_buf* d, size_t len, int err) {
  return tutti_error(err == ESRCH ? ncclRemoteError : ncclSystemError,
                     "%s #%llu on rank %d: %s %zu bytes of rank %d (pid %d) failed: %s",
                     tutti_coll_name(op->args.coll), (unsigned long long)op->seq, op->er->rank,
                     st->kind == TUTTI_STEP_PUSH ? "writing" : "reading", len, st->recv_peer,
                     (int)d->pid, strerror(err));
}

/* dst = peer' (PULL) or src' OP peer' (PULL_REDUCE) over n elements, where
 * ' is the PreMulSum scaling of user input; `fb` the flags for the peer's
 * operand. dst may be src exactly. */
static void combine(const struct tutti_op* op, const struct tutti_step* st, char* dst,
                    const char* src, const void* peer, size_t n, int fb) {
  const struct tutti_redop* ro = &op->redop;
  if (st->kind == TUTTI_STEP_PULL) {
    tutti_copy(dst, peer, n, ro, fb);
  } else if (st->src_buf == TUTTI_BUF_SEND && ro->kind == TUTTI_RED_PREMULSUM) {
    tutti_copy(dst, src, n, ro, TUTTI_RED_SCALE_B); /* both operands are user input */
    tutti_reduce(dst, dst, peer, n, ro, fb);
  } else {
    tutti_reduce(dst, src, peer, n, ro, fb);
  }
}

/* One piece [off, off + len) of a step reading another process through
 * `rc`. */
static ncclResult_t pull_remote(struct tutti_op* op, const struct tutti_conn* rc,
                                const struct tutti_step* st, const struct tutti_peer_buf* d,
                                size_t off, size_t len, int fb) {
  struct tutti_exec_rank* er = op->er;
  const struct tutti_redop* ro = &op->redop;
  char* dst = buf_at(op, st->dst_buf, st->dst_off + off);
  const int transform = st->kind == TUTTI_STEP_PULL_REDUCE ||
                        (ro->kind == TUTTI_RED_PREMULSUM && (fb & TUTTI_RED_SCALE_B)) ||
                        (ro->kind == TUTTI_RED_SUMPOSTDIV && (fb & TUTTI_RED_FINAL));
  if (!transform) {
    int err = rc->mem->read(d, off, dst, len);
    return err == 0 ? ncclSuccess : read_failed(op, st, d, len, err);
  }
  if (er->pull_bounce == NULL) {
    er->pull_bounce = malloc(PULL_BOUNCE);
    if (er->pull_bounce == NULL) {
      return tutti_error(ncclSystemError, "out of host memory for a %u-byte buffer", PULL_BOUNCE);
    }
  }
  const size_t es = op->args.elem_size;
  const char* src = st->src_buf ? buf_at(op, st->src_buf, st->src_off + off) : NULL;
  for (size_t o = 0; o < len; o += PULL_BOUNCE) {
    const size_t l = len - o < PULL_BOUNCE ? len - o : PULL_BOUNCE;
    int err = rc->mem->read(d, off + o, er->pull_bounce, l);
    if (err != 0) {
      return read_failed(op, st, d, l, err);
    }
    combine(op, st, dst + o, src ? src + o : NULL, er->pull_bounce, l / es, fb);
  }
  return ncclSuccess;
}

/* Moves one piece [off, off + len) of a step between this rank and the
 * offered buffer `d`, which the caller has claimed. */
static ncclResult_t move_piece(struct tutti_op* op, const struct tutti_conn* rc,
                               const struct tutti_step* st, const struct tutti_peer_buf* d,
                               size_t off, size_t len) {
  /* The peer's input is scaled as it is read, as a SEND step would have. */
  const int fb = ((st->flags & TUTTI_STEP_PEER_INPUT) ? TUTTI_RED_SCALE_B : 0) |
                 ((st->flags & TUTTI_STEP_FINAL) ? TUTTI_RED_FINAL : 0);
  const char* local = rc->mem->local(d);
  if (local == NULL) {
    if (st->kind != TUTTI_STEP_PUSH) {
      return pull_remote(op, rc, st, d, off, len, fb);
    }
    /* Plain bytes (broadcast): no scaling to apply. */
    int err = rc->mem->write(d, off, buf_at(op, st->src_buf, st->src_off + off), len);
    return err == 0 ? ncclSuccess : read_failed(op, st, d, len, err);
  }
  TSAN_ACQUIRE(local);
  if (st->kind == TUTTI_STEP_PUSH) {
    memcpy((char*)(uintptr_t)local + off, buf_at(op, st->src_buf, st->src_off + off), len);
  } else {
    combine(op, st, buf_at(op, st->dst_buf, st->dst_off + off),
            st->src_buf ? buf_at(op, st->src_buf, st->src_off + off) : NULL, local + off,
            len / op->args.elem_size, fb);
  }
  TSAN_RELEASE(local);
  return ncclSuccess;
}

/* The peer failed before this rank came to its offer, and took it back. */
static ncclResult_t withdrawn(const struct tutti_op* op, const struct tutti_step* st) {
  ncclResult_t res;
  int first;
  if (tutti_agree_peer_failed(tutti_exec_bells(op->er), 0, &res, &first) >= 0) {
    return res; /* its cause, as it told it */
  }
  return tutti_error(ncclRemoteError,
                     "%s #%llu on rank %d: rank %d stopped this call and took back the buffer "
                     "it offered",
                     tutti_coll_name(op->args.coll), (unsigned long long)op->seq, op->er->rank,
                     st->recv_peer);
}

static ncclResult_t pull(struct tutti_op* op, const struct tutti_lane_state* l,
                         const struct tutti_step* st, size_t* done, int* moved, int* step_done) {
  struct tutti_conn* rc = op->er->recv[st->recv_peer];
  if (!tutti_exec_conn_ready(l, rc)) {
    return ncclSuccess;
  }
  if (st->bytes == 0) {
    *step_done = 1;
    return ncclSuccess;
  }
  if (rc->mem == NULL) {
    return tutti_error(
        ncclInternalError, "%s #%llu on rank %d: no direct access to rank %d's memory",
        tutti_coll_name(op->args.coll), (unsigned long long)op->seq, op->er->rank, st->recv_peer);
  }
  size_t got = 0;
  const void* slot = rc->ops->recv_begin(rc, &got);
  if (slot == NULL) {
    return ncclSuccess;
  }
  struct tutti_peer_buf d;
  memset(&d, 0, sizeof d);
  memcpy(&d, slot, got < sizeof d ? got : sizeof d);
  if (got != sizeof d || d.magic != TUTTI_PEER_BUF_MAGIC || d.bytes != st->bytes) {
    return bad_desc(op, st, got, &d);
  }
  const size_t off = *done;
  const size_t len = st->bytes - off < PULL_COPY_BYTES ? st->bytes - off : PULL_COPY_BYTES;
  uint32_t* claim = claim_word(slot);
  uint32_t offered = TUTTI_PEER_BUF_OFFERED;
  if (!__atomic_compare_exchange_n(claim, &offered, (uint32_t)getpid(), 0, __ATOMIC_SEQ_CST,
                                   __ATOMIC_SEQ_CST)) {
    return withdrawn(op, st);
  }
  const ncclResult_t res = move_piece(op, rc, st, &d, off, len);
  __atomic_store_n(claim, TUTTI_PEER_BUF_OFFERED, __ATOMIC_RELEASE);
  NCCLCHECK(res);
  *done += len;
  *moved = 1;
  if (*done == st->bytes) {
    rc->ops->recv_end(rc);
    *step_done = 1;
  }
  return ncclSuccess;
}

ncclResult_t tutti_step_pull(struct tutti_op* op, struct tutti_lane_state* l,
                             const struct tutti_step* st, size_t* done, int* moved,
                             int* step_done) {
  return st->kind == TUTTI_STEP_EXPOSE ? expose(op, l, st, done, moved, step_done)
                                       : pull(op, l, st, done, moved, step_done);
}

/* Marks one offer withdrawn; a reader moving a piece of it holds the claim
 * (its pid) for that piece only, so this waits at most one piece, unless
 * the reader is gone or stopped (then TUTTI_TIMEOUT bounds it). */
static void withdraw_offer(const struct tutti_exec_rank* er, uint32_t* claim, int peer) {
  double t0 = 0;
  for (;;) {
    uint32_t c = TUTTI_PEER_BUF_OFFERED;
    if (__atomic_compare_exchange_n(claim, &c, TUTTI_PEER_BUF_WITHDRAWN, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST) ||
        c == TUTTI_PEER_BUF_WITHDRAWN) {
      return;
    }
    if (kill((pid_t)c, 0) != 0 && errno == ESRCH) {
      return; /* the reader's process is gone: it moves nothing more */
    }
    const double t = tutti_socket_now();
    if (t0 == 0) {
      t0 = t;
    } else if (t - t0 > er->timeout_s) {
      WARN(
          "rank %d: rank %d (pid %u) has been moving a piece of this rank's buffer for %.0f s "
          "(TUTTI_TIMEOUT); returning without waiting for it",
          er->rank, peer, c, t - t0);
      return;
    }
    sched_yield();
  }
}

void tutti_step_withdraw(struct tutti_op* op) {
  for (int k = 0; k < op->sched.nlanes; k++) {
    struct tutti_lane_state* l = &op->lanes[k];
    if (l->offer != NULL) {
      withdraw_offer(op->er, l->offer, l->offer_peer);
      l->offer = NULL;
    }
  }
}
