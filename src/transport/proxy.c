/* The tcp transport's proxy thread (see proxy.h; the peers' queues are in
 * proxy_peer.c): moves slots between private queues and non-blocking
 * sockets, sleeps in poll(), reports broken and silent connections. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "transport/proxy.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"
#include "util/proc.h"
#include "util/socket.h"

#define IDLE_POLL_MS 1000 /* a safety net only: pokes and sockets end a sleep sooner */
#define DISCARD_BYTES (1 << 16)
#define BURST 64 /* records one socket may move before the others get a turn */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char* slot_at(const struct tutti_proxy_peer* p, struct tutti_fifo* q, uint64_t k) {
  return (char*)q + TUTTI_FIFO_HEADER + (size_t)(k % p->nslots) * p->slot_bytes;
}

/* The peer broke its connection without saying goodbye: mark it for the
 * executor, and our own doorbell too, so that local ranks that see us leave
 * can tell why. Quiet while we are leaving ourselves. */
static void peer_lost(struct tutti_proxy* px, struct tutti_proxy_peer* p, int err, int leaving) {
  if (p->gone || leaving) {
    return;
  }
  p->gone = 1;
  __atomic_store_n(&p->bell.lost, tutti_lost_make(err, TUTTI_LOST_SELF), __ATOMIC_RELEASE);
  uint32_t none = 0;
  __atomic_compare_exchange_n(&px->rank_bell->lost, &none, tutti_lost_make(err, p->rank), 0,
                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  WARN("rank %d lost its connection to rank %d (pid %d on host %s): %s", px->rank, p->rank,
       (int)px->peers[p->rank].pid, px->peers[p->rank].hostname,
       err != 0 ? strerror(err) : "it closed the connection without leaving the communicator");
  tutti_doorbell_ring(px->rank_bell);
}

/* Once every socket has brought a goodbye (or closed after one did), the
 * peer has left: departed, with the reason it gave. */
static void peer_check_left(struct tutti_proxy* px, struct tutti_proxy_peer* p) {
  if (p->byes == 0 || __atomic_load_n(&p->bell.departed, __ATOMIC_RELAXED)) {
    return;
  }
  for (int s = 0; s < p->nsocks; s++) {
    if (!p->socks[s].bye_got && !p->socks[s].dead) {
      return;
    }
  }
  if (p->bye_reason != 0) {
    __atomic_store_n(&p->bell.lost, p->bye_reason, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&p->bell.departed, 1, __ATOMIC_RELEASE);
  tutti_doorbell_ring(px->rank_bell);
}

static void sock_fail(struct tutti_proxy* px, struct tutti_proxy_peer* p,
                      struct tutti_proxy_sock* k, int err, int leaving) {
  k->dead = 1;
  /* After a goodbye, a closed connection is the peer leaving, not a fault. */
  if (p->byes > 0) {
    peer_check_left(px, p);
  } else {
    peer_lost(px, p, err, leaving);
  }
}

static void send_slot_done(struct tutti_proxy* px, struct tutti_proxy_peer* p,
                           struct tutti_proxy_sock* k) {
  p->sdone[k->snext % p->nslots] = 1;
  k->snext += (uint64_t)p->nsocks;
  uint64_t t = p->s_tail;
  while (t < p->s_head && p->sdone[t % p->nslots]) {
    p->sdone[t % p->nslots] = 0;
    t++;
  }
  if (t != p->s_tail) {
    p->s_tail = t;
    __atomic_store_n(&p->sq->tail, t, __ATOMIC_SEQ_CST);
    tutti_doorbell_ring(px->rank_bell);
  }
}

/* Sends some of socket k's current record; returns 1 when bytes moved. */
static int sock_send(struct tutti_proxy* px, struct tutti_proxy_peer* p, struct tutti_proxy_sock* k,
                     int leaving) {
  if (!k->sbusy) {
    k->sctl_on = 0;
    if (tutti_proxy_ctl_next(px, p, k)) {
      k->shdr_len = 4;
      k->spayload = (const char*)k->sctl;
      k->sctl_on = 1;
    } else if (k->snext < p->s_head) {
      uint32_t size = p->sq->sizes[k->snext % p->nslots];
      tutti_proxy_put32(k->shdr, size);
      k->shdr_len = 4;
      k->spayload = slot_at(p, p->sq, k->snext);
      k->spayload_len = size;
    } else if (leaving && !k->bye_sent) {
      tutti_proxy_put32(k->shdr, TUTTI_PROXY_BYE);
      tutti_proxy_put32(k->shdr + 4, px->leave_reason);
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
    iov[n++] = (struct iovec){(void*)k->spayload, k->spayload_len};
  } else {
    size_t off = k->soff - k->shdr_len;
    iov[n++] = (struct iovec){(char*)k->spayload + off, k->spayload_len - off};
  }
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = iov;
  m.msg_iovlen = (size_t)n;
  ssize_t w = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
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
      send_slot_done(px, p, k);
    }
  }
  return 1;
}

static void recv_slot_done(struct tutti_proxy* px, struct tutti_proxy_peer* p,
                           struct tutti_proxy_sock* k, int leaving) {
  const uint64_t j = k->rnext;
  k->rnext += (uint64_t)p->nsocks;
  k->roff = 0;
  if (leaving) {
    return; /* nobody will read it */
  }
  p->rq->sizes[j % p->nslots] = k->rsize;
  p->rdone[j % p->nslots] = 1;
  uint64_t h = p->r_head;
  while (p->rdone[h % p->nslots]) {
    p->rdone[h % p->nslots] = 0;
    h++;
  }
  if (h != p->r_head) {
    p->r_head = h;
    __atomic_store_n(&p->rq->head, h, __ATOMIC_SEQ_CST);
    tutti_doorbell_ring(px->rank_bell);
  }
}

/* Receives some of socket k's current record; returns 1 when bytes moved. */
static int sock_recv(struct tutti_proxy* px, struct tutti_proxy_peer* p, struct tutti_proxy_sock* k,
                     int leaving) {
  /* A header, and a control record, need no slot: only a slot's data does. */
  const int data = k->roff >= 4 && k->rsize != TUTTI_PROXY_BYE && !tutti_proxy_is_ctl(k->rsize);
  if (!leaving && data && k->rnext >= p->r_tail + p->nslots) {
    p->r_tail = __atomic_load_n(&p->rq->tail, __ATOMIC_SEQ_CST);
    if (k->rnext >= p->r_tail + p->nslots) {
      return 0; /* no free slot: the rank has to read first */
    }
  }
  void* dst;
  size_t want;
  if (k->roff < 4 || (k->rsize == TUTTI_PROXY_BYE && k->roff < 8)) {
    dst = k->rhdr + k->roff;
    want = (k->roff < 4 ? 4 : 8) - k->roff;
  } else if (tutti_proxy_is_ctl(k->rsize)) {
    dst = k->rctl + (k->roff - 4);
    want = tutti_proxy_ctl_bytes(k->rsize) - (k->roff - 4);
  } else {
    size_t off = k->roff - 4;
    want = k->rsize - off;
    if (leaving) {
      dst = px->discard;
      want = want < DISCARD_BYTES ? want : DISCARD_BYTES;
    } else {
      dst = slot_at(p, p->rq, k->rnext) + off;
    }
  }
  ssize_t got = recv(k->fd, dst, want, MSG_DONTWAIT);
  if (got <= 0) {
    if (got == 0) {
      sock_fail(px, p, k, 0, leaving);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      k->ready_in = 0;
    } else if (errno != EINTR) {
      sock_fail(px, p, k, errno, leaving);
    }
    return 0;
  }
  k->roff += (size_t)got;
  if (k->roff == 4) {
    k->rsize = tutti_proxy_get32(k->rhdr);
    if (k->rsize != TUTTI_PROXY_BYE && !tutti_proxy_is_ctl(k->rsize) && k->rsize > p->slot_bytes) {
      WARN(
          "rank %d: rank %d sent a record of %u bytes on a connection whose slots hold %zu: "
          "dropping the connection",
          px->rank, p->rank, k->rsize, p->slot_bytes);
      sock_fail(px, p, k, EPROTO, leaving);
      return 1;
    }
  }
  if (k->rsize == TUTTI_PROXY_BYE && k->roff == 8) {
    k->bye_got = 1;
    p->byes++;
    uint32_t reason = tutti_proxy_get32(k->rhdr + 4);
    if (p->bye_reason == 0 && reason != 0 && !tutti_lost_is_self(reason)) {
      p->bye_reason = reason;
    }
    peer_check_left(px, p);
  } else if (tutti_proxy_is_ctl(k->rsize) && k->roff == 4 + tutti_proxy_ctl_bytes(k->rsize)) {
    if (!leaving) {
      tutti_proxy_ctl_apply(px, p, k);
    }
    k->roff = 0;
  } else if (k->rsize != TUTTI_PROXY_BYE && !tutti_proxy_is_ctl(k->rsize) && k->roff >= 4 &&
             k->roff - 4 == k->rsize) {
    recv_slot_done(px, p, k, leaving);
  }
  return 1;
}

static int want_out(const struct tutti_proxy* px, const struct tutti_proxy_peer* p,
                    const struct tutti_proxy_sock* k, int leaving) {
  return !k->dead && k->send_err == 0 &&
         (k->sbusy || k->snext < p->s_head || (leaving && !k->bye_sent) ||
          tutti_proxy_ctl_due(px, p, k));
}

static int want_in(const struct tutti_proxy_peer* p, const struct tutti_proxy_sock* k,
                   int leaving) {
  /* A header can always be read: it may be a control record. */
  const int data = k->roff >= 4 && k->rsize != TUTTI_PROXY_BYE && !tutti_proxy_is_ctl(k->rsize);
  return !k->dead && !k->bye_got && (leaving || !data || k->rnext < p->r_tail + p->nslots);
}

/* One pass over every socket; returns non-zero when anything moved. */
static int pump(struct tutti_proxy* px, int leaving) {
  int moved = 0;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_proxy_peer* p = px->served[i];
    p->s_head = __atomic_load_n(&p->sq->head, __ATOMIC_SEQ_CST);
    p->r_tail = __atomic_load_n(&p->rq->tail, __ATOMIC_SEQ_CST);
    for (int s = 0; s < p->nsocks; s++) {
      struct tutti_proxy_sock* k = &p->socks[s];
      for (int b = 0; b < BURST && k->ready_out && want_out(px, p, k, leaving); b++) {
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
        sock_fail(px, p, k, k->send_err, leaving);
      }
    }
  }
  return moved;
}

