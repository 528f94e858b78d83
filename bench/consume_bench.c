/* A collective followed by a reader of its output, as in training: two
 * processes (forked after ncclGetUniqueId) run an out-of-place float sum
 * allreduce of S MB, then each reads the whole output once. The buffers are
 * walked through 128 MB like tutti-perf's, so inputs come from memory; what
 * a policy of the library does to the caches (streaming stores, for one)
 * shows in the reader's time, which a benchmark of the collective alone does
 * not see. Prints rank 0's mean time of the call, of the read and of both.
 * Build: cc -O3 -march=native -Iinclude -o consume_bench bench/consume_bench.c
 *          -Lbuild -ltutti -Wl,-rpath,$PWD/build
 * Run:   ./consume_bench S_MB ITERS   (e.g. TUTTI_STREAM_MIN_BYTES=0 ./consume_bench 8 30) */
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
    fprintf(stderr, "usage: %s SIZE_MB ITERS\n", argv[0]);
    return 2;
  }
  const size_t bytes = (size_t)atol(argv[1]) << 20, walk = (size_t)128 << 20;
  const int iters = atoi(argv[2]), warm = 5;
  if (bytes == 0 || bytes > walk || iters <= 0) {
    fprintf(stderr, "consume_bench: SIZE_MB must be 1..128 and ITERS positive\n");
    return 2;
  }
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    return fail("ncclGetUniqueId", r);
  }
  const pid_t child = fork();
  const int rank = child == 0 ? 1 : 0;
  ncclComm_t comm;
  if ((r = ncclCommInitRank(&comm, 2, id, rank)) != ncclSuccess) {
    return fail("ncclCommInitRank", r);
  }
  char* send = malloc(walk);
  char* recv = malloc(walk);
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "consume_bench: out of memory\n");
    return 1;
  }
  memset(send, 1, walk);
  memset(recv, 0, walk);
  const size_t slots = walk / bytes;
  double t_call = 0, t_read = 0;
  volatile uint64_t sink = 0;
  for (int i = 0; i < warm + iters; i++) {
    const size_t off = (size_t)i % slots * bytes;
    const double t0 = now_s();
    r = ncclAllReduce(send + off, recv + off, bytes / sizeof(float), ncclFloat, ncclSum, comm,
                      NULL);
    if (r != ncclSuccess) {
      return fail("ncclAllReduce", r);
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
    printf("allreduce %zu MB: collective %.0f us, consumer %.0f us, total %.0f us\n", bytes >> 20,
           t_call / iters * 1e6, t_read / iters * 1e6, (t_call + t_read) / iters * 1e6);
  }
  ncclCommDestroy(comm);
  free(send);
  free(recv);
  if (child > 0) {
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return 0;
}
