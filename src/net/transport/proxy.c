/* The network transport's proxy thread (see nettr.h): hands the slots
 * the rank posts to the network, keeps a receive posted for every slot the
 * rank has freed, and shows arrived slots to the rank in order. Plugin
 * requests cannot be waited on, so the thread polls them while anything is
 * in flight or the rank waits, and sleeps on its eventfd otherwise. */
#define _GNU_SOURCE /* pthread_setname_np, ppoll */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "net/transport/nettr.h"
#include "util/check.h"
#include "util/proc.h"
#include "util/socket.h"

#define SPIN_S 0.002        /* polling on after the last move, before any sleep */
#define SLEEP_MIN_S 50e-6   /* the first sleeps: a late message costs at most this */
#define SLEEP_MAX_S 1e-3    /* ... growing to this after 20 ms idle */
#define SUSPECT_S 0.2       /* a failed network operation waits this long for a goodbye */
#define ABORT_NOTICE_S 0.05 /* aborting: how long the rank's failure may take to go out */

static char* slot_at(const struct tutti_nettr_peer* p, struct tutti_fifo* q, uint64_t k) {
  return (char*)q + TUTTI_FIFO_HEADER + (size_t)(k % p->nslots) * p->slot_bytes;
}

static void poke(struct tutti_nettr_proxy* px) {
  uint64_t one = 1;
  ssize_t n = write(px->evfd, &one, sizeof one);
  (void)n; /* a full counter already means "wake up" */
}

/* The executor's side: the fifo's operations, plus a poke when the thread
 * may be asleep: after a post or a free, and when a receive finds nothing
 * (the thread must look at the network for it). */
static struct tutti_nettr_peer* peer_of(struct tutti_conn* c, int recv) {
  size_t off = recv ? offsetof(struct tutti_nettr_peer, recv_end)
                    : offsetof(struct tutti_nettr_peer, send_end);
  return (struct tutti_nettr_peer*)((char*)c - off);
}

static void wake(struct tutti_nettr_peer* p) {
  if (__atomic_load_n(&p->px->sleeping, __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&p->px->sleeping, 0, __ATOMIC_SEQ_CST);
    poke(p->px);
  }
}

static void* conn_send_begin(struct tutti_conn* c) {
  return peer_of(c, 0)->fifo_ops->send_begin(c);
}

static void conn_send_end(struct tutti_conn* c, size_t bytes) {
  struct tutti_nettr_peer* p = peer_of(c, 0);
  p->fifo_ops->send_end(c, bytes);
  wake(p);
}

static const void* conn_recv_begin(struct tutti_conn* c, size_t* bytes) {
  struct tutti_nettr_peer* p = peer_of(c, 1);
  const void* got = p->fifo_ops->recv_begin(c, bytes);
  if (got == NULL) {
    wake(p);
  }
  return got;
}

static void conn_recv_end(struct tutti_conn* c) {
  struct tutti_nettr_peer* p = peer_of(c, 1);
  p->fifo_ops->recv_end(c);
  wake(p);
}

static const struct tutti_conn_ops nettr_conn_ops = {
    .send_begin = conn_send_begin,
    .send_end = conn_send_end,
    .recv_begin = conn_recv_begin,
    .recv_end = conn_recv_end,
};

ncclResult_t tutti_nettr_peer_init(struct tutti_nettr_peer* p, int rank, size_t buffsize) {
  p->rank = rank;
  tutti_fifo_geometry(buffsize, &p->nslots, &p->slot_bytes);
  const size_t q = tutti_fifo_bytes(p->nslots, p->slot_bytes);
  const size_t ctl =
      (size_t)(TUTTI_NETTR_CTL_RECVS + TUTTI_NETTR_CTL_SENDS) * TUTTI_NETTR_CTL_BYTES;
  p->mem = mmap(NULL, 2 * q + ctl, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p->mem == MAP_FAILED) {
    p->mem = NULL;
    return tutti_error(ncclSystemError, "cannot map %zu bytes of queues for rank %d: %s",
                       2 * q + ctl, rank, strerror(errno));
  }
  p->mem_bytes = 2 * q + ctl;
  p->sq = p->mem;
  p->rq = (struct tutti_fifo*)((char*)p->mem + q);
  p->ctl_rbuf = (unsigned char(*)[TUTTI_NETTR_CTL_BYTES])((char*)p->mem + 2 * q);
  p->ctl_sbuf = p->ctl_rbuf + TUTTI_NETTR_CTL_RECVS;
  tutti_fifo_conn_init(&p->send_end, NULL, p->sq, p->nslots, p->slot_bytes, rank, -1, NULL, NULL);
  tutti_fifo_conn_init(NULL, &p->recv_end, p->rq, p->nslots, p->slot_bytes, -1, rank, NULL, NULL);
  p->fifo_ops = p->send_end.base.ops;
  p->send_end.base.ops = &nettr_conn_ops;
  p->recv_end.base.ops = &nettr_conn_ops;
  return ncclSuccess;
}

