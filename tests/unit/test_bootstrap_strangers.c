/* Bootstrap against strangers: a client that knows the secret but claims a
 * rank outside the job, and connections that never say who they are (or
 * trickle bytes, or cannot prove the secret) on every listening port of
 * this process, while a job runs. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot_ranks.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/internal.h"
#include "harness.h"
#include "util/check.h"

/* A client that knows the secret but claims rank 7 of 2: the root tells everyone. */
static void test_bad_hello(void) {
  static struct rank_arg a[1];
  ncclUniqueId id = new_id();
  struct tutti_bs_id f;
  tutti_bootstrap_id_decode(&id, &f);
  unsigned char msg[TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN] = {0};
  unsigned char* p = msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  tutti_bootstrap_preamble(msg);
  tutti_socket_put32(msg + TUTTI_BS_PREAMBLE, TUTTI_BS_HELLO);
  tutti_socket_put32(msg + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_HELLO_LEN);
  tutti_socket_put32(p, 7);
  tutti_socket_put32(p + 4, 2);
  tutti_socket_put32(p + 12, 3000);
  tutti_socket_addr_pack(&f.root, p + 16);
  setup(a, 1, &id, 2, 3.0, 8);
  pthread_t t;
  pthread_create(&t, NULL, rank_main, &a[0]);
  sleep_s(0.2);
  struct tutti_socket_io io = {tutti_socket_now() + 3, NULL, "the root", "fake rank"};
  int fd = -1;
  unsigned char hdr[8] = {0}, proof[TUTTI_BS_PROOF], mac[TUTTI_BS_MAC], packed[24];
  tutti_socket_addr_pack(&f.root, packed);
  const struct tutti_bs_proof_of pf = {TUTTI_HELLO_ROOT, packed, msg, sizeof msg};
  CHECK(tutti_socket_connect(&f.root, &io, NULL, &fd) == ncclSuccess &&
            tutti_socket_send_all(fd, msg, sizeof msg, &io) == ncclSuccess &&
            tutti_socket_recv_all(fd, proof, sizeof proof, &io) == ncclSuccess &&
            tutti_bs_answer(&pf, f.secret, proof, mac) == 0 &&
            tutti_socket_send_all(fd, mac, sizeof mac, &io) == ncclSuccess &&
            tutti_socket_recv_all(fd, hdr, 8, &io) == ncclSuccess &&
            tutti_socket_get32(hdr) == TUTTI_BS_ERROR,
        "the bad rank is answered with an error");
  close(fd);
  pthread_join(t, NULL);
  expect_all(a, 1, ncclInvalidArgument, "as rank 7, outside 0..1", "rank out of range");
}

/* Every TCP listener of this process: /proc/net/tcp{,6} matched with /proc/self/fd. */
static int my_listeners(union tutti_socket_addr* out, int max) {
  static unsigned long inodes[4096];
  int ni = 0, n = 0;
  DIR* d = opendir("/proc/self/fd");
  for (struct dirent* e = d ? readdir(d) : NULL; e != NULL && ni < 4096; e = readdir(d)) {
    char path[300], link[64] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    if (readlink(path, link, sizeof link - 1) > 0 &&
        sscanf(link, "socket:[%lu]", &inodes[ni]) == 1) {
      ni++;
    }
  }
  if (d) {
    closedir(d);
  }
  for (int v6 = 0; v6 < 2; v6++) {
    FILE* f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
    char line[512], hex[33];
    unsigned port, st;
    unsigned long ino;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
      if (sscanf(line, " %*d: %32[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", hex, &port, &st,
                 &ino) != 4 ||
          st != 0x0a) {
        continue;
      }
      int mine = 0;
      for (int i = 0; i < ni && !mine; i++) {
        mine = inodes[i] == ino;
      }
      union tutti_socket_addr a;
      memset(&a, 0, sizeof a);
      a.sa.sa_family = v6 ? AF_INET6 : AF_INET;
      for (int w = 0; w < (v6 ? 4 : 1); w++) { /* the kernel prints raw 32-bit words */
        char word[9] = {0};
        memcpy(word, hex + 8 * w, 8);
        uint32_t v = (uint32_t)strtoul(word, NULL, 16);
        memcpy(v6 ? (void*)&a.sin6.sin6_addr.s6_addr[4 * w] : (void*)&a.sin.sin_addr, &v, 4);
      }
      tutti_socket_set_port(&a, (int)port);
      if (mine && n < max) {
        out[n++] = a;
      }
    }
    if (f) {
      fclose(f);
    }
  }
  return n;
}

enum { GARBAGE, WRONG_SECRET, HUGE_HELLO, HUGE_RING, HALF_FRAME, SILENT, TRICKLE, KINDS };

