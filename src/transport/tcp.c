/* TCP transport: ranks on different hosts (or every pair, with
 * NCCL_SHM_DISABLE=1). tcp_connect.c connects the sockets, this file makes
 * them peers and threads, tcp_proxy.c moves the data. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/tcp_proxy.h"
#include "transport/tcp_connect.h"
#include "call/records.h"
#include "util/check.h"
#include "util/seal.h"
#include "topo/ifaces.h"
#include "util/param.h"

static TUTTI_PARAM(shm_disable, "NCCL_SHM_DISABLE", 0,
                   "1: ranks of one host do not share memory (no board): they connect over TCP "
                   "or the network");
static TUTTI_PARAM(nthreads, "NCCL_SOCKET_NTHREADS", 1,
                   "host TCP transport: proxy threads per communicator (1 to 16)");
static TUTTI_PARAM(nsocks_per_thread, "NCCL_NSOCKS_PERTHREAD", 2,
                   "host TCP transport: sockets per peer and thread (1 to 16; threads x this at "
                   "most 64)");

#define FLUSH_S 2.0 /* teardown: longest wait without progress for posted data to leave */

struct tcp_state {
  int npeers;
  struct tutti_tcp_peer* peers;
  int nthreads;
  struct tutti_tcp_proxy* threads;
  struct tutti_tcp_peer** served; /* threads' lists of peers, back to back */
  char via[32];
};

static int tcp_can_connect(const struct tutti_transport_comm* tc, int peer) {
  if (peer == tc->rank || tc->net_joined) {
    return 0;
  }
  return tc->peers[peer].host_hash != tc->peers[tc->rank].host_hash ||
         tutti_param_shm_disable() != 0;
}

static int sockets_per_peer(void) {
  int64_t t = tutti_param_nthreads(), s = tutti_param_nsocks_per_thread();
  t = t < 1 ? 1 : t > 16 ? 16 : t;
  s = s < 1 ? 1 : s > 16 ? 16 : s;
  return t * s > TUTTI_TCP_MAX_SOCKS ? TUTTI_TCP_MAX_SOCKS : (int)(t * s);
}

/* Peers, queues and proxy threads over the established sockets. */
static ncclResult_t start(struct tutti_transport_comm* tc, struct tcp_state* st,
                          struct tutti_tcp_setup* su) {
  for (int r = 0; r < tc->nranks; r++) {
    st->npeers += tutti_tcp_pair(tc, su->recs, tc->rank, r);
  }
  int nt = (int)tutti_param_nthreads();
  st->nthreads = nt < 1 ? 1 : nt > st->npeers ? st->npeers : nt;
  st->peers = calloc((size_t)st->npeers, sizeof *st->peers);
  st->threads = calloc((size_t)st->nthreads, sizeof *st->threads);
  st->served = calloc((size_t)st->npeers, sizeof *st->served);
  for (int t = 0; st->threads != NULL && t < st->nthreads; t++) {
    st->threads[t].base.evfd = -1; /* before any failure: teardown closes what is >= 0 */
  }
  if (st->peers == NULL || st->threads == NULL || st->served == NULL) {
    return tutti_error(ncclSystemError, "out of host memory for %d TCP peers", st->npeers);
  }
  for (int t = 0; t < st->nthreads; t++) {
    struct tutti_proxy* px = &st->threads[t].base;
    px->rank = tc->rank;
    px->peers = tc->peers;
    px->rank_bell = tc->bell;
    px->flush_s = tutti_timeout_s() < FLUSH_S ? tutti_timeout_s() : FLUSH_S;
  }
  for (int r = 0, i = 0; r < tc->nranks; r++) {
    if (!tutti_tcp_pair(tc, su->recs, tc->rank, r)) {
      continue;
    }
    struct tutti_tcp_peer* p = &st->peers[i];
    int* fds = su->fds + (size_t)r * (size_t)su->nsocks;
    const int ns = tutti_tcp_pair_socks(su, r);
    ncclResult_t res = tutti_tcp_peer_init(p, r, tc->buffsize, ns, fds);
    p->direct_bytes = tc->tcp_direct_bytes;
    tc->socket_passes |= p->direct_bytes > 0;
    for (int s = 0; s < ns; s++) {
      fds[s] = -1; /* the peer owns them now, even after a failure */
    }
    NCCLCHECK(res);
    /* Each thread serves a contiguous block of peers, in rank order. */
    struct tutti_tcp_proxy* px = &st->threads[(i * st->nthreads) / st->npeers];
    p->base.px = &px->base;
    if (px->nserved == 0) {
      px->served = st->served + i;
    }
    px->served[px->nserved++] = p;
    tutti_proxy_peer_attach(&p->base, tc, st->via);
    i++;
  }
  for (int t = 0; t < st->nthreads; t++) {
    NCCLCHECK(tutti_tcp_proxy_start(&st->threads[t]));
  }
  return ncclSuccess;
}

