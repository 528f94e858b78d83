/* Bootstrap with ranks as threads: jobs of 1 to 64 ranks, NCCL_COMM_ID mode,
 * bad ids, missing / duplicate / mismatched ranks, strangers on every
 * listening port, abort, peer death, and no fd leaks. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/internal.h"
#include "harness.h"
#include "util/check.h"

#define MAXR 64

struct rank_arg {
  ncclUniqueId id;
  int rank, nranks, keep, fake;
  double timeout, delay;
  size_t bytes;
  volatile int* abort_flag;
  ncclResult_t res;
  int data_ok;
  double done_at;
  char err[1024];
  struct tutti_bootstrap* b;
};

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static void fill(unsigned char* p, int rank, size_t bytes) {
  for (size_t i = 0; i < bytes; i++) {
    p[i] = (unsigned char)(rank * 131 + i * 7 + (i >> 8));
  }
}

static void* rank_main(void* p) {
  struct rank_arg* a = p;
  sleep_s(a->delay);
  a->res = tutti_bootstrap_init(&a->id, a->rank, a->nranks, a->timeout, a->abort_flag, &a->b);
  if (a->res == ncclSuccess && a->bytes > 0) {
    unsigned char* buf = malloc(a->bytes * (size_t)a->nranks);
    unsigned char* want = malloc(a->bytes);
    memset(buf, 0xee, a->bytes * (size_t)a->nranks);
    fill(buf + (size_t)a->rank * a->bytes, a->rank, a->bytes);
    a->res = tutti_bootstrap_allgather(a->b, buf, a->bytes);
    a->data_ok = 1;
    for (int r = 0; r < a->nranks && a->res == ncclSuccess; r++) {
      fill(want, r, a->bytes);
      a->data_ok &= memcmp(want, buf + (size_t)r * a->bytes, a->bytes) == 0;
    }
    free(buf);
    free(want);
  }
  for (int i = 0; i < 3 && a->res == ncclSuccess; i++) {
    a->res = tutti_bootstrap_barrier(a->b);
  }
  if (a->res == ncclSuccess && a->bytes > 0) {
    a->res = tutti_bootstrap_allgather(a->b, NULL, 0);
    a->data_ok &= tutti_bootstrap_address(a->b, a->nranks - 1)[0] != '\0';
  }
  snprintf(a->err, sizeof a->err, "%s", a->res == ncclSuccess ? "" : tutti_last_error());
  a->done_at = tutti_socket_now();
  if (!a->keep) {
    tutti_bootstrap_close(a->b);
    a->b = NULL;
  }
  return NULL;
}

/* Runs args[0..n) as threads and waits for them all. */
static void run(struct rank_arg* args, int n) {
  pthread_t t[MAXR + 4];
  for (int i = 0; i < n; i++) {
    pthread_create(&t[i], NULL, rank_main, &args[i]);
  }
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
  }
}

static void setup(struct rank_arg* a, int n, const ncclUniqueId* id, int nranks, double timeout,
                  size_t bytes) {
  memset(a, 0, sizeof *a * (size_t)n);
  for (int i = 0; i < n; i++) {
    a[i].id = *id;
    a[i].rank = i;
    a[i].nranks = nranks;
    a[i].timeout = timeout;
    a[i].bytes = bytes;
  }
}

static int count_fds(void) {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  for (struct dirent* e = d ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
    n += e->d_name[0] != '.';
  }
  if (d) {
    closedir(d);
  }
  return n;
}

static ncclUniqueId new_id(void) {
  ncclUniqueId id;
  ncclResult_t r = tutti_bootstrap_get_unique_id(&id);
  CHECK(r == ncclSuccess, "get_unique_id: %s", tutti_last_error());
  return id;
}

