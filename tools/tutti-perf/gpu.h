/* Buffers, streams and CUDA graphs: device memory through a dlopen'd CUDA
 * runtime in GPU mode, plain host memory otherwise. Nothing here needs CUDA
 * headers or CUDA at build time. */
#ifndef TUTTI_PERF_GPU_H
#define TUTTI_PERF_GPU_H

#include <stddef.h>

#include "nccl.h"

/* Loads libcudart (TUTTI_PERF_CUDART names a file; otherwise the usual
 * sonames) and counts devices. Returns the device count, or 0 with `why`
 * saying what was missing. */
int perf_cuda_load(char* why, size_t len);

/* "[0x41] NVIDIA H200" for the "# Using devices" lines. */
void perf_cuda_describe(int dev, char* out, size_t len);
/* Device memory of `dev` in bytes, 0 if unknown. */
size_t perf_cuda_mem_total(int dev);
/* Free device memory of `dev` in bytes, 0 if unknown. */
size_t perf_cuda_mem_free(int dev);

/* With gpu == 0 these act on host memory and never touch CUDA. */
void perf_set_device(int gpu, int dev);
void* perf_buf_alloc(int gpu, size_t bytes);
void perf_buf_free(int gpu, void* p);
/* Any direction, ordered on `stream` (the rank's) and complete on return. */
void perf_buf_copy(int gpu, void* dst, const void* src, size_t bytes, cudaStream_t stream);
cudaStream_t perf_stream_create(int gpu, int null_stream);
void perf_stream_destroy(int gpu, cudaStream_t s);
/* 1 when all the stream's work is done, 0 while it runs. */
int perf_stream_done(int gpu, cudaStream_t s);

struct perf_graph {
  void* graph;
  void* exec;
};
/* Capture mode: thread-local, because threads capture at the same time. */
void perf_graph_begin(cudaStream_t s);
void perf_graph_end(cudaStream_t s, struct perf_graph* g); /* ends the capture */
void perf_graph_instantiate(struct perf_graph* g);
void perf_graph_launch(const struct perf_graph* g, cudaStream_t s);
void perf_graph_destroy(struct perf_graph* g);

#endif
