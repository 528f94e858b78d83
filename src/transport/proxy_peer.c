/* A peer a proxy serves (see proxy.h): its private queues, the executor's
 * side of them, which wakes the thread when it may sleep, and its stand-in
 * doorbell. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "transport/proxy.h"
#include "util/check.h"

/* The executor's side: the fifo's own operations, plus a poke when the
 * thread may be asleep: after a post or a free, and, where the thread
 * polls something that cannot wake it, when a receive finds nothing. The
 * queue counters are stored seq_cst and `sleeping` is loaded seq_cst (and
 * the other way round in the thread), so either the thread sees the new
 * slot or we see it sleeping. */
static struct tutti_proxy_peer* peer_of(struct tutti_conn* c, int recv) {
  size_t off = recv ? offsetof(struct tutti_proxy_peer, recv_end)
                    : offsetof(struct tutti_proxy_peer, send_end);
  return (struct tutti_proxy_peer*)((char*)c - off);
}

static void wake(struct tutti_proxy_peer* p) {
  tutti_proxy_wake(p->px);
}

static void* conn_send_begin(struct tutti_conn* c) {
  return peer_of(c, 0)->fifo_ops->send_begin(c);
}

static void conn_send_end(struct tutti_conn* c, size_t bytes) {
  struct tutti_proxy_peer* p = peer_of(c, 0);
  p->fifo_ops->send_end(c, bytes);
  /* Sent from here, the thread need not wake: a wake-up per message was
   * most of a small call's time (docs/design.md, "The caller's own path"). */
  if (p->direct_send == NULL || !p->direct_send(p)) {
    wake(p);
  }
}

static const void* conn_recv_begin(struct tutti_conn* c, size_t* bytes) {
  struct tutti_proxy_peer* p = peer_of(c, 1);
  const void* got = p->fifo_ops->recv_begin(c, bytes);
  if (got == NULL && p->direct_recv != NULL && p->direct_recv(p)) {
    got = p->fifo_ops->recv_begin(c, bytes);
  }
  if (got == NULL && p->poke_empty) {
    wake(p);
  }
  return got;
}

static void conn_drive(struct tutti_conn* c) {
  struct tutti_proxy_peer* p = peer_of(c, 1);
  if (p->direct_recv != NULL) {
    p->direct_recv(p);
  }
}

static void conn_recv_end(struct tutti_conn* c) {
  struct tutti_proxy_peer* p = peer_of(c, 1);
  p->fifo_ops->recv_end(c);
  /* A thread that receives on its own is woken by its sockets, and by a
   * free only when it said it waits for one (the tail's store above, then
   * this load; the thread stores want_free, then reads the tail). */
  if (p->direct_recv == NULL || __atomic_load_n(&p->want_free, __ATOMIC_SEQ_CST)) {
    wake(p);
  }
}

static const struct tutti_conn_ops proxy_conn_ops = {
    .send_begin = conn_send_begin,
    .send_end = conn_send_end,
    .recv_begin = conn_recv_begin,
    .recv_end = conn_recv_end,
    .drive = conn_drive,
};

ncclResult_t tutti_proxy_peer_init(struct tutti_proxy_peer* p, int rank, size_t buffsize,
                                   size_t extra, int poke_empty) {
  p->rank = rank;
  p->poke_empty = poke_empty;
  tutti_fifo_geometry(buffsize, &p->nslots, &p->slot_bytes);
  const size_t q = tutti_fifo_bytes(p->nslots, p->slot_bytes);
  /* Anonymous pages: zeroed, and only touched once data moves. */
  p->mem = mmap(NULL, 2 * q + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p->mem == MAP_FAILED) {
    p->mem = NULL;
    return tutti_error(ncclSystemError, "cannot map %zu bytes of queues for rank %d: %s",
                       2 * q + extra, rank, strerror(errno));
  }
  p->mem_bytes = 2 * q + extra;
  p->sq = p->mem;
  p->rq = (struct tutti_fifo*)((char*)p->mem + q);
  p->extra = (char*)p->mem + 2 * q;
  tutti_fifo_conn_init(&p->send_end, NULL, p->sq, p->nslots, p->slot_bytes, rank, -1, NULL, NULL);
  tutti_fifo_conn_init(NULL, &p->recv_end, p->rq, p->nslots, p->slot_bytes, -1, rank, NULL, NULL);
  p->fifo_ops = p->send_end.base.ops;
  p->send_end.base.ops = &proxy_conn_ops;
  p->recv_end.base.ops = &proxy_conn_ops;
  return ncclSuccess;
}

void tutti_proxy_peer_free(struct tutti_proxy_peer* p) {
  if (p->mem != NULL) {
    munmap(p->mem, p->mem_bytes);
    p->mem = NULL;
  }
}

int tutti_proxy_peer_sent(struct tutti_proxy_peer* p, uint8_t* done, uint64_t* tail, uint64_t end) {
  uint64_t t = *tail;
  while (t < end && done[t % p->nslots]) {
    done[t % p->nslots] = 0;
    t++;
  }
  if (t == *tail) {
    return 0;
  }
  *tail = t;
  __atomic_store_n(&p->sq->tail, t, __ATOMIC_SEQ_CST);
  tutti_doorbell_ring(p->px->rank_bell);
  return 1;
}

void tutti_proxy_peer_attach(struct tutti_proxy_peer* p, struct tutti_transport_comm* tc,
                             const char* via) {
  p->send_end.base.via = p->recv_end.base.via = via;
  tc->send[p->rank] = &p->send_end.base;
  tc->recv[p->rank] = &p->recv_end.base;
  tc->peer_bells[p->rank] = &p->bell;
  /* Its proxy brings the peer's calls: the rank compares them here. */
  __atomic_store_n(&p->bell.shows_calls, 1, __ATOMIC_RELEASE);
}

void tutti_proxy_peer_detach(struct tutti_proxy_peer* p, struct tutti_transport_comm* tc) {
  if (tc->send[p->rank] == &p->send_end.base) {
    tc->send[p->rank] = NULL;
    tc->recv[p->rank] = NULL;
  }
  if (tc->peer_bells[p->rank] == &p->bell) {
    tc->peer_bells[p->rank] = NULL;
  }
}

void tutti_proxy_peer_lost(struct tutti_proxy_peer* p, int err, const char* over, const char* why) {
  struct tutti_proxy* px = p->px;
  p->gone = 1;
  __atomic_store_n(&p->bell.lost, tutti_lost_make(err, TUTTI_LOST_SELF), __ATOMIC_RELEASE);
  /* Our own bell too, so that local ranks that see us leave can tell why. */
  uint32_t none = 0;
  __atomic_compare_exchange_n(&px->rank_bell->lost, &none, tutti_lost_make(err, p->rank), 0,
                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  WARN("rank %d lost its connection to rank %d (pid %d on host %s)%s%s: %s", px->rank, p->rank,
       (int)px->peers[p->rank].pid, px->peers[p->rank].hostname, over != NULL ? " over " : "",
       over != NULL ? over : "", why);
  tutti_doorbell_ring(px->rank_bell);
}

void tutti_proxy_peer_left(struct tutti_proxy_peer* p, uint32_t reason) {
  if (reason != 0) {
    __atomic_store_n(&p->bell.lost, reason, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&p->bell.departed, 1, __ATOMIC_RELEASE);
  tutti_doorbell_ring(p->px->rank_bell);
}
