/* Slot queues (see fifo.h). Ordering: the sender writes the data and the
 * size, then publishes head; the receiver reads head, then the data. The same
 * for tail in the other direction. head and tail are sequentially consistent
 * (not just release/acquire) because they also take part in the doorbell's
 * store-then-load handshake with a sleeping peer (call/doorbell.h). */
#include "transport/fifo.h"

#include <string.h>

#include "util/check.h"

size_t tutti_fifo_bytes(uint32_t nslots, size_t slot_bytes) {
  return TUTTI_FIFO_HEADER + (size_t)nslots * slot_bytes;
}

void tutti_fifo_geometry(size_t buffsize, uint32_t* nslots, size_t* slot_bytes) {
  uint32_t n = 8;
  size_t slot = buffsize / n;
  /* Slots are whole pages so that every piece starts page- and vector-aligned. */
  slot = (slot + 4095) & ~(size_t)4095;
  if (slot < 4096) {
    slot = 4096;
  }
  *nslots = n;
  *slot_bytes = slot;
}

static void* fifo_send_begin(struct tutti_conn* c) {
  struct tutti_fifo_conn* f = (struct tutti_fifo_conn*)c;
  if (f->pos - f->seen >= f->nslots) {
    f->seen = __atomic_load_n(&f->fifo->tail, __ATOMIC_SEQ_CST);
    if (f->pos - f->seen >= f->nslots) {
      return NULL;
    }
  }
  return f->data + (f->pos % f->nslots) * f->base.slot_bytes;
}

static void fifo_send_end(struct tutti_conn* c, size_t bytes) {
  struct tutti_fifo_conn* f = (struct tutti_fifo_conn*)c;
  f->fifo->sizes[f->pos % f->nslots] = (uint32_t)bytes;
  f->pos++;
  __atomic_store_n(&f->fifo->head, f->pos, __ATOMIC_SEQ_CST);
  tutti_doorbell_ring(f->wake);
}

static const void* fifo_recv_begin(struct tutti_conn* c, size_t* bytes) {
  struct tutti_fifo_conn* f = (struct tutti_fifo_conn*)c;
  if (f->pos == f->seen) {
    f->seen = __atomic_load_n(&f->fifo->head, __ATOMIC_SEQ_CST);
    if (f->pos == f->seen) {
      return NULL;
    }
  }
  *bytes = f->fifo->sizes[f->pos % f->nslots];
  return f->data + (f->pos % f->nslots) * f->base.slot_bytes;
}

static void fifo_recv_end(struct tutti_conn* c) {
  struct tutti_fifo_conn* f = (struct tutti_fifo_conn*)c;
  f->pos++;
  __atomic_store_n(&f->fifo->tail, f->pos, __ATOMIC_SEQ_CST);
  tutti_doorbell_ring(f->wake);
}

static int fifo_send_idle(struct tutti_conn* c) {
  struct tutti_fifo_conn* f = (struct tutti_fifo_conn*)c;
  if (f->seen != f->pos) {
    f->seen = __atomic_load_n(&f->fifo->tail, __ATOMIC_SEQ_CST);
  }
  return f->seen == f->pos;
}

static const struct tutti_conn_ops fifo_ops = {
    .send_begin = fifo_send_begin,
    .send_end = fifo_send_end,
    .recv_begin = fifo_recv_begin,
    .recv_end = fifo_recv_end,
    .send_idle = fifo_send_idle,
};

void tutti_fifo_conn_init(struct tutti_fifo_conn* send, struct tutti_fifo_conn* recv, void* mem,
                          uint32_t nslots, size_t slot_bytes, int send_peer, int recv_peer,
                          struct tutti_doorbell* recv_bell, struct tutti_doorbell* send_bell) {
  struct tutti_fifo_conn* ends[2] = {send, recv};
  for (int i = 0; i < 2; i++) {
    struct tutti_fifo_conn* f = ends[i];
    if (f == NULL) {
      continue;
    }
    memset(f, 0, sizeof *f);
    f->base.ops = &fifo_ops;
    f->base.peer = i == 0 ? send_peer : recv_peer;
    f->base.slot_bytes = slot_bytes;
    f->base.queue_bytes = slot_bytes * nslots;
    f->fifo = mem;
    f->data = (char*)mem + TUTTI_FIFO_HEADER;
    f->nslots = nslots;
    /* The sender wakes the receiver when it posts, and vice versa. */
    f->wake = i == 0 ? recv_bell : send_bell;
  }
}
