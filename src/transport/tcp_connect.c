/* The tcp transport's connection setup (see tcp_connect.h): every pair's
 * sockets, each opened with a hello, then both ends prove the job's secret
 * without sending it (util/hello.h: the listener first); strangers are
 * dropped. */
#include "transport/tcp_connect.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/check.h"
#include "util/hello.h"
#include "util/param.h"
#include "util/seal.h"
#include "util/socket.h"

#define HELLO_LEN 48 /* "tuttiTC2", nonce, comm hash, from, to, socket index, nsocks */
#define PROOF_LEN (TUTTI_HELLO_NONCE + TUTTI_HELLO_MAC) /* listener: its nonce, its MAC */
#define MAC_LEN TUTTI_HELLO_MAC                         /* connector: its MAC */
#define HELLO_S 5.0 /* time a new connection has to present itself */

/* A connection during setup: ours sending its hello and waiting for the
 * listener's proof, or a stranger-until-proven-otherwise whose hello, then
 * MAC, this rank waits for. */
struct tutti_tcp_pending {
  int fd;
  int out;
  int proved;    /* incoming: our proof is sent, its MAC is awaited */
  int peer, idx; /* outgoing; incoming once its hello is in */
  size_t got, sent;
  unsigned char buf[HELLO_LEN];   /* what is being read: a hello, a proof, a MAC */
  unsigned char hello[HELLO_LEN]; /* the connector's: ours, sent from the event loop, or its */
  unsigned char nonce[TUTTI_HELLO_NONCE]; /* incoming: ours, in the proof */
  double deadline;
};

static void put64(unsigned char* p, uint64_t v) {
  tutti_socket_put32(p, (uint32_t)(v >> 32));
  tutti_socket_put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const unsigned char* p) {
  return ((uint64_t)tutti_socket_get32(p) << 32) | tutti_socket_get32(p + 4);
}

static const unsigned char* rec_of(const struct tutti_tcp_setup* su, int r) {
  return su->recs + (size_t)r * TUTTI_TCP_REC_LEN;
}

int tutti_tcp_pair(const struct tutti_transport_comm* tc, const unsigned char* recs, int a, int b) {
  return a != b &&
         (tc->peers[a].host_hash != tc->peers[b].host_hash ||
          recs[(size_t)a * TUTTI_TCP_REC_LEN + 1] || recs[(size_t)b * TUTTI_TCP_REC_LEN + 1]);
}

int tutti_tcp_pair_socks(const struct tutti_tcp_setup* su, int r) {
  int theirs = (int)tutti_socket_get32(rec_of(su, r) + 4);
  return theirs < su->nsocks ? theirs : su->nsocks;
}

static void peer_name(const struct tutti_tcp_setup* su, int r, char* buf, size_t len) {
  union tutti_socket_addr a;
  char where[TUTTI_SOCKET_ADDR_STRLEN] = "?";
  if (tutti_socket_addr_unpack(rec_of(su, r) + 8, &a) == 0) {
    tutti_socket_format(&a, where, sizeof where);
  }
  snprintf(buf, len, "rank %d (host %s, %.16s %s)", r, su->tc->peers[r].hostname,
           (const char*)rec_of(su, r) + 32, where);
}

