/* The TCP transport's proxy (see tcp_proxy.h; the thread's loop is
 * transport/proxy.c's): moves slots between private queues and
 * non-blocking sockets (tcp_wire.c's records), sleeps in poll(), reports
 * broken and silent connections. It touches a peer's sockets only with
 * the peer's lock held: the calling thread may drive them too
 * (tcp_direct.c). */
#include "transport/tcp_proxy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/check.h"
#include "util/seal.h"
#include "util/socket.h"

#define IDLE_POLL_MS 1000 /* a safety net only: pokes and sockets end a sleep sooner */
#define BURST 64          /* records one socket may move before the others get a turn */

/* One pass over a peer's sockets, its lock held; non-zero when anything
 * moved. */
static int pump_peer(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p, int leaving) {
  int moved = 0;
  p->s_head = __atomic_load_n(&p->base.sq->head, __ATOMIC_SEQ_CST);
  p->r_tail = __atomic_load_n(&p->base.rq->tail, __ATOMIC_SEQ_CST);
  for (int s = 0; s < p->nsocks; s++) {
    struct tutti_tcp_sock* k = &p->socks[s];
    for (int b = 0; b < BURST && k->ready_out && tutti_tcp_want_out(p, k, leaving); b++) {
      if (!tutti_tcp_sock_send(px, p, k, leaving)) {
        break;
      }
      moved = 1;
    }
    for (int b = 0; b < BURST && k->ready_in && tutti_tcp_want_in(p, k, leaving); b++) {
      if (!tutti_tcp_sock_recv(px, p, k, leaving)) {
        break;
      }
      moved = 1;
    }
    /* A failed send, once everything readable was read. */
    if (k->send_err != 0 && !k->dead && !(k->ready_in && tutti_tcp_want_in(p, k, leaving))) {
      tutti_tcp_sock_fail(p, k, k->send_err, leaving);
    }
  }
  return moved;
}

static int pump(struct tutti_proxy* base, int leaving) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  int moved = 0;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    pthread_mutex_lock(&p->lock);
    moved |= pump_peer(px, p, leaving);
    pthread_mutex_unlock(&p->lock);
  }
  return moved;
}

/* Whether the rank posted or freed a slot of `p` since the last pass, or
 * owes it a control record (its lock held). */
static int news(const struct tutti_tcp_peer* p) {
  if (__atomic_load_n(&p->base.sq->head, __ATOMIC_SEQ_CST) != p->s_head ||
      __atomic_load_n(&p->base.rq->tail, __ATOMIC_SEQ_CST) != p->r_tail) {
    return 1;
  }
  for (int s = 0; s < p->nsocks; s++) {
    if (!p->socks[s].dead && tutti_tcp_ctl_due(p, &p->socks[s])) {
      return 1;
    }
  }
  return 0;
}

/* Leaving: done once every socket has sent its goodbye (the kernel delivers
 * it and the FIN after close), or is dead. */
static int flushed(const struct tutti_proxy* base) {
  const struct tutti_tcp_proxy* px = (const struct tutti_tcp_proxy*)base;
  int done = 1;
  for (int i = 0; i < px->nserved && done; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    pthread_mutex_lock(&p->lock);
    for (int s = 0; s < p->nsocks; s++) {
      done &= p->socks[s].dead || p->socks[s].bye_sent == 2;
    }
    pthread_mutex_unlock(&p->lock);
  }
  return done;
}

/* Reads what has arrived: closing a socket with unread data would reset
 * the connection, and could drop our goodbye before it reaches the peer. */
static void drain(struct tutti_proxy* base) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    pthread_mutex_lock(&p->lock);
    for (int s = 0; s < p->nsocks; s++) {
      while (!p->socks[s].dead &&
             tutti_seal_recv(p->socks[s].fd, px->discard, TUTTI_TCP_DISCARD) > 0) {
      }
    }
    pthread_mutex_unlock(&p->lock);
  }
}

/* Adds p's sockets with I/O wanted to the poll set (its lock held); 1 when
 * the poll must not wait: news, or bytes read ahead that poll cannot see. */
