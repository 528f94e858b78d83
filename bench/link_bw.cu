/* The link between two GPUs as two processes see it: rank r (a process on
 * GPU r) maps its peer's buffer through CUDA IPC and writes into it, both
 * ranks at once, with the copy engine (cudaMemcpyAsync) and with SM stores
 * (a copy kernel on 132 and 264 blocks; and as the mapped kernel writes: each
 * of 128 or 32 blocks its own contiguous part, 8 vectors per thread in
 * flight, then a system fence and a flag). Prints time and GB/s per rank for
 * 4, 8, 32 and 128 MB, 20 writes each. The ceiling the device paths are
 * measured against (bench/RESULTS.md, "Graphs, bf16 and fp16, the link").
 * Build and run on a host with two GPUs:
 *   nvcc -O2 -arch=sm_90 -o link_bw bench/link_bw.cu && ./link_bw */
#include <cuda_runtime.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

__global__ void store(const int4* a, int4* o, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    o[i] = __ldcg(a + i);
  }
}

/* The mapped kernel's pattern: block b copies its own contiguous part of the
 * buffer, U vectors per thread loaded, then stored; with `fence`, thread 0
 * then fences to system scope and posts a flag (in the peer's buffer past
 * the data), as a round of the mapped kernel ends. */
template <int U>
__global__ void store_blocked(const int4* a, int4* o, size_t n, int fence) {
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t b0 = blockIdx.x * per, b1 = b0 + per < n ? b0 + per : n;
  for (size_t i = b0 + threadIdx.x; i < b1; i += (size_t)blockDim.x * U) {
    int4 x[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t k = i + (size_t)u * blockDim.x;
      if (k < b1) {
        x[u] = __ldcg(a + k);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t k = i + (size_t)u * blockDim.x;
      if (k < b1) {
        o[k] = x[u];
      }
    }
  }
  if (fence) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      *(volatile int*)(o + n + blockIdx.x) = 1;
    }
  }
}

static int check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "link_bw: %s: %s\n", what, cudaGetErrorString(e));
    return 0;
  }
  return 1;
}

/* Both ranks pass here before each measurement. */
static int meet(int wfd, int rfd) {
  char c = 0;
  return write(wfd, &c, 1) == 1 && read(rfd, &c, 1) == 1;
}

static int run(int r, int wfd, int rfd) {
  const size_t MB = 1 << 20, cap = 129 * MB; /* 128 MB and the flags past it */
  const size_t sizes[] = {4 * MB, 8 * MB, 32 * MB, 128 * MB};
  char *src, *in, *peer;
  cudaIpcMemHandle_t mine, theirs;
  if (!check(cudaSetDevice(r), "cudaSetDevice") || !check(cudaMalloc(&src, cap), "cudaMalloc") ||
      !check(cudaMalloc(&in, cap), "cudaMalloc") ||
      !check(cudaIpcGetMemHandle(&mine, in), "cudaIpcGetMemHandle")) {
    return 1;
  }
  if (write(wfd, &mine, sizeof mine) != sizeof mine ||
      read(rfd, &theirs, sizeof theirs) != sizeof theirs ||
      !check(cudaIpcOpenMemHandle((void**)&peer, theirs, cudaIpcMemLazyEnablePeerAccess),
             "cudaIpcOpenMemHandle")) {
    return 1;
  }
  cudaStream_t s;
  cudaEvent_t e0, e1;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const char* how[] = {"copy engine",       "SM, 132 blocks",    "SM, 264 blocks",
                       "SM, 128 parts",     "SM, 128 parts, U8", "SM, 128 parts, U8+f",
                       "SM, 32 parts, U8+f"};
  const int nmodes = (int)(sizeof how / sizeof how[0]);
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    const size_t sz = sizes[k];
    for (int mode = 0; mode < nmodes; mode++) {
      const int it = 20;
      if (!meet(wfd, rfd)) {
        return 1;
      }
      cudaEventRecord(e0, s);
      for (int i = 0; i < it; i++) {
        if (mode == 0) {
          cudaMemcpyAsync(peer, src, sz, cudaMemcpyDeviceToDevice, s);
        } else if (mode <= 2) {
          store<<<mode == 1 ? 132 : 264, 512, 0, s>>>((const int4*)src, (int4*)peer, sz / 16);
        } else if (mode == 3) {
          store_blocked<1><<<128, 512, 0, s>>>((const int4*)src, (int4*)peer, sz / 16, 0);
        } else {
          store_blocked<8><<<mode == 6 ? 32 : 128, 512, 0, s>>>((const int4*)src, (int4*)peer,
                                                                sz / 16, mode >= 5);
        }
      }
      cudaEventRecord(e1, s);
      if (!check(cudaEventSynchronize(e1), "the writes")) {
        return 1;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      printf("rank %d %-15s %4zu MB: %7.1f us %4.0f GB/s\n", r, how[mode], sz / MB, ms * 1000 / it,
             sz * (double)it / (ms * 1e6));
      fflush(stdout);
    }
  }
  cudaIpcCloseMemHandle(peer);
  return 0;
}

int main(void) {
  int a[2], b[2];
  if (pipe(a) != 0 || pipe(b) != 0) {
    perror("pipe");
    return 1;
  }
  pid_t p = fork();
  if (p == 0) {
    return run(1, b[1], a[0]);
  }
  int rc = run(0, a[1], b[0]);
  int st = 0;
  waitpid(p, &st, 0);
  return rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}
