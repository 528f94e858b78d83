/* TCP sockets for bootstrap and transports: every socket is non-blocking and
 * every wait goes through poll() in slices of at most 100 ms, so that a
 * deadline or an abort flag always ends it. */
#define _GNU_SOURCE /* accept4 */
#include "util/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"
#include "util/param.h"
#include "util/seal.h"

/* Liveness of a connection's far host, in seconds (0: the kernel's defaults). */
static TUTTI_PARAM_INT32(heartbeat, "TUTTI_HEARTBEAT_S", 1, 0, 3600,
                         "seconds between heartbeats on every TCP connection (0: none)");

#define SLICE_MS 100 /* the longest a wait goes without looking at the abort flag */

double tutti_socket_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int aborted(volatile int* flag) {
  return flag != NULL && __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
}

/* Milliseconds to wait: the time left, capped at one slice. */
static int slice_ms(double deadline) {
  double left = (deadline - tutti_socket_now()) * 1e3;
  if (left <= 0) {
    return 0;
  }
  return left > SLICE_MS ? SLICE_MS : (int)left + 1;
}

socklen_t tutti_socket_addr_len(const union tutti_socket_addr* a) {
  return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int tutti_socket_port(const union tutti_socket_addr* a) {
  return ntohs(a->sa.sa_family == AF_INET6 ? a->sin6.sin6_port : a->sin.sin_port);
}

void tutti_socket_set_port(union tutti_socket_addr* a, int port) {
  if (a->sa.sa_family == AF_INET6) {
    a->sin6.sin6_port = htons((uint16_t)port);
  } else {
    a->sin.sin_port = htons((uint16_t)port);
  }
}

int tutti_socket_is_loopback(const union tutti_socket_addr* a) {
  if (a->sa.sa_family == AF_INET) {
    return (ntohl(a->sin.sin_addr.s_addr) >> 24) == 127;
  }
  return a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr);
}

const char* tutti_socket_format(const union tutti_socket_addr* a, char* buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "";
  if (a->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof host);
    snprintf(buf, len, "%s:%d", host, tutti_socket_port(a));
  } else if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof host);
    if (a->sin6.sin6_scope_id != 0) {
      snprintf(buf, len, "[%s%%%u]:%d", host, (unsigned)a->sin6.sin6_scope_id,
               tutti_socket_port(a));
    } else {
      snprintf(buf, len, "[%s]:%d", host, tutti_socket_port(a));
    }
  } else {
    snprintf(buf, len, "(no address)");
  }
  return buf;
}

void tutti_socket_addr_pack(const union tutti_socket_addr* a,
                            unsigned char out[TUTTI_SOCKET_ADDR_WIRE]) {
  memset(out, 0, TUTTI_SOCKET_ADDR_WIRE);
  int v6 = a->sa.sa_family == AF_INET6;
  out[1] = v6 ? 6 : 4; /* not AF_* values: those differ between systems */
  uint16_t port = htons((uint16_t)tutti_socket_port(a));
  memcpy(out + 2, &port, 2);
  if (v6) {
    uint32_t scope = htonl(a->sin6.sin6_scope_id);
    memcpy(out + 4, &scope, 4);
    memcpy(out + 8, &a->sin6.sin6_addr, 16);
  } else {
    memcpy(out + 8, &a->sin.sin_addr, 4);
  }
}

int tutti_socket_addr_unpack(const unsigned char in[TUTTI_SOCKET_ADDR_WIRE],
                             union tutti_socket_addr* out) {
  memset(out, 0, sizeof *out);
  uint16_t port;
  memcpy(&port, in + 2, 2);
  if (in[0] == 0 && in[1] == 4) {
    out->sin.sin_family = AF_INET;
    out->sin.sin_port = port;
    memcpy(&out->sin.sin_addr, in + 8, 4);
    return 0;
  }
  if (in[0] == 0 && in[1] == 6) {
    uint32_t scope;
    memcpy(&scope, in + 4, 4);
    out->sin6.sin6_family = AF_INET6;
    out->sin6.sin6_port = port;
    out->sin6.sin6_scope_id = ntohl(scope);
    memcpy(&out->sin6.sin6_addr, in + 8, 16);
    return 0;
  }
  return -1;
}

static ncclResult_t parse_error(const char* text, const char* why) {
  return tutti_error(ncclInvalidArgument,
                     "cannot parse the address \"%s\": %s; write host:port or [IPv6 address]:port",
                     text, why);
}

