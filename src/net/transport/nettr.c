/* The network transport (see nettr.h): when every rank opened the same
 * network plugin (NCCL_NET_PLUGIN, or libnccl-net.so), it joins the pairs the
 * TCP transport would (ranks on different hosts; every pair with
 * NCCL_SHM_DISABLE=1), and TCP stands aside. Setup: each rank listens once
 * per connection it will accept, the handles are all-gathered, then every
 * connect and accept is driven until all are up, bounded by TUTTI_TIMEOUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "net/net.h"
#include "net/transport/nettr.h"
#include "call/records.h"
#include "util/seal.h"
#include "util/check.h"
#include "util/param.h"
#include "util/socket.h"

static TUTTI_PARAM(shm_disable, "NCCL_SHM_DISABLE", 0,
                   "1: ranks of one host do not share memory (no board): they connect over TCP "
                   "or the network");

#define REC_VERSION 1
#define FLUSH_S 2.0 /* teardown: longest wait without progress for posted data to leave */
#define NCONN (TUTTI_NETTR_MAX_COMMS + 1) /* data comms and the control comm, per peer */

/* All-gathered first: whether and which network each rank opened. */
struct nettr_rec {
  uint8_t version;
  uint8_t has_net;
  uint8_t shm_off;
  uint8_t ndevs;
  int32_t abi;
  uint8_t failed; /* its plugin was named and could not be used: every rank stops */
  char name[55];
};

struct nettr_state {
  struct tutti_net* net;
  int devs[TUTTI_NETTR_MAX_COMMS];
  int ndevs;
  char devname[TUTTI_NETTR_MAX_COMMS][64];
  struct tutti_nettr_proxy px;
  struct tutti_nettr_peer* peers; /* one per joined peer, in rank order */
  int npeers;
  char via[96];
};

static int joins(const struct tutti_transport_comm* tc, const struct nettr_rec* recs, int a,
                 int b) {
  return a != b &&
         (tc->peers[a].host_hash != tc->peers[b].host_hash || recs[a].shm_off || recs[b].shm_off);
}

static int comms_between(const struct nettr_rec* recs, int a, int b) {
  int k = recs[a].ndevs > recs[b].ndevs ? recs[a].ndevs : recs[b].ndevs;
  return k < 1 ? 1 : k > TUTTI_NETTR_MAX_COMMS ? TUTTI_NETTR_MAX_COMMS : k;
}

/* The devices this rank's connections stripe over (topo/nics.c). */
static ncclResult_t choose_devices(struct tutti_transport_comm* tc, struct nettr_state* st) {
  struct tutti_net* net = st->net;
  int local = 0;
  for (int r = 0; r < tc->rank; r++) {
    local += tc->peers[r].host_hash == tc->peers[tc->rank].host_hash;
  }
  NCCLCHECK(
      tutti_net_choose(net, NULL, local, st->devs, TUTTI_NETTR_MAX_COMMS, &st->ndevs, st->devname));
  if (st->ndevs == 0) {
    return tutti_error(ncclSystemError,
                       "the network plugin %s (%s) offers no device that moves host memory: set "
                       "NCCL_NET_PLUGIN=none to use tutti's own TCP transport",
                       net->name, net->path);
  }
  return ncclSuccess;
}

/* handles[r][p][i]: rank r's listen handle for connection i from rank p. */
static unsigned char* handle_at(unsigned char* h, int n, int r, int p, int i) {
  return h + (((size_t)r * (size_t)n + (size_t)p) * NCONN + (size_t)i) * TUTTI_NET_HANDLE_BYTES;
}