static void test_fd_leaks(void) {
  static struct rank_arg a[3];
  int before = count_fds();
  for (int cycle = 0; cycle < 50; cycle++) {
    ncclUniqueId id = new_id();
    setup(a, 3, &id, 3, 10, 16);
    run(a, 3);
    for (int i = 0; i < 3; i++) {
      CHECK(a[i].res == ncclSuccess && a[i].data_ok, "cycle %d rank %d: %s", cycle, i, a[i].err);
    }
  }
  int after = count_fds();
  for (int i = 0; i < 40 && after > before; i++) { /* roots close their fds a moment later */
    sleep_s(0.05);
    after = count_fds();
  }
  CHECK(after == before, "fds before %d, after 50 init/close cycles %d", before, after);
}

static void test_jobs(void) {
  static struct rank_arg a[MAXR];
  const int sizes[] = {1, 2, 3, 8, 64};
  for (int k = 0; k < 5; k++) {
    int n = sizes[k];
    for (int big = 0; big < (n <= 8 ? 2 : 1); big++) {
      ncclUniqueId id = new_id();
      double t0 = tutti_socket_now();
      setup(a, n, &id, n, 20, big ? (1u << 20) + 3 : 13);
      run(a, n);
      int ok = 1;
      for (int i = 0; i < n; i++) {
        ok &= a[i].res == ncclSuccess && a[i].data_ok;
        CHECK(a[i].res == ncclSuccess && a[i].data_ok, "n=%d rank %d: %s", n, i, a[i].err);
      }
      printf("job of %d ranks, %zu bytes each: %s in %.3f s\n", n, a[0].bytes, ok ? "ok" : "FAILED",
             tutti_socket_now() - t0);
    }
  }
}

static int free_port(void) {
  union tutti_socket_addr a;
  int fd;
  tutti_socket_parse("127.0.0.1:0", AF_INET, &a);
  tutti_socket_listen(&a, &fd);
  close(fd);
  return tutti_socket_port(&a);
}