/* Registers `bytes` at `data` with `comm` into *mh, naming the peer on failure. */
static ncclResult_t reg(struct tutti_net* net, const struct tutti_nettr_peer* p, void* comm,
                        void* data, size_t bytes, void** mh) {
  if (net->ops->reg_mr(net, comm, data, bytes, TUTTI_NET_PTR_HOST, mh) != ncclSuccess) {
    return tutti_error(ncclSystemError,
                       "the network plugin %s could not register %zu bytes of host memory for "
                       "rank %d: %s",
                       net->name, bytes, p->rank, tutti_last_error());
  }
  return ncclSuccess;
}

ncclResult_t tutti_nettr_peer_register(struct tutti_net* net, struct tutti_nettr_peer* p) {
  const size_t slots = (size_t)p->nslots * p->slot_bytes;
  for (int i = 0; i < p->ncomms; i++) {
    NCCLCHECK(reg(net, p, p->data[i].send, slot_at(p, p->sq, 0), slots, &p->data[i].send_mh));
    NCCLCHECK(reg(net, p, p->data[i].recv, slot_at(p, p->rq, 0), slots, &p->data[i].recv_mh));
  }
  NCCLCHECK(reg(net, p, p->ctl.send, p->ctl_sbuf, TUTTI_NETTR_CTL_SENDS * TUTTI_NETTR_CTL_BYTES,
                &p->ctl.send_mh));
  return reg(net, p, p->ctl.recv, p->ctl_rbuf, TUTTI_NETTR_CTL_RECVS * TUTTI_NETTR_CTL_BYTES,
             &p->ctl.recv_mh);
}

static void link_close(struct tutti_net* net, struct tutti_nettr_link* l) {
  if (l->send_mh != NULL) {
    net->ops->dereg_mr(net, l->send, l->send_mh);
  }
  if (l->recv_mh != NULL) {
    net->ops->dereg_mr(net, l->recv, l->recv_mh);
  }
  if (l->send != NULL) {
    net->ops->close_send(net, l->send);
  }
  if (l->recv != NULL) {
    net->ops->close_recv(net, l->recv);
  }
  memset(l, 0, sizeof *l);
}

void tutti_nettr_peer_free(struct tutti_net* net, struct tutti_nettr_peer* p) {
  for (int i = 0; net != NULL && i < p->ncomms; i++) {
    link_close(net, &p->data[i]);
  }
  if (net != NULL) {
    link_close(net, &p->ctl);
  }
  if (p->mem != NULL) {
    munmap(p->mem, p->mem_bytes);
    p->mem = NULL;
  }
}

/* Hands posted slots to the network and frees the ones it is done with. */
static int pump_sends(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p) {
  struct tutti_net* net = px->net;
  int moved = 0;
  p->s_head = __atomic_load_n(&p->sq->head, __ATOMIC_SEQ_CST);
  while (p->s_next < p->s_head) {
    const uint64_t k = p->s_next;
    struct tutti_nettr_link* l = &p->data[k % (uint64_t)p->ncomms];
    void* req = NULL;
    if (net->ops->isend(net, l->send, slot_at(p, p->sq, k), p->sq->sizes[k % p->nslots],
                        TUTTI_NETTR_TAG, l->send_mh, &req) != ncclSuccess) {
      return tutti_nettr_suspect(p, "sending");
    }
    if (req == NULL) {
      break; /* the plugin has no room now */
    }
    p->sreq[k % p->nslots] = req;
    p->s_next++;
    moved = 1;
  }
  for (uint64_t k = p->s_tail; k < p->s_next; k++) {
    const uint32_t i = (uint32_t)(k % p->nslots);
    if (p->sdone[i]) {
      continue;
    }
    int done = 0;
    if (net->ops->test(net, p->sreq[i], &done, NULL) != ncclSuccess) {
      p->sreq[i] = NULL; /* a failed request is gone: never test it again */
      return tutti_nettr_suspect(p, "a send");
    }
    if (done) {
      p->sdone[i] = 1;
      p->sreq[i] = NULL;
    }
  }
  uint64_t t = p->s_tail;
  while (t < p->s_next && p->sdone[t % p->nslots]) {
    p->sdone[t % p->nslots] = 0;
    t++;
  }
  if (t != p->s_tail) {
    p->s_tail = t;
    __atomic_store_n(&p->sq->tail, t, __ATOMIC_SEQ_CST);
    tutti_doorbell_ring(px->rank_bell);
    moved = 1;
  }
  return moved;
}

