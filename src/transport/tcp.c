/* TCP transport: ranks on different hosts (or every pair, with
 * NCCL_SHM_DISABLE=1). Setup connects the sockets; proxy.c moves the data. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "transport/proxy.h"
#include "util/check.h"
#include "util/ifaces.h"
#include "util/param.h"

static TUTTI_PARAM(shm_disable, "NCCL_SHM_DISABLE", 0);
static TUTTI_PARAM(nthreads, "NCCL_SOCKET_NTHREADS", 1);
static TUTTI_PARAM(nsocks_per_thread, "NCCL_NSOCKS_PERTHREAD", 2);

#define MAX_SOCKS 64
#define REC_LEN 48   /* all-gathered: version, shm off, listening, nsocks, address, ifname */
#define HELLO_LEN 48 /* "tuttiTC1", secret, comm hash, from, to, socket index, nsocks */
#define ACK_LEN 24   /* "tuttiTA1", comm hash, rank, socket index */
#define HELLO_S 5.0  /* time a new connection has to present itself */
#define FLUSH_S 2.0  /* teardown: longest wait without progress for posted data to leave */

struct tcp_state {
  int npeers;
  struct tutti_proxy_peer* peers;
  int nthreads;
  struct tutti_proxy* threads;
  struct tutti_proxy_peer** served; /* threads' lists of peers, back to back */
  char via[32];
};

/* A connection during setup: ours waiting for an ack, or a stranger-until-
 * proven-otherwise waiting for its hello. */
struct pending {
  int fd;
  int out;
  int peer, idx; /* outgoing only */
  size_t got;
  unsigned char buf[HELLO_LEN];
  double deadline;
};

/* Everything setup needs in one place. */
struct setup {
  struct tutti_transport_comm* tc;
  const unsigned char* recs;
  int nsocks;
  int* fds; /* [rank * nsocks + index], -1 until established */
  struct pending* pend;
  int npend, cap;
  int left;
};

static void put64(unsigned char* p, uint64_t v) {
  tutti_proxy_put32(p, (uint32_t)(v >> 32));
  tutti_proxy_put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const unsigned char* p) {
  return ((uint64_t)tutti_proxy_get32(p) << 32) | tutti_proxy_get32(p + 4);
}

static int tcp_can_connect(const struct tutti_transport_comm* tc, int peer) {
  if (peer == tc->rank) {
    return 0;
  }
  return tc->peers[peer].host_hash != tc->peers[tc->rank].host_hash ||
         tutti_param_shm_disable() != 0;
}

static int sockets_per_peer(void) {
  int64_t t = tutti_param_nthreads(), s = tutti_param_nsocks_per_thread();
  t = t < 1 ? 1 : t > 16 ? 16 : t;
  s = s < 1 ? 1 : s > 16 ? 16 : s;
  return t * s > MAX_SOCKS ? MAX_SOCKS : (int)(t * s);
}

static const unsigned char* rec_of(const struct setup* su, int r) {
  return su->recs + (size_t)r * REC_LEN;
}

/* Whether ranks a and b talk over TCP, from the all-gathered records (so
 * both ends agree even if their environments differ). */
static int pair_tcp(const struct tutti_transport_comm* tc, const unsigned char* recs, int a,
                    int b) {
  return a != b && (tc->peers[a].host_hash != tc->peers[b].host_hash ||
                    recs[(size_t)a * REC_LEN + 1] || recs[(size_t)b * REC_LEN + 1]);
}

static int pair_socks(const struct setup* su, int r) {
  int theirs = (int)tutti_proxy_get32(rec_of(su, r) + 4);
  return theirs < su->nsocks ? theirs : su->nsocks;
}

static void peer_name(const struct setup* su, int r, char* buf, size_t len) {
  union tutti_socket_addr a;
  char where[TUTTI_SOCKET_ADDR_STRLEN] = "?";
  if (tutti_socket_addr_unpack(rec_of(su, r) + 8, &a) == 0) {
    tutti_socket_format(&a, where, sizeof where);
  }
  snprintf(buf, len, "rank %d (host %s, %.16s %s)", r, su->tc->peers[r].hostname,
           (const char*)rec_of(su, r) + 32, where);
}

