/* The bootstrap's hellos as an attacker sees them (util/hello.h): a program
 * squatting on the root's or a peer's port records what a real rank sends
 * and must find no secret in it, nor anything it could present elsewhere;
 * the rank refuses it by name. A genuine hello recorded on the wire and
 * replayed to the real root gets a proof and nothing more. */
#define _GNU_SOURCE /* memmem */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot_ranks.h"
#include "bootstrap/internal.h"
#include "harness.h"
#include "util/check.h"

/* A program on an address of the job: accepts one connection, records what
 * comes, answers a whole hello with a forged proof (or nothing), and records
 * on until the peer closes. */
struct squatter {
  int lfd;
  union tutti_socket_addr addr;
  size_t hello_len; /* bytes before it answers */
  int silent;
  unsigned char got[4096];
  size_t n;
};

static void* squat_main(void* arg) {
  struct squatter* s = arg;
  const double until = tutti_socket_now() + 12;
  int fd = -1;
  while (fd < 0 && tutti_socket_now() < until) {
    struct pollfd p = {.fd = s->lfd, .events = POLLIN};
    if (poll(&p, 1, 100) > 0) {
      fd = tutti_socket_try_accept(s->lfd, NULL);
    }
  }
  int answered = 0;
  while (fd >= 0 && tutti_socket_now() < until && s->n < sizeof s->got) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) {
      continue;
    }
    ssize_t k = recv(fd, s->got + s->n, sizeof s->got - s->n, MSG_DONTWAIT);
    if (k <= 0) {
      break; /* the rank closed: it has said all it will */
    }
    s->n += (size_t)k;
    if (!answered && !s->silent && s->n >= s->hello_len) {
      unsigned char forged[TUTTI_BS_PROOF];
      for (size_t i = 0; i < sizeof forged; i++) {
        forged[i] = (unsigned char)rand();
      }
      (void)send(fd, forged, sizeof forged, MSG_NOSIGNAL);
      answered = 1;
    }
  }
  if (fd >= 0) {
    close(fd);
  }
  return NULL;
}

static void squat_open(struct squatter* s, size_t hello_len, int silent) {
  memset(s, 0, sizeof *s);
  s->addr.sin.sin_family = AF_INET;
  s->addr.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(tutti_socket_listen(&s->addr, &s->lfd) == ncclSuccess, "squatter listens: %s",
        tutti_last_error());
  s->hello_len = hello_len;
  s->silent = silent;
}

/* Neither the secret nor any 6 bytes of it in a row. */
static void no_secret(const struct squatter* s, const unsigned char secret[16], const char* what) {
  int found = 0;
  for (int off = 0; off + 6 <= 16; off++) {
    found |= memmem(s->got, s->n, secret + off, 6) != NULL;
  }
  CHECK(s->n > 0 && !found, "%s: %zu bytes recorded, secret bytes among them: %d", what, s->n,
        found);
}

/* A rank whose id names a squatter's address as its root (NCCL_COMM_ID
 * mode, so it waits for the root and never starts one: rank 1). */
static void test_root_squatter(int silent) {
  struct squatter s;
  squat_open(&s, TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN, silent);
  unsigned char secret[16];
  CHECK(tutti_bs_random_secret(secret) == ncclSuccess, "secret");
  static struct rank_arg a[1];
  ncclUniqueId id;
  tutti_bootstrap_rank0_id(&s.addr, secret, &id);
  setup(a, 1, &id, 2, 20, 8);
  a[0].rank = 1;
  pthread_t st, rt;
  pthread_create(&st, NULL, squat_main, &s);
  const double t0 = tutti_socket_now();
  pthread_create(&rt, NULL, rank_main, &a[0]);
  pthread_join(rt, NULL);
  const double took = tutti_socket_now() - t0;
  pthread_join(st, NULL);
  close(s.lfd);
  no_secret(&s, secret, silent ? "silent root squatter" : "root squatter");
  CHECK(s.n == s.hello_len, "the squatter got the hello only (%zu bytes, %zu expected)", s.n,
        s.hello_len);
  if (silent) {
    CHECK(a[0].res == ncclRemoteError && took < 8, "a silent squatter: refused in %.1f s: %d %s",
          took, (int)a[0].res, a[0].err);
  } else {
    CHECK(a[0].res == ncclRemoteError && strstr(a[0].err, "did not prove this job's secret") &&
              took < 3,
          "a forged proof is refused by name in %.1f s: %d %s", took, (int)a[0].res, a[0].err);
  }
}

/* The test as a genuine rank at the real root: its hello and MAC, recorded
 * in *rec (what a wiretap saw); then the table, read into tbl. */
