/* The calling thread's own path over TCP (docs/design.md, "The caller's own
 * path"): a small message goes from the caller's queue slot to the socket,
 * and from the socket to the receive slot, on the caller's thread, when
 * nothing else of that peer is in flight; everything else stays with the
 * proxy thread. The records are tcp_wire.c's, under the peer's lock, so the
 * order on the wire is the same whoever sends. */
#include <pthread.h>

#include "transport/tcp_proxy.h"

/* Sends what is due (control records, and the newest slot when every one
 * before it is out and it is small), the lock held: -1 when it left it to
 * the proxy (behind others, or large: its pipeline sends it, and the post
 * poked it), 0 when all went, 1 when some is left half sent. */
static int send_due(struct tutti_tcp_peer* p, uint64_t limit) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)p->base.px;
  const uint64_t head = __atomic_load_n(&p->base.sq->head, __ATOMIC_SEQ_CST);
  if (head > p->s_tail + 1 ||
      (head == p->s_tail + 1 && p->base.sq->sizes[(head - 1) % p->base.nslots] > limit)) {
    return -1;
  }
  p->s_head = head;
  int left = 0;
  for (int s = 0; s < p->nsocks; s++) {
    struct tutti_tcp_sock* k = &p->socks[s];
    while (tutti_tcp_want_out(p, k, 0) && tutti_tcp_sock_send(px, p, k, 0)) {
    }
    left |= tutti_tcp_want_out(p, k, 0);
  }
  return left;
}

/* Receives small records that have come; 1 when any did. The lock is held. */
static int recv_due(struct tutti_tcp_peer* p, uint64_t limit) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)p->base.px;
  int moved = 0;
  p->r_tail = __atomic_load_n(&p->base.rq->tail, __ATOMIC_SEQ_CST);
  for (int s = 0; s < p->nsocks; s++) {
    struct tutti_tcp_sock* k = &p->socks[s];
    /* A large record is the proxy's: it receives the next slot while the
     * rank works on this one. */
    while (tutti_tcp_want_in(p, k, 0) && !(tutti_tcp_sock_in_data(k) && k->rsize > limit) &&
           tutti_tcp_sock_recv(px, p, k, 0)) {
      moved = 1;
    }
  }
  return moved;
}

static int direct_send(struct tutti_proxy_peer* base) {
  struct tutti_tcp_peer* p = (struct tutti_tcp_peer*)base;
  const uint64_t limit = p->direct_bytes;
  /* A proxy that holds the lock moves this peer now and sees the post. */
  if (limit == 0 || pthread_mutex_trylock(&p->lock) != 0) {
    return 0;
  }
  const int r = send_due(p, limit);
  pthread_mutex_unlock(&p->lock);
  return r == 0;
}

/* Whether socket k's current record is the proxy's to receive. */
static int for_proxy(const struct tutti_tcp_peer* p) {
  for (int s = 0; s < p->nsocks; s++) {
    const struct tutti_tcp_sock* k = &p->socks[s];
    if (!k->dead && tutti_tcp_sock_in_data(k) && k->rsize > p->direct_bytes) {
      return 1;
    }
  }
  return 0;
}

static int direct_recv(struct tutti_proxy_peer* base) {
  struct tutti_tcp_peer* p = (struct tutti_tcp_peer*)base;
  const uint64_t limit = p->direct_bytes;
  /* The caller reads this peer's sockets while it spins and yields; once
   * it announced that it may sleep on its doorbell (a last pass follows),
   * the proxy reads again, and rings the doorbell when something comes.
   * The flag is the proxy's to read under the lock, but may be cleared
   * without it: stored before the proxy's `sleeping` is loaded (in the
   * wake), as the proxy stores that before it builds its poll set. */
  const int armed = __atomic_load_n(&base->px->rank_bell->sleeping, __ATOMIC_SEQ_CST) != 0;
  if (limit == 0) {
    return 0;
  }
  if (pthread_mutex_trylock(&p->lock) != 0) {
    if (armed && __atomic_load_n(&p->caller_reads, __ATOMIC_SEQ_CST)) {
      __atomic_store_n(&p->caller_reads, 0, __ATOMIC_SEQ_CST);
      tutti_proxy_wake(base->px);
    }
    return 0;
  }
  /* The peer may wait for this rank's call record (a call that sends it
   * nothing) before it sends what this rank waits for. */
  const int left = send_due(p, limit);
  const int moved = recv_due(p, limit);
  /* A large record next: the proxy's, pipelined. */
  const uint32_t was = __atomic_load_n(&p->caller_reads, __ATOMIC_SEQ_CST);
  const uint32_t now = !armed && !for_proxy(p);
  p->caller_seen++;
  if (now != was) {
    __atomic_store_n(&p->caller_reads, now, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&p->lock);
  if (left == 1 || (was && !now)) {
    tutti_proxy_wake(base->px); /* POLLOUT for a record half sent; POLLIN */
  }
  return moved;
}

void tutti_tcp_direct_reclaim(struct tutti_tcp_peer* p) {
  if (__atomic_load_n(&p->caller_reads, __ATOMIC_SEQ_CST) && p->caller_seen == p->caller_checked) {
    __atomic_store_n(&p->caller_reads, 0, __ATOMIC_SEQ_CST);
  }
  p->caller_checked = p->caller_seen;
}

void tutti_tcp_direct_install(struct tutti_tcp_peer* p) {
  p->base.direct_send = direct_send;
  p->base.direct_recv = direct_recv;
}