static ncclResult_t listen_all(struct tutti_transport_comm* tc, struct nettr_state* st,
                               const struct nettr_rec* recs, unsigned char* handles,
                               void** listens) {
  struct tutti_net* net = st->net;
  const int n = tc->nranks, me = tc->rank;
  for (int p = 0; p < n; p++) {
    if (!joins(tc, recs, me, p)) {
      continue;
    }
    const int k = comms_between(recs, me, p);
    for (int i = 0; i <= k; i++) {
      const int slot = i == k ? TUTTI_NETTR_MAX_COMMS : i; /* the control comm sits last */
      const int dev = st->devs[i % st->ndevs];
      if (net->ops->listen(net, dev, handle_at(handles, n, me, p, slot),
                           &listens[(size_t)p * NCONN + (size_t)slot]) != ncclSuccess) {
        return tutti_error(ncclSystemError,
                           "rank %d could not listen on device %d (%s) of the network plugin %s "
                           "for rank %d: %s",
                           me, dev, st->devname[i % st->ndevs], net->name, p, tutti_last_error());
      }
    }
  }
  return ncclSuccess;
}

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* Drives every connect and accept until all are up. */
static ncclResult_t connect_all(struct tutti_transport_comm* tc, struct nettr_state* st,
                                unsigned char* handles, void** listens) {
  struct tutti_net* net = st->net;
  const int n = tc->nranks, me = tc->rank;
  const double deadline = tutti_socket_now() + tutti_timeout_s();
  for (;;) {
    int left = 0, moved = 0, waiting_for = -1;
    for (int q = 0; q < st->npeers; q++) {
      struct tutti_nettr_peer* p = &st->peers[q];
      for (int i = 0; i <= p->ncomms; i++) {
        const int slot = i == p->ncomms ? TUTTI_NETTR_MAX_COMMS : i;
        struct tutti_nettr_link* l = i == p->ncomms ? &p->ctl : &p->data[i];
        if (l->send == NULL) {
          const int dev = st->devs[i % st->ndevs];
          NCCLCHECK(
              net->ops->connect(net, dev, handle_at(handles, n, p->base.rank, me, slot), &l->send));
          moved |= l->send != NULL;
        }
        if (l->recv == NULL) {
          NCCLCHECK(net->ops->accept(net, listens[(size_t)p->base.rank * NCONN + (size_t)slot],
                                     &l->recv));
          moved |= l->recv != NULL;
        }
        if (l->send == NULL || l->recv == NULL) {
          left++;
          waiting_for = p->base.rank;
        }
      }
    }
    if (left == 0) {
      return ncclSuccess;
    }
    if (tc->abort_flag != NULL && __atomic_load_n(tc->abort_flag, __ATOMIC_ACQUIRE)) {
      return tutti_error(ncclRemoteError, "rank %d: the communicator was aborted during setup", me);
    }
    if (tutti_socket_now() > deadline) {
      return tutti_error(ncclSystemError,
                         "rank %d could not connect to rank %d (host %s) over the network plugin "
                         "%s within TUTTI_TIMEOUT (%.0f s): %d connections still down; is that "
                         "rank alive and its network reachable?",
                         me, waiting_for, tc->peers[waiting_for].hostname, net->name,
                         tutti_timeout_s(), left);
    }
    if (!moved) {
      sleep_us(100);
    }
  }
}

static ncclResult_t start(struct tutti_transport_comm* tc, struct nettr_state* st,
                          const struct nettr_rec* recs) {
  for (int r = 0; r < tc->nranks; r++) {
    st->npeers += joins(tc, recs, tc->rank, r);
  }
  st->peers = calloc((size_t)(st->npeers > 0 ? st->npeers : 1), sizeof *st->peers);
  if (st->peers == NULL) {
    return tutti_error(ncclSystemError, "out of host memory for %d network peers", st->npeers);
  }
  for (int r = 0, i = 0; r < tc->nranks; r++) {
    if (joins(tc, recs, tc->rank, r)) {
      st->peers[i].ncomms = comms_between(recs, tc->rank, r);
      NCCLCHECK(tutti_nettr_peer_init(&st->peers[i++], r, tc->buffsize));
    }
  }
  return ncclSuccess;
}

