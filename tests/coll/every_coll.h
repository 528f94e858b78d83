/* Every collective once over a communicator, checked bit for bit against
 * checker.h's exact inputs (avg on floating types within its tolerance):
 * what tests run after each change to a job's ranks (grow, shrink). */
#ifndef TUTTI_TEST_EVERY_COLL_H
#define TUTTI_TEST_EVERY_COLL_H

#include <stddef.h>

#include "nccl.h"

/* AllReduce, Reduce and ReduceScatter in every datatype (every operation,
 * PreMulSum included, on int32, float32 and bfloat16; sum on the others);
 * Broadcast, AllGather, AlltoAll, Gather and Scatter on int8, int32 and
 * float64; each at two counts, in place and out of place, roots taking
 * turns; then a group of sends and receives with every rank. Adds each
 * check to *passed or *failed, printing a failure with `what` and the
 * rank. Returns 1 while the communicator works, 0 once a call failed (the
 * rest is skipped). */
int every_coll(ncclComm_t comm, const char* what, long* passed, long* failed);

/* Where a caller's buffers live instead of host memory (device memory):
 * how to get and give back `bytes`, copy either way, and wait for `stream`
 * (what the calls are given); each returns 0 on success. */
struct every_mem {
  void* (*alloc)(size_t bytes);
  void (*release)(void* p);
  int (*copy)(void* dst, const void* src, size_t bytes);
  int (*sync)(void* stream);
  void* stream;
};

/* every_coll on buffers from `mem` (NULL: host memory). */
int every_coll_mem(ncclComm_t comm, const char* what, const struct every_mem* mem, long* passed,
                   long* failed);

#endif
