/* Bootstrap with ranks as threads: jobs of 1 to 64 ranks, NCCL_COMM_ID mode,
 * bad ids, missing / duplicate / mismatched ranks, abort, peer death, and no
 * fd leaks (strangers: test_bootstrap_strangers.c). */
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
#include "boot_ranks.h"
#include "harness.h"
#include "port.h"
#include "util/check.h"

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

static void test_comm_id(void) {
  static struct rank_arg a[4];
  char env[64];
  snprintf(env, sizeof env, "127.0.0.1:%d", test_loopback_port());
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
  snprintf(env, sizeof env, "[::1]:%d", test_loopback_port());
  setenv("NCCL_COMM_ID", env, 1);
  id1 = new_id();
  setup(a, 2, &id1, 2, 10, 100);
  run(a, 2);
  for (int i = 0; i < 2; i++) {
    CHECK(a[i].res == ncclSuccess && a[i].data_ok, "IPv6 NCCL_COMM_ID rank %d: %s", i, a[i].err);
  }
  /* Nobody runs the root: rank 1 gives up at its deadline, naming the address. */
  snprintf(env, sizeof env, "127.0.0.1:%d", test_loopback_port());
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
  test_abort_and_death();
  return test_summary("bootstrap");
}