static ncclResult_t go_live(struct tutti_transport_comm* tc, struct nettr_state* st) {
  struct tutti_nettr_proxy* px = &st->px;
  if (tc->bell == NULL) {
    tc->bell = &tc->private_bell; /* what transport.c would pick: the proxy rings it */
  }
  px->net = st->net;
  px->base.rank = tc->rank;
  px->base.peers = tc->peers;
  px->base.rank_bell = tc->bell;
  px->served = st->peers;
  px->nserved = st->npeers;
  px->base.flush_s = tutti_timeout_s() < FLUSH_S ? tutti_timeout_s() : FLUSH_S;
  for (int i = 0; i < st->npeers; i++) {
    struct tutti_nettr_peer* p = &st->peers[i];
    NCCLCHECK(tutti_nettr_peer_register(st->net, p));
    p->base.px = &px->base;
    tutti_proxy_peer_attach(&p->base, tc, st->via);
  }
  return tutti_nettr_proxy_start(px);
}

/* Which network every rank opened; whether this transport runs at all. */
static int agree(struct tutti_transport_comm* tc, struct nettr_rec* recs) {
  int any = 0;
  for (int r = 0; r < tc->nranks; r++) {
    for (int q = 0; q < tc->nranks; q++) {
      any |= joins(tc, recs, r, q);
    }
  }
  if (!any) {
    return 0;
  }
  for (int r = 0; r < tc->nranks; r++) {
    if (recs[r].version != REC_VERSION) {
      return 0; /* the TCP transport's own check names the odd rank */
    }
    if (!recs[r].has_net || strcmp(recs[r].name, recs[0].name) != 0) {
      if (tc->rank == 0 && (recs[0].has_net || recs[r].has_net)) {
        INFO(TUTTI_INIT | TUTTI_NET,
             "not every rank opened the same network plugin (rank 0: %s, rank %d: %s): ranks on "
             "different hosts use tutti's TCP transport",
             recs[0].has_net ? recs[0].name : "none", r, recs[r].has_net ? recs[r].name : "none");
      }
      return 0;
    }
  }
  return 1;
}

static void free_state(struct tutti_transport_comm* tc, struct nettr_state* st) {
  for (int i = 0; st->peers != NULL && i < st->npeers; i++) {
    struct tutti_nettr_peer* p = &st->peers[i];
    tutti_proxy_peer_detach(&p->base, tc);
    tutti_nettr_peer_free(st->net, p);
  }
  free(st->peers);
  tutti_net_close(st->net);
  free(st);
}

