/* The TCP transport's hellos as an attacker sees them (util/hello.h): a
 * program on a peer's TCP port records what a real rank sends and finds no
 * secret in it, and the rank refuses it by name; garbage and a hello whose
 * MAC proves another secret get the listener's proof at most, and the real
 * pair still connects. */
#define _GNU_SOURCE /* memmem */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "transport/tcp_connect.h"
#include "util/check.h"
#include "util/hello.h"
#include "util/socket.h"

static const unsigned char secret[16] = {0x31, 0x41, 0x59, 0x26, 0x53, 0x58, 0x97, 0x93,
                                         0x23, 0x84, 0x62, 0x64, 0x33, 0x83, 0x27, 0x95};
static const uint64_t comm_hash = 0x0123456789abcdefull;

/* One rank of a 2-rank job whose ranks are on different hosts, one socket
 * per pair; rank 1 listens at `at`. */
struct side {
  struct tutti_peer_info peers[2];
  struct tutti_transport_comm tc;
  unsigned char recs[2 * TUTTI_TCP_REC_LEN];
  int fds[2];
  struct tutti_tcp_setup su;
  int lfd;
  ncclResult_t res;
  char err[1024];
};

static void side_init(struct side* s, int rank, const union tutti_socket_addr* at, int lfd) {
  memset(s, 0, sizeof *s);
  for (int r = 0; r < 2; r++) {
    s->peers[r] = (struct tutti_peer_info){.rank = r, .host_hash = (uint64_t)r + 1};
    snprintf(s->peers[r].hostname, sizeof s->peers[r].hostname, "host%d", r);
    unsigned char* rec = s->recs + (size_t)r * TUTTI_TCP_REC_LEN;
    rec[0] = 1;
    rec[2] = 1;
    tutti_socket_put32(rec + 4, 1);
    tutti_socket_addr_pack(at, rec + 8);
    snprintf((char*)rec + 32, 16, "lo");
  }
  s->tc = (struct tutti_transport_comm){
      .rank = rank, .nranks = 2, .peers = s->peers, .secret = secret, .comm_hash = comm_hash};
  s->fds[0] = s->fds[1] = -1;
  s->su = (struct tutti_tcp_setup){.tc = &s->tc, .recs = s->recs, .nsocks = 1, .fds = s->fds};
  s->lfd = lfd;
}

static void* side_main(void* arg) {
  struct side* s = arg;
  s->res = tutti_tcp_connect_all(&s->su, s->lfd);
  snprintf(s->err, sizeof s->err, "%s", s->res == ncclSuccess ? "" : tutti_last_error());
  free(s->su.pend);
  return NULL;
}

static int listen_lo(union tutti_socket_addr* a) {
  memset(a, 0, sizeof *a);
  a->sin.sin_family = AF_INET;
  a->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = -1;
  CHECK(tutti_socket_listen(a, &fd) == ncclSuccess, "listen: %s", tutti_last_error());
  return fd;
}

/* Everything that comes on fd within `secs` (until the peer closes). */
static size_t record(int fd, unsigned char* buf, size_t cap, double secs, size_t answer_at,
                     const unsigned char* answer, size_t answer_len) {
  size_t n = 0;
  int answered = answer == NULL;
  const double until = tutti_socket_now() + secs;
  while (n < cap && tutti_socket_now() < until) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) {
      continue;
    }
    ssize_t k = recv(fd, buf + n, cap - n, MSG_DONTWAIT);
    if (k <= 0) {
      break;
    }
    n += (size_t)k;
    if (!answered && n >= answer_at) {
      (void)send(fd, answer, answer_len, MSG_NOSIGNAL);
      answered = 1;
    }
  }
  return n;
}

/* Rank 0 connects to what holds rank 1's port: a squatter that answers its
 * hello with a forged proof. */
