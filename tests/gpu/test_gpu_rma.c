/* One-sided operations on device buffers: ranks as processes on the GPUs
 * (rank r on GPU r % #GPUs; several ranks share one GPU), windows in
 * cudaMalloc memory, ncclPutSignal / ncclSignal / ncclWaitSignal on a
 * stream of each rank, checked byte for byte: a ring of puts of every size
 * class (bytes, more than a staging piece), puts to itself, signals alone,
 * an all-to-all of puts in one group, and a ring of put + wait captured
 * into a CUDA graph and replayed. Modes: "hosts" gives every process its
 * own NCCL_HOSTID (peers across "hosts"). Without a CUDA device it prints
 * "SKIPPED: ..." and exits 77. Prints "N passed, N failed". */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "procs.h"

static int ngpu;
static int hosts;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (cond) {                                            \
      (*P)++;                                              \
    } else {                                               \
      (*F)++;                                              \
      fprintf(stderr, "rank %d: ", rank);                  \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, ": %s\n", ncclGetLastError(comm));   \
    }                                                      \
  } while (0)

/* The byte `origin` puts at `i` of its `round`'th put. */
static unsigned char pattern(int origin, size_t i, int round) {
  return (unsigned char)(origin * 37 + (int)(i % 251) + round * 11 + 1);
}

static int check_bytes(const unsigned char* d, size_t off, size_t n, int origin, int round) {
  unsigned char* h = malloc(n > 0 ? n : 1);
  int ok = h != NULL && cudaMemcpy(h, d + off, n, cudaMemcpyDeviceToHost) == cudaSuccess;
  for (size_t i = 0; ok && i < n; i++) {
    ok = h[i] == pattern(origin, i, round);
  }
  free(h);
  return ok;
}

static void fill(unsigned char* d, size_t n, int origin, int round) {
  unsigned char* h = malloc(n > 0 ? n : 1);
  for (size_t i = 0; i < n; i++) {
    h[i] = pattern(origin, i, round);
  }
  cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
  free(h);
}

