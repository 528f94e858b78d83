/* tutti's socket network (net/socket/) between two processes of this host
 * over loopback, against one plain TCP socket: GB/s one way and both ways
 * at once with 8 messages in flight, and the round trip of small messages.
 *   net_bw [-b MIN] [-e MAX] [-f FACTOR] [-m MB_PER_SIZE] [-i INFLIGHT]
 * Sizes take K/M suffixes (default 8 ... 64M, x4). Run with
 * NCCL_SOCKET_IFNAME=lo (set when unset); NCCL_SOCKET_NTHREADS and
 * NCCL_NSOCKS_PERTHREAD shape the connections. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/socket/socknet.h"
#include "util/check.h"

#define MAXQ 64
#define RTT_MAX (64 << 10) /* round trips are timed up to this size */

static struct tutti_net* net;
static void *scomm, *rcomm; /* to and from the other process */
static int tcp_fd;          /* the plain socket to the other process */
static int tcp_back;        /* a second one, for round trips one way each as comms are */
static int inflight = 8;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char* what) {
  fprintf(stderr, "net_bw: %s failed: %s\n", what, tutti_last_error());
  exit(1);
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  return (size_t)(v * (*end == 'K' ? 1 << 10 : *end == 'M' ? 1 << 20 : *end == 'G' ? 1 << 30 : 1));
}

/* ---- tutti ---- */

/* Moves `count` messages of `size` each way asked: keeps `inflight` sends
 * and receives posted, tests them all from this one thread. */
static void net_stream(char* sbuf, char* rbuf, size_t size, int nsend, int nrecv) {
  void* sreq[MAXQ] = {NULL};
  void* rreq[MAXQ] = {NULL};
  int sposted = 0, rposted = 0, sdone = 0, rdone = 0;
  while (sdone < nsend || rdone < nrecv) {
    for (int q = 0; q < inflight; q++) {
      int done = 0;
      if (sreq[q] == NULL && sposted < nsend) {
        if (net->ops->isend(net, scomm, sbuf, size, 0, NULL, &sreq[q]) != ncclSuccess) {
          die("isend");
        }
        sposted += sreq[q] != NULL;
      }
      if (sreq[q] != NULL) {
        if (net->ops->test(net, sreq[q], &done, NULL) != ncclSuccess) {
          die("test");
        }
        if (done) {
          sreq[q] = NULL;
          sdone++;
        }
      }
      if (rreq[q] == NULL && rposted < nrecv) {
        void* data = rbuf + (size_t)q * size;
        if (net->ops->irecv(net, rcomm, 1, &data, &size, (int[]){0}, NULL, &rreq[q]) !=
            ncclSuccess) {
          die("irecv");
        }
        rposted += rreq[q] != NULL;
      }
      if (rreq[q] != NULL) {
        if (net->ops->test(net, rreq[q], &done, NULL) != ncclSuccess) {
          die("test");
        }
        if (done) {
          rreq[q] = NULL;
          rdone++;
        }
      }
    }
  }
}

static void net_one(char* sbuf, char* rbuf, size_t size, int send, int recv) {
  inflight = inflight < 1 ? 1 : inflight;
  int keep = inflight;
  inflight = 1;
  net_stream(sbuf, rbuf, size, send, recv);
  inflight = keep;
}

/* ---- plain TCP: one socket, one thread ---- */

static void tcp_all(int fd, int sending, char* buf, size_t len) {
  while (len > 0) {
    /* Polling without sleeping, as a network plugin's caller does. */
    ssize_t n = sending ? send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, buf, len, MSG_DONTWAIT);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;
      }
      fprintf(stderr, "net_bw: plain TCP %s failed: %s\n", sending ? "send" : "recv",
              n == 0 ? "closed" : strerror(errno));
      exit(1);
    }
    buf += n;
    len -= (size_t)n;
  }
}

/* Both ways at once on the one socket: sends and receives as it allows. */
/* Received bytes go round the `inflight` buffers tutti's receives use, so
 * that both touch the same memory. */