static ncclResult_t net_setup(struct tutti_transport_comm* tc) {
  const int n = tc->nranks;
  struct nettr_state* st = calloc(1, sizeof *st);
  struct nettr_rec* recs = calloc((size_t)n, sizeof *recs);
  if (st == NULL || recs == NULL) {
    free(st);
    free(recs);
    return tutti_error(ncclSystemError, "out of host memory for the network transport");
  }
  st->px.base.evfd = -1;
  /* A rank whose plugin fails still all-gathers: the others learn from it. */
  ncclResult_t res = tutti_net_open(tc->comm_hash, &st->net);
  if (res == ncclSuccess && st->net != NULL && choose_devices(tc, st) != ncclSuccess) {
    /* Said at WARN: the plugin loads but cannot carry host memory here. */
    tutti_net_close(st->net);
    st->net = NULL;
    st->ndevs = 0;
  }
  struct nettr_rec* mine = &recs[tc->rank];
  mine->version = REC_VERSION;
  mine->has_net = res == ncclSuccess && st->net != NULL;
  mine->shm_off = tutti_param_shm_disable() != 0;
  mine->ndevs = (uint8_t)st->ndevs;
  mine->abi = st->net != NULL ? st->net->abi : 0;
  mine->failed = res != ncclSuccess;
  if (st->net != NULL) {
    snprintf(mine->name, sizeof mine->name, "%.54s", st->net->name);
  }
  ncclResult_t gres = tutti_bootstrap_allgather(tc->boot, recs, sizeof *recs);
  if (res == ncclSuccess) {
    res = gres;
  }
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    if (recs[r].failed) {
      res = tutti_error(ncclSystemError,
                        "rank %d (host %s) could not use the network plugin it was given (its log "
                        "says why)",
                        r, tc->peers[r].hostname);
    }
  }
  if (res != ncclSuccess || !agree(tc, recs)) {
    tutti_net_close(st->net);
    free(st);
    free(recs);
    return res;
  }
  /* From here every rank takes part, so every pair TCP would join is ours. */
  tc->net_joined = 1;
  tc->priv[tutti_transport_net.index] = st;
  snprintf(st->via, sizeof st->via, "NET/%.40s/%.40s", st->net->name, st->devname[0]);
  const size_t hbytes = (size_t)n * (size_t)n * NCONN * TUTTI_NET_HANDLE_BYTES;
  unsigned char* handles = calloc(1, hbytes);
  void** listens = calloc((size_t)n * NCONN, sizeof *listens);
  uint8_t* oks = calloc((size_t)n, 1);
  res = handles == NULL || listens == NULL || oks == NULL
            ? tutti_error(ncclSystemError, "out of host memory for network handles")
            : start(tc, st, recs);
  if (res == ncclSuccess) {
    res = listen_all(tc, st, recs, handles, listens);
  }
  if (oks != NULL) {
    oks[tc->rank] = res == ncclSuccess;
    gres = tutti_bootstrap_allgather(tc->boot, oks, 1);
    res = res == ncclSuccess ? gres : res;
    for (int r = 0; r < n && res == ncclSuccess; r++) {
      if (!oks[r]) {
        res = tutti_error(ncclSystemError,
                          "rank %d could not listen on the network plugin %s (its log says why)", r,
                          st->net->name);
      }
    }
  }
  if (res == ncclSuccess) {
    res = tutti_bootstrap_allgather(tc->boot, handles, (size_t)n * NCONN * TUTTI_NET_HANDLE_BYTES);
  }
  if (res == ncclSuccess) {
    res = connect_all(tc, st, handles, listens);
  }
  for (size_t i = 0; listens != NULL && i < (size_t)n * NCONN; i++) {
    if (listens[i] != NULL) {
      st->net->ops->close_listen(st->net, listens[i]);
    }
  }
  if (res == ncclSuccess) {
    res = go_live(tc, st);
  }
  if (res == ncclSuccess && st->npeers > 0 && tutti_seal_enabled()) {
    /* As in NCCL, encryption covers the library's own sockets only. */
    WARN(
        "rank %d: ncclSetEncryption: the network plugin %s carries this communicator's data to "
        "%d peers outside the encryption (only tutti's own sockets are encrypted, as in NCCL); "
        "leave NCCL_NET_PLUGIN unset to keep it on the TCP transport, which encrypts",
        tc->rank, st->net->name, st->npeers);
  }
  if (res == ncclSuccess) {
    INFO(TUTTI_INIT | TUTTI_NET,
         "rank %d: %d peers over the network plugin %s (%s, ABI v%d) via %s, %d device(s)",
         tc->rank, st->npeers, st->net->name, st->net->path[0] ? st->net->path : "built in",
         st->net->abi, st->via, st->ndevs);
  }
  free(oks);
  free(listens);
  free(handles);
  free(recs);
  return res;
}

static void net_teardown(struct tutti_transport_comm* tc) {
  struct nettr_state* st = tc->priv[tutti_transport_net.index];
  if (st == NULL) {
    return;
  }
  const uint32_t why = tutti_rec_leave_reason(tutti_transport_bells(tc));
  st->px.base.leave_reason = why;
  tutti_nettr_proxy_stop(
      &st->px, tc->abort_flag != NULL && __atomic_load_n(tc->abort_flag, __ATOMIC_ACQUIRE));
  free_state(tc, st);
  tc->priv[tutti_transport_net.index] = NULL;
}

static int net_can_connect(const struct tutti_transport_comm* tc, int peer) {
  return peer != tc->rank && tc->net_joined;
}

const struct tutti_transport tutti_transport_net = {
    .name = "NET",
    .index = 2,
    .can_connect = net_can_connect,
    .setup = net_setup,
    .teardown = net_teardown,
};
