/* What one GPU's SMs reach on local memory with the device executor's own
 * passes (td_fold_typed: two contributions summed into an output, as the
 * direct and copy-engine kernels combine; td_pass_typed: a copy) against
 * a plain loop doing the same, on 128 and 256 blocks of 512 threads, each
 * block taking its slice as the kernels do. Prints time, GB/s of output and
 * GB/s moved (reads plus writes). When the executor's passes trail the
 * plain loop, they, not the link, bound the paths that use them.
 * Build and run on a host with a GPU:
 *   nvcc -O2 -arch=sm_90 -std=c++17 -Isrc -Iinclude -o pass_bw bench/pass_bw.cu && ./pass_bw */
#include <cuda_runtime.h>
#include <stdio.h>

#include "device/direct_fold.cuh"
#include "device/pass.cuh"
#include "device/sync.cuh"

__device__ __forceinline__ void slice(size_t bytes, uint64_t* off, uint64_t* len) {
  td_chan_slice(bytes, (int)gridDim.x, (int)blockIdx.x, off, len);
}

__global__ void __launch_bounds__(512, 2)
    fold_tutti(const char* a, const char* b, char* o, size_t bytes) {
  uint64_t off, len;
  slice(bytes, &off, &len);
  td_op op = {};
  op.type = ncclFloat32;
  op.kind = TUTTI_RED_SUM;
  op.elem_size = 4;
  op.divisor = 1;
  td_fold f;
  f.src[0] = a + off;
  f.src[1] = b + off;
  f.nsrc = 2;
  f.scaled = -1;
  f.e_mid = TD_SUM;
  f.e_last = TD_SUM;
  f.dst = o + off;
  f.len = len;
  f.tid = threadIdx.x;
  f.nth = blockDim.x;
  td_fold_typed(&op, 0, &f);
}

__global__ void __launch_bounds__(512, 2) copy_tutti(const char* a, char* o, size_t bytes) {
  uint64_t off, len;
  slice(bytes, &off, &len);
  td_op op = {};
  op.type = ncclFloat32;
  op.elem_size = 4;
  td_pass p = {a + off, NULL, o + off, NULL, len, (int)threadIdx.x, (int)blockDim.x};
  td_pass_typed(&op, 0, TD_COPY, &p);
}

__global__ void __launch_bounds__(512, 2)
    fold_plain(const float4* a, const float4* b, float4* o, size_t bytes) {
  uint64_t off, len;
  slice(bytes, &off, &len);
  const size_t n = len / 16, s = off / 16;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x * 4) {
    float4 x[4], y[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      if (i + u * blockDim.x < n) {
        x[u] = __ldcg(a + s + i + u * blockDim.x);
        y[u] = __ldcg(b + s + i + u * blockDim.x);
      }
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      if (i + u * blockDim.x < n) {
        o[s + i + u * blockDim.x] =
            make_float4(x[u].x + y[u].x, x[u].y + y[u].y, x[u].z + y[u].z, x[u].w + y[u].w);
      }
    }
  }
}

__global__ void __launch_bounds__(512, 2) copy_plain(const int4* a, int4* o, size_t bytes) {
  uint64_t off, len;
  slice(bytes, &off, &len);
  const size_t n = len / 16, s = off / 16;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    o[s + i] = __ldcg(a + s + i);
  }
}

int main() {
  const size_t MB = 1 << 20, cap = 64 * MB;
  char *a, *b, *o;
  if (cudaMalloc(&a, cap) != cudaSuccess || cudaMalloc(&b, cap) != cudaSuccess ||
      cudaMalloc(&o, cap) != cudaSuccess) {
    fprintf(stderr, "pass_bw: cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(a, 0, cap);
  cudaMemset(b, 0, cap);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const size_t sizes[] = {8 * MB, 64 * MB};
  const int blocks[] = {128, 256};
  const char* names[] = {"fold, tutti", "fold, plain", "copy, tutti", "copy, plain"};
  for (int si = 0; si < 2; si++) {
    for (int bi = 0; bi < 2; bi++) {
      for (int k = 0; k < 4; k++) {
        const size_t sz = sizes[si];
        const int nb = blocks[bi], reps = 20;
        float ms = 0;
        for (int it = -2; it < reps; it++) {
          if (it == 0) {
            cudaEventRecord(e0);
          }
          if (k == 0) {
            fold_tutti<<<nb, 512>>>(a, b, o, sz);
          } else if (k == 1) {
            fold_plain<<<nb, 512>>>((const float4*)a, (const float4*)b, (float4*)o, sz);
          } else if (k == 2) {
            copy_tutti<<<nb, 512>>>(a, o, sz);
          } else {
            copy_plain<<<nb, 512>>>((const int4*)a, (int4*)o, sz);
          }
        }
        cudaEventRecord(e1);
        if (cudaEventSynchronize(e1) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
          fprintf(stderr, "pass_bw: a kernel failed\n");
          return 1;
        }
        cudaEventElapsedTime(&ms, e0, e1);
        const double us = ms * 1000.0 / reps, moved = (k < 2 ? 3.0 : 2.0) * (double)sz;
        printf("%-12s %3d MB %3d blocks: %8.1f us  out %6.0f GB/s  moved %6.0f GB/s\n", names[k],
               (int)(sz / MB), nb, us, (double)sz / us / 1e3, moved / us / 1e3);
      }
    }
  }
  return 0;
}