static int join_as(const union tutti_socket_addr* root, const unsigned char secret[16], int rank,
                   int nranks, const union tutti_socket_addr* listen_at, unsigned char* rec,
                   int* fd_out) {
  unsigned char* msg = rec;
  unsigned char* p = msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  const size_t len = TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN;
  memset(msg, 0, len);
  tutti_bootstrap_preamble(msg);
  tutti_socket_put32(msg + TUTTI_BS_PREAMBLE, TUTTI_BS_HELLO);
  tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_HELLO_LEN);
  tutti_socket_put32(p, (uint32_t)rank);
  tutti_socket_put32(p + 4, (uint32_t)nranks);
  tutti_socket_put32(p + 8, 20000);
  tutti_socket_put32(p + 12, 15000);
  tutti_socket_addr_pack(listen_at, p + 16);
  unsigned char packed[TUTTI_SOCKET_ADDR_WIRE], proof[TUTTI_BS_PROOF];
  tutti_socket_addr_pack(root, packed);
  const struct tutti_bs_proof_of pf = {TUTTI_HELLO_ROOT, packed, msg, len};
  struct tutti_socket_io io = {tutti_socket_now() + 5, NULL, "the root", "test rank"};
  int fd = -1;
  int ok = tutti_socket_connect(root, &io, NULL, &fd) == ncclSuccess &&
           tutti_socket_send_all(fd, msg, len, &io) == ncclSuccess &&
           tutti_socket_recv_all(fd, proof, sizeof proof, &io) == ncclSuccess &&
           tutti_bs_answer(&pf, secret, proof, rec + len) == 0 &&
           tutti_socket_send_all(fd, rec + len, TUTTI_BS_MAC, &io) == ncclSuccess;
  *fd_out = fd;
  return ok;
}

/* Replays a recorded hello and MAC on a new connection: the root proves
 * itself (fresh nonce), refuses the stale MAC, and says nothing more. */
static void replay(const union tutti_socket_addr* root, const unsigned char* rec, size_t len) {
  struct tutti_socket_io io = {tutti_socket_now() + 3, NULL, "the root", "replay"};
  int fd = -1;
  CHECK(tutti_socket_connect(root, &io, NULL, &fd) == ncclSuccess &&
            tutti_socket_send_all(fd, rec, len, &io) == ncclSuccess,
        "the replay reaches the root");
  unsigned char buf[512];
  size_t n = 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 2000) <= 0) {
      break;
    }
    ssize_t k = recv(fd, buf + n, sizeof buf - n, MSG_DONTWAIT);
    if (k <= 0) {
      break;
    }
    n += (size_t)k;
  }
  close(fd);
  CHECK(n == TUTTI_BS_PROOF, "a replayed hello and MAC get the root's proof only (%zu bytes)", n);
}

/* A 2-rank job: the test joins as rank 1 (recorded on the wire) naming a
 * squatter as its ring address, and replays the recording; rank 0 then
 * meets the squatter on the ring. The replay must not count as a second
 * rank 1, and the squatter must learn nothing. */
static void test_ring_squatter_and_replay(void) {
  ncclUniqueId id = new_id();
  struct tutti_bs_id f;
  CHECK(tutti_bootstrap_id_decode(&id, &f) == ncclSuccess, "decode");
  struct squatter s;
  squat_open(&s, TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_RING_LEN, 0);
  pthread_t st, rt;
  pthread_create(&st, NULL, squat_main, &s);
  unsigned char rec[TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN + TUTTI_BS_MAC];
  int fd = -1;
  CHECK(join_as(&f.root, f.secret, 1, 2, &s.addr, rec, &fd), "the test joins as rank 1: %s",
        tutti_last_error());
  replay(&f.root, rec, sizeof rec);
  static struct rank_arg a[1];
  setup(a, 1, &id, 2, 20, 8);
  pthread_create(&rt, NULL, rank_main, &a[0]);
  pthread_join(rt, NULL);
  pthread_join(st, NULL);
  close(s.lfd);
  close(fd);
  no_secret(&s, f.secret, "ring squatter");
  CHECK(s.n == s.hello_len, "the ring squatter got the hello only (%zu bytes)", s.n);
  CHECK(a[0].res == ncclRemoteError && strstr(a[0].err, "did not prove this job's secret"),
        "rank 0 refuses the ring squatter by name (not a duplicate rank 1): %d %s", (int)a[0].res,
        a[0].err);
}

/* A rank given another secret for the job's root (a different unique id of
 * the same address) is refused by name, and the job runs on. */
static void test_wrong_secret(void) {
  ncclUniqueId id = new_id(), wrong = id;
  ((unsigned char*)wrong.internal)[32 + 5] ^= 0x10; /* the secret's bytes (bootstrap/internal.h) */
  static struct rank_arg a[3];
  setup(a, 3, &id, 2, 20, 64);
  a[2].id = wrong;
  a[2].rank = 1;
  a[1].delay = 0.5; /* the stranger comes first */
  const double t0 = tutti_socket_now();
  run(a, 3);
  CHECK(a[2].res == ncclRemoteError && strstr(a[2].err, "did not prove this job's secret") &&
            a[2].done_at - t0 < 3,
        "the wrong secret is refused by name: %d %s", (int)a[2].res, a[2].err);
  for (int i = 0; i < 2; i++) {
    CHECK(a[i].res == ncclSuccess && a[i].data_ok, "the job runs on: rank %d: %s", i, a[i].err);
  }
}

int main(void) {
  setenv("TUTTI_TIMEOUT", "20", 0);
  unsetenv("NCCL_COMM_ID");
  srand(7);
  test_root_squatter(0);
  test_root_squatter(1);
  test_ring_squatter_and_replay();
  test_wrong_secret();
  return test_summary("hello_proof");
}
