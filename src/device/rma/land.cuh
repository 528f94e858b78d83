/* The landing's reader (land.h): a block of a communicator's kernel applies
 * the records the service thread left in mapped host memory: data into
 * device windows, then signal counts. */
#ifndef TUTTI_DEVICE_RMA_LAND_CUH
#define TUTTI_DEVICE_RMA_LAND_CUH

#include <stdint.h>

#include "device/kernels/sync.cuh"
#include "device/rma/land.h"

/* What thread 0 read of the next record, shared with the block. */
struct td_land_next {
  uint32_t kind;
  uint32_t index;
  uint64_t size, bytes, dst, next, next_pos;
  uint32_t lead;
  const char* at; /* the record, as the GPU sees it */
};

/* Thread 0: whether a record waits at the cursor; reads its header into `n`.
 * Host memory the producer rewrites once the reader has moved on: loads
 * that bypass the caches (.cv), after the tail's acquire. */
__device__ __forceinline__ int td_land_peek(const td_land_ctl* ctl, const td_land_cursor* cur,
                                            td_land_next* n) {
  if (td_ld_acquire(&ctl->tail) <= cur->pos) {
    return 0;
  }
  const td_land_rec* r = (const td_land_rec*)(uintptr_t)cur->ptr;
  n->kind = __ldcv(&r->kind);
  n->index = __ldcv(&r->index);
  n->size = __ldcv((const unsigned long long*)&r->size);
  n->bytes = __ldcv((const unsigned long long*)&r->bytes);
  n->dst = __ldcv((const unsigned long long*)&r->dst);
  n->next = __ldcv((const unsigned long long*)&r->next);
  n->next_pos = __ldcv((const unsigned long long*)&r->next_pos);
  n->lead = __ldcv(&r->lead);
  n->at = (const char*)r;
  return 1;
}

/* Every thread of the block: the record's payload into its destination.
 * Source and destination agree modulo 16: bytes up to the destination's
 * alignment, then 16-byte words, four in flight per thread. */
__device__ __forceinline__ void td_land_copy(const td_land_next* n) {
  const char* src = n->at + TD_LAND_REC + n->lead;
  char* dst = (char*)(uintptr_t)n->dst;
  const uint64_t bytes = n->bytes;
  uint64_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  head = head < bytes ? head : bytes;
  const uint32_t t = threadIdx.x, nt = blockDim.x;
  if (t < head) {
    dst[t] = __ldcv((const signed char*)src + t);
  }
  const uint64_t words = (bytes - head) / 16;
  const int4* s4 = (const int4*)(src + head);
  int4* d4 = (int4*)(dst + head);
  uint64_t w = t;
  for (; w + 3 * nt < words; w += 4 * nt) {
    const int4 a = __ldcv(s4 + w), b = __ldcv(s4 + w + nt), c = __ldcv(s4 + w + 2 * nt),
               d = __ldcv(s4 + w + 3 * nt);
    d4[w] = a;
    d4[w + nt] = b;
    d4[w + 2 * nt] = c;
    d4[w + 3 * nt] = d;
  }
  for (; w < words; w += nt) {
    d4[w] = __ldcv(s4 + w);
  }
  const uint64_t done = head + words * 16;
  if (t < bytes - done) {
    dst[done + t] = __ldcv((const signed char*)src + done + t);
  }
}

/* Thread 0, after the block applied the record (and synchronized): counts
 * a signal, moves the cursor and tells the producer. */
__device__ __forceinline__ void td_land_done(td_land_ctl* ctl, td_land_cursor* cur,
                                             const td_land_next* n, uint64_t* landed) {
  if (n->kind == TD_LAND_SIGNAL) {
    /* The data before it is in place: this block wrote it, and the block
     * synchronized. Later kernels see it at their launch. */
    __threadfence();
    landed[n->index] += 1;
  }
  if (n->kind == TD_LAND_JUMP) {
    cur->pos = n->next_pos;
    cur->ptr = n->next;
  } else {
    cur->pos += n->size;
    cur->ptr += n->size;
  }
  td_st_release(&ctl->head, cur->pos);
}

#endif
