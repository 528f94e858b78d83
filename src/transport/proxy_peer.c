/* The tcp transport's peers (see proxy.h): their private queues, and the
 * executor's side of them, which wakes the proxy thread when it sleeps. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/proxy.h"
#include "util/check.h"

void tutti_proxy_poke(struct tutti_proxy* px) {
  uint64_t one = 1;
  ssize_t n = write(px->evfd, &one, sizeof one);
  (void)n; /* a full counter already means "wake up" */
}

/* The executor's side: the fifo's own operations, plus a poke when the
 * thread may be asleep. The queue counters are stored seq_cst and `sleeping`
 * is loaded seq_cst (and the other way round in the thread), so either the
 * thread sees the new slot or we see it sleeping. */
static struct tutti_proxy_peer* peer_of(struct tutti_conn* c, int recv) {
  size_t off = recv ? offsetof(struct tutti_proxy_peer, recv_end)
                    : offsetof(struct tutti_proxy_peer, send_end);
  return (struct tutti_proxy_peer*)((char*)c - off);
}

static void* conn_send_begin(struct tutti_conn* c) {
  return peer_of(c, 0)->fifo_ops->send_begin(c);
}

static void conn_send_end(struct tutti_conn* c, size_t bytes) {
  struct tutti_proxy_peer* p = peer_of(c, 0);
  p->fifo_ops->send_end(c, bytes);
  if (__atomic_load_n(&p->px->sleeping, __ATOMIC_SEQ_CST)) {
    tutti_proxy_poke(p->px);
  }
}

static const void* conn_recv_begin(struct tutti_conn* c, size_t* bytes) {
  return peer_of(c, 1)->fifo_ops->recv_begin(c, bytes);
}

static void conn_recv_end(struct tutti_conn* c) {
  struct tutti_proxy_peer* p = peer_of(c, 1);
  p->fifo_ops->recv_end(c);
  if (__atomic_load_n(&p->px->sleeping, __ATOMIC_SEQ_CST)) {
    tutti_proxy_poke(p->px);
  }
}

static const struct tutti_conn_ops proxy_conn_ops = {
    .send_begin = conn_send_begin,
    .send_end = conn_send_end,
    .recv_begin = conn_recv_begin,
    .recv_end = conn_recv_end,
};

ncclResult_t tutti_proxy_peer_init(struct tutti_proxy_peer* p, int rank, size_t buffsize,
                                   int nsocks, const int* fds) {
  memset(p, 0, sizeof *p);
  p->rank = rank;
  p->socks = calloc((size_t)nsocks, sizeof *p->socks);
  if (p->socks == NULL) {
    for (int s = 0; s < nsocks; s++) {
      close(fds[s]);
    }
    return tutti_error(ncclSystemError, "out of host memory for the sockets of rank %d", rank);
  }
  p->nsocks = nsocks;
  for (int s = 0; s < nsocks; s++) {
    struct tutti_proxy_sock* k = &p->socks[s];
    k->fd = fds[s];
    k->snext = k->rnext = (uint64_t)s;
    k->ready_in = k->ready_out = 1; /* optimistic: the first try tells */
  }
  tutti_fifo_geometry(buffsize, &p->nslots, &p->slot_bytes);
  const size_t q = tutti_fifo_bytes(p->nslots, p->slot_bytes);
  /* Anonymous pages: zeroed, and only touched once data moves. */
  p->mem = mmap(NULL, 2 * q, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p->mem == MAP_FAILED) {
    p->mem = NULL;
    return tutti_error(ncclSystemError, "cannot map %zu bytes of queues for rank %d: %s", 2 * q,
                       rank, strerror(errno));
  }
  p->mem_bytes = 2 * q;
  p->sq = p->mem;
  p->rq = (struct tutti_fifo*)((char*)p->mem + q);
  tutti_fifo_conn_init(&p->send_end, NULL, p->sq, p->nslots, p->slot_bytes, rank, -1, NULL, NULL);
  tutti_fifo_conn_init(NULL, &p->recv_end, p->rq, p->nslots, p->slot_bytes, -1, rank, NULL, NULL);
  p->fifo_ops = p->send_end.base.ops;
  p->send_end.base.ops = &proxy_conn_ops;
  p->recv_end.base.ops = &proxy_conn_ops;
  return ncclSuccess;
}

void tutti_proxy_peer_free(struct tutti_proxy_peer* p) {
  for (int s = 0; s < p->nsocks; s++) {
    close(p->socks[s].fd);
  }
  free(p->socks);
  p->socks = NULL;
  p->nsocks = 0;
  if (p->mem != NULL) {
    munmap(p->mem, p->mem_bytes);
    p->mem = NULL;
  }
}
