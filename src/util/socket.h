/* A small TCP toolkit shared by bootstrap and the tcp transport: IPv4/IPv6
 * addresses, listen / connect / accept, and transfers bounded by a deadline
 * and an abort flag, so that no socket wait can hang a rank. */
#ifndef TUTTI_UTIL_SOCKET_H
#define TUTTI_UTIL_SOCKET_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#include "nccl.h"

#define TUTTI_SOCKET_ADDR_STRLEN 64 /* "[v6addr%scope]:port" with room to spare */
#define TUTTI_SOCKET_ADDR_WIRE 24   /* packed: family, port, scope id, 16 address bytes */

union tutti_socket_addr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
};

/* What bounds a wait, and the words its error sentences use. */
struct tutti_socket_io {
  double deadline;          /* in tutti_socket_now() seconds */
  volatile int* abort_flag; /* polled at least every 100 ms; may be NULL */
  const char* peer;         /* "rank 3 at 10.0.0.1:41234" */
  const char* doing;        /* "bootstrap all-gather of rank 2" */
};

/* Monotonic clock in seconds. */
double tutti_socket_now(void);

/* Parses "host:port" or "[v6addr]:port"; host may be a name (getaddrinfo).
 * `family` is the one preferred among a name's addresses (AF_UNSPEC: IPv4,
 * then IPv6); an address of the other family is still taken when it is all
 * there is, as a literal one always is. */
ncclResult_t tutti_socket_parse(const char* text, int family, union tutti_socket_addr* out);
/* "10.0.0.1:41234" or "[fd00::2]:41234" into buf; returns buf. */
const char* tutti_socket_format(const union tutti_socket_addr* a, char* buf, size_t len);
socklen_t tutti_socket_addr_len(const union tutti_socket_addr* a);
int tutti_socket_port(const union tutti_socket_addr* a);
void tutti_socket_set_port(union tutti_socket_addr* a, int port);
int tutti_socket_is_loopback(const union tutti_socket_addr* a);
/* Host-independent packing for ids and wire messages; unpack returns 0, or
 * -1 for a family that is neither IPv4 nor IPv6. */
void tutti_socket_addr_pack(const union tutti_socket_addr* a,
                            unsigned char out[TUTTI_SOCKET_ADDR_WIRE]);
int tutti_socket_addr_unpack(const unsigned char in[TUTTI_SOCKET_ADDR_WIRE],
                             union tutti_socket_addr* out);

/* Every connected socket carries a heartbeat: TCP keepalive every
 * TUTTI_HEARTBEAT_S seconds (default 1, 0: off) while idle. A connection
 * whose far host answers nothing for TUTTI_SOCKET_MISSED heartbeats is
 * dead: the kernel ends an idle one (ETIMEDOUT), and one with data in
 * flight is caught by tutti_socket_unanswered. */
#define TUTTI_SOCKET_MISSED 3
int tutti_socket_heartbeat_s(void);
/* Non-zero when fd's far host has acknowledged nothing for
 * TUTTI_SOCKET_MISSED heartbeats although data or probes await an answer:
 * the host is down or unreachable. A peer process that is only stopped
 * still has a kernel that answers, and is never reported here. */
int tutti_socket_unanswered(int fd);

/* Listens on `addr` (port 0: an ephemeral port, written back into addr).
 * On failure errno holds the cause (EADDRINUSE: the port is taken). */
ncclResult_t tutti_socket_listen(union tutti_socket_addr* addr, int* fd);
/* Connects, retrying refused / unreachable attempts until io->deadline. On
 * failure the sentence names io->peer, the time tried and `hint`. */
ncclResult_t tutti_socket_connect(const union tutti_socket_addr* addr,
                                  const struct tutti_socket_io* io, const char* hint, int* fd);
/* Starts a non-blocking connect to `addr`, the socket set up as every
 * connection is (TCP_NODELAY, the heartbeat): 0 and *fd (connected or
 * still connecting: see tutti_socket_connect_poll), or an errno value.
 * For callers that must never wait (a network plugin's connect). */
int tutti_socket_connect_start(const union tutti_socket_addr* addr, int* fd);
/* Where such a connect stands, without waiting: 0 connected, EINPROGRESS
 * not yet, or the errno value it failed with (a socket that connected to
 * itself fails with ECONNREFUSED). */
int tutti_socket_connect_poll(int fd);
/* One non-blocking accept: the new fd (non-blocking, TCP_NODELAY), or -1
 * with errno set (EAGAIN when nobody is waiting). `peer` may be NULL. */
int tutti_socket_try_accept(int listen_fd, union tutti_socket_addr* peer);
/* Waits for a connection until io->deadline. */
ncclResult_t tutti_socket_accept(int listen_fd, const struct tutti_socket_io* io, int* fd,
                                 union tutti_socket_addr* peer);

ncclResult_t tutti_socket_send_all(int fd, const void* buf, size_t len,
                                   const struct tutti_socket_io* io);
ncclResult_t tutti_socket_recv_all(int fd, void* buf, size_t len, const struct tutti_socket_io* io);
/* Sends to one socket while receiving from another, so that a ring of ranks
 * all sending at once cannot deadlock on full socket buffers. The deadline
 * and abort flag of `rio` bound the whole exchange. */
ncclResult_t tutti_socket_exchange(int sfd, const void* sbuf, size_t slen,
                                   const struct tutti_socket_io* sio, int rfd, void* rbuf,
                                   size_t rlen, const struct tutti_socket_io* rio);

/* Words on the wire, big-endian, for every protocol that sockets carry
 * (the bootstrap's, the TCP transport's, the records both proxies send). */
static inline void tutti_socket_put32(unsigned char* p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static inline uint32_t tutti_socket_get32(const unsigned char* p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void tutti_socket_put64(unsigned char* p, uint64_t v) {
  tutti_socket_put32(p, (uint32_t)(v >> 32));
  tutti_socket_put32(p + 4, (uint32_t)v);
}

static inline uint64_t tutti_socket_get64(const unsigned char* p) {
  return ((uint64_t)tutti_socket_get32(p) << 32) | tutti_socket_get32(p + 4);
}

#endif