static int build_poll(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p, int leaving, int* n) {
  /* A socket whose next slot is not free waits for the rank: say so before
   * looking at the tail once more (news), so that the rank's free pokes. */
  uint32_t blocked = 0;
  for (int s = 0; s < p->nsocks; s++) {
    const struct tutti_tcp_sock* k = &p->socks[s];
    blocked |= !k->dead && !k->bye_got && !tutti_tcp_want_in(p, k, leaving);
  }
  __atomic_store_n(&p->base.want_free, blocked, __ATOMIC_SEQ_CST);
  int now = news(p);
  for (int s = 0; s < p->nsocks; s++) {
    struct tutti_tcp_sock* k = &p->socks[s];
    const int in = tutti_tcp_want_in(p, k, leaving) &&
                   (leaving || !__atomic_load_n(&p->caller_reads, __ATOMIC_SEQ_CST));
    short ev = (short)((in ? POLLIN : 0) | (tutti_tcp_want_out(p, k, leaving) ? POLLOUT : 0));
    /* With nothing wanted, poll still reports a hang-up; once seen, skip
     * the socket until I/O is wanted again (which then reveals it). */
    if (k->dead || (ev == 0 && k->hup)) {
      continue;
    }
    if (in && tutti_tcp_sock_pending(k)) { /* a record half read: poll would not wake for it */
      k->ready_in = 1;
      now = 1;
    }
    px->pfds[*n] = (struct pollfd){.fd = k->fd, .events = ev};
    px->pfd_sock[*n] = k;
    px->pfd_peer[*n] = p;
    ++*n;
  }
  return now;
}

/* The heartbeat (util/socket.h): a peer whose host stopped acknowledging
 * is lost, whether or not this rank waits for it right now. */
static void check_alive(struct tutti_tcp_proxy* px, int leaving) {
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    pthread_mutex_lock(&p->lock);
    for (int s = 0; s < p->nsocks && !p->base.gone; s++) {
      struct tutti_tcp_sock* k = &p->socks[s];
      if (!k->dead && p->byes == 0 && tutti_socket_unanswered(k->fd)) {
        shutdown(k->fd, SHUT_RDWR);
        tutti_tcp_sock_fail(p, k, ETIMEDOUT, leaving);
      }
    }
    pthread_mutex_unlock(&p->lock);
  }
}

ncclResult_t tutti_tcp_peer_init(struct tutti_tcp_peer* p, int rank, size_t buffsize, int nsocks,
                                 const int* fds) {
  memset(p, 0, sizeof *p);
  p->base.rank = rank;
  p->socks = calloc((size_t)nsocks, sizeof *p->socks);
  unsigned char* stage = malloc((size_t)nsocks * TUTTI_TCP_STAGE);
  if (p->socks == NULL || stage == NULL) {
    for (int s = 0; s < nsocks; s++) {
      tutti_seal_close(fds[s]);
    }
    free(p->socks);
    free(stage);
    p->socks = NULL;
    return tutti_error(ncclSystemError, "out of host memory for the sockets of rank %d", rank);
  }
  pthread_mutex_init(&p->lock, NULL);
  p->lock_made = 1;
  p->nsocks = nsocks;
  for (int s = 0; s < nsocks; s++) {
    struct tutti_tcp_sock* k = &p->socks[s];
    k->fd = fds[s];
    k->snext = k->rnext = (uint64_t)s;
    k->ready_in = k->ready_out = 1; /* optimistic: the first try tells */
    k->stage = stage + (size_t)s * TUTTI_TCP_STAGE;
  }
  /* The thread polls the sockets: an arrival wakes it, no receive must. */
  NCCLCHECK(tutti_proxy_peer_init(&p->base, rank, buffsize, 0, 0));
  tutti_tcp_direct_install(p);
  return ncclSuccess;
}

void tutti_tcp_peer_free(struct tutti_tcp_peer* p) {
  for (int s = 0; s < p->nsocks; s++) {
    tutti_seal_close(p->socks[s].fd);
  }
  if (p->socks != NULL && p->nsocks > 0) {
    free(p->socks[0].stage);
  }
  free(p->socks);
  p->socks = NULL;
  p->nsocks = 0;
  if (p->lock_made) {
    pthread_mutex_destroy(&p->lock);
    p->lock_made = 0;
  }
  tutti_proxy_peer_free(&p->base);
}

/* The heartbeat's turn: read it every check_ms; and take back the reading
 * of peers whose caller left. */
static void tick(struct tutti_proxy* base, int leaving, double now) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  if (now >= px->next_check) {
    if (tutti_socket_heartbeat_s() > 0) {
      check_alive(px, leaving);
    }
    for (int i = 0; i < px->nserved; i++) {
      pthread_mutex_lock(&px->served[i]->lock);
      tutti_tcp_direct_reclaim(px->served[i]);
      pthread_mutex_unlock(&px->served[i]->lock);
    }
    px->next_check = tutti_socket_now() + px->check_ms * 1e-3;
  }
}