static void test_comm_id(void) {
  static struct rank_arg a[4];
  char env[64];
  snprintf(env, sizeof env, "127.0.0.1:%d", free_port());
  setenv("NCCL_COMM_ID", env, 1);
  ncclUniqueId id1 = new_id(), id2 = new_id(), id3;
  CHECK(memcmp(&id1, &id2, sizeof id1) == 0, "NCCL_COMM_ID gives the same id every time");
  setenv("TUTTI_JOB_SECRET", "job-42", 1);
  id3 = new_id();
  unsetenv("TUTTI_JOB_SECRET");
  unsigned char s1[16], s3[16];
  tutti_bootstrap_id_secret(&id1, s1);
  tutti_bootstrap_id_secret(&id3, s3);
  CHECK(memcmp(s1, s3, 16) != 0, "TUTTI_JOB_SECRET changes the secret");
  /* Rank 0 starts the root: it comes last, the others retry meanwhile. */
  setup(a, 4, &id1, 4, 10, 100);
  a[0].delay = 0.5;
  run(a, 4);
  for (int i = 0; i < 4; i++) {
    CHECK(a[i].res == ncclSuccess && a[i].data_ok, "NCCL_COMM_ID rank %d: %s", i, a[i].err);
  }
  /* new_root ignores NCCL_COMM_ID: it is for communicators made inside the library. */
  ncclUniqueId own;
  CHECK(tutti_bootstrap_new_root(&own) == ncclSuccess && memcmp(&own, &id1, sizeof own) != 0,
        "new_root under NCCL_COMM_ID: %s", tutti_last_error());
  setup(a, 2, &own, 2, 5, 8);
  run(a, 2);
  CHECK(a[0].res == ncclSuccess && a[1].res == ncclSuccess, "job on new_root's id: %s", a[0].err);
  /* A rank with another secret is turned away, and says why it might be. */
  setenv("TUTTI_JOB_SECRET", "another-job", 1);
  id2 = new_id();
  unsetenv("TUTTI_JOB_SECRET");
  setup(a, 2, &id1, 2, 1.5, 8);
  a[1].id = id2;
  run(a, 2);
  CHECK(a[0].res == ncclRemoteError && strstr(a[0].err, "rank 1 of 2 did not join"),
        "rank 0 waits for rank 1 in vain: %s", a[0].err);
  CHECK(a[1].res == ncclRemoteError && strstr(a[1].err, "TUTTI_JOB_SECRET"),
        "the stranger rank hears about secrets: %s", a[1].err);
  /* Out-of-range arguments are refused before anything is contacted. */
  struct tutti_bootstrap* b = NULL;
  CHECK(tutti_bootstrap_init(&id1, 2, 2, 1, NULL, &b) == ncclInvalidArgument && b == NULL,
        "rank 2 of 2 refused");
  CHECK(tutti_bootstrap_init(&id1, 0, 0, 1, NULL, &b) == ncclInvalidArgument, "nranks 0 refused");
  CHECK(tutti_bootstrap_init(&id1, -1, 4, 1, NULL, &b) == ncclInvalidArgument, "rank -1 refused");
  /* IPv6 loopback. */
  snprintf(env, sizeof env, "[::1]:%d", free_port());
  setenv("NCCL_COMM_ID", env, 1);
  id1 = new_id();
  setup(a, 2, &id1, 2, 10, 100);
  run(a, 2);
  for (int i = 0; i < 2; i++) {
    CHECK(a[i].res == ncclSuccess && a[i].data_ok, "IPv6 NCCL_COMM_ID rank %d: %s", i, a[i].err);
  }
  /* Nobody runs the root: rank 1 gives up at its deadline, naming the address. */
  snprintf(env, sizeof env, "127.0.0.1:%d", free_port());
  setenv("NCCL_COMM_ID", env, 1);
  id1 = new_id();
  unsetenv("NCCL_COMM_ID");
  double t0 = tutti_socket_now();
  ncclResult_t r = tutti_bootstrap_init(&id1, 1, 2, 1.0, NULL, &b);
  double took = tutti_socket_now() - t0;
  CHECK(r == ncclSystemError && strstr(tutti_last_error(), "could not reach the bootstrap root") &&
            strstr(tutti_last_error(), env) && strstr(tutti_last_error(), "is rank 0 running"),
        "unreachable root: %d %s", (int)r, tutti_last_error());
  CHECK(took > 0.9 && took < 2.0, "gave up after %.2f s", took);
  volatile int flag = 1;
  t0 = tutti_socket_now();
  r = tutti_bootstrap_init(&id1, 1, 2, 30, &flag, &b);
  CHECK(r == ncclRemoteError && tutti_socket_now() - t0 < 0.5, "abort while connecting: %s",
        tutti_last_error());
}

static void test_bad_ids(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  CHECK(tutti_bootstrap_check_id(&id) == ncclInvalidArgument &&
            strstr(tutti_last_error(), "not a tutti/NCCL id from ncclGetUniqueId"),
        "zero id: %s", tutti_last_error());
  for (size_t i = 0; i < sizeof id; i++) {
    id.internal[i] = (char)rand();
  }
  CHECK(tutti_bootstrap_check_id(&id) == ncclInvalidArgument, "random id refused");
  struct tutti_bootstrap* b = NULL;
  CHECK(tutti_bootstrap_init(&id, 0, 1, 1, NULL, &b) == ncclInvalidArgument && b == NULL,
        "init refuses a random id");
  ncclUniqueId good = new_id();
  CHECK(tutti_bootstrap_check_id(&good) == ncclSuccess, "fresh id passes");
  id = good;
  id.internal[9] = 5; /* address family */
  CHECK(tutti_bootstrap_check_id(&id) == ncclInvalidArgument, "bad family refused");
  id = good;
  id.internal[5] = 9; /* version */
  CHECK(tutti_bootstrap_check_id(&id) == ncclInvalidArgument, "bad version refused");
  /* Use the good id for a one-rank job, so that its root does not linger. */
  static struct rank_arg a[1];
  setup(a, 1, &good, 1, 5, 8);
  run(a, 1);
  CHECK(a[0].res == ncclSuccess, "one rank: %s", a[0].err);
}