static int stranger(const union tutti_socket_addr* at, int kind, const unsigned char* secret) {
  struct tutti_socket_io io = {tutti_socket_now() + 2, NULL, "a listener", "stranger"};
  int fd = -1;
  if (tutti_socket_connect(at, &io, NULL, &fd) != ncclSuccess) {
    return -1;
  }
  unsigned char m[TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN] = {0}, bad[16];
  size_t len = 0;
  memcpy(bad, secret, 16);
  bad[5] ^= 1;
  if (kind == GARBAGE) {
    for (len = 0; len < sizeof m; len++) {
      m[len] = (unsigned char)rand();
    }
  } else if (kind != SILENT && kind != TRICKLE) {
    tutti_bootstrap_preamble(m);
    tutti_socket_put32(m + 24, kind == HUGE_RING ? TUTTI_BS_RING : TUTTI_BS_HELLO);
    tutti_socket_put32(m + 28, kind == WRONG_SECRET ? TUTTI_BS_HELLO_LEN : 0xffffffffu);
    len = kind == HALF_FRAME ? 28 : kind == WRONG_SECRET ? sizeof m : 32;
  }
  if (len > 0) {
    tutti_socket_send_all(fd, m, len, &io);
  }
  if (kind == WRONG_SECRET) {
    /* A whole hello: a root proves the secret first (a ring listener drops
     * a root's hello); the stranger's MAC, made with another secret, gets
     * it nothing more. */
    unsigned char proof[TUTTI_BS_PROOF], mac[TUTTI_BS_MAC];
    struct tutti_socket_io pio = {tutti_socket_now() + 0.5, NULL, "a listener", "stranger"};
    if (tutti_socket_recv_all(fd, proof, sizeof proof, &pio) == ncclSuccess) {
      unsigned char packed[24];
      tutti_socket_addr_pack(at, packed);
      const struct tutti_bs_proof_of pf = {TUTTI_HELLO_ROOT, packed, m, sizeof m};
      CHECK(tutti_bs_answer(&pf, bad, proof, mac) != 0, "a listener proved a wrong secret");
      for (size_t i = 0; i < sizeof mac; i++) {
        mac[i] = (unsigned char)rand();
      }
      tutti_socket_send_all(fd, mac, sizeof mac, &io);
    }
  }
  return fd;
}

struct trickle {
  int fds[64], n;
  volatile int stop;
  unsigned char pre[TUTTI_BS_PREAMBLE];
};

/* One byte of a genuine preamble every 0.3 s: slow enough never to finish. */
static void* trickle_main(void* p) {
  struct trickle* t = p;
  for (int k = 0; !__atomic_load_n(&t->stop, __ATOMIC_RELAXED) && k < TUTTI_BS_PREAMBLE; k++) {
    for (int i = 0; i < t->n; i++) {
      (void)send(t->fds[i], &t->pre[k], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    sleep_s(0.3);
  }
  return NULL;
}

static void test_strangers(void) {
  static struct rank_arg a[4];
  static union tutti_socket_addr ls[64];
  static struct trickle tr;
  int fds[64 * KINDS], nf = 0;
  ncclUniqueId id = new_id();
  unsigned char secret[16];
  tutti_bootstrap_id_secret(&id, secret);
  int nb = my_listeners(ls, 64), nl = nb;
  setup(a, 4, &id, 4, 10, 1000);
  pthread_t t[4], tt;
  for (int i = 0; i < 3; i++) {
    pthread_create(&t[i], NULL, rank_main, &a[i]);
  }
  for (int i = 0; i < 100 && nl < nb + 3; i++) {
    sleep_s(0.02);
    nl = my_listeners(ls, 64);
  }
  CHECK(nl >= nb + 3, "found the ranks' listeners (%d before, %d now)", nb, nl);
  memset(&tr, 0, sizeof tr);
  tutti_bootstrap_preamble(tr.pre);
  for (int l = 0; l < nl; l++) {
    for (int k = 0; k < KINDS; k++) {
      int fd = stranger(&ls[l], k, secret);
      if (fd >= 0) {
        fds[nf++] = fd;
        if (k == TRICKLE && tr.n < 64) {
          tr.fds[tr.n++] = fd;
        }
      }
    }
  }
  CHECK(nf >= nl * KINDS - 2, "strangers connected to %d listeners: %d", nl, nf);
  pthread_create(&tt, NULL, trickle_main, &tr);
  sleep_s(0.3);
  double t0 = tutti_socket_now();
  pthread_create(&t[3], NULL, rank_main, &a[3]);
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    CHECK(a[i].res == ncclSuccess && a[i].data_ok, "with strangers, rank %d: %s", i, a[i].err);
    CHECK(a[i].done_at - t0 < 2.0, "rank %d done %.2f s after the last rank came", i,
          a[i].done_at - t0);
  }
  __atomic_store_n(&tr.stop, 1, __ATOMIC_RELAXED);
  pthread_join(tt, NULL);
  int told = 0;
  for (int i = 0; i < nf; i++) {
    char c;
    told += recv(fds[i], &c, 1, MSG_DONTWAIT) > 0;
    close(fds[i]);
  }
  CHECK(told == 0, "%d strangers were sent something", told);
}

int main(void) {
  setenv("TUTTI_TIMEOUT", "20", 0); /* bounds the life of roots nobody uses */
  unsetenv("NCCL_COMM_ID");
  srand(1);
  test_bad_hello();
  test_strangers();
  return test_summary("bootstrap_strangers");
}
