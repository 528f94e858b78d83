/* A collective followed by a reader of its output, as in training: N
 * processes (forked after ncclGetUniqueId) run an out-of-place allreduce
 * (float sum), all-gather or broadcast with S MB of output, then each reads
 * the whole output once. The buffers are walked through 128 MB like
 * tutti-perf's, so inputs come from memory; what
 * a policy of the library does to the caches (streaming stores, for one)
 * shows in the reader's time, which a benchmark of the collective alone does
 * not see. Prints rank 0's mean time of the call, of the read and of both.
 * Build: cc -O3 -march=native -Iinclude -o consume_bench bench/consume_bench.c
 *          -Lbuild -ltutti -Wl,-rpath,$PWD/build
 * Run:   ./consume_bench S_MB ITERS [allreduce|allgather|broadcast [NRANKS]]
 *          (e.g. TUTTI_TUNE=stream=0 ./consume_bench 8 30) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char* what, ncclResult_t r) {
  fprintf(stderr, "consume_bench: %s: %s (%s)\n", what, ncclGetErrorString(r),
          ncclGetLastError(NULL));
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SIZE_MB ITERS [allreduce|allgather|broadcast [NRANKS]]\n", argv[0]);
    return 2;
  }
  const size_t bytes = (size_t)atol(argv[1]) << 20, walk = (size_t)128 << 20;
  const int iters = atoi(argv[2]), warm = 5;
  const char* coll = argc > 3 ? argv[3] : "allreduce";
  const int n = argc > 4 ? atoi(argv[4]) : 2;
  if (bytes == 0 || bytes > walk || iters <= 0 || n < 1 || n > 64 || bytes % ((size_t)n * 4) != 0 ||
      (strcmp(coll, "allreduce") != 0 && strcmp(coll, "allgather") != 0 &&
       strcmp(coll, "broadcast") != 0)) {
    fprintf(stderr,
            "consume_bench: SIZE_MB 1..128, ITERS > 0, allreduce, allgather or broadcast, "
            "NRANKS 1..64\n");
    return 2;
  }
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    return fail("ncclGetUniqueId", r);
  }
  int rank = 0;
  for (int k = 1; k < n && rank == 0; k++) {
    const pid_t pid = fork();
    if (pid < 0) {
      perror("consume_bench: fork");
      return 1;
    }
    rank = pid == 0 ? k : 0;
  }
  ncclComm_t comm;
  if ((r = ncclCommInitRank(&comm, n, id, rank)) != ncclSuccess) {
    return fail("ncclCommInitRank", r);
  }
  /* Page-aligned as tutti-perf's, and every page written before the first
   * call: a malloc followed by a zero fill may become a calloc, whose pages
   * the first calls would fault in. */
  char* send = aligned_alloc(4096, walk);
  char* recv = aligned_alloc(4096, walk);
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "consume_bench: out of memory\n");
    return 1;
  }
  memset(send, 1, walk);
  memset(recv, 2, walk);
  const size_t slots = walk / bytes;
  double t_call = 0, t_read = 0;
  volatile uint64_t sink = 0;
  for (int i = 0; i < warm + iters; i++) {
    const size_t off = (size_t)i % slots * bytes;
    const double t0 = now_s();
    if (strcmp(coll, "allreduce") == 0) {
      r = ncclAllReduce(send + off, recv + off, bytes / 4, ncclFloat, ncclSum, comm, NULL);
    } else if (strcmp(coll, "allgather") == 0) {
      r = ncclAllGather(send + off, recv + off, bytes / 4 / (size_t)n, ncclFloat, comm, NULL);
    } else {
      r = ncclBroadcast(send + off, recv + off, bytes / 4, ncclFloat, 0, comm, NULL);
    }
    if (r != ncclSuccess) {
      return fail(coll, r);
    }
    const double t1 = now_s();
    const uint64_t* w = (const uint64_t*)(recv + off);
    uint64_t acc = 0;
    for (size_t k = 0; k < bytes / sizeof *w; k++) {
      acc ^= w[k];
    }
    sink ^= acc;
    const double t2 = now_s();
    if (i >= warm) {
      t_call += t1 - t0;
      t_read += t2 - t1;
    }
  }
  if (rank == 0) {
    printf("%s %d ranks %zu MB: collective %.0f us, consumer %.0f us, total %.0f us\n", coll, n,
           bytes >> 20, t_call / iters * 1e6, t_read / iters * 1e6,
           (t_call + t_read) / iters * 1e6);
  }
  ncclCommDestroy(comm);
  free(send);
  free(recv);
  int rc = 0;
  if (rank == 0) {
    for (int k = 1; k < n; k++) {
      int status = 0;
      if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        rc = 1;
      }
    }
  }
  return rc;
}