static void tcp_both(char* sbuf, char* rbuf, size_t size, int count) {
  const size_t ring = size * (size_t)inflight;
  size_t sleft = size * (size_t)count, rleft = sleft, so = 0, ro = 0;
  while (sleft > 0 || rleft > 0) {
    struct pollfd p = {.fd = tcp_fd,
                       .events = (short)((sleft ? POLLOUT : 0) | (rleft ? POLLIN : 0))};
    poll(&p, 1, 1000);
    if (sleft && (p.revents & POLLOUT)) {
      size_t len = size - so < sleft ? size - so : sleft;
      ssize_t n = send(tcp_fd, sbuf + so, len, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        sleft -= (size_t)n;
        so = (so + (size_t)n) % size;
      }
    }
    if (rleft && (p.revents & POLLIN)) {
      size_t len = ring - ro < rleft ? ring - ro : rleft;
      ssize_t n = recv(tcp_fd, rbuf + ro, len, MSG_DONTWAIT);
      if (n > 0) {
        rleft -= (size_t)n;
        ro = (ro + (size_t)n) % ring;
      }
    }
  }
}

/* ---- the measurements, run by both processes in step ---- */

enum { UNI, BIDIR, RTT, NKINDS };

/* Seconds for `count` messages of `size`; `me` 0 leads. The receiver of a
 * one-way stream acknowledges the last message. */
static double run(int tcp, int kind, int me, char* sbuf, char* rbuf, size_t size, int count) {
  char ack = 0;
  const double t0 = now();
  if (kind == UNI) {
    if (tcp) {
      for (int i = 0; i < count; i++) {
        tcp_all(tcp_fd, me == 0, me == 0 ? sbuf : rbuf + (size_t)(i % inflight) * size, size);
      }
      tcp_all(tcp_fd, me != 0, &ack, 1);
    } else {
      net_stream(sbuf, rbuf, size, me == 0 ? count : 0, me == 0 ? 0 : count);
      net_one(&ack, &ack, 1, me != 0, me == 0);
    }
  } else if (kind == BIDIR) {
    tcp ? tcp_both(sbuf, rbuf, size, count) : net_stream(sbuf, rbuf, size, count, count);
  } else {
    for (int i = 0; i < count; i++) {
      for (int turn = 0; turn < 2; turn++) {
        const int sending = (turn == 0) == (me == 0);
        if (tcp) {
          tcp_all(tcp == 2 && turn == 1 ? tcp_back : tcp_fd, sending, sending ? sbuf : rbuf, size);
        } else {
          net_one(sbuf, rbuf, size, sending, !sending);
        }
      }
    }
  }
  return now() - t0;
}