static ncclResult_t tcp_setup(struct tutti_transport_comm* tc) {
  const int n = tc->nranks;
  if (tc->net_joined) {
    return ncclSuccess; /* a network plugin carries these pairs (net/transport/nettr.c), on every
                           rank */
  }
  int need = 0;
  for (int r = 0; r < n; r++) {
    need |= tcp_can_connect(tc, r);
  }
  struct tutti_tcp_setup su = {tc, NULL, sockets_per_peer(), NULL, NULL, 0, 0, 0};
  unsigned char* recs = calloc((size_t)n, TUTTI_TCP_REC_LEN);
  su.fds = malloc((size_t)n * (size_t)su.nsocks * sizeof *su.fds);
  if (recs == NULL || su.fds == NULL) {
    free(recs);
    free(su.fds);
    return tutti_error(ncclSystemError, "out of host memory for TCP setup of %d ranks", n);
  }
  su.recs = recs;
  for (size_t i = 0; i < (size_t)n * (size_t)su.nsocks; i++) {
    su.fds[i] = -1;
  }
  int lfd = -1;
  struct tutti_iface iface;
  memset(&iface, 0, sizeof iface);
  ncclResult_t res = ncclSuccess;
  if (need) {
    res = tutti_iface_pick(&iface);
    if (res == ncclSuccess) {
      res = tutti_socket_listen(&iface.addr, &lfd);
    }
  }
  /* Always all-gather, even after a failure: the others learn from the
   * missing listener, instead of waiting for it. */
  unsigned char* mine = recs + (size_t)tc->rank * TUTTI_TCP_REC_LEN;
  mine[0] = 1;
  mine[1] = tutti_param_shm_disable() != 0;
  mine[2] = lfd >= 0;
  tutti_socket_put32(mine + 4, (uint32_t)su.nsocks);
  tutti_socket_addr_pack(&iface.addr, mine + 8);
  snprintf((char*)mine + 32, 16, "%s", iface.name);
  ncclResult_t gres = tutti_bootstrap_allgather(tc->boot, recs, TUTTI_TCP_REC_LEN);
  if (res == ncclSuccess) {
    res = gres;
  }
  if (res == ncclSuccess) {
    res = tutti_tcp_check_table(&su);
  }
  int any = 0;
  for (int r = 0; r < n; r++) {
    any |= tutti_tcp_pair(tc, recs, tc->rank, r);
  }
  if (res == ncclSuccess && any) {
    res = tutti_tcp_connect_all(&su, lfd);
  }
  if (lfd >= 0) {
    close(lfd);
  }
  if (res == ncclSuccess && any) {
    if (tc->bell == NULL) {
      tc->bell = &tc->private_bell; /* what transport.c would pick: the proxies ring it */
    }
    struct tcp_state* st = calloc(1, sizeof *st);
    if (st == NULL) {
      res = tutti_error(ncclSystemError, "out of host memory");
    } else {
      tc->priv[tutti_transport_tcp.index] = st;
      snprintf(st->via, sizeof st->via, "NET/Socket/%s", iface.name);
      res = start(tc, st, &su);
      INFO(TUTTI_INIT | TUTTI_NET,
           "rank %d: %d peers over TCP via %s, %d sockets per peer, %d proxy thread(s)", tc->rank,
           st->npeers, st->via, su.nsocks, st->nthreads);
    }
  }
  for (size_t i = 0; i < (size_t)n * (size_t)su.nsocks; i++) {
    if (su.fds[i] >= 0) {
      tutti_seal_close(su.fds[i]);
    }
  }
  free(su.fds);
  free(su.pend);
  free(recs);
  return res;
}

static void tcp_teardown(struct tutti_transport_comm* tc) {
  struct tcp_state* st = tc->priv[tutti_transport_tcp.index];
  if (st == NULL) {
    return;
  }
  /* Passed on in the goodbyes, and left in our doorbell for the local ranks
   * that see us depart: every survivor can name the rank that was lost. */
  const uint32_t why = tutti_rec_leave_reason(tutti_transport_bells(tc));
  for (int t = 0; st->threads != NULL && t < st->nthreads; t++) {
    st->threads[t].base.leave_reason = why;
    tutti_tcp_proxy_stop(&st->threads[t], tc->abort_flag != NULL &&
                                              __atomic_load_n(tc->abort_flag, __ATOMIC_ACQUIRE));
  }
  for (int i = 0; st->peers != NULL && i < st->npeers; i++) {
    struct tutti_tcp_peer* p = &st->peers[i];
    if (p->socks != NULL) {
      tutti_proxy_peer_detach(&p->base, tc);
    }
    tutti_tcp_peer_free(p);
  }
  free(st->served);
  free(st->threads);
  free(st->peers);
  free(st);
  tc->priv[tutti_transport_tcp.index] = NULL;
}

const struct tutti_transport tutti_transport_tcp = {
    .name = "NET/Socket",
    .index = 1,
    .can_connect = tcp_can_connect,
    .setup = tcp_setup,
    .teardown = tcp_teardown,
};
