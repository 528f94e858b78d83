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

/* The part of a block [off, off + len) that round `round` moves when each
 * round moves at most `chunk` elements of every block (chunk 0: all). */
static inline void tutti_round_slice(size_t off, size_t len, size_t round, size_t chunk,
                                     size_t* roff, size_t* rlen) {
  if (chunk == 0) {
    *roff = off;
    *rlen = round == 0 ? len : 0;
    return;
  }
  size_t start = round * chunk;
  *roff = off + (start < len ? start : len);
  *rlen = start < len ? (len - start < chunk ? len - start : chunk) : 0;
}

/* Rounds needed to move blocks of at most `maxlen` elements, at least one. */
static inline size_t tutti_rounds(size_t maxlen, size_t chunk) {
  if (chunk == 0 || maxlen == 0) {
    return 1;
  }
  return (maxlen + chunk - 1) / chunk;
}

/* Chunk in elements from chunk_bytes and the element size (0 stays 0). */
static inline size_t tutti_chunk_elems(size_t chunk_bytes, size_t elem_size) {
  if (chunk_bytes == 0) {
    return 0;
  }
  size_t c = chunk_bytes / elem_size;
  return c == 0 ? 1 : c;
}

#endif