/* Whether the rank posted or freed a slot since the last pass. */
static int news(const struct tutti_proxy* px) {
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_proxy_peer* p = px->served[i];
    if (__atomic_load_n(&p->sq->head, __ATOMIC_SEQ_CST) != p->s_head ||
        __atomic_load_n(&p->rq->tail, __ATOMIC_SEQ_CST) != p->r_tail) {
      return 1;
    }
    for (int s = 0; s < p->nsocks; s++) {
      if (!p->socks[s].dead && tutti_proxy_ctl_due(px, p, &p->socks[s])) {
        return 1;
      }
    }
  }
  return 0;
}

/* Leaving: done once every socket has sent its goodbye (the kernel delivers
 * it and the FIN after close), or is dead. */
static int flushed(const struct tutti_proxy* px) {
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_proxy_peer* p = px->served[i];
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
static void drain(struct tutti_proxy* px) {
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_proxy_peer* p = px->served[i];
    for (int s = 0; s < p->nsocks; s++) {
      while (!p->socks[s].dead &&
             recv(p->socks[s].fd, px->discard, DISCARD_BYTES, MSG_DONTWAIT) > 0) {
      }
    }
  }
}

static int build_poll(struct tutti_proxy* px, int leaving) {
  int n = 0;
  px->pfds[n] = (struct pollfd){.fd = px->evfd, .events = POLLIN};
  px->pfd_sock[n++] = NULL;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_proxy_peer* p = px->served[i];
    for (int s = 0; s < p->nsocks; s++) {
      struct tutti_proxy_sock* k = &p->socks[s];
      short ev = (short)((want_in(p, k, leaving) ? POLLIN : 0) |
                         (want_out(px, p, k, leaving) ? POLLOUT : 0));
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
static void check_alive(struct tutti_proxy* px, int leaving) {
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_proxy_peer* p = px->served[i];
    for (int s = 0; s < p->nsocks && !p->gone; s++) {
      struct tutti_proxy_sock* k = &p->socks[s];
      if (!k->dead && p->byes == 0 && tutti_socket_unanswered(k->fd)) {
        shutdown(k->fd, SHUT_RDWR);
        sock_fail(px, p, k, ETIMEDOUT, leaving);
      }
    }
  }
}

static void* proxy_main(void* arg) {
  struct tutti_proxy* px = arg;
  const int hb_ms = tutti_socket_heartbeat_s() * 1000;
  const int check_ms = hb_ms > 0 && hb_ms / 4 < IDLE_POLL_MS ? hb_ms / 4 : IDLE_POLL_MS;
  double last_move = now_s(), next_check = last_move;
  for (;;) {
    const int leaving = (int)__atomic_load_n(&px->stop, __ATOMIC_SEQ_CST);
    const int moved = pump(px, leaving);
    if (moved) {
      last_move = now_s();
    }
    if (hb_ms > 0 && now_s() >= next_check) {
      check_alive(px, leaving);
      next_check = now_s() + check_ms * 1e-3;
    }
    if (leaving && (leaving == 2 || flushed(px) || now_s() - last_move > px->flush_s)) {
      drain(px);
      break;
    }
    if (moved) {
      continue;
    }
    __atomic_store_n(&px->sleeping, 1, __ATOMIC_SEQ_CST);
    int timeout = check_ms;
    if (news(px) || (!leaving && __atomic_load_n(&px->stop, __ATOMIC_SEQ_CST))) {
      timeout = 0;
    }
    const int n = build_poll(px, leaving);
    const int ready = poll(px->pfds, (nfds_t)n, timeout);
    __atomic_store_n(&px->sleeping, 0, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n && ready > 0; i++) {
      const short re = px->pfds[i].revents;
      struct tutti_proxy_sock* k = px->pfd_sock[i];
      if (re == 0) {
        continue;
      }
      if (k == NULL) {
        uint64_t v;
        ssize_t r = read(px->evfd, &v, sizeof v);
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
  }
  return NULL;
}

ncclResult_t tutti_proxy_start(struct tutti_proxy* px) {
  int nsocks = 0;
  for (int i = 0; i < px->nserved; i++) {
    nsocks += px->served[i]->nsocks;
  }
  px->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  px->pfds = calloc((size_t)nsocks + 1, sizeof *px->pfds);
  px->pfd_sock = calloc((size_t)nsocks + 1, sizeof *px->pfd_sock);
  px->discard = malloc(DISCARD_BYTES);
  if (px->evfd < 0 || px->pfds == NULL || px->pfd_sock == NULL || px->discard == NULL) {
    return tutti_error(ncclSystemError, "rank %d: cannot prepare the TCP proxy thread: %s",
                       px->rank, px->evfd < 0 ? strerror(errno) : "out of host memory");
  }
  const int err = tutti_thread_start(&px->thread, proxy_main, px, "tutti-proxy");
  if (err != 0) {
    return tutti_error(ncclSystemError, "rank %d: cannot start the TCP proxy thread: %s", px->rank,
                       strerror(err));
  }
  px->started = 1;
  return ncclSuccess;
}

void tutti_proxy_stop(struct tutti_proxy* px, int abort) {
  if (px->started) {
    /* 2: aborting, nothing is flushed to peers that may never read it. */
    __atomic_store_n(&px->stop, abort ? 2 : 1, __ATOMIC_SEQ_CST);
    tutti_proxy_poke(px);
    pthread_join(px->thread, NULL);
    px->started = 0;
  }
  if (px->evfd >= 0) {
    close(px->evfd);
    px->evfd = -1;
  }
  free(px->pfds);
  free(px->pfd_sock);
  free(px->discard);
  px->pfds = NULL;
  px->pfd_sock = NULL;
  px->discard = NULL;
}
