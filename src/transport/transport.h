/* The transport table. A transport connects two ranks with a pair of
 * one-directional connections, each a queue of fixed-size slots: the sender
 * fills a slot and posts it, the receiver reads it in place and frees it.
 * The executor sees only struct tutti_conn; it never knows which transport
 * carries the bytes. */
#ifndef TUTTI_TRANSPORT_TRANSPORT_H
#define TUTTI_TRANSPORT_TRANSPORT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec/status.h" /* the executor's part of a doorbell, reserved by size */
#include "nccl.h"
#include "topo/peer.h"

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

/* A collective call as every rank of a communicator must make it: what
 * must agree (in or out of place need not), and its number among the
 * communicator's collectives (point-to-point calls are not counted: ranks
 * make different ones). exec/agree.c compares them. */
struct tutti_call {
  uint64_t seq; /* 1-based; 0: no record */
  uint64_t count;
  int32_t root;   /* -1: the collective has none */
  uint8_t coll;   /* enum tutti_coll */
  uint8_t type;   /* ncclDataType_t */
  uint8_t red;    /* TUTTI_CALL_RED_*, or the ncclRedOp_t built-in */
  uint8_t device; /* 1: device buffers, 0: host buffers */
};
#define TUTTI_CALL_RED_NONE 0xff      /* a collective without a reduction */
#define TUTTI_CALL_RED_PREMUL_HOST 16 /* ncclRedOpCreatePreMulSum, host scalar */
#define TUTTI_CALL_RED_PREMUL_DEV 17  /* ... device scalar */
#define TUTTI_CALL_HISTORY 8          /* records a rank keeps for peers behind it */

/* A rank's doorbell: where it sleeps when it has nothing to do, how others
 * wake it, and what its peers read of it. In shared memory when a
 * shared-memory transport exists, mapped by processes of one library
 * build: the layout may change from one build to the next, never the
 * reasons for its offsets. Three owners: the first cache line is the
 * transport's (waking, liveness); `status` is the host executor's
 * (exec/status.h), reserved here by size; the call and failure records are
 * written by the executors and also by the tcp proxy, which carries them to
 * network peers' stand-in bells (proxy_ctl.c), so their layout is the
 * transport's, as is the wire format that carries them (proxy.h). */
struct tutti_doorbell {
  uint32_t ring;     /* futex word: bumped by peers that post or free a slot */
  uint32_t sleeping; /* non-zero while the owner may sleep on `ring` */
  int32_t pid;
  uint32_t departed; /* set when the owner destroyed its communicator */
  /* A broken network connection, 0 while none: a cause and a rank in one
   * atomic word, written and read only through tutti_lost_* (below). */
  uint32_t lost;
  /* This doorbell's address in the owner's own address space, so that a
   * peer process can check that it may read the owner's memory (cma.c). */
  uint64_t self_addr;
  /* Non-zero when `calls` below shows the owner's calls: a shared bell, or
   * a network peer's stand-in that its proxy keeps up to date. */
  uint32_t shows_calls;
  /* The fields above are read by every peer that posts (`sleeping`) and
   * change rarely; the owner writes the ones below at every call, so they
   * live in the next cache line (in shared memory, where bells are 64-byte
   * aligned): a post does not miss on a line its owner just wrote. */
  uint8_t pad_[64 - 36];
  /* What the owner is doing, for peers that wait on it to report. */
  struct tutti_exec_status status;
  uint8_t pad2_[64 - sizeof(struct tutti_exec_status)];
  /* The owner's recent collective calls, [seq % TUTTI_CALL_HISTORY]: peers
   * compare them with their own (exec/agree.c). */
  struct tutti_call calls[TUTTI_CALL_HISTORY];
  /* Non-zero once a collective of the owner's communicator failed, and why:
   * every later call there fails with this cause, and peers that wait for
   * the owner stop with it too. */
  uint32_t failed;
  uint32_t failed_rank; /* who found the cause first */
  uint64_t failed_seq;  /* in which call (struct tutti_call.seq; 0: not in one) */
  uint32_t failed_wait; /* it gave up waiting (TUTTI_TIMEOUT): the others of that
                           call may still be waiting for their own diagnosis */
  char failed_why[480];
};

/* The doorbell's `lost` word: bits 24-31 an errno (0: closed without a
 * goodbye; ETIMEDOUT: the far host stopped answering; ETIME: no connection
 * broke, the owner gave up on a rank that made no progress for
 * TUTTI_TIMEOUT); bits 0-23 all ones (TUTTI_LOST_SELF) when this bell is a
 * private copy for a network peer whose own connection broke, else 1 + the
 * rank the owner lost its connection to (or gave up on). One word, so that
 * a compare-and-swap keeps the first cause and a goodbye carries it whole. */
#define TUTTI_LOST_SELF (-1) /* `who` of tutti_lost_make: this bell's own connection */
#define TUTTI_LOST_WHO_MASK 0xFFFFFFu

/* The word for errno `err` (one that does not fit 8 bits counts as EIO) and
 * rank `who`, or TUTTI_LOST_SELF. */
static inline uint32_t tutti_lost_make(int err, int who) {
  const uint32_t e = err > 0 && err < 256 ? (uint32_t)err : (err != 0 ? (uint32_t)EIO : 0);
  return (e << 24) | (who < 0 ? TUTTI_LOST_WHO_MASK : (uint32_t)who + 1);
}
static inline int tutti_lost_errno(uint32_t v) {
  return (int)(v >> 24);
}
/* Whether `v` marks the bell's own connection as broken. */
static inline int tutti_lost_is_self(uint32_t v) {
  return (v & TUTTI_LOST_WHO_MASK) == TUTTI_LOST_WHO_MASK;
}
/* The rank `v` names, or -1 (none, or the bell's own connection). */
static inline int tutti_lost_rank(uint32_t v) {
  const uint32_t who = v & TUTTI_LOST_WHO_MASK;
  return who == 0 || who == TUTTI_LOST_WHO_MASK ? -1 : (int)(who - 1);
}

