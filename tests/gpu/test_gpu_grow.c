/* ncclCommGrow on device buffers: two processes (rank r on GPU r % #GPUs)
 * grow their job to four, two new processes taking ranks 2 and 3; then the
 * grown communicator shrinks back to three (rank 3 left out). Every
 * collective runs bit for bit on cudaMalloc buffers on a stream of each
 * rank (every_coll.h) on the two-rank job, the grown one, the parent after
 * the grow and the shrunk one. Without a CUDA device it prints
 * "SKIPPED: ..." and exits 77. Prints "N passed, N failed". */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "every_coll.h"
#include "gpu_probe.h"
#include "nccl.h"
#include "team.h"

static int ngpu;

static void* dev_alloc(size_t bytes) {
  void* p = NULL;
  return cudaMalloc(&p, bytes > 0 ? bytes : 1) == cudaSuccess ? p : NULL;
}

static void dev_release(void* p) {
  cudaFree(p);
}

static int dev_copy(void* dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess ? 0 : -1;
}

static int dev_sync(void* stream) {
  return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? 0 : -1;
}

static void expect(int ok, int w, const char* what, long* failed) {
  if (!ok) {
    (*failed)++;
    fprintf(stderr, "worker %d: %s: %s\n", w, what, ncclGetLastError(NULL));
  }
}

static void grow(struct team* t, int w, long* P, long* F) {
  cudaStream_t stream;
  if (cudaSetDevice(w % ngpu) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess) {
    expect(0, w, "no stream on the GPU", F);
    return;
  }
  struct every_mem mem = {dev_alloc, dev_release, dev_copy, dev_sync, stream};
  ncclComm_t parent = NULL, grown = NULL, shrunk = NULL;
  ncclUniqueId id;
  ncclResult_t res;
  if (w < 2) {
    if (w == 0) {
      expect(ncclGetUniqueId(&id) == ncclSuccess, w, "the job's id", F);
      team_send(t, 1, &id);
    } else if (team_recv(t, w, &id) != 0) {
      expect(0, w, "no id", F);
      return;
    }
    expect(ncclCommInitRank(&parent, 2, id, w) == ncclSuccess, w, "init of 2 ranks", F);
    if (*F || !every_coll_mem(parent, "2 ranks on device buffers", &mem, P, F)) {
      return;
    }
    if (w == 1) {
      expect(ncclCommGetUniqueId(parent, &id) == ncclSuccess, w, "the grow's id", F);
      team_send(t, 2, &id);
      team_send(t, 3, &id);
    }
    res = ncclCommGrow(parent, 4, NULL, -1, &grown, NULL);
  } else if (team_recv(t, w, &id) != 0) {
    expect(0, w, "no grow id", F);
    return;
  } else {
    res = ncclCommGrow(NULL, 4, &id, w, &grown, NULL);
  }
  expect(res == ncclSuccess, w, "grow to 4", F);
  if (res == ncclSuccess && every_coll_mem(grown, "grown 2 -> 4 on device buffers", &mem, P, F)) {
    if (parent != NULL) {
      every_coll_mem(parent, "the parent after the grow, device buffers", &mem, P, F);
    }
    if (w < 3) {
      int out = 3;
      res = ncclCommShrink(grown, &out, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT);
      expect(res == ncclSuccess, w, "shrink to 3", F);
      if (res == ncclSuccess) {
        every_coll_mem(shrunk, "shrunk 4 -> 3 on device buffers", &mem, P, F);
      }
      if (w == 0) {
        team_send(t, 3, &id); /* rank 3 may leave: nothing of its may be in flight */
      }
    } else {
      expect(team_recv(t, w, &id) == 0, w, "the others' end", F);
    }
  }
  ncclCommDestroy(shrunk);
  ncclCommDestroy(grown);
  ncclCommDestroy(parent);
  cudaStreamDestroy(stream);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  ngpu = gpu_probe();
  if (ngpu <= 0) {
    return gpu_probe_exit(ngpu, "no CUDA device");
  }
  long passed = 0, failed = 0;
  team_run(0, 4, grow, &passed, &failed);
  printf("%d GPUs: %ld passed, %ld failed\n", ngpu, passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
