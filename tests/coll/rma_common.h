/* What the one-sided tests share: the byte every put writes (every byte
 * known), per-rank pass/fail counts (ranks may be threads), a barrier, and
 * a communicator created with numRmaCtx contexts. */
#ifndef TUTTI_TEST_RMA_COMMON_H
#define TUTTI_TEST_RMA_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nccl.h"

#define RMA_SENTINEL 0xA5 /* every window byte no put wrote */

struct rma_rank {
  ncclComm_t comm;
  int n, r;
  long passed, failed;
};

#define RFAIL(t, ...)                                \
  do {                                               \
    (t)->failed++;                                   \
    fprintf(stderr, "rank %d/%d: ", (t)->r, (t)->n); \
    fprintf(stderr, __VA_ARGS__);                    \
    fputc('\n', stderr);                             \
  } while (0)

#define RCHECK(t, cond, ...)   \
  do {                         \
    if (cond) {                \
      (t)->passed++;           \
    } else {                   \
      RFAIL((t), __VA_ARGS__); \
    }                          \
  } while (0)

/* The i-th byte `origin` puts into `target` in operation `tag`. */
static inline uint8_t rma_pat(int origin, int target, uint32_t tag, size_t i) {
  uint32_t x = (uint32_t)origin * 0x9E3779B1u ^ (uint32_t)target * 0x85EBCA77u ^ tag * 0xC2B2AE3Du ^
               (uint32_t)i * 0x27D4EB2Fu ^ (uint32_t)(i >> 32);
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  return (uint8_t)x;
}

static inline void rma_fill(void* buf, int origin, int target, uint32_t tag, size_t bytes) {
  uint8_t* b = buf;
  for (size_t i = 0; i < bytes; i++) {
    b[i] = rma_pat(origin, target, tag, i);
  }
}

static inline ncclResult_t rma_barrier(ncclComm_t comm) {
  int32_t one = 1;
  return ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL);
}

static inline double rma_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline ncclResult_t rma_comm(ncclComm_t* comm, int n, ncclUniqueId id, int r, int nctx) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.numRmaCtx = nctx;
  return ncclCommInitRankConfig(comm, n, id, r, &cfg);
}

#endif
