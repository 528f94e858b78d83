/* A proxy: a thread that owns the far end of its peers' private slot
 * queues and moves them over something the executor cannot touch (TCP
 * sockets, transport/tcp_proxy.c; a network, net/transport/proxy.c). This
 * is what every proxy shares, written once: the thread's start, its loop
 * with the idle policy (announce, look once more, sleep) and its stop
 * (proxy.c); a peer's two queues, the executor's ends of them, which wake
 * the thread, and the peer's stand-in doorbell (proxy_peer.c). Each proxy
 * supplies its own per-pass work (struct tutti_proxy_ops). */
#ifndef TUTTI_TRANSPORT_PROXY_H
#define TUTTI_TRANSPORT_PROXY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/fifo.h"
#include "transport/transport.h"

struct tutti_proxy;

/* What a proxy does in a pass of its loop. */
struct tutti_proxy_ops {
  const char* what;   /* "TCP", "network": in error texts ("the TCP proxy thread") */
  const char* thread; /* the thread's name */
  double spin_s;      /* keep passing this long after the last move before sleeping */
  /* One pass over every peer, `leaving` 0, 1 (flush and say goodbye) or 2
   * (aborting); non-zero when anything moved. */
  int (*pump)(struct tutti_proxy* px, int leaving);
  /* Leaving: whether everything owed to peers is out. */
  int (*flushed)(const struct tutti_proxy* px);
  /* Whether work is due that must not wait for a sleep (NULL: none). */
  int (*busy)(const struct tutti_proxy* px, int leaving);
  /* After every pass, with the time (NULL: nothing): liveness checks. */
  void (*tick)(struct tutti_proxy* px, int leaving, double now);
  /* The thread announced that it may sleep (`sleeping`): look once more,
   * then block until poked (the eventfd), until something the proxy waits
   * on is ready, or for a while that may grow with `idle_s`, the time since
   * the last move. Non-zero when the last look moved something. */
  int (*idle)(struct tutti_proxy* px, int leaving, double idle_s);
  /* Leaving the loop after the flush (NULL: nothing). */
  void (*finish)(struct tutti_proxy* px);
  /* Aborting, instead of any pass (NULL: aborting passes once as when
   * leaving, then finishes). */
  void (*abort)(struct tutti_proxy* px);
};

/* One thread serving some peers of a communicator; a proxy embeds it first. */
struct tutti_proxy {
  const struct tutti_proxy_ops* ops;
  pthread_t thread;
  int started;
  int evfd;              /* the rank pokes it when it posts, frees or waits (-1: none yet) */
  uint32_t sleeping;     /* set while the thread may block */
  uint32_t stop;         /* 1: flush and say goodbye; 2: abort */
  uint32_t leave_reason; /* the goodbyes' reason (a `lost` word), set before stop */
  double flush_s;        /* on stop: give up flushing after this long without progress */
  int rank;
  const struct tutti_peer_info* peers;
  struct tutti_doorbell* rank_bell;
};

/* Starts the thread (an eventfd first); the proxy is set up and served. */
ncclResult_t tutti_proxy_start(struct tutti_proxy* px);
/* Lets the thread send what the rank posted and a goodbye to every peer
 * (for at most px->flush_s without progress), or with `abort` flush
 * nothing, then joins it and closes the eventfd. */
void tutti_proxy_stop(struct tutti_proxy* px, int abort);
/* Wakes the thread (poke: whether or not it sleeps; wake: only when it
 * announced that it may, after the caller's store of what it must see). */
void tutti_proxy_poke(struct tutti_proxy* px);
void tutti_proxy_wake(struct tutti_proxy* px);

/* A peer a proxy serves: its private queues (one mapping, both ways), the
 * executor's two connections over them, and its stand-in doorbell. A
 * proxy's own peer embeds it first, as `base`. */
struct tutti_proxy_peer {
  int rank;
  struct tutti_proxy* px; /* the thread that serves it */
  int poke_empty;         /* a receive that finds nothing pokes the thread (it polls) */
  /* The executor's ends of the two queues; their ops wrap the fifo's. */
  struct tutti_fifo_conn send_end;
  struct tutti_fifo_conn recv_end;
  const struct tutti_conn_ops* fifo_ops;
  void* mem; /* both queues, then `extra` bytes of the proxy's own */
  size_t mem_bytes;
  struct tutti_fifo* sq; /* rank -> far end */
  struct tutti_fifo* rq; /* far end -> rank */
  void* extra;
  uint32_t nslots;
  size_t slot_bytes;
  int gone; /* reported lost or departed: nothing more to report */
  /* The calling thread's own path, where the proxy offers one (NULL:
   * none; TCP's, tcp_direct.c). direct_send, after each post: moves it from
   * the calling thread when nothing else is in flight; 1 when the thread
   * has nothing left to do for it (no poke needed). direct_recv, when a
   * receive finds nothing or the caller waits for the peer's call: reads
   * what has come; 1 when anything did. */
  int (*direct_send)(struct tutti_proxy_peer* p);
  int (*direct_recv)(struct tutti_proxy_peer* p);
  /* With direct_recv: non-zero while the thread waits for the rank to free
   * a receive slot (stored before its last look at the queue's tail), so
   * that only such a free pokes it. */
  uint32_t want_free;
  /* The executor's view of this peer (tc->peer_bells[rank]): lost,
   * departed, its calls and failure as the far end sent them. */
  struct tutti_doorbell bell;
};

/* Maps the queues of the geometry of `buffsize` (zeroed) and `extra` more
 * bytes, and makes the executor's two connections. */
ncclResult_t tutti_proxy_peer_init(struct tutti_proxy_peer* p, int rank, size_t buffsize,
                                   size_t extra, int poke_empty);
/* Unmaps them (the thread must be stopped). */
void tutti_proxy_peer_free(struct tutti_proxy_peer* p);
/* Slot k of queue q. */
static inline char* tutti_proxy_slot(const struct tutti_proxy_peer* p, struct tutti_fifo* q,
                                     uint64_t k) {
  return (char*)q + TUTTI_FIFO_HEADER + (size_t)(k % p->nslots) * p->slot_bytes;
}
/* Frees to the rank, in order, the slots from *tail (below `end`) whose
 * sends are done (done[k % nslots], cleared as they go): the send queue's
 * tail moves and the rank is woken. 1 when any was freed. */
int tutti_proxy_peer_sent(struct tutti_proxy_peer* p, uint8_t* done, uint64_t* tail, uint64_t end);
/* Gives the executor the peer's connections (shown as `via`) and its
 * stand-in bell, which shows the calls the far end sends. */
void tutti_proxy_peer_attach(struct tutti_proxy_peer* p, struct tutti_transport_comm* tc,
                             const char* via);
/* Takes them back, where they are still this peer's. */
void tutti_proxy_peer_detach(struct tutti_proxy_peer* p, struct tutti_transport_comm* tc);

/* The peer's connection broke (errno `err`, 0: closed without a goodbye):
 * it is gone, its stand-in bell says so (`lost`, this bell's own), the
 * rank's bell keeps it as its first cause, a WARN says `why` (and over
 * which network, when `over` is not NULL), and the rank is woken. */
void tutti_proxy_peer_lost(struct tutti_proxy_peer* p, int err, const char* over, const char* why);
/* The peer left with a goodbye: its stand-in bell shows it departed, with
 * the goodbye's reason (0: none), and the rank is woken. */
void tutti_proxy_peer_left(struct tutti_proxy_peer* p, uint32_t reason);

#endif