/* Keeps a receive posted into every free slot and shows arrivals in order. */
static int pump_recvs(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, int leaving) {
  struct tutti_net* net = px->net;
  int moved = 0;
  p->r_tail = __atomic_load_n(&p->rq->tail, __ATOMIC_SEQ_CST);
  /* After the goodbye, receives go on for the slots it says were sent before it. */
  while (!leaving && (!p->bye_got || p->r_next < p->bye_slots) &&
         p->r_next < p->r_tail + p->nslots) {
    const uint64_t k = p->r_next;
    struct tutti_nettr_link* l = &p->data[k % (uint64_t)p->ncomms];
    void* data = slot_at(p, p->rq, k);
    size_t size = p->slot_bytes;
    int tag = TUTTI_NETTR_TAG;
    void* req = NULL;
    if (net->ops->irecv(net, l->recv, 1, &data, &size, &tag, &l->recv_mh, &req) != ncclSuccess) {
      return tutti_nettr_suspect(p, "posting a receive");
    }
    if (req == NULL) {
      break;
    }
    p->rreq[k % p->nslots] = req;
    p->r_next++;
    moved = 1;
  }
  int bad = 0;
  for (uint64_t k = p->r_head; k < p->r_next && !bad; k++) {
    const uint32_t i = (uint32_t)(k % p->nslots);
    if (p->rdone[i]) {
      continue;
    }
    int done = 0, size = 0;
    if (net->ops->test(net, p->rreq[i], &done, &size) != ncclSuccess) {
      p->rreq[i] = NULL;
      bad = tutti_nettr_suspect(p, "a receive"); /* what came before it is shown first */
      break;
    }
    if (!done) {
      break; /* messages on one comm arrive in order; the others are tested next pass */
    }
    p->rdone[i] = 1;
    p->rreq[i] = NULL;
    p->rsize[i] = (uint32_t)size;
  }
  uint64_t h = p->r_head;
  while (h < p->r_next && p->rdone[h % p->nslots]) {
    p->rq->sizes[h % p->nslots] = p->rsize[h % p->nslots];
    p->rdone[h % p->nslots] = 0;
    h++;
  }
  if (h != p->r_head) {
    p->r_head = h;
    if (!leaving) {
      __atomic_store_n(&p->rq->head, h, __ATOMIC_SEQ_CST);
      tutti_doorbell_ring(px->rank_bell);
    }
    tutti_nettr_check_left(px, p);
    moved = 1;
  }
  return moved | bad;
}

/* A peer whose network failed: lost, unless its goodbye turns up within
 * SUSPECT_S (a peer that left closes its comms, which fails what this rank
 * still had posted). */
static int settle(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, int leaving) {
  int moved = 0;
  if (!p->bye_got) {
    moved |= tutti_nettr_ctl_pump(px, p, leaving); /* the goodbye may be waiting there */
  }
  if (p->bye_got && p->r_head < p->bye_slots) {
    /* It left: what it sent before its goodbye is still to be read (the
     * receives that failed were for messages after it). */
    moved |= pump_recvs(px, p, leaving);
  }
  if (p->bye_got && p->r_head >= p->bye_slots) {
    p->gone = 1; /* departed (tutti_nettr_check_left) */
  } else if (!p->bye_got && tutti_socket_now() - p->suspect_at > SUSPECT_S) {
    tutti_nettr_lost(px, p, p->suspect_why, leaving);
  }
  return moved | p->gone;
}

static int pump(struct tutti_nettr_proxy* px, int leaving) {
  int moved = 0;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_nettr_peer* p = &px->served[i];
    if (p->gone) {
      continue; /* lost, or left: nothing more moves */
    }
    if (p->suspect_at != 0) {
      moved |= settle(px, p, leaving);
      continue;
    }
    moved |= pump_sends(px, p);
    moved |= pump_recvs(px, p, leaving);
    moved |= tutti_nettr_ctl_pump(px, p, leaving);
  }
  return moved;
}

/* Whether anything still needs the network: a send in flight, a slot or a
 * control message due. Posted receives alone do not keep the thread awake:
 * a rank that waits for one pokes it. */
