/* The device executor across hosts, the proxy thread (see link.h):
 * hands the slots kernels post into remote peers' shadows to the network,
 * keeps a receive posted into every slot of this rank's queues the kernels
 * have freed, moves the tails (arrivals) and heads (sends done) that show
 * both to the kernels, and turns a failed network operation into a stop
 * that names the peer. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/dev_comm.h"
#include "device/net/devnet.h"
#include "device/net/link.h"

extern "C" {
#include "util/check.h"
#include "util/socket.h"
}

#define IDLE_S 0.02           /* polling on after kernels finish, before sleeping */
#define TD_NET_FULL_PASSES 32 /* a pass over every receive, while kernels run */

static inline uint64_t ld(const char* p) {
  return __atomic_load_n((const uint64_t*)p, __ATOMIC_ACQUIRE);
}
static inline void st(char* p, uint64_t v) {
  __atomic_store_n((uint64_t*)p, v, __ATOMIC_RELEASE);
}

static void raise_error(struct tutti_dev_comm* dc, struct td_link* k) {
  struct td_net* nt = dc->netp;
  if (nt->raised) {
    return;
  }
  nt->raised = 1;
  td_raise_stop(dc, TD_STOP_NET, k->peer);
  WARN("rank %d: the connection to rank %d (host %s) broke while a device collective used it: %s",
       dc->rank, k->peer, k->hostname, k->why);
}

static int breaks(struct td_link* k, const char* doing) {
  if (!k->broken) {
    k->broken = 1;
    snprintf(k->why, sizeof k->why, "%s failed: %s", doing, tutti_last_error());
  }
  return 1;
}

/* Slots the kernels posted for the peer go out; a done send frees its
 * shadow slot for the kernels. */
static int pump_sends(struct tutti_dev_comm* dc, struct td_link* k, int c) {
  struct tutti_net* net = dc->netp->net;
  const struct td_layout& L = dc->lay;
  const int n = dc->nranks, me = dc->rank;
  struct td_chan* ch = &k->ch[c];
  int moved = 0;
  const uint64_t tail = ld(k->sh_host + td_ctr(L.tail_off, c, me, n));
  struct td_trace* tr = dc->netp->trace;
  if (tr != NULL) {
    const uint64_t t = td_trace_now();
    for (uint64_t s = ch->seen; s < tail; s++) {
      td_trace_at(tr, 'P', k->peer, c, s, t);
    }
    ch->seen = tail > ch->seen ? tail : ch->seen;
  }
  while (ch->fwd < tail) {
    const uint64_t sl = ch->fwd % TD_SLOTS;
    const uint32_t len =
        *(volatile uint32_t*)(k->sh_host + td_ctr(L.len_off, c, me, n) + sl * sizeof(uint32_t));
    void* req = NULL;
    char* data = k->sh_host + td_queue_off(&L, c, me, k->peer, n) + sl * dc->slot_bytes;
    if (net->ops->isend(net, ch->send, data, len, TD_NET_TAG, ch->send_mh, &req) != ncclSuccess) {
      return breaks(k, "a send");
    }
    if (req == NULL) {
      break;
    }
    ch->sreq[sl] = req;
    td_trace(tr, 'S', k->peer, c, ch->fwd);
    ch->fwd++;
    moved = 1;
  }
  while (ch->sent < ch->fwd) {
    int done = 0;
    if (net->ops->test(net, ch->sreq[ch->sent % TD_SLOTS], &done, NULL) != ncclSuccess) {
      return breaks(k, "a send");
    }
    if (!done) {
      break;
    }
    ch->sreq[ch->sent % TD_SLOTS] = NULL;
    td_trace(tr, 'D', k->peer, c, ch->sent);
    ch->sent++;
    moved = 1;
  }
  /* A shadow slot is free again once its send is done: the network then
   * holds the data, and lands it only in a receive the peer posted into a
   * slot its kernels freed, so the peer's queue needs no word back. */
  if (ch->sent > ch->head_shown) {
    ch->head_shown = ch->sent;
    st(dc->hosts[me].host + td_ctr(L.head_off, c, k->peer, n), ch->sent);
    moved = 1;
  }
  return moved;
}

