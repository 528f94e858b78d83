/* The landing: what the service thread receives for this rank's device
 * windows and signals, waiting in pinned host memory the GPU maps until a
 * kernel of this communicator applies it (land.cuh).
 *
 * Why not a copy issued by the service thread: a copy on a stream of its
 * own shares the GPU's few hardware queues with the application's streams
 * (CUDA_DEVICE_MAX_CONNECTIONS, fewer under MPS), and can sit behind work
 * that waits for the very wait kernel this copy would satisfy: a deadlock
 * that comes and goes with how streams fall onto queues. A kernel that
 * applies the records itself depends on nothing but the service thread.
 *
 * The records form one stream of bytes, counted from 0, in chunks of
 * pinned memory: each record is whole inside a chunk, a JUMP record sends
 * the reader on to the next chunk, and a chunk is used again once the
 * reader has left it. One producer (the service thread, under `lock`), one
 * reader at a time (the communicator's launches are ordered).
 *
 * Every chunk is allocated when the landing is made, none later: while any
 * CUDA host function of the process is pending, CUDA holds a lock that a
 * pinned allocation waits for (cuda-gdb: cuMemHostAlloc in
 * pthread_rwlock_wrlock, the host-function thread waiting in the driver),
 * and host functions of this rank may wait, through the stream, for the
 * very wait kernel that would read what the allocation was for. A full
 * landing refuses the record instead (td_land_offer returns 0): the service
 * thread leaves it in the service communicator's queue, goes on sending
 * what its host functions posted, and offers it again. */
#ifndef TUTTI_DEVICE_RMA_LAND_H
#define TUTTI_DEVICE_RMA_LAND_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records are multiples of this, and every chunk keeps room for one at its end. */
#define TD_LAND_REC 64
/* A chunk's size at least; larger when the largest record needs it. */
#define TD_LAND_CHUNK (4u << 20)

enum td_land_kind {
  TD_LAND_DATA = 1,   /* `bytes` at `dst` (device memory), payload after the header */
  TD_LAND_SIGNAL = 2, /* counter `index` rises by one */
  TD_LAND_JUMP = 3,   /* go on at `next` (the GPU's view), stream position `next_pos` */
  TD_LAND_SKIP = 4,   /* dropped (its window was deregistered): step over it */
};

/* A record's header; a DATA payload starts `lead` bytes after it, so that
 * it lies at the same address modulo 16 as its destination. */
struct td_land_rec {
  uint32_t kind;
  uint32_t index; /* SIGNAL: the counter (td_rma_index) */
  uint64_t size;  /* bytes of the stream this record takes, header included */
  uint64_t bytes; /* DATA: payload bytes */
  uint64_t dst;   /* DATA: where they go */
  uint64_t next;  /* JUMP: the next chunk */
  uint64_t next_pos;
  uint32_t lead;
  uint32_t origin; /* who sent it (for the reader's record of what arrived) */
  uint64_t pad;
};

/* The reader's place, in GPU memory: only the communicator's kernels touch it. */
struct td_land_cursor {
  uint64_t pos;
  uint64_t ptr; /* the record at `pos`, as the GPU sees it */
};

/* Where producer and reader meet, in mapped host memory, each word on a
 * line of its own: tail (written by the producer), head (by the reader). */
struct td_land_ctl {
  uint64_t tail;
  uint64_t pad0[7];
  uint64_t head;
  uint64_t pad1[7];
};

struct td_land_chunk {
  char* host;
  char* dev;
  uint64_t size;
  uint64_t base; /* its first position while in use */
  int in_use;
};

/* Pinned memory the GPU maps, for chunks: the device layer's (land.cu), or a
 * test's. 0 on success (*dev: the GPU's view); else the error is set. */
typedef int (*td_land_alloc_fn)(uint64_t bytes, char** host, char** dev);
typedef void (*td_land_release_fn)(char* host);

struct td_land {
  td_land_alloc_fn alloc;
  td_land_release_fn release;
  const int* abort_flag; /* non-zero: the communicator's device work stopped */
  double timeout_s;
  int rank;
  struct td_land_ctl* ctl; /* host view */
  struct td_land_ctl* ctl_dev;
  struct td_land_cursor* cursor; /* GPU memory (the caller's) */
  struct td_land_chunk* chunks;
  int nchunks, cap_chunks;
  int cur;           /* the chunk being written */
  uint64_t tail;     /* the producer's position */
  uint64_t held;     /* bytes of chunks allocated */
  uint64_t limit;    /* TUTTI_TUNE rma.landing: the chunks' bytes in all */
  uint64_t records;  /* records written (for logs) */
  double full_since; /* when a record was first refused for want of room (0: none is) */
  pthread_mutex_t lock;
};

/* Makes the landing: its control words, its chunks (land.cu), room for
 * records of up to `max_payload` bytes; sets the reader's `cursor` (GPU
 * memory of the caller's, which it frees). Call with the communicator's
 * GPU current. */
ncclResult_t td_land_init(struct td_land* l, uint64_t limit, size_t max_payload,
                          struct td_land_cursor* cursor, const int* abort_flag, double timeout_s,
                          int rank, const char** what);
void td_land_free(struct td_land* l);

/* The producer's side (land.c: no CUDA call but through `alloc`). */
/* Allocates the chunks (after ctl and cursor exist): `limit` bytes in all,
 * at least two chunks, each holding a record of `max_payload`. */
ncclResult_t td_land_start(struct td_land* l, size_t max_payload);
/* Releases every chunk. */
void td_land_stop(struct td_land* l);
/* Offers what `origin` put: `bytes` of `src` for `dst` (none when 0), then
 * signal counter `sig_index` (none when negative), appended together or
 * not at all. 1: appended; 0: no room now (offer it again later); -1: no
 * room for TUTTI_TIMEOUT, or the communicator stopped (the error set). */
int td_land_offer(struct td_land* l, int origin, char* dst, const void* src, size_t bytes,
                  int64_t sig_index);
/* Drops every record not yet applied whose data goes into [lo, hi): their
 * window is being deregistered. Returns how many. */
int td_land_drop(struct td_land* l, const char* lo, const char* hi);
/* Bytes of pinned host memory the landing holds. */
uint64_t td_land_bytes(const struct td_land* l);

#ifdef __cplusplus
}
#endif

#endif
