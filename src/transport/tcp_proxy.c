/* The TCP transport's proxy (see tcp_proxy.h; the thread's loop is
 * transport/proxy.c's): moves slots between private queues and
 * non-blocking sockets, sleeps in poll(), reports broken and silent
 * connections. */
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
#define DISCARD_BYTES (1 << 16)
#define BURST 64        /* records one socket may move before the others get a turn */
#define SEAL_ALONE 4096 /* encrypted, payloads above this go in records of their own */

/* The peer broke its connection without saying goodbye: mark it for the
 * executor. Quiet while we are leaving ourselves. */
static void peer_lost(struct tutti_tcp_peer* p, int fd, int err, int leaving) {
  if (p->base.gone || leaving) {
    return;
  }
  tutti_proxy_peer_lost(&p->base, err, NULL,
                        err != 0 ? tutti_seal_strerror(fd, err)
                                 : "it closed the connection without leaving the communicator");
}

/* Once every socket has brought a goodbye (or closed after one did), the
 * peer has left: departed, with the reason it gave. */
static void peer_check_left(struct tutti_tcp_peer* p) {
  if (p->byes == 0 || __atomic_load_n(&p->base.bell.departed, __ATOMIC_RELAXED)) {
    return;
  }
  for (int s = 0; s < p->nsocks; s++) {
    if (!p->socks[s].bye_got && !p->socks[s].dead) {
      return;
    }
  }
  tutti_proxy_peer_left(&p->base, p->bye_reason);
}

static void sock_fail(struct tutti_tcp_peer* p, struct tutti_tcp_sock* k, int err, int leaving) {
  k->dead = 1;
  /* After a goodbye, a closed connection is the peer leaving, not a fault. */
  if (p->byes > 0) {
    peer_check_left(p);
  } else {
    peer_lost(p, k->fd, err, leaving);
  }
}

static void send_slot_done(struct tutti_tcp_peer* p, struct tutti_tcp_sock* k) {
  p->sdone[k->snext % p->base.nslots] = 1;
  k->snext += (uint64_t)p->nsocks;
  tutti_proxy_peer_sent(&p->base, p->sdone, &p->s_tail, p->s_head);
}

/* Sends some of socket k's current record; returns 1 when bytes moved. */
static int sock_send(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p, struct tutti_tcp_sock* k,
                     int leaving) {
  if (!k->sbusy) {
    k->sctl_on = 0;
    if (tutti_tcp_ctl_next(p, k)) {
      k->shdr_len = 4;
      k->spayload = (const char*)k->sctl;
      k->sctl_on = 1;
    } else if (k->snext < p->s_head) {
      uint32_t size = p->base.sq->sizes[k->snext % p->base.nslots];
      tutti_socket_put32(k->shdr, size);
      k->shdr_len = 4;
      k->spayload = tutti_proxy_slot(&p->base, p->base.sq, k->snext);
      k->spayload_len = size;
    } else if (leaving && !k->bye_sent) {
      tutti_socket_put32(k->shdr, TUTTI_TCP_BYE);
      tutti_socket_put32(k->shdr + 4, px->base.leave_reason);
      k->shdr_len = 8;
      k->spayload_len = 0;
      k->bye_sent = 1;
    } else {
      return 0;
    }
    k->sbusy = 1;
    k->soff = 0;
  }
  struct iovec iov[2];
  int n = 0;
  if (k->soff < k->shdr_len) {
    iov[n++] = (struct iovec){k->shdr + k->soff, k->shdr_len - k->soff};
    /* Encrypted, a large payload goes in records of its own, which the
     * peer opens straight into its slot rather than through a buffer. */
    if (k->spayload_len <= SEAL_ALONE || !__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED)) {
      iov[n++] = (struct iovec){(void*)k->spayload, k->spayload_len};
    }
  } else {
    size_t off = k->soff - k->shdr_len;
    iov[n++] = (struct iovec){(char*)k->spayload + off, k->spayload_len - off};
  }
  ssize_t w = tutti_seal_sendmsg(k->fd, iov, n);
  if (w < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      k->ready_out = 0;
    } else if (errno != EINTR) {
      /* Not yet a loss: a goodbye may still wait to be read (pump decides). */
      k->send_err = errno;
      k->ready_in = 1;
    }
    return 0;
  }
  k->soff += (size_t)w;
  if (k->soff == k->shdr_len + k->spayload_len) {
    k->sbusy = 0;
    if (k->bye_sent) {
      k->bye_sent = 2;
      shutdown(k->fd, SHUT_WR); /* FIN after the goodbye */
    } else if (!k->sctl_on) {
      send_slot_done(p, k);
    }
  }
  return 1;
}

