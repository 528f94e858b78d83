/* One-sided operations on device buffers: ranks as processes on the GPUs
 * (rank r on GPU r % #GPUs; several ranks share one GPU), windows in
 * cudaMalloc memory, ncclPutSignal / ncclSignal / ncclWaitSignal on streams
 * of each rank, checked byte for byte: a ring of puts of every size class
 * (bytes, more than a staging piece), puts to itself, signals alone, puts
 * from two streams at once, an all-to-all of puts in one group, and a ring
 * of put + wait captured into a CUDA graph and replayed. After every
 * synchronize the communicator's asynchronous error is read, and a rank
 * stops at its first failure: the case that failed is the one reported.
 * Modes (none: all five, each in its own processes):
 *   host     one host: peer memory (direct puts)
 *   service  one host, TUTTI_RMA_DIRECT=0: every put through the service thread
 *   hosts    every process its own NCCL_HOSTID (peers across "hosts")
 *   stall    a wait for a signal nobody raises ends at TUTTI_TIMEOUT with an
 *            error naming the peer, the signal and the counts
 *   loop     two processes as hosts, then on one host through the service
 *            thread: a ring of put + wait issued many times without a
 *            synchronize (as a benchmark does), every size class to 32 MB
 *            (twice the receiver's landing), checked;
 *            gpu-test.sh runs it also with CUDA_DEVICE_MAX_CONNECTIONS=1 and
 *            under MPS, where streams share the GPU's hardware queues
 * Without a CUDA device it prints "SKIPPED: ..." and exits 77; any other
 * CUDA start-up failure fails. Prints "N passed, N failed". */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>
#include <unistd.h>

#include "gpu_probe.h"
#include "nccl.h"
#include "procs.h"

static int ngpu;
static int hosts;

/* A case: on failure the rank says which and why, and stops (what would
 * follow fails only because this did). */
#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (cond) {                                          \
      (*P)++;                                            \
    } else {                                             \
      (*F)++;                                            \
      fprintf(stderr, "rank %d: FAILED ", rank);         \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, ": %s\n", ncclGetLastError(comm)); \
      return;                                            \
    }                                                    \
  } while (0)

/* The stream's work done and the communicator without an asynchronous
 * error (a wait kernel that gave up returns normally: only this says so). */
static int settle(ncclComm_t comm, cudaStream_t s) {
  ncclResult_t a = ncclSuccess;
  return cudaStreamSynchronize(s) == cudaSuccess &&
         ncclCommGetAsyncError(comm, &a) == ncclSuccess && a == ncclSuccess;
}

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
    CHECK(r == ncclSuccess && settle(comm, s), "put + wait of %zu bytes", b);
    CHECK(check_bytes(win_buf, off, b, prev, k), "%zu bytes from rank %d", b, prev);
  }
  /* To itself, then signals alone on every (sigIdx, ctx 0). */
  fill(src, 4096, rank, 7);
  ncclWaitSignalDesc_t self = {1, rank, 3, 0};
  CHECK(ncclPutSignal(src, 4096, ncclUint8, rank, win, 100, 3, 0, 0, comm, s) == ncclSuccess &&
            ncclWaitSignal(1, &self, comm, s) == ncclSuccess && settle(comm, s) &&
            check_bytes(win_buf, 100, 4096, rank, 7),
        "a put to itself");
  for (int sig = 0; sig < 8; sig++) {
    ncclWaitSignalDesc_t d = {2, prev, sig, 0};
    ncclResult_t r = ncclSignal(next, sig, 0, 0, comm, s);
    r = r == ncclSuccess ? ncclSignal(next, sig, 0, 0, comm, s) : r;
    r = r == ncclSuccess ? ncclWaitSignal(1, &d, comm, s) : r;
    CHECK(r == ncclSuccess && settle(comm, s), "two signals on %d", sig);
  }
  /* Two streams put at once (each its own staging on the service path):
   * halves of 6 MB from two buffers, one signal each. */
  cudaStream_t s2;
  CHECK(cudaStreamCreate(&s2) == cudaSuccess, "a second stream");
  {
    const size_t half = 3u << 20;
    unsigned char* src2 = NULL;
    cudaMalloc((void**)&src2, 2 * half);
    fill(src2, 2 * half, rank, 5);
    ncclWaitSignalDesc_t w2[2] = {{1, prev, 4, 0}, {1, prev, 5, 0}};
    ncclResult_t r = ncclPutSignal(src2, half, ncclUint8, next, win, 0, 4, 0, 0, comm, s);
    r = r == ncclSuccess
            ? ncclPutSignal(src2 + half, half, ncclUint8, next, win, half, 5, 0, 0, comm, s2)
            : r;
    r = r == ncclSuccess ? ncclWaitSignal(2, w2, comm, s) : r;
    CHECK(r == ncclSuccess && settle(comm, s2) && settle(comm, s) &&
              check_bytes(win_buf, 0, 2 * half, prev, 5),
          "puts from two streams");
    cudaFree(src2);
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
  int ok = g == ncclSuccess && settle(comm, s);
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
    ok = cudaGraphLaunch(exec, s) == cudaSuccess && settle(comm, s) &&
         check_bytes(win_buf, 0, 1 << 20, prev, 20 + rep);
    int v = 1, sum = 0;
    cudaMemcpy(one, &v, sizeof v, cudaMemcpyHostToDevice);
    ok = ok && ncclAllReduce(one, one, 1, ncclInt32, ncclSum, comm, s) == ncclSuccess &&
         settle(comm, s) &&
         cudaMemcpy(&sum, one, sizeof sum, cudaMemcpyDeviceToHost) == cudaSuccess && sum == n;
  }
  cudaFree(one);
  CHECK(ok, "a captured put + wait replayed 3 times");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s2);
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  cudaFree(win_buf);
  cudaFree(src);
}

