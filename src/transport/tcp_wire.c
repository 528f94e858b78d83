/* One TCP socket's records (see tcp_proxy.h's wire format): sending a
 * slot with the control records due ahead of it, receiving records into
 * the peer's slots and stand-in doorbell, and what a broken socket means.
 * Run with the peer's lock held, by the proxy thread (tcp_proxy.c) or by
 * the calling thread's own path (tcp_direct.c): one state machine, so the
 * order on the wire does not depend on who drives it. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "transport/tcp_proxy.h"
#include "util/check.h"
#include "util/seal.h"
#include "util/socket.h"

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

void tutti_tcp_sock_fail(struct tutti_tcp_peer* p, struct tutti_tcp_sock* k, int err, int leaving) {
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

/* Gathers k's next record: the control records due, then the slot's
 * header (or the goodbye); 0 when nothing is due. */
static int compose(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p, struct tutti_tcp_sock* k,
                   int leaving) {
  size_t n = 0, w;
  while ((w = tutti_tcp_ctl_next(p, k, k->sbuf + n, sizeof k->sbuf - n)) > 0) {
    n += w;
  }
  k->sslot = 0;
  k->spayload = NULL;
  k->spayload_len = 0;
  if (k->snext < p->s_head && n + 4 <= sizeof k->sbuf) {
    const uint32_t size = p->base.sq->sizes[k->snext % p->base.nslots];
    tutti_socket_put32(k->sbuf + n, size);
    n += 4;
    k->spayload = tutti_proxy_slot(&p->base, p->base.sq, k->snext);
    k->spayload_len = size;
    k->sslot = 1;
  } else if (n == 0 && leaving && !k->bye_sent) {
    tutti_socket_put32(k->sbuf, TUTTI_TCP_BYE);
    tutti_socket_put32(k->sbuf + 4, px->base.leave_reason);
    n = 8;
    k->bye_sent = 1;
  }
  k->shdr_len = n;
  return n > 0;
}

int tutti_tcp_sock_send(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p,
                        struct tutti_tcp_sock* k, int leaving) {
  if (!k->sbusy) {
    if (!compose(px, p, k, leaving)) {
      return 0;
    }
    k->sbusy = 1;
    k->soff = 0;
  }
  struct iovec iov[2];
  int n = 0;
  if (k->soff < k->shdr_len) {
    iov[n++] = (struct iovec){k->sbuf + k->soff, k->shdr_len - k->soff};
    /* Encrypted, a large payload goes in records of its own, which the
     * peer opens straight into its slot rather than through a buffer. */
    if (k->spayload_len > 0 &&
        (k->spayload_len <= SEAL_ALONE || !__atomic_load_n(&tutti_seal_active, __ATOMIC_RELAXED))) {
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
    if (k->bye_sent == 1) {
      k->bye_sent = 2;
      shutdown(k->fd, SHUT_WR); /* FIN after the goodbye */
    } else if (k->sslot) {
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

/* Reads up to `want` bytes of the current record into dst: from what was
 * read ahead, else, when the rest is small, a staging buffer's worth (this
 * record's rest and whatever follows it, in one system call), else
 * straight into dst (a slot's data is opened there, encrypted: it is
 * published only once its last byte authenticated). */
static ssize_t take(struct tutti_tcp_sock* k, void* dst, size_t want, int slot) {
  if (k->stage_off == k->stage_len && want < TUTTI_TCP_STAGE && k->stage != NULL) {
    const ssize_t got = tutti_seal_recv(k->fd, k->stage, TUTTI_TCP_STAGE);
    if (got <= 0) {
      return got;
    }
    k->stage_off = 0;
    k->stage_len = (size_t)got;
  }
  if (k->stage_off < k->stage_len) {
    const size_t avail = k->stage_len - k->stage_off;
    const size_t n = want < avail ? want : avail;
    memcpy(dst, k->stage + k->stage_off, n);
    k->stage_off += n;
    return (ssize_t)n;
  }
  return slot ? tutti_seal_recv_slot(k->fd, dst, want) : tutti_seal_recv(k->fd, dst, want);
}

int tutti_tcp_sock_recv(struct tutti_tcp_proxy* px, struct tutti_tcp_peer* p,
                        struct tutti_tcp_sock* k, int leaving) {
  /* A header, and a control record, need no slot: only a slot's data does. */
  const int data = tutti_tcp_sock_in_data(k);
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
      want = want < TUTTI_TCP_DISCARD ? want : TUTTI_TCP_DISCARD;
    } else {
      dst = tutti_proxy_slot(&p->base, p->base.rq, k->rnext) + off;
    }
  }
  ssize_t got = want == 0 ? 0 : take(k, dst, want, data && !leaving);
  if (want > 0 && got <= 0) {
    if (got == 0) {
      tutti_tcp_sock_fail(p, k, 0, leaving);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      k->ready_in = 0;
    } else if (errno != EINTR) {
      tutti_tcp_sock_fail(p, k, errno, leaving);
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
      tutti_tcp_sock_fail(p, k, EPROTO, leaving);
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

int tutti_tcp_want_out(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k,
                       int leaving) {
  return !k->dead && k->send_err == 0 &&
         (k->sbusy || k->snext < p->s_head || (leaving && !k->bye_sent) || tutti_tcp_ctl_due(p, k));
}

int tutti_tcp_want_in(const struct tutti_tcp_peer* p, const struct tutti_tcp_sock* k, int leaving) {
  /* A header can always be read: it may be a control record. */
  return !k->dead && !k->bye_got &&
         (leaving || !tutti_tcp_sock_in_data(k) || k->rnext < p->r_tail + p->base.nslots);
}

int tutti_tcp_sock_pending(const struct tutti_tcp_sock* k) {
  return k->stage_off < k->stage_len || tutti_seal_has_pending(k->fd);
}
