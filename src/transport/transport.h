/* The connection interface and the transport table. A transport connects
 * two ranks with a pair of one-directional connections, each a queue of
 * fixed-size slots: the sender fills a slot and posts it, the receiver
 * reads it in place and frees it. The executor sees only struct tutti_conn;
 * it never knows which transport carries the bytes. Doorbells are
 * call/doorbell.h's, the board transport/board.h's, the peer table
 * topo/peer.h's. */
#ifndef TUTTI_TRANSPORT_TRANSPORT_H
#define TUTTI_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "call/doorbell.h"
#include "nccl.h"
#include "topo/peer.h"
#include "transport/board.h"

struct tutti_conn;
struct tutti_bootstrap;

struct tutti_conn_ops {
  /* Sender: a slot to fill (NULL when the queue is full), then post it. */
  void* (*send_begin)(struct tutti_conn* c);
  void (*send_end)(struct tutti_conn* c, size_t bytes);
  /* Receiver: the oldest posted slot and its size (NULL when none yet);
   * the data stays valid until recv_end frees the slot. */
  const void* (*recv_begin)(struct tutti_conn* c, size_t* bytes);
  void (*recv_end)(struct tutti_conn* c);
  /* Sender: non-zero once the receiver has freed every slot posted so far
   * (it has finished with what they pointed to). NULL where the queue's
   * far end is not the receiver itself (a proxy thread forwards it). */
  int (*send_idle)(struct tutti_conn* c);
  /* Receiver: the caller waits for this peer (its call record, say) with
   * nothing to receive: move what the transport can from this thread. NULL
   * where the far end needs no help (the peer writes the queue itself). */
  void (*drive)(struct tutti_conn* c);
};

/* Where a piece of a rank's buffer lies, as it offers it to a peer that
 * reads (or writes) it directly instead of through the queue: posted in one
 * queue slot of the connection to that peer (exec/pull.c). `claim`, in the
 * slot itself, is what both sides change: the reader sets it to its pid for
 * each piece it moves and back to OFFERED after; an offering rank that
 * fails sets it to WITHDRAWN (waiting out a piece in flight) before it
 * returns, so that no peer touches the buffer once its owner may free it. */
struct tutti_peer_buf {
  uint64_t addr;  /* in the offering process */
  uint64_t bytes; /* checked against what the reader expects */
  int32_t pid;    /* the offering process */
  uint32_t magic; /* TUTTI_PEER_BUF_MAGIC: a slot of data here means mismatched calls */
  uint32_t claim; /* TUTTI_PEER_BUF_OFFERED, the reader's pid, or TUTTI_PEER_BUF_WITHDRAWN */
  uint32_t pad;
};
#define TUTTI_PEER_BUF_MAGIC 0x70756c6cu /* "pull" */
#define TUTTI_PEER_BUF_OFFERED 0u
#define TUTTI_PEER_BUF_WITHDRAWN 0xffffffffu

/* Direct access to the peer's memory (single copy), chosen by the transport
 * at setup (transport/cma.c): in place for a thread of this process, by
 * cross-memory attach for another process of the host. */
struct tutti_peer_mem_ops {
  /* The offered bytes as an address of this process, to read in place, or
   * NULL: copy them with `read`. */
  const void* (*local)(const struct tutti_peer_buf* b);
  /* Copies `bytes` at b->addr + off into `dst`, or from `src` there; 0 or
   * an errno (ESRCH: the process is gone; EPERM: the kernel refuses). */
  int (*read)(const struct tutti_peer_buf* b, uint64_t off, void* dst, size_t bytes);
  int (*write)(const struct tutti_peer_buf* b, uint64_t off, const void* src, size_t bytes);
};

struct tutti_conn {
  const struct tutti_conn_ops* ops;
  /* The peer's memory, where the transport reaches it; NULL where it does
   * not (the far end is a proxy thread). */
  const struct tutti_peer_mem_ops* mem;
  int peer;
  size_t slot_bytes;  /* the largest piece one slot carries */
  size_t queue_bytes; /* all slots together */
  /* Executor bookkeeping: operations use a connection strictly in the order
   * they were issued, which is the order peers issued the matching ones. */
  uint64_t ticket_next;
  uint64_t ticket_serving;
  const char* via; /* "SHM", "NET/Socket/eth0", ... for logs */
};

/* The communicator as transports see it. */
struct tutti_transport_comm {
  int rank;
  int nranks;
  const struct tutti_peer_info* peers;
  struct tutti_bootstrap* boot;
  const unsigned char* secret;        /* 16 bytes: names shared segments of this job */
  uint64_t comm_hash;                 /* distinguishes communicators of one job */
  size_t buffsize;                    /* bytes of queue per connection (NCCL_BUFFSIZE) */
  size_t board_slot_bytes;            /* data bytes of a board slot (0: no board) */
  struct tutti_conn** send;           /* [nranks]: filled by transports' setup */
  struct tutti_conn** recv;           /* [nranks] */
  struct tutti_doorbell* bell;        /* this rank's doorbell (points into shm when shm runs) */
  struct tutti_doorbell private_bell; /* the doorbell when no shared segment exists */
  struct tutti_doorbell** peer_bells; /* [nranks]: peers' doorbells when reachable, else NULL */
  struct tutti_board board;           /* filled by shm when it joins this host's ranks */
  void* priv[4];                      /* per-transport state */
  volatile int* abort_flag;           /* set by ncclCommAbort: teardown flushes nothing */
  /* Set (alike on every rank) when the network transport joined the pairs
   * the TCP transport would otherwise take. */
  int net_joined;
  /* TCP: slots of at most this many bytes the calling thread moves itself
   * (tune's "tcp.direct"; 0: the proxy moves every one). */
  size_t tcp_direct_bytes;
  /* Set by a transport whose connections read sockets on the caller's
   * thread: a waiting pass costs system calls (tune: shorter spinning). */
  int socket_passes;
};

struct tutti_transport {
  const char* name;
  int index; /* slot in tutti_transport_comm.priv */
  /* Can this transport join the two ranks? */
  int (*can_connect)(const struct tutti_transport_comm* tc, int peer);
  /* Collective over all ranks: connect every peer this transport can join
   * and that no earlier transport joined. */
  ncclResult_t (*setup)(struct tutti_transport_comm* tc);
  void (*teardown)(struct tutti_transport_comm* tc);
};

/* This rank's doorbell and its peers' (call/doorbell.h). */
static inline struct tutti_bells tutti_transport_bells(const struct tutti_transport_comm* tc) {
  struct tutti_bells b = {tc->bell, tc->peer_bells, tc->rank, tc->nranks};
  return b;
}

extern const struct tutti_transport tutti_transport_shm; /* transport/shm.c */
extern const struct tutti_transport tutti_transport_tcp; /* transport/tcp.c */
/* net/transport/nettr.c: a network's transport lives with the networks,
 * above this folder, since it is built from its queues and proxy. */
extern const struct tutti_transport tutti_transport_net;

/* Runs the setup of each of the `n` transports of `list`, in the list's
 * order of preference (a pair one joins is not offered to the next); fails
 * naming the first pair of ranks none can join. The list is the caller's
 * (api/init.c), so that this layer names no transport above it. */
ncclResult_t tutti_transport_setup(struct tutti_transport_comm* tc,
                                   const struct tutti_transport* const* list, int n);
/* Tears down the transports of `list`, the last first. */
void tutti_transport_teardown(struct tutti_transport_comm* tc,
                              const struct tutti_transport* const* list, int n);

#endif