static void recv_slot_done(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p,
                           struct tutti_tcp_sock* k, int leaving) {
  const uint64_t j = k->rnext;
  k->rnext += (uint64_t)p->nsocks;
  k->roff = 0;
  if (leaving) {
    return; /* nobody will read it */
  }
  p->base.rq->sizes[j % p->base.nslots] = k->rsize;
  p->rdone[j % p->base.nslots] = 1;
  uint64_t h = p->r_head;
  while (p->rdone[h % p->base.nslots]) {
    p->rdone[h % p->base.nslots] = 0;
    h++;
  }
  if (h != p->r_head) {
    p->r_head = h;
    __atomic_store_n(&p->base.rq->head, h, __ATOMIC_SEQ_CST);
    tutti_doorbell_ring(px->base.rank_bell);
  }
}

/* Receives some of socket k's current record; returns 1 when bytes moved. */
static int sock_recv(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p, struct tutti_tcp_sock* k,
                     int leaving) {
  /* A header, and a control record, need no slot: only a slot's data does. */
  const int data = k->roff >= 4 && k->rsize != TUTTI_TCP_BYE && !tutti_tcp_ctl_is(k->rsize);
  if (!leaving && data && k->rnext >= p->r_tail + p->base.nslots) {
    p->r_tail = __atomic_load_n(&p->base.rq->tail, __ATOMIC_SEQ_CST);
    if (k->rnext >= p->r_tail + p->base.nslots) {
      return 0; /* no free slot: the rank has to read first */
    }
  }
  void* dst;
  size_t want;
  if (k->roff < 4 || (k->rsize == TUTTI_TCP_BYE && k->roff < 8)) {
    dst = k->rhdr + k->roff;
    want = (k->roff < 4 ? 4 : 8) - k->roff;
  } else if (tutti_tcp_ctl_is(k->rsize)) {
    dst = k->rctl + (k->roff - 4);
    want = tutti_tcp_ctl_bytes(k->rsize) - (k->roff - 4);
  } else {
    size_t off = k->roff - 4;
    want = k->rsize - off;
    if (leaving) {
      dst = px->discard;
      want = want < DISCARD_BYTES ? want : DISCARD_BYTES;
    } else {
      dst = tutti_proxy_slot(&p->base, p->base.rq, k->rnext) + off;
    }
  }
  /* A slot is published only once its last byte authenticated, so a
   * record may be opened straight into it; anything else takes the record
   * layer's copy. */
  const int slot = data && !leaving;
  ssize_t got = slot ? tutti_seal_recv_slot(k->fd, dst, want) : tutti_seal_recv(k->fd, dst, want);
  if (got <= 0) {
    if (got == 0) {
      sock_fail(p, k, 0, leaving);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      k->ready_in = 0;
    } else if (errno != EINTR) {
      sock_fail(p, k, errno, leaving);
    }
    return 0;
  }
  k->roff += (size_t)got;
  if (k->roff == 4) {
    k->rsize = tutti_socket_get32(k->rhdr);
    if (k->rsize != TUTTI_TCP_BYE && !tutti_tcp_ctl_is(k->rsize) && k->rsize > p->base.slot_bytes) {
      WARN(
          "rank %d: rank %d sent a record of %u bytes on a connection whose slots hold %zu: "
          "dropping the connection",
          px->base.rank, p->base.rank, k->rsize, p->base.slot_bytes);
      sock_fail(p, k, EPROTO, leaving);
      return 1;
    }
  }
  if (k->rsize == TUTTI_TCP_BYE && k->roff == 8) {
    k->bye_got = 1;
    p->byes++;
    uint32_t reason = tutti_socket_get32(k->rhdr + 4);
    if (p->bye_reason == 0 && reason != 0 && !tutti_lost_is_self(reason)) {
      p->bye_reason = reason;
    }
    peer_check_left(p);
  } else if (tutti_tcp_ctl_is(k->rsize) && k->roff == 4 + tutti_tcp_ctl_bytes(k->rsize)) {
    if (!leaving) {
      tutti_tcp_ctl_apply(p, k);
    }
    k->roff = 0;
  } else if (k->rsize != TUTTI_TCP_BYE && !tutti_tcp_ctl_is(k->rsize) && k->roff >= 4 &&
             k->roff - 4 == k->rsize) {
    recv_slot_done(px, p, k, leaving);
  }
  return 1;
}

