/* What one GPU's SMs reach on local memory with the device executor's own
 * passes (td_fold_typed: two contributions summed into an output, as the
 * mapped and copy-engine kernels combine; td_pass_typed: a copy) against
 * a plain loop doing the same, on 128 and 256 blocks of 512 threads, each
 * block taking its slice as the kernels do. Prints time, GB/s of output and
 * GB/s moved (reads plus writes). When the executor's passes trail the
 * plain loop, they, not the link, bound the paths that use them. Also the
 * mapped kernel's LL128 lines (mapped_ll128.cuh): a push of every block's
 * slice into lines (in local memory here), and a fold of those lines with a
 * second contribution, each timed alone.
 * Build and run on a host with a GPU:
 *   nvcc -O2 -arch=sm_90 -std=c++17 -Isrc -Iinclude -o pass_bw bench/pass_bw.cu && ./pass_bw */
#include <cuda_runtime.h>
#include <stdio.h>

#include "device/kernels/mapped_fold.cuh"
#include "device/kernels/mapped_ll128.cuh"
#include "device/kernels/pass.cuh"
#include "device/kernels/sync.cuh"

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

/* Lines of one block's slice: room for its share plus one line. */
__device__ __forceinline__ uint64_t* ll128_box(uint64_t* box, size_t bytes) {
  const size_t lines = (bytes / gridDim.x + 16) / TD_LL128_DATA + 2;
  return box + (size_t)blockIdx.x * lines * 16;
}

__global__ void __launch_bounds__(512, 1)
    ll128_push(const char* a, uint64_t* box, size_t bytes, uint64_t flag) {
  uint64_t off, len;
  slice(bytes, &off, &len);
  td_ll128_push<td_int<uint64_t, uint64_t>, false>(0, 1, a + off, ll128_box(box, bytes), len, flag);
}

__global__ void __launch_bounds__(512, 1)
    ll128_fold(const uint64_t* box, const char* b, char* o, size_t bytes, uint64_t flag,
               td_devcomm* dc, int self_idx) {
  uint64_t off, len;
  slice(bytes, &off, &len);
  td_op op = {};
  op.type = ncclFloat32;
  op.kind = TUTTI_RED_SUM;
  op.elem_size = 4;
  op.divisor = 1;
  td_ll128fold f = {};
  f.lines[1 - self_idx] = ll128_box((uint64_t*)box, bytes);
  f.self = b + off;
  f.self_idx = self_idx;
  f.nsrc = 2;
  f.e_mid = TD_SUM;
  f.e_last = TD_SUM;
  f.flag = flag;
  f.dst = o + off;
  f.len = len;
  f.dc = dc;
  td_run_ll128fold<td_f32, TD_SUM>(&op, 0, f);
}

/* The LL128 pair, 128 blocks: the push alone, then push and fold in turn
 * (the fold's time is the difference). */
static int run_ll128(size_t sz, char* a, char* b, char* o, uint64_t* box, td_devcomm* dc,
                     int self_idx, cudaEvent_t e0, cudaEvent_t e1) {
  float ms[2] = {0, 0};
  uint64_t flag = 1000 * sz;
  for (int k = 0; k < 2; k++) {
    for (int it = -2; it < 20; it++) {
      if (it == 0) {
        cudaEventRecord(e0);
      }
      flag++;
      ll128_push<<<128, 512>>>(a, box, sz, flag);
      if (k == 1) {
        ll128_fold<<<128, 512>>>(box, b, o, sz, flag, dc, self_idx);
      }
    }
    cudaEventRecord(e1);
    if (cudaEventSynchronize(e1) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
      fprintf(stderr, "pass_bw: an LL128 kernel failed\n");
      return 1;
    }
    cudaEventElapsedTime(&ms[k], e0, e1);
  }
  const double push = ms[0] * 1000.0 / 20, fold = (ms[1] - ms[0]) * 1000.0 / 20;
  const double lines = (double)sz * TD_LL128_LINE / TD_LL128_DATA;
  printf("%-12s %3d MB 128 blocks: %8.1f us  out %6.0f GB/s  moved %6.0f GB/s\n", "LL128 push",
         (int)(sz >> 20), push, lines / push / 1e3, (sz + lines) / push / 1e3);
  printf("%-12s %3d MB 128 blocks: %8.1f us  out %6.0f GB/s  moved %6.0f GB/s\n",
         self_idx ? "LL128 fold 1" : "LL128 fold 0", (int)(sz >> 20), fold, (double)sz / fold / 1e3,
         (2 * sz + lines) / fold / 1e3);
  return 0;
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
  uint64_t* box;
  td_devcomm hdc = {}, *dc;
  int* flags;
  if (cudaMalloc(&box, cap / TD_LL128_DATA * TD_LL128_LINE + 256 * 4096) != cudaSuccess ||
      cudaMalloc(&dc, sizeof hdc) != cudaSuccess || cudaMalloc(&flags, 64) != cudaSuccess) {
    fprintf(stderr, "pass_bw: cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(box, 0, cap / TD_LL128_DATA * TD_LL128_LINE + 256 * 4096);
  cudaMemset(flags, 0, 64);
  hdc.timeout_ns = 10000000000ull;
  hdc.abort_flag = flags;
  hdc.error = flags + 1;
  cudaMemcpy(dc, &hdc, sizeof hdc, cudaMemcpyHostToDevice);
  for (int si = 0; si < 2; si++) {
    for (int self_idx = 0; self_idx < 2; self_idx++) {
      if (run_ll128(sizes[si], a, b, o, box, dc, self_idx, e0, e1) != 0) {
        return 1;
      }
    }
  }
  return 0;
}