/* Receives into every slot the kernels freed; arrivals, in order, move the tail. */
static int pump_recvs(struct tutti_dev_comm* dc, struct td_link* k, int c) {
  struct tutti_net* net = dc->netp->net;
  const struct td_layout& L = dc->lay;
  const int n = dc->nranks, me = dc->rank;
  struct td_chan* ch = &k->ch[c];
  char* mine = dc->hosts[me].host;
  int moved = 0;
  const uint64_t freed = ld(k->sh_host + td_ctr(L.head_off, c, me, n));
  while (ch->posted < freed + TD_SLOTS) {
    const uint64_t sl = ch->posted % TD_SLOTS;
    void* data = mine + td_queue_off(&L, c, k->peer, me, n) + sl * dc->slot_bytes;
    size_t size = dc->slot_bytes;
    int tag = TD_NET_TAG;
    void* req = NULL;
    if (net->ops->irecv(net, ch->recv, 1, &data, &size, &tag, &ch->recv_mh, &req) != ncclSuccess) {
      return breaks(k, "posting a receive");
    }
    if (req == NULL) {
      break;
    }
    ch->rreq[sl] = req;
    ch->posted++;
    moved = 1;
  }
  while (ch->arrived < ch->posted) {
    int done = 0;
    if (net->ops->test(net, ch->rreq[ch->arrived % TD_SLOTS], &done, NULL) != ncclSuccess) {
      return breaks(k, "a receive");
    }
    if (!done) {
      break;
    }
    ch->rreq[ch->arrived % TD_SLOTS] = NULL;
    ch->arrived++;
    st(mine + td_ctr(L.tail_off, c, k->peer, n), ch->arrived);
    td_trace(dc->netp->trace, 'A', k->peer, c, ch->arrived - 1);
    moved = 1;
  }
  return moved;
}

/* The goodbye, both ways, once every slot is out. Control messages go and
 * come in order, so only the oldest send and the oldest receive in flight
 * are tested (each test of a network may cost a system call). */
static int pump_ctl(struct tutti_dev_comm* dc, struct td_link* k, int leaving) {
  struct tutti_net* net = dc->netp->net;
  const struct td_layout& L = dc->lay;
  const int n = dc->nranks, me = dc->rank;
  int moved = 0;
  while (k->cs_done < k->cs_posted) {
    const int j = (int)(k->cs_done % TD_NET_CTL_SENDS);
    int done = 0;
    if (net->ops->test(net, k->cs_req[j], &done, NULL) != ncclSuccess) {
      k->cs_req[j] = NULL;
      return breaks(k, "sending the goodbye");
    }
    if (!done) {
      break;
    }
    k->cs_req[j] = NULL;
    k->cs_done++;
    moved = 1;
    if (k->bye_sent == 1 && k->cbuf[j].kind == TD_MSG_BYE) {
      k->bye_sent = 2;
    }
  }
  int all_sent = 1;
  for (int c = 0; c < dc->nch; c++) {
    all_sent &= k->ch[c].sent == ld(k->sh_host + td_ctr(L.tail_off, c, me, n));
  }
  const int bye = leaving && all_sent && !k->bye_sent;
  if (bye && k->cs_posted < k->cs_done + TD_NET_CTL_SENDS) {
    const int j = (int)(k->cs_posted % TD_NET_CTL_SENDS);
    struct td_ctl* m = &k->cbuf[j];
    m->kind = TD_MSG_BYE;
    m->nch = (uint32_t)dc->nch;
    for (int c = 0; c < dc->nch; c++) {
      m->heads[c] = ld(k->sh_host + td_ctr(L.head_off, c, me, n));
    }
    void* req = NULL;
    if (net->ops->isend(net, k->csend, m, sizeof *m, TD_NET_TAG, k->csend_mh, &req) !=
        ncclSuccess) {
      return breaks(k, "sending the goodbye");
    }
    if (req != NULL) {
      k->cs_req[j] = req;
      k->cs_posted++;
      k->bye_sent = 1;
      moved = 1;
    }
  }
  struct td_ctl* rbuf = k->cbuf + TD_NET_CTL_SENDS;
  while (!k->departed && k->cr_posted < k->cr_done + TD_NET_CTL_RECVS) {
    const int j = (int)(k->cr_posted % TD_NET_CTL_RECVS);
    void* data = &rbuf[j];
    size_t size = sizeof rbuf[j];
    int tag = TD_NET_TAG;
    void* req = NULL;
    if (net->ops->irecv(net, k->crecv, 1, &data, &size, &tag, &k->crecv_mh, &req) != ncclSuccess) {
      return breaks(k, "posting a control receive");
    }
    if (req == NULL) {
      break;
    }
    k->cr_req[j] = req;
    k->cr_posted++;
  }
  while (!k->departed && k->cr_done < k->cr_posted) {
    const int j = (int)(k->cr_done % TD_NET_CTL_RECVS);
    int done = 0, size = 0;
    if (net->ops->test(net, k->cr_req[j], &done, &size) != ncclSuccess) {
      k->cr_req[j] = NULL;
      return breaks(k, "a control receive");
    }
    if (!done) {
      break;
    }
    k->cr_req[j] = NULL;
    k->cr_done++;
    moved = 1;
    if (size != (int)sizeof rbuf[j] || rbuf[j].nch != (uint32_t)dc->nch) {
      k->broken = 1;
      snprintf(k->why, sizeof k->why, "malformed data (a control message of %d bytes)", size);
      return 1;
    }
    k->departed |= rbuf[j].kind == TD_MSG_BYE;
  }
  return moved;
}