ncclResult_t tutti_socket_parse(const char* text, int family, union tutti_socket_addr* out) {
  char host[256];
  const char* port_s;
  size_t hlen;
  if (text == NULL) {
    return parse_error("(null)", "no text");
  }
  if (text[0] == '[') {
    const char* close = strchr(text, ']');
    if (close == NULL || close[1] != ':') {
      return parse_error(text, "a bracketed IPv6 address must be followed by :port");
    }
    hlen = (size_t)(close - text - 1);
    memcpy(host, text + 1, hlen < sizeof host ? hlen : 0);
    port_s = close + 2;
  } else {
    const char* colon = strrchr(text, ':');
    if (colon == NULL) {
      return parse_error(text, "there is no :port");
    }
    hlen = (size_t)(colon - text);
    if (memchr(text, ':', hlen) != NULL) {
      return parse_error(text, "an IPv6 address needs brackets");
    }
    memcpy(host, text, hlen < sizeof host ? hlen : 0);
    port_s = colon + 1;
  }
  if (hlen == 0 || hlen >= sizeof host) {
    return parse_error(text, "the host part is empty or too long");
  }
  host[hlen] = '\0';
  char* end = NULL;
  long port = strtol(port_s, &end, 10);
  if (*port_s < '0' || *port_s > '9' || *end != '\0' || port > 65535) {
    return parse_error(text, "the port is not a number from 0 to 65535");
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0) {
    return tutti_error(ncclInvalidArgument, "cannot resolve \"%s\" (from \"%s\"): %s", host, text,
                       gai_strerror(rc));
  }
  /* IPv4 first unless the other family was asked for: NCCL prefers it too. */
  const int order[2] = {family == AF_INET6 ? AF_INET6 : AF_INET,
                        family == AF_INET6 ? AF_INET : AF_INET6};
  const struct addrinfo* pick = NULL;
  for (int pass = 0; pass < 2 && pick == NULL; pass++) {
    for (const struct addrinfo* ai = res; ai != NULL && pick == NULL; ai = ai->ai_next) {
      if (ai->ai_family == order[pass]) {
        pick = ai;
      }
    }
  }
  if (pick == NULL) {
    freeaddrinfo(res);
    return parse_error(text, "the host has no IPv4 or IPv6 address");
  }
  memset(out, 0, sizeof *out);
  memcpy(out, pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(res);
  tutti_socket_set_port(out, (int)port);
  return ncclSuccess;
}

int tutti_socket_heartbeat_s(void) {
  const int64_t h = tutti_param_heartbeat();
  return h <= 0 ? 0 : h > 3600 ? 3600 : (int)h;
}

/* Keepalive probes after one heartbeat of silence, one a heartbeat, and the
 * kernel drops the connection when two go unanswered: an idle connection
 * to a host that is gone ends TUTTI_SOCKET_MISSED heartbeats after the
 * last packet from it. TCP_USER_TIMEOUT is deliberately left unset: it
 * would also end a connection whose peer process is merely stopped (its
 * kernel answers zero-window probes, but the window stays shut), and a
 * stopped process is not a lost one; tutti_socket_unanswered covers the
 * connections with data in flight instead. */
static void set_keepalive(int fd) {
  int hb = tutti_socket_heartbeat_s(), one = 1, cnt = TUTTI_SOCKET_MISSED - 1;
  if (hb == 0) {
    return;
  }
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &hb, sizeof hb);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &hb, sizeof hb);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

int tutti_socket_unanswered(int fd) {
  const int hb = tutti_socket_heartbeat_s();
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (hb == 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) {
    return 0;
  }
  /* Data retransmitted and still unacknowledged, or two window probes
   * unanswered: the peer's kernel is silent, not merely its process (a
   * stopped process's kernel still acknowledges both). */
  const int silent = (ti.tcpi_unacked > 0 && ti.tcpi_retransmits > 0) || ti.tcpi_probes >= 2;
  return silent && ti.tcpi_last_ack_recv >= (uint32_t)hb * 1000u * TUTTI_SOCKET_MISSED;
}