/* The table must describe one consistent job before anyone connects. */
static ncclResult_t check_table(const struct setup* su) {
  const struct tutti_transport_comm* tc = su->tc;
  for (int r = 0; r < tc->nranks; r++) {
    const unsigned char* a = rec_of(su, r);
    if (a[0] != 1) {
      return tutti_error(ncclInvalidUsage, "rank %d runs a different tutti version (TCP record %u)",
                         r, a[0]);
    }
    /* A count outside 1..MAX_SOCKS would leave a pair without sockets (or
     * with more than the peer has); a damaged address would only fail at
     * the timeout: both are refused here, naming the rank. */
    const uint32_t ns = tutti_proxy_get32(a + 4);
    union tutti_socket_addr addr;
    if (ns < 1 || ns > MAX_SOCKS) {
      return tutti_error(ncclInvalidUsage,
                         "rank %d published %u TCP sockets per peer (1 to %d expected): do all "
                         "ranks run the same tutti version?",
                         r, ns, MAX_SOCKS);
    }
    if (a[2] && tutti_socket_addr_unpack(a + 8, &addr) != 0) {
      return tutti_error(ncclInvalidUsage,
                         "rank %d published a TCP listening address that is neither IPv4 nor "
                         "IPv6: do all ranks run the same tutti version?",
                         r);
    }
    for (int q = 0; q < r; q++) {
      if (tc->peers[q].host_hash == tc->peers[r].host_hash && a[1] != rec_of(su, q)[1]) {
        return tutti_error(ncclInvalidUsage,
                           "rank %d has NCCL_SHM_DISABLE=%d and rank %d on the same host (%s) "
                           "has %d: set it the same for every rank",
                           q, rec_of(su, q)[1], r, tc->peers[r].hostname, a[1]);
      }
    }
    if (pair_tcp(tc, su->recs, tc->rank, r) && !a[2]) {
      return tutti_error(ncclSystemError,
                         "rank %d (host %s) opened no TCP listener, so rank %d cannot reach it: "
                         "see that rank's log",
                         r, tc->peers[r].hostname, tc->rank);
    }
  }
  return ncclSuccess;
}

static void add_pending(struct setup* su, int fd, int out, int peer, int idx) {
  if (su->npend == su->cap) {
    /* Full of connections that have not presented themselves: drop the oldest stranger. */
    for (int i = 0; i < su->npend; i++) {
      if (!su->pend[i].out) {
        close(su->pend[i].fd);
        su->pend[i] = su->pend[--su->npend];
        break;
      }
    }
  }
  if (su->npend == su->cap) {
    close(fd);
    return;
  }
  struct pending* p = &su->pend[su->npend++];
  memset(p, 0, sizeof *p);
  p->fd = fd;
  p->out = out;
  p->peer = peer;
  p->idx = idx;
  p->deadline = tutti_socket_now() + HELLO_S;
}

/* Why an incoming hello is not one this rank expects, or NULL. */
static const char* bad_hello(const struct setup* su, const unsigned char* h, int* from, int* idx) {
  const struct tutti_transport_comm* tc = su->tc;
  unsigned diff = 0;
  for (int i = 0; i < 16; i++) {
    diff |= h[8 + i] ^ tc->secret[i];
  }
  *from = (int)tutti_proxy_get32(h + 32);
  *idx = (int)tutti_proxy_get32(h + 40);
  if (memcmp(h, "tuttiTC1", 8) != 0 || diff != 0) {
    return "it did not present this job's secret";
  }
  if (get64(h + 24) != tc->comm_hash || (int)tutti_proxy_get32(h + 36) != tc->rank) {
    return "it is meant for another communicator or rank";
  }
  if (*from < 0 || *from >= tc->rank || !pair_tcp(tc, su->recs, *from, tc->rank) || *idx < 0 ||
      *idx >= pair_socks(su, *from)) {
    return "its rank or socket index is not one this rank expects";
  }
  if (su->fds[(size_t)*from * (size_t)su->nsocks + (size_t)*idx] >= 0) {
    return "that socket is already connected";
  }
  return NULL;
}

