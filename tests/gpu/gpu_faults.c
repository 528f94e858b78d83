/* The GPU suite's fault modes: a peer that vanishes (netkill) and a peer
 * that stays alive but stops calling (stall). Every survivor must get a
 * named error within the bound, and a failed communicator must refuse
 * later calls at once. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_run.h"

/* A rank that vanishes in the middle of a loop of device allreduces. */
void run_netkill(struct grank* g) {
  const size_t count = 1 << 20;
  for (int it = 0; it < 3; it++) {
    if (ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32, ncclSum, g->comm, g->stream) !=
            ncclSuccess ||
        !cuda_ok(cudaStreamSynchronize(g->stream), "allreduce")) {
      FAILF("rank %d: allreduce %d failed: %s", g->rank, it, ncclGetLastError(g->comm));
      return;
    }
  }
  if (g->rank == 1) {
    passed++;
    return; /* the process exits with its communicator and connections still open */
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t res =
      ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32, ncclSum, g->comm, g->stream);
  ncclResult_t async = ncclSuccess;
  double dt = 0;
  while (res == ncclSuccess && async == ncclSuccess && dt < 30) {
    ncclCommGetAsyncError(g->comm, &async);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    usleep(1000);
  }
  const char* why = ncclGetLastError(g->comm);
  printf("netkill: rank 0 saw %s after %.2f s: %s\n", ncclGetErrorString(res ? res : async), dt,
         why);
  fflush(stdout);
  /* The loss may surface in the call itself when it was seen before it. */
  if ((res != ncclSuccess ? res : async) == ncclRemoteError && dt < 5 &&
      strstr(why, "rank 1") != NULL) {
    passed++;
  } else {
    FAILF("netkill: rank 0 did not report rank 1 lost within 5 s");
  }
  cudaStreamSynchronize(g->stream); /* the kernel was stopped */
  ncclCommAbort(g->comm);
  g->comm = NULL;
}

static double secs_since(const struct timespec* t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* A peer that stays alive but stops calling (TUTTI_TIMEOUT=4): rank 0's
 * device allreduce must end in an error naming the timeout within the
 * bound, every later call on the communicator must fail at once instead
 * of waiting out the timeout again, and destroy must return. */
void run_stall(struct grank* g) {
  const size_t count = 1 << 20;
  if (ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32, ncclSum, g->comm, g->stream) !=
          ncclSuccess ||
      !cuda_ok(cudaStreamSynchronize(g->stream), "allreduce")) {
    FAILF("rank %d: the first allreduce failed: %s", g->rank, ncclGetLastError(g->comm));
    return;
  }
  if (g->rank == 1) {
    sleep(14); /* alive, silent, past rank 0's timeout */
    passed++;
    return;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t res =
      ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32, ncclSum, g->comm, g->stream);
  ncclResult_t async = ncclSuccess;
  while (res == ncclSuccess && async == ncclSuccess && secs_since(&t0) < 30) {
    ncclCommGetAsyncError(g->comm, &async);
    usleep(1000);
  }
  const double dt = secs_since(&t0);
  const char* why = ncclGetLastError(g->comm);
  printf("stall: rank 0 saw %s after %.2f s: %s\n", ncclGetErrorString(res ? res : async), dt, why);
  const int named = strstr(why, "TUTTI_TIMEOUT") != NULL;
  if ((res ? res : async) == ncclRemoteError && dt > 3 && dt < 9 && named) {
    passed++;
  } else {
    FAILF("stall: rank 0 did not report the stalled peer within TUTTI_TIMEOUT (4 s)");
  }
  /* Poisoned: later calls fail at once, the stream drains at once. */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t r2 =
      ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32, ncclSum, g->comm, g->stream);
  ncclResult_t r3 = ncclBroadcast(g->dsend, g->drecv, count, ncclFloat32, 0, g->comm, g->stream);
  cudaError_t se = cudaStreamSynchronize(g->stream);
  const double dt2 = secs_since(&t0);
  printf("stall: later calls returned %d and %d, the stream drained in %.2f s\n", (int)r2, (int)r3,
         dt2);
  if (r2 != ncclSuccess && r3 != ncclSuccess && se == cudaSuccess && dt2 < 2) {
    passed++;
  } else {
    FAILF("stall: later calls on the failed communicator did not fail at once");
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclCommDestroy(g->comm);
  g->comm = NULL;
  const double dt3 = secs_since(&t0);
  if (dt3 < 12) {
    passed++;
  } else {
    FAILF("stall: destroying the failed communicator took %.1f s", dt3);
  }
}

/* Mismatched device calls (rank 0 sums, rank 1 takes the max): each rank's
 * call, or its asynchronous error, must fail with ncclInvalidUsage naming
 * both calls within seconds, and every later call must fail at once with
 * the same cause. */
void run_mismatch(struct grank* g) {
  const size_t count = 1 << 16;
  if (ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32, ncclSum, g->comm, g->stream) !=
          ncclSuccess ||
      !cuda_ok(cudaStreamSynchronize(g->stream), "allreduce")) {
    FAILF("rank %d: the matching allreduce failed: %s", g->rank, ncclGetLastError(g->comm));
    return;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t res = ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32,
                                   g->rank == 0 ? ncclSum : ncclMax, g->comm, g->stream);
  ncclResult_t async = ncclSuccess;
  while (res == ncclSuccess && async == ncclSuccess && secs_since(&t0) < 30) {
    ncclCommGetAsyncError(g->comm, &async);
    usleep(1000);
  }
  const double dt = secs_since(&t0);
  char why[1024];
  snprintf(why, sizeof why, "%s", ncclGetLastError(g->comm));
  const ncclResult_t got = res != ncclSuccess ? res : async;
  printf("mismatch: rank %d saw %s after %.2f s: %s\n", g->rank, ncclGetErrorString(got), dt, why);
  if (got == ncclInvalidUsage && dt < 5 && strstr(why, "sum") != NULL && strstr(why, "max")) {
    passed++;
  } else {
    FAILF("mismatch: rank %d did not report the two calls within 5 s", g->rank);
  }
  cudaStreamSynchronize(g->stream); /* the kernels were stopped */
  ncclResult_t later =
      ncclAllReduce(g->dsend, g->drecv, count, ncclFloat32, ncclSum, g->comm, g->stream);
  if (later == got && strcmp(ncclGetLastError(g->comm), why) == 0) {
    passed++;
  } else {
    FAILF("mismatch: rank %d's next call returned %d: %s", g->rank, (int)later,
          ncclGetLastError(g->comm));
  }
  ncclCommAbort(g->comm);
  g->comm = NULL;
}

/* Ranks whose device queues would be laid out differently (rank 1 asks
 * for 1 MB queues): every rank's init fails naming the variables. */
void run_shapes(const ncclUniqueId* ids, int r, int n) {
  if (r == 1) {
    setenv("NCCL_BUFFSIZE", "1048576", 1);
  }
  ncclComm_t comm = NULL;
  const ncclResult_t res = ncclCommInitRank(&comm, n, ids[0], r);
  const char* why = ncclGetLastError(NULL);
  printf("shapes: rank %d init returned %d: %s\n", r, (int)res, why);
  if (res == ncclInvalidUsage && strstr(why, "NCCL_BUFFSIZE") != NULL &&
      strstr(why, "lay out") != NULL) {
    passed++;
  } else {
    FAILF("shapes: rank %d's init did not refuse queues laid out differently", r);
  }
  if (res == ncclSuccess) {
    ncclCommDestroy(comm);
  }
}