/* Put + wait around the ring `iters` times per size without synchronizing,
 * each iteration into its own part of the window from its own part of the
 * source, an allreduce after each size; then every byte checked. */
static void loop_body(int rank, void* arg, long* P, long* F) {
  const int n = *(int*)arg;
  ncclComm_t comm = NULL;
  char host[32];
  if (hosts) {
    snprintf(host, sizeof host, "rma-loop-host-%d", rank);
    setenv("NCCL_HOSTID", host, 1);
  }
  cudaStream_t s;
  CHECK(cudaSetDevice(rank % ngpu) == cudaSuccess && cudaStreamCreate(&s) == cudaSuccess,
        "a stream");
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, n, id, rank) == ncclSuccess,
        "init");
  /* Puts of 32 MB fill the receiver's landing (rma.landing, 16 MiB) many
   * times over while its own puts are staged: records wait in the service
   * communicator's queue for room. */
  const size_t win_bytes = 96u << 20;
  unsigned char *win_buf = NULL, *src = NULL;
  int* one = NULL;
  CHECK(cudaMalloc((void**)&win_buf, win_bytes) == cudaSuccess &&
            cudaMalloc((void**)&src, win_bytes) == cudaSuccess &&
            cudaMalloc((void**)&one, sizeof(int)) == cudaSuccess,
        "buffers");
  ncclWindow_t win = NULL;
  CHECK(ncclCommWindowRegister(comm, win_buf, win_bytes, &win, NCCL_WIN_COLL_SYMMETRIC) ==
            ncclSuccess,
        "window registration");
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const size_t sizes[] = {8, 4096, 65536 + 5, (1u << 20) + 13, 5u << 20, 32u << 20};
  for (int k = 0; k < (int)(sizeof sizes / sizeof sizes[0]); k++) {
    const size_t b = sizes[k];
    const int iters = (int)(win_bytes / b < 60 ? win_bytes / b : 60);
    fill(src, (size_t)iters * b, rank, k);
    cudaMemset(win_buf, 0, win_bytes);
    CHECK(ncclAllReduce(one, one, 1, ncclInt32, ncclSum, comm, s) == ncclSuccess && settle(comm, s),
          "an allreduce before %zu bytes", b);
    ncclResult_t r = ncclSuccess;
    for (int it = 0; it < iters && r == ncclSuccess; it++) {
      const size_t off = (size_t)it * b;
      ncclWaitSignalDesc_t d = {1, prev, 0, 0};
      r = ncclPutSignal(src + off, b, ncclUint8, next, win, off, 0, 0, 0, comm, s);
      r = r == ncclSuccess ? ncclWaitSignal(1, &d, comm, s) : r;
    }
    r = r == ncclSuccess ? ncclAllReduce(one, one, 1, ncclInt32, ncclSum, comm, s) : r;
    CHECK(r == ncclSuccess && settle(comm, s), "%d puts + waits of %zu bytes", iters, b);
    CHECK(check_bytes(win_buf, 0, (size_t)iters * b, prev, k), "%d x %zu bytes from rank %d", iters,
          b, prev);
  }
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  cudaFree(win_buf);
  cudaFree(src);
  cudaFree(one);
}