static int want_out(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k, int leaving) {
  return !k->dead && k->send_err == 0 &&
         (k->sbusy || k->snext < p->s_head || (leaving && !k->bye_sent) || tutti_tcp_ctl_due(p, k));
}

static int want_in(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k, int leaving) {
  /* A header can always be read: it may be a control record. */
  const int data = k->roff >= 4 && k->rsize != TUTTI_TCP_BYE && !tutti_tcp_ctl_is(k->rsize);
  return !k->dead && !k->bye_got && (leaving || !data || k->rnext < p->r_tail + p->base.nslots);
}

/* One pass over every socket; returns non-zero when anything moved. */
static int pump(struct tutti_proxy* base, int leaving) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  int moved = 0;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    p->s_head = __atomic_load_n(&p->base.sq->head, __ATOMIC_SEQ_CST);
    p->r_tail = __atomic_load_n(&p->base.rq->tail, __ATOMIC_SEQ_CST);
    for (int s = 0; s < p->nsocks; s++) {
      struct tutti_tcp_sock* k = &p->socks[s];
      for (int b = 0; b < BURST && k->ready_out && want_out(p, k, leaving); b++) {
        if (!sock_send(px, p, k, leaving)) {
          break;
        }
        moved = 1;
      }
      for (int b = 0; b < BURST && k->ready_in && want_in(p, k, leaving); b++) {
        if (!sock_recv(px, p, k, leaving)) {
          break;
        }
        moved = 1;
      }
      /* A failed send, once everything readable was read. */
      if (k->send_err != 0 && !k->dead && !(k->ready_in && want_in(p, k, leaving))) {
        sock_fail(p, k, k->send_err, leaving);
      }
    }
  }
  return moved;
}

/* Whether the rank posted or freed a slot since the last pass. */
static int news(const struct tutti_tcp_proxy* px) {
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_tcp_peer* p = px->served[i];
    if (__atomic_load_n(&p->base.sq->head, __ATOMIC_SEQ_CST) != p->s_head ||
        __atomic_load_n(&p->base.rq->tail, __ATOMIC_SEQ_CST) != p->r_tail) {
      return 1;
    }
    for (int s = 0; s < p->nsocks; s++) {
      if (!p->socks[s].dead && tutti_tcp_ctl_due(p, &p->socks[s])) {
        return 1;
      }
    }
  }
  return 0;
}

/* Leaving: done once every socket has sent its goodbye (the kernel delivers
 * it and the FIN after close), or is dead. */
static int flushed(const struct tutti_proxy* base) {
  const struct tutti_tcp_proxy* px = (const struct tutti_tcp_proxy*)base;
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_tcp_peer* p = px->served[i];
    for (int s = 0; s < p->nsocks; s++) {
      if (!p->socks[s].dead && p->socks[s].bye_sent != 2) {
        return 0;
      }
    }
  }
  return 1;
}

/* Reads what has arrived: closing a socket with unread data would reset
 * the connection, and could drop our goodbye before it reaches the peer. */
static void drain(struct tutti_proxy* base) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    for (int s = 0; s < p->nsocks; s++) {
      while (!p->socks[s].dead && tutti_seal_recv(p->socks[s].fd, px->discard, DISCARD_BYTES) > 0) {
      }
    }
  }
}

static int build_poll(struct tutti_tcp_proxy* px, int leaving) {
  int n = 0;
  px->pfds[n] = (struct pollfd){.fd = px->base.evfd, .events = POLLIN};
  px->pfd_sock[n++] = NULL;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    for (int s = 0; s < p->nsocks; s++) {
      struct tutti_tcp_sock* k = &p->socks[s];
      short ev =
          (short)((want_in(p, k, leaving) ? POLLIN : 0) | (want_out(p, k, leaving) ? POLLOUT : 0));
      /* With nothing wanted, poll still reports a hang-up; once seen, skip
       * the socket until I/O is wanted again (which then reveals it). */
      if (k->dead || (ev == 0 && k->hup)) {
        continue;
      }
      px->pfds[n] = (struct pollfd){.fd = k->fd, .events = ev};
      px->pfd_sock[n++] = k;
    }
  }
  return n;
}

