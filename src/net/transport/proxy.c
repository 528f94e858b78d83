/* The network transport's proxy thread (see nettr.h): hands the slots
 * the rank posts to the network, keeps a receive posted for every slot the
 * rank has freed, and shows arrived slots to the rank in order. Plugin
 * requests cannot be waited on, so the thread polls them while anything is
 * in flight or the rank waits, and sleeps on its eventfd otherwise. */
#define _GNU_SOURCE /* ppoll */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/transport/nettr.h"
#include "util/check.h"
#include "util/socket.h"

#define SPIN_S 0.002        /* polling on after the last move, before any sleep */
#define SLEEP_MIN_S 50e-6   /* the first sleeps: a late message costs at most this */
#define SLEEP_MAX_S 1e-3    /* ... growing to this after 20 ms idle */
#define SUSPECT_S 0.2       /* a failed network operation waits this long for a goodbye */
#define ABORT_NOTICE_S 0.05 /* aborting: how long the rank's failure may take to go out */

ncclResult_t tutti_nettr_peer_init(struct tutti_nettr_peer* p, int rank, size_t buffsize) {
  const size_t ctl =
      (size_t)(TUTTI_NETTR_CTL_RECVS + TUTTI_NETTR_CTL_SENDS) * TUTTI_NETTR_CTL_BYTES;
  /* Plugin requests cannot wake the thread: a rank that finds no slot pokes it. */
  NCCLCHECK(tutti_proxy_peer_init(&p->base, rank, buffsize, ctl, 1));
  p->ctl_rbuf = (unsigned char(*)[TUTTI_NETTR_CTL_BYTES])p->base.extra;
  p->ctl_sbuf = p->ctl_rbuf + TUTTI_NETTR_CTL_RECVS;
  return ncclSuccess;
}

/* Registers `bytes` at `data` with `comm` into *mh, naming the peer on failure. */
static ncclResult_t reg(struct tutti_net* net, const struct tutti_nettr_peer* p, void* comm,
                        void* data, size_t bytes, void** mh) {
  if (net->ops->reg_mr(net, comm, data, bytes, TUTTI_NET_PTR_HOST, mh) != ncclSuccess) {
    return tutti_error(ncclSystemError,
                       "the network plugin %s could not register %zu bytes of host memory for "
                       "rank %d: %s",
                       net->name, bytes, p->base.rank, tutti_last_error());
  }
  return ncclSuccess;
}