/* One pass over a link: every channel's posted slots (memory reads), the
 * receives of the first `rch` channels (each test of a network may be a
 * system call) and, when `all`, of every channel and the control comm. */
static int pump_link(struct tutti_dev_comm* dc, struct td_link* k, int leaving, int rch, int all) {
  int moved = 0;
  for (int c = 0; c < dc->nch && !k->broken; c++) {
    moved |= pump_sends(dc, k, c);
    if (all || c < rch) {
      moved |= pump_recvs(dc, k, c);
    }
  }
  if (!k->broken && (all || leaving)) {
    moved |= pump_ctl(dc, k, leaving);
  }
  return moved;
}

/* Leaving: whether the peer is still owed a slot, a head or the goodbye. */
static int owed(struct tutti_dev_comm* dc, struct td_link* k) {
  if (k->broken || k->departed) {
    return 0;
  }
  for (int c = 0; c < dc->nch; c++) {
    const struct td_chan* ch = &k->ch[c];
    if (ch->sent != ld(k->sh_host + td_ctr(dc->lay.tail_off, c, dc->rank, dc->nranks))) {
      return 1;
    }
  }
  return k->bye_sent != 2;
}

/* The trace's K and F: kernels started and finished since the last look. */
static void trace_kernels(struct td_trace* tr, volatile int* f, int* started, int* finished,
                          uint64_t ns) {
  const int s = f[TD_FLAG_STARTED], e = f[TD_FLAG_FINISHED];
  for (; *started != s; (*started)++) {
    td_trace_at(tr, 'K', -1, 0, (uint64_t)(uint32_t)(*started + 1), ns);
  }
  for (; *finished != e; (*finished)++) {
    td_trace_at(tr, 'F', -1, 0, (uint64_t)(uint32_t)(*finished + 1), ns);
  }
}

/* Polls the network while kernels run and shortly after; otherwise sleeps
 * briefly between looks (network requests cannot be waited on). */