/* A complete hello or ack arrived on pending connection i. */
static ncclResult_t complete(struct setup* su, int i) {
  struct pending* p = &su->pend[i];
  const struct tutti_transport_comm* tc = su->tc;
  int from = p->peer, idx = p->idx;
  if (p->out) {
    if (memcmp(p->buf, "tuttiTA1", 8) != 0 || get64(p->buf + 8) != tc->comm_hash ||
        (int)tutti_proxy_get32(p->buf + 16) != p->peer ||
        (int)tutti_proxy_get32(p->buf + 20) != p->idx) {
      char who[160];
      peer_name(su, p->peer, who, sizeof who);
      return tutti_error(ncclSystemError,
                         "rank %d: %s answered TCP connection %d with a wrong acknowledgement: "
                         "is another program listening there?",
                         tc->rank, who, p->idx);
    }
  } else {
    const char* why = bad_hello(su, p->buf, &from, &idx);
    unsigned char ack[ACK_LEN];
    memcpy(ack, "tuttiTA1", 8);
    put64(ack + 8, tc->comm_hash);
    tutti_proxy_put32(ack + 16, (uint32_t)tc->rank);
    tutti_proxy_put32(ack + 20, (uint32_t)idx);
    if (why != NULL || send(p->fd, ack, ACK_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) != ACK_LEN) {
      INFO(TUTTI_NET, "rank %d dropped a connection to its TCP listener: %s", tc->rank,
           why != NULL ? why : "it closed before the acknowledgement");
      close(p->fd);
      su->pend[i] = su->pend[--su->npend];
      return ncclSuccess;
    }
  }
  su->fds[(size_t)from * (size_t)su->nsocks + (size_t)idx] = p->fd;
  su->left--;
  su->pend[i] = su->pend[--su->npend];
  return ncclSuccess;
}

/* Reads what pending connection i has; removes it when done or dropped. */
static ncclResult_t service(struct setup* su, int i) {
  struct pending* p = &su->pend[i];
  size_t want = (p->out ? ACK_LEN : HELLO_LEN) - p->got;
  ssize_t n = recv(p->fd, p->buf + p->got, want, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return ncclSuccess;
  }
  if (n <= 0) {
    if (p->out) {
      char who[160];
      peer_name(su, p->peer, who, sizeof who);
      return tutti_error(ncclRemoteError,
                         "rank %d: %s closed TCP connection %d during setup (%s): it may have "
                         "failed (see its log) or the job secrets differ",
                         su->tc->rank, who, p->idx, n == 0 ? "end of file" : strerror(errno));
    }
    close(p->fd);
    su->pend[i] = su->pend[--su->npend];
    return ncclSuccess;
  }
  p->got += (size_t)n;
  return p->got == (p->out ? ACK_LEN : HELLO_LEN) ? complete(su, i) : ncclSuccess;
}

static ncclResult_t timed_out(const struct setup* su, double t) {
  const struct tutti_transport_comm* tc = su->tc;
  for (int r = 0; r < tc->nranks; r++) {
    for (int s = 0; pair_tcp(tc, su->recs, tc->rank, r) && s < pair_socks(su, r); s++) {
      if (su->fds[(size_t)r * (size_t)su->nsocks + (size_t)s] < 0) {
        char who[160];
        peer_name(su, r, who, sizeof who);
        return tutti_error(ncclRemoteError,
                           "rank %d: TCP connection %d with %s was not set up within %.0f s "
                           "(TUTTI_TIMEOUT): is that rank alive, and can the hosts reach each "
                           "other on the interfaces chosen (NCCL_SOCKET_IFNAME)?",
                           tc->rank, s, who, t);
      }
    }
  }
  return tutti_error(ncclRemoteError, "rank %d: TCP setup timed out", tc->rank);
}

/* Lower ranks connect to higher ranks' listeners; one event loop then
 * accepts and checks hellos while waiting for our acks, so no rank waits on
 * another that waits on a third. */