/* A wait for a signal nobody raises: ends at TUTTI_TIMEOUT (3 s here) on
 * the waiting rank with an error that names the peer, the signal and the
 * counts; the other rank only waits for it to finish. */
static void stall_body(int rank, void* arg, long* P, long* F) {
  const int n = *(int*)arg;
  ncclComm_t comm = NULL;
  cudaStream_t s;
  CHECK(cudaSetDevice(rank % ngpu) == cudaSuccess && cudaStreamCreate(&s) == cudaSuccess,
        "a stream");
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, n, id, rank) == ncclSuccess,
        "init");
  unsigned char* buf = NULL;
  cudaMalloc((void**)&buf, 4096);
  ncclWindow_t win = NULL;
  CHECK(ncclCommWindowRegister(comm, buf, 4096, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
        "window registration");
  if (rank == 0) {
    ncclSignal(1, 6, 0, 0, comm, s); /* one of the two rank 1 waits for */
    CHECK(settle(comm, s), "a signal");
  } else {
    ncclWaitSignalDesc_t d = {2, 0, 6, 0};
    ncclResult_t r = ncclWaitSignal(1, &d, comm, s);
    ncclResult_t a = ncclSuccess;
    cudaStreamSynchronize(s);
    ncclCommGetAsyncError(comm, &a);
    const char* why = ncclGetLastError(comm);
    CHECK(r == ncclSuccess && a == ncclRemoteError && strstr(why, "signal 6") != NULL &&
              strstr(why, "from rank 0") != NULL && strstr(why, "1 of the 2") != NULL,
          "a wait that outlasts TUTTI_TIMEOUT names the peer, the signal and the counts "
          "(async error %d)",
          (int)a);
  }
  /* Rank 0 stays until rank 1 has seen its timeout (leaving sooner would
   * end the wait as a peer that exited). */
  if (rank == 0) {
    sleep(8);
  }
  CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
  cudaFree(buf);
}

static void run_mode(const char* mode, long* passed, long* failed) {
  hosts = strcmp(mode, "hosts") == 0;
  setenv("TUTTI_RMA_DIRECT", strcmp(mode, "service") == 0 ? "0" : "1", 1);
  const long p0 = *passed, f0 = *failed;
  if (strcmp(mode, "loop") == 0) {
    /* As hosts (the service thread of each), then one host without direct puts. */
    for (int h = 1; h >= 0; h--) {
      hosts = h;
      setenv("TUTTI_RMA_DIRECT", h ? "1" : "0", 1);
      int n = 2;
      procs_run(n, loop_body, &n, passed, failed);
    }
  } else if (strcmp(mode, "stall") == 0) {
    setenv("TUTTI_TIMEOUT", "3", 1);
    int n = 2;
    procs_run(n, stall_body, &n, passed, failed);
    unsetenv("TUTTI_TIMEOUT");
  } else {
    for (int n = 2; n <= 3; n++) {
      procs_run(n, body, &n, passed, failed);
    }
  }
  printf("gpu_rma %s: %ld passed, %ld failed\n", mode, *passed - p0, *failed - f0);
  fflush(stdout);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  const char* modes[] = {"host", "service", "hosts", "stall", "loop"};
  int known = strcmp(mode, "all") == 0;
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    known |= strcmp(mode, modes[m]) == 0;
  }
  if (!known) {
    fprintf(stderr, "unknown mode %s (host, service, hosts, stall, loop, all)\n", mode);
    return 2;
  }
  ngpu = gpu_probe();
  if (ngpu <= 0) {
    return gpu_probe_exit(ngpu,
                          "no CUDA device here (one-sided operations on host buffers are "
                          "checked by coll.rma.*)");
  }
  if (procs_comm_id() != 0) {
    printf("no free port for NCCL_COMM_ID\n");
    return 1;
  }
  long passed = 0, failed = 0;
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    if (strcmp(mode, "all") == 0 || strcmp(mode, modes[m]) == 0) {
      run_mode(modes[m], &passed, &failed);
    }
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