static void test_squatter(void) {
  union tutti_socket_addr at;
  int lfd = listen_lo(&at);
  static struct side s0;
  side_init(&s0, 0, &at, -1);
  pthread_t t;
  pthread_create(&t, NULL, side_main, &s0);
  int fd = -1;
  for (int i = 0; i < 100 && fd < 0; i++) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, 50) > 0) {
      fd = tutti_socket_try_accept(lfd, NULL);
    }
  }
  unsigned char got[1024], forged[TUTTI_HELLO_NONCE + TUTTI_HELLO_MAC];
  for (size_t i = 0; i < sizeof forged; i++) {
    forged[i] = (unsigned char)(i * 37 + 11);
  }
  size_t n = fd >= 0 ? record(fd, got, sizeof got, 5, 48, forged, sizeof forged) : 0;
  pthread_join(t, NULL);
  int found = 0;
  for (int off = 0; off + 6 <= 16; off++) {
    found |= memmem(got, n, secret + off, 6) != NULL;
  }
  CHECK(n == 48 && !found, "the squatter got the 48-byte hello only (%zu bytes), no secret: %d", n,
        found);
  CHECK(s0.res == ncclRemoteError && strstr(s0.err, "did not prove this job's secret"),
        "rank 0 refuses the squatter by name: %d %s", (int)s0.res, s0.err);
  if (fd >= 0) {
    close(fd);
  }
  close(lfd);
}

/* Rank 1's listener meets garbage and a hello whose MAC proves another
 * secret before rank 0 comes: both get nothing past the proof, and the pair
 * connects. */
static void test_strangers(void) {
  union tutti_socket_addr at;
  int lfd = listen_lo(&at);
  static struct side s0, s1;
  side_init(&s1, 1, &at, lfd);
  side_init(&s0, 0, &at, -1);
  pthread_t t1, t0;
  pthread_create(&t1, NULL, side_main, &s1);
  struct tutti_socket_io io = {tutti_socket_now() + 3, NULL, "rank 1", "stranger"};
  int g = -1, w = -1;
  unsigned char garbage[48], hello[48 + 32] = "tuttiTC2";
  for (size_t i = 0; i < sizeof garbage; i++) {
    garbage[i] = (unsigned char)(i * 53 + 1);
  }
  /* A well-formed hello from rank 0, answered with a MAC of a wrong secret. */
  tutti_socket_put32(hello + 24, (uint32_t)(comm_hash >> 32));
  tutti_socket_put32(hello + 28, (uint32_t)comm_hash);
  tutti_socket_put32(hello + 36, 1);
  tutti_socket_put32(hello + 44, 1);
  memset(hello + 48, 0x77, 32);
  CHECK(tutti_socket_connect(&at, &io, NULL, &g) == ncclSuccess &&
            tutti_socket_send_all(g, garbage, sizeof garbage, &io) == ncclSuccess &&
            tutti_socket_connect(&at, &io, NULL, &w) == ncclSuccess &&
            tutti_socket_send_all(w, hello, sizeof hello, &io) == ncclSuccess,
        "strangers reach rank 1");
  unsigned char got[256];
  size_t gn = record(g, got, sizeof got, 1, 0, NULL, 0);
  size_t wn = record(w, got, sizeof got, 1, 0, NULL, 0);
  CHECK(gn == 0, "garbage gets nothing (%zu bytes)", gn);
  CHECK(wn == TUTTI_HELLO_NONCE + TUTTI_HELLO_MAC, "a wrong MAC gets the proof only (%zu bytes)",
        wn);
  pthread_create(&t0, NULL, side_main, &s0);
  pthread_join(t0, NULL);
  pthread_join(t1, NULL);
  CHECK(s0.res == ncclSuccess && s1.res == ncclSuccess && s0.fds[1] >= 0 && s1.fds[0] >= 0,
        "the pair connects after the strangers: %s / %s", s0.err, s1.err);
  for (int i = 0; i < 2; i++) {
    if (s0.fds[i] >= 0) {
      close(s0.fds[i]);
    }
    if (s1.fds[i] >= 0) {
      close(s1.fds[i]);
    }
  }
  close(g);
  close(w);
  close(lfd);
}

int main(void) {
  setenv("TUTTI_TIMEOUT", "10", 0);
  test_squatter();
  test_strangers();
  return test_summary("tcp_hello");
}