static ncclResult_t connect_all(struct setup* su, int lfd) {
  struct tutti_transport_comm* tc = su->tc;
  const double t = tutti_timeout_s(), deadline = tutti_socket_now() + t;
  for (int r = 0; r < tc->nranks; r++) {
    if (pair_tcp(tc, su->recs, tc->rank, r)) {
      su->left += pair_socks(su, r);
    }
  }
  su->cap = su->left + 32;
  su->pend = calloc((size_t)su->cap, sizeof *su->pend);
  struct pollfd* pfd = calloc((size_t)su->cap + 1, sizeof *pfd);
  if (su->pend == NULL || pfd == NULL) {
    free(pfd);
    return tutti_error(ncclSystemError, "out of host memory for TCP setup");
  }
  ncclResult_t res = ncclSuccess;
  for (int r = tc->rank + 1; r < tc->nranks && res == ncclSuccess; r++) {
    union tutti_socket_addr addr;
    if (!pair_tcp(tc, su->recs, tc->rank, r)) {
      continue;
    }
    char who[160];
    peer_name(su, r, who, sizeof who);
    struct tutti_socket_io io = {deadline, NULL, who, "TCP transport setup"};
    tutti_socket_addr_unpack(rec_of(su, r) + 8, &addr);
    unsigned char hello[HELLO_LEN];
    memcpy(hello, "tuttiTC1", 8);
    memcpy(hello + 8, tc->secret, 16);
    put64(hello + 24, tc->comm_hash);
    tutti_proxy_put32(hello + 32, (uint32_t)tc->rank);
    tutti_proxy_put32(hello + 36, (uint32_t)r);
    tutti_proxy_put32(hello + 44, (uint32_t)pair_socks(su, r));
    for (int s = 0; s < pair_socks(su, r) && res == ncclSuccess; s++) {
      int fd = -1;
      tutti_proxy_put32(hello + 40, (uint32_t)s);
      res = tutti_socket_connect(&addr, &io,
                                 "does NCCL_SOCKET_IFNAME pick an interface the hosts share?", &fd);
      if (res == ncclSuccess) {
        add_pending(su, fd, 1, r, s);
        res = tutti_socket_send_all(fd, hello, HELLO_LEN, &io);
      }
    }
  }
  while (res == ncclSuccess && su->left > 0) {
    double now = tutti_socket_now();
    if (now > deadline) {
      res = timed_out(su, t);
      break;
    }
    int n = 0;
    pfd[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < su->npend; i++) {
      pfd[n++] = (struct pollfd){.fd = su->pend[i].fd, .events = POLLIN};
    }
    (void)poll(pfd, (nfds_t)n, 100);
    for (int i = su->npend - 1; i >= 0 && res == ncclSuccess; i--) {
      res = service(su, i);
    }
    for (int i = su->npend - 1; i >= 0; i--) {
      if (!su->pend[i].out && tutti_socket_now() > su->pend[i].deadline) {
        INFO(TUTTI_NET, "rank %d dropped a connection that presented nothing for %.0f s", tc->rank,
             HELLO_S);
        close(su->pend[i].fd);
        su->pend[i] = su->pend[--su->npend];
      }
    }
    int fd;
    while (lfd >= 0 && (fd = tutti_socket_try_accept(lfd, NULL)) >= 0) {
      add_pending(su, fd, 0, -1, -1);
    }
  }
  for (int i = 0; i < su->npend; i++) {
    close(su->pend[i].fd);
  }
  free(pfd);
  return res;
}

/* Peers, queues and proxy threads over the established sockets. */
static ncclResult_t start(struct tutti_transport_comm* tc, struct tcp_state* st, struct setup* su) {
  for (int r = 0; r < tc->nranks; r++) {
    st->npeers += pair_tcp(tc, su->recs, tc->rank, r);
  }
  int nt = (int)tutti_param_nthreads();
  st->nthreads = nt < 1 ? 1 : nt > st->npeers ? st->npeers : nt;
  st->peers = calloc((size_t)st->npeers, sizeof *st->peers);
  st->threads = calloc((size_t)st->nthreads, sizeof *st->threads);
  st->served = calloc((size_t)st->npeers, sizeof *st->served);
  for (int t = 0; st->threads != NULL && t < st->nthreads; t++) {
    st->threads[t].evfd = -1; /* before any failure: teardown closes what is >= 0 */
  }
  if (st->peers == NULL || st->threads == NULL || st->served == NULL) {
    return tutti_error(ncclSystemError, "out of host memory for %d TCP peers", st->npeers);
  }
  for (int t = 0; t < st->nthreads; t++) {
    struct tutti_proxy* px = &st->threads[t];
    px->rank = tc->rank;
    px->peers = tc->peers;
    px->rank_bell = tc->bell;
    px->flush_s = tutti_timeout_s() < FLUSH_S ? tutti_timeout_s() : FLUSH_S;
  }
  for (int r = 0, i = 0; r < tc->nranks; r++) {
    if (!pair_tcp(tc, su->recs, tc->rank, r)) {
      continue;
    }
    struct tutti_proxy_peer* p = &st->peers[i];
    int* fds = su->fds + (size_t)r * (size_t)su->nsocks;
    const int ns = pair_socks(su, r);
    ncclResult_t res = tutti_proxy_peer_init(p, r, tc->buffsize, ns, fds);
    for (int s = 0; s < ns; s++) {
      fds[s] = -1; /* the peer owns them now, even after a failure */
    }
    NCCLCHECK(res);
    /* Each thread serves a contiguous block of peers, in rank order. */
    p->px = &st->threads[(i * st->nthreads) / st->npeers];
    if (p->px->nserved == 0) {
      p->px->served = st->served + i;
    }
    p->px->served[p->px->nserved++] = p;
    p->send_end.base.via = p->recv_end.base.via = st->via;
    tc->send[r] = &p->send_end.base;
    tc->recv[r] = &p->recv_end.base;
    tc->peer_bells[r] = &p->bell;
    i++;
  }
  for (int t = 0; t < st->nthreads; t++) {
    NCCLCHECK(tutti_proxy_start(&st->threads[t]));
  }
  return ncclSuccess;
}