static void* proxy_main(void* arg) {
  struct tutti_dev_comm* dc = (struct tutti_dev_comm*)arg;
  struct td_net* nt = dc->netp;
  volatile int* f = dc->host_flags;
  double last = tutti_socket_now(), stop_at = 0;
  int seen_started = f[TD_FLAG_STARTED], seen_finished = f[TD_FLAG_FINISHED];
  uint32_t pass = 0;
  for (;;) {
    const int leaving = nt->stop;
    int moved = 0;
    const uint64_t pass_t0 = nt->trace != NULL ? td_trace_now() : 0;
    if (nt->trace != NULL) {
      trace_kernels(nt->trace, f, &seen_started, &seen_finished, pass_t0);
    }
    /* While a kernel runs, its receives come on the channels it uses (the
     * hint it wrote as it started): the others, and the goodbye, are
     * looked at every TD_NET_FULL_PASSES passes, so a stale hint costs time
     * but never progress. */
    const int busy = f[TD_FLAG_STARTED] != f[TD_FLAG_FINISHED];
    const int hint = f[TD_FLAG_CHANNELS];
    const int all = !nt->hint || !busy || hint < 1 || ++pass % TD_NET_FULL_PASSES == 0;
    for (int i = 0; i < nt->nlinks && !f[TD_FLAG_ABORT]; i++) {
      moved |= pump_link(dc, &nt->links[i], leaving, hint, all);
    }
    if (nt->trace != NULL) {
      nt->trace->passes++;
      if (busy) {
        nt->trace->busy_passes++;
        nt->trace->busy_ns += td_trace_now() - pass_t0;
      }
    }
    for (int i = 0; busy && i < nt->nlinks; i++) {
      if (nt->links[i].broken && !nt->links[i].departed) {
        raise_error(dc, &nt->links[i]);
      }
    }
    const double now = tutti_socket_now();
    if (moved) {
      last = now;
    }
    if (leaving) {
      /* Forward what peers are still owed (bounded), then go. */
      stop_at = stop_at == 0 ? now : stop_at;
      int any = 0;
      for (int i = 0; i < nt->nlinks && !f[TD_FLAG_ABORT]; i++) {
        any |= owed(dc, &nt->links[i]);
      }
      if (!any || now - stop_at > 2.0) {
        break;
      }
    }
    if (!moved && !busy && now - last > IDLE_S) {
      struct timespec ts = {0, now - last > 1.0 ? 1000000L : 100000L};
      nanosleep(&ts, NULL);
    } else if (!moved && (nt->yield || !busy)) {
      sched_yield(); /* TUTTI_TUNE=net.yield=0: spins while kernels run */
    }
  }
  return NULL;
}

ncclResult_t td_net_start(struct tutti_dev_comm* dc) {
  struct td_net* nt = dc->netp;
  if (nt == NULL || nt->nlinks == 0) {
    return ncclSuccess;
  }
  if (nt->trace == NULL) {
    nt->trace = td_trace_open(dc->net_trace, dc->rank);
  }
  nt->hint = dc->net_poll;
  nt->yield = dc->net_yield;
  if (pthread_create(&nt->thread, NULL, proxy_main, dc) != 0) {
    return tutti_error(ncclSystemError, "could not start the device proxy thread");
  }
  nt->live = 1;
  return ncclSuccess;
}

static void close_comm(struct tutti_net* net, void* comm, void* mh, int send) {
  if (comm == NULL) {
    return;
  }
  if (mh != NULL) {
    net->ops->dereg_mr(net, comm, mh);
  }
  if (send) {
    net->ops->close_send(net, comm);
  } else {
    net->ops->close_recv(net, comm);
  }
}

void td_net_free(struct tutti_dev_comm* dc) {
  struct td_net* nt = dc->netp;
  if (nt == NULL) {
    return;
  }
  if (nt->live) {
    nt->stop = 1;
    pthread_join(nt->thread, NULL);
  }
  for (int i = 0; nt->links != NULL && i < nt->nlinks; i++) {
    struct td_link* k = &nt->links[i];
    for (int c = 0; nt->net != NULL && c < TD_NET_CHANNELS; c++) {
      close_comm(nt->net, k->ch[c].send, k->ch[c].send_mh, 1);
      close_comm(nt->net, k->ch[c].recv, k->ch[c].recv_mh, 0);
    }
    if (nt->net != NULL) {
      close_comm(nt->net, k->csend, k->csend_mh, 1);
      close_comm(nt->net, k->crecv, k->crecv_mh, 0);
    }
    if (k->sh_host != NULL) {
      cudaFreeHost(k->sh_host);
    }
  }
  td_trace_close(nt->trace);
  tutti_net_close(nt->net);
  free(nt->links);
  free(nt);
  dc->netp = NULL;
}

ncclResult_t td_net_error(struct tutti_dev_comm* dc) {
  const int p = dc->host_flags[TD_FLAG_RANK];
  const char* host = "?";
  const char* why = "";
  for (int i = 0; dc->netp != NULL && i < dc->netp->nlinks; i++) {
    if (dc->netp->links[i].peer == p) {
      host = dc->netp->links[i].hostname;
      why = dc->netp->links[i].why;
    }
  }
  return tutti_error(ncclRemoteError,
                     "rank %d on host %s was lost (its connection broke: %s) while a device "
                     "collective of rank %d used it: the communicator is unusable; destroy it "
                     "(or shrink it without that rank)",
                     p, host, why, dc->rank);
}
