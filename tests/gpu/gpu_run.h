/* The GPU suite's case runners (gpu_run.c): the matrix of cases, the large
 * counts, grouped send/receive, a rank's setup, and the suite's tallies. */
#ifndef TUTTI_TEST_GPU_RUN_H
#define TUTTI_TEST_GPU_RUN_H

#include <stdio.h>

#include "gpu_case.h"

/* This process's tallies (a child rank's own, reported to the parent). */
extern long passed, failed;

#define FAILF(...)                \
  do {                            \
    failed++;                     \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
  } while (0)

/* 0 (and a failure counted) when `e` is an error. */
int cuda_ok(cudaError_t e, const char* what);
/* One case on the `nl` ranks this thread drives (a group when several);
 * `graph`: captured in a CUDA graph and replayed. Counts a pass or failure. */
void run_case(const struct gcase* c, struct grank* gs, int nl, int graph);
/* Every collective x type x op x count x in/out of place on `nl` ranks this
 * thread drives (of `n`); `graph`: each captured in a CUDA graph. */
void run_matrix(struct grank* gs, int nl, int n, int graph);
/* Counts beyond a queue per channel (hundreds of MB). */
void run_big(struct grank* gs, int nl, int n);
/* Several GB in one call: sizes past 2^31 bytes and elements. */
void run_huge(struct grank* g, int n);
/* N sends and N receives (self included) in one group, on device buffers. */
void run_p2p(struct grank* g);
/* Fault modes (gpu_faults.c): rank 1 exits mid-loop without a word /
 * stays alive but silent past TUTTI_TIMEOUT; rank 0 checks the error it
 * gets and when. Both may destroy the communicator (g->comm NULL then). */
void run_netkill(struct grank* g);
void run_stall(struct grank* g);
void run_mismatch(struct grank* g);
/* Rank r of n, before any communicator: rank 1 asks for other queue sizes,
 * and every rank's init must refuse naming the variables. */
void run_shapes(const ncclUniqueId* ids, int r, int n);
/* Stream and buffers of `cap` bytes for rank r of n on device `dev`. */
int rank_setup(struct grank* g, ncclComm_t comm, int r, int n, int dev, size_t cap);

#endif