static void body(int rank, void* arg, long* P, long* F) {
  const int n = *(int*)arg;
  ncclComm_t comm = NULL;
  char host[32];
  if (hosts) {
    snprintf(host, sizeof host, "rma-host-%d", rank);
    setenv("NCCL_HOSTID", host, 1);
  }
  cudaStream_t s;
  if (cudaSetDevice(rank % ngpu) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess) {
    CHECK(0, "no stream on GPU %d", rank % ngpu);
    return;
  }
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id");
  CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init");
  if (*F) {
    return;
  }
  const size_t win_bytes = 12u << 20; /* more than 2 staging pieces */
  unsigned char *win_buf = NULL, *src = NULL;
  cudaMalloc((void**)&win_buf, win_bytes);
  cudaMalloc((void**)&src, win_bytes);
  cudaMemset(win_buf, 0, win_bytes);
  ncclWindow_t win = NULL;
  CHECK(ncclCommWindowRegister(comm, win_buf, win_bytes, &win, NCCL_WIN_COLL_SYMMETRIC) ==
                ncclSuccess &&
            win != NULL,
        "window registration");
  if (*F) {
    return;
  }
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  /* A ring of puts of every size class. */
  const size_t sizes[] = {1, 8, 4093, 1u << 20, (9u << 20) + 13};
  for (int k = 0; k < (int)(sizeof sizes / sizeof sizes[0]); k++) {
    const size_t b = sizes[k], off = (size_t)k * 3;
    fill(src, b, rank, k);
    ncclResult_t r = ncclPutSignal(src, b, ncclUint8, next, win, off, 0, 0, 0, comm, s);
    ncclWaitSignalDesc_t d = {1, prev, 0, 0};
    r = r == ncclSuccess ? ncclWaitSignal(1, &d, comm, s) : r;
    CHECK(r == ncclSuccess && cudaStreamSynchronize(s) == cudaSuccess, "put + wait of %zu bytes",
          b);
    CHECK(check_bytes(win_buf, off, b, prev, k), "%zu bytes from rank %d", b, prev);
  }
  /* To itself, then signals alone on every (sigIdx, ctx 0). */
  fill(src, 4096, rank, 7);
  ncclWaitSignalDesc_t self = {1, rank, 3, 0};
  CHECK(ncclPutSignal(src, 4096, ncclUint8, rank, win, 100, 3, 0, 0, comm, s) == ncclSuccess &&
            ncclWaitSignal(1, &self, comm, s) == ncclSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess && check_bytes(win_buf, 100, 4096, rank, 7),
        "a put to itself");
  for (int sig = 0; sig < 8; sig++) {
    ncclWaitSignalDesc_t d = {2, prev, sig, 0};
    ncclResult_t r = ncclSignal(next, sig, 0, 0, comm, s);
    r = r == ncclSuccess ? ncclSignal(next, sig, 0, 0, comm, s) : r;
    r = r == ncclSuccess ? ncclWaitSignal(1, &d, comm, s) : r;
    CHECK(r == ncclSuccess && cudaStreamSynchronize(s) == cudaSuccess, "two signals on %d", sig);
  }
  /* An all-to-all of puts in one group: rank r's block at r * 64 KB of each. */
  const size_t blk = 64 << 10;
  fill(src, blk, rank, 9);
  ncclGroupStart();
  for (int p = 0; p < n; p++) {
    ncclPutSignal(src, blk, ncclUint8, p, win, (size_t)rank * blk, 1, 0, 0, comm, s);
  }
  ncclWaitSignalDesc_t* all = calloc((size_t)n, sizeof *all);
  for (int p = 0; p < n; p++) {
    all[p] = (ncclWaitSignalDesc_t){1, p, 1, 0};
  }
  ncclWaitSignal(n, all, comm, s);
  ncclResult_t g = ncclGroupEnd();
  int ok = g == ncclSuccess && cudaStreamSynchronize(s) == cudaSuccess;
  for (int p = 0; p < n && ok; p++) {
    ok = check_bytes(win_buf, (size_t)p * blk, blk, p, 9);
  }
  CHECK(ok, "one-sided all-to-all");
  free(all);
  /* Put + wait around the ring captured once, replayed three times: the
   * counts a replay waits for follow the replays. Each replay puts what src
   * holds then (a new pattern each time, written after every rank checked
   * the last: the allreduce between replays). */
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ncclWaitSignalDesc_t d = {1, prev, 2, 0};
  int* one = NULL;
  cudaMalloc((void**)&one, sizeof(int));
  ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  ok = ok && ncclPutSignal(src, 1 << 20, ncclUint8, next, win, 0, 2, 0, 0, comm, s) == ncclSuccess;
  ok = ok && ncclWaitSignal(1, &d, comm, s) == ncclSuccess;
  ok = cudaStreamEndCapture(s, &graph) == cudaSuccess && ok;
  ok = ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  for (int rep = 0; rep < 3 && ok; rep++) {
    fill(src, 1 << 20, rank, 20 + rep);
    ok = cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess &&
         check_bytes(win_buf, 0, 1 << 20, prev, 20 + rep);
    int v = 1, sum = 0;
    cudaMemcpy(one, &v, sizeof v, cudaMemcpyHostToDevice);
    ok = ok && ncclAllReduce(one, one, 1, ncclInt32, ncclSum, comm, s) == ncclSuccess &&
         cudaStreamSynchronize(s) == cudaSuccess &&
         cudaMemcpy(&sum, one, sizeof sum, cudaMemcpyDeviceToHost) == cudaSuccess && sum == n;
  }
  cudaFree(one);
  CHECK(ok, "a captured put + wait replayed 3 times");
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  cudaFree(win_buf);
  cudaFree(src);
}

int main(int argc, char** argv) {
  hosts = argc > 1 && strcmp(argv[1], "hosts") == 0;
  /* Counted in a child: the parent must not touch CUDA before it forks. */
  FILE* f = popen("nvidia-smi -L 2>/dev/null | grep -c '^GPU'", "r");
  if (f == NULL || fscanf(f, "%d", &ngpu) != 1 || ngpu < 1) {
    if (f != NULL) {
      pclose(f);
    }
    printf("SKIPPED: no CUDA device here (one-sided operations on host buffers are checked by "
           "coll.rma.*)\n");
    return 77;
  }
  pclose(f);
  if (procs_comm_id() != 0) {
    printf("no free port for NCCL_COMM_ID\n");
    return 1;
  }
  long passed = 0, failed = 0;
  for (int n = 2; n <= 3; n++) {
    procs_run(n, body, &n, &passed, &failed);
  }
  printf("gpu_rma%s: %ld passed, %ld failed\n", hosts ? " (hosts)" : "", passed, failed);
  return failed == 0 ? 0 : 1;
}
