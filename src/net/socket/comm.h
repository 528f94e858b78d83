/* What the files of the socket network (net/socket/) share: the wire
 * formats, how a message is cut into chunks, a comm with its requests and
 * the queues its worker threads drain. Not for use outside src/net/. */
#ifndef TUTTI_NET_SOCKET_COMM_H
#define TUTTI_NET_SOCKET_COMM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "util/socket.h"

/* ---- the wire; every integer little-endian ---- */

#define TUTTI_SOCKNET_MAGIC 0x74656e6974747574ull /* "tuttinet" */
#define TUTTI_SOCKNET_VERSION 1
#define TUTTI_SOCKNET_MAX_SOCKS 64   /* data sockets of one connection, at most */
#define TUTTI_SOCKNET_MAX_THREADS 16 /* worker threads of one comm, at most */

/* What listen writes into the handle; `stage` is connect's progress, kept in
 * the connecting caller's copy of the handle between its calls (the plugin
 * contract: connect is called again with the same handle). */
struct tutti_socknet_handle {
  uint64_t magic;
  uint64_t nonce; /* random per listen: only its peers know it */
  unsigned char addr[TUTTI_SOCKET_ADDR_WIRE];
  struct tutti_socknet_connecting* stage;
};
_Static_assert(sizeof(struct tutti_socknet_handle) <= TUTTI_NET_HANDLE_BYTES, "handle too large");

/* The first bytes on every socket of a connection, from the connecting
 * side: they tie the sockets of one connection together and prove that the
 * peer read the handle. */
struct tutti_socknet_hello {
  uint64_t magic;
  uint64_t nonce;
  uint64_t conn;   /* the connection's random id */
  uint16_t index;  /* 0: the control socket; 1 ... nsocks: data sockets */
  uint16_t nsocks; /* data sockets */
  uint16_t version;
  uint16_t zero;
};

/* Before every message, on the control socket; an inline message's payload
 * follows it there, a striped one's goes in chunks over the data sockets. */
struct tutti_socknet_hdr {
  uint64_t size;
  int32_t tag;
  uint32_t flags; /* TUTTI_SOCKNET_STRIPED | TUTTI_SOCKNET_HDR_CHECK */
};
#define TUTTI_SOCKNET_STRIPED 0x1u
#define TUTTI_SOCKNET_HDR_CHECK 0x7e570000u /* high half: catches a stream out of step */

/* Messages up to this size travel whole on the control socket, moved by
 * the caller of isend / test: a hand-off to a thread costs more than
 * copying them (bench/net_bw.c). Larger ones are striped. */
#define TUTTI_SOCKNET_INLINE_MAX (64u << 10)
/* The smallest chunk of a striped message. */
#define TUTTI_SOCKNET_CHUNK_MIN (256u << 10)

/* A striped message of `size` bytes over `nsocks` data sockets: chunks of
 * this size (the last one shorter), at most one per socket, on consecutive
 * sockets from the connection's rotating start. Both ends compute it from
 * the size alone. */
static inline size_t tutti_socknet_chunk_bytes(size_t size, int nsocks) {
  size_t c = (size + (size_t)nsocks - 1) / (size_t)nsocks;
  c = (c + 4095) & ~(size_t)4095;
  return c < TUTTI_SOCKNET_CHUNK_MIN ? TUTTI_SOCKNET_CHUNK_MIN : c;
}

/* ---- a comm ---- */

/* Chunks queued on one data socket, at most: every buffer of 32 grouped
 * receives of TUTTI_NET_MAX_RECVS, one chunk each. */
#define TUTTI_SOCKNET_RING (TUTTI_NET_MAX_REQUESTS * TUTTI_NET_MAX_RECVS)

struct tutti_socknet_req;

struct tutti_socknet_item {
  char* ptr;
  size_t len;
  size_t off; /* moved so far; the worker's */
  struct tutti_socknet_req* req;
};

/* One data socket's chunks in order: the comm's caller fills it, the
 * socket's worker drains it. */
struct tutti_socknet_ring {
  uint32_t tail __attribute__((aligned(64))); /* the caller's */
  uint32_t head __attribute__((aligned(64))); /* the worker's */
  struct tutti_socknet_item items[TUTTI_SOCKNET_RING];
};

struct tutti_socknet_comm;

struct tutti_socknet_worker {
  struct tutti_socknet_comm* comm;
  pthread_t thread;
  int first, count; /* its data sockets */
  int efd;          /* an eventfd that wakes it */
  int sleeping;     /* set while it waits in poll: posters must kick efd */
};

