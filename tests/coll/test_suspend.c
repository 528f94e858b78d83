/* ncclCommSuspend, ncclCommResume and ncclCommMemStats on host
 * communicators, ranks as threads or as processes: suspend / resume cycles
 * with allreduces exact before, between and after; every error (double
 * suspend, resume without suspend, calls on a suspended communicator, bad
 * arguments, a suspend queued twice or beside operations in one group);
 * flags without NCCL_SUSPEND_MEM doing nothing; MemStats' values; groups;
 * non-blocking communicators (ncclInProgress, then ncclSuccess); destroy
 * and abort while suspended.
 *   test_suspend threads|procs   all of the above on 3 ranks
 *   test_suspend missing         rank 1 never suspends: rank 0's suspend
 *                                fails within TUTTI_TIMEOUT, naming why
 *   test_suspend abort           the same, ended at once by ncclCommAbort from
 *                                another thread
 *   test_suspend disabled        NCCL_DISABLE_MEM_MANAGER=1: all three refuse
 * Prints "N passed, N failed". */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "procs.h"
#include "ranks.h"

#define NRANKS 3
#define COUNT 10007

struct tally {
  long passed, failed;
  int rank;
};

#define EXPECT(t, cond, ...)                                                              \
  do {                                                                                    \
    if (cond) {                                                                           \
      (t)->passed++;                                                                      \
    } else {                                                                              \
      (t)->failed++;                                                                      \
      fprintf(stderr, "FAIL rank %d, %s:%d: %s: ", (t)->rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                       \
      fprintf(stderr, "\n");                                                              \
    }                                                                                     \
  } while (0)

#define EXPECT_RES(t, call, want)                                                           \
  do {                                                                                      \
    ncclResult_t r_ = (call);                                                               \
    EXPECT(t, r_ == (want), "%s returned %d, expected %d: %s", #call, (int)r_, (int)(want), \
           ncclGetLastError(NULL));                                                         \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An allreduce of int32 sums, compared bit for bit; `salt` varies the inputs. */
static void allreduce_exact(struct tally* t, ncclComm_t comm, int n, int salt, const char* when) {
  int32_t* buf = malloc(COUNT * sizeof *buf);
  for (int i = 0; i < COUNT; i++) {
    buf[i] = t->rank * 1000 + (i + salt) % 997;
  }
  ncclResult_t res = ncclAllReduce(buf, buf, COUNT, ncclInt32, ncclSum, comm, NULL);
  int ok = res == ncclSuccess;
  for (int i = 0; ok && i < COUNT; i++) {
    ok = buf[i] == n * (n - 1) / 2 * 1000 + n * ((i + salt) % 997);
  }
  EXPECT(t, ok, "allreduce %s: %s", when,
         res != ncclSuccess ? ncclGetLastError(comm) : "wrong sum");
  free(buf);
}

static void expect_stats(struct tally* t, ncclComm_t comm, uint64_t suspended) {
  static const ncclCommMemStat_t bytes[] = {ncclStatGpuMemSuspend, ncclStatGpuMemPersist,
                                            ncclStatGpuMemTotal};
  uint64_t v = 99;
  for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
    v = 99;
    EXPECT_RES(t, ncclCommMemStats(comm, bytes[i], &v), ncclSuccess);
    EXPECT(t, v == 0, "stat %d of a host communicator is %llu", (int)bytes[i],
           (unsigned long long)v);
  }
  v = 99;
  EXPECT_RES(t, ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v), ncclSuccess);
  EXPECT(t, v == suspended, "Suspended is %llu, expected %llu", (unsigned long long)v,
         (unsigned long long)suspended);
}

static int last_error_has(ncclComm_t comm, const char* words) {
  return strstr(ncclGetLastError(comm), words) != NULL;
}

/* Waits (bounded) until a non-blocking communicator's call finished. */
static ncclResult_t settle(ncclComm_t comm) {
  ncclResult_t st = ncclInProgress;
  const double t0 = now_s();
  while (st == ncclInProgress && now_s() - t0 < 30) {
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) {
      return ncclInternalError;
    }
    if (st == ncclInProgress) {
      usleep(1000);
    }
  }
  return st;
}

