/* The landing's producer side (land.h): records appended by the service
 * thread into chunks of pinned memory the GPU maps, chunks reused once the
 * reader (a kernel, land.cuh) has moved past them. Plain C with no CUDA
 * call but the chunk allocator it is given, so that the protocol is tested
 * on the CPU with a reader thread (unit.land). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/rma/land.h"
#include "util/check.h"
#include "util/log.h"

static uint64_t round_rec(uint64_t n) {
  return (n + TD_LAND_REC - 1) / TD_LAND_REC * TD_LAND_REC;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A new chunk of `size` bytes: its index, or -1 with the error set. */
static int chunk_new(struct td_land* l, uint64_t size) {
  if (l->nchunks == l->cap_chunks) {
    const int cap = l->cap_chunks ? 2 * l->cap_chunks : 8;
    struct td_land_chunk* c = realloc(l->chunks, (size_t)cap * sizeof *c);
    if (c == NULL) {
      tutti_error(ncclSystemError, "out of host memory for the one-sided landing");
      return -1;
    }
    l->chunks = c;
    l->cap_chunks = cap;
  }
  struct td_land_chunk* c = &l->chunks[l->nchunks];
  memset(c, 0, sizeof *c);
  if (l->alloc(size, &c->host, &c->dev) != 0) {
    return -1;
  }
  c->size = size;
  l->held += size;
  INFO(TUTTI_ALLOC, "rank %d: one-sided landing: chunk %d of %llu bytes (pinned host; %llu in all)",
       l->rank, l->nchunks, (unsigned long long)size, (unsigned long long)l->held);
  return l->nchunks++;
}

ncclResult_t td_land_start(struct td_land* l, size_t max_payload) {
  pthread_mutex_init(&l->lock, NULL);
  /* A chunk holds the largest record and a JUMP after it. */
  const uint64_t one = round_rec(TD_LAND_REC + 16 + max_payload) + TD_LAND_REC;
  const uint64_t chunk = one > TD_LAND_CHUNK ? one : TD_LAND_CHUNK;
  const uint64_t n = l->limit / chunk > 2 ? l->limit / chunk : 2;
  for (uint64_t i = 0; i < n; i++) {
    if (chunk_new(l, chunk) < 0) {
      return ncclSystemError;
    }
  }
  l->chunks[0].in_use = 1;
  l->cur = 0;
  l->tail = 0;
  return ncclSuccess;
}

void td_land_stop(struct td_land* l) {
  for (int i = 0; i < l->nchunks; i++) {
    l->release(l->chunks[i].host);
  }
  free(l->chunks);
  l->chunks = NULL;
  l->nchunks = l->cap_chunks = 0;
  l->held = 0;
  pthread_mutex_destroy(&l->lock);
}

/* Marks chunks the reader has left as free again. */
static void reclaim(struct td_land* l) {
  const uint64_t head = __atomic_load_n(&l->ctl->head, __ATOMIC_ACQUIRE);
  for (int i = 0; i < l->nchunks; i++) {
    struct td_land_chunk* c = &l->chunks[i];
    if (c->in_use && i != l->cur && head >= c->base + c->size) {
      c->in_use = 0;
    }
  }
}

/* A free chunk for `need` bytes and a JUMP: its index, -1 when none is free now. */
static int chunk_take(struct td_land* l, uint64_t need) {
  reclaim(l);
  for (int i = 0; i < l->nchunks; i++) {
    if (!l->chunks[i].in_use && l->chunks[i].size >= need + TD_LAND_REC) {
      return i;
    }
  }
  return -1;
}

/* Room for `need` bytes at the tail, moving to another chunk (a JUMP
 * record) when the current one cannot hold them and one more header (so
 * that a JUMP always fits): 1 when there is room, 0 when the reader must
 * free a chunk first. */
static int make_room(struct td_land* l, uint64_t need) {
  struct td_land_chunk* c = &l->chunks[l->cur];
  if (l->tail - c->base + need + TD_LAND_REC <= c->size) {
    return 1;
  }
  const int n = chunk_take(l, need);
  if (n < 0) {
    return 0;
  }
  c = &l->chunks[l->cur]; /* chunk_take may have moved the array */
  struct td_land_chunk* nc = &l->chunks[n];
  nc->base = c->base + c->size;
  nc->in_use = 1;
  struct td_land_rec* j = (struct td_land_rec*)(c->host + (l->tail - c->base));
  memset(j, 0, sizeof *j);
  j->kind = TD_LAND_JUMP;
  j->size = c->base + c->size - l->tail;
  j->next = (uint64_t)(uintptr_t)nc->dev;
  j->next_pos = nc->base;
  l->cur = n;
  l->tail = nc->base;
  /* The JUMP is published with the record that follows it. */
  return 1;
}