static void expect_all(struct rank_arg* a, int n, ncclResult_t want, const char* text,
                       const char* what) {
  for (int i = 0; i < n; i++) {
    CHECK(a[i].res == want && strstr(a[i].err, text) != NULL, "%s: rank %d got %d: %s", what,
          a[i].rank, (int)a[i].res, a[i].err);
  }
}

static void test_job_errors(void) {
  static struct rank_arg a[4];
  ncclUniqueId id = new_id();
  double t0 = tutti_socket_now();
  setup(a, 3, &id, 4, 2.0, 8); /* rank 3 never comes */
  run(a, 3);
  expect_all(a, 3, ncclRemoteError, "rank 3 of 4 did not join the job", "missing rank");
  CHECK(tutti_socket_now() - t0 < 3.5, "missing rank reported in %.2f s", tutti_socket_now() - t0);
  id = new_id();
  setup(a, 2, &id, 4, 1.0, 8);
  a[1].rank = 2;
  run(a, 2);
  expect_all(a, 2, ncclRemoteError, "ranks 1, 3 of 4 did not join", "two missing ranks");
  id = new_id();
  setup(a, 3, &id, 3, 3.0, 8);
  a[2].rank = 1;
  run(a, 3);
  expect_all(a, 3, ncclInvalidUsage, "as rank 1", "duplicate rank");
  id = new_id();
  setup(a, 2, &id, 2, 3.0, 8);
  a[1].nranks = 3;
  run(a, 2);
  expect_all(a, 2, ncclInvalidUsage, "nranks", "mismatched nranks");
}

