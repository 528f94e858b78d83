/* Every collective through the real API with ranks as threads of one
 * process (shared memory, bootstrap over sockets), at every rank count from
 * 1 to 16 and at 24, 32 and 64: more ranks than cores, so waiting must block. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nccl.h"
#include "ranks.h"

static int32_t in(int r, size_t i) {
  return (int32_t)((r + 1) * 3 + (int)(i % 17));
}

static int run_all(ncclComm_t comm, int n, int r, size_t count) {
  size_t big = count * (size_t)n;
  int32_t* s = malloc((big + 1) * sizeof *s);
  int32_t* d = malloc((big + 1) * sizeof *d);
  int ok = 1;
  int root = n - 1;
  for (size_t i = 0; i < big; i++)
    s[i] = in(r, i);
#define SUM(i)                  \
  ({                            \
    int32_t t_ = 0;             \
    for (int q = 0; q < n; q++) \
      t_ += in(q, (i));         \
    t_;                         \
  })
  ok &= ncclAllReduce(s, d, count, ncclInt32, ncclSum, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < count && ok; i++)
    ok &= d[i] == SUM(i);
  ok &= ncclReduceScatter(s, d, count, ncclInt32, ncclSum, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < count && ok; i++)
    ok &= d[i] == SUM((size_t)r * count + i);
  ok &= ncclAllGather(s, d, count, ncclInt32, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < big && ok; i++)
    ok &= d[i] == in((int)(i / count), i % count);
  ok &= ncclAlltoAll(s, d, count, ncclInt32, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < big && ok; i++)
    ok &= d[i] == in((int)(i / count), (size_t)r * count + i % count);
  ok &= ncclBroadcast(s, d, count, ncclInt32, root, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < count && ok; i++)
    ok &= d[i] == in(root, i);
  ok &= ncclReduce(s, d, count, ncclInt32, ncclSum, root, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < count && ok && r == root; i++)
    ok &= d[i] == SUM(i);
  ok &= ncclGather(s, d, count, ncclInt32, root, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < big && ok && r == root; i++)
    ok &= d[i] == in((int)(i / count), i % count);
  ok &= ncclScatter(s, d, count, ncclInt32, root, comm, NULL) == ncclSuccess;
  for (size_t i = 0; i < count && ok; i++)
    ok &= d[i] == in(root, (size_t)r * count + i);
#undef SUM
  free(s);
  free(d);
  return ok;
}

static void body(struct rank_ctx* c) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, c->nranks, c->id, c->rank) != ncclSuccess) {
    fprintf(stderr, "rank %d/%d init: %s\n", c->rank, c->nranks, ncclGetLastError(NULL));
    return;
  }
  size_t counts[] = {1, 1000, 70001};
  int ok = 1;
  for (int k = 0; k < 3 && ok; k++) {
    if (c->nranks > 16 && counts[k] > 1000)
      break;
    ok = run_all(comm, c->nranks, c->rank, counts[k]);
    if (!ok)
      fprintf(stderr, "rank %d/%d count %zu: %s\n", c->rank, c->nranks, counts[k],
              ncclGetLastError(comm));
  }
  ncclCommDestroy(comm);
  c->result = ok;
}

/* A group whose end fails (an invalid call in it) runs none of its
 * operations, and leaves nothing behind them: the collectives after it run
 * (a small allreduce queued in it once kept a board generation nobody
 * posted, and the next one waited for it). */
static void dropped_group(struct rank_ctx* c) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, c->nranks, c->id, c->rank) != ncclSuccess) {
    return;
  }
  int v[16], w[16];
  for (int i = 0; i < 16; i++) {
    v[i] = c->rank + i;
  }
  ncclGroupStart();
  ncclAllReduce(v, w, 16, ncclInt32, ncclSum, comm, NULL);
  ncclResult_t bad = ncclAllReduce(v, w, 16, (ncclDataType_t)99, ncclSum, comm, NULL);
  ncclResult_t end = ncclGroupEnd();
  int ok = bad == ncclInvalidArgument && end == ncclInvalidArgument;
  for (int round = 0; round < 3 && ok; round++) {
    ok = ncclAllReduce(v, w, 16, ncclInt32, ncclSum, comm, NULL) == ncclSuccess;
    for (int i = 0; i < 16 && ok; i++) {
      ok = w[i] == c->nranks * (c->nranks - 1) / 2 + c->nranks * i;
    }
  }
  if (!ok) {
    fprintf(stderr, "rank %d: after a dropped group: %s\n", c->rank, ncclGetLastError(comm));
  }
  ncclCommDestroy(comm);
  c->result = ok;
}

int main(void) {
  setenv("TUTTI_TIMEOUT", "20", 0);
  CHECK(run_ranks(3, dropped_group, NULL) == 3, "collectives after a group dropped at its end");
#if defined(__SANITIZE_THREAD__)
  /* Under ThreadSanitizer, which follows every thread's accesses: the races
   * between ranks show with a few; 24 to 64 threads took half its minute. */
  const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 16};
#else
  const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 64};
#endif
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int n = ns[i];
    CHECK(run_ranks(n, body, NULL) == n, "every collective with %d ranks as threads", n);
  }
  return test_summary("thread_ranks");
}