/* Arguments and state, nothing collective (every rank makes the same calls). */
static void errors(struct tally* t, ncclComm_t comm) {
  uint64_t v = 0;
  EXPECT_RES(t, ncclCommMemStats(NULL, ncclStatGpuMemTotal, &v), ncclInvalidArgument);
  EXPECT_RES(t, ncclCommMemStats(comm, ncclStatGpuMemTotal, NULL), ncclInvalidArgument);
  EXPECT_RES(t, ncclCommMemStats(comm, (ncclCommMemStat_t)4, &v), ncclInvalidArgument);
  EXPECT_RES(t, ncclCommMemStats(comm, (ncclCommMemStat_t)-1, &v), ncclInvalidArgument);
  EXPECT_RES(t, ncclCommSuspend(NULL, NCCL_SUSPEND_MEM), ncclInvalidArgument);
  EXPECT_RES(t, ncclCommResume(NULL), ncclInvalidArgument);
  EXPECT_RES(t, ncclCommResume(comm), ncclInvalidUsage);
  EXPECT(t, last_error_has(comm, "not suspended"), "resume: %s", ncclGetLastError(comm));
  /* Only NCCL_SUSPEND_MEM acts: no bit of it, nothing happens (no barrier either). */
  EXPECT_RES(t, ncclCommSuspend(comm, 0), ncclSuccess);
  EXPECT_RES(t, ncclCommSuspend(comm, 0x6), ncclSuccess);
  expect_stats(t, comm, 0);
}

/* Calls on a suspended communicator: refused with a sentence, the
 * communicator unharmed. */