/* A client that knows the secret but claims rank 7 of 2: the root tells everyone. */
static void test_bad_hello(void) {
  static struct rank_arg a[1];
  ncclUniqueId id = new_id();
  struct tutti_bs_id f;
  tutti_bootstrap_id_decode(&id, &f);
  unsigned char msg[TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER + TUTTI_BS_HELLO_LEN] = {0};
  unsigned char* p = msg + TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER;
  tutti_bootstrap_preamble(msg, f.secret);
  tutti_bs_put32(msg + TUTTI_BS_PREAMBLE, TUTTI_BS_HELLO);
  tutti_bs_put32(msg + TUTTI_BS_PREAMBLE + 4, TUTTI_BS_HELLO_LEN);
  tutti_bs_put32(p, 7);
  tutti_bs_put32(p + 4, 2);
  tutti_bs_put32(p + 12, 3000);
  tutti_socket_addr_pack(&f.root, p + 16);
  setup(a, 1, &id, 2, 3.0, 8);
  pthread_t t;
  pthread_create(&t, NULL, rank_main, &a[0]);
  sleep_s(0.2);
  struct tutti_socket_io io = {tutti_socket_now() + 3, NULL, "the root", "fake rank"};
  int fd = -1;
  unsigned char hdr[8] = {0};
  CHECK(tutti_socket_connect(&f.root, &io, NULL, &fd) == ncclSuccess &&
            tutti_socket_send_all(fd, msg, sizeof msg, &io) == ncclSuccess &&
            tutti_socket_recv_all(fd, hdr, 8, &io) == ncclSuccess &&
            tutti_bs_get32(hdr) == TUTTI_BS_ERROR,
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
  unsigned char m[64], bad[16];
  size_t len = 0;
  memcpy(bad, secret, 16);
  bad[5] ^= 1;
  if (kind == GARBAGE) {
    for (len = 0; len < sizeof m; len++) {
      m[len] = (unsigned char)rand();
    }
  } else if (kind != SILENT && kind != TRICKLE) {
    tutti_bootstrap_preamble(m, kind == WRONG_SECRET ? bad : secret);
    tutti_bs_put32(m + 24, kind == HUGE_RING ? TUTTI_BS_RING : TUTTI_BS_HELLO);
    tutti_bs_put32(m + 28, kind == WRONG_SECRET ? TUTTI_BS_HELLO_LEN : 0xffffffffu);
    len = kind == HALF_FRAME ? 28 : 32;
  }
  if (len > 0) {
    tutti_socket_send_all(fd, m, len, &io);
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
  tutti_bootstrap_preamble(tr.pre, secret);
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

struct op_arg {
  struct tutti_bootstrap* b;
  ncclResult_t res;
  double done_at;
  char err[1024];
};

static void* gather_main(void* p) {
  struct op_arg* o = p;
  unsigned char buf[64] = {0};
  o->res = tutti_bootstrap_allgather(o->b, buf, 8);
  snprintf(o->err, sizeof o->err, "%s", tutti_last_error());
  o->done_at = tutti_socket_now();
  return NULL;
}

static void test_abort_and_death(void) {
  static struct rank_arg a[3];
  static volatile int flag;
  /* Init waits for a rank that never comes; another thread aborts it. */
  ncclUniqueId id = new_id();
  setup(a, 1, &id, 2, 5.0, 0);
  a[0].abort_flag = &flag;
  pthread_t t[3];
  pthread_create(&t[0], NULL, rank_main, &a[0]);
  sleep_s(0.3);
  double t_set = tutti_socket_now();
  __atomic_store_n(&flag, 1, __ATOMIC_RELAXED);
  pthread_join(t[0], NULL);
  CHECK(a[0].res == ncclRemoteError && a[0].done_at - t_set < 1.0, "abort in init: %.2f s, %s",
        a[0].done_at - t_set, a[0].err);
  /* An all-gather that rank 1 never joins; aborting rank 0 also fails rank 1's later call. */
  __atomic_store_n(&flag, 0, __ATOMIC_RELAXED);
  id = new_id();
  setup(a, 2, &id, 2, 10, 0);
  a[0].abort_flag = &flag;
  a[0].keep = a[1].keep = 1;
  run(a, 2);
  struct op_arg o[3] = {{a[0].b}, {a[1].b}, {NULL}};
  pthread_create(&t[0], NULL, gather_main, &o[0]);
  sleep_s(0.3);
  t_set = tutti_socket_now();
  __atomic_store_n(&flag, 1, __ATOMIC_RELAXED);
  pthread_join(t[0], NULL);
  CHECK(o[0].res == ncclRemoteError && o[0].done_at - t_set < 1.0, "abort in all-gather: %s",
        o[0].err);
  gather_main(&o[1]);
  CHECK(o[1].res == ncclRemoteError && o[1].done_at - t_set < 1.5 && strstr(o[1].err, "rank 0"),
        "the aborted rank's peer fails at once: %s", o[1].err);
  tutti_bootstrap_close(a[0].b);
  tutti_bootstrap_close(a[1].b);
  /* Rank 1 goes away; ranks 0 and 2 hear about it at once, not at the timeout. */
  id = new_id();
  setup(a, 3, &id, 3, 10, 0);
  a[0].keep = a[2].keep = 1;
  run(a, 3);
  o[0] = (struct op_arg){a[0].b};
  o[2] = (struct op_arg){a[2].b};
  t_set = tutti_socket_now();
  pthread_create(&t[0], NULL, gather_main, &o[0]);
  pthread_create(&t[2], NULL, gather_main, &o[2]);
  pthread_join(t[0], NULL);
  pthread_join(t[2], NULL);
  CHECK(o[2].res == ncclRemoteError && strstr(o[2].err, "rank 1 at") && o[2].done_at - t_set < 2.0,
        "peer death seen by rank 2: %s", o[2].err);
  CHECK(o[0].res == ncclRemoteError && o[0].done_at - t_set < 2.0, "peer death seen by rank 0: %s",
        o[0].err);
  tutti_bootstrap_close(a[0].b);
  tutti_bootstrap_close(a[2].b);
}

int main(void) {
  setenv("TUTTI_TIMEOUT", "20", 0); /* bounds the life of roots nobody uses */
  unsetenv("NCCL_COMM_ID");
  srand(1);
  test_fd_leaks();
  test_bad_ids();
  test_jobs();
  test_comm_id();
  test_job_errors();
  test_bad_hello();
  test_strangers();
  test_abort_and_death();
  return test_summary("bootstrap");
}
