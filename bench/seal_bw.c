/* The record layer's own cost (util/seal.c), without a network: records
 * sealed and opened over a socket pair by one thread (no scheduling in the
 * numbers), for three receives taking turns: no key (plain recv), a key
 * with tutti_seal_recv (opened in the layer's buffer, copied out once
 * authenticated) and a key with tutti_seal_recv_slot (opened straight into
 * the destination, as the TCP transport's slots are); then the time of a
 * handshake over loopback TCP with and without a key.
 *   seal_bw [ROUNDS [MB]]   default 5 rounds of 256 MB per record size */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/seal.h"

#define KEY "seal-bw-bench-key-0123456789abcdef0123456789"

enum mode { PLAIN, COPY, INPLACE, NMODES };
static const char* mode_name[NMODES] = {"no key", "recv (copy)", "recv_slot (in place)"};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void die(const char* what) {
  fprintf(stderr, "seal_bw: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void attach_pair(int* sv, int keyed) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) {
    die("socketpair");
  }
  for (int i = 0; i < 2; i++) { /* a whole record fits: one send, one receive */
    int big = 8 << 20;
    setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  }
  tutti_seal_set_key(keyed ? KEY : NULL);
  tutti_seal_attach(sv[0], 1);
  tutti_seal_attach(sv[1], 0);
  tutti_seal_set_key(NULL);
  for (int i = 0; keyed && i < 1000; i++) {
    if (tutti_seal_handshake(sv[0]) == 0 && tutti_seal_handshake(sv[1]) == 0) {
      return;
    }
  }
  if (keyed) {
    fprintf(stderr, "seal_bw: the handshake did not complete\n");
    exit(1);
  }
}

/* GB/s of `total` bytes moved in records of `rec` bytes. */
static double stream(enum mode m, size_t rec, size_t total, unsigned char* src,
                     unsigned char* dst) {
  int sv[2];
  attach_pair(sv, m != PLAIN);
  const double t0 = now();
  for (size_t moved = 0; moved < total; moved += rec) {
    size_t sent = 0, got = 0;
    while (sent < rec) {
      ssize_t n = tutti_seal_send(sv[0], src + sent, rec - sent);
      if (n < 0 && errno != EAGAIN) {
        die("send");
      }
      sent += n > 0 ? (size_t)n : 0;
    }
    while (got < rec) {
      ssize_t n = m == INPLACE ? tutti_seal_recv_slot(sv[1], dst + got, rec - got)
                               : tutti_seal_recv(sv[1], dst + got, rec - got);
      if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
        die("recv");
      }
      got += n > 0 ? (size_t)n : 0;
    }
  }
  const double t = now() - t0;
  if (memcmp(src, dst, rec) != 0) {
    fprintf(stderr, "seal_bw: the bytes differ\n");
    exit(1);
  }
  tutti_seal_close(sv[0]);
  tutti_seal_close(sv[1]);
  return (double)total / t / 1e9;
}

/* Microseconds from connect() to both ends through the handshake, over
 * loopback TCP, both ends driven by this thread. */
static double handshake_us(int keyed, int lfd, const struct sockaddr_in* at) {
  tutti_seal_set_key(keyed ? KEY : NULL);
  const double t0 = now();
  int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (connect(c, (const struct sockaddr*)at, sizeof *at) != 0 && errno != EINPROGRESS) {
    die("connect");
  }
  tutti_seal_attach(c, 1);
  int a = -1;
  while (a < 0) {
    a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
  }
  tutti_seal_attach(a, 0);
  int rc = EAGAIN, ra = EAGAIN;
  while (rc != 0 || ra != 0) {
    rc = tutti_seal_handshake(c);
    ra = tutti_seal_handshake(a);
    if ((rc != 0 && rc != EAGAIN) || (ra != 0 && ra != EAGAIN)) {
      fprintf(stderr, "seal_bw: handshake failed: %d %d\n", rc, ra);
      exit(1);
    }
  }
  const double t = now() - t0;
  tutti_seal_set_key(NULL);
  tutti_seal_close(c);
  tutti_seal_close(a);
  return t * 1e6;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 5;
  const size_t total = (argc > 2 ? (size_t)atol(argv[2]) : 256) << 20;
  if (rounds < 1 || total == 0 || tutti_seal_set_key(KEY) != ncclSuccess) {
    fprintf(stderr, "usage: seal_bw [ROUNDS [MB]] (and OpenSSL 3 installed)\n");
    return 1;
  }
  tutti_seal_set_key(NULL);
  const size_t recs[] = {4096, 65536, TUTTI_SEAL_RECORD};
  unsigned char* src = malloc(TUTTI_SEAL_RECORD);
  unsigned char* dst = malloc(TUTTI_SEAL_RECORD);
  for (size_t i = 0; i < TUTTI_SEAL_RECORD; i++) {
    src[i] = (unsigned char)(i * 131 + (i >> 9));
  }
  printf("%-10s %-22s %s\n", "record", "receive", "GB/s median (min-max) of rounds");
  for (size_t r = 0; r < sizeof recs / sizeof recs[0]; r++) {
    double gbs[NMODES][64];
    const int nr = rounds < 64 ? rounds : 64;
    for (int k = 0; k < nr; k++) {
      for (int m = 0; m < NMODES; m++) { /* taking turns: load drifts alike */
        gbs[m][k] = stream((enum mode)m, recs[r], total, src, dst);
      }
    }
    for (int m = 0; m < NMODES; m++) {
      qsort(gbs[m], (size_t)nr, sizeof(double), cmp);
      printf("%-10zu %-22s %.3f (%.3f-%.3f)\n", recs[r], mode_name[m], gbs[m][nr / 2], gbs[m][0],
             gbs[m][nr - 1]);
    }
  }
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof at;
  if (lfd < 0 || bind(lfd, (struct sockaddr*)&at, sizeof at) != 0 || listen(lfd, 16) != 0 ||
      getsockname(lfd, (struct sockaddr*)&at, &al) != 0) {
    die("listen");
  }
  for (int keyed = 0; keyed < 2; keyed++) {
    enum { N = 201 };
    double us[N];
    for (int i = 0; i < N; i++) {
      us[i] = handshake_us(keyed, lfd, &at);
    }
    qsort(us, N, sizeof(double), cmp);
    printf("handshake over loopback TCP, %s: median %.1f us (10%% %.1f, 90%% %.1f), %d runs\n",
           keyed ? "with a key" : "no key", us[N / 2], us[N / 10], us[N * 9 / 10], N);
  }
  close(lfd);
  free(src);
  free(dst);
  return 0;
}