/* The heartbeat (util/socket.h): a peer whose host stopped acknowledging
 * is lost, whether or not this rank waits for it right now. */
static void check_alive(struct tutti_tcp_proxy* px, int leaving) {
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_tcp_peer* p = px->served[i];
    for (int s = 0; s < p->nsocks && !p->base.gone; s++) {
      struct tutti_tcp_sock* k = &p->socks[s];
      if (!k->dead && p->byes == 0 && tutti_socket_unanswered(k->fd)) {
        shutdown(k->fd, SHUT_RDWR);
        sock_fail(p, k, ETIMEDOUT, leaving);
      }
    }
  }
}

ncclResult_t tutti_tcp_peer_init(struct tutti_tcp_peer* p, int rank, size_t buffsize, int nsocks,
                                 const int* fds) {
  memset(p, 0, sizeof *p);
  p->base.rank = rank;
  p->socks = calloc((size_t)nsocks, sizeof *p->socks);
  if (p->socks == NULL) {
    for (int s = 0; s < nsocks; s++) {
      tutti_seal_close(fds[s]);
    }
    return tutti_error(ncclSystemError, "out of host memory for the sockets of rank %d", rank);
  }
  p->nsocks = nsocks;
  for (int s = 0; s < nsocks; s++) {
    struct tutti_tcp_sock* k = &p->socks[s];
    k->fd = fds[s];
    k->snext = k->rnext = (uint64_t)s;
    k->ready_in = k->ready_out = 1; /* optimistic: the first try tells */
  }
  /* The thread polls the sockets: an arrival wakes it, no receive must. */
  return tutti_proxy_peer_init(&p->base, rank, buffsize, 0, 0);
}

void tutti_tcp_peer_free(struct tutti_tcp_peer* p) {
  for (int s = 0; s < p->nsocks; s++) {
    tutti_seal_close(p->socks[s].fd);
  }
  free(p->socks);
  p->socks = NULL;
  p->nsocks = 0;
  tutti_proxy_peer_free(&p->base);
}

/* The heartbeat's turn: read it every check_ms. */
static void tick(struct tutti_proxy* base, int leaving, double now) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  if (tutti_socket_heartbeat_s() > 0 && now >= px->next_check) {
    check_alive(px, leaving);
    px->next_check = tutti_socket_now() + px->check_ms * 1e-3;
  }
}

/* Sleeps in poll() on the eventfd and every socket with I/O wanted, at
 * most until the next heartbeat check; not at all when the rank posted or
 * freed a slot meanwhile (or is stopping us), and then only learns what
 * the sockets are ready for. */
static int idle(struct tutti_proxy* base, int leaving, double idle_s) {
  struct tutti_tcp_proxy* px = (struct tutti_tcp_proxy*)base;
  (void)idle_s;
  int timeout = px->check_ms;
  if (news(px) || (!leaving && __atomic_load_n(&base->stop, __ATOMIC_SEQ_CST))) {
    timeout = 0;
  }
  const int n = build_poll(px, leaving);
  for (int i = 1; i < n; i++) { /* a record half read: poll would not wake for the rest */
    struct tutti_tcp_sock* k = px->pfd_sock[i];
    if ((px->pfds[i].events & POLLIN) && tutti_seal_has_pending(k->fd)) {
      k->ready_in = 1;
      timeout = 0;
    }
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
    k->ready_in |= (re & POLLIN) != 0;
    k->ready_out |= (re & POLLOUT) != 0;
    if (re & (POLLERR | POLLHUP)) {
      k->hup = 1;
      /* Let the I/O that is wanted meet the error and report it. */
      k->ready_in |= (px->pfds[i].events & POLLIN) != 0;
      k->ready_out |= (px->pfds[i].events & POLLOUT) != 0;
    }
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
  px->discard = malloc(DISCARD_BYTES);
  if (px->pfds == NULL || px->pfd_sock == NULL || px->discard == NULL) {
    return tutti_error(ncclSystemError, "rank %d: cannot prepare the TCP proxy thread: %s",
                       px->base.rank, "out of host memory");
  }
  return tutti_proxy_start(&px->base);
}

void tutti_tcp_proxy_stop(struct tutti_tcp_proxy* px, int abort) {
  tutti_proxy_stop(&px->base, abort);
  free(px->pfds);
  free(px->pfd_sock);
  free(px->discard);
  px->pfds = NULL;
  px->pfd_sock = NULL;
  px->discard = NULL;
}