static void while_suspended(struct tally* t, ncclComm_t comm) {
  int32_t x = 1;
  EXPECT_RES(t, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage);
  EXPECT(t, last_error_has(comm, "is suspended: call ncclCommResume"), "allreduce: %s",
         ncclGetLastError(comm));
  EXPECT_RES(t, ncclSend(&x, 1, ncclInt32, (t->rank + 1) % NRANKS, comm, NULL), ncclInvalidUsage);
  EXPECT_RES(t, ncclBroadcast(&x, &x, 1, ncclInt32, 0, comm, NULL), ncclInvalidUsage);
  void* handle = NULL;
  EXPECT_RES(t, ncclCommRegister(comm, &x, sizeof x, &handle), ncclInvalidUsage);
  EXPECT_RES(t, ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
  EXPECT(t, last_error_has(comm, "already suspended"), "suspend: %s", ncclGetLastError(comm));
  /* A suspend and a resume queued in one group: the second is refused. */
  EXPECT_RES(t, ncclGroupStart(), ncclSuccess);
  EXPECT_RES(t, ncclCommResume(comm), ncclSuccess);
  EXPECT_RES(t, ncclCommResume(comm), ncclInvalidUsage);
  EXPECT_RES(t, ncclGroupEnd(), ncclInvalidUsage);
  ncclResult_t st = ncclInternalError;
  EXPECT_RES(t, ncclCommGetAsyncError(comm, &st), ncclSuccess);
  EXPECT(t, st == ncclSuccess, "async error %d after refused calls", (int)st);
  expect_stats(t, comm, 1);
}

/* Groups: a suspend and operations of the same communicator do not mix.
 * (The refused groups hold a send and a receive: a dropped collective
 * would still count in the board's generations.) */
static void groups(struct tally* t, ncclComm_t comm, int n) {
  int32_t x = 1, y = 0;
  const int next = (t->rank + 1) % n, prev = (t->rank + n - 1) % n;
  EXPECT_RES(t, ncclGroupStart(), ncclSuccess);
  EXPECT_RES(t, ncclSend(&x, 1, ncclInt32, next, comm, NULL), ncclSuccess);
  EXPECT_RES(t, ncclRecv(&y, 1, ncclInt32, prev, comm, NULL), ncclSuccess);
  EXPECT_RES(t, ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
  EXPECT(t, last_error_has(comm, "group of its own"), "%s", ncclGetLastError(comm));
  EXPECT_RES(t, ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_RES(t, ncclGroupStart(), ncclSuccess);
  EXPECT_RES(t, ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
  EXPECT_RES(t, ncclSend(&x, 1, ncclInt32, next, comm, NULL), ncclInvalidUsage);
  EXPECT(t, last_error_has(comm, "queued in this group"), "%s", ncclGetLastError(comm));
  EXPECT_RES(t, ncclGroupEnd(), ncclInvalidUsage);
  expect_stats(t, comm, 0); /* the failed group ran nothing */
  allreduce_exact(t, comm, n, 5, "after failed groups");
  /* Suspend and resume inside groups (nested too): they run at the end. */
  EXPECT_RES(t, ncclGroupStart(), ncclSuccess);
  EXPECT_RES(t, ncclGroupStart(), ncclSuccess);
  EXPECT_RES(t, ncclCommSuspend(comm, NCCL_SUSPEND_MEM | 0x10), ncclSuccess);
  EXPECT_RES(t, ncclGroupEnd(), ncclSuccess);
  expect_stats(t, comm, 0);
  EXPECT_RES(t, ncclGroupEnd(), ncclSuccess);
  expect_stats(t, comm, 1);
  EXPECT_RES(t, ncclGroupStart(), ncclSuccess);
  EXPECT_RES(t, ncclCommResume(comm), ncclSuccess);
  EXPECT_RES(t, ncclGroupEnd(), ncclSuccess);
  expect_stats(t, comm, 0);
  allreduce_exact(t, comm, n, 6, "after a grouped suspend and resume");
}

/* A non-blocking communicator: both calls return ncclInProgress, the
 * communicator is not ready until they finish, then ncclSuccess. */
static void nonblocking(struct tally* t, ncclComm_t parent, int n) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t nb = NULL;
  ncclResult_t res = ncclCommSplit(parent, 0, t->rank, &nb, &cfg);
  EXPECT(t, (res == ncclSuccess || res == ncclInProgress) && nb != NULL, "split: %d %s", (int)res,
         ncclGetLastError(parent));
  if (nb == NULL) {
    return;
  }
  EXPECT_RES(t, settle(nb), ncclSuccess);
  allreduce_exact(t, nb, n, 7, "on the non-blocking communicator");
  for (int cycle = 0; cycle < 2; cycle++) {
    EXPECT_RES(t, ncclCommSuspend(nb, NCCL_SUSPEND_MEM), ncclInProgress);
    EXPECT_RES(t, settle(nb), ncclSuccess);
    expect_stats(t, nb, 1);
    int32_t x = 1;
    EXPECT_RES(t, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, nb, NULL), ncclInvalidUsage);
    EXPECT_RES(t, ncclGroupStart(), ncclSuccess);
    EXPECT_RES(t, ncclCommResume(nb), ncclSuccess);
    EXPECT_RES(t, ncclGroupEnd(), ncclInProgress);
    EXPECT_RES(t, settle(nb), ncclSuccess);
    expect_stats(t, nb, 0);
    allreduce_exact(t, nb, n, 8 + cycle, "after a non-blocking resume");
  }
  /* Abort while suspended. */
  EXPECT_RES(t, ncclCommSuspend(nb, NCCL_SUSPEND_MEM), ncclInProgress);
  EXPECT_RES(t, settle(nb), ncclSuccess);
  EXPECT_RES(t, ncclCommAbort(nb), ncclSuccess);
}

static void body(struct tally* t, ncclUniqueId id, int n) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, t->rank) != ncclSuccess) {
    EXPECT(t, 0, "init: %s", ncclGetLastError(NULL));
    return;
  }
  allreduce_exact(t, comm, n, 0, "before any suspend");
  errors(t, comm);
  for (int cycle = 0; cycle < 3; cycle++) {
    EXPECT_RES(t, ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
    expect_stats(t, comm, 1);
    if (cycle == 0) {
      while_suspended(t, comm);
    }
    EXPECT_RES(t, ncclCommResume(comm), ncclSuccess);
    expect_stats(t, comm, 0);
    allreduce_exact(t, comm, n, 1 + cycle, "after a resume");
  }
  groups(t, comm, n);
  nonblocking(t, comm, n);
  /* Destroy while suspended. */
  EXPECT_RES(t, ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
  EXPECT_RES(t, ncclCommDestroy(comm), ncclSuccess);
}

/* Rank 1 never suspends: rank 0 must fail within TUTTI_TIMEOUT (2 s in
 * ctest), not hang, and its communicator stays failed. */
static void missing(struct tally* t, ncclUniqueId id, int n) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, t->rank) != ncclSuccess) {
    EXPECT(t, 0, "init: %s", ncclGetLastError(NULL));
    return;
  }
  allreduce_exact(t, comm, n, 0, "before the suspend");
  if (t->rank == 1) {
    sleep(4);
    EXPECT_RES(t, ncclCommDestroy(comm), ncclSuccess);
    return;
  }
  const double t0 = now_s();
  ncclResult_t res = ncclCommSuspend(comm, NCCL_SUSPEND_MEM);
  const double took = now_s() - t0;
  EXPECT(t, res != ncclSuccess && took < 10, "suspend without rank 1: %d after %.1f s", (int)res,
         took);
  printf("rank %d: suspend without rank 1 failed after %.1f s: %s\n", t->rank, took,
         ncclGetLastError(comm));
  fflush(stdout);
  int32_t x = 1;
  EXPECT(t, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL) != ncclSuccess,
         "an allreduce after a failed suspend succeeded");
  EXPECT_RES(t, ncclCommDestroy(comm), ncclSuccess);
}