static ncclResult_t tcp_setup(struct tutti_transport_comm* tc) {
  const int n = tc->nranks;
  int need = 0;
  for (int r = 0; r < n; r++) {
    need |= tcp_can_connect(tc, r);
  }
  struct setup su = {tc, NULL, sockets_per_peer(), NULL, NULL, 0, 0, 0};
  unsigned char* recs = calloc((size_t)n, REC_LEN);
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
  unsigned char* mine = recs + (size_t)tc->rank * REC_LEN;
  mine[0] = 1;
  mine[1] = tutti_param_shm_disable() != 0;
  mine[2] = lfd >= 0;
  tutti_proxy_put32(mine + 4, (uint32_t)su.nsocks);
  tutti_socket_addr_pack(&iface.addr, mine + 8);
  snprintf((char*)mine + 32, 16, "%s", iface.name);
  ncclResult_t gres = tutti_bootstrap_allgather(tc->boot, recs, REC_LEN);
  if (res == ncclSuccess) {
    res = gres;
  }
  if (res == ncclSuccess) {
    res = check_table(&su);
  }
  int any = 0;
  for (int r = 0; r < n; r++) {
    any |= pair_tcp(tc, recs, tc->rank, r);
  }
  if (res == ncclSuccess && any) {
    res = connect_all(&su, lfd);
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
      close(su.fds[i]);
    }
  }
  free(su.fds);
  free(su.pend);
  free(recs);
  return res;
}

/* Why this rank leaves, if the job lost a rank: what its own proxies saw,
 * else what a peer reported (a broken connection, or the reason it left). */
static uint32_t leave_reason(const struct tutti_transport_comm* tc) {
  uint32_t v = tc->bell != NULL ? __atomic_load_n(&tc->bell->lost, __ATOMIC_ACQUIRE) : 0;
  for (int r = 0; r < tc->nranks && v == 0; r++) {
    if (tc->peer_bells[r] != NULL && r != tc->rank) {
      v = __atomic_load_n(&tc->peer_bells[r]->lost, __ATOMIC_ACQUIRE);
      if ((v & TUTTI_DOORBELL_LOST_SELF) == TUTTI_DOORBELL_LOST_SELF) {
        v = (v & ~TUTTI_DOORBELL_LOST_SELF) | (uint32_t)(r + 1);
      }
    }
  }
  return v;
}

static void tcp_teardown(struct tutti_transport_comm* tc) {
  struct tcp_state* st = tc->priv[tutti_transport_tcp.index];
  if (st == NULL) {
    return;
  }
  /* Passed on in the goodbyes, and left in our doorbell for the local ranks
   * that see us depart: every survivor can name the rank that was lost. */
  const uint32_t why = leave_reason(tc);
  uint32_t none = 0;
  if (why != 0 && tc->bell != NULL) {
    __atomic_compare_exchange_n(&tc->bell->lost, &none, why, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  }
  for (int t = 0; st->threads != NULL && t < st->nthreads; t++) {
    st->threads[t].leave_reason = why;
    tutti_proxy_stop(&st->threads[t],
                     tc->abort_flag != NULL && __atomic_load_n(tc->abort_flag, __ATOMIC_ACQUIRE));
  }
  for (int i = 0; st->peers != NULL && i < st->npeers; i++) {
    struct tutti_proxy_peer* p = &st->peers[i];
    if (p->socks != NULL) {
      if (tc->send[p->rank] == &p->send_end.base) {
        tc->send[p->rank] = NULL;
        tc->recv[p->rank] = NULL;
      }
      if (tc->peer_bells[p->rank] == &p->bell) {
        tc->peer_bells[p->rank] = NULL;
      }
    }
    tutti_proxy_peer_free(p);
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
