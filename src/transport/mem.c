/* In-process queues between ranks simulated in one thread: the schedules'
 * test bed. Same slot queues as shared memory, on the heap. */
#include <stdlib.h>
#include <unistd.h>

#include "transport/cma.h"
#include "transport/fifo.h"
#include "transport/mem.h"
#include "util/check.h"

struct tutti_mem_world {
  int nranks;
  uint32_t nslots;
  size_t slot_bytes;
  void* queues;                 /* nranks * nranks queues, [from][to] */
  struct tutti_fifo_conn* ends; /* [from][to] send end, then [to][from] recv end */
  struct tutti_conn** send;     /* [rank][peer] */
  struct tutti_conn** recv;
};

ncclResult_t tutti_mem_world_create(int nranks, size_t buffsize, struct tutti_mem_world** out) {
  struct tutti_mem_world* w = calloc(1, sizeof *w);
  if (w == NULL) {
    return tutti_error(ncclSystemError, "out of memory");
  }
  w->nranks = nranks;
  tutti_fifo_geometry(buffsize, &w->nslots, &w->slot_bytes);
  size_t qbytes = tutti_fifo_bytes(w->nslots, w->slot_bytes);
  size_t nq = (size_t)nranks * (size_t)nranks;
  w->queues = calloc(nq, qbytes);
  w->ends = calloc(2 * nq, sizeof *w->ends);
  w->send = calloc(nq, sizeof *w->send);
  w->recv = calloc(nq, sizeof *w->recv);
  if (w->queues == NULL || w->ends == NULL || w->send == NULL || w->recv == NULL) {
    tutti_mem_world_destroy(w);
    return tutti_error(ncclSystemError, "out of memory");
  }
  for (int from = 0; from < nranks; from++) {
    for (int to = 0; to < nranks; to++) {
      size_t q = (size_t)from * (size_t)nranks + (size_t)to;
      struct tutti_fifo_conn* s = &w->ends[2 * q];
      struct tutti_fifo_conn* r = &w->ends[2 * q + 1];
      tutti_fifo_conn_init(s, r, (char*)w->queues + q * qbytes, w->nslots, w->slot_bytes, to, from,
                           NULL, NULL);
      s->base.mem = r->base.mem = tutti_cma_ops((int32_t)getpid()); /* ranks are threads */
      w->send[(size_t)from * (size_t)nranks + (size_t)to] = &s->base;
      w->recv[(size_t)to * (size_t)nranks + (size_t)from] = &r->base;
    }
  }
  *out = w;
  return ncclSuccess;
}

struct tutti_conn** tutti_mem_world_send(struct tutti_mem_world* w, int rank) {
  return &w->send[(size_t)rank * (size_t)w->nranks];
}

struct tutti_conn** tutti_mem_world_recv(struct tutti_mem_world* w, int rank) {
  return &w->recv[(size_t)rank * (size_t)w->nranks];
}

size_t tutti_mem_world_piece(const struct tutti_mem_world* w) {
  return w->slot_bytes;
}

void tutti_mem_world_destroy(struct tutti_mem_world* w) {
  if (w == NULL) {
    return;
  }
  free(w->queues);
  free(w->ends);
  free(w->send);
  free(w->recv);
  free(w);
}