ncclResult_t tutti_tcp_check_table(const struct tutti_tcp_setup* su) {
  const struct tutti_transport_comm* tc = su->tc;
  for (int r = 0; r < tc->nranks; r++) {
    const unsigned char* a = rec_of(su, r);
    if (a[0] != 1) {
      return tutti_error(ncclInvalidUsage, "rank %d runs a different tutti version (TCP record %u)",
                         r, a[0]);
    }
    /* A count outside 1..TUTTI_TCP_MAX_SOCKS would leave a pair without sockets (or
     * with more than the peer has); a damaged address would only fail at
     * the timeout: both are refused here, naming the rank. */
    const uint32_t ns = tutti_socket_get32(a + 4);
    union tutti_socket_addr addr;
    if (ns < 1 || ns > TUTTI_TCP_MAX_SOCKS) {
      return tutti_error(ncclInvalidUsage,
                         "rank %d published %u TCP sockets per peer (1 to %d expected): do all "
                         "ranks run the same tutti version?",
                         r, ns, TUTTI_TCP_MAX_SOCKS);
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
    if (tutti_tcp_pair(tc, su->recs, tc->rank, r) && !a[2]) {
      return tutti_error(ncclSystemError,
                         "rank %d (host %s) opened no TCP listener, so rank %d cannot reach it: "
                         "see that rank's log",
                         r, tc->peers[r].hostname, tc->rank);
    }
  }
  return ncclSuccess;
}

static void add_pending(struct tutti_tcp_setup* su, int fd, int out, int peer, int idx,
                        const unsigned char* hello) {
  if (su->npend == su->cap) {
    /* Full of connections that have not presented themselves: drop the oldest stranger. */
    for (int i = 0; i < su->npend; i++) {
      if (!su->pend[i].out) {
        tutti_seal_close(su->pend[i].fd);
        su->pend[i] = su->pend[--su->npend];
        break;
      }
    }
  }
  if (su->npend == su->cap) {
    tutti_seal_close(fd);
    return;
  }
  struct tutti_tcp_pending* p = &su->pend[su->npend++];
  memset(p, 0, sizeof *p);
  p->fd = fd;
  p->out = out;
  p->peer = peer;
  p->idx = idx;
  p->deadline = tutti_socket_now() + HELLO_S;
  if (out) {
    memcpy(p->hello, hello, HELLO_LEN);
  }
}

/* Sends what the socket takes now of our hello on outgoing connection i.
 * Encrypted, it waits for the peer's handshake, which comes only once the
 * peer accepts in its own loop: hence sent here, beside the accepts. */
static ncclResult_t push_hello(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  while (p->out && p->sent < HELLO_LEN) {
    ssize_t n = tutti_seal_send(p->fd, p->hello + p->sent, HELLO_LEN - p->sent);
    if (n > 0) {
      p->sent += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else if (n == 0 || errno != EINTR) {
      char who[160];
      peer_name(su, p->peer, who, sizeof who);
      return tutti_error(ncclRemoteError,
                         "rank %d: sending the hello of TCP connection %d to %s failed: %s",
                         su->tc->rank, p->idx, who,
                         n == 0 ? "the connection closed" : tutti_seal_strerror(p->fd, errno));
    }
  }
  return ncclSuccess;
}

/* Why an incoming hello is not one this rank expects, or NULL. */
static const char* bad_hello(const struct tutti_tcp_setup* su, const unsigned char* h, int* from,
                             int* idx) {
  const struct tutti_transport_comm* tc = su->tc;
  *from = (int)tutti_socket_get32(h + 32);
  *idx = (int)tutti_socket_get32(h + 40);
  if (memcmp(h, "tuttiTC2", 8) != 0) {
    return "it did not send a tutti TCP transport hello";
  }
  if (get64(h + 24) != tc->comm_hash || (int)tutti_socket_get32(h + 36) != tc->rank) {
    return "it is meant for another communicator or rank";
  }
  if (*from < 0 || *from >= tc->rank || !tutti_tcp_pair(tc, su->recs, *from, tc->rank) ||
      *idx < 0 || *idx >= tutti_tcp_pair_socks(su, *from)) {
    return "its rank or socket index is not one this rank expects";
  }
  if (su->fds[(size_t)*from * (size_t)su->nsocks + (size_t)*idx] >= 0) {
    return "that socket is already connected";
  }
  return NULL;
}

/* What the MACs of connection p are of: the listener's address as
 * published (the one the connector dialled), the connector's hello, the
 * listener's nonce. */
static struct tutti_hello_transcript transcript(const struct tutti_tcp_setup* su,
                                                const struct tutti_tcp_pending* p,
                                                const unsigned char* nonce) {
  const int listener = p->out ? p->peer : su->tc->rank;
  return (struct tutti_hello_transcript){TUTTI_HELLO_TCP, rec_of(su, listener) + 8, p->hello,
                                         HELLO_LEN, nonce};
}

static void established(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  su->fds[(size_t)p->peer * (size_t)su->nsocks + (size_t)p->idx] = p->fd;
  su->left--;
  su->pend[i] = su->pend[--su->npend];
}

static void refuse(struct tutti_tcp_setup* su, int i, const char* why) {
  INFO(TUTTI_NET, "rank %d dropped a connection to its TCP listener: %s", su->tc->rank, why);
  tutti_seal_close(su->pend[i].fd);
  su->pend[i] = su->pend[--su->npend];
}

/* The listener's proof is in: checked, and answered with our MAC. */
static ncclResult_t on_proof(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  const struct tutti_hello_transcript t = transcript(su, p, p->buf);
  unsigned char mac[MAC_LEN];
  if (tutti_hello_check(su->tc->secret, TUTTI_HELLO_LISTENER, &t, p->buf + TUTTI_HELLO_NONCE) !=
      0) {
    char who[160];
    peer_name(su, p->peer, who, sizeof who);
    return tutti_error(ncclRemoteError,
                       "rank %d: %s did not prove this job's secret on TCP connection %d, so "
                       "nothing more was sent to it: another program holds that rank's port "
                       "(did the rank die?), or the ranks were given different unique ids",
                       su->tc->rank, who, p->idx);
  }
  tutti_hello_mac(su->tc->secret, TUTTI_HELLO_CONNECTOR, &t, mac);
  /* 32 bytes on a socket that has carried 48: the buffer takes them at once. */
  const ssize_t n = tutti_seal_send(p->fd, mac, MAC_LEN);
  tutti_sha256_wipe(mac, sizeof mac);
  if (n != MAC_LEN) {
    char who[160];
    peer_name(su, p->peer, who, sizeof who);
    return tutti_error(ncclRemoteError,
                       "rank %d: sending its proof on TCP connection %d to %s "
                       "failed: %s",
                       su->tc->rank, p->idx, who,
                       n < 0 ? tutti_seal_strerror(p->fd, errno) : "a short send");
  }
  established(su, i);
  return ncclSuccess;
}

/* An incoming hello is in: checked, then proved to (util/hello.h). */
static void on_hello(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  const char* why = bad_hello(su, p->buf, &p->peer, &p->idx);
  if (why != NULL) {
    refuse(su, i, why);
    return;
  }
  memcpy(p->hello, p->buf, HELLO_LEN);
  unsigned char proof[PROOF_LEN];
  if (tutti_hello_nonce(p->nonce) != 0) {
    refuse(su, i, "getrandom failed making a nonce");
    return;
  }
  const struct tutti_hello_transcript t = transcript(su, p, p->nonce);
  memcpy(proof, p->nonce, TUTTI_HELLO_NONCE);
  tutti_hello_mac(su->tc->secret, TUTTI_HELLO_LISTENER, &t, proof + TUTTI_HELLO_NONCE);
  if (tutti_seal_send(p->fd, proof, PROOF_LEN) != PROOF_LEN) {
    refuse(su, i, "it closed before this rank's proof");
    return;
  }
  p->proved = 1;
  p->got = 0;
}

/* The connector's MAC is in: it proves the job's secret, or it is dropped. */
static void on_mac(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  const struct tutti_hello_transcript t = transcript(su, p, p->nonce);
  if (tutti_hello_check(su->tc->secret, TUTTI_HELLO_CONNECTOR, &t, p->buf) != 0) {
    snprintf(su->refused, sizeof su->refused,
             "a connection claiming to be rank %d did not prove this job's secret", p->peer);
    refuse(su, i, su->refused);
    return;
  }
  if (su->fds[(size_t)p->peer * (size_t)su->nsocks + (size_t)p->idx] >= 0) {
    refuse(su, i, "that socket is already connected");
    return;
  }
  established(su, i);
}

/* How many bytes pending connection i reads next. */
static size_t wanted(const struct tutti_tcp_pending* p) {
  return p->out ? PROOF_LEN : p->proved ? MAC_LEN : HELLO_LEN;
}

/* Reads what pending connection i has; moves it on when a message is in. */
static ncclResult_t service(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  ssize_t n = tutti_seal_recv(p->fd, p->buf + p->got, wanted(p) - p->got);
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
                         su->tc->rank, who, p->idx,
                         n == 0 ? "end of file" : tutti_seal_strerror(p->fd, errno));
    }
    const char* why = tutti_seal_why(p->fd); /* named if the pair never forms */
    if (why != NULL) {
      snprintf(su->refused, sizeof su->refused, "%s", why);
    }
    tutti_seal_close(p->fd);
    su->pend[i] = su->pend[--su->npend];
    return ncclSuccess;
  }
  p->got += (size_t)n;
  if (p->got < wanted(p)) {
    return ncclSuccess;
  }
  if (p->out) {
    return on_proof(su, i);
  }
  if (p->proved) {
    on_mac(su, i);
  } else {
    on_hello(su, i);
  }
  return ncclSuccess;
}

