/* Rank arithmetic shared by the algorithms: ring neighbours and the split of
 * a count into nearly equal blocks. Header-only, tested on its own. */
#ifndef TUTTI_ALGO_PATTERN_H
#define TUTTI_ALGO_PATTERN_H

#include <stddef.h>

static inline int tutti_ring_next(int rank, int nranks) {
  return (rank + 1) % nranks;
}

static inline int tutti_ring_prev(int rank, int nranks) {
  return (rank + nranks - 1) % nranks;
}

/* (r + k) mod n for any integer k. */
static inline int tutti_mod(int r, int k, int n) {
  int v = (r + k) % n;
  return v < 0 ? v + n : v;
}

/* Block b of `count` split into `nblocks` nearly equal parts: the first
 * count % nblocks blocks get one element more. */
static inline size_t tutti_block_off(size_t count, int nblocks, int b) {
  size_t q = count / (size_t)nblocks;
  size_t r = count % (size_t)nblocks;
  return (size_t)b * q + ((size_t)b < r ? (size_t)b : r);
}

static inline size_t tutti_block_len(size_t count, int nblocks, int b) {
  size_t q = count / (size_t)nblocks;
  size_t r = count % (size_t)nblocks;
  return q + ((size_t)b < r ? 1 : 0);
}

#endif
