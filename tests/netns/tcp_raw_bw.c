/* The raw TCP stream rate between two hosts (or namespaces), for comparing
 * the tcp transport's bandwidth with what plain sockets reach. Usage:
 *   tcp_raw_bw -l [-p PORT] [-s STREAMS]                    receiver
 *   tcp_raw_bw -c HOST [-p PORT] [-b BYTES] [-s STREAMS] [-d] sender
 * The sender moves BYTES (K/M/G suffixes; default 256M) split over STREAMS
 * connections (default 2, as the transport's default sockets per peer) and
 * prints "raw_tcp bytes B streams S seconds T GB/s R". With -d each side
 * sends BYTES to the other at once (both directions, as a 2-rank allreduce). */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1 << 20)

struct stream {
  int fd;
  size_t bytes; /* to send (and, with duplex, to receive) */
  int send, recv;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'G':
    case 'g':
      v *= 1 << 30;
      break;
    case 'M':
    case 'm':
      v *= 1 << 20;
      break;
    case 'K':
    case 'k':
      v *= 1 << 10;
      break;
  }
  return (size_t)v;
}

static void die(const char* what) {
  perror(what);
  exit(1);
}

static void* pump_out(void* arg) {
  struct stream* s = arg;
  char* buf = calloc(1, CHUNK);
  for (size_t left = s->bytes; left > 0;) {
    ssize_t n = send(s->fd, buf, left < CHUNK ? left : CHUNK, MSG_NOSIGNAL);
    if (n <= 0)
      die("send");
    left -= (size_t)n;
  }
  free(buf);
  return NULL;
}

static void* pump_in(void* arg) {
  struct stream* s = arg;
  char* buf = malloc(CHUNK);
  for (size_t left = s->bytes; left > 0;) {
    ssize_t n = recv(s->fd, buf, left < CHUNK ? left : CHUNK, 0);
    if (n <= 0)
      die("recv");
    left -= (size_t)n;
  }
  free(buf);
  return NULL;
}

/* Runs every stream's directions on threads of their own. */
static void run(struct stream* st, int n) {
  pthread_t th[128];
  int nt = 0;
  for (int i = 0; i < n; i++) {
    if (st[i].send)
      pthread_create(&th[nt++], NULL, pump_out, &st[i]);
    if (st[i].recv)
      pthread_create(&th[nt++], NULL, pump_in, &st[i]);
  }
  for (int i = 0; i < nt; i++)
    pthread_join(th[i], NULL);
}

/* One byte each way: both sides start together and the sender's clock
 * stops only when the receiver has everything. */
static void sync_byte(int fd) {
  char c = 1;
  if (send(fd, &c, 1, MSG_NOSIGNAL) != 1 || recv(fd, &c, 1, MSG_WAITALL) != 1)
    die("sync");
}

int main(int argc, char** argv) {
  int listen_mode = 0, port = 29999, nstreams = 2, duplex = 0;
  const char* host = NULL;
  size_t bytes = (size_t)256 << 20;
  int opt;
  while ((opt = getopt(argc, argv, "lc:p:b:s:d")) != -1) {
    switch (opt) {
      case 'l':
        listen_mode = 1;
        break;
      case 'c':
        host = optarg;
        break;
      case 'p':
        port = atoi(optarg);
        break;
      case 'b':
        bytes = parse_size(optarg);
        break;
      case 's':
        nstreams = atoi(optarg);
        break;
      case 'd':
        duplex = 1;
        break;
      default:
        fprintf(stderr,
                "usage: %s -l [-p port] [-s streams] | -c host [-p port] [-b bytes] "
                "[-s streams] [-d]\n",
                argv[0]);
        return 2;
    }
  }
  if (nstreams < 1 || nstreams > 64 || (!listen_mode && host == NULL)) {
    fprintf(stderr, "%s: give -l or -c HOST, and 1 to 64 streams\n", argv[0]);
    return 2;
  }
  struct stream st[64];
  memset(st, 0, sizeof st);
  int one = 1;
  if (listen_mode) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 64) != 0)
      die("listen");
    for (int i = 0; i < nstreams; i++) {
      if ((st[i].fd = accept(l, NULL, NULL)) < 0)
        die("accept");
    }
    close(l);
  } else {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) != 0)
      die("getaddrinfo");
    for (int i = 0; i < nstreams; i++) {
      st[i].fd = socket(AF_INET, SOCK_STREAM, 0);
      for (int tries = 0; connect(st[i].fd, ai->ai_addr, ai->ai_addrlen) != 0; tries++) {
        if (tries > 100)
          die("connect"); /* the receiver may still be starting */
        usleep(50 * 1000);
      }
    }
    freeaddrinfo(ai);
  }
  /* The sender tells the receiver the size and mode on stream 0. */
  uint64_t hdr[2] = {bytes, (uint64_t)duplex};
  if (listen_mode) {
    if (recv(st[0].fd, hdr, sizeof hdr, MSG_WAITALL) != sizeof hdr)
      die("header");
    bytes = hdr[0];
    duplex = (int)hdr[1];
  } else if (send(st[0].fd, hdr, sizeof hdr, 0) != sizeof hdr) {
    die("header");
  }
  for (int i = 0; i < nstreams; i++) {
    setsockopt(st[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    st[i].bytes = bytes / (size_t)nstreams + (i == 0 ? bytes % (size_t)nstreams : 0);
    st[i].send = !listen_mode || duplex;
    st[i].recv = listen_mode || duplex;
  }
  sync_byte(st[0].fd);
  double t0 = now();
  run(st, nstreams);
  sync_byte(st[0].fd);
  double t = now() - t0;
  if (!listen_mode) {
    t = t > 0 ? t : 1e-9;
    printf("raw_tcp bytes %zu streams %d%s seconds %.3f GB/s %.3f\n", bytes, nstreams,
           duplex ? " duplex" : "", t, (double)bytes / t / 1e9);
  }
  for (int i = 0; i < nstreams; i++)
    close(st[i].fd);
  return 0;
}
