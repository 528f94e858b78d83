/* The GPU suite's multi-stream cases (gpu_streams.c) and memory kinds
 * (gpu_mem.c): one communicator driven from several CUDA streams, and
 * buffers of every kind a CUDA program hands in. */
#ifndef TUTTI_TEST_GPU_STREAMS_H
#define TUTTI_TEST_GPU_STREAMS_H

#include "gpu_run.h"

/* Bytes of each buffer of a multi-stream operation with `n` ranks. */
size_t streams_slot_bytes(int n);
/* On the `nl` ranks this thread drives (of `n`): the 40 x {12 MB on A,
 * 1 MB on B} pattern, a group on two streams, then `batches` batches of
 * random operations over three streams per rank. */
void run_streams(struct grank* gs, int nl, int n, int batches);
/* `steps` steps of a ZeRO-style trainer on a compute and a communication
 * stream (grouped in-place reduce-scatters and all-gathers, scalars on the
 * compute stream, one of them in managed memory). */
void run_zero(struct grank* gs, int nl, int n, int steps);
/* Every collective on buffers of each memory kind, and mixed kinds. */
void run_memkinds(struct grank* g, int n);

#endif