static void set_nodelay(int fd) {
  int one = 1;
  /* Bootstrap messages are small and latency-bound; Nagle would add 40 ms. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_keepalive(fd);
}

ncclResult_t tutti_socket_listen(union tutti_socket_addr* addr, int* fd) {
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  tutti_socket_format(addr, where, sizeof where);
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) {
    return tutti_error(ncclSystemError, "cannot create a socket to listen on %s: %s", where,
                       strerror(errno));
  }
  int one = 1;
  /* A job restarted on the same NCCL_COMM_ID port must not wait for TIME_WAIT. */
  (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = tutti_socket_addr_len(addr);
  if (bind(s, &addr->sa, len) != 0 || listen(s, SOMAXCONN) != 0 ||
      getsockname(s, &addr->sa, &len) != 0) {
    int err = errno;
    close(s);
    ncclResult_t res = tutti_error(ncclSystemError,
                                   "cannot listen on %s: %s (the address must belong to this host "
                                   "and the port must be free)",
                                   where, strerror(err));
    errno = err; /* for callers that tell a taken port from other failures */
    return res;
  }
  *fd = s;
  return ncclSuccess;
}

/* Connecting to a port nobody listens on can, rarely, connect the socket to
 * itself (TCP simultaneous open); such a connection must not count. */
static int self_connected(int fd) {
  union tutti_socket_addr a, b;
  socklen_t la = sizeof a, lb = sizeof b;
  if (getsockname(fd, &a.sa, &la) != 0 || getpeername(fd, &b.sa, &lb) != 0) {
    return 0;
  }
  return la == lb && memcmp(&a, &b, la) == 0;
}

/* One attempt; returns 0 and the fd, or an errno value. */
static int connect_once(const union tutti_socket_addr* addr, const struct tutti_socket_io* io,
                        int* fd) {
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) {
    return errno;
  }
  int err = 0;
  if (connect(s, &addr->sa, tutti_socket_addr_len(addr)) != 0) {
    err = errno;
  }
  while (err == EINPROGRESS) {
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int ms = slice_ms(io->deadline);
    if (ms == 0 || aborted(io->abort_flag)) {
      err = ETIMEDOUT;
    } else if (poll(&p, 1, ms) > 0) {
      socklen_t el = sizeof err;
      if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
        err = errno;
      }
    }
  }
  if (err == 0 && self_connected(s)) {
    err = ECONNREFUSED;
  }
  if (err != 0) {
    close(s);
    return err;
  }
  set_nodelay(s);
  tutti_seal_attach(s, 1);
  *fd = s;
  return 0;
}

ncclResult_t tutti_socket_connect(const union tutti_socket_addr* addr,
                                  const struct tutti_socket_io* io, const char* hint, int* fd) {
  double start = tutti_socket_now();
  int delay_ms = 5;
  int err;
  for (;;) {
    if (aborted(io->abort_flag)) {
      return tutti_error(ncclRemoteError,
                         "%s: gave up connecting to %s: the communicator was aborted", io->doing,
                         io->peer);
    }
    err = connect_once(addr, io, fd);
    if (err == 0) {
      return ncclSuccess;
    }
    if (err == EAFNOSUPPORT || err == EINVAL || err == EACCES || err == EPERM) {
      return tutti_error(ncclSystemError, "%s: cannot connect to %s: %s", io->doing, io->peer,
                         strerror(err));
    }
    /* Refused or unreachable: the peer may simply not be up yet. */
    if (tutti_socket_now() + delay_ms * 1e-3 >= io->deadline) {
      break;
    }
    struct timespec ts = {0, delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    delay_ms = delay_ms * 2 > SLICE_MS ? SLICE_MS : delay_ms * 2;
  }
  return tutti_error(ncclSystemError, "could not reach %s for %.3g s (%s): %s", io->peer,
                     io->deadline - start, strerror(err), hint != NULL ? hint : "is it running?");
}

int tutti_socket_connect_start(const union tutti_socket_addr* addr, int* fd) {
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) {
    return errno;
  }
  set_nodelay(s);
  if (connect(s, &addr->sa, tutti_socket_addr_len(addr)) != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(s);
    return err;
  }
  tutti_seal_attach(s, 1); /* its hello leaves with the first send once connected */
  *fd = s;
  return 0;
}

int tutti_socket_connect_poll(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  if (poll(&p, 1, 0) <= 0) {
    return EINPROGRESS;
  }
  int err = 0;
  socklen_t el = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
    return errno;
  }
  if (err == 0 && self_connected(fd)) {
    return ECONNREFUSED;
  }
  return err;
}

int tutti_socket_try_accept(int listen_fd, union tutti_socket_addr* peer) {
  union tutti_socket_addr tmp;
  socklen_t len = sizeof tmp;
  int fd = accept4(listen_fd, &tmp.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    set_nodelay(fd);
    tutti_seal_attach(fd, 0);
    if (peer != NULL) {
      *peer = tmp;
    }
  }
  return fd;
}