struct tutti_socknet_req {
  struct tutti_socknet_comm* comm;
  int used;
  int count; /* buffers: 1 for a send */
  void* data[TUTTI_NET_MAX_RECVS];
  size_t size[TUTTI_NET_MAX_RECVS]; /* a send's size; a receive's room */
  int tag[TUTTI_NET_MAX_RECVS];
  size_t got[TUTTI_NET_MAX_RECVS]; /* a receive's incoming sizes */
  unsigned matched;                /* receive: buffers a message was matched to */
  int inline_left;                 /* receive: matched buffers whose inline payload is not in */
  size_t ctrl_off, ctrl_len;       /* send: header and inline payload written, in all */
  struct tutti_socknet_hdr hdr;    /* send: its header, little-endian */
  uint32_t chunks_posted;          /* the caller's */
  uint32_t chunks_done;            /* the workers' (atomic) */
};

struct tutti_socknet_comm {
  int send; /* 1: a send comm; 0: a receive comm */
  char peer[TUTTI_SOCKET_ADDR_STRLEN + 16];
  int ctrl;
  int nsocks;
  int data[TUTTI_SOCKNET_MAX_SOCKS];
  uint32_t next_sock; /* where the next striped message starts, alike on both ends */

  int nthreads;
  int started;                      /* workers run (started at the first striped message) */
  int stop;                         /* atomic: workers end */
  struct tutti_socknet_ring* rings; /* nsocks, allocated with the workers */
  struct tutti_socknet_worker workers[TUTTI_SOCKNET_MAX_THREADS];
  int owner[TUTTI_SOCKNET_MAX_SOCKS]; /* the worker of each data socket */

  struct tutti_socknet_req reqs[TUTTI_NET_MAX_REQUESTS];
  int inflight;
  /* Requests whose part on the control stream is not through, in order:
   * sends with bytes to write, receives with buffers to match. */
  struct tutti_socknet_req* fifo[TUTTI_NET_MAX_REQUESTS];
  int nfifo;

  /* Receive: where the control stream stands. */
  struct tutti_socknet_hdr rx_hdr;
  size_t rx_hdr_off;
  int rx_have;                      /* a whole header, not yet consumed */
  struct tutti_socknet_req* rx_req; /* its buffer, once matched */
  int rx_buf;
  size_t rx_off;
  int eof; /* the peer closed the control stream after a whole message */

  double next_check; /* the next heartbeat check (tutti_socket_now) */

  /* The first failure fails every request, pending or later. */
  pthread_mutex_t fail_lock;
  int failed;   /* atomic: 0, or the ncclResult_t */
  int reported; /* logged once through tutti_error */
  char fail_text[640];
};

/* fail.c: records the comm's first failure (later ones are dropped)
 * and wakes its workers; returns `code`. */
ncclResult_t tutti_socknet_fail(struct tutti_socknet_comm* c, ncclResult_t code, const char* fmt,
                                ...) __attribute__((format(printf, 3, 4)));
/* The sentence for a socket error `err` (0: the peer closed it). */
ncclResult_t tutti_socknet_fail_io(struct tutti_socknet_comm* c, int err, const char* doing);
/* ncclSuccess, or the failure as this thread's error (logged once per comm). */
ncclResult_t tutti_socknet_failed(struct tutti_socknet_comm* c);
void tutti_socknet_kick(struct tutti_socknet_worker* w);

/* worker.c */
ncclResult_t tutti_socknet_workers_start(struct tutti_socknet_comm* c);
/* Queues a chunk on data socket `sock` and wakes its worker. */
ncclResult_t tutti_socknet_post(struct tutti_socknet_comm* c, int sock, char* ptr, size_t len,
                                struct tutti_socknet_req* req);
void tutti_socknet_workers_stop(struct tutti_socknet_comm* c);

/* req.c */
ncclResult_t tutti_socknet_isend(struct tutti_socknet_comm* c, void* data, size_t size, int tag,
                                 void** request);
ncclResult_t tutti_socknet_irecv(struct tutti_socknet_comm* c, int count, void** data,
                                 const size_t* sizes, const int* tags, void** request);
ncclResult_t tutti_socknet_test(struct tutti_socknet_req* r, int* done, int* sizes);

/* comm.c */
/* NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD as this network uses
 * them: the data sockets a connection opens. */
int tutti_socknet_nsocks(void);
ncclResult_t tutti_socknet_comm_new(int send, int ctrl, const int* data, int nsocks,
                                    const char* peer, struct tutti_socknet_comm** out);
/* Every requests' sockets checked for a far host that stopped answering,
 * at most every 250 ms while requests are pending. */
void tutti_socknet_heartbeat(struct tutti_socknet_comm* c);
void tutti_socknet_comm_free(struct tutti_socknet_comm* c);

#endif
