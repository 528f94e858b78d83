/* Filling and verifying each collective's buffers (the fill and verify
 * entries of the collectives table). Expected values are computed element by
 * element, so no third "expected" buffer is needed. */
#ifndef TUTTI_PERF_CHECK_H
#define TUTTI_PERF_CHECK_H

#include <stddef.h>

struct perf_images;

#define PERF_CHECK_DECL(name)                          \
  void perf_fill_##name(const struct perf_images* im); \
  size_t perf_verify_##name(const struct perf_images* im);

PERF_CHECK_DECL(allreduce)
PERF_CHECK_DECL(allgather)
PERF_CHECK_DECL(reducescatter)
PERF_CHECK_DECL(broadcast)
PERF_CHECK_DECL(reduce)
PERF_CHECK_DECL(alltoall)
PERF_CHECK_DECL(gather)
PERF_CHECK_DECL(scatter)
PERF_CHECK_DECL(sendrecv)

#endif