/* Writes one record at the tail (room made). */
static void append(struct td_land* l, int origin, uint32_t kind, uint32_t index, char* dst,
                   const void* src, size_t bytes, uint32_t lead, uint64_t size) {
  struct td_land_chunk* c = &l->chunks[l->cur];
  char* at = c->host + (l->tail - c->base);
  struct td_land_rec* rec = (struct td_land_rec*)at;
  memset(rec, 0, sizeof *rec);
  rec->kind = kind;
  rec->index = index;
  rec->size = size;
  rec->lead = lead;
  rec->origin = (uint32_t)origin;
  if (kind == TD_LAND_DATA) {
    rec->bytes = bytes;
    rec->dst = (uint64_t)(uintptr_t)dst;
    memcpy(at + TD_LAND_REC + lead, src, bytes);
  }
  l->tail += size;
  l->records++;
}

int td_land_offer(struct td_land* l, int origin, char* dst, const void* src, size_t bytes,
                  int64_t sig_index) {
  const uint32_t lead = bytes > 0 ? (uint32_t)((uintptr_t)dst % 16) : 0;
  const uint64_t data = bytes > 0 ? round_rec(TD_LAND_REC + lead + bytes) : 0;
  const uint64_t sig = sig_index >= 0 ? TD_LAND_REC : 0;
  pthread_mutex_lock(&l->lock);
  /* Both in one chunk, so that a signal is never appended without its data. */
  if (!make_room(l, data + sig)) {
    const double now = now_s();
    l->full_since = l->full_since == 0 ? now : l->full_since;
    const double held = now - l->full_since;
    pthread_mutex_unlock(&l->lock);
    if (__atomic_load_n(l->abort_flag, __ATOMIC_ACQUIRE)) {
      tutti_error(ncclRemoteError,
                  "rank %d: a put from rank %d could not land: the communicator's device work "
                  "was stopped",
                  l->rank, origin);
      return -1;
    }
    if (held > l->timeout_s) {
      tutti_error(ncclRemoteError,
                  "rank %d holds %llu bytes of one-sided data (TUTTI_TUNE rma.landing) that no "
                  "ncclWaitSignal of this rank took within %.0f s (TUTTI_TIMEOUT); a put from "
                  "rank %d waits for room: wait for the signals of what peers put here, or "
                  "raise rma.landing",
                  l->rank, (unsigned long long)l->held, l->timeout_s, origin);
      return -1;
    }
    return 0;
  }
  l->full_since = 0;
  if (data > 0) {
    append(l, origin, TD_LAND_DATA, 0, dst, src, bytes, lead, data);
  }
  if (sig > 0) {
    append(l, origin, TD_LAND_SIGNAL, (uint32_t)sig_index, NULL, NULL, 0, 0, sig);
  }
  /* Release: the reader that sees the tail sees the records before it. */
  __atomic_store_n(&l->ctl->tail, l->tail, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&l->lock);
  return 1;
}

int td_land_drop(struct td_land* l, const char* lo, const char* hi) {
  pthread_mutex_lock(&l->lock);
  int dropped = 0;
  uint64_t pos = __atomic_load_n(&l->ctl->head, __ATOMIC_ACQUIRE);
  while (pos < l->tail) {
    struct td_land_chunk* c = NULL;
    for (int i = 0; i < l->nchunks && c == NULL; i++) {
      struct td_land_chunk* k = &l->chunks[i];
      c = k->in_use && pos >= k->base && pos < k->base + k->size ? k : NULL;
    }
    if (c == NULL) {
      break; /* the reader moved on meanwhile */
    }
    volatile struct td_land_rec* rec = (volatile struct td_land_rec*)(c->host + (pos - c->base));
    if (rec->kind == TD_LAND_JUMP) {
      pos = rec->next_pos;
      continue;
    }
    const char* dst = (const char*)(uintptr_t)rec->dst;
    if (rec->kind == TD_LAND_DATA && dst < hi && dst + rec->bytes > lo) {
      rec->kind = TD_LAND_SKIP; /* a reader already past the header copies on: see land.h */
      dropped++;
    }
    pos += rec->size;
  }
  pthread_mutex_unlock(&l->lock);
  return dropped;
}

uint64_t td_land_bytes(const struct td_land* l) {
  return l->held + sizeof *l->ctl;
}