/* The board: the ranks of one host post small contributions side by side
 * and read each other's in place, a header per rank instead of a queue per
 * pair (exec/board.c runs its steps). Two generations of one slot per rank:
 * slot (g, r) is a header (struct tutti_board_header, TUTTI_BOARD_HEADER
 * bytes) then `slot_bytes` of data, (g & 1) * nranks + r slots from base. */
struct tutti_board {
  char* base;        /* NULL: no board */
  size_t slot_bytes; /* data bytes of one slot */
  int nranks;        /* slots of one generation: the host's ranks */
};
#define TUTTI_BOARD_HEADER 64

struct tutti_board_header {
  uint64_t gen;   /* the generation the slot holds (0: none yet) */
  uint64_t bytes; /* its size, to catch ranks that called different counts */
  /* The poster's call: read with its data by every rank, so board
   * collectives compare every rank's call at no cost (exec/agree.c). */
  struct tutti_call call;
};

/* Rank `rank`'s slot of generation `gen`. */
static inline struct tutti_board_header* tutti_board_slot(const struct tutti_board* b, uint64_t gen,
                                                          int rank) {
  const size_t stride = TUTTI_BOARD_HEADER + b->slot_bytes;
  return (struct tutti_board_header*)(b->base +
                                      ((size_t)(gen & 1) * (size_t)b->nranks + (size_t)rank) *
                                          stride);
}

static inline void* tutti_board_data(struct tutti_board_header* h) {
  return (char*)h + TUTTI_BOARD_HEADER;
}

/* The generation a slot holds; its data, size and call may be read once it
 * is the one awaited (acquire). */
static inline uint64_t tutti_board_posted(const struct tutti_board_header* h) {
  return __atomic_load_n(&h->gen, __ATOMIC_ACQUIRE);
}

/* Publishes generation `gen` in a slot whose data, size and call are
 * written. Sequentially consistent, as the loads of the peers' doorbells'
 * `sleeping` that follow need: a peer about to sleep either sees this
 * generation or is woken (tutti_doorbell_ring). */
static inline void tutti_board_post(struct tutti_board_header* h, uint64_t gen) {
  __atomic_store_n(&h->gen, gen, __ATOMIC_SEQ_CST);
}

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

extern const struct tutti_transport tutti_transport_shm;
extern const struct tutti_transport tutti_transport_net;
extern const struct tutti_transport tutti_transport_tcp;

/* Runs every transport's setup in preference order; fails naming the first
 * pair of ranks no transport can join. */
ncclResult_t tutti_transport_setup(struct tutti_transport_comm* tc);
void tutti_transport_teardown(struct tutti_transport_comm* tc);

/* The owner's call records in its doorbell (struct tutti_call): put writes
 * one (the owner, or the proxy that stands in for a network peer), at every
 * call, so inline; get reads call `seq`, 1 when present, 0 when not made
 * yet or long gone. A record is written field by field, its number last
 * (release); a reader takes the number, the fields, then the number again,
 * and trusts the fields only when both match: a record is rewritten only
 * TUTTI_CALL_HISTORY calls later. */
static inline void tutti_doorbell_put_call(struct tutti_doorbell* bell,
                                           const struct tutti_call* c) {
  struct tutti_call* rec = &bell->calls[c->seq % TUTTI_CALL_HISTORY];
  /* Release stores keep the blanked number ahead of the fields; the last
   * store is sequentially consistent, so that of two ranks publishing and
   * then reading each other's records, at least one sees the other's. */
  __atomic_store_n(&rec->seq, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&rec->count, c->count, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->root, c->root, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->coll, c->coll, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->type, c->type, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->red, c->red, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->device, c->device, __ATOMIC_RELEASE);
  __atomic_store_n(&rec->seq, c->seq, __ATOMIC_SEQ_CST);
}

/* Reads the record of call `seq` into *out: 1 when it is there whole, 0
 * when its place holds another call or is being rewritten. */
static inline int tutti_doorbell_get_call(const struct tutti_doorbell* bell, uint64_t seq,
                                          struct tutti_call* out) {
  const struct tutti_call* rec = &bell->calls[seq % TUTTI_CALL_HISTORY];
  /* Sequentially consistent against the writer's last store; the fields
   * with acquire, so the second look at the number comes after them. */
  if (__atomic_load_n(&rec->seq, __ATOMIC_SEQ_CST) != seq) {
    return 0;
  }
  out->seq = seq;
  out->count = __atomic_load_n(&rec->count, __ATOMIC_ACQUIRE);
  out->root = __atomic_load_n(&rec->root, __ATOMIC_ACQUIRE);
  out->coll = __atomic_load_n(&rec->coll, __ATOMIC_ACQUIRE);
  out->type = __atomic_load_n(&rec->type, __ATOMIC_ACQUIRE);
  out->red = __atomic_load_n(&rec->red, __ATOMIC_ACQUIRE);
  out->device = __atomic_load_n(&rec->device, __ATOMIC_ACQUIRE);
  return __atomic_load_n(&rec->seq, __ATOMIC_RELAXED) == seq;
}

/* Whether two records describe the same call. */
static inline int tutti_call_same(const struct tutti_call* a, const struct tutti_call* b) {
  return a->seq == b->seq && a->count == b->count && a->root == b->root && a->coll == b->coll &&
         a->type == b->type && a->red == b->red && a->device == b->device;
}

/* Wakes the owner of `bell` if it may be asleep. */
void tutti_doorbell_ring(struct tutti_doorbell* bell);

#endif
