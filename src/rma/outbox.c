/* The outbox: puts that CUDA host functions hand over (device data staged
 * in pinned memory, and signals of device puts), copied into a queue per
 * peer and sent by the service thread. A host function thus returns at
 * once: while one runs, CUDA holds a lock of its own that every allocation
 * of pinned memory in the process waits for, so a host function that waited
 * for its peer's service thread, itself waiting for such an allocation,
 * stopped both ranks (docs/design.md, "One-sided operations on device
 * buffers"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call/doorbell.h"
#include "rma/internal.h"
#include "rma/wire.h"
#include "util/check.h"
#include "util/log.h"
#include "util/socket.h"

/* One record into a slot: header, then the piece of payload. */
void tutti_rma_write_record(void* slot, int is_signal, int last, int sig, int ctx, uint32_t win_id,
                            uint64_t offset, const void* src, size_t piece, uint64_t seq) {
  struct tutti_rma_rec* rec = slot;
  memset(rec, 0, sizeof *rec);
  rec->magic = TUTTI_RMA_MAGIC;
  rec->kind = is_signal ? TUTTI_RMA_REC_SIGNAL : TUTTI_RMA_REC_PUT;
  rec->last = (uint8_t)last;
  rec->sig = (uint16_t)sig;
  rec->ctx = (uint16_t)ctx;
  rec->win_id = win_id;
  rec->offset = offset;
  rec->bytes = piece;
  rec->op_seq = seq;
  if (piece > 0) {
    memcpy((char*)slot + TUTTI_RMA_REC_BYTES, src, piece);
  }
}

/* Slots sent to one peer before looking at the next. */
#define OUT_SLOTS_PER_TURN 4

ncclResult_t tutti_rma_post_put(struct tutti_rma* r, int peer, uint32_t win_id, uint64_t offset,
                                const void* src, size_t bytes, int sig, int ctx, int with_signal) {
  if (bytes == 0 && !with_signal) {
    return ncclSuccess;
  }
  struct tutti_rma_msg* m = malloc(sizeof *m + bytes);
  if (m == NULL) {
    return tutti_error(ncclSystemError,
                       "rank %d: out of host memory holding a put of %zu bytes to rank %d until "
                       "it is sent",
                       r->s.rank, bytes, peer);
  }
  memset(m, 0, sizeof *m);
  m->offset = offset;
  m->bytes = bytes;
  m->win_id = win_id;
  m->sig = sig;
  m->ctx = ctx;
  m->with_signal = with_signal;
  m->is_signal = src == NULL && bytes == 0;
  if (bytes > 0) {
    memcpy(m->data, src, bytes);
  }
  struct tutti_rma_out* o = &r->out[peer];
  pthread_mutex_lock(&o->lock);
  m->seq = ++o->seq;
  if (o->end == NULL) {
    o->head = m;
    o->since = tutti_socket_now();
  } else {
    o->end->next = m;
  }
  o->end = m;
  pthread_mutex_unlock(&o->lock);
  /* The service thread may be asleep on the doorbell. */
  tutti_rma_wake(&r->s.bell->ring, &r->s.bell->sleeping);
  return ncclSuccess;
}

/* Sends what fits of peer p's outbox: 1 when a slot went out. Holds its lock. */
static int pump_peer(struct tutti_rma* r, int p) {
  struct tutti_rma_out* o = &r->out[p];
  struct tutti_conn* c = r->s.send[p];
  int moved = 0;
  for (int k = 0; k < OUT_SLOTS_PER_TURN && o->head != NULL; k++) {
    struct tutti_rma_msg* m = o->head;
    void* slot = c->ops->send_begin(c);
    if (slot == NULL) {
      break;
    }
    const size_t piece = m->bytes - m->done < r->payload ? m->bytes - m->done : r->payload;
    tutti_rma_write_record(slot, m->is_signal, m->with_signal && m->done + piece == m->bytes,
                           m->sig, m->ctx, m->win_id, m->offset + m->done, m->data + m->done, piece,
                           m->seq);
    c->ops->send_end(c, TUTTI_RMA_REC_BYTES + piece);
    m->done += piece;
    moved = 1;
    if (m->done == m->bytes) {
      o->head = m->next;
      o->end = o->head == NULL ? NULL : o->end;
      free(m);
    }
  }
  return moved;
}

int tutti_rma_pump_out(struct tutti_rma* r) {
  int moved = 0;
  for (int p = 0; p < r->s.nranks; p++) {
    struct tutti_rma_out* o = &r->out[p];
    if (p == r->s.rank || __atomic_load_n(&o->head, __ATOMIC_ACQUIRE) == NULL) {
      continue;
    }
    pthread_mutex_lock(&o->lock);
    if (pump_peer(r, p)) {
      o->since = tutti_socket_now();
      moved = 1;
    }
    pthread_mutex_unlock(&o->lock);
  }
  return moved;
}

static void out_free(struct tutti_rma_out* o) {
  while (o->head != NULL) {
    struct tutti_rma_msg* m = o->head;
    o->head = m->next;
    free(m);
  }
  o->end = NULL;
}

int tutti_rma_out_check(struct tutti_rma* r, double now, char* why, size_t len) {
  const int aborted = __atomic_load_n(r->s.abort_flag, __ATOMIC_ACQUIRE) != 0;
  int failed = 0;
  for (int p = 0; p < r->s.nranks && !failed; p++) {
    struct tutti_rma_out* o = &r->out[p];
    if (p == r->s.rank || __atomic_load_n(&o->head, __ATOMIC_ACQUIRE) == NULL) {
      continue;
    }
    pthread_mutex_lock(&o->lock);
    const struct tutti_rma_msg* m = o->head;
    const char* gone = r->s.peer_bells[p] != NULL ? tutti_doorbell_gone(r->s.peer_bells[p]) : NULL;
    char who[192];
    if (m != NULL && !aborted && (gone != NULL || now - o->since > r->s.timeout_s)) {
      tutti_rma_name_peer(r, p, who, sizeof who);
      if (gone != NULL) {
        snprintf(why, len,
                 "%s %s while rank %d puts to it (operation #%llu, %zu of %zu bytes sent)", who,
                 gone, r->s.rank, (unsigned long long)m->seq, m->done, m->bytes);
      } else {
        snprintf(why, len,
                 "a put from rank %d made no progress for %.0f s (TUTTI_TIMEOUT): %s read "
                 "nothing of what this rank sent it (operation #%llu, %zu of %zu bytes sent); "
                 "is it alive?",
                 r->s.rank, r->s.timeout_s, who, (unsigned long long)m->seq, m->done, m->bytes);
      }
      failed = 1;
    }
    if (aborted || failed) {
      out_free(o);
    }
    pthread_mutex_unlock(&o->lock);
  }
  return failed;
}

void tutti_rma_out_drain(struct tutti_rma* r) {
  const double t0 = tutti_socket_now();
  for (;;) {
    int pending = 0;
    for (int p = 0; p < r->s.nranks && !pending; p++) {
      pending = __atomic_load_n(&r->out[p].head, __ATOMIC_ACQUIRE) != NULL;
    }
    if (!pending || __atomic_load_n(&r->failed, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(r->s.abort_flag, __ATOMIC_ACQUIRE) ||
        tutti_socket_now() - t0 > r->s.timeout_s) {
      break;
    }
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  for (int p = 0; p < r->s.nranks; p++) {
    pthread_mutex_lock(&r->out[p].lock);
    out_free(&r->out[p]);
    pthread_mutex_unlock(&r->out[p].lock);
  }
}