static ncclResult_t timed_out(const struct tutti_tcp_setup* su, double t) {
  const struct tutti_transport_comm* tc = su->tc;
  for (int r = 0; r < tc->nranks; r++) {
    for (int s = 0; tutti_tcp_pair(tc, su->recs, tc->rank, r) && s < tutti_tcp_pair_socks(su, r);
         s++) {
      if (su->fds[(size_t)r * (size_t)su->nsocks + (size_t)s] < 0) {
        char who[160];
        peer_name(su, r, who, sizeof who);
        return tutti_error(ncclRemoteError,
                           "rank %d: TCP connection %d with %s was not set up within %.0f s "
                           "(TUTTI_TIMEOUT): is that rank alive, and can the hosts reach each "
                           "other on the interfaces chosen (NCCL_SOCKET_IFNAME)?%s%s",
                           tc->rank, s, who, t,
                           su->refused[0] != '\0' ? " A connection was refused: " : "",
                           su->refused);
      }
    }
  }
  return tutti_error(ncclRemoteError, "rank %d: TCP setup timed out", tc->rank);
}

/* Lower ranks connect to higher ranks' listeners; one event loop then
 * accepts and checks hellos while waiting for our acks, so no rank waits on
 * another that waits on a third. */
ncclResult_t tutti_tcp_connect_all(struct tutti_tcp_setup* su, int lfd) {
  struct tutti_transport_comm* tc = su->tc;
  const double t = tutti_timeout_s(), deadline = tutti_socket_now() + t;
  for (int r = 0; r < tc->nranks; r++) {
    if (tutti_tcp_pair(tc, su->recs, tc->rank, r)) {
      su->left += tutti_tcp_pair_socks(su, r);
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
    if (!tutti_tcp_pair(tc, su->recs, tc->rank, r)) {
      continue;
    }
    char who[160];
    peer_name(su, r, who, sizeof who);
    struct tutti_socket_io io = {deadline, NULL, who, "TCP transport setup"};
    tutti_socket_addr_unpack(rec_of(su, r) + 8, &addr);
    unsigned char hello[HELLO_LEN];
    memcpy(hello, "tuttiTC2", 8);
    put64(hello + 24, tc->comm_hash);
    tutti_socket_put32(hello + 32, (uint32_t)tc->rank);
    tutti_socket_put32(hello + 36, (uint32_t)r);
    tutti_socket_put32(hello + 44, (uint32_t)tutti_tcp_pair_socks(su, r));
    for (int s = 0; s < tutti_tcp_pair_socks(su, r) && res == ncclSuccess; s++) {
      int fd = -1;
      tutti_socket_put32(hello + 40, (uint32_t)s);
      res = tutti_socket_connect(&addr, &io,
                                 "does NCCL_SOCKET_IFNAME pick an interface the hosts share?", &fd);
      if (res == ncclSuccess && tutti_hello_nonce(hello + 8) != 0) {
        tutti_seal_close(fd);
        res = tutti_error(ncclSystemError, "rank %d: getrandom failed making a TCP nonce: %s",
                          tc->rank, strerror(errno));
      }
      if (res == ncclSuccess) {
        add_pending(su, fd, 1, r, s, hello);
        res = push_hello(su, su->npend - 1);
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
      const struct tutti_tcp_pending* p = &su->pend[i];
      const short out = p->out && p->sent < HELLO_LEN ? tutti_seal_events(p->fd, POLLOUT) : 0;
      pfd[n++] = (struct pollfd){.fd = p->fd, .events = (short)(POLLIN | out)};
    }
    (void)poll(pfd, (nfds_t)n, 100);
    for (int i = su->npend - 1; i >= 0 && res == ncclSuccess; i--) {
      res = push_hello(su, i);
      if (res == ncclSuccess) {
        res = service(su, i);
      }
    }
    for (int i = su->npend - 1; i >= 0; i--) {
      if (!su->pend[i].out && tutti_socket_now() > su->pend[i].deadline) {
        INFO(TUTTI_NET, "rank %d dropped a connection that presented nothing for %.0f s", tc->rank,
             HELLO_S);
        tutti_seal_close(su->pend[i].fd);
        su->pend[i] = su->pend[--su->npend];
      }
    }
    int fd;
    while (lfd >= 0 && (fd = tutti_socket_try_accept(lfd, NULL)) >= 0) {
      add_pending(su, fd, 0, -1, -1, NULL);
    }
  }
  for (int i = 0; i < su->npend; i++) {
    tutti_seal_close(su->pend[i].fd);
  }
  free(pfd);
  return res;
}
