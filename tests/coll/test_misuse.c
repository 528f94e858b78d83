/* Mismatched calls, as a new user makes them: every rank must fail the
 * call within the bound, with ncclInvalidUsage and a text naming both
 * calls, and every later call must fail with the same cause. Ranks as
 * processes and as threads, host buffers, at a size the board carries and
 * at sizes the queues (ring, direct, single copy) carry.
 * Usage: test_misuse [procs|threads|hosts]  (procs and threads by default;
 * hosts: processes, each rank its own host by NCCL_HOSTID, so that they
 * meet over TCP and learn each other's calls through the proxies) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"
#include "procs.h"
#include "ranks.h"

static long passed, failed;

#define FAILF(...)                \
  do {                            \
    failed_here++;                \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
  } while (0)

enum kind { OPS, TYPES, ROOTS, COLLS, ORDER, NKINDS };
static const char* const kind_name[NKINDS] = {"sum vs max", "float vs int32", "broadcast roots",
                                              "allreduce vs broadcast", "AR,AG vs AG,AR"};

struct misuse {
  enum kind kind;
  size_t count;
  int nranks;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The mismatched call of `rank`; ORDER makes two calls in different orders. */
static ncclResult_t misuse_call(const struct misuse* m, int rank, int step, float* a, float* b,
                                ncclComm_t comm) {
  const size_t n = m->count;
  switch (m->kind) {
    case OPS: /* rank 0 sums, the others take the max */
      return ncclAllReduce(a, b, n, ncclFloat, rank == 0 ? ncclSum : ncclMax, comm, NULL);
    case TYPES: /* one size, two types */
      return ncclAllReduce(a, b, n, rank == 0 ? ncclFloat : ncclInt32, ncclSum, comm, NULL);
    case ROOTS: /* every rank names itself the root */
      return ncclBroadcast(a, b, n, ncclFloat, rank, comm, NULL);
    case COLLS:
      return rank == 0 ? ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, NULL)
                       : ncclBroadcast(a, b, n, ncclFloat, 0, comm, NULL);
    case ORDER:
      return (rank == 0) == (step == 0) ? ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, NULL)
                                        : ncclAllGather(a, b, n, ncclFloat, comm, NULL);
    default:
      return ncclInvalidArgument;
  }
}

/* The words the error must hold: both sides of the disagreement. */
static int names_both(const struct misuse* m, const char* why) {
  if (strstr(why, "mismatched collective calls") == NULL) {
    return 0;
  }
  switch (m->kind) {
    case OPS:
      return strstr(why, "sum") && strstr(why, "max");
    case TYPES:
      return strstr(why, "float") && strstr(why, "int32");
    case ROOTS: { /* two different roots named, whichever pair found it */
      const char* r1 = strstr(why, "root ");
      const char* r2 = r1 != NULL ? strstr(r1 + 5, "root ") : NULL;
      return r2 != NULL && atoi(r1 + 5) != atoi(r2 + 5);
    }
    case COLLS:
    case ORDER:
      return strstr(why, "AllReduce") && (strstr(why, "Broadcast") || strstr(why, "AllGather"));
    default:
      return 0;
  }
}

/* One rank's side: a good call, the mismatch, then a later call. */
static long run_rank(const struct misuse* m, int rank, const ncclUniqueId* id) {
  long failed_here = 0;
  const size_t n = m->count;
  float* a = calloc(n * (size_t)m->nranks, sizeof *a);
  float* b = calloc(n * (size_t)m->nranks, sizeof *b);
  ncclComm_t comm;
  ncclUniqueId own; /* processes: every rank's is the same (NCCL_COMM_ID) */
  if (id == NULL && ncclGetUniqueId(&own) == ncclSuccess) {
    id = &own;
  }
  if (a == NULL || b == NULL || id == NULL ||
      ncclCommInitRank(&comm, m->nranks, *id, rank) != ncclSuccess) {
    FAILF("rank %d: init failed: %s", rank, ncclGetLastError(NULL));
    free(a);
    free(b);
    return failed_here + 1;
  }
  if (ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
    FAILF("rank %d: the matching call before the mismatch failed: %s", rank,
          ncclGetLastError(comm));
  }
  const double t0 = now();
  ncclResult_t r = misuse_call(m, rank, 0, a, b, comm);
  const double dt = now() - t0;
  char why[1024];
  snprintf(why, sizeof why, "%s", ncclGetLastError(comm));
  if (r != ncclInvalidUsage || !names_both(m, why) || dt > 2.5) {
    FAILF("%s, %d ranks, count %zu: rank %d returned %d after %.2f s: %s", kind_name[m->kind],
          m->nranks, n, rank, (int)r, dt, why);
  }
  /* Every later call fails at once, with the same cause. */
  const double t1 = now();
  ncclResult_t r2 = m->kind == ORDER ? misuse_call(m, rank, 1, a, b, comm)
                                     : ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, NULL);
  const double dt2 = now() - t1;
  if (r2 != r || strcmp(ncclGetLastError(comm), why) != 0 || dt2 > 0.5) {
    FAILF("%s: rank %d's next call returned %d after %.2f s with \"%s\" (the failed one: %s)",
          kind_name[m->kind], rank, (int)r2, dt2, ncclGetLastError(comm), why);
  }
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if (async != r) {
    FAILF("%s: rank %d's ncclCommGetAsyncError says %d", kind_name[m->kind], rank, (int)async);
  }
  ncclCommDestroy(comm);
  free(a);
  free(b);
  return failed_here;
}

static void proc_body(int rank, void* arg, long* p, long* f) {
  long bad = run_rank(arg, rank, NULL);
  *p += bad == 0;
  *f += bad;
}

static void host_body(int rank, void* arg, long* p, long* f) {
  char id[32];
  snprintf(id, sizeof id, "misuse-host-%d", rank);
  setenv("NCCL_HOSTID", id, 1);
  long bad = run_rank(arg, rank, NULL);
  *p += bad == 0;
  *f += bad;
}

struct thread_job {
  const struct misuse* m;
  long bad;
  pthread_mutex_t lock;
};

static void thread_body(struct rank_ctx* c) {
  struct thread_job* j = c->user;
  long bad = run_rank(j->m, c->rank, &c->id);
  pthread_mutex_lock(&j->lock);
  j->bad += bad;
  pthread_mutex_unlock(&j->lock);
  c->result = bad == 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "both";
  const size_t counts[] = {16, 70001, 300007};
  for (int k = 0; k < NKINDS; k++) {
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      for (int nr = 2; nr <= 3; nr++) {
        struct misuse m = {(enum kind)k, counts[c], nr};
        if (strcmp(mode, "threads") != 0) {
          if (procs_comm_id() != 0) {
            fprintf(stderr, "no free port\n");
            return 1;
          }
          /* The children get the id through NCCL_COMM_ID (procs_comm_id). */
          procs_run(nr, strcmp(mode, "hosts") == 0 ? host_body : proc_body, &m, &passed, &failed);
        }
        if (strcmp(mode, "both") == 0 || strcmp(mode, "threads") == 0) {
          unsetenv("NCCL_COMM_ID");
          struct thread_job j = {&m, 0, PTHREAD_MUTEX_INITIALIZER};
          run_ranks(nr, thread_body, &j);
          passed += j.bad == 0;
          failed += j.bad;
        }
      }
    }
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