static void setup(int me, int up, int down) {
  char h[TUTTI_NET_HANDLE_BYTES], peer[TUTTI_NET_HANDLE_BYTES];
  void* l = NULL;
  if (net->ops->listen(net, 0, h, &l) != ncclSuccess) {
    die("listen");
  }
  if (write(up, h, sizeof h) != (ssize_t)sizeof h || read(down, peer, sizeof peer) != sizeof peer) {
    die("handle exchange");
  }
  while (scomm == NULL || rcomm == NULL) {
    if ((scomm == NULL && net->ops->connect(net, 0, peer, &scomm) != ncclSuccess) ||
        (rcomm == NULL && net->ops->accept(net, l, &rcomm) != ncclSuccess)) {
      die("connect / accept");
    }
  }
  net->ops->close_listen(net, l);
  /* The plain sockets: the leader listens on loopback, port by pipe. */
  int one = 1;
  if (me == 0) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(lfd, (struct sockaddr*)&a, len) != 0 || listen(lfd, 2) != 0 ||
        getsockname(lfd, (struct sockaddr*)&a, &len) != 0 ||
        write(up, &a, sizeof a) != (ssize_t)sizeof a) {
      die("plain listen");
    }
    tcp_fd = accept(lfd, NULL, NULL);
    tcp_back = accept(lfd, NULL, NULL);
    close(lfd);
  } else {
    struct sockaddr_in a;
    if (read(down, &a, sizeof a) != (ssize_t)sizeof a) {
      die("plain address");
    }
    tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
    tcp_back = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(tcp_fd, (struct sockaddr*)&a, sizeof a) != 0 ||
        connect(tcp_back, (struct sockaddr*)&a, sizeof a) != 0) {
      die("plain connect");
    }
  }
  setsockopt(tcp_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(tcp_back, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int main(int argc, char** argv) {
  size_t min = 8, max = 64 << 20, mb = 256;
  int factor = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-b") == 0) {
      min = parse_size(argv[i + 1]);
    } else if (strcmp(argv[i], "-e") == 0) {
      max = parse_size(argv[i + 1]);
    } else if (strcmp(argv[i], "-f") == 0) {
      factor = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "-m") == 0) {
      mb = parse_size(argv[i + 1]);
    } else if (strcmp(argv[i], "-i") == 0) {
      inflight = atoi(argv[i + 1]);
    }
  }
  inflight = inflight < 1 ? 1 : inflight > MAXQ ? MAXQ : inflight;
  factor = factor < 2 ? 2 : factor;
  min = min < 1 ? 1 : min;
  setenv("NCCL_SOCKET_IFNAME", getenv("NCCL_SOCKET_IFNAME") ? getenv("NCCL_SOCKET_IFNAME") : "lo",
         1);
  signal(SIGPIPE, SIG_IGN);
  int p2c[2], c2p[2];
  if (pipe(p2c) != 0 || pipe(c2p) != 0) {
    die("pipe");
  }
  fflush(NULL);
  const pid_t pid = fork();
  const int me = pid == 0;
  if (tutti_socknet_open(0, &net) != ncclSuccess) {
    die("opening the socket network");
  }
  setup(me, me ? c2p[1] : p2c[1], me ? p2c[0] : c2p[0]);
  char* sbuf = malloc(max);
  char* rbuf = malloc(max * (size_t)inflight);
  memset(sbuf, 1, max);
  memset(rbuf, 0, max * (size_t)inflight);
  if (!me) {
    printf(
        "# tutti socket network vs one plain TCP socket, 2 processes over loopback, %d in "
        "flight;\n# bidir: GB/s each way; tcp2: round trips over a plain socket each way, as "
        "comms go\n# %10s %9s %9s %9s %9s %9s %9s %9s\n",
        inflight, "bytes", "uni GB/s", "tcp", "bidir", "tcp", "rtt us", "tcp", "tcp2");
  }
  for (size_t size = min;; size = size * (size_t)factor > max && size < max ? max : size * factor) {
    int count = (int)(mb * (1 << 20) / size);
    count = count < 16 ? 16 : count > 20000 ? 20000 : count;
    double r[NKINDS][3];
    for (int kind = 0; kind < NKINDS; kind++) {
      for (int tcp = 0; tcp < (kind == RTT ? 3 : 2); tcp++) {
        int n = kind == RTT ? (count > 2000 ? 2000 : count) : count;
        if (kind == RTT && size > RTT_MAX) {
          r[kind][tcp] = 0;
          continue;
        }
        run(tcp, kind, me, sbuf, rbuf, size, n / 8 + 1); /* warm up */
        double s = run(tcp, kind, me, sbuf, rbuf, size, n);
        r[kind][tcp] = kind == RTT ? s / n * 1e6 : (double)size * n / s / 1e9;
      }
    }
    if (!me) {
      printf("  %10zu %9.2f %9.2f %9.2f %9.2f", size, r[UNI][0], r[UNI][1], r[BIDIR][0],
             r[BIDIR][1]);
      if (size <= RTT_MAX) {
        printf(" %9.1f %9.1f %9.1f", r[RTT][0], r[RTT][1], r[RTT][2]);
      }
      printf("\n");
      fflush(stdout);
    }
    if (size >= max) {
      break;
    }
  }
  net->ops->close_send(net, scomm);
  net->ops->close_recv(net, rcomm);
  close(tcp_fd);
  close(tcp_back);
  net->ops->finalize(net);
  free(sbuf);
  free(rbuf);
  if (me) {
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