static int busy(const struct tutti_nettr_proxy* px, int leaving) {
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_nettr_peer* p = &px->served[i];
    if (p->gone) {
      continue;
    }
    if (p->s_tail != __atomic_load_n(&p->sq->head, __ATOMIC_SEQ_CST) ||
        tutti_nettr_ctl_due(px, p, leaving)) {
      return 1;
    }
  }
  return 0;
}

/* Leaving: every slot and the goodbye are out (or the peer is lost). */
static int flushed(const struct tutti_nettr_proxy* px) {
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_nettr_peer* p = &px->served[i];
    if (!p->gone && (p->bye_sent < 2 || p->s_tail != p->s_head)) {
      return 0;
    }
  }
  return 1;
}

/* Idle: sleeps on the eventfd for a while that grows with the time since
 * the last move, from SLEEP_MIN_S to SLEEP_MAX_S: a message that arrives
 * while the rank waits is seen within that, and an idle communicator costs
 * a thousand wake-ups a second at most. */
static void idle_sleep(struct tutti_nettr_proxy* px, double idle_s) {
  double s = idle_s / 20;
  s = s < SLEEP_MIN_S ? SLEEP_MIN_S : s > SLEEP_MAX_S ? SLEEP_MAX_S : s;
  struct timespec ts = {0, (long)(s * 1e9)};
  struct pollfd pfd = {.fd = px->evfd, .events = POLLIN};
  if (ppoll(&pfd, 1, &ts, NULL) > 0) {
    uint64_t v;
    ssize_t r = read(px->evfd, &v, sizeof v);
    (void)r;
  }
}

/* Aborting: nothing more is flushed, but the rank's failure, if it has one,
 * still goes out (briefly), so that peers name its cause, not its leaving. */
static void abort_notice(struct tutti_nettr_proxy* px) {
  if (__atomic_load_n(&px->rank_bell->failed, __ATOMIC_ACQUIRE) == 0) {
    return;
  }
  const double until = tutti_socket_now() + ABORT_NOTICE_S;
  int due = 1;
  while (due && tutti_socket_now() < until) {
    due = 0;
    for (int i = 0; i < px->nserved; i++) {
      struct tutti_nettr_peer* p = &px->served[i];
      if (!p->gone && p->suspect_at == 0) {
        tutti_nettr_ctl_pump(px, p, 0);
        due |= tutti_nettr_ctl_due(px, p, 0);
      }
    }
  }
}

static void* proxy_main(void* arg) {
  struct tutti_nettr_proxy* px = arg;
  double last_move = tutti_socket_now();
  for (;;) {
    const int leaving = (int)__atomic_load_n(&px->stop, __ATOMIC_SEQ_CST);
    if (leaving == 2) {
      abort_notice(px);
      break;
    }
    const int moved = pump(px, leaving);
    const double now = tutti_socket_now();
    if (moved) {
      last_move = now;
    }
    if (leaving && (flushed(px) || now - last_move > px->flush_s)) {
      break;
    }
    if (moved || now - last_move < SPIN_S || busy(px, leaving)) {
      continue;
    }
    /* Announce, look once more, then sleep: a poke after the announcement
     * is never lost (the eventfd keeps it). */
    __atomic_store_n(&px->sleeping, 1, __ATOMIC_SEQ_CST);
    if (!leaving && !pump(px, leaving) && !busy(px, leaving)) {
      idle_sleep(px, now - last_move);
    } else {
      last_move = tutti_socket_now();
    }
    __atomic_store_n(&px->sleeping, 0, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

ncclResult_t tutti_nettr_proxy_start(struct tutti_nettr_proxy* px) {
  px->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (px->evfd < 0) {
    return tutti_error(ncclSystemError, "rank %d: cannot prepare the network proxy thread: %s",
                       px->rank, strerror(errno));
  }
  const int err = tutti_thread_start(&px->thread, proxy_main, px, "tutti-netproxy");
  if (err != 0) {
    return tutti_error(ncclSystemError, "rank %d: cannot start the network proxy thread: %s",
                       px->rank, strerror(err));
  }
  px->started = 1;
  return ncclSuccess;
}

void tutti_nettr_proxy_stop(struct tutti_nettr_proxy* px, int abort) {
  if (px->started) {
    __atomic_store_n(&px->stop, abort ? 2 : 1, __ATOMIC_SEQ_CST);
    poke(px);
    pthread_join(px->thread, NULL);
    px->started = 0;
  }
  if (px->evfd >= 0) {
    close(px->evfd);
    px->evfd = -1;
  }
}