ncclResult_t tutti_nettr_peer_register(struct tutti_net* net, struct tutti_nettr_peer* p) {
  const size_t slots = (size_t)p->base.nslots * p->base.slot_bytes;
  for (int i = 0; i < p->ncomms; i++) {
    NCCLCHECK(reg(net, p, p->data[i].send, tutti_proxy_slot(&p->base, p->base.sq, 0), slots,
                  &p->data[i].send_mh));
    NCCLCHECK(reg(net, p, p->data[i].recv, tutti_proxy_slot(&p->base, p->base.rq, 0), slots,
                  &p->data[i].recv_mh));
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
  tutti_proxy_peer_free(&p->base);
}

/* Hands posted slots to the network and frees the ones it is done with. */
static int pump_sends(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p) {
  struct tutti_net* net = px->net;
  int moved = 0;
  p->s_head = __atomic_load_n(&p->base.sq->head, __ATOMIC_SEQ_CST);
  while (p->s_next < p->s_head) {
    const uint64_t k = p->s_next;
    struct tutti_nettr_link* l = &p->data[k % (uint64_t)p->ncomms];
    void* req = NULL;
    if (net->ops->isend(net, l->send, tutti_proxy_slot(&p->base, p->base.sq, k),
                        p->base.sq->sizes[k % p->base.nslots], TUTTI_NETTR_TAG, l->send_mh,
                        &req) != ncclSuccess) {
      return tutti_nettr_suspect(p, "sending");
    }
    if (req == NULL) {
      break; /* the plugin has no room now */
    }
    p->sreq[k % p->base.nslots] = req;
    p->s_next++;
    moved = 1;
  }
  for (uint64_t k = p->s_tail; k < p->s_next; k++) {
    const uint32_t i = (uint32_t)(k % p->base.nslots);
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
  return moved | tutti_proxy_peer_sent(&p->base, p->sdone, &p->s_tail, p->s_next);
}

/* Keeps a receive posted into every free slot and shows arrivals in order. */
static int pump_recvs(struct tutti_nettr_proxy* px, struct tutti_nettr_peer* p, int leaving) {
  struct tutti_net* net = px->net;
  int moved = 0;
  p->r_tail = __atomic_load_n(&p->base.rq->tail, __ATOMIC_SEQ_CST);
  /* After the goodbye, receives go on for the slots it says were sent before it. */
  while (!leaving && (!p->bye_got || p->r_next < p->bye_slots) &&
         p->r_next < p->r_tail + p->base.nslots) {
    const uint64_t k = p->r_next;
    struct tutti_nettr_link* l = &p->data[k % (uint64_t)p->ncomms];
    void* data = tutti_proxy_slot(&p->base, p->base.rq, k);
    size_t size = p->base.slot_bytes;
    int tag = TUTTI_NETTR_TAG;
    void* req = NULL;
    if (net->ops->irecv(net, l->recv, 1, &data, &size, &tag, &l->recv_mh, &req) != ncclSuccess) {
      return tutti_nettr_suspect(p, "posting a receive");
    }
    if (req == NULL) {
      break;
    }
    p->rreq[k % p->base.nslots] = req;
    p->r_next++;
    moved = 1;
  }
  int bad = 0;
  for (uint64_t k = p->r_head; k < p->r_next && !bad; k++) {
    const uint32_t i = (uint32_t)(k % p->base.nslots);
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
  while (h < p->r_next && p->rdone[h % p->base.nslots]) {
    p->base.rq->sizes[h % p->base.nslots] = p->rsize[h % p->base.nslots];
    p->rdone[h % p->base.nslots] = 0;
    h++;
  }
  if (h != p->r_head) {
    p->r_head = h;
    if (!leaving) {
      __atomic_store_n(&p->base.rq->head, h, __ATOMIC_SEQ_CST);
      tutti_doorbell_ring(px->base.rank_bell);
    }
    tutti_nettr_check_left(p);
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
    p->base.gone = 1; /* departed (tutti_nettr_check_left) */
  } else if (!p->bye_got && tutti_socket_now() - p->suspect_at > SUSPECT_S) {
    tutti_nettr_lost(px, p, p->suspect_why, leaving);
  }
  return moved | p->base.gone;
}

static int pump(struct tutti_proxy* base, int leaving) {
  struct tutti_nettr_proxy* px = (struct tutti_nettr_proxy*)base;
  int moved = 0;
  for (int i = 0; i < px->nserved; i++) {
    struct tutti_nettr_peer* p = &px->served[i];
    if (p->base.gone) {
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
static int busy(const struct tutti_proxy* base, int leaving) {
  const struct tutti_nettr_proxy* px = (const struct tutti_nettr_proxy*)base;
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_nettr_peer* p = &px->served[i];
    if (p->base.gone) {
      continue;
    }
    if (p->s_tail != __atomic_load_n(&p->base.sq->head, __ATOMIC_SEQ_CST) ||
        tutti_nettr_ctl_due(px, p, leaving)) {
      return 1;
    }
  }
  return 0;
}

/* Leaving: every slot and the goodbye are out (or the peer is lost). */
static int flushed(const struct tutti_proxy* base) {
  const struct tutti_nettr_proxy* px = (const struct tutti_nettr_proxy*)base;
  for (int i = 0; i < px->nserved; i++) {
    const struct tutti_nettr_peer* p = &px->served[i];
    if (!p->base.gone && (p->bye_sent < 2 || p->s_tail != p->s_head)) {
      return 0;
    }
  }
  return 1;
}

/* Idle: sleeps on the eventfd for a while that grows with the time since
 * the last move, from SLEEP_MIN_S to SLEEP_MAX_S: a message that arrives
 * while the rank waits is seen within that, and an idle communicator costs
 * a thousand wake-ups a second at most. */
static void idle_sleep(struct tutti_proxy* px, double idle_s) {
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
static void abort_notice(struct tutti_proxy* base) {
  struct tutti_nettr_proxy* px = (struct tutti_nettr_proxy*)base;
  if (__atomic_load_n(&px->base.rank_bell->failed, __ATOMIC_ACQUIRE) == 0) {
    return;
  }
  const double until = tutti_socket_now() + ABORT_NOTICE_S;
  int due = 1;
  while (due && tutti_socket_now() < until) {
    due = 0;
    for (int i = 0; i < px->nserved; i++) {
      struct tutti_nettr_peer* p = &px->served[i];
      if (!p->base.gone && p->suspect_at == 0) {
        tutti_nettr_ctl_pump(px, p, 0);
        due |= tutti_nettr_ctl_due(px, p, 0);
      }
    }
  }
}

/* The thread announced it may sleep: one more pass, and only if it moved
 * nothing and nothing is due, a sleep. */
static int idle(struct tutti_proxy* base, int leaving, double idle_s) {
  if (!leaving && !pump(base, leaving) && !busy(base, leaving)) {
    idle_sleep(base, idle_s);
    return 0;
  }
  return 1;
}

/* The proxy's own parts of transport/proxy.c's loop. */
static const struct tutti_proxy_ops nettr_proxy_ops = {
    .what = "network",
    .thread = "tutti-netproxy",
    .spin_s = SPIN_S,
    .pump = pump,
    .flushed = flushed,
    .busy = busy,
    .idle = idle,
    .abort = abort_notice,
};

ncclResult_t tutti_nettr_proxy_start(struct tutti_nettr_proxy* px) {
  px->base.ops = &nettr_proxy_ops;
  return tutti_proxy_start(&px->base);
}

void tutti_nettr_proxy_stop(struct tutti_nettr_proxy* px, int abort) {
  tutti_proxy_stop(&px->base, abort);
}