/* Sleeps in poll() on the eventfd and every socket with I/O wanted, at
 * most until the next heartbeat check; not at all when the rank posted or
 * freed a slot meanwhile (or is stopping us), and then only learns what
 * the sockets are ready for. The set is built under each peer's lock,
 * after `sleeping` was announced: a caller that leaves work for the
 * thread after that sees the announcement and pokes (tcp_direct.c). */
static int idle(struct tutti_proxy* base, int leaving, double idle_s) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  (void)idle_s;
  int timeout = px->check_ms;
  if (!leaving && __atomic_load_n(&base->stop, __ATOMIC_SEQ_CST)) {
    timeout = 0;
  }
  int n = 0;
  px->pfds[n] = (struct pollfd){.fd = px->base.evfd, .events = POLLIN};
  px->pfd_sock[n] = NULL;
  px->pfd_peer[n++] = NULL;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    pthread_mutex_lock(&p->lock);
    if (build_poll(px, p, leaving, &n)) {
      timeout = 0;
    }
    pthread_mutex_unlock(&p->lock);
  }
  const int ready = poll(px->pfds, (nfds_t)n, timeout);
  for (int i = 0; i < n && ready > 0; i++) {
    const short re = px->pfds[i].revents;
    struct tutti_tcp_sock* k = px->pfd_sock[i];
    if (re == 0) {
      continue;
    }
    if (k == NULL) {
      uint64_t v;
      ssize_t r = read(base->evfd, &v, sizeof v);
      (void)r;
      continue;
    }
    pthread_mutex_lock(&px->pfd_peer[i]->lock);
    k->ready_in |= (re & POLLIN) != 0;
    k->ready_out |= (re & POLLOUT) != 0;
    if (re & (POLLERR | POLLHUP)) {
      k->hup = 1;
      /* Let the I/O that is wanted meet the error and report it. */
      k->ready_in |= (px->pfds[i].events & POLLIN) != 0;
      k->ready_out |= (px->pfds[i].events & POLLOUT) != 0;
    }
    pthread_mutex_unlock(&px->pfd_peer[i]->lock);
  }
  return 0;
}

/* The proxy's own parts of transport/proxy.c's loop. */
static const struct tutti_proxy_ops tcp_proxy_ops = {
    .what = "TCP",
    .thread = "tutti-proxy",
    .spin_s = 0,
    .pump = pump,
    .flushed = flushed,
    .tick = tick,
    .idle = idle,
    .finish = drain,
};

ncclResult_t tutti_tcp_proxy_start(struct tutti_tcp_proxy* px) {
  int nsocks = 0;
  for (int i = 0; i < px->nserved; i++) {
    nsocks += px->served[i]->nsocks;
  }
  const int hb_ms = tutti_socket_heartbeat_s() * 1000;
  px->check_ms = hb_ms > 0 && hb_ms / 4 < IDLE_POLL_MS ? hb_ms / 4 : IDLE_POLL_MS;
  px->next_check = 0; /* the first pass checks */
  px->base.ops = &tcp_proxy_ops;
  px->pfds = calloc((size_t)nsocks + 1, sizeof *px->pfds);
  px->pfd_sock = calloc((size_t)nsocks + 1, sizeof *px->pfd_sock);
  px->pfd_peer = calloc((size_t)nsocks + 1, sizeof *px->pfd_peer);
  px->discard = malloc(TUTTI_TCP_DISCARD);
  if (px->pfds == NULL || px->pfd_sock == NULL || px->pfd_peer == NULL || px->discard == NULL) {
    return tutti_error(ncclSystemError, "rank %d: cannot prepare the TCP proxy thread: %s",
                       px->base.rank, "out of host memory");
  }
  return tutti_proxy_start(&px->base);
}

void tutti_tcp_proxy_stop(struct tutti_tcp_proxy* px, int abort) {
  tutti_proxy_stop(&px->base, abort);
  free(px->pfds);
  free(px->pfd_sock);
  free(px->pfd_peer);
  free(px->discard);
  px->pfds = NULL;
  px->pfd_sock = NULL;
  px->pfd_peer = NULL;
  px->discard = NULL;
}
