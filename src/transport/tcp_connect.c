/* The tcp transport's connection setup (see tcp_connect.h): every pair's
 * sockets, each opened with a hello carrying the job secret and answered
 * with an acknowledgement; strangers are dropped. */
#include "transport/tcp_connect.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/check.h"
#include "util/param.h"
#include "util/seal.h"
#include "util/socket.h"

#define HELLO_LEN 48 /* "tuttiTC1", secret, comm hash, from, to, socket index, nsocks */
#define ACK_LEN 24   /* "tuttiTA1", comm hash, rank, socket index */
#define HELLO_S 5.0  /* time a new connection has to present itself */

/* A connection during setup: ours waiting for an ack, or a stranger-until-
 * proven-otherwise waiting for its hello. */
struct tutti_tcp_pending {
  int fd;
  int out;
  int peer, idx; /* outgoing only */
  size_t got, sent;
  unsigned char buf[HELLO_LEN];
  unsigned char hello[HELLO_LEN]; /* outgoing: ours, sent from the event loop */
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
  unsigned diff = 0;
  for (int i = 0; i < 16; i++) {
    diff |= h[8 + i] ^ tc->secret[i];
  }
  *from = (int)tutti_socket_get32(h + 32);
  *idx = (int)tutti_socket_get32(h + 40);
  if (memcmp(h, "tuttiTC1", 8) != 0 || diff != 0) {
    return "it did not present this job's secret";
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

/* A complete hello or ack arrived on pending connection i. */
static ncclResult_t complete(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  const struct tutti_transport_comm* tc = su->tc;
  int from = p->peer, idx = p->idx;
  if (p->out) {
    if (memcmp(p->buf, "tuttiTA1", 8) != 0 || get64(p->buf + 8) != tc->comm_hash ||
        (int)tutti_socket_get32(p->buf + 16) != p->peer ||
        (int)tutti_socket_get32(p->buf + 20) != p->idx) {
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
    tutti_socket_put32(ack + 16, (uint32_t)tc->rank);
    tutti_socket_put32(ack + 20, (uint32_t)idx);
    if (why != NULL || tutti_seal_send(p->fd, ack, ACK_LEN) != ACK_LEN) {
      INFO(TUTTI_NET, "rank %d dropped a connection to its TCP listener: %s", tc->rank,
           why != NULL ? why : "it closed before the acknowledgement");
      tutti_seal_close(p->fd);
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
static ncclResult_t service(struct tutti_tcp_setup* su, int i) {
  struct tutti_tcp_pending* p = &su->pend[i];
  size_t want = (p->out ? ACK_LEN : HELLO_LEN) - p->got;
  ssize_t n = tutti_seal_recv(p->fd, p->buf + p->got, want);
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
  return p->got == (p->out ? ACK_LEN : HELLO_LEN) ? complete(su, i) : ncclSuccess;
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
    memcpy(hello, "tuttiTC1", 8);
    memcpy(hello + 8, tc->secret, 16);
    put64(hello + 24, tc->comm_hash);
    tutti_socket_put32(hello + 32, (uint32_t)tc->rank);
    tutti_socket_put32(hello + 36, (uint32_t)r);
    tutti_socket_put32(hello + 44, (uint32_t)tutti_tcp_pair_socks(su, r));
    for (int s = 0; s < tutti_tcp_pair_socks(su, r) && res == ncclSuccess; s++) {
      int fd = -1;
      tutti_socket_put32(hello + 40, (uint32_t)s);
      res = tutti_socket_connect(&addr, &io,
                                 "does NCCL_SOCKET_IFNAME pick an interface the hosts share?", &fd);
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