struct suspender {
  ncclComm_t comm;
  ncclResult_t res;
  double took;
};

static void* suspend_thread(void* arg) {
  struct suspender* s = arg;
  const double t0 = now_s();
  s->res = ncclCommSuspend(s->comm, NCCL_SUSPEND_MEM);
  s->took = now_s() - t0;
  return NULL;
}

/* Rank 1 never suspends; rank 0's suspend, waiting for it on a thread, is
 * ended by ncclCommAbort from another thread long before TUTTI_TIMEOUT
 * (20 s in ctest). */
static void aborted(struct tally* t, ncclUniqueId id, int n) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, t->rank) != ncclSuccess) {
    EXPECT(t, 0, "init: %s", ncclGetLastError(NULL));
    return;
  }
  allreduce_exact(t, comm, n, 0, "before the suspend");
  if (t->rank == 1) {
    sleep(5);
    EXPECT_RES(t, ncclCommDestroy(comm), ncclSuccess);
    return;
  }
  struct suspender s = {comm, ncclSuccess, 0};
  pthread_t th;
  if (pthread_create(&th, NULL, suspend_thread, &s) != 0) {
    EXPECT(t, 0, "pthread_create failed");
    return;
  }
  sleep(1);
  EXPECT_RES(t, ncclCommAbort(comm), ncclSuccess);
  pthread_join(th, NULL);
  EXPECT(t, s.res != ncclSuccess && s.took < 3, "suspend ended by an abort: %d after %.1f s",
         (int)s.res, s.took);
}

/* NCCL_DISABLE_MEM_MANAGER=1 (set by ctest): every call refuses. */
static void disabled(struct tally* t, ncclUniqueId id, int n) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, t->rank) != ncclSuccess) {
    EXPECT(t, 0, "init: %s", ncclGetLastError(NULL));
    return;
  }
  uint64_t v = 0;
  EXPECT_RES(t, ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
  EXPECT(t, last_error_has(comm, "NCCL_DISABLE_MEM_MANAGER"), "%s", ncclGetLastError(comm));
  EXPECT_RES(t, ncclCommResume(comm), ncclInvalidUsage);
  EXPECT_RES(t, ncclCommMemStats(comm, ncclStatGpuMemTotal, &v), ncclInvalidUsage);
  allreduce_exact(t, comm, n, 0, "with the memory manager off");
  EXPECT_RES(t, ncclCommDestroy(comm), ncclSuccess);
}

typedef void (*body_fn)(struct tally* t, ncclUniqueId id, int n);

static body_fn pick(const char* mode) {
  return strcmp(mode, "missing") == 0    ? missing
         : strcmp(mode, "abort") == 0    ? aborted
         : strcmp(mode, "disabled") == 0 ? disabled
                                         : body;
}

struct run {
  body_fn fn;
  int n;
  long passed, failed;
  pthread_mutex_t lock;
};

static void thread_rank(struct rank_ctx* ctx) {
  struct run* r = ctx->user;
  struct tally t = {0, 0, ctx->rank};
  r->fn(&t, ctx->id, ctx->nranks);
  pthread_mutex_lock(&r->lock);
  r->passed += t.passed;
  r->failed += t.failed;
  pthread_mutex_unlock(&r->lock);
  ctx->result = t.failed == 0;
}

static void proc_rank(int rank, void* arg, long* passed, long* failed) {
  struct run* r = arg;
  struct tally t = {0, 0, rank};
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    EXPECT(&t, 0, "ncclGetUniqueId: %s", ncclGetLastError(NULL));
  } else {
    r->fn(&t, id, r->n);
  }
  *passed = t.passed;
  *failed = t.failed;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  const int pair = strcmp(mode, "missing") == 0 || strcmp(mode, "abort") == 0;
  struct run r = {pick(mode), pair ? 2 : NRANKS, 0, 0, PTHREAD_MUTEX_INITIALIZER};
  if (strcmp(mode, "threads") == 0 || strcmp(mode, "disabled") == 0) {
    run_ranks(r.n, thread_rank, &r);
  } else {
    /* Processes: every rank gets the id from NCCL_COMM_ID; rank 0 runs the root. */
    if (procs_comm_id() != 0) {
      fprintf(stderr, "no free loopback port for NCCL_COMM_ID\n");
      return 1;
    }
    procs_run(r.n, proc_rank, &r, &r.passed, &r.failed);
  }
  printf("%s: %ld passed, %ld failed\n", mode, r.passed, r.failed);
  return r.failed == 0 && r.passed > 0 ? 0 : 1;
}