ncclResult_t tutti_socket_accept(int listen_fd, const struct tutti_socket_io* io, int* fd,
                                 union tutti_socket_addr* peer) {
  for (;;) {
    int s = tutti_socket_try_accept(listen_fd, peer);
    if (s >= 0) {
      *fd = s;
      return ncclSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return tutti_error(ncclSystemError, "%s: accept failed: %s", io->doing, strerror(errno));
    }
    if (aborted(io->abort_flag)) {
      return tutti_error(ncclRemoteError,
                         "%s: stopped waiting for %s: the communicator was aborted", io->doing,
                         io->peer);
    }
    int ms = slice_ms(io->deadline);
    if (ms == 0) {
      return tutti_error(ncclRemoteError, "%s: %s did not connect before the deadline", io->doing,
                         io->peer);
    }
    struct pollfd p = {.fd = listen_fd, .events = POLLIN};
    (void)poll(&p, 1, ms);
  }
}

/* The sentence for a send or recv that failed with `err` (0: peer closed). */
static ncclResult_t io_error(const struct tutti_socket_io* io, int fd, int err, int sending) {
  const char* dir = sending ? "sending" : "receiving";
  if (err == 0) {
    return tutti_error(
        ncclRemoteError,
        "%s: %s closed the connection: it exited, failed or was aborted; see its log", io->doing,
        io->peer);
  }
  if (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH) {
    return tutti_error(ncclRemoteError,
                       "%s: the connection to %s broke while %s (%s): it exited, failed or was "
                       "aborted; see its log",
                       io->doing, io->peer, dir, tutti_seal_strerror(fd, err));
  }
  if (err == EKEYREJECTED || err == EPROTO || err == EBADMSG) { /* util/seal.c's */
    return tutti_error(ncclRemoteError, "%s: %s %s %s failed: %s", io->doing, dir,
                       sending ? "to" : "from", io->peer, tutti_seal_strerror(fd, err));
  }
  return tutti_error(ncclSystemError, "%s: %s %s %s failed: %s", io->doing, dir,
                     sending ? "to" : "from", io->peer, strerror(err));
}

/* Moves as many bytes as the socket takes now; returns 0, or an errno value
 * (0 bytes received is reported as EOF through *eof). */
static int step(int fd, int sending, void* buf, size_t len, size_t* off, int* eof) {
  while (*off < len) {
    ssize_t n = sending ? tutti_seal_send(fd, (char*)buf + *off, len - *off)
                        : tutti_seal_recv(fd, (char*)buf + *off, len - *off);
    if (n > 0) {
      *off += (size_t)n;
    } else if (n == 0 && !sending) {
      *eof = 1;
      return 0;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

ncclResult_t tutti_socket_exchange(int sfd, const void* sbuf, size_t slen,
                                   const struct tutti_socket_io* sio, int rfd, void* rbuf,
                                   size_t rlen, const struct tutti_socket_io* rio) {
  const struct tutti_socket_io* io = rio != NULL ? rio : sio;
  size_t so = 0, ro = 0;
  for (;;) {
    int eof = 0, err;
    if ((err = step(sfd, 1, (void*)sbuf, slen, &so, &eof)) != 0) {
      return io_error(sio, sfd, err, 1);
    }
    if ((err = step(rfd, 0, rbuf, rlen, &ro, &eof)) != 0 || eof) {
      return io_error(rio, rfd, err, 0);
    }
    if (so == slen && ro == rlen) {
      return ncclSuccess;
    }
    if (aborted(io->abort_flag)) {
      return tutti_error(ncclRemoteError, "%s with %s stopped: the communicator was aborted",
                         io->doing, so < slen ? sio->peer : rio->peer);
    }
    int ms = slice_ms(io->deadline);
    if (ms == 0) {
      return tutti_error(ncclRemoteError,
                         "%s: no progress with %s before the deadline: the peer may be stuck, "
                         "dead or waiting on another rank (TUTTI_TIMEOUT sets the limit)",
                         io->doing, ro < rlen ? rio->peer : sio->peer);
    }
    struct pollfd p[2];
    int np = 0;
    if (so < slen) {
      /* Encrypted, a first send waits for the peer's hello (POLLIN). */
      p[np++] = (struct pollfd){.fd = sfd, .events = tutti_seal_events(sfd, POLLOUT)};
    }
    if (ro < rlen) {
      p[np++] = (struct pollfd){.fd = rfd, .events = POLLIN};
    }
    (void)poll(p, (nfds_t)np, ro < rlen && tutti_seal_has_pending(rfd) ? 0 : ms);
  }
}

ncclResult_t tutti_socket_send_all(int fd, const void* buf, size_t len,
                                   const struct tutti_socket_io* io) {
  return tutti_socket_exchange(fd, buf, len, io, -1, NULL, 0, io);
}

ncclResult_t tutti_socket_recv_all(int fd, void* buf, size_t len,
                                   const struct tutti_socket_io* io) {
  return tutti_socket_exchange(-1, NULL, 0, io, fd, buf, len, io);
}
